//! ClassPortInfo (IBA 13.4.8.1, Table 118), 72 bytes: what a management
//! class at a port supports and where its requests and traps should go.
//! Every GS class has one (attribute 0x0001); the SA's adds the class
//! specific capability bits of IBA 15.2.5.1 ([`sa_cap`], [`sa_cap2`]).
//!
//! ```text
//!  0: BaseVersion (8) | ClassVersion (8) | CapabilityMask (16)
//!  4: CapabilityMask2 (27) RespTimeValue (5)
//!  8: RedirectGID (128)
//! 24: RedirectTC (8) | RedirectSL (4) RedirectFL (20)
//! 28: RedirectLID (16)          | RedirectP_Key (16)
//! 32: Reserved (8) | RedirectQP (24)
//! 36: RedirectQ_Key (32)
//! 40: TrapGID (128)
//! 56: TrapTC (8) | TrapSL (4) TrapFL (20)
//! 60: TrapLID (16)              | TrapP_Key (16)
//! 64: TrapHL (8) | TrapQP (24)
//! 68: TrapQ_Key (32)
//! ```
//!
//! RespTimeValue is the class's response time as 4.096 us * 2^value; a
//! client adds it to the subnet's packet lifetime to time out requests.
//! A zero RedirectLID (and GID) means "no redirection: send here".

use super::sa::{gid_at, Component, SaAttributeId, SaRecord};
use super::{be, check_len, WireResult};
use crate::types::Lid;

/// ClassPortInfo's size on the wire.
pub const CLASS_PORT_INFO_LEN: usize = 72;

mod field {
    pub const BASE_VERSION: usize = 0;
    pub const CLASS_VERSION: usize = 1;
    pub const CAPABILITY_MASK: usize = 2;
    /// CapabilityMask2 (bits 31-5) and RespTimeValue (bits 4-0).
    pub const CAP2_RESP_TIME: usize = 4;
    pub const REDIRECT_GID: usize = 8;
    /// TC (bits 31-24), SL (23-20), FL (19-0).
    pub const REDIRECT_TC_SL_FL: usize = 24;
    pub const REDIRECT_LID: usize = 28;
    pub const REDIRECT_PKEY: usize = 30;
    /// Reserved (bits 31-24), QP (23-0).
    pub const REDIRECT_QP: usize = 33;
    pub const REDIRECT_QKEY: usize = 36;
    pub const TRAP_GID: usize = 40;
    pub const TRAP_TC_SL_FL: usize = 56;
    pub const TRAP_LID: usize = 60;
    pub const TRAP_PKEY: usize = 62;
    pub const TRAP_HL: usize = 64;
    pub const TRAP_QP: usize = 65;
    pub const TRAP_QKEY: usize = 68;
}

/// CapabilityMask bits every class shares (IBA 13.4.8.1); bits 8-15 are
/// the class's own.
pub mod class_cap {
    /// The class sends Trap() MADs.
    pub const IS_TRAP_SUPPORTED: u16 = 1 << 0;
    /// The class answers Get(Notice) and Set(Notice).
    pub const IS_GET_SET_NOTICE_SUPPORTED: u16 = 1 << 1;
    /// CapabilityMask2 holds class-specific bits (IBA 1.3).
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u16 = 1 << 2;
}

/// The SA's CapabilityMask bits (IBA 15.2.5.1). Bit 12 is not named here:
/// OpenSM never sets it and we have not confirmed its meaning.
pub mod sa_cap {
    /// Every optional record except MCMemberRecord, TraceRecord and
    /// MultiPathRecord is answered.
    pub const IS_OPTIONAL_RECORDS_SUPPORTED: u16 = 1 << 8;
    /// UD multicast (MCMemberRecord joins) is supported.
    pub const IS_UD_MULTICAST_SUPPORTED: u16 = 1 << 9;
    /// MultiPathRecord and TraceRecord are answered.
    pub const IS_MULTIPATH_SUPPORTED: u16 = 1 << 10;
    /// The SM/SA supports reinitialisation.
    pub const IS_REINIT_SUPPORTED: u16 = 1 << 11;
    /// Bit 31 of a PortInfoRecord Get/GetTable AttributeModifier turns the
    /// CapabilityMask component into a "these bits set" match (IBA 1.2
    /// errata; see `port_info_record::ATTR_MOD_CAPABILITY_MASK_MATCH`).
    pub const IS_PORT_INFO_CAPMASK_MATCH_SUPPORTED: u16 = 1 << 13;
}

