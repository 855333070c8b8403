//! P_KeyTable (IBA 14.2.5.7): one block of 32 partition keys.
//!
//! ```text
//!  0: P_Key 0 (16) | P_Key 1 (16) | ... | 62: P_Key 31 (16)
//! ```
//! Bit 15 of a P_Key is the membership type (1 = full, 0 = limited); bits
//! 14-0 are the partition. 0x0000 (and 0x8000) are invalid entries.
//!
//! # AttributeModifier
//! Bits 15-0: block number (block `n` holds entries `n*32 ..= n*32+31`).
//! Bits 23-16: on a switch, the port whose table is meant (0 for a CA or
//! router, which use the port the SMP arrived on). See [`attribute_modifier`].

use super::{attribute_view, be, AttributeId, WireResult};

mod field {
    pub const PKEYS: usize = 0;
    pub const LEN: usize = 64;
}

/// P_Keys per block.
pub const PKEY_BLOCK_ENTRIES: usize = 32;
/// The membership bit: set for full members, clear for limited members.
pub const FULL_MEMBER: u16 = 0x8000;
/// The partition number bits.
pub const PARTITION_MASK: u16 = 0x7fff;
/// The default partition, full membership (IBA 10.9.1.2).
pub const DEFAULT_PKEY: u16 = 0xffff;
/// The default partition, limited membership.
pub const DEFAULT_PKEY_LIMITED: u16 = 0x7fff;

/// Whether `pkey` names a partition (bits 14-0 not all zero).
pub fn is_valid(pkey: u16) -> bool {
    pkey & PARTITION_MASK != 0
}

/// Whether `pkey` carries full membership.
pub fn is_full_member(pkey: u16) -> bool {
    pkey & FULL_MEMBER != 0
}

/// The AttributeModifier for `block` of `port`'s table (port 0 on CAs).
pub fn attribute_modifier(block: u16, port: u8) -> u32 {
    (port as u32) << 16 | block as u32
}

/// Splits an AttributeModifier into (block, port).
pub fn split_attribute_modifier(attr_mod: u32) -> (u16, u8) {
    (attr_mod as u16, (attr_mod >> 16) as u8)
}

attribute_view! {
    /// A zero-copy view of one P_KeyTable block (64 bytes).
    PKeyTableBlock, PKeyTableBlockRepr, "P_KeyTable", field::LEN, AttributeId::PKeyTable
}

impl<T: AsRef<[u8]>> PKeyTableBlock<T> {
    /// Bytes 2i..2i+1: entry `i` (0-31). None past 31.
    pub fn pkey(&self, i: usize) -> Option<u16> {
        (i < PKEY_BLOCK_ENTRIES).then(|| be::u16(self.buffer.as_ref(), field::PKEYS + 2 * i))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PKeyTableBlock<T> {
    /// Sets entry `i`; an index past 31 is ignored.
    pub fn set_pkey(&mut self, i: usize, v: u16) {
        if i < PKEY_BLOCK_ENTRIES {
            be::set_u16(self.buffer.as_mut(), field::PKEYS + 2 * i, v);
        }
    }
}

/// The owned form of one P_KeyTable block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PKeyTableBlockRepr {
    pub pkeys: [u16; PKEY_BLOCK_ENTRIES],
}

impl PKeyTableBlockRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &PKeyTableBlock<T>) -> WireResult<Self> {
        let mut pkeys = [0u16; PKEY_BLOCK_ENTRIES];
        for (i, p) in pkeys.iter_mut().enumerate() {
            *p = v.pkey(i).unwrap_or(0);
        }
        Ok(PKeyTableBlockRepr { pkeys })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut PKeyTableBlock<T>) {
        for (i, &p) in self.pkeys.iter().enumerate() {
            v.set_pkey(i, p);
        }
    }

    /// The valid entries (non-zero partition bits).
    pub fn valid(&self) -> impl Iterator<Item = u16> + '_ {
        self.pkeys.iter().copied().filter(|&p| is_valid(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn layout_and_membership() {
        let mut r = PKeyTableBlockRepr::default();
        r.pkeys[0] = DEFAULT_PKEY;
        r.pkeys[1] = 0x0001;
        r.pkeys[31] = 0x8002;
        let b = r.to_bytes();
        assert_eq!(&b[0..4], &[0xff, 0xff, 0x00, 0x01]);
        assert_eq!(&b[62..64], &[0x80, 0x02]);
        assert_eq!(PKeyTableBlockRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(r.valid().collect::<Vec<_>>(), vec![0xffff, 0x0001, 0x8002]);
        assert!(is_full_member(0x8002) && !is_full_member(0x0001));
        assert!(!is_valid(0x8000) && !is_valid(0));
        assert_eq!(attribute_modifier(3, 17), 0x0011_0003);
        assert_eq!(split_attribute_modifier(0x0011_0003), (3, 17));
        assert_eq!(PKeyTableBlock::new_checked(&b[..]).unwrap().pkey(32), None);
        assert_eq!(
            PKeyTableBlockRepr::parse_bytes(&b[..10]),
            Err(WireError::Truncated { what: "P_KeyTable", len: 10, need: 64 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(keys in proptest::array::uniform32(any::<u16>())) {
            let r = PKeyTableBlockRepr { pkeys: keys };
            let b = r.to_bytes();
            prop_assert_eq!(be::u16(&b, 6), keys[3]);
            prop_assert_eq!(PKeyTableBlockRepr::parse_bytes(&b).unwrap(), r);
        }
    }
}
