//! The MAD wire layer: every IBA attribute layout ibsm sends or receives.
//!
//! Each packet kind has two levels (see STYLE.md): a zero-copy view over a
//! byte buffer with typed accessors, and an owned `Repr` with `parse`/`emit`.
//! Views are built only through a checked constructor, after which no
//! accessor can panic. Code points (classes, methods, attribute IDs) are open
//! enums: an unknown value is data, not an error.

pub mod codes;
pub mod header;
pub mod smp;

pub mod class_port_info;
pub mod guid_info;
pub mod lft;
pub mod mft;
pub mod node_description;
pub mod node_info;
pub mod notice;
pub mod perf;
pub mod pkey_table;
pub mod port_info;
pub mod rmpp;
pub mod sa;
pub mod sl_to_vl;
pub mod sm_info;
pub mod sm_sync;
pub mod switch_info;
pub mod vl_arb;

pub use class_port_info::{ClassPortInfo, ClassPortInfoRepr};
pub use codes::{AttributeId, Method, MgmtClass};
pub use guid_info::{GuidInfoBlock, GuidInfoBlockRepr};
pub use header::{MadHeader, MadHeaderRepr};
pub use lft::{LftBlock, LftBlockRepr};
pub use mft::{MftBlock, MftBlockRepr};
pub use node_description::{NodeDescription, NodeDescriptionRepr};
pub use node_info::{NodeInfo, NodeInfoRepr, NodeType};
pub use notice::{Notice, NoticeRepr, NoticeType, TrapDetails};
pub use pkey_table::{PKeyTableBlock, PKeyTableBlockRepr};
pub use port_info::{
    CapabilityMask, CapabilityMask2, LinkDownDefaultState, PhysState, PortInfo, PortInfoRepr, PortState,
};
pub use sa::{PathRecord, PathRecordRepr, SaAttributeId, SaMad, SaRecord};
pub use sl_to_vl::{SlToVlTable, SlToVlTableRepr};
pub use sm_info::{SmControl, SmInfo, SmInfoRepr, SmState};
pub use smp::{DrPath, Smp, SmpRepr};
pub use switch_info::{SwitchInfo, SwitchInfoRepr};
pub use vl_arb::{VlArbBlock, VlArbEntry, VlArbTable, VlArbTableRepr};

/// Every MAD is 256 bytes on the wire (IBA 13.4.2); RMPP segments too.
pub const MAD_SIZE: usize = 256;
/// The common MAD header (IBA 13.4.3).
pub const MAD_HEADER_LEN: usize = 24;
/// The SMP attribute data area (IBA 14.2.1.1/14.2.1.2).
pub const SMP_DATA_LEN: usize = 64;

