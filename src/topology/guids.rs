//! The GUIDs ibsim gives the nodes of a net file, so a fabric has the same
//! GUIDs in the in-process simulator as in ibsim.
//!
//! ibsim 0.10 (sim_net.c, `new_node`/`init_ports`/`parse_guidbase`) keeps one
//! running counter per node type, advanced in file order; observed with
//! `smpquery -D nodeinfo` on the example nets:
//!
//! - switches start at 0x200000; each takes one GUID: node GUID = system GUID
//!   = port 0 GUID = counter, then counter += 1;
//! - CAs start at 0x100000; a CA with n ports takes n + 1 GUIDs: node GUID =
//!   counter, port p GUID = counter + p, then counter += n + 1;
//! - routers follow the CA rule. Their start value is read out of bounds of
//!   ibsim's per-type table; the installed build yields 0 (observed: a 2-port
//!   router first in file gets node GUID 0, port 1 GUID 1), so we use 0 and the
//!   writer always states router GUIDs explicitly;
//! - `switchguid=X` / `caguid=X` (also `hcaguids=`) / `rtguid=X` sets that
//!   type's counter and its base to X; `switchguid+X` sets counter = base + X;
//! - `sysimgguid=X` (X != 0) makes the next node's NodeInfo.SystemImageGUID X;
//!   otherwise the system GUID is the node GUID;
//! - names such as `S-0002c9...` or `(guid)` annotations do NOT set GUIDs.

use super::{NodeKind, Topology};
use crate::types::Guid;

/// ibsim's first switch node GUID.
pub const IBSIM_SWITCH_BASE: u64 = 0x20_0000;
/// ibsim's first CA node GUID.
pub const IBSIM_CA_BASE: u64 = 0x10_0000;
/// The first router node GUID the installed ibsim 0.10 build gives (see the
/// module doc: not a designed value).
pub const IBSIM_ROUTER_BASE: u64 = 0;

fn slot(kind: NodeKind) -> usize {
    match kind {
        NodeKind::Switch => 0,
        NodeKind::Ca => 1,
        NodeKind::Router => 2,
    }
}

/// ibsim's per-type GUID counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuidCounters {
    base: [u64; 3],
    next: [u64; 3],
}

impl Default for GuidCounters {
    fn default() -> Self {
        let base = [IBSIM_SWITCH_BASE, IBSIM_CA_BASE, IBSIM_ROUTER_BASE];
        GuidCounters { base, next: base }
    }
}

impl GuidCounters {
    pub fn new() -> Self {
        Self::default()
    }

    /// The node GUID the next node of `kind` will get.
    pub fn peek(&self, kind: NodeKind) -> u64 {
        self.next[slot(kind)]
    }

    /// `switchguid=X`: counter and base become X.
    pub fn set_absolute(&mut self, kind: NodeKind, value: u64) {
        self.base[slot(kind)] = value;
        self.next[slot(kind)] = value;
    }

    /// `switchguid+X`: counter becomes base + X.
    pub fn set_relative(&mut self, kind: NodeKind, offset: u64) {
        let s = slot(kind);
        self.next[s] = self.base[s].wrapping_add(offset);
    }

    /// Takes the GUIDs of one node with `num_ports` ports; returns its node GUID.
    pub fn allocate(&mut self, kind: NodeKind, num_ports: u8) -> u64 {
        let s = slot(kind);
        let guid = self.next[s];
        let step = match kind {
            NodeKind::Switch => 1,
            NodeKind::Ca | NodeKind::Router => num_ports as u64 + 1,
        };
        self.next[s] = guid.wrapping_add(step);
        guid
    }
}

/// The port GUID table ibsim derives from a node GUID (the layout of
/// `Node::port_guids`): a switch has one, on port 0; a CA or router port p
/// has node GUID + p.
pub fn ibsim_port_guids(kind: NodeKind, node_guid: u64, num_ports: u8) -> Vec<Guid> {
    match kind {
        NodeKind::Switch => vec![Guid(node_guid)],
        NodeKind::Ca | NodeKind::Router => (0..=num_ports as u64).map(|p| Guid(node_guid.wrapping_add(p))).collect(),
    }
}

/// Gives every node the GUIDs ibsim would give it in a file listing the nodes
/// in this order with no GUID lines (system GUID = node GUID).
pub fn assign_ibsim_guids(topo: &mut Topology) {
    let mut counters = GuidCounters::new();
    for node in &mut topo.nodes {
        let g = counters.allocate(node.kind, node.num_ports);
        node.node_guid = Guid(g);
        node.system_guid = Guid(g);
        node.port_guids = ibsim_port_guids(node.kind, g, node.num_ports);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_follow_ibsim_example_net() {
        // net: Switch1, Switch2, Hca1 (2 ports), Hca2 (2 ports); ibsim reports
        // 0x200000, 0x200001, 0x100000 (ports 0x100001..2), 0x100003.
        let mut c = GuidCounters::new();
        assert_eq!(c.allocate(NodeKind::Switch, 8), 0x200000);
        assert_eq!(c.allocate(NodeKind::Switch, 8), 0x200001);
        assert_eq!(c.allocate(NodeKind::Ca, 2), 0x100000);
        assert_eq!(c.allocate(NodeKind::Ca, 2), 0x100003);
        assert_eq!(ibsim_port_guids(NodeKind::Ca, 0x100003, 2)[2], Guid(0x100005));
    }

    #[test]
    fn relative_assignment_is_from_the_last_absolute_base() {
        let mut c = GuidCounters::new();
        c.set_absolute(NodeKind::Ca, 0xabc0);
        assert_eq!(c.allocate(NodeKind::Ca, 2), 0xabc0);
        c.set_relative(NodeKind::Ca, 0x10);
        assert_eq!(c.peek(NodeKind::Ca), 0xabd0);
        // Other types are untouched.
        assert_eq!(c.peek(NodeKind::Switch), IBSIM_SWITCH_BASE);
    }

    #[test]
    fn router_counter_wraps_instead_of_overflowing() {
        let mut c = GuidCounters::new();
        c.set_absolute(NodeKind::Router, u64::MAX);
        assert_eq!(c.allocate(NodeKind::Router, 2), u64::MAX);
        assert_eq!(c.peek(NodeKind::Router), 2);
    }
}
