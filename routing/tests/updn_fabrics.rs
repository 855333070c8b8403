//! updn and dnup on fat trees, rings, meshes, tori and odd cases.

mod updn_util;

use ibsm_routing::testfab::{self, FatTree};
use ibsm_routing::updn::{detect_roots, dnup, updn, UpDownOrder};
use ibsm_routing::{minhop, validate, EngineOptions, Routes, RoutingError, RoutingFabric};
use updn_util::{cdg_is_acyclic, end_port_stretch, grid, illegal_paths};

fn opts() -> EngineOptions {
    EngineOptions::default()
}

/// Valid, every pair delivered, every path legal for its order, acyclic.
fn assert_sound(f: &RoutingFabric, r: &Routes, o: &UpDownOrder, what: &str) {
    let rep = validate(f, r);
    assert!(rep.is_clean(), "{what}: {rep}");
    assert!(rep.fully_connected(), "{what}: {rep}");
    assert_eq!(rep.delivered, rep.pairs, "{what}: {rep}");
    let bad = illegal_paths(f, r, o);
    assert!(bad.is_empty(), "{what}: {} illegal paths, e.g. {:?}", bad.len(), &bad[..bad.len().min(5)]);
    assert!(cdg_is_acyclic(f, r), "{what}: channel dependency cycle");
}

#[test]
fn fat_trees_are_sound_minimal_and_balanced_like_minhop() {
    let trees = [
        FatTree::full(4, 2),
        FatTree::full(8, 2),
        FatTree::full(36, 2),
        FatTree::full(4, 3),
        FatTree::full(8, 3),
        FatTree::new(8, 3, 50),
        FatTree::full(12, 3),
    ];
    for ft in trees {
        let f = ft.build();
        let mh = validate(&f, &minhop(&f).unwrap());
        for (name, r, o) in [
            ("updn", updn(&f, &opts()).unwrap(), UpDownOrder::updn(&f, &opts()).unwrap()),
            ("dnup", dnup(&f, &opts()).unwrap(), UpDownOrder::dnup(&f)),
        ] {
            let what = format!("{name} on {ft:?}");
            assert_sound(&f, &r, &o, &what);
            let (pairs, longer) = end_port_stretch(&f, &r);
            assert!(pairs > 0);
            assert_eq!(longer, 0, "{what}: {longer} of {pairs} host paths are not shortest");
            let rep = validate(&f, &r);
            if ft.hosts == FatTree::capacity(ft.radix, ft.levels) {
                assert_eq!(rep.inter_switch_load.max, mh.inter_switch_load.max, "{what}: {rep}\nminhop: {mh}");
            }
            if ft.levels == 2 {
                assert!(rep.all_minimal(), "{what}: {rep}");
            }
        }
    }
}

#[test]
fn rings_and_tori_are_acyclic_where_minhop_is_not() {
    for (name, f) in [
        ("ring 5", testfab::ring(5, 2)),
        ("ring 7", testfab::ring(7, 1)),
        ("torus 4x4", grid(&[4, 4], true, 1)),
        ("torus 3x3x3", grid(&[3, 3, 3], true, 1)),
        ("mesh 4x5", grid(&[4, 5], false, 2)),
    ] {
        let mh = minhop(&f).unwrap();
        assert!(validate(&f, &mh).is_clean());
        // MinHop's shortest paths chain around every cycle of the cabling.
        assert!(!cdg_is_acyclic(&f, &mh), "{name}: minhop was expected to have a credit loop");
        assert_sound(
            &f,
            &updn(&f, &opts()).unwrap(),
            &UpDownOrder::updn(&f, &opts()).unwrap(),
            &format!("updn {name}"),
        );
        assert_sound(&f, &dnup(&f, &opts()).unwrap(), &UpDownOrder::dnup(&f), &format!("dnup {name}"));
    }
}

