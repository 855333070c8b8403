//! What `/status` answers: the SM's state in the election, what the last
//! heavy and light sweeps found, readiness, health and the recent errors.
//!
//! The owner task writes a [`StatusBoard`] with small calls as things
//! happen; the HTTP thread reads it without a lock (`arc-swap`), so a slow
//! reader never holds the SM up, and the SM never waits for a reader. A
//! write copies the small [`BoardState`] (a few hundred bytes and at most
//! [`RECENT_ERRORS`] strings), never the fabric: heavy sweep figures are
//! counted once, when the sweep is reported.
//!
//! The JSON field names of [`Status`] are an interface (`ibsm status`,
//! scripts and the end-to-end test read them): add fields, do not rename
//! or remove them.

use std::collections::VecDeque;
use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};

use crate::election::State;
use crate::mad::{NodeType, PortState};
use crate::subnet::{Census, SweepReport};
use crate::types::{Guid, Lid};

/// How many errors `/status` keeps (the oldest go first).
pub const RECENT_ERRORS: usize = 20;
/// How many problems of a sweep `/status` spells out (all are counted).
pub const FIRST_PROBLEMS: usize = 5;
/// How old the owner task's heartbeat may be before `/healthz` says the
/// SM is stuck, unless [`StatusBoard::with_heartbeat_limit`] says otherwise.
pub const HEARTBEAT_LIMIT: Duration = Duration::from_secs(30);

/// The whole `/status` answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// ibsm's version (Cargo package version).
    pub version: String,
    /// Seconds since the board was made (the SM's start).
    pub uptime_s: u64,
    /// What `/readyz` answers: true once the first heavy sweep as master
    /// has finished or standby was reached.
    pub ready: bool,
    /// Why the SM is (not) ready, for a person.
    pub ready_reason: String,
    pub sm: SmStatus,
    /// The routing engine (chain) of the last heavy sweep; null before it.
    pub routing_engine: Option<String>,
    /// What the last heavy sweep found; null before the first one.
    pub fabric: Option<FabricCounts>,
    /// The last heavy sweep; null before the first one.
    pub heavy_sweep: Option<SweepStatus>,
    /// The last light sweep; null before the first one.
    pub light_sweep: Option<SweepStatus>,
    /// The last reaction to a fabric change (a trap, a light sweep's
    /// finding): what changed, and whether it was programmed as a bounded
    /// change set or fell back to a heavy sweep, and why; null before the
    /// first one.
    pub reaction: Option<ReactionStatus>,
    /// Cables held down for flapping (`sm.flap_downs`): not routed over,
    /// their ports left in INIT until the hold ends.
    #[serde(default)]
    pub held_cables: Vec<HeldCableStatus>,
    /// The newest errors, oldest first, at most [`RECENT_ERRORS`].
    pub errors: Vec<ErrorEntry>,
    /// Errors recorded since start (those dropped from `errors` included).
    pub errors_total: u64,
}

/// This SM in the election (IBA 14.4.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmStatus {
    /// NOTACTIVE, DISCOVERING, STANDBY or MASTER; "STARTING" before the
    /// election reported anything.
    pub state: String,
    /// SMInfo.SMState: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER;
    /// null while starting.
    pub state_code: Option<u8>,
    /// SMInfo.Priority, 0-15.
    pub priority: u8,
    /// This SM's port GUID as `0x` and 16 hex digits; null until known.
    pub port_guid: Option<String>,
    /// This SM's port LID; null until known (0 before it has one).
    pub port_lid: Option<u16>,
    /// The master SM's port GUID (this one when master); null when none is
    /// known.
    pub master_guid: Option<String>,
    /// The master SM's LID; null when none is known.
    pub master_lid: Option<u16>,
}

