//! End-to-end bring-up on the in-process fabric: every topology family comes
//! up with every cabled port ACTIVE, unique LIDs, and forwarding tables that
//! deliver every LID from every switch (checked by the simulator's tracer,
//! not by the SM's own view).

use std::collections::HashMap;
use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::program::SubnetManager;
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice};
use ibsm::subnet::SweepReport;
use ibsm::topology::{NodeKind, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::types::Lid;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn txn() -> TxnConfig {
    TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() }
}

/// Runs one sweep with the SM on the first host's port 1.
fn bring_up(topo: &Topology, fabric: &SharedFabric) -> SweepReport {
    let host = topo.hosts().next().expect("a host for the SM");
    let dev = SimDevice::attach(fabric, host, 1).unwrap();
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn());
    let mut sm = SubnetManager::new(transport, SmConfig::default(), false);
    runtime().block_on(sm.sweep()).expect("sweep")
}

/// Judges the fabric from the simulator's side only.
fn assert_fabric_up(topo: &Topology, fabric: &SharedFabric) {
    let f = fabric.lock().unwrap();
    let mut owners: HashMap<Lid, PortRef> = HashMap::new();
    for link in &topo.links {
        for end in [link.a, link.b] {
            let state = f.port_state(end).unwrap();
            assert_eq!(
                state,
                ibsm::mad::PortState::Active,
                "{} port {} is {state:?}",
                topo.node(end.node).name,
                end.port
            );
        }
    }
    let mut lid_ports = Vec::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        let idx = ibsm::topology::NodeIdx(i);
        match node.kind {
            NodeKind::Switch => lid_ports.push(PortRef { node: idx, port: 0 }),
            _ => {
                for p in 1..=node.num_ports {
                    let r = PortRef { node: idx, port: p };
                    if topo.neighbor(r).is_some() {
                        lid_ports.push(r);
                    }
                }
            }
        }
    }
    for &r in &lid_ports {
        let lid = f.lid_of(r).unwrap();
        assert!(lid.is_unicast(), "{} port {} has LID {lid}", topo.node(r.node).name, r.port);
        if let Some(prev) = owners.insert(lid, r) {
            panic!("LID {lid} held by both {prev:?} and {r:?}");
        }
    }
    for sw in topo.switches() {
        for &lid in owners.keys() {
            let path = f
                .trace_lid_route(sw, lid)
                .unwrap_or_else(|e| panic!("switch {} cannot deliver LID {lid}: {e}", topo.node(sw).name));
            let end = path.last().copied().expect("a path ends at the owner");
            assert_eq!(Some(&end), owners.get(&lid), "LID {lid} from {} ends elsewhere", topo.node(sw).name);
        }
    }
}

fn check(spec: &str) {
    let topo = Topology::from_spec_or_file(spec).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(7).build_shared().unwrap();
    let report = bring_up(&topo, &fabric);
    assert!(report.subnet_up(), "{spec}: not up: {:?} problems {:?}", report.inactive, report.problems());
    assert!(report.problems().is_empty(), "{spec}: {:?}", report.problems());
    assert_fabric_up(&topo, &fabric);
}

#[test]
fn back_to_back_hosts() {
    check("b2b");
}

#[test]
fn two_level_fat_tree() {
    check("fattree2:radix=8");
}

#[test]
fn two_level_fat_tree_with_parallel_links() {
    check("fattree2:radix=8,parallel=2");
}

#[test]
fn three_level_fat_tree() {
    check("fattree3:radix=8,pods=4");
}

#[test]
fn meshes_and_tori() {
    check("mesh2d:3x3");
    check("torus3d:3x3x3,hosts=2");
}

#[test]
fn dragonfly() {
    check("dragonfly:routers=3,hosts=2");
    // Groups of four: auto's nue programs the dragonfly routing.
    check("dragonfly:routers=4,hosts=2");
}

#[test]
fn random_irregular() {
    for seed in 1..=3 {
        check(&format!("random:switches=12,links=24,hosts=16,seed={seed}"));
    }
}

