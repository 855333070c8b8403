//! The common MAD header (IBA 13.4.3, Figure 146).
//!
//! ```text
//! 0: BaseVersion | MgmtClass | ClassVersion | R + Method
//! 4: Status (16)             | ClassSpecific (16)
//! 8: TransactionID (64)
//! 16: AttributeID (16)       | Reserved (16)
//! 20: AttributeModifier (32)
//! ```

use super::{be, check_len, AttributeId, Method, MgmtClass, WireError, WireResult, MAD_HEADER_LEN, MAD_SIZE};

mod field {
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const STATUS: usize = 4;
    pub const CLASS_SPECIFIC: usize = 6;
    pub const TID: usize = 8;
    pub const ATTR_ID: usize = 16;
    pub const ATTR_MOD: usize = 20;
}

/// A zero-copy view of a MAD's common header.
#[derive(Debug, Clone, Copy)]
pub struct MadHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MadHeader<T> {
    /// Wraps `buffer` after checking it can hold a header and is no longer
    /// than one MAD.
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        let b = buffer.as_ref();
        check_len("MAD header", b, MAD_HEADER_LEN)?;
        if b.len() > MAD_SIZE {
            return Err(WireError::Oversized { what: "MAD", len: b.len(), max: MAD_SIZE });
        }
        Ok(MadHeader { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }
    pub fn mgmt_class(&self) -> MgmtClass {
        self.buffer.as_ref()[field::MGMT_CLASS].into()
    }
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }
    pub fn method(&self) -> Method {
        self.buffer.as_ref()[field::METHOD].into()
    }
    pub fn status(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::STATUS)
    }
    pub fn class_specific(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CLASS_SPECIFIC)
    }
    pub fn transaction_id(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::TID)
    }
    pub fn attribute_id(&self) -> AttributeId {
        be::u16(self.buffer.as_ref(), field::ATTR_ID).into()
    }
    pub fn attribute_modifier(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::ATTR_MOD)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MadHeader<T> {
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }
    pub fn set_mgmt_class(&mut self, v: MgmtClass) {
        self.buffer.as_mut()[field::MGMT_CLASS] = v.into();
    }
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }
    pub fn set_method(&mut self, v: Method) {
        self.buffer.as_mut()[field::METHOD] = v.into();
    }
    pub fn set_status(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::STATUS, v);
    }
    pub fn set_class_specific(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::CLASS_SPECIFIC, v);
    }
    pub fn set_transaction_id(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::TID, v);
    }
    pub fn set_attribute_id(&mut self, v: AttributeId) {
        be::set_u16(self.buffer.as_mut(), field::ATTR_ID, v.into());
    }
    pub fn set_attribute_modifier(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ATTR_MOD, v);
    }
}

/// The owned form of the common MAD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MadHeaderRepr {
    pub mgmt_class: MgmtClass,
    pub class_version: u8,
    pub method: Method,
    pub status: u16,
    pub class_specific: u16,
    pub transaction_id: u64,
    pub attribute_id: AttributeId,
    pub attribute_modifier: u32,
}

impl MadHeaderRepr {
    /// The class version each class defines (IBA 13.4.4; SA is version 2).
    pub fn expected_class_version(class: MgmtClass) -> Option<u8> {
        match class {
            MgmtClass::SubnMgmtLid | MgmtClass::SubnMgmtDirected | MgmtClass::Perf => Some(1),
            MgmtClass::SubnAdm => Some(2),
            MgmtClass::Unknown(_) => None,
        }
    }

