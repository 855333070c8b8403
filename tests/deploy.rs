//! deploy/: the systemd units pass `systemd-analyze verify`, the Prometheus
//! config and rules pass promtool (check config, check rules, test rules),
//! and every metric the rules, their tests and the Grafana dashboard name
//! is one ibsm exports. The tools are required: a missing one fails the
//! test (scripts/test.sh installs them).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(deploy().join(name)).unwrap_or_else(|e| panic!("deploy/{name}: {e}"))
}

fn tool(name: &str, args: &[&str], dir: &Path) -> Output {
    Command::new(name).args(args).current_dir(dir).output().unwrap_or_else(|e| {
        panic!("{name} is needed for this test ({e}); scripts/test.sh installs it (packages prometheus, systemd)")
    })
}

fn show(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Every series name ibsm exports: the registry's families (histograms as
/// their `_bucket`, `_sum` and `_count`) and the performance manager's
/// per-port and self families, registered as the runtime does.
fn exported() -> BTreeSet<String> {
    let m = ibsm::runtime::metrics::Metrics::new();
    let configs = tokio::sync::watch::channel(ibsm::perfmgr::PerfMgrConfig::default()).1;
    ibsm::runtime::metrics::perfmgr::register(&m, &ibsm::perfmgr::core::PerfShared::new(), configs);
    let names: BTreeSet<String> = m.family_names().into_iter().collect();
    // The families the alerts lean on are there, so an empty list cannot pass.
    for must in ["ibsm_sm_state", "ibsm_links", "ibsm_sweep_failures_total", "ibsm_port_symbol_errors_total"] {
        assert!(names.contains(must), "{must} not exported: {names:?}");
    }
    names
}

/// `ibsm_...` names in a text (PromQL, YAML around it).
fn ibsm_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    let mut i = 0;
    while let Some(at) = text[i..].find("ibsm_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len() && word(bytes[end]) {
            end += 1;
        }
        if start == 0 || !word(bytes[start - 1]) {
            out.insert(text[start..end].to_string());
        }
        i = end.max(start + 1);
    }
    out
}

fn check_names(what: &str, used: &BTreeSet<String>, exported: &BTreeSet<String>) {
    assert!(!used.is_empty(), "{what} names no ibsm metric");
    let unknown: Vec<&String> = used.difference(exported).collect();
    assert!(unknown.is_empty(), "{what} uses metrics ibsm does not export: {unknown:?}");
}

