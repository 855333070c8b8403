//! Route analysis: does every source reach every LID, how long are the
//! paths, and how evenly does all-to-all traffic load the links?
//!
//! For a fixed destination LID the LFTs give every switch exactly one next
//! hop, so the switches form a *functional graph*: following next hops from
//! any switch ends in a delivery, a black hole, a wrong destination, or a
//! cycle. [`validate`] resolves that graph once per LID with memoised walks
//! (each switch is visited once), which gives the outcome and hop count for
//! every switch source at once; an end port's outcome is its switch's plus
//! one cable. Cost: O(L·S) for L destination LIDs and S switches, plus one
//! breadth-first search per destination switch for the shortest distances,
//! O(S·(S + E)).
//!
//! All-to-all link load counts one path per ordered pair of end ports, to
//! the destination's base LID. Because the routes to one LID form a tree,
//! the load follows from accumulating sources down that tree, again O(S) per
//! LID.
//!
//! [`shift_balance`] loads the links with the shift pattern (end port i to
//! end port i + k, for every k), and [`analyze`] runs everything, including
//! the deadlock analysis of [`crate::cdg`], into one [`AnalysisReport`].

use std::fmt;

use serde::Serialize;

use crate::cdg::{analyze_cdg, CdgReport, CdgScope};
use crate::fabric::{EndPortId, NodeRef, PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Routes, UNROUTED};

/// How many failure examples a report keeps; the counts are always complete.
pub const MAX_FAILURE_EXAMPLES: usize = 64;

/// Why a packet was dropped at a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BlackHoleReason {
    /// The LFT entry is 255 (or the switch has no LFT, or the LID is past
    /// LinearFDBTop).
    Unrouted,
    /// The entry names a port the switch does not have.
    PortOutOfRange,
    /// The entry names a port with no cable.
    NotCabled,
}

/// One way routes to a LID fail, with the number of sources (switches and
/// end ports) whose packets meet it. GUIDs are switch GUIDs or end-port port
/// GUIDs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Failure {
    /// Packets circle through `cycle` (switch GUIDs in forwarding order).
    Loop {
        lid: u16,
        cycle: Vec<u64>,
        sources: u64,
    },
    BlackHole {
        lid: u16,
        switch: u64,
        port: u8,
        reason: BlackHoleReason,
        sources: u64,
    },
    /// Packets leave `switch` by `port` (0 = the switch itself) and arrive at
    /// `reached`, which does not own the LID.
    WrongDestination {
        lid: u16,
        switch: u64,
        port: u8,
        reached: u64,
        sources: u64,
    },
}

impl Failure {
    pub fn lid(&self) -> u16 {
        match self {
            Failure::Loop { lid, .. } | Failure::BlackHole { lid, .. } | Failure::WrongDestination { lid, .. } => *lid,
        }
    }
    pub fn sources(&self) -> u64 {
        match self {
            Failure::Loop { sources, .. }
            | Failure::BlackHole { sources, .. }
            | Failure::WrongDestination { sources, .. } => *sources,
        }
    }
}

/// A directed cable: leaves `from` by `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DirectedLink {
    pub from: u64,
    pub port: u8,
    pub to: u64,
}

/// Load statistics over a class of directed links.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct LoadStats {
    /// Directed links in the class (two per cable).
    pub links: usize,
    /// The edge forwarding index: the most paths through one link.
    pub max: u64,
    pub mean: f64,
    /// How many links carry `max`.
    pub at_max: usize,
    /// The first link (in switch, port order) carrying `max`.
    pub max_link: Option<DirectedLink>,
}

/// What [`validate`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub switches: usize,
    pub end_ports: usize,
    /// Every LID of every node (all 2^LMC of each).
    pub destination_lids: usize,
    /// (source, destination LID) pairs: every switch and end port towards
    /// every LID it does not own itself.
    pub pairs: u64,
    pub delivered: u64,
    /// Delivered on a path as short as the cabling allows.
    pub minimal: u64,
    /// Pairs the cabling does not connect at all; not routing failures.
    pub no_path: u64,
    pub loops: u64,
    pub black_holes: u64,
    pub wrong_destination: u64,
    /// Most extra cables any delivered path takes over the shortest one.
    /// The same counts restricted to (end port, end-port LID) pairs: the
    /// traffic applications send. OpenSM's updn, for one, leaves some
    /// switch-to-switch LIDs unrouted, which matters only for management.
    pub end_pairs: u64,
    pub end_delivered: u64,
    pub end_no_path: u64,
    pub max_stretch: u32,
    /// Extra cables over the shortest path, summed over delivered pairs
    /// (the mean stretch is this over `delivered`).
    pub extra_hops: u64,
    /// Delivered pairs by path length in cables (index = length).
    pub hop_histogram: Vec<u64>,
    /// All-to-all among end ports, switch-to-switch links.
    pub inter_switch_load: LoadStats,
    /// All-to-all among end ports, links with an end port on either side.
    pub access_load: LoadStats,
    /// The first [`MAX_FAILURE_EXAMPLES`] failures found (destination
    /// switches in index order), sorted by LID.
    pub failures: Vec<Failure>,
    /// Failures found beyond those.
    pub failures_omitted: usize,
}

impl Report {
    /// No loops, black holes or wrong destinations between connected nodes.
    pub fn is_clean(&self) -> bool {
        self.loops == 0 && self.black_holes == 0 && self.wrong_destination == 0
    }
    /// Every delivered path is a shortest one.
    pub fn all_minimal(&self) -> bool {
        self.minimal == self.delivered
    }
    /// Every pair is connected by cables.
    pub fn fully_connected(&self) -> bool {
        self.no_path == 0
    }
    /// The longest delivered path, in cables.
    pub fn max_hops(&self) -> usize {
        self.hop_histogram.len().saturating_sub(1)
    }
    /// Mean delivered path length, in cables.
    pub fn mean_hops(&self) -> f64 {
        let n: u64 = self.hop_histogram.iter().sum();
        let total: u64 = self.hop_histogram.iter().enumerate().map(|(len, c)| len as u64 * c).sum();
        if n == 0 {
            0.0
        } else {
            total as f64 / n as f64
        }
    }
    /// Mean extra cables per delivered pair over the shortest path.
    pub fn mean_stretch(&self) -> f64 {
        if self.delivered == 0 {
            0.0
        } else {
            self.extra_hops as f64 / self.delivered as f64
        }
    }
    /// Clean, and every pair the cabling connects is delivered.
    pub fn is_valid(&self) -> bool {
        self.is_clean() && self.delivered + self.no_path == self.pairs
    }
    /// Every end port the cabling connects reaches every LID of every other
    /// end port (failures towards switch LIDs do not count).
    pub fn end_ports_valid(&self) -> bool {
        self.end_delivered + self.end_no_path == self.end_pairs
    }
}

