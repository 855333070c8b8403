//! Every node's performance management agent (PMA, IBA 16.1): PerfMgt
//! Get(ClassPortInfo), Get/Set(PortCounters) and Get/Set
//! (PortCountersExtended), answered from per-port counters the fabric
//! counts as MADs cross links, like ibsim's `pc_*` bookkeeping.
//!
//! - Every packet that crosses a link adds 1 to PortXmitPkts at the port it
//!   leaves and PortRcvPkts where it arrives, and 72 words (288 bytes:
//!   LRH, BTH, DETH, the MAD and ICRC, as ibsim counts a MAD) to
//!   PortXmitData/PortRcvData; the 64-bit copies (all unicast) too. The
//!   32-bit counters stop at their maximum as hardware's do.
//! - A switch's PMA answers at its LID (port 0) for any port PortSelect
//!   names (0xFF: all ports summed); a CA's only for the port it was asked
//!   at, as ibsim's. Set clears the counters CounterSelect names.
//! - Unlike ibsim (whose PerfMgt ClassPortInfo echoes the request, zeros:
//!   no extended counters), ClassPortInfo answers a real CapabilityMask:
//!   by default AllPortSelect, IsExtendedWidthSupported and
//!   PortXmitWait, as a current HCA or switch; [`Fabric::set_pma_capability`]
//!   changes it per node (0: a PMA without PortCountersExtended).
//!
//! [`Fabric::performance_set`] sets a counter by its IBA name, as ibsim's
//! `PerformanceSet` console command does, for tests.

use std::cell::RefCell;
use std::collections::HashMap;

use super::engine::{Arrival, Event};
use super::fabric::{Fabric, PortId};
use super::fault::{Direction, Verdict};
use super::route::Traffic;
use super::{DropReason, SimError};
use crate::mad::class_port_info::{class_cap, ClassPortInfoRepr};
use crate::mad::header::status;
use crate::mad::perf::port_counters::{select, select2};
use crate::mad::perf::port_counters_ext::select as ext_select;
use crate::mad::perf::{
    perf_cap, PerfAttributeId, PerfMadRepr, PortCountersExtendedRepr, PortCountersRepr, ALL_PORTS, PERF_DATA_LEN,
};
use crate::mad::Method;
use crate::topology::{NodeIdx, NodeKind, PortRef};
use crate::transport::{Datagram, MadAddress};

/// Words one MAD adds to PortXmitData/PortRcvData per link crossed.
const MAD_WORDS: u32 = 72;

/// The CapabilityMask a PMA answers unless a test sets another.
pub const DEFAULT_PMA_CAPABILITY: u16 =
    perf_cap::ALL_PORT_SELECT | perf_cap::IS_EXTENDED_WIDTH_SUPPORTED | perf_cap::IS_PORT_COUNTERS_XMIT_WAIT_SUPPORTED;

/// One port's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SimCounters {
    pub pc: PortCountersRepr,
    pub ext: PortCountersExtendedRepr,
}

/// The PMAs' state. Counting happens inside `&self` route walks, hence
/// the cell: the fabric is only ever used under its mutex.
#[derive(Debug, Default)]
pub(crate) struct Pma {
    /// By port index, grown as ports first count.
    counters: RefCell<Vec<SimCounters>>,
    /// CapabilityMask by node index, where a test changed it.
    caps: HashMap<u32, u16>,
}

impl Pma {
    /// A packet left `out` and arrived at `peer`.
    pub(crate) fn count_crossing(&self, out: PortId, peer: PortId) {
        let mut v = self.counters.borrow_mut();
        let need = out.0.max(peer.0) as usize + 1;
        if v.len() < need {
            v.resize(need, SimCounters::default());
        }
        let o = &mut v[out.0 as usize];
        o.pc.port_xmit_pkts = o.pc.port_xmit_pkts.saturating_add(1);
        o.pc.port_xmit_data = o.pc.port_xmit_data.saturating_add(MAD_WORDS);
        o.ext.port_xmit_pkts = o.ext.port_xmit_pkts.saturating_add(1);
        o.ext.port_unicast_xmit_pkts = o.ext.port_unicast_xmit_pkts.saturating_add(1);
        o.ext.port_xmit_data = o.ext.port_xmit_data.saturating_add(MAD_WORDS.into());
        let p = &mut v[peer.0 as usize];
        p.pc.port_rcv_pkts = p.pc.port_rcv_pkts.saturating_add(1);
        p.pc.port_rcv_data = p.pc.port_rcv_data.saturating_add(MAD_WORDS);
        p.ext.port_rcv_pkts = p.ext.port_rcv_pkts.saturating_add(1);
        p.ext.port_unicast_rcv_pkts = p.ext.port_unicast_rcv_pkts.saturating_add(1);
        p.ext.port_rcv_data = p.ext.port_rcv_data.saturating_add(MAD_WORDS.into());
    }

