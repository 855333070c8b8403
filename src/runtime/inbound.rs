//! One MAD from the dispatcher: SMInfo Gets and Sets answered, traps
//! acknowledged and handed on, SA MADs passed to the SA task (only from a
//! transport that cannot divert them to it directly), refusals
//! answered and counted; and the names of nodes for those log lines.

use std::time::Duration;

use tracing::{debug, error, info, warn};

use super::dispatch::{self, Inbound};
use super::owner::{Owner, SweepWork};
use super::sa_task;
use crate::election::{Event, Peer, PeerAddr, State};
use crate::mad::header::status as mad_status;
use crate::mad::{Method, SmpAttribute};
use crate::subnet::{Suspect, Trigger};
use crate::transport::{Datagram, Transport};
use crate::types::Lid;

/// What the master does about one trap.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TrapResponse {
    /// React at the port it names.
    React(Trigger, Suspect),
    /// Its issuer LID is nobody's: a light sweep looks for the change.
    Unmatched,
    /// It came from a LID of another node than the issuer it names (a
    /// spoof, or a confused agent): not taken at its word; a light sweep
    /// looks for the change.
    Mismatch,
    /// Sweep the fabric whole.
    Heavy,
    /// Log and count only.
    Nothing,
}

impl std::fmt::Display for TrapResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrapResponse::React(trigger, s) => match s.port {
                Some(p) => write!(f, "react ({trigger}) at {} port {p}", s.guid),
                None => write!(f, "react ({trigger}) at switch {}", s.guid),
            },
            TrapResponse::Unmatched => f.write_str("light sweep: no port the SM knows holds the issuer LID"),
            TrapResponse::Mismatch => f.write_str("light sweep: sent from another node than the issuer it names"),
            TrapResponse::Heavy => f.write_str("heavy sweep"),
            TrapResponse::Nothing => f.write_str("logged only"),
        }
    }
}

/// Trap lines logged one by one per second; the rest are counted.
pub(super) const TRAP_LINES_PER_S: u32 = 10;

/// LID to the node and port that hold it.
pub(super) type LidIndex = std::collections::HashMap<u16, (crate::subnet::NodeId, u8)>;

/// Every LID of `subnet` (each end port's LMC range, each switch's port
/// 0) to its node and port: for log lines, and where a trap came from.
pub(super) fn lid_index(subnet: &crate::subnet::Subnet) -> LidIndex {
    let mut nodes = std::collections::HashMap::new();
    for id in subnet.ids() {
        let n = subnet.node(id);
        let ports = if n.is_switch() { 0..1 } else { 1..n.ports.len() };
        for p in ports {
            let Some(info) = n.ports.get(p).and_then(|slot| slot.info.as_ref()) else { continue };
            if info.lid.0 == 0 {
                continue;
            }
            for l in info.lid.0..info.lid.0.saturating_add(1 << info.lmc.min(7)) {
                nodes.insert(l, (id, p as u8));
            }
        }
    }
    nodes
}

