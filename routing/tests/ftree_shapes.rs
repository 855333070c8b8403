//! ftree on trees that are not full (missing hosts, leaves, spines,
//! cables), on fabrics that are no trees, and with the engine options.

mod ftree_common;

use ftree_common::{credit_loop, joins, rebuild, switch_named, torus};
use ibsm_routing::ftree::{ftree, layout};
use ibsm_routing::testfab::{random_connected, ring, single_switch, spine_leaf, FatTree, RandomSpec};
use ibsm_routing::{
    route_chain, validate, EndPort, EngineKind, EngineOptions, FabricBuilder, PortEnd, Routes, RoutingError,
    RoutingFabric, Switch,
};

fn opts() -> EngineOptions {
    EngineOptions::default()
}

/// Routes and checks: every pair delivered, no credit loop.
fn routes_cleanly(f: &RoutingFabric, o: &EngineOptions, what: &str) -> Routes {
    let r = ftree(f, o).unwrap_or_else(|e| panic!("{what}: {e}"));
    let rep = validate(f, &r);
    assert!(rep.is_clean() && rep.fully_connected(), "{what}: {rep}");
    assert_eq!(rep.delivered, rep.pairs, "{what}");
    assert_eq!(credit_loop(f, &r), None, "{what}: credit loop");
    r
}

fn refusal(f: &RoutingFabric, o: &EngineOptions) -> String {
    match ftree(f, o) {
        Err(RoutingError::NotApplicable { engine: "ftree", reason }) => reason,
        other => panic!("expected a refusal, got {:?}", other.map(|_| "routes")),
    }
}

#[test]
fn partially_populated_trees() {
    for ft in [FatTree::new(8, 2, 13), FatTree::new(8, 3, 20), FatTree::new(8, 3, 50), FatTree::new(16, 3, 300)] {
        let f = ft.build();
        routes_cleanly(&f, &opts(), &format!("{ft:?}"));
    }
    // A tree of one pod is a 2-level tree with dangling switches above.
    let f = FatTree::new(8, 3, 10).build();
    routes_cleanly(&f, &opts(), "one pod");
}

#[test]
fn hostless_leaves_stay_leaves() {
    // Leaf 1 of pod 1 in a full radix-8 3-level tree loses its hosts.
    let f = FatTree::full(8, 3).build();
    let g = rebuild(&f, |_| true, |e| !f.end_port(e).name.starts_with("h-1.1-"), |_| true);
    let lay = layout(&g, &opts()).unwrap();
    assert_eq!(lay.levels, 3, "still three levels");
    let empty = switch_named(&g, "sw-L1-1.1");
    assert_eq!(lay.rank[empty.index()], Some(2), "ranked as a leaf, not as a root");
    assert_eq!(lay.compute_nodes.len(), 128 - 4);
    routes_cleanly(&g, &opts(), "hostless leaf");
}

#[test]
fn missing_hosts_leaves_and_spines() {
    let f = FatTree::full(8, 2).build();
    // Every third host gone.
    let g = rebuild(&f, |_| true, |e| e.0 % 3 != 0, |_| true);
    routes_cleanly(&g, &opts(), "every third host");
    // A whole leaf gone, with its hosts.
    let leaf = switch_named(&f, "sw-L1-2");
    let g = rebuild(&f, |s| s != leaf, |e| f.attached_switch(e).unwrap().0 != leaf, |_| true);
    routes_cleanly(&g, &opts(), "leaf 2 gone");
    // A spine gone.
    let spine = switch_named(&f, "sw-L2-1");
    let g = rebuild(&f, |s| s != spine, |_| true, |_| true);
    routes_cleanly(&g, &opts(), "spine 1 gone");

    let f = FatTree::full(8, 3).build();
    let core = switch_named(&f, "sw-L3-5");
    let agg = switch_named(&f, "sw-L2-3-2");
    let g = rebuild(&f, |s| s != core && s != agg, |_| true, |_| true);
    routes_cleanly(&g, &opts(), "a core and an aggregation switch gone");
}

#[test]
fn degraded_trees_route_around_missing_cables() {
    let f = FatTree::full(8, 2).build();
    let g =
        rebuild(&f, |_| true, |_| true, |l| !joins(&f, l, "sw-L1-0", "sw-L2-0") && !joins(&f, l, "sw-L1-3", "sw-L2-2"));
    let r = routes_cleanly(&g, &opts(), "two leaf-spine cables gone");
    let lay = layout(&g, &opts()).unwrap();
    let (switch_turns, end_port_turns) = ftree_common::down_up_turns(&g, &r, &lay.rank);
    assert!(switch_turns > 0, "spine 0 reaches leaf 0 by a detour");
    assert_eq!(end_port_turns, 0);

    let f = FatTree::full(8, 3).build();
    let g = rebuild(
        &f,
        |_| true,
        |_| true,
        |l| {
            !joins(&f, l, "sw-L1-0.0", "sw-L2-0-0")
                && !joins(&f, l, "sw-L1-2.3", "sw-L2-2-1")
                && !joins(&f, l, "sw-L2-1-0", "sw-L3-1")
                && !joins(&f, l, "sw-L2-4-3", "sw-L3-13")
        },
    );
    let r = routes_cleanly(&g, &opts(), "leaf-agg and agg-core cables gone");
    // Core 1 lost its cable to pod 1: its own packets to pod 1 take a
    // detour (down, then up); no end port's packets to an end port do.
    let lay = layout(&g, &opts()).unwrap();
    let (switch_turns, end_port_turns) = ftree_common::down_up_turns(&g, &r, &lay.rank);
    assert!(switch_turns > 0);
    assert_eq!(end_port_turns, 0);
}