/// Counts of what the last heavy sweep found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FabricCounts {
    /// Every node found, switches and channel adapters (routers included).
    pub nodes: u64,
    pub switches: u64,
    /// Nodes that are not switches.
    pub cas: u64,
    /// Ports of non-switch nodes whose PortInfo was read.
    pub ca_ports: u64,
    /// Cables between two ports, each counted once, by state.
    pub links: LinkCounts,
    /// LIDs assigned to present ports (2^LMC per port).
    pub lids_in_use: u64,
    /// The highest LID assigned (LinearFDBTop).
    pub max_lid: u16,
    /// Nodes the SM leaves alone (bad NodeInfo, ...).
    pub quarantined: u64,
    /// Cabled ports that did not reach ACTIVE.
    pub inactive_ports: u64,
    /// Every cabled port ACTIVE, every port with LIDs, nothing unknown.
    pub subnet_up: bool,
}

/// Links by the state of their less advanced end (PortInfo.PortState, IBA
/// 14.2.5.6): a link is Active only when both ends are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LinkCounts {
    pub active: u64,
    pub armed: u64,
    pub init: u64,
    pub down: u64,
    /// An end whose PortInfo was not read, or a state code IBA does not
    /// define.
    pub unknown: u64,
}

/// One sweep, heavy or light.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepStatus {
    /// Sweeps of this kind since start.
    pub count: u64,
    /// When it ended, RFC 3339 in UTC.
    pub at: String,
    /// The same instant in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    pub duration_s: f64,
    /// How many problems it reported (for a light sweep: what it found
    /// that calls for a heavy sweep).
    pub problems: u64,
    /// The first [`FIRST_PROBLEMS`] of them, as text.
    pub first_problems: Vec<String>,
}

/// Reactions to fabric changes: how many, and the last one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReactionStatus {
    /// Reactions since start, bounded or not.
    pub count: u64,
    /// Those that could not be bounded and fell back to a heavy sweep.
    pub heavy_fallbacks: u64,
    /// When the last one ended, RFC 3339 in UTC.
    pub at: String,
    pub at_unix_ms: u64,
    pub duration_s: f64,
    /// What started it: "trap 128", "trap 144" or "light sweep".
    pub trigger: String,
    /// What changed, counted by kind ("1 links down").
    pub changes: String,
    /// What the SM did: "programmed" (changes found, or tables written),
    /// "nothing changed" or "heavy sweep".
    pub taken: String,
    /// Why a heavy sweep was taken; null when the change was programmed.
    pub why: Option<String>,
    /// SMPs it read, and Sets it sent (0 for a fallback).
    pub reads: u64,
    pub sets: u64,
    /// Ports between switches it did not read: the switch at the far end
    /// reported no port state change.
    pub vouched: u64,
}

/// A cable held down for flapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldCableStatus {
    /// Its ends (node GUID and port), the node's name and path.
    pub cable: String,
    /// Downs counted in the window that started the hold.
    pub downs: u32,
    /// When the hold ends, RFC 3339 in UTC.
    pub until: String,
}

/// One recorded error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEntry {
    /// RFC 3339 in UTC.
    pub at: String,
    pub at_unix_ms: u64,
    pub message: String,
}

/// What `/healthz` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// The heartbeat is this old, within the limit.
    Alive(Duration),
    /// The heartbeat is older than `limit`.
    Stale { age: Duration, limit: Duration },
    /// The owner task never stamped one.
    NoHeartbeat,
}

impl Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Health::Alive(age) => write!(f, "ok: the SM's owner task stamped its heartbeat {} ms ago", age.as_millis()),
            Health::Stale { age, limit } => write!(
                f,
                "stale: the SM's owner task last stamped its heartbeat {:.1} s ago (limit {:.1} s)",
                age.as_secs_f64(),
                limit.as_secs_f64()
            ),
            Health::NoHeartbeat => write!(f, "no heartbeat: the SM's owner task has not started"),
        }
    }
}

/// The parts of [`Status`] that change with owner-task calls; swapped
/// whole on each.
#[derive(Debug, Clone)]
struct BoardState {
    ready: bool,
    ready_reason: String,
    sm: SmStatus,
    routing_engine: Option<String>,
    fabric: Option<FabricCounts>,
    heavy: Option<SweepStatus>,
    light: Option<SweepStatus>,
    reaction: Option<ReactionStatus>,
    held_cables: Vec<HeldCableStatus>,
    errors: VecDeque<ErrorEntry>,
    errors_total: u64,
}

