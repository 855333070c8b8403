//! MulticastForwardingTable (IBA 14.2.5.12): one block of 32
//! port masks, one per multicast LID, each covering 16 ports.
//!
//! ```text
//!  0: PortMask for MLID 0xC000 + block*32 + 0 (16) | ... | 62: ... + 31 (16)
//! ```
//! Bit `p` of a mask (bit 0 = least significant) is port `position*16 + p`.
//!
//! # AttributeModifier
//! Bits 8-0: block number (0-511), block `n` holds MLIDs `0xC000 + n*32 ..`.
//! Bits 31-28: position, which 16 ports the masks cover. See
//! [`attribute_modifier`].

use super::{attribute_view, be, AttributeId, WireResult};
use crate::types::Lid;

mod field {
    pub const MASKS: usize = 0;
    pub const LEN: usize = 64;
}

/// Port masks per MFT block.
pub const MFT_BLOCK_ENTRIES: usize = 32;
/// Ports covered by one position.
pub const PORTS_PER_POSITION: usize = 16;
/// Highest block number.
pub const MFT_MAX_BLOCK: u16 = 511;
/// Highest position.
pub const MFT_MAX_POSITION: u8 = 15;

/// The AttributeModifier for `block` (9 bits) at `position` (4 bits).
pub fn attribute_modifier(block: u16, position: u8) -> u32 {
    (position as u32 & 0xf) << 28 | (block as u32 & 0x1ff)
}

/// Splits an AttributeModifier into (block, position).
pub fn split_attribute_modifier(attr_mod: u32) -> (u16, u8) {
    ((attr_mod & 0x1ff) as u16, (attr_mod >> 28) as u8)
}

/// The (block, index in block) of a multicast LID; None if not multicast.
pub fn locate(mlid: Lid) -> Option<(u16, usize)> {
    if mlid.0 < Lid::MULTICAST_MIN.0 {
        return None;
    }
    let off = (mlid.0 - Lid::MULTICAST_MIN.0) as usize;
    Some(((off / MFT_BLOCK_ENTRIES) as u16, off % MFT_BLOCK_ENTRIES))
}

attribute_view! {
    /// A zero-copy view of one MFT block (64 bytes).
    MftBlock, MftBlockRepr, "MulticastForwardingTable", field::LEN, AttributeId::MulticastForwardingTable
}

impl<T: AsRef<[u8]>> MftBlock<T> {
    /// Bytes 2i..2i+1: the port mask of entry `i` (0-31).
    pub fn port_mask(&self, i: usize) -> Option<u16> {
        (i < MFT_BLOCK_ENTRIES).then(|| be::u16(self.buffer.as_ref(), field::MASKS + 2 * i))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MftBlock<T> {
    /// Sets entry `i`; an index past 31 is ignored.
    pub fn set_port_mask(&mut self, i: usize, v: u16) {
        if i < MFT_BLOCK_ENTRIES {
            be::set_u16(self.buffer.as_mut(), field::MASKS + 2 * i, v);
        }
    }
}

/// The owned form of one MFT block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MftBlockRepr {
    pub port_masks: [u16; MFT_BLOCK_ENTRIES],
}

impl MftBlockRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &MftBlock<T>) -> WireResult<Self> {
        let mut port_masks = [0u16; MFT_BLOCK_ENTRIES];
        for (i, m) in port_masks.iter_mut().enumerate() {
            *m = v.port_mask(i).unwrap_or(0);
        }
        Ok(MftBlockRepr { port_masks })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut MftBlock<T>) {
        for (i, &m) in self.port_masks.iter().enumerate() {
            v.set_port_mask(i, m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn layout_and_addressing() {
        let mut r = MftBlockRepr::default();
        r.port_masks[0] = 0x8001;
        r.port_masks[31] = 0x0102;
        let b = r.to_bytes();
        assert_eq!(&b[0..2], &[0x80, 0x01]);
        assert_eq!(&b[62..64], &[0x01, 0x02]);
        assert_eq!(MftBlockRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(attribute_modifier(511, 15), 0xf000_01ff);
        assert_eq!(split_attribute_modifier(0x2000_0005), (5, 2));
        assert_eq!(locate(Lid(0xc000)), Some((0, 0)));
        assert_eq!(locate(Lid(0xc021)), Some((1, 1)));
        assert_eq!(locate(Lid(0xfffe)), Some((511, 30)));
        assert_eq!(locate(Lid(0xbfff)), None);
        assert_eq!(
            MftBlockRepr::parse_bytes(&b[..1]),
            Err(WireError::Truncated { what: "MulticastForwardingTable", len: 1, need: 64 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(m in proptest::array::uniform32(any::<u16>()), blk in 0u16..512, pos in 0u8..16) {
            let r = MftBlockRepr { port_masks: m };
            prop_assert_eq!(MftBlockRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
            prop_assert_eq!(split_attribute_modifier(attribute_modifier(blk, pos)), (blk, pos));
        }
    }
}
