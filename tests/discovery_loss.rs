//! Discovery under loss on the in-process fabric: reads lost after the
//! transport's retries are asked again in later passes, and what an earlier
//! sweep knew stands in for what a sweep could not read, so a lossy fabric
//! converges, keeps its LIDs and wastes none. Every case prints its seed.

use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::mad::PortState;
use ibsm::program::SubnetManager;
use ibsm::sim::{FabricBuilder, Match, Rule, SharedFabric, SimDevice};
use ibsm::subnet::Read;
use ibsm::subnet::SweepReport;
use ibsm::topology::{NodeKind, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::Transport;

const IRREGULAR: &str = "random:switches=16,links=32,hosts=48,seed=5";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// An SM on the first host whose transport tries each SMP `attempts` times
/// with a short timeout, so losses reach discovery often.
fn sm(
    topo: &Topology,
    fabric: &SharedFabric,
    attempts: u32,
) -> SubnetManager<ibsm::transport::SmpClient<MadTransport>> {
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(fabric, host, 1).unwrap();
    let config =
        TxnConfig { window: 16, timeout: Duration::from_millis(20), retries: attempts - 1, ..TxnConfig::default() };
    let (transport, _unsolicited) = MadTransport::spawn(dev, config);
    SubnetManager::new(transport, SmConfig::default(), false)
}

/// Ports that get a LID: every switch's port 0 and every CA port.
fn lid_bearing(topo: &Topology) -> usize {
    topo.nodes.iter().map(|n| if n.kind == NodeKind::Switch { 1 } else { n.num_ports as usize }).sum()
}

/// Every cabled port of the fabric, as the simulator holds it.
fn not_active(topo: &Topology, fabric: &SharedFabric) -> Vec<PortRef> {
    let f = fabric.lock().unwrap();
    let mut out = Vec::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        for port in 1..=n.num_ports {
            let r = PortRef { node: ibsm::topology::NodeIdx(i), port };
            if topo.neighbor(r).is_some() && f.port_state(r).ok() != Some(PortState::Active) {
                out.push(r);
            }
        }
    }
    out
}

fn max_lid(topo: &Topology, fabric: &SharedFabric) -> u16 {
    let f = fabric.lock().unwrap();
    let mut max = 0;
    for (i, n) in topo.nodes.iter().enumerate() {
        let ports: Vec<u8> = if n.kind == NodeKind::Switch { vec![0] } else { (1..=n.num_ports).collect() };
        for port in ports {
            max = max.max(f.lid_of(PortRef { node: ibsm::topology::NodeIdx(i), port }).unwrap().0);
        }
    }
    max
}

/// Drops `p` of every MAD to or from every switch.
fn lossy_switches(topo: &Topology, fabric: &SharedFabric, p: f64) -> Vec<ibsm::sim::RuleHandle> {
    let mut f = fabric.lock().unwrap();
    topo.switches().map(|s| f.add_rule(Rule::drop_with(Match::any().node(s), p))).collect()
}

#[test]
fn ten_percent_loss_on_every_switch_converges_without_wasting_a_lid() {
    let topo = Topology::from_spec_or_file(IRREGULAR).unwrap();
    let ports = lid_bearing(&topo);
    for seed in [1, 2, 3] {
        let fabric = FabricBuilder::new(&topo).seed(seed).build_shared().unwrap();
        lossy_switches(&topo, &fabric, 0.10);
        // Two attempts per SMP: about one read in 30 to a switch is lost
        // to the transport, so discovery's own passes and memory matter.
        // (With one attempt discovery still loses nothing after its passes;
        // the Sets, which have no passes of their own, then take 5 sweeps.)
        let mut sm = sm(&topo, &fabric, 2);
        let rt = runtime();
        let mut reports: Vec<SweepReport> = Vec::new();
        for _ in 0..6 {
            let r = rt.block_on(sm.sweep()).unwrap();
            let up = r.subnet_up();
            reports.push(r);
            if up {
                break;
            }
        }
        let last = reports.last().unwrap();
        let sweeps = reports.len();
        let lost: usize = reports.iter().map(|r| r.subnet.missing.len()).sum();
        let retries = sm.driver().transport().stats().txn.totals().retries;
        println!(
            "seed {seed}: up after {sweeps} sweep(s), {retries} transport retries, {lost} reads lost after every pass, max LID {}",
            last.lids.max_lid.0
        );
        assert!(
            last.subnet_up(),
            "seed {seed}: not up after {sweeps} sweeps: {:?} {:?}",
            last.inactive,
            last.subnet.missing
        );
        assert!(sweeps <= 3, "seed {seed}: {sweeps} sweeps");
        assert!(retries > 0, "seed {seed}: the loss must have cost retries");
        assert_eq!(not_active(&topo, &fabric), vec![], "seed {seed}");
        assert_eq!(max_lid(&topo, &fabric) as usize, ports, "seed {seed}: a LID was wasted");
        assert_eq!(last.lids.max_lid.0 as usize, ports, "seed {seed}");
    }
}

