//! Nue on rings, tori, meshes, fat trees and random fabrics with 1, 2 and
//! 4 virtual layers: every pair delivered, no loops, every layer's channel
//! dependency graph acyclic.

mod nue_cdg;
use nue_cdg as cdg;

use ibsm_routing::analysis::trace;
use ibsm_routing::nue::{nue, nue_with_stats};
use ibsm_routing::testfab::{self, grid, FatTree, RandomSpec};
use ibsm_routing::{route, validate, EngineKind, EngineOptions, NodeRef, Routes, RoutingError, RoutingFabric};

fn vls(n: u8) -> EngineOptions {
    EngineOptions { max_vls: n, ..Default::default() }
}

/// Valid, complete and acyclic per layer for all traffic to end ports,
/// SLs within the budget; acyclic for traffic to switch LIDs too when no
/// such route was left outside the layers.
fn assert_deadlock_free(f: &RoutingFabric, max_vls: u8) -> Routes {
    let (r, st) = nue_with_stats(f, &vls(max_vls)).unwrap_or_else(|e| panic!("{e}"));
    let rep = validate(f, &r);
    assert!(rep.is_clean() && rep.fully_connected(), "{rep}");
    assert_eq!(rep.delivered, rep.pairs, "{rep}");
    assert!(cdg::max_sl(&r).unwrap() < max_vls, "SL within {max_vls} VLs");
    let cyc = cdg::cyclic_layers_to_end_ports(f, &r);
    assert!(cyc.iter().all(|c| !c), "cyclic layers {cyc:?} with {max_vls} VLs");
    if st.unlayered == 0 {
        let cyc = cdg::cyclic_layers(f, &r);
        assert!(cyc.iter().all(|c| !c), "switch LIDs: cyclic layers {cyc:?} with {max_vls} VLs");
    }
    r
}

/// Switches with end ports: every LID, theirs included, is in the layers.
#[test]
fn switch_lids_of_switches_with_end_ports_are_layered() {
    for f in [testfab::ring(6, 1), grid(&[4, 4], &[true, true], 1, 1), grid(&[3, 3, 3], &[false; 3], 1, 1)] {
        for v in [1u8, 3] {
            let (r, st) = nue_with_stats(&f, &vls(v)).unwrap();
            assert_eq!(st.unlayered, 0);
            assert!(cdg::cyclic_layers(&f, &r).iter().all(|c| !c));
        }
    }
}

#[test]
fn rings_with_one_two_and_four_layers() {
    for n in [3u8, 4, 5, 8, 11] {
        for v in [1u8, 2, 4] {
            assert_deadlock_free(&testfab::ring(n, 2), v);
        }
    }
}

/// One VL on a ring: some route must go the long way round or break at a
/// turn, since shortest paths both ways close the ring.
#[test]
fn one_layer_ring_is_acyclic_where_minhop_is_not() {
    let f = testfab::ring(6, 1);
    let r = assert_deadlock_free(&f, 1);
    let mh = ibsm_routing::minhop(&f).unwrap();
    assert_eq!(cdg::cyclic_layers(&f, &mh), vec![true]);
    assert!(validate(&f, &r).is_clean());
}

#[test]
fn tori_and_meshes() {
    for (sizes, wrap) in [
        (&[4u8, 4][..], &[true, true][..]),
        (&[5, 5][..], &[true, true][..]),
        (&[3, 3, 3][..], &[true, true, true][..]),
        (&[4, 3, 3][..], &[false, false, false][..]),
        (&[6, 4][..], &[true, false][..]),
    ] {
        let f = grid(sizes, wrap, 1, 1);
        for v in [1u8, 2, 4] {
            assert_deadlock_free(&f, v);
        }
    }
    // Parallel cables.
    assert_deadlock_free(&grid(&[5, 3], &[true, true], 2, 1), 1);
}

/// End-port to end-port pairs whose path is longer than the shortest.
fn long_host_paths(f: &RoutingFabric, r: &Routes) -> usize {
    let (mut dist, mut q) = (Vec::new(), Vec::new());
    let mut long = 0;
    for b in f.end_port_ids() {
        let (sb, _) = f.attached_switch(b).unwrap();
        f.switch_distances(sb, &mut dist, &mut q);
        for a in f.end_port_ids().filter(|&a| a != b) {
            let (sa, _) = f.attached_switch(a).unwrap();
            let t = trace(f, r, NodeRef::End(a), f.end_port(b).base_lid);
            // One hop per switch on the way, the first from the source's switch.
            long += usize::from(t.hops.len() as u32 > dist[sa.index()] + 1);
        }
    }
    long
}

#[test]
fn fat_trees_route_hosts_minimally_and_balanced() {
    for ft in [FatTree::full(4, 2), FatTree::full(8, 2), FatTree::full(4, 3), FatTree::new(8, 3, 50)] {
        let f = ft.build();
        for v in [1u8, 2, 4] {
            let r = assert_deadlock_free(&f, v);
            // Between end ports a fat tree's shortest paths are up*/down*,
            // which is acyclic: Nue has no reason to leave them. (Paths
            // between switches may be longer: two top switches' shortest
            // path turns down then up.)
            assert_eq!(long_host_paths(&f, &r), 0, "{ft:?} {v} VLs");
        }
    }
    // Full 2-level radix 8: 8 leaves x 4 hosts; the ideal all-to-all load
    // per up-link is 4 hosts x 28 remote hosts / 4 up-links = 28.
    let f = FatTree::full(8, 2).build();
    let rep = validate(&f, &nue(&f, &vls(1)).unwrap());
    assert!(rep.inter_switch_load.max <= 32, "{rep}");
}