/// The SA's CapabilityMask2 bits (IBA 15.2.5.1, 27 bits). Bits 0, 9, 11,
/// 14 and 16 are not named: we have not confirmed them.
pub mod sa_cap2 {
    pub const IS_QOS_SUPPORTED: u32 = 1 << 1;
    /// PathRecords carry the reverse path's P_Key membership.
    pub const IS_REVERSE_PATH_PKEY_SUPPORTED: u32 = 1 << 2;
    /// SwitchInfo.MulticastFDBTop is honoured.
    pub const IS_MCAST_TOP_SUPPORTED: u32 = 1 << 3;
    pub const IS_HIERARCHY_INFO_SUPPORTED: u32 = 1 << 4;
    /// GUIDInfoRecord Set/Delete assigns alias GUIDs.
    pub const IS_ALIAS_GUIDS_SUPPORTED: u32 = 1 << 5;
    /// PortInfoRecord answers carry the whole PortInfo.
    pub const IS_FULL_PORT_INFO_RECORD_SUPPORTED: u32 = 1 << 6;
    pub const IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 7;
    pub const IS_MULTICAST_SERVICE_RECORDS_SUPPORTED: u32 = 1 << 8;
    /// The AttributeModifier bit 31 match applies to CapabilityMask2 too.
    pub const IS_PORT_INFO_CAPMASK2_MATCH_SUPPORTED: u32 = 1 << 10;
    /// MCMemberRecord joins may ask for SendOnlyFullMember.
    pub const IS_SEND_ONLY_FULL_MEMBER_SUPPORTED: u32 = 1 << 12;
    pub const IS_LINK_WIDTH_2X_SUPPORTED: u32 = 1 << 13;
    pub const IS_LINK_SPEED_HDR_SUPPORTED: u32 = 1 << 15;
    pub const IS_LINK_SPEED_NDR_SUPPORTED: u32 = 1 << 17;
}

/// A zero-copy view of one ClassPortInfo.
#[derive(Debug, Clone, Copy)]
pub struct ClassPortInfo<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ClassPortInfo<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("ClassPortInfo", buffer.as_ref(), CLASS_PORT_INFO_LEN)?;
        Ok(ClassPortInfo { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn base_version(&self) -> u8 {
        self.b()[field::BASE_VERSION]
    }
    pub fn class_version(&self) -> u8 {
        self.b()[field::CLASS_VERSION]
    }
    pub fn capability_mask(&self) -> u16 {
        be::u16(self.b(), field::CAPABILITY_MASK)
    }
    /// 27 bits.
    pub fn capability_mask2(&self) -> u32 {
        be::u32(self.b(), field::CAP2_RESP_TIME) >> 5
    }
    /// 5 bits.
    pub fn resp_time_value(&self) -> u8 {
        self.b()[field::CAP2_RESP_TIME + 3] & 0x1F
    }
    pub fn redirect_gid(&self) -> [u8; 16] {
        gid_at(self.b(), field::REDIRECT_GID)
    }
    pub fn redirect_tc(&self) -> u8 {
        self.b()[field::REDIRECT_TC_SL_FL]
    }
    pub fn redirect_sl(&self) -> u8 {
        self.b()[field::REDIRECT_TC_SL_FL + 1] >> 4
    }
    /// 20 bits.
    pub fn redirect_fl(&self) -> u32 {
        be::u32(self.b(), field::REDIRECT_TC_SL_FL) & 0x000F_FFFF
    }
    pub fn redirect_lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::REDIRECT_LID))
    }
    pub fn redirect_pkey(&self) -> u16 {
        be::u16(self.b(), field::REDIRECT_PKEY)
    }
    /// 24 bits.
    pub fn redirect_qp(&self) -> u32 {
        be::u24(self.b(), field::REDIRECT_QP)
    }
    pub fn redirect_qkey(&self) -> u32 {
        be::u32(self.b(), field::REDIRECT_QKEY)
    }
    pub fn trap_gid(&self) -> [u8; 16] {
        gid_at(self.b(), field::TRAP_GID)
    }
    pub fn trap_tc(&self) -> u8 {
        self.b()[field::TRAP_TC_SL_FL]
    }
    pub fn trap_sl(&self) -> u8 {
        self.b()[field::TRAP_TC_SL_FL + 1] >> 4
    }
    /// 20 bits.
    pub fn trap_fl(&self) -> u32 {
        be::u32(self.b(), field::TRAP_TC_SL_FL) & 0x000F_FFFF
    }
    pub fn trap_lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::TRAP_LID))
    }
    pub fn trap_pkey(&self) -> u16 {
        be::u16(self.b(), field::TRAP_PKEY)
    }
    /// The hop limit for traps sent with a GRH.
    pub fn trap_hl(&self) -> u8 {
        self.b()[field::TRAP_HL]
    }
    /// 24 bits.
    pub fn trap_qp(&self) -> u32 {
        be::u24(self.b(), field::TRAP_QP)
    }
    pub fn trap_qkey(&self) -> u32 {
        be::u32(self.b(), field::TRAP_QKEY)
    }
}

