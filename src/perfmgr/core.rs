//! The poller: an I/O-free state machine driven by `now`.
//!
//! One cycle per interval. The owner starts a cycle with the ports to poll
//! ([`PerfCore::begin_cycle`]), pulls requests ([`PerfCore::poll_request`],
//! at most `max_in_flight` unanswered), feeds back their answers
//! ([`PerfCore::handle_answer`]) and waits until
//! [`PerfCore::next_cycle_at`] once the cycle is done.
//!
//! Per node, a ClassPortInfo Get first (cached while the node stays in the
//! targets): its CapabilityMask says whether the PMA has 64-bit counters,
//! and whether its PortXmitWait counts (where not, it is not exported).
//! Then per port a PortCounters Get, a PortCountersExtended Get where the
//! node has them, and, when the accounting asks, a PortCounters Set that
//! clears the counters past half their range. A port whose query goes
//! unanswered (or is refused) is skipped for the cycle and counted; its
//! totals stay as they were.
//!
//! A port that leaves the targets (Down at a heavy sweep, its node gone)
//! leaves the export but keeps its account for [`ABSENT_GRACE`]; back
//! within it, its series continues from its total (see
//! [`PortAccount::resume`]) rather than restarting at the hardware's
//! value, which Prometheus would read as a reset and count whole.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::counters::{Counter, Extended, JumpKind, JumpRule, PerCounter, PmaCaps, PortAccount, Reading, COUNTERS};
use super::targets::PerfPort;
use crate::config::perfmgr::PerfMgrConfig;
use crate::datagram::{Datagram, MadAddress};
use crate::mad::class_port_info::ClassPortInfoRepr;
use crate::mad::perf::{PerfAttributeId, PerfMadRepr, PortCountersExtendedRepr, PortCountersRepr, PERF_DATA_LEN};
use crate::mad::Method;
use crate::types::{Guid, Lid};

/// How long the account of a port no longer among the targets is kept.
/// Time, not cycles: what it must outlast is a repair (a cable reseated,
/// a switch rebooted or replaced overnight) and the range of the
/// `increase()` a dashboard or alert takes across the gap (up to a day is
/// common), whatever the interval (which a reload may change). Past it a
/// returning port restarts at its hardware value, which such a range
/// would count whole. An account is about 1 KiB, so even a director's
/// 648 ports gone for the day cost under 1 MiB.
pub const ABSENT_GRACE: Duration = Duration::from_secs(24 * 3600);

/// Identifies a request handed out by [`PerfCore::poll_request`].
pub type Token = u64;

/// The queries of a cycle, for counting (bounded label values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueryKind {
    ClassPortInfo,
    PortCounters,
    PortCountersExtended,
    Clear,
}

impl QueryKind {
    pub const ALL: [QueryKind; 4] =
        [QueryKind::ClassPortInfo, QueryKind::PortCounters, QueryKind::PortCountersExtended, QueryKind::Clear];
    pub fn label(self) -> &'static str {
        match self {
            QueryKind::ClassPortInfo => "class_port_info",
            QueryKind::PortCounters => "port_counters",
            QueryKind::PortCountersExtended => "port_counters_extended",
            QueryKind::Clear => "port_counters_clear",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// Why a query produced no counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfFailure {
    /// No answer after the transport's retries.
    Timeout,
    /// Answered with a non-zero MAD status (unsupported, invalid field,
    /// a redirect ibsm does not follow).
    Status(u16),
    /// An answer that is not a GetResp of the attribute and port asked.
    Malformed,
    /// The transport failed otherwise (closed, device error).
    Transport,
}

impl PerfFailure {
    pub const LABELS: [&'static str; 4] = ["timeout", "status", "malformed", "transport"];
    fn index(self) -> usize {
        match self {
            PerfFailure::Timeout => 0,
            PerfFailure::Status(_) => 1,
            PerfFailure::Malformed => 2,
            PerfFailure::Transport => 3,
        }
    }
}

/// One PerfMgt GMP to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfRequest {
    pub lid: Lid,
    pub method: Method,
    pub attribute: PerfAttributeId,
    pub data: [u8; PERF_DATA_LEN],
    pub kind: QueryKind,
}

impl PerfRequest {
    /// The request as a GMP to QP1 of `lid` on SL 0.
    pub fn to_datagram(&self) -> Datagram {
        let mad = PerfMadRepr::request(self.method, self.attribute, 0, self.data);
        Datagram { addr: MadAddress::gsi(self.lid, 0), mad: mad.to_bytes() }
    }

