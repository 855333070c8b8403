//! SIGHUP: the configuration read again and applied, the keys the
//! SubnetManager holds handed to it when it is home, a heavy sweep after.

use tracing::{error, info, warn};

use super::owner::Owner;
use crate::election::{Event, State};
use crate::transport::Transport;

impl<T: Transport + Clone> Owner<T> {
    /// SIGHUP: the configuration read again. A file that does not parse or
    /// validate changes nothing; otherwise the keys that can change live
    /// do, those that need a restart keep their running values, and one
    /// line says which is which. A heavy sweep follows (it also re-reads
    /// partitions.conf).
    pub(super) fn on_reload(&mut self) {
        let _ = self.options.notifier.reloading();
        let Some(read) = self.options.reload.clone() else {
            info!("SIGHUP: heavy sweep to re-read partitions.conf");
            return self.after_reload();
        };
        let new = match read() {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "SIGHUP: configuration refused; the running configuration stays");
                self.options.status.record_error(format!("configuration reload refused: {e}"));
                return self.after_reload();
            }
        };
        let plan = crate::config::reload::reload_plan(&self.config, &new);
        let merged = plan.apply(&self.config, &new);
        if plan.changes("log.level") {
            if let Some(h) = crate::logging::handle() {
                match h.set_config_level(&merged.log.level) {
                    Ok(true) => {}
                    Ok(false) => {
                        info!(filter = h.env_filter().unwrap_or(""), "log.level changed; IBSM_LOG still rules")
                    }
                    Err(e) => warn!(error = %e, "log.level not applied"),
                }
            }
        }
        if plan.changes("sm.sweep_interval_s") && self.next_sweep.is_some() {
            self.next_sweep = Some(self.now());
        }
        if plan.changes("perfmgr.") {
            self.perf_config.send_replace(merged.perfmgr.clone());
        }
        let sm_changes = ["qos.", "sm.partition_config_file", "sm.part_enforce"].iter().any(|k| plan.changes(k));
        self.config = merged;
        self.update_perf_active();
        if sm_changes {
            self.reconfigure_pending = true;
        }
        info!("SIGHUP: {}", plan.summary());
        self.after_reload();
    }

    pub(super) fn after_reload(&mut self) {
        if self.election.state() == State::Master {
            let now = self.now();
            self.election.handle(now, Event::SweepWanted);
        }
        // READY=1 ends the reload; before the SM was ever ready it would
        // also end `systemctl start` early.
        if self.told_ready {
            let _ = self.options.notifier.ready();
        }
    }

    /// Hands a reloaded configuration's live keys to the SubnetManager
    /// while it is home (no job runs).
    pub(super) fn reconfigure(&mut self) {
        if !self.reconfigure_pending {
            return;
        }
        let Some(sm) = self.sm.as_mut() else { return };
        self.reconfigure_pending = false;
        if let Err(e) = sm.reconfigure(&self.config.sm, &self.config.qos) {
            // The running path stays the SM's: a later reload compares
            // against what is really read.
            self.config.sm.partition_config_file = sm.partition_file().map(|p| p.to_path_buf());
            error!(error = %e, "SIGHUP: the new partitions file is refused; the partitions in force stay");
            self.options.status.record_error(format!("partitions file refused: {e}"));
        }
    }
}
