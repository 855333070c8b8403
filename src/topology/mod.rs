//! Fabric descriptions: the model shared by the file readers, the generators,
//! the in-process simulator and the ibsim writer.
//!
//! A `Topology` is what is cabled, not what an SM discovered: nodes with
//! their GUIDs and port counts, and links between (node, port) pairs.

use crate::types::Guid;

/// Index of a node in `Topology::nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeIdx(pub usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    Switch,
    Ca,
    Router,
}

/// One end of a cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRef {
    pub node: NodeIdx,
    pub port: u8,
}

/// Link width as PortInfo.LinkWidthActive encodes it (IBA 14.2.5.6):
/// 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x.
pub type LinkWidthCode = u8;
/// Link speed as PortInfo.LinkSpeedActive encodes it: 1 = SDR, 2 = DDR, 4 = QDR.
pub type LinkSpeedCode = u8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    /// The unique name that links refer to (ibsim's "nodeid").
    pub name: String,
    /// NodeDescription text (defaults to the name).
    pub description: String,
    /// Physical ports, not counting switch port 0.
    pub num_ports: u8,
    pub node_guid: Guid,
    pub system_guid: Guid,
    /// Port GUIDs: index 0 is the switch port 0 GUID for switches; for CAs and
    /// routers index p is port p's GUID (index 0 unused, equal to node GUID).
    pub port_guids: Vec<Guid>,
    /// Switches only: port 0 is enhanced (supports LMC of its own).
    pub enhanced_port0: bool,
}

impl Node {
    /// The GUID of `port` (a switch has one port GUID, on port 0).
    pub fn port_guid(&self, port: u8) -> Guid {
        match self.kind {
            NodeKind::Switch => self.port_guids.first().copied().unwrap_or(self.node_guid),
            _ => self
                .port_guids
                .get(port as usize)
                .copied()
                .unwrap_or(self.node_guid),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub a: PortRef,
    pub b: PortRef,
    pub width: LinkWidthCode,
    pub speed: LinkSpeedCode,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
}
