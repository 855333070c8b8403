//! DFSSSP's deadlock removal: paths on virtual-lane layers whose channel
//! dependency graphs are acyclic (Domke, Hoefler, Nagel, IPDPS 2011).
//!
//! A *channel* is a directed switch-to-switch cable. A path that enters a
//! switch by channel `c1` and leaves by `c2` makes `c1` wait for buffer
//! space on `c2`: the dependency `c1 -> c2`. Credit-based flow control
//! deadlocks only if these dependencies form a cycle among packets of one
//! VL (Dally and Seitz), so paths are split into layers, one VL each, such
//! that every layer's channel dependency graph (CDG) is acyclic. Channels
//! to and from end ports cannot be on a cycle (an end port sinks what it
//! receives and depends on nothing to send) and are left out.
//!
//! A path is (source switch, DLID): the LFTs fix the route from a switch to
//! a LID, whatever end port behind the switch sent the packet. The paths
//! that carry traffic, and so enter the CDGs, are
//! - from every switch with end ports to every LID (end ports to end ports,
//!   and end ports to switches: performance and vendor GMPs);
//! - from every switch to every end-port LID (switches answer those GMPs
//!   and send traps from port 0).
//!
//! Switch-to-switch paths from switches without end ports are left out:
//! nothing sends LID-routed data-VL packets from one switch's port 0 to
//! another's (SMPs travel on VL15, which has no credit flow control and
//! cannot take part in a credit loop). OpenSM counts them too (every SP0 to
//! every SP0); on a fat tree their minimal paths turn down then up (an
//! aggregation switch reaches its pod neighbour through a leaf), which
//! costs OpenSM extra layers there, while without them every minimal path
//! of a fat tree is up*/down* and one layer suffices. Those paths still get
//! an SL (layer 0, or its balanced share).
//!
//! ## Layering
//! Finding the fewest layers is NP-complete (the paper), so heuristics.
//! First, all paths go on layer 0; if its CDG is acyclic (fat trees), that
//! is the answer. Otherwise two methods run and the one needing fewer
//! layers wins (ties: the first):
//! 1. *Weakest dependency*, OpenSM's `dfsssp_remove_deadlocks`: for layer
//!    `i`, search its CDG for a cycle (depth-first); take the cycle's
//!    weakest dependency, the one the fewest of the layer's paths use (the
//!    first such along the cycle); move every path using it off the layer,
//!    into the lowest finished layer below it where it closes no cycle
//!    (an addition to OpenSM), else to layer `i + 1`; repeat until layer `i`
//!    is acyclic, then go on with `i + 1`. Finally, while every path of the
//!    top layer fits into a lower one without a cycle, move them and drop it.
//! 2. *Longest first*: first-fit bin packing in decreasing order, as for
//!    bins: paths by decreasing hop count (long paths constrain most), each
//!    to the lowest layer it closes no cycle in.
//!
//! Both get a limit, the VLs available: method (1) never searches a layer
//! at the limit (the paths moved off the last allowed layer go there, and
//! must all fit below when draining), method (2) places no path at or
//! above it. Either fails ([`Layering::needed`] is then the limit + 1) as
//! soon as it knows, so a fabric that does not fit costs no more than one
//! that does.
//!
//! Measured on the tori of `tests/sssp_engine.rs` (one host per switch, SSSP
//! paths): 4×4 needs 3 layers by (1) and 2 by (2); 5×5 3 and 3; 4×4×4 4 and
//! 3; 3×4×5 with two hosts per switch 6 and 5 (OpenSM's method alone, 8).
//!
//! The paths matter more than the heuristic. SSSP's default paths (least
//! loaded bottleneck, one tree per LID) turn between dimensions wherever
//! the load says, and on larger tori their dependencies close cycles
//! everywhere: with either method, 13 layers on a 6×6×6 torus, more than 15
//! on 8×8×8. The same tori routed with summed load and one tree per
//! destination switch ([`DfssspConfig::LAYERABLE`](super::DfssspConfig::LAYERABLE),
//! DFSSSP's fallback) need 4 layers (module documentation of
//! [`super`] for the figures).
//!
//! "Closes no cycle" is checked incrementally on a bitset of the finished
//! layer's dependencies: a path's new dependency `a -> b` closes a cycle iff
//! `b` already reaches `a`, searched against a topological order of the
//! layer kept up to date ([`crate::channels::OrderedInsert`]). A dependency that closes a
//! cycle before the path added anything is remembered per layer: finished
//! layers only gain dependencies, so later paths using it are turned away
//! without a search. The searches share a budget of channel visits
//! ([`FIT_BUDGET`]); when it runs out, method (1) stops fitting (paths go
//! up a layer, as in OpenSM) and method (2) gives up, so a huge cyclic
//! fabric costs time linear in the budget, not quadratic.
//!
//! ## Representation and cost
//! The paths to one LID form an in-tree (each switch has one next hop), so
//! the number of a layer's paths using dependency `(u->v, v->w)` for that
//! LID is the number of the layer's sources in `u`'s subtree. Counting per
//! LID is one O(S) pass over the tree: the whole CDG of a layer costs
//! O(S·L), with no per-path lists. Dependencies are numbered densely, per
//! switch `v`, as (in-channel row) × (out-channel column) (the index of
//! [`crate::channels::ChannelGraph`]), so the CDG is a
//! flat `u32` array of Σ deg(v)² counts (1.5 M for the 11,664-host fat
//! tree). The cycle search keeps its finished (black) channels across
//! moves: removing paths only removes dependencies, and a black channel
//! reaches no cycle, so each search resumes where the last one stopped;
//! a layer costs O(Σ deg² + cycles · cycle length) in searches plus, per
//! cycle broken, a scan of two switches' table rows (switch-major, so
//! contiguous) for the LIDs whose trees use the dependency, and the work of
//! those trees' subtrees.
//! Memory: the layer of every (source switch, LID) pair, S·L bytes,
//! destination-major, and the CDG counts.
//!
//! ## Balancing
//! When fewer layers are needed than VLs exist, balancing (on by default,
//! [`DfssspConfig::balance`](super::DfssspConfig::balance)) gives
//! each spare VL to the layer with the most paths per VL and spreads that
//! layer's paths over its VLs by (source switch's GUID rank + DLID). A
//! subset of an acyclic layer is acyclic, so no new cycle check is needed.
//! OpenSM does the same split but picks the VL at random per PathRecord
//! query; here the choice is fixed, so every query for a path gets the same
//! SL.

