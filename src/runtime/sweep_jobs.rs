//! The sweep slot: the one job that holds the SubnetManager (a discovery,
//! a master's programming, a light sweep, an alias or multicast pass), the
//! work queued for it, and what the owner does when the job ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, error, info, warn};

use super::owner::{Owner, SweepWork};
use super::{metrics, sa_task, RunError};
use crate::election::Event;
use crate::program::{Discovered, Reaction, SubnetManager, SweepError};
use crate::subnet::{MasterMode, SweepKind, SweepReport, Trigger};
use crate::transport::{SmpClient, Transport};

/// How soon a multicast pass whose SMPs failed is tried again.
pub(super) const MCAST_RETRY: Duration = Duration::from_secs(1);

/// What the sweep slot's job ended with; the SubnetManager comes back with it.
pub(super) enum SweepDone {
    Discovered(Result<Box<Discovered>, SweepError>),
    Programmed(Result<Box<SweepReport>, SweepError>),
    LightSwept(crate::sweep::light::LightSweep, Duration),
    /// A reaction to a fabric change, what started it and how long it took.
    Reacted(Result<Reaction, SweepError>, Trigger, Duration),
    /// The alias pass (`None`: the SM has not programmed the fabric yet).
    AliasesProgrammed(Option<crate::subnet::ProgramReport>),
    /// The multicast pass (`None`: no heavy sweep has routed yet).
    McastProgrammed(Option<crate::subnet::McastReport>),
}

pub(super) type SweepJob<T> = Pin<Box<dyn Future<Output = (SubnetManager<SmpClient<T>>, SweepDone)> + Send>>;

impl<T: Transport + Clone> Owner<T> {
    /// Starts the queued sweep work, if the SubnetManager is home.
    pub(super) fn next_job(&mut self) -> Option<SweepJob<T>> {
        let work = self.queue.pop_front()?;
        let mut sm = self.sm.take().expect("no job runs, so the SubnetManager is home");
        sm.hold_cables(self.flaps.held_ports());
        Some(match work {
            SweepWork::React => {
                let Some((trigger, suspects)) = self.pending_react.take() else {
                    self.sm = Some(sm);
                    return self.next_job();
                };
                let suspects: Vec<_> = suspects.into_iter().collect();
                Box::pin(async move {
                    let started = std::time::Instant::now();
                    let r = sm.react(trigger.clone(), &suspects).await;
                    (sm, SweepDone::Reacted(r, trigger, started.elapsed()))
                })
            }
            SweepWork::Discover => Box::pin(async move {
                let r = sm.discover().await.map(Box::new);
                (sm, SweepDone::Discovered(r))
            }),
            SweepWork::TakeCharge { takeover } => {
                let Some(found) = self.discovered.take() else {
                    // Nothing to program (a discovery failed in between): look again.
                    self.sm = Some(sm);
                    self.queue.push_front(SweepWork::Discover);
                    return self.next_job();
                };
                let mode = if takeover {
                    self.adopt_old_masters_lids(&mut sm);
                    let mode = self.takeover_mode();
                    self.adopt_old_masters_mcast(&mut sm, mode);
                    mode
                } else if self.took_charge {
                    MasterMode::Continuing
                } else {
                    MasterMode::Fresh
                };
                self.took_charge = true;
                Box::pin(async move {
                    let r = sm.take_charge(found, mode).await.map(Box::new);
                    (sm, SweepDone::Programmed(r))
                })
            }
            SweepWork::Light => Box::pin(async move {
                let started = std::time::Instant::now();
                let r = sm.light_sweep().await;
                (sm, SweepDone::LightSwept(r, started.elapsed()))
            }),
            // A discovery waiting for its programming: that heavy sweep
            // reads the alias table itself (and nothing slips in between).
            SweepWork::Aliases if self.discovered.is_some() => {
                self.sm = Some(sm);
                return self.next_job();
            }
            SweepWork::Aliases => Box::pin(async move {
                let r = sm.program_aliases().await;
                (sm, SweepDone::AliasesProgrammed(r))
            }),
            // As for aliases: the heavy sweep routes the groups itself.
            SweepWork::Multicast if self.discovered.is_some() => {
                self.sm = Some(sm);
                return self.next_job();
            }
            SweepWork::Multicast => Box::pin(async move {
                let r = sm.program_multicast().await;
                (sm, SweepDone::McastProgrammed(r))
            }),
        })
    }

