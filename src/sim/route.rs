//! Moving a MAD across the fabric: directed route (IBA 14.2.2), LID
//! routing through the switches' LFTs, and the LFT tracer for tests.
//!
//! Every walk is O(hops): one arena lookup per link crossed.

use super::fabric::{Fabric, PortId};
use super::profile::{self, PortKind};
use super::{DropReason, TraceError};
use crate::mad::{PortState, Smp};
use crate::topology::{NodeIdx, NodeKind, PortRef};
use crate::types::Lid;

/// Where a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reached {
    /// The port the MAD came in on (or left from, if it never left the node).
    pub port: PortId,
    /// Links crossed.
    pub hops: u32,
}

/// What a LID-routed packet is, for the port-state checks on each link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Traffic {
    /// VL15: crosses links in Init, Armed and Active (IBA 7.2.1).
    Smp,
    /// Data VLs: only Active links carry it (IBA 7.2.1, Table 22).
    Data,
}

/// The longest path a packet is forwarded along before it counts as looping
/// (the DR limit of 63 hops plus one; real switches rely on the packet
/// lifetime instead).
const MAX_LID_HOPS: u32 = 64;

impl Fabric {
    /// Crosses the link out of `out`: the port it arrives at.
    fn cross(&self, out: PortId) -> Result<PortId, DropReason> {
        let peer = self.live_peer(out).ok_or(DropReason::LinkDown)?;
        self.pma.count_crossing(out, peer);
        Ok(peer)
    }

    /// The egress port a directed-route hop names at the node of `at`
    /// (IBA 14.2.2: an end node sends only out of the port it is on; a
    /// switch out of any external port).
    fn dr_egress(&self, at: PortId, port_num: u8) -> Result<PortId, DropReason> {
        let p = self.port(at);
        let node = &self.nodes[p.node as usize];
        match node.kind {
            NodeKind::Switch if port_num >= 1 && port_num <= node.num_ports => Ok(self.port_id(p.node, port_num)),
            NodeKind::Switch => Err(DropReason::DrBadPort),
            _ if port_num == p.num => Ok(at),
            _ => Err(DropReason::DrBadPort),
        }
    }

    fn is_switch(&self, at: PortId) -> bool {
        self.node_of(at).kind == NodeKind::Switch
    }

    /// The outgoing directed-route part of a request (D=0), from the node
    /// where it starts (the SM's own port, or where an initial LID-routed
    /// segment ended) to where the directed part ends, filling the return
    /// path. Implements IBA 14.2.2.2 C14-9 steps 1-3. The hop pointer ends
    /// at hop count + 1.
    pub(crate) fn dr_outbound(&self, smp: &mut Smp<&mut [u8]>, start: PortId) -> Result<Reached, DropReason> {
        let hc = smp.hop_count();
        if smp.hop_pointer() != 0 {
            return Err(DropReason::DrHopPointer);
        }
        let mut at = start;
        let mut hops = 0;
        if hc > 0 {
            // Step 1: the source sends out initial_path[1].
            let out = self.dr_egress(at, smp.initial_path()[1])?;
            at = self.cross(out)?;
            hops += 1;
            let mut hp = 1u8;
            // Step 2: intermediate switches record where it came in and
            // forward out the next hop.
            while hp < hc {
                if !self.is_switch(at) {
                    return Err(DropReason::DrEndNodeInPath);
                }
                smp.return_path_mut()[hp as usize] = self.port(at).num;
                hp += 1;
                let out = self.dr_egress(at, smp.initial_path()[hp as usize])?;
                at = self.cross(out)?;
                hops += 1;
            }
            // Step 3: the end of the directed part records its ingress.
            smp.return_path_mut()[hc as usize] = self.port(at).num;
        }
        smp.set_hop_pointer(hc + 1);
        Ok(Reached { port: at, hops })
    }

