//! Routing again only the LIDs a loss broke, for any engine whose routes
//! share one VL.
//!
//! After a cable or a switch goes, [`crate::keep::lids_to_repair`] names
//! the LIDs some old table sends over what is gone. Every other LID's old
//! entries still deliver, so a fresh engine run, which reshuffles them
//! all, writes far more than the loss needs: on a 40-switch random fabric
//! routed by Nue on one VL, one cable down changed 232 LFT blocks where
//! OpenSM changes 27, and the fresh tables could not be merged with the
//! old ones (the merge closed a credit loop). [`repair`] keeps every entry
//! that still delivers and grows new routes only from the switches whose
//! old path is broken:
//!
//! 1. The dependencies (channel, then next channel) of every unbroken
//!    LID's tree, every switch counted as a source, are collected and put
//!    in a topological order; if they are cyclic the old routes did not
//!    keep their own promise and nothing is repaired.
//! 2. For each broken LID, the switches whose old path still reaches its
//!    owner keep their entries (their dependencies join the set), and the
//!    others join one at a time, Dijkstra-like from those: fewest hops
//!    first, then the lightest channels, each over a channel whose one new
//!    dependency (onto the next switch's channel) closes no cycle (Pearce
//!    and Kelly's dynamic topological order). A switch that joins is not
//!    yet on anyone's route, so that is the only dependency its join adds.
//! 3. A switch stranded that way (every turn onto a settled neighbour's
//!    route closes a cycle) first tries Nue's local backtracking: the
//!    neighbour moves onto another settled switch if every turn that move
//!    touches fits. Failing that, rip-up and reroute: a cycle its turn
//!    would close is found in the dependencies in use, and another LID
//!    whose tree holds one of its dependencies is taken apart (its
//!    dependencies dropped) and grown again later, whole, the same way;
//!    a LID still waiting to grow loses the part it kept. Failing that
//!    too, the LID is grown again whole from its owner; and if switches
//!    stay stranded (or the rip-up budget, about one per LID, is spent),
//!    the repair gives up and the caller routes afresh. Measured over every
//!    single cut of twenty random 24-switch fabrics (1,038 cuts), 1,035
//!    repair after nue and all after up*/down*, moving a sixth of the
//!    entries a fresh run moves; of the 17 and 60 cuts of the 3x4 and 6x6
//!    meshes, 3 and 1 fall back after nue, 1 and 4 after up*/down*; none
//!    of a 4x4 torus's or a 20-switch dragonfly's (`cargo run --release -p
//!    ibsm-routing --example repair_survey`).
//!
//! So the repaired tables keep the old dependency graph's acyclicity (one
//! VL, every switch a source, which covers the analysis's default scope of
//! end-port traffic from switches with end ports), are loop-free (each LID
//! a tree rooted at its owner), and differ from the old ones only in the
//! broken (or ripped) LIDs' entries at switches whose old path is
//! broken. Routes to
//! switch LIDs are management traffic, outside the deadlock promise (as in
//! [`crate::cdg::CdgScope`]): they are repaired the same way with no
//! dependency check. With `acyclic` off (engines that promise no deadlock
//! freedom, such as minhop) nothing is checked and the repair takes the
//! shortest, least loaded joins.
//!
//! Not for routes layered onto several VLs: their SLs are per path.
//!
//! Cost: O(S·L) to read the tables and weigh the unbroken LIDs' loads
//! (S switches, L LIDs, each host switch's path walked once per LID),
//! plus, per broken LID, a Dijkstra over the channels, O(C log C), and
//! the cycle checks, O(1) for a dependency that agrees with the order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use crate::channels::{ChannelGraph, SelfLoops, UsedDeps, NO_CHANNEL};
use crate::fabric::{NodeRef, RoutingFabric};
use crate::lft::{Lft, Routes, UNROUTED};
use crate::refine::tree_pairs;

/// A hop costs more than any sum of loads: repaired paths stay as short
/// as their dependencies allow.
const HOP_COST: u64 = 1 << 40;

