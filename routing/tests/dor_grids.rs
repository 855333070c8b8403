//! Dimension-order routing on meshes, tori and hypercubes: valid, minimal
//! tables, acyclic per VL; typed refusals elsewhere.

#[path = "nue_cdg.rs"]
mod cdg;

use ibsm_routing::analysis::trace;
use ibsm_routing::cdg::{analyze_cdg, CdgScope};
use ibsm_routing::dor::{dor, shapes};
use ibsm_routing::testfab::{self, grid, FatTree, RandomSpec};
use ibsm_routing::{route, EngineKind, EngineOptions, NodeRef, PortEnd, RoutingError, RoutingFabric, SwitchId};
use ibsm_routing::{validate, validate_with_loads};

fn vls(n: u8) -> EngineOptions {
    EngineOptions { max_vls: n, ..Default::default() }
}

fn assert_good(f: &RoutingFabric, max_vls: u8) -> ibsm_routing::Routes {
    let r = dor(f, &vls(max_vls)).unwrap_or_else(|e| panic!("{e}"));
    let rep = validate(f, &r);
    assert!(rep.is_clean() && rep.fully_connected(), "{rep}");
    assert_eq!(rep.delivered, rep.pairs, "{rep}");
    assert!(rep.all_minimal(), "{rep}");
    let cyc = cdg::cyclic_layers(f, &r);
    assert!(cyc.iter().all(|c| !c), "cyclic layers: {cyc:?}");
    assert!(cdg::max_vl(&r).unwrap() < max_vls);
    r
}

#[test]
fn meshes_2d_and_3d() {
    for (sizes, hosts) in [(&[5u8, 4][..], 2u8), (&[3, 3, 3][..], 1), (&[6, 1, 2][..], 1), (&[8][..], 1)] {
        let f = grid(sizes, &vec![false; sizes.len()], 1, hosts);
        let r = assert_good(&f, 1);
        assert!(cdg::max_sl(&r) == Some(0));
    }
}

#[test]
fn tori_2d_and_3d_need_and_use_datelines() {
    // 5x5 torus: two datelines, 4 VLs.
    let f = grid(&[5, 5], &[true, true], 1, 1);
    let r = assert_good(&f, 4);
    assert_eq!(cdg::max_sl(&r), Some(3), "paths crossing both datelines exist");
    // 6x5x3 torus: the 3-ring needs no dateline.
    let f = grid(&[6, 5, 3], &[true, true, true], 1, 1);
    let r = assert_good(&f, 4);
    assert_eq!(cdg::max_sl(&r), Some(3));
    // 5x5x5: 8 VLs.
    let f = grid(&[5, 5, 5], &[true, true, true], 1, 1);
    assert_good(&f, 8);
    // Mixed: a ring of 7 times a line of 4.
    let f = grid(&[7, 4], &[true, false], 1, 1);
    assert_good(&f, 2);
}

/// Without the datelines' SLs (everything on one VL) the same routes on a
/// torus have a credit loop: the SLs are what makes them deadlock free.
#[test]
fn torus_without_its_sls_has_a_credit_loop() {
    let f = grid(&[5, 5], &[true, true], 1, 1);
    let mut r = dor(&f, &vls(4)).unwrap();
    r.sl = None;
    assert_eq!(cdg::cyclic_layers(&f, &r), vec![true]);
}

#[test]
fn too_few_vls_on_a_torus_names_the_shortfall() {
    for f in
        [grid(&[5, 5, 5], &[true, true, true], 1, 1), grid(&[8, 8], &[true, true], 1, 1), grid(&[9], &[true], 1, 1)]
    {
        let e = dor(&f, &vls(1)).unwrap_err();
        assert_eq!(e, RoutingError::TooFewVls { engine: "dor", needed: 2, available: 1 });
        assert!(e.to_string().contains("needs 2 virtual lanes"), "{e}");
        assert_good(&f, 2);
    }
}

