//! Virtual lanes: the VL budget engines that layer routes onto VLs (dfsssp,
//! nue, dor on tori) may use, the SLtoVLMapping tables that make SL n travel
//! on VL n on every port, and the configured QoS tables (OpenSM's `qos_*`).
//!
//! Engines return an SL per (source switch, DLID) equal to the route's VL
//! layer, so the mapping is the identity below the number of data VLs a
//! port runs; SLs above it fold onto the lanes that exist (no route uses
//! them, but a host that asks for one should not have its packets dropped).

use std::collections::HashMap;

use crate::config::{QosConfig, SmConfig};
use crate::mad::sl_to_vl::{attribute_modifier, ATTR_MOD_ALL_INPUT_PORTS, ATTR_MOD_ALL_OUTPUT_PORTS, SL_COUNT};
use crate::mad::vl_arb::{self, VlArbBlock};
use crate::mad::{AttributeId, DrPath, SlToVlTableRepr, SmpAttribute, VlArbEntry, VlArbTableRepr};
use crate::subnet::QosSet;
use crate::subnet::{NodeId, Subnet};
use crate::types::Guid;
use ibsm_routing::lft::HopVls;

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
    let caps = subnet.cabled_ports().filter_map(|(_, _, slot, _)| slot.info.as_ref().map(|i| data_vls(i.vl_cap)));
    caps.fold(data_vls(config.max_op_vls), u8::min).max(1)
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

/// The QoS tables the SM last wrote or read: contents by (node GUID,
/// attribute, modifier). One table per key: a table written over forgets
/// what it held before, so writing the old contents back is a change.
#[derive(Debug, Clone, Default)]
pub struct QosCache {
    written: HashMap<(Guid, u16, u32), [u8; 64]>,
}

impl QosCache {
    pub fn remember(&mut self, guid: Guid, set: &QosSet) {
        self.written.insert((guid, set.attr.into(), set.amod), set.data);
    }
    /// Forgets what was written to `guid` (it was reset).
    pub fn forget(&mut self, guid: Guid) {
        self.written.retain(|(g, ..), _| *g != guid);
    }
    fn holds(&self, guid: Guid, set: &QosSet) -> bool {
        self.written.get(&(guid, set.attr.into(), set.amod)) == Some(&set.data)
    }
}

/// Cabled external ports of a managed node.
fn cabled(subnet: &Subnet, id: NodeId) -> Vec<u8> {
    let node = subnet.node(id);
    node.external_ports().filter(|&p| node.ports[p as usize].remote.is_some()).collect()
}

/// Which SL-to-VL tables the ports get.
#[derive(Debug, Clone, Copy)]
pub enum Sl2VlPlan<'a> {
    /// One table on every port.
    Uniform(SlToVlTableRepr),
    /// An engine that switches VL inside the fabric (dor on tori): its
    /// table per (switch, input port, output port), every SL on VL 0 at
    /// end ports. `switch_nodes[i]` is the subnet node of the routing
    /// view's switch `i`.
    PerHop { hop_vls: &'a HopVls, switch_nodes: &'a [NodeId] },
}

impl Sl2VlPlan<'_> {
    /// The table of the routing view's switch `index` for (input, output).
    fn switch_table(&self, index: u32, input: u8, output: u8) -> [u8; SL_COUNT] {
        match self {
            Sl2VlPlan::Uniform(t) => t.vl,
            Sl2VlPlan::PerHop { hop_vls, .. } => hop_vls.table(ibsm_routing::SwitchId(index), input, output),
        }
    }
}

