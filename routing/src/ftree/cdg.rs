//! Credit-loop check for tables that contain detours.
//!
//! Up/down routes cannot close a loop in the channel dependency graph
//! (every route climbs, then descends, so ordering channels as "all up
//! channels by level, then all down channels by level" makes every
//! dependency point forward). Detours in degraded trees turn from down to up
//! once, which that order no longer covers, so their tables are checked
//! explicitly.

use crate::channels::{ChannelGraph, CycleSearch, DepGraph, DepSet, PortHops, SelfLoops, NO_CHANNEL};
use crate::fabric::{RoutingFabric, SwitchId};
use crate::lft::{Routes, UNROUTED};

use super::detect::Tree;

/// A cycle of channels (switch, output port) in the channel dependency graph
/// of `routes` on one virtual lane, if there is one. Every switch of the
/// tree counts as a source for every LID, so every table entry adds its
/// dependency.
///
/// Cost: O(L · S) to collect dependencies into a bit set over the
/// [`ChannelGraph`] dependency index, then one depth-first search over the
/// channels in the fabric's order.
pub(super) fn credit_loop(f: &RoutingFabric, t: &Tree, routes: &Routes) -> Option<Vec<(SwitchId, u8)>> {
    // A looped-back cable never carries an up/down route or a detour.
    let ch = ChannelGraph::in_fabric_order(f, SelfLoops::Skip);
    let mut in_tree = vec![false; f.num_switches()];
    for &x in &t.by_order {
        in_tree[x as usize] = true;
    }
    let hops = PortHops::new(&ch);
    let mut deps = DepSet::new(&ch);
    for &x in &t.by_order {
        let xu = x as usize;
        let Some(table) = routes.lfts.get(xu) else { continue };
        for (lid, &p) in table.ports.iter().enumerate() {
            // Port 0 is the switch itself, UNROUTED (255) is past any port.
            let hop = hops.get(xu, p);
            if hop.next == NO_CHANNEL || !in_tree[hop.next as usize] {
                continue;
            }
            let n = hop.next as usize;
            let q = routes.lfts[n].ports.get(lid).copied().unwrap_or(UNROUTED);
            let onward = hops.get(n, q);
            if onward.next != NO_CHANNEL {
                deps.insert(hop.row as usize + usize::from(onward.col));
            }
        }
    }
    let graph = DepGraph { g: &ch, has: |e| deps.contains(e) };
    let cycle = CycleSearch::new(ch.num_channels(), (0..ch.num_channels() as u32).collect()).next_cycle(&graph)?;
    Some(cycle.into_iter().map(|c| (SwitchId(ch.tail[c as usize]), ch.port[c as usize])).collect())
}
