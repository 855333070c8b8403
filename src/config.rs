//! The SM's configuration: a TOML file whose keys mirror OpenSM's opensm.conf
//! where one exists, so an operator can carry settings across.
//!
//! A file is read in two steps, both before the fabric is touched: serde
//! rejects unknown keys and wrong types (with the file's line and column),
//! then [`Config::validate`] rejects values out of range, naming the key.
//! [`docs`] prints every key with its default (`ibsm config
//! --print-default`), [`opensm`] converts an opensm.conf, and [`reload`]
//! says what a new file changes live and what waits for a restart.

pub mod docs;
pub mod opensm;
pub mod perfmgr;
pub mod reload;
pub mod sa;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use reload::{reload_plan, ReloadPlan};

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub sm: SmConfig,
    pub qos: QosConfig,
    pub transport: TransportConfig,
    pub port: PortSelection,
    pub metrics: MetricsConfig,
    /// The subnet administrator (`[sa]`).
    pub sa: sa::SaConfig,
    /// Logging (`[log]`).
    pub log: LogConfig,
    /// The performance manager (`[perfmgr]`).
    pub perfmgr: perfmgr::PerfMgrConfig,
}

/// The `[log]` section. `IBSM_LOG`, when set, takes precedence (see
/// `crate::logging`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A level (error, warn, info, debug, trace, off) or tracing's
    /// directives, e.g. `info,ibsm::sa=debug`. Changes on SIGHUP.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig { level: "info".to_string() }
    }
}

