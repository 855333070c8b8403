//! `ibsm config --from-opensm opensm.conf`: OpenSM's keys that mean the
//! same thing in ibsm, converted; every other key listed with the reason.
//!
//! opensm.conf is one `key value` per line, `#` starting a comment line
//! (the format `opensm -c FILE` writes; osm_subnet.c parses numbers with
//! strtoul base 0, so `0x12` is hex and `010` octal). Each converted
//! value is checked by parsing it as ibsm would, so a value ibsm rejects
//! (sm_priority 16) is reported with its line, not written out.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Config, ConfigError};

/// How an OpenSM value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An unsigned number, strtoul base 0.
    Int,
    /// A signed number where -1 means "not set" (qos_high_limit).
    IntOrUnset,
    /// TRUE / FALSE.
    Bool,
    /// A 64-bit key or prefix, written as a "0x..." string.
    Hex,
    /// A port GUID; 0 means "the first active port", ibsm's default.
    Guid,
    /// A string (a path, a mode, a QoS table).
    Text,
    /// A comma-separated routing engine chain.
    Engines,
}

/// OpenSM key -> ibsm `section.key`.
const MAP: &[(&str, &str, Kind)] = &[
    ("sm_priority", "sm.priority", Kind::Int),
    ("sweep_interval", "sm.sweep_interval_s", Kind::Int),
    ("sminfo_polling_timeout", "sm.sminfo_polling_timeout_ms", Kind::Int),
    ("polling_retry_number", "sm.polling_retry_number", Kind::Int),
    ("sm_key", "sm.sm_key", Kind::Hex),
    ("lmc", "sm.lmc", Kind::Int),
    ("lmc_esp0", "sm.lmc_esp0", Kind::Bool),
    ("reassign_lids", "sm.reassign_lids", Kind::Bool),
    ("subnet_prefix", "sm.subnet_prefix", Kind::Hex),
    ("m_key", "sm.m_key", Kind::Hex),
    ("m_key_protection_level", "sm.m_key_protection_level", Kind::Int),
    ("m_key_lease_period", "sm.m_key_lease_period", Kind::Int),
    ("subnet_timeout", "sm.subnet_timeout", Kind::Int),
    ("packet_life_time", "sm.packet_life_time", Kind::Int),
    ("max_op_vls", "sm.max_op_vls", Kind::Int),
    ("sm_sl", "sm.sm_sl", Kind::Int),
    // An opensm.conf without routing_engine (or with `(null)`) converts to
    // nothing, so ibsm's default applies: `auto`, not OpenSM's minhop. The
    // operator chose no engine, and auto takes ftree or dor where they
    // apply and a single-VL engine elsewhere, free of the credit loops
    // minhop leaves on tori and irregular fabrics. An engine the file does
    // name is converted and obeyed as named.
    ("routing_engine", "sm.routing_engine", Kind::Engines),
    ("partition_config_file", "sm.partition_config_file", Kind::Text),
    ("part_enforce", "sm.part_enforce", Kind::Text),
    ("allow_both_pkeys", "sm.allow_both_pkeys", Kind::Bool),
    ("guid", "port.guid", Kind::Guid),
    ("max_wire_smps", "transport.window", Kind::Int),
    ("max_wire_smps2", "transport.smp_window_with_lost", Kind::Int),
    ("transaction_timeout", "transport.timeout_ms", Kind::Int),
    ("transaction_retries", "transport.retries", Kind::Int),
    ("sa_key", "sa.sa_key", Kind::Hex),
    ("consolidate_ipv6_snm_req", "sa.consolidate_ipv6_snm_req", Kind::Bool),
    ("qos", "qos.enabled", Kind::Bool),
    ("qos_high_limit", "qos.high_limit", Kind::IntOrUnset),
    ("qos_vlarb_high", "qos.vlarb_high", Kind::Text),
    ("qos_vlarb_low", "qos.vlarb_low", Kind::Text),
    ("qos_sl2vl", "qos.sl2vl", Kind::Text),
    ("perfmgr", "perfmgr.enabled", Kind::Bool),
    ("perfmgr_sweep_time_s", "perfmgr.interval_s", Kind::Int),
    ("perfmgr_max_outstanding_queries", "perfmgr.max_in_flight", Kind::Int),
];

