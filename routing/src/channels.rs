//! The channel graph every deadlock-aware engine and the analysis work on:
//! one numbering of directed switch-to-switch cables and of the
//! dependencies between them, and the cycle checks over those
//! dependencies.
//!
//! A *channel* is a directed switch-to-switch cable. A packet that enters a
//! switch by channel `a` and leaves by `b` makes `a` wait for buffer space
//! on `b`: the dependency `a -> b`. Credit-based flow control can deadlock
//! exactly when the dependencies of one VL close a cycle (Dally and Seitz,
//! "Deadlock-free message routing in multiprocessor interconnection
//! networks", IEEE ToC 1987).
//!
//! ## Numbering
//! Switches are numbered by the order the caller gives (the fabric's, or
//! GUID order); channels are numbered switch by switch, each switch's in
//! port order, so that the channels leaving switch `v` are
//! `base[v]..base[v + 1]`. Dependencies through switch `v` are numbered
//! densely as (in-channel row) × (out-channel column): "in over the cable
//! of out-channel `k`, out over out-channel `j`" is
//! `dep_base[v] + k * deg(v) + j`, Σ deg² in all (1.5 M for the 11,664-host
//! fat tree). The dependencies of a set of paths are then a bit set or a
//! count array over that index, with no per-channel lists.
//!
//! ## Cycle checks
//! - [`CycleSearch`]: depth-first search for a cycle, resumable after the
//!   caller breaks the one it found; [`topological_order`] on top of it
//!   gives a topological order or a cycle as witness, and
//!   [`shortest_cycle_through`] shortens a witness. O(C + D) for C
//!   channels and D candidate dependencies. They work on any
//!   [`Successors`], so also on graphs whose nodes are (channel, VL).
//! - [`OrderedInsert`]: "add this dependency unless it closes a cycle"
//!   against a topological order kept up to date (Pearce and Kelly, "A
//!   dynamic topological sort algorithm for directed acyclic graphs", JEA
//!   2007): a dependency that agrees with the order costs nothing, any
//!   other searches only the channels ordered between its ends.

use std::collections::VecDeque;
use std::ops::Range;

use crate::fabric::{RoutingFabric, SwitchId};

/// "No channel": a port that leads to no switch, or no next hop.
pub(crate) const NO_CHANNEL: u32 = u32::MAX;

/// Whether a cable from a switch back to itself becomes a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SelfLoops {
    /// As any other cable (tables may route over it, so its dependencies
    /// count).
    Keep,
    /// Left out: an engine that never routes over one.
    Skip,
}

/// Directed switch-to-switch cables of a fabric and the index space of
/// their dependencies; see the module documentation.
pub(crate) struct ChannelGraph {
    /// Channels leaving switch `v` are `base[v]..base[v + 1]`, in port order.
    pub(crate) base: Vec<u32>,
    /// The switch a channel leaves from and the one it leads to.
    pub(crate) tail: Vec<u32>,
    pub(crate) head: Vec<u32>,
    /// The port a channel leaves its switch by.
    pub(crate) port: Vec<u8>,
    /// The reverse of each channel (the same cable the other way).
    pub(crate) rev: Vec<u32>,
    /// Dependencies through switch `v` start at `dep_base[v]` (+ total).
    pub(crate) dep_base: Vec<usize>,
    /// The first dependency out of each channel ([`ChannelGraph::dep_row`]),
    /// kept since walks over tables compute one per hop.
    row: Vec<usize>,
    /// Per switch: the fabric's slot of its port 0 and the number of its
    /// ports ([`RoutingFabric::switch_port_slot`]).
    slot_base: Vec<u32>,
    num_ports: Vec<u8>,
    /// Per fabric switch-port slot: the channel leaving by it, or
    /// [`NO_CHANNEL`].
    slot_chan: Vec<u32>,
}

