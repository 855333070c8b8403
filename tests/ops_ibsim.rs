//! ibsm as a service on ibsim, watched the way an operator watches it: the
//! test scrapes `/metrics`, `/status`, `/healthz` and `/readyz` and checks
//! the figures against the fabric as the diags see it (`ibnetdiscover`),
//! then changes the fabric under the SM with ibsim's console and checks the
//! figures follow: sweep counters rising, a port's counters after
//! `PerformanceSet`, a link taken down with `Unlink` in the link gauges and
//! in the dashboard's links query.

#[path = "transport_support/ibsim.rs"]
mod ibsim;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ibsim::{generated, run_with_timeout, tool, Ibsim, KillOnDrop};
use ibsm::topology::Topology;

const SPEC: &str = "random:switches=4,links=6,hosts=6,seed=7";

/// One HTTP/1.0 GET: status code and body.
fn get(port: u16, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no header end in {text:?}"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line {head:?}"))?;
    Ok((code, body.to_string()))
}

/// The value of the series `name` whose labels include every `labels`
/// pair, summed over the series that match (a `sum by ()`).
fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        if n != name || !labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\""))) {
            continue;
        }
        *found.get_or_insert(0.0) += value.parse::<f64>().ok()?;
    }
    found
}

/// Polls `what` until it returns `Some`, for at most `limit`.
fn wait_until<T>(limit: Duration, mut what: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(v) = what() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

fn metrics(port: u16) -> String {
    let (code, body) = get(port, "/metrics").expect("GET /metrics");
    assert_eq!(code, 200, "/metrics: {body}");
    body
}

fn status(port: u16) -> serde_json::Value {
    let (code, body) = get(port, "/status").expect("GET /status");
    assert_eq!(code, 200, "/status: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("/status is not JSON ({e}): {body}"))
}

/// The selector of every dashboard query on `metric` (the text inside
/// `metric{...}`, or empty for a bare name).
fn dashboard_selectors(metric: &str) -> Vec<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/grafana-dashboard.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(e)) = m.get("expr") {
                    out.push(e.clone());
                }
                m.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&json, &mut exprs);
    let mut selectors = Vec::new();
    for e in exprs {
        let mut rest = e.as_str();
        while let Some(at) = rest.find(metric) {
            let after = &rest[at + metric.len()..];
            let boundary = after.chars().next().is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            if boundary {
                selectors
                    .push(after.strip_prefix('{').and_then(|a| a.split_once('}')).map_or("", |(s, _)| s).to_string());
            }
            rest = after;
        }
    }
    selectors
}

/// Evaluates a selector of `=`/`!=` matchers on one metric, summed.
fn eval_selector(metrics: &str, name: &str, selector: &str) -> f64 {
    let matchers: Vec<(String, bool, String)> = selector
        .split(',')
        .filter(|m| !m.trim().is_empty())
        .map(|m| {
            let (k, neg, v) = match m.split_once("!=") {
                Some((k, v)) => (k, true, v),
                None => {
                    let (k, v) = m.split_once('=').unwrap_or_else(|| panic!("matcher {m:?} in {selector:?}"));
                    (k, false, v)
                }
            };
            assert!(!v.starts_with('~'), "regex matchers are not evaluated here: {selector}");
            (k.trim().to_string(), neg, v.trim().trim_matches('"').to_string())
        })
        .collect();
    let mut sum = 0.0;
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        if n != name {
            continue;
        }
        let ok = matchers.iter().all(|(k, neg, v)| rest.contains(&format!("{k}=\"{v}\"")) != *neg);
        if ok {
            sum += value.parse::<f64>().unwrap_or(0.0);
        }
    }
    sum
}

