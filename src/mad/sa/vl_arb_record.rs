//! VLArbitrationTableRecord (IBA 15.2.5.9), 72 bytes: one 32-entry block of
//! a port's high- or low-priority VL arbitration table.
//! ```text
//!  0: LID (16)                | OutputPortNum (8) | BlockNum (8)
//!  4: Reserved (32)
//!  8: VLArbitrationTable (512): the SMP attribute's block (IBA 14.2.5.9),
//!     32 x (Reserved (4) VL (4) | Weight (8))
//! ```
//! BlockNum is the SMP's block selector (1, 2 low priority; 3, 4 high).
//!
//! Component mask, one bit per field in order, the reserved one included
//! (OpenSM's `IB_VLA_COMPMASK_*` names bits 0-2): LID 0, OutputPortNum 1,
//! BlockNum 2, Reserved 3, VLArbitrationTable 4. The block is one
//! component: 32 entries of three fields would need more bits than the
//! mask has.

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::vl_arb::{VlArbBlock, VlArbTable, VlArbTableRepr};
use crate::mad::{be, check_len, WireResult};

/// VLArbitrationTableRecord's size on the wire.
pub const VL_ARB_RECORD_LEN: usize = 72;

const WHAT: &str = "VLArbitrationTableRecord";

/// VLArbitrationTableRecord component mask bits (IBA 15.2.5.9).
pub mod vl_arb_mask {
    pub const LID: u64 = 1 << 0;
    pub const OUTPUT_PORT_NUM: u64 = 1 << 1;
    pub const BLOCK_NUM: u64 = 1 << 2;
    /// The whole 32-entry block.
    pub const VL_ARBITRATION_TABLE: u64 = 1 << 4;
}

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const OUTPUT_PORT_NUM: usize = 2;
    pub const BLOCK_NUM: usize = 3;
    pub const TABLE: Range<usize> = 8..72;
}

/// A zero-copy view of one VLArbitrationTableRecord.
#[derive(Debug, Clone, Copy)]
pub struct VlArbRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlArbRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), VL_ARB_RECORD_LEN)?;
        Ok(VlArbRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn lid(&self) -> u16 {
        be::u16(self.b(), field::LID)
    }
    pub fn output_port_num(&self) -> u8 {
        self.b()[field::OUTPUT_PORT_NUM]
    }
    pub fn block_num(&self) -> u8 {
        self.b()[field::BLOCK_NUM]
    }
    /// Bytes 8-71 as the SMP attribute's view.
    pub fn table(&self) -> VlArbTable<&[u8]> {
        VlArbTable::new_checked(&self.b()[field::TABLE]).expect("new_checked kept the record's 72 bytes")
    }
}

/// The owned form of a VLArbitrationTableRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlArbRecordRepr {
    pub lid: u16,
    pub output_port_num: u8,
    /// The raw byte; [`VlArbRecordRepr::block`] reads it as the selector.
    pub block_num: u8,
    pub table: VlArbTableRepr,
}

impl VlArbRecordRepr {
    /// Every bit pattern is a record (the entries' reserved nibbles are
    /// ignored), so this cannot fail once the view exists.
    pub fn parse<T: AsRef<[u8]>>(r: &VlArbRecord<T>) -> WireResult<Self> {
        Ok(VlArbRecordRepr {
            lid: r.lid(),
            output_port_num: r.output_port_num(),
            block_num: r.block_num(),
            table: VlArbTableRepr::parse(&r.table())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&VlArbRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        VL_ARB_RECORD_LEN
    }

    /// Which table and half the block is.
    pub fn block(&self) -> VlArbBlock {
        VlArbBlock::from(u16::from(self.block_num))
    }

    /// Writes all 72 bytes, the reserved ones zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, VL_ARB_RECORD_LEN)?;
        let out = &mut out[..VL_ARB_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid);
        out[field::OUTPUT_PORT_NUM] = self.output_port_num;
        out[field::BLOCK_NUM] = self.block_num;
        self.table.emit(&mut VlArbTable::new_checked(&mut out[field::TABLE])?);
        Ok(())
    }
}

impl SaRecord for VlArbRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::VlArbitrationTableRecord;
    const LEN: usize = VL_ARB_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 2),
        Component::bytes(2, 1),
        Component::bytes(3, 1),
        Component::bytes(4, 4),
        Component::bytes(8, 64),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        VlArbRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        VlArbRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::components_match;
    use crate::mad::vl_arb::VlArbEntry;
    use crate::mad::WireError;

    /// LID 0x0042, port 9, block 3 (high, first half), entry i = VL i%16,
    /// weight 2i+1, by hand.
    fn wire() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[0..4].copy_from_slice(&[0x00, 0x42, 9, 3]);
        for i in 0..32 {
            b[8 + 2 * i] = (i % 16) as u8;
            b[9 + 2 * i] = 2 * i as u8 + 1;
        }
        b
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let v = VlArbRecord::new_checked(&b[..]).unwrap();
        assert_eq!((v.lid(), v.output_port_num(), v.block_num()), (0x42, 9, 3));
        assert_eq!(v.table().entry(17), Some(VlArbEntry { vl: 1, weight: 35 }));
        let r = VlArbRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.block(), VlArbBlock::HighFirst);
        assert_eq!(r.table.entries[31], VlArbEntry { vl: 15, weight: 63 });
        let mut out = [0xAAu8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn every_field_round_trips() {
        let mut r = VlArbRecordRepr { lid: 0xABCD, output_port_num: 255, block_num: 0xEE, ..Default::default() };
        r.table.entries[0] = VlArbEntry { vl: 7, weight: 255 };
        r.table.entries[20] = VlArbEntry { vl: 15, weight: 1 };
        let back = VlArbRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.block(), VlArbBlock::Unknown(0xEE));
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            VlArbRecordRepr::parse_bytes(&wire()[..71]),
            Err(WireError::Truncated { what: WHAT, len: 71, need: 72 })
        );
        assert!(VlArbRecordRepr::default().emit(&mut [0u8; 64]).is_err());
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let a = VlArbRecordRepr::parse_bytes(&wire()).unwrap();
        let b = VlArbRecordRepr { block_num: 4, ..a };
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = VlArbRecordRepr::COMPONENTS;
        let same = vl_arb_mask::LID | vl_arb_mask::OUTPUT_PORT_NUM | vl_arb_mask::VL_ARBITRATION_TABLE;
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, vl_arb_mask::BLOCK_NUM, &qa, &qb));
        let mut d = a;
        d.table.entries[12].weight = 0;
        assert!(!components_match(c, vl_arb_mask::VL_ARBITRATION_TABLE, &qa, &SaRecord::to_bytes(&d)));
        assert!(components_match(c, vl_arb_mask::BLOCK_NUM | vl_arb_mask::LID, &qa, &SaRecord::to_bytes(&d)));
        super::super::component_checks::assert_tiles::<VlArbRecordRepr>();
    }
}
