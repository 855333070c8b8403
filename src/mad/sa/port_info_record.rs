//! PortInfoRecord (IBA 15.2.5.3, Table 197), 68 bytes: one port's
//! PortInfo, keyed by the LID of the end port (for a switch: port 0's) and
//! the port number.
//!
//! ```text
//!  0: EndportLID (16)  | PortNum (8) | Options (8)
//!  4: PortInfo (512 bits, IBA 14.2.5.6 Table 157; offsets +4 from there)
//!       4: M_Key (64)
//!      12: GidPrefix (64)
//!      20: LID (16)                     | MasterSMLID (16)
//!      24: CapabilityMask (32)
//!      28: DiagCode (16)                | M_KeyLeasePeriod (16)
//!      32: LocalPortNum | LinkWidthEnabled | LinkWidthSupported | LinkWidthActive
//!      36: LinkSpeedSupported(4) PortState(4) | PortPhysicalState(4) LinkDownDefaultState(4)
//!          | M_KeyProtectBits(2) rsvd(3) LMC(3) | LinkSpeedActive(4) LinkSpeedEnabled(4)
//!      40: NeighborMTU(4) MasterSMSL(4) | VLCap(4) InitType(4) | VLHighLimit | VLArbitrationHighCap
//!      44: VLArbitrationLowCap | InitTypeReply(4) MTUCap(4) | VLStallCount(3) HOQLife(5)
//!          | OperationalVLs(4) PartEnfIn(1) PartEnfOut(1) FilterRawIn(1) FilterRawOut(1)
//!      48: M_KeyViolations (16)         | P_KeyViolations (16)
//!      52: Q_KeyViolations (16)         | GUIDCap (8) | ClientReregister(1) McastPKeyTrapSuppr(2) SubnetTimeOut(5)
//!      56: rsvd(3) RespTimeValue(5) | LocalPhyErrors(4) OverrunErrors(4) | MaxCreditHint (16)
//!      60: rsvd, IBA 1.7 LinkSpeedExt*2 (8) | LinkRoundTripLatency (24)
//!      64: CapabilityMask2 (16)         | LinkSpeedExtActive(4) LinkSpeedExtSupported(4) | rsvd(3) LinkSpeedExtEnabled(5)
//! ```
//! A GetTableResp spaces records 72 bytes apart (AttributeOffset 9).
//!
//! # Matching beyond equality
//! With bit 31 of a Get/GetTable AttributeModifier set
//! ([`ATTR_MOD_CAPABILITY_MASK_MATCH`], IBA 1.2 errata, advertised by
//! ClassPortInfo `IsPortInfoCapMaskMatchSupported`), the CapabilityMask and
//! CapabilityMask2 components match a record that has at least the query's
//! bits set, not exactly them. Options bit 7 ([`options::QDR_NOT_OVERLOADED`])
//! is not a match rule: it tells the SA the requester reads the extended
//! speed fields, so it need not fold an FDR/EDR link into the legacy
//! LinkSpeed fields as QDR.

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, PortInfo, PortInfoRepr, WireResult};
use crate::types::Lid;

/// PortInfoRecord's size on the wire.
pub const PORT_INFO_RECORD_LEN: usize = 68;

/// Bit 31 of a PortInfoRecord Get/GetTable AttributeModifier: match the
/// capability masks as "these bits set" (see the module docs).
pub const ATTR_MOD_CAPABILITY_MASK_MATCH: u32 = 1 << 31;

/// PortInfoRecord.Options bits (IBA 1.2.1).
pub mod options {
    /// The requester understands the LinkSpeedExt fields: report LinkSpeed
    /// as the port has it, without adding QDR for an extended-speed link.
    pub const QDR_NOT_OVERLOADED: u8 = 0x80;
}

mod field {
    use std::ops::Range;
    pub const ENDPORT_LID: usize = 0;
    pub const PORT_NUM: usize = 2;
    pub const OPTIONS: usize = 3;
    pub const PORT_INFO: Range<usize> = 4..68;
}

