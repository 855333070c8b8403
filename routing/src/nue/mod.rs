//! Nue: deadlock-free routing on any topology within a given number of
//! virtual lanes, one included (Domke, Hoefler and Matsuoka, "Routing on
//! the Dependency Graph: A New Approach to Deadlock-Free High-Performance
//! Routing", HPDC 2016).
//!
//! ## Idea
//! Destinations are split into `k` virtual layers (`k` = the VLs allowed);
//! a path's SL is its destination's layer. Each layer keeps its own
//! *complete* channel dependency graph: a vertex per directed
//! switch-to-switch cable, an edge for every pair of cables a path could
//! take in a row through a switch (no U-turns). An edge is *unused*, *used*
//! (some routed path takes that turn) or *blocked* (using it would close a
//! cycle among the used ones). Routing a destination is a Dijkstra search
//! outward from it in which a switch may only be reached over a cable whose
//! dependency on the next cable is used already or can be added without a
//! cycle; the used edges of a layer therefore stay acyclic, which is exactly
//! deadlock freedom (Dally and Seitz) for that VL.
//!
//! ## Impasses: backtracking, then escape paths
//! The greedy search can strand switches: every way in would close a cycle.
//! First, as in OpenSM's Nue, local backtracking: a settled neighbour v of a
//! stranded switch x may switch to another cable towards a settled switch
//! (whose route avoids v) if the turns onto that cable are admissible for v,
//! for every switch already routed through v, and for x; then x joins and
//! the search goes on.
//!
//! Second, escape paths. Before a layer is routed, a spanning tree is rooted
//! at the switch most central to the layer's destination switches, and the
//! dependencies that tree routing to those switches needs (up-up turns,
//! up-down turns towards each destination switch, down-down) are marked
//! used. They contain no down-to-up turn, so they are acyclic, and they
//! never become blocked. When backtracking fails, OpenSM's Nue throws the
//! whole search away and routes the destination along the tree. Here the
//! fallback is partial: stranded switches take their escape cable; a switch
//! that takes an escape cable into a switch y keeps going along the tree
//! unless the turn onto y's current route is admissible (then it joins y's
//! route); a switch whose route enters a switch that changed re-checks its
//! one turn and, if that fails, takes its escape cable too. Should joining
//! close a forwarding loop, the joins are undone by moving the joined
//! switches' successors onto the tree as well, down to the plain closure
//! (every switch on a used escape path on its escape cable), which is
//! loop-free and has all its turns marked used. So every end-port
//! destination is always routed, and every layer stays acyclic.
//!
//! ## Cycle checks
//! Instead of Nue's coloured acyclic subgraphs plus a depth-first search,
//! each layer keeps a topological order of its used dependency graph,
//! maintained with Pearce and Kelly's dynamic algorithm ("A dynamic
//! topological sort algorithm for directed acyclic graphs", JEA 2007): an
//! edge that agrees with the order is accepted in O(1); otherwise only the
//! channels between its endpoints in the order are searched and reordered.
//! The order starts as an up*/down* order of the escape tree, which every
//! escape dependency agrees with. Removing an edge (a search replacing a
//! switch's tentative route) keeps the order valid.
//!
//! ## Balance and path length
//! A channel's load is the number of (end port, destination LID) routes
//! already on it. Search keys are hops first (2^48 per hop, more than any
//! sum of loads), then the load summed over the route: a search prefers
//! fewer hops and lighter cables among equally short routes, and leaves
//! the shortest paths only when the dependency graph forces it. Among equal
//! keys the first route found stays (preferring turns already in use, to
//! keep the graph sparse, skewed the balance on fat trees). Each LID of an
//! LMC range is routed on its own, after the previous LID's load was added.
//!
//! That load is earlier destinations' only, and the routes to one LID all
//! meet at its switch: a search blind to its own traffic sends it all the
//! same way. On the bench's cut 2-level radix-8 tree every leaf reached a
//! LID of leaf7 over the same spine, 52 routes on the busiest cable where
//! OpenSM's Nue has 48. So the search counts, per channel, the end ports of
//! the current destination's settled switches routed over it (*pending*
//! traffic), and just before a switch settles it re-picks its route among
//! the settled neighbours as few hops away with an admissible turn
//! (`rechoose`): least loaded busiest channel (pending traffic and the
//! switch's own end ports counted), then least summed load, then the route
//! it had. It does so only when its route's busiest channel would exceed
//! the *load floor*, a lower bound of the final maximum (a switch's end
//! ports send to every LID elsewhere, and receive from every end port
//! elsewhere for each of their own LIDs, over that switch's cables): below
//! it spreading buys nothing, and on full fat trees the first-found routes
//! tile the cables exactly (the busiest at the floor) where spread ones miss
//! by a bundle (648 instead of 630 on the 2-level radix-36 tree).
//!
//! Greedy routing amplifies every choice: the turns a route adds decide
//! which ones later destinations may take. On several tori and meshes with
//! few layers the re-picking routing came out worse than the plain one
//! (8x8x8 torus with 1 VL: 130,492 routes on the busiest cable instead of
//! 116,612; 5x5x5 mesh with 8: 1,206 instead of 860). So when it leaves the
//! busiest channel above the floor the plain routing (no re-picking) is
//! computed as well, and the one with the lighter busiest channel (then
//! fewer channels at that load) is kept: never worse than the plain one,
//! at up to twice the time. Fabrics that reach the floor (full fat trees)
//! are routed once.
//!
//! All-to-all routes on the busiest switch-to-switch cable, plain -> kept,
//! on the fabrics of bench/routing.py with OpenSM's LIDs and 8 VLs (OpenSM
//! 3.3.23's Nue in brackets): `fattree2:radix=8` 28 -> 28 (40), with 3
//! cables cut 52 -> 40 (48; 40 is optimal for destination routing, see
//! tests/nue_balance.rs), `fattree2:radix=16` 120 -> 120 (176),
//! `fattree3:radix=8,pods=4` 60 -> 60 (88), with 4 cables cut 100 -> 84
//! (96; floor 80), `torus3d:4x4x4,hosts=2` 182 -> 142 (184), `mesh2d:6x6`
//! 68 -> 59 (74), `dragonfly:routers=4,hosts=2` 74 -> 66 (74), the random
//! 24-switch fabric 145 -> 145 (160), the 32-switch one 348 -> 348 (348).
//! `nue_bench`: 8x8x8 torus with 8 VLs 37,612 -> 34,812 (0.57 -> 1.2 s),
//! 16x16 mesh 26,968 -> 24,372 (8 VLs), 23,860 -> 18,540 (1 VL); the
//! 11,664-host fat tree stays at the ideal 11,646 in 3.4 s, as before.
//!
//! ## Switch LIDs
//! Deadlock freedom is guaranteed for all traffic to end ports, from every
//! switch (every switch counts as a source: a route's every turn is in its
//! layer's graph). Traffic to switch LIDs is management traffic; OpenSM's
//! Nue leaves it out of the layers by default (`nue_include_switches`), and
//! reserving escape paths for every switch puts down-up turns into each
//! layer of a fat tree that cost it its balance (edge forwarding index 460
//! instead of 124 on the 3-level radix-8 tree). So here:
//! - a switch with end ports routes its own LIDs exactly like its first
//!   end-port LID (same in-tree, same layer: no new turn, fully layered);
//! - a switch without end ports is routed last in its layer by the same
//!   search, but each cycle check may visit only `SWITCH_LID_BUDGET`
//!   channels (a turn left undecided is blocked for the rest of the layer,
//!   so each turn is searched once) and there is no backtracking; switches
//!   that stay stranded take a shortest path outside the graph, counted in
//!   [`NueStats::unlayered`] (0 on tori, meshes and rings with end ports on
//!   every switch). On the 3-level radix-36 fat trees about a tenth of the
//!   routes to aggregation and core switches stay unlayered (46,010 of
//!   408,240 with 3,888 hosts; 139,985 of 1,574,640 with 11,664); with no
//!   budget at all (turns agreeing with the order only) it was 54-64%, and
//!   unbounded checks took 4 of the 4.6 s the 3,888-host tree then needed.
//!
//! ## Other choices
//! - Layers: the destination LIDs grouped by switch in breadth-first order
//!   from the lowest-GUID switch, cut into `k` runs of equal length, so a
//!   layer's destinations lie close together (Nue uses METIS or round
//!   robin).
//! - Switches are numbered by GUID internally, so the routes depend on
//!   GUIDs and cabling, not on discovery order.
//!
//! ## Cost
//! C channels, S switches, L destination LIDs, D = Σ over switches of the
//! switch-to-switch degree squared (the complete dependency graph): memory
//! O(D + C) per layer, reused, plus the tables; time O(L·(C + S log S)) for
//! the searches, plus the cycle checks, which are O(1) for most edges and
//! bounded by the affected part of the order otherwise. Re-picking walks
//! the candidate routes: O(S·Δ·H) per LID for degree Δ and H hops, paid only
//! where routes exceed the load floor; and some fabrics are routed twice.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::error::RoutingError;
use crate::fabric::{PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Lft, PathSl, Routes};
use crate::options::EngineOptions;