use crate::channels::{topological_order, CycleSearch, DepGraph, DepSet, OrderedInsert};
use crate::lft::{Lft, PathSl, UNROUTED};

use super::{Net, SsspConfig, NONE};

/// Layers DFSSSP may use: the data VLs IBA allows (VL0-VL14).
pub const MAX_LAYERS: u8 = 15;

/// How the paths were put on layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerMethod {
    /// All paths together have an acyclic CDG.
    SingleLayer,
    /// OpenSM's: break each cycle at its weakest dependency by moving its
    /// paths up a layer, then drain the top layers downwards.
    WeakestDependency,
    /// First fit, longest paths first; used when it needs fewer layers.
    LongestFirst,
}

/// What deadlock removal found, and where every path went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layering {
    /// Layers (VLs) deadlock freedom needs: 1 when all paths together have
    /// an acyclic CDG. One more than the limit the layering was given means
    /// more than that limit.
    pub needed: u8,
    /// Which heuristic gave the layers.
    pub method: LayerMethod,
    /// How the layered paths were routed: as configured, or as the
    /// fallback when those paths did not fit
    /// ([`DfssspConfig::fallback`](super::DfssspConfig::fallback)).
    pub sssp: SsspConfig,
    /// Paths (source switch, routed DLID) per layer, before balancing.
    pub paths_per_layer: Vec<u64>,
    /// Cycles the weakest-dependency method broke, each by moving the
    /// paths of one dependency off the layer.
    pub cycles_broken: u64,
    /// Paths it moved off a layer, counted at every move.
    pub paths_moved: u64,
    /// Per layer, the SLs it was spread over: (first SL, count). One SL
    /// per layer, equal to its index, unless balanced.
    pub sl_ranges: Vec<(u8, u8)>,
    /// SL (the layer until balanced) of `(lid, source switch)` at
    /// `lid * S + switch`.
    sl: Vec<u8>,
}

impl Layering {
    /// VLs the paths use.
    pub fn vls_used(&self) -> u8 {
        self.sl_ranges.iter().map(|r| r.1).sum()
    }

