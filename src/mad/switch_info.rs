//! SwitchInfo (IBA 14.2.5.4): a switch's forwarding table sizes
//! and switch-wide settings. The SM reads it at every switch and sets
//! LinearFDBTop, LifeTimeValue and clears PortStateChange.
//!
//! ```text
//!  0: LinearFDBCap (16)      | RandomFDBCap (16)
//!  4: MulticastFDBCap (16)   | LinearFDBTop (16)
//!  8: DefaultPort | DefaultMulticastPrimaryPort | DefaultMulticastNotPrimaryPort
//!     | LifeTimeValue(5) PortStateChange(1) OptimizedSLtoVLMappingProgramming(2)
//! 12: LIDsPerPort (16)       | PartitionEnforcementCap (16)
//! 16: InboundEnforcementCap(1) OutboundEnforcementCap(1) FilterRawInboundCap(1)
//!     FilterRawOutboundCap(1) EnhancedPort0(1) rsvd(3) | rsvd (8) | MulticastFDBTop (16)
//! ```
//! The AttributeModifier is 0.

use super::{attribute_view, be, AttributeId, WireResult};

mod field {
    use crate::mad::Bits;
    pub const LINEAR_FDB_CAP: usize = 0;
    pub const RANDOM_FDB_CAP: usize = 2;
    pub const MULTICAST_FDB_CAP: usize = 4;
    pub const LINEAR_FDB_TOP: usize = 6;
    pub const DEFAULT_PORT: usize = 8;
    pub const DEFAULT_MCAST_PRIMARY_PORT: usize = 9;
    pub const DEFAULT_MCAST_NOT_PRIMARY_PORT: usize = 10;
    pub const LIFE_TIME_VALUE: Bits = Bits::new(11, 3, 5);
    pub const PORT_STATE_CHANGE: Bits = Bits::new(11, 2, 1);
    pub const OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING: Bits = Bits::new(11, 0, 2);
    pub const LIDS_PER_PORT: usize = 12;
    pub const PARTITION_ENFORCEMENT_CAP: usize = 14;
    pub const INBOUND_ENFORCEMENT_CAP: Bits = Bits::new(16, 7, 1);
    pub const OUTBOUND_ENFORCEMENT_CAP: Bits = Bits::new(16, 6, 1);
    pub const FILTER_RAW_INBOUND_CAP: Bits = Bits::new(16, 5, 1);
    pub const FILTER_RAW_OUTBOUND_CAP: Bits = Bits::new(16, 4, 1);
    pub const ENHANCED_PORT0: Bits = Bits::new(16, 3, 1);
    pub const MULTICAST_FDB_TOP: usize = 18;
    pub const LEN: usize = 20;
}

attribute_view! {
    /// A zero-copy view of a SwitchInfo attribute (20 bytes).
    SwitchInfo, SwitchInfoRepr, "SwitchInfo", field::LEN, AttributeId::SwitchInfo
}

