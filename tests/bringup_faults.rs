//! Bring-up under faults on the in-process fabric: lost SMPs, devices that
//! answer nonsense, nodes that stop answering, a corrupt guid2lid. Each case
//! reads like an incident: what broke, what the SM reported, what still
//! came up.

use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::mad::{AttributeId, PortState};
use ibsm::program::SubnetManager;
use ibsm::sim::{FabricBuilder, Match, Rule, SharedFabric, SimDevice};
use ibsm::subnet::SweepReport;
use ibsm::topology::{NodeIdx, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::Transport;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn sm_on_first_host(
    topo: &Topology,
    fabric: &SharedFabric,
    config: SmConfig,
    persist: bool,
) -> SubnetManager<ibsm::transport::SmpClient<MadTransport>> {
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(fabric, host, 1).unwrap();
    let (transport, _unsolicited) = MadTransport::spawn(
        dev,
        TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() },
    );
    SubnetManager::new(transport, config, persist)
}

fn fat_tree() -> Topology {
    Topology::from_spec_or_file("fattree2:radix=8,leaves=4,spines=2,hosts=4").unwrap()
}

fn node(topo: &Topology, name_prefix: &str, nth: usize) -> NodeIdx {
    let mut matching = topo.nodes.iter().enumerate().filter(|(_, n)| n.name.starts_with(name_prefix));
    NodeIdx(matching.nth(nth).unwrap_or_else(|| panic!("no node {name_prefix}#{nth}")).0)
}

fn active_hosts(topo: &Topology, fabric: &SharedFabric) -> usize {
    let f = fabric.lock().unwrap();
    topo.hosts().filter(|&h| f.port_state(PortRef { node: h, port: 1 }).ok() == Some(PortState::Active)).count()
}

#[test]
fn lost_smps_are_retried_and_the_fabric_comes_up() {
    let topo = fat_tree();
    for seed in [1, 2, 3] {
        let fabric = FabricBuilder::new(&topo).seed(seed).build_shared().unwrap();
        // 5% of every MAD, both ways, vanishes.
        fabric.lock().unwrap().add_rule(Rule::drop_with(Match::any(), 0.05));
        let mut sm = sm_on_first_host(&topo, &fabric, SmConfig::default(), false);
        let rt = runtime();
        let mut report: Option<SweepReport> = None;
        for _ in 0..3 {
            let r = rt.block_on(sm.sweep()).unwrap();
            let up = r.subnet_up();
            report = Some(r);
            if up {
                break;
            }
        }
        let report = report.unwrap();
        assert!(report.subnet_up(), "seed {seed}: {:?} {:?}", report.inactive, report.problems());
        let retries = sm.driver().transport().stats().txn.totals().retries;
        assert!(retries > 0, "seed {seed}: drops must have cost retries");
        assert_eq!(active_hosts(&topo, &fabric), topo.hosts().count());
    }
}

#[test]
fn switch_reporting_no_forwarding_table_is_left_alone() {
    let topo = fat_tree();
    let fabric = FabricBuilder::new(&topo).seed(1).build_shared().unwrap();
    let bad = node(&topo, "spine", 1);
    let bad_guid = topo.node(bad).node_guid;
    // SwitchInfo.LinearFDBCap (bytes 0-1) reads 0.
    fabric.lock().unwrap().corrupt_answers(bad, AttributeId::SwitchInfo, 0, &[0, 0]);
    let mut sm = sm_on_first_host(&topo, &fabric, SmConfig::default(), false);
    let report = runtime().block_on(sm.sweep()).unwrap();
    let p = report.problems().iter().find(|p| p.guid == Some(bad_guid)).expect("the bad switch is reported");
    assert!(p.what.to_string().contains("LinearFDBCap"), "{p}");
    assert!(!p.path.is_empty(), "the report names the path");
    assert!(report.subnet_up(), "the rest comes up: {:?}", report.inactive);
    assert_eq!(active_hosts(&topo, &fabric), topo.hosts().count());
    // Routes avoid the bad spine: every LID is delivered from every leaf.
    let f = fabric.lock().unwrap();
    for leaf in topo.switches().filter(|&s| s != bad && topo.node(s).name.starts_with("leaf")) {
        for h in topo.hosts() {
            let lid = f.lid_of(PortRef { node: h, port: 1 }).unwrap();
            let path = f.trace_lid_route(leaf, lid).unwrap();
            assert!(path.iter().all(|p| p.node != bad), "a route crosses the quarantined switch");
        }
    }
    // Its links were left as they were.
    let spine_port = PortRef { node: bad, port: 1 };
    assert_eq!(f.port_state(spine_port).unwrap(), PortState::Init);
}

