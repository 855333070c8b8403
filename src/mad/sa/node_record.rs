//! NodeRecord (IBA 15.2.5.2, Table 196), 108 bytes: one per port the SA
//! knows (a switch has one, for port 0), keyed by the port's LID.
//!
//! ```text
//!   0: LID (16)              | Reserved (16)
//!   4: NodeInfo (320 bits, IBA 14.2.5.3)
//!        4: BaseVersion | ClassVersion | NodeType | NumPorts
//!        8: SystemImageGUID (64)
//!       16: NodeGUID (64)
//!       24: PortGUID (64)
//!       32: PartitionCap (16) | DeviceID (16)
//!       36: Revision (32)
//!       40: LocalPortNum (8) | VendorID (24)
//!  44: NodeDescription (512 bits, IBA 14.2.5.2)
//! ```
//! A GetTableResp spaces records 112 bytes apart (AttributeOffset 14).

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, NodeDescription, NodeDescriptionRepr, NodeInfo, NodeInfoRepr, WireResult};
use crate::types::Lid;

/// NodeRecord's size on the wire.
pub const NODE_RECORD_LEN: usize = 108;

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const NODE_INFO: Range<usize> = 4..44;
    pub const NODE_DESCRIPTION: Range<usize> = 44..108;
}

/// NodeRecord component mask bits (IBA 15.2.5.2: LID, the reserved half
/// word, NodeInfo's fields in order, NodeDescription).
pub mod node_mask {
    pub const LID: u64 = 1 << 0;
    pub const BASE_VERSION: u64 = 1 << 2;
    pub const CLASS_VERSION: u64 = 1 << 3;
    pub const NODE_TYPE: u64 = 1 << 4;
    pub const NUM_PORTS: u64 = 1 << 5;
    pub const SYSTEM_IMAGE_GUID: u64 = 1 << 6;
    pub const NODE_GUID: u64 = 1 << 7;
    pub const PORT_GUID: u64 = 1 << 8;
    pub const PARTITION_CAP: u64 = 1 << 9;
    pub const DEVICE_ID: u64 = 1 << 10;
    pub const REVISION: u64 = 1 << 11;
    pub const LOCAL_PORT_NUM: u64 = 1 << 12;
    pub const VENDOR_ID: u64 = 1 << 13;
    pub const NODE_DESCRIPTION: u64 = 1 << 14;
}

/// A zero-copy view of one NodeRecord.
#[derive(Debug, Clone, Copy)]
pub struct NodeRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NodeRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("NodeRecord", buffer.as_ref(), NODE_RECORD_LEN)?;
        Ok(NodeRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The port's LID (for a switch, port 0's).
    pub fn lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::LID))
    }
    pub fn node_info(&self) -> NodeInfo<&[u8]> {
        NodeInfo::new_checked(&self.b()[field::NODE_INFO]).expect("NodeRecord's length was checked")
    }
    pub fn node_description(&self) -> NodeDescription<&[u8]> {
        NodeDescription::new_checked(&self.b()[field::NODE_DESCRIPTION]).expect("NodeRecord's length was checked")
    }
}

/// The owned form of a NodeRecord.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecordRepr {
    pub lid: Lid,
    pub node_info: NodeInfoRepr,
    pub node_description: NodeDescriptionRepr,
}

