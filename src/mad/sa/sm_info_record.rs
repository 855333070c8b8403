//! SMInfoRecord (IBA 15.2.5.9, Table 202), 25 bytes: one SM's SMInfo,
//! keyed by the LID of the port it runs on.
//!
//! ```text
//!  0: LID (16)         | Reserved (16)
//!  4: SMInfo (168 bits, IBA 14.2.5.13; offsets +4 from there)
//!       4: GUID (64)
//!      12: SM_Key (64)
//!      20: ActCount (32)
//!      24: Priority (4) SMState (4)
//! ```
//! A GetTableResp spaces records 32 bytes apart (AttributeOffset 4).
//! SM_Key is a secret: OpenSM answers it as zero in every SMInfoRecord,
//! as a SubnGet(SMInfo) does to a requester without the key (IBA 14.4.1.1).

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, SmInfo, SmInfoRepr, SmState, WireResult};
use crate::types::{Guid, Lid};

/// SMInfoRecord's size on the wire.
pub const SM_INFO_RECORD_LEN: usize = 25;

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const SM_INFO: Range<usize> = 4..25;
}

/// SMInfoRecord component mask bits (IBA 15.2.5.9).
pub mod sm_info_mask {
    pub const LID: u64 = 1 << 0;
    pub const GUID: u64 = 1 << 2;
    pub const SM_KEY: u64 = 1 << 3;
    pub const ACT_COUNT: u64 = 1 << 4;
    pub const PRIORITY: u64 = 1 << 5;
    pub const SM_STATE: u64 = 1 << 6;
}

/// A zero-copy view of one SMInfoRecord.
#[derive(Debug, Clone, Copy)]
pub struct SmInfoRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SmInfoRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("SMInfoRecord", buffer.as_ref(), SM_INFO_RECORD_LEN)?;
        Ok(SmInfoRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The LID of the SM's port.
    pub fn lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::LID))
    }
    pub fn sm_info(&self) -> SmInfo<&[u8]> {
        SmInfo::new_checked(&self.b()[field::SM_INFO]).expect("SMInfoRecord's length was checked")
    }
}

/// The owned form of an SMInfoRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmInfoRecordRepr {
    pub lid: Lid,
    pub sm_info: SmInfoRepr,
}

impl SmInfoRecordRepr {
    pub fn parse<T: AsRef<[u8]>>(r: &SmInfoRecord<T>) -> WireResult<Self> {
        Ok(SmInfoRecordRepr { lid: r.lid(), sm_info: SmInfoRepr::parse(&r.sm_info())? })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&SmInfoRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        SM_INFO_RECORD_LEN
    }

    /// Writes all 25 bytes, the reserved half word zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("SMInfoRecord", out, SM_INFO_RECORD_LEN)?;
        let out = &mut out[..SM_INFO_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid.0);
        self.sm_info.emit(&mut SmInfo::new_checked(&mut out[field::SM_INFO])?);
        Ok(())
    }
}

impl Default for SmInfoRecordRepr {
    /// All zeros: GUID 0, priority 0, NotActive.
    fn default() -> Self {
        SmInfoRecordRepr {
            lid: Lid(0),
            sm_info: SmInfoRepr { guid: Guid(0), sm_key: 0, act_count: 0, priority: 0, sm_state: SmState::NotActive },
        }
    }
}

/// Where SMInfo starts, in bytes.
const SM: u16 = 4;

impl SaRecord for SmInfoRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::SmInfoRecord;
    const LEN: usize = SM_INFO_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 2),
        Component::bytes(2, 2),
        Component::bytes(SM, 8),
        Component::bytes(SM + 8, 8),
        Component::bytes(SM + 16, 4),
        Component::at(SM + 20, 0, 4),
        Component::at(SM + 20, 4, 4),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        SmInfoRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        SmInfoRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::component_checks::{assert_fields_and_reserved, assert_tiles};
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    /// Table 202 by hand: a priority-14 master at LID 1.
    fn hand_built() -> [u8; 25] {
        let mut b = [0u8; 25];
        b[0..2].copy_from_slice(&[0x00, 0x01]);
        b[4..12].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x01]);
        b[12..20].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        b[20..24].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        b[24] = 0xe3;
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = SmInfoRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.lid, Lid(1));
        let s = &r.sm_info;
        assert_eq!((s.guid, s.sm_key, s.act_count), (Guid(0x0002_c903_0000_0001), 0x0102_0304_0506_0708, 0xdead_beef));
        assert_eq!((s.priority, s.sm_state), (14, SmState::Master));
        let mut out = [0xAAu8; 25];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(SmInfoRecord::new_checked(&b[..]).unwrap().sm_info().priority(), 14);
    }

    #[test]
    fn every_field_round_trips() {
        let r = SmInfoRecordRepr {
            lid: Lid(0xBFFF),
            sm_info: SmInfoRepr {
                guid: Guid(u64::MAX),
                sm_key: 1,
                act_count: u32::MAX,
                priority: 15,
                sm_state: SmState::Unknown(12),
            },
        };
        let b = SaRecord::to_bytes(&r);
        assert_eq!(&b[2..4], &[0, 0]);
        assert_eq!(SmInfoRecordRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(SaRecord::to_bytes(&SmInfoRecordRepr::default()), vec![0u8; 25]);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            SmInfoRecordRepr::parse_bytes(&hand_built()[..24]),
            Err(WireError::Truncated { what: "SMInfoRecord", len: 24, need: 25 })
        );
        assert!(SmInfoRecordRepr::default().emit(&mut [0u8; 21]).is_err());
    }

    #[test]
    fn the_table_tiles_the_record() {
        assert_tiles::<SmInfoRecordRepr>();
        assert_fields_and_reserved::<SmInfoRecordRepr>(&[1], &[]);
        assert_eq!(SmInfoRecordRepr::attribute_offset(), 4);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = SmInfoRecordRepr::COMPONENTS;
        let a = SmInfoRecordRepr::parse_bytes(&hand_built()).unwrap();
        let mut b = a;
        b.sm_info.sm_state = SmState::Standby;
        b.sm_info.act_count += 1;
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let same = sm_info_mask::LID | sm_info_mask::GUID | sm_info_mask::SM_KEY | sm_info_mask::PRIORITY;
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, sm_info_mask::SM_STATE, &qa, &qb));
        assert!(!components_match(c, sm_info_mask::ACT_COUNT, &qa, &qb));
    }
}
