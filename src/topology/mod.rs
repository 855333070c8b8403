//! Fabric descriptions: the model shared by the file readers, the generators,
//! the in-process simulator and the ibsim writer.
//!
//! A `Topology` is what is cabled, not what an SM discovered: nodes with
//! their GUIDs and port counts, and links between (node, port) pairs.
//!
//! Modules:
//! - `netfile`: reads ibsim net files and `ibnetdiscover` output (one format);
//! - `writer`: writes a model back as an ibsim net file, plus ibsim's flags;
//! - `spec` / `generate`: generator spec strings and the fabrics they build;
//! - `guids`: the GUIDs ibsim assigns, shared by all of the above;
//! - `validate`: the consistency rules every model must meet;
//! - `index`: O(1) lookups and directed-route paths over a model;
//! - `diff`: compares two models of one fabric by GUID;
//! - `route_view`: the routing crate's view of a model, with LIDs planned.

pub mod diff;
pub mod error;
pub mod generate;
pub mod guids;
pub mod index;
pub mod netfile;
pub mod route_view;
pub mod spec;
pub mod validate;
pub mod writer;

pub use diff::fabric_diff;
pub use error::{Problem, SpecError, TopologyError};
pub use guids::{assign_ibsim_guids, GuidCounters};
pub use index::TopologyIndex;
pub use netfile::{parse_net, read_net_file, Note, NoteKind, ParsedNet};
pub use spec::GeneratorSpec;
pub use writer::{ibsim_args, to_net_string, write_net_file};

use std::path::Path;

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

pub const WIDTH_1X: LinkWidthCode = 1;
pub const WIDTH_4X: LinkWidthCode = 2;
pub const WIDTH_8X: LinkWidthCode = 4;
pub const WIDTH_12X: LinkWidthCode = 8;
pub const WIDTH_2X: LinkWidthCode = 16;
pub const SPEED_SDR: LinkSpeedCode = 1;
pub const SPEED_DDR: LinkSpeedCode = 2;
pub const SPEED_QDR: LinkSpeedCode = 4;
/// A link's speed beyond QDR, as the PortInfo of both ends reports it
/// (IBA 14.2.5.6): LinkSpeedExtActive's FDR 1, EDR 2, HDR 4, NDR 8, or XDR,
/// which lives in LinkSpeedExtActive2 (IBA 1.7) and is written 32 here (that
/// field's bit 0 moved to bit 5, past the extended-speed bits, as
/// infiniband-diags numbers it). 0: none, the link runs at its `speed`.
/// FDR10 is not one: PortInfo reports it as QDR (only a vendor attribute
/// tells them apart), so a topology says QDR for it.
pub type LinkSpeedExtCode = u8;

pub const SPEED_EXT_NONE: LinkSpeedExtCode = 0;
pub const SPEED_FDR: LinkSpeedExtCode = 1;
pub const SPEED_EDR: LinkSpeedExtCode = 2;
pub const SPEED_HDR: LinkSpeedExtCode = 4;
pub const SPEED_NDR: LinkSpeedExtCode = 8;
pub const SPEED_XDR: LinkSpeedExtCode = 32;

/// What ibsim gives a link when the file says nothing: 4x SDR.
pub const DEFAULT_WIDTH: LinkWidthCode = WIDTH_4X;
pub const DEFAULT_SPEED: LinkSpeedCode = SPEED_SDR;

/// Is `w` exactly one LinkWidthActive value?
pub fn is_width_code(w: LinkWidthCode) -> bool {
    matches!(w, WIDTH_1X | WIDTH_4X | WIDTH_8X | WIDTH_12X | WIDTH_2X)
}

/// Is `s` exactly one LinkSpeedActive value?
pub fn is_speed_code(s: LinkSpeedCode) -> bool {
    matches!(s, SPEED_SDR | SPEED_DDR | SPEED_QDR)
}

/// Is `e` 0 or exactly one extended speed?
pub fn is_ext_speed_code(e: LinkSpeedExtCode) -> bool {
    matches!(e, SPEED_EXT_NONE | SPEED_FDR | SPEED_EDR | SPEED_HDR | SPEED_NDR | SPEED_XDR)
}