#[test]
fn a_tree_that_lost_too_much_is_refused() {
    // Leaf 0 keeps only spine 0; leaf 1 loses spine 0: they share no spine.
    let f = FatTree::full(8, 2).build();
    let g = rebuild(
        &f,
        |_| true,
        |_| true,
        |l| {
            let leaf0_other = ["sw-L2-1", "sw-L2-2", "sw-L2-3"].iter().any(|s| joins(&f, l, "sw-L1-0", s));
            !leaf0_other && !joins(&f, l, "sw-L1-1", "sw-L2-0")
        },
    );
    let why = refusal(&g, &opts());
    assert!(why.contains("no up/down path"), "{why}");
    // The chain falls back and the fabric is still routed.
    let out = route_chain(&[EngineKind::FTree, EngineKind::MinHop], &g, &opts()).unwrap();
    assert_eq!(out.engine, EngineKind::MinHop);
    assert_eq!(out.skipped[0].0, EngineKind::FTree);
}

#[test]
fn parallel_cables_are_separate_up_ports() {
    let f = spine_leaf(2, 4, 2, 4);
    let r = routes_cleanly(&f, &opts(), "spine-leaf with doubled cables");
    let rep = validate(&f, &r);
    assert!(rep.all_minimal(), "{rep}");
    // Every up port of a leaf carries routes.
    for s in f.switch_ids().filter(|&s| f.switch(s).name.starts_with("leaf")) {
        let h = r.lft(s).unwrap().port_histogram();
        for (p, &routes) in h.iter().enumerate().take(9).skip(5) {
            assert!(routes > 0, "{} port {p} unused", f.switch(s).name);
        }
    }
    let lay = layout(&f, &opts()).unwrap();
    let (worst, k) = ftree_common::shift_max_load(&f, &r, &lay.compute_nodes, 1..16);
    assert_eq!(worst, 1, "shift {k}");
}

#[test]
fn lmc_offsets_leave_by_different_up_ports() {
    let ft = FatTree { host_lmc: 2, ..FatTree::full(8, 2) };
    let f = ft.build();
    let r = routes_cleanly(&f, &opts(), "LMC 2");
    let leaf = switch_named(&f, "sw-L1-0");
    for e in f.end_port_ids().filter(|&e| f.attached_switch(e).unwrap().0 != leaf) {
        let ports: std::collections::HashSet<u8> = f.end_port(e).lids().map(|l| r.port(leaf, l as u16)).collect();
        assert_eq!(ports.len(), 4, "the 4 LIDs of {} leave leaf 0 by 4 ports", f.end_port(e).name);
    }
}

#[test]
fn non_trees_are_refused_with_a_reason() {
    let why = refusal(&ring(5, 1), &opts());
    assert!(why.contains("has a link to switch") && why.contains("at rank 0"), "{why}");
    let why = refusal(&torus(4, 4), &opts());
    assert!(why.contains("has a link to switch"), "{why}");
    let why = refusal(&single_switch(4), &opts());
    assert!(why.starts_with("rank 1 < 2"), "{why}");
    let why = refusal(&ibsm_routing::testfab::back_to_back(), &opts());
    assert!(why.contains("no switches"), "{why}");
    let why = refusal(&ring(6, 0), &opts());
    assert!(why.contains("no compute node"), "{why}");
    // A chain falls back to MinHop on all of them.
    for f in [ring(5, 1), torus(3, 3)] {
        let out = route_chain(&[EngineKind::FTree, EngineKind::MinHop], &f, &opts()).unwrap();
        assert_eq!(out.engine, EngineKind::MinHop);
    }
}

