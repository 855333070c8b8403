//! MulticastForwardingTableRecord (IBA 15.2.5.8), 72 bytes: one block of 32
//! port masks of a switch's multicast forwarding table.
//! ```text
//!  0: LID (16)                | Position (4) Reserved (3) BlockNum (9)
//!  4: Reserved (32)
//!  8: MulticastForwardingTable (512): the SMP attribute's block (IBA
//!     14.2.5.12), mask i for MLID 0xC000 + BlockNum*32 + i, ports
//!     Position*16 ..= Position*16 + 15
//! ```
//!
//! Component mask, one bit per field above in order, reserved ones included
//! (as OpenSM's `IB_MFTR_COMPMASK_*` numbers bits 0-4): LID 0, Position 1,
//! Reserved 2, BlockNum 3, Reserved 4, MulticastForwardingTable 5. The
//! block is one component, as in the LinearForwardingTableRecord.

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::mft::{MftBlock, MftBlockRepr};
use crate::mad::{be, check_len, WireResult};

/// MulticastForwardingTableRecord's size on the wire.
pub const MFT_RECORD_LEN: usize = 72;

const WHAT: &str = "MulticastForwardingTableRecord";

/// MulticastForwardingTableRecord component mask bits (IBA 15.2.5.8).
pub mod mft_mask {
    pub const LID: u64 = 1 << 0;
    pub const POSITION: u64 = 1 << 1;
    pub const BLOCK_NUM: u64 = 1 << 3;
    /// The whole block of 32 port masks.
    pub const MULTICAST_FORWARDING_TABLE: u64 = 1 << 5;
}

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    /// Position in bits 15-12, BlockNum in bits 8-0, bits 11-9 reserved.
    pub const POSITION_BLOCK: usize = 2;
    pub const BLOCK: Range<usize> = 8..72;
}

const POSITION_SHIFT: u16 = 12;
const BLOCK_NUM_MASK: u16 = 0x01FF;

/// A zero-copy view of one MulticastForwardingTableRecord.
#[derive(Debug, Clone, Copy)]
pub struct MftRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MftRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), MFT_RECORD_LEN)?;
        Ok(MftRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// The switch's LID (its port 0's base LID).
    pub fn lid(&self) -> u16 {
        be::u16(self.b(), field::LID)
    }
    /// Which 16 ports the masks cover (4 bits).
    pub fn position(&self) -> u8 {
        (be::u16(self.b(), field::POSITION_BLOCK) >> POSITION_SHIFT) as u8
    }
    /// 9 bits: the block holding MLIDs 0xC000 + BlockNum*32 ..
    pub fn block_num(&self) -> u16 {
        be::u16(self.b(), field::POSITION_BLOCK) & BLOCK_NUM_MASK
    }
    /// Bytes 8-71 as the SMP attribute's view.
    pub fn block(&self) -> MftBlock<&[u8]> {
        MftBlock::new_checked(&self.b()[field::BLOCK]).expect("new_checked kept the record's 72 bytes")
    }
}

/// The owned form of a MulticastForwardingTableRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MftRecordRepr {
    pub lid: u16,
    /// 4 bits.
    pub position: u8,
    /// 9 bits.
    pub block_num: u16,
    pub block: MftBlockRepr,
}