const ENGINE: &str = "nue";
const NONE: u32 = u32::MAX;
const NO_EDGE: usize = usize::MAX;
/// Data VLs (VL15 is management only; IBA 7.6.2).
const MAX_LAYERS: u8 = 15;

// Dependency edge states.
const UNUSED: u8 = 0;
/// Used by a routed destination (or an escape path).
const USED: u8 = 1;
/// Used tentatively by the search for the current destination.
const WET: u8 = 2;
const BLOCKED: u8 = 3;

/// Channels one cycle check may visit for a switch-LID route before the
/// turn is given up on (end-port routes always search to the end).
const SWITCH_LID_BUDGET: usize = 64;

/// A search key: hops in the top 16 bits, the load summed over the route
/// below, so fewer hops always win and load breaks ties. Loads stay below
/// 2^32 ((end port, LID) pairs) and routes below 2^16 hops, so the sum
/// never reaches the hop bits.
type Key = u64;
const HOP: Key = 1 << 48;
const FAR: Key = u64::MAX;

fn hops(k: Key) -> u64 {
    k >> 48
}

/// Counters describing one run, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NueStats {
    /// Virtual layers used (SLs 0..layers).
    pub layers: u8,
    /// Destination LIDs routed.
    pub destinations: u64,
    /// Destinations whose search stranded switches even after backtracking.
    pub impasses: u64,
    /// Switch routes moved onto escape paths, summed over destinations.
    pub escaped_switches: u64,
    /// Routes to switch LIDs that could not be placed in the dependency
    /// graph and took a shortest path regardless (not deadlock free).
    pub unlayered: u64,
    /// Stranded switches attached by rerouting a neighbour (Nue's local
    /// backtracking).
    pub backtracks: u64,
    /// Dependencies found to close a cycle and blocked.
    pub blocked: u64,
    /// Dependencies added against the current topological order (each
    /// needed a search and a local reorder).
    pub reorders: u64,
    /// Switch routes re-picked before settling because the destination's
    /// own traffic had loaded the first choice ([`NueStats::pending_aware`]
    /// routing only).
    pub rechosen: u64,
    /// Routings computed (1, or 2 when the pending-aware one left the
    /// busiest channel above the load floor and the plain one was tried).
    pub routings: u8,
    /// Whether the tables are the pending-aware routing's (else the plain
    /// one did better).
    pub pending_aware: bool,
}

/// The switch graph with directed channels and the complete dependency
/// graph's index space.
struct Net {
    /// Internal index (GUID order) -> fabric switch.
    order: Vec<SwitchId>,
    /// Out-channels of switch v: `ch_base[v]..ch_base[v + 1]`, port order.
    ch_base: Vec<u32>,
    ch_tail: Vec<u32>,
    ch_head: Vec<u32>,
    ch_port: Vec<u8>,
    ch_rev: Vec<u32>,
    /// Dependencies through switch v: `dep_base[v] + k * deg + j` is "in
    /// over the cable of out-channel k, out over out-channel j".
    dep_base: Vec<usize>,
    /// End ports attached to each switch.
    hosts: Vec<u64>,
    /// Connected parts: part of each switch, switches of each part.
    part: Vec<u32>,
    parts: Vec<Vec<u32>>,
    /// Dependency states with U-turns blocked and everything else unused.
    template: Vec<u8>,
}

impl Net {
    fn new(f: &RoutingFabric) -> Net {
        let n = f.num_switches();
        let mut order: Vec<SwitchId> = f.switch_ids().collect();
        order.sort_by_key(|s| f.switch(*s).guid);
        let mut pos = vec![0u32; n];
        for (i, s) in order.iter().enumerate() {
            pos[s.index()] = i as u32;
        }
        let mut ch_base = Vec::with_capacity(n + 1);
        let (mut ch_tail, mut ch_head, mut ch_port, mut remote) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (v, &s) in order.iter().enumerate() {
            ch_base.push(ch_tail.len() as u32);
            for e in f.switch_neighbors(s) {
                // A cable looped back to its own switch never helps a route.
                if e.neighbor == s {
                    continue;
                }
                ch_tail.push(v as u32);
                ch_head.push(pos[e.neighbor.index()]);
                ch_port.push(e.port);
                remote.push(e.remote_port);
            }
        }
        ch_base.push(ch_tail.len() as u32);
        let ch_rev = (0..ch_tail.len())
            .map(|c| {
                let b = ch_head[c] as usize;
                let range = ch_base[b] as usize..ch_base[b + 1] as usize;
                let i = ch_port[range.clone()].binary_search(&remote[c]).expect("a cable has two ends");
                (range.start + i) as u32
            })
            .collect::<Vec<u32>>();
        let mut dep_base = Vec::with_capacity(n + 1);
        let mut total = 0usize;
        for v in 0..n {
            dep_base.push(total);
            let g = (ch_base[v + 1] - ch_base[v]) as usize;
            total += g * g;
        }
        dep_base.push(total);
        let mut template = vec![UNUSED; total];
        for v in 0..n {
            let (b, g) = (ch_base[v] as usize, (ch_base[v + 1] - ch_base[v]) as usize);
            for k in 0..g {
                for j in 0..g {
                    // In from the neighbour behind cable k, out to the same
                    // neighbour (over any cable): a U-turn.
                    if ch_head[b + k] == ch_head[b + j] {
                        template[dep_base[v] + k * g + j] = BLOCKED;
                    }
                }
            }
        }
        let hosts = order
            .iter()
            .map(|&s| f.switch_ports(s).iter().filter(|p| matches!(p, Some(PortEnd::End(_)))).count() as u64)
            .collect();
        let mut part = vec![NONE; n];
        let mut parts = Vec::new();
        for root in 0..n {
            if part[root] != NONE {
                continue;
            }
            let id = parts.len() as u32;
            let mut nodes = vec![root as u32];
            part[root] = id;
            let mut head = 0;
            while head < nodes.len() {
                let u = nodes[head] as usize;
                head += 1;
                for c in ch_base[u]..ch_base[u + 1] {
                    let w = ch_head[c as usize] as usize;
                    if part[w] == NONE {
                        part[w] = id;
                        nodes.push(w as u32);
                    }
                }
            }
            parts.push(nodes);
        }
        Net { order, ch_base, ch_tail, ch_head, ch_port, ch_rev, dep_base, hosts, part, parts, template }
    }

