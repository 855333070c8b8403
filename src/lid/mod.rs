//! LID management: which unicast LIDs each port gets, and the `guid2lid`
//! file that makes them survive an SM restart.
//!
//! - [`guid2lid`]: OpenSM's persistence file (read with per-line warnings,
//!   written atomically).
//! - [`assign`]: the I/O-free LID manager that turns one sweep's ports plus
//!   the persisted map into LID ranges, the ports to reprogram and the map to
//!   store.
//!
//! A port owns `2^LMC` consecutive LIDs starting at a base aligned to
//! `2^LMC` (IBA 7.11.1, PortInfo.LMC in 14.2.5.6); [`LidRange`] carries that
//! invariant so neither module has to re-check it.

pub mod assign;
pub mod guid2lid;

pub use assign::{assign_lids, Decision, LidAssignment, LidChange, LidError, LidPolicy, PortRole, SweptPort, Unused};
pub use guid2lid::{Field, Guid2Lid, Guid2LidError, Guid2LidWarning, LineProblem, Overlap};

use std::fmt;

use crate::types::Lid;

/// The largest LMC (PortInfo.LMC is 3 bits, IBA 14.2.5.6).
pub const MAX_LMC: u8 = 7;

/// Why a pair of LIDs is not a range a port can own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("LID 0 is reserved (not a unicast LID)")]
    Zero,
    #[error("LID {0:#06x} is not unicast (unicast LIDs are 0x0001..=0xbfff)")]
    NotUnicast(u16),
    #[error("range {min:#06x}..{max:#06x} ends before it starts")]
    Reversed { min: u16, max: u16 },
    #[error("range {min:#06x}..{max:#06x} holds {} LIDs, not a power of two", u32::from(*max) - u32::from(*min) + 1)]
    NotPowerOfTwo { min: u16, max: u16 },
    #[error("range {min:#06x}..{max:#06x} is wider than 128 LIDs (LMC 7)")]
    TooWide { min: u16, max: u16 },
    #[error("LMC {0} is out of range (0..=7)")]
    InvalidLmc(u8),
    #[error("base LID {base:#06x} is not aligned to {len} LIDs")]
    Unaligned { base: u16, len: u16 },
}

/// `2^lmc` unicast LIDs starting at a base aligned to `2^lmc`.
///
/// Because 0xC000 is a multiple of 128, an aligned base that is itself
/// unicast always yields a range that stays below the multicast space.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LidRange {
    base: Lid,
    lmc: u8,
}

impl LidRange {
    /// The range of `2^lmc` LIDs at `base`.
    pub fn new(base: Lid, lmc: u8) -> Result<LidRange, RangeError> {
        if lmc > MAX_LMC {
            return Err(RangeError::InvalidLmc(lmc));
        }
        if base.0 == 0 {
            return Err(RangeError::Zero);
        }
        if !base.is_unicast() {
            return Err(RangeError::NotUnicast(base.0));
        }
        let len = 1u16 << lmc;
        if base.0 & (len - 1) != 0 {
            return Err(RangeError::Unaligned { base: base.0, len });
        }
        Ok(LidRange { base, lmc })
    }

    /// The range `min..=max`, as the guid2lid file spells it.
    pub fn from_min_max(min: Lid, max: Lid) -> Result<LidRange, RangeError> {
        for lid in [min, max] {
            if lid.0 == 0 {
                return Err(RangeError::Zero);
            }
            if !lid.is_unicast() {
                return Err(RangeError::NotUnicast(lid.0));
            }
        }
        if min > max {
            return Err(RangeError::Reversed { min: min.0, max: max.0 });
        }
        let len = u32::from(max.0 - min.0) + 1;
        if !len.is_power_of_two() {
            return Err(RangeError::NotPowerOfTwo { min: min.0, max: max.0 });
        }
        if len > 1 << MAX_LMC {
            return Err(RangeError::TooWide { min: min.0, max: max.0 });
        }
        LidRange::new(min, len.trailing_zeros() as u8)
    }

    /// A single LID (LMC 0).
    pub fn single(lid: Lid) -> Result<LidRange, RangeError> {
        LidRange::new(lid, 0)
    }

    pub fn base(self) -> Lid {
        self.base
    }
    pub fn lmc(self) -> u8 {
        self.lmc
    }
    /// Number of LIDs, `2^lmc` (1..=128).
    #[allow(clippy::len_without_is_empty)] // a range is never empty
    pub fn len(self) -> u16 {
        1 << self.lmc
    }
    pub fn min(self) -> Lid {
        self.base
    }
    pub fn max(self) -> Lid {
        Lid(self.base.0 + self.len() - 1)
    }
    pub fn contains(self, lid: Lid) -> bool {
        self.min() <= lid && lid <= self.max()
    }
    pub fn overlaps(self, other: LidRange) -> bool {
        self.min() <= other.max() && other.min() <= self.max()
    }
}

impl fmt::Display for LidRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lmc == 0 {
            write!(f, "{}", self.base.0)
        } else {
            write!(f, "{}-{}", self.min().0, self.max().0)
        }
    }
}

impl fmt::Debug for LidRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LidRange({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_alignment_and_bounds() {
        assert_eq!(LidRange::new(Lid(4), 2).map(|r| (r.min(), r.max())), Ok((Lid(4), Lid(7))));
        assert_eq!(LidRange::new(Lid(6), 2), Err(RangeError::Unaligned { base: 6, len: 4 }));
        assert_eq!(LidRange::new(Lid(0), 0), Err(RangeError::Zero));
        assert_eq!(LidRange::new(Lid(0xC000), 0), Err(RangeError::NotUnicast(0xC000)));
        assert_eq!(LidRange::new(Lid(0x80), 8), Err(RangeError::InvalidLmc(8)));
        // The last aligned 128-block ends exactly at the top of unicast space.
        let top = LidRange::new(Lid(0xBF80), 7).unwrap();
        assert_eq!(top.max(), Lid(0xBFFF));
    }

    #[test]
    fn from_min_max_rejects_bad_widths() {
        assert_eq!(LidRange::from_min_max(Lid(8), Lid(11)).map(|r| r.lmc()), Ok(2));
        assert_eq!(LidRange::from_min_max(Lid(8), Lid(10)), Err(RangeError::NotPowerOfTwo { min: 8, max: 10 }));
        assert_eq!(LidRange::from_min_max(Lid(9), Lid(8)), Err(RangeError::Reversed { min: 9, max: 8 }));
        assert_eq!(LidRange::from_min_max(Lid(5), Lid(6)), Err(RangeError::Unaligned { base: 5, len: 2 }));
        assert_eq!(LidRange::from_min_max(Lid(256), Lid(511)), Err(RangeError::TooWide { min: 256, max: 511 }));
        assert_eq!(LidRange::from_min_max(Lid(5), Lid(0xC000)), Err(RangeError::NotUnicast(0xC000)));
    }

    #[test]
    fn overlap_and_display() {
        let a = LidRange::new(Lid(4), 2).unwrap();
        let b = LidRange::single(Lid(7)).unwrap();
        let c = LidRange::single(Lid(8)).unwrap();
        assert!(a.overlaps(b) && b.overlaps(a));
        assert!(!a.overlaps(c));
        assert_eq!(a.to_string(), "4-7");
        assert_eq!(c.to_string(), "8");
    }
}