impl MftRecordRepr {
    /// Every bit pattern is a record (the reserved bits are ignored), so
    /// this cannot fail once the view exists.
    pub fn parse<T: AsRef<[u8]>>(r: &MftRecord<T>) -> WireResult<Self> {
        Ok(MftRecordRepr {
            lid: r.lid(),
            position: r.position(),
            block_num: r.block_num(),
            block: MftBlockRepr::parse(&r.block())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&MftRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        MFT_RECORD_LEN
    }

    /// Writes all 72 bytes, the reserved ones zero. A position above 15 or
    /// a block above 511 is cut to its field.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, MFT_RECORD_LEN)?;
        let out = &mut out[..MFT_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid);
        let position_block = u16::from(self.position & 0x0F) << POSITION_SHIFT | (self.block_num & BLOCK_NUM_MASK);
        be::set_u16(out, field::POSITION_BLOCK, position_block);
        self.block.emit(&mut MftBlock::new_checked(&mut out[field::BLOCK])?);
        Ok(())
    }
}

impl SaRecord for MftRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::MulticastForwardingTableRecord;
    const LEN: usize = MFT_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 2),
        Component::at(2, 0, 4),
        Component::at(2, 4, 3),
        Component::at(2, 7, 9),
        Component::bytes(4, 4),
        Component::bytes(8, 64),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        MftRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        MftRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    /// LID 0x0A0B, position 2, block 0x1C3, mask i = 0x8000 | i, by hand.
    fn wire() -> [u8; 72] {
        let mut b = [0u8; 72];
        // 0x2 << 12 | 0x1C3 = 0x21C3
        b[0..4].copy_from_slice(&[0x0A, 0x0B, 0x21, 0xC3]);
        for i in 0..32 {
            b[8 + 2 * i] = 0x80;
            b[9 + 2 * i] = i as u8;
        }
        b
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let v = MftRecord::new_checked(&b[..]).unwrap();
        assert_eq!((v.lid(), v.position(), v.block_num()), (0x0A0B, 2, 0x1C3));
        assert_eq!(v.block().port_mask(31), Some(0x801F));
        let r = MftRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.lid, r.position, r.block_num), (0x0A0B, 2, 0x1C3));
        assert_eq!((r.block.port_masks[0], r.block.port_masks[5]), (0x8000, 0x8005));
        let mut out = [0xAAu8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn reserved_bits_are_ignored_and_wide_values_cut() {
        let mut b = wire();
        b[2] |= 0x0E; // the three reserved bits between Position and BlockNum
        b[5] = 0x77;
        let r = MftRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.position, r.block_num), (2, 0x1C3));
        assert_eq!(SaRecord::to_bytes(&r), wire().to_vec());
        let wide = MftRecordRepr { position: 0x1F, block_num: 0xFFFF, ..Default::default() };
        let v = SaRecord::to_bytes(&wide);
        assert_eq!(&v[2..4], &[0xF1, 0xFF]);
    }

    #[test]
    fn every_field_round_trips() {
        let mut r = MftRecordRepr { lid: 0x1234, position: 15, block_num: 511, ..Default::default() };
        r.block.port_masks[3] = 0xFFFF;
        r.block.port_masks[30] = 0x0102;
        assert_eq!(MftRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap(), r);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            MftRecordRepr::parse_bytes(&wire()[..10]),
            Err(WireError::Truncated { what: WHAT, len: 10, need: 72 })
        );
        assert!(MftRecordRepr::default().emit(&mut [0u8; 71]).is_err());
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let a = MftRecordRepr { lid: 1, position: 1, block_num: 4, ..Default::default() };
        let b = MftRecordRepr { block_num: 5, ..a };
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = MftRecordRepr::COMPONENTS;
        assert!(components_match(c, mft_mask::LID | mft_mask::POSITION, &qa, &qb));
        assert!(!components_match(c, mft_mask::BLOCK_NUM, &qa, &qb));
        let c_pos = SaRecord::to_bytes(&MftRecordRepr { position: 0, ..a });
        assert!(!components_match(c, mft_mask::POSITION, &qa, &c_pos));
        assert!(components_match(c, mft_mask::BLOCK_NUM | mft_mask::MULTICAST_FORWARDING_TABLE, &qa, &c_pos));
        let mut d = a;
        d.block.port_masks[0] = 1;
        assert!(!components_match(c, mft_mask::MULTICAST_FORWARDING_TABLE, &qa, &SaRecord::to_bytes(&d)));
        super::super::component_checks::assert_tiles::<MftRecordRepr>();
    }
}
