//! Virtual time: the event queue and what happens at each event.
//!
//! ```text
//!  device send ──► Inject ──walk (DR/LID)──► Arrive at destination (after hops × hop latency)
//!                                              │ fault rules (drop / delay / hold)
//!                                              ├─ request to an SMA ─► answer ─walk back─► Deliver
//!                                              └─ anything else ─────────────────────────► Deliver
//!  Deliver ──► device mailbox ──► SimDevice::recv
//! ```
//! Events run in (time, sequence) order, so a run is a pure function of
//! the topology, the seed and the sequence of sends and operator verbs.

use std::cmp::Ordering;
use std::time::Duration;

use super::fabric::{DevId, Fabric, PortId, NO_PORT};
use super::fault::{Direction, MadContext, RuleHandle, Verdict};
use super::profile::{self, PortKind};
use super::route::{Reached, Traffic};
use super::sma::SmaOutcome;
use super::{DropReason, SimError};
use crate::mad::header::status;
use crate::mad::port_info::CapabilityMask;
use crate::mad::{
    AttributeId, MadHeader, Method, MgmtClass, Notice, NoticeRepr, NoticeType, PhysState, SmInfoRepr, Smp, TrapDetails,
    MAD_SIZE, SMP_DATA_LEN,
};
use crate::topology::{NodeIdx, NodeKind, PortRef};
use crate::transport::{Datagram, DeviceError, MadAddress};
use crate::types::Lid;

/// An event waiting in the queue; ordered so the heap pops the earliest.
pub(crate) struct Scheduled {
    pub at: Duration,
    pub seq: u64,
    pub ev: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

pub(crate) enum Event {
    /// A MAD leaves `src`.
    Inject { src: PortId, from_dev: Option<DevId>, addr: MadAddress, mad: Vec<u8> },
    /// A MAD reached the port it was routed to.
    Arrive(Arrival),
    /// A MAD reaches a device.
    Deliver { dev: DevId, dgram: Datagram },
}

/// How the answer to a request finds its way back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Back {
    /// Directed route: from the responder, LID-routed to `end` first when
    /// the request's last segment was LID-routed (DrDLID set), then along
    /// the return path.
    Dr { end: PortId, lid_segment: bool },
    /// LID-routed: to this LID (the request's source LID).
    Lid(Lid),
    /// Nothing answers it.
    None,
}

pub(crate) struct Arrival {
    /// The port the MAD came in on at its destination.
    pub at: PortId,
    pub mad: Vec<u8>,
    pub from_dev: Option<DevId>,
    pub back: Back,
    /// The source address as the destination sees it (LRH SLID, QP, ...).
    pub src: MadAddress,
    pub rules_done: bool,
}

fn is_response(method: u8) -> bool {
    method & 0x80 != 0 || method == u8::from(Method::TrapRepress)
}

impl Fabric {
    pub(crate) fn schedule(&mut self, after: Duration, ev: Event) {
        self.seq += 1;
        self.queue.push(Scheduled { at: self.now + after, seq: self.seq, ev });
    }

    fn hop_time(&self, hops: u32) -> Duration {
        self.cfg.hop_latency * hops
    }

    /// Runs every event due at or before `until`, then sets the clock
    /// there (never backwards).
    pub fn advance_to(&mut self, until: Duration) {
        while self.queue.peek().is_some_and(|s| s.at <= until) {
            self.step();
        }
        self.now = self.now.max(until);
    }

    /// When the next event is due, if any.
    pub fn next_event(&self) -> Option<Duration> {
        self.queue.peek().map(|s| s.at)
    }

    /// Runs events for `d` of virtual time.
    pub fn advance(&mut self, d: Duration) {
        self.advance_to(self.now + d);
    }

    /// Runs events until none is left (at most `max_events`); returns how
    /// many ran.
    pub fn run_until_idle(&mut self, max_events: usize) -> usize {
        let mut n = 0;
        while n < max_events && !self.queue.is_empty() {
            self.step();
            n += 1;
        }
        n
    }

