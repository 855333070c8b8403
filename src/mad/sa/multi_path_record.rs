//! MultiPathRecord (IBA 15.2.5.20): the query of a SubnAdmGetMulti, asking
//! for paths between a set of source and a set of destination ports. 24
//! fixed bytes, then SGIDCount source GIDs and DGIDCount destination GIDs:
//! ```text
//!  0: RawTraffic (1) | Reserved (3) | FlowLabel (20) | HopLimit (8)
//!  4: TClass (8) | Reversible (1) NumbPath (7) | P_Key (16)
//!  8: QoSClass (12) SL (4)   | MTUSelector (2) MTU (6) | RateSelector (2) Rate (6)
//! 12: PacketLifeTimeSelector (2) PacketLifeTime (6) | ServiceID 8 MSB (8)
//!     | IndependenceSelector (2) Reserved (6) | SGIDCount (8)
//! 16: DGIDCount (8) | ServiceID 56 LSB (56)
//! 24: SDGID list: SGIDCount + DGIDCount GIDs of 128 bits
//! ```
//! IBA 1.2 had bytes 13 and 17-23 reserved; later editions (and OpenSM)
//! carry a ServiceID there, split like PathRecord's.
//!
//! One SA MAD's data area holds 11 GIDs ([`MULTI_PATH_MAX_GIDS`]); a
//! record naming more comes as a multi-segment RMPP request, which the SA
//! reassembles (`crate::sa` reassembly), so a record is as long as its
//! counts say, up to 255 + 255 GIDs (8,184 bytes), when its buffer holds
//! them. `SaRecord::LEN` is the one-MAD data area;
//! [`MultiPathRecordRepr::buffer_len`] is what one record needs.
//!
//! Component mask, one bit per fixed field in order, reserved ones included
//! (as OpenSM's `IB_MPR_COMPMASK_*` numbers them): RawTraffic 0, Reserved 1,
//! FlowLabel 2, HopLimit 3, TClass 4, Reversible 5, NumbPath 6, P_Key 7,
//! QoSClass 8, SL 9, MTUSelector 10, MTU 11, RateSelector 12, Rate 13,
//! PacketLifeTimeSelector 14, PacketLifeTime 15, ServiceID8MSB 16,
//! IndependenceSelector 17, Reserved 18, SGIDCount 19, DGIDCount 20,
//! ServiceID56LSB 21. The GID list has no bits: the counts say what it holds.

use super::{gid_at, join_selector, split_selector, Component, SaAttributeId, SaRecord, SA_DATA_LEN};
use crate::mad::{be, check_len, WireError, WireResult};

/// Bytes before the GID list.
pub const MULTI_PATH_FIXED_LEN: usize = 24;
/// GIDs one SA data area holds after the fixed part.
pub const MULTI_PATH_MAX_GIDS: usize = (SA_DATA_LEN - MULTI_PATH_FIXED_LEN) / GID_LEN;

const GID_LEN: usize = 16;
const WHAT: &str = "MultiPathRecord";

/// MultiPathRecord component mask bits (IBA 15.2.5.20).
pub mod multi_path_mask {
    pub const RAW_TRAFFIC: u64 = 1 << 0;
    pub const FLOW_LABEL: u64 = 1 << 2;
    pub const HOP_LIMIT: u64 = 1 << 3;
    pub const TCLASS: u64 = 1 << 4;
    pub const REVERSIBLE: u64 = 1 << 5;
    pub const NUMB_PATH: u64 = 1 << 6;
    pub const PKEY: u64 = 1 << 7;
    pub const QOS_CLASS: u64 = 1 << 8;
    pub const SL: u64 = 1 << 9;
    pub const MTU_SELECTOR: u64 = 1 << 10;
    pub const MTU: u64 = 1 << 11;
    pub const RATE_SELECTOR: u64 = 1 << 12;
    pub const RATE: u64 = 1 << 13;
    pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 14;
    pub const PACKET_LIFE_TIME: u64 = 1 << 15;
    /// Both halves: the IBA asks for the two bits set or clear together.
    pub const SERVICE_ID: u64 = 1 << 16 | 1 << 21;
    pub const INDEPENDENCE_SELECTOR: u64 = 1 << 17;
    pub const SGID_COUNT: u64 = 1 << 19;
    pub const DGID_COUNT: u64 = 1 << 20;
}

