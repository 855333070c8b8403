//! Times Nue (and DOR on tori and meshes) on large fabrics.
//!
//!     cargo run --release -p ibsm-routing --example nue_bench -- [--no-validate] [--vls N] [CASE...]
//!
//! CASE is one of: ft648, ft3888, ft11664, torus, mesh (default: all),
//! or bigtorus (12x12x12, only when named). One
//! core. Times are CPU time of the benchmark thread (Linux
//! /proc/thread-self/schedstat), wall time alongside. EFI is the edge
//! forwarding index (most all-to-all paths between end ports on one
//! switch-to-switch link); "long" counts (source, LID) pairs routed longer
//! than the shortest path; "escaped" is switch routes moved onto escape
//! paths (summed over destinations), "impasses" destinations whose search
//! stranded switches after backtracking, "unlayered" switch-LID routes
//! left outside the dependency graphs.

use ibsm_routing::dor::dor;
use ibsm_routing::nue::nue_with_stats;
use ibsm_routing::testfab::timed;
use ibsm_routing::testfab::{grid, FatTree};
use ibsm_routing::{validate, EngineOptions, RoutingFabric};

/// Peak resident set size of this process so far (VmHWM), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let do_validate = !args.iter().any(|a| a == "--no-validate");
    let vls: u8 = args.iter().position(|a| a == "--vls").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(1);
    let wanted: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| a.starts_with("ft") || ["torus", "mesh", "bigtorus"].contains(a))
        .collect();
    let want = |name: &str| wanted.is_empty() || wanted.contains(&name);
    println!(
        "{:<34} {:>6} {:>5} {:>6} {:>4} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "fabric / engine",
        "hosts",
        "sw",
        "LIDs",
        "VLs",
        "route ms",
        "(wall ms)",
        "EFI",
        "long",
        "escaped",
        "impasses",
        "unlayered"
    );
    let opts = EngineOptions { max_vls: vls, ..Default::default() };
    for (name, label, ft) in [
        ("ft648", "fat tree 2-level radix 36", FatTree::full(36, 2)),
        ("ft3888", "fat tree 3-level radix 36, 12 pods", FatTree::new(36, 3, 12 * 324)),
        ("ft11664", "fat tree 3-level radix 36 (full)", FatTree::full(36, 3)),
    ] {
        if want(name) {
            let f = ft.build();
            run_nue(&format!("{label} / nue"), &f, &opts, do_validate);
            let (res, cpu_ms, _) = timed(|| dor(&f, &EngineOptions::default()));
            let refusal = res.expect_err("a fat tree is no grid");
            println!("  dor refuses it in {cpu_ms:.1} ms: {refusal}");
        }
    }
    if want("torus") {
        let f = grid(&[8, 8, 8], &[true, true, true], 1, 4);
        run_nue("8x8x8 torus, 4 hosts/sw / nue", &f, &opts, do_validate);
        run_dor("8x8x8 torus, 4 hosts/sw / dor", &f, do_validate);
    }
    if wanted.contains(&"bigtorus") {
        let f = grid(&[12, 12, 12], &[true, true, true], 1, 4);
        run_dor("12x12x12 torus, 4 hosts/sw / dor", &f, do_validate);
        run_nue("12x12x12 torus, 4 hosts/sw / nue", &f, &opts, do_validate);
    }
    if want("mesh") {
        let f = grid(&[16, 16], &[false, false], 1, 4);
        run_nue("16x16 mesh, 4 hosts/sw / nue", &f, &opts, do_validate);
        run_dor("16x16 mesh, 4 hosts/sw / dor", &f, do_validate);
    }
    if let Some(m) = peak_rss_mib() {
        println!("peak RSS {m:.0} MiB");
    }
}

/// What one run measured besides the tables.
struct Run {
    vls: u8,
    cpu_ms: f64,
    wall_ms: f64,
    /// Nue's counters (escaped switch routes, impasses, unlayered switch-LID routes).
    nue: Option<(u64, u64, u64)>,
}

fn report(name: &str, f: &RoutingFabric, r: &ibsm_routing::Routes, run: Run, do_validate: bool) {
    let (efi, long) = if do_validate {
        let rep = validate(f, r);
        assert!(rep.is_clean() && rep.fully_connected() && rep.delivered == rep.pairs, "{rep}");
        (rep.inter_switch_load.max.to_string(), (rep.delivered - rep.minimal).to_string())
    } else {
        ("-".into(), "-".into())
    };
    let show = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
    println!(
        "{:<34} {:>6} {:>5} {:>6} {:>4} {:>10.0} {:>10.0} {:>8} {:>8} {:>8} {:>9} {:>9}",
        name,
        f.num_end_ports(),
        f.num_switches(),
        f.max_lid(),
        run.vls,
        run.cpu_ms,
        run.wall_ms,
        efi,
        long,
        show(run.nue.map(|n| n.0)),
        show(run.nue.map(|n| n.1)),
        show(run.nue.map(|n| n.2)),
    );
}

fn run_nue(name: &str, f: &RoutingFabric, opts: &EngineOptions, do_validate: bool) {
    let (res, cpu_ms, wall_ms) = timed(|| nue_with_stats(f, opts));
    let (r, st) = res.expect("nue routes a connected fabric");
    let nue = Some((st.escaped_switches, st.impasses, st.unlayered));
    report(name, f, &r, Run { vls: st.layers, cpu_ms, wall_ms, nue }, do_validate);
}

fn run_dor(name: &str, f: &RoutingFabric, do_validate: bool) {
    let (res, cpu_ms, wall_ms) = timed(|| dor(f, &EngineOptions::default()));
    let r = res.expect("dor routes a grid");
    // VLs, not SLs: on a torus the SL is a dateline mask and the per-hop
    // tables fold it onto VLs 0 and 1.
    let vls = r.sl.as_ref().map_or(0, |p| match &p.hop_vls {
        Some(h) => h.vls_used(),
        None => p.by_source_switch.iter().flatten().copied().max().unwrap_or(0) + 1,
    });
    report(name, f, &r, Run { vls, cpu_ms, wall_ms, nue: None }, do_validate);
}
