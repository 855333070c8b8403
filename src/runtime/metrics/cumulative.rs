//! Counters that other layers keep cumulatively (the transaction table's
//! `TransportStats`, the SA's `SaStats`), exported as Prometheus counters
//! by the book: the owner stores its newest figures, and this collector
//! reads them at scrape time. Nothing is converted into deltas, so a
//! counter never drifts from its source and never goes backwards while the
//! source does not.
//!
//! Label values are bounded: codes ibsm knows by name, every other code in
//! one `other` series (a fabric sending made-up attribute IDs adds one
//! series, not one per ID).

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

use crate::exchange::txn::{MadCounters, MadKey};
use crate::mad::{AttributeId, Method, MgmtClass, SaAttributeId};
use crate::sa::SaStats;
use crate::transport::TransportStats;

/// One family this collector emits.
pub(super) struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: MetricType,
    pub labels: &'static [&'static str],
}

const MAD: &[&str] = &["class", "attribute", "method"];

/// Every family, in the order they are emitted. The names are without the
/// registry's `ibsm_` prefix.
pub(super) const FAMILIES: &[Family] = &[
    // The transaction table (src/exchange/txn/mod.rs).
    Family {
        name: "mads_sent_total",
        help: "MADs put on the wire (retries and RMPP ACKs included) by class, attribute and method",
        kind: MetricType::COUNTER,
        labels: MAD,
    },
    Family {
        name: "mad_retries_total",
        help: "MADs sent again after a timeout, by class, attribute and method",
        kind: MetricType::COUNTER,
        labels: MAD,
    },
    Family {
        name: "mad_timeouts_total",
        help: "MAD attempts whose timer expired, by class, attribute and method",
        kind: MetricType::COUNTER,
        labels: MAD,
    },
    Family {
        name: "mad_failures_total",
        help: "MAD transactions given up after the last retry, by class, attribute and method",
        kind: MetricType::COUNTER,
        labels: MAD,
    },
    Family {
        name: "mad_responses_total",
        help: "Responses that completed a MAD transaction, by class, attribute and method",
        kind: MetricType::COUNTER,
        labels: MAD,
    },
    Family {
        name: "mads_unsolicited_total",
        help: "Requests, traps and reports received from others, by class, attribute and method",
        kind: MetricType::COUNTER,
        labels: MAD,
    },
    Family {
        name: "mads_stray_total",
        help: "Responses that matched no MAD transaction (dropped), by class",
        kind: MetricType::COUNTER,
        labels: &["class"],
    },
    Family {
        name: "mads_malformed_total",
        help: "Received buffers too short to hold a MAD header",
        kind: MetricType::COUNTER,
        labels: &[],
    },
    Family {
        name: "mads_unsolicited_dropped_total",
        help: "Unsolicited MADs dropped because the SM's queue was full",
        kind: MetricType::COUNTER,
        labels: &[],
    },
    Family {
        name: "mad_device_errors_total",
        help: "Failed sends and receives on the umad device",
        kind: MetricType::COUNTER,
        labels: &[],
    },
    Family {
        name: "mad_response_seconds_total",
        help: "Sum of MAD response times (first send of the answered attempt to its response); divide by ibsm_mad_responses_total for the mean",
        kind: MetricType::COUNTER,
        labels: &[],
    },
    Family {
        name: "mad_response_max_seconds",
        help: "Longest MAD response time seen since start",
        kind: MetricType::GAUGE,
        labels: &[],
    },
    Family {
        name: "mads_in_flight",
        help: "MAD transactions on the wire now, at the last update",
        kind: MetricType::GAUGE,
        labels: &[],
    },
    Family {
        name: "mads_queued",
        help: "MAD transactions waiting for window space, at the last update",
        kind: MetricType::GAUGE,
        labels: &[],
    },
    Family {
        name: "mads_receiving",
        help: "MAD transactions whose RMPP answer is being reassembled, at the last update",
        kind: MetricType::GAUGE,
        labels: &[],
    },
    // The SA (src/sa/stats.rs).
    Family {
        name: "sa_queries_total",
        help: "SA requests by attribute, method and result: ok and error count answers, records the records in successful ones",
        kind: MetricType::COUNTER,
        labels: &["attribute", "method", "result"],
    },
    Family {
        name: "sa_error_answers_total",
        help: "SA answers with a non-zero status, by status word",
        kind: MetricType::COUNTER,
        labels: &["status"],
    },
    Family {
        name: "sa_events_total",
        help: "SA events: drops by reason, RMPP transfers, Reports, multicast joins and leaves, traps, leases, mirror reads, the state stream between SMs",
        kind: MetricType::COUNTER,
        labels: &["kind", "what"],
    },
    Family {
        name: "sa_snapshots_total",
        help: "Sweep snapshots the SA took in",
        kind: MetricType::COUNTER,
        labels: &[],
    },
    Family {
        name: "sa_records",
        help: "Records the SA built from its last snapshot",
        kind: MetricType::GAUGE,
        labels: &[],
    },
    Family {
        name: "sa_registered",
        help: "ServiceRecords, InformInfo subscriptions, alias GUIDs and mirrored copies held now; RMPP answers in flight",
        kind: MetricType::GAUGE,
        labels: &["kind"],
    },
    Family {
        name: "mcast_groups",
        help: "Multicast groups the SA holds (MCMemberRecord)",
        kind: MetricType::GAUGE,
        labels: &[],
    },
    Family {
        name: "mcast_members",
        help: "Memberships of the SA's multicast groups (one per port and group)",
        kind: MetricType::GAUGE,
        labels: &[],
    },
];