    /// The returning directed-route part (D=1) from the node where the
    /// directed part ended back to where it began, following the return
    /// path (IBA 14.2.2.4 C14-13 steps 1-3). The hop pointer ends at 0.
    pub(crate) fn dr_inbound(&self, smp: &mut Smp<&mut [u8]>, start: PortId) -> Result<Reached, DropReason> {
        let hc = smp.hop_count();
        if smp.hop_pointer() != hc + 1 {
            return Err(DropReason::DrHopPointer);
        }
        let mut at = start;
        let mut hops = 0;
        if hc > 0 {
            // Step 1: send out return_path[hop count].
            let out = self.dr_egress(at, smp.return_path()[hc as usize])?;
            at = self.cross(out)?;
            hops += 1;
            let mut hp = hc;
            // Step 2: intermediate switches forward out return_path[hp-1].
            while hp >= 2 {
                if !self.is_switch(at) {
                    return Err(DropReason::DrEndNodeInPath);
                }
                hp -= 1;
                let out = self.dr_egress(at, smp.return_path()[hp as usize])?;
                at = self.cross(out)?;
                hops += 1;
            }
        }
        // Step 3: the hop pointer drops to 0 where the directed part began.
        smp.set_hop_pointer(0);
        Ok(Reached { port: at, hops })
    }

    /// Whether `port` (an end port or a switch's port 0) answers to `lid`.
    pub(crate) fn owns_lid(&self, port: PortId, lid: Lid) -> bool {
        let p = self.port(port);
        matches!(p.kind, PortKind::EndPort | PortKind::SwitchManagement)
            && profile::lid_in_range(p.pi.lid, self.effective_lmc(p), lid)
    }

    fn carries(&self, out: PortId, traffic: Traffic) -> Result<PortId, DropReason> {
        let peer = self.cross(out)?;
        if traffic == Traffic::Data
            && (self.port(out).pi.port_state != PortState::Active || self.port(peer).pi.port_state != PortState::Active)
        {
            return Err(DropReason::NotActive);
        }
        Ok(peer)
    }

    /// The LFT's choice at switch `node` for `dlid` (IBA 18.2.4.3.1: LIDs
    /// above LinearFDBTop and ports the switch lacks are dropped).
    pub(crate) fn lft_egress(&self, node: u32, dlid: Lid) -> Result<u8, DropReason> {
        let sw = self.switch_of(node).ok_or(DropReason::Unrouted)?;
        if dlid.0 > sw.info.linear_fdb_top {
            return Err(DropReason::BeyondLinearFdbTop);
        }
        let out = sw.lft.get(dlid.0 as usize).copied().unwrap_or(0xff);
        if out > self.nodes[node as usize].num_ports {
            return Err(DropReason::Unrouted);
        }
        Ok(out)
    }

    /// Routes a LID-addressed packet from `from` (an end port, or any port
    /// of a switch, which then consults its own LFT first) to the port that
    /// owns `dlid`. A switch destination is reached when its LFT sends the
    /// packet to port 0; `Reached::port` is then the ingress port.
    pub(crate) fn lid_route(&self, from: PortId, dlid: Lid, traffic: Traffic) -> Result<Reached, DropReason> {
        if dlid.0 == 0 || dlid == Lid::PERMISSIVE {
            return Err(DropReason::Unrouted);
        }
        let mut at = from;
        let mut hops = 0;
        if !self.is_switch(at) {
            if self.owns_lid(at, dlid) {
                return Ok(Reached { port: at, hops });
            }
            if traffic == Traffic::Data && self.port(at).pi.port_state != PortState::Active {
                return Err(DropReason::NotActive);
            }
            at = self.carries(at, traffic)?;
            hops += 1;
        }
        loop {
            let node = self.port(at).node;
            if !self.is_switch(at) {
                return if self.owns_lid(at, dlid) {
                    Ok(Reached { port: at, hops })
                } else {
                    Err(DropReason::NotForThisPort)
                };
            }
            let out = self.lft_egress(node, dlid)?;
            if out == 0 {
                let mgmt = self.port_id(node, 0);
                return if self.owns_lid(mgmt, dlid) {
                    Ok(Reached { port: at, hops })
                } else {
                    Err(DropReason::NotForThisPort)
                };
            }
            if hops >= MAX_LID_HOPS {
                return Err(DropReason::HopLimit);
            }
            at = self.carries(self.port_id(node, out), traffic)?;
            hops += 1;
        }
    }

