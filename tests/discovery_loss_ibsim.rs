//! Convergence under loss on ibsim: `Error <switch> 10` on every switch of a
//! 40-switch irregular fabric (ibsim drops 10% of the packets entering each
//! port of a switch, on every hop and both ways: sim_mad.c `pc_updated` and
//! `process_packet`), with `ibsm run` as a daemon sweeping every second.
//! The daemon must say SUBNET UP within a generous bound; then, with the
//! errors cleared so the diags see the fabric as it is, `iblinkinfo` must
//! show every cabled port Active and `ibnetdiscover` one LID per LID-bearing
//! port, the highest being their number (no LID wasted).
//!
//! `IBSM_LOSS_RATE=3` runs the same at ibsim's `Error 3`. A second test
//! runs `ibsm run --once` at `Error 3`: one run must bring the fabric up.

#[path = "transport_support/ibsim.rs"]
mod ibsim;

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ibsim::{generated, run_with_timeout, tool, Ibsim, KillOnDrop};
use ibsm::topology::Topology;

const SPEC: &str = "random:switches=40,links=80,hosts=160,seed=11";

/// A diag's standard output, which must succeed.
fn diag(sim: &Ibsim, host: &str, name: &str, args: &[&str]) -> String {
    let mut c = sim.client(&tool(name), Some(host));
    c.args(args);
    let o = run_with_timeout(c, Duration::from_secs(60));
    assert!(o.status.success(), "{name} {args:?} failed");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The errors cleared on every switch, the cabled ports `iblinkinfo`
/// shows not Active.
fn not_active_without_loss(sim: &Ibsim, topo: &Topology, host: &str) -> Vec<String> {
    for s in topo.switches() {
        sim.console(&format!("Error \"{}\" 0", topo.node(s).name));
    }
    std::thread::sleep(Duration::from_millis(300));
    let links = diag(sim, host, "iblinkinfo", &[]);
    links
        .lines()
        .filter(|l| l.contains("==(") && !l.contains("[  ] \"\" (") && !l.contains("Active/"))
        .map(str::to_string)
        .collect()
}

/// The last `key=value` of `key` on the last log line holding `needle`.
fn field(log: &str, needle: &str, key: &str) -> Option<String> {
    let line = log.lines().rev().find(|l| l.contains(needle))?;
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    Some(line[at..].split_whitespace().next()?.trim_matches('"').to_string())
}

#[test]
fn daemon_converges_with_ten_percent_loss_on_every_switch() {
    let rate: u32 = std::env::var("IBSM_LOSS_RATE").ok().and_then(|r| r.parse().ok()).unwrap_or(10);
    let dir = tempfile::tempdir().unwrap();
    let (net, flags, host) = generated(SPEC, dir.path());
    let topo = Topology::from_spec_or_file(SPEC).unwrap();
    let lid_ports = topo
        .nodes
        .iter()
        .map(|n| if n.kind == ibsm::topology::NodeKind::Switch { 1 } else { n.num_ports as usize })
        .sum::<usize>();
    let sim = Ibsim::start_with(&net, &flags);
    for s in topo.switches() {
        sim.console(&format!("Error \"{}\" {rate}", topo.node(s).name));
    }
    std::thread::sleep(Duration::from_millis(300));

    let cache = dir.path().join("cache");
    let log = dir.path().join("ibsm.log");
    let mut c = sim.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), Some(&host));
    c.args(["run", "--metrics-listen", "", "--sweep-interval", "1", "--cache-dir"])
        .arg(&cache)
        .arg("--log-file")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("ibsm.stderr")).unwrap());
    let t0 = Instant::now();
    let daemon = KillOnDrop(c.spawn().expect("starting ibsm run"));
    let limit =
        Duration::from_secs(std::env::var("IBSM_CONVERGE_LIMIT_S").ok().and_then(|s| s.parse().ok()).unwrap_or(240));
    let up = ibsim::wait_for_log(&log, "SUBNET UP", limit);
    let took = t0.elapsed();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let sweeps = text.lines().filter(|l| l.contains("discovery done")).count();
    let retries = field(&text, "discovery done", "retries").unwrap_or_default();
    let missing: Vec<String> =
        text.lines().filter(|l| l.contains("discovery done")).filter_map(|l| field(l, "", "missing")).collect();
    println!(
        "Error {rate} on {} switches: SUBNET UP {} after {:.1} s, {sweeps} discoveries, {retries} retries so far; missing reads per discovery: {}",
        topo.switches().count(),
        if up { "logged" } else { "NOT logged" },
        took.as_secs_f64(),
        missing.join(" ")
    );
    let digest: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("discovery done") || l.contains("sweep done") || l.contains("SUBNET UP"))
        .collect();
    println!("{}", digest.join("\n"));
    assert!(
        up,
        "no SUBNET UP within {limit:?} at Error {rate}; stderr: {}\nlog tail:\n{}",
        std::fs::read_to_string(dir.path().join("ibsm.stderr")).unwrap_or_default(),
        tail(&text, 40)
    );
    let max_lid: u16 = field(&text, "SUBNET UP", "max_lid").and_then(|m| m.parse().ok()).expect("max_lid logged");

    // The diags see the fabric without loss; the daemon keeps running.
    let not_active = not_active_without_loss(&sim, &topo, &host);
    let lids: HashSet<u16> = diag(&sim, &host, "ibnetdiscover", &["-p"])
        .lines()
        .filter(|l| matches!(l.split_whitespace().next(), Some("CA" | "SW")))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    drop(daemon);
    let highest = lids.iter().copied().max().unwrap_or(0);
    println!(
        "after SUBNET UP: {} ports not Active, {} distinct LIDs for {lid_ports} LID-bearing ports, max LID {highest} (logged {max_lid})",
        not_active.len(),
        lids.len()
    );
    assert!(not_active.is_empty(), "ports not Active after SUBNET UP: {not_active:#?}");
    assert_eq!(lids.len(), lid_ports, "every LID-bearing port has a LID of its own");
    assert_eq!(highest as usize, lid_ports, "no LID wasted");
    assert_eq!(max_lid, highest);
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `ibsm run --once` at ibsim's `Error 3` on every switch of the same
/// fabric: one run brings it up (exit 0, SUBNET UP), every cabled port
/// Active once the errors are cleared.
#[test]
fn once_brings_the_fabric_up_with_three_percent_loss_on_every_switch() {
    let dir = tempfile::tempdir().unwrap();
    let (net, flags, host) = generated(SPEC, dir.path());
    let topo = Topology::from_spec_or_file(SPEC).unwrap();
    let sim = Ibsim::start_with(&net, &flags);
    for s in topo.switches() {
        sim.console(&format!("Error \"{}\" 3", topo.node(s).name));
    }
    std::thread::sleep(Duration::from_millis(300));
    let cache = dir.path().join("cache");
    let t0 = Instant::now();
    let o = sim.ibsm(Some(&host), &["run", "--once", "--cache-dir", cache.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    println!("Error 3, --once: {:.1} s: {}", t0.elapsed().as_secs_f64(), out.trim());
    assert!(o.status.success(), "--once failed at 3%: {out}\n{}", tail(&String::from_utf8_lossy(&o.stderr), 30));
    assert!(out.starts_with("SUBNET UP"), "{out}");
    let not_active = not_active_without_loss(&sim, &topo, &host);
    assert!(not_active.is_empty(), "ports not Active after --once: {not_active:#?}");
}
