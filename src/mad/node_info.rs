//! NodeInfo (IBA 14.2.5.3): what a node is and how many ports it
//! has. Read-only; the SM reads it at every node it discovers.
//!
//! ```text
//!  0: BaseVersion (8) | ClassVersion (8) | NodeType (8) | NumPorts (8)
//!  4: SystemImageGUID (64)
//! 12: NodeGUID (64)
//! 20: PortGUID (64)
//! 28: PartitionCap (16) | DeviceID (16)
//! 32: Revision (32)
//! 36: LocalPortNum (8) | VendorID (24)
//! ```

use super::codes::open_enum;
use super::{attribute_view, be, AttributeId, WireResult};
use crate::types::Guid;

mod field {
    pub const BASE_VERSION: usize = 0;
    pub const CLASS_VERSION: usize = 1;
    pub const NODE_TYPE: usize = 2;
    pub const NUM_PORTS: usize = 3;
    pub const SYSTEM_IMAGE_GUID: usize = 4;
    pub const NODE_GUID: usize = 12;
    pub const PORT_GUID: usize = 20;
    pub const PARTITION_CAP: usize = 28;
    pub const DEVICE_ID: usize = 30;
    pub const REVISION: usize = 32;
    pub const LOCAL_PORT_NUM: usize = 36;
    pub const VENDOR_ID: usize = 37;
    pub const LEN: usize = 40;
}

open_enum! {
    /// NodeInfo.NodeType (IBA 14.2.5.3). 0 and 4-255 are reserved; they are
    /// kept as `Unknown` so the SM can log and skip such a node.
    NodeType: u8 {
        Ca = 1,
        Switch = 2,
        Router = 3,
    }
}

attribute_view! {
    /// A zero-copy view of a NodeInfo attribute (40 bytes).
    NodeInfo, NodeInfoRepr, "NodeInfo", field::LEN, AttributeId::NodeInfo
}

impl<T: AsRef<[u8]>> NodeInfo<T> {
    /// Byte 0: MAD base version the node supports (1).
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }
    /// Byte 1: SM class version the node supports (1).
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }
    /// Byte 2: 1 CA, 2 switch, 3 router.
    pub fn node_type(&self) -> NodeType {
        self.buffer.as_ref()[field::NODE_TYPE].into()
    }
    /// Byte 3: physical ports on the node (a switch's port 0 not counted).
    pub fn num_ports(&self) -> u8 {
        self.buffer.as_ref()[field::NUM_PORTS]
    }
    /// Bytes 4-11: GUID shared by all nodes of one system; 0 if not supported.
    pub fn system_image_guid(&self) -> Guid {
        Guid(be::u64(self.buffer.as_ref(), field::SYSTEM_IMAGE_GUID))
    }
    /// Bytes 12-19.
    pub fn node_guid(&self) -> Guid {
        Guid(be::u64(self.buffer.as_ref(), field::NODE_GUID))
    }
    /// Bytes 20-27: GUID of the port the SMP arrived on (port 0 for a switch).
    pub fn port_guid(&self) -> Guid {
        Guid(be::u64(self.buffer.as_ref(), field::PORT_GUID))
    }
    /// Bytes 28-29: P_Key table entries per port (for a switch: port 0).
    pub fn partition_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PARTITION_CAP)
    }
    /// Bytes 30-31: vendor-assigned device ID.
    pub fn device_id(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DEVICE_ID)
    }
    /// Bytes 32-35: vendor-assigned device revision.
    pub fn revision(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::REVISION)
    }
    /// Byte 36: the port the SMP arrived on; this is how directed-route
    /// discovery learns the far end of a link.
    pub fn local_port_num(&self) -> u8 {
        self.buffer.as_ref()[field::LOCAL_PORT_NUM]
    }
    /// Bytes 37-39: IEEE OUI of the vendor (24 bits).
    pub fn vendor_id(&self) -> u32 {
        be::u24(self.buffer.as_ref(), field::VENDOR_ID)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NodeInfo<T> {
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }
    pub fn set_node_type(&mut self, v: NodeType) {
        self.buffer.as_mut()[field::NODE_TYPE] = v.into();
    }
    pub fn set_num_ports(&mut self, v: u8) {
        self.buffer.as_mut()[field::NUM_PORTS] = v;
    }
    pub fn set_system_image_guid(&mut self, v: Guid) {
        be::set_u64(self.buffer.as_mut(), field::SYSTEM_IMAGE_GUID, v.0);
    }
    pub fn set_node_guid(&mut self, v: Guid) {
        be::set_u64(self.buffer.as_mut(), field::NODE_GUID, v.0);
    }
    pub fn set_port_guid(&mut self, v: Guid) {
        be::set_u64(self.buffer.as_mut(), field::PORT_GUID, v.0);
    }
    pub fn set_partition_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PARTITION_CAP, v);
    }
    pub fn set_device_id(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DEVICE_ID, v);
    }
    pub fn set_revision(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::REVISION, v);
    }
    pub fn set_local_port_num(&mut self, v: u8) {
        self.buffer.as_mut()[field::LOCAL_PORT_NUM] = v;
    }
    /// Stores the low 24 bits.
    pub fn set_vendor_id(&mut self, v: u32) {
        be::set_u24(self.buffer.as_mut(), field::VENDOR_ID, v);
    }
}

