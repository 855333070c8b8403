//! PathRecord (IBA 15.2.5.16, Table 209), 64 bytes:
//! ```text
//!  0: ServiceID (64)
//!  8: DGID (128)
//! 24: SGID (128)
//! 40: DLID (16)              | SLID (16)
//! 44: RawTraffic (1) | Reserved (3) | FlowLabel (20) | HopLimit (8)
//! 48: TClass (8) | Reversible (1) NumbPath (7) | P_Key (16)
//! 52: QosClass (12) SL (4)   | MTUSelector (2) MTU (6) | RateSelector (2) Rate (6)
//! 56: PacketLifeTimeSelector (2) PacketLifeTime (6) | Preference (8) | Reserved (48)
//! ```

use super::{gid_at, join_selector, split_selector, Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, WireResult};

/// PathRecord's size on the wire.
pub const PATH_RECORD_LEN: usize = 64;

/// PathRecord component mask bits (IBA 15.2.5.16, the order of Table 209).
pub mod path_mask {
    pub const SERVICE_ID: u64 = 0b11;
    pub const DGID: u64 = 1 << 2;
    pub const SGID: u64 = 1 << 3;
    pub const DLID: u64 = 1 << 4;
    pub const SLID: u64 = 1 << 5;
    pub const RAW_TRAFFIC: u64 = 1 << 6;
    pub const FLOW_LABEL: u64 = 1 << 8;
    pub const HOP_LIMIT: u64 = 1 << 9;
    pub const TCLASS: u64 = 1 << 10;
    pub const REVERSIBLE: u64 = 1 << 11;
    pub const NUMB_PATH: u64 = 1 << 12;
    pub const PKEY: u64 = 1 << 13;
    pub const QOS_CLASS: u64 = 1 << 14;
    pub const SL: u64 = 1 << 15;
    pub const MTU_SELECTOR: u64 = 1 << 16;
    pub const MTU: u64 = 1 << 17;
    pub const RATE_SELECTOR: u64 = 1 << 18;
    pub const RATE: u64 = 1 << 19;
    pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 20;
    pub const PACKET_LIFE_TIME: u64 = 1 << 21;
    pub const PREFERENCE: u64 = 1 << 22;
}

mod pr {
    pub const SERVICE_ID: usize = 0;
    pub const DGID: usize = 8;
    pub const SGID: usize = 24;
    pub const DLID: usize = 40;
    pub const SLID: usize = 42;
    pub const FLOW_HOP: usize = 44;
    pub const TCLASS: usize = 48;
    pub const REVERSIBLE_NUMB_PATH: usize = 49;
    pub const PKEY: usize = 50;
    pub const QOS_SL: usize = 52;
    pub const MTU: usize = 54;
    pub const RATE: usize = 55;
    pub const PACKET_LIFE_TIME: usize = 56;
    pub const PREFERENCE: usize = 57;
}

/// A zero-copy view of one PathRecord.
#[derive(Debug, Clone, Copy)]
pub struct PathRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PathRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("PathRecord", buffer.as_ref(), PATH_RECORD_LEN)?;
        Ok(PathRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn service_id(&self) -> u64 {
        be::u64(self.b(), pr::SERVICE_ID)
    }
    pub fn dgid(&self) -> [u8; 16] {
        gid_at(self.b(), pr::DGID)
    }
    pub fn sgid(&self) -> [u8; 16] {
        gid_at(self.b(), pr::SGID)
    }
    pub fn dlid(&self) -> u16 {
        be::u16(self.b(), pr::DLID)
    }
    pub fn slid(&self) -> u16 {
        be::u16(self.b(), pr::SLID)
    }
    pub fn raw_traffic(&self) -> bool {
        self.b()[pr::FLOW_HOP] & 0x80 != 0
    }
    pub fn flow_label(&self) -> u32 {
        (be::u32(self.b(), pr::FLOW_HOP) >> 8) & 0x000F_FFFF
    }
    pub fn hop_limit(&self) -> u8 {
        self.b()[pr::FLOW_HOP + 3]
    }
    pub fn tclass(&self) -> u8 {
        self.b()[pr::TCLASS]
    }
    pub fn reversible(&self) -> bool {
        self.b()[pr::REVERSIBLE_NUMB_PATH] & 0x80 != 0
    }
    pub fn numb_path(&self) -> u8 {
        self.b()[pr::REVERSIBLE_NUMB_PATH] & 0x7F
    }
    pub fn pkey(&self) -> u16 {
        be::u16(self.b(), pr::PKEY)
    }
    pub fn qos_class(&self) -> u16 {
        be::u16(self.b(), pr::QOS_SL) >> 4
    }
    pub fn sl(&self) -> u8 {
        self.b()[pr::QOS_SL + 1] & 0x0F
    }
    /// (selector, MTU code)
    pub fn mtu(&self) -> (u8, u8) {
        split_selector(self.b()[pr::MTU])
    }
    /// (selector, rate code)
    pub fn rate(&self) -> (u8, u8) {
        split_selector(self.b()[pr::RATE])
    }
    /// (selector, PacketLifeTime)
    pub fn packet_life_time(&self) -> (u8, u8) {
        split_selector(self.b()[pr::PACKET_LIFE_TIME])
    }
    pub fn preference(&self) -> u8 {
        self.b()[pr::PREFERENCE]
    }
}

