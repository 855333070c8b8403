//! PortInfo (IBA 14.2.5.6, Table 157): a port's addresses, link state and
//! capabilities. The SM reads it at every port and sets it to assign LIDs,
//! move ports through Init/Armed/Active and configure links.
//!
//! ```text
//!  0: M_Key (64)
//!  8: GidPrefix (64)
//! 16: LID (16)                        | MasterSMLID (16)
//! 20: CapabilityMask (32)
//! 24: DiagCode (16)                   | M_KeyLeasePeriod (16)
//! 28: LocalPortNum | LinkWidthEnabled | LinkWidthSupported | LinkWidthActive
//! 32: LinkSpeedSupported(4) PortState(4) | PortPhysicalState(4) LinkDownDefaultState(4)
//!     | M_KeyProtectBits(2) rsvd(3) LMC(3) | LinkSpeedActive(4) LinkSpeedEnabled(4)
//! 36: NeighborMTU(4) MasterSMSL(4) | VLCap(4) InitType(4) | VLHighLimit | VLArbitrationHighCap
//! 40: VLArbitrationLowCap | InitTypeReply(4) MTUCap(4) | VLStallCount(3) HOQLife(5)
//!     | OperationalVLs(4) PartitionEnforcementInbound(1) ..Outbound(1) FilterRawInbound(1) ..Outbound(1)
//! 44: M_KeyViolations (16)            | P_KeyViolations (16)
//! 48: Q_KeyViolations (16)            | GUIDCap (8) | ClientReregister(1) MulticastPKeyTrapSuppressionEnabled(2) SubnetTimeOut(5)
//! 52: rsvd(3) RespTimeValue(5) | LocalPhyErrors(4) OverrunErrors(4) | MaxCreditHint (16)
//! 56: rsvd(1) LinkSpeedExtActive2(2) LinkSpeedExtSupported2(2) LinkSpeedExtEnabled2(3)
//!                                     | LinkRoundTripLatency (24)
//! 60: CapabilityMask2 (16)            | LinkSpeedExtActive(4) LinkSpeedExtSupported(4) | rsvd(3) LinkSpeedExtEnabled(5)
//! ```
//!
//! # AttributeModifier
//! Bits 7-0 select the port (on a CA or router, 0 means the port the SMP
//! arrived on). On SubnSet, bit 31 tells the port the SM understands the
//! extended speed fields (bytes 62-63); without it a port ignores
//! LinkSpeedExtEnabled. See [`attribute_modifier`].
//!
//! # Set semantics
//! A SubnSet(PortInfo) writes the whole attribute, so several fields reserve
//! a value meaning "leave this alone": PortState 0, PortPhysicalState 0,
//! LinkDownDefaultState 0, LinkSpeedEnabled 0 (15 = all supported),
//! LinkWidthEnabled 0 (255 = all supported), LinkSpeedExtEnabled 0 (30 =
//! disable extended speeds, 31 = all supported) and OperationalVLs 0 are
//! no-change codes. An SM that copies a PortInfo it read back into a Set must
//! zero these (or set them on purpose), or it will e.g. re-request the
//! current port state, which a port in Active refuses as an invalid
//! transition. The read-only fields (capabilities, counters, LocalPortNum)
//! are ignored by the port.

use super::codes::open_enum;
use super::{attribute_view, be, AttributeId, WireResult};
use crate::types::Lid;

mod field {
    use crate::mad::Bits;
    pub const M_KEY: usize = 0;
    pub const GID_PREFIX: usize = 8;
    pub const LID: usize = 16;
    pub const MASTER_SM_LID: usize = 18;
    pub const CAPABILITY_MASK: usize = 20;
    pub const DIAG_CODE: usize = 24;
    pub const M_KEY_LEASE_PERIOD: usize = 26;
    pub const LOCAL_PORT_NUM: usize = 28;
    pub const LINK_WIDTH_ENABLED: usize = 29;
    pub const LINK_WIDTH_SUPPORTED: usize = 30;
    pub const LINK_WIDTH_ACTIVE: usize = 31;
    pub const LINK_SPEED_SUPPORTED: Bits = Bits::new(32, 4, 4);
    pub const PORT_STATE: Bits = Bits::new(32, 0, 4);
    pub const PORT_PHYSICAL_STATE: Bits = Bits::new(33, 4, 4);
    pub const LINK_DOWN_DEFAULT_STATE: Bits = Bits::new(33, 0, 4);
    pub const M_KEY_PROTECT_BITS: Bits = Bits::new(34, 6, 2);
    pub const LMC: Bits = Bits::new(34, 0, 3);
    pub const LINK_SPEED_ACTIVE: Bits = Bits::new(35, 4, 4);
    pub const LINK_SPEED_ENABLED: Bits = Bits::new(35, 0, 4);
    pub const NEIGHBOR_MTU: Bits = Bits::new(36, 4, 4);
    pub const MASTER_SM_SL: Bits = Bits::new(36, 0, 4);
    pub const VL_CAP: Bits = Bits::new(37, 4, 4);
    pub const INIT_TYPE: Bits = Bits::new(37, 0, 4);
    pub const VL_HIGH_LIMIT: usize = 38;
    pub const VL_ARBITRATION_HIGH_CAP: usize = 39;
    pub const VL_ARBITRATION_LOW_CAP: usize = 40;
    pub const INIT_TYPE_REPLY: Bits = Bits::new(41, 4, 4);
    pub const MTU_CAP: Bits = Bits::new(41, 0, 4);
    pub const VL_STALL_COUNT: Bits = Bits::new(42, 5, 3);
    pub const HOQ_LIFE: Bits = Bits::new(42, 0, 5);
    pub const OPERATIONAL_VLS: Bits = Bits::new(43, 4, 4);
    pub const PARTITION_ENFORCEMENT_INBOUND: Bits = Bits::new(43, 3, 1);
    pub const PARTITION_ENFORCEMENT_OUTBOUND: Bits = Bits::new(43, 2, 1);
    pub const FILTER_RAW_INBOUND: Bits = Bits::new(43, 1, 1);
    pub const FILTER_RAW_OUTBOUND: Bits = Bits::new(43, 0, 1);
    pub const M_KEY_VIOLATIONS: usize = 44;
    pub const P_KEY_VIOLATIONS: usize = 46;
    pub const Q_KEY_VIOLATIONS: usize = 48;
    pub const GUID_CAP: usize = 50;
    pub const CLIENT_REREGISTER: Bits = Bits::new(51, 7, 1);
    pub const MULTICAST_PKEY_TRAP_SUPPRESSION_ENABLED: Bits = Bits::new(51, 5, 2);
    pub const SUBNET_TIMEOUT: Bits = Bits::new(51, 0, 5);
    pub const RESP_TIME_VALUE: Bits = Bits::new(52, 0, 5);
    pub const LOCAL_PHY_ERRORS: Bits = Bits::new(53, 4, 4);
    pub const OVERRUN_ERRORS: Bits = Bits::new(53, 0, 4);
    pub const MAX_CREDIT_HINT: usize = 54;
    pub const LINK_SPEED_EXT_ACTIVE2: Bits = Bits::new(56, 5, 2);
    pub const LINK_SPEED_EXT_SUPPORTED2: Bits = Bits::new(56, 3, 2);
    pub const LINK_SPEED_EXT_ENABLED2: Bits = Bits::new(56, 0, 3);
    pub const LINK_ROUND_TRIP_LATENCY: usize = 57;
    pub const CAPABILITY_MASK2: usize = 60;
    pub const LINK_SPEED_EXT_ACTIVE: Bits = Bits::new(62, 4, 4);
    pub const LINK_SPEED_EXT_SUPPORTED: Bits = Bits::new(62, 0, 4);
    pub const LINK_SPEED_EXT_ENABLED: Bits = Bits::new(63, 0, 5);
    pub const LEN: usize = 64;
}

