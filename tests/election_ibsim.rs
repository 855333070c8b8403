//! Master/standby election on ibsim, with OpenSM 3.3.23 and between ibsm
//! instances (issue 8, item 5), judged by infiniband-diags from a host no SM
//! runs on: `sminfo` for who is master (the SM the observer's port names)
//! and `sminfo <lid>` for each SM's own state; `ibnetdiscover` for every
//! port's LID before and after; `iblinkinfo` for every cabled port ACTIVE,
//! sampled all through a takeover; `smpquery portinfo` (MasterSMLID) and
//! `ibroute` on every switch for what a standby must leave as it is.
//!
//! Every SM polls its master every 500 ms and gives up after 3 misses
//! (OpenSM through an edited `opensm -c` configuration), so a dead master is
//! detected in 1.5 s; waits are bounded by the configured times plus a
//! generous margin, never asserted tighter, and what was seen (state
//! changes, kill to MASTER, kill to SUBNET UP) is printed: run with
//! `--nocapture` for the figures.

#[path = "transport_support/ibsim.rs"]
mod ibsim;
#[path = "transport_support/saquery.rs"]
mod saquery;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use ibsim::{generated, opensm_conf, run_with_timeout, stdout, tool, Ibsim, KillOnDrop};
use ibsm::topology::Topology;

/// 12 switches (8 leaves, 4 spines), 32 hosts, 64 links.
const FABRIC: &str = "fattree2:radix=8";
/// Every SM's standby polling: interval and misses before the master is dead
/// (`ELECTION_IBSIM_POLL_MS` and `ELECTION_IBSIM_RETRIES` change them, to
/// measure with other values such as the defaults).
const POLL_MS: u64 = 500;
const RETRIES: u64 = 3;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

fn poll_ms() -> u64 {
    env_or("ELECTION_IBSIM_POLL_MS", POLL_MS)
}

fn retries() -> u64 {
    env_or("ELECTION_IBSIM_RETRIES", RETRIES)
}
/// ibsm's sweep interval (`--sweep-interval`); OpenSM keeps its 10 s.
const IBSM_SWEEP: Duration = Duration::from_secs(5);
const OPENSM_SWEEP: Duration = Duration::from_secs(10);
/// OpenSM's default SM_Key; every SM here is given it.
const SM_KEY: &str = "0x1";
/// Slack on every bound: process start, discovery, a sweep, a loaded CI box.
const MARGIN: Duration = Duration::from_secs(10);
/// A cold subnet brought up by the first master.
const BRING_UP: Duration = Duration::from_secs(60);

fn detection() -> Duration {
    Duration::from_millis(poll_ms() * retries())
}

// ---------------------------------------------------------------------------
// What the diags print

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SmState {
    NotActive,
    Discovering,
    Standby,
    Master,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SmInfo {
    lid: u16,
    guid: u64,
    priority: u8,
    state: SmState,
}

/// `sminfo: sm lid 1 sm guid 0x100001, activity count 1046 priority 10 state 3 SMINFO_MASTER`
fn parse_sminfo(text: &str) -> Option<SmInfo> {
    let line = text.lines().find(|l| l.starts_with("sminfo: sm lid"))?;
    let words: Vec<&str> = line.split_whitespace().map(|w| w.trim_end_matches(',')).collect();
    let after = |key: &str| words.iter().position(|&w| w == key).and_then(|i| words.get(i + 1)).copied();
    let state = match after("state")?.parse::<u8>().ok()? {
        0 => SmState::NotActive,
        1 => SmState::Discovering,
        2 => SmState::Standby,
        3 => SmState::Master,
        _ => return None,
    };
    Some(SmInfo {
        lid: after("lid")?.parse().ok()?,
        guid: u64::from_str_radix(after("guid")?.trim_start_matches("0x"), 16).ok()?,
        priority: after("priority")?.parse().ok()?,
        state,
    })
}

/// One port line of `ibnetdiscover -p`:
/// `CA    40  1 0x0000000000100037 4x SDR - SW    10  4 0x0000000000200006 ( 'leaf6-h3' - 'leaf6' )`
#[derive(Debug, Clone)]
struct Port {
    switch: bool,
    lid: u16,
    guid: u64,
}

fn parse_ports(text: &str) -> Vec<Port> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || !matches!(f[0], "CA" | "SW" | "RT") {
            continue;
        }
        out.push(Port {
            switch: f[0] == "SW",
            lid: f[1].parse().unwrap_or_else(|_| panic!("bad LID in `{line}`")),
            guid: u64::from_str_radix(f[3].trim_start_matches("0x"), 16)
                .unwrap_or_else(|_| panic!("bad GUID in `{line}`")),
        });
    }
    out
}

/// What the master programmed and a standby must leave alone: every port's
/// LID, every node's MasterSMLID, every switch's LFT as `ibroute` prints it.
#[derive(Debug, PartialEq)]
struct Programmed {
    lids: BTreeMap<u64, u16>,
    sm_lids: BTreeMap<u16, u16>,
    lfts: BTreeMap<u16, String>,
}

