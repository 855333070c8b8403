//! Multicast routing: one spanning tree per multicast group, spread over
//! the fabric's links, and a checker that floods packets through the
//! resulting tables.
//!
//! A group is an MLID and its members: end ports, or switches' port 0 (an
//! SM running on a switch). The result is, per switch and MLID, the set of
//! ports a packet for that MLID leaves by ([`McastRoutes::ports`]). A switch
//! floods a multicast packet out of every port of the set except the one it
//! came in on, so a set of ports that forms a tree delivers every packet to
//! every member exactly once and can never loop.
//!
//! # One tree per group
//! 1. **Root.** The switch whose farthest member switch is nearest (the
//!    smallest maximum hop count, OpenSM's criterion), which keeps every
//!    member-to-member path within twice that radius. Members the root
//!    cannot reach are reported ([`McastProblem::Unreachable`]) and the
//!    root is chosen to reach as many members as possible first.
//! 2. **Paths.** A breadth-first search from the root gives every switch its
//!    distance. Member switches, farthest first, each pick one cable to a
//!    neighbour one hop nearer the root; that neighbour joins the tree and
//!    picks in turn. Every tree switch but the root has exactly one parent
//!    cable, so the union is a tree made of shortest paths from the root.
//! 3. **Ports.** A tree switch's set is its parent cable, its child cables,
//!    and the ports of members hanging off it (port 0 for the switch
//!    itself).
//!
//! # Spreading: the cost model
//! The routes keep one counter per cable between switches: the groups
//! whose tree uses it (`link_load`, held at both ends of the cable).
//! Choices among equals go, in order, to:
//! - root: fewest unreachable members, then smallest maximum hop count
//!   (only those roots are candidates: a tree is never made deeper to
//!   spread load), then the group's previous root (a membership change
//!   keeps its tree where it was), then the candidate whose busiest cable
//!   carries the fewest trees, then the fewest trees over all its cables,
//!   then the smallest sum of hop counts to the member switches, then the
//!   lowest GUID;
//! - parent cable of a switch: a cable the group's previous tree used
//!   (stability again), then a neighbour already in the tree (shared paths
//!   keep the tree small), then the least `link_load`, then the lowest
//!   neighbour GUID and port.
//!
//! On a fat tree every top switch has the same maximum hop count to a group
//! spanning several pods, so successive groups take the least loaded top
//! switch and the groups are dealt out over the spines. Measured with the
//! ignored test `measure_spread` (command in its doc; groups of 2 to 64
//! random hosts plus one group of every host), most groups on one cable:
//! 2-level radix 8 (4 spines), 64 groups: 16 (mean over used cable ends
//! 14.7); 2-level radix 36 (18 spines, 648 hosts), 1,000 groups: 39 (mean
//! 31.5); 3-level radix 36 (11,664 hosts), 1,000 groups: 10 (mean 2.5),
//! the groups rooted at all 324 top switches.
//!
//! # Incremental use
//! [`McastRoutes::route_groups`] replaces the trees of the given groups
//! only: a group's old tree is taken out (its load subtracted) before its
//! new one is built, and the other groups stay as they are. The answer
//! names the switches whose tables changed, for the MFT planner.
//! [`McastRoutes::remove_group`] drops a tree. A `McastRoutes` belongs to
//! the fabric it was made for (a fingerprint of its switches, end ports and
//! cables is checked): after a topology change make a new one and route
//! every group again. Results depend only on the fabric, the groups and
//! the order of the calls; ties are broken by GUID and port, never by the
//! order the fabric lists switches in, so the same cabling gives the same
//! trees after an SM failover that discovered it in another order.
//!
//! # Cost
//! With S switches, E cables between switches, M distinct member switches
//! in a group and T switches in its tree:
//! - root: O(M·S) over a cache of hop counts from member switches (one
//!   breadth-first search per switch the first time it holds a member,
//!   O(S + E) each; at most S·S bytes over the routes' life, only for rows
//!   used), plus O(k·P) for the k candidates tied on hop counts, P ports
//!   each;
//! - tree: one breadth-first search from the root, O(S + E), then
//!   O(T·d + T log T) for d cables per switch;
//! - tables: O(T log G) for G groups per switch.
//!
//! Memory: per switch a `BTreeMap<u16, PortSet>` of the MLIDs whose tree
//! holds it (32-byte port sets), per group the list of its tree switches,
//! per switch port one load counter.
//!
//! `measure_spread` (a debug build, this machine): 1,000 groups on the
//! 11,664-host 3-level tree route in 1.6 s, one leave re-routes in 12 ms.
//!
//! # What is not modelled
//! Switches that cannot forward multicast (SwitchInfo.MulticastFDBCap 0)
//! are not known to the routing view and may be chosen; the MFT planner
//! skips MLIDs beyond a switch's capacity.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};

use thiserror::Error;

use crate::fabric::{EndPortId, NodeRef, PortEnd, RoutingFabric, SwitchId};

/// The first multicast LID (IBA 4.1.3: 0xC000..=0xFFFE; 0xFFFF is the
/// permissive LID).
pub const MLID_MIN: u16 = 0xC000;
/// The last multicast LID.
pub const MLID_MAX: u16 = 0xFFFE;

/// A set of switch ports 0..=255 (port 0 = the switch itself), one bit per
/// port.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct PortSet([u64; 4]);

impl PortSet {
    pub const EMPTY: PortSet = PortSet([0; 4]);

    pub fn insert(&mut self, port: u8) {
        self.0[usize::from(port >> 6)] |= 1 << (port & 63);
    }

    pub fn remove(&mut self, port: u8) {
        self.0[usize::from(port >> 6)] &= !(1 << (port & 63));
    }

    pub fn contains(self, port: u8) -> bool {
        self.0[usize::from(port >> 6)] >> (port & 63) & 1 == 1
    }

    pub fn is_empty(self) -> bool {
        self.0 == [0; 4]
    }

    pub fn len(self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The ports in increasing order.
    pub fn iter(self) -> impl Iterator<Item = u8> {
        (0..4usize).flat_map(move |w| {
            let mut bits = self.0[w];
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some((w as u32 * 64 + b) as u8)
            })
        })
    }

    /// The highest port in the set.
    pub fn max_port(self) -> Option<u8> {
        (0..4usize).rev().find(|&w| self.0[w] != 0).map(|w| (w as u32 * 64 + 63 - self.0[w].leading_zeros()) as u8)
    }

    /// Ports `position*16 ..= position*16 + 15` as a 16-bit mask, bit `i`
    /// for port `position*16 + i`: the PortMask of one MFT entry (IBA
    /// 14.2.5.12). Positions past 15 are empty.
    pub fn mask16(self, position: u8) -> u16 {
        if position > 15 {
            return 0;
        }
        (self.0[usize::from(position / 4)] >> (16 * u32::from(position % 4))) as u16
    }

    /// Sets ports `position*16 ..` from a 16-bit MFT PortMask (the inverse
    /// of [`PortSet::mask16`]); positions past 15 are ignored.
    pub fn set_mask16(&mut self, position: u8, mask: u16) {
        if position > 15 {
            return;
        }
        let shift = 16 * u32::from(position % 4);
        let w = &mut self.0[usize::from(position / 4)];
        *w = (*w & !(0xffff << shift)) | u64::from(mask) << shift;
    }
}

