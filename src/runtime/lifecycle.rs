//! The owner's life as systemd and `/healthz` see it: the heartbeat and
//! watchdog, READY=1, a start that takes longer, and shutdown.

use std::time::Duration;

use tracing::{debug, info};

use super::owner::Owner;
use super::{NotUpReason, RunError};
use crate::subnet::SweepReport;
use crate::transport::Transport;

/// How often an idle owner stamps its heartbeat: well inside
/// `status::HEARTBEAT_LIMIT`.
pub(super) const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);

impl<T: Transport + Clone> Owner<T> {
    /// The owner is alive: `/healthz` (and, under systemd, the watchdog).
    pub(super) fn beat(&mut self) {
        let now = self.now();
        if now >= self.next_heartbeat {
            self.options.status.heartbeat();
            let _ = self.options.notifier.watchdog();
            let every = self.options.notifier.watchdog_interval().map_or(HEARTBEAT_EVERY, |w| w.min(HEARTBEAT_EVERY));
            self.next_heartbeat = now + every;
        }
    }

    /// systemd: a sweep failed before the SM was ever ready; it tries
    /// again, so the start is not timed out (and restarted) meanwhile.
    pub(super) fn extend_start(&self) {
        if !self.told_ready {
            let wait = self.interval().unwrap_or(Duration::from_secs(1)) * 4 + Duration::from_secs(60);
            let _ = self.options.notifier.extend_timeout(wait);
            let _ = self.options.notifier.status("starting: a heavy sweep failed; trying again");
        }
    }

    /// systemd: READY=1 (repeated sends are harmless) and a STATUS= line.
    pub(super) fn notify_ready(&mut self, status: &str) {
        self.told_ready = true;
        let n = &self.options.notifier;
        if let Err(e) = n.ready().and_then(|_| n.status(status)) {
            debug!(error = %e, "sd_notify failed");
        }
    }

    /// Shutdown: STOPPING=1, and the last sweep's report (or why there is
    /// none) for `run` to return.
    pub(super) fn on_shutdown(&mut self) -> Result<SweepReport, RunError> {
        info!("shutting down");
        let _ = self.options.notifier.stopping();
        // The publication point still holds the snapshot: its report
        // is copied once, here, rather than at every sweep.
        let last = self.last.take().map(|s| s.sweep.clone());
        last.ok_or_else(|| RunError::NotUp {
            attempts: self.attempts,
            reasons: vec![NotUpReason::Stopped(format!(
                "stopped in {} before a sweep completed",
                self.election.state()
            ))],
        })
    }
}
