//! Targeted discovery: what a trap or a light sweep named is read again,
//! and only what a change can have touched, never the whole fabric.
//!
//! The core starts from what the SM knew (the last sweep's subnet) and a
//! list of suspects (switches whose ports changed, end ports that trapped).
//! It reads a round at a time, each round's reads all in flight at once:
//! - a suspect switch: its SwitchInfo and every port's PortInfo, but for
//!   the ports cabled to a live switch (see below); an end port: its
//!   PortInfo;
//! - a port whose link came up where none was known, or went down and
//!   came back (it was ACTIVE, now INIT): NodeInfo through it, to learn who
//!   is at the far end now;
//! - a known switch found at a far end: its SwitchInfo and the far port's
//!   PortInfo (a reset switch, LinearFDBTop 0, or one reporting a port
//!   state change, then has every port read); a known CA: the far port's
//!   PortInfo;
//! - a node the SM does not know found at a far end (a new leaf, a switch
//!   that came back after it was dropped): read as discovery reads a node
//!   (NodeDescription, SwitchInfo and every PortInfo of a switch, the entry
//!   port of a CA), and the ports it has up probed in turn: the new
//!   subtree, and nothing else.
//!
//! A link between two switches is vouched for by either end: a port that
//! goes down, or comes up, sets PortStateChange in the SwitchInfo of the
//! switch at each end. So a switch's port cabled to another switch the SM
//! still reaches is not read when that switch's SwitchInfo reports no
//! change (one SMP that vouches for all of its cables at once); when it
//! reports one, both ends are read. A spine gone from a 648-host fat tree
//! sets PortStateChange on 35 leaves: each has its hosts' ports read and
//! its 17 other uplinks vouched for by the 17 spines' 17 SwitchInfo reads,
//! not 35 × 17 PortInfo reads. A reset switch, or a new one, still has
//! every port read: its cables all came up anew.
//!
//! Paths are taken from the subnet as it stands when a read is sent: a
//! cable found down may have carried the path the SM knew to a node, so
//! after a round that cut or made a link every path is walked again
//! ([`Subnet::refresh_paths`]), and a node no path reaches is not read
//! (it is gone). Suspects are read nearest the SM first, a path length at
//! a time, so what a near change cut is known before the far ones are
//! asked over it; suspects that did not answer the light sweep come after,
//! and a read that went unanswered is asked once more at the end, over the
//! paths the changes left.
//!
//! It ends with the subnet updated (links cut and made, PortInfo as read,
//! unreachable nodes dropped by [`Subnet::reachable`]) and the typed
//! [`ChangeSet`]. It cannot bound the change, and says why, when a known
//! GUID answers as another kind of node, when a node answers a NodeInfo
//! the SM cannot use, when a read it needs goes unanswered twice, or when
//! the node it is asked about is unknown: the SM then sweeps the fabric
//! whole.

use std::collections::{HashMap, HashSet, VecDeque};

use tracing::debug;

use super::core::{SmpCore, SmpRequest};
use super::discovery::link_is_up;
use crate::exchange::SmpError;
use crate::mad::{
    AttributeId, CapabilityMask, DrPath, NodeDescriptionRepr, NodeInfoRepr, NodeType, PhysState, PortInfoRepr,
    PortState, SmpAttribute, SwitchInfoRepr,
};
use crate::subnet::{Change, ChangeKind, ChangeSet, NodeId, Subnet, Suspect};
use crate::sweep::core::SmpDriver;
use crate::types::{Guid, MAX_PORTS};

/// Reads what `suspects` name in `known` and what their changes touch;
/// returns the subnet as it stands now and what changed.
pub async fn react<D: SmpDriver>(driver: &D, known: &Subnet, suspects: &[Suspect]) -> (Subnet, ChangeSet) {
    let mut core = ReactionCore::new(known.clone(), suspects);
    driver.drive(&mut core).await;
    core.finish()
}

/// One read of a reaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Read {
    SwitchInfo {
        node: NodeId,
    },
    /// SwitchInfo of a switch at the far end of a link found down, whose
    /// own trap may have been lost with the link (it may be down whole).
    Verify {
        node: NodeId,
    },
    NodeDescription {
        node: NodeId,
    },
    PortInfo {
        node: NodeId,
        port: u8,
    },
    /// NodeInfo through `node`'s `port`.
    Probe {
        node: NodeId,
        port: u8,
    },
    /// PortInfo of a port whose far end, a known node, answered elsewhere
    /// though this link was not seen down: is it down (a cable moved), or
    /// does something still answer behind it (two nodes with one GUID)?
    Recheck {
        node: NodeId,
        port: u8,
    },
}

impl Read {
    /// The node it asks.
    fn node(self) -> NodeId {
        match self {
            Read::SwitchInfo { node }
            | Read::Verify { node }
            | Read::NodeDescription { node }
            | Read::PortInfo { node, .. }
            | Read::Probe { node, .. }
            | Read::Recheck { node, .. } => node,
        }
    }
}

/// The reaction as an I/O-free core ([`SmpCore`]), a round at a time.
pub struct ReactionCore {
    subnet: Subnet,
    /// This round's reads not yet sent.
    round: VecDeque<Read>,
    /// The next round's.
    next: Vec<Read>,
    /// Suspects not read yet (a port of an end node, or every port), read
    /// nearest the SM first: a change near the SM may have cut the path the
    /// SM knew to the farther ones, and reading them over it would only
    /// time out.
    waiting: Vec<(NodeId, Option<u8>)>,
    /// Suspects that did not answer the light sweep: their SwitchInfo, once
    /// the others are read.
    silent: Vec<NodeId>,
    /// Reads that went unanswered, asked once more when nothing else is
    /// left, over the paths the changes then leave (a node no path reaches
    /// is gone, not lost).
    retry: Vec<(Read, DrPath, String)>,
    retried: HashSet<Read>,
    /// Switches that answered nothing twice: taken as gone.
    gone: HashSet<NodeId>,
    /// A link was cut or made since paths were last walked.
    links_changed: bool,
    /// Nodes no path reaches now: not read.
    unreachable: HashSet<NodeId>,
    outstanding: usize,
    /// Nodes whose ports are read (or being read) already.
    whole: HashSet<NodeId>,
    /// PortStateChange of the switches whose SwitchInfo this reaction read.
    changed: HashMap<NodeId, bool>,
    /// Ports cabled to a switch whose SwitchInfo is not read yet: read if
    /// it reports a change (or cannot vouch, gone or out of reach), not
    /// read if it reports none.
    vouching: HashMap<NodeId, Vec<(NodeId, u8)>>,
    /// Ports read or being read, and far ends probed.
    asked: HashSet<Read>,
    /// Links found down in this reaction: each end to the other.
    cut: HashMap<(NodeId, u8), (NodeId, u8)>,
    /// Switches a cable was found down to in this reaction: they may be
    /// gone whole, and a read sent to one over a cable that is down too
    /// would only time out (four 200 ms tries, the whole reaction waiting).
    doubted: HashSet<NodeId>,
    /// Ports read up in this reaction, or that could not be read: nothing
    /// waits on them.
    up: HashSet<(NodeId, u8)>,
    /// Reads to a doubted switch waiting for the last cable of its path,
    /// by the port on the near side: sent when that port reads up, sent
    /// over another path when it reads down.
    parked: HashMap<(NodeId, u8), Vec<Read>>,
    /// Links a probe made in this reaction: the far port to the port it
    /// was found behind.
    made: HashMap<(NodeId, u8), (NodeId, u8)>,
    changes: ChangeSet,
}

