//! The SA on ibsim (issue 9, item 5), judged by infiniband-diags.
//!
//! One small fabric (3 leaves, 2 spines, 8 hosts; links of three rates so a
//! path's rate depends on the route the SM programmed), one ibsim. Phase 1
//! runs OpenSM as the SM, phase 2 kills it and runs ibsm on the same host
//! with the same guid2lid, so every port keeps its LID and the two SAs are
//! asked the very same questions. In each phase `saquery` (from a host no
//! SM runs on) asks single-record queries of every record type it knows,
//! and each answer is checked against what the devices themselves say
//! (`smpquery`, `ibroute`, `ibnetdiscover`, `ibtracert`, `sminfo`); then the
//! two SAs' answers are compared field by field.
//!
//! Every place where an answer differs — from the device, or between the
//! two SAs — is one `Rule` below with the reason; a difference no rule
//! explains fails the test, and so does a rule that explains nothing (the
//! difference it describes is gone).
//!
//! ibsim carries no RMPP: saquery sends GetTable for everything and sees
//! only the first MAD of a longer answer (with either SM), so the queries
//! here match one record, or a table that fits in one MAD, or check only
//! that the first MAD's records are real. Before asking, a ServiceRecord and
//! a trap-64 subscription are set from another host, so SR and IIR have a
//! record to answer.
//!
//! Every SA client and SM here runs with `transport_support/umad2sim_fix.c`
//! around libumad2sim: umad2sim 0.10 hands a client only the first 224
//! bytes of each MAD (the rest is heap), which would corrupt the last 32
//! bytes of every SA data area; the fix also lets a client address its SA
//! queries to any LID (a standby's SA).
//!
//! The other tests: a standby ibsm's SA answers BUSY (and OpenSM's standby
//! nothing); ibsm's own RMPP client (`ibsm sa nodes/ports`) reads whole
//! tables, on this fabric and on a 648-host fat tree, where OpenSM's
//! answer on ibsim is one MAD without RMPP.

#[path = "transport_support/ibsim.rs"]
mod ibsim;
#[path = "transport_support/saquery.rs"]
mod saquery;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use ibsim::{run_with_timeout, stdout, tool, wait_for_log, Ibsim, KillOnDrop};
use saquery::{records, PortLine, Record};
use serde_json::Value;

/// Hosts at 4X QDR except leaf1-h1 at 1X SDR; leaf0-spine1 and
/// leaf2-spine0 at 4X DDR, the other uplinks 4X QDR. `w=`/`s=` are each
/// end's enabled widths and speeds (ibsim runs a link at the best both
/// enable): w=2 is 4X, w=1 1X; s=4 QDR, s=2 DDR, s=1 SDR.
const NET: &str = "\
Switch\t8 \"leaf0\"
[1]\t\"leaf0-h0\"[1]\tw=2 s=4
[2]\t\"leaf0-h1\"[1]\tw=2 s=4
[3]\t\"leaf0-h2\"[1]\tw=2 s=4
[4]\t\"spine0\"[1]\tw=2 s=4
[5]\t\"spine1\"[1]\tw=2 s=2

Switch\t8 \"leaf1\"
[1]\t\"leaf1-h0\"[1]\tw=2 s=4
[2]\t\"leaf1-h1\"[1]\tw=1 s=1
[4]\t\"spine0\"[2]\tw=2 s=4
[5]\t\"spine1\"[2]\tw=2 s=4

Switch\t8 \"leaf2\"
[1]\t\"leaf2-h0\"[1]\tw=2 s=4
[2]\t\"leaf2-h1\"[1]\tw=2 s=4
[3]\t\"leaf2-h2\"[1]\tw=2 s=4
[4]\t\"spine0\"[3]\tw=2 s=2
[5]\t\"spine1\"[3]\tw=2 s=4

Switch\t8 \"spine0\"
[1]\t\"leaf0\"[4]\tw=2 s=4
[2]\t\"leaf1\"[4]\tw=2 s=4
[3]\t\"leaf2\"[4]\tw=2 s=2

Switch\t8 \"spine1\"
[1]\t\"leaf0\"[5]\tw=2 s=2
[2]\t\"leaf1\"[5]\tw=2 s=4
[3]\t\"leaf2\"[5]\tw=2 s=4

Hca\t1 \"leaf0-h0\"
[1]\t\"leaf0\"[1]\tw=2 s=4
Hca\t1 \"leaf0-h1\"
[1]\t\"leaf0\"[2]\tw=2 s=4
Hca\t1 \"leaf0-h2\"
[1]\t\"leaf0\"[3]\tw=2 s=4
Hca\t1 \"leaf1-h0\"
[1]\t\"leaf1\"[1]\tw=2 s=4
Hca\t1 \"leaf1-h1\"
[1]\t\"leaf1\"[2]\tw=1 s=1
Hca\t1 \"leaf2-h0\"
[1]\t\"leaf2\"[1]\tw=2 s=4
Hca\t1 \"leaf2-h1\"
[1]\t\"leaf2\"[2]\tw=2 s=4
Hca\t1 \"leaf2-h2\"
[1]\t\"leaf2\"[3]\tw=2 s=4
";
/// Cables in NET (each shows twice in `ibnetdiscover -p`).
const LINKS: usize = 14;
const NODES: usize = 13;
/// Where the SMs run (one after the other), and where the diags run.
const SM_HOST: &str = "leaf0-h0";
const OBSERVER: &str = "leaf2-h1";
/// Where the ServiceRecord and the InformInfo subscription come from
/// (not OBSERVER: a Report the SA sends there would reach whichever diag
/// is attached, and umad2sim crashes one that has no SA agent).
const SETTER: &str = "leaf0-h2";
const SERVICE_ID: &str = "0x1000000000000abc";
const SERVICE_NAME: &str = "ibsm-sa-test";
/// OpenSM's default sa_key, which ibsm is given too: a query with this
/// SM_Key is trusted.
const SA_KEY: &str = "0x1";
const BRING_UP: Duration = Duration::from_secs(60);
/// 648 hosts: 36 leaves of 18 hosts, 18 spines, radix 36.
const FT648: &str = "fattree2:radix=36,leaves=36,spines=18,hosts=18";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Sm {
    OpenSm,
    Ibsm,
}

// ---------------------------------------------------------------------------
// The fabric and the SMs

struct Fabric {
    sim: Ibsim,
    dir: tempfile::TempDir,
    /// LD_PRELOAD for every client: umad2sim between the two halves of
    /// `transport_support/umad2sim_fix.c`.
    preload: String,
}

