//! A per-layer channel dependency graph check written for the tests, from
//! the tables and SLs alone (independent of the engines' own bookkeeping):
//! every switch is a source, every LID a destination (or only end-port
//! LIDs, [`cyclic_layers_to_end_ports`]); a path's layer is
//! `routes.sl[source switch][dlid]`; consecutive switch-to-switch hops of a
//! path make the first channel depend on the second in that layer. Also
//! included by the dor tests (`#[path]`), so it checks itself here.

#![allow(dead_code)]

use std::collections::HashMap;

use ibsm_routing::analysis::{trace, TraceEnd};
use ibsm_routing::{NodeRef, PortEnd, Routes, RoutingFabric};
use petgraph::algo::is_cyclic_directed;
use petgraph::graph::{DiGraph, NodeIndex};

/// One layer's dependency graph over channels (switch index, port).
type Layer = (DiGraph<(), ()>, HashMap<(u32, u8), NodeIndex>);

/// Per layer (index = SL): whether its dependency graph has a cycle.
/// Paths that are not delivered are skipped (validate reports those).
pub fn cyclic_layers(f: &RoutingFabric, r: &Routes) -> Vec<bool> {
    cyclic(f, r, true)
}

/// [`cyclic_layers`] for paths to end-port LIDs only (from every switch).
pub fn cyclic_layers_to_end_ports(f: &RoutingFabric, r: &Routes) -> Vec<bool> {
    cyclic(f, r, false)
}

fn cyclic(f: &RoutingFabric, r: &Routes, switch_lids: bool) -> Vec<bool> {
    let mut graphs: Vec<Layer> = Vec::new();
    for s in f.switch_ids() {
        for lid in 1..=f.max_lid() {
            let Some(owner) = f.lid_owner(lid) else { continue };
            if owner == NodeRef::Switch(s) || (!switch_lids && matches!(owner, NodeRef::Switch(_))) {
                continue;
            }
            let t = trace(f, r, NodeRef::Switch(s), lid);
            if !matches!(t.end, TraceEnd::Delivered(_)) {
                continue;
            }
            let sl = r.sl.as_ref().and_then(|p| p.sl(s, lid)).unwrap_or(0) as usize;
            while graphs.len() <= sl {
                graphs.push((DiGraph::new(), HashMap::new()));
            }
            let (g, ids) = &mut graphs[sl];
            // Only hops onto a switch are channels of interest.
            let chans: Vec<(u32, u8)> = t
                .hops
                .iter()
                .filter(|(sw, p)| matches!(f.switch_peer(*sw, *p), Some(PortEnd::Switch(..))))
                .map(|(sw, p)| (sw.0, *p))
                .collect();
            for w in chans.windows(2) {
                let a = *ids.entry(w[0]).or_insert_with(|| g.add_node(()));
                let b = *ids.entry(w[1]).or_insert_with(|| g.add_node(()));
                g.update_edge(a, b, ());
            }
        }
    }
    graphs.iter().map(|(g, _)| is_cyclic_directed(g)).collect()
}

/// The highest SL any (switch, LID) entry uses, if SLs are set.
pub fn max_sl(r: &Routes) -> Option<u8> {
    r.sl.as_ref().map(|p| p.by_source_switch.iter().flatten().copied().max().unwrap_or(0))
}

#[cfg(test)]
mod checker_tests {
    use super::*;
    use ibsm_routing::{minhop, testfab};

    /// The checker must be able to fail: MinHop on a ring of 5 with
    /// traffic both ways is the textbook credit loop.
    #[test]
    fn checker_finds_the_ring_credit_loop() {
        let f = testfab::ring(5, 1);
        let r = minhop(&f).unwrap();
        assert_eq!(cyclic_layers(&f, &r), vec![true]);
    }

    #[test]
    fn checker_accepts_a_tree() {
        let f = testfab::FatTree::full(4, 2).build();
        let r = minhop(&f).unwrap();
        assert_eq!(cyclic_layers(&f, &r), vec![false]);
    }
}
