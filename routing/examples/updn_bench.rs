//! Times updn and dnup (next to MinHop) on fat trees, one core.
//!
//!     cargo run --release -p ibsm-routing --example updn_bench -- [--no-validate] [--only ENGINE] [SIZE...]
//!
//! SIZE is one of: 648, 3888, 11664, 45056 (default: 648, 3888, 11664).
//! Times are CPU time of this thread (Linux /proc/thread-self/schedstat),
//! so other load on a shared machine does not inflate them; wall time is
//! printed beside. "roots ms" is the automatic root detection alone (part
//! of "route ms"). EFI is the edge forwarding index (most all-to-all paths
//! on one switch-to-switch link); "longer" counts end-port paths to
//! base LIDs that are not shortest (validation only). `--only updn` runs
//! one engine, on the generator's numbering only, e.g. to read its peak
//! memory with `/usr/bin/time -v`.

use ibsm_routing::testfab::renumbered;
use ibsm_routing::testfab::{benchmark_fat_trees, timed};
use ibsm_routing::updn::{detect_roots, dnup, updn};
use ibsm_routing::{minhop, validate, EngineOptions, Routes, RoutingError, RoutingFabric};

type Engine = fn(&RoutingFabric) -> Result<Routes, RoutingError>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let do_validate = !args.iter().any(|a| a == "--no-validate");
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    let mut wanted: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if wanted.is_empty() {
        wanted = vec![648, 3888, 11664];
    }
    let cases = benchmark_fat_trees();
    let engines: [(&str, Engine); 3] = [
        ("minhop", |f| minhop(f)),
        ("updn", |f| updn(f, &EngineOptions::default())),
        ("dnup", |f| dnup(f, &EngineOptions::default())),
    ];
    println!(
        "{:<28} {:>6} {:>7} {:>5} {:>9} {:>9} {:>10} {:>8} {:>8}",
        "fabric", "engine", "hosts", "sw", "roots ms", "route ms", "(wall ms)", "EFI", "longer"
    );
    for (name, ft) in cases {
        if !wanted.contains(&ft.hosts) {
            continue;
        }
        let f = ft.build();
        let g = if only.is_none() { renumbered(&f, 1) } else { f.clone() };
        let fabrics: &[(&str, &RoutingFabric)] =
            if only.is_none() { &[(name, &f), ("  renumbered", &g)] } else { &[(name, &f)] };
        for &(label, fab) in fabrics {
            for (ename, engine) in engines {
                if only.as_deref().is_some_and(|o| o != ename) {
                    continue;
                }
                let roots = if ename == "updn" {
                    let (_, ms, _) = timed(|| detect_roots(fab));
                    format!("{ms:.1}")
                } else {
                    "-".into()
                };
                let (routes, cpu, wall) = timed(|| engine(fab).expect("a fat tree is connected"));
                let (efi, longer) = if do_validate {
                    let rep = validate(fab, &routes);
                    assert!(rep.is_clean() && rep.fully_connected(), "{rep}");
                    (rep.inter_switch_load.max.to_string(), end_port_longer(fab, &routes).to_string())
                } else {
                    ("-".into(), "-".into())
                };
                println!(
                    "{:<28} {:>6} {:>7} {:>5} {:>9} {:>9.1} {:>10.1} {:>8} {:>8}",
                    label,
                    ename,
                    fab.num_end_ports(),
                    fab.num_switches(),
                    roots,
                    cpu,
                    wall,
                    efi,
                    longer
                );
            }
        }
    }
}

/// End-port to end-port paths (base LIDs) longer than the shortest, by
/// walking the tables from each source's switch.
fn end_port_longer(f: &RoutingFabric, r: &Routes) -> u64 {
    let mut dist = Vec::new();
    let mut queue = Vec::new();
    let mut longer = 0;
    // Switch-level: for each destination end port, follow every switch's
    // route and compare with its hop distance; count once per source port.
    let mut hosts_on = vec![0u64; f.num_switches()];
    for e in f.end_port_ids() {
        if let Some((s, _)) = f.attached_switch(e) {
            hosts_on[s.index()] += 1;
        }
    }
    for dst in f.end_port_ids() {
        let Some((t, _)) = f.attached_switch(dst) else { continue };
        let lid = f.end_port(dst).base_lid;
        f.switch_distances(t, &mut dist, &mut queue);
        for s in f.switch_ids() {
            if hosts_on[s.index()] == 0 {
                continue;
            }
            let (mut cur, mut hops) = (s, 0u32);
            while cur != t {
                match f.switch_peer(cur, r.port(cur, lid)) {
                    Some(ibsm_routing::PortEnd::Switch(n, _)) => cur = n,
                    _ => break,
                }
                hops += 1;
            }
            if hops != dist[s.index()] {
                longer += hosts_on[s.index()];
            }
        }
    }
    longer
}
