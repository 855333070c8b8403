//! Nue's balance on the two cut fat trees of bench/routing.py, on the LIDs
//! OpenSM 3.3.23 gave them, against OpenSM's own Nue tables for the same
//! fabric (fixtures/lfts/*-nue.lfts.dump, made by fixtures/lfts/capture.sh
//! as the bench runs OpenSM: QoS on, 8 VLs).

mod nue_cdg;
use nue_cdg as cdg;

use std::collections::BTreeMap;

use ibsm_routing::dump::LftDump;
use ibsm_routing::fabric::{EndPort, PortEnd, RoutingFabric, Switch};
use ibsm_routing::nue::nue_with_stats;
use ibsm_routing::testfab::FatTree;
use ibsm_routing::{validate, EngineOptions};

fn fixture(name: &str) -> String {
    let path = format!("{}/../fixtures/lfts/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A generated fat tree as `ibsm topology write` lays it out (node order,
/// names, port numbers; see src/topology/generate.rs): switches, the
/// switch-to-switch cables (a, port, b, port), and the leaves in the order
/// their hosts are added.
struct Shape {
    radix: u8,
    hosts: u8,
    switches: Vec<String>,
    cables: Vec<(String, u8, String, u8)>,
    leaves: Vec<String>,
}

/// `fattree2:radix=R`: R leaves, R/2 spines, R/2 hosts per leaf.
fn fattree2(radix: u8) -> Shape {
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
fn fattree3(radix: u8, pods: u8) -> Shape {
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
fn build(shape: &Shape, cut: &[(&str, u8, &str, u8)], lids: &BTreeMap<u64, u16>) -> RoutingFabric {
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

fn lids_of(d: &LftDump) -> BTreeMap<u64, u16> {
    d.lid_claims("fixture").unwrap().into_iter().map(|c| (c.guid, c.lids[0])).collect()
}

/// The bench fabric and OpenSM's Nue tables on it: (fabric, OpenSM's
/// busiest switch-to-switch link, all-to-all).
fn bench_case(dump: &str, shape: &Shape, cut: &[(&str, u8, &str, u8)]) -> (RoutingFabric, u64) {
    let d = LftDump::parse(&fixture(dump), dump).unwrap();
    let f = build(shape, cut, &lids_of(&d));
    let osm = d.to_routes(&f, dump).unwrap();
    let rep = validate(&f, &osm);
    assert!(rep.is_clean() && rep.delivered == rep.pairs, "{rep}");
    (f, rep.inter_switch_load.max)
}

/// Nue with 8 VLs (as the bench runs it): valid, every layer acyclic, and
/// the busiest switch-to-switch link.
fn our_busiest(f: &RoutingFabric) -> u64 {
    let (r, st) = nue_with_stats(f, &EngineOptions { max_vls: 8, ..Default::default() }).unwrap();
    let rep = validate(f, &r);
    assert!(rep.is_clean() && rep.fully_connected() && rep.delivered == rep.pairs, "{rep}");
    assert!(cdg::cyclic_layers_to_end_ports(f, &r).iter().all(|c| !c));
    // The re-picking routing is the one kept (the plain one gave 52 and 100).
    assert!(st.pending_aware && st.routings == 2, "{st:?}");
    rep.inter_switch_load.max
}

/// `fattree2:radix=8` with 3 cables cut (bench ft2-r8-cut). OpenSM's Nue:
/// 48 routes on its busiest link. 40 is the best any destination-based
/// routing can do: leaf0 lost spine2, so its 4 end ports' LIDs are reached
/// over 3 down cables, and each of the 7 other leaves sends its 4 end
/// ports' traffic to one LID down one of them: 28 (leaf, LID) bundles of 4
/// over 3 cables put at least 10 bundles, 40 routes, on one.
#[test]
fn two_level_cut_tree_at_the_optimum_below_opensm() {
    let cut = [("leaf0", 7, "spine2", 1), ("leaf6", 8, "spine3", 7), ("leaf7", 7, "spine2", 8)];
    let (f, osm) = bench_case("ft2-r8-cut-nue.lfts.dump", &fattree2(8), &cut);
    assert_eq!(osm, 48, "OpenSM's Nue as in bench/routing-results.md");
    let ours = our_busiest(&f);
    assert!(ours <= 40, "busiest link {ours}, OpenSM {osm}");
}

/// `fattree3:radix=8,pods=4` with 4 cables cut (bench ft3-r8-cut). OpenSM's
/// Nue: 96. Lower bound 80: p2-leaf3 lost p2-spine1, so 60 end ports send
/// to its 4 LIDs over 3 down cables.
#[test]
fn three_level_cut_tree_below_opensm() {
    let cut = [
        ("core0-0", 4, "p3-spine0", 5),
        ("core0-2", 1, "p0-spine0", 7),
        ("p2-leaf3", 6, "p2-spine1", 4),
        ("p3-leaf2", 8, "p3-spine3", 3),
    ];
    let (f, osm) = bench_case("ft3-r8-cut-nue.lfts.dump", &fattree3(8, 4), &cut);
    assert_eq!(osm, 96, "OpenSM's Nue as in bench/routing-results.md");
    let ours = our_busiest(&f);
    assert!((80..=84).contains(&ours), "busiest link {ours}, OpenSM {osm}");
}

/// On full fat trees the first (re-picking) routing already meets the load
/// floor, so the plain one is never computed, and the busiest link carries
/// the ideal: every end port's traffic to the LIDs of other leaves, spread
/// evenly over its leaf's up cables.
#[test]
fn full_fat_trees_route_once_at_the_ideal() {
    for (ft, ideal) in [(FatTree::full(8, 2), 28), (FatTree::full(8, 3), 124), (FatTree::full(16, 2), 120)] {
        let f = ft.build();
        for vls in [1u8, 8] {
            let (r, st) = nue_with_stats(&f, &EngineOptions { max_vls: vls, ..Default::default() }).unwrap();
            let rep = validate(&f, &r);
            assert!(rep.is_clean() && rep.delivered == rep.pairs, "{rep}");
            assert_eq!(st.routings, 1, "{st:?}");
            assert_eq!(rep.inter_switch_load.max, ideal, "{vls} VLs");
        }
    }
}
