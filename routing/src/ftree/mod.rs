//! Fat-tree routing (OpenSM's `ftree`), after Zahavi, Johnson, Kerbyson and
//! Lang, "Optimized InfiniBand fat-tree routing for shift all-to-all
//! communication patterns" (CCPE 2010).
//!
//! ## The tree
//! Switches are ranked from given roots (distance from the nearest root) or
//! from the leaves: the switches compute nodes hang off get the deepest
//! rank, every other switch ranks by its distance from the nearest leaf.
//! Two corrections keep partially populated trees the right way up: a
//! switch with no compute node, two cables from a leaf, with no parent and
//! all its neighbours in one subtree, is a leaf whose hosts are missing
//! (left as a root it would join one pod's aggregation switches from above
//! and let detours close credit loops); and when distances leave parentless
//! switches below the top (a whole hostless sub-pod hangs upside down), the
//! parentless switches at each distance, nearest first, are tried as roots.
//!
//! The fabric is accepted as a fat tree when every switch-to-switch cable
//! joins adjacent ranks, every compute node hangs off a leaf and there are 2
//! to 8 ranks; partially populated trees (missing hosts, leaves or spines)
//! and degraded ones (missing cables) qualify as long as that holds and
//! every end port can still reach every other going up, then down.
//! Otherwise the engine returns [`RoutingError::NotApplicable`] naming the
//! offending switch or port, so that a chain falls back to its next engine.
//! A fabric in several connected parts is routed in its largest part that
//! holds a switch and reported as [`RoutingError::Disconnected`].
//!
//! Compute nodes are `options.cn_guids` (port GUIDs, or node GUIDs standing
//! for their ports), or every end port but `options.io_guids` when that
//! list is empty. Listed GUIDs the fabric lacks are skipped here, as are
//! roots outside the routed part; [`crate::engine::route`] refuses unknown
//! GUIDs before ftree runs. Only compute nodes define leaves; other end
//! ports (storage on a spine, say) may hang off any rank and are routed
//! after the compute nodes.
//!
//! ## Indexing
//! Switches get a canonical order, top-down: inside each level by the
//! subtrees that enclose them, then by the order of their parents, then by
//! GUID. Up cables are sorted by the parent's order, so that the j-th up
//! cable of every switch in the same place of any subtree leads to a parent
//! in the same place. Leaves follow that order, and a compute node's index
//! is `leaf position × slots per leaf + its place on the leaf` (port
//! order); leaves with fewer compute nodes keep their empty slots (OpenSM's
//! "dummy" nodes), which keeps subtrees aligned. [`Layout::compute_nodes`]
//! lists the compute nodes in index order (OpenSM's
//! `opensm-ftree-ca-order.dump`): placing MPI ranks in that order makes
//! shift all-to-all contention free. The tables depend only on GUIDs, port
//! numbers and cabling, not on the order switches were discovered in.
//!
//! ## Routing
//! For every destination the ancestors of its switch forward down, every
//! other switch forward up; going up, a switch of level h takes the up cable
//! at position `(index / W_h) mod (up cables)`, `W_0 = 1`,
//! `W_{h+1} = W_h × (up cables at level h)`: D-mod-k routing, which on a
//! full tree puts at most one flow of any shift permutation on a directed
//! cable. Where that cable does not lie on a shortest up/down path (degraded
//! trees) the eligible one carrying the fewest routes is taken. Parallel
//! cables are distinct up cables. With LMC > 0 the offset is added to every
//! digit, so the 2^LMC LIDs of a port leave by different up cables. Switch
//! LIDs are routed the same way, indexed by the switch's order, and charge
//! no counters.
//!
//! ## Detours and credit loops
//! Routes go up, then down, so they are free of credit loops on one VL. But
//! not every pair of switches has an up/down path: two spines, two
//! aggregation switches of one pod in different positions, a root that lost
//! its cable to a subtree). Those switch-to-switch (management) routes head
//! for one *turn leaf* (the first leaf below the most parentless switches)
//! and turn from down to up once, there or at the first of its ancestors
//! that routes the destination, as OpenSM's `fabric_route_roots` does: on a
//! full tree, going up from the turn leaf's pod never leads back down into
//! it, so no loop can close. A switch that cannot reach the turn leaf takes
//! a neighbour that already routes the destination.
//! Whenever detours exist, the tables' channel dependency graph is checked
//! and the engine refuses rather than return tables with a credit loop (in
//! practice only when every subtree of a small tree is damaged, so that
//! detours must turn in two places). End ports never take detours: a tree
//! where an end port has no up/down path to another is refused.
//!
//! The price: on three levels and more, switch-to-switch paths between
//! switches outside the turn leaf's pod are longer than shortest. Shortest
//! ones cannot be credit-loop free on one VL: agg a of pod P reaching agg b
//! of P must turn at a leaf of P, agg b of pod Q reaching agg a of Q at a
//! leaf of Q, and ordinary host traffic (leaf of P up b, core, down Q's b to
//! that leaf; leaf of Q up a, core, down P's a) closes the loop. Every path
//! from or to an end port is a shortest one.
//!
//! Differences from OpenSM: no `max_reverse_hops` (OpenSM's own manual says
//! it can create credit loops); LMC > 0 is supported; trees do not have to
//! be regular (OpenSM requires equal port-group counts per rank); degraded
//! trees are routed instead of falling back to MinHop.
//!
//! ## Cost
//! For each of S destination switches, O(S + E) for ancestors and up/down
//! distances, then O(S) per LID for the table entries: O(S·(S + E) + S·L),
//! plus sorting the switches, plus O(L·S) for the credit-loop check when
//! there are detours. The 11,664-host 3-level tree takes about 0.15 s on one
//! core (`cargo run --release -p ibsm-routing --example ftree_bench`).