/// Why some keys without a counterpart are not converted, where there
/// is more to say than "no ibsm equivalent". A trailing `*` is a prefix.
const WHY_NOT: &[(&str, &str)] = &[
    ("no_partition_enforcement", "deprecated in OpenSM; TRUE is part_enforce off (converted as that when TRUE)"),
    (
        "max_smps_timeout",
        "in microseconds there; ibsm's is transport.smp_lost_after_ms (20 ms, against OpenSM's 600 ms)",
    ),
    ("log_file", "use `ibsm run --log-file FILE` (journald under systemd)"),
    ("log_flags", "use [log] level"),
    ("log_max_size", "log rotation is journald's or logrotate's job"),
    ("accum_log_file", "use `ibsm run --log-file` (always appends)"),
    ("force_log_flush", "ibsm's log is unbuffered"),
    ("daemon", "run ibsm under systemd (deploy/ibsm.service)"),
    ("console", "no console: use /status, `ibsm status`, SIGHUP and SIGUSR1"),
    ("console_port", "no console"),
    ("dump_files_dir", "use `ibsm dump`"),
    ("sa_db_file", "a standby mirrors the master's SA records ([sa] mirror_interval_s)"),
    ("sa_db_dump", "a standby mirrors the master's SA records ([sa] mirror_interval_s)"),
    ("torus_config", "no torus-2QoS engine"),
    ("use_mfttop", "ibsm sets MulticastFDBTop wherever a switch supports it"),
    ("qos_policy_file", "no QoS policy file; only the fabric-wide qos_* tables"),
    ("qos_max_vls", "the VL budget is sm.max_op_vls"),
    ("qos_ca_*", "no per-port-kind QoS tables; only the fabric-wide qos_* keys"),
    ("qos_sw0_*", "no per-port-kind QoS tables; only the fabric-wide qos_* keys"),
    ("qos_swe_*", "no per-port-kind QoS tables; only the fabric-wide qos_* keys"),
    ("qos_rtr_*", "no per-port-kind QoS tables; only the fabric-wide qos_* keys"),
    ("cc_*", "no congestion control"),
    ("congestion_control", "no congestion control"),
    ("event_plugin_*", "no plugins; metrics and /status instead"),
    ("event_db_dump_file", "per-port counters are exported on /metrics"),
    ("perfmgr_*", "the performance manager has no such setting"),
];

/// One converted key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    pub line: usize,
    pub opensm_key: String,
    /// `section.key`.
    pub key: &'static str,
    /// The value as TOML.
    pub value: String,
}

/// One key left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub line: usize,
    pub opensm_key: String,
    pub value: String,
    pub why: String,
}

/// A line that could not be read, or a value ibsm rejects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    pub line: usize,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Conversion {
    pub converted: Vec<Converted>,
    pub skipped: Vec<Skipped>,
    pub errors: Vec<BadLine>,
}

/// Converts the text of an opensm.conf.
pub fn convert(text: &str) -> Conversion {
    let mut out = Conversion::default();
    // Later lines win, as in OpenSM; the earlier one is listed as skipped.
    let mut by_key: BTreeMap<&'static str, Converted> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let (key, value) = match l.split_once(char::is_whitespace) {
            Some((k, v)) => (k, v.trim()),
            None => (l, ""),
        };
        if value.is_empty() {
            out.errors.push(BadLine { line, message: format!("`{key}` has no value") });
            continue;
        }
        let skip = |why: String| Skipped { line, opensm_key: key.to_string(), value: value.to_string(), why };
        if key == "no_partition_enforcement" {
            match parse_bool(value) {
                Some(true) => {
                    let c = Converted { line, opensm_key: key.into(), key: "sm.part_enforce", value: "\"off\"".into() };
                    replace(&mut by_key, &mut out.skipped, c);
                }
                Some(false) => out.skipped.push(skip("FALSE: enforcement follows part_enforce".into())),
                None => out.errors.push(BadLine { line, message: format!("{key} `{value}`: not TRUE or FALSE") }),
            }
            continue;
        }
        let Some(&(_, ibsm_key, kind)) = MAP.iter().find(|(k, _, _)| *k == key) else {
            out.skipped.push(skip(why_not(key).to_string()));
            continue;
        };
        if value == "(null)" {
            out.skipped.push(skip("(null): unset in OpenSM, ibsm's default applies".into()));
            continue;
        }
        let toml_value = match to_toml(kind, value) {
            Ok(Some(v)) => v,
            Ok(None) => {
                out.skipped.push(skip("OpenSM's \"unset\", ibsm's default applies".into()));
                continue;
            }
            Err(Unconverted::Bad(why)) => {
                out.errors.push(BadLine { line, message: format!("{key} `{value}`: {why}") });
                continue;
            }
            Err(Unconverted::Skip(why)) => {
                out.skipped.push(skip(why));
                continue;
            }
        };
        // Check the value as ibsm would read it, alone in its section.
        let (section, name) = ibsm_key.split_once('.').expect("section.key");
        match Config::parse(&format!("[{section}]\n{name} = {toml_value}\n"), Path::new("x")) {
            Ok(_) => {
                let c = Converted { line, opensm_key: key.into(), key: ibsm_key, value: toml_value };
                replace(&mut by_key, &mut out.skipped, c);
            }
            Err(ConfigError::Parse { message, .. }) if message.contains("unknown field") => {
                out.skipped.push(skip(format!("ibsm has no {ibsm_key} (yet)")));
            }
            Err(ConfigError::Invalid { invalid, .. }) => {
                out.errors.push(BadLine { line, message: format!("{key} {value} -> {invalid}") });
            }
            Err(e) => out.errors.push(BadLine { line, message: format!("{key} {value} -> {ibsm_key}: {e}") }),
        }
    }
    out.converted = by_key.into_values().collect();
    out.converted.sort_by_key(|c| MAP.iter().position(|(_, k, _)| *k == c.key));
    out.skipped.sort_by_key(|s| s.line);
    out
}

