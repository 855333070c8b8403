//! The owner and the SA task: what the owner hands the SA (MADs, traps,
//! its SMInfo, whether to answer) and the reprogramming the SA's alias
//! GUIDs and multicast groups ask of the sweep slot.

use std::time::Duration;

use tracing::warn;

use super::owner::Owner;
use super::owner::SweepWork;
use super::sa_task;
use crate::election::State;
use crate::transport::Transport;

impl<T: Transport + Clone> Owner<T> {
    /// Our SMInfo, key included: the SA shows the key to trusted
    /// requesters only.
    pub(super) fn tell_sa_sm_info(&mut self) {
        let info = self.election.sm_info(true);
        self.hand_to_sa(sa_task::SaInput::SmInfo(info));
    }

    /// What the SA may answer (IBA C15-0.1.3: only the master SM's SA, and
    /// only once its first sweep is done).
    pub(super) fn sa_serving(&self) -> crate::sa::Serving {
        use crate::sa::Serving;
        match (self.election.state(), self.master_swept) {
            (State::Master, true) => Serving::Master,
            (State::Master, false) => Serving::MasterNotSwept,
            _ => Serving::NotMaster,
        }
    }

    /// Hands an SA-class MAD (or a trap) to the SA task; a full queue drops
    /// it, counted, with one log line per 10 s.
    pub(super) fn hand_to_sa(&mut self, input: sa_task::SaInput) {
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

    /// The SA's alias GUIDs changed: a master that programmed the fabric
    /// writes them now, without a sweep (as OpenSM's SA asks its state
    /// manager for just those GUIDInfo Sets). A heavy sweep already queued
    /// reads the table itself.
    pub(super) fn on_aliases_changed(&mut self) {
        let queued = self.queue.iter().any(|w| !matches!(w, SweepWork::Light));
        if self.master_swept && !queued {
            self.queue.push_back(SweepWork::Aliases);
        }
    }

    /// The SA's multicast groups changed: a master that programmed the
    /// fabric routes them and writes the MFTs now, without a sweep. One
    /// pass queued at a time: it reads the newest table when it runs.
    pub(super) fn on_mcast_changed(&mut self) {
        let queued = self.queue.iter().any(|w| !matches!(w, SweepWork::Light | SweepWork::Aliases));
        if self.master_swept && !queued {
            self.queue.push_back(SweepWork::Multicast);
        }
    }
}
