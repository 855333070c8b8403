//! SLtoVLMappingTable (IBA 14.2.5.8): the VL each SL uses on one
//! (input port, output port) pair of a switch, or on a CA/router port.
//!
//! ```text
//! 0: SL0toVL(4) SL1toVL(4) | SL2toVL(4) SL3toVL(4) | ... | 7: SL14toVL(4) SL15toVL(4)
//! ```
//! VL 15 means "drop packets with this SL".
//!
//! # AttributeModifier
//! For a switch: bits 7-0 output port, bits 15-8 input port. With
//! SwitchInfo.OptimizedSLtoVLMappingProgramming, bit 16 applies the Set to
//! all output ports and bit 17 to all input ports. Ignored by CAs/routers.

use super::{attribute_view, AttributeId, WireResult};

mod field {
    pub const VLS: usize = 0;
    pub const LEN: usize = 8;
}

/// SLs in the table.
pub const SL_COUNT: usize = 16;
/// The VL that drops packets.
pub const VL_DROP: u8 = 15;
/// AttributeModifier bit: every output port (optimized programming).
pub const ATTR_MOD_ALL_OUTPUT_PORTS: u32 = 1 << 16;
/// AttributeModifier bit: every input port (optimized programming).
pub const ATTR_MOD_ALL_INPUT_PORTS: u32 = 1 << 17;

/// The AttributeModifier for the `in_port` -> `out_port` table.
pub fn attribute_modifier(in_port: u8, out_port: u8) -> u32 {
    (in_port as u32) << 8 | out_port as u32
}

attribute_view! {
    /// A zero-copy view of an SLtoVLMappingTable (8 bytes).
    SlToVlTable, SlToVlTableRepr, "SLtoVLMappingTable", field::LEN, AttributeId::SlToVlMappingTable
}

impl<T: AsRef<[u8]>> SlToVlTable<T> {
    /// Byte sl/2, high nibble for even SLs and low nibble for odd ones.
    /// None for an SL above 15.
    pub fn vl(&self, sl: usize) -> Option<u8> {
        if sl >= SL_COUNT {
            return None;
        }
        let b = self.buffer.as_ref()[field::VLS + sl / 2];
        Some(if sl & 1 == 0 { b >> 4 } else { b & 0x0f })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SlToVlTable<T> {
    /// Sets the VL (low 4 bits of `vl`) of `sl`; an SL above 15 is ignored.
    pub fn set_vl(&mut self, sl: usize, vl: u8) {
        if sl >= SL_COUNT {
            return;
        }
        let b = &mut self.buffer.as_mut()[field::VLS + sl / 2];
        *b = if sl & 1 == 0 { (*b & 0x0f) | (vl << 4) } else { (*b & 0xf0) | (vl & 0x0f) };
    }
}

/// The owned form: `vl[sl]`, 4 bits each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SlToVlTableRepr {
    pub vl: [u8; SL_COUNT],
}

impl SlToVlTableRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &SlToVlTable<T>) -> WireResult<Self> {
        let mut vl = [0u8; SL_COUNT];
        for (sl, x) in vl.iter_mut().enumerate() {
            *x = v.vl(sl).unwrap_or(0);
        }
        Ok(SlToVlTableRepr { vl })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut SlToVlTable<T>) {
        for (sl, &x) in self.vl.iter().enumerate() {
            v.set_vl(sl, x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn nibble_order() {
        let r = SlToVlTableRepr { vl: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] };
        let b = r.to_bytes();
        assert_eq!(&b[..8], &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
        assert_eq!(SlToVlTableRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(SlToVlTable::new_checked(&b[..]).unwrap().vl(16), None);
        assert_eq!(attribute_modifier(3, 5), 0x0305);
        assert_eq!(
            SlToVlTableRepr::parse_bytes(&b[..7]),
            Err(WireError::Truncated { what: "SLtoVLMappingTable", len: 7, need: 8 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(vl in proptest::array::uniform16(0u8..16)) {
            let r = SlToVlTableRepr { vl };
            prop_assert_eq!(SlToVlTableRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
        }
    }
}