/// Where the owners put their newest figures; clones share them.
#[derive(Clone, Default)]
pub(super) struct Latest {
    pub transport: Arc<ArcSwapOption<TransportStats>>,
    pub sa: Arc<ArcSwapOption<SaStats>>,
}

/// The collector over [`Latest`].
pub(super) struct CumulativeCollector {
    latest: Latest,
    descs: Vec<Desc>,
}

impl CumulativeCollector {
    pub fn new(latest: Latest) -> CumulativeCollector {
        let descs = FAMILIES
            .iter()
            .map(|f| {
                let labels = f.labels.iter().map(|l| l.to_string()).collect();
                Desc::new(f.name.to_string(), f.help.to_string(), labels, Default::default())
                    .expect("family names and labels are valid")
            })
            .collect();
        CumulativeCollector { latest, descs }
    }
}

/// The samples of one family: label values -> value.
type Rows = BTreeMap<Vec<String>, f64>;

impl Collector for CumulativeCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut rows: BTreeMap<&'static str, Rows> = BTreeMap::new();
        if let Some(t) = self.latest.transport.load_full() {
            transport_rows(&t, &mut rows);
        }
        if let Some(s) = self.latest.sa.load_full() {
            sa_rows(&s, &mut rows);
        }
        FAMILIES
            .iter()
            .filter_map(|f| {
                let r = rows.remove(f.name)?;
                Some(family(f, r))
            })
            .collect()
    }
}

/// Gives a sample its value as a counter or a gauge, by its family's type.
pub(crate) fn set_value(m: &mut proto::Metric, kind: MetricType, v: f64) {
    if kind == MetricType::COUNTER {
        let mut c = proto::Counter::default();
        c.set_value(v);
        m.set_counter(c);
    } else {
        let mut g = proto::Gauge::default();
        g.set_value(v);
        m.set_gauge(g);
    }
}

fn family(f: &Family, rows: Rows) -> MetricFamily {
    let mut mf = MetricFamily::default();
    mf.set_name(f.name.to_string());
    mf.set_help(f.help.to_string());
    mf.set_field_type(f.kind);
    let metrics = rows
        .into_iter()
        .map(|(values, v)| {
            let mut m = proto::Metric::default();
            let mut labels: Vec<proto::LabelPair> = f
                .labels
                .iter()
                .zip(values)
                .map(|(name, value)| {
                    let mut l = proto::LabelPair::default();
                    l.set_name(name.to_string());
                    l.set_value(value);
                    l
                })
                .collect();
            // By name, as the crate's own families write them.
            labels.sort_by(|a, b| a.get_name().cmp(b.get_name()));
            m.set_label(labels);
            set_value(&mut m, f.kind, v);
            m
        })
        .collect();
    mf.set_metric(metrics);
    mf
}