#[test]
fn ibsim_example_nets() {
    let dir = std::path::Path::new("/usr/share/doc/ibsim-utils/net-examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).expect("ibsim-utils is installed (scripts/test.sh installs it)") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("net") {
            continue;
        }
        check(path.to_str().unwrap());
        seen += 1;
    }
    assert!(seen >= 4, "expected the ibsim example nets, found {seen}");
}

#[test]
fn lmc_2_gives_aligned_ranges_and_routes_every_lid() {
    let topo = Topology::from_spec_or_file("fattree2:radix=8,leaves=4,spines=2,hosts=4").unwrap();
    let fabric = FabricBuilder::new(&topo).seed(7).build_shared().unwrap();
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, host, 1).unwrap();
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn());
    let config = SmConfig { lmc: 2, ..SmConfig::default() };
    let mut sm = SubnetManager::new(transport, config, false);
    let report = runtime().block_on(sm.sweep()).expect("sweep");
    assert!(report.subnet_up(), "{:?}", report.inactive);
    let f = fabric.lock().unwrap();
    for h in topo.hosts() {
        let port = PortRef { node: h, port: 1 };
        let base = f.lid_of(port).unwrap().0;
        assert_eq!(f.port_info(port).unwrap().lmc, 2);
        assert_eq!(base % 4, 0, "LID {base} is not aligned to 2^LMC");
        for offset in 0..4 {
            let lid = Lid(base + offset);
            for sw in topo.switches() {
                let path = f.trace_lid_route(sw, lid).unwrap_or_else(|e| panic!("LID {lid} from switch: {e}"));
                assert_eq!(path.last().copied(), Some(port));
            }
        }
    }
    // Switch port 0 (base, not enhanced) keeps LMC 0.
    let sw = topo.switches().next().unwrap();
    assert_eq!(f.port_info(PortRef { node: sw, port: 0 }).unwrap().lmc, 0);
}

fn check_with_engines(spec: &str, chain: &[&str]) -> SweepReport {
    let topo = Topology::from_spec_or_file(spec).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(7).build_shared().unwrap();
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, host, 1).unwrap();
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn());
    let config = SmConfig { routing_engine: chain.iter().map(|s| s.to_string()).collect(), ..SmConfig::default() };
    let mut sm = SubnetManager::new(transport, config, false);
    let report = runtime().block_on(sm.sweep()).expect("sweep");
    assert!(report.subnet_up(), "{spec} {chain:?}: {:?} {:?}", report.inactive, report.problems());
    assert!(report.problems().is_empty(), "{spec} {chain:?}: {:?}", report.problems());
    assert_fabric_up(&topo, &fabric);
    report
}

#[test]
fn every_engine_brings_up_a_fat_tree() {
    for engine in ["minhop", "updn", "dnup", "ftree", "sssp", "dfsssp", "nue"] {
        let report = check_with_engines("fattree3:radix=8,pods=4", &[engine, "minhop"]);
        if engine == "ftree" {
            assert!(report.routing_notes.is_empty(), "ftree applies to a fat tree: {:?}", report.routing_notes);
        }
    }
}

#[test]
fn engines_on_a_torus_with_virtual_lanes() {
    // ftree refuses a torus and the chain falls back; dfsssp needs VLs, so
    // the SM programs SL-to-VL tables on every port.
    let report = check_with_engines("torus2d:4x4,hosts=1", &["ftree", "updn"]);
    assert!(report.routing_notes.iter().any(|n| n.contains("ftree")), "{:?}", report.routing_notes);
    let report = check_with_engines("torus2d:4x4,hosts=1", &["dfsssp"]);
    assert!(report.program.sl2vl_sets > 0, "dfsssp on a torus uses VLs: SL2VL must be programmed");
    // dor with datelines on a 5x5 torus (rings of 5 need a dateline each).
    let report = check_with_engines("torus2d:5x5,hosts=1", &["dor"]);
    assert!(report.routing_notes.is_empty(), "dor applies to a torus: {:?}", report.routing_notes);
    assert!(report.program.sl2vl_sets > 0);
    let report = check_with_engines("torus3d:3x3x3,hosts=1", &["nue"]);
    assert!(report.routing_notes.is_empty(), "{:?}", report.routing_notes);
}

