//! SLtoVLMappingTableRecord (IBA 15.2.5.4), 16 bytes: the SL-to-VL table of
//! one (input port, output port) pair of a switch, or of a CA/router port.
//! ```text
//!  0: LID (16)                | InputPortNum (8) | OutputPortNum (8)
//!  4: Reserved (32)
//!  8: SLtoVLMappingTable (64): the SMP attribute (IBA 14.2.5.8),
//!     SL0toVL (4) SL1toVL (4) | ... | SL14toVL (4) SL15toVL (4)
//! ```
//! For a CA or router port the LID is the port's and both port numbers are
//! reserved; for a switch the LID is port 0's.
//!
//! Component mask, one bit per field in order, the reserved one included
//! (OpenSM's `IB_SLVL_COMPMASK_*` names bits 0-2): LID 0, InputPortNum 1,
//! OutputPortNum 2, Reserved 3, then one bit per field of the embedded
//! table: SL0toVL 4 ... SL15toVL 19 (see [`sl_to_vl_mask::sl`]).

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::sl_to_vl::{SlToVlTable, SlToVlTableRepr};
use crate::mad::{be, check_len, WireResult};

/// SLtoVLMappingTableRecord's size on the wire.
pub const SL_TO_VL_RECORD_LEN: usize = 16;

const WHAT: &str = "SLtoVLMappingTableRecord";

/// SLtoVLMappingTableRecord component mask bits (IBA 15.2.5.4).
pub mod sl_to_vl_mask {
    pub const LID: u64 = 1 << 0;
    pub const INPUT_PORT_NUM: u64 = 1 << 1;
    pub const OUTPUT_PORT_NUM: u64 = 1 << 2;
    /// The bit of SL`n`toVL (bits 4-19); zero for an SL above 15.
    pub const fn sl(n: u8) -> u64 {
        if n < 16 {
            1 << (4 + n)
        } else {
            0
        }
    }
    /// Every SLnToVL bit: the whole table.
    pub const ALL_SLS: u64 = 0xFFFF << 4;
}

mod field {
    use std::ops::Range;
    pub const LID: usize = 0;
    pub const INPUT_PORT_NUM: usize = 2;
    pub const OUTPUT_PORT_NUM: usize = 3;
    pub const TABLE: Range<usize> = 8..16;
}

/// A zero-copy view of one SLtoVLMappingTableRecord.
#[derive(Debug, Clone, Copy)]
pub struct SlToVlRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SlToVlRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), SL_TO_VL_RECORD_LEN)?;
        Ok(SlToVlRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn lid(&self) -> u16 {
        be::u16(self.b(), field::LID)
    }
    pub fn input_port_num(&self) -> u8 {
        self.b()[field::INPUT_PORT_NUM]
    }
    pub fn output_port_num(&self) -> u8 {
        self.b()[field::OUTPUT_PORT_NUM]
    }
    /// Bytes 8-15 as the SMP attribute's view.
    pub fn table(&self) -> SlToVlTable<&[u8]> {
        SlToVlTable::new_checked(&self.b()[field::TABLE]).expect("new_checked kept the record's 16 bytes")
    }
}

/// The owned form of an SLtoVLMappingTableRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlToVlRecordRepr {
    pub lid: u16,
    pub input_port_num: u8,
    pub output_port_num: u8,
    pub table: SlToVlTableRepr,
}

