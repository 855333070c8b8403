//! Writes a `Topology` as an ibsim net file that ibsim loads with exactly the
//! model's GUIDs, port counts, links, widths and speeds, and that `netfile`
//! reads back into an equal model.
//!
//! GUIDs: the writer replays ibsim's per-type counters (see `guids`) and
//! writes `switchguid=`/`caguid=`/`rtguid=` before a node only when the
//! counter would give it some other GUID, so a model with ibsim's default
//! GUIDs gives a file without GUID lines. `sysimgguid=` appears where the
//! system GUID differs from the node GUID. Rates: `w=`/`s=` on both ends of a
//! link that is not 4x SDR (each end's enabled mask is the one active value,
//! so both ends agree on it).
//!
//! What ibsim cannot express is refused (`TopologyError::Unrepresentable`):
//! CA/router port GUIDs other than node GUID + port, a switch port 0 GUID
//! other than its node GUID, a zero system GUID (ibsim reads it as "unset"),
//! names over 64 bytes or with `"`, `#`, `@` or control characters,
//! descriptions that are empty, over 63 bytes, or hold `"` or control
//! characters.

use std::fmt::Write as _;
use std::path::Path;

use super::guids::GuidCounters;
use super::netfile::{MAX_DESCRIPTION, MAX_NAME};
use super::{NodeKind, Topology, TopologyError, DEFAULT_SPEED, DEFAULT_WIDTH};

/// ibsim 0.10's capacities when no flags are given (sim.h).
pub const IBSIM_MAX_NODES: usize = 2048;
pub const IBSIM_MAX_SWITCHES: usize = 256;
pub const IBSIM_MAX_PORTS: usize = IBSIM_MAX_SWITCHES * 36 + IBSIM_MAX_NODES * 2;
pub const IBSIM_LINEAR_CAP: usize = 30 * 1024;
/// LinearFDBCap can never usefully exceed the unicast LID space + LID 0.
pub const MAX_LINEAR_CAP: usize = 0xC000;

/// The command-line flags ibsim needs to hold `topo` (empty when its
/// defaults suffice): `-N` nodes (switches count as nodes), `-S` switches,
/// `-P` ports (a switch has ports + 1 with port 0, a CA its ports), and
/// `-L` when one LID per switch and per CA/router port would not fit ibsim's
/// 30720-entry forwarding tables (capped at 49152, the unicast LID space:
/// beyond that LMC 0 cannot address every port at all).
pub fn ibsim_args(topo: &Topology) -> Vec<String> {
    let nodes = topo.nodes.len();
    let switches = topo.switches().count();
    let ports: usize = topo.nodes.iter().map(|n| n.num_ports as usize + usize::from(n.kind == NodeKind::Switch)).sum();
    let lids: usize =
        topo.nodes.iter().map(|n| if n.kind == NodeKind::Switch { 1 } else { n.num_ports as usize }).sum();
    let mut args = Vec::new();
    if nodes > IBSIM_MAX_NODES {
        args.extend(["-N".to_string(), nodes.to_string()]);
    }
    if switches > IBSIM_MAX_SWITCHES {
        args.extend(["-S".to_string(), switches.to_string()]);
    }
    if ports > IBSIM_MAX_PORTS {
        args.extend(["-P".to_string(), ports.to_string()]);
    }
    if lids + 1 > IBSIM_LINEAR_CAP {
        args.extend(["-L".to_string(), (lids + 1).min(MAX_LINEAR_CAP).to_string()]);
    }
    args
}

