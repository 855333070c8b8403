//! LFT updates land in an order that never loops and never drops a packet
//! the old tables delivered (issue 21, item 4): on the in-process fabric
//! every LFT block the SM writes while reacting to a change is recorded
//! in the order it lands, and each intermediate state (the tables before,
//! plus the blocks landed so far) is traced from every switch to every
//! LID, as `ibtracert` would, over the links as they are.
//!
//! The same blocks replayed farthest-first show what the order prevents:
//! that replay meets a loop or a new black hole on the fat tree.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::mad::PortState;
use ibsm::program::{Reaction, SubnetManager};
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice};
use ibsm::subnet::Trigger;
use ibsm::sweep::react::switch_suspects;
use ibsm::topology::{NodeIdx, NodeKind, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;

type Sm = SubnetManager<ibsm::transport::SmpClient<MadTransport>>;

/// Where a packet for one LID from one switch ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trace {
    Delivered,
    Dropped,
    Loop,
}

struct Bed {
    topo: Topology,
    fabric: SharedFabric,
    sm: Sm,
    rt: tokio::runtime::Runtime,
}

impl Bed {
    fn new(spec: &str) -> Bed {
        let topo = Topology::from_spec_or_file(spec).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(9).build_shared().unwrap();
        let dev = SimDevice::attach(&fabric, topo.hosts().next().unwrap(), 1).unwrap();
        dev.set_is_sm(true);
        let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
        let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
        let mut sm = SubnetManager::new(transport, SmConfig { max_op_vls: 2, ..SmConfig::default() }, false);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert!(rt.block_on(sm.sweep()).unwrap().subnet_up(), "{spec}: bring-up");
        rt.block_on(sm.sweep()).unwrap();
        Bed { topo, fabric, sm, rt }
    }

    fn tables(&self) -> HashMap<NodeIdx, Vec<u8>> {
        let f = self.fabric.lock().unwrap();
        self.topo.switches().map(|s| (s, f.lft(s).unwrap().to_vec())).collect()
    }

    /// Runs `event`, reacts to what the light sweep finds, and returns the
    /// LFT blocks written, in the order they landed.
    fn react_to(&mut self, event: impl FnOnce(&SharedFabric)) -> Vec<(NodeIdx, u32, [u8; 64])> {
        event(&self.fabric);
        let found = self.rt.block_on(self.sm.light_sweep());
        let suspects = switch_suspects(found.changed, found.silent);
        assert!(!suspects.is_empty(), "the light sweep saw the change");
        self.fabric.lock().unwrap().record_lft_sets();
        match self.rt.block_on(self.sm.react(Trigger::LightSweep, &suspects)).unwrap() {
            Reaction::Programmed(r) => {
                assert!(r.program.lft_blocks > 0, "the change moves routes");
                eprintln!(
                    "{} LFT blocks in {} rounds, {} of them staged",
                    r.program.lft_blocks, r.program.lft_rounds, r.program.lft_staged
                );
            }
            other => panic!("{other:?}"),
        }
        self.fabric.lock().unwrap().take_lft_log()
    }

    /// Every (switch, LID) pair traced through `tables` over the links that
    /// are ACTIVE at both ends now.
    fn trace_all(&self, tables: &HashMap<NodeIdx, Vec<u8>>) -> HashMap<(NodeIdx, u16), Trace> {
        let f = self.fabric.lock().unwrap();
        let mut peer: HashMap<PortRef, PortRef> = HashMap::new();
        for l in &self.topo.links {
            let up =
                f.port_state(l.a).ok() == Some(PortState::Active) && f.port_state(l.b).ok() == Some(PortState::Active);
            if up {
                peer.insert(l.a, l.b);
                peer.insert(l.b, l.a);
            }
        }
        // Every LID a switch or an ACTIVE end port holds, and its owner.
        let mut owner: HashMap<u16, PortRef> = HashMap::new();
        for (i, node) in self.topo.nodes.iter().enumerate() {
            let id = NodeIdx(i);
            let ports: Vec<u8> = if node.kind == NodeKind::Switch { vec![0] } else { (1..=node.num_ports).collect() };
            for port in ports {
                let r = PortRef { node: id, port };
                if port != 0 && f.port_state(r).ok() != Some(PortState::Active) {
                    continue;
                }
                let lid = f.lid_of(r).unwrap().0;
                if lid != 0 {
                    owner.insert(lid, r);
                }
            }
        }
        drop(f);
        let mut out = HashMap::new();
        for s in self.topo.switches() {
            for (&lid, &dest) in &owner {
                out.insert((s, lid), trace(&peer, tables, s, lid, dest, &self.topo));
            }
        }
        out
    }

