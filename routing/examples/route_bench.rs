//! Times fabric construction, MinHop and route validation on fat trees.
//!
//!     cargo run --release -p ibsm-routing --example route_bench -- [--no-validate] [SIZE...]
//!
//! SIZE is one of: 648, 3888, 11664, 45056 (default: all). One core, no
//! parallelism. Each tree is measured twice: with the generator's switch
//! numbering (pods in order) and renumbered in a random order, as discovery
//! might number it; EFI is the edge forwarding index (most all-to-all paths
//! on one switch-to-switch link).
//!
//! Times are CPU time of the benchmark thread (Linux
//! /proc/thread-self/schedstat), so other load on a shared machine does not
//! inflate them; the kernel updates it at scheduler ticks, so figures under
//! ~10 ms are coarse. Wall time is printed next to the routing time.
//!
//! 50,000 hosts cannot be addressed in one subnet (49,151 unicast LIDs,
//! IBA 4.1.3, shared with the switches), so the largest case is a 3-level
//! radix-64 tree with 44 of its 64 pods: 45,056 hosts and 3,840 switches,
//! 48,896 LIDs.

use ibsm_routing::testfab::renumbered;
use ibsm_routing::testfab::{benchmark_fat_trees, timed};
use ibsm_routing::{minhop, validate};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let do_validate = !args.iter().any(|a| a == "--no-validate");
    let wanted: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let cases = benchmark_fat_trees();
    println!(
        "{:<28} {:>7} {:>6} {:>6} {:>9} {:>9} {:>10} {:>11} {:>8} {:>8}",
        "fabric", "hosts", "sw", "LIDs", "build ms", "route ms", "(wall ms)", "validate ms", "LFT MiB", "EFI"
    );
    for (name, ft) in cases {
        if !wanted.is_empty() && !wanted.contains(&ft.hosts) {
            continue;
        }
        let (f, build, _) = timed(|| ft.build());
        run(name, &f, Some(build), do_validate);
        let g = renumbered(&f, 1);
        run("  renumbered", &g, None, do_validate);
    }
}

fn run(name: &str, f: &ibsm_routing::RoutingFabric, build_ms: Option<f64>, do_validate: bool) {
    let (routes, route_cpu, route_wall) = timed(|| minhop(f).expect("a fat tree is connected"));
    let lft_bytes: usize = routes.lfts.iter().map(|l| l.ports.len()).sum();

    let (validate_ms, efi) = if do_validate {
        let (rep, v, _) = timed(|| validate(f, &routes));
        assert!(rep.is_clean() && rep.all_minimal() && rep.fully_connected(), "{rep}");
        (format!("{v:.0}"), rep.inter_switch_load.max.to_string())
    } else {
        ("-".into(), "-".into())
    };
    let build = build_ms.map_or("-".to_string(), |b| format!("{b:.1}"));
    println!(
        "{:<28} {:>7} {:>6} {:>6} {:>9} {:>9.1} {:>10.1} {:>11} {:>8.1} {:>8}",
        name,
        f.num_end_ports(),
        f.num_switches(),
        f.max_lid(),
        build,
        route_cpu,
        route_wall,
        validate_ms,
        lft_bytes as f64 / (1 << 20) as f64,
        efi
    );
}