impl FromIterator<u8> for PortSet {
    fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Self {
        let mut s = PortSet::EMPTY;
        for p in iter {
            s.insert(p);
        }
        s
    }
}

impl fmt::Debug for PortSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// A member of a multicast group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum McastMember {
    /// A CA or router port.
    Port(EndPortId),
    /// A switch's management port 0 (e.g. an SM on the switch).
    Switch(SwitchId),
}

/// A multicast group to route: its MLID and who is in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastGroup {
    pub mlid: u16,
    pub members: Vec<McastMember>,
}

impl McastGroup {
    pub fn new(mlid: u16, members: Vec<McastMember>) -> McastGroup {
        McastGroup { mlid, members }
    }
}

/// What routing could not do for a group; the rest of the group is routed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum McastProblem {
    #[error("MLID {mlid:#06x} is not a multicast LID (0xc000..=0xfffe); group not routed")]
    BadMlid { mlid: u16 },
    #[error("MLID {mlid:#06x} is given twice in one call; the first is routed")]
    DuplicateMlid { mlid: u16 },
    #[error("MLID {mlid:#06x}: member {member:?} is not in this fabric")]
    UnknownMember { mlid: u16, member: McastMember },
    #[error("MLID {mlid:#06x}: end port {port_guid:#018x} is not cabled to a switch")]
    NotOnSwitch { mlid: u16, port_guid: u64 },
    /// The member's switch is not connected to the tree's root.
    #[error(
        "MLID {mlid:#06x}: member {member:?} on switch {switch_guid:#018x} is unreachable from root {root_guid:#018x}"
    )]
    Unreachable { mlid: u16, member: McastMember, switch_guid: u64, root_guid: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum McastError {
    /// The fabric is not the one these routes were made for: their load
    /// counters and cached distances index its switches and ports.
    #[error("the fabric changed since these multicast routes were made; route every group on a new McastRoutes")]
    FabricChanged,
}

/// A group's tree: its root and the switches whose tables hold its MLID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McastTree {
    pub root: SwitchId,
    /// Sorted by index.
    pub switches: Vec<SwitchId>,
    /// Each switch's port towards the root, in `switches`' order (0 for
    /// the root).
    pub parent_ports: Vec<u8>,
}

/// Another router's tree for a group ([`McastRoutes::hint_trees`]): its
/// root, and each other tree switch with its port towards the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeHint {
    pub root: Option<SwitchId>,
    pub parents: Vec<(SwitchId, u8)>,
}

/// What one [`McastRoutes::route_groups`] call changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McastUpdate {
    /// Switches whose entry for at least one routed MLID changed, sorted.
    pub touched: Vec<SwitchId>,
    pub problems: Vec<McastProblem>,
}

/// Multicast routes of one fabric, with the load counters that spread the
/// next groups (see the module docs).
#[derive(Debug, Clone)]
pub struct McastRoutes {
    fingerprint: u64,
    /// Per switch (fabric index), MLID -> ports.
    tables: Vec<BTreeMap<u16, PortSet>>,
    trees: BTreeMap<u16, McastTree>,
    /// Slot of port 0 of each switch in the per-port arrays (+ total).
    port_base: Vec<u32>,
    /// Per switch port: cabled to a switch.
    isl: Vec<bool>,
    /// Per switch port: trees using the cable there (counted at both ends).
    link_load: Vec<u32>,
    /// Hop counts from member switches, computed on first use; empty = not
    /// yet. 255 = unreachable, longer paths saturate at 254.
    dist_rows: Vec<Vec<u8>>,
    /// Trees to prefer for groups without one yet ([`Self::hint_trees`]).
    hints: HashMap<u16, TreeHint>,
}

const UNREACHED: u8 = u8::MAX;

/// A hash of everything the routes index: switch GUIDs and port counts,
/// every switch port's peer, end-port GUIDs and their peers. O(S·P + H).
fn fingerprint(f: &RoutingFabric) -> u64 {
    let mut h = DefaultHasher::new();
    f.num_switches().hash(&mut h);
    for s in f.switch_ids() {
        f.switch(s).guid.hash(&mut h);
        f.switch_ports(s).hash(&mut h);
    }
    f.num_end_ports().hash(&mut h);
    for e in f.end_port_ids() {
        f.end_port(e).port_guid.hash(&mut h);
        f.end_peer(e).hash(&mut h);
    }
    h.finish()
}

/// Routes `groups` on a fresh [`McastRoutes`] (in MLID order).
pub fn route_mcast(fabric: &RoutingFabric, groups: &[McastGroup]) -> (McastRoutes, McastUpdate) {
    let mut routes = McastRoutes::new(fabric);
    let update = routes.route_groups(fabric, groups).expect("routes made for this very fabric");
    (routes, update)
}

/// Scratch of one group's routing.
struct Build {
    /// Per switch: the group's old ports, its new ports.
    old: Vec<PortSet>,
    new: Vec<PortSet>,
    /// Per switch: a hinted tree's parent port (preferred as an old port
    /// is, but not what the tables held).
    prefer: Vec<PortSet>,
    in_tree: Vec<bool>,
    /// Per switch: its port towards the root in the new tree.
    parent: Vec<u8>,
}

impl McastRoutes {
    /// No groups yet, for `fabric`. O(S·P + H).
    pub fn new(fabric: &RoutingFabric) -> McastRoutes {
        let ns = fabric.num_switches();
        let mut port_base = Vec::with_capacity(ns + 1);
        let mut isl = Vec::with_capacity(fabric.num_switch_port_slots());
        for s in fabric.switch_ids() {
            port_base.push(isl.len() as u32);
            isl.extend(fabric.switch_ports(s).iter().map(|p| matches!(p, Some(PortEnd::Switch(..)))));
        }
        port_base.push(isl.len() as u32);
        McastRoutes {
            fingerprint: fingerprint(fabric),
            tables: vec![BTreeMap::new(); ns],
            trees: BTreeMap::new(),
            link_load: vec![0; isl.len()],
            port_base,
            isl,
            dist_rows: vec![Vec::new(); ns],
            hints: HashMap::new(),
        }
    }

