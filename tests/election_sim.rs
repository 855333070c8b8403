//! Several whole SMs (runtime, election, sweeps) on one in-process fabric:
//! failover, handover, three SMs and loss, judged from the fabric's side and
//! by SubnGet(SMInfo) from a third port, as `sminfo` would.
//!
//! Real time with short election timers (poll 200 ms, 3 misses): the
//! runtimes' timers are tokio's while the fabric keeps its own virtual
//! clock, as in tests/service_sim.rs. The election logic itself is tested
//! in virtual time in src/election/tests.rs. No assertion depends on how
//! long anything took, beyond generous upper bounds on waits.

use std::collections::HashMap;
use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::{AttributeId, Method, PortState, SmInfoRepr, SmState};
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, Match, Rule, SharedFabric, SimDevice};
use ibsm::topology::{NodeIdx, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::SmpClient;
use ibsm::types::Lid;

const TOPO: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

/// Four attempts fit in one 200 ms poll interval, so under loss a poll
/// misses only when all four are lost, as with the defaults (2 s interval).
fn txn() -> TxnConfig {
    TxnConfig { window: 16, timeout: Duration::from_millis(40), retries: 3, ..TxnConfig::default() }
}

struct Sm {
    task: tokio::task::JoinHandle<()>,
    port: PortRef,
}

fn start_sm(fabric: &SharedFabric, node: NodeIdx, priority: u8) -> Sm {
    let dev = SimDevice::attach(fabric, node, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = MadTransport::spawn(dev, txn());
    let mut config = Config::default();
    config.sm.priority = priority;
    config.sm.sminfo_polling_timeout_ms = 200;
    config.sm.polling_retry_number = 3;
    config.sm.sweep_interval_s = 1;
    let options = RunOptions { persist_lids: false, ..RunOptions::default() };
    let task = tokio::spawn(async move {
        let _ = run(transport, unsolicited, config, options, std::future::pending::<()>()).await;
    });
    Sm { task, port: PortRef { node, port: 1 } }
}

/// Ends the SM as SIGKILL would: its transport and port go with it.
async fn kill(sm: Sm) {
    sm.task.abort();
    let _ = sm.task.await;
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

    async fn sm_info(&self, fabric: &SharedFabric, sm: PortRef) -> Option<SmInfoRepr> {
        let lid = fabric.lock().unwrap().lid_of(sm).ok().filter(|l| l.is_unicast())?;
        let smp = self.client.lid_get(lid, AttributeId::SmInfo, 0).await.ok()?;
        SmInfoRepr::parse_bytes(&smp.data).ok()
    }

    async fn state(&self, fabric: &SharedFabric, sm: PortRef) -> Option<SmState> {
        self.sm_info(fabric, sm).await.map(|i| i.sm_state)
    }
}

async fn wait_for(what: &str, limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> Duration {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if cond().await {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("waited {limit:?} for {what}");
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

/// Every cabled port ACTIVE, and every LID-bearing port's LID.
fn lids_if_up(topo: &Topology, fabric: &SharedFabric) -> Option<HashMap<PortRef, Lid>> {
    let f = fabric.lock().unwrap();
    let mut out = HashMap::new();
    for link in &topo.links {
        for end in [link.a, link.b] {
            if f.port_state(end).ok()? != PortState::Active {
                return None;
            }
            let lid_port = if topo.node(end.node).kind == ibsm::topology::NodeKind::Switch {
                PortRef { node: end.node, port: 0 }
            } else {
                end
            };
            out.insert(lid_port, f.lid_of(lid_port).ok()?);
        }
    }
    Some(out)
}

/// Sets other than SMInfo (polls and controls) the fabric has seen.
fn programming_sets(fabric: &SharedFabric) -> u64 {
    let f = fabric.lock().unwrap();
    f.smp_counts().iter().filter(|((a, m), _)| *m == Method::Set && *a != AttributeId::SmInfo).map(|(_, n)| n).sum()
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
    let (topo, fabric) = fabric();
    let h = hosts(&topo);
    let probe = Probe::new(&fabric, h[5]);
    let a = start_sm(&fabric, h[0], 5);
    wait_for("A brings the fabric up", Duration::from_secs(20), async || lids_if_up(&topo, &fabric).is_some()).await;
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
    let (topo, fabric) = fabric();
    let h = hosts(&topo);
    let probe = Probe::new(&fabric, h[5]);
    let a = start_sm(&fabric, h[0], 1);
    wait_for("A brings the fabric up", Duration::from_secs(20), async || lids_if_up(&topo, &fabric).is_some()).await;
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
    wait_for("ports point at B", Duration::from_secs(10), async || {
        master_sm_lids(&topo, &fabric) == vec![before[&b.port]]
    })
    .await;
    assert_eq!(lids_if_up(&topo, &fabric).expect("every port ACTIVE"), before);
    kill(a).await;
    kill(b).await;
}

#[tokio::test(flavor = "current_thread")]
async fn of_two_standbys_exactly_one_takes_over() {
    let (topo, fabric) = fabric();
    let h = hosts(&topo);
    let probe = Probe::new(&fabric, h[5]);
    let a = start_sm(&fabric, h[0], 9);
    wait_for("A brings the fabric up", Duration::from_secs(20), async || lids_if_up(&topo, &fabric).is_some()).await;
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
    wait_for("ports point at the winner", Duration::from_secs(10), async || {
        master_sm_lids(&topo, &fabric) == vec![before[&winner]]
    })
    .await;
    assert_eq!(lids_if_up(&topo, &fabric).expect("every port ACTIVE"), before);
    kill(b).await;
    kill(c).await;
}

#[tokio::test(flavor = "current_thread")]
async fn ten_percent_loss_makes_no_false_takeover() {
    let (topo, fabric) = fabric();
    let h = hosts(&topo);
    let probe = Probe::new(&fabric, h[5]);
    let a = start_sm(&fabric, h[0], 5);
    wait_for("A brings the fabric up", Duration::from_secs(20), async || lids_if_up(&topo, &fabric).is_some()).await;
    let b = start_sm(&fabric, h[15], 1);
    let bp = b.port;
    wait_for("B standby", Duration::from_secs(20), async || probe.state(&fabric, bp).await == Some(SmState::Standby))
        .await;
    let polls = fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get);
    // Every MAD anywhere, requests and answers, is lost one time in ten.
    let rule = fabric.lock().unwrap().add_rule(Rule::drop_with(Match::any(), 0.10));
    let sets = programming_sets(&fabric);
    tokio::time::sleep(Duration::from_secs(6)).await;
    fabric.lock().unwrap().remove_rule(rule);
    let polled = fabric.lock().unwrap().smp_count(AttributeId::SmInfo, Method::Get) - polls;
    assert!(polled >= 20, "only {polled} polls: the test proves nothing");
    assert_eq!(probe.state(&fabric, bp).await, Some(SmState::Standby), "false takeover under loss");
    assert_eq!(probe.state(&fabric, a.port).await, Some(SmState::Master));
    assert_eq!(programming_sets(&fabric), sets, "the standby programmed");
    kill(a).await;
    kill(b).await;
}
