//! Nodes, ports and links by kind and state for the gauges, read from a
//! sweep's census. Label values are fixed names, so a fabric of any size
//! adds at most 4 node kinds x 7 port states series.

use std::collections::BTreeMap;

use crate::mad::{NodeType, PortState};
use crate::subnet::census::{Census, FarEnd, Seen};

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
pub(super) fn state(seen: Seen) -> &'static str {
    match seen {
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
    /// The gauges' figures from `census`: a quarantined node's ports are not
    /// shown, nor a cable unless both its ends are managed ports the sweep
    /// holds.
    pub fn of(census: &Census) -> Counts {
        let mut c = Counts { quarantined: census.quarantined as i64, ..Counts::default() };
        for (&node_type, &n) in &census.nodes {
            *c.nodes.entry(kind(node_type)).or_default() += n as i64;
        }
        for (k, &n) in census.ports.iter().filter(|(k, _)| k.managed) {
            *c.ports.entry((kind(k.node_type), state(k.state))).or_default() += n as i64;
        }
        for (cable, &n) in census.cables.iter().filter(|(k, _)| k.far_end == FarEnd::Managed) {
            // The lower end's state; of two ends as far along, the one the
            // cable is counted from.
            let (a, b) = (state(cable.near), state(cable.far));
            let s = if rank(a) <= rank(b) { a } else { b };
            *c.links.entry(s).or_default() += n as i64;
        }
        c
    }
}
