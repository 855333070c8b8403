//! Bad input for every engine (issue 12, "Bad input"): options naming GUIDs
//! the fabric does not have, fabrics with no switch to order, disconnected
//! fabrics, parallel cables, loopback cables and VL budgets outside 1-15.
//! Each gives a typed error naming what is wrong, never a panic; a
//! disconnected fabric gives partial routes that deliver every pair the
//! cabling connects.

use std::collections::HashSet;

use ibsm_routing::testfab;
use ibsm_routing::{
    route, validate, EndPort, EngineKind, EngineOptions, FabricBuilder, PortEnd, Report, RoutingError, RoutingFabric,
    Switch, SwitchId, UNROUTED,
};

/// Builds fabrics by hand: GUIDs and LIDs handed out in order, so that two
/// builds of the same calls give the same fabric.
struct Build {
    b: FabricBuilder,
    lid: u16,
    next: u64,
}

const SWITCH_GUID: u64 = 0x0002_c903_0000_0000;
const NODE_GUID: u64 = 0x0002_c904_0000_0000;
const PORT_GUID: u64 = 0x0002_c905_0000_0000;

impl Build {
    fn new() -> Build {
        Build { b: FabricBuilder::new(), lid: 0, next: 0 }
    }
    fn switch(&mut self, ports: u8) -> SwitchId {
        self.lid += 1;
        self.next += 1;
        self.b.add_switch(Switch::new(SWITCH_GUID + self.next, ports, self.lid)).unwrap()
    }
    fn host_on(&mut self, s: SwitchId, port: u8) {
        let e = self.lone_host();
        self.b.connect(PortEnd::End(e), PortEnd::Switch(s, port)).unwrap();
    }
    fn lone_host(&mut self) -> ibsm_routing::EndPortId {
        self.lid += 1;
        self.next += 1;
        self.b.add_end_port(EndPort::new(NODE_GUID + self.next, PORT_GUID + self.next, 1, self.lid)).unwrap()
    }
    fn cable(&mut self, a: SwitchId, pa: u8, b: SwitchId, pb: u8) {
        self.b.connect(PortEnd::Switch(a, pa), PortEnd::Switch(b, pb)).unwrap();
    }
    /// A two-level fat tree: every leaf cabled once to every spine, `hosts`
    /// hosts on each leaf's first ports, `spare` uncabled ports at the end
    /// of every switch. Returns (spines, leaves).
    fn tree(&mut self, spines: u8, leaves: u8, hosts: u8, spare: u8) -> (Vec<SwitchId>, Vec<SwitchId>) {
        let ls: Vec<SwitchId> = (0..leaves).map(|_| self.switch(hosts + spines + spare)).collect();
        let ss: Vec<SwitchId> = (0..spines).map(|_| self.switch(leaves + spare)).collect();
        for (i, &l) in ls.iter().enumerate() {
            for p in 1..=hosts {
                self.host_on(l, p);
            }
            for (j, &s) in ss.iter().enumerate() {
                self.cable(l, hosts + 1 + j as u8, s, i as u8 + 1);
            }
        }
        (ss, ls)
    }
    /// A ring of `n` switches (port 1 to the next one's port 2), `hosts`
    /// hosts on ports 3.. of each, `spare` uncabled ports after them.
    fn ring(&mut self, n: usize, hosts: u8, spare: u8) -> Vec<SwitchId> {
        let s: Vec<SwitchId> = (0..n).map(|_| self.switch(2 + hosts + spare)).collect();
        for i in 0..n {
            self.cable(s[i], 1, s[(i + 1) % n], 2);
            for p in 0..hosts {
                self.host_on(s[i], 3 + p);
            }
        }
        s
    }
    fn finish(self) -> RoutingFabric {
        self.b.build().unwrap()
    }
}

fn opts() -> EngineOptions {
    EngineOptions::default()
}

fn hex(g: u64) -> String {
    format!("{g:#018x}")
}

/// A fat tree with 2 spines, 4 leaves and 2 hosts per leaf.
fn small_tree() -> RoutingFabric {
    let mut b = Build::new();
    b.tree(2, 4, 2, 0);
    b.finish()
}

