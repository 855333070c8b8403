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
//! a bit set over the dependency index of [`crate::channels`] (in-channel ×
//! out-channel per switch), which dedupes them for free in Σ deg² bits per
//! VL. Cycle detection is that module's iterative depth-first search, O(C +
//! D) for C channels and D dependencies; a cycle found is then shortened to
//! a shortest cycle through one of its channels by a breadth-first search.
//!
//! 1,620 switches and 13,000 LIDs (the 11,664-host three-level fat tree)
//! take about 21 M switch visits per VL.

use std::fmt;

use serde::Serialize;

use crate::channels::{find_short_cycle, ChannelGraph, DepGraph, DepSet, PortHops, SelfLoops, Successors, NO_CHANNEL};
use crate::fabric::{NodeRef, RoutingFabric, SwitchId};
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

    // Self-loops count: tables may route over them.
    let ch = ChannelGraph::in_fabric_order(f, SelfLoops::Keep);

    if let Some(sl) = routes.sl.as_ref().filter(|sl| sl.hop_vls.is_some()) {
        let walk = Walk { f, ch: &ch, routes, sl, sources: &sources, dlids: &dlids, has_end: &has_end, scope };
        return walk.analyze();
    }

    let hops = PortHops::new(&ch);
    // Tables are read one 64-LID block at a time for all switches, so the
    // walks below hit a block of S x 64 bytes instead of S tables spread
    // over memory.
    let mut ports = ChunkRows::new(ns);
    let mut sls = ChunkRows::new(ns);
    let mut marks: Vec<Vec<u32>> = Vec::new();
    let mut bits: Vec<Option<DepSet>> = (0..=MAX_DATA_VLS).map(|_| None).collect();
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
            let dep = bits[vl].get_or_insert_with(|| DepSet::new(&ch));
            let mark = &mut marks[vl];
            let mut cur = src as usize;
            let mut hop = hops.get(cur, ports.get(cur, j));
            while mark[cur] != stamp {
                mark[cur] = stamp;
                if hop.next == NO_CHANNEL {
                    break;
                }
                // The channel cur -> n is followed by n's channel onwards,
                // if n forwards to another switch.
                let n = hop.next as usize;
                let onward = hops.get(n, ports.get(n, j));
                if onward.next != NO_CHANNEL {
                    dep.insert(hop.row as usize + usize::from(onward.col));
                }
                (cur, hop) = (n, onward);
            }
        }
    }

    let mut vls = Vec::new();
    for (vl, b) in bits.iter().enumerate() {
        let Some(b) = b else { continue };
        let cycle = find_short_cycle(&DepGraph { g: &ch, has: |e| b.contains(e) });
        vls.push(VlCdg {
            vl: vl as u8,
            paths: paths[vl],
            channels: b.channels_out(&ch),
            dependencies: b.len(),
            acyclic: cycle.is_none(),
            cycle: cycle.map(|c| c.into_iter().map(|x| channel(f, &ch, x)).collect()),
            cycle_vls: None,
        });
    }
    CdgReport { scope, fabric_channels: ch.num_channels(), vls, hop_vls: false }
}

/// Channel `c` of `ch` (numbered in the fabric's order) by GUIDs and ports.
fn channel(f: &RoutingFabric, ch: &ChannelGraph, c: u32) -> Channel {
    let c = c as usize;
    let guid = |v: u32| f.switch(SwitchId(v)).guid;
    Channel { from: guid(ch.tail[c]), from_port: ch.port[c], to: guid(ch.head[c]), to_port: ch.port[ch.reverse(c)] }
}

/// The inputs of [`analyze_cdg`] when paths change VL per hop.
struct Walk<'a> {
    f: &'a RoutingFabric,
    ch: &'a ChannelGraph,
    routes: &'a Routes,
    sl: &'a PathSl,
    sources: &'a [u32],
    dlids: &'a [u16],
    has_end: &'a [bool],
    scope: CdgScope,
}

