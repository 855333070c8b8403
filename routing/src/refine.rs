//! Moving single table entries off the busiest channel while one VL stays
//! free of credit loops.
//!
//! Single-VL engines are deadlock free by a rule that holds for the whole
//! fabric: up*/down* forbids every down-to-up turn, Nue's escape paths keep
//! a spanning tree's turns. Such a rule also forbids turns that close no
//! cycle with the turns actually used, and on fabrics whose shortest paths
//! are cyclic (dragonflies, random cabling) the routes it leaves crowd a few
//! channels. [`refine`] starts from such a routing and asks, entry by
//! entry, only what deadlock freedom needs: that the dependencies of the
//! routes in use stay acyclic.
//!
//! ## The move
//! One (switch `u`, destination LID) entry changes its output channel (a
//! re-grown tree is many such moves at once). All
//! traffic to that LID that passes `u` (the end ports of `u`'s subtree in
//! the LID's tree) then follows the new channel and the neighbour's
//! existing route. Every switch counts as a source (management traffic
//! from port 0 runs on the same VL), so the dependencies of a LID are
//! exactly "`w`'s channel, then the channel of the switch it leads to", one
//! per switch, and a move changes only those of `u` and of the switches
//! whose channel leads into `u`. The move is taken when it closes no
//! forwarding loop, when the dependencies it adds close no cycle with all
//! the others ([`OrderedInsert`], Pearce and Kelly's dynamic topological
//! order), and when no channel on the new path reaches the busiest load.
//!
//! ## The search
//! Two phases, each move kept only if it lowers (busiest load, channels at
//! it, sum of squared loads), so the search ends and never leaves the
//! routing busier than it found it:
//! 1. Re-growing trees ([`REROUTE_PASSES`] passes over the LIDs): a LID's
//!    tree and its dependencies are taken out and grown again from its
//!    owner, Dijkstra-like, each switch joining by the channel with the
//!    fewest hops, then the lightest loads, whose one dependency fits.
//!    This follows every other LID's actual loads, which Nue's single pass
//!    cannot know when it routes the early destinations.
//! 2. Single entries, steepest descent: for the channels at the busiest
//!    load, the candidates are every LID whose tree uses one, moved at any
//!    switch whose route passes its tail, onto any other channel whose path
//!    is at most [`SLACK`] hops longer than the shortest and avoids it; the
//!    one leaving the lowest peak on its new path is tried first. When no
//!    busiest channel can be relieved, a move off any channel that lowers
//!    the sum of squared loads without reaching the busiest load is taken,
//!    which changes the dependencies and may free a later relief.
//!
//! A work budget per entry bounds both; no randomness, fixed orders, so the
//! tables are reproducible. Measured on the 42-switch dragonfly (84 hosts)
//! up*/down*'s busiest link of 330 falls to 266 in about 0.4 s; on the
//! 20-switch one 114 to 108.
//!
//! Switch LIDs of switches with end ports follow the routes of the first
//! end-port LID there (as Nue's do), so they add no dependency of their
//! own; those of switches without end ports keep their routes, whose
//! dependencies count.

use crate::channels::{ChannelGraph, SelfLoops, UsedDeps, NO_CHANNEL};
use crate::fabric::{PortEnd, RoutingFabric, SwitchId};
use crate::lft::Routes;

/// How many hops longer than the shortest a moved entry's path may be.
const SLACK: u32 = 2;

/// The largest routing refined, in (switch, end-port LID) entries: the
/// search scans every LID per busy channel, so beyond tens of thousands of
/// entries it would cost seconds (the 648-host fat tree has 35,000).
pub(crate) const MAX_ENTRIES: usize = 20_000;

/// Work units (entries scanned, hops walked, heap entries taken) a
/// refinement may spend per entry; 4,000 covered every search of the
/// bench's irregular fabrics to its end (a 42-switch dragonfly used 1,600
/// per entry, a 40-switch random fabric 3,800).
const WORK_PER_ENTRY: u64 = 4_000;

/// Passes of re-growing each LID's tree before single-entry moves.
const REROUTE_PASSES: usize = 3;

/// A hop costs more than any sum of loads: re-grown trees stay shortest
/// where their dependencies allow.
const HOP_COST: u64 = 1 << 40;

