//! The SA's own task: it drives the I/O-free [`SaAgent`] with the SA-class
//! MADs the owner task hands it, the snapshots the sweeps publish and the
//! role the election decides, and sends what the agent emits.
//!
//! ```text
//!  I/O thread ── SA-class MADs (bounded mpsc, Transport::divert) ──► SA task ── SaAgent (crate::sa)
//!  owner task ── SaInput (bounded mpsc: traps, SMInfo, mirror) ───►    │        answers, RMPP, Reports
//!  Snapshots ─── watch (sequence) ────────────────────────────────►    │
//!  owner task ── watch (Serving) ─────────────────────────────────►    └──► Transport::send
//!  owner task ◄── watch (alias GUIDs, multicast groups) ───────────────┘  the SM programs them
//!
//!  owner side job (standby): read_mirror ── SaClient GetTables of the master's SA
//!                                          └──► the owner ── SaInput::Mirror ──► SA task
//! ```
//!
//! A query never passes through the owner task: the I/O thread hands SA
//! MADs to this task's own queue, so a sweep, a reaction or an election
//! step in progress does not delay an answer. A SubnAdmGet does not come
//! here at all while the agent is free: the transport's receiver thread
//! answers it (`super::sa_inline`), the agent shared behind a mutex this
//! task holds for one step at a time. The daemon runs the task on
//! a thread of its own ([`SaPlacement::OwnThread`]): the owner's work
//! between awaits (discovery answers, building a snapshot) then shares no
//! thread with it either. Tests in virtual time keep it on the owner's
//! runtime, whose clock is paused. Both queues are bounded; what the I/O
//! thread could not queue is counted as dropped. The task takes the MADs
//! waiting into a queue per requester (`crate::sa::fair`) and serves the
//! requesters in turn, so a flood from one LID holds at most
//! [`FAIR_SHARE`] places and costs the others one MAD's wait per turn. The
//! task ends when the owner drops its [`SaHandle`].
//!
//! [`read_mirror`] is the standby's read of the master's SA state
//! (`crate::sa::mirror`); the owner runs it as a side job, one at a time.

use std::sync::Arc;
use std::time::Duration;

use std::future::Future;

use tokio::sync::{mpsc, watch};
use tracing::{debug, error, warn};

use super::background::{Background, Failed};
use super::metrics::Metrics;
use super::sa_inline::{lock, InlineSa, SharedAgent};
use crate::mad::sa::{GuidInfoRecordRepr, InformInfoRecordRepr, McMemberRecordRepr, SaRecord, ServiceRecordRepr};
use crate::mad::sm_sync::SyncTable;
use crate::mad::{AttributeId, DrPath, NoticeRepr, PortInfoRepr, SmInfoRepr, SmpAttribute};
use crate::program::guids::AliasTable;
use crate::program::mcast::McastTable;
use crate::sa::fair::FairQueue;
use crate::sa::{MirrorRead, PreparedSnapshot, SaAgent, SaConfig, Serving};
use crate::subnet::snapshot::{Snapshot, Snapshots};
use crate::transport::sa_client::{SaClient, SaError};
use crate::transport::{Arrived, Datagram, LocalPort, SmpClient, Transport, TransportError, TransportStats};
use crate::types::{Guid, Lid};

/// How often the SA's counters are copied to the metrics.
const METRICS_PERIOD: Duration = Duration::from_secs(1);
/// During a join flood the multicast groups are published to the SM at
/// most this often (and whenever the SA's queue runs empty): each copy
/// costs time in proportion to every membership, and the SM routes all
/// changes since the last copy in one pass anyway.
const MCAST_PUBLISH_PERIOD: Duration = Duration::from_millis(20);

/// How many SA MADs may wait for the SA task; more are dropped and counted.
pub const SA_QUEUE: usize = 4096;
/// Of those, how many one requester (one LID) may hold: a quarter, about
/// 20 ms of PathRecords. Past it, its newest are dropped and counted; the
/// rest of the queue stays for the others (`crate::sa::fair`).
pub const FAIR_SHARE: usize = SA_QUEUE / 4;
/// The hand-over from the transport's receiver: MADs wait here only until
/// the SA thread next runs and sorts them by requester, but a thread can
/// be off its core for several milliseconds, in which a flood of a few
/// hundred thousand a second arrives. What this cannot hold is dropped
/// before anyone knows whose it was, so it is ample.
pub const SA_INTAKE: usize = 4 * SA_QUEUE;