impl ChannelGraph {
    /// The channels of `f` with switch `v` standing for `order[v]` (every
    /// switch once). O(S + C).
    pub(crate) fn new(f: &RoutingFabric, order: &[SwitchId], loops: SelfLoops) -> ChannelGraph {
        let n = order.len();
        let mut pos = vec![NO_CHANNEL; f.num_switches()];
        for (v, s) in order.iter().enumerate() {
            pos[s.index()] = v as u32;
        }
        let mut base = Vec::with_capacity(n + 1);
        let (mut tail, mut head, mut port) = (Vec::new(), Vec::new(), Vec::new());
        let mut slot_chan = vec![NO_CHANNEL; f.num_switch_port_slots()];
        let mut slot_base = Vec::with_capacity(n);
        let mut num_ports = Vec::with_capacity(n);
        for (v, &s) in order.iter().enumerate() {
            base.push(head.len() as u32);
            slot_base.push(f.switch_port_slot(s, 0) as u32);
            num_ports.push(f.switch(s).num_ports);
            for e in f.switch_neighbors(s) {
                if e.neighbor == s && loops == SelfLoops::Skip {
                    continue;
                }
                slot_chan[f.switch_port_slot(s, e.port)] = head.len() as u32;
                tail.push(v as u32);
                head.push(pos[e.neighbor.index()]);
                port.push(e.port);
            }
        }
        base.push(head.len() as u32);
        let mut rev = vec![NO_CHANNEL; head.len()];
        for &s in order {
            for e in f.switch_neighbors(s) {
                let c = slot_chan[f.switch_port_slot(s, e.port)];
                if c != NO_CHANNEL {
                    rev[c as usize] = slot_chan[f.switch_port_slot(e.neighbor, e.remote_port)];
                    debug_assert_ne!(rev[c as usize], NO_CHANNEL, "cables are symmetric");
                }
            }
        }
        let mut dep_base = Vec::with_capacity(n + 1);
        let mut total = 0usize;
        for v in 0..n {
            dep_base.push(total);
            let g = (base[v + 1] - base[v]) as usize;
            total += g * g;
        }
        dep_base.push(total);
        let row = (0..head.len())
            .map(|c| {
                let v = head[c] as usize;
                dep_base[v] + (rev[c] - base[v]) as usize * (base[v + 1] - base[v]) as usize
            })
            .collect();
        ChannelGraph { base, tail, head, port, rev, dep_base, row, slot_base, num_ports, slot_chan }
    }

    /// The channels of `f` numbered in the fabric's switch order.
    pub(crate) fn in_fabric_order(f: &RoutingFabric, loops: SelfLoops) -> ChannelGraph {
        let order: Vec<SwitchId> = f.switch_ids().collect();
        ChannelGraph::new(f, &order, loops)
    }

    pub(crate) fn num_channels(&self) -> usize {
        self.head.len()
    }

    /// Size of the dependency index.
    pub(crate) fn num_deps(&self) -> usize {
        *self.dep_base.last().unwrap_or(&0)
    }

    /// The channels leaving switch `v`.
    #[inline]
    pub(crate) fn out(&self, v: usize) -> Range<u32> {
        self.base[v]..self.base[v + 1]
    }

    /// [`ChannelGraph::out`] as array indices.
    #[inline]
    pub(crate) fn channels(&self, v: usize) -> Range<usize> {
        self.base[v] as usize..self.base[v + 1] as usize
    }

    #[inline]
    pub(crate) fn degree(&self, v: usize) -> usize {
        (self.base[v + 1] - self.base[v]) as usize
    }

    /// The reverse of channel `c`.
    #[inline]
    pub(crate) fn reverse(&self, c: usize) -> usize {
        self.rev[c] as usize
    }

    /// The channel switch `v` forwards by when its table says `port`, or
    /// [`NO_CHANNEL`] (port 0, unrouted, an end port, an empty or missing
    /// port, a skipped self-loop).
    #[inline]
    pub(crate) fn chan_of_port(&self, v: usize, port: u8) -> u32 {
        if port > self.num_ports[v] {
            return NO_CHANNEL;
        }
        self.slot_chan[self.slot_base[v] as usize + usize::from(port)]
    }

    /// The first dependency out of channel `c`: `c -> base[head[c]] + j`
    /// is `dep_row(c) + j`.
    #[inline]
    pub(crate) fn dep_row(&self, c: usize) -> usize {
        self.row[c]
    }

