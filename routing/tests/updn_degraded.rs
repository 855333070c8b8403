//! updn and dnup on fat trees with cables cut (5-30%, several seeds, two
//! and three levels): the automatic roots are the top level, the routes are
//! sound (legal up*/down* paths, acyclic), and the busiest link is at most
//! minhop's on the same fabric.

mod updn_util;

use ibsm_routing::testfab::{degraded, FatTree};
use ibsm_routing::updn::{detect_roots, dnup, updn, UpDownOrder};
use ibsm_routing::{analyze_cdg, minhop, validate, CdgScope, EngineOptions, RoutingFabric};
use updn_util::{cdg_is_acyclic, illegal_paths};

const CUTS: [u32; 5] = [5, 10, 15, 20, 30];
const SEEDS: [u64; 4] = [1, 2, 3, 4];

fn trees() -> Vec<(&'static str, RoutingFabric, &'static str)> {
    vec![
        ("2-level radix 16", FatTree::full(16, 2).build(), "sw-L2"),
        ("3-level radix 8", FatTree::full(8, 3).build(), "sw-L3"),
    ]
}

fn busiest(f: &RoutingFabric, r: &ibsm_routing::Routes, what: &str) -> u64 {
    let rep = validate(f, r);
    assert!(rep.is_clean() && rep.fully_connected(), "{what}: {rep}");
    rep.inter_switch_load.max
}

#[test]
fn roots_are_the_top_level_of_a_degraded_tree() {
    for (name, full, top) in trees() {
        let want = full.switches().iter().filter(|s| s.name.starts_with(top)).count();
        for cut in CUTS {
            for seed in SEEDS {
                let f = degraded(&full, cut, seed);
                let roots = detect_roots(&f);
                assert_eq!(roots.len(), want, "{name} cut {cut}% seed {seed}");
                assert!(roots.iter().all(|s| f.switch(*s).name.starts_with(top)), "{name} cut {cut}% seed {seed}");
            }
        }
    }
}

/// Where minhop's routes are free of credit loops, updn's and dnup's busiest
/// link is at most minhop's. Where minhop's have credit loops (three-level
/// trees with cables cut: minimal paths that turn down then up), no
/// up*/down* routing may take those paths, and the bound is 15% above
/// minhop's (seen: at most 12%, 648 vs 580 on the 3-level radix-8 tree
/// with 30% cut, where nue gives 824 and ftree refuses the tree).
#[test]
fn updn_is_sound_and_no_busier_than_minhop_on_degraded_trees() {
    let o = EngineOptions::default();
    let mut compared = 0;
    for (name, full, _) in trees() {
        for cut in CUTS {
            for seed in SEEDS {
                let what = format!("{name} cut {cut}% seed {seed}");
                let f = degraded(&full, cut, seed);
                let mh_routes = minhop(&f).unwrap();
                let mh = busiest(&f, &mh_routes, &what);
                let mh_loop_free = analyze_cdg(&f, &mh_routes, CdgScope::default()).deadlock_free();
                for (engine, routes, order) in [
                    ("updn", updn(&f, &o).unwrap(), UpDownOrder::updn(&f, &o).unwrap()),
                    ("dnup", dnup(&f, &o).unwrap(), UpDownOrder::dnup(&f)),
                ] {
                    let load = busiest(&f, &routes, &what);
                    if mh_loop_free {
                        assert!(load <= mh, "{what}: {engine} busiest link {load} > minhop's {mh}");
                        compared += 1;
                    } else {
                        assert!(
                            load * 100 <= mh * 115,
                            "{what}: {engine} busiest link {load} vs minhop's {mh} (with credit loops)"
                        );
                    }
                    let bad = illegal_paths(&f, &routes, &order);
                    assert!(bad.is_empty(), "{what}: {engine}: {} illegal paths", bad.len());
                    assert!(cdg_is_acyclic(&f, &routes), "{what}: {engine}: channel dependency cycle");
                }
            }
        }
    }
    // Most of the trees are compared against the strict bound.
    assert!(compared >= 30, "only {compared} strict comparisons");
}

/// The tree of the issue: 648 hosts, 36-port switches, 15% of the
/// leaf-spine cables gone. updn had 11,340 routes on its busiest link
/// (every leaf ranked a root), minhop 2,610.
#[test]
fn the_648_host_tree_with_15_percent_cut() {
    let f = degraded(&FatTree::full(36, 2).build(), 15, 1);
    let o = EngineOptions::default();
    let mh = busiest(&f, &minhop(&f).unwrap(), "minhop");
    let up = busiest(&f, &updn(&f, &o).unwrap(), "updn");
    assert!(up <= mh, "updn {up} vs minhop {mh}");
    assert_eq!(detect_roots(&f).len(), 18);
}
