//! Helpers shared by the SSSP/DFSSSP tests: tori, an independent per-SL
//! channel dependency check (petgraph), table comparison by GUID.
#![allow(dead_code)]

use std::collections::BTreeMap;

use ibsm_routing::analysis::TraceEnd;
use ibsm_routing::{trace, validate, EndPort, NodeRef, PortEnd, Routes, RoutingFabric, Switch, SwitchId};
use petgraph::algo::is_cyclic_directed;
use petgraph::graphmap::DiGraphMap;

/// A torus (a ring per dimension with `dims[i] >= 3`; a line for 2, a
/// point for 1) with `hosts` hosts per switch. Port 2i+1 goes to the next
/// switch along dimension i, port 2i+2 to the previous one; hosts follow.
/// End ports get LIDs first, then switches.
pub fn torus(dims: &[usize], hosts: u8) -> RoutingFabric {
    let n: usize = dims.iter().product();
    let nd = dims.len();
    let ports = 2 * nd as u8 + hosts;
    let mut b = RoutingFabric::builder();
    let mut lid = 1u16;
    let mut eps = Vec::new();
    for s in 0..n {
        for h in 0..hosts {
            let node = 0x0010_0000 + ((s as u64) << 8) + u64::from(h) * 2;
            eps.push(b.add_end_port(EndPort::new(node, node + 1, 1, lid)).unwrap());
            lid += 1;
        }
    }
    let sws: Vec<SwitchId> = (0..n)
        .map(|s| {
            let id = b.add_switch(Switch::new(0x0020_0000 + s as u64, ports, lid).with_name(format!("t{s}"))).unwrap();
            lid += 1;
            id
        })
        .collect();
    let coord = |mut s: usize| -> Vec<usize> {
        dims.iter()
            .map(|&k| {
                let c = s % k;
                s /= k;
                c
            })
            .collect()
    };
    let index = |c: &[usize]| -> usize { c.iter().zip(dims).rev().fold(0, |acc, (&x, &k)| acc * k + x) };
    for s in 0..n {
        let c = coord(s);
        for (i, &k) in dims.iter().enumerate() {
            if k < 2 || (k == 2 && c[i] == 1) {
                continue;
            }
            let mut d = c.clone();
            d[i] = (c[i] + 1) % k;
            let t = index(&d);
            b.connect(PortEnd::Switch(sws[s], 2 * i as u8 + 1), PortEnd::Switch(sws[t], 2 * i as u8 + 2)).unwrap();
        }
        for h in 0..hosts {
            let e = eps[s * usize::from(hosts) + usize::from(h)];
            b.connect(PortEnd::End(e), PortEnd::Switch(sws[s], 2 * nd as u8 + 1 + h)).unwrap();
        }
    }
    b.build().unwrap()
}

/// Paths the engine claims deadlock freedom for: from switches with end
/// ports to every LID, from every switch to end-port LIDs.
pub fn carries_traffic(f: &RoutingFabric, src: SwitchId, dlid: u16) -> bool {
    let has_ports = f.switch_ports(src).iter().any(|p| matches!(p, Some(PortEnd::End(_))));
    has_ports || matches!(f.lid_owner(dlid), Some(NodeRef::End(_)))
}

/// Builds one channel dependency graph per SL (all paths on SL 0 when
/// `routes.sl` is None, or when `ignore_sl`) from the tables alone: nodes
/// are (switch, output port) of switch-to-switch hops, an edge joins
/// consecutive hops of a path.
pub fn cdgs(f: &RoutingFabric, routes: &Routes, ignore_sl: bool) -> BTreeMap<u8, DiGraphMap<(u32, u8), ()>> {
    let mut by_sl: BTreeMap<u8, DiGraphMap<(u32, u8), ()>> = BTreeMap::new();
    for s in f.switch_ids() {
        for dlid in 1..=f.max_lid() {
            if f.lid_owner(dlid).is_none() || !carries_traffic(f, s, dlid) {
                continue;
            }
            let t = trace(f, routes, NodeRef::Switch(s), dlid);
            if !matches!(t.end, TraceEnd::Delivered(_)) {
                continue;
            }
            let sl = if ignore_sl { 0 } else { routes.sl.as_ref().and_then(|p| p.sl(s, dlid)).unwrap_or(0) };
            let g = by_sl.entry(sl).or_default();
            // The last hop leaves the switch fabric (port 0 or an end port).
            let chans: Vec<(u32, u8)> = t.hops[..t.hops.len() - 1].iter().map(|&(sw, p)| (sw.0, p)).collect();
            for &c in &chans {
                g.add_node(c);
            }
            for w in chans.windows(2) {
                g.add_edge(w[0], w[1], ());
            }
        }
    }
    by_sl
}

