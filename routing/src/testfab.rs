//! Small fabric generators for tests and benchmarks (this crate's and other
//! crates'): fat trees, spine-leaf with parallel cables, rings, two hosts
//! back to back, and seeded random connected topologies.
//!
//! GUIDs and LIDs are deterministic: end ports get LIDs first, in the order
//! they are created (so the hosts of one leaf have consecutive LIDs, as an SM
//! assigning LIDs in discovery order tends to give), then switches.
//!
//! These builders panic on nonsensical parameters (odd radix, more hosts than
//! the tree holds): they are test scaffolding, not input parsers.

use crate::fabric::{EndPort, EndPortId, FabricBuilder, PortEnd, RoutingFabric, Switch, SwitchId};

const SWITCH_GUID_BASE: u64 = 0x0002_c903_0000_0000;
const CA_GUID_BASE: u64 = 0x0002_c904_0000_0000;

/// Hands out aligned LIDs in increasing order.
#[derive(Debug, Clone)]
pub struct LidAlloc {
    next: u32,
}

impl Default for LidAlloc {
    fn default() -> Self {
        LidAlloc { next: 1 }
    }
}

impl LidAlloc {
    /// The next free base LID aligned to 2^lmc.
    ///
    /// # Panics
    /// When the unicast LID space (0xBFFF) is exhausted.
    pub fn alloc(&mut self, lmc: u8) -> u16 {
        let span = 1u32 << lmc;
        let base = self.next.div_ceil(span) * span;
        self.next = base + span;
        assert!(base + span - 1 <= 0xBFFF, "unicast LID space exhausted");
        base as u16
    }
}

/// A fabric under construction with GUIDs handed out in order; LIDs are
/// given at [`Gen::finish`] so that end ports come first.
struct Gen {
    b: FabricBuilder,
    switch_lmc: Vec<u8>,
    end_lmc: Vec<u8>,
    switch_specs: Vec<Switch>,
    end_specs: Vec<EndPort>,
    links: Vec<(PortEnd, PortEnd)>,
}

impl Gen {
    fn new() -> Gen {
        Gen {
            b: FabricBuilder::new(),
            switch_lmc: Vec::new(),
            end_lmc: Vec::new(),
            switch_specs: Vec::new(),
            end_specs: Vec::new(),
            links: Vec::new(),
        }
    }

    fn switch(&mut self, ports: u8, name: String) -> SwitchId {
        let id = SwitchId(self.switch_specs.len() as u32);
        let guid = SWITCH_GUID_BASE + self.switch_specs.len() as u64 + 1;
        self.switch_specs.push(Switch::new(guid, ports, 0).with_name(name));
        self.switch_lmc.push(0);
        id
    }

    fn host(&mut self, lmc: u8, name: String) -> EndPortId {
        let id = EndPortId(self.end_specs.len() as u32);
        let node = CA_GUID_BASE + ((self.end_specs.len() as u64 + 1) << 8);
        self.end_specs.push(EndPort::new(node, node + 1, 1, 0).with_name(name));
        self.end_lmc.push(lmc);
        id
    }

    fn link(&mut self, a: PortEnd, b: PortEnd) {
        self.links.push((a, b));
    }

    /// Assigns LIDs (end ports first, or in `order` if given) and builds.
    fn finish(mut self, order: Option<Vec<usize>>) -> RoutingFabric {
        let ns = self.switch_specs.len();
        let n = ns + self.end_specs.len();
        let order = order.unwrap_or_else(|| (ns..n).chain(0..ns).collect());
        let mut lids = LidAlloc::default();
        for i in order {
            if i < ns {
                let lmc = self.switch_lmc[i];
                let sw = &mut self.switch_specs[i];
                if lmc > 0 {
                    sw.enhanced_port0 = true;
                    sw.lmc = lmc;
                }
                sw.base_lid = lids.alloc(lmc);
            } else {
                let lmc = self.end_lmc[i - ns];
                let ep = &mut self.end_specs[i - ns];
                ep.lmc = lmc;
                ep.base_lid = lids.alloc(lmc);
            }
        }
        for s in self.switch_specs {
            self.b.add_switch(s).expect("generator makes valid switches");
        }
        for e in self.end_specs {
            self.b.add_end_port(e).expect("generator makes valid end ports");
        }
        for (a, b) in self.links {
            self.b.connect(a, b).expect("generator cables each port once");
        }
        self.b.build().expect("generator makes a valid LID plan")
    }
}