struct Board {
    state: ArcSwap<BoardState>,
    version: String,
    started: Instant,
    heartbeat_limit: Duration,
    /// Milliseconds from `started` to the last heartbeat, plus one; 0 for
    /// none yet.
    heartbeat: AtomicU64,
}

/// The `/status` board: the owner task writes, anyone reads. Clones share
/// it.
#[derive(Clone)]
pub struct StatusBoard(Arc<Board>);

impl Default for StatusBoard {
    fn default() -> Self {
        StatusBoard::new()
    }
}

impl std::fmt::Debug for StatusBoard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusBoard").field("state", &self.0.state.load().sm.state).finish()
    }
}

impl StatusBoard {
    /// A board for an SM starting now, with the [`HEARTBEAT_LIMIT`].
    pub fn new() -> StatusBoard {
        StatusBoard::with_heartbeat_limit(HEARTBEAT_LIMIT)
    }

    /// A board whose `/healthz` fails once the heartbeat is older than
    /// `limit`.
    pub fn with_heartbeat_limit(limit: Duration) -> StatusBoard {
        let state = BoardState {
            ready: false,
            ready_reason: "starting: no heavy sweep as master has finished and standby was not reached".into(),
            sm: SmStatus {
                state: "STARTING".into(),
                state_code: None,
                priority: 0,
                port_guid: None,
                port_lid: None,
                master_guid: None,
                master_lid: None,
            },
            routing_engine: None,
            fabric: None,
            heavy: None,
            light: None,
            reaction: None,
            held_cables: Vec::new(),
            errors: VecDeque::with_capacity(RECENT_ERRORS),
            errors_total: 0,
        };
        StatusBoard(Arc::new(Board {
            state: ArcSwap::from_pointee(state),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started: Instant::now(),
            heartbeat_limit: limit,
            heartbeat: AtomicU64::new(0),
        }))
    }

    fn update(&self, f: impl Fn(&mut BoardState)) {
        // One writer (the owner task) in practice; `rcu` keeps concurrent
        // writers correct anyway.
        self.0.state.rcu(|old| {
            let mut new = BoardState::clone(old);
            f(&mut new);
            new
        });
    }

    /// The election's state, this SM's priority and the master it knows
    /// (itself when master). Call on every state change and when the
    /// master changes.
    pub fn set_election(&self, state: State, priority: u8, master_guid: Option<Guid>, master_lid: Option<Lid>) {
        self.update(|s| {
            s.sm.state = state.to_string();
            s.sm.state_code = Some(u8::from(state.sm_state()));
            s.sm.priority = priority;
            s.sm.master_guid = master_guid.map(|g| g.to_string());
            s.sm.master_lid = master_lid.map(|l| l.0);
        });
    }

    /// This SM's own port: its GUID and LID. Call once the port is open and
    /// whenever its LID changes (after a heavy sweep as master).
    pub fn set_port(&self, guid: Guid, lid: Lid) {
        self.update(|s| {
            s.sm.port_guid = Some(guid.to_string());
            s.sm.port_lid = Some(lid.0);
        });
    }

    /// A heavy sweep that programmed the fabric, and the routing engine
    /// (chain) it used. Counts the fabric here, once.
    pub fn heavy_sweep(&self, report: &SweepReport, engine: &str) {
        self.heavy_sweep_counted(report, &Census::of(&report.subnet), engine)
    }

    /// [`Self::heavy_sweep`] with the sweep's census already taken (the
    /// owner takes one per sweep for `/status` and the metrics alike).
    pub fn heavy_sweep_counted(&self, report: &SweepReport, census: &Census, engine: &str) {
        let counts = fabric_counts_of(report, census);
        let now = SystemTime::now();
        let problems: Vec<String> = report.problems().iter().take(FIRST_PROBLEMS).map(|p| p.to_string()).collect();
        let total = report.problems().len() as u64;
        // A reaction's programming shows in the fabric and the engine, and
        // in `reaction`; `heavy_sweep` stays the last heavy sweep's.
        let heavy = matches!(report.kind, crate::subnet::SweepKind::Heavy);
        self.update(|s| {
            s.fabric = Some(counts);
            s.routing_engine = Some(engine.to_string());
            if heavy {
                let count = s.heavy.as_ref().map_or(0, |h| h.count) + 1;
                s.heavy = Some(sweep_status(count, now, report.elapsed, total, problems.clone()));
            }
        });
    }

