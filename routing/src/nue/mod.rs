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
//! ## One VL: refined
//! With one layer, one escape tree's turns and a single greedy pass leave
//! the busiest channel far above what the dependencies need on fabrics
//! with cyclic shortest paths (672 routes on the 42-switch dragonfly, where
//! up*/down* has 330), and on cut 3-level fat trees. So Nue's tables and
//! up*/down*'s (automatic roots) are both, on fabrics of at most
//! [`crate::refine::MAX_ENTRIES`] (switch, end-port LID) entries, refined
//! entry by entry, keeping the dependency graph acyclic
//! ([`crate::refine`]), and the less busy result is kept: 266 on that
//! dragonfly, 108 on the 20-switch one (Nue 188, up*/down* 114), 496 on
//! the 3-level radix-8 tree with 30% of its cables cut (Nue's 616 does not
//! refine, up*/down*'s 664 does). The largest fabrics (the fat trees of
//! `nue_bench`, above `SEED_MAX_ENTRIES`) keep Nue's own tables and cost.
//!
//! On dragonflies whose groups have at least four routers, a third
//! candidate keeps every path minimal: [`crate::dragonfly`] splits each
//! group's local cables into an outbound and an inbound class, so the
//! phases that need two VLs elsewhere never share a channel. It wins on
//! the bench's dragonflies (144 on the 42-switch one, 68 after refining on
//! the 20-switch one; OpenSM's dfsssp needs 8 VLs for 172 and 82).
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

mod cdg;
mod escape;
mod net;
mod search;

use crate::error::RoutingError;
use crate::fabric::{PortEnd, RoutingFabric};
use crate::lft::{Lft, PathSl, Routes};
use crate::options::EngineOptions;

use cdg::Cdg;
use escape::{init_layer, Escape};
use net::Net;
use search::{route_one, Search};

