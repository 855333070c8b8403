//! SSSP and DFSSSP: globally balanced shortest-path routing, and its
//! deadlock-free variant on virtual-lane layers.
//!
//! ## SSSP (Hoefler, Schneider, Lumsdaine, HOTI 2009)
//! Destinations are routed one LID at a time. Every directed
//! switch-to-switch link (a *channel*) carries a weight: the number of
//! (source end port, destination LID) routes already placed on it. For each
//! destination LID a single-source shortest-path search from the
//! destination's switch gives every other switch its next hop; then every
//! channel of the new routing tree is charged with the end ports whose
//! traffic it carries (the end ports of the switches upstream of it), so the
//! next destination avoids what is already loaded. That is the global
//! balancing: unlike MinHop, which balances each switch's ports locally,
//! SSSP sees the load a choice causes further down the path.
//!
//! Three path choices ([`PathChoice`]):
//! - [`PathChoice::Minimal`] (the default): the search key is (hops, load)
//!   lexicographically, i.e. Dijkstra with channel weight `M + load` for an
//!   `M` larger than any load sum. Paths are always shortest in hops and,
//!   among those, the least loaded. OpenSM aims at the same: it starts every
//!   channel at weight P² (P = number of CAs) "to force shortest paths",
//!   which holds as long as loads stay below P²; the lexicographic key makes
//!   it exact. Since the hop part is fixed per destination switch, the
//!   search reduces to one breadth-first search per destination *switch*
//!   (its hop layers and downhill channels are kept while consecutive
//!   destinations hang off the same switch) plus, per LID, one pass over the
//!   downhill channels in BFS order: O(S + E) per LID with no heap.
//!   "Least loaded" compares, among the minimal paths, first the load of
//!   the path's most loaded channel, then the load summed over the path:
//!   the bottleneck is what the maximum routes per link is made of. After
//!   the first routing of all LIDs, `REFINE_PASSES` rip-up-and-reroute
//!   passes take each end-port LID (LMC 0) off the load and search it again
//!   against all the others, which the first pass only saw for earlier LIDs
//!   (skipped when the first routing already meets a lower bound of the
//!   maximum, as on fat trees).
//!   On `torus3d:4x4x4,hosts=2` that took the busiest link from 218 routes
//!   to 136, on the 3-level radix-8 tree with 4 cables cut from 116 to 104
//!   (OpenSM 3.3.23: 198 and 104); fat trees stay at the ideal.
//! - [`PathChoice::MinimalSum`]: shortest in hops, then the least load
//!   summed over the path, ties to the lowest port: OpenSM's metric, made
//!   exact. Its trees are shortest-path trees under one additive weight
//!   that changes slowly from LID to LID, and on tori they turn between
//!   dimensions far more regularly than bottleneck-first ones, so DFSSSP
//!   needs far fewer layers for them (see DFSSSP below); the price is a
//!   higher maximum on some fabrics (in bench/routing-results.md's set
//!   ft2-r8-cut 48 instead of 44, ft3-r8-cut 112 instead of 104, random-24
//!   157 instead of 135, torus3d-4 140 instead of 136; the same on the
//!   others).
//! - [`PathChoice::Weighted`]: the HOTI'09 weights as stated, `1 + load`
//!   per channel, with a binary-heap Dijkstra per LID (O(E log S)). A loaded
//!   link soon makes a longer path cheaper, so many paths are not minimal
//!   (on fat trees too); it is there for comparison.
//!
//! ### Order, ties, LMC
//! Destinations are processed as OpenSM does it in spirit and fully
//! deterministically: end ports first (compute nodes from
//! [`EngineOptions::cn_guids`] first if given, then the rest), each group by
//! port GUID, each LID offset of a port in turn; then switch LIDs by switch
//! GUID. Routes to switch LIDs are management traffic: they take the least
//! loaded path but charge nothing (OpenSM's SP0 routes come last "with lower
//! priority for balancing" too), so they do not disturb the end-port balance.
//! A switch picks, among the channels achieving the minimum, the one with
//! the lowest port number. With LMC > 0 the 2^LMC LIDs of a port are kept
//! apart where the cabling allows: while routing a port's later LIDs, the
//! search key is prefixed with the number of channels the path shares with
//! the port's earlier LIDs, so disjoint paths win over merely lighter ones.
//!
//! The result depends only on GUIDs, port numbers and cabling, never on the
//! order the fabric lists switches in: search keys do not depend on the
//! visiting order, ties are broken by port, and flows are sums.
//!
//! ### Why one search per LID, not per destination switch
//! The end ports of one leaf could share one tree (one search per switch, as
//! MinHop does), but then every source would send to all of them over the
//! same path, and the tree's links would take the whole leaf's traffic: on a
//! fat tree that stacks radix/2 hosts' flows on one core link. Sharing a
//! tree is only sound if the weights change between the ports, which is
//! exactly a new search. What *is* shared per destination switch in the
//! minimal variant is the BFS (the hop layers and candidate channels), which
//! does not depend on weights.
//!
//! The option is there all the same, [`SsspConfig::tree_per_switch`]: all
//! the LIDs that end at one switch (its end ports' and its own, per LID
//! offset) follow one tree, searched once and charged once per end port.
//! Fewer distinct paths close fewer channel dependency cycles, which is
//! what DFSSSP's fallback wants (below), at the price the previous
//! paragraph names where hosts share leaves (with
//! [`PathChoice::MinimalSum`] on bench/routing-results.md's set: 960
//! instead of 120 on ft2-r16, 210 instead of 135 on random-24; the same or
//! better on mesh, dragonfly and tori); with the same number of hosts on
//! every switch the trees do not depend on that number (all loads scale
//! alike), so a torus with two hosts per switch needs the layers of the
//! same torus with one.
//!
//! ### Cost
//! S switches, E directed switch-to-switch channels, L destination LIDs:
//! - minimal: O(S·(S + E)) for the per-switch BFS, O(L·(S + E)) for the
//!   per-LID passes (times 1 + `REFINE_PASSES`); weighted: O(L·E·log S);
//! - memory: the tables are computed destination-major (one column of S
//!   ports per LID, S·L bytes: each LID's pass writes contiguously, whatever
//!   order LIDs come in) and transposed into per-switch LFTs at the end
//!   (another S·L bytes); O(S + E) scratch.
//!
//! Measured (one core, CPU time of the routing call, peak RSS of the whole
//! process including the fabric; `cargo run --release -p ibsm-routing
//! --example sssp_bench -- 3888 11664 45056`, under `/usr/bin/time -v` for
//! memory):
//!
//! | fat tree                          | sssp            | dfsssp           |
//! |-----------------------------------|-----------------|------------------|
//! | radix 36, 3 levels, 3,888 hosts   | 0.07 s, 11 MB   | 0.11 s, 14 MB    |
//! | radix 36, 3 levels, 11,664 hosts  | 0.5 s, 48 MB    | 0.8 s, 69 MB     |
//! | radix 64, 3 levels, 45,056 hosts  | 6.0 s, 385 MB   | 10.2 s, 567 MB   |
//!
//! All at the ideal edge forwarding index (3,870 and 11,646 all-to-all
//! paths on the busiest link of the first two), all paths minimal, DFSSSP on
//! one layer.
//!
//! ## DFSSSP (Domke, Hoefler, Nagel, IPDPS 2011)
//! SSSP routes followed by deadlock removal on virtual-lane layers; see
//! [`mod@cdg`]. A path is (source switch, DLID): every end port behind a
//! switch uses its switch's path, so [`PathSl`](crate::lft::PathSl) is kept
//! per source switch. The SL of a path is its layer (or, balanced, one of
//! its layer's VLs), and SL == VL: the SM programs SL2VL as the identity on
//! every port, so a packet stays on its layer's VL from source to
//! destination, and the CDG of each VL is that of its SL.
//!
//! ### Paths that fit the VLs
//! How many layers a fabric needs depends on the paths more than on the
//! layering heuristic. SSSP's default paths are the best balanced and on
//! fat trees need one layer, but on tori they turn between dimensions
//! wherever the load says and close dependency cycles everywhere: 13
//! layers on a 6×6×6 torus, more than 15 on 8×8×8. So DFSSSP has a second
//! path set, [`DfssspConfig::fallback`] (default
//! [`DfssspConfig::LAYERABLE`]: [`PathChoice::MinimalSum`], one tree per
//! destination switch). When the default paths need more than one layer,
//! the fallback is routed and layered too, and of the two that fit within
//! the VLs, the one whose busiest link carries less is kept (ties: the
//! default). Layering stops at the VLs available, so a path set that does
//! not fit costs about what one that fits does.
//!
//! Measured with 8 VLs (`cargo run --release -p ibsm-routing --example
//! sssp_bench -- --validate dfsssp torus:4x4x4:1 ...`, testfab::grid tori;
//! time: CPU time of the whole call; max: the most all-to-all end-port
//! routes on one link, SSSP's in parentheses). "Before" is this engine
//! without the fallback: the layers SSSP's paths need (up to 15 VLs) and
//! its time; with 8 VLs it refused all but the 4×4×4 tori.
//!
//! | torus, hosts/switch | before        | layers, paths kept | max (SSSP)    | time   |
//! |---------------------|---------------|--------------------|---------------|--------|
//! | 4×4×4, 1            | 3             | 3, default         | 32 (32)       | 1 ms   |
//! | 4×4×4, 2            | 6, 14 ms      | 1, fallback        | 128 (136)     | 12 ms  |
//! | 6×6×6, 1            | 13, 0.69 s    | 4, fallback        | 180 (178)     | 0.19 s |
//! | 6×6×6, 2            | 14, 1.1 s     | 4, fallback        | 720 (684)     | 0.24 s |
//! | 8×8×8, 1            | > 15, 2.6 s   | 4, fallback        | 576 (573)     | 1.1 s  |
//! | 8×8×8, 2            | > 15, 3.1 s   | 4, fallback        | 2,304 (2,196) | 1.5 s  |
//! | 10×10×10, 1         | > 15, 6.4 s   | 7, fallback        | 1,400 (1,355) | 4.9 s  |
//! | 12×12×12, 1         | > 15, 16 s    | 7, fallback        | 2,880 (2,830) | 12 s   |
//! | 16×16, 2            | 13, 0.65 s    | 4, fallback        | 2,176 (2,132) | 0.18 s |
//! | 32×32, 1            | > 15, 3.9 s   | 5, fallback        | 4,288 (4,260) | 3.2 s  |
//!
//! Most of the time on the larger tori is the attempt with the default
//! paths (the fallback alone: 0.07 s on 8×8×8, 1.3 s on 12×12×12);
//! [`DfssspConfig::sssp`] = [`DfssspConfig::LAYERABLE`] skips it. OpenSM
//! 3.3.23's dfsssp on tori of the same shapes (`ibsm topology write
//! torus3d:8x8x8`, one host per switch, on ibsim, `opensm -o -R dfsssp -Q`
//! with 8 VLs) needs 8 VLs on 4×4×4 and more than 8 on 6×6×6 and 8×8×8 (a
//! cycle is left on its VL 7), so it falls back to minhop there. On
//! bench/routing-results.md's fabrics the fallback is kept only on the
//! 4×4×4 torus (max 136 → 128, shift worst 8 → 4); on the others the
//! default paths stay (fat trees need one layer; mesh, dragonfly and
//! random fabrics balance as well or better on them).

