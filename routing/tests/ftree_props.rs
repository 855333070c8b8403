//! Property tests: on randomly degraded fat trees and on random connected
//! fabrics, ftree returns valid, credit-loop-free tables or a typed
//! refusal; it never panics and never returns broken tables.

mod ftree_common;

use ftree_common::{credit_loop, rebuild};
use ibsm_routing::ftree::ftree;
use ibsm_routing::testfab::{random_connected, renumbered, FatTree, RandomSpec, SplitMix64};
use ibsm_routing::{validate, EngineOptions, PortEnd, RoutingError, RoutingFabric};
use proptest::prelude::*;

/// Checks whatever ftree returned for `f`.
fn check(f: &RoutingFabric, what: &str) -> Result<(), TestCaseError> {
    match ftree(f, &EngineOptions::default()) {
        Ok(r) => {
            prop_assert_eq!(r.lfts.len(), f.num_switches());
            for l in &r.lfts {
                prop_assert_eq!(l.linear_fdb_top().0, f.max_lid());
            }
            let rep = validate(f, &r);
            prop_assert!(rep.is_clean() && rep.fully_connected(), "{}: {}", what, rep);
            prop_assert_eq!(rep.delivered, rep.pairs, "{}", what);
            prop_assert_eq!(credit_loop(f, &r), None, "{}: credit loop", what);
        }
        Err(RoutingError::NotApplicable { engine, reason }) => {
            prop_assert_eq!(engine, "ftree");
            prop_assert!(!reason.is_empty());
        }
        Err(RoutingError::Disconnected { partial, .. }) => {
            prop_assert!(f.components().count() > 1, "{}: connected fabric reported as disconnected", what);
            // Outside the routed part tables stay empty (black holes), but
            // nothing loops or arrives at the wrong node.
            let rep = validate(f, &partial.0);
            prop_assert_eq!(rep.loops, 0, "{}: {}", what, rep);
            prop_assert_eq!(rep.wrong_destination, 0, "{}: {}", what, rep);
        }
        Err(e) => return Err(TestCaseError::fail(format!("{what}: unexpected {e}"))),
    }
    Ok(())
}

fn degraded_tree() -> impl Strategy<Value = (FatTree, u64, usize, bool, u8)> {
    (
        prop::sample::select(vec![(4u8, 2u8), (6, 2), (8, 2), (4, 3), (6, 3), (8, 3), (4, 4)]),
        1usize..=100,
        any::<u64>(),
        0usize..6,
        any::<bool>(),
        0u8..=1,
    )
        .prop_map(|((radix, levels), percent, seed, cuts, drop_switch, lmc)| {
            let cap = FatTree::capacity(radix, levels);
            let hosts = (cap * percent / 100).max(1);
            (FatTree { host_lmc: lmc, ..FatTree::new(radix, levels, hosts) }, seed, cuts, drop_switch, lmc)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn degraded_fat_trees_route_or_refuse((ft, seed, cuts, drop_switch, _lmc) in degraded_tree()) {
        let f = ft.build();
        let mut rng = SplitMix64(seed);
        let isl: Vec<usize> = f
            .links()
            .iter()
            .enumerate()
            .filter(|(_, l)| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..))))
            .map(|(i, _)| i)
            .collect();
        let cut: Vec<usize> = (0..cuts).map(|_| isl[rng.below(isl.len())]).collect();
        let gone = drop_switch.then(|| ibsm_routing::SwitchId(rng.below(f.num_switches()) as u32));
        let links = f.links();
        let g = rebuild(
            &f,
            |s| Some(s) != gone,
            |_| true,
            |l| !cut.iter().any(|&i| links[i] == *l),
        );
        let g = renumbered(&g, seed);
        check(&g, &format!("{ft:?} seed {seed} cuts {cut:?} gone {gone:?}"))?;
    }

    #[test]
    fn random_connected_fabrics_route_or_refuse(
        seed in any::<u64>(),
        switches in 1usize..20,
        extra_links in 0usize..20,
        max_hosts_per_switch in 0usize..4,
        max_lmc in 0u8..=2,
    ) {
        let f = random_connected(seed, RandomSpec { switches, extra_links, max_hosts_per_switch, max_lmc });
        check(&f, &format!("seed {seed}"))?;
    }
}

/// Random spanning trees with hosts only on their leaves often are fat
/// trees (of one cable per parent): those must route.
#[test]
fn random_trees_with_hosts_on_leaves_route() {
    let mut routed = 0;
    for seed in 0..200u64 {
        let f =
            random_connected(seed, RandomSpec { switches: 10, extra_links: 0, max_hosts_per_switch: 2, max_lmc: 0 });
        if let Ok(r) = ftree(&f, &EngineOptions::default()) {
            let rep = validate(&f, &r);
            assert!(rep.is_clean() && rep.fully_connected(), "seed {seed}: {rep}");
            assert_eq!(credit_loop(&f, &r), None, "seed {seed}");
            routed += 1;
        }
    }
    assert!(routed > 0, "some random trees are fat trees");
}