    /// Replays `landed` over `before` and checks each state; returns the
    /// first violation.
    fn first_violation(
        &self,
        before: &HashMap<NodeIdx, Vec<u8>>,
        landed: &[(NodeIdx, u32, [u8; 64])],
    ) -> Option<String> {
        let mut tables = before.clone();
        let start = self.trace_all(&tables);
        let failing_at_start: HashSet<_> =
            start.iter().filter(|(_, t)| **t != Trace::Delivered).map(|(k, _)| *k).collect();
        if let Some((k, _)) = start.iter().find(|(_, t)| **t == Trace::Loop) {
            return Some(format!("a loop before any write: {k:?}"));
        }
        for (n, &(sw, block, ports)) in landed.iter().enumerate() {
            let t = tables.get_mut(&sw).unwrap();
            let first = block as usize * 64;
            if t.len() < first + 64 {
                t.resize(first + 64, 0xFF);
            }
            t[first..first + 64].copy_from_slice(&ports);
            for (k, result) in self.trace_all(&tables) {
                match result {
                    Trace::Loop => return Some(format!("after write {n} ({sw:?} block {block}): a loop for {k:?}")),
                    Trace::Dropped if !failing_at_start.contains(&k) => {
                        return Some(format!("after write {n} ({sw:?} block {block}): {k:?} dropped, delivered before"))
                    }
                    _ => {}
                }
            }
        }
        None
    }
}

fn trace(
    peer: &HashMap<PortRef, PortRef>,
    tables: &HashMap<NodeIdx, Vec<u8>>,
    from: NodeIdx,
    lid: u16,
    dest: PortRef,
    topo: &Topology,
) -> Trace {
    let mut at = from;
    for _ in 0..64 {
        if dest.node == at && dest.port == 0 {
            return Trace::Delivered;
        }
        let out = tables.get(&at).and_then(|t| t.get(lid as usize)).copied().unwrap_or(0xFF);
        if out == 0xFF || out == 0 {
            return Trace::Dropped;
        }
        let Some(&next) = peer.get(&PortRef { node: at, port: out }) else { return Trace::Dropped };
        if topo.node(next.node).kind != NodeKind::Switch {
            return if next == dest { Trace::Delivered } else { Trace::Dropped };
        }
        at = next.node;
    }
    Trace::Loop
}

/// Trunks between switches, the n-th of them.
fn trunk(topo: &Topology, n: usize) -> PortRef {
    let kind = |r: PortRef| topo.node(r.node).kind;
    topo.links.iter().filter(|l| kind(l.a) == NodeKind::Switch && kind(l.b) == NodeKind::Switch).nth(n).unwrap().a
}

fn check(spec: &str, n: usize) {
    let mut bed = Bed::new(spec);
    let cable = trunk(&bed.topo, n);
    for (what, down) in [("cable down", true), ("cable up", false)] {
        let before = bed.tables();
        let landed = bed.react_to(|f| {
            let mut f = f.lock().unwrap();
            if down {
                f.link_down(cable).unwrap();
            } else {
                f.link_up(cable).unwrap();
            }
        });
        eprintln!("{spec} {what}: {} blocks", landed.len());
        assert!(!landed.is_empty());
        if let Some(v) = bed.first_violation(&before, &landed) {
            panic!("{spec}, {what}: {v}");
        }
        // The end state delivers everything.
        let end = bed.trace_all(&bed.tables());
        assert!(end.values().all(|t| *t == Trace::Delivered), "{spec}, {what}: not all delivered at the end");
    }
}

