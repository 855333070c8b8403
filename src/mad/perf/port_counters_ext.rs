//! PortCountersExtended (IBA vol1 16.1.4, attribute 0x001D; an optional
//! attribute, answered where the PMA's ClassPortInfo has
//! IsExtendedWidthSupported or IsExtendedWidthSupportedNoIETF), 72 bytes:
//! 64-bit data and packet counters, which at any link speed take centuries
//! to fill, so they are read and never cleared.
//!
//! ```text
//!  0: Reserved (8) | PortSelect (8) | CounterSelect (16)
//!  4: CounterSelect2 (32; reserved before release 1.3)
//!  8: PortXmitData (64)             16: PortRcvData (64)
//! 24: PortXmitPkts (64)             32: PortRcvPkts (64)
//! 40: PortUnicastXmitPkts (64)      48: PortUnicastRcvPkts (64)
//! 56: PortMulticastXmitPkts (64)    64: PortMulticastRcvPkts (64)
//! ```
//!
//! With only IsExtendedWidthSupportedNoIETF the four unicast and
//! multicast counters are not kept (they read zero). Release 1.3 adds
//! 64-bit copies of the error counters after byte 72 (behind
//! CapabilityMask2 IsAdditionalPortCountersExtendedSupported); ibsm does
//! not read them.

use super::{data_area, PERF_DATA_LEN};
use crate::mad::{be, check_len, WireResult};

/// PortCountersExtended's size on the wire (the part ibsm reads).
pub const PORT_COUNTERS_EXT_LEN: usize = 72;

mod field {
    pub const PORT_SELECT: usize = 1;
    pub const COUNTER_SELECT: usize = 2;
    pub const COUNTER_SELECT2: usize = 4;
    pub const PORT_XMIT_DATA: usize = 8;
    pub const PORT_RCV_DATA: usize = 16;
    pub const PORT_XMIT_PKTS: usize = 24;
    pub const PORT_RCV_PKTS: usize = 32;
    pub const PORT_UNICAST_XMIT_PKTS: usize = 40;
    pub const PORT_UNICAST_RCV_PKTS: usize = 48;
    pub const PORT_MULTICAST_XMIT_PKTS: usize = 56;
    pub const PORT_MULTICAST_RCV_PKTS: usize = 64;
}

/// CounterSelect bits of PortCountersExtended: which counters a Set
/// clears.
pub mod select {
    pub const PORT_XMIT_DATA: u16 = 1 << 0;
    pub const PORT_RCV_DATA: u16 = 1 << 1;
    pub const PORT_XMIT_PKTS: u16 = 1 << 2;
    pub const PORT_RCV_PKTS: u16 = 1 << 3;
    pub const PORT_UNICAST_XMIT_PKTS: u16 = 1 << 4;
    pub const PORT_UNICAST_RCV_PKTS: u16 = 1 << 5;
    pub const PORT_MULTICAST_XMIT_PKTS: u16 = 1 << 6;
    pub const PORT_MULTICAST_RCV_PKTS: u16 = 1 << 7;
}

/// A zero-copy view of PortCountersExtended.
#[derive(Debug, Clone, Copy)]
pub struct PortCountersExtended<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PortCountersExtended<T> {
    /// Wraps `buffer` after checking it holds the 72 bytes ibsm reads.
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("PortCountersExtended", buffer.as_ref(), PORT_COUNTERS_EXT_LEN)?;
        Ok(PortCountersExtended { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn port_select(&self) -> u8 {
        self.b()[field::PORT_SELECT]
    }
    pub fn counter_select(&self) -> u16 {
        be::u16(self.b(), field::COUNTER_SELECT)
    }
    pub fn counter_select2(&self) -> u32 {
        be::u32(self.b(), field::COUNTER_SELECT2)
    }
    pub fn port_xmit_data(&self) -> u64 {
        be::u64(self.b(), field::PORT_XMIT_DATA)
    }
    pub fn port_rcv_data(&self) -> u64 {
        be::u64(self.b(), field::PORT_RCV_DATA)
    }
    pub fn port_xmit_pkts(&self) -> u64 {
        be::u64(self.b(), field::PORT_XMIT_PKTS)
    }
    pub fn port_rcv_pkts(&self) -> u64 {
        be::u64(self.b(), field::PORT_RCV_PKTS)
    }
    pub fn port_unicast_xmit_pkts(&self) -> u64 {
        be::u64(self.b(), field::PORT_UNICAST_XMIT_PKTS)
    }
    pub fn port_unicast_rcv_pkts(&self) -> u64 {
        be::u64(self.b(), field::PORT_UNICAST_RCV_PKTS)
    }
    pub fn port_multicast_xmit_pkts(&self) -> u64 {
        be::u64(self.b(), field::PORT_MULTICAST_XMIT_PKTS)
    }
    pub fn port_multicast_rcv_pkts(&self) -> u64 {
        be::u64(self.b(), field::PORT_MULTICAST_RCV_PKTS)
    }
}

/// The owned form of PortCountersExtended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCountersExtendedRepr {
    pub port_select: u8,
    pub counter_select: u16,
    pub counter_select2: u32,
    /// In 4-byte words.
    pub port_xmit_data: u64,
    /// In 4-byte words.
    pub port_rcv_data: u64,
    pub port_xmit_pkts: u64,
    pub port_rcv_pkts: u64,
    pub port_unicast_xmit_pkts: u64,
    pub port_unicast_rcv_pkts: u64,
    pub port_multicast_xmit_pkts: u64,
    pub port_multicast_rcv_pkts: u64,
}

impl PortCountersExtendedRepr {
    /// Every bit pattern is a PortCountersExtended.
    pub fn parse<T: AsRef<[u8]>>(v: &PortCountersExtended<T>) -> WireResult<Self> {
        Ok(PortCountersExtendedRepr {
            port_select: v.port_select(),
            counter_select: v.counter_select(),
            counter_select2: v.counter_select2(),
            port_xmit_data: v.port_xmit_data(),
            port_rcv_data: v.port_rcv_data(),
            port_xmit_pkts: v.port_xmit_pkts(),
            port_rcv_pkts: v.port_rcv_pkts(),
            port_unicast_xmit_pkts: v.port_unicast_xmit_pkts(),
            port_unicast_rcv_pkts: v.port_unicast_rcv_pkts(),
            port_multicast_xmit_pkts: v.port_multicast_xmit_pkts(),
            port_multicast_rcv_pkts: v.port_multicast_rcv_pkts(),
        })
    }

