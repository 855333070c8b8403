//! A per-layer channel dependency graph check written for the tests, from
//! the tables and SLs alone (independent of the engines' own bookkeeping):
//! every switch is a source, every LID a destination (or only end-port
//! LIDs, [`cyclic_layers_to_end_ports`]); a path's layer is
//! `routes.sl[source switch][dlid]`; consecutive switch-to-switch hops of a
//! path make the first channel depend on the second in that layer. Also
//! included by the dor tests (`#[path]`), so it checks itself here.
//!
//! With per-hop SL-to-VL tables (`PathSl::hop_vls`) a hop's layer is its
//! VL from the table of (switch, input port, output port) and dependencies
//! may cross layers: one graph over (VL, channel) nodes is checked and its
//! verdict repeated for every VL in use.

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
    let hop = r.sl.as_ref().is_some_and(|p| p.hop_vls.is_some());
    let mut graphs: Vec<Layer> = Vec::new();
    // With hop VLs everything goes into graphs[0], nodes keyed by VL too.
    let mut hop_ids: HashMap<(u8, u32, u8), NodeIndex> = HashMap::new();
    let mut vls_seen = 0usize;
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
            let sl = r.sl.as_ref().and_then(|p| p.sl(s, lid)).unwrap_or(0);
            let layer = if hop { 0 } else { usize::from(sl) };
            while graphs.len() <= layer {
                graphs.push((DiGraph::new(), HashMap::new()));
            }
            let (g, ids) = &mut graphs[layer];
            // Each hop's VL from the input port it came in by (0 at the
            // source switch).
            let mut in_port = 0u8;
            let mut chans: Vec<(u8, u32, u8)> = Vec::new();
            for &(sw, p) in &t.hops {
                let vl = r.sl.as_ref().map_or(0, |x| x.hop_vl(sw, in_port, p, sl));
                vls_seen = vls_seen.max(usize::from(if hop { vl } else { sl }) + 1);
                // Only hops onto a switch are channels of interest.
                if let Some(PortEnd::Switch(_, rp)) = f.switch_peer(sw, p) {
                    chans.push((vl, sw.0, p));
                    in_port = rp;
                }
            }
            for w in chans.windows(2) {
                if hop {
                    let a = *hop_ids.entry(w[0]).or_insert_with(|| g.add_node(()));
                    let b = *hop_ids.entry(w[1]).or_insert_with(|| g.add_node(()));
                    g.update_edge(a, b, ());
                } else {
                    let a = *ids.entry((w[0].1, w[0].2)).or_insert_with(|| g.add_node(()));
                    let b = *ids.entry((w[1].1, w[1].2)).or_insert_with(|| g.add_node(()));
                    g.update_edge(a, b, ());
                }
            }
        }
    }
    if hop {
        let c = graphs.first().is_some_and(|(g, _)| is_cyclic_directed(g));
        return vec![c; vls_seen.max(1)];
    }
    graphs.iter().map(|(g, _)| is_cyclic_directed(g)).collect()
}

/// The highest VL any hop uses: the highest SL, or with per-hop tables the
/// highest VL in them.
pub fn max_vl(r: &Routes) -> Option<u8> {
    match r.sl.as_ref().and_then(|p| p.hop_vls.as_ref()) {
        Some(h) => Some(h.vls_used() - 1),
        None => max_sl(r),
    }
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
