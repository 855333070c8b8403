//! The SM's runtime: one owner task holds all SM state; everything else
//! owns nothing and hands it typed results.
//!
//! ```text
//!  MadTransport I/O thread ── unsolicited mpsc ──► owner task ── dispatch::classify
//!        ▲   (TIDs, window, retries)                 │   SMInfo Get/Set, traps, status answers
//!        │                                           │
//!        │                                           ├── Election core (election::fsm): state, timers
//!        │  request()/send()                         │
//!        ├──────────── sweep slot (one job) ◄────────┤   discover | take_charge | light sweep,
//!        │                                           │   each owning the SubnetManager while it runs
//!        └──────────── side jobs (FuturesUnordered) ◄┘   polls of the master, SMInfo Sets,
//!                                                        own-port checks: each ends as an Event;
//!                                                        a standby's mirror read of the master's
//!                                                        SA (one at a time) ends as SaInput::Mirror
//!  timers: Election::poll_timeout, the sweep interval and the mirror interval, one sleep in the owner's select
//!  SA task ── watch (alias GUIDs) ──► owner: queues an alias pass (GUIDInfo Sets only) in the sweep slot
//! ```
//!
//! The owner loop: carry out the election's actions, then wait for the
//! first of a MAD from the dispatcher, the sweep job, a side job, a timer or
//! shutdown. No state is shared: the SubnetManager moves into the sweep job
//! and comes back with its result, so nothing is locked.

pub mod backend;
pub mod dispatch;
pub mod driver;
pub mod metrics;
pub mod notify;
pub mod perfmgr;
pub mod sa_task;

pub mod status;

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::election::{Action, Election, Event, Peer, PeerAddr, State};
use crate::mad::header::status as mad_status;
use crate::mad::{AttributeId, DrPath, Method, PortInfoRepr, PortState, SmControl, SmInfoRepr, SmpAttribute};
use crate::program::{Discovered, SubnetManager, SweepError};
use crate::subnet::{MasterMode, SweepReport};
use crate::transport::{Datagram, SmpClient, Transport};
use crate::types::Lid;
use dispatch::{Inbound, Refusal};

/// How `run` should behave.
#[derive(Clone)]
pub struct RunOptions {
    /// Where sweep results and MAD counts are published.
    pub metrics: Option<metrics::Metrics>,
    /// Sweep until the subnet is up (at most `once_attempts` sweeps), then return.
    pub once: bool,
    pub once_attempts: u32,
    /// Keep guid2lid in `config.sm.cache_dir`.
    pub persist_lids: bool,
    /// SIGUSR1 asks the master to hand over now (the service, not tests).
    pub operator_signals: bool,
    /// Where each heavy sweep's results are published for readers.
    pub snapshots: crate::subnet::Snapshots,
    /// What `/status`, `/healthz` and `/readyz` answer from.
    pub status: status::StatusBoard,
    /// systemd: READY=1 once ready, the watchdog fed by the owner,
    /// RELOADING=1 around a SIGHUP reload, STOPPING=1 at the end.
    pub notifier: Arc<notify::Notifier>,
    /// SIGHUP: reads the configuration again (the file with the command
    /// line's overrides). `None`: SIGHUP only re-reads partitions.conf.
    pub reload: Option<ConfigReader>,
}

/// Reads the configuration afresh, validated, or says why it cannot.
pub type ConfigReader = Arc<dyn Fn() -> Result<Config, String> + Send + Sync>;

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            metrics: None,
            once: false,
            once_attempts: 3,
            persist_lids: true,
            operator_signals: false,
            snapshots: crate::subnet::Snapshots::new(),
            status: status::StatusBoard::new(),
            notifier: Arc::new(notify::Notifier::disabled()),
            reload: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("sweep failed: {0}")]
    Sweep(#[from] SweepError),
    #[error("the subnet did not come up after {attempts} sweeps: {}", reasons.iter().map(|r| r.to_string()).collect::<Vec<_>>().join("; "))]
    NotUp { attempts: u32, reasons: Vec<NotUpReason> },
    #[error("another SM is master ({master}); --once does not take over from it")]
    OtherMaster { master: String },
    #[error("partitions: {0}")]
    Partitions(#[from] crate::partition::conf::PartitionConfError),
}

/// Why the subnet is not up, each naming the node, port and path concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotUpReason {
    #[error("port not active: {0}")]
    Inactive(crate::subnet::InactivePort),
    #[error("{0}")]
    Problem(crate::subnet::SweepProblem),
    #[error("LIDs: {0}")]
    Lids(String),
    #[error("{0}")]
    Stopped(String),
}

/// How soon a multicast pass whose SMPs failed is tried again.
const MCAST_RETRY: Duration = Duration::from_secs(1);

/// What the sweep slot's job ended with; the SubnetManager comes back with it.
enum SweepDone {
    Discovered(Result<Box<Discovered>, SweepError>),
    Programmed(Result<Box<SweepReport>, SweepError>),
    LightSwept(Option<crate::sweep::light::LightFinding>, Duration),
    /// The alias pass (`None`: the SM has not programmed the fabric yet).
    AliasesProgrammed(Option<crate::subnet::ProgramReport>),
    /// The multicast pass (`None`: no heavy sweep has routed yet).
    McastProgrammed(Option<crate::subnet::McastReport>),
}

/// Work for the sweep slot, queued while it is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SweepWork {
    Discover,
    TakeCharge {
        takeover: bool,
    },
    Light,
    /// The SA's alias GUIDs changed: write the GUIDInfo blocks that differ.
    Aliases,
    /// The SA's multicast groups changed: route them, write the MFT blocks
    /// that differ.
    Multicast,
}

type SweepJob<T> = Pin<Box<dyn Future<Output = (SubnetManager<SmpClient<T>>, SweepDone)> + Send>>;
type SideJob = Pin<Box<dyn Future<Output = Option<SideDone>> + Send>>;

/// What a side job ended with.
enum SideDone {
    Election(Event),
    Mirror(sa_task::MirrorOutcome),
}

/// A standby's mirror reads of the master's SA (`crate::sa::mirror`).
#[derive(Debug, Default)]
struct MirrorReads {
    /// When the next read starts (only while STANDBY, with mirroring on).
    next: Option<Duration>,
    /// A read is under way (never two at once).
    running: bool,
    /// The reads are failing: the first failure of a run was logged as a
    /// warning, the others at debug until a read works again.
    failing: bool,
}