#[test]
fn random_fabrics_are_refused_or_routed() {
    let spec = RandomSpec { switches: 12, extra_links: 8, max_hosts_per_switch: 3, max_lmc: 1 };
    let mut refused = 0;
    for seed in 0..40 {
        let f = random_connected(seed, spec);
        match ftree(&f, &opts()) {
            Ok(r) => {
                let rep = validate(&f, &r);
                assert!(rep.is_clean() && rep.fully_connected(), "seed {seed}: {rep}");
                assert_eq!(credit_loop(&f, &r), None, "seed {seed}");
            }
            Err(RoutingError::NotApplicable { reason, .. }) => {
                assert!(!reason.is_empty());
                refused += 1;
            }
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    assert!(refused > 30, "random graphs are mostly no trees ({refused}/40 refused)");
}

#[test]
fn deep_chains_hit_the_rank_limit() {
    // Radix 2: every switch has one port down and one up.
    let f = FatTree::full(2, 8).build();
    routes_cleanly(&f, &opts(), "8 levels");
    assert_eq!(layout(&f, &opts()).unwrap().levels, 8);
    let why = refusal(&FatTree::full(2, 9).build(), &opts());
    assert!(why.starts_with("rank 9 > 8"), "{why}");
}

#[test]
fn roots_from_options() {
    let f = FatTree::full(8, 2).build();
    let why = refusal(&f, &EngineOptions { root_guids: vec![0xdead], ..opts() });
    assert!(why.contains("none of the 1 root GUIDs"), "{why}");
    // A leaf named as root: the other leaves' hosts sit on a non-leaf rank.
    let leaf = f.switch(switch_named(&f, "sw-L1-0")).guid;
    let why = refusal(&f, &EngineOptions { root_guids: vec![leaf], ..opts() });
    assert!(why.contains("attached to a non-leaf switch"), "{why}");
    // Unknown GUIDs next to real roots are ignored (a root may be down).
    let mut roots: Vec<u64> =
        f.switch_ids().filter(|&s| f.switch(s).name.starts_with("sw-L2")).map(|s| f.switch(s).guid).collect();
    roots.push(0xdead);
    let r = routes_cleanly(&f, &EngineOptions { root_guids: roots, ..opts() }, "given roots");
    assert_eq!(r, ftree(&f, &opts()).unwrap());
}

#[test]
fn compute_and_io_node_lists() {
    let f = FatTree::full(8, 2).build();
    // Compute nodes: the first two hosts of each leaf. The others are
    // still routed, after them.
    let cns: Vec<u64> = f.end_port_ids().filter(|e| e.0 % 4 < 2).map(|e| f.end_port(e).port_guid).collect();
    let o = EngineOptions { cn_guids: cns.clone(), ..opts() };
    routes_cleanly(&f, &o, "compute-node list");
    let lay = layout(&f, &o).unwrap();
    assert_eq!(lay.slots_per_leaf, 2);
    let order: Vec<u64> = lay.compute_nodes.iter().map(|&e| f.end_port(e).port_guid).collect();
    assert_eq!(order, cns);
    let why = refusal(&f, &EngineOptions { cn_guids: vec![1, 2, 3], ..opts() });
    assert!(why.contains("none of the 3 compute-node GUIDs"), "{why}");

    // A storage node on a spine: with every end port a compute node that
    // spine would be a leaf cabled to leaves; named as I/O node it is fine.
    let mut b = FabricBuilder::new();
    let spine_guid = f.switch(switch_named(&f, "sw-L2-0")).guid;
    let mut ids = Vec::new();
    for s in f.switch_ids() {
        let mut sw = f.switch(s).clone();
        if sw.guid == spine_guid {
            sw.num_ports += 1;
        }
        ids.push(b.add_switch(sw).unwrap());
    }
    for e in f.end_port_ids() {
        b.add_end_port(f.end_port(e).clone()).unwrap();
    }
    for l in f.links() {
        b.connect(l.a, l.b).unwrap();
    }
    let io = b.add_end_port(EndPort::new(0x77, 0x78, 1, f.max_lid() + 1)).unwrap();
    let spine = ids.iter().copied().find(|&s| f.switch(s).guid == spine_guid).unwrap();
    b.connect(PortEnd::End(io), PortEnd::Switch(spine, 9)).unwrap();
    let g = b.build().unwrap();
    let why = refusal(&g, &opts());
    assert!(why.contains("both have end ports"), "{why}");
    let o = EngineOptions { io_guids: vec![0x78], ..opts() };
    routes_cleanly(&g, &o, "I/O node on a spine");
    assert_eq!(layout(&g, &o).unwrap().compute_nodes.len(), 32);
}

#[test]
fn disconnected_fabric_routes_the_tree_part() {
    let f = FatTree::full(8, 2).build();
    let mut b = FabricBuilder::new();
    for s in f.switch_ids() {
        b.add_switch(f.switch(s).clone()).unwrap();
    }
    for e in f.end_port_ids() {
        b.add_end_port(f.end_port(e).clone()).unwrap();
    }
    for l in f.links() {
        b.connect(l.a, l.b).unwrap();
    }
    let lone = b.add_switch(Switch::new(0x55, 4, f.max_lid() + 1)).unwrap();
    let h = b.add_end_port(EndPort::new(0x56, 0x57, 1, f.max_lid() + 2)).unwrap();
    b.connect(PortEnd::End(h), PortEnd::Switch(lone, 1)).unwrap();
    let g = b.build().unwrap();
    match ftree(&g, &opts()) {
        Err(RoutingError::Disconnected { components, unreachable, partial }) => {
            assert_eq!(components, 2);
            assert_eq!(unreachable, vec![0x55, 0x57]);
            let r = &partial.0;
            assert_eq!(r.lfts.len(), g.num_switches());
            // The tree part is fully routed: compare with the tree alone.
            let alone = ftree(&f, &opts()).unwrap();
            for s in f.switch_ids() {
                assert_eq!(&r.lfts[s.index()].ports[..=usize::from(f.max_lid())], &alone.lfts[s.index()].ports[..]);
            }
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}
