//! P_KeyTableRecord (IBA 15.2.5.11, Table 204), 72 bytes: one block of 32
//! P_Keys of a port, keyed by LID, block number and (on a switch) port.
//!
//! ```text
//!  0: LID (16)             | BlockNum (16)
//!  4: PortNum (8) | Reserved (24)
//!  8: P_KeyTable block (512 bits, IBA 14.2.5.7)
//!       8: P_Key 0 (16) | 10: P_Key 1 | ... | 70: P_Key 31
//! ```
//! For a CA or router, LID is the port's and PortNum is ignored; for a
//! switch, LID is port 0's and PortNum picks the port. A GetTableResp
//! spaces records 72 bytes apart (AttributeOffset 9).
//!
//! The component bits: LID, BlockNum, PortNum, the reserved 24 bits, then
//! one bit per P_Key entry (bits 4-35), the same rule as GUIDInfoRecord's
//! per-GUID bits. OpenSM names only the first three.

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::pkey_table::PKEY_BLOCK_ENTRIES;
use crate::mad::{be, check_len, PKeyTableBlock, PKeyTableBlockRepr, WireResult};
use crate::types::Lid;

/// P_KeyTableRecord's size on the wire.
pub const PKEY_TABLE_RECORD_LEN: usize = 72;

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const BLOCK_NUM: usize = 2;
    pub const PORT_NUM: usize = 4;
    pub const PKEY_TABLE: Range<usize> = 8..72;
}

/// P_KeyTableRecord component mask bits (IBA 15.2.5.11).
pub mod pkey_table_mask {
    pub const LID: u64 = 1 << 0;
    pub const BLOCK_NUM: u64 = 1 << 1;
    pub const PORT_NUM: u64 = 1 << 2;
    /// The bit of P_Key entry `i` (0-31) of the block; 0 past 31.
    pub const fn pkey(i: usize) -> u64 {
        if i < super::PKEY_BLOCK_ENTRIES {
            1 << (4 + i)
        } else {
            0
        }
    }
}

/// A zero-copy view of one P_KeyTableRecord.
#[derive(Debug, Clone, Copy)]
pub struct PKeyTableRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PKeyTableRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("P_KeyTableRecord", buffer.as_ref(), PKEY_TABLE_RECORD_LEN)?;
        Ok(PKeyTableRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::LID))
    }
    /// Block `n` holds entries `n*32 ..= n*32+31`.
    pub fn block_num(&self) -> u16 {
        be::u16(self.b(), field::BLOCK_NUM)
    }
    /// The switch port whose table this is (ignored for a CA or router).
    pub fn port_num(&self) -> u8 {
        self.b()[field::PORT_NUM]
    }
    pub fn pkey_table(&self) -> PKeyTableBlock<&[u8]> {
        PKeyTableBlock::new_checked(&self.b()[field::PKEY_TABLE]).expect("P_KeyTableRecord's length was checked")
    }
}

/// The owned form of a P_KeyTableRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PKeyTableRecordRepr {
    pub lid: Lid,
    pub block_num: u16,
    pub port_num: u8,
    pub pkey_table: PKeyTableBlockRepr,
}

