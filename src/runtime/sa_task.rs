//! The SA's own task: it drives the I/O-free [`SaAgent`] with the SA-class
//! MADs the owner task hands it, the snapshots the sweeps publish and the
//! role the election decides, and sends what the agent emits.
//!
//! ```text
//!  owner task ── SaInput (bounded mpsc) ──► SA task ── SaAgent (crate::sa)
//!  Snapshots ─── watch (sequence) ───────►    │        answers, RMPP, Reports
//!  owner task ── watch (Serving) ────────►    └──► Transport::send
//! ```
//!
//! A separate task, so a flood of queries never delays the owner's sweep
//! and election work; the queue in front of it is bounded and the owner
//! counts what it could not queue. The task ends when the owner drops its
//! [`SaHandle`].

use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use super::metrics::Metrics;
use super::snapshot::Snapshots;
use crate::mad::{NoticeRepr, SmInfoRepr};
use crate::sa::{SaAgent, SaConfig, Serving};
use crate::transport::{Datagram, Transport};
use crate::types::{Guid, Lid};

/// How often the SA's counters are copied to the metrics.
const METRICS_PERIOD: Duration = Duration::from_secs(1);

/// How many SA MADs may wait for the SA task; more are dropped and counted.
pub const SA_QUEUE: usize = 4096;

/// What the owner hands the SA task.
#[derive(Debug)]
pub enum SaInput {
    /// Any SA-class MAD that is not an answer to one of our own requests.
    Mad(Datagram),
    /// A trap the master received, for the subscribers that asked for it.
    Trap { notice: NoticeRepr, from: Lid },
    /// This SM's SMInfo as it stands, for its SMInfoRecord.
    SmInfo(SmInfoRepr),
}

/// The owner's end: queue MADs, tell the role. Dropping it ends the task.
pub struct SaHandle {
    input: mpsc::Sender<SaInput>,
    serving: watch::Sender<Serving>,
    /// Inputs the queue had no room for.
    pub dropped: u64,
}

impl SaHandle {
    /// Queues one input without waiting; a full queue drops it (counted,
    /// returned as `false`).
    pub fn offer(&mut self, input: SaInput) -> bool {
        match self.input.try_send(input) {
            Ok(()) => true,
            Err(_) => {
                self.dropped += 1;
                false
            }
        }
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

/// Starts the SA task on the current tokio runtime.
pub fn spawn<T: Transport + Clone>(
    transport: T,
    config: SaConfig,
    own_port: Guid,
    snapshots: Snapshots,
    metrics: Option<Metrics>,
) -> SaHandle {
    let (input, rx) = mpsc::channel(SA_QUEUE);
    let (serving, serving_rx) = watch::channel(Serving::NotMaster);
    let agent = SaAgent::new(config, own_port);
    tokio::spawn(run(agent, transport, rx, serving_rx, snapshots, metrics));
    SaHandle { input, serving, dropped: 0 }
}

async fn run<T: Transport>(
    mut agent: SaAgent,
    transport: T,
    mut input: mpsc::Receiver<SaInput>,
    mut serving: watch::Receiver<Serving>,
    snapshots: Snapshots,
    metrics: Option<Metrics>,
) {
    let started = tokio::time::Instant::now();
    // Counters reach Prometheus at most once a second, not per MAD.
    let mut export = tokio::time::interval(METRICS_PERIOD);
    export.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let now = || started.elapsed();
    let mut published = snapshots.subscribe();
    // A snapshot published before the task started still counts.
    if let Some(s) = snapshots.latest() {
        agent.new_snapshot(now(), s);
    }
    let mut send_failures = 0u64;
    loop {
        while let Some(d) = agent.poll_transmit(now()) {
            if let Err(e) = transport.send(d) {
                send_failures += 1;
                if send_failures.is_power_of_two() {
                    warn!(error = %e, failures = send_failures, "SA could not send an answer");
                }
            }
        }
        let wake = agent.poll_timeout();
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(started + at).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            got = input.recv() => match got {
                Some(SaInput::Mad(d)) => agent.handle_mad(now(), &d),
                Some(SaInput::Trap { notice, from }) => agent.handle_trap(now(), &notice, from),
                Some(SaInput::SmInfo(info)) => agent.set_sm_info(info),
                None => {
                    debug!("SA task ends: the owner is gone");
                    return;
                }
            },
            changed = serving.changed() => {
                if changed.is_err() {
                    return;
                }
                let s = *serving.borrow_and_update();
                agent.set_serving(now(), s);
            }
            changed = published.changed() => {
                if changed.is_ok() {
                    published.borrow_and_update();
                    if let Some(s) = snapshots.latest() {
                        agent.new_snapshot(now(), s);
                    }
                }
            }
            _ = sleep => agent.handle_timeout(now()),
            _ = export.tick(), if metrics.is_some() => {
                if let Some(m) = &metrics {
                    m.sa(agent.stats());
                }
            }
        }
    }
}