    fn step(&mut self) {
        let Some(s) = self.queue.pop() else { return };
        self.now = self.now.max(s.at);
        match s.ev {
            Event::Inject { src, from_dev, addr, mad } => self.on_inject(src, from_dev, addr, mad),
            Event::Arrive(a) => self.on_arrive(a),
            Event::Deliver { dev, dgram } => {
                if let Some(d) = self.devices.get_mut(dev.0 as usize).filter(|d| d.attached) {
                    d.mailbox.push_back(dgram);
                } else {
                    self.count_drop(DropReason::NoListener);
                }
            }
        }
    }

    fn on_inject(&mut self, src: PortId, from_dev: Option<DevId>, addr: MadAddress, mut mad: Vec<u8>) {
        if self.node_of(src).crashed {
            return self.count_drop(DropReason::NodeCrashed);
        }
        let Ok(h) = MadHeader::new_checked(&mad[..]) else {
            return self.count_drop(DropReason::BadMad);
        };
        let class = h.mgmt_class();
        match class {
            MgmtClass::SubnMgmtDirected => match self.inject_dr(src, addr, &mut mad) {
                Ok((to, hops, back, src_lid)) => {
                    let src = MadAddress { lid: src_lid, ..MadAddress::smi_permissive() };
                    let a = Arrival { at: to, mad, from_dev, back, src, rules_done: false };
                    self.schedule(self.hop_time(hops), Event::Arrive(a));
                }
                Err(r) => self.count_drop(r),
            },
            MgmtClass::SubnMgmtLid => {
                if mad.len() != MAD_SIZE {
                    return self.count_drop(DropReason::BadMad);
                }
                match self.lid_route(src, addr.lid, Traffic::Smp) {
                    Ok(r) => {
                        let src_lid = self.port(self.mgmt_port(src)).pi.lid;
                        let a = Arrival {
                            at: r.port,
                            mad,
                            from_dev,
                            back: Back::Lid(src_lid),
                            src: MadAddress::smi(src_lid),
                            rules_done: false,
                        };
                        self.schedule(self.hop_time(r.hops), Event::Arrive(a));
                    }
                    Err(r) => self.count_drop(r),
                }
            }
            _ => match self.lid_route(src, addr.lid, Traffic::Data) {
                Ok(r) => {
                    let src_lid = self.port(self.mgmt_port(src)).pi.lid;
                    let src = MadAddress { lid: src_lid, qpn: 1, ..addr };
                    let a = Arrival { at: r.port, mad, from_dev, back: Back::None, src, rules_done: false };
                    self.schedule(self.hop_time(r.hops), Event::Arrive(a));
                }
                Err(r) => self.count_drop(r),
            },
        }
    }

    /// Walks a directed-route SMP sent from `src`: where it arrives, links
    /// crossed, how an answer returns, and the source LID the destination
    /// sees (permissive unless the last segment was LID-routed).
    fn inject_dr(&self, src: PortId, addr: MadAddress, mad: &mut [u8]) -> Result<(PortId, u32, Back, Lid), DropReason> {
        let mut smp = Smp::new_checked(mad).map_err(|_| DropReason::BadMad)?;
        if smp.hop_count() as usize > crate::types::MAX_DR_HOPS {
            return Err(DropReason::BadMad);
        }
        if !smp.direction_inbound() {
            // IBA 14.2.2.1: with DrSLID set, the SMP is first LID-routed to
            // the node where the directed part begins (the LRH DLID).
            let (start, h0) = if smp.dr_slid() == Lid::PERMISSIVE {
                (src, 0)
            } else {
                let r = self.lid_route(src, addr.lid, Traffic::Smp)?;
                (r.port, r.hops)
            };
            let end = self.dr_outbound(&mut smp, start)?;
            if smp.dr_dlid() == Lid::PERMISSIVE {
                return Ok((end.port, h0 + end.hops, Back::Dr { end: end.port, lid_segment: false }, Lid::PERMISSIVE));
            }
            // C14-9:3: only a switch continues with a LID-routed segment.
            if self.node_of(end.port).kind != NodeKind::Switch {
                return Err(DropReason::DrEndNodeInPath);
            }
            let t = self.lid_route(end.port, smp.dr_dlid(), Traffic::Smp)?;
            let e_lid = self.port(self.mgmt_port(end.port)).pi.lid;
            Ok((t.port, h0 + end.hops + t.hops, Back::Dr { end: end.port, lid_segment: true }, e_lid))
        } else {
            // A response an SM sends itself (e.g. to SMInfo).
            let (start, h0) = if smp.dr_dlid() == Lid::PERMISSIVE {
                (src, 0)
            } else {
                let r = self.lid_route(src, addr.lid, Traffic::Smp)?;
                (r.port, r.hops)
            };
            let (r, src_lid) = self.dr_return_from(&mut smp, start)?;
            Ok((r.port, h0 + r.hops, Back::None, src_lid))
        }
    }