/// Where the SA task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SaPlacement {
    /// On the runtime that starts the SM, beside the owner task (tests in
    /// paused, virtual time).
    #[default]
    OwnerRuntime,
    /// On a thread of its own with its own single-threaded runtime (the
    /// daemon, in real time).
    OwnThread,
}

/// What the owner hands the SA task.
#[derive(Debug)]
pub enum SaInput {
    /// An SA-class MAD that is not an answer to one of our own requests,
    /// from a transport that cannot divert them to the task itself.
    Mad(Datagram),
    /// A trap the master received, for the subscribers that asked for it.
    Trap { notice: NoticeRepr, from: Lid },
    /// This SM's SMInfo as it stands, for its SMInfoRecord.
    SmInfo(SmInfoRepr),
    /// A standby's read of the master's SA tables.
    Mirror(MirrorRead),
    /// The master the election names (`None`: this SM, or none known):
    /// a standby asks it for the state stream (`crate::sa::sync`).
    Master(Option<Lid>),
    /// An SM (its port GUID) that polled this one with our SM_Key.
    PeerSm(Guid),
    /// Switches' multicast tables a pass between sweeps changed.
    McastTables(Vec<(Guid, std::collections::BTreeMap<u16, ibsm_routing::mcast::PortSet>)>),
    /// Records the master's SM keeps for a new master (MFT digests,
    /// multicast trees), encoded for the state stream: the whole table...
    Published(SyncTable, Vec<Arc<[u8]>>),
    /// ... or the records removed and added since.
    PublishedChanges(SyncTable, Vec<Arc<[u8]>>, Vec<Arc<[u8]>>),
}

/// The tables of the old master's SM a standby's copy holds, by table.
pub type CopiedRecords = std::collections::HashMap<SyncTable, Vec<Arc<[u8]>>>;

/// The tables [`SaInput::Published`] carries.
pub const PUBLISHED: [SyncTable; 3] = [SyncTable::Lids, SyncTable::MftDigests, SyncTable::McastTrees];

/// The owner's end: queue MADs, tell the role. Dropping it ends the task.
pub struct SaHandle {
    /// `None` only while the handle drops.
    input: Option<mpsc::Sender<SaInput>>,
    serving: watch::Sender<Serving>,
    /// Inputs the queue had no room for.
    pub dropped: u64,
    /// The last moment the standby's copy of the master's SA state was
    /// known current (`None`: never); read at a takeover.
    copy: watch::Receiver<Option<tokio::time::Instant>>,
    /// The old master's published tables as the copy holds them.
    copy_records: watch::Receiver<Arc<CopiedRecords>>,
    /// The SA's own thread, joined when the handle drops: the transport
    /// handle it holds must be gone before the SM's run returns, or the
    /// port could still be open (and its receiver reading) while the
    /// process exits.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SaHandle {
    fn drop(&mut self) {
        // The closed queue ends the task.
        self.input.take();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                error!("the SA thread panicked");
            }
        }
    }
}

impl SaHandle {
    /// Queues one input without waiting; a full queue drops it (counted,
    /// returned as `false`).
    pub fn offer(&mut self, input: SaInput) -> bool {
        match self.input.as_ref().map(|i| i.try_send(input)) {
            Some(Ok(())) => true,
            _ => {
                self.dropped += 1;
                false
            }
        }
    }

    /// When this SM's copy of the master's SA state was last known to be
    /// current (`None`: never, or the state stream is off).
    pub fn copy_current_as_of(&self) -> Option<tokio::time::Instant> {
        *self.copy.borrow()
    }

    /// The old master's records of `table` (one of [`PUBLISHED`]) as
    /// this SM's copy holds them (empty: none).
    pub fn copy_records(&self, table: SyncTable) -> Vec<Arc<[u8]>> {
        self.copy_records.borrow().get(&table).cloned().unwrap_or_default()
    }

