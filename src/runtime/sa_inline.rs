//! The SA's Gets answered on the transport's receiver thread
//! ([`crate::transport::InlineServer`]): a SubnAdmGet (a PathRecord, a
//! NodeRecord: one record, one MAD) goes from the read to the answer's
//! write on that one thread, with no hand to the SA thread and back. Each
//! hand costs both threads a sleep and a wake-up, which were most of the
//! SM's CPU per PathRecord.
//!
//! ```text
//!  device ── receiver thread ── Get ──► InlineSa (FairQueue) ── SaAgent (locked) ──► device
//!                           └── anything else ──► the SA task's queue (sa_task)
//! ```
//!
//! The agent is shared with the SA task behind a mutex that neither holds
//! across an await or a send. The receiver never waits for it: while the
//! SA task holds it (installing a snapshot, a long GetTable), a Get goes
//! to the SA task's queue and is answered there, as every SA MAD was
//! before. Gets are taken per requester ([`FairQueue`], the same shares as
//! the SA task's): the receiver reads all that waits before it answers,
//! so a flood from one LID fills only its own share.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::metrics::Metrics;
use super::sa_task::{FAIR_SHARE, SA_QUEUE};
use crate::sa::fair::FairQueue;
use crate::sa::SaAgent;
use crate::transport::{Arrived, Datagram, InlineServer};
use crate::types::Lid;

/// The SA agent as the SA task and the receiver thread share it.
pub type SharedAgent = Arc<Mutex<SaAgent>>;

/// Locks the agent; a panic elsewhere while it was held leaves it usable
/// (each of its steps leaves it whole).
pub fn lock(agent: &SharedAgent) -> std::sync::MutexGuard<'_, SaAgent> {
    agent.lock().unwrap_or_else(|p| p.into_inner())
}

/// The SA's [`InlineServer`].
pub struct InlineSa {
    agent: SharedAgent,
    /// The SA task's queue, for a Get the agent was busy for.
    handover: mpsc::Sender<Arrived>,
    waiting: FairQueue<Arrived>,
    /// Requesters whose Gets found no room in their share since the agent
    /// was last free to count them.
    share_drops: Vec<Lid>,
    /// Gets the SA task's queue had no room for, not yet counted.
    handover_dropped: u64,
    /// The SA task's clock origin: the agent's `now` is time since it.
    started: Instant,
    metrics: Option<Metrics>,
}

impl InlineSa {
    pub fn new(
        agent: SharedAgent,
        handover: mpsc::Sender<Arrived>,
        started: Instant,
        metrics: Option<Metrics>,
    ) -> Self {
        InlineSa {
            agent,
            handover,
            waiting: FairQueue::new(FAIR_SHARE, SA_QUEUE),
            share_drops: Vec::new(),
            handover_dropped: 0,
            started,
            metrics,
        }
    }
}

/// How many share drops wait to be counted before more are forgotten.
const SHARE_DROPS_KEPT: usize = 1024;

impl InlineServer for InlineSa {
    fn take(&mut self, d: Datagram) -> Option<Datagram> {
        if !SaAgent::is_get(&d.mad) {
            return Some(d);
        }
        let from = d.addr.lid;
        if let Some(dropped) = self.waiting.push(from, Arrived { at: Instant::now(), dgram: d }) {
            if self.share_drops.len() < SHARE_DROPS_KEPT {
                self.share_drops.push(dropped);
            }
        }
        None
    }

    fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    fn serve_one(&mut self, send: &mut dyn FnMut(Datagram)) {
        let Some((_, a)) = self.waiting.pop() else { return };
        let now: Duration = self.started.elapsed();
        let answer = {
            let Ok(mut agent) = self.agent.try_lock() else {
                // The SA task holds it (a snapshot install, a long answer):
                // it answers this one after.
                if self.handover.try_send(a).is_err() {
                    self.handover_dropped += 1;
                }
                return;
            };
            for from in self.share_drops.drain(..) {
                agent.count_share_drop(now, from);
            }
            agent.count_queue_full(std::mem::take(&mut self.handover_dropped));
            agent.answer_get(now, &a.dgram)
        };
        match answer {
            Ok(Some(reply)) => send(reply),
            Ok(None) => {}
            // `take` keeps only Gets; a malformed one is the SA task's to count.
            Err(crate::sa::NotAGet) => {
                if self.handover.try_send(a).is_err() {
                    self.handover_dropped += 1;
                }
                return;
            }
        }
        if let Some(m) = &self.metrics {
            m.sa_answer(a.at.elapsed());
        }
    }
}