impl ReactionCore {
    pub fn new(subnet: Subnet, suspects: &[Suspect]) -> Self {
        let mut core = ReactionCore {
            subnet,
            round: VecDeque::new(),
            next: Vec::new(),
            waiting: Vec::new(),
            silent: Vec::new(),
            retry: Vec::new(),
            retried: HashSet::new(),
            gone: HashSet::new(),
            links_changed: false,
            unreachable: HashSet::new(),
            outstanding: 0,
            whole: HashSet::new(),
            changed: HashMap::new(),
            vouching: HashMap::new(),
            asked: HashSet::new(),
            cut: HashMap::new(),
            doubted: HashSet::new(),
            up: HashSet::new(),
            parked: HashMap::new(),
            made: HashMap::new(),
            changes: ChangeSet::default(),
        };
        for s in suspects {
            let Some(&id) = core.subnet.by_guid.get(&s.guid) else {
                core.unbounded(format!("node {} is not in the subnet the SM knows", s.guid));
                continue;
            };
            match s.port {
                _ if s.silent => core.silent.push(id),
                Some(port) if !core.subnet.node(id).is_switch() => core.waiting.push((id, Some(port))),
                _ => core.waiting.push((id, None)),
            }
        }
        core.start_round();
        core
    }

    /// When a round is over, the next one: the reads the last one called
    /// for; else the waiting suspects nearest the SM; else the silent
    /// ones' SwitchInfo (one that reports a port state change then has
    /// every port read); else the reads that failed, once more. Paths are
    /// walked again first when links were cut or made.
    fn start_round(&mut self) {
        if self.links_changed {
            self.links_changed = false;
            self.unreachable = self.subnet.refresh_paths().into_iter().collect();
        }
        if self.next.is_empty() {
            let (lost, left): (Vec<_>, Vec<_>) = self.waiting.iter().partition(|(id, _)| self.unreachable.contains(id));
            self.waiting = left;
            // Out of reach: what they were to vouch for is read.
            for (id, _) in lost {
                self.vouch_failed(id);
            }
            if let Some(depth) = self.waiting.iter().map(|&(id, _)| self.subnet.node(id).path.len()).min() {
                let (now, later): (Vec<_>, Vec<_>) =
                    self.waiting.iter().partition(|&&(id, _)| self.subnet.node(id).path.len() == depth);
                self.waiting = later;
                for (id, port) in now {
                    match port {
                        Some(port) => self.read_port(id, port),
                        None => self.read_whole(id),
                    }
                }
            } else if !self.silent.is_empty() {
                for id in std::mem::take(&mut self.silent) {
                    self.queue(Read::SwitchInfo { node: id });
                }
            } else {
                for (read, path, error) in std::mem::take(&mut self.retry) {
                    self.retried.insert(read);
                    // Over the same path it would fail the same way (the
                    // transport spent its retries already): that is the
                    // second failure, without the wait.
                    if self.current_path(read) == Some(path) {
                        self.failed_again(read, path, &error);
                    } else {
                        self.next.push(read);
                    }
                }
                if self.links_changed {
                    self.links_changed = false;
                    self.unreachable = self.subnet.refresh_paths().into_iter().collect();
                }
            }
        }
        self.round.extend(self.next.drain(..));
    }

    /// No read is called for, no suspect waits, none is to be retried.
    fn nothing_left(&self) -> bool {
        self.next.is_empty() && self.waiting.is_empty() && self.silent.is_empty() && self.retry.is_empty()
    }

    /// The subnet as it stands now (unreachable nodes dropped) and the
    /// change set.
    pub fn finish(self) -> (Subnet, ChangeSet) {
        let ReactionCore { subnet, mut changes, .. } = self;
        if changes.unbounded.is_some() {
            return (subnet, changes);
        }
        let (now, gone) = subnet.reachable();
        for guid in gone {
            let node = subnet.by_guid(guid).expect("gone nodes were known");
            changes.changes.push(Change {
                kind: ChangeKind::NodeGone,
                guid,
                name: node.name(),
                port: 0,
                path: node.path,
                peer: None,
                was: None,
            });
        }
        (now, changes)
    }

    fn unbounded(&mut self, why: String) {
        self.changes.unbounded.get_or_insert(why);
    }

    fn queue(&mut self, read: Read) {
        if self.asked.insert(read) {
            self.next.push(read);
        }
    }

    /// A switch's SwitchInfo and its ports (those cabled to another switch
    /// as [`Self::read_changed_ports`] says); a CA's cabled ports.
    fn read_whole(&mut self, id: NodeId) {
        if self.subnet.node(id).is_switch() {
            if !self.changed.contains_key(&id) {
                self.queue(Read::SwitchInfo { node: id });
            }
            // Port 0 too: a trap 144 (an SM started on the switch) names it.
            self.read_port(id, 0);
            return self.read_changed_ports(id);
        }
        if !self.whole.insert(id) {
            return;
        }
        for port in 1..self.subnet.node(id).ports.len() as u8 {
            if self.subnet.node(id).port_paths.get(port as usize).copied().flatten().is_some() {
                self.read_port(id, port);
            }
        }
    }

    /// Every port of a switch whose cables all came up anew (it was reset,
    /// or is new to the SM).
    fn read_every_port(&mut self, id: NodeId) {
        self.whole.insert(id);
        for port in 0..self.subnet.node(id).ports.len() as u8 {
            self.read_port(id, port);
        }
    }

    /// A switch that reports a port state change: every port not cabled
    /// to another switch the SM reaches is read; one cabled to such a
    /// switch is read only if that switch reports a change too (its
    /// SwitchInfo is read once for all its cables). Not port 0: it has no
    /// cable, and no change of it sets PortStateChange.
    fn read_changed_ports(&mut self, id: NodeId) {
        if !self.whole.insert(id) {
            return;
        }
        for port in 1..self.subnet.node(id).ports.len() as u8 {
            let far = self.subnet.node(id).ports[port as usize].remote;
            let Some((far, _)) = far.filter(|&(far, _)| self.can_vouch_for(far, id, port)) else {
                self.read_port(id, port);
                continue;
            };
            match self.changed.get(&far) {
                Some(true) => self.read_port(id, port),
                Some(false) => self.changes.vouched += 1,
                None => {
                    self.vouching.entry(far).or_default().push((id, port));
                    // A suspect still waiting is read in its own round,
                    // once the nearer ones have shown which cables are
                    // down: read now, over one of them, it would time out.
                    let waits = self.waiting.iter().any(|&(n, _)| n == far);
                    if !waits && !self.asked.contains(&Read::SwitchInfo { node: far }) {
                        self.queue(Read::Verify { node: far });
                    }
                }
            }
        }
    }