    fn n(&self) -> usize {
        self.order.len()
    }
    fn channels(&self) -> usize {
        self.ch_tail.len()
    }
    fn deg(&self, v: usize) -> usize {
        (self.ch_base[v + 1] - self.ch_base[v]) as usize
    }
    fn out(&self, v: usize) -> std::ops::Range<u32> {
        self.ch_base[v]..self.ch_base[v + 1]
    }
    /// The dependency "`c_in` then `c_out`" (head of `c_in` = tail of `c_out`).
    #[inline(always)]
    fn dep(&self, c_in: u32, c_out: u32) -> usize {
        let v = self.ch_head[c_in as usize] as usize;
        debug_assert_eq!(self.ch_tail[c_out as usize] as usize, v);
        let k = (self.ch_rev[c_in as usize] - self.ch_base[v]) as usize;
        let j = (c_out - self.ch_base[v]) as usize;
        self.dep_base[v] + k * self.deg(v) + j
    }
}

/// One layer's dependency states and the topological order of its used
/// (and tentatively used) dependencies.
struct Cdg {
    state: Vec<u8>,
    /// Position of each channel in the topological order.
    ord: Vec<u32>,
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    pool: Vec<u32>,
}

impl Cdg {
    fn new(net: &Net) -> Cdg {
        Cdg {
            state: net.template.clone(),
            ord: (0..net.channels() as u32).collect(),
            mark: vec![0; net.channels()],
            stamp: 0,
            stack: Vec::new(),
            fwd: Vec::new(),
            bwd: Vec::new(),
            pool: Vec::new(),
        }
    }

    fn is_used(s: u8) -> bool {
        s == USED || s == WET
    }

    /// Whether the used dependencies plus `from -> to` stay acyclic; if so,
    /// reorders so that the order agrees with the new edge (the caller then
    /// marks it). Pearce-Kelly: only channels ordered between `to` and
    /// `from` are searched.
    fn admit(&mut self, net: &Net, from: u32, to: u32, stats: &mut NueStats) -> bool {
        self.admit_within(net, from, to, usize::MAX, stats) == Some(true)
    }

    /// [`Cdg::admit`] that gives up (`None`, nothing changed) after
    /// visiting `budget` channels; `Some(false)` is a proven cycle.
    fn admit_within(&mut self, net: &Net, from: u32, to: u32, budget: usize, stats: &mut NueStats) -> Option<bool> {
        let (ub, lb) = (self.ord[from as usize], self.ord[to as usize]);
        if ub < lb {
            return Some(true);
        }
        let mut visits = 0usize;
        if self.stamp >= u32::MAX - 2 {
            self.mark.fill(0);
            self.stamp = 0;
        }
        self.stamp += 2;
        let (sf, sb) = (self.stamp - 1, self.stamp);
        // Forward from `to` among channels ordered before `from`.
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(to);
        self.mark[to as usize] = sf;
        while let Some(u) = self.stack.pop() {
            self.fwd.push(u);
            visits += 1;
            if visits > budget {
                return None;
            }
            let b = net.ch_head[u as usize] as usize;
            let g = net.deg(b);
            let row = net.dep_base[b] + (net.ch_rev[u as usize] - net.ch_base[b]) as usize * g;
            for j in 0..g {
                if !Cdg::is_used(self.state[row + j]) {
                    continue;
                }
                let w = net.ch_base[b] + j as u32;
                if w == from {
                    return Some(false);
                }
                if self.ord[w as usize] < ub && self.mark[w as usize] != sf {
                    self.mark[w as usize] = sf;
                    self.stack.push(w);
                }
            }
        }
        // Backward from `from` among channels ordered after `to`.
        self.bwd.clear();
        self.stack.push(from);
        self.mark[from as usize] = sb;
        while let Some(u) = self.stack.pop() {
            self.bwd.push(u);
            visits += 1;
            if visits > budget {
                self.stack.clear();
                return None;
            }
            let a = net.ch_tail[u as usize] as usize;
            let g = net.deg(a);
            let j = (u - net.ch_base[a]) as usize;
            for k in 0..g {
                if !Cdg::is_used(self.state[net.dep_base[a] + k * g + j]) {
                    continue;
                }
                let w = net.ch_rev[net.ch_base[a] as usize + k];
                if self.ord[w as usize] > lb && self.mark[w as usize] != sb {
                    self.mark[w as usize] = sb;
                    self.stack.push(w);
                }
            }
        }
        // Everything that reaches `from` goes before everything `to`
        // reaches, in the positions they held, each group in its old order.
        let ord = &self.ord;
        self.fwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.bwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.pool.clear();
        self.pool.extend(self.bwd.iter().chain(&self.fwd).map(|&c| ord[c as usize]));
        self.pool.sort_unstable();
        for (i, &c) in self.bwd.iter().chain(&self.fwd).enumerate() {
            self.ord[c as usize] = self.pool[i];
        }
        stats.reorders += 1;
        Some(true)
    }
}

/// A layer's escape tree (a spanning forest: one tree per connected part).
struct Escape {
    parent: Vec<u32>,
    /// Channel to the parent (NONE at roots).
    up: Vec<u32>,
    depth: Vec<u32>,
    /// The switches on the current destination's tree path to its root:
    /// `path_stamp[v] == stamp` and `path_down[v]` is the channel down
    /// towards the destination.
    path_stamp: Vec<u32>,
    path_down: Vec<u32>,
    stamp: u32,
    /// Switches whose escape paths are reserved (end ports hang off them).
    reserved: Vec<bool>,
}

