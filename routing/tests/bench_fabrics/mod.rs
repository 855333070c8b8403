//! The cut fat trees of bench/routing.py, rebuilt exactly as `ibsm
//! topology write` and ibsim lay them out, on the LIDs OpenSM gave them
//! (fixtures/lfts/*.lfts.dump, made by fixtures/lfts/capture.sh).

use std::collections::BTreeMap;

use ibsm_routing::dump::LftDump;
use ibsm_routing::fabric::{EndPort, PortEnd, RoutingFabric, Switch};

/// The cables bench/routing.py cuts from `fattree2:radix=8` (ft2-r8-cut).
pub const FT2_R8_CUT: [(&str, u8, &str, u8); 3] =
    [("leaf0", 7, "spine2", 1), ("leaf6", 8, "spine3", 7), ("leaf7", 7, "spine2", 8)];

/// The cables bench/routing.py cuts from `fattree3:radix=8,pods=4` (ft3-r8-cut).
pub const FT3_R8_CUT: [(&str, u8, &str, u8); 4] = [
    ("core0-0", 4, "p3-spine0", 5),
    ("core0-2", 1, "p0-spine0", 7),
    ("p2-leaf3", 6, "p2-spine1", 4),
    ("p3-leaf2", 8, "p3-spine3", 3),
];

pub fn fixture(name: &str) -> String {
    let path = format!("{}/../fixtures/lfts/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A generated fat tree as `ibsm topology write` lays it out (node order,
/// names, port numbers; see src/topology/generate.rs): switches, the
/// switch-to-switch cables (a, port, b, port), and the leaves in the order
/// their hosts are added.
pub struct Shape {
    radix: u8,
    hosts: u8,
    switches: Vec<String>,
    cables: Vec<(String, u8, String, u8)>,
    leaves: Vec<String>,
}

/// `fattree2:radix=R`: R leaves, R/2 spines, R/2 hosts per leaf.
pub fn fattree2(radix: u8) -> Shape {
    let h = radix / 2;
    let leaves: Vec<String> = (0..radix).map(|l| format!("leaf{l}")).collect();
    let spines: Vec<String> = (0..h).map(|s| format!("spine{s}")).collect();
    let mut cables = Vec::new();
    for (l, leaf) in leaves.iter().enumerate() {
        for (s, spine) in spines.iter().enumerate() {
            cables.push((leaf.clone(), h + s as u8 + 1, spine.clone(), l as u8 + 1));
        }
    }
    let switches = leaves.iter().chain(&spines).cloned().collect();
    Shape { radix, hosts: h, switches, cables, leaves }
}

/// `fattree3:radix=R,pods=P`: per pod R/2 leaves and R/2 spines; R/2 x R/2
/// cores, core `s-u` on spine s of every pod.
pub fn fattree3(radix: u8, pods: u8) -> Shape {
    let h = radix / 2;
    let (mut switches, mut cables, mut leaves) = (Vec::new(), Vec::new(), Vec::new());
    for p in 0..pods {
        let leaf: Vec<String> = (0..h).map(|l| format!("p{p}-leaf{l}")).collect();
        let spine: Vec<String> = (0..h).map(|s| format!("p{p}-spine{s}")).collect();
        for (l, lf) in leaf.iter().enumerate() {
            for (s, sp) in spine.iter().enumerate() {
                cables.push((lf.clone(), h + s as u8 + 1, sp.clone(), l as u8 + 1));
            }
        }
        switches.extend(leaf.iter().chain(&spine).cloned());
        leaves.extend(leaf);
    }
    for s in 0..h {
        for u in 0..h {
            let core = format!("core{s}-{u}");
            for p in 0..pods {
                cables.push((format!("p{p}-spine{s}"), h + u + 1, core.clone(), p + 1));
            }
            switches.push(core);
        }
    }
    Shape { radix, hosts: h, switches, cables, leaves }
}

/// The shape without the cables `cut` names, with ibsim's GUIDs (switch i
/// in node order 0x200000 + i; CA k node GUID 0x100000 + 2k, port GUID + 1)
/// and the LIDs `lids` gives each GUID.
pub fn build(shape: &Shape, cut: &[(&str, u8, &str, u8)], lids: &BTreeMap<u64, u16>) -> RoutingFabric {
    let lid = |g: u64| lids.get(&g).copied().unwrap_or(0);
    let mut b = RoutingFabric::builder();
    let mut ids = BTreeMap::new();
    for (i, name) in shape.switches.iter().enumerate() {
        let g = 0x200000 + i as u64;
        ids.insert(name.clone(), b.add_switch(Switch::new(g, shape.radix, lid(g)).with_name(name)).unwrap());
    }
    let mut dropped = 0;
    for (a, p, c, q) in &shape.cables {
        let gone = cut.iter().any(|&(x, xp, y, yp)| {
            (x, xp, y, yp) == (a.as_str(), *p, c.as_str(), *q) || (y, yp, x, xp) == (a.as_str(), *p, c.as_str(), *q)
        });
        if gone {
            dropped += 1;
            continue;
        }
        b.connect(PortEnd::Switch(ids[a], *p), PortEnd::Switch(ids[c], *q)).unwrap();
    }
    assert_eq!(dropped, cut.len(), "every cut names a cable of the shape");
    let mut k = 0u64;
    for leaf in &shape.leaves {
        for i in 0..shape.hosts {
            let node = 0x100000 + 2 * k;
            k += 1;
            let e = b
                .add_end_port(EndPort::new(node, node + 1, 1, lid(node + 1)).with_name(format!("{leaf}-h{i}")))
                .unwrap();
            b.connect(PortEnd::End(e), PortEnd::Switch(ids[leaf], i + 1)).unwrap();
        }
    }
    b.build().unwrap()
}

pub fn lids_of(d: &LftDump) -> BTreeMap<u64, u16> {
    d.lid_claims("fixture").unwrap().into_iter().map(|c| (c.guid, c.lids[0])).collect()
}