/// What [`repair`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairStats {
    /// LIDs routed again: the broken ones, and those ripped up.
    pub lids: u32,
    /// (switch, LID) entries that differ from the old tables.
    pub moved: u64,
    /// (switch, LID) entries of owned LIDs kept as they were.
    pub kept: u64,
    /// Joins refused because their dependency would close a cycle.
    pub blocked: u64,
    /// Stranded switches joined by moving a neighbour's route.
    pub backtracks: u64,
    /// LIDs whose old part stranded switches, grown again whole.
    pub regrown: u32,
    /// Routed LIDs taken apart to let a stranded switch join, and grown
    /// again after.
    pub ripped: u32,
}

/// Why [`repair`] gave up; the caller routes afresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepairRefused {
    /// Some switch has no old table (a new switch, or none routed yet).
    NoOldTable { switch_guid: u64 },
    /// The unbroken LIDs' old routes already close a credit loop on one
    /// VL, every switch a source.
    OldRoutesCyclic,
    /// Switches that could not join LID `lid`'s tree: their part of the
    /// fabric reaches its owner only by turns that close a cycle.
    Stranded { lid: u16, switches: usize },
}

impl fmt::Display for RepairRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RepairRefused::NoOldTable { switch_guid } => write!(f, "switch {switch_guid:#018x} has no old table"),
            RepairRefused::OldRoutesCyclic => f.write_str("the old routes kept close a credit loop"),
            RepairRefused::Stranded { lid, switches } => {
                write!(f, "{switches} switches reach LID {lid} only by turns that close a credit loop")
            }
        }
    }
}

/// Where a LID's traffic leaves the fabric.
#[derive(Debug, Clone, Copy)]
enum Dest {
    /// No node owns it, or its end port hangs off no switch: unrouted.
    Nowhere,
    /// Switch `switch` delivers it by `port` (0: the switch itself);
    /// `counted`: end-port traffic, inside the deadlock promise.
    At { switch: u32, port: u8, counted: bool },
}

/// Each switch's verdict on a broken LID's old path.
const UNKNOWN: u8 = 0;
const WALKING: u8 = 1;
const INTACT: u8 = 2;
const BROKEN: u8 = 3;

