//! Property tests: on any connected fabric MinHop's tables deliver every
//! LID from every source, without loops, on shortest paths.

use ibsm_routing::testfab::{random_connected, RandomSpec};
use ibsm_routing::{minhop, validate, RoutingError};
use proptest::prelude::*;

fn spec() -> impl Strategy<Value = (u64, RandomSpec)> {
    (any::<u64>(), 1usize..24, 0usize..30, 0usize..4, 0u8..=2).prop_map(
        |(seed, switches, extra_links, max_hosts_per_switch, max_lmc)| {
            (seed, RandomSpec { switches, extra_links, max_hosts_per_switch, max_lmc })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn minhop_tables_validate_on_random_connected_fabrics((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        let r = minhop(&f).map_err(|e: RoutingError| TestCaseError::fail(format!("seed {seed}: {e}")))?;
        prop_assert_eq!(r.lfts.len(), f.num_switches());
        for l in &r.lfts {
            prop_assert_eq!(l.linear_fdb_top().0, f.max_lid());
        }
        let rep = validate(&f, &r);
        prop_assert!(rep.fully_connected(), "seed {}: {}", seed, rep);
        prop_assert!(rep.is_clean(), "seed {}: {}", seed, rep);
        prop_assert_eq!(rep.delivered, rep.pairs, "seed {}: {}", seed, rep);
        prop_assert!(rep.all_minimal(), "seed {}: {}", seed, rep);
        prop_assert_eq!(rep.max_stretch, 0);
    }

    /// Every (switch, LID) entry that can matter points at a cabled port or
    /// port 0 of the owner: nothing is left unrouted inside a connected fabric.
    #[test]
    fn minhop_routes_every_lid_on_every_switch((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        let r = minhop(&f).unwrap();
        for s in f.switch_ids() {
            for lid in 1..=f.max_lid() {
                let Some(owner) = f.lid_owner(lid) else { continue };
                let port = r.port(s, lid);
                if owner == ibsm_routing::NodeRef::Switch(s) {
                    prop_assert_eq!(port, 0);
                } else {
                    prop_assert!(f.switch_peer(s, port).is_some(), "seed {} switch {:?} LID {} port {}", seed, s, lid, port);
                }
            }
        }
    }
}
