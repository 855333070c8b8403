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

pub use codes::{AttributeId, Method, MgmtClass};
pub use header::{MadHeader, MadHeaderRepr};
pub use smp::{DrPath, Smp, SmpRepr};

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
    Truncated {
        what: &'static str,
        len: usize,
        need: usize,
    },
    #[error("{what}: buffer is {len} bytes, at most {max} allowed")]
    Oversized {
        what: &'static str,
        len: usize,
        max: usize,
    },
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
    Forbidden {
        what: &'static str,
        field: &'static str,
        value: u64,
    },
    #[error("expected attribute {expected:?}, got {got:?}")]
    UnexpectedAttribute {
        expected: AttributeId,
        got: AttributeId,
    },
}

pub type WireResult<T> = Result<T, WireError>;

/// Checks that `buf` holds at least `need` bytes.
pub(crate) fn check_len(what: &'static str, buf: &[u8], need: usize) -> WireResult<()> {
    if buf.len() < need {
        Err(WireError::Truncated {
            what,
            len: buf.len(),
            need,
        })
    } else {
        Ok(())
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
