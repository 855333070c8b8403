//! The Prometheus export: at scrape time, the totals the core published at
//! the end of its last cycle, one counter family per port counter labelled
//! `node_guid`, `node_desc` and `port` (ports that exist only: a port that
//! leaves the fabric leaves the next cycle's export), and the manager's
//! own `perfmgr_*` metrics.
//!
//! [`register`] adds them to [`Metrics`]: the per-port families as a
//! [`PortSection`], written as text straight from the published
//! snapshot (over a million series on a large fabric: through
//! `prometheus`'s `MetricFamily`, a protobuf `Metric` and three
//! `LabelPair`s each, a scrape cost several times the text's size), and
//! the manager's own through the registry ([`SelfCollector`]).
//!
//! Collector names are without the `ibsm_` prefix the Metrics registry
//! adds (`Registry::new_custom(Some("ibsm"))`), as the other collectors
//! are; the section writes them with it. Data counters are exported in
//! bytes (PortXmitData and PortRcvData count 4-byte words).

use std::cmp::Ordering;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};
use tokio::sync::watch;

use super::text::{self, Format};
use super::{Metrics, TextSection, PREFIX};
use crate::config::perfmgr::{PerfMgrConfig, PortSeries};
use crate::perfmgr::core::{PerfFailure, PerfShared, PerfSnapshot, PortTotals, QueryKind};
use crate::perfmgr::counters::Counter;

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
    (
        "perfmgr_ports_with_errors",
        "Polled ports with an error counter above 0 (each has port series under port_series = errors, up to its cap)",
        MetricType::GAUGE,
        &[],
    ),
];

/// The name of the fabric-wide sum of `c`, without the prefix.
fn fabric_name(c: Counter) -> String {
    format!("fabric_{}", c.metric())
}

fn fabric_help(c: Counter) -> String {
    format!("Sum over every polled port, rises only: {}", c.help())
}

/// Exports what `shared` publishes through `metrics`: the per-port
/// families as a text section, the manager's own through the registry.
/// `configs` says which ports get series of their own
/// ([`PortSeries`]), read at each scrape.
pub fn register(metrics: &Metrics, shared: &PerfShared, configs: watch::Receiver<PerfMgrConfig>) {
    metrics.register(Box::new(SelfCollector::new(shared.clone())));
    metrics.register_text(Arc::new(PortSection::new(shared.clone(), configs)));
}

/// The per-port families, written from the latest snapshot as
/// `Registry::gather` and the encoders wrote [`PerfCollector`]'s: families
/// by name, ports by their label values as strings (GUID, description,
/// then port number as text), a family no port has left out.
pub struct PortSection {
    shared: PerfShared,
    configs: watch::Receiver<PerfMgrConfig>,
    /// `Counter::ALL` by family name.
    order: Vec<Counter>,
}

impl PortSection {
    pub fn new(shared: PerfShared, configs: watch::Receiver<PerfMgrConfig>) -> Self {
        let mut order = Counter::ALL.to_vec();
        order.sort_by_key(|c| c.metric());
        PortSection { shared, configs, order }
    }

