//! A programmed heavy sweep made public: its log lines, metrics and
//! `/status`, the snapshot readers take, and what `--once` decides from it.

use tracing::{info, warn};

use super::owner::Owner;
use super::sweep_jobs::MCAST_RETRY;
use super::{NotUpReason, RunError};
use crate::election::{Event, State};
use crate::subnet::SweepReport;
use crate::transport::Transport;

impl<T: Transport + Clone> Owner<T> {
    pub(super) fn on_programmed(&mut self, report: SweepReport) -> Option<Result<SweepReport, RunError>> {
        self.attempts += 1;
        let up = report.subnet_up();
        // One census of what the sweep found, for the metrics and /status.
        let census = crate::subnet::Census::of(&report.subnet);
        if let Some(m) = &self.options.metrics {
            m.heavy_sweep_counted(&report, &census);
            m.routing(report.routing.engine_name(), report.routing.elapsed);
            m.transport(&self.transport.stats());
        }
        self.options.status.heavy_sweep_counted(&report, &census, report.routing.engine_name());
        if report.mode.is_takeover() {
            let p = &report.program;
            info!(
                sets = p.sets(),
                changing_sets = p.changing_sets(),
                sm_lid_only_sets = p.sm_lid_only_sets,
                lft_reads = p.lft_reads,
                lft_blocks = p.lft_blocks,
                "takeover programmed"
            );
        }
        if up && !self.was_up {
            info!(
                nodes = report.subnet.nodes.len(),
                max_lid = report.lids.max_lid.0,
                elapsed_ms = report.elapsed.as_millis() as u64,
                "SUBNET UP"
            );
        } else if !up {
            for p in &report.inactive {
                warn!(port = %p, "port not active");
            }
        }
        for p in report.problems().iter().skip(self.discovery_problems) {
            warn!(problem = %p, "programming problem");
        }
        self.was_up = up;
        if self.options.once {
            if up {
                return Some(Ok(report));
            }
            if self.attempts >= self.options.once_attempts {
                let mut reasons: Vec<NotUpReason> =
                    report.inactive.iter().take(5).cloned().map(NotUpReason::Inactive).collect();
                reasons.extend(report.problems().iter().take(5).cloned().map(NotUpReason::Problem));
                if let Some(e) = &report.lids.error {
                    reasons.push(NotUpReason::Lids(e.to_string()));
                }
                return Some(Err(RunError::NotUp { attempts: self.attempts, reasons }));
            }
            self.election.handle(self.now(), Event::SweepWanted);
        } else {
            self.next_sweep = self.interval().map(|i| self.now() + i);
        }
        if report.mcast.retry && self.mcast_retry.is_none() {
            self.mcast_retry = Some(self.now() + MCAST_RETRY);
        }
        let local = self.transport.local_port();
        let master_lid = report.subnet.sm_port.and_then(|(n, p)| report.subnet.current_lid(n, p)).unwrap_or(local.lid);
        self.published += 1;
        let published = self.options.snapshots.publish(crate::subnet::Snapshot {
            sequence: self.published,
            taken_at: std::time::SystemTime::now(),
            master: local.port_guid,
            master_lid,
            sweep: report,
        });
        self.last = Some(published);
        if self.election.state() == State::Master {
            self.master_swept = true;
            self.sa.set_serving(self.sa_serving());
            self.options.status.ready("master: a heavy sweep has programmed the fabric");
            self.notify_ready(&format!(
                "master: {} nodes, {}",
                self.last.as_ref().map_or(0, |s| s.sweep.subnet.nodes.len()),
                if self.was_up { "subnet up" } else { "subnet not up yet" }
            ));
        }
        self.options.status.set_port(local.port_guid, master_lid);
        self.publish_election();
        self.tell_sa_sm_info();
        None
    }
}
