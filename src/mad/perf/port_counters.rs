//! PortCounters (IBA vol1 16.1.3.5, Table 247; attribute 0x0012), 44
//! bytes: a port's error counters and its 32-bit data and packet counts.
//! Get reads them; Set clears those CounterSelect (and CounterSelect2)
//! name, to zero (IBA 16.1.3.5: a Set writes 0, other values are
//! reserved), and answers with the counters after the clear.
//!
//! ```text
//!  0: Reserved (8) | PortSelect (8) | CounterSelect (16)
//!  4: SymbolErrorCounter (16)       | LinkErrorRecoveryCounter (8) | LinkDownedCounter (8)
//!  8: PortRcvErrors (16)            | PortRcvRemotePhysicalErrors (16)
//! 12: PortRcvSwitchRelayErrors (16) | PortXmitDiscards (16)
//! 16: PortXmitConstraintErrors (8) | PortRcvConstraintErrors (8) | CounterSelect2 (8)
//!     | LocalLinkIntegrityErrors (4) ExcessiveBufferOverrunErrors (4)
//! 20: QP1Dropped (16)               | VL15Dropped (16)
//! 24: PortXmitData (32)    28: PortRcvData (32)
//! 32: PortXmitPkts (32)    36: PortRcvPkts (32)
//! 40: PortXmitWait (32)
//! ```
//!
//! Every counter stops at its maximum instead of wrapping (IBA 16.1.3.5).
//! PortXmitData and PortRcvData count 4-byte words: the octets of each
//! packet from the LRH to the VCRC exclusive, divided by 4. CounterSelect2
//! and QP1Dropped came with release 1.3 (reserved before, so zero on older
//! ports); PortXmitWait is kept where ClassPortInfo has
//! `IsPortCountersXmitWaitSupported`.

use super::{data_area, PERF_DATA_LEN};
use crate::mad::{be, check_len, WireResult};

/// PortCounters' size on the wire.
pub const PORT_COUNTERS_LEN: usize = 44;

mod field {
    use crate::mad::Bits;
    pub const PORT_SELECT: usize = 1;
    pub const COUNTER_SELECT: usize = 2;
    pub const SYMBOL_ERROR_COUNTER: usize = 4;
    pub const LINK_ERROR_RECOVERY_COUNTER: usize = 6;
    pub const LINK_DOWNED_COUNTER: usize = 7;
    pub const PORT_RCV_ERRORS: usize = 8;
    pub const PORT_RCV_REMOTE_PHYSICAL_ERRORS: usize = 10;
    pub const PORT_RCV_SWITCH_RELAY_ERRORS: usize = 12;
    pub const PORT_XMIT_DISCARDS: usize = 14;
    pub const PORT_XMIT_CONSTRAINT_ERRORS: usize = 16;
    pub const PORT_RCV_CONSTRAINT_ERRORS: usize = 17;
    pub const COUNTER_SELECT2: usize = 18;
    pub const LOCAL_LINK_INTEGRITY_ERRORS: Bits = Bits::new(19, 4, 4);
    pub const EXCESSIVE_BUFFER_OVERRUN_ERRORS: Bits = Bits::new(19, 0, 4);
    pub const QP1_DROPPED: usize = 20;
    pub const VL15_DROPPED: usize = 22;
    pub const PORT_XMIT_DATA: usize = 24;
    pub const PORT_RCV_DATA: usize = 28;
    pub const PORT_XMIT_PKTS: usize = 32;
    pub const PORT_RCV_PKTS: usize = 36;
    pub const PORT_XMIT_WAIT: usize = 40;
}

/// CounterSelect bits (IBA 16.1.3.5): which counters a Set clears.
pub mod select {
    pub const SYMBOL_ERROR_COUNTER: u16 = 1 << 0;
    pub const LINK_ERROR_RECOVERY_COUNTER: u16 = 1 << 1;
    pub const LINK_DOWNED_COUNTER: u16 = 1 << 2;
    pub const PORT_RCV_ERRORS: u16 = 1 << 3;
    pub const PORT_RCV_REMOTE_PHYSICAL_ERRORS: u16 = 1 << 4;
    pub const PORT_RCV_SWITCH_RELAY_ERRORS: u16 = 1 << 5;
    pub const PORT_XMIT_DISCARDS: u16 = 1 << 6;
    pub const PORT_XMIT_CONSTRAINT_ERRORS: u16 = 1 << 7;
    pub const PORT_RCV_CONSTRAINT_ERRORS: u16 = 1 << 8;
    pub const LOCAL_LINK_INTEGRITY_ERRORS: u16 = 1 << 9;
    pub const EXCESSIVE_BUFFER_OVERRUN_ERRORS: u16 = 1 << 10;
    pub const VL15_DROPPED: u16 = 1 << 11;
    pub const PORT_XMIT_DATA: u16 = 1 << 12;
    pub const PORT_RCV_DATA: u16 = 1 << 13;
    pub const PORT_XMIT_PKTS: u16 = 1 << 14;
    pub const PORT_RCV_PKTS: u16 = 1 << 15;
}

