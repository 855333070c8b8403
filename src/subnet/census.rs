//! One census of a sweep's subnet: nodes by type, external ports by node
//! type and state, cables by the states of their two ends, each counted
//! in one walk. `/status` and the metrics both read their figures from a
//! census, each by its own rules (how a link's state follows its ends,
//! whether a cable to a quarantined node counts), so the walk keeps every
//! distinction either one draws and decides nothing about how a figure
//! is shown.

use std::collections::HashMap;

use crate::mad::{NodeType, PortState};
use crate::subnet::Subnet;

/// A port's state as the sweep read it (PortInfo.PortState, IBA
/// 14.2.5.6); `None` when the sweep has no PortInfo for it.
pub type Seen = Option<PortState>;

/// External ports (1..=NumPorts) counted together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortKind {
    pub node_type: NodeType,
    pub state: Seen,
    /// The node is not quarantined.
    pub managed: bool,
}

/// Cables counted together, each cable once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CableKind {
    /// The end the cable is counted from: between two managed nodes the
    /// lower (node, port), otherwise the managed end (a quarantined node's
    /// ports are not walked).
    pub near: Seen,
    /// The other end; `None` also when the sweep holds no such port.
    pub far: Seen,
    pub far_end: FarEnd,
}

/// What stands at a cable's far end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FarEnd {
    /// A port of a managed node.
    Managed,
    /// A managed node that has no such port.
    Absent,
    /// A quarantined node: the SM leaves it alone, and only the near end
    /// lists the cable.
    Quarantined,
}

/// What one sweep found, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Census {
    /// Every node by NodeInfo.NodeType, quarantined ones included.
    pub nodes: HashMap<NodeType, u64>,
    /// Nodes the SM leaves alone (bad NodeInfo, ...).
    pub quarantined: u64,
    /// Every node's external ports, quarantined nodes' included.
    pub ports: HashMap<PortKind, u64>,
    /// The cables of managed nodes, each once.
    pub cables: HashMap<CableKind, u64>,
}

impl Census {
    /// One walk over `subnet`'s nodes, ports and cables. O(nodes + ports).
    pub fn of(subnet: &Subnet) -> Census {
        let mut c = Census::default();
        for node in &subnet.nodes {
            let node_type = node.info.node_type;
            *c.nodes.entry(node_type).or_default() += 1;
            let managed = node.quarantined.is_none();
            if !managed {
                c.quarantined += 1;
            }
            for p in node.external_ports() {
                let state = node.ports[p as usize].info.as_ref().map(|i| i.port_state);
                *c.ports.entry(PortKind { node_type, state, managed }).or_default() += 1;
            }
        }
        for (id, port, slot, (far_id, far_port)) in subnet.cabled_ports() {
            let far_node = subnet.node(far_id);
            let far_slot = far_node.ports.get(far_port as usize);
            let far_end = match (far_node.quarantined.is_none(), far_slot) {
                (false, _) => FarEnd::Quarantined,
                (true, None) => FarEnd::Absent,
                (true, Some(_)) => FarEnd::Managed,
            };
            // Between two managed nodes each cable shows up from both ends:
            // it is counted from the lower one.
            if far_end != FarEnd::Quarantined && (far_id, far_port) < (id, port) {
                continue;
            }
            let near = slot.info.as_ref().map(|i| i.port_state);
            let far = far_slot.and_then(|p| p.info.as_ref()).map(|i| i.port_state);
            *c.cables.entry(CableKind { near, far, far_end }).or_default() += 1;
        }
        c
    }

    /// Every node, quarantined ones included.
    pub fn node_count(&self) -> u64 {
        self.nodes.values().sum()
    }
}