    /// A reaction to a fabric change, as [`ReactionStatus`] shows it:
    /// programmed (`why` is `None`, `sets` were sent) or fallen back to a
    /// heavy sweep for `why`.
    pub fn reaction(&self, trigger: &str, changes: &crate::subnet::ChangeSet, duration: Duration, sets: u64) {
        let now = SystemTime::now();
        let why = changes.unbounded.clone();
        self.update(|s| {
            let (count, fallbacks) = s.reaction.as_ref().map_or((0, 0), |r| (r.count, r.heavy_fallbacks));
            s.reaction = Some(ReactionStatus {
                count: count + 1,
                heavy_fallbacks: fallbacks + why.is_some() as u64,
                at: rfc3339(now),
                at_unix_ms: unix_ms(now),
                duration_s: duration.as_secs_f64(),
                trigger: trigger.to_string(),
                changes: changes.summary(),
                // A rebalance changes nothing in the fabric and may still
                // write tables.
                taken: match (&why, changes.changes.is_empty() && sets == 0) {
                    (Some(_), _) => "heavy sweep",
                    (None, true) => "nothing changed",
                    (None, false) => "programmed",
                }
                .to_string(),
                why: why.clone(),
                reads: changes.reads as u64,
                sets,
                vouched: changes.vouched as u64,
            });
        });
    }

    /// The cables held down for flapping now, and how long each hold has
    /// left.
    pub fn cables_held(&self, held: Vec<(crate::subnet::flaps::HeldCable, Duration)>) {
        let now = SystemTime::now();
        let held: Vec<HeldCableStatus> = held
            .into_iter()
            .map(|(h, left)| HeldCableStatus { cable: h.to_string(), downs: h.downs, until: rfc3339(now + left) })
            .collect();
        self.update(|s| s.held_cables = held.clone());
    }

    /// A light sweep, how long it took, and what it found that calls for a
    /// heavy sweep (nothing: an empty iterator; `Option<LightFinding>`
    /// iterates as one).
    pub fn light_sweep<I, D>(&self, duration: Duration, problems: I)
    where
        I: IntoIterator<Item = D>,
        D: Display,
    {
        let now = SystemTime::now();
        let mut total = 0u64;
        let mut first = Vec::new();
        for p in problems {
            if first.len() < FIRST_PROBLEMS {
                first.push(p.to_string());
            }
            total += 1;
        }
        self.update(|s| {
            let count = s.light.as_ref().map_or(0, |l| l.count) + 1;
            s.light = Some(sweep_status(count, now, duration, total, first.clone()));
        });
    }

    /// An error worth an operator's eye (the one also logged at error):
    /// kept with its time, the oldest dropped past [`RECENT_ERRORS`].
    pub fn record_error(&self, message: impl Into<String>) {
        let now = SystemTime::now();
        let entry = ErrorEntry { at: rfc3339(now), at_unix_ms: unix_ms(now), message: message.into() };
        self.update(|s| {
            if s.errors.len() == RECENT_ERRORS {
                s.errors.pop_front();
            }
            s.errors.push_back(entry.clone());
            s.errors_total += 1;
        });
    }

    /// The owner task is alive: call at least every few seconds (every
    /// turn of its loop, or a 1 s tick), never from another task.
    pub fn heartbeat(&self) {
        let ms = self.0.started.elapsed().as_millis() as u64 + 1;
        self.0.heartbeat.store(ms, Ordering::Relaxed);
    }

    /// `/readyz` answers 200 from now on, with `reason` (say, "master: first
    /// heavy sweep done" or "standby").
    pub fn ready(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.update(|s| {
            s.ready = true;
            s.ready_reason = reason.clone();
        });
    }

