//! Several whole SMs (runtime, election, sweeps) on one in-process fabric:
//! failover, handover, three SMs and loss, judged from the fabric's side and
//! by SubnGet(SMInfo) from a third port, as `sminfo` would.
//!
//! Real time with short election timers (poll 500 ms, 3 misses): the
//! runtimes' timers are tokio's while the fabric keeps its own virtual
//! clock, as in tests/service_sim.rs. The election logic itself is tested
//! in virtual time in src/election/tests.rs. No assertion depends on how
//! long anything took, beyond generous upper bounds on waits.

mod sm_support;

use std::collections::HashMap;
use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::{AttributeId, Method, PortState, SmInfoRepr, SmState};
use ibsm::runtime::RunOptions;
use ibsm::sim::{FabricBuilder, Match, Rule, SharedFabric, SimDevice};
use ibsm::topology::{NodeIdx, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::SmpClient;
use ibsm::types::Lid;
use sm_support::{kill, lids_if_up, programming_sets, spawn_sm, Logs, Sm, TOPO};

/// Four attempts fit in one 500 ms poll interval, so under loss a poll
/// misses only when all four are lost, as with the defaults (2 s interval).
fn txn() -> TxnConfig {
    TxnConfig { window: 16, timeout: Duration::from_millis(100), retries: 3, ..TxnConfig::default() }
}

fn start_sm(fabric: &SharedFabric, node: NodeIdx, priority: u8) -> Sm {
    let dev = SimDevice::attach(fabric, node, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = MadTransport::spawn(dev, txn());
    let mut config = Config::default();
    config.sm.priority = priority;
    config.sm.sminfo_polling_timeout_ms = 500;
    config.sm.polling_retry_number = 3;
    config.sm.sweep_interval_s = 1;
    let options = RunOptions { persist_lids: false, ..RunOptions::default() };
    spawn_sm(transport, unsolicited, config, options, PortRef { node, port: 1 })
}

/// A port for asking SMs who they are, like `sminfo`.
struct Probe {
    client: SmpClient<MadTransport>,
    _unsolicited: tokio::sync::mpsc::Receiver<ibsm::transport::Datagram>,
}

impl Probe {
    fn new(fabric: &SharedFabric, node: NodeIdx) -> Probe {
        let dev = SimDevice::attach(fabric, node, 1).unwrap();
        let (t, unsolicited) = MadTransport::spawn(dev, txn());
        Probe { client: SmpClient::new(t), _unsolicited: unsolicited }
    }

    /// Asks again when the question itself timed out (a loaded machine can
    /// starve the threads past four attempts); an SM that is gone answers
    /// at once with a status, which is not asked again.
    async fn sm_info(&self, fabric: &SharedFabric, sm: PortRef) -> Option<SmInfoRepr> {
        let lid = fabric.lock().unwrap().lid_of(sm).ok().filter(|l| l.is_unicast())?;
        for _ in 0..3 {
            match self.client.lid_get(lid, AttributeId::SmInfo, 0).await {
                Ok(smp) => return SmInfoRepr::parse_bytes(&smp.data).ok(),
                Err(ibsm::transport::SmpError::Transport(ibsm::transport::TransportError::Timeout { .. })) => {}
                Err(_) => return None,
            }
        }
        None
    }

    async fn state(&self, fabric: &SharedFabric, sm: PortRef) -> Option<SmState> {
        self.sm_info(fabric, sm).await.map(|i| i.sm_state)
    }
}

async fn wait_for(what: &str, limit: Duration, cond: impl AsyncFnMut() -> bool) -> Duration {
    sm_support::wait_every(Duration::from_millis(20), what, limit, cond).await
}

fn fabric() -> (Topology, SharedFabric) {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(11).build_shared().unwrap();
    // Several SMs, each on its own I/O thread: virtual time follows real time.
    fabric.lock().unwrap().pace_to_real_time();
    (topo, fabric)
}

fn hosts(topo: &Topology) -> Vec<NodeIdx> {
    topo.hosts().collect()
}

/// A fresh fabric, a probe port on host 5, and SM A (at `priority`, on
/// host 0) once it has brought every port up.
async fn master_up(priority: u8) -> (Topology, SharedFabric, Vec<NodeIdx>, Probe, Sm) {
    let (topo, fabric) = fabric();
    let h = hosts(&topo);
    let probe = Probe::new(&fabric, h[5]);
    let a = start_sm(&fabric, h[0], priority);
    wait_for("A brings the fabric up", Duration::from_secs(20), async || lids_if_up(&topo, &fabric).is_some()).await;
    (topo, fabric, h, probe, a)
}

/// Every end port comes to point at the new master, every port is ACTIVE
/// and no LID moved from `before`.
async fn ports_follow(topo: &Topology, fabric: &SharedFabric, before: &HashMap<PortRef, Lid>, master: PortRef) {
    wait_for("ports point at the new master", Duration::from_secs(10), async || {
        master_sm_lids(topo, fabric) == vec![before[&master]]
    })
    .await;
    assert_eq!(&lids_if_up(topo, fabric).expect("every port ACTIVE"), before, "no LID moved");
}

fn master_sm_lids(topo: &Topology, fabric: &SharedFabric) -> Vec<Lid> {
    let f = fabric.lock().unwrap();
    let mut v: Vec<Lid> =
        topo.hosts().map(|h| f.port_info(PortRef { node: h, port: 1 }).unwrap().master_sm_lid).collect();
    v.sort();
    v.dedup();
    v
}

#[tokio::test(flavor = "current_thread")]
async fn the_standby_sends_nothing_then_takes_over_when_the_master_dies() {
    let (topo, fabric, h, probe, a) = master_up(5).await;
    let b = start_sm(&fabric, h[15], 1);
    let (a_port, b_port) = (a.port, b.port);
    wait_for("B standby", Duration::from_secs(20), async || {
        probe.state(&fabric, b_port).await == Some(SmState::Standby)
    })
    .await;
    assert_eq!(probe.state(&fabric, a_port).await, Some(SmState::Master));
    // Quiet: the standby only polls; nobody programs anything.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sets = programming_sets(&fabric);
    let polls = fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(programming_sets(&fabric), sets, "a Set was sent on a quiet fabric with a standby");
    assert!(fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get) > polls + 3, "the standby polls");

    let before = lids_if_up(&topo, &fabric).expect("up");
    kill(a).await;
    let took = wait_for("B master", Duration::from_secs(20), async || {
        probe.state(&fabric, b_port).await == Some(SmState::Master)
    })
    .await;
    wait_for("every port ACTIVE under B", Duration::from_secs(10), async || {
        master_sm_lids(&topo, &fabric) == vec![before[&b_port]]
    })
    .await;
    eprintln!("failover: B master {took:?} after the kill");
    assert_eq!(lids_if_up(&topo, &fabric).expect("every port still ACTIVE"), before, "no LID moved");
}

#[tokio::test(flavor = "current_thread")]
async fn a_higher_priority_sm_is_handed_the_subnet_with_no_gap() {
    let (topo, fabric, h, probe, a) = master_up(1).await;
    let before = lids_if_up(&topo, &fabric).unwrap();
    let b = start_sm(&fabric, h[15], 9);
    // Sample both SMs until B is master: at every sample one of them is.
    let start = tokio::time::Instant::now();
    loop {
        let (sa, sb) = (probe.state(&fabric, a.port).await, probe.state(&fabric, b.port).await);
        if sb == Some(SmState::Master) && sa == Some(SmState::Standby) {
            break;
        }
        assert!(
            sa == Some(SmState::Master) || sb == Some(SmState::Master),
            "no master at {:?}: A {sa:?}, B {sb:?}",
            start.elapsed()
        );
        assert!(start.elapsed() < Duration::from_secs(20), "no handover: A {sa:?}, B {sb:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!("handover done {:?} after B started", start.elapsed());
    ports_follow(&topo, &fabric, &before, b.port).await;
    kill(a).await;
    kill(b).await;
}

#[tokio::test(flavor = "current_thread")]
async fn of_two_standbys_exactly_one_takes_over() {
    let (topo, fabric, h, probe, a) = master_up(9).await;
    let b = start_sm(&fabric, h[10], 3);
    let c = start_sm(&fabric, h[15], 3);
    let (bp, cp) = (b.port, c.port);
    wait_for("B and C standby", Duration::from_secs(20), async || {
        probe.state(&fabric, bp).await == Some(SmState::Standby)
            && probe.state(&fabric, cp).await == Some(SmState::Standby)
    })
    .await;
    let before = lids_if_up(&topo, &fabric).unwrap();
    kill(a).await;
    // Equal priority: the lower port GUID wins.
    let gb = probe.sm_info(&fabric, bp).await.unwrap().guid;
    let gc = probe.sm_info(&fabric, cp).await.unwrap().guid;
    let (winner, loser) = if gb < gc { (bp, cp) } else { (cp, bp) };
    wait_for("one new master", Duration::from_secs(20), async || {
        probe.state(&fabric, winner).await == Some(SmState::Master)
    })
    .await;
    // It stays that way: the other watches it and never takes over.
    for _ in 0..50 {
        assert_eq!(probe.state(&fabric, loser).await, Some(SmState::Standby));
        assert_eq!(probe.state(&fabric, winner).await, Some(SmState::Master));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    ports_follow(&topo, &fabric, &before, winner).await;
    kill(b).await;
    kill(c).await;
}

#[tokio::test(flavor = "current_thread")]
async fn ten_percent_loss_makes_no_false_takeover() {
    let (logs, _guard) = Logs::capture();
    let (_topo, fabric, h, probe, a) = master_up(5).await;
    let b = start_sm(&fabric, h[15], 1);
    let bp = b.port;
    wait_for("B standby", Duration::from_secs(20), async || probe.state(&fabric, bp).await == Some(SmState::Standby))
        .await;
    let polls = fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get);
    // Every MAD anywhere, requests and answers, is lost one time in ten.
    let rule = fabric.lock().unwrap().add_rule(Rule::drop_with(Match::any(), 0.10));
    let sets = programming_sets(&fabric);
    tokio::time::sleep(Duration::from_secs(10)).await;
    fabric.lock().unwrap().remove_rule(rule);
    let polled = fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get) - polls;
    assert!(polled >= 15, "only {polled} polls: the test proves nothing");
    assert_eq!(probe.state(&fabric, bp).await, Some(SmState::Standby), "false takeover under loss");
    // Not even for a moment (it used to leave and find the master again).
    let left = logs.lines_with(&["from=STANDBY", "to=DISCOVERING"]);
    assert!(left.is_empty(), "the standby left STANDBY under loss: {left:?}");
    assert_eq!(probe.state(&fabric, a.port).await, Some(SmState::Master));
    assert_eq!(programming_sets(&fabric), sets, "the standby programmed");
    kill(a).await;
    kill(b).await;
}

// ---- Bad input (issue 8): a standby that loses its port, rogue SMInfo
// Sets, who is shown the SM_Key, an SM that flaps. ----

use ibsm::mad::{SmControl, SmpRepr};
use ibsm::runtime::dispatch::sm_info_data;
use ibsm::transport::{Datagram, MadAddress, SmpError, Transport};
use ibsm::types::Guid;

/// The default SM_Key (config `sm_key`, as OpenSM's).
const SM_KEY: u64 = 1;
const WRONG_KEY: u64 = 0x99;
/// IBA 13.4.7: invalid value in an attribute or modifier field.
const INVALID_FIELD: u16 = 0x001c;

impl Probe {
    fn port_guid(&self) -> Guid {
        self.client.transport().local_port().port_guid
    }

    fn lid(&self, fabric: &SharedFabric, node: NodeIdx) -> Lid {
        fabric.lock().unwrap().lid_of(PortRef { node, port: 1 }).unwrap()
    }

    /// One LID-routed SMInfo request with this M_Key and payload, and the
    /// whole answer, status and data, whatever its status.
    async fn raw_sm_info(&self, lid: Lid, method: Method, amod: u32, m_key: u64, data: [u8; 64]) -> Option<SmpRepr> {
        let smp = SmpRepr::lid_request(method, AttributeId::SmInfo, amod, m_key, data);
        let dgram = Datagram { addr: MadAddress::smi(lid), mad: smp.to_bytes().to_vec() };
        let resp = self.client.transport().request(dgram).await.ok()?;
        let r = SmpRepr::parse_bytes(&resp.mad).ok()?;
        assert_eq!(r.header.method, Method::GetResp, "an SMInfo request answered with {:?}", r.header.method);
        Some(r)
    }
}

fn lid_of(fabric: &SharedFabric, port: PortRef) -> Lid {
    fabric.lock().unwrap().lid_of(port).unwrap()
}

/// Ports whose LID is no longer the one in `before` (a port that lost its
/// LID to a link going down is not counted: the LID comes back with it).
fn moved_lids(fabric: &SharedFabric, before: &HashMap<PortRef, Lid>) -> Vec<(PortRef, Lid, Lid)> {
    let f = fabric.lock().unwrap();
    let mut out: Vec<_> = before
        .iter()
        .filter_map(|(&p, &was)| {
            let now = f.lid_of(p).ok()?;
            (now.0 != 0 && now != was).then_some((p, was, now))
        })
        .collect();
    out.sort_by_key(|(p, _, _)| (p.node.0, p.port));
    out
}

#[tokio::test(flavor = "current_thread")]
async fn a_standby_whose_own_port_goes_down_stays_standby_and_the_master_stays() {
    let (logs, _guard) = Logs::capture();
    let (topo, fabric, h, probe, a) = master_up(5).await;
    let b = start_sm(&fabric, h[15], 1);
    let (ap, bp) = (a.port, b.port);
    wait_for("B standby", Duration::from_secs(20), async || probe.state(&fabric, bp).await == Some(SmState::Standby))
        .await;
    let before = lids_if_up(&topo, &fabric).unwrap();
    let a_lid = before[&ap];
    assert_eq!(master_sm_lids(&topo, &fabric), vec![a_lid]);

    fabric.lock().unwrap().link_down(bp).unwrap();
    // Over twice the detection time ((500 ms + 125 ms jitter) x (3 misses
    // + 1) = 2.5 s; B checks its own port at its third miss, 1.5-1.9 s in):
    // every poll of B's fails, and B must find its own port down rather
    // than declare A dead and crown itself master of a one-port subnet.
    let down_for = Duration::from_secs(6);
    let start = tokio::time::Instant::now();
    let mut samples = 0;
    while start.elapsed() < down_for {
        assert_eq!(fabric.lock().unwrap().port_state(bp).unwrap(), PortState::Down, "the link came back by itself");
        assert_eq!(
            probe.state(&fabric, ap).await,
            Some(SmState::Master),
            "A not MASTER {:?} after B's link went down",
            start.elapsed()
        );
        // B's own port included: a B that took charge of itself would point
        // it at itself (and give it a LID of its own choosing).
        assert_eq!(master_sm_lids(&topo, &fabric), vec![a_lid], "MasterSMLID moved while B's link was down");
        assert_eq!(moved_lids(&fabric, &before), vec![], "a LID moved while B's link was down");
        samples += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(samples > 20, "only {samples} samples");
    let said = logs.lines_with(&["our own port is down", "staying STANDBY"]);
    assert!(!said.is_empty(), "B never said its own port is down");
    let lost = logs.lines_with(&["SM state", "missed"]);
    assert!(lost.is_empty(), "B declared A lost while its own link was down: {lost:?}");

    fabric.lock().unwrap().link_up(bp).unwrap();
    // Back: A brings B's port to ACTIVE again with the same LID; B is
    // STANDBY, A MASTER, and at no sample did B say MASTER.
    let start = tokio::time::Instant::now();
    loop {
        let (sa, sb) = (probe.state(&fabric, ap).await, probe.state(&fabric, bp).await);
        assert_eq!(sa, Some(SmState::Master), "A not MASTER {:?} after B's link came back", start.elapsed());
        assert_ne!(sb, Some(SmState::Master), "B MASTER {:?} after its link came back", start.elapsed());
        if sb == Some(SmState::Standby) && lids_if_up(&topo, &fabric).is_some() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the fabric did not come back: B {sb:?}, B's port {:?}",
            fabric.lock().unwrap().port_state(bp)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("own port down: {samples} samples over {down_for:?}; back {:?} after link_up", start.elapsed());
    assert_eq!(lids_if_up(&topo, &fabric).expect("every port ACTIVE"), before, "a LID moved");
    wait_for("ports point at A", Duration::from_secs(5), async || master_sm_lids(&topo, &fabric) == vec![a_lid]).await;
    // And it stays so (B polls A again; a second of polls would show a takeover).
    for _ in 0..25 {
        assert_eq!(probe.state(&fabric, bp).await, Some(SmState::Standby));
        assert_eq!(probe.state(&fabric, ap).await, Some(SmState::Master));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    kill(a).await;
    kill(b).await;
}

#[tokio::test(flavor = "current_thread")]
async fn rogue_sm_info_sets_leave_the_master_master() {
    let (logs, _guard) = Logs::capture();
    let (topo, fabric, h, probe, a) = master_up(5).await;
    let ap = a.port;
    wait_for("A master", Duration::from_secs(5), async || probe.state(&fabric, ap).await == Some(SmState::Master))
        .await;
    let before = lids_if_up(&topo, &fabric).unwrap();
    let a_lid = before[&ap];
    let a_guid = probe.sm_info(&fabric, ap).await.unwrap().guid;
    let (me, my_lid) = (probe.port_guid(), probe.lid(&fabric, h[5]));

    // Wrong SM_Key, from an SM that would outrank A (priority 15, MASTER):
    // only the key stands between it and the subnet.
    let rogue = SmInfoRepr { guid: me, sm_key: WRONG_KEY, act_count: 0, priority: 15, sm_state: SmState::Master };
    for control in [SmControl::Disable, SmControl::Standby, SmControl::Handover, SmControl::Discover] {
        let err = probe
            .client
            .lid_set(a_lid, AttributeId::SmInfo, control.into(), sm_info_data(&rogue))
            .await
            .expect_err("a SubnSet(SMInfo) with the wrong SM_Key was accepted");
        assert!(matches!(err, SmpError::Status { status: INVALID_FIELD, .. }), "{control:?}: {err}");
        assert!(err.to_string().contains("0x001c"), "{control:?}: the error does not name the status: {err}");
        // The same Set again, to see the whole answer: it shows A as it
        // is, without the key.
        let answer = probe
            .raw_sm_info(a_lid, Method::Set, control.into(), 0, sm_info_data(&rogue))
            .await
            .expect("the Set is answered");
        assert_eq!(answer.header.status, INVALID_FIELD, "{control:?}");
        let shown = SmInfoRepr::parse_bytes(&answer.data).unwrap();
        assert_eq!(shown.sm_key, 0, "{control:?}: the answer to a wrong key shows the SM_Key");
        assert_eq!((shown.guid, shown.sm_state), (a_guid, SmState::Master), "{control:?}");
        assert_eq!(probe.state(&fabric, ap).await, Some(SmState::Master), "A obeyed {control:?} with a wrong key");
        let said =
            logs.lines_with(&["wrong SM_Key", &format!("{control:?}"), &me.to_string(), &format!("LID {my_lid}")]);
        assert!(!said.is_empty(), "no log line names the sender of the wrong-key {control:?}");
    }

    // The right key from an SM that does not outrank A (priority 0): a
    // master obeys only an SM that outranks it.
    let weak = SmInfoRepr { guid: me, sm_key: SM_KEY, act_count: 0, priority: 0, sm_state: SmState::Master };
    for control in [SmControl::Disable, SmControl::Standby, SmControl::Discover, SmControl::Handover] {
        match probe.client.lid_set(a_lid, AttributeId::SmInfo, control.into(), sm_info_data(&weak)).await {
            // Answered with A's SMInfo as it stands (status 0 today).
            Ok(smp) => {
                let shown = SmInfoRepr::parse_bytes(&smp.data).unwrap();
                assert_eq!((shown.guid, shown.sm_state), (a_guid, SmState::Master), "{control:?}");
            }
            // Or refused with a status that the error names.
            Err(e @ SmpError::Status { .. }) => assert!(e.to_string().contains("status 0x"), "{e}"),
            Err(e) => panic!("{control:?} from a lower-priority SM not answered: {e}"),
        }
        assert_eq!(probe.state(&fabric, ap).await, Some(SmState::Master), "A obeyed {control:?} from a weaker SM");
    }
    let said = logs.lines_with(&["Disable", &me.to_string(), "outranks us"]);
    assert!(!said.is_empty(), "no log line names the weaker SM whose DISABLE was refused");

    // Two sweep intervals later A is still master and still programs alone.
    for _ in 0..50 {
        assert_eq!(probe.state(&fabric, ap).await, Some(SmState::Master));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(master_sm_lids(&topo, &fabric), vec![a_lid]);
    assert_eq!(lids_if_up(&topo, &fabric).expect("every port ACTIVE"), before);
    kill(a).await;
}

#[tokio::test(flavor = "current_thread")]
async fn sm_info_shows_the_sm_key_only_to_a_requester_with_the_m_key_or_the_sm_key() {
    let (_topo, fabric, _h, probe, a) = master_up(5).await;
    let ap = a.port;
    wait_for("A master", Duration::from_secs(5), async || probe.state(&fabric, ap).await == Some(SmState::Master))
        .await;
    let a_lid = lid_of(&fabric, ap);
    let me = probe.port_guid();
    // The rule in runtime `Inbound::SmInfoGet`: shown when the payload
    // carries the SM_Key, or the header carries the fabric's M_Key (0 by
    // default: OpenSM's rule since 3.3.21). A payload is an SMInfo with a
    // GUID (ours, NOTACTIVE: it takes no part in the election).
    let payload = |key: Option<u64>| match key {
        None => [0u8; 64],
        Some(k) => {
            sm_info_data(&SmInfoRepr { guid: me, sm_key: k, act_count: 0, priority: 0, sm_state: SmState::NotActive })
        }
    };
    let cases: [(u64, Option<u64>, bool, &str); 6] = [
        (0, None, true, "the fabric's M_Key, no payload (sminfo, OpenSM's polls)"),
        (0, Some(WRONG_KEY), true, "the fabric's M_Key with a wrong SM_Key"),
        (0, Some(SM_KEY), true, "the fabric's M_Key and the SM_Key"),
        (0x55, None, false, "a wrong M_Key, no payload"),
        (0x55, Some(WRONG_KEY), false, "a wrong M_Key and a wrong SM_Key"),
        (0x55, Some(SM_KEY), true, "a wrong M_Key but the SM_Key"),
    ];
    for (m_key, key, shown, what) in cases {
        let answer = probe.raw_sm_info(a_lid, Method::Get, 0, m_key, payload(key)).await.expect("the Get is answered");
        assert_eq!(answer.header.status, 0, "{what}");
        let info = SmInfoRepr::parse_bytes(&answer.data).unwrap();
        assert_eq!((info.sm_state, info.priority), (SmState::Master, 5), "{what}");
        let expected = if shown { SM_KEY } else { 0 };
        assert_eq!(info.sm_key, expected, "{what}: SM_Key {}", if shown { "hidden" } else { "shown" });
    }
    // The M_Key rule through SmpClient, as `sminfo` asks.
    let mut wrong = probe.client.clone();
    wrong.set_m_key(0x55);
    let smp = wrong.lid_get(a_lid, AttributeId::SmInfo, 0).await.unwrap();
    assert_eq!(SmInfoRepr::parse_bytes(&smp.data).unwrap().sm_key, 0);
    assert_eq!(probe.sm_info(&fabric, ap).await.unwrap().sm_key, SM_KEY);
    assert_eq!(probe.state(&fabric, ap).await, Some(SmState::Master));
    kill(a).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_flapping_higher_priority_sm_never_makes_two_masters() {
    let (topo, fabric, h, probe, a) = master_up(5).await;
    let ap = a.port;
    wait_for("A master", Duration::from_secs(5), async || probe.state(&fabric, ap).await == Some(SmState::Master))
        .await;
    let before = lids_if_up(&topo, &fabric).unwrap();
    let a_lid = before[&ap];
    let bp = PortRef { node: h[15], port: 1 };

    // B (priority 9, so A hands it the subnet when it sees it) starts and
    // dies every 1.5 s for 10 s; both are sampled every ~20 ms.
    //
    // The bound on two MASTER answers: in a handover B says MASTER from the
    // moment it takes the HANDOVER until A reads B's answer to it and steps
    // down: one MAD's way back through the in-process fabric and a task
    // wake on this same thread, far under the 20 ms between samples. So a
    // handover can show in at most one sample (the probe asks A, then B),
    // never in two in a row; two in a row are two masters for 20 ms or
    // more. A dead B answers nothing (its port then has no SM agent).
    let flap = Duration::from_millis(1500);
    let start = tokio::time::Instant::now();
    let mut flapper: Option<Sm> = None;
    let mut next_toggle = Duration::ZERO;
    let (mut samples, mut both, mut run, mut worst_run, mut none_run, mut worst_none) =
        (0u32, 0u32, 0u32, 0u32, 0u32, 0u32);
    let (mut starts, mut b_master_samples) = (0u32, 0u32);
    // Since when neither says MASTER, and the longest such gap.
    let (mut masterless_since, mut longest_gap): (Option<tokio::time::Instant>, Duration) = (None, Duration::ZERO);
    let mut moved = Vec::new();
    while start.elapsed() < Duration::from_secs(10) {
        if start.elapsed() >= next_toggle {
            next_toggle += flap;
            match flapper.take() {
                Some(sm) => kill(sm).await,
                None => {
                    flapper = Some(start_sm(&fabric, h[15], 9));
                    starts += 1;
                }
            }
        }
        let (sa, sb) = (probe.state(&fabric, ap).await, probe.state(&fabric, bp).await);
        samples += 1;
        if sb == Some(SmState::Master) {
            b_master_samples += 1;
        }
        if sa == Some(SmState::Master) && sb == Some(SmState::Master) {
            both += 1;
            run += 1;
            worst_run = worst_run.max(run);
        } else {
            run = 0;
        }
        if sa != Some(SmState::Master) && sb != Some(SmState::Master) {
            none_run += 1;
            worst_none = worst_none.max(none_run);
            let since = *masterless_since.get_or_insert_with(tokio::time::Instant::now);
            longest_gap = longest_gap.max(since.elapsed());
        } else {
            none_run = 0;
            masterless_since = None;
        }
        if moved.is_empty() {
            moved = moved_lids(&fabric, &before);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if let Some(sm) = flapper.take() {
        kill(sm).await;
    }
    eprintln!(
        "flapping: {starts} starts, {samples} samples, B MASTER in {b_master_samples}, both MASTER in {both} \
         (longest run {worst_run}), longest run with no master {worst_none} samples ({longest_gap:?})"
    );
    assert!(samples > 100, "only {samples} samples in 10 s");
    assert!(worst_run <= 1, "A and B both MASTER in {worst_run} samples in a row ({both} in all)");
    assert_eq!(moved, vec![], "a LID moved while B flapped");
    // A B killed while master leaves the subnet without one until A misses
    // its polls: at most the detection time ((500 ms + 125 ms) x 4 = 2.5 s;
    // 1.5 s is typical) and a discovery. Anything much longer is an SM that
    // sat out a flap it should not have.
    assert!(longest_gap < Duration::from_secs(4), "no master for {longest_gap:?}");

    // B dead: A is master again, every port ACTIVE, pointing at A, no LID moved.
    let took = wait_for("A master again", Duration::from_secs(20), async || {
        probe.state(&fabric, ap).await == Some(SmState::Master)
    })
    .await;
    wait_for("ports point at A", Duration::from_secs(10), async || {
        master_sm_lids(&topo, &fabric) == vec![a_lid] && lids_if_up(&topo, &fabric).is_some()
    })
    .await;
    eprintln!("flapping: A master {took:?} after B's last death");
    assert_eq!(lids_if_up(&topo, &fabric).expect("every port ACTIVE"), before, "a LID moved");
    for _ in 0..25 {
        assert_eq!(probe.state(&fabric, ap).await, Some(SmState::Master));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    kill(a).await;
}
