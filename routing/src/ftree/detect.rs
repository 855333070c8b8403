//! Recognising the fat tree: ranks, the checks that make up/down routing
//! sound, and the canonical order of switches and compute nodes that makes
//! the shift pattern contention free.

use std::collections::HashSet;

use petgraph::unionfind::UnionFind;

use crate::error::RoutingError;
use crate::fabric::{EndPortId, PortEnd, RoutingFabric, SwitchId};
use crate::options::EngineOptions;

/// Fewest switch levels ftree routes: one level has only trivial paths.
pub const MIN_LEVELS: u8 = 2;
/// Most switch levels ftree routes (OpenSM's limit, kept so that the same
/// fabrics are accepted).
pub const MAX_LEVELS: u8 = 8;

/// `height` of a switch outside the tree (another connected part).
pub(super) const NOT_IN_TREE: u8 = u8::MAX;

pub(super) fn refuse(reason: impl Into<String>) -> RoutingError {
    RoutingError::NotApplicable { engine: "ftree", reason: reason.into() }
}

/// A cable seen from one switch towards a neighbour one level up or down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TreeLink {
    pub port: u8,
    pub peer: u32,
}

/// What an end port is to the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Cabled into another connected part of the fabric.
    Outside,
    /// A compute node with its routing index (leaf position × slots per
    /// leaf + its place on the leaf).
    Compute(u64),
    /// Any other end port (I/O node, or not in the compute-node list),
    /// indexed after every compute-node slot.
    Other(u64),
}

impl Role {
    pub fn index(self) -> Option<u64> {
        match self {
            Role::Outside => None,
            Role::Compute(i) | Role::Other(i) => Some(i),
        }
    }
}

/// The tree as routing needs it. Switch-indexed vectors are indexed by
/// fabric switch index.
#[derive(Debug, Clone)]
pub(super) struct Tree {
    /// Switch levels (OpenSM's tree rank), `MIN_LEVELS..=MAX_LEVELS`.
    pub levels: u8,
    /// Levels above the leaves (0 = leaf, `levels - 1` = root);
    /// [`NOT_IN_TREE`] for switches in another connected part.
    pub height: Vec<u8>,
    /// Canonical position: roots first, then each level down; within a
    /// level by enclosing subtrees, then by the positions of the parents,
    /// then by GUID.
    pub order: Vec<u32>,
    /// Tree switches by `order` (hence top-down).
    pub by_order: Vec<u32>,
    /// CSR: `up[up_base[s]..up_base[s+1]]` are the cables to the level
    /// above, sorted by (parent order, port), parallel cables each listed.
    pub up_base: Vec<u32>,
    pub up: Vec<TreeLink>,
    /// CSR of cables to switches one level down, same sorting.
    pub down_base: Vec<u32>,
    pub down: Vec<TreeLink>,
    /// Per end port.
    pub role: Vec<Role>,
    /// Whether any end port (in the tree) hangs off the switch.
    pub has_end_ports: Vec<bool>,
    /// Leaves (height 0) in order; a compute node's leaf position is its
    /// leaf's place here.
    pub leaves: Vec<u32>,
    /// Index slots per leaf: the most compute nodes any leaf has.
    pub slots_per_leaf: u64,
    /// Compute nodes by index.
    pub compute_nodes: Vec<EndPortId>,
}

impl Tree {
    pub fn ups(&self, s: usize) -> &[TreeLink] {
        &self.up[self.up_base[s] as usize..self.up_base[s + 1] as usize]
    }
    pub fn downs(&self, s: usize) -> &[TreeLink] {
        &self.down[self.down_base[s] as usize..self.down_base[s + 1] as usize]
    }
    pub fn in_tree(&self, s: usize) -> bool {
        self.height[s] != NOT_IN_TREE
    }
    /// OpenSM's rank: 0 for roots, `levels - 1` for leaves.
    pub fn rank(&self, s: usize) -> u8 {
        self.levels - 1 - self.height[s]
    }
}

