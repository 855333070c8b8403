//! `auto`, the engine picked by topology: ftree on fat trees (full and
//! degraded), dor on meshes and tori within the VL budget, the better of
//! updn and nue on one VL elsewhere; every result valid and free of credit
//! loops, disconnected fabrics routed part by part.

use ibsm_routing::auto::{choose, route_auto, AutoOutcome, PassReason};
use ibsm_routing::cdg::{analyze_cdg, CdgScope};
use ibsm_routing::fabric::{EndPort, PortEnd, Switch};
use ibsm_routing::testfab::{self, FatTree, RandomSpec};
use ibsm_routing::{route, validate, EngineKind, EngineOptions, RoutingError, RoutingFabric};

fn vls(n: u8) -> EngineOptions {
    EngineOptions { max_vls: n, ..EngineOptions::default() }
}

/// Auto's outcome after checking what every outcome must be: valid on
/// every connected pair, fully connected, free of credit loops, and the
/// choice saying so.
fn sound(f: &RoutingFabric, options: &EngineOptions, what: &str) -> AutoOutcome {
    let out = route_auto(f, options).unwrap_or_else(|e| panic!("{what}: {e}"));
    let rep = validate(f, &out.routes);
    assert!(rep.is_clean() && rep.fully_connected(), "{what}: {rep}");
    assert_eq!(rep.end_delivered, rep.end_pairs, "{what}: {rep}");
    let cdg = analyze_cdg(f, &out.routes, CdgScope::default());
    assert!(cdg.deadlock_free(), "{what} ({}): {cdg}", out.choice.engine);
    assert!(out.choice.deadlock_free, "{what}");
    assert!(out.choice.engine.claims_deadlock_freedom(), "{what}: {}", out.choice.engine);
    out
}

#[test]
fn fat_trees_full_and_degraded_get_ftree() {
    let trees = [
        ("2-level radix 8", FatTree::full(8, 2).build()),
        ("2-level radix 36", FatTree::full(36, 2).build()),
        ("3-level radix 8", FatTree::full(8, 3).build()),
    ];
    let mut accepted = Vec::new();
    for (name, full) in &trees {
        let out = sound(full, &EngineOptions::default(), name);
        assert_eq!(out.choice.engine, EngineKind::FTree, "{name}: {}", out.choice.reason);
        assert!(out.choice.passed_over.is_empty(), "{name}: {:?}", out.choice.passed_over);
        // The same tables ftree gives on its own.
        assert_eq!(out.routes, route(EngineKind::FTree, full, &EngineOptions::default()).unwrap(), "{name}");
        for seed in [1, 2, 3] {
            let cut = testfab::degraded(full, 15, seed);
            let what = format!("{name}, 15% cut, seed {seed}");
            let out = sound(&cut, &EngineOptions::default(), &what);
            // ftree takes a degraded tree while every end port still has an
            // up/down path to every other; auto follows its verdict.
            match route(EngineKind::FTree, &cut, &EngineOptions::default()) {
                Ok(r) => {
                    assert_eq!(out.choice.engine, EngineKind::FTree, "{what}: {}", out.choice.reason);
                    assert_eq!(out.routes, r, "{what}");
                    accepted.push(what);
                }
                Err(e) => {
                    assert_eq!(out.choice.passed_over[0].engine, EngineKind::FTree, "{what}");
                    assert_eq!(out.choice.passed_over[0].why, PassReason::Refused(e), "{what}");
                    assert_ne!(out.choice.engine, EngineKind::FTree, "{what}");
                }
            }
        }
    }
    // The fabric: 648 hosts on 36-port switches, 15% of the
    // leaf-spine cables gone, is still a fat tree to ftree.
    for seed in [1, 2, 3] {
        assert!(accepted.contains(&format!("2-level radix 36, 15% cut, seed {seed}")), "{accepted:?}");
    }
    let out = sound(&trees[1].1, &vls(1), "2-level radix 36, 1 VL");
    assert_eq!(out.choice.reason, "fat tree detected: 2 levels, 36 leaves → ftree");
    let out = sound(&trees[2].1, &EngineOptions::default(), "3-level radix 8");
    assert_eq!(out.choice.reason, "fat tree detected: 3 levels, 32 leaves → ftree");
}

