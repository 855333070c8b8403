//! Nodes for the programming pass's unit tests: a switch or CA inserted
//! into a [`Subnet`] with every port ACTIVE.

use crate::mad::{DrPath, NodeInfoRepr, NodeType, PortInfoRepr, PortState};
use crate::subnet::{NodeId, Subnet};
use crate::types::{Guid, Lid};

/// Inserts a node of `kind` with GUID `guid`, `ports` ports (a CA has
/// one) and LID `lid` on its port 0 (a switch) or port 1 (a CA).
pub fn add(subnet: &mut Subnet, guid: u64, kind: NodeType, ports: u8, lid: u16) -> NodeId {
    let info = NodeInfoRepr {
        base_version: 1,
        class_version: 1,
        node_type: kind,
        num_ports: if kind == NodeType::Switch { ports } else { 1 },
        system_image_guid: Guid(guid),
        node_guid: Guid(guid),
        port_guid: Guid(guid),
        partition_cap: 1,
        device_id: 0,
        revision: 0,
        local_port_num: 1,
        vendor_id: 0,
    };
    let (id, _) = subnet.insert(info, DrPath::local());
    let lid_port = if kind == NodeType::Switch { 0 } else { 1 };
    for (p, port) in subnet.node_mut(id).ports.iter_mut().enumerate() {
        let lid = if p == lid_port { Lid(lid) } else { Lid(0) };
        port.info = Some(PortInfoRepr { lid, port_state: PortState::Active, ..PortInfoRepr::default() });
    }
    id
}
