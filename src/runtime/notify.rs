//! systemd's readiness protocol (sd_notify(3)) without libsystemd: one
//! datagram of `KEY=VALUE` lines to the unix socket named by
//! `NOTIFY_SOCKET`, which is a path or, starting with `@`, a name in the
//! abstract namespace. Not under systemd (no `NOTIFY_SOCKET`), every call
//! is a no-op, so the runtime calls it unconditionally.
//!
//! With `Type=notify` the unit is started once `READY=1` arrives (the SM
//! sends it after its first sweep or on reaching standby); with
//! `WatchdogSec=` systemd kills and restarts it when `WATCHDOG=1` stops
//! coming (the owner task sends it, so a wedged SM is noticed).

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

/// Where the notifications go.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Path(PathBuf),
    /// The name without the leading `@`.
    Abstract(Vec<u8>),
}

/// Sends notifications to systemd, or nothing when not under it.
#[derive(Debug)]
pub struct Notifier {
    socket: Option<(UnixDatagram, Target)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from the
    /// environment.
    pub fn from_env() -> Notifier {
        let var = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
        Self::from_vars(var("NOTIFY_SOCKET"), var("WATCHDOG_USEC"), var("WATCHDOG_PID"), std::process::id())
    }

    /// A notifier that sends nothing.
    pub fn disabled() -> Notifier {
        Notifier { socket: None, watchdog: None }
    }

    fn from_vars(socket: Option<String>, usec: Option<String>, pid: Option<String>, our_pid: u32) -> Notifier {
        let target = socket.filter(|s| !s.is_empty()).and_then(|s| match s.strip_prefix('@') {
            Some(name) => Some(Target::Abstract(name.as_bytes().to_vec())),
            None if s.starts_with('/') => Some(Target::Path(PathBuf::from(s))),
            // sd_notify accepts nothing else (vsock addresses aside).
            None => None,
        });
        let socket = target.and_then(|t| UnixDatagram::unbound().ok().map(|s| (s, t)));
        // WATCHDOG_PID names the process meant; a child that inherited the
        // environment must not feed its parent's watchdog.
        let for_us = match pid {
            Some(p) => p.trim().parse::<u32>() == Ok(our_pid),
            None => true,
        };
        let watchdog =
            usec.and_then(|u| u.trim().parse::<u64>().ok()).filter(|&u| u > 0 && for_us).map(Duration::from_micros);
        Notifier { socket, watchdog }
    }

    /// Whether `NOTIFY_SOCKET` named a socket.
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// The service is up: the first sweep has finished, or standby reached.
    pub fn ready(&self) -> io::Result<()> {
        self.send("READY=1")
    }

    /// Shutting down.
    pub fn stopping(&self) -> io::Result<()> {
        self.send("STOPPING=1")
    }

    /// Reloading the configuration (SIGHUP); send [`Notifier::ready`]
    /// when done, which systemd needs to leave the reloading state.
    ///
    /// With `Type=notify-reload` systemd (253 and later) tells one reload
    /// cycle from another by `MONOTONIC_USEC`, the `CLOCK_MONOTONIC` time
    /// the reload started: without it, the reload is not acknowledged.
    pub fn reloading(&self) -> io::Result<()> {
        self.send(&reloading_message(monotonic_usec()))
    }

    /// One line for `systemctl status`.
    pub fn status(&self, text: &str) -> io::Result<()> {
        // A newline would start another assignment.
        let line: String = text.chars().map(|c| if c == '\n' { ' ' } else { c }).collect();
        self.send(&format!("STATUS={line}"))
    }

    /// Feeds the watchdog. A no-op unless systemd asked for it.
    pub fn watchdog(&self) -> io::Result<()> {
        if self.watchdog.is_none() {
            return Ok(());
        }
        self.send("WATCHDOG=1")
    }

    /// Asks systemd for more time to start (a first sweep of a large
    /// fabric can outlast `TimeoutStartSec=`).
    pub fn extend_timeout(&self, by: Duration) -> io::Result<()> {
        self.send(&format!("EXTEND_TIMEOUT_USEC={}", by.as_micros()))
    }

    /// How often to call [`Notifier::watchdog`]: half of `WATCHDOG_USEC`,
    /// as sd_watchdog_enabled(3) advises; `None` when there is no watchdog.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|d| d / 2)
    }

    /// The timeout systemd enforces (`WatchdogSec=`).
    pub fn watchdog_timeout(&self) -> Option<Duration> {
        self.watchdog
    }

    fn send(&self, message: &str) -> io::Result<()> {
        let Some((socket, target)) = &self.socket else { return Ok(()) };
        let sent = match target {
            Target::Path(path) => socket.send_to(message.as_bytes(), path)?,
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(message.as_bytes(), &addr)?
            }
        };
        if sent == message.len() {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::WriteZero, "short notify datagram"))
        }
    }
}