/// PortInfoRecord component mask bits (IBA 15.2.5.3): the three record
/// fields, then every PortInfo field of Table 157 in order, reserved runs
/// included. OpenSM's names (`IB_PIR_COMPMASK_*`) are the same bits.
pub mod port_info_mask {
    pub const ENDPORT_LID: u64 = 1 << 0;
    pub const PORT_NUM: u64 = 1 << 1;
    pub const OPTIONS: u64 = 1 << 2;
    pub const M_KEY: u64 = 1 << 3;
    pub const GID_PREFIX: u64 = 1 << 4;
    pub const LID: u64 = 1 << 5;
    pub const MASTER_SM_LID: u64 = 1 << 6;
    pub const CAPABILITY_MASK: u64 = 1 << 7;
    pub const DIAG_CODE: u64 = 1 << 8;
    pub const M_KEY_LEASE_PERIOD: u64 = 1 << 9;
    pub const LOCAL_PORT_NUM: u64 = 1 << 10;
    pub const LINK_WIDTH_ENABLED: u64 = 1 << 11;
    pub const LINK_WIDTH_SUPPORTED: u64 = 1 << 12;
    pub const LINK_WIDTH_ACTIVE: u64 = 1 << 13;
    pub const LINK_SPEED_SUPPORTED: u64 = 1 << 14;
    pub const PORT_STATE: u64 = 1 << 15;
    pub const PORT_PHYSICAL_STATE: u64 = 1 << 16;
    pub const LINK_DOWN_DEFAULT_STATE: u64 = 1 << 17;
    pub const M_KEY_PROTECT_BITS: u64 = 1 << 18;
    /// Bit 19: the 3 reserved bits before LMC.
    pub const LMC: u64 = 1 << 20;
    pub const LINK_SPEED_ACTIVE: u64 = 1 << 21;
    pub const LINK_SPEED_ENABLED: u64 = 1 << 22;
    pub const NEIGHBOR_MTU: u64 = 1 << 23;
    pub const MASTER_SM_SL: u64 = 1 << 24;
    pub const VL_CAP: u64 = 1 << 25;
    pub const INIT_TYPE: u64 = 1 << 26;
    pub const VL_HIGH_LIMIT: u64 = 1 << 27;
    pub const VL_ARBITRATION_HIGH_CAP: u64 = 1 << 28;
    pub const VL_ARBITRATION_LOW_CAP: u64 = 1 << 29;
    pub const INIT_TYPE_REPLY: u64 = 1 << 30;
    pub const MTU_CAP: u64 = 1 << 31;
    pub const VL_STALL_COUNT: u64 = 1 << 32;
    pub const HOQ_LIFE: u64 = 1 << 33;
    pub const OPERATIONAL_VLS: u64 = 1 << 34;
    pub const PARTITION_ENFORCEMENT_INBOUND: u64 = 1 << 35;
    pub const PARTITION_ENFORCEMENT_OUTBOUND: u64 = 1 << 36;
    pub const FILTER_RAW_INBOUND: u64 = 1 << 37;
    pub const FILTER_RAW_OUTBOUND: u64 = 1 << 38;
    pub const M_KEY_VIOLATIONS: u64 = 1 << 39;
    pub const P_KEY_VIOLATIONS: u64 = 1 << 40;
    pub const Q_KEY_VIOLATIONS: u64 = 1 << 41;
    pub const GUID_CAP: u64 = 1 << 42;
    pub const CLIENT_REREGISTER: u64 = 1 << 43;
    /// Reserved in IBA 1.2 (OpenSM still calls it RESV3); the field of
    /// these two bits since.
    pub const MULTICAST_PKEY_TRAP_SUPPRESSION_ENABLED: u64 = 1 << 44;
    pub const SUBNET_TIMEOUT: u64 = 1 << 45;
    /// Bit 46: the 3 reserved bits before RespTimeValue.
    pub const RESP_TIME_VALUE: u64 = 1 << 47;
    pub const LOCAL_PHY_ERRORS: u64 = 1 << 48;
    pub const OVERRUN_ERRORS: u64 = 1 << 49;
    pub const MAX_CREDIT_HINT: u64 = 1 << 50;
    /// Bit 51: byte 56 of PortInfo, whole. Reserved up to IBA 1.6 (OpenSM's
    /// RESV5); IBA 1.7 puts LinkSpeedExt{Active,Supported,Enabled}2 there,
    /// but the bit stays one component, as OpenSM numbers it, so the bits
    /// after it keep their numbers.
    pub const LINK_ROUND_TRIP_LATENCY: u64 = 1 << 52;
    pub const CAPABILITY_MASK2: u64 = 1 << 53;
    pub const LINK_SPEED_EXT_ACTIVE: u64 = 1 << 54;
    pub const LINK_SPEED_EXT_SUPPORTED: u64 = 1 << 55;
    /// Bit 56: the 3 reserved bits before LinkSpeedExtEnabled.
    pub const LINK_SPEED_EXT_ENABLED: u64 = 1 << 57;
}

