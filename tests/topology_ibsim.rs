//! Our models against ibsim itself: each net file (the ibsim examples, our
//! fixtures, ibnetdiscover captures, and generated fabrics written by our
//! writer) is loaded into ibsim with the flags `ibsim_args` asks for; then
//! every node (a sample on large fabrics) is queried with
//! `smpquery -D nodeinfo` along the path `dr_path_to` computes, and
//! ibnetdiscover's view of the whole fabric is compared by GUID with ours
//! (descriptions, cables, widths, speeds).
//!
//! Needs ibsim-utils and infiniband-diags (scripts/test.sh installs them):
//! the tests fail, not skip, without them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ibsm::topology::{
    fabric_diff, ibsim_args, netfile::parse_net_with, to_net_string, NodeIdx, NodeKind, PortRef, Topology,
    TopologyIndex,
};

const UMAD2SIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

static COUNTER: AtomicUsize = AtomicUsize::new(0);
/// Concurrent smpquery clients per ibsim.
const WORKERS: usize = 4;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/topologies").join(name)
}

/// One ibsim process, killed on drop.
struct Sim {
    child: Child,
    sock: String,
    /// Clients run here: umad2sim writes ./sys-<pid> trees.
    dir: tempfile::TempDir,
}

impl Sim {
    fn start(net: &Path, args: &[String], cwd: &Path) -> Sim {
        assert!(Path::new(UMAD2SIM).exists(), "{UMAD2SIM} missing: install ibsim-utils");
        let dir = tempfile::tempdir().unwrap();
        let sock = format!("ibsm-topo-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
        let log_path = dir.path().join("ibsim.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new("ibsim")
            .args(args)
            .args(["-s", "-n"])
            .arg(net)
            .env("IBSIM_SOCKNAME", &sock)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run ibsim ({e}): install ibsim-utils"));
        let mut sim = Sim { child, sock, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            if text.contains("simulator ready") {
                return sim;
            }
            if let Ok(Some(status)) = sim.child.try_wait() {
                panic!("ibsim exited ({status}) loading {}:\n{text}", net.display());
            }
            assert!(Instant::now() < deadline, "ibsim not ready after 30 s:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs an infiniband-diags tool attached at node `host`.
    fn tool(&self, host: &str, tool: &str, args: &[&str]) -> String {
        let out = Command::new(tool)
            .args(args)
            .env("LD_PRELOAD", UMAD2SIM)
            .env("IBSIM_SOCKNAME", &self.sock)
            .env("SIM_HOST", host)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {tool} ({e}): install infiniband-diags"));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{tool} {args:?} from {host} failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `Field:.....value` lines of smpquery's output.
fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .map(|v| v.trim_start_matches('.').trim())
        .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
}

fn hex(v: &str) -> u64 {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("not hex: {v}"))
}

/// Follows `path` from `from`; returns the node reached and the port it was
/// entered by (`from.port` when the path is empty: the attach point itself).
fn walk(ix: &TopologyIndex, from: PortRef, path: &[u8]) -> (NodeIdx, u8) {
    let mut at = (from.node, from.port);
    for &p in path {
        let far = ix.neighbor(PortRef { node: at.0, port: p }).expect("path follows cables");
        at = (far.node, far.port);
    }
    at
}

/// Loads `net` into ibsim and checks it reports `topo`: every node by
/// NodeInfo and the whole fabric by ibnetdiscover; or, given `sample`, about
/// that many nodes by NodeInfo only (large fabrics, to stay fast).
fn check(label: &str, topo: &Topology, net: &Path, cwd: &Path, sample: Option<usize>) {
    let sim = Sim::start(net, &ibsim_args(topo), cwd);
    let ix = topo.index();
    // Attach to a switch (port 0 reaches every port) or else to a CA's port 1.
    let attach = topo.switches().next().or_else(|| topo.hosts().next()).expect("a node to attach to");
    let host = &topo.node(attach).name;
    let from = PortRef { node: attach, port: if topo.node(attach).kind == NodeKind::Switch { 0 } else { 1 } };
    let n = topo.nodes.len();
    let step = sample.map_or(1, |s| (n / s).max(1));
    let mut targets: Vec<usize> = (0..n).step_by(step).collect();
    targets.push(n - 1);
    targets.dedup();
    // A few clients at a time (ibsim serves at most 10): process start-up
    // dominates, not the fabric.
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                while let Some(&i) = targets.get(next.fetch_add(1, Ordering::Relaxed)) {
                    query_node(label, topo, &ix, &sim, host, from, NodeIdx(i));
                }
            });
        }
    });
    if sample.is_some() {
        return;
    }
    let disc = sim.tool(host, "ibnetdiscover", &[]);
    let seen = parse_net_with(disc.as_bytes(), Path::new("ibnetdiscover"), &mut |_| unreachable!())
        .unwrap_or_else(|e| panic!("{label}: our reader rejects ibnetdiscover's output: {e}"))
        .topology;
    let diff = fabric_diff(topo, &seen, 20);
    assert!(diff.is_empty(), "{label}: ibsim's fabric differs from ours: {diff:#?}");
}

