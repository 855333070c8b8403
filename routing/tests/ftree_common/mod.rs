//! Helpers shared by the ftree tests: traffic patterns traced through the
//! tables, an independent credit-loop check, and fabric surgery.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet, VecDeque};

use ibsm_routing::fabric::Link;
use ibsm_routing::{EndPortId, FabricBuilder, PortEnd, Routes, RoutingFabric, SwitchId};

/// The switch-to-switch and switch-to-end-port cables (by switch port
/// slot) that a packet from end port `src` to `dlid` leaves switches by;
/// None when it does not arrive within `f.num_switches()` hops.
pub fn path_ports(f: &RoutingFabric, r: &Routes, src: EndPortId, dlid: u16, out: &mut Vec<usize>) -> bool {
    out.clear();
    let Some((mut s, _)) = f.attached_switch(src) else { return false };
    for _ in 0..=f.num_switches() {
        let p = r.port(s, dlid);
        match f.switch_peer(s, p) {
            Some(PortEnd::Switch(n, _)) => {
                out.push(f.switch_port_slot(s, p));
                s = n;
            }
            Some(PortEnd::End(e)) => {
                out.push(f.switch_port_slot(s, p));
                return f.end_port(e).lids().contains(&u32::from(dlid));
            }
            None => return false,
        }
    }
    false
}

/// For the shift permutations `order[i] -> order[(i + k) mod n]`, the most
/// flows any directed cable leaving a switch carries, with the k where that
/// happens, over the given shifts. Panics when a flow is not delivered.
pub fn shift_max_load(
    f: &RoutingFabric,
    r: &Routes,
    order: &[EndPortId],
    shifts: impl Iterator<Item = usize>,
) -> (u32, usize) {
    let n = order.len();
    let mut count = vec![0u32; f.num_switch_port_slots()];
    let mut stamp = vec![usize::MAX; f.num_switch_port_slots()];
    let mut worst = (0, 0);
    let mut path = Vec::new();
    for k in shifts {
        for i in 0..n {
            let (src, dst) = (order[i], order[(i + k) % n]);
            let dlid = f.end_port(dst).base_lid;
            assert!(path_ports(f, r, src, dlid, &mut path), "shift {k}: {src:?} -> {dst:?} not delivered");
            for &c in &path {
                if stamp[c] != k {
                    stamp[c] = k;
                    count[c] = 0;
                }
                count[c] += 1;
                if count[c] > worst.0 {
                    worst = (count[c], k);
                }
            }
        }
    }
    worst
}

/// A cycle in the channel dependency graph of `r` (one VL, every switch a
/// source for every LID), found with Kahn's algorithm: the channels left
/// after peeling every channel with no incoming dependency lie on or
/// behind cycles. Returns one left-over channel as (switch GUID, port).
pub fn credit_loop(f: &RoutingFabric, r: &Routes) -> Option<(u64, u8)> {
    let mut succ: HashMap<(SwitchId, u8), HashSet<(SwitchId, u8)>> = HashMap::new();
    for lid in 1..=f.max_lid() {
        if f.lid_owner(lid).is_none() {
            continue;
        }
        for s in f.switch_ids() {
            let p = r.port(s, lid);
            let Some(PortEnd::Switch(n, _)) = f.switch_peer(s, p) else { continue };
            let q = r.port(n, lid);
            if let Some(PortEnd::Switch(..)) = f.switch_peer(n, q) {
                succ.entry((s, p)).or_default().insert((n, q));
            }
        }
    }
    let mut indeg: HashMap<(SwitchId, u8), usize> = HashMap::new();
    for (c, nexts) in &succ {
        indeg.entry(*c).or_default();
        for d in nexts {
            *indeg.entry(*d).or_default() += 1;
        }
    }
    let mut queue: VecDeque<(SwitchId, u8)> = indeg.iter().filter(|(_, &d)| d == 0).map(|(c, _)| *c).collect();
    let mut removed = 0;
    while let Some(c) = queue.pop_front() {
        removed += 1;
        for d in succ.get(&c).into_iter().flatten() {
            let e = indeg.get_mut(d).unwrap();
            *e -= 1;
            if *e == 0 {
                queue.push_back(*d);
            }
        }
    }
    if removed == indeg.len() {
        return None;
    }
    indeg.iter().find(|(_, &d)| d > 0).map(|(&(s, p), _)| (f.switch(s).guid, p))
}