#[test]
fn metrics_and_status_follow_the_fabric_on_ibsim() {
    let dir = tempfile::tempdir().unwrap();
    let (net, flags, host) = generated(SPEC, dir.path());
    let topo = Topology::from_spec_or_file(SPEC).unwrap();
    let switches = topo.switches().count();
    let hosts: Vec<_> = topo.hosts().collect();
    let links = topo.links.len();
    let sim = Ibsim::start_with(&net, &flags);
    sim.wait_for_sma(&host, Duration::from_secs(30));

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("ibsm.toml");
    std::fs::write(
        &config,
        format!(
            "[sm]\nsweep_interval_s = 1\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n\n[perfmgr]\nenabled = true\ninterval_s = 1\n"
        ),
    )
    .unwrap();
    let log = dir.path().join("ibsm.log");
    let mut c = sim.client(Path::new(env!("CARGO_BIN_EXE_ibsm")), Some(&host));
    c.arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--cache-dir")
        .arg(dir.path().join("cache"))
        .arg("--log-file")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("ibsm.stderr")).unwrap());
    let mut daemon = KillOnDrop(c.spawn().expect("starting ibsm run"));
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let stderr = || std::fs::read_to_string(dir.path().join("ibsm.stderr")).unwrap_or_default();
    assert!(
        ibsim::wait_for_log(&log, "SUBNET UP", Duration::from_secs(60)),
        "no SUBNET UP: {}\n{}",
        stderr(),
        log_text()
    );

    // Ready and healthy; anything else is 404.
    let ready = wait_until(Duration::from_secs(10), || get(port, "/readyz").ok().filter(|(c, _)| *c == 200));
    assert!(ready.is_some(), "/readyz never 200: {:?}", get(port, "/readyz"));
    assert_eq!(get(port, "/healthz").unwrap().0, 200);
    assert_eq!(get(port, "/no-such-page").unwrap().0, 404);

    // The diags' view of the fabric.
    let mut d = sim.client(&tool("ibnetdiscover"), Some(&host));
    d.arg("-p");
    let o = run_with_timeout(d, Duration::from_secs(60));
    assert!(o.status.success(), "ibnetdiscover failed");
    let ports = String::from_utf8_lossy(&o.stdout).into_owned();
    let ca_ports = ports.lines().filter(|l| l.starts_with("CA")).count();
    let sw_lines: std::collections::HashSet<&str> =
        ports.lines().filter(|l| l.starts_with("SW")).filter_map(|l| l.split_whitespace().nth(3)).collect();
    assert_eq!(sw_lines.len(), switches, "ibnetdiscover sees every switch");
    assert_eq!(ca_ports, hosts.len(), "ibnetdiscover sees every CA port");

    // /status against it.
    let s = status(port);
    assert_eq!(s["sm"]["state"], "MASTER", "{s:#}");
    assert_eq!(s["fabric"]["switches"], switches as u64, "{s:#}");
    assert_eq!(s["fabric"]["nodes"], (switches + hosts.len()) as u64, "{s:#}");
    assert_eq!(s["fabric"]["ca_ports"], ca_ports as u64, "{s:#}");
    assert_eq!(s["fabric"]["links"]["active"], links as u64, "{s:#}");
    assert!(s["routing_engine"].as_str().is_some_and(|e| !e.is_empty()), "{s:#}");

    // /metrics against it.
    let m = metrics(port);
    assert_eq!(sample(&m, "ibsm_nodes", &[("kind", "switch")]), Some(switches as f64));
    assert_eq!(sample(&m, "ibsm_nodes", &[("kind", "ca")]), Some(hosts.len() as f64));
    assert_eq!(sample(&m, "ibsm_links", &[("state", "active")]), Some(links as f64));
    assert_eq!(sample(&m, "ibsm_subnet_up", &[]), Some(1.0));
    assert_eq!(sample(&m, "ibsm_sm_state", &[]), Some(3.0));

    // Light sweeps every second: the counter rises.
    let light = |m: &str| sample(m, "ibsm_sweeps_total", &[("kind", "light")]).unwrap_or(0.0);
    let before = light(&m);
    let risen = wait_until(Duration::from_secs(10), || Some(light(&metrics(port))).filter(|&n| n >= before + 2.0));
    assert!(risen.is_some(), "light sweeps did not rise from {before}");

    // A host port's symbol errors, set through ibsim, reach its counter.
    let h = topo.node(hosts[1]);
    let desc = h.name.clone();
    let errors = |m: &str| sample(m, "ibsm_port_symbol_errors_total", &[("node_desc", &desc), ("port", "1")]);
    // By default (`port_series = "errors"`) a port has series only once it
    // has errors; the fabric-wide sum is always there.
    let fabric = |m: &str| sample(m, "ibsm_fabric_port_symbol_errors_total", &[]);
    let cycled = wait_until(Duration::from_secs(15), || {
        let m = metrics(port);
        sample(&m, "ibsm_perfmgr_cycles_total", &[]).filter(|&c| c >= 1.0).and(fabric(&m))
    });
    let fabric_base = cycled.unwrap_or_else(|| panic!("no perfmgr cycle or fabric sum:\n{}", metrics(port)));
    let base = errors(&metrics(port)).unwrap_or(0.0);
    sim.console(&format!("PerformanceSet \"{desc}\"[1] PortCounters.SymbolErrorCounter=9"));
    let after = wait_until(Duration::from_secs(15), || errors(&metrics(port)).filter(|&v| v >= base + 9.0));
    assert_eq!(after, Some(base + 9.0), "{desc} port 1 symbol errors did not rise by 9 from {base}");
    let m = metrics(port);
    assert!(fabric(&m).unwrap() >= fabric_base + 9.0, "the fabric sum did not rise by 9 from {fabric_base}");
    assert!(sample(&m, "ibsm_perfmgr_ports_with_errors", &[]).unwrap_or(0.0) >= 1.0, "{m}");
    assert!(!m.contains("ibsm_port_xmit_data_bytes_total{"), "data counters per port only when asked for");

    // A host's cable pulled: the link gauges and the dashboard follow.
    let selectors = dashboard_selectors("ibsm_links");
    assert!(!selectors.is_empty(), "the dashboard has no query on ibsm_links");
    let m = metrics(port);
    let before: Vec<f64> = selectors.iter().map(|s| eval_selector(&m, "ibsm_links", s)).collect();
    let down = |m: &str| sample(m, "ibsm_ports", &[("kind", "switch"), ("state", "down")]).unwrap_or(0.0);
    let down_before = down(&m);
    let far = hosts[2];
    let far_name = topo.node(far).name.clone();
    sim.console(&format!("Unlink \"{far_name}\"[1]"));
    let gone = wait_until(Duration::from_secs(20), || {
        let m = metrics(port);
        (sample(&m, "ibsm_links", &[("state", "active")]) == Some((links - 1) as f64)).then_some(m)
    });
    let m = gone.unwrap_or_else(|| panic!("active links never {} after Unlink:\n{}", links - 1, metrics(port)));
    let s = status(port);
    assert_eq!(s["fabric"]["links"]["active"], (links - 1) as u64, "{s:#}");
    let after: Vec<f64> = selectors.iter().map(|s| eval_selector(&m, "ibsm_links", s)).collect();
    assert_ne!(before, after, "no dashboard query on ibsm_links ({selectors:?}) changed: {before:?}");
    // The switch end of the pulled cable is a Down port now.
    assert_eq!(down(&m), down_before + 1.0, "switch ports down");
    println!(
        "{switches} switches, {} CA ports, {links} links; {desc} port 1 symbol errors {base} -> {base}+9; dashboard ibsm_links queries {selectors:?}: {before:?} -> {after:?}",
        hosts.len()
    );
    assert!(log_text().contains("sweep done"), "no sweep summary line logged");

    // SIGHUP as `systemctl reload` sends it: a broken file changes nothing
    // and the SM keeps serving; a good one applies its live keys and names
    // the one that needs a restart.
    let good = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, good.replace("[sm]\n", "[sm]\nsweep_intervall_s = 3\n")).unwrap();
    ibsim::send_signal(&daemon, "HUP");
    assert!(ibsim::wait_for_log(&log, "configuration refused", Duration::from_secs(10)), "{}", log_text());
    assert!(log_text().contains("sweep_intervall_s"), "the refusal names the bad key: {}", log_text());
    assert_eq!(get(port, "/healthz").unwrap().0, 200);
    let refused = status(port);
    assert!(refused["errors"].to_string().contains("configuration reload refused"), "{refused:#}");
    std::fs::write(
        &config,
        good.replace("sweep_interval_s = 1", "sweep_interval_s = 2") + "\n[transport]\nwindow = 8\n",
    )
    .unwrap();
    ibsim::send_signal(&daemon, "HUP");
    assert!(ibsim::wait_for_log(&log, "configuration reloaded", Duration::from_secs(10)), "{}", log_text());
    let line = log_text().lines().rev().find(|l| l.contains("configuration reloaded")).unwrap().to_string();
    assert!(line.contains("applied sm.sweep_interval_s 1 -> 2"), "{line}");
    assert!(line.contains("need a restart, running values kept: transport.window"), "{line}");
    assert_eq!(get(port, "/readyz").unwrap().0, 200);
    // SIGTERM ends the service cleanly.
    assert!(ibsim::terminate(&mut daemon, Duration::from_secs(10)), "ibsm did not stop on SIGTERM");
    assert!(daemon.0.try_wait().unwrap().is_some_and(|s| s.success()), "exit status after SIGTERM");
}