impl<T: Transport + Clone> Owner<T> {
    /// One MAD from the dispatcher.
    pub(super) fn on_mad(&mut self, dgram: Datagram) {
        let now = self.now();
        match dispatch::classify(&dgram) {
            Inbound::SmInfoGet { req, payload } => {
                let key = self.config.sm.sm_key;
                // IBA 14.4.1.1: the key goes to a requester that knows it, or
                // that holds the fabric's M_Key (OpenSM's rule since 3.3.21).
                let authenticated = payload.is_some_and(|p| p.sm_key == key) || req.m_key == self.config.sm.m_key;
                let info = self.election.sm_info(authenticated);
                self.reply(&dgram, dispatch::smp_response(&req, Method::GetResp, 0, dispatch::sm_info_data(&info)));
                if let Some(p) = payload {
                    if p.sm_key == key {
                        // An SM that knows our key polls us: its SA may ask
                        // ours for the state stream.
                        self.tell_sa_peer(p.guid);
                    }
                    let lid = if dgram.addr.lid.is_unicast() { dgram.addr.lid } else { Lid(0) };
                    self.election
                        .handle(now, Event::PeerSeen { peer: Peer { info: p, addr: PeerAddr { lid, path: None } } });
                }
            }
            Inbound::SmInfoSet { req, control, payload } => {
                // Where to answer later (an ACKNOWLEDGE): the election uses
                // the path its own discovery found for a known sender.
                let lid = if dgram.addr.lid.is_unicast() { dgram.addr.lid } else { Lid(0) };
                let addr = PeerAddr { lid, path: None };
                let key_ok = payload.as_ref().is_ok_and(|from| from.sm_key == self.config.sm.sm_key);
                let status = match payload {
                    // Refused (a wrong key, a stranger, a control our state
                    // does not take) is answered with an error status, as
                    // OpenSM answers the controls it refuses.
                    Ok(from) if self.election.control(now, control, from, addr) => 0,
                    Ok(_) => mad_status::INVALID_FIELD,
                    Err(e) => {
                        error!(lid = %dgram.addr.lid, node = %self.node_at_lid(dgram.addr.lid), control = ?control, error = %e, "SubnSet(SMInfo) with an unreadable payload; ignored");
                        mad_status::INVALID_FIELD
                    }
                };
                let info = self.election.sm_info(key_ok);
                self.reply(
                    &dgram,
                    dispatch::smp_response(&req, Method::GetResp, status, dispatch::sm_info_data(&info)),
                );
            }
            Inbound::Trap { req } => {
                // Traps go to the master (IBA 14.2.5.1); a standby leaves
                // them to it, as OpenSM does.
                if self.election.state() == State::Master {
                    self.reply(&dgram, dispatch::smp_response(&req, Method::TrapRepress, 0, req.data));
                    let notice = crate::mad::NoticeRepr::parse_data(&req.data);
                    if let Some(m) = &self.options.metrics {
                        m.trap(notice.as_ref().ok());
                    }
                    match notice {
                        Ok(notice) => {
                            let (since, n) = self.traps_logged;
                            if now.saturating_sub(since) >= Duration::from_secs(1) {
                                if n > TRAP_LINES_PER_S {
                                    info!(
                                        traps = n - TRAP_LINES_PER_S,
                                        "more traps in the last second, not logged one by one"
                                    );
                                }
                                self.traps_logged = (now, 0);
                            }
                            self.traps_logged.1 += 1;
                            let response = self.trap_response(&notice, dgram.addr.lid);
                            if response == TrapResponse::Mismatch && self.traps_logged.1 <= TRAP_LINES_PER_S {
                                warn!(
                                    trap = notice.trap_number,
                                    sender_lid = %dgram.addr.lid,
                                    sender = %self.node_at_lid(dgram.addr.lid),
                                    issuer_lid = %notice.issuer_lid,
                                    issuer = %self.node_at_lid(notice.issuer_lid),
                                    "trap names another node than the one that sent it; not taken at its word, a light sweep looks"
                                );
                            } else if self.traps_logged.1 <= TRAP_LINES_PER_S {
                                info!(
                                    trap = notice.trap_number,
                                    issuer_lid = %notice.issuer_lid,
                                    node = %self.node_at_lid(notice.issuer_lid),
                                    response = %response,
                                    "trap received"
                                );
                            }
                            self.hand_to_sa(sa_task::SaInput::Trap { notice, from: dgram.addr.lid });
                            self.respond_to_trap(response);
                        }
                        Err(e) => {
                            warn!(lid = %dgram.addr.lid, node = %self.node_at_lid(dgram.addr.lid), error = %e, "trap with an unreadable Notice; sweeping");
                            self.election.handle(now, Event::SweepWanted);
                        }
                    }
                } else {
                    debug!(state = %self.election.state(), lid = %dgram.addr.lid, "trap ignored: not master");
                }
            }
            Inbound::Sa => self.hand_to_sa(sa_task::SaInput::Mad(dgram)),
            Inbound::Refused { reply, why } => {
                // Counted by kind, made-up codes folded into one key: a
                // flood of them neither grows the map nor the metric labels.
                let key = why.counted_as();
                let n = self.refused.entry(key).or_default();
                *n += 1;
                if *n == 1 {
                    info!(from = %dgram.addr.lid, refusal = %why, status = format_args!("{:#06x}", why.status()), "request refused");
                }
                if let Some(m) = &self.options.metrics {
                    m.refused(key.class());
                }
                if let Err(e) = self.transport.send(reply) {
                    warn!(error = %e, "could not send a status answer");
                }
            }
            Inbound::Ignored { why } => debug!(from = %dgram.addr.lid, why = %why, "unsolicited MAD ignored"),
        }
    }