    /// The data area of `answer` if it is a successful GetResp of this
    /// request (same attribute; for counters the same PortSelect).
    pub fn check_answer(&self, answer: &[u8]) -> Result<[u8; PERF_DATA_LEN], PerfFailure> {
        let r = PerfMadRepr::parse_bytes(answer).map_err(|_| PerfFailure::Malformed)?;
        if r.header.method != Method::GetResp || r.attribute() != self.attribute {
            return Err(PerfFailure::Malformed);
        }
        if r.header.status != 0 {
            return Err(PerfFailure::Status(r.header.status));
        }
        if self.attribute != PerfAttributeId::ClassPortInfo && r.data[1] != self.data[1] {
            return Err(PerfFailure::Malformed);
        }
        Ok(r.data)
    }
}

/// A sudden error-rate jump on one port, for a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfEvent {
    pub node_guid: Guid,
    pub node_desc: Arc<str>,
    pub port: u8,
    pub lid: Lid,
    pub counter: Counter,
    pub kind: JumpKind,
    pub delta: u64,
    pub elapsed: Duration,
    pub previous: Option<(u64, Duration)>,
}

impl std::fmt::Display for PerfEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rose by {} in {:.0} s on node {} ({:?}) port {} (LID {})",
            self.counter.iba_name(),
            self.delta,
            self.elapsed.as_secs_f64(),
            self.node_guid,
            self.node_desc,
            self.port,
            self.lid
        )?;
        match (self.kind, self.previous) {
            (JumpKind::Rate, Some((d, e))) => write!(f, ", after {d} in {:.0} s before", e.as_secs_f64()),
            _ => write!(f, ", above the threshold"),
        }
    }
}

/// The performance manager's own counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerfStats {
    /// Cycles completed.
    pub cycles: u64,
    /// Queries sent, by [`QueryKind`].
    pub queries: [u64; 4],
    /// Queries that failed, by [`QueryKind`] then [`PerfFailure::LABELS`].
    pub unanswered: [[u64; 4]; 4],
    /// Clears answered.
    pub clears: u64,
    /// Counters found going backwards (cleared by someone else).
    pub backwards: u64,
    /// Port readings skipped because a query went unanswered.
    pub ports_skipped_total: u64,
    /// Error jumps found.
    pub error_jumps: u64,
    /// Of the last completed cycle.
    pub last_cycle_duration: Duration,
    pub last_cycle_ports: usize,
    pub last_cycle_polled: usize,
    pub last_cycle_skipped: usize,
    /// Every polled port's rises summed, in each counter's own unit (a
    /// port's first reading counts whole, as its own total starts there):
    /// monotonic, so a port that leaves takes nothing back. `None`: no
    /// port has the counter.
    pub fabric: PerCounter<Option<u64>>,
}

/// Adds what one port's totals rose by, `before` to `after`, to `fabric`.
fn add_rises(fabric: &mut PerCounter<Option<u64>>, before: &PerCounter<Option<u64>>, after: &PerCounter<Option<u64>>) {
    for i in 0..COUNTERS {
        if let Some(now) = after[i] {
            let rise = now.saturating_sub(before[i].unwrap_or(0));
            fabric[i] = Some(fabric[i].unwrap_or(0).saturating_add(rise));
        }
    }
}

/// One port's totals as exported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortTotals {
    pub node_guid: Guid,
    pub node_desc: Arc<str>,
    pub port: u8,
    /// In each counter's own unit (4-byte words for data).
    pub totals: PerCounter<Option<u64>>,
}

/// What the collector reads: every target port's totals and the stats,
/// as of the end of the last cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerfSnapshot {
    pub ports: Vec<PortTotals>,
    pub stats: PerfStats,
}

/// Where the core publishes, and the collector reads; clones share it.
#[derive(Clone, Default)]
pub struct PerfShared(Arc<arc_swap::ArcSwap<PerfSnapshot>>);

impl PerfShared {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn latest(&self) -> Arc<PerfSnapshot> {
        self.0.load_full()
    }
    fn publish(&self, s: PerfSnapshot) {
        self.0.store(Arc::new(s));
    }
    #[cfg(test)]
    pub(crate) fn publish_for_test(&self, s: PerfSnapshot) {
        self.publish(s)
    }
}

impl std::fmt::Debug for PerfShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfShared").field("ports", &self.latest().ports.len()).finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Query {
    ClassPortInfo,
    Counters,
    Extended,
    Clear { select: u16, select2: u8 },
}

