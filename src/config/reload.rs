//! SIGHUP: what a new configuration changes while the SM runs, and what
//! waits for a restart.
//!
//! Both configurations are compared key by key through their TOML form,
//! so a key added to `Config` later is covered without touching this
//! file: it needs a restart until it is listed in [`LIVE`]. The runtime
//! runs on [`ReloadPlan::apply`]: the old configuration with the live
//! changes taken from the new one, so a key that needs a restart keeps
//! its running value until the SM restarts.

use std::collections::BTreeMap;

use super::Config;

/// Keys (or `section.` prefixes) the runtime applies without a restart.
pub const LIVE: &[&str] = &[
    "log.level",
    "sm.sweep_interval_s",
    "qos.",
    "sm.partition_config_file",
    "sm.part_enforce",
    "perfmgr.interval_s",
    "perfmgr.max_in_flight",
    "perfmgr.on_standby",
    "perfmgr.error_threshold",
    "perfmgr.error_rate_factor",
    "perfmgr.port_series",
    "perfmgr.port_series_max_ports",
];

/// Keys whose values are secrets: a change is logged without them.
const SECRET: &[&str] = &["sm.sm_key", "sm.m_key", "sa.sa_key"];

/// One key that differs. `None` is a key left unset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `section.key`.
    pub key: String,
    pub old: Option<String>,
    pub new: Option<String>,
    /// Applied now; otherwise the running value stays until a restart.
    pub live: bool,
}

impl Change {
    fn describe(&self) -> String {
        if SECRET.contains(&self.key.as_str()) {
            return format!("{} (value not logged)", self.key);
        }
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "unset".to_string());
        format!("{} {} -> {}", self.key, show(&self.old), show(&self.new))
    }
}

/// What a reload changes, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadPlan {
    pub changes: Vec<Change>,
}

/// Compares the running configuration with a new, already validated one.
pub fn reload_plan(old: &Config, new: &Config) -> ReloadPlan {
    let (old, new) = (flatten(old), flatten(new));
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    let changes = keys
        .into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .map(|k| Change { key: k.clone(), old: old.get(k).cloned(), new: new.get(k).cloned(), live: is_live(k) })
        .collect();
    ReloadPlan { changes }
}

fn is_live(key: &str) -> bool {
    LIVE.iter().any(|l| if l.ends_with('.') { key.starts_with(l) } else { key == *l })
}

impl ReloadPlan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Changes applied now.
    pub fn live(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.live)
    }

    /// Changes that wait for a restart.
    pub fn restart(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| !c.live)
    }

    pub fn needs_restart(&self) -> bool {
        self.restart().next().is_some()
    }

    /// Whether a live change touches `key`, or any key under `section.`
    /// when `key` ends with a dot (`"qos."`).
    pub fn changes(&self, key: &str) -> bool {
        self.live().any(|c| if key.ends_with('.') { c.key.starts_with(key) } else { c.key == key })
    }

    /// One line for the log.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "configuration reloaded: nothing changed".to_string();
        }
        let list = |it: &mut dyn Iterator<Item = &Change>| it.map(Change::describe).collect::<Vec<_>>().join(", ");
        let live = list(&mut self.live());
        let restart = list(&mut self.restart());
        let mut out = String::from("configuration reloaded");
        if !live.is_empty() {
            out.push_str(&format!(": applied {live}"));
        }
        if !restart.is_empty() {
            out.push_str(&format!("; need a restart, running values kept: {restart}"));
        }
        out
    }

    /// The configuration to run with: `old`, with this plan's live
    /// changes taken from `new`.
    pub fn apply(&self, old: &Config, new: &Config) -> Config {
        let mut merged = toml::Value::try_from(old).expect("a config serializes");
        let newer = toml::Value::try_from(new).expect("a config serializes");
        for change in self.live() {
            let (section, key) = change.key.split_once('.').expect("keys are section.key");
            let value = newer.get(section).and_then(|s| s.get(key)).cloned();
            let table = merged
                .as_table_mut()
                .expect("a config is a table")
                .entry(section)
                .or_insert_with(|| toml::Value::Table(Default::default()));
            let Some(table) = table.as_table_mut() else { continue };
            match value {
                Some(v) => {
                    table.insert(key.to_string(), v);
                }
                None => {
                    table.remove(key);
                }
            }
        }
        // Every value came out of a valid Config, so this parses.
        merged.try_into().expect("a merge of two valid configs is valid")
    }
}

