//! What a sweep learned: nodes and ports in an arena keyed by GUID, the links
//! between them and the directed-route path to each node.

use std::collections::HashMap;
use std::fmt;

use crate::mad::{AttributeId, DrPath, NodeInfoRepr, NodeType, PortInfoRepr, SmInfoRepr, SwitchInfoRepr};
use crate::types::{Guid, Lid};

/// Index of a node in `Subnet::nodes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Debug, Clone, Default)]
pub struct SubnetPort {
    /// PortInfo as last read; `None` when it was never read (an uncabled CA
    /// port, or the read failed).
    pub info: Option<PortInfoRepr>,
    /// The node and port at the other end of the cable.
    pub remote: Option<(NodeId, u8)>,
    /// Heavy sweeps in a row in which this port's PortInfo went unanswered
    /// and `info` is the last answer from an earlier sweep (0: read now).
    pub stale: u32,
}

#[derive(Debug, Clone)]
pub struct SubnetNode {
    pub info: NodeInfoRepr,
    pub description: Option<String>,
    /// The directed route the sweep first reached this node by.
    pub path: DrPath,
    pub switch_info: Option<SwitchInfoRepr>,
    /// Indexed by port number; index 0 is switch port 0 (unused for CAs).
    pub ports: Vec<SubnetPort>,
    /// Why the SM leaves this node alone, when it does.
    pub quarantined: Option<String>,
    /// CA/router port GUIDs as read from NodeInfo through each port.
    pub port_guids: Vec<Option<Guid>>,
    /// CA/router ports: the directed route that enters through each port.
    /// A CA's agent configures only the port an SMP arrived on (ibsim and
    /// the Linux SMAs), so each port is programmed over its own path.
    pub port_paths: Vec<Option<DrPath>>,
    /// Heavy sweeps in a row in which the node answered nothing and its
    /// NodeInfo came from an earlier sweep (0: it answered a read now).
    pub stale: u32,
}

impl SubnetNode {
    pub fn is_switch(&self) -> bool {
        self.info.node_type == NodeType::Switch
    }
    pub fn guid(&self) -> Guid {
        self.info.node_guid
    }
    pub fn name(&self) -> String {
        match &self.description {
            Some(d) if !d.is_empty() => d.clone(),
            _ => self.info.node_guid.to_string(),
        }
    }
    /// The path to use for SMPs about `port`.
    pub fn path_for_port(&self, port: u8) -> DrPath {
        if self.is_switch() {
            return self.path;
        }
        self.port_paths.get(port as usize).copied().flatten().unwrap_or(self.path)
    }
    /// A switch no SM has programmed since it was reset: every SM sets
    /// SwitchInfo.LinearFDBTop to the highest LID it routes (never 0), and
    /// a reset puts it back to 0. Its tables hold nothing worth reading.
    pub fn is_cold_switch(&self) -> bool {
        self.switch_info.as_ref().is_some_and(|s| s.linear_fdb_top == 0)
    }
    /// Takes `path` as the one the SM reaches this node by; a CA's ports
    /// lose theirs until [`Self::enter_port`] gives them again.
    fn place(&mut self, path: DrPath) {
        self.path = path;
        if !self.is_switch() {
            self.port_paths.iter_mut().for_each(|p| *p = None);
        }
    }
    /// `path` enters this CA through `port` (the first one found stays).
    fn enter_port(&mut self, port: u8, path: DrPath) {
        if let Some(slot) = self.port_paths.get_mut(port as usize) {
            slot.get_or_insert(path);
        }
    }
    /// Port numbers that can carry traffic to a neighbour.
    pub fn external_ports(&self) -> impl Iterator<Item = u8> + '_ {
        (1..self.ports.len()).map(|p| p as u8)
    }
    /// The port GUID of `port` (switches share one port GUID).
    pub fn port_guid(&self, port: u8) -> Guid {
        if self.is_switch() {
            self.info.port_guid
        } else {
            // A CA reports the GUID of the port a NodeInfo arrived on; the
            // others follow the common node GUID + port numbering only by
            // convention, so the sweep records each one it reads.
            self.port_guids.get(port as usize).copied().flatten().unwrap_or(self.info.port_guid)
        }
    }
}