fn add(rows: &mut BTreeMap<&'static str, Rows>, name: &'static str, labels: &[&str], v: f64) {
    debug_assert!(FAMILIES.iter().any(|f| f.name == name && f.labels.len() == labels.len()), "{name}");
    let key = labels.iter().map(|s| s.to_string()).collect();
    // Unknown codes folded into `other` add up.
    *rows.entry(name).or_default().entry(key).or_default() += v;
}

/// Bounded label values of a MAD key: (class, attribute, method).
pub(super) fn mad_labels(key: &MadKey) -> (String, String, String) {
    let class = match key.class() {
        MgmtClass::Unknown(_) => "other".to_string(),
        c => format!("{c:?}"),
    };
    let attribute = attribute_name(key.class(), key.attribute).unwrap_or("other").to_string();
    let method = match key.method() {
        Method::Unknown(_) => "other".to_string(),
        m => format!("{m:?}"),
    };
    (class, attribute, method)
}

/// The name of an attribute of `class`, if ibsm knows it. Each class has
/// its own code space: 0x0012 is SwitchInfo to the SM classes,
/// PortInfoRecord to the SA and PortCounters to PerfMgt.
fn attribute_name(class: MgmtClass, attribute: u16) -> Option<&'static str> {
    match class {
        MgmtClass::SubnMgmtLid | MgmtClass::SubnMgmtDirected => smp_attribute(AttributeId::from(attribute)),
        MgmtClass::SubnAdm => sa_attribute(SaAttributeId::from(attribute)),
        MgmtClass::Perf => perf_attribute(attribute),
        MgmtClass::Unknown(_) => None,
    }
}

/// IBA 14.2.5, Table 145.
fn smp_attribute(a: AttributeId) -> Option<&'static str> {
    Some(match a {
        AttributeId::ClassPortInfo => "ClassPortInfo",
        AttributeId::Notice => "Notice",
        AttributeId::InformInfo => "InformInfo",
        AttributeId::NodeDescription => "NodeDescription",
        AttributeId::NodeInfo => "NodeInfo",
        AttributeId::SwitchInfo => "SwitchInfo",
        AttributeId::GuidInfo => "GuidInfo",
        AttributeId::PortInfo => "PortInfo",
        AttributeId::PKeyTable => "PKeyTable",
        AttributeId::SlToVlMappingTable => "SlToVlMappingTable",
        AttributeId::VlArbitrationTable => "VlArbitrationTable",
        AttributeId::LinearForwardingTable => "LinearForwardingTable",
        AttributeId::RandomForwardingTable => "RandomForwardingTable",
        AttributeId::MulticastForwardingTable => "MulticastForwardingTable",
        AttributeId::SmInfo => "SmInfo",
        AttributeId::VendorDiag => "VendorDiag",
        AttributeId::LedInfo => "LedInfo",
        _ => return None,
    })
}

/// IBA 15.2.5, Table 193.
fn sa_attribute(a: SaAttributeId) -> Option<&'static str> {
    Some(match a {
        SaAttributeId::ClassPortInfo => "ClassPortInfo",
        SaAttributeId::Notice => "Notice",
        SaAttributeId::InformInfo => "InformInfo",
        SaAttributeId::NodeRecord => "NodeRecord",
        SaAttributeId::PortInfoRecord => "PortInfoRecord",
        SaAttributeId::SlToVlMappingTableRecord => "SlToVlMappingTableRecord",
        SaAttributeId::SwitchInfoRecord => "SwitchInfoRecord",
        SaAttributeId::LinearForwardingTableRecord => "LinearForwardingTableRecord",
        SaAttributeId::RandomForwardingTableRecord => "RandomForwardingTableRecord",
        SaAttributeId::MulticastForwardingTableRecord => "MulticastForwardingTableRecord",
        SaAttributeId::SmInfoRecord => "SmInfoRecord",
        SaAttributeId::LinkRecord => "LinkRecord",
        SaAttributeId::GuidInfoRecord => "GuidInfoRecord",
        SaAttributeId::ServiceRecord => "ServiceRecord",
        SaAttributeId::PKeyTableRecord => "PKeyTableRecord",
        SaAttributeId::PathRecord => "PathRecord",
        SaAttributeId::VlArbitrationTableRecord => "VlArbitrationTableRecord",
        SaAttributeId::McMemberRecord => "McMemberRecord",
        SaAttributeId::TraceRecord => "TraceRecord",
        SaAttributeId::MultiPathRecord => "MultiPathRecord",
        SaAttributeId::ServiceAssociationRecord => "ServiceAssociationRecord",
        SaAttributeId::InformInfoRecord => "InformInfoRecord",
        _ => return None,
    })
}