/// The units as they would be installed, with the binary at its built path.
fn installed_units(dir: &Path) -> Vec<PathBuf> {
    let bin = env!("CARGO_BIN_EXE_ibsm");
    ["ibsm.service", "ibsm-standby.service"]
        .iter()
        .map(|name| {
            let text = read(name).replace("/usr/sbin/ibsm", bin);
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect()
}

#[test]
fn units_verify() {
    let dir = tempfile::tempdir().unwrap();
    let units = installed_units(dir.path());
    let args: Vec<&str> = std::iter::once("verify").chain(units.iter().map(|p| p.to_str().unwrap())).collect();
    let out = tool("systemd-analyze", &args, dir.path());
    let text = show(&out);
    assert!(out.status.success(), "systemd-analyze verify failed:\n{text}");
    // Unknown keys and bad values are only warnings; none is allowed.
    for line in text.lines() {
        assert!(!line.contains("ibsm.service") && !line.contains("ibsm-standby.service"), "{line}");
    }
    for name in ["ibsm.service", "ibsm-standby.service"] {
        let unit = read(name);
        for must in [
            "Type=notify",
            "NotifyAccess=main",
            "WatchdogSec=",
            "Restart=always",
            "ExecReload=/bin/kill -HUP $MAINPID",
            "ExecReload=/usr/sbin/ibsm config --check /etc/ibsm/ibsm.toml",
            "ExecStartPre=/usr/sbin/ibsm config --check /etc/ibsm/ibsm.toml",
            "DevicePolicy=closed",
            "DeviceAllow=char-infiniband_mad rw",
            "ProtectSystem=strict",
            "NoNewPrivileges=yes",
            "StateDirectory=ibsm",
            "--cache-dir /var/lib/ibsm",
        ] {
            assert!(unit.contains(must), "{name} lacks {must}");
        }
        assert!(!unit.contains("Restart=on-failure"), "{name}: SIGHUP and exit 0 count as clean");
    }
    assert!(read("ibsm.service").contains("--priority 14") && read("ibsm-standby.service").contains("--priority 1\n"));
}

#[test]
fn unit_command_lines_are_ones_ibsm_takes() {
    let bin = env!("CARGO_BIN_EXE_ibsm");
    let help = Command::new(bin).args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in ["--config", "--cache-dir", "--priority"] {
        assert!(help.contains(flag), "ibsm run has no {flag}");
    }
    // The sample config passes the units' ExecStartPre check.
    let out = Command::new(bin).args(["config", "--check"]).arg(deploy().join("ibsm.toml")).output().unwrap();
    assert!(out.status.success(), "{}", show(&out));
}

/// A copy of the Prometheus files in a temp dir (rule_files are relative).
fn prometheus_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["prometheus.yml", "alerts.yml", "alerts.test.yml"] {
        std::fs::write(dir.path().join(name), read(name)).unwrap();
    }
    dir
}

#[test]
fn promtool_checks_config_rules_and_rule_tests() {
    let dir = prometheus_dir();
    for args in [
        &["check", "config", "prometheus.yml"][..],
        &["check", "rules", "alerts.yml"],
        &["test", "rules", "alerts.test.yml"],
    ] {
        let out = tool("promtool", args, dir.path());
        assert!(out.status.success(), "promtool {}:\n{}", args.join(" "), show(&out));
    }
}

#[test]
fn every_alert_has_a_test_and_uses_exported_metrics() {
    let exported = exported();
    let rules = read("alerts.yml");
    let tests = read("alerts.test.yml");
    check_names("alerts.yml", &ibsm_names(&rules), &exported);
    check_names("alerts.test.yml", &ibsm_names(&tests), &exported);
    let alerts: Vec<&str> = rules.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")).collect();
    assert!(alerts.len() >= 15, "{alerts:?}");
    for alert in alerts {
        // Each alert is seen firing in at least one test case.
        // The text from one `alertname:` to the next holds that case's
        // expected alerts; `exp_labels` there means it is expected to fire.
        let fired = tests.split("alertname: ").skip(1).any(|case| {
            let name: String = case.chars().take_while(|c| c.is_alphanumeric()).collect();
            name == alert && case.contains("exp_labels")
        });
        assert!(fired, "no test in alerts.test.yml sees {alert} fire");
    }
}

#[test]
fn dashboard_queries_parse_and_use_exported_metrics() {
    let exported = exported();
    let dash: serde_json::Value = serde_json::from_str(&read("grafana-dashboard.json")).expect("dashboard JSON");
    let mut exprs = Vec::new();
    for panel in dash["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_else(|| panic!("a target of {} has no expr", panel["title"]));
            exprs.push(expr.to_string());
        }
    }
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    for expr in &exprs {
        check_names(&format!("dashboard query `{expr}`"), &ibsm_names(expr), &exported);
        // `ibsm_sa_queries_total{result="records"}` counts records, not
        // queries: a query of the family that does not pick its results
        // adds the two.
        if expr.contains("ibsm_sa_queries_total") {
            assert!(expr.contains("ibsm_sa_queries_total{result"), "`{expr}` sums records with queries");
        }
    }
    // promtool parses PromQL as recording rules.
    let dir = tempfile::tempdir().unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in exprs.iter().enumerate() {
        rules.push_str(&format!(
            "      - record: dashboard_query_{i}\n        expr: {}\n",
            serde_json::to_string(expr).unwrap()
        ));
    }
    std::fs::write(dir.path().join("dashboard.yml"), rules).unwrap();
    let out = tool("promtool", &["check", "rules", "dashboard.yml"], dir.path());
    assert!(out.status.success(), "a dashboard query does not parse:\n{}", show(&out));
}

#[test]
fn name_extraction() {
    let names =
        ibsm_names("rate(ibsm_a_total[5m]) / xibsm_b + ibsm_c{kind=\"ibsm\"} and on(instance) ibsm_sm_state == 3");
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["ibsm_a_total", "ibsm_c", "ibsm_sm_state"]);
    let exported = exported();
    assert!(std::panic::catch_unwind(|| check_names("x", &ibsm_names("ibsm_no_such_metric"), &exported)).is_err());
}