#[test]
fn a_torus_gets_dor_within_the_vl_budget_and_a_single_vl_engine_below_it() {
    // 5-rings have datelines: dor needs 2 VLs there.
    let f = testfab::grid(&[5, 5, 5], &[true, true, true], 1, 2);
    let out = sound(&f, &vls(8), "5x5x5 torus, 8 VLs");
    assert_eq!(out.choice.engine, EngineKind::Dor, "{}", out.choice.reason);
    assert_eq!(out.choice.reason, "5x5x5 torus within 8 VLs (needs 2) → dor");
    // ftree was tried first and refused.
    assert_eq!(out.choice.passed_over.len(), 1);
    assert_eq!(out.choice.passed_over[0].engine, EngineKind::FTree);
    assert!(matches!(out.choice.passed_over[0].why, PassReason::Refused(RoutingError::NotApplicable { .. })));

    let out = sound(&f, &vls(1), "5x5x5 torus, 1 VL");
    assert_ne!(out.choice.engine, EngineKind::Dor);
    let dor = out.choice.passed_over.iter().find(|p| p.engine == EngineKind::Dor).expect("dor was tried");
    assert!(
        matches!(dor.why, PassReason::Refused(RoutingError::TooFewVls { needed: 2, available: 1, .. })),
        "{}",
        dor.why
    );
    assert!(out.choice.reason.starts_with("no fat tree, and no mesh or torus within 1 VL → "), "{}", out.choice.reason);
}

#[test]
fn the_4x4x4_torus_is_a_hypercube_that_dor_routes_on_one_vl() {
    // A 4-ring is two 2-switch lines, so the 4x4x4 torus is the 6-cube:
    // dor needs no dateline and one VL, and auto takes it at any budget.
    let f = testfab::grid(&[4, 4, 4], &[true, true, true], 1, 2);
    for n in [8, 1] {
        let out = sound(&f, &vls(n), &format!("4x4x4 torus, {n} VLs"));
        assert_eq!(out.choice.engine, EngineKind::Dor, "{}", out.choice.reason);
        assert!(out.choice.reason.contains("hypercube") && out.choice.reason.contains("(needs 1)"));
        assert!(validate(&f, &out.routes).all_minimal());
    }
}

#[test]
fn meshes_get_dor_on_one_vl() {
    let f = testfab::grid(&[4, 3], &[false, false], 1, 2);
    let out = sound(&f, &vls(1), "4x3 mesh");
    assert_eq!(out.choice.engine, EngineKind::Dor, "{}", out.choice.reason);
    assert!(out.choice.reason.starts_with("4x3 mesh within 1 VL"), "{}", out.choice.reason);
}

#[test]
fn dragonflies_get_nue_with_every_global_hop_minimal() {
    // Nue on one VL takes the dragonfly routing there: every path crosses
    // one global cable, its group pair's, which then carries exactly the
    // group-to-group all-to-all (8 x 8 and 12 x 12 end-port pairs); the
    // longer local paths leave no cable more than an eighth above that.
    for (routers, global_floor) in [(4u8, 64u64), (6, 144)] {
        let f = testfab::dragonfly(routers, 2);
        let what = format!("dragonfly r{routers}");
        let out = sound(&f, &EngineOptions::default(), &what);
        assert_eq!(out.choice.engine, EngineKind::Nue, "{what}: {}", out.choice.reason);
        assert!(out.choice.reason.contains("from the dragonfly routing"), "{what}: {}", out.choice.reason);
        let rep = validate(&f, &out.routes);
        assert!(rep.inter_switch_load.max >= global_floor, "{what}: {rep}");
        assert!(rep.inter_switch_load.max <= global_floor + global_floor / 8, "{what}: {rep}");
        assert!(analyze_cdg(&f, &out.routes, CdgScope { include_switches: true }).deadlock_free(), "{what}");
        let updn = validate(&f, &route(EngineKind::UpDn, &f, &vls(1)).unwrap()).inter_switch_load.max;
        assert!(rep.inter_switch_load.max < updn, "{what}: updn {updn}");
    }
}