    /// Follows the LFTs from `from_switch` towards `dlid` the way a data
    /// packet would: the egress port at every switch, then the port that
    /// owns `dlid` (a CA port, or port 0 of the destination switch).
    /// Every link crossed must be Active at both ends.
    pub fn trace_lid_route(&self, from_switch: NodeIdx, dlid: Lid) -> Result<Vec<PortRef>, TraceError> {
        let node = self.nodes.get(from_switch.0).ok_or(TraceError::NotASwitch(from_switch))?;
        if node.kind != NodeKind::Switch {
            return Err(TraceError::NotASwitch(from_switch));
        }
        let mut path = Vec::new();
        let mut visited: Vec<u32> = Vec::new();
        let mut sw = from_switch.0 as u32;
        loop {
            if visited.contains(&sw) {
                return Err(TraceError::Loop { switch: NodeIdx(sw as usize), lid: dlid, path });
            }
            visited.push(sw);
            match self.lid_hop(sw, dlid, &mut path)? {
                LidHop::Switch(next) => sw = next,
                LidHop::Delivered => return Ok(path),
            }
        }
    }

    /// [`Fabric::trace_lid_route`] from each of `switches` at once, each
    /// switch's hop walked once: a walk that reaches a switch already
    /// known to deliver stops there. Returns the port that owns `dlid`
    /// (`None` when `switches` is empty); the first failure otherwise.
    pub fn trace_lid_from(&self, switches: &[NodeIdx], dlid: Lid) -> Result<Option<PortRef>, TraceError> {
        const UNSEEN: u8 = 0;
        const WALKING: u8 = 1;
        const DELIVERS: u8 = 2;
        let mut state = vec![UNSEEN; self.nodes.len()];
        let mut owner = None;
        let mut walk: Vec<u32> = Vec::new();
        let mut path = Vec::new();
        for &from in switches {
            if self.nodes.get(from.0).is_none_or(|n| n.kind != NodeKind::Switch) {
                return Err(TraceError::NotASwitch(from));
            }
            let mut sw = from.0 as u32;
            walk.clear();
            path.clear();
            loop {
                match state[sw as usize] {
                    DELIVERS => break,
                    WALKING => return Err(TraceError::Loop { switch: NodeIdx(sw as usize), lid: dlid, path }),
                    _ => {}
                }
                state[sw as usize] = WALKING;
                walk.push(sw);
                match self.lid_hop(sw, dlid, &mut path)? {
                    LidHop::Switch(next) => sw = next,
                    LidHop::Delivered => {
                        owner = path.last().copied();
                        break;
                    }
                }
            }
            for &s in &walk {
                state[s as usize] = DELIVERS;
            }
        }
        Ok(owner)
    }

    /// One switch's hop towards `dlid`, pushed onto `path`: the next
    /// switch, or delivered (the owning port pushed last).
    fn lid_hop(&self, sw: u32, dlid: Lid, path: &mut Vec<PortRef>) -> Result<LidHop, TraceError> {
        if self.nodes[sw as usize].crashed {
            return Err(TraceError::NodeCrashed(NodeIdx(sw as usize)));
        }
        let here = NodeIdx(sw as usize);
        let out = match self.lft_egress(sw, dlid) {
            Ok(p) => p,
            Err(DropReason::BeyondLinearFdbTop) => {
                let top = self.switch_of(sw).map_or(0, |s| s.info.linear_fdb_top);
                return Err(TraceError::BeyondTop { switch: here, lid: dlid, top });
            }
            Err(_) => {
                let port = self.switch_of(sw).and_then(|s| s.lft.get(dlid.0 as usize).copied()).unwrap_or(0xff);
                return Err(TraceError::Unrouted { switch: here, lid: dlid, port });
            }
        };
        let out_id = self.port_id(sw, out);
        path.push(PortRef { node: here, port: out });
        if out == 0 {
            return if self.owns_lid(out_id, dlid) {
                Ok(LidHop::Delivered)
            } else {
                Err(TraceError::WrongDestination { port: PortRef { node: here, port: 0 }, lid: dlid })
            };
        }
        let peer = self.live_peer(out_id).ok_or(TraceError::LinkDown { port: PortRef { node: here, port: out } })?;
        for p in [out_id, peer] {
            if self.port(p).pi.port_state != PortState::Active {
                return Err(TraceError::NotActive { port: self.port_ref(p) });
            }
        }
        if self.is_switch(peer) {
            return Ok(LidHop::Switch(self.port(peer).node));
        }
        let pr = self.port_ref(peer);
        path.push(pr);
        if self.owns_lid(peer, dlid) {
            Ok(LidHop::Delivered)
        } else {
            Err(TraceError::WrongDestination { port: pr, lid: dlid })
        }
    }
}

/// Where one switch sends a LID.
enum LidHop {
    Switch(u32),
    Delivered,
}