open_enum! {
    /// PortInfo.PortState (IBA 14.2.5.6): the logical link state. On Set, 0
    /// asks for no change; 5 (ActiveDefer, IBA 1.3) reads like Active for
    /// most purposes but is set by the port itself.
    PortState: u8 {
        NoChange = 0,
        Down = 1,
        Init = 2,
        Armed = 3,
        Active = 4,
        ActiveDefer = 5,
    }
}

open_enum! {
    /// PortInfo.PortPhysicalState (IBA 14.2.5.6). On Set only NoChange,
    /// Sleep, Polling and Disabled are meaningful (Polling re-enables a
    /// disabled port, Disabled takes the link down).
    PhysState: u8 {
        NoChange = 0,
        Sleep = 1,
        Polling = 2,
        Disabled = 3,
        PortConfigurationTraining = 4,
        LinkUp = 5,
        LinkErrorRecovery = 6,
        PhyTest = 7,
    }
}

open_enum! {
    /// PortInfo.LinkDownDefaultState (IBA 14.2.5.6). On Set, 0 = no change.
    LinkDownDefaultState: u8 {
        NoChange = 0,
        Sleep = 1,
        Polling = 2,
    }
}

/// PortInfo.CapabilityMask bits (IBA 14.2.5.6). Bits 0 and 13
/// are reserved.
#[allow(non_snake_case)]
pub mod CapabilityMask {
    pub const IS_SM: u32 = 1 << 1;
    pub const IS_NOTICE_SUPPORTED: u32 = 1 << 2;
    pub const IS_TRAP_SUPPORTED: u32 = 1 << 3;
    pub const IS_OPTIONAL_IPD_SUPPORTED: u32 = 1 << 4;
    pub const IS_AUTOMATIC_MIGRATION_SUPPORTED: u32 = 1 << 5;
    pub const IS_SL_MAPPING_SUPPORTED: u32 = 1 << 6;
    pub const IS_M_KEY_NVRAM: u32 = 1 << 7;
    pub const IS_P_KEY_NVRAM: u32 = 1 << 8;
    pub const IS_LED_INFO_SUPPORTED: u32 = 1 << 9;
    pub const IS_SM_DISABLED: u32 = 1 << 10;
    pub const IS_SYSTEM_IMAGE_GUID_SUPPORTED: u32 = 1 << 11;
    pub const IS_P_KEY_SWITCH_EXTERNAL_PORT_TRAP_SUPPORTED: u32 = 1 << 12;
    pub const IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 14;
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u32 = 1 << 15;
    pub const IS_COMMUNICATION_MANAGEMENT_SUPPORTED: u32 = 1 << 16;
    pub const IS_SNMP_TUNNELING_SUPPORTED: u32 = 1 << 17;
    pub const IS_REINIT_SUPPORTED: u32 = 1 << 18;
    pub const IS_DEVICE_MANAGEMENT_SUPPORTED: u32 = 1 << 19;
    pub const IS_VENDOR_CLASS_SUPPORTED: u32 = 1 << 20;
    pub const IS_DR_NOTICE_SUPPORTED: u32 = 1 << 21;
    pub const IS_CAPABILITY_MASK_NOTICE_SUPPORTED: u32 = 1 << 22;
    pub const IS_BOOT_MANAGEMENT_SUPPORTED: u32 = 1 << 23;
    pub const IS_LINK_ROUND_TRIP_LATENCY_SUPPORTED: u32 = 1 << 24;
    pub const IS_CLIENT_REREGISTRATION_SUPPORTED: u32 = 1 << 25;
    pub const IS_OTHER_LOCAL_CHANGES_NOTICE_SUPPORTED: u32 = 1 << 26;
    pub const IS_LINK_SPEED_WIDTH_PAIRS_TABLE_SUPPORTED: u32 = 1 << 27;
    pub const IS_VENDOR_SPECIFIC_MADS_TABLE_SUPPORTED: u32 = 1 << 28;
    pub const IS_MCAST_PKEY_TRAP_SUPPRESSION_SUPPORTED: u32 = 1 << 29;
    pub const IS_MULTICAST_FDB_TOP_SUPPORTED: u32 = 1 << 30;
    pub const IS_HIERARCHY_INFO_SUPPORTED: u32 = 1 << 31;

    /// Every named bit with its spec name, lowest bit first (for logs).
    pub const NAMES: &[(u32, &str)] = &[
        (IS_SM, "IsSM"),
        (IS_NOTICE_SUPPORTED, "IsNoticeSupported"),
        (IS_TRAP_SUPPORTED, "IsTrapSupported"),
        (IS_OPTIONAL_IPD_SUPPORTED, "IsOptionalIPDSupported"),
        (IS_AUTOMATIC_MIGRATION_SUPPORTED, "IsAutomaticMigrationSupported"),
        (IS_SL_MAPPING_SUPPORTED, "IsSLMappingSupported"),
        (IS_M_KEY_NVRAM, "IsMKeyNVRAM"),
        (IS_P_KEY_NVRAM, "IsPKeyNVRAM"),
        (IS_LED_INFO_SUPPORTED, "IsLEDInfoSupported"),
        (IS_SM_DISABLED, "IsSMdisabled"),
        (IS_SYSTEM_IMAGE_GUID_SUPPORTED, "IsSystemImageGUIDSupported"),
        (IS_P_KEY_SWITCH_EXTERNAL_PORT_TRAP_SUPPORTED, "IsPKeySwitchExternalPortTrapSupported"),
        (IS_EXTENDED_SPEEDS_SUPPORTED, "IsExtendedSpeedsSupported"),
        (IS_CAPABILITY_MASK2_SUPPORTED, "IsCapabilityMask2Supported"),
        (IS_COMMUNICATION_MANAGEMENT_SUPPORTED, "IsCommunicationManagementSupported"),
        (IS_SNMP_TUNNELING_SUPPORTED, "IsSNMPTunnelingSupported"),
        (IS_REINIT_SUPPORTED, "IsReinitSupported"),
        (IS_DEVICE_MANAGEMENT_SUPPORTED, "IsDeviceManagementSupported"),
        (IS_VENDOR_CLASS_SUPPORTED, "IsVendorClassSupported"),
        (IS_DR_NOTICE_SUPPORTED, "IsDRNoticeSupported"),
        (IS_CAPABILITY_MASK_NOTICE_SUPPORTED, "IsCapabilityMaskNoticeSupported"),
        (IS_BOOT_MANAGEMENT_SUPPORTED, "IsBootManagementSupported"),
        (IS_LINK_ROUND_TRIP_LATENCY_SUPPORTED, "IsLinkRoundTripLatencySupported"),
        (IS_CLIENT_REREGISTRATION_SUPPORTED, "IsClientReregistrationSupported"),
        (IS_OTHER_LOCAL_CHANGES_NOTICE_SUPPORTED, "IsOtherLocalChangesNoticeSupported"),
        (IS_LINK_SPEED_WIDTH_PAIRS_TABLE_SUPPORTED, "IsLinkSpeedWidthPairsTableSupported"),
        (IS_VENDOR_SPECIFIC_MADS_TABLE_SUPPORTED, "IsVendorSpecificMadsTableSupported"),
        (IS_MCAST_PKEY_TRAP_SUPPRESSION_SUPPORTED, "IsMcastPkeyTrapSuppressionSupported"),
        (IS_MULTICAST_FDB_TOP_SUPPORTED, "IsMulticastFDBTopSupported"),
        (IS_HIERARCHY_INFO_SUPPORTED, "IsHierarchyInfoSupported"),
    ];
}