/// The datagram announcing a reload that started at `usec` on
/// `CLOCK_MONOTONIC`.
fn reloading_message(usec: u64) -> String {
    format!("RELOADING=1\nMONOTONIC_USEC={usec}")
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares
/// `MONOTONIC_USEC` against. std's `Instant` reads the same clock but hides
/// its value, hence the one libc call outside the umad binding.
#[allow(unsafe_code)]
fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    (ts.tv_sec as u64).saturating_mul(1_000_000).saturating_add(ts.tv_nsec as u64 / 1_000)
}

#[cfg(test)]
mod tests {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;

    use super::*;

    fn recv(sock: &UnixDatagram) -> String {
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn path_socket_gets_every_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::from_vars(Some(path.display().to_string()), Some("30000000".into()), None, 7);
        assert!(n.enabled());
        n.ready().unwrap();
        assert_eq!(recv(&sock), "READY=1");
        n.status("3 nodes\nup").unwrap();
        assert_eq!(recv(&sock), "STATUS=3 nodes up");
        n.watchdog().unwrap();
        assert_eq!(recv(&sock), "WATCHDOG=1");
        let before = monotonic_usec();
        n.reloading().unwrap();
        let after = monotonic_usec();
        let reload = recv(&sock);
        let usec = reload
            .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
            .unwrap_or_else(|| panic!("not a reload with its time: {reload:?}"));
        let usec: u64 = usec.parse().unwrap_or_else(|_| panic!("MONOTONIC_USEC not a number: {reload:?}"));
        assert!((before..=after).contains(&usec), "{before} <= {usec} <= {after}");
        n.extend_timeout(Duration::from_secs(2)).unwrap();
        assert_eq!(recv(&sock), "EXTEND_TIMEOUT_USEC=2000000");
        n.stopping().unwrap();
        assert_eq!(recv(&sock), "STOPPING=1");
        assert_eq!(n.watchdog_timeout(), Some(Duration::from_secs(30)));
        assert_eq!(n.watchdog_interval(), Some(Duration::from_secs(15)));
    }

    #[test]
    fn the_reload_datagram_carries_the_monotonic_time() {
        assert_eq!(reloading_message(1_234_567), "RELOADING=1\nMONOTONIC_USEC=1234567");
        // The clock is CLOCK_MONOTONIC (what `Instant` reads on Linux), in
        // microseconds: it moves with a sleep by about as much.
        let a = monotonic_usec();
        std::thread::sleep(Duration::from_millis(20));
        let b = monotonic_usec();
        assert!((20_000..2_000_000).contains(&(b - a)), "{a} then {b}");
    }

    #[test]
    fn abstract_socket() {
        let name = format!("ibsm-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).unwrap();
        let n = Notifier::from_vars(Some(format!("@{name}")), None, None, 7);
        n.ready().unwrap();
        assert_eq!(recv(&sock), "READY=1");
        // No WATCHDOG_USEC: the watchdog is off and feeding it sends nothing.
        assert_eq!(n.watchdog_interval(), None);
        n.watchdog().unwrap();
        n.stopping().unwrap();
        assert_eq!(recv(&sock), "STOPPING=1", "no WATCHDOG=1 in between");
    }

    #[test]
    fn the_watchdog_is_for_the_named_pid_only() {
        let n = Notifier::from_vars(None, Some("1000000".into()), Some("42".into()), 42);
        assert_eq!(n.watchdog_interval(), Some(Duration::from_millis(500)));
        let n = Notifier::from_vars(None, Some("1000000".into()), Some("41".into()), 42);
        assert_eq!(n.watchdog_interval(), None);
        let n = Notifier::from_vars(None, Some("0".into()), None, 42);
        assert_eq!(n.watchdog_interval(), None);
        let n = Notifier::from_vars(None, Some("soon".into()), None, 42);
        assert_eq!(n.watchdog_interval(), None);
    }

    #[test]
    fn not_under_systemd_everything_is_a_no_op() {
        for socket in [None, Some(String::new()), Some("relative/path".to_string())] {
            let n = Notifier::from_vars(socket, None, None, 1);
            assert!(!n.enabled());
            n.ready().unwrap();
            n.watchdog().unwrap();
            n.status("x").unwrap();
        }
        assert!(!Notifier::disabled().enabled());
    }

    #[test]
    fn a_socket_that_went_away_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let n = Notifier::from_vars(Some(dir.path().join("gone").display().to_string()), None, None, 1);
        assert!(n.ready().is_err());
    }
}