    /// Parses a header, refusing base versions other than 1 and class
    /// versions other than the one the class defines. Unknown classes keep
    /// whatever class version they carry.
    pub fn parse<T: AsRef<[u8]>>(h: &MadHeader<T>) -> WireResult<Self> {
        if h.base_version() != 1 {
            return Err(WireError::BaseVersion(h.base_version()));
        }
        let class = h.mgmt_class();
        if let Some(v) = Self::expected_class_version(class) {
            if h.class_version() != v {
                return Err(WireError::ClassVersion { class: class.into(), version: h.class_version() });
            }
        }
        Ok(MadHeaderRepr {
            mgmt_class: class,
            class_version: h.class_version(),
            method: h.method(),
            status: h.status(),
            class_specific: h.class_specific(),
            transaction_id: h.transaction_id(),
            attribute_id: h.attribute_id(),
            attribute_modifier: h.attribute_modifier(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        MAD_HEADER_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut MadHeader<T>) {
        h.set_base_version(1);
        h.set_mgmt_class(self.mgmt_class);
        h.set_class_version(self.class_version);
        h.set_method(self.method);
        h.set_status(self.status);
        h.set_class_specific(self.class_specific);
        h.set_transaction_id(self.transaction_id);
        h.set_attribute_id(self.attribute_id);
        h.buffer.as_mut()[18] = 0;
        h.buffer.as_mut()[19] = 0;
        h.set_attribute_modifier(self.attribute_modifier);
    }
}

/// MAD status field values (IBA 13.4.7, Table 107): bits 2-4 are a code.
pub mod status {
    pub const BUSY: u16 = 0x0001;
    pub const REDIRECT: u16 = 0x0002;
    pub const BAD_VERSION: u16 = 0x1 << 2;
    pub const METHOD_UNSUPPORTED: u16 = 0x2 << 2;
    pub const METHOD_ATTR_UNSUPPORTED: u16 = 0x3 << 2;
    pub const INVALID_FIELD: u16 = 0x7 << 2;

    /// The 3-bit "invalid field" code of a status word.
    pub fn code(status: u16) -> u16 {
        (status >> 2) & 0x7
    }

    /// A human reading of the common bits of a status word (any class).
    pub fn describe(s: u16) -> &'static str {
        if s & BUSY != 0 {
            return "busy";
        }
        if s & REDIRECT != 0 {
            return "redirect required";
        }
        match code(s) {
            0 => "ok",
            1 => "bad version",
            2 => "method not supported",
            3 => "method/attribute combination not supported",
            7 => "invalid attribute or modifier",
            _ => "reserved status code",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A SubnGet(NodeInfo) header as smpquery sends it (TID 0x1234).
    const GET_NODEINFO: [u8; 24] = [
        0x01, 0x81, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x11,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parse_and_emit_round_trip() {
        let h = MadHeader::new_checked(&GET_NODEINFO[..]).unwrap();
        let r = MadHeaderRepr::parse(&h).unwrap();
        assert_eq!(r.mgmt_class, MgmtClass::SubnMgmtDirected);
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.attribute_id, AttributeId::NodeInfo);
        assert_eq!(r.transaction_id, 0x1234);
        let mut out = [0xAAu8; 24];
        r.emit(&mut MadHeader::new_checked(&mut out[..]).unwrap());
        assert_eq!(out, GET_NODEINFO);
    }

    #[test]
    fn refuses_bad_versions_and_sizes() {
        let mut b = GET_NODEINFO;
        b[0] = 2;
        assert_eq!(MadHeaderRepr::parse(&MadHeader::new_checked(&b[..]).unwrap()), Err(WireError::BaseVersion(2)));
        let mut b = GET_NODEINFO;
        b[2] = 2;
        assert!(matches!(
            MadHeaderRepr::parse(&MadHeader::new_checked(&b[..]).unwrap()),
            Err(WireError::ClassVersion { class: 0x81, version: 2 })
        ));
        assert!(MadHeader::new_checked(&GET_NODEINFO[..10]).is_err());
        assert!(MadHeader::new_checked(&[1u8; 257][..]).is_err());
    }

    #[test]
    fn unknown_codes_are_values() {
        let mut b = GET_NODEINFO;
        b[1] = 0x42;
        b[3] = 0x7e;
        b[16] = 0xff;
        b[17] = 0x90;
        let r = MadHeaderRepr::parse(&MadHeader::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.mgmt_class, MgmtClass::Unknown(0x42));
        assert_eq!(r.method, Method::Unknown(0x7e));
        assert_eq!(r.attribute_id, AttributeId::Unknown(0xff90));
    }
}
