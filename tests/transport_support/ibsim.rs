//! Running ibsim and umad2sim clients from tests.
//!
//! libumad2sim has to be LD_PRELOADed into a fresh process (it interposes
//! libc's open/read/write/ioctl/poll), so every client — `ibsm` or an
//! infiniband-diags tool — runs as a child with LD_PRELOAD, IBSIM_SOCKNAME,
//! SIM_HOST and a private working directory (umad2sim writes ./sys-<pid>).
//! A missing ibsim, libumad2sim or smpquery makes the test fail, not skip.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const NET_EXAMPLES: &str = "/usr/share/doc/ibsim-utils/net-examples";

pub fn net(name: &str) -> PathBuf {
    let p = Path::new(NET_EXAMPLES).join(name);
    assert!(p.exists(), "{} is missing: install ibsim-utils", p.display());
    p
}

/// The libumad2sim preload library (multiarch directories differ).
pub fn umad2sim() -> PathBuf {
    let candidates = [
        "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so",
        "/usr/lib/aarch64-linux-gnu/umad2sim/libumad2sim.so",
        "/usr/lib64/umad2sim/libumad2sim.so",
        "/usr/lib/umad2sim/libumad2sim.so",
    ];
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("libumad2sim.so not found in {candidates:?}: install ibsim-utils"))
}

