//! InformInfo (IBA 13.4.8.3), 36 bytes: a subscription to Report(Notice)s,
//! sent to the SA as SubnAdmSet(InformInfo) (attribute 0x0003) to subscribe
//! or unsubscribe, and embedded in an InformInfoRecord.
//! ```text
//!  0: GID (128)                  the trap issuer's port, or zero
//! 16: LIDRangeBegin (16)         | LIDRangeEnd (16)
//! 20: Reserved (16)              | IsGeneric (8) | Subscribe (8)
//! 24: Type (16)                  | TrapNumber or DeviceID (16)
//! 28: QPN (24) | Reserved (3) RespTimeValue (5)
//! 32: Reserved (8) | ProducerType or VendorID (24)
//! ```
//! IsGeneric picks how bytes 26-27 and 33-35 read: a generic subscription
//! names a TrapNumber and a ProducerType, a vendor one a DeviceID and a
//! VendorID ([`InformKind`]). 0xFFFF in LIDRangeBegin, Type or TrapNumber /
//! DeviceID and 0xFFFFFF in ProducerType / VendorID mean "any"
//! ([`wildcard`]).
//!
//! The IBA gives InformInfo itself no component mask: a Set carries the
//! whole subscription. [`SaRecord::COMPONENTS`] lists its fields in order
//! anyway, reserved ones included; they are exactly bits 3-15 of the
//! InformInfoRecord mask (IBA 15.2.5.12), which embeds this layout, so the
//! SA can compare a subscription field by field with the same matcher.

use super::{gid_at, Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, WireResult};

/// InformInfo's size on the wire.
pub const INFORM_INFO_LEN: usize = 36;

const WHAT: &str = "InformInfo";

/// The "any" values of the subscription fields (IBA 13.4.8.3).
pub mod wildcard {
    /// LIDRangeBegin: every issuer LID.
    pub const LID: u16 = 0xFFFF;
    pub const TYPE: u16 = 0xFFFF;
    /// TrapNumber or DeviceID.
    pub const TRAP_NUMBER: u16 = 0xFFFF;
    /// ProducerType or VendorID.
    pub const PRODUCER_TYPE: u32 = 0x00FF_FFFF;
}

mod field {
    pub const GID: usize = 0;
    pub const LID_RANGE_BEGIN: usize = 16;
    pub const LID_RANGE_END: usize = 18;
    pub const IS_GENERIC: usize = 22;
    pub const SUBSCRIBE: usize = 23;
    pub const TYPE: usize = 24;
    pub const TRAP_NUMBER: usize = 26;
    /// QPN in the top 24 bits, RespTimeValue in the low 5.
    pub const QPN_RESP_TIME: usize = 28;
    /// ProducerType / VendorID: bytes 33-35.
    pub const PRODUCER_TYPE: usize = 33;
}

const RESP_TIME_MASK: u32 = 0x1F;

/// What a subscription selects, by how IsGeneric reads the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InformKind {
    /// IsGeneric = 1: generic traps (IBA 13.4.8.2 ProducerType codes).
    Generic { trap_number: u16, producer_type: u32 },
    /// IsGeneric = 0: vendor-specific notices.
    Vendor { device_id: u16, vendor_id: u32 },
}

impl Default for InformKind {
    fn default() -> Self {
        InformKind::Generic { trap_number: 0, producer_type: 0 }
    }
}

impl InformKind {
    pub fn is_generic(&self) -> bool {
        matches!(self, InformKind::Generic { .. })
    }
    /// The raw TrapNumber or DeviceID.
    fn number(&self) -> u16 {
        match *self {
            InformKind::Generic { trap_number, .. } => trap_number,
            InformKind::Vendor { device_id, .. } => device_id,
        }
    }
    /// The raw ProducerType or VendorID.
    fn producer(&self) -> u32 {
        match *self {
            InformKind::Generic { producer_type, .. } => producer_type,
            InformKind::Vendor { vendor_id, .. } => vendor_id,
        }
    }
}