/// Asserts an options error: `Input` naming the option, the 1-based place in
/// its list, the GUID and what is wrong with it.
fn assert_option_error(
    r: Result<ibsm_routing::Routes, RoutingError>,
    option: &str,
    place: usize,
    guid: u64,
    what: &str,
) {
    let err = r.unwrap_err();
    let RoutingError::Input { file, line, problem } = &err else { panic!("{option}: {err:?}") };
    assert_eq!((file.as_str(), *line), (option, place), "{err}");
    assert!(problem.contains(&hex(guid)) && problem.contains(what), "{option}: {err}");
    assert!(err.to_string().contains(&hex(guid)), "{err}");
}

#[test]
fn root_guids_that_name_no_switch_are_refused_by_every_engine() {
    let f = small_tree();
    let spine = f.switches().iter().map(|s| s.guid).max().unwrap();
    let host = &f.end_ports()[3];
    let cases =
        [(0xdead_beef, "not a switch in the fabric"), (host.port_guid, "end port"), (host.node_guid, "end port")];
    for kind in EngineKind::ALL {
        for (bad, what) in cases {
            let o = EngineOptions { root_guids: vec![spine, bad], ..opts() };
            assert_option_error(route(kind, &f, &o), "root_guids", 2, bad, what);
        }
    }
}

#[test]
fn compute_and_io_guids_that_name_no_end_port_are_refused_by_every_engine() {
    let f = small_tree();
    let (host, other) = (f.end_ports()[0].port_guid, f.end_ports()[1].port_guid);
    let leaf = f.switches()[0].guid;
    let cases = [(0xdead_beef, "not an end port or node in the fabric"), (leaf, "is a switch")];
    for kind in EngineKind::ALL {
        for (bad, what) in cases {
            let cn = EngineOptions { cn_guids: vec![host, other, bad], ..opts() };
            assert_option_error(route(kind, &f, &cn), "cn_guids", 3, bad, what);
            let io = EngineOptions { io_guids: vec![bad], ..opts() };
            assert_option_error(route(kind, &f, &io), "io_guids", 1, bad, what);
        }
    }
}

#[test]
fn node_guids_in_compute_lists_mean_their_ports() {
    // guidfile::check_known accepts a CA's node GUID for its port; the
    // engines match port GUIDs, so the node GUID must be resolved first.
    let f = small_tree();
    let half = f.end_ports().len() / 2;
    let ports: Vec<u64> = f.end_ports()[..half].iter().map(|e| e.port_guid).collect();
    let nodes: Vec<u64> = f.end_ports()[..half].iter().map(|e| e.node_guid).collect();
    // ftree's leaves and index order come from the listed compute nodes
    // alone: the node GUIDs must name exactly the first half of the hosts.
    let lay = ibsm_routing::ftree::layout(&f, &EngineOptions { cn_guids: nodes.clone(), ..opts() }).unwrap();
    let listed: Vec<u64> = lay.compute_nodes.iter().map(|&e| f.end_port(e).port_guid).collect();
    assert_eq!(listed, ports);
    for kind in [EngineKind::FTree, EngineKind::Sssp, EngineKind::Dfsssp] {
        let by_port = route(kind, &f, &EngineOptions { cn_guids: ports.clone(), ..opts() }).unwrap();
        let by_node = route(kind, &f, &EngineOptions { cn_guids: nodes.clone(), ..opts() }).unwrap();
        assert_eq!(by_port, by_node, "{kind}");
        let io_port = route(kind, &f, &EngineOptions { io_guids: ports.clone(), ..opts() }).unwrap();
        let io_node = route(kind, &f, &EngineOptions { io_guids: nodes.clone(), ..opts() }).unwrap();
        assert_eq!(io_port, io_node, "{kind}");
    }
}

#[test]
fn vl_budgets_outside_one_to_fifteen_are_refused_by_every_engine() {
    let f = small_tree();
    for kind in EngineKind::ALL {
        for bad in [0u8, 16, 255] {
            let err = route(kind, &f, &EngineOptions { max_vls: bad, ..opts() }).unwrap_err();
            assert_eq!(err, RoutingError::VlBudget { given: bad }, "{kind}");
            assert!(err.to_string().contains(&format!("budget of {bad} ")), "{err}");
        }
    }
}