    /// The dependency "`c_in` then `c_out`" (head of `c_in` = tail of
    /// `c_out`).
    #[inline]
    pub(crate) fn dep(&self, c_in: usize, c_out: usize) -> usize {
        debug_assert_eq!(self.head[c_in], self.tail[c_out]);
        self.row[c_in] + (c_out - self.base[self.head[c_in] as usize] as usize)
    }
}

/// One hop of a walk along forwarding tables: leaving a switch by a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hop {
    /// The switch the port leads to, or [`NO_CHANNEL`] when it leads to no
    /// channel (the rest is then meaningless).
    pub(crate) next: u32,
    /// The channel's first dependency ([`ChannelGraph::dep_row`]).
    pub(crate) row: u32,
    /// The channel's column among its switch's channels: the dependency
    /// from channel `a` into this one is `a`'s `row` + this `col`.
    pub(crate) col: u16,
}

impl Hop {
    const NONE: Hop = Hop { next: NO_CHANNEL, row: 0, col: 0 };
}

/// [`Hop`]s by switch and port, everything a hop needs in one place: walks
/// over the tables of every switch to every LID (tens of millions of hops
/// at 11,664 hosts) are bound by memory accesses, not arithmetic.
pub(crate) struct PortHops {
    slot_base: Vec<u32>,
    num_ports: Vec<u8>,
    hops: Vec<Hop>,
}

impl PortHops {
    pub(crate) fn new(g: &ChannelGraph) -> PortHops {
        let mut hops = vec![Hop::NONE; g.slot_chan.len()];
        for (slot, &c) in g.slot_chan.iter().enumerate() {
            if c != NO_CHANNEL {
                let c = c as usize;
                let v = g.tail[c] as usize;
                let row = u32::try_from(g.row[c]).expect("dependency index fits in 32 bits");
                hops[slot] = Hop { next: g.head[c], row, col: (c - g.base[v] as usize) as u16 };
            }
        }
        PortHops { slot_base: g.slot_base.clone(), num_ports: g.num_ports.clone(), hops }
    }

    /// Leaving switch `v` (numbered as in the graph) by `port`.
    #[inline]
    pub(crate) fn get(&self, v: usize, port: u8) -> Hop {
        if port > self.num_ports[v] {
            return Hop::NONE;
        }
        self.hops[self.slot_base[v] as usize + usize::from(port)]
    }
}

/// A set of dependencies over a [`ChannelGraph`]'s dependency index.
#[derive(Clone)]
pub(crate) struct DepSet {
    words: Vec<u64>,
}

impl DepSet {
    pub(crate) fn new(g: &ChannelGraph) -> DepSet {
        DepSet { words: vec![0; g.num_deps().div_ceil(64)] }
    }

    #[inline]
    pub(crate) fn contains(&self, e: usize) -> bool {
        self.words[e / 64] >> (e % 64) & 1 != 0
    }

    #[inline]
    pub(crate) fn insert(&mut self, e: usize) {
        self.words[e / 64] |= 1 << (e % 64);
    }

    #[inline]
    pub(crate) fn remove(&mut self, e: usize) {
        self.words[e / 64] &= !(1 << (e % 64));
    }

    pub(crate) fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Channels with at least one dependency out.
    pub(crate) fn channels_out(&self, g: &ChannelGraph) -> usize {
        (0..g.num_channels())
            .filter(|&c| (0..g.degree(g.head[c] as usize)).any(|j| self.contains(g.dep_row(c) + j)))
            .count()
    }
}

/// A directed graph read one successor at a time; node `v`'s successors
/// sit at candidate positions `0..`, in the order searches take them.
pub(crate) trait Successors {
    fn nodes(&self) -> usize;
    /// The first successor of `v` at candidate position `*at` or later,
    /// moving `*at` past it; `None` when none is left.
    fn next_from(&self, v: u32, at: &mut u32) -> Option<u32>;
}