/// A zero-copy view of one PortInfoRecord.
#[derive(Debug, Clone, Copy)]
pub struct PortInfoRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PortInfoRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("PortInfoRecord", buffer.as_ref(), PORT_INFO_RECORD_LEN)?;
        Ok(PortInfoRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The end port's LID (a switch's ports all carry port 0's).
    pub fn endport_lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::ENDPORT_LID))
    }
    pub fn port_num(&self) -> u8 {
        self.b()[field::PORT_NUM]
    }
    /// Bits in [`options`].
    pub fn options(&self) -> u8 {
        self.b()[field::OPTIONS]
    }
    pub fn port_info(&self) -> PortInfo<&[u8]> {
        PortInfo::new_checked(&self.b()[field::PORT_INFO]).expect("PortInfoRecord's length was checked")
    }
}

/// The owned form of a PortInfoRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortInfoRecordRepr {
    pub endport_lid: Lid,
    pub port_num: u8,
    pub options: u8,
    pub port_info: PortInfoRepr,
}

impl PortInfoRecordRepr {
    pub fn parse<T: AsRef<[u8]>>(r: &PortInfoRecord<T>) -> WireResult<Self> {
        Ok(PortInfoRecordRepr {
            endport_lid: r.endport_lid(),
            port_num: r.port_num(),
            options: r.options(),
            port_info: PortInfoRepr::parse(&r.port_info())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&PortInfoRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        PORT_INFO_RECORD_LEN
    }

    /// Writes all 68 bytes; PortInfo's reserved bits are zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("PortInfoRecord", out, PORT_INFO_RECORD_LEN)?;
        let out = &mut out[..PORT_INFO_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::ENDPORT_LID, self.endport_lid.0);
        out[field::PORT_NUM] = self.port_num;
        out[field::OPTIONS] = self.options;
        self.port_info.emit(&mut PortInfo::new_checked(&mut out[field::PORT_INFO])?);
        Ok(())
    }
}

/// Where PortInfo starts, in bytes.
const PI: u16 = 4;

impl SaRecord for PortInfoRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::PortInfoRecord;
    const LEN: usize = PORT_INFO_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        // 0-2: the record's own fields.
        Component::bytes(0, 2),
        Component::bytes(2, 1),
        Component::bytes(3, 1),
        // 3-13: PortInfo bytes 0-31.
        Component::bytes(PI, 8),
        Component::bytes(PI + 8, 8),
        Component::bytes(PI + 16, 2),
        Component::bytes(PI + 18, 2),
        Component::bytes(PI + 20, 4),
        Component::bytes(PI + 24, 2),
        Component::bytes(PI + 26, 2),
        Component::bytes(PI + 28, 1),
        Component::bytes(PI + 29, 1),
        Component::bytes(PI + 30, 1),
        Component::bytes(PI + 31, 1),
        // 14-22: bytes 32-35.
        Component::at(PI + 32, 0, 4),
        Component::at(PI + 32, 4, 4),
        Component::at(PI + 33, 0, 4),
        Component::at(PI + 33, 4, 4),
        Component::at(PI + 34, 0, 2),
        Component::at(PI + 34, 2, 3),
        Component::at(PI + 34, 5, 3),
        Component::at(PI + 35, 0, 4),
        Component::at(PI + 35, 4, 4),
        // 23-31: bytes 36-41.
        Component::at(PI + 36, 0, 4),
        Component::at(PI + 36, 4, 4),
        Component::at(PI + 37, 0, 4),
        Component::at(PI + 37, 4, 4),
        Component::bytes(PI + 38, 1),
        Component::bytes(PI + 39, 1),
        Component::bytes(PI + 40, 1),
        Component::at(PI + 41, 0, 4),
        Component::at(PI + 41, 4, 4),
        // 32-38: bytes 42-43.
        Component::at(PI + 42, 0, 3),
        Component::at(PI + 42, 3, 5),
        Component::at(PI + 43, 0, 4),
        Component::at(PI + 43, 4, 1),
        Component::at(PI + 43, 5, 1),
        Component::at(PI + 43, 6, 1),
        Component::at(PI + 43, 7, 1),
        // 39-45: bytes 44-51.
        Component::bytes(PI + 44, 2),
        Component::bytes(PI + 46, 2),
        Component::bytes(PI + 48, 2),
        Component::bytes(PI + 50, 1),
        Component::at(PI + 51, 0, 1),
        Component::at(PI + 51, 1, 2),
        Component::at(PI + 51, 3, 5),
        // 46-52: bytes 52-59.
        Component::at(PI + 52, 0, 3),
        Component::at(PI + 52, 3, 5),
        Component::at(PI + 53, 0, 4),
        Component::at(PI + 53, 4, 4),
        Component::bytes(PI + 54, 2),
        Component::bytes(PI + 56, 1),
        Component::at(PI + 57, 0, 24),
        // 53-57: bytes 60-63.
        Component::bytes(PI + 60, 2),
        Component::at(PI + 62, 0, 4),
        Component::at(PI + 62, 4, 4),
        Component::at(PI + 63, 0, 3),
        Component::at(PI + 63, 3, 5),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        PortInfoRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        PortInfoRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::port_info::{link_speed, link_width, mtu};
    use crate::mad::sa::component_checks::{assert_fields_and_reserved, assert_tiles};
    use crate::mad::sa::components_match;
    use crate::mad::{CapabilityMask, PhysState, PortState, WireError};

