//! Times ftree (and MinHop for comparison) on fat trees, one core.
//!
//!     cargo run --release -p ibsm-routing --example ftree_bench -- [--no-validate] [SIZE...]
//!
//! SIZE is one of: 648, 3888, 11664, 45056 (default: all). Times are CPU
//! time of the benchmark thread (Linux /proc/thread-self/schedstat), wall
//! time in brackets; EFI is the edge forwarding index (most all-to-all
//! paths on one switch-to-switch link) from `validate`. Each tree is also
//! routed renumbered in a random order, as discovery might number it: ftree
//! must give the same tables (by GUID) either way.

use ibsm_routing::testfab::renumbered;
use ibsm_routing::testfab::{benchmark_fat_trees, timed};
use ibsm_routing::{ftree, minhop, validate, EngineOptions, Routes, RoutingFabric};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let do_validate = !args.iter().any(|a| a == "--no-validate");
    let wanted: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let cases = benchmark_fat_trees();
    println!(
        "{:<27} {:>6} {:>5} {:>8} {:>9} {:>8} {:>10} {:>8} {:>10}",
        "fabric", "hosts", "sw", "engine", "route ms", "(wall)", "validate", "EFI", "same LFTs"
    );
    let opts = EngineOptions::default();
    for (name, ft) in cases {
        if !wanted.is_empty() && !wanted.contains(&ft.hosts) {
            continue;
        }
        let f = ft.build();
        let (routes, cpu, wall) = timed(|| ftree::ftree(&f, &opts).expect("a full fat tree is one"));
        let g = renumbered(&f, 1);
        let (again, cpu2, wall2) = timed(|| ftree::ftree(&g, &opts).expect("a full fat tree is one"));
        let same = same_by_guid(&f, &routes, &g, &again);
        report(name, &f, "ftree", &routes, cpu, wall, do_validate, if same { "yes" } else { "NO" });
        report("  renumbered", &g, "ftree", &again, cpu2, wall2, false, "");
        let (mh, cpu, wall) = timed(|| minhop(&f).expect("connected"));
        report("", &f, "minhop", &mh, cpu, wall, do_validate, "");
    }
}

#[allow(clippy::too_many_arguments)]
fn report(name: &str, f: &RoutingFabric, engine: &str, r: &Routes, cpu: f64, wall: f64, v: bool, same: &str) {
    let (val, efi) = if v {
        let (rep, ms, _) = timed(|| validate(f, r));
        assert!(rep.is_clean() && rep.fully_connected(), "{rep}");
        (format!("{ms:.0} ms"), rep.inter_switch_load.max.to_string())
    } else {
        ("-".into(), "-".into())
    };
    println!(
        "{:<27} {:>6} {:>5} {:>8} {:>9.1} {:>8.1} {:>10} {:>8} {:>10}",
        name,
        f.num_end_ports(),
        f.num_switches(),
        engine,
        cpu,
        wall,
        val,
        efi,
        same
    );
}

/// Whether two routings of the same fabric (switches in different orders)
/// agree entry by entry, matching switches by GUID.
fn same_by_guid(f: &RoutingFabric, a: &Routes, g: &RoutingFabric, b: &Routes) -> bool {
    let mut by_guid = std::collections::HashMap::new();
    for s in g.switch_ids() {
        by_guid.insert(g.switch(s).guid, s);
    }
    f.switch_ids().all(|s| {
        let t = by_guid[&f.switch(s).guid];
        a.lft(s) == b.lft(t)
    })
}