/// Breadth-first distances over switch-to-switch cables from `sources`,
/// restricted to `in_part` switches.
fn bfs(f: &RoutingFabric, in_part: &[bool], sources: &[u32]) -> Vec<u32> {
    let mut dist = vec![u32::MAX; f.num_switches()];
    let mut queue: Vec<u32> = Vec::with_capacity(f.num_switches());
    for &s in sources {
        if dist[s as usize] == u32::MAX {
            dist[s as usize] = 0;
            queue.push(s);
        }
    }
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head] as usize;
        head += 1;
        for e in f.switch_neighbors(SwitchId(u as u32)) {
            let n = e.neighbor.index();
            if in_part[n] && dist[n] == u32::MAX {
                dist[n] = dist[u] + 1;
                queue.push(n as u32);
            }
        }
    }
    dist
}

/// Switches that ranking from the leaves put too high: a switch with no
/// compute node, two cables from the nearest leaf, no neighbour
/// farther from the leaves than itself (no parent) and all its neighbours
/// in one connected part of the switches nearer the leaves. That is a leaf whose hosts are missing (or a top
/// switch serving a single subtree, which works as well hanging below it):
/// left as a root it would join the aggregation switches of one subtree
/// from above, an up/down path back into the subtree that lets detours
/// close credit loops. `d` is the distance from the nearest leaf.
fn hostless_leaves(f: &RoutingFabric, in_part: &[bool], is_leaf: &[bool], d: &[u32]) -> Vec<usize> {
    let ns = f.num_switches();
    let mut found = Vec::new();
    // Connected parts of the switches at most one cable from a leaf.
    let mut uf = UnionFind::<usize>::new(ns);
    for s in (0..ns).filter(|&s| in_part[s] && d[s] <= 1) {
        for e in f.switch_neighbors(SwitchId(s as u32)) {
            if d[e.neighbor.index()] <= 1 {
                uf.union(s, e.neighbor.index());
            }
        }
    }
    for s in 0..ns {
        // Exactly two cables from a leaf: one cable away it would become a
        // leaf cabled to leaves; farther away, making it a leaf would pull
        // its neighbours down a rank, below their other neighbours.
        if !in_part[s] || is_leaf[s] || d[s] != 2 {
            continue;
        }
        let nbrs = f.switch_neighbors(SwitchId(s as u32));
        // Any neighbour not one step nearer the leaves (a parent, a peer at
        // the same distance, a loop cable) disqualifies.
        if nbrs.iter().any(|e| d[e.neighbor.index()] != 1) {
            continue;
        }
        let first = uf.find(nbrs[0].neighbor.index());
        if nbrs.iter().all(|e| uf.find(e.neighbor.index()) == first) {
            found.push(s);
        }
    }
    found
}

/// What checking a ranking needs.
struct RankCheck<'a> {
    f: &'a RoutingFabric,
    in_part: &'a [bool],
    /// Tree switches by GUID, so reasons do not depend on discovery order.
    by_guid: &'a [usize],
    is_cn: &'a [bool],
    has_end_ports: &'a [bool],
}