impl Escape {
    /// Roots every part at the switch with the least total hop distance to
    /// (a sample of) the layer's destination switches; parents among the
    /// switches one hop nearer the root over the least loaded cable.
    fn build(net: &Net, dest_switches: &[u32], load: &[u64]) -> Escape {
        let n = net.n();
        let mut sum = vec![0u64; n];
        let mut dist = vec![NONE; n];
        let mut queue = Vec::with_capacity(n);
        let mut per_part: Vec<Vec<u32>> = vec![Vec::new(); net.parts.len()];
        for &d in dest_switches {
            per_part[net.part[d as usize] as usize].push(d);
        }
        const SAMPLES: usize = 32;
        let bfs = |src: u32, dist: &mut Vec<u32>, queue: &mut Vec<u32>| {
            dist.fill(NONE);
            queue.clear();
            dist[src as usize] = 0;
            queue.push(src);
            let mut head = 0;
            while head < queue.len() {
                let u = queue[head] as usize;
                head += 1;
                for c in net.out(u) {
                    let w = net.ch_head[c as usize] as usize;
                    if dist[w] == NONE {
                        dist[w] = dist[u] + 1;
                        queue.push(w as u32);
                    }
                }
            }
        };
        let mut parent = vec![NONE; n];
        let mut up = vec![NONE; n];
        let mut depth = vec![NONE; n];
        for (p, nodes) in net.parts.iter().enumerate() {
            let ds = &per_part[p];
            let root = if ds.is_empty() {
                nodes[0]
            } else {
                let step = ds.len().div_ceil(SAMPLES);
                for &d in ds.iter().step_by(step) {
                    bfs(d, &mut dist, &mut queue);
                    for &v in nodes {
                        sum[v as usize] += u64::from(dist[v as usize]);
                    }
                }
                *nodes.iter().min_by_key(|&&v| (sum[v as usize], v)).expect("a part has a switch")
            };
            bfs(root, &mut dist, &mut queue);
            for &v in &queue {
                let v = v as usize;
                depth[v] = dist[v];
                if v as u32 == root {
                    continue;
                }
                let best = net
                    .out(v)
                    .filter(|&c| dist[net.ch_head[c as usize] as usize] + 1 == dist[v])
                    .min_by_key(|&c| (load[c as usize] + load[net.ch_rev[c as usize] as usize], c))
                    .expect("a breadth-first tree has parents");
                up[v] = best;
                parent[v] = net.ch_head[best as usize];
            }
        }
        let mut reserved = vec![false; n];
        for &d in dest_switches {
            reserved[d as usize] = true;
        }
        Escape { parent, up, depth, path_stamp: vec![0; n], path_down: vec![NONE; n], stamp: 0, reserved }
    }

    /// Marks the tree path of destination switch `d` for [`Escape::chan`].
    fn mark_path(&mut self, net: &Net, d: u32) {
        self.stamp += 1;
        let mut z = d;
        while self.parent[z as usize] != NONE {
            let y = self.parent[z as usize];
            self.path_stamp[y as usize] = self.stamp;
            self.path_down[y as usize] = net.ch_rev[self.up[z as usize] as usize];
            z = y;
        }
    }

    /// The escape channel of switch `x` towards the marked destination.
    fn chan(&self, x: u32) -> u32 {
        if self.path_stamp[x as usize] == self.stamp {
            self.path_down[x as usize]
        } else {
            self.up[x as usize]
        }
    }
}

/// Resets `cdg` for a layer: template states, the escape dependencies of
/// the layer's destinations marked used, and an up*/down* order of the
/// escape tree that agrees with them.
fn init_layer(net: &Net, cdg: &mut Cdg, esc: &Escape, dest_switches: &[u32]) {
    cdg.state.copy_from_slice(&net.template);
    let n = net.n();
    // Up channels (towards a switch nearer the root, ties by index) first,
    // deepest tail first; then down channels, shallowest head first.
    let key = |c: usize| {
        let (a, b) = (net.ch_tail[c] as usize, net.ch_head[c] as usize);
        if (esc.depth[b], b) < (esc.depth[a], a) {
            (0u8, u32::MAX - esc.depth[a], a as u32, c as u32)
        } else {
            (1u8, esc.depth[b], b as u32, c as u32)
        }
    };
    let mut chans: Vec<u32> = (0..net.channels() as u32).collect();
    chans.sort_unstable_by_key(|&c| key(c as usize));
    for (i, &c) in chans.iter().enumerate() {
        cdg.ord[c as usize] = i as u32;
    }
    let mark = |cdg: &mut Cdg, a: u32, b: u32| {
        let e = net.dep(a, b);
        debug_assert!(cdg.ord[a as usize] < cdg.ord[b as usize], "escape edges agree with the initial order");
        debug_assert_ne!(cdg.state[e], BLOCKED);
        cdg.state[e] = USED;
    };
    // Up, then up again.
    for x in 0..n {
        let p = esc.parent[x];
        if p != NONE && esc.parent[p as usize] != NONE {
            mark(cdg, esc.up[x], esc.up[p as usize]);
        }
    }
    // Down paths to every destination switch, and the turns into them.
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    for x in 0..n {
        if esc.parent[x] != NONE {
            children[esc.parent[x] as usize].push(x as u32);
        }
    }
    let mut done = vec![false; n];
    for &d in dest_switches {
        let mut z = d;
        while esc.parent[z as usize] != NONE && !done[z as usize] {
            done[z as usize] = true;
            let y = esc.parent[z as usize];
            let down_z = net.ch_rev[esc.up[z as usize] as usize];
            for &c in &children[y as usize] {
                if c != z {
                    mark(cdg, esc.up[c as usize], down_z);
                }
            }
            if esc.parent[y as usize] != NONE {
                mark(cdg, net.ch_rev[esc.up[y as usize] as usize], down_z);
            }
            z = y;
        }
    }
}

/// A destination LID block: the switch it terminates at and the port it
/// leaves that switch by (0 = the switch itself).
#[derive(Debug, Clone, Copy)]
struct Dest {
    lid: u16,
    switch: u32,
    out_port: u8,
    /// End-port routes add load; switch routes do not.
    counted: bool,
}

/// Per-destination search state, reused.
struct Search {
    dist: Vec<Key>,
    chan: Vec<u32>,
    /// The dependency the switch's current route relies on, and whether the
    /// search added it (so must remove it when the route changes).
    cand: Vec<usize>,
    cand_new: Vec<bool>,
    settled: Vec<bool>,
    in_escape: Vec<bool>,
    /// Routed outside the dependency graph (see [`complete_unlayered`]).
    free: Vec<bool>,
    /// End-port destination: full cycle checks, backtracking, escape paths.
    /// Switch LIDs bound each cycle check (`SWITCH_LID_BUDGET`), skip
    /// backtracking, and complete the rest outside the graph.
    thorough: bool,
    heap: BinaryHeap<Reverse<(Key, u32)>>,
    wet: Vec<usize>,
    /// Switches whose route enters switch v: `kids[kid_start[v]..kid_end[v]]`.
    kid_start: Vec<u32>,
    kid_end: Vec<u32>,
    kids: Vec<u32>,
    bfs: Vec<u32>,
    flow: Vec<u64>,
    /// Per channel: end ports of the current destination's settled
    /// switches routed over it so far (their own traffic, not yet in
    /// `load`), and the channels that have some.
    pending: Vec<u64>,
    touched: Vec<u32>,
    /// A lower bound of the busiest channel's final load: routes below it
    /// are not worth moving.
    floor: u64,
    /// Whether [`rechoose`] runs.
    aware: bool,
}