/// A folded-Clos fat tree of `levels` switch levels built from `radix`-port
/// switches: half of each lower-level switch's ports go down, half up; the
/// top level uses all its ports downwards. A full tree holds
/// 2·(radix/2)^levels hosts (radix 36: 648 with 2 levels, 11,664 with 3).
///
/// Fewer hosts build only the top-level subtrees ("pods") needed, complete
/// with their switches, and fill leaves in order; the top level is always
/// complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FatTree {
    pub radix: u8,
    pub levels: u8,
    pub hosts: usize,
    /// LMC given to every host port.
    pub host_lmc: u8,
}

impl FatTree {
    pub fn new(radix: u8, levels: u8, hosts: usize) -> FatTree {
        FatTree { radix, levels, hosts, host_lmc: 0 }
    }

    /// A full tree: as many hosts as it can hold.
    pub fn full(radix: u8, levels: u8) -> FatTree {
        FatTree::new(radix, levels, FatTree::capacity(radix, levels))
    }

    pub fn capacity(radix: u8, levels: u8) -> usize {
        let h = usize::from(radix / 2);
        if levels <= 1 {
            usize::from(radix)
        } else {
            2 * h.pow(u32::from(levels))
        }
    }

    /// Hosts under one top-level subtree.
    pub fn pod_hosts(&self) -> usize {
        usize::from(self.radix / 2).pow(u32::from(self.levels) - 1)
    }

    /// # Panics
    /// On an odd radix below 2, zero levels, or more hosts than fit.
    pub fn build(&self) -> RoutingFabric {
        assert!(self.radix >= 2 && self.radix & 1 == 0, "radix must be even and at least 2");
        assert!(self.levels >= 1, "at least one level");
        assert!(self.hosts <= FatTree::capacity(self.radix, self.levels), "too many hosts for this tree");
        let r = self.radix;
        let h = r / 2;
        let mut g = Gen::new();
        let mut hosts_left = self.hosts;

        if self.levels == 1 {
            let s = g.switch(r, "sw-L1-0".into());
            for p in 1..=self.hosts as u8 {
                let e = g.host(self.host_lmc, format!("h{}", p - 1));
                g.link(PortEnd::End(e), PortEnd::Switch(s, p));
            }
            return g.finish(None);
        }

        let pods = self.hosts.div_ceil(self.pod_hosts()).max(1);
        let mut pod_ups: Vec<Vec<(SwitchId, u8)>> = Vec::with_capacity(pods);
        for pod in 0..pods {
            pod_ups.push(self.subtree(&mut g, self.levels - 1, &mut hosts_left, &format!("{pod}")));
        }
        let tops = pod_ups[0].len();
        for j in 0..tops {
            let t = g.switch(r, format!("sw-L{}-{j}", self.levels));
            for (c, ups) in pod_ups.iter().enumerate() {
                let (s, p) = ups[j];
                g.link(PortEnd::Switch(t, c as u8 + 1), PortEnd::Switch(s, p));
            }
        }
        debug_assert_eq!(tops, usize::from(h).pow(u32::from(self.levels) - 1));
        g.finish(None)
    }

