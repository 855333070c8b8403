//! Property tests: on seeded random connected fabrics (parallel cables,
//! cables looping a switch to itself, LMC up to 2), SSSP gives valid
//! shortest-path tables, and DFSSSP either gives valid tables (shortest to
//! every end port) whose every SL has an acyclic channel dependency graph,
//! or says how many VLs it would need (and routes when given that many).
//! Never a panic.

mod sssp_common;

use ibsm_routing::sssp::{dfsssp_with, sssp, sssp_with, DfssspConfig, PathChoice, SsspConfig};
use ibsm_routing::testfab::{random_connected, RandomSpec};
use ibsm_routing::{validate, EngineOptions, RoutingError};
use proptest::prelude::*;
use sssp_common::*;

fn spec() -> impl Strategy<Value = (u64, RandomSpec)> {
    (any::<u64>(), 1usize..24, 0usize..30, 0usize..4, 0u8..=2).prop_map(
        |(seed, switches, extra_links, max_hosts_per_switch, max_lmc)| {
            (seed, RandomSpec { switches, extra_links, max_hosts_per_switch, max_lmc })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn sssp_tables_are_valid_and_minimal((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        let r = sssp(&f, &EngineOptions::default())
            .map_err(|e: RoutingError| TestCaseError::fail(format!("seed {seed}: {e}")))?;
        prop_assert!(r.sl.is_none());
        let rep = validate(&f, &r);
        prop_assert!(rep.is_clean() && rep.fully_connected(), "seed {}: {}", seed, rep);
        prop_assert_eq!(rep.delivered, rep.pairs, "seed {}: {}", seed, rep);
        prop_assert!(rep.all_minimal(), "seed {}: {}", seed, rep);
        for l in &r.lfts {
            prop_assert_eq!(l.linear_fdb_top().0, f.max_lid());
        }
    }

    /// DFSSSP's fallback paths: valid, shortest, one tree per destination
    /// switch and LID offset.
    #[test]
    fn layerable_tables_are_valid_minimal_and_one_tree_per_switch((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        let r = sssp_with(&f, &EngineOptions::default(), &DfssspConfig::LAYERABLE)
            .map_err(|e: RoutingError| TestCaseError::fail(format!("seed {seed}: {e}")))?;
        let rep = validate(&f, &r);
        prop_assert!(rep.is_clean() && rep.fully_connected(), "seed {}: {}", seed, rep);
        prop_assert_eq!(rep.delivered, rep.pairs, "seed {}: {}", seed, rep);
        prop_assert!(rep.all_minimal(), "seed {}: {}", seed, rep);
        prop_assert_eq!(one_tree_per_switch(&f, &r), Ok(()), "seed {}", seed);
    }

    #[test]
    fn dfsssp_is_layered_acyclic_or_says_how_many_vls((seed, spec) in spec(), max_vls in 1u8..=8, balance: bool) {
        let f = random_connected(seed, spec);
        let options = EngineOptions { max_vls, ..EngineOptions::default() };
        let config = DfssspConfig { balance, ..DfssspConfig::default() };
        match dfsssp_with(&f, &options, &config) {
            Ok((r, layering)) => {
                prop_assert!(layering.needed >= 1 && layering.needed <= max_vls, "{:?}", layering);
                let rep = validate(&f, &r);
                prop_assert!(rep.is_clean() && rep.fully_connected(), "seed {}: {}", seed, rep);
                prop_assert_eq!(rep.delivered, rep.pairs);
                prop_assert_eq!(longer_end_port_path(&f, &r), None, "seed {}: {}", seed, rep);
                let sl = r.sl.as_ref().expect("dfsssp sets SLs");
                prop_assert_eq!(sl.by_source_switch.len(), f.num_switches());
                prop_assert!(max_sl(&r) < max_vls, "SL {} with {} VLs", max_sl(&r), max_vls);
                if !balance {
                    prop_assert_eq!(max_sl(&r) + 1, layering.needed);
                }
                let cyclic = cyclic_sls(&f, &r);
                prop_assert!(cyclic.is_empty(), "seed {}: SLs {:?} have credit loops", seed, cyclic);
            }
            Err(RoutingError::TooFewVls { engine, needed, available }) => {
                prop_assert_eq!(engine, "dfsssp");
                prop_assert_eq!(available, max_vls);
                prop_assert!(needed > available);
                // The same fabric with the VLs it asked for routes.
                if needed <= 15 {
                    let more = EngineOptions { max_vls: needed, ..EngineOptions::default() };
                    let (r, l) = dfsssp_with(&f, &more, &config).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    prop_assert_eq!(l.needed, needed);
                    prop_assert!(cyclic_sls(&f, &r).is_empty());
                }
            }
            Err(e) => return Err(TestCaseError::fail(format!("seed {seed}: {e}"))),
        }
    }

    /// The HOTI'09 weights detour around load: paths may be longer than
    /// shortest, but must still be delivered without loops, and DFSSSP must
    /// layer them as well.
    #[test]
    fn weighted_variant_is_valid_and_layered((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        let cfg = SsspConfig { paths: PathChoice::Weighted, ..SsspConfig::default() };
        let r = sssp_with(&f, &EngineOptions::default(), &cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let rep = validate(&f, &r);
        prop_assert!(rep.is_clean() && rep.fully_connected(), "seed {}: {}", seed, rep);
        prop_assert_eq!(rep.delivered, rep.pairs);
        let options = EngineOptions { max_vls: 15, ..EngineOptions::default() };
        // Those paths only: the fallback would replace them where it fits
        // with less load.
        let config = DfssspConfig { sssp: cfg, balance: false, fallback: None };
        match dfsssp_with(&f, &options, &config) {
            Ok((d, _)) => {
                prop_assert_eq!(&d.lfts, &r.lfts);
                prop_assert!(cyclic_sls(&f, &d).is_empty());
            }
            Err(RoutingError::TooFewVls { needed, .. }) => prop_assert!(needed > 15),
            Err(e) => return Err(TestCaseError::fail(format!("seed {seed}: {e}"))),
        }
    }
}
