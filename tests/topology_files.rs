//! The readers on the fixture files: each ibsim net file against what
//! ibnetdiscover printed for it on ibsim (fixtures/topologies/capture.sh), so
//! GUIDs, descriptions, widths and speeds are checked against ibsim's own
//! view, in-process and fast.

use std::path::{Path, PathBuf};

use ibsm::topology::{
    fabric_diff, read_net_file, to_net_string, GeneratorSpec, NodeKind, NoteKind, Topology, TopologyError,
};
use ibsm::types::Guid;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/topologies").join(name)
}

fn read(name: &str) -> Topology {
    Topology::from_net_file(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A net file and ibnetdiscover's output for it describe one fabric.
#[test]
fn net_files_match_their_ibnetdiscover_captures() {
    for base in [
        "ibsim-example-net",
        "ibsim-example-2sw2path4hca",
        "ibsim-example-2sw2path4hca2port",
        "guids",
        "rates",
        "fattree2-r4",
    ] {
        let net = read(&format!("{base}.net"));
        let disc = read(&format!("{base}.ibnetdiscover"));
        let diff = fabric_diff(&net, &disc, 20);
        assert!(diff.is_empty(), "{base}: {diff:#?}");
        // ibnetdiscover names nodes by GUID; the net file's name is the description.
        for n in &disc.nodes {
            let prefix = match n.kind {
                NodeKind::Switch => "S-",
                NodeKind::Ca => "H-",
                NodeKind::Router => "R-",
            };
            assert_eq!(n.name, format!("{prefix}{:016x}", n.node_guid.0), "{base}");
        }
    }
}

#[test]
fn example_guids_are_ibsims() {
    let t = read("ibsim-example-net.net");
    let g = |name: &str| t.node(t.node_by_name(name).unwrap()).node_guid;
    assert_eq!(g("Switch1"), Guid(0x200000));
    assert_eq!(g("Switch2"), Guid(0x200001));
    assert_eq!(g("Hca1"), Guid(0x100000));
    assert_eq!(g("Hca2"), Guid(0x100003));
    let hca1 = t.node(t.node_by_name("Hca1").unwrap());
    assert_eq!(hca1.port_guid(1), Guid(0x100001));
    assert_eq!(hca1.system_guid, Guid(0x100000));
}

#[test]
fn every_example_parses_and_validates() {
    for name in [
        "ibsim-example-net.net",
        "ibsim-example-1.net",
        "ibsim-example-2sw2path.net",
        "ibsim-example-2sw2path4hca.net",
        "ibsim-example-2sw2path4hca2port.net",
    ] {
        let t = read(name);
        assert_eq!(t.validate(), Ok(()), "{name}");
        assert!(t.switches().count() >= 1 && t.hosts().count() >= 2, "{name}");
    }
}

#[test]
fn the_guid_fixture_reads_as_ibsim_reports_it() {
    // Values observed with `smpquery -D nodeinfo` / `nodedesc` on ibsim.
    let t = read("guids.net");
    let n = |name: &str| t.node(t.node_by_name(name).unwrap()).clone();
    let s1 = n("S1");
    assert_eq!((s1.node_guid, s1.system_guid, s1.description.as_str()), (Guid(0x5000), Guid(0x777), "my switch"));
    assert!(s1.enhanced_port0);
    let s2 = n("S2");
    assert_eq!((s2.node_guid, s2.description.as_str(), s2.enhanced_port0), (Guid(0x5001), "base port 0", false));
    let h2 = n("H2");
    assert_eq!((h2.node_guid, h2.port_guid(2)), (Guid(0xabd0), Guid(0xabd2)));
    let r1 = n("R1");
    assert_eq!((r1.kind, r1.node_guid, r1.port_guid(1)), (NodeKind::Router, Guid(0x900000), Guid(0x900001)));
}

#[test]
fn includes_and_do_lines() {
    let p = read_net_file(&fixture("include-top.net")).unwrap();
    assert_eq!(p.topology.nodes.len(), 3);
    assert_eq!(p.topology.links.len(), 2);
    assert_eq!(p.notes.len(), 1);
    assert!(matches!(p.notes[0].kind, NoteKind::DoCommandIgnored(_)));
    assert!(p.notes[0].file.ends_with("include-hosts.net"));
}

#[test]
fn from_spec_or_file_takes_both() {
    let f = Topology::from_spec_or_file(fixture("ibsim-example-net.net").to_str().unwrap()).unwrap();
    assert_eq!(f.nodes.len(), 4);
    let g = Topology::from_spec_or_file("torus2d:3x3,hosts=2").unwrap();
    assert_eq!(g.hosts().count(), 18);
    assert!(matches!(Topology::from_spec_or_file("fattree2:radix=x"), Err(TopologyError::Spec(_))));
    assert!(matches!(Topology::from_spec_or_file("/nonexistent/net"), Err(TopologyError::Io { .. })));
}

/// The generated fixture is what the writer produces for its spec today.
#[test]
fn generated_fixture_is_current() {
    let t = "fattree2:radix=4,width=12x,speed=qdr".parse::<GeneratorSpec>().unwrap().generate().unwrap();
    let text = std::fs::read_to_string(fixture("fattree2-r4.net")).unwrap();
    assert_eq!(to_net_string(&t).unwrap(), text);
}

#[test]
fn index_agrees_with_linear_lookups_on_a_large_fabric() {
    let t = Topology::from_spec_or_file("fattree3:radix=16,pods=4").unwrap();
    let ix = t.index();
    for (i, n) in t.nodes.iter().enumerate().step_by(37) {
        assert_eq!(ix.node_by_name(&n.name), t.node_by_name(&n.name));
        assert_eq!(ix.node_by_guid(n.node_guid), Some(ibsm::topology::NodeIdx(i)));
        assert_eq!(t.node_by_guid(n.node_guid), Some(ibsm::topology::NodeIdx(i)));
    }
    for l in t.links.iter().step_by(11) {
        assert_eq!(ix.neighbor(l.a), Some(l.b));
        assert_eq!(t.neighbor(l.b), Some(l.a));
    }
    // Every node is reachable by directed route from the first host.
    let h0 = t.hosts().next().unwrap();
    let from = ibsm::topology::PortRef { node: h0, port: 1 };
    for i in 0..t.nodes.len() {
        let path = ix.dr_path_to(from, ibsm::topology::NodeIdx(i)).expect("reachable");
        // host -> leaf -> spine -> core -> spine -> leaf -> host at most.
        assert!(path.len() <= 6, "{}", path.len());
    }
}

/// The largest named size builds, writes and reads back (release: well
/// under a second each; debug: a few seconds).
#[test]
fn fifty_thousand_hosts_round_trip() {
    let t = Topology::from_spec_or_file("fattree3:radix=64,pods=49").unwrap();
    assert_eq!(t.hosts().count(), 50_176);
    let text = to_net_string(&t).unwrap();
    let back = ibsm::topology::parse_net(text.as_bytes(), Path::new("big.net")).unwrap().topology;
    assert_eq!(back.nodes.len(), t.nodes.len());
    assert!(fabric_diff(&t, &back, 5).is_empty());
}