#[test]
fn node_claiming_too_many_ports_is_left_alone() {
    let topo = fat_tree();
    let fabric = FabricBuilder::new(&topo).seed(1).build_shared().unwrap();
    let bad = topo.hosts().nth(5).unwrap();
    // NodeInfo.NumPorts (byte 3) reads 255, beyond the 254 the spec allows.
    fabric.lock().unwrap().corrupt_answers(bad, AttributeId::NodeInfo, 3, &[255]);
    let mut sm = sm_on_first_host(&topo, &fabric, SmConfig::default(), false);
    let report = runtime().block_on(sm.sweep()).unwrap();
    let p = report.problems().iter().find(|p| p.guid == Some(topo.node(bad).node_guid)).expect("reported");
    assert!(p.what.to_string().contains("NumPorts"), "{p}");
    assert!(report.subnet_up());
    assert_eq!(active_hosts(&topo, &fabric), topo.hosts().count() - 1);
}

#[test]
fn node_that_stops_answering_is_reported_and_the_rest_comes_up() {
    let topo = fat_tree();
    let fabric = FabricBuilder::new(&topo).seed(1).build_shared().unwrap();
    let dead = topo.hosts().nth(9).unwrap();
    // It answered NodeInfo when probed, then nothing more.
    fabric.lock().unwrap().add_rule(Rule::drop_all(Match::any().node(dead).attribute(AttributeId::PortInfo)));
    let mut sm = sm_on_first_host(&topo, &fabric, SmConfig::default(), false);
    let report = runtime().block_on(sm.sweep()).unwrap();
    let guid = topo.node(dead).node_guid;
    let p = report.problems().iter().find(|p| p.guid == Some(guid)).expect("the silent node is reported");
    assert!(p.what.to_string().contains("PortInfo"), "{p}");
    assert!(p.to_string().contains(&format!("{guid}")), "{p}");
    assert_eq!(active_hosts(&topo, &fabric), topo.hosts().count() - 1, "every other host is up");
    assert!(!report.subnet_up(), "a cabled port that never came up means the subnet is not fully up");
}

#[test]
fn corrupt_guid2lid_is_a_warning_and_port_lids_are_kept() {
    let topo = fat_tree();
    let fabric = FabricBuilder::new(&topo).seed(1).build_shared().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = SmConfig { cache_dir: dir.path().to_path_buf(), ..SmConfig::default() };
    let mut sm = sm_on_first_host(&topo, &fabric, config.clone(), true);
    assert!(runtime().block_on(sm.sweep()).unwrap().subnet_up());
    drop(sm);
    let lids: Vec<_> = {
        let f = fabric.lock().unwrap();
        topo.hosts().map(|h| f.lid_of(PortRef { node: h, port: 1 }).unwrap()).collect()
    };
    std::fs::write(dir.path().join("guid2lid"), b"\x00\xffgarbage\n0xzz 1 2\n").unwrap();
    let mut sm = sm_on_first_host(&topo, &fabric, config, true);
    let report = runtime().block_on(sm.sweep()).unwrap();
    assert!(report.subnet_up());
    let after: Vec<_> = {
        let f = fabric.lock().unwrap();
        topo.hosts().map(|h| f.lid_of(PortRef { node: h, port: 1 }).unwrap()).collect()
    };
    assert_eq!(lids, after, "a corrupt file must not renumber the fabric");
    let rewritten = std::fs::read_to_string(dir.path().join("guid2lid")).unwrap();
    assert!(rewritten.lines().filter(|l| l.starts_with("0x")).count() >= topo.hosts().count());
}

#[test]
fn second_sweep_sends_no_sets() {
    let topo = fat_tree();
    let fabric = FabricBuilder::new(&topo).seed(1).build_shared().unwrap();
    let mut sm = sm_on_first_host(&topo, &fabric, SmConfig::default(), false);
    let rt = runtime();
    assert!(rt.block_on(sm.sweep()).unwrap().subnet_up());
    let second = rt.block_on(sm.sweep()).unwrap();
    assert!(second.subnet_up());
    assert_eq!(second.program.lft_blocks, 0, "unchanged tables are not rewritten");
    assert_eq!(second.program.port_sets, 0, "ports holding what the SM wants are left alone");
    assert_eq!(second.program.pkey_sets, 0);
}
