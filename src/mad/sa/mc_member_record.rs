//! MCMemberRecord (IBA 15.2.5.17, Table 210), 52 bytes: one port's
//! membership in one multicast group, or the group itself. SubnAdmSet
//! joins (and creates), SubnAdmDelete leaves, Get/GetTable query.
//! ```text
//!  0: MGID (128)
//! 16: PortGID (128)
//! 32: Q_Key (32)
//! 36: MLID (16)               | MTUSelector (2) MTU (6) | TClass (8)
//! 40: P_Key (16)              | RateSelector (2) Rate (6) | PacketLifeTimeSelector (2) PacketLifeTime (6)
//! 44: SL (4) | FlowLabel (20) | HopLimit (8)
//! 48: Scope (4) JoinState (4) | ProxyJoin (1) Reserved (23)
//! ```
//!
//! Component mask, one bit per field in order, the reserved tail included
//! (OpenSM's `IB_MCR_COMPMASK_*` and the kernel's `IB_SA_MCMEMBER_REC_*`
//! number them the same): MGID 0, PortGID 1, Q_Key 2, MLID 3, MTUSelector
//! 4, MTU 5, TClass 6, P_Key 7, RateSelector 8, Rate 9,
//! PacketLifeTimeSelector 10, PacketLifeTime 11, SL 12, FlowLabel 13,
//! HopLimit 14, Scope 15, JoinState 16, ProxyJoin 17, Reserved 18.
//!
//! ProxyJoin is the most significant bit of byte 49, as the IBA table
//! places it and the Linux kernel's SA client packs it.

use super::{gid_at, join_selector, split_selector, Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, WireResult};

/// MCMemberRecord's size on the wire.
pub const MC_MEMBER_RECORD_LEN: usize = 52;

const WHAT: &str = "MCMemberRecord";

/// MCMemberRecord component mask bits (IBA 15.2.5.17).
pub mod mc_member_mask {
    pub const MGID: u64 = 1 << 0;
    pub const PORT_GID: u64 = 1 << 1;
    pub const Q_KEY: u64 = 1 << 2;
    pub const MLID: u64 = 1 << 3;
    pub const MTU_SELECTOR: u64 = 1 << 4;
    pub const MTU: u64 = 1 << 5;
    pub const TCLASS: u64 = 1 << 6;
    pub const PKEY: u64 = 1 << 7;
    pub const RATE_SELECTOR: u64 = 1 << 8;
    pub const RATE: u64 = 1 << 9;
    pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 10;
    pub const PACKET_LIFE_TIME: u64 = 1 << 11;
    pub const SL: u64 = 1 << 12;
    pub const FLOW_LABEL: u64 = 1 << 13;
    pub const HOP_LIMIT: u64 = 1 << 14;
    pub const SCOPE: u64 = 1 << 15;
    pub const JOIN_STATE: u64 = 1 << 16;
    pub const PROXY_JOIN: u64 = 1 << 17;
}

/// JoinState bits (IBA 15.2.5.17; SendOnlyFullMember since IBA 1.3,
/// announced by ClassPortInfo.CapabilityMask2 bit 12).
pub mod join_state {
    pub const FULL: u8 = 1 << 0;
    pub const NON_MEMBER: u8 = 1 << 1;
    pub const SEND_ONLY_NON_MEMBER: u8 = 1 << 2;
    pub const SEND_ONLY_FULL: u8 = 1 << 3;
    /// Every defined bit.
    pub const ALL: u8 = 0x0F;
}

/// Multicast scopes (IBA 4.1.1, the MGID's Scope nibble).
pub mod scope {
    pub const LINK_LOCAL: u8 = 0x2;
    pub const SITE_LOCAL: u8 = 0x5;
    pub const ORGANIZATION_LOCAL: u8 = 0x8;
    pub const GLOBAL: u8 = 0xE;
}