    /// Another router's trees for groups these routes have none for yet:
    /// routing such a group prefers that root and those parent cables as it
    /// would its own previous tree's (among the choices the cost model
    /// ties). A new master given the old master's trees builds the ones the
    /// switches already hold, whatever order the old master routed the
    /// groups in, as long as the members and cables are the same. Used
    /// once per group; switches not in the fabric are ignored.
    pub fn hint_trees(&mut self, hints: impl IntoIterator<Item = (u16, TreeHint)>) {
        let ns = self.tables.len();
        for (mlid, mut hint) in hints {
            hint.root = hint.root.filter(|r| r.index() < ns);
            hint.parents.retain(|(s, _)| s.index() < ns);
            self.hints.insert(mlid, hint);
        }
    }

    /// Whether these routes were made for `fabric`.
    pub fn is_for(&self, fabric: &RoutingFabric) -> bool {
        self.fingerprint == fingerprint(fabric)
    }

    /// The ports switch `s` sends `mlid` out of (empty when its tree does
    /// not hold `s`, or `s` is no switch of the fabric).
    pub fn ports(&self, s: SwitchId, mlid: u16) -> PortSet {
        self.tables.get(s.index()).and_then(|t| t.get(&mlid)).copied().unwrap_or_default()
    }

    /// Switch `s`'s multicast table: MLID -> ports (empty for an unknown
    /// switch).
    pub fn table(&self, s: SwitchId) -> &BTreeMap<u16, PortSet> {
        static EMPTY: BTreeMap<u16, PortSet> = BTreeMap::new();
        self.tables.get(s.index()).unwrap_or(&EMPTY)
    }

    /// The tree of `mlid`, if it has one.
    pub fn tree(&self, mlid: u16) -> Option<&McastTree> {
        self.trees.get(&mlid)
    }

