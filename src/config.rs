//! The SM's configuration: a TOML file whose keys mirror OpenSM's opensm.conf
//! where one exists, so an operator can carry settings across.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub sm: SmConfig,
    pub qos: QosConfig,
    pub transport: TransportConfig,
    pub port: PortSelection,
    pub metrics: MetricsConfig,
    /// The subnet administrator (`[sa]`).
    pub sa: crate::sa::SaConfig,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
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
    #[serde(deserialize_with = "hex_u64")]
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
    #[serde(deserialize_with = "hex_u64")]
    pub subnet_prefix: u64,
    /// Subnet-wide M_Key; 0 disables protection (OpenSM `m_key`).
    #[serde(deserialize_with = "hex_u64")]
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
    /// The routing engine chain, tried in order.
    pub routing_engine: Vec<String>,
    /// OpenSM's partitions.conf (OpenSM `partition_config_file`, `-P`).
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
            routing_engine: vec!["minhop".to_string()],
            partition_config_file: None,
            part_enforce: crate::partition::PartEnforce::Both,
            allow_both_pkeys: false,
        }
    }
}

/// Fabric QoS tables, with OpenSM's `qos_*` keys as the model. Off by
/// default, as in OpenSM. Engines that put routes on VLs program their own
/// SL-to-VL tables whether or not this is on.
#[derive(Debug, Clone, Deserialize, PartialEq)]
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

#[derive(Debug, Clone, Deserialize, PartialEq)]
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
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig { window: 16, gmp_window: 16, timeout_ms: 200, retries: 3 }
    }
}

impl TransportConfig {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// Which local port the SM runs on; empty means the first active IB port.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PortSelection {
    pub ca: Option<String>,
    pub port: Option<u8>,
    #[serde(deserialize_with = "opt_hex_u64")]
    pub guid: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Address of the Prometheus endpoint; empty disables it.
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
    #[error("{path}:{line}:{column}: {message}")]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {key} = {value}: {why}")]
    Invalid { path: PathBuf, key: &'static str, value: String, why: &'static str },
}

impl SmConfig {
    /// The election's knobs.
    pub fn election(&self) -> crate::election::ElectionConfig {
        crate::election::ElectionConfig {
            priority: self.priority,
            sm_key: self.sm_key,
            poll_interval: Duration::from_millis(self.sminfo_polling_timeout_ms),
            poll_misses: self.polling_retry_number,
            master_preemption: self.master_preemption,
            ..Default::default()
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        Self::parse(&text, path)
    }

    /// Parses `text` (named `path` in errors) and checks value ranges.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
            ConfigError::Parse { path: path.into(), line, column, message: e.message().to_string() }
        })?;
        config.check(path)?;
        Ok(config)
    }

    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |key, value: String, why| Err(ConfigError::Invalid { path: path.into(), key, value, why });
        if self.sm.priority > 15 {
            return bad("sm.priority", self.sm.priority.to_string(), "must be 0-15");
        }
        if self.sm.sminfo_polling_timeout_ms == 0 {
            return bad("sm.sminfo_polling_timeout_ms", "0".into(), "must be at least 1");
        }
        if self.sm.polling_retry_number == 0 {
            return bad("sm.polling_retry_number", "0".into(), "must be at least 1");
        }
        if self.sm.lmc > 7 {
            return bad("sm.lmc", self.sm.lmc.to_string(), "must be 0-7");
        }
        if self.sm.subnet_timeout > 31 {
            return bad("sm.subnet_timeout", self.sm.subnet_timeout.to_string(), "must be 0-31");
        }
        if self.sm.packet_life_time > 31 {
            return bad("sm.packet_life_time", self.sm.packet_life_time.to_string(), "must be 0-31");
        }
        if !(1..=5).contains(&self.sm.max_op_vls) {
            return bad("sm.max_op_vls", self.sm.max_op_vls.to_string(), "must be a VLCap code 1-5");
        }
        if self.sm.m_key_protection_level > 3 {
            return bad("sm.m_key_protection_level", self.sm.m_key_protection_level.to_string(), "must be 0-3");
        }
        if let Some(name) = self.sm.routing_engine.iter().find(|e| e.parse::<ibsm_routing::EngineKind>().is_err()) {
            return bad(
                "sm.routing_engine",
                name.clone(),
                "unknown engine (minhop, updn, dnup, ftree, sssp, dfsssp, dor, nue)",
            );
        }
        if let Err(why) = QosConfig::parse_vlarb(&self.qos.vlarb_high) {
            return Err(ConfigError::Invalid {
                path: path.into(),
                key: "qos.vlarb_high",
                value: self.qos.vlarb_high.clone(),
                why: leak(why),
            });
        }
        if let Err(why) = QosConfig::parse_vlarb(&self.qos.vlarb_low) {
            return Err(ConfigError::Invalid {
                path: path.into(),
                key: "qos.vlarb_low",
                value: self.qos.vlarb_low.clone(),
                why: leak(why),
            });
        }
        if let Err(why) = QosConfig::parse_sl2vl(&self.qos.sl2vl) {
            return Err(ConfigError::Invalid {
                path: path.into(),
                key: "qos.sl2vl",
                value: self.qos.sl2vl.clone(),
                why: leak(why),
            });
        }
        if self.transport.window == 0 {
            return bad("transport.window", "0".into(), "must be at least 1");
        }
        if self.transport.gmp_window == 0 {
            return bad("transport.gmp_window", "0".into(), "must be at least 1");
        }
        if self.transport.timeout_ms == 0 {
            return bad("transport.timeout_ms", "0".into(), "must be at least 1");
        }
        Ok(())
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

/// Parses decimal or 0x-prefixed hexadecimal.
pub fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// Config errors are built once, at start-up: a leaked message is fine.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map(|i| before.len() - i).unwrap_or(before.len() + 1);
    (line, column)
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
        assert_eq!(err.to_string(), "e.toml: sm.polling_retry_number = 0: must be at least 1");
        let err = Config::parse("[sm]\nsm_priority = 16\n", Path::new("e.toml")).unwrap_err();
        assert_eq!(err.to_string(), "e.toml: sm.priority = 16: must be 0-15");
    }

    #[test]
    fn empty_file_is_defaults() {
        assert_eq!(Config::parse("", Path::new("x")).unwrap(), Config::default());
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let err = Config::parse("[sm]\nlmc = 3\nbogus = 1\n", Path::new("/etc/ibsm.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("/etc/ibsm.toml:3:"), "{msg}");
        assert!(msg.contains("bogus"), "{msg}");
        let err = Config::parse("[sm]\nlmc = 9\n", Path::new("c.toml")).unwrap_err();
        assert_eq!(err.to_string(), "c.toml: sm.lmc = 9: must be 0-7");
        let err = Config::parse("[transport]\nwindow = \"x\"\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().starts_with("c.toml:2:"), "{err}");
    }
}
