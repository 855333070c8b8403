//! Times SSSP and DFSSSP on 3-level radix-36 fat trees (and optionally
//! more), one core.
//!
//!     cargo run --release -p ibsm-routing --example sssp_bench -- [--validate] [--weighted] [ENGINE...] [HOSTS...]
//!
//! ENGINE is `sssp` or `dfsssp` (default both); HOSTS picks among 3888
//! (12 pods) and 11664 (full), default both; `648` adds the 2-level tree.
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

use std::time::Instant;

use ibsm_routing::sssp::{dfsssp_with, sssp_with, DfssspConfig, PathChoice, SsspConfig};
use ibsm_routing::testfab::FatTree;
use ibsm_routing::{validate, EngineOptions, RoutingFabric};

fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let c0 = cpu_ns();
    let t = Instant::now();
    let r = f();
    let wall = t.elapsed().as_secs_f64() * 1e3;
    let cpu = match (c0, cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e6,
        _ => wall,
    };
    (r, cpu, wall)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let do_validate = args.iter().any(|a| a == "--validate");
    let paths = if args.iter().any(|a| a == "--weighted") { PathChoice::Weighted } else { PathChoice::Minimal };
    let mut engines: Vec<&str> = args.iter().map(String::as_str).filter(|a| *a == "sssp" || *a == "dfsssp").collect();
    if engines.is_empty() {
        engines = vec!["sssp", "dfsssp"];
    }
    let mut sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![3888, 11664];
    }
    println!(
        "{:<8} {:<26} {:>7} {:>6} {:>6} {:>10} {:>10} {:>7} {:>8} {:>9}",
        "engine", "fabric", "hosts", "sw", "LIDs", "route ms", "(wall ms)", "layers", "EFI", "paths"
    );
    for hosts in sizes {
        let (name, ft) = match hosts {
            648 => ("2-level radix 36 (full)", FatTree::full(36, 2)),
            3888 => ("3-level radix 36, 12 pods", FatTree::new(36, 3, 12 * 324)),
            11664 => ("3-level radix 36 (full)", FatTree::full(36, 3)),
            other => {
                eprintln!("unknown size {other}");
                continue;
            }
        };
        let f = ft.build();
        for &e in &engines {
            run(e, name, &f, paths, do_validate);
        }
    }
}

fn run(engine: &str, name: &str, f: &RoutingFabric, paths: PathChoice, do_validate: bool) {
    let opts = EngineOptions::default();
    let cfg = SsspConfig { paths };
    let ((routes, layers), cpu, wall) = timed(|| match engine {
        "sssp" => (sssp_with(f, &opts, &cfg).expect("a fat tree is connected"), "-".to_string()),
        _ => {
            let (r, l) = dfsssp_with(f, &opts, &DfssspConfig { sssp: cfg.clone(), balance: true })
                .expect("a fat tree routes on one layer");
            (r, format!("{}", l.needed))
        }
    });
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
        "{:<8} {:<26} {:>7} {:>6} {:>6} {:>10.0} {:>10.0} {:>7} {:>8} {:>9}",
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
