//! What a freshly powered device reports before any SM touched it.
//!
//! The values mirror ibsim 0.10 (Debian's ibsim-utils), read back with
//! `smpdump -D <path> 0x15 <port>` from a fresh `ibsim -s` fabric, so that an
//! SM sees the same fabric in-process and under ibsim. Where ibsim departs
//! from the IBA (it answers nothing for SMInfo or unknown attributes, it
//! returns zeroed MFT blocks for a bad AttributeModifier) the simulator
//! follows the IBA instead; those places say so.

use crate::mad::port_info::{
    link_speed, link_speed_ext, link_speed_ext2, link_width, mtu, CapabilityMask, CapabilityMask2,
};
use crate::mad::{LinkDownDefaultState, PhysState, PortInfoRepr, PortState, SwitchInfoRepr};
use crate::types::Lid;

/// The three kinds of port whose PortInfo differs (ibsim's `smaport`,
/// `swport`/`swport_down`, `hcaport`/`hcaport_down` templates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortKind {
    /// A switch's management port 0 (always Active/LinkUp).
    SwitchManagement,
    /// A switch's external port 1..=N.
    SwitchExternal,
    /// A CA or router port 1..=N.
    EndPort,
    /// Index 0 of a CA or router: no such port, kept so every node's ports
    /// start at `port_base + 0`.
    Absent,
}

/// NodeInfo.Revision of every simulated device (ibsim's value).
pub(crate) const REVISION: u32 = 0xa1;
/// NodeInfo.PartitionCap of a CA or router (ibsim: 64) and of a switch,
/// which applies to its port 0 (ibsim: 8).
pub(crate) const CA_PARTITION_CAP: u16 = 64;
pub(crate) const SWITCH_PARTITION_CAP: u16 = 8;
/// SwitchInfo.PartitionEnforcementCap: P_Key entries per external port.
pub(crate) const SWITCH_PARTITION_ENFORCEMENT_CAP: u16 = 64;
/// ibsim's default MulticastFDBCap.
pub(crate) const MULTICAST_FDB_CAP: u16 = 1024;
/// LinearFDBCap: one entry per unicast LID plus LID 0 (ibsim 0.12 uses the
/// same 48K; 0.10 reports 30720).
pub(crate) const LINEAR_FDB_CAP: u16 = 0xc000;
/// M_KeyLeasePeriod of port 0 and CA ports (ibsim: 4089 s).
const LEASE_PERIOD: u16 = 4089;
/// VLArbitration table capacities (PortInfo.VLArbitrationHigh/LowCap).
pub(crate) const VLARB_CAP: u8 = 8;

/// The default SL-to-VL table: SL n to VL n, SL 15 to VL 7 (ibsim, and
/// OpenSM's default `qos_sl2vl`).
pub(crate) const DEFAULT_SL2VL: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xe7];
/// Default VLArbitration tables as (VL, weight) pairs: high priority gives
/// VL0 weight 4, low priority gives VL1-7 weight 4 (ibsim's defaults,
/// truncated to the capacity of 8 entries).
pub(crate) const DEFAULT_VLARB_HIGH: [[u8; 2]; 8] = [[0, 4], [1, 0], [2, 0], [3, 0], [4, 0], [5, 0], [6, 0], [7, 0]];
pub(crate) const DEFAULT_VLARB_LOW: [[u8; 2]; 8] = [[0, 0], [1, 4], [2, 4], [3, 4], [4, 4], [5, 4], [6, 4], [7, 4]];

/// The highest bit set in `mask`, or `fallback` when none is.
pub(crate) fn highest_bit(mask: u8, fallback: u8) -> u8 {
    if mask == 0 {
        fallback
    } else {
        1 << (7 - mask.leading_zeros())
    }
}

/// The link width a pair of enabled masks trains to (IBA 5.4.2: the widest
/// common width). 2x is encoded as 16 but ranks between 1x and 4x.
pub(crate) fn train_width(a: u8, b: u8) -> u8 {
    let common = a & b;
    [link_width::X12, link_width::X8, link_width::X4, link_width::X2, link_width::X1]
        .into_iter()
        .find(|w| common & w != 0)
        .unwrap_or(link_width::X1)
}