/// CounterSelect2 bits (IBA 1.3, 16.1.3.5).
pub mod select2 {
    pub const PORT_XMIT_WAIT: u8 = 1 << 0;
    pub const QP1_DROPPED: u8 = 1 << 1;
}

/// A zero-copy view of PortCounters.
#[derive(Debug, Clone, Copy)]
pub struct PortCounters<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PortCounters<T> {
    /// Wraps `buffer` after checking it holds the whole attribute; the
    /// rest of a PerfMgt data area is ignored.
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("PortCounters", buffer.as_ref(), PORT_COUNTERS_LEN)?;
        Ok(PortCounters { buffer })
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
    pub fn symbol_error_counter(&self) -> u16 {
        be::u16(self.b(), field::SYMBOL_ERROR_COUNTER)
    }
    pub fn link_error_recovery_counter(&self) -> u8 {
        self.b()[field::LINK_ERROR_RECOVERY_COUNTER]
    }
    pub fn link_downed_counter(&self) -> u8 {
        self.b()[field::LINK_DOWNED_COUNTER]
    }
    pub fn port_rcv_errors(&self) -> u16 {
        be::u16(self.b(), field::PORT_RCV_ERRORS)
    }
    pub fn port_rcv_remote_physical_errors(&self) -> u16 {
        be::u16(self.b(), field::PORT_RCV_REMOTE_PHYSICAL_ERRORS)
    }
    pub fn port_rcv_switch_relay_errors(&self) -> u16 {
        be::u16(self.b(), field::PORT_RCV_SWITCH_RELAY_ERRORS)
    }
    pub fn port_xmit_discards(&self) -> u16 {
        be::u16(self.b(), field::PORT_XMIT_DISCARDS)
    }
    pub fn port_xmit_constraint_errors(&self) -> u8 {
        self.b()[field::PORT_XMIT_CONSTRAINT_ERRORS]
    }
    pub fn port_rcv_constraint_errors(&self) -> u8 {
        self.b()[field::PORT_RCV_CONSTRAINT_ERRORS]
    }
    pub fn counter_select2(&self) -> u8 {
        self.b()[field::COUNTER_SELECT2]
    }
    pub fn local_link_integrity_errors(&self) -> u8 {
        field::LOCAL_LINK_INTEGRITY_ERRORS.get(self.b())
    }
    pub fn excessive_buffer_overrun_errors(&self) -> u8 {
        field::EXCESSIVE_BUFFER_OVERRUN_ERRORS.get(self.b())
    }
    pub fn qp1_dropped(&self) -> u16 {
        be::u16(self.b(), field::QP1_DROPPED)
    }
    pub fn vl15_dropped(&self) -> u16 {
        be::u16(self.b(), field::VL15_DROPPED)
    }
    pub fn port_xmit_data(&self) -> u32 {
        be::u32(self.b(), field::PORT_XMIT_DATA)
    }
    pub fn port_rcv_data(&self) -> u32 {
        be::u32(self.b(), field::PORT_RCV_DATA)
    }
    pub fn port_xmit_pkts(&self) -> u32 {
        be::u32(self.b(), field::PORT_XMIT_PKTS)
    }
    pub fn port_rcv_pkts(&self) -> u32 {
        be::u32(self.b(), field::PORT_RCV_PKTS)
    }
    pub fn port_xmit_wait(&self) -> u32 {
        be::u32(self.b(), field::PORT_XMIT_WAIT)
    }
}

/// The owned form of PortCounters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCountersRepr {
    pub port_select: u8,
    pub counter_select: u16,
    pub symbol_error_counter: u16,
    pub link_error_recovery_counter: u8,
    pub link_downed_counter: u8,
    pub port_rcv_errors: u16,
    pub port_rcv_remote_physical_errors: u16,
    pub port_rcv_switch_relay_errors: u16,
    pub port_xmit_discards: u16,
    pub port_xmit_constraint_errors: u8,
    pub port_rcv_constraint_errors: u8,
    pub counter_select2: u8,
    /// 4 bits.
    pub local_link_integrity_errors: u8,
    /// 4 bits.
    pub excessive_buffer_overrun_errors: u8,
    pub qp1_dropped: u16,
    pub vl15_dropped: u16,
    /// In 4-byte words.
    pub port_xmit_data: u32,
    /// In 4-byte words.
    pub port_rcv_data: u32,
    pub port_xmit_pkts: u32,
    pub port_rcv_pkts: u32,
    pub port_xmit_wait: u32,
}