/// `old` (each switch's previous table, by switch index) with every LID
/// in `broken` ([`crate::keep::lids_to_repair`] of the same `f` and `old`)
/// routed again where its old path broke; see the module documentation.
/// LIDs no node owns now are unrouted. `acyclic`: keep the dependency
/// graph of end-port routes acyclic on one VL (the engine promised it).
pub fn repair(
    f: &RoutingFabric,
    old: &[Option<&[u8]>],
    broken: &[bool],
    acyclic: bool,
) -> Result<(Routes, RepairStats), RepairRefused> {
    let ns = f.num_switches();
    let top = usize::from(f.max_lid());
    let mut tables: Vec<&[u8]> = Vec::with_capacity(ns);
    for s in f.switch_ids() {
        match old.get(s.index()).copied().flatten() {
            Some(t) => tables.push(t),
            None => return Err(RepairRefused::NoOldTable { switch_guid: f.switch(s).guid }),
        }
    }
    let dests: Vec<Dest> = (0..=top).map(|lid| dest(f, lid as u16)).collect();
    let entry = |v: usize, lid: usize| tables[v].get(lid).copied().unwrap_or(UNROUTED);
    let mut lfts: Vec<Lft> = (0..ns)
        .map(|v| {
            let ports = (0..=top)
                .map(|lid| match dests[lid] {
                    Dest::At { .. } => entry(v, lid),
                    Dest::Nowhere => UNROUTED,
                })
                .collect();
            Lft { ports }
        })
        .collect();
    let mut r = Repairer::new(f, acyclic);
    let mut row = vec![NO_CHANNEL; ns];
    // 1: what the unbroken LIDs' old routes load and depend on.
    for (lid, d) in dests.iter().enumerate() {
        let Dest::At { switch, counted: true, .. } = *d else { continue };
        if broken.get(lid).copied().unwrap_or(true) {
            continue;
        }
        for (v, slot) in row.iter_mut().enumerate() {
            *slot = if v as u32 == switch { NO_CHANNEL } else { r.ch.chan_of_port(v, entry(v, lid)) };
        }
        r.count(&row);
        r.add_load(&row);
    }
    // The broken LIDs, end-port LIDs first (they carry the load later
    // joins weigh): the parts of their trees that still hold, whose
    // dependencies all count before any new one is judged against them.
    let order = (0..=top).filter(|&lid| broken.get(lid).copied().unwrap_or(false));
    let (counted, management): (Vec<usize>, Vec<usize>) =
        order.partition(|&lid| matches!(dests[lid], Dest::At { counted: true, .. }));
    let mut parts: Vec<(usize, Part)> = Vec::with_capacity(counted.len() + management.len());
    for lid in counted.into_iter().chain(management) {
        let Dest::At { switch, counted, .. } = dests[lid] else {
            for lft in &mut lfts {
                lft.ports[lid] = UNROUTED;
            }
            continue;
        };
        let part = r.judge(switch as usize, |v| entry(v, lid));
        if counted {
            r.count(&part.row);
        }
        parts.push((lid, part));
    }
    if acyclic && !r.deps.order(&r.ch) {
        return Err(RepairRefused::OldRoutesCyclic);
    }
    // 2: each broken LID's tree grown from the part that holds; LIDs
    // ripped up to make way are grown again whole after them.
    let mut stats = RepairStats::default();
    let mut done = vec![false; top + 1];
    for (lid, d) in dests.iter().enumerate() {
        done[lid] = matches!(d, Dest::At { counted: true, .. }) && !broken.get(lid).copied().unwrap_or(true);
    }
    // Rip-ups allowed: about one per LID (a whole random fabric's cuts
    // used under 0.6 per repair, meshes more).
    let mut rips_left = dests.len().max(16);
    // Parts of the LIDs waiting to grow, by LID (`None` once grown).
    let mut queue: std::collections::VecDeque<usize> = parts.iter().map(|&(lid, _)| lid).collect();
    let mut pending: Vec<Option<Part>> = (0..=top).map(|_| None).collect();
    for (lid, part) in parts {
        pending[lid] = Some(part);
    }
    let counted_lid: Vec<bool> = dests.iter().map(|d| matches!(d, Dest::At { counted: true, .. })).collect();
    let mut grown = vec![false; top + 1];
    while let Some(lid) = queue.pop_front() {
        let Dest::At { switch, port, counted } = dests[lid] else { continue };
        let mut part = pending[lid].take().unwrap_or_else(|| Part::empty(ns));
        let mut ripped = Vec::new();
        let mut rip = Rip {
            lfts: &lfts,
            counted: &counted_lid,
            done: &mut done,
            pending: &mut pending,
            ripped: &mut ripped,
            left: &mut rips_left,
        };
        r.grow(lid as u16, switch, counted, &mut part, &mut stats, &mut rip)?;
        grown[lid] = true;
        for (v, lft) in lfts.iter_mut().enumerate() {
            lft.ports[lid] = if v as u32 == switch {
                port
            } else if part.row[v] != NO_CHANNEL {
                r.ch.port[part.row[v] as usize]
            } else {
                UNROUTED
            };
        }
        done[lid] = counted;
        if counted {
            r.add_load(&part.row);
        }
        queue.extend(ripped.into_iter().map(usize::from));
    }
    stats.lids = grown.iter().filter(|&&g| g).count() as u32;
    let owned: Vec<usize> = (0..=top).filter(|&lid| matches!(dests[lid], Dest::At { .. })).collect();
    for (v, lft) in lfts.iter().enumerate() {
        for &lid in &owned {
            stats.moved += u64::from(lft.ports[lid] != entry(v, lid));
        }
    }
    stats.kept = owned.len() as u64 * ns as u64 - stats.moved;
    Ok((Routes { lfts, sl: None }, stats))
}

/// What [`Repairer::rip_up`] may take apart, within a budget: the LIDs
/// routed for good (`done`: their tables in `lfts` are their trees, their
/// dependencies counted), which go to `ripped` to grow again, and the
/// parts of LIDs still waiting to grow (`pending`), which wait emptied.
struct Rip<'a> {
    lfts: &'a [Lft],
    /// End-port LIDs, whose dependencies count.
    counted: &'a [bool],
    done: &'a mut [bool],
    pending: &'a mut [Option<Part>],
    ripped: &'a mut Vec<u16>,
    left: &'a mut usize,
}