    /// The ports to write (indexes into `ports`) and whether only their
    /// error counters are.
    fn selection(&self, ports: &[PortTotals]) -> (Vec<u32>, bool) {
        let (series, max) = {
            let c = self.configs.borrow();
            (c.port_series, c.port_series_max_ports)
        };
        match series {
            PortSeries::All => ((0..ports.len() as u32).collect(), false),
            PortSeries::None => (Vec::new(), true),
            PortSeries::Errors => {
                let mut erring: Vec<(u64, u32)> = ports
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (error_sum(p), i as u32))
                    .filter(|&(errors, _)| errors > 0)
                    .collect();
                // The most errors first; among equals, the labels' order,
                // so the same ports stay chosen scrape after scrape.
                erring.sort_by(|a, b| {
                    b.0.cmp(&a.0).then_with(|| label_order(&ports[a.1 as usize], &ports[b.1 as usize]))
                });
                erring.truncate(max);
                (erring.into_iter().map(|(_, i)| i).collect(), true)
            }
        }
    }

    fn write(&self, out: &mut String, format: Format) {
        let snap = self.shared.latest();
        let ports = &snap.ports;
        let (mut by_labels, errors_only) = self.selection(ports);
        by_labels.sort_by(|&a, &b| label_order(&ports[a as usize], &ports[b as usize]));
        // The label set of each port up to its value, written once:
        // `{node_guid="0x…",node_desc="…",port="7"} `.
        let mut labels = String::new();
        let mut ends = Vec::with_capacity(ports.len());
        for &i in &by_labels {
            let p = &ports[i as usize];
            use std::fmt::Write as _;
            let _ = write!(labels, "{{node_guid=\"{}\",node_desc=", p.node_guid);
            text::push_label_value(&mut labels, &p.node_desc);
            let _ = write!(labels, ",port=\"{}\"}} ", p.port);
            ends.push(labels.len());
        }
        for c in &self.order {
            if (errors_only && !c.is_error())
                || !by_labels.iter().any(|&i| ports[i as usize].totals[c.index()].is_some())
            {
                continue;
            }
            let name = prefixed(c.metric());
            text::counter_header(out, format, &name, c.help());
            let mut start = 0;
            for (&i, &end) in by_labels.iter().zip(&ends) {
                if let Some(v) = ports[i as usize].totals[c.index()] {
                    // Counter names end in `_total`, as both formats
                    // spell a counter's sample.
                    out.push_str(&name);
                    out.push_str(&labels[start..end]);
                    text::push_u64_value(out, v.saturating_mul(c.unit_factor()));
                    out.push('\n');
                }
                start = end;
            }
        }
    }
}

/// A port's error counters summed.
fn error_sum(p: &PortTotals) -> u64 {
    Counter::ALL.iter().filter(|c| c.is_error()).filter_map(|c| p.totals[c.index()]).fold(0, u64::saturating_add)
}

/// How `Registry::gather` orders a family's series: by each label value
/// as a string, in label order.
fn label_order(a: &PortTotals, b: &PortTotals) -> Ordering {
    // The GUID's text is fixed-width hex: its order is the number's.
    a.node_guid.0.cmp(&b.node_guid.0).then_with(|| a.node_desc.cmp(&b.node_desc)).then_with(|| {
        let (x, y) = (itoa3(a.port), itoa3(b.port));
        x.0[..x.1].cmp(&y.0[..y.1])
    })
}

/// A port number's decimal digits, on the stack.
fn itoa3(n: u8) -> ([u8; 3], usize) {
    let (h, t, o) = (n / 100, n / 10 % 10, n % 10);
    match (h, t) {
        (0, 0) => ([b'0' + o, 0, 0], 1),
        (0, _) => ([b'0' + t, b'0' + o, 0], 2),
        _ => ([b'0' + h, b'0' + t, b'0' + o], 3),
    }
}

fn prefixed(name: &str) -> String {
    format!("{PREFIX}_{name}")
}

impl TextSection for PortSection {
    fn write_text(&self, out: &mut String) {
        self.write(out, Format::Text)
    }

    fn write_openmetrics(&self, out: &mut String) {
        self.write(out, Format::OpenMetrics)
    }

    fn family_names(&self) -> Vec<String> {
        self.order.iter().map(|c| prefixed(c.metric())).collect()
    }

    fn size_hint(&self) -> usize {
        // A sample is about 120 bytes; most ports have most counters.
        let ports = self.shared.latest().ports.len();
        let c = self.configs.borrow();
        match c.port_series {
            PortSeries::All => ports * Counter::ALL.len() * 120,
            PortSeries::Errors => {
                let errors = Counter::ALL.iter().filter(|c| c.is_error()).count();
                ports.min(c.port_series_max_ports) * errors * 120
            }
            PortSeries::None => 0,
        }
    }
}

