//! Link generations, PathRecord rate codes and MTU codes: what a port's
//! PortInfo says its link runs at, and how paths compare and combine them.
//!
//! A link's rate is its lanes (LinkWidthActive: 1x, 2x, 4x, 8x, 12x) times
//! the lane speed. The lane speed comes from the newest PortInfo field the
//! port declares valid (IBA 14.2.5.6):
//! - LinkSpeedExtActive2 (byte 56, IBA 1.7) for XDR, valid when
//!   CapabilityMask2.IsExtendedSpeeds2Supported;
//! - LinkSpeedExtActive for FDR, EDR, HDR and NDR, valid when
//!   CapabilityMask.IsExtendedSpeedsSupported;
//! - LinkSpeedActive for SDR, DDR and QDR otherwise. FDR10 is reported here
//!   as QDR (only Mellanox's ExtendedPortInfo tells them apart), so its
//!   rate code is QDR's, as OpenSM's PathRecords say too.
//!
//! A switch declares its capabilities at port 0; its external ports'
//! fields are read with port 0's capability masks (as OpenSM does).
//!
//! PathRecord.Rate codes (IBA 15.2.5.16, Table 209's Rate; values as
//! `ib_types.h` and libibverbs' `ibv_rate` define them) name nominal rates
//! that are not in numeric order: 2 = 2.5, 3 = 10, 4 = 30, 5 = 5, 6 = 20,
//! 7 = 40, 8 = 60, 9 = 80, 10 = 120, 11 = 14, 12 = 56, 13 = 112, 14 = 168,
//! 15 = 25, 16 = 100, 17 = 200, 18 = 300, 19 = 28, 20 = 50, 21 = 400,
//! 22 = 600, 23 = 800, 24 = 1200 Gb/s. The nominal figures mix signalling
//! rates (SDR..QDR, 8b/10b coded) with data rates (FDR and later, 64b/66b
//! and beyond), so codes are compared here by the data rate they carry:
//! 30 Gb/s (12x SDR, 24 Gb/s of data) is slower than 25 (1x EDR). That
//! order is also OpenSM's (`ordered_rates` in osm_helper.c).
//!
//! No code exists above 1200 Gb/s: an 8x or 12x XDR link (1600 and 2400
//! Gb/s) is reported as 1200, the fastest code, which never overstates.

use crate::mad::port_info::{link_speed, link_speed_ext, link_speed_ext2, link_width, CapabilityMask, CapabilityMask2};
use crate::mad::PortInfoRepr;

/// Per-lane speed of a link, slowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LaneSpeed {
    Sdr,
    Ddr,
    Qdr,
    Fdr,
    Edr,
    Hdr,
    Ndr,
    Xdr,
}

impl LaneSpeed {
    /// Data rate of one lane in Mb/s after line coding: 2.5/5/10 Gb/s
    /// signalling at 8b/10b; FDR 14.0625 and EDR 25.78125 at 64b/66b; HDR,
    /// NDR and XDR by the data rates they are sold at.
    pub fn lane_mbps(self) -> u32 {
        match self {
            LaneSpeed::Sdr => 2_000,
            LaneSpeed::Ddr => 4_000,
            LaneSpeed::Qdr => 8_000,
            LaneSpeed::Fdr => 13_636,
            LaneSpeed::Edr => 25_000,
            LaneSpeed::Hdr => 50_000,
            LaneSpeed::Ndr => 100_000,
            LaneSpeed::Xdr => 200_000,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LaneSpeed::Sdr => "SDR",
            LaneSpeed::Ddr => "DDR",
            LaneSpeed::Qdr => "QDR",
            LaneSpeed::Fdr => "FDR",
            LaneSpeed::Edr => "EDR",
            LaneSpeed::Hdr => "HDR",
            LaneSpeed::Ndr => "NDR",
            LaneSpeed::Xdr => "XDR",
        }
    }
}

