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

impl InlineSa {
    /// To the SA task's queue; a full queue drops it, counted at the next
    /// look at the agent.
    fn hand_over(&mut self, a: Arrived) {
        if self.handover.try_send(a).is_err() {
            self.handover_dropped += 1;
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
                return self.hand_over(a);
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
            Err(crate::sa::NotAGet) => return self.hand_over(a),
        }
        if let Some(m) = &self.metrics {
            m.sa_answer(a.at.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagram::MadAddress;
    use crate::sa::SaConfig;
    use crate::types::Guid;

    /// An SA request from `lid`: a Get of a NodeRecord, or another method.
    fn request(method: u8, lid: u16) -> Datagram {
        let mut mad = vec![0u8; 256];
        mad[..4].copy_from_slice(&[1, 0x03, 2, method]);
        mad[8..16].copy_from_slice(&u64::from(lid).to_be_bytes());
        mad[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
        Datagram { addr: MadAddress::gsi(Lid(lid), 0), mad }
    }

    /// An SA with no snapshot answers every Get BUSY: enough to see where
    /// each Get is answered.
    fn server() -> (InlineSa, SharedAgent, mpsc::Receiver<Arrived>) {
        let agent: SharedAgent = Arc::new(Mutex::new(SaAgent::new(SaConfig::default(), Guid(1))));
        let (tx, rx) = mpsc::channel(4);
        (InlineSa::new(agent.clone(), tx, Instant::now(), None), agent, rx)
    }

    #[test]
    fn gets_are_answered_here_in_turn_and_handed_over_while_the_agent_is_held() {
        let (mut sa, agent, mut handed) = server();
        assert!(sa.take(request(0x02, 5)).is_some(), "a Set is the SA task's");
        assert!(sa.take(request(0x12, 5)).is_some(), "a GetTable too");
        assert!(!sa.waiting());
        // Three Gets from LID 5, then one from LID 6: LID 6 is second.
        for _ in 0..3 {
            assert!(sa.take(request(0x01, 5)).is_none());
        }
        assert!(sa.take(request(0x01, 6)).is_none());
        let mut sent = Vec::new();
        for _ in 0..2 {
            sa.serve_one(&mut |d| sent.push(d));
        }
        let to: Vec<u16> = sent.iter().map(|d| d.addr.lid.0).collect();
        assert_eq!(to, vec![5, 6], "requesters in turn");
        assert!(sent.iter().all(|d| d.mad[3] == 0x81 && d.mad[4..6] == [0, 1]), "GetResp, BUSY");
        // While the SA task holds the agent, the next Get goes to its queue.
        let held = lock(&agent);
        sa.serve_one(&mut |d| sent.push(d));
        drop(held);
        assert_eq!(sent.len(), 2, "nothing answered here");
        assert_eq!(handed.try_recv().unwrap().dgram.addr.lid, Lid(5));
        sa.serve_one(&mut |d| sent.push(d));
        assert_eq!(sent.len(), 3);
        assert!(!sa.waiting());
        assert_eq!(lock(&agent).stats().received, 3, "the handed-over Get is the SA task's to count");
    }

    #[test]
    fn a_flood_fills_only_its_share_and_the_drops_are_counted() {
        let (mut sa, agent, _handed) = server();
        for _ in 0..FAIR_SHARE + 10 {
            assert!(sa.take(request(0x01, 9)).is_none());
        }
        assert!(sa.take(request(0x01, 10)).is_none());
        let mut to = Vec::new();
        sa.serve_one(&mut |d| to.push(d.addr.lid.0));
        sa.serve_one(&mut |d| to.push(d.addr.lid.0));
        assert_eq!(to, vec![9, 10], "the other requester is not behind the flood");
        assert_eq!(lock(&agent).stats().drops.requester_share, 10);
    }
}
