//! Minimal, deadlock-free routing on one VL for dragonflies whose groups
//! have spare local cables.
//!
//! A dragonfly's minimal paths (local, global, local hop) close credit
//! loops through the groups: traffic arriving in a group on a global cable
//! and traffic leaving it by another share the local cables between. With
//! several VLs the usual cure is a VL per phase; on one VL, Nue and
//! up*/down* forbid turns and push traffic onto second global cables,
//! which are the dragonfly's scarce resource (the 42-switch dragonfly's
//! busiest global cable: 144 routes minimal, 266 after refining
//! up*/down*).
//!
//! Here the two phases are kept apart by cables instead of VLs. Each
//! group's local cables are split into two classes, each connected
//! ([`class_of`]): traffic leaving the group runs on the *outbound* class
//! to its global cable, traffic that arrived (or stays in the group) runs
//! on the *inbound* class to its destination. Within a class, routes are
//! up*/down* from the class's own root, so acyclic. A route's channels
//! then go outbound local, global, inbound local, never back: the
//! dependencies are acyclic, switch-sourced traffic included, and every
//! global hop is the group pair's own cable. The local paths may be a hop
//! or two longer, which groups with one global cable per router (local
//! cables carry about half a global cable's load there) absorb.
//!
//! [`route_one_vl`] applies only when the switches fall into groups of at
//! least four, each cabled all-to-all, with every pair of groups joined
//! (a class needs a spanning tree of its own: K4 holds two, K3 does not);
//! anything else is `None` and the other single-VL engines route it. The
//! tables are checked for credit loops before they are returned.

use crate::fabric::{RoutingFabric, SwitchId};
use crate::lft::{Lft, Routes};
use crate::{analyze_cdg, CdgScope};

/// Routers per group needed: each local class needs a spanning tree.
const MIN_GROUP: usize = 4;

/// The two classes of a group's local cables.
const OUTBOUND: usize = 0;
const INBOUND: usize = 1;

/// The switches sorted into groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Groups {
    /// Per group, its switches by ascending fabric index.
    pub(crate) members: Vec<Vec<SwitchId>>,
    /// Per switch: (group, place in the group).
    pub(crate) place: Vec<(u32, u32)>,
}