    pub(super) fn on_sweep_done(&mut self, done: SweepDone) -> Option<Result<SweepReport, RunError>> {
        let now = self.now();
        if matches!(done, SweepDone::Programmed(Ok(_)) | SweepDone::Reacted(Ok(_), ..)) {
            self.tell_sa_lids();
        }
        // A heavy sweep may have routed every group afresh: the whole
        // trees table then, changes otherwise.
        match &done {
            SweepDone::Programmed(_) => self.tell_sa_mcast(true),
            SweepDone::Reacted(..) | SweepDone::McastProgrammed(_) => self.tell_sa_mcast(false),
            _ => {}
        }
        match done {
            SweepDone::McastProgrammed(Some(mut p)) => {
                if let Some(m) = &self.options.metrics {
                    m.mcast_pass("membership", &p);
                }
                // The SA's MulticastForwardingTableRecords follow (a full
                // queue drops them: the next heavy sweep's snapshot has all).
                let tables = std::mem::take(&mut p.tables);
                if !tables.is_empty() {
                    self.sa.offer(sa_task::SaInput::McastTables(tables));
                }
                // Failed SMPs left switches to revisit: again shortly,
                // whether or not membership changes.
                if p.retry && self.mcast_retry.is_none() {
                    self.mcast_retry = Some(now + MCAST_RETRY);
                }
                for problem in &p.problems {
                    warn!(%problem, "multicast");
                }
                if p.mft_sets + p.failures + p.mft_vouched > 0 {
                    info!(
                        groups = p.groups,
                        sets = p.mft_sets,
                        reads = p.mft_reads,
                        vouched = p.mft_vouched,
                        failures = p.failures,
                        "multicast forwarding programmed"
                    );
                }
            }
            SweepDone::McastProgrammed(None) => {}
            SweepDone::AliasesProgrammed(Some(p)) if p.guid_info_sets + p.failures > 0 => {
                info!(sets = p.guid_info_sets, failures = p.failures, "alias GUIDs programmed");
            }
            SweepDone::AliasesProgrammed(_) => {}
            SweepDone::Discovered(Ok(found)) => {
                // Discovery's problems are logged here, standby or not;
                // programming's after it.
                for p in &found.subnet.problems {
                    warn!(problem = %p, "sweep problem");
                }
                self.discovery_problems = found.subnet.problems.len();
                if self.config.perfmgr.on_standby {
                    // Its LIDs as the ports report them: a standby assigns none.
                    self.standby_ports.store(Arc::new(crate::perfmgr::targets::from_subnet(&found.subnet, |_| None)));
                }
                let peers = self.peers(&found);
                self.discovered = Some(*found);
                self.election.handle(now, Event::DiscoveryDone { peers });
            }
            SweepDone::Discovered(Err(e)) => {
                if self.options.once {
                    return Some(Err(e.into()));
                }
                if let Some(m) = &self.options.metrics {
                    m.sweep_failed(metrics::SweepFailure::Discovery);
                }
                self.options.status.record_error(format!("discovery failed: {e}"));
                self.extend_start();
                self.election.handle(now, Event::DiscoveryFailed { why: e.to_string() });
            }
            SweepDone::Programmed(Ok(report)) => {
                // A heavy sweep routes in full: no rebalance left to do.
                self.rebalance_wanted = report.routing.quick;
                self.election.handle(now, Event::Programmed);
                return self.on_programmed(*report);
            }
            // A sweep that could not program (routing, LID configuration)
            // ends `--once`; the service says so and tries again next interval.
            SweepDone::Programmed(Err(e)) if self.options.once => return Some(Err(e.into())),
            SweepDone::Programmed(Err(e)) => {
                error!(error = %e, "heavy sweep could not program the fabric; trying again next interval");
                if let Some(m) = &self.options.metrics {
                    m.sweep_failed(metrics::SweepFailure::Programming);
                }
                self.options.status.record_error(format!("heavy sweep could not program the fabric: {e}"));
                self.extend_start();
                self.election.handle(now, Event::Programmed);
                self.next_sweep = Some(now + self.interval().unwrap_or(Duration::from_secs(1)));
                self.was_up = false;
            }
            SweepDone::LightSwept(found, elapsed) => {
                if let Some(m) = &self.options.metrics {
                    m.light_sweep_timed(elapsed);
                    m.transport(&self.transport.stats());
                }
                self.options.status.light_sweep(elapsed, found.finding.as_ref());
                self.election.handle(now, Event::LightSwept);
                let elapsed_ms = elapsed.as_millis() as u64;
                match found.finding {
                    Some(why) if found.needs_heavy => {
                        info!(change = %why, elapsed_ms, "light sweep done; heavy sweep next");
                        self.election.handle(now, Event::SweepWanted);
                    }
                    Some(why) => {
                        info!(change = %why, switches = found.changed.len(), elapsed_ms, "light sweep done; reacting");
                        let suspects = crate::sweep::react::switch_suspects(found.changed, found.silent);
                        self.react_to(Trigger::LightSweep, suspects);
                    }
                    None if self.rebalance_wanted => {
                        info!(
                            change = "none",
                            elapsed_ms, "light sweep done; routing again in full after a quick reaction"
                        );
                        self.rebalance_wanted = false;
                        self.react_to(Trigger::Rebalance, Vec::new());
                    }
                    None => {
                        info!(change = "none", elapsed_ms, "light sweep done");
                        self.next_sweep = self.interval().map(|i| now + i);
                    }
                }
            }
            SweepDone::Reacted(result, trigger, elapsed) => return self.on_reacted(result, trigger, elapsed),
        }
        None
    }