fn dest(f: &RoutingFabric, lid: u16) -> Dest {
    match f.lid_owner(lid) {
        Some(NodeRef::End(e)) => match f.attached_switch(e) {
            Some((s, port)) => Dest::At { switch: s.0, port, counted: true },
            None => Dest::Nowhere,
        },
        Some(NodeRef::Switch(s)) => Dest::At { switch: s.0, port: 0, counted: false },
        None => Dest::Nowhere,
    }
}

/// The repair's working state: channels, their loads, and the used
/// dependencies with a topological order of them.
struct Repairer {
    ch: ChannelGraph,
    acyclic: bool,
    hosts: Vec<u64>,
    load: Vec<u64>,
    /// The dependencies in use (counted only when `acyclic`).
    deps: UsedDeps,
    /// Connected part of each switch.
    part: Vec<u32>,
    /// [`Repairer::judge`]'s scratch.
    state: Vec<u8>,
    walk: Vec<usize>,
}

impl Repairer {
    fn new(f: &RoutingFabric, acyclic: bool) -> Repairer {
        let ch = ChannelGraph::in_fabric_order(f, SelfLoops::Skip);
        let ns = f.num_switches();
        let part = f.components().of_switch;
        Repairer {
            hosts: f.end_ports_per_switch(),
            load: vec![0; ch.num_channels()],
            deps: UsedDeps::new(&ch),
            part,
            state: vec![UNKNOWN; ns],
            walk: Vec::new(),
            acyclic,
            ch,
        }
    }

    /// Counts the dependencies of a whole tree (`row`: each switch's
    /// channel towards the LID), before the order is built.
    fn count(&mut self, row: &[u32]) {
        if !self.acyclic {
            return;
        }
        for (a, b) in tree_pairs(&self.ch, row) {
            self.deps.count(&self.ch, a, b);
        }
    }

    /// Adds the dependency `a -> b` unless it closes a cycle.
    fn add_dep(&mut self, a: u32, b: u32) -> bool {
        self.deps.add(&self.ch, a, b)
    }

    fn drop_dep(&mut self, a: u32, b: u32) {
        self.deps.remove(&self.ch, a, b);
    }

    /// Adds one LID's traffic to the channel loads: each switch's end
    /// ports send it along the switch's route.
    fn add_load(&mut self, row: &[u32]) {
        for (v, &h) in self.hosts.iter().enumerate() {
            if h == 0 {
                continue;
            }
            let mut c = row[v];
            let mut hops = 0;
            while c != NO_CHANNEL && hops <= row.len() {
                self.load[c as usize] += h;
                c = row[self.ch.head[c as usize] as usize];
                hops += 1;
            }
        }
    }

    /// Grows LID `lid`'s tree from `part` (what [`Repairer::judge`] found
    /// whole, its dependencies counted) to every switch of the owner's
    /// connected part; see the module documentation. When switches are
    /// left stranded, the LID's whole tree is grown again from its owner,
    /// its old part's dependencies dropped, before giving up.
    ///
    /// Invariant: this LID's dependencies in `uses` are exactly those of
    /// its row ([`tree_pairs`]), so they can be dropped from the row alone.
    fn grow(
        &mut self,
        lid: u16,
        owner: u32,
        counted: bool,
        part: &mut Part,
        stats: &mut RepairStats,
        rip: &mut Rip,
    ) -> Result<(), RepairRefused> {
        let owner = owner as usize;
        let checked = self.acyclic && counted;
        if self.join_ripping(owner, lid, checked, part, stats, rip) == 0 {
            return Ok(());
        }
        // The part that held strands the rest: grow it all again.
        let deps: Vec<(u32, u32)> = tree_pairs(&self.ch, &part.row).collect();
        for (a, b) in deps {
            self.drop_dep(a, b);
        }
        part.row.fill(NO_CHANNEL);
        part.key.fill(0);
        stats.regrown += 1;
        match self.join_ripping(owner, lid, checked, part, stats, rip) {
            0 => Ok(()),
            switches => Err(RepairRefused::Stranded { lid, switches }),
        }
    }