impl PortCountersRepr {
    /// Every bit pattern is a PortCounters, so this cannot fail once the
    /// view exists.
    pub fn parse<T: AsRef<[u8]>>(v: &PortCounters<T>) -> WireResult<Self> {
        Ok(PortCountersRepr {
            port_select: v.port_select(),
            counter_select: v.counter_select(),
            symbol_error_counter: v.symbol_error_counter(),
            link_error_recovery_counter: v.link_error_recovery_counter(),
            link_downed_counter: v.link_downed_counter(),
            port_rcv_errors: v.port_rcv_errors(),
            port_rcv_remote_physical_errors: v.port_rcv_remote_physical_errors(),
            port_rcv_switch_relay_errors: v.port_rcv_switch_relay_errors(),
            port_xmit_discards: v.port_xmit_discards(),
            port_xmit_constraint_errors: v.port_xmit_constraint_errors(),
            port_rcv_constraint_errors: v.port_rcv_constraint_errors(),
            counter_select2: v.counter_select2(),
            local_link_integrity_errors: v.local_link_integrity_errors(),
            excessive_buffer_overrun_errors: v.excessive_buffer_overrun_errors(),
            qp1_dropped: v.qp1_dropped(),
            vl15_dropped: v.vl15_dropped(),
            port_xmit_data: v.port_xmit_data(),
            port_rcv_data: v.port_rcv_data(),
            port_xmit_pkts: v.port_xmit_pkts(),
            port_rcv_pkts: v.port_rcv_pkts(),
            port_xmit_wait: v.port_xmit_wait(),
        })
    }

    /// Parses untrusted bytes (a PerfMgt data area, or any buffer at
    /// least 44 bytes long).
    pub fn parse_bytes(bytes: &[u8]) -> WireResult<Self> {
        Self::parse(&PortCounters::new_checked(bytes)?)
    }

    pub fn buffer_len(&self) -> usize {
        PORT_COUNTERS_LEN
    }

