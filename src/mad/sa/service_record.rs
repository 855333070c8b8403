//! ServiceRecord (IBA 15.2.5.14), 176 bytes: a service a port registers
//! with the SA (SubnAdmSet) for others to find (SubnAdmGet/GetTable).
//! ```text
//!   0: ServiceID (64)
//!   8: ServiceGID (128)
//!  24: ServiceP_Key (16)      | Reserved (16)
//!  28: ServiceLease (32)      seconds; 0xFFFFFFFF never expires
//!  32: ServiceKey (128)
//!  48: ServiceName (512)      UTF-8, NUL-terminated
//! 112: ServiceData8[0..16]    (8 each)
//! 128: ServiceData16[0..8]    (16 each)
//! 144: ServiceData32[0..4]    (32 each)
//! 160: ServiceData64[0..2]    (64 each)
//! ```
//!
//! Component mask, one bit per field in order, the reserved one included,
//! and one per ServiceData element (as OpenSM's `IB_SR_COMPMASK_*` numbers
//! them): ServiceID 0, ServiceGID 1, ServiceP_Key 2, Reserved 3,
//! ServiceLease 4, ServiceKey 5, ServiceName 6, ServiceData8[i] 7 + i,
//! ServiceData16[i] 23 + i, ServiceData32[i] 31 + i, ServiceData64[i] 35 + i.

use std::borrow::Cow;

use super::{gid_at, Component, SaAttributeId, SaRecord};
use crate::mad::{be, check_len, WireError, WireResult};

/// ServiceRecord's size on the wire.
pub const SERVICE_RECORD_LEN: usize = 176;
/// The ServiceLease that never expires.
pub const SERVICE_LEASE_INFINITE: u32 = 0xFFFF_FFFF;
/// Bytes of ServiceName.
pub const SERVICE_NAME_LEN: usize = 64;

const WHAT: &str = "ServiceRecord";

/// ServiceRecord component mask bits (IBA 15.2.5.14).
pub mod service_mask {
    pub const SERVICE_ID: u64 = 1 << 0;
    pub const SERVICE_GID: u64 = 1 << 1;
    pub const SERVICE_PKEY: u64 = 1 << 2;
    pub const SERVICE_LEASE: u64 = 1 << 4;
    pub const SERVICE_KEY: u64 = 1 << 5;
    pub const SERVICE_NAME: u64 = 1 << 6;
    /// ServiceData8[i] (i < 16); zero past the array.
    pub const fn data8(i: u8) -> u64 {
        if i < 16 {
            1 << (7 + i)
        } else {
            0
        }
    }
    /// ServiceData16[i] (i < 8); zero past the array.
    pub const fn data16(i: u8) -> u64 {
        if i < 8 {
            1 << (23 + i)
        } else {
            0
        }
    }
    /// ServiceData32[i] (i < 4); zero past the array.
    pub const fn data32(i: u8) -> u64 {
        if i < 4 {
            1 << (31 + i)
        } else {
            0
        }
    }
    /// ServiceData64[i] (i < 2); zero past the array.
    pub const fn data64(i: u8) -> u64 {
        if i < 2 {
            1 << (35 + i)
        } else {
            0
        }
    }
    pub const ALL_DATA8: u64 = 0xFFFF << 7;
    pub const ALL_DATA16: u64 = 0xFF << 23;
    pub const ALL_DATA32: u64 = 0xF << 31;
    pub const ALL_DATA64: u64 = 0x3 << 35;
}

mod field {
    use std::ops::Range;
    pub const SERVICE_ID: usize = 0;
    pub const SERVICE_GID: usize = 8;
    pub const SERVICE_PKEY: usize = 24;
    pub const SERVICE_LEASE: usize = 28;
    pub const SERVICE_KEY: usize = 32;
    pub const SERVICE_NAME: Range<usize> = 48..112;
    pub const DATA8: usize = 112;
    pub const DATA16: usize = 128;
    pub const DATA32: usize = 144;
    pub const DATA64: usize = 160;
}

