//! The election's side effects: its actions carried out (sweeps queued,
//! SMInfo polls and Sets as side jobs, state changes shown and acted on),
//! the master as this SM knows it, and the peers a discovery found.

use futures::stream::FuturesUnordered;
use tracing::{debug, error, info, warn};

use super::dispatch;
use super::owner::Owner;
use super::owner::SweepWork;
use super::side_jobs::{SideDone, SideJob};
use super::RunError;
use crate::election::{Action, Event, Peer, PeerAddr, State};
use crate::mad::{AttributeId, DrPath, PortInfoRepr, PortState, SmControl, SmInfoRepr, SmpAttribute};
use crate::program::Discovered;
use crate::subnet::SweepReport;
use crate::transport::Transport;
use crate::types::Lid;

impl<T: Transport + Clone> Owner<T> {
    /// Carries out every action the election has for us. `Some` ends `run`.
    pub(super) fn carry_out_election(
        &mut self,
        side: &mut FuturesUnordered<SideJob>,
    ) -> Option<Result<SweepReport, RunError>> {
        while let Some(action) = self.election.poll_action() {
            if let Some(end) = self.act(action, side) {
                return Some(end);
            }
        }
        None
    }

    /// Carries out one election action. `Some` ends `run`.
    pub(super) fn act(
        &mut self,
        action: Action,
        side: &mut FuturesUnordered<SideJob>,
    ) -> Option<Result<SweepReport, RunError>> {
        match action {
            Action::Discover => {
                if !self.queue.contains(&SweepWork::Discover) {
                    self.queue.push_back(SweepWork::Discover);
                }
            }
            Action::TakeCharge { takeover } => self.queue.push_back(SweepWork::TakeCharge { takeover }),
            Action::Poll { master } => side.push(self.poll(master)),
            Action::CheckOwnPort => side.push(self.check_own_port()),
            Action::Send { to, control, from } => side.push(self.send_control(to, control, from)),
            Action::StateChanged { from, to, cause } => {
                if from != to {
                    info!(from = %from, to = %to, cause = %cause, "SM state {to}");
                }
                if let Some(m) = &self.options.metrics {
                    m.state_change(from, to, &cause);
                }
                self.publish_election();
                self.update_perf_active();
                match to {
                    State::Standby => {
                        self.options.status.ready("standby: watching the master");
                        self.notify_ready("standby: watching the master");
                    }
                    State::Master if self.master_swept => {}
                    State::Master => self.options.status.unready("master: the first heavy sweep has not finished"),
                    State::Discovering => self.options.status.unready("discovering"),
                    State::NotActive => self.options.status.unready("not active"),
                }
                if to == State::Master && from != State::Master {
                    self.next_sweep = None;
                    self.master_since = Some(tokio::time::Instant::now());
                }
                if to != State::Master {
                    self.master_swept = false;
                }
                // A standby mirrors the master's SA, the first read one
                // interval after it became standby.
                if to != State::Standby {
                    self.mirror.next = None;
                } else if from != State::Standby {
                    self.mirror.next = self.config.sa.mirror_interval().map(|i| self.now() + i);
                }
                self.sa.set_serving(self.sa_serving());
                self.tell_sa_sm_info();
                if self.options.once && matches!(to, State::Standby | State::NotActive) {
                    let master = self.election.master().map(|p| p.to_string()).unwrap_or_default();
                    return Some(Err(RunError::OtherMaster { master }));
                }
            }
            Action::Report(e) if e.is_error() => error!(problem = %e, "election"),
            Action::Report(e) => warn!(problem = %e, "election"),
        }
        None
    }

    /// The master as this SM knows it: itself when master.
    pub(super) fn master(&self) -> Option<(crate::types::Guid, Lid)> {
        match self.election.state() {
            State::Master => {
                let lid = self.last.as_ref().map(|s| s.master_lid).unwrap_or(self.transport.local_port().lid);
                Some((self.transport.local_port().port_guid, lid))
            }
            _ => self.election.master().map(|p| (p.info.guid, p.addr.lid)),
        }
    }

    /// The election as `/status` and the metrics show it.
    pub(super) fn publish_election(&mut self) {
        self.tell_sa_master();
        let master = self.master();
        let priority = self.config.sm.priority;
        self.options.status.set_election(self.election.state(), priority, master.map(|m| m.0), master.map(|m| m.1));
        if let Some(m) = &self.options.metrics {
            m.election(priority, master);
        }
    }