/// PortInfo.CapabilityMask2 bits (IBA 14.2.5.6; later bits from
/// IBA 1.4/1.5 annexes as libibmad names them).
#[allow(non_snake_case)]
pub mod CapabilityMask2 {
    pub const IS_SET_NODE_DESCRIPTION_SUPPORTED: u16 = 1 << 0;
    pub const IS_PORT_INFO_EXTENDED_SUPPORTED: u16 = 1 << 1;
    pub const IS_VIRTUALIZATION_SUPPORTED: u16 = 1 << 2;
    pub const IS_SWITCH_PORT_STATE_TABLE_SUPPORTED: u16 = 1 << 3;
    pub const IS_LINK_WIDTH_2X_SUPPORTED: u16 = 1 << 4;
    pub const IS_LINK_SPEED_HDR_SUPPORTED: u16 = 1 << 5;
    pub const IS_M_KEY_PROTECT_BITS_EXT_SUPPORTED: u16 = 1 << 6;
    pub const IS_ENHANCED_TRAP128_SUPPORTED: u16 = 1 << 7;
    pub const IS_PARTITION_TOP_SUPPORTED: u16 = 1 << 8;
    pub const IS_ENHANCED_QOS_ARBITER_SUPPORTED: u16 = 1 << 9;
    pub const IS_LINK_SPEED_NDR_SUPPORTED: u16 = 1 << 10;
    /// The LinkSpeedExt*2 fields (byte 56) are valid (IBA 1.7, XDR).
    pub const IS_EXTENDED_SPEEDS_2_SUPPORTED: u16 = 1 << 11;
    pub const IS_LINK_SPEED_XDR_SUPPORTED: u16 = 1 << 12;
}

/// LinkWidth{Enabled,Supported,Active} bits (IBA 14.2.5.6).
pub mod link_width {
    pub const X1: u8 = 1;
    pub const X4: u8 = 2;
    pub const X8: u8 = 4;
    pub const X12: u8 = 8;
    /// IBA 1.4 (CapabilityMask2.IsLinkWidth2xSupported).
    pub const X2: u8 = 16;
    /// LinkWidthEnabled on Set: enable every supported width.
    pub const SET_TO_SUPPORTED: u8 = 255;
    /// LinkWidthEnabled on Set: leave unchanged.
    pub const NO_CHANGE: u8 = 0;

    /// Lanes of an active width code, or None for anything but one known bit.
    pub fn lanes(active: u8) -> Option<u32> {
        match active {
            X1 => Some(1),
            X2 => Some(2),
            X4 => Some(4),
            X8 => Some(8),
            X12 => Some(12),
            _ => None,
        }
    }

    /// The conventional name ("4X") of an active width code.
    pub fn name(active: u8) -> Option<&'static str> {
        match active {
            X1 => Some("1X"),
            X2 => Some("2X"),
            X4 => Some("4X"),
            X8 => Some("8X"),
            X12 => Some("12X"),
            _ => None,
        }
    }
}

/// LinkSpeed{Supported,Active,Enabled} bits (IBA 14.2.5.6): per-lane
/// signalling rates up to QDR.
pub mod link_speed {
    /// 2.5 Gb/s.
    pub const SDR: u8 = 1;
    /// 5.0 Gb/s.
    pub const DDR: u8 = 2;
    /// 10.0 Gb/s.
    pub const QDR: u8 = 4;
    /// LinkSpeedEnabled on Set: leave unchanged.
    pub const NO_CHANGE: u8 = 0;
    /// LinkSpeedEnabled on Set: enable every supported speed.
    pub const SET_TO_SUPPORTED: u8 = 15;

    /// Per-lane data rate in Mb/s after 8b/10b coding (SDR 2000 .. QDR 8000).
    pub fn lane_mbps(active: u8) -> Option<u32> {
        match active {
            SDR => Some(2000),
            DDR => Some(4000),
            QDR => Some(8000),
            _ => None,
        }
    }

    pub fn name(active: u8) -> Option<&'static str> {
        match active {
            SDR => Some("SDR"),
            DDR => Some("DDR"),
            QDR => Some("QDR"),
            _ => None,
        }
    }
}

/// LinkSpeedExt{Active,Supported,Enabled} bits (IBA 14.2.5.6, extended
/// speeds; valid when CapabilityMask.IsExtendedSpeedsSupported).
pub mod link_speed_ext {
    /// 14.0625 Gb/s.
    pub const FDR: u8 = 1;
    /// 25.78125 Gb/s.
    pub const EDR: u8 = 2;
    /// 53.125 Gb/s.
    pub const HDR: u8 = 4;
    /// 106.25 Gb/s.
    pub const NDR: u8 = 8;
    /// LinkSpeedExtEnabled on Set: leave unchanged.
    pub const NO_CHANGE: u8 = 0;
    /// LinkSpeedExtEnabled on Set: disable all extended speeds.
    pub const DISABLE: u8 = 30;
    /// LinkSpeedExtEnabled on Set: enable every supported extended speed.
    pub const SET_TO_SUPPORTED: u8 = 31;

    /// Per-lane data rate in Mb/s after 64b/66b coding (rounded), as used
    /// for path rates.
    pub fn lane_mbps(active: u8) -> Option<u32> {
        match active {
            FDR => Some(13_640),
            EDR => Some(25_000),
            HDR => Some(50_000),
            NDR => Some(100_000),
            _ => None,
        }
    }

    pub fn name(active: u8) -> Option<&'static str> {
        match active {
            FDR => Some("FDR"),
            EDR => Some("EDR"),
            HDR => Some("HDR"),
            NDR => Some("NDR"),
            _ => None,
        }
    }
}

/// LinkSpeedExt{Active,Supported,Enabled}2 (byte 56, IBA 1.7; valid when
/// `CapabilityMask2::IS_EXTENDED_SPEEDS_2_SUPPORTED`): the speeds beyond
/// NDR. The layout and the one code are as infiniband-diags decodes them
/// (libibmad `LinkSpeedExtActive2` at bit 449, width 2).
pub mod link_speed_ext2 {
    /// 212.5 Gb/s per lane.
    pub const XDR: u8 = 1;

    /// Per-lane data rate in Mb/s (200 Gb/s after coding).
    pub fn lane_mbps(active: u8) -> Option<u32> {
        match active {
            XDR => Some(200_000),
            _ => None,
        }
    }

    pub fn name(active: u8) -> Option<&'static str> {
        match active {
            XDR => Some("XDR"),
            _ => None,
        }
    }
}

/// MTU codes (IBA 9.6.3 / 14.2.5.6 NeighborMTU, MTUCap): 1..=5 mean
/// 256..=4096 bytes.
pub mod mtu {
    pub const MTU_256: u8 = 1;
    pub const MTU_512: u8 = 2;
    pub const MTU_1024: u8 = 3;
    pub const MTU_2048: u8 = 4;
    pub const MTU_4096: u8 = 5;

    /// Bytes of an MTU code, None for reserved codes.
    pub fn to_bytes(code: u8) -> Option<u32> {
        match code {
            1..=5 => Some(128 << code),
            _ => None,
        }
    }

    /// The code of an exact MTU size, None for any other size.
    pub fn from_bytes(bytes: u32) -> Option<u8> {
        (1..=5).find(|&c| 128u32 << c == bytes)
    }

    /// The MTU a port carries: the smaller of MTUCap and the NeighborMTU the
    /// SM set (the one the port enforces), a reserved code counting as 256.
    pub fn carried(pi: &super::PortInfoRepr) -> u8 {
        let known = |c: u8| if to_bytes(c).is_some() { c } else { MTU_256 };
        known(pi.mtu_cap).min(known(pi.neighbor_mtu))
    }
}

/// Bit 31 of a SubnSet(PortInfo) AttributeModifier: the SM handles the
/// extended speed fields.
pub const ATTR_MOD_SM_SUPPORTS_EXTENDED_SPEEDS: u32 = 1 << 31;

/// The PortInfo AttributeModifier for `port`; `ext_speeds` sets bit 31 (on
/// Set only, see the module docs).
pub fn attribute_modifier(port: u8, ext_speeds: bool) -> u32 {
    port as u32 | if ext_speeds { ATTR_MOD_SM_SUPPORTS_EXTENDED_SPEEDS } else { 0 }
}

attribute_view! {
    /// A zero-copy view of a PortInfo attribute (64 bytes).
    PortInfo, PortInfoRepr, "PortInfo", field::LEN, AttributeId::PortInfo
}