/// The Sets that put `plan`'s tables on every managed port not yet holding
/// them. A switch that supports optimized programming takes one Set for
/// all its port pairs when the table is uniform; otherwise (and with
/// per-hop tables, which differ per pair) one per (input, output) pair of
/// cabled ports, port 0 included as an input.
pub fn sl2vl_sets(subnet: &Subnet, plan: Sl2VlPlan<'_>, cache: &QosCache) -> Vec<QosSet> {
    let routing_index: HashMap<NodeId, u32> = match plan {
        Sl2VlPlan::PerHop { hop_vls, switch_nodes } => {
            switch_nodes.iter().take(hop_vls.num_switches()).enumerate().map(|(i, &id)| (id, i as u32)).collect()
        }
        Sl2VlPlan::Uniform(_) => HashMap::new(),
    };
    let mut out = Vec::new();
    let mut push = |node: NodeId, path: DrPath, amod: u32, table: [u8; SL_COUNT]| {
        let data = SlToVlTableRepr { vl: table }.to_data();
        let set = QosSet { node, path, attr: AttributeId::SlToVlMappingTable, amod, data };
        if !cache.holds(subnet.node(node).guid(), &set) {
            out.push(set);
        }
    };
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let cabled = cabled(subnet, id);
        if !node.is_switch() {
            let table = match plan {
                Sl2VlPlan::Uniform(t) => t.vl,
                Sl2VlPlan::PerHop { .. } => [0; SL_COUNT],
            };
            for &port in &cabled {
                push(id, node.path_for_port(port), 0, table);
            }
            continue;
        }
        // The routing view's index of this switch (per-hop tables only).
        let index = match plan {
            Sl2VlPlan::Uniform(t) => {
                let optimized =
                    node.switch_info.as_ref().is_some_and(|s| s.optimized_sl_to_vl_mapping_programming != 0);
                if optimized {
                    push(id, node.path, ATTR_MOD_ALL_INPUT_PORTS | ATTR_MOD_ALL_OUTPUT_PORTS, t.vl);
                    continue;
                }
                0
            }
            Sl2VlPlan::PerHop { .. } => match routing_index.get(&id) {
                Some(&i) => i,
                None => continue,
            },
        };
        for &input in std::iter::once(&0).chain(cabled.iter()) {
            for &output in &cabled {
                if input != output {
                    push(id, node.path, attribute_modifier(input, output), plan.switch_table(index, input, output));
                }
            }
        }
    }
    out
}

/// The configured SL-to-VL table (OpenSM `qos_sl2vl`).
pub fn configured_sl2vl(qos: &QosConfig) -> SlToVlTableRepr {
    SlToVlTableRepr { vl: QosConfig::parse_sl2vl(&qos.sl2vl).unwrap_or(identity_table(15).vl) }
}

/// VLArbitration blocks for every managed cabled port: the low table in
/// blocks 1-2, the high table in blocks 3-4, each cut to what the port's
/// PortInfo.VLArbitrationLowCap / HighCap says it holds.
pub fn vlarb_sets(subnet: &Subnet, qos: &QosConfig, cache: &QosCache) -> Vec<QosSet> {
    let low = QosConfig::parse_vlarb(&qos.vlarb_low).unwrap_or_default();
    let high = QosConfig::parse_vlarb(&qos.vlarb_high).unwrap_or_default();
    let mut out = Vec::new();
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        for port in cabled(subnet, id) {
            let Some(info) = node.ports[port as usize].info.as_ref() else { continue };
            let path = node.path_for_port(port);
            let amod_port = if node.is_switch() { port } else { 0 };
            for (entries, cap, blocks) in [
                (&low, info.vl_arbitration_low_cap, [VlArbBlock::LowFirst, VlArbBlock::LowSecond]),
                (&high, info.vl_arbitration_high_cap, [VlArbBlock::HighFirst, VlArbBlock::HighSecond]),
            ] {
                let usable = &entries[..entries.len().min(cap as usize)];
                for (i, block) in blocks.into_iter().enumerate() {
                    let chunk: Vec<(u8, u8)> = usable.iter().skip(32 * i).take(32).copied().collect();
                    if chunk.is_empty() {
                        continue;
                    }
                    let mut table = VlArbTableRepr { entries: [VlArbEntry::default(); 32] };
                    for (slot, (vl, weight)) in table.entries.iter_mut().zip(chunk) {
                        *slot = VlArbEntry { vl, weight };
                    }
                    let set = QosSet {
                        node: id,
                        path,
                        attr: AttributeId::VlArbitrationTable,
                        amod: vl_arb::attribute_modifier(block, amod_port),
                        data: table.to_data(),
                    };
                    if !cache.holds(node.guid(), &set) {
                        out.push(set);
                    }
                }
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

    /// A switch's SL-to-VL table for one port pair changed for a while (dor
    /// round a switch gone) and changed back: the way back is a write.
    #[test]
    fn a_table_written_over_is_no_longer_held() {
        let guid = Guid(0x10);
        let set = |vl1: u8, amod: u32| {
            let mut data = [0u8; 64];
            data[0] = vl1;
            QosSet { node: NodeId(0), path: DrPath::default(), attr: AttributeId::SlToVlMappingTable, amod, data }
        };
        let mut cache = QosCache::default();
        cache.remember(guid, &set(0x01, 0x0102));
        assert!(cache.holds(guid, &set(0x01, 0x0102)));
        cache.remember(guid, &set(0x21, 0x0102));
        assert!(cache.holds(guid, &set(0x21, 0x0102)));
        assert!(!cache.holds(guid, &set(0x01, 0x0102)), "the first contents are gone");
        assert!(!cache.holds(guid, &set(0x21, 0x0103)), "another port pair holds nothing known");
        cache.forget(guid);
        assert!(!cache.holds(guid, &set(0x21, 0x0102)));
    }
}