    /// Tells the SA what it may answer now (only a change wakes it).
    pub fn set_serving(&self, serving: Serving) {
        self.serving.send_if_modified(|s| {
            let changed = *s != serving;
            *s = serving;
            changed
        });
    }
}

/// What the SA hands the SM to program into the fabric, each on a watch
/// the SM reads when it programs.
pub struct ToProgram {
    /// Alias GUIDs (the SM's `AliasSource`).
    pub aliases: watch::Sender<Arc<AliasTable>>,
    /// Multicast groups (the SM's `McastSource`).
    pub mcast: watch::Sender<Arc<McastTable>>,
}

/// Starts the SA task where `placement` says, and has the transport hand
/// it the SA-class MADs directly. Every change of the SA's alias GUIDs or
/// multicast groups is sent on `to_program`.
pub fn spawn<T: Transport + Clone>(
    transport: T,
    config: SaConfig,
    own_port: Guid,
    snapshots: Snapshots,
    metrics: Option<Metrics>,
    to_program: ToProgram,
    placement: SaPlacement,
) -> SaHandle {
    let (input, rx) = mpsc::channel(SA_QUEUE);
    let (serving, serving_rx) = watch::channel(Serving::NotMaster);
    let (copy_tx, copy) = watch::channel(None);
    let (records_tx, copy_records) = watch::channel(Arc::default());
    let (mad_tx, mads) = mpsc::channel(SA_INTAKE);
    let mad_tx_for_inline = mad_tx.clone();
    if !transport.divert(crate::mad::MgmtClass::SubnAdm, mad_tx) {
        debug!("the transport cannot divert SA MADs: the owner task forwards them");
    }
    let sm_key = config.sm_key;
    let mut agent = SaAgent::new(config, own_port);
    // Another epoch for every run: the clock's nanoseconds and the port.
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
            ^ own_port.0.rotate_left(17);
    agent.enable_sync(sm_key, seed);
    let agent: SharedAgent = Arc::new(std::sync::Mutex::new(agent));
    let started = tokio::time::Instant::now();
    let inline = InlineSa::new(agent.clone(), mad_tx_for_inline, started.into_std(), metrics.clone());
    if transport.serve_inline(crate::mad::MgmtClass::SubnAdm, Box::new(inline)) {
        debug!("SA Gets are answered on the transport's receiver thread");
    }
    // Off the owner's runtime, a snapshot's indexes are built on a
    // blocking thread while the SA answers from the one it has; in virtual
    // time inline, so the paused clock does not run meanwhile.
    let intake = match placement {
        SaPlacement::OwnerRuntime => Intake::Inline,
        SaPlacement::OwnThread => Intake::OffThread,
    };
    let feed = Feed { snapshots, intake };
    let task = run(
        (agent, started),
        transport,
        Inputs { owner: rx, mads },
        serving_rx,
        feed,
        metrics,
        (to_program, Copied { current: copy_tx, records: records_tx }),
    );
    let mut thread = None;
    match placement {
        SaPlacement::OwnerRuntime => {
            tokio::spawn(task);
        }
        SaPlacement::OwnThread => {
            // Taken by the thread when it starts; taken back to run beside
            // the owner if it cannot start (the SM still needs an SA).
            let slot = Arc::new(std::sync::Mutex::new(Some(task)));
            let for_thread = slot.clone();
            let started = std::thread::Builder::new().name("ibsm-sa".into()).spawn(move || {
                let Some(task) = for_thread.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
                match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt.block_on(task),
                    Err(e) => error!(error = %e, "cannot start the SA's runtime: the SA does not answer"),
                }
            });
            match started {
                Ok(t) => thread = Some(t),
                Err(e) => {
                    warn!(error = %e, "cannot start the SA's thread: it runs beside the owner task");
                    if let Some(task) = slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                        tokio::spawn(task);
                    }
                }
            }
        }
    }
    SaHandle { input: Some(input), serving, dropped: 0, copy, copy_records, thread }
}

/// The SA task's two queues: the owner's inputs, and the SA MADs the
/// transport diverts to it.
struct Inputs {
    owner: mpsc::Receiver<SaInput>,
    mads: mpsc::Receiver<Arrived>,
}