// ---------------------------------------------------------------------------
// The fabric and its SMs

struct Net {
    sim: Ibsim,
    _dir: tempfile::TempDir,
    /// Host names and port GUIDs, in the topology's order.
    hosts: Vec<(String, u64)>,
    /// Where the diags run; no SM sits there.
    observer: String,
    /// Port ends of every link: what iblinkinfo must show Active.
    cabled: usize,
}

impl Net {
    fn start() -> Net {
        let dir = tempfile::tempdir().unwrap();
        let (net, flags, _) = generated(FABRIC, dir.path());
        let topo = Topology::from_spec_or_file(FABRIC).unwrap();
        let hosts: Vec<(String, u64)> = topo
            .hosts()
            .map(|h| {
                let n = topo.node(h);
                (n.name.clone(), n.port_guid(1).0)
            })
            .collect();
        let observer = hosts.last().unwrap().0.clone();
        let sim = Ibsim::start_with(&net, &flags);
        sim.wait_for_sma(&observer, Duration::from_secs(10));
        Net { sim, _dir: dir, hosts, observer, cabled: topo.links.len() * 2 }
    }

    /// The `i`th host of the fabric, where an SM is put.
    fn host(&self, i: usize) -> (&str, u64) {
        (&self.hosts[i].0, self.hosts[i].1)
    }