    /// Every routed group's tree, by MLID.
    pub fn trees(&self) -> impl Iterator<Item = (u16, &McastTree)> + '_ {
        self.trees.iter().map(|(&m, t)| (m, t))
    }

    /// Trees using the cable at switch `s` port `port` (0 for a port that
    /// is not cabled to a switch).
    pub fn link_load(&self, s: SwitchId, port: u8) -> u32 {
        let Some(&base) = self.port_base.get(s.index()) else { return 0 };
        let slot = base as usize + usize::from(port);
        if slot < self.port_base[s.index() + 1] as usize {
            self.link_load[slot]
        } else {
            0
        }
    }

    /// The most trees any cable between switches carries.
    pub fn max_link_load(&self) -> u32 {
        self.link_load.iter().copied().max().unwrap_or(0)
    }

    /// Routes every group in `groups` (in MLID order), replacing the trees
    /// they had and keeping every other group's. A group without reachable
    /// members ends up with no tree.
    pub fn route_groups(&mut self, fabric: &RoutingFabric, groups: &[McastGroup]) -> Result<McastUpdate, McastError> {
        if !self.is_for(fabric) {
            return Err(McastError::FabricChanged);
        }
        let mut update = McastUpdate::default();
        let mut order: Vec<&McastGroup> = groups.iter().collect();
        order.sort_by_key(|g| g.mlid);
        let ns = fabric.num_switches();
        let mut b = Build {
            old: vec![PortSet::EMPTY; ns],
            new: vec![PortSet::EMPTY; ns],
            prefer: vec![PortSet::EMPTY; ns],
            in_tree: vec![false; ns],
            parent: vec![0; ns],
        };
        let mut touched = BTreeSet::new();
        let mut prev = None;
        for g in order {
            if prev == Some(g.mlid) {
                update.problems.push(McastProblem::DuplicateMlid { mlid: g.mlid });
                continue;
            }
            prev = Some(g.mlid);
            if !(MLID_MIN..=MLID_MAX).contains(&g.mlid) {
                update.problems.push(McastProblem::BadMlid { mlid: g.mlid });
                continue;
            }
            self.route_group(fabric, g, &mut b, &mut touched, &mut update.problems);
        }
        update.touched = touched.into_iter().collect();
        Ok(update)
    }

    /// Drops the tree of `mlid` and its load; returns the switches whose
    /// tables held it, sorted.
    pub fn remove_group(&mut self, mlid: u16) -> Vec<SwitchId> {
        let mut out = Vec::new();
        self.take_tree(mlid, |s, _| out.push(s));
        out
    }

    /// Takes `mlid`'s tree out of the tables and the load counters, calling
    /// `each` with every switch and the ports it had.
    fn take_tree(&mut self, mlid: u16, mut each: impl FnMut(SwitchId, PortSet)) -> Option<SwitchId> {
        let tree = self.trees.remove(&mlid)?;
        for &s in &tree.switches {
            let ports = self.tables[s.index()].remove(&mlid).unwrap_or_default();
            let base = self.port_base[s.index()] as usize;
            for p in ports.iter() {
                if self.isl[base + usize::from(p)] {
                    self.link_load[base + usize::from(p)] -= 1;
                }
            }
            each(s, ports);
        }
        Some(tree.root)
    }

    /// Hop counts from `s` to every switch, cached.
    fn dist_row(&mut self, f: &RoutingFabric, s: SwitchId, dist: &mut Vec<u32>, queue: &mut Vec<u32>) {
        if !self.dist_rows[s.index()].is_empty() {
            return;
        }
        f.switch_distances(s, dist, queue);
        self.dist_rows[s.index()] =
            dist.iter().map(|&d| if d == u32::MAX { UNREACHED } else { d.min(254) as u8 }).collect();
    }

    /// The root for member switches `msw` (module docs, "Spreading").
    /// O(M·S) once the rows are cached.
    fn choose_root(&mut self, f: &RoutingFabric, msw: &[SwitchId], old_root: Option<SwitchId>) -> SwitchId {
        let ns = f.num_switches();
        let (mut dist, mut queue) = (Vec::new(), Vec::new());
        for &m in msw {
            self.dist_row(f, m, &mut dist, &mut queue);
        }
        let mut unreached = vec![0u32; ns];
        let mut ecc = vec![0u8; ns];
        let mut sum = vec![0u32; ns];
        for &m in msw {
            for (r, &d) in self.dist_rows[m.index()].iter().enumerate() {
                if d == UNREACHED {
                    unreached[r] += 1;
                } else {
                    ecc[r] = ecc[r].max(d);
                    sum[r] += u32::from(d);
                }
            }
        }
        let best = (0..ns).map(|r| (unreached[r], ecc[r])).min().expect("a member switch exists");
        let port_load = |r: usize| {
            let (a, b) = (self.port_base[r] as usize, self.port_base[r + 1] as usize);
            let l = &self.link_load[a..b];
            (l.iter().copied().max().unwrap_or(0), l.iter().map(|&l| u64::from(l)).sum::<u64>())
        };
        let key =
            |r: usize| (Some(SwitchId(r as u32)) != old_root, port_load(r), sum[r], f.switch(SwitchId(r as u32)).guid);
        let r = (0..ns).filter(|&r| (unreached[r], ecc[r]) == best).min_by_key(|&r| key(r));
        SwitchId(r.expect("a member switch exists") as u32)
    }

    fn route_group(
        &mut self,
        f: &RoutingFabric,
        g: &McastGroup,
        b: &mut Build,
        touched: &mut BTreeSet<SwitchId>,
        problems: &mut Vec<McastProblem>,
    ) {
        let mlid = g.mlid;
        let mut old_switches = Vec::new();
        let hint = self.hints.remove(&mlid);
        let mut old_root = self.take_tree(mlid, |s, ports| {
            b.old[s.index()] = ports;
            old_switches.push(s);
        });
        let mut hinted = Vec::new();
        if let (None, Some(hint)) = (old_root, hint) {
            old_root = hint.root;
            for (s, p) in hint.parents {
                b.prefer[s.index()].insert(p);
                hinted.push(s);
            }
        }

        // Where the members hang off.
        let mut at: Vec<(McastMember, SwitchId, u8)> = Vec::with_capacity(g.members.len());
        for &m in &g.members {
            match m {
                McastMember::Port(e) if e.index() < f.num_end_ports() => match f.attached_switch(e) {
                    Some((s, p)) => at.push((m, s, p)),
                    None => problems.push(McastProblem::NotOnSwitch { mlid, port_guid: f.end_port(e).port_guid }),
                },
                McastMember::Switch(s) if s.index() < f.num_switches() => at.push((m, s, 0)),
                _ => problems.push(McastProblem::UnknownMember { mlid, member: m }),
            }
        }
        let mut msw: Vec<SwitchId> = at.iter().map(|a| a.1).collect();
        msw.sort_unstable();
        msw.dedup();

        let mut tree_switches: Vec<SwitchId> = Vec::new();
        let mut root = None;
        if !msw.is_empty() {
            let r = self.choose_root(f, &msw, old_root);
            root = Some(r);
            let (mut dist, mut queue) = (Vec::new(), Vec::new());
            f.switch_distances(r, &mut dist, &mut queue);
            let mut levels: Vec<Vec<SwitchId>> = Vec::new();
            for &(m, s, p) in &at {
                let d = dist[s.index()];
                if d == u32::MAX {
                    problems.push(McastProblem::Unreachable {
                        mlid,
                        member: m,
                        switch_guid: f.switch(s).guid,
                        root_guid: f.switch(r).guid,
                    });
                    continue;
                }
                b.new[s.index()].insert(p);
                if !b.in_tree[s.index()] {
                    b.in_tree[s.index()] = true;
                    let d = d as usize;
                    if levels.len() <= d {
                        levels.resize(d + 1, Vec::new());
                    }
                    levels[d].push(s);
                }
            }
            // Farthest first: each switch picks its parent cable, and the
            // parent joins the level above (module docs for the order).
            for d in (1..levels.len()).rev() {
                let mut level = std::mem::take(&mut levels[d]);
                level.sort_by_key(|s| f.switch(*s).guid);
                for &s in &level {
                    let base = self.port_base[s.index()] as usize;
                    let best = f
                        .switch_neighbors(s)
                        .iter()
                        .filter(|e| dist[e.neighbor.index()] == d as u32 - 1)
                        .min_by_key(|e| {
                            let n = e.neighbor.index();
                            (
                                !(b.old[s.index()].contains(e.port) || b.prefer[s.index()].contains(e.port)),
                                !b.in_tree[n],
                                self.link_load[base + usize::from(e.port)],
                                f.switch(e.neighbor).guid,
                                e.port,
                            )
                        })
                        .expect("a switch at distance d > 0 has a neighbour at d - 1");
                    let n = best.neighbor;
                    b.new[s.index()].insert(best.port);
                    b.parent[s.index()] = best.port;
                    b.new[n.index()].insert(best.remote_port);
                    if !b.in_tree[n.index()] {
                        b.in_tree[n.index()] = true;
                        levels[d - 1].push(n);
                    }
                }
                tree_switches.extend(level);
            }
            tree_switches.extend(levels.first().into_iter().flatten());
        }

        // Install the new tree, note what changed, clear the scratch.
        tree_switches.sort_unstable();
        for &s in &tree_switches {
            let ports = b.new[s.index()];
            self.tables[s.index()].insert(mlid, ports);
            let base = self.port_base[s.index()] as usize;
            for p in ports.iter() {
                if self.isl[base + usize::from(p)] {
                    self.link_load[base + usize::from(p)] += 1;
                }
            }
        }
        for &s in old_switches.iter().chain(&tree_switches) {
            let i = s.index();
            if b.old[i] != b.new[i] {
                touched.insert(s);
            }
        }
        let parent_ports: Vec<u8> = tree_switches.iter().map(|s| b.parent[s.index()]).collect();
        for &s in old_switches.iter().chain(&tree_switches).chain(&hinted) {
            let i = s.index();
            b.old[i] = PortSet::EMPTY;
            b.new[i] = PortSet::EMPTY;
            b.prefer[i] = PortSet::EMPTY;
            b.in_tree[i] = false;
            b.parent[i] = 0;
        }
        if let Some(root) = root.filter(|_| !tree_switches.is_empty()) {
            self.trees.insert(mlid, McastTree { root, switches: tree_switches, parent_ports });
        }
    }
}

/// Why a group's tables do not deliver as they should ([`verify_mcast`]).
/// `from` is the member whose packet met the fault.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum McastFault {
    #[error("MLID {mlid:#06x} from {from:?}: switch {switch_guid:#018x} entered twice (a loop or two paths)")]
    Loop { mlid: u16, from: McastMember, switch_guid: u64 },
    #[error("MLID {mlid:#06x} from {from:?}: delivered to {reached:?}, which is not a member")]
    NonMember { mlid: u16, from: McastMember, reached: NodeRef },
    #[error("MLID {mlid:#06x} from {from:?}: member {member:?} not reached")]
    Missed { mlid: u16, from: McastMember, member: McastMember },
    /// The table sends the packet out of a port with nothing behind it.
    #[error("MLID {mlid:#06x} from {from:?}: switch {switch_guid:#018x} port {port} leads nowhere")]
    DeadPort { mlid: u16, from: McastMember, switch_guid: u64, port: u8 },
    /// The member cannot send into the fabric at all.
    #[error("MLID {mlid:#06x}: member {member:?} hangs off no switch of the fabric")]
    Detached { mlid: u16, member: McastMember },
}