/// Builds one half of `transport_support/umad2sim_fix.c` into `dir`.
fn build_fix(dir: &Path, half: &str) -> PathBuf {
    let so = dir.join(format!("umad2sim_fix_{half}.so"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transport_support/umad2sim_fix.c");
    let o = std::process::Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", &format!("-DFIX_{}", half.to_uppercase()), "-o"])
        .arg(&so)
        .arg(&src)
        .args(["-ldl", "-lpthread"])
        .output()
        .expect("running cc (the SA tests build a small LD_PRELOAD shim)");
    assert!(o.status.success(), "cc {}: {}", src.display(), String::from_utf8_lossy(&o.stderr));
    so
}

impl Fabric {
    /// ibsim on the net file text `net`.
    fn start(net: &str) -> Fabric {
        Fabric::start_with(|dir| {
            let path = dir.join("fabric.net");
            std::fs::write(&path, net).unwrap();
            (path, Vec::new())
        })
    }

    /// ibsim on a generated fabric (`ibsm::topology` spec).
    fn generated(spec: &str) -> Fabric {
        Fabric::start_with(|dir| {
            let (path, flags, _) = ibsim::generated(spec, dir);
            (path, flags)
        })
    }

    fn start_with(net: impl FnOnce(&Path) -> (PathBuf, Vec<String>)) -> Fabric {
        let dir = tempfile::tempdir().unwrap();
        let (path, flags) = net(dir.path());
        let (front, back) = (build_fix(dir.path(), "front"), build_fix(dir.path(), "back"));
        let preload = format!("{} {} {}", front.display(), ibsim::umad2sim().display(), back.display());
        let sim = Ibsim::start_with(&path, &flags);
        sim.wait_for_sma(SM_HOST, Duration::from_secs(30));
        sim.wait_for_sma(OBSERVER, Duration::from_secs(30));
        Fabric { sim, dir, preload }
    }

    /// `program` attached at `host`, with the umad2sim fix.
    fn client(&self, program: &Path, host: &str) -> std::process::Command {
        let mut c = self.sim.client(program, Some(host));
        c.env("LD_PRELOAD", &self.preload);
        c
    }

    /// `name args` from `host` (None: the observer).
    /// (The diags other than saquery send no SA MADs: plain umad2sim.)
    fn run_on(&self, host: Option<&str>, name: &str, args: &[&str]) -> Output {
        let host = host.unwrap_or(OBSERVER);
        let mut c =
            if name == "saquery" { self.client(&tool(name), host) } else { self.sim.client(&tool(name), Some(host)) };
        c.args(args);
        run_with_timeout(c, Duration::from_secs(120))
    }

    /// A diag's output, which must succeed.
    fn diag(&self, name: &str, args: &[&str]) -> String {
        let o = self.run_on(None, name, args);
        assert!(o.status.success(), "{name} {args:?} failed: {}{}", stdout(&o), ibsim::stderr(&o));
        stdout(&o)
    }

    fn ports(&self) -> Vec<PortLine> {
        saquery::ibnetdiscover_ports(&self.diag("ibnetdiscover", &["-p"]))
    }
}

/// A running SM; killed on drop.
struct Daemon {
    label: String,
    child: KillOnDrop,
    log: PathBuf,
    dir: tempfile::TempDir,
    started: Instant,
}

impl Daemon {
    /// SIGTERM, then waits up to `limit` for the exit (killed after that).
    fn terminate(self, limit: Duration) {
        let mut d = self;
        let pid = d.child.0.id().to_string();
        let _ = std::process::Command::new("kill").args(["-TERM", &pid]).status();
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if let Ok(Some(_)) = d.child.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not exit on SIGTERM within {limit:?}; killed", d.label);
    }

    fn opensm(f: &Fabric, host: &str, cache: &Path, extra: &[&str]) -> Daemon {
        f.sim.wait_for_sma(host, Duration::from_secs(10));
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("opensm.log");
        let out = std::fs::File::create(dir.path().join("stdout")).unwrap();
        let mut c = f.client(&tool("opensm"), host);
        c.args(["-d2", "-f"])
            .arg(&log)
            .args(extra)
            .env("OSM_TMP_DIR", dir.path())
            .env("OSM_CACHE_DIR", cache)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let child = KillOnDrop(c.spawn().expect("starting opensm"));
        Daemon { label: format!("OpenSM on {host}"), child, log, dir, started: Instant::now() }
    }

    fn ibsm(f: &Fabric, host: &str, cache: &Path, extra: &[&str]) -> Daemon {
        f.sim.wait_for_sma(host, Duration::from_secs(10));
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("ibsm.log");
        let out = std::fs::File::create(dir.path().join("stdout")).unwrap();
        let mut c = f.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), host);
        c.arg("run")
            .args(["--metrics-listen", ""])
            .arg("--cache-dir")
            .arg(cache)
            .arg("--log-file")
            .arg(&log)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let child = KillOnDrop(c.spawn().expect("starting ibsm"));
        Daemon { label: format!("ibsm on {host}"), child, log, dir, started: Instant::now() }
    }

    fn start(sm: Sm, f: &Fabric, host: &str, cache: &Path) -> Daemon {
        match sm {
            Sm::OpenSm => Daemon::opensm(f, host, cache, &[]),
            // minhop, OpenSM's default, so both route alike (ibsm's own
            // default is auto).
            Sm::Ibsm => Daemon::ibsm(f, host, cache, &["--routing-engine", "minhop"]),
        }
    }

    fn wait_for(&mut self, needle: &str, limit: Duration) {
        while !wait_for_log(&self.log, needle, Duration::from_millis(200)) {
            if let Ok(Some(status)) = self.child.0.try_wait() {
                panic!("{} exited ({status}) before `{needle}`\n{}", self.label, self.tail());
            }
            assert!(self.started.elapsed() < limit, "{}: no `{needle}` in {limit:?}\n{}", self.label, self.tail());
        }
    }

    fn tail(&self) -> String {
        let last = |p: &Path| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        format!("--- {} log:\n{}\n--- stdout:\n{}", self.label, last(&self.log), last(&self.dir.path().join("stdout")))
    }
}

// ---------------------------------------------------------------------------
// The fabric as ibnetdiscover sees it

struct Layout {
    ports: Vec<PortLine>,
    /// Node name -> LID (a switch's, or a CA's port 1).
    lids: BTreeMap<String, u16>,
}

impl Layout {
    fn new(ports: Vec<PortLine>) -> Layout {
        let lids = ports.iter().map(|p| (p.name.clone(), p.lid)).collect();
        Layout { ports, lids }
    }

    fn lid(&self, name: &str) -> u16 {
        *self.lids.get(name).unwrap_or_else(|| panic!("no {name} in {:?}", self.lids))
    }

    /// The port of `from` cabled to `to`.
    fn port_to(&self, from: &str, to: &str) -> u8 {
        self.ports
            .iter()
            .find(|p| p.name == from && p.peer.as_ref().is_some_and(|q| q.4 == to))
            .unwrap_or_else(|| panic!("no cable {from} - {to}"))
            .port
    }

    /// The far end (LID, port) of `lid`'s `port`.
    fn peer(&self, lid: u16, port: u8) -> Option<(u16, u8)> {
        let p = self.ports.iter().find(|p| p.lid == lid && p.port == port)?;
        p.peer.as_ref().map(|q| (q.1, q.2))
    }

    fn guid(&self, lid: u16) -> u64 {
        self.ports.iter().find(|p| p.lid == lid).unwrap_or_else(|| panic!("no LID {lid}")).guid
    }

    fn switch_lids(&self) -> BTreeSet<u16> {
        self.ports.iter().filter(|p| p.switch).map(|p| p.lid).collect()
    }
}

// ---------------------------------------------------------------------------
// Asking

/// What one saquery printed.
#[derive(Debug, Clone)]
struct Answer {
    code: Option<i32>,
    records: Vec<Record>,
    stderr: String,
    /// All-zero records saquery printed after the answer's last record
    /// (stripped from `records`): a MAD written whole (256 bytes) that
    /// holds fewer records than fit, as umad2sim hands it on.
    zero_records: usize,
}

/// A record saquery printed from bytes that are all zero: no real record
/// is (every one names a LID or a GUID).
fn all_zero(r: &Record) -> bool {
    !r.fields.is_empty()
        && r.fields
            .iter()
            .all(|(_, v)| zero_rendering(v) || v.is_empty() || v == "<not displayed>" || v == "::" || v == "UNKNOWN")
}

/// saquery's answer to `args` from `host`; with `strip`, all-zero records
/// at the end are counted and left out (not for a table's first MAD of
/// several, where what saquery prints is judged as printed).
fn ask(f: &Fabric, host: &str, args: &[String], strip: bool) -> Answer {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = f.run_on(Some(host), "saquery", &argv);
    let mut records = records(&stdout(&o));
    let mut zero_records = 0;
    while strip && records.last().is_some_and(all_zero) {
        records.pop();
        zero_records += 1;
    }
    // `-s` prints two lists under headers; zero records sit before the
    // second header too.
    if records.iter().any(|r| r.kind == "IsSMdisabled ports") {
        let before = records.len();
        let mut kept = Vec::new();
        for r in records {
            if all_zero(&r) {
                continue;
            }
            kept.push(r);
        }
        zero_records += before - kept.len();
        records = kept;
    }
    // saquery warns (`ibwarn: ... bad width 0`) when it prints a record
    // with zero link widths; the warning names its pid.
    let stderr: Vec<String> =
        ibsim::stderr(&o).lines().filter(|l| !l.starts_with("ibwarn:")).map(str::to_string).collect();
    Answer { code: o.status.code(), records, stderr: stderr.join("\n").trim().to_string(), zero_records }
}

/// The questions, as saquery arguments, with what each is about.
#[derive(Debug, Clone)]
enum Q {
    ClassPortInfo,
    Node(u16),
    NodeFirstMad,
    Port(u16, u8),
    IsSm,
    Switch(u16),
    Switches,
    Link(u16, u8),
    LinksFirstMad,
    Guids(u16),
    PKeys { lid: u16, port: u8, trusted: bool },
    Lft(u16),
    Mfts,
    SmInfo(u16),
    SmInfos,
    Sl2Vl(u16, u8, u8),
    VlArb(u16, u8, u8),
    Services,
    Informs,
    Path(u16, u16),
}