#[test]
fn dor_switches_vl_at_the_datelines_with_two_vls() {
    // Every ring of a 5x5x5 torus has a dateline: with the VL fixed per
    // path dor would need 8 VLs; moving to VL 1 at the dateline through
    // per-port SL-to-VL tables needs 2, the budget given here.
    let spec = "torus3d:5x5x5,hosts=1";
    let topo = Topology::from_spec_or_file(spec).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(7).build_shared().unwrap();
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, host, 1).unwrap();
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn());
    // max_op_vls is a VLCap code: 2 = VL0-VL1.
    let config = SmConfig { routing_engine: vec!["dor".into()], max_op_vls: 2, ..SmConfig::default() };
    let mut sm = SubnetManager::new(transport, config, false);
    let report = runtime().block_on(sm.sweep()).expect("sweep");
    assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    assert!(report.routing_notes.is_empty(), "dor applies with 2 VLs: {:?}", report.routing_notes);
    assert_fabric_up(&topo, &fabric);

    // Every cabled (input, output) pair of every switch holds the table the
    // engine asked for, and the tables do use VL 1, and nothing above it.
    let f = fabric.lock().unwrap();
    let mut on_vl1 = 0;
    for (i, node) in topo.nodes.iter().enumerate().filter(|(_, n)| n.kind == NodeKind::Switch) {
        let idx = ibsm::topology::NodeIdx(i);
        let cabled: Vec<u8> =
            (1..=node.num_ports).filter(|&p| topo.neighbor(PortRef { node: idx, port: p }).is_some()).collect();
        for &input in std::iter::once(&0).chain(&cabled) {
            for &output in &cabled {
                if input == output {
                    continue;
                }
                let want = sm.hop_vl_table(node.node_guid, input, output).expect("dor's per-port tables");
                let got = f.switch_sl2vl(idx, input, output).unwrap().vl;
                assert_eq!(got, want, "{} {input}->{output}", node.name);
                assert!(want.iter().all(|&v| v <= 1), "{} {input}->{output}: {want:?}", node.name);
                on_vl1 += want.iter().filter(|&&v| v == 1).count();
            }
        }
    }
    assert!(on_vl1 > 0, "some hops must move to VL 1 at a dateline");
    drop(f);
    // A second sweep finds every table in place.
    let again = runtime().block_on(sm.sweep()).expect("sweep");
    assert_eq!(again.program.sl2vl_sets, 0, "{:?}", again.program);
}

#[test]
fn qos_tables_are_programmed_once() {
    let topo = Topology::from_spec_or_file("fattree2:radix=8,leaves=4,spines=2,hosts=4").unwrap();
    let fabric = FabricBuilder::new(&topo).seed(7).build_shared().unwrap();
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, host, 1).unwrap();
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn());
    let qos = ibsm::config::QosConfig { enabled: true, high_limit: 4, ..Default::default() };
    let mut sm = SubnetManager::new(transport, SmConfig::default(), false).with_qos(qos);
    let rt = runtime();
    let first = rt.block_on(sm.sweep()).expect("sweep");
    assert!(first.subnet_up(), "{:?}", first.problems());
    assert!(first.problems().is_empty(), "{:?}", first.problems());
    assert!(first.program.vlarb_sets > 0 && first.program.sl2vl_sets > 0, "{:?}", first.program);
    {
        let f = fabric.lock().unwrap();
        let pi = f.port_info(PortRef { node: host, port: 1 }).unwrap();
        assert_eq!(pi.vl_high_limit, 4, "VLHighLimit programmed");
    }
    let second = rt.block_on(sm.sweep()).expect("sweep");
    assert_eq!((second.program.vlarb_sets, second.program.sl2vl_sets), (0, 0), "tables already in place");
}
