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