impl Q {
    fn args(&self) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match *self {
            Q::ClassPortInfo => s(&["-c"]),
            Q::Node(l) => s(&["NR", &l.to_string()]),
            Q::NodeFirstMad => s(&["NR"]),
            Q::Port(l, p) => s(&["PIR", &format!("{l}/{p}")]),
            Q::IsSm => s(&["-s"]),
            Q::Switch(l) => s(&["SWIR", &l.to_string()]),
            Q::Switches => s(&["SWIR"]),
            Q::Link(l, p) => s(&["LR", &format!("{l}/{p}")]),
            Q::LinksFirstMad => s(&["-x"]),
            Q::Guids(l) => s(&["GIR", &format!("{l}/0")]),
            Q::PKeys { lid, port, trusted: true } => s(&["--smkey", SA_KEY, "PKTR", &format!("{lid}/{port}/0")]),
            Q::PKeys { lid, port, trusted: false } => s(&["PKTR", &format!("{lid}/{port}/0")]),
            Q::Lft(l) => s(&["LFTR", &format!("{l}/0")]),
            Q::Mfts => s(&["MFTR"]),
            Q::SmInfo(l) => s(&["SMIR", &l.to_string()]),
            Q::SmInfos => s(&["SMIR"]),
            Q::Sl2Vl(l, i, o) => s(&["SL2VL", &format!("{l}/{i}/{o}")]),
            Q::VlArb(l, p, b) => s(&["VLAR", &format!("{l}/{p}/{b}")]),
            Q::Services => s(&["SR"]),
            Q::Informs => s(&["IIR"]),
            Q::Path(a, b) => s(&["--src-to-dst", &format!("{a}:{b}")]),
        }
    }

    fn key(&self) -> String {
        self.args().join(" ")
    }

    /// Where saquery runs. A table longer than one MAD comes from ibsm as
    /// several RMPP segments, of which saquery (on ibsim) reads the first
    /// and exits; the rest, and their resends, reach whatever client is
    /// attached to that host next, and umad2sim crashes a client that has
    /// not registered the SA class when an SA MAD comes (a NULL deref in
    /// its receive thread). Such queries run from hosts nothing else uses.
    fn host(&self) -> &'static str {
        match self {
            Q::NodeFirstMad => "leaf1-h0",
            Q::LinksFirstMad => "leaf2-h2",
            _ => OBSERVER,
        }
    }

    /// The record type, as the rules name it.
    fn kind(&self) -> &'static str {
        match self {
            Q::ClassPortInfo => "CPI",
            Q::Node(_) | Q::NodeFirstMad => "NR",
            Q::Port(..) | Q::IsSm => "PIR",
            Q::Switch(_) | Q::Switches => "SWIR",
            Q::Link(..) | Q::LinksFirstMad => "LR",
            Q::Guids(_) => "GIR",
            Q::PKeys { .. } => "PKTR",
            Q::Lft(_) => "LFTR",
            Q::Mfts => "MFTR",
            Q::SmInfo(_) | Q::SmInfos => "SMIR",
            Q::Sl2Vl(..) => "SL2VL",
            Q::VlArb(..) => "VLAR",
            Q::Services => "SR",
            Q::Informs => "IIR",
            Q::Path(..) => "PR",
        }
    }
}

fn questions(l: &Layout) -> Vec<Q> {
    let obs = l.lid(OBSERVER);
    let sm = l.lid(SM_HOST);
    let leaf0 = l.lid("leaf0");
    let leaf1 = l.lid("leaf1");
    let spine0 = l.lid("spine0");
    let up = l.port_to("leaf0", "spine1");
    let host_port = l.port_to("leaf0", "leaf0-h1");
    // leaf1 has no port 3 cable and nothing on 6-8: a port that is down.
    let down = 6;
    let mut q = vec![
        Q::ClassPortInfo,
        Q::Node(obs),
        Q::Node(sm),
        Q::Node(leaf0),
        Q::Node(spine0),
        // No port has LID 999: an empty table.
        Q::Node(999),
        Q::Port(obs, 1),
        Q::Port(leaf0, 0),
        Q::Port(leaf0, host_port),
        Q::Port(leaf0, up),
        Q::Port(spine0, 1),
        Q::Port(leaf1, down),
        Q::IsSm,
        Q::Switch(leaf0),
        Q::Switch(spine0),
        Q::Switches,
        Q::Link(leaf0, up),
        Q::Link(obs, 1),
        Q::Guids(obs),
        Q::Guids(leaf0),
        Q::PKeys { lid: obs, port: 1, trusted: true },
        Q::PKeys { lid: leaf0, port: 0, trusted: true },
        Q::PKeys { lid: leaf0, port: up, trusted: true },
        Q::PKeys { lid: obs, port: 1, trusted: false },
        Q::Lft(leaf0),
        Q::Lft(spine0),
        Q::Mfts,
        Q::SmInfo(sm),
        Q::SmInfos,
        Q::Sl2Vl(leaf0, host_port, up),
        Q::Sl2Vl(spine0, 1, 2),
        Q::Sl2Vl(obs, 0, 0),
        Q::VlArb(obs, 1, 1),
        Q::VlArb(obs, 1, 3),
        Q::VlArb(leaf0, up, 1),
        Q::VlArb(leaf0, up, 3),
        Q::Services,
        Q::Informs,
    ];
    // Paths: within a leaf, across the fabric both ways, through the slow
    // host link and the DDR uplinks, and to the SM.
    let hosts = ["leaf0-h1", "leaf0-h2", "leaf1-h0", "leaf1-h1", "leaf2-h0", "leaf2-h2"];
    for (a, b) in [(0, 1), (1, 4), (4, 1), (2, 5), (3, 0), (5, 3)] {
        q.push(Q::Path(l.lid(hosts[a]), l.lid(hosts[b])));
    }
    q.push(Q::Path(obs, sm));
    q.extend([Q::NodeFirstMad, Q::LinksFirstMad]);
    q
}

/// Everything one SA answered.
struct Phase {
    sm: Sm,
    answers: Vec<(Q, Answer)>,
}

impl Phase {
    fn answer(&self, key: &str) -> &Answer {
        &self.answers.iter().find(|(q, _)| q.key() == key).unwrap().1
    }
}

// ---------------------------------------------------------------------------
// Differences and the rules that explain them

/// One value that is not what the other side says.
#[derive(Debug, Clone)]
struct Diff {
    /// The question (saquery's arguments).
    query: String,
    kind: &'static str,
    field: String,
    /// The SA's value (phase checks) or OpenSM's (comparison).
    left: String,
    /// The device's value (phase checks) or ibsm's (comparison).
    right: String,
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The SA's answer against the device, in this SM's phase.
    Device(Sm),
    /// OpenSM's answer (left) against ibsm's (right).
    Between,
}

/// An explained difference: in `scope`, for record type `kind` (`*`: any)
/// and a field `field` (or a field starting with it when it ends in `*`),
/// values for which `holds` is true. A `why` starting with "GAP" is
/// something ibsm should change (said in the commit that added it); the
/// rule fails the test once the gap is closed, so it gets removed then.
struct Rule {
    scope: Scope,
    kind: &'static str,
    field: &'static str,
    why: &'static str,
    holds: fn(&Diff) -> bool,
}

impl Rule {
    fn matches(&self, scope: Scope, d: &Diff) -> bool {
        let field = match self.field.strip_suffix('*') {
            Some(prefix) => d.field.starts_with(prefix),
            None => d.field == self.field,
        };
        self.scope == scope && (self.kind == "*" || self.kind == d.kind) && field && (self.holds)(d)
    }
}

fn num(s: &str) -> Option<u64> {
    saquery::parse_num(s)
}

/// Every difference must be explained by a rule, and every rule of the
/// scope must explain at least one.
fn judge(scope: Scope, diffs: &[Diff], rules: &[Rule]) {
    let mut unexplained = Vec::new();
    let mut used = vec![0usize; rules.len()];
    for d in diffs {
        match rules.iter().position(|r| r.matches(scope, d)) {
            Some(i) => used[i] += 1,
            None => unexplained.push(d),
        }
    }
    let idle: Vec<String> = rules
        .iter()
        .zip(&used)
        .filter(|(r, &n)| r.scope == scope && n == 0)
        .map(|(r, _)| format!("{} {}: {}", r.kind, r.field, r.why))
        .collect();
    for (r, n) in rules.iter().zip(&used).filter(|(r, &n)| r.scope == scope && n > 0) {
        eprintln!("{scope:?}: {n} x {} {}: {}", r.kind, r.field, r.why);
    }
    assert!(
        unexplained.is_empty() && idle.is_empty(),
        "{scope:?}: {} unexplained differences:\n{:#?}\nrules that explained nothing (the difference is gone):\n{}",
        unexplained.len(),
        unexplained,
        idle.join("\n")
    );
}

/// Values compare as numbers when both are, else as text.
fn same(a: &str, b: &str) -> bool {
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

struct Diffs<'a> {
    query: &'a Q,
    out: &'a mut Vec<Diff>,
}

