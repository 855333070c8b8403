//! LinearForwardingTableRecord (IBA 15.2.5.6), 72 bytes: one 64-entry block
//! of a switch's linear forwarding table, named by the switch's LID.
//! ```text
//!  0: LID (16)                | BlockNum (16)
//!  4: Reserved (32)
//!  8: LinearForwardingTable (512): the SMP attribute's block (IBA 14.2.5.10),
//!     byte i the output port for LID BlockNum*64 + i
//! ```
//!
//! Component mask, one bit per field above in order, the reserved one
//! included (OpenSM's `IB_LFTR_COMPMASK_*` names bits 0 and 1): LID 0,
//! BlockNum 1, Reserved 2, LinearForwardingTable 3. The block is one
//! component: a bit per entry would need more bits than the mask has.

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::lft::{LftBlock, LftBlockRepr};
use crate::mad::{be, check_len, WireResult};

/// LinearForwardingTableRecord's size on the wire.
pub const LFT_RECORD_LEN: usize = 72;

const WHAT: &str = "LinearForwardingTableRecord";

/// LinearForwardingTableRecord component mask bits (IBA 15.2.5.6).
pub mod lft_mask {
    pub const LID: u64 = 1 << 0;
    pub const BLOCK_NUM: u64 = 1 << 1;
    /// The whole 64-entry block.
    pub const LINEAR_FORWARDING_TABLE: u64 = 1 << 3;
}

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const BLOCK_NUM: usize = 2;
    pub const BLOCK: Range<usize> = 8..72;
}

/// A zero-copy view of one LinearForwardingTableRecord.
#[derive(Debug, Clone, Copy)]
pub struct LftRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> LftRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), LFT_RECORD_LEN)?;
        Ok(LftRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The switch's LID (its port 0's base LID).
    pub fn lid(&self) -> u16 {
        be::u16(self.b(), field::LID)
    }
    pub fn block_num(&self) -> u16 {
        be::u16(self.b(), field::BLOCK_NUM)
    }
    /// Bytes 8-71 as the SMP attribute's view.
    pub fn block(&self) -> LftBlock<&[u8]> {
        LftBlock::new_checked(&self.b()[field::BLOCK]).expect("new_checked kept the record's 72 bytes")
    }
}

/// The owned form of a LinearForwardingTableRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LftRecordRepr {
    pub lid: u16,
    pub block_num: u16,
    pub block: LftBlockRepr,
}

impl LftRecordRepr {
    /// Every bit pattern is a record, so this cannot fail once the view exists.
    pub fn parse<T: AsRef<[u8]>>(r: &LftRecord<T>) -> WireResult<Self> {
        Ok(LftRecordRepr { lid: r.lid(), block_num: r.block_num(), block: LftBlockRepr::parse(&r.block())? })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&LftRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        LFT_RECORD_LEN
    }

    /// Writes all 72 bytes, the reserved ones zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, LFT_RECORD_LEN)?;
        let out = &mut out[..LFT_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid);
        be::set_u16(out, field::BLOCK_NUM, self.block_num);
        self.block.emit(&mut LftBlock::new_checked(&mut out[field::BLOCK])?);
        Ok(())
    }
}

impl SaRecord for LftRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::LinearForwardingTableRecord;
    const LEN: usize = LFT_RECORD_LEN;
    const COMPONENTS: &'static [Component] =
        &[Component::bytes(0, 2), Component::bytes(2, 2), Component::bytes(4, 4), Component::bytes(8, 64)];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        LftRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        LftRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    /// LID 0x0102, block 3, entry i = port 0x40 + i, laid out by hand.
    fn wire() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[0..4].copy_from_slice(&[0x01, 0x02, 0x00, 0x03]);
        for (i, x) in b[8..].iter_mut().enumerate() {
            *x = 0x40 + i as u8;
        }
        b
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let v = LftRecord::new_checked(&b[..]).unwrap();
        assert_eq!((v.lid(), v.block_num(), v.block().port(63)), (0x0102, 3, Some(0x7F)));
        let r = LftRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.lid, r.block_num, r.block.ports[0], r.block.ports[63]), (0x0102, 3, 0x40, 0x7F));
        let mut out = [0xAAu8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b, "reserved bytes written as zero");
    }

    #[test]
    fn every_field_round_trips() {
        let mut r = LftRecordRepr { lid: 0xBFFF, block_num: 767, ..Default::default() };
        r.block.ports[7] = 0;
        r.block.ports[42] = 36;
        let back = LftRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            LftRecordRepr::parse_bytes(&wire()[..71]),
            Err(WireError::Truncated { what: WHAT, len: 71, need: 72 })
        );
        assert!(LftRecord::new_checked(&[0u8; 8][..]).is_err());
        assert!(LftRecordRepr::default().emit(&mut [0u8; 71]).is_err());
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let a = LftRecordRepr { lid: 5, block_num: 1, ..Default::default() };
        let mut b = a;
        b.block.ports[9] = 2;
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = LftRecordRepr::COMPONENTS;
        assert!(components_match(c, lft_mask::LID | lft_mask::BLOCK_NUM, &qa, &qb));
        assert!(!components_match(c, lft_mask::LINEAR_FORWARDING_TABLE, &qa, &qb));
        let other_lid = SaRecord::to_bytes(&LftRecordRepr { lid: 6, ..a });
        assert!(!components_match(c, lft_mask::LID, &qa, &other_lid));
        assert!(components_match(c, lft_mask::BLOCK_NUM, &qa, &other_lid));
        assert!(!components_match(c, 1 << 4, &qa, &qa), "bit 4 names no field");
        super::super::component_checks::assert_tiles::<LftRecordRepr>();
    }
}