/// The ibsim net file text for `topo`.
pub fn to_net_string(topo: &Topology) -> Result<String, TopologyError> {
    topo.validate()?;
    check_representable(topo)?;
    let ix = topo.index();
    let mut out = String::with_capacity(topo.nodes.len() * 64 + topo.links.len() * 64);
    let (sw, ca, rt) = (topo.switches().count(), topo.hosts().count(), topo.nodes_of(NodeKind::Router).count());
    // Writing to a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(
        out,
        "# ibsm topology: {} nodes ({sw} switches, {ca} CAs, {rt} routers), {} links",
        topo.nodes.len(),
        topo.links.len()
    );
    let args = ibsim_args(topo);
    if !args.is_empty() {
        let _ = writeln!(out, "# load with: ibsim {} <this file>", args.join(" "));
    }
    out.push('\n');

    let mut counters = GuidCounters::new();
    // ibsim's first router GUID comes from an out-of-bounds read; never rely on it.
    let mut router_seen = false;
    for (i, node) in topo.nodes.iter().enumerate() {
        let g = node.node_guid.0;
        let must_state = node.kind == NodeKind::Router && !router_seen;
        if must_state || counters.peek(node.kind) != g {
            let key = match node.kind {
                NodeKind::Switch => "switchguid",
                NodeKind::Ca => "caguid",
                NodeKind::Router => "rtguid",
            };
            let _ = writeln!(out, "{key}={g:#x}");
            counters.set_absolute(node.kind, g);
        }
        router_seen |= node.kind == NodeKind::Router;
        counters.allocate(node.kind, node.num_ports);
        if node.system_guid != node.node_guid {
            let _ = writeln!(out, "sysimgguid={:#x}", node.system_guid.0);
        }
        let _ = write!(
            out,
            "{}\t{} \"{}\"\t# \"{}\"",
            node.kind.net_keyword(),
            node.num_ports,
            node.name,
            node.description
        );
        if node.kind == NodeKind::Switch && node.enhanced_port0 {
            out.push_str(" enhanced port 0");
        }
        out.push('\n');
        for (port, far) in ix.cabled_ports(super::NodeIdx(i)) {
            let _ = write!(out, "[{port}]\t\"{}\"[{}]", topo.node(far.node).name, far.port);
            let link = ix.link_at(super::PortRef { node: super::NodeIdx(i), port }).map(|l| &topo.links[l]);
            if let Some(l) = link.filter(|l| l.width != DEFAULT_WIDTH || l.speed != DEFAULT_SPEED) {
                let _ = write!(out, "\tw={} s={}", l.width, l.speed);
            }
            out.push('\n');
        }
        out.push('\n');
    }
    Ok(out)
}

/// Writes `topo` to `path` as an ibsim net file.
pub fn write_net_file(topo: &Topology, path: &Path) -> Result<(), TopologyError> {
    let text = to_net_string(topo)?;
    std::fs::write(path, text).map_err(|source| TopologyError::Io { file: path.to_path_buf(), source })
}