impl Search {
    fn new(n: usize, channels: usize) -> Search {
        Search {
            dist: vec![FAR; n],
            chan: vec![NONE; n],
            cand: vec![NO_EDGE; n],
            cand_new: vec![false; n],
            settled: vec![false; n],
            in_escape: vec![false; n],
            free: vec![false; n],
            thorough: true,
            heap: BinaryHeap::new(),
            wet: Vec::new(),
            kid_start: vec![0; n],
            kid_end: vec![0; n],
            kids: Vec::with_capacity(n),
            bfs: Vec::with_capacity(n),
            flow: vec![0; n],
            pending: vec![0; channels],
            touched: Vec::new(),
            floor: 0,
            aware: true,
        }
    }

    /// Drops the dependency the current route of `x` relies on if the
    /// search added it.
    fn release(&mut self, cdg: &mut Cdg, x: usize) {
        if self.cand_new[x] {
            let e = self.cand[x];
            debug_assert_eq!(cdg.state[e], WET);
            cdg.state[e] = UNUSED;
            self.cand_new[x] = false;
        }
        self.cand[x] = NO_EDGE;
    }

    /// Children lists of the current routes among `nodes` (switches without
    /// a route are nobody's child), by counting sort on the next hop.
    fn build_children(&mut self, net: &Net, nodes: &[u32]) {
        for &v in nodes {
            self.kid_end[v as usize] = 0;
        }
        let routed = |s: &Search, v: u32| s.chan[v as usize] != NONE;
        for &v in nodes {
            if routed(self, v) {
                self.kid_end[net.ch_head[self.chan[v as usize] as usize] as usize] += 1;
            }
        }
        let mut acc = 0u32;
        for &v in nodes {
            let c = self.kid_end[v as usize];
            self.kid_start[v as usize] = acc;
            self.kid_end[v as usize] = acc;
            acc += c;
        }
        self.kids.clear();
        self.kids.resize(acc as usize, NONE);
        for &v in nodes {
            if routed(self, v) {
                let h = net.ch_head[self.chan[v as usize] as usize] as usize;
                self.kids[self.kid_end[h] as usize] = v;
                self.kid_end[h] += 1;
            }
        }
    }

    /// Adds `f` to the pending load of every channel on `x`'s route.
    fn add_pending(&mut self, net: &Net, mut x: u32, d: u32, f: u64) {
        while x != d {
            let c = self.chan[x as usize];
            if self.pending[c as usize] == 0 {
                self.touched.push(c);
            }
            self.pending[c as usize] += f;
            x = net.ch_head[c as usize];
        }
    }

    /// (most loaded channel, load summed) of `u`'s route, pending included.
    fn route_load(&self, net: &Net, mut u: u32, d: u32, load: &[u64]) -> (u64, u64) {
        let (mut top, mut sum) = (0u64, 0u64);
        while u != d {
            let c = self.chan[u as usize] as usize;
            let l = load[c] + self.pending[c];
            top = top.max(l);
            sum += l;
            u = net.ch_head[c];
        }
        (top, sum)
    }

    fn children(&self, v: u32) -> &[u32] {
        &self.kids[self.kid_start[v as usize] as usize..self.kid_end[v as usize] as usize]
    }

    /// Breadth-first order of the routes' tree from `d` (after
    /// [`Search::build_children`]).
    fn bfs_from(&mut self, d: u32) {
        self.bfs.clear();
        self.bfs.push(d);
        let mut head = 0;
        while head < self.bfs.len() {
            let u = self.bfs[head];
            head += 1;
            let (a, b) = (self.kid_start[u as usize] as usize, self.kid_end[u as usize] as usize);
            for k in a..b {
                let c = self.kids[k];
                self.bfs.push(c);
            }
        }
    }
}

/// Relaxes the switches that can reach settled switch `u` over one cable:
/// a switch may take the cable into `u` only if the turn onto `u`'s route
/// is used already or can be added without closing a cycle.
#[allow(clippy::too_many_arguments)]
fn relax_from(net: &Net, cdg: &mut Cdg, s: &mut Search, u: usize, d: u32, load: &[u64], stats: &mut NueStats) {
    let du = s.dist[u];
    let base = net.ch_base[u] as usize;
    for k in 0..net.deg(u) {
        // The channel from neighbour x into u.
        let c_in = net.ch_rev[base + k];
        let x = net.ch_tail[c_in as usize] as usize;
        if s.settled[x] {
            continue;
        }
        let (e, st) = if u as u32 == d {
            (NO_EDGE, USED)
        } else {
            let e = net.dep(c_in, s.chan[u]);
            (e, cdg.state[e])
        };
        let nd = du + HOP + load[c_in as usize];
        // Ties keep the first route found. (Preferring a turn already in use
        // at equal distance, to keep the graph sparse, skews the balance:
        // on a 3-level fat tree with 8 layers it raised the edge forwarding
        // index from the ideal 3,870 to 6,642.)
        if st == BLOCKED || nd >= s.dist[x] {
            continue;
        }
        let added = st == UNUSED;
        if added {
            let budget = if s.thorough { usize::MAX } else { SWITCH_LID_BUDGET };
            match cdg.admit_within(net, c_in, s.chan[u], budget, stats) {
                Some(true) => {}
                Some(false) => {
                    cdg.state[e] = BLOCKED;
                    stats.blocked += 1;
                    continue;
                }
                // Undecided within the budget: blocked as well. Switch
                // LIDs come after every end-port LID of the layer, so this
                // only narrows later switch-LID routes, and each turn is
                // searched at most once.
                None => {
                    cdg.state[e] = BLOCKED;
                    continue;
                }
            }
            cdg.state[e] = WET;
            s.wet.push(e);
        }
        s.release(cdg, x);
        s.dist[x] = nd;
        s.chan[x] = c_in;
        s.cand[x] = e;
        s.cand_new[x] = added;
        s.heap.push(Reverse((nd, x as u32)));
    }
}

/// Before switch `x` settles: its tentative route was the best when found,
/// against the load of earlier destinations, but switches settled since
/// may have sent this destination's own traffic over the same channels.
/// If the route's busiest channel, that traffic and `x`'s own included,
/// would exceed the load floor, re-picks among the settled neighbours as
/// few hops away: least busiest channel, then least load summed, then the
/// current route.
fn rechoose(net: &Net, cdg: &mut Cdg, s: &mut Search, x: usize, d: u32, load: &[u64], stats: &mut NueStats) {
    let f = net.hosts[x];
    let (top, sum) = s.route_load(net, x as u32, d, load);
    if top + f <= s.floor {
        return;
    }
    let h = hops(s.dist[x]);
    let cur = s.chan[x];
    let mine = ((top + f).max(s.floor), sum, false, cur);
    loop {
        let mut best = mine;
        for c in net.out(x) {
            let u = net.ch_head[c as usize];
            if c == cur || !s.settled[u as usize] || hops(s.dist[u as usize]) + 1 != h {
                continue;
            }
            let l = load[c as usize] + s.pending[c as usize];
            // The route's busiest channel is at least this one.
            if (l + f).max(s.floor) > best.0 {
                continue;
            }
            if u != d && cdg.state[net.dep(c, s.chan[u as usize])] == BLOCKED {
                continue;
            }
            let (top, sum) = s.route_load(net, u, d, load);
            let k = ((top.max(l) + f).max(s.floor), sum + l, true, c);
            if k < best {
                best = k;
            }
        }
        let (_, sum, _, c) = best;
        if c == cur {
            return;
        }
        let u = net.ch_head[c as usize];
        let (e, added) = if u == d {
            (NO_EDGE, false)
        } else {
            let e = net.dep(c, s.chan[u as usize]);
            match cdg.state[e] {
                UNUSED => {
                    if !cdg.admit(net, c, s.chan[u as usize], stats) {
                        cdg.state[e] = BLOCKED;
                        stats.blocked += 1;
                        continue;
                    }
                    cdg.state[e] = WET;
                    s.wet.push(e);
                    (e, true)
                }
                _ => (e, false),
            }
        };
        s.release(cdg, x);
        s.chan[x] = c;
        s.cand[x] = e;
        s.cand_new[x] = added;
        s.dist[x] = h * HOP + sum;
        stats.rechosen += 1;
        return;
    }
}