mod field {
    pub const MGID: usize = 0;
    pub const PORT_GID: usize = 16;
    pub const Q_KEY: usize = 32;
    pub const MLID: usize = 36;
    pub const MTU: usize = 38;
    pub const TCLASS: usize = 39;
    pub const PKEY: usize = 40;
    pub const RATE: usize = 42;
    pub const PACKET_LIFE_TIME: usize = 43;
    /// SL in bits 31-28, FlowLabel 27-8, HopLimit 7-0.
    pub const SL_FLOW_HOP: usize = 44;
    /// Scope in the high nibble, JoinState in the low.
    pub const SCOPE_STATE: usize = 48;
    /// ProxyJoin in bit 7; the rest reserved.
    pub const PROXY_JOIN: usize = 49;
}

/// A zero-copy view of one MCMemberRecord.
#[derive(Debug, Clone, Copy)]
pub struct McMemberRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> McMemberRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), MC_MEMBER_RECORD_LEN)?;
        Ok(McMemberRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn mgid(&self) -> [u8; 16] {
        gid_at(self.b(), field::MGID)
    }
    pub fn port_gid(&self) -> [u8; 16] {
        gid_at(self.b(), field::PORT_GID)
    }
    pub fn q_key(&self) -> u32 {
        be::u32(self.b(), field::Q_KEY)
    }
    pub fn mlid(&self) -> u16 {
        be::u16(self.b(), field::MLID)
    }
    /// (selector, MTU code)
    pub fn mtu(&self) -> (u8, u8) {
        split_selector(self.b()[field::MTU])
    }
    pub fn tclass(&self) -> u8 {
        self.b()[field::TCLASS]
    }
    pub fn pkey(&self) -> u16 {
        be::u16(self.b(), field::PKEY)
    }
    /// (selector, rate code)
    pub fn rate(&self) -> (u8, u8) {
        split_selector(self.b()[field::RATE])
    }
    /// (selector, PacketLifeTime)
    pub fn packet_life_time(&self) -> (u8, u8) {
        split_selector(self.b()[field::PACKET_LIFE_TIME])
    }
    pub fn sl(&self) -> u8 {
        self.b()[field::SL_FLOW_HOP] >> 4
    }
    pub fn flow_label(&self) -> u32 {
        (be::u32(self.b(), field::SL_FLOW_HOP) >> 8) & 0x000F_FFFF
    }
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::SL_FLOW_HOP + 3]
    }
    pub fn scope(&self) -> u8 {
        self.b()[field::SCOPE_STATE] >> 4
    }
    pub fn join_state(&self) -> u8 {
        self.b()[field::SCOPE_STATE] & 0x0F
    }
    pub fn proxy_join(&self) -> bool {
        self.b()[field::PROXY_JOIN] & 0x80 != 0
    }
}

/// The owned form of an MCMemberRecord. Sub-byte fields hold their value
/// right-aligned; `emit` cuts wider values to the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct McMemberRecordRepr {
    pub mgid: [u8; 16],
    pub port_gid: [u8; 16],
    pub q_key: u32,
    pub mlid: u16,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub tclass: u8,
    pub pkey: u16,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub sl: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub scope: u8,
    /// [`join_state`] bits.
    pub join_state: u8,
    pub proxy_join: bool,
}

