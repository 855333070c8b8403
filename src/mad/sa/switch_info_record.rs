//! SwitchInfoRecord (IBA 15.2.5.4, Table 198), 24 bytes: one switch's
//! SwitchInfo, keyed by the LID of its port 0.
//!
//! ```text
//!  0: LID (16)                 | Reserved (16)
//!  4: SwitchInfo (160 bits, IBA 14.2.5.4; offsets +4 from there)
//!       4: LinearFDBCap (16)     | RandomFDBCap (16)
//!       8: MulticastFDBCap (16)  | LinearFDBTop (16)
//!      12: DefaultPort | DefaultMulticastPrimaryPort | DefaultMulticastNotPrimaryPort
//!          | LifeTimeValue(5) PortStateChange(1) OptimizedSLtoVLMappingProgramming(2)
//!      16: LIDsPerPort (16)      | PartitionEnforcementCap (16)
//!      20: InboundEnforcementCap(1) OutboundEnforcementCap(1) FilterRawInboundCap(1)
//!          FilterRawOutboundCap(1) EnhancedPort0(1) Reserved(11) | MulticastFDBTop (16)
//! ```
//! A GetTableResp spaces records 24 bytes apart (AttributeOffset 3).
//!
//! The component bits follow SwitchInfo's fields in order. Bit 11 was a
//! reserved pair of bits in IBA 1.2 and is OptimizedSLtoVLMappingProgramming
//! since; the 11 reserved bits after EnhancedPort0 (the tail of IBA 1.2's
//! reserved run, before MulticastFDBTop was carved out of it) are one
//! component, bit 19, and MulticastFDBTop is bit 20.

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, SwitchInfo, SwitchInfoRepr, WireResult};
use crate::types::Lid;

/// SwitchInfoRecord's size on the wire.
pub const SWITCH_INFO_RECORD_LEN: usize = 24;

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const SWITCH_INFO: Range<usize> = 4..24;
}

/// SwitchInfoRecord component mask bits (IBA 15.2.5.4).
pub mod switch_info_mask {
    pub const LID: u64 = 1 << 0;
    pub const LINEAR_FDB_CAP: u64 = 1 << 2;
    pub const RANDOM_FDB_CAP: u64 = 1 << 3;
    pub const MULTICAST_FDB_CAP: u64 = 1 << 4;
    pub const LINEAR_FDB_TOP: u64 = 1 << 5;
    pub const DEFAULT_PORT: u64 = 1 << 6;
    pub const DEFAULT_MCAST_PRIMARY_PORT: u64 = 1 << 7;
    pub const DEFAULT_MCAST_NOT_PRIMARY_PORT: u64 = 1 << 8;
    pub const LIFE_TIME_VALUE: u64 = 1 << 9;
    pub const PORT_STATE_CHANGE: u64 = 1 << 10;
    pub const OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING: u64 = 1 << 11;
    pub const LIDS_PER_PORT: u64 = 1 << 12;
    pub const PARTITION_ENFORCEMENT_CAP: u64 = 1 << 13;
    pub const INBOUND_ENFORCEMENT_CAP: u64 = 1 << 14;
    pub const OUTBOUND_ENFORCEMENT_CAP: u64 = 1 << 15;
    pub const FILTER_RAW_INBOUND_CAP: u64 = 1 << 16;
    pub const FILTER_RAW_OUTBOUND_CAP: u64 = 1 << 17;
    pub const ENHANCED_PORT0: u64 = 1 << 18;
    pub const MULTICAST_FDB_TOP: u64 = 1 << 20;
}

/// A zero-copy view of one SwitchInfoRecord.
#[derive(Debug, Clone, Copy)]
pub struct SwitchInfoRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SwitchInfoRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("SwitchInfoRecord", buffer.as_ref(), SWITCH_INFO_RECORD_LEN)?;
        Ok(SwitchInfoRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The switch's port 0 LID.
    pub fn lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::LID))
    }
    pub fn switch_info(&self) -> SwitchInfo<&[u8]> {
        SwitchInfo::new_checked(&self.b()[field::SWITCH_INFO]).expect("SwitchInfoRecord's length was checked")
    }
}

/// The owned form of a SwitchInfoRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchInfoRecordRepr {
    pub lid: Lid,
    pub switch_info: SwitchInfoRepr,
}

impl SwitchInfoRecordRepr {
    pub fn parse<T: AsRef<[u8]>>(r: &SwitchInfoRecord<T>) -> WireResult<Self> {
        Ok(SwitchInfoRecordRepr { lid: r.lid(), switch_info: SwitchInfoRepr::parse(&r.switch_info())? })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&SwitchInfoRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        SWITCH_INFO_RECORD_LEN
    }

    /// Writes all 24 bytes, reserved bits zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("SwitchInfoRecord", out, SWITCH_INFO_RECORD_LEN)?;
        let out = &mut out[..SWITCH_INFO_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid.0);
        self.switch_info.emit(&mut SwitchInfo::new_checked(&mut out[field::SWITCH_INFO])?);
        Ok(())
    }
}

/// Where SwitchInfo starts, in bytes.
const SI: u16 = 4;

