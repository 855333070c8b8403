//! The Prometheus export: at scrape time, the totals the core published at
//! the end of its last cycle, one counter family per port counter labelled
//! `node_guid`, `node_desc` and `port` (ports that exist only: a port that
//! leaves the fabric leaves the next cycle's export), and the manager's
//! own `perfmgr_*` metrics.
//!
//! Names are without the `ibsm_` prefix the Metrics registry adds
//! (`Registry::new_custom(Some("ibsm"))`), as the other collectors are.
//! Data counters are exported in bytes (PortXmitData and PortRcvData count
//! 4-byte words).

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

use super::core::{PerfFailure, PerfShared, PerfSnapshot, QueryKind};
use super::counters::Counter;

const PORT_LABELS: &[&str] = &["node_guid", "node_desc", "port"];

/// The manager's own families: name, help, type, labels.
const SELF_FAMILIES: &[(&str, &str, MetricType, &[&str])] = &[
    ("perfmgr_cycles_total", "Performance manager polling cycles completed", MetricType::COUNTER, &[]),
    ("perfmgr_queries_total", "PerfMgt queries sent, by attribute", MetricType::COUNTER, &["attribute"]),
    (
        "perfmgr_unanswered_total",
        "PerfMgt queries that got no usable answer, by attribute and reason",
        MetricType::COUNTER,
        &["attribute", "reason"],
    ),
    ("perfmgr_clears_total", "PortCounters clears (Set) answered", MetricType::COUNTER, &[]),
    (
        "perfmgr_counters_backwards_total",
        "Port counters found lower than their last reading (cleared by someone else)",
        MetricType::COUNTER,
        &[],
    ),
    (
        "perfmgr_ports_skipped_total",
        "Port readings skipped because the port's PMA did not answer",
        MetricType::COUNTER,
        &[],
    ),
    ("perfmgr_error_jumps_total", "Sudden error-counter rises logged as events", MetricType::COUNTER, &[]),
    ("perfmgr_last_cycle_duration_seconds", "How long the last completed polling cycle took", MetricType::GAUGE, &[]),
    ("perfmgr_ports", "Ports the last completed cycle polled, by outcome", MetricType::GAUGE, &["outcome"]),
];

/// A collector over the performance manager's published totals.
pub struct PerfCollector {
    shared: PerfShared,
    descs: Vec<Desc>,
}

impl PerfCollector {
    pub fn new(shared: PerfShared) -> Self {
        let desc = |name: &str, help: &str, labels: &[&str]| {
            Desc::new(
                name.to_string(),
                help.to_string(),
                labels.iter().map(|l| l.to_string()).collect(),
                Default::default(),
            )
            .expect("family names and labels are valid")
        };
        let mut descs: Vec<Desc> = Counter::ALL.iter().map(|c| desc(c.metric(), c.help(), PORT_LABELS)).collect();
        descs.extend(SELF_FAMILIES.iter().map(|(n, h, _, l)| desc(n, h, l)));
        PerfCollector { shared, descs }
    }
}

impl Collector for PerfCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        families(&self.shared.latest())
    }
}

/// Every family of `snap`, in a fixed order; port families without any
/// port are left out.
pub fn families(snap: &PerfSnapshot) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    for c in Counter::ALL {
        let metrics: Vec<proto::Metric> = snap
            .ports
            .iter()
            .filter_map(|p| {
                let v = p.totals[c.index()]?;
                let guid = p.node_guid.to_string();
                let port = p.port.to_string();
                Some(metric(
                    &[("node_guid", &guid), ("node_desc", &p.node_desc), ("port", &port)],
                    MetricType::COUNTER,
                    v.saturating_mul(c.unit_factor()) as f64,
                ))
            })
            .collect();
        if !metrics.is_empty() {
            out.push(family(c.metric(), c.help(), MetricType::COUNTER, metrics));
        }
    }
    let s = &snap.stats;
    for (name, help, kind, _) in SELF_FAMILIES {
        let metrics = match *name {
            "perfmgr_cycles_total" => vec![metric(&[], *kind, s.cycles as f64)],
            "perfmgr_queries_total" => QueryKind::ALL
                .iter()
                .enumerate()
                .map(|(i, k)| metric(&[("attribute", k.label())], *kind, s.queries[i] as f64))
                .collect(),
            "perfmgr_unanswered_total" => QueryKind::ALL
                .iter()
                .enumerate()
                .flat_map(|(i, k)| {
                    PerfFailure::LABELS.iter().enumerate().map(move |(j, r)| {
                        metric(&[("attribute", k.label()), ("reason", r)], *kind, s.unanswered[i][j] as f64)
                    })
                })
                .collect(),
            "perfmgr_clears_total" => vec![metric(&[], *kind, s.clears as f64)],
            "perfmgr_counters_backwards_total" => vec![metric(&[], *kind, s.backwards as f64)],
            "perfmgr_ports_skipped_total" => vec![metric(&[], *kind, s.ports_skipped_total as f64)],
            "perfmgr_error_jumps_total" => vec![metric(&[], *kind, s.error_jumps as f64)],
            "perfmgr_last_cycle_duration_seconds" => vec![metric(&[], *kind, s.last_cycle_duration.as_secs_f64())],
            "perfmgr_ports" => vec![
                metric(&[("outcome", "polled")], *kind, s.last_cycle_polled as f64),
                metric(&[("outcome", "skipped")], *kind, s.last_cycle_skipped as f64),
            ],
            other => unreachable!("family {other} has no rows"),
        };
        out.push(family(name, help, *kind, metrics));
    }
    out
}