/// Every rate code with the link it names (lanes, lane speed): the
/// code's data rate is that link's.
const RATES: [(u8, u32, LaneSpeed); 23] = [
    (2, 1, LaneSpeed::Sdr),
    (3, 4, LaneSpeed::Sdr),
    (4, 12, LaneSpeed::Sdr),
    (5, 1, LaneSpeed::Ddr),
    (6, 4, LaneSpeed::Ddr),
    (7, 4, LaneSpeed::Qdr),
    (8, 12, LaneSpeed::Ddr),
    (9, 8, LaneSpeed::Qdr),
    (10, 12, LaneSpeed::Qdr),
    (11, 1, LaneSpeed::Fdr),
    (12, 4, LaneSpeed::Fdr),
    (13, 8, LaneSpeed::Fdr),
    (14, 12, LaneSpeed::Fdr),
    (15, 1, LaneSpeed::Edr),
    (16, 4, LaneSpeed::Edr),
    (17, 8, LaneSpeed::Edr),
    (18, 12, LaneSpeed::Edr),
    (19, 2, LaneSpeed::Fdr),
    (20, 1, LaneSpeed::Hdr),
    (21, 8, LaneSpeed::Hdr),
    (22, 12, LaneSpeed::Hdr),
    (23, 8, LaneSpeed::Ndr),
    (24, 12, LaneSpeed::Ndr),
];

/// The lowest and highest rate codes.
pub const RATE_MIN: u8 = 2;
pub const RATE_MAX: u8 = 24;

/// MTU codes 1..=5 are 256..=4096 bytes (IBA 9.6.3).
pub const MTU_MIN: u8 = 1;
pub const MTU_MAX: u8 = 5;

/// Whether `code` is a PathRecord rate code.
pub fn is_rate(code: u8) -> bool {
    (RATE_MIN..=RATE_MAX).contains(&code)
}

/// Whether `code` is an MTU code.
pub fn is_mtu(code: u8) -> bool {
    (MTU_MIN..=MTU_MAX).contains(&code)
}

/// The data rate a rate code carries, in Mb/s; None for a non-code.
pub fn rate_mbps(code: u8) -> Option<u32> {
    RATES.iter().find(|r| r.0 == code).map(|&(_, lanes, speed)| lanes * speed.lane_mbps())
}

/// Orders two rate codes by the data they carry (non-codes first).
pub fn cmp_rates(a: u8, b: u8) -> std::cmp::Ordering {
    rate_mbps(a).unwrap_or(0).cmp(&rate_mbps(b).unwrap_or(0))
}

/// The slower of two rate codes.
pub fn slower(a: u8, b: u8) -> u8 {
    if cmp_rates(a, b).is_le() {
        a
    } else {
        b
    }
}

/// The rate code of a link of `lanes` lanes at `speed`: the fastest code
/// not faster than the link (exactly the link's for every generation and
/// width but 8x and 12x XDR, which no code reaches).
pub fn rate_code(lanes: u32, speed: LaneSpeed) -> u8 {
    fastest_code_within(lanes * speed.lane_mbps(), |_| true).unwrap_or(RATE_MIN)
}

/// The fastest code carrying at most `mbps` that `ok` accepts.
fn fastest_code_within(mbps: u32, ok: impl Fn(u8) -> bool) -> Option<u8> {
    RATES
        .iter()
        .map(|&(code, lanes, speed)| (code, lanes * speed.lane_mbps()))
        .filter(|&(code, rate)| rate <= mbps && ok(code))
        .max_by_key(|&(_, rate)| rate)
        .map(|(code, _)| code)
}

/// The fastest code strictly slower than `code`, None below the slowest.
pub fn rate_below(code: u8) -> Option<u8> {
    let mbps = rate_mbps(code)?;
    fastest_code_within(mbps.checked_sub(1)?, |_| true)
}

