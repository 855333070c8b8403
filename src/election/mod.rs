//! Master/standby election between SMs (IBA 14.4): who programs the fabric.
//!
//! An I/O-free core in the quinn-proto shape. The runtime feeds it what
//! happened ([`Election::handle`]) and the passage of time
//! ([`Election::handle_timeout`]), and pulls out what to do next
//! ([`Election::poll_action`]) and when to wake it ([`Election::poll_timeout`]).
//! It never reads a clock and never sends a MAD itself: a poll of the
//! master, a heavy sweep or a HANDOVER are [`Action`]s the runtime carries
//! out and answers with an [`Event`].
//!
//! ```text
//!            ┌──────────── DISCOVER ctl ───────────────┐
//!            ▼                                          │
//!   ─► DISCOVERING ── no master, we outrank all ──► MASTER ── ACKNOWLEDGE ─┐
//!        │  ▲                                      ▲  │   (after our HANDOVER)
//!        │  └── master lost (polls missed) ──┐     │  │                    │
//!        ▼                                   │  HANDOVER                   │
//!      STANDBY ◄─────────────────────────────┴──────┘  ◄───────────────────┘
//!        │ DISABLE ctl                                       (any state)
//!        ▼
//!     NOTACTIVE ── STANDBY/DISCOVER ctl ──► DISCOVERING
//! ```
//!
//! Ranking is [`SmInfoRepr::outranks`]: higher priority, then the lower port
//! GUID. A standby that outranks the master is handed the subnet by the
//! master (unless `master_preemption` is off); the master never steps down
//! to a lower-ranked SM.

mod fsm;

pub use fsm::{Action, Election, ElectionError, Event, Peer, PeerAddr, State, Timer, TransitionCause};

use std::time::Duration;

/// The election's knobs (the `[sm]` keys of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionConfig {
    /// 0-15; higher wins.
    pub priority: u8,
    /// SMInfo.SM_Key: shown only to requesters that present it, and
    /// required on every SubnSet(SMInfo). OpenSM's default is 1, and
    /// OpenSM ignores an SM whose key differs from its own.
    pub sm_key: u64,
    /// How often a standby polls the master's SMInfo.
    pub poll_interval: Duration,
    /// Polls in a row the master may miss before it is declared dead.
    pub poll_misses: u32,
    /// Hand the subnet to a higher-ranked standby as soon as one is seen.
    /// Off: a running master keeps the subnet until an operator asks
    /// ([`Event::OperatorHandover`]).
    pub master_preemption: bool,
    /// How long a master waits for ACKNOWLEDGE after its HANDOVER was
    /// answered, before it resumes mastership.
    pub handover_timeout: Duration,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            priority: 0,
            sm_key: 1,
            poll_interval: Duration::from_millis(2000),
            poll_misses: 4,
            master_preemption: true,
            handover_timeout: Duration::from_secs(5),
        }
    }
}

impl ElectionConfig {
    /// The longest time from the master's death to the standby declaring
    /// it dead: `poll_misses` intervals with no answer, each at its longest
    /// (jitter included), after the last interval that had one.
    pub fn detection_time(&self) -> Duration {
        (self.poll_interval + fsm::max_jitter(self.poll_interval)) * (self.poll_misses + 1)
    }
}

#[cfg(test)]
mod tests;

impl crate::config::SmConfig {
    /// The election's knobs, from the `[sm]` keys of the same names (here,
    /// not in `config`: configuration is plain data that names no core).
    pub fn election(&self) -> ElectionConfig {
        ElectionConfig {
            priority: self.priority,
            sm_key: self.sm_key,
            poll_interval: Duration::from_millis(self.sminfo_polling_timeout_ms),
            poll_misses: self.polling_retry_number,
            master_preemption: self.master_preemption,
            ..Default::default()
        }
    }
}
