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
//! ## Layering, as OpenSM's `dfsssp_remove_deadlocks`
//! All paths start in layer 0. For layer `i`: search its CDG for a cycle
//! (depth-first); take the cycle's *weakest* dependency, the one the fewest
//! paths of the layer use (the first such along the cycle); move every path
//! using it to layer `i + 1`; repeat until layer `i` is acyclic, then go on
//! with layer `i + 1`. Finding the fewest layers is NP-complete (the paper),
//! so this is a heuristic; it needs 2 layers on rings and tori of the sizes
//! tested and 1 on fat trees.
//!
//! ## Representation and cost
//! The paths to one LID form an in-tree (each switch has one next hop), so
//! the number of a layer's paths using dependency `(u->v, v->w)` for that
//! LID is the number of the layer's sources in `u`'s subtree. Counting per
//! LID is one O(S) pass over the tree: the whole CDG of a layer costs
//! O(S·L), with no per-path lists. Dependencies are numbered densely, per
//! switch `v`, as (in-channel row) × (out-channel column), so the CDG is a
//! flat `u32` array of Σ deg(v)² counts (1.5 M for the 11,664-host fat
//! tree). The cycle search keeps its finished (black) channels across
//! moves: removing paths only removes dependencies, and a black channel
//! reaches no cycle, so each search resumes where the last one stopped;
//! a layer costs O(Σ deg² + cycles · cycle length) in searches plus, per
//! cycle broken, a scan of the LIDs whose trees use the dependency.
//! Memory: the layer of every (source switch, LID) pair, S·L bytes,
//! destination-major, and the CDG counts.
//!
//! ## Balancing
//! When fewer layers are needed than VLs exist, [`Layering::balance`] gives
//! each spare VL to the layer with the most paths per VL and spreads that
//! layer's paths over its VLs by (source switch's GUID rank + DLID). A
//! subset of an acyclic layer is acyclic, so no new cycle check is needed.
//! OpenSM does the same split but picks the VL at random per PathRecord
//! query; here the choice is fixed, so every query for a path gets the same
//! SL.

use crate::lft::{PathSl, UNROUTED};

use super::{Net, NONE};

/// Layers DFSSSP may use: the data VLs IBA allows (VL0-VL14).
pub const MAX_LAYERS: u8 = 15;

/// What deadlock removal found, and where every path went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layering {
    /// Layers (VLs) deadlock freedom needs: 1 when all paths together have
    /// an acyclic CDG. `MAX_LAYERS + 1` means more than [`MAX_LAYERS`].
    pub needed: u8,
    /// Paths (source switch, routed DLID) per layer, before balancing.
    pub paths_per_layer: Vec<u64>,
    /// Cycles broken, each by moving the paths of one dependency up a layer.
    pub cycles_broken: u64,
    /// Paths moved up a layer, counted at every move.
    pub paths_moved: u64,
    /// Per layer, the SLs it was spread over: (first SL, count). One SL
    /// per layer, equal to its index, until [`Layering::balance`].
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
        PathSl { by_source_switch: rows }
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
    mark: Vec<bool>,
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
            mark: vec![false; ns],
        }
    }

    /// Reads one LID's column. Tables from SSSP are trees; a forwarding loop
    /// (impossible from SSSP, but this must not hang on any column) is cut
    /// where it closes.
    fn load(&mut self, net: &Net, col: &[u8]) {
        let ns = net.ns;
        for (v, &p) in col.iter().enumerate() {
            let c = net.chan_of_port(v, p);
            self.chan[v] = c;
            self.nxt[v] = if c == NONE { NONE } else { net.head[c as usize] };
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
    fn apply(&mut self, net: &Net, cdg: &Cdg, cnt: &mut [u32], add: bool) {
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
            let e = cdg.edge(net, c1 as usize, c2 as usize);
            if add {
                cnt[e] += a;
            } else {
                cnt[e] -= a;
            }
        }
    }
}

/// Dense numbering of dependencies: for channel `c1 = u->v` and
/// `c2 = v->w`, `base[v] + in_local[c1] * deg(v) + (c2 - first channel of v)`.
struct Cdg {
    base: Vec<usize>,
}