impl PKeyTableRecordRepr {
    pub fn parse<T: AsRef<[u8]>>(r: &PKeyTableRecord<T>) -> WireResult<Self> {
        Ok(PKeyTableRecordRepr {
            lid: r.lid(),
            block_num: r.block_num(),
            port_num: r.port_num(),
            pkey_table: PKeyTableBlockRepr::parse(&r.pkey_table())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&PKeyTableRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        PKEY_TABLE_RECORD_LEN
    }

    /// Writes all 72 bytes, the reserved ones zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("P_KeyTableRecord", out, PKEY_TABLE_RECORD_LEN)?;
        let out = &mut out[..PKEY_TABLE_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid.0);
        be::set_u16(out, field::BLOCK_NUM, self.block_num);
        out[field::PORT_NUM] = self.port_num;
        self.pkey_table.emit(&mut PKeyTableBlock::new_checked(&mut out[field::PKEY_TABLE])?);
        Ok(())
    }
}

/// The 36 components: the record's four fields, then one per P_Key.
const COMPONENTS: [Component; 4 + PKEY_BLOCK_ENTRIES] = {
    let mut c = [Component::bytes(0, 2); 4 + PKEY_BLOCK_ENTRIES];
    c[1] = Component::bytes(2, 2);
    c[2] = Component::bytes(4, 1);
    c[3] = Component::bytes(5, 3);
    let mut i = 0;
    while i < PKEY_BLOCK_ENTRIES {
        c[4 + i] = Component::bytes(8 + 2 * i as u16, 2);
        i += 1;
    }
    c
};

impl SaRecord for PKeyTableRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::PKeyTableRecord;
    const LEN: usize = PKEY_TABLE_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &COMPONENTS;
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        PKeyTableRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        PKeyTableRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::pkey_table::DEFAULT_PKEY;
    use crate::mad::sa::component_checks::{assert_fields_and_reserved, assert_tiles};
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    /// Table 204 by hand: block 2 of switch LID 5's port 9, entries 0x8000+i.
    fn hand_built() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[0..5].copy_from_slice(&[0x00, 0x05, 0x00, 0x02, 9]);
        for i in 0..32 {
            b[8 + 2 * i..10 + 2 * i].copy_from_slice(&(0x8000u16 + i as u16).to_be_bytes());
        }
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = PKeyTableRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.lid, r.block_num, r.port_num), (Lid(5), 2, 9));
        assert_eq!((r.pkey_table.pkeys[0], r.pkey_table.pkeys[31]), (0x8000, 0x801f));
        let mut out = [0xAAu8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(PKeyTableRecord::new_checked(&b[..]).unwrap().pkey_table().pkey(1), Some(0x8001));
    }

    #[test]
    fn every_field_round_trips_and_reserved_bytes_are_dropped() {
        let mut r = PKeyTableRecordRepr { lid: Lid(0xBFFF), block_num: 0x07ff, port_num: 254, ..Default::default() };
        r.pkey_table.pkeys[0] = DEFAULT_PKEY;
        r.pkey_table.pkeys[17] = 0x7fff;
        r.pkey_table.pkeys[31] = 1;
        let b = SaRecord::to_bytes(&r);
        assert_eq!(PKeyTableRecordRepr::parse_bytes(&b).unwrap(), r);
        let mut dirty = b.clone();
        dirty[5..8].fill(0xff);
        assert_eq!(SaRecord::to_bytes(&PKeyTableRecordRepr::parse_bytes(&dirty).unwrap()), b);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            PKeyTableRecordRepr::parse_bytes(&hand_built()[..71]),
            Err(WireError::Truncated { what: "P_KeyTableRecord", len: 71, need: 72 })
        );
        assert!(PKeyTableRecordRepr::default().emit(&mut [0u8; 64]).is_err());
    }

    #[test]
    fn the_table_tiles_the_record() {
        assert_tiles::<PKeyTableRecordRepr>();
        assert_fields_and_reserved::<PKeyTableRecordRepr>(&[3], &[]);
        assert_eq!(PKeyTableRecordRepr::COMPONENTS.len(), 36);
        assert_eq!(PKeyTableRecordRepr::attribute_offset(), 9);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = PKeyTableRecordRepr::COMPONENTS;
        let a = PKeyTableRecordRepr::parse_bytes(&hand_built()).unwrap();
        let mut b = a;
        b.port_num = 10;
        b.pkey_table.pkeys[31] = 0xffff;
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let same =
            pkey_table_mask::LID | pkey_table_mask::BLOCK_NUM | pkey_table_mask::pkey(0) | pkey_table_mask::pkey(30);
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, pkey_table_mask::PORT_NUM, &qa, &qb));
        assert!(!components_match(c, pkey_table_mask::pkey(31), &qa, &qb));
        assert_eq!(pkey_table_mask::pkey(32), 0);
    }
}
