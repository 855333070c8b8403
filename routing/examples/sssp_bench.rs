//! Times SSSP and DFSSSP on 3-level radix-36 fat trees (and optionally
//! more), one core.
//!
//!     cargo run --release -p ibsm-routing --example sssp_bench -- [--validate] [--weighted|--sum] [--per-switch] [--vls=N] [ENGINE...] [HOSTS...]
//!
//! ENGINE is `sssp` or `dfsssp` (default both); `--vls` the VLs DFSSSP may
//! use (default 8; `layers` shows the layers needed and the paths layered,
//! the fallback's when the configured ones need more than N); HOSTS picks among 3888
//! (12 pods) and 11664 (full), default both; `648` adds the 2-level tree,
//! `45056` a 3-level radix-64 tree of 44 pods (48,896 LIDs);
//! `torus:AxBxC[:H]` adds a torus with H hosts per switch (default 1).
//! Peak memory of a single case: run it under `/usr/bin/time -v` with one
//! engine and one size.
//!
//! EFI is the edge forwarding index (most all-to-all end-port paths on one
//! switch-to-switch link); `paths` says whether validation found every
//! (source, LID) pair delivered on a shortest path, or how many are longer.
//!
//! Times are CPU time of the benchmark thread (/proc/thread-self/schedstat),
//! so other load on a shared machine does not inflate them; wall time is
//! printed too.

use ibsm_routing::sssp::{dfsssp_with, sssp_with, DfssspConfig, PathChoice, SsspConfig};
use ibsm_routing::testfab::{benchmark_fat_trees, grid, timed};
use ibsm_routing::{validate, EngineOptions, RoutingError, RoutingFabric};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let do_validate = args.iter().any(|a| a == "--validate");
    let vls: u8 = args.iter().find_map(|a| a.strip_prefix("--vls=")).and_then(|v| v.parse().ok()).unwrap_or(8);
    let paths = if args.iter().any(|a| a == "--weighted") {
        PathChoice::Weighted
    } else if args.iter().any(|a| a == "--sum") {
        PathChoice::MinimalSum
    } else {
        PathChoice::Minimal
    };
    let paths = (paths, args.iter().any(|a| a == "--per-switch"));
    let mut engines: Vec<&str> = args.iter().map(String::as_str).filter(|a| *a == "sssp" || *a == "dfsssp").collect();
    if engines.is_empty() {
        engines = vec!["sssp", "dfsssp"];
    }
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let tori: Vec<&str> = args.iter().filter_map(|a| a.strip_prefix("torus:")).collect();
    if sizes.is_empty() && tori.is_empty() {
        sizes = vec![3888, 11664];
    }
    println!(
        "{:<8} {:<26} {:>7} {:>6} {:>6} {:>10} {:>10} {:>30} {:>8} {:>9}",
        "engine", "fabric", "hosts", "sw", "LIDs", "route ms", "(wall ms)", "layers", "EFI", "paths"
    );
    for t in tori {
        let mut parts = t.split(':');
        let dims: Vec<u8> = parts.next().unwrap_or("").split('x').filter_map(|d| d.parse().ok()).collect();
        let hosts: u8 = parts.next().and_then(|h| h.parse().ok()).unwrap_or(1);
        let f = grid(&dims, &vec![true; dims.len()], 1, hosts);
        let name = format!("torus {t}");
        for &e in &engines {
            run(e, &name, &f, paths, vls, do_validate);
        }
    }
    for hosts in sizes {
        // Sizes name the trees of `benchmark_fat_trees`, in its order.
        let Some(i) = [648, 3888, 11664, 45056].iter().position(|&h| h == hosts) else {
            eprintln!("unknown size {hosts}");
            continue;
        };
        let Some((name, ft)) = benchmark_fat_trees().into_iter().nth(i) else { continue };
        let f = ft.build();
        for &e in &engines {
            run(e, name, &f, paths, vls, do_validate);
        }
    }
}

fn run(
    engine: &str,
    name: &str,
    f: &RoutingFabric,
    (paths, tree_per_switch): (PathChoice, bool),
    vls: u8,
    do_validate: bool,
) {
    let opts = EngineOptions { max_vls: vls, ..EngineOptions::default() };
    let cfg = SsspConfig { paths, tree_per_switch };
    let (out, cpu, wall) = timed(|| match engine {
        "sssp" => Ok((sssp_with(f, &opts, &cfg).expect("connected"), "-".to_string())),
        _ => match dfsssp_with(f, &opts, &DfssspConfig { sssp: cfg.clone(), ..DfssspConfig::default() }) {
            Ok((r, l)) => Ok((
                r,
                format!(
                    "{} {:?} {:?}{}",
                    l.needed,
                    l.method,
                    l.sssp.paths,
                    if l.sssp.tree_per_switch { "/switch" } else { "" }
                ),
            )),
            Err(RoutingError::TooFewVls { needed, .. }) => Err(needed),
            Err(e) => panic!("{e}"),
        },
    });
    let (routes, layers) = match out {
        Ok(x) => x,
        Err(needed) => {
            println!("{engine:<8} {name:<26} needs {needed} VLs ({cpu:.0} ms)");
            return;
        }
    };
    let (efi, valid) = if do_validate {
        let rep = validate(f, &routes);
        let v = match (rep.is_clean() && rep.fully_connected(), rep.all_minimal()) {
            (true, true) => "minimal".to_string(),
            (true, false) => format!("+{}", rep.delivered - rep.minimal),
            (false, _) => "BROKEN".to_string(),
        };
        (rep.inter_switch_load.max.to_string(), v)
    } else {
        ("-".into(), "-".into())
    };
    println!(
        "{:<8} {:<26} {:>7} {:>6} {:>6} {:>10.0} {:>10.0} {:>30} {:>8} {:>9}",
        engine,
        name,
        f.num_end_ports(),
        f.num_switches(),
        f.max_lid(),
        cpu,
        wall,
        layers,
        efi,
        valid
    );
}