/// 3D tori with rings of 5 and 6 on two VLs: the per-hop tables use both,
/// the (channel, VL) graph is acyclic, while the same paths with every hop
/// on one VL have a credit loop (so the tables are what makes them safe)
/// and the old scheme, VL = SL = dateline mask, still holds on 8 VLs.
#[test]
fn tori_3d_need_only_two_vls() {
    for n in [5u8, 6] {
        let f = grid(&[n, n, n], &[true, true, true], 1, 1);
        let r = assert_good(&f, 2);
        let sl = r.sl.as_ref().unwrap();
        assert_eq!(sl.hop_vls.as_ref().unwrap().vls_used(), 2);
        assert_eq!(cdg::max_sl(&r), Some(7), "paths crossing all three datelines exist");
        let rep = analyze_cdg(&f, &r, CdgScope::default());
        assert!(rep.deadlock_free() && rep.hop_vls, "{rep}");
        assert_eq!(rep.vls.iter().map(|v| v.vl).collect::<Vec<_>>(), vec![0, 1]);
        let all = analyze_cdg(&f, &r, CdgScope { include_switches: true });
        assert!(all.deadlock_free(), "{all}");

        // VL = SL: the bitmask scheme on 8 VLs.
        let mut fixed = r.clone();
        fixed.sl.as_mut().unwrap().hop_vls = None;
        let rep = analyze_cdg(&f, &fixed, CdgScope::default());
        assert!(rep.deadlock_free() && !rep.hop_vls && rep.vls.len() == 8, "{rep}");
        // Every hop on VL 0: cyclic, in both checkers.
        let mut zero = r.clone();
        zero.sl = None;
        assert!(!analyze_cdg(&f, &zero, CdgScope::default()).deadlock_free());
        assert_eq!(cdg::cyclic_layers(&f, &zero), vec![true]);
    }
}

/// The tables follow the scheme of the module docs, checked hop by hop on
/// traced paths: a hop rides VL 1 exactly when its path crosses the ring's
/// dateline at that hop or has crossed it earlier in that dimension; the
/// table does not depend on the input port; hops to end ports use VL 0.
#[test]
fn hop_vls_switch_at_the_dateline() {
    let f = grid(&[6, 5, 3], &[true, true, true], 1, 1);
    let r = assert_good(&f, 2);
    let sl = r.sl.as_ref().unwrap();
    let h = sl.hop_vls.as_ref().unwrap();
    let shape = &shapes(&f).unwrap()[0];
    let pos = |s: SwitchId| shape.switches.iter().position(|&x| x == s).unwrap();
    let mut switched = 0;
    for s in f.switch_ids() {
        let p = f.switch(s).num_ports;
        for out in 0..=p {
            let t0 = h.table(s, 0, out);
            for i in 0..=p {
                assert_eq!(h.table(s, i, out), t0, "switch {s:?} in {i} out {out}");
            }
            if !matches!(f.switch_peer(s, out), Some(PortEnd::Switch(..))) {
                assert_eq!(t0, [0; 16], "hops to end ports use VL 0");
            }
        }
        for d in f.end_port_ids() {
            let lid = f.end_port(d).base_lid;
            let t = trace(&f, &r, NodeRef::Switch(s), lid);
            let path_sl = sl.sl(s, lid).unwrap();
            let mut crossed = [false; 3];
            let mut in_port = 0;
            for &(sw, port) in &t.hops {
                let vl = sl.hop_vl(sw, in_port, port, path_sl);
                let Some(PortEnd::Switch(n, rp)) = f.switch_peer(sw, port) else {
                    assert_eq!(vl, 0);
                    continue;
                };
                let (a, b) = (shape.coord(pos(sw)), shape.coord(pos(n)));
                let k = (0..3).find(|&k| a[k] != b[k]).unwrap();
                if a[k].abs_diff(b[k]) > 1 {
                    crossed[k] = true;
                }
                let want = u8::from(crossed[k] && shape.dims[k].has_dateline());
                assert_eq!(vl, want, "{s:?} -> {lid}: hop {sw:?}:{port} dim {k}");
                switched += usize::from(vl == 1);
                in_port = rp;
            }
        }
    }
    assert!(switched > 0);
}

#[test]
fn meshes_and_dateline_free_tori_keep_one_vl_and_no_tables() {
    for f in [
        grid(&[5, 4], &[false, false], 1, 1),
        grid(&[3, 3, 3], &[true, true, true], 1, 1),
        grid(&[4, 4], &[true, true], 1, 1),
        grid(&[3, 4], &[true, false], 1, 1),
    ] {
        let r = assert_good(&f, 1);
        assert_eq!(r.sl.as_ref().unwrap().hop_vls, None);
        let rep = analyze_cdg(&f, &r, CdgScope::default());
        assert!(rep.deadlock_free() && !rep.hop_vls && rep.vls.len() == 1, "{rep}");
    }
}

