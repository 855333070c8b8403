//! Flap damping and the trap rate limit, on the in-process fabric with the
//! whole service running (traps travel, so the clock is paced to real
//! time):
//! - a cable that goes down `flap_downs` times within the window is held
//!   down: reported in `/status` and the metrics, not routed over, its
//!   ports left in INIT while it is up, and brought back when the hold
//!   ends;
//! - a port that floods the SM with traps is cut to its rate, the excess
//!   counted, and the SA keeps answering meanwhile.

use std::time::Duration;

use ibsm::config::Config;
use ibsm::datagram::{Datagram, MadAddress};
use ibsm::mad::notice::{producer_type, NoticeType, TrapDetails};
use ibsm::mad::{AttributeId, Method, NoticeRepr, PortState, SmpRepr};
use ibsm::runtime::metrics::Metrics;
use ibsm::runtime::status::StatusBoard;
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice};
use ibsm::topology::{Link, NodeKind, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::sa_client::SaClient;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::MadDevice;

const FAT_TREE: &str = "fattree2:radix=12,leaves=6,spines=3,hosts=6";

struct Service {
    topo: Topology,
    fabric: SharedFabric,
    status: StatusBoard,
    metrics: Metrics,
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<Result<ibsm::subnet::SweepReport, ibsm::runtime::RunError>>,
}

fn txn() -> TxnConfig {
    TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() }
}

/// The SM's transport: the trap rate limit is the transport's.
fn sm_txn(config: &Config) -> TxnConfig {
    TxnConfig { trap_rate_limit: config.transport.trap_rate_limit, ..txn() }
}