/// What the SA task tells the owner of the standby's copy.
struct Copied {
    /// When it was last current.
    current: watch::Sender<Option<tokio::time::Instant>>,
    /// The old master's published tables in it.
    records: watch::Sender<Arc<CopiedRecords>>,
}

/// Where the SA task's snapshots come from, and how it takes them in.
struct Feed {
    snapshots: Snapshots,
    intake: Intake,
}

/// How the SA task takes a new snapshot in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intake {
    /// Built and installed at once ([`SaAgent::new_snapshot`]).
    Inline,
    /// Built on a blocking thread ([`SaAgent::prepare`]), at a lower
    /// priority, then installed; queries are answered from the previous
    /// snapshot meanwhile. At 3,888 hosts the build takes tens of
    /// milliseconds, which inline would be the SA's silence.
    OffThread,
}

/// SA MADs handled one after another, their answers sent after each,
/// before the task looks at its other inputs again: a flood is served
/// without a pass through `select!` per MAD, and cannot starve the rest.
const MAD_BURST: usize = 256;

async fn run<T: Transport>(
    (shared, started): (SharedAgent, tokio::time::Instant),
    transport: T,
    Inputs { owner: mut input, mut mads }: Inputs,
    mut serving: watch::Receiver<Serving>,
    Feed { snapshots, intake }: Feed,
    metrics: Option<Metrics>,
    (ToProgram { aliases, mcast }, copied): (ToProgram, Copied),
) {
    // Counters reach Prometheus at most once a second, not per MAD.
    let mut export = tokio::time::interval(METRICS_PERIOD);
    export.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let now = || started.elapsed();
    let mut published = snapshots.subscribe();
    // A snapshot published before the task started still counts.
    if let Some(s) = snapshots.latest() {
        lock(&shared).new_snapshot(now(), s);
    }
    let mut send_failures = 0u64;
    let mut records_versions = [0u64; PUBLISHED.len()];
    let (mut alias_version, mut mcast_version) = {
        let agent = lock(&shared);
        (agent.alias_version(), agent.multicast().version())
    };
    let mut mcast_published = tokio::time::Instant::now();
    // The snapshot being built off the thread, and whether a newer one
    // was published meanwhile (only the newest is built next).
    let mut building: Option<Background<PreparedSnapshot>> = None;
    let mut newer = false;
    let mut fair = FairQueue::new(FAIR_SHARE, SA_QUEUE);
    loop {
        // The agent is locked for each step, never across an await: the
        // receiver thread answers Gets with it in between (`sa_inline`).
        let wake = {
            let mut agent = lock(&shared);
            // Joins, leaves, ports gone or the partitions' groups changed the
            // multicast groups: the SM routes them.
            let mcast_due = (input.is_empty() && mads.is_empty() && fair.is_empty())
                || mcast_published.elapsed() >= MCAST_PUBLISH_PERIOD;
            if agent.multicast().version() != mcast_version && mcast_due {
                mcast_version = agent.multicast().version();
                mcast_published = tokio::time::Instant::now();
                mcast.send_replace(Arc::new(agent.multicast().mcast_table()));
            }
            // A Set or Delete of GUIDInfoRecords (or ports gone, or a
            // takeover's import) changed the aliases: the SM programs them.
            if agent.alias_version() != alias_version {
                alias_version = agent.alias_version();
                aliases.send_replace(Arc::new(agent.alias_table()));
            }
            transmit(&mut agent, &transport, now(), &mut send_failures);
            // The standby's copy: when it was last current, and the old
            // master's LIDs and multicast tables, for a takeover.
            let as_of = agent.sync_current_as_of().map(|d| started + d);
            copied.current.send_if_modified(|c| std::mem::replace(c, as_of) != as_of);
            let versions = PUBLISHED.map(|t| agent.sync_records_version(t));
            if versions != records_versions {
                records_versions = versions;
                let records = PUBLISHED.iter().map(|&t| (t, agent.sync_records(t))).collect();
                copied.records.send_replace(Arc::new(records));
            }
            agent.poll_timeout()
        };
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(started + at).await,
                None => std::future::pending::<()>().await,
            }
        };
        let waiting = !fair.is_empty();
        tokio::select! {
            Some(first) = mads.recv() => {
                let mut agent = lock(&shared);
                queue_fairly(&mut agent, &mut fair, &mut mads, Some(first), now());
                serve_in_turn(&mut agent, &transport, (&mut fair, &mut mads), now, metrics.as_ref(), &mut send_failures);
            }
            _ = std::future::ready(()), if waiting => {
                let mut agent = lock(&shared);
                queue_fairly(&mut agent, &mut fair, &mut mads, None, now());
                serve_in_turn(&mut agent, &transport, (&mut fair, &mut mads), now, metrics.as_ref(), &mut send_failures);
            }
            got = input.recv() => {
                let Some(got) = got else {
                    debug!("SA task ends: the owner is gone");
                    return;
                };
                let mut agent = lock(&shared);
                match got {
                    SaInput::Mad(d) => agent.handle_mad(now(), &d),
                    SaInput::Trap { notice, from } => agent.handle_trap(now(), &notice, from),
                    SaInput::SmInfo(info) => agent.set_sm_info(info),
                    SaInput::Mirror(read) => agent.handle_mirror(now(), read),
                    SaInput::McastTables(tables) => agent.update_mcast_tables(tables),
                    SaInput::Master(lid) => agent.set_master_lid(lid),
                    SaInput::PeerSm(port) => agent.add_sync_peer(port),
                    SaInput::Published(table, records) => agent.set_published(table, records),
                    SaInput::PublishedChanges(table, removed, added) => {
                        agent.change_published(table, removed, added)
                    }
                }
            }
            changed = serving.changed() => {
                if changed.is_err() {
                    return;
                }
                // The owner publishes a master sweep's snapshot before it
                // says MASTER: take the snapshot first (waiting for one
                // being built), so a takeover finds its ports in the new
                // master's fabric.
                if let Some(build) = building.take() {
                    let built = build.await;
                    install(&mut lock(&shared), now(), built);
                }
                let mut agent = lock(&shared);
                if std::mem::take(&mut newer) || published.has_changed().unwrap_or(false) {
                    take_newest(&mut agent, &mut published, &snapshots, now());
                }
                let s = *serving.borrow_and_update();
                agent.set_serving(now(), s);
            }
            changed = published.changed() => {
                if changed.is_err() {
                    continue;
                }
                match intake {
                    Intake::Inline => take_newest(&mut lock(&shared), &mut published, &snapshots, now()),
                    Intake::OffThread if building.is_some() => {
                        published.borrow_and_update();
                        newer = true;
                    }
                    Intake::OffThread => {
                        published.borrow_and_update();
                        building = snapshots.latest().map(|s| build_off_thread(&mut lock(&shared), s));
                    }
                }
            }
            built = async { building.as_mut().expect("guarded").await }, if building.is_some() => {
                building = None;
                let mut agent = lock(&shared);
                install(&mut agent, now(), built);
                if std::mem::take(&mut newer) {
                    building = snapshots.latest().map(|s| build_off_thread(&mut agent, s));
                }
            }
            _ = sleep => lock(&shared).handle_timeout(now()),
            _ = export.tick(), if metrics.is_some() => {
                if let Some(m) = &metrics {
                    let agent = lock(&shared);
                    m.sa(agent.stats());
                    m.mirror_lag(agent.sync_lag(now()));
                    drop(agent);
                    // The MADs in flight and queued stay live between sweeps.
                    m.transport(&transport.stats());
                }
            }
        }
    }
}

