//! dfsssp on fat trees with cables cut, at every VL budget from 1: it
//! routes, every SL's channel dependencies are acyclic, and its busiest
//! link is SSSP's where SSSP's paths fit the VLs and at most 10% above
//! Nue's where they do not.

use ibsm_routing::sssp::{dfsssp, dfsssp_with, sssp, DfssspConfig};
use ibsm_routing::testfab::{degraded, FatTree};
use ibsm_routing::{analyze_cdg, nue, validate, CdgScope, EngineOptions, Routes, RoutingFabric};

fn busiest(f: &RoutingFabric, r: &Routes, what: &str) -> u64 {
    let rep = validate(f, r);
    assert!(rep.is_clean() && rep.fully_connected() && rep.delivered == rep.pairs, "{what}: {rep}");
    rep.inter_switch_load.max
}

#[test]
fn dfsssp_routes_degraded_trees_on_any_budget() {
    let trees = [("2-level radix 16", FatTree::full(16, 2).build()), ("3-level radix 8", FatTree::full(8, 3).build())];
    let mut kept_sssp = 0;
    for (name, full) in &trees {
        for cut in [5u32, 15, 30] {
            for seed in [1u64, 2] {
                let f = degraded(full, cut, seed);
                for vls in [1u8, 2, 8] {
                    let what = format!("{name} cut {cut}% seed {seed}, {vls} VL");
                    let o = EngineOptions { max_vls: vls, ..EngineOptions::default() };
                    let d = dfsssp(&f, &o).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let load = busiest(&f, &d, &what);
                    let cdg = analyze_cdg(&f, &d, CdgScope::default());
                    assert!(cdg.deadlock_free(), "{what}: credit loop");
                    let fits = dfsssp_with(&f, &o, &DfssspConfig::default())
                        .is_ok_and(|(_, l)| l.sssp == DfssspConfig::default().sssp);
                    if fits {
                        kept_sssp += 1;
                        assert_eq!(load, busiest(&f, &sssp(&f, &o).unwrap(), &what), "{what}: not SSSP's balance");
                    } else {
                        let n = busiest(&f, &nue::nue(&f, &o).unwrap(), &what);
                        assert!(load * 10 <= n * 11, "{what}: dfsssp {load} vs nue {n}");
                    }
                }
            }
        }
    }
    assert!(kept_sssp > 0, "SSSP's paths fit somewhere");
}

/// The tree: 648 hosts, 15% of the cables cut, one VL. dfsssp's
/// busiest link was 10,044 (one tree per destination switch); SSSP's paths
/// carry about 1,150 and Nue's about 1,000.
#[test]
fn the_648_host_tree_on_one_vl() {
    let f = degraded(&FatTree::full(36, 2).build(), 15, 1);
    let o = EngineOptions { max_vls: 1, ..EngineOptions::default() };
    let d = busiest(&f, &dfsssp(&f, &o).unwrap(), "dfsssp");
    let n = busiest(&f, &nue::nue(&f, &o).unwrap(), "nue");
    let s = busiest(&f, &sssp(&f, &o).unwrap(), "sssp");
    assert!(d * 10 <= n * 11 && d <= s, "dfsssp {d}, nue {n}, sssp {s}");
}