/// Paths per directed link for all-to-all among end ports (base LIDs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkLoads {
    /// Indexed by [`RoutingFabric::switch_port_slot`].
    pub switch_ports: Vec<u64>,
    /// Indexed by end port: paths leaving the end port.
    pub end_ports: Vec<u64>,
}

impl LinkLoads {
    pub fn switch_port(&self, f: &RoutingFabric, s: SwitchId, port: u8) -> u64 {
        self.switch_ports[f.switch_port_slot(s, port)]
    }
}

/// One hop of a [`trace`]: the switch and the port it forwarded by.
pub type Hop = (SwitchId, u8);

/// Where a single traced packet ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum TraceEnd {
    Delivered(NodeRef),
    WrongDestination(NodeRef),
    BlackHole {
        switch: SwitchId,
        port: u8,
        reason: BlackHoleReason,
    },
    /// The switch visited twice.
    Loop(SwitchId),
    /// The source end port has no cable.
    NoCable,
}

/// The hop-by-hop path of one packet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Trace {
    pub hops: Vec<Hop>,
    pub end: TraceEnd,
}

/// The path a packet from `source` to `dlid` takes. O(path length).
pub fn trace(f: &RoutingFabric, routes: &Routes, source: NodeRef, dlid: u16) -> Trace {
    let owner = f.lid_owner(dlid);
    let mut hops = Vec::new();
    let mut cur = match source {
        NodeRef::Switch(s) => s,
        NodeRef::End(e) => match f.end_peer(e) {
            None => return Trace { hops, end: TraceEnd::NoCable },
            Some(PortEnd::End(o)) => return Trace { hops, end: arrive(owner, NodeRef::End(o)) },
            Some(PortEnd::Switch(s, _)) => s,
        },
    };
    let mut seen = vec![false; f.num_switches()];
    loop {
        if std::mem::replace(&mut seen[cur.index()], true) {
            return Trace { hops, end: TraceEnd::Loop(cur) };
        }
        match step(f, routes, cur, dlid) {
            Step::Terminal(port, end) => {
                hops.push((cur, port));
                let end = match end {
                    Terminal::Reached(node) => arrive(owner, node),
                    Terminal::Dropped(reason) => TraceEnd::BlackHole { switch: cur, port, reason },
                };
                return Trace { hops, end };
            }
            Step::Next(port, n) => {
                hops.push((cur, port));
                cur = n;
            }
        }
    }
}

fn arrive(owner: Option<NodeRef>, reached: NodeRef) -> TraceEnd {
    if owner == Some(reached) {
        TraceEnd::Delivered(reached)
    } else {
        TraceEnd::WrongDestination(reached)
    }
}

enum Terminal {
    /// The packet leaves the switch fabric at this node.
    Reached(NodeRef),
    Dropped(BlackHoleReason),
}

enum Step {
    Terminal(u8, Terminal),
    Next(u8, SwitchId),
}

/// One LFT lookup at switch `s`.
#[inline]
fn step(f: &RoutingFabric, routes: &Routes, s: SwitchId, dlid: u16) -> Step {
    let port = routes.port(s, dlid);
    if port == UNROUTED {
        return Step::Terminal(port, Terminal::Dropped(BlackHoleReason::Unrouted));
    }
    if port == 0 {
        return Step::Terminal(0, Terminal::Reached(NodeRef::Switch(s)));
    }
    if port > f.switch(s).num_ports {
        return Step::Terminal(port, Terminal::Dropped(BlackHoleReason::PortOutOfRange));
    }
    match f.switch_peer(s, port) {
        None => Step::Terminal(port, Terminal::Dropped(BlackHoleReason::NotCabled)),
        Some(PortEnd::End(e)) => Step::Terminal(port, Terminal::Reached(NodeRef::End(e))),
        Some(PortEnd::Switch(n, _)) => Step::Next(port, n),
    }
}

const K_DELIVERED: u8 = 0;
const K_LOOP: u8 = 1;
const K_BLACK_HOLE: u8 = 2;
const K_WRONG: u8 = 3;
const NONE: u32 = u32::MAX;

/// Per-LID scratch, reused: stamps avoid clearing O(S) arrays per LID.
struct Walker {
    stamp: u32,
    done: Vec<u32>,
    on_path: Vec<u32>,
    path_pos: Vec<u32>,
    kind: Vec<u8>,
    hops: Vec<u32>,
    term: Vec<u32>,
    next: Vec<u32>,
    /// Switches in the order their outcome was fixed: every switch comes
    /// after its next hop, so the reverse order visits sources before sinks.
    resolved: Vec<u32>,
    path: Vec<u32>,
    /// Failure terminals of the current LID (sources filled in later).
    terms: Vec<Failure>,
}

impl Walker {
    fn new(s: usize) -> Walker {
        Walker {
            stamp: 0,
            done: vec![0; s],
            on_path: vec![0; s],
            path_pos: vec![0; s],
            kind: vec![0; s],
            hops: vec![0; s],
            term: vec![NONE; s],
            next: vec![NONE; s],
            resolved: Vec::with_capacity(s),
            path: Vec::new(),
            terms: Vec::new(),
        }
    }

    fn begin(&mut self) {
        self.stamp += 1;
        self.resolved.clear();
        self.terms.clear();
    }

    fn fix(&mut self, s: usize, kind: u8, hops: u32, term: u32) {
        self.done[s] = self.stamp;
        self.kind[s] = kind;
        self.hops[s] = hops;
        self.term[s] = term;
        self.resolved.push(s as u32);
    }