/// The lane speed a port's PortInfo reports; `caps` is the PortInfo whose
/// capability masks speak for it (port 0 of a switch, the port itself
/// otherwise). A field with no known code falls back to the older field,
/// and an unknown LinkSpeedActive to SDR: a path is never made faster
/// than what is certain.
pub fn lane_speed(pi: &PortInfoRepr, caps: &PortInfoRepr) -> LaneSpeed {
    let mask2 =
        if caps.has_capability(CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED) { caps.capability_mask2 } else { 0 };
    if mask2 & CapabilityMask2::IS_EXTENDED_SPEEDS_2_SUPPORTED != 0 && pi.link_speed_ext_active2 == link_speed_ext2::XDR
    {
        return LaneSpeed::Xdr;
    }
    if caps.extended_speeds_supported() {
        match pi.link_speed_ext_active {
            link_speed_ext::FDR => return LaneSpeed::Fdr,
            link_speed_ext::EDR => return LaneSpeed::Edr,
            link_speed_ext::HDR => return LaneSpeed::Hdr,
            link_speed_ext::NDR => return LaneSpeed::Ndr,
            _ => {}
        }
    }
    match pi.link_speed_active {
        link_speed::DDR => LaneSpeed::Ddr,
        link_speed::QDR => LaneSpeed::Qdr,
        _ => LaneSpeed::Sdr,
    }
}

/// Lanes of a port's active width; an unknown code counts as 1x.
pub fn lanes(pi: &PortInfoRepr) -> u32 {
    link_width::lanes(pi.link_width_active).unwrap_or(1)
}

/// The rate code of the link at a port (see [`lane_speed`] for `caps`).
pub fn port_rate(pi: &PortInfoRepr, caps: &PortInfoRepr) -> u8 {
    rate_code(lanes(pi), lane_speed(pi, caps))
}

/// The MTU a port carries (the partition policy needs it too, so it lives
/// with PortInfo's MTU codes).
pub use crate::mad::port_info::mtu::carried as port_mtu;

/// Whether an end port can be given rate `code` in a PathRecord: codes
/// came with the link generations, and a port that does not declare one
/// (through `caps`, as in [`lane_speed`]) may not know the codes it
/// brought. 2..=10 are IBA 1.0's; 11..=18 came with FDR and EDR (extended
/// speeds); 28 Gb/s needs 2x; 50 needs 2x or HDR; 400 and 600 need HDR or
/// later; 800 and 1200 need NDR or later.
pub fn port_knows_rate(code: u8, caps: &PortInfoRepr) -> bool {
    use CapabilityMask2 as C2;
    let mask2 =
        if caps.has_capability(CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED) { caps.capability_mask2 } else { 0 };
    let has = |bits: u16| mask2 & bits != 0;
    let hdr_or_later =
        C2::IS_LINK_SPEED_HDR_SUPPORTED | C2::IS_LINK_SPEED_NDR_SUPPORTED | C2::IS_LINK_SPEED_XDR_SUPPORTED;
    let ndr_or_later = C2::IS_LINK_SPEED_NDR_SUPPORTED | C2::IS_LINK_SPEED_XDR_SUPPORTED;
    match code {
        2..=10 => true,
        11..=18 => caps.extended_speeds_supported(),
        19 => has(C2::IS_LINK_WIDTH_2X_SUPPORTED),
        20 => has(C2::IS_LINK_WIDTH_2X_SUPPORTED | C2::IS_LINK_SPEED_HDR_SUPPORTED),
        21 | 22 => has(hdr_or_later),
        23 | 24 => has(ndr_or_later),
        _ => false,
    }
}

