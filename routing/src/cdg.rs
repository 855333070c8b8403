//! Deadlock analysis: the channel dependency graph (CDG) of a set of
//! forwarding tables, per virtual lane.
//!
//! A *channel* is a directed switch-to-switch cable (switch, output port).
//! A packet that holds a buffer on channel `a` and waits for one on channel
//! `b` (the next hop of its path) makes `a` depend on `b`. Credit-based
//! flow control can deadlock exactly when some VL's dependency graph has a
//! cycle (Dally and Seitz, "Deadlock-free message routing in multiprocessor
//! interconnection networks", IEEE ToC 1987), so tables are deadlock free
//! when every VL's graph is acyclic.
//!
//! Paths: one per (source switch, destination LID), where the source switch
//! is where traffic enters the fabric, plus one per further SL some of the
//! switch's end ports use ([`crate::lft::PathSl::more`], per-port SLs as an
//! SA answers them). The VL of a path is its SL from
//! [`Routes::sl`] (SL to VL is the identity here, as the SM programs it on
//! every port; 0 when the engine sets no SLs). Channels to and from end
//! ports are left out: an end port only sources or sinks, so no cycle can
//! pass through one.
//!
//! ## VLs that change per hop
//! When [`crate::lft::PathSl::hop_vls`] is set (dor on a torus), each hop's
//! VL comes from the SL-to-VL table of (switch, input port, output port),
//! so a path may change VL inside the fabric. The graph's nodes are then
//! (channel, VL) pairs, and a packet holding channel `a` on VL `x` that
//! needs channel `b` on VL `y` makes (a, x) depend on (b, y). Each VL's own
//! subgraph is checked as above; when all are acyclic, the whole graph,
//! cross-VL dependencies included, is checked too (a cycle can run through
//! several VLs), and such a cycle is reported on the lowest VL it uses with
//! the VL of each of its channels ([`VlCdg::cycle_vls`]). A path counts on
//! every VL one of its hops uses (so the per-VL path counts add up to more
//! than the paths); a VL's channels and dependencies are those leaving its
//! (channel, VL) nodes. Walks stop at an (input port, SL) state already
//! walked for the LID, since what follows depends only on that: O(L·P·V)
//! for P switch ports in use.
//!
//! ## Method and cost
//! For a fixed destination LID the tables give each switch one next hop, so
//! the paths of all sources on one VL form a forest: the dependencies are
//! "the channel into switch `t`, then `t`'s channel towards the LID", for
//! every switch `t` some path on that VL enters. They are found by walking
//! from each source until the walk meets a switch already walked for this
//! (LID, VL), so each switch is visited once per (LID, VL) in use:
//! O(L·S·V) for L LIDs, S switches, V VLs used. Dependencies are recorded in
//! one bit matrix per switch (in-port × out-port), which dedupes them for
//! free in (P+1)² bits per switch and VL. Cycle detection is an iterative
//! depth-first search over the channel graph, O(C + D) for C channels and D
//! dependencies; a cycle found is then shortened to a shortest cycle through
//! one of its channels by a breadth-first search.
//!
//! 1,620 switches and 13,000 LIDs (the 11,664-host three-level fat tree)
//! take about 21 M switch visits per VL.

use std::fmt;

use serde::Serialize;

use crate::fabric::{NodeRef, PortEnd, RoutingFabric, SwitchId};
use crate::lft::{PathSl, Routes, UNROUTED};

/// The highest VL a path can use (VL15 is management only; IBA 7.6.2).
pub const MAX_DATA_VLS: usize = 15;

/// Which paths the graph is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct CdgScope {
    /// Also paths from switches with no end port attached, and paths to
    /// switch LIDs (management traffic on data VLs). Off by default:
    /// deadlock-free engines (OpenSM's dfsssp among them) layer the paths
    /// between end ports, which is the traffic that can fill buffers.
    pub include_switches: bool,
}

/// A directed switch-to-switch cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Channel {
    /// Switch GUID the channel leaves.
    pub from: u64,
    pub from_port: u8,
    /// Switch GUID it arrives at.
    pub to: u64,
    pub to_port: u8,
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({:#018x}, {}) -> ({:#018x}, {})", self.from, self.from_port, self.to, self.to_port)
    }
}

