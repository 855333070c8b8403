//! Fabrics far beyond ibsim's 2,048 nodes. Times are printed, not asserted.

mod sim_support;

use std::time::Instant;

use ibsm::mad::{AttributeId, NodeInfoRepr, PortInfoRepr, PortState};
use ibsm::sim::FabricBuilder;
use ibsm::topology::{GeneratorSpec, NodeKind};
use ibsm::transport::MadDevice;
use rand::{Rng, SeedableRng};
use sim_support::*;

fn fat_tree(spec: &str) -> ibsm::topology::Topology {
    spec.parse::<GeneratorSpec>().unwrap().generate().unwrap()
}

/// ~4,500 nodes (3,888 hosts): a few thousand DR Gets to random nodes, each
/// answered by the right node.
#[test]
fn thousands_of_dr_gets_on_a_4500_node_fat_tree() {
    let topo = fat_tree("fattree3:radix=36,pods=12");
    assert!(topo.nodes.len() > 4_000, "{} nodes", topo.nodes.len());
    let t = Instant::now();
    let f = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
    let built = t.elapsed();
    let host = topo.nodes.iter().position(|n| n.kind == NodeKind::Ca).unwrap();
    let mut sm = TestSm::attach(&f, &topo.nodes[host].name.clone(), 1);
    let paths = dr_paths(&topo, host, 1);
    assert_eq!(paths.len(), topo.nodes.len(), "every node reachable");
    let targets: Vec<usize> = paths.keys().copied().collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let t = Instant::now();
    let n = 3_000;
    let t0 = sm.dev.now();
    for i in 0..n {
        let target = targets[rng.gen_range(0..targets.len())];
        let path = &paths[&target];
        if i % 2 == 0 {
            let r = sm.dr_get(path, AttributeId::NodeInfo, 0).expect("answered");
            assert_eq!(NodeInfoRepr::parse_bytes(&r.data).unwrap().node_guid, topo.nodes[target].node_guid);
        } else {
            let r = sm.dr_get(path, AttributeId::PortInfo, 1).expect("answered");
            let pi = PortInfoRepr::parse_bytes(&r.data).unwrap();
            assert_eq!(pi.port_state, PortState::Init);
        }
    }
    let virt = sm.dev.now() - t0;
    eprintln!("{} nodes built in {built:?}; {n} DR Gets in {:?} wall, {virt:?} virtual", topo.nodes.len(), t.elapsed());
}

/// The 50,176-host fat tree (radix 64, 49 pods) fits and builds; one Get
/// crosses it.
#[test]
fn fifty_thousand_hosts_build() {
    let t = Instant::now();
    let topo = fat_tree("fattree3:radix=64,pods=49");
    let generated = t.elapsed();
    let hosts = topo.nodes.iter().filter(|n| n.kind == NodeKind::Ca).count();
    assert!(hosts >= 50_000, "{hosts} hosts");
    let t = Instant::now();
    let f = FabricBuilder::new(&topo).build_shared().unwrap();
    let built = t.elapsed();
    let first = topo.nodes.iter().position(|n| n.kind == NodeKind::Ca).unwrap();
    let last = topo.nodes.len() - 1;
    let mut sm = TestSm::attach(&f, &topo.nodes[first].name.clone(), 1);
    let paths = dr_paths(&topo, first, 1);
    let r = sm.dr_get(&paths[&last], AttributeId::NodeInfo, 0).expect("the far host answers");
    assert_eq!(NodeInfoRepr::parse_bytes(&r.data).unwrap().node_guid, topo.nodes[last].node_guid);
    eprintln!(
        "{} nodes ({hosts} hosts, {} links): generated in {generated:?}, fabric built in {built:?}, path of {} hops",
        topo.nodes.len(),
        topo.links.len(),
        paths[&last].len()
    );
}
