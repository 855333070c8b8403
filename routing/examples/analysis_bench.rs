//! Times the analyses on fat trees routed by minhop.
//!
//!     cargo run --release -p ibsm-routing --example analysis_bench -- [SIZE...] [--shifts N]
//!
//! SIZE is 648 or 11664 hosts (default: both). `--shifts N` evaluates N
//! evenly spaced shifts instead of all of them.

use std::time::Instant;

use ibsm_routing::testfab::FatTree;
use ibsm_routing::{analyze_cdg, minhop, shift_balance, validate, CdgScope, ShiftOrder};

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shifts = args.iter().position(|a| a == "--shifts").and_then(|i| args.get(i + 1)?.parse().ok());
    let mut wanted: Vec<usize> =
        args.iter().filter_map(|a| a.parse().ok()).filter(|&n| n == 648 || n == 11664).collect();
    if wanted.is_empty() {
        wanted = vec![648, 11664];
    }
    println!(
        "{:>7} {:>6} {:>10} {:>8} {:>8} {:>10} {:>7} {:>10}",
        "hosts", "sw", "route ms", "valid ms", "cdg ms", "shift ms", "shifts", "shift max"
    );
    for hosts in wanted {
        let ft = if hosts == 648 { FatTree::full(36, 2) } else { FatTree::full(36, 3) };
        let f = ft.build();
        let t = Instant::now();
        let r = minhop(&f).expect("a fat tree is connected");
        let route = ms(t);
        let t = Instant::now();
        let v = validate(&f, &r);
        let valid = ms(t);
        assert!(v.is_valid());
        let t = Instant::now();
        let c = analyze_cdg(&f, &r, CdgScope::default());
        let cdg = ms(t);
        assert!(c.deadlock_free());
        let t = Instant::now();
        let s = shift_balance(&f, &r, ShiftOrder::Guid, shifts);
        let shift = ms(t);
        println!(
            "{:>7} {:>6} {:>10.0} {:>8.0} {:>8.0} {:>10.0} {:>7} {:>10}",
            hosts,
            f.num_switches(),
            route,
            valid,
            cdg,
            shift,
            s.shifts,
            s.worst_max
        );
    }
}