/// The dragonfly's groups: the switches joined by cables that lie on a
/// triangle, when each such set is a clique of at least [`MIN_GROUP`] and
/// every two groups share a cable; `None` otherwise.
pub(crate) fn groups(f: &RoutingFabric) -> Option<Groups> {
    let ns = f.num_switches();
    if ns < 2 * MIN_GROUP {
        return None;
    }
    let nb: Vec<Vec<u32>> = f
        .switch_ids()
        .map(|s| {
            let mut v: Vec<u32> = f.switch_neighbors(s).iter().map(|e| e.neighbor.0).filter(|&n| n != s.0).collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let mut parent: Vec<u32> = (0..ns as u32).collect();
    fn find(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            parent[x as usize] = parent[parent[x as usize] as usize];
            x = parent[x as usize];
        }
        x
    }
    for u in 0..ns {
        for &v in nb[u].iter().filter(|&&v| v as usize > u) {
            if shares_neighbor(&nb[u], &nb[v as usize]) {
                let (a, b) = (find(&mut parent, u as u32), find(&mut parent, v));
                parent[a.max(b) as usize] = a.min(b);
            }
        }
    }
    let mut group_of_root = vec![u32::MAX; ns];
    let mut members: Vec<Vec<SwitchId>> = Vec::new();
    let mut place = vec![(0u32, 0u32); ns];
    for (s, at) in place.iter_mut().enumerate() {
        let r = find(&mut parent, s as u32) as usize;
        if group_of_root[r] == u32::MAX {
            group_of_root[r] = members.len() as u32;
            members.push(Vec::new());
        }
        let g = group_of_root[r];
        *at = (g, members[g as usize].len() as u32);
        members[g as usize].push(SwitchId(s as u32));
    }
    let ng = members.len();
    if ng < 2 || members.iter().any(|m| m.len() < MIN_GROUP) {
        return None;
    }
    let clique = members
        .iter()
        .all(|m| m.iter().all(|&s| m.iter().all(|&t| s == t || nb[s.index()].binary_search(&t.0).is_ok())));
    if !clique {
        return None;
    }
    let mut joined = vec![false; ng * ng];
    for (u, row) in nb.iter().enumerate() {
        for &v in row {
            let (gu, gv) = (place[u].0 as usize, place[v as usize].0 as usize);
            joined[gu * ng + gv] = true;
        }
    }
    let all_joined = (0..ng).all(|a| (0..ng).all(|b| a == b || joined[a * ng + b]));
    all_joined.then_some(Groups { members, place })
}

fn shares_neighbor(a: &[u32], b: &[u32]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
}

/// The class of the local cable between places `i` and `j` of a group:
/// outbound holds place 0's star except `{0, 1}`, plus `{1, 2}`; inbound
/// holds place 1's star except `{1, 2}`, plus `{0, 1}` and `{2, 3}`; both
/// span the group. The other cables (among places 2 and up) alternate by
/// the parity of `i + j`, so each class gets about half of them.
fn class_of(i: usize, j: usize) -> usize {
    let (i, j) = (i.min(j), i.max(j));
    match (i, j) {
        (0, 1) => INBOUND,
        (0, _) => OUTBOUND,
        (1, 2) => OUTBOUND,
        (1, _) => INBOUND,
        (2, 3) => INBOUND,
        _ if (i + j) % 2 == 0 => OUTBOUND,
        _ => INBOUND,
    }
}

/// Up*/down* next hops within one class of a group of `a` routers:
/// `next[s * a + t]` is the place `s` forwards to on its way to place `t`
/// (`t` itself at the last hop, `s` when `s == t`). Rooted at place 0 for
/// the outbound class, 1 for the inbound one; "up" is towards a lower
/// (level, place). A route goes down as soon as its destination lies below
/// on a down path, so every suffix of a route is legal too and the routes
/// of all destinations together stay up*/down*.
fn class_routes(a: usize, class: usize) -> Vec<usize> {
    let adj: Vec<Vec<usize>> =
        (0..a).map(|i| (0..a).filter(|&j| j != i && class_of(i, j) == class).collect()).collect();
    let root = if class == OUTBOUND { 0 } else { 1 };
    let mut level = vec![usize::MAX; a];
    level[root] = 0;
    let mut queue = std::collections::VecDeque::from([root]);
    while let Some(x) = queue.pop_front() {
        for &y in &adj[x] {
            if level[y] == usize::MAX {
                level[y] = level[x] + 1;
                queue.push_back(y);
            }
        }
    }
    debug_assert!(level.iter().all(|&l| l != usize::MAX), "each class spans its group");
    let key = |x: usize| (level[x], x);
    // Places from the root outwards: up moves go to earlier ones.
    let mut by_key: Vec<usize> = (0..a).collect();
    by_key.sort_unstable_by_key(|&x| key(x));
    let mut next = vec![usize::MAX; a * a];
    const FAR: usize = usize::MAX / 2;
    for t in 0..a {
        // Hops on a down-only path to t, deepest first.
        let mut down = vec![FAR; a];
        down[t] = 0;
        for &x in by_key.iter().rev() {
            for &y in adj[x].iter().filter(|&&y| key(y) > key(x)) {
                if down[y] + 1 < down[x] {
                    down[x] = down[y] + 1;
                    next[x * a + t] = y;
                }
            }
        }
        next[t * a + t] = t;
        // Elsewhere, up to the neighbour with the shortest route.
        let mut hops = down.clone();
        for &x in &by_key {
            if down[x] != FAR {
                continue;
            }
            for &y in adj[x].iter().filter(|&&y| key(y) < key(x)) {
                if hops[y] + 1 < hops[x] {
                    hops[x] = hops[y] + 1;
                    next[x * a + t] = y;
                }
            }
        }
    }
    next
}

/// The tables described in the module documentation and the number of
/// groups, or `None` when the fabric is not such a dragonfly (see
/// [`groups`]) or, defensively, when the tables close a credit loop.
pub(crate) fn route_one_vl(f: &RoutingFabric) -> Option<(Routes, usize)> {
    let g = groups(f)?;
    let ng = g.members.len();
    // Local ports: port[group][i * a + j] from place i to place j.
    let mut local: Vec<Vec<u8>> = g.members.iter().map(|m| vec![0u8; m.len() * m.len()]).collect();
    // Global cables per ordered group pair: (place in the first, port).
    let mut cables: Vec<Vec<(u32, u8)>> = vec![Vec::new(); ng * ng];
    for s in f.switch_ids() {
        let (gs, ps) = g.place[s.index()];
        for e in f.switch_neighbors(s) {
            let (gn, pn) = g.place[e.neighbor.index()];
            if e.neighbor == s {
                continue;
            }
            if gn == gs {
                let a = g.members[gs as usize].len();
                let slot = &mut local[gs as usize][ps as usize * a + pn as usize];
                if *slot == 0 {
                    *slot = e.port;
                }
            } else {
                cables[gs as usize * ng + gn as usize].push((ps, e.port));
            }
        }
    }
    let mut routes_by_size: Vec<Option<[Vec<usize>; 2]>> = Vec::new();
    for m in &g.members {
        let a = m.len();
        if routes_by_size.len() <= a {
            routes_by_size.resize(a + 1, None);
        }
        if routes_by_size[a].is_none() {
            routes_by_size[a] = Some([class_routes(a, OUTBOUND), class_routes(a, INBOUND)]);
        }
    }
    let class = |a: usize, c: usize| &routes_by_size[a].as_ref().expect("computed per group size")[c];

    // Every LID by the switch it is delivered at, with the port there.
    let mut lids_at: Vec<Vec<(u16, u8)>> = vec![Vec::new(); f.num_switches()];
    for s in f.switch_ids() {
        lids_at[s.index()].extend(f.switch(s).lids().map(|l| (l as u16, 0u8)));
    }
    for e in f.end_port_ids() {
        if let Some((s, port)) = f.attached_switch(e) {
            lids_at[s.index()].extend(f.end_port(e).lids().map(|l| (l as u16, port)));
        }
    }

    let top = f.max_lid();
    let mut lfts: Vec<Lft> = (0..f.num_switches()).map(|_| Lft::unrouted(top)).collect();
    for d in f.switch_ids() {
        let (gd, pd) = (g.place[d.index()].0 as usize, g.place[d.index()].1 as usize);
        for v in f.switch_ids() {
            let (gv, pv) = (g.place[v.index()].0 as usize, g.place[v.index()].1 as usize);
            let a = g.members[gv].len();
            let hop = |to: usize, c: usize| local[gv][pv * a + class(a, c)[pv * a + to]];
            let port = if v == d {
                None
            } else if gv == gd {
                Some(hop(pd, INBOUND))
            } else {
                // Destinations of a group spread over the cables to it.
                let to = &cables[gv * ng + gd];
                let (gateway, global_port) = to[pd % to.len()];
                Some(if gateway as usize == pv { global_port } else { hop(gateway as usize, OUTBOUND) })
            };
            for &(lid, at_d) in &lids_at[d.index()] {
                lfts[v.index()].set(lid, port.unwrap_or(at_d));
            }
        }
    }
    let routes = Routes { lfts, sl: None };
    analyze_cdg(f, &routes, CdgScope { include_switches: true }).deadlock_free().then_some((routes, ng))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testfab;
    use crate::validate;

    #[test]
    fn both_classes_span_every_group_size() {
        for a in MIN_GROUP..=12 {
            for c in [OUTBOUND, INBOUND] {
                let next = class_routes(a, c);
                for s in 0..a {
                    for t in 0..a {
                        // Walk s to t on class cables only.
                        let (mut x, mut hops) = (s, 0);
                        while x != t {
                            let y = next[x * a + t];
                            assert!(y < a && class_of(x, y) == c, "a={a} class {c}: {x} -> {y} on the way {s} -> {t}");
                            x = y;
                            hops += 1;
                            assert!(hops <= a, "a={a}: {s} -> {t} loops");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn dragonflies_route_minimal_on_global_cables_and_acyclic() {
        for (routers, groups, at_most) in [(4u8, 5usize, 80u64), (6, 7, 144)] {
            let f = testfab::dragonfly(routers, 2);
            let g = groups_of(&f);
            assert_eq!(g.members.len(), groups);
            assert!(g.members.iter().all(|m| m.len() == usize::from(routers)));
            let (r, _) = route_one_vl(&f).expect("a dragonfly");
            let rep = validate(&f, &r);
            assert!(rep.is_valid(), "{:?}", rep.failures.first());
            assert!(analyze_cdg(&f, &r, CdgScope { include_switches: true }).deadlock_free());
            assert!(
                rep.inter_switch_load.max <= at_most,
                "busiest {} want at most {at_most}",
                rep.inter_switch_load.max
            );
        }
    }

    fn groups_of(f: &RoutingFabric) -> Groups {
        groups(f).expect("a dragonfly")
    }

    #[test]
    fn other_fabrics_are_not_dragonflies() {
        assert!(groups(&testfab::ring(8, 1)).is_none());
        assert!(groups(&testfab::FatTree::full(8, 2).build()).is_none());
        // Groups of three have no two spanning trees.
        assert!(groups(&testfab::dragonfly(3, 1)).is_none());
        for seed in 1..6 {
            let f = testfab::random_connected(
                seed,
                testfab::RandomSpec { switches: 16, extra_links: 14, max_hosts_per_switch: 2, max_lmc: 0 },
            );
            assert!(groups(&f).is_none(), "seed {seed}");
        }
        // A dragonfly missing cables: a group no longer all-to-all, or a
        // pair of groups without its cable.
        for seed in 1..6 {
            let f = testfab::degraded(&testfab::dragonfly(4, 2), 10, seed);
            assert!(groups(&f).is_none(), "seed {seed}");
            assert!(route_one_vl(&f).is_none(), "seed {seed}");
        }
    }
}