/// Takes `first` (if any) and every MAD already waiting in the
/// transport's queue (at most its capacity) into the fair queue, counting
/// what a requester's share had no room for. Moving a MAD costs far less
/// than answering it, so the transport's queue stays empty while floods
/// are sorted out here, by requester.
fn queue_fairly(
    agent: &mut SaAgent,
    fair: &mut FairQueue<Arrived>,
    mads: &mut mpsc::Receiver<Arrived>,
    first: Option<Arrived>,
    now: Duration,
) {
    let mut next = first.or_else(|| mads.try_recv().ok());
    let mut taken = 0;
    while let Some(a) = next.take() {
        if let Some(dropped) = fair.push(a.dgram.addr.lid, a) {
            agent.count_share_drop(now, dropped);
        }
        taken += 1;
        if taken < SA_INTAKE {
            next = mads.try_recv().ok();
        }
    }
}

/// How many MADs are served between two looks at the transport's queue.
const DRAIN_EVERY: usize = 32;

/// Serves up to [`MAD_BURST`] MADs, one requester after another, taking
/// in what arrived every [`DRAIN_EVERY`].
fn serve_in_turn<T: Transport>(
    agent: &mut SaAgent,
    transport: &T,
    (fair, mads): (&mut FairQueue<Arrived>, &mut mpsc::Receiver<Arrived>),
    now: impl Fn() -> Duration,
    metrics: Option<&Metrics>,
    failures: &mut u64,
) {
    for i in 0..MAD_BURST {
        if i % DRAIN_EVERY == DRAIN_EVERY - 1 {
            queue_fairly(agent, fair, mads, None, now());
        }
        let Some((_, a)) = fair.pop() else { break };
        serve(agent, transport, now(), a, metrics, failures);
    }
}