impl Diffs<'_> {
    fn check(&mut self, field: &str, left: &str, right: &str) {
        if !same(left, right) {
            self.out.push(Diff {
                query: self.query.key(),
                kind: self.query.kind(),
                field: field.to_string(),
                left: left.to_string(),
                right: right.to_string(),
            });
        }
    }

    fn check_num(&mut self, field: &str, left: impl std::fmt::Debug, right: impl std::fmt::Debug) {
        self.check(field, &format!("{left:?}"), &format!("{right:?}"))
    }
}

// ---------------------------------------------------------------------------
// The SA against the devices

/// SwitchInfoRecord's names for smpquery's switchinfo fields.
const SWITCHINFO: &[(&str, &str)] = &[
    ("LinearFDBCap", "LinearFdbCap"),
    ("RandomFDBCap", "RandomFdbCap"),
    ("MulticastFDBCap", "McastFdbCap"),
    ("LinearFDBTop", "LinearFdbTop"),
    ("DefaultPort", "DefPort"),
    ("DefaultMulticastPrimaryPort", "DefMcastPrimPort"),
    ("DefaultMulticastNotPrimaryPort", "DefMcastNotPrimPort"),
    ("LIDsPerPort", "LidsPerPort"),
    ("PartitionEnforcementCap", "PartEnforceCap"),
    ("MulticastFDBTop", "MulticastFDBTop"),
];

/// NodeRecord's names for smpquery's nodeinfo fields.
const NODEINFO: &[(&str, &str)] = &[
    ("base_version", "BaseVers"),
    ("class_version", "ClassVers"),
    ("node_type", "NodeType"),
    ("num_ports", "NumPorts"),
    ("sys_guid", "SystemGuid"),
    ("node_guid", "Guid"),
    ("port_guid", "PortGuid"),
    ("partition_cap", "PartCap"),
    ("device_id", "DevId"),
    ("revision", "Revision"),
    ("port_num", "LocalPort"),
    ("vendor_id", "VendorId"),
];

fn smp_fields(f: &Fabric, args: &[&str]) -> BTreeMap<String, String> {
    ibsim::fields(&f.diag("smpquery", args)).into_iter().collect()
}

/// IBA rate code (PathRecord.Rate, IBA 15.2.5.16 table 205) of a port's
/// active width x speed as smpquery prints them.
fn rate_code(width: &str, speed: &str) -> u64 {
    let lanes: f64 = width.trim_end_matches('X').parse().unwrap();
    let per_lane: f64 = speed.trim_end_matches(" Gbps").parse().unwrap();
    match (lanes * per_lane * 10.0).round() as u64 {
        25 => 2,
        50 => 5,
        100 => 3,
        200 => 6,
        300 => 4,
        400 => 7,
        600 => 8,
        800 => 9,
        1200 => 10,
        other => panic!("no rate code for {width} x {speed} ({} Gb/s)", other as f64 / 10.0),
    }
}

/// IBA MTU code of `256`..`4096`.
fn mtu_code(bytes: &str) -> u64 {
    match bytes {
        "256" => 1,
        "512" => 2,
        "1024" => 3,
        "2048" => 4,
        "4096" => 5,
        other => panic!("MTU `{other}`"),
    }
}

fn gid(prefix: u64, guid: u64) -> Ipv6Addr {
    Ipv6Addr::from(((prefix as u128) << 64) | guid as u128)
}

fn device_diffs(f: &Fabric, l: &Layout, phase: &Phase) -> Vec<Diff> {
    let mut out = Vec::new();
    for (q, a) in &phase.answers {
        let mut d = Diffs { query: q, out: &mut out };
        d.check_num("all-zero records after the answer", a.zero_records, 0);
        // A single-record query: its record, or a difference (and the
        // query's other checks skipped: there is nothing to check).
        let one = |d: &mut Diffs, a: &Answer| -> Option<Record> {
            d.check_num("exit code", a.code, Some(0));
            d.check_num("records", a.records.len(), 1);
            (a.records.len() == 1).then(|| a.records[0].clone())
        };
        match *q {
            Q::ClassPortInfo => {
                // Nothing on a device to check it against: compared
                // between the SAs only.
            }
            Q::Services => {
                // What SETTER registered, and nothing else.
                let Some(r) = one(&mut d, a) else { continue };
                let gid = gid(0xfe80_0000_0000_0000, l.guid(l.lid(SETTER))).to_string();
                d.check("ServiceID", r.field("ServiceID"), SERVICE_ID);
                d.check("ServiceGID", r.field("ServiceGID"), &gid);
                d.check("ServiceP_Key", r.field("ServiceP_Key"), "0xFFFF");
                // No lease in the mask: infinite (IBA 15.2.5.14).
                d.check("ServiceLease", r.field("ServiceLease"), "0xFFFFFFFF");
                d.check("ServiceName", r.field("ServiceName"), SERVICE_NAME);
                // Untrusted: the key is not shown (and zeroed by the SA).
                d.check("ServiceKey", r.field("ServiceKey"), "<not displayed>");
            }
            Q::Informs => {
                let Some(r) = one(&mut d, a) else { continue };
                let gid = gid(0xfe80_0000_0000_0000, l.guid(l.lid(SETTER))).to_string();
                d.check("SubscriberGID", r.field("SubscriberGID"), &gid);
                for (field, want) in [
                    ("lid_range_begin", "65535"),
                    ("is_generic", "1"),
                    ("subscribe", "1"),
                    ("trap_type", "0xFFFF"),
                    ("trap_num", "64"),
                    ("node_type", "0xFFFFFF"),
                ] {
                    d.check(field, r.field(field), want);
                }
            }
            Q::Node(999) => {
                d.check_num("records", a.records.len(), 0);
                d.check_num("exit code", a.code, Some(0));
            }
            Q::Node(lid) => {
                if let Some(r) = one(&mut d, a) {
                    node_diffs(f, &mut d, &r, lid)
                }
            }
            Q::NodeFirstMad => {
                // NodeRecords are 112 bytes with padding: the first MAD of
                // the table holds one, the rest is lost with RMPP.
                if let Some(r) = one(&mut d, a) {
                    node_diffs(f, &mut d, &r, r.num("lid") as u16);
                }
            }
            Q::Port(lid, port) => {
                if let Some(r) = one(&mut d, a) {
                    port_diffs(f, &mut d, &r, lid, port)
                }
            }
            Q::IsSm => {
                // One SM port: the CapabilityMask match finds exactly it.
                let found: Vec<&Record> = a.records.iter().filter(|r| r.kind == "PortInfoRecord").collect();
                d.check_num("IsSM ports", found.len(), 1);
                let Some(r) = found.first() else { continue };
                let sm = l.lid(SM_HOST);
                d.check_num("EndPortLid", r.num("EndPortLid"), sm);
                let pi = smp_fields(f, &["portinfo", &sm.to_string(), "1"]);
                d.check("capability_mask", r.field("capability_mask"), &pi["CapMask"]);
                d.check("master_sm_base_lid", r.field("master_sm_base_lid"), &pi["SMLid"]);
            }
            Q::Switch(lid) => {
                if let Some(r) = one(&mut d, a) {
                    switch_diffs(f, &mut d, &r, lid)
                }
            }
            Q::Switches => {
                // 24-byte records: all five switches fit in one MAD.
                let got: BTreeSet<u16> = a.records.iter().map(|r| r.num("LID") as u16).collect();
                assert_eq!(got, l.switch_lids(), "{:?}: SWIR table", phase.sm);
                for r in a.records.iter().filter(|r| r.kind == "SwitchInfoRecord") {
                    switch_diffs(f, &mut d, r, r.num("LID") as u16);
                }
            }
            Q::Link(lid, port) => {
                let Some(r) = one(&mut d, a) else { continue };
                let (to_lid, to_port) = l.peer(lid, port).unwrap();
                d.check_num("FromLID", r.num("FromLID"), lid);
                d.check_num("FromPort", r.num("FromPort"), port);
                d.check_num("ToLID", r.num("ToLID"), to_lid);
                d.check_num("ToPort", r.num("ToPort"), to_port);
            }
            Q::LinksFirstMad => {
                // 8-byte records: the first MAD has room for 25 of the 28
                // links' ends. Counted: how many of the records printed,
                // from the first, are distinct cable ends ibnetdiscover sees.
                d.check_num("records", a.records.len(), 25);
                let mut seen = BTreeSet::new();
                let genuine = a
                    .records
                    .iter()
                    .take_while(|r| {
                        let from = (r.num("FromLID") as u16, r.num("FromPort") as u8);
                        let to = (r.num("ToLID") as u16, r.num("ToPort") as u8);
                        l.peer(from.0, from.1) == Some(to) && seen.insert(from)
                    })
                    .count();
                d.check_num("genuine records", genuine, 25);
            }
            Q::Guids(lid) => {
                let Some(r) = one(&mut d, a) else { continue };
                let dev = saquery::smp_words(&f.diag("smpquery", &["GI", &lid.to_string()]));
                for (i, g) in saquery::guids(&r).into_iter().enumerate() {
                    d.check_num(&format!("GUID {i}"), g, dev.get(i).copied().unwrap_or(0));
                }
            }
            Q::PKeys { lid, port, trusted: true } => {
                let Some(r) = one(&mut d, a) else { continue };
                let dev = saquery::smp_words(&f.diag("smpquery", &["pkeys", &lid.to_string(), &port.to_string()]));
                for (i, k) in saquery::pkeys(&r).into_iter().enumerate() {
                    d.check_num(&format!("pkey {i}"), k as u64, dev.get(i).copied().unwrap_or(0));
                }
            }
            Q::PKeys { trusted: false, .. } => {
                // IBA o15-0.2.3 / OpenSM: P_KeyTableRecord only for a
                // trusted requester (SM_Key = SA key).
                d.check_num("records", a.records.len(), 0);
                d.check("status", &a.stderr, "ERROR: Query result returned 0x0200,  SA(SA_ERR_REQ_INVALID)");
            }
            Q::Lft(lid) => {
                let Some(r) = one(&mut d, a) else { continue };
                let dev = saquery::ibroute_lft(&f.diag("ibroute", &[&lid.to_string()]));
                let sa = saquery::lft(&r);
                d.check_num("entries", sa.len(), 64);
                for (dlid, port) in sa {
                    d.check_num(&format!("lid {dlid}"), port, dev.get(&dlid).copied().unwrap_or(255));
                }
            }
            Q::Mfts => {
                // No multicast group has members here: no MFT entry on any
                // switch, and no record.
                d.check_num("records", a.records.len(), 0);
                for s in l.switch_lids() {
                    let m = saquery::ibroute_mlids(&f.diag("ibroute", &["-M", &s.to_string()]));
                    d.check_num(&format!("mlids on {s}"), m.len(), 0);
                }
            }
            Q::SmInfo(lid) => {
                if let Some(r) = one(&mut d, a) {
                    sminfo_diffs(f, &mut d, &r, lid)
                }
            }
            Q::SmInfos => {
                d.check_num("records", a.records.len(), 1);
                let r = &a.records[0];
                sminfo_diffs(f, &mut d, r, r.num("LID") as u16);
            }
            Q::Sl2Vl(lid, _, _) => {
                let Some(r) = one(&mut d, a) else { continue };
                let (i, o) = (r.num("InPort") as u8, r.num("OutPort") as u8);
                let dev = saquery::smp_sl2vl(&f.diag("smpquery", &["sl2vl", &lid.to_string(), &o.to_string()]));
                let want = dev.get(&(i, o)).unwrap_or_else(|| panic!("smpquery sl2vl {lid} {o}: no in {i}: {dev:?}"));
                d.check("sl2vl", &format!("{:?}", saquery::sl2vl(&r)), &format!("{want:?}"));
            }
            Q::VlArb(lid, port, block) => {
                let Some(r) = one(&mut d, a) else { continue };
                let (low, high) =
                    saquery::smp_vlarb(&f.diag("smpquery", &["vlarb", &lid.to_string(), &port.to_string()]));
                // Blocks 1-2: low priority entries 0-31, 32-63; 3-4 high.
                let table = if block <= 2 { low } else { high };
                let from = if block % 2 == 1 { 0 } else { 32 };
                let sa = saquery::vlarb(&r);
                let want: Vec<(u8, u8)> = (0..32).map(|i| table.get(from + i).copied().unwrap_or((0, 0))).collect();
                d.check("vlarb", &format!("{sa:?}"), &format!("{want:?}"));
            }
            Q::Path(slid, dlid) => {
                if let Some(r) = one(&mut d, a) {
                    path_diffs(f, l, &mut d, &r, slid, dlid)
                }
            }
        }
    }
    out
}

