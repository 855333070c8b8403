//! Property tests: on any connected fabric Nue never fails and never
//! panics; its tables deliver every pair without loops, use SLs within the
//! VL budget, and every layer's channel dependency graph is acyclic for
//! traffic to end ports (and to switch LIDs when none was left unlayered).

mod nue_cdg;
use nue_cdg as cdg;

use ibsm_routing::nue::nue_with_stats;
use ibsm_routing::testfab::{random_connected, RandomSpec};
use ibsm_routing::{validate, EngineOptions};
use proptest::prelude::*;

fn spec() -> impl Strategy<Value = (u64, RandomSpec, u8)> {
    (any::<u64>(), 1usize..28, 0usize..40, 0usize..4, 0u8..=2, prop_oneof![Just(1u8), Just(2), Just(4), 1u8..=15])
        .prop_map(|(seed, switches, extra_links, max_hosts_per_switch, max_lmc, vls)| {
            (seed, RandomSpec { switches, extra_links, max_hosts_per_switch, max_lmc }, vls)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn nue_is_valid_and_acyclic_per_layer((seed, spec, vls) in spec()) {
        let f = random_connected(seed, spec);
        let (r, st) = nue_with_stats(&f, &EngineOptions { max_vls: vls, ..Default::default() })
            .map_err(|e| TestCaseError::fail(format!("seed {seed} {spec:?}: {e}")))?;
        prop_assert!(st.layers >= 1 && st.layers <= vls);
        prop_assert_eq!(r.lfts.len(), f.num_switches());
        let rep = validate(&f, &r);
        prop_assert!(rep.is_clean() && rep.fully_connected(), "seed {} {:?}: {}", seed, spec, rep);
        prop_assert_eq!(rep.delivered, rep.pairs);
        prop_assert!(cdg::max_sl(&r).unwrap() < vls);
        let cyc = cdg::cyclic_layers_to_end_ports(&f, &r);
        prop_assert!(cyc.iter().all(|c| !c), "seed {} {:?} vls {}: cyclic {:?}", seed, spec, vls, cyc);
        if st.unlayered == 0 {
            let cyc = cdg::cyclic_layers(&f, &r);
            prop_assert!(cyc.iter().all(|c| !c), "seed {} {:?} vls {}: switch LIDs cyclic {:?}", seed, spec, vls, cyc);
        }
    }
}