/// Whether the route from `w` to the destination passes `v`.
fn leads_through(net: &Net, s: &Search, mut w: u32, v: u32, d: u32) -> bool {
    while w != d {
        if w == v {
            return true;
        }
        w = net.ch_head[s.chan[w as usize] as usize];
    }
    false
}

/// Nue's local backtracking: for a stranded switch x next to a settled
/// switch v, look for another route of v (over a cable to a settled switch
/// w whose route avoids v) such that the turn onto it is admissible for v
/// itself, for every switch already routed through v, and for x. On success
/// v changes route, x is attached to v, and `(x, v)` is returned.
#[allow(clippy::too_many_arguments)]
fn backtrack(
    net: &Net,
    cdg: &mut Cdg,
    s: &mut Search,
    nodes: &[u32],
    d: u32,
    load: &[u64],
    stats: &mut NueStats,
) -> Option<(u32, u32)> {
    s.build_children(net, nodes);
    let mut needed: Vec<(u32, u32)> = Vec::new();
    let mut added: Vec<usize> = Vec::new();
    for &x in nodes {
        if s.settled[x as usize] {
            continue;
        }
        for cx in net.out(x as usize) {
            let v = net.ch_head[cx as usize];
            if !s.settled[v as usize] || v == d {
                continue;
            }
            for c2 in net.out(v as usize) {
                let w = net.ch_head[c2 as usize];
                if c2 == s.chan[v as usize] || w == x || !s.settled[w as usize] || leads_through(net, s, w, v, d) {
                    continue;
                }
                needed.clear();
                if w != d {
                    needed.push((c2, s.chan[w as usize]));
                }
                needed.push((cx, c2));
                needed.extend(s.children(v).iter().map(|&z| (s.chan[z as usize], c2)));
                added.clear();
                let mut ok = true;
                for &(a, b) in &needed {
                    let e = net.dep(a, b);
                    let st = cdg.state[e];
                    match st {
                        USED | WET => {}
                        UNUSED if cdg.admit(net, a, b, stats) => {
                            cdg.state[e] = WET;
                            added.push(e);
                        }
                        _ => {
                            ok = false;
                            break;
                        }
                    }
                }
                if !ok {
                    // Old turns were still in place during the checks, so a
                    // failure here proves no cycle among used turns alone:
                    // nothing is blocked, only the attempt undone.
                    for &e in &added {
                        cdg.state[e] = UNUSED;
                    }
                    continue;
                }
                s.wet.extend_from_slice(&added);
                let owns = |e: usize| added.contains(&e);
                s.release(cdg, v as usize);
                let ev = if w == d { NO_EDGE } else { net.dep(c2, s.chan[w as usize]) };
                s.chan[v as usize] = c2;
                s.cand[v as usize] = ev;
                s.cand_new[v as usize] = ev != NO_EDGE && owns(ev);
                s.dist[v as usize] = s.dist[w as usize] + HOP + load[c2 as usize];
                let kids: Vec<u32> = s.children(v).to_vec();
                for z in kids {
                    let z = z as usize;
                    s.release(cdg, z);
                    let ez = net.dep(s.chan[z], c2);
                    s.cand[z] = ez;
                    s.cand_new[z] = owns(ez);
                }
                let ex = net.dep(cx, c2);
                let xi = x as usize;
                s.chan[xi] = cx;
                s.cand[xi] = ex;
                s.cand_new[xi] = owns(ex);
                s.dist[xi] = s.dist[v as usize] + HOP + load[cx as usize];
                s.settled[xi] = true;
                stats.backtracks += 1;
                return Some((x, v));
            }
        }
    }
    None
}

/// Routes one destination LID in the current layer.
#[allow(clippy::too_many_arguments)]
fn route_one(
    net: &Net,
    cdg: &mut Cdg,
    esc: &mut Escape,
    s: &mut Search,
    dest: Dest,
    load: &mut [u64],
    lfts: &mut [Lft],
    stats: &mut NueStats,
) {
    let d = dest.switch;
    let nodes = &net.parts[net.part[d as usize] as usize];
    for &v in nodes {
        let v = v as usize;
        s.dist[v] = FAR;
        s.chan[v] = NONE;
        s.cand[v] = NO_EDGE;
        s.cand_new[v] = false;
        s.settled[v] = false;
        s.in_escape[v] = false;
        s.free[v] = false;
    }
    s.wet.clear();
    s.heap.clear();
    s.thorough = dest.counted;
    s.dist[d as usize] = 0;
    s.heap.push(Reverse((0, d)));
    let mut reached = 0usize;
    loop {
        while let Some(Reverse((du, u))) = s.heap.pop() {
            let u = u as usize;
            if s.settled[u] || du != s.dist[u] {
                continue;
            }
            if s.aware && dest.counted && u as u32 != d {
                rechoose(net, cdg, s, u, d, load, stats);
            }
            s.settled[u] = true;
            reached += 1;
            if dest.counted && net.hosts[u] > 0 {
                s.add_pending(net, u as u32, d, net.hosts[u]);
            }
            relax_from(net, cdg, s, u, d, load, stats);
        }
        if reached == nodes.len() || !s.thorough {
            break;
        }
        let Some((x, v)) = backtrack(net, cdg, s, nodes, d, load, stats) else { break };
        reached += 1;
        // Both may now offer turns they could not before.
        relax_from(net, cdg, s, v as usize, d, load, stats);
        relax_from(net, cdg, s, x as usize, d, load, stats);
    }

    for c in s.touched.drain(..) {
        s.pending[c as usize] = 0;
    }
    if reached < nodes.len() {
        stats.impasses += 1;
        if esc.reserved[d as usize] {
            escape_stranded(net, cdg, esc, s, nodes, d, stats);
        } else {
            complete_unlayered(net, s, nodes, d, stats);
        }
    }
    for &e in &s.wet {
        if cdg.state[e] == WET {
            cdg.state[e] = USED;
        }
    }
    if cfg!(debug_assertions) {
        for &v in nodes {
            let v = v as usize;
            if v as u32 != d && !s.free[v] {
                let h = net.ch_head[s.chan[v] as usize];
                if h != d {
                    let e = net.dep(s.chan[v], s.chan[h as usize]);
                    assert_eq!(cdg.state[e], USED, "every turn of a route is a used dependency");
                }
            }
        }
    }

    // Tables, then load: flows accumulate from the farthest switches in.
    lfts[net.order[d as usize].index()].ports[usize::from(dest.lid)] = dest.out_port;
    for &v in nodes {
        if v != d {
            let c = s.chan[v as usize] as usize;
            lfts[net.order[v as usize].index()].ports[usize::from(dest.lid)] = net.ch_port[c];
        }
    }
    if dest.counted {
        s.build_children(net, nodes);
        s.bfs_from(d);
        debug_assert_eq!(s.bfs.len(), nodes.len(), "the routes form a tree into the destination");
        for &v in nodes {
            s.flow[v as usize] = net.hosts[v as usize];
        }
        for i in (1..s.bfs.len()).rev() {
            let v = s.bfs[i] as usize;
            let c = s.chan[v] as usize;
            load[c] += s.flow[v];
            let h = net.ch_head[c] as usize;
            s.flow[h] += s.flow[v];
        }
    }
}