#[test]
fn fabrics_with_no_switch_to_order_are_refused_or_trivially_routed() {
    // No switch at all: two hosts back to back, or two hosts with no cable.
    // There are no tables to compute: every engine but ftree returns none
    // (the uncabled hosts as two parts, naming the second); ftree says it
    // has no switch to rank.
    let mut lone = Build::new();
    lone.lone_host();
    lone.lone_host();
    let uncabled = lone.finish();
    let second = uncabled.end_ports()[1].port_guid;
    for (f, parted) in [(testfab::back_to_back(), false), (uncabled, true)] {
        for kind in EngineKind::ALL {
            let what = format!("{kind}, {}", if parted { "uncabled" } else { "back to back" });
            match (kind, route(kind, &f, &opts())) {
                (EngineKind::FTree, Err(RoutingError::NotApplicable { engine: "ftree", reason })) => {
                    assert_eq!(reason, "the fabric has no switches")
                }
                (_, Ok(r)) if !parted => assert!(r.lfts.is_empty(), "{what}: {} LFTs", r.lfts.len()),
                (_, Err(RoutingError::Disconnected { components: 2, unreachable, partial })) if parted => {
                    assert_eq!(unreachable, vec![second], "{what}");
                    assert!(partial.0.lfts.is_empty(), "{what}");
                }
                (_, other) => panic!("{what}: {other:?}"),
            }
        }
    }
}

#[test]
fn switches_without_end_ports_are_routed_or_refused_by_name() {
    // Switches only: every engine but ftree (which needs compute nodes to
    // find leaves) routes the switch LIDs.
    let mut b = Build::new();
    let s: Vec<SwitchId> = (0..4).map(|_| b.switch(4)).collect();
    for i in 0..4 {
        b.cable(s[i], 1, s[(i + 1) % 4], 2);
    }
    let f = b.finish();
    for kind in EngineKind::ALL {
        match route(kind, &f, &opts()) {
            Ok(r) => assert_delivers_all(&f, &validate(&f, &r), kind),
            Err(RoutingError::NotApplicable { engine, reason }) => {
                assert_eq!(engine, kind.name());
                assert!(matches!(kind, EngineKind::FTree), "{kind}: {reason}");
                assert!(reason.contains("compute node"), "{reason}");
            }
            Err(e) => panic!("{kind}: {e:?}"),
        }
    }
}

fn assert_delivers_all(f: &RoutingFabric, rep: &Report, kind: EngineKind) {
    assert!(rep.is_clean(), "{kind}: {rep}");
    assert!(rep.fully_connected(), "{kind}: {rep}");
    assert_eq!(rep.delivered, rep.pairs, "{kind}: {rep}");
    assert!(rep.pairs > 0 || f.num_switches() == 0, "{kind}");
}

/// Which engines do not apply to a shape, and the words of their refusal:
/// dor only routes meshes and tori, ftree only fat trees.
fn not_for(kind: EngineKind, ring: bool) -> Option<&'static str> {
    match (kind, ring) {
        (EngineKind::Dor, false) => Some("more than two neighbours along one dimension"),
        (EngineKind::FTree, true) => Some(""),
        _ => None,
    }
}

/// A large part (a fat tree or a ring), a smaller one of the same shape,
/// one lone switch with a host and one uncabled host. Returns the fabric,
/// the number of nodes in the large part and the GUIDs outside it.
fn disconnected(ring: bool) -> (RoutingFabric, usize, HashSet<u64>) {
    let mut b = Build::new();
    if ring {
        b.ring(5, 2, 0);
    } else {
        b.tree(2, 4, 2, 0);
    }
    let main_nodes = b.next as usize;
    if ring {
        b.ring(3, 1, 0);
    } else {
        b.tree(2, 2, 2, 0);
    }
    let lone = b.switch(4);
    b.host_on(lone, 1);
    b.lone_host();
    let last = b.next;
    let f = b.finish();
    let minor: HashSet<u64> = (main_nodes as u64 + 1..=last)
        .flat_map(|k| [SWITCH_GUID + k, PORT_GUID + k])
        .filter(|g| f.switches().iter().any(|s| s.guid == *g) || f.end_ports().iter().any(|e| e.port_guid == *g))
        .collect();
    (f, main_nodes, minor)
}