    /// Spreads the layers over `max_vls` VLs; see the module documentation.
    pub(crate) fn balance(&mut self, net: &Net, max_lid: u16, max_vls: u8) {
        let layers = self.paths_per_layer.len();
        if layers == 0 || usize::from(max_vls) <= layers {
            return;
        }
        let mut split = vec![1u8; layers];
        for _ in layers..usize::from(max_vls) {
            // The layer with the most paths per VL; ties to the lowest.
            let mut best = 0;
            for i in 1..layers {
                let (a, b) = (self.paths_per_layer[i] * u64::from(split[best]), self.paths_per_layer[best]);
                if a > b * u64::from(split[i]) {
                    best = i;
                }
            }
            split[best] += 1;
        }
        let mut first = Vec::with_capacity(layers);
        let mut next = 0u8;
        for &k in &split {
            first.push(next);
            next += k;
        }
        let ns = net.ns;
        for lid in 0..=usize::from(max_lid) {
            let row = &mut self.sl[lid * ns..(lid + 1) * ns];
            for (s, sl) in row.iter_mut().enumerate() {
                let l = usize::from(*sl);
                let k = usize::from(split[l]);
                *sl = first[l] + ((net.guid_rank[s] as usize + lid) % k) as u8;
            }
        }
        self.sl_ranges = first.into_iter().zip(split).collect();
    }

    /// The SLs per (source switch, DLID), as the SM and the SA need them;
    /// frees the destination-major copy.
    pub(crate) fn take_path_sl(&mut self, ns: usize, max_lid: u16) -> PathSl {
        let nl = usize::from(max_lid) + 1;
        let mut rows: Vec<Vec<u8>> = (0..ns).map(|_| vec![0u8; nl]).collect();
        const TILE: usize = 64;
        for l0 in (0..nl).step_by(TILE) {
            let l1 = (l0 + TILE).min(nl);
            for (s, row) in rows.iter_mut().enumerate() {
                for (lid, x) in row[l0..l1].iter_mut().enumerate() {
                    *x = self.sl[(l0 + lid) * ns + s];
                }
            }
        }
        self.sl = Vec::new();
        PathSl::per_switch(rows)
    }
}

/// The forwarding tree of one LID, read from its table column.
struct Tree {
    /// Next switch and the channel to it; `NONE` where the path leaves the
    /// switch fabric (delivered, unrouted, or a broken entry).
    nxt: Vec<u32>,
    chan: Vec<u32>,
    /// Every switch after its next hop.
    order: Vec<u32>,
    done: Vec<u32>,
    on_walk: Vec<u32>,
    stamp: u32,
    walk: Vec<u32>,
    /// Per switch: sources counted in its subtree.
    acc: Vec<u32>,
}

impl Tree {
    fn new(ns: usize) -> Tree {
        Tree {
            nxt: vec![NONE; ns],
            chan: vec![NONE; ns],
            order: Vec::with_capacity(ns),
            done: vec![0; ns],
            on_walk: vec![0; ns],
            stamp: 0,
            walk: Vec::new(),
            acc: vec![0; ns],
        }
    }

    /// Reads one LID's column. Tables from SSSP are trees; a forwarding loop
    /// (impossible from SSSP, but this must not hang on any column) is cut
    /// where it closes.
    fn load(&mut self, net: &Net, col: &[u8]) {
        let ns = net.ns;
        for (v, &p) in col.iter().enumerate() {
            let c = net.ch.chan_of_port(v, p);
            self.chan[v] = c;
            self.nxt[v] = if c == NONE { NONE } else { net.ch.head[c as usize] };
        }
        self.stamp += 1;
        let stamp = self.stamp;
        self.order.clear();
        for v in 0..ns {
            if self.done[v] == stamp {
                continue;
            }
            self.walk.clear();
            let mut x = v;
            loop {
                if self.done[x] == stamp {
                    break;
                }
                if self.on_walk[x] == stamp {
                    let last = *self.walk.last().expect("a loop has a node") as usize;
                    self.nxt[last] = NONE;
                    self.chan[last] = NONE;
                    break;
                }
                self.on_walk[x] = stamp;
                self.walk.push(x as u32);
                if self.nxt[x] == NONE {
                    break;
                }
                x = self.nxt[x] as usize;
            }
            for &w in self.walk.iter().rev() {
                self.done[w as usize] = stamp;
                self.order.push(w);
            }
        }
    }

