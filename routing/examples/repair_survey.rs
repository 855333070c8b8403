//! How often a loss is repaired without an engine run, and how much the
//! repair moves against a fresh run: every single switch-to-switch cut of
//! twenty random 24-switch fabrics, two meshes, a torus and a dragonfly,
//! routed by nue and by up*/down* on one VL (the figures quoted in
//! `routing/src/repair.rs` and docs/benchmarks.md).
//!
//! `cargo run --release -p ibsm-routing --example repair_survey`
use ibsm_routing::keep::lids_to_repair;
use ibsm_routing::lft::Routes;
use ibsm_routing::repair::repair;
use ibsm_routing::testfab::{dragonfly, grid, random_connected, without_links, RandomSpec};
use ibsm_routing::{EngineOptions, PortEnd, RoutingFabric};

fn differ(a: &Routes, b: &Routes) -> u64 {
    let rows = a.lfts.iter().zip(&b.lfts);
    rows.map(|(x, y)| x.ports.iter().zip(&y.ports).filter(|(p, q)| p != q).count() as u64).sum()
}

fn main() {
    let spec = RandomSpec { switches: 24, extra_links: 30, max_hosts_per_switch: 3, max_lmc: 0 };
    let mut fabrics: Vec<(String, RoutingFabric)> =
        (0..20u64).map(|seed| (format!("random seed {seed}"), random_connected(seed, spec))).collect();
    fabrics.push(("mesh 3x4".into(), grid(&[3, 4], &[false, false], 1, 1)));
    fabrics.push(("mesh 6x6".into(), grid(&[6, 6], &[false, false], 1, 2)));
    fabrics.push(("torus 4x4".into(), grid(&[4, 4], &[true, true], 1, 2)));
    fabrics.push(("dragonfly 4 routers".into(), dragonfly(4, 2)));
    let o = EngineOptions { max_vls: 1, ..EngineOptions::default() };
    for engine in ["nue", "updn"] {
        let route = |f: &RoutingFabric| match engine {
            "nue" => ibsm_routing::nue::nue(f, &o),
            _ => ibsm_routing::updn::updn(f, &o),
        };
        let (mut random_cuts, mut random_repaired, mut moved, mut fresh_moved) = (0, 0, 0u64, 0u64);
        for (name, f) in &fabrics {
            let Ok(before) = route(f) else { continue };
            let old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
            let (mut cuts, mut repaired) = (0, 0);
            for (i, l) in f.links().iter().enumerate() {
                if !matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..))) {
                    continue;
                }
                let cut = without_links(f, &[i]);
                if cut.components().count() != f.components().count() {
                    continue;
                }
                cuts += 1;
                let broken = lids_to_repair(&cut, &old);
                if let Ok((_, stats)) = repair(&cut, &old, &broken, true) {
                    repaired += 1;
                    moved += stats.moved;
                    fresh_moved += route(&cut).map(|r| differ(&r, &before)).unwrap_or(0);
                }
            }
            if name.starts_with("random") {
                random_cuts += cuts;
                random_repaired += repaired;
            } else {
                println!("{engine}, {name}: {repaired} of {cuts} cuts repaired");
            }
        }
        println!("{engine}, twenty random fabrics: {random_repaired} of {random_cuts} cuts repaired");
        println!("{engine}, every repaired cut: {moved} entries moved, a fresh run {fresh_moved}");
    }
}
