//! The SM's runtime: one owner task holds all SM state; everything else
//! owns nothing and hands it typed results.
//!
//! ```text
//!  MadTransport I/O thread ── unsolicited mpsc ──► owner task ── dispatch::classify, then inbound.rs:
//!        ▲   (TIDs, window, retries)                 │   SMInfo Get/Set, traps, status answers
//!        │                                           │
//!        │                                           ├── Election core (election::fsm): state, timers;
//!        │  request()/send()                         │   its actions carried out in election.rs
//!        ├──────────── sweep slot (one job) ◄────────┤   discover | take_charge | light sweep |
//!        │             sweep_jobs.rs                 │   reaction (traps 128/144 and light sweep
//!        │                                           │   findings, a burst gathered first), each
//!        │                                           │   owning the SubnetManager while it runs;
//!        │                                           │   a programmed sweep is published (publish.rs)
//!        └──────────── side jobs (FuturesUnordered) ◄┘   polls of the master, SMInfo Sets,
//!                      side_jobs.rs                      own-port checks: each ends as an Event;
//!                                                        a standby's mirror read of the master's
//!                                                        SA (one at a time, mirror.rs) ends as SaInput::Mirror
//!  timers (timers.rs): Election::poll_timeout, the sweep interval, the mirror interval, a multicast
//!                      retry, the end of a flapping cable's hold and the heartbeat, one sleep in
//!                      the owner's select
//!  traps pass the per-source rate limit in the I/O thread (exchange::trap_gate); reactions'
//!                      change sets feed the flap damper (subnet::flaps), whose held cables every
//!                      sweep leaves out
//!  SA task (sa_task.rs, its own thread in the daemon): SA MADs come straight from the I/O thread
//!                      (Transport::divert), never through the owner; traps, SMInfo and mirror reads
//!                      from the owner ── watch (alias GUIDs, multicast groups) ──► owner (sa_link.rs):
//!                      queues an alias pass (GUIDInfo Sets only) or a multicast pass (MFTs) in the
//!                      sweep slot
//!  perfmgr task (perfmgr_task.rs): polls the newest snapshot's ports while the owner says so
//!  signals (signals.rs): SIGHUP ──► reload.rs; SIGUSR1 ──► a handover; shutdown ──► lifecycle.rs
//! ```
//!
//! The owner loop (`run`, below): carry out the election's actions, then
//! wait for the first of a MAD from the dispatcher, the sweep job, a side
//! job, an SA change, a signal, a timer or shutdown, and hand it to its
//! handler. The owner's state and how it is built are in owner.rs. No state
//! is shared: the SubnetManager moves into the sweep job and comes back
//! with its result, so nothing is locked.

pub mod backend;
mod background;
pub mod dispatch;
pub mod driver;
pub mod metrics;
pub mod notify;
pub mod perfmgr;
pub mod sa_task;

pub mod status;

mod election;
mod inbound;
mod lifecycle;
mod mirror;
mod owner;
mod perfmgr_task;
mod publish;
mod reload;
mod sa_inline;
mod sa_link;
mod side_jobs;
mod signals;
mod sweep_jobs;
mod timers;

use std::future::Future;
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::program::SweepError;
use crate::subnet::SweepReport;
use crate::transport::{Datagram, Transport};
use owner::{Owner, Started};
use side_jobs::SideJob;
use signals::OperatorSignal;
use sweep_jobs::SweepJob;

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
    /// Where the SA task runs: its own thread in the daemon, beside the
    /// owner in tests whose tokio clock is paused.
    pub sa_placement: sa_task::SaPlacement,
    /// Where the performance manager publishes each cycle's counters
    /// (`/metrics` and `/dump/port-counters` read them).
    pub perf_counters: crate::perfmgr::PerfShared,
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
            sa_placement: sa_task::SaPlacement::OwnerRuntime,
            perf_counters: crate::perfmgr::PerfShared::new(),
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

/// Runs the SM until `shutdown` resolves (or, with `once`, until the subnet
/// is up). Returns the last sweep's report.
pub async fn run<T: Transport + Clone>(
    transport: T,
    mut unsolicited: mpsc::Receiver<Datagram>,
    config: Config,
    options: RunOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<SweepReport, RunError> {
    let Started { mut owner, mut alias_changes, mut mcast_changes, perfmgr: _perfmgr } =
        Owner::start(transport, config, options)?;
    let mut operator = OperatorSignal::handover(owner.options.operator_signals);
    let mut reload = OperatorSignal::reload(owner.options.operator_signals);
    let mut job: Option<SweepJob<T>> = None;
    let mut side: FuturesUnordered<SideJob> = FuturesUnordered::new();
    tokio::pin!(shutdown);
    loop {
        owner.beat();
        if let Some(end) = owner.carry_out_election(&mut side) {
            return end;
        }
        if job.is_none() {
            owner.reconfigure();
            job = owner.next_job();
        }
        let sleep = owner.sleep(job.is_some());
        tokio::select! {
            _ = &mut shutdown => return owner.on_shutdown(),
            Some(dgram) = unsolicited.recv() => owner.on_mad(dgram),
            (sm, done) = async { job.as_mut().expect("guarded").await }, if job.is_some() => {
                job = None;
                owner.sm = Some(sm);
                if let Some(end) = owner.on_sweep_done(done) {
                    return end;
                }
            }
            Some(done) = side.next(), if !side.is_empty() => owner.on_side_done(done),
            Ok(()) = alias_changes.changed() => owner.on_aliases_changed(),
            Ok(()) = mcast_changes.changed() => owner.on_mcast_changed(),
            Some(()) = reload.recv() => owner.on_reload(),
            _ = sleep => owner.on_wake(job.is_some(), &mut side),
            Some(()) = operator.recv() => owner.on_operator_handover(),
        }
    }
}