    /// Builds a subtree of height `t` and returns its up ports in order.
    fn subtree(&self, g: &mut Gen, t: u8, hosts_left: &mut usize, path: &str) -> Vec<(SwitchId, u8)> {
        let h = self.radix / 2;
        if t == 1 {
            let leaf = g.switch(self.radix, format!("sw-L1-{path}"));
            let n = (*hosts_left).min(usize::from(h));
            *hosts_left -= n;
            for p in 1..=n as u8 {
                let e = g.host(self.host_lmc, format!("h-{path}-{}", p - 1));
                g.link(PortEnd::End(e), PortEnd::Switch(leaf, p));
            }
            return (0..h).map(|u| (leaf, h + 1 + u)).collect();
        }
        let subs: Vec<Vec<(SwitchId, u8)>> =
            (0..h).map(|c| self.subtree(g, t - 1, hosts_left, &format!("{path}.{c}"))).collect();
        let width = subs[0].len();
        let mut ups = Vec::with_capacity(width * usize::from(h));
        for j in 0..width {
            let s = g.switch(self.radix, format!("sw-L{t}-{path}-{j}"));
            for (c, sub) in subs.iter().enumerate() {
                let (child, cp) = sub[j];
                g.link(PortEnd::Switch(s, c as u8 + 1), PortEnd::Switch(child, cp));
            }
            ups.extend((0..h).map(|u| (s, h + 1 + u)));
        }
        ups
    }
}

/// One switch with `hosts` hosts on ports 1..=hosts.
pub fn single_switch(hosts: u8) -> RoutingFabric {
    let mut g = Gen::new();
    let s = g.switch(hosts.max(1), "sw".into());
    for p in 1..=hosts {
        let e = g.host(0, format!("h{p}"));
        g.link(PortEnd::End(e), PortEnd::Switch(s, p));
    }
    g.finish(None)
}

/// Two hosts cabled to each other, no switch.
pub fn back_to_back() -> RoutingFabric {
    let mut g = Gen::new();
    let a = g.host(0, "a".into());
    let b = g.host(0, "b".into());
    g.link(PortEnd::End(a), PortEnd::End(b));
    g.finish(None)
}

/// `spines` × `leaves`, each leaf cabled to each spine `parallel` times,
/// `hosts_per_leaf` hosts on each leaf's first ports.
pub fn spine_leaf(spines: u8, leaves: u8, parallel: u8, hosts_per_leaf: u8) -> RoutingFabric {
    let mut g = Gen::new();
    let leaf_ports = hosts_per_leaf + spines * parallel;
    let spine_ports = leaves * parallel;
    let ls: Vec<SwitchId> = (0..leaves).map(|i| g.switch(leaf_ports, format!("leaf{i}"))).collect();
    for (i, &l) in ls.iter().enumerate() {
        for p in 1..=hosts_per_leaf {
            let e = g.host(0, format!("h{i}-{p}"));
            g.link(PortEnd::End(e), PortEnd::Switch(l, p));
        }
    }
    for si in 0..spines {
        let s = g.switch(spine_ports, format!("spine{si}"));
        for (li, &l) in ls.iter().enumerate() {
            for k in 0..parallel {
                let lp = hosts_per_leaf + si * parallel + k + 1;
                let sp = li as u8 * parallel + k + 1;
                g.link(PortEnd::Switch(l, lp), PortEnd::Switch(s, sp));
            }
        }
    }
    g.finish(None)
}