/// Problems found during a sweep that did not stop it, with the node
/// (when known) and the directed path they concern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepProblem {
    pub path: DrPath,
    pub guid: Option<Guid>,
    pub what: Problem,
}

/// What went wrong, by kind; each carries the values it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    // Reads.
    /// A Get got no usable answer after every attempt and pass.
    ReadFailed {
        attr: AttributeId,
        amod: u32,
        error: String,
    },
    /// An answer that does not parse as the attribute asked for.
    BadAnswer {
        attr: AttributeId,
        port: Option<u8>,
        error: String,
    },
    // Nodes the SM leaves alone (also in `SubnetNode::quarantined`).
    BadNumPorts {
        num_ports: u8,
    },
    BadLocalPort {
        local_port: u8,
        num_ports: u8,
    },
    NoLinearFdb,
    /// A port whose far end cannot be reached: the path would be too long.
    NotProbed {
        port: u8,
        error: String,
    },
    // Programming.
    /// A Set the device refused or never answered.
    SetFailed {
        attr: AttributeId,
        amod: u32,
        port: Option<u8>,
        error: String,
    },
    /// The P_Key table is full and lacks the default P_Key: left as is
    /// (no partitions configured).
    DefaultPKeyMissing {
        port: u8,
    },
    /// The port is a member of more P_Keys than its table holds
    /// (NodeInfo.PartitionCap): the first `cap` were programmed.
    PKeyTableFull {
        port: u8,
        port_guid: Guid,
        cap: usize,
        wanted: usize,
    },
    /// A switch port's table (SwitchInfo.PartitionEnforcementCap) cannot
    /// hold the P_Keys of the end port it faces: partition enforcement is
    /// off on that port.
    EnforcementCapTooSmall {
        port: u8,
        cap: usize,
        needed: usize,
        end_port: Guid,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::ReadFailed { attr, amod, error } if *amod != 0 => {
                write!(f, "{attr:?} (modifier {amod:#x}) read failed: {error}")
            }
            Problem::ReadFailed { attr, error, .. } => write!(f, "{attr:?} read failed: {error}"),
            Problem::BadAnswer { attr, port: Some(p), error } => write!(f, "bad {attr:?} for port {p}: {error}"),
            Problem::BadAnswer { attr, port: None, error } => write!(f, "bad {attr:?}: {error}"),
            Problem::BadNumPorts { num_ports } => {
                write!(f, "NodeInfo.NumPorts is {num_ports}, outside 1-{}", crate::types::MAX_PORTS)
            }
            Problem::BadLocalPort { local_port, num_ports } => {
                write!(f, "NodeInfo.LocalPortNum {local_port} is not a port of this {num_ports}-port node")
            }
            Problem::NoLinearFdb => {
                write!(f, "SwitchInfo.LinearFDBCap is 0: the switch cannot hold a forwarding table")
            }
            Problem::NotProbed { port, error } => write!(f, "port {port} not probed: {error}"),
            Problem::SetFailed { attr, port: Some(p), error, .. } => {
                write!(f, "Set {attr:?} of port {p} failed: {error}")
            }
            Problem::SetFailed { attr, amod, port: None, error } => {
                write!(f, "Set {attr:?} (modifier {amod:#x}) failed: {error}")
            }
            Problem::DefaultPKeyMissing { port } => {
                write!(f, "port {port}: the P_Key table is full and lacks the default P_Key; left as is")
            }
            Problem::PKeyTableFull { port, port_guid, cap, wanted } => write!(
                f,
                "port {port} (port GUID {port_guid}) is a member of {wanted} P_Keys but holds {cap}: the first {cap} programmed"
            ),
            Problem::EnforcementCapTooSmall { port, cap, needed, end_port } => write!(
                f,
                "switch port {port} holds {cap} P_Keys, fewer than the {needed} of the end port {end_port} it faces: partition enforcement off there"
            ),
        }
    }
}