/// What one refinement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RefineStats {
    /// Trees re-grown and entries moved.
    pub(crate) moves: u64,
    /// The busiest switch-to-switch channel's load (end port, LID routes)
    /// before and after.
    pub(crate) busiest_before: u64,
    pub(crate) busiest_after: u64,
}

/// A routing on one VL improved (see the module documentation), or `None`
/// when the routes do not qualify: above [`MAX_ENTRIES`], a fabric that is
/// not connected, unrouted or looping entries, or routes whose
/// dependencies are already cyclic. The returned routes carry `routes.sl`
/// unchanged; their busiest channel is never busier than the input's.
pub(crate) fn refine(f: &RoutingFabric, routes: &Routes) -> Option<(Routes, RefineStats)> {
    refine_within(f, routes, WORK_PER_ENTRY)
}

/// [`refine`] with `work_per_entry` in place of [`WORK_PER_ENTRY`].
pub(crate) fn refine_within(f: &RoutingFabric, routes: &Routes, work_per_entry: u64) -> Option<(Routes, RefineStats)> {
    let entries = entries(f);
    if entries > MAX_ENTRIES {
        return None;
    }
    let mut state = State::new(f, routes)?;
    let before = state.busiest();
    let mut budget = work_per_entry * entries as u64;
    let mut moves = 0u64;
    for _ in 0..REROUTE_PASSES {
        let mut any = false;
        for m in 0..state.movable.len() {
            if state.reroute(m, &mut budget) {
                moves += 1;
                any = true;
            }
        }
        if !any || budget == 0 {
            break;
        }
    }
    while budget > 0 && state.step(&mut budget) {
        moves += 1;
    }
    let after = state.busiest();
    let stats = RefineStats { moves, busiest_before: before.0, busiest_after: after.0 };
    Some((state.into_routes(f, routes), stats))
}

/// (switch, end-port LID) entries of `f`'s tables.
pub(crate) fn entries(f: &RoutingFabric) -> usize {
    f.num_switches() * f.end_ports().iter().map(|e| e.lids().len()).sum::<usize>()
}

/// A LID whose entries may move: one of an end port cabled to a switch.
struct Movable {
    lid: u16,
    /// The switch the end port hangs off (the LID's tree root).
    owner: u32,
    /// Index of the owner in `State::dist`.
    owner_row: u32,
}

struct State {
    ch: ChannelGraph,
    ns: usize,
    movable: Vec<Movable>,
    /// `next[m * ns + v]`: the channel switch `v` forwards movable LID `m`
    /// by ([`NO_CHANNEL`] at its owner).
    next: Vec<u32>,
    /// `weight[m * ns + v]`: end ports whose route to `m` passes `v`.
    weight: Vec<u64>,
    hosts: Vec<u64>,
    /// Switch-to-switch hops to each owner switch, one row per owner.
    dist: Vec<Vec<u32>>,
    load: Vec<u64>,
    /// Dependencies in use, counted over LIDs, by the channel graph's
    /// dependency index.
    /// Dependencies in use, counted over LIDs, and their order.
    deps: UsedDeps,
}

