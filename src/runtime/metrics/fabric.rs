//! Nodes, ports and links by kind and state, counted from a sweep's subnet
//! for the gauges. Label values are fixed names, so a fabric of any size
//! adds at most 4 node kinds x 7 port states series.

use std::collections::BTreeMap;

use crate::mad::{NodeType, PortState};
use crate::subnet::{NodeId, Subnet, SubnetPort};

/// What the gauges show.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    /// By node kind.
    pub nodes: BTreeMap<&'static str, i64>,
    pub quarantined: i64,
    /// By (node kind, port state): the external ports of managed nodes.
    pub ports: BTreeMap<(&'static str, &'static str), i64>,
    /// By link state: each cable between two managed nodes once.
    pub links: BTreeMap<&'static str, i64>,
}

pub(super) fn kind(t: NodeType) -> &'static str {
    match t {
        NodeType::Switch => "switch",
        NodeType::Ca => "ca",
        NodeType::Router => "router",
        NodeType::Unknown(_) => "other",
    }
}

/// PortState (IBA 14.2.5.6, Table 148), `unread` when the sweep has no
/// PortInfo for the port.
pub(super) fn state(port: &SubnetPort) -> &'static str {
    match port.info.as_ref().map(|i| i.port_state) {
        None => "unread",
        Some(PortState::Down) => "down",
        Some(PortState::Init) => "init",
        Some(PortState::Armed) => "armed",
        Some(PortState::Active) => "active",
        Some(PortState::ActiveDefer) => "active_defer",
        // NoChange is a Set's value, never a state read back.
        Some(PortState::NoChange | PortState::Unknown(_)) => "other",
    }
}

/// How far up the bring-up a state is: a link is as far as its lower end.
fn rank(state: &str) -> u8 {
    match state {
        "unread" | "other" => 0,
        "down" => 1,
        "init" => 2,
        "armed" => 3,
        _ => 4,
    }
}

impl Counts {
    pub fn of(subnet: &Subnet) -> Counts {
        let mut c = Counts::default();
        for node in &subnet.nodes {
            *c.nodes.entry(kind(node.info.node_type)).or_default() += 1;
            if node.quarantined.is_some() {
                c.quarantined += 1;
                continue;
            }
            for p in node.external_ports() {
                let s = state(&node.ports[p as usize]);
                *c.ports.entry((kind(node.info.node_type), s)).or_default() += 1;
            }
        }
        let managed = |id: NodeId| subnet.node(id).quarantined.is_none();
        for (id, port, slot, (far, far_port)) in subnet.cabled_ports() {
            // Each cable once, from its lower end; both ends managed.
            if (id, port) > (far, far_port) || !managed(far) {
                continue;
            }
            let Some(other) = subnet.node(far).ports.get(far_port as usize) else { continue };
            let (a, b) = (state(slot), state(other));
            let s = if rank(a) <= rank(b) { a } else { b };
            *c.links.entry(s).or_default() += 1;
        }
        c
    }
}