    /// [`Repairer::join`], ripping up other LIDs ([`Repairer::rip_up`])
    /// while switches stay stranded and the budget lasts; returns how many
    /// are left stranded.
    fn join_ripping(
        &mut self,
        owner: usize,
        lid: u16,
        checked: bool,
        part: &mut Part,
        stats: &mut RepairStats,
        rip: &mut Rip,
    ) -> usize {
        loop {
            let stranded = self.join(owner, checked, part, stats);
            if stranded.is_empty() || !checked || *rip.left == 0 {
                return stranded.len();
            }
            // A stranded switch next to the tree, whose turns onto it a
            // ripped LID frees.
            if !stranded.iter().any(|&x| self.rip_up(x, owner, lid, &part.row, rip)) {
                return stranded.len();
            }
            *rip.left -= 1;
            stats.ripped += 1;
        }
    }

    /// Rip-up and reroute: stranded switch `x` cannot join LID `lid`'s
    /// tree because each of its turns onto a settled neighbour's route
    /// closes a cycle through the dependencies in use. Finds such a cycle
    /// and takes apart one routed LID whose tree holds a dependency on it
    /// (its dependencies dropped, it is grown again later). Returns false
    /// when no cycle runs through another LID's tree.
    fn rip_up(&mut self, x: usize, owner: usize, lid: u16, row: &[u32], rip: &mut Rip) -> bool {
        for c in self.ch.out(x) {
            let y = self.ch.head[c as usize] as usize;
            if y == owner || row[y] == NO_CHANNEL {
                continue;
            }
            let Some(path) = self.dep_path(row[y], c) else { continue };
            for pair in path.windows(2) {
                let (u, w) = (pair[0], pair[1]);
                let (from, to) = (self.ch.tail[u as usize] as usize, self.ch.head[u as usize] as usize);
                let routed = |l: usize| {
                    let hop = |v: usize| self.ch.chan_of_port(v, rip.lfts[v].ports[l]);
                    rip.done[l] && hop(from) == u && hop(to) == w
                };
                // Switch LIDs' parts count no dependency: never ripped.
                let waiting = |l: usize| {
                    rip.counted[l] && rip.pending[l].as_ref().is_some_and(|p| p.row[from] == u && p.row[to] == w)
                };
                let others = (1..rip.done.len()).filter(|&l| l != usize::from(lid));
                let Some(victim) = others.clone().find(|&l| routed(l)).or_else(|| others.clone().find(|&l| waiting(l)))
                else {
                    continue;
                };
                let tree: Vec<u32> = match rip.pending[victim].as_mut() {
                    Some(part) => {
                        let row = std::mem::replace(&mut part.row, vec![NO_CHANNEL; row.len()]);
                        part.key.fill(0);
                        row
                    }
                    None => {
                        rip.done[victim] = false;
                        rip.ripped.push(victim as u16);
                        (0..row.len()).map(|v| self.ch.chan_of_port(v, rip.lfts[v].ports[victim])).collect()
                    }
                };
                let deps: Vec<(u32, u32)> = tree_pairs(&self.ch, &tree).collect();
                for (a, b) in deps {
                    self.drop_dep(a, b);
                }
                return true;
            }
        }
        false
    }

    /// The channels of a chain of dependencies in use from `from` to `to`
    /// (breadth-first), both included; `None` when `to` is not reached.
    fn dep_path(&self, from: u32, to: u32) -> Option<Vec<u32>> {
        let mut parent = vec![u32::MAX; self.ch.num_channels()];
        let mut queue = std::collections::VecDeque::from([from]);
        parent[from as usize] = from;
        while let Some(u) = queue.pop_front() {
            if u == to {
                let mut path = vec![to];
                let mut at = to;
                while at != from {
                    at = parent[at as usize];
                    path.push(at);
                }
                path.reverse();
                return Some(path);
            }
            let row = self.ch.dep_row(u as usize);
            let v = self.ch.head[u as usize] as usize;
            for (j, w) in self.ch.out(v).enumerate() {
                if self.deps.uses[row + j] > 0 && parent[w as usize] == u32::MAX {
                    parent[w as usize] = u;
                    queue.push_back(w);
                }
            }
        }
        None
    }