fn replace(by_key: &mut BTreeMap<&'static str, Converted>, skipped: &mut Vec<Skipped>, c: Converted) {
    let line = c.line;
    if let Some(old) = by_key.insert(c.key, c) {
        skipped.push(Skipped {
            line: old.line,
            opensm_key: old.opensm_key,
            value: old.value,
            why: format!("overridden by line {line}"),
        });
    }
}

fn why_not(key: &str) -> &'static str {
    WHY_NOT
        .iter()
        .find(|(k, _)| match k.strip_suffix('*') {
            Some(prefix) => key.starts_with(prefix),
            None => key == *k,
        })
        .map_or("no ibsm equivalent", |(_, why)| why)
}

enum Unconverted {
    /// The value is malformed: a bad line.
    Bad(String),
    /// Well-formed, but ibsm cannot take it.
    Skip(String),
}

fn to_toml(kind: Kind, value: &str) -> Result<Option<String>, Unconverted> {
    let bad = |why: &str| Unconverted::Bad(why.to_string());
    Ok(Some(match kind {
        Kind::Int => c_ulong(value).ok_or_else(|| bad("not a number"))?.to_string(),
        Kind::IntOrUnset => match value.parse::<i64>() {
            Ok(-1) => return Ok(None),
            _ => c_ulong(value).ok_or_else(|| bad("not a number or -1"))?.to_string(),
        },
        Kind::Bool => parse_bool(value).ok_or_else(|| bad("not TRUE or FALSE"))?.to_string(),
        Kind::Hex => format!("\"{:#018x}\"", c_ulong(value).ok_or_else(|| bad("not a number"))?),
        Kind::Guid => match c_ulong(value).ok_or_else(|| bad("not a GUID"))? {
            0 => return Ok(None),
            g => format!("\"{g:#018x}\""),
        },
        Kind::Text => toml::Value::String(value.to_string()).to_string(),
        Kind::Engines => {
            let names: Vec<&str> = value.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
            let unknown: Vec<&str> =
                names.iter().copied().filter(|n| n.parse::<ibsm_routing::EngineKind>().is_err()).collect();
            if !unknown.is_empty() {
                return Err(Unconverted::Skip(format!("ibsm has no routing engine {}", unknown.join(", "))));
            }
            toml::Value::Array(names.into_iter().map(|n| toml::Value::String(n.into())).collect()).to_string()
        }
    }))
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_uppercase().as_str() {
        "TRUE" => Some(true),
        "FALSE" => Some(false),
        _ => None,
    }
}

/// strtoul with base 0: `0x` hex, a leading `0` octal, else decimal.
fn c_ulong(v: &str) -> Option<u64> {
    let v = v.trim();
    if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else if v.len() > 1 && v.starts_with('0') {
        u64::from_str_radix(&v[1..], 8).ok()
    } else {
        v.parse().ok()
    }
}

