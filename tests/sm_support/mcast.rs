//! Multicast checks for whole-SM tests: every switch's MFT entry for an
//! MLID read back with SubnGet, and a flood through those entries.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ibsm::mad::{AttributeId, MftBlockRepr, SmpAttribute};
use ibsm::subnet::{NodeId, Subnet};
use ibsm::transport::{SmpClient, Transport};
use ibsm::types::{Guid, Lid};

/// Every switch's MFT entry for `mlid`, read with SubnGet from `probe`:
/// the output ports, by switch node.
pub async fn mft_of<T: Transport>(probe: &SmpClient<T>, subnet: &Subnet, mlid: Lid) -> BTreeMap<NodeId, BTreeSet<u8>> {
    let off = (mlid.0 - 0xC000) as u32;
    let (block, index) = (off / 32, (off % 32) as usize);
    let mut out = BTreeMap::new();
    for id in subnet.switches() {
        let lid = subnet.current_lid(id, 0).expect("switch LID");
        let positions = subnet.node(id).info.num_ports / 16 + 1;
        let mut ports = BTreeSet::new();
        for pos in 0..positions {
            let amod = ibsm::mad::mft::attribute_modifier(block as u16, pos);
            let smp = probe.lid_get(lid, AttributeId::MulticastForwardingTable, amod).await.unwrap();
            let mask = MftBlockRepr::parse_data(&smp.data).unwrap().port_masks[index];
            for bit in 0..16u8 {
                if mask & (1 << bit) != 0 {
                    ports.insert(pos * 16 + bit);
                }
            }
        }
        out.insert(id, ports);
    }
    out
}

/// Why a flood through MFT entries is wrong.
pub fn flood_fault(subnet: &Subnet, mft: &BTreeMap<NodeId, BTreeSet<u8>>, members: &BTreeSet<Guid>) -> Option<String> {
    let end_of: HashMap<Guid, (NodeId, u8)> = subnet
        .ids()
        .filter(|&id| !subnet.node(id).is_switch())
        .map(|id| (subnet.node(id).port_guid(1), (id, 1)))
        .collect();
    for &from in members {
        let (node, port) = end_of[&from];
        let (sw, in_port) = subnet.node(node).ports[port as usize].remote.expect("cabled");
        let mut reached = BTreeSet::new();
        let mut entered = BTreeSet::new();
        let mut queue = vec![(sw, in_port)];
        while let Some((sw, in_port)) = queue.pop() {
            if !entered.insert(sw) {
                return Some(format!("the flood from {from} enters switch {sw:?} twice: a loop or a second path"));
            }
            for &out in mft.get(&sw).into_iter().flatten() {
                if out == in_port || out == 0 {
                    continue;
                }
                let Some((far, far_port)) = subnet.node(sw).ports[out as usize].remote else {
                    return Some(format!("{sw:?} port {out} is not cabled"));
                };
                if subnet.node(far).is_switch() {
                    queue.push((far, far_port));
                } else {
                    let g = subnet.node(far).port_guid(far_port);
                    if !members.contains(&g) {
                        return Some(format!("the flood from {from} reaches non-member {g}"));
                    }
                    if !reached.insert(g) {
                        return Some(format!("the flood from {from} reaches {g} twice"));
                    }
                }
            }
        }
        let others: BTreeSet<Guid> = members.iter().copied().filter(|&g| g != from).collect();
        if reached != others {
            return Some(format!(
                "the flood from {from} reaches {reached:?}, not exactly the other members {others:?}"
            ));
        }
    }
    None
}

/// Floods from every member: each must reach every other member exactly
/// once and no other end port, and enter no switch twice.
pub fn check_flood(subnet: &Subnet, mft: &BTreeMap<NodeId, BTreeSet<u8>>, members: &BTreeSet<Guid>) {
    if let Some(fault) = flood_fault(subnet, mft, members) {
        panic!("{fault}");
    }
}