    fn get(&self, port: PortId) -> SimCounters {
        self.counters.borrow().get(port.0 as usize).copied().unwrap_or_default()
    }

    fn with<R>(&self, port: PortId, f: impl FnOnce(&mut SimCounters) -> R) -> R {
        let mut v = self.counters.borrow_mut();
        if v.len() <= port.0 as usize {
            v.resize(port.0 as usize + 1, SimCounters::default());
        }
        f(&mut v[port.0 as usize])
    }
}

/// Clears the PortCounters fields `sel`/`sel2` name.
fn clear_counters(c: &mut PortCountersRepr, sel: u16, sel2: u8) {
    let on = |bit: u16| sel & bit != 0;
    if on(select::SYMBOL_ERROR_COUNTER) {
        c.symbol_error_counter = 0;
    }
    if on(select::LINK_ERROR_RECOVERY_COUNTER) {
        c.link_error_recovery_counter = 0;
    }
    if on(select::LINK_DOWNED_COUNTER) {
        c.link_downed_counter = 0;
    }
    if on(select::PORT_RCV_ERRORS) {
        c.port_rcv_errors = 0;
    }
    if on(select::PORT_RCV_REMOTE_PHYSICAL_ERRORS) {
        c.port_rcv_remote_physical_errors = 0;
    }
    if on(select::PORT_RCV_SWITCH_RELAY_ERRORS) {
        c.port_rcv_switch_relay_errors = 0;
    }
    if on(select::PORT_XMIT_DISCARDS) {
        c.port_xmit_discards = 0;
    }
    if on(select::PORT_XMIT_CONSTRAINT_ERRORS) {
        c.port_xmit_constraint_errors = 0;
    }
    if on(select::PORT_RCV_CONSTRAINT_ERRORS) {
        c.port_rcv_constraint_errors = 0;
    }
    if on(select::LOCAL_LINK_INTEGRITY_ERRORS) {
        c.local_link_integrity_errors = 0;
    }
    if on(select::EXCESSIVE_BUFFER_OVERRUN_ERRORS) {
        c.excessive_buffer_overrun_errors = 0;
    }
    if on(select::VL15_DROPPED) {
        c.vl15_dropped = 0;
    }
    if on(select::PORT_XMIT_DATA) {
        c.port_xmit_data = 0;
    }
    if on(select::PORT_RCV_DATA) {
        c.port_rcv_data = 0;
    }
    if on(select::PORT_XMIT_PKTS) {
        c.port_xmit_pkts = 0;
    }
    if on(select::PORT_RCV_PKTS) {
        c.port_rcv_pkts = 0;
    }
    if sel2 & select2::PORT_XMIT_WAIT != 0 {
        c.port_xmit_wait = 0;
    }
    if sel2 & select2::QP1_DROPPED != 0 {
        c.qp1_dropped = 0;
    }
}

fn clear_ext(e: &mut PortCountersExtendedRepr, sel: u16) {
    let fields: [(u16, &mut u64); 8] = [
        (ext_select::PORT_XMIT_DATA, &mut e.port_xmit_data),
        (ext_select::PORT_RCV_DATA, &mut e.port_rcv_data),
        (ext_select::PORT_XMIT_PKTS, &mut e.port_xmit_pkts),
        (ext_select::PORT_RCV_PKTS, &mut e.port_rcv_pkts),
        (ext_select::PORT_UNICAST_XMIT_PKTS, &mut e.port_unicast_xmit_pkts),
        (ext_select::PORT_UNICAST_RCV_PKTS, &mut e.port_unicast_rcv_pkts),
        (ext_select::PORT_MULTICAST_XMIT_PKTS, &mut e.port_multicast_xmit_pkts),
        (ext_select::PORT_MULTICAST_RCV_PKTS, &mut e.port_multicast_rcv_pkts),
    ];
    for (bit, f) in fields {
        if sel & bit != 0 {
            *f = 0;
        }
    }
}