impl NodeKind {
    /// The word ibsim and ibnetdiscover put at the head of a node record.
    pub fn net_keyword(self) -> &'static str {
        match self {
            NodeKind::Switch => "Switch",
            NodeKind::Ca => "Ca",
            NodeKind::Router => "Rt",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Switch => "switch",
            NodeKind::Ca => "CA",
            NodeKind::Router => "router",
        }
    }
}

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
    /// A node with ibsim's port GUID layout for `node_guid` (system GUID =
    /// node GUID, description = name, base port 0).
    pub fn new(kind: NodeKind, name: impl Into<String>, num_ports: u8, node_guid: Guid) -> Node {
        let name = name.into();
        Node {
            kind,
            description: name.clone(),
            name,
            num_ports,
            node_guid,
            system_guid: node_guid,
            port_guids: guids::ibsim_port_guids(kind, node_guid.0, num_ports),
            enhanced_port0: false,
        }
    }

    /// The GUID of `port` (a switch has one port GUID, on port 0).
    pub fn port_guid(&self, port: u8) -> Guid {
        match self.kind {
            NodeKind::Switch => self.port_guids.first().copied().unwrap_or(self.node_guid),
            _ => self.port_guids.get(port as usize).copied().unwrap_or(self.node_guid),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub a: PortRef,
    pub b: PortRef,
    pub width: LinkWidthCode,
    pub speed: LinkSpeedCode,
    /// The speed the link runs at when it is beyond QDR (FDR..XDR); 0
    /// otherwise. `speed` stays what LinkSpeedActive says (QDR, usually).
    pub ext_speed: LinkSpeedExtCode,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    pub nodes: Vec<Node>,
    pub links: Vec<Link>,
}

impl Topology {
    /// Appends a node; returns its index.
    pub fn add_node(&mut self, node: Node) -> NodeIdx {
        self.nodes.push(node);
        NodeIdx(self.nodes.len() - 1)
    }

    /// Cables `a` to `b`; returns the link's index. Checks nothing: see
    /// `validate`.
    pub fn connect(&mut self, a: PortRef, b: PortRef, width: LinkWidthCode, speed: LinkSpeedCode) -> usize {
        self.connect_ext(a, b, width, speed, SPEED_EXT_NONE)
    }

    /// Cables `a` to `b` running at an extended speed (`SPEED_FDR` ..
    /// `SPEED_XDR`, or `SPEED_EXT_NONE`): "this link is NDR 4x" is
    /// `connect_ext(a, b, WIDTH_4X, SPEED_QDR, SPEED_NDR)`.
    pub fn connect_ext(
        &mut self,
        a: PortRef,
        b: PortRef,
        width: LinkWidthCode,
        speed: LinkSpeedCode,
        ext_speed: LinkSpeedExtCode,
    ) -> usize {
        self.links.push(Link { a, b, width, speed, ext_speed });
        self.links.len() - 1
    }

    pub fn node(&self, idx: NodeIdx) -> &Node {
        &self.nodes[idx.0]
    }

    /// Channel adapters (not routers), in index order.
    pub fn hosts(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.nodes_of(NodeKind::Ca)
    }

    pub fn switches(&self) -> impl Iterator<Item = NodeIdx> + '_ {
        self.nodes_of(NodeKind::Switch)
    }

    /// The cables between two switches, in file order.
    pub fn trunks(&self) -> impl Iterator<Item = &Link> + '_ {
        let switch = |r: PortRef| self.node(r.node).kind == NodeKind::Switch;
        self.links.iter().filter(move |l| switch(l.a) && switch(l.b))
    }

    pub fn nodes_of(&self, kind: NodeKind) -> impl Iterator<Item = NodeIdx> + '_ {
        self.nodes.iter().enumerate().filter(move |(_, n)| n.kind == kind).map(|(i, _)| NodeIdx(i))
    }

    /// Linear scan; for repeated lookups build `index()` once.
    pub fn node_by_name(&self, name: &str) -> Option<NodeIdx> {
        self.nodes.iter().position(|n| n.name == name).map(NodeIdx)
    }

    /// The node whose node GUID is `guid`. Linear scan; see `index()`.
    pub fn node_by_guid(&self, guid: Guid) -> Option<NodeIdx> {
        self.nodes.iter().position(|n| n.node_guid == guid).map(NodeIdx)
    }

    /// The port at the other end of `port`'s cable. Linear in the number of
    /// links; `index()` answers the same in O(1).
    pub fn neighbor(&self, port: PortRef) -> Option<PortRef> {
        self.links.iter().find_map(|l| {
            if l.a == port {
                Some(l.b)
            } else if l.b == port {
                Some(l.a)
            } else {
                None
            }
        })
    }

    /// Builds the lookup index (name, GUID, port adjacency). O(nodes + links).
    pub fn index(&self) -> TopologyIndex {
        TopologyIndex::new(self)
    }

    /// The shortest directed route from `from` to node `to`, as the ports to
    /// leave through at each hop (smpquery's `0,1,3` without the leading 0).
    /// See `TopologyIndex::dr_path_to`; this builds the index first.
    pub fn dr_path_to(&self, from: PortRef, to: NodeIdx) -> Option<Vec<u8>> {
        self.index().dr_path_to(from, to)
    }

    /// Reads an ibsim net file or ibnetdiscover output (notes are dropped;
    /// use `read_net_file` to see them).
    pub fn from_net_file(path: impl AsRef<Path>) -> Result<Topology, TopologyError> {
        read_net_file(path.as_ref()).map(|p| p.topology)
    }

    /// A generator spec (`fattree2:radix=8`, `b2b`, ...) when the text before
    /// the first `:` names a generator, otherwise a net file path (write
    /// `./b2b` for a file called `b2b`).
    pub fn from_spec_or_file(text: &str) -> Result<Topology, TopologyError> {
        if spec::names_generator(text) {
            let spec: GeneratorSpec = text.parse()?;
            spec.generate()
        } else {
            Topology::from_net_file(text)
        }
    }
}
