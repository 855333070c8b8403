//! MinHop: shortest-path routing balanced by the number of routes per port.
//!
//! For every destination LID each switch forwards through one of the ports
//! that lie on a shortest path (in switch-to-switch hops) to the switch the
//! destination hangs off, and among those picks the one carrying the fewest
//! end-port routes so far (lowest port number on a tie). This is the
//! behaviour of OpenSM's default engine; like it, routes to switch LIDs are
//! placed on the least loaded port but not counted, so host traffic balances
//! exactly on regular trees. With LMC > 0 the 2^LMC LIDs of one destination
//! are spread over different next-hop switches first, then different ports.
//!
//! MinHop gives no deadlock freedom: on rings and tori its routes form credit
//! loops. They still deliver every packet without forwarding loops, since
//! every hop strictly lowers the distance to the destination.
//!
//! ## Cost
//! With S switches, E switch-to-switch cables, L destination LIDs and c
//! candidate ports per (switch, destination):
//! - one breadth-first search per destination *switch* (not per LID: end
//!   ports on the same switch share it): O(S·(S + E)) time;
//! - candidate ports from the distance array: another O(S·(S + E));
//! - port choice through a small binary heap keyed by (load, port):
//!   O(L·S·log c);
//! - memory: the LFTs themselves (S·L bytes) plus O(S + E) scratch; no
//!   S×S or S×S×P hop matrix is ever stored.
//!
//! The order of destinations and switches is fixed by the fabric's indices,
//! so the result is deterministic.

use crate::error::{PartialRoutes, RoutingError};
use crate::fabric::{PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Lft, Routes};

/// A block of LIDs that terminates at one switch.
#[derive(Debug, Clone, Copy)]
struct Dest {
    base: u16,
    /// 2^LMC.
    count: u16,
    /// The port the LIDs leave the destination switch by (0 = the switch).
    out_port: u8,
    /// End-port routes count towards port balance; switch routes do not.
    counted: bool,
}

/// Per destination switch, the LID blocks it delivers: end ports in the order
/// of the switch port they hang off, then the switch's own LIDs.
fn destinations(f: &RoutingFabric) -> (Vec<u32>, Vec<Dest>) {
    let mut base = Vec::with_capacity(f.num_switches() + 1);
    let mut dests = Vec::new();
    for d in f.switch_ids() {
        base.push(dests.len() as u32);
        for (port, peer) in f.switch_ports(d).iter().enumerate() {
            if let Some(PortEnd::End(e)) = *peer {
                let ep = f.end_port(e);
                if ep.base_lid != 0 {
                    dests.push(Dest {
                        base: ep.base_lid,
                        count: 1 << ep.lmc,
                        out_port: port as u8,
                        counted: true,
                    });
                }
            }
        }
        let sw = f.switch(d);
        if sw.base_lid != 0 {
            dests.push(Dest { base: sw.base_lid, count: 1 << sw.lmc, out_port: 0, counted: false });
        }
    }
    base.push(dests.len() as u32);
    (base, dests)
}

const LOAD_SHIFT: u32 = 8;
const LOAD_ONE: u64 = 1 << LOAD_SHIFT;

/// The candidate ports of one switch towards one destination switch, as a
/// binary min-heap of `load << 8 | port`: the minimum is the least loaded
/// port, lowest port number first, exactly the greedy choice.
#[derive(Default)]
struct Selector {
    keys: Vec<u64>,
    /// Next-hop switch per candidate port (index = port), for LMC spreading.
    next: Vec<u32>,
    /// LMC spreading: how often this destination already used a next switch
    /// or a port at this switch.
    used_next: Vec<(u32, u32)>,
    used_port: Vec<(u8, u32)>,
}