    /// What a trap calls for: a reaction at the port it names (link and
    /// port changes), a light sweep (a trap from a LID nobody holds), a
    /// heavy sweep (traps the SM cannot bound), or nothing but the log line
    /// and the count (link errors and key violations change no route).
    /// A trap is taken at its word only from its issuer: `from`, the LID
    /// it came from, is one of the issuer's node's, or no node's the SM
    /// knows (a port that just got its LID).
    fn trap_response(&self, notice: &crate::mad::NoticeRepr, from: Lid) -> TrapResponse {
        if !notice.is_generic {
            return TrapResponse::Heavy;
        }
        let trigger = match notice.trap_number {
            128 => Trigger::LinkStateTrap,
            144 => Trigger::PortChangeTrap,
            // Link integrity, buffer overrun, flow control watchdog; M_Key,
            // P_Key, Q_Key violations and bad traps: counted and logged.
            129..=131 | 256..=259 => return TrapResponse::Nothing,
            _ => return TrapResponse::Heavy,
        };
        let sender = self.port_of_lid(from).map(|(id, _)| id);
        let issuer = self.port_of_lid(notice.issuer_lid).map(|(id, _)| id);
        if sender.is_some() && issuer.is_some() && sender != issuer {
            return TrapResponse::Mismatch;
        }
        match self.suspect_at_lid(notice.issuer_lid) {
            Some(suspect) => TrapResponse::React(trigger, suspect),
            None => TrapResponse::Unmatched,
        }
    }

    fn respond_to_trap(&mut self, response: TrapResponse) {
        match response {
            TrapResponse::React(trigger, suspect) => self.react_to(trigger, vec![suspect]),
            TrapResponse::Unmatched | TrapResponse::Mismatch => {
                if let Some(m) = &self.options.metrics {
                    m.trap_unmatched(if response == TrapResponse::Unmatched {
                        "unknown_lid"
                    } else {
                        "issuer_mismatch"
                    });
                }
                if !self.queue.contains(&SweepWork::Light) {
                    self.queue.push_back(SweepWork::Light);
                }
            }
            TrapResponse::Heavy => self.election.handle(self.now(), Event::SweepWanted),
            TrapResponse::Nothing => {}
        }
    }

    /// Where a trap from `lid` asks the SM to look: the switch whose port
    /// 0 holds it (every port), or the end port that does.
    fn suspect_at_lid(&self, lid: Lid) -> Option<Suspect> {
        let (id, port) = self.port_of_lid(lid)?;
        let node = self.last.as_ref()?.sweep.subnet.node(id);
        let port = (!node.is_switch()).then_some(port);
        Some(Suspect { guid: node.guid(), port, silent: false })
    }

    pub(super) fn reply(&self, to: &Datagram, smp: crate::mad::SmpRepr) {
        if let Err(e) = self.transport.send(Datagram { addr: to.addr, mad: smp.to_bytes().to_vec() }) {
            error!(lid = %to.addr.lid, node = %self.node_at_lid(to.addr.lid), error = %e, "could not answer SMP");
        }
    }

    /// The node behind `lid` as the last heavy sweep saw it (GUID,
    /// description, directed path), for log lines about it.
    pub(super) fn node_at_lid(&self, lid: Lid) -> String {
        let Some(snap) = self.last.as_ref() else {
            return "unknown (no sweep yet)".into();
        };
        match self.port_of_lid(lid).map(|(id, _)| snap.sweep.subnet.node(id)) {
            Some(n) => format!("{} '{}' at path {}", n.guid(), n.description.as_deref().unwrap_or(""), n.path),
            None => format!("unknown at LID {lid}"),
        }
    }

    /// The node and port of the last published sweep that hold `lid`,
    /// through the LID index built once per snapshot.
    fn port_of_lid(&self, lid: Lid) -> Option<(crate::subnet::NodeId, u8)> {
        let snap = self.last.as_ref()?;
        let mut cache = self.lid_names.borrow_mut();
        if cache.as_ref().is_none_or(|(seq, _)| *seq != snap.sequence) {
            *cache = Some((snap.sequence, lid_index(&snap.sweep.subnet)));
        }
        cache.as_ref().expect("just built").1.get(&lid.0).copied()
    }
}
