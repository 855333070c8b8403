//! InformInfoRecord (IBA 15.2.5.12), 60 bytes: one subscription the SA
//! holds, named by its subscriber.
//! ```text
//!  0: SubscriberGID (128)
//! 16: Enum (16)                | Reserved (48)
//! 24: InformInfo (288): the layout of IBA 13.4.8.3 (see inform_info.rs)
//! ```
//! Enum tells apart the subscriptions of one subscriber. The record is 60
//! bytes; a GetTableResp spaces records by AttributeOffset, 8 words here
//! (OpenSM's struct pads it to 64).
//!
//! Component mask, one bit per field in order, reserved ones included, and
//! one per field of the embedded InformInfo (as OpenSM's `IB_IIR_COMPMASK_*`
//! numbers them): SubscriberGID 0, Enum 1, Reserved 2, GID 3,
//! LIDRangeBegin 4, LIDRangeEnd 5, Reserved 6, IsGeneric 7, Subscribe 8,
//! Type 9, TrapNumber/DeviceID 10, QPN 11, Reserved 12, RespTimeValue 13,
//! Reserved 14, ProducerType/VendorID 15.

use super::inform_info::{InformInfo, InformInfoRepr, INFORM_INFO_COMPONENTS, INFORM_INFO_LEN};
use super::{gid_at, Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, WireResult};

/// InformInfoRecord's size on the wire.
pub const INFORM_INFO_RECORD_LEN: usize = 60;

const WHAT: &str = "InformInfoRecord";

/// InformInfoRecord component mask bits (IBA 15.2.5.12).
pub mod inform_info_record_mask {
    pub const SUBSCRIBER_GID: u64 = 1 << 0;
    pub const ENUM: u64 = 1 << 1;
    pub const GID: u64 = 1 << 3;
    pub const LID_RANGE_BEGIN: u64 = 1 << 4;
    pub const LID_RANGE_END: u64 = 1 << 5;
    pub const IS_GENERIC: u64 = 1 << 7;
    pub const SUBSCRIBE: u64 = 1 << 8;
    pub const TYPE: u64 = 1 << 9;
    pub const TRAP_NUMBER_DEVICE_ID: u64 = 1 << 10;
    pub const QPN: u64 = 1 << 11;
    pub const RESP_TIME_VALUE: u64 = 1 << 13;
    pub const PRODUCER_TYPE_VENDOR_ID: u64 = 1 << 15;
}

mod field {
    use std::ops::Range;
    pub const SUBSCRIBER_GID: usize = 0;
    pub const ENUM: usize = 16;
    pub const INFORM_INFO: Range<usize> = 24..60;
}

/// A zero-copy view of one InformInfoRecord.
#[derive(Debug, Clone, Copy)]
pub struct InformInfoRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> InformInfoRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), INFORM_INFO_RECORD_LEN)?;
        Ok(InformInfoRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn subscriber_gid(&self) -> [u8; 16] {
        gid_at(self.b(), field::SUBSCRIBER_GID)
    }
    /// Enum: which of the subscriber's subscriptions this is.
    pub fn enumeration(&self) -> u16 {
        be::u16(self.b(), field::ENUM)
    }
    /// Bytes 24-59 as an InformInfo view.
    pub fn inform_info(&self) -> InformInfo<&[u8]> {
        InformInfo::new_checked(&self.b()[field::INFORM_INFO]).expect("new_checked kept the record's 60 bytes")
    }
}

/// The owned form of an InformInfoRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InformInfoRecordRepr {
    pub subscriber_gid: [u8; 16],
    /// The IBA's Enum.
    pub enumeration: u16,
    pub inform_info: InformInfoRepr,
}

impl InformInfoRecordRepr {
    /// Every bit pattern is a record, so this cannot fail once the view exists.
    pub fn parse<T: AsRef<[u8]>>(r: &InformInfoRecord<T>) -> WireResult<Self> {
        Ok(InformInfoRecordRepr {
            subscriber_gid: r.subscriber_gid(),
            enumeration: r.enumeration(),
            inform_info: InformInfoRepr::parse(&r.inform_info())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&InformInfoRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        INFORM_INFO_RECORD_LEN
    }

    /// Writes all 60 bytes, the reserved ones zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, INFORM_INFO_RECORD_LEN)?;
        let out = &mut out[..INFORM_INFO_RECORD_LEN];
        out.fill(0);
        out[field::SUBSCRIBER_GID..field::SUBSCRIBER_GID + 16].copy_from_slice(&self.subscriber_gid);
        be::set_u16(out, field::ENUM, self.enumeration);
        self.inform_info.emit(&mut out[field::INFORM_INFO])
    }
}

/// The record's three key fields, then InformInfo's fields moved past them.
const fn record_components() -> [Component; 16] {
    let mut c = [Component::bytes(0, 16); 16];
    c[1] = Component::bytes(16, 2);
    c[2] = Component::bytes(18, 6);
    let shift = (field::INFORM_INFO.start * 8) as u16;
    let mut i = 0;
    while i < INFORM_INFO_COMPONENTS.len() {
        let inner = INFORM_INFO_COMPONENTS[i];
        c[3 + i] = Component { bit_offset: inner.bit_offset + shift, bits: inner.bits };
        i += 1;
    }
    c
}

const RECORD_COMPONENTS: [Component; 16] = record_components();

// The embedded layout must end where the record does.
const _: () = assert!(field::INFORM_INFO.end - field::INFORM_INFO.start == INFORM_INFO_LEN);

impl SaRecord for InformInfoRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::InformInfoRecord;
    const LEN: usize = INFORM_INFO_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &RECORD_COMPONENTS;
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        InformInfoRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        InformInfoRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::inform_info_record_mask as m;
    use super::*;
    use crate::mad::sa::components_match;
    use crate::mad::sa::inform_info::InformKind;
    use crate::mad::WireError;