impl Cdg {
    fn new(net: &Net) -> Cdg {
        let mut base = Vec::with_capacity(net.ns + 1);
        let mut total = 0usize;
        for v in 0..net.ns {
            base.push(total);
            total += net.degree(v) * net.degree(v);
        }
        base.push(total);
        Cdg { base }
    }

    fn len(&self) -> usize {
        *self.base.last().unwrap_or(&0)
    }

    #[inline]
    fn edge(&self, net: &Net, c1: usize, c2: usize) -> usize {
        let v = net.head[c1] as usize;
        self.base[v] + net.in_local[c1] as usize * net.degree(v) + (c2 - net.base[v] as usize)
    }
}

const WHITE: u8 = 0;
const GRAY: u8 = 1;
const BLACK: u8 = 2;

/// Depth-first cycle search over one layer's CDG that resumes after each
/// cycle is broken.
struct CycleSearch {
    color: Vec<u8>,
    /// (channel, next out-dependency to look at).
    stack: Vec<(u32, u32)>,
    /// Channels in root order: switches by GUID, their channels by port.
    roots: Vec<u32>,
    root: usize,
}

impl CycleSearch {
    fn new(net: &Net) -> CycleSearch {
        let mut by_guid: Vec<usize> = (0..net.ns).collect();
        by_guid.sort_by_key(|&s| net.guid_rank[s]);
        let roots = by_guid.iter().flat_map(|&s| net.channels(s).map(|c| c as u32)).collect();
        CycleSearch { color: vec![WHITE; net.num_channels()], stack: Vec::new(), roots, root: 0 }
    }

    fn reset(&mut self) {
        self.color.fill(WHITE);
        self.stack.clear();
        self.root = 0;
    }

    /// The weakest dependency `(c1, c2)` of the next cycle, or None when
    /// the layer is acyclic.
    fn next_cycle(&mut self, net: &Net, cdg: &Cdg, cnt: &[u32]) -> Option<(usize, usize)> {
        loop {
            if self.stack.is_empty() {
                while self.root < self.roots.len() && self.color[self.roots[self.root] as usize] != WHITE {
                    self.root += 1;
                }
                let &r = self.roots.get(self.root)?;
                self.color[r as usize] = GRAY;
                self.stack.push((r, 0));
            }
            let top = self.stack.len() - 1;
            let (c, j0) = self.stack[top];
            let v = net.head[c as usize] as usize;
            let deg = net.degree(v);
            let row = cdg.base[v] + net.in_local[c as usize] as usize * deg;
            let mut pushed = false;
            for j in j0 as usize..deg {
                if cnt[row + j] == 0 {
                    continue;
                }
                let t = net.base[v] as usize + j;
                match self.color[t] {
                    WHITE => {
                        self.stack[top].1 = j as u32 + 1;
                        self.color[t] = GRAY;
                        self.stack.push((t as u32, 0));
                        pushed = true;
                        break;
                    }
                    GRAY => {
                        let weakest = self.weakest(net, cdg, cnt, t);
                        // Channels on the stack are not known to be
                        // cycle-free any more: search them again.
                        for (c, _) in self.stack.drain(..) {
                            self.color[c as usize] = WHITE;
                        }
                        return Some(weakest);
                    }
                    _ => {}
                }
            }
            if !pushed {
                self.color[c as usize] = BLACK;
                self.stack.pop();
            }
        }
    }

    /// The dependency with the fewest paths on the cycle closed by an edge
    /// from the stack's top back to channel `t`.
    fn weakest(&self, net: &Net, cdg: &Cdg, cnt: &[u32], t: usize) -> (usize, usize) {
        let k = self.stack.iter().rposition(|&(c, _)| c as usize == t).expect("a gray channel is on the stack");
        let chans: Vec<usize> = self.stack[k..].iter().map(|&(c, _)| c as usize).chain([t]).collect();
        let mut best = (u32::MAX, 0, 0);
        for w in chans.windows(2) {
            let n = cnt[cdg.edge(net, w[0], w[1])];
            if n < best.0 {
                best = (n, w[0], w[1]);
            }
        }
        (best.1, best.2)
    }
}