impl fmt::Display for SweepProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.guid {
            Some(g) => write!(f, "node {g} at path {}: {}", self.path, self.what),
            None => write!(f, "path {}: {}", self.path, self.what),
        }
    }
}

/// A read that discovery sent, retried in later passes, and still got no
/// answer to. The sweep carries the list; it is logged as one line with
/// the counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingRead {
    /// The node the read was about: for a NodeInfo probe, the node an
    /// earlier sweep found behind that port, if any.
    pub guid: Option<Guid>,
    /// The directed route the read went over.
    pub path: DrPath,
    pub what: Read,
    /// What an earlier sweep read stands in for the answer (the node or
    /// port is marked stale); `false`: nothing is known, the node or port
    /// is missing from this sweep.
    pub kept: bool,
}

/// What a discovery read asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// NodeInfo through `port` of the node with GUID `from` (the far end of
    /// that cable); `None`: the SM's own node.
    NodeInfo {
        from: Option<(Guid, u8)>,
    },
    NodeDescription,
    SwitchInfo,
    PortInfo {
        port: u8,
    },
}

impl Read {
    pub fn attribute(self) -> AttributeId {
        match self {
            Read::NodeInfo { .. } => AttributeId::NodeInfo,
            Read::NodeDescription => AttributeId::NodeDescription,
            Read::SwitchInfo => AttributeId::SwitchInfo,
            Read::PortInfo { .. } => AttributeId::PortInfo,
        }
    }
}

impl fmt::Display for MissingRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.what {
            Read::NodeInfo { from: Some((g, p)) } => write!(f, "NodeInfo behind {g} port {p}")?,
            Read::NodeInfo { from: None } => write!(f, "NodeInfo of the SM's node")?,
            Read::PortInfo { port } => write!(f, "PortInfo port {port}")?,
            other => write!(f, "{:?}", other.attribute())?,
        }
        if let Some(g) = self.guid {
            write!(f, " of {g}")?;
        }
        write!(f, " at path {}", self.path)?;
        f.write_str(if self.kept { " (last known kept)" } else { " (unknown)" })
    }
}

/// Another SM's port found by the sweep: a port whose
/// PortInfo.CapabilityMask has IsSM, other than the SM's own, and what its
/// SMInfo said (IBA 14.4.1). The election decides what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSm {
    pub port_guid: Guid,
    pub node: NodeId,
    /// The CA port, or 0 on a switch.
    pub port: u8,
    /// The directed route the SMInfo Get went over.
    pub path: DrPath,
    /// PortInfo.LID of that port (switch port 0's for a switch).
    pub lid: Lid,
    /// The SMInfo read, or why there is none: no SM answering (common: a
    /// host with IsSM set but its SM stopped), an unreadable answer, or one
    /// whose GUID is 0 or not the port's. The text names the port GUID and
    /// the path.
    pub info: Result<SmInfoRepr, String>,
}

#[derive(Debug, Clone, Default)]
pub struct Subnet {
    pub nodes: Vec<SubnetNode>,
    pub by_guid: HashMap<Guid, NodeId>,
    /// The node and port the SM runs on.
    pub sm_port: Option<(NodeId, u8)>,
    pub problems: Vec<SweepProblem>,
    /// Other SMs' ports (IsSM set), in the order the sweep found them. A
    /// failed SMInfo read is recorded here, never as a sweep problem.
    pub remote_sms: Vec<RemoteSm>,
    /// Discovery reads that went unanswered after every pass. Those not
    /// `kept` are also sweep problems.
    pub missing: Vec<MissingRead>,
}

