//! The fabric for Graphviz: switches and CAs as nodes, every cable an
//! edge (parallel cables stay parallel edges), coloured by link state.

use std::fmt::Write as _;

use super::port_lid;
use crate::mad::{NodeType, PortState};
use crate::subnet::snapshot::Snapshot;
use crate::topology::{NodeKind, Topology};

/// A node to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vertex {
    /// Unique: the node GUID as `0x` and 16 hex digits.
    pub id: String,
    /// The NodeDescription (or name).
    pub label: String,
    /// `None` where the drawing has no LIDs (an offline topology).
    pub lid: Option<u16>,
    pub switch: bool,
}

/// A link's state as drawn: the lower of its two ends' PortState.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EdgeState {
    /// An end's PortInfo is missing, or a state no link should be in.
    Unknown,
    Down,
    Init,
    Armed,
    Active,
    /// An offline topology: the cable exists, nothing is known of its state.
    Cabled,
}

impl EdgeState {
    fn of(state: Option<PortState>) -> EdgeState {
        match state {
            Some(PortState::Down) => EdgeState::Down,
            Some(PortState::Init) => EdgeState::Init,
            Some(PortState::Armed) => EdgeState::Armed,
            Some(PortState::Active | PortState::ActiveDefer) => EdgeState::Active,
            _ => EdgeState::Unknown,
        }
    }

    fn name(self) -> &'static str {
        match self {
            EdgeState::Unknown => "unknown",
            EdgeState::Down => "down",
            EdgeState::Init => "init",
            EdgeState::Armed => "armed",
            EdgeState::Active => "active",
            EdgeState::Cabled => "cabled",
        }
    }

    /// Green when the link carries traffic, red when it is down, the
    /// bring-up's middle states in between.
    fn colour(self) -> &'static str {
        match self {
            EdgeState::Active => "green",
            EdgeState::Armed => "orange",
            EdgeState::Init => "gold",
            EdgeState::Down => "red",
            EdgeState::Unknown => "gray",
            EdgeState::Cabled => "black",
        }
    }
}

/// A cable between two ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub a: String,
    pub a_port: u8,
    pub b: String,
    pub b_port: u8,
    pub state: EdgeState,
}

/// What [`Drawing::to_dot`] draws.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drawing {
    pub vertices: Vec<Vertex>,
    pub edges: Vec<Edge>,
}

impl Drawing {
    /// Graphviz `graph` text: an undirected multigraph (not `strict`, so
    /// parallel cables are kept), switches as boxes, CAs as ellipses, each
    /// edge labelled with its ports at both ends and its state.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("graph fabric {\n");
        out.push_str("  graph [overlap=false, splines=true];\n");
        out.push_str("  node [fontsize=10];\n  edge [fontsize=8];\n");
        for v in &self.vertices {
            let mut label = escape(&v.label);
            if let Some(lid) = v.lid {
                let _ = write!(label, "\\nLID {lid}");
            }
            let shape = if v.switch { "box" } else { "ellipse" };
            let _ = writeln!(out, "  \"{}\" [label=\"{label}\", shape={shape}];", escape(&v.id));
        }
        for e in &self.edges {
            let _ = writeln!(
                out,
                "  \"{}\" -- \"{}\" [color={}, taillabel=\"{}\", headlabel=\"{}\", tooltip=\"{}\"];",
                escape(&e.a),
                escape(&e.b),
                e.state.colour(),
                e.a_port,
                e.b_port,
                e.state.name()
            );
        }
        out.push_str("}\n");
        out
    }
}

/// A DOT quoted string's content: `"` and `\` escaped, line breaks as
/// spaces (a NodeDescription comes off the wire and may hold anything).
fn escape(s: &str) -> String {
    let mut e = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => e.push_str("\\\""),
            '\\' => e.push_str("\\\\"),
            c if c.is_control() => e.push(' '),
            c => e.push(c),
        }
    }
    e
}

/// The fabric as the snapshot's sweep found it: every node, every cable
/// once, coloured by the lower of its ends' PortState.
pub fn dot(snap: &Snapshot) -> String {
    let subnet = &snap.sweep.subnet;
    let mut d = Drawing::default();
    let mut ids: Vec<_> = subnet.ids().collect();
    ids.sort_by_key(|&id| subnet.node(id).guid());
    for &id in &ids {
        let n = subnet.node(id);
        let lid = if n.is_switch() {
            port_lid(snap, id, 0)
        } else {
            // A CA: its first cabled port's LID.
            n.external_ports()
                .find(|&p| n.ports[p as usize].remote.is_some())
                .map_or(crate::types::Lid(0), |p| port_lid(snap, id, p))
        };
        d.vertices.push(Vertex {
            id: n.guid().to_string(),
            label: n.name(),
            lid: (lid.0 != 0).then_some(lid.0),
            switch: n.info.node_type == NodeType::Switch,
        });
    }
    for &id in &ids {
        let n = subnet.node(id);
        for port in n.external_ports() {
            let slot = &n.ports[port as usize];
            let Some((far, far_port)) = slot.remote else { continue };
            // Each cable once, from its lower (node, port) end.
            if (n.guid(), port) > (subnet.node(far).guid(), far_port) {
                continue;
            }
            let other = subnet.node(far).ports.get(far_port as usize);
            let near = EdgeState::of(slot.info.map(|i| i.port_state));
            let far_state = EdgeState::of(other.and_then(|p| p.info).map(|i| i.port_state));
            d.edges.push(Edge {
                a: n.guid().to_string(),
                a_port: port,
                b: subnet.node(far).guid().to_string(),
                b_port: far_port,
                state: near.min(far_state),
            });
        }
    }
    d.to_dot()
}

/// An offline topology: every node by its description, every cable drawn
/// as cabled (no states, no LIDs).
pub fn topology_dot(topo: &Topology) -> String {
    let mut d = Drawing::default();
    for n in &topo.nodes {
        d.vertices.push(Vertex {
            id: n.node_guid.to_string(),
            label: n.description.clone(),
            lid: None,
            switch: n.kind == NodeKind::Switch,
        });
    }
    for l in &topo.links {
        d.edges.push(Edge {
            a: topo.node(l.a.node).node_guid.to_string(),
            a_port: l.a.port,
            b: topo.node(l.b.node).node_guid.to_string(),
            b_port: l.b.port,
            state: EdgeState::Cabled,
        });
    }
    d.to_dot()
}
