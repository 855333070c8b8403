//! `ibsm status`: a running SM's `/status`, for a person (aligned
//! `key: value` lines) or, with `--json`, as the SM wrote it.
//!
//! The SM is found at `--url`, or at the `[metrics] listen` address of the
//! config file (`--config`, else `/etc/ibsm/ibsm.toml` when it exists, else
//! the default 127.0.0.1:9464).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args as ClapArgs;

use crate::config::Config;
use crate::http::client;
use crate::runtime::status::{Status, SweepStatus};

/// The config file `ibsm run` is given by the systemd unit.
pub const SYSTEM_CONFIG: &str = "/etc/ibsm/ibsm.toml";

/// Where the SM's HTTP endpoint is; shared with `ibsm dump`.
#[derive(Debug, Clone, ClapArgs)]
pub struct Target {
    /// Base URL of the SM's HTTP endpoint, e.g. http://127.0.0.1:9464
    /// (default: [metrics] listen of the config file).
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Configuration file to take [metrics] listen from (default:
    /// /etc/ibsm/ibsm.toml when it exists).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Seconds to wait for each answer.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub timeout: f64,
}

impl Target {
    /// The base URL to ask, or why there is none.
    pub fn base_url(&self) -> Result<String, String> {
        if let Some(u) = &self.url {
            return Ok(u.clone());
        }
        let (config, from) = match &self.config {
            Some(p) => (Config::load(p).map_err(|e| e.to_string())?, Some(p.as_path())),
            None if Path::new(SYSTEM_CONFIG).exists() => {
                (Config::load(Path::new(SYSTEM_CONFIG)).map_err(|e| e.to_string())?, Some(Path::new(SYSTEM_CONFIG)))
            }
            None => (Config::default(), None),
        };
        match config.metrics.listen.as_deref().filter(|l| !l.is_empty()) {
            Some(listen) => Ok(client::base_url_for_listen(listen)),
            None => Err(format!(
                "{}: [metrics] listen is empty, so the SM serves no HTTP; give --url",
                from.map_or("the default config".to_string(), |p| p.display().to_string())
            )),
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::try_from_secs_f64(self.timeout).unwrap_or(Duration::from_secs(30))
    }
}

#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Print the JSON as the SM sent it.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: Args) -> ExitCode {
    let base = match args.target.base_url() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ibsm status: {e}");
            return ExitCode::from(2);
        }
    };
    let url = client::join(&base, "/status");
    let fetched = match client::get(&url, args.target.timeout()).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ibsm status: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !fetched.status.is_success() {
        eprintln!("ibsm status: {url}: {}: {}", fetched.status, String::from_utf8_lossy(&fetched.body).trim_end());
        return ExitCode::FAILURE;
    }
    if args.json {
        print!("{}", String::from_utf8_lossy(&fetched.body));
        return ExitCode::SUCCESS;
    }
    match serde_json::from_slice::<Status>(&fetched.body) {
        Ok(status) => {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
            print!("{}", render(&status, now));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm status: {url}: not a status answer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `status` for a person; `now_ms` (Unix milliseconds) dates the sweeps.
pub fn render(s: &Status, now_ms: u64) -> String {
    let mut lines: Vec<(&str, String)> = Vec::new();
    let sm = &s.sm;
    let state = match sm.state_code {
        Some(c) => format!("{} ({c})", sm.state),
        None => sm.state.clone(),
    };
    lines.push(("state", state));
    lines.push(("priority", sm.priority.to_string()));
    lines.push(("port", guid_lid(sm.port_guid.as_deref(), sm.port_lid)));
    lines.push(("master", guid_lid(sm.master_guid.as_deref(), sm.master_lid)));
    lines.push(("ready", format!("{}: {}", if s.ready { "yes" } else { "no" }, s.ready_reason)));
    lines.push(("uptime", span(Duration::from_secs(s.uptime_s))));
    lines.push(("version", s.version.clone()));
    lines.push(("routing engine", s.routing_engine.clone().unwrap_or_else(|| "-".into())));
    match &s.fabric {
        Some(f) => {
            lines.push(("nodes", format!("{} ({} switches, {} CAs)", f.nodes, f.switches, f.cas)));
            lines.push(("CA ports", f.ca_ports.to_string()));
            let l = &f.links;
            let mut links = format!("{} active, {} armed, {} init, {} down", l.active, l.armed, l.init, l.down);
            if l.unknown > 0 {
                let _ = write!(links, ", {} unknown", l.unknown);
            }
            lines.push(("links", links));
            lines.push(("LIDs in use", format!("{} (max LID {})", f.lids_in_use, f.max_lid)));
            let mut up = if f.subnet_up { "yes".to_string() } else { "no".to_string() };
            if f.inactive_ports > 0 {
                let _ = write!(up, ", {} cabled ports not ACTIVE", f.inactive_ports);
            }
            if f.quarantined > 0 {
                let _ = write!(up, ", {} nodes left alone", f.quarantined);
            }
            lines.push(("subnet up", up));
        }
        None => lines.push(("fabric", "no heavy sweep yet".into())),
    }
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0).max("recent errors".len()) + 1;
    let mut out = String::new();
    for (k, v) in &lines {
        let _ = writeln!(out, "{:width$} {v}", format!("{k}:"));
    }
    for (name, sweep) in [("heavy sweep", &s.heavy_sweep), ("light sweep", &s.light_sweep)] {
        match sweep {
            Some(w) => {
                let _ = writeln!(out, "{:width$} {}", format!("{name}:"), sweep_line(w, now_ms));
                for p in &w.first_problems {
                    let _ = writeln!(out, "{:width$}   {p}", "");
                }
                if w.problems > w.first_problems.len() as u64 {
                    let more = w.problems - w.first_problems.len() as u64;
                    let _ = writeln!(out, "{:width$}   ... and {more} more", "");
                }
            }
            None => {
                let _ = writeln!(out, "{:width$} none yet", format!("{name}:"));
            }
        }
    }
    let _ = writeln!(out, "{:width$} {} (since start: {})", "recent errors:", s.errors.len(), s.errors_total);
    for e in &s.errors {
        let _ = writeln!(out, "  {}  {}", e.at, e.message);
    }
    out
}

fn guid_lid(guid: Option<&str>, lid: Option<u16>) -> String {
    match (guid, lid) {
        (None, None) => "unknown".into(),
        (g, l) => format!(
            "GUID {}, LID {}",
            g.unwrap_or("unknown"),
            l.map_or_else(|| "unknown".to_string(), |l| l.to_string())
        ),
    }
}

fn sweep_line(w: &SweepStatus, now_ms: u64) -> String {
    let ago = Duration::from_millis(now_ms.saturating_sub(w.at_unix_ms));
    let problems = match w.problems {
        0 => "no problems".to_string(),
        1 => "1 problem".to_string(),
        n => format!("{n} problems"),
    };
    format!("#{} at {} ({} ago), took {:.3} s, {problems}", w.count, w.at, span(ago), w.duration_s)
}

/// `d` as `1d 2h 3m 4s`, leading zero units left out.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    let (days, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    let mut out = String::new();
    for (v, unit) in [(days, "d"), (h, "h"), (m, "m")] {
        if v > 0 || !out.is_empty() {
            let _ = write!(out, "{v}{unit} ");
        }
    }
    let _ = write!(out, "{sec}s");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::status::StatusBoard;

    #[test]
    fn a_person_reads_the_status() {
        let (_, report) = crate::runtime::status::tests::swept();
        let b = StatusBoard::new();
        b.set_election(crate::election::State::Master, 12, Some(crate::Guid(0xabc)), Some(crate::Lid(1)));
        b.set_port(crate::Guid(0xabc), crate::Lid(1));
        b.heavy_sweep(report, "minhop");
        b.light_sweep(Duration::from_millis(3), ["switch 0x1 reports a port state change"]);
        b.record_error("LID space exhausted");
        b.ready("master: first heavy sweep done");
        let mut s = b.status();
        s.uptime_s = 3723;
        let now = s.heavy_sweep.as_ref().unwrap().at_unix_ms + 12_000;
        let text = render(&s, now);
        let f = s.fabric.unwrap();
        let line = |key: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("{key}:")))
                .unwrap_or_else(|| panic!("{key} in\n{text}"))
                .split_once(": ")
                .unwrap()
                .1
                .trim()
                .to_string()
        };
        assert_eq!(line("state"), "MASTER (3)");
        assert_eq!(line("priority"), "12");
        assert_eq!(line("master"), "GUID 0x0000000000000abc, LID 1");
        assert_eq!(line("ready"), "yes: master: first heavy sweep done");
        assert_eq!(line("uptime"), "1h 2m 3s");
        assert_eq!(line("routing engine"), "minhop");
        assert_eq!(line("nodes"), format!("{} ({} switches, {} CAs)", f.nodes, f.switches, f.cas));
        assert_eq!(line("links"), format!("{} active, 0 armed, 0 init, 0 down", f.links.active));
        assert!(line("heavy sweep").starts_with("#1 at "), "{text}");
        assert!(line("heavy sweep").contains("(12s ago)"), "{text}");
        assert!(line("heavy sweep").ends_with("no problems"), "{text}");
        assert!(line("light sweep").ends_with("1 problem"), "{text}");
        assert!(text.contains("   switch 0x1 reports a port state change\n"), "{text}");
        assert_eq!(line("recent errors"), "1 (since start: 1)");
        assert!(text.trim_end().ends_with("LID space exhausted"), "{text}");
        // Values line up in one column.
        let columns: std::collections::HashSet<usize> = text
            .lines()
            .filter(|l| !l.starts_with(' '))
            .map(|l| {
                let colon = l.find(':').unwrap();
                let rest = &l[colon + 1..];
                colon + 1 + rest.len() - rest.trim_start().len()
            })
            .collect();
        assert_eq!(columns.len(), 1, "{text}");
    }

    #[test]
    fn a_fresh_sm_and_spans() {
        let s = StatusBoard::new().status();
        let text = render(&s, 0);
        assert!(text.contains("state:"), "{text}");
        assert!(text.contains("no heavy sweep yet"), "{text}");
        assert!(text.contains("none yet"), "{text}");
        assert_eq!(span(Duration::from_secs(0)), "0s");
        assert_eq!(span(Duration::from_secs(86_400 + 5)), "1d 0h 0m 5s");
    }

    #[test]
    fn the_url_comes_from_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ibsm.toml");
        std::fs::write(&path, "[metrics]\nlisten = \"0.0.0.0:9999\"\n").unwrap();
        let t = Target { url: None, config: Some(path.clone()), timeout: 1.0 };
        assert_eq!(t.base_url().unwrap(), "http://127.0.0.1:9999");
        std::fs::write(&path, "[metrics]\nlisten = \"\"\n").unwrap();
        let e = t.base_url().unwrap_err();
        assert!(e.contains("listen is empty") && e.contains("ibsm.toml"), "{e}");
        let t = Target { url: Some("http://h:1".into()), config: Some(path), timeout: 1.0 };
        assert_eq!(t.base_url().unwrap(), "http://h:1");
    }
}