/// `code` lowered, when an end port would not know it, to the fastest code
/// it knows that is not faster (OpenSM does the same per code in
/// `ib_path_rate_2x_hdr_fixups`).
pub fn fit_rate_to_port(code: u8, caps: &PortInfoRepr) -> u8 {
    if port_knows_rate(code, caps) {
        return code;
    }
    let mbps = rate_mbps(code).unwrap_or(0);
    fastest_code_within(mbps, |c| port_knows_rate(c, caps)).unwrap_or(RATE_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::port_info::mtu;

    const W1: u8 = link_width::X1;
    const W2: u8 = link_width::X2;
    const W4: u8 = link_width::X4;
    const W8: u8 = link_width::X8;
    const W12: u8 = link_width::X12;

    /// A port at `width` running `speed`, declaring what it must.
    fn port(width: u8, speed: LaneSpeed) -> PortInfoRepr {
        let mut pi = PortInfoRepr {
            capability_mask: CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED
                | CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED,
            capability_mask2: CapabilityMask2::IS_EXTENDED_SPEEDS_2_SUPPORTED,
            link_width_active: width,
            link_speed_active: link_speed::QDR,
            ..Default::default()
        };
        match speed {
            LaneSpeed::Sdr => pi.link_speed_active = link_speed::SDR,
            LaneSpeed::Ddr => pi.link_speed_active = link_speed::DDR,
            LaneSpeed::Qdr => {}
            LaneSpeed::Fdr => pi.link_speed_ext_active = link_speed_ext::FDR,
            LaneSpeed::Edr => pi.link_speed_ext_active = link_speed_ext::EDR,
            LaneSpeed::Hdr => pi.link_speed_ext_active = link_speed_ext::HDR,
            LaneSpeed::Ndr => pi.link_speed_ext_active = link_speed_ext::NDR,
            LaneSpeed::Xdr => pi.link_speed_ext_active2 = link_speed_ext2::XDR,
        }
        pi
    }

    /// Every generation at every width against the IBA's rate codes,
    /// written out (not derived) from the code table in the module docs:
    /// (speed, [1x, 2x, 4x, 8x, 12x]).
    #[test]
    fn every_generation_and_width_gets_its_iba_rate_code() {
        let table: [(LaneSpeed, [u8; 5]); 8] = [
            (LaneSpeed::Sdr, [2, 5, 3, 6, 4]),      // 2.5, 5, 10, 20, 30
            (LaneSpeed::Ddr, [5, 3, 6, 7, 8]),      // 5, 10, 20, 40, 60
            (LaneSpeed::Qdr, [3, 6, 7, 9, 10]),     // 10, 20, 40, 80, 120
            (LaneSpeed::Fdr, [11, 19, 12, 13, 14]), // 14, 28, 56, 112, 168
            (LaneSpeed::Edr, [15, 20, 16, 17, 18]), // 25, 50, 100, 200, 300
            (LaneSpeed::Hdr, [20, 16, 17, 21, 22]), // 50, 100, 200, 400, 600
            (LaneSpeed::Ndr, [16, 17, 21, 23, 24]), // 100, 200, 400, 800, 1200
            (LaneSpeed::Xdr, [17, 21, 23, 24, 24]), // 200, 400, 800, (1600, 2400: none above 1200)
        ];
        for (speed, codes) in table {
            for (width, want) in [W1, W2, W4, W8, W12].into_iter().zip(codes) {
                let pi = port(width, speed);
                assert_eq!(lane_speed(&pi, &pi), speed, "{speed:?} width {width}");
                assert_eq!(port_rate(&pi, &pi), want, "{} width code {width}", speed.name());
                assert_eq!(rate_code(link_width::lanes(width).unwrap(), speed), want);
            }
        }
        // FDR10 is QDR in PortInfo: 4x FDR10 answers like 4x QDR, 40 Gb/s.
        let fdr10 = port(W4, LaneSpeed::Qdr);
        assert_eq!(port_rate(&fdr10, &fdr10), 7);
    }

    #[test]
    fn rates_order_by_the_data_they_carry() {
        // Slowest to fastest by data rate (OpenSM's order too).
        let order = [2, 5, 3, 11, 6, 4, 15, 19, 7, 8, 20, 12, 9, 10, 16, 13, 14, 17, 18, 21, 22, 23, 24];
        for w in order.windows(2) {
            assert_eq!(cmp_rates(w[0], w[1]), std::cmp::Ordering::Less, "{} < {}", w[0], w[1]);
            assert_eq!(rate_below(w[1]), Some(w[0]), "the code just below {}", w[1]);
            assert_eq!(slower(w[1], w[0]), w[0]);
        }
        assert_eq!(rate_below(2), None);
        assert_eq!(rate_mbps(25), None);
        assert_eq!(rate_mbps(1), None);
        assert!(is_rate(2) && is_rate(24) && !is_rate(0) && !is_rate(1) && !is_rate(25));
    }

    #[test]
    fn fields_are_read_only_when_the_port_declares_them() {
        // Extended speeds without IsExtendedSpeedsSupported: the base field.
        let mut pi = port(W4, LaneSpeed::Edr);
        pi.capability_mask &= !CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED;
        assert_eq!(lane_speed(&pi, &pi), LaneSpeed::Qdr);
        // XDR without IsExtendedSpeeds2Supported: falls back to LinkSpeedExtActive.
        let mut pi = port(W2, LaneSpeed::Xdr);
        pi.link_speed_ext_active = link_speed_ext::NDR;
        pi.capability_mask2 = 0;
        assert_eq!(lane_speed(&pi, &pi), LaneSpeed::Ndr);
        // A switch external port read with port 0's capabilities.
        let ext = PortInfoRepr { capability_mask: 0, ..port(W4, LaneSpeed::Hdr) };
        let port0 = port(W4, LaneSpeed::Sdr);
        assert_eq!(port_rate(&ext, &port0), 17);
        assert_eq!(port_rate(&ext, &ext), 7, "without capabilities HDR is invisible");
        // Unknown codes never make a path faster.
        let odd = PortInfoRepr { link_width_active: 3, link_speed_active: 3, ..port(W4, LaneSpeed::Sdr) };
        assert_eq!(port_rate(&odd, &odd), 2);
    }

    #[test]
    fn mtu_is_the_smaller_of_cap_and_neighbor() {
        let pi = PortInfoRepr { mtu_cap: mtu::MTU_4096, neighbor_mtu: mtu::MTU_2048, ..Default::default() };
        assert_eq!(port_mtu(&pi), mtu::MTU_2048);
        let pi = PortInfoRepr { mtu_cap: mtu::MTU_1024, neighbor_mtu: mtu::MTU_4096, ..Default::default() };
        assert_eq!(port_mtu(&pi), mtu::MTU_1024);
        let pi = PortInfoRepr { mtu_cap: mtu::MTU_4096, neighbor_mtu: 0, ..Default::default() };
        assert_eq!(port_mtu(&pi), mtu::MTU_256, "a reserved code counts as 256");
    }

    #[test]
    fn rates_an_end_port_does_not_know_are_lowered() {
        let old = PortInfoRepr::default();
        let ext_only = PortInfoRepr { capability_mask: CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED, ..old };
        let with2 = |mask2: u16| PortInfoRepr {
            capability_mask: CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED
                | CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED,
            capability_mask2: mask2,
            ..old
        };
        use CapabilityMask2 as C2;
        // 28 Gb/s (2x FDR) to a port without 2x: 25 when it knows EDR codes.
        assert_eq!(fit_rate_to_port(19, &ext_only), 15);
        assert_eq!(fit_rate_to_port(19, &with2(C2::IS_LINK_WIDTH_2X_SUPPORTED)), 19);
        // Without extended speeds, the fastest IBA 1.0 code below 28: 30 (24 Gb/s of data).
        assert_eq!(fit_rate_to_port(19, &old), 4);
        // 400 (NDR 4x) to an EDR-era port: 300; to an HDR port: kept.
        assert_eq!(fit_rate_to_port(21, &ext_only), 18);
        assert_eq!(fit_rate_to_port(21, &with2(C2::IS_LINK_SPEED_HDR_SUPPORTED)), 21);
        // 800 to an HDR port: 600; to an NDR or XDR one: kept.
        assert_eq!(fit_rate_to_port(23, &with2(C2::IS_LINK_SPEED_HDR_SUPPORTED)), 22);
        assert_eq!(fit_rate_to_port(23, &with2(C2::IS_LINK_SPEED_NDR_SUPPORTED)), 23);
        assert_eq!(fit_rate_to_port(24, &with2(C2::IS_LINK_SPEED_XDR_SUPPORTED)), 24);
        // Old codes are never touched.
        for code in 2..=10 {
            assert_eq!(fit_rate_to_port(code, &old), code);
        }
    }
}