/// A balanced dragonfly with one global cable per router: `routers + 1`
/// groups of `routers` switches, each group cabled all-to-all, each pair of
/// groups joined by one cable, `hosts` hosts per switch. Router `r` of a
/// group reaches router `q` by port `hosts + 1 + q` (skipping itself) and
/// takes its global cable on the last port; the `r`-th router of group `g`
/// leads to group `g + 1 + r` (mod groups), as ibsm's
/// `dragonfly:routers=R,hosts=H` generator cables them.
pub fn dragonfly(routers: u8, hosts: u8) -> RoutingFabric {
    assert!(routers >= 1, "a dragonfly needs a router per group");
    let (a, groups) = (usize::from(routers), usize::from(routers) + 1);
    let global_port = hosts + routers;
    let mut g = Gen::new();
    let sw: Vec<Vec<SwitchId>> =
        (0..groups).map(|gi| (0..a).map(|r| g.switch(global_port, format!("g{gi}r{r}"))).collect()).collect();
    let local = |from: usize, to: usize| hosts + 1 + (if to < from { to } else { to - 1 }) as u8;
    for row in &sw {
        for r in 0..a {
            for q in r + 1..a {
                g.link(PortEnd::Switch(row[r], local(r, q)), PortEnd::Switch(row[q], local(q, r)));
            }
        }
    }
    for gi in 0..groups {
        for r in 0..a {
            let peer = (gi + 1 + r) % groups;
            if gi < peer {
                let peer_router = a - 1 - r;
                g.link(PortEnd::Switch(sw[gi][r], global_port), PortEnd::Switch(sw[peer][peer_router], global_port));
            }
        }
    }
    for (gi, row) in sw.iter().enumerate() {
        for (r, &s) in row.iter().enumerate() {
            for h in 1..=hosts {
                let e = g.host(0, format!("g{gi}r{r}h{h}"));
                g.link(PortEnd::End(e), PortEnd::Switch(s, h));
            }
        }
    }
    g.finish(None)
}

/// A ring of `switches` switches (port 1 to the next switch's port 2) with
/// `hosts_per_switch` hosts on ports 3.. of each.
pub fn ring(switches: u8, hosts_per_switch: u8) -> RoutingFabric {
    assert!(switches >= 3, "a ring needs three switches");
    let mut g = Gen::new();
    let ss: Vec<SwitchId> = (0..switches).map(|i| g.switch(2 + hosts_per_switch, format!("r{i}"))).collect();
    for i in 0..ss.len() {
        g.link(PortEnd::Switch(ss[i], 1), PortEnd::Switch(ss[(i + 1) % ss.len()], 2));
        for p in 0..hosts_per_switch {
            let e = g.host(0, format!("h{i}-{p}"));
            g.link(PortEnd::End(e), PortEnd::Switch(ss[i], 3 + p));
        }
    }
    g.finish(None)
}

/// A mesh, torus or hypercube: one switch per point of a
/// `sizes[0] × sizes[1] × …` grid, neighbours along each dimension cabled
/// `parallel` times, the last switch of a dimension cabled back to the first
/// where `wrap[k]` is set (a torus dimension; with size 2 that adds parallel
/// cables, with size 1 nothing). Switch ports: dimension 0 plus-direction
/// cables first, then its minus-direction cables, then dimension 1, …, then
/// `hosts_per_switch` hosts. Switch `i` sits at coordinates
/// `(i % sizes[0], i / sizes[0] % sizes[1], …)` and is named `sw-x-y-…`.
///
/// # Panics
/// On an empty `sizes`, a zero size, `wrap` of another length, or more than
/// 254 ports per switch.
pub fn grid(sizes: &[u8], wrap: &[bool], parallel: u8, hosts_per_switch: u8) -> RoutingFabric {
    assert!(!sizes.is_empty() && sizes.iter().all(|&s| s > 0), "grid sizes must be positive");
    assert_eq!(sizes.len(), wrap.len(), "one wrap flag per dimension");
    let dims = sizes.len();
    let ports = 2 * dims * usize::from(parallel) + usize::from(hosts_per_switch);
    assert!((1..=254).contains(&ports), "ports per switch out of range");
    let n: usize = sizes.iter().map(|&s| usize::from(s)).product();
    let coord = |mut i: usize| {
        let mut c = Vec::with_capacity(dims);
        for &s in sizes {
            c.push(i % usize::from(s));
            i /= usize::from(s);
        }
        c
    };
    let index = |c: &[usize]| c.iter().zip(sizes).rev().fold(0, |acc, (&x, &s)| acc * usize::from(s) + x);
    let mut g = Gen::new();
    let ids: Vec<SwitchId> = (0..n)
        .map(|i| {
            let name = coord(i).iter().map(|x| x.to_string()).collect::<Vec<_>>().join("-");
            g.switch(ports as u8, format!("sw-{name}"))
        })
        .collect();
    let par = usize::from(parallel);
    for (i, &s) in ids.iter().enumerate() {
        let c = coord(i);
        for k in 0..dims {
            let size = usize::from(sizes[k]);
            let last = c[k] + 1 == size;
            if size == 1 || (last && !wrap[k]) {
                continue;
            }
            let mut nc = c.clone();
            nc[k] = (c[k] + 1) % size;
            let t = ids[index(&nc)];
            for j in 0..par {
                let plus = (2 * k * par + j + 1) as u8;
                let minus = ((2 * k + 1) * par + j + 1) as u8;
                g.link(PortEnd::Switch(s, plus), PortEnd::Switch(t, minus));
            }
        }
        for h in 0..hosts_per_switch {
            let e = g.host(0, format!("h{i}-{h}"));
            g.link(PortEnd::End(e), PortEnd::Switch(s, (2 * dims * par) as u8 + h + 1));
        }
    }
    g.finish(None)
}