/// Moves stranded switches onto escape paths (see the module
/// documentation). A switch x moved onto its escape cable into y keeps y's
/// route when the turn onto it is admissible ("joining"); otherwise y moves
/// too. A switch whose route enters a switch that moved re-checks its turn
/// and moves if it must. Joining can close a forwarding loop (an escape
/// path running into a route that leads back to it); if the result has one,
/// joins are undone by moving the joined switches too, down to the plain
/// closure (every switch on an escape path to the destination on its escape
/// path), which is loop-free: search routes lead to earlier-settled
/// switches, escape routes along the tree, and no escape route leads into a
/// search route.
fn escape_stranded(
    net: &Net,
    cdg: &mut Cdg,
    esc: &mut Escape,
    s: &mut Search,
    nodes: &[u32],
    d: u32,
    stats: &mut NueStats,
) {
    esc.mark_path(net, d);
    // Children of the search routes: who depends on a switch whose route
    // changes. Stranded switches have no route, so are nobody's child.
    s.build_children(net, nodes);
    let mut todo: Vec<u32> = nodes.iter().copied().filter(|&v| !s.settled[v as usize]).collect();
    let mut recheck: Vec<u32> = Vec::new();
    // Moved switches whose escape cable joins a switch that has not moved.
    let mut joined: Vec<u32> = Vec::new();
    let mut allow_join = true;
    loop {
        if let Some(x) = todo.pop() {
            let xi = x as usize;
            if x == d || s.in_escape[xi] {
                continue;
            }
            s.in_escape[xi] = true;
            stats.escaped_switches += 1;
            let c = esc.chan(x);
            let y = net.ch_head[c as usize];
            let changed = s.chan[xi] != c;
            s.release(cdg, xi);
            s.chan[xi] = c;
            s.cand[xi] = NO_EDGE;
            if changed {
                recheck.extend_from_slice(s.children(x));
            }
            if y == d {
                continue;
            }
            if s.in_escape[y as usize] {
                s.cand[xi] = net.dep(c, s.chan[y as usize]);
                continue;
            }
            if allow_join && s.chan[y as usize] != NONE {
                let e = net.dep(c, s.chan[y as usize]);
                let st = cdg.state[e];
                let ok = match st {
                    USED | WET => true,
                    UNUSED => cdg.admit(net, c, s.chan[y as usize], stats),
                    _ => false,
                };
                if ok {
                    if st == UNUSED {
                        cdg.state[e] = WET;
                        s.wet.push(e);
                        s.cand_new[xi] = true;
                    }
                    s.cand[xi] = e;
                    joined.push(x);
                    continue;
                }
            }
            todo.push(y);
            continue;
        }
        if let Some(z) = recheck.pop() {
            let zi = z as usize;
            if s.in_escape[zi] {
                continue;
            }
            // z keeps its cable into x, whose route changed.
            let x = net.ch_head[s.chan[zi] as usize];
            let e = net.dep(s.chan[zi], s.chan[x as usize]);
            s.release(cdg, zi);
            let st = cdg.state[e];
            match st {
                USED | WET => s.cand[zi] = e,
                UNUSED if cdg.admit(net, s.chan[zi], s.chan[x as usize], stats) => {
                    cdg.state[e] = WET;
                    s.wet.push(e);
                    s.cand[zi] = e;
                    s.cand_new[zi] = true;
                }
                _ => {
                    if st == UNUSED {
                        cdg.state[e] = BLOCKED;
                        stats.blocked += 1;
                    }
                    todo.push(z);
                }
            }
            continue;
        }
        // Quiet. Joins onto switches that moved later become escape turns.
        let mut rejoin = false;
        for &x in &joined {
            let xi = x as usize;
            let y = net.ch_head[s.chan[xi] as usize];
            if s.in_escape[y as usize] && s.cand[xi] != net.dep(s.chan[xi], s.chan[y as usize]) {
                s.release(cdg, xi);
                s.cand[xi] = net.dep(s.chan[xi], s.chan[y as usize]);
            }
        }
        if allow_join && has_loop(net, s, nodes, d) {
            // Undo the joins: the joined switches' successors move too.
            allow_join = false;
            for &x in &joined {
                let y = net.ch_head[s.chan[x as usize] as usize];
                if !s.in_escape[y as usize] {
                    todo.push(y);
                }
                rejoin = true;
            }
        }
        if !rejoin {
            break;
        }
    }
    // Joined switches whose successor moved after all rely on escape turns.
    for &x in &joined {
        let xi = x as usize;
        let y = net.ch_head[s.chan[xi] as usize];
        if y != d && s.in_escape[y as usize] {
            let e = net.dep(s.chan[xi], s.chan[y as usize]);
            if s.cand[xi] != e {
                s.release(cdg, xi);
                s.cand[xi] = e;
            }
        }
    }
}

/// Completes the routes to a switch LID whose switch has no reserved
/// escape path: stranded switches descend breadth-first distances to `d`
/// (to a switch with a route, or another stranded switch one hop nearer),
/// so the routes stay loop-free and shortest from there, but their turns
/// are not in the dependency graph. Routes to end ports never get here.
fn complete_unlayered(net: &Net, s: &mut Search, nodes: &[u32], d: u32, stats: &mut NueStats) {
    let n = net.n();
    let mut dist = vec![NONE; n];
    let mut queue = vec![d];
    dist[d as usize] = 0;
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head] as usize;
        head += 1;
        for c in net.out(u) {
            let w = net.ch_head[c as usize] as usize;
            if dist[w] == NONE {
                dist[w] = dist[u] + 1;
                queue.push(w as u32);
            }
        }
    }
    for &x in nodes {
        let xi = x as usize;
        if s.settled[xi] {
            continue;
        }
        let c = net
            .out(xi)
            .find(|&c| dist[net.ch_head[c as usize] as usize] + 1 == dist[xi])
            .expect("a connected part has shortest paths");
        s.chan[xi] = c;
        s.cand[xi] = NO_EDGE;
        s.free[xi] = true;
        stats.unlayered += 1;
    }
}

/// Whether following the routes from some switch of `nodes` never reaches
/// `d`. O(S) with stamps in `s.flow` (scratch).
fn has_loop(net: &Net, s: &mut Search, nodes: &[u32], d: u32) -> bool {
    // 0 = unvisited, 1 = on the current walk, 2 = reaches d.
    for &v in nodes {
        s.flow[v as usize] = 0;
    }
    s.flow[d as usize] = 2;
    let mut walk: Vec<u32> = Vec::new();
    for &v in nodes {
        let mut x = v;
        walk.clear();
        while s.flow[x as usize] == 0 {
            s.flow[x as usize] = 1;
            walk.push(x);
            x = net.ch_head[s.chan[x as usize] as usize];
        }
        if s.flow[x as usize] == 1 {
            return true;
        }
        for &w in &walk {
            s.flow[w as usize] = 2;
        }
    }
    false
}

