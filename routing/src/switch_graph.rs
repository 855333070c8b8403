//! The switch-to-switch cables as one compact adjacency (CSR) in an order
//! an engine chooses, and the breadth-first search the engines share.
//!
//! Engines sweep the switches once per destination, so they renumber them
//! first (MinHop canonically, up*/down* by its order) and want neighbours
//! and per-port slots in that numbering: [`SwitchGraph`] holds exactly
//! that, built once in O(S + E). [`Bfs`] is the one breadth-first search
//! over it, with its scratch kept between searches.

use crate::fabric::{RoutingFabric, SwitchEdge, SwitchId};

/// No switch: an unreached distance, or a port slot without a switch
/// behind it.
pub(crate) const NONE: u32 = u32::MAX;

/// Switch-to-switch cables in CSR form over switch numbers `0..len()`,
/// given by an order of the fabric's switches.
#[derive(Debug, Clone)]
pub(crate) struct SwitchGraph {
    /// Number -> fabric switch.
    switches: Vec<SwitchId>,
    /// The cables of switch `i` are `edges[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<u32>,
    /// In the fabric's port order per switch; `neighbor` is a number.
    edges: Vec<SwitchEdge>,
    /// Flat per-port slot of port 0 of each switch (+ the total), ports
    /// 0..=num_ports each.
    port_base: Vec<u32>,
    /// Per port slot: the number of the switch its cable leads to
    /// ([`NONE`]: unused, or an end port).
    slot_peer: Vec<u32>,
}