/// The dependency graph of one VL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VlCdg {
    pub vl: u8,
    /// (source switch, destination LID) paths on this VL.
    pub paths: u64,
    /// Channels at least one path on this VL uses before its last hop
    /// (those with an outgoing dependency).
    pub channels: usize,
    /// Distinct dependencies (channel pairs).
    pub dependencies: usize,
    pub acyclic: bool,
    /// When not acyclic: one cycle, each channel followed by the one it
    /// depends on, the last depending on the first.
    pub cycle: Option<Vec<Channel>>,
    /// With per-hop VLs, a cycle through several VLs: the VL of each
    /// channel of [`VlCdg::cycle`]. `None`: the whole cycle is on `vl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle_vls: Option<Vec<u8>>,
}

/// Per-VL dependency graphs of a set of tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CdgReport {
    pub scope: CdgScope,
    /// Switch-to-switch channels in the fabric (two per cable).
    pub fabric_channels: usize,
    /// Only the VLs some path uses, in VL order.
    pub vls: Vec<VlCdg>,
    /// Paths change VL per hop ([`crate::lft::PathSl::hop_vls`]); the
    /// graph's nodes are (channel, VL).
    #[serde(default)]
    pub hop_vls: bool,
}

impl CdgReport {
    /// Every VL's graph is acyclic.
    pub fn deadlock_free(&self) -> bool {
        self.vls.iter().all(|v| v.acyclic)
    }

    /// The first VL with a cycle.
    pub fn first_cycle(&self) -> Option<&VlCdg> {
        self.vls.iter().find(|v| !v.acyclic)
    }
}

impl fmt::Display for CdgReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = if self.scope.include_switches { "all sources and LIDs" } else { "end-port traffic" };
        writeln!(
            f,
            "deadlock ({who}): {} on {} VL(s){}, {} switch-to-switch channels",
            if self.deadlock_free() { "acyclic" } else { "CYCLIC" },
            self.vls.len(),
            if self.hop_vls { " switched per hop" } else { "" },
            self.fabric_channels
        )?;
        for v in &self.vls {
            write!(
                f,
                "  VL{}: {} paths, {} channels, {} dependencies, {}",
                v.vl,
                v.paths,
                v.channels,
                v.dependencies,
                if v.acyclic { "acyclic" } else { "cycle" }
            )?;
            match &v.cycle {
                Some(c) => {
                    writeln!(f, " of {} channels:", c.len())?;
                    for (i, ch) in c.iter().enumerate() {
                        match v.cycle_vls.as_ref().and_then(|x| x.get(i)) {
                            Some(vl) => writeln!(f, "    VL{vl} {ch}")?,
                            None => writeln!(f, "    {ch}")?,
                        }
                    }
                }
                None => writeln!(f)?,
            }
        }
        Ok(())
    }
}

/// One 64-LID block of a per-switch byte table (LFT ports or path SLs),
/// laid out switch-major so that all switches' entries for the block sit
/// together.
struct ChunkRows {
    block: usize,
    data: Vec<u8>,
}

impl ChunkRows {
    const LIDS: usize = 64;

    fn new(switches: usize) -> ChunkRows {
        ChunkRows { block: usize::MAX, data: vec![0; switches * Self::LIDS] }
    }

    /// Makes `lid`'s block current; returns the LID's index in it. Entries
    /// past the end of a row read as `fill`.
    fn load<'a>(&mut self, lid: u16, row: impl Fn(usize) -> Option<&'a [u8]>, fill: u8) -> usize {
        let lid = usize::from(lid);
        let block = lid / Self::LIDS;
        if block != self.block {
            self.block = block;
            let first = block * Self::LIDS;
            for (s, out) in self.data.chunks_exact_mut(Self::LIDS).enumerate() {
                let src = row(s).unwrap_or(&[]);
                let have = src.len().saturating_sub(first).min(Self::LIDS);
                out[..have].copy_from_slice(&src[first..first + have]);
                out[have..].fill(fill);
            }
        }
        lid % Self::LIDS
    }

    #[inline]
    fn get(&self, s: usize, j: usize) -> u8 {
        self.data[s * Self::LIDS + j]
    }
}

/// Per VL: one in-port × out-port bit matrix per switch.
struct DepBits {
    /// Word offset of each switch's matrix; one extra entry at the end.
    offset: Vec<usize>,
    /// Row length (ports 0..=num_ports) of each switch's matrix.
    width: Vec<usize>,
    words: Vec<u64>,
}