struct Cycle {
    started: Duration,
    targets: Vec<PerfPort>,
    /// Ports not yet started, by index into `targets`.
    todo: VecDeque<usize>,
    /// Follow-up queries of started ports, sent before new ports.
    ready: VecDeque<(usize, Query)>,
    /// Ports waiting for their node's ClassPortInfo.
    waiting: HashMap<Guid, Vec<usize>>,
    in_flight: HashMap<Token, (usize, Query)>,
    /// PortCounters read, waiting for PortCountersExtended.
    partial: HashMap<usize, PortCountersRepr>,
    polled: usize,
    skipped: usize,
}

/// A port's account and when it was last among the targets.
struct Kept {
    account: PortAccount,
    /// The start of the last cycle that had the port among its targets.
    seen: Duration,
}

/// The performance manager's state machine.
pub struct PerfCore {
    cfg: PerfMgrConfig,
    /// CapabilityMask of each node's PMA (while the node is a target).
    caps: HashMap<Guid, u16>,
    /// Of target ports, and of absent ones for [`ABSENT_GRACE`]. Boxed:
    /// an account is about 1.5 KiB and the table keeps up to twice as
    /// many slots as entries (a power of two at most 7/8 full), which
    /// inline cost some 200 MB at 70,000 ports rather than 110.
    accounts: HashMap<(Guid, u8), Box<Kept>>,
    /// When the last cycle began (finished or not).
    last_begun: Option<Duration>,
    stats: PerfStats,
    cycle: Option<Cycle>,
    next_cycle: Duration,
    /// When the last finished cycle started.
    last_started: Option<Duration>,
    events: VecDeque<PerfEvent>,
    next_token: Token,
    shared: PerfShared,
}

impl PerfCore {
    /// A core whose first cycle is due at once, publishing into `shared`.
    pub fn new(cfg: PerfMgrConfig, shared: PerfShared) -> Self {
        PerfCore {
            cfg,
            caps: HashMap::new(),
            accounts: HashMap::new(),
            last_begun: None,
            stats: PerfStats::default(),
            cycle: None,
            next_cycle: Duration::ZERO,
            last_started: None,
            events: VecDeque::new(),
            next_token: 1,
            shared,
        }
    }

    pub fn config(&self) -> &PerfMgrConfig {
        &self.cfg
    }

    /// Takes effect from the next cycle.
    /// A new configuration (SIGHUP). Between cycles the next one is
    /// rescheduled at the new interval from the last one's start.
    pub fn set_config(&mut self, cfg: PerfMgrConfig) {
        self.cfg = cfg;
        if let (None, Some(started)) = (&self.cycle, self.last_started) {
            self.next_cycle = started + self.cfg.interval();
        }
    }

    pub fn stats(&self) -> &PerfStats {
        &self.stats
    }

    /// The totals of one port, if it was ever read (and, if it left the
    /// targets, not longer than [`ABSENT_GRACE`] ago).
    pub fn port_account(&self, node: Guid, port: u8) -> Option<&PortAccount> {
        self.accounts.get(&(node, port)).map(|k| &k.account)
    }

    /// When the next cycle is due (only meaningful while none runs).
    pub fn next_cycle_at(&self) -> Duration {
        self.next_cycle
    }

    pub fn in_cycle(&self) -> bool {
        self.cycle.is_some()
    }