impl McMemberRecordRepr {
    /// Every bit pattern is a record, so this cannot fail once the view
    /// exists.
    pub fn parse<T: AsRef<[u8]>>(r: &McMemberRecord<T>) -> WireResult<Self> {
        let (mtu_selector, mtu) = r.mtu();
        let (rate_selector, rate) = r.rate();
        let (packet_life_time_selector, packet_life_time) = r.packet_life_time();
        Ok(McMemberRecordRepr {
            mgid: r.mgid(),
            port_gid: r.port_gid(),
            q_key: r.q_key(),
            mlid: r.mlid(),
            mtu_selector,
            mtu,
            tclass: r.tclass(),
            pkey: r.pkey(),
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            sl: r.sl(),
            flow_label: r.flow_label(),
            hop_limit: r.hop_limit(),
            scope: r.scope(),
            join_state: r.join_state(),
            proxy_join: r.proxy_join(),
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&McMemberRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        MC_MEMBER_RECORD_LEN
    }

    /// Writes all 52 bytes, the reserved ones zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, MC_MEMBER_RECORD_LEN)?;
        let out = &mut out[..MC_MEMBER_RECORD_LEN];
        out.fill(0);
        out[field::MGID..field::MGID + 16].copy_from_slice(&self.mgid);
        out[field::PORT_GID..field::PORT_GID + 16].copy_from_slice(&self.port_gid);
        be::set_u32(out, field::Q_KEY, self.q_key);
        be::set_u16(out, field::MLID, self.mlid);
        out[field::MTU] = join_selector(self.mtu_selector, self.mtu);
        out[field::TCLASS] = self.tclass;
        be::set_u16(out, field::PKEY, self.pkey);
        out[field::RATE] = join_selector(self.rate_selector, self.rate);
        out[field::PACKET_LIFE_TIME] = join_selector(self.packet_life_time_selector, self.packet_life_time);
        let sl_flow_hop =
            u32::from(self.sl & 0x0F) << 28 | (self.flow_label & 0x000F_FFFF) << 8 | u32::from(self.hop_limit);
        be::set_u32(out, field::SL_FLOW_HOP, sl_flow_hop);
        out[field::SCOPE_STATE] = (self.scope & 0x0F) << 4 | (self.join_state & 0x0F);
        out[field::PROXY_JOIN] = u8::from(self.proxy_join) << 7;
        Ok(())
    }
}

impl SaRecord for McMemberRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::McMemberRecord;
    const LEN: usize = MC_MEMBER_RECORD_LEN;
    /// Table 210's fields in order, the 23 reserved bits last.
    const COMPONENTS: &'static [Component] = &[
        Component::bytes(0, 16),
        Component::bytes(16, 16),
        Component::bytes(32, 4),
        Component::bytes(36, 2),
        Component::at(38, 0, 2),
        Component::at(38, 2, 6),
        Component::bytes(39, 1),
        Component::bytes(40, 2),
        Component::at(42, 0, 2),
        Component::at(42, 2, 6),
        Component::at(43, 0, 2),
        Component::at(43, 2, 6),
        Component::at(44, 0, 4),
        Component::at(44, 4, 20),
        Component::bytes(47, 1),
        Component::at(48, 0, 4),
        Component::at(48, 4, 4),
        Component::at(49, 0, 1),
        Component::at(49, 1, 23),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        McMemberRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        McMemberRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::{component_checks, components_match};
    use crate::mad::WireError;