impl<T: AsRef<[u8]>> SwitchInfo<T> {
    /// Bytes 0-1: LFT entries the switch supports (LIDs 0..cap-1).
    pub fn linear_fdb_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LINEAR_FDB_CAP)
    }
    /// Bytes 2-3: random forwarding table entries supported (0 = none).
    pub fn random_fdb_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::RANDOM_FDB_CAP)
    }
    /// Bytes 4-5: MFT entries supported (from LID 0xC000).
    pub fn multicast_fdb_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::MULTICAST_FDB_CAP)
    }
    /// Bytes 6-7: highest LID the LFT holds valid entries for; the SM sets it.
    pub fn linear_fdb_top(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LINEAR_FDB_TOP)
    }
    /// Byte 8: port for unicast LIDs missing from the random FDB.
    pub fn default_port(&self) -> u8 {
        self.buffer.as_ref()[field::DEFAULT_PORT]
    }
    /// Byte 9: port for multicast LIDs missing from the MFT.
    pub fn default_mcast_primary_port(&self) -> u8 {
        self.buffer.as_ref()[field::DEFAULT_MCAST_PRIMARY_PORT]
    }
    /// Byte 10: port for such multicast packets arriving on the primary port.
    pub fn default_mcast_not_primary_port(&self) -> u8 {
        self.buffer.as_ref()[field::DEFAULT_MCAST_NOT_PRIMARY_PORT]
    }
    /// Byte 11 bits 7-3: packet lifetime in the switch, 4.096 us * 2^value (>= 20 is infinite).
    pub fn life_time_value(&self) -> u8 {
        field::LIFE_TIME_VALUE.get(self.buffer.as_ref())
    }
    /// Byte 11 bit 2: a port of the switch changed state. On Set, writing 1 clears it and 0 leaves it.
    pub fn port_state_change(&self) -> bool {
        field::PORT_STATE_CHANGE.get_bool(self.buffer.as_ref())
    }
    /// Byte 11 bits 1-0: the switch accepts one SLtoVLMappingTable Set for all ports (IBA 1.2.1).
    pub fn optimized_sl_to_vl_mapping_programming(&self) -> u8 {
        field::OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING.get(self.buffer.as_ref())
    }
    /// Bytes 12-13: LIDs per port for the random FDB.
    pub fn lids_per_port(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LIDS_PER_PORT)
    }
    /// Bytes 14-15: P_Key table entries of the switch's external ports (0 = no enforcement).
    pub fn partition_enforcement_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PARTITION_ENFORCEMENT_CAP)
    }
    /// Byte 16 bit 7: external ports can enforce P_Keys on arrival.
    pub fn inbound_enforcement_cap(&self) -> bool {
        field::INBOUND_ENFORCEMENT_CAP.get_bool(self.buffer.as_ref())
    }
    /// Byte 16 bit 6: external ports can enforce P_Keys on departure.
    pub fn outbound_enforcement_cap(&self) -> bool {
        field::OUTBOUND_ENFORCEMENT_CAP.get_bool(self.buffer.as_ref())
    }
    /// Byte 16 bit 5: external ports can filter raw packets on arrival.
    pub fn filter_raw_inbound_cap(&self) -> bool {
        field::FILTER_RAW_INBOUND_CAP.get_bool(self.buffer.as_ref())
    }
    /// Byte 16 bit 4: external ports can filter raw packets on departure.
    pub fn filter_raw_outbound_cap(&self) -> bool {
        field::FILTER_RAW_OUTBOUND_CAP.get_bool(self.buffer.as_ref())
    }
    /// Byte 16 bit 3: port 0 is enhanced (supports GSI/QoS beyond the base). (Bits 2-0 and byte 17 are reserved.)
    pub fn enhanced_port0(&self) -> bool {
        field::ENHANCED_PORT0.get_bool(self.buffer.as_ref())
    }
    /// Bytes 18-19: highest multicast LID with valid MFT entries (IBA 1.2.1; meaningful when PortInfo.CapabilityMask.IsMulticastFDBTopSupported).
    pub fn multicast_fdb_top(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::MULTICAST_FDB_TOP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SwitchInfo<T> {
    pub fn set_linear_fdb_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LINEAR_FDB_CAP, v);
    }
    pub fn set_random_fdb_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::RANDOM_FDB_CAP, v);
    }
    pub fn set_multicast_fdb_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::MULTICAST_FDB_CAP, v);
    }
    pub fn set_linear_fdb_top(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LINEAR_FDB_TOP, v);
    }
    pub fn set_default_port(&mut self, v: u8) {
        self.buffer.as_mut()[field::DEFAULT_PORT] = v;
    }
    pub fn set_default_mcast_primary_port(&mut self, v: u8) {
        self.buffer.as_mut()[field::DEFAULT_MCAST_PRIMARY_PORT] = v;
    }
    pub fn set_default_mcast_not_primary_port(&mut self, v: u8) {
        self.buffer.as_mut()[field::DEFAULT_MCAST_NOT_PRIMARY_PORT] = v;
    }
    pub fn set_life_time_value(&mut self, v: u8) {
        field::LIFE_TIME_VALUE.set(self.buffer.as_mut(), v);
    }
    pub fn set_port_state_change(&mut self, v: bool) {
        field::PORT_STATE_CHANGE.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_optimized_sl_to_vl_mapping_programming(&mut self, v: u8) {
        field::OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING.set(self.buffer.as_mut(), v);
    }
    pub fn set_lids_per_port(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LIDS_PER_PORT, v);
    }
    pub fn set_partition_enforcement_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PARTITION_ENFORCEMENT_CAP, v);
    }
    pub fn set_inbound_enforcement_cap(&mut self, v: bool) {
        field::INBOUND_ENFORCEMENT_CAP.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_outbound_enforcement_cap(&mut self, v: bool) {
        field::OUTBOUND_ENFORCEMENT_CAP.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_filter_raw_inbound_cap(&mut self, v: bool) {
        field::FILTER_RAW_INBOUND_CAP.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_filter_raw_outbound_cap(&mut self, v: bool) {
        field::FILTER_RAW_OUTBOUND_CAP.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_enhanced_port0(&mut self, v: bool) {
        field::ENHANCED_PORT0.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_multicast_fdb_top(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::MULTICAST_FDB_TOP, v);
    }
}

/// The owned form of SwitchInfo (IBA 14.2.5.4, all fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchInfoRepr {
    pub linear_fdb_cap: u16,
    pub random_fdb_cap: u16,
    pub multicast_fdb_cap: u16,
    pub linear_fdb_top: u16,
    pub default_port: u8,
    pub default_mcast_primary_port: u8,
    pub default_mcast_not_primary_port: u8,
    pub life_time_value: u8,
    pub port_state_change: bool,
    pub optimized_sl_to_vl_mapping_programming: u8,
    pub lids_per_port: u16,
    pub partition_enforcement_cap: u16,
    pub inbound_enforcement_cap: bool,
    pub outbound_enforcement_cap: bool,
    pub filter_raw_inbound_cap: bool,
    pub filter_raw_outbound_cap: bool,
    pub enhanced_port0: bool,
    pub multicast_fdb_top: u16,
}

impl SwitchInfoRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &SwitchInfo<T>) -> WireResult<Self> {
        Ok(SwitchInfoRepr {
            linear_fdb_cap: v.linear_fdb_cap(),
            random_fdb_cap: v.random_fdb_cap(),
            multicast_fdb_cap: v.multicast_fdb_cap(),
            linear_fdb_top: v.linear_fdb_top(),
            default_port: v.default_port(),
            default_mcast_primary_port: v.default_mcast_primary_port(),
            default_mcast_not_primary_port: v.default_mcast_not_primary_port(),
            life_time_value: v.life_time_value(),
            port_state_change: v.port_state_change(),
            optimized_sl_to_vl_mapping_programming: v.optimized_sl_to_vl_mapping_programming(),
            lids_per_port: v.lids_per_port(),
            partition_enforcement_cap: v.partition_enforcement_cap(),
            inbound_enforcement_cap: v.inbound_enforcement_cap(),
            outbound_enforcement_cap: v.outbound_enforcement_cap(),
            filter_raw_inbound_cap: v.filter_raw_inbound_cap(),
            filter_raw_outbound_cap: v.filter_raw_outbound_cap(),
            enhanced_port0: v.enhanced_port0(),
            multicast_fdb_top: v.multicast_fdb_top(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    /// Writes every field; reserved bits are zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut SwitchInfo<T>) {
        v.clear();
        v.set_linear_fdb_cap(self.linear_fdb_cap);
        v.set_random_fdb_cap(self.random_fdb_cap);
        v.set_multicast_fdb_cap(self.multicast_fdb_cap);
        v.set_linear_fdb_top(self.linear_fdb_top);
        v.set_default_port(self.default_port);
        v.set_default_mcast_primary_port(self.default_mcast_primary_port);
        v.set_default_mcast_not_primary_port(self.default_mcast_not_primary_port);
        v.set_life_time_value(self.life_time_value);
        v.set_port_state_change(self.port_state_change);
        v.set_optimized_sl_to_vl_mapping_programming(self.optimized_sl_to_vl_mapping_programming);
        v.set_lids_per_port(self.lids_per_port);
        v.set_partition_enforcement_cap(self.partition_enforcement_cap);
        v.set_inbound_enforcement_cap(self.inbound_enforcement_cap);
        v.set_outbound_enforcement_cap(self.outbound_enforcement_cap);
        v.set_filter_raw_inbound_cap(self.filter_raw_inbound_cap);
        v.set_filter_raw_outbound_cap(self.filter_raw_outbound_cap);
        v.set_enhanced_port0(self.enhanced_port0);
        v.set_multicast_fdb_top(self.multicast_fdb_top);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn hand_built_layout() {
        let mut b = [0u8; 20];
        b[0..2].copy_from_slice(&[0xc0, 0x00]);
        b[4..8].copy_from_slice(&[0x04, 0x00, 0x00, 0x40]);
        b[8..12].copy_from_slice(&[0, 0xff, 0xff, 0x9d]); // lifetime 19, change, opt 1
        b[14..17].copy_from_slice(&[0x00, 0x08, 0xe8]);
        b[18..20].copy_from_slice(&[0xc0, 0x10]);
        let r = SwitchInfoRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.linear_fdb_cap, 0xc000);
        assert_eq!((r.multicast_fdb_cap, r.linear_fdb_top), (1024, 64));
        assert_eq!((r.default_mcast_primary_port, r.default_mcast_not_primary_port), (255, 255));
        assert_eq!(r.life_time_value, 19);
        assert!(r.port_state_change);
        assert_eq!(r.optimized_sl_to_vl_mapping_programming, 1);
        assert_eq!(r.partition_enforcement_cap, 8);
        assert!(r.inbound_enforcement_cap && r.outbound_enforcement_cap && r.filter_raw_inbound_cap);
        assert!(!r.filter_raw_outbound_cap && r.enhanced_port0);
        assert_eq!(r.multicast_fdb_top, 0xc010);
        let mut out = [0u8; 20];
        r.emit(&mut SwitchInfo::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, b);
    }

    #[test]
    fn reserved_bits_are_dropped() {
        let mut b = [0u8; 20];
        b[16] = 0x07;
        b[17] = 0xff;
        assert_eq!(SwitchInfoRepr::parse_bytes(&b).unwrap(), SwitchInfoRepr::default());
        assert_eq!(SwitchInfoRepr::default().to_bytes(), [0u8; 64]);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            SwitchInfoRepr::parse_bytes(&[0; 19]),
            Err(WireError::Truncated { what: "SwitchInfo", len: 19, need: 20 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(bytes in proptest::array::uniform20(any::<u8>())) {
            let r = SwitchInfoRepr::parse_bytes(&bytes).unwrap();
            let out = r.to_bytes();
            let mut expect = bytes;
            expect[16] &= 0xf8;
            expect[17] = 0;
            prop_assert_eq!(&out[..20], &expect[..]);
            prop_assert_eq!(SwitchInfoRepr::parse_bytes(&out).unwrap(), r);
        }
    }
}