/// Finds `tool` on PATH (or in /usr/sbin), failing the test if absent.
pub fn tool(tool: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{tool}` not found: install ibsim-utils / infiniband-diags"))
}

/// A running ibsim on a unique socket name; killed on drop.
pub struct Ibsim {
    child: Child,
    /// ibsim's console: Unlink, Link, ReLink, Error (packet drops), ...
    console: std::sync::Mutex<Option<std::process::ChildStdin>>,
    pub sock: String,
    dir: tempfile::TempDir,
    pub net: PathBuf,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Ibsim {
    pub fn start(net: &Path) -> Ibsim {
        Self::start_with(net, &[])
    }

    /// Starts ibsim with extra flags (e.g. `-N/-S/-P` for big nets).
    pub fn start_with(net: &Path, flags: &[String]) -> Ibsim {
        let ibsim = tool("ibsim");
        let sock = format!("ibsm-t{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst));
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("ibsim.log")).unwrap();
        let child = Command::new(ibsim)
            .arg("-s")
            .args(flags)
            .arg(net)
            .env("IBSIM_SOCKNAME", &sock)
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting ibsim");
        let mut child = child;
        let console = child.stdin.take();
        let sim = Ibsim { child, console: std::sync::Mutex::new(console), sock, dir, net: net.to_path_buf() };
        sim.wait_ready();
        sim
    }

    /// ibsim listens on an abstract socket `@<name>:ctl` once the net is
    /// parsed; /proc/net/unix shows it (with a trailing NUL as `@`).
    fn wait_ready(&self) {
        let want = format!("@{}:ctl", self.sock);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if std::fs::read_to_string("/proc/net/unix").unwrap_or_default().lines().any(|l| l.contains(&want)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("ibsim did not come up on {want}; log: {}", self.log());
    }

    /// Sends one command to ibsim's console.
    pub fn console(&self, command: &str) {
        use std::io::Write;
        let mut guard = self.console.lock().unwrap();
        let c = guard.as_mut().expect("ibsim console");
        writeln!(c, "{command}").expect("writing to ibsim's console");
        c.flush().unwrap();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ibsim.log")).unwrap_or_default()
    }

    /// A command for `program` attached to this ibsim at `host` (None: the
    /// net's first port), in a fresh working directory.
    pub fn client(&self, program: &Path, host: Option<&str>) -> Command {
        let mut c = Command::new(program);
        let cwd = tempfile::tempdir_in(self.dir.path()).unwrap().keep();
        c.env("LD_PRELOAD", umad2sim()).env("IBSIM_SOCKNAME", &self.sock).current_dir(cwd);
        match host {
            Some(h) => c.env("SIM_HOST", h),
            None => c.env_remove("SIM_HOST"),
        };
        c
    }

    /// Runs `ibsm` with `args`, with a wall-clock guard.
    pub fn ibsm(&self, host: Option<&str>, args: &[&str]) -> Output {
        let mut c = self.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), host);
        c.args(args);
        run_with_timeout(c, Duration::from_secs(60))
    }

    /// Runs smpquery with `args`.
    pub fn smpquery(&self, host: Option<&str>, args: &[&str]) -> Output {
        let mut c = self.client(&tool("smpquery"), host);
        c.args(args);
        run_with_timeout(c, Duration::from_secs(30))
    }
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `c` to completion, killing it (and failing) after `limit`: a hung
/// umad2sim client must not hang the test suite. Its output goes to files,
/// so an output larger than a pipe holds (ibnetdiscover on 700 nodes)
/// cannot stall it.
pub fn run_with_timeout(mut c: Command, limit: Duration) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = c
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn");
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{c:?} did not finish in {limit:?}; stdout: {} stderr: {}",
                std::fs::read_to_string(&out).unwrap_or_default(),
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { status, stdout: std::fs::read(&out).unwrap(), stderr: std::fs::read(&err).unwrap() }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `Name:....value` lines of smpquery-style output, in order; continuation
/// lines (tab-indented capability names) and comments are skipped.
pub fn fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('\t') && !l.starts_with(' '))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let value = rest.trim_start_matches('.');
            Some((name.trim().to_string(), value.trim().to_string()))
        })
        .collect()
}

/// Writes a generated topology (or a topology file) as an ibsim net in
/// `dir`; returns its path, the flags ibsim needs for it and the name of
/// the first host (where an SM sits).
pub fn generated(spec: &str, dir: &Path) -> (PathBuf, Vec<String>, String) {
    use ibsm::topology::{writer, Topology};
    let topo = Topology::from_spec_or_file(spec).unwrap();
    let net = dir.join("fabric.net");
    writer::write_net_file(&topo, &net).unwrap();
    let host = topo.node(topo.hosts().next().unwrap()).name.clone();
    (net, writer::ibsim_args(&topo), host)
}

/// Waits up to `limit` for `needle` in the file at `path` (a log).
pub fn wait_for_log(path: &Path, needle: &str, limit: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if std::fs::read_to_string(path).unwrap_or_default().contains(needle) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A child process (a daemon: OpenSM, `ibsm run`) killed on drop.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Ibsim {
    /// Waits until `host`'s SMA answers `smpquery -D nodeinfo 0`: an SM
    /// started before that can miss its own port.
    pub fn wait_for_sma(&self, host: &str, limit: Duration) {
        let t0 = Instant::now();
        loop {
            let mut c = self.client(&tool("smpquery"), Some(host));
            c.args(["-D", "nodeinfo", "0"]);
            let o = run_with_timeout(c, Duration::from_secs(30));
            if o.status.success() {
                return;
            }
            assert!(t0.elapsed() < limit, "{host}'s SMA did not answer in {limit:?}: {}", stderr(&o));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Writes OpenSM's full default configuration (`opensm -c`) to `path` with
/// the values of `edits` replaced, each `key value` line found once; returns
/// `path`, for `opensm -F`.
pub fn opensm_conf(path: &Path, edits: &[(&str, &str)]) -> PathBuf {
    let o = run_with_timeout(
        {
            let mut c = Command::new(tool("opensm"));
            c.arg("-c").arg(path).env_remove("LD_PRELOAD");
            c
        },
        Duration::from_secs(30),
    );
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("opensm -c {} wrote nothing ({e}): {}", path.display(), stderr(&o)));
    let mut found = vec![false; edits.len()];
    let out: Vec<String> = text
        .lines()
        .map(|l| match edits.iter().position(|(k, _)| l.split_whitespace().next() == Some(k)) {
            Some(i) => {
                found[i] = true;
                format!("{} {}", edits[i].0, edits[i].1)
            }
            None => l.to_string(),
        })
        .collect();
    for ((key, _), hit) in edits.iter().zip(found) {
        assert!(hit, "OpenSM's default configuration has no `{key}` line");
    }
    std::fs::write(path, out.join("\n") + "\n").unwrap();
    path.to_path_buf()
}

/// Builds both halves of `transport_support/umad2sim_fix.c` into `dir` and
/// returns the LD_PRELOAD that puts libumad2sim between them (umad2sim
/// 0.10 hands a client only the first 224 bytes of each MAD; see the file).
pub fn umad2sim_fixed_preload(dir: &Path) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/transport_support/umad2sim_fix.c");
    let build = |half: &str| {
        let so = dir.join(format!("umad2sim_fix_{half}.so"));
        let o = Command::new("cc")
            .args(["-O2", "-shared", "-fPIC", &format!("-DFIX_{}", half.to_uppercase()), "-o"])
            .arg(&so)
            .arg(&src)
            .args(["-ldl", "-lpthread"])
            .env_remove("LD_PRELOAD")
            .output()
            .expect("running cc (the ibsim SA tests build a small LD_PRELOAD shim)");
        assert!(o.status.success(), "cc {}: {}", src.display(), String::from_utf8_lossy(&o.stderr));
        so
    };
    let (front, back) = (build("front"), build("back"));
    format!("{} {} {}", front.display(), umad2sim().display(), back.display())
}

impl Ibsim {
    /// `program` attached at `host` with `preload` (from
    /// [`umad2sim_fixed_preload`]) instead of plain libumad2sim.
    pub fn client_with(&self, preload: &str, program: &Path, host: &str) -> Command {
        let mut c = self.client(program, Some(host));
        c.env("LD_PRELOAD", preload);
        c
    }
}

/// Starts the daemon `c` (an SM) with its stdout and stderr in the file
/// `out`; it is killed when the result drops.
pub fn spawn_daemon(mut c: Command, out: &Path) -> KillOnDrop {
    let f = std::fs::File::create(out).unwrap();
    c.stdin(Stdio::null()).stdout(f.try_clone().unwrap()).stderr(f);
    KillOnDrop(c.spawn().unwrap_or_else(|e| panic!("starting {c:?}: {e}")))
}

/// Sends `signal` (`HUP`, `TERM`) to the daemon.
pub fn send_signal(d: &KillOnDrop, signal: &str) {
    let o = Command::new("kill").arg(format!("-{signal}")).arg(d.0.id().to_string()).output().expect("kill");
    assert!(o.status.success(), "kill -{signal} {}: {}", d.0.id(), String::from_utf8_lossy(&o.stderr));
}

/// SIGTERM, then up to `limit` for the exit; true when it exited (it is
/// killed on drop otherwise). An SM stopped this way clears its port's
/// IsSM in ibsim, which a killed one does not.
pub fn terminate(d: &mut KillOnDrop, limit: Duration) -> bool {
    send_signal(d, "TERM");
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Ok(Some(_)) = d.0.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Waits up to `limit` until the daemon's `log` holds `needle` at least
/// `count` times; an error (with the log's tail) if the daemon exits first
/// or time runs out.
pub fn wait_for_log_count(
    d: &mut KillOnDrop,
    log: &Path,
    needle: &str,
    count: usize,
    limit: Duration,
) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.matches(needle).count() >= count {
            return Ok(());
        }
        let tail = || {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        if let Ok(Some(status)) = d.0.try_wait() {
            return Err(format!("the daemon exited ({status}) before `{needle}` x{count}; log tail:\n{}", tail()));
        }
        if t0.elapsed() > limit {
            return Err(format!("no `{needle}` x{count} within {limit:?}; log tail:\n{}", tail()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A small fabric for the multicast and partition tests: three switches in
/// a triangle (a loop for multicast trees to avoid), a doubled sw0-sw1
/// cable, a 20-port switch (MFT port masks past position 0: h4 on port
/// 17), six hosts, one of them (h5) with both ports cabled to different
/// switches. umad2sim clients attach to a host's port 1 only.
pub const TRIANGLE_NET: &str = "\
Switch\t12 \"sw0\"
[1]\t\"h0\"[1]
[2]\t\"h1\"[1]
[3]\t\"sw1\"[3]
[4]\t\"sw1\"[4]
[11]\t\"sw2\"[11]
[12]\t\"h5\"[2]

Switch\t12 \"sw1\"
[1]\t\"h2\"[1]
[2]\t\"h3\"[1]
[3]\t\"sw0\"[3]
[4]\t\"sw0\"[4]
[10]\t\"sw2\"[10]

Switch\t20 \"sw2\"
[2]\t\"h5\"[1]
[10]\t\"sw1\"[10]
[11]\t\"sw0\"[11]
[17]\t\"h4\"[1]

Hca\t1 \"h0\"
[1]\t\"sw0\"[1]

Hca\t1 \"h1\"
[1]\t\"sw0\"[2]

Hca\t1 \"h2\"
[1]\t\"sw1\"[1]

Hca\t1 \"h3\"
[1]\t\"sw1\"[2]

Hca\t1 \"h4\"
[1]\t\"sw2\"[17]

Hca\t2 \"h5\"
[1]\t\"sw2\"[2]
[2]\t\"sw0\"[12]
";
