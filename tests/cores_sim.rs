//! The I/O-free sweep cores driven against the in-process fabric in virtual
//! time, on the test's thread (no tokio, no real clock), with a step cap:
//! what they find is judged by the topology, and the same seed gives the
//! same run to the SMP.

use std::time::Duration;

use ibsm::mad::{AttributeId, Method};
use ibsm::sim::{drive_core, FabricBuilder, Match, Rule, SharedFabric, SimDevice};
use ibsm::sweep::discovery::DiscoveryCore;
use ibsm::sweep::light::{LightFinding, LightSweepCore};
use ibsm::topology::{NodeKind, PortRef, Topology};
use ibsm::transport::txn::TxnConfig;

const TOPO: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";
const STEPS: usize = 100_000;

fn txn() -> TxnConfig {
    TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() }
}

fn lossy_fabric(topo: &Topology, seed: u64, loss: f64) -> SharedFabric {
    let fabric = FabricBuilder::new(topo).seed(seed).build_shared().unwrap();
    if loss > 0.0 {
        let mut f = fabric.lock().unwrap();
        for (i, n) in topo.nodes.iter().enumerate() {
            if n.kind == NodeKind::Switch {
                f.add_rule(Rule::drop_with(Match::any().node(ibsm::topology::NodeIdx(i)), loss));
            }
        }
    }
    fabric
}

fn discover(topo: &Topology, fabric: &SharedFabric) -> (ibsm::subnet::Subnet, ibsm::sim::Driven) {
    let mut dev = SimDevice::attach(fabric, topo.hosts().next().unwrap(), 1).unwrap();
    let mut core = DiscoveryCore::new(1, None);
    let driven = drive_core(&mut dev, &mut core, txn(), 0, STEPS).expect("discovery finishes within the step cap");
    (core.finish(), driven)
}

#[test]
fn discovery_finds_the_whole_fabric_in_virtual_time_under_loss() {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let clean = lossy_fabric(&topo, 3, 0.0);
    let (subnet, quiet) = discover(&topo, &clean);
    assert_eq!(subnet.nodes.len(), topo.nodes.len());
    assert!(subnet.problems.is_empty(), "{:?}", subnet.problems);

    // 10% of the MADs reaching every switch are lost, both ways.
    let lossy = lossy_fabric(&topo, 3, 0.10);
    let (subnet, driven) = discover(&topo, &lossy);
    assert_eq!(subnet.nodes.len(), topo.nodes.len(), "every node found despite the loss");
    assert!(subnet.missing.is_empty(), "no read lost for good: {:?}", subnet.missing);
    let links =
        subnet.ids().map(|id| subnet.node(id).ports.iter().filter(|p| p.remote.is_some()).count()).sum::<usize>();
    assert_eq!(links, 2 * topo.links.len(), "every cable seen from both ends");
    assert!(driven.elapsed > quiet.elapsed, "retries cost virtual time: {driven:?} vs {quiet:?}");
    let sent = lossy.lock().unwrap().smp_count(AttributeId::NodeInfo, Method::Get);
    assert!(sent > topo.links.len() as u64, "lost probes were sent again ({sent})");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let f = lossy_fabric(&topo, 9, 0.10);
            let (subnet, driven) = discover(&topo, &f);
            let counts = f.lock().unwrap().smp_counts().clone();
            (subnet.nodes.len(), driven, counts)
        })
        .collect();
    assert_eq!(runs[0].1, runs[1].1, "same steps, requests and virtual time");
    assert_eq!(runs[0].2, runs[1].2, "same SMPs at the fabric");
}

/// Brings the fabric up with a whole SM (which clears every switch's
/// PortStateChange) and returns its switches as a light sweep watches them.
fn brought_up(topo: &Topology, fabric: &SharedFabric) -> Vec<(ibsm::Guid, ibsm::mad::DrPath)> {
    let dev = SimDevice::attach(fabric, topo.hosts().next().unwrap(), 1).unwrap();
    let (transport, _unsolicited) = ibsm::transport::io_thread::MadTransport::spawn(dev, txn());
    let mut sm = ibsm::program::SubnetManager::new(transport, ibsm::config::SmConfig::default(), false);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let report = rt.block_on(sm.sweep()).expect("sweep");
    assert!(report.subnet_up());
    let subnet = &report.subnet;
    subnet.switches().map(|id| (subnet.node(id).guid(), subnet.node(id).path)).collect()
}

#[test]
fn a_fresh_fabric_reports_its_port_state_changes() {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let fabric = lossy_fabric(&topo, 4, 0.0);
    let (subnet, _) = discover(&topo, &fabric);
    let switches: Vec<_> = subnet.switches().map(|id| (subnet.node(id).guid(), subnet.node(id).path)).collect();
    let mut dev = SimDevice::attach(&fabric, topo.hosts().nth(1).unwrap(), 1).unwrap();
    let mut core = LightSweepCore::new(switches);
    drive_core(&mut dev, &mut core, txn(), 0, STEPS).unwrap();
    assert!(matches!(core.finding(), Some(LightFinding::PortStateChange { .. })), "{:?}", core.finding());
}

#[test]
fn the_light_sweep_core_names_the_switch_whose_port_changed() {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let fabric = lossy_fabric(&topo, 4, 0.0);
    let switches = brought_up(&topo, &fabric);
    let mut dev = SimDevice::attach(&fabric, topo.hosts().nth(1).unwrap(), 1).unwrap();
    // Nothing has changed since the bring-up.
    let mut core = LightSweepCore::new(switches.clone());
    let d = drive_core(&mut dev, &mut core, txn(), 0, STEPS).unwrap();
    assert_eq!(core.finding(), None);
    assert_eq!(d.requests, switches.len() as u64, "one SwitchInfo per switch");

    // A host cable bounces: its leaf raises PortStateChange.
    let victim = PortRef { node: topo.hosts().nth(6).unwrap(), port: 1 };
    let leaf = topo.neighbor(victim).expect("cabled");
    fabric.lock().unwrap().link_down(victim).unwrap();
    fabric.lock().unwrap().link_up(victim).unwrap();
    let mut core = LightSweepCore::new(switches);
    drive_core(&mut dev, &mut core, txn(), 0, STEPS).unwrap();
    match core.finding() {
        Some(LightFinding::PortStateChange { guid, .. }) => assert_eq!(guid, topo.node(leaf.node).node_guid),
        other => panic!("expected the leaf's port state change, got {other:?}"),
    }
}

#[test]
fn a_dead_switch_is_a_finding_not_a_hang() {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let fabric = lossy_fabric(&topo, 5, 0.0);
    let switches = brought_up(&topo, &fabric);
    let spine = topo.switches().last().unwrap();
    fabric.lock().unwrap().add_rule(Rule::drop_all(Match::any().node(spine)));
    let mut dev = SimDevice::attach(&fabric, topo.hosts().nth(1).unwrap(), 1).unwrap();
    let mut core = LightSweepCore::new(switches);
    let d = drive_core(&mut dev, &mut core, txn(), 0, STEPS).unwrap();
    assert!(matches!(core.finding(), Some(LightFinding::NoAnswer { guid, .. }) if guid == topo.node(spine).node_guid));
    assert!(d.elapsed >= Duration::from_millis(800), "four attempts of 200 ms in virtual time: {d:?}");
}