/// A zero-copy view of one ServiceRecord.
#[derive(Debug, Clone, Copy)]
pub struct ServiceRecord<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ServiceRecord<T> {
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len(WHAT, buffer.as_ref(), SERVICE_RECORD_LEN)?;
        Ok(ServiceRecord { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn service_id(&self) -> u64 {
        be::u64(self.b(), field::SERVICE_ID)
    }
    pub fn service_gid(&self) -> [u8; 16] {
        gid_at(self.b(), field::SERVICE_GID)
    }
    pub fn service_pkey(&self) -> u16 {
        be::u16(self.b(), field::SERVICE_PKEY)
    }
    pub fn service_lease(&self) -> u32 {
        be::u32(self.b(), field::SERVICE_LEASE)
    }
    pub fn service_key(&self) -> [u8; 16] {
        gid_at(self.b(), field::SERVICE_KEY)
    }
    /// The 64 raw bytes of ServiceName.
    pub fn service_name(&self) -> &[u8] {
        &self.b()[field::SERVICE_NAME]
    }
    /// ServiceData8[i], None past 15.
    pub fn data8(&self, i: usize) -> Option<u8> {
        (i < 16).then(|| self.b()[field::DATA8 + i])
    }
    /// ServiceData16[i], None past 7.
    pub fn data16(&self, i: usize) -> Option<u16> {
        (i < 8).then(|| be::u16(self.b(), field::DATA16 + 2 * i))
    }
    /// ServiceData32[i], None past 3.
    pub fn data32(&self, i: usize) -> Option<u32> {
        (i < 4).then(|| be::u32(self.b(), field::DATA32 + 4 * i))
    }
    /// ServiceData64[i], None past 1.
    pub fn data64(&self, i: usize) -> Option<u64> {
        (i < 2).then(|| be::u64(self.b(), field::DATA64 + 8 * i))
    }
}

/// The owned form of a ServiceRecord. The name is kept as its 64 wire
/// bytes, so a record the SA stores comes back byte for byte (OpenSM
/// compares names that way too); [`ServiceRecordRepr::name`] reads it as
/// text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecordRepr {
    pub service_id: u64,
    pub service_gid: [u8; 16],
    pub service_pkey: u16,
    /// Seconds; [`SERVICE_LEASE_INFINITE`] never expires.
    pub service_lease: u32,
    pub service_key: [u8; 16],
    pub service_name: [u8; SERVICE_NAME_LEN],
    pub service_data8: [u8; 16],
    pub service_data16: [u16; 8],
    pub service_data32: [u32; 4],
    pub service_data64: [u64; 2],
}

impl Default for ServiceRecordRepr {
    fn default() -> Self {
        ServiceRecordRepr {
            service_id: 0,
            service_gid: [0; 16],
            service_pkey: 0,
            service_lease: 0,
            service_key: [0; 16],
            service_name: [0; SERVICE_NAME_LEN],
            service_data8: [0; 16],
            service_data16: [0; 8],
            service_data32: [0; 4],
            service_data64: [0; 2],
        }
    }
}

impl ServiceRecordRepr {
    /// Every bit pattern is a record, so this cannot fail once the view exists.
    pub fn parse<T: AsRef<[u8]>>(r: &ServiceRecord<T>) -> WireResult<Self> {
        let mut out = ServiceRecordRepr {
            service_id: r.service_id(),
            service_gid: r.service_gid(),
            service_pkey: r.service_pkey(),
            service_lease: r.service_lease(),
            service_key: r.service_key(),
            ..Default::default()
        };
        out.service_name.copy_from_slice(r.service_name());
        for (i, x) in out.service_data8.iter_mut().enumerate() {
            *x = r.data8(i).unwrap_or(0);
        }
        for (i, x) in out.service_data16.iter_mut().enumerate() {
            *x = r.data16(i).unwrap_or(0);
        }
        for (i, x) in out.service_data32.iter_mut().enumerate() {
            *x = r.data32(i).unwrap_or(0);
        }
        for (i, x) in out.service_data64.iter_mut().enumerate() {
            *x = r.data64(i).unwrap_or(0);
        }
        Ok(out)
    }

    pub fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        Self::parse(&ServiceRecord::new_checked(b)?)
    }

    pub fn buffer_len(&self) -> usize {
        SERVICE_RECORD_LEN
    }