pub mod cdg;
mod repair;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::channels::{ChannelGraph, SelfLoops};
use crate::error::RoutingError;
use crate::fabric::{NodeRef, RoutingFabric};
use crate::lft::{Lft, Routes, UNROUTED};
use crate::options::EngineOptions;

pub use cdg::{LayerMethod, Layering, MAX_LAYERS};

const NONE: u32 = u32::MAX;

/// Rip-up-and-reroute passes of the minimal variant after the first
/// routing: each end-port LID (LMC 0) is taken off the load and searched
/// again against every other route, which the first pass could only see for
/// the LIDs before it. Two passes measured best on the fabrics of
/// bench/routing-results.md; a third gained nothing.
const REFINE_PASSES: u32 = 2;

/// How SSSP weighs a path; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathChoice {
    /// Shortest in hops first, then least loaded: the path's most loaded
    /// channel, then its summed load.
    #[default]
    Minimal,
    /// Shortest in hops first, then the least load summed over the path
    /// (OpenSM's metric, made exact); ties to the lowest port. Balances a
    /// little worse than [`PathChoice::Minimal`] on some fabrics, but its
    /// paths need far fewer DFSSSP layers on tori (module documentation).
    MinimalSum,
    /// The HOTI'09 weights as stated: 1 + load per channel; detours around
    /// load.
    Weighted,
}