/// Everything the owner task owns.
struct Owner<T: Transport + Clone> {
    election: Election,
    /// `None` while the sweep slot's job holds it.
    sm: Option<SubnetManager<SmpClient<T>>>,
    client: SmpClient<T>,
    transport: T,
    config: Config,
    options: RunOptions,
    started: tokio::time::Instant,
    queue: VecDeque<SweepWork>,
    discovered: Option<Discovered>,
    /// A master sweep ran before: later ones are `Continuing`.
    took_charge: bool,
    /// The last published snapshot (its report is what `run` returns).
    last: Option<Arc<crate::subnet::Snapshot>>,
    was_up: bool,
    next_sweep: Option<Duration>,
    attempts: u32,
    refused: BTreeMap<Refusal, u64>,
    /// Snapshots published so far.
    published: u64,
    /// Problems the last discovery logged (programming's follow them).
    discovery_problems: usize,
    /// Remote-SM read failures already logged (each once).
    logged_remote: HashSet<(crate::types::Guid, String)>,
    /// The SA's task; it answers only while `master_swept`.
    sa: sa_task::SaHandle,
    /// MASTER, and a master sweep has published a snapshot since.
    master_swept: bool,
    /// When the last "SA queue full" line was logged.
    sa_drop_logged: Option<Duration>,
    /// When to run a multicast pass again after one whose SMPs failed.
    mcast_retry: Option<Duration>,
    mirror: MirrorReads,
    /// When the owner next stamps the `/healthz` heartbeat (it also
    /// stamps it on every turn of its loop).
    next_heartbeat: Duration,
    /// Whether the performance manager polls now: as master, or as standby
    /// with `perfmgr.on_standby`.
    perf_active: Arc<std::sync::atomic::AtomicU8>,
    /// What a standby's performance manager polls: the ports its own
    /// discovery found (a standby publishes no snapshots).
    standby_ports: StandbyPorts,
    /// The performance manager's configuration; a reload publishes here.
    perf_config: tokio::sync::watch::Sender<crate::perfmgr::PerfMgrConfig>,
    /// A SIGHUP changed keys the SubnetManager holds; applied when it is
    /// home.
    reconfigure_pending: bool,
    /// systemd has had READY=1 (a reload ends with another).
    told_ready: bool,
    /// LID -> node, for log lines, built once per snapshot (its sequence).
    lid_names: std::cell::RefCell<Option<(u64, std::collections::HashMap<u16, crate::subnet::NodeId>)>>,
    /// Trap lines logged in the current second (its start, the count): a
    /// storm is logged as a count, not line by line.
    traps_logged: (Duration, u32),
}

/// Trap lines logged one by one per second; the rest are counted.
const TRAP_LINES_PER_S: u32 = 10;

/// The performance manager polls nothing, the newest snapshot's ports
/// (master), or the standby's discovered ports.
const PERF_OFF: u8 = 0;
const PERF_MASTER: u8 = 1;
const PERF_STANDBY: u8 = 2;

type StandbyPorts = Arc<arc_swap::ArcSwap<Vec<crate::perfmgr::PerfPort>>>;

/// Every LID of `subnet` (each end port's LMC range, each switch's port
/// 0) to its node, for log lines.
fn lid_index(subnet: &crate::subnet::Subnet) -> std::collections::HashMap<u16, crate::subnet::NodeId> {
    let mut nodes = std::collections::HashMap::new();
    for id in subnet.ids() {
        let n = subnet.node(id);
        let ports = if n.is_switch() { 0..1 } else { 1..n.ports.len() };
        for p in ports {
            let Some(info) = n.ports.get(p).and_then(|slot| slot.info.as_ref()) else { continue };
            if info.lid.0 == 0 {
                continue;
            }
            for l in info.lid.0..info.lid.0.saturating_add(1 << info.lmc.min(7)) {
                nodes.insert(l, id);
            }
        }
    }
    nodes
}

/// Aborts its task when dropped: a task `run` started ends with it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The performance manager as a task of its own beside the owner: it
/// polls the ports of the newest snapshot while `active` says so, in the
/// transport's PerfMgt window, and its counters are scraped through the
/// metrics registry.
fn spawn_perfmgr<T: Transport + Clone>(
    transport: T,
    configs: tokio::sync::watch::Receiver<crate::perfmgr::PerfMgrConfig>,
    options: &RunOptions,
    mode: Arc<std::sync::atomic::AtomicU8>,
    standby_ports: StandbyPorts,
) -> AbortOnDrop {
    let shared = crate::perfmgr::PerfShared::new();
    if let Some(m) = &options.metrics {
        metrics::perfmgr::register(m, &shared);
    }
    let mut core = crate::perfmgr::PerfCore::new(configs.borrow().clone(), shared);
    let mut of_snapshot = crate::perfmgr::targets::from_snapshots(options.snapshots.clone());
    let targets = move || match mode.load(std::sync::atomic::Ordering::Relaxed) {
        PERF_MASTER => of_snapshot(),
        PERF_STANDBY => standby_ports.load().as_ref().clone(),
        _ => Vec::new(),
    };
    AbortOnDrop(tokio::spawn(async move {
        perfmgr::run_configured(&transport, &mut core, targets, configs, std::future::pending()).await;
    }))
}

/// How often an idle owner stamps its heartbeat: well inside
/// `status::HEARTBEAT_LIMIT`.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);