/// The owned form of a PathRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PathRecordRepr {
    pub service_id: u64,
    pub dgid: [u8; 16],
    pub sgid: [u8; 16],
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: bool,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub tclass: u8,
    pub reversible: bool,
    pub numb_path: u8,
    pub pkey: u16,
    pub qos_class: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

impl PathRecordRepr {
    /// Every field is defined for any bit pattern, so parsing cannot fail
    /// once the view exists.
    pub fn parse<T: AsRef<[u8]>>(p: &PathRecord<T>) -> WireResult<Self> {
        let (mtu_selector, mtu) = p.mtu();
        let (rate_selector, rate) = p.rate();
        let (packet_life_time_selector, packet_life_time) = p.packet_life_time();
        Ok(PathRecordRepr {
            service_id: p.service_id(),
            dgid: p.dgid(),
            sgid: p.sgid(),
            dlid: p.dlid(),
            slid: p.slid(),
            raw_traffic: p.raw_traffic(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            tclass: p.tclass(),
            reversible: p.reversible(),
            numb_path: p.numb_path(),
            pkey: p.pkey(),
            qos_class: p.qos_class(),
            sl: p.sl(),
            mtu_selector,
            mtu,
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            preference: p.preference(),
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&PathRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        PATH_RECORD_LEN
    }

    /// Writes all 64 bytes (reserved ones zero). Values wider than their
    /// field (flow label > 20 bits, QosClass > 12, SL > 4, 6-bit codes) are
    /// cut to the field.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("PathRecord", out, PATH_RECORD_LEN)?;
        let out = &mut out[..PATH_RECORD_LEN];
        out.fill(0);
        be::set_u64(out, pr::SERVICE_ID, self.service_id);
        out[pr::DGID..pr::DGID + 16].copy_from_slice(&self.dgid);
        out[pr::SGID..pr::SGID + 16].copy_from_slice(&self.sgid);
        be::set_u16(out, pr::DLID, self.dlid);
        be::set_u16(out, pr::SLID, self.slid);
        let flow = u32::from(self.raw_traffic) << 31 | (self.flow_label & 0x000F_FFFF) << 8 | u32::from(self.hop_limit);
        be::set_u32(out, pr::FLOW_HOP, flow);
        out[pr::TCLASS] = self.tclass;
        out[pr::REVERSIBLE_NUMB_PATH] = u8::from(self.reversible) << 7 | (self.numb_path & 0x7F);
        be::set_u16(out, pr::PKEY, self.pkey);
        be::set_u16(out, pr::QOS_SL, (self.qos_class & 0x0FFF) << 4 | u16::from(self.sl & 0x0F));
        out[pr::MTU] = join_selector(self.mtu_selector, self.mtu);
        out[pr::RATE] = join_selector(self.rate_selector, self.rate);
        out[pr::PACKET_LIFE_TIME] = join_selector(self.packet_life_time_selector, self.packet_life_time);
        out[pr::PREFERENCE] = self.preference;
        Ok(())
    }
}

impl SaRecord for PathRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::PathRecord;
    const LEN: usize = PATH_RECORD_LEN;
    /// Table 209's fields in order; ServiceID is two components (its top
    /// 8 bits and low 56), as the IBA 1.2 mask numbers it.
    const COMPONENTS: &'static [Component] = &[
        Component::at(0, 0, 8),
        Component::at(1, 0, 56),
        Component::bytes(8, 16),
        Component::bytes(24, 16),
        Component::bytes(40, 2),
        Component::bytes(42, 2),
        Component::at(44, 0, 1),
        Component::at(44, 1, 3),
        Component::at(44, 4, 20),
        Component::bytes(47, 1),
        Component::bytes(48, 1),
        Component::at(49, 0, 1),
        Component::at(49, 1, 7),
        Component::bytes(50, 2),
        Component::at(52, 0, 12),
        Component::at(53, 4, 4),
        Component::at(54, 0, 2),
        Component::at(54, 2, 6),
        Component::at(55, 0, 2),
        Component::at(55, 2, 6),
        Component::at(56, 0, 2),
        Component::at(56, 2, 6),
        Component::bytes(57, 1),
        Component::bytes(58, 6),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        PathRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        PathRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The PathRecord OpenSM 3.3.23 answered on ibsim (torus2d:4x4, dfsssp)
    // to `saquery --src-to-dst 1:5`, as saquery printed it: dgid
    // fe80::10:3, sgid fe80::10:1, dlid 5, slid 1, num_path_revers 0x80,
    // pkey 0xffff, sl 1, mtu 0x84, rate 0x83, pkt_life 0x92.
    fn answered() -> [u8; 64] {
        let mut b = [0u8; 64];
        b[8..10].copy_from_slice(&[0xfe, 0x80]);
        b[22..24].copy_from_slice(&[0x00, 0x03]);
        b[20..22].copy_from_slice(&[0x00, 0x10]);
        b[24..26].copy_from_slice(&[0xfe, 0x80]);
        b[36..38].copy_from_slice(&[0x00, 0x10]);
        b[38..40].copy_from_slice(&[0x00, 0x01]);
        b[40..44].copy_from_slice(&[0, 5, 0, 1]);
        b[49] = 0x80;
        b[50..52].copy_from_slice(&[0xff, 0xff]);
        b[53] = 0x01;
        b[54] = 0x84;
        b[55] = 0x83;
        b[56] = 0x92;
        b
    }

    #[test]
    fn parses_what_opensm_answered_and_emits_it_back() {
        let b = answered();
        let r = PathRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!((r.dlid, r.slid, r.sl, r.pkey), (5, 1, 1, 0xffff));
        assert!(r.reversible);
        assert_eq!(r.numb_path, 0);
        assert_eq!((r.mtu_selector, r.mtu), (2, 4), "mtu 0x84 = exactly 2048");
        assert_eq!((r.rate_selector, r.rate), (2, 3));
        assert_eq!((r.packet_life_time_selector, r.packet_life_time), (2, 0x12));
        assert_eq!(r.dgid[15], 3);
        assert_eq!(r.sgid[13], 0x10);
        let mut out = [0xAAu8; 64];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn every_field_round_trips() {
        let r = PathRecordRepr {
            service_id: 0x1122_3344_5566_7788,
            dgid: [1; 16],
            sgid: [2; 16],
            dlid: 0xBFFF,
            slid: 0x0001,
            raw_traffic: true,
            flow_label: 0xF_FFFF,
            hop_limit: 0xFF,
            tclass: 0x12,
            reversible: false,
            numb_path: 0x7F,
            pkey: 0x8001,
            qos_class: 0xABC,
            sl: 15,
            mtu_selector: 3,
            mtu: 5,
            rate_selector: 1,
            rate: 0x3F,
            packet_life_time_selector: 0,
            packet_life_time: 0x3F,
            preference: 9,
        };
        let mut b = [0u8; 64];
        r.emit(&mut b).unwrap();
        assert_eq!(PathRecordRepr::parse_bytes(&b).unwrap(), r);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        use crate::mad::sa::components_match;
        let a = PathRecordRepr { slid: 3, dlid: 9, sl: 2, ..Default::default() };
        let b = PathRecordRepr { slid: 3, dlid: 9, sl: 5, ..Default::default() };
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = PathRecordRepr::COMPONENTS;
        assert!(components_match(c, path_mask::SLID | path_mask::DLID, &qa, &qb));
        assert!(!components_match(c, path_mask::SL, &qa, &qb));
        assert_eq!(c[15], Component::at(53, 4, 4));
    }

    #[test]
    fn short_buffers_are_errors() {
        assert!(PathRecordRepr::parse_bytes(&[0u8; 63]).is_err());
        assert!(PathRecordRepr::default().emit(&mut [0u8; 10]).is_err());
    }
}