impl RankCheck<'_> {
    /// Whether `rank` makes a fat tree: compute nodes only at the deepest
    /// rank, cables only between adjacent ranks. The reason names the
    /// first offender.
    fn check(&self, rank: &[u32]) -> Result<(), String> {
        let f = self.f;
        let guid = |s: usize| f.switch(SwitchId(s as u32)).guid;
        let leaf_rank = self.by_guid.iter().map(|&s| rank[s]).max().unwrap_or(0);
        for e in f.end_port_ids() {
            if !self.is_cn[e.index()] {
                continue;
            }
            if let Some((s, _)) = f.attached_switch(e) {
                let r = rank[s.index()];
                if r != leaf_rank {
                    return Err(format!(
                        "end port {:#018x} (a compute node) is attached to a non-leaf switch {:#018x} at rank {r}; \
                         the leaves are at rank {leaf_rank}",
                        f.end_port(e).port_guid,
                        guid(s.index())
                    ));
                }
            }
        }
        for &s in self.by_guid {
            let mut nbrs: Vec<usize> =
                f.switch_neighbors(SwitchId(s as u32)).iter().map(|e| e.neighbor.index()).filter(|&n| n != s).collect();
            nbrs.sort_by_key(|&n| guid(n));
            for n in nbrs {
                let (a, b) = (rank[s], rank[n]);
                if a == b {
                    let both =
                        if self.has_end_ports[s] && self.has_end_ports[n] { " (both have end ports)" } else { "" };
                    return Err(format!(
                        "switch {:#018x} at rank {a} has a link to switch {:#018x} at rank {b}{both}",
                        guid(s),
                        guid(n)
                    ));
                }
                if a.abs_diff(b) > 1 {
                    return Err(format!(
                        "switch {:#018x} at rank {a} has a link to switch {:#018x} at rank {b}, skipping a rank",
                        guid(s),
                        guid(n)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Ranks without given roots. First by distance from the nearest leaf
/// (`rank = deepest - distance`, OpenSM's way), after turning hostless
/// leaves back into leaves. That ranking is taken when it is consistent and
/// every switch below the top has a parent. Otherwise subtrees with no
/// compute node at all may hang upside down (their far ends look like
/// roots): then the switches with no parent at each distance, nearest
/// first, are tried as roots, ranking by distance from them; the first
/// consistent one wins. Failing that, the first ranking if it was
/// consistent, or its reason.
fn rank_from_leaves(ctx: &RankCheck<'_>, has_cn: &[bool]) -> Result<Vec<u32>, RoutingError> {
    let (f, in_part) = (ctx.f, ctx.in_part);
    let ns = f.num_switches();
    let mut is_leaf = has_cn.to_vec();
    let d = loop {
        let leaves: Vec<u32> = (0..ns as u32).filter(|&s| is_leaf[s as usize]).collect();
        let d = bfs(f, in_part, &leaves);
        let hostless = hostless_leaves(f, in_part, &is_leaf, &d);
        if hostless.is_empty() {
            break d;
        }
        for s in hostless {
            is_leaf[s] = true;
        }
    };
    let max_d = ctx.by_guid.iter().map(|&s| d[s]).max().unwrap_or(0);
    let plain: Vec<u32> = d.iter().map(|&x| if x == u32::MAX { x } else { max_d - x }).collect();
    let plain_ok = ctx.check(&plain);
    // A switch with no neighbour farther from the leaves: a root if at the
    // top, hanging upside down if below it.
    let parentless = |s: usize| f.switch_neighbors(SwitchId(s as u32)).iter().all(|e| d[e.neighbor.index()] <= d[s]);
    if plain_ok.is_ok() && ctx.by_guid.iter().all(|&s| d[s] == max_d || !parentless(s)) {
        return Ok(plain);
    }
    for top in 1..=max_d {
        let roots: Vec<u32> =
            ctx.by_guid.iter().filter(|&&s| d[s] == top && parentless(s)).map(|&s| s as u32).collect();
        if roots.is_empty() {
            continue;
        }
        let rank = bfs(f, in_part, &roots);
        if ctx.check(&rank).is_ok() {
            return Ok(rank);
        }
    }
    plain_ok.map(|()| plain).map_err(refuse)
}

/// Finds the fat tree in the largest connected part of `f` that holds a
/// switch, or says why there is none.
///
/// Ranks come from `options.root_guids` (distance from the nearest root)
/// when given, otherwise from the leaves: the switches with compute nodes
/// get the deepest rank and every other switch ranks by its distance from
/// the nearest leaf. The tree is accepted when every switch-to-switch cable
/// joins adjacent ranks, every compute node hangs off a leaf and there are
/// 2 to 8 ranks. Cost: O(levels · (S + E)) plus sorting.
pub(super) fn detect(f: &RoutingFabric, options: &EngineOptions) -> Result<Tree, RoutingError> {
    // Node GUIDs stand for their ports, which is what is matched below.
    // GUIDs the fabric lacks are skipped here (a root may be down);
    // `engine::route` refuses them before any engine runs.
    let options = &*options.with_port_guids(f);
    let ns = f.num_switches();
    if ns == 0 {
        return Err(refuse("the fabric has no switches"));
    }
    let comps = f.components();
    // Components are numbered largest first: the first one with a switch.
    let main = comps.of_switch.iter().copied().min().unwrap_or(0);
    let in_part: Vec<bool> = comps.of_switch.iter().map(|&c| c == main).collect();
    let guid = |s: usize| f.switch(SwitchId(s as u32)).guid;

    // Compute nodes: the listed ones, or every end port but the I/O nodes.
    let cn: HashSet<u64> = options.cn_guids.iter().copied().collect();
    let io: HashSet<u64> = options.io_guids.iter().copied().collect();
    let mut is_cn = vec![false; f.num_end_ports()];
    let mut has_cn = vec![false; ns];
    let mut has_end_ports = vec![false; ns];
    for e in f.end_port_ids() {
        if comps.of_end_port[e.index()] != main {
            continue;
        }
        let Some((s, _)) = f.attached_switch(e) else { continue };
        let g = f.end_port(e).port_guid;
        let c = if cn.is_empty() { !io.contains(&g) } else { cn.contains(&g) };
        is_cn[e.index()] = c;
        has_cn[s.index()] |= c;
        has_end_ports[s.index()] = true;
    }
    if !has_cn.iter().any(|&c| c) {
        return Err(refuse(if cn.is_empty() {
            "no compute node (end port) hangs off a switch".to_string()
        } else {
            format!(
                "none of the {} compute-node GUIDs names an end port cabled to a switch of the largest connected part",
                cn.len()
            )
        }));
    }

    // Ranks: 0 at the roots, growing downwards.
    let mut by_guid: Vec<usize> = (0..ns).filter(|&s| in_part[s]).collect();
    by_guid.sort_by_key(|&s| guid(s));
    let ctx = RankCheck { f, in_part: &in_part, by_guid: &by_guid, is_cn: &is_cn, has_end_ports: &has_end_ports };
    let rank: Vec<u32> = if options.root_guids.is_empty() {
        rank_from_leaves(&ctx, &has_cn)?
    } else {
        let wanted: HashSet<u64> = options.root_guids.iter().copied().collect();
        let roots: Vec<u32> =
            (0..ns as u32).filter(|&s| in_part[s as usize] && wanted.contains(&guid(s as usize))).collect();
        if roots.is_empty() {
            return Err(refuse(format!(
                "none of the {} root GUIDs names a switch of the largest connected part",
                wanted.len()
            )));
        }
        let rank = bfs(f, &in_part, &roots);
        ctx.check(&rank).map_err(refuse)?;
        rank
    };
    let leaf_rank = by_guid.iter().map(|&s| rank[s]).max().unwrap_or(0);
    let levels = leaf_rank + 1;
    if levels < u32::from(MIN_LEVELS) {
        return Err(refuse(format!(
            "rank {levels} < {MIN_LEVELS}: no switch above the leaves, a single switch level has only trivial paths"
        )));
    }
    if levels > u32::from(MAX_LEVELS) {
        return Err(refuse(format!("rank {levels} > {MAX_LEVELS}: the tree has {levels} switch levels")));
    }
    let levels = levels as u8;
    let top = levels - 1;
    let height: Vec<u8> = (0..ns).map(|s| if in_part[s] { (leaf_rank - rank[s]) as u8 } else { NOT_IN_TREE }).collect();

    // Enclosing subtrees: at level g, the connected parts of the switches of
    // height <= g (level 1 of a 3-level tree: its pods). comp_ord[g][s]
    // numbers them, ordered by the enclosing part one level up, then by
    // lowest GUID.
    let mut comp_ord: Vec<Vec<u32>> = vec![Vec::new(); usize::from(top)];
    for g in (0..top).rev() {
        let mut uf = UnionFind::<usize>::new(ns);
        for s in 0..ns {
            if height[s] > g {
                continue;
            }
            for e in f.switch_neighbors(SwitchId(s as u32)) {
                if height[e.neighbor.index()] <= g {
                    uf.union(s, e.neighbor.index());
                }
            }
        }
        let mut min_guid = vec![u64::MAX; ns];
        let mut outer = vec![0u32; ns];
        for s in 0..ns {
            if height[s] <= g {
                let r = uf.find(s);
                min_guid[r] = min_guid[r].min(guid(s));
                if g + 1 < top {
                    outer[r] = comp_ord[usize::from(g) + 1][s];
                }
            }
        }
        let mut reps: Vec<usize> = (0..ns).filter(|&r| min_guid[r] != u64::MAX).collect();
        reps.sort_by_key(|&r| (outer[r], min_guid[r]));
        let mut num = vec![u32::MAX; ns];
        for (i, &r) in reps.iter().enumerate() {
            num[r] = i as u32;
        }
        comp_ord[usize::from(g)] = (0..ns).map(|s| if height[s] <= g { num[uf.find(s)] } else { u32::MAX }).collect();
    }

    // Canonical order, top-down: a switch's key is its enclosing subtrees
    // (outermost first), the sorted positions of its parents, its GUID. Two
    // switches in the same place of different subtrees have parents in the
    // same places, so their up cables sort alike: the property the
    // index-based port choice needs.
    let mut order = vec![u32::MAX; ns];
    let mut by_order: Vec<u32> = Vec::with_capacity(by_guid.len());
    for h in (0..levels).rev() {
        let mut keyed: Vec<(Vec<u32>, Vec<u32>, u64, usize)> = by_guid
            .iter()
            .filter(|&&s| height[s] == h)
            .map(|&s| {
                let comps: Vec<u32> = (h + 1..top).rev().map(|g| comp_ord[usize::from(g)][s]).collect();
                let mut parents: Vec<u32> = f
                    .switch_neighbors(SwitchId(s as u32))
                    .iter()
                    .filter(|e| height[e.neighbor.index()] == h + 1)
                    .map(|e| order[e.neighbor.index()])
                    .collect();
                parents.sort_unstable();
                parents.dedup();
                (comps, parents, guid(s), s)
            })
            .collect();
        keyed.sort();
        for (_, _, _, s) in keyed {
            order[s] = by_order.len() as u32;
            by_order.push(s as u32);
        }
    }

    // Up and down cables, sorted by the neighbour's order, then port.
    let mut up_base = Vec::with_capacity(ns + 1);
    let mut up = Vec::new();
    let mut down_base = Vec::with_capacity(ns + 1);
    let mut down = Vec::new();
    for s in 0..ns {
        up_base.push(up.len() as u32);
        down_base.push(down.len() as u32);
        if height[s] == NOT_IN_TREE {
            continue;
        }
        let edges = f.switch_neighbors(SwitchId(s as u32));
        let mut ups: Vec<TreeLink> = edges
            .iter()
            .filter(|e| height[e.neighbor.index()] == height[s] + 1)
            .map(|e| TreeLink { port: e.port, peer: e.neighbor.0 })
            .collect();
        ups.sort_by_key(|l| (order[l.peer as usize], l.port));
        up.extend(ups);
        let mut downs: Vec<TreeLink> = edges
            .iter()
            .filter(|e| height[s] > 0 && height[e.neighbor.index()] == height[s] - 1)
            .map(|e| TreeLink { port: e.port, peer: e.neighbor.0 })
            .collect();
        downs.sort_by_key(|l| (order[l.peer as usize], l.port));
        down.extend(downs);
    }
    up_base.push(up.len() as u32);
    down_base.push(down.len() as u32);

    // Compute-node indices: leaf position × slots + place on the leaf (port
    // order); leaves without compute nodes keep their slots, as OpenSM's
    // "dummy" nodes do, so that positions line up across subtrees.
    let leaves: Vec<u32> = by_order.iter().copied().filter(|&s| height[s as usize] == 0).collect();
    let attached_cns = |s: u32| {
        f.switch_ports(SwitchId(s)).iter().filter_map(|p| match *p {
            Some(PortEnd::End(e)) if is_cn[e.index()] => Some(e),
            _ => None,
        })
    };
    let slots_per_leaf = leaves.iter().map(|&l| attached_cns(l).count()).max().unwrap_or(0) as u64;
    let mut role = vec![Role::Outside; f.num_end_ports()];
    let mut compute_nodes = Vec::new();
    for (pos, &l) in leaves.iter().enumerate() {
        for (slot, e) in attached_cns(l).enumerate() {
            role[e.index()] = Role::Compute(pos as u64 * slots_per_leaf + slot as u64);
            compute_nodes.push(e);
        }
    }
    let mut next = leaves.len() as u64 * slots_per_leaf;
    for &s in &by_order {
        for p in f.switch_ports(SwitchId(s)).iter().flatten() {
            if let PortEnd::End(e) = *p {
                if role[e.index()] == Role::Outside {
                    role[e.index()] = Role::Other(next);
                    next += 1;
                }
            }
        }
    }

    Ok(Tree {
        levels,
        height,
        order,
        by_order,
        up_base,
        up,
        down_base,
        down,
        role,
        has_end_ports,
        leaves,
        slots_per_leaf,
        compute_nodes,
    })
}