#[test]
fn a_fat_tree_cable_down_and_up_never_loops_or_drops_in_between() {
    check("fattree2:radix=12,leaves=6,spines=3,hosts=6", 4);
}

#[test]
fn a_torus_cable_down_and_up_never_loops_or_drops_in_between() {
    check("torus2d:4x4,hosts=1", 3);
}

/// On two VLs: dor routes round the cable, and back.
#[test]
fn a_dateline_torus_cable_down_and_up_never_loops_or_drops_in_between() {
    check("torus2d:6x6,hosts=1", 5);
}

#[test]
fn a_random_fabric_cable_down_and_up_never_loops_or_drops_in_between() {
    check("random:switches=16,degree=4,hosts=2,seed=3", 2);
}

/// The checker has teeth: the blocks of a spine going down, replayed
/// farthest from their destinations first, meet a state the SM's order
/// never shows.
#[test]
fn farthest_first_would_have_looped_or_dropped() {
    let spec = "fattree2:radix=12,leaves=6,spines=3,hosts=6";
    let mut bed = Bed::new(spec);
    let cable = trunk(&bed.topo, 0);
    let before = bed.tables();
    let landed = bed.react_to(|f| f.lock().unwrap().link_down(cable).unwrap());
    assert_eq!(bed.first_violation(&before, &landed), None);
    let reversed: Vec<_> = landed.iter().rev().copied().collect();
    assert!(bed.first_violation(&before, &reversed).is_some(), "reversed order shows no violation either");
}

#[test]
fn a_dragonfly_cable_down_and_up_never_loops_or_drops_in_between() {
    check("dragonfly:routers=4,hosts=2,global=1,groups=5", 3);
}

/// The switch with the most trunks of `topo`.
fn hub(topo: &Topology) -> NodeIdx {
    let trunks = |s: NodeIdx| topo.trunks().filter(|l| l.a.node == s || l.b.node == s).count();
    topo.switches().max_by_key(|&s| (trunks(s), std::cmp::Reverse(s.0))).unwrap()
}

/// A whole switch unlinked: the survivors' routes through it are repaired
/// in an order that never loops and never drops what was delivered, and
/// each block is written once unless two LIDs in it need opposite orders.
fn check_switch_down(spec: &str) -> (usize, usize) {
    let mut bed = Bed::new(spec);
    let gone = hub(&bed.topo);
    let before = bed.tables();
    let links: Vec<PortRef> =
        bed.topo.links.iter().filter(|l| l.a.node == gone || l.b.node == gone).map(|l| l.a).collect();
    let landed = bed.react_to(|f| {
        let mut f = f.lock().unwrap();
        for end in links {
            f.link_down(end).unwrap();
        }
    });
    if let Some(v) = bed.first_violation(&before, &landed) {
        panic!("{spec}, switch down: {v}");
    }
    let distinct: HashSet<(NodeIdx, u32)> = landed.iter().map(|&(s, b, _)| (s, b)).collect();
    eprintln!("{spec} switch down: {} writes of {} blocks", landed.len(), distinct.len());
    (landed.len(), distinct.len())
}

#[test]
fn a_random_fabric_switch_down_never_loops_or_drops_in_between() {
    let (writes, blocks) = check_switch_down("random:switches=40,degree=4,hosts=80,seed=1");
    assert!(writes > 0);
    assert!(writes <= blocks + blocks / 4, "{writes} writes for {blocks} blocks: most written twice");
}

#[test]
fn a_mesh_switch_down_never_loops_or_drops_in_between() {
    let (writes, blocks) = check_switch_down("mesh2d:6x6,hosts=2");
    assert!(writes <= blocks + blocks / 4, "{writes} writes for {blocks} blocks: most written twice");
}