    /// Writes all 44 bytes (the reserved byte zero); the 4-bit counters are
    /// cut to their field.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("PortCounters", out, PORT_COUNTERS_LEN)?;
        let b = &mut out[..PORT_COUNTERS_LEN];
        b.fill(0);
        b[field::PORT_SELECT] = self.port_select;
        be::set_u16(b, field::COUNTER_SELECT, self.counter_select);
        be::set_u16(b, field::SYMBOL_ERROR_COUNTER, self.symbol_error_counter);
        b[field::LINK_ERROR_RECOVERY_COUNTER] = self.link_error_recovery_counter;
        b[field::LINK_DOWNED_COUNTER] = self.link_downed_counter;
        be::set_u16(b, field::PORT_RCV_ERRORS, self.port_rcv_errors);
        be::set_u16(b, field::PORT_RCV_REMOTE_PHYSICAL_ERRORS, self.port_rcv_remote_physical_errors);
        be::set_u16(b, field::PORT_RCV_SWITCH_RELAY_ERRORS, self.port_rcv_switch_relay_errors);
        be::set_u16(b, field::PORT_XMIT_DISCARDS, self.port_xmit_discards);
        b[field::PORT_XMIT_CONSTRAINT_ERRORS] = self.port_xmit_constraint_errors;
        b[field::PORT_RCV_CONSTRAINT_ERRORS] = self.port_rcv_constraint_errors;
        b[field::COUNTER_SELECT2] = self.counter_select2;
        field::LOCAL_LINK_INTEGRITY_ERRORS.set(b, self.local_link_integrity_errors);
        field::EXCESSIVE_BUFFER_OVERRUN_ERRORS.set(b, self.excessive_buffer_overrun_errors);
        be::set_u16(b, field::QP1_DROPPED, self.qp1_dropped);
        be::set_u16(b, field::VL15_DROPPED, self.vl15_dropped);
        be::set_u32(b, field::PORT_XMIT_DATA, self.port_xmit_data);
        be::set_u32(b, field::PORT_RCV_DATA, self.port_rcv_data);
        be::set_u32(b, field::PORT_XMIT_PKTS, self.port_xmit_pkts);
        be::set_u32(b, field::PORT_RCV_PKTS, self.port_rcv_pkts);
        be::set_u32(b, field::PORT_XMIT_WAIT, self.port_xmit_wait);
        Ok(())
    }

    /// Emits into a fresh PerfMgt data area.
    pub fn to_data(&self) -> [u8; PERF_DATA_LEN] {
        data_area(PORT_COUNTERS_LEN, |b| self.emit(b).expect("the data area holds PortCounters"))
    }

    /// The request that reads `port`'s counters.
    pub fn get(port: u8) -> Self {
        PortCountersRepr { port_select: port, ..Default::default() }
    }

    /// The Set that clears `port`'s counters named by `select` and
    /// `select2` (every counter field zero, as a Set must carry).
    pub fn clear(port: u8, select: u16, select2: u8) -> Self {
        PortCountersRepr { port_select: port, counter_select: select, counter_select2: select2, ..Default::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    /// Table 247 by hand, every field a different value.
    fn hand_built() -> [u8; 44] {
        let mut b = [0u8; 44];
        b[0..4].copy_from_slice(&[0, 7, 0xF0, 0x0F]); // PortSelect 7, CounterSelect 0xF00F
        b[4..8].copy_from_slice(&[0x01, 0x02, 0x03, 0x04]); // SymbolErrors 0x0102, recoveries 3, downed 4
        b[8..12].copy_from_slice(&[0x00, 0x05, 0x00, 0x06]);
        b[12..16].copy_from_slice(&[0x00, 0x07, 0x01, 0x08]);
        b[16..20].copy_from_slice(&[9, 10, 0x01, 0xBC]); // constraint 9/10, select2 1, LLI 0xB, EBO 0xC
        b[20..24].copy_from_slice(&[0x00, 0x0D, 0x00, 0x0E]);
        b[24..28].copy_from_slice(&0x1122_3344u32.to_be_bytes());
        b[28..32].copy_from_slice(&0x5566_7788u32.to_be_bytes());
        b[32..36].copy_from_slice(&0x99AA_BBCCu32.to_be_bytes());
        b[36..40].copy_from_slice(&0xDDEE_FF00u32.to_be_bytes());
        b[40..44].copy_from_slice(&0x0102_0304u32.to_be_bytes());
        b
    }

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = hand_built();
        let r = PortCountersRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.port_select, r.counter_select), (7, 0xF00F));
        assert_eq!((r.symbol_error_counter, r.link_error_recovery_counter, r.link_downed_counter), (0x0102, 3, 4));
        assert_eq!((r.port_rcv_errors, r.port_rcv_remote_physical_errors), (5, 6));
        assert_eq!((r.port_rcv_switch_relay_errors, r.port_xmit_discards), (7, 0x0108));
        assert_eq!((r.port_xmit_constraint_errors, r.port_rcv_constraint_errors, r.counter_select2), (9, 10, 1));
        assert_eq!((r.local_link_integrity_errors, r.excessive_buffer_overrun_errors), (0xB, 0xC));
        assert_eq!((r.qp1_dropped, r.vl15_dropped), (0x0D, 0x0E));
        assert_eq!((r.port_xmit_data, r.port_rcv_data), (0x1122_3344, 0x5566_7788));
        assert_eq!((r.port_xmit_pkts, r.port_rcv_pkts, r.port_xmit_wait), (0x99AA_BBCC, 0xDDEE_FF00, 0x0102_0304));
        let mut out = [0xAAu8; 44];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(&r.to_data()[..44], &b[..]);
        assert!(r.to_data()[44..].iter().all(|&x| x == 0));
    }

    #[test]
    fn reserved_byte_and_wide_nibbles_are_dropped() {
        let ones = [0xffu8; 44];
        let r = PortCountersRepr::parse_bytes(&ones).unwrap();
        let mut out = [0u8; 44];
        r.emit(&mut out).unwrap();
        assert_eq!(out[0], 0, "byte 0 is reserved");
        assert!(out[1..].iter().all(|&x| x == 0xff));
        let wide = PortCountersRepr { local_link_integrity_errors: 0x1F, ..Default::default() };
        wide.emit(&mut out).unwrap();
        assert_eq!(out[19], 0xF0, "only 4 bits, and not into the neighbour");
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            PortCountersRepr::parse_bytes(&[0u8; 43]),
            Err(WireError::Truncated { what: "PortCounters", len: 43, need: 44 })
        );
        assert!(PortCountersRepr::default().emit(&mut [0u8; 10]).is_err());
        let c = PortCountersRepr::clear(3, select::PORT_XMIT_DATA, select2::PORT_XMIT_WAIT).to_data();
        assert_eq!(&c[..4], &[0, 3, 0x10, 0x00]);
        assert_eq!(c[18], 1);
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(r) = PortCountersRepr::parse_bytes(&bytes) {
                prop_assert_eq!(PortCountersRepr::parse_bytes(&r.to_data()).unwrap(), r);
            }
        }
    }
}