impl DepBits {
    fn new(f: &RoutingFabric) -> DepBits {
        let mut offset = Vec::with_capacity(f.num_switches() + 1);
        let mut width = Vec::with_capacity(f.num_switches());
        let mut total = 0usize;
        for s in f.switches() {
            let w = usize::from(s.num_ports) + 1;
            offset.push(total);
            width.push(w);
            total += (w * w).div_ceil(64);
        }
        offset.push(total);
        DepBits { offset, width, words: vec![0; total] }
    }

    #[inline]
    fn set(&mut self, s: usize, in_port: u8, out_port: u8) {
        let bit = usize::from(in_port) * self.width[s] + usize::from(out_port);
        self.words[self.offset[s] + bit / 64] |= 1u64 << (bit % 64);
    }

    /// (in_port, out_port) pairs set for switch `s`.
    fn pairs(&self, s: usize) -> impl Iterator<Item = (u8, u8)> + '_ {
        let w = self.width[s];
        let words = &self.words[self.offset[s]..self.offset[s + 1]];
        words.iter().enumerate().flat_map(move |(i, &word)| {
            let mut x = word;
            std::iter::from_fn(move || {
                if x == 0 {
                    return None;
                }
                let b = x.trailing_zeros() as usize;
                x &= x - 1;
                let bit = i * 64 + b;
                Some(((bit / w) as u8, (bit % w) as u8))
            })
        })
    }
}