/// The link speed a pair of enabled masks trains to: the fastest common one.
pub(crate) fn train_speed(a: u8, b: u8) -> u8 {
    highest_bit(a & b & 0x7, link_speed::SDR)
}

/// The extended speed a pair of enabled masks trains to, as
/// (LinkSpeedExtActive, LinkSpeedExtActive2): XDR when both ends enable it
/// (then none of FDR..NDR is active), else the fastest common FDR..NDR,
/// else none (the link runs at its LinkSpeedActive).
pub(crate) fn train_ext_speed(a: (u8, u8), b: (u8, u8)) -> (u8, u8) {
    if a.1 & b.1 & link_speed_ext2::XDR != 0 {
        return (0, link_speed_ext2::XDR);
    }
    (highest_bit(a.0 & b.0 & 0xF, 0), 0)
}

/// What a port of a cable running at `ext` (a topology
/// [`LinkSpeedExtCode`](crate::topology::LinkSpeedExtCode)) supports and
/// enables: every extended speed up to it supported, that one enabled, as
/// for the base speed (`s=` in ibsim). An XDR port supports FDR..NDR too
/// and enables only XDR.
pub(crate) fn enable_ext_speed(pi: &mut PortInfoRepr, ext: u8) {
    use crate::topology::{SPEED_EXT_NONE, SPEED_XDR};
    let all = link_speed_ext::FDR | link_speed_ext::EDR | link_speed_ext::HDR | link_speed_ext::NDR;
    match ext {
        SPEED_EXT_NONE => {}
        SPEED_XDR => {
            pi.link_speed_ext_supported |= all;
            pi.link_speed_ext_enabled = 0;
            pi.link_speed_ext_supported2 |= link_speed_ext2::XDR;
            pi.link_speed_ext_enabled2 = link_speed_ext2::XDR;
        }
        e => {
            let e = e & all;
            pi.link_speed_ext_supported |= e | (e.wrapping_sub(1) & all);
            pi.link_speed_ext_enabled = e;
        }
    }
}

/// The capability bits a node advertises for a cable running at `ext`:
/// extended speeds, CapabilityMask2 with the HDR, NDR or XDR bit (and
/// IsExtendedSpeeds2Supported for XDR). A switch advertises at port 0.
pub(crate) fn advertise_ext_speed(pi: &mut PortInfoRepr, ext: u8) {
    use crate::topology::{SPEED_EXT_NONE, SPEED_HDR, SPEED_NDR, SPEED_XDR};
    use CapabilityMask2 as C2;
    if ext == SPEED_EXT_NONE {
        return;
    }
    pi.capability_mask |= CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED | CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED;
    pi.capability_mask2 |= match ext {
        SPEED_HDR => C2::IS_LINK_SPEED_HDR_SUPPORTED,
        SPEED_NDR => C2::IS_LINK_SPEED_HDR_SUPPORTED | C2::IS_LINK_SPEED_NDR_SUPPORTED,
        SPEED_XDR => {
            C2::IS_LINK_SPEED_HDR_SUPPORTED
                | C2::IS_LINK_SPEED_NDR_SUPPORTED
                | C2::IS_EXTENDED_SPEEDS_2_SUPPORTED
                | C2::IS_LINK_SPEED_XDR_SUPPORTED
        }
        _ => 0,
    };
}