mod field {
    pub const FLOW_HOP: usize = 0;
    pub const TCLASS: usize = 4;
    pub const REVERSIBLE_NUMB_PATH: usize = 5;
    pub const PKEY: usize = 6;
    pub const QOS_SL: usize = 8;
    pub const MTU: usize = 10;
    pub const RATE: usize = 11;
    pub const PACKET_LIFE_TIME: usize = 12;
    pub const SERVICE_ID_MSB: usize = 13;
    pub const INDEPENDENCE: usize = 14;
    pub const SGID_COUNT: usize = 15;
    pub const DGID_COUNT: usize = 16;
    /// ServiceID's low 56 bits, bytes 17-23.
    pub const SERVICE_ID_LSB: usize = 17;
    pub const GIDS: usize = 24;
}

/// Bytes a record with `gids` GIDs takes.
fn record_len(gids: usize) -> usize {
    MULTI_PATH_FIXED_LEN + GID_LEN * gids
}

/// A zero-copy view of one MultiPathRecord.
#[derive(Debug, Clone, Copy)]
pub struct MultiPathRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MultiPathRecord<T> {
    /// Wraps `buffer` after checking it holds the fixed part and every GID
    /// the counts announce (more than one MAD holds in a reassembled
    /// request).
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        let b = buffer.as_ref();
        check_len(WHAT, b, MULTI_PATH_FIXED_LEN)?;
        let gids = usize::from(b[field::SGID_COUNT]) + usize::from(b[field::DGID_COUNT]);
        check_len(WHAT, b, record_len(gids))?;
        Ok(MultiPathRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn raw_traffic(&self) -> bool {
        self.b()[field::FLOW_HOP] & 0x80 != 0
    }
    pub fn flow_label(&self) -> u32 {
        (be::u32(self.b(), field::FLOW_HOP) >> 8) & 0x000F_FFFF
    }
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::FLOW_HOP + 3]
    }
    pub fn tclass(&self) -> u8 {
        self.b()[field::TCLASS]
    }
    pub fn reversible(&self) -> bool {
        self.b()[field::REVERSIBLE_NUMB_PATH] & 0x80 != 0
    }
    /// How many paths to return at most.
    pub fn numb_path(&self) -> u8 {
        self.b()[field::REVERSIBLE_NUMB_PATH] & 0x7F
    }
    pub fn pkey(&self) -> u16 {
        be::u16(self.b(), field::PKEY)
    }
    pub fn qos_class(&self) -> u16 {
        be::u16(self.b(), field::QOS_SL) >> 4
    }
    pub fn sl(&self) -> u8 {
        self.b()[field::QOS_SL + 1] & 0x0F
    }
    /// (selector, MTU code)
    pub fn mtu(&self) -> (u8, u8) {
        split_selector(self.b()[field::MTU])
    }
    /// (selector, rate code)
    pub fn rate(&self) -> (u8, u8) {
        split_selector(self.b()[field::RATE])
    }
    /// (selector, PacketLifeTime)
    pub fn packet_life_time(&self) -> (u8, u8) {
        split_selector(self.b()[field::PACKET_LIFE_TIME])
    }
    /// The two halves put together.
    pub fn service_id(&self) -> u64 {
        let b = self.b();
        let mut x = [0u8; 8];
        x[0] = b[field::SERVICE_ID_MSB];
        x[1..].copy_from_slice(&b[field::SERVICE_ID_LSB..field::SERVICE_ID_LSB + 7]);
        u64::from_be_bytes(x)
    }
    /// 2 bits; 1 asks for paths as fault-independent as possible.
    pub fn independence_selector(&self) -> u8 {
        self.b()[field::INDEPENDENCE] >> 6
    }
    pub fn sgid_count(&self) -> u8 {
        self.b()[field::SGID_COUNT]
    }
    pub fn dgid_count(&self) -> u8 {
        self.b()[field::DGID_COUNT]
    }
    /// GID `i` of the list (sources first), None past the counts.
    pub fn gid(&self, i: usize) -> Option<[u8; 16]> {
        let n = usize::from(self.sgid_count()) + usize::from(self.dgid_count());
        (i < n).then(|| gid_at(self.b(), field::GIDS + GID_LEN * i))
    }
    /// Source GID `i`, None past SGIDCount.
    pub fn sgid(&self, i: usize) -> Option<[u8; 16]> {
        (i < usize::from(self.sgid_count())).then(|| self.gid(i)).flatten()
    }
    /// Destination GID `i`, None past DGIDCount.
    pub fn dgid(&self, i: usize) -> Option<[u8; 16]> {
        (i < usize::from(self.dgid_count())).then(|| self.gid(usize::from(self.sgid_count()) + i)).flatten()
    }
}