/// SplitMix64: a tiny seeded generator so the library needs no `rand`.
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Parameters of [`random_connected`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomSpec {
    pub switches: usize,
    /// Cables added to a random spanning tree; may be parallel to existing
    /// ones or loop a switch back to itself.
    pub extra_links: usize,
    pub max_hosts_per_switch: usize,
    /// Hosts and some switches (with enhanced port 0) get an LMC up to this.
    pub max_lmc: u8,
}

/// A seeded random connected fabric: a random spanning tree over the
/// switches plus extra cables, random hosts, random empty ports, and LIDs in
/// a random order. Always at least two end ports.
pub fn random_connected(seed: u64, spec: RandomSpec) -> RoutingFabric {
    assert!(spec.switches >= 1);
    let mut rng = SplitMix64(seed);
    let n = spec.switches;
    let mut cables: Vec<(usize, usize)> = (1..n).map(|i| (rng.below(i), i)).collect();
    for _ in 0..spec.extra_links {
        cables.push((rng.below(n), rng.below(n)));
    }
    let mut hosts: Vec<usize> = (0..n).map(|_| rng.below(spec.max_hosts_per_switch + 1)).collect();
    let total: usize = hosts.iter().sum();
    if total < 2 {
        hosts[0] += 2 - total;
    }
    let mut degree = vec![0usize; n];
    for &(a, b) in &cables {
        degree[a] += 1;
        degree[b] += 1;
    }
    // Ports are handed out in a shuffled order with a few spares left empty.
    let mut free_ports: Vec<Vec<u8>> = Vec::with_capacity(n);
    let mut g = Gen::new();
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let spare = rng.below(3);
        let ports = degree[i] + hosts[i] + spare;
        assert!(ports <= 254, "too many cables on one switch");
        let mut list: Vec<u8> = (1..=ports as u8).collect();
        for k in (1..list.len()).rev() {
            let j = rng.below(k + 1);
            list.swap(k, j);
        }
        free_ports.push(list);
        ids.push(g.switch(ports.max(1) as u8, format!("s{i}")));
        if spec.max_lmc > 0 && rng.below(4) == 0 {
            g.switch_lmc[i] = rng.below(usize::from(spec.max_lmc) + 1) as u8;
        }
    }
    for &(a, b) in &cables {
        let pa = free_ports[a].pop().expect("counted");
        let pb = free_ports[b].pop().expect("counted");
        g.link(PortEnd::Switch(ids[a], pa), PortEnd::Switch(ids[b], pb));
    }
    for i in 0..n {
        for k in 0..hosts[i] {
            let lmc = if spec.max_lmc > 0 { rng.below(usize::from(spec.max_lmc) + 1) as u8 } else { 0 };
            let e = g.host(lmc, format!("h{i}-{k}"));
            let p = free_ports[i].pop().expect("counted");
            g.link(PortEnd::End(e), PortEnd::Switch(ids[i], p));
        }
    }
    let total_nodes = n + g.end_specs.len();
    let mut order: Vec<usize> = (0..total_nodes).collect();
    for k in (1..order.len()).rev() {
        let j = rng.below(k + 1);
        order.swap(k, j);
    }
    g.finish(Some(order))
}