/// The same fabric with only the switches, end ports and cables the
/// predicates keep (a cable needs both its ends kept).
pub fn rebuild(
    f: &RoutingFabric,
    keep_switch: impl Fn(SwitchId) -> bool,
    keep_end: impl Fn(EndPortId) -> bool,
    keep_link: impl Fn(&Link) -> bool,
) -> RoutingFabric {
    let mut b = FabricBuilder::new();
    let mut sw_map = HashMap::new();
    let mut ep_map = HashMap::new();
    for s in f.switch_ids().filter(|&s| keep_switch(s)) {
        sw_map.insert(s, b.add_switch(f.switch(s).clone()).unwrap());
    }
    for e in f.end_port_ids().filter(|&e| keep_end(e)) {
        ep_map.insert(e, b.add_end_port(f.end_port(e).clone()).unwrap());
    }
    let map = |end: PortEnd| match end {
        PortEnd::Switch(s, p) => sw_map.get(&s).map(|&n| PortEnd::Switch(n, p)),
        PortEnd::End(e) => ep_map.get(&e).map(|&n| PortEnd::End(n)),
    };
    for l in f.links() {
        if let (Some(a), Some(c)) = (map(l.a), map(l.b)) {
            if keep_link(l) {
                b.connect_with(a, c, l.rate).unwrap();
            }
        }
    }
    b.build().unwrap()
}

/// The switch with this name (testfab names: `sw-L1-0.3`, `leaf2`, ...).
pub fn switch_named(f: &RoutingFabric, name: &str) -> SwitchId {
    f.switch_ids().find(|&s| f.switch(s).name == name).unwrap_or_else(|| panic!("no switch {name}"))
}

/// Whether `l` joins the two named switches.
pub fn joins(f: &RoutingFabric, l: &Link, a: &str, b: &str) -> bool {
    let name = |e: PortEnd| match e {
        PortEnd::Switch(s, _) => f.switch(s).name.as_str(),
        PortEnd::End(_) => "",
    };
    let (x, y) = (name(l.a), name(l.b));
    (x == a && y == b) || (x == b && y == a)
}

/// A `w` x `h` 2D torus of 6-port switches (ports 1-4 to the neighbours),
/// one host on port 5 of each switch.
pub fn torus(w: u8, h: u8) -> RoutingFabric {
    let mut b = FabricBuilder::new();
    let mut lid = 1u16;
    let mut ids = Vec::new();
    for i in 0..u16::from(w) * u16::from(h) {
        let mut s = ibsm_routing::Switch::new(0x1000 + u64::from(i), 6, 0);
        s.name = format!("t{i}");
        ids.push(s);
    }
    let n = ids.len() as u16;
    let hosts: Vec<_> = (0..n)
        .map(|i| ibsm_routing::EndPort::new(0x9000 + u64::from(i) * 2, 0x9001 + u64::from(i) * 2, 1, i + 1))
        .collect();
    lid += n;
    let sids: Vec<SwitchId> = ids
        .into_iter()
        .map(|mut s| {
            s.base_lid = lid;
            lid += 1;
            b.add_switch(s).unwrap()
        })
        .collect();
    let eids: Vec<EndPortId> = hosts.into_iter().map(|e| b.add_end_port(e).unwrap()).collect();
    let at = |x: u8, y: u8| sids[usize::from(y) * usize::from(w) + usize::from(x)];
    for y in 0..h {
        for x in 0..w {
            b.connect(PortEnd::Switch(at(x, y), 1), PortEnd::Switch(at((x + 1) % w, y), 2)).unwrap();
            b.connect(PortEnd::Switch(at(x, y), 3), PortEnd::Switch(at(x, (y + 1) % h), 4)).unwrap();
            let i = usize::from(y) * usize::from(w) + usize::from(x);
            b.connect(PortEnd::End(eids[i]), PortEnd::Switch(at(x, y), 5)).unwrap();
        }
    }
    b.build().unwrap()
}

/// Paths that turn from going down to going up (ranks from `rank`, 0 at
/// the roots), as (from a switch or to a switch LID, between end ports).
pub fn down_up_turns(f: &RoutingFabric, r: &Routes, rank: &[Option<u8>]) -> (u64, u64) {
    use ibsm_routing::NodeRef;
    let mut counts = (0, 0);
    let sources = f.switch_ids().map(NodeRef::Switch).chain(f.end_port_ids().map(NodeRef::End));
    for src in sources {
        for lid in 1..=f.max_lid() {
            let Some(owner) = f.lid_owner(lid) else { continue };
            let t = ibsm_routing::trace(f, r, src, lid);
            let mut went_down = false;
            let mut turned = false;
            for &(s, p) in &t.hops {
                if let Some(PortEnd::Switch(n, _)) = f.switch_peer(s, p) {
                    let down = rank[n.index()] > rank[s.index()];
                    turned |= went_down && !down;
                    went_down |= down;
                }
            }
            if turned {
                match (src, owner) {
                    (NodeRef::End(_), NodeRef::End(_)) => counts.1 += 1,
                    _ => counts.0 += 1,
                }
            }
        }
    }
    counts
}