/// Sums `b` into `a`, each field stopping at its maximum (PortSelect 0xFF).
fn sum(a: &mut SimCounters, b: &SimCounters) {
    let (x, y) = (&mut a.pc, &b.pc);
    x.symbol_error_counter = x.symbol_error_counter.saturating_add(y.symbol_error_counter);
    x.link_error_recovery_counter = x.link_error_recovery_counter.saturating_add(y.link_error_recovery_counter);
    x.link_downed_counter = x.link_downed_counter.saturating_add(y.link_downed_counter);
    x.port_rcv_errors = x.port_rcv_errors.saturating_add(y.port_rcv_errors);
    x.port_rcv_remote_physical_errors =
        x.port_rcv_remote_physical_errors.saturating_add(y.port_rcv_remote_physical_errors);
    x.port_rcv_switch_relay_errors = x.port_rcv_switch_relay_errors.saturating_add(y.port_rcv_switch_relay_errors);
    x.port_xmit_discards = x.port_xmit_discards.saturating_add(y.port_xmit_discards);
    x.port_xmit_constraint_errors = x.port_xmit_constraint_errors.saturating_add(y.port_xmit_constraint_errors);
    x.port_rcv_constraint_errors = x.port_rcv_constraint_errors.saturating_add(y.port_rcv_constraint_errors);
    x.local_link_integrity_errors = (x.local_link_integrity_errors + y.local_link_integrity_errors).min(15);
    x.excessive_buffer_overrun_errors = (x.excessive_buffer_overrun_errors + y.excessive_buffer_overrun_errors).min(15);
    x.vl15_dropped = x.vl15_dropped.saturating_add(y.vl15_dropped);
    x.qp1_dropped = x.qp1_dropped.saturating_add(y.qp1_dropped);
    x.port_xmit_data = x.port_xmit_data.saturating_add(y.port_xmit_data);
    x.port_rcv_data = x.port_rcv_data.saturating_add(y.port_rcv_data);
    x.port_xmit_pkts = x.port_xmit_pkts.saturating_add(y.port_xmit_pkts);
    x.port_rcv_pkts = x.port_rcv_pkts.saturating_add(y.port_rcv_pkts);
    x.port_xmit_wait = x.port_xmit_wait.saturating_add(y.port_xmit_wait);
    let (x, y) = (&mut a.ext, &b.ext);
    x.port_xmit_data = x.port_xmit_data.saturating_add(y.port_xmit_data);
    x.port_rcv_data = x.port_rcv_data.saturating_add(y.port_rcv_data);
    x.port_xmit_pkts = x.port_xmit_pkts.saturating_add(y.port_xmit_pkts);
    x.port_rcv_pkts = x.port_rcv_pkts.saturating_add(y.port_rcv_pkts);
    x.port_unicast_xmit_pkts = x.port_unicast_xmit_pkts.saturating_add(y.port_unicast_xmit_pkts);
    x.port_unicast_rcv_pkts = x.port_unicast_rcv_pkts.saturating_add(y.port_unicast_rcv_pkts);
    x.port_multicast_xmit_pkts = x.port_multicast_xmit_pkts.saturating_add(y.port_multicast_xmit_pkts);
    x.port_multicast_rcv_pkts = x.port_multicast_rcv_pkts.saturating_add(y.port_multicast_rcv_pkts);
}

impl Fabric {
    /// The CapabilityMask `node`'s PMA answers in its ClassPortInfo.
    pub fn pma_capability(&self, node: NodeIdx) -> u16 {
        self.pma.caps.get(&(node.0 as u32)).copied().unwrap_or(DEFAULT_PMA_CAPABILITY)
    }

    /// Makes `node`'s PMA answer `mask` (0: no PortCountersExtended, as
    /// ibsim's PMA appears to a manager).
    pub fn set_pma_capability(&mut self, node: NodeIdx, mask: u16) {
        self.pma.caps.insert(node.0 as u32, mask);
    }