fn check_representable(topo: &Topology) -> Result<(), TopologyError> {
    let refuse = |node: &str, reason: String| Err(TopologyError::Unrepresentable { node: node.to_string(), reason });
    for n in &topo.nodes {
        if n.name.len() > MAX_NAME {
            return refuse(&n.name, format!("name longer than ibsim's {MAX_NAME} bytes"));
        }
        if n.name.contains(['"', '#', '@']) || n.name.chars().any(char::is_control) {
            return refuse(&n.name, "name holds `\"`, `#`, `@` or a control character".into());
        }
        if n.description.is_empty() {
            return refuse(&n.name, "empty description (ibsim would report the name)".into());
        }
        if n.description.len() > MAX_DESCRIPTION {
            return refuse(&n.name, format!("description longer than ibsim's {MAX_DESCRIPTION} bytes"));
        }
        if n.description.contains('"') || n.description.chars().any(char::is_control) {
            return refuse(&n.name, "description holds `\"` or a control character".into());
        }
        if n.system_guid.0 == 0 && n.node_guid.0 != 0 {
            return refuse(&n.name, "system GUID 0 (ibsim's sysimgguid=0 means \"same as node GUID\")".into());
        }
        match n.kind {
            NodeKind::Switch => {
                if n.port_guids[0] != n.node_guid {
                    return refuse(&n.name, format!("port 0 GUID {} is not the node GUID", n.port_guids[0]));
                }
            }
            NodeKind::Ca | NodeKind::Router => {
                for p in 1..=n.num_ports {
                    let want = n.node_guid.0.wrapping_add(p as u64);
                    if n.port_guids[p as usize].0 != want {
                        return refuse(
                            &n.name,
                            format!("port {p} GUID {} is not node GUID + {p} ({want:#x})", n.port_guids[p as usize]),
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{parse_net, GeneratorSpec, Node, NodeIdx, PortRef};
    use crate::types::Guid;

    fn round_trip(t: &Topology) -> Topology {
        let text = to_net_string(t).unwrap();
        parse_net(text.as_bytes(), Path::new("written.net")).unwrap_or_else(|e| panic!("{e}\n{text}")).topology
    }

    #[test]
    fn generated_fabrics_round_trip_exactly() {
        for s in [
            "fattree2:radix=8,leaves=4,spines=2,hosts=4,width=12x,speed=qdr",
            "fattree3:radix=6,pods=3",
            "torus3d:3x3x2,hosts=2,speed=ddr",
            "mesh2d:4x4,width=1x",
            "dragonfly:groups=5,routers=4,hosts=2,global=1",
            "random:switches=20,links=40,hosts=30,seed=7",
            "b2b:width=8x",
            "b2b:width=2x",
        ] {
            let t: Topology = s.parse::<GeneratorSpec>().unwrap().generate().unwrap();
            let back = round_trip(&t);
            assert_eq!(back.nodes, t.nodes, "{s}");
            // Links come back in port-table order; compare as sets.
            let norm = |t: &Topology| {
                let mut v: Vec<_> = t
                    .links
                    .iter()
                    .map(|l| if l.a <= l.b { (l.a, l.b, l.width, l.speed) } else { (l.b, l.a, l.width, l.speed) })
                    .collect();
                v.sort();
                v
            };
            assert_eq!(norm(&back), norm(&t), "{s}");
        }
    }

    #[test]
    fn default_guids_need_no_guid_lines() {
        let t = "fattree2:radix=4".parse::<GeneratorSpec>().unwrap().generate().unwrap();
        let text = to_net_string(&t).unwrap();
        assert!(!text.contains("guid="), "{text}");
    }

    #[test]
    fn explicit_guids_descriptions_and_flags_round_trip() {
        let mut t = Topology::default();
        let mut sw = Node::new(NodeKind::Switch, "S-0002c90200413d30", 36, Guid(0x2c90200413d30));
        sw.system_guid = Guid(0x2c90200413d33);
        sw.description = "MF0;sw-a:IS5030/U1".into();
        sw.enhanced_port0 = true;
        t.add_node(sw);
        let mut ca = Node::new(NodeKind::Ca, "node 01", 2, Guid(0x2c9030002fb04));
        ca.description = "node01 HCA-1".into();
        t.add_node(ca);
        t.add_node(Node::new(NodeKind::Router, "rt", 2, Guid(0x55)));
        t.add_node(Node::new(NodeKind::Ca, "second", 1, Guid(0x2c9030002fb07)));
        let p = |n, port| PortRef { node: NodeIdx(n), port };
        t.connect(p(0, 1), p(1, 2), 8, 4);
        t.connect(p(0, 7), p(2, 1), 2, 1);
        t.connect(p(0, 3), p(3, 1), 1, 2);
        let text = to_net_string(&t).unwrap();
        // The second CA follows the first by ibsim's counter: no caguid line.
        assert_eq!(text.matches("caguid=").count(), 1, "{text}");
        assert!(text.contains("rtguid=0x55"), "{text}");
        let back = round_trip(&t);
        assert_eq!(back.nodes, t.nodes);
        assert_eq!(back.links.len(), 3);
        assert!(back.links.iter().any(|l| l.a == p(0, 1) && l.b == p(1, 2) && l.width == 8 && l.speed == 4));
    }

    #[test]
    fn unrepresentable_models_are_refused() {
        let base = || {
            let mut t = Topology::default();
            t.add_node(Node::new(NodeKind::Ca, "a", 2, Guid(0x10)));
            t
        };
        let mut t = base();
        t.nodes[0].port_guids[2] = Guid(0x99);
        assert!(matches!(to_net_string(&t), Err(TopologyError::Unrepresentable { .. })));
        let mut t = base();
        t.nodes[0].description = String::new();
        assert!(matches!(to_net_string(&t), Err(TopologyError::Unrepresentable { .. })));
        let mut t = base();
        t.nodes[0].name = "a\"b".into();
        assert!(matches!(to_net_string(&t), Err(TopologyError::Unrepresentable { .. })));
        let mut t = base();
        t.nodes[0].description = "d".repeat(64);
        assert!(matches!(to_net_string(&t), Err(TopologyError::Unrepresentable { .. })));
        let mut t = base();
        t.nodes[0].system_guid = Guid(0);
        assert!(matches!(to_net_string(&t), Err(TopologyError::Unrepresentable { .. })));
        let mut t = base();
        t.nodes[0].num_ports = 0;
        assert!(matches!(to_net_string(&t), Err(TopologyError::Invalid(_))));
    }

    #[test]
    fn ibsim_flags_only_beyond_its_defaults() {
        let small = "fattree2:radix=36".parse::<GeneratorSpec>().unwrap().generate().unwrap();
        assert_eq!(ibsim_args(&small), Vec::<String>::new());
        let big = "fattree3:radix=36,pods=12".parse::<GeneratorSpec>().unwrap().generate().unwrap();
        // 3888 hosts + 12*36 + 324 switches.
        let nodes = 3888 + 432 + 324;
        let ports = 3888 + 756 * 37;
        assert_eq!(
            ibsim_args(&big),
            ["-N", &nodes.to_string(), "-S", "756", "-P", &ports.to_string()].map(String::from).to_vec()
        );
        let huge = "fattree3:radix=64,pods=49".parse::<GeneratorSpec>().unwrap().generate().unwrap();
        let args = ibsim_args(&huge);
        assert_eq!(args[args.len() - 2..], ["-L".to_string(), "49152".to_string()]);
    }
}