/// Runs the SM until `shutdown` resolves (or, with `once`, until the subnet
/// is up). Returns the last sweep's report.
pub async fn run<T: Transport + Clone>(
    transport: T,
    mut unsolicited: mpsc::Receiver<Datagram>,
    config: Config,
    options: RunOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<SweepReport, RunError> {
    let local = transport.local_port();
    let election = Election::new(config.sm.election(), local.port_guid);
    let mut sm =
        SubnetManager::new(transport.clone(), config.sm.clone(), options.persist_lids).with_qos(config.qos.clone());
    sm.set_sm_key(config.sm.sm_key);
    // The SA hands out alias GUIDs; the SM writes them into the ports.
    let (alias_tx, mut alias_changes) = tokio::sync::watch::channel(Arc::default());
    sm.set_alias_source(alias_changes.clone());
    // partitions.conf: a bad file stops the SM here (nothing is in force
    // yet to keep); later ones are refused sweep by sweep.
    sm.load_partitions()?;
    // The SA's multicast groups; the SM routes them and writes the MFTs.
    let (mcast_tx, mut mcast_changes) = tokio::sync::watch::channel(Arc::default());
    sm.set_mcast_source(mcast_changes.clone());
    let client = SmpClient::with_m_key(transport.clone(), config.sm.m_key);
    let perf_active = Arc::new(std::sync::atomic::AtomicU8::new(PERF_OFF));
    let standby_ports: StandbyPorts = Arc::default();
    let (perf_config, perf_configs) = tokio::sync::watch::channel(config.perfmgr.clone());
    let _perfmgr = config
        .perfmgr
        .enabled
        .then(|| spawn_perfmgr(transport.clone(), perf_configs, &options, perf_active.clone(), standby_ports.clone()));
    let sa = sa_task::spawn(
        transport.clone(),
        crate::sa::SaConfig { subnet_timeout: config.sm.subnet_timeout, ..config.sa.clone() },
        local.port_guid,
        options.snapshots.clone(),
        options.metrics.clone(),
        sa_task::ToProgram { aliases: alias_tx, mcast: mcast_tx },
    );
    info!(
        guid = %local.port_guid,
        priority = config.sm.priority,
        poll_ms = config.sm.sminfo_polling_timeout_ms,
        poll_misses = config.sm.polling_retry_number,
        "SM starting in DISCOVERING"
    );
    options.status.set_port(local.port_guid, local.lid);
    let mut owner = Owner {
        election,
        sm: Some(sm),
        client,
        transport,
        config,
        options,
        started: tokio::time::Instant::now(),
        queue: VecDeque::new(),
        discovered: None,
        took_charge: false,
        last: None,
        was_up: false,
        next_sweep: None,
        attempts: 0,
        refused: BTreeMap::new(),
        published: 0,
        discovery_problems: 0,
        logged_remote: HashSet::new(),
        sa,
        master_swept: false,
        sa_drop_logged: None,
        mirror: MirrorReads::default(),
        mcast_retry: None,
        next_heartbeat: Duration::ZERO,
        perf_active,
        standby_ports,
        perf_config,
        reconfigure_pending: false,
        told_ready: false,
        lid_names: std::cell::RefCell::new(None),
        traps_logged: (Duration::ZERO, 0),
    };
    owner.publish_election();
    let mut operator = if owner.options.operator_signals {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1()).ok()
    } else {
        None
    };
    // SIGHUP: re-read partitions.conf now (a heavy sweep), as OpenSM does.
    let mut reload = if owner.options.operator_signals {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok()
    } else {
        None
    };
    let mut job: Option<SweepJob<T>> = None;
    let mut side: FuturesUnordered<SideJob> = FuturesUnordered::new();
    tokio::pin!(shutdown);
    loop {
        owner.beat();
        while let Some(action) = owner.election.poll_action() {
            if let Some(end) = owner.act(action, &mut side) {
                return end;
            }
        }
        if job.is_none() {
            owner.reconfigure();
            job = owner.next_job();
        }
        let wake = [
            owner.election.poll_timeout(),
            owner.next_sweep.filter(|_| job.is_none()),
            owner.mirror.next.filter(|_| !owner.mirror.running),
            owner.mcast_retry,
            Some(owner.next_heartbeat),
        ]
        .into_iter()
        .flatten()
        .min();
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(owner.started + at).await,
                None => std::future::pending::<()>().await,
            }
        };
        let operator_asks = async {
            match operator.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        let reload_asked = async {
            match reload.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut shutdown => {
                info!("shutting down");
                let _ = owner.options.notifier.stopping();
                // The publication point still holds the snapshot: its report
                // is copied once, here, rather than at every sweep.
                let last = owner.last.take().map(|s| s.sweep.clone());
                return last.ok_or_else(|| RunError::NotUp {
                    attempts: owner.attempts,
                    reasons: vec![NotUpReason::Stopped(format!(
                        "stopped in {} before a sweep completed",
                        owner.election.state()
                    ))],
                });
            }
            Some(dgram) = unsolicited.recv() => owner.on_mad(dgram),
            (sm, done) = async { job.as_mut().expect("guarded").await }, if job.is_some() => {
                job = None;
                owner.sm = Some(sm);
                if let Some(end) = owner.on_sweep_done(done) {
                    return end;
                }
            }
            Some(done) = side.next(), if !side.is_empty() => match done {
                Some(SideDone::Election(e)) => {
                    let now = owner.now();
                    owner.election.handle(now, e);
                }
                Some(SideDone::Mirror(outcome)) => owner.on_mirror_read(outcome),
                None => {}
            },
            Ok(()) = alias_changes.changed() => owner.on_aliases_changed(),
            Ok(()) = mcast_changes.changed() => owner.on_mcast_changed(),
            Some(()) = reload_asked => owner.on_reload(),
            _ = sleep => owner.on_wake(job.is_some(), &mut side),
            Some(()) = operator_asks => {
                info!("operator asks for a handover (SIGUSR1)");
                let now = owner.now();
                owner.election.handle(now, Event::OperatorHandover);
            }
        }
    }
}

impl<T: Transport + Clone> Owner<T> {
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// The owner is alive: `/healthz` (and, under systemd, the watchdog).
    fn beat(&mut self) {
        let now = self.now();
        if now >= self.next_heartbeat {
            self.options.status.heartbeat();
            let _ = self.options.notifier.watchdog();
            let every = self.options.notifier.watchdog_interval().map_or(HEARTBEAT_EVERY, |w| w.min(HEARTBEAT_EVERY));
            self.next_heartbeat = now + every;
        }
    }

    /// systemd: a sweep failed before the SM was ever ready; it tries
    /// again, so the start is not timed out (and restarted) meanwhile.
    fn extend_start(&self) {
        if !self.told_ready {
            let wait = self.interval().unwrap_or(Duration::from_secs(1)) * 4 + Duration::from_secs(60);
            let _ = self.options.notifier.extend_timeout(wait);
            let _ = self.options.notifier.status("starting: a heavy sweep failed; trying again");
        }
    }