    /// Resolves switch `start` and everything on its forwarding path.
    fn walk(&mut self, f: &RoutingFabric, routes: &Routes, owner: Option<NodeRef>, dlid: u16, start: usize) {
        let stamp = self.stamp;
        self.path.clear();
        let mut cur = start;
        // Outcome of the first node past the path: (kind, hops, term).
        let (kind, mut hops, term) = loop {
            if self.done[cur] == stamp {
                break (self.kind[cur], self.hops[cur], self.term[cur]);
            }
            if self.on_path[cur] == stamp {
                let cycle =
                    self.path[self.path_pos[cur] as usize..].iter().map(|&s| f.switches()[s as usize].guid).collect();
                self.terms.push(Failure::Loop { lid: dlid, cycle, sources: 0 });
                // The path's last node points back into it: resolve it and
                // the rest below as looping.
                let last = self.path.pop().expect("a cycle has a node");
                let t = self.terms.len() as u32 - 1;
                self.fix(last as usize, K_LOOP, 0, t);
                break (K_LOOP, 0, t);
            }
            self.on_path[cur] = stamp;
            self.path_pos[cur] = self.path.len() as u32;
            self.path.push(cur as u32);
            let sid = SwitchId(cur as u32);
            match step(f, routes, sid, dlid) {
                Step::Next(_, n) => {
                    self.next[cur] = n.0;
                    cur = n.index();
                }
                Step::Terminal(port, t) => {
                    self.next[cur] = NONE;
                    let guid = f.switches()[cur].guid;
                    let (k, h, tid) = match t {
                        Terminal::Reached(node) if Some(node) == owner => {
                            (K_DELIVERED, u32::from(matches!(node, NodeRef::End(_))), NONE)
                        }
                        Terminal::Reached(node) => {
                            let reached = f.guid_of(node);
                            self.terms.push(Failure::WrongDestination {
                                lid: dlid,
                                switch: guid,
                                port,
                                reached,
                                sources: 0,
                            });
                            (K_WRONG, 0, self.terms.len() as u32 - 1)
                        }
                        Terminal::Dropped(reason) => {
                            self.terms.push(Failure::BlackHole { lid: dlid, switch: guid, port, reason, sources: 0 });
                            (K_BLACK_HOLE, 0, self.terms.len() as u32 - 1)
                        }
                    };
                    self.path.pop();
                    self.fix(cur, k, h, tid);
                    break (k, h, tid);
                }
            }
        };
        while let Some(s) = self.path.pop() {
            hops += 1;
            self.fix(s as usize, kind, hops, term);
        }
    }
}

/// Traces every (source, destination LID) pair through `routes`; see the
/// module documentation for the method and its cost.
pub fn validate(f: &RoutingFabric, routes: &Routes) -> Report {
    validate_with_loads(f, routes).0
}

/// [`validate`], also returning the all-to-all load of every directed link.
pub fn validate_with_loads(f: &RoutingFabric, routes: &Routes) -> (Report, LinkLoads) {
    let ns = f.num_switches();
    let ne = f.num_end_ports();

    // End ports hanging off each switch.
    let attached = f.end_ports_per_switch();

    // Destination LIDs grouped by the switch they hang off, so that one BFS
    // serves them all; LIDs of end ports that hang off no switch apart.
    let mut by_switch: Vec<Vec<(u16, NodeRef)>> = vec![Vec::new(); ns];
    let mut floating: Vec<(u16, NodeRef)> = Vec::new();
    let mut destination_lids = 0usize;
    for s in f.switch_ids() {
        for lid in f.switch(s).lids() {
            by_switch[s.index()].push((lid as u16, NodeRef::Switch(s)));
            destination_lids += 1;
        }
    }
    for e in f.end_port_ids() {
        for lid in f.end_port(e).lids() {
            let item = (lid as u16, NodeRef::End(e));
            match f.attached_switch(e) {
                Some((s, _)) => by_switch[s.index()].push(item),
                None => floating.push(item),
            }
            destination_lids += 1;
        }
    }

    let mut rep = Report {
        switches: ns,
        end_ports: ne,
        destination_lids,
        pairs: 0,
        delivered: 0,
        minimal: 0,
        no_path: 0,
        loops: 0,
        black_holes: 0,
        wrong_destination: 0,
        end_pairs: 0,
        end_delivered: 0,
        end_no_path: 0,
        max_stretch: 0,
        extra_hops: 0,
        hop_histogram: Vec::new(),
        inter_switch_load: LoadStats::default(),
        access_load: LoadStats::default(),
        failures: Vec::new(),
        failures_omitted: 0,
    };
    let mut failures: Vec<Failure> = Vec::new();
    let mut loads = LinkLoads { switch_ports: vec![0; f.num_switch_port_slots()], end_ports: vec![0; ne] };
    // All-to-all access links: paths leaving each switch's end ports.
    let mut delivered_from = vec![0u64; ns];
    let mut own_delivered = vec![0u64; ne];

    let mut w = Walker::new(ns);
    let mut dist = Vec::new();
    let mut queue = Vec::new();
    let mut flow = vec![0u64; ns];

    let hist = |h: &mut Vec<u64>, len: u32, n: u64| {
        if n == 0 {
            return;
        }
        let i = len as usize;
        if h.len() <= i {
            h.resize(i + 1, 0);
        }
        h[i] += n;
    };

    for d in f.switch_ids() {
        if by_switch[d.index()].is_empty() {
            continue;
        }
        f.switch_distances(d, &mut dist, &mut queue);
        // Switches and end ports that reach d by cable, the same for all of
        // d's LIDs.
        let reaching_ends: u64 = queue.iter().map(|&s| attached[s as usize]).sum();
        let reaching_nodes = queue.len() as u64 + reaching_ends;
        for &(dlid, owner) in &by_switch[d.index()] {
            w.begin();
            let to_end = matches!(owner, NodeRef::End(_));
            let owner_end = match owner {
                NodeRef::End(e) => Some(e),
                NodeRef::Switch(_) => None,
            };
            // Only switches that reach d by cable can deliver; the BFS queue
            // lists exactly those.
            for &s in &queue {
                if w.done[s as usize] != w.stamp {
                    w.walk(f, routes, Some(owner), dlid, s as usize);
                }
            }
            // Sources: every switch but the owner, every end port but the owner.
            rep.pairs += (ns + ne) as u64 - 1;
            let reachable_sources = reaching_nodes - 1;
            rep.no_path += (ns + ne) as u64 - 1 - reachable_sources;
            if to_end {
                let reachable_ends = reaching_ends - 1;
                rep.end_pairs += ne as u64 - 1;
                rep.end_no_path += ne as u64 - 1 - reachable_ends;
            }

            for &s in &queue {
                let s = s as usize;
                let is_owner_switch = owner == NodeRef::Switch(SwitchId(s as u32));
                let mut ends = attached[s];
                if s == d.index() && to_end {
                    ends -= 1;
                }
                let sw_src = u64::from(!is_owner_switch);
                let n = sw_src + ends;
                match w.kind[s] {
                    K_DELIVERED => {
                        let h = w.hops[s];
                        let shortest = dist[s] + u32::from(to_end);
                        let extra = h.saturating_sub(shortest);
                        rep.delivered += n;
                        if extra == 0 {
                            rep.minimal += n;
                        }
                        rep.max_stretch = rep.max_stretch.max(if n > 0 { extra } else { 0 });
                        rep.extra_hops += u64::from(extra) * n;
                        if to_end {
                            rep.end_delivered += ends;
                        }
                        hist(&mut rep.hop_histogram, h, sw_src);
                        hist(&mut rep.hop_histogram, h + 1, ends);
                    }
                    k => {
                        match k {
                            K_LOOP => rep.loops += n,
                            K_BLACK_HOLE => rep.black_holes += n,
                            _ => rep.wrong_destination += n,
                        }
                        match &mut w.terms[w.term[s] as usize] {
                            Failure::Loop { sources, .. }
                            | Failure::BlackHole { sources, .. }
                            | Failure::WrongDestination { sources, .. } => *sources += n,
                        }
                    }
                }
            }
            for t in w.terms.drain(..) {
                if t.sources() == 0 {
                    continue;
                }
                if failures.len() < MAX_FAILURE_EXAMPLES {
                    failures.push(t);
                } else {
                    rep.failures_omitted += 1;
                }
            }

            // All-to-all loads: end ports to this end port's base LID.
            if let Some(e) = owner_end {
                if u32::from(dlid) == f.end_port(e).lids().start {
                    for &s in &w.resolved {
                        let s = s as usize;
                        flow[s] = 0;
                        if w.kind[s] == K_DELIVERED && dist[s] != u32::MAX {
                            let mut own = attached[s];
                            if s == d.index() {
                                own -= 1;
                                own_delivered[e.index()] = 1;
                            }
                            flow[s] = own;
                            delivered_from[s] += 1;
                        }
                    }
                    for &s in w.resolved.iter().rev() {
                        let s = s as usize;
                        let fl = flow[s];
                        if fl == 0 || w.kind[s] != K_DELIVERED {
                            continue;
                        }
                        let port = routes.port(SwitchId(s as u32), dlid);
                        loads.switch_ports[f.switch_port_slot(SwitchId(s as u32), port)] += fl;
                        if w.next[s] != NONE {
                            flow[w.next[s] as usize] += fl;
                        }
                    }
                }
            }
        }
    }

    // End ports that hang off no switch: only a directly cabled peer
    // reaches them.
    for &(dlid, owner) in &floating {
        rep.pairs += (ns + ne) as u64 - 1;
        let NodeRef::End(e) = owner else { continue };
        rep.end_pairs += ne as u64 - 1;
        match f.end_peer(e) {
            Some(PortEnd::End(o)) => {
                rep.no_path += (ns + ne) as u64 - 2;
                rep.end_no_path += ne as u64 - 2;
                rep.end_delivered += 1;
                rep.delivered += 1;
                rep.minimal += 1;
                hist(&mut rep.hop_histogram, 1, 1);
                if u32::from(dlid) == f.end_port(e).lids().start {
                    loads.end_ports[o.index()] += 1;
                }
            }
            _ => {
                rep.no_path += (ns + ne) as u64 - 1;
                rep.end_no_path += ne as u64 - 1;
            }
        }
    }
    for e in f.end_port_ids() {
        if let Some((s, _)) = f.attached_switch(e) {
            loads.end_ports[e.index()] += delivered_from[s.index()] - own_delivered[e.index()];
        }
    }

    failures.sort_by_key(|x| x.lid());
    rep.failures = failures;
    let (isl, access) = load_stats(f, &loads);
    rep.inter_switch_load = isl;
    rep.access_load = access;
    (rep, loads)
}