    /// Queries handed out and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.cycle.as_ref().map_or(0, |c| c.in_flight.len())
    }

    /// Starts a cycle over `targets` (duplicates dropped). Only they are
    /// exported at its end. Ports no longer among them keep their account
    /// for [`ABSENT_GRACE`], so that one coming back continues its total;
    /// a port back after missing a cycle or more resumes. Nodes no longer
    /// among them lose their cached ClassPortInfo (read again if they come
    /// back: their PMA may have changed). A cycle already running is
    /// abandoned: its unanswered queries are ignored when they come back.
    pub fn begin_cycle(&mut self, now: Duration, mut targets: Vec<PerfPort>) {
        targets.sort();
        targets.dedup_by(|a, b| (a.node_guid, a.port) == (b.node_guid, b.port));
        let keep: HashSet<(Guid, u8)> = targets.iter().map(|t| (t.node_guid, t.port)).collect();
        let previous = self.last_begun.replace(now);
        self.accounts.retain(|k, kept| {
            if keep.contains(k) {
                if previous.is_some_and(|p| kept.seen < p) {
                    kept.account.resume();
                }
                kept.seen = now;
                true
            } else {
                now.saturating_sub(kept.seen) <= ABSENT_GRACE
            }
        });
        let nodes: HashSet<Guid> = targets.iter().map(|t| t.node_guid).collect();
        self.caps.retain(|g, _| nodes.contains(g));
        let n = targets.len();
        self.cycle = Some(Cycle {
            started: now,
            targets,
            todo: (0..n).collect(),
            ready: VecDeque::new(),
            waiting: HashMap::new(),
            in_flight: HashMap::new(),
            partial: HashMap::new(),
            polled: 0,
            skipped: 0,
        });
        self.maybe_finish(now);
    }

    /// The next request to send, if the window has room and the cycle has
    /// work that is not waiting on an answer.
    pub fn poll_request(&mut self) -> Option<(Token, PerfRequest)> {
        let max = self.cfg.max_in_flight();
        let c = self.cycle.as_mut()?;
        if c.in_flight.len() >= max {
            return None;
        }
        let (i, q) = loop {
            if let Some(x) = c.ready.pop_front() {
                break x;
            }
            let i = c.todo.pop_front()?;
            let guid = c.targets[i].node_guid;
            if self.caps.contains_key(&guid) {
                break (i, Query::Counters);
            }
            match c.waiting.get_mut(&guid) {
                Some(w) => w.push(i),
                None => {
                    c.waiting.insert(guid, vec![i]);
                    break (i, Query::ClassPortInfo);
                }
            }
        };
        let t = &c.targets[i];
        let req = match q {
            Query::ClassPortInfo => PerfRequest {
                lid: t.lid,
                method: Method::Get,
                attribute: PerfAttributeId::ClassPortInfo,
                data: [0; PERF_DATA_LEN],
                kind: QueryKind::ClassPortInfo,
            },
            Query::Counters => PerfRequest {
                lid: t.lid,
                method: Method::Get,
                attribute: PerfAttributeId::PortCounters,
                data: PortCountersRepr::get(t.port).to_data(),
                kind: QueryKind::PortCounters,
            },
            Query::Extended => PerfRequest {
                lid: t.lid,
                method: Method::Get,
                attribute: PerfAttributeId::PortCountersExtended,
                data: PortCountersExtendedRepr::get(t.port).to_data(),
                kind: QueryKind::PortCountersExtended,
            },
            Query::Clear { select, select2 } => PerfRequest {
                lid: t.lid,
                method: Method::Set,
                attribute: PerfAttributeId::PortCounters,
                data: PortCountersRepr::clear(t.port, select, select2).to_data(),
                kind: QueryKind::Clear,
            },
        };
        let token = self.next_token;
        self.next_token += 1;
        c.in_flight.insert(token, (i, q));
        self.stats.queries[req.kind.index()] += 1;
        Some((token, req))
    }

    /// Feeds back the answer to `token`: the response's data area, or why
    /// there was none. Unknown tokens (an abandoned cycle's) are ignored.
    pub fn handle_answer(&mut self, now: Duration, token: Token, answer: Result<[u8; PERF_DATA_LEN], PerfFailure>) {
        let Some(c) = self.cycle.as_mut() else { return };
        let Some((i, q)) = c.in_flight.remove(&token) else { return };
        let kind = match q {
            Query::ClassPortInfo => QueryKind::ClassPortInfo,
            Query::Counters => QueryKind::PortCounters,
            Query::Extended => QueryKind::PortCountersExtended,
            Query::Clear { .. } => QueryKind::Clear,
        };
        if let Err(f) = answer {
            self.stats.unanswered[kind.index()][f.index()] += 1;
        }
        let guid = c.targets[i].node_guid;
        match (q, answer) {
            (Query::ClassPortInfo, answer) => {
                let waiting = c.waiting.remove(&guid).unwrap_or_default();
                let mask = match answer {
                    Ok(data) => Some(ClassPortInfoRepr::parse_bytes(&data).map_or(0, |r| r.capability_mask)),
                    // A PMA that refuses ClassPortInfo still has PortCounters
                    // (they are mandatory, IBA 16.1.3.5); assume no more.
                    Err(PerfFailure::Status(_)) => Some(0),
                    Err(_) => None,
                };
                match mask {
                    Some(m) => {
                        self.caps.insert(guid, m);
                        for p in waiting.into_iter().rev() {
                            c.ready.push_front((p, Query::Counters));
                        }
                    }
                    None => {
                        c.skipped += waiting.len();
                        self.stats.ports_skipped_total += waiting.len() as u64;
                    }
                }
            }
            (Query::Counters, Ok(data)) => {
                let Ok(pc) = PortCountersRepr::parse_bytes(&data) else { return self.maybe_finish(now) };
                let caps = PmaCaps::from_mask(self.caps.get(&guid).copied().unwrap_or(0));
                match caps.extended {
                    Extended::None => self.account(now, i, &pc, caps, None),
                    _ => {
                        c.partial.insert(i, pc);
                        c.ready.push_front((i, Query::Extended));
                    }
                }
            }
            (Query::Counters, Err(_)) => {
                c.skipped += 1;
                self.stats.ports_skipped_total += 1;
            }
            (Query::Extended, answer) => {
                let caps = PmaCaps::from_mask(self.caps.get(&guid).copied().unwrap_or(0));
                if let Some(pc) = c.partial.remove(&i) {
                    let ext = answer.ok().and_then(|d| PortCountersExtendedRepr::parse_bytes(&d).ok());
                    self.account(now, i, &pc, caps, ext.as_ref());
                }
            }
            (Query::Clear { select, select2 }, Ok(_)) => {
                let port = c.targets[i].port;
                if let Some(k) = self.accounts.get_mut(&(guid, port)) {
                    k.account.cleared(select, select2);
                }
                self.stats.clears += 1;
            }
            (Query::Clear { .. }, Err(_)) => {}
        }
        self.maybe_finish(now);
    }

    /// Error jumps found since the last call, oldest first.
    pub fn poll_event(&mut self) -> Option<PerfEvent> {
        self.events.pop_front()
    }

    fn account(
        &mut self,
        now: Duration,
        i: usize,
        pc: &PortCountersRepr,
        caps: PmaCaps,
        ext: Option<&PortCountersExtendedRepr>,
    ) {
        let rule = JumpRule {
            threshold: self.cfg.error_threshold,
            factor: self.cfg.error_rate_factor,
            floor: self.cfg.rate_floor(),
        };
        let Some(c) = self.cycle.as_mut() else { return };
        let t = &c.targets[i];
        let reading = Reading::new(pc, caps, ext);
        let kept = self
            .accounts
            .entry((t.node_guid, t.port))
            .or_insert_with(|| Box::new(Kept { account: PortAccount::new(), seen: c.started }));
        let before = *kept.account.totals();
        let applied = kept.account.apply(now, &reading, &rule);
        add_rises(&mut self.stats.fabric, &before, kept.account.totals());
        c.polled += 1;
        self.stats.backwards += applied.backwards.len() as u64;
        for j in applied.jumps {
            self.stats.error_jumps += 1;
            self.events.push_back(PerfEvent {
                node_guid: t.node_guid,
                node_desc: t.node_desc.clone(),
                port: t.port,
                lid: t.lid,
                counter: j.counter,
                kind: j.kind,
                delta: j.delta,
                elapsed: j.elapsed,
                previous: j.previous,
            });
        }
        if applied.clear != (0, 0) {
            c.ready.push_front((i, Query::Clear { select: applied.clear.0, select2: applied.clear.1 }));
        }
    }

    fn maybe_finish(&mut self, now: Duration) {
        let Some(c) = self.cycle.as_ref() else { return };
        if !(c.todo.is_empty() && c.ready.is_empty() && c.waiting.is_empty() && c.in_flight.is_empty()) {
            return;
        }
        let c = self.cycle.take().expect("checked above");
        self.stats.cycles += 1;
        self.stats.last_cycle_duration = now.saturating_sub(c.started);
        self.stats.last_cycle_ports = c.targets.len();
        self.stats.last_cycle_polled = c.polled;
        self.stats.last_cycle_skipped = c.skipped;
        self.next_cycle = (c.started + self.cfg.interval()).max(now);
        self.last_started = Some(c.started);
        let ports = c
            .targets
            .iter()
            .filter_map(|t| {
                let a = &self.accounts.get(&(t.node_guid, t.port))?.account;
                Some(PortTotals {
                    node_guid: t.node_guid,
                    node_desc: t.node_desc.clone(),
                    port: t.port,
                    totals: *a.totals(),
                })
            })
            .collect();
        self.shared.publish(PerfSnapshot { ports, stats: self.stats.clone() });
    }
}

// Keeps COUNTERS and the PerCounter arrays in step with the enum.
const _: () = assert!(Counter::ALL.len() == COUNTERS);

#[cfg(test)]
mod tests;