impl SwitchGraph {
    /// The fabric's cables with switches numbered by their place in
    /// `order`, which lists every switch once. O(S + E).
    pub(crate) fn new(f: &RoutingFabric, order: Vec<SwitchId>) -> SwitchGraph {
        let n = order.len();
        debug_assert_eq!(n, f.num_switches(), "the order lists every switch");
        let mut number = vec![NONE; f.num_switches()];
        for (i, s) in order.iter().enumerate() {
            number[s.index()] = i as u32;
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut edges = Vec::new();
        let mut port_base = Vec::with_capacity(n + 1);
        let mut slots = 0u32;
        for &s in &order {
            offsets.push(edges.len() as u32);
            edges.extend(
                f.switch_neighbors(s)
                    .iter()
                    .map(|e| SwitchEdge { neighbor: SwitchId(number[e.neighbor.index()]), ..*e }),
            );
            port_base.push(slots);
            slots += u32::from(f.switch(s).num_ports) + 1;
        }
        offsets.push(edges.len() as u32);
        port_base.push(slots);
        let mut slot_peer = vec![NONE; slots as usize];
        for i in 0..n {
            for e in &edges[offsets[i] as usize..offsets[i + 1] as usize] {
                slot_peer[port_base[i] as usize + usize::from(e.port)] = e.neighbor.0;
            }
        }
        SwitchGraph { switches: order, offsets, edges, port_base, slot_peer }
    }

    /// Switches numbered as the fabric numbers them.
    pub(crate) fn in_fabric_order(f: &RoutingFabric) -> SwitchGraph {
        SwitchGraph::new(f, f.switch_ids().collect())
    }

    /// Number of switches.
    pub(crate) fn len(&self) -> usize {
        self.switches.len()
    }

    /// Number -> fabric switch, for all numbers in order.
    pub(crate) fn switches(&self) -> &[SwitchId] {
        &self.switches
    }

    /// The fabric switch numbered `i`.
    pub(crate) fn switch(&self, i: usize) -> SwitchId {
        self.switches[i]
    }

    /// The cables of switch `i` in port order, neighbours by number.
    pub(crate) fn neighbors(&self, i: usize) -> &[SwitchEdge] {
        &self.edges[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The distinct neighbours of switch `i` (self-loops included), sorted
    /// by number.
    pub(crate) fn neighbor_set(&self, i: usize) -> Vec<u32> {
        let mut v: Vec<u32> = self.neighbors(i).iter().map(|e| e.neighbor.0).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Flat slot of port 0 of switch `i`; port `p` is at `port_base(i) + p`.
    pub(crate) fn port_base(&self, i: usize) -> usize {
        self.port_base[i] as usize
    }

    /// Length of a flat per-port array over every switch.
    pub(crate) fn port_slots(&self) -> usize {
        *self.port_base.last().unwrap_or(&0) as usize
    }

    /// The number of the switch behind a port slot, [`NONE`] if there is
    /// none.
    pub(crate) fn slot_peer(&self, slot: usize) -> u32 {
        self.slot_peer[slot]
    }

    /// End ports cabled to each switch, by number: the traffic a switch
    /// injects.
    pub(crate) fn end_ports_per_switch(&self, f: &RoutingFabric) -> Vec<u64> {
        let per_switch = f.end_ports_per_switch();
        self.switches.iter().map(|s| per_switch[s.index()]).collect()
    }
}

/// The switches in canonical order, and where each connected part starts
/// in it (plus the total): breadth-first from the switch with the lowest
/// GUID, neighbours in port order, then from the lowest-GUID switch not yet
/// reached. The order depends only on GUIDs and cabling, not on the order
/// the SM discovered switches in, so the same fabric always gets the same
/// routes (an SM that fails over does not rewrite every table), and
/// neighbours get nearby numbers, which keeps per-destination sweeps
/// cache-friendly. Each part is one contiguous run.
pub(crate) fn canonical_order(f: &RoutingFabric) -> (Vec<SwitchId>, Vec<usize>) {
    canonical_order_of(f, &SwitchGraph::in_fabric_order(f))
}

/// [`canonical_order`] from a fabric-order graph the caller already has.
pub(crate) fn canonical_order_of(f: &RoutingFabric, g: &SwitchGraph) -> (Vec<SwitchId>, Vec<usize>) {
    let mut by_guid: Vec<SwitchId> = f.switch_ids().collect();
    by_guid.sort_by_key(|s| f.switch(*s).guid);
    let mut placed = vec![false; g.len()];
    let mut order = Vec::with_capacity(g.len());
    let mut part_base = vec![0];
    let mut bfs = Bfs::new(g.len());
    for root in by_guid {
        if placed[root.index()] {
            continue;
        }
        bfs.run(g, [root.0]);
        for &i in bfs.visited() {
            placed[i as usize] = true;
            order.push(g.switch(i as usize));
        }
        part_base.push(order.len());
    }
    (order, part_base)
}

/// Breadth-first search over a [`SwitchGraph`], its scratch kept between
/// searches: each search costs O(reach + its cables), not O(S).
#[derive(Debug, Clone)]
pub(crate) struct Bfs {
    /// Hops from the nearest source, [`NONE`] where not reached.
    dist: Vec<u32>,
    /// Reached switches in visit order: the sources as given, then nearest
    /// first, neighbours in port order.
    queue: Vec<u32>,
}

impl Bfs {
    /// Scratch for graphs of `n` switches.
    pub(crate) fn new(n: usize) -> Bfs {
        Bfs { dist: vec![NONE; n], queue: Vec::with_capacity(n) }
    }

    /// Hop distances from the nearest of `sources` (numbers in `g`),
    /// forgetting the previous search. A source listed twice is visited
    /// twice but changes no distance. O(reach + its cables).
    pub(crate) fn run(&mut self, g: &SwitchGraph, sources: impl IntoIterator<Item = u32>) {
        for &i in &self.queue {
            self.dist[i as usize] = NONE;
        }
        self.queue.clear();
        for s in sources {
            self.dist[s as usize] = 0;
            self.queue.push(s);
        }
        let mut head = 0;
        while head < self.queue.len() {
            let u = self.queue[head] as usize;
            head += 1;
            let du = self.dist[u] + 1;
            for e in g.neighbors(u) {
                let v = e.neighbor.index();
                if self.dist[v] == NONE {
                    self.dist[v] = du;
                    self.queue.push(v as u32);
                }
            }
        }
    }

    /// Per switch number: hops from the nearest source of the last search,
    /// [`NONE`] where it did not reach.
    pub(crate) fn dist(&self) -> &[u32] {
        &self.dist
    }

    /// The switches the last search reached, in visit order (nearest
    /// first).
    pub(crate) fn visited(&self) -> &[u32] {
        &self.queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{PortEnd, Switch};
    use crate::testfab;

    /// A path a - b - c plus a lone switch d, and a parallel a-b cable;
    /// switches added in GUID order c, a, d, b to keep fabric and canonical
    /// numbers apart.
    fn small() -> (RoutingFabric, [SwitchId; 4]) {
        let mut b = RoutingFabric::builder();
        let c = b.add_switch(Switch::new(0x30, 4, 3)).unwrap();
        let a = b.add_switch(Switch::new(0x10, 4, 1)).unwrap();
        let d = b.add_switch(Switch::new(0x40, 2, 4)).unwrap();
        let bb = b.add_switch(Switch::new(0x20, 4, 2)).unwrap();
        b.connect(PortEnd::Switch(a, 2), PortEnd::Switch(bb, 1)).unwrap();
        b.connect(PortEnd::Switch(a, 1), PortEnd::Switch(bb, 3)).unwrap();
        b.connect(PortEnd::Switch(bb, 2), PortEnd::Switch(c, 4)).unwrap();
        (b.build().unwrap(), [a, bb, c, d])
    }

    #[test]
    fn csr_renumbers_neighbours_and_keeps_port_order() {
        let (f, [a, b, c, d]) = small();
        let g = SwitchGraph::new(&f, vec![d, c, b, a]);
        assert_eq!(g.len(), 4);
        assert_eq!(g.switch(1), c);
        let ports: Vec<(u8, u8, u32)> = g.neighbors(3).iter().map(|e| (e.port, e.remote_port, e.neighbor.0)).collect();
        assert_eq!(ports, vec![(1, 3, 2), (2, 1, 2)], "a's two cables to b, in port order");
        assert!(g.neighbors(0).is_empty());
        assert_eq!(g.neighbor_set(2), vec![1, 3]);
        // Ports 0..=num_ports per switch: d 3, c 5, b 5, a 5.
        assert_eq!((g.port_base(0), g.port_base(1), g.port_base(3), g.port_slots()), (0, 3, 13, 18));
        assert_eq!(g.slot_peer(g.port_base(1) + 4), 2, "c port 4 leads to b");
        assert_eq!(g.slot_peer(g.port_base(1) + 1), NONE);
        assert_eq!(g.slot_peer(g.port_base(3) + 1), 2);
    }

    #[test]
    fn canonical_order_is_breadth_first_from_the_lowest_guid_per_part() {
        let (f, [a, b, c, d]) = small();
        let (order, parts) = canonical_order(&f);
        assert_eq!(order, vec![a, b, c, d]);
        assert_eq!(parts, vec![0, 3, 4]);
        // The same fabric renumbered gets the same order by GUID.
        let f0 = testfab::FatTree::new(8, 3, 40).build();
        let guids =
            |f: &RoutingFabric| -> Vec<u64> { canonical_order(f).0.iter().map(|s| f.switch(*s).guid).collect() };
        for seed in 0..3 {
            assert_eq!(guids(&testfab::renumbered(&f0, seed)), guids(&f0));
        }
    }

    #[test]
    fn bfs_gives_hop_distances_and_forgets_the_last_search() {
        let (f, [a, b, c, d]) = small();
        let g = SwitchGraph::in_fabric_order(&f);
        let mut bfs = Bfs::new(g.len());
        bfs.run(&g, [c.0]);
        let at = |bfs: &Bfs, s: SwitchId| bfs.dist()[s.index()];
        assert_eq!((at(&bfs, c), at(&bfs, b), at(&bfs, a), at(&bfs, d)), (0, 1, 2, NONE));
        assert_eq!(bfs.visited(), &[c.0, b.0, a.0]);
        bfs.run(&g, [d.0]);
        assert_eq!((at(&bfs, d), at(&bfs, c), at(&bfs, a)), (0, NONE, NONE));
        assert_eq!(bfs.visited(), &[d.0]);
        // Several sources: the nearest counts; duplicates change nothing.
        bfs.run(&g, [a.0, c.0, a.0]);
        assert_eq!((at(&bfs, a), at(&bfs, b), at(&bfs, c)), (0, 1, 0));
    }

    /// On random fabrics the search agrees with the fabric's own distances
    /// in any numbering, and visits nearest first.
    #[test]
    fn bfs_matches_fabric_distances_on_random_fabrics() {
        let spec = testfab::RandomSpec { switches: 30, extra_links: 40, max_hosts_per_switch: 2, max_lmc: 0 };
        for seed in 0..5 {
            let f = testfab::random_connected(seed, spec);
            let g = SwitchGraph::new(&f, canonical_order(&f).0);
            let mut number = vec![0; f.num_switches()];
            for (i, s) in g.switches().iter().enumerate() {
                number[s.index()] = i;
            }
            let mut bfs = Bfs::new(g.len());
            let (mut dist, mut queue) = (Vec::new(), Vec::new());
            for dest in f.switch_ids() {
                f.switch_distances(dest, &mut dist, &mut queue);
                bfs.run(&g, [number[dest.index()] as u32]);
                for s in f.switch_ids() {
                    assert_eq!(bfs.dist()[number[s.index()]], dist[s.index()], "seed {seed}");
                }
                let d: Vec<u32> = bfs.visited().iter().map(|&i| bfs.dist()[i as usize]).collect();
                assert!(d.windows(2).all(|w| w[0] <= w[1]), "seed {seed}: {d:?}");
                assert_eq!(d.len(), f.num_switches());
            }
        }
    }
}