#[test]
fn disconnected_fabrics_give_partial_routes_naming_the_unreachable() {
    for ring in [false, true] {
        let (f, main_nodes, minor) = disconnected(ring);
        for kind in EngineKind::ALL {
            let what = format!("{kind} on {}", if ring { "rings" } else { "trees" });
            let err = route(kind, &f, &opts()).unwrap_err();
            if let Some(words) = not_for(kind, ring) {
                let RoutingError::NotApplicable { reason, .. } = &err else { panic!("{what}: {err:?}") };
                assert!(reason.contains(words), "{what}: {reason}");
                continue;
            }
            let RoutingError::Disconnected { components, unreachable, partial } = &err else {
                panic!("{what}: {err:?}")
            };
            assert_eq!(*components, 4, "{what}");
            let named: HashSet<u64> = unreachable.iter().copied().collect();
            assert_eq!(named, minor, "{what}");
            assert_eq!(named.len(), unreachable.len(), "{what}: a GUID named twice");
            assert!(err.to_string().contains(&hex(unreachable[0])), "{what}: {err}");
            let rep = validate(&f, &partial.0);
            assert_eq!(rep.loops + rep.wrong_destination, 0, "{what}: {rep}");
            // Every pair of the largest part is delivered (each source to
            // every node of its part but itself, one LID each); ftree
            // routes only that part, every other engine each part.
            let main_pairs = (main_nodes * (main_nodes - 1)) as u64;
            assert!(rep.delivered >= main_pairs, "{what}: {rep}");
            if kind != EngineKind::FTree {
                assert!(rep.is_clean(), "{what}: {rep}");
                assert_eq!(rep.delivered + rep.no_path, rep.pairs, "{what}: {rep}");
            }
            assert_eq!(err.partial_routes(), Some(&*partial.0));
        }
    }
}

/// The small tree with loopback cables (a switch port cabled to another
/// port of the same switch) on a spine and on a leaf, and the same fabric
/// without them.
fn with_loopbacks() -> (RoutingFabric, RoutingFabric, Vec<(SwitchId, u8)>) {
    let build = |loops: bool| {
        let mut b = Build::new();
        let (ss, ls) = b.tree(2, 4, 2, 2);
        if loops {
            b.cable(ss[0], 5, ss[0], 6);
            b.cable(ls[1], 5, ls[1], 6);
        }
        (b.finish(), ss[0], ls[1])
    };
    let (looped, spine, leaf) = build(true);
    let (plain, _, _) = build(false);
    (looped, plain, vec![(spine, 5), (spine, 6), (leaf, 5), (leaf, 6)])
}

#[test]
fn loopback_cables_are_accepted_and_never_routed_over() {
    let (looped, plain, loop_ports) = with_loopbacks();
    assert_eq!(looped.links().len(), plain.links().len() + 2);
    for kind in EngineKind::ALL {
        if let Some(words) = not_for(kind, false) {
            let err = route(kind, &looped, &opts()).unwrap_err();
            assert!(err.to_string().contains(words), "{kind}: {err}");
            continue;
        }
        let r = route(kind, &looped, &opts()).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_delivers_all(&looped, &validate(&looped, &r), kind);
        for &(s, p) in &loop_ports {
            let lft = r.lft(s).unwrap();
            let over: Vec<u16> = (1..=looped.max_lid()).filter(|&l| lft.port(l) == p).collect();
            assert!(over.is_empty(), "{kind}: switch {s:?} forwards LIDs {over:?} into its loopback port {p}");
        }
        // A loopback cable carries nothing, so it changes nothing.
        let without = route(kind, &plain, &opts()).unwrap();
        assert_eq!(r, without, "{kind}: the loopback cables changed the tables");
    }
}

#[test]
fn loopback_cables_on_rings_and_irregular_fabrics_are_never_routed_over() {
    let mut b = Build::new();
    let s: Vec<SwitchId> = (0..5).map(|_| b.switch(6)).collect();
    for i in 0..5 {
        b.cable(s[i], 1, s[(i + 1) % 5], 2);
        b.host_on(s[i], 3);
        b.host_on(s[i], 4);
    }
    b.cable(s[0], 5, s[0], 6);
    b.cable(s[2], 5, s[3], 5);
    b.cable(s[3], 6, s[2], 6);
    let f = b.finish();
    for kind in EngineKind::ALL {
        match route(kind, &f, &opts()) {
            Ok(r) => {
                assert_delivers_all(&f, &validate(&f, &r), kind);
                for lid in 1..=f.max_lid() {
                    for p in [5, 6] {
                        assert_ne!(r.port(s[0], lid), p, "{kind}: LID {lid} into the loopback");
                    }
                }
            }
            // A ring is no fat tree; dor routes it as a 1-D torus.
            Err(RoutingError::NotApplicable { engine: "ftree", .. }) if kind == EngineKind::FTree => {}
            Err(e) => panic!("{kind}: {e:?}"),
        }
    }
}