    /// `ibsm args` on the `i`th host, as a client of the SA; must succeed.
    fn ibsm_client(&self, i: usize, args: &[&str]) -> String {
        let mut c = self.sim.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), Some(&self.hosts[i].0));
        c.args(args);
        let o = run_with_timeout(c, Duration::from_secs(60));
        assert!(o.status.success(), "ibsm {args:?} on host {i}: {}", String::from_utf8_lossy(&o.stderr));
        stdout(&o)
    }

    fn run(&self, name: &str, args: &[&str]) -> Output {
        let mut c = self.sim.client(&tool(name), Some(&self.observer));
        c.args(args);
        run_with_timeout(c, Duration::from_secs(30))
    }

    fn tool(&self, name: &str, args: &[&str]) -> String {
        let o = self.run(name, args);
        assert!(o.status.success(), "{name} {args:?} failed: {}{}", stdout(&o), ibsim::stderr(&o));
        stdout(&o)
    }

    /// `sminfo` (None: the SM the observer's port names as master) or
    /// `sminfo <lid>` (that SM's own answer).
    fn sminfo(&self, lid: Option<u16>) -> Result<SmInfo, String> {
        let lid = lid.map(|l| l.to_string());
        let args: Vec<&str> = lid.iter().map(String::as_str).collect();
        let o = self.run("sminfo", &args);
        let text = format!("{}{}", stdout(&o), ibsim::stderr(&o));
        match parse_sminfo(&text) {
            Some(info) if o.status.success() => Ok(info),
            _ => Err(text.trim().to_string()),
        }
    }

    fn lids(&self) -> BTreeMap<u64, u16> {
        parse_ports(&self.tool("ibnetdiscover", &["-p"])).into_iter().map(|p| (p.guid, p.lid)).collect()
    }

    /// Cabled ports iblinkinfo does not show Active (a shortfall in the
    /// number of cabled ports it finds counts too: a port gone down hides
    /// what lies behind it).
    fn inactive(&self) -> Vec<String> {
        let o = self.run("iblinkinfo", &[]);
        if !o.status.success() {
            return vec![format!("iblinkinfo failed: {}", ibsim::stderr(&o).trim())];
        }
        let text = stdout(&o);
        let cabled: Vec<&str> = text.lines().filter(|l| l.contains("==(") && !l.contains("[  ] \"\" (")).collect();
        let mut bad: Vec<String> =
            cabled.iter().filter(|l| !l.contains("Active/")).map(|l| l.trim().to_string()).collect();
        if cabled.len() != self.cabled {
            bad.push(format!("iblinkinfo shows {} cabled ports, the fabric has {}", cabled.len(), self.cabled));
        }
        bad
    }

    fn assert_all_active(&self, label: &str) {
        let bad = self.inactive();
        assert!(bad.is_empty(), "{label}: ports not ACTIVE:\n{}", bad.join("\n"));
    }

    fn programmed(&self) -> Programmed {
        let ports = parse_ports(&self.tool("ibnetdiscover", &["-p"]));
        let lids: BTreeMap<u64, u16> = ports.iter().map(|p| (p.guid, p.lid)).collect();
        let mut node_lids: Vec<u16> = ports.iter().map(|p| p.lid).collect();
        node_lids.sort_unstable();
        node_lids.dedup();
        let sm_lids = node_lids
            .iter()
            .map(|&lid| {
                let text = self.tool("smpquery", &["portinfo", &lid.to_string()]);
                let sm = ibsim::fields(&text)
                    .into_iter()
                    .find(|(k, _)| k == "SMLid")
                    .unwrap_or_else(|| panic!("no SMLid in portinfo of LID {lid}: {text}"));
                (lid, sm.1.parse().unwrap())
            })
            .collect();
        let mut switch_lids: Vec<u16> = ports.iter().filter(|p| p.switch).map(|p| p.lid).collect();
        switch_lids.sort_unstable();
        switch_lids.dedup();
        let lfts = switch_lids.iter().map(|&s| (s, self.tool("ibroute", &[&s.to_string()]))).collect();
        Programmed { lids, sm_lids, lfts }
    }

    /// OpenSM at `priority` on the `i`th host, polling as every SM here does.
    fn opensm(&self, i: usize, priority: u8) -> Sm {
        let (host, guid) = self.host(i);
        self.sim.wait_for_sma(host, Duration::from_secs(10));
        let dir = tempfile::tempdir().unwrap();
        let conf = opensm_conf(
            &dir.path().join("opensm.conf"),
            &[
                ("sminfo_polling_timeout", &poll_ms().to_string()),
                ("polling_retry_number", &retries().to_string()),
                ("sm_key", SM_KEY),
            ],
        );
        let log = dir.path().join("opensm.log");
        let out = std::fs::File::create(dir.path().join("stdout")).unwrap();
        let mut c = self.sim.client(&tool("opensm"), Some(host));
        c.args(["-p", &priority.to_string(), "-d2", "-F"])
            .arg(&conf)
            .arg("-f")
            .arg(&log)
            .env("OSM_TMP_DIR", dir.path())
            .env("OSM_CACHE_DIR", dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let child = KillOnDrop(c.spawn().expect("starting opensm"));
        Sm::new(format!("OpenSM p{priority} on {host}"), host, guid, child, log, dir)
    }

    /// `ibsm run` at `priority` on the `i`th host; `extra` is more of the
    /// configuration's `[sm]` table.
    fn ibsm(&self, i: usize, priority: u8, extra: &str) -> Sm {
        let (host, guid) = self.host(i);
        self.sim.wait_for_sma(host, Duration::from_secs(10));
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("ibsm.toml");
        // No metrics endpoint: several ibsm share this machine's loopback.
        std::fs::write(&conf, format!("[metrics]\nlisten = \"\"\n\n[sm]\nsm_key = \"{SM_KEY}\"\n{extra}")).unwrap();
        let log = dir.path().join("ibsm.log");
        let out = std::fs::File::create(dir.path().join("stdout")).unwrap();
        let mut c = self.sim.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), Some(host));
        c.arg("run")
            .arg("--config")
            .arg(&conf)
            .args(["--priority", &priority.to_string()])
            .args(["--sminfo-polling-timeout", &poll_ms().to_string()])
            .args(["--polling-retry-number", &retries().to_string()])
            .args(["--sweep-interval", &IBSM_SWEEP.as_secs().to_string()])
            .arg("--cache-dir")
            .arg(dir.path())
            .arg("--log-file")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        let child = KillOnDrop(c.spawn().expect("starting ibsm"));
        Sm::new(format!("ibsm p{priority} on {host}"), host, guid, child, log, dir)
    }

    /// Waits for the first master of a cold fabric to log SUBNET UP, checks
    /// the diags agree, and learns every port's LID.
    fn bring_up(&self, sm: &mut Sm) -> BTreeMap<u64, u16> {
        while !ibsim::wait_for_log(&sm.log, "SUBNET UP", Duration::from_millis(200)) {
            sm.assert_running();
            assert!(
                sm.started.elapsed() < BRING_UP,
                "{} did not bring the subnet up in {BRING_UP:?}\n{}",
                sm.label,
                sm.tail()
            );
        }
        eprintln!("{}: SUBNET UP on a cold {FABRIC} {:.2?} after its start", sm.label, sm.started.elapsed());
        let lids = self.lids();
        sm.lid = *lids.get(&sm.guid).unwrap_or_else(|| panic!("{} has no LID: {lids:?}", sm.label));
        self.assert_all_active("after bring-up");
        let master = self.sminfo(None).unwrap_or_else(|e| panic!("sminfo after bring-up: {e}\n{}", sm.tail()));
        assert_eq!((master.guid, master.state), (sm.guid, SmState::Master), "sminfo after bring-up: {master:?}");
        lids
    }
}