/// Compares one node's NodeInfo, read by smpquery along our computed path.
fn query_node(label: &str, topo: &Topology, ix: &TopologyIndex, sim: &Sim, host: &str, from: PortRef, i: NodeIdx) {
    let node = topo.node(i);
    let path = ix.dr_path_to(from, i).unwrap_or_else(|| panic!("{label}: no path to {}", node.name));
    let (reached, entered) = walk(ix, from, &path);
    assert_eq!(reached, i);
    let text: String =
        std::iter::once("0".to_string()).chain(path.iter().map(u8::to_string)).collect::<Vec<_>>().join(",");
    let out = sim.tool(host, "smpquery", &["-D", "nodeinfo", &text]);
    let what = format!("{label}: {} via {text}", node.name);
    let kind = match node.kind {
        NodeKind::Switch => "Switch",
        NodeKind::Ca => "Channel Adapter",
        NodeKind::Router => "Router",
    };
    assert_eq!(field(&out, "NodeType"), kind, "{what}");
    assert_eq!(field(&out, "NumPorts").parse::<u8>().unwrap(), node.num_ports, "{what}");
    assert_eq!(hex(field(&out, "Guid")), node.node_guid.0, "{what}");
    assert_eq!(hex(field(&out, "SystemGuid")), node.system_guid.0, "{what}");
    assert_eq!(hex(field(&out, "PortGuid")), node.port_guid(entered).0, "{what}");
    assert_eq!(field(&out, "LocalPort").parse::<u8>().unwrap(), entered, "{what}");
}

fn check_file(path: &Path) {
    let topo = Topology::from_net_file(path).unwrap_or_else(|e| panic!("{e}"));
    check(&path.display().to_string(), &topo, path, path.parent().unwrap(), None);
}

fn check_spec(spec: &str, sample: Option<usize>) {
    let topo = Topology::from_spec_or_file(spec).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("generated.net");
    std::fs::write(&net, to_net_string(&topo).unwrap()).unwrap();
    check(spec, &topo, &net, dir.path(), sample);
}

#[test]
fn ibsim_example_nets() {
    for name in [
        "ibsim-example-net.net",
        "ibsim-example-1.net",
        "ibsim-example-2sw2path.net",
        "ibsim-example-2sw2path4hca.net",
        "ibsim-example-2sw2path4hca2port.net",
    ] {
        check_file(&fixture(name));
    }
    // The originals too, where the package installed its docs.
    let docs = Path::new("/usr/share/doc/ibsim-utils/net-examples");
    if let Ok(entries) = std::fs::read_dir(docs) {
        let mut nets: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("net")))
            .collect();
        nets.sort();
        for p in nets {
            check_file(&p);
        }
    }
}

#[test]
fn fixture_nets_and_ibnetdiscover_captures() {
    for name in [
        "guids.net",
        "rates.net",
        "include-top.net",
        "fattree2-r4.net",
        "guids.ibnetdiscover",
        "ibsim-example-2sw2path4hca2port.ibnetdiscover",
        "rates.ibnetdiscover",
    ] {
        check_file(&fixture(name));
    }
}

#[test]
fn generated_fabrics() {
    for spec in [
        "b2b",
        "fattree2:radix=6,leaves=3,spines=2,hosts=2,speed=ddr",
        "fattree3:radix=4,pods=2,width=12x,speed=qdr",
        "torus3d:3x2x2,hosts=1,width=8x",
        "mesh2d:3x3,hosts=1,width=1x",
        "dragonfly:groups=4,routers=3,hosts=1,global=1",
        "random:switches=10,links=16,hosts=8,seed=7,width=2x",
    ] {
        check_spec(spec, None);
    }
}

/// Fabrics beyond ibsim's default capacities load only with `ibsim_args`.
#[test]
fn generated_fabrics_needing_ibsim_flags() {
    // 300 switches: -S.
    check_spec("random:switches=300,links=320,hosts=10,seed=3", Some(25));
    // 4,644 nodes, 756 switches, 31,860 ports: -N, -S and -P.
    check_spec("fattree3:radix=36,pods=12", Some(25));
}
