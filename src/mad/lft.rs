//! LinearForwardingTable (IBA 14.2.5.10): one block of 64 LFT
//! entries, each the output port for one destination LID.
//!
//! ```text
//!  0: Port for LID block*64 + 0 (8) | ... | 63: Port for LID block*64 + 63 (8)
//! ```
//!
//! # AttributeModifier
//! The block number: block `n` holds LIDs `n*64 ..= n*64 + 63`. A switch
//! drops packets to a LID whose entry is a port it does not have; ibsm (like
//! OpenSM) writes 255 for "no route".

use super::{attribute_view, AttributeId, WireResult};
use crate::types::Lid;

mod field {
    use std::ops::Range;
    pub const PORTS: Range<usize> = 0..64;
    pub const LEN: usize = 64;
}

/// LIDs per LFT block.
pub const LFT_BLOCK_ENTRIES: usize = 64;
/// The entry OpenSM and ibsm write for an unreachable LID.
pub const LFT_NO_PORT: u8 = 255;

attribute_view! {
    /// A zero-copy view of one LFT block (64 bytes).
    LftBlock, LftBlockRepr, "LinearForwardingTable", field::LEN, AttributeId::LinearForwardingTable
}

impl<T: AsRef<[u8]>> LftBlock<T> {
    /// Byte `i` (0-63): the port for LID `block*64 + i`. None past 63.
    pub fn port(&self, i: usize) -> Option<u8> {
        self.buffer.as_ref()[field::PORTS].get(i).copied()
    }
    /// Bytes 0-63.
    pub fn ports(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PORTS]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> LftBlock<T> {
    /// Sets entry `i`; an index past 63 is ignored.
    pub fn set_port(&mut self, i: usize, port: u8) {
        if let Some(p) = self.buffer.as_mut()[field::PORTS].get_mut(i) {
            *p = port;
        }
    }
    pub fn ports_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PORTS]
    }
}

/// The owned form of one LFT block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LftBlockRepr {
    pub ports: [u8; LFT_BLOCK_ENTRIES],
}

impl Default for LftBlockRepr {
    /// Every LID unrouted.
    fn default() -> Self {
        LftBlockRepr { ports: [LFT_NO_PORT; LFT_BLOCK_ENTRIES] }
    }
}

impl LftBlockRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &LftBlock<T>) -> WireResult<Self> {
        let mut ports = [0u8; LFT_BLOCK_ENTRIES];
        ports.copy_from_slice(v.ports());
        Ok(LftBlockRepr { ports })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut LftBlock<T>) {
        v.ports_mut().copy_from_slice(&self.ports);
    }
}

/// The block holding `lid` (also its AttributeModifier).
pub fn block_of(lid: Lid) -> u32 {
    lid.0 as u32 / LFT_BLOCK_ENTRIES as u32
}

/// The entry index of `lid` inside its block.
pub fn index_in_block(lid: Lid) -> usize {
    lid.0 as usize % LFT_BLOCK_ENTRIES
}

/// The first LID of `block`, None if the block lies beyond the 16-bit LID space.
pub fn first_lid(block: u32) -> Option<Lid> {
    u16::try_from(block.checked_mul(LFT_BLOCK_ENTRIES as u32)?).ok().map(Lid)
}

/// Blocks needed to cover LIDs `0..=top` (LinearFDBTop).
pub fn blocks_for_top(top: Lid) -> u32 {
    block_of(top) + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn block_arithmetic() {
        assert_eq!(block_of(Lid(0)), 0);
        assert_eq!(block_of(Lid(63)), 0);
        assert_eq!(block_of(Lid(64)), 1);
        assert_eq!(block_of(Lid(0xbfff)), 767);
        assert_eq!(index_in_block(Lid(130)), 2);
        assert_eq!(first_lid(2), Some(Lid(128)));
        assert_eq!(first_lid(1023), Some(Lid(0xffc0)));
        assert_eq!(first_lid(1024), None);
        assert_eq!(first_lid(u32::MAX), None);
        assert_eq!(blocks_for_top(Lid(64)), 2);
    }

    #[test]
    fn entries_in_order() {
        let mut r = LftBlockRepr::default();
        r.ports[0] = 0;
        r.ports[5] = 7;
        let b = r.to_bytes();
        assert_eq!(b[0], 0);
        assert_eq!(b[5], 7);
        assert_eq!(b[63], 255);
        let v = LftBlock::new_checked(&b[..]).unwrap();
        assert_eq!(v.port(5), Some(7));
        assert_eq!(v.port(64), None);
        assert_eq!(LftBlockRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(
            LftBlockRepr::parse_bytes(&b[..63]),
            Err(WireError::Truncated { what: "LinearForwardingTable", len: 63, need: 64 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(a in proptest::array::uniform32(any::<u8>()), c in proptest::array::uniform32(any::<u8>())) {
            let mut ports = [0u8; 64];
            ports[..32].copy_from_slice(&a);
            ports[32..].copy_from_slice(&c);
            let r = LftBlockRepr { ports };
            prop_assert_eq!(r.to_bytes(), ports);
            prop_assert_eq!(LftBlockRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
        }
    }
}