    /// Adds (or subtracts) to `cnt` the dependencies of the sources
    /// counted in `acc` (one per source path), then leaves `acc` summed
    /// over subtrees.
    fn apply(&mut self, net: &Net, cnt: &mut [u32], add: bool) {
        for &v in self.order.iter().rev() {
            let n = self.nxt[v as usize];
            if n != NONE {
                self.acc[n as usize] += self.acc[v as usize];
            }
        }
        for v in 0..net.ns {
            let a = self.acc[v];
            let c1 = self.chan[v];
            if a == 0 || c1 == NONE {
                continue;
            }
            let c2 = self.chan[self.nxt[v] as usize];
            if c2 == NONE {
                continue;
            }
            let e = net.ch.dep(c1 as usize, c2 as usize);
            if add {
                cnt[e] += a;
            } else {
                cnt[e] -= a;
            }
        }
    }
}

/// The start of every cycle search over a layer: channels of switches in
/// GUID order, each switch's by port, so that the cycles found do not
/// depend on the fabric's numbering.
fn roots_by_guid(net: &Net) -> Vec<u32> {
    let mut by_guid: Vec<usize> = (0..net.ns).collect();
    by_guid.sort_by_key(|&s| net.guid_rank[s]);
    by_guid.iter().flat_map(|&s| net.ch.out(s)).collect()
}

/// The dependency with the fewest paths on `cycle` (the first such along
/// it), as (channel, channel).
fn weakest(net: &Net, cnt: &[u32], cycle: &[u32]) -> (usize, usize) {
    let chans: Vec<usize> = cycle.iter().chain(&cycle[..1]).map(|&c| c as usize).collect();
    let mut best = (u32::MAX, 0, 0);
    for w in chans.windows(2) {
        let n = cnt[net.ch.dep(w[0], w[1])];
        if n < best.0 {
            best = (n, w[0], w[1]);
        }
    }
    (best.1, best.2)
}

/// Puts every path on one of at most `limit` (1..=[`MAX_LAYERS`]) layers;
/// see the module documentation. `cols` and `lfts` are the same tables,
/// destination-major and per switch. `to_end_port[lid]` tells whether an
/// end port owns `lid`. When the paths need more, `needed` is `limit + 1`.
pub(crate) fn assign_layers(
    net: &Net,
    cols: &[u8],
    lfts: &[Lft],
    max_lid: u16,
    to_end_port: &[bool],
    limit: u8,
) -> Layering {
    let limit = limit.clamp(1, MAX_LAYERS);
    let ns = net.ns;
    let nl = usize::from(max_lid) + 1;
    let lids: Vec<usize> = if ns == 0 {
        Vec::new()
    } else {
        // LIDs some switch routes: the rest carry no path.
        (1..nl).filter(|&lid| cols[lid * ns..(lid + 1) * ns].iter().any(|&p| p != UNROUTED)).collect()
    };
    let mut by_rank: Vec<usize> = (0..ns).collect();
    by_rank.sort_by_key(|&s| net.guid_rank[s]);
    let new_layerer = |lids: Vec<usize>| Layerer {
        net,
        cols,
        lfts,
        to_end_port,
        limit,
        lids,
        by_rank: by_rank.clone(),
        cnt: Vec::new(),
        tree: Tree::new(ns),
        done_layers: Vec::new(),
        fit: Fit::new(net.ch.num_channels()),
        sl: vec![0u8; ns * nl],
    };
    let mut w = new_layerer(lids.clone());
    let mut out = w.weakest_dependency();
    if out.needed > 1 {
        let mut f = new_layerer(lids);
        if let Some(top) = f.longest_first() {
            // Also when the first method failed: `needed` is then limit + 1.
            if top + 1 < out.needed {
                out.needed = top + 1;
                out.method = LayerMethod::LongestFirst;
                out.paths_per_layer = f.paths_per_layer(top);
                out.sl_ranges = (0..=top).map(|l| (l, 1)).collect();
                w.sl = f.sl;
            }
        }
    }
    out.sl = w.sl;
    out
}

/// A finished layer: its dependencies and a topological order of its
/// channels, kept up to date as paths are added ([`OrderedInsert`]).
struct Finished {
    deps: DepSet,
    /// Position of each channel in the topological order.
    ord: Vec<u32>,
    /// Dependencies found to close a cycle on their own. A finished layer
    /// only gains dependencies, so they stay refused: a path using one is
    /// turned away without a search.
    refused: DepSet,
}

