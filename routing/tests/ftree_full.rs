//! ftree on full fat trees: valid, minimal where minimal routes can be
//! deadlock free, contention free for every shift, balanced at least as
//! well as MinHop, independent of discovery order.

mod ftree_common;

use ftree_common::{credit_loop, shift_max_load};
use ibsm_routing::ftree::{ftree, layout};
use ibsm_routing::testfab::{renumbered, FatTree};
use ibsm_routing::{minhop, trace, validate, EndPortId, EngineOptions, NodeRef, Routes, RoutingFabric};

fn opts() -> EngineOptions {
    EngineOptions::default()
}

/// Every check that holds on any full tree.
fn check_full_tree(ft: FatTree) -> (RoutingFabric, Routes) {
    let f = ft.build();
    let r = ftree(&f, &opts()).unwrap_or_else(|e| panic!("{ft:?}: {e}"));
    let rep = validate(&f, &r);
    assert!(rep.is_clean() && rep.fully_connected(), "{ft:?}: {rep}");
    assert_eq!(rep.delivered, rep.pairs, "{ft:?}");
    assert_eq!(credit_loop(&f, &r), None, "{ft:?}: credit loop");

    let mh = minhop(&f).unwrap();
    let mrep = validate(&f, &mh);
    assert!(
        rep.inter_switch_load.max <= mrep.inter_switch_load.max,
        "{ft:?}: all-to-all EFI {} > minhop's {}",
        rep.inter_switch_load.max,
        mrep.inter_switch_load.max
    );
    assert!(rep.access_load.max <= mrep.access_load.max, "{ft:?}");

    // The compute-node order is the generator's (pods, leaves, ports in
    // order), and every shift in it is contention free.
    let lay = layout(&f, &opts()).unwrap();
    assert_eq!(lay.levels, ft.levels);
    assert_eq!(lay.compute_nodes, f.end_port_ids().collect::<Vec<_>>(), "{ft:?}: index order");
    let n = lay.compute_nodes.len();
    let (worst, k) = shift_max_load(&f, &r, &lay.compute_nodes, 1..n);
    assert_eq!(worst, 1, "{ft:?}: shift {k} puts {worst} flows on one cable");
    (f, r)
}

#[test]
fn two_level_full_trees_are_minimal_and_contention_free() {
    for radix in [4, 8, 16, 36] {
        let (f, r) = check_full_tree(FatTree::full(radix, 2));
        // On two levels even switch-to-switch detours are shortest paths.
        let rep = validate(&f, &r);
        assert!(rep.all_minimal(), "radix {radix}: {rep}");
        assert_eq!(rep.max_stretch, 0);
    }
}

#[test]
fn three_and_four_level_full_trees_are_contention_free() {
    for ft in [FatTree::full(4, 3), FatTree::full(8, 3), FatTree::full(16, 3), FatTree::full(4, 4), FatTree::full(6, 4)]
    {
        check_full_tree(ft);
    }
}

/// On three levels and more, every path from or to an end port is a
/// shortest one. Some switch-to-switch paths are not: minimal ones between
/// the aggregation switches of one pod must turn from down to up at a leaf
/// of that pod, and two pods doing so close a credit loop with ordinary
/// host traffic (agg a -> leaf -> agg b -> core -> pod 2's agg b -> leaf ->
/// agg a -> core -> back). They turn at one leaf instead, as in OpenSM.
#[test]
fn deeper_trees_are_minimal_for_every_end_port_path() {
    for ft in [FatTree::full(8, 3), FatTree::full(4, 4)] {
        let f = ft.build();
        let r = ftree(&f, &opts()).unwrap();
        let mh = minhop(&f).unwrap();
        let mut longer_switch_pairs = 0;
        let sources = f.switch_ids().map(NodeRef::Switch).chain(f.end_port_ids().map(NodeRef::End));
        for src in sources {
            for lid in 1..=f.max_lid() {
                let Some(owner) = f.lid_owner(lid) else { continue };
                if owner == src {
                    continue;
                }
                let (a, b) = (trace(&f, &r, src, lid), trace(&f, &mh, src, lid));
                if a.hops.len() > b.hops.len() {
                    assert!(
                        matches!((src, owner), (NodeRef::Switch(_), NodeRef::Switch(_))),
                        "{ft:?}: {src:?} -> LID {lid} takes {} hops, minhop {}",
                        a.hops.len(),
                        b.hops.len()
                    );
                    longer_switch_pairs += 1;
                }
                assert!(a.hops.len() >= b.hops.len(), "minhop is shortest");
            }
        }
        assert!(longer_switch_pairs > 0, "{ft:?}: the detour leaf lengthens some switch pairs");
    }
}