#[test]
fn detected_roots() {
    let name = |f: &RoutingFabric, v: Vec<ibsm_routing::SwitchId>| -> Vec<String> {
        v.iter().map(|s| f.switch(*s).name.clone()).collect()
    };
    let f = FatTree::full(8, 2).build();
    let roots = name(&f, detect_roots(&f));
    assert_eq!(roots.len(), 4);
    assert!(roots.iter().all(|n| n.starts_with("sw-L2")), "{roots:?}");
    let f = FatTree::full(8, 3).build();
    let roots = name(&f, detect_roots(&f));
    assert_eq!(roots.len(), 16);
    assert!(roots.iter().all(|n| n.starts_with("sw-L3")), "{roots:?}");
    let f = FatTree::new(8, 3, 40).build();
    let roots = name(&f, detect_roots(&f));
    assert!(!roots.is_empty() && roots.iter().all(|n| n.starts_with("sw-L3")), "{roots:?}");
    // A torus: all switches are alike.
    let f = grid(&[4, 4], true, 1);
    assert_eq!(detect_roots(&f).len(), 16);
    // A mesh: the centre.
    let f = grid(&[5, 5], false, 1);
    assert_eq!(name(&f, detect_roots(&f)), vec!["g12".to_string()]);
}

/// Random fabrics with given roots where the first switch of the order has
/// no clean way down to some destination, so a compulsory all-down path is
/// laid (found by searching seeds; see the module documentation of updn).
#[test]
fn compulsory_down_paths_stay_sound() {
    for seed in [1427u64, 1604, 2938] {
        let spec = testfab::RandomSpec {
            switches: 5 + (seed % 60) as usize,
            extra_links: (seed % 70) as usize,
            max_hosts_per_switch: 2,
            max_lmc: 0,
        };
        let f = testfab::random_connected(seed, spec);
        let roots: Vec<u64> =
            f.switches().iter().enumerate().filter(|(i, _)| (seed >> (i % 13)) & 1 == 1).map(|(_, s)| s.guid).collect();
        let o = EngineOptions { root_guids: roots, ..opts() };
        assert_sound(&f, &updn(&f, &o).unwrap(), &UpDownOrder::updn(&f, &o).unwrap(), &format!("seed {seed}"));
    }
}

#[test]
fn root_file_with_an_unknown_guid_is_an_input_error_naming_it() {
    use ibsm_routing::guidfile::{load_guid_file, GuidKind};
    let f = FatTree::full(8, 2).build();
    let spines: Vec<u64> = f.switches().iter().filter(|s| s.name.starts_with("sw-L2")).map(|s| s.guid).collect();
    let mut text = String::from("# spines\n");
    for g in &spines {
        text.push_str(&format!("{g:#x}\n"));
    }
    // Given the spines, updn routes exactly as with detected roots.
    let roots = load_guid_file(&text, "roots.conf", &f, GuidKind::Switch).unwrap();
    let given = EngineOptions { root_guids: roots, ..opts() };
    assert_eq!(updn(&f, &given).unwrap(), updn(&f, &opts()).unwrap());

    text.push_str("0x0002c903deadbeef\n");
    let err = load_guid_file(&text, "roots.conf", &f, GuidKind::Switch).unwrap_err();
    let RoutingError::Input { file, line, problem } = &err else { panic!("{err:?}") };
    assert_eq!((file.as_str(), *line), ("roots.conf", spines.len() + 2));
    assert!(problem.contains("0x0002c903deadbeef"), "{err}");

    // The engine itself refuses unknown roots rather than ignoring them.
    let bad = EngineOptions { root_guids: vec![spines[0], 0xdead], ..opts() };
    let err = updn(&f, &bad).unwrap_err();
    let RoutingError::Input { line, problem, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*line, 2);
    assert!(problem.contains("0x000000000000dead"), "{err}");
    let host = f.end_ports()[0].port_guid;
    let err =
        ibsm_routing::route(ibsm_routing::EngineKind::UpDn, &f, &EngineOptions { root_guids: vec![host], ..opts() })
            .unwrap_err();
    assert!(matches!(err, RoutingError::Input { .. }), "{err:?}");
}

#[test]
fn a_poor_root_choice_is_still_sound() {
    // A leaf as the only root of a fat tree: everything goes through it.
    let f = FatTree::full(8, 3).build();
    let leaf = f.switches().iter().find(|s| s.name.starts_with("sw-L1")).unwrap().guid;
    let o = EngineOptions { root_guids: vec![leaf], ..opts() };
    let r = updn(&f, &o).unwrap();
    assert_sound(&f, &r, &UpDownOrder::updn(&f, &o).unwrap(), "leaf root");
    let order = UpDownOrder::updn(&f, &o).unwrap();
    assert_eq!(order.roots().len(), 1);
    assert_eq!(f.switch(order.switches()[0]).guid, leaf);
}