impl<T: AsRef<[u8]>> PortInfo<T> {
    /// Bytes 0-7: the M_Key protecting this port's SM attributes (IBA 14.2.4).
    pub fn m_key(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::M_KEY)
    }
    /// Bytes 8-15: the subnet prefix, the upper 64 bits of the port's GIDs.
    pub fn gid_prefix(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::GID_PREFIX)
    }
    /// Bytes 16-17: base LID of the port (for a switch: of port 0).
    pub fn lid(&self) -> Lid {
        Lid(be::u16(self.buffer.as_ref(), field::LID))
    }
    /// Bytes 18-19: LID of the master SM this port reports traps to.
    pub fn master_sm_lid(&self) -> Lid {
        Lid(be::u16(self.buffer.as_ref(), field::MASTER_SM_LID))
    }
    /// Bytes 20-23: supported optional features; bits in [`CapabilityMask`].
    pub fn capability_mask(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::CAPABILITY_MASK)
    }
    /// Bytes 24-25: health of the port (IBA 14.2.5.6.1); 0 means ready.
    pub fn diag_code(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DIAG_CODE)
    }
    /// Bytes 26-27: seconds the M_Key protection lasts without SM contact; 0 is forever.
    pub fn m_key_lease_period(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::M_KEY_LEASE_PERIOD)
    }
    /// Byte 28: the port the SMP arrived on.
    pub fn local_port_num(&self) -> u8 {
        self.buffer.as_ref()[field::LOCAL_PORT_NUM]
    }
    /// Byte 29: enabled widths, a [`link_width`] mask. On Set: 0 no change, 255 = set to LinkWidthSupported.
    pub fn link_width_enabled(&self) -> u8 {
        self.buffer.as_ref()[field::LINK_WIDTH_ENABLED]
    }
    /// Byte 30: supported widths, a [`link_width`] mask.
    pub fn link_width_supported(&self) -> u8 {
        self.buffer.as_ref()[field::LINK_WIDTH_SUPPORTED]
    }
    /// Byte 31: the negotiated width, one [`link_width`] bit.
    pub fn link_width_active(&self) -> u8 {
        self.buffer.as_ref()[field::LINK_WIDTH_ACTIVE]
    }
    /// Byte 32 bits 7-4: supported speeds, a [`link_speed`] mask.
    pub fn link_speed_supported(&self) -> u8 {
        field::LINK_SPEED_SUPPORTED.get(self.buffer.as_ref())
    }
    /// Byte 32 bits 3-0: logical port state. On Set, 0 = no change.
    pub fn port_state(&self) -> PortState {
        field::PORT_STATE.get(self.buffer.as_ref()).into()
    }
    /// Byte 33 bits 7-4: physical port state. On Set, 0 = no change.
    pub fn port_physical_state(&self) -> PhysState {
        field::PORT_PHYSICAL_STATE.get(self.buffer.as_ref()).into()
    }
    /// Byte 33 bits 3-0: the physical state to return to on link down. On Set, 0 = no change.
    pub fn link_down_default_state(&self) -> LinkDownDefaultState {
        field::LINK_DOWN_DEFAULT_STATE.get(self.buffer.as_ref()).into()
    }
    /// Byte 34 bits 7-6: M_Key protection level 0-3 (IBA 14.2.4.1).
    pub fn m_key_protect_bits(&self) -> u8 {
        field::M_KEY_PROTECT_BITS.get(self.buffer.as_ref())
    }
    /// Byte 34 bits 2-0: LID mask control; the port answers 2^LMC LIDs. (Bits 5-3 are reserved.)
    pub fn lmc(&self) -> u8 {
        field::LMC.get(self.buffer.as_ref())
    }
    /// Byte 35 bits 7-4: the negotiated speed, one [`link_speed`] bit; see also `link_speed_ext_active`.
    pub fn link_speed_active(&self) -> u8 {
        field::LINK_SPEED_ACTIVE.get(self.buffer.as_ref())
    }
    /// Byte 35 bits 3-0: enabled speeds. On Set: 0 no change, 15 = set to LinkSpeedSupported.
    pub fn link_speed_enabled(&self) -> u8 {
        field::LINK_SPEED_ENABLED.get(self.buffer.as_ref())
    }
    /// Byte 36 bits 7-4: active MTU code (1-5 = 256-4096 bytes, see [`mtu`]).
    pub fn neighbor_mtu(&self) -> u8 {
        field::NEIGHBOR_MTU.get(self.buffer.as_ref())
    }
    /// Byte 36 bits 3-0: SL to use towards the master SM.
    pub fn master_sm_sl(&self) -> u8 {
        field::MASTER_SM_SL.get(self.buffer.as_ref())
    }
    /// Byte 37 bits 7-4: data VLs supported: 1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7, 5 = VL0-14.
    pub fn vl_cap(&self) -> u8 {
        field::VL_CAP.get(self.buffer.as_ref())
    }
    /// Byte 37 bits 3-0: what the SM asks the port to keep across init (IBA 14.4.6).
    pub fn init_type(&self) -> u8 {
        field::INIT_TYPE.get(self.buffer.as_ref())
    }
    /// Byte 38: high-priority VL arbitration limit, in 4 KiB units.
    pub fn vl_high_limit(&self) -> u8 {
        self.buffer.as_ref()[field::VL_HIGH_LIMIT]
    }
    /// Byte 39: entries in the high-priority VL arbitration table.
    pub fn vl_arbitration_high_cap(&self) -> u8 {
        self.buffer.as_ref()[field::VL_ARBITRATION_HIGH_CAP]
    }
    /// Byte 40: entries in the low-priority VL arbitration table.
    pub fn vl_arbitration_low_cap(&self) -> u8 {
        self.buffer.as_ref()[field::VL_ARBITRATION_LOW_CAP]
    }
    /// Byte 41 bits 7-4: what the port kept across its last init.
    pub fn init_type_reply(&self) -> u8 {
        field::INIT_TYPE_REPLY.get(self.buffer.as_ref())
    }
    /// Byte 41 bits 3-0: largest MTU code the port supports (see [`mtu`]).
    pub fn mtu_cap(&self) -> u8 {
        field::MTU_CAP.get(self.buffer.as_ref())
    }
    /// Byte 42 bits 7-5: packets dropped at HOQ timeout before a VL enters the stalled state.
    pub fn vl_stall_count(&self) -> u8 {
        field::VL_STALL_COUNT.get(self.buffer.as_ref())
    }
    /// Byte 42 bits 4-0: head-of-queue lifetime, 4.096 us * 2^value (>= 20 is infinite).
    pub fn hoq_life(&self) -> u8 {
        field::HOQ_LIFE.get(self.buffer.as_ref())
    }
    /// Byte 43 bits 7-4: VLs in use, coded like `vl_cap`. On Set, 0 = no change.
    pub fn operational_vls(&self) -> u8 {
        field::OPERATIONAL_VLS.get(self.buffer.as_ref())
    }
    /// Byte 43 bit 3: the switch port checks P_Keys of arriving packets.
    pub fn partition_enforcement_inbound(&self) -> bool {
        field::PARTITION_ENFORCEMENT_INBOUND.get_bool(self.buffer.as_ref())
    }
    /// Byte 43 bit 2: the switch port checks P_Keys of departing packets.
    pub fn partition_enforcement_outbound(&self) -> bool {
        field::PARTITION_ENFORCEMENT_OUTBOUND.get_bool(self.buffer.as_ref())
    }
    /// Byte 43 bit 1: the switch port drops arriving raw packets.
    pub fn filter_raw_inbound(&self) -> bool {
        field::FILTER_RAW_INBOUND.get_bool(self.buffer.as_ref())
    }
    /// Byte 43 bit 0: the switch port drops departing raw packets.
    pub fn filter_raw_outbound(&self) -> bool {
        field::FILTER_RAW_OUTBOUND.get_bool(self.buffer.as_ref())
    }
    /// Bytes 44-45: SMPs refused for a bad M_Key (saturates).
    pub fn m_key_violations(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::M_KEY_VIOLATIONS)
    }
    /// Bytes 46-47: packets refused for a bad P_Key (saturates).
    pub fn p_key_violations(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::P_KEY_VIOLATIONS)
    }
    /// Bytes 48-49: datagrams refused for a bad Q_Key (saturates).
    pub fn q_key_violations(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::Q_KEY_VIOLATIONS)
    }
    /// Byte 50: GUIDInfo entries of this port.
    pub fn guid_cap(&self) -> u8 {
        self.buffer.as_ref()[field::GUID_CAP]
    }
    /// Byte 51 bit 7: on Set, asks the port's clients to re-register with the SA (IBA 14.4.11).
    pub fn client_reregister(&self) -> bool {
        field::CLIENT_REREGISTER.get_bool(self.buffer.as_ref())
    }
    /// Byte 51 bits 6-5: suppression of multicast P_Key violation traps (IBA 1.3).
    pub fn multicast_pkey_trap_suppression_enabled(&self) -> u8 {
        field::MULTICAST_PKEY_TRAP_SUPPRESSION_ENABLED.get(self.buffer.as_ref())
    }
    /// Byte 51 bits 4-0: subnet propagation delay, 4.096 us * 2^value.
    pub fn subnet_timeout(&self) -> u8 {
        field::SUBNET_TIMEOUT.get(self.buffer.as_ref())
    }
    /// Byte 52 bits 4-0: the port's response time, 4.096 us * 2^value. (Bits 7-5 are reserved.)
    pub fn resp_time_value(&self) -> u8 {
        field::RESP_TIME_VALUE.get(self.buffer.as_ref())
    }
    /// Byte 53 bits 7-4: local physical error threshold.
    pub fn local_phy_errors(&self) -> u8 {
        field::LOCAL_PHY_ERRORS.get(self.buffer.as_ref())
    }
    /// Byte 53 bits 3-0: buffer overrun error threshold.
    pub fn overrun_errors(&self) -> u8 {
        field::OVERRUN_ERRORS.get(self.buffer.as_ref())
    }
    /// Bytes 54-55: credits (64-byte units) the port needs to reach full bandwidth.
    pub fn max_credit_hint(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::MAX_CREDIT_HINT)
    }
    /// Byte 56 bits 6-5: the negotiated speed beyond NDR, one [`link_speed_ext2`] code; 0 = none. (Bit 7 is reserved.)
    pub fn link_speed_ext_active2(&self) -> u8 {
        field::LINK_SPEED_EXT_ACTIVE2.get(self.buffer.as_ref())
    }
    /// Byte 56 bits 4-3: supported speeds beyond NDR, a [`link_speed_ext2`] mask.
    pub fn link_speed_ext_supported2(&self) -> u8 {
        field::LINK_SPEED_EXT_SUPPORTED2.get(self.buffer.as_ref())
    }
    /// Byte 56 bits 2-0: enabled speeds beyond NDR (raw; a Set that writes
    /// back what was read changes nothing).
    pub fn link_speed_ext_enabled2(&self) -> u8 {
        field::LINK_SPEED_EXT_ENABLED2.get(self.buffer.as_ref())
    }
    /// Bytes 57-59: measured round trip in ns (24 bits).
    pub fn link_round_trip_latency(&self) -> u32 {
        be::u24(self.buffer.as_ref(), field::LINK_ROUND_TRIP_LATENCY)
    }
    /// Bytes 60-61: more optional features, valid when `CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED`; bits in [`CapabilityMask2`].
    pub fn capability_mask2(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CAPABILITY_MASK2)
    }
    /// Byte 62 bits 7-4: the negotiated extended speed, one [`link_speed_ext`] bit; 0 = none (use `link_speed_active`).
    pub fn link_speed_ext_active(&self) -> u8 {
        field::LINK_SPEED_EXT_ACTIVE.get(self.buffer.as_ref())
    }
    /// Byte 62 bits 3-0: supported extended speeds, a [`link_speed_ext`] mask.
    pub fn link_speed_ext_supported(&self) -> u8 {
        field::LINK_SPEED_EXT_SUPPORTED.get(self.buffer.as_ref())
    }
    /// Byte 63 bits 4-0: enabled extended speeds. On Set: 0 no change, 30 = disable extended speeds, 31 = set to LinkSpeedExtSupported. (Bits 7-5 are reserved.)
    pub fn link_speed_ext_enabled(&self) -> u8 {
        field::LINK_SPEED_EXT_ENABLED.get(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PortInfo<T> {
    pub fn set_m_key(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::M_KEY, v);
    }
    pub fn set_gid_prefix(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::GID_PREFIX, v);
    }
    pub fn set_lid(&mut self, v: Lid) {
        be::set_u16(self.buffer.as_mut(), field::LID, v.0);
    }
    pub fn set_master_sm_lid(&mut self, v: Lid) {
        be::set_u16(self.buffer.as_mut(), field::MASTER_SM_LID, v.0);
    }
    pub fn set_capability_mask(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::CAPABILITY_MASK, v);
    }
    pub fn set_diag_code(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DIAG_CODE, v);
    }
    pub fn set_m_key_lease_period(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::M_KEY_LEASE_PERIOD, v);
    }
    pub fn set_local_port_num(&mut self, v: u8) {
        self.buffer.as_mut()[field::LOCAL_PORT_NUM] = v;
    }
    pub fn set_link_width_enabled(&mut self, v: u8) {
        self.buffer.as_mut()[field::LINK_WIDTH_ENABLED] = v;
    }
    pub fn set_link_width_supported(&mut self, v: u8) {
        self.buffer.as_mut()[field::LINK_WIDTH_SUPPORTED] = v;
    }
    pub fn set_link_width_active(&mut self, v: u8) {
        self.buffer.as_mut()[field::LINK_WIDTH_ACTIVE] = v;
    }
    pub fn set_link_speed_supported(&mut self, v: u8) {
        field::LINK_SPEED_SUPPORTED.set(self.buffer.as_mut(), v);
    }
    pub fn set_port_state(&mut self, v: PortState) {
        field::PORT_STATE.set(self.buffer.as_mut(), v.into());
    }
    pub fn set_port_physical_state(&mut self, v: PhysState) {
        field::PORT_PHYSICAL_STATE.set(self.buffer.as_mut(), v.into());
    }
    pub fn set_link_down_default_state(&mut self, v: LinkDownDefaultState) {
        field::LINK_DOWN_DEFAULT_STATE.set(self.buffer.as_mut(), v.into());
    }
    pub fn set_m_key_protect_bits(&mut self, v: u8) {
        field::M_KEY_PROTECT_BITS.set(self.buffer.as_mut(), v);
    }
    pub fn set_lmc(&mut self, v: u8) {
        field::LMC.set(self.buffer.as_mut(), v);
    }
    pub fn set_link_speed_active(&mut self, v: u8) {
        field::LINK_SPEED_ACTIVE.set(self.buffer.as_mut(), v);
    }
    pub fn set_link_speed_enabled(&mut self, v: u8) {
        field::LINK_SPEED_ENABLED.set(self.buffer.as_mut(), v);
    }
    pub fn set_neighbor_mtu(&mut self, v: u8) {
        field::NEIGHBOR_MTU.set(self.buffer.as_mut(), v);
    }
    pub fn set_master_sm_sl(&mut self, v: u8) {
        field::MASTER_SM_SL.set(self.buffer.as_mut(), v);
    }
    pub fn set_vl_cap(&mut self, v: u8) {
        field::VL_CAP.set(self.buffer.as_mut(), v);
    }
    pub fn set_init_type(&mut self, v: u8) {
        field::INIT_TYPE.set(self.buffer.as_mut(), v);
    }
    pub fn set_vl_high_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::VL_HIGH_LIMIT] = v;
    }
    pub fn set_vl_arbitration_high_cap(&mut self, v: u8) {
        self.buffer.as_mut()[field::VL_ARBITRATION_HIGH_CAP] = v;
    }
    pub fn set_vl_arbitration_low_cap(&mut self, v: u8) {
        self.buffer.as_mut()[field::VL_ARBITRATION_LOW_CAP] = v;
    }
    pub fn set_init_type_reply(&mut self, v: u8) {
        field::INIT_TYPE_REPLY.set(self.buffer.as_mut(), v);
    }
    pub fn set_mtu_cap(&mut self, v: u8) {
        field::MTU_CAP.set(self.buffer.as_mut(), v);
    }
    pub fn set_vl_stall_count(&mut self, v: u8) {
        field::VL_STALL_COUNT.set(self.buffer.as_mut(), v);
    }
    pub fn set_hoq_life(&mut self, v: u8) {
        field::HOQ_LIFE.set(self.buffer.as_mut(), v);
    }
    pub fn set_operational_vls(&mut self, v: u8) {
        field::OPERATIONAL_VLS.set(self.buffer.as_mut(), v);
    }
    pub fn set_partition_enforcement_inbound(&mut self, v: bool) {
        field::PARTITION_ENFORCEMENT_INBOUND.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_partition_enforcement_outbound(&mut self, v: bool) {
        field::PARTITION_ENFORCEMENT_OUTBOUND.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_filter_raw_inbound(&mut self, v: bool) {
        field::FILTER_RAW_INBOUND.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_filter_raw_outbound(&mut self, v: bool) {
        field::FILTER_RAW_OUTBOUND.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_m_key_violations(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::M_KEY_VIOLATIONS, v);
    }
    pub fn set_p_key_violations(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::P_KEY_VIOLATIONS, v);
    }
    pub fn set_q_key_violations(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::Q_KEY_VIOLATIONS, v);
    }
    pub fn set_guid_cap(&mut self, v: u8) {
        self.buffer.as_mut()[field::GUID_CAP] = v;
    }
    pub fn set_client_reregister(&mut self, v: bool) {
        field::CLIENT_REREGISTER.set_bool(self.buffer.as_mut(), v);
    }
    pub fn set_multicast_pkey_trap_suppression_enabled(&mut self, v: u8) {
        field::MULTICAST_PKEY_TRAP_SUPPRESSION_ENABLED.set(self.buffer.as_mut(), v);
    }
    pub fn set_subnet_timeout(&mut self, v: u8) {
        field::SUBNET_TIMEOUT.set(self.buffer.as_mut(), v);
    }
    pub fn set_resp_time_value(&mut self, v: u8) {
        field::RESP_TIME_VALUE.set(self.buffer.as_mut(), v);
    }
    pub fn set_local_phy_errors(&mut self, v: u8) {
        field::LOCAL_PHY_ERRORS.set(self.buffer.as_mut(), v);
    }
    pub fn set_overrun_errors(&mut self, v: u8) {
        field::OVERRUN_ERRORS.set(self.buffer.as_mut(), v);
    }
    pub fn set_max_credit_hint(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::MAX_CREDIT_HINT, v);
    }
    pub fn set_link_speed_ext_active2(&mut self, v: u8) {
        field::LINK_SPEED_EXT_ACTIVE2.set(self.buffer.as_mut(), v);
    }
    pub fn set_link_speed_ext_supported2(&mut self, v: u8) {
        field::LINK_SPEED_EXT_SUPPORTED2.set(self.buffer.as_mut(), v);
    }
    pub fn set_link_speed_ext_enabled2(&mut self, v: u8) {
        field::LINK_SPEED_EXT_ENABLED2.set(self.buffer.as_mut(), v);
    }
    pub fn set_link_round_trip_latency(&mut self, v: u32) {
        be::set_u24(self.buffer.as_mut(), field::LINK_ROUND_TRIP_LATENCY, v);
    }
    pub fn set_capability_mask2(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::CAPABILITY_MASK2, v);
    }
    pub fn set_link_speed_ext_active(&mut self, v: u8) {
        field::LINK_SPEED_EXT_ACTIVE.set(self.buffer.as_mut(), v);
    }
    pub fn set_link_speed_ext_supported(&mut self, v: u8) {
        field::LINK_SPEED_EXT_SUPPORTED.set(self.buffer.as_mut(), v);
    }
    pub fn set_link_speed_ext_enabled(&mut self, v: u8) {
        field::LINK_SPEED_EXT_ENABLED.set(self.buffer.as_mut(), v);
    }
}