/// Tuning of [`sssp_with`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SsspConfig {
    pub paths: PathChoice,
    /// One tree per destination switch (per LID offset): every LID that
    /// ends at a switch is routed along the same paths, charged once per
    /// end port. Fewer distinct paths, so fewer DFSSSP layers, at some
    /// cost in balance (module documentation). Default: one tree per LID.
    pub tree_per_switch: bool,
}

/// Tuning of [`dfsssp_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DfssspConfig {
    pub sssp: SsspConfig,
    /// Spread the paths of the layers deadlock removal needs over every
    /// VL the fabric offers (OpenSM does): each layer is split into
    /// sub-layers, which stay acyclic as subsets of an acyclic layer.
    pub balance: bool,
    /// Paths to try when those of `sssp` need more than one layer: kept
    /// if they fit in the VLs and load the busiest link less, or if those
    /// of `sssp` do not fit (None: only `sssp`). Default
    /// [`DfssspConfig::LAYERABLE`].
    pub fallback: Option<SsspConfig>,
}

impl DfssspConfig {
    /// Paths that need few layers: summed load, one tree per destination
    /// switch (module documentation).
    pub const LAYERABLE: SsspConfig = SsspConfig { paths: PathChoice::MinimalSum, tree_per_switch: true };
}

impl Default for DfssspConfig {
    fn default() -> Self {
        DfssspConfig { sssp: SsspConfig::default(), balance: true, fallback: Some(DfssspConfig::LAYERABLE) }
    }
}

/// SSSP with the default configuration (minimal paths). See the module
/// documentation.
///
/// A disconnected fabric is routed part by part and reported as
/// [`RoutingError::Disconnected`], which carries those routes.
pub fn sssp(fabric: &RoutingFabric, options: &EngineOptions) -> Result<Routes, RoutingError> {
    sssp_with(fabric, options, &SsspConfig::default())
}