/// The manager's own `perfmgr_*` families, through the registry.
pub struct SelfCollector {
    shared: PerfShared,
    descs: Vec<Desc>,
}

impl SelfCollector {
    pub fn new(shared: PerfShared) -> Self {
        let mut descs: Vec<Desc> = SELF_FAMILIES.iter().map(|(n, h, _, l)| desc(n, h, l)).collect();
        descs.extend(Counter::ALL.iter().map(|&c| desc(&fabric_name(c), &fabric_help(c), &[])));
        SelfCollector { shared, descs }
    }
}

impl Collector for SelfCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self_families(&self.shared.latest())
    }
}

fn desc(name: &str, help: &str, labels: &[&str]) -> Desc {
    Desc::new(name.to_string(), help.to_string(), labels.iter().map(|l| l.to_string()).collect(), Default::default())
        .expect("family names and labels are valid")
}

/// Every family as one collector, per-port ones included: what [`register`]
/// replaces, kept as the reference the section's output is tested against
/// (its `MetricFamily` per series costs too much on a large fabric).
pub struct PerfCollector {
    shared: PerfShared,
    descs: Vec<Desc>,
}

impl PerfCollector {
    pub fn new(shared: PerfShared) -> Self {
        let mut descs: Vec<Desc> = Counter::ALL.iter().map(|c| desc(c.metric(), c.help(), PORT_LABELS)).collect();
        descs.extend(SELF_FAMILIES.iter().map(|(n, h, _, l)| desc(n, h, l)));
        descs.extend(Counter::ALL.iter().map(|&c| desc(&fabric_name(c), &fabric_help(c), &[])));
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
    let mut out = port_families(snap);
    out.extend(self_families(snap));
    out
}

/// The per-port families of `snap` as `MetricFamily`s.
pub fn port_families(snap: &PerfSnapshot) -> Vec<MetricFamily> {
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
    out
}

/// The manager's own families of `snap`.
fn self_families(snap: &PerfSnapshot) -> Vec<MetricFamily> {
    let mut out = Vec::new();
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
            "perfmgr_ports_with_errors" => {
                vec![metric(&[], *kind, snap.ports.iter().filter(|p| error_sum(p) > 0).count() as f64)]
            }
            other => unreachable!("family {other} has no rows"),
        };
        out.push(family(name, help, *kind, metrics));
    }
    for c in Counter::ALL {
        if let Some(v) = s.fabric[c.index()] {
            let value = v.saturating_mul(c.unit_factor()) as f64;
            let m = vec![metric(&[], MetricType::COUNTER, value)];
            out.push(family(&fabric_name(c), &fabric_help(c), MetricType::COUNTER, m));
        }
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
    super::set_value(&mut m, kind, v);
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

    fn series(port_series: PortSeries) -> watch::Receiver<PerfMgrConfig> {
        watch::channel(PerfMgrConfig { port_series, port_series_max_ports: 2, ..Default::default() }).1
    }

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

    /// Ports in no order, two-digit port numbers (sorted as text by the
    /// registry), descriptions that need escaping, a value past 2^53, and
    /// counters some ports lack.
    fn mixed() -> PerfSnapshot {
        let mut ports = Vec::new();
        for (g, desc) in [(0x30u64, "leaf \"3\"\\x"), (0x2c9, "host\nnext"), (0x10, "spine")] {
            for port in [12u8, 1, 7, 10, 2] {
                let mut totals = [None; crate::perfmgr::counters::COUNTERS];
                for c in Counter::ALL {
                    if !(c.index() + port as usize).is_multiple_of(3) {
                        totals[c.index()] = Some(g * 1000 + port as u64 * 10 + c.index() as u64);
                    }
                }
                totals[Counter::XmitData.index()] = Some(u64::MAX / 3 + port as u64);
                ports.push(PortTotals { node_guid: Guid(g), node_desc: Arc::from(desc), port, totals });
            }
        }
        PerfSnapshot { ports, stats: PerfStats { cycles: 3, ..Default::default() } }
    }

    /// What the old collector's families encode to, per-port ones only.
    fn reference(snap: &PerfSnapshot) -> (String, String) {
        let shared = PerfShared::new();
        shared.publish_for_test(snap.clone());
        let registry = prometheus::Registry::new_custom(Some("ibsm".into()), None).unwrap();
        registry.register(Box::new(PerfCollector::new(shared))).unwrap();
        let fams: Vec<_> = registry.gather().into_iter().filter(|f| f.get_name().starts_with("ibsm_port_")).collect();
        let mut text = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &fams, &mut text).unwrap();
        let mut om = String::new();
        crate::runtime::metrics::openmetrics::encode_families(&mut om, &fams);
        (String::from_utf8(text).unwrap(), om)
    }

    fn section(snap: &PerfSnapshot) -> (String, String) {
        let shared = PerfShared::new();
        shared.publish_for_test(snap.clone());
        let s = PortSection::new(shared, series(PortSeries::All));
        let (mut text, mut om) = (String::new(), String::new());
        s.write_text(&mut text);
        s.write_openmetrics(&mut om);
        (text, om)
    }

    #[test]
    fn the_section_writes_what_the_collector_encoded() {
        let snap = mixed();
        let (text, om) = section(&snap);
        let (want_text, want_om) = reference(&snap);
        assert!(text.contains("node_desc=\"leaf \\\"3\\\"\\\\x\""), "{text}");
        assert!(text.contains("node_desc=\"host\\nnext\""), "{text}");
        assert!(om.contains("# TYPE ibsm_port_xmit_data_bytes counter\n"), "{om}");
        assert_eq!(text, want_text);
        assert_eq!(om, want_om);
        // And for one port only, and none.
        let one = PerfSnapshot { ports: snap.ports[..1].to_vec(), stats: PerfStats::default() };
        assert_eq!(section(&one), reference(&one));
        assert_eq!(section(&PerfSnapshot::default()), (String::new(), String::new()));
    }

    #[test]
    fn registered_the_families_are_rendered_and_named_once() {
        let shared = PerfShared::new();
        shared.publish_for_test(mixed());
        let m = Metrics::new();
        register(&m, &shared, series(PortSeries::All));
        let text = m.render();
        let om = m.render_openmetrics();
        for c in Counter::ALL {
            let n = format!("ibsm_{}", c.metric());
            assert_eq!(text.matches(&format!("# TYPE {n} counter\n")).count(), 1, "{n}");
            assert!(m.family_names().contains(&n), "{n}");
        }
        assert_eq!(text.matches("# TYPE ibsm_perfmgr_cycles_total counter").count(), 1);
        assert!(text.contains("ibsm_perfmgr_cycles_total 3\n"));
        assert!(om.ends_with("ibsm_port_xmit_wait_total{node_guid=\"0x00000000000002c9\",node_desc=\"host\\nnext\",port=\"7\"} 713082\n# EOF\n"), "{om}");
        // A second registration is refused: its names are taken.
        register(&m, &shared, series(PortSeries::All));
        assert_eq!(m.render().matches("# TYPE ibsm_port_xmit_wait_total").count(), 1);
        // The next buffer is sized from this one.
        assert_eq!(m.render().len(), text.len());
    }

    #[test]
    fn by_default_only_the_most_erring_ports_get_series_and_only_their_errors() {
        let mut snap = mixed();
        // 15 ports; the cap (2 in `series`) keeps the two with most errors.
        for p in &mut snap.ports {
            for c in Counter::ALL.iter().filter(|c| c.is_error()) {
                p.totals[c.index()] = Some(0);
            }
        }
        snap.ports[3].totals[Counter::SymbolErrors.index()] = Some(5);
        snap.ports[9].totals[Counter::LinkDowned.index()] = Some(9);
        snap.ports[12].totals[Counter::RcvErrors.index()] = Some(1);
        snap.stats.fabric[Counter::SymbolErrors.index()] = Some(5);
        snap.stats.fabric[Counter::XmitData.index()] = Some(100);
        let shared = PerfShared::new();
        shared.publish_for_test(snap.clone());
        let m = Metrics::new();
        let (tx, rx) = watch::channel(PerfMgrConfig { port_series_max_ports: 2, ..Default::default() });
        register(&m, &shared, rx);
        let text = m.render();
        // (GUID, port) of each port with series.
        let ports_in = |t: &str| {
            let mut seen: Vec<(String, String)> = t
                .lines()
                .filter(|l| l.starts_with("ibsm_port_"))
                .map(|l| {
                    let guid = l.split("node_guid=\"").nth(1).unwrap()[..18].to_string();
                    let port = l.rsplit(",port=\"").next().unwrap().split('"').next().unwrap().to_string();
                    (guid, port)
                })
                .collect();
            seen.sort();
            seen.dedup();
            seen
        };
        let label = |i: usize| (snap.ports[i].node_guid.to_string(), snap.ports[i].port.to_string());
        assert_eq!(
            ports_in(&text),
            {
                let mut v = vec![label(3), label(9)];
                v.sort();
                v
            },
            "{text}"
        );
        assert!(!text.contains("ibsm_port_xmit_data_bytes_total{"), "data counters stay out: {text}");
        assert!(text.contains("ibsm_port_link_downed_total{"), "{text}");
        assert!(text.contains("ibsm_perfmgr_ports_with_errors 3\n"), "{text}");
        assert!(text.contains("ibsm_fabric_port_symbol_errors_total 5\n"), "{text}");
        assert!(text.contains("ibsm_fabric_port_xmit_data_bytes_total 400\n"), "in bytes: {text}");
        assert!(!text.contains("ibsm_fabric_port_rcv_errors_total"), "a sum no port fed is not made up");
        // Reloaded to every port, then to none.
        tx.send_modify(|c| c.port_series = PortSeries::All);
        assert_eq!(ports_in(&m.render()).len(), 15);
        tx.send_modify(|c| c.port_series = PortSeries::None);
        let none = m.render();
        assert!(ports_in(&none).is_empty() && none.contains("ibsm_fabric_port_symbol_errors_total 5\n"), "{none}");
    }

    /// The default scrape of 11,664 hosts' 69,984 polled ports stays under
    /// 10 MB even when every port has every error, and `all` is what it
    /// was (the figure the default exists for).
    #[test]
    fn the_default_scrape_is_bounded_on_a_sick_large_fabric() {
        let ports: Vec<PortTotals> = (0..69_984u64)
            .map(|i| PortTotals {
                node_guid: Guid(0x0002_c903_0000_0000 + i / 36),
                node_desc: Arc::from(format!("ibsm-sim node {} HCA-1", i / 36).as_str()),
                port: (i % 36 + 1) as u8,
                totals: [Some(1_000_000 + i); crate::perfmgr::counters::COUNTERS],
            })
            .collect();
        let shared = PerfShared::new();
        shared.publish_for_test(PerfSnapshot { ports, stats: PerfStats { cycles: 1, ..Default::default() } });
        let size = |series: PortSeries| {
            let s = PortSection::new(
                shared.clone(),
                watch::channel(PerfMgrConfig { port_series: series, ..Default::default() }).1,
            );
            let mut out = String::new();
            s.write_text(&mut out);
            out
        };
        let default = size(PortSeries::Errors);
        assert!(default.len() < 2_000_000, "{} bytes", default.len());
        assert_eq!(default.lines().filter(|l| !l.starts_with('#')).count(), 1000 * 12, "the cap, error counters only");
        let all = size(PortSeries::All);
        assert!(all.len() > 100_000_000, "{} bytes: every port's every counter", all.len());
    }
}