fn load_stats(f: &RoutingFabric, loads: &LinkLoads) -> (LoadStats, LoadStats) {
    #[derive(Default)]
    struct Acc {
        stats: LoadStats,
        sum: u64,
    }
    impl Acc {
        fn add(&mut self, load: u64, link: DirectedLink) {
            let s = &mut self.stats;
            s.links += 1;
            self.sum += load;
            if load > s.max || s.max_link.is_none() {
                s.max = load;
                s.at_max = 1;
                s.max_link = Some(link);
            } else if load == s.max {
                s.at_max += 1;
            }
        }
        fn finish(mut self) -> LoadStats {
            if self.stats.links > 0 {
                self.stats.mean = self.sum as f64 / self.stats.links as f64;
            }
            self.stats
        }
    }
    let mut isl = Acc::default();
    let mut access = Acc::default();
    for s in f.switch_ids() {
        let from = f.switch(s).guid;
        for (port, peer) in f.switch_ports(s).iter().enumerate() {
            let Some(peer) = *peer else { continue };
            let load = loads.switch_ports[f.switch_port_slot(s, port as u8)];
            match peer {
                PortEnd::Switch(n, _) => isl.add(load, DirectedLink { from, port: port as u8, to: f.switch(n).guid }),
                PortEnd::End(e) => {
                    access.add(load, DirectedLink { from, port: port as u8, to: f.end_port(e).port_guid })
                }
            }
        }
    }
    for e in f.end_port_ids() {
        let Some(peer) = f.end_peer(e) else { continue };
        let ep = f.end_port(e);
        let to = match peer {
            PortEnd::Switch(s, _) => f.switch(s).guid,
            PortEnd::End(o) => f.end_port(o).port_guid,
        };
        access.add(loads.end_ports[e.index()], DirectedLink { from: ep.port_guid, port: ep.port_num, to });
    }
    (isl.finish(), access.finish())
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} switches, {} end ports, {} destination LIDs, {} (source, LID) pairs",
            self.switches, self.end_ports, self.destination_lids, self.pairs
        )?;
        writeln!(
            f,
            "delivered {} ({} on a shortest path, max stretch {} cables); no cabled path {}",
            self.delivered, self.minimal, self.max_stretch, self.no_path
        )?;
        writeln!(
            f,
            "failed: {} looping, {} black-holed, {} to the wrong destination{}",
            self.loops,
            self.black_holes,
            self.wrong_destination,
            if self.is_clean() { " (clean)" } else { "" }
        )?;
        write!(f, "path lengths (cables: pairs):")?;
        for (len, n) in self.hop_histogram.iter().enumerate().filter(|(_, n)| **n > 0) {
            write!(f, " {len}: {n}")?;
        }
        writeln!(f)?;
        for (name, s) in [("switch-to-switch", &self.inter_switch_load), ("end-port", &self.access_load)] {
            write!(
                f,
                "all-to-all load on {} {name} links: max {} ({} at max), mean {:.1}",
                s.links, s.max, s.at_max, s.mean
            )?;
            if let Some(l) = s.max_link {
                write!(f, ", e.g. {:#018x} port {} -> {:#018x}", l.from, l.port, l.to)?;
            }
            writeln!(f)?;
        }
        for x in &self.failures {
            match x {
                Failure::Loop { lid, cycle, sources } => {
                    write!(f, "  LID {lid}: loop through")?;
                    for g in cycle {
                        write!(f, " {g:#018x}")?;
                    }
                    writeln!(f, " ({sources} sources)")?;
                }
                Failure::BlackHole { lid, switch, port, reason, sources } => {
                    writeln!(f, "  LID {lid}: dropped at {switch:#018x} port {port} ({reason:?}, {sources} sources)")?
                }
                Failure::WrongDestination { lid, switch, port, reached, sources } => writeln!(
                    f,
                    "  LID {lid}: {switch:#018x} port {port} delivers to {reached:#018x} ({sources} sources)"
                )?,
            }
        }
        if self.failures_omitted > 0 {
            writeln!(f, "  ... and {} more failures", self.failures_omitted)?;
        }
        Ok(())
    }
}