/// SSSP with an explicit configuration.
pub fn sssp_with(fabric: &RoutingFabric, options: &EngineOptions, config: &SsspConfig) -> Result<Routes, RoutingError> {
    let net = Net::new(fabric);
    let (cols, _) = route_columns(fabric, &net, options, config);
    let routes = Routes { lfts: transpose_to_lfts(&cols, net.ns, fabric.max_lid()), sl: None };
    crate::error::disconnected_or_ok(fabric, routes)
}

/// DFSSSP with the default configuration: minimal SSSP paths, layered for
/// deadlock freedom within `options.max_vls` VLs, then balanced over them.
///
/// When SSSP's own paths do not fit the VLs (even with their management
/// routes re-routed, see `repair`), three deadlock-free routings are
/// candidates: the fallback paths of [`DfssspConfig::fallback`], Nue's
/// escape-path routing and up*/down* (both deadlock free on any budget,
/// 1 VL included, up*/down* on SL 0 alone), and the one with the least busy
/// busiest link is kept (ties: in that order). So DFSSSP routes at every
/// budget and is never busier than Nue there; on three-level fat trees with
/// cables cut, where Nue's single layer does poorly (2,388 routes on the
/// busiest link of the radix-12 tree with 5% cut), up*/down* gives 912.
/// The cost: one Nue and one updn run and three validations, only when
/// SSSP's paths did not fit.
pub fn dfsssp(fabric: &RoutingFabric, options: &EngineOptions) -> Result<Routes, RoutingError> {
    let config = DfssspConfig::default();
    let own = dfsssp_with(fabric, options, &config);
    let kept_sssp = matches!(&own, Ok((_, layering)) if layering.sssp == config.sssp);
    if kept_sssp || matches!(own, Err(RoutingError::Disconnected { .. })) {
        return own.map(|(r, _)| r);
    }
    let busiest = |r: &Routes| crate::analysis::validate(fabric, r).inter_switch_load.max;
    let mut best: Option<(u64, Routes)> = None;
    let mut first_error = None;
    let candidates = [
        own.map(|(r, _)| r),
        crate::nue::nue(fabric, options),
        crate::updn::updn(fabric, &EngineOptions { root_guids: Vec::new(), ..options.clone() }),
    ];
    for candidate in candidates {
        match candidate {
            Ok(r) => {
                let load = busiest(&r);
                if best.as_ref().is_none_or(|(b, _)| load < *b) {
                    best = Some((load, r));
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match (best, first_error) {
        (Some((_, r)), _) => Ok(r),
        (None, Some(e)) => Err(e),
        (None, None) => unreachable!("three candidates"),
    }
}

/// DFSSSP with an explicit configuration; also returns what the layering
/// found (layers needed, paths per layer, cycles broken, which paths).
///
/// The paths of `config.sssp` are layered within `options.max_vls`. If
/// they need more than one layer, those of `config.fallback` are routed
/// and layered too, and the paths that fit with the lower maximum load
/// are kept (ties: `config.sssp`'s). If neither fits,
/// [`RoutingError::TooFewVls`] names the fewest VLs with which one does
/// (found by layering again without the limit, then checked).
pub fn dfsssp_with(
    fabric: &RoutingFabric,
    options: &EngineOptions,
    config: &DfssspConfig,
) -> Result<(Routes, Layering), RoutingError> {
    let net = Net::new(fabric);
    let max_vls = options.max_vls.clamp(1, cdg::MAX_LAYERS);
    let max_lid = fabric.max_lid();
    let to_end_port: Vec<bool> =
        (0..=max_lid).map(|lid| matches!(fabric.lid_owner(lid), Some(NodeRef::End(_)))).collect();
    let mut choices = vec![&config.sssp];
    choices.extend(config.fallback.as_ref().filter(|&c| *c != config.sssp));
    let mut tried = Vec::new();
    let mut found: Option<(Vec<Lft>, Layering, u64)> = None;
    for sssp in choices {
        if found.as_ref().is_some_and(|(_, l, _)| l.needed == 1) {
            // Acyclic on one layer: nothing to gain.
            break;
        }
        let (cols, max_load) = route_columns(fabric, &net, options, sssp);
        let lfts = transpose_to_lfts(&cols, net.ns, max_lid);
        // Layering stops at `max_vls`: a fabric that does not fit costs
        // about what one that fits does.
        let mut layering = cdg::assign_layers(&net, &cols, &lfts, max_lid, &to_end_port, max_vls);
        layering.sssp = sssp.clone();
        if layering.needed > max_vls {
            // Perhaps only management routes close the cycles: keep the
            // end-port paths and route those anew (see `repair`).
            let mut fixed = cols.clone();
            if repair::repair(fabric, &net, &mut fixed, &to_end_port) {
                let fixed_lfts = transpose_to_lfts(&fixed, net.ns, max_lid);
                let mut l = cdg::assign_layers(&net, &fixed, &fixed_lfts, max_lid, &to_end_port, max_vls);
                l.sssp = sssp.clone();
                if l.needed <= max_vls && found.as_ref().is_none_or(|&(_, _, best)| max_load < best) {
                    found = Some((fixed_lfts, l, max_load));
                    continue;
                }
            }
            tried.push((cols, lfts));
        } else if found.as_ref().is_none_or(|&(_, _, best)| max_load < best) {
            found = Some((lfts, layering, max_load));
        }
    }
    let Some((lfts, mut layering, _)) = found else {
        let layers = |(cols, lfts): &(Vec<u8>, Vec<Lft>), limit| {
            cdg::assign_layers(&net, cols, lfts, max_lid, &to_end_port, limit).needed
        };
        // The fewest layers either path set needs without the limit; the
        // layering with that limit agrees in practice, but as it stops at
        // the limit it may not, so the count is checked to route.
        let mut needed = match max_vls {
            cdg::MAX_LAYERS => max_vls + 1,
            _ => tried.iter().map(|t| layers(t, cdg::MAX_LAYERS)).min().unwrap_or(cdg::MAX_LAYERS + 1),
        };
        while needed <= cdg::MAX_LAYERS && !tried.iter().any(|t| layers(t, needed) <= needed) {
            needed += 1;
        }
        return Err(RoutingError::TooFewVls { engine: "dfsssp", needed, available: max_vls });
    };
    drop(tried);
    if config.balance {
        layering.balance(&net, max_lid, max_vls);
    }
    let sl = layering.take_path_sl(net.ns, max_lid);
    let routes = Routes { lfts, sl: Some(sl) };
    crate::error::disconnected_or_ok(fabric, routes).map(|r| (r, layering))
}

/// The switch-level graph with numbered channels (directed
/// switch-to-switch cables), shared by the router and the layering.
pub(crate) struct Net {
    pub(crate) ns: usize,
    /// The channels, numbered in the fabric's switch order, self-loops
    /// included.
    pub(crate) ch: ChannelGraph,
    /// End ports hanging off each switch: the traffic it injects.
    pub(crate) local: Vec<u64>,
    /// Position of each switch in GUID order.
    pub(crate) guid_rank: Vec<u32>,
}

impl Net {
    pub(crate) fn new(f: &RoutingFabric) -> Net {
        let ns = f.num_switches();
        let ch = ChannelGraph::in_fabric_order(f, SelfLoops::Keep);
        let local = f.end_ports_per_switch();
        let mut by_guid: Vec<usize> = (0..ns).collect();
        by_guid.sort_by_key(|&s| f.switches()[s].guid);
        let mut guid_rank = vec![0u32; ns];
        for (r, &s) in by_guid.iter().enumerate() {
            guid_rank[s] = r as u32;
        }
        Net { ns, ch, local, guid_rank }
    }
}

/// A block of LIDs that terminates at one switch.
#[derive(Debug, Clone, Copy)]
struct Dest {
    base: u16,
    count: u16,
    switch: u32,
    /// The port the LIDs leave the destination switch by (0 = the switch).
    out_port: u8,
    /// End-port routes charge the channels; switch routes do not.
    charged: bool,
}

/// Destinations in processing order; see the module documentation.
fn destinations(f: &RoutingFabric, options: &EngineOptions) -> Vec<Dest> {
    let mut cn: Vec<u64> = options.cn_guids.clone();
    cn.sort_unstable();
    let mut ends: Vec<(bool, u64, Dest)> = Vec::new();
    for e in f.end_port_ids() {
        let ep = f.end_port(e);
        if ep.base_lid == 0 {
            continue;
        }
        if let Some((s, p)) = f.attached_switch(e) {
            let is_cn = cn.binary_search(&ep.port_guid).is_ok();
            let d = Dest { base: ep.base_lid, count: 1 << ep.lmc, switch: s.0, out_port: p, charged: true };
            // Compute nodes sort first (false < true).
            ends.push((!is_cn || cn.is_empty(), ep.port_guid, d));
        }
    }
    ends.sort_by_key(|&(rest, guid, _)| (rest, guid));
    let mut sws: Vec<(u64, Dest)> = f
        .switch_ids()
        .filter(|&s| f.switch(s).base_lid != 0)
        .map(|s| {
            let sw = f.switch(s);
            (sw.guid, Dest { base: sw.base_lid, count: 1 << sw.lmc, switch: s.0, out_port: 0, charged: false })
        })
        .collect();
    sws.sort_by_key(|&(g, _)| g);
    ends.into_iter().map(|(_, _, d)| d).chain(sws.into_iter().map(|(_, d)| d)).collect()
}

/// Hop layers towards one destination switch, for the minimal variant:
/// the switches that reach it in BFS order (nearest first, the destination
/// itself excluded) and, for each, its downhill channels in port order.
struct HopTree {
    dest: u32,
    order: Vec<u32>,
    cand_base: Vec<u32>,
    /// (neighbour, channel to it).
    cand: Vec<(u32, u32)>,
    dist: Vec<u32>,
}

impl HopTree {
    fn new(ns: usize) -> HopTree {
        HopTree { dest: NONE, order: Vec::new(), cand_base: Vec::new(), cand: Vec::new(), dist: vec![NONE; ns] }
    }

    fn build(&mut self, net: &Net, d: usize) {
        self.dest = d as u32;
        self.dist.fill(NONE);
        self.order.clear();
        self.dist[d] = 0;
        self.order.push(d as u32);
        let mut head = 0;
        while head < self.order.len() {
            let u = self.order[head] as usize;
            head += 1;
            let du = self.dist[u] + 1;
            for c in net.ch.channels(u) {
                let v = net.ch.head[c] as usize;
                if self.dist[v] == NONE {
                    self.dist[v] = du;
                    self.order.push(v as u32);
                }
            }
        }
        self.order.remove(0);
        self.cand_base.clear();
        self.cand.clear();
        for &v in &self.order {
            self.cand_base.push(self.cand.len() as u32);
            let v = v as usize;
            let want = self.dist[v] - 1;
            for c in net.ch.channels(v) {
                if self.dist[net.ch.head[c] as usize] == want {
                    self.cand.push((net.ch.head[c], c as u32));
                }
            }
        }
        self.cand_base.push(self.cand.len() as u32);
    }
}

/// Per-run state of the router.
struct Router<'a> {
    net: &'a Net,
    /// Load per channel: routes placed on it, weighted by their sources.
    load: Vec<u64>,
    /// Per channel: how many earlier LIDs of the current port use it.
    shared: Vec<u64>,
    shared_touched: Vec<u32>,
    /// Search keys per switch: (shared channels, load).
    key: Vec<(u64, u64)>,
    /// Chosen channel per switch (`NONE` for the destination and unreached).
    next: Vec<u32>,
    /// Switches of the current tree, each after its next hop.
    settled: Vec<u32>,
    inflow: Vec<u64>,
    hop: HopTree,
    heap: BinaryHeap<Reverse<((u64, u64), u32)>>,
    /// Dijkstra: `done[s] == stamp` once `s` is settled.
    done: Vec<u32>,
    stamp: u32,
}

impl<'a> Router<'a> {
    fn new(net: &'a Net) -> Router<'a> {
        let ns = net.ns;
        Router {
            net,
            load: vec![0; net.ch.num_channels()],
            shared: vec![0; net.ch.num_channels()],
            shared_touched: Vec::new(),
            key: vec![(u64::MAX, u64::MAX); ns],
            next: vec![NONE; ns],
            settled: Vec::new(),
            inflow: vec![0; ns],
            hop: HopTree::new(ns),
            heap: BinaryHeap::new(),
            done: vec![0; ns],
            stamp: 0,
        }
    }

    /// Minimal variant: fills `next` and `settled` for destination switch
    /// `d` (whose hop tree is built).
    fn search_minimal<const SHARED: bool, const BOTTLENECK: bool>(&mut self, d: usize) {
        let h = &self.hop;
        debug_assert_eq!(h.dest as usize, d);
        self.key[d] = (0, 0);
        self.settled.clear();
        for (i, &v) in h.order.iter().enumerate() {
            let cands = &h.cand[h.cand_base[i] as usize..h.cand_base[i + 1] as usize];
            let mut best_c = NONE;
            if SHARED {
                let mut best = (u64::MAX, u64::MAX);
                for &(u, c) in cands {
                    let k = self.key[u as usize];
                    let cand = (k.0 + self.shared[c as usize], k.1.saturating_add(self.load[c as usize]));
                    if cand < best {
                        best = cand;
                        best_c = c;
                    }
                }
                self.key[v as usize] = best;
            } else {
                // The common case. Bottleneck first (the most loaded
                // channel on the path, then the load summed over it;
                // PathChoice::Minimal), or the sum alone (MinimalSum).
                let mut best = (u64::MAX, u64::MAX);
                for &(u, c) in cands {
                    let k = self.key[u as usize];
                    let l = self.load[c as usize];
                    let cand = (if BOTTLENECK { k.0.max(l) } else { 0 }, k.1.saturating_add(l));
                    if cand < best {
                        best = cand;
                        best_c = c;
                    }
                }
                self.key[v as usize] = best;
            }
            self.next[v as usize] = best_c;
        }
        self.settled.extend_from_slice(&h.order);
    }

    /// Weighted variant: Dijkstra towards `d` with channel weight
    /// 1 + load, then each switch's lowest-port channel achieving its
    /// distance.
    fn search_weighted(&mut self, d: usize, use_shared: bool) {
        let net = self.net;
        self.key.fill((u64::MAX, u64::MAX));
        self.next.fill(NONE);
        self.stamp += 1;
        let stamp = self.stamp;
        self.settled.clear();
        self.heap.clear();
        self.key[d] = (0, 0);
        self.heap.push(Reverse(((0, 0), d as u32)));
        while let Some(Reverse((k, u))) = self.heap.pop() {
            let u = u as usize;
            if self.done[u] == stamp || k != self.key[u] {
                continue;
            }
            self.done[u] = stamp;
            if u != d {
                self.settled.push(u as u32);
            }
            for c_out in net.ch.channels(u) {
                let v = net.ch.head[c_out] as usize;
                if self.done[v] == stamp {
                    continue;
                }
                // Traffic flows v -> u: the weight is that of the reverse channel.
                let c = net.ch.reverse(c_out);
                let cand = (if use_shared { k.0 + self.shared[c] } else { 0 }, k.1.saturating_add(1 + self.load[c]));
                if cand < self.key[v] {
                    self.key[v] = cand;
                    self.heap.push(Reverse((cand, v as u32)));
                }
            }
        }
        // The lowest port among the channels achieving the distance. Every
        // channel weighs at least 1, so the chosen neighbour is strictly
        // closer: the choices form a tree, and `settled` (in order of
        // distance) lists every switch after its next hop.
        for &v in &self.settled {
            let v = v as usize;
            let mut best = (u64::MAX, u64::MAX);
            let mut best_c = NONE;
            for c in net.ch.channels(v) {
                let u = net.ch.head[c] as usize;
                if self.done[u] != stamp || u == v {
                    continue;
                }
                let k = self.key[u];
                let cand = (if use_shared { k.0 + self.shared[c] } else { 0 }, k.1.saturating_add(1 + self.load[c]));
                if cand < best {
                    best = cand;
                    best_c = c as u32;
                }
            }
            debug_assert_eq!(best, self.key[v]);
            self.next[v] = best_c;
        }
    }

    /// Charges the new tree: each channel carries the end ports of every
    /// switch upstream of it (farthest switches first). What arrives at the
    /// destination switch `d` is delivered, not forwarded. `times`: the
    /// LIDs sharing the tree.
    fn charge(&mut self, d: usize, times: u64) {
        if times == 0 {
            return;
        }
        let net = self.net;
        for &v in self.settled.iter().rev() {
            let v = v as usize;
            let fl = net.local[v] + std::mem::take(&mut self.inflow[v]);
            let c = self.next[v] as usize;
            self.load[c] += fl * times;
            self.inflow[net.ch.head[c] as usize] += fl;
        }
        self.inflow[d] = 0;
    }

    /// Removes what [`Router::charge`] added for the tree in `next` and
    /// `settled`.
    fn uncharge(&mut self, d: usize, times: u64) {
        let net = self.net;
        for &v in self.settled.iter().rev() {
            let v = v as usize;
            let fl = net.local[v] + std::mem::take(&mut self.inflow[v]);
            let c = self.next[v] as usize;
            self.load[c] -= fl * times;
            self.inflow[net.ch.head[c] as usize] += fl;
        }
        self.inflow[d] = 0;
    }

    /// Notes the tree's channels as used by the current port's LIDs.
    fn mark_shared(&mut self) {
        for &v in &self.settled {
            let c = self.next[v as usize];
            if self.shared[c as usize] == 0 {
                self.shared_touched.push(c);
            }
            self.shared[c as usize] += 1;
        }
    }

    fn clear_shared(&mut self) {
        for c in self.shared_touched.drain(..) {
            self.shared[c as usize] = 0;
        }
    }
}

/// LIDs routed along one tree: a single LID, or with
/// [`SsspConfig::tree_per_switch`] every LID with one offset that ends at
/// one switch. Its members are `members[first..first + len]`.
struct Group {
    switch: u32,
    first: u32,
    len: u32,
    /// End-port LIDs among the members: the tree is charged this often.
    charge: u64,
    /// Searched with the shared-channel key (LID offset > 0).
    shared: bool,
    /// Notes its channels for the later offsets of its LID block.
    mark: bool,
    /// The last of its LID block: the marks are cleared after it.
    clear_after: bool,
    /// Rip-up-and-reroute applies: end-port LIDs, LMC 0 only.
    refine: bool,
}

/// The trees to route, in destination order, and their (LID, port out of
/// the destination switch) members.
fn groups(dests: &[Dest], per_switch: bool) -> (Vec<Group>, Vec<(u16, u8)>) {
    let mut groups: Vec<Group> = Vec::new();
    // Group of each (LID, port), in destination order.
    let mut member_of: Vec<(u32, u16, u8)> = Vec::new();
    let mut by_key: std::collections::HashMap<(u32, u16), u32> = std::collections::HashMap::new();
    for dest in dests {
        for off in 0..dest.count {
            let mut open = || {
                let fresh = Group {
                    switch: dest.switch,
                    first: 0,
                    len: 0,
                    charge: 0,
                    shared: off > 0,
                    mark: false,
                    clear_after: false,
                    refine: true,
                };
                groups.push(fresh);
                groups.len() as u32 - 1
            };
            let gi = match per_switch {
                true => *by_key.entry((dest.switch, off)).or_insert_with(open),
                false => open(),
            };
            let g = &mut groups[gi as usize];
            g.len += 1;
            g.charge += u64::from(dest.charged);
            g.mark |= dest.count > 1;
            g.refine &= dest.count == 1;
            member_of.push((gi, dest.base + off, dest.out_port));
        }
    }
    let mut next = 0u32;
    for g in groups.iter_mut() {
        g.first = next;
        next += g.len;
        g.refine &= g.charge > 0;
    }
    for i in 0..groups.len() {
        groups[i].clear_after = match groups.get(i + 1) {
            Some(n) => !n.shared || n.switch != groups[i].switch,
            None => true,
        };
    }
    let mut fill: Vec<u32> = groups.iter().map(|g| g.first).collect();
    let mut members = vec![(0u16, 0u8); member_of.len()];
    for (gi, lid, port) in member_of {
        members[fill[gi as usize] as usize] = (lid, port);
        fill[gi as usize] += 1;
    }
    (groups, members)
}

/// Routes every destination; returns the tables destination-major
/// (`cols[lid * ns + s]` is the port switch `s` forwards `lid` to) and the
/// most end-port routes on one channel.
fn route_columns(f: &RoutingFabric, net: &Net, options: &EngineOptions, config: &SsspConfig) -> (Vec<u8>, u64) {
    let ns = net.ns;
    let nl = usize::from(f.max_lid()) + 1;
    let mut cols = vec![UNROUTED; ns * nl];
    if ns == 0 {
        return (cols, 0);
    }
    let mut r = Router::new(net);
    let bottleneck = config.paths == PathChoice::Minimal;
    let minimal = config.paths != PathChoice::Weighted;
    let dests = destinations(f, options);
    let (groups, members) = groups(&dests, config.tree_per_switch);
    let write = |cols: &mut [u8], r: &Router, g: &Group| {
        for &(lid, out_port) in &members[g.first as usize..(g.first + g.len) as usize] {
            let col = &mut cols[usize::from(lid) * ns..(usize::from(lid) + 1) * ns];
            col[g.switch as usize] = out_port;
            for &v in &r.settled {
                col[v as usize] = net.ch.port[r.next[v as usize] as usize];
            }
        }
    };
    for g in &groups {
        let d = g.switch as usize;
        if minimal && r.hop.dest != g.switch {
            r.hop.build(net, d);
        }
        match (minimal, g.shared, bottleneck) {
            (true, false, true) => r.search_minimal::<false, true>(d),
            (true, false, false) => r.search_minimal::<false, false>(d),
            (true, true, _) => r.search_minimal::<true, false>(d),
            (false, s, _) => r.search_weighted(d, s),
        }
        write(&mut cols, &r, g);
        r.charge(d, g.charge);
        if g.mark {
            r.mark_shared();
        }
        if g.clear_after {
            r.clear_shared();
        }
    }
    if minimal && r.load.iter().max().copied().unwrap_or(0) > max_load_bound(net, &dests) {
        for _ in 0..REFINE_PASSES {
            for g in groups.iter().filter(|g| g.refine) {
                let d = g.switch as usize;
                if r.hop.dest != g.switch {
                    r.hop.build(net, d);
                }
                let lid = usize::from(members[g.first as usize].0);
                let col = &cols[lid * ns..(lid + 1) * ns];
                r.settled.clear();
                r.settled.extend_from_slice(&r.hop.order);
                for &v in &r.hop.order {
                    r.next[v as usize] = net.ch.chan_of_port(v as usize, col[v as usize]);
                }
                r.uncharge(d, g.charge);
                match bottleneck {
                    true => r.search_minimal::<false, true>(d),
                    false => r.search_minimal::<false, false>(d),
                }
                write(&mut cols, &r, g);
                r.charge(d, g.charge);
            }
        }
    }
    let max_load = r.load.iter().max().copied().unwrap_or(0);
    (cols, max_load)
}

/// A lower bound of the most loaded channel: every charged LID not on
/// switch `s` takes the traffic of `s`'s end ports out by one of its
/// channels, so some channel of `s` carries at least the average. When the
/// first routing meets it (fat trees do), refining cannot lower the maximum
/// and is skipped.
fn max_load_bound(net: &Net, dests: &[Dest]) -> u64 {
    let mut lids_at = vec![0u64; net.ns];
    for d in dests.iter().filter(|d| d.charged) {
        lids_at[d.switch as usize] += u64::from(d.count);
    }
    crate::select::egress_bound(&net.local, &lids_at, |s| net.ch.degree(s))
}

/// Turns destination-major columns into one LFT per switch, in cache-sized
/// tiles.
fn transpose_to_lfts(cols: &[u8], ns: usize, max_lid: u16) -> Vec<Lft> {
    let nl = usize::from(max_lid) + 1;
    let mut lfts: Vec<Lft> = (0..ns).map(|_| Lft::unrouted(max_lid)).collect();
    const TILE: usize = 64;
    for l0 in (0..nl).step_by(TILE) {
        let l1 = (l0 + TILE).min(nl);
        for s0 in (0..ns).step_by(TILE) {
            let s1 = (s0 + TILE).min(ns);
            for (s, lft) in lfts[s0..s1].iter_mut().enumerate() {
                let s = s0 + s;
                for lid in l0..l1 {
                    lft.ports[lid] = cols[lid * ns + s];
                }
            }
        }
    }
    lfts
}