impl State {
    fn new(f: &RoutingFabric, routes: &Routes) -> Option<State> {
        let ns = f.num_switches();
        if ns == 0 || routes.lfts.len() != ns {
            return None;
        }
        let ch = ChannelGraph::in_fabric_order(f, SelfLoops::Skip);
        let hosts = f.end_ports_per_switch();
        let mut movable = Vec::new();
        // LIDs whose routes stay: (LID, owner switch).
        let mut fixed: Vec<(u16, SwitchId)> = Vec::new();
        let mut owner_rows: Vec<u32> = vec![u32::MAX; ns];
        let mut dist: Vec<Vec<u32>> = Vec::new();
        let mut queue = Vec::new();
        for e in f.end_port_ids() {
            let Some((s, _)) = f.attached_switch(e) else { continue };
            if owner_rows[s.index()] == u32::MAX {
                owner_rows[s.index()] = dist.len() as u32;
                let mut d = Vec::new();
                f.switch_distances(s, &mut d, &mut queue);
                if d.contains(&u32::MAX) {
                    return None;
                }
                dist.push(d);
            }
            // The analysis weighs routes to base LIDs; the others keep
            // their routes, and their dependencies count.
            let mut lids = f.end_port(e).lids();
            if let Some(base) = lids.next() {
                movable.push(Movable { lid: base as u16, owner: s.0, owner_row: owner_rows[s.index()] });
            }
            fixed.extend(lids.map(|l| (l as u16, s)));
        }
        let nm = movable.len();
        let mut next = vec![NO_CHANNEL; nm * ns];
        for (m, mv) in movable.iter().enumerate() {
            for v in 0..ns {
                if v as u32 == mv.owner {
                    continue;
                }
                let c = ch.chan_of_port(v, routes.lfts[v].port(mv.lid));
                if c == NO_CHANNEL {
                    return None;
                }
                next[m * ns + v] = c;
            }
        }
        let mut state = State {
            deps: UsedDeps::new(&ch),
            load: vec![0; ch.num_channels()],
            ch,
            ns,
            movable,
            next,
            weight: vec![0; nm * ns],
            hosts,
            dist,
        };
        for m in 0..nm {
            state.weigh(m)?;
        }
        // Dependencies of the movable LIDs, then of the switch LIDs that
        // keep their routes.
        for m in 0..nm {
            count_tree(&state.ch, &state.next[m * ns..(m + 1) * ns], &mut state.deps.uses);
        }
        let mut row = vec![NO_CHANNEL; ns];
        // Those of switches [`State::into_routes`] does not mirror.
        for s in f.switch_ids().filter(|&s| first_end_lid(f, s).is_none()) {
            fixed.extend(f.switch(s).lids().map(|l| (l as u16, s)));
        }
        for (lid, s) in fixed {
            for (v, slot) in row.iter_mut().enumerate() {
                *slot = if v == s.index() {
                    NO_CHANNEL
                } else {
                    match state.ch.chan_of_port(v, routes.lfts[v].port(lid)) {
                        NO_CHANNEL => return None,
                        c => c,
                    }
                };
            }
            if forms_loop(&state.ch, &row, s.0) {
                return None;
            }
            count_tree(&state.ch, &row, &mut state.deps.uses);
        }
        if !state.deps.order(&state.ch) {
            return None;
        }
        Some(state)
    }

    /// Fills the weights of movable LID `m` and adds them to the loads;
    /// `None` on a forwarding loop.
    fn weigh(&mut self, m: usize) -> Option<()> {
        let ns = self.ns;
        let owner = self.movable[m].owner as usize;
        let row = &self.next[m * ns..(m + 1) * ns];
        if forms_loop(&self.ch, row, owner as u32) {
            return None;
        }
        // Depth of each switch in the tree, then weights deepest first.
        let mut depth = vec![u32::MAX; ns];
        depth[owner] = 0;
        let mut stack = Vec::new();
        for v in 0..ns {
            let mut x = v;
            while depth[x] == u32::MAX {
                stack.push(x);
                x = self.ch.head[row[x] as usize] as usize;
            }
            while let Some(y) = stack.pop() {
                depth[y] = depth[x] + 1;
                x = y;
            }
        }
        let mut by_depth: Vec<usize> = (0..ns).collect();
        by_depth.sort_unstable_by_key(|&v| std::cmp::Reverse(depth[v]));
        let w = &mut self.weight[m * ns..(m + 1) * ns];
        w.copy_from_slice(&self.hosts);
        for v in by_depth {
            if v != owner {
                let c = row[v] as usize;
                let up = self.ch.head[c] as usize;
                w[up] += w[v];
                self.load[c] += w[v];
            }
        }
        Some(())
    }

    fn busiest(&self) -> (u64, usize) {
        let max = self.load.iter().copied().max().unwrap_or(0);
        (max, self.load.iter().filter(|&&l| l == max).count())
    }

