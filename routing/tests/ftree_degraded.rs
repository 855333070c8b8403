//! ftree on the bench's cut fat trees (fixtures/lfts, OpenSM's LIDs). A
//! leaf that lost a cable leaves some index digits pointing at a parent
//! that no longer reaches it; the switches that remap those LIDs must not
//! all pick the same other parent, or its cable down to that leaf carries
//! their traffic together. OpenSM's ftree refuses these trees (its chain
//! falls back to minhop: 56 and 188 routes on the busiest link).

mod bench_fabrics;
use bench_fabrics::{build, fattree2, fattree3, fixture, lids_of, Shape, FT2_R8_CUT, FT3_R8_CUT};

use ibsm_routing::cdg::{analyze_cdg, CdgScope};
use ibsm_routing::dump::LftDump;
use ibsm_routing::{minhop, route, validate, EngineKind, EngineOptions, RoutingFabric};

fn fabric(dump: &str, shape: &Shape, cut: &[(&str, u8, &str, u8)]) -> RoutingFabric {
    let d = LftDump::parse(&fixture(dump), dump).unwrap();
    build(shape, cut, &lids_of(&d))
}

/// ftree's busiest switch-to-switch link (all-to-all) and minhop's, after
/// checking ftree's tables are valid and free of credit loops.
fn busiest(f: &RoutingFabric) -> (u64, u64) {
    let r = route(EngineKind::FTree, f, &EngineOptions::default()).expect("a degraded fat tree is still a fat tree");
    let rep = validate(f, &r);
    assert!(rep.is_clean() && rep.fully_connected(), "{rep}");
    assert!(analyze_cdg(f, &r, CdgScope::default()).deadlock_free());
    let mh = validate(f, &minhop(f).unwrap());
    (rep.inter_switch_load.max, mh.inter_switch_load.max)
}

/// leaf0 and leaf7 each lost a spine: 112 routes reach each over 3 down
/// cables. With every remapping leaf choosing the least used of its own
/// up cables (all alike), one spine took them all: 64.
#[test]
fn two_level_cut_tree_spreads_the_remapped_lids() {
    let f = fabric("ft2-r8-cut-nue.lfts.dump", &fattree2(8), &FT2_R8_CUT);
    let (ours, minhop) = busiest(&f);
    assert!(ours <= 48, "ftree {ours}");
    assert!(ours <= minhop, "ftree {ours} above minhop {minhop}");
}

#[test]
fn three_level_cut_tree_spreads_the_remapped_lids() {
    let f = fabric("ft3-r8-cut-nue.lfts.dump", &fattree3(8, 4), &FT3_R8_CUT);
    let (ours, minhop) = busiest(&f);
    assert!(ours <= 100, "ftree {ours}");
    assert!(ours <= minhop, "ftree {ours} above minhop {minhop}");
}
