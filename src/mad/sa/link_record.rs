//! LinkRecord (IBA 15.2.5.13, Table 206), 6 bytes: one direction of one
//! link, from a port to its neighbour. Ports are named by their node's
//! LID (a switch's port 0 LID) and port number.
//!
//! ```text
//!  0: FromLID (16)     | FromPort (8) | ToPort (8)
//!  4: ToLID (16)
//! ```
//! A GetTableResp spaces records 8 bytes apart (AttributeOffset 1).

use super::{Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, WireResult};
use crate::types::Lid;

/// LinkRecord's size on the wire.
pub const LINK_RECORD_LEN: usize = 6;

mod field {
    pub const FROM_LID: usize = 0;
    pub const FROM_PORT: usize = 2;
    pub const TO_PORT: usize = 3;
    pub const TO_LID: usize = 4;
}

/// LinkRecord component mask bits (IBA 15.2.5.13).
pub mod link_mask {
    pub const FROM_LID: u64 = 1 << 0;
    pub const FROM_PORT: u64 = 1 << 1;
    pub const TO_PORT: u64 = 1 << 2;
    pub const TO_LID: u64 = 1 << 3;
}

/// A zero-copy view of one LinkRecord.
#[derive(Debug, Clone, Copy)]
pub struct LinkRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> LinkRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("LinkRecord", buffer.as_ref(), LINK_RECORD_LEN)?;
        Ok(LinkRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn from_lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::FROM_LID))
    }
    pub fn from_port(&self) -> u8 {
        self.b()[field::FROM_PORT]
    }
    pub fn to_port(&self) -> u8 {
        self.b()[field::TO_PORT]
    }
    pub fn to_lid(&self) -> Lid {
        Lid(be::u16(self.b(), field::TO_LID))
    }
}

/// The owned form of a LinkRecord.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LinkRecordRepr {
    pub from_lid: Lid,
    pub from_port: u8,
    pub to_port: u8,
    pub to_lid: Lid,
}

impl LinkRecordRepr {
    pub fn parse<T: AsRef<[u8]>>(r: &LinkRecord<T>) -> WireResult<Self> {
        Ok(LinkRecordRepr {
            from_lid: r.from_lid(),
            from_port: r.from_port(),
            to_port: r.to_port(),
            to_lid: r.to_lid(),
        })
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&LinkRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        LINK_RECORD_LEN
    }

    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len("LinkRecord", out, LINK_RECORD_LEN)?;
        be::set_u16(out, field::FROM_LID, self.from_lid.0);
        out[field::FROM_PORT] = self.from_port;
        out[field::TO_PORT] = self.to_port;
        be::set_u16(out, field::TO_LID, self.to_lid.0);
        Ok(())
    }

    /// The same link seen from the other end.
    pub fn reversed(&self) -> Self {
        LinkRecordRepr {
            from_lid: self.to_lid,
            from_port: self.to_port,
            to_port: self.from_port,
            to_lid: self.from_lid,
        }
    }
}

impl SaRecord for LinkRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::LinkRecord;
    const LEN: usize = LINK_RECORD_LEN;
    const COMPONENTS: &'static [Component] =
        &[Component::bytes(0, 2), Component::bytes(2, 1), Component::bytes(3, 1), Component::bytes(4, 2)];
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        LinkRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        LinkRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::component_checks::{assert_fields_and_reserved, assert_tiles};
    use crate::mad::sa::components_match;
    use crate::mad::WireError;

    #[test]
    fn hand_built_bytes_parse_and_emit_back() {
        let b = [0x00, 0x0b, 17, 1, 0x01, 0x2c];
        let r = LinkRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(r, LinkRecordRepr { from_lid: Lid(11), from_port: 17, to_port: 1, to_lid: Lid(300) });
        let mut out = [0xAAu8; 6];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b);
        assert_eq!(LinkRecord::new_checked(&b[..]).unwrap().to_lid(), Lid(300));
    }

    #[test]
    fn every_field_round_trips() {
        let r = LinkRecordRepr { from_lid: Lid(0xBFFF), from_port: 0xfe, to_port: 0, to_lid: Lid(0x0101) };
        assert_eq!(LinkRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap(), r);
        assert_eq!(r.reversed().reversed(), r);
        assert_eq!(r.reversed().from_lid, Lid(0x0101));
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            LinkRecordRepr::parse_bytes(&[0u8; 5]),
            Err(WireError::Truncated { what: "LinkRecord", len: 5, need: 6 })
        );
        assert!(LinkRecordRepr::default().emit(&mut [0u8; 4]).is_err());
    }

    #[test]
    fn the_table_tiles_the_record() {
        assert_tiles::<LinkRecordRepr>();
        assert_fields_and_reserved::<LinkRecordRepr>(&[], &[]);
        assert_eq!(LinkRecordRepr::attribute_offset(), 1);
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let c = LinkRecordRepr::COMPONENTS;
        let a = LinkRecordRepr { from_lid: Lid(3), from_port: 5, to_port: 1, to_lid: Lid(9) };
        let b = LinkRecordRepr { to_port: 2, ..a };
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        assert!(components_match(c, link_mask::FROM_LID | link_mask::FROM_PORT | link_mask::TO_LID, &qa, &qb));
        assert!(!components_match(c, link_mask::TO_PORT, &qa, &qb));
    }
}
