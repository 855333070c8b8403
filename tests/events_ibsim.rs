//! Fabric events on ibsim, driven from its console as an operator's hands
//! would: a cable down and back, a spine down and back, a switch reboot
//! (`Clear` and `ReLink`), a host reboot, a host cable moved to another
//! leaf, a new leaf with its hosts, ten cables down at once. `ibsm run`
//! runs as a daemon with periodic sweeps off, so traps alone start each
//! reaction. After each, the fabric is judged by infiniband-diags alone
//! (every cabled port Active, unique LIDs, every LID delivered from every
//! switch through the `ibroute` tables), no change fell back to a heavy
//! sweep, and every port that stayed keeps its LID.

#[path = "transport_support/diags.rs"]
mod diags;
#[path = "transport_support/ibsim.rs"]
mod ibsim;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use diags::Fabric;
use ibsim::{generated, spawn_daemon, wait_for_log_count, Ibsim, KillOnDrop};

const SPEC: &str = "fattree2:radix=12,leaves=6,spines=3,hosts=6";

struct Bed<'a> {
    fabric: Fabric<'a>,
    daemon: KillOnDrop,
    log: std::path::PathBuf,
}

impl Bed<'_> {
    fn count(&self, needle: &str) -> usize {
        std::fs::read_to_string(&self.log).unwrap_or_default().matches(needle).count()
    }

    /// Runs `commands` on ibsim's console; waits for a reaction and for
    /// the daemon to go quiet (no reaction for a second), then judges.
    fn scenario(&mut self, label: &str, commands: &[&str]) -> BTreeMap<u64, u16> {
        let before = self.fabric.lids();
        let reactions = self.count("reaction done");
        let heavy = self.count("heavy sweep next");
        for c in commands {
            self.fabric.sim.console(c);
        }
        wait_for_log_count(&mut self.daemon, &self.log, "reaction done", reactions + 1, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let mut seen = self.count("reaction done");
        let mut quiet_since = Instant::now();
        while quiet_since.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(100));
            let now = self.count("reaction done");
            if now != seen {
                seen = now;
                quiet_since = Instant::now();
            }
        }
        assert_eq!(self.count("heavy sweep next"), heavy, "{label}: a change fell back to a heavy sweep");
        self.fabric.judge(label);
        let after = self.fabric.lids();
        for (guid, lid) in &before {
            if let Some(now) = after.get(guid) {
                assert_eq!(now, lid, "{label}: port {guid:#x} changed LID");
            }
        }
        after
    }
}

impl Bed<'_> {
    /// Prints the reactions the daemon logged and stops it.
    fn finish(mut self) {
        for line in std::fs::read_to_string(&self.log).unwrap().lines().filter(|l| l.contains("reaction done")) {
            eprintln!("{line}");
        }
        ibsim::terminate(&mut self.daemon, Duration::from_secs(10));
    }
}

/// ibsim running a generated `spec`, and `ibsm run` as a daemon on its SM
/// host (light sweeps every `sweep_interval` seconds, "0": off), let
/// settle for `settle` after the subnet came up.
struct Started {
    sim: Ibsim,
    host: String,
    daemon: KillOnDrop,
    log: std::path::PathBuf,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn start_fabric(spec: &str, sweep_interval: &str, settle: Duration) -> Started {
    let dir = tempfile::tempdir().unwrap();
    let (net, flags, host) = generated(spec, dir.path());
    let sim = Ibsim::start_with(&net, &flags);
    sim.wait_for_sma(&host, Duration::from_secs(20));
    let cache = tempfile::tempdir().unwrap();
    let (daemon, log) = start_ibsm(&sim, &host, sweep_interval, cache.path());
    std::thread::sleep(settle);
    Started { sim, host, daemon, log, _dirs: (dir, cache) }
}

/// `ibsm run` as a daemon on `host`, light sweeps every `sweep_interval`
/// seconds ("0": off), its cache and log in `cache`; returns once the
/// subnet is up.
fn start_ibsm(sim: &Ibsim, host: &str, sweep_interval: &str, cache: &Path) -> (KillOnDrop, std::path::PathBuf) {
    let log = cache.join("ibsm.log");
    let mut c = sim.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), Some(host));
    c.args(["run", "--sweep-interval", sweep_interval, "--cache-dir"])
        .arg(cache)
        .arg("--log-file")
        .arg(&log)
        .env("IBSM_LOG", "info")
        .stdin(Stdio::null());
    let mut daemon = spawn_daemon(c, &cache.join("ibsm.out"));
    wait_for_log_count(&mut daemon, &log, "SUBNET UP", 1, Duration::from_secs(60)).unwrap();
    (daemon, log)
}

fn guid_of(net: &Path, name: &str) -> u64 {
    let topo = ibsm::topology::Topology::from_spec_or_file(net.to_str().unwrap()).unwrap();
    let node = topo.nodes.iter().find(|n| n.name == name).unwrap_or_else(|| panic!("no node {name}"));
    node.port_guids.get(1).copied().unwrap_or(node.node_guid).0
}