    /// Table 197 by hand: port 3 of the node at LID 42, Active 4X QDR.
    fn hand_built() -> [u8; 68] {
        let mut b = [0u8; 68];
        b[0..4].copy_from_slice(&[0x00, 0x2a, 3, options::QDR_NOT_OVERLOADED]);
        b[4..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]); // M_Key
        b[12..20].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        b[20..24].copy_from_slice(&[0x00, 0x2a, 0x00, 0x01]); // LID 42, SM LID 1
        b[24..28].copy_from_slice(&[0x02, 0x51, 0x08, 0x4a]);
        b[32] = 3; // LocalPortNum
        b[35] = link_width::X4;
        b[36] = 0x74; // speeds SDR|DDR|QDR, Active
        b[37] = 0x52; // LinkUp, Polling
        b[38] = 0x47; // protect 1, LMC 7
        b[39] = 0x4f; // QDR active, enabled 15
        b[40] = 0x5a; // MTU 4096, SM SL 10
        b[46] = 0xf3; // stall 7, HOQ 19
        b[47] = 0x4a; // 4 VLs, inbound enforcement, raw inbound filter
        b[54] = 0x20; // GUIDCap 32
        b[55] = 0x92; // reregister, suppression 0, timeout 18
        b[56] = 0x11; // RespTimeValue 17
        b[61..64].copy_from_slice(&[0x12, 0x34, 0x56]);
        b[64..66].copy_from_slice(&[0x00, 0x10]);
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = PortInfoRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.endport_lid, r.port_num, r.options), (Lid(42), 3, 0x80));
        let pi = &r.port_info;
        assert_eq!(pi.m_key, 0x0102_0304_0506_0708);
        assert_eq!(pi.gid_prefix, 0xfe80_0000_0000_0000);
        assert_eq!((pi.lid, pi.master_sm_lid), (Lid(42), Lid(1)));
        assert!(pi.has_capability(CapabilityMask::IS_SM));
        assert_eq!(pi.local_port_num, 3);
        assert_eq!(pi.port_state, PortState::Active);
        assert_eq!(pi.port_physical_state, PhysState::LinkUp);
        assert_eq!((pi.m_key_protect_bits, pi.lmc), (1, 7));
        assert_eq!((pi.link_speed_active, pi.neighbor_mtu), (link_speed::QDR, mtu::MTU_4096));
        assert_eq!((pi.guid_cap, pi.subnet_timeout, pi.resp_time_value), (32, 18, 17));
        assert!(pi.client_reregister);
        assert_eq!((pi.link_round_trip_latency, pi.capability_mask2), (0x123456, 0x0010));
        let mut out = [0xAAu8; 68];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(PortInfoRecord::new_checked(&b[..]).unwrap().port_info().lid(), Lid(42));
    }

    #[test]
    fn every_field_round_trips() {
        let mut ones = [0xffu8; 64];
        // PortInfo's reserved bits (byte 34 bits 5-3, 52 bits 7-5, 56, 63 bits 7-5).
        ones[34] = 0xc7;
        ones[52] = 0x1f;
        ones[56] = 0;
        ones[63] = 0x1f;
        let r = PortInfoRecordRepr {
            endport_lid: Lid(0xBFFF),
            port_num: 254,
            options: 0xff,
            port_info: PortInfoRepr::parse_bytes(&ones).unwrap(),
        };
        let b = SaRecord::to_bytes(&r);
        assert_eq!(&b[4..], &ones[..]);
        assert_eq!(PortInfoRecordRepr::parse_bytes(&b).unwrap(), r);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            PortInfoRecordRepr::parse_bytes(&hand_built()[..67]),
            Err(WireError::Truncated { what: "PortInfoRecord", len: 67, need: 68 })
        );
        assert!(PortInfoRecordRepr::default().emit(&mut [0u8; 67]).is_err());
    }

    #[test]
    fn the_table_tiles_the_record_with_opensms_reserved_bits() {
        assert_tiles::<PortInfoRecordRepr>();
        // IB_PIR_COMPMASK_RESV2, RESV4 and RESV7 are reserved; RESV5 (byte
        // 56) may carry the IBA 1.7 LinkSpeedExt*2 fields.
        assert_fields_and_reserved::<PortInfoRecordRepr>(&[19, 46, 56], &[51]);
        assert_eq!(PortInfoRecordRepr::COMPONENTS.len(), 58, "the last bit is LinkSpeedExtEnabled");
        assert_eq!(PortInfoRecordRepr::attribute_offset(), 9);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = PortInfoRecordRepr::COMPONENTS;
        let a = PortInfoRecordRepr::parse_bytes(&hand_built()).unwrap();
        let mut b = a;
        b.port_info.lmc = 2;
        b.port_info.link_speed_ext_enabled = 30;
        b.port_info.capability_mask |= CapabilityMask::IS_SM_DISABLED;
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let same = port_info_mask::ENDPORT_LID
            | port_info_mask::PORT_NUM
            | port_info_mask::LID
            | port_info_mask::PORT_STATE
            | port_info_mask::M_KEY_PROTECT_BITS
            | port_info_mask::LINK_SPEED_EXT_SUPPORTED
            | port_info_mask::CLIENT_REREGISTER;
        assert!(components_match(c, same, &qa, &qb));
        for differs in [port_info_mask::LMC, port_info_mask::LINK_SPEED_EXT_ENABLED, port_info_mask::CAPABILITY_MASK] {
            assert!(!components_match(c, differs, &qa, &qb), "{differs:#x}");
        }
        assert!(!components_match(c, 1 << 58, &qa, &qa), "bit 58 names no component");
    }
}