    /// `port`'s PortCounters and PortCountersExtended as its PMA holds them.
    pub fn port_counters(&self, port: PortRef) -> Result<(PortCountersRepr, PortCountersExtendedRepr), SimError> {
        let c = self.pma.get(self.resolve(port)?);
        Ok((c.pc, c.ext))
    }

    /// Sets one counter of `port` by its IBA name (case-insensitive, as
    /// ibsim's `PerformanceSet <node> <port> <counter> <value>`), the value
    /// cut to the field's maximum. The data, packet and unicast/multicast
    /// counters set both their 32-bit and 64-bit copies where both exist.
    pub fn performance_set(&mut self, port: PortRef, counter: &str, value: u64) -> Result<(), SimError> {
        let id = self.resolve(port)?;
        let v16 = value.min(u16::MAX.into()) as u16;
        let v8 = value.min(u8::MAX.into()) as u8;
        let v4 = value.min(15) as u8;
        let v32 = value.min(u32::MAX.into()) as u32;
        let name = counter.to_ascii_lowercase();
        self.pma.with(id, |c| {
            let (p, e) = (&mut c.pc, &mut c.ext);
            match name.as_str() {
                "symbolerrorcounter" => p.symbol_error_counter = v16,
                "linkerrorrecoverycounter" => p.link_error_recovery_counter = v8,
                "linkdownedcounter" => p.link_downed_counter = v8,
                "portrcverrors" => p.port_rcv_errors = v16,
                "portrcvremotephysicalerrors" => p.port_rcv_remote_physical_errors = v16,
                "portrcvswitchrelayerrors" => p.port_rcv_switch_relay_errors = v16,
                "portxmitdiscards" => p.port_xmit_discards = v16,
                "portxmitconstrainterrors" => p.port_xmit_constraint_errors = v8,
                "portrcvconstrainterrors" => p.port_rcv_constraint_errors = v8,
                "locallinkintegrityerrors" => p.local_link_integrity_errors = v4,
                "excessivebufferoverrunerrors" => p.excessive_buffer_overrun_errors = v4,
                "vl15dropped" => p.vl15_dropped = v16,
                "qp1dropped" => p.qp1_dropped = v16,
                "portxmitwait" => p.port_xmit_wait = v32,
                "portxmitdata" => (p.port_xmit_data, e.port_xmit_data) = (v32, value),
                "portrcvdata" => (p.port_rcv_data, e.port_rcv_data) = (v32, value),
                "portxmitpkts" => (p.port_xmit_pkts, e.port_xmit_pkts) = (v32, value),
                "portrcvpkts" => (p.port_rcv_pkts, e.port_rcv_pkts) = (v32, value),
                "portunicastxmitpkts" => e.port_unicast_xmit_pkts = value,
                "portunicastrcvpkts" => e.port_unicast_rcv_pkts = value,
                "portmulticastxmitpkts" => e.port_multicast_xmit_pkts = value,
                "portmulticastrcvpkts" => e.port_multicast_rcv_pkts = value,
                _ => return Err(SimError::NoSuchCounter(counter.to_string())),
            }
            Ok(())
        })
    }

    /// A PerfMgt request arrived at `a.at`: the node's PMA answers it,
    /// LID-routed back to the requester.
    pub(crate) fn pma_request(&mut self, a: Arrival) {
        let Ok(req) = PerfMadRepr::parse_bytes(&a.mad) else {
            return self.count_drop(DropReason::BadMad);
        };
        let (st, data) = self.pma_answer(a.at, &req);
        let mut resp = req;
        resp.header.method = Method::GetResp;
        resp.header.status = st;
        if let Some(d) = data {
            resp.data = d;
        }
        let responder = self.port(a.at).node;
        let mgmt = self.mgmt_port(a.at);
        let from = self.port(mgmt).pi.lid;
        let r = match self.lid_route(a.at, a.src.lid, Traffic::Data) {
            Ok(r) => r,
            Err(reason) => return self.count_drop(reason),
        };
        let mad = resp.to_bytes();
        let ctx = self.context(responder, &mad, Direction::Response);
        let Some(dev) = self.listener(r.port, a.from_dev) else {
            return self.count_drop(DropReason::NoListener);
        };
        let dgram = Datagram { addr: MadAddress { lid: from, ..MadAddress::gsi(from, 0) }, mad };
        let base = self.cfg.processing + self.cfg.hop_latency * r.hops;
        match self.apply_rules(ctx) {
            Verdict::Drop => {}
            Verdict::Hold(h) => self.park(h, Event::Deliver { dev, dgram }),
            Verdict::Deliver { delay } => self.schedule(base + delay, Event::Deliver { dev, dgram }),
        }
    }