impl Selector {
    fn heapify(&mut self) {
        for i in (0..self.keys.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.keys.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                return;
            }
            let r = l + 1;
            let c = if r < n && self.keys[r] < self.keys[l] { r } else { l };
            if self.keys[c] >= self.keys[i] {
                return;
            }
            self.keys.swap(i, c);
            i = c;
        }
    }

    /// The least loaded port, charged one route.
    fn take(&mut self) -> u8 {
        let k = self.keys[0];
        self.keys[0] = k + LOAD_ONE;
        self.sift_down(0);
        k as u8
    }

    /// The least loaded port, not charged (switch LIDs).
    fn peek(&self) -> u8 {
        self.keys[0] as u8
    }

    /// Chooses ports for the `count` LIDs of one LMC block: prefer a next
    /// switch this block has used least, then a port it has used least, then
    /// the least loaded port. O(count · c · count) but LMC > 0 is rare and
    /// count ≤ 128.
    fn spread(&mut self, count: u16, counted: bool, mut emit: impl FnMut(u16, u8)) {
        self.used_next.clear();
        self.used_port.clear();
        for off in 0..count {
            let mut best = 0;
            let mut best_score = (u32::MAX, u32::MAX, u64::MAX);
            for (i, &k) in self.keys.iter().enumerate() {
                let port = k as u8;
                let nb = self.next[usize::from(port)];
                let un = self.used_next.iter().find(|u| u.0 == nb).map_or(0, |u| u.1);
                let up = self.used_port.iter().find(|u| u.0 == port).map_or(0, |u| u.1);
                let score = (un, up, k);
                if score < best_score {
                    best_score = score;
                    best = i;
                }
            }
            let port = self.keys[best] as u8;
            let nb = self.next[usize::from(port)];
            match self.used_next.iter_mut().find(|u| u.0 == nb) {
                Some(u) => u.1 += 1,
                None => self.used_next.push((nb, 1)),
            }
            match self.used_port.iter_mut().find(|u| u.0 == port) {
                Some(u) => u.1 += 1,
                None => self.used_port.push((port, 1)),
            }
            if counted {
                self.keys[best] += LOAD_ONE;
                self.sift_down(best);
            }
            emit(off, port);
        }
    }
}

