//! Builds the fabrics a `GeneratorSpec` names. Deterministic: the same spec
//! gives the same model, node order, port numbers and GUIDs (ibsim's default
//! counters in node order, see `guids`), so writing the model out gives a
//! file ibsim loads with exactly these GUIDs.
//!
//! Node order is switches first (as ibnetdiscover lists them), then hosts.
//! Hosts are single-port CAs. Port layouts, per shape:
//! - fattree2: leaf `leaf{l}` ports 1..=hosts to `leaf{l}-h{i}`, then for spine
//!   s and parallel link j port hosts + s*parallel + j + 1; spine `spine{s}`
//!   port l*parallel + j + 1 to leaf l.
//! - fattree3: `p{p}-leaf{l}` ports 1..=hosts to hosts, hosts + s + 1 to
//!   `p{p}-spine{s}`; spine port l + 1 to leaf l, leaves + u + 1 to
//!   `core{s}-{u}`; core port p + 1 to pod p's spine s.
//! - mesh/torus: `sw{x}-{y}[-{z}]` ports 1..=hosts to hosts, then per
//!   dimension d port hosts + 2d + 1 towards -1 and hosts + 2d + 2 towards +1.
//!   Torus wrap links close each ring; a ring of 2 gets two parallel links, a
//!   ring of 1 none.
//! - dragonfly: `g{g}r{r}` ports 1..=hosts to hosts, then one port per other
//!   router of the group (in router order), then `global` ports. Global port
//!   slot t = r*global + k of group g goes to group g + 1 + (t mod (G-1)), whose
//!   matching slot is (t div (G-1))*(G-1) + G-2-(t mod (G-1)); slots without a
//!   partner stay uncabled.
//! - random: a random spanning tree, then random extra switch links (parallel
//!   links allowed, no self-links), then hosts on random switches; ports
//!   numbered in cabling order; ChaCha8 seeded by `seed`.
//! - b2b: `h0` port 1 to `h1` port 1.
//!
//! A `cut` then removes floor(E * percent / 100) of the E switch-to-switch
//! cables (hosts' cables never): ChaCha8 seeded by `cutseed` shuffles them, a
//! spanning forest is kept (Kruskal over the shuffled order), and the first
//! of the others in that order go, at most all of them. The switches stay as
//! connected as they were; the ports of a removed cable are left uncabled,
//! with every other port number and the GUIDs as in the intact fabric.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::spec::{Cut, GeneratorSpec, Shape};
use super::{assign_ibsim_guids, Node, NodeIdx, NodeKind, PortRef, SpecError, Topology, TopologyError};
use crate::types::{Guid, MAX_PORTS};

impl GeneratorSpec {
    /// Builds the fabric; it passes `validate`.
    pub fn generate(&self) -> Result<Topology, TopologyError> {
        let mut b = Builder { topo: Topology::default(), width: self.width, speed: self.speed };
        match &self.shape {
            Shape::FatTree2 { radix, hosts, spines, leaves, parallel } => {
                b.fattree2(*radix, *hosts, *spines, *leaves, *parallel)
            }
            Shape::FatTree3 { radix, pods, hosts, leaves, spines, uplinks } => {
                b.fattree3(*radix, *pods, *hosts, *leaves, *spines, *uplinks)
            }
            Shape::Grid { dims, torus, hosts, radix } => b.grid(dims, *torus, *hosts, *radix),
            Shape::Dragonfly { groups, routers, hosts, global } => b.dragonfly(*groups, *routers, *hosts, *global),
            Shape::Random { switches, links, hosts, seed, radix } => {
                b.random(*switches, *links, *hosts, *seed, *radix)?
            }
            Shape::BackToBack => {
                let a = b.node(NodeKind::Ca, "h0".into(), 1);
                let c = b.node(NodeKind::Ca, "h1".into(), 1);
                b.link(a, 1, c, 1);
            }
        }
        let mut topo = b.topo;
        if let Some(cut) = self.cut {
            cut_cables(&mut topo, cut);
        }
        assign_ibsim_guids(&mut topo);
        topo.validate()?;
        Ok(topo)
    }
}

