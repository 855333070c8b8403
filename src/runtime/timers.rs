//! The owner's timers: the election's timeout, the sweep interval, the
//! mirror interval, a multicast retry, the end of a trap burst and the
//! heartbeat, all waited for by one sleep in the loop.

use std::future::Future;

use futures::stream::FuturesUnordered;

use super::owner::Owner;
use super::owner::SweepWork;
use super::side_jobs::SideJob;
use crate::election::{Event, State};
use crate::subnet::flaps::{CableEnd, HeldCable};
use crate::subnet::{Suspect, Trigger};
use crate::transport::Transport;

/// How often the traps the rate limit dropped are logged, by source.
const TRAP_DROPS_LOGGED_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

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
            self.flaps.next_release(),
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
        self.release_held_cables(now);
        self.log_trap_drops(now);
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

impl<T: Transport + Clone> Owner<T> {
    /// Cables whose hold ran out: their ends are looked at again, and a
    /// cable that is up is routed over.
    fn release_held_cables(&mut self, now: std::time::Duration) {
        let released = self.flaps.release(now);
        if released.is_empty() {
            return;
        }
        for h in &released {
            tracing::info!(cable = %h, held_s = (now - h.since).as_secs(), "flapping cable's hold ended; looking at it again");
        }
        self.show_held_cables(now, 0);
        self.react_to_cables(&released);
    }

    /// `/status` and the metrics: the cables held now, and `new_holds`
    /// started.
    pub(super) fn show_held_cables(&self, now: std::time::Duration, new_holds: u64) {
        let held = self.flaps.held().map(|h| (h.clone(), h.until.saturating_sub(now))).collect();
        self.options.status.cables_held(held);
        if let Some(m) = &self.options.metrics {
            m.cable_holds(self.flaps.held().count(), new_holds);
        }
    }

    /// A reaction at both ends of each cable in `cables`.
    pub(super) fn react_to_cables(&mut self, cables: &[HeldCable]) {
        let ends: Vec<CableEnd> = cables.iter().flat_map(|h| std::iter::once(h.ends.0).chain(h.ends.1)).collect();
        let suspects: Vec<Suspect> = ends.into_iter().map(|end| self.suspect_at_end(end)).collect();
        self.react_to(Trigger::FlapDamping, suspects);
    }

    /// A switch is read whole; an end port by its port.
    fn suspect_at_end(&self, (guid, port): CableEnd) -> Suspect {
        let switch = self.last.as_ref().and_then(|s| s.sweep.subnet.by_guid(guid)).is_none_or(|n| n.is_switch());
        Suspect { guid, port: (!switch).then_some(port), silent: false }
    }

    /// One line per source whose traps the I/O thread's rate limit
    /// dropped since the last line, and the count in the metrics.
    fn log_trap_drops(&mut self, now: std::time::Duration) {
        if now.saturating_sub(self.drops_logged) < TRAP_DROPS_LOGGED_EVERY {
            return;
        }
        self.drops_logged = now;
        let stats = self.transport.stats();
        if stats.traps_dropped.is_empty() {
            return;
        }
        let mut new_total = 0;
        for (&lid, &total) in &stats.traps_dropped {
            let dropped = total - self.trap_drops.get(&lid).copied().unwrap_or(0).min(total);
            if dropped == 0 {
                continue;
            }
            new_total += dropped;
            tracing::warn!(
                lid = %lid,
                node = %self.node_at_lid(lid),
                dropped,
                limit_per_s = self.config.transport.trap_rate_limit,
                "traps over the per-source rate limit dropped unanswered"
            );
        }
        if let Some(m) = &self.options.metrics {
            m.traps_dropped(new_total);
        }
        self.trap_drops = stats.traps_dropped;
    }
}