    /// Joins every switch of the owner's connected part that `part` does
    /// not route yet, Dijkstra-like (hops, then loads), each over a channel
    /// whose one new dependency fits when `checked`; a switch stranded
    /// that way joins by [`Repairer::backtrack`] if it can. Returns the
    /// switches that could not join.
    fn join(&mut self, owner: usize, checked: bool, part: &mut Part, stats: &mut RepairStats) -> Vec<usize> {
        let ns = part.row.len();
        let home = self.part[owner];
        let mut settled: Vec<bool> = (0..ns).map(|v| v == owner || part.row[v] != NO_CHANNEL).collect();
        let mut heap = BinaryHeap::new();
        for y in (0..ns).filter(|&y| settled[y]) {
            self.push_into(&mut heap, y, part.key[y], &settled);
        }
        loop {
            while let Some(Reverse((k, x, c))) = heap.pop() {
                let x = x as usize;
                if settled[x] {
                    continue;
                }
                // The switch joining is on no route yet: its own turn onto
                // the next switch's channel is the one dependency it adds.
                let next = part.row[self.ch.head[c as usize] as usize];
                if checked && next != NO_CHANNEL && !self.add_dep(c, next) {
                    stats.blocked += 1;
                    continue;
                }
                settled[x] = true;
                part.row[x] = c;
                part.key[x] = k;
                self.push_into(&mut heap, x, k, &settled);
            }
            let stranded: Vec<usize> = (0..ns).filter(|&v| self.part[v] == home && !settled[v]).collect();
            if stranded.is_empty() || !checked {
                return stranded;
            }
            let joined = stranded.iter().find_map(|&x| Some((x, self.backtrack(x, owner, &settled, &mut part.row)?)));
            let Some((x, c)) = joined else { return stranded };
            stats.backtracks += 1;
            settled[x] = true;
            part.row[x] = c;
            let y = self.ch.head[c as usize] as usize;
            part.key[x] = part.key[y] + HOP_COST + self.load[c as usize];
            self.push_into(&mut heap, x, part.key[x], &settled);
        }
    }

    /// Pushes every channel into settled switch `y` (key `key`) from a
    /// switch not settled yet.
    fn push_into(&self, heap: &mut BinaryHeap<Reverse<(u64, u32, u32)>>, y: usize, key: u64, settled: &[bool]) {
        for o in self.ch.channels(y) {
            let c = self.ch.reverse(o);
            let x = self.ch.tail[c] as usize;
            if !settled[x] {
                heap.push(Reverse((key + HOP_COST + self.load[c], x as u32, c as u32)));
            }
        }
    }

    /// Nue's local backtracking: stranded switch `x` joins over a channel
    /// `c` into a settled neighbour `y` once `y` moves onto another settled
    /// neighbour `w` whose route avoids `y`, if every turn that move
    /// touches fits: `y`'s onto `w`'s route, those of the switches routed
    /// into `y` onto `y`'s new channel, and `x`'s. Returns `c` (the caller
    /// settles `x`), with `row` and the dependencies changed; or `None`,
    /// nothing changed.
    fn backtrack(&mut self, x: usize, owner: usize, settled: &[bool], row: &mut [u32]) -> Option<u32> {
        for c in self.ch.out(x) {
            let y = self.ch.head[c as usize] as usize;
            if !settled[y] || y == owner {
                continue;
            }
            let current = row[y];
            let onward = row[self.ch.head[current as usize] as usize];
            let into: Vec<u32> = self
                .ch
                .channels(y)
                .map(|o| self.ch.rev[o])
                .filter(|&ci| row[self.ch.tail[ci as usize] as usize] == ci)
                .collect();
            for c2 in self.ch.out(y) {
                let w = self.ch.head[c2 as usize] as usize;
                if c2 == current || !settled[w] || passes(&self.ch, row, w, y, owner) {
                    continue;
                }
                // y's old turns out, then the new ones in.
                let mut gone = Vec::with_capacity(into.len() + 1);
                if onward != NO_CHANNEL {
                    gone.push((current, onward));
                }
                gone.extend(into.iter().map(|&ci| (ci, current)));
                for &(a, b) in &gone {
                    self.drop_dep(a, b);
                }
                let mut wanted = Vec::with_capacity(into.len() + 2);
                if row[w] != NO_CHANNEL {
                    wanted.push((c2, row[w]));
                }
                wanted.extend(into.iter().map(|&ci| (ci, c2)));
                wanted.push((c, c2));
                let mut added = Vec::with_capacity(wanted.len());
                for &(a, b) in &wanted {
                    if !self.add_dep(a, b) {
                        break;
                    }
                    added.push((a, b));
                }
                if added.len() == wanted.len() {
                    row[y] = c2;
                    return Some(c);
                }
                for (a, b) in added {
                    self.drop_dep(a, b);
                }
                for (a, b) in gone {
                    let back = self.add_dep(a, b);
                    debug_assert!(back, "restoring a dependency of an acyclic set");
                }
            }
        }
        None
    }