/// Floods a packet for `group.mlid` from every member through `routes` (a
/// packet entering a switch on port p leaves by every port of the switch's
/// set except p) and checks it reaches every other member once and nothing
/// else: no switch entered twice, no non-member end port or switch port 0,
/// no port without a cable. Returns the first fault. O(M·(T + D)) for M
/// members, T switches in the tree and D ports it delivers to.
pub fn verify_mcast(fabric: &RoutingFabric, routes: &McastRoutes, group: &McastGroup) -> Result<(), McastFault> {
    let mlid = group.mlid;
    let members: BTreeSet<McastMember> = group.members.iter().copied().collect();
    let mut entered = vec![false; fabric.num_switches()];
    let mut visited: Vec<SwitchId> = Vec::new();
    let mut queue: Vec<(SwitchId, u8)> = Vec::new();
    let mut reached: BTreeSet<McastMember> = BTreeSet::new();
    for &source in &members {
        let start = match source {
            McastMember::Port(e) if e.index() < fabric.num_end_ports() => fabric.attached_switch(e),
            McastMember::Switch(s) if s.index() < fabric.num_switches() => Some((s, 0)),
            _ => None,
        };
        let Some(start) = start else { return Err(McastFault::Detached { mlid, member: source }) };
        for s in visited.drain(..) {
            entered[s.index()] = false;
        }
        reached.clear();
        queue.clear();
        queue.push(start);
        while let Some((s, in_port)) = queue.pop() {
            let switch_guid = fabric.switch(s).guid;
            if entered[s.index()] {
                return Err(McastFault::Loop { mlid, from: source, switch_guid });
            }
            entered[s.index()] = true;
            visited.push(s);
            for p in routes.ports(s, mlid).iter().filter(|&p| p != in_port) {
                let got = if p == 0 {
                    McastMember::Switch(s)
                } else {
                    match fabric.switch_peer(s, p) {
                        Some(PortEnd::Switch(n, rp)) => {
                            queue.push((n, rp));
                            continue;
                        }
                        Some(PortEnd::End(e)) => McastMember::Port(e),
                        None => return Err(McastFault::DeadPort { mlid, from: source, switch_guid, port: p }),
                    }
                };
                if !members.contains(&got) {
                    let reached = match got {
                        McastMember::Port(e) => NodeRef::End(e),
                        McastMember::Switch(s) => NodeRef::Switch(s),
                    };
                    return Err(McastFault::NonMember { mlid, from: source, reached });
                }
                reached.insert(got);
            }
        }
        if let Some(&member) = members.iter().find(|&&m| m != source && !reached.contains(&m)) {
            return Err(McastFault::Missed { mlid, from: source, member });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{EndPort, Switch};
    use crate::testfab::{self, FatTree, RandomSpec, SplitMix64};
    use proptest::prelude::*;

    fn hosts(f: &RoutingFabric) -> Vec<McastMember> {
        f.end_port_ids().map(McastMember::Port).collect()
    }

    fn verify_all(f: &RoutingFabric, routes: &McastRoutes, groups: &[McastGroup]) {
        for g in groups {
            verify_mcast(f, routes, g).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// `n` groups of random hosts (each host in with probability 1/2, at
    /// least two per group).
    fn random_groups(f: &RoutingFabric, n: usize, seed: u64) -> Vec<McastGroup> {
        let mut rng = SplitMix64(seed);
        let all = hosts(f);
        (0..n)
            .map(|i| {
                let mut m: Vec<McastMember> = all.iter().copied().filter(|_| rng.below(2) == 0).collect();
                for &h in all.iter().take(2) {
                    if !m.contains(&h) {
                        m.push(h);
                    }
                }
                McastGroup::new(MLID_MIN + i as u16, m)
            })
            .collect()
    }

    #[test]
    fn port_set_bits_and_masks() {
        let mut s: PortSet = [0u8, 1, 15, 16, 36, 63, 64, 254].into_iter().collect();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 1, 15, 16, 36, 63, 64, 254]);
        assert_eq!(s.len(), 8);
        assert_eq!(s.max_port(), Some(254));
        assert_eq!(s.mask16(0), 0x8003);
        assert_eq!(s.mask16(1), 0x0001);
        assert_eq!(s.mask16(2), 0x0010);
        assert_eq!(s.mask16(3), 0x8000);
        assert_eq!(s.mask16(4), 0x0001);
        assert_eq!(s.mask16(15), 0x4000);
        assert_eq!(s.mask16(16), 0);
        s.remove(254);
        s.remove(0);
        assert!(!s.contains(0) && s.contains(1));
        assert_eq!(s.max_port(), Some(64));
        let mut t = PortSet::EMPTY;
        for pos in 0..16 {
            t.set_mask16(pos, s.mask16(pos));
        }
        assert_eq!(t, s);
        t.set_mask16(0, 0);
        assert_eq!(t.iter().next(), Some(16));
        assert!(PortSet::EMPTY.is_empty() && PortSet::EMPTY.max_port().is_none());
    }

    #[test]
    fn one_switch_group_stays_on_its_switch() {
        let f = testfab::single_switch(4);
        let e: Vec<EndPortId> = f.end_port_ids().collect();
        let g = McastGroup::new(
            0xc000,
            vec![McastMember::Port(e[0]), McastMember::Port(e[2]), McastMember::Switch(SwitchId(0))],
        );
        let (r, u) = route_mcast(&f, std::slice::from_ref(&g));
        assert!(u.problems.is_empty());
        assert_eq!(u.touched, vec![SwitchId(0)]);
        let (s0, p0) = f.attached_switch(e[0]).unwrap();
        let (_, p2) = f.attached_switch(e[2]).unwrap();
        assert_eq!(r.ports(s0, 0xc000), [0, p0, p2].into_iter().collect());
        verify_mcast(&f, &r, &g).unwrap();
        // A non-member's port in the set is caught.
        let mut bad = r.clone();
        bad.tables[0].get_mut(&0xc000).unwrap().insert(f.attached_switch(e[1]).unwrap().1);
        assert_eq!(
            verify_mcast(&f, &bad, &g),
            Err(McastFault::NonMember { mlid: 0xc000, from: McastMember::Port(e[0]), reached: NodeRef::End(e[1]) })
        );
    }

    #[test]
    fn checker_finds_loops_misses_and_dead_ports() {
        let f = testfab::ring(3, 1);
        let members = hosts(&f);
        let g = McastGroup::new(0xc001, members.clone());
        let (r, _) = route_mcast(&f, std::slice::from_ref(&g));
        verify_mcast(&f, &r, &g).unwrap();
        let tree = r.tree(0xc001).unwrap();
        assert_eq!(tree.switches.len(), 3);
        // Close the ring: ports 1 and 2 everywhere make a loop.
        let mut looped = r.clone();
        for t in &mut looped.tables {
            let ps = t.get_mut(&0xc001).unwrap();
            ps.insert(1);
            ps.insert(2);
        }
        assert!(matches!(verify_mcast(&f, &looped, &g), Err(McastFault::Loop { .. })));
        // Empty a leaf's set: its host is missed.
        let mut missed = r.clone();
        let (s, _) = f.attached_switch(EndPortId(2)).unwrap();
        missed.tables[s.index()].insert(0xc001, PortSet::EMPTY);
        assert!(matches!(verify_mcast(&f, &missed, &g), Err(McastFault::Missed { .. })));
        let mut dead = r.clone();
        dead.tables[0].get_mut(&0xc001).unwrap().insert(4);
        assert!(matches!(verify_mcast(&f, &dead, &g), Err(McastFault::DeadPort { port: 4, .. })));
    }

    #[test]
    fn unreachable_member_is_reported_and_the_rest_routed() {
        // Two switches cabled, a third on its own, one host on each.
        let mut b = RoutingFabric::builder();
        let s: Vec<SwitchId> = (0..3).map(|i| b.add_switch(Switch::new(0x10 + i, 4, 1 + i as u16)).unwrap()).collect();
        b.connect(PortEnd::Switch(s[0], 1), PortEnd::Switch(s[1], 1)).unwrap();
        let h: Vec<EndPortId> = (0..4u64)
            .map(|i| b.add_end_port(EndPort::new(0x100 + i * 2, 0x101 + i * 2, 1, 10 + i as u16)).unwrap())
            .collect();
        b.connect(PortEnd::End(h[0]), PortEnd::Switch(s[0], 2)).unwrap();
        b.connect(PortEnd::End(h[1]), PortEnd::Switch(s[1], 2)).unwrap();
        b.connect(PortEnd::End(h[2]), PortEnd::Switch(s[2], 2)).unwrap();
        let f = b.build().unwrap();
        let members: Vec<McastMember> = h.iter().copied().map(McastMember::Port).collect();
        let g = McastGroup::new(0xc000, members);
        let (r, u) = route_mcast(&f, std::slice::from_ref(&g));
        assert_eq!(r.tree(0xc000).unwrap().root, s[0], "reaches most members, then lowest GUID");
        assert_eq!(
            u.problems,
            vec![
                McastProblem::NotOnSwitch { mlid: 0xc000, port_guid: 0x107 },
                McastProblem::Unreachable {
                    mlid: 0xc000,
                    member: McastMember::Port(h[2]),
                    switch_guid: 0x12,
                    root_guid: 0x10,
                },
            ]
        );
        let reachable = McastGroup::new(0xc000, vec![McastMember::Port(h[0]), McastMember::Port(h[1])]);
        verify_mcast(&f, &r, &reachable).unwrap();
        assert!(matches!(verify_mcast(&f, &r, &g), Err(McastFault::Missed { .. } | McastFault::Detached { .. })));
        assert_eq!(r.ports(s[2], 0xc000), PortSet::EMPTY);
        // Bad input is reported, not a panic.
        let mut r2 = McastRoutes::new(&f);
        let u = r2
            .route_groups(
                &f,
                &[
                    McastGroup::new(0x0005, vec![McastMember::Port(h[0])]),
                    McastGroup::new(0xc001, vec![McastMember::Port(EndPortId(99)), McastMember::Switch(SwitchId(7))]),
                    McastGroup::new(0xc001, vec![]),
                ],
            )
            .unwrap();
        assert_eq!(
            u.problems,
            vec![
                McastProblem::BadMlid { mlid: 5 },
                McastProblem::UnknownMember { mlid: 0xc001, member: McastMember::Port(EndPortId(99)) },
                McastProblem::UnknownMember { mlid: 0xc001, member: McastMember::Switch(SwitchId(7)) },
                McastProblem::DuplicateMlid { mlid: 0xc001 },
            ]
        );
        assert!(r2.tree(0xc001).is_none() && u.touched.is_empty());
        // Another fabric is refused.
        assert_eq!(r2.route_groups(&testfab::ring(3, 1), &[]), Err(McastError::FabricChanged));
    }

    #[test]
    fn unicast_test_fabrics_verify() {
        let fabrics = [
            testfab::ring(5, 2),
            testfab::spine_leaf(3, 4, 2, 3),
            testfab::grid(&[4, 4], &[true, true], 1, 1),
            testfab::grid(&[3, 3, 2], &[false, false, false], 2, 1),
            FatTree::new(8, 3, 100).build(),
            testfab::single_switch(6),
        ];
        for (i, f) in fabrics.iter().enumerate() {
            let mut groups = random_groups(f, 24, i as u64);
            groups[0].members.push(McastMember::Switch(SwitchId(0)));
            let (r, u) = route_mcast(f, &groups);
            assert!(u.problems.is_empty(), "{:?}", u.problems);
            verify_all(f, &r, &groups);
        }
    }

    #[test]
    fn trees_do_not_depend_on_discovery_order() {
        let f = testfab::grid(&[4, 3], &[true, false], 2, 2);
        let groups = random_groups(&f, 12, 9);
        let (r, _) = route_mcast(&f, &groups);
        let by_guid = |f: &RoutingFabric, r: &McastRoutes| -> BTreeMap<u64, BTreeMap<u16, PortSet>> {
            f.switch_ids().map(|s| (f.switch(s).guid, r.table(s).clone())).collect()
        };
        for seed in 0..4 {
            let g = testfab::renumbered(&f, seed);
            let port_of: BTreeMap<u64, EndPortId> = g.end_port_ids().map(|e| (g.end_port(e).port_guid, e)).collect();
            let mapped: Vec<McastGroup> = groups
                .iter()
                .map(|grp| {
                    let m = grp
                        .members
                        .iter()
                        .map(|m| match *m {
                            McastMember::Port(e) => McastMember::Port(port_of[&f.end_port(e).port_guid]),
                            McastMember::Switch(_) => unreachable!("hosts only"),
                        })
                        .collect();
                    McastGroup::new(grp.mlid, m)
                })
                .collect();
            let (rg, _) = route_mcast(&g, &mapped);
            assert_eq!(by_guid(&f, &r), by_guid(&g, &rg), "seed {seed}");
        }
    }

    /// Max groups on one cable for `n` groups spanning random hosts.
    fn spread(f: &RoutingFabric, n: usize, seed: u64) -> u32 {
        let groups = random_groups(f, n, seed);
        let (r, _) = route_mcast(f, &groups);
        verify_all(f, &r, &groups);
        r.max_link_load()
    }

    #[test]
    fn spreads_over_the_spines_of_fat_trees() {
        // 2-level radix 8: 4 spines, 8 leaves; every group spans several
        // leaves, so each tree is rooted at a spine and uses one cable per
        // member leaf. Measured: 64 groups -> at most 16 per cable (64/4).
        let f = FatTree::full(8, 2).build();
        let m = spread(&f, 64, 7);
        assert!(m <= 64 / 4 + 1, "max groups per cable {m}");
        // 3-level radix 8 (16 spines, 8 pods of 4 leaves and 4 middle
        // switches, 128 hosts): each leaf has 4 up cables and nearly every
        // group has members on every leaf, so 200 groups need at least 50
        // on some leaf's up cable.
        let f = FatTree::full(8, 3).build();
        let m = spread(&f, 200, 3);
        assert!(m <= 200 / 4 + 2, "max groups per cable {m}");
        // Spine-leaf with parallel cables: 2 spines × 2 cables per leaf.
        let f = testfab::spine_leaf(2, 4, 2, 4);
        let m = spread(&f, 40, 5);
        assert!(m <= 40 / 4 + 1, "max groups per cable {m}");
    }

    #[test]
    fn incremental_changes_touch_only_what_moves_and_removal_returns_the_load() {
        let f = FatTree::full(8, 2).build();
        let mut groups = random_groups(&f, 20, 11);
        let (mut r, u) = route_mcast(&f, &groups);
        assert!(!u.touched.is_empty());
        // The same groups again: nothing moves.
        let again = r.route_groups(&f, &groups).unwrap();
        assert!(again.touched.is_empty(), "{:?}", again.touched);
        // One member leaves (its leaf keeps other members): only its leaf
        // changes.
        let g = &mut groups[3];
        let gone = g.members.iter().position(|m| {
            let McastMember::Port(e) = *m else { return false };
            let leaf = f.attached_switch(e).unwrap().0;
            g.members
                .iter()
                .filter(|x| matches!(x, McastMember::Port(o) if f.attached_switch(*o).unwrap().0 == leaf))
                .count()
                > 1
        });
        let gone = g.members.remove(gone.expect("some leaf has two members"));
        let McastMember::Port(e) = gone else { unreachable!() };
        let u = r.route_groups(&f, std::slice::from_ref(&groups[3])).unwrap();
        assert_eq!(u.touched, vec![f.attached_switch(e).unwrap().0]);
        verify_all(&f, &r, &groups);
        // A fresh routing of the same groups in the same order equals an
        // incremental one done the same way (determinism).
        let (r2, _) = route_mcast(&f, &groups[..3]);
        let (r3, _) = route_mcast(&f, &groups[..3]);
        assert_eq!(r2.tables, r3.tables);
        // Every group removed: no load, no tables.
        for g in &groups {
            assert!(!r.remove_group(g.mlid).is_empty());
        }
        assert_eq!(r.max_link_load(), 0);
        assert!(r.link_load.iter().all(|&l| l == 0));
        assert!(r.tables.iter().all(BTreeMap::is_empty));
        assert!(r.remove_group(0xc000).is_empty());
    }

    fn hint_of(t: &McastTree) -> TreeHint {
        let parents = t.switches.iter().zip(&t.parent_ports).filter(|(s, _)| **s != t.root);
        TreeHint { root: Some(t.root), parents: parents.map(|(s, p)| (*s, *p)).collect() }
    }

    /// `groups` routed as joins come: each first with two members, then
    /// grown one group a pass in reverse MLID order (checked).
    fn routed_as_joins_come(f: &RoutingFabric, groups: &[McastGroup]) -> McastRoutes {
        let mut history = McastRoutes::new(f);
        let firsts: Vec<McastGroup> = groups.iter().map(|g| McastGroup::new(g.mlid, g.members[..2].to_vec())).collect();
        history.route_groups(f, &firsts).unwrap();
        for g in groups.iter().rev() {
            history.route_groups(f, std::slice::from_ref(g)).unwrap();
        }
        verify_all(f, &history, groups);
        history
    }

    #[test]
    fn a_torus_tree_follows_the_old_routers_parent_cables_not_only_its_root() {
        // On a torus many cables tie on hop counts: the load the history
        // left decides them, so the root alone does not rebuild a tree.
        let f = testfab::grid(&[6, 6], &[true, true], 1, 2);
        let groups = random_groups(&f, 40, 3);
        let history = routed_as_joins_come(&f, &groups);
        let roots_only = |t: &McastTree| TreeHint { root: Some(t.root), parents: Vec::new() };
        let mut by_root = McastRoutes::new(&f);
        by_root.hint_trees(history.trees().map(|(mlid, t)| (mlid, roots_only(t))));
        by_root.route_groups(&f, &groups).unwrap();
        assert_ne!(by_root.tables, history.tables, "the history must matter beyond the roots for this test to");
        let mut hinted = McastRoutes::new(&f);
        hinted.hint_trees(history.trees().map(|(mlid, t)| (mlid, hint_of(t))));
        hinted.route_groups(&f, &groups).unwrap();
        assert_eq!(hinted.tables, history.tables);
        assert_eq!(hinted.trees, history.trees);
        verify_all(&f, &hinted, &groups);
    }

    #[test]
    fn the_old_routers_trees_rebuild_whatever_order_it_routed_in() {
        // Routed as joins come: each group first with two members, grown
        // in later passes in reverse MLID order. The history moves the
        // load, so routing the finished groups at once in MLID order
        // roots some elsewhere.
        let f = FatTree::full(8, 2).build();
        let groups = random_groups(&f, 24, 5);
        let history = routed_as_joins_come(&f, &groups);
        let (at_once, _) = route_mcast(&f, &groups);
        assert_ne!(at_once.tables, history.tables, "the history must matter for this test to");
        // Given the old trees, a new router builds the same ones.
        let mut hinted = McastRoutes::new(&f);
        hinted.hint_trees(history.trees().map(|(mlid, t)| (mlid, hint_of(t))));
        hinted.route_groups(&f, &groups).unwrap();
        assert_eq!(hinted.tables, history.tables);
        assert_eq!(hinted.link_load, history.link_load);
        assert_eq!(hinted.trees, history.trees);
        // A hint is used once: a group routed again keeps its own tree.
        let elsewhere = TreeHint { root: Some(SwitchId(0)), parents: vec![(SwitchId(u32::MAX), 1)] };
        hinted.hint_trees([(groups[0].mlid, elsewhere.clone()), (groups[1].mlid, elsewhere)]);
        assert!(hinted.route_groups(&f, &groups[..2]).unwrap().touched.is_empty());
    }

    #[test]
    fn a_rerouted_group_does_not_avoid_its_own_old_load() {
        // Two spines; the group is routed alone, then again: its own load
        // is subtracted first, so it keeps its root instead of fleeing to
        // the other spine.
        let f = testfab::spine_leaf(2, 3, 1, 2);
        let g = McastGroup::new(0xc000, hosts(&f));
        let (mut r, _) = route_mcast(&f, std::slice::from_ref(&g));
        let root = r.tree(0xc000).unwrap().root;
        for _ in 0..3 {
            let u = r.route_groups(&f, std::slice::from_ref(&g)).unwrap();
            assert!(u.touched.is_empty());
            assert_eq!(r.tree(0xc000).unwrap().root, root);
        }
        // A second group goes to the other spine.
        let g2 = McastGroup::new(0xc001, hosts(&f));
        r.route_groups(&f, std::slice::from_ref(&g2)).unwrap();
        assert_ne!(r.tree(0xc001).unwrap().root, root);
        assert_eq!(r.max_link_load(), 1);
    }

    /// Figures for the module docs: `cargo test -p ibsm-routing --release
    /// --lib mcast::tests::measure_spread -- --ignored --nocapture`.
    /// Groups of 2..=64 random hosts plus one of every host (IPoIB
    /// broadcast); prints max groups per cable, the mean over cables used,
    /// and the time to route them all.
    #[test]
    #[ignore]
    fn measure_spread() {
        let cases = [
            ("2-level radix 8 (4 spines)", FatTree::full(8, 2).build(), 64),
            ("2-level radix 36 (18 spines)", FatTree::full(36, 2).build(), 1000),
            ("3-level radix 36 (11,664 hosts)", FatTree::full(36, 3).build(), 1000),
        ];
        for (name, f, n) in cases {
            let mut rng = SplitMix64(42);
            let all = hosts(&f);
            let mut groups = vec![McastGroup::new(MLID_MIN, all.clone())];
            for i in 1..n {
                let size = 2 + rng.below(63);
                let m = (0..size).map(|_| all[rng.below(all.len())]).collect();
                groups.push(McastGroup::new(MLID_MIN + i as u16, m));
            }
            let t = std::time::Instant::now();
            let (r, u) = route_mcast(&f, &groups);
            let el = t.elapsed();
            assert!(u.problems.is_empty());
            let used: Vec<u32> = r.link_load.iter().copied().filter(|&l| l > 0).collect();
            let mean = used.iter().map(|&l| f64::from(l)).sum::<f64>() / used.len().max(1) as f64;
            let roots: BTreeSet<SwitchId> = r.trees().map(|(_, t)| t.root).collect();
            println!(
                "{name}: {n} groups, max {} per cable, mean {mean:.1} over {} cable ends used, {} roots, {:.1} ms",
                r.max_link_load(),
                used.len(),
                roots.len(),
                el.as_secs_f64() * 1e3
            );
            let t = std::time::Instant::now();
            let mut r = r;
            let g = &mut groups[n / 2];
            g.members.pop();
            let u = r.route_groups(&f, std::slice::from_ref(g)).unwrap();
            println!("  one leave: {} switches touched, {:.2} ms", u.touched.len(), t.elapsed().as_secs_f64() * 1e3);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Random connected fabrics, random groups (switches' port 0
        /// included): every tree verifies, after first routing and after
        /// random members left and joined; removing everything leaves no
        /// load.
        #[test]
        fn random_fabrics_every_tree_verifies(
            seed in any::<u64>(),
            switches in 1usize..14,
            extra in 0usize..12,
            ngroups in 1usize..8,
        ) {
            let f = testfab::random_connected(seed, RandomSpec { switches, extra_links: extra, max_hosts_per_switch: 3, max_lmc: 0 });
            let mut rng = SplitMix64(seed ^ 0x5eed);
            let all: Vec<McastMember> = hosts(&f).into_iter().chain(f.switch_ids().map(McastMember::Switch)).collect();
            let mut groups: Vec<McastGroup> = (0..ngroups)
                .map(|i| {
                    let m = all.iter().copied().filter(|_| rng.below(3) == 0).collect();
                    McastGroup::new(MLID_MIN + 3 * i as u16, m)
                })
                .collect();
            let (mut r, u) = route_mcast(&f, &groups);
            prop_assert!(u.problems.is_empty(), "{:?}", u.problems);
            for g in &groups {
                prop_assert_eq!(verify_mcast(&f, &r, g), Ok(()));
            }
            for g in groups.iter_mut() {
                if rng.below(2) == 0 {
                    continue;
                }
                g.members.retain(|_| rng.below(3) != 0);
                g.members.push(all[rng.below(all.len())]);
                g.members.sort();
                g.members.dedup();
                r.route_groups(&f, std::slice::from_ref(g)).unwrap();
            }
            for g in &groups {
                prop_assert_eq!(verify_mcast(&f, &r, g), Ok(()));
                // Only switches holding the MLID are in the tree list.
                let listed = r.tree(g.mlid).map(|t| t.switches.clone()).unwrap_or_default();
                let holding: Vec<SwitchId> = f.switch_ids().filter(|&s| r.table(s).contains_key(&g.mlid)).collect();
                prop_assert_eq!(listed, holding);
            }
            for g in &groups {
                r.remove_group(g.mlid);
            }
            prop_assert_eq!(r.max_link_load(), 0);
            prop_assert!(r.tables.iter().all(BTreeMap::is_empty));
        }

        /// Many groups on fat trees with at least two spines: no cable
        /// carries every group.
        #[test]
        fn fat_tree_groups_spread(seed in any::<u64>(), n in 8usize..40, spines in 2u8..5, leaves in 2u8..6) {
            let f = testfab::spine_leaf(spines, leaves, 1, 3);
            let groups = random_groups(&f, n, seed);
            let (r, _) = route_mcast(&f, &groups);
            for g in &groups {
                prop_assert_eq!(verify_mcast(&f, &r, g), Ok(()));
            }
            prop_assert!((r.max_link_load() as usize) < n, "max {} of {}", r.max_link_load(), n);
        }
    }
}