    /// A reaction ended: a programmed change set is published as a sweep
    /// is; one that could not be bounded, or failed, becomes a heavy sweep.
    fn on_reacted(
        &mut self,
        result: Result<Reaction, SweepError>,
        trigger: Trigger,
        elapsed: Duration,
    ) -> Option<Result<SweepReport, RunError>> {
        let now = self.now();
        let status = &self.options.status;
        match result {
            Ok(Reaction::Programmed(report)) => {
                // Set by a quick run, cleared by any full one (a rebalance,
                // or a later reaction that ran the engines in full).
                if report.routing.engine.is_some() && !report.routing.untouched && report.routing.repaired_lids == 0 {
                    self.rebalance_wanted = report.routing.quick;
                }
                if let SweepKind::Reaction { changes, .. } = &report.kind {
                    status.reaction(&trigger.to_string(), changes, elapsed, report.program.sets() as u64);
                    let newly = self.flaps.observe(now, changes);
                    if !newly.is_empty() {
                        for h in &newly {
                            warn!(cable = %h, hold_s = (h.until - h.since).as_secs(), "cable flapping; held down: not routed over, its ports left in INIT");
                        }
                        self.show_held_cables(now, newly.len() as u64);
                        // A cable that bounced back up between two looks is
                        // routed over now: the next reaction takes it out.
                        self.react_to_cables(&newly);
                    }
                }
                if let Some(m) = &self.options.metrics {
                    m.reaction("programmed");
                    if let SweepKind::Reaction { changes, .. } = &report.kind {
                        m.fabric_changes(changes);
                    }
                }
                self.on_programmed(*report)
            }
            Ok(Reaction::Unchanged(changes)) => {
                debug!(%trigger, reads = changes.reads, "reaction found nothing changed");
                status.reaction(&trigger.to_string(), &changes, elapsed, 0);
                if let Some(m) = &self.options.metrics {
                    m.reaction("unchanged");
                }
                None
            }
            Ok(Reaction::Unbounded(changes)) => {
                let why = changes.unbounded.clone().unwrap_or_default();
                info!(%trigger, %why, reads = changes.reads, "change set cannot be bounded; heavy sweep next");
                status.reaction(&trigger.to_string(), &changes, elapsed, 0);
                if let Some(m) = &self.options.metrics {
                    m.reaction("heavy_sweep");
                }
                self.election.handle(now, Event::SweepWanted);
                None
            }
            Err(e) => {
                error!(error = %e, %trigger, "reaction could not program the fabric; heavy sweep next");
                let changes = crate::subnet::ChangeSet { unbounded: Some(e.to_string()), ..Default::default() };
                status.reaction(&trigger.to_string(), &changes, elapsed, 0);
                if let Some(m) = &self.options.metrics {
                    m.reaction("heavy_sweep");
                }
                self.election.handle(now, Event::SweepWanted);
                None
            }
        }
    }
}
