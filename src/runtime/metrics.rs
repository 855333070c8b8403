//! Prometheus metrics: what the last sweep found, how sweeps go, the
//! multicast passes, the SA's counters, and the SMPs sent by attribute and
//! method. Served as text on `metrics.listen`. Label values are fixed
//! names (or attribute and method codes, unknown ones in one series), so
//! the series stay bounded whatever the fabric sends.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use crate::program::mcast::McastReport;
use crate::program::SweepReport;
use crate::transport::TransportStats;

/// Every metric ibsm exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    subnet_up: IntGauge,
    nodes: IntGaugeVec,
    ports_inactive: IntGauge,
    max_lid: IntGauge,
    sweep_problems: IntGauge,
    sweeps: IntCounterVec,
    sweep_seconds: Histogram,
    smps_sent: IntGaugeVec,
    smp_timeouts: IntGaugeVec,
    sm_state: IntGauge,
    refused: IntCounterVec,
    takeover_sets: IntGaugeVec,
    sa_queries: IntGaugeVec,
    sa_events: IntGaugeVec,
    sa_registered: IntGaugeVec,
    mcast_groups: IntGauge,
    mcast_members: IntGauge,
    mcast_passes: IntCounterVec,
    mcast_mads: IntCounterVec,
    mcast_trees: IntGauge,
    mcast_problems: IntGauge,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new_custom(Some("ibsm".into()), None).expect("a valid prefix");
        let subnet_up = IntGauge::new("subnet_up", "1 when every cabled port is ACTIVE after the last sweep").unwrap();
        let nodes = IntGaugeVec::new(Opts::new("nodes", "Nodes found by the last heavy sweep"), &["kind"]).unwrap();
        let ports_inactive = IntGauge::new("ports_inactive", "Cabled ports not ACTIVE after the last sweep").unwrap();
        let max_lid = IntGauge::new("max_lid", "Highest LID assigned (LinearFDBTop)").unwrap();
        let sweep_problems = IntGauge::new("sweep_problems", "Problems the last heavy sweep reported").unwrap();
        let sweeps = IntCounterVec::new(Opts::new("sweeps_total", "Sweeps run"), &["kind"]).unwrap();
        let sweep_seconds = Histogram::with_opts(
            HistogramOpts::new("heavy_sweep_seconds", "Duration of heavy sweeps")
                .buckets(vec![0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
        )
        .unwrap();
        let smps_sent = IntGaugeVec::new(
            Opts::new("mads_sent", "MADs sent (retries included) by class, attribute and method since start"),
            &["class", "attribute", "method"],
        )
        .unwrap();
        let smp_timeouts = IntGaugeVec::new(
            Opts::new("mad_timeouts", "MAD attempts that timed out, by attribute"),
            &["class", "attribute", "method"],
        )
        .unwrap();
        let sm_state =
            IntGauge::new("sm_state", "SMInfo.SMState: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER").unwrap();
        let refused = IntCounterVec::new(
            Opts::new("mads_refused_total", "Requests answered with an unsupported status, by class"),
            &["class"],
        )
        .unwrap();
        let takeover_sets = IntGaugeVec::new(
            Opts::new(
                "takeover_sets",
                "Sets the last takeover sent: all, those changing more than MasterSMLID, LFT blocks read",
            ),
            &["kind"],
        )
        .unwrap();
        let sa_queries = IntGaugeVec::new(
            Opts::new("sa_queries", "SA requests since start by attribute, method and result (ok, error, records)"),
            &["attribute", "method", "result"],
        )
        .unwrap();
        let sa_events = IntGaugeVec::new(
            Opts::new("sa_events", "SA events since start: drops by reason, RMPP transfers, Reports, leases"),
            &["kind", "what"],
        )
        .unwrap();
        let sa_registered = IntGaugeVec::new(
            Opts::new("sa_registered", "ServiceRecords, InformInfo subscriptions and alias GUIDs held now"),
            &["kind"],
        )
        .unwrap();
        let mcast_groups = IntGauge::new("mcast_groups", "Multicast groups the SA holds (MCMemberRecord)").unwrap();
        let mcast_members =
            IntGauge::new("mcast_members", "Memberships of the SA's multicast groups (one per port and group)")
                .unwrap();
        let mcast_passes = IntCounterVec::new(
            Opts::new("mcast_passes_total", "Multicast passes: after a heavy sweep, or for a membership change"),
            &["kind"],
        )
        .unwrap();
        let mcast_mads = IntCounterVec::new(
            Opts::new(
                "mcast_mads_total",
                "MulticastForwardingTable SMPs of the multicast passes: Sets answered, reads, failures",
            ),
            &["what"],
        )
        .unwrap();
        let mcast_trees = IntGauge::new("mcast_trees", "Multicast groups with a tree after the last pass").unwrap();
        let mcast_problems = IntGauge::new(
            "mcast_problems",
            "Problems the last multicast pass reported (members not routed, MLIDs past a switch's capacity)",
        )
        .unwrap();
        for c in [
            Box::new(subnet_up.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(mcast_groups.clone()),
            Box::new(mcast_members.clone()),
            Box::new(mcast_passes.clone()),
            Box::new(mcast_mads.clone()),
            Box::new(mcast_trees.clone()),
            Box::new(mcast_problems.clone()),
            Box::new(sa_queries.clone()),
            Box::new(sa_events.clone()),
            Box::new(sa_registered.clone()),
            Box::new(takeover_sets.clone()),
            Box::new(sm_state.clone()),
            Box::new(refused.clone()),
            Box::new(nodes.clone()),
            Box::new(ports_inactive.clone()),
            Box::new(max_lid.clone()),
            Box::new(sweep_problems.clone()),
            Box::new(sweeps.clone()),
            Box::new(sweep_seconds.clone()),
            Box::new(smps_sent.clone()),
            Box::new(smp_timeouts.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Metrics {
            registry,
            subnet_up,
            nodes,
            ports_inactive,
            max_lid,
            sweep_problems,
            sweeps,
            sweep_seconds,
            smps_sent,
            smp_timeouts,
            sm_state,
            refused,
            takeover_sets,
            sa_queries,
            sa_events,
            sa_registered,
            mcast_groups,
            mcast_members,
            mcast_passes,
            mcast_mads,
            mcast_trees,
            mcast_problems,
        }
    }

    /// What the SA counted (cumulative figures, set as they stand).
    pub fn sa(&self, s: &crate::sa::SaStats) {
        for (&(attribute, method), c) in &s.by_query {
            let (attr, method) = if (attribute, method) == crate::sa::SaStats::OTHER_QUERY {
                // Every code the SA does not know, one series.
                ("other".to_string(), "other".to_string())
            } else {
                (
                    format!("{:?}", crate::mad::SaAttributeId::from(attribute)),
                    format!("{:?}", crate::mad::Method::from(method)),
                )
            };
            for (result, v) in [("ok", c.ok), ("error", c.errors), ("records", c.records)] {
                self.sa_queries.with_label_values(&[&attr, &method, result]).set(v as i64);
            }
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
            ("rmpp", "started", r.started),
            ("rmpp", "completed", r.completed),
            ("rmpp", "failed", r.failed),
            ("rmpp", "segments", r.segments),
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
        ] {
            self.sa_events.with_label_values(&[kind, what]).set(v as i64);
        }
        for (kind, v) in [
            ("service", s.services),
            ("subscription", s.subscriptions),
            ("alias_guid", s.alias_guids),
            ("rmpp_in_flight", r.in_flight),
            ("mirrored_service", s.mirror.held_services),
            ("mirrored_subscription", s.mirror.held_subscriptions),
            ("mirrored_alias_guid", s.mirror.held_alias_guids),
        ] {
            self.sa_registered.with_label_values(&[kind]).set(v as i64);
        }
        self.mcast_groups.set(mc.groups as i64);
        self.mcast_members.set(mc.members as i64);
    }

    /// One multicast pass of the SM: `kind` "sweep" (the end of a heavy
    /// sweep, [`Self::heavy_sweep`] calls it) or "membership" (the SA's
    /// groups changed between sweeps).
    pub fn mcast_pass(&self, kind: &'static str, report: &McastReport) {
        self.mcast_passes.with_label_values(&[kind]).inc();
        for (what, n) in [
            ("mft_set", report.mft_sets),
            ("mft_read", report.mft_reads),
            ("fdb_top_set", report.fdb_top_sets),
            ("failure", report.failures),
        ] {
            self.mcast_mads.with_label_values(&[what]).inc_by(n as u64);
        }
        self.mcast_trees.set(report.groups as i64);
        self.mcast_problems.set(report.problems.len() as i64);
    }

    pub fn sm_state(&self, state: u8) {
        self.sm_state.set(i64::from(state));
    }

    pub fn refused(&self, class: u8) {
        self.refused.with_label_values(&[&format!("{:?}", crate::mad::MgmtClass::from(class))]).inc();
    }

    pub fn heavy_sweep(&self, report: &SweepReport) {
        self.sweeps.with_label_values(&["heavy"]).inc();
        self.sweep_seconds.observe(report.elapsed.as_secs_f64());
        self.subnet_up.set(i64::from(report.subnet_up()));
        let switches = report.subnet.switches().count() as i64;
        self.nodes.with_label_values(&["switch"]).set(switches);
        self.nodes.with_label_values(&["ca"]).set(report.subnet.nodes.len() as i64 - switches);
        self.ports_inactive.set(report.inactive.len() as i64);
        self.max_lid.set(i64::from(report.lids.max_lid.0));
        self.sweep_problems.set(report.problems().len() as i64);
        self.mcast_pass("sweep", &report.mcast);
        if report.mode == crate::program::MasterMode::Takeover {
            let p = &report.program;
            self.takeover_sets.with_label_values(&["all"]).set(p.sets() as i64);
            self.takeover_sets.with_label_values(&["changing"]).set(p.changing_sets() as i64);
            self.takeover_sets.with_label_values(&["lft_reads"]).set(p.lft_reads as i64);
        }
    }

    pub fn light_sweep(&self) {
        self.sweeps.with_label_values(&["light"]).inc();
    }

    pub fn transport(&self, stats: &TransportStats) {
        for (key, c) in &stats.txn.by_mad {
            let class = format!("{:?}", key.class());
            let attr = format!("{:?}", key.attribute());
            let method = format!("{:?}", key.method());
            self.smps_sent.with_label_values(&[&class, &attr, &method]).set(c.sent as i64);
            self.smp_timeouts.with_label_values(&[&class, &attr, &method]).set(c.timeouts as i64);
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf).expect("text encoding cannot fail");
        String::from_utf8(buf).expect("the text format is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Serves `GET /metrics` (any path, in fact) on `addr`, a few clients at a
/// time. Returns once the listener is bound.
pub async fn serve(addr: SocketAddr, metrics: Metrics) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await?;
    let limit = Arc::new(Semaphore::new(4));
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut stream, peer)) = listener.accept().await else { continue };
            let Ok(permit) = limit.clone().try_acquire_owned() else {
                debug!(%peer, "metrics: too many clients, dropping one");
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let mut req = [0u8; 1024];
                let read = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut req)).await;
                if !matches!(read, Ok(Ok(n)) if n > 0) {
                    return;
                }
                let body = metrics.render();
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                if let Err(e) = stream.write_all(head.as_bytes()).await {
                    warn!(%peer, error = %e, "metrics: write failed");
                    return;
                }
                let _ = stream.write_all(body.as_bytes()).await;
            });
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_the_text_format() {
        let m = Metrics::new();
        m.light_sweep();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        serve(addr, m.clone()).await.unwrap();
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.contains("ibsm_sweeps_total{kind=\"light\"} 1"), "{out}");
        assert!(out.contains("ibsm_subnet_up 0"), "{out}");
    }

    #[test]
    fn election_state_and_refusals_are_exported() {
        let m = Metrics::new();
        m.sm_state(2);
        m.refused(0x03);
        m.refused(0x03);
        let text = m.render();
        assert!(text.contains("ibsm_sm_state 2"), "{text}");
        assert!(text.contains("ibsm_mads_refused_total{class=\"SubnAdm\"} 2"), "{text}");
    }

    #[test]
    fn sa_counts_are_exported() {
        let m = Metrics::new();
        let mut s = crate::sa::SaStats::default();
        s.by_query.insert((0x0035, 0x01), crate::sa::stats::QueryCounts { requests: 5, ok: 4, errors: 1, records: 4 });
        let other = crate::sa::stats::QueryCounts { requests: 7, ok: 0, errors: 7, records: 0 };
        s.by_query.insert(crate::sa::SaStats::OTHER_QUERY, other);
        s.drops.bad_sm_key = 3;
        s.services = 2;
        s.mirror.held_services = 5;
        m.sa(&s);
        let text = m.render();
        assert!(text.contains("ibsm_sa_queries{attribute=\"PathRecord\",method=\"Get\",result=\"ok\"} 4"), "{text}");
        assert!(text.contains("ibsm_sa_queries{attribute=\"other\",method=\"other\",result=\"error\"} 7"), "{text}");
        assert!(text.contains("ibsm_sa_events{kind=\"drop\",what=\"bad_sm_key\"} 3"), "{text}");
        assert!(text.contains("ibsm_sa_registered{kind=\"service\"} 2"), "{text}");
        assert!(text.contains("ibsm_sa_registered{kind=\"mirrored_service\"} 5"), "{text}");
    }

    #[test]
    fn multicast_figures_are_exported() {
        let m = Metrics::new();
        let mut s = crate::sa::SaStats::default();
        s.mcast.joins = 7;
        s.mcast.leave_errors = 2;
        s.mcast.groups = 3;
        s.mcast.members = 11;
        s.drops.mcast_cap = 4;
        s.reports.mcast_created = 5;
        m.sa(&s);
        let pass = McastReport {
            groups: 3,
            mft_reads: 2,
            mft_sets: 9,
            failures: 1,
            problems: vec!["x".into()],
            retry: true,
            ..Default::default()
        };
        m.mcast_pass("membership", &pass);
        m.mcast_pass("membership", &McastReport { groups: 2, mft_sets: 1, ..McastReport::default() });
        let text = m.render();
        for line in [
            "ibsm_sa_events{kind=\"mcast\",what=\"join\"} 7",
            "ibsm_sa_events{kind=\"mcast\",what=\"leave_error\"} 2",
            "ibsm_sa_events{kind=\"drop\",what=\"mcast_cap\"} 4",
            "ibsm_sa_events{kind=\"report\",what=\"mcast_created\"} 5",
            "ibsm_mcast_groups 3",
            "ibsm_mcast_members 11",
            "ibsm_mcast_passes_total{kind=\"membership\"} 2",
            "ibsm_mcast_mads_total{what=\"mft_set\"} 10",
            "ibsm_mcast_mads_total{what=\"mft_read\"} 2",
            "ibsm_mcast_mads_total{what=\"failure\"} 1",
            "ibsm_mcast_trees 2",
            "ibsm_mcast_problems 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
