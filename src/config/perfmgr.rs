//! The performance manager's settings (`[perfmgr]` in the config file).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the performance manager polls and what it calls an error jump.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PerfMgrConfig {
    /// Poll every port's counters (OpenSM `perfmgr`, off there: OpenSM's
    /// manager only logs; ibsm's feeds `/metrics`, which is the point).
    pub enabled: bool,
    /// Seconds from the start of one polling cycle to the start of the
    /// next (OpenSM `perfmgr_sweep_time_s`, 180 there). 60 here: a
    /// Prometheus `rate()` over the usual 2-5 minute window then sees
    /// several fresh readings, and a cycle costs two GMPs a port (about
    /// 20,000 on a 3,888-host fat tree), little beside a link's capacity.
    /// 0 is taken as 1.
    pub interval_s: u64,
    /// PerfMgt requests ibsm has handed to the transport and not had
    /// answered, at most (OpenSM `perfmgr_max_outstanding_queries`, 500
    /// there, where it is also the wire limit). 32 here: the transport's
    /// own PerfMgt window (16 on the wire by default) bounds the wire;
    /// this bounds what waits behind it, in a command queue the SMPs of
    /// a sweep share, so twice the window keeps the window full without
    /// taking slots a sweep needs. 0 is taken as 1.
    pub max_in_flight: usize,
    /// Also poll while this SM is a standby (the lead feeds targets).
    pub on_standby: bool,
    /// An error counter rising by more than this within one cycle is an
    /// error jump, logged at warn naming the port (OpenSM logs any error
    /// delta with `perfmgr_log_errors`; a few symbol errors a cycle are
    /// normal on long copper, so a threshold keeps the log readable).
    pub error_threshold: u64,
    /// An error counter rising this many times faster (per second) than
    /// in the previous cycle, by at least `error_threshold / 10` (and at
    /// least 1), is an error jump too. 0 turns the rate rule off.
    pub error_rate_factor: f64,
    /// Which ports `/metrics` gives series of their own. At 21 counters a
    /// port end, every port of an 11,664-host fabric is 146 MB a scrape,
    /// more than a Prometheus server should ingest every 15 s; the
    /// fabric-wide sums (`ibsm_fabric_port_*_total`) are always exported,
    /// and `/dump/port-counters` has every port's every counter.
    pub port_series: PortSeries,
    /// With `port_series = "errors"`, the ports with the most errors that
    /// get series, at most (about 1.5 KB each): the scrape stays bounded
    /// however sick the fabric. `ibsm_perfmgr_ports_with_errors` counts
    /// them all.
    pub port_series_max_ports: usize,
}

/// Which ports' counters `/metrics` exports one by one.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum PortSeries {
    /// Every polled port, every counter (the size grows with the fabric).
    All,
    /// Ports with an error counter above 0, their error counters only.
    #[default]
    Errors,
    /// No port: the fabric-wide sums only.
    None,
}

impl Default for PerfMgrConfig {
    fn default() -> Self {
        PerfMgrConfig {
            enabled: true,
            interval_s: 60,
            max_in_flight: 32,
            on_standby: false,
            error_threshold: 100,
            error_rate_factor: 10.0,
            port_series: PortSeries::Errors,
            port_series_max_ports: 1000,
        }
    }
}

impl PerfMgrConfig {
    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.interval_s.max(1))
    }
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.max(1)
    }
    /// The smallest rise the rate rule looks at.
    pub fn rate_floor(&self) -> u64 {
        (self.error_threshold / 10).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c: PerfMgrConfig = toml::from_str("").unwrap();
        assert_eq!(c, PerfMgrConfig::default());
        let c: PerfMgrConfig = toml::from_str("interval_s = 0\nmax_in_flight = 0\nerror_threshold = 5").unwrap();
        assert_eq!((c.interval(), c.max_in_flight(), c.rate_floor()), (Duration::from_secs(1), 1, 1));
        assert!(c.enabled && !c.on_standby);
        assert_eq!(c.port_series, PortSeries::Errors);
        let c: PerfMgrConfig = toml::from_str("port_series = \"all\"").unwrap();
        assert_eq!(c.port_series, PortSeries::All);
        let e = toml::from_str::<PerfMgrConfig>("port_series = \"some\"").unwrap_err().to_string();
        assert!(e.contains("some") && e.contains("errors"), "{e}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused() {
        let e = toml::from_str::<PerfMgrConfig>("sweep_time = 3").unwrap_err().to_string();
        assert!(e.contains("sweep_time"), "{e}");
        assert!(toml::from_str::<PerfMgrConfig>("interval_s = \"often\"").is_err());
    }
}