// --- Shift pattern -------------------------------------------------------

/// How end ports are numbered for the shift pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub enum ShiftOrder {
    /// Ascending port GUID.
    #[default]
    Guid,
    /// Ascending base LID.
    Lid,
}

/// Link loads of the shift pattern: with the N end ports numbered
/// 0..N, shift k sends one flow from every end port i to end port
/// (i + k) mod N, to its base LID. On a full fat tree a good routing
/// carries every shift with at most one flow per link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShiftBalance {
    pub order: ShiftOrder,
    /// End ports taking part: those with a LID that hang off a switch.
    pub end_ports: usize,
    /// Shifts evaluated (N - 1 unless sampled).
    pub shifts: usize,
    /// Only an evenly spaced subset of the shifts was evaluated.
    pub sampled: bool,
    /// The shift whose busiest link carries the most flows (the lowest k
    /// on ties), and that many flows.
    pub worst_shift: usize,
    pub worst_max: u64,
    /// The busiest link of the worst shift.
    pub worst_link: Option<DirectedLink>,
    /// The least, and the mean, over the shifts of the busiest link's flows.
    pub best_max: u64,
    pub mean_max: f64,
    /// Flows that did not reach their destination (broken tables).
    pub undelivered: u64,
}

impl fmt::Display for ShiftBalance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shift pattern ({} end ports by {:?}, {} shift(s){}): busiest link per shift: worst {} (shift {}",
            self.end_ports,
            self.order,
            self.shifts,
            if self.sampled { ", sampled" } else { "" },
            self.worst_max,
            self.worst_shift,
        )?;
        if let Some(l) = self.worst_link {
            write!(f, ", {:#018x} port {} -> {:#018x}", l.from, l.port, l.to)?;
        }
        write!(f, "), mean {:.2}, best {}", self.mean_max, self.best_max)?;
        if self.undelivered > 0 {
            write!(f, "; {} flows NOT delivered", self.undelivered)?;
        }
        Ok(())
    }
}

/// Evaluates the shift pattern for every shift k in 1..N, or for at most
/// `max_shifts` evenly spaced ones. Loads are counted on switch output
/// ports (to switches and to end ports); an end port's own link carries one
/// flow per shift. Cost: O(N·H) per shift for paths of H hops, so
/// O(N²·H) for all of them.
pub fn shift_balance(f: &RoutingFabric, routes: &Routes, order: ShiftOrder, max_shifts: Option<usize>) -> ShiftBalance {
    const NONE: u32 = u32::MAX;
    let mut ports: Vec<(u64, EndPortId, u32, u16)> = f
        .end_port_ids()
        .filter_map(|e| {
            let ep = f.end_port(e);
            let (s, _) = f.attached_switch(e)?;
            (ep.base_lid != 0).then(|| {
                let key = match order {
                    ShiftOrder::Guid => ep.port_guid,
                    ShiftOrder::Lid => u64::from(ep.base_lid),
                };
                (key, e, s.0, ep.base_lid)
            })
        })
        .collect();
    ports.sort_unstable_by_key(|p| (p.0, p.1));
    let n = ports.len();
    let all = n.saturating_sub(1);
    let ks: Vec<usize> = match max_shifts {
        Some(m) if m < all => (0..m).map(|j| 1 + j * all / m).collect(),
        _ => (1..=all).collect(),
    };

    // Per switch-port slot: the switch it leads to, or NONE.
    let mut next_switch = vec![NONE; f.num_switch_port_slots()];
    for s in f.switch_ids() {
        for e in f.switch_neighbors(s) {
            next_switch[f.switch_port_slot(s, e.port)] = e.neighbor.0;
        }
    }
    let base: Vec<usize> = f.switch_ids().map(|s| f.switch_port_slot(s, 0)).collect();
    let num_ports: Vec<u8> = f.switches().iter().map(|s| s.num_ports).collect();
    let max_hops = f.num_switches();

    // Shifts are evaluated BATCH at a time, the inner loop over the shifts
    // of a batch: one source's flows then go to consecutive end ports,
    // whose LIDs are usually close, so the table reads of a batch stay in
    // a few cache lines per switch. Counters are laid out slot-major for
    // the same reason. A link carries at most N < 2^16 flows per shift
    // (one per end port, and LIDs are 16-bit).
    const BATCH: usize = 32;
    let mut load = vec![0u16; f.num_switch_port_slots() * BATCH];
    let mut out = ShiftBalance {
        order,
        end_ports: n,
        shifts: ks.len(),
        sampled: ks.len() < all,
        worst_shift: 0,
        worst_max: 0,
        worst_link: None,
        best_max: 0,
        mean_max: 0.0,
        undelivered: 0,
    };
    let mut sum_max = 0u64;
    let mut first = true;
    for batch in ks.chunks(BATCH) {
        let mut kmax = [0u16; BATCH];
        let mut kslot = [NONE; BATCH];
        for (i, &(_, _, src, _)) in ports.iter().enumerate() {
            for (b, &k) in batch.iter().enumerate() {
                let (_, dst, _, dlid) = ports[(i + k) % n];
                let mut s = src as usize;
                let mut delivered = false;
                for _ in 0..max_hops {
                    let port = routes.lfts.get(s).map_or(UNROUTED, |l| l.port(dlid));
                    if port == 0 || port == UNROUTED || port > num_ports[s] {
                        break;
                    }
                    let slot = base[s] + usize::from(port);
                    let l = &mut load[slot * BATCH + b];
                    *l += 1;
                    if *l > kmax[b] {
                        kmax[b] = *l;
                        kslot[b] = slot as u32;
                    }
                    match next_switch[slot] {
                        NONE => {
                            delivered = f.switch_peer(SwitchId(s as u32), port) == Some(PortEnd::End(dst));
                            break;
                        }
                        nxt => s = nxt as usize,
                    }
                }
                if !delivered {
                    out.undelivered += 1;
                }
            }
        }
        load.fill(0);
        for (b, &k) in batch.iter().enumerate() {
            let m = u64::from(kmax[b]);
            sum_max += m;
            if first || m < out.best_max {
                out.best_max = m;
            }
            if first || m > out.worst_max {
                out.worst_max = m;
                out.worst_shift = k;
                out.worst_link = (kslot[b] != NONE).then(|| slot_link(f, kslot[b] as usize));
            }
            first = false;
        }
    }
    if !ks.is_empty() {
        out.mean_max = sum_max as f64 / ks.len() as f64;
    }
    out
}