    /// The IPoIB broadcast group OpenSM 3.3 holds for the default
    /// partition, as its opensm-sa.dump printed it in the sim run
    /// (mgid=0xff12401bffff0000:0x00000000ffffffff qkey=0x00000b1b
    /// mlid=0xc000 mtu=0x84 pkey=0xffff rate=0x83 pkt_life=0x92
    /// scope_state=0x21), with a member's PortGID, SL 3, FlowLabel
    /// 0x12345, HopLimit 0 and ProxyJoin laid out by hand.
    fn wire() -> [u8; 52] {
        let mut b = [0u8; 52];
        b[0..16].copy_from_slice(&[0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        b[16..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0]);
        b[24..32].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x10, 0x01]);
        b[32..36].copy_from_slice(&[0, 0, 0x0b, 0x1b]);
        b[36..38].copy_from_slice(&[0xc0, 0x00]);
        b[38] = 0x84;
        b[39] = 0x00;
        b[40..42].copy_from_slice(&[0xff, 0xff]);
        b[42] = 0x83;
        b[43] = 0x92;
        b[44..48].copy_from_slice(&[0x31, 0x23, 0x45, 0x00]);
        b[48] = 0x21;
        b[49] = 0x80;
        b
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let r = McMemberRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(&r.mgid[..4], &[0xff, 0x12, 0x40, 0x1b]);
        assert_eq!(r.port_gid[15], 0x01);
        assert_eq!((r.q_key, r.mlid, r.pkey), (0x0b1b, 0xc000, 0xffff));
        assert_eq!((r.mtu_selector, r.mtu), (2, 4), "0x84: exactly 2048");
        assert_eq!((r.rate_selector, r.rate), (2, 3), "0x83: exactly 10 Gb/s");
        assert_eq!((r.packet_life_time_selector, r.packet_life_time), (2, 0x12));
        assert_eq!((r.sl, r.flow_label, r.hop_limit), (3, 0x12345, 0));
        assert_eq!((r.scope, r.join_state), (scope::LINK_LOCAL, join_state::FULL));
        assert!(r.proxy_join);
        let mut out = [0xAAu8; 52];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b, "the reserved bits 49:1-51 written as zero");
    }

    #[test]
    fn every_field_round_trips_and_wide_values_are_cut() {
        let r = McMemberRecordRepr {
            mgid: [0xff; 16],
            port_gid: [7; 16],
            q_key: 0x8000_0001,
            mlid: 0xfffe,
            mtu_selector: 3,
            mtu: 0x3f,
            tclass: 0xab,
            pkey: 0x7fff,
            rate_selector: 1,
            rate: 24,
            packet_life_time_selector: 0,
            packet_life_time: 0x3f,
            sl: 15,
            flow_label: 0xF_FFFF,
            hop_limit: 0xff,
            scope: 0xE,
            join_state: join_state::ALL,
            proxy_join: false,
        };
        assert_eq!(McMemberRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap(), r);
        let wide = McMemberRecordRepr { sl: 0x1F, flow_label: 0x1F_FFFF, scope: 0x1E, join_state: 0x1F, ..r };
        let back = McMemberRecordRepr::parse_bytes(&SaRecord::to_bytes(&wide)).unwrap();
        assert_eq!((back.sl, back.flow_label, back.scope, back.join_state), (15, 0xF_FFFF, 0xE, 0xF));
        assert_eq!(back.hop_limit, 0xff, "the FlowLabel did not spill into HopLimit");
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            McMemberRecordRepr::parse_bytes(&wire()[..51]),
            Err(WireError::Truncated { what: WHAT, len: 51, need: 52 })
        );
        assert!(McMemberRecordRepr::default().emit(&mut [0u8; 51]).is_err());
        assert_eq!(McMemberRecordRepr::attribute_offset(), 7, "52 bytes: seven 8-byte words");
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let a = McMemberRecordRepr::parse_bytes(&wire()).unwrap();
        let c = McMemberRecordRepr::COMPONENTS;
        let differ = |f: &dyn Fn(&mut McMemberRecordRepr), bit: u64| {
            let mut b = a;
            f(&mut b);
            let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
            assert!(!components_match(c, bit, &qa, &qb), "bit {bit:#x} sees its field");
            assert!(components_match(c, !bit & ((1 << 19) - 1), &qa, &qb), "only bit {bit:#x} sees it");
        };
        use mc_member_mask as m;
        differ(&|r| r.mgid[15] = 0, m::MGID);
        differ(&|r| r.port_gid[0] = 0, m::PORT_GID);
        differ(&|r| r.q_key = 1, m::Q_KEY);
        differ(&|r| r.mlid = 0xc001, m::MLID);
        differ(&|r| r.mtu_selector = 0, m::MTU_SELECTOR);
        differ(&|r| r.mtu = 5, m::MTU);
        differ(&|r| r.tclass = 1, m::TCLASS);
        differ(&|r| r.pkey = 0x8001, m::PKEY);
        differ(&|r| r.rate_selector = 3, m::RATE_SELECTOR);
        differ(&|r| r.rate = 7, m::RATE);
        differ(&|r| r.packet_life_time_selector = 1, m::PACKET_LIFE_TIME_SELECTOR);
        differ(&|r| r.packet_life_time = 1, m::PACKET_LIFE_TIME);
        differ(&|r| r.sl = 0, m::SL);
        differ(&|r| r.flow_label = 0, m::FLOW_LABEL);
        differ(&|r| r.hop_limit = 9, m::HOP_LIMIT);
        differ(&|r| r.scope = scope::GLOBAL, m::SCOPE);
        differ(&|r| r.join_state = join_state::SEND_ONLY_FULL, m::JOIN_STATE);
        differ(&|r| r.proxy_join = false, m::PROXY_JOIN);
        let q = SaRecord::to_bytes(&a);
        assert!(!components_match(c, 1 << 19, &q, &q), "bit 19 names no field");
        component_checks::assert_tiles::<McMemberRecordRepr>();
        component_checks::assert_fields_and_reserved::<McMemberRecordRepr>(&[18], &[]);
    }
}
