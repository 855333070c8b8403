//! Property tests: on seeded random connected fabrics updn and dnup deliver
//! every LID from every source, on legal up*/down* paths, with an acyclic
//! channel dependency graph; with any subset of switches given as roots too.

mod updn_util;

use ibsm_routing::testfab::{random_connected, renumbered, RandomSpec};
use ibsm_routing::updn::{dnup, updn, UpDownOrder};
use ibsm_routing::{validate, EngineOptions, Routes, RoutingError, RoutingFabric};
use proptest::prelude::*;
use updn_util::{cdg_is_acyclic, illegal_paths};

fn spec() -> impl Strategy<Value = (u64, RandomSpec)> {
    (any::<u64>(), 1usize..24, 0usize..30, 0usize..4, 0u8..=2).prop_map(
        |(seed, switches, extra_links, max_hosts_per_switch, max_lmc)| {
            (seed, RandomSpec { switches, extra_links, max_hosts_per_switch, max_lmc })
        },
    )
}

fn check(f: &RoutingFabric, r: Result<Routes, RoutingError>, o: &UpDownOrder, what: &str) -> Result<(), TestCaseError> {
    let r = r.map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    prop_assert_eq!(r.lfts.len(), f.num_switches());
    for l in &r.lfts {
        prop_assert_eq!(l.linear_fdb_top().0, f.max_lid());
    }
    let rep = validate(f, &r);
    prop_assert!(rep.is_clean(), "{}: {}", what, rep);
    prop_assert!(rep.fully_connected(), "{}: {}", what, rep);
    prop_assert_eq!(rep.delivered, rep.pairs, "{}: {}", what, rep);
    let bad = illegal_paths(f, &r, o);
    prop_assert!(bad.is_empty(), "{}: illegal paths {:?}", what, &bad[..bad.len().min(5)]);
    prop_assert!(cdg_is_acyclic(f, &r), "{}: channel dependency cycle", what);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn updn_and_dnup_are_sound_on_random_connected_fabrics((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        let o = EngineOptions::default();
        check(&f, updn(&f, &o), &UpDownOrder::updn(&f, &o).unwrap(), &format!("updn seed {seed} {spec:?}"))?;
        check(&f, dnup(&f, &o), &UpDownOrder::dnup(&f), &format!("dnup seed {seed} {spec:?}"))?;
    }

    /// Any non-empty set of switches as roots (a root file written for
    /// another fabric, a poor choice) still gives sound tables.
    #[test]
    fn updn_with_arbitrary_roots_is_sound((seed, spec) in spec(), pick in any::<u64>()) {
        let f = random_connected(seed, spec);
        let roots: Vec<u64> = f.switches().iter().enumerate()
            .filter(|(i, _)| pick >> (i % 64) & 1 == 1)
            .map(|(_, s)| s.guid)
            .collect();
        let o = EngineOptions { root_guids: roots, ..EngineOptions::default() };
        check(&f, updn(&f, &o), &UpDownOrder::updn(&f, &o).unwrap(), &format!("updn seed {seed} roots {:?}", o.root_guids))?;
    }

    /// In both orders every switch but the first of its part has an earlier
    /// neighbour (so every switch reaches every other legally), and updn
    /// roots have rank 0.
    #[test]
    fn orders_are_connected((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        for o in [UpDownOrder::updn(&f, &EngineOptions::default()).unwrap(), UpDownOrder::dnup(&f)] {
            prop_assert_eq!(o.switches().len(), f.num_switches());
            for (i, s) in o.switches().iter().enumerate() {
                prop_assert_eq!(o.position(*s), i as u32);
                if i > 0 {
                    prop_assert!(f.switch_neighbors(*s).iter().any(|e| o.position(e.neighbor) < i as u32));
                }
            }
            prop_assert!(!o.roots().is_empty());
        }
        let o = UpDownOrder::updn(&f, &EngineOptions::default()).unwrap();
        prop_assert!(o.roots().iter().all(|s| o.rank(*s) == 0));
    }

    /// The tables depend on GUIDs and cabling, not on switch numbering.
    #[test]
    fn updn_is_independent_of_numbering((seed, spec) in spec(), perm in any::<u64>()) {
        let f = random_connected(seed, spec);
        let g = renumbered(&f, perm);
        let by_guid = |fab: &RoutingFabric, r: &Routes| {
            let mut v: Vec<(u64, Vec<u8>)> =
                fab.switch_ids().map(|s| (fab.switch(s).guid, r.lfts[s.index()].ports.clone())).collect();
            v.sort();
            v
        };
        let o = EngineOptions::default();
        prop_assert!(by_guid(&f, &updn(&f, &o).unwrap()) == by_guid(&g, &updn(&g, &o).unwrap()));
        prop_assert!(by_guid(&f, &dnup(&f, &o).unwrap()) == by_guid(&g, &dnup(&g, &o).unwrap()));
    }
}
