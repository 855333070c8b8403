//! Subnet administration MADs (class 0x03, version 2): the SA header, the
//! attribute IDs and status codes, and one file per SA record.
//!
//! SA MAD (IBA 15.2.1.1, Figure 193), after the 24-byte common header:
//! ```text
//! 24: RMPP header (12 bytes, IBA 13.6.2.1)
//! 36: SM_Key (64)
//! 44: AttributeOffset (16, in 8-byte words) | Reserved (16)
//! 48: ComponentMask (64)
//! 56: SA data (200 bytes)
//! ```
//!
//! Every record implements [`SaRecord`]: its attribute ID, wire length, and
//! the field each component-mask bit selects (IBA 15.2.1.3), so the SA
//! matches a query against a record on the wire bytes, one way for all.

use super::codes::open_enum;
use super::{be, check_len, WireResult, MAD_SIZE};

#[cfg(test)]
pub(crate) mod component_checks;
pub mod guid_info_record;
pub mod inform_info;
pub mod inform_info_record;
pub mod lft_record;
pub mod link_record;
pub mod mc_member_record;
pub mod mft_record;
pub mod multi_path_record;
pub mod node_record;
pub mod path_record;
pub mod pkey_table_record;
pub mod port_info_record;
pub mod service_record;
pub mod sl_to_vl_record;
pub mod sm_info_record;
pub mod switch_info_record;
pub mod vl_arb_record;

pub use guid_info_record::{guid_info_mask, GuidInfoRecord, GuidInfoRecordRepr, GUID_INFO_RECORD_LEN};
pub use inform_info::{wildcard as inform_wildcard, InformInfo, InformInfoRepr, InformKind, INFORM_INFO_LEN};
pub use inform_info_record::{inform_info_record_mask, InformInfoRecord, InformInfoRecordRepr, INFORM_INFO_RECORD_LEN};
pub use lft_record::{lft_mask, LftRecord, LftRecordRepr, LFT_RECORD_LEN};
pub use link_record::{link_mask, LinkRecord, LinkRecordRepr, LINK_RECORD_LEN};
pub use mc_member_record::{join_state, mc_member_mask, McMemberRecord, McMemberRecordRepr, MC_MEMBER_RECORD_LEN};
pub use mft_record::{mft_mask, MftRecord, MftRecordRepr, MFT_RECORD_LEN};
pub use multi_path_record::{multi_path_mask, MultiPathRecord, MultiPathRecordRepr, MULTI_PATH_MAX_GIDS};
pub use node_record::{node_mask, NodeRecord, NodeRecordRepr, NODE_RECORD_LEN};
pub use path_record::{path_mask, PathRecord, PathRecordRepr, PATH_RECORD_LEN};
pub use pkey_table_record::{pkey_table_mask, PKeyTableRecord, PKeyTableRecordRepr, PKEY_TABLE_RECORD_LEN};
pub use port_info_record::{port_info_mask, PortInfoRecord, PortInfoRecordRepr, PORT_INFO_RECORD_LEN};
pub use service_record::{service_mask, ServiceRecord, ServiceRecordRepr, SERVICE_RECORD_LEN};
pub use sl_to_vl_record::{sl_to_vl_mask, SlToVlRecord, SlToVlRecordRepr, SL_TO_VL_RECORD_LEN};
pub use sm_info_record::{sm_info_mask, SmInfoRecord, SmInfoRecordRepr, SM_INFO_RECORD_LEN};
pub use switch_info_record::{switch_info_mask, SwitchInfoRecord, SwitchInfoRecordRepr, SWITCH_INFO_RECORD_LEN};
pub use vl_arb_record::{vl_arb_mask, VlArbRecord, VlArbRecordRepr, VL_ARB_RECORD_LEN};

/// Where the SA data starts in a MAD.
pub const SA_DATA_OFFSET: usize = 56;
/// The SA data area of one MAD.
pub const SA_DATA_LEN: usize = MAD_SIZE - SA_DATA_OFFSET;

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

/// The field one component-mask bit selects: where it starts in the record,
/// in bits from the record's first byte (most significant bit first, as the
/// IBA tables number them), and how many bits it spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    pub bit_offset: u16,
    pub bits: u16,
}

impl Component {
    /// A component at `byte`:`bit` (bit 0 the most significant of the byte).
    pub const fn at(byte: u16, bit: u16, bits: u16) -> Self {
        Component { bit_offset: byte * 8 + bit, bits }
    }
    /// A whole-byte field of `bytes` bytes at `byte`.
    pub const fn bytes(byte: u16, bytes: u16) -> Self {
        Component { bit_offset: byte * 8, bits: bytes * 8 }
    }
    fn end_bit(self) -> usize {
        usize::from(self.bit_offset) + usize::from(self.bits)
    }
}