/// One SA MAD from the transport: handled, what it calls for sent, and a
/// request's time from hand-over to answer observed.
fn serve<T: Transport>(
    agent: &mut SaAgent,
    transport: &T,
    now: Duration,
    a: Arrived,
    metrics: Option<&Metrics>,
    failures: &mut u64,
) {
    agent.handle_mad(now, &a.dgram);
    transmit(agent, transport, now, failures);
    let request = a.dgram.mad.get(3).is_some_and(|m| m & 0x80 == 0);
    if let Some(m) = metrics.filter(|_| request && !crate::mad::sm_sync::is_sync_mad(&a.dgram.mad)) {
        m.sa_answer(a.at.elapsed());
    }
}

/// Sends what the agent has to send.
fn transmit<T: Transport>(agent: &mut SaAgent, transport: &T, now: Duration, failures: &mut u64) {
    while let Some(d) = agent.poll_transmit(now) {
        if let Err(e) = transport.send(d) {
            *failures += 1;
            if failures.is_power_of_two() {
                warn!(error = %e, failures = *failures, "SA could not send an answer");
            }
        }
    }
}

/// What one mirror read found: the tables that answered, and why the
/// others (or the whole read) failed.
#[derive(Debug, Default)]
pub struct MirrorOutcome {
    /// The master's LID, as our port's MasterSMLID says (0 if unread).
    pub master_lid: Lid,
    pub read: MirrorRead,
    pub errors: Vec<String>,
}

/// Reads the master's ServiceRecord, InformInfoRecord, GUIDInfoRecord and
/// MCMemberRecord tables (GetTable, every record, trusted with `sa_key` so
/// ServiceKeys, subscriber QPNs and every multicast member with its
/// PortGID and JoinState are shown, IBA 15.2.5.17). Each table is bounded
/// by the RMPP receiver's `max_bytes` (a larger one fails and keeps the
/// previous copy), and the agent cuts what it keeps at the `[sa]` caps.
/// The master is the SM our port's PortInfo names (MasterSMLID), read
/// first: the transport's own idea of the SM LID dates from when it opened.
///
/// With ibsm as the master the tables come whole through RMPP. OpenSM
/// answers the same GetTables, but on ibsim its multi-MAD answers (the
/// kernel's RMPP) reach us truncated to the first segment, so with OpenSM
/// on ibsim only tables that fit one MAD mirror (a truncated transfer
/// fails and keeps the previous copy of that table).
pub async fn read_mirror<T: Transport + Clone>(smp: SmpClient<T>, transport: T, sa_key: u64) -> MirrorOutcome {
    let mut out = MirrorOutcome::default();
    let read = smp.dr_get(&DrPath::local(), AttributeId::PortInfo, 0).await;
    let master_lid = match read.map(|r| PortInfoRepr::parse_data(&r.data)) {
        Ok(Ok(pi)) if pi.master_sm_lid.is_unicast() => pi.master_sm_lid,
        Ok(Ok(pi)) => {
            out.errors.push(format!("our port's MasterSMLID is {}: no master to read", pi.master_sm_lid));
            return out;
        }
        Ok(Err(e)) => {
            out.errors.push(format!("our PortInfo is unreadable: {e}"));
            return out;
        }
        Err(e) => {
            out.errors.push(format!("reading our PortInfo: {e}"));
            return out;
        }
    };
    out.master_lid = master_lid;
    let sa = match SaClient::new(AtMaster { inner: transport, master_lid }) {
        Ok(c) => c.with_sm_key(sa_key),
        Err(e) => {
            out.errors.push(e.to_string());
            return out;
        }
    };
    let mut silent = false;
    out.read.services = table::<_, ServiceRecordRepr>(&sa, &mut out.errors, &mut silent).await;
    out.read.subscriptions = table::<_, InformInfoRecordRepr>(&sa, &mut out.errors, &mut silent).await;
    out.read.guid_info = table::<_, GuidInfoRecordRepr>(&sa, &mut out.errors, &mut silent).await;
    out.read.mcast_members = table::<_, McMemberRecordRepr>(&sa, &mut out.errors, &mut silent).await;
    out
}