    /// The status and data of the PMA's answer to `req` arriving at `at`.
    fn pma_answer(&mut self, at: PortId, req: &PerfMadRepr) -> (u16, Option<[u8; PERF_DATA_LEN]>) {
        let method = req.header.method;
        if !matches!(method, Method::Get | Method::Set) {
            return (status::METHOD_UNSUPPORTED, None);
        }
        let node = self.port(at).node;
        let caps = self.pma_capability(NodeIdx(node as usize));
        match req.attribute() {
            PerfAttributeId::ClassPortInfo if method == Method::Get => {
                let cpi = ClassPortInfoRepr {
                    base_version: 1,
                    class_version: 1,
                    capability_mask: caps & !(class_cap::IS_TRAP_SUPPORTED | class_cap::IS_GET_SET_NOTICE_SUPPORTED),
                    // 4.096 us * 2^18, about 1 s: what ibsim's SMA reports.
                    resp_time_value: 18,
                    ..Default::default()
                };
                let mut data = [0u8; PERF_DATA_LEN];
                cpi.emit(&mut data).expect("the data area holds ClassPortInfo");
                (0, Some(data))
            }
            PerfAttributeId::PortCounters => {
                let Ok(asked) = PortCountersRepr::parse_bytes(&req.data) else { return (status::INVALID_FIELD, None) };
                let Some(ports) = self.pma_ports(at, asked.port_select, caps) else {
                    return (status::INVALID_FIELD, None);
                };
                let mut total = SimCounters::default();
                for p in ports {
                    if method == Method::Set {
                        self.pma.with(p, |c| clear_counters(&mut c.pc, asked.counter_select, asked.counter_select2));
                    }
                    sum(&mut total, &self.pma.get(p));
                }
                let mut out = total.pc;
                out.port_select = asked.port_select;
                out.counter_select = asked.counter_select;
                out.counter_select2 = asked.counter_select2;
                (0, Some(out.to_data()))
            }
            PerfAttributeId::PortCountersExtended if perf_cap::has_extended(caps) => {
                let Ok(asked) = PortCountersExtendedRepr::parse_bytes(&req.data) else {
                    return (status::INVALID_FIELD, None);
                };
                let Some(ports) = self.pma_ports(at, asked.port_select, caps) else {
                    return (status::INVALID_FIELD, None);
                };
                let mut total = SimCounters::default();
                for p in ports {
                    if method == Method::Set {
                        self.pma.with(p, |c| clear_ext(&mut c.ext, asked.counter_select));
                    }
                    sum(&mut total, &self.pma.get(p));
                }
                let mut out = total.ext;
                if caps & perf_cap::IS_EXTENDED_WIDTH_SUPPORTED == 0 {
                    // NoIETF: only the first four counters are kept.
                    out.port_unicast_xmit_pkts = 0;
                    out.port_unicast_rcv_pkts = 0;
                    out.port_multicast_xmit_pkts = 0;
                    out.port_multicast_rcv_pkts = 0;
                }
                out.port_select = asked.port_select;
                out.counter_select = asked.counter_select;
                (0, Some(out.to_data()))
            }
            _ => (status::METHOD_ATTR_UNSUPPORTED, None),
        }
    }