/// PerfMgt attributes (IBA 16.1.3, Table 236 and Annex A13's extended
/// counters) the performance manager may send.
fn perf_attribute(a: u16) -> Option<&'static str> {
    Some(match a {
        0x0001 => "ClassPortInfo",
        0x0010 => "PortSamplesControl",
        0x0011 => "PortSamplesResult",
        0x0012 => "PortCounters",
        0x001D => "PortCountersExtended",
        0x001E => "PortSamplesResultExtended",
        _ => return None,
    })
}

/// The SA's attribute and method names, as `sa_queries_total` labels them.
pub(super) fn sa_query_labels(attribute: u16, method: u8) -> (String, String) {
    if (attribute, method) == SaStats::OTHER_QUERY {
        return ("other".into(), "other".into());
    }
    let attr = sa_attribute(SaAttributeId::from(attribute)).unwrap_or("other").to_string();
    let method = match Method::from(method) {
        Method::Unknown(_) => "other".to_string(),
        m => format!("{m:?}"),
    };
    (attr, method)
}

fn transport_rows(t: &TransportStats, rows: &mut BTreeMap<&'static str, Rows>) {
    for (key, c) in &t.txn.by_mad {
        let (class, attr, method) = mad_labels(key);
        let l = [class.as_str(), attr.as_str(), method.as_str()];
        let MadCounters { sent, retries, timeouts, failed, responses, unsolicited, strays, .. } = *c;
        for (name, v) in [
            ("mads_sent_total", sent),
            ("mad_retries_total", retries),
            ("mad_timeouts_total", timeouts),
            ("mad_failures_total", failed),
            ("mad_responses_total", responses),
            ("mads_unsolicited_total", unsolicited),
        ] {
            add(rows, name, &l, v as f64);
        }
        add(rows, "mads_stray_total", &[&class], strays as f64);
    }
    add(rows, "mads_malformed_total", &[], t.txn.malformed as f64);
    add(rows, "mads_unsolicited_dropped_total", &[], t.unsolicited_dropped as f64);
    add(rows, "mad_device_errors_total", &[], t.device_errors as f64);
    add(rows, "mad_response_seconds_total", &[], t.txn.rtt_total.as_secs_f64());
    add(rows, "mad_response_max_seconds", &[], t.txn.rtt_max.as_secs_f64());
    add(rows, "mads_in_flight", &[], t.txn.in_flight as f64);
    add(rows, "mads_queued", &[], t.txn.queued as f64);
    add(rows, "mads_receiving", &[], t.txn.receiving as f64);
}