#[test]
fn random_fabrics() {
    let spec = RandomSpec { switches: 24, extra_links: 30, max_hosts_per_switch: 3, max_lmc: 1 };
    for seed in 0..6 {
        let f = testfab::random_connected(seed, spec);
        for v in [1u8, 2, 4] {
            assert_deadlock_free(&f, v);
        }
    }
}

#[test]
fn layers_and_sls() {
    let f = grid(&[5, 5], &[true, true], 1, 2);
    let (r, st) = nue_with_stats(&f, &vls(4)).unwrap();
    assert_eq!(st.layers, 4);
    assert_eq!(st.destinations, 75, "50 hosts + 25 switches");
    // Every source switch sees the same SL per LID (destination-based),
    // stored once, and all four layers are in use.
    let sl = &r.sl.as_ref().unwrap().by_source_switch;
    assert_eq!(sl.len(), f.num_switches());
    assert!(sl.iter().all(|row| *row == sl[0]));
    assert!(sl.is_per_destination(), "one SL row for all switches");
    let mut used = [false; 4];
    for lid in 1..=f.max_lid() {
        used[usize::from(sl[0][usize::from(lid)])] = true;
    }
    assert_eq!(used, [true; 4]);
    // More VLs than destinations: one layer per destination at most.
    let f = testfab::single_switch(2);
    let (_, st) = nue_with_stats(&f, &vls(8)).unwrap();
    assert_eq!(st.layers, 2, "the switch LID follows its end ports");
}

#[test]
fn fabrics_without_switch_links() {
    let f = testfab::back_to_back();
    let r = assert_deadlock_free(&f, 1);
    assert!(r.lfts.is_empty());
    assert_deadlock_free(&testfab::single_switch(3), 2);
    let r = ibsm_routing::dor::dor(&testfab::single_switch(3), &vls(1)).unwrap();
    assert!(validate(&testfab::single_switch(3), &r).is_clean());
}

#[test]
fn zero_vls_is_a_typed_error_and_dispatch_works() {
    let f = testfab::ring(4, 1);
    assert_eq!(nue(&f, &vls(0)).unwrap_err(), RoutingError::TooFewVls { engine: "nue", needed: 1, available: 0 });
    assert!(route(EngineKind::Nue, &f, &vls(1)).is_ok());
}

#[test]
fn independent_of_discovery_order() {
    let f =
        testfab::random_connected(5, RandomSpec { switches: 16, extra_links: 20, max_hosts_per_switch: 2, max_lmc: 0 });
    let r = nue(&f, &vls(2)).unwrap();
    let g = testfab::renumbered(&f, 9);
    let rg = nue(&g, &vls(2)).unwrap();
    for s in f.switch_ids() {
        let guid = f.switch(s).guid;
        let t = g.switch_ids().find(|&t| g.switch(t).guid == guid).unwrap();
        assert_eq!(r.lfts[s.index()], rg.lfts[t.index()]);
    }
}

#[test]
fn disconnected_fabric_routes_every_part() {
    let mut b = RoutingFabric::builder();
    let ring = testfab::ring(5, 1);
    for s in ring.switches() {
        b.add_switch(s.clone()).unwrap();
    }
    for e in ring.end_ports() {
        b.add_end_port(e.clone()).unwrap();
    }
    // Leave out the cables of switch 0 to the ring: it is cut off with its host.
    for l in ring.links() {
        let touches0 =
            [l.a, l.b].iter().any(|e| matches!(e, ibsm_routing::PortEnd::Switch(s, p) if s.0 == 0 && *p <= 2));
        if !touches0 {
            b.connect(l.a, l.b).unwrap();
        }
    }
    let f = b.build().unwrap();
    let e = nue(&f, &vls(1)).unwrap_err();
    let RoutingError::Disconnected { components, partial, .. } = &e else { panic!("{e}") };
    assert_eq!(*components, 2);
    let rep = validate(&f, &partial.0);
    assert!(rep.is_clean(), "{rep}");
    assert_eq!(rep.delivered + rep.no_path, rep.pairs);
    assert!(cdg::cyclic_layers_to_end_ports(&f, &partial.0).iter().all(|c| !c));
}

/// Fabrics on which the greedy search strands switches on the way to an
/// end port even after backtracking: escape paths take over for them, and
/// the result still validates and stays acyclic (a 7x7 torus with 4 and 6
/// layers; a random fabric with one). On an 8x8 torus with 4 layers
/// backtracking alone resolves every impasse.
#[test]
fn stranded_switches_take_escape_paths() {
    let torus = grid(&[7, 7], &[true, true], 1, 1);
    let random = testfab::random_connected(
        74,
        RandomSpec { switches: 22, extra_links: 19, max_hosts_per_switch: 2, max_lmc: 0 },
    );
    for (f, v) in [(&torus, 4u8), (&torus, 6), (&random, 1)] {
        let (_, st) = nue_with_stats(f, &vls(v)).unwrap();
        assert!(st.escaped_switches > 0, "{st:?}");
        assert_deadlock_free(f, v);
    }
    let f = grid(&[8, 8], &[true, true], 1, 1);
    let (_, st) = nue_with_stats(&f, &vls(4)).unwrap();
    assert!(st.backtracks > 0 && st.escaped_switches == 0, "{st:?}");
    assert_deadlock_free(&f, 4);
}
