//! Checks shared by the updn/dnup tests: channel dependency graphs built
//! from the tables, path legality against the order, end-port stretch, and
//! small mesh/torus builders.
#![allow(dead_code)]

use ibsm_routing::analysis::{trace, TraceEnd};
use ibsm_routing::fabric::{EndPort, NodeRef, PortEnd, RoutingFabric, Switch, SwitchId};
use ibsm_routing::testfab::LidAlloc;
use ibsm_routing::updn::UpDownOrder;
use ibsm_routing::Routes;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;

/// The channel dependency graph of `routes`: nodes are directed
/// switch-to-switch links (switch, output port); for every destination LID
/// and every switch source, consecutive links (a->b, b->c) on its path give
/// an edge. Links to and from end ports cannot be on a cycle (nothing
/// depends on an ejection, an injection depends on nothing) and are left
/// out. Paths from end ports are suffixes of their switch's path, so
/// switch sources cover them.
pub fn cdg(f: &RoutingFabric, r: &Routes) -> DiGraph<(SwitchId, u8), ()> {
    let mut g = DiGraph::new();
    let mut ids: HashMap<(SwitchId, u8), NodeIndex> = HashMap::new();
    let mut node =
        |g: &mut DiGraph<(SwitchId, u8), ()>, c: (SwitchId, u8)| *ids.entry(c).or_insert_with(|| g.add_node(c));
    let mut seen = std::collections::HashSet::new();
    for lid in 1..=f.max_lid() {
        if f.lid_owner(lid).is_none() {
            continue;
        }
        for s in f.switch_ids() {
            // The hop out of s, then the hop out of the next switch.
            let p = r.port(s, lid);
            let Some(PortEnd::Switch(n, _)) = (p != 0).then(|| f.switch_peer(s, p)).flatten() else { continue };
            let q = r.port(n, lid);
            let Some(PortEnd::Switch(_, _)) = (q != 0).then(|| f.switch_peer(n, q)).flatten() else { continue };
            if seen.insert(((s, p), (n, q))) {
                let a = node(&mut g, (s, p));
                let b = node(&mut g, (n, q));
                g.add_edge(a, b, ());
            }
        }
    }
    g
}

pub fn cdg_is_acyclic(f: &RoutingFabric, r: &Routes) -> bool {
    !petgraph::algo::is_cyclic_directed(&cdg(f, r))
}

/// Every delivered path from every switch and end port to every LID goes up
/// (towards earlier switches) then only down. Returns the offending
/// (source, LID) pairs.
pub fn illegal_paths(f: &RoutingFabric, r: &Routes, o: &UpDownOrder) -> Vec<(NodeRef, u16)> {
    let mut bad = Vec::new();
    let sources: Vec<NodeRef> = f.switch_ids().map(NodeRef::Switch).chain(f.end_port_ids().map(NodeRef::End)).collect();
    for lid in 1..=f.max_lid() {
        if f.lid_owner(lid).is_none() {
            continue;
        }
        for &src in &sources {
            let t = trace(f, r, src, lid);
            if !matches!(t.end, TraceEnd::Delivered(_)) {
                continue;
            }
            let sw: Vec<SwitchId> = t.hops.iter().map(|h| h.0).collect();
            let mut went_down = false;
            for w in sw.windows(2) {
                if o.is_up(w[0], w[1]) {
                    if went_down {
                        bad.push((src, lid));
                        break;
                    }
                } else {
                    went_down = true;
                }
            }
        }
    }
    bad
}

/// (end-port pairs, pairs longer than shortest) over every ordered pair of
/// distinct end ports with LIDs, all their LIDs.
pub fn end_port_stretch(f: &RoutingFabric, r: &Routes) -> (u64, u64) {
    let mut dist = Vec::new();
    let mut queue = Vec::new();
    let (mut pairs, mut longer) = (0, 0);
    for dst in f.end_port_ids() {
        let Some((t, _)) = f.attached_switch(dst) else { continue };
        f.switch_distances(t, &mut dist, &mut queue);
        for src in f.end_port_ids() {
            if src == dst {
                continue;
            }
            let Some((s, _)) = f.attached_switch(src) else { continue };
            if dist[s.index()] == u32::MAX {
                continue;
            }
            for lid in f.end_port(dst).lids() {
                let tr = trace(f, r, NodeRef::End(src), lid as u16);
                assert_eq!(tr.end, TraceEnd::Delivered(NodeRef::End(dst)), "{src:?} -> LID {lid}");
                pairs += 1;
                if tr.hops.len() as u32 != dist[s.index()] + 1 {
                    longer += 1;
                }
            }
        }
    }
    (pairs, longer)
}

/// A `dims`-dimensional mesh or torus of switches with `hosts` hosts each.
/// Ports: 2k+1 towards -1 in dimension k, 2k+2 towards +1, then hosts.
pub fn grid(dims: &[u8], wrap: bool, hosts: u8) -> RoutingFabric {
    let n: usize = dims.iter().map(|&d| usize::from(d)).product();
    let nd = dims.len() as u8;
    let mut b = RoutingFabric::builder();
    let mut lids = LidAlloc::default();
    let host_lids: Vec<u16> = (0..n * usize::from(hosts)).map(|_| lids.alloc(0)).collect();
    let sw: Vec<SwitchId> = (0..n)
        .map(|i| {
            b.add_switch(Switch::new(0x1000 + i as u64, 2 * nd + hosts, lids.alloc(0)).with_name(format!("g{i}")))
                .unwrap()
        })
        .collect();
    let coord = |mut i: usize| -> Vec<usize> {
        dims.iter()
            .map(|&d| {
                let c = i % usize::from(d);
                i /= usize::from(d);
                c
            })
            .collect()
    };
    let index = |c: &[usize]| -> usize {
        let mut i = 0;
        for (k, &d) in dims.iter().enumerate().rev() {
            i = i * usize::from(d) + c[k];
        }
        i
    };
    for i in 0..n {
        let c = coord(i);
        for (k, &d) in dims.iter().enumerate() {
            let d = usize::from(d);
            if d < 2 || (!wrap && c[k] + 1 == d) || (wrap && d == 2 && c[k] == 1) {
                continue;
            }
            let mut c2 = c.clone();
            c2[k] = (c[k] + 1) % d;
            let j = index(&c2);
            b.connect(PortEnd::Switch(sw[i], 2 * k as u8 + 2), PortEnd::Switch(sw[j], 2 * k as u8 + 1)).unwrap();
        }
        for h in 0..hosts {
            let k = i * usize::from(hosts) + usize::from(h);
            let e = b
                .add_end_port(EndPort::new(0x10_0000 + (k as u64) * 2, 0x10_0001 + (k as u64) * 2, 1, host_lids[k]))
                .unwrap();
            b.connect(PortEnd::End(e), PortEnd::Switch(sw[i], 2 * nd + 1 + h)).unwrap();
        }
    }
    b.build().unwrap()
}
