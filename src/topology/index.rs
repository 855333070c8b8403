//! Constant-time lookups over a `Topology`: by name, by GUID, and what is at
//! the other end of a port; plus directed-route paths (BFS).
//!
//! The index is a snapshot: it does not follow later edits of the model.

use std::collections::{HashMap, VecDeque};

use super::{NodeIdx, NodeKind, PortRef, Topology};
use crate::types::{Guid, MAX_DR_HOPS};

#[derive(Debug, Clone)]
pub struct TopologyIndex {
    by_name: HashMap<String, NodeIdx>,
    by_node_guid: HashMap<Guid, NodeIdx>,
    by_port_guid: HashMap<Guid, PortRef>,
    kinds: Vec<NodeKind>,
    /// `port_base[n]` is node n's first slot in `peer`; it has num_ports + 1
    /// slots (port 0 included so a slot is base + port). One extra entry at
    /// the end holds the total.
    port_base: Vec<usize>,
    /// The far end and link index of each cabled port.
    peer: Vec<Option<(PortRef, usize)>>,
}

impl TopologyIndex {
    /// O(nodes + links). On a model that fails `validate`, the first of
    /// duplicate names/GUIDs wins, a port cabled twice keeps its last link,
    /// and link ends outside the model are skipped.
    pub fn new(topo: &Topology) -> Self {
        let n = topo.nodes.len();
        let mut idx = TopologyIndex {
            by_name: HashMap::with_capacity(n),
            by_node_guid: HashMap::with_capacity(n),
            by_port_guid: HashMap::with_capacity(n * 2),
            kinds: Vec::with_capacity(n),
            port_base: Vec::with_capacity(n + 1),
            peer: Vec::new(),
        };
        let mut total = 0usize;
        for (i, node) in topo.nodes.iter().enumerate() {
            let ni = NodeIdx(i);
            idx.by_name.entry(node.name.clone()).or_insert(ni);
            idx.by_node_guid.entry(node.node_guid).or_insert(ni);
            match node.kind {
                NodeKind::Switch => {
                    idx.by_port_guid.entry(node.port_guid(0)).or_insert(PortRef { node: ni, port: 0 });
                }
                NodeKind::Ca | NodeKind::Router => {
                    for port in 1..=node.num_ports {
                        idx.by_port_guid.entry(node.port_guid(port)).or_insert(PortRef { node: ni, port });
                    }
                }
            }
            idx.kinds.push(node.kind);
            idx.port_base.push(total);
            total += node.num_ports as usize + 1;
        }
        idx.port_base.push(total);
        idx.peer = vec![None; total];
        for (li, l) in topo.links.iter().enumerate() {
            if let (Some(sa), Some(sb)) = (idx.slot(l.a), idx.slot(l.b)) {
                idx.peer[sa] = Some((l.b, li));
                idx.peer[sb] = Some((l.a, li));
            }
        }
        idx
    }

    fn slot(&self, p: PortRef) -> Option<usize> {
        let base = *self.port_base.get(p.node.0)?;
        let end = *self.port_base.get(p.node.0 + 1)?;
        let s = base + p.port as usize;
        (s < end).then_some(s)
    }

    pub fn node_by_name(&self, name: &str) -> Option<NodeIdx> {
        self.by_name.get(name).copied()
    }

    pub fn node_by_guid(&self, guid: Guid) -> Option<NodeIdx> {
        self.by_node_guid.get(&guid).copied()
    }

    /// The port whose port GUID is `guid` (switch: port 0).
    pub fn port_by_guid(&self, guid: Guid) -> Option<PortRef> {
        self.by_port_guid.get(&guid).copied()
    }

    /// The far end of `port`'s cable.
    pub fn neighbor(&self, port: PortRef) -> Option<PortRef> {
        self.slot(port).and_then(|s| self.peer[s]).map(|(p, _)| p)
    }

    /// The index in `Topology::links` of the cable on `port`.
    pub fn link_at(&self, port: PortRef) -> Option<usize> {
        self.slot(port).and_then(|s| self.peer[s]).map(|(_, l)| l)
    }