/// The owned form of ClassPortInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassPortInfoRepr {
    pub base_version: u8,
    pub class_version: u8,
    pub capability_mask: u16,
    /// 27 bits; emit drops anything above.
    pub capability_mask2: u32,
    /// 5 bits.
    pub resp_time_value: u8,
    pub redirect_gid: [u8; 16],
    pub redirect_tc: u8,
    /// 4 bits.
    pub redirect_sl: u8,
    /// 20 bits.
    pub redirect_fl: u32,
    pub redirect_lid: Lid,
    pub redirect_pkey: u16,
    /// 24 bits.
    pub redirect_qp: u32,
    pub redirect_qkey: u32,
    pub trap_gid: [u8; 16],
    pub trap_tc: u8,
    /// 4 bits.
    pub trap_sl: u8,
    /// 20 bits.
    pub trap_fl: u32,
    pub trap_lid: Lid,
    pub trap_pkey: u16,
    pub trap_hl: u8,
    /// 24 bits.
    pub trap_qp: u32,
    pub trap_qkey: u32,
}

impl ClassPortInfoRepr {
    /// Every bit pattern is a ClassPortInfo, so this cannot fail once the
    /// view exists.
    pub fn parse<T: AsRef<[u8]>>(v: &ClassPortInfo<T>) -> WireResult<Self> {
        Ok(ClassPortInfoRepr {
            base_version: v.base_version(),
            class_version: v.class_version(),
            capability_mask: v.capability_mask(),
            capability_mask2: v.capability_mask2(),
            resp_time_value: v.resp_time_value(),
            redirect_gid: v.redirect_gid(),
            redirect_tc: v.redirect_tc(),
            redirect_sl: v.redirect_sl(),
            redirect_fl: v.redirect_fl(),
            redirect_lid: v.redirect_lid(),
            redirect_pkey: v.redirect_pkey(),
            redirect_qp: v.redirect_qp(),
            redirect_qkey: v.redirect_qkey(),
            trap_gid: v.trap_gid(),
            trap_tc: v.trap_tc(),
            trap_sl: v.trap_sl(),
            trap_fl: v.trap_fl(),
            trap_lid: v.trap_lid(),
            trap_pkey: v.trap_pkey(),
            trap_hl: v.trap_hl(),
            trap_qp: v.trap_qp(),
            trap_qkey: v.trap_qkey(),
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&ClassPortInfo::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        CLASS_PORT_INFO_LEN
    }

    /// Writes all 72 bytes (the reserved byte zero); values wider than
    /// their field are cut to it.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("ClassPortInfo", out, CLASS_PORT_INFO_LEN)?;
        let out = &mut out[..CLASS_PORT_INFO_LEN];
        out.fill(0);
        out[field::BASE_VERSION] = self.base_version;
        out[field::CLASS_VERSION] = self.class_version;
        be::set_u16(out, field::CAPABILITY_MASK, self.capability_mask);
        let cap2 = (self.capability_mask2 & 0x07FF_FFFF) << 5 | u32::from(self.resp_time_value & 0x1F);
        be::set_u32(out, field::CAP2_RESP_TIME, cap2);
        out[field::REDIRECT_GID..field::REDIRECT_GID + 16].copy_from_slice(&self.redirect_gid);
        be::set_u32(out, field::REDIRECT_TC_SL_FL, tc_sl_fl(self.redirect_tc, self.redirect_sl, self.redirect_fl));
        be::set_u16(out, field::REDIRECT_LID, self.redirect_lid.0);
        be::set_u16(out, field::REDIRECT_PKEY, self.redirect_pkey);
        be::set_u24(out, field::REDIRECT_QP, self.redirect_qp);
        be::set_u32(out, field::REDIRECT_QKEY, self.redirect_qkey);
        out[field::TRAP_GID..field::TRAP_GID + 16].copy_from_slice(&self.trap_gid);
        be::set_u32(out, field::TRAP_TC_SL_FL, tc_sl_fl(self.trap_tc, self.trap_sl, self.trap_fl));
        be::set_u16(out, field::TRAP_LID, self.trap_lid.0);
        be::set_u16(out, field::TRAP_PKEY, self.trap_pkey);
        out[field::TRAP_HL] = self.trap_hl;
        be::set_u24(out, field::TRAP_QP, self.trap_qp);
        be::set_u32(out, field::TRAP_QKEY, self.trap_qkey);
        Ok(())
    }

    /// The response time in microseconds (4.096 us * 2^RespTimeValue).
    pub fn resp_time_us(&self) -> u64 {
        (4096u64 << (self.resp_time_value & 0x1F)) / 1000
    }
}

fn tc_sl_fl(tc: u8, sl: u8, fl: u32) -> u32 {
    u32::from(tc) << 24 | u32::from(sl & 0x0F) << 20 | (fl & 0x000F_FFFF)
}

/// The SA answers Get(ClassPortInfo) like a record, but no query selects
/// among ClassPortInfos: there are no components, so any mask bit is
/// invalid.
impl SaRecord for ClassPortInfoRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::ClassPortInfo;
    const LEN: usize = CLASS_PORT_INFO_LEN;
    const COMPONENTS: &'static [Component] = &[];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        ClassPortInfoRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        ClassPortInfoRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::{components_match, unknown_components};
    use crate::mad::WireError;