/// The same fabric (GUIDs, LIDs, cables, port numbers) with its switches
/// and end ports stored in a seeded random order, as an SM's discovery order
/// might give: engines' results must not depend on a lucky numbering.
pub fn renumbered(f: &RoutingFabric, seed: u64) -> RoutingFabric {
    let mut rng = SplitMix64(seed);
    let mut perm = |n: usize| {
        let mut p: Vec<usize> = (0..n).collect();
        for k in (1..n).rev() {
            p.swap(k, rng.below(k + 1));
        }
        p
    };
    // new index -> old index, and its inverse.
    let sw_order = perm(f.num_switches());
    let ep_order = perm(f.num_end_ports());
    let mut sw_new = vec![0u32; sw_order.len()];
    for (new, &old) in sw_order.iter().enumerate() {
        sw_new[old] = new as u32;
    }
    let mut ep_new = vec![0u32; ep_order.len()];
    for (new, &old) in ep_order.iter().enumerate() {
        ep_new[old] = new as u32;
    }
    let map = |end: PortEnd| match end {
        PortEnd::Switch(s, p) => PortEnd::Switch(SwitchId(sw_new[s.index()]), p),
        PortEnd::End(e) => PortEnd::End(EndPortId(ep_new[e.index()])),
    };
    let mut b = FabricBuilder::new();
    for &old in &sw_order {
        b.add_switch(f.switches()[old].clone()).expect("valid in the original");
    }
    for &old in &ep_order {
        b.add_end_port(f.end_ports()[old].clone()).expect("valid in the original");
    }
    let mut links = f.links().to_vec();
    for k in (1..links.len()).rev() {
        links.swap(k, rng.below(k + 1));
    }
    for l in links {
        b.connect_with(map(l.a), map(l.b), l.rate).expect("valid in the original");
    }
    b.build().expect("valid in the original")
}

/// The same fabric with `percent`% of its switch-to-switch cables removed
/// (rounded down), chosen by `seed`, keeping the switches connected: a fat
/// tree after cable failures, as operators run them between repairs. A
/// seeded random spanning tree of the switch cables is kept, the cables to
/// remove are drawn from the rest; so at most E - (S - 1) go.
pub fn degraded(f: &RoutingFabric, percent: u32, seed: u64) -> RoutingFabric {
    let mut rng = SplitMix64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let is_switch_cable = |l: &crate::fabric::Link| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..)));
    let mut cables: Vec<usize> = (0..f.links().len()).filter(|&i| is_switch_cable(&f.links()[i])).collect();
    for k in (1..cables.len()).rev() {
        cables.swap(k, rng.below(k + 1));
    }
    let mut parent: Vec<usize> = (0..f.num_switches()).collect();
    fn root(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut spare = Vec::new();
    for &i in &cables {
        let (PortEnd::Switch(a, _), PortEnd::Switch(b, _)) = (f.links()[i].a, f.links()[i].b) else { continue };
        let (ra, rb) = (root(&mut parent, a.index()), root(&mut parent, b.index()));
        if ra == rb {
            spare.push(i);
        } else {
            parent[ra] = rb;
        }
    }
    let cut = (cables.len() * percent as usize / 100).min(spare.len());
    without_links(f, &spare[..cut])
}