fn node_diffs(f: &Fabric, d: &mut Diffs, r: &Record, lid: u16) {
    let ni = smp_fields(f, &["nodeinfo", &lid.to_string()]);
    let nd = smp_fields(f, &["nodedesc", &lid.to_string()]);
    d.check_num("lid", r.num("lid"), lid);
    for (sa, smp) in NODEINFO {
        d.check(sa, r.get(sa).unwrap_or("<missing>"), &ni[*smp]);
    }
    d.check("NodeDescription", r.field("NodeDescription"), &nd["Node Description"]);
}

fn port_diffs(f: &Fabric, d: &mut Diffs, r: &Record, lid: u16, port: u8) {
    d.check_num("EndPortLid", r.num("EndPortLid"), lid);
    d.check_num("PortNum", r.num("PortNum"), port);
    for (name, value) in smp_fields(f, &["portinfo", &lid.to_string(), &port.to_string()]) {
        d.check(&name, r.get(&name).unwrap_or("<missing>"), &value);
    }
}

fn switch_diffs(f: &Fabric, d: &mut Diffs, r: &Record, lid: u16) {
    let si = smp_fields(f, &["switchinfo", &lid.to_string()]);
    for (sa, smp) in SWITCHINFO {
        d.check(sa, r.get(sa).unwrap_or("<missing>"), &si[*smp]);
    }
    let n = |k: &str| num(&si[k]).unwrap();
    // IBA 14.2.5.4 table 146: LifeTimeValue (5 bits), PortStateChange,
    // OptimizedSLtoVLMappingProgramming (2 bits) in one byte; then the
    // enforcement and filter capability bits and EnhancedPort0.
    d.check(
        "LifeTimeValue",
        &(r.num("LifeTimeValue/PortStateChange/OpSL2VL") >> 3).to_string(),
        &n("LifeTime").to_string(),
    );
    d.check(
        "PortStateChange",
        &(r.num("LifeTimeValue/PortStateChange/OpSL2VL") >> 2 & 1).to_string(),
        &n("StateChange").to_string(),
    );
    d.check(
        "OpSL2VL",
        &(r.num("LifeTimeValue/PortStateChange/OpSL2VL") & 3).to_string(),
        &n("OptSLtoVLMapping").to_string(),
    );
    let flags = n("InboundPartEnf") << 7
        | n("OutboundPartEnf") << 6
        | n("FilterRawInbound") << 5
        | n("FilterRawOutbound") << 4
        | n("EnhancedPort0") << 3;
    d.check_num("flags", r.num("flags"), flags);
}

fn sminfo_diffs(f: &Fabric, d: &mut Diffs, r: &Record, lid: u16) {
    let (sm_lid, guid, count, priority, state) =
        saquery::sminfo(&f.diag("sminfo", &[&lid.to_string()])).expect("sminfo answers");
    d.check_num("LID", r.num("LID"), sm_lid);
    d.check_num("GUID", r.num("GUID"), guid);
    d.check_num("Priority", r.num("Priority"), priority);
    d.check_num("SMState", r.num("SMState"), state);
    // sminfo asks after saquery did, and the count only grows.
    d.check_num("ActCount <= sminfo's", r.num("ActCount") <= count, true);
    // IBA 14.2.5.13: SM_Key reads as 0 unless the requester is trusted.
    d.check_num("SM_Key", r.num("SM_Key"), 0);
}