/// Builds every VL's channel dependency graph from `routes` and looks for a
/// cycle in each. See the module documentation for the method and cost.
pub fn analyze_cdg(f: &RoutingFabric, routes: &Routes, scope: CdgScope) -> CdgReport {
    let ns = f.num_switches();
    let has_end: Vec<bool> = f.end_ports_per_switch().iter().map(|&n| n > 0).collect();
    let sources: Vec<u32> =
        f.switch_ids().filter(|s| scope.include_switches || has_end[s.index()]).map(|s| s.0).collect();

    // Destination LIDs: every LID of every end port hanging off a switch,
    // plus switch LIDs if asked.
    let mut dlids: Vec<u16> = Vec::new();
    for lid in 1..=f.max_lid() {
        match f.lid_owner(lid) {
            Some(NodeRef::End(e)) if f.attached_switch(e).is_some() => dlids.push(lid),
            Some(NodeRef::Switch(_)) if scope.include_switches => dlids.push(lid),
            _ => {}
        }
    }

    // Per switch-port slot: the switch the cable leads to (NONE for an end
    // port or no cable) and the port it arrives on.
    const NONE: u32 = u32::MAX;
    let mut slot_next = vec![NONE; f.num_switch_port_slots()];
    let mut slot_in = vec![0u8; f.num_switch_port_slots()];
    for s in f.switch_ids() {
        for e in f.switch_neighbors(s) {
            let slot = f.switch_port_slot(s, e.port);
            slot_next[slot] = e.neighbor.0;
            slot_in[slot] = e.remote_port;
        }
    }
    let slot_base: Vec<usize> = f.switch_ids().map(|s| f.switch_port_slot(s, 0)).collect();
    let num_ports: Vec<u8> = f.switches().iter().map(|s| s.num_ports).collect();
    // The switch a packet leaving `s` by `port` reaches, and its in-port.
    let next = |s: usize, port: u8| -> Option<(usize, u8)> {
        if port == 0 || port > num_ports[s] {
            return None;
        }
        let slot = slot_base[s] + usize::from(port);
        let n = slot_next[slot];
        (n != NONE).then(|| (n as usize, slot_in[slot]))
    };

    if let Some(sl) = routes.sl.as_ref().filter(|sl| sl.hop_vls.is_some()) {
        let walk = Walk { f, routes, sl, sources: &sources, dlids: &dlids, has_end: &has_end, scope, next: &next };
        return walk.analyze();
    }

    // Tables are read one 64-LID block at a time for all switches, so the
    // walks below hit a block of S x 64 bytes instead of S tables spread
    // over memory.
    let mut ports = ChunkRows::new(ns);
    let mut sls = ChunkRows::new(ns);
    let mut marks: Vec<Vec<u32>> = Vec::new();
    let mut bits: Vec<Option<DepBits>> = (0..=MAX_DATA_VLS).map(|_| None).collect();
    let mut paths = [0u64; MAX_DATA_VLS + 1];
    let mut stamp = 0u32;
    let mut extra: Vec<(u32, u8)> = Vec::new();

    for &dlid in &dlids {
        stamp += 1;
        let j = ports.load(dlid, |s| routes.lfts.get(s).map(|l| l.ports.as_slice()), UNROUTED);
        if let Some(sl) = &routes.sl {
            sls.load(dlid, |s| sl.by_source_switch.get(s).map(Vec::as_slice), 0);
        }
        let owner = f.lid_owner(dlid);
        // Paths from source switches on their SL, then the further SLs some
        // of their ports use (per-port SLs read from an SA).
        extra.clear();
        if let Some(sl) = &routes.sl {
            extra.extend(
                sl.more_for(dlid)
                    .filter(|&(s, _)| (s as usize) < ns && (scope.include_switches || has_end[s as usize])),
            );
        }
        let walks = sources.iter().map(|&s| (s, None)).chain(extra.iter().map(|&(s, v)| (s, Some(v))));
        for (src, sl_override) in walks {
            if owner == Some(NodeRef::Switch(SwitchId(src))) {
                continue;
            }
            let vl = match (sl_override, &routes.sl) {
                (Some(v), _) => usize::from(v).min(MAX_DATA_VLS),
                (None, Some(_)) => usize::from(sls.get(src as usize, j)).min(MAX_DATA_VLS),
                (None, None) => 0,
            };
            paths[vl] += 1;
            while marks.len() <= vl {
                marks.push(vec![0; ns]);
            }
            let dep = bits[vl].get_or_insert_with(|| DepBits::new(f));
            let mark = &mut marks[vl];
            let mut cur = src as usize;
            while mark[cur] != stamp {
                mark[cur] = stamp;
                let Some((n, in_port)) = next(cur, ports.get(cur, j)) else { break };
                // The channel cur -> n is followed by n's channel onwards,
                // if n forwards to another switch.
                let out = ports.get(n, j);
                if next(n, out).is_some() {
                    dep.set(n, in_port, out);
                }
                cur = n;
            }
        }
    }

    let fabric_channels = f.switch_ids().map(|s| f.switch_neighbors(s).len()).sum();
    let mut vls = Vec::new();
    for (vl, b) in bits.iter().enumerate() {
        let Some(b) = b else { continue };
        let g = ChannelGraph::from_bits(f, b);
        let cycle = g.find_cycle().map(|c| g.shortest_cycle_through(c[0]).unwrap_or(c));
        vls.push(VlCdg {
            vl: vl as u8,
            paths: paths[vl],
            channels: g.active_channels(),
            dependencies: g.targets.len(),
            acyclic: cycle.is_none(),
            cycle: cycle.map(|c| c.into_iter().map(|slot| g.channel(f, slot)).collect()),
            cycle_vls: None,
        });
    }
    CdgReport { scope, fabric_channels, vls, hop_vls: false }
}

/// Appends the dependencies of `b` as (channel, channel) node pairs, the
/// first channel in layer `from_base`, the second in layer `to_base` (node =
/// base + slot).
fn push_edges(f: &RoutingFabric, b: &DepBits, from_base: u32, to_base: u32, edges: &mut Vec<(u32, u32)>) {
    for t in f.switch_ids() {
        for (in_port, out) in b.pairs(t.index()) {
            // The channel into t's in_port is the one leaving its peer.
            let Some(PortEnd::Switch(u, up)) = f.switch_peer(t, in_port) else { continue };
            edges.push((from_base + f.switch_port_slot(u, up) as u32, to_base + f.switch_port_slot(t, out) as u32));
        }
    }
}

/// The inputs of [`analyze_cdg`] when paths change VL per hop.
struct Walk<'a, N: Fn(usize, u8) -> Option<(usize, u8)>> {
    f: &'a RoutingFabric,
    routes: &'a Routes,
    sl: &'a PathSl,
    sources: &'a [u32],
    dlids: &'a [u16],
    has_end: &'a [bool],
    scope: CdgScope,
    next: &'a N,
}