    /// Subscriber fe80::2:c903:0:9, Enum 2, and a generic subscription to
    /// trap 64 from any LID (QPN 1, RespTimeValue 18, ProducerType 4), by hand.
    fn wire() -> [u8; 60] {
        let mut b = [0u8; 60];
        b[0..2].copy_from_slice(&[0xFE, 0x80]);
        b[8..16].copy_from_slice(&[0x00, 0x02, 0xC9, 0x03, 0x00, 0x00, 0x00, 0x09]);
        b[16..18].copy_from_slice(&[0x00, 0x02]);
        // InformInfo at 24: GID zero, LIDRangeBegin 0xFFFF, End 0.
        b[40..42].copy_from_slice(&[0xFF, 0xFF]);
        b[46] = 1; // IsGeneric
        b[47] = 1; // Subscribe
        b[48..52].copy_from_slice(&[0x00, 0x03, 0x00, 0x40]); // Type 3, trap 64
        b[52..56].copy_from_slice(&[0x00, 0x00, 0x01, 18]);
        b[57..60].copy_from_slice(&[0x00, 0x00, 0x04]);
        b
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let v = InformInfoRecord::new_checked(&b[..]).unwrap();
        assert_eq!((v.subscriber_gid()[15], v.enumeration()), (0x09, 2));
        assert_eq!(v.inform_info().trap_number(), Some(64));
        let r = InformInfoRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.enumeration, 2);
        let ii = r.inform_info;
        assert_eq!(ii.kind, InformKind::Generic { trap_number: 64, producer_type: 4 });
        assert_eq!((ii.lid_range_begin, ii.lid_range_end, ii.notice_type), (0xFFFF, 0, 3));
        assert_eq!((ii.qpn, ii.resp_time_value, ii.subscribe), (1, 18, true));
        let mut out = [0xAAu8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..60], &b[..], "reserved bytes 18-23 written as zero");
        assert_eq!(&out[60..], &[0xAA; 4], "nothing past the record is touched");
        assert_eq!(InformInfoRecordRepr::attribute_offset(), 8);
    }

    #[test]
    fn every_field_round_trips() {
        let r = InformInfoRecordRepr {
            subscriber_gid: [0x11; 16],
            enumeration: 0xFFFF,
            inform_info: InformInfoRepr {
                gid: [0x22; 16],
                lid_range_begin: 1,
                lid_range_end: 0xBFFF,
                subscribe: false,
                notice_type: 0xFFFF,
                kind: InformKind::Vendor { device_id: 7, vendor_id: 0x00_1175 },
                qpn: 0xAB_CDEF,
                resp_time_value: 7,
            },
        };
        assert_eq!(InformInfoRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap(), r);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            InformInfoRecordRepr::parse_bytes(&wire()[..59]),
            Err(WireError::Truncated { what: WHAT, len: 59, need: 60 })
        );
        assert!(InformInfoRecordRepr::default().emit(&mut [0u8; 36]).is_err());
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = InformInfoRecordRepr::COMPONENTS;
        assert_eq!(c[10], Component::bytes(50, 2), "TrapNumber at InformInfo byte 26");
        assert_eq!(c[13], Component::at(55, 3, 5), "RespTimeValue");
        assert_eq!(c[15], Component::bytes(57, 3), "ProducerType");
        let a = InformInfoRecordRepr::parse_bytes(&wire()).unwrap();
        let mut b = a;
        b.inform_info.kind = InformKind::Generic { trap_number: 65, producer_type: 4 };
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let same = m::SUBSCRIBER_GID | m::ENUM | m::IS_GENERIC | m::PRODUCER_TYPE_VENDOR_ID | m::QPN;
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, m::TRAP_NUMBER_DEVICE_ID, &qa, &qb));
        let other = SaRecord::to_bytes(&InformInfoRecordRepr { enumeration: 3, ..a });
        assert!(!components_match(c, m::ENUM, &qa, &other));
        assert!(components_match(c, m::SUBSCRIBER_GID | m::TRAP_NUMBER_DEVICE_ID, &qa, &other));
        super::super::component_checks::assert_tiles::<InformInfoRecordRepr>();
    }
}