impl Finished {
    /// An empty layer (any order is topological).
    fn empty(net: &Net) -> Finished {
        let deps = DepSet::new(&net.ch);
        Finished { refused: deps.clone(), deps, ord: (0..net.ch.num_channels() as u32).collect() }
    }

    /// The dependencies with paths in `cnt` (acyclic), in the order of a
    /// depth-first search ([`topological_order`]).
    fn from_counts(net: &Net, cnt: &[u32]) -> Finished {
        let mut f = Finished::empty(net);
        for (e, &n) in cnt.iter().enumerate() {
            if n > 0 {
                f.deps.insert(e);
            }
        }
        let deps = &f.deps;
        f.ord = topological_order(&DepGraph { g: &net.ch, has: |e| deps.contains(e) })
            .expect("a finished layer is acyclic");
        f
    }

    /// Adds dependency `e = a -> b` unless it closes a cycle; false then
    /// (the layer is unchanged). None when the budget ran out.
    fn add(&mut self, net: &Net, fit: &mut Fit, e: usize, a: usize, b: usize) -> Option<bool> {
        if self.deps.contains(e) {
            return Some(true);
        }
        let deps = &self.deps;
        let fits =
            fit.insert.try_insert(&net.ch, &mut self.ord, |x| deps.contains(x), a as u32, b as u32, &mut fit.budget)?;
        if fits {
            self.deps.insert(e);
        }
        Some(fits)
    }
}

/// Scratch for fitting paths into finished layers.
struct Fit {
    deps: Vec<(usize, usize, usize)>,
    added: Vec<usize>,
    insert: OrderedInsert,
    /// Channel visits left ([`FIT_BUDGET`]).
    budget: u64,
}

/// Channel visits the fitting searches of one method may spend (a few
/// tenths of a second).
pub const FIT_BUDGET: u64 = 50_000_000;

impl Fit {
    fn new(channels: usize) -> Fit {
        Fit { deps: Vec::new(), added: Vec::new(), insert: OrderedInsert::new(channels), budget: FIT_BUDGET }
    }
}

/// The state of one layering run.
struct Layerer<'a> {
    net: &'a Net,
    cols: &'a [u8],
    lfts: &'a [Lft],
    to_end_port: &'a [bool],
    /// Layers the paths may use.
    limit: u8,
    lids: Vec<usize>,
    /// Switches in GUID order: sources are visited in it, so that results
    /// do not depend on the fabric's numbering.
    by_rank: Vec<usize>,
    /// Paths per dependency in the layer being processed.
    cnt: Vec<u32>,
    tree: Tree,
    /// Dependencies of the layers already made acyclic.
    done_layers: Vec<Finished>,
    fit: Fit,
    /// Layer of `(lid, source switch)` at `lid * S + switch`.
    sl: Vec<u8>,
}

