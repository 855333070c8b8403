//! Busiest link of every engine on fat trees with cables cut.
//!
//!     cargo run --release -p ibsm-routing --example degraded_bench -- [--vls N] [--small]
//!
//! Trees: the 2-level radix-36 tree (648 hosts) and the 3-level radix-12
//! tree (432 hosts), or with `--small` the 2-level radix-16 and 3-level
//! radix-8 trees of `tests/updn_degraded.rs`, each intact and with 5, 10,
//! 15 and 30% of the switch-to-switch cables cut (`testfab::degraded`,
//! seeds 1 and 2). Each cell is the all-to-all edge forwarding index (the
//! most end-port paths on one switch-to-switch link); `*` marks tables with
//! a credit loop (end-port traffic, on the SLs the engine gave), `-` an
//! engine that refused the fabric. No timing: see `scaling`.

use ibsm_routing::engine::{route, EngineKind};
use ibsm_routing::testfab::{degraded, FatTree};
use ibsm_routing::{analyze_cdg, validate, CdgScope, EngineOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let vls: u8 =
        args.iter().position(|a| a == "--vls").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(1);
    let trees = if args.iter().any(|a| a == "--small") {
        [("2-level r16", FatTree::full(16, 2)), ("3-level r8", FatTree::full(8, 3))]
    } else {
        [("2-level r36", FatTree::full(36, 2)), ("3-level r12", FatTree::full(12, 3))]
    };
    println!("max VLs {vls}");
    print!("| tree | cut | seed |");
    for e in EngineKind::ALL {
        print!(" {e} |");
    }
    println!();
    println!("|---|---|---|{}", "---|".repeat(EngineKind::ALL.len()));
    for (name, ft) in trees {
        let full = ft.build();
        for cut in [0u32, 5, 10, 15, 30] {
            for seed in if cut == 0 { 1..=1 } else { 1..=2u64 } {
                let f = degraded(&full, cut, seed);
                print!("| {name} | {cut}% | {seed} |");
                for e in EngineKind::ALL {
                    let o = EngineOptions { max_vls: vls, ..EngineOptions::default() };
                    match route(e, &f, &o) {
                        Ok(r) => {
                            let load = validate(&f, &r).inter_switch_load.max;
                            let free = analyze_cdg(&f, &r, CdgScope::default()).deadlock_free();
                            print!(" {load}{} |", if free { "" } else { "*" });
                        }
                        Err(_) => print!(" - |"),
                    }
                }
                println!();
            }
        }
    }
}