impl NodeRecordRepr {
    pub fn parse<T: AsRef<[u8]>>(r: &NodeRecord<T>) -> WireResult<Self> {
        Ok(NodeRecordRepr {
            lid: r.lid(),
            node_info: NodeInfoRepr::parse(&r.node_info())?,
            node_description: NodeDescriptionRepr::parse(&r.node_description())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&NodeRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        NODE_RECORD_LEN
    }

    /// Writes all 108 bytes, the reserved half word zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("NodeRecord", out, NODE_RECORD_LEN)?;
        let out = &mut out[..NODE_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid.0);
        self.node_info.emit(&mut NodeInfo::new_checked(&mut out[field::NODE_INFO])?);
        self.node_description.emit(&mut NodeDescription::new_checked(&mut out[field::NODE_DESCRIPTION])?);
        Ok(())
    }
}

impl Default for NodeRecordRepr {
    /// All zeros (NodeType 0 is reserved, kept as `Unknown(0)`).
    fn default() -> Self {
        NodeRecordRepr::parse_bytes(&[0u8; NODE_RECORD_LEN]).expect("108 zero bytes are a NodeRecord")
    }
}

/// Where NodeInfo starts, in bytes.
const NI: u16 = 4;

impl SaRecord for NodeRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::NodeRecord;
    const LEN: usize = NODE_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 2),
        Component::bytes(2, 2),
        Component::bytes(NI, 1),
        Component::bytes(NI + 1, 1),
        Component::bytes(NI + 2, 1),
        Component::bytes(NI + 3, 1),
        Component::bytes(NI + 4, 8),
        Component::bytes(NI + 12, 8),
        Component::bytes(NI + 20, 8),
        Component::bytes(NI + 28, 2),
        Component::bytes(NI + 30, 2),
        Component::bytes(NI + 32, 4),
        Component::bytes(NI + 36, 1),
        Component::bytes(NI + 37, 3),
        Component::bytes(44, 64),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        NodeRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        NodeRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::component_checks::{assert_fields_and_reserved, assert_tiles};
    use crate::mad::sa::components_match;
    use crate::mad::{NodeType, WireError};
    use crate::types::Guid;

    /// Table 196 by hand: a 36-port switch at LID 0x0102.
    fn hand_built() -> [u8; 108] {
        let mut b = [0u8; 108];
        b[0..4].copy_from_slice(&[0x01, 0x02, 0, 0]);
        b[4..8].copy_from_slice(&[1, 1, 2, 36]);
        b[8..16].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x11]);
        b[16..24].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x22]);
        b[24..32].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x33]);
        b[32..36].copy_from_slice(&[0x00, 0x08, 0xc7, 0x38]);
        b[36..40].copy_from_slice(&[0x00, 0x00, 0x00, 0xa0]);
        b[40..44].copy_from_slice(&[0x05, 0x00, 0x02, 0xc9]);
        b[44..58].copy_from_slice(b"ibsim switch 1");
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = NodeRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.lid, Lid(0x0102));
        let ni = &r.node_info;
        assert_eq!((ni.base_version, ni.class_version, ni.node_type, ni.num_ports), (1, 1, NodeType::Switch, 36));
        assert_eq!(ni.system_image_guid, Guid(0x0002_c903_0000_0011));
        assert_eq!(ni.node_guid, Guid(0x0002_c903_0000_0022));
        assert_eq!(ni.port_guid, Guid(0x0002_c903_0000_0033));
        assert_eq!((ni.partition_cap, ni.device_id, ni.revision), (8, 0xc738, 0xa0));
        assert_eq!((ni.local_port_num, ni.vendor_id), (5, 0x0002c9));
        assert_eq!(r.node_description.text, "ibsim switch 1");
        let mut out = [0xAAu8; 108];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        let v = NodeRecord::new_checked(&b[..]).unwrap();
        assert_eq!(v.node_info().node_guid(), Guid(0x0002_c903_0000_0022));
        assert_eq!(v.node_description().text_bytes(), b"ibsim switch 1");
    }

    #[test]
    fn every_field_round_trips() {
        let r = NodeRecordRepr {
            lid: Lid(0xBFFF),
            node_info: NodeInfoRepr {
                base_version: 2,
                class_version: 3,
                node_type: NodeType::Unknown(9),
                num_ports: 254,
                system_image_guid: Guid(1),
                node_guid: Guid(u64::MAX),
                port_guid: Guid(0x1234_5678_9abc_def0),
                partition_cap: 0xffff,
                device_id: 0x1003,
                revision: 0xdead_beef,
                local_port_num: 0xff,
                vendor_id: 0xff_ffff,
            },
            node_description: NodeDescriptionRepr::new("x".repeat(64)),
        };
        let b = SaRecord::to_bytes(&r);
        assert_eq!(&b[2..4], &[0, 0], "reserved");
        assert_eq!(NodeRecordRepr::parse_bytes(&b).unwrap(), r);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            NodeRecordRepr::parse_bytes(&hand_built()[..107]),
            Err(WireError::Truncated { what: "NodeRecord", len: 107, need: 108 })
        );
        assert!(NodeRecordRepr::default().emit(&mut [0u8; 64]).is_err());
    }

    #[test]
    fn the_table_tiles_the_record_with_one_reserved_component() {
        assert_tiles::<NodeRecordRepr>();
        assert_fields_and_reserved::<NodeRecordRepr>(&[1], &[]);
        assert_eq!(NodeRecordRepr::COMPONENTS.len(), 15);
        assert_eq!(NodeRecordRepr::attribute_offset(), 14);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = NodeRecordRepr::COMPONENTS;
        let a = NodeRecordRepr::parse_bytes(&hand_built()).unwrap();
        let mut b = a.clone();
        b.node_info.port_guid = Guid(0x99);
        b.lid = Lid(7);
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let same = node_mask::NODE_GUID | node_mask::NODE_TYPE | node_mask::NODE_DESCRIPTION | node_mask::VENDOR_ID;
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, node_mask::PORT_GUID, &qa, &qb));
        assert!(!components_match(c, node_mask::LID, &qa, &qb));
        b.node_description.text.push('!');
        assert!(!components_match(c, node_mask::NODE_DESCRIPTION, &qa, &SaRecord::to_bytes(&b)));
    }
}