fn sa_rows(s: &SaStats, rows: &mut BTreeMap<&'static str, Rows>) {
    for (&(attribute, method), c) in &s.by_query {
        let (attr, method) = sa_query_labels(attribute, method);
        for (result, v) in [("ok", c.ok), ("error", c.errors), ("records", c.records)] {
            add(rows, "sa_queries_total", &[&attr, &method, result], v as f64);
        }
    }
    for (&status, &n) in &s.by_status {
        // The SA's own answers: a handful of status words.
        add(rows, "sa_error_answers_total", &[&format!("{status:#06x}")], n as f64);
    }
    let d = &s.drops;
    let r = &s.rmpp;
    let rep = &s.reports;
    let mc = &s.mcast;
    for (kind, what, v) in [
        ("drop", "malformed", d.malformed),
        ("drop", "not_serving", d.not_serving),
        ("drop", "bad_sm_key", d.bad_sm_key),
        ("drop", "stray_response", d.stray_responses),
        ("drop", "stray_rmpp", d.stray_rmpp),
        ("drop", "duplicate_request", d.duplicate_requests),
        ("drop", "segmented_request", d.segmented_requests),
        ("drop", "rmpp_busy", d.rmpp_busy),
        ("drop", "rmpp_requester_cap", d.rmpp_requester_cap),
        ("drop", "answer_too_large", d.answer_too_large),
        ("drop", "service_cap", d.service_cap),
        ("drop", "subscription_cap", d.subscription_cap),
        ("drop", "alias_guid_cap", d.alias_guid_cap),
        ("drop", "mcast_cap", d.mcast_cap),
        ("drop", "report_cap", d.report_cap),
        ("drop", "report_subscriber_cap", d.report_subscriber_cap),
        ("drop", "queue_full", d.queue_full),
        ("drop", "requester_share", d.requester_share),
        ("rmpp", "started", r.started),
        ("rmpp", "completed", r.completed),
        ("rmpp", "failed", r.failed),
        ("rmpp", "segments", r.segments),
        ("rmpp", "resent", r.resent),
        ("rmpp", "requests_received", r.requests_received),
        ("report", "queued", rep.queued),
        ("report", "sent", rep.sent),
        ("report", "resent", rep.resent),
        ("report", "acknowledged", rep.acknowledged),
        ("report", "given_up", rep.given_up),
        ("report", "gid_in_service", rep.gid_in_service),
        ("report", "gid_out_of_service", rep.gid_out_of_service),
        ("report", "mcast_created", rep.mcast_created),
        ("report", "mcast_deleted", rep.mcast_deleted),
        ("mcast", "join", mc.joins),
        ("mcast", "leave", mc.leaves),
        ("mcast", "join_error", mc.join_errors),
        ("mcast", "leave_error", mc.leave_errors),
        ("mcast", "member_dropped", mc.members_dropped),
        ("mcast", "well_known_unplaced", mc.well_known_unplaced),
        ("trap", "received", rep.traps_received),
        ("lease", "expired", s.leases_expired),
        ("mad", "received", s.received),
        ("mad", "answered", s.answered),
        ("mirror", "reads", s.mirror.reads),
        ("mirror", "ignored", s.mirror.ignored),
        ("mirror", "over_cap", s.mirror.over_cap),
        ("mirror", "takeovers", s.mirror.takeovers),
        ("mirror", "imported_services", s.mirror.imported_services),
        ("mirror", "imported_subscriptions", s.mirror.imported_subscriptions),
        ("mirror", "imported_alias_guids", s.mirror.imported_alias_guids),
        ("mirror", "skipped_present", s.mirror.skipped_present),
        ("mirror", "skipped_port_gone", s.mirror.skipped_port_gone),
        ("mirror", "skipped_refused", s.mirror.skipped_refused),
        ("mirror", "skipped_over_cap", s.mirror.skipped_over_cap),
        ("sync", "changes_sent", s.sync.changes_sent),
        ("sync", "changes_resent", s.sync.changes_resent),
        ("sync", "resyncs", s.sync.resyncs),
        ("sync", "changes_applied", s.sync.changes_applied),
        ("sync", "duplicates", s.sync.duplicates),
        ("sync", "out_of_order", s.sync.out_of_order),
        ("sync", "rejected_key", s.sync.rejected_key),
        ("sync", "rejected_peer", s.sync.rejected_peer),
        ("sync", "rejected_malformed", s.sync.rejected_malformed),
        ("sync", "unreadable_records", s.sync.unreadable_records),
        ("sync", "answered_by_other_sm", s.sync.answered_by_other_sm),
    ] {
        add(rows, "sa_events_total", &[kind, what], v as f64);
    }
    add(rows, "sa_snapshots_total", &[], s.snapshots as f64);
    add(rows, "sa_records", &[], s.records as f64);
    for (kind, v) in [
        ("service", s.services),
        ("subscription", s.subscriptions),
        ("alias_guid", s.alias_guids),
        ("rmpp_in_flight", r.in_flight),
        ("mirrored_service", s.mirror.held_services),
        ("mirrored_subscription", s.mirror.held_subscriptions),
        ("mirrored_alias_guid", s.mirror.held_alias_guids),
        ("sync_standbys", s.sync.peers),
    ] {
        add(rows, "sa_registered", &[kind], v as f64);
    }
    add(rows, "mcast_groups", &[], mc.groups as f64);
    add(rows, "mcast_members", &[], mc.members as f64);
}