#[test]
fn hypercubes_and_4x4_tori_route_on_one_vl() {
    assert_good(&grid(&[2, 2, 2, 2], &[false; 4], 1, 1), 1);
    let f = grid(&[4, 4], &[true, true], 1, 1);
    assert_eq!(shapes(&f).unwrap()[0].describe(), "2x2x2x2 hypercube");
    assert_good(&f, 1);
    // A ring of four switches is a 2x2 mesh.
    assert_good(&testfab::ring(4, 2), 1);
}

/// A path corrects dimension 0 completely before dimension 1.
#[test]
fn paths_go_in_dimension_order() {
    let f = grid(&[4, 4], &[false, false], 1, 1);
    let r = dor(&f, &vls(1)).unwrap();
    let shape = &shapes(&f).unwrap()[0];
    let pos = |s: SwitchId| shape.switches.iter().position(|&x| x == s).unwrap();
    for e in f.end_port_ids() {
        for d in f.end_port_ids() {
            let t = trace(&f, &r, NodeRef::End(e), f.end_port(d).base_lid);
            let mut dims_seen = Vec::new();
            for w in t.hops.windows(2) {
                let (a, b) = (shape.coord(pos(w[0].0)), shape.coord(pos(w[1].0)));
                let k = (0..2).find(|&k| a[k] != b[k]).unwrap();
                dims_seen.push(k);
            }
            assert!(dims_seen.windows(2).all(|w| w[0] <= w[1]), "{dims_seen:?}");
        }
    }
}

/// Parallel cables between neighbours share the load: with two cables per
/// neighbour pair, no cable carries more than its twin plus one route's worth.
#[test]
fn parallel_cables_are_balanced() {
    let f = grid(&[4, 3], &[false, false], 2, 2);
    let r = assert_good(&f, 1);
    let (_, loads) = validate_with_loads(&f, &r);
    for s in f.switch_ids() {
        // Ports 1-2: dim 0 plus twins, 3-4: dim 0 minus, 5-6, 7-8: dim 1.
        for pair in [(1u8, 2u8), (3, 4), (5, 6), (7, 8)] {
            let (a, b) = (loads.switch_port(&f, s, pair.0), loads.switch_port(&f, s, pair.1));
            if matches!(f.switch_peer(s, pair.0), Some(PortEnd::Switch(..))) {
                assert!(a.abs_diff(b) <= a.max(b) / 2 + 4, "switch {s:?} ports {pair:?}: {a} vs {b}");
                assert!(a > 0 && b > 0, "both twins used");
            }
        }
    }
    // Torus with doubled cables too.
    assert_good(&grid(&[5, 3], &[true, false], 2, 1), 2);
}

/// The same fabric with every host given LMC `lmc` (LIDs reassigned:
/// hosts first, then switches).
fn with_host_lmc(f: &RoutingFabric, lmc: u8) -> RoutingFabric {
    let mut b = RoutingFabric::builder();
    let mut next = 1u32;
    let mut alloc = |lmc: u8| {
        let span = 1u32 << lmc;
        let base = next.div_ceil(span) * span;
        next = base + span;
        base as u16
    };
    let eps: Vec<_> = f
        .end_ports()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.lmc = lmc;
            e.base_lid = alloc(lmc);
            e
        })
        .collect();
    for s in f.switches() {
        let mut s = s.clone();
        s.base_lid = alloc(0);
        b.add_switch(s).unwrap();
    }
    for e in eps {
        b.add_end_port(e).unwrap();
    }
    for l in f.links() {
        b.connect(l.a, l.b).unwrap();
    }
    b.build().unwrap()
}

/// With LMC 1 and doubled cables, the two LIDs of a host leave a switch by
/// different twins.
#[test]
fn lmc_lids_take_different_parallel_cables() {
    let f = with_host_lmc(&grid(&[3, 2], &[false, false], 2, 1), 1);
    let r = assert_good(&f, 1);
    let mut split = 0;
    for s in f.switch_ids() {
        for e in f.end_port_ids() {
            if f.attached_switch(e).unwrap().0 == s {
                continue;
            }
            let lids: Vec<u16> = f.end_port(e).lids().map(|l| l as u16).collect();
            let (p0, p1) = (r.port(s, lids[0]), r.port(s, lids[1]));
            assert_eq!((p0 - 1) / 2, (p1 - 1) / 2, "same neighbour");
            split += usize::from(p0 != p1);
        }
    }
    // 6 switches x 5 remote hosts.
    assert!(split >= 25, "{split} of 30 LID pairs split over twins");
}