    /// Whether `far`'s SwitchInfo can vouch for the cable to `id`'s `port`:
    /// another switch the SM reaches, and not through that very cable
    /// (were it down, the read would only time out).
    fn can_vouch_for(&self, far: NodeId, id: NodeId, port: u8) -> bool {
        let (near, far_node) = (self.subnet.node(id), self.subnet.node(far));
        far != id
            && far_node.is_switch()
            && !self.gone.contains(&far)
            && !self.unreachable.contains(&far)
            && near.path.extend(port).ok() != Some(far_node.path)
    }

    /// `id` cannot vouch for the ports waiting on it (gone, or out of
    /// reach): they are read.
    fn vouch_failed(&mut self, id: NodeId) {
        for (node, port) in self.vouching.remove(&id).unwrap_or_default() {
            self.read_port(node, port);
        }
    }

    fn read_port(&mut self, id: NodeId, port: u8) {
        self.queue(Read::PortInfo { node: id, port });
    }

    /// Where `read` goes now; `None` for a node no path reaches.
    fn path_of(&mut self, read: Read) -> Option<DrPath> {
        let node = read.node();
        if self.unreachable.contains(&node) {
            debug!(node = %self.subnet.node(node).guid(), ?read, "not read: no path reaches it now");
            self.vouch_failed(node);
            return None;
        }
        let n = self.subnet.node(node);
        match read {
            Read::SwitchInfo { .. } | Read::Verify { .. } | Read::NodeDescription { .. } => Some(n.path),
            Read::PortInfo { port, .. } | Read::Recheck { port, .. } => Some(n.path_for_port(port)),
            Read::Probe { port, .. } => match n.path.extend(port) {
                Ok(p) => Some(p),
                Err(e) => {
                    let why = format!("cannot reach past {} port {port} at {}: {e}", n.guid(), n.path);
                    self.unbounded(why);
                    None
                }
            },
        }
    }

    fn change(&mut self, kind: ChangeKind, id: NodeId, port: u8, peer: Option<(NodeId, u8)>) {
        self.change_from(kind, id, port, peer, None);
    }

    fn change_from(
        &mut self,
        kind: ChangeKind,
        id: NodeId,
        port: u8,
        peer: Option<(NodeId, u8)>,
        was: Option<(NodeId, u8)>,
    ) {
        let node = self.subnet.node(id);
        let guid_port = |(n, p): (NodeId, u8)| (self.subnet.node(n).guid(), p);
        let (peer, was) = (peer.map(guid_port), was.map(guid_port));
        let change =
            Change { kind, guid: node.guid(), name: node.name(), port, path: node.path_for_port(port), peer, was };
        if !self.changes.changes.contains(&change) {
            self.changes.changes.push(change);
        }
    }

    fn on_switch_info(&mut self, id: NodeId, si: SwitchInfoRepr) {
        let node = self.subnet.node_mut(id);
        let was = node.switch_info.replace(si);
        let reset = si.linear_fdb_top == 0 && was.is_some_and(|w| w.linear_fdb_top != 0);
        self.changed.insert(id, si.port_state_change || reset);
        let waiting = self.vouching.remove(&id).unwrap_or_default();
        if si.port_state_change || reset {
            for (node, port) in waiting {
                self.read_port(node, port);
            }
        } else {
            self.changes.vouched += waiting.len();
        }
        if reset {
            self.change(ChangeKind::NodeReset, id, 0, None);
            // Its ports came up anew with it: every one is read.
            self.read_every_port(id);
        } else if si.port_state_change {
            self.read_changed_ports(id);
        }
    }

    fn on_port_info(&mut self, id: NodeId, port: u8, pi: PortInfoRepr) {
        let Some(slot) = self.subnet.node_mut(id).ports.get_mut(port as usize) else { return };
        let was = slot.info.replace(pi);
        let remote = slot.remote;
        let is_sm = |p: &PortInfoRepr| p.capability_mask & CapabilityMask::IS_SM != 0;
        if was.is_some_and(|w| is_sm(&w) != is_sm(&pi)) {
            let n = self.subnet.node(id);
            let why = format!(
                "{} '{}' port {port} at {}: IsSM {} (an SM started or stopped there; the election reads every SM port's SMInfo in a heavy sweep)",
                n.guid(),
                n.name(),
                n.path_for_port(port),
                if is_sm(&pi) { "set" } else { "cleared" }
            );
            return self.unbounded(why);
        }
        if port == 0 {
            return;
        }
        let up = link_is_up(&pi);
        if up {
            self.up.insert((id, port));
        }
        let was_active = was.is_some_and(|w| matches!(w.port_state, PortState::Armed | PortState::Active));
        match (remote, up) {
            (Some(far), false) => {
                self.subnet.unlink((id, port));
                self.cut.insert((id, port), far);
                self.cut.insert(far, (id, port));
                self.links_changed = true;
                self.mark_down(far);
                self.change(ChangeKind::LinkDown, id, port, Some(far));
                if self.subnet.node(far.0).is_switch() {
                    self.doubted.insert(far.0);
                }
                // A far switch not among the suspects may have lost its own
                // trap with this link (it was its route to the SM): is it
                // there, and did more of its ports change? And this one, if
                // only this port of it was read: its trap may have gone the
                // same way.
                self.verify_far(far.0);
                self.verify_far(id);
            }
            // Down and back: who is there now, and was it reset? (Asked
            // from the switch side: a CA forwards nothing.)
            (Some(_), true) if was_active && pi.port_state == PortState::Init => {
                self.read_reset_sign(id);
                if self.forwards(id, port) {
                    self.probe(id, port)
                }
            }
            (Some(_), true) => {
                if was.is_some_and(|w| !same_port(&w, &pi)) {
                    self.change(ChangeKind::PortChanged, id, port, None);
                }
            }
            (None, true) if self.forwards(id, port) => self.probe(id, port),
            // A CA port that came up is seen from the switch it faces.
            (None, _) => {}
        }
    }

    /// A switch with a cable down and back may have been reset: its port
    /// 0 says, with the LID and state a reset clears (a reset that leaves
    /// LinearFDBTop as it was shows nowhere else: ibsim's `Clear`).
    fn read_reset_sign(&mut self, id: NodeId) {
        if self.subnet.node(id).is_switch() {
            self.read_port(id, 0);
        }
    }

    /// SMPs go on past `id` through `port`: a switch, or the SM's port.
    fn forwards(&self, id: NodeId, port: u8) -> bool {
        self.subnet.node(id).is_switch() || self.subnet.sm_port == Some((id, port))
    }

