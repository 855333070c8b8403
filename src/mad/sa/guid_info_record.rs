//! GUIDInfoRecord (IBA 15.2.5.18, Table 211), 72 bytes: one block of 8
//! GUIDs (GID interface IDs) of a port, keyed by its LID and block number.
//! SubnAdmSet/Delete of it add or remove alias GUIDs.
//!
//! ```text
//!  0: LID (16)       | BlockNum (8) | Reserved (8)
//!  4: Reserved (32)
//!  8: GUIDInfo block (512 bits, IBA 14.2.5.5)
//!       8: GUID 0 (64) | 16: GUID 1 | ... | 64: GUID 7
//! ```
//! A GetTableResp spaces records 72 bytes apart (AttributeOffset 9).

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::guid_info::GUID_BLOCK_ENTRIES;
use crate::mad::{be, check_len, GuidInfoBlock, GuidInfoBlockRepr, WireResult};
use crate::types::Lid;

/// GUIDInfoRecord's size on the wire.
pub const GUID_INFO_RECORD_LEN: usize = 72;

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const BLOCK_NUM: usize = 2;
    pub const GUID_INFO: Range<usize> = 8..72;
}

/// GUIDInfoRecord component mask bits (IBA 15.2.5.18): LID, BlockNum, the
/// two reserved fields, then one bit per GUID of the block.
pub mod guid_info_mask {
    pub const LID: u64 = 1 << 0;
    pub const BLOCK_NUM: u64 = 1 << 1;
    /// The bit of GUID `i` (0-7) of the block; 0 past 7.
    pub const fn guid(i: usize) -> u64 {
        if i < super::GUID_BLOCK_ENTRIES {
            1 << (4 + i)
        } else {
            0
        }
    }
}

/// A zero-copy view of one GUIDInfoRecord.
#[derive(Debug, Clone, Copy)]
pub struct GuidInfoRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> GuidInfoRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("GUIDInfoRecord", buffer.as_ref(), GUID_INFO_RECORD_LEN)?;
        Ok(GuidInfoRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The port's LID (a switch's port 0 LID).
    pub fn lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::LID))
    }
    /// Block `n` holds GUID indices `n*8 ..= n*8+7`.
    pub fn block_num(&self) -> u8 {
        self.b()[field::BLOCK_NUM]
    }
    pub fn guid_info(&self) -> GuidInfoBlock<&[u8]> {
        GuidInfoBlock::new_checked(&self.b()[field::GUID_INFO]).expect("GUIDInfoRecord's length was checked")
    }
}

/// The owned form of a GUIDInfoRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GuidInfoRecordRepr {
    pub lid: Lid,
    pub block_num: u8,
    pub guid_info: GuidInfoBlockRepr,
}

impl GuidInfoRecordRepr {
    pub fn parse<T: AsRef<[u8]>>(r: &GuidInfoRecord<T>) -> WireResult<Self> {
        Ok(GuidInfoRecordRepr {
            lid: r.lid(),
            block_num: r.block_num(),
            guid_info: GuidInfoBlockRepr::parse(&r.guid_info())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&GuidInfoRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        GUID_INFO_RECORD_LEN
    }

    /// Writes all 72 bytes, the reserved ones zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("GUIDInfoRecord", out, GUID_INFO_RECORD_LEN)?;
        let out = &mut out[..GUID_INFO_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid.0);
        out[field::BLOCK_NUM] = self.block_num;
        self.guid_info.emit(&mut GuidInfoBlock::new_checked(&mut out[field::GUID_INFO])?);
        Ok(())
    }
}

impl SaRecord for GuidInfoRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::GuidInfoRecord;
    const LEN: usize = GUID_INFO_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 2),
        Component::bytes(2, 1),
        Component::bytes(3, 1),
        Component::bytes(4, 4),
        Component::bytes(8, 8),
        Component::bytes(16, 8),
        Component::bytes(24, 8),
        Component::bytes(32, 8),
        Component::bytes(40, 8),
        Component::bytes(48, 8),
        Component::bytes(56, 8),
        Component::bytes(64, 8),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        GuidInfoRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        GuidInfoRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::component_checks::{assert_fields_and_reserved, assert_tiles};
    use crate::mad::sa::components_match;
    use crate::mad::WireError;
    use crate::types::Guid;

    /// Table 211 by hand: block 1 of LID 0x0203, GUIDs 0x..10 to 0x..17.
    fn hand_built() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[0..4].copy_from_slice(&[0x02, 0x03, 1, 0]);
        for i in 0..8 {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x10 + i as u8]);
        }
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = GuidInfoRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.lid, r.block_num), (Lid(0x0203), 1));
        for i in 0..8 {
            assert_eq!(r.guid_info.guids[i], Guid(0x0002_c903_0000_0010 + i as u64));
        }
        let mut out = [0xAAu8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(GuidInfoRecord::new_checked(&b[..]).unwrap().guid_info().guid(7), Some(Guid(0x0002_c903_0000_0017)));
    }

    #[test]
    fn every_field_round_trips_and_reserved_bytes_are_dropped() {
        let mut r = GuidInfoRecordRepr { lid: Lid(0xBFFF), block_num: 31, ..Default::default() };
        r.guid_info.guids = [1, 2, 3, 4, 5, 6, 7, u64::MAX].map(Guid);
        let b = SaRecord::to_bytes(&r);
        assert_eq!(GuidInfoRecordRepr::parse_bytes(&b).unwrap(), r);
        let mut dirty = b.clone();
        dirty[3..8].fill(0xff);
        assert_eq!(SaRecord::to_bytes(&GuidInfoRecordRepr::parse_bytes(&dirty).unwrap()), b);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            GuidInfoRecordRepr::parse_bytes(&hand_built()[..71]),
            Err(WireError::Truncated { what: "GUIDInfoRecord", len: 71, need: 72 })
        );
        assert!(GuidInfoRecordRepr::default().emit(&mut [0u8; 64]).is_err());
    }

    #[test]
    fn the_table_tiles_the_record() {
        assert_tiles::<GuidInfoRecordRepr>();
        assert_fields_and_reserved::<GuidInfoRecordRepr>(&[2, 3], &[]);
        assert_eq!(GuidInfoRecordRepr::COMPONENTS.len(), 12);
        assert_eq!(GuidInfoRecordRepr::attribute_offset(), 9);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = GuidInfoRecordRepr::COMPONENTS;
        let a = GuidInfoRecordRepr::parse_bytes(&hand_built()).unwrap();
        let mut b = a;
        b.guid_info.guids[5] = Guid(0xabc);
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let same = guid_info_mask::LID | guid_info_mask::BLOCK_NUM | guid_info_mask::guid(4) | guid_info_mask::guid(6);
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, guid_info_mask::guid(5), &qa, &qb));
        assert_eq!(guid_info_mask::guid(8), 0);
    }
}