/// The owned form of NodeInfo. Every value is accepted as read (a switch
/// reporting 0 ports is for the SM to judge, not the decoder).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeInfoRepr {
    pub base_version: u8,
    pub class_version: u8,
    pub node_type: NodeType,
    pub num_ports: u8,
    pub system_image_guid: Guid,
    pub node_guid: Guid,
    pub port_guid: Guid,
    pub partition_cap: u16,
    pub device_id: u16,
    pub revision: u32,
    pub local_port_num: u8,
    /// 24 bits; emit drops anything above.
    pub vendor_id: u32,
}

impl NodeInfoRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &NodeInfo<T>) -> WireResult<Self> {
        Ok(NodeInfoRepr {
            base_version: v.base_version(),
            class_version: v.class_version(),
            node_type: v.node_type(),
            num_ports: v.num_ports(),
            system_image_guid: v.system_image_guid(),
            node_guid: v.node_guid(),
            port_guid: v.port_guid(),
            partition_cap: v.partition_cap(),
            device_id: v.device_id(),
            revision: v.revision(),
            local_port_num: v.local_port_num(),
            vendor_id: v.vendor_id(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut NodeInfo<T>) {
        v.set_base_version(self.base_version);
        v.set_class_version(self.class_version);
        v.set_node_type(self.node_type);
        v.set_num_ports(self.num_ports);
        v.set_system_image_guid(self.system_image_guid);
        v.set_node_guid(self.node_guid);
        v.set_port_guid(self.port_guid);
        v.set_partition_cap(self.partition_cap);
        v.set_device_id(self.device_id);
        v.set_revision(self.revision);
        v.set_local_port_num(self.local_port_num);
        v.set_vendor_id(self.vendor_id);
    }

    pub fn is_switch(&self) -> bool {
        self.node_type == NodeType::Switch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    fn sample() -> NodeInfoRepr {
        NodeInfoRepr {
            base_version: 1,
            class_version: 1,
            node_type: NodeType::Switch,
            num_ports: 36,
            system_image_guid: Guid(0x0002_c903_0000_1234),
            node_guid: Guid(0x0002_c903_0000_5678),
            port_guid: Guid(0x0002_c903_0000_9abc),
            partition_cap: 8,
            device_id: 0xc738,
            revision: 0xa0,
            local_port_num: 7,
            vendor_id: 0x0002c9,
        }
    }

    #[test]
    fn layout() {
        let b = sample().to_bytes();
        assert_eq!(&b[0..4], &[1, 1, 2, 36]);
        assert_eq!(&b[12..20], &[0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x56, 0x78]);
        assert_eq!(&b[28..32], &[0, 8, 0xc7, 0x38]);
        assert_eq!(&b[36..40], &[7, 0x00, 0x02, 0xc9]);
        assert!(b[40..].iter().all(|&x| x == 0));
        assert_eq!(NodeInfoRepr::parse_bytes(&b).unwrap(), sample());
    }

    #[test]
    fn reserved_node_types_are_data() {
        let mut b = sample().to_bytes();
        b[2] = 0;
        assert_eq!(NodeInfoRepr::parse_bytes(&b).unwrap().node_type, NodeType::Unknown(0));
        b[2] = 9;
        assert_eq!(NodeInfoRepr::parse_bytes(&b).unwrap().to_bytes(), b);
    }

    #[test]
    fn truncated() {
        let b = sample().to_bytes();
        for n in 0..field::LEN {
            assert_eq!(
                NodeInfoRepr::parse_bytes(&b[..n]),
                Err(WireError::Truncated { what: "NodeInfo", len: n, need: field::LEN })
            );
        }
        assert!(NodeInfoRepr::parse_bytes(&b[..field::LEN]).is_ok());
    }

    proptest! {
        #[test]
        fn round_trip(bv: u8, cv: u8, nt: u8, np: u8, sg: u64, ng: u64, pg: u64, pc: u16, dev: u16, rev: u32,
                      lp: u8, vid in 0u32..=0xff_ffff) {
            let r = NodeInfoRepr {
                base_version: bv, class_version: cv, node_type: nt.into(), num_ports: np,
                system_image_guid: Guid(sg), node_guid: Guid(ng), port_guid: Guid(pg),
                partition_cap: pc, device_id: dev, revision: rev, local_port_num: lp, vendor_id: vid,
            };
            prop_assert_eq!(NodeInfoRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
        }
    }
}