/// The service on the first host of a small fat tree, up with every
/// cabled port ACTIVE, with `config` (no light sweeps: only traps start a
/// reaction).
async fn start(mut config: Config) -> Service {
    let topo = Topology::from_spec_or_file(FAT_TREE).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(4).build_shared().unwrap();
    fabric.lock().unwrap().pace_to_real_time();
    let dev = SimDevice::attach(&fabric, topo.hosts().next().unwrap(), 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = MadTransport::spawn(dev, sm_txn(&config));
    config.sm.sweep_interval_s = 0;
    let status = StatusBoard::new();
    let metrics = Metrics::new();
    let options = RunOptions {
        persist_lids: false,
        status: status.clone(),
        metrics: Some(metrics.clone()),
        ..RunOptions::default()
    };
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(run(transport, unsolicited, config, options, async {
        let _ = stop_rx.await;
    }));
    let s = Service { topo, fabric, status, metrics, stop, handle };
    wait(&s, "bring-up", |s| s.all_active(&[]) && s.status.status().heavy_sweep.is_some()).await;
    // The sweeps that follow bring-up settle (PortStateChange raised by the
    // SM's own activations).
    tokio::time::sleep(Duration::from_millis(500)).await;
    s
}

async fn wait(s: &Service, what: &str, cond: impl Fn(&Service) -> bool) {
    for _ in 0..600 {
        if cond(s) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("waited 30 s for {what}: {:?}", s.status.status().reaction);
}

impl Service {
    fn all_active(&self, except: &[PortRef]) -> bool {
        let f = self.fabric.lock().unwrap();
        self.topo
            .links
            .iter()
            .flat_map(|l| [l.a, l.b])
            .filter(|r| !except.contains(r))
            .all(|r| f.port_state(r).ok() == Some(PortState::Active))
    }

    fn state(&self, r: PortRef) -> Option<PortState> {
        self.fabric.lock().unwrap().port_state(r).ok()
    }

    fn reactions(&self) -> u64 {
        self.status.status().reaction.map_or(0, |r| r.count)
    }

    fn heavy_sweeps(&self) -> u64 {
        self.status.status().heavy_sweep.map_or(0, |h| h.count)
    }

    fn trunk(&self) -> Link {
        let kind = |r: PortRef| self.topo.node(r.node).kind;
        *self.topo.links.iter().find(|l| kind(l.a) == NodeKind::Switch && kind(l.b) == NodeKind::Switch).unwrap()
    }

    /// Every host's LID is delivered from every switch over ACTIVE links
    /// (the fabric's trace fails on a hop across a link that is not).
    fn check_routes(&self, what: &str) {
        let f = self.fabric.lock().unwrap();
        for sw in self.topo.switches() {
            for h in self.topo.hosts() {
                let lid = f.lid_of(PortRef { node: h, port: 1 }).unwrap();
                let path = f.trace_lid_route(sw, lid).unwrap_or_else(|e| panic!("{what}: LID {lid} from {sw:?}: {e}"));
                assert_eq!(path.last().map(|p| p.node), Some(h), "{what}");
            }
        }
    }

    fn metric(&self, name: &str) -> f64 {
        let text = self.metrics.render();
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
            .unwrap_or_else(|| panic!("no {name} in the metrics"))
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        let report = self.handle.await.unwrap().expect("service ends cleanly");
        assert!(report.subnet_up());
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_flapping_cable_is_held_down_then_brought_back() {
    let mut config = Config::default();
    config.sm.flap_downs = 3;
    config.sm.flap_window_s = 60;
    config.sm.flap_hold_s = 3;
    let s = start(config).await;
    let trunk = s.trunk();
    let heavy = s.heavy_sweeps();

    // Two bounces: routed around and back each time.
    for bounce in 1..=2 {
        let n = s.reactions();
        s.fabric.lock().unwrap().link_down(trunk.a).unwrap();
        wait(&s, "the reaction to the cable down", |s| s.reactions() > n).await;
        s.check_routes(&format!("bounce {bounce}, down"));
        s.fabric.lock().unwrap().link_up(trunk.a).unwrap();
        wait(&s, "the cable back in service", |s| s.all_active(&[])).await;
        assert!(s.status.status().held_cables.is_empty(), "bounce {bounce}: nothing held yet");
    }

    // The third down puts it on hold.
    let n = s.reactions();
    s.fabric.lock().unwrap().link_down(trunk.a).unwrap();
    wait(&s, "the hold", |s| s.reactions() > n && !s.status.status().held_cables.is_empty()).await;
    let held = s.status.status().held_cables;
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].downs, 3, "{held:?}");
    assert_eq!(s.metric("ibsm_cables_held"), 1.0);
    assert_eq!(s.metric("ibsm_cable_holds_total"), 1.0);

    // It comes back up while held: its ports stay in INIT and no route
    // crosses it; everything else is ACTIVE and routed.
    let n = s.reactions();
    s.fabric.lock().unwrap().link_up(trunk.a).unwrap();
    wait(&s, "the reaction to the held cable coming up", |s| s.reactions() > n).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(s.state(trunk.a), Some(PortState::Init), "held: not armed");
    assert_eq!(s.state(trunk.b), Some(PortState::Init), "held: not armed");
    assert!(s.all_active(&[trunk.a, trunk.b]));
    s.check_routes("held");

    // The hold ends: the cable is looked at again and brought up.
    wait(&s, "the cable back after its hold", |s| s.all_active(&[])).await;
    assert!(s.status.status().held_cables.is_empty());
    assert_eq!(s.metric("ibsm_cables_held"), 0.0);
    s.check_routes("after the hold");
    assert_eq!(s.heavy_sweeps(), heavy, "no heavy sweep: reactions alone");
    s.stop().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_trap_flood_from_one_port_is_cut_to_its_rate_and_the_sa_keeps_answering() {
    let mut config = Config::default();
    config.transport.trap_rate_limit = 100;
    let s = start(config).await;
    let hosts: Vec<_> = s.topo.hosts().collect();
    let (rogue_host, client_host) = (hosts[2], hosts[4]);
    let sm_lid = s.fabric.lock().unwrap().lid_of(PortRef { node: hosts[0], port: 1 }).unwrap();
    let rogue_lid = s.fabric.lock().unwrap().lid_of(PortRef { node: rogue_host, port: 1 }).unwrap();
    let target_lid = s.fabric.lock().unwrap().lid_of(PortRef { node: client_host, port: 1 }).unwrap();
    let heavy = s.heavy_sweeps();

    // A rogue host sends 10,000 trap 128s naming itself in about a second.
    let mut rogue = SimDevice::attach(&s.fabric, rogue_host, 1).unwrap();
    let notice = NoticeRepr::generic_trap(
        NoticeType::Urgent,
        producer_type::CA,
        rogue_lid,
        &TrapDetails::LinkStateChanged { switch_lid: rogue_lid },
    )
    .unwrap();
    let mut data = [0u8; 64];
    notice.emit(&mut ibsm::mad::Notice::new_checked(&mut data[..]).unwrap());
    let trap = SmpRepr::lid_request(Method::Trap, AttributeId::Notice, 0, 0, data);
    let dgram = Datagram { addr: MadAddress::smi(sm_lid), mad: trap.to_bytes().to_vec() };
    let flood = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        for _ in 0..200 {
            for _ in 0..50 {
                rogue.send(&dgram).unwrap();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        started.elapsed()
    });

    // Meanwhile a client asks the SA for paths; every answer comes back.
    let client = SimDevice::attach(&s.fabric, client_host, 1).unwrap();
    let (transport, _unsolicited) = MadTransport::spawn(client, txn());
    let sa = SaClient::new(transport).unwrap();
    let mut answered = 0;
    for _ in 0..50 {
        sa.path_record(target_lid, sm_lid).await.expect("the SA answers through the flood");
        answered += 1;
    }
    let sent_in = flood.join().unwrap();
    // Let the owner drain what is queued.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let dropped = s.metric("ibsm_traps_dropped_total");
    let taken = s.metric("ibsm_traps_total{number=\"128\"}");
    eprintln!("10,000 traps sent in {sent_in:?}: {taken} taken, {dropped} dropped; {answered} PathRecords answered");
    assert!(dropped + taken >= 10_000.0 * 0.99, "every trap either taken or dropped: {taken} + {dropped}");
    // A full bucket (100) plus the refill over the flood's span.
    let span = sent_in.as_secs_f64() + 1.5;
    assert!(taken <= 100.0 + 100.0 * span + 1.0, "{taken} taken in {span:.2} s");
    assert!(dropped >= 10_000.0 - 100.0 - 100.0 * span - 1.0, "{dropped} dropped");
    assert_eq!(s.heavy_sweeps(), heavy, "a flood of trap 128s starts no heavy sweep");
    assert!(s.all_active(&[]));
    s.stop().await;
}

/// Bounces quicker than the SM looks (down and up again before the
/// reaction reads the port: a retrained link) count too, and a hold that
/// starts while the cable is up takes it out at once.
#[tokio::test(flavor = "current_thread")]
async fn quick_bounces_are_held_too() {
    let mut config = Config::default();
    config.sm.flap_downs = 3;
    config.sm.flap_window_s = 60;
    config.sm.flap_hold_s = 30;
    let s = start(config).await;
    let trunk = s.trunk();
    for bounce in 1..=3 {
        let n = s.reactions();
        {
            let mut f = s.fabric.lock().unwrap();
            f.link_down(trunk.a).unwrap();
            f.link_up(trunk.a).unwrap();
        }
        wait(&s, "the reaction to the bounce", |s| s.reactions() > n).await;
        if bounce < 3 {
            wait(&s, "the cable back in service", |s| s.all_active(&[])).await;
        }
    }
    wait(&s, "the hold", |s| !s.status.status().held_cables.is_empty()).await;
    // Held while up: left in INIT, routed around.
    wait(&s, "the held cable's ports left INIT", |s| {
        s.state(trunk.a) == Some(PortState::Init) && s.state(trunk.b) == Some(PortState::Init)
    })
    .await;
    assert!(s.all_active(&[trunk.a, trunk.b]));
    s.check_routes("held after quick bounces");
    s.stop().await;
}

/// A host that sends trap 128 in a switch's name is not taken at its
/// word: no reaction at the switch it names; it is logged, counted as an
/// issuer mismatch, and a light sweep looks instead (and finds nothing).
#[tokio::test(flavor = "current_thread")]
async fn a_trap_in_another_nodes_name_is_not_taken_at_its_word() {
    let s = start(Config::default()).await;
    let hosts: Vec<_> = s.topo.hosts().collect();
    let rogue_host = hosts[3];
    let leaf = s.topo.neighbor(PortRef { node: hosts[20], port: 1 }).unwrap().node;
    let sm_lid = s.fabric.lock().unwrap().lid_of(PortRef { node: hosts[0], port: 1 }).unwrap();
    let leaf_lid = s.fabric.lock().unwrap().lid_of(PortRef { node: leaf, port: 0 }).unwrap();
    let reactions = s.reactions();
    let light = s.metric("ibsm_sweeps_total{kind=\"light\"}");
    let notice = NoticeRepr::generic_trap(
        NoticeType::Urgent,
        producer_type::SWITCH,
        leaf_lid,
        &TrapDetails::LinkStateChanged { switch_lid: leaf_lid },
    )
    .unwrap();
    let mut data = [0u8; 64];
    notice.emit(&mut ibsm::mad::Notice::new_checked(&mut data[..]).unwrap());
    let trap = SmpRepr::lid_request(Method::Trap, AttributeId::Notice, 0, 0, data);
    let mut rogue = SimDevice::attach(&s.fabric, rogue_host, 1).unwrap();
    rogue.send(&Datagram { addr: MadAddress::smi(sm_lid), mad: trap.to_bytes().to_vec() }).unwrap();
    wait(&s, "the mismatch counted", |s| s.metric("ibsm_traps_unmatched_total{why=\"issuer_mismatch\"}") == 1.0).await;
    wait(&s, "a light sweep", |s| s.metric("ibsm_sweeps_total{kind=\"light\"}") > light).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(s.reactions(), reactions, "no reaction at the switch the trap named");
    assert_eq!(s.metric("ibsm_traps_unmatched_total{why=\"unknown_lid\"}"), 0.0);
    // The switch's own trap, for a real change, is taken: a reaction.
    s.fabric.lock().unwrap().link_down(PortRef { node: hosts[20], port: 1 }).unwrap();
    wait(&s, "a reaction to the real trap", |s| s.reactions() > reactions).await;
    assert_eq!(s.metric("ibsm_traps_unmatched_total{why=\"issuer_mismatch\"}"), 1.0);
    s.fabric.lock().unwrap().link_up(PortRef { node: hosts[20], port: 1 }).unwrap();
    wait(&s, "every port ACTIVE again", |s| s.all_active(&[])).await;
    s.stop().await;
}