fn metric(labels: &[(&str, &str)], kind: MetricType, v: f64) -> proto::Metric {
    let mut m = proto::Metric::default();
    m.set_label(
        labels
            .iter()
            .map(|(n, v)| {
                let mut l = proto::LabelPair::default();
                l.set_name(n.to_string());
                l.set_value(v.to_string());
                l
            })
            .collect(),
    );
    if kind == MetricType::COUNTER {
        let mut c = proto::Counter::default();
        c.set_value(v);
        m.set_counter(c);
    } else {
        let mut g = proto::Gauge::default();
        g.set_value(v);
        m.set_gauge(g);
    }
    m
}

fn family(name: &str, help: &str, kind: MetricType, metrics: Vec<proto::Metric>) -> MetricFamily {
    let mut mf = MetricFamily::default();
    mf.set_name(name.to_string());
    mf.set_help(help.to_string());
    mf.set_field_type(kind);
    mf.set_metric(metrics);
    mf
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::perfmgr::core::{PerfStats, PortTotals};
    use crate::types::Guid;

    fn text(snap: PerfSnapshot) -> String {
        let shared = PerfShared::new();
        shared.publish_for_test(snap);
        let registry = prometheus::Registry::new_custom(Some("ibsm".into()), None).unwrap();
        registry.register(Box::new(PerfCollector::new(shared))).unwrap();
        let mut buf = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut buf).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn ports_and_self_metrics_are_exported_by_the_book() {
        let mut totals = [None; crate::perfmgr::counters::COUNTERS];
        totals[Counter::XmitData.index()] = Some(10);
        totals[Counter::SymbolErrors.index()] = Some(3);
        let mut stats = PerfStats { cycles: 2, last_cycle_duration: Duration::from_millis(1500), ..Default::default() };
        stats.unanswered[1][0] = 4;
        let snap = PerfSnapshot {
            ports: vec![PortTotals { node_guid: Guid(0x2c9), node_desc: Arc::from("sw \"a\""), port: 7, totals }],
            stats,
        };
        let t = text(snap);
        assert!(
            t.contains("ibsm_port_xmit_data_bytes_total{node_guid=\"0x00000000000002c9\",node_desc=\"sw \\\"a\\\"\",port=\"7\"} 40"),
            "{t}"
        );
        assert!(t.contains("# TYPE ibsm_port_symbol_errors_total counter"), "{t}");
        assert!(!t.contains("ibsm_port_rcv_data_bytes_total"), "unread counters are not made up");
        assert!(t.contains("ibsm_perfmgr_cycles_total 2"), "{t}");
        assert!(t.contains("ibsm_perfmgr_unanswered_total{attribute=\"port_counters\",reason=\"timeout\"} 4"), "{t}");
        assert!(t.contains("ibsm_perfmgr_last_cycle_duration_seconds 1.5"), "{t}");
        assert!(t.contains("ibsm_perfmgr_ports{outcome=\"skipped\"} 0"), "{t}");
    }

    #[test]
    fn an_empty_manager_exports_only_its_own_metrics() {
        let t = text(PerfSnapshot::default());
        assert!(!t.contains("ibsm_port_"));
        assert!(t.contains("ibsm_perfmgr_cycles_total 0"));
    }
}
