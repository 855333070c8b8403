//! Routing time and peak memory of every engine against fabric size: the
//! scaling curve of fat trees from 648 to 45,056 hosts.
//!
//!     cargo run --release -p ibsm-routing --example scaling -- [--engines E,..] [--hosts N,..] [--timeout S]
//!
//! Each (engine, fabric) runs in a child process of its own, so that peak
//! memory is that engine's alone: the child builds the fabric, reads its
//! resident set (`VmRSS`, the fabric's baseline), routes, and reads the
//! kernel's high-water mark (`VmHWM`). "route MiB" is the difference, the
//! memory the engine needed on top of the fabric (tables included); "peak
//! MiB" is the whole process. Times are CPU time of the routing thread, so a
//! busy shared machine does not inflate them. A child that runs past
//! `--timeout` seconds (default 600) is killed and reported as such.
//!
//! Fabrics: 3-level fat trees of radix-36 switches with 2 to 36 pods of 324
//! hosts (648 to 11,664 hosts), then radix 64 with 16 to 44 pods of 1,024
//! (16,384 to 45,056). 50,000 hosts cannot be addressed in one subnet:
//! there are 49,151 unicast LIDs (IBA 4.1.3), shared with the switches, and
//! 45,056 hosts with their 3,840 switches is the largest radix-64 3-level
//! tree that fits.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ibsm_routing::testfab::{timed, FatTree};
use ibsm_routing::{route, validate, EngineKind, EngineOptions};

/// (radix, pods) of every fabric on the curve.
const CURVE: [(u8, usize); 10] =
    [(36, 2), (36, 4), (36, 8), (36, 12), (36, 24), (36, 36), (64, 16), (64, 24), (64, 32), (64, 44)];

fn tree(radix: u8, pods: usize) -> FatTree {
    let pod_hosts = usize::from(radix / 2).pow(2);
    FatTree::new(radix, 3, pods * pod_hosts)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(&args[1..]);
        return;
    }
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let engines: Vec<EngineKind> = match value("--engines") {
        Some(list) => list.split(',').map(|e| e.parse().unwrap_or_else(|err| panic!("{err}"))).collect(),
        None => vec![
            EngineKind::FTree,
            EngineKind::MinHop,
            EngineKind::UpDn,
            EngineKind::DnUp,
            EngineKind::Sssp,
            EngineKind::Dfsssp,
            EngineKind::Nue,
        ],
    };
    let hosts: Option<Vec<usize>> =
        value("--hosts").map(|l| l.split(',').map(|h| h.parse().expect("--hosts takes numbers")).collect());
    let timeout = Duration::from_secs(value("--timeout").map_or(600, |t| t.parse().expect("--timeout takes seconds")));
    let me = std::env::current_exe().expect("the example knows its own path");

    println!(
        "{:>7} {:>6} {:>7} {:<7} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "hosts", "sw", "radix", "engine", "route ms", "(wall ms)", "route MiB", "peak MiB", "EFI"
    );
    for (radix, pods) in CURVE {
        let ft = tree(radix, pods);
        if hosts.as_ref().is_some_and(|h| !h.contains(&ft.hosts)) {
            continue;
        }
        for &engine in &engines {
            let started = Instant::now();
            let mut child = Command::new(&me)
                .args(["--child", engine.name(), &radix.to_string(), &pods.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .expect("re-running the example as a child");
            let line = loop {
                if let Some(status) = child.try_wait().expect("waiting for the child") {
                    let mut out = String::new();
                    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
                    break if status.success() { out.trim_end().to_string() } else { format!("failed: {status}") };
                }
                if started.elapsed() > timeout {
                    let _ = child.kill();
                    let _ = child.wait();
                    break format!("killed after {} s", timeout.as_secs());
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            println!("{line}");
        }
    }
}

/// One (engine, fabric) measurement; prints one table row.
fn child(args: &[String]) {
    let engine: EngineKind = args[0].parse().expect("engine name");
    let radix: u8 = args[1].parse().expect("radix");
    let pods: usize = args[2].parse().expect("pods");
    let ft = tree(radix, pods);
    let fabric = ft.build();
    let baseline = status_kib("VmRSS");
    let (routes, cpu, wall) = timed(|| route(engine, &fabric, &EngineOptions::default()));
    let peak = status_kib("VmHWM");
    let mib = |kib: u64| kib as f64 / 1024.0;
    let head = format!("{:>7} {:>6} {:>7} {:<7}", ft.hosts, fabric.num_switches(), radix, engine.name());
    match routes {
        Ok(routes) => {
            let report = validate(&fabric, &routes);
            let efi = if report.is_clean() { report.inter_switch_load.max.to_string() } else { "INVALID".to_string() };
            println!(
                "{head} {cpu:>10.0} {wall:>10.0} {:>10.1} {:>10.1} {efi:>8}",
                mib(peak.saturating_sub(baseline)),
                mib(peak)
            );
        }
        Err(e) => println!("{head} refused: {e}"),
    }
}

/// A `/proc/self/status` figure in KiB (0 when the kernel does not say).
fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or(0)
}