/// The dependencies `has` says are present, as a graph over channels;
/// successors by out-channel (port) order.
pub(crate) struct DepGraph<'a, F: Fn(usize) -> bool> {
    pub(crate) g: &'a ChannelGraph,
    pub(crate) has: F,
}

impl<F: Fn(usize) -> bool> Successors for DepGraph<'_, F> {
    fn nodes(&self) -> usize {
        self.g.num_channels()
    }

    #[inline]
    fn next_from(&self, c: u32, at: &mut u32) -> Option<u32> {
        let v = self.g.head[c as usize] as usize;
        let deg = self.g.degree(v) as u32;
        let row = self.g.dep_row(c as usize);
        while *at < deg {
            let j = *at;
            *at += 1;
            if (self.has)(row + j as usize) {
                return Some(self.g.base[v] + j);
            }
        }
        None
    }
}

const WHITE: u8 = 0;
const GRAY: u8 = 1;
const BLACK: u8 = 2;

/// Iterative depth-first search for cycles, roots in a given order.
///
/// Nodes found on no cycle stay finished across calls: a caller that
/// breaks each cycle found by removing a dependency (which adds no cycle)
/// resumes the search where it stopped, so a whole run costs O(N + D)
/// plus the length of the cycles found.
pub(crate) struct CycleSearch {
    color: Vec<u8>,
    /// (node, next candidate position).
    stack: Vec<(u32, u32)>,
    roots: Vec<u32>,
    root: usize,
    /// Nodes in the order they finished.
    finished: Vec<u32>,
}

impl CycleSearch {
    /// A search over `n` nodes, started from `roots` in order (every node
    /// should be one, or some are never searched).
    pub(crate) fn new(n: usize, roots: Vec<u32>) -> CycleSearch {
        CycleSearch { color: vec![WHITE; n], stack: Vec::new(), roots, root: 0, finished: Vec::new() }
    }

    /// Starts over (the graph changed in other ways than losing edges).
    pub(crate) fn reset(&mut self) {
        self.color.fill(WHITE);
        self.stack.clear();
        self.root = 0;
        self.finished.clear();
    }

    /// The next cycle, each node followed by its successor on it and the
    /// last by the first, or `None` when what is left is acyclic. The
    /// nodes on the search path are searched again by the next call.
    pub(crate) fn next_cycle(&mut self, g: &impl Successors) -> Option<Vec<u32>> {
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
            let (v, mut at) = self.stack[top];
            let next = g.next_from(v, &mut at);
            self.stack[top].1 = at;
            match next {
                Some(t) => match self.color[t as usize] {
                    WHITE => {
                        self.color[t as usize] = GRAY;
                        self.stack.push((t, 0));
                    }
                    GRAY => {
                        let k = self.stack.iter().rposition(|&(x, _)| x == t).expect("a gray node is on the stack");
                        let cycle = self.stack[k..].iter().map(|&(x, _)| x).collect();
                        for (x, _) in self.stack.drain(..) {
                            self.color[x as usize] = WHITE;
                        }
                        return Some(cycle);
                    }
                    _ => {}
                },
                None => {
                    self.color[v as usize] = BLACK;
                    self.finished.push(v);
                    self.stack.pop();
                }
            }
        }
    }
}

/// A topological order of `g` (the position of each node: every edge goes
/// from a lower to a higher one), by one depth-first search from nodes in
/// index order, a node's position its reverse finishing time; or the
/// first cycle that search meets.
pub(crate) fn topological_order(g: &impl Successors) -> Result<Vec<u32>, Vec<u32>> {
    let n = g.nodes();
    let mut search = CycleSearch::new(n, (0..n as u32).collect());
    if let Some(cycle) = search.next_cycle(g) {
        return Err(cycle);
    }
    let mut pos = vec![0u32; n];
    for (i, &v) in search.finished.iter().enumerate() {
        pos[v as usize] = (n - 1 - i) as u32;
    }
    Ok(pos)
}