/// A zero-copy view of one InformInfo.
#[derive(Debug, Clone, Copy)]
pub struct InformInfo<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> InformInfo<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), INFORM_INFO_LEN)?;
        Ok(InformInfo { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn gid(&self) -> [u8; 16] {
        gid_at(self.b(), field::GID)
    }
    pub fn lid_range_begin(&self) -> u16 {
        be::u16(self.b(), field::LID_RANGE_BEGIN)
    }
    pub fn lid_range_end(&self) -> u16 {
        be::u16(self.b(), field::LID_RANGE_END)
    }
    /// Any non-zero IsGeneric byte reads as generic (the IBA defines 0 and 1).
    pub fn is_generic(&self) -> bool {
        self.b()[field::IS_GENERIC] != 0
    }
    /// True to subscribe, false to unsubscribe.
    pub fn subscribe(&self) -> bool {
        self.b()[field::SUBSCRIBE] != 0
    }
    /// The notice Type (IBA 13.4.8.2), 16 bits here.
    pub fn notice_type(&self) -> u16 {
        be::u16(self.b(), field::TYPE)
    }
    /// TrapNumber, if the subscription is generic.
    pub fn trap_number(&self) -> Option<u16> {
        self.is_generic().then(|| be::u16(self.b(), field::TRAP_NUMBER))
    }
    /// DeviceID, if the subscription is vendor-specific.
    pub fn device_id(&self) -> Option<u16> {
        (!self.is_generic()).then(|| be::u16(self.b(), field::TRAP_NUMBER))
    }
    /// The subscriber's QP for Reports (24 bits).
    pub fn qpn(&self) -> u32 {
        be::u32(self.b(), field::QPN_RESP_TIME) >> 8
    }
    /// 5 bits: how long the subscriber takes to answer, 4.096 us * 2^value
    /// (the ClassPortInfo.RespTimeValue encoding).
    pub fn resp_time_value(&self) -> u8 {
        (be::u32(self.b(), field::QPN_RESP_TIME) & RESP_TIME_MASK) as u8
    }
    /// ProducerType, if the subscription is generic.
    pub fn producer_type(&self) -> Option<u32> {
        self.is_generic().then(|| be::u24(self.b(), field::PRODUCER_TYPE))
    }
    /// VendorID, if the subscription is vendor-specific.
    pub fn vendor_id(&self) -> Option<u32> {
        (!self.is_generic()).then(|| be::u24(self.b(), field::PRODUCER_TYPE))
    }
    pub fn kind(&self) -> InformKind {
        let (number, producer) = (be::u16(self.b(), field::TRAP_NUMBER), be::u24(self.b(), field::PRODUCER_TYPE));
        if self.is_generic() {
            InformKind::Generic { trap_number: number, producer_type: producer }
        } else {
            InformKind::Vendor { device_id: number, vendor_id: producer }
        }
    }
}

/// The owned form of an InformInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InformInfoRepr {
    pub gid: [u8; 16],
    pub lid_range_begin: u16,
    pub lid_range_end: u16,
    pub subscribe: bool,
    pub notice_type: u16,
    /// IsGeneric with the fields it gives meaning to.
    pub kind: InformKind,
    /// 24 bits.
    pub qpn: u32,
    /// 5 bits.
    pub resp_time_value: u8,
}

impl InformInfoRepr {
    /// Every bit pattern is a subscription, so this cannot fail once the
    /// view exists.
    pub fn parse<T: AsRef<[u8]>>(v: &InformInfo<T>) -> WireResult<Self> {
        Ok(InformInfoRepr {
            gid: v.gid(),
            lid_range_begin: v.lid_range_begin(),
            lid_range_end: v.lid_range_end(),
            subscribe: v.subscribe(),
            notice_type: v.notice_type(),
            kind: v.kind(),
            qpn: v.qpn(),
            resp_time_value: v.resp_time_value(),
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&InformInfo::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        INFORM_INFO_LEN
    }

    /// Writes all 36 bytes, the reserved ones zero; IsGeneric and Subscribe
    /// as 1 or 0. A QPN over 24 bits, a RespTimeValue over 5 or a producer
    /// over 24 is cut to its field.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, INFORM_INFO_LEN)?;
        let out = &mut out[..INFORM_INFO_LEN];
        out.fill(0);
        out[field::GID..field::GID + 16].copy_from_slice(&self.gid);
        be::set_u16(out, field::LID_RANGE_BEGIN, self.lid_range_begin);
        be::set_u16(out, field::LID_RANGE_END, self.lid_range_end);
        out[field::IS_GENERIC] = u8::from(self.kind.is_generic());
        out[field::SUBSCRIBE] = u8::from(self.subscribe);
        be::set_u16(out, field::TYPE, self.notice_type);
        be::set_u16(out, field::TRAP_NUMBER, self.kind.number());
        let qpn_resp = (self.qpn & 0x00FF_FFFF) << 8 | (u32::from(self.resp_time_value) & RESP_TIME_MASK);
        be::set_u32(out, field::QPN_RESP_TIME, qpn_resp);
        be::set_u24(out, field::PRODUCER_TYPE, self.kind.producer());
        Ok(())
    }
}

/// InformInfo's fields in wire order, reserved ones included; also bits
/// 3-15 of the InformInfoRecord mask, moved by the record's 24-byte key.
pub(crate) const INFORM_INFO_COMPONENTS: [Component; 13] = [
    Component::bytes(0, 16),
    Component::bytes(16, 2),
    Component::bytes(18, 2),
    Component::bytes(20, 2),
    Component::bytes(22, 1),
    Component::bytes(23, 1),
    Component::bytes(24, 2),
    Component::bytes(26, 2),
    Component::at(28, 0, 24),
    Component::at(31, 0, 3),
    Component::at(31, 3, 5),
    Component::bytes(32, 1),
    Component::bytes(33, 3),
];

impl SaRecord for InformInfoRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::InformInfo;
    const LEN: usize = INFORM_INFO_LEN;
    const COMPONENTS: &'static [Component] = &INFORM_INFO_COMPONENTS;
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        InformInfoRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        InformInfoRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    /// A generic subscription with every field distinct, by hand: GID
    /// fe80::2:c903:0:1, LIDs 0x0010-0x0020, subscribe, Type 0xFFFF, trap
    /// 128, QPN 0x123456, RespTimeValue 19, ProducerType 2 (switch).
    fn generic() -> [u8; 36] {
        let mut b = [0u8; 36];
        b[0..2].copy_from_slice(&[0xFE, 0x80]);
        b[8..16].copy_from_slice(&[0x00, 0x02, 0xC9, 0x03, 0x00, 0x00, 0x00, 0x01]);
        b[16..20].copy_from_slice(&[0x00, 0x10, 0x00, 0x20]);
        b[22] = 1;
        b[23] = 1;
        b[24..28].copy_from_slice(&[0xFF, 0xFF, 0x00, 0x80]);
        b[28..32].copy_from_slice(&[0x12, 0x34, 0x56, 19]);
        b[33..36].copy_from_slice(&[0x00, 0x00, 0x02]);
        b
    }