/// The owned form of PortInfo: every field of IBA Table 157. Sub-byte
/// fields hold their raw codes; emit keeps only the bits the field has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortInfoRepr {
    pub m_key: u64,
    pub gid_prefix: u64,
    pub lid: Lid,
    pub master_sm_lid: Lid,
    pub capability_mask: u32,
    pub diag_code: u16,
    pub m_key_lease_period: u16,
    pub local_port_num: u8,
    pub link_width_enabled: u8,
    pub link_width_supported: u8,
    pub link_width_active: u8,
    pub link_speed_supported: u8,
    pub port_state: PortState,
    pub port_physical_state: PhysState,
    pub link_down_default_state: LinkDownDefaultState,
    pub m_key_protect_bits: u8,
    pub lmc: u8,
    pub link_speed_active: u8,
    pub link_speed_enabled: u8,
    pub neighbor_mtu: u8,
    pub master_sm_sl: u8,
    pub vl_cap: u8,
    pub init_type: u8,
    pub vl_high_limit: u8,
    pub vl_arbitration_high_cap: u8,
    pub vl_arbitration_low_cap: u8,
    pub init_type_reply: u8,
    pub mtu_cap: u8,
    pub vl_stall_count: u8,
    pub hoq_life: u8,
    pub operational_vls: u8,
    pub partition_enforcement_inbound: bool,
    pub partition_enforcement_outbound: bool,
    pub filter_raw_inbound: bool,
    pub filter_raw_outbound: bool,
    pub m_key_violations: u16,
    pub p_key_violations: u16,
    pub q_key_violations: u16,
    pub guid_cap: u8,
    pub client_reregister: bool,
    pub multicast_pkey_trap_suppression_enabled: u8,
    pub subnet_timeout: u8,
    pub resp_time_value: u8,
    pub local_phy_errors: u8,
    pub overrun_errors: u8,
    pub max_credit_hint: u16,
    pub link_speed_ext_active2: u8,
    pub link_speed_ext_supported2: u8,
    pub link_speed_ext_enabled2: u8,
    pub link_round_trip_latency: u32,
    pub capability_mask2: u16,
    pub link_speed_ext_active: u8,
    pub link_speed_ext_supported: u8,
    pub link_speed_ext_enabled: u8,
}