impl<N: Fn(usize, u8) -> Option<(usize, u8)>> Walk<'_, N> {
    /// The (channel, VL) dependency graph; see the module documentation.
    fn analyze(&self) -> CdgReport {
        const VLS: usize = MAX_DATA_VLS + 1;
        let f = self.f;
        let hop = self.sl.hop_vls.as_ref().expect("only called with hop VLs");
        let ns = f.num_switches();
        let nslots = f.num_switch_port_slots();
        let slot_base: Vec<usize> = f.switch_ids().map(|s| f.switch_port_slot(s, 0)).collect();
        let num_ports: Vec<u8> = f.switches().iter().map(|s| s.num_ports).collect();
        let vl_of = |s: usize, in_port: u8, out: u8, sl: u8| {
            usize::from(hop.vl(SwitchId(s as u32), in_port, out, sl)).min(MAX_DATA_VLS)
        };

        let mut ports = ChunkRows::new(ns);
        let mut sls = ChunkRows::new(ns);
        // Dependencies from VL x to VL y: deps[x * VLS + y].
        let mut deps: Vec<Option<DepBits>> = (0..VLS * VLS).map(|_| None).collect();
        let mut paths = [0u64; VLS];
        // Per SL: the LID (stamp) each (switch, input port) state was last
        // walked for, and the VLs the rest of the path from it uses.
        let mut mark: Vec<Vec<u32>> = (0..VLS).map(|_| Vec::new()).collect();
        let mut rest: Vec<Vec<u16>> = (0..VLS).map(|_| Vec::new()).collect();
        let mut stamp = 0u32;
        let mut extra: Vec<(u32, u8)> = Vec::new();
        let mut trail: Vec<(usize, u16)> = Vec::new();

        for &dlid in self.dlids {
            stamp += 1;
            let j = ports.load(dlid, |s| self.routes.lfts.get(s).map(|l| l.ports.as_slice()), UNROUTED);
            sls.load(dlid, |s| self.sl.by_source_switch.get(s).map(Vec::as_slice), 0);
            let owner = f.lid_owner(dlid);
            extra.clear();
            extra.extend(
                self.sl
                    .more_for(dlid)
                    .filter(|&(s, _)| (s as usize) < ns && (self.scope.include_switches || self.has_end[s as usize])),
            );
            let walks = self.sources.iter().map(|&s| (s, None)).chain(extra.iter().map(|&(s, v)| (s, Some(v))));
            for (src, sl_override) in walks {
                if owner == Some(NodeRef::Switch(SwitchId(src))) {
                    continue;
                }
                let sl = sl_override.unwrap_or_else(|| sls.get(src as usize, j)) % VLS as u8;
                let (mark, rest) = (&mut mark[usize::from(sl)], &mut rest[usize::from(sl)]);
                if mark.is_empty() {
                    *mark = vec![0; nslots];
                    *rest = vec![0; nslots];
                }
                trail.clear();
                let mut tail = 0u16;
                let (mut cur, mut in_port) = (src as usize, 0u8);
                loop {
                    let state = slot_base[cur] + usize::from(in_port);
                    if mark[state] == stamp {
                        tail = rest[state];
                        break;
                    }
                    mark[state] = stamp;
                    rest[state] = 0;
                    let out = ports.get(cur, j);
                    if out == 0 || out > num_ports[cur] {
                        break;
                    }
                    let vl = vl_of(cur, in_port, out, sl);
                    trail.push((state, 1 << vl));
                    let Some((n, n_in)) = (self.next)(cur, out) else { break };
                    let n_out = ports.get(n, j);
                    if (self.next)(n, n_out).is_some() {
                        let vl2 = vl_of(n, n_in, n_out, sl);
                        deps[vl * VLS + vl2].get_or_insert_with(|| DepBits::new(f)).set(n, n_in, n_out);
                    }
                    (cur, in_port) = (n, n_in);
                }
                for &(state, bit) in trail.iter().rev() {
                    tail |= bit;
                    rest[state] = tail;
                }
                // A path with no hop at all (black-holed at its source)
                // counts on VL 0.
                let used = if tail == 0 { 1 } else { tail };
                for (vl, p) in paths.iter_mut().enumerate() {
                    *p += u64::from(used >> vl & 1);
                }
            }
        }

        // VLs in use, each a layer of `nslots` nodes in the whole graph.
        let used: Vec<usize> = (0..VLS)
            .filter(|&v| paths[v] > 0 || (0..VLS).any(|w| deps[v * VLS + w].is_some() || deps[w * VLS + v].is_some()))
            .collect();
        let mut layer = [u32::MAX; VLS];
        for (i, &v) in used.iter().enumerate() {
            layer[v] = (i * nslots) as u32;
        }
        let mut all_edges: Vec<(u32, u32)> = Vec::new();
        let mut vls = Vec::new();
        for &v in &used {
            let mut own = Vec::new();
            if let Some(b) = &deps[v * VLS + v] {
                push_edges(f, b, 0, 0, &mut own);
            }
            let g = ChannelGraph::from_edges(f, nslots, own);
            let cycle = g.find_cycle().map(|c| g.shortest_cycle_through(c[0]).unwrap_or(c));
            // Channels and dependencies leaving this VL, cross-VL ones too.
            let mut out_edges = Vec::new();
            for &w in &used {
                if let Some(b) = &deps[v * VLS + w] {
                    push_edges(f, b, 0, layer[w], &mut out_edges);
                }
            }
            out_edges.sort_unstable();
            out_edges.dedup();
            let mut channels: Vec<u32> = out_edges.iter().map(|e| e.0).collect();
            channels.dedup();
            vls.push(VlCdg {
                vl: v as u8,
                paths: paths[v],
                channels: channels.len(),
                dependencies: out_edges.len(),
                acyclic: cycle.is_none(),
                cycle: cycle.map(|c| c.into_iter().map(|slot| g.channel(f, slot)).collect()),
                cycle_vls: None,
            });
            all_edges.extend(out_edges.into_iter().map(|(a, b)| (a + layer[v], b)));
        }
        // Every VL acyclic alone: a cycle may still run through several.
        if vls.iter().all(|v| v.acyclic) {
            let g = ChannelGraph::from_edges(f, used.len() * nslots, all_edges);
            if let Some(c) = g.find_cycle().map(|c| g.shortest_cycle_through(c[0]).unwrap_or(c)) {
                let vl_at = |node: u32| used[node as usize / nslots] as u8;
                let on: Vec<u8> = c.iter().map(|&x| vl_at(x)).collect();
                for v in vls.iter_mut().filter(|v| on.contains(&v.vl)) {
                    v.acyclic = false;
                }
                let lowest = *on.iter().min().expect("a cycle has channels");
                let entry = vls.iter_mut().find(|v| v.vl == lowest).expect("a used VL");
                entry.cycle = Some(c.iter().map(|&x| g.channel(f, x)).collect());
                entry.cycle_vls = Some(on);
            }
        }
        let fabric_channels = f.switch_ids().map(|s| f.switch_neighbors(s).len()).sum();
        CdgReport { scope: self.scope, fabric_channels, vls, hop_vls: true }
    }
}