/// Why bytes could not be read as a MAD or attribute. Every variant carries
/// the offending values so a log line can name them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("{what}: buffer is {len} bytes, need at least {need}")]
    Truncated { what: &'static str, len: usize, need: usize },
    #[error("{what}: buffer is {len} bytes, at most {max} allowed")]
    Oversized { what: &'static str, len: usize, max: usize },
    #[error("unsupported base version {0} (only 1 is defined)")]
    BaseVersion(u8),
    #[error("class {class:#04x}: unsupported class version {version}")]
    ClassVersion { class: u8, version: u8 },
    #[error("directed-route SMP: hop count {hop_count} exceeds the 63-hop maximum")]
    HopCountTooLarge { hop_count: u8 },
    #[error("directed-route SMP: hop pointer {hop_pointer} beyond hop count {hop_count} + 1")]
    HopPointerBeyondCount { hop_pointer: u8, hop_count: u8 },
    #[error("directed-route path of {0} hops exceeds the 63-hop maximum")]
    PathTooLong(usize),
    #[error("{what}: field {field} holds {value}, which the spec forbids")]
    Forbidden { what: &'static str, field: &'static str, value: u64 },
    #[error("expected attribute {expected:?}, got {got:?}")]
    UnexpectedAttribute { expected: AttributeId, got: AttributeId },
}

pub type WireResult<T> = Result<T, WireError>;

/// Checks that `buf` holds at least `need` bytes.
pub(crate) fn check_len(what: &'static str, buf: &[u8], need: usize) -> WireResult<()> {
    if buf.len() < need {
        Err(WireError::Truncated { what, len: buf.len(), need })
    } else {
        Ok(())
    }
}

/// An SMP attribute (IBA 14.2.5) whose wire form fits the 64-byte SMP data
/// area. Lets callers move between an `SmpRepr::data` and a typed `Repr`
/// without naming the view type.
pub trait SmpAttribute: Sized {
    /// The attribute ID this layout belongs to.
    const ATTRIBUTE_ID: AttributeId;
    /// Bytes of the data area the attribute occupies; the rest is reserved.
    const WIRE_LEN: usize;
    /// Parses from an SMP data area (or any buffer at least `WIRE_LEN` long).
    fn parse_data(data: &[u8]) -> WireResult<Self>;
    /// Emits into a fresh, zeroed SMP data area.
    fn to_data(&self) -> [u8; SMP_DATA_LEN];
}

/// Declares an attribute view `$view<T>` over at least `$len` bytes, with the
/// checked constructor and the `SmpAttribute` glue for `$repr`.
macro_rules! attribute_view {
    ($(#[$m:meta])* $view:ident, $repr:ident, $what:literal, $len:expr, $id:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy)]
        pub struct $view<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $view<T> {
            /// Bytes of the attribute on the wire.
            pub const LEN: usize = $len;

            /// Wraps `buffer` after checking it holds the whole attribute;
            /// trailing bytes (the rest of an SMP data area) are ignored.
            pub fn new_checked(buffer: T) -> $crate::mad::WireResult<Self> {
                $crate::mad::check_len($what, buffer.as_ref(), $len)?;
                Ok($view { buffer })
            }

            pub fn into_inner(self) -> T {
                self.buffer
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $view<T> {
            /// Zeroes the attribute's bytes, reserved fields included.
            pub fn clear(&mut self) {
                self.buffer.as_mut()[..$len].fill(0);
            }
        }

        impl $repr {
            /// Parses untrusted bytes (the usual entry point).
            pub fn parse_bytes(bytes: &[u8]) -> $crate::mad::WireResult<Self> {
                Self::parse(&$view::new_checked(bytes)?)
            }

            /// Emits into a fresh, zeroed 64-byte SMP data area.
            pub fn to_bytes(&self) -> [u8; $crate::mad::SMP_DATA_LEN] {
                let mut buf = [0u8; $crate::mad::SMP_DATA_LEN];
                let mut view = $view::new_checked(&mut buf[..]).expect("the SMP data area holds every attribute");
                self.emit(&mut view);
                buf
            }
        }

        impl $crate::mad::SmpAttribute for $repr {
            const ATTRIBUTE_ID: $crate::mad::AttributeId = $id;
            const WIRE_LEN: usize = $len;
            fn parse_data(data: &[u8]) -> $crate::mad::WireResult<Self> {
                Self::parse_bytes(data)
            }
            fn to_data(&self) -> [u8; $crate::mad::SMP_DATA_LEN] {
                self.to_bytes()
            }
        }
    };
}
pub(crate) use attribute_view;

/// A sub-byte field: `width` bits starting `shift` bits above the least
/// significant bit of byte `byte`. The IBA tables number bits from the most
/// significant end; the `mod field` tables convert once so accessors stay
/// one line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bits {
    pub byte: usize,
    pub shift: u8,
    pub width: u8,
}

impl Bits {
    pub const fn new(byte: usize, shift: u8, width: u8) -> Self {
        Bits { byte, shift, width }
    }
    const fn mask(self) -> u8 {
        ((1u16 << self.width) - 1) as u8
    }
    pub fn get(self, b: &[u8]) -> u8 {
        (b[self.byte] >> self.shift) & self.mask()
    }
    /// Stores the low `width` bits of `v`; higher bits are dropped, as a wire
    /// field cannot hold them.
    pub fn set(self, b: &mut [u8], v: u8) {
        let m = self.mask() << self.shift;
        b[self.byte] = (b[self.byte] & !m) | ((v << self.shift) & m);
    }
    pub fn get_bool(self, b: &[u8]) -> bool {
        self.get(b) != 0
    }
    pub fn set_bool(self, b: &mut [u8], v: bool) {
        self.set(b, v as u8)
    }
}

/// Big-endian field helpers over byte ranges. Callers have checked lengths.
pub(crate) mod be {
    pub fn u16(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }
    pub fn u32(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }
    pub fn u64(b: &[u8], at: usize) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[at..at + 8]);
        u64::from_be_bytes(x)
    }
    pub fn u24(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
    }
    /// Stores the low 24 bits of `v`.
    pub fn set_u24(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    pub fn set_u16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_u32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_u64(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every length short of the attribute is a Truncated error naming the
    /// lengths; the exact length parses.
    fn short_buffers<A: SmpAttribute + std::fmt::Debug>() {
        let full = [0u8; SMP_DATA_LEN];
        for len in 0..A::WIRE_LEN {
            match A::parse_data(&full[..len]) {
                Err(WireError::Truncated { len: l, need, .. }) => {
                    assert_eq!((l, need), (len, A::WIRE_LEN), "{:?}", A::ATTRIBUTE_ID)
                }
                other => panic!("{:?} at {len} bytes: {other:?}", A::ATTRIBUTE_ID),
            }
        }
        A::parse_data(&full[..A::WIRE_LEN]).unwrap();
    }

    #[test]
    fn every_decoder_reports_truncation() {
        short_buffers::<NodeInfoRepr>();
        short_buffers::<NodeDescriptionRepr>();
        short_buffers::<PortInfoRepr>();
        short_buffers::<SwitchInfoRepr>();
        short_buffers::<LftBlockRepr>();
        short_buffers::<PKeyTableBlockRepr>();
        short_buffers::<SmInfoRepr>();
        short_buffers::<GuidInfoBlockRepr>();
        short_buffers::<SlToVlTableRepr>();
        short_buffers::<VlArbTableRepr>();
        short_buffers::<MftBlockRepr>();
        short_buffers::<NoticeRepr>();
    }

    #[test]
    fn attribute_ids_match_the_layouts() {
        assert_eq!(NodeInfoRepr::ATTRIBUTE_ID, AttributeId::NodeInfo);
        assert_eq!(PortInfoRepr::ATTRIBUTE_ID, AttributeId::PortInfo);
        assert_eq!(LftBlockRepr::ATTRIBUTE_ID, AttributeId::LinearForwardingTable);
        assert_eq!(SmInfoRepr::ATTRIBUTE_ID, AttributeId::SmInfo);
        assert_eq!(u16::from(MftBlockRepr::ATTRIBUTE_ID), 0x1b);
    }

    /// Emit-then-parse is the identity on whatever a parse produced, for
    /// every attribute (the same property the fuzz target checks).
    fn reparse<A: SmpAttribute + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Result<(), TestCaseError> {
        let a = A::parse_data(bytes).unwrap();
        prop_assert_eq!(A::parse_data(&a.to_data()).unwrap(), a);
        Ok(())
    }

    proptest! {
        #[test]
        fn parse_emit_parse(a in proptest::array::uniform32(any::<u8>()), b in proptest::array::uniform32(any::<u8>())) {
            let mut bytes = [0u8; SMP_DATA_LEN];
            bytes[..32].copy_from_slice(&a);
            bytes[32..].copy_from_slice(&b);
            reparse::<NodeInfoRepr>(&bytes)?;
            reparse::<PortInfoRepr>(&bytes)?;
            reparse::<SwitchInfoRepr>(&bytes)?;
            reparse::<LftBlockRepr>(&bytes)?;
            reparse::<PKeyTableBlockRepr>(&bytes)?;
            reparse::<SmInfoRepr>(&bytes)?;
            reparse::<GuidInfoBlockRepr>(&bytes)?;
            reparse::<SlToVlTableRepr>(&bytes)?;
            reparse::<VlArbTableRepr>(&bytes)?;
            reparse::<MftBlockRepr>(&bytes)?;
            reparse::<NoticeRepr>(&bytes)?;
            // Invalid UTF-8 is replaced on parse, so the text (not the bytes)
            // is what survives a second trip.
            reparse::<NodeDescriptionRepr>(&bytes)?;
        }
    }
}