#[test]
fn every_scenario_reacted_to_from_traps_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (net, flags, host) = generated(SPEC, dir.path());
    let sim = Ibsim::start_with(&net, &flags);
    // The last leaf and its hosts join later.
    sim.console("Unlink \"leaf5\"");
    sim.wait_for_sma(&host, Duration::from_secs(20));
    let cache = tempfile::tempdir().unwrap();
    let (daemon, log) = start_ibsm(&sim, &host, "0", cache.path());
    // The sweeps that follow bring-up (PortStateChange raised by the SM's
    // own activations) settle.
    std::thread::sleep(Duration::from_secs(2));
    let mut bed = Bed { fabric: Fabric { sim: &sim, host: host.clone() }, daemon, log: log.clone() };
    bed.fabric.judge("bring-up");

    bed.scenario("cable down", &["Unlink \"leaf1\"[7]"]);
    bed.scenario("cable up", &["ReLink \"leaf1\"[7]"]);
    bed.scenario("spine down", &["Unlink \"spine1\""]);
    bed.scenario("spine back", &["ReLink \"spine1\""]);
    bed.scenario("switch reboot", &["Clear \"leaf2\"", "ReLink \"leaf2\""]);
    bed.scenario("host reboot", &["Clear \"leaf3-h2\"", "ReLink \"leaf3-h2\""]);
    let mover = guid_of(&net, "leaf0-h3");
    let lid = bed.fabric.lids()[&mover];
    let lids = bed.scenario("host cable moved", &["Unlink \"leaf0\"[4]", "Link \"leaf1\"[10] \"leaf0-h3\"[1]"]);
    assert_eq!(lids.get(&mover), Some(&lid), "the moved host keeps its LID");
    let lids = bed.scenario("new leaf", &["ReLink \"leaf5\""]);
    assert!(lids.contains_key(&guid_of(&net, "leaf5-h4")), "the new leaf's hosts got LIDs");
    let ten = [
        "Unlink \"leaf1\"[8]",
        "Unlink \"leaf2\"[9]",
        "Unlink \"leaf3\"[7]",
        "Unlink \"leaf4\"[8]",
        "Unlink \"leaf2\"[1]",
        "Unlink \"leaf2\"[2]",
        "Unlink \"leaf3\"[5]",
        "Unlink \"leaf4\"[6]",
        "Unlink \"leaf5\"[3]",
        "Unlink \"leaf5\"[4]",
    ];
    let lids = bed.scenario("ten cables down", &ten);
    assert!(!lids.contains_key(&guid_of(&net, "leaf2-h1")), "a host cut off is not in the fabric");
    bed.finish();
}

/// A mesh switch whose loss the repair cannot route around, on ibsim: the
/// reaction routes quickly, the next quiet light sweep (every second here)
/// routes again in full, and the fabric is judged after each, and after
/// the switch comes back.
#[test]
fn a_mesh_switch_lost_is_routed_quickly_then_rebalanced() {
    let Started { sim, host, daemon, log, _dirs } = start_fabric("mesh2d:6x6,hosts=2", "1", Duration::from_secs(3));
    let mut bed = Bed { fabric: Fabric { sim: &sim, host: host.clone() }, daemon, log: log.clone() };
    bed.fabric.judge("bring-up");

    // The quick tables are not judged here: the rebalance follows within
    // a second, and tables read from 35 switches one by one while it writes
    // would mix states the fabric never held (events_sim judges them).
    let heavy = bed.count("heavy sweep next");
    sim.console("Unlink \"sw1-1\"");
    wait_for_log_count(&mut bed.daemon, &log, "routed_quickly=true", 1, Duration::from_secs(30))
        .expect("the loss routed quickly");
    wait_for_log_count(&mut bed.daemon, &log, "trigger=rebalance", 1, Duration::from_secs(30))
        .expect("a rebalance at a quiet light sweep");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(bed.count("heavy sweep next"), heavy, "the loss fell back to a heavy sweep");
    bed.fabric.judge("rebalanced");
    bed.scenario("switch back", &["ReLink \"sw1-1\""]);
    bed.finish();
}

/// A torus cable down on ibsim: dor routes round it on its two VLs, with
/// no quick run, and moves only what crossed the cable; then back. Then a
/// switch down: dor routes round the hole on four VLs (ibsim's ports run
/// eight), again with no quick run and a few blocks; then back.
#[test]
fn a_torus_cable_down_is_routed_round_by_dor() {
    let Started { sim, host, daemon, log, _dirs } = start_fabric("torus2d:6x6,hosts=2", "0", Duration::from_secs(2));
    let mut bed = Bed { fabric: Fabric { sim: &sim, host: host.clone() }, daemon, log: log.clone() };
    bed.fabric.judge("bring-up");
    let last_reaction = || {
        let text = std::fs::read_to_string(&log).unwrap();
        text.lines().rev().find(|l| l.contains("reaction done")).unwrap().to_string()
    };
    let blocks = |line: &str| -> usize {
        let at = line.find("lft_blocks=").expect("lft_blocks in the reaction line") + "lft_blocks=".len();
        line[at..].split(' ').next().unwrap().parse().unwrap()
    };
    // A cable: one ring of six switches, two blocks each (108 LIDs). A
    // switch (sw3-3 is no neighbour of sw0-0, where dor's coordinates
    // start): a quick run on one VL rewrote all 70 blocks.
    let scenarios = [
        ("cable down", "Unlink \"sw0-1\"[3]", 12),
        ("cable up", "ReLink \"sw0-1\"[3]", 12),
        ("switch down", "Unlink \"sw3-3\"", 24),
        ("switch up", "ReLink \"sw3-3\"", 24),
    ];
    for (label, command, most) in scenarios {
        bed.scenario(label, &[command]);
        let line = last_reaction();
        assert!(line.contains("routed_quickly=false"), "{label}: {line}");
        assert!(blocks(&line) <= most, "{label}: {line}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("6x6 torus with 1 cable missing"), "dor routed the torus as it was left");
    assert!(text.contains("6x6 torus with 1 switch missing"), "dor routed round the switch gone");
    bed.finish();
}