/// A channel graph in CSR form; nodes are switch-port slots
/// ([`RoutingFabric::switch_port_slot`]).
struct ChannelGraph {
    start: Vec<u32>,
    targets: Vec<u32>,
    /// Slot -> (switch, port), for printing.
    owner: Vec<(u32, u8)>,
}

impl ChannelGraph {
    fn from_bits(f: &RoutingFabric, b: &DepBits) -> ChannelGraph {
        let n = f.num_switch_port_slots();
        let mut edges: Vec<(u32, u32)> = Vec::new();
        push_edges(f, b, 0, 0, &mut edges);
        ChannelGraph::from_edges(f, n, edges)
    }

    /// A graph over `n` nodes, node `v` standing for slot
    /// `v % num_switch_port_slots` (several VL layers side by side).
    fn from_edges(f: &RoutingFabric, n: usize, mut edges: Vec<(u32, u32)>) -> ChannelGraph {
        let mut owner = vec![(0u32, 0u8); f.num_switch_port_slots()];
        for s in f.switch_ids() {
            for p in 0..=f.switch(s).num_ports {
                owner[f.switch_port_slot(s, p)] = (s.0, p);
            }
        }
        edges.sort_unstable();
        edges.dedup();
        let mut start = vec![0u32; n + 1];
        for &(a, _) in &edges {
            start[a as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        ChannelGraph { start, targets: edges.into_iter().map(|(_, b)| b).collect(), owner }
    }

    fn succ(&self, v: u32) -> &[u32] {
        &self.targets[self.start[v as usize] as usize..self.start[v as usize + 1] as usize]
    }

    fn active_channels(&self) -> usize {
        self.start.windows(2).filter(|w| w[1] > w[0]).count()
    }

    fn channel(&self, f: &RoutingFabric, node: u32) -> Channel {
        let (s, p) = self.owner[node as usize % self.owner.len()];
        let s = SwitchId(s);
        let (to, to_port) = match f.switch_peer(s, p) {
            Some(PortEnd::Switch(n, rp)) => (f.switch(n).guid, rp),
            _ => (0, 0),
        };
        Channel { from: f.switch(s).guid, from_port: p, to, to_port }
    }

    /// One cycle (as slots in dependency order), by iterative DFS.
    fn find_cycle(&self) -> Option<Vec<u32>> {
        const WHITE: u8 = 0;
        const GRAY: u8 = 1;
        const BLACK: u8 = 2;
        let n = self.start.len() - 1;
        let mut color = vec![WHITE; n];
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for root in 0..n as u32 {
            if color[root as usize] != WHITE || self.succ(root).is_empty() {
                continue;
            }
            color[root as usize] = GRAY;
            stack.push((root, self.start[root as usize]));
            while let Some(&mut (v, ref mut next)) = stack.last_mut() {
                if *next == self.start[v as usize + 1] {
                    color[v as usize] = BLACK;
                    stack.pop();
                    continue;
                }
                let w = self.targets[*next as usize];
                *next += 1;
                match color[w as usize] {
                    WHITE => {
                        color[w as usize] = GRAY;
                        stack.push((w, self.start[w as usize]));
                    }
                    GRAY => {
                        let pos = stack.iter().rposition(|&(x, _)| x == w).expect("a gray node is on the stack");
                        return Some(stack[pos..].iter().map(|&(x, _)| x).collect());
                    }
                    _ => {}
                }
            }
        }
        None
    }

    /// The shortest cycle through `v` (BFS from `v` back to `v`).
    fn shortest_cycle_through(&self, v: u32) -> Option<Vec<u32>> {
        let n = self.start.len() - 1;
        let mut parent = vec![u32::MAX; n];
        let mut queue = std::collections::VecDeque::new();
        queue.push_back(v);
        while let Some(u) = queue.pop_front() {
            for &w in self.succ(u) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lft::HopVls;
    use crate::minhop::minhop;
    use crate::testfab;

    #[test]
    fn dfs_and_bfs_agree_on_a_small_graph() {
        // 0 -> 1 -> 2 -> 0 and 2 -> 3 (slots stand in for channels).
        let g = ChannelGraph {
            start: vec![0, 1, 2, 4, 4],
            targets: vec![1, 2, 0, 3],
            owner: vec![(0, 1), (0, 2), (0, 3), (0, 4)],
        };
        let c = g.find_cycle().unwrap();
        assert_eq!(c, vec![0, 1, 2]);
        assert_eq!(g.shortest_cycle_through(1).unwrap(), vec![1, 2, 0]);
        assert_eq!(g.shortest_cycle_through(3), None);
        let dag = ChannelGraph { start: vec![0, 1, 2, 2], targets: vec![1, 2], owner: vec![(0, 1); 3] };
        assert_eq!(dag.find_cycle(), None);
    }

    #[test]
    fn a_single_switch_has_no_channels() {
        let f = testfab::single_switch(4);
        let rep = analyze_cdg(&f, &minhop(&f).unwrap(), CdgScope::default());
        assert_eq!(rep.fabric_channels, 0);
        assert!(rep.deadlock_free());
        assert_eq!(rep.vls.len(), 1);
        assert_eq!(rep.vls[0].dependencies, 0);
        // 4 hosts on one switch: every path stays inside it.
        assert_eq!(rep.vls[0].paths, 4);
    }

    #[test]
    fn sls_split_paths_over_vls() {
        // Five switches: every two-hop path has one shortest direction, so
        // minhop's paths chain all the way round.
        let f = testfab::ring(5, 1);
        let mut r = minhop(&f).unwrap();
        let top = usize::from(f.max_lid()) + 1;
        // Every path on SL 3: the same graph, on VL3 instead of VL0.
        r.sl = Some(PathSl::per_switch(vec![vec![3; top]; f.num_switches()]));
        let rep = analyze_cdg(&f, &r, CdgScope::default());
        assert_eq!(rep.vls.len(), 1);
        assert_eq!(rep.vls[0].vl, 3);
        assert!(!rep.vls[0].acyclic);

        // A second port of switch 0 sending to the first host's LID on SL 5
        // (per-port SLs, as an SA answers them): one more path, on VL5, alone
        // there and so acyclic.
        let dlid = f.end_port(f.end_port_ids().next().unwrap()).base_lid;
        let s0 = f.switch_ids().find(|&s| f.lid_owner(dlid).is_some_and(|o| o != NodeRef::Switch(s))).unwrap();
        let mut sl = r.sl.take().unwrap();
        sl.more = vec![(dlid, s0.0, 5)];
        r.sl = Some(sl);
        let rep = analyze_cdg(&f, &r, CdgScope::default());
        assert_eq!(rep.vls.iter().map(|v| v.vl).collect::<Vec<_>>(), vec![3, 5]);
        assert_eq!(rep.vls[1].paths, 1);
        assert!(rep.vls[1].acyclic && !rep.vls[0].acyclic);
    }

    /// Minhop on a 5-ring with one host per switch: every path is on SL 0.
    fn ring5() -> (RoutingFabric, Routes) {
        let f = testfab::ring(5, 1);
        let mut r = minhop(&f).unwrap();
        let top = usize::from(f.max_lid()) + 1;
        r.sl = Some(PathSl::per_switch(vec![vec![0; top]; f.num_switches()]));
        (f, r)
    }

    #[test]
    fn hop_vls_break_the_ring_cycle_one_vl_has() {
        let (f, mut r) = ring5();
        let single = analyze_cdg(&f, &r, CdgScope::default());
        assert!(!single.deadlock_free() && !single.hop_vls);

        // A dateline at switch 0: a packet that arrived over a cable from
        // switch 0 goes on on VL 1, in both directions. What enters at a
        // host or the switch itself stays on VL 0.
        let s0 = SwitchId(0);
        let mut h = HopVls::new(&f);
        for e in f.switch_neighbors(s0) {
            for out in [1u8, 2] {
                h.set(e.neighbor, e.remote_port, out, [1; 16]);
            }
        }
        r.sl.as_mut().unwrap().hop_vls = Some(h);
        let rep = analyze_cdg(&f, &r, CdgScope::default());
        assert!(rep.deadlock_free() && rep.hop_vls, "{rep}");
        assert_eq!(rep.vls.iter().map(|v| v.vl).collect::<Vec<_>>(), vec![0, 1]);
        // 5 x 5 paths (the local ones too) all start on VL 0; the two-hop
        // ones through a neighbour of switch 0 that came from it (0->1->2
        // and 0->4->3) also use VL 1.
        assert_eq!(rep.vls[0].paths, 25);
        assert_eq!(rep.vls[1].paths, 2);
        // Their dependencies: from VL 0 (the cable out of switch 0) to VL 1.
        assert_eq!(rep.vls[0].dependencies, single.vls[0].dependencies);
        assert_eq!(rep.vls[1].dependencies, 0);
    }

    #[test]
    fn a_cycle_through_two_vls_is_found() {
        // Everything switch 2 sends on goes on VL 1: VL 0 alone and VL 1
        // alone are acyclic, but (c1, VL0) -> (c2, VL1) -> (c3, VL0) -> ...
        // still closes the ring.
        let (f, mut r) = ring5();
        let mut h = HopVls::new(&f);
        for i in 0..=f.switch(SwitchId(2)).num_ports {
            for out in [1u8, 2] {
                h.set(SwitchId(2), i, out, [1; 16]);
            }
        }
        r.sl.as_mut().unwrap().hop_vls = Some(h);
        let rep = analyze_cdg(&f, &r, CdgScope::default());
        assert!(!rep.deadlock_free(), "{rep}");
        let v0 = &rep.vls[0];
        let (cycle, vls) = (v0.cycle.as_ref().unwrap(), v0.cycle_vls.as_ref().unwrap());
        assert_eq!(cycle.len(), 5);
        assert_eq!(vls.iter().filter(|&&v| v == 1).count(), 1, "{vls:?}");
        let g2 = f.switch(SwitchId(2)).guid;
        let at = vls.iter().position(|&v| v == 1).unwrap();
        assert_eq!(cycle[at].from, g2);
        assert!(rep.to_string().contains("VL1 (0x"), "{rep}");
        assert!(!rep.vls[1].acyclic && rep.vls[1].cycle.is_none());
    }
}