impl LogConfig {
    /// Checks `level` is a level or a list of `target=level` directives
    /// and returns it as tracing's filter syntax (no blanks). tracing's own
    /// parser takes any word as a target, so `verbose` would silently mean
    /// "everything in a module named verbose"; that is refused here.
    pub fn directives(level: &str) -> Result<String, String> {
        const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
        let is_level = |l: &str| LEVELS.contains(&l.trim().to_ascii_lowercase().as_str());
        let items: Vec<String> = level
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|item| match item.rsplit_once('=') {
                Some((target, l)) if !target.trim().is_empty() && is_level(l) => {
                    Ok(format!("{}={}", target.trim(), l.trim().to_ascii_lowercase()))
                }
                None if is_level(item) => Ok(item.to_ascii_lowercase()),
                _ => {
                    Err(format!("`{item}` is neither a level (off, error, warn, info, debug, trace) nor target=level"))
                }
            })
            .collect::<Result<_, _>>()?;
        if items.is_empty() {
            return Err("is empty; use a level: off, error, warn, info, debug, trace".into());
        }
        let joined = items.join(",");
        tracing_subscriber::EnvFilter::try_new(&joined).map_err(|e| e.to_string())?;
        Ok(joined)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SmConfig {
    /// Seconds between periodic sweeps; 0 sweeps only on traps (OpenSM `sweep_interval`).
    pub sweep_interval_s: u64,
    /// 0-15; higher wins the master election (OpenSM `sm_priority`).
    #[serde(alias = "sm_priority")]
    pub priority: u8,
    /// SMInfo.SM_Key (OpenSM `sm_key`, default 1 there too: OpenSM ignores
    /// an SM whose key differs). Shown to requesters that present it or
    /// the fabric's M_Key; required on every SubnSet(SMInfo).
    #[serde(deserialize_with = "hex_u64", serialize_with = "hex_string")]
    pub sm_key: u64,
    /// How often a standby polls the master, in ms (OpenSM
    /// `sminfo_polling_timeout`, 10000 there).
    pub sminfo_polling_timeout_ms: u64,
    /// Polls the master may miss in a row before a standby takes over
    /// (OpenSM `polling_retry_number`).
    pub polling_retry_number: u32,
    /// Hand the subnet to a returning SM of higher priority. Off, a running
    /// master keeps it until an operator asks (SIGUSR1).
    pub master_preemption: bool,
    /// LID mask control, 0-7 (OpenSM `lmc`).
    pub lmc: u8,
    /// Give switch enhanced port 0 the LMC too (OpenSM `lmc_esp0`).
    pub lmc_esp0: bool,
    /// Ignore current LIDs and the guid2lid file on the first sweep (OpenSM `-r`).
    pub reassign_lids: bool,
    /// Upper 64 bits of every port GID (OpenSM `subnet_prefix`).
    #[serde(deserialize_with = "hex_u64", serialize_with = "hex_string")]
    pub subnet_prefix: u64,
    /// Subnet-wide M_Key; 0 disables protection (OpenSM `m_key`).
    #[serde(deserialize_with = "hex_u64", serialize_with = "hex_string")]
    pub m_key: u64,
    pub m_key_protection_level: u8,
    pub m_key_lease_period: u16,
    /// 4.096 µs × 2^n (OpenSM `subnet_timeout`, default 18 ≈ 1 s).
    pub subnet_timeout: u8,
    /// SwitchInfo.LifeTimeValue (OpenSM `packet_life_time`).
    pub packet_life_time: u8,
    /// Upper bound for PortInfo.OperationalVLs, as a VLCap code (OpenSM `max_op_vls`).
    pub max_op_vls: u8,
    /// SL for SMP traffic toward the SM (OpenSM `sm_sl`).
    pub sm_sl: u8,
    /// Where guid2lid lives (OpenSM `$OSM_CACHE_DIR`).
    pub cache_dir: PathBuf,
    /// The routing engine chain, tried in order. `auto` (the default, and
    /// what an empty chain means) picks by topology: ftree on fat trees,
    /// dor on meshes and tori within the VL budget, the better of updn and
    /// nue on one VL elsewhere; it may only end a chain.
    pub routing_engine: Vec<String>,
    /// OpenSM's partitions.conf (OpenSM `partition_config_file`, `-P`).
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Unset, or a file that does not exist: every port is a full member of
    /// the default partition with its IPoIB broadcast group (OpenSM's
    /// no-file default). Re-read on every heavy sweep and on SIGHUP; a file
    /// with an error is reported (file, line, column) and the partitions in
    /// force are kept. At startup a bad file stops the SM.
    pub partition_config_file: Option<PathBuf>,
    /// Partition enforcement on the switch ports facing end ports (OpenSM
    /// `part_enforce`: both, in, out, off).
    pub part_enforce: crate::partition::PartEnforce,
    /// Let a port hold both the full and the limited key of one partition
    /// (OpenSM `allow_both_pkeys`); otherwise `=both` means full.
    pub allow_both_pkeys: bool,
    /// A cable that goes down this many times within `flap_window_s` is
    /// held down (left out of the routes, its ports left in INIT) for
    /// `flap_hold_s`, and reported; 0 turns flap damping off.
    pub flap_downs: u32,
    pub flap_window_s: u64,
    pub flap_hold_s: u64,
}

impl Default for SmConfig {
    fn default() -> Self {
        SmConfig {
            sweep_interval_s: 10,
            priority: 0,
            sm_key: 1,
            sminfo_polling_timeout_ms: 2000,
            polling_retry_number: 4,
            master_preemption: true,
            lmc: 0,
            lmc_esp0: false,
            reassign_lids: false,
            subnet_prefix: 0xfe80_0000_0000_0000,
            m_key: 0,
            m_key_protection_level: 0,
            m_key_lease_period: 0,
            subnet_timeout: 18,
            packet_life_time: 0x12,
            max_op_vls: 5,
            sm_sl: 0,
            cache_dir: PathBuf::from("/var/cache/ibsm"),
            // No engine named: ibsm picks one by topology and checks it
            // for credit loops (ibsm_routing::auto). OpenSM's default,
            // minhop, leaves credit loops on tori and irregular fabrics.
            routing_engine: vec![ibsm_routing::auto::AUTO.to_string()],
            partition_config_file: None,
            part_enforce: crate::partition::PartEnforce::Both,
            allow_both_pkeys: false,
            flap_downs: 5,
            flap_window_s: 10,
            flap_hold_s: 60,
        }
    }
}

/// Fabric QoS tables, with OpenSM's `qos_*` keys as the model. Off by
/// default, as in OpenSM. Engines that put routes on VLs program their own
/// SL-to-VL tables whether or not this is on.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct QosConfig {
    /// Program VLArbitration tables and VLHighLimit (OpenSM `qos`).
    pub enabled: bool,
    /// PortInfo.VLHighLimit (OpenSM `qos_high_limit`).
    pub high_limit: u8,
    /// High-priority arbitration table, `VL:weight` pairs (OpenSM `qos_vlarb_high`).
    pub vlarb_high: String,
    /// Low-priority arbitration table (OpenSM `qos_vlarb_low`).
    pub vlarb_low: String,
    /// SL-to-VL table for engines that do not choose SLs (OpenSM `qos_sl2vl`).
    pub sl2vl: String,
}