    /// ServiceName up to its first NUL, invalid UTF-8 replaced.
    pub fn name(&self) -> Cow<'_, str> {
        let end = self.service_name.iter().position(|&c| c == 0).unwrap_or(SERVICE_NAME_LEN);
        String::from_utf8_lossy(&self.service_name[..end])
    }

    /// Sets ServiceName to `name`, NUL-padded. At most 63 bytes, so the
    /// field stays NUL-terminated as the IBA asks.
    pub fn set_name(&mut self, name: &str) -> WireResult<()> {
        let max = SERVICE_NAME_LEN - 1;
        if name.len() > max {
            return Err(WireError::Oversized { what: "ServiceName", len: name.len(), max });
        }
        self.service_name = [0; SERVICE_NAME_LEN];
        self.service_name[..name.len()].copy_from_slice(name.as_bytes());
        Ok(())
    }

    /// Writes all 176 bytes, the reserved ones zero.
    pub fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        check_len(WHAT, out, SERVICE_RECORD_LEN)?;
        let out = &mut out[..SERVICE_RECORD_LEN];
        out.fill(0);
        be::set_u64(out, field::SERVICE_ID, self.service_id);
        out[field::SERVICE_GID..field::SERVICE_GID + 16].copy_from_slice(&self.service_gid);
        be::set_u16(out, field::SERVICE_PKEY, self.service_pkey);
        be::set_u32(out, field::SERVICE_LEASE, self.service_lease);
        out[field::SERVICE_KEY..field::SERVICE_KEY + 16].copy_from_slice(&self.service_key);
        out[field::SERVICE_NAME].copy_from_slice(&self.service_name);
        out[field::DATA8..field::DATA8 + 16].copy_from_slice(&self.service_data8);
        for (i, &x) in self.service_data16.iter().enumerate() {
            be::set_u16(out, field::DATA16 + 2 * i, x);
        }
        for (i, &x) in self.service_data32.iter().enumerate() {
            be::set_u32(out, field::DATA32 + 4 * i, x);
        }
        for (i, &x) in self.service_data64.iter().enumerate() {
            be::set_u64(out, field::DATA64 + 8 * i, x);
        }
        Ok(())
    }
}

/// The 37 components: seven fields, then every ServiceData element.
const fn service_components() -> [Component; 37] {
    let mut c = [Component::bytes(0, 8); 37];
    c[1] = Component::bytes(8, 16);
    c[2] = Component::bytes(24, 2);
    c[3] = Component::bytes(26, 2);
    c[4] = Component::bytes(28, 4);
    c[5] = Component::bytes(32, 16);
    c[6] = Component::bytes(48, 64);
    let mut i = 0;
    while i < 16 {
        c[7 + i] = Component::bytes(112 + i as u16, 1);
        i += 1;
    }
    i = 0;
    while i < 8 {
        c[23 + i] = Component::bytes(128 + 2 * i as u16, 2);
        i += 1;
    }
    i = 0;
    while i < 4 {
        c[31 + i] = Component::bytes(144 + 4 * i as u16, 4);
        i += 1;
    }
    i = 0;
    while i < 2 {
        c[35 + i] = Component::bytes(160 + 8 * i as u16, 8);
        i += 1;
    }
    c
}

const SERVICE_COMPONENTS: [Component; 37] = service_components();