    /// The cabled ports of `node` with their far ends, by port number.
    pub fn cabled_ports(&self, node: NodeIdx) -> impl Iterator<Item = (u8, PortRef)> + '_ {
        let (base, end) = match (self.port_base.get(node.0), self.port_base.get(node.0 + 1)) {
            (Some(&b), Some(&e)) => (b, e),
            _ => (0, 0),
        };
        self.peer[base..end].iter().enumerate().filter_map(|(p, e)| e.map(|(far, _)| (p as u8, far)))
    }

    /// The shortest directed route from `from` to `to`: the port to leave
    /// through at each hop, smpquery's `0,1,3` without the leading 0.
    ///
    /// From a CA or router the first hop is `from.port` (it must be cabled);
    /// from a switch any of its ports may be the first hop (`from.port` is
    /// ignored: the SMA sits on port 0). Only switches forward, so every
    /// intermediate node is a switch. Ties go to the lowest port numbers, so
    /// the answer is deterministic. `Some(vec![])` when `to` is `from.node`;
    /// `None` when unreachable or longer than 63 hops. O(nodes + links).
    pub fn dr_path_to(&self, from: PortRef, to: NodeIdx) -> Option<Vec<u8>> {
        let nodes = self.kinds.len();
        if from.node.0 >= nodes || to.0 >= nodes {
            return None;
        }
        if from.node == to {
            return Some(Vec::new());
        }
        // prev[n] = (node we came from, port we left it by).
        let mut prev: Vec<Option<(NodeIdx, u8)>> = vec![None; nodes];
        let mut seen = vec![false; nodes];
        let mut queue = VecDeque::new();
        seen[from.node.0] = true;
        if self.kinds[from.node.0] == NodeKind::Switch {
            queue.push_back(from.node);
        } else {
            let far = self.neighbor(from)?;
            if far.node == from.node {
                return None;
            }
            seen[far.node.0] = true;
            prev[far.node.0] = Some((from.node, from.port));
            if far.node != to && self.kinds[far.node.0] == NodeKind::Switch {
                queue.push_back(far.node);
            }
        }
        while !seen[to.0] {
            let Some(n) = queue.pop_front() else { break };
            for (port, far) in self.cabled_ports(n) {
                if seen[far.node.0] {
                    continue;
                }
                seen[far.node.0] = true;
                prev[far.node.0] = Some((n, port));
                if self.kinds[far.node.0] == NodeKind::Switch {
                    queue.push_back(far.node);
                }
            }
        }
        if !seen[to.0] {
            return None;
        }
        let mut path = Vec::new();
        let mut at = to;
        while at != from.node {
            let (p, port) = prev[at.0]?;
            path.push(port);
            at = p;
            if path.len() > MAX_DR_HOPS {
                return None;
            }
        }
        path.reverse();
        Some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Node;

    fn p(n: usize, port: u8) -> PortRef {
        PortRef { node: NodeIdx(n), port }
    }

    /// h0 - sw1 - sw2 - h3, plus a second parallel sw1-sw2 cable and a CA
    /// h4 hanging off h0's second port (a CA does not forward).
    fn line() -> Topology {
        let mut t = Topology::default();
        t.add_node(Node::new(NodeKind::Ca, "h0", 2, Guid(0x100000)));
        t.add_node(Node::new(NodeKind::Switch, "sw1", 8, Guid(0x200000)));
        t.add_node(Node::new(NodeKind::Switch, "sw2", 8, Guid(0x200001)));
        t.add_node(Node::new(NodeKind::Ca, "h3", 1, Guid(0x100003)));
        t.add_node(Node::new(NodeKind::Ca, "h4", 1, Guid(0x100005)));
        t.connect(p(0, 1), p(1, 3), 2, 1);
        t.connect(p(1, 7), p(2, 5), 2, 1);
        t.connect(p(1, 6), p(2, 6), 2, 1);
        t.connect(p(2, 2), p(3, 1), 2, 1);
        t.connect(p(0, 2), p(4, 1), 2, 1);
        t
    }

    #[test]
    fn lookups() {
        let t = line();
        let ix = t.index();
        assert_eq!(ix.node_by_name("sw2"), Some(NodeIdx(2)));
        assert_eq!(ix.node_by_name("nope"), None);
        assert_eq!(ix.node_by_guid(Guid(0x100003)), Some(NodeIdx(3)));
        assert_eq!(ix.port_by_guid(Guid(0x100002)), Some(p(0, 2)));
        assert_eq!(ix.port_by_guid(Guid(0x200001)), Some(p(2, 0)));
        assert_eq!(ix.neighbor(p(1, 7)), Some(p(2, 5)));
        assert_eq!(ix.neighbor(p(2, 5)), Some(p(1, 7)));
        assert_eq!(ix.neighbor(p(1, 1)), None);
        assert_eq!(ix.neighbor(p(3, 9)), None);
        assert_eq!(ix.neighbor(p(99, 1)), None);
        assert_eq!(ix.link_at(p(3, 1)), Some(3));
        // The slow path agrees.
        for l in &t.links {
            assert_eq!(t.neighbor(l.a), Some(l.b));
            assert_eq!(t.neighbor(l.b), Some(l.a));
        }
        let ports: Vec<u8> = ix.cabled_ports(NodeIdx(1)).map(|(p, _)| p).collect();
        assert_eq!(ports, vec![3, 6, 7]);
        // The last node's slots are reachable too.
        assert_eq!(ix.neighbor(p(4, 1)), Some(p(0, 2)));
        assert_eq!(ix.neighbor(p(4, 2)), None);
    }

    #[test]
    fn dr_paths() {
        let t = line();
        let ix = t.index();
        assert_eq!(ix.dr_path_to(p(0, 1), NodeIdx(0)), Some(vec![]));
        assert_eq!(ix.dr_path_to(p(0, 1), NodeIdx(1)), Some(vec![1]));
        // Lowest port wins between the parallel cables 6 and 7.
        assert_eq!(ix.dr_path_to(p(0, 1), NodeIdx(3)), Some(vec![1, 6, 2]));
        // From a switch, ports of the switch itself start the path.
        // (sw2's lowest cabled port towards sw1 is 5.)
        assert_eq!(ix.dr_path_to(p(2, 0), NodeIdx(0)), Some(vec![5, 3]));
        // h4 hangs off a CA: reachable only as the first hop from h0.
        assert_eq!(ix.dr_path_to(p(0, 2), NodeIdx(4)), Some(vec![2]));
        assert_eq!(ix.dr_path_to(p(2, 0), NodeIdx(4)), None);
        // A CA's uncabled port leads nowhere.
        assert_eq!(ix.dr_path_to(p(3, 2), NodeIdx(1)), None);
        assert_eq!(ix.dr_path_to(p(0, 1), NodeIdx(42)), None);
    }

    #[test]
    fn dr_path_longer_than_63_hops_is_none() {
        let mut t = Topology::default();
        for i in 0..70 {
            t.add_node(Node::new(NodeKind::Switch, format!("s{i}"), 2, Guid(0x200000 + i as u64)));
        }
        for i in 0..69 {
            t.connect(p(i, 2), p(i + 1, 1), 2, 1);
        }
        assert_eq!(t.dr_path_to(p(0, 0), NodeIdx(63)).map(|v| v.len()), Some(63));
        assert_eq!(t.dr_path_to(p(0, 0), NodeIdx(64)), None);
    }
}