    /// The other SMs discovery read; failures to read one are logged once.
    pub(super) fn peers(&mut self, found: &Discovered) -> Vec<Peer> {
        let mut peers = Vec::new();
        for r in &found.subnet.remote_sms {
            match &r.info {
                Ok(info) => peers.push(Peer { info: *info, addr: PeerAddr { lid: r.lid, path: Some(r.path) } }),
                Err(why) => {
                    if self.logged_remote.insert((r.port_guid, why.clone())) {
                        warn!(port = %r.port_guid, lid = %r.lid, path = %r.path, problem = %why, "port claims IsSM");
                    }
                }
            }
        }
        peers
    }

    /// SubnGet(SMInfo) to the master, over the path discovery found it by.
    pub(super) fn poll(&self, master: Peer) -> SideJob {
        let client = self.client.clone();
        let data = dispatch::sm_info_data(&self.election.own_info());
        Box::pin(async move {
            let answer = match (master.addr.path, master.addr.lid) {
                (Some(path), _) => client.dr_get_with_data(&path, AttributeId::SmInfo, 0, data).await,
                (None, lid) if lid.is_unicast() => client.lid_get(lid, AttributeId::SmInfo, 0).await,
                (None, _) => {
                    return Some(SideDone::Election(Event::PollFailed { why: format!("no route to {master}") }))
                }
            };
            Some(SideDone::Election(match answer.map(|smp| SmInfoRepr::parse_bytes(&smp.data)) {
                Ok(Ok(info)) => Event::PollAnswered { info },
                Ok(Err(e)) => Event::PollFailed { why: format!("unreadable SMInfo: {e}") },
                Err(e) => Event::PollFailed { why: e.to_string() },
            }))
        })
    }

    /// SubnSet(SMInfo) with `control`, carrying `from` (our SMInfo and key).
    pub(super) fn send_control(&self, to: Peer, control: SmControl, from: SmInfoRepr) -> SideJob {
        let client = self.client.clone();
        let data = dispatch::sm_info_data(&from);
        info!(to = %to, control = ?control, "sending SubnSet(SMInfo)");
        Box::pin(async move {
            let answer = match (to.addr.path, to.addr.lid) {
                (Some(path), _) => client.dr_set(&path, AttributeId::SmInfo, control.into(), data).await,
                (None, lid) if lid.is_unicast() => client.lid_set(lid, AttributeId::SmInfo, control.into(), data).await,
                (None, _) => Err(crate::transport::SmpError::Transport(crate::transport::TransportError::Closed)),
            };
            let result = answer
                .map_err(|e| e.to_string())
                .and_then(|smp| SmInfoRepr::parse_bytes(&smp.data).map_err(|e| format!("unreadable SMInfo: {e}")));
            match control {
                SmControl::Handover => Some(SideDone::Election(Event::HandoverSent { to: to.info.guid, result })),
                _ => {
                    if let Err(e) = result {
                        debug!(to = %to, control = ?control, error = %e, "SubnSet(SMInfo) not accepted");
                    }
                    None
                }
            }
        })
    }

    /// PortInfo of our own port: is it still up?
    pub(super) fn check_own_port(&self) -> SideJob {
        let client = self.client.clone();
        Box::pin(async move {
            let r = client.dr_get(&DrPath::local(), AttributeId::PortInfo, 0).await;
            Some(SideDone::Election(match r.map(|smp| PortInfoRepr::parse_data(&smp.data)) {
                Ok(Ok(pi)) if pi.port_state == PortState::Down => {
                    Event::OwnPort { up: false, why: "PortState is Down".into() }
                }
                Ok(Ok(pi)) => Event::OwnPort { up: true, why: format!("PortState {:?}", pi.port_state) },
                Ok(Err(e)) => Event::OwnPort { up: false, why: format!("unreadable PortInfo: {e}") },
                Err(e) => Event::OwnPort { up: false, why: e.to_string() },
            }))
        })
    }

    /// SIGUSR1: the operator asks the master to hand over now.
    pub(super) fn on_operator_handover(&mut self) {
        info!("operator asks for a handover (SIGUSR1)");
        let now = self.now();
        self.election.handle(now, Event::OperatorHandover);
    }
}