    /// systemd: READY=1 (repeated sends are harmless) and a STATUS= line.
    fn notify_ready(&mut self, status: &str) {
        self.told_ready = true;
        let n = &self.options.notifier;
        if let Err(e) = n.ready().and_then(|_| n.status(status)) {
            debug!(error = %e, "sd_notify failed");
        }
    }

    /// SIGHUP: the configuration read again. A file that does not parse or
    /// validate changes nothing; otherwise the keys that can change live
    /// do, those that need a restart keep their running values, and one
    /// line says which is which. A heavy sweep follows (it also re-reads
    /// partitions.conf).
    fn on_reload(&mut self) {
        let _ = self.options.notifier.reloading();
        let Some(read) = self.options.reload.clone() else {
            info!("SIGHUP: heavy sweep to re-read partitions.conf");
            return self.after_reload();
        };
        let new = match read() {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "SIGHUP: configuration refused; the running configuration stays");
                self.options.status.record_error(format!("configuration reload refused: {e}"));
                return self.after_reload();
            }
        };
        let plan = crate::config::reload::reload_plan(&self.config, &new);
        let merged = plan.apply(&self.config, &new);
        if plan.changes("log.level") {
            if let Some(h) = crate::logging::handle() {
                match h.set_config_level(&merged.log.level) {
                    Ok(true) => {}
                    Ok(false) => {
                        info!(filter = h.env_filter().unwrap_or(""), "log.level changed; IBSM_LOG still rules")
                    }
                    Err(e) => warn!(error = %e, "log.level not applied"),
                }
            }
        }
        if plan.changes("sm.sweep_interval_s") && self.next_sweep.is_some() {
            self.next_sweep = Some(self.now());
        }
        if plan.changes("perfmgr.") {
            self.perf_config.send_replace(merged.perfmgr.clone());
        }
        let sm_changes = ["qos.", "sm.partition_config_file", "sm.part_enforce"].iter().any(|k| plan.changes(k));
        self.config = merged;
        self.update_perf_active();
        if sm_changes {
            self.reconfigure_pending = true;
        }
        info!("SIGHUP: {}", plan.summary());
        self.after_reload();
    }

    fn after_reload(&mut self) {
        if self.election.state() == State::Master {
            let now = self.now();
            self.election.handle(now, Event::SweepWanted);
        }
        // READY=1 ends the reload; before the SM was ever ready it would
        // also end `systemctl start` early.
        if self.told_ready {
            let _ = self.options.notifier.ready();
        }
    }

    /// Hands a reloaded configuration's live keys to the SubnetManager
    /// while it is home (no job runs).
    fn reconfigure(&mut self) {
        if !self.reconfigure_pending {
            return;
        }
        let Some(sm) = self.sm.as_mut() else { return };
        self.reconfigure_pending = false;
        if let Err(e) = sm.reconfigure(&self.config.sm, &self.config.qos) {
            // The running path stays the SM's: a later reload compares
            // against what is really read.
            self.config.sm.partition_config_file = sm.partition_file().map(|p| p.to_path_buf());
            error!(error = %e, "SIGHUP: the new partitions file is refused; the partitions in force stay");
            self.options.status.record_error(format!("partitions file refused: {e}"));
        }
    }

    /// The performance manager polls as master, and as standby when
    /// `perfmgr.on_standby` says so.
    fn update_perf_active(&self) {
        let mode = match self.election.state() {
            State::Master => PERF_MASTER,
            State::Standby if self.config.perfmgr.on_standby => PERF_STANDBY,
            _ => PERF_OFF,
        };
        self.perf_active.store(mode, std::sync::atomic::Ordering::Relaxed);
    }

    /// The master as this SM knows it: itself when master.
    fn master(&self) -> Option<(crate::types::Guid, Lid)> {
        match self.election.state() {
            State::Master => {
                let lid = self.last.as_ref().map(|s| s.master_lid).unwrap_or(self.transport.local_port().lid);
                Some((self.transport.local_port().port_guid, lid))
            }
            _ => self.election.master().map(|p| (p.info.guid, p.addr.lid)),
        }
    }

    /// The node behind `lid` as the last heavy sweep saw it (GUID,
    /// description, directed path), for log lines about it.
    fn node_at_lid(&self, lid: Lid) -> String {
        let Some(snap) = self.last.as_ref() else {
            return "unknown (no sweep yet)".into();
        };
        let mut cache = self.lid_names.borrow_mut();
        if cache.as_ref().is_none_or(|(seq, _)| *seq != snap.sequence) {
            *cache = Some((snap.sequence, lid_index(&snap.sweep.subnet)));
        }
        let nodes = &cache.as_ref().expect("just built").1;
        let subnet = &snap.sweep.subnet;
        match nodes.get(&lid.0).map(|&id| subnet.node(id)) {
            Some(n) => format!("{} '{}' at path {}", n.guid(), n.description.as_deref().unwrap_or(""), n.path),
            None => format!("unknown at LID {lid}"),
        }
    }

    /// The election as `/status` and the metrics show it.
    fn publish_election(&self) {
        let master = self.master();
        let priority = self.config.sm.priority;
        self.options.status.set_election(self.election.state(), priority, master.map(|m| m.0), master.map(|m| m.1));
        if let Some(m) = &self.options.metrics {
            m.election(priority, master);
        }
    }

    fn interval(&self) -> Option<Duration> {
        let s = self.config.sm.sweep_interval_s;
        (s > 0).then(|| Duration::from_secs(s))
    }

    /// Starts the queued sweep work, if the SubnetManager is home.
    fn next_job(&mut self) -> Option<SweepJob<T>> {
        let work = self.queue.pop_front()?;
        let mut sm = self.sm.take().expect("no job runs, so the SubnetManager is home");
        Some(match work {
            SweepWork::Discover => Box::pin(async move {
                let r = sm.discover().await.map(Box::new);
                (sm, SweepDone::Discovered(r))
            }),
            SweepWork::TakeCharge { takeover } => {
                let Some(found) = self.discovered.take() else {
                    // Nothing to program (a discovery failed in between): look again.
                    self.sm = Some(sm);
                    self.queue.push_front(SweepWork::Discover);
                    return self.next_job();
                };
                let mode = if takeover {
                    MasterMode::Takeover
                } else if self.took_charge {
                    MasterMode::Continuing
                } else {
                    MasterMode::Fresh
                };
                self.took_charge = true;
                Box::pin(async move {
                    let r = sm.take_charge(found, mode).await.map(Box::new);
                    (sm, SweepDone::Programmed(r))
                })
            }
            SweepWork::Light => Box::pin(async move {
                let started = std::time::Instant::now();
                let r = sm.light_sweep().await;
                (sm, SweepDone::LightSwept(r, started.elapsed()))
            }),
            // A discovery waiting for its programming: that heavy sweep
            // reads the alias table itself (and nothing slips in between).
            SweepWork::Aliases if self.discovered.is_some() => {
                self.sm = Some(sm);
                return self.next_job();
            }
            SweepWork::Aliases => Box::pin(async move {
                let r = sm.program_aliases().await;
                (sm, SweepDone::AliasesProgrammed(r))
            }),
            // As for aliases: the heavy sweep routes the groups itself.
            SweepWork::Multicast if self.discovered.is_some() => {
                self.sm = Some(sm);
                return self.next_job();
            }
            SweepWork::Multicast => Box::pin(async move {
                let r = sm.program_multicast().await;
                (sm, SweepDone::McastProgrammed(r))
            }),
        })
    }

    /// Carries out one election action. `Some` ends `run`.
    fn act(&mut self, action: Action, side: &mut FuturesUnordered<SideJob>) -> Option<Result<SweepReport, RunError>> {
        match action {
            Action::Discover => {
                if !self.queue.contains(&SweepWork::Discover) {
                    self.queue.push_back(SweepWork::Discover);
                }
            }
            Action::TakeCharge { takeover } => self.queue.push_back(SweepWork::TakeCharge { takeover }),
            Action::Poll { master } => side.push(self.poll(master)),
            Action::CheckOwnPort => side.push(self.check_own_port()),
            Action::Send { to, control, from } => side.push(self.send_control(to, control, from)),
            Action::StateChanged { from, to, cause } => {
                if from != to {
                    info!(from = %from, to = %to, cause = %cause, "SM state {to}");
                }
                if let Some(m) = &self.options.metrics {
                    m.state_change(from, to, &cause);
                }
                self.publish_election();
                self.update_perf_active();
                match to {
                    State::Standby => {
                        self.options.status.ready("standby: watching the master");
                        self.notify_ready("standby: watching the master");
                    }
                    State::Master if self.master_swept => {}
                    State::Master => self.options.status.unready("master: the first heavy sweep has not finished"),
                    State::Discovering => self.options.status.unready("discovering"),
                    State::NotActive => self.options.status.unready("not active"),
                }
                if to == State::Master && from != State::Master {
                    self.next_sweep = None;
                }
                if to != State::Master {
                    self.master_swept = false;
                }
                // A standby mirrors the master's SA, the first read one
                // interval after it became standby.
                if to != State::Standby {
                    self.mirror.next = None;
                } else if from != State::Standby {
                    self.mirror.next = self.config.sa.mirror_interval().map(|i| self.now() + i);
                }
                self.sa.set_serving(self.sa_serving());
                self.tell_sa_sm_info();
                if self.options.once && matches!(to, State::Standby | State::NotActive) {
                    let master = self.election.master().map(|p| p.to_string()).unwrap_or_default();
                    return Some(Err(RunError::OtherMaster { master }));
                }
            }
            Action::Report(e) if e.is_error() => error!(problem = %e, "election"),
            Action::Report(e) => warn!(problem = %e, "election"),
        }
        None
    }

    /// Timers. The sweep interval waits while a sweep runs or is queued: a
    /// light sweep must not slip between a discovery and its programming.
    fn on_wake(&mut self, sweeping: bool, side: &mut FuturesUnordered<SideJob>) {
        let now = self.now();
        self.election.handle_timeout(now);
        if self.mcast_retry.is_some_and(|at| at <= now) {
            self.mcast_retry = None;
            self.on_mcast_changed();
        }
        if !self.mirror.running && self.mirror.next.is_some_and(|at| at <= now) {
            self.mirror.next = None;
            if self.election.state() == State::Standby && self.election.master().is_some() {
                self.mirror.running = true;
                side.push(self.mirror_read());
            } else if self.election.state() == State::Standby {
                self.mirror.next = self.config.sa.mirror_interval().map(|i| now + i);
            }
        }
        if !sweeping && self.queue.is_empty() && self.next_sweep.is_some_and(|at| at <= now) {
            self.next_sweep = None;
            if self.election.state() != State::Master {
                return;
            }
            if self.was_up {
                self.queue.push_back(SweepWork::Light);
            } else {
                self.election.handle(now, Event::SweepWanted);
            }
        }
    }

    /// The SA's alias GUIDs changed: a master that programmed the fabric
    /// writes them now, without a sweep (as OpenSM's SA asks its state
    /// manager for just those GUIDInfo Sets). A heavy sweep already queued
    /// reads the table itself.
    fn on_aliases_changed(&mut self) {
        let queued = self.queue.iter().any(|w| !matches!(w, SweepWork::Light));
        if self.master_swept && !queued {
            self.queue.push_back(SweepWork::Aliases);
        }
    }

    /// The SA's multicast groups changed: a master that programmed the
    /// fabric routes them and writes the MFTs now, without a sweep. One
    /// pass queued at a time: it reads the newest table when it runs.
    fn on_mcast_changed(&mut self) {
        let queued = self.queue.iter().any(|w| !matches!(w, SweepWork::Light | SweepWork::Aliases));
        if self.master_swept && !queued {
            self.queue.push_back(SweepWork::Multicast);
        }
    }

    fn on_sweep_done(&mut self, done: SweepDone) -> Option<Result<SweepReport, RunError>> {
        let now = self.now();
        match done {
            SweepDone::McastProgrammed(Some(mut p)) => {
                if let Some(m) = &self.options.metrics {
                    m.mcast_pass("membership", &p);
                }
                // The SA's MulticastForwardingTableRecords follow (a full
                // queue drops them: the next heavy sweep's snapshot has all).
                let tables = std::mem::take(&mut p.tables);
                if !tables.is_empty() {
                    self.sa.offer(sa_task::SaInput::McastTables(tables));
                }
                // Failed SMPs left switches to revisit: again shortly,
                // whether or not membership changes.
                if p.retry && self.mcast_retry.is_none() {
                    self.mcast_retry = Some(now + MCAST_RETRY);
                }
                for problem in &p.problems {
                    warn!(%problem, "multicast");
                }
                if p.mft_sets + p.failures > 0 {
                    info!(
                        groups = p.groups,
                        sets = p.mft_sets,
                        reads = p.mft_reads,
                        failures = p.failures,
                        "multicast forwarding programmed"
                    );
                }
            }
            SweepDone::McastProgrammed(None) => {}
            SweepDone::AliasesProgrammed(Some(p)) if p.guid_info_sets + p.failures > 0 => {
                info!(sets = p.guid_info_sets, failures = p.failures, "alias GUIDs programmed");
            }
            SweepDone::AliasesProgrammed(_) => {}
            SweepDone::Discovered(Ok(found)) => {
                // Discovery's problems are logged here, standby or not;
                // programming's after it.
                for p in &found.subnet.problems {
                    warn!(problem = %p, "sweep problem");
                }
                self.discovery_problems = found.subnet.problems.len();
                if self.config.perfmgr.on_standby {
                    // Its LIDs as the ports report them: a standby assigns none.
                    self.standby_ports.store(Arc::new(crate::perfmgr::targets::from_subnet(&found.subnet, |_| None)));
                }
                let peers = self.peers(&found);
                self.discovered = Some(*found);
                self.election.handle(now, Event::DiscoveryDone { peers });
            }
            SweepDone::Discovered(Err(e)) => {
                if self.options.once {
                    return Some(Err(e.into()));
                }
                if let Some(m) = &self.options.metrics {
                    m.sweep_failed(metrics::SweepFailure::Discovery);
                }
                self.options.status.record_error(format!("discovery failed: {e}"));
                self.extend_start();
                self.election.handle(now, Event::DiscoveryFailed { why: e.to_string() });
            }
            SweepDone::Programmed(Ok(report)) => {
                self.election.handle(now, Event::Programmed);
                return self.on_programmed(*report);
            }
            // A sweep that could not program (routing, LID configuration)
            // ends `--once`; the service says so and tries again next interval.
            SweepDone::Programmed(Err(e)) if self.options.once => return Some(Err(e.into())),
            SweepDone::Programmed(Err(e)) => {
                error!(error = %e, "heavy sweep could not program the fabric; trying again next interval");
                if let Some(m) = &self.options.metrics {
                    m.sweep_failed(metrics::SweepFailure::Programming);
                }
                self.options.status.record_error(format!("heavy sweep could not program the fabric: {e}"));
                self.extend_start();
                self.election.handle(now, Event::Programmed);
                self.next_sweep = Some(now + self.interval().unwrap_or(Duration::from_secs(1)));
                self.was_up = false;
            }
            SweepDone::LightSwept(verdict, elapsed) => {
                if let Some(m) = &self.options.metrics {
                    m.light_sweep_timed(elapsed);
                    m.transport(&self.transport.stats());
                }
                self.options.status.light_sweep(elapsed, verdict.as_ref());
                self.election.handle(now, Event::LightSwept);
                let elapsed_ms = elapsed.as_millis() as u64;
                match verdict {
                    Some(why) => {
                        info!(change = %why, elapsed_ms, "light sweep done; heavy sweep next");
                        self.election.handle(now, Event::SweepWanted);
                    }
                    None => {
                        info!(change = "none", elapsed_ms, "light sweep done");
                        self.next_sweep = self.interval().map(|i| now + i);
                    }
                }
            }
        }
        None
    }

    /// The other SMs discovery read; failures to read one are logged once.
    fn peers(&mut self, found: &Discovered) -> Vec<Peer> {
        let mut peers = Vec::new();
        for r in &found.subnet.remote_sms {
            match &r.info {
                Ok(info) => peers.push(Peer { info: *info, addr: PeerAddr { lid: r.lid, path: Some(r.path) } }),
                Err(why) => {
                    if self.logged_remote.insert((r.port_guid, why.clone())) {
                        warn!(port = %r.port_guid, lid = %r.lid, path = %r.path, problem = %why, "port claims IsSM");
                    }
                }
            }
        }
        peers
    }

    fn on_programmed(&mut self, report: SweepReport) -> Option<Result<SweepReport, RunError>> {
        self.attempts += 1;
        let up = report.subnet_up();
        if let Some(m) = &self.options.metrics {
            m.heavy_sweep(&report);
            m.routing(report.routing.engine_name(), report.routing.elapsed);
            m.transport(&self.transport.stats());
        }
        self.options.status.heavy_sweep(&report, report.routing.engine_name());
        if report.mode == MasterMode::Takeover {
            let p = &report.program;
            info!(
                sets = p.sets(),
                changing_sets = p.changing_sets(),
                sm_lid_only_sets = p.sm_lid_only_sets,
                lft_reads = p.lft_reads,
                lft_blocks = p.lft_blocks,
                "takeover programmed"
            );
        }
        if up && !self.was_up {
            info!(
                nodes = report.subnet.nodes.len(),
                max_lid = report.lids.max_lid.0,
                elapsed_ms = report.elapsed.as_millis() as u64,
                "SUBNET UP"
            );
        } else if !up {
            for p in &report.inactive {
                warn!(port = %p, "port not active");
            }
        }
        for p in report.problems().iter().skip(self.discovery_problems) {
            warn!(problem = %p, "programming problem");
        }
        self.was_up = up;
        if self.options.once {
            if up {
                return Some(Ok(report));
            }
            if self.attempts >= self.options.once_attempts {
                let mut reasons: Vec<NotUpReason> =
                    report.inactive.iter().take(5).cloned().map(NotUpReason::Inactive).collect();
                reasons.extend(report.problems().iter().take(5).cloned().map(NotUpReason::Problem));
                if let Some(e) = &report.lids.error {
                    reasons.push(NotUpReason::Lids(e.to_string()));
                }
                return Some(Err(RunError::NotUp { attempts: self.attempts, reasons }));
            }
            self.election.handle(self.now(), Event::SweepWanted);
        } else {
            self.next_sweep = self.interval().map(|i| self.now() + i);
        }
        if report.mcast.retry && self.mcast_retry.is_none() {
            self.mcast_retry = Some(self.now() + MCAST_RETRY);
        }
        let local = self.transport.local_port();
        let master_lid = report.subnet.sm_port.and_then(|(n, p)| report.subnet.current_lid(n, p)).unwrap_or(local.lid);
        self.published += 1;
        let published = self.options.snapshots.publish(crate::subnet::Snapshot {
            sequence: self.published,
            taken_at: std::time::SystemTime::now(),
            master: local.port_guid,
            master_lid,
            sweep: report,
        });
        self.last = Some(published);
        if self.election.state() == State::Master {
            self.master_swept = true;
            self.sa.set_serving(self.sa_serving());
            self.options.status.ready("master: a heavy sweep has programmed the fabric");
            self.notify_ready(&format!(
                "master: {} nodes, {}",
                self.last.as_ref().map_or(0, |s| s.sweep.subnet.nodes.len()),
                if self.was_up { "subnet up" } else { "subnet not up yet" }
            ));
        }
        self.options.status.set_port(local.port_guid, master_lid);
        self.publish_election();
        self.tell_sa_sm_info();
        None
    }

    /// Our SMInfo, key included: the SA shows the key to trusted
    /// requesters only.
    fn tell_sa_sm_info(&mut self) {
        let info = self.election.sm_info(true);
        self.hand_to_sa(sa_task::SaInput::SmInfo(info));
    }

    /// What the SA may answer (IBA C15-0.1.3: only the master SM's SA, and
    /// only once its first sweep is done).
    fn sa_serving(&self) -> crate::sa::Serving {
        use crate::sa::Serving;
        match (self.election.state(), self.master_swept) {
            (State::Master, true) => Serving::Master,
            (State::Master, false) => Serving::MasterNotSwept,
            _ => Serving::NotMaster,
        }
    }

    /// Hands an SA-class MAD (or a trap) to the SA task; a full queue drops
    /// it, counted, with one log line per 10 s.
    fn hand_to_sa(&mut self, input: sa_task::SaInput) {
        if self.sa.offer(input) {
            return;
        }
        if let Some(m) = &self.options.metrics {
            m.refused(u8::from(crate::mad::MgmtClass::SubnAdm));
        }
        let now = self.now();
        if self.sa_drop_logged.is_none_or(|at| now.saturating_sub(at) >= Duration::from_secs(10)) {
            self.sa_drop_logged = Some(now);
            warn!(dropped = self.sa.dropped, queue = sa_task::SA_QUEUE, "SA queue full: SA MADs dropped");
        }
    }

    /// One MAD from the dispatcher.
    fn on_mad(&mut self, dgram: Datagram) {
        let now = self.now();
        match dispatch::classify(&dgram) {
            Inbound::SmInfoGet { req, payload } => {
                let key = self.config.sm.sm_key;
                // IBA 14.4.1.1: the key goes to a requester that knows it, or
                // that holds the fabric's M_Key (OpenSM's rule since 3.3.21).
                let authenticated = payload.is_some_and(|p| p.sm_key == key) || req.m_key == self.config.sm.m_key;
                let info = self.election.sm_info(authenticated);
                self.reply(&dgram, dispatch::smp_response(&req, Method::GetResp, 0, dispatch::sm_info_data(&info)));
                if let Some(p) = payload {
                    let lid = if dgram.addr.lid.is_unicast() { dgram.addr.lid } else { Lid(0) };
                    self.election
                        .handle(now, Event::PeerSeen { peer: Peer { info: p, addr: PeerAddr { lid, path: None } } });
                }
            }
            Inbound::SmInfoSet { req, control, payload } => {
                // Where to answer later (an ACKNOWLEDGE): the election uses
                // the path its own discovery found for a known sender.
                let lid = if dgram.addr.lid.is_unicast() { dgram.addr.lid } else { Lid(0) };
                let addr = PeerAddr { lid, path: None };
                let key_ok = payload.as_ref().is_ok_and(|from| from.sm_key == self.config.sm.sm_key);
                let status = match payload {
                    // Refused (a wrong key, a stranger, a control our state
                    // does not take) is answered with an error status, as
                    // OpenSM answers the controls it refuses.
                    Ok(from) if self.election.control(now, control, from, addr) => 0,
                    Ok(_) => mad_status::INVALID_FIELD,
                    Err(e) => {
                        error!(lid = %dgram.addr.lid, node = %self.node_at_lid(dgram.addr.lid), control = ?control, error = %e, "SubnSet(SMInfo) with an unreadable payload; ignored");
                        mad_status::INVALID_FIELD
                    }
                };
                let info = self.election.sm_info(key_ok);
                self.reply(
                    &dgram,
                    dispatch::smp_response(&req, Method::GetResp, status, dispatch::sm_info_data(&info)),
                );
            }
            Inbound::Trap { req } => {
                // Traps go to the master (IBA 14.2.5.1); a standby leaves
                // them to it, as OpenSM does.
                if self.election.state() == State::Master {
                    self.reply(&dgram, dispatch::smp_response(&req, Method::TrapRepress, 0, req.data));
                    let notice = crate::mad::NoticeRepr::parse_data(&req.data);
                    if let Some(m) = &self.options.metrics {
                        m.trap(notice.as_ref().ok());
                    }
                    match notice {
                        Ok(notice) => {
                            let (since, n) = self.traps_logged;
                            if now.saturating_sub(since) >= Duration::from_secs(1) {
                                if n > TRAP_LINES_PER_S {
                                    info!(
                                        traps = n - TRAP_LINES_PER_S,
                                        "more traps in the last second, not logged one by one"
                                    );
                                }
                                self.traps_logged = (now, 0);
                            }
                            self.traps_logged.1 += 1;
                            if self.traps_logged.1 <= TRAP_LINES_PER_S {
                                info!(
                                    trap = notice.trap_number,
                                    issuer_lid = %notice.issuer_lid,
                                    node = %self.node_at_lid(notice.issuer_lid),
                                    "trap received; sweeping"
                                );
                            }
                            self.hand_to_sa(sa_task::SaInput::Trap { notice, from: dgram.addr.lid });
                        }
                        Err(e) => {
                            warn!(lid = %dgram.addr.lid, node = %self.node_at_lid(dgram.addr.lid), error = %e, "trap with an unreadable Notice; sweeping")
                        }
                    }
                    self.election.handle(now, Event::SweepWanted);
                } else {
                    debug!(state = %self.election.state(), lid = %dgram.addr.lid, "trap ignored: not master");
                }
            }
            Inbound::Sa => self.hand_to_sa(sa_task::SaInput::Mad(dgram)),
            Inbound::Refused { reply, why } => {
                // Counted by kind, made-up codes folded into one key: a
                // flood of them neither grows the map nor the metric labels.
                let key = why.counted_as();
                let n = self.refused.entry(key).or_default();
                *n += 1;
                if *n == 1 {
                    info!(from = %dgram.addr.lid, refusal = %why, status = format_args!("{:#06x}", why.status()), "request refused");
                }
                if let Some(m) = &self.options.metrics {
                    m.refused(key.class());
                }
                if let Err(e) = self.transport.send(reply) {
                    warn!(error = %e, "could not send a status answer");
                }
            }
            Inbound::Ignored { why } => debug!(from = %dgram.addr.lid, why = %why, "unsolicited MAD ignored"),
        }
    }

    fn reply(&self, to: &Datagram, smp: crate::mad::SmpRepr) {
        if let Err(e) = self.transport.send(Datagram { addr: to.addr, mad: smp.to_bytes().to_vec() }) {
            error!(lid = %to.addr.lid, node = %self.node_at_lid(to.addr.lid), error = %e, "could not answer SMP");
        }
    }

    /// SubnGet(SMInfo) to the master, over the path discovery found it by.
    fn poll(&self, master: Peer) -> SideJob {
        let client = self.client.clone();
        let data = dispatch::sm_info_data(&self.election.own_info());
        Box::pin(async move {
            let answer = match (master.addr.path, master.addr.lid) {
                (Some(path), _) => client.dr_get_with_data(&path, AttributeId::SmInfo, 0, data).await,
                (None, lid) if lid.is_unicast() => client.lid_get(lid, AttributeId::SmInfo, 0).await,
                (None, _) => {
                    return Some(SideDone::Election(Event::PollFailed { why: format!("no route to {master}") }))
                }
            };
            Some(SideDone::Election(match answer.map(|smp| SmInfoRepr::parse_bytes(&smp.data)) {
                Ok(Ok(info)) => Event::PollAnswered { info },
                Ok(Err(e)) => Event::PollFailed { why: format!("unreadable SMInfo: {e}") },
                Err(e) => Event::PollFailed { why: e.to_string() },
            }))
        })
    }

    /// SubnSet(SMInfo) with `control`, carrying `from` (our SMInfo and key).
    fn send_control(&self, to: Peer, control: SmControl, from: SmInfoRepr) -> SideJob {
        let client = self.client.clone();
        let data = dispatch::sm_info_data(&from);
        info!(to = %to, control = ?control, "sending SubnSet(SMInfo)");
        Box::pin(async move {
            let answer = match (to.addr.path, to.addr.lid) {
                (Some(path), _) => client.dr_set(&path, AttributeId::SmInfo, control.into(), data).await,
                (None, lid) if lid.is_unicast() => client.lid_set(lid, AttributeId::SmInfo, control.into(), data).await,
                (None, _) => Err(crate::transport::SmpError::Transport(crate::transport::TransportError::Closed)),
            };
            let result = answer
                .map_err(|e| e.to_string())
                .and_then(|smp| SmInfoRepr::parse_bytes(&smp.data).map_err(|e| format!("unreadable SMInfo: {e}")));
            match control {
                SmControl::Handover => Some(SideDone::Election(Event::HandoverSent { to: to.info.guid, result })),
                _ => {
                    if let Err(e) = result {
                        debug!(to = %to, control = ?control, error = %e, "SubnSet(SMInfo) not accepted");
                    }
                    None
                }
            }
        })
    }

    /// PortInfo of our own port: is it still up?
    fn check_own_port(&self) -> SideJob {
        let client = self.client.clone();
        Box::pin(async move {
            let r = client.dr_get(&DrPath::local(), AttributeId::PortInfo, 0).await;
            Some(SideDone::Election(match r.map(|smp| PortInfoRepr::parse_data(&smp.data)) {
                Ok(Ok(pi)) if pi.port_state == PortState::Down => {
                    Event::OwnPort { up: false, why: "PortState is Down".into() }
                }
                Ok(Ok(pi)) => Event::OwnPort { up: true, why: format!("PortState {:?}", pi.port_state) },
                Ok(Err(e)) => Event::OwnPort { up: false, why: format!("unreadable PortInfo: {e}") },
                Err(e) => Event::OwnPort { up: false, why: e.to_string() },
            }))
        })
    }

    /// One read of the master's SA tables (see `sa_task::read_mirror`).
    fn mirror_read(&self) -> SideJob {
        let (smp, transport, key) = (self.client.clone(), self.transport.clone(), self.config.sa.sa_key);
        Box::pin(async move { Some(SideDone::Mirror(sa_task::read_mirror(smp, transport, key).await)) })
    }

    /// A mirror read ended: what answered goes to the SA (while still
    /// STANDBY), and the next read is due one interval later.
    fn on_mirror_read(&mut self, outcome: sa_task::MirrorOutcome) {
        self.mirror.running = false;
        let standby = self.election.state() == State::Standby;
        if standby {
            self.mirror.next = self.config.sa.mirror_interval().map(|i| self.now() + i);
        }
        let lid = outcome.master_lid;
        if !outcome.errors.is_empty() {
            let errors = outcome.errors.join("; ");
            if self.mirror.failing {
                debug!(master_lid = %lid, errors = %errors, "mirror read of the master's SA failed again");
            } else {
                self.mirror.failing = true;
                warn!(
                    master_lid = %lid,
                    errors = %errors,
                    "mirror read of the master's SA failed; the previous mirror is kept (more failures at debug level)"
                );
            }
        } else if self.mirror.failing {
            self.mirror.failing = false;
            info!(master_lid = %lid, "mirror reads of the master's SA work again");
        }
        if standby && !outcome.read.is_empty() {
            self.hand_to_sa(sa_task::SaInput::Mirror(outcome.read));
        }
    }
}
