//! Side jobs: the owner's short I/O besides the sweep slot (polls of the
//! master, SMInfo Sets, own-port checks, a standby's mirror reads), many
//! at once; each ends as a typed result the owner hands on.

use std::future::Future;
use std::pin::Pin;

use super::owner::Owner;
use super::sa_task;
use crate::election::Event;
use crate::transport::Transport;

pub(super) type SideJob = Pin<Box<dyn Future<Output = Option<SideDone>> + Send>>;

/// What a side job ended with.
pub(super) enum SideDone {
    Election(Event),
    Mirror(sa_task::MirrorOutcome),
}

impl<T: Transport + Clone> Owner<T> {
    /// A side job ended: an election event to the election, a mirror read
    /// to the SA.
    pub(super) fn on_side_done(&mut self, done: Option<SideDone>) {
        match done {
            Some(SideDone::Election(e)) => {
                let now = self.now();
                self.election.handle(now, e);
            }
            Some(SideDone::Mirror(outcome)) => self.on_mirror_read(outcome),
            None => {}
        }
    }
}
