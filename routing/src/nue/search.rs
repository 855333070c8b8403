//! The per-destination search: Dijkstra outward from the destination over
//! admissible turns, with re-picking, backtracking and the fallbacks for
//! stranded switches (escape paths, unlayered shortest paths).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::lft::Lft;

use super::cdg::{Cdg, BLOCKED, UNUSED, USED, WET};
use super::escape::Escape;
use super::net::Net;
use super::{Dest, NueStats, NONE, NO_EDGE};

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

/// Per-destination search state, reused.
pub(super) struct Search {
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
    pub(super) floor: u64,
    /// Whether [`rechoose`] runs.
    pub(super) aware: bool,
}

impl Search {
    pub(super) fn new(n: usize, channels: usize) -> Search {
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
                self.kid_end[net.ch.head[self.chan[v as usize] as usize] as usize] += 1;
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
                let h = net.ch.head[self.chan[v as usize] as usize] as usize;
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
            x = net.ch.head[c as usize];
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
            u = net.ch.head[c];
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
    let base = net.ch.base[u] as usize;
    for k in 0..net.ch.degree(u) {
        // The channel from neighbour x into u.
        let c_in = net.ch.rev[base + k];
        let x = net.ch.tail[c_in as usize] as usize;
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
        for c in net.ch.out(x) {
            let u = net.ch.head[c as usize];
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
        let u = net.ch.head[c as usize];
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
        w = net.ch.head[s.chan[w as usize] as usize];
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
        for cx in net.ch.out(x as usize) {
            let v = net.ch.head[cx as usize];
            if !s.settled[v as usize] || v == d {
                continue;
            }
            for c2 in net.ch.out(v as usize) {
                let w = net.ch.head[c2 as usize];
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
pub(super) fn route_one(
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
                let h = net.ch.head[s.chan[v] as usize];
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
            lfts[net.order[v as usize].index()].ports[usize::from(dest.lid)] = net.ch.port[c];
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
            let h = net.ch.head[c] as usize;
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
            let y = net.ch.head[c as usize];
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
            let x = net.ch.head[s.chan[zi] as usize];
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
            let y = net.ch.head[s.chan[xi] as usize];
            if s.in_escape[y as usize] && s.cand[xi] != net.dep(s.chan[xi], s.chan[y as usize]) {
                s.release(cdg, xi);
                s.cand[xi] = net.dep(s.chan[xi], s.chan[y as usize]);
            }
        }
        if allow_join && has_loop(net, s, nodes, d) {
            // Undo the joins: the joined switches' successors move too.
            allow_join = false;
            for &x in &joined {
                let y = net.ch.head[s.chan[x as usize] as usize];
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
        let y = net.ch.head[s.chan[xi] as usize];
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
        for c in net.ch.out(u) {
            let w = net.ch.head[c as usize] as usize;
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
            .ch
            .out(xi)
            .find(|&c| dist[net.ch.head[c as usize] as usize] + 1 == dist[xi])
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
            x = net.ch.head[s.chan[x as usize] as usize];
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