struct Sm {
    label: String,
    host: String,
    guid: u64,
    /// Its port's LID, once the subnet is up.
    lid: u16,
    started: Instant,
    /// In a RefCell so that a watch can see it die on its own.
    child: std::cell::RefCell<KillOnDrop>,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Sm {
    fn new(label: String, host: &str, guid: u64, child: KillOnDrop, log: PathBuf, dir: tempfile::TempDir) -> Sm {
        Sm { label, host: host.to_string(), guid, lid: 0, started: Instant::now(), child: child.into(), log, dir }
    }

    /// SIGKILL; returns when the signal was sent.
    fn kill(&mut self) -> Instant {
        let child = &mut self.child.get_mut().0;
        child.kill().expect("SIGKILL");
        let at = Instant::now();
        let _ = child.wait();
        at
    }

    /// Fails the test if the SM has exited although nobody killed it.
    fn assert_running(&self) {
        if let Ok(Some(status)) = self.child.borrow_mut().0.try_wait() {
            panic!("{} exited on its own ({status})\n{}", self.label, self.tail());
        }
    }

    fn count(&self, needle: &str) -> usize {
        std::fs::read_to_string(&self.log).unwrap_or_default().matches(needle).count()
    }

    /// The last lines of its log and of its stdout/stderr, for a failure.
    fn tail(&self) -> String {
        let last = |p: &Path| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        };
        format!(
            "--- {} ({}) log:\n{}\n--- stdout/stderr:\n{}",
            self.label,
            self.host,
            last(&self.log),
            last(&self.dir.path().join("stdout"))
        )
    }
}

/// `ELECTION_IBSIM_LOGS=1` prints every SM's log when its test ends.
impl Drop for Sm {
    fn drop(&mut self) {
        if std::env::var_os("ELECTION_IBSIM_LOGS").is_some() {
            eprintln!("{}", self.tail());
        }
    }
}

// ---------------------------------------------------------------------------
// Watching SMs through the diags

/// One sample of one SM: its state as `sminfo <lid>` reads it (None: no
/// answer) and whether its log has a SUBNET UP the watch had not seen.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    state: Option<SmState>,
    up: bool,
}

/// What a watch saw, with times since its `t0`.
struct Timeline {
    labels: Vec<String>,
    /// Each change in the SMs' states (the first sample included).
    changes: Vec<(Duration, Vec<Option<SmState>>)>,
    first_master: Vec<Option<Duration>>,
    first_up: Vec<Option<Duration>>,
    /// Samples where iblinkinfo showed a cabled port not ACTIVE.
    inactive: Vec<(Duration, Vec<String>)>,
    /// Samples where two SMs answered MASTER.
    two_masters: Vec<Duration>,
    /// Samples where no SM answered MASTER.
    no_master: Vec<Duration>,
    end: Duration,
}

impl Timeline {
    fn print(&self, what: &str) {
        eprintln!("{what}: watched {:.2?}", self.end);
        for (t, states) in &self.changes {
            let s: Vec<String> = self.labels.iter().zip(states).map(|(l, s)| format!("{l}: {s:?}")).collect();
            eprintln!("  +{:>7.2?}  {}", t, s.join(", "));
        }
        if let (Some(first), Some(last)) = (self.no_master.first(), self.no_master.last()) {
            eprintln!("  no SM answered MASTER in {} samples, from +{first:.2?} to +{last:.2?}", self.no_master.len());
        }
        if !self.two_masters.is_empty() {
            // The SMs are asked one after the other, a few ms apart: a
            // handover between two questions shows as one such sample.
            eprintln!("  two SMs answered MASTER in {} samples (asked in turn)", self.two_masters.len());
        }
    }

    fn assert_always_active(&self, what: &str) {
        assert!(
            self.inactive.is_empty(),
            "{what}: ports left ACTIVE during the watch: {:#?}",
            &self.inactive[..self.inactive.len().min(5)]
        );
    }

    fn master_after(&self, i: usize) -> Duration {
        self.first_master[i].expect("the watch ended with that SM MASTER")
    }

    fn up_after(&self, i: usize) -> Duration {
        self.first_up[i].expect("the watch ended with that SM's SUBNET UP")
    }
}