impl PortInfoRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &PortInfo<T>) -> WireResult<Self> {
        Ok(PortInfoRepr {
            m_key: v.m_key(),
            gid_prefix: v.gid_prefix(),
            lid: v.lid(),
            master_sm_lid: v.master_sm_lid(),
            capability_mask: v.capability_mask(),
            diag_code: v.diag_code(),
            m_key_lease_period: v.m_key_lease_period(),
            local_port_num: v.local_port_num(),
            link_width_enabled: v.link_width_enabled(),
            link_width_supported: v.link_width_supported(),
            link_width_active: v.link_width_active(),
            link_speed_supported: v.link_speed_supported(),
            port_state: v.port_state(),
            port_physical_state: v.port_physical_state(),
            link_down_default_state: v.link_down_default_state(),
            m_key_protect_bits: v.m_key_protect_bits(),
            lmc: v.lmc(),
            link_speed_active: v.link_speed_active(),
            link_speed_enabled: v.link_speed_enabled(),
            neighbor_mtu: v.neighbor_mtu(),
            master_sm_sl: v.master_sm_sl(),
            vl_cap: v.vl_cap(),
            init_type: v.init_type(),
            vl_high_limit: v.vl_high_limit(),
            vl_arbitration_high_cap: v.vl_arbitration_high_cap(),
            vl_arbitration_low_cap: v.vl_arbitration_low_cap(),
            init_type_reply: v.init_type_reply(),
            mtu_cap: v.mtu_cap(),
            vl_stall_count: v.vl_stall_count(),
            hoq_life: v.hoq_life(),
            operational_vls: v.operational_vls(),
            partition_enforcement_inbound: v.partition_enforcement_inbound(),
            partition_enforcement_outbound: v.partition_enforcement_outbound(),
            filter_raw_inbound: v.filter_raw_inbound(),
            filter_raw_outbound: v.filter_raw_outbound(),
            m_key_violations: v.m_key_violations(),
            p_key_violations: v.p_key_violations(),
            q_key_violations: v.q_key_violations(),
            guid_cap: v.guid_cap(),
            client_reregister: v.client_reregister(),
            multicast_pkey_trap_suppression_enabled: v.multicast_pkey_trap_suppression_enabled(),
            subnet_timeout: v.subnet_timeout(),
            resp_time_value: v.resp_time_value(),
            local_phy_errors: v.local_phy_errors(),
            overrun_errors: v.overrun_errors(),
            max_credit_hint: v.max_credit_hint(),
            link_speed_ext_active2: v.link_speed_ext_active2(),
            link_speed_ext_supported2: v.link_speed_ext_supported2(),
            link_speed_ext_enabled2: v.link_speed_ext_enabled2(),
            link_round_trip_latency: v.link_round_trip_latency(),
            capability_mask2: v.capability_mask2(),
            link_speed_ext_active: v.link_speed_ext_active(),
            link_speed_ext_supported: v.link_speed_ext_supported(),
            link_speed_ext_enabled: v.link_speed_ext_enabled(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    /// Writes every field; reserved bits are zeroed.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut PortInfo<T>) {
        v.clear();
        v.set_m_key(self.m_key);
        v.set_gid_prefix(self.gid_prefix);
        v.set_lid(self.lid);
        v.set_master_sm_lid(self.master_sm_lid);
        v.set_capability_mask(self.capability_mask);
        v.set_diag_code(self.diag_code);
        v.set_m_key_lease_period(self.m_key_lease_period);
        v.set_local_port_num(self.local_port_num);
        v.set_link_width_enabled(self.link_width_enabled);
        v.set_link_width_supported(self.link_width_supported);
        v.set_link_width_active(self.link_width_active);
        v.set_link_speed_supported(self.link_speed_supported);
        v.set_port_state(self.port_state);
        v.set_port_physical_state(self.port_physical_state);
        v.set_link_down_default_state(self.link_down_default_state);
        v.set_m_key_protect_bits(self.m_key_protect_bits);
        v.set_lmc(self.lmc);
        v.set_link_speed_active(self.link_speed_active);
        v.set_link_speed_enabled(self.link_speed_enabled);
        v.set_neighbor_mtu(self.neighbor_mtu);
        v.set_master_sm_sl(self.master_sm_sl);
        v.set_vl_cap(self.vl_cap);
        v.set_init_type(self.init_type);
        v.set_vl_high_limit(self.vl_high_limit);
        v.set_vl_arbitration_high_cap(self.vl_arbitration_high_cap);
        v.set_vl_arbitration_low_cap(self.vl_arbitration_low_cap);
        v.set_init_type_reply(self.init_type_reply);
        v.set_mtu_cap(self.mtu_cap);
        v.set_vl_stall_count(self.vl_stall_count);
        v.set_hoq_life(self.hoq_life);
        v.set_operational_vls(self.operational_vls);
        v.set_partition_enforcement_inbound(self.partition_enforcement_inbound);
        v.set_partition_enforcement_outbound(self.partition_enforcement_outbound);
        v.set_filter_raw_inbound(self.filter_raw_inbound);
        v.set_filter_raw_outbound(self.filter_raw_outbound);
        v.set_m_key_violations(self.m_key_violations);
        v.set_p_key_violations(self.p_key_violations);
        v.set_q_key_violations(self.q_key_violations);
        v.set_guid_cap(self.guid_cap);
        v.set_client_reregister(self.client_reregister);
        v.set_multicast_pkey_trap_suppression_enabled(self.multicast_pkey_trap_suppression_enabled);
        v.set_subnet_timeout(self.subnet_timeout);
        v.set_resp_time_value(self.resp_time_value);
        v.set_local_phy_errors(self.local_phy_errors);
        v.set_overrun_errors(self.overrun_errors);
        v.set_max_credit_hint(self.max_credit_hint);
        v.set_link_speed_ext_active2(self.link_speed_ext_active2);
        v.set_link_speed_ext_supported2(self.link_speed_ext_supported2);
        v.set_link_speed_ext_enabled2(self.link_speed_ext_enabled2);
        v.set_link_round_trip_latency(self.link_round_trip_latency);
        v.set_capability_mask2(self.capability_mask2);
        v.set_link_speed_ext_active(self.link_speed_ext_active);
        v.set_link_speed_ext_supported(self.link_speed_ext_supported);
        v.set_link_speed_ext_enabled(self.link_speed_ext_enabled);
    }

    pub fn has_capability(&self, bit: u32) -> bool {
        self.capability_mask & bit != 0
    }

    /// Whether the extended speed fields are meaningful for this port.
    pub fn extended_speeds_supported(&self) -> bool {
        self.has_capability(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED)
    }

    /// Whether the speeds-beyond-NDR fields (byte 56) are meaningful: the
    /// port has CapabilityMask2 and sets IsExtendedSpeeds2Supported in it.
    pub fn extended_speeds2_supported(&self) -> bool {
        self.has_capability(CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED)
            && self.capability_mask2 & CapabilityMask2::IS_EXTENDED_SPEEDS_2_SUPPORTED != 0
    }

    /// The active per-lane speed name, preferring the newest field the port
    /// supports and fills in ("XDR", "FDR", "QDR", ...).
    pub fn active_speed_name(&self) -> Option<&'static str> {
        if self.extended_speeds2_supported() && self.link_speed_ext_active2 != 0 {
            link_speed_ext2::name(self.link_speed_ext_active2)
        } else if self.extended_speeds_supported() && self.link_speed_ext_active != 0 {
            link_speed_ext::name(self.link_speed_ext_active)
        } else {
            link_speed::name(self.link_speed_active)
        }
    }

    /// Active data rate of the link in Mb/s (lanes x per-lane rate), if the
    /// width and speed codes are known.
    pub fn active_rate_mbps(&self) -> Option<u32> {
        let lanes = link_width::lanes(self.link_width_active)?;
        let lane = if self.extended_speeds2_supported() && self.link_speed_ext_active2 != 0 {
            link_speed_ext2::lane_mbps(self.link_speed_ext_active2)?
        } else if self.extended_speeds_supported() && self.link_speed_ext_active != 0 {
            link_speed_ext::lane_mbps(self.link_speed_ext_active)?
        } else {
            link_speed::lane_mbps(self.link_speed_active)?
        };
        Some(lanes * lane)
    }

    /// The neighbor MTU in bytes, None for a reserved code.
    pub fn neighbor_mtu_bytes(&self) -> Option<u32> {
        mtu::to_bytes(self.neighbor_mtu)
    }

    /// A copy ready to send as SubnSet: the no-change codes in PortState,
    /// PortPhysicalState, LinkDownDefaultState, LinkSpeedEnabled,
    /// LinkWidthEnabled, LinkSpeedExtEnabled and OperationalVLs, and
    /// ClientReregister cleared, so only fields the caller then assigns take
    /// effect. Writable fields not listed (LID, M_Key, GidPrefix, ...) keep
    /// the read values, which is what a Set wants.
    pub fn for_set(&self) -> Self {
        PortInfoRepr {
            port_state: PortState::NoChange,
            port_physical_state: PhysState::NoChange,
            link_down_default_state: LinkDownDefaultState::NoChange,
            link_speed_enabled: link_speed::NO_CHANGE,
            link_width_enabled: link_width::NO_CHANGE,
            link_speed_ext_enabled: link_speed_ext::NO_CHANGE,
            operational_vls: 0,
            client_reregister: false,
            ..*self
        }
    }
}

impl Default for PortInfoRepr {
    /// All zeros: a SubnSet of it changes no state (every no-change code is 0).
    fn default() -> Self {
        PortInfoRepr::parse_bytes(&[0u8; field::LEN]).expect("64 zero bytes are a PortInfo")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    /// Reserved bits per byte (IBA Table 157): byte 34 bits 5-3, byte 52
    /// bits 7-5, byte 56 bit 7 (the rest of it is IBA 1.7's XDR fields),
    /// byte 63 bits 7-5.
    fn reserved_mask() -> [u8; 64] {
        let mut m = [0u8; 64];
        m[34] = 0x38;
        m[52] = 0xe0;
        m[56] = 0x80;
        m[63] = 0xe0;
        m
    }

    #[test]
    fn hand_built_layout() {
        let mut b = [0u8; 64];
        b[16..18].copy_from_slice(&[0x00, 0x2a]); // LID 42
        b[18..20].copy_from_slice(&[0x00, 0x01]); // SM LID 1
        b[20..24].copy_from_slice(&[0x02, 0x51, 0x08, 0x4a]);
        b[28] = 3;
        b[31] = 2; // 4X
        b[32] = 0x74; // speeds SDR|DDR|QDR, Active
        b[33] = 0x52; // LinkUp, Polling
        b[34] = 0xc7; // protect 3, LMC 7
        b[35] = 0x4f; // QDR active, enabled 15
        b[36] = 0x5a; // MTU 4096, SM SL 10
        b[42] = 0xf3; // stall 7, HOQ 19
        b[43] = 0x4a; // 4 VLs, inbound enforcement, raw inbound filter
        b[51] = 0xf2; // reregister, suppression 3, timeout 18
        b[52] = 0x11;
        b[57..60].copy_from_slice(&[0x12, 0x34, 0x56]);
        b[62] = 0x1f; // FDR active, FDR|EDR|HDR|NDR supported
        b[63] = 0x1e;
        let r = PortInfoRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.lid, Lid(42));
        assert_eq!(r.master_sm_lid, Lid(1));
        assert!(r.has_capability(CapabilityMask::IS_SM));
        assert!(r.has_capability(CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED));
        assert!(!r.extended_speeds_supported());
        assert_eq!(r.local_port_num, 3);
        assert_eq!(r.link_width_active, link_width::X4);
        assert_eq!(r.link_speed_supported, 7);
        assert_eq!(r.port_state, PortState::Active);
        assert_eq!(r.port_physical_state, PhysState::LinkUp);
        assert_eq!(r.link_down_default_state, LinkDownDefaultState::Polling);
        assert_eq!((r.m_key_protect_bits, r.lmc), (3, 7));
        assert_eq!((r.link_speed_active, r.link_speed_enabled), (link_speed::QDR, 15));
        assert_eq!((r.neighbor_mtu, r.master_sm_sl), (mtu::MTU_4096, 10));
        assert_eq!((r.vl_stall_count, r.hoq_life), (7, 19));
        assert_eq!(r.operational_vls, 4);
        assert!(r.partition_enforcement_inbound && !r.partition_enforcement_outbound);
        assert!(r.filter_raw_inbound && !r.filter_raw_outbound);
        assert!(r.client_reregister);
        assert_eq!((r.multicast_pkey_trap_suppression_enabled, r.subnet_timeout), (3, 18));
        assert_eq!((r.resp_time_value, r.link_round_trip_latency), (17, 0x123456));
        assert_eq!((r.link_speed_ext_active, r.link_speed_ext_supported), (link_speed_ext::FDR, 0xf));
        assert_eq!(r.link_speed_ext_enabled, link_speed_ext::DISABLE);
        assert_eq!(r.active_speed_name(), Some("QDR"));
        assert_eq!(r.active_rate_mbps(), Some(32_000));
        assert_eq!(r.to_bytes(), b);
    }