impl Walk<'_> {
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
        let ch = self.ch;
        let mut deps: Vec<Option<DepSet>> = (0..VLS * VLS).map(|_| None).collect();
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
                    let c = ch.chan_of_port(cur, out);
                    if c == NO_CHANNEL {
                        break;
                    }
                    let (n, n_in) = (ch.head[c as usize] as usize, ch.port[ch.reverse(c as usize)]);
                    let n_out = ports.get(n, j);
                    let onward = ch.chan_of_port(n, n_out);
                    if onward != NO_CHANNEL {
                        let vl2 = vl_of(n, n_in, n_out, sl);
                        deps[vl * VLS + vl2]
                            .get_or_insert_with(|| DepSet::new(ch))
                            .insert(ch.dep(c as usize, onward as usize));
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

        // VLs in use, each a layer of the channels in the whole graph.
        let used: Vec<usize> = (0..VLS)
            .filter(|&v| paths[v] > 0 || (0..VLS).any(|w| deps[v * VLS + w].is_some() || deps[w * VLS + v].is_some()))
            .collect();
        let nch = ch.num_channels();
        let mut vls = Vec::new();
        for &v in &used {
            let own = deps[v * VLS + v].as_ref();
            let cycle = find_short_cycle(&DepGraph { g: ch, has: |e| own.is_some_and(|b| b.contains(e)) });
            // Channels and dependencies leaving this VL, cross-VL ones too.
            let out: Vec<&DepSet> = used.iter().filter_map(|&w| deps[v * VLS + w].as_ref()).collect();
            let channels = (0..nch)
                .filter(|&c| {
                    let row = ch.dep_row(c);
                    (0..ch.degree(ch.head[c] as usize)).any(|j| out.iter().any(|b| b.contains(row + j)))
                })
                .count();
            vls.push(VlCdg {
                vl: v as u8,
                paths: paths[v],
                channels,
                dependencies: out.iter().map(|b| b.len()).sum(),
                acyclic: cycle.is_none(),
                cycle: cycle.map(|c| c.into_iter().map(|x| channel(f, ch, x)).collect()),
                cycle_vls: None,
            });
        }
        // Every VL acyclic alone: a cycle may still run through several.
        if vls.iter().all(|v| v.acyclic) {
            let whole = Layered { ch, used: &used, deps: &deps };
            if let Some(c) = find_short_cycle(&whole) {
                let vl_at = |node: u32| used[node as usize / nch] as u8;
                let on: Vec<u8> = c.iter().map(|&x| vl_at(x)).collect();
                for v in vls.iter_mut().filter(|v| on.contains(&v.vl)) {
                    v.acyclic = false;
                }
                let lowest = *on.iter().min().expect("a cycle has channels");
                let entry = vls.iter_mut().find(|v| v.vl == lowest).expect("a used VL");
                entry.cycle = Some(c.iter().map(|&x| channel(f, ch, x % nch as u32)).collect());
                entry.cycle_vls = Some(on);
            }
        }
        CdgReport { scope: self.scope, fabric_channels: nch, vls, hop_vls: true }
    }
}

/// The (channel, VL) graph: node `i * C + c` is channel `c` on the `i`-th
/// VL in use; successors by VL, then by port.
struct Layered<'a> {
    ch: &'a ChannelGraph,
    used: &'a [usize],
    /// Dependencies from VL x to VL y at `x * VLS + y`.
    deps: &'a [Option<DepSet>],
}

impl Successors for Layered<'_> {
    fn nodes(&self) -> usize {
        self.used.len() * self.ch.num_channels()
    }

    fn next_from(&self, node: u32, at: &mut u32) -> Option<u32> {
        const VLS: usize = MAX_DATA_VLS + 1;
        let nch = self.ch.num_channels();
        let (layer, c) = (node as usize / nch, node as usize % nch);
        let v = self.ch.head[c] as usize;
        let deg = self.ch.degree(v);
        let row = self.ch.dep_row(c);
        let from = self.used[layer] * VLS;
        while (*at as usize) < self.used.len() * deg {
            let (to, j) = (*at as usize / deg, *at as usize % deg);
            *at += 1;
            if self.deps[from + self.used[to]].as_ref().is_some_and(|b| b.contains(row + j)) {
                return Some((to * nch + self.ch.base[v] as usize + j) as u32);
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