    /// The returning directed part from `start`, then the LID-routed tail
    /// to DrSLID when the request came in on one.
    fn dr_return_from(&self, smp: &mut Smp<&mut [u8]>, start: PortId) -> Result<(Reached, Lid), DropReason> {
        let r = self.dr_inbound(smp, start)?;
        if smp.dr_slid() == Lid::PERMISSIVE {
            return Ok((r, Lid::PERMISSIVE));
        }
        // C14-13:3: only a switch LID-routes the rest of the way.
        if self.node_of(r.port).kind != NodeKind::Switch {
            return Err(DropReason::DrEndNodeInPath);
        }
        let t = self.lid_route(r.port, smp.dr_slid(), Traffic::Smp)?;
        let lid = self.port(self.mgmt_port(r.port)).pi.lid;
        Ok((Reached { port: t.port, hops: r.hops + t.hops }, lid))
    }

    pub(super) fn context(&self, node: u32, mad: &[u8], direction: Direction) -> Option<MadContext> {
        let h = MadHeader::new_checked(mad).ok()?;
        Some(MadContext {
            node: NodeIdx(node as usize),
            class: h.mgmt_class(),
            method: h.method(),
            attribute: h.attribute_id(),
            direction,
        })
    }

    /// Applies the fault rules; Some(delay) if the MAD goes on. A held MAD
    /// is parked as `park` builds it.
    pub(super) fn apply_rules(&mut self, ctx: Option<MadContext>) -> Verdict {
        match ctx {
            Some(ctx) if !self.rules.is_empty() => {
                let v = self.rules.evaluate(&ctx, &mut self.rng);
                if v == Verdict::Drop {
                    self.count_drop(DropReason::Rule);
                }
                v
            }
            _ => Verdict::Deliver { delay: Duration::ZERO },
        }
    }

    pub(super) fn park(&mut self, h: RuleHandle, ev: Event) {
        self.seq += 1;
        let s = Scheduled { at: self.now, seq: self.seq, ev };
        self.held.push((h, s));
    }