/// The SLs whose dependency graph has a cycle.
pub fn cyclic_sls(f: &RoutingFabric, routes: &Routes) -> Vec<u8> {
    cdgs(f, routes, false).into_iter().filter(|(_, g)| is_cyclic_directed(g)).map(|(sl, _)| sl).collect()
}

/// Whether all paths together (one VL) have a cyclic dependency graph.
pub fn single_layer_cyclic(f: &RoutingFabric, routes: &Routes) -> bool {
    cdgs(f, routes, true).values().any(is_cyclic_directed)
}

/// Every pair delivered, no loops or black holes, all paths shortest.
pub fn assert_valid_minimal(f: &RoutingFabric, r: &Routes, what: &str) {
    let rep = validate(f, r);
    assert!(rep.is_clean(), "{what}: {rep}");
    assert!(rep.fully_connected(), "{what}: {rep}");
    assert_eq!(rep.delivered, rep.pairs, "{what}: {rep}");
    assert!(rep.all_minimal(), "{what}: {rep}");
    assert_eq!(r.lfts.len(), f.num_switches());
    for l in &r.lfts {
        assert_eq!(l.linear_fdb_top().0, f.max_lid());
    }
}

/// The first path between end ports that is longer than the cables allow,
/// as (source switch, LID, cables taken, shortest): DFSSSP keeps SSSP's
/// end-port paths when it re-routes other entries to fit its VLs (those
/// may detour), so minimality holds between end ports alone.
pub fn longer_end_port_path(f: &RoutingFabric, r: &Routes) -> Option<(SwitchId, u16, usize, u32)> {
    let (mut dist, mut queue) = (Vec::new(), Vec::new());
    let with_end_ports: Vec<SwitchId> =
        f.switch_ids().filter(|&s| f.switch_ports(s).iter().any(|p| matches!(p, Some(PortEnd::End(_))))).collect();
    for dlid in 1..=f.max_lid() {
        let Some(NodeRef::End(e)) = f.lid_owner(dlid) else { continue };
        let Some((dest, _)) = f.attached_switch(e) else { continue };
        f.switch_distances(dest, &mut dist, &mut queue);
        for &s in &with_end_ports {
            let t = trace(f, r, NodeRef::Switch(s), dlid);
            // The last hop is the cable to the end port.
            let taken = t.hops.len().saturating_sub(1);
            if matches!(t.end, TraceEnd::Delivered(_)) && taken as u32 > dist[s.index()] {
                return Some((s, dlid, taken, dist[s.index()]));
            }
        }
    }
    None
}

/// Every switch's table and SL row keyed by switch GUID, for comparing
/// routes of the same fabric numbered differently.
pub fn by_guid(f: &RoutingFabric, r: &Routes) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    let mut v: Vec<(u64, Vec<u8>, Vec<u8>)> = f
        .switch_ids()
        .map(|s| {
            let sl = r.sl.as_ref().map(|p| p.by_source_switch[s.index()].clone()).unwrap_or_default();
            (f.switch(s).guid, r.lfts[s.index()].ports.clone(), sl)
        })
        .collect();
    v.sort();
    v
}

/// The highest SL any path uses.
pub fn max_sl(r: &Routes) -> u8 {
    r.sl.as_ref().map_or(0, |p| p.by_source_switch.iter().flatten().copied().max().unwrap_or(0))
}

/// LIDs by the switch they end at and their LID offset: end ports' LIDs
/// at the switch they hang off, switch LIDs at the switch itself.
pub fn lids_by_destination_switch(f: &RoutingFabric) -> BTreeMap<(u32, u16), Vec<u16>> {
    let mut m: BTreeMap<(u32, u16), Vec<u16>> = BTreeMap::new();
    for lid in 1..=f.max_lid() {
        let (sw, base) = match f.lid_owner(lid) {
            Some(NodeRef::End(e)) => match f.attached_switch(e) {
                Some((s, _)) => (s, f.end_port(e).base_lid),
                None => continue,
            },
            Some(NodeRef::Switch(s)) => (s, f.switch(s).base_lid),
            None => continue,
        };
        m.entry((sw.0, lid - base)).or_default().push(lid);
    }
    m
}

/// Whether every switch forwards all the LIDs that end at one switch with
/// one offset alike (outside that switch): one tree per destination
/// switch. Names the first exception.
pub fn one_tree_per_switch(f: &RoutingFabric, r: &Routes) -> Result<(), String> {
    for ((dest, off), lids) in lids_by_destination_switch(f) {
        for s in f.switch_ids().filter(|s| s.0 != dest) {
            let ports = &r.lfts[s.index()].ports;
            let first = ports[usize::from(lids[0])];
            if let Some(&lid) = lids[1..].iter().find(|&&lid| ports[usize::from(lid)] != first) {
                return Err(format!("switch {s:?}: LID {lid} and LID {} (offset {off}) differ", lids[0]));
            }
        }
    }
    Ok(())
}