    fn probe(&mut self, id: NodeId, port: u8) {
        self.queue(Read::Probe { node: id, port });
    }

    /// NodeInfo through `id`'s `port`: a known node is linked there and its
    /// far port read; an unknown GUID cannot be bounded.
    fn on_probe(&mut self, id: NodeId, port: u8, path: DrPath, info: NodeInfoRepr) {
        let Some(&far) = self.subnet.by_guid.get(&info.node_guid) else {
            return self.on_new_node(id, port, path, info);
        };
        let far_port = info.local_port_num;
        if self.subnet.node(far).info.node_type != info.node_type
            || self.subnet.node(far).ports.len() != info.num_ports as usize + 1
            || far_port as usize >= self.subnet.node(far).ports.len()
        {
            self.unbounded(format!("node {} at {path} answers unlike the node the SM knows", info.node_guid));
            return;
        }
        let here = (id, port);
        let there = (far, far_port);
        if let Some(&first) = self.made.get(&there).filter(|&&at| at != here) {
            return self.answers_twice(&info, first, here);
        }
        let before = self.subnet.node(id).ports[port as usize].remote;
        if before != Some(there) {
            // Whoever was behind this port before lost its link.
            if let Some(prev) = self.subnet.unlink(here) {
                self.mark_down(prev);
                self.cut.insert(prev, here);
                self.change(ChangeKind::LinkDown, prev.0, prev.1, Some(here));
            }
            // Where the far port was cabled, now or until this reaction
            // found that link down: a cable moved, and both old ends lost
            // theirs.
            let old = match self.subnet.unlink(there) {
                Some(old) => {
                    self.mark_down(old);
                    self.change(ChangeKind::LinkDown, old.0, old.1, Some(there));
                    // Not seen down: it must be, or two nodes answer with
                    // one GUID (a probe that finds it there again).
                    self.queue(Read::Recheck { node: old.0, port: old.1 });
                    Some(old)
                }
                None => self.cut.get(&there).copied(),
            };
            self.subnet.link(here, there);
            self.links_changed = true;
            match old.filter(|&o| o != here) {
                Some(old) => self.change_from(ChangeKind::Moved, id, port, Some(there), Some(old)),
                None => self.change(ChangeKind::LinkUp, id, port, Some(there)),
            }
        } else {
            self.change(ChangeKind::LinkRetrained, id, port, Some(there));
        }
        self.made.insert(there, here);
        let far_node = self.subnet.node_mut(far);
        if far_node.is_switch() {
            self.queue(Read::SwitchInfo { node: far });
            self.queue(Read::PortInfo { node: far, port: far_port });
            self.read_reset_sign(far);
        } else {
            // The CA's port is programmed over the cable it answered on.
            far_node.port_paths[far_port as usize] = Some(path);
            far_node.port_guids[far_port as usize] = Some(info.port_guid);
            self.queue(Read::PortInfo { node: far, port: far_port });
        }
    }

    /// A switch at the far end of a link found down, not among the
    /// suspects: its SwitchInfo, and every port if it reports a change.
    fn verify_far(&mut self, far: NodeId) {
        if self.subnet.node(far).is_switch()
            && !self.gone.contains(&far)
            && !self.whole.contains(&far)
            && !self.waiting.iter().any(|&(n, _)| n == far)
        {
            self.queue(Read::Verify { node: far });
        }
    }

    /// Parks `read` when its path enters a doubted switch (the one it
    /// reads, or one it passes) over a last cable not yet read up; that
    /// port is read first (the nearest switch answers at once, up or
    /// down). A spine gone from a fat tree is so found gone one leaf's
    /// port at a time, a round-trip each, instead of by a read that times
    /// out; so are the ports of a switch unlinked whole, and the switches
    /// the SM reached through it.
    fn park(&mut self, read: Read) -> bool {
        let Some(x) = self.first_doubted_on(read) else { return false };
        if self.links_changed {
            // Its path may cross a cable just found down: next round.
            self.next.push(read);
            return true;
        }
        let Some(hop) = self.last_hop(x).filter(|hop| !self.up.contains(hop)) else { return false };
        let gate = Read::PortInfo { node: hop.0, port: hop.1 };
        if gate == read {
            return false;
        }
        if self.asked.insert(gate) {
            self.round.push_front(gate);
        }
        self.parked.entry(hop).or_default().push(read);
        true
    }

    /// The first doubted switch `read`'s path enters, the node read
    /// included (a probe's far end too), if any.
    fn first_doubted_on(&self, read: Read) -> Option<NodeId> {
        if self.doubted.is_empty() {
            return None;
        }
        let path = self.current_path(read)?;
        let (mut at, _) = self.subnet.sm_port?;
        for &port in path.ports() {
            let (next, _) = self.subnet.node(at).ports.get(port as usize)?.remote?;
            if self.doubted.contains(&next) {
                return Some(next);
            }
            at = next;
        }
        None
    }

    /// What waited on `hop` goes in the next round, over the path it then
    /// has.
    fn unpark(&mut self, hop: (NodeId, u8)) {
        if let Some(reads) = self.parked.remove(&hop) {
            self.next.extend(reads);
        }
    }

    /// The switch port the SM's path to `x` last leaves by, if any.
    fn last_hop(&self, x: NodeId) -> Option<(NodeId, u8)> {
        let path = self.subnet.node(x).path;
        self.subnet.node(x).ports.iter().filter_map(|slot| slot.remote).find(|&(near, port)| {
            let n = self.subnet.node(near);
            n.is_switch() && n.path.extend(port).ok() == Some(path)
        })
    }

    /// One port cannot be cabled at two places at once.
    fn answers_twice(&mut self, info: &NodeInfoRepr, first: (NodeId, u8), second: (NodeId, u8)) {
        let name = |(n, p): (NodeId, u8)| {
            let node = self.subnet.node(n);
            format!("{} '{}' port {p} at {}", node.guid(), node.name(), node.path_for_port(p))
        };
        let why = format!(
            "node {} port {} answers behind {} and behind {}: two nodes with one GUID, or one answering with another's",
            info.node_guid,
            info.local_port_num,
            name(first),
            name(second)
        );
        self.unbounded(why);
    }

    /// The old end of a cable whose far node answered elsewhere: down, as
    /// a moved cable leaves it; up, it is probed (from a switch), and a
    /// node answering there with the same GUID cannot be bounded.
    fn on_recheck(&mut self, id: NodeId, port: u8, pi: PortInfoRepr) {
        let up = link_is_up(&pi);
        if let Some(slot) = self.subnet.node_mut(id).ports.get_mut(port as usize) {
            slot.info = Some(pi);
        }
        if !up {
            return;
        }
        if self.forwards(id, port) {
            self.probe(id, port);
        } else {
            let n = self.subnet.node(id);
            let why = format!(
                "{} '{}' port {port} at {}: its link is up, though the node cabled to it answered elsewhere",
                n.guid(),
                n.name(),
                n.path_for_port(port)
            );
            self.unbounded(why);
        }
    }