#[test]
fn parallel_cables_give_clean_routes_on_every_engine() {
    let fabrics = [
        ("spine-leaf, 2 parallel", testfab::spine_leaf(2, 4, 2, 2), false),
        ("spine-leaf, 3 parallel", testfab::spine_leaf(3, 3, 3, 3), false),
        ("torus 3x3, 2 parallel", testfab::grid(&[3, 3], &[true, true], 2, 1), true),
        ("mesh 2x3, 2 parallel", testfab::grid(&[2, 3], &[false, false], 2, 2), true),
    ];
    for (name, f, grid) in fabrics {
        for kind in EngineKind::ALL {
            match route(kind, &f, &opts()) {
                Ok(r) => {
                    let rep = validate(&f, &r);
                    assert!(rep.is_clean() && rep.fully_connected(), "{name}, {kind}: {rep}");
                    assert_eq!(rep.delivered, rep.pairs, "{name}, {kind}: {rep}");
                    for s in f.switch_ids() {
                        let lft = r.lft(s).unwrap();
                        for lid in 1..=f.max_lid() {
                            assert_ne!(lft.port(lid), UNROUTED, "{name}, {kind}: {s:?} leaves LID {lid} unrouted");
                        }
                    }
                }
                Err(RoutingError::NotApplicable { engine, reason }) if not_for(kind, grid).is_some() => {
                    assert_eq!(engine, kind.name());
                    assert!(reason.contains(not_for(kind, grid).unwrap()), "{name}, {kind}: {reason}");
                }
                Err(e) => panic!("{name}, {kind}: {e:?}"),
            }
        }
    }
}

#[test]
fn bad_options_come_before_a_disconnected_fabric() {
    // The options are checked against the whole fabric: a root in a
    // smaller part is a switch of the fabric, a GUID in no part is not.
    let (f, _, minor) = disconnected(false);
    let minor_switch = f.switches().iter().map(|s| s.guid).find(|g| minor.contains(g)).unwrap();
    for kind in EngineKind::ALL {
        let o = EngineOptions { root_guids: vec![0x77], ..opts() };
        assert_option_error(route(kind, &f, &o), "root_guids", 1, 0x77, "not a switch");
        let o = EngineOptions { root_guids: vec![minor_switch], ..opts() };
        let err = route(kind, &f, &o).unwrap_err();
        match kind {
            // Only ftree needs a root in the part it routes.
            EngineKind::FTree => {
                let RoutingError::NotApplicable { reason, .. } = &err else { panic!("{kind}: {err:?}") };
                assert!(reason.contains("root GUIDs names a switch of the largest connected part"), "{reason}");
            }
            EngineKind::Dor => assert!(matches!(err, RoutingError::NotApplicable { engine: "dor", .. }), "{err:?}"),
            _ => {
                let Some(partial) = err.partial_routes() else { panic!("{kind}: {err:?}") };
                let rep = validate(&f, partial);
                assert!(rep.is_clean(), "{kind}: {rep}");
                assert_eq!(rep.delivered + rep.no_path, rep.pairs, "{kind}: {rep}");
            }
        }
    }
}

#[test]
fn the_automatic_choice_returns_bad_options_at_once() {
    let f = small_tree();
    let leaf = f.switches()[0].guid;
    let o = EngineOptions { cn_guids: vec![leaf], ..opts() };
    let err = ibsm_routing::route_auto(&f, &o).unwrap_err();
    let RoutingError::Input { file, line, problem } = &err else { panic!("{err:?}") };
    assert_eq!((file.as_str(), *line), ("cn_guids", 1));
    assert!(problem.contains(&hex(leaf)) && problem.contains("is a switch"), "{err}");
    let err = ibsm_routing::route_auto(&f, &EngineOptions { max_vls: 16, ..opts() }).unwrap_err();
    assert_eq!(err, RoutingError::VlBudget { given: 16 });
}