#[test]
fn random_fabrics_get_the_less_loaded_single_vl_engine() {
    let spec = RandomSpec { switches: 24, extra_links: 30, max_hosts_per_switch: 4, max_lmc: 1 };
    let mut engines = std::collections::HashSet::new();
    for seed in 0..12 {
        let f = testfab::random_connected(seed, spec);
        let what = format!("random seed {seed}");
        let out = sound(&f, &EngineOptions::default(), &what);
        let winner = out.choice.engine;
        assert!(matches!(winner, EngineKind::UpDn | EngineKind::Nue), "{what}: {}", out.choice.reason);
        engines.insert(winner);
        // Both single-VL engines were scored; the loser is the busier one,
        // or nue on a tie.
        let ours = validate(&f, &out.routes).inter_switch_load.max;
        let loser = out
            .choice
            .passed_over
            .iter()
            .find_map(|p| match p.why {
                PassReason::Busier { busiest, winner: w, winner_busiest } => {
                    Some((p.engine, busiest, w, winner_busiest))
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{what}: {:?}", out.choice.passed_over));
        assert_eq!((loser.2, loser.3), (winner, ours), "{what}");
        assert!(loser.1 >= ours, "{what}");
        if loser.1 == ours {
            assert_eq!(winner, EngineKind::UpDn, "{what}: ties go to updn");
        }
        let other = if winner == EngineKind::UpDn { EngineKind::Nue } else { EngineKind::UpDn };
        let theirs = route(other, &f, &vls(1)).unwrap();
        assert_eq!(loser.0, other);
        assert_eq!(validate(&f, &theirs).inter_switch_load.max, loser.1, "{what}");
        assert!(out.choice.reason.contains(&format!("busiest link {ours}")), "{what}: {}", out.choice.reason);
        assert!(out.choice.reason.ends_with("on 1 VL"), "{what}: {}", out.choice.reason);
    }
    eprintln!("winners: {engines:?}");
}

#[test]
fn a_disconnected_fabric_is_routed_part_by_part() {
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

    let err = route_auto(&f, &vls(1)).unwrap_err();
    let RoutingError::Disconnected { components, unreachable, partial } = &err else { panic!("{err:?}") };
    assert_eq!(*components, 3);
    assert_eq!(unreachable, &vec![0xb0, 0xb1, 0x203, 0x204, 0x301]);
    let rep = validate(&f, &partial.0);
    assert!(rep.is_clean() && !rep.fully_connected(), "{rep}");
    // Part A: 6 LIDs x 5 other sources; part B: 4 x 3; the lone host nothing.
    assert_eq!(rep.delivered, 6 * 5 + 4 * 3, "{rep}");
    assert!(analyze_cdg(&f, &partial.0, CdgScope::default()).deadlock_free());

    // choose keeps the choice: a 3-ring and a 2-switch line are both
    // shapes dor routes on one VL.
    let out = choose(&f, &vls(1)).unwrap();
    assert_eq!(out.choice.engine, EngineKind::Dor, "{}", out.choice.reason);
    assert_eq!(out.routes, partial.0.as_ref().clone());
    let parts = out.parts.expect("disconnected");
    assert_eq!((parts.components, &parts.unreachable), (3, unreachable));

    // An irregular part next to a lone switch: the single-VL stage sees
    // the split too, and still routes every part.
    let big =
        testfab::random_connected(5, RandomSpec { switches: 10, extra_links: 8, max_hosts_per_switch: 3, max_lmc: 0 });
    let mut b = RoutingFabric::builder();
    let ids: Vec<_> = big.switches().iter().map(|s| b.add_switch(s.clone()).unwrap()).collect();
    let eps: Vec<_> = big.end_ports().iter().map(|e| b.add_end_port(e.clone()).unwrap()).collect();
    let map = |p: PortEnd| match p {
        PortEnd::Switch(s, n) => PortEnd::Switch(ids[s.index()], n),
        PortEnd::End(e) => PortEnd::End(eps[e.index()]),
    };
    for l in big.links() {
        b.connect(map(l.a), map(l.b)).unwrap();
    }
    let lone = b.add_switch(Switch::new(0xfeed, 4, big.max_lid() + 1)).unwrap();
    let h = b.add_end_port(EndPort::new(0xbeef, 0xbeef, 1, big.max_lid() + 2)).unwrap();
    b.connect(PortEnd::End(h), PortEnd::Switch(lone, 1)).unwrap();
    let f = b.build().unwrap();
    let out = choose(&f, &vls(1)).unwrap();
    assert!(matches!(out.choice.engine, EngineKind::UpDn | EngineKind::Nue), "{}", out.choice.reason);
    assert!(out.parts.as_ref().is_some_and(|p| p.unreachable.contains(&0xfeed)), "{:?}", out.parts);
    let rep = validate(&f, &out.routes);
    assert!(rep.is_clean() && rep.delivered + rep.no_path == rep.pairs, "{rep}");
    assert!(analyze_cdg(&f, &out.routes, CdgScope::default()).deadlock_free());
    assert!(matches!(route_auto(&f, &vls(1)), Err(RoutingError::Disconnected { .. })));
}