    /// Table 118 by hand, every field a different value.
    fn hand_built() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[0..4].copy_from_slice(&[1, 2, 0x22, 0x02]); // versions, CapabilityMask 0x2202
                                                      // CapabilityMask2 0x0000_1040 << 5 | RespTimeValue 18
        b[4..8].copy_from_slice(&0x0002_0812u32.to_be_bytes());
        b[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0, 0, 7]);
        b[24..28].copy_from_slice(&[0x12, 0x3A, 0xBC, 0xDE]); // TC 0x12, SL 3, FL 0xABCDE
        b[28..32].copy_from_slice(&[0x00, 0x2a, 0xff, 0xff]); // LID 42, P_Key 0xffff
        b[32..36].copy_from_slice(&[0x00, 0x00, 0x00, 0x01]); // QP 1
        b[36..40].copy_from_slice(&[0x80, 0x01, 0x00, 0x00]); // Q_Key
        b[40..56].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0, 0, 9]);
        b[56..60].copy_from_slice(&[0x34, 0x50, 0x00, 0x01]); // TC 0x34, SL 5, FL 1
        b[60..64].copy_from_slice(&[0x00, 0x01, 0x7f, 0xff]); // LID 1, P_Key 0x7fff
        b[64..68].copy_from_slice(&[0x40, 0x12, 0x34, 0x56]); // HL 64, QP 0x123456
        b[68..72].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = ClassPortInfoRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.base_version, r.class_version), (1, 2));
        assert_eq!(r.capability_mask, 0x2202);
        assert_ne!(r.capability_mask & sa_cap::IS_PORT_INFO_CAPMASK_MATCH_SUPPORTED, 0);
        assert_ne!(r.capability_mask & class_cap::IS_GET_SET_NOTICE_SUPPORTED, 0);
        assert_eq!(r.capability_mask & sa_cap::IS_MULTIPATH_SUPPORTED, 0);
        assert_eq!(r.capability_mask2, 0x1040);
        assert_ne!(r.capability_mask2 & sa_cap2::IS_FULL_PORT_INFO_RECORD_SUPPORTED, 0);
        assert_ne!(r.capability_mask2 & sa_cap2::IS_SEND_ONLY_FULL_MEMBER_SUPPORTED, 0);
        assert_eq!(r.resp_time_value, 18);
        assert_eq!(r.redirect_gid[15], 7);
        assert_eq!((r.redirect_tc, r.redirect_sl, r.redirect_fl), (0x12, 3, 0xABCDE));
        assert_eq!(
            (r.redirect_lid, r.redirect_pkey, r.redirect_qp, r.redirect_qkey),
            (Lid(42), 0xffff, 1, 0x8001_0000)
        );
        assert_eq!(r.trap_gid[15], 9);
        assert_eq!((r.trap_tc, r.trap_sl, r.trap_fl), (0x34, 5, 1));
        assert_eq!(
            (r.trap_lid, r.trap_pkey, r.trap_hl, r.trap_qp, r.trap_qkey),
            (Lid(1), 0x7fff, 64, 0x123456, 0xdeadbeef)
        );
        let mut out = [0xAAu8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(SaRecord::to_bytes(&r), b.to_vec());
    }

    #[test]
    fn every_field_round_trips_and_reserved_bits_are_dropped() {
        let r = ClassPortInfoRepr {
            base_version: 0xff,
            class_version: 0x7f,
            capability_mask: 0xffff,
            capability_mask2: 0x07FF_FFFF,
            resp_time_value: 31,
            redirect_gid: [0x11; 16],
            redirect_tc: 0xfe,
            redirect_sl: 15,
            redirect_fl: 0xF_FFFF,
            redirect_lid: Lid(0xBFFF),
            redirect_pkey: 0x8001,
            redirect_qp: 0xFF_FFFF,
            redirect_qkey: u32::MAX,
            trap_gid: [0x22; 16],
            trap_tc: 1,
            trap_sl: 14,
            trap_fl: 0x12345,
            trap_lid: Lid(0xC000),
            trap_pkey: 2,
            trap_hl: 0xff,
            trap_qp: 0xAB_CDEF,
            trap_qkey: 3,
        };
        let b = SaRecord::to_bytes(&r);
        assert_eq!(b[32], 0, "the byte before RedirectQP is reserved");
        assert_eq!(ClassPortInfoRepr::parse_bytes(&b).unwrap(), r);
        let ones = [0xffu8; 72];
        let back = SaRecord::to_bytes(&ClassPortInfoRepr::parse_bytes(&ones).unwrap());
        let mut want = [0xffu8; 72];
        want[32] = 0;
        assert_eq!(back, want.to_vec());
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            ClassPortInfoRepr::parse_bytes(&[0u8; 71]),
            Err(WireError::Truncated { what: "ClassPortInfo", len: 71, need: 72 })
        );
        assert!(ClassPortInfoRepr::default().emit(&mut [0u8; 40]).is_err());
    }

    #[test]
    fn no_component_mask_applies() {
        let b = hand_built();
        let c = ClassPortInfoRepr::COMPONENTS;
        assert!(components_match(c, 0, &b, &[0u8; 72]), "an empty mask matches");
        assert!(!components_match(c, 1, &b, &b), "bit 0 names no component");
        assert_eq!(unknown_components(c, 0b101), 0b101);
        assert_eq!(ClassPortInfoRepr::attribute_offset(), 9);
    }

    #[test]
    fn response_time() {
        let r = ClassPortInfoRepr { resp_time_value: 18, ..Default::default() };
        assert_eq!(r.resp_time_us(), 4096 * (1 << 18) / 1000);
    }
}