#[test]
fn renumbering_keeps_shape_and_routes() {
    let f0 = grid(&[5, 5], &[true, false], 1, 2);
    let f = testfab::renumbered(&f0, 7);
    let r = assert_good(&f, 2);
    // Same shape whatever the discovery order; same routes by GUID.
    let r0 = dor(&f0, &vls(2)).unwrap();
    for s0 in f0.switch_ids() {
        let g = f0.switch(s0).guid;
        let s = f.switch_ids().find(|&s| f.switch(s).guid == g).unwrap();
        assert_eq!(r.lfts[s.index()], r0.lfts[s0.index()]);
    }
}

#[test]
fn refuses_fat_trees_and_random_graphs() {
    for f in [
        FatTree::full(8, 2).build(),
        FatTree::full(4, 3).build(),
        testfab::spine_leaf(2, 3, 1, 2),
        testfab::random_connected(3, RandomSpec { switches: 20, extra_links: 12, max_hosts_per_switch: 2, max_lmc: 0 }),
    ] {
        match dor(&f, &vls(8)) {
            Err(RoutingError::NotApplicable { engine: "dor", reason }) => assert!(!reason.is_empty()),
            other => panic!("expected NotApplicable, got {other:?}"),
        }
    }
    // A 3x3 mesh with one extra diagonal cable.
    let g = grid(&[3, 3], &[false, false], 1, 0);
    let mut b = RoutingFabric::builder();
    for s in g.switches() {
        let mut s = s.clone();
        s.num_ports += 1;
        b.add_switch(s).unwrap();
    }
    for l in g.links() {
        b.connect(l.a, l.b).unwrap();
    }
    b.connect(PortEnd::Switch(SwitchId(0), 5), PortEnd::Switch(SwitchId(4), 5)).unwrap();
    let e = dor(&b.build().unwrap(), &vls(8)).unwrap_err();
    assert!(matches!(e, RoutingError::NotApplicable { .. }), "{e}");
}

#[test]
fn engine_dispatch_and_chain_fallback() {
    let f = grid(&[3, 3], &[false, false], 1, 1);
    assert!(route(EngineKind::Dor, &f, &vls(1)).is_ok());
    let ft = FatTree::full(4, 2).build();
    let out = ibsm_routing::route_chain(&[EngineKind::Dor, EngineKind::MinHop], &ft, &vls(8)).unwrap();
    assert_eq!(out.engine, EngineKind::MinHop);
    assert!(matches!(out.skipped[0].1, RoutingError::NotApplicable { engine: "dor", .. }));
}

#[test]
fn disconnected_meshes_are_routed_part_by_part() {
    // Two 3x2 meshes side by side (the second one's cables only).
    let a = grid(&[3, 2], &[false, false], 1, 1);
    let mut b = RoutingFabric::builder();
    let ns = a.num_switches() as u32;
    let ne = a.num_end_ports() as u32;
    for copy in 0..2u64 {
        for s in a.switches() {
            let mut s = s.clone();
            s.guid += copy << 32;
            s.base_lid += copy as u16 * 100;
            b.add_switch(s).unwrap();
        }
    }
    for copy in 0..2u64 {
        for e in a.end_ports() {
            let mut e = e.clone();
            e.port_guid += copy << 32;
            e.node_guid += copy << 32;
            e.base_lid += copy as u16 * 100;
            b.add_end_port(e).unwrap();
        }
    }
    let shift = |end: PortEnd, copy: u32| match end {
        PortEnd::Switch(s, p) => PortEnd::Switch(SwitchId(s.0 + copy * ns), p),
        PortEnd::End(e) => PortEnd::End(ibsm_routing::EndPortId(e.0 + copy * ne)),
    };
    for copy in 0..2 {
        for l in a.links() {
            b.connect(shift(l.a, copy), shift(l.b, copy)).unwrap();
        }
    }
    let f = b.build().unwrap();
    let e = dor(&f, &vls(1)).unwrap_err();
    let RoutingError::Disconnected { components, partial, .. } = &e else { panic!("{e}") };
    assert_eq!(*components, 2);
    let rep = validate(&f, &partial.0);
    assert!(rep.is_clean() && rep.all_minimal(), "{rep}");
    assert_eq!(rep.delivered + rep.no_path, rep.pairs);
    assert_eq!(rep.delivered, 2 * 12 * 11, "each part: 12 LIDs, 11 sources each");
}
