//! Prometheus metrics by the book: what the last sweep found, how sweeps
//! and routing go (counted and timed in seconds), the election (state,
//! priority, master, failovers, handovers), traps, the multicast passes,
//! the MADs sent by class, attribute and method, and the SA's counters.
//!
//! - [`cumulative`]: counters other layers keep (transport, SA), read at
//!   scrape time and exported with counter type;
//! - [`openmetrics`]: the OpenMetrics 1.0 text encoder;
//! - [`fabric`]: ports and links by state, from a sweep's subnet.
//!
//! Label values are fixed names, or codes folded into `other` when ibsm
//! does not know them, so the series stay bounded whatever the fabric
//! sends. Every family and its cardinality is listed in the README.

mod cumulative;
pub(crate) use cumulative::set_value;
mod fabric;
pub mod openmetrics;
pub mod perfmgr;
#[cfg(test)]
mod tests;
pub mod text;

pub use text::TextSection;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::proto::MetricType;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use tracing::warn;

use crate::election::{State, TransitionCause};
use crate::mad::{MgmtClass, NoticeRepr, SmControl};
use crate::subnet::McastReport;
use crate::subnet::SweepReport;
use crate::transport::TransportStats;
use crate::types::{Guid, Lid};

/// The prefix the registry puts before every family name.
pub const PREFIX: &str = "ibsm";

/// Sweep durations: a light sweep of a small fabric takes milliseconds, a
/// heavy sweep of tens of thousands of ports minutes.
const SWEEP_BUCKETS: &[f64] =
    &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
/// Routing: microseconds-to-milliseconds on small fabrics, seconds on big ones.
const ROUTING_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Trap numbers counted under their own label (IBA 14.2.5.1, Table 237;
/// 13.4.8.2 for the class-manager ones); any other generic trap counts as
/// `other`, vendor traps as `vendor`.
const KNOWN_TRAPS: &[u16] = &[64, 65, 66, 67, 68, 69, 128, 129, 130, 131, 144, 145, 256, 257, 258, 259];

/// What failed in a heavy sweep, for `ibsm_sweep_failures_total{stage}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepFailure {
    /// Discovery could not run (the SM's own port unreadable).
    Discovery,
    /// LIDs, routing or programming failed as a whole.
    Programming,
}

impl SweepFailure {
    fn label(self) -> &'static str {
        match self {
            SweepFailure::Discovery => "discovery",
            SweepFailure::Programming => "programming",
        }
    }
}

/// Which way the subnet moved, for `ibsm_handovers_total{direction}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handover {
    /// Another SM handed the subnet to this one.
    In,
    /// This SM handed the subnet to another.
    Out,
}

impl Handover {
    fn label(self) -> &'static str {
        match self {
            Handover::In => "in",
            Handover::Out => "out",
        }
    }
}

/// A family the registry can emit, and its type when known.
#[derive(Debug, Clone)]
struct Declared {
    /// With the prefix, as the expositions spell it.
    name: String,
    kind: Option<MetricType>,
}

/// Every metric ibsm exports. Clones share the registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    latest: cumulative::Latest,
    declared: Arc<Mutex<Vec<Declared>>>,
    /// Written after the registry's families ([`Self::register_text`]).
    sections: Arc<Mutex<Vec<Arc<dyn TextSection>>>>,
    /// The size of the last render, text then OpenMetrics: the next one's
    /// buffer starts that large rather than doubling its way up.
    last_len: Arc<[AtomicUsize; 2]>,
    /// Set when the master was lost (missed polls, stepped down): the next
    /// move to MASTER is a failover.
    master_lost: Arc<AtomicBool>,
    subnet_up: IntGauge,
    nodes: IntGaugeVec,
    nodes_quarantined: IntGauge,
    ports: IntGaugeVec,
    links: IntGaugeVec,
    ports_inactive: IntGauge,
    lids_in_use: IntGauge,
    max_lid: IntGauge,
    sweep_problems: IntGauge,
    sweeps: IntCounterVec,
    sweep_seconds: HistogramVec,
    sweep_failures: IntCounterVec,
    routing_info: IntGaugeVec,
    routing_seconds: Histogram,
    sa_answer_seconds: Histogram,
    sm_state: IntGauge,
    sm_priority: IntGauge,
    master_info: IntGaugeVec,
    refused: IntCounterVec,
    traps: IntCounterVec,
    traps_unmatched: IntCounterVec,
    traps_dropped: IntCounter,
    reactions: IntCounterVec,
    fabric_changes: IntCounterVec,
    cables_held: IntGauge,
    cable_holds: IntCounter,
    failovers: IntCounter,
    handovers: IntCounterVec,
    takeover_sets: IntGaugeVec,
    mcast_passes: IntCounterVec,
    mcast_mads: IntCounterVec,
    mcast_trees: IntGauge,
    mcast_problems: IntGauge,
    mirror_lag: prometheus::Gauge,
}

fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("a valid gauge")
}

fn gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid gauge family")
}

fn counter_vec(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("a valid counter family")
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new_custom(Some(PREFIX.into()), None).expect("a valid prefix");
        let subnet_up = gauge("subnet_up", "1 when every cabled port is ACTIVE after the last heavy sweep");
        let nodes =
            gauge_vec("nodes", "Nodes found by the last heavy sweep, by kind (switch, ca, router, other)", &["kind"]);
        let nodes_quarantined =
            gauge("nodes_quarantined", "Nodes the last heavy sweep left alone (bad NodeInfo, no LFT)");
        let ports = gauge_vec(
            "ports",
            "External ports of the managed nodes by node kind and PortState as the last heavy sweep read it (unread: no PortInfo)",
            &["kind", "state"],
        );
        let links = gauge_vec(
            "links",
            "Cables between managed nodes by state, the lower of the two ends' PortState (unread: an end's PortInfo missing)",
            &["state"],
        );
        let ports_inactive = gauge("ports_inactive", "Cabled ports not ACTIVE after the last heavy sweep");
        let lids_in_use = gauge("lids_in_use", "Unicast LIDs assigned to present ports (2^LMC per port)");
        let max_lid = gauge("max_lid", "Highest LID assigned (LinearFDBTop)");
        let sweep_problems = gauge("sweep_problems", "Problems the last heavy sweep reported");
        let sweeps = counter_vec(
            "sweeps_total",
            "Sweeps run, by kind (light, heavy, reaction: a bounded change programmed without a heavy sweep)",
            &["kind"],
        );
        let sweep_seconds = HistogramVec::new(
            HistogramOpts::new("sweep_duration_seconds", "Duration of sweeps, by kind (light, heavy, reaction)")
                .buckets(SWEEP_BUCKETS.to_vec()),
            &["kind"],
        )
        .expect("a valid histogram");
        let sweep_failures = counter_vec(
            "sweep_failures_total",
            "Heavy sweeps that failed as a whole, by stage (discovery, programming)",
            &["stage"],
        );
        let routing_info =
            gauge_vec("routing_info", "1 for the routing engine that routed the last heavy sweep", &["engine"]);
        let routing_seconds = Histogram::with_opts(
            HistogramOpts::new("routing_duration_seconds", "Time the routing engine took, per heavy sweep")
                .buckets(ROUTING_BUCKETS.to_vec()),
        )
        .expect("a valid histogram");
        let sm_state = gauge("sm_state", "SMInfo.SMState: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER");
        let sm_priority = gauge("sm_priority", "SMInfo.Priority of this SM");
        let master_info = gauge_vec(
            "sm_master_info",
            "1 for the master SM as this SM knows it: its port GUID and LID (this SM's own when it is master)",
            &["guid", "lid"],
        );
        let refused = counter_vec(
            "mads_refused_total",
            "Requests answered with an unsupported status or dropped for a full queue, by class",
            &["class"],
        );
        let traps = counter_vec(
            "traps_total",
            "Traps received as master, by trap number (known numbers; other generic ones as other, vendor traps as vendor, unreadable Notices as unreadable)",
            &["number"],
        );
        let traps_unmatched = counter_vec(
            "traps_unmatched_total",
            "Traps not taken at their word (unknown_lid: the issuer LID is nobody's; issuer_mismatch: sent from a LID of another node than the issuer it names), answered and logged but reacted to with a light sweep only",
            &["why"],
        );
        for why in ["unknown_lid", "issuer_mismatch"] {
            traps_unmatched.with_label_values(&[why]);
        }
        let reactions = counter_vec(
            "reactions_total",
            "Reactions to fabric changes (traps, light sweep findings), by what was taken: programmed (a bounded change set), unchanged (the suspects held what the SM knew) or heavy_sweep (it could not be bounded)",
            &["taken"],
        );
        for taken in ["programmed", "unchanged", "heavy_sweep"] {
            reactions.with_label_values(&[taken]);
        }
        let fabric_changes = counter_vec(
            "fabric_changes_total",
            "Changes reactions found and programmed, by kind (moved: a known node answered behind another port than its cable's, a moved cable or a spoof, also logged as a warning)",
            &["kind"],
        );
        for kind in crate::subnet::ChangeKind::ALL {
            fabric_changes.with_label_values(&[kind.label()]);
        }
        let traps_dropped = IntCounter::new(
            "traps_dropped_total",
            "Traps dropped unanswered because their source LID sent more than sm.trap_rate_limit per second (the port sends a trap again until it is answered)",
        )
        .expect("a valid counter");
        let cables_held = gauge(
            "cables_held",
            "Cables held down for flapping (sm.flap_downs downs in sm.flap_window_s): not routed over, ports left in INIT",
        );
        let cable_holds =
            IntCounter::new("cable_holds_total", "Times a flapping cable was put on hold").expect("a valid counter");
        let failovers =
            IntCounter::new("failovers_total", "Times this SM became master after the master it watched was lost")
                .expect("a valid counter");
        let handovers = counter_vec(
            "handovers_total",
            "Mastership handed to this SM (in) or by this SM to another (out)",
            &["direction"],
        );
        let takeover_sets = gauge_vec(
            "takeover_sets",
            "Sets the last takeover sent: all, those changing more than MasterSMLID, LFT blocks read",
            &["kind"],
        );
        let mcast_passes = counter_vec(
            "mcast_passes_total",
            "Multicast passes: after a heavy sweep (sweep), or for a membership change (membership)",
            &["kind"],
        );
        let mcast_mads = counter_vec(
            "mcast_mads_total",
            "SMPs of the multicast passes: MFT Sets answered, MFT reads, MulticastFDBTop Sets, failures",
            &["what"],
        );
        let mcast_trees = gauge("mcast_trees", "Multicast groups with a tree after the last pass");
        let mcast_problems = gauge(
            "mcast_problems",
            "Problems the last multicast pass reported (members not routed, MLIDs past a switch's capacity)",
        );
        // Series that alerts and rates read exist from the start, at 0.
        for kind in ["light", "heavy", "reaction"] {
            sweeps.with_label_values(&[kind]);
            sweep_seconds.with_label_values(&[kind]);
        }
        for f in [SweepFailure::Discovery, SweepFailure::Programming] {
            sweep_failures.with_label_values(&[f.label()]);
        }
        for h in [Handover::In, Handover::Out] {
            handovers.with_label_values(&[h.label()]);
        }
        for kind in ["sweep", "membership"] {
            mcast_passes.with_label_values(&[kind]);
        }

        let latest = cumulative::Latest::default();
        let m = Metrics {
            registry,
            latest: latest.clone(),
            declared: Arc::default(),
            sections: Arc::default(),
            last_len: Arc::default(),
            master_lost: Arc::default(),
            subnet_up,
            nodes,
            nodes_quarantined,
            ports,
            links,
            ports_inactive,
            lids_in_use,
            max_lid,
            sweep_problems,
            sweeps,
            sweep_seconds,
            sweep_failures,
            routing_info,
            routing_seconds,
            sa_answer_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "sa_answer_seconds",
                    "SA requests, from the moment the transport handed them to the SA (its queue included) \
                     to their answer sent (a multi-MAD answer's first segment)",
                )
                .buckets(vec![
                    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
                ]),
            )
            .expect("a valid histogram"),
            sm_state,
            sm_priority,
            master_info,
            refused,
            traps,
            traps_unmatched,
            traps_dropped,
            reactions,
            fabric_changes,
            cables_held,
            cable_holds,
            failovers,
            handovers,
            takeover_sets,
            mcast_passes,
            mcast_mads,
            mcast_trees,
            mcast_problems,
            mirror_lag: prometheus::Gauge::new(
                "mirror_lag_seconds",
                "A standby: how long ago its copy of the master's SA state was last known current \
                 (the state stream's last Beat it had caught up with); NaN: no current copy, or not a standby",
            )
            .expect("a valid gauge"),
        };
        use MetricType::{COUNTER, GAUGE, HISTOGRAM};
        let own: Vec<(Box<dyn Collector>, MetricType)> = vec![
            (Box::new(m.subnet_up.clone()), GAUGE),
            (Box::new(m.mirror_lag.clone()), GAUGE),
            (Box::new(m.nodes.clone()), GAUGE),
            (Box::new(m.nodes_quarantined.clone()), GAUGE),
            (Box::new(m.ports.clone()), GAUGE),
            (Box::new(m.links.clone()), GAUGE),
            (Box::new(m.ports_inactive.clone()), GAUGE),
            (Box::new(m.lids_in_use.clone()), GAUGE),
            (Box::new(m.max_lid.clone()), GAUGE),
            (Box::new(m.sweep_problems.clone()), GAUGE),
            (Box::new(m.sweeps.clone()), COUNTER),
            (Box::new(m.sweep_seconds.clone()), HISTOGRAM),
            (Box::new(m.sweep_failures.clone()), COUNTER),
            (Box::new(m.routing_info.clone()), GAUGE),
            (Box::new(m.routing_seconds.clone()), HISTOGRAM),
            (Box::new(m.sa_answer_seconds.clone()), HISTOGRAM),
            (Box::new(m.sm_state.clone()), GAUGE),
            (Box::new(m.sm_priority.clone()), GAUGE),
            (Box::new(m.master_info.clone()), GAUGE),
            (Box::new(m.refused.clone()), COUNTER),
            (Box::new(m.traps.clone()), COUNTER),
            (Box::new(m.traps_unmatched.clone()), COUNTER),
            (Box::new(m.reactions.clone()), COUNTER),
            (Box::new(m.fabric_changes.clone()), COUNTER),
            (Box::new(m.traps_dropped.clone()), COUNTER),
            (Box::new(m.cables_held.clone()), GAUGE),
            (Box::new(m.cable_holds.clone()), COUNTER),
            (Box::new(m.failovers.clone()), COUNTER),
            (Box::new(m.handovers.clone()), COUNTER),
            (Box::new(m.takeover_sets.clone()), GAUGE),
            (Box::new(m.mcast_passes.clone()), COUNTER),
            (Box::new(m.mcast_mads.clone()), COUNTER),
            (Box::new(m.mcast_trees.clone()), GAUGE),
            (Box::new(m.mcast_problems.clone()), GAUGE),
        ];
        for (c, kind) in own {
            m.add(c, Some(kind)).expect("metric names are unique");
        }
        {
            let mut d = m.declared.lock().expect("never poisoned");
            d.extend(cumulative::FAMILIES.iter().map(|f| Declared { name: prefixed(f.name), kind: Some(f.kind) }));
        }
        m.registry.register(Box::new(cumulative::CumulativeCollector::new(latest))).expect("metric names are unique");
        m
    }

    fn add(&self, c: Box<dyn Collector>, kind: Option<MetricType>) -> prometheus::Result<()> {
        let names: Vec<String> = c.desc().iter().map(|d| prefixed(&d.fq_name)).collect();
        self.registry.register(c)?;
        let mut d = self.declared.lock().expect("never poisoned");
        d.extend(names.into_iter().map(|name| Declared { name, kind }));
        Ok(())
    }

    /// Adds a collector of other figures (the performance manager's
    /// per-port counters). Its families are named without the `ibsm_`
    /// prefix, which the registry adds: a `Desc` named
    /// `port_xmit_data_bytes_total` is exposed as
    /// `ibsm_port_xmit_data_bytes_total`. A name already taken is refused
    /// (logged), and the collector is not added.
    pub fn register(&self, c: Box<dyn Collector>) {
        let names: Vec<String> = c.desc().iter().map(|d| d.fq_name.clone()).collect();
        if let Err(e) = self.add(c, None) {
            warn!(families = ?names, error = %e, "metrics: collector not registered");
        }
    }

    /// Adds families its owner renders as text itself, after the
    /// registry's (see [`text`]). Names the registry or another section
    /// already has are refused (logged), and the section is not added.
    pub fn register_text(&self, section: Arc<dyn TextSection>) {
        let names = section.family_names();
        let taken = self.family_names();
        if let Some(dup) = names.iter().find(|n| taken.binary_search(n).is_ok()) {
            warn!(family = %dup, "metrics: text section not registered, a family name is taken");
            return;
        }
        self.sections.lock().expect("never poisoned").push(section);
    }

    fn sections(&self) -> Vec<Arc<dyn TextSection>> {
        self.sections.lock().expect("never poisoned").clone()
    }

    /// A buffer for a render in slot `slot` (0 text, 1 OpenMetrics): as
    /// large as the last one and a little more (a growing fabric), or
    /// what the sections expect on the first.
    fn buffer(&self, slot: usize, sections: &[Arc<dyn TextSection>]) -> String {
        let last = self.last_len[slot].load(Ordering::Relaxed);
        let want = if last == 0 { 64 * 1024 + sections.iter().map(|s| s.size_hint()).sum::<usize>() } else { last };
        String::with_capacity(want + want / 32)
    }

    /// Notes the size of a finished render and gives back what it did
    /// not use (a shrinking fabric): the buffer is kept by the HTTP cache.
    fn finish(&self, slot: usize, mut out: String) -> String {
        self.last_len[slot].store(out.len(), Ordering::Relaxed);
        if out.capacity() - out.len() > 64 * 1024 + out.len() / 16 {
            out.shrink_to_fit();
        }
        out
    }

    /// What the SA counted (cumulative figures; exported as they stand at
    /// the next scrape).
    pub fn sa(&self, s: &crate::sa::SaStats) {
        self.latest.sa.store(Some(Arc::new(s.clone())));
    }

    /// One SA request answered `elapsed` after the transport handed it over.
    pub fn sa_answer(&self, elapsed: Duration) {
        self.sa_answer_seconds.observe(elapsed.as_secs_f64());
    }

    /// The standby's copy of the master's SA state: how far behind it may
    /// be (`None`: no current copy).
    pub fn mirror_lag(&self, lag: Option<Duration>) {
        self.mirror_lag.set(lag.map_or(f64::NAN, |d| d.as_secs_f64()));
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
        let class = match MgmtClass::from(class) {
            MgmtClass::Unknown(_) => "other".to_string(),
            c => format!("{c:?}"),
        };
        self.refused.with_label_values(&[&class]).inc();
    }

    pub fn heavy_sweep(&self, report: &SweepReport) {
        self.heavy_sweep_counted(report, &crate::subnet::Census::of(&report.subnet))
    }

    /// [`Self::heavy_sweep`] with the sweep's census already taken (the
    /// owner takes one per sweep for the metrics and `/status` alike).
    pub fn heavy_sweep_counted(&self, report: &SweepReport, census: &crate::subnet::Census) {
        // A reaction to a bounded change programs as a heavy sweep does,
        // and is counted apart.
        let kind = match report.kind {
            crate::subnet::SweepKind::Heavy => "heavy",
            crate::subnet::SweepKind::Reaction { .. } => "reaction",
        };
        self.sweeps.with_label_values(&[kind]).inc();
        self.sweep_seconds.with_label_values(&[kind]).observe(report.elapsed.as_secs_f64());
        self.subnet_up.set(i64::from(report.subnet_up()));
        let found = fabric::Counts::of(census);
        self.nodes.reset();
        for (kind, n) in &found.nodes {
            self.nodes.with_label_values(&[kind]).set(*n);
        }
        self.nodes_quarantined.set(found.quarantined);
        self.ports.reset();
        for ((kind, state), n) in &found.ports {
            self.ports.with_label_values(&[kind, state]).set(*n);
        }
        self.links.reset();
        for (state, n) in &found.links {
            self.links.with_label_values(&[state]).set(*n);
        }
        self.ports_inactive.set(report.inactive.len() as i64);
        self.lids_in_use.set(report.lids.ranges.values().map(|r| i64::from(r.len())).sum());
        self.max_lid.set(i64::from(report.lids.max_lid.0));
        self.sweep_problems.set(report.problems().len() as i64);
        self.mcast_pass("sweep", &report.mcast);
        if report.mode.is_takeover() {
            let p = &report.program;
            self.takeover_sets.with_label_values(&["all"]).set(p.sets() as i64);
            self.takeover_sets.with_label_values(&["changing"]).set(p.changing_sets() as i64);
            self.takeover_sets.with_label_values(&["lft_reads"]).set(p.lft_reads as i64);
        }
    }

    /// A light sweep, untimed (see [`Self::light_sweep_timed`]).
    pub fn light_sweep(&self) {
        self.sweeps.with_label_values(&["light"]).inc();
    }

    /// A light sweep that took `elapsed`: counted and timed.
    pub fn light_sweep_timed(&self, elapsed: Duration) {
        self.light_sweep();
        self.sweep_seconds.with_label_values(&["light"]).observe(elapsed.as_secs_f64());
    }

    /// A heavy sweep that failed as a whole at `stage`.
    pub fn sweep_failed(&self, stage: SweepFailure) {
        self.sweep_failures.with_label_values(&[stage.label()]).inc();
    }

    /// The engine that routed the last heavy sweep (a name from
    /// `ibsm_routing::EngineKind`; anything else is `other`) and how long
    /// it took.
    pub fn routing(&self, engine: &str, elapsed: Duration) {
        let engine = match engine.parse::<ibsm_routing::EngineKind>() {
            Ok(kind) => kind.name().to_string(),
            Err(_) => "other".to_string(),
        };
        self.routing_info.reset();
        self.routing_info.with_label_values(&[&engine]).set(1);
        self.routing_seconds.observe(elapsed.as_secs_f64());
    }

    /// A trap received as master; `None`: its Notice did not parse.
    pub fn trap(&self, notice: Option<&NoticeRepr>) {
        let number = match notice {
            None => "unreadable".to_string(),
            Some(n) if !n.is_generic => "vendor".to_string(),
            Some(n) if KNOWN_TRAPS.contains(&n.trap_number) => n.trap_number.to_string(),
            Some(_) => "other".to_string(),
        };
        self.traps.with_label_values(&[&number]).inc();
    }

    /// A trap not taken at its word (`why`: unknown_lid, issuer_mismatch).
    pub fn trap_unmatched(&self, why: &str) {
        self.traps_unmatched.with_label_values(&[why]).inc();
    }

    /// Traps dropped by the per-source rate limit.
    pub fn traps_dropped(&self, n: u64) {
        self.traps_dropped.inc_by(n);
    }

    /// Cables on hold now, and how many holds started since the last call.
    pub fn cable_holds(&self, held: usize, new_holds: u64) {
        self.cables_held.set(held as i64);
        self.cable_holds.inc_by(new_holds);
    }

    /// A reaction to a fabric change: `programmed` or `heavy_sweep`.
    pub fn reaction(&self, taken: &str) {
        self.reactions.with_label_values(&[taken]).inc();
    }

    /// The changes of a programmed reaction, by kind.
    pub fn fabric_changes(&self, changes: &crate::subnet::ChangeSet) {
        for c in &changes.changes {
            self.fabric_changes.with_label_values(&[c.kind.label()]).inc();
        }
    }

    pub fn failover(&self) {
        self.failovers.inc();
    }

    pub fn handover(&self, direction: Handover) {
        self.handovers.with_label_values(&[direction.label()]).inc();
    }

    /// An election state change (`Action::StateChanged`): sets the SM
    /// state and counts failovers and handovers. A failover is a move to
    /// MASTER after the watched master was lost (missed polls) or stepped
    /// down, not handing over; a handover in is a move to MASTER on a
    /// HANDOVER control; a handover out is leaving MASTER because the SM
    /// we handed over to took the subnet.
    pub fn state_change(&self, from: State, to: State, cause: &TransitionCause) {
        self.sm_state(to.sm_state().into());
        match cause {
            TransitionCause::MasterLost { .. } | TransitionCause::MasterSteppedDown { .. } => {
                self.master_lost.store(true, Ordering::Relaxed);
            }
            TransitionCause::HandedOver { .. } if from == State::Master => self.handover(Handover::Out),
            _ => {}
        }
        match to {
            State::Master if from != State::Master => {
                let lost = self.master_lost.swap(false, Ordering::Relaxed);
                if matches!(cause, TransitionCause::Control { control: SmControl::Handover, .. }) {
                    self.handover(Handover::In);
                } else if lost {
                    self.failover();
                }
            }
            // A new master is watched (or we stopped): the loss is over.
            State::Standby | State::NotActive => self.master_lost.store(false, Ordering::Relaxed),
            _ => {}
        }
    }

    /// This SM's priority and the master it knows (itself when master;
    /// `None` while it knows none).
    pub fn election(&self, priority: u8, master: Option<(Guid, Lid)>) {
        self.sm_priority.set(i64::from(priority));
        self.master_info.reset();
        if let Some((guid, lid)) = master {
            self.master_info.with_label_values(&[&guid.to_string(), &lid.to_string()]).set(1);
        }
    }

    /// The transaction layer's counters as they stand (exported at the
    /// next scrape; MADs in flight is as of this call).
    pub fn transport(&self, stats: &TransportStats) {
        self.latest.transport.store(Some(Arc::new(stats.clone())));
    }

    /// The Prometheus text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let sections = self.sections();
        let mut out = self.buffer(0, &sections);
        TextEncoder::new().encode_utf8(&self.registry.gather(), &mut out).expect("text encoding cannot fail");
        for s in &sections {
            s.write_text(&mut out);
        }
        self.finish(0, out)
    }

    /// The OpenMetrics 1.0 text format ([`openmetrics::CONTENT_TYPE`]).
    pub fn render_openmetrics(&self) -> String {
        let sections = self.sections();
        let mut out = self.buffer(1, &sections);
        openmetrics::encode_families(&mut out, &self.registry.gather());
        for s in &sections {
            s.write_openmetrics(&mut out);
        }
        out.push_str("# EOF\n");
        self.finish(1, out)
    }

    /// Every series name the registry can emit, as the Prometheus text
    /// format (and PromQL) spells it: counters with their `_total`,
    /// histograms as `_bucket`, `_sum` and `_count`, whether or not a
    /// series has been created yet. A registered collector's family that
    /// is empty now and whose type is unknown is listed by its name
    /// (counters are named `*_total`, so they are listed right).
    pub fn family_names(&self) -> Vec<String> {
        let mut kinds: BTreeMap<String, Option<MetricType>> = BTreeMap::new();
        for d in self.declared.lock().expect("never poisoned").iter() {
            kinds.insert(d.name.clone(), d.kind);
        }
        for mf in self.registry.gather() {
            kinds.insert(mf.get_name().to_string(), Some(mf.get_field_type()));
        }
        let mut names: Vec<String> = self.sections().iter().flat_map(|s| s.family_names()).collect();
        for (name, kind) in kinds {
            match kind {
                Some(MetricType::HISTOGRAM) => {
                    names.extend(["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}")));
                }
                Some(MetricType::SUMMARY) => {
                    names.extend(["", "_sum", "_count"].map(|s| format!("{name}{s}")));
                }
                _ => names.push(name),
            }
        }
        names.sort();
        names.dedup();
        names
    }
}

fn prefixed(name: &str) -> String {
    format!("{PREFIX}_{name}")
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}
