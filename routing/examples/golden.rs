//! Fingerprints of every engine's output on a fixed set of fabrics, for
//! checking that a refactor leaves the tables unchanged.
//!
//!     cargo run --release -p ibsm-routing --example golden > before.txt
//!     (change the code)
//!     cargo run --release -p ibsm-routing --example golden | diff before.txt -
//!
//! Each line is `fabric engine max_vls fingerprint`, where the fingerprint
//! hashes the whole result: the forwarding tables and SLs, or the error.
//! Fabrics: small and degraded fat trees, spine-leaf with parallel
//! cables, rings, meshes and tori, seeded random irregular fabrics
//! (parallel cables, self-loops, LMC) and two dragonflies.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use ibsm_routing::engine::{route, EngineKind};
use ibsm_routing::testfab::{degraded, dragonfly, grid, random_connected, ring, spine_leaf, FatTree, RandomSpec};
use ibsm_routing::{EngineOptions, RoutingFabric};

fn fabrics() -> Vec<(String, RoutingFabric)> {
    let mut v = Vec::new();
    for (radix, levels) in [(8u8, 2u8), (16, 2), (8, 3), (12, 3)] {
        let full = FatTree::full(radix, levels).build();
        for cut in [0u32, 5, 15, 30] {
            let seeds = if cut == 0 { 1..=1 } else { 1..=2u64 };
            for seed in seeds {
                v.push((format!("tree-r{radix}-l{levels}-cut{cut}-s{seed}"), degraded(&full, cut, seed)));
            }
        }
    }
    v.push(("spine-leaf-4x8-p2".into(), spine_leaf(4, 8, 2, 4)));
    for n in [3u8, 5, 8] {
        v.push((format!("ring-{n}"), ring(n, 2)));
    }
    v.push(("mesh-4x4".into(), grid(&[4, 4], &[false, false], 1, 2)));
    v.push(("torus-4x4".into(), grid(&[4, 4], &[true, true], 1, 2)));
    v.push(("torus-3x3x3".into(), grid(&[3, 3, 3], &[true, true, true], 1, 1)));
    for seed in 0..24u64 {
        let spec = RandomSpec {
            switches: 4 + (seed as usize * 7) % 37,
            extra_links: (seed as usize * 5) % 41,
            max_hosts_per_switch: 1 + (seed as usize) % 4,
            max_lmc: (seed % 3) as u8,
        };
        v.push((format!("random-{seed}"), random_connected(seed, spec)));
    }
    for routers in [4u8, 6] {
        v.push((format!("dragonfly-r{routers}"), dragonfly(routers, 2)));
    }
    v
}

fn main() {
    for (name, f) in fabrics() {
        for engine in EngineKind::ALL {
            for max_vls in [1u8, 8] {
                let options = EngineOptions { max_vls, ..EngineOptions::default() };
                let mut h = DefaultHasher::new();
                format!("{:?}", route(engine, &f, &options)).hash(&mut h);
                println!("{name} {engine} {max_vls} {:016x}", h.finish());
            }
        }
    }
}