#[test]
fn engine_dispatch_and_chain() {
    use ibsm_routing::{route, route_chain, EngineKind};
    let f = testfab::ring(6, 2);
    assert_eq!(route(EngineKind::UpDn, &f, &opts()).unwrap(), updn(&f, &opts()).unwrap());
    assert_eq!(route(EngineKind::DnUp, &f, &opts()).unwrap(), dnup(&f, &opts()).unwrap());
    let out = route_chain(&[EngineKind::UpDn, EngineKind::MinHop], &f, &opts()).unwrap();
    assert_eq!(out.engine, EngineKind::UpDn);
    assert!(out.skipped.is_empty());
}

#[test]
fn disconnected_fabric_routes_each_part_and_names_the_rest() {
    use ibsm_routing::fabric::{EndPort, PortEnd, Switch};
    // Part A: a ring of three switches with a host each; part B: two
    // switches with a host; a lone host.
    let mut b = RoutingFabric::builder();
    let a: Vec<_> = (0..3u64).map(|i| b.add_switch(Switch::new(0xa0 + i, 4, 1 + i as u16)).unwrap()).collect();
    let bs: Vec<_> = (0..2u64).map(|i| b.add_switch(Switch::new(0xb0 + i, 4, 4 + i as u16)).unwrap()).collect();
    for i in 0..3 {
        b.connect(PortEnd::Switch(a[i], 1), PortEnd::Switch(a[(i + 1) % 3], 2)).unwrap();
    }
    b.connect(PortEnd::Switch(bs[0], 1), PortEnd::Switch(bs[1], 1)).unwrap();
    for (k, &s) in a.iter().chain(&bs).enumerate() {
        let h = b.add_end_port(EndPort::new(0x100 + k as u64, 0x200 + k as u64, 1, 10 + k as u16)).unwrap();
        b.connect(PortEnd::End(h), PortEnd::Switch(s, 3)).unwrap();
    }
    b.add_end_port(EndPort::new(0x300, 0x301, 1, 30)).unwrap();
    let f = b.build().unwrap();
    for (name, res, order) in [
        ("updn", updn(&f, &opts()), UpDownOrder::updn(&f, &opts()).unwrap()),
        ("dnup", dnup(&f, &opts()), UpDownOrder::dnup(&f)),
    ] {
        let err = res.unwrap_err();
        let RoutingError::Disconnected { components, unreachable, partial } = &err else { panic!("{err:?}") };
        assert_eq!(*components, 3, "{name}");
        assert_eq!(unreachable, &vec![0xb0, 0xb1, 0x203, 0x204, 0x301], "{name}");
        let r = &partial.0;
        let rep = validate(&f, r);
        assert!(rep.is_clean(), "{name}: {rep}");
        assert!(!rep.fully_connected());
        // Part A: 6 LIDs x 5 other sources; part B: 4 x 3; the lone host nothing.
        assert_eq!(rep.delivered, 6 * 5 + 4 * 3, "{name}: {rep}");
        assert_eq!(rep.delivered + rep.no_path, rep.pairs, "{name}: {rep}");
        assert!(updn_util::illegal_paths(&f, r, &order).is_empty(), "{name}");
        assert!(cdg_is_acyclic(&f, r), "{name}");
        // Every part has its own first switch and roots.
        assert!(order.roots().iter().any(|s| f.switch(*s).guid >> 4 == 0xa), "{name}");
        assert!(order.roots().iter().any(|s| f.switch(*s).guid >> 4 == 0xb), "{name}");
    }
}

#[test]
fn lmc_spreads_a_hosts_lids_over_different_spines() {
    use ibsm_routing::fabric::{PortEnd, SwitchId};
    // Radix 8, 2 levels: 4 spines; LMC 2 gives each host 4 LIDs.
    let f = FatTree { host_lmc: 2, ..FatTree::new(8, 2, 16) }.build();
    for (name, r, o) in [
        ("updn", updn(&f, &opts()).unwrap(), UpDownOrder::updn(&f, &opts()).unwrap()),
        ("dnup", dnup(&f, &opts()).unwrap(), UpDownOrder::dnup(&f)),
    ] {
        assert_sound(&f, &r, &o, name);
        let (pairs, longer) = end_port_stretch(&f, &r);
        assert_eq!((pairs, longer), (16 * 15 * 4, 0), "{name}");
        for leaf in f.switch_ids().filter(|s| f.switch(*s).name.starts_with("sw-L1")) {
            for e in f.end_port_ids().filter(|e| f.attached_switch(*e).unwrap().0 != leaf) {
                let mut next: Vec<SwitchId> = f
                    .end_port(e)
                    .lids()
                    .map(|lid| match f.switch_peer(leaf, r.port(leaf, lid as u16)) {
                        Some(PortEnd::Switch(n, _)) => n,
                        other => panic!("up-link expected, got {other:?}"),
                    })
                    .collect();
                next.sort();
                next.dedup();
                assert_eq!(next.len(), 4, "{name}: end port {e:?} from leaf {leaf:?}: 4 LIDs over 4 spines");
            }
        }
    }
}

