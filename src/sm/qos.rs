//! Virtual lanes for engines that layer routes onto VLs (dfsssp, nue, dor
//! on tori): the VL budget the engine may use, and the SLtoVLMapping tables
//! that make SL n travel on VL n on every port.
//!
//! Engines return an SL per (source switch, DLID) equal to the route's VL
//! layer, so the mapping is the identity below the number of data VLs a
//! port runs; SLs above it fold onto the lanes that exist (no route uses
//! them, but a host that asks for one should not have its packets dropped).

use std::collections::HashSet;

use super::subnet::{NodeId, Subnet};
use crate::config::SmConfig;
use crate::mad::sl_to_vl::{attribute_modifier, ATTR_MOD_ALL_INPUT_PORTS, ATTR_MOD_ALL_OUTPUT_PORTS, SL_COUNT};
use crate::mad::{DrPath, SlToVlTableRepr};
use crate::types::Guid;

/// Data VLs a VLCap / OperationalVLs code stands for (IBA 14.2.5.6).
pub fn data_vls(code: u8) -> u8 {
    match code {
        1 => 1,
        2 => 2,
        3 => 4,
        4 => 8,
        5 => 15,
        _ => 1,
    }
}

/// The VLs every link of the managed fabric can run: the engine's budget.
pub fn vl_budget(subnet: &Subnet, config: &SmConfig) -> u8 {
    let mut budget = data_vls(config.max_op_vls);
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        for port in node.external_ports() {
            let slot = &node.ports[port as usize];
            if let (Some(info), Some(_)) = (&slot.info, slot.remote) {
                budget = budget.min(data_vls(info.vl_cap));
            }
        }
    }
    budget.max(1)
}

/// The table for a port running `vls` data VLs.
pub fn identity_table(vls: u8) -> SlToVlTableRepr {
    let mut t = SlToVlTableRepr::default();
    for (sl, vl) in t.vl.iter_mut().enumerate() {
        *vl = (sl as u8) % vls.max(1);
    }
    debug_assert_eq!(t.vl.len(), SL_COUNT);
    t
}

/// One SLtoVLMapping Set to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sl2VlSet {
    pub node: NodeId,
    pub path: DrPath,
    pub amod: u32,
    pub table: SlToVlTableRepr,
}

/// What the SM already wrote: (node GUID, attribute modifier, VLs).
#[derive(Debug, Clone, Default)]
pub struct Sl2VlCache {
    written: HashSet<(Guid, u32, u8)>,
}

impl Sl2VlCache {
    pub fn remember(&mut self, guid: Guid, amod: u32, vls: u8) {
        self.written.insert((guid, amod, vls));
    }
}

/// The Sets that put the identity mapping for `vls` VLs on every managed
/// port not yet holding it. A switch that supports optimized programming
/// takes one Set for all its port pairs; others take one per (input,
/// output) pair of cabled ports (port 0 included as an input).
pub fn sl2vl_sets(subnet: &Subnet, vls: u8, cache: &Sl2VlCache) -> Vec<Sl2VlSet> {
    let table = identity_table(vls);
    // The cache records the lanes a table spans, which is `vls` unless
    // fewer than `vls` SLs exist.
    let spans = table.vl.iter().copied().max().unwrap_or(0) + 1;
    let mut out = Vec::new();
    let mut push = |node: NodeId, path: DrPath, amod: u32| {
        if !cache.written.contains(&(subnet.node(node).guid(), amod, spans)) {
            out.push(Sl2VlSet { node, path, amod, table });
        }
    };
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let cabled: Vec<u8> = node.external_ports().filter(|&p| node.ports[p as usize].remote.is_some()).collect();
        if node.is_switch() {
            let optimized = node.switch_info.as_ref().is_some_and(|s| s.optimized_sl_to_vl_mapping_programming != 0);
            if optimized {
                push(id, node.path, ATTR_MOD_ALL_INPUT_PORTS | ATTR_MOD_ALL_OUTPUT_PORTS);
            } else {
                for &input in std::iter::once(&0).chain(cabled.iter()) {
                    for &output in &cabled {
                        if input != output {
                            push(id, node.path, attribute_modifier(input, output));
                        }
                    }
                }
            }
        } else {
            for &port in &cabled {
                push(id, node.path_for_port(port), 0);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_below_the_lanes_folds_above() {
        let t = identity_table(4);
        assert_eq!(&t.vl[..6], &[0, 1, 2, 3, 0, 1]);
        assert_eq!(identity_table(15).vl[14], 14);
        assert_eq!(identity_table(15).vl[15], 0, "SL 15 folds onto VL 0, never VL 15 (drop)");
        assert_eq!(data_vls(4), 8);
        assert_eq!(data_vls(5), 15);
    }
}
