//! The rules every `Topology` meets, whatever produced it: the reader and
//! the generators call `validate` before handing a model out, the writer
//! before writing one.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::{is_ext_speed_code, is_speed_code, is_width_code, NodeKind, Problem, Topology};
use crate::types::{Guid, MAX_PORTS};

impl Topology {
    /// Checks names, port counts, GUID uniqueness and the cabling (every
    /// link end on an existing port other than 0, no port cabled twice,
    /// single valid width and speed codes). Returns the first problem found,
    /// nodes before links. O(nodes + links).
    pub fn validate(&self) -> Result<(), Problem> {
        self.check_nodes()?;
        self.check_links()
    }

    fn check_nodes(&self) -> Result<(), Problem> {
        let mut names: HashMap<&str, usize> = HashMap::with_capacity(self.nodes.len());
        let mut node_guids: HashMap<Guid, usize> = HashMap::with_capacity(self.nodes.len());
        let mut port_guids: HashMap<Guid, usize> = HashMap::with_capacity(self.nodes.len() * 2);
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() {
                return Err(Problem::EmptyName { index: i });
            }
            if names.insert(&n.name, i).is_some() {
                return Err(Problem::DuplicateName { name: n.name.clone() });
            }
            if n.num_ports == 0 || n.num_ports > MAX_PORTS {
                return Err(Problem::BadPortCount { node: n.name.clone(), num_ports: n.num_ports as u32 });
            }
            let expected = match n.kind {
                NodeKind::Switch => 1,
                NodeKind::Ca | NodeKind::Router => n.num_ports as usize + 1,
            };
            if n.port_guids.len() != expected {
                return Err(Problem::PortGuidCount {
                    node: n.name.clone(),
                    kind: n.kind.name(),
                    num_ports: n.num_ports,
                    expected,
                    found: n.port_guids.len(),
                });
            }
            if let Some(&first) = node_guids.get(&n.node_guid) {
                return Err(Problem::DuplicateNodeGuid {
                    guid: n.node_guid,
                    first: self.nodes[first].name.clone(),
                    second: n.name.clone(),
                });
            }
            node_guids.insert(n.node_guid, i);
            // Index 0 of a CA's table is a placeholder, not a port.
            let real = match n.kind {
                NodeKind::Switch => &n.port_guids[..],
                NodeKind::Ca | NodeKind::Router => &n.port_guids[1..],
            };
            for &g in real {
                match port_guids.entry(g) {
                    Entry::Occupied(e) => {
                        return Err(Problem::DuplicatePortGuid {
                            guid: g,
                            first: self.nodes[*e.get()].name.clone(),
                            second: n.name.clone(),
                        })
                    }
                    Entry::Vacant(e) => {
                        e.insert(i);
                    }
                }
            }
        }
        Ok(())
    }

    fn check_links(&self) -> Result<(), Problem> {
        // One slot per (node, port); offsets make it a flat table.
        let mut base = Vec::with_capacity(self.nodes.len() + 1);
        let mut total = 0usize;
        for n in &self.nodes {
            base.push(total);
            total += n.num_ports as usize + 1;
        }
        let mut used = vec![false; total];
        for (li, l) in self.links.iter().enumerate() {
            for end in [l.a, l.b] {
                let Some(node) = self.nodes.get(end.node.0) else {
                    return Err(Problem::NodeIndexOutOfRange { link: li, index: end.node.0, nodes: self.nodes.len() });
                };
                if end.port == 0 {
                    return Err(Problem::PortZero { node: node.name.clone() });
                }
                if end.port > node.num_ports {
                    return Err(Problem::PortOutOfRange {
                        node: node.name.clone(),
                        port: end.port as u32,
                        num_ports: node.num_ports,
                    });
                }
            }
            let a_name = &self.nodes[l.a.node.0].name;
            if l.a == l.b {
                return Err(Problem::PortLoop { node: a_name.clone(), port: l.a.port });
            }
            for end in [l.a, l.b] {
                let slot = &mut used[base[end.node.0] + end.port as usize];
                if *slot {
                    return Err(Problem::PortCabledTwice { node: self.nodes[end.node.0].name.clone(), port: end.port });
                }
                *slot = true;
            }
            if !is_width_code(l.width) {
                return Err(Problem::BadLinkRate {
                    node: a_name.clone(),
                    port: l.a.port,
                    what: "width",
                    value: l.width,
                });
            }
            if !is_speed_code(l.speed) {
                return Err(Problem::BadLinkRate {
                    node: a_name.clone(),
                    port: l.a.port,
                    what: "speed",
                    value: l.speed,
                });
            }
            if !is_ext_speed_code(l.ext_speed) {
                return Err(Problem::BadLinkRate {
                    node: a_name.clone(),
                    port: l.a.port,
                    what: "extended speed",
                    value: l.ext_speed,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{Node, NodeIdx, PortRef, DEFAULT_SPEED, DEFAULT_WIDTH};

    fn two_nodes() -> Topology {
        let mut t = Topology::default();
        t.add_node(Node::new(NodeKind::Switch, "sw", 4, Guid(0x200000)));
        t.add_node(Node::new(NodeKind::Ca, "h", 2, Guid(0x100000)));
        t
    }
    fn p(n: usize, port: u8) -> PortRef {
        PortRef { node: NodeIdx(n), port }
    }

    #[test]
    fn accepts_a_consistent_model() {
        let mut t = two_nodes();
        t.connect(p(0, 1), p(1, 1), DEFAULT_WIDTH, DEFAULT_SPEED);
        t.connect(p(0, 2), p(1, 2), DEFAULT_WIDTH, DEFAULT_SPEED);
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn rejects_each_broken_rule() {
        let mut t = two_nodes();
        t.connect(p(0, 1), p(1, 1), 2, 1);
        t.connect(p(0, 2), p(1, 1), 2, 1);
        assert_eq!(t.validate(), Err(Problem::PortCabledTwice { node: "h".into(), port: 1 }));

        let mut t = two_nodes();
        t.connect(p(0, 5), p(1, 1), 2, 1);
        assert_eq!(t.validate(), Err(Problem::PortOutOfRange { node: "sw".into(), port: 5, num_ports: 4 }));

        let mut t = two_nodes();
        t.connect(p(0, 0), p(1, 1), 2, 1);
        assert_eq!(t.validate(), Err(Problem::PortZero { node: "sw".into() }));

        let mut t = two_nodes();
        t.connect(p(0, 1), p(7, 1), 2, 1);
        assert_eq!(t.validate(), Err(Problem::NodeIndexOutOfRange { link: 0, index: 7, nodes: 2 }));

        let mut t = two_nodes();
        t.connect(p(0, 1), p(0, 1), 2, 1);
        assert_eq!(t.validate(), Err(Problem::PortLoop { node: "sw".into(), port: 1 }));

        let mut t = two_nodes();
        t.connect(p(0, 1), p(1, 1), 3, 1);
        assert!(matches!(t.validate(), Err(Problem::BadLinkRate { what: "width", value: 3, .. })));

        let mut t = two_nodes();
        t.connect_ext(p(0, 1), p(1, 1), 2, 4, 16);
        assert!(matches!(t.validate(), Err(Problem::BadLinkRate { what: "extended speed", value: 16, .. })));
        let mut t = two_nodes();
        t.connect_ext(p(0, 1), p(1, 1), 16, 4, crate::topology::SPEED_XDR);
        assert_eq!(t.validate(), Ok(()), "XDR 2x is a link");

        let mut t = two_nodes();
        t.nodes[1].name = "sw".into();
        assert_eq!(t.validate(), Err(Problem::DuplicateName { name: "sw".into() }));

        let mut t = two_nodes();
        t.add_node(Node::new(NodeKind::Switch, "sw2", 4, Guid(0x200000)));
        assert!(matches!(t.validate(), Err(Problem::DuplicateNodeGuid { .. })));

        // A CA port GUID colliding with a switch's port GUID.
        let mut t = two_nodes();
        t.add_node(Node::new(NodeKind::Switch, "sw2", 4, Guid(0x100001)));
        assert!(matches!(t.validate(), Err(Problem::DuplicatePortGuid { .. })));

        let mut t = two_nodes();
        t.nodes[1].port_guids.pop();
        assert!(matches!(t.validate(), Err(Problem::PortGuidCount { expected: 3, found: 2, .. })));

        let mut t = two_nodes();
        t.nodes[0].num_ports = 255;
        assert!(matches!(t.validate(), Err(Problem::BadPortCount { num_ports: 255, .. })));
    }

    #[test]
    fn a_port_may_link_to_another_port_of_the_same_node() {
        // A loopback cable between two switch ports is legal wiring.
        let mut t = two_nodes();
        t.connect(p(0, 1), p(0, 2), 2, 1);
        assert_eq!(t.validate(), Ok(()));
    }
}