    pub fn parse_bytes(bytes: &[u8]) -> WireResult<Self> {
        Self::parse(&PortCountersExtended::new_checked(bytes)?)
    }

    pub fn buffer_len(&self) -> usize {
        PORT_COUNTERS_EXT_LEN
    }

    /// Writes all 72 bytes (the reserved byte zero).
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("PortCountersExtended", out, PORT_COUNTERS_EXT_LEN)?;
        let b = &mut out[..PORT_COUNTERS_EXT_LEN];
        b.fill(0);
        b[field::PORT_SELECT] = self.port_select;
        be::set_u16(b, field::COUNTER_SELECT, self.counter_select);
        be::set_u32(b, field::COUNTER_SELECT2, self.counter_select2);
        be::set_u64(b, field::PORT_XMIT_DATA, self.port_xmit_data);
        be::set_u64(b, field::PORT_RCV_DATA, self.port_rcv_data);
        be::set_u64(b, field::PORT_XMIT_PKTS, self.port_xmit_pkts);
        be::set_u64(b, field::PORT_RCV_PKTS, self.port_rcv_pkts);
        be::set_u64(b, field::PORT_UNICAST_XMIT_PKTS, self.port_unicast_xmit_pkts);
        be::set_u64(b, field::PORT_UNICAST_RCV_PKTS, self.port_unicast_rcv_pkts);
        be::set_u64(b, field::PORT_MULTICAST_XMIT_PKTS, self.port_multicast_xmit_pkts);
        be::set_u64(b, field::PORT_MULTICAST_RCV_PKTS, self.port_multicast_rcv_pkts);
        Ok(())
    }

    /// Emits into a fresh PerfMgt data area.
    pub fn to_data(&self) -> [u8; PERF_DATA_LEN] {
        data_area(PORT_COUNTERS_EXT_LEN, |b| self.emit(b).expect("the data area holds PortCountersExtended"))
    }

    /// The request that reads `port`'s extended counters.
    pub fn get(port: u8) -> Self {
        PortCountersExtendedRepr { port_select: port, ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let mut b = [0u8; 72];
        b[1] = 12;
        b[2..4].copy_from_slice(&[0x00, 0xFF]);
        b[4..8].copy_from_slice(&[0, 0, 0, 2]);
        for i in 0..8u64 {
            let at = 8 + 8 * i as usize;
            b[at..at + 8].copy_from_slice(&(0x0101_0101_0101_0101 * (i + 1)).to_be_bytes());
        }
        let r = PortCountersExtendedRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.port_select, r.counter_select, r.counter_select2), (12, 0xFF, 2));
        assert_eq!(r.port_xmit_data, 0x0101_0101_0101_0101);
        assert_eq!(r.port_rcv_data, 0x0202_0202_0202_0202);
        assert_eq!(r.port_xmit_pkts, 0x0303_0303_0303_0303);
        assert_eq!(r.port_rcv_pkts, 0x0404_0404_0404_0404);
        assert_eq!(r.port_unicast_xmit_pkts, 0x0505_0505_0505_0505);
        assert_eq!(r.port_unicast_rcv_pkts, 0x0606_0606_0606_0606);
        assert_eq!(r.port_multicast_xmit_pkts, 0x0707_0707_0707_0707);
        assert_eq!(r.port_multicast_rcv_pkts, 0x0808_0808_0808_0808);
        let mut out = [0xAAu8; 72];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(PortCountersExtendedRepr::get(5).to_data()[1], 5);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            PortCountersExtendedRepr::parse_bytes(&[0u8; 71]),
            Err(WireError::Truncated { what: "PortCountersExtended", len: 71, need: 72 })
        );
        let mut ones = [0xffu8; 72];
        let r = PortCountersExtendedRepr::parse_bytes(&ones).unwrap();
        r.emit(&mut ones).unwrap();
        assert_eq!(ones[0], 0, "byte 0 is reserved");
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(r) = PortCountersExtendedRepr::parse_bytes(&bytes) {
                prop_assert_eq!(PortCountersExtendedRepr::parse_bytes(&r.to_data()).unwrap(), r);
            }
        }
    }
}