    #[test]
    fn extended_speed_preferred_when_supported() {
        let mut r = PortInfoRepr {
            capability_mask: CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED,
            link_width_active: link_width::X4,
            link_speed_active: link_speed::QDR,
            link_speed_ext_active: link_speed_ext::EDR,
            ..Default::default()
        };
        assert_eq!(r.active_speed_name(), Some("EDR"));
        assert_eq!(r.active_rate_mbps(), Some(100_000));
        r.link_speed_ext_active = 0;
        assert_eq!(r.active_speed_name(), Some("QDR"));
    }

    #[test]
    fn xdr_fields_in_byte_56() {
        // 0x52 = reserved 0, Active2 2, Supported2 2, Enabled2 2: the
        // layout infiniband-diags decodes (bits 6-5, 4-3, 2-0).
        let mut b = [0u8; 64];
        b[56] = 0x52;
        let r = PortInfoRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.link_speed_ext_active2, r.link_speed_ext_supported2, r.link_speed_ext_enabled2), (2, 2, 2));
        assert_eq!(r.link_round_trip_latency, 0, "byte 56 is not part of the latency");
        assert_eq!(r.to_bytes(), b);
        let mut x = PortInfoRepr {
            capability_mask: CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED
                | CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED,
            capability_mask2: CapabilityMask2::IS_EXTENDED_SPEEDS_2_SUPPORTED,
            link_width_active: link_width::X2,
            link_speed_active: link_speed::QDR,
            link_speed_ext_active2: link_speed_ext2::XDR,
            link_speed_ext_supported2: link_speed_ext2::XDR,
            link_round_trip_latency: 0xABCDEF,
            ..Default::default()
        };
        assert_eq!(x.active_speed_name(), Some("XDR"));
        assert_eq!(x.active_rate_mbps(), Some(400_000));
        assert_eq!(x.to_bytes()[56], 0x28);
        assert_eq!(&x.to_bytes()[57..60], &[0xAB, 0xCD, 0xEF]);
        // Without IsExtendedSpeeds2Supported the byte-56 fields mean nothing.
        x.capability_mask2 = 0;
        assert_eq!(x.active_speed_name(), Some("QDR"));
    }

    #[test]
    fn mtu_codes() {
        assert_eq!(mtu::to_bytes(1), Some(256));
        assert_eq!(mtu::to_bytes(5), Some(4096));
        assert_eq!(mtu::to_bytes(0), None);
        assert_eq!(mtu::to_bytes(6), None);
        assert_eq!(mtu::from_bytes(2048), Some(4));
        assert_eq!(mtu::from_bytes(2044), None);
        for c in 1..=5 {
            assert_eq!(mtu::from_bytes(mtu::to_bytes(c).unwrap()), Some(c));
        }
    }

    #[test]
    fn for_set_uses_no_change_codes() {
        let mut b = [0xffu8; 64];
        b[32] = 0x74;
        let s = PortInfoRepr::parse_bytes(&b).unwrap().for_set();
        let w = s.to_bytes();
        assert_eq!(w[32] & 0x0f, 0, "PortState");
        assert_eq!(w[33], 0, "PhysState, LinkDownDefaultState");
        assert_eq!(w[35] & 0x0f, 0, "LinkSpeedEnabled");
        assert_eq!(w[29], 0, "LinkWidthEnabled");
        assert_eq!(w[63], 0, "LinkSpeedExtEnabled");
        assert_eq!(w[43] >> 4, 0, "OperationalVLs");
        assert_eq!(w[51] & 0x80, 0, "ClientReregister");
        assert_eq!(&w[16..18], &[0xff, 0xff], "LID kept");
        assert_eq!(attribute_modifier(3, true), 0x8000_0003);
        assert_eq!(PortInfoRepr::default().to_bytes(), [0u8; 64]);
    }

    #[test]
    fn truncated() {
        for n in [0, 1, 32, 62, 63] {
            assert_eq!(
                PortInfoRepr::parse_bytes(&vec![0u8; n]),
                Err(WireError::Truncated { what: "PortInfo", len: n, need: 64 })
            );
        }
    }

    proptest! {
        /// Any 64 bytes parse, and emit gives them back minus reserved bits;
        /// the Repr survives a second trip unchanged.
        #[test]
        fn round_trip(bytes in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform32(any::<u8>())) {
            let mut b = [0u8; 64];
            b[..32].copy_from_slice(&bytes);
            b[32..].copy_from_slice(&tail);
            let r = PortInfoRepr::parse_bytes(&b).unwrap();
            let out = r.to_bytes();
            let m = reserved_mask();
            for i in 0..64 {
                prop_assert_eq!(out[i], b[i] & !m[i], "byte {}", i);
            }
            prop_assert_eq!(PortInfoRepr::parse_bytes(&out).unwrap(), r);
        }
    }
}