    /// The part of a LID's old tree that still holds: each switch whose
    /// old entries (`entry`) lead over cables that are there to `owner`
    /// keeps its channel in the row (the others [`NO_CHANNEL`]), with its
    /// key (hops, then the loads along that path).
    fn judge(&mut self, owner: usize, entry: impl Fn(usize) -> u8) -> Part {
        let ns = self.state.len();
        let mut row = vec![NO_CHANNEL; ns];
        let mut key = vec![0u64; ns];
        self.state.fill(UNKNOWN);
        self.state[owner] = INTACT;
        for start in 0..ns {
            self.walk.clear();
            let mut at = start;
            let verdict = loop {
                match self.state[at] {
                    UNKNOWN => {}
                    WALKING => break BROKEN,
                    done => break done,
                }
                let c = self.ch.chan_of_port(at, entry(at));
                if c == NO_CHANNEL {
                    break BROKEN;
                }
                self.state[at] = WALKING;
                row[at] = c;
                self.walk.push(at);
                at = self.ch.head[c as usize] as usize;
            };
            // Keys back from where the walk ended.
            let mut k = key[at];
            while let Some(v) = self.walk.pop() {
                self.state[v] = verdict;
                if verdict == INTACT {
                    k += HOP_COST + self.load[row[v] as usize];
                    key[v] = k;
                } else {
                    row[v] = NO_CHANNEL;
                }
            }
        }
        Part { row, key }
    }
}

/// Whether the route from `w` (along `row` to `owner`) passes `y`.
fn passes(ch: &ChannelGraph, row: &[u32], w: usize, y: usize, owner: usize) -> bool {
    let mut at = w;
    for _ in 0..row.len() {
        if at == y {
            return true;
        }
        if at == owner || row[at] == NO_CHANNEL {
            return false;
        }
        at = ch.head[row[at] as usize] as usize;
    }
    true
}

impl Part {
    fn empty(ns: usize) -> Part {
        Part { row: vec![NO_CHANNEL; ns], key: vec![0; ns] }
    }
}

/// One broken LID's tree while it is repaired: each switch's channel
/// towards it ([`NO_CHANNEL`]: none yet, or the owner) and its key.
struct Part {
    row: Vec<u32>,
    key: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::validate;
    use crate::cdg::{analyze_cdg, CdgScope};
    use crate::keep::lids_to_repair;
    use crate::options::EngineOptions;
    use crate::testfab::{random_connected, without_links, RandomSpec};
    use crate::PortEnd;