impl SaRecord for ServiceRecordRepr {
    const ATTRIBUTE: SaAttributeId = SaAttributeId::ServiceRecord;
    const LEN: usize = SERVICE_RECORD_LEN;
    const COMPONENTS: &'static [Component] = &SERVICE_COMPONENTS;
    fn parse_bytes(b: &[u8]) -> WireResult<Self> {
        ServiceRecordRepr::parse_bytes(b)
    }
    fn emit(&self, out: &mut [u8]) -> WireResult<()> {
        ServiceRecordRepr::emit(self, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::components_match;

    /// Every field distinct, laid out by hand from the table above.
    fn wire() -> [u8; 176] {
        let mut b = [0u8; 176];
        b[0..8].copy_from_slice(&[0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x42]);
        b[8..10].copy_from_slice(&[0xFE, 0x80]);
        b[16..24].copy_from_slice(&[0x00, 0x02, 0xC9, 0x03, 0x00, 0xAB, 0xCD, 0xEF]);
        b[24..26].copy_from_slice(&[0xFF, 0xFF]);
        b[28..32].copy_from_slice(&[0x00, 0x00, 0x0E, 0x10]); // 3600 s
        for (i, x) in b[32..48].iter_mut().enumerate() {
            *x = 0xA0 + i as u8;
        }
        b[48..55].copy_from_slice(b"ibsm.sa");
        for (i, x) in b[112..128].iter_mut().enumerate() {
            *x = 0x80 + i as u8;
        }
        for i in 0..8 {
            b[128 + 2 * i..130 + 2 * i].copy_from_slice(&[0x16, i as u8]);
        }
        for i in 0..4 {
            b[144 + 4 * i..148 + 4 * i].copy_from_slice(&[0x32, 0, 0, i as u8]);
        }
        b[160..168].copy_from_slice(&[0x64, 0, 0, 0, 0, 0, 0, 0]);
        b[168..176].copy_from_slice(&[0x64, 0, 0, 0, 0, 0, 0, 1]);
        b
    }

    #[test]
    fn bytes_to_repr_and_back() {
        let b = wire();
        let r = ServiceRecordRepr::parse_bytes(&b).unwrap();
        assert_eq!(r.service_id, 0x1000_0000_0000_0042);
        assert_eq!((r.service_gid[0], r.service_gid[15]), (0xFE, 0xEF));
        assert_eq!((r.service_pkey, r.service_lease), (0xFFFF, 3600));
        assert_eq!((r.service_key[0], r.service_key[15]), (0xA0, 0xAF));
        assert_eq!(r.name(), "ibsm.sa");
        assert_eq!((r.service_data8[0], r.service_data8[15]), (0x80, 0x8F));
        assert_eq!(r.service_data16, [0x1600, 0x1601, 0x1602, 0x1603, 0x1604, 0x1605, 0x1606, 0x1607]);
        assert_eq!(r.service_data32, [0x3200_0000, 0x3200_0001, 0x3200_0002, 0x3200_0003]);
        assert_eq!(r.service_data64, [0x6400_0000_0000_0000, 0x6400_0000_0000_0001]);
        let v = ServiceRecord::new_checked(&b[..]).unwrap();
        assert_eq!((v.data8(16), v.data16(8), v.data32(4), v.data64(2)), (None, None, None, None));
        assert_eq!(v.data64(1), Some(0x6400_0000_0000_0001));
        let mut out = [0xAAu8; 176];
        r.emit(&mut out).unwrap();
        assert_eq!(out, b, "the reserved bytes 26-27 written as zero");
    }

    #[test]
    fn every_field_round_trips() {
        let mut r = ServiceRecordRepr {
            service_id: u64::MAX - 1,
            service_gid: [7; 16],
            service_pkey: 0x8001,
            service_lease: SERVICE_LEASE_INFINITE,
            service_key: [9; 16],
            service_name: [0xFF; 64],
            service_data8: [1; 16],
            service_data16: [0xFFFE; 8],
            service_data32: [0xDEAD_BEEF; 4],
            service_data64: [1, u64::MAX],
        };
        assert_eq!(ServiceRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap(), r);
        r.set_name("DAPL").unwrap();
        assert_eq!(r.name(), "DAPL");
        assert_eq!(ServiceRecordRepr::parse_bytes(&SaRecord::to_bytes(&r)).unwrap(), r);
    }

    #[test]
    fn names_longer_than_the_field_are_refused() {
        let mut r = ServiceRecordRepr::default();
        assert!(r.set_name(&"x".repeat(63)).is_ok());
        assert_eq!(r.service_name[63], 0);
        assert_eq!(r.set_name(&"x".repeat(64)), Err(WireError::Oversized { what: "ServiceName", len: 64, max: 63 }));
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(
            ServiceRecordRepr::parse_bytes(&wire()[..175]),
            Err(WireError::Truncated { what: WHAT, len: 175, need: 176 })
        );
        assert!(ServiceRecordRepr::default().emit(&mut [0u8; 100]).is_err());
    }

    #[test]
    fn the_mask_bits_select_the_fields_their_names_say() {
        let a = ServiceRecordRepr::parse_bytes(&wire()).unwrap();
        let mut b = a.clone();
        b.service_data8[3] = 0;
        b.service_data64[1] = 0;
        let (qa, qb) = (SaRecord::to_bytes(&a), SaRecord::to_bytes(&b));
        let c = ServiceRecordRepr::COMPONENTS;
        assert_eq!(c[7 + 3], Component::bytes(115, 1));
        assert_eq!(c[36], Component::bytes(168, 8));
        let same =
            service_mask::SERVICE_ID | service_mask::SERVICE_NAME | service_mask::data8(2) | service_mask::data64(0);
        assert!(components_match(c, same, &qa, &qb));
        assert!(!components_match(c, service_mask::data8(3), &qa, &qb));
        assert!(!components_match(c, service_mask::data64(1), &qa, &qb));
        assert!(!components_match(c, service_mask::ALL_DATA8, &qa, &qb));
        assert!(components_match(c, service_mask::ALL_DATA16 | service_mask::ALL_DATA32, &qa, &qb));
        let mut d = a.clone();
        d.set_name("other").unwrap();
        assert!(!components_match(c, service_mask::SERVICE_NAME, &qa, &SaRecord::to_bytes(&d)));
        assert_eq!(service_mask::data64(1), 1 << 36);
        assert_eq!(service_mask::data8(16), 0);
        assert!(!components_match(c, 1 << 37, &qa, &qa), "bit 37 names no field");
        super::super::component_checks::assert_tiles::<ServiceRecordRepr>();
    }
}
