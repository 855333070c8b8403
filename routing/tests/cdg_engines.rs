//! Every engine that claims deadlock freedom gives tables whose channel
//! dependency graphs (with the SLs it returns) are acyclic, on fabrics of
//! every shape the tests generate; the analysis is independent of the
//! engines' own checks.

use ibsm_routing::engine::{route, EngineKind, EngineOptions};
use ibsm_routing::testfab::{random_connected, ring, FatTree, RandomSpec};
use ibsm_routing::{analyze_cdg, validate, CdgScope, RoutingError, RoutingFabric};
use proptest::prelude::*;

fn check(f: &RoutingFabric, kind: EngineKind, what: &str) -> Result<(), TestCaseError> {
    let options = EngineOptions::default();
    match route(kind, f, &options) {
        Ok(r) => {
            let v = validate(f, &r);
            prop_assert!(v.end_ports_valid(), "{} on {}: {}", kind, what, v);
            let c = analyze_cdg(f, &r, CdgScope::default());
            if kind.claims_deadlock_freedom() {
                prop_assert!(c.deadlock_free(), "{} on {}: {}", kind, what, c);
                prop_assert!(c.vls.len() <= usize::from(options.max_vls), "{} on {}: {}", kind, what, c);
            }
            Ok(())
        }
        // Refusals are the engine's right (ftree on a ring, dor on a
        // random graph, too few VLs); they must say so, not panic.
        Err(RoutingError::NotApplicable { .. } | RoutingError::TooFewVls { .. }) => Ok(()),
        Err(e) => Err(TestCaseError::fail(format!("{kind} on {what}: {e}"))),
    }
}

#[test]
fn engines_on_rings_and_trees() {
    let fabrics = [
        ("ring 5", ring(5, 1)),
        ("ring 8", ring(8, 2)),
        ("2-level radix 8", FatTree::full(8, 2).build()),
        ("3-level radix 4", FatTree::full(4, 3).build()),
        ("3-level radix 8, 40 hosts", FatTree::new(8, 3, 40).build()),
    ];
    for (what, f) in &fabrics {
        for kind in EngineKind::ALL {
            check(f, kind, what).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn engines_on_random_connected_fabrics(
        seed in any::<u64>(),
        switches in 2usize..16,
        extra_links in 0usize..16,
        hosts in 1usize..3,
    ) {
        let f = random_connected(seed, RandomSpec { switches, extra_links, max_hosts_per_switch: hosts, max_lmc: 0 });
        for kind in EngineKind::ALL {
            check(&f, kind, &format!("random seed {seed}"))?;
        }
    }
}