impl Default for QosConfig {
    fn default() -> Self {
        // OpenSM's built-in defaults (osm_base.h).
        QosConfig {
            enabled: false,
            high_limit: 0,
            vlarb_high: "0:4,1:0,2:0,3:0,4:0,5:0,6:0,7:0,8:0,9:0,10:0,11:0,12:0,13:0,14:0".into(),
            vlarb_low: "0:0,1:4,2:4,3:4,4:4,5:4,6:4,7:4,8:4,9:4,10:4,11:4,12:4,13:4,14:4".into(),
            sl2vl: "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,7".into(),
        }
    }
}

impl QosConfig {
    /// `VL:weight` pairs, at most 64; VL 0-14, weight 0-255.
    pub fn parse_vlarb(text: &str) -> Result<Vec<(u8, u8)>, String> {
        let mut out = Vec::new();
        for (i, item) in text.split(',').map(str::trim).filter(|t| !t.is_empty()).enumerate() {
            let (vl, weight) = item.split_once(':').ok_or_else(|| format!("entry {i} `{item}` is not VL:weight"))?;
            let vl: u8 = vl
                .trim()
                .parse()
                .ok()
                .filter(|&v| v <= 14)
                .ok_or_else(|| format!("entry {i}: VL `{vl}` is not 0-14"))?;
            let weight: u8 = weight.trim().parse().map_err(|_| format!("entry {i}: weight `{weight}` is not 0-255"))?;
            out.push((vl, weight));
        }
        if out.len() > 64 {
            return Err(format!("{} entries, at most 64", out.len()));
        }
        Ok(out)
    }