#[test]
fn small_and_degenerate_fabrics() {
    for (name, f) in [
        ("single switch", testfab::single_switch(3)),
        ("back to back", testfab::back_to_back()),
        ("spine-leaf parallel", testfab::spine_leaf(2, 3, 2, 2)),
    ] {
        for (e, r, o) in [
            ("updn", updn(&f, &opts()).unwrap(), UpDownOrder::updn(&f, &opts()).unwrap()),
            ("dnup", dnup(&f, &opts()).unwrap(), UpDownOrder::dnup(&f)),
        ] {
            assert_sound(&f, &r, &o, &format!("{e} {name}"));
            assert!(validate(&f, &r).all_minimal(), "{e} {name}");
        }
    }
    // Switches only: no end port to rank from, every switch LID routed.
    let mut g = grid(&[3, 3], false, 0);
    assert_eq!(g.num_end_ports(), 0);
    assert_eq!(detect_roots(&g).len(), 1, "the centre of the switch graph");
    assert_sound(&g, &updn(&g, &opts()).unwrap(), &UpDownOrder::updn(&g, &opts()).unwrap(), "switch grid updn");
    assert_sound(&g, &dnup(&g, &opts()).unwrap(), &UpDownOrder::dnup(&g), "switch grid dnup");
    g = testfab::renumbered(&g, 3);
    assert_sound(&g, &updn(&g, &opts()).unwrap(), &UpDownOrder::updn(&g, &opts()).unwrap(), "renumbered");
}

/// dnup ranks from the end ports: with storage hosts on one spine of a
/// two-level tree, that spine sits at the bottom with the leaves and the
/// other spines are the top; updn (roots detected) keeps all spines roots.
#[test]
fn dnup_ranks_from_the_end_ports() {
    use ibsm_routing::fabric::{EndPort, PortEnd, Switch};
    let mut b = RoutingFabric::builder();
    let leaves: Vec<_> = (0..4u64).map(|i| b.add_switch(Switch::new(0x10 + i, 8, 1 + i as u16)).unwrap()).collect();
    let spines: Vec<_> = (0..3u64).map(|i| b.add_switch(Switch::new(0x20 + i, 8, 5 + i as u16)).unwrap()).collect();
    for (li, &l) in leaves.iter().enumerate() {
        for (si, &s) in spines.iter().enumerate() {
            b.connect(PortEnd::Switch(l, 5 + si as u8), PortEnd::Switch(s, 1 + li as u8)).unwrap();
        }
    }
    let mut lid = 20;
    let mut host = |b: &mut ibsm_routing::FabricBuilder, s, p| {
        let e = b.add_end_port(EndPort::new(0x1000 + u64::from(lid), 0x2000 + u64::from(lid), 1, lid)).unwrap();
        lid += 1;
        b.connect(PortEnd::End(e), PortEnd::Switch(s, p)).unwrap();
    };
    for &l in &leaves {
        for p in 1..=4 {
            host(&mut b, l, p);
        }
    }
    host(&mut b, spines[0], 7);
    let f = b.build().unwrap();
    let o = UpDownOrder::dnup(&f);
    let guids = |v: &[ibsm_routing::SwitchId]| v.iter().map(|s| f.switch(*s).guid).collect::<Vec<_>>();
    assert_eq!(guids(o.roots()), vec![0x21, 0x22]);
    assert_eq!(o.rank(spines[0]), 1);
    assert_eq!(guids(&detect_roots(&f)), vec![0x20, 0x21, 0x22]);
    for (name, r, o) in [
        ("updn", updn(&f, &opts()).unwrap(), UpDownOrder::updn(&f, &opts()).unwrap()),
        ("dnup", dnup(&f, &opts()).unwrap(), o),
    ] {
        assert_sound(&f, &r, &o, name);
        assert_eq!(end_port_stretch(&f, &r).1, 0, "{name}");
    }
}