/// The directed link leaving switch-port slot `slot`.
fn slot_link(f: &RoutingFabric, slot: usize) -> DirectedLink {
    // Slots are laid out switch by switch; find the owner by bisection.
    let ns = f.num_switches();
    let (mut lo, mut hi) = (0usize, ns);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if f.switch_port_slot(SwitchId(mid as u32), 0) <= slot {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let s = SwitchId(lo as u32);
    let port = (slot - f.switch_port_slot(s, 0)) as u8;
    let to = match f.switch_peer(s, port) {
        Some(PortEnd::Switch(n, _)) => f.switch(n).guid,
        Some(PortEnd::End(e)) => f.end_port(e).port_guid,
        None => 0,
    };
    DirectedLink { from: f.switch(s).guid, port, to }
}

// --- Everything at once ----------------------------------------------------

/// What [`analyze`] looks at beyond the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnalysisOptions {
    pub shift_order: ShiftOrder,
    /// Evaluate at most this many shifts (evenly spaced); None = all.
    pub max_shifts: Option<usize>,
    pub cdg: CdgScope,
}

/// The headline figures of an [`AnalysisReport`], flat for tables and
/// scripts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub switches: usize,
    pub end_ports: usize,
    pub destination_lids: usize,
    /// No loops, black holes or wrong destinations, and every pair the
    /// cabling connects is delivered.
    pub valid: bool,
    /// Every connected end port reaches every other end port's LIDs (what
    /// `valid` says for application traffic only).
    pub end_ports_valid: bool,
    /// Every pair is connected by cables at all.
    pub fully_connected: bool,
    /// Every VL's channel dependency graph is acyclic.
    pub deadlock_free: bool,
    /// VLs the paths use.
    pub vls: usize,
    pub max_stretch: u32,
    pub mean_stretch: f64,
    pub mean_hops: f64,
    pub max_hops: usize,
    /// All-to-all among end ports, switch-to-switch links: the edge
    /// forwarding index, the mean, and the links carrying the maximum.
    pub all_to_all_max: u64,
    pub all_to_all_mean: f64,
    pub all_to_all_at_max: usize,
    pub shift_worst_max: u64,
    pub shift_worst_shift: usize,
    pub shift_mean_max: f64,
}

/// Validity, stretch, deadlock freedom and balance of one set of tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisReport {
    pub summary: Summary,
    pub validity: Report,
    pub deadlock: CdgReport,
    pub shift: ShiftBalance,
}

/// Runs every analysis: [`validate`], [`analyze_cdg`] and [`shift_balance`].
pub fn analyze(f: &RoutingFabric, routes: &Routes, options: &AnalysisOptions) -> AnalysisReport {
    let validity = validate(f, routes);
    let deadlock = analyze_cdg(f, routes, options.cdg);
    let shift = shift_balance(f, routes, options.shift_order, options.max_shifts);
    let summary = Summary {
        switches: validity.switches,
        end_ports: validity.end_ports,
        destination_lids: validity.destination_lids,
        valid: validity.is_valid(),
        end_ports_valid: validity.end_ports_valid(),
        fully_connected: validity.fully_connected(),
        deadlock_free: deadlock.deadlock_free(),
        vls: deadlock.vls.len(),
        max_stretch: validity.max_stretch,
        mean_stretch: validity.mean_stretch(),
        mean_hops: validity.mean_hops(),
        max_hops: validity.max_hops(),
        all_to_all_max: validity.inter_switch_load.max,
        all_to_all_mean: validity.inter_switch_load.mean,
        all_to_all_at_max: validity.inter_switch_load.at_max,
        shift_worst_max: shift.worst_max,
        shift_worst_shift: shift.worst_shift,
        shift_mean_max: shift.mean_max,
    };
    AnalysisReport { summary, validity, deadlock, shift }
}