    /// `id` answers nothing: every cable to it is taken as down.
    fn declare_gone(&mut self, id: NodeId, path: DrPath, e: &str) {
        self.gone.insert(id);
        let node = self.subnet.node(id);
        debug!(node = %node.guid(), name = %node.name(), %path, error = %e, "switch does not answer: taken as gone");
        for port in 1..self.subnet.node(id).ports.len() as u8 {
            if let Some(far) = self.subnet.unlink((id, port)) {
                self.cut.insert((id, port), far);
                self.cut.insert(far, (id, port));
                self.mark_down(far);
                // Its neighbours' traps may have been routed through it
                // to the SM, and lost: until their PortStateChange is
                // cleared they send no other.
                self.verify_far(far.0);
            }
        }
        self.waiting.retain(|&(n, _)| n != id);
        self.links_changed = true;
        self.vouch_failed(id);
    }

    /// The far end of a cable found down went down with it.
    fn mark_down(&mut self, (node, port): (NodeId, u8)) {
        if let Some(info) = self.subnet.node_mut(node).ports.get_mut(port as usize).and_then(|p| p.info.as_mut()) {
            info.port_state = PortState::Down;
            info.port_physical_state = PhysState::Polling;
        }
    }

    /// A node the subnet does not hold, behind `id`'s `port`: read as a
    /// discovery reads it, and linked where it was found.
    fn on_new_node(&mut self, id: NodeId, port: u8, path: DrPath, info: NodeInfoRepr) {
        let switch = info.node_type == NodeType::Switch;
        if info.num_ports == 0
            || info.num_ports > MAX_PORTS
            || (!switch && (info.local_port_num == 0 || info.local_port_num > info.num_ports))
        {
            let here = self.subnet.node(id);
            let why = format!(
                "node {} at {path} (behind {} '{}' port {port}) answers a NodeInfo the SM cannot use: {} ports, entered at port {}",
                info.node_guid,
                here.guid(),
                here.name(),
                info.num_ports,
                info.local_port_num
            );
            return self.unbounded(why);
        }
        self.subnet.unlink((id, port));
        let (new, _) = self.subnet.insert(info, path);
        self.subnet.link((id, port), (new, info.local_port_num));
        self.links_changed = true;
        self.change(ChangeKind::NodeNew, new, info.local_port_num, Some((id, port)));
        self.queue(Read::NodeDescription { node: new });
        if switch {
            // Every port: the SM knows none of them yet.
            self.queue(Read::SwitchInfo { node: new });
            self.read_every_port(new);
        } else {
            self.read_port(new, info.local_port_num);
        }
    }

    fn failed(&mut self, read: Read, path: DrPath, e: &SmpError) {
        // A last hop that cannot be read: what waited on it goes as it
        // would have.
        if let Read::PortInfo { node, port } = read {
            self.up.insert((node, port));
            self.unpark((node, port));
        }
        // The ports it was to vouch for are read now: one of them may be
        // the cut its path crossed.
        if matches!(read, Read::SwitchInfo { .. } | Read::Verify { .. }) {
            self.vouch_failed(read.node());
        }
        // Asked again once everything else is read: the path it went by
        // may cross a change not yet known.
        if !self.retried.contains(&read) {
            self.retry.push((read, path, e.to_string()));
            return;
        }
        self.failed_again(read, path, &e.to_string());
    }

    /// The path `read` would take now, without side effects; `None` for a
    /// node no path reaches (or a probe past the last hop).
    fn current_path(&self, read: Read) -> Option<DrPath> {
        if self.unreachable.contains(&read.node()) {
            return None;
        }
        let n = self.subnet.node(read.node());
        match read {
            Read::PortInfo { port, .. } | Read::Recheck { port, .. } => Some(n.path_for_port(port)),
            Read::Probe { port, .. } => n.path.extend(port).ok(),
            _ => Some(n.path),
        }
    }

    /// A read unanswered twice.
    fn failed_again(&mut self, read: Read, path: DrPath, e: &str) {
        // A switch that still does not answer over the paths the changes
        // left is gone: routing around it is safe, and should it still be
        // there its neighbours' PortStateChange brings it back.
        let node = read.node();
        if self.gone.contains(&node) {
            return;
        }
        if self.subnet.node(node).is_switch() && !matches!(read, Read::Probe { .. }) {
            return self.declare_gone(node, path, e);
        }
        let (node, what) = match read {
            Read::SwitchInfo { node } | Read::Verify { node } => (node, "SwitchInfo".to_string()),
            Read::NodeDescription { node } => (node, "NodeDescription".to_string()),
            Read::PortInfo { node, port } | Read::Recheck { node, port } => (node, format!("PortInfo of port {port}")),
            Read::Probe { node, port } => (node, format!("NodeInfo through port {port}")),
        };
        let n = self.subnet.node(node);
        self.unbounded(format!("{} '{}' at {path}: {what} unanswered: {e}", n.guid(), n.name()));
    }
}

/// The same PortInfo in what the SM manages or routes by (its state and
/// counters aside).
fn same_port(a: &PortInfoRepr, b: &PortInfoRepr) -> bool {
    a.lid == b.lid
        && a.lmc == b.lmc
        && a.capability_mask == b.capability_mask
        && a.link_width_active == b.link_width_active
        && a.link_speed_active == b.link_speed_active
        && a.mtu_cap == b.mtu_cap
        && a.vl_cap == b.vl_cap
}

impl SmpCore for ReactionCore {
    type Token = (Read, DrPath);

    fn poll_request(&mut self) -> Option<(Self::Token, SmpRequest)> {
        let (read, path) = loop {
            // Reads put off to the next round (parked, or called for by a
            // read not sent) start it when nothing else is in flight.
            if self.round.is_empty() && self.outstanding == 0 && self.changes.unbounded.is_none() {
                self.start_round();
                // A round can come up empty (its suspects read already, as
                // a far end or a vouching switch) with others still
                // waiting: each start takes some of them, so this ends.
                if self.round.is_empty() && !self.nothing_left() {
                    continue;
                }
            }
            let read = self.round.pop_front()?;
            if self.park(read) {
                continue;
            }
            if let Some(path) = self.path_of(read) {
                break (read, path);
            }
        };
        self.outstanding += 1;
        let smp = match read {
            Read::SwitchInfo { .. } | Read::Verify { .. } => SmpRequest::get(path, AttributeId::SwitchInfo, 0),
            Read::NodeDescription { .. } => SmpRequest::get(path, AttributeId::NodeDescription, 0),
            Read::PortInfo { port, .. } | Read::Recheck { port, .. } => {
                SmpRequest::get(path, AttributeId::PortInfo, port as u32)
            }
            Read::Probe { .. } => SmpRequest::get(path, AttributeId::NodeInfo, 0),
        };
        Some(((read, path), smp))
    }