#[test]
fn renumbering_does_not_change_the_tables() {
    for ft in [FatTree::full(8, 2), FatTree::full(8, 3), FatTree::new(8, 3, 50)] {
        let f = ft.build();
        let r = ftree(&f, &opts()).unwrap();
        for seed in 1..4 {
            let g = renumbered(&f, seed);
            let q = ftree(&g, &opts()).unwrap();
            for s in f.switch_ids() {
                let t = g.switch_ids().find(|&t| g.switch(t).guid == f.switch(s).guid).unwrap();
                assert_eq!(r.lft(s), q.lft(t), "{ft:?} seed {seed}: switch {:#x}", f.switch(s).guid);
            }
            let guids =
                |x: &RoutingFabric, v: &[EndPortId]| v.iter().map(|&e| x.end_port(e).port_guid).collect::<Vec<_>>();
            assert_eq!(
                guids(&f, &layout(&f, &opts()).unwrap().compute_nodes),
                guids(&g, &layout(&g, &opts()).unwrap().compute_nodes)
            );
        }
    }
}

#[test]
fn layout_ranks_and_leaves() {
    let f = FatTree::full(8, 3).build();
    let lay = layout(&f, &opts()).unwrap();
    assert_eq!(lay.levels, 3);
    assert_eq!(lay.slots_per_leaf, 4);
    assert_eq!(lay.leaves.len(), 32);
    for s in f.switch_ids() {
        let name = &f.switch(s).name;
        let want = match &name[..5] {
            "sw-L1" => 2,
            "sw-L2" => 1,
            "sw-L3" => 0,
            other => panic!("{other}"),
        };
        assert_eq!(lay.rank[s.index()], Some(want), "{name}");
    }
    assert!(lay.leaves.iter().all(|&l| lay.rank[l.index()] == Some(2)));
}

/// Root GUIDs naming the real roots give the same tables as detection.
#[test]
fn given_roots_match_detected_ones() {
    let f = FatTree::full(8, 3).build();
    let auto = ftree(&f, &opts()).unwrap();
    let roots = f.switch_ids().filter(|&s| f.switch(s).name.starts_with("sw-L3")).map(|s| f.switch(s).guid).collect();
    let given = ftree(&f, &EngineOptions { root_guids: roots, ..opts() }).unwrap();
    assert_eq!(auto, given);
}

/// The 11,664-host tree, all 11,663 shifts (~35 s in release): too slow for
/// the test suite; run with
/// `cargo test --release -p ibsm-routing --test ftree_full -- --ignored`.
#[test]
#[ignore]
fn radix_36_three_levels() {
    check_full_tree(FatTree::full(36, 3));
}

#[test]
fn the_engine_chain_takes_ftree_on_a_tree() {
    use ibsm_routing::{route, route_chain, EngineKind};
    let f = FatTree::full(8, 3).build();
    let direct = ftree(&f, &opts()).unwrap();
    assert_eq!(route(EngineKind::FTree, &f, &opts()).unwrap(), direct);
    let out = route_chain(&[EngineKind::FTree, EngineKind::MinHop], &f, &opts()).unwrap();
    assert_eq!(out.engine, EngineKind::FTree);
    assert!(out.skipped.is_empty());
    assert_eq!(out.routes, direct);
}