/// The owned form of a MultiPathRecord. `gids` holds the SGIDCount source
/// GIDs, then the DGIDCount destination GIDs; [`Self::check`] says whether
/// the two agree, and `emit` refuses a record where they do not (so
/// `SaRecord::to_bytes`, which cannot fail, panics on one: build records
/// with [`Self::with_gids`] or from the wire).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MultiPathRecordRepr {
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
    pub service_id: u64,
    pub independence_selector: u8,
    pub sgid_count: u8,
    pub dgid_count: u8,
    pub gids: Vec<[u8; 16]>,
}

impl MultiPathRecordRepr {
    /// The view checked the counts against the buffer, so this cannot fail
    /// once the view exists.
    pub fn parse<T: AsRef<[u8]>>(p: &MultiPathRecord<T>) -> WireResult<Self> {
        let (mtu_selector, mtu) = p.mtu();
        let (rate_selector, rate) = p.rate();
        let (packet_life_time_selector, packet_life_time) = p.packet_life_time();
        let n = usize::from(p.sgid_count()) + usize::from(p.dgid_count());
        Ok(MultiPathRecordRepr {
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
            service_id: p.service_id(),
            independence_selector: p.independence_selector(),
            sgid_count: p.sgid_count(),
            dgid_count: p.dgid_count(),
            gids: (0..n).filter_map(|i| p.gid(i)).collect(),
        })
    }

    /// Reads one record from the start of `b` (an SA data area).
    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&MultiPathRecord::new_checked(b)?)
    }

    /// Sets the GID list and both counts from it.
    pub fn with_gids(mut self, sgids: &[[u8; 16]], dgids: &[[u8; 16]]) -> WireResult<Self> {
        let count = |v: &[[u8; 16]], field| {
            u8::try_from(v.len()).map_err(|_| WireError::Forbidden { what: WHAT, field, value: v.len() as u64 })
        };
        self.sgid_count = count(sgids, "SGIDCount")?;
        self.dgid_count = count(dgids, "DGIDCount")?;
        self.gids = sgids.iter().chain(dgids).copied().collect();
        Ok(self)
    }

    /// The source GIDs (as many of the first SGIDCount as `gids` holds).
    pub fn sgids(&self) -> &[[u8; 16]] {
        &self.gids[..usize::from(self.sgid_count).min(self.gids.len())]
    }

    /// The destination GIDs (what follows the source ones).
    pub fn dgids(&self) -> &[[u8; 16]] {
        &self.gids[usize::from(self.sgid_count).min(self.gids.len())..]
    }

    /// Whether `gids` holds exactly SGIDCount + DGIDCount GIDs.
    pub fn check(&self) -> WireResult<()> {
        let announced = usize::from(self.sgid_count) + usize::from(self.dgid_count);
        if self.gids.len() != announced {
            return Err(WireError::Forbidden {
                what: WHAT,
                field: "gids (SGIDCount + DGIDCount long)",
                value: self.gids.len() as u64,
            });
        }
        Ok(())
    }

    /// Whether the record fits one SA MAD (else it goes as a
    /// multi-segment RMPP request).
    pub fn fits_one_mad(&self) -> bool {
        self.gids.len() <= MULTI_PATH_MAX_GIDS
    }

    /// Bytes of the fixed part and the GID list.
    pub fn buffer_len(&self) -> usize {
        MULTI_PATH_FIXED_LEN + GID_LEN * self.gids.len()
    }

    /// Writes the fixed part and the GID list, and zeroes the rest of `out`
    /// up to an SA data area's length (or the record's, if longer). Values wider than their field are
    /// cut to it, as in PathRecord. Errors: a record [`Self::check`]
    /// refuses, or `out` shorter than [`Self::buffer_len`].
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        self.check()?;
        let len = self.buffer_len();
        check_len(WHAT, out, len)?;
        let end = out.len().min(len.max(SA_DATA_LEN));
        out[..end].fill(0);
        let flow = u32::from(self.raw_traffic) << 31 | (self.flow_label & 0x000F_FFFF) << 8 | u32::from(self.hop_limit);
        be::set_u32(out, field::FLOW_HOP, flow);
        out[field::TCLASS] = self.tclass;
        out[field::REVERSIBLE_NUMB_PATH] = u8::from(self.reversible) << 7 | (self.numb_path & 0x7F);
        be::set_u16(out, field::PKEY, self.pkey);
        be::set_u16(out, field::QOS_SL, (self.qos_class & 0x0FFF) << 4 | u16::from(self.sl & 0x0F));
        out[field::MTU] = join_selector(self.mtu_selector, self.mtu);
        out[field::RATE] = join_selector(self.rate_selector, self.rate);
        out[field::PACKET_LIFE_TIME] = join_selector(self.packet_life_time_selector, self.packet_life_time);
        let sid = self.service_id.to_be_bytes();
        out[field::SERVICE_ID_MSB] = sid[0];
        out[field::SERVICE_ID_LSB..field::SERVICE_ID_LSB + 7].copy_from_slice(&sid[1..]);
        out[field::INDEPENDENCE] = (self.independence_selector & 0x3) << 6;
        out[field::SGID_COUNT] = self.sgid_count;
        out[field::DGID_COUNT] = self.dgid_count;
        for (slot, gid) in out[field::GIDS..len].chunks_exact_mut(GID_LEN).zip(&self.gids) {
            slot.copy_from_slice(gid);
        }
        Ok(())
    }
}