    fn handle_answer(&mut self, (read, path): Self::Token, answer: Result<[u8; 64], SmpError>) {
        self.outstanding -= 1;
        self.changes.reads += 1;
        let data = match answer {
            Ok(d) => d,
            Err(e) => return self.failed(read, path, &e),
        };
        let parsed = match read {
            Read::SwitchInfo { node } | Read::Verify { node } => {
                SwitchInfoRepr::parse_data(&data).map(|si| self.on_switch_info(node, si))
            }
            Read::NodeDescription { node } => NodeDescriptionRepr::parse_data(&data).map(|nd| {
                self.subnet.node_mut(node).description = Some(nd.text);
            }),
            Read::PortInfo { node, port } => PortInfoRepr::parse_data(&data).map(|pi| {
                self.on_port_info(node, port, pi);
                self.unpark((node, port));
            }),
            Read::Probe { node, port } => NodeInfoRepr::parse_data(&data).map(|ni| self.on_probe(node, port, path, ni)),
            Read::Recheck { node, port } => PortInfoRepr::parse_data(&data).map(|pi| self.on_recheck(node, port, pi)),
        };
        if let Err(e) = parsed {
            let n = self.subnet.node(read.node());
            let why = format!("{} '{}' at {path}: unreadable answer: {e}", n.guid(), n.name());
            self.unbounded(why);
        }
    }

    fn stalled(&mut self) {
        self.unbounded("the reaction stalled with reads left (a bug): the fabric is swept whole instead".into());
    }

    fn is_done(&self) -> bool {
        self.outstanding == 0 && self.round.is_empty() && (self.nothing_left() || self.changes.unbounded.is_some())
    }
}