impl Conversion {
    /// The converted keys as TOML, then every key left out as a comment.
    pub fn to_toml(&self, source: &str) -> String {
        let mut out = format!("# Converted from {source} by `ibsm config --from-opensm`.\n");
        let mut section = "";
        for c in &self.converted {
            let (s, name) = c.key.split_once('.').expect("section.key");
            if s != section {
                section = s;
                out.push_str(&format!("\n[{s}]\n"));
            }
            out.push_str(&format!("{name} = {}  # opensm {} (line {})\n", c.value, c.opensm_key, c.line));
        }
        if !self.skipped.is_empty() {
            out.push_str(&format!("\n# Not converted ({} keys):\n", self.skipped.len()));
            for s in &self.skipped {
                out.push_str(&format!("# line {}: {} {}: {}\n", s.line, s.opensm_key, s.value, s.why));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_convert_and_the_result_parses() {
        let text = "# a comment\nsm_priority 7\nsweep_interval 0x1e\nlmc_esp0 TRUE\nsm_key 0x0000000000000010\n\
                    routing_engine ftree,updn\npartition_config_file /etc/opensm/partitions.conf\n\
                    qos_high_limit -1\nqos_sl2vl (null)\nguid 0x0000000000000000\nconsole off\n\
                    no_partition_enforcement TRUE\nm_key_lease_period 010\n";
        let conv = convert(text);
        assert!(conv.errors.is_empty(), "{:?}", conv.errors);
        let toml = conv.to_toml("t.conf");
        let c = Config::parse(&toml, Path::new("out.toml")).unwrap();
        assert_eq!(c.sm.priority, 7);
        assert_eq!(c.sm.sweep_interval_s, 30);
        assert!(c.sm.lmc_esp0);
        assert_eq!(c.sm.sm_key, 0x10);
        assert_eq!(c.sm.routing_engine, ["ftree", "updn"]);
        assert_eq!(c.sm.partition_config_file.as_deref(), Some(Path::new("/etc/opensm/partitions.conf")));
        assert_eq!(c.sm.part_enforce, crate::partition::PartEnforce::Off);
        assert_eq!(c.sm.m_key_lease_period, 8, "strtoul base 0 reads 010 as octal");
        assert_eq!(c.qos, Config::default().qos);
        assert_eq!(c.port.guid, None);
        let skipped: Vec<(&str, usize)> = conv.skipped.iter().map(|s| (s.opensm_key.as_str(), s.line)).collect();
        assert_eq!(skipped, [("qos_high_limit", 8), ("qos_sl2vl", 9), ("guid", 10), ("console", 11)]);
        assert!(toml.contains("# line 11: console off: no console"), "{toml}");
        assert!(toml.contains("priority = 7  # opensm sm_priority (line 2)"), "{toml}");
    }

    #[test]
    fn bad_lines_are_named() {
        let conv = convert("sm_priority\nlmc abc\nsm_priority 16\nlmc_esp0 maybe\nlmc 2\nlmc 3\nrouting_engine lash\n");
        let errors: Vec<String> = conv.errors.iter().map(|e| format!("{}: {}", e.line, e.message)).collect();
        assert_eq!(
            errors,
            [
                "1: `sm_priority` has no value",
                "2: lmc `abc`: not a number",
                "3: sm_priority 16 -> sm.priority = 16: must be 0-15",
                "4: lmc_esp0 `maybe`: not TRUE or FALSE",
            ]
        );
        // The later lmc wins; the engine ibsm lacks is listed, not an error.
        assert_eq!(conv.converted.len(), 1);
        assert_eq!(conv.converted[0].value, "3");
        assert_eq!(conv.skipped[0].why, "overridden by line 6");
        assert!(conv.skipped[1].why.contains("no routing engine lash"), "{:?}", conv.skipped);
    }

    #[test]
    fn no_routing_engine_means_ibsm_default_and_a_named_one_is_kept() {
        let parsed = |text: &str| Config::parse(&convert(text).to_toml("t.conf"), Path::new("out.toml")).unwrap();
        assert_eq!(parsed("sm_priority 3\n").sm.routing_engine, ["auto"]);
        assert_eq!(parsed("routing_engine (null)\n").sm.routing_engine, ["auto"]);
        assert_eq!(parsed("routing_engine minhop\n").sm.routing_engine, ["minhop"]);
    }

    #[test]
    fn strtoul_base_0() {
        assert_eq!(c_ulong("0x12"), Some(18));
        assert_eq!(c_ulong("012"), Some(10));
        assert_eq!(c_ulong("0"), Some(0));
        assert_eq!(c_ulong("18"), Some(18));
        assert_eq!(c_ulong("09"), None);
        assert_eq!(c_ulong("-3"), None);
    }
}