    pub(crate) fn release_held(&mut self, h: RuleHandle) {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held).into_iter().partition(|(x, _)| *x == h);
        self.held = rest;
        for (_, s) in mine {
            self.schedule(Duration::ZERO, s.ev);
        }
    }

    fn on_arrive(&mut self, mut a: Arrival) {
        let node = self.port(a.at).node;
        if self.nodes[node as usize].crashed {
            return self.count_drop(DropReason::NodeCrashed);
        }
        let Ok(h) = MadHeader::new_checked(&a.mad[..]) else {
            return self.count_drop(DropReason::BadMad);
        };
        let (class, method, attr, attr_mod) = (h.mgmt_class(), h.method(), h.attribute_id(), h.attribute_modifier());
        let raw_method = u8::from(method);
        let direction = if is_response(raw_method) { Direction::Response } else { Direction::Request };
        if !a.rules_done {
            let ctx = self.context(node, &a.mad, direction);
            a.rules_done = true;
            match self.apply_rules(ctx) {
                Verdict::Drop => return,
                Verdict::Hold(h) => return self.park(h, Event::Arrive(a)),
                Verdict::Deliver { delay } if delay > Duration::ZERO => {
                    return self.schedule(delay, Event::Arrive(a));
                }
                Verdict::Deliver { .. } => {}
            }
        }
        if class == MgmtClass::Perf && direction == Direction::Request {
            // Every node's PMA answers PerfMgt itself (src/sim/pma.rs).
            return self.pma_request(a);
        }
        let smp_class = matches!(class, MgmtClass::SubnMgmtDirected | MgmtClass::SubnMgmtLid);
        if !smp_class || direction == Direction::Response || matches!(method, Method::Trap | Method::Report) {
            return self.deliver_to_port(a.at, a.from_dev, a.src, a.mad, Duration::ZERO);
        }
        *self.counts.entry((attr, method)).or_default() += 1;
        if attr == AttributeId::SmInfo && matches!(method, Method::Get | Method::Set) {
            return self.sm_info_request(a, method);
        }
        let Ok(smp) = Smp::new_checked(&a.mad[..]) else {
            return self.count_drop(DropReason::BadMad);
        };
        if smp.header().class_version() != 1 {
            return self.respond(a, status::BAD_VERSION, None);
        }
        let mut data = [0u8; SMP_DATA_LEN];
        data.copy_from_slice(smp.data());
        let m_key = smp.m_key();
        match self.sma(a.at, method, attr, attr_mod, m_key, &data) {
            SmaOutcome::Reply { status, mut data } => {
                let here = NodeIdx(node as usize);
                for (n, at, offset, bytes) in &self.answer_patches {
                    if *n == here && *at == attr && offset + bytes.len() <= data.len() {
                        data[*offset..offset + bytes.len()].copy_from_slice(bytes);
                    }
                }
                self.respond(a, status, Some(data))
            }
            SmaOutcome::Silent(Some(r)) => self.count_drop(r),
            SmaOutcome::Silent(None) => {}
        }
    }

    /// The SM attached where an SMInfo request arrived answers it: from its
    /// registered SMInfo for a Get, or itself (the request is delivered to
    /// it) otherwise. Without an SM the port answers "unsupported", as the
    /// Linux MAD layer does for a class nobody registered.
    fn sm_info_request(&mut self, a: Arrival, method: Method) {
        let mgmt = self.mgmt_port(a.at);
        let devs: Vec<DevId> = self.port_devices.get(&mgmt).cloned().unwrap_or_default();
        let registered = devs.iter().find_map(|d| self.devices[d.0 as usize].sm_info);
        match (method, registered, devs.first()) {
            (Method::Get, Some(mut info), _) => {
                let asked_key = Smp::new_checked(&a.mad[..])
                    .ok()
                    .and_then(|s| SmInfoRepr::parse_bytes(s.data()).ok())
                    .map_or(0, |r| r.sm_key);
                // IBA 14.4.1.1: SM_Key only to a requester that knows it.
                if asked_key != info.sm_key {
                    info.sm_key = 0;
                }
                self.respond(a, 0, Some(info.to_bytes()));
            }
            (_, _, Some(&dev)) => {
                let src = a.src;
                self.deliver_to(dev, src, a.mad, Duration::ZERO);
            }
            _ => self.respond(a, status::METHOD_ATTR_UNSUPPORTED, None),
        }
    }

    /// Turns the request into its GetResp and sends it back the way it came.
    fn respond(&mut self, a: Arrival, status: u16, data: Option<[u8; SMP_DATA_LEN]>) {
        let responder = self.port(a.at).node;
        let mut mad = a.mad;
        let Ok(mut smp) = Smp::new_checked(&mut mad[..]) else {
            return self.count_drop(DropReason::BadMad);
        };
        smp.header_mut().set_method(Method::GetResp);
        if let Some(d) = data {
            smp.data_mut().copy_from_slice(&d);
        }
        let routed: Result<(Reached, MadAddress), DropReason> = match a.back {
            Back::Dr { end, lid_segment } => {
                smp.set_status(status);
                smp.set_direction_inbound(true);
                (|| {
                    let (start, h0) = if lid_segment {
                        let e_lid = self.port(self.mgmt_port(end)).pi.lid;
                        let r = self.lid_route(a.at, e_lid, Traffic::Smp)?;
                        if self.port(r.port).node != self.port(end).node {
                            return Err(DropReason::NotForThisPort);
                        }
                        (r.port, r.hops)
                    } else {
                        (end, 0)
                    };
                    let (r, lid) = self.dr_return_from(&mut smp, start)?;
                    Ok((
                        Reached { port: r.port, hops: h0 + r.hops },
                        MadAddress { lid, ..MadAddress::smi_permissive() },
                    ))
                })()
            }
            Back::Lid(to) => {
                smp.header_mut().set_status(status);
                let from = self.port(self.mgmt_port(a.at)).pi.lid;
                self.lid_route(a.at, to, Traffic::Smp).map(|r| (r, MadAddress::smi(from)))
            }
            Back::None => return,
        };
        let (r, src) = match routed {
            Ok(x) => x,
            Err(reason) => return self.count_drop(reason),
        };
        let ctx = self.context(responder, &mad, Direction::Response);
        let base = self.cfg.processing + self.hop_time(r.hops);
        let dev = self.listener(r.port, a.from_dev);
        let dgram = Datagram { addr: src, mad };
        let Some(dev) = dev else {
            return self.count_drop(DropReason::NoListener);
        };
        match self.apply_rules(ctx) {
            Verdict::Drop => {}
            Verdict::Hold(h) => self.park(h, Event::Deliver { dev, dgram }),
            Verdict::Deliver { delay } => self.schedule(base + delay, Event::Deliver { dev, dgram }),
        }
    }

    /// The device that takes MADs arriving at `port`: `prefer` if it is
    /// attached there, else the first attached.
    pub(super) fn listener(&self, port: PortId, prefer: Option<DevId>) -> Option<DevId> {
        let devs = self.port_devices.get(&self.mgmt_port(port))?;
        prefer.filter(|d| devs.contains(d)).or_else(|| devs.first().copied())
    }

    fn deliver_to_port(&mut self, at: PortId, prefer: Option<DevId>, src: MadAddress, mad: Vec<u8>, after: Duration) {
        match self.listener(at, prefer) {
            Some(dev) => self.deliver_to(dev, src, mad, after),
            None => self.count_drop(DropReason::NoListener),
        }
    }

    fn deliver_to(&mut self, dev: DevId, addr: MadAddress, mad: Vec<u8>, after: Duration) {
        self.schedule(after, Event::Deliver { dev, dgram: Datagram { addr, mad } });
    }

    /// A switch saw one of its ports change state on its own (link event):
    /// PortStateChange goes up and, if the switch can and knows its master
    /// SM, it sends Trap 128 there (IBA 14.2.5.4, 14.3.9 / 13.4.8.3).
    pub(crate) fn port_state_changed(&mut self, node: u32) {
        if self.nodes[node as usize].crashed {
            return;
        }
        let Some(sw) = self.switch_mut(node) else {
            return;
        };
        sw.info.port_state_change = true;
        let p0 = self.port_id(node, 0);
        let pi = self.port(p0).pi;
        if pi.capability_mask & CapabilityMask::IS_TRAP_SUPPORTED == 0 || pi.lid.0 == 0 || pi.master_sm_lid.0 == 0 {
            return;
        }
        let mut mad = vec![0u8; MAD_SIZE];
        let mut smp = Smp::new_checked(&mut mad[..]).expect("256 bytes");
        let mut h = smp.header_mut();
        h.set_base_version(1);
        h.set_mgmt_class(MgmtClass::SubnMgmtLid);
        h.set_class_version(1);
        h.set_method(Method::Trap);
        h.set_transaction_id(0x5452_4150_0000_0000 | self.seq);
        h.set_attribute_id(AttributeId::Notice);
        // Notice (IBA 13.4.8.2), generic and urgent, naming the switch's
        // LID (Trap 128, IBA 14.2.5.1).
        let notice = NoticeRepr::generic_trap(
            NoticeType::Urgent,
            crate::mad::notice::producer_type::SWITCH,
            pi.lid,
            &TrapDetails::LinkStateChanged { switch_lid: pi.lid },
        )
        .expect("trap 128 has a number");
        let mut view = Notice::new_checked(smp.data_mut()).expect("64 bytes hold an SMP notice");
        notice.emit(&mut view);
        self.schedule(
            Duration::ZERO,
            Event::Inject { src: p0, from_dev: None, addr: MadAddress::smi(pi.master_sm_lid), mad },
        );
    }

    // ---- operator verbs --------------------------------------------------

    /// Unplugs the cable at `port`: both ends go Down/Polling and stay so
    /// until [`Fabric::link_up`]; switches at either end raise
    /// PortStateChange (and trap).
    /// Clears every switch's PortStateChange, as an SM's programming does
    /// (for tests that start from a fabric no SM has programmed).
    pub fn clear_port_state_changes(&mut self) {
        for sw in &mut self.switches {
            sw.info.port_state_change = false;
        }
    }

    pub fn link_down(&mut self, port: PortRef) -> Result<(), SimError> {
        let id = self.resolve(port)?;
        let peer = self.port(id).peer;
        if peer == NO_PORT {
            return Err(SimError::NotCabled(port));
        }
        self.cable_goes_down([id, PortId(peer)], |p| p.cut = true);
        Ok(())
    }

    /// Both ends of a cable go Down/Polling (a disabled end stays so),
    /// each changed by `change` first; if the link was up, the switches at
    /// either end raise PortStateChange (and trap).
    fn cable_goes_down(&mut self, ends: [PortId; 2], change: impl Fn(&mut super::fabric::SimPort)) {
        let was_up = self.live_peer(ends[0]).is_some();
        for p in ends {
            let x = self.port_mut(p);
            change(x);
            if x.pi.port_physical_state != PhysState::Disabled {
                x.pi.port_state = crate::mad::PortState::Down;
                x.pi.port_physical_state = PhysState::Polling;
            }
        }
        if was_up {
            for p in ends {
                self.port_state_changed(self.port(p).node);
            }
        }
    }

    /// Plugs the cable back: if both ends can train they come up in Init
    /// (LIDs kept) and their switches raise PortStateChange.
    pub fn link_up(&mut self, port: PortRef) -> Result<(), SimError> {
        let id = self.resolve(port)?;
        let peer = self.port(id).peer;
        if peer == NO_PORT {
            return Err(SimError::NotCabled(port));
        }
        self.port_mut(id).cut = false;
        self.port_mut(PortId(peer)).cut = false;
        if self.link_up_state(id) {
            return Ok(());
        }
        if let Some(peer) = self.can_train(id) {
            self.train(id, peer);
            for p in [id, peer] {
                self.port_state_changed(self.port(p).node);
            }
        }
        Ok(())
    }

    /// Moves the cable plugged into `from` to port `to` (of this or
    /// another node): `from` goes Down/Polling, uncabled; a cable in `to`
    /// is pulled out first (its far end goes Down/Polling, uncabled); the
    /// moved cable's far end trains with `to` if both can. Switches at
    /// every end that saw a change raise PortStateChange (and trap), as a
    /// technician re-cabling a live fabric makes them do.
    pub fn move_cable(&mut self, from: PortRef, to: PortRef) -> Result<(), SimError> {
        let old = self.resolve(from)?;
        let new = self.resolve(to)?;
        if self.port(old).peer == NO_PORT || from.port == 0 {
            return Err(SimError::NotCabled(from));
        }
        if to.port == 0 || new == old {
            return Err(SimError::PortTaken(to));
        }
        if self.port(new).peer != NO_PORT {
            self.pull_cable(new);
        }
        let far = self.pull_cable(old);
        self.port_mut(far).peer = new.0;
        self.port_mut(new).peer = far.0;
        if let Some(peer) = self.can_train(new) {
            self.train(new, peer);
            for p in [new, peer] {
                self.port_state_changed(self.port(p).node);
            }
        }
        Ok(())
    }

    /// Pulls the cable out of `id` (cabled): both ends go Down/Polling and
    /// uncabled, and switches that saw their link go raise PortStateChange.
    /// Returns the far end.
    fn pull_cable(&mut self, id: PortId) -> PortId {
        let far = PortId(self.port(id).peer);
        self.cable_goes_down([id, far], |p| {
            p.peer = NO_PORT;
            p.cut = false;
        });
        far
    }

    fn link_up_state(&self, id: PortId) -> bool {
        self.live_peer(id).is_some()
    }

    /// The node stops: it answers and forwards nothing, its links go down
    /// (neighbours Down/Polling, their switches raise PortStateChange).
    pub fn crash_node(&mut self, node: NodeIdx) -> Result<(), SimError> {
        let n = self.nodes.get(node.0).ok_or(SimError::NoSuchNode(format!("#{}", node.0)))?;
        if n.crashed {
            return Ok(());
        }
        let (base, num) = (n.port_base, n.num_ports);
        let mut neighbours = Vec::new();
        for p in 1..=num {
            let id = PortId(base + p as u32);
            if let Some(peer) = self.live_peer(id) {
                neighbours.push(self.port(peer).node);
            }
            self.drop_link(id, PhysState::Disabled);
        }
        self.nodes[node.0].crashed = true;
        for n in neighbours {
            self.port_state_changed(n);
        }
        Ok(())
    }

    /// The node powers up again with fresh state (LIDs 0, empty LFT,
    /// default tables, M_Key 0); its cables train to Init at both ends,
    /// neighbours keep their LIDs and raise PortStateChange.
    pub fn restart_node(&mut self, node: NodeIdx) -> Result<(), SimError> {
        let n = self.nodes.get(node.0).ok_or(SimError::NoSuchNode(format!("#{}", node.0)))?;
        let (base, num, enhanced) = (n.port_base, n.num_ports, n.enhanced_port0);
        for p in 0..=num {
            let id = PortId(base + p as u32);
            let (kind, width, speed) = {
                let x = self.port(id);
                (x.kind, x.pi.link_width_enabled, x.pi.link_speed_enabled)
            };
            let mtu_cap = self.cfg.mtu_cap;
            let x = self.port_mut(id);
            x.pi = profile::fresh_port_info(kind, false, mtu_cap);
            if kind != PortKind::SwitchManagement && x.peer != NO_PORT {
                // Enabled width/speed come from the cable, not the SM.
                x.pi.link_width_enabled = width;
                x.pi.link_speed_enabled = speed;
            }
            x.lease_deadline = None;
            x.reregistrations = 0;
            x.tables = None;
        }
        let (cap, mcap) = (self.cfg.linear_fdb_cap, self.cfg.multicast_fdb_cap);
        if let Some(sw) = self.switch_mut(node.0 as u32) {
            sw.info = profile::fresh_switch_info(cap, mcap, enhanced);
            sw.lft = Vec::new();
            sw.mft = Vec::new();
            sw.sl2vl = Vec::new();
        }
        self.nodes[node.0].crashed = false;
        for dev in self.devices.iter().filter(|d| d.attached && d.is_sm) {
            let p = dev.port;
            if self.ports[p.0 as usize].node as usize == node.0 {
                self.ports[p.0 as usize].pi.capability_mask |= CapabilityMask::IS_SM;
            }
        }
        for p in 1..=num {
            let id = PortId(base + p as u32);
            if let Some(peer) = self.can_train(id) {
                self.train(id, peer);
                self.port_state_changed(self.port(peer).node);
            }
        }
        Ok(())
    }

    // ---- the device side ---------------------------------------------------

    pub(crate) fn device_send(&mut self, dev: DevId, dgram: &Datagram) -> Result<(), DeviceError> {
        self.catch_up_with_real_time();
        let slot = self.devices.get(dev.0 as usize).filter(|d| d.attached).ok_or(DeviceError::Closed)?;
        let src = slot.port;
        self.schedule(
            Duration::ZERO,
            Event::Inject { src, from_dev: Some(dev), addr: dgram.addr, mad: dgram.mad.clone() },
        );
        Ok(())
    }

    /// Paced: the clock never lags real time. Without this it stood still
    /// while every device was idle, and the next device to wait for a
    /// timeout then ran it to that deadline at once, before another SM's
    /// thread had had the real time to answer (a standby's polls timed out
    /// in microseconds and were answered as strays).
    fn catch_up_with_real_time(&mut self) {
        let Some(paced) = self.paced_now() else { return };
        while self.queue.peek().is_some_and(|s| s.at <= paced) {
            self.step();
        }
        self.now = self.now.max(paced);
    }

    pub(crate) fn device_recv(&mut self, dev: DevId, deadline: Duration) -> Result<Option<Datagram>, DeviceError> {
        self.catch_up_with_real_time();
        let deadline = self.wait_bound(deadline);
        loop {
            let slot = self.devices.get_mut(dev.0 as usize).filter(|d| d.attached).ok_or(DeviceError::Closed)?;
            if let Some(d) = slot.mailbox.pop_front() {
                return Ok(Some(d));
            }
            match self.queue.peek() {
                Some(s) if s.at <= deadline => self.step(),
                _ => {
                    self.now = self.now.max(deadline);
                    return Ok(None);
                }
            }
        }
    }
}