mod cdg;
mod detect;
mod route;

use crate::error::{PartialRoutes, RoutingError};
use crate::fabric::{EndPortId, RoutingFabric, SwitchId};
use crate::lft::Routes;
use crate::options::EngineOptions;

pub use detect::{MAX_LEVELS, MIN_LEVELS};

/// The fat tree ftree found in a fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// Switch levels (OpenSM's tree rank), 2..=8.
    pub levels: u8,
    /// Rank of each switch (by [`SwitchId`]): 0 for roots, `levels - 1` for
    /// leaves; `None` for switches outside the tree's connected part.
    pub rank: Vec<Option<u8>>,
    /// Leaves (switches of the deepest rank) in index order.
    pub leaves: Vec<SwitchId>,
    /// Index slots per leaf: the most compute nodes on one leaf.
    pub slots_per_leaf: usize,
    /// Compute nodes in index order (empty slots left out).
    pub compute_nodes: Vec<EndPortId>,
}

/// Finds the fat tree without routing it: the ranks, the leaf order and the
/// compute-node order ftree routes by, or why the fabric is no fat tree.
pub fn layout(fabric: &RoutingFabric, options: &EngineOptions) -> Result<Layout, RoutingError> {
    let t = detect::detect(fabric, options)?;
    Ok(Layout {
        levels: t.levels,
        rank: (0..fabric.num_switches()).map(|s| t.in_tree(s).then(|| t.rank(s))).collect(),
        leaves: t.leaves.iter().map(|&s| SwitchId(s)).collect(),
        slots_per_leaf: t.slots_per_leaf as usize,
        compute_nodes: t.compute_nodes.clone(),
    })
}

/// Routes a fat tree; see the module documentation.
///
/// A fabric in several connected parts is routed in its largest part that
/// holds a switch and reported as [`RoutingError::Disconnected`] with those
/// routes.
pub fn ftree(fabric: &RoutingFabric, options: &EngineOptions) -> Result<Routes, RoutingError> {
    let t = detect::detect(fabric, options)?;
    let out = route::route(fabric, &t, None)?;
    if out.detours > 0 {
        if let Some(cycle) = cdg::credit_loop(fabric, &t, &out.routes) {
            const SHOWN: usize = 6;
            let hops: Vec<String> =
                cycle.iter().take(SHOWN).map(|&(s, p)| format!("{:#018x}/{p}", fabric.switch(s).guid)).collect();
            let more = if cycle.len() > SHOWN { format!(" and {} more", cycle.len() - SHOWN) } else { String::new() };
            return Err(detect::refuse(format!(
                "the degraded tree needs detours ({} switch pairs lack an up/down path) and they close a credit \
                 loop through {}{more}",
                out.detours,
                hops.join(" -> ")
            )));
        }
    }
    let comps = fabric.components();
    if comps.count() > 1 {
        let unreachable = fabric
            .switch_ids()
            .filter(|s| !t.in_tree(s.index()))
            .map(|s| fabric.switch(s).guid)
            .chain(
                fabric
                    .end_port_ids()
                    .filter(|e| !matches!(t.role[e.index()], detect::Role::Compute(_) | detect::Role::Other(_)))
                    .map(|e| fabric.end_port(e).port_guid),
            )
            .collect();
        return Err(RoutingError::Disconnected {
            components: comps.count(),
            unreachable,
            partial: PartialRoutes(Box::new(out.routes)),
        });
    }
    Ok(out.routes)
}