/// An SA record (IBA 15.2.5): the owned form of one attribute of the SA
/// data area, with what the SA needs to match and space it.
pub trait SaRecord: Sized + Clone {
    const ATTRIBUTE: SaAttributeId;
    /// Bytes of one record on the wire (reserved tail included).
    const LEN: usize;
    /// The field of each component-mask bit, bit 0 first. A mask with a bit
    /// at or beyond `COMPONENTS.len()` names no field and is invalid.
    const COMPONENTS: &'static [Component];
    /// Reads one record; `b` may be longer (the rest of an SA data area).
    fn parse_bytes(b: &[u8]) -> WireResult<Self>;
    /// Writes all `LEN` bytes, reserved ones zero.
    fn emit(&self, out: &mut [u8]) -> WireResult<()>;

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; Self::LEN];
        self.emit(&mut out).expect("a buffer of LEN bytes holds the record");
        out
    }
    /// AttributeOffset of a GetTableResp of these records: the record
    /// length in 8-byte words, rounded up (IBA 15.2.1.1).
    fn attribute_offset() -> u16 {
        Self::LEN.div_ceil(8) as u16
    }
}

pub(crate) fn gid_at(b: &[u8], at: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[at..at + 16]);
    g
}

/// A selector byte (IBA 15.2.5.16: 2-bit selector over a 6-bit value).
pub(crate) fn split_selector(v: u8) -> (u8, u8) {
    (v >> 6, v & 0x3F)
}

pub(crate) fn join_selector(selector: u8, value: u8) -> u8 {
    (selector & 0x3) << 6 | (value & 0x3F)
}

/// The mask bits that name no component of a record with `components`.
pub fn unknown_components(components: &[Component], mask: u64) -> u64 {
    if components.len() >= 64 {
        0
    } else {
        mask & !((1u64 << components.len()) - 1)
    }
}

/// Whether `record` agrees with `query` on every component in `mask`
/// (IBA 15.2.1.3: a field outside the mask is ignored, one inside it must
/// be equal). Both are wire bytes; a component beyond either buffer, or a
/// mask bit beyond the table, never matches, so a bad table cannot widen a
/// query.
pub fn components_match(components: &[Component], mask: u64, query: &[u8], record: &[u8]) -> bool {
    if unknown_components(components, mask) != 0 {
        return false;
    }
    components.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).all(|(_, c)| {
        let end = c.end_bit();
        if end.div_ceil(8) > query.len() || end.div_ceil(8) > record.len() {
            return false;
        }
        (usize::from(c.bit_offset)..end).all(|bit| {
            let (byte, shift) = (bit / 8, 7 - bit % 8);
            (query[byte] >> shift) & 1 == (record[byte] >> shift) & 1
        })
    })
}

/// Whether a single field of `bits` at `bit_offset` is all zeros in `b`
/// (for "wildcard when zero" fields some records define).
pub fn field_is_zero(c: Component, b: &[u8]) -> bool {
    let end = c.end_bit();
    end.div_ceil(8) <= b.len() && (usize::from(c.bit_offset)..end).all(|bit| (b[bit / 8] >> (7 - bit % 8)) & 1 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_reads_and_writes_and_short_buffers_are_errors() {
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

    const TABLE: &[Component] = &[Component::bytes(0, 2), Component::at(2, 0, 4), Component::at(2, 4, 4)];

    #[test]
    fn components_match_inside_the_mask_only() {
        let query = [0x12, 0x34, 0xA0];
        let record = [0x12, 0x34, 0xAF];
        assert!(components_match(TABLE, 0b011, &query, &record), "the low nibble is outside the mask");
        assert!(!components_match(TABLE, 0b100, &query, &record), "the low nibble differs");
        assert!(components_match(TABLE, 0, &query, &[0xFF, 0xFF, 0xFF]), "an empty mask matches all");
        assert!(!components_match(TABLE, 0b1000, &query, &record), "a bit naming no field never matches");
        assert_eq!(unknown_components(TABLE, 0b1010), 0b1000);
        assert!(!components_match(TABLE, 0b001, &query[..1], &record), "a short query never matches");
        assert!(field_is_zero(Component::at(2, 4, 4), &query));
        assert!(!field_is_zero(Component::at(2, 4, 4), &record));
    }
}