impl fmt::Display for AnalysisReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        let valid = match (s.valid, s.end_ports_valid) {
            (true, _) => "yes",
            (false, true) => "NO (end ports all reach each other; switch LIDs fail)",
            (false, false) => "NO",
        };
        writeln!(
            f,
            "valid: {}; deadlock free: {} ({} VL(s)); stretch max {} mean {:.3}; \
             all-to-all max {} mean {:.1} ({} at max); shift worst {} mean {:.2}",
            valid,
            if s.deadlock_free { "yes" } else { "NO" },
            s.vls,
            s.max_stretch,
            s.mean_stretch,
            s.all_to_all_max,
            s.all_to_all_mean,
            s.all_to_all_at_max,
            s.shift_worst_max,
            s.shift_mean_max
        )?;
        write!(f, "{}", self.validity)?;
        writeln!(f, "mean path {:.3} cables, mean stretch {:.4} cables", s.mean_hops, s.mean_stretch)?;
        write!(f, "{}", self.deadlock)?;
        writeln!(f, "{}", self.shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{EndPort, EndPortId, Switch};
    use crate::lft::Lft;
    use crate::minhop::minhop;
    use crate::testfab;

    /// s0 -- s1 -- s2 in a line (s0 port 1 to s1 port 1, s1 port 2 to s2
    /// port 1), s0 also cabled to s2 (s0 port 3, s2 port 3) to close a
    /// triangle, a host on s0 port 2 (LID 10) and one on s2 port 2 (LID 11).
    fn triangle() -> (RoutingFabric, [SwitchId; 3], [EndPortId; 2]) {
        let mut b = RoutingFabric::builder();
        let s: Vec<SwitchId> = (0..3).map(|i| b.add_switch(Switch::new(0xa0 + i, 4, 1 + i as u16)).unwrap()).collect();
        let h0 = b.add_end_port(EndPort::new(0x100, 0x101, 1, 10)).unwrap();
        let h1 = b.add_end_port(EndPort::new(0x200, 0x201, 1, 11)).unwrap();
        b.connect(PortEnd::Switch(s[0], 1), PortEnd::Switch(s[1], 1)).unwrap();
        b.connect(PortEnd::Switch(s[1], 2), PortEnd::Switch(s[2], 1)).unwrap();
        b.connect(PortEnd::Switch(s[0], 3), PortEnd::Switch(s[2], 3)).unwrap();
        b.connect(PortEnd::End(h0), PortEnd::Switch(s[0], 2)).unwrap();
        b.connect(PortEnd::End(h1), PortEnd::Switch(s[2], 2)).unwrap();
        (b.build().unwrap(), [s[0], s[1], s[2]], [h0, h1])
    }

    #[test]
    fn exact_counts_on_one_switch() {
        let f = testfab::single_switch(2);
        let r = minhop(&f).unwrap();
        let (rep, loads) = validate_with_loads(&f, &r);
        // 3 LIDs, 2 sources each.
        assert_eq!((rep.destination_lids, rep.pairs, rep.delivered, rep.minimal), (3, 6, 6, 6));
        // switch->host x2, host->switch x2 are one cable; host->host two.
        assert_eq!(rep.hop_histogram, vec![0, 4, 2]);
        assert_eq!(rep.inter_switch_load.links, 0);
        assert_eq!(rep.access_load.links, 4);
        assert_eq!((rep.access_load.max, rep.access_load.at_max), (1, 4));
        assert_eq!(loads.end_ports, vec![1, 1]);
        assert_eq!(loads.switch_port(&f, SwitchId(0), 1), 1);
        let text = rep.to_string();
        assert!(text.contains("(clean)"), "{text}");
    }

    #[test]
    fn finds_black_holes_of_each_kind() {
        let (f, s, h) = triangle();
        let mut r = minhop(&f).unwrap();
        assert!(validate(&f, &r).is_clean());
        // s1 forwards LID 11 (h1) to nothing.
        r.lfts[1].set(11, UNROUTED);
        let rep = validate(&f, &r);
        // Only s1 itself uses that entry: s0 and s2 have direct routes.
        assert_eq!(rep.black_holes, 1, "{rep}");
        assert_eq!(
            rep.failures,
            vec![Failure::BlackHole {
                lid: 11,
                switch: 0xa1,
                port: UNROUTED,
                reason: BlackHoleReason::Unrouted,
                sources: 1
            }]
        );
        // s0 sends LID 11 to its empty port 4: s0 and h0 are hit.
        r.lfts[0].set(11, 4);
        let rep = validate(&f, &r);
        assert!(rep.failures.iter().any(|x| matches!(
            x,
            Failure::BlackHole { lid: 11, switch: 0xa0, port: 4, reason: BlackHoleReason::NotCabled, sources: 2 }
        )));
        assert_eq!(rep.black_holes, 3);
        // Port 9 on a 4-port switch.
        r.lfts[0].set(11, 9);
        let rep = validate(&f, &r);
        assert!(rep.failures.iter().any(|x| matches!(
            x,
            Failure::BlackHole { reason: BlackHoleReason::PortOutOfRange, port: 9, sources: 2, .. }
        )));
        assert_eq!(
            trace(&f, &r, NodeRef::End(h[0]), 11).end,
            TraceEnd::BlackHole { switch: s[0], port: 9, reason: BlackHoleReason::PortOutOfRange }
        );
        assert!(!rep.to_string().contains("(clean)"));
    }

    #[test]
    fn finds_loops_with_their_cycle() {
        let (f, s, h) = triangle();
        let mut r = minhop(&f).unwrap();
        // LID 11: s0 -> s1 (port 1), s1 -> s0 (port 1): a 2-cycle. s2
        // still delivers directly.
        r.lfts[0].set(11, 1);
        r.lfts[1].set(11, 1);
        let rep = validate(&f, &r);
        // Sources caught: s0, h0, s1.
        assert_eq!(rep.loops, 3, "{rep}");
        let cycles: Vec<&Vec<u64>> = rep
            .failures
            .iter()
            .filter_map(|x| match x {
                Failure::Loop { cycle, sources: 3, lid: 11 } => Some(cycle),
                _ => None,
            })
            .collect();
        assert_eq!(cycles.len(), 1, "{rep}");
        let mut c = cycles[0].clone();
        c.sort();
        assert_eq!(c, vec![0xa0, 0xa1]);
        let t = trace(&f, &r, NodeRef::End(h[0]), 11);
        assert_eq!(t.end, TraceEnd::Loop(s[0]));
        assert_eq!(t.hops, vec![(s[0], 1), (s[1], 1)]);
        // A longer cycle entered from outside: s2 -> s1 -> s0 -> s2 for LID 1 (s0's own LID).
        let mut r = minhop(&f).unwrap();
        r.lfts[0].set(1, 3);
        r.lfts[2].set(1, 1);
        r.lfts[1].set(1, 1);
        let rep = validate(&f, &r);
        // Sources: s1, s2, h0, h1 (s0 itself is the owner, not a source).
        assert_eq!(rep.loops, 4, "{rep}");
        assert!(rep.failures.iter().any(|x| matches!(x, Failure::Loop { cycle, .. } if cycle.len() == 3)));
    }

    #[test]
    fn finds_wrong_destinations_and_stretch() {
        let (f, s, h) = triangle();
        let mut r = minhop(&f).unwrap();
        // s0 hands LID 11 (h1's) to its own port 0.
        r.lfts[0].set(11, 0);
        let rep = validate(&f, &r);
        assert_eq!(rep.wrong_destination, 2, "{rep}");
        assert!(rep.failures.iter().any(|x| matches!(
            x,
            Failure::WrongDestination { lid: 11, switch: 0xa0, port: 0, reached: 0xa0, sources: 2 }
        )));
        assert_eq!(trace(&f, &r, NodeRef::Switch(s[0]), 11).end, TraceEnd::WrongDestination(NodeRef::Switch(s[0])));

        // s2 hands h0's LID 10 to h1: a wrong destination too.
        let mut r = minhop(&f).unwrap();
        r.lfts[2].set(10, 2);
        let rep = validate(&f, &r);
        assert!(rep.failures.iter().any(|x| matches!(x, Failure::WrongDestination { lid: 10, reached: 0x201, .. })));

        // A detour: s0 reaches LID 11 (on s2) through s1: one cable longer.
        let mut r = minhop(&f).unwrap();
        r.lfts[0].set(11, 1);
        let rep = validate(&f, &r);
        assert!(rep.is_clean());
        assert!(!rep.all_minimal());
        assert_eq!(rep.max_stretch, 1);
        assert_eq!(rep.delivered - rep.minimal, 2, "s0 and h0");
        assert_eq!(rep.extra_hops, 2, "one extra cable each");
        assert!((rep.mean_stretch() - 2.0 / rep.delivered as f64).abs() < 1e-12);
        assert_eq!(
            trace(&f, &r, NodeRef::End(h[0]), 11),
            Trace { hops: vec![(s[0], 1), (s[1], 2), (s[2], 2)], end: TraceEnd::Delivered(NodeRef::End(h[1])) }
        );
    }

    #[test]
    fn path_lengths_count_only_real_sources() {
        // s0 - s1 - s2, one host on s0: the longest path is s2 -> host
        // (3 cables); s2 has no end ports whose path would be one longer.
        let mut b = RoutingFabric::builder();
        let s: Vec<SwitchId> = (0..3).map(|i| b.add_switch(Switch::new(0xa0 + i, 4, 1 + i as u16)).unwrap()).collect();
        let h = b.add_end_port(EndPort::new(0x100, 0x101, 1, 10)).unwrap();
        b.connect(PortEnd::Switch(s[0], 1), PortEnd::Switch(s[1], 1)).unwrap();
        b.connect(PortEnd::Switch(s[1], 2), PortEnd::Switch(s[2], 1)).unwrap();
        b.connect(PortEnd::End(h), PortEnd::Switch(s[0], 2)).unwrap();
        let f = b.build().unwrap();
        let rep = validate(&f, &minhop(&f).unwrap());
        assert!(rep.is_clean() && rep.all_minimal());
        assert_eq!(rep.max_hops(), 3, "{rep}");
        // 4 LIDs x 3 sources; lengths: s0<->s1, s1<->s2, h->s0, s0->h: 1 cable
        // (6 pairs); s0<->s2, h->s1, s1->h: 2 (4 pairs); h->s2, s2->h: 3.
        assert_eq!(rep.hop_histogram, vec![0, 6, 4, 2]);
    }

    #[test]
    fn end_port_validity_ignores_switch_lids() {
        let (f, _, _) = triangle();
        let mut r = minhop(&f).unwrap();
        // s0 drops s2's own LID 3: switch traffic only.
        r.lfts[0].set(3, UNROUTED);
        let rep = validate(&f, &r);
        assert!(!rep.is_valid());
        assert!(rep.end_ports_valid(), "{rep}");
        assert_eq!((rep.end_pairs, rep.end_delivered, rep.end_no_path), (2, 2, 0));
        // s0 drops h1's LID 11: h0 no longer reaches h1.
        r.lfts[0].set(11, UNROUTED);
        let rep = validate(&f, &r);
        assert!(!rep.end_ports_valid());
        assert_eq!(rep.end_delivered, 1);
    }

    #[test]
    fn missing_tables_black_hole_everything() {
        let (f, _, _) = triangle();
        let r = Routes { lfts: vec![Lft::default(); 1], sl: None };
        let rep = validate(&f, &r);
        assert_eq!(rep.delivered, 0);
        // 5 LIDs, 4 sources each: every source enters the switches, and no
        // switch routes anything.
        assert_eq!(rep.black_holes, 5 * 4);
        assert_eq!(rep.pairs, 20);
    }

    #[test]
    fn failure_examples_are_capped_but_counts_complete() {
        let f = testfab::FatTree::new(8, 2, 32).build();
        let mut r = minhop(&f).unwrap();
        for l in &mut r.lfts {
            l.ports.iter_mut().for_each(|p| *p = UNROUTED);
        }
        let rep = validate(&f, &r);
        assert_eq!(rep.black_holes, rep.pairs - rep.no_path);
        assert_eq!(rep.failures.len(), MAX_FAILURE_EXAMPLES);
        assert!(rep.failures_omitted > 0);
        assert!(rep.failures.iter().map(Failure::sources).sum::<u64>() <= rep.black_holes);
    }

    #[test]
    fn all_to_all_loads_on_a_line() {
        // h0 - s0 - s1 - s2 - h1 through the triangle with the s0-s2 cable
        // unused: route via s1 on purpose.
        let (f, s, _) = triangle();
        let mut r = minhop(&f).unwrap();
        r.lfts[0].set(11, 1);
        r.lfts[2].set(10, 1);
        let (rep, loads) = validate_with_loads(&f, &r);
        assert_eq!(loads.switch_port(&f, s[0], 1), 1);
        assert_eq!(loads.switch_port(&f, s[1], 2), 1);
        assert_eq!(loads.switch_port(&f, s[1], 1), 1);
        assert_eq!(loads.switch_port(&f, s[0], 3), 0);
        assert_eq!(rep.inter_switch_load.links, 6);
        assert_eq!(rep.inter_switch_load.max, 1);
        assert_eq!(rep.inter_switch_load.at_max, 4);
        assert!((rep.inter_switch_load.mean - 4.0 / 6.0).abs() < 1e-9);
    }

    #[test]
    fn report_serializes() {
        let f = testfab::ring(3, 1);
        let rep = validate(&f, &minhop(&f).unwrap());
        let json = serde_json::to_value(&rep).unwrap();
        assert_eq!(json["loops"], 0);
        assert_eq!(json["pairs"], rep.pairs);
    }

    #[test]
    fn combined_report_serializes_and_prints() {
        let f = testfab::ring(5, 2);
        let r = minhop(&f).unwrap();
        let a = analyze(&f, &r, &AnalysisOptions::default());
        assert!(a.summary.valid && !a.summary.deadlock_free);
        assert_eq!(a.summary.all_to_all_max, a.validity.inter_switch_load.max);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["summary"]["deadlock_free"], false);
        assert_eq!(json["deadlock"]["vls"][0]["acyclic"], false);
        assert_eq!(json["shift"]["end_ports"], 10);
        let text = a.to_string();
        assert!(text.starts_with("valid: yes; deadlock free: NO"), "{text}");
        assert!(text.contains("cycle of"), "{text}");
    }
}