/// Every record of one table (component mask 0), or `None` with the error
/// noted. After a request got no answer at all (`silent`), the next
/// tables are not asked: a master that died, or one whose `sa_key`
/// differs from ours (it drops our requests), would not answer them
/// either.
async fn table<T: Transport, R: SaRecord + Default>(
    sa: &SaClient<T>,
    errors: &mut Vec<String>,
    silent: &mut bool,
) -> Option<Vec<R>> {
    if *silent {
        return None;
    }
    match sa.get_table::<R>(0, &R::default()).await {
        Ok(records) => Some(records),
        Err(e) => {
            if matches!(e, SaError::Transport(TransportError::Timeout { .. })) {
                *silent = true;
                errors.push(format!("{e} (a dead master, or one with another [sa] sa_key, answers nothing)"));
            } else {
                errors.push(e.to_string());
            }
            None
        }
    }
}

/// The transport with `master_lid` as its port's SM LID, which is where
/// [`SaClient`] sends.
#[derive(Clone)]
struct AtMaster<T> {
    inner: T,
    master_lid: Lid,
}

impl<T: Transport> Transport for AtMaster<T> {
    fn request(&self, dgram: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send {
        self.inner.request(dgram)
    }
    fn request_rmpp(&self, dgram: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send {
        self.inner.request_rmpp(dgram)
    }
    fn send(&self, dgram: Datagram) -> Result<(), TransportError> {
        self.inner.send(dgram)
    }
    fn local_port(&self) -> LocalPort {
        LocalPort { sm_lid: self.master_lid, ..self.inner.local_port() }
    }
    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }
}

/// Builds `snap`'s indexes for the agent on a thread in the idle
/// scheduling class ([`super::background`]).
fn build_off_thread(agent: &mut SaAgent, snap: Arc<Snapshot>) -> Background<PreparedSnapshot> {
    super::background::spawn("ibsm-sa-build", agent.prepare(snap))
}

/// Installs what a build made; a build that panicked panics here, as it
/// would have inline.
fn install(agent: &mut SaAgent, now: Duration, built: Result<PreparedSnapshot, Failed>) {
    match built {
        Ok(prepared) => agent.install(now, prepared),
        Err(Failed::Panicked(payload)) => std::panic::resume_unwind(payload),
        Err(Failed::Cancelled) => warn!("building the SA's snapshot was cancelled"),
    }
}

/// Marks the publication seen and gives the agent the newest snapshot.
fn take_newest(agent: &mut SaAgent, published: &mut watch::Receiver<u64>, snapshots: &Snapshots, now: Duration) {
    published.borrow_and_update();
    if let Some(s) = snapshots.latest() {
        agent.new_snapshot(now, s);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::datagram::MadAddress;
    use crate::mad::Method;
    use crate::transport::sa_client::blank_request;

    /// A transport that hands the SA task's SA MADs over through the
    /// diversion a test fills, and keeps what the task sends.
    #[derive(Clone, Default)]
    struct Recorder {
        sink: Arc<Mutex<Option<mpsc::Sender<Arrived>>>>,
        sent: Arc<Mutex<Vec<Datagram>>>,
    }

    impl Transport for Recorder {
        fn request(&self, dgram: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send {
            std::future::ready(Err(TransportError::RmppUnsupported {
                mad: Box::new(crate::datagram::MadSummary::of(&dgram)),
            }))
        }
        fn send(&self, dgram: Datagram) -> Result<(), TransportError> {
            self.sent.lock().unwrap().push(dgram);
            Ok(())
        }
        fn local_port(&self) -> LocalPort {
            LocalPort::fake(1, 1)
        }
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
        fn divert(&self, _class: crate::mad::MgmtClass, sink: mpsc::Sender<Arrived>) -> bool {
            *self.sink.lock().unwrap() = Some(sink);
            true
        }
    }

    fn class_port_info_get(from: u16, tid: u64) -> Arrived {
        let mut mad = blank_request(Method::Get, 0x0001, 0, 0);
        crate::mad::MadHeader::new_checked(&mut mad[..]).unwrap().set_transaction_id(tid);
        Arrived { at: std::time::Instant::now(), dgram: Datagram { addr: MadAddress::gsi(Lid(from), 0), mad } }
    }

    /// A flood of 5,000 MADs from one LID is queued, then 20 from another:
    /// the other's are answered in turn with the flood's, among the first
    /// answers, and the flood keeps only its share (the rest dropped and
    /// counted, not answered).
    #[test]
    fn a_flood_from_one_requester_leaves_the_others_their_turn() {
        let (_, report) = crate::runtime::status::tests::swept();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let transport = Recorder::default();
            let snapshots = Snapshots::new();
            let (node, port) = report.subnet.sm_port.unwrap();
            snapshots.publish(Snapshot {
                sequence: 1,
                taken_at: std::time::SystemTime::now(),
                master: report.subnet.node(node).port_guid(port),
                master_lid: report.subnet.current_lid(node, port).unwrap(),
                sweep: report.clone(),
            });
            let metrics = Metrics::new();
            let to_program =
                ToProgram { aliases: watch::channel(Arc::default()).0, mcast: watch::channel(Arc::default()).0 };
            let handle = spawn(
                transport.clone(),
                SaConfig::default(),
                Guid(1),
                snapshots,
                Some(metrics.clone()),
                to_program,
                SaPlacement::OwnerRuntime,
            );
            handle.set_serving(Serving::Master);
            tokio::time::sleep(Duration::from_millis(50)).await;
            let sink = transport.sink.lock().unwrap().clone().expect("the SA task diverts SA MADs");
            // Nothing runs the task while these are queued: all arrive at once.
            for tid in 0..5000 {
                sink.try_send(class_port_info_get(9, tid)).unwrap();
            }
            for tid in 0..20 {
                sink.try_send(class_port_info_get(5, 1_000_000 + tid)).unwrap();
            }
            let t0 = std::time::Instant::now();
            while transport.sent.lock().unwrap().len() < FAIR_SHARE + 20 && t0.elapsed() < Duration::from_secs(10) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(Duration::from_millis(1100)).await;
            let sent = transport.sent.lock().unwrap().clone();
            let to = |lid: u16| sent.iter().enumerate().filter(move |(_, d)| d.addr.lid == Lid(lid)).map(|(i, _)| i);
            let polite: Vec<usize> = to(5).collect();
            assert_eq!(polite.len(), 20, "every one of the other requester's MADs is answered");
            assert!(
                *polite.last().unwrap() < 2 * 20 + DRAIN_EVERY,
                "answered in turn, not after the flood: {polite:?}"
            );
            assert_eq!(to(9).count(), FAIR_SHARE, "the flood keeps its share");
            let text = metrics.render();
            let dropped =
                format!("ibsm_sa_events_total{{kind=\"drop\",what=\"requester_share\"}} {}\n", 5000 - FAIR_SHARE);
            assert!(text.contains(&dropped), "{dropped} in\n{text}");
            drop(handle);
        });
    }
}