/// One cycle of `g`, if any: the first a depth-first search from nodes in
/// index order meets, shortened to a shortest cycle through its first node.
pub(crate) fn find_short_cycle(g: &impl Successors) -> Option<Vec<u32>> {
    let n = g.nodes();
    let c = CycleSearch::new(n, (0..n as u32).collect()).next_cycle(g)?;
    Some(shortest_cycle_through(g, c[0]).unwrap_or(c))
}

/// The shortest cycle through `v` (breadth-first from `v` back to `v`).
pub(crate) fn shortest_cycle_through(g: &impl Successors, v: u32) -> Option<Vec<u32>> {
    let mut parent = vec![u32::MAX; g.nodes()];
    let mut queue = VecDeque::new();
    queue.push_back(v);
    while let Some(u) = queue.pop_front() {
        let mut at = 0;
        while let Some(w) = g.next_from(u, &mut at) {
            if w == v {
                let mut cycle = vec![u];
                let mut x = u;
                while x != v {
                    x = parent[x as usize];
                    cycle.push(x);
                }
                cycle.reverse();
                return Some(cycle);
            }
            if parent[w as usize] == u32::MAX {
                parent[w as usize] = u;
                queue.push_back(w);
            }
        }
    }
    None
}

/// Dependencies in use, each counted (by how many trees use it), with a
/// topological order of them kept while dependencies come and go one at
/// a time ([`OrderedInsert`]): what every engine that edits routes on one
/// VL without closing a cycle works on.
pub(crate) struct UsedDeps {
    /// Uses of each dependency, by the graph's dependency index.
    pub(crate) uses: Vec<u32>,
    /// Position of each channel in a topological order of the used ones
    /// (valid after [`UsedDeps::order`]).
    pub(crate) ord: Vec<u32>,
    insert: OrderedInsert,
}

impl UsedDeps {
    pub(crate) fn new(g: &ChannelGraph) -> UsedDeps {
        UsedDeps { uses: vec![0; g.num_deps()], ord: Vec::new(), insert: OrderedInsert::new(g.num_channels()) }
    }

    /// Counts `a -> b` with no cycle check: before [`UsedDeps::order`].
    pub(crate) fn count(&mut self, g: &ChannelGraph, a: u32, b: u32) {
        self.uses[g.dep(a as usize, b as usize)] += 1;
    }

    /// Orders the dependencies counted; false (and no order) when they
    /// close a cycle.
    pub(crate) fn order(&mut self, g: &ChannelGraph) -> bool {
        let uses = &self.uses;
        match topological_order(&DepGraph { g, has: |e| uses[e] > 0 }) {
            Ok(ord) => {
                self.ord = ord;
                true
            }
            Err(_) => false,
        }
    }

    /// Adds a use of `a -> b` unless it closes a cycle.
    pub(crate) fn add(&mut self, g: &ChannelGraph, a: u32, b: u32) -> bool {
        let e = g.dep(a as usize, b as usize);
        if self.uses[e] == 0 {
            let uses = &self.uses;
            let mut unlimited = u64::MAX;
            if self.insert.try_insert(g, &mut self.ord, |x| uses[x] > 0, a, b, &mut unlimited) != Some(true) {
                return false;
            }
        }
        self.uses[e] += 1;
        true
    }

    /// Drops a use of `a -> b`; the order stays valid.
    pub(crate) fn remove(&mut self, g: &ChannelGraph, a: u32, b: u32) {
        self.uses[g.dep(a as usize, b as usize)] -= 1;
    }
}

/// Scratch for adding dependencies to an acyclic set while keeping a
/// topological order of its channels; see the module documentation.
pub(crate) struct OrderedInsert {
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    pool: Vec<u32>,
}

impl OrderedInsert {
    pub(crate) fn new(channels: usize) -> OrderedInsert {
        OrderedInsert {
            mark: vec![0; channels],
            stamp: 0,
            stack: Vec::new(),
            fwd: Vec::new(),
            bwd: Vec::new(),
            pool: Vec::new(),
        }
    }