/// Puts every path on a layer; see the module documentation.
/// `to_end_port[lid]` tells whether an end port owns `lid`.
pub(crate) fn assign_layers(net: &Net, cols: &[u8], max_lid: u16, to_end_port: &[bool]) -> Layering {
    let ns = net.ns;
    let nl = usize::from(max_lid) + 1;
    let mut sl = vec![0u8; ns * nl];
    let mut out = Layering {
        needed: 1,
        paths_per_layer: Vec::new(),
        cycles_broken: 0,
        paths_moved: 0,
        sl_ranges: Vec::new(),
        sl: Vec::new(),
    };
    if ns == 0 {
        out.paths_per_layer.push(0);
        out.sl_ranges.push((0, 1));
        out.sl = sl;
        return out;
    }
    // LIDs some switch routes: the rest carry no path.
    let lids: Vec<usize> =
        (1..nl).filter(|&lid| cols[lid * ns..(lid + 1) * ns].iter().any(|&p| p != UNROUTED)).collect();
    let cdg = Cdg::new(net);
    let mut cnt = vec![0u32; cdg.len()];
    let mut tree = Tree::new(ns);
    let mut search = CycleSearch::new(net);

    for layer in 0..MAX_LAYERS {
        // This layer's CDG from scratch.
        cnt.fill(0);
        let mut paths = 0u64;
        for &lid in &lids {
            let col = &cols[lid * ns..(lid + 1) * ns];
            let lay = &sl[lid * ns..(lid + 1) * ns];
            let mut any = false;
            let to_end = to_end_port[lid];
            for s in 0..ns {
                let mine = lay[s] == layer && col[s] != UNROUTED && (to_end || net.local[s] > 0);
                tree.acc[s] = u32::from(mine);
                any |= mine;
                paths += u64::from(mine);
            }
            if any {
                tree.load(net, col);
                tree.apply(net, &cdg, &mut cnt, true);
            }
        }
        if paths == 0 && layer > 0 {
            break;
        }
        out.paths_per_layer.push(paths);
        out.needed = layer + 1;
        search.reset();
        while let Some((c1, c2)) = search.next_cycle(net, &cdg, &cnt) {
            if layer + 1 == MAX_LAYERS {
                out.needed = MAX_LAYERS + 1;
                out.sl = sl;
                return out;
            }
            let moved = move_paths(net, &cdg, cols, &mut sl, &lids, to_end_port, &mut tree, &mut cnt, layer, c1, c2);
            debug_assert!(moved > 0, "a dependency with paths has paths to move");
            out.cycles_broken += 1;
            out.paths_moved += moved;
            out.paths_per_layer[usize::from(layer)] -= moved;
        }
    }
    out.sl_ranges = (0..out.paths_per_layer.len() as u8).map(|l| (l, 1)).collect();
    out.sl = sl;
    out
}

/// Moves the paths of `layer` that use dependency `c1 -> c2` to the next
/// layer, removing their dependencies from `cnt`; returns how many moved.
#[allow(clippy::too_many_arguments)]
fn move_paths(
    net: &Net,
    cdg: &Cdg,
    cols: &[u8],
    sl: &mut [u8],
    lids: &[usize],
    to_end_port: &[bool],
    tree: &mut Tree,
    cnt: &mut [u32],
    layer: u8,
    c1: usize,
    c2: usize,
) -> u64 {
    let ns = net.ns;
    let (u, v) = (net.tail[c1] as usize, net.head[c1] as usize);
    let (p, q) = (net.port[c1], net.port[c2]);
    let mut moved = 0u64;
    for &lid in lids {
        let col = &cols[lid * ns..(lid + 1) * ns];
        if col[u] != p || col[v] != q {
            continue;
        }
        tree.load(net, col);
        // Sources whose path reaches u: u's subtree (each switch after its
        // next hop in `order`, so the next hop is decided first).
        for &x in &tree.order {
            let x = x as usize;
            let n = tree.nxt[x];
            tree.mark[x] = x == u || (n != NONE && tree.mark[n as usize]);
        }
        let lay = &mut sl[lid * ns..(lid + 1) * ns];
        let to_end = to_end_port[lid];
        for x in 0..ns {
            let go = tree.mark[x] && lay[x] == layer && col[x] != UNROUTED && (to_end || net.local[x] > 0);
            tree.acc[x] = u32::from(go);
            if go {
                lay[x] = layer + 1;
                moved += 1;
            }
        }
        tree.apply(net, cdg, cnt, false);
    }
    moved
}