/// Routes only the LIDs `only` flags (by LID), the others left unrouted,
/// for a reaction that repairs what a loss broke and keeps the rest
/// ([`crate::keep`]): a destination switch none of whose LIDs is flagged
/// costs nothing. The flagged LIDs get the entries a whole run would give
/// them on a full tree; on a degraded one the balancing counters see only
/// the flagged LIDs. Not checked for credit loops here (the caller checks
/// the merged tables), and a fabric in several parts is refused (the caller
/// routes it whole).
pub fn ftree_only(fabric: &RoutingFabric, options: &EngineOptions, only: &[bool]) -> Result<Routes, RoutingError> {
    if fabric.components().count() > 1 {
        return Err(detect::refuse("the fabric is in several parts: routed whole, not repaired"));
    }
    let t = detect::detect(fabric, options)?;
    Ok(route::route(fabric, &t, Some(only))?.routes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testfab::FatTree;

    #[test]
    fn only_the_flagged_lids_are_routed_as_a_whole_run_routes_them() {
        let f = FatTree::full(8, 3).build();
        let options = EngineOptions::default();
        let whole = ftree(&f, &options).unwrap();
        let only: Vec<bool> = (0..=usize::from(f.max_lid())).map(|lid| lid % 7 == 3).collect();
        let part = ftree_only(&f, &options, &only).unwrap();
        for (w, p) in whole.lfts.iter().zip(&part.lfts) {
            for (lid, &flagged) in only.iter().enumerate().skip(1) {
                let want = if flagged { w.ports[lid] } else { crate::lft::UNROUTED };
                assert_eq!(p.ports[lid], want, "LID {lid}");
            }
        }
    }

    /// The full 2-level radix-4 tree, every entry worked out by hand.
    /// Leaves `sw-L1-c` (c = 0..4) have hosts on ports 1-2 and spine `j` on
    /// port 3 + j; spine `j` has leaf `c` on port c + 1. Host `h-c-s` has
    /// index 2c + s, so leaves send it up spine `(2c + s) mod 2 = s`.
    /// Switch LIDs are indexed by canonical order: spines 0 and 1, then
    /// leaves 2..=5, so a leaf sends leaf c's LID up spine `c mod 2`. Spines
    /// have no up/down path to each other: they detour through the turn
    /// leaf, leaf 0 (port 1).
    #[test]
    fn radix_4_two_levels_by_hand() {
        let f = FatTree::full(4, 2).build();
        let r = ftree(&f, &EngineOptions::default()).unwrap();
        let sw = |name: &str| f.switch_ids().find(|&s| f.switch(s).name == name).unwrap();
        let leaf = |c: usize| sw(&format!("sw-L1-{c}"));
        let spine = |j: usize| sw(&format!("sw-L2-{j}"));
        for e in f.end_port_ids() {
            let lid = f.end_port(e).base_lid;
            let (c, s) = (e.index() / 2, e.index() % 2);
            for l in 0..4 {
                let want = if l == c { s as u8 + 1 } else { 3 + s as u8 };
                assert_eq!(r.port(leaf(l), lid), want, "leaf {l} to host {c}.{s}");
            }
            for j in 0..2 {
                assert_eq!(r.port(spine(j), lid), c as u8 + 1, "spine {j} to host {c}.{s}");
            }
        }
        for c in 0..4 {
            let lid = f.switch(leaf(c)).base_lid;
            for l in 0..4 {
                let want = if l == c { 0 } else { 3 + (c % 2) as u8 };
                assert_eq!(r.port(leaf(l), lid), want, "leaf {l} to leaf {c}");
            }
            for j in 0..2 {
                assert_eq!(r.port(spine(j), lid), c as u8 + 1);
            }
        }
        for j in 0..2 {
            let lid = f.switch(spine(j)).base_lid;
            for l in 0..4 {
                assert_eq!(r.port(leaf(l), lid), 3 + j as u8, "leaf {l} to spine {j}");
            }
            assert_eq!(r.port(spine(j), lid), 0);
            assert_eq!(r.port(spine(1 - j), lid), 1, "spine to spine through leaf 0");
        }
        let lay = layout(&f, &EngineOptions::default()).unwrap();
        assert_eq!(lay.slots_per_leaf, 2);
        assert_eq!(lay.leaves, (0..4).map(leaf).collect::<Vec<_>>());
    }
}