    /// Whether the dependency `a -> b` can join those `has` says are present
    /// (acyclic, `ord` the position of each channel in a topological order
    /// of them) without closing a cycle. If so, `ord` is changed to agree
    /// with it, and the caller then records it. Each channel visited costs
    /// one unit of `budget`; `None` when it ran out (nothing changed).
    ///
    /// Only the channels ordered between `b` and `a` are searched: forward
    /// from `b` (reaching `a` closes a cycle), then backward from `a`.
    pub(crate) fn try_insert(
        &mut self,
        g: &ChannelGraph,
        ord: &mut [u32],
        has: impl Fn(usize) -> bool,
        a: u32,
        b: u32,
        budget: &mut u64,
    ) -> Option<bool> {
        if a == b {
            return Some(false);
        }
        let (ub, lb) = (ord[a as usize], ord[b as usize]);
        if ub < lb {
            return Some(true);
        }
        if self.stamp >= u32::MAX - 2 {
            self.mark.fill(0);
            self.stamp = 0;
        }
        self.stamp += 2;
        let (sf, sb) = (self.stamp - 1, self.stamp);
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(b);
        self.mark[b as usize] = sf;
        while let Some(u) = self.stack.pop() {
            self.fwd.push(u);
            *budget = budget.checked_sub(1)?;
            let v = g.head[u as usize] as usize;
            let row = g.dep_row(u as usize);
            for (j, w) in g.out(v).enumerate() {
                if !has(row + j) {
                    continue;
                }
                if w == a {
                    return Some(false);
                }
                if ord[w as usize] < ub && self.mark[w as usize] != sf {
                    self.mark[w as usize] = sf;
                    self.stack.push(w);
                }
            }
        }
        self.bwd.clear();
        self.stack.clear();
        self.stack.push(a);
        self.mark[a as usize] = sb;
        while let Some(u) = self.stack.pop() {
            self.bwd.push(u);
            *budget = budget.checked_sub(1)?;
            // In-dependencies of u = (x -> y): from every channel into x.
            let x = g.tail[u as usize] as usize;
            let deg = g.degree(x);
            let col = (u - g.base[x]) as usize;
            for (k, o) in g.channels(x).enumerate() {
                if !has(g.dep_base[x] + k * deg + col) {
                    continue;
                }
                let w = g.rev[o];
                if ord[w as usize] > lb && self.mark[w as usize] != sb {
                    self.mark[w as usize] = sb;
                    self.stack.push(w);
                }
            }
        }
        // Everything that reaches `a` goes before everything `b` reaches,
        // in the positions they held, each group in its old order.
        self.fwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.bwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.pool.clear();
        self.pool.extend(self.bwd.iter().chain(&self.fwd).map(|&c| ord[c as usize]));
        self.pool.sort_unstable();
        for (i, &c) in self.bwd.iter().chain(&self.fwd).enumerate() {
            ord[c as usize] = self.pool[i];
        }
        Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testfab;

    /// A graph in compressed rows, for hand-made cases.
    struct Csr {
        start: Vec<u32>,
        targets: Vec<u32>,
    }

    impl Successors for Csr {
        fn nodes(&self) -> usize {
            self.start.len() - 1
        }

        fn next_from(&self, v: u32, at: &mut u32) -> Option<u32> {
            let i = self.start[v as usize] + *at;
            (i < self.start[v as usize + 1]).then(|| {
                *at += 1;
                self.targets[i as usize]
            })
        }
    }

    #[test]
    fn dfs_and_bfs_agree_on_a_small_graph() {
        // 0 -> 1 -> 2 -> 0 and 2 -> 3.
        let g = Csr { start: vec![0, 1, 2, 4, 4], targets: vec![1, 2, 0, 3] };
        let c = CycleSearch::new(4, (0..4).collect()).next_cycle(&g).unwrap();
        assert_eq!(c, vec![0, 1, 2]);
        assert_eq!(shortest_cycle_through(&g, 1).unwrap(), vec![1, 2, 0]);
        assert_eq!(shortest_cycle_through(&g, 3), None);
        assert_eq!(topological_order(&g), Err(vec![0, 1, 2]));
        let dag = Csr { start: vec![0, 1, 2, 2], targets: vec![1, 2] };
        assert_eq!(CycleSearch::new(3, (0..3).collect()).next_cycle(&dag), None);
        assert_eq!(topological_order(&dag), Ok(vec![0, 1, 2]));
    }

    #[test]
    fn a_resumed_search_finds_the_next_cycle() {
        // Two cycles, 0 <-> 1 and 2 <-> 3, and 1 -> 2.
        let mut g = Csr { start: vec![0, 1, 3, 4, 5], targets: vec![1, 0, 2, 3, 2] };
        let mut search = CycleSearch::new(4, (0..4).collect());
        assert_eq!(search.next_cycle(&g), Some(vec![0, 1]));
        // Break 1 -> 0.
        g = Csr { start: vec![0, 1, 2, 3, 4], targets: vec![1, 2, 3, 2] };
        assert_eq!(search.next_cycle(&g), Some(vec![2, 3]));
        g = Csr { start: vec![0, 1, 2, 3, 3], targets: vec![1, 2, 3] };
        assert_eq!(search.next_cycle(&g), None);
    }

    #[test]
    fn channels_of_a_ring_and_their_dependencies() {
        let f = testfab::ring(4, 1);
        let ch = ChannelGraph::in_fabric_order(&f, SelfLoops::Keep);
        // Two channels per cable, two per switch.
        assert_eq!(ch.num_channels(), 8);
        for c in 0..ch.num_channels() {
            let r = ch.reverse(c);
            assert_eq!((ch.tail[r], ch.head[r], ch.reverse(r)), (ch.head[c], ch.tail[c], c));
            assert_eq!(ch.chan_of_port(ch.tail[c] as usize, ch.port[c]), c as u32);
        }
        assert_eq!(ch.chan_of_port(0, 0), NO_CHANNEL);
        assert_eq!(ch.chan_of_port(0, 200), NO_CHANNEL);
        // Every (in, out) pair at a switch has its own index.
        assert_eq!(ch.num_deps(), 4 * 2 * 2);
        let mut seen = vec![false; ch.num_deps()];
        for a in 0..ch.num_channels() {
            for b in ch.channels(ch.head[a] as usize) {
                let e = ch.dep(a, b);
                assert!(!seen[e]);
                seen[e] = true;
            }
        }
        assert!(seen.iter().all(|&x| x));
    }

    #[test]
    fn ordered_insert_refuses_exactly_the_closing_dependency() {
        // Going round the ring one way: the fourth dependency closes it.
        let f = testfab::ring(4, 1);
        let ch = ChannelGraph::in_fabric_order(&f, SelfLoops::Keep);
        let mut ring = vec![ch.base[0]];
        for _ in 0..3 {
            let c = *ring.last().unwrap() as usize;
            let (v, w) = (ch.tail[c], ch.head[c] as usize);
            ring.push(ch.out(w).find(|&d| ch.head[d as usize] != v).unwrap());
        }
        assert_eq!(ch.head[ring[3] as usize], ch.tail[ring[0] as usize]);
        let mut set = DepSet::new(&ch);
        let mut ord: Vec<u32> = (0..ch.num_channels() as u32).rev().collect();
        let mut insert = OrderedInsert::new(ch.num_channels());
        let mut budget = u64::MAX;
        for i in 0..4 {
            let (a, b) = (ring[i], ring[(i + 1) % 4]);
            let s = &set;
            let fits = insert.try_insert(&ch, &mut ord, |e| s.contains(e), a, b, &mut budget);
            assert_eq!(fits, Some(i < 3), "dependency {i}");
            if fits == Some(true) {
                set.insert(ch.dep(a as usize, b as usize));
                assert!(ord[a as usize] < ord[b as usize]);
            }
        }
        assert_eq!(set.len(), 3);
        let s = &set;
        assert!(topological_order(&DepGraph { g: &ch, has: |e| s.contains(e) }).is_ok());
        // Without budget, no answer and nothing changed.
        let before = ord.clone();
        let mut none = 0;
        assert_eq!(insert.try_insert(&ch, &mut ord, |e| s.contains(e), ring[3], ring[0], &mut none), None);
        assert_eq!(ord, before);
    }
}
