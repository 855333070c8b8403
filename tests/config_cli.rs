//! `ibsm config` as an operator runs it: --print-default, --check, and
//! --from-opensm on the full default opensm.conf that OpenSM itself writes
//! (`opensm -c`; OpenSM is required, scripts/test.sh installs it).

use std::path::Path;
use std::process::{Command, Output};

use ibsm::config::Config;

fn ibsm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ibsm")).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn print_default_is_the_default_and_the_sample() {
    let out = ibsm(&["config", "--print-default"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(Config::parse(&text, Path::new("print-default")).unwrap(), Config::default());
    let sample = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/ibsm.toml")).unwrap();
    assert_eq!(text, sample, "deploy/ibsm.toml is not the output of --print-default");
    for section in ["[sm]", "[qos]", "[transport]", "[port]", "[metrics]", "[sa]", "[log]", "[perfmgr]"] {
        assert!(text.contains(&format!("\n{section}\n")), "{section} missing");
    }
}

#[test]
fn check_says_ok_or_the_error_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[sm]\npriority = 15\n[log]\nlevel = \"debug\"\n").unwrap();
    let out = ibsm(&["config", "--check", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("{}: OK\n", good.display()));

    let cases = [
        ("unknown.toml", "[sm]\nlmc = 1\nlcm = 2\n", ":3:1: unknown field `lcm`"),
        ("type.toml", "[sm]\nlmc = \"one\"\n", ":2:7: invalid type: string \"one\""),
        ("range.toml", "[sm]\nlmc = 8\n", ": sm.lmc = 8: must be 0-7"),
        ("syntax.toml", "[sm\nlmc = 1\n", ":1:"),
    ];
    for (name, text, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = ibsm(&["config", "--check", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = stderr(&out);
        assert!(err.starts_with(&format!("ibsm config: {}{want}", path.display())), "{name}: {err}");
        assert!(stdout(&out).is_empty());
    }
    let out = ibsm(&["config", "--check", dir.path().join("missing.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read config file"), "{}", stderr(&out));
    // One of the three is required.
    assert!(!ibsm(&["config"]).status.success());
}

/// OpenSM's own full default opensm.conf.
fn opensm_default(dir: &Path) -> String {
    let path = dir.join("opensm.conf");
    let out = Command::new("opensm")
        .arg("-c")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("opensm is needed for this test ({e}); scripts/test.sh installs it"));
    assert!(out.status.success(), "opensm -c: {}", stderr(&out));
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn from_opensm_converts_opensms_own_default_file() {
    let dir = tempfile::tempdir().unwrap();
    let conf = opensm_default(dir.path());
    let path = dir.path().join("opensm.conf");
    let out = ibsm(&["config", "--from-opensm", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let toml = stdout(&out);
    let c = Config::parse(&toml, Path::new("converted.toml")).unwrap();
    // OpenSM's defaults, carried over as they are (opensm.md §6).
    assert_eq!(c.sm.priority, 0);
    assert_eq!(c.sm.sweep_interval_s, 10);
    assert_eq!(c.sm.sminfo_polling_timeout_ms, 10_000);
    assert_eq!(c.sm.polling_retry_number, 4);
    assert_eq!((c.sm.sm_key, c.sa.sa_key, c.sm.m_key), (1, 1, 0));
    assert_eq!(c.sm.subnet_prefix, 0xfe80_0000_0000_0000);
    assert_eq!((c.sm.subnet_timeout, c.sm.packet_life_time, c.sm.max_op_vls), (18, 0x12, 5));
    assert_eq!(c.sm.partition_config_file.as_deref(), Some(Path::new("/etc/opensm/partitions.conf")));
    assert_eq!(c.sm.part_enforce, ibsm::partition::PartEnforce::Both);
    assert_eq!((c.transport.window, c.transport.timeout_ms, c.transport.retries), (4, 200, 3));
    // qos FALSE; its tables are (null) and stay ibsm's (OpenSM's built-in ones).
    assert_eq!(c.qos, Config::default().qos);
    assert_eq!((c.perfmgr.enabled, c.perfmgr.interval_s, c.perfmgr.max_in_flight), (false, 180, 500));
    // routing_engine (null) and guid 0 mean ibsm's defaults.
    assert_eq!(c.sm.routing_engine, Config::default().sm.routing_engine);
    assert_eq!(c.port.guid, None);

    // Every key line of the input is either converted or listed, by line.
    let keys: Vec<(usize, &str)> = conf
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| (i + 1, l.split_whitespace().next().unwrap()))
        .collect();
    assert!(keys.len() > 150, "{} keys", keys.len());
    for (line, key) in &keys {
        let converted = format!("# opensm {key} (line {line})");
        let listed = format!("# line {line}: {key} ");
        assert!(
            toml.contains(&converted) || toml.contains(&listed),
            "{key} (line {line}) neither converted nor listed"
        );
    }
    for reason in ["# line", "console off: no console", "no ibsm equivalent", "(null): unset in OpenSM"] {
        assert!(toml.contains(reason), "{reason} missing");
    }
    let summary = stderr(&out);
    assert!(summary.contains("keys converted") && summary.contains("0 bad lines"), "{summary}");
}

#[test]
fn from_opensm_names_bad_lines_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opensm.conf");
    std::fs::write(&path, "# site config\nsm_priority 15\nlmc\nsweep_interval often\nsubnet_timeout 40\n").unwrap();
    let out = ibsm(&["config", "--from-opensm", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    let p = path.display();
    for want in [
        format!("ibsm config: {p}:3: `lmc` has no value"),
        format!("ibsm config: {p}:4: sweep_interval `often`: not a number"),
        format!("ibsm config: {p}:5: subnet_timeout 40 -> sm.subnet_timeout = 40: must be 0-31"),
    ] {
        assert!(err.contains(&want), "{want} missing from\n{err}");
    }
    // What could be converted still is.
    let c = Config::parse(&stdout(&out), Path::new("x")).unwrap();
    assert_eq!(c.sm.priority, 15);
}