impl Layerer<'_> {
    /// OpenSM's method (module documentation), then draining the top layers
    /// into the lower ones while they fit.
    fn weakest_dependency(&mut self) -> Layering {
        let mut out = Layering {
            needed: 1,
            method: LayerMethod::SingleLayer,
            sssp: SsspConfig::default(),
            paths_per_layer: Vec::new(),
            cycles_broken: 0,
            paths_moved: 0,
            sl_ranges: vec![(0, 1)],
            sl: Vec::new(),
        };
        if self.net.ns == 0 {
            out.paths_per_layer.push(0);
            return out;
        }
        self.cnt = vec![0u32; self.net.ch.num_deps()];
        let mut search = CycleSearch::new(self.net.ch.num_channels(), roots_by_guid(self.net));
        let mut top = 0u8;
        for layer in 0..self.limit {
            if !self.count_layer(layer) && layer > 0 {
                break;
            }
            top = layer;
            search.reset();
            // Paths moved off the last allowed layer land on layer `limit`,
            // which is never searched: it must drain below entirely, which
            // takes fitting searches, so an empty budget means failure.
            while let Some(cycle) = search.next_cycle(&DepGraph { g: &self.net.ch, has: |e| self.cnt[e] > 0 }) {
                let (c1, c2) = weakest(self.net, &self.cnt, &cycle);
                let moved = self.move_paths(layer, c1, c2);
                debug_assert!(moved > 0, "a dependency with paths has paths to move");
                out.cycles_broken += 1;
                out.paths_moved += moved;
                if layer + 1 == self.limit && self.fit.budget == 0 {
                    out.needed = self.limit + 1;
                    out.method = LayerMethod::WeakestDependency;
                    return out;
                }
            }
            self.done_layers.push(Finished::from_counts(self.net, &self.cnt));
        }
        if top + 1 == self.limit && self.count_layer(self.limit) {
            top = self.limit;
        }
        if top > 0 {
            out.method = LayerMethod::WeakestDependency;
        }
        // The last layers often hold a handful of paths that fit below after
        // all, now that the lower layers are final.
        while top > 0 && self.drain(top) {
            top -= 1;
        }
        self.cnt = Vec::new();
        if top == self.limit {
            out.needed = self.limit + 1;
            return out;
        }
        out.needed = top + 1;
        out.paths_per_layer = self.paths_per_layer(top);
        out.sl_ranges = (0..=top).map(|l| (l, 1)).collect();
        out
    }

    /// First fit, longest paths first: every path, in order of decreasing
    /// switch-to-switch hops (then LID, then source switch GUID), goes to
    /// the lowest layer it closes no cycle in. Returns the top layer used,
    /// or None if some path fits in no layer or the search budget ran out.
    fn longest_first(&mut self) -> Option<u8> {
        let net = self.net;
        let ns = net.ns;
        self.done_layers = (0..self.limit).map(|_| Finished::empty(self.net)).collect();
        // Dependencies per path = hops - 1; paths with none stay on layer 0.
        let mut len = vec![0u8; self.sl.len()];
        let mut longest = 0u8;
        for &lid in &self.lids {
            let col = &self.cols[lid * ns..(lid + 1) * ns];
            self.tree.load(net, col);
            // `order` lists every switch after its next hop.
            for i in 0..ns {
                let x = self.tree.order[i] as usize;
                let n = self.tree.nxt[x];
                self.tree.acc[x] = if n == NONE { 0 } else { self.tree.acc[n as usize] + 1 };
            }
            for s in 0..ns {
                if self.counts(lid, s, col) {
                    let h = self.tree.acc[s].min(255) as u8;
                    len[lid * ns + s] = h;
                    longest = longest.max(h);
                }
            }
        }
        let mut top = 0u8;
        for h in (2..=longest).rev() {
            for i in 0..self.lids.len() {
                let lid = self.lids[i];
                for r in 0..ns {
                    let s = self.by_rank[r];
                    if len[lid * ns + s] != h {
                        continue;
                    }
                    let k = self.fit_below(lid, s, self.limit)?;
                    self.sl[lid * ns + s] = k;
                    top = top.max(k);
                }
            }
        }
        Some(top)
    }

    /// Whether the path from `s` to `lid` carries traffic (module docs).
    #[inline]
    fn counts(&self, lid: usize, s: usize, col: &[u8]) -> bool {
        col[s] != UNROUTED && (self.to_end_port[lid] || self.net.local[s] > 0)
    }

    /// Builds `cnt` for `layer` from scratch; false if it has no path.
    fn count_layer(&mut self, layer: u8) -> bool {
        let ns = self.net.ns;
        self.cnt.fill(0);
        let mut any_path = false;
        for i in 0..self.lids.len() {
            let lid = self.lids[i];
            let col = &self.cols[lid * ns..(lid + 1) * ns];
            let mut any = false;
            for s in 0..ns {
                let mine = self.sl[lid * ns + s] == layer && self.counts(lid, s, col);
                self.tree.acc[s] = u32::from(mine);
                any |= mine;
            }
            if any {
                any_path = true;
                self.tree.load(self.net, col);
                self.tree.apply(self.net, &mut self.cnt, true);
            }
        }
        any_path
    }

    /// Paths per layer `0..=top`.
    fn paths_per_layer(&self, top: u8) -> Vec<u64> {
        let ns = self.net.ns;
        let mut per = vec![0u64; usize::from(top) + 1];
        for &lid in &self.lids {
            let col = &self.cols[lid * ns..(lid + 1) * ns];
            for s in 0..ns {
                if self.counts(lid, s, col) {
                    per[usize::from(self.sl[lid * ns + s])] += 1;
                }
            }
        }
        per
    }

    /// Moves the paths of `layer` that use dependency `c1 -> c2` out of it:
    /// into the lowest finished layer they fit in without a cycle, else the
    /// next layer. Removes their dependencies from `cnt`; returns how many
    /// moved.
    fn move_paths(&mut self, layer: u8, c1: usize, c2: usize) -> u64 {
        let net = self.net;
        let ns = net.ns;
        let (u, v) = (net.ch.tail[c1] as usize, net.ch.head[c1] as usize);
        let (p, q) = (net.ch.port[c1], net.ch.port[c2]);
        let mut moved = 0u64;
        let mut movers = Vec::new();
        // The switch-major tables: two contiguous rows to scan.
        let (row_u, row_v) = (&self.lfts[u].ports, &self.lfts[v].ports);
        for i in 0..self.lids.len() {
            let lid = self.lids[i];
            if row_u[lid] != p || row_v[lid] != q {
                continue;
            }
            let col = &self.cols[lid * ns..(lid + 1) * ns];
            // The sources whose path reaches u: u's subtree, found backwards
            // from u (each switch after its next hop), so the work is the
            // subtree's, not the fabric's.
            let t = &mut self.tree;
            t.stamp += 1;
            let stamp = t.stamp;
            t.walk.clear();
            t.walk.push(u as u32);
            t.done[u] = stamp;
            t.chan[u] = c1 as u32;
            let mut head = 0;
            while head < t.walk.len() {
                let y = t.walk[head] as usize;
                head += 1;
                for c_out in net.ch.channels(y) {
                    let x = net.ch.head[c_out] as usize;
                    let rc = net.ch.reverse(c_out);
                    if col[x] == net.ch.port[rc] && t.done[x] != stamp {
                        t.done[x] = stamp;
                        t.chan[x] = rc as u32;
                        t.walk.push(x as u32);
                    }
                }
            }
            movers.clear();
            for &x in &t.walk {
                let x = x as usize;
                let go =
                    self.sl[lid * ns + x] == layer && col[x] != UNROUTED && (self.to_end_port[lid] || net.local[x] > 0);
                t.acc[x] = u32::from(go);
                if go {
                    movers.push(x);
                }
            }
            // Subtree sums, sources first; inside the subtree each switch's
            // dependency (its channel, its parent's channel) loses them.
            for &x in t.walk[1..].iter().rev() {
                let x = x as usize;
                let cx = t.chan[x] as usize;
                let y = net.ch.head[cx] as usize;
                t.acc[y] += t.acc[x];
                if t.acc[x] > 0 {
                    self.cnt[net.ch.dep(cx, t.chan[y] as usize)] -= t.acc[x];
                }
            }
            // From u on, every moved path follows the same way.
            let total = t.acc[u];
            let (mut c, mut y, mut steps) = (c1, v, 0);
            while total > 0 && steps < ns {
                let c_next = net.ch.chan_of_port(y, col[y]);
                if c_next == NONE {
                    break;
                }
                self.cnt[net.ch.dep(c, c_next as usize)] -= total;
                c = c_next as usize;
                y = net.ch.head[c] as usize;
                steps += 1;
            }
            movers.sort_by_key(|&x| net.guid_rank[x]);
            for &x in &movers {
                let to = self.fit_below(lid, x, layer).unwrap_or(layer + 1);
                self.sl[lid * ns + x] = to;
            }
            moved += movers.len() as u64;
        }
        moved
    }

    /// The lowest finished layer below `limit` that takes the path from `s`
    /// to `lid` without a cycle (its dependencies are added there).
    fn fit_below(&mut self, lid: usize, s: usize, limit: u8) -> Option<u8> {
        if self.fit.budget == 0 || limit == 0 {
            return None;
        }
        let net = self.net;
        let ns = net.ns;
        let col = &self.cols[lid * ns..(lid + 1) * ns];
        self.fit.deps.clear();
        let mut c1 = net.ch.chan_of_port(s, col[s]);
        let mut steps = 0;
        while c1 != NONE && steps < ns {
            let y = net.ch.head[c1 as usize] as usize;
            let c2 = net.ch.chan_of_port(y, col[y]);
            if c2 == NONE {
                break;
            }
            let e = net.ch.dep(c1 as usize, c2 as usize);
            self.fit.deps.push((e, c1 as usize, c2 as usize));
            c1 = c2;
            steps += 1;
        }
        'layers: for k in 0..usize::from(limit).min(self.done_layers.len()) {
            let layer = &mut self.done_layers[k];
            if self.fit.deps.iter().any(|&(e, _, _)| layer.refused.contains(e)) {
                continue;
            }
            self.fit.added.clear();
            for i in 0..self.fit.deps.len() {
                let (e, a, b) = self.fit.deps[i];
                let fresh = !layer.deps.contains(e);
                match layer.add(net, &mut self.fit, e, a, b) {
                    Some(true) => {
                        if fresh {
                            self.fit.added.push(e);
                        }
                    }
                    verdict => {
                        // Before this path added anything, the cycle is
                        // the layer's own.
                        if verdict == Some(false) && self.fit.added.is_empty() {
                            layer.refused.insert(e);
                        }
                        // Undo this path's additions: the order stays
                        // topological for the smaller graph.
                        for &e in &self.fit.added {
                            layer.deps.remove(e);
                        }
                        if verdict.is_none() {
                            self.fit.budget = 0;
                            return None;
                        }
                        continue 'layers;
                    }
                }
            }
            return Some(k as u8);
        }
        None
    }

    /// Tries to fit every path of layer `top` into the layers below it;
    /// true if the layer emptied.
    fn drain(&mut self, top: u8) -> bool {
        let ns = self.net.ns;
        let mut all = true;
        for i in 0..self.lids.len() {
            let lid = self.lids[i];
            for r in 0..ns {
                let s = self.by_rank[r];
                if self.sl[lid * ns + s] != top || !self.counts(lid, s, &self.cols[lid * ns..(lid + 1) * ns]) {
                    continue;
                }
                match self.fit_below(lid, s, top) {
                    Some(k) => self.sl[lid * ns + s] = k,
                    None => all = false,
                }
            }
        }
        if all {
            // Paths that carry no traffic may still sit on the top layer.
            for x in self.sl.iter_mut() {
                if *x == top {
                    *x = 0;
                }
            }
            // Layer `limit` never had a finished copy.
            self.done_layers.truncate(usize::from(top));
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testfab;

    /// Columns that loop (not SSSP's, but layering must not hang on any
    /// table): every switch of a ring forwards LID 1 clockwise forever.
    #[test]
    fn forwarding_loops_do_not_hang_the_layering() {
        let f = testfab::ring(4, 1);
        let net = Net::new(&f);
        let ns = net.ns;
        let nl = usize::from(f.max_lid()) + 1;
        let mut cols = vec![UNROUTED; ns * nl];
        for s in 0..ns {
            // Port 1 leads to the next switch of the ring.
            cols[ns + s] = 1;
        }
        let to_end = vec![true; nl];
        let lfts = crate::sssp::transpose_to_lfts(&cols, ns, f.max_lid());
        let l = assign_layers(&net, &cols, &lfts, f.max_lid(), &to_end, MAX_LAYERS);
        // The loop is cut where the walk closes it, so what remains is a
        // chain: no cycle, one layer.
        assert_eq!(l.needed, 1, "{l:?}");
        assert_eq!(l.paths_per_layer, vec![4]);
    }

    #[test]
    fn a_ring_of_one_way_paths_needs_two_layers() {
        // Every switch sends LID of the switch two hops clockwise that way:
        // four 2-hop paths whose dependencies close one cycle.
        let f = testfab::ring(4, 0);
        let net = Net::new(&f);
        let ns = net.ns;
        let nl = usize::from(f.max_lid()) + 1;
        let mut cols = vec![UNROUTED; ns * nl];
        for s in 0..ns {
            let lid = usize::from(f.switches()[s].base_lid);
            cols[lid * ns + s] = 0;
            // Port 1 leads to the next switch of the ring.
            cols[lid * ns + (s + ns - 1) % ns] = 1;
            cols[lid * ns + (s + ns - 2) % ns] = 1;
        }
        // Count these switch-to-switch paths as traffic.
        let to_end = vec![true; nl];
        let lfts = crate::sssp::transpose_to_lfts(&cols, ns, f.max_lid());
        let l = assign_layers(&net, &cols, &lfts, f.max_lid(), &to_end, MAX_LAYERS);
        assert_eq!(l.needed, 2, "{l:?}");
        // Per LID: two hops, one hop, and the owner to itself.
        assert_eq!(l.paths_per_layer.iter().sum::<u64>(), 12);
        assert!(l.cycles_broken >= 1 || l.method == LayerMethod::LongestFirst);

        // Limited to what they need, both methods still find it; limited
        // to one layer, they report more than one.
        assert_eq!(assign_layers(&net, &cols, &lfts, f.max_lid(), &to_end, 2).needed, 2);
        let one = assign_layers(&net, &cols, &lfts, f.max_lid(), &to_end, 1);
        assert_eq!(one.needed, 2, "{one:?}");
    }
}
