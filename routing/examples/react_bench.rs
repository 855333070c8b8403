//! Where the routing time of a reaction goes, on the 11,664-host fat tree
//! with one leaf uplink cut.
use ibsm_routing::auto::{route_chain_auto, ChainEntry};
use ibsm_routing::keep::keep_intact;
use ibsm_routing::testfab::{timed, without_links, FatTree};
use ibsm_routing::{analyze_cdg, CdgScope, EngineOptions};

fn main() {
    let full = FatTree::full(36, 3).build();
    let o = EngineOptions::default();
    let (before, wall, _) = timed(|| route_chain_auto(&[ChainEntry::Auto], &full, &o).unwrap());
    println!("auto on the whole tree: {wall:.1} ms ({})", before.engine);
    // The first leaf-to-spine cable.
    let link = full
        .links()
        .iter()
        .position(|l| matches!((l.a, l.b), (ibsm_routing::PortEnd::Switch(..), ibsm_routing::PortEnd::Switch(..))))
        .unwrap();
    let cut = without_links(&full, &[link]);
    let (after, wall, _) = timed(|| route_chain_auto(&[ChainEntry::Auto], &cut, &o).unwrap());
    println!("auto after the cut: {wall:.1} ms");
    let (_, wall, _) = timed(|| ibsm_routing::ftree::ftree(&cut, &o).unwrap());
    println!("ftree alone after the cut: {wall:.1} ms");
    let (_, wall, _) = timed(|| ibsm_routing::ftree::layout(&cut, &o).unwrap());
    println!("ftree layout alone: {wall:.1} ms");
    let (_, wall, _) = timed(|| ibsm_routing::validate(&cut, &after.routes));
    println!("validate: {wall:.1} ms");
    let old: Vec<Option<&[u8]>> = before.routes.lfts.iter().map(|l| Some(&l.ports[..])).collect();
    let (broken, wall, _) = timed(|| ibsm_routing::keep::lids_to_repair(&cut, &old));
    println!("lids_to_repair: {wall:.1} ms ({} LIDs)", broken.iter().filter(|&&b| b).count());
    let mut merged = after.routes.clone();
    let (kept, wall, _) = timed(|| keep_intact(&cut, &old, &mut merged));
    println!("keep_intact: {wall:.3} ms ({kept:?})");
    let (free, wall, _) = timed(|| analyze_cdg(&cut, &merged, CdgScope::default()).deadlock_free());
    println!("credit-loop check of the merge: {wall:.1} ms (free: {free})");
}