/// The same fabric without the cables `gone` names (indices into
/// [`RoutingFabric::links`]): cables unplugged.
pub fn without_links(f: &RoutingFabric, gone: &[usize]) -> RoutingFabric {
    let mut unplugged = vec![false; f.links().len()];
    for &i in gone {
        unplugged[i] = true;
    }
    let mut b = FabricBuilder::new();
    for s in f.switches() {
        b.add_switch(s.clone()).expect("valid in the original");
    }
    for e in f.end_ports() {
        b.add_end_port(e.clone()).expect("valid in the original");
    }
    for (i, l) in f.links().iter().enumerate() {
        if !unplugged[i] {
            b.connect_with(l.a, l.b, l.rate).expect("valid in the original");
        }
    }
    b.build().expect("valid in the original")
}

/// `f` with its switches' GUIDs replaced, `guids[i]` for switch i.
pub fn with_switch_guids(f: &RoutingFabric, guids: &[u64]) -> RoutingFabric {
    let mut b = FabricBuilder::new();
    for (s, &guid) in f.switches().iter().zip(guids) {
        b.add_switch(Switch { guid, ..s.clone() }).expect("distinct GUIDs");
    }
    for e in f.end_ports() {
        b.add_end_port(e.clone()).expect("valid in the original");
    }
    for l in f.links() {
        b.connect_with(l.a, l.b, l.rate).expect("valid in the original");
    }
    b.build().expect("valid in the original")
}

/// The same fabric without switch `gone`, its cables and the end ports
/// cabled to it: a switch powered off. The other switches keep their
/// order (those after `gone` move down one index) and their LIDs.
pub fn without_switch(f: &RoutingFabric, gone: SwitchId) -> RoutingFabric {
    let mut b = FabricBuilder::new();
    let mut switch = vec![None; f.num_switches()];
    for (i, s) in f.switches().iter().enumerate() {
        if i != gone.index() {
            switch[i] = Some(b.add_switch(s.clone()).expect("valid in the original"));
        }
    }
    let on_gone = |end: &PortEnd| matches!(end, PortEnd::Switch(s, _) if *s == gone);
    let mut end = vec![None; f.end_ports().len()];
    for (i, e) in f.end_ports().iter().enumerate() {
        let cabled_to_gone = f.links().iter().any(|l| {
            (l.a == PortEnd::End(EndPortId(i as u32)) && on_gone(&l.b))
                || (l.b == PortEnd::End(EndPortId(i as u32)) && on_gone(&l.a))
        });
        if !cabled_to_gone {
            end[i] = Some(b.add_end_port(e.clone()).expect("valid in the original"));
        }
    }
    let map = |p: PortEnd| match p {
        PortEnd::Switch(s, port) => switch[s.index()].map(|s| PortEnd::Switch(s, port)),
        PortEnd::End(e) => end[e.0 as usize].map(PortEnd::End),
    };
    for l in f.links() {
        if let (Some(a), Some(b2)) = (map(l.a), map(l.b)) {
            b.connect_with(a, b2, l.rate).expect("valid in the original");
        }
    }
    b.build().expect("valid in the original")
}