/// The PathRecord against the route `ibtracert` follows: MTU and rate are
/// the least of the links it crosses (smpquery portinfo on each hop).
fn path_diffs(f: &Fabric, l: &Layout, d: &mut Diffs, r: &Record, slid: u16, dlid: u16) {
    let hops = saquery::ibtracert_hops(&f.diag("ibtracert", &[&slid.to_string(), &dlid.to_string()]));
    assert!(hops.last().is_some_and(|h| !h.switch && h.lid == dlid), "ibtracert {slid} {dlid}: {hops:?}");
    // Each link: the port it leaves by, on the node before the hop.
    let mut at = slid;
    let (mut mtu, mut rate) = (u64::MAX, u64::MAX);
    for h in &hops {
        let pi = smp_fields(f, &["portinfo", &at.to_string(), &h.out_port.to_string()]);
        mtu = mtu.min(mtu_code(&pi["NeighborMTU"]));
        rate = rate.min(rate_code(&pi["LinkWidthActive"], &pi["LinkSpeedActive"]));
        at = h.lid;
    }
    d.check_num("dlid", r.num("dlid"), dlid);
    d.check_num("slid", r.num("slid"), slid);
    let prefix = num(&smp_fields(f, &["portinfo", &slid.to_string()])["GidPrefix"]).unwrap();
    d.check("sgid", r.field("sgid"), &gid(prefix, l.guid(slid)).to_string());
    d.check("dgid", r.field("dgid"), &gid(prefix, l.guid(dlid)).to_string());
    // MTU and rate: selector 2 ("exactly", IBA 15.2.5.16) in the top bits.
    d.check_num("mtu", r.num("mtu"), 0x80 | mtu);
    d.check_num("rate", r.num("rate"), 0x80 | rate);
    // Both SMs route with minhop, which uses SL 0 for every path.
    d.check_num("sl", r.num("sl"), 0);
    d.check_num("pkey", r.num("pkey"), 0xFFFF);
    // Reversible (bit 7), NumbPath 0 in a response.
    d.check_num("num_path_revers", r.num("num_path_revers"), 0x80);
    // A path within the subnet has no GRH: HopLimit 0 (IBA 15.2.5.16),
    // whatever the switch count (ibtracert's hops).
    d.check_num("hop_flow_raw", r.num("hop_flow_raw"), 0);
    d.check_num("switches on the route", hops.iter().filter(|h| h.switch).count(), hop_count(l, slid, dlid));
}

/// Switches on a shortest route between two hosts of NET: one on the same
/// leaf, three across the spines.
fn hop_count(l: &Layout, slid: u16, dlid: u16) -> usize {
    let leaf = |lid: u16| l.ports.iter().find(|p| p.lid == lid).and_then(|p| p.peer.as_ref()).unwrap().4.clone();
    if leaf(slid) == leaf(dlid) {
        1
    } else {
        3
    }
}

// ---------------------------------------------------------------------------
// OpenSM's answers against ibsm's