const ENGINE: &str = "nue";
const NONE: u32 = u32::MAX;
const NO_EDGE: usize = usize::MAX;
/// The largest fabric, in (switch, end-port LID) entries, whose one-VL
/// tables are compared with up*/down*'s: the 3-level radix-12 fat tree
/// (77,760) is in, the 3,888-host one (2.1 M) is not. Nue's single layer
/// does poorly on cut 3-level trees (2,388 routes on the busiest link of
/// the radix-12 one with 5% cut, up*/down* 912).
const SEED_MAX_ENTRIES: usize = 250_000;
/// Data VLs (VL15 is management only; IBA 7.6.2).
const MAX_LAYERS: u8 = 15;

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
    /// On one VL: whether the tables kept started from up*/down*'s (they
    /// refined to the less busy busiest channel).
    pub from_updn: bool,
    /// On one VL: the dragonfly's groups when the tables kept started from
    /// the dragonfly routing's ([`crate::dragonfly`]: minimal, the phases
    /// kept apart by local cables).
    pub from_dragonfly: Option<usize>,
    /// On one VL: trees re-grown and entries moved by the refinement of
    /// the tables kept.
    pub refined: u64,
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
        .filter(|&v| net.ch.degree(v) > 0)
        .map(|v| {
            let p = net.part[v] as usize;
            let out = net.hosts[v] * (part_lids[p] - lids_at[v]);
            let inn = lids_at[v] * (part_hosts[p] - net.hosts[v]);
            out.max(inn).div_ceil(net.ch.degree(v) as u64)
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
/// `search::rechoose`.
fn route_all(net: &Net, by_layer: &[Vec<Dest>], fabric: &RoutingFabric, floor: u64, aware: bool) -> Routing {
    let top = fabric.max_lid();
    let mut lfts: Vec<Lft> = (0..fabric.num_switches()).map(|_| Lft::unrouted(top)).collect();
    let mut stats = NueStats::default();
    let mut load = vec![0u64; net.ch.num_channels()];
    let mut cdg = Cdg::new(net);
    let mut search = Search::new(net.n(), net.ch.num_channels());
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
/// destination's layer, stored once per DLID ([`PathSl::per_destination`]).
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

    // Every source has its destination's layer: one SL row for all switches.
    let mut routes = Routes { lfts, sl: Some(PathSl::per_destination(layer_of, fabric.num_switches())) };
    if layers == 1 {
        routes = refined_on_one_vl(fabric, options, routes, &mut stats);
    }
    crate::error::disconnected_or_ok(fabric, routes).map(|r| (r, stats))
}

/// The refinement's work per entry at [`crate::Effort::Quick`]: a tenth
/// of the full budget. On the 6x6 mesh it takes Nue's busiest link from
/// 432 to 312 in 30 ms (the full run: 262 in 235 ms).
const QUICK_WORK_PER_ENTRY: u64 = 400;

/// Where a one-VL routing started before refinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Start {
    Nue,
    UpDn,
    Dragonfly,
}

/// One layer: Nue's tables, up*/down*'s (automatic roots) and, on a
/// dragonfly, [`crate::dragonfly`]'s, each refined entry by entry
/// ([`crate::refine`]), the least busy kept. All are acyclic on one VL;
/// Nue's escape tree forbids more turns than its cycles need, and on
/// random fabrics and cut trees up*/down* with a searched order is the
/// better start. On dragonflies both push traffic onto second global
/// cables (busiest link 672 and 330 on the 42-switch one), where the
/// dragonfly routing keeps every path on its group pair's cable (144).
/// The up*/down* run is for fabrics up to [`SEED_MAX_ENTRIES`] (switch,
/// end-port LID) entries, the refinement up to
/// [`crate::refine::MAX_ENTRIES`], the dragonfly routing for any size; the
/// large fat trees of `nue_bench` keep Nue's own tables and cost.
fn refined_on_one_vl(fabric: &RoutingFabric, options: &EngineOptions, own: Routes, stats: &mut NueStats) -> Routes {
    if fabric.components().count() != 1 {
        return own;
    }
    if options.effort == crate::options::Effort::Quick {
        return match crate::refine::refine_within(fabric, &own, QUICK_WORK_PER_ENTRY) {
            Some((refined, run)) => {
                stats.refined = run.moves;
                refined
            }
            None => own,
        };
    }
    // Cheap at any size: O(LIDs x switches) and one credit-loop check.
    let dragonfly = crate::dragonfly::route_one_vl(fabric);
    let small = crate::refine::entries(fabric) <= SEED_MAX_ENTRIES;
    if !small && dragonfly.is_none() {
        return own;
    }
    let busiest = |r: &Routes| crate::analysis::validate(fabric, r).inter_switch_load.max;
    let sl = own.sl.clone();
    let mut starts = vec![(Start::Nue, own)];
    let updn_options = EngineOptions { root_guids: Vec::new(), max_vls: 1, ..options.clone() };
    if let Some(Ok(u)) = small.then(|| crate::updn::updn(fabric, &updn_options)) {
        starts.push((Start::UpDn, Routes { lfts: u.lfts, sl: sl.clone() }));
    }
    let groups = dragonfly.as_ref().map(|(_, groups)| *groups);
    if let Some((d, _)) = dragonfly {
        starts.push((Start::Dragonfly, Routes { lfts: d.lfts, sl: sl.clone() }));
    }
    // Each start refined, least busy first: that one does not always refine
    // best (a cut 3-level tree: Nue 616 stays 616, up*/down* 664 falls to
    // 496), but no refinement seen gained a third, so a start half again
    // busier than the best refined one is not refined. On a tie the
    // earlier start stays.
    let mut starts: Vec<(u64, Start, Routes)> = starts.into_iter().map(|(s, r)| (busiest(&r), s, r)).collect();
    starts.sort_by_key(|&(b, s, _)| (b, s));
    let mut best: Option<(u64, Start, u64, Routes)> = None;
    for (unrefined, start, routes) in starts {
        if best.as_ref().is_some_and(|(least, ..)| 2 * unrefined > 3 * *least) {
            continue;
        }
        let (routes, moves, b) = match crate::refine::refine(fabric, &routes) {
            Some((refined, run)) => (refined, run.moves, run.busiest_after),
            None => (routes, 0, unrefined),
        };
        if best.as_ref().is_none_or(|(least, ..)| b < *least) {
            best = Some((b, start, moves, routes));
        }
    }
    let (_, start, moves, routes) = best.expect("Nue's own tables are a start");
    stats.from_updn = start == Start::UpDn;
    stats.from_dragonfly = groups.filter(|_| start == Start::Dragonfly);
    stats.refined = moves;
    routes
}