    /// Sixteen VLs, one per SL; each 0-15 (15 drops).
    pub fn parse_sl2vl(text: &str) -> Result<[u8; 16], String> {
        let vls: Vec<&str> = text.split(',').map(str::trim).collect();
        if vls.len() != 16 {
            return Err(format!("{} entries, need one VL for each of the 16 SLs", vls.len()));
        }
        let mut out = [0u8; 16];
        for (sl, v) in vls.iter().enumerate() {
            out[sl] =
                v.parse().ok().filter(|&x: &u8| x <= 15).ok_or_else(|| format!("SL {sl}: `{v}` is not a VL 0-15"))?;
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TransportConfig {
    /// SMPs in flight at once (OpenSM `max_wire_smps`, default 4).
    pub window: usize,
    /// GMPs in flight at once per management class (SA, PerfMgt, ...), each
    /// class apart from the SMPs and from the others.
    pub gmp_window: usize,
    /// Per-attempt timeout in milliseconds (OpenSM `transaction_timeout`).
    pub timeout_ms: u64,
    /// Retries after the first attempt (OpenSM `transaction_retries`).
    pub retries: u32,
    /// Traps taken per second from one source LID; the excess is dropped
    /// unanswered (the port sends it again later) and counted. 0: no limit.
    pub trap_rate_limit: u32,
    /// An SMP unanswered this many milliseconds is presumed lost and no
    /// longer holds a slot of `window` (its timeout still runs), as
    /// OpenSM's `max_smps_timeout`. 0: off.
    pub smp_lost_after_ms: u64,
    /// SMPs out at once counting those presumed lost (OpenSM
    /// `max_wire_smps2`); at least `window`.
    pub smp_window_with_lost: usize,
}

impl Default for TransportConfig {
    fn default() -> Self {
        // A switch traps once per port state change: a leaf losing every
        // cable at once sends a few dozen traps, not hundreds. An SMP
        // answers within a millisecond on an idle fabric; one unanswered
        // after 20 ms is most likely gone, and on a lossy fabric a window
        // of them would stall the sweep for whole timeouts.
        TransportConfig {
            window: 16,
            gmp_window: 16,
            timeout_ms: 200,
            retries: 3,
            trap_rate_limit: 100,
            smp_lost_after_ms: 20,
            smp_window_with_lost: 64,
        }
    }
}

impl TransportConfig {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// Which local port the SM runs on; empty means the first active IB port.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PortSelection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u8>,
    #[serde(
        deserialize_with = "opt_hex_u64",
        serialize_with = "opt_hex_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub guid: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address of the Prometheus endpoint; empty disables it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { listen: Some("127.0.0.1:9464".to_string()) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    /// A TOML syntax error, an unknown key or a wrong type, at the line
    /// and column (1-based) where serde stopped.
    #[error("{path}:{line}:{column}: {message}")]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    /// A well-formed value out of range.
    #[error("{path}: {invalid}")]
    Invalid { path: PathBuf, invalid: Invalid },
}

/// A value out of range: the key as `section.key`, the value, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value}: {why}")]
pub struct Invalid {
    pub key: &'static str,
    pub value: String,
    pub why: String,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::parse(&text, path)
    }

    /// Parses `text` (named `path` in errors) and validates it.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
            ConfigError::Parse { path: path.into(), line, column, message: e.message().trim_end().to_string() }
        })?;
        config.validate().map_err(|invalid| ConfigError::Invalid { path: path.into(), invalid })?;
        Ok(config)
    }

    /// Checks every value's range, first failure first. [`Config::parse`]
    /// calls it; call it again after command-line overrides.
    pub fn validate(&self) -> Result<(), Invalid> {
        let (sm, tr) = (&self.sm, &self.transport);
        in_range("sm.sweep_interval_s", sm.sweep_interval_s, 0, 86_400, "must be 0-86400 s (0 sweeps on traps only)")?;
        in_range("sm.priority", sm.priority.into(), 0, 15, "must be 0-15")?;
        in_range("sm.sminfo_polling_timeout_ms", sm.sminfo_polling_timeout_ms, 1, 600_000, "must be 1-600000 ms")?;
        in_range("sm.polling_retry_number", sm.polling_retry_number.into(), 1, 100, "must be 1-100")?;
        in_range("sm.lmc", sm.lmc.into(), 0, 7, "must be 0-7")?;
        in_range("sm.flap_downs", sm.flap_downs.into(), 0, 1000, "must be 0-1000 (0: no flap damping)")?;
        in_range("sm.flap_window_s", sm.flap_window_s, 1, 3600, "must be 1-3600 s")?;
        in_range("sm.flap_hold_s", sm.flap_hold_s, 1, 86_400, "must be 1-86400 s")?;
        in_range("transport.trap_rate_limit", tr.trap_rate_limit.into(), 0, 1_000_000, "must be 0-1000000 per second")?;
        in_range("sm.subnet_timeout", sm.subnet_timeout.into(), 0, 31, "must be 0-31")?;
        in_range("sm.packet_life_time", sm.packet_life_time.into(), 0, 31, "must be 0-31")?;
        // max_op_vls is the VL budget of the engines that layer routes on
        // VLs: a VLCap code, 1 = VL0 only ... 5 = VL0-14 (IBA 14.2.5.6, PortInfo.VLCap).
        in_range("sm.max_op_vls", sm.max_op_vls.into(), 1, 5, "must be a VLCap code 1-5")?;
        in_range("sm.m_key_protection_level", sm.m_key_protection_level.into(), 0, 3, "must be 0-3")?;
        in_range("sm.sm_sl", sm.sm_sl.into(), 0, 15, "must be 0-15")?;
        if sm.cache_dir.as_os_str().is_empty() {
            return Err(invalid("sm.cache_dir", "\"\"", "must name a directory"));
        }
        let mut chain = Vec::with_capacity(sm.routing_engine.len());
        for name in &sm.routing_engine {
            let Ok(entry) = name.parse::<ibsm_routing::ChainEntry>() else {
                let known: Vec<&str> = std::iter::once(ibsm_routing::auto::AUTO)
                    .chain(ibsm_routing::EngineKind::ALL.iter().map(|k| k.name()))
                    .collect();
                return Err(invalid(
                    "sm.routing_engine",
                    name,
                    &format!("unknown engine (known: {})", known.join(", ")),
                ));
            };
            chain.push(entry);
        }
        ibsm_routing::auto::check_chain(&chain)
            .map_err(|why| invalid("sm.routing_engine", &sm.routing_engine.join(","), &why))?;
        if sm.partition_config_file.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
            return Err(invalid("sm.partition_config_file", "\"\"", "is empty; leave the key out for no file"));
        }
        QosConfig::parse_vlarb(&self.qos.vlarb_high)
            .map_err(|why| invalid("qos.vlarb_high", &self.qos.vlarb_high, &why))?;
        QosConfig::parse_vlarb(&self.qos.vlarb_low)
            .map_err(|why| invalid("qos.vlarb_low", &self.qos.vlarb_low, &why))?;
        QosConfig::parse_sl2vl(&self.qos.sl2vl).map_err(|why| invalid("qos.sl2vl", &self.qos.sl2vl, &why))?;
        in_range("transport.window", tr.window as u64, 1, 1024, "must be 1-1024")?;
        in_range("transport.gmp_window", tr.gmp_window as u64, 1, 1024, "must be 1-1024")?;
        in_range("transport.timeout_ms", tr.timeout_ms, 1, 60_000, "must be 1-60000 ms")?;
        in_range("transport.retries", tr.retries.into(), 0, 20, "must be 0-20")?;
        in_range("transport.smp_lost_after_ms", tr.smp_lost_after_ms, 0, 60_000, "must be 0-60000 ms")?;
        in_range("transport.smp_window_with_lost", tr.smp_window_with_lost as u64, 1, 256, "must be 1-256")?;
        if let Some(listen) = self.metrics.listen.as_deref().filter(|l| !l.is_empty()) {
            listen.parse::<std::net::SocketAddr>().map_err(|e| {
                invalid("metrics.listen", listen, &format!("{e} (address:port, or \"\" for no endpoint)"))
            })?;
        }
        LogConfig::directives(&self.log.level).map_err(|why| invalid("log.level", &self.log.level, &why))?;
        let pm = &self.perfmgr;
        in_range("perfmgr.interval_s", pm.interval_s, 0, 86_400, "must be 0-86400 s")?;
        in_range("perfmgr.max_in_flight", pm.max_in_flight as u64, 0, 4096, "must be 0-4096")?;
        if !(pm.error_rate_factor.is_finite() && pm.error_rate_factor >= 0.0) {
            let value = pm.error_rate_factor.to_string();
            return Err(invalid("perfmgr.error_rate_factor", &value, "must be 0 (off) or more"));
        }
        Ok(())
    }
}