impl SaRecord for SwitchInfoRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::SwitchInfoRecord;
    const LEN: usize = SWITCH_INFO_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 2),
        Component::bytes(2, 2),
        Component::bytes(SI, 2),
        Component::bytes(SI + 2, 2),
        Component::bytes(SI + 4, 2),
        Component::bytes(SI + 6, 2),
        Component::bytes(SI + 8, 1),
        Component::bytes(SI + 9, 1),
        Component::bytes(SI + 10, 1),
        Component::at(SI + 11, 0, 5),
        Component::at(SI + 11, 5, 1),
        Component::at(SI + 11, 6, 2),
        Component::bytes(SI + 12, 2),
        Component::bytes(SI + 14, 2),
        Component::at(SI + 16, 0, 1),
        Component::at(SI + 16, 1, 1),
        Component::at(SI + 16, 2, 1),
        Component::at(SI + 16, 3, 1),
        Component::at(SI + 16, 4, 1),
        Component::at(SI + 16, 5, 11),
        Component::bytes(SI + 18, 2),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        SwitchInfoRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        SwitchInfoRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::component_checks::{assert_fields_and_reserved, assert_tiles};
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    /// Table 198 by hand, every field a different value.
    fn hand_built() -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..2].copy_from_slice(&[0x00, 0x07]); // LID 7
        b[4..12].copy_from_slice(&[0xc0, 0x00, 0x00, 0x10, 0x04, 0x00, 0x00, 0x21]);
        b[12..16].copy_from_slice(&[1, 2, 3, 0x9e]); // ports, LifeTime 19, PSC, OptSLtoVL 2
        b[16..20].copy_from_slice(&[0x00, 0x01, 0x00, 0x20]);
        b[20] = 0xa8; // inbound, raw inbound, EnhancedPort0
        b[22..24].copy_from_slice(&[0xc0, 0x05]);
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = SwitchInfoRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.lid, Lid(7));
        let si = &r.switch_info;
        assert_eq!(
            (si.linear_fdb_cap, si.random_fdb_cap, si.multicast_fdb_cap, si.linear_fdb_top),
            (0xc000, 0x10, 0x400, 0x21)
        );
        assert_eq!((si.default_port, si.default_mcast_primary_port, si.default_mcast_not_primary_port), (1, 2, 3));
        assert_eq!(
            (si.life_time_value, si.port_state_change, si.optimized_sl_to_vl_mapping_programming),
            (19, true, 2)
        );
        assert_eq!((si.lids_per_port, si.partition_enforcement_cap), (1, 32));
        assert!(si.inbound_enforcement_cap && !si.outbound_enforcement_cap);
        assert!(si.filter_raw_inbound_cap && !si.filter_raw_outbound_cap && si.enhanced_port0);
        assert_eq!(si.multicast_fdb_top, 0xc005);
        let mut out = [0xAAu8; 24];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(SwitchInfoRecord::new_checked(&b[..]).unwrap().switch_info().linear_fdb_top(), 0x21);
    }

    #[test]
    fn every_field_round_trips() {
        let r = SwitchInfoRecordRepr {
            lid: Lid(0xBFFF),
            switch_info: SwitchInfoRepr {
                linear_fdb_cap: 0xbfff,
                random_fdb_cap: 1,
                multicast_fdb_cap: 0x3fff,
                linear_fdb_top: 0x1234,
                default_port: 255,
                default_mcast_primary_port: 254,
                default_mcast_not_primary_port: 253,
                life_time_value: 31,
                port_state_change: false,
                optimized_sl_to_vl_mapping_programming: 3,
                lids_per_port: 0xffff,
                partition_enforcement_cap: 0x8000,
                inbound_enforcement_cap: false,
                outbound_enforcement_cap: true,
                filter_raw_inbound_cap: false,
                filter_raw_outbound_cap: true,
                enhanced_port0: false,
                multicast_fdb_top: 0xffff,
            },
        };
        let b = SaRecord::to_bytes(&r);
        assert_eq!(SwitchInfoRecordRepr::parse_bytes(&b).unwrap(), r);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            SwitchInfoRecordRepr::parse_bytes(&hand_built()[..23]),
            Err(WireError::Truncated { what: "SwitchInfoRecord", len: 23, need: 24 })
        );
        assert!(SwitchInfoRecordRepr::default().emit(&mut [0u8; 20]).is_err());
    }

    #[test]
    fn the_table_tiles_the_record() {
        assert_tiles::<SwitchInfoRecordRepr>();
        assert_fields_and_reserved::<SwitchInfoRecordRepr>(&[1, 19], &[]);
        assert_eq!(SwitchInfoRecordRepr::attribute_offset(), 3);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = SwitchInfoRecordRepr::COMPONENTS;
        let a = SwitchInfoRecordRepr::parse_bytes(&hand_built()).unwrap();
        let mut b = a;
        b.switch_info.port_state_change = false;
        b.switch_info.multicast_fdb_top = 0xc000;
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let same = switch_info_mask::LID
            | switch_info_mask::LIFE_TIME_VALUE
            | switch_info_mask::OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING
            | switch_info_mask::ENHANCED_PORT0;
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, switch_info_mask::PORT_STATE_CHANGE, &qa, &qb));
        assert!(!components_match(c, switch_info_mask::MULTICAST_FDB_TOP, &qa, &qb));
    }
}