    #[test]
    fn a_generic_subscription_parses_and_emits_back() {
        let b = generic();
        let v = InformInfo::new_checked(&b[..]).unwrap();
        assert_eq!((v.trap_number(), v.producer_type()), (Some(128), Some(2)));
        assert_eq!((v.device_id(), v.vendor_id()), (None, None));
        let r = InformInfoRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.kind, InformKind::Generic { trap_number: 128, producer_type: 2 });
        assert_eq!((r.gid[0], r.gid[15]), (0xFE, 0x01));
        assert_eq!((r.lid_range_begin, r.lid_range_end, r.subscribe), (0x10, 0x20, true));
        assert_eq!((r.notice_type, r.qpn, r.resp_time_value), (wildcard::TYPE, 0x123456, 19));
        let mut out = [0xAAu8; 36];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn a_vendor_subscription_reads_the_same_bits_as_device_and_vendor() {
        let mut b = generic();
        b[22] = 0;
        b[23] = 0;
        b[26..28].copy_from_slice(&[0xAB, 0xCD]);
        b[33..36].copy_from_slice(&[0x00, 0x02, 0xC9]);
        let v = InformInfo::new_checked(&b[..]).unwrap();
        assert_eq!((v.device_id(), v.vendor_id(), v.trap_number()), (Some(0xABCD), Some(0x0002C9), None));
        let r = InformInfoRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.kind, InformKind::Vendor { device_id: 0xABCD, vendor_id: 0x0002C9 });
        assert!(!r.subscribe);
        assert_eq!(SaRecord::to_bytes(&r), b.to_vec());
    }

    #[test]
    fn every_field_round_trips_and_reserved_bits_are_dropped() {
        let r = InformInfoRepr {
            gid: [3; 16],
            lid_range_begin: wildcard::LID,
            lid_range_end: 0xBFFF,
            subscribe: true,
            notice_type: 4,
            kind: InformKind::Vendor { device_id: 0x1234, vendor_id: wildcard::PRODUCER_TYPE },
            qpn: 0xFF_FFFF,
            resp_time_value: 31,
        };
        let b = SaRecord::to_bytes(&r);
        assert_eq!(InformInfoRepr::parse_bytes(&b).unwrap(), r);
        let mut dirty = b.clone();
        dirty[20] = 0x55;
        dirty[31] |= 0xE0;
        dirty[32] = 0x77;
        assert_eq!(InformInfoRepr::parse_bytes(&dirty).unwrap(), r);
        let wide = InformInfoRepr { qpn: 0x0100_0001, resp_time_value: 0x21, ..r };
        let w = SaRecord::to_bytes(&wide);
        assert_eq!(&w[28..32], &[0x00, 0x00, 0x01, 0x01]);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            InformInfoRepr::parse_bytes(&generic()[..35]),
            Err(WireError::Truncated { what: WHAT, len: 35, need: 36 })
        );
        assert!(InformInfoRepr::default().emit(&mut [0u8; 35]).is_err());
    }

    #[test]
    fn the_components_select_the_fields_they_name() {
        let a = InformInfoRepr::parse_bytes(&generic()).unwrap();
        let b = InformInfoRepr { resp_time_value: 3, ..a };
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = InformInfoRepr::COMPONENTS;
        // QPN (8) and RespTimeValue (10) share a word; only 10 differs.
        assert!(components_match(c, 1 << 8 | 1 << 0 | 1 << 7, &qa, &qb));
        assert!(!components_match(c, 1 << 10, &qa, &qb));
        let vendor = InformInfoRepr { kind: InformKind::Vendor { device_id: 128, vendor_id: 2 }, ..a };
        let qv = SaRecord::to_bytes(&vendor);
        assert!(!components_match(c, 1 << 4, &qa, &qv), "IsGeneric differs");
        assert!(components_match(c, 1 << 7 | 1 << 12, &qa, &qv), "the same numbers either way");
        super::super::component_checks::assert_tiles::<InformInfoRepr>();
    }
}