impl Subnet {
    pub fn node(&self, id: NodeId) -> &SubnetNode {
        &self.nodes[id.index()]
    }
    pub fn node_mut(&mut self, id: NodeId) -> &mut SubnetNode {
        &mut self.nodes[id.index()]
    }
    pub fn ids(&self) -> impl Iterator<Item = NodeId> {
        (0..self.nodes.len() as u32).map(NodeId)
    }
    /// The cabled external ports of the nodes the SM manages: (node, port
    /// number, the port, the far end).
    pub fn cabled_ports(&self) -> impl Iterator<Item = (NodeId, u8, &SubnetPort, (NodeId, u8))> + '_ {
        self.ids().filter(move |&id| self.node(id).quarantined.is_none()).flat_map(move |id| {
            let node = self.node(id);
            node.external_ports().filter_map(move |port| {
                let slot = &node.ports[port as usize];
                slot.remote.map(|far| (id, port, slot, far))
            })
        })
    }

    pub fn switches(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.ids().filter(|&id| self.node(id).is_switch())
    }

    /// Adds a node first seen at `path`, or returns the one with its GUID.
    pub fn insert(&mut self, info: NodeInfoRepr, path: DrPath) -> (NodeId, bool) {
        if let Some(&id) = self.by_guid.get(&info.node_guid) {
            return (id, false);
        }
        let id = NodeId(self.nodes.len() as u32);
        let nports = info.num_ports as usize + 1;
        let mut port_guids = vec![None; nports];
        let mut port_paths = vec![None; nports];
        if info.node_type != NodeType::Switch && (info.local_port_num as usize) < nports {
            port_guids[info.local_port_num as usize] = Some(info.port_guid);
            port_paths[info.local_port_num as usize] = Some(path);
        }
        self.by_guid.insert(info.node_guid, id);
        self.nodes.push(SubnetNode {
            info,
            description: None,
            path,
            switch_info: None,
            ports: vec![SubnetPort::default(); nports],
            quarantined: None,
            port_guids,
            port_paths,
            stale: 0,
        });
        (id, true)
    }

    /// Records a cable between two ports; both ends point at each other.
    pub fn link(&mut self, a: (NodeId, u8), b: (NodeId, u8)) {
        if let Some(p) = self.nodes[a.0.index()].ports.get_mut(a.1 as usize) {
            p.remote = Some(b);
        }
        if let Some(p) = self.nodes[b.0.index()].ports.get_mut(b.1 as usize) {
            p.remote = Some(a);
        }
    }

    /// Forgets the cable at `a` (both ends, if it had one); returns the far
    /// end it had.
    pub fn unlink(&mut self, a: (NodeId, u8)) -> Option<(NodeId, u8)> {
        let far = self.nodes.get_mut(a.0.index())?.ports.get_mut(a.1 as usize)?.remote.take()?;
        if let Some(p) = self.nodes.get_mut(far.0.index()).and_then(|n| n.ports.get_mut(far.1 as usize)) {
            if p.remote == Some(a) {
                p.remote = None;
            }
        }
        Some(far)
    }

    /// A breadth-first walk from the SM's port over the cables recorded,
    /// as a discovery walks: each node reached, in order, with the
    /// directed path it was first reached by; and each CA port reached,
    /// with the path that enters through it. Only switches forward; a CA
    /// is left only through the SM's own port.
    pub fn walk(&self) -> PathWalk {
        let mut walk = PathWalk::default();
        let Some((sm_node, sm_port)) = self.sm_port else { return walk };
        let mut seen = vec![false; self.nodes.len()];
        seen[sm_node.index()] = true;
        walk.nodes.push((sm_node, DrPath::local()));
        walk.ca_ports.push(((sm_node, sm_port), DrPath::local()));
        let mut next = 0;
        while let Some(&(id, path)) = walk.nodes.get(next) {
            next += 1;
            let node = self.node(id);
            for (port, slot) in node.ports.iter().enumerate().skip(1) {
                let Some((far, far_port)) = slot.remote else { continue };
                if !(node.is_switch() || (id, port as u8) == (sm_node, sm_port)) {
                    continue;
                }
                let Ok(through) = path.extend(port as u8) else { continue };
                if !self.node(far).is_switch() {
                    walk.ca_ports.push(((far, far_port), through));
                }
                if !seen[far.index()] {
                    seen[far.index()] = true;
                    walk.nodes.push((far, through));
                }
            }
        }
        walk
    }

    /// Gives every node the SM still reaches the path [`Self::walk`] finds
    /// (a cable that went down may have carried the old one), and every CA
    /// port reached its own. Returns the nodes it no longer reaches, which
    /// keep their old paths.
    pub fn refresh_paths(&mut self) -> Vec<NodeId> {
        let walk = self.walk();
        let mut reached = vec![false; self.nodes.len()];
        for &(id, path) in &walk.nodes {
            reached[id.index()] = true;
            self.node_mut(id).place(path);
        }
        for &((id, port), path) in &walk.ca_ports {
            self.node_mut(id).enter_port(port, path);
        }
        self.ids().filter(|id| !reached[id.index()]).collect()
    }

    /// The subnet as the SM reaches it now over the cables recorded: the
    /// nodes [`Self::walk`] finds, in that order, each with the path of that
    /// walk, as a discovery would have found them. Also returns the GUIDs
    /// of the nodes left behind, unreachable. Problems and missing reads
    /// are dropped (they were an earlier look's); other SMs' ports stay
    /// where their nodes do.
    pub fn reachable(&self) -> (Subnet, Vec<Guid>) {
        let walk = self.walk();
        let new_id: HashMap<NodeId, NodeId> =
            walk.nodes.iter().enumerate().map(|(i, &(old, _))| (old, NodeId(i as u32))).collect();
        let mut out = Subnet::default();
        for &(old, path) in &walk.nodes {
            let mut node = self.node(old).clone();
            node.place(path);
            for slot in &mut node.ports {
                slot.remote = slot.remote.and_then(|(far, p)| Some((*new_id.get(&far)?, p)));
            }
            out.by_guid.insert(node.guid(), new_id[&old]);
            out.nodes.push(node);
        }
        for &((old, port), path) in &walk.ca_ports {
            out.node_mut(new_id[&old]).enter_port(port, path);
        }
        out.sm_port = self.sm_port.map(|(n, p)| (new_id[&n], p));
        for remote in &self.remote_sms {
            if let Some(&node) = new_id.get(&remote.node) {
                let path = out.node(node).path_for_port(remote.port);
                out.remote_sms.push(RemoteSm { node, path, ..remote.clone() });
            }
        }
        let gone = self.ids().filter(|id| !new_id.contains_key(id)).map(|id| self.node(id).guid()).collect();
        (out, gone)
    }

    /// Every end port (CA/router port) and switch port 0 that gets a LID.
    pub fn lid_ports(&self) -> impl Iterator<Item = (NodeId, u8)> + '_ {
        self.ids().flat_map(move |id| {
            let n = self.node(id);
            let ports: Vec<u8> = if n.is_switch() {
                vec![0]
            } else {
                n.external_ports().filter(|&p| n.ports[p as usize].info.is_some()).collect()
            };
            ports.into_iter().map(move |p| (id, p))
        })
    }

    /// The node with this GUID.
    pub fn by_guid(&self, guid: Guid) -> Option<&SubnetNode> {
        self.by_guid.get(&guid).map(|&id| self.node(id))
    }

    /// Missing reads nothing known stands in for: what keeps a sweep from
    /// seeing the whole fabric.
    pub fn unknown(&self) -> impl Iterator<Item = &MissingRead> + '_ {
        self.missing.iter().filter(|m| !m.kept)
    }

    /// Nodes and ports whose data this sweep took from an earlier one.
    pub fn stale_counts(&self) -> (usize, usize) {
        let nodes = self.nodes.iter().filter(|n| n.stale > 0).count();
        let ports = self.nodes.iter().flat_map(|n| &n.ports).filter(|p| p.stale > 0).count();
        (nodes, ports)
    }

    /// The LID a port currently holds, as last read.
    pub fn current_lid(&self, id: NodeId, port: u8) -> Option<Lid> {
        self.node(id).ports.get(port as usize)?.info.as_ref().map(|i| i.lid)
    }
}

/// What [`Subnet::walk`] found.
#[derive(Debug, Clone, Default)]
pub struct PathWalk {
    /// Nodes in the order reached, each with its path.
    pub nodes: Vec<(NodeId, DrPath)>,
    /// CA ports reached, each with the path entering through it.
    pub ca_ports: Vec<((NodeId, u8), DrPath)>,
}