enum Until<'a> {
    /// Until the predicate holds on a sample; fails past the limit.
    Done(Duration, &'a dyn Fn(&[Seen]) -> bool),
    /// For this long, failing as soon as the invariant does not hold.
    Holds(Duration, &'a dyn Fn(&[Seen]) -> bool),
}

/// Samples every SM's `sminfo <lid>` and the fabric's link states, over and
/// over (each round is a few tens of ms on this fabric), from `t0`.
fn watch(net: &Net, sms: &[&Sm], t0: Instant, until: Until) -> Timeline {
    let ups_before: Vec<usize> = sms.iter().map(|s| s.count("SUBNET UP")).collect();
    let mut tl = Timeline {
        labels: sms.iter().map(|s| s.label.clone()).collect(),
        changes: Vec::new(),
        first_master: vec![None; sms.len()],
        first_up: vec![None; sms.len()],
        inactive: Vec::new(),
        two_masters: Vec::new(),
        no_master: Vec::new(),
        end: Duration::ZERO,
    };
    let fail = |tl: &Timeline, why: String| -> ! {
        tl.print("watch");
        let logs: Vec<String> = sms.iter().map(|s| s.tail()).collect();
        panic!("{why}\n{}", logs.join("\n"));
    };
    loop {
        sms.iter().for_each(|s| s.assert_running());
        let seen: Vec<Seen> = sms
            .iter()
            .zip(&ups_before)
            .map(|(sm, &before)| Seen {
                state: net.sminfo(Some(sm.lid)).ok().filter(|i| i.guid == sm.guid).map(|i| i.state),
                up: sm.count("SUBNET UP") > before,
            })
            .collect();
        let t = t0.elapsed();
        tl.end = t;
        let states: Vec<Option<SmState>> = seen.iter().map(|s| s.state).collect();
        if tl.changes.last().is_none_or(|(_, last)| *last != states) {
            tl.changes.push((t, states.clone()));
        }
        for (i, s) in seen.iter().enumerate() {
            if s.state == Some(SmState::Master) && tl.first_master[i].is_none() {
                tl.first_master[i] = Some(t);
            }
            if s.up && tl.first_up[i].is_none() {
                tl.first_up[i] = Some(t);
            }
        }
        match states.iter().filter(|&&s| s == Some(SmState::Master)).count() {
            0 => tl.no_master.push(t),
            1 => {}
            _ => tl.two_masters.push(t),
        }
        let bad = net.inactive();
        if !bad.is_empty() {
            tl.inactive.push((t, bad));
        }
        match until {
            Until::Done(limit, done) => {
                if done(&seen) {
                    return tl;
                }
                if t > limit {
                    fail(&tl, format!("not done within {limit:?}; last sample {seen:?}"));
                }
            }
            Until::Holds(limit, invariant) => {
                if !invariant(&seen) {
                    fail(&tl, format!("invariant broken at +{t:.2?}: {seen:?}"));
                }
                if t > limit {
                    return tl;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is(state: SmState) -> impl Fn(&Seen) -> bool {
    move |s| s.state == Some(state)
}

/// `sminfo` from the observer names `sm` as master, and `sminfo <lid>` of
/// each of `standbys` answers STANDBY with its own GUID.
fn assert_roles(net: &Net, label: &str, master: &Sm, standbys: &[&Sm]) {
    let m = net.sminfo(None).unwrap_or_else(|e| panic!("{label}: sminfo: {e}\n{}", master.tail()));
    assert_eq!((m.guid, m.lid, m.state), (master.guid, master.lid, SmState::Master), "{label}: sminfo: {m:?}");
    let own = net.sminfo(Some(master.lid)).unwrap_or_else(|e| panic!("{label}: sminfo {}: {e}", master.lid));
    assert_eq!((own.guid, own.state), (master.guid, SmState::Master), "{label}: {}'s own SMInfo", master.label);
    for s in standbys {
        let info = net.sminfo(Some(s.lid)).unwrap_or_else(|e| panic!("{label}: sminfo {}: {e}\n{}", s.lid, s.tail()));
        assert_eq!((info.guid, info.state), (s.guid, SmState::Standby), "{label}: {}'s own SMInfo", s.label);
    }
}

/// Every node's MasterSMLID names `master`.
fn assert_sm_lid(p: &Programmed, label: &str, master: &Sm) {
    let wrong: Vec<_> = p.sm_lids.iter().filter(|(_, &sm)| sm != master.lid).collect();
    assert!(
        wrong.is_empty(),
        "{label}: nodes (LID, MasterSMLID) not naming {} at LID {}: {wrong:?}",
        master.label,
        master.lid
    );
}

/// A second SM at lower priority comes up STANDBY beside a running master
/// and, over two of its sweeps and many polls, changes nothing the master
/// programmed and never brings the subnet up itself.
fn standby_changes_nothing(net: &Net, master: &Sm, standby: &Sm, before: &Programmed) {
    let t0 = Instant::now();
    let tl = watch(
        net,
        &[master, standby],
        t0,
        Until::Done(MARGIN + IBSM_SWEEP * 2, &|s| is(SmState::Master)(&s[0]) && is(SmState::Standby)(&s[1])),
    );
    tl.print(&format!("{} joins beside {}", standby.label, master.label));
    let tl = watch(
        net,
        &[master, standby],
        Instant::now(),
        Until::Holds(IBSM_SWEEP * 2 + detection(), &|s| {
            is(SmState::Master)(&s[0]) && is(SmState::Standby)(&s[1]) && !s[1].up
        }),
    );
    tl.assert_always_active("while standby");
    assert_roles(net, "standby beside a master", master, &[standby]);
    assert_eq!(
        standby.count("SUBNET UP"),
        0,
        "{} brought the subnet up while standby\n{}",
        standby.label,
        standby.tail()
    );
    let now = net.programmed();
    assert_eq!(now.lids, before.lids, "LIDs changed while {} was standby", standby.label);
    assert_eq!(now.sm_lids, before.sm_lids, "MasterSMLIDs changed while {} was standby", standby.label);
    for (sw, lft) in &before.lfts {
        assert_eq!(&now.lfts[sw], lft, "switch LID {sw}'s LFT changed while {} was standby", standby.label);
    }
}

/// SIGKILL `master`; `heir` (polling it) must be MASTER and log SUBNET UP
/// within the detection time plus the margin, every port ACTIVE throughout,
/// every LID as before; `others` stay STANDBY. Returns (kill to MASTER,
/// kill to SUBNET UP).
fn failover(
    net: &Net,
    master: &mut Sm,
    heir: &Sm,
    others: &[&Sm],
    before: &Programmed,
    what: &str,
) -> (Duration, Duration) {
    let limit = detection() + MARGIN;
    let t_kill = master.kill();
    let mut sms = vec![heir];
    sms.extend_from_slice(others);
    let tl = watch(net, &sms, t_kill, Until::Done(limit, &|s| is(SmState::Master)(&s[0]) && s[0].up));
    tl.print(&format!("{what}: {} killed", master.label));
    let (to_master, to_up) = (tl.master_after(0), tl.up_after(0));
    eprintln!(
        "FIGURE {what} on {FABRIC}: killed -> MASTER {to_master:.2?}, -> SUBNET UP {to_up:.2?} \
         (polling {} ms x {} = {:.1?})",
        poll_ms(),
        retries(),
        detection()
    );
    tl.assert_always_active(what);
    assert!(tl.two_masters.is_empty(), "{what}: two SMs answered MASTER during the takeover");
    let after = net.programmed();
    assert_eq!(after.lids, before.lids, "{what}: LIDs changed in the takeover");
    net.assert_all_active(what);
    assert_roles(net, what, heir, others);
    assert_sm_lid(&after, what, heir);
    (to_master, to_up)
}

/// A higher-priority SM `newcomer` joins while `master` runs: the subnet is
/// handed to it within `limit`, the old master STANDBY, LIDs as before,
/// every port ACTIVE throughout; then both stay so.
fn handover(net: &Net, master: &Sm, newcomer: &Sm, before: &Programmed, limit: Duration, what: &str) {
    let t0 = Instant::now();
    let tl = watch(
        net,
        &[master, newcomer],
        t0,
        Until::Done(limit, &|s| is(SmState::Standby)(&s[0]) && is(SmState::Master)(&s[1]) && s[1].up),
    );
    tl.print(&format!("{what}: {} started", newcomer.label));
    eprintln!(
        "FIGURE {what} on {FABRIC}: newcomer started -> MASTER {:.2?}, -> SUBNET UP {:.2?}; \
         samples with no master: {} ({}), with two (asked in turn): {}",
        tl.master_after(1),
        tl.up_after(1),
        tl.no_master.len(),
        match (tl.no_master.first(), tl.no_master.last()) {
            (Some(a), Some(b)) => format!("+{a:.2?} to +{b:.2?}"),
            _ => "none".into(),
        },
        tl.two_masters.len()
    );
    tl.assert_always_active(what);
    let tl = watch(
        net,
        &[master, newcomer],
        Instant::now(),
        Until::Holds(IBSM_SWEEP * 2, &|s| is(SmState::Standby)(&s[0]) && is(SmState::Master)(&s[1])),
    );
    tl.assert_always_active(what);
    assert_roles(net, what, newcomer, &[master]);
    let after = net.programmed();
    assert_eq!(after.lids, before.lids, "{what}: LIDs changed in the handover");
    assert_sm_lid(&after, what, newcomer);
    net.assert_all_active(what);
}

// ---------------------------------------------------------------------------
// The tests

/// For reference, and to prove the harness: OpenSM to OpenSM with the same
/// polling.
#[test]
fn opensm_to_opensm_failover_for_reference() {
    let net = Net::start();
    let mut a = net.opensm(0, 10);
    net.bring_up(&mut a);
    let before = net.programmed();
    let mut b = net.opensm(1, 1);
    b.lid = before.lids[&b.guid];
    let tl = watch(
        &net,
        &[&a, &b],
        Instant::now(),
        Until::Done(MARGIN, &|s| is(SmState::Master)(&s[0]) && is(SmState::Standby)(&s[1])),
    );
    tl.print("OpenSM joins beside OpenSM");
    assert_roles(&net, "OpenSM standby", &a, &[&b]);
    failover(&net, &mut a, &b, &[], &before, "OpenSM -> OpenSM failover");
}

/// For reference: OpenSM at 1 hands over to OpenSM at 10. Ignored: about
/// one run in five, OpenSM 3.3.23's new master answers MASTER but neither
/// logs it nor sweeps (no SUBNET UP in 20 s). Run with `--ignored` for the
/// figure.
#[test]
#[ignore]
fn opensm_hands_over_to_higher_priority_opensm_for_reference() {
    let net = Net::start();
    let mut a = net.opensm(0, 1);
    net.bring_up(&mut a);
    let before = net.programmed();
    let mut b = net.opensm(1, 10);
    b.lid = before.lids[&b.guid];
    handover(&net, &a, &b, &before, OPENSM_SWEEP + detection() + MARGIN, "OpenSM -> OpenSM handover");
}

/// a. OpenSM master at higher priority, ibsm standby; SIGKILL OpenSM.
#[test]
fn opensm_master_ibsm_standby_then_failover() {
    let net = Net::start();
    let mut osm = net.opensm(0, 10);
    net.bring_up(&mut osm);
    let before = net.programmed();
    assert_sm_lid(&before, "OpenSM's bring-up", &osm);
    let mut sm = net.ibsm(1, 1, "");
    sm.lid = before.lids[&sm.guid];
    standby_changes_nothing(&net, &osm, &sm, &before);
    failover(&net, &mut osm, &sm, &[], &before, "OpenSM -> ibsm failover");
}

/// b. ibsm master, OpenSM standby; kill ibsm.
#[test]
fn ibsm_master_opensm_standby_then_failover() {
    let net = Net::start();
    let mut sm = net.ibsm(0, 5, "");
    net.bring_up(&mut sm);
    let before = net.programmed();
    assert_sm_lid(&before, "ibsm's bring-up", &sm);
    let mut osm = net.opensm(1, 1);
    osm.lid = before.lids[&osm.guid];
    standby_changes_nothing(&net, &sm, &osm, &before);
    failover(&net, &mut sm, &osm, &[], &before, "ibsm -> OpenSM failover");
}

/// c. OpenSM master at priority 1; ibsm at 10 starts and is handed the
/// subnet. OpenSM notices the newcomer on a trap or at its next sweep.
#[test]
fn opensm_hands_over_to_higher_priority_ibsm() {
    let net = Net::start();
    let mut osm = net.opensm(0, 1);
    net.bring_up(&mut osm);
    let before = net.programmed();
    let mut sm = net.ibsm(1, 10, "");
    sm.lid = before.lids[&sm.guid];
    handover(&net, &osm, &sm, &before, OPENSM_SWEEP + detection() + MARGIN, "OpenSM -> ibsm handover");
}

/// d. ibsm master at higher priority, ibsm standby; kill the master.
#[test]
fn ibsm_master_ibsm_standby_then_failover() {
    let net = Net::start();
    let mut a = net.ibsm(0, 10, "");
    net.bring_up(&mut a);
    let before = net.programmed();
    let mut b = net.ibsm(1, 1, "");
    b.lid = before.lids[&b.guid];
    standby_changes_nothing(&net, &a, &b, &before);
    failover(&net, &mut a, &b, &[], &before, "ibsm -> ibsm failover");
}

/// d. ibsm master at priority 1; ibsm at 10 starts and is handed the subnet.
#[test]
fn ibsm_hands_over_to_higher_priority_ibsm() {
    let net = Net::start();
    let mut a = net.ibsm(0, 1, "");
    net.bring_up(&mut a);
    let before = net.programmed();
    let mut b = net.ibsm(1, 10, "");
    b.lid = before.lids[&b.guid];
    handover(&net, &a, &b, &before, IBSM_SWEEP + detection() + MARGIN, "ibsm -> ibsm handover");
}

/// d. Three ibsm: a master and two standbys of equal priority. Kill the
/// master: exactly one standby takes over, the one with the lower port GUID
/// (IBA 14.4.1.1), and the other stays STANDBY. The higher-GUID standby is
/// started first, so start order cannot decide it.
#[test]
fn three_ibsm_one_standby_takes_over() {
    let net = Net::start();
    let mut a = net.ibsm(0, 10, "");
    net.bring_up(&mut a);
    let before = net.programmed();
    let mut c = net.ibsm(2, 5, "");
    let mut b = net.ibsm(1, 5, "");
    b.lid = before.lids[&b.guid];
    c.lid = before.lids[&c.guid];
    assert!(b.guid < c.guid);
    let tl = watch(
        &net,
        &[&a, &b, &c],
        Instant::now(),
        Until::Done(MARGIN + IBSM_SWEEP * 2, &|s| {
            is(SmState::Master)(&s[0]) && is(SmState::Standby)(&s[1]) && is(SmState::Standby)(&s[2])
        }),
    );
    tl.print("two ibsm standbys join");
    assert_roles(&net, "one master, two standbys", &a, &[&b, &c]);
    let now = net.programmed();
    assert_eq!(now, before, "the fabric changed while two ibsm were standby");

    let (to_master, _) = failover(&net, &mut a, &b, &[&c], &before, "ibsm -> ibsm of two standbys");
    // Stays so: exactly one master among the two, through their polls and
    // two sweeps.
    let tl = watch(
        &net,
        &[&b, &c],
        Instant::now(),
        Until::Holds(IBSM_SWEEP * 2 + detection(), &|s| is(SmState::Master)(&s[0]) && is(SmState::Standby)(&s[1])),
    );
    tl.assert_always_active("after the takeover");
    assert_roles(&net, "after the takeover", &b, &[&c]);
    assert_eq!(c.count("SUBNET UP"), 0, "the losing standby brought the subnet up\n{}", c.tail());
    eprintln!("three ibsm: {} took over in {to_master:.2?}; {} stayed STANDBY", b.label, c.label);
}

/// e. The SA state stream (issue 22): ibsm master A and ibsm standby B. A
/// host brings IPoIB up and registers a ServiceRecord; A is SIGKILLed
/// 100 ms after its last answer. B serves the joins (the host's port in
/// each of its groups, read one record per saquery) and the service, and
/// says it took over with a current copy (no ClientReregister), with the
/// MFTs as A left them (no block read).
#[test]
fn ibsm_failover_serves_the_masters_last_joins_and_registrations() {
    let net = Net::start();
    let mut a = net.ibsm(0, 10, "");
    net.bring_up(&mut a);
    let before = net.programmed();
    let mut b = net.ibsm(1, 1, "[sa]\nmirror_interval_s = 0\n");
    b.lid = before.lids[&b.guid];
    let current = "this standby's copy of the master's SA state is current";
    assert!(
        ibsim::wait_for_log(&b.log, current, MARGIN + IBSM_SWEEP),
        "B's copy never became current\n{}\n{}",
        b.tail(),
        a.tail()
    );
    // The last acts under A: IPoIB on host 3 and a ServiceRecord.
    let host = 3;
    let guid = net.hosts[host].1;
    let up = net.ibsm_client(host, &["sa", "ipoib"]);
    net.ibsm_client(host, &["sa", "service", "--id", "0x5157", "--name", "sync-ibsim", "--lease", "600"]);
    std::thread::sleep(Duration::from_millis(100));
    let t_kill = a.kill();
    let tl = watch(&net, &[&b], t_kill, Until::Done(detection() + MARGIN, &|s| is(SmState::Master)(&s[0]) && s[0].up));
    tl.print("ibsm -> ibsm failover with the state stream");
    // Each of the host's memberships, one record per query: ibsim hands a
    // receiver only 224 bytes of each MAD, so records past the first
    // segment's 168th data byte of a GetTable answer arrive damaged.
    let joined: serde_json::Value = serde_json::from_str(up.trim()).unwrap();
    let port_gid = std::net::Ipv6Addr::from((0xfe80u128 << 112) | u128::from(guid)).to_string();
    let groups = joined["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 5, "IPoIB joins five groups: {joined:#}");
    for g in groups {
        let mgid = g["mgid"].as_str().unwrap();
        let o = net.run("saquery", &["--smkey", "1", "MCMR", "--mgid", mgid, "--gid", &port_gid]);
        let recs = saquery::records(&stdout(&o));
        assert_eq!(recs.len(), 1, "host {host} in {mgid} under B: {recs:#?}\n{}", b.tail());
        assert_eq!(recs[0].num("mlid"), g["mlid"].as_u64().unwrap(), "{mgid}'s MLID under B");
        assert_eq!(recs[0].num("JoinState"), 1, "{mgid}: a full member under B");
    }
    let o = net.run("saquery", &["--smkey", "1", "-S"]);
    let services = saquery::records(&stdout(&o));
    assert_eq!(services.len(), 1, "the host's ServiceRecord under B: {services:#?}");
    assert_eq!(services[0].num("ServiceID"), 0x5157, "{services:#?}");
    assert!(services[0].field("ServiceName").contains("sync-ibsim"), "{services:#?}");
    assert!(b.count("a current copy of the old master's SA state: no ClientReregister") == 1, "{}", b.tail());
    assert!(b.count("SA state taken over from the mirror: 1 services") == 1, "{}", b.tail());
    // The MFTs stay as A left them: A streamed its groups' trees and its
    // digest of each switch's table; B builds its trees along A's, they
    // match the digests, and B reads no block.
    let log = std::fs::read_to_string(&b.log).unwrap_or_default();
    let field = |line: &str, name: &str| -> usize {
        let at = line.find(&format!(" {name}=")).map(|i| i + name.len() + 2);
        at.and_then(|i| line[i..].split(' ').next()?.parse().ok()).unwrap_or(0)
    };
    let passes: Vec<(usize, usize)> = log
        .lines()
        .filter(|l| l.contains("multicast forwarding programmed"))
        .map(|l| (field(l, "reads"), field(l, "vouched")))
        .collect();
    assert!(
        passes.iter().any(|&(_, vouched)| vouched > 0),
        "B took no switch's MFT on A's digest: {passes:?}\n{}",
        b.tail()
    );
    assert!(passes.iter().all(|&(reads, _)| reads == 0), "B read MFT blocks: {passes:?}\n{}", b.tail());
    let after = net.programmed();
    assert_eq!(after.lids, before.lids, "LIDs changed in the takeover");
    net.assert_all_active("after the takeover");
}
