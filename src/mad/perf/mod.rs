//! Performance management MADs (class 0x04, version 1; IBA vol1 16.1): the
//! PerfMgt MAD, its attribute IDs, the class's ClassPortInfo capability
//! bits, and one file per counter attribute.
//!
//! PerfMgt MAD (IBA 16.1.1, the PerfMgt MAD format):
//! ```text
//!  0: common MAD header (24 bytes, IBA 13.4.3)
//! 24: Reserved (40 bytes)
//! 64: PerfMgt data (192 bytes)
//! ```
//! PerfMgt MADs are GMPs: LID-routed to QP1 of the port (or, on a switch,
//! of port 0, with the counters of an external port chosen by the
//! attribute's PortSelect). ClassPortInfo (attribute 0x0001) says what the
//! port's performance management agent (PMA) supports.

use super::codes::open_enum;
use super::header::{MadHeader, MadHeaderRepr};
use super::{check_len, Method, MgmtClass, WireError, WireResult, MAD_SIZE};

pub mod port_counters;
pub mod port_counters_ext;

pub use port_counters::{PortCounters, PortCountersRepr, PORT_COUNTERS_LEN};
pub use port_counters_ext::{PortCountersExtended, PortCountersExtendedRepr, PORT_COUNTERS_EXT_LEN};

/// Where the PerfMgt data starts in a MAD (after 40 reserved bytes).
pub const PERF_DATA_OFFSET: usize = 64;
/// The PerfMgt data area of one MAD.
pub const PERF_DATA_LEN: usize = MAD_SIZE - PERF_DATA_OFFSET;
/// The PerfMgt class version (IBA 16.1.1).
pub const PERF_CLASS_VERSION: u8 = 1;
/// PortSelect 0xFF: all ports of the node at once, summed (only where
/// ClassPortInfo has [`perf_cap::ALL_PORT_SELECT`]).
pub const ALL_PORTS: u8 = 0xFF;

open_enum! {
    /// PerfMgt attribute IDs (IBA 16.1.2, the PerfMgt attribute table);
    /// only those ibsm reads or answers are named.
    PerfAttributeId: u16 {
        ClassPortInfo = 0x0001,
        PortSamplesControl = 0x0010,
        PortSamplesResult = 0x0011,
        PortCounters = 0x0012,
        PortCountersExtended = 0x001D,
    }
}

/// The PerfMgt class's own CapabilityMask bits in its ClassPortInfo
/// (IBA 16.1.3.1; bits 0-7 are the ones every class shares, see
/// `class_port_info::class_cap`).
pub mod perf_cap {
    /// PortSelect 0xFF (all ports) is answered.
    pub const ALL_PORT_SELECT: u16 = 1 << 8;
    /// PortCountersExtended is answered with every counter, the unicast
    /// and multicast packet counts included.
    pub const IS_EXTENDED_WIDTH_SUPPORTED: u16 = 1 << 9;
    /// PortCountersExtended is answered, but only its first four counters
    /// (data and packets in and out) are kept.
    pub const IS_EXTENDED_WIDTH_SUPPORTED_NO_IETF: u16 = 1 << 10;
    /// Only PortSamplesControl/Result, no PortCounters.
    pub const IS_SAMPLES_ONLY_SUPPORTED: u16 = 1 << 11;
    /// PortCounters' PortXmitWait is kept.
    pub const IS_PORT_COUNTERS_XMIT_WAIT_SUPPORTED: u16 = 1 << 12;

    /// Whether a port with this CapabilityMask has 64-bit data and packet
    /// counters (PortCountersExtended), in either form.
    pub fn has_extended(mask: u16) -> bool {
        mask & (IS_EXTENDED_WIDTH_SUPPORTED | IS_EXTENDED_WIDTH_SUPPORTED_NO_IETF) != 0
    }
}