/// The suspects a light sweep makes: the switches that report a port
/// state change, and those that did not answer (`silent`), each once, in
/// GUID order.
pub fn switch_suspects(
    changed: impl IntoIterator<Item = Guid>,
    silent: impl IntoIterator<Item = Guid>,
) -> Vec<Suspect> {
    let mut out: Vec<Suspect> = changed
        .into_iter()
        .map(|guid| Suspect { guid, port: None, silent: false })
        .chain(silent.into_iter().map(|guid| Suspect { guid, port: None, silent: true }))
        .collect();
    out.sort();
    out.dedup_by_key(|s| s.guid);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::txn::TxnConfig;
    use crate::sim::{drive_core, FabricBuilder, SharedFabric, SimDevice};
    use crate::sweep::discovery::DiscoveryCore;
    use crate::topology::{PortRef, Topology};

    const SPEC: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

    fn setup() -> (Topology, SharedFabric, SimDevice, Subnet) {
        let topo = Topology::from_spec_or_file(SPEC).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(2).build_shared().unwrap();
        let mut dev = SimDevice::attach(&fabric, topo.hosts().next().unwrap(), 1).unwrap();
        let mut core = DiscoveryCore::new(0, None);
        drive_core(&mut dev, &mut core, TxnConfig::default(), 0, 1_000_000).unwrap();
        let subnet = core.finish();
        assert!(subnet.problems.is_empty(), "{:?}", subnet.problems);
        // As the SM's programming leaves them: a switch's own change since
        // then is what it reports.
        fabric.lock().unwrap().clear_port_state_changes();
        (topo, fabric, dev, subnet)
    }

    fn react_on(dev: &mut SimDevice, known: &Subnet, suspects: &[Suspect]) -> (Subnet, ChangeSet) {
        let mut core = ReactionCore::new(known.clone(), suspects);
        drive_core(dev, &mut core, TxnConfig::default(), 0, 1_000_000).unwrap();
        core.finish()
    }

    fn switch(subnet: &Subnet, name: &str) -> Guid {
        subnet.nodes.iter().find(|n| n.description.as_deref() == Some(name)).unwrap().guid()
    }

    #[test]
    fn nothing_changed_is_an_empty_change_set() {
        let (_, _, mut dev, known) = setup();
        let suspects = switch_suspects([switch(&known, "leaf1")], []);
        let (now, changes) = react_on(&mut dev, &known, &suspects);
        assert_eq!((changes.changes.len(), changes.unbounded.clone()), (0, None), "{changes:?}");
        assert_eq!(
            changes.reads,
            1 + 7 + 2,
            "SwitchInfo, ports 0-4 and 7-8, and the SwitchInfo of the two spines its ports 5-6 are cabled to"
        );
        assert_eq!(changes.vouched, 2, "ports 5-6: {changes:?}");
        assert_eq!(now.nodes.len(), known.nodes.len());
    }

    #[test]
    fn an_unknown_suspect_cannot_be_bounded_and_reads_nothing() {
        let (_, _, mut dev, known) = setup();
        let stranger = Guid(0xdead_beef);
        let (_, changes) = react_on(&mut dev, &known, &[Suspect { guid: stranger, port: None, silent: false }]);
        let why = changes.unbounded.expect("unbounded");
        assert!(why.contains("0x00000000deadbeef") && why.contains("not in the subnet"), "{why}");
        assert_eq!(changes.reads, 0);
    }

    #[test]
    fn a_port_that_becomes_an_sm_calls_for_a_heavy_sweep() {
        let (topo, fabric, mut dev, known) = setup();
        let host = topo.hosts().nth(5).unwrap();
        fabric.lock().unwrap().set_capability(PortRef { node: host, port: 1 }, CapabilityMask::IS_SM, true).unwrap();
        let guid = topo.node(host).node_guid;
        let (_, changes) = react_on(&mut dev, &known, &[Suspect { guid, port: Some(1), silent: false }]);
        let why = changes.unbounded.expect("unbounded");
        assert!(why.contains("IsSM set") && why.contains(&guid.to_string()), "{why}");
    }

    #[test]
    fn a_switch_that_does_not_answer_twice_is_gone_with_what_hangs_off_it() {
        let (topo, fabric, mut dev, known) = setup();
        let leaf = topo.switches().nth(2).unwrap();
        fabric.lock().unwrap().crash_node(leaf).unwrap();
        let guid = topo.node(leaf).node_guid;
        let (now, changes) = react_on(&mut dev, &known, &[Suspect { guid, port: None, silent: false }]);
        assert_eq!(changes.unbounded, None);
        assert_eq!(changes.count(ChangeKind::NodeGone), 1 + 4, "the leaf and its hosts: {changes:?}");
        assert!(now.by_guid(guid).is_none());
    }

    #[test]
    fn an_end_port_that_does_not_answer_is_named() {
        let (topo, fabric, mut dev, known) = setup();
        let host = topo.hosts().nth(9).unwrap();
        fabric.lock().unwrap().crash_node(host).unwrap();
        let guid = topo.node(host).node_guid;
        let (_, changes) = react_on(&mut dev, &known, &[Suspect { guid, port: Some(1), silent: false }]);
        let why = changes.unbounded.expect("unbounded");
        assert!(why.contains(&guid.to_string()) && why.contains("PortInfo of port 1 unanswered"), "{why}");
        // Once: asked again over the same path it would fail the same way.
        assert_eq!(changes.reads, 1);
    }

    /// Host 9's cable moved from its leaf to a free port of another leaf:
    /// the host, the port it left and the port it went to.
    fn move_host_cable(topo: &Topology, fabric: &SharedFabric) -> (crate::topology::NodeIdx, PortRef, PortRef) {
        let host = topo.hosts().nth(9).unwrap();
        let old = topo.neighbor(PortRef { node: host, port: 1 }).unwrap();
        let leaf = topo.switches().find(|&s| s != old.node && topo.node(s).name.starts_with("leaf")).unwrap();
        let port = (1..=topo.node(leaf).num_ports)
            .find(|&p| topo.neighbor(PortRef { node: leaf, port: p }).is_none())
            .expect("a free port");
        let to = PortRef { node: leaf, port };
        fabric.lock().unwrap().move_cable(old, to).unwrap();
        (host, old, to)
    }

    #[test]
    fn a_host_cable_moved_is_one_move_whichever_end_is_read_first() {
        for (label, first_old) in [("old leaf named", true), ("new leaf named", false)] {
            let (topo, fabric, mut dev, known) = setup();
            let (host, old, to) = move_host_cable(&topo, &fabric);
            let leaf = to.node;
            // One leaf's trap alone: the other end is found from it.
            let suspect = if first_old { old.node } else { leaf };
            let suspects = switch_suspects([topo.node(suspect).node_guid], []);
            let (now, changes) = react_on(&mut dev, &known, &suspects);
            assert_eq!(changes.unbounded, None, "{label}");
            let guid = topo.node(host).node_guid;
            if first_old {
                // The old leaf names only a link down: the host is gone
                // until its new leaf says where it went.
                assert_eq!(changes.count(ChangeKind::LinkDown), 1, "{label}: {changes:?}");
                assert_eq!(changes.count(ChangeKind::NodeGone), 1, "{label}: {changes:?}");
                continue;
            }
            assert_eq!(changes.count(ChangeKind::Moved), 1, "{label}: {changes:?}");
            assert_eq!(changes.count(ChangeKind::LinkDown), 1, "{label}: the old end: {changes:?}");
            let moved = changes.changes.iter().find(|c| c.kind == ChangeKind::Moved).unwrap();
            assert_eq!(moved.was, Some((topo.node(old.node).node_guid, old.port)), "{label}");
            let line = moved.to_string();
            assert!(line.contains("cable moved") && line.contains(&guid.to_string()), "{line}");
            let id = now.by_guid[&guid];
            let new_leaf = now.by_guid[&topo.node(leaf).node_guid];
            assert_eq!(now.node(id).ports[1].remote, Some((new_leaf, to.port)), "{label}");
        }
    }

    #[test]
    fn both_leaves_named_make_one_move() {
        let (topo, fabric, mut dev, known) = setup();
        let (_, old, to) = move_host_cable(&topo, &fabric);
        let suspects = switch_suspects([topo.node(old.node).node_guid, topo.node(to.node).node_guid], []);
        let (_, changes) = react_on(&mut dev, &known, &suspects);
        assert_eq!(changes.unbounded, None);
        assert_eq!(changes.count(ChangeKind::Moved), 1, "{changes:?}");
        assert_eq!(changes.count(ChangeKind::LinkDown), 1, "{changes:?}");
        assert_eq!(changes.count(ChangeKind::NodeGone), 0, "{changes:?}");
    }

    #[test]
    fn a_guid_answering_at_two_places_cannot_be_bounded() {
        // Host 9 wears host 8's GUIDs, and is off while the SM discovers.
        let mut topo = Topology::from_spec_or_file(SPEC).unwrap();
        let hosts: Vec<_> = topo.hosts().collect();
        let (real, spoof) = (hosts[8], hosts[9]);
        let (guid, ports) = (topo.node(real).node_guid, topo.node(real).port_guids.clone());
        topo.nodes[spoof.0].node_guid = guid;
        topo.nodes[spoof.0].system_guid = guid;
        topo.nodes[spoof.0].port_guids = ports;
        let fabric = FabricBuilder::new(&topo).seed(2).build_shared().unwrap();
        fabric.lock().unwrap().crash_node(spoof).unwrap();
        let mut dev = SimDevice::attach(&fabric, topo.hosts().next().unwrap(), 1).unwrap();
        let mut core = DiscoveryCore::new(0, None);
        drive_core(&mut dev, &mut core, TxnConfig::default(), 0, 1_000_000).unwrap();
        let known = core.finish();
        fabric.lock().unwrap().restart_node(spoof).unwrap();
        let leaf = topo.neighbor(PortRef { node: spoof, port: 1 }).unwrap().node;
        let suspects = switch_suspects([topo.node(leaf).node_guid], []);
        let (_, changes) = react_on(&mut dev, &known, &suspects);
        let why = changes.unbounded.expect("unbounded");
        assert!(why.contains(&guid.to_string()) && why.contains("two nodes with one GUID"), "{why}");
        let real_leaf = topo.neighbor(PortRef { node: real, port: 1 }).unwrap().node;
        assert!(why.contains(&topo.node(real_leaf).name) && why.contains(&topo.node(leaf).name), "{why}");
    }

    #[test]
    fn a_switch_gone_has_its_other_neighbours_read_whose_traps_it_may_have_eaten() {
        let (topo, fabric, mut dev, known) = setup();
        let spine = topo.switches().find(|&s| topo.node(s).name == "spine0").unwrap();
        fabric.lock().unwrap().crash_node(spine).unwrap();
        // Only leaf0's trap arrived.
        let leaf0 = topo.switches().find(|&s| topo.node(s).name == "leaf0").unwrap();
        let suspects = switch_suspects([topo.node(leaf0).node_guid], []);
        let (now, changes) = react_on(&mut dev, &known, &suspects);
        assert_eq!(changes.unbounded, None);
        assert_eq!(changes.count(ChangeKind::NodeGone), 1, "{changes:?}");
        // Every leaf read: SwitchInfo and ports 1-8 but its cable to spine1,
        // four times (not only leaf0 and the spine's two tries); spine1's
        // one SwitchInfo, reporting no change, vouches for three of those
        // cables (leaf0's is read: the SM reaches spine1 through it).
        assert!(changes.reads >= 4 * 8, "{changes:?}");
        assert_eq!(changes.vouched, 3, "{changes:?}");
        assert_eq!(now.nodes.len(), known.nodes.len() - 1);
    }

    #[test]
    fn a_switch_cut_off_whole_is_found_gone_a_port_at_a_time_not_by_a_timeout() {
        let (topo, fabric, mut dev, known) = setup();
        let spine = topo.switches().find(|&s| topo.node(s).name == "spine0").unwrap();
        // Every cable of the spine unplugged (ibsim's `Unlink "spine0"`):
        // it is there, but nothing reaches it.
        for port in 1..=topo.node(spine).num_ports {
            let r = PortRef { node: spine, port };
            if topo.neighbor(r).is_some() {
                fabric.lock().unwrap().link_down(r).unwrap();
            }
        }
        let leaves: Vec<Guid> = topo.switches().filter(|&s| s != spine).map(|s| topo.node(s).node_guid).collect();
        for suspects in [switch_suspects(leaves[..1].iter().copied(), []), switch_suspects(leaves.clone(), [])] {
            let mut core = ReactionCore::new(known.clone(), &suspects);
            let driven = drive_core(&mut dev, &mut core, TxnConfig::default(), 0, 1_000_000).expect("not stalled");
            let (now, changes) = core.finish();
            assert_eq!(changes.unbounded, None);
            assert_eq!(changes.count(ChangeKind::NodeGone), 1, "{changes:?}");
            assert!(now.by_guid(topo.node(spine).node_guid).is_none());
            // Each leaf's port to it read down, none of the spine's reads
            // left to time out.
            assert!(driven.elapsed < TxnConfig::default().timeout, "{:?}", driven.elapsed);
        }
    }

    /// ibsim's `Unlink "sw1"` on a random fabric: the switch traps itself,
    /// as do its neighbours, and some of them and some of the SM's paths
    /// to the others pass through it. No read goes over a cable to it
    /// before a port on the near side shows whether it is up: not a
    /// neighbour's vouching read (it waits for the switch's own round),
    /// not its port reads, not those of switches reached through it.
    #[test]
    fn a_switch_unlinked_whole_that_trapped_itself_costs_no_timeout() {
        let topo = Topology::from_spec_or_file("random:switches=40,degree=4,hosts=80,seed=1").unwrap();
        let fabric = FabricBuilder::new(&topo).seed(2).build_shared().unwrap();
        let sm_host = topo.hosts().find(|&h| topo.node(h).name == "sw13-h0").unwrap();
        let mut dev = SimDevice::attach(&fabric, sm_host, 1).unwrap();
        let mut core = DiscoveryCore::new(0, None);
        drive_core(&mut dev, &mut core, TxnConfig::default(), 0, 1_000_000).unwrap();
        let known = core.finish();
        fabric.lock().unwrap().clear_port_state_changes();
        let hub = topo.switches().find(|&s| topo.node(s).name == "sw1").unwrap();
        let mut trapped = vec![topo.node(hub).node_guid];
        for port in 1..=topo.node(hub).num_ports {
            let r = PortRef { node: hub, port };
            if let Some(far) = topo.neighbor(r) {
                fabric.lock().unwrap().link_down(r).unwrap();
                if topo.node(far.node).kind == crate::topology::NodeKind::Switch {
                    trapped.push(topo.node(far.node).node_guid);
                }
            }
        }
        let suspects = switch_suspects(trapped, []);
        let mut core = ReactionCore::new(known.clone(), &suspects);
        let driven = drive_core(&mut dev, &mut core, TxnConfig::default(), 0, 1_000_000).expect("not stalled");
        let (now, changes) = core.finish();
        assert_eq!(changes.unbounded, None);
        assert!(now.by_guid(topo.node(hub).node_guid).is_none(), "{changes:?}");
        assert!(driven.elapsed < TxnConfig::default().timeout, "{:?}", driven.elapsed);
    }

    #[test]
    fn a_round_that_comes_up_empty_does_not_end_the_reaction_while_suspects_wait() {
        let (topo, _fabric, mut dev, known) = setup();
        let by_name = |name: &str| topo.switches().find(|&s| topo.node(s).name == name).unwrap();
        // leaf0 is nearest the SM, leaf1 two hops farther.
        let suspects =
            switch_suspects([topo.node(by_name("leaf0")).node_guid, topo.node(by_name("leaf1")).node_guid], []);
        let mut core = ReactionCore::new(known.clone(), &suspects);
        // leaf0 was read already in this reaction (as a vouching switch
        // and a far end): its turn calls for no read.
        let leaf0 = known.by_guid[&topo.node(by_name("leaf0")).node_guid];
        core.round.clear();
        core.whole.insert(leaf0);
        core.changed.insert(leaf0, true);
        core.asked.insert(Read::PortInfo { node: leaf0, port: 0 });
        core.waiting = suspects.iter().map(|s| (known.by_guid[&s.guid], None)).collect();
        drive_core(&mut dev, &mut core, TxnConfig::default(), 0, 1_000_000).expect("not stalled");
        let (_, changes) = core.finish();
        assert_eq!(changes.unbounded, None);
        assert!(changes.reads > 0, "leaf1 was read: {changes:?}");
    }

    #[test]
    fn a_cable_between_switches_is_found_from_either_end() {
        for named in ["leaf0", "spine1"] {
            let (topo, fabric, mut dev, known) = setup();
            let by_name = |name: &str| topo.switches().find(|&s| topo.node(s).name == name).unwrap();
            let (leaf, spine) = (by_name("leaf0"), by_name("spine1"));
            let port = (1..=topo.node(leaf).num_ports)
                .find(|&p| topo.neighbor(PortRef { node: leaf, port: p }).is_some_and(|r| r.node == spine))
                .unwrap();
            fabric.lock().unwrap().link_down(PortRef { node: leaf, port }).unwrap();
            // One end's trap alone: the other end's SwitchInfo reports the
            // change too, so the cable is read, not vouched for.
            let suspects = switch_suspects([topo.node(by_name(named)).node_guid], []);
            let (now, changes) = react_on(&mut dev, &known, &suspects);
            assert_eq!(changes.unbounded, None, "{named}");
            assert_eq!(changes.count(ChangeKind::LinkDown), 1, "{named}: {changes:?}");
            let id = now.by_guid[&topo.node(leaf).node_guid];
            assert_eq!(now.node(id).ports[port as usize].remote, None, "{named}");
        }
    }

    #[test]
    fn a_silent_switch_cut_off_is_gone_not_lost() {
        let (topo, fabric, mut dev, known) = setup();
        // A host's only cable: its leaf reports the change; the host is
        // silent (and unreachable once the cable is known down).
        let host = topo.hosts().nth(6).unwrap();
        let r = PortRef { node: host, port: 1 };
        let leaf = topo.neighbor(r).unwrap().node;
        fabric.lock().unwrap().link_down(r).unwrap();
        let suspects = switch_suspects([topo.node(leaf).node_guid], []);
        let (now, changes) = react_on(&mut dev, &known, &suspects);
        assert_eq!(changes.unbounded, None);
        assert_eq!(changes.count(ChangeKind::LinkDown), 1, "{changes:?}");
        assert_eq!(changes.count(ChangeKind::NodeGone), 1, "{changes:?}");
        assert!(now.by_guid(topo.node(host).node_guid).is_none());
        assert_eq!(now.nodes.len(), known.nodes.len() - 1);
        // Every node left has a path that the walk agrees with.
        let walk = now.walk();
        assert_eq!(walk.nodes.len(), now.nodes.len());
        for (id, path) in walk.nodes {
            assert_eq!(now.node(id).path, path);
        }
    }
}