fn invalid(key: &'static str, value: &str, why: &str) -> Invalid {
    Invalid { key, value: value.to_string(), why: why.to_string() }
}

fn in_range(key: &'static str, value: u64, lo: u64, hi: u64, why: &str) -> Result<(), Invalid> {
    if (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(invalid(key, &value.to_string(), why))
    }
}

/// 64-bit values (GUIDs, keys, prefixes) overflow TOML's signed integers,
/// so they are also accepted as strings: "0xfe80000000000000".
pub(crate) fn hex_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Int(i64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Int(i) => u64::try_from(i).map_err(|_| serde::de::Error::custom("must not be negative")),
        Raw::Text(t) => parse_u64(&t).ok_or_else(|| serde::de::Error::custom(format!("`{t}` is not a number"))),
    }
}

fn opt_hex_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    hex_u64(d).map(Some)
}

/// The other way: always a string of 16 hex digits, as OpenSM writes keys
/// and GUIDs, so values past i64::MAX survive.
pub(crate) fn hex_string<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:#018x}"))
}

fn opt_hex_string<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => hex_string(v, s),
        None => s.serialize_none(),
    }
}

/// Parses decimal or 0x-prefixed hexadecimal.
pub fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_config_parses() {
        let text = include_str!("../deploy/ibsm.toml");
        let c = Config::parse(text, Path::new("deploy/ibsm.toml")).unwrap();
        assert_eq!(c.sm.sweep_interval_s, 10);
        assert_eq!(c.sa, crate::sa::SaConfig::default(), "the sample shows the SA's defaults");
    }

    #[test]
    fn qos_lists_are_checked() {
        assert_eq!(QosConfig::parse_vlarb("0:4, 1:0").unwrap(), vec![(0, 4), (1, 0)]);
        assert!(QosConfig::parse_vlarb("0:4,15:1").is_err());
        assert!(QosConfig::parse_sl2vl("0,1").is_err());
        let err = Config::parse("[qos]\nvlarb_low = \"0:x\"\n", Path::new("q.toml")).unwrap_err();
        assert!(err.to_string().contains("qos.vlarb_low"), "{err}");
        assert_eq!(QosConfig::parse_sl2vl(&QosConfig::default().sl2vl).unwrap()[15], 7);
    }

    #[test]
    fn election_keys_and_opensm_alias() {
        let c = Config::parse(
            "[sm]\nsm_priority = 7\nsm_key = \"0x10\"\nsminfo_polling_timeout_ms = 500\npolling_retry_number = 3\nmaster_preemption = false\n",
            Path::new("e.toml"),
        )
        .unwrap();
        let e = c.sm.election();
        assert_eq!((e.priority, e.sm_key, e.poll_misses, e.master_preemption), (7, 0x10, 3, false));
        assert_eq!(e.poll_interval, Duration::from_millis(500));
        // The defaults detect a dead master well within 15 s.
        let d = Config::default().sm.election().detection_time();
        assert!(d <= Duration::from_secs(15), "{d:?}");
        let err = Config::parse("[sm]\npolling_retry_number = 0\n", Path::new("e.toml")).unwrap_err();
        assert_eq!(err.to_string(), "e.toml: sm.polling_retry_number = 0: must be 1-100");
        let err = Config::parse("[sm]\nsm_priority = 16\n", Path::new("e.toml")).unwrap_err();
        assert_eq!(err.to_string(), "e.toml: sm.priority = 16: must be 0-15");
    }

    #[test]
    fn empty_file_is_defaults() {
        assert_eq!(Config::parse("", Path::new("x")).unwrap(), Config::default());
    }

    #[test]
    fn errors_name_file_line_and_key() {
        // An unknown key: line and column of the key itself.
        let err = Config::parse("[sm]\nlmc = 3\n  bogus = 1\n", Path::new("/etc/ibsm.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("/etc/ibsm.toml:3:3: unknown field `bogus`"), "{msg}");
        // A wrong type: line and column of the value.
        let err = Config::parse("[transport]\nwindow = \"x\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().starts_with("c.toml:2:10: invalid type: string \"x\", expected usize"), "{err}");
        let err = Config::parse("[sm]\n\nlmc_esp0 = 1\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().starts_with("c.toml:3:12: invalid type: integer"), "{err}");
        // An unknown section.
        let err = Config::parse("\n[perfmgrr]\nenabled = true\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().starts_with("c.toml:2:"), "{err}");
        assert!(err.to_string().contains("unknown field `perfmgrr`"), "{err}");
        // TOML syntax.
        let err = Config::parse("[sm]\nlmc = = 3\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().starts_with("c.toml:2:7:"), "{err}");
        // Out of range: the key.
        let err = Config::parse("[sm]\nlmc = 9\n", Path::new("c.toml")).unwrap_err();
        assert_eq!(err.to_string(), "c.toml: sm.lmc = 9: must be 0-7");
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 3), (2, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("é = 1", 3), (1, 3), "é is one column");
        assert_eq!(line_col("ab", 99), (1, 3));
    }

    #[test]
    fn values_out_of_range_name_their_key() {
        let cases = [
            ("[sm]\npriority = 16", "sm.priority = 16: must be 0-15"),
            ("[sm]\nsubnet_timeout = 32", "sm.subnet_timeout = 32: must be 0-31"),
            ("[sm]\npacket_life_time = 40", "sm.packet_life_time = 40: must be 0-31"),
            ("[sm]\nmax_op_vls = 0", "sm.max_op_vls = 0: must be a VLCap code 1-5"),
            ("[sm]\nmax_op_vls = 6", "sm.max_op_vls = 6: must be a VLCap code 1-5"),
            ("[sm]\nsm_sl = 16", "sm.sm_sl = 16: must be 0-15"),
            ("[sm]\nm_key_protection_level = 4", "sm.m_key_protection_level = 4: must be 0-3"),
            (
                "[sm]\nsweep_interval_s = 100000",
                "sm.sweep_interval_s = 100000: must be 0-86400 s (0 sweeps on traps only)",
            ),
            ("[sm]\nsminfo_polling_timeout_ms = 0", "sm.sminfo_polling_timeout_ms = 0: must be 1-600000 ms"),
            ("[sm]\ncache_dir = \"\"", "sm.cache_dir = \"\": must name a directory"),
            (
                "[sm]\npartition_config_file = \"\"",
                "sm.partition_config_file = \"\": is empty; leave the key out for no file",
            ),
            ("[transport]\nwindow = 0", "transport.window = 0: must be 1-1024"),
            ("[transport]\ntimeout_ms = 600000", "transport.timeout_ms = 600000: must be 1-60000 ms"),
            ("[transport]\nretries = 99", "transport.retries = 99: must be 0-20"),
            ("[perfmgr]\ninterval_s = 90000", "perfmgr.interval_s = 90000: must be 0-86400 s"),
            ("[perfmgr]\nerror_rate_factor = -1.0", "perfmgr.error_rate_factor = -1: must be 0 (off) or more"),
            ("[qos]\nsl2vl = \"0,1\"", "qos.sl2vl = 0,1: 2 entries, need one VL for each of the 16 SLs"),
        ];
        for (text, want) in cases {
            let err = Config::parse(text, Path::new("r.toml")).unwrap_err();
            assert_eq!(err.to_string(), format!("r.toml: {want}"), "{text}");
        }
        let err = Config::parse("[sm]\nrouting_engine = [\"ftree\", \"lash\"]", Path::new("r.toml")).unwrap_err();
        assert!(
            err.to_string().starts_with("r.toml: sm.routing_engine = lash: unknown engine (known: auto, "),
            "{err}"
        );
        // auto ends a chain or stands alone; before another engine it would
        // hide it.
        let err = Config::parse("[sm]\nrouting_engine = [\"auto\", \"minhop\"]", Path::new("r.toml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "r.toml: sm.routing_engine = auto,minhop: `auto` must be the last engine of the chain: it routes every \
             fabric, so minhop after it would never run"
        );
        for ok in [&["auto"][..], &["ftree", "auto"], &["minhop"], &[]] {
            let text = format!("[sm]\nrouting_engine = {ok:?}");
            let c = Config::parse(&text, Path::new("r.toml")).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(c.sm.routing_engine, ok, "{text}");
        }
        assert_eq!(SmConfig::default().routing_engine, ["auto"]);
        let err = Config::parse("[metrics]\nlisten = \"localhost\"", Path::new("r.toml")).unwrap_err();
        assert!(err.to_string().starts_with("r.toml: metrics.listen = localhost: "), "{err}");
        assert!(Config::parse("[metrics]\nlisten = \"\"", Path::new("r.toml")).is_ok(), "empty turns it off");
        // The edges are accepted.
        Config::parse(
            "[sm]\npriority = 15\nlmc = 7\nsubnet_timeout = 31\nmax_op_vls = 1\nsweep_interval_s = 0",
            Path::new("r"),
        )
        .unwrap();
    }

    #[test]
    fn log_levels() {
        for ok in ["info", "DEBUG", "off", "info,ibsm::sa=debug", "warn, ibsm=trace"] {
            assert!(LogConfig::directives(ok).is_ok(), "{ok}");
        }
        for bad in ["", "verbose", "info,ibsm::sa=loud", "=debug", ","] {
            assert!(LogConfig::directives(bad).is_err(), "{bad:?}");
        }
        assert_eq!(LogConfig::directives(" Warn, ibsm = TRACE ").unwrap(), "warn,ibsm=trace");
        let err = Config::parse("[log]\nlevel = \"verbose\"", Path::new("l.toml")).unwrap_err();
        assert!(err.to_string().starts_with("l.toml: log.level = verbose: `verbose` is neither a level"), "{err}");
    }

    #[test]
    fn serialized_default_round_trips_including_keys_past_i64() {
        let mut c = Config::default();
        c.sm.m_key = u64::MAX;
        c.port.guid = Some(0x8000_0000_0000_0001);
        c.sm.partition_config_file = Some("/etc/p.conf".into());
        let text = toml::to_string(&c).unwrap();
        assert!(text.contains("m_key = \"0xffffffffffffffff\""), "{text}");
        assert_eq!(Config::parse(&text, Path::new("x")).unwrap(), c);
    }
}