impl SlToVlRecordRepr {
    /// Every bit pattern is a record, so this cannot fail once the view exists.
    pub fn parse<T: AsRef<[u8]>>(r: &SlToVlRecord<T>) -> WireResult<Self> {
        Ok(SlToVlRecordRepr {
            lid: r.lid(),
            input_port_num: r.input_port_num(),
            output_port_num: r.output_port_num(),
            table: SlToVlTableRepr::parse(&r.table())?,
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&SlToVlRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        SL_TO_VL_RECORD_LEN
    }

    /// Writes all 16 bytes, the reserved ones zero; a VL above 15 is cut to
    /// its 4 bits.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, SL_TO_VL_RECORD_LEN)?;
        let out = &mut out[..SL_TO_VL_RECORD_LEN];
        out.fill(0);
        be::set_u16(out, field::LID, self.lid);
        out[field::INPUT_PORT_NUM] = self.input_port_num;
        out[field::OUTPUT_PORT_NUM] = self.output_port_num;
        self.table.emit(&mut SlToVlTable::new_checked(&mut out[field::TABLE])?);
        Ok(())
    }
}

/// SL n's nibble: byte 8 + n/2, the high nibble for even SLs.
const fn sl_component(n: u16) -> Component {
    Component::at(8 + n / 2, (n % 2) * 4, 4)
}

impl SaRecord for SlToVlRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::SlToVlMappingTableRecord;
    const LEN: usize = SL_TO_VL_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 2),
        Component::bytes(2, 1),
        Component::bytes(3, 1),
        Component::bytes(4, 4),
        sl_component(0),
        sl_component(1),
        sl_component(2),
        sl_component(3),
        sl_component(4),
        sl_component(5),
        sl_component(6),
        sl_component(7),
        sl_component(8),
        sl_component(9),
        sl_component(10),
        sl_component(11),
        sl_component(12),
        sl_component(13),
        sl_component(14),
        sl_component(15),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        SlToVlRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        SlToVlRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    /// LID 0x0C01, in port 3, out port 7, SL n -> VL 15 - n, by hand.
    fn wire() -> [u8; 16] {
        [0x0C, 0x01, 3, 7, 0, 0, 0, 0, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10]
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let v = SlToVlRecord::new_checked(&b[..]).unwrap();
        assert_eq!((v.lid(), v.input_port_num(), v.output_port_num()), (0x0C01, 3, 7));
        assert_eq!((v.table().vl(0), v.table().vl(15)), (Some(15), Some(0)));
        let r = SlToVlRecordRepr::parse_bytes(&b).unwrap();
        let vls: Vec<u8> = (0..16).rev().collect();
        assert_eq!(r.table.vl.to_vec(), vls);
        assert_eq!((r.lid, r.input_port_num, r.output_port_num), (0x0C01, 3, 7));
        let mut out = [0xAAu8; 16];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn every_field_round_trips() {
        let r = SlToVlRecordRepr {
            lid: 0xFFFE,
            input_port_num: 36,
            output_port_num: 255,
            table: SlToVlTableRepr { vl: [1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14] },
        };
        assert_eq!(SlToVlRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap(), r);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            SlToVlRecordRepr::parse_bytes(&wire()[..15]),
            Err(WireError::Truncated { what: WHAT, len: 15, need: 16 })
        );
        assert!(SlToVlRecordRepr::default().emit(&mut [0u8; 8]).is_err());
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let a = SlToVlRecordRepr::parse_bytes(&wire()).unwrap();
        let mut b = a;
        b.table.vl[5] = 0; // SL5 (the low nibble of byte 10)
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = SlToVlRecordRepr::COMPONENTS;
        assert_eq!(c[9], Component::at(10, 4, 4));
        let but_sl5 = sl_to_vl_mask::ALL_SLS & !sl_to_vl_mask::sl(5);
        assert!(components_match(c, sl_to_vl_mask::LID | sl_to_vl_mask::OUTPUT_PORT_NUM | but_sl5, &qa, &qb));
        assert!(!components_match(c, sl_to_vl_mask::sl(5), &qa, &qb));
        let other_in = SaRecord::to_bytes(&SlToVlRecordRepr { input_port_num: 4, ..a });
        assert!(!components_match(c, sl_to_vl_mask::INPUT_PORT_NUM, &qa, &other_in));
        assert!(components_match(c, sl_to_vl_mask::OUTPUT_PORT_NUM, &qa, &other_in));
        assert_eq!(sl_to_vl_mask::sl(16), 0);
        assert_eq!(sl_to_vl_mask::sl(15), 1 << 19);
        super::super::component_checks::assert_tiles::<SlToVlRecordRepr>();
    }
}