/// Routes every LID of `fabric` along minimum-hop paths, balancing the
/// number of end-port routes per output port. See the module documentation
/// for the algorithm and its cost.
///
/// A disconnected fabric is routed part by part and reported as
/// [`RoutingError::Disconnected`], which carries those routes.
pub fn minhop(fabric: &RoutingFabric) -> Result<Routes, RoutingError> {
    let top = fabric.max_lid();
    let mut lfts: Vec<Lft> = (0..fabric.num_switches()).map(|_| Lft::unrouted(top)).collect();
    let (dest_base, dests) = destinations(fabric);

    let mut load = vec![0u32; fabric.num_switch_port_slots()];
    let mut dist = Vec::new();
    let mut queue = Vec::new();
    let mut sel = Selector { next: vec![u32::MAX; 256], ..Selector::default() };

    for d in fabric.switch_ids() {
        let ds = &dests[dest_base[d.index()] as usize..dest_base[d.index() + 1] as usize];
        if ds.is_empty() {
            continue;
        }
        fabric.switch_distances(d, &mut dist, &mut queue);

        let own = &mut lfts[d.index()].ports;
        for dest in ds {
            let b = usize::from(dest.base);
            own[b..b + usize::from(dest.count)].fill(dest.out_port);
        }

        // queue[0] is d; the rest are exactly the switches that reach d.
        for &s in &queue[1..] {
            let s = SwitchId(s);
            let next_dist = dist[s.index()] - 1;
            sel.keys.clear();
            for e in fabric.switch_neighbors(s) {
                if dist[e.neighbor.index()] == next_dist {
                    let slot = fabric.switch_port_slot(s, e.port);
                    sel.keys.push(u64::from(load[slot]) << LOAD_SHIFT | u64::from(e.port));
                    sel.next[usize::from(e.port)] = e.neighbor.0;
                }
            }
            debug_assert!(!sel.keys.is_empty(), "a BFS-reached switch has a downhill neighbour");
            sel.heapify();

            let lft = &mut lfts[s.index()].ports;
            for dest in ds {
                let b = usize::from(dest.base);
                if dest.count == 1 {
                    lft[b] = if dest.counted { sel.take() } else { sel.peek() };
                } else {
                    sel.spread(dest.count, dest.counted, |off, port| lft[b + usize::from(off)] = port);
                }
            }
            for &k in &sel.keys {
                load[fabric.switch_port_slot(s, k as u8)] = (k >> LOAD_SHIFT) as u32;
            }
        }
    }

    let routes = Routes { lfts, sl: None };
    let comps = fabric.components();
    if comps.count() > 1 {
        let unreachable = fabric
            .switch_ids()
            .filter(|s| comps.of_switch[s.index()] != 0)
            .map(|s| fabric.switch(s).guid)
            .chain(
                fabric
                    .end_port_ids()
                    .filter(|e| comps.of_end_port[e.index()] != 0)
                    .map(|e| fabric.end_port(e).port_guid),
            )
            .collect();
        return Err(RoutingError::Disconnected {
            components: comps.count(),
            unreachable,
            partial: PartialRoutes(Box::new(routes)),
        });
    }
    Ok(routes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{validate, validate_with_loads};
    use crate::fabric::{EndPort, NodeRef, Switch};
    use crate::lft::UNROUTED;
    use crate::testfab::{self, FatTree};

    fn assert_perfect(f: &RoutingFabric, r: &Routes) {
        let rep = validate(f, r);
        assert!(rep.is_clean(), "{rep}");
        assert!(rep.all_minimal(), "{rep}");
        assert!(rep.fully_connected(), "{rep}");
        assert_eq!(rep.delivered, rep.pairs, "{rep}");
    }

    fn lid_of(f: &RoutingFabric, e: u32) -> u16 {
        f.end_ports()[e as usize].base_lid
    }

    #[test]
    fn one_switch_two_hosts() {
        let f = testfab::single_switch(2);
        let r = minhop(&f).unwrap();
        assert_eq!(r.lfts.len(), 1);
        let s = SwitchId(0);
        assert_eq!(r.port(s, lid_of(&f, 0)), 1);
        assert_eq!(r.port(s, lid_of(&f, 1)), 2);
        assert_eq!(r.port(s, f.switch(s).base_lid), 0);
        assert_eq!(r.port(s, 0), UNROUTED, "LID 0 is never routed");
        assert_eq!(r.lfts[0].linear_fdb_top().0, f.max_lid());
        assert_perfect(&f, &r);
    }

    #[test]
    fn spine_leaf_with_parallel_links_balances_every_port() {
        // 2 spines x 2 leaves, each leaf-spine pair cabled twice, 4 hosts per leaf.
        let f = testfab::spine_leaf(2, 2, 2, 4);
        let r = minhop(&f).unwrap();
        assert_perfect(&f, &r);
        let leaves = [SwitchId(0), SwitchId(1)];
        let spines = [SwitchId(2), SwitchId(3)];
        for (li, &leaf) in leaves.iter().enumerate() {
            let remote: Vec<u16> = (0..8u32).filter(|e| e / 4 != li as u32).map(|e| lid_of(&f, e)).collect();
            let mut per_port = [0u32; 9];
            for &lid in &remote {
                per_port[usize::from(r.port(leaf, lid))] += 1;
            }
            assert_eq!(&per_port[5..9], &[1, 1, 1, 1], "leaf {li}: one remote host per up-link");
        }
        for &spine in &spines {
            // Ports 1,2 go to leaf 0 and 3,4 to leaf 1: two hosts on each.
            let mut per_port = [0u32; 5];
            for e in 0..8 {
                per_port[usize::from(r.port(spine, lid_of(&f, e)))] += 1;
            }
            assert_eq!(&per_port[1..], &[2, 2, 2, 2]);
        }
    }

    #[test]
    fn ring_is_delivered_loop_free_on_shortest_paths() {
        for n in [3u8, 4, 6, 7] {
            let f = testfab::ring(n, 2);
            let r = minhop(&f).unwrap();
            assert_perfect(&f, &r);
            let rep = validate(&f, &r);
            // Host to host across half the ring: n/2 switch hops + 2 cables.
            assert_eq!(rep.max_hops(), usize::from(n / 2) + 2, "ring of {n}");
        }
        // On an even ring the far switch is reached both ways. Switch 0
        // routed switch 1's two hosts out of port 1 first, so the balance
        // rule sends both hosts of the far switch out of port 2 (to switch 3).
        let f = testfab::ring(4, 2);
        let r = minhop(&f).unwrap();
        let ports: Vec<u8> = [4, 5].iter().map(|&e| r.port(SwitchId(0), lid_of(&f, e))).collect();
        assert_eq!(ports, vec![2, 2]);
        assert_eq!(r.port(SwitchId(0), lid_of(&f, 2)), 1);
        // Switch 1 had routed two hosts each way (switch 0's out of port 2,
        // switch 2's out of port 1) before reaching switch 3: its hosts split.
        let ports: Vec<u8> = [6, 7].iter().map(|&e| r.port(SwitchId(1), lid_of(&f, e))).collect();
        assert_eq!(ports, vec![1, 2]);
    }

    #[test]
    fn two_hosts_back_to_back_need_no_tables() {
        let f = testfab::back_to_back();
        let r = minhop(&f).unwrap();
        assert!(r.lfts.is_empty());
        let rep = validate(&f, &r);
        assert_eq!((rep.pairs, rep.delivered), (2, 2));
        assert_perfect(&f, &r);
    }

    #[test]
    fn disconnected_fabric_routes_each_part_and_names_the_rest() {
        let mut b = RoutingFabric::builder();
        let s0 = b.add_switch(Switch::new(0xa0, 4, 1)).unwrap();
        let s1 = b.add_switch(Switch::new(0xa1, 4, 2)).unwrap();
        let s2 = b.add_switch(Switch::new(0xb0, 4, 3)).unwrap();
        let h: Vec<_> = (0..4u64)
            .map(|i| b.add_end_port(EndPort::new(0x100 + i, 0x200 + i, 1, 10 + i as u16)).unwrap())
            .collect();
        let lone = b.add_end_port(EndPort::new(0x300, 0x301, 1, 20)).unwrap();
        b.connect(PortEnd::Switch(s0, 1), PortEnd::Switch(s1, 1)).unwrap();
        b.connect(PortEnd::End(h[0]), PortEnd::Switch(s0, 2)).unwrap();
        b.connect(PortEnd::End(h[1]), PortEnd::Switch(s1, 2)).unwrap();
        b.connect(PortEnd::End(h[2]), PortEnd::Switch(s2, 1)).unwrap();
        b.connect(PortEnd::End(h[3]), PortEnd::Switch(s2, 2)).unwrap();
        let _ = lone;
        let f = b.build().unwrap();
        let err = minhop(&f).unwrap_err();
        let RoutingError::Disconnected { components, unreachable, partial } = &err;
        assert_eq!(*components, 3);
        assert_eq!(unreachable, &vec![0xb0, 0x202, 0x203, 0x301]);
        assert!(err.to_string().contains("0x0000000000000301"), "{err}");
        let r = &partial.0;
        assert_eq!(r.port(s0, 11), 1, "h1 across the link");
        assert_eq!(r.port(s2, 12), 1);
        assert_eq!(r.port(s0, 12), UNROUTED, "no route between parts");
        let rep = validate(&f, r);
        assert!(rep.is_clean(), "{rep}");
        assert!(rep.all_minimal());
        assert!(!rep.fully_connected());
        assert_eq!(rep.delivered + rep.no_path, rep.pairs);
        // 8 LIDs x 7 other nodes.
        assert_eq!(rep.pairs, 8 * 7);
        // Part A: s0 s1 h0 h1 (4 LIDs, 3 sources each); part B: s2 h2 h3
        // (3 LIDs, 2 sources each); the lone port reaches nothing.
        assert_eq!(rep.delivered, 4 * 3 + 3 * 2);
    }

    #[test]
    fn lmc_spreads_a_hosts_lids_over_different_spines() {
        // Radix 8, 2 levels: 4 spines; LMC 2 gives each host 4 LIDs.
        let f = FatTree { host_lmc: 2, ..FatTree::new(8, 2, 16) }.build();
        let r = minhop(&f).unwrap();
        assert_perfect(&f, &r);
        let leaf0 = SwitchId(0);
        for e in f.end_port_ids().filter(|e| f.attached_switch(*e).unwrap().0 != leaf0) {
            let mut next: Vec<_> = f
                .end_port(e)
                .lids()
                .map(|lid| match f.switch_peer(leaf0, r.port(leaf0, lid as u16)) {
                    Some(PortEnd::Switch(n, _)) => n,
                    other => panic!("up-link expected, got {other:?}"),
                })
                .collect();
            next.sort();
            next.dedup();
            assert_eq!(next.len(), 4, "end port {e:?}: 4 LIDs over 4 spines");
        }
    }

    #[test]
    fn switch_lids_with_enhanced_port0_lmc() {
        let mut b = RoutingFabric::builder();
        let s0 = b.add_switch(Switch::new(0xa0, 4, 4).with_enhanced_port0(2)).unwrap();
        let s1 = b.add_switch(Switch::new(0xa1, 4, 8).with_enhanced_port0(2)).unwrap();
        b.connect(PortEnd::Switch(s0, 1), PortEnd::Switch(s1, 1)).unwrap();
        b.connect(PortEnd::Switch(s0, 2), PortEnd::Switch(s1, 2)).unwrap();
        let f = b.build().unwrap();
        let r = minhop(&f).unwrap();
        assert_eq!(&r.lfts[0].ports[4..8], &[0, 0, 0, 0]);
        assert_eq!(&r.lfts[1].ports[8..12], &[0, 0, 0, 0]);
        // Both parallel links carry two of the four LIDs.
        let mut ports = r.lfts[0].ports[8..12].to_vec();
        ports.sort();
        assert_eq!(ports, vec![1, 1, 2, 2]);
        assert_perfect(&f, &r);
    }

    #[test]
    fn end_port_lids_leave_their_switch_by_the_port_they_hang_off() {
        let f = FatTree::new(8, 3, 40).build();
        let r = minhop(&f).unwrap();
        for e in f.end_port_ids() {
            let (s, p) = f.attached_switch(e).unwrap();
            assert_eq!(r.port(s, f.end_port(e).base_lid), p);
        }
        for s in f.switch_ids() {
            assert_eq!(r.port(s, f.switch(s).base_lid), 0);
        }
        assert_perfect(&f, &r);
    }

    /// On a full 2-level fat tree the ideal all-to-all load of every
    /// switch-to-switch link is (radix/2)·(radix-1): MinHop must hit it on
    /// every link, and each leaf must route radix-1 remote hosts per up-link.
    #[test]
    fn full_two_level_fat_tree_is_perfectly_balanced() {
        for radix in [4u8, 8, 36] {
            let f = FatTree::full(radix, 2).build();
            let r = minhop(&f).unwrap();
            let (rep, _) = validate_with_loads(&f, &r);
            assert!(rep.is_clean() && rep.all_minimal(), "{rep}");
            let k = u64::from(radix);
            let ideal = k / 2 * (k - 1);
            assert_eq!(rep.inter_switch_load.max, ideal, "radix {radix}: {rep}");
            assert_eq!(rep.inter_switch_load.at_max, rep.inter_switch_load.links, "radix {radix}: {rep}");

            let h = radix / 2;
            for leaf in f.switch_ids().take(usize::from(radix)) {
                let hist = r.lfts[leaf.index()].port_histogram();
                // Count only host LIDs per up port.
                let mut per_up = vec![0u32; usize::from(radix) + 1];
                for e in f.end_port_ids() {
                    if f.attached_switch(e).unwrap().0 != leaf {
                        per_up[usize::from(r.port(leaf, f.end_port(e).base_lid))] += 1;
                    }
                }
                assert!(per_up[h as usize + 1..].iter().all(|&n| u32::from(radix) - 1 == n), "{per_up:?}");
                assert!(hist[usize::from(h) + 1..=usize::from(radix)].iter().all(|&n| n > 0));
            }
        }
    }

    #[test]
    fn three_level_fat_tree_routes_perfectly() {
        for ft in [FatTree::full(8, 3), FatTree::new(8, 3, 50), FatTree::full(4, 4)] {
            let f = ft.build();
            let r = minhop(&f).unwrap();
            assert_perfect(&f, &r);
            let rep = validate(&f, &r);
            assert_eq!(rep.max_hops(), 2 * usize::from(ft.levels), "{ft:?}");
        }
    }

    #[test]
    fn deterministic() {
        let f = testfab::random_connected(
            7,
            testfab::RandomSpec { switches: 20, extra_links: 25, max_hosts_per_switch: 3, max_lmc: 1 },
        );
        assert_eq!(minhop(&f).unwrap(), minhop(&f).unwrap());
    }

    #[test]
    fn unassigned_lids_are_not_destinations() {
        let mut b = RoutingFabric::builder();
        let s = b.add_switch(Switch::new(0xa0, 4, 0)).unwrap();
        let h0 = b.add_end_port(EndPort::new(1, 2, 1, 0)).unwrap();
        let h1 = b.add_end_port(EndPort::new(3, 4, 1, 5)).unwrap();
        b.connect(PortEnd::End(h0), PortEnd::Switch(s, 1)).unwrap();
        b.connect(PortEnd::End(h1), PortEnd::Switch(s, 2)).unwrap();
        let f = b.build().unwrap();
        let r = minhop(&f).unwrap();
        assert_eq!(r.lfts[0].ports, vec![UNROUTED, UNROUTED, UNROUTED, UNROUTED, UNROUTED, 2]);
        let rep = validate(&f, &r);
        assert_eq!(rep.destination_lids, 1);
        assert_eq!(rep.pairs, 2);
        assert_eq!(crate::analysis::trace(&f, &r, NodeRef::End(h0), 5).hops, vec![(s, 2)]);
    }
}
