//! Fat-tree routing (OpenSM's `ftree`), after Zahavi, Johnson, Kerbyson and
//! Lang, "Optimized InfiniBand fat-tree routing for shift all-to-all
//! communication patterns" (CCPE 2010).
//!
//! ## The tree
//! Switches are ranked from the leaves (the switches compute nodes hang
//! off) or from given roots, and the fabric is accepted as a fat tree when
//! every switch-to-switch cable joins adjacent ranks, every compute node
//! hangs off a leaf and there are 2 to 8 ranks. Partially populated trees
//! (missing hosts, leaves or spines) and degraded ones (missing cables) are
//! accepted as long as that holds and every end port can still reach every
//! other going up, then down. Otherwise the engine returns
//! [`RoutingError::NotApplicable`] naming the offending switch or port, so
//! that a chain falls back to its next engine.
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
//! shift all-to-all contention free.
//!
//! ## Routing
//! For every destination the ancestors of its switch forward down, every
//! other switch forward up; going up, a switch of level h takes the up cable
//! at position `(index / W_h) mod (up cables)`, `W_0 = 1`,
//! `W_{h+1} = W_h × (up cables at level h)`: D-mod-k routing, which on a
//! full tree puts at most one flow of any shift permutation on a directed
//! cable. Where that cable does not lie on a shortest up/down path (degraded
//! trees) the least used one that does is taken. Parallel cables are
//! distinct up cables. With LMC > 0 the offset is added to every digit, so
//! the 2^LMC LIDs of a port leave by different up cables. Switch LIDs are
//! routed the same way, indexed by the switch's order, and charge no
//! counters.
//!
//! Routes go up, then down, so they are free of credit loops on one VL.
//! A degraded tree can leave a switch with no up/down path to another (a
//! root that lost its cable to a subtree); that switch's own traffic, and
//! traffic to switch LIDs, then takes a detour through a neighbour, and the
//! tables are checked for credit loops: the engine refuses rather than
//! return tables with one.
//!
//! Differences from OpenSM: no `max_reverse_hops` (OpenSM's own manual says
//! it can create credit loops); LMC > 0 is supported; trees do not have to
//! be regular (OpenSM requires equal port-group counts per rank).
//!
//! ## Cost
//! For each of S destination switches, O(S + E) for ancestors and up/down
//! distances, then O(S) per LID for the table entries: O(S·(S + E) + S·L),
//! plus sorting the switches. The 11,664-host 3-level tree takes well under
//! a second on one core (`examples/ftree_bench.rs`).

mod cdg;
mod detect;
mod route;

use crate::engine::EngineOptions;
use crate::error::{PartialRoutes, RoutingError};
use crate::fabric::{EndPortId, RoutingFabric, SwitchId};
use crate::lft::Routes;

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
    let out = route::route(fabric, &t)?;
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