#[test]
fn a_switch_silent_for_one_sweep_keeps_its_lids_and_is_not_reprogrammed() {
    let topo = Topology::from_spec_or_file(IRREGULAR).unwrap();
    let seed = 7;
    let fabric = FabricBuilder::new(&topo).seed(seed).build_shared().unwrap();
    let mut sm = sm(&topo, &fabric, 4);
    let rt = runtime();
    let first = rt.block_on(sm.sweep()).unwrap();
    assert!(first.subnet_up(), "seed {seed}: {:?}", first.inactive);
    let lids_before = first.lids.ranges.clone();

    // A switch away from the SM answers nothing for one sweep.
    let sm_switch = topo.neighbor(PortRef { node: topo.hosts().next().unwrap(), port: 1 }).unwrap().node;
    let silent = topo.switches().find(|&s| s != sm_switch).unwrap();
    let guid = topo.node(silent).node_guid;
    let rule = fabric.lock().unwrap().add_rule(Rule::drop_all(Match::any().node(silent)));
    let second = rt.block_on(sm.sweep()).unwrap();
    fabric.lock().unwrap().remove_rule(rule);

    let node = second.subnet.by_guid(guid).expect("the silent switch is kept");
    assert!(node.stale > 0, "seed {seed}: its data is marked stale");
    assert!(node.ports.iter().all(|p| p.info.is_none() || p.stale > 0));
    let missing: Vec<_> = second.subnet.missing.iter().filter(|m| m.guid == Some(guid)).collect();
    assert!(!missing.is_empty(), "seed {seed}: the lost reads are listed");
    assert!(missing.iter().all(|m| m.kept), "seed {seed}: {missing:?}");
    assert!(missing.iter().any(|m| matches!(m.what, Read::PortInfo { .. })));
    assert_eq!(second.subnet.nodes.len(), topo.nodes.len(), "seed {seed}: nothing vanished");
    assert_eq!(second.lids.ranges, lids_before, "seed {seed}: no LID moved");
    assert!(second.lids.changes.is_empty(), "seed {seed}: {:?}", second.lids.changes);
    assert_eq!(second.program.port_sets, 0, "seed {seed}: a known port was reprogrammed");
    assert!(second.subnet_up(), "seed {seed}: what is kept counts: {:?}", second.inactive);

    // It answers again: nothing stale is left, nothing changed.
    let third = rt.block_on(sm.sweep()).unwrap();
    assert!(third.subnet.missing.is_empty(), "seed {seed}: {:?}", third.subnet.missing);
    assert_eq!(third.subnet.stale_counts(), (0, 0));
    assert_eq!(third.lids.ranges, lids_before);
    assert_eq!(third.program.port_sets, 0);
    assert!(third.subnet_up());
}

#[test]
fn a_switch_never_heard_is_reported_missing_and_the_fabric_is_not_up() {
    let topo = Topology::from_spec_or_file(IRREGULAR).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(3).build_shared().unwrap();
    let sm_switch = topo.neighbor(PortRef { node: topo.hosts().next().unwrap(), port: 1 }).unwrap().node;
    let silent = topo.switches().find(|&s| s != sm_switch).unwrap();
    fabric.lock().unwrap().add_rule(Rule::drop_all(Match::any().node(silent)));
    let mut sm = sm(&topo, &fabric, 2);
    let report = runtime().block_on(sm.sweep()).unwrap();
    let unknown: Vec<_> = report.subnet.unknown().collect();
    assert!(!unknown.is_empty());
    assert!(
        unknown.iter().all(|m| matches!(m.what, Read::NodeInfo { from: Some(_) }) && m.guid.is_none()),
        "only probes toward it are lost: {unknown:?}"
    );
    assert!(unknown.iter().all(|m| !m.path.is_empty()));
    assert!(report.subnet.by_guid(topo.node(silent).node_guid).is_none());
    assert!(!report.subnet_up(), "a switch nobody could read means the subnet is not fully up");
}

/// A port known from an earlier sweep keeps only so long: a node gone
/// silent for good drops out after `MAX_STALE_SWEEPS` sweeps.
#[test]
fn stale_knowledge_expires() {
    use ibsm::sweep::discovery::MAX_STALE_SWEEPS;
    let topo = Topology::from_spec_or_file(IRREGULAR).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(4).build_shared().unwrap();
    let mut sm = sm(&topo, &fabric, 2);
    let rt = runtime();
    assert!(rt.block_on(sm.sweep()).unwrap().subnet_up());
    let host = topo.hosts().nth(7).unwrap();
    let guid = topo.node(host).node_guid;
    fabric.lock().unwrap().add_rule(Rule::drop_all(Match::any().node(host)));
    for sweep in 1..=MAX_STALE_SWEEPS + 1 {
        let r = rt.block_on(sm.sweep()).unwrap();
        let kept = r.subnet.by_guid(guid).is_some();
        assert_eq!(kept, sweep <= MAX_STALE_SWEEPS, "sweep {sweep} after it fell silent");
        if !kept {
            assert!(!r.subnet_up());
            assert!(r.subnet.unknown().any(|m| matches!(m.what, Read::NodeInfo { .. })));
        }
    }
}
