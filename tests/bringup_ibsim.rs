//! Bring-up on ibsim, judged by infiniband-diags only: `ibsm run --once`
//! brings the fabric up; then `iblinkinfo` must show every cabled port
//! Active, `ibnetdiscover` a unique LID on every port, the `ibroute` tables
//! walked over ibnetdiscover's links must deliver every LID from every switch
//! (entries ibroute does not print are checked with `ibtracert`), and
//! `sminfo` must find ibsm as master. A restart and a takeover from OpenSM
//! must keep every LID.

#[path = "transport_support/diags.rs"]
mod diags;
#[path = "transport_support/ibsim.rs"]
mod ibsim;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use diags::Fabric;
use ibsim::{generated, run_with_timeout, stdout, tool, Ibsim};
use ibsm::topology::{NodeKind, Topology};

fn workdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn first_host(net: &Path) -> String {
    let topo = Topology::from_spec_or_file(net.to_str().unwrap()).unwrap();
    let h = topo.nodes.iter().find(|n| n.kind != NodeKind::Switch).expect("a host");
    h.name.clone()
}

fn ibsm_once(sim: &Ibsim, host: &str, cache: &Path) {
    let o = sim.ibsm(Some(host), &["run", "--once", "--cache-dir", cache.to_str().unwrap()]);
    assert!(o.status.success(), "ibsm run --once failed: {}\n{}", stdout(&o), ibsim::stderr(&o));
    assert!(stdout(&o).starts_with("SUBNET UP"), "{}", stdout(&o));
}

