//! A standby's mirror reads of the master's SA: when the next is due,
//! the read as a side job, and what its outcome changes.

use tracing::{debug, info, warn};

use super::owner::Owner;
use super::sa_task;
use super::side_jobs::{SideDone, SideJob};
use crate::election::State;
use crate::transport::Transport;

impl<T: Transport + Clone> Owner<T> {
    /// One read of the master's SA tables (see `sa_task::read_mirror`).
    pub(super) fn mirror_read(&self) -> SideJob {
        let (smp, transport, key) = (self.client.clone(), self.transport.clone(), self.config.sa.sa_key);
        Box::pin(async move { Some(SideDone::Mirror(sa_task::read_mirror(smp, transport, key).await)) })
    }

    /// A mirror read ended: what answered goes to the SA (while still
    /// STANDBY), and the next read is due one interval later.
    pub(super) fn on_mirror_read(&mut self, outcome: sa_task::MirrorOutcome) {
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
