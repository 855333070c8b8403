//! Compares two models of one fabric by GUID, ignoring node names and
//! order: what a discovery found against what a file or generator said, or a
//! file against ibnetdiscover's view of it.

use std::collections::{BTreeMap, BTreeSet};

use super::{LinkSpeedCode, LinkWidthCode, Node, Topology};
use crate::types::Guid;

/// One end of a cable, by GUID: (node GUID, port number).
type End = (Guid, u8);

/// The differences between `expected` and `actual`, one line each, at most
/// `limit` lines (empty: same fabric). Nodes match by node GUID and must
/// agree on kind, port count, system GUID, port GUIDs, description and
/// EnhancedPort0; cables match by their two (node GUID, port) ends and must
/// agree on width and speed. O((nodes + links) log n).
pub fn fabric_diff(expected: &Topology, actual: &Topology, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |line: String| {
        if out.len() < limit {
            out.push(line);
        }
    };
    let (e, a) = (by_guid(expected), by_guid(actual));
    for (g, en) in &e {
        let Some(an) = a.get(g) else {
            push(format!("node {g} (`{}`) missing", en.name));
            continue;
        };
        let fields: [(&str, String, String); 6] = [
            ("kind", format!("{:?}", en.kind), format!("{:?}", an.kind)),
            ("num_ports", en.num_ports.to_string(), an.num_ports.to_string()),
            ("system_guid", en.system_guid.to_string(), an.system_guid.to_string()),
            ("port_guids", format!("{:?}", real_port_guids(en)), format!("{:?}", real_port_guids(an))),
            ("description", en.description.clone(), an.description.clone()),
            ("enhanced_port0", en.enhanced_port0.to_string(), an.enhanced_port0.to_string()),
        ];
        for (what, x, y) in fields {
            if x != y {
                push(format!("node {g} (`{}`): {what} expected {x}, found {y}", en.name));
            }
        }
    }
    for (g, an) in &a {
        if !e.contains_key(g) {
            push(format!("node {g} (`{}`) unexpected", an.name));
        }
    }
    let (el, al) = (cables(expected), cables(actual));
    for (ends, rate) in &el {
        match al.get(ends) {
            None => push(format!("cable {} missing", show(ends))),
            Some(r) if r != rate => {
                push(format!("cable {}: width/speed expected {}/{}, found {}/{}", show(ends), rate.0, rate.1, r.0, r.1))
            }
            Some(_) => {}
        }
    }
    for ends in al.keys() {
        if !el.contains_key(ends) {
            push(format!("cable {} unexpected", show(ends)));
        }
    }
    out
}

fn by_guid(t: &Topology) -> BTreeMap<Guid, &Node> {
    t.nodes.iter().map(|n| (n.node_guid, n)).collect()
}

/// The GUIDs of real ports: port 0 of a switch, ports 1..=n of a CA.
fn real_port_guids(n: &Node) -> Vec<Guid> {
    match n.kind {
        super::NodeKind::Switch => n.port_guids.first().copied().into_iter().collect(),
        _ => n.port_guids.iter().skip(1).copied().collect(),
    }
}

fn cables(t: &Topology) -> BTreeMap<(End, End), (LinkWidthCode, LinkSpeedCode)> {
    let end = |p: super::PortRef| -> End { (t.nodes.get(p.node.0).map(|n| n.node_guid).unwrap_or_default(), p.port) };
    t.links
        .iter()
        .map(|l| {
            let (x, y) = (end(l.a), end(l.b));
            ((x.min(y), x.max(y)), (l.width, l.speed))
        })
        .collect()
}

fn show(ends: &(End, End)) -> String {
    format!("{}[{}]-{}[{}]", ends.0 .0, ends.0 .1, ends.1 .0, ends.1 .1)
}

/// The node GUIDs present in both models (for partial comparisons).
pub fn common_guids(a: &Topology, b: &Topology) -> BTreeSet<Guid> {
    let x: BTreeSet<Guid> = a.nodes.iter().map(|n| n.node_guid).collect();
    b.nodes.iter().map(|n| n.node_guid).filter(|g| x.contains(g)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::GeneratorSpec;

    #[test]
    fn same_fabric_in_another_order_and_names_has_no_diff() {
        let t = "fattree2:radix=4".parse::<GeneratorSpec>().unwrap().generate().unwrap();
        let mut u = t.clone();
        for n in &mut u.nodes {
            n.name = format!("x-{}", n.name);
        }
        u.links.reverse();
        for l in &mut u.links {
            std::mem::swap(&mut l.a, &mut l.b);
        }
        assert_eq!(fabric_diff(&t, &u, 10), Vec::<String>::new());
    }

    #[test]
    fn differences_are_reported() {
        let t = "fattree2:radix=4".parse::<GeneratorSpec>().unwrap().generate().unwrap();
        let mut u = t.clone();
        u.links[0].width = 8;
        u.nodes[1].description = "other".into();
        u.links.pop();
        let d = fabric_diff(&t, &u, 10);
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d.iter().any(|l| l.contains("description")));
        assert!(d.iter().any(|l| l.contains("width/speed")));
        assert!(d.iter().any(|l| l.contains("missing")));
        assert_eq!(fabric_diff(&t, &u, 1).len(), 1);
        assert_eq!(common_guids(&t, &u).len(), t.nodes.len());
    }
}