    /// One move lowering (busiest load, channels at it), or failing that
    /// one keeping both and lowering the sum of squared loads; false when
    /// neither is found or the budget is spent.
    fn step(&mut self, budget: &mut u64) -> bool {
        let (max, _) = self.busiest();
        if max == 0 {
            return false;
        }
        let mut by_load: Vec<u32> = (0..self.load.len() as u32).filter(|&c| self.load[c as usize] > 0).collect();
        by_load.sort_unstable_by_key(|&c| (std::cmp::Reverse(self.load[c as usize]), c));
        for spread in [false, true] {
            for &c in &by_load {
                if !spread && self.load[c as usize] < max {
                    break;
                }
                let mut cands = self.candidates(c, max, budget);
                if *budget == 0 {
                    return false;
                }
                if spread {
                    cands.retain(|k| k.delta < 0);
                    cands.sort_unstable_by_key(|k| (k.delta, k.hops, k.m, k.at, k.to));
                } else {
                    cands.sort_unstable_by_key(|k| (k.peak, k.hops, k.m, k.at, k.to));
                }
                for cand in cands {
                    if self.apply(cand.m as usize, cand.at as usize, cand.to) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Moves taking traffic off channel `c`, each leaving every channel of
    /// its new path below `max`.
    fn candidates(&mut self, c: u32, max: u64, budget: &mut u64) -> Vec<Cand> {
        let ns = self.ns;
        let tail = self.ch.tail[c as usize] as usize;
        let mut out = Vec::new();
        for m in 0..self.movable.len() {
            *budget = budget.saturating_sub(1);
            if self.next[m * ns + tail] != c || self.weight[m * ns + tail] == 0 {
                continue;
            }
            // Every switch whose route to the LID passes the tail.
            let mut movers = vec![tail];
            let mut i = 0;
            while i < movers.len() {
                let x = movers[i];
                i += 1;
                for o in self.ch.channels(x) {
                    let into = self.ch.reverse(o);
                    let w = self.ch.tail[into] as usize;
                    if self.next[m * ns + w] == into as u32 {
                        movers.push(w);
                    }
                }
            }
            for u in movers {
                self.candidates_at(m, u, c, max, budget, &mut out);
            }
        }
        out
    }

    fn candidates_at(&mut self, m: usize, u: usize, busy: u32, max: u64, budget: &mut u64, out: &mut Vec<Cand>) {
        let ns = self.ns;
        let mv = &self.movable[m];
        let (owner, drow) = (mv.owner as usize, mv.owner_row as usize);
        let moved = self.weight[m * ns + u];
        if moved == 0 {
            return;
        }
        let current = self.next[m * ns + u];
        let limit = self.dist[drow][u] + SLACK;
        // Channels of the current path from u, to tell shared ones apart.
        let mut old = Vec::new();
        let mut x = u;
        while x != owner {
            let k = self.next[m * ns + x];
            old.push(k);
            x = self.ch.head[k as usize] as usize;
        }
        let mut new = Vec::new();
        for cn in self.ch.out(u) {
            if cn == current {
                continue;
            }
            let y = self.ch.head[cn as usize] as usize;
            if y == u || self.dist[drow][y] + 1 > limit {
                continue;
            }
            // Walk y's route: no loop through u, no busy channel, not too
            // long; the peak over channels the old path does not share.
            let (mut hops, mut peak, mut ok) = (1u32, 0u64, true);
            let mut k = cn;
            new.clear();
            loop {
                *budget = budget.saturating_sub(1);
                if k == busy {
                    ok = false;
                    break;
                }
                new.push(k);
                if !old.contains(&k) {
                    peak = peak.max(self.load[k as usize] + moved);
                }
                let z = self.ch.head[k as usize] as usize;
                if z == owner {
                    break;
                }
                if z == u || hops >= limit {
                    ok = false;
                    break;
                }
                k = self.next[m * ns + z];
                hops += 1;
            }
            if ok && peak < max {
                let w = moved as i64;
                let gained: i64 = new
                    .iter()
                    .filter(|k| !old.contains(k))
                    .map(|&k| 2 * self.load[k as usize] as i64 * w + w * w)
                    .sum();
                let lost: i64 = old
                    .iter()
                    .filter(|k| !new.contains(k))
                    .map(|&k| w * w - 2 * self.load[k as usize] as i64 * w)
                    .sum();
                out.push(Cand { peak, delta: gained + lost, hops, m: m as u32, at: u as u32, to: cn });
            }
        }
    }

    /// (busiest load, channels at it, sum of squared loads).
    fn score(&self) -> (u64, usize, u128) {
        let (max, at) = self.busiest();
        (max, at, self.load.iter().map(|&l| u128::from(l) * u128::from(l)).sum())
    }

    /// Takes LID `m`'s tree out and grows a new one from its owner, each
    /// switch joining by the lightest channel (hops first) whose dependency
    /// fits; kept if every switch joined and the score fell, else the old
    /// tree is put back.
    fn reroute(&mut self, m: usize, budget: &mut u64) -> bool {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let ns = self.ns;
        let owner = self.movable[m].owner as usize;
        let before = self.score();
        let old_row: Vec<u32> = self.next[m * ns..(m + 1) * ns].to_vec();
        let old_weight: Vec<u64> = self.weight[m * ns..(m + 1) * ns].to_vec();
        for v in (0..ns).filter(|&v| v != owner) {
            self.load[old_row[v] as usize] -= old_weight[v];
        }
        let old_deps: Vec<(u32, u32)> = tree_pairs(&self.ch, &old_row).collect();
        for &(a, b) in &old_deps {
            self.deps.remove(&self.ch, a, b);
        }
        let mut row = vec![NO_CHANNEL; ns];
        let mut settled = vec![false; ns];
        settled[owner] = true;
        let mut left = ns - 1;
        let mut added: Vec<(u32, u32)> = Vec::new();
        let mut heap = BinaryHeap::new();
        for o in self.ch.channels(owner) {
            let c = self.ch.reverse(o);
            heap.push(Reverse((HOP_COST + self.load[c], self.ch.tail[c], c as u32)));
        }
        while let Some(Reverse((key, x, c))) = heap.pop() {
            *budget = budget.saturating_sub(1);
            let x = x as usize;
            if settled[x] {
                continue;
            }
            let y = self.ch.head[c as usize] as usize;
            if y != owner {
                let b = row[y];
                if !self.add_dep(c, b) {
                    continue;
                }
                added.push((c, b));
            }
            settled[x] = true;
            row[x] = c;
            left -= 1;
            for o in self.ch.channels(x) {
                let cw = self.ch.reverse(o);
                let w = self.ch.tail[cw] as usize;
                if !settled[w] {
                    heap.push(Reverse((key + HOP_COST + self.load[cw], w as u32, cw as u32)));
                }
            }
        }
        if left == 0 {
            self.next[m * ns..(m + 1) * ns].copy_from_slice(&row);
            self.weigh(m).expect("a grown tree has no loop");
            if self.score() < before {
                return true;
            }
            for v in (0..ns).filter(|&v| v != owner) {
                self.load[row[v] as usize] -= self.weight[m * ns + v];
            }
        }
        for &(a, b) in &added {
            self.deps.remove(&self.ch, a, b);
        }
        for &(a, b) in &old_deps {
            let back = self.add_dep(a, b);
            debug_assert!(back, "restoring a dependency of an acyclic set");
        }
        self.next[m * ns..(m + 1) * ns].copy_from_slice(&old_row);
        self.weight[m * ns..(m + 1) * ns].copy_from_slice(&old_weight);
        for v in (0..ns).filter(|&v| v != owner) {
            self.load[old_row[v] as usize] += old_weight[v];
        }
        false
    }

    /// Moves entry (`u`, LID `m`) to channel `cn` if the dependencies stay
    /// acyclic; false (nothing changed) if not.
    fn apply(&mut self, m: usize, u: usize, cn: u32) -> bool {
        let ns = self.ns;
        let owner = self.movable[m].owner as usize;
        let co = self.next[m * ns + u];
        let follow = |next: &[u32], ch: &ChannelGraph, c: u32| -> Option<u32> {
            let y = ch.head[c as usize] as usize;
            (y != owner).then(|| next[m * ns + y])
        };
        let mut removed: Vec<(u32, u32)> = Vec::new();
        let mut added: Vec<(u32, u32)> = Vec::new();
        if let Some(k) = follow(&self.next, &self.ch, co) {
            removed.push((co, k));
        }
        if let Some(k) = follow(&self.next, &self.ch, cn) {
            added.push((cn, k));
        }
        for o in self.ch.channels(u) {
            let into = self.ch.reverse(o) as u32;
            let w = self.ch.tail[into as usize] as usize;
            if self.next[m * ns + w] == into {
                removed.push((into, co));
                added.push((into, cn));
            }
        }
        for &(a, b) in &removed {
            self.deps.remove(&self.ch, a, b);
        }
        let mut taken = 0;
        for &(a, b) in &added {
            if !self.add_dep(a, b) {
                break;
            }
            taken += 1;
        }
        if taken < added.len() {
            for &(a, b) in &added[..taken] {
                self.deps.remove(&self.ch, a, b);
            }
            for &(a, b) in &removed {
                let back = self.add_dep(a, b);
                debug_assert!(back, "restoring a dependency of an acyclic set");
            }
            return false;
        }
        // The traffic through u leaves the old path and takes the new one.
        let moved = self.weight[m * ns + u];
        self.shift(m, co, owner, moved, false);
        self.next[m * ns + u] = cn;
        self.shift(m, cn, owner, moved, true);
        true
    }

    /// Adds `moved` to (or takes it from) every channel and switch weight
    /// along the route starting with channel `c`.
    fn shift(&mut self, m: usize, mut c: u32, owner: usize, moved: u64, add: bool) {
        let ns = self.ns;
        loop {
            let z = self.ch.head[c as usize] as usize;
            let (load, w) = (&mut self.load[c as usize], &mut self.weight[m * ns + z]);
            if add {
                *load += moved;
                *w += moved;
            } else {
                *load -= moved;
                *w -= moved;
            }
            if z == owner {
                return;
            }
            c = self.next[m * ns + z];
        }
    }

    /// Counts dependency `a -> b` in, unless it closes a cycle.
    fn add_dep(&mut self, a: u32, b: u32) -> bool {
        self.deps.add(&self.ch, a, b)
    }

    fn into_routes(self, f: &RoutingFabric, seed: &Routes) -> Routes {
        let ns = self.ns;
        let mut lfts = seed.lfts.clone();
        for (m, mv) in self.movable.iter().enumerate() {
            for (v, lft) in lfts.iter_mut().enumerate() {
                let c = self.next[m * ns + v];
                if c != NO_CHANNEL {
                    lft.set(mv.lid, self.ch.port[c as usize]);
                }
            }
        }
        // Switch LIDs with end ports below follow the first end-port LID.
        for s in f.switch_ids() {
            let Some(first) = first_end_lid(f, s) else { continue };
            for lid in f.switch(s).lids() {
                for (v, lft) in lfts.iter_mut().enumerate() {
                    let port = if v == s.index() { 0 } else { lft.port(first) };
                    lft.set(lid as u16, port);
                }
            }
        }
        Routes { lfts, sl: seed.sl.clone() }
    }
}

/// A candidate move: the peak load it leaves on its new path, the change
/// of the sum of squared loads, its path length and what it moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cand {
    peak: u64,
    delta: i64,
    hops: u32,
    m: u32,
    at: u32,
    to: u32,
}

/// The dependencies of one LID's tree, every switch a source: each
/// switch's channel, then the channel of the switch it leads to.
pub(crate) fn tree_pairs<'a>(ch: &'a ChannelGraph, row: &'a [u32]) -> impl Iterator<Item = (u32, u32)> + 'a {
    row.iter().filter(|&&c| c != NO_CHANNEL).filter_map(move |&c| {
        let k = row[ch.head[c as usize] as usize];
        (k != NO_CHANNEL).then_some((c, k))
    })
}

/// Counts the dependencies of one LID's tree ([`tree_pairs`]) in `uses`.
fn count_tree(ch: &ChannelGraph, row: &[u32], uses: &mut [u32]) {
    for (a, b) in tree_pairs(ch, row) {
        uses[ch.dep(a as usize, b as usize)] += 1;
    }
}

/// Whether following `row` from some switch never reaches `owner`.
fn forms_loop(ch: &ChannelGraph, row: &[u32], owner: u32) -> bool {
    let ns = row.len();
    // 0 unknown, 1 on the current walk, 2 reaches the owner.
    let mut state = vec![0u8; ns];
    state[owner as usize] = 2;
    let mut walk = Vec::new();
    for v in 0..ns {
        let mut x = v;
        while state[x] == 0 {
            state[x] = 1;
            walk.push(x);
            x = ch.head[row[x] as usize] as usize;
        }
        if state[x] == 1 {
            return true;
        }
        for y in walk.drain(..) {
            state[y] = 2;
        }
    }
    false
}

/// The lowest LID of an end port cabled to switch `s`.
fn first_end_lid(f: &RoutingFabric, s: SwitchId) -> Option<u16> {
    f.switch_ports(s)
        .iter()
        .filter_map(|p| match *p {
            Some(PortEnd::End(e)) => f.end_port(e).lids().next().map(|l| l as u16),
            _ => None,
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testfab;
    use crate::{analyze_cdg, validate, CdgScope, EngineOptions};

    fn one_vl() -> EngineOptions {
        EngineOptions { max_vls: 1, ..Default::default() }
    }

    /// Refines `seed` and checks what the refinement must keep: valid
    /// tables, acyclic on one VL with switches counted as sources, its load
    /// model equal to the analysis', never busier.
    fn refined(f: &RoutingFabric, seed: &Routes) -> (u64, u64) {
        let before = validate(f, seed).inter_switch_load.max;
        let (r, stats) = refine(f, seed).expect("an acyclic connected routing qualifies");
        let rep = validate(f, &r);
        assert!(rep.is_valid(), "{:?}", rep.failures.first());
        assert!(analyze_cdg(f, &r, CdgScope { include_switches: true }).deadlock_free());
        assert_eq!(stats.busiest_before, before);
        assert_eq!(stats.busiest_after, rep.inter_switch_load.max);
        assert!(stats.busiest_after <= before);
        (before, stats.busiest_after)
    }

    #[test]
    fn refines_updn_on_dragonflies_below_its_busiest_link() {
        for (f, at_most) in [(testfab::dragonfly(4, 2), 110), (testfab::dragonfly(6, 2), 280)] {
            let seed = crate::updn::updn(&f, &one_vl()).unwrap();
            let (before, after) = refined(&f, &seed);
            assert!(after <= at_most, "{before} -> {after}, want at most {at_most}");
        }
    }

    #[test]
    fn refines_random_fabrics_and_stays_deterministic() {
        for seed in 1..6 {
            let f = testfab::random_connected(
                seed,
                testfab::RandomSpec { switches: 16, extra_links: 14, max_hosts_per_switch: 4, max_lmc: 1 },
            );
            let start = crate::updn::updn(&f, &one_vl()).unwrap();
            refined(&f, &start);
            assert_eq!(refine(&f, &start).unwrap().0, refine(&f, &start).unwrap().0);
        }
    }

    #[test]
    fn refuses_cyclic_routes_and_disconnected_fabrics() {
        // minhop on a ring closes the ring's cycle.
        let ring = testfab::ring(5, 1);
        assert!(refine(&ring, &crate::minhop(&ring).unwrap()).is_none());
        let mut b = RoutingFabric::builder();
        let s0 = b.add_switch(crate::Switch::new(1, 4, 1)).unwrap();
        let s1 = b.add_switch(crate::Switch::new(2, 4, 2)).unwrap();
        let e0 = b.add_end_port(crate::EndPort::new(10, 11, 1, 3)).unwrap();
        let e1 = b.add_end_port(crate::EndPort::new(20, 21, 1, 4)).unwrap();
        b.connect(PortEnd::Switch(s0, 1), PortEnd::End(e0)).unwrap();
        b.connect(PortEnd::Switch(s1, 1), PortEnd::End(e1)).unwrap();
        let f = b.build().unwrap();
        let routes = Routes { lfts: vec![crate::Lft::unrouted(4), crate::Lft::unrouted(4)], sl: None };
        assert!(refine(&f, &routes).is_none());
    }

    #[test]
    #[ignore]
    fn figures() {
        let fabrics = vec![
            ("df4", testfab::dragonfly(4, 2)),
            ("df6", testfab::dragonfly(6, 2)),
            ("ft-r12-5", testfab::degraded(&testfab::FatTree::full(12, 3).build(), 5, 1)),
            (
                "rand40",
                testfab::random_connected(
                    1,
                    testfab::RandomSpec { switches: 40, extra_links: 40, max_hosts_per_switch: 8, max_lmc: 0 },
                ),
            ),
        ];
        for (name, f) in fabrics {
            let t = std::time::Instant::now();
            let (r, stats) = crate::nue::nue_with_stats(&f, &one_vl()).unwrap();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let updn = validate(&f, &crate::updn::updn(&f, &one_vl()).unwrap()).inter_switch_load.max;
            let sssp = validate(&f, &crate::sssp::sssp(&f, &one_vl()).unwrap()).inter_switch_load.max;
            println!(
                "{name}: nue 1VL busiest {} (updn {updn}, sssp {sssp}) from_updn {} refined {} in {ms:.1} ms",
                validate(&f, &r).inter_switch_load.max,
                stats.from_updn,
                stats.refined
            );
        }
    }
}
