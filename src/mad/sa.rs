//! Subnet administration MADs (class 0x03, version 2): the SA header and
//! the PathRecord attribute.
//!
//! SA MAD (IBA 15.2.1.1, Figure 193), after the 24-byte common header:
//! ```text
//! 24: RMPP header (12 bytes, IBA 13.6.2.1)
//! 36: SM_Key (64)
//! 44: AttributeOffset (16, in 8-byte words) | Reserved (16)
//! 48: ComponentMask (64)
//! 56: SA data (200 bytes)
//! ```
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

use super::codes::open_enum;
use super::{be, check_len, WireResult, MAD_SIZE};

/// Where the SA data starts in a MAD.
pub const SA_DATA_OFFSET: usize = 56;
/// The SA data area of one MAD.
pub const SA_DATA_LEN: usize = MAD_SIZE - SA_DATA_OFFSET;
/// PathRecord's size on the wire.
pub const PATH_RECORD_LEN: usize = 64;

open_enum! {
    /// SA attribute IDs (IBA 15.2.5, Table 194).
    SaAttributeId: u16 {
        ClassPortInfo = 0x0001,
        Notice = 0x0002,
        InformInfo = 0x0003,
        NodeRecord = 0x0011,
        PortInfoRecord = 0x0012,
        SlToVlMappingTableRecord = 0x0013,
        SwitchInfoRecord = 0x0014,
        LinearForwardingTableRecord = 0x0015,
        RandomForwardingTableRecord = 0x0016,
        MulticastForwardingTableRecord = 0x0017,
        SmInfoRecord = 0x0018,
        LinkRecord = 0x0020,
        GuidInfoRecord = 0x0030,
        ServiceRecord = 0x0031,
        PKeyTableRecord = 0x0033,
        PathRecord = 0x0035,
        VlArbitrationTableRecord = 0x0036,
        McMemberRecord = 0x0038,
        TraceRecord = 0x0039,
        MultiPathRecord = 0x003A,
        ServiceAssociationRecord = 0x003B,
        InformInfoRecord = 0x00F3,
    }
}

/// SA-specific MAD status codes (IBA 15.2.1.2, Table 192): bits 8-15 of
/// the status word.
pub mod sa_status {
    pub const NO_RESOURCES: u16 = 1;
    pub const REQ_INVALID: u16 = 2;
    pub const NO_RECORDS: u16 = 3;
    pub const TOO_MANY_RECORDS: u16 = 4;
    pub const INVALID_GID: u16 = 5;
    pub const INSUFFICIENT_COMPONENTS: u16 = 6;
    pub const DENIED: u16 = 7;

    /// The SA code of a status word.
    pub fn code(status: u16) -> u16 {
        status >> 8
    }

    /// What an SA status code means, for messages.
    pub fn describe(code: u16) -> &'static str {
        match code {
            NO_RESOURCES => "ERR_NO_RESOURCES",
            REQ_INVALID => "ERR_REQ_INVALID",
            NO_RECORDS => "ERR_NO_RECORDS",
            TOO_MANY_RECORDS => "ERR_TOO_MANY_RECORDS",
            INVALID_GID => "ERR_REQ_INVALID_GID",
            INSUFFICIENT_COMPONENTS => "ERR_REQ_INSUFFICIENT_COMPONENTS",
            DENIED => "ERR_REQ_DENIED",
            _ => "unknown SA status",
        }
    }
}

mod field {
    pub const SM_KEY: usize = 36;
    pub const ATTRIBUTE_OFFSET: usize = 44;
    pub const COMPONENT_MASK: usize = 48;
}

/// A zero-copy view of a whole SA MAD (common header included).
#[derive(Debug, Clone, Copy)]
pub struct SaMad<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SaMad<T> {
    /// Wraps `buffer` after checking it holds the SA header; the data area
    /// may be short (a received MAD is always whole, but nothing relies on it).
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("SA MAD", buffer.as_ref(), SA_DATA_OFFSET)?;
        Ok(SaMad { buffer })
    }
    pub fn sm_key(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SM_KEY)
    }
    /// Spacing of records in a GetTableResp, in 8-byte words.
    pub fn attribute_offset(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::ATTRIBUTE_OFFSET)
    }
    pub fn component_mask(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::COMPONENT_MASK)
    }
    /// The SA data area (up to 200 bytes).
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[SA_DATA_OFFSET..b.len().min(MAD_SIZE)]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SaMad<T> {
    pub fn set_sm_key(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SM_KEY, v);
    }
    pub fn set_attribute_offset(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::ATTRIBUTE_OFFSET, v);
    }
    pub fn set_component_mask(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::COMPONENT_MASK, v);
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let end = b.len().min(MAD_SIZE);
        &mut b[SA_DATA_OFFSET..end]
    }
}

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

fn gid_at(b: &[u8], at: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[at..at + 16]);
    g
}

fn split_selector(v: u8) -> (u8, u8) {
    (v >> 6, v & 0x3F)
}

fn join_selector(selector: u8, value: u8) -> u8 {
    (selector & 0x3) << 6 | (value & 0x3F)
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
    fn short_buffers_are_errors() {
        assert!(PathRecordRepr::parse_bytes(&[0u8; 63]).is_err());
        assert!(PathRecordRepr::default().emit(&mut [0u8; 10]).is_err());
        assert!(SaMad::new_checked(&[0u8; 55][..]).is_err());
        let mut mad = [0u8; 256];
        let mut m = SaMad::new_checked(&mut mad[..]).unwrap();
        m.set_component_mask(path_mask::DLID | path_mask::SLID);
        m.set_sm_key(7);
        assert_eq!(m.component_mask(), 0x30);
        assert_eq!((m.sm_key(), m.data().len()), (7, SA_DATA_LEN));
    }

    #[test]
    fn status_codes() {
        assert_eq!(sa_status::code(0x0300), sa_status::NO_RECORDS);
        assert_eq!(sa_status::describe(3), "ERR_NO_RECORDS");
    }
}