    /// `/readyz` answers 503 again, with `reason`.
    pub fn unready(&self, reason: impl Into<String>) {
        let reason = reason.into();
        self.update(|s| {
            s.ready = false;
            s.ready_reason = reason.clone();
        });
    }

    /// Whether the SM is ready, and why (not).
    pub fn readiness(&self) -> (bool, String) {
        let s = self.0.state.load();
        (s.ready, s.ready_reason.clone())
    }

    /// Whether the owner task's heartbeat is fresh.
    pub fn health(&self) -> Health {
        let stamp = self.0.heartbeat.load(Ordering::Relaxed);
        if stamp == 0 {
            return Health::NoHeartbeat;
        }
        let now = self.0.started.elapsed().as_millis() as u64 + 1;
        let age = Duration::from_millis(now.saturating_sub(stamp));
        if age > self.0.heartbeat_limit {
            Health::Stale { age, limit: self.0.heartbeat_limit }
        } else {
            Health::Alive(age)
        }
    }

    /// Everything `/status` shows, as it stands.
    pub fn status(&self) -> Status {
        let s = self.0.state.load();
        Status {
            version: self.0.version.clone(),
            uptime_s: self.0.started.elapsed().as_secs(),
            ready: s.ready,
            ready_reason: s.ready_reason.clone(),
            sm: s.sm.clone(),
            routing_engine: s.routing_engine.clone(),
            fabric: s.fabric,
            heavy_sweep: s.heavy.clone(),
            light_sweep: s.light.clone(),
            reaction: s.reaction.clone(),
            held_cables: s.held_cables.clone(),
            errors: s.errors.iter().cloned().collect(),
            errors_total: s.errors_total,
        }
    }
}

fn sweep_status(count: u64, at: SystemTime, duration: Duration, problems: u64, first: Vec<String>) -> SweepStatus {
    SweepStatus {
        count,
        at: rfc3339(at),
        at_unix_ms: unix_ms(at),
        duration_s: duration.as_secs_f64(),
        problems,
        first_problems: first,
    }
}

/// The counts `/status` shows for one heavy sweep.
pub fn fabric_counts(report: &SweepReport) -> FabricCounts {
    fabric_counts_of(report, &Census::of(&report.subnet))
}

/// The counts `/status` shows for one heavy sweep, from its census. A cable
/// to a quarantined node counts (from the only end listed), and so does
/// one whose far port the sweep does not hold (its state unknown).
pub fn fabric_counts_of(report: &SweepReport, census: &Census) -> FabricCounts {
    let mut c = FabricCounts { nodes: census.node_count(), ..FabricCounts::default() };
    for (&node_type, &n) in &census.nodes {
        if node_type == NodeType::Switch {
            c.switches += n;
        } else {
            c.cas += n;
        }
    }
    c.quarantined = census.quarantined;
    c.ca_ports = census
        .ports
        .iter()
        .filter(|(k, _)| k.node_type != NodeType::Switch && k.state.is_some())
        .map(|(_, &n)| n)
        .sum();
    for (cable, &n) in &census.cables {
        match link_rank([cable.near, cable.far]) {
            Some(0) => c.links.down += n,
            Some(1) => c.links.init += n,
            Some(2) => c.links.armed += n,
            Some(3) => c.links.active += n,
            _ => c.links.unknown += n,
        }
    }
    c.lids_in_use = report.lids.ranges.values().map(|r| u64::from(r.len())).sum();
    c.max_lid = report.lids.max_lid.0;
    c.inactive_ports = report.inactive.len() as u64;
    c.subnet_up = report.subnet_up();
    c
}

