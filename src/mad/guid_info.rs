//! GUIDInfo (IBA 14.2.5.5): one block of 8 port GUIDs (the
//! port's GID interface IDs; entry 0 of block 0 is the port GUID itself).
//!
//! ```text
//!  0: GUID 0 (64) | 8: GUID 1 (64) | ... | 56: GUID 7 (64)
//! ```
//!
//! # AttributeModifier
//! The block number: block `n` holds GUID indices `n*8 ..= n*8+7`, up to
//! PortInfo.GUIDCap entries.

use super::{attribute_view, be, AttributeId, WireResult};
use crate::types::Guid;

mod field {
    pub const GUIDS: usize = 0;
    pub const LEN: usize = 64;
}

/// GUIDs per GUIDInfo block.
pub const GUID_BLOCK_ENTRIES: usize = 8;

attribute_view! {
    /// A zero-copy view of one GUIDInfo block (64 bytes).
    GuidInfoBlock, GuidInfoBlockRepr, "GUIDInfo", field::LEN, AttributeId::GuidInfo
}

impl<T: AsRef<[u8]>> GuidInfoBlock<T> {
    /// Bytes 8i..8i+7: entry `i` (0-7). None past 7.
    pub fn guid(&self, i: usize) -> Option<Guid> {
        (i < GUID_BLOCK_ENTRIES).then(|| Guid(be::u64(self.buffer.as_ref(), field::GUIDS + 8 * i)))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GuidInfoBlock<T> {
    /// Sets entry `i`; an index past 7 is ignored.
    pub fn set_guid(&mut self, i: usize, v: Guid) {
        if i < GUID_BLOCK_ENTRIES {
            be::set_u64(self.buffer.as_mut(), field::GUIDS + 8 * i, v.0);
        }
    }
}

/// The owned form of one GUIDInfo block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GuidInfoBlockRepr {
    pub guids: [Guid; GUID_BLOCK_ENTRIES],
}

impl GuidInfoBlockRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &GuidInfoBlock<T>) -> WireResult<Self> {
        let mut guids = [Guid(0); GUID_BLOCK_ENTRIES];
        for (i, g) in guids.iter_mut().enumerate() {
            *g = v.guid(i).unwrap_or_default();
        }
        Ok(GuidInfoBlockRepr { guids })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut GuidInfoBlock<T>) {
        for (i, &g) in self.guids.iter().enumerate() {
            v.set_guid(i, g);
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
        let mut r = GuidInfoBlockRepr::default();
        r.guids[0] = Guid(0x0011_2233_4455_6677);
        r.guids[7] = Guid(u64::MAX);
        let b = r.to_bytes();
        assert_eq!(&b[0..8], &[0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]);
        assert_eq!(&b[56..64], &[0xff; 8]);
        assert_eq!(GuidInfoBlockRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(GuidInfoBlock::new_checked(&b[..]).unwrap().guid(8), None);
        assert_eq!(
            GuidInfoBlockRepr::parse_bytes(&b[..56]),
            Err(WireError::Truncated { what: "GUIDInfo", len: 56, need: 64 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(g in proptest::array::uniform8(any::<u64>())) {
            let r = GuidInfoBlockRepr { guids: g.map(Guid) };
            prop_assert_eq!(GuidInfoBlockRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
        }
    }
}
