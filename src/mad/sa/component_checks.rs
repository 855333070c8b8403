//! Checks for a record's component table, shared by the record files'
//! tests: the table must tile the wire layout in order (IBA 15.2.1.3 gives
//! every field of a record's table a bit, reserved ones included), and
//! each component must be the field, or the reserved run, it claims.

use super::{Component, SaRecord};

/// Every bit of the record belongs to exactly one component, in wire order
/// from bit 0, and the last component ends with the record.
pub(crate) fn assert_tiles<R: SaRecord>() {
    let mut next = 0usize;
    for (i, c) in R::COMPONENTS.iter().enumerate() {
        assert!(c.bits > 0, "{:?} component {i} is empty", R::ATTRIBUTE);
        assert_eq!(
            usize::from(c.bit_offset),
            next,
            "{:?} component {i} starts at bit {} but the one before ends at {next}",
            R::ATTRIBUTE,
            c.bit_offset
        );
        next += usize::from(c.bits);
    }
    assert_eq!(next, R::LEN * 8, "{:?}: the components cover {next} of {} bits", R::ATTRIBUTE, R::LEN * 8);
}

/// Fills one component's bits in an otherwise zero record. Whole-byte
/// fields get distinct printable bytes (so a text field survives a parse),
/// sub-byte fields all ones.
pub(crate) fn fill(b: &mut [u8], c: Component) {
    let (start, bits) = (usize::from(c.bit_offset), usize::from(c.bits));
    if start % 8 == 0 && bits % 8 == 0 {
        for (k, byte) in b[start / 8..(start + bits) / 8].iter_mut().enumerate() {
            *byte = 0x21 + (k % 90) as u8;
        }
    } else {
        for bit in start..start + bits {
            b[bit / 8] |= 0x80 >> (bit % 8);
        }
    }
}

/// For each component alone: a field's bits survive parse -> emit exactly
/// (so the table points where the Repr reads), a reserved component (its
/// index in `reserved`) comes back zero, and a component in `partly` (one
/// the table keeps whole while the attribute now gives some of its bits a
/// meaning) comes back with no bit that was not set.
pub(crate) fn assert_fields_and_reserved<R: SaRecord>(reserved: &[usize], partly: &[usize]) {
    for (i, c) in R::COMPONENTS.iter().enumerate() {
        let mut b = vec![0u8; R::LEN];
        fill(&mut b, *c);
        let out = R::parse_bytes(&b).expect("LEN bytes parse").to_bytes();
        if reserved.contains(&i) {
            assert!(out.iter().all(|&x| x == 0), "{:?} component {i} is reserved but survived emit", R::ATTRIBUTE);
        } else if partly.contains(&i) {
            assert!(out.iter().zip(&b).all(|(o, b)| o & !b == 0), "{:?} component {i} grew bits", R::ATTRIBUTE);
        } else {
            assert_eq!(out, b, "{:?} component {i} ({c:?}) is not a whole field of the Repr", R::ATTRIBUTE);
        }
    }
}