/// The less advanced of a link's two ends: 0 Down, 1 Init, 2 Armed, 3
/// Active (ActiveDefer counts as Active); `None` when an end is unknown.
fn link_rank(states: [Option<PortState>; 2]) -> Option<u8> {
    let mut lowest = u8::MAX;
    for s in states {
        let rank = match s? {
            PortState::Down => 0,
            PortState::Init => 1,
            PortState::Armed => 2,
            PortState::Active | PortState::ActiveDefer => 3,
            PortState::NoChange | PortState::Unknown(_) => return None,
        };
        lowest = lowest.min(rank);
    }
    Some(lowest)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `t` as RFC 3339 in UTC with milliseconds, e.g. `2024-05-01T12:00:00.000Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let ms = unix_ms(t);
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem / 60 % 60, rem % 60, ms % 1000)
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// days-to-civil algorithm, eras of 400 years).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::topology::Topology;

    pub(crate) const SPEC: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

    /// One heavy sweep of a small fat tree by an SM on its first host, done
    /// once for every test that wants a real report.
    pub(crate) fn swept() -> &'static (Topology, SweepReport) {
        static REPORT: OnceLock<(Topology, SweepReport)> = OnceLock::new();
        REPORT.get_or_init(|| {
            use crate::exchange::txn::TxnConfig;
            use crate::sim::{FabricBuilder, SimDevice};
            use crate::transport::io_thread::MadTransport;
            let topo = Topology::from_spec_or_file(SPEC).unwrap();
            let fabric = FabricBuilder::new(&topo).seed(3).build_shared().unwrap();
            let dev = SimDevice::attach(&fabric, topo.hosts().next().unwrap(), 1).unwrap();
            dev.set_is_sm(true);
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let report = rt.block_on(async {
                let txn =
                    TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
                let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
                let mut sm = crate::program::SubnetManager::new(transport, crate::config::SmConfig::default(), false);
                sm.sweep().await.unwrap()
            });
            assert!(report.subnet_up(), "the fixture fabric comes up");
            (topo, report)
        })
    }

    #[test]
    fn heavy_sweep_counts_the_fabric() {
        let (topo, report) = swept();
        let b = StatusBoard::new();
        b.heavy_sweep(report, "minhop");
        let s = b.status();
        let f = s.fabric.unwrap();
        let switches = topo.switches().count() as u64;
        let hosts = topo.hosts().count() as u64;
        let host_ports =
            topo.links.iter().flat_map(|l| [l.a, l.b]).filter(|p| topo.hosts().any(|h| h == p.node)).count();
        assert_eq!((f.nodes, f.switches, f.cas), (switches + hosts, switches, hosts));
        assert_eq!(f.ca_ports, host_ports as u64);
        assert_eq!(f.links, LinkCounts { active: topo.links.len() as u64, ..LinkCounts::default() });
        // LMC 0: one LID per switch and per host port.
        assert_eq!(f.lids_in_use, switches + host_ports as u64);
        assert!(f.subnet_up);
        assert_eq!(s.routing_engine.as_deref(), Some("minhop"));
        let h = s.heavy_sweep.unwrap();
        assert_eq!((h.count, h.problems), (1, 0));
        assert_eq!(h.duration_s, report.elapsed.as_secs_f64());

        // One end of one link back in Init, a second sweep: counted again.
        let mut changed = report.clone();
        let (id, port, _, _) = changed.subnet.cabled_ports().next().unwrap();
        changed.subnet.node_mut(id).ports[port as usize].info.as_mut().unwrap().port_state = PortState::Init;
        b.heavy_sweep(&changed, "updn");
        let s = b.status();
        let links = s.fabric.unwrap().links;
        assert_eq!((links.active, links.init), (topo.links.len() as u64 - 1, 1));
        assert_eq!(s.heavy_sweep.unwrap().count, 2);
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day in a century year divisible by 400).
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_millis(951_782_400_123)), "2000-02-29T00:00:00.123Z");
        // 2024-12-31T23:59:59Z, the last second of a leap year.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_735_689_599)), "2024-12-31T23:59:59.000Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(1_735_689_600)), "2025-01-01T00:00:00.000Z");
    }

    #[test]
    fn election_port_and_readiness() {
        let b = StatusBoard::new();
        let s = b.status();
        assert_eq!(s.sm.state, "STARTING");
        assert_eq!(s.sm.state_code, None);
        assert!(!s.ready);
        assert!(b.readiness().1.contains("starting"));
        b.set_election(State::Master, 14, Some(Guid(0x1234)), Some(Lid(7)));
        b.set_port(Guid(0x1234), Lid(7));
        b.ready("master: first heavy sweep done");
        let s = b.status();
        assert_eq!(s.sm.state, "MASTER");
        assert_eq!(s.sm.state_code, Some(3));
        assert_eq!(s.sm.priority, 14);
        assert_eq!(s.sm.master_guid.as_deref(), Some("0x0000000000001234"));
        assert_eq!(s.sm.master_lid, Some(7));
        assert_eq!(s.sm.port_lid, Some(7));
        assert_eq!(b.readiness(), (true, "master: first heavy sweep done".to_string()));
        b.set_election(State::Standby, 1, None, None);
        b.unready("discovering again");
        let s = b.status();
        assert_eq!((s.sm.state.as_str(), s.sm.state_code, s.sm.master_guid), ("STANDBY", Some(2), None));
        assert!(!s.ready);
    }

    #[test]
    fn errors_keep_the_newest() {
        let b = StatusBoard::new();
        for i in 0..(RECENT_ERRORS + 5) {
            b.record_error(format!("error {i}"));
        }
        let s = b.status();
        assert_eq!(s.errors.len(), RECENT_ERRORS);
        assert_eq!(s.errors_total, (RECENT_ERRORS + 5) as u64);
        assert_eq!(s.errors[0].message, "error 5");
        assert_eq!(s.errors.last().unwrap().message, format!("error {}", RECENT_ERRORS + 4));
        assert!(s.errors[0].at.ends_with('Z'));
    }

    #[test]
    fn heartbeat_goes_stale() {
        let b = StatusBoard::with_heartbeat_limit(Duration::from_millis(30));
        assert_eq!(b.health(), Health::NoHeartbeat);
        b.heartbeat();
        assert!(matches!(b.health(), Health::Alive(_)), "{}", b.health());
        std::thread::sleep(Duration::from_millis(80));
        assert!(matches!(b.health(), Health::Stale { .. }), "{}", b.health());
        b.heartbeat();
        assert!(matches!(b.health(), Health::Alive(_)));
    }

    #[test]
    fn light_sweeps_count_and_keep_the_first_problems() {
        let b = StatusBoard::new();
        b.light_sweep(Duration::from_millis(20), None::<String>);
        let texts: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
        b.light_sweep(Duration::from_millis(40), &texts);
        let l = b.status().light_sweep.unwrap();
        assert_eq!(l.count, 2);
        assert_eq!(l.problems, 8);
        assert_eq!(l.first_problems, texts[..FIRST_PROBLEMS].to_vec());
        assert!((l.duration_s - 0.04).abs() < 1e-9);
    }

    #[test]
    fn link_ranks() {
        use PortState::*;
        assert_eq!(link_rank([Some(Active), Some(ActiveDefer)]), Some(3));
        assert_eq!(link_rank([Some(Active), Some(Armed)]), Some(2));
        assert_eq!(link_rank([Some(Init), Some(Active)]), Some(1));
        assert_eq!(link_rank([Some(Down), Some(Active)]), Some(0));
        assert_eq!(link_rank([Some(Active), None]), None);
        assert_eq!(link_rank([Some(Unknown(9)), Some(Active)]), None);
    }

    #[test]
    fn status_json_field_names() {
        let b = StatusBoard::new();
        b.record_error("x");
        let v = serde_json::to_value(b.status()).unwrap();
        for key in [
            "version",
            "uptime_s",
            "ready",
            "ready_reason",
            "sm",
            "routing_engine",
            "fabric",
            "heavy_sweep",
            "light_sweep",
            "reaction",
            "errors",
            "errors_total",
        ] {
            assert!(v.get(key).is_some(), "{key} in {v}");
        }
        for key in ["state", "state_code", "priority", "port_guid", "port_lid", "master_guid", "master_lid"] {
            assert!(v["sm"].get(key).is_some(), "sm.{key} in {v}");
        }
        let back: Status = serde_json::from_value(v).unwrap();
        assert_eq!(back, b.status_without_uptime_drift(&back));
    }

    impl StatusBoard {
        /// The status with `uptime_s` taken from `other` (it ticks).
        fn status_without_uptime_drift(&self, other: &Status) -> Status {
            Status { uptime_s: other.uptime_s, ..self.status() }
        }
    }
}
