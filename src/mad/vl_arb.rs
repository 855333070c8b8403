//! VLArbitrationTable (IBA 14.2.5.9): one block of 32 (VL,
//! weight) entries of a port's high- or low-priority arbitration table.
//!
//! ```text
//!  0: rsvd(4) VL(4) | Weight(8) | ... (32 entries of 2 bytes)
//! ```
//!
//! # AttributeModifier
//! Bits 31-16: block 1 = low-priority entries 0-31, 2 = low-priority 32-63,
//! 3 = high-priority 0-31, 4 = high-priority 32-63. Bits 7-0: the output
//! port on a switch.

use super::codes::open_enum;
use super::{attribute_view, AttributeId, WireResult};

mod field {
    pub const ENTRIES: usize = 0;
    pub const LEN: usize = 64;
}

/// Entries per VLArbitrationTable block.
pub const VL_ARB_BLOCK_ENTRIES: usize = 32;

open_enum! {
    /// The block selector in bits 31-16 of the AttributeModifier.
    VlArbBlock: u16 {
        LowFirst = 1,
        LowSecond = 2,
        HighFirst = 3,
        HighSecond = 4,
    }
}

/// The AttributeModifier for `block` of `port`'s tables.
pub fn attribute_modifier(block: VlArbBlock, port: u8) -> u32 {
    (u16::from(block) as u32) << 16 | port as u32
}

/// One arbitration entry: send up to `weight` 64-byte units from `vl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlArbEntry {
    /// 4 bits.
    pub vl: u8,
    pub weight: u8,
}

attribute_view! {
    /// A zero-copy view of one VLArbitrationTable block (64 bytes).
    VlArbTable, VlArbTableRepr, "VLArbitrationTable", field::LEN, AttributeId::VlArbitrationTable
}

impl<T: AsRef<[u8]>> VlArbTable<T> {
    /// Bytes 2i (VL in bits 3-0) and 2i+1 (weight): entry `i` (0-31).
    pub fn entry(&self, i: usize) -> Option<VlArbEntry> {
        if i >= VL_ARB_BLOCK_ENTRIES {
            return None;
        }
        let b = self.buffer.as_ref();
        let at = field::ENTRIES + 2 * i;
        Some(VlArbEntry { vl: b[at] & 0x0f, weight: b[at + 1] })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlArbTable<T> {
    /// Sets entry `i` (reserved bits zeroed); an index past 31 is ignored.
    pub fn set_entry(&mut self, i: usize, e: VlArbEntry) {
        if i < VL_ARB_BLOCK_ENTRIES {
            let at = field::ENTRIES + 2 * i;
            let b = self.buffer.as_mut();
            b[at] = e.vl & 0x0f;
            b[at + 1] = e.weight;
        }
    }
}

/// The owned form of one VLArbitrationTable block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlArbTableRepr {
    pub entries: [VlArbEntry; VL_ARB_BLOCK_ENTRIES],
}

impl VlArbTableRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &VlArbTable<T>) -> WireResult<Self> {
        let mut entries = [VlArbEntry::default(); VL_ARB_BLOCK_ENTRIES];
        for (i, e) in entries.iter_mut().enumerate() {
            *e = v.entry(i).unwrap_or_default();
        }
        Ok(VlArbTableRepr { entries })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut VlArbTable<T>) {
        for (i, &e) in self.entries.iter().enumerate() {
            v.set_entry(i, e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn layout() {
        let mut r = VlArbTableRepr::default();
        r.entries[0] = VlArbEntry { vl: 1, weight: 64 };
        r.entries[31] = VlArbEntry { vl: 15, weight: 255 };
        let b = r.to_bytes();
        assert_eq!(&b[0..2], &[0x01, 64]);
        assert_eq!(&b[62..64], &[0x0f, 255]);
        assert_eq!(VlArbTableRepr::parse_bytes(&b).unwrap(), r);
        let mut dirty = b;
        dirty[0] |= 0xf0;
        assert_eq!(VlArbTableRepr::parse_bytes(&dirty).unwrap(), r, "reserved bits ignored");
        assert_eq!(attribute_modifier(VlArbBlock::HighFirst, 7), 0x0003_0007);
        assert_eq!(
            VlArbTableRepr::parse_bytes(&b[..2]),
            Err(WireError::Truncated { what: "VLArbitrationTable", len: 2, need: 64 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(vls in proptest::array::uniform32(0u8..16), ws in proptest::array::uniform32(any::<u8>())) {
            let mut r = VlArbTableRepr::default();
            for i in 0..32 {
                r.entries[i] = VlArbEntry { vl: vls[i], weight: ws[i] };
            }
            prop_assert_eq!(VlArbTableRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
        }
    }
}