/// OpenSM's answers against ibsm's, field by field. What a phase already
/// found different from the devices is not counted again: a (query,
/// field) either phase's device check flagged, and the records of a query
/// whose record count was flagged, are left out here.
fn between_diffs(osm: &Phase, ibsm: &Phase, device: &[Diff]) -> Vec<Diff> {
    let flagged: BTreeSet<(&str, &str)> = device.iter().map(|d| (d.query.as_str(), d.field.as_str())).collect();
    let recounted: BTreeSet<&str> =
        device.iter().filter(|d| d.field == "records" || d.field == "IsSM ports").map(|d| d.query.as_str()).collect();
    let mut out = Vec::new();
    for (q, a) in &osm.answers {
        let b = ibsm.answer(&q.key());
        let key = q.key();
        let mut d = Diffs { query: q, out: &mut out };
        d.check_num("exit code", a.code, b.code);
        d.check("error", &a.stderr, &b.stderr);
        if recounted.contains(key.as_str()) {
            continue;
        }
        d.check_num("records", a.records.len(), b.records.len());
        if matches!(q, Q::NodeFirstMad | Q::LinksFirstMad) {
            // Which records come first is the SA's order (IBA leaves it
            // open); each SA's were checked against the devices.
            continue;
        }
        // A table's order is the SA's own: compare in one order.
        let sorted = |r: &[Record]| {
            let mut v = r.to_vec();
            v.sort_by_key(|r| format!("{:?}", r.fields));
            v
        };
        for (x, y) in sorted(&a.records).iter().zip(&sorted(&b.records)) {
            d.check("kind", &x.kind, &y.kind);
            let names: BTreeSet<&String> = x.fields.iter().chain(&y.fields).map(|(n, _)| n).collect();
            for name in names.into_iter().filter(|n| !flagged.contains(&(key.as_str(), n.as_str()))) {
                // Repeated names (VLAR's rows) are in `lines`; fields
                // compare by their first occurrence.
                d.check(name, x.get(name).unwrap_or("<missing>"), y.get(name).unwrap_or("<missing>"));
            }
            if !["sl2vl", "vlarb", "entries"].iter().any(|f| flagged.contains(&(key.as_str(), *f))) {
                d.check("lines", &x.lines.join(" / "), &y.lines.join(" / "));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The rules

/// A zero as libibmad prints one: `0`, `0x00`, `undefined (0)`,
/// `?(0)`, or the names it gives the code 0 of an enumeration.
fn zero_rendering(s: &str) -> bool {
    num(s) == Some(0)
        || s.starts_with("undefined (0)")
        || ["?(0)", "No change", "NoChange", "Extended speed", "No Extended Speed"].contains(&s)
}

fn rules() -> Vec<Rule> {
    use Scope::{Between, Device};
    use Sm::{Ibsm, OpenSm};
    vec![
        // LocalPort is the port an SMP came in by. Both SAs read the
        // switches from SM_HOST, entering leaf0 by its port 1 and the
        // spines by their port 1 (towards leaf0); smpquery reads them from
        // OBSERVER, entering by other ports.
        Rule {
            scope: Device(OpenSm),
            kind: "PIR",
            field: "LocalPort",
            why: "a switch's LocalPort is the port the reader's SMP entered by",
            holds: |d| d.left == "1",
        },
        Rule {
            scope: Device(Ibsm),
            kind: "PIR",
            field: "LocalPort",
            why: "a switch's LocalPort is the port the reader's SMP entered by",
            holds: |d| d.right == "0" && (d.left == "1" || d.left == "4"),
        },
        // Likewise NodeInfo.LocalPortNum in a switch's NodeRecord: ibsm
        // gives the NodeInfo its directed-route read returned (the entry
        // port, 1), where smpquery's LID-routed SMP reaches port 0. OpenSM
        // writes 0 (see the Between rule).
        Rule {
            scope: Device(Ibsm),
            kind: "NR",
            field: "port_num",
            why: "a switch's NodeRecord LocalPortNum is the port ibsm's SMP entered by",
            holds: |d| d.left == "1" && d.right == "0",
        },
        // saquery prints SwitchInfo.MulticastFDBTop only when the SA's
        // ClassPortInfo CapabilityMask2 says it is supported; ibsm's does
        // not (see the ClassPortInfo rule).
        Rule {
            scope: Device(Ibsm),
            kind: "SWIR",
            field: "MulticastFDBTop",
            why: "ibsm's ClassPortInfo does not claim MulticastFDBTop: saquery leaves the field out",
            holds: |d| d.left == "<missing>",
        },
        // ibsm answers the P_Key tables of the ports it programs: end
        // ports, a switch's port 0 and the switch ports facing hosts
        // (compared with the devices and OpenSM like any other record). It
        // never reads an inter-switch port's table, which OpenSM answers:
        // the question on leaf0's uplink gets no record.
        Rule {
            scope: Device(Ibsm),
            kind: "PKTR",
            field: "records",
            why: "GAP: ibsm has no P_KeyTableRecord for inter-switch ports (it never reads their tables)",
            holds: |d| d.left == "0" && !d.query.ends_with("/0/0"),
        },
        // ibsm answers SL2VL and VLArb records from the tables it
        // programmed; with QoS off it programs none here, so it has no
        // record (OpenSM answers zeros, above); the ports hold ibsim's
        // defaults.
        Rule {
            scope: Device(Ibsm),
            kind: "SL2VL",
            field: "records",
            why: "GAP: ibsm has no SL-to-VL record for a table it did not program (QoS off)",
            holds: |d| d.left == "0",
        },
        Rule {
            scope: Device(Ibsm),
            kind: "VLAR",
            field: "records",
            why: "GAP: ibsm has no VLArb record for a table it did not program (QoS off)",
            holds: |d| d.left == "0",
        },
        // ClassPortInfo (IBA 13.4.8.1, 15.2.5 SA bits). CapabilityMask:
        // both claim UDMulticast (9), MultiPath (10), PortInfoCapMaskMatch
        // (13); OpenSM adds IsSubnGetSetNoticeSupported (1), ibsm
        // CapabilityMask2Supported (2) and OptionalRecords (8).
        Rule {
            scope: Between,
            kind: "CPI",
            field: "Capability mask",
            why:
                "each SA claims its own capabilities (OpenSM: Get/Set Notice; ibsm: CapabilityMask2, optional records)",
            holds: |d| d.left == "0x2602" && d.right == "0x2704",
        },
        // CapabilityMask2: OpenSM has McastTop (3, it sets
        // SwitchInfo.MulticastFDBTop; ibsm does not) and MC ServiceRecords
        // (8); ibsm adds NDR (17). Both: alias GUIDs, full PortInfoRecord,
        // extended speeds, PortInfo CapMask2 match, SendOnlyFullMember
        // (12), 2x width, HDR.
        Rule {
            scope: Between,
            kind: "CPI",
            field: "Capability mask 2",
            why: "ibsm: no McastTop nor MC ServiceRecords, NDR added",
            holds: |d| d.left == "0x0000B5E8" && d.right == "0x0002B4E0",
        },
        // Neither SA redirects or forwards traps (RedirectLID and TrapLID
        // 0); OpenSM still fills in QP1 and its Q_Key, ibsm leaves the
        // unused fields zero.
        Rule {
            scope: Between,
            kind: "CPI",
            field: "*",
            why: "no redirection and no trap forwarding: OpenSM fills the unused QP and Q_Keys, ibsm leaves them 0",
            holds: |d| {
                ["Redirect QP", "Redirect QKey", "Trap QKey"].contains(&d.field.as_str())
                    && d.right.trim_start_matches("0x").trim_start_matches('0').is_empty()
            },
        },
        // SMInfo.ActCount is each SM's own activity counter (IBA
        // 14.2.5.13): OpenSM counts far more events than ibsm does.
        Rule {
            scope: Between,
            kind: "SMIR",
            field: "ActCount",
            why: "each SM counts its own activity",
            holds: |d| num(&d.left).is_some_and(|x| x > 0) && num(&d.right).is_some_and(|x| x > 0),
        },
        // No rule for PathRecord rates: ibsm starts on the fabric OpenSM
        // routed and keeps OpenSM's routes (complete, no credit loop on
        // one VL), so every path crosses the same links with both SMs and
        // the rates agree. (They differed while ibsm routed afresh:
        // minhop breaks ties its own way in each SM.)
        // OpenSM sends a PortInfo Get for every port, down ones included,
        // but answers a down port's PortInfoRecord with the port number and
        // the link states only: every other field reads as zero, where the
        // device reports its widths, speeds, MTU and VL caps (and ibsim's
        // error counter).
        Rule {
            scope: Device(OpenSm),
            kind: "PIR",
            field: "*",
            why: "OpenSM answers a down port's PortInfoRecord blank but for its states",
            holds: |d| d.query.starts_with("PIR ") && d.query.ends_with("/6") && zero_rendering(&d.left),
        },
        // OpenSM answers SL2VL and VLArb records from its own copy of the
        // tables, which it fills only from SMPs of those attributes, and on
        // this fabric (QoS off) it sends none (counted with bench/madcount.c:
        // no SLtoVLMappingTable or VLArbitrationTable Get or Set). Its
        // records are all zero; the ports hold ibsim's defaults (SL n ->
        // VL n, SL 15 -> VL 7; VL 1-7 low at weight 4, VL 0 high at 4).
        Rule {
            scope: Device(OpenSm),
            kind: "SL2VL",
            field: "sl2vl",
            why: "OpenSM never read or set an SL-to-VL table here: its records are zero",
            holds: |d| d.left.trim_matches(['[', ']']).split(", ").all(|v| v == "0"),
        },
        Rule {
            scope: Device(OpenSm),
            kind: "VLAR",
            field: "vlarb",
            why: "OpenSM never read or set a VL arbitration table here: its records are zero",
            holds: |d| d.left.trim_matches(['[', ']']).split("), (").all(|v| v.trim_matches(['(', ')']) == "0, 0"),
        },
    ]
}

/// One SM's phase: it brings the fabric up, answers every question, and
/// its answers are checked against the devices while it still runs.
/// Returns the answers, the layout and the differences from the devices.
fn phase(f: &Fabric, sm: Sm, cache: &Path) -> (Phase, Layout, Vec<Diff>) {
    let mut daemon = Daemon::start(sm, f, SM_HOST, cache);
    daemon.wait_for("SUBNET UP", BRING_UP);
    eprintln!("{}: SUBNET UP {:.2?} after its start", daemon.label, daemon.started.elapsed());
    let layout = Layout::new(f.ports());
    assert_eq!(
        layout.ports.iter().filter(|p| p.peer.is_some()).count(),
        2 * LINKS,
        "ibnetdiscover: {:#?}",
        layout.ports
    );
    assert_eq!(layout.lids.len(), NODES);
    // The SM logs SUBNET UP as the sweep ends, an instant before its SA
    // has the sweep's results: wait for the SA's first answer.
    let t0 = Instant::now();
    while ask(f, OBSERVER, &Q::ClassPortInfo.args(), true).code != Some(0) {
        assert!(t0.elapsed() < Duration::from_secs(10), "{}: the SA does not answer\n{}", daemon.label, daemon.tail());
        std::thread::sleep(Duration::from_millis(100));
    }
    // Something for `saquery SR` and `IIR` to find: a ServiceRecord and a
    // subscription to trap 64, both from SETTER's port.
    for args in
        [&["sa", "service", "--id", SERVICE_ID, "--name", SERVICE_NAME][..], &["sa", "subscribe", "--trap", "64"][..]]
    {
        let mut c = f.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), SETTER);
        c.args(args);
        let o = run_with_timeout(c, Duration::from_secs(30));
        assert!(o.status.success(), "{}: ibsm {args:?}: {}", daemon.label, ibsim::stderr(&o));
    }
    let t0 = Instant::now();
    let answers: Vec<(Q, Answer)> = questions(&layout)
        .into_iter()
        .map(|q| {
            let a = ask(f, q.host(), &q.args(), !matches!(q, Q::NodeFirstMad | Q::LinksFirstMad));
            (q, a)
        })
        .collect();
    eprintln!("{}: {} saquery runs in {:.2?}", daemon.label, answers.len(), t0.elapsed());
    if std::env::var_os("SA_IBSIM_PRINT").is_some() {
        for (q, a) in &answers {
            eprintln!("=== {:?} saquery {}: {:?} {}", sm, q.key(), a.code, a.stderr);
            for r in &a.records {
                eprintln!("  {} {:?}", r.kind, r.fields);
            }
        }
    }
    let phase = Phase { sm, answers };
    let diffs = device_diffs(f, &layout, &phase);
    // Stopped as an operator stops an SM (SIGTERM), not killed: in ibsim a
    // killed SM leaves its port IsSM, and the next SM's issm open on that
    // host then leaves it clear (on hardware the kernel releases IsSM when
    // the holder dies and lets the next one set it).
    daemon.terminate(Duration::from_secs(10));
    (phase, layout, diffs)
}

#[test]
fn saquery_answers_match_the_devices_and_opensm() {
    let f = Fabric::start(NET);
    let cache = f.dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let rules = rules();

    // OpenSM first: it assigns the LIDs and writes guid2lid in `cache`,
    // which ibsm then reads, so both phases ask about the same LIDs.
    let (osm, layout, diffs) = phase(&f, Sm::OpenSm, &cache);
    judge(Scope::Device(Sm::OpenSm), &diffs, &rules);
    let (ours, layout2, ibsm_diffs) = phase(&f, Sm::Ibsm, &cache);
    assert_eq!(layout.lids, layout2.lids, "ibsm kept every LID OpenSM gave");
    judge(Scope::Device(Sm::Ibsm), &ibsm_diffs, &rules);
    let device: Vec<Diff> = diffs.into_iter().chain(ibsm_diffs).collect();
    judge(Scope::Between, &between_diffs(&osm, &ours, &device), &rules);
}

// ---------------------------------------------------------------------------
// A standby's SA

/// `program args` from OBSERVER with its SA queries sent to `sa_lid`
/// (whatever SM its port names), through the fix's SMLID_OVERRIDE.
fn to_sa(f: &Fabric, sa_lid: u16, program: &Path, args: &[&str]) -> Output {
    let mut c = f.client(program, OBSERVER);
    c.env("SMLID_OVERRIDE", sa_lid.to_string()).args(args);
    run_with_timeout(c, Duration::from_secs(30))
}

/// A standby ibsm's SA answers BUSY (IBA 13.4.7: ask again later), which
/// saquery names; once it is master it answers. OpenSM's standby answers
/// nothing (IBA C15-0.1.3 as OpenSM reads it), so saquery times out.
#[test]
fn a_standby_sa_says_busy_where_opensm_says_nothing() {
    let f = Fabric::start(NET);
    let cache = f.dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let fast = ["--sminfo-polling-timeout", "500", "--polling-retry-number", "3"];

    // OpenSM master (priority 10) on SM_HOST; ibsm standby (1) on leaf1-h0.
    let mut master = Daemon::opensm(&f, SM_HOST, &cache, &["-p", "10"]);
    master.wait_for("SUBNET UP", BRING_UP);
    let standby_host = "leaf1-h0";
    let ibsm_cache = f.dir.path().join("ibsm-cache");
    std::fs::create_dir_all(&ibsm_cache).unwrap();
    let mut standby = Daemon::ibsm(&f, standby_host, &ibsm_cache, &[&["--priority", "1"][..], &fast[..]].concat());
    standby.wait_for("SM state STANDBY", BRING_UP);
    let l = Layout::new(f.ports());
    let (ibsm_lid, master_lid) = (l.lid(standby_host), l.lid(SM_HOST));
    let obs = l.lid(OBSERVER);
    let nr = ["NR", &obs.to_string()];

    // The master answers; the standby refuses with BUSY, and says so to
    // saquery and to `ibsm sa`.
    let saquery = tool("saquery");
    let o = to_sa(&f, master_lid, &saquery, &nr);
    assert!(o.status.success() && stdout(&o).contains("NodeRecord dump"), "master: {}", ibsim::stderr(&o));
    let o = to_sa(&f, ibsm_lid, &saquery, &nr);
    let err = ibsim::stderr(&o);
    assert!(!o.status.success(), "a standby answered: {}", stdout(&o));
    assert_eq!(
        err.trim(),
        "ERROR: Query result returned 0x0001,  (BUSY; ; MAD No invalid fields)",
        "saquery to the standby"
    );
    let sm = l.lid(SM_HOST).to_string();
    let pair = format!("{obs}:{sm}");
    let ibsm_bin = Path::new(env!("CARGO_BIN_EXE_ibsm"));
    let o = to_sa(&f, ibsm_lid, ibsm_bin, &["sa", "path", "--src-to-dst", &pair, "--retries", "0"]);
    let err = ibsim::stderr(&o);
    assert!(
        !o.status.success() && err.contains("status 0x0001") && err.to_lowercase().contains("busy"),
        "ibsm sa path to the standby: {err}"
    );
    let o = to_sa(&f, ibsm_lid, ibsm_bin, &["sa", "nodes", "--retries", "0"]);
    let err = ibsim::stderr(&o);
    assert!(!o.status.success() && err.contains("status 0x0001"), "ibsm sa nodes to the standby: {err}");

    // The master dies; ibsm takes over and its SA answers.
    let killed = Instant::now();
    drop(master);
    standby.wait_for("SUBNET UP", BRING_UP);
    eprintln!("ibsm SUBNET UP {:.2?} after the master was killed", killed.elapsed());
    let t0 = Instant::now();
    loop {
        let o = to_sa(&f, ibsm_lid, &saquery, &nr);
        if o.status.success() && stdout(&o).contains("NodeRecord dump") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "the new master's SA: {}", ibsim::stderr(&o));
        std::thread::sleep(Duration::from_millis(100));
    }

    // OpenSM now stands by (priority 0 < 1); its SA says nothing at all.
    let mut osm_standby = Daemon::opensm(&f, SM_HOST, &cache, &["-p", "0"]);
    osm_standby.wait_for("Entering STANDBY state", BRING_UP);
    let t0 = Instant::now();
    let o = to_sa(&f, master_lid, &saquery, &["-t", "500", "NR", &obs.to_string()]);
    assert!(!o.status.success(), "OpenSM's standby answered: {}", stdout(&o));
    assert!(ibsim::stderr(&o).contains("timed out"), "saquery to OpenSM's standby: {}", ibsim::stderr(&o));
    eprintln!("saquery to OpenSM's standby gave up after {:.2?}: {}", t0.elapsed(), ibsim::stderr(&o).trim());
}

// ---------------------------------------------------------------------------
// Whole tables through RMPP

/// `ibsm sa <table> --json` from OBSERVER: the rows, or the error text.
fn sa_table(f: &Fabric, table: &str) -> Result<Vec<Value>, String> {
    let mut c = f.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), OBSERVER);
    c.args(["sa", table, "--json"]);
    let o = run_with_timeout(c, Duration::from_secs(60));
    if !o.status.success() {
        return Err(ibsim::stderr(&o));
    }
    match serde_json::from_str(&stdout(&o)) {
        Ok(Value::Array(rows)) => Ok(rows),
        other => panic!("ibsm sa {table} --json printed {other:?}"),
    }
}