/// `section.key` -> the value as TOML text. Nested tables are flattened
/// with dots (a key of a sub-table is `section.sub.key`, and `apply`
/// replaces the sub-table whole).
fn flatten(config: &Config) -> BTreeMap<String, String> {
    let value = toml::Value::try_from(config).expect("a config serializes");
    let mut out = BTreeMap::new();
    if let Some(sections) = value.as_table() {
        for (section, table) in sections {
            match table.as_table() {
                Some(t) => {
                    for (key, v) in t {
                        out.insert(format!("{section}.{key}"), v.to_string());
                    }
                }
                None => {
                    out.insert(section.clone(), table.to_string());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(text, Path::new("new.toml")).unwrap()
    }

    #[test]
    fn nothing_changed() {
        let plan = reload_plan(&Config::default(), &parse(""));
        assert!(plan.is_empty());
        assert_eq!(plan.summary(), "configuration reloaded: nothing changed");
    }

    #[test]
    fn live_and_restart_keys_are_told_apart() {
        let old = Config::default();
        let new = parse(
            "[log]\nlevel = \"debug\"\n[sm]\nsweep_interval_s = 30\npartition_config_file = \"/etc/p.conf\"\n\
             m_key = \"0x1234\"\n[transport]\nwindow = 32\n[qos]\nenabled = true\n[metrics]\nlisten = \"0.0.0.0:9464\"\n",
        );
        let plan = reload_plan(&old, &new);
        let live: Vec<&str> = plan.live().map(|c| c.key.as_str()).collect();
        let restart: Vec<&str> = plan.restart().map(|c| c.key.as_str()).collect();
        assert_eq!(live, ["log.level", "qos.enabled", "sm.partition_config_file", "sm.sweep_interval_s"]);
        assert_eq!(restart, ["metrics.listen", "sm.m_key", "transport.window"]);
        assert!(plan.needs_restart());
        assert!(plan.changes("qos.") && plan.changes("log.level") && !plan.changes("transport.window"));
        let s = plan.summary();
        assert!(s.contains("applied log.level \"info\" -> \"debug\""), "{s}");
        assert!(s.contains("sm.partition_config_file unset -> \"/etc/p.conf\""), "{s}");
        assert!(s.contains("need a restart, running values kept: metrics.listen"), "{s}");
        assert!(s.contains("sm.m_key (value not logged)") && !s.contains("1234"), "{s}");

        let running = plan.apply(&old, &new);
        assert_eq!(running.log.level, "debug");
        assert_eq!(running.sm.sweep_interval_s, 30);
        assert!(running.qos.enabled);
        assert_eq!(running.sm.partition_config_file, Some(PathBuf::from("/etc/p.conf")));
        // Restart-only keys keep their running values.
        assert_eq!(running.transport.window, old.transport.window);
        assert_eq!(running.sm.m_key, 0);
        assert_eq!(running.metrics.listen, old.metrics.listen);
        // Applying again changes nothing live.
        assert!(reload_plan(&running, &new).live().next().is_none());
    }

    #[test]
    fn a_key_removed_from_the_file_goes_back_to_its_default_or_unset() {
        let old = parse("[sm]\npartition_config_file = \"/etc/p.conf\"\nsweep_interval_s = 5\n");
        let new = Config::default();
        let plan = reload_plan(&old, &new);
        let running = plan.apply(&old, &new);
        assert_eq!(running.sm.partition_config_file, None);
        assert_eq!(running.sm.sweep_interval_s, 10);
        assert!(!plan.needs_restart());
    }
}