    fn switch_links(f: &RoutingFabric) -> Vec<usize> {
        f.links()
            .iter()
            .enumerate()
            .filter(|(_, l)| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..))))
            .map(|(i, _)| i)
            .collect()
    }

    /// Every switch-to-switch cable of random fabrics routed on one VL by
    /// nue and by up*/down*, cut one at a time: each repair delivers every
    /// LID, is free of credit loops and changes only broken LIDs' entries
    /// (and those of LIDs ripped up to make way); at least 95% of cuts are
    /// repaired (116 and 117 of 117 when written; the rest are routed
    /// afresh by the caller), and the repairs move under half the entries
    /// fresh runs do
    /// (a third on these 16-switch fabrics, a sixth on 24-switch ones).
    #[test]
    fn a_repair_after_any_one_cut_delivers_everything_free_of_credit_loops() {
        let o = EngineOptions { max_vls: 1, ..EngineOptions::default() };
        for engine in ["nue", "updn"] {
            let route = |f: &RoutingFabric| match engine {
                "nue" => crate::nue::nue(f, &o).unwrap(),
                _ => crate::updn::updn(f, &o).unwrap(),
            };
            let (mut cuts, mut repaired, mut moved, mut fresh_moved, mut rips) = (0, 0, 0u64, 0u64, 0);
            for seed in 0..4 {
                let spec = RandomSpec { switches: 16, extra_links: 16, max_hosts_per_switch: 3, max_lmc: 1 };
                let f = random_connected(seed, spec);
                let before = route(&f);
                let old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
                for link in switch_links(&f) {
                    let cut = without_links(&f, &[link]);
                    if cut.components().count() != f.components().count() {
                        continue;
                    }
                    cuts += 1;
                    let broken = lids_to_repair(&cut, &old);
                    let Ok((routes, stats)) = repair(&cut, &old, &broken, true) else { continue };
                    repaired += 1;
                    let v = validate(&cut, &routes);
                    assert!(v.is_valid(), "{engine}, seed {seed}, cut {link}: {v:?}");
                    assert!(analyze_cdg(&cut, &routes, CdgScope::default()).deadlock_free(), "{engine} {seed} {link}");
                    // Unbroken LIDs keep their entries unless one was ripped
                    // up to make way.
                    let unbroken_moved = routes.lfts.iter().zip(&before.lfts).any(|(now, was)| {
                        (1..=usize::from(cut.max_lid())).any(|lid| !broken[lid] && now.ports[lid] != was.ports[lid])
                    });
                    assert!(!unbroken_moved || stats.ripped > 0, "{engine} {seed} {link}: {stats:?}");
                    let broken_lids = broken.iter().filter(|&&b| b).count() as u32;
                    assert!((broken_lids..=broken_lids + stats.ripped).contains(&stats.lids), "{stats:?}");
                    rips += stats.ripped;
                    assert_eq!(stats.moved, differ(&routes, &before));
                    moved += stats.moved;
                    fresh_moved += differ(&route(&cut), &before);
                }
            }
            assert!(repaired * 20 >= cuts * 19, "{engine}: {repaired} of {cuts} cuts repaired ({rips} LIDs ripped up)");
            assert!(moved * 2 < fresh_moved, "{engine}: repairs moved {moved} entries, fresh runs {fresh_moved}");
        }
    }

    /// (switch, LID) entries where two routings differ.
    fn differ(a: &Routes, b: &Routes) -> u64 {
        let rows = a.lfts.iter().zip(&b.lfts);
        rows.map(|(x, y)| x.ports.iter().zip(&y.ports).filter(|(p, q)| p != q).count() as u64).sum()
    }

    /// The switch LIDs and a LID whose owner is gone: the one repaired
    /// without a dependency check, the other unrouted.
    #[test]
    fn a_switch_gone_unroutes_its_lids_and_repairs_the_rest() {
        let f = random_connected(5, RandomSpec { switches: 12, extra_links: 14, max_hosts_per_switch: 2, max_lmc: 0 });
        let o = EngineOptions { max_vls: 1, ..EngineOptions::default() };
        let before = crate::nue::nue(&f, &o).unwrap();
        let old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
        // Every switch-to-switch cable of one switch with no end port,
        // or of the first switch.
        let victim =
            f.switch_ids().find(|s| f.end_ports_per_switch()[s.index()] == 0).unwrap_or(crate::fabric::SwitchId(0));
        let links: Vec<usize> = switch_links(&f)
            .into_iter()
            .filter(|&i| {
                let l = &f.links()[i];
                matches!(l.a, PortEnd::Switch(s, _) if s == victim)
                    || matches!(l.b, PortEnd::Switch(s, _) if s == victim)
            })
            .collect();
        let cut = without_links(&f, &links);
        let broken = lids_to_repair(&cut, &old);
        let (routes, _) = repair(&cut, &old, &broken, true).unwrap();
        // The victim is cut off: the others still reach every LID of their
        // part, and the victim's own LIDs are routed only by itself.
        for lid in cut.switch(victim).lids() {
            for (s, lft) in routes.lfts.iter().enumerate() {
                let want = if s == victim.index() { 0 } else { UNROUTED };
                assert_eq!(lft.ports[lid as usize], want, "switch {s}, victim's LID {lid}");
            }
        }
        let v = validate(&cut, &routes);
        assert!(v.is_valid(), "{v:?}");
        assert!(analyze_cdg(&cut, &routes, CdgScope::default()).deadlock_free());
    }
}