/// The NodeRecord and PortInfoRecord tables ibsm's own client reads whole
/// (RMPP) from `sm`'s SA must be the fabric ibnetdiscover finds: one
/// NodeRecord per node with its LID, GUIDs and description; one
/// PortInfoRecord per port (a switch's port 0 included), cabled ports
/// Active and the rest Down. Returns the two counts.
fn check_tables(f: &Fabric, label: &str) -> (usize, usize) {
    let ports = f.ports();
    let t0 = Instant::now();
    let nodes = sa_table(f, "nodes").unwrap_or_else(|e| panic!("{label}: ibsm sa nodes: {e}"));
    let pirs = sa_table(f, "ports").unwrap_or_else(|e| panic!("{label}: ibsm sa ports: {e}"));
    eprintln!("{label}: {} NodeRecords and {} PortInfoRecords read in {:.2?}", nodes.len(), pirs.len(), t0.elapsed());

    // ibnetdiscover's nodes: (LID, node GUID from the port GUID for a
    // CA, the switch's own) by name.
    let mut want: BTreeMap<u16, (String, u64)> = BTreeMap::new();
    for p in &ports {
        want.insert(p.lid, (p.name.clone(), p.guid));
    }
    let got: BTreeMap<u16, (String, u64)> = nodes
        .iter()
        .map(|n| {
            let guid = u64::from_str_radix(n["port_guid"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
            (n["lid"].as_u64().unwrap() as u16, (n["description"].as_str().unwrap().to_string(), guid))
        })
        .collect();
    assert_eq!(nodes.len(), want.len(), "{label}: NodeRecords, one per node");
    assert_eq!(got, want, "{label}: each NodeRecord's LID, description and port GUID");

    // Every port ibnetdiscover lists, plus each switch's port 0.
    let mut want: BTreeMap<(u16, u8), &str> = ports
        .iter()
        .map(|p| ((p.lid, if p.switch { p.port } else { 1 }), if p.peer.is_some() { "Active" } else { "Down" }))
        .collect();
    for s in ports.iter().filter(|p| p.switch) {
        want.insert((s.lid, 0), "Active");
    }
    let got: BTreeMap<(u16, u8), &str> = pirs
        .iter()
        .map(|p| ((p["lid"].as_u64().unwrap() as u16, p["port"].as_u64().unwrap() as u8), p["state"].as_str().unwrap()))
        .collect();
    assert_eq!(pirs.len(), want.len(), "{label}: PortInfoRecords, one per port");
    assert_eq!(got, want, "{label}: each port's state");
    (nodes.len(), pirs.len())
}

/// OpenSM's answer to a GetTable longer than one MAD reaches a client on
/// ibsim cut to its first MAD, with no RMPP header (the kernel, which
/// ibsim replaces, adds it): ibsm's client says so instead of reading
/// records out of it. ibsm's SA, doing RMPP itself, gives the whole table.
#[test]
fn ibsm_reads_whole_tables_on_ibsim_where_opensm_answers_one_mad() {
    let f = Fabric::start(NET);
    let cache = f.dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut osm = Daemon::opensm(&f, SM_HOST, &cache, &[]);
    osm.wait_for("SUBNET UP", BRING_UP);
    for table in ["nodes", "ports"] {
        let err = sa_table(&f, table).expect_err("a whole table from OpenSM on ibsim");
        assert!(err.contains("RMPPVersion 0"), "ibsm sa {table} against OpenSM: {err}");
    }
    drop(osm);
    let mut ours = Daemon::ibsm(&f, SM_HOST, &cache, &[]);
    ours.wait_for("SUBNET UP", BRING_UP);
    // 13 nodes, 8 + 5 x 9 ports: 1456 and 3816 bytes, 8 and 20 segments.
    assert_eq!(check_tables(&f, "ibsm, NET"), (NODES, 8 + 5 * 9));
}

/// The same on a 648-host fat tree (36 leaves, 18 spines, 702 nodes,
/// 2646 ports): about 390 and 960 RMPP segments, read whole.
#[test]
fn ibsm_reads_whole_tables_of_a_648_host_fabric_on_ibsim() {
    let f = Fabric::generated(FT648);
    let cache = f.dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut ours = Daemon::ibsm(&f, SM_HOST, &cache, &[]);
    ours.wait_for("SUBNET UP", Duration::from_secs(120));
    eprintln!("ibsm: {FT648} up {:.2?} after its start", ours.started.elapsed());
    assert_eq!(check_tables(&f, "ibsm, ft648"), (648 + 54, 648 + 54 * 37));
}