/// A fresh PortInfo for a port of `kind`; `cabled` says whether a live
/// cable is attached (then the link trains to Init/LinkUp).
pub(crate) fn fresh_port_info(kind: PortKind, cabled: bool, mtu_cap: Option<u8>) -> PortInfoRepr {
    use CapabilityMask as C;
    let mut pi = PortInfoRepr {
        link_width_enabled: link_width::X4,
        link_width_supported: link_width::X1 | link_width::X4 | link_width::X8 | link_width::X12 | link_width::X2,
        link_width_active: link_width::X4,
        link_speed_supported: link_speed::SDR | link_speed::DDR | link_speed::QDR,
        link_speed_active: link_speed::SDR,
        link_speed_enabled: link_speed::SDR,
        port_state: if cabled { PortState::Init } else { PortState::Down },
        port_physical_state: if cabled { PhysState::LinkUp } else { PhysState::Polling },
        link_down_default_state: LinkDownDefaultState::Polling,
        neighbor_mtu: mtu::MTU_2048,
        vl_cap: 4, // VL0-7
        vl_arbitration_high_cap: VLARB_CAP,
        vl_arbitration_low_cap: VLARB_CAP,
        mtu_cap: mtu_cap.unwrap_or(mtu::MTU_2048),
        vl_stall_count: 7,
        operational_vls: 4,
        ..PortInfoRepr::default()
    };
    let ca_like = C::IS_TRAP_SUPPORTED
        | C::IS_SL_MAPPING_SUPPORTED
        | C::IS_EXTENDED_SPEEDS_SUPPORTED
        | C::IS_CAPABILITY_MASK2_SUPPORTED;
    let mask2 = CapabilityMask2::IS_LINK_WIDTH_2X_SUPPORTED | CapabilityMask2::IS_LINK_SPEED_HDR_SUPPORTED;
    match kind {
        PortKind::SwitchManagement => {
            pi.capability_mask = ca_like;
            pi.m_key_lease_period = LEASE_PERIOD;
            pi.port_state = PortState::Active;
            pi.port_physical_state = PhysState::LinkUp;
            pi.neighbor_mtu = mtu::MTU_256;
            pi.mtu_cap = mtu::MTU_1024;
            pi.vl_stall_count = 0;
            pi.guid_cap = 1;
            pi.subnet_timeout = 31;
            pi.resp_time_value = 8;
            pi.capability_mask2 = mask2;
        }
        PortKind::SwitchExternal => {
            // ibsim's swport_down reports four local physical errors.
            if !cabled {
                pi.local_phy_errors = 4;
            }
        }
        PortKind::EndPort => {
            pi.capability_mask = ca_like
                | C::IS_VENDOR_CLASS_SUPPORTED
                | if cabled { C::IS_CAPABILITY_MASK_NOTICE_SUPPORTED } else { 0 };
            pi.m_key_lease_period = LEASE_PERIOD;
            pi.guid_cap = 32;
            pi.subnet_timeout = 31;
            pi.capability_mask2 = mask2;
        }
        PortKind::Absent => {
            pi.port_state = PortState::Down;
            pi.port_physical_state = PhysState::Disabled;
        }
    }
    pi
}

/// A fresh SwitchInfo: nothing programmed, PortStateChange set (the links
/// just came up).
pub(crate) fn fresh_switch_info(linear_fdb_cap: u16, multicast_fdb_cap: u16, enhanced_port0: bool) -> SwitchInfoRepr {
    SwitchInfoRepr {
        linear_fdb_cap,
        random_fdb_cap: 0,
        multicast_fdb_cap,
        linear_fdb_top: 0,
        default_port: 0,
        default_mcast_primary_port: 0,
        default_mcast_not_primary_port: 0,
        life_time_value: 0,
        port_state_change: true,
        optimized_sl_to_vl_mapping_programming: 0,
        lids_per_port: 0,
        partition_enforcement_cap: SWITCH_PARTITION_ENFORCEMENT_CAP,
        inbound_enforcement_cap: false,
        outbound_enforcement_cap: false,
        filter_raw_inbound_cap: true,
        filter_raw_outbound_cap: true,
        enhanced_port0,
        multicast_fdb_top: 0,
    }
}

/// Whether `lid` falls in the range a port with base `base` and `lmc`
/// answers to (IBA 7.11.1: 2^LMC consecutive LIDs).
pub(crate) fn lid_in_range(base: Lid, lmc: u8, lid: Lid) -> bool {
    base.0 != 0 && lid.0 >= base.0 && (lid.0 as u32) < base.0 as u32 + (1u32 << lmc.min(7))
}
