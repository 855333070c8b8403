//! Property tests for dor: on any mesh, torus or hypercube (numbered in any
//! order) the tables are valid, minimal and acyclic per VL, or the VL
//! shortfall is named; on random fabrics dor routes validly (minimally,
//! unless cables of a torus are missing) or refuses.

#[path = "nue_cdg.rs"]
mod cdg;

use ibsm_routing::dor::{dor, shapes};
use ibsm_routing::testfab::{grid, random_connected, renumbered, RandomSpec};
use ibsm_routing::{validate, EngineOptions, RoutingError};
use proptest::prelude::*;

fn grid_spec() -> impl Strategy<Value = (Vec<u8>, Vec<bool>, u8, u8, u8, u64)> {
    (1usize..=3)
        .prop_flat_map(|d| {
            (
                proptest::collection::vec(1u8..=6, d),
                proptest::collection::vec(any::<bool>(), d),
                1u8..=2,
                0u8..=2,
                1u8..=8,
                any::<u64>(),
            )
        })
        .prop_filter("small enough for the CDG check", |(sizes, ..)| {
            sizes.iter().map(|&s| usize::from(s)).product::<usize>() <= 100
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn grids_route_validly_or_name_the_vl_shortfall((sizes, wrap, parallel, hosts, max_vls, seed) in grid_spec()) {
        let f = renumbered(&grid(&sizes, &wrap, parallel, hosts), seed);
        let opts = EngineOptions { max_vls, ..Default::default() };
        let shape = &shapes(&f).map_err(|e| TestCaseError::fail(format!("{sizes:?} {wrap:?}: {e}")))?[0];
        let n: u32 = shape.dims.iter().map(|d| d.size).product();
        prop_assert_eq!(n as usize, f.num_switches());
        match dor(&f, &opts) {
            Ok(r) => {
                let rep = validate(&f, &r);
                prop_assert!(rep.is_clean() && rep.fully_connected() && rep.all_minimal(), "{}", rep);
                prop_assert_eq!(rep.delivered, rep.pairs);
                prop_assert!(cdg::max_vl(&r).unwrap() < max_vls);
                let cyc = cdg::cyclic_layers(&f, &r);
                prop_assert!(cyc.iter().all(|c| !c), "{:?} {:?}: cyclic {:?}", sizes, wrap, cyc);
            }
            Err(RoutingError::TooFewVls { engine: "dor", needed, available }) => {
                prop_assert_eq!(available, max_vls);
                prop_assert!(u32::from(needed) == shape.vls_needed() && needed > max_vls);
            }
            Err(e) => prop_assert!(false, "{:?} {:?}: {}", sizes, wrap, e),
        }
    }

    #[test]
    fn random_fabrics_are_routed_validly_or_refused(seed in any::<u64>(), switches in 1usize..20, extra in 0usize..20) {
        let f = random_connected(seed, RandomSpec { switches, extra_links: extra, max_hosts_per_switch: 2, max_lmc: 1 });
        match dor(&f, &EngineOptions::default()) {
            Ok(r) => {
                let rep = validate(&f, &r);
                prop_assert!(rep.is_clean() && rep.fully_connected(), "{}", rep);
                // A torus with cables missing is routed round each gap, the
                // long way along its opened ring ("Cables missing" in
                // dor's module doc); a whole grid's routes are minimal.
                let gaps = shapes(&f).map_or(0, |s| s.iter().map(|p| p.missing.len()).sum::<usize>());
                prop_assert!(gaps > 0 || rep.all_minimal(), "{}", rep);
                prop_assert!(cdg::cyclic_layers(&f, &r).iter().all(|c| !c));
            }
            Err(RoutingError::NotApplicable { engine: "dor", .. } | RoutingError::TooFewVls { engine: "dor", .. }) => {}
            Err(e) => prop_assert!(false, "seed {}: {}", seed, e),
        }
    }
}