/// The fat trees every routing benchmark measures: 648, 3,888, 11,664 and
/// 45,056 hosts (the last is the largest radix-64 3-level tree whose LIDs
/// fit the unicast space with LMC 0).
pub fn benchmark_fat_trees() -> [(&'static str, FatTree); 4] {
    [
        ("2-level radix 36 (full)", FatTree::full(36, 2)),
        ("3-level radix 36, 12 pods", FatTree::new(36, 3, 12 * 324)),
        ("3-level radix 36 (full)", FatTree::full(36, 3)),
        ("3-level radix 64, 44 pods", FatTree::new(64, 3, 44 * 1024)),
    ]
}

/// Nanoseconds this thread has run on a CPU, if the kernel tells us.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Runs `f`, returning its result, CPU milliseconds (wall if unavailable)
/// and wall milliseconds.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let c0 = thread_cpu_ns();
    let t = std::time::Instant::now();
    let r = f();
    let wall = t.elapsed().as_secs_f64() * 1e3;
    let cpu = match (c0, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e6,
        _ => wall,
    };
    (r, cpu, wall)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fat_tree_sizes() {
        let f = FatTree::full(36, 2).build();
        assert_eq!((f.num_switches(), f.num_end_ports()), (36 + 18, 648));
        let f = FatTree::full(8, 3).build();
        // 8 pods of 4 leaves + 4 aggregation switches, 16 core switches.
        assert_eq!((f.num_switches(), f.num_end_ports()), (8 * 8 + 16, 128));
        for s in f.switch_ids() {
            let used = f.switch_ports(s).iter().filter(|p| p.is_some()).count();
            assert_eq!(used, 8, "every port of a full tree is cabled");
        }
        let f = FatTree::new(8, 3, 20).build();
        assert_eq!((f.num_switches(), f.num_end_ports()), (2 * 8 + 16, 20));
        assert_eq!(f.components().count(), 1);
        let f = FatTree::full(4, 4).build();
        assert_eq!((f.num_switches(), f.num_end_ports()), (3 * 16 + 8, 32));
        assert_eq!(f.components().count(), 1);
    }

    #[test]
    fn lids_are_hosts_first_and_consecutive_per_leaf() {
        let f = FatTree::new(8, 2, 8).build();
        let lids: Vec<u16> = f.end_ports().iter().map(|e| e.base_lid).collect();
        assert_eq!(lids, (1..=8).collect::<Vec<u16>>());
        assert_eq!(f.switches()[0].base_lid, 9);
        let f = FatTree { host_lmc: 2, ..FatTree::new(4, 2, 3) }.build();
        let lids: Vec<u16> = f.end_ports().iter().map(|e| e.base_lid).collect();
        assert_eq!(lids, vec![4, 8, 12]);
    }

    #[test]
    fn small_generators() {
        let f = spine_leaf(2, 2, 2, 2);
        assert_eq!((f.num_switches(), f.num_end_ports(), f.links().len()), (4, 4, 4 + 8));
        let f = ring(5, 1);
        assert_eq!((f.num_switches(), f.num_end_ports(), f.links().len()), (5, 5, 10));
        let f = back_to_back();
        assert_eq!((f.num_switches(), f.num_end_ports(), f.links().len()), (0, 2, 1));
        let f = single_switch(2);
        assert_eq!((f.num_switches(), f.num_end_ports()), (1, 2));
    }

    #[test]
    fn renumbering_keeps_the_fabric() {
        let f = FatTree::new(8, 3, 40).build();
        let g = renumbered(&f, 3);
        assert_eq!(
            (g.num_switches(), g.num_end_ports(), g.links().len()),
            (f.num_switches(), f.num_end_ports(), f.links().len())
        );
        assert_ne!(f.switches(), g.switches(), "order changed");
        for lid in 1..=f.max_lid() {
            let (a, b) = (f.lid_owner(lid), g.lid_owner(lid));
            assert_eq!(a.map(|n| f.guid_of(n)), b.map(|n| g.guid_of(n)), "LID {lid}");
        }
        let degree = |x: &RoutingFabric| {
            let mut d: Vec<(u64, usize)> =
                x.switch_ids().map(|s| (x.switch(s).guid, x.switch_neighbors(s).len())).collect();
            d.sort();
            d
        };
        assert_eq!(degree(&f), degree(&g));
    }

    #[test]
    fn random_is_seeded_and_connected() {
        let spec = RandomSpec { switches: 12, extra_links: 10, max_hosts_per_switch: 3, max_lmc: 2 };
        for seed in 0..50 {
            let f = random_connected(seed, spec);
            assert_eq!(f.components().count(), 1, "seed {seed}");
            assert!(f.num_end_ports() >= 2);
            let again = random_connected(seed, spec);
            assert_eq!(f.switches(), again.switches());
            assert_eq!(f.links(), again.links());
        }
    }
}