/// A zero-copy view of a whole PerfMgt MAD.
#[derive(Debug, Clone, Copy)]
pub struct PerfMad<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PerfMad<T> {
    /// Wraps `buffer` after checking it is exactly one MAD.
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        let b = buffer.as_ref();
        check_len("PerfMgt MAD", b, MAD_SIZE)?;
        if b.len() > MAD_SIZE {
            return Err(WireError::Oversized { what: "PerfMgt MAD", len: b.len(), max: MAD_SIZE });
        }
        Ok(PerfMad { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn header(&self) -> MadHeader<&[u8]> {
        MadHeader::new_checked(self.buffer.as_ref()).expect("a whole MAD holds a header")
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[PERF_DATA_OFFSET..MAD_SIZE]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PerfMad<T> {
    pub fn header_mut(&mut self) -> MadHeader<&mut [u8]> {
        MadHeader::new_checked(self.buffer.as_mut()).expect("a whole MAD holds a header")
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[PERF_DATA_OFFSET..MAD_SIZE]
    }
}

/// The owned form of a PerfMgt MAD: its header and data area (the 40
/// reserved bytes are dropped on parse and zero on emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerfMadRepr {
    pub header: MadHeaderRepr,
    pub data: [u8; PERF_DATA_LEN],
}

impl PerfMadRepr {
    /// Parses untrusted bytes: one whole MAD of the PerfMgt class, version 1.
    pub fn parse_bytes(bytes: &[u8]) -> WireResult<Self> {
        let view = PerfMad::new_checked(bytes)?;
        let header = MadHeaderRepr::parse(&view.header())?;
        if header.mgmt_class != MgmtClass::Perf {
            return Err(WireError::Forbidden {
                what: "PerfMgt MAD",
                field: "MgmtClass",
                value: u8::from(header.mgmt_class).into(),
            });
        }
        let mut data = [0u8; PERF_DATA_LEN];
        data.copy_from_slice(view.data());
        Ok(PerfMadRepr { header, data })
    }

    pub fn buffer_len(&self) -> usize {
        MAD_SIZE
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, out: &mut PerfMad<T>) {
        out.buffer.as_mut()[..MAD_SIZE].fill(0);
        self.header.emit(&mut out.header_mut());
        out.data_mut().copy_from_slice(&self.data);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut mad = vec![0u8; MAD_SIZE];
        self.emit(&mut PerfMad::new_checked(&mut mad[..]).expect("MAD_SIZE bytes"));
        mad
    }

    /// A request (`Get` or `Set`) of `attribute` with `data` as its
    /// attribute, TID 0 (the transport assigns its own).
    pub fn request(method: Method, attribute: PerfAttributeId, modifier: u32, data: [u8; PERF_DATA_LEN]) -> Self {
        PerfMadRepr {
            header: MadHeaderRepr {
                mgmt_class: MgmtClass::Perf,
                class_version: PERF_CLASS_VERSION,
                method,
                status: 0,
                class_specific: 0,
                transaction_id: 0,
                attribute_id: u16::from(attribute).into(),
                attribute_modifier: modifier,
            },
            data,
        }
    }

    /// The attribute ID as the PerfMgt class names it.
    pub fn attribute(&self) -> PerfAttributeId {
        u16::from(self.header.attribute_id).into()
    }
}

/// Emits an attribute of `len` bytes into a fresh PerfMgt data area.
pub(crate) fn data_area(len: usize, emit: impl FnOnce(&mut [u8])) -> [u8; PERF_DATA_LEN] {
    let mut data = [0u8; PERF_DATA_LEN];
    emit(&mut data[..len]);
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::AttributeId;
    use proptest::prelude::*;

    #[test]
    fn a_request_is_laid_out_as_the_spec_says() {
        let mut data = [0u8; PERF_DATA_LEN];
        data[1] = 3; // PortSelect
        let r = PerfMadRepr::request(Method::Get, PerfAttributeId::PortCounters, 0, data);
        let b = r.to_bytes();
        assert_eq!(&b[..4], &[1, 0x04, 1, 0x01], "base version, class 0x04, version 1, Get");
        assert_eq!(&b[16..18], &[0x00, 0x12], "attribute 0x0012");
        assert!(b[24..64].iter().all(|&x| x == 0), "40 reserved bytes");
        assert_eq!(b[65], 3, "the data starts at byte 64");
        let back = PerfMadRepr::parse_bytes(&b).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.attribute(), PerfAttributeId::PortCounters);
        assert_eq!(back.header.attribute_id, AttributeId::SwitchInfo, "same number, other class");
    }

    #[test]
    fn other_classes_sizes_and_versions_are_refused() {
        let r = PerfMadRepr::request(Method::Get, PerfAttributeId::ClassPortInfo, 0, [0; PERF_DATA_LEN]);
        let mut b = r.to_bytes();
        assert!(PerfMadRepr::parse_bytes(&b[..255]).is_err());
        let mut long = b.clone();
        long.push(0);
        assert!(PerfMadRepr::parse_bytes(&long).is_err());
        b[2] = 2;
        assert!(matches!(PerfMadRepr::parse_bytes(&b), Err(WireError::ClassVersion { class: 4, version: 2 })));
        b[1] = 0x03;
        assert!(matches!(PerfMadRepr::parse_bytes(&b), Err(WireError::Forbidden { field: "MgmtClass", .. })));
    }

    #[test]
    fn capability_bits() {
        assert!(perf_cap::has_extended(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED));
        assert!(perf_cap::has_extended(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED_NO_IETF | 1));
        assert!(!perf_cap::has_extended(perf_cap::ALL_PORT_SELECT | perf_cap::IS_PORT_COUNTERS_XMIT_WAIT_SUPPORTED));
        // On the wire the mask is big-endian: bit 9 is 0x02 in byte 2 of ClassPortInfo.
        assert_eq!(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED.to_be_bytes(), [0x02, 0x00]);
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(r) = PerfMadRepr::parse_bytes(&bytes) {
                prop_assert_eq!(PerfMadRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
            }
        }
    }
}