/// Removes the cables `cut` names (see the module doc). O(links log nodes).
fn cut_cables(topo: &mut Topology, cut: Cut) {
    let is_switch = |p: PortRef| topo.nodes[p.node.0].kind == NodeKind::Switch;
    let mut between: Vec<usize> =
        (0..topo.links.len()).filter(|&i| is_switch(topo.links[i].a) && is_switch(topo.links[i].b)).collect();
    let want = between.len() * cut.percent as usize / 100;
    if want == 0 {
        return;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(cut.seed);
    between.shuffle(&mut rng);
    // A cable joining two switches already joined by the kept forest is
    // spare: removing spares never disconnects anything.
    let mut forest = Forest::new(topo.nodes.len());
    let spare = between.into_iter().filter(|&i| !forest.union(topo.links[i].a.node.0, topo.links[i].b.node.0));
    let mut gone = vec![false; topo.links.len()];
    for i in spare.take(want) {
        gone[i] = true;
    }
    let mut i = 0;
    topo.links.retain(|_| {
        i += 1;
        !gone[i - 1]
    });
}

/// Union-find with path halving, for `cut_cables`'s spanning forest.
struct Forest(Vec<usize>);

impl Forest {
    fn new(n: usize) -> Forest {
        Forest((0..n).collect())
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    /// Joins the sets of `a` and `b`; false when they were one already.
    fn union(&mut self, a: usize, b: usize) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        self.0[ra] = rb;
        true
    }
}

struct Builder {
    topo: Topology,
    width: u8,
    speed: u8,
}

impl Builder {
    fn node(&mut self, kind: NodeKind, name: String, ports: u8) -> NodeIdx {
        self.topo.add_node(Node::new(kind, name, ports, Guid(0)))
    }

    fn link(&mut self, a: NodeIdx, ap: u8, b: NodeIdx, bp: u8) {
        let (w, s) = (self.width, self.speed);
        self.topo.connect(PortRef { node: a, port: ap }, PortRef { node: b, port: bp }, w, s);
    }

    /// `hosts` single-port CAs on ports 1..=hosts of each switch in `switches`.
    fn hosts_on(&mut self, switches: &[NodeIdx], hosts: u8) {
        for &sw in switches {
            for i in 0..hosts {
                let name = format!("{}-h{i}", self.topo.nodes[sw.0].name);
                let h = self.node(NodeKind::Ca, name, 1);
                self.link(sw, i + 1, h, 1);
            }
        }
    }

    fn fattree2(&mut self, radix: u8, hosts: u8, spines: u32, leaves: u32, parallel: u8) {
        let leaf: Vec<_> = (0..leaves).map(|l| self.node(NodeKind::Switch, format!("leaf{l}"), radix)).collect();
        let spine: Vec<_> = (0..spines).map(|s| self.node(NodeKind::Switch, format!("spine{s}"), radix)).collect();
        for (l, &lf) in leaf.iter().enumerate() {
            for (s, &sp) in spine.iter().enumerate() {
                for j in 0..parallel as usize {
                    let lp = hosts as usize + s * parallel as usize + j + 1;
                    let sp_port = l * parallel as usize + j + 1;
                    self.link(lf, lp as u8, sp, sp_port as u8);
                }
            }
        }
        self.hosts_on(&leaf, hosts);
    }

    fn fattree3(&mut self, radix: u8, pods: u32, hosts: u8, leaves: u32, spines: u32, uplinks: u32) {
        let mut all_leaves = Vec::new();
        let mut pod_spines = Vec::new();
        for p in 0..pods {
            let leaf: Vec<_> =
                (0..leaves).map(|l| self.node(NodeKind::Switch, format!("p{p}-leaf{l}"), radix)).collect();
            let spine: Vec<_> =
                (0..spines).map(|s| self.node(NodeKind::Switch, format!("p{p}-spine{s}"), radix)).collect();
            for (l, &lf) in leaf.iter().enumerate() {
                for (s, &sp) in spine.iter().enumerate() {
                    self.link(lf, hosts + s as u8 + 1, sp, l as u8 + 1);
                }
            }
            all_leaves.extend(leaf);
            pod_spines.push(spine);
        }
        for s in 0..spines as usize {
            for u in 0..uplinks {
                let core = self.node(NodeKind::Switch, format!("core{s}-{u}"), radix);
                for (p, spine) in pod_spines.iter().enumerate() {
                    self.link(spine[s], (leaves + u + 1) as u8, core, p as u8 + 1);
                }
            }
        }
        self.hosts_on(&all_leaves, hosts);
    }

    fn grid(&mut self, dims: &[u32], torus: bool, hosts: u8, radix: u8) {
        let total: usize = dims.iter().map(|&d| d as usize).product();
        let coords = |mut i: usize| -> Vec<usize> {
            dims.iter()
                .map(|&d| {
                    let c = i % d as usize;
                    i /= d as usize;
                    c
                })
                .collect()
        };
        let index = |c: &[usize]| -> usize { c.iter().zip(dims).rev().fold(0, |acc, (&x, &d)| acc * d as usize + x) };
        let sw: Vec<_> = (0..total)
            .map(|i| {
                let c: Vec<String> = coords(i).iter().map(usize::to_string).collect();
                self.node(NodeKind::Switch, format!("sw{}", c.join("-")), radix)
            })
            .collect();
        for (i, &from) in sw.iter().enumerate() {
            let c = coords(i);
            for (d, &size) in dims.iter().enumerate() {
                let size = size as usize;
                let minus = hosts + 2 * d as u8 + 1;
                let plus = minus + 1;
                let next = if c[d] + 1 < size {
                    Some(c[d] + 1)
                } else if torus && size > 1 {
                    Some(0)
                } else {
                    None
                };
                if let Some(n) = next {
                    let mut nc = c.clone();
                    nc[d] = n;
                    self.link(from, plus, sw[index(&nc)], minus);
                }
            }
        }
        self.hosts_on(&sw, hosts);
    }

    fn dragonfly(&mut self, groups: u32, routers: u32, hosts: u8, global: u8) {
        let a = routers as usize;
        let h = global as usize;
        let g_count = groups as usize;
        let ports = hosts as usize + a - 1 + h;
        let mut r_idx = Vec::with_capacity(g_count);
        for g in 0..g_count {
            let group: Vec<_> = (0..a).map(|r| self.node(NodeKind::Switch, format!("g{g}r{r}"), ports as u8)).collect();
            // Local all-to-all: router r reaches router q through the
            // (q, skipping itself)-th local port.
            let local = |from: usize, to: usize| (hosts as usize + 1 + if to < from { to } else { to - 1 }) as u8;
            for r in 0..a {
                for q in r + 1..a {
                    self.link(group[r], local(r, q), group[q], local(q, r));
                }
            }
            r_idx.push(group);
        }
        if g_count > 1 {
            let slots = a * h;
            let m = g_count - 1;
            let port_of = |t: usize| (t / h, (hosts as usize + a - 1 + t % h + 1) as u8);
            for g in 0..g_count {
                for t in 0..slots {
                    let (round, o) = (t / m, t % m);
                    let peer_group = (g + 1 + o) % g_count;
                    let peer_slot = round * m + (m - 1 - o);
                    if g < peer_group && peer_slot < slots {
                        let (r, p) = port_of(t);
                        let (pr, pp) = port_of(peer_slot);
                        self.link(r_idx[g][r], p, r_idx[peer_group][pr], pp);
                    }
                }
            }
        }
        let all: Vec<_> = r_idx.into_iter().flatten().collect();
        self.hosts_on(&all, hosts);
    }

    fn random(
        &mut self,
        switches: u32,
        links: u32,
        hosts: u32,
        seed: u64,
        radix: Option<u8>,
    ) -> Result<(), TopologyError> {
        let infeasible = |reason: String| TopologyError::Spec(SpecError::Infeasible { kind: "random", reason });
        let n = switches as usize;
        let cap = radix.unwrap_or(MAX_PORTS) as usize;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut used = vec![0usize; n];
        // Switches that still have a free port.
        let mut free: Vec<usize> = Vec::with_capacity(n);
        let mut cables: Vec<(usize, usize)> = Vec::with_capacity(links as usize);
        let take = |used: &mut Vec<usize>, free: &mut Vec<usize>, s: usize| {
            used[s] += 1;
            if used[s] == cap {
                if let Some(pos) = free.iter().position(|&f| f == s) {
                    free.swap_remove(pos);
                }
            }
        };
        if n > 0 {
            free.push(0);
        }
        for i in 1..n {
            // Connect switch i to one of the switches already in the tree.
            if free.is_empty() {
                return Err(infeasible(format!("radix {cap} cannot hold a spanning tree of {n} switches")));
            }
            let j = free[rng.gen_range(0..free.len())];
            free.push(i);
            take(&mut used, &mut free, j);
            take(&mut used, &mut free, i);
            cables.push((j, i));
        }
        for _ in n.saturating_sub(1)..links as usize {
            if free.len() < 2 {
                return Err(infeasible(format!("no two switches with free ports left for {links} links")));
            }
            let a = rng.gen_range(0..free.len());
            let mut b = rng.gen_range(0..free.len() - 1);
            if b >= a {
                b += 1;
            }
            let (sa, sb) = (free[a], free[b]);
            take(&mut used, &mut free, sa);
            take(&mut used, &mut free, sb);
            cables.push((sa, sb));
        }
        let mut host_sw = Vec::with_capacity(hosts as usize);
        for _ in 0..hosts {
            if free.is_empty() {
                return Err(infeasible(format!("no free switch ports left for {hosts} hosts")));
            }
            let s = free[rng.gen_range(0..free.len())];
            take(&mut used, &mut free, s);
            host_sw.push(s);
        }
        let ports: Vec<u8> = used.iter().map(|&u| radix.unwrap_or(u.max(1) as u8)).collect();
        let sw: Vec<_> = (0..n).map(|i| self.node(NodeKind::Switch, format!("sw{i}"), ports[i])).collect();
        let mut next = vec![1u8; n];
        let mut port = |s: usize| {
            let p = next[s];
            next[s] += 1;
            p
        };
        for (a, b) in cables {
            let (pa, pb) = (port(a), port(b));
            self.link(sw[a], pa, sw[b], pb);
        }
        let mut per_switch = vec![0u32; n];
        for s in host_sw {
            let name = format!("sw{s}-h{}", per_switch[s]);
            per_switch[s] += 1;
            let h = self.node(NodeKind::Ca, name, 1);
            let p = port(s);
            self.link(sw[s], p, h, 1);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologyIndex;

    fn gen(s: &str) -> Topology {
        let spec: GeneratorSpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
        spec.generate().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Every node reachable from node 0 over cables.
    fn connected(t: &Topology) -> bool {
        let ix = t.index();
        let mut seen = vec![false; t.nodes.len()];
        let mut stack = vec![NodeIdx(0)];
        seen[0] = true;
        while let Some(n) = stack.pop() {
            for (_, far) in ix.cabled_ports(n) {
                if !seen[far.node.0] {
                    seen[far.node.0] = true;
                    stack.push(far.node);
                }
            }
        }
        seen.iter().all(|&s| s)
    }

    fn degree(ix: &TopologyIndex, n: NodeIdx) -> usize {
        ix.cabled_ports(n).count()
    }

    #[test]
    fn fattree2_shape() {
        let t = gen("fattree2:radix=8,leaves=4,spines=2,hosts=4");
        assert_eq!(t.switches().count(), 6);
        assert_eq!(t.hosts().count(), 16);
        assert_eq!(t.links.len(), 16 + 4 * 2);
        assert!(connected(&t));
        let ix = t.index();
        let leaf0 = ix.node_by_name("leaf0").unwrap();
        let spine1 = ix.node_by_name("spine1").unwrap();
        assert_eq!(ix.neighbor(PortRef { node: leaf0, port: 6 }), Some(PortRef { node: spine1, port: 1 }));
        assert_eq!(
            ix.neighbor(PortRef { node: leaf0, port: 1 }).map(|p| t.node(p.node).name.as_str()),
            Some("leaf0-h0")
        );
        // GUIDs follow ibsim's counters in node order: switches then hosts.
        assert_eq!(t.nodes[0].node_guid, Guid(0x200000));
        assert_eq!(t.nodes[5].node_guid, Guid(0x200005));
        assert_eq!(t.nodes[6].node_guid, Guid(0x100000));
        assert_eq!(t.nodes[7].node_guid, Guid(0x100002));
        let big = gen("fattree2:radix=36");
        assert_eq!(big.hosts().count(), 648);
        assert!(connected(&big));
    }

    #[test]
    fn fattree2_parallel_links() {
        let t = gen("fattree2:radix=8,leaves=2,spines=2,hosts=4,parallel=2");
        let ix = t.index();
        let s0 = ix.node_by_name("spine0").unwrap();
        assert_eq!(degree(&ix, s0), 4);
        let l1 = ix.node_by_name("leaf1").unwrap();
        assert_eq!(ix.neighbor(PortRef { node: l1, port: 6 }), Some(PortRef { node: s0, port: 4 }));
    }

    #[test]
    fn fattree3_shape() {
        let t = gen("fattree3:radix=8,pods=3");
        // Per pod 4 leaves + 4 spines, cores 4*4 = 16.
        assert_eq!(t.switches().count(), 3 * 8 + 16);
        assert_eq!(t.hosts().count(), 3 * 4 * 4);
        assert!(connected(&t));
        let ix = t.index();
        let core = ix.node_by_name("core2-3").unwrap();
        assert_eq!(degree(&ix, core), 3);
        let far = ix.neighbor(PortRef { node: core, port: 2 }).unwrap();
        assert_eq!(t.node(far.node).name, "p1-spine2");
        assert_eq!(far.port, 4 + 3 + 1);
        let big = gen("fattree3:radix=36,pods=12");
        assert_eq!(big.hosts().count(), 3888);
    }

    #[test]
    fn grid_shapes() {
        let m = gen("mesh2d:4x3");
        assert_eq!(m.switches().count(), 12);
        // 3 links per row * 3 rows + 4 columns * 2 links.
        assert_eq!(m.links.len() - 12, 3 * 3 + 4 * 2);
        assert!(connected(&m));
        let t = gen("torus3d:4x4x4,hosts=2");
        assert_eq!(t.switches().count(), 64);
        assert_eq!(t.hosts().count(), 128);
        assert_eq!(t.links.len() - 128, 64 * 3);
        let ix = t.index();
        let corner = ix.node_by_name("sw3-0-0").unwrap();
        let wrap = ix.neighbor(PortRef { node: corner, port: 2 + 2 }).unwrap();
        assert_eq!((t.node(wrap.node).name.as_str(), wrap.port), ("sw0-0-0", 3));
        assert!(t.switches().all(|s| degree(&ix, s) == 8));
        // A ring of 2 gets two parallel links, a ring of 1 none.
        let r = gen("torus2d:2x1,hosts=0");
        assert_eq!(r.links.len(), 2);
    }

    #[test]
    fn dragonfly_shape() {
        let t = gen("dragonfly:groups=5,routers=4,hosts=2,global=1");
        assert_eq!(t.switches().count(), 20);
        assert_eq!(t.hosts().count(), 40);
        // Local: 5 groups * C(4,2); global: each of the C(5,2) group pairs once.
        assert_eq!(t.links.len() - 40, 5 * 6 + 10);
        assert!(connected(&t));
        let ix = t.index();
        // Every group pair is joined exactly once.
        let group = |n: NodeIdx| t.node(n).name[1..].split('r').next().unwrap().parse::<usize>().unwrap();
        let mut pairs = std::collections::BTreeSet::new();
        for l in &t.links {
            let (a, b) = (l.a.node, l.b.node);
            if t.node(a).kind == NodeKind::Switch && t.node(b).kind == NodeKind::Switch && group(a) != group(b) {
                assert!(pairs.insert((group(a).min(group(b)), group(a).max(group(b)))));
            }
        }
        assert_eq!(pairs.len(), 10);
        assert!(t.switches().all(|s| degree(&ix, s) == 2 + 3 + 1));
        // More global ports than groups: every pair twice.
        let d = gen("dragonfly:groups=3,routers=2,hosts=1,global=2");
        assert_eq!(d.links.len() - 6, 3 + 3 * 2);
    }

    #[test]
    fn random_is_seeded_connected_and_exact() {
        let a = gen("random:switches=20,links=40,hosts=30,seed=7");
        let b = gen("random:switches=20,links=40,hosts=30,seed=7");
        let c = gen("random:switches=20,links=40,hosts=30,seed=8");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.switches().count(), 20);
        assert_eq!(a.hosts().count(), 30);
        assert_eq!(a.links.len(), 40 + 30);
        assert!(connected(&a));
        let r = gen("random:switches=10,links=20,hosts=10,seed=3,radix=6");
        assert!(r.switches().all(|s| r.node(s).num_ports == 6));
        assert!(connected(&r));
    }

    #[test]
    fn b2b_shape() {
        let t = gen("b2b");
        assert_eq!(t.nodes.len(), 2);
        assert_eq!(t.links.len(), 1);
        assert_eq!((t.nodes[0].node_guid, t.nodes[1].node_guid), (Guid(0x100000), Guid(0x100002)));
    }

    /// The switch-to-switch cables, as sorted (port, port) pairs.
    fn switch_cables(t: &Topology) -> Vec<(PortRef, PortRef)> {
        let sw = |p: PortRef| t.node(p.node).kind == NodeKind::Switch;
        let mut c: Vec<_> =
            t.links.iter().filter(|l| sw(l.a) && sw(l.b)).map(|l| (l.a.min(l.b), l.a.max(l.b))).collect();
        c.sort();
        c
    }

    /// Every switch reachable from the first over switch-to-switch cables.
    fn switches_connected(t: &Topology) -> bool {
        let ix = t.index();
        let switches: Vec<_> = t.switches().collect();
        let mut seen = vec![false; t.nodes.len()];
        let mut queue = std::collections::VecDeque::from([switches[0]]);
        seen[switches[0].0] = true;
        while let Some(n) = queue.pop_front() {
            for (_, far) in ix.cabled_ports(n) {
                if t.node(far.node).kind == NodeKind::Switch && !seen[far.node.0] {
                    seen[far.node.0] = true;
                    queue.push_back(far.node);
                }
            }
        }
        switches.iter().all(|s| seen[s.0])
    }

    #[test]
    fn cut_zero_is_the_intact_fabric() {
        assert_eq!(gen("fattree2:radix=8,cut=0,cutseed=5"), gen("fattree2:radix=8"));
        assert_eq!(gen("torus2d:4x4,cut=0"), gen("torus2d:4x4"));
    }

    #[test]
    fn cut_removes_the_share_and_keeps_switches_connected() {
        let full = gen("fattree2:radix=8");
        let before = switch_cables(&full);
        // 8 leaves x 4 spines.
        assert_eq!(before.len(), 32);
        let a = gen("fattree2:radix=8,cut=15,cutseed=1");
        let after = switch_cables(&a);
        assert_eq!(after.len(), before.len() - before.len() * 15 / 100);
        assert_eq!(before.len() - after.len(), 4);
        // Only switch cables go, and only by removal: what is left was there.
        assert_eq!(a.links.len(), full.links.len() - 4);
        assert!(after.iter().all(|c| before.contains(c)));
        assert_eq!(a.hosts().count(), full.hosts().count());
        assert_eq!(a.nodes, full.nodes);
        assert!(switches_connected(&a));
        assert!(connected(&a));

        // Seeded: the same seed removes the same cables, another seed others.
        assert_eq!(gen("fattree2:radix=8,cut=15,cutseed=1"), a);
        let b = gen("fattree2:radix=8,cut=15,cutseed=2");
        assert_eq!(switch_cables(&b).len(), after.len());
        assert_ne!(switch_cables(&b), after);

        // The fabric: 36 leaves x 18 spines, 15% cut.
        let big_full = switch_cables(&gen("fattree2:radix=36"));
        let big = gen("fattree2:radix=36,cut=15,cutseed=2");
        assert_eq!(big_full.len(), 648);
        assert_eq!(switch_cables(&big).len(), 648 - 97);
        assert!(switches_connected(&big));
        assert_eq!(big.hosts().count(), 648);
    }

    #[test]
    fn cut_never_disconnects() {
        // 90% of a ring-heavy torus's cables is more than its spare cables:
        // the cut stops at the spanning tree.
        let full = gen("torus2d:4x4,hosts=1");
        let e = switch_cables(&full).len();
        assert_eq!(e, 32);
        let t = gen("torus2d:4x4,hosts=1,cut=90,cutseed=3");
        // 16 switches: a spanning tree has 15 cables, and 90% of 32 is 28.
        assert_eq!(switch_cables(&t).len(), 15);
        assert!(switches_connected(&t));
        assert!(connected(&t));
        for s in ["fattree3:radix=8,pods=3", "dragonfly:routers=4,global=1", "random:switches=20,seed=4"] {
            for seed in 1..6 {
                let t = gen(&format!("{s},cut=30,cutseed={seed}"));
                let e = switch_cables(&gen(s)).len();
                assert_eq!(switch_cables(&t).len(), e - e * 30 / 100, "{s} cutseed={seed}");
                assert!(switches_connected(&t), "{s} cutseed={seed}");
            }
        }
        // No switch cables to cut.
        assert_eq!(gen("b2b:cut=50"), gen("b2b"));
    }

    #[test]
    fn generation_is_deterministic() {
        for s in ["fattree3:radix=6,pods=2", "torus2d:3x3,hosts=2", "dragonfly:routers=3,global=1", "random:switches=7"]
        {
            assert_eq!(gen(s), gen(s), "{s}");
        }
    }
}