/// A lower bound of the busiest channel's load in any routing: the end
/// ports of a switch send to every counted LID elsewhere in their part,
/// and receive from every end port elsewhere for each LID of theirs, over
/// the switch's channels.
fn load_floor(net: &Net, by_layer: &[Vec<Dest>]) -> u64 {
    let n = net.n();
    let mut lids_at = vec![0u64; n];
    for d in by_layer.iter().flatten().filter(|d| d.counted) {
        lids_at[d.switch as usize] += 1;
    }
    let (mut part_lids, mut part_hosts) = (vec![0u64; net.parts.len()], vec![0u64; net.parts.len()]);
    for v in 0..n {
        part_lids[net.part[v] as usize] += lids_at[v];
        part_hosts[net.part[v] as usize] += net.hosts[v];
    }
    (0..n)
        .filter(|&v| net.deg(v) > 0)
        .map(|v| {
            let p = net.part[v] as usize;
            let out = net.hosts[v] * (part_lids[p] - lids_at[v]);
            let inn = lids_at[v] * (part_hosts[p] - net.hosts[v]);
            out.max(inn).div_ceil(net.deg(v) as u64)
        })
        .max()
        .unwrap_or(0)
}

/// One routing of every end-port and switch LID (the mirrored switch LIDs
/// aside).
struct Routing {
    lfts: Vec<Lft>,
    stats: NueStats,
    /// The busiest channel's load and how many channels carry it.
    busiest: (u64, usize),
}

/// Routes the layers' destinations in order, with or without
/// [`rechoose`].
fn route_all(net: &Net, by_layer: &[Vec<Dest>], fabric: &RoutingFabric, floor: u64, aware: bool) -> Routing {
    let top = fabric.max_lid();
    let mut lfts: Vec<Lft> = (0..fabric.num_switches()).map(|_| Lft::unrouted(top)).collect();
    let mut stats = NueStats::default();
    let mut load = vec![0u64; net.channels()];
    let mut cdg = Cdg::new(net);
    let mut search = Search::new(net.n(), net.channels());
    search.floor = floor;
    search.aware = aware;
    for ds in by_layer {
        if ds.is_empty() {
            continue;
        }
        // Escape paths are reserved for the switches end ports hang off.
        let mut dest_switches: Vec<u32> = ds.iter().filter(|x| x.counted).map(|x| x.switch).collect();
        dest_switches.sort_unstable();
        dest_switches.dedup();
        let mut esc = Escape::build(net, &dest_switches, &load);
        init_layer(net, &mut cdg, &esc, &dest_switches);
        for &dst in ds.iter() {
            route_one(net, &mut cdg, &mut esc, &mut search, dst, &mut load, &mut lfts, &mut stats);
            stats.destinations += 1;
        }
    }
    let max = load.iter().copied().max().unwrap_or(0);
    let at_max = load.iter().filter(|&&l| l == max).count();
    stats.pending_aware = aware;
    Routing { lfts, stats, busiest: (max, at_max) }
}

/// Routes every LID deadlock-free within `options.max_vls` layers (at most
/// 15); see the module documentation. Fills [`Routes::sl`] with each
/// destination's layer.
///
/// Errors: [`RoutingError::TooFewVls`] for `max_vls` 0;
/// [`RoutingError::Disconnected`] with the routes of every part when the
/// fabric has more than one.
pub fn nue(fabric: &RoutingFabric, options: &EngineOptions) -> Result<Routes, RoutingError> {
    nue_with_stats(fabric, options).map(|(r, _)| r)
}

/// [`nue`], also returning counters about the run.
pub fn nue_with_stats(fabric: &RoutingFabric, options: &EngineOptions) -> Result<(Routes, NueStats), RoutingError> {
    if options.max_vls == 0 {
        return Err(RoutingError::TooFewVls { engine: ENGINE, needed: 1, available: 0 });
    }
    let net = Net::new(fabric);
    let top = fabric.max_lid();
    // Destination LIDs grouped by switch, switches breadth-first from the
    // lowest GUID (internal index 0) part by part.
    let mut dests: Vec<Dest> = Vec::new();
    // Switch LIDs of switches with end ports follow the routes to the first
    // end-port LID there: (switch LID, that LID, switch).
    let mut mirrored: Vec<(u16, u16, u32)> = Vec::new();
    for part in &net.parts {
        for &v in part {
            let sw = net.order[v as usize];
            let first = dests.len();
            for (port, peer) in fabric.switch_ports(sw).iter().enumerate() {
                if let Some(PortEnd::End(e)) = *peer {
                    for lid in fabric.end_port(e).lids() {
                        dests.push(Dest { lid: lid as u16, switch: v, out_port: port as u8, counted: true });
                    }
                }
            }
            for lid in fabric.switch(sw).lids() {
                match dests.get(first) {
                    Some(h) => mirrored.push((lid as u16, h.lid, v)),
                    None => dests.push(Dest { lid: lid as u16, switch: v, out_port: 0, counted: false }),
                }
            }
        }
    }
    let layers = usize::from(options.max_vls.min(MAX_LAYERS)).min(dests.len()).max(1);
    let mut layer_of = vec![0u8; usize::from(top) + 1];
    let mut by_layer: Vec<Vec<Dest>> = vec![Vec::new(); layers];
    let total = dests.len();
    for (i, dst) in dests.into_iter().enumerate() {
        let l = i * layers / total.max(1);
        layer_of[usize::from(dst.lid)] = l as u8;
        by_layer[l].push(dst);
    }

    for ds in &mut by_layer {
        ds.sort_by_key(|x| (!x.counted, x.lid));
    }
    let floor = load_floor(&net, &by_layer);
    // Pending-aware first; the plain routing only if that leaves the
    // busiest channel above the floor, and kept only if it does better.
    let mut best = route_all(&net, &by_layer, fabric, floor, true);
    let mut routings = 1;
    if best.busiest.0 > floor {
        let plain = route_all(&net, &by_layer, fabric, floor, false);
        routings = 2;
        if plain.busiest < best.busiest {
            best = plain;
        }
    }
    let Routing { mut lfts, stats: run, .. } = best;
    let mut stats = NueStats { layers: layers as u8, routings, ..run };
    stats.destinations += mirrored.len() as u64;
    for &(lid, like, d) in &mirrored {
        for &v in &net.parts[net.part[d as usize] as usize] {
            let lft = &mut lfts[net.order[v as usize].index()].ports;
            lft[usize::from(lid)] = if v == d { 0 } else { lft[usize::from(like)] };
        }
        layer_of[usize::from(lid)] = layer_of[usize::from(like)];
    }

    let sl = vec![layer_of; fabric.num_switches()];
    let routes = Routes { lfts, sl: Some(PathSl::per_switch(sl)) };
    crate::error::disconnected_or_ok(fabric, routes).map(|r| (r, stats))
}
