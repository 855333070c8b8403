//! The owner's timers: the election's timeout, the sweep interval, the
//! mirror interval, a multicast retry, the end of a trap burst and the
//! heartbeat, all waited for by one sleep in the loop.

use std::future::Future;

use futures::stream::FuturesUnordered;

use super::owner::Owner;
use super::owner::SweepWork;
use super::side_jobs::SideJob;
use crate::election::{Event, State};
use crate::transport::Transport;

impl<T: Transport + Clone> Owner<T> {
    /// Sleeps until the first timer is due (forever when none is set). The
    /// sweep interval waits while `sweeping`, a mirror read while one runs.
    pub(super) fn sleep(&self, sweeping: bool) -> impl Future<Output = ()> + 'static {
        let wake = [
            self.election.poll_timeout(),
            self.next_sweep.filter(|_| !sweeping),
            self.mirror.next.filter(|_| !self.mirror.running),
            self.mcast_retry,
            self.react_due.map(|(_, due)| due),
            Some(self.next_heartbeat),
        ]
        .into_iter()
        .flatten()
        .min();
        let started = self.started;
        async move {
            match wake {
                Some(at) => tokio::time::sleep_until(started + at).await,
                None => std::future::pending::<()>().await,
            }
        }
    }

    /// Timers. The sweep interval waits while a sweep runs or is queued: a
    /// light sweep must not slip between a discovery and its programming.
    pub(super) fn on_wake(&mut self, sweeping: bool, side: &mut FuturesUnordered<SideJob>) {
        let now = self.now();
        self.election.handle_timeout(now);
        if self.react_due.is_some_and(|(_, due)| due <= now) {
            self.react_due = None;
            self.queue.push_back(SweepWork::React);
        }
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
}