    /// The ports PortSelect `sel` names at the PMA reached through `at`.
    fn pma_ports(&self, at: PortId, sel: u8, caps: u16) -> Option<Vec<PortId>> {
        let p = self.port(at);
        let node = &self.nodes[p.node as usize];
        if node.kind != NodeKind::Switch {
            return (sel == p.num).then(|| vec![at]);
        }
        if sel == ALL_PORTS {
            if caps & perf_cap::ALL_PORT_SELECT == 0 {
                return None;
            }
            return Some((1..=node.num_ports).map(|n| self.port_id(p.node, n)).collect());
        }
        (sel <= node.num_ports).then(|| vec![self.port_id(p.node, sel)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::FabricBuilder;
    use crate::topology::Topology;

    fn fabric() -> (Topology, Fabric) {
        let topo = Topology::from_spec_or_file("fattree2:radix=4,leaves=2,spines=1,hosts=2").unwrap();
        let f = FabricBuilder::new(&topo).seed(1).build().unwrap();
        (topo, f)
    }

    #[test]
    fn performance_set_names_counters_as_ibsim_does_and_cuts_to_the_field() {
        let (topo, mut f) = fabric();
        let host = PortRef { node: topo.hosts().next().unwrap(), port: 1 };
        f.performance_set(host, "SymbolErrorCounter", 70_000).unwrap();
        f.performance_set(host, "localLinkIntegrityErrors", 20).unwrap();
        f.performance_set(host, "PortXmitData", 1 << 40).unwrap();
        let (pc, ext) = f.port_counters(host).unwrap();
        assert_eq!((pc.symbol_error_counter, pc.local_link_integrity_errors), (u16::MAX, 15));
        assert_eq!((pc.port_xmit_data, ext.port_xmit_data), (u32::MAX, 1 << 40));
        assert_eq!(f.performance_set(host, "Bogus", 1), Err(SimError::NoSuchCounter("Bogus".into())));
        assert!(f.performance_set(PortRef { node: host.node, port: 9 }, "PortRcvErrors", 1).is_err());
    }

    #[test]
    fn crossings_count_both_ends_and_32_bit_counters_stop_at_their_maximum() {
        let (topo, mut f) = fabric();
        let host = PortRef { node: topo.hosts().next().unwrap(), port: 1 };
        let (a, b) = (f.resolve(host).unwrap(), PortId(f.port(f.resolve(host).unwrap()).peer));
        f.performance_set(host, "PortXmitPkts", u64::from(u32::MAX) - 1).unwrap();
        for _ in 0..3 {
            f.pma.count_crossing(a, b);
        }
        let (pc, ext) = f.port_counters(host).unwrap();
        assert_eq!(pc.port_xmit_pkts, u32::MAX, "saturated, not wrapped");
        assert_eq!(ext.port_xmit_pkts, u64::from(u32::MAX) + 2);
        assert_eq!((pc.port_xmit_data, ext.port_unicast_xmit_pkts), (3 * MAD_WORDS, 3));
        let (peer, _) = f.port_counters(f.port_ref(b)).unwrap();
        assert_eq!((peer.port_rcv_pkts, peer.port_rcv_data, peer.port_xmit_pkts), (3, 3 * MAD_WORDS, 0));
    }

    #[test]
    fn sets_clear_what_counter_select_names_and_all_ports_sum() {
        let mut c = SimCounters::default();
        c.pc.port_rcv_errors = 5;
        c.pc.symbol_error_counter = 6;
        c.pc.port_xmit_wait = 7;
        c.ext.port_rcv_data = 8;
        let mut total = SimCounters::default();
        sum(&mut total, &c);
        sum(&mut total, &c);
        assert_eq!((total.pc.port_rcv_errors, total.ext.port_rcv_data), (10, 16));
        clear_counters(&mut c.pc, select::PORT_RCV_ERRORS, select2::PORT_XMIT_WAIT);
        assert_eq!((c.pc.port_rcv_errors, c.pc.symbol_error_counter, c.pc.port_xmit_wait), (0, 6, 0));
        clear_ext(&mut c.ext, ext_select::PORT_RCV_DATA);
        assert_eq!(c.ext.port_rcv_data, 0);
        let (topo, mut f) = fabric();
        let sw = topo.nodes.iter().position(|n| n.kind == NodeKind::Switch).unwrap();
        assert_eq!(f.pma_capability(NodeIdx(sw)), DEFAULT_PMA_CAPABILITY);
        f.set_pma_capability(NodeIdx(sw), 0);
        assert_eq!(f.pma_capability(NodeIdx(sw)), 0);
        let p0 = f.resolve(PortRef { node: NodeIdx(sw), port: 0 }).unwrap();
        assert!(f.pma_ports(p0, ALL_PORTS, 0).is_none(), "0xFF needs AllPortSelect");
        assert_eq!(
            f.pma_ports(p0, ALL_PORTS, DEFAULT_PMA_CAPABILITY).unwrap().len(),
            topo.nodes[sw].num_ports as usize
        );
        assert!(f.pma_ports(p0, 99, DEFAULT_PMA_CAPABILITY).is_none());
    }
}