/// Starts `ibsm run` as a service; waits for SUBNET UP in its log.
fn ibsm_service(sim: &Ibsim, host: &str, cache: &Path) -> (Child, PathBuf) {
    let log = cache.join("service.log");
    let mut c = sim.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), Some(host));
    c.args(["run", "--cache-dir", cache.to_str().unwrap(), "--log-file", log.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    if ibsim::wait_for_log(&log, "SUBNET UP", Duration::from_secs(30)) {
        return (child, log);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("ibsm service never logged SUBNET UP: {}", std::fs::read_to_string(&log).unwrap_or_default());
}

fn check_fabric(label: &str, net: &Path, flags: &[String], host: &str) {
    let sim = Ibsim::start_with(net, flags);
    let fabric = Fabric { sim: &sim, host: host.to_string() };
    let cache = workdir();
    ibsm_once(&sim, host, cache.path());
    fabric.judge(label);
    let lids = fabric.lids();
    let g2l = std::fs::read_to_string(cache.path().join("guid2lid")).expect("guid2lid written");
    assert_eq!(g2l.lines().filter(|l| l.starts_with("0x")).count(), lids.len(), "{label}: guid2lid has every port");

    // A restarted SM (fresh cache: the LIDs come from the ports) keeps
    // every LID, and sminfo finds it as master.
    let cache2 = workdir();
    let (mut child, _log) = ibsm_service(&sim, host, cache2.path());
    let info = fabric.tool("sminfo", &[]);
    let _ = child.kill();
    let _ = child.wait();
    assert!(info.contains("SMINFO_MASTER"), "{label}: sminfo: {info}");
    assert_eq!(fabric.lids(), lids, "{label}: a restart renumbered the fabric");
}

#[test]
fn ibsim_example_nets() {
    for name in ["net", "net.1", "net.2sw2path", "net.2sw2path4hca", "net.2sw2path4hca2port"] {
        let net = ibsim::net(name);
        let host = first_host(&net);
        check_fabric(name, &net, &[], &host);
    }
}

#[test]
fn generated_fabrics() {
    for spec in ["b2b", "fattree2:radix=8", "torus3d:3x3x3,hosts=1", "random:switches=12,links=24,hosts=16,seed=3"] {
        let dir = workdir();
        let (net, flags, host) = generated(spec, dir.path());
        check_fabric(spec, &net, &flags, &host);
    }
}

#[test]
fn takeover_from_opensm_keeps_its_lids() {
    let dir = workdir();
    let (net, flags, host) = generated("fattree2:radix=8,leaves=4,spines=2,hosts=3", dir.path());
    let sim = Ibsim::start_with(&net, &flags);
    let fabric = Fabric { sim: &sim, host: host.clone() };
    let osm = workdir();
    let mut c = sim.client(&tool("opensm"), Some(&host));
    c.args(["-o", "-f"]).arg(osm.path().join("log")).env("OSM_TMP_DIR", osm.path()).env("OSM_CACHE_DIR", osm.path());
    let o = run_with_timeout(c, Duration::from_secs(60));
    assert!(o.status.success(), "opensm -o failed");
    let before = fabric.lids();
    // Spread-out LIDs make the check meaningful: OpenSM's LIDs are kept as
    // they are, not renumbered to ibsm's own order.
    assert!(before.values().all(|&l| l > 0));
    let cache = workdir();
    ibsm_once(&sim, &host, cache.path());
    assert_eq!(fabric.lids(), before, "ibsm renumbered OpenSM's LIDs");
    fabric.judge("after OpenSM");
}

#[test]
fn opensm_guid2lid_is_honoured_on_a_cold_fabric() {
    // A site moving from OpenSM brings its guid2lid: ibsm on a cold fabric
    // (ports at LID 0) hands out exactly those LIDs.
    let dir = workdir();
    let (net, flags, host) = generated("fattree2:radix=8,leaves=2,spines=2,hosts=2", dir.path());
    let osm = workdir();
    {
        let sim = Ibsim::start_with(&net, &flags);
        let mut c = sim.client(&tool("opensm"), Some(&host));
        c.args(["-o", "-f"])
            .arg(osm.path().join("log"))
            .env("OSM_TMP_DIR", osm.path())
            .env("OSM_CACHE_DIR", osm.path());
        let o = run_with_timeout(c, Duration::from_secs(60));
        assert!(o.status.success(), "opensm -o failed");
    }
    let file = std::fs::read_to_string(osm.path().join("guid2lid")).unwrap();
    // A fresh ibsim: every port back at LID 0.
    let sim = Ibsim::start_with(&net, &flags);
    let fabric = Fabric { sim: &sim, host: host.clone() };
    let cache = workdir();
    std::fs::write(cache.path().join("guid2lid"), &file).unwrap();
    ibsm_once(&sim, &host, cache.path());
    let lids = fabric.lids();
    let mut expected = BTreeMap::new();
    for line in file.lines().filter(|l| l.starts_with("0x")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let guid = u64::from_str_radix(&f[0][2..], 16).unwrap();
        let lid = u16::from_str_radix(&f[1][2..], 16).unwrap();
        expected.insert(guid, lid);
    }
    assert_eq!(lids, expected, "ibsm did not use OpenSM's guid2lid");
}

#[test]
fn packet_drops_are_retried_on_ibsim() {
    let dir = workdir();
    let (net, flags, host) = generated("fattree2:radix=8,leaves=4,spines=2,hosts=3", dir.path());
    let sim = Ibsim::start_with(&net, &flags);
    // ibsim's Error command: every port of both spines drops 15% of packets.
    let topo = Topology::from_spec_or_file(net.to_str().unwrap()).unwrap();
    for s in topo.switches().filter(|&s| topo.node(s).name.starts_with("spine")) {
        sim.console(&format!("Error \"{}\" 15", topo.node(s).name));
    }
    std::thread::sleep(Duration::from_millis(200));
    let cache = workdir();
    let o = sim.ibsm(Some(&host), &["run", "--once", "--cache-dir", cache.path().to_str().unwrap()]);
    assert!(o.status.success(), "ibsm failed under drops: {}", ibsim::stderr(&o));
    let out = stdout(&o);
    let retries: u64 =
        out.split('(').nth(1).and_then(|t| t.split_whitespace().next()).and_then(|n| n.parse().ok()).unwrap();
    assert!(retries > 0, "15% drops must cost retries: {out}\nibsim log: {}", sim.log());
    for s in topo.switches() {
        sim.console(&format!("Error \"{}\" 0", topo.node(s).name));
    }
    std::thread::sleep(Duration::from_millis(200));
    Fabric { sim: &sim, host }.judge("after drops");
}

#[test]
fn no_hardware_points_at_sim() {
    // No ibsim, no umad2sim: the real backend finds no port here.
    let o = Command::new(env!("CARGO_BIN_EXE_ibsm")).args(["run", "--once"]).env_remove("LD_PRELOAD").output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--sim"), "the error should point at --sim: {err}");
}

/// The SL-to-VL rows `smpquery sl2vl` prints: ((in, out), VL per SL).
fn sl2vl_rows(text: &str) -> Vec<((u8, u8), Vec<u8>)> {
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("ports: in")) {
        let (head, table) = line.split_once(':').and_then(|(_, rest)| rest.split_once(':')).map_or(("", ""), |x| x);
        let nums: Vec<u8> = head.split(|c: char| !c.is_ascii_digit()).filter_map(|t| t.parse().ok()).collect();
        let vls: Vec<u8> = table.split('|').filter_map(|t| t.trim().parse().ok()).collect();
        if let (&[input, output], 16) = (&nums[..], vls.len()) {
            rows.push(((input, output), vls));
        }
    }
    rows
}

#[test]
fn dor_with_two_vls_on_an_ibsim_torus() {
    // Every ring of a 5x5 torus has a dateline: dor moves packets to VL 1
    // there through per-port SL-to-VL tables, within a 2-VL budget.
    let dir = workdir();
    let (net, flags, host) = generated("torus2d:5x5,hosts=1", dir.path());
    let sim = Ibsim::start_with(&net, &flags);
    let conf = dir.path().join("ibsm.toml");
    std::fs::write(&conf, "[sm]\nmax_op_vls = 2\nrouting_engine = [\"dor\"]\n").unwrap();
    let cache = workdir();
    let o = sim.ibsm(
        Some(&host),
        &["run", "--once", "--config", conf.to_str().unwrap(), "--cache-dir", cache.path().to_str().unwrap()],
    );
    assert!(o.status.success(), "ibsm run --once with dor: {}\n{}", stdout(&o), ibsim::stderr(&o));
    let fabric = Fabric { sim: &sim, host: host.clone() };
    fabric.judge("dor on 2 VLs");

    // The host's switch (DR path 0,1): every table between two different
    // ports uses VL 0 or 1 only, and some SL rides VL 1 (a dateline hop).
    let mut rows = Vec::new();
    for out in 1..=5u8 {
        rows.extend(sl2vl_rows(&fabric.tool("smpquery", &["-D", "sl2vl", "0,1", &out.to_string()])));
    }
    let between: Vec<&Vec<u8>> = rows.iter().filter(|((i, o), _)| i != o).map(|(_, v)| v).collect();
    assert!(between.len() >= 20, "{rows:?}");
    assert!(between.iter().all(|v| v.iter().all(|&vl| vl <= 1)), "{rows:?}");
    assert!(between.iter().any(|v| v.contains(&1)), "no SL moves to VL 1: {rows:?}");
    // The host's own port sends every SL on VL 0.
    let ca = sl2vl_rows(&fabric.tool("smpquery", &["-D", "sl2vl", "0"]));
    assert_eq!(ca.len(), 1, "{ca:?}");
    assert!(ca[0].1.iter().all(|&vl| vl == 0), "{ca:?}");
}