impl SaRecord for MultiPathRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::MultiPathRecord;
    /// The whole data area: the record's length depends on its counts.
    const LEN: usize = SA_DATA_LEN;
    const COMPONENTS: &'static [Component] = &[
        Component::at(0, 0, 1),
        Component::at(0, 1, 3),
        Component::at(0, 4, 20),
        Component::bytes(3, 1),
        Component::bytes(4, 1),
        Component::at(5, 0, 1),
        Component::at(5, 1, 7),
        Component::bytes(6, 2),
        Component::at(8, 0, 12),
        Component::at(9, 4, 4),
        Component::at(10, 0, 2),
        Component::at(10, 2, 6),
        Component::at(11, 0, 2),
        Component::at(11, 2, 6),
        Component::at(12, 0, 2),
        Component::at(12, 2, 6),
        Component::bytes(13, 1),
        Component::at(14, 0, 2),
        Component::at(14, 2, 6),
        Component::bytes(15, 1),
        Component::bytes(16, 1),
        Component::bytes(17, 7),
    ];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        MultiPathRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        MultiPathRecordRepr::emit(self, out)
    }
    /// One data area, or the record's length when it names more GIDs
    /// than one holds.
    fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.buffer_len().max(Self::LEN)];
        self.emit(&mut out).expect("a buffer of the record's length holds it");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::multi_path_mask as m;
    use super::*;
    use crate::mad::sa::components_match;

    fn gid(last: u8) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0..2].copy_from_slice(&[0xFE, 0x80]);
        g[15] = last;
        g
    }

    /// Two sources, one destination, every fixed field distinct, by hand:
    /// flow label 0x12345, hop limit 0x40, TClass 0x0B, reversible, 8 paths,
    /// P_Key 0x8001, QoSClass 0x123, SL 5, MTU exactly 2048, rate exactly 3,
    /// life time at most 0x12, ServiceID 0x0A00_0000_0000_00FF,
    /// independence 1.
    fn wire() -> Vec<u8> {
        let mut b = vec![0u8; 24 + 48];
        b[0..4].copy_from_slice(&[0x01, 0x23, 0x45, 0x40]);
        b[4..8].copy_from_slice(&[0x0B, 0x88, 0x80, 0x01]);
        b[8..12].copy_from_slice(&[0x12, 0x35, 0x84, 0x83]);
        b[12..16].copy_from_slice(&[0xD2, 0x0A, 0x40, 2]);
        b[16] = 1;
        b[23] = 0xFF;
        b[24..40].copy_from_slice(&gid(1));
        b[40..56].copy_from_slice(&gid(2));
        b[56..72].copy_from_slice(&gid(9));
        b
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let r = MultiPathRecordRepr::parse_bytes(&b).unwrap();
        assert!(!r.raw_traffic && r.reversible);
        assert_eq!((r.flow_label, r.hop_limit, r.tclass, r.numb_path), (0x12345, 0x40, 0x0B, 8));
        assert_eq!((r.pkey, r.qos_class, r.sl), (0x8001, 0x123, 5));
        assert_eq!((r.mtu_selector, r.mtu, r.rate_selector, r.rate), (2, 4, 2, 3));
        assert_eq!((r.packet_life_time_selector, r.packet_life_time), (3, 0x12));
        assert_eq!((r.service_id, r.independence_selector), (0x0A00_0000_0000_00FF, 1));
        assert_eq!((r.sgid_count, r.dgid_count), (2, 1));
        assert_eq!(r.sgids(), &[gid(1), gid(2)]);
        assert_eq!(r.dgids(), &[gid(9)]);
        let v = MultiPathRecord::new_checked(&b[..]).unwrap();
        assert_eq!((v.sgid(1), v.sgid(2), v.dgid(0), v.dgid(1)), (Some(gid(2)), None, Some(gid(9)), None));
        assert_eq!(r.buffer_len(), b.len());
        let mut out = vec![0xAAu8; SA_DATA_LEN];
        r.emit(&mut out).unwrap();
        assert_eq!(&out[..b.len()], &b[..]);
        assert!(out[b.len()..].iter().all(|&x| x == 0), "the rest of the data area zeroed");
        let mut exact = vec![0u8; b.len()];
        r.emit(&mut exact).unwrap();
        assert_eq!(exact, b);
    }

    #[test]
    fn every_field_round_trips() {
        let r = MultiPathRecordRepr {
            raw_traffic: true,
            flow_label: 0xF_FFFF,
            hop_limit: 0xFF,
            tclass: 0xFF,
            reversible: false,
            numb_path: 0x7F,
            pkey: 0xFFFF,
            qos_class: 0xFFF,
            sl: 15,
            mtu_selector: 1,
            mtu: 0x3F,
            rate_selector: 0,
            rate: 0x2A,
            packet_life_time_selector: 2,
            packet_life_time: 0x3F,
            service_id: 0xFFEE_DDCC_BBAA_9988,
            independence_selector: 3,
            ..Default::default()
        }
        .with_gids(&[gid(1); 5], &[gid(2); 6])
        .unwrap();
        assert_eq!(r.gids.len(), MULTI_PATH_MAX_GIDS);
        let b = SaRecord::to_bytes(&r);
        assert_eq!(b.len(), SA_DATA_LEN);
        assert_eq!(MultiPathRecordRepr::parse_bytes(&b).unwrap(), r);
        let none = MultiPathRecordRepr::default();
        assert_eq!(MultiPathRecordRepr::parse_bytes(&SaRecord::to_bytes(&none)).unwrap(), none);
    }

    #[test]
    fn counts_beyond_the_buffer_or_the_data_area_are_errors() {
        let b = wire();
        assert_eq!(
            MultiPathRecordRepr::parse_bytes(&b[..71]),
            Err(WireError::Truncated { what: WHAT, len: 71, need: 72 }),
            "the last GID is one byte short"
        );
        assert_eq!(
            MultiPathRecordRepr::parse_bytes(&b[..23]),
            Err(WireError::Truncated { what: WHAT, len: 23, need: 24 })
        );
        let mut big = vec![0u8; 1024];
        big[15] = 6;
        big[16] = 6;
        let twelve = MultiPathRecordRepr::parse_bytes(&big).unwrap();
        assert_eq!(twelve.gids.len(), 12, "a reassembled request holds more GIDs than one SA MAD");
        assert!(!twelve.fits_one_mad());
        big[15] = 255;
        big[16] = 255;
        assert_eq!(
            MultiPathRecordRepr::parse_bytes(&big),
            Err(WireError::Truncated { what: WHAT, len: 1024, need: 24 + 510 * 16 }),
            "counts the buffer cannot hold"
        );
        let long = MultiPathRecordRepr::default().with_gids(&[gid(1); 6], &[gid(2); 6]).unwrap();
        let mut out = vec![0xAAu8; long.buffer_len()];
        long.emit(&mut out).unwrap();
        assert_eq!(MultiPathRecordRepr::parse_bytes(&out).unwrap(), long);
        assert!(long.emit(&mut [0u8; SA_DATA_LEN]).is_err(), "a buffer too short for the GIDs");
        assert!(MultiPathRecordRepr::default().with_gids(&[gid(0); 256], &[]).is_err());
    }

    #[test]
    fn a_record_whose_counts_disagree_with_its_gids_is_not_emitted() {
        let mut r = MultiPathRecordRepr::parse_bytes(&wire()).unwrap();
        r.dgid_count = 2;
        let mut out = [0u8; SA_DATA_LEN];
        assert!(matches!(r.check(), Err(WireError::Forbidden { value: 3, .. })));
        assert!(r.emit(&mut out).is_err());
        r.dgid_count = 1;
        assert!(r.emit(&mut out[..71]).is_err(), "the buffer is one byte short of the list");
        assert!(r.emit(&mut out[..72]).is_ok());
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let a = MultiPathRecordRepr::parse_bytes(&wire()).unwrap();
        let b = MultiPathRecordRepr { service_id: a.service_id ^ 1, ..a.clone() };
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = MultiPathRecordRepr::COMPONENTS;
        assert!(components_match(c, m::SL | m::PKEY | m::SGID_COUNT | m::DGID_COUNT | 1 << 16, &qa, &qb));
        assert!(!components_match(c, m::SERVICE_ID, &qa, &qb));
        assert!(!components_match(c, 1 << 21, &qa, &qb), "the low half differs");
        let d = MultiPathRecordRepr { independence_selector: 2, ..a.clone() };
        let qd = SaRecord::to_bytes(&d);
        assert!(!components_match(c, m::INDEPENDENCE_SELECTOR, &qa, &qd));
        assert!(components_match(c, 1 << 18 | m::PACKET_LIFE_TIME | m::SERVICE_ID, &qa, &qd));
        assert!(!components_match(c, 1 << 22, &qa, &qa), "bit 22 names no field");
        // The fixed part is tiled by the table, in order, with no gap.
        let mut next = 0;
        for comp in c {
            assert_eq!(usize::from(comp.bit_offset), next);
            next += usize::from(comp.bits);
        }
        assert_eq!(next, MULTI_PATH_FIXED_LEN * 8);
    }

    proptest::proptest! {
        /// Any bytes with any counts: parsing never panics, succeeds exactly
        /// when the buffer holds the announced GIDs (one MAD's data area or
        /// a reassembled request's), and gives back the input bytes but for
        /// the reserved bits.
        #[test]
        fn arbitrary_bytes_parse_or_are_refused(
            mut b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..260),
            counts in (0u8..8, 0u8..8),
        ) {
            if b.len() > field::DGID_COUNT {
                (b[field::SGID_COUNT], b[field::DGID_COUNT]) = counts;
            }
            let n = usize::from(counts.0) + usize::from(counts.1);
            let fits = b.len() >= MULTI_PATH_FIXED_LEN + 16 * n;
            match MultiPathRecordRepr::parse_bytes(&b) {
                Ok(r) => {
                    proptest::prop_assert!(fits);
                    let mut out = vec![0u8; r.buffer_len().max(SA_DATA_LEN)];
                    r.emit(&mut out).unwrap();
                    let mut expect = b[..r.buffer_len()].to_vec();
                    expect[0] &= 0x8F;
                    expect[field::INDEPENDENCE] &= 0xC0;
                    proptest::prop_assert_eq!(&out[..r.buffer_len()], &expect[..]);
                    proptest::prop_assert_eq!(MultiPathRecordRepr::parse_bytes(&out).unwrap(), r);
                }
                Err(_) => proptest::prop_assert!(!fits || b.len() < MULTI_PATH_FIXED_LEN),
            }
        }
    }
}
