//! Subnet management packets: LID-routed (IBA 14.2.1.1, Figure 161) and
//! directed-route (IBA 14.2.1.2, Figure 162).
//!
//! ```text
//!  0: common MAD header; for directed route bytes 4-7 are
//!     D(1) Status(15) | HopPointer(8) | HopCount(8)
//! 24: M_Key (64)
//! 32: DrSLID (16) | DrDLID (16)        (directed route; reserved when LID-routed)
//! 36: reserved (28 bytes)
//! 64: SMP data (64 bytes)
//! 128: InitialPath (64 bytes)          (directed route; reserved when LID-routed)
//! 192: ReturnPath (64 bytes)           (directed route; reserved when LID-routed)
//! ```

use std::fmt;

use super::header::{MadHeader, MadHeaderRepr};
use super::{be, check_len, MgmtClass, WireError, WireResult, MAD_SIZE, SMP_DATA_LEN};
use crate::types::{Lid, MAX_DR_HOPS};

mod field {
    use std::ops::Range;
    pub const STATUS: usize = 4;
    pub const HOP_POINTER: usize = 6;
    pub const HOP_COUNT: usize = 7;
    pub const M_KEY: usize = 24;
    pub const DR_SLID: usize = 32;
    pub const DR_DLID: usize = 34;
    pub const DATA: Range<usize> = 64..128;
    pub const INITIAL_PATH: Range<usize> = 128..192;
    pub const RETURN_PATH: Range<usize> = 192..256;
}

const DIRECTION_BIT: u16 = 0x8000;

/// A zero-copy view of a whole SMP (always 256 bytes).
#[derive(Debug, Clone, Copy)]
pub struct Smp<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Smp<T> {
    /// Wraps `buffer` after checking it is exactly one MAD long.
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        let b = buffer.as_ref();
        check_len("SMP", b, MAD_SIZE)?;
        if b.len() > MAD_SIZE {
            return Err(WireError::Oversized { what: "SMP", len: b.len(), max: MAD_SIZE });
        }
        Ok(Smp { buffer })
    }

    pub fn header(&self) -> MadHeader<&[u8]> {
        MadHeader::new_checked(self.buffer.as_ref()).expect("an SMP holds a header")
    }
    pub fn is_directed(&self) -> bool {
        self.header().mgmt_class() == MgmtClass::SubnMgmtDirected
    }
    /// The D bit of a directed-route SMP: set on the way back (IBA 14.2.1.2).
    pub fn direction_inbound(&self) -> bool {
        be::u16(self.buffer.as_ref(), field::STATUS) & DIRECTION_BIT != 0
    }
    /// The 15-bit status of a directed-route SMP, or the 16-bit one of a
    /// LID-routed SMP.
    pub fn status(&self) -> u16 {
        let raw = be::u16(self.buffer.as_ref(), field::STATUS);
        if self.is_directed() {
            raw & !DIRECTION_BIT
        } else {
            raw
        }
    }
    pub fn hop_pointer(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_POINTER]
    }
    pub fn hop_count(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_COUNT]
    }
    pub fn m_key(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::M_KEY)
    }
    pub fn dr_slid(&self) -> Lid {
        Lid(be::u16(self.buffer.as_ref(), field::DR_SLID))
    }
    pub fn dr_dlid(&self) -> Lid {
        Lid(be::u16(self.buffer.as_ref(), field::DR_DLID))
    }
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }
    pub fn initial_path(&self) -> &[u8] {
        &self.buffer.as_ref()[field::INITIAL_PATH]
    }
    pub fn return_path(&self) -> &[u8] {
        &self.buffer.as_ref()[field::RETURN_PATH]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Smp<T> {
    pub fn header_mut(&mut self) -> MadHeader<&mut [u8]> {
        MadHeader::new_checked(&mut self.buffer.as_mut()[..]).expect("an SMP holds a header")
    }
    pub fn set_direction_inbound(&mut self, inbound: bool) {
        let b = self.buffer.as_mut();
        let raw = be::u16(b, field::STATUS);
        let raw = if inbound { raw | DIRECTION_BIT } else { raw & !DIRECTION_BIT };
        be::set_u16(b, field::STATUS, raw);
    }
    /// Sets the status, keeping the D bit of a directed-route SMP.
    pub fn set_status(&mut self, status: u16) {
        let directed = self.is_directed();
        let b = self.buffer.as_mut();
        let raw = be::u16(b, field::STATUS);
        let v = if directed { (raw & DIRECTION_BIT) | (status & !DIRECTION_BIT) } else { status };
        be::set_u16(b, field::STATUS, v);
    }
    pub fn set_hop_pointer(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_POINTER] = v;
    }
    pub fn set_hop_count(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_COUNT] = v;
    }
    pub fn set_m_key(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::M_KEY, v);
    }
    pub fn set_dr_slid(&mut self, v: Lid) {
        be::set_u16(self.buffer.as_mut(), field::DR_SLID, v.0);
    }
    pub fn set_dr_dlid(&mut self, v: Lid) {
        be::set_u16(self.buffer.as_mut(), field::DR_DLID, v.0);
    }
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
    pub fn initial_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::INITIAL_PATH]
    }
    pub fn return_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::RETURN_PATH]
    }
}

/// A directed-route path: the port to leave through at each hop.
/// Entry 0 of the wire array is unused (IBA 14.2.1.2), so at most 63 hops.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrPath {
    ports: [u8; MAX_DR_HOPS],
    len: u8,
}

impl DrPath {
    /// The empty path: the SM's own port.
    pub const fn local() -> Self {
        DrPath { ports: [0; MAX_DR_HOPS], len: 0 }
    }

    /// A path of `len` zero entries (an unfilled return path).
    pub fn zeros(len: usize) -> Self {
        DrPath { ports: [0; MAX_DR_HOPS], len: len.min(MAX_DR_HOPS) as u8 }
    }

    pub fn from_ports(ports: &[u8]) -> WireResult<Self> {
        if ports.len() > MAX_DR_HOPS {
            return Err(WireError::PathTooLong(ports.len()));
        }
        let mut p = DrPath::local();
        p.ports[..ports.len()].copy_from_slice(ports);
        p.len = ports.len() as u8;
        Ok(p)
    }

    /// This path extended by one hop out of `port`.
    pub fn extend(&self, port: u8) -> WireResult<Self> {
        if self.len() >= MAX_DR_HOPS {
            return Err(WireError::PathTooLong(self.len() + 1));
        }
        let mut p = *self;
        p.ports[p.len as usize] = port;
        p.len += 1;
        Ok(p)
    }

    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn ports(&self) -> &[u8] {
        &self.ports[..self.len as usize]
    }

    /// Reads hops 1..=hop_count of a 64-byte wire path array.
    fn from_wire(wire: &[u8], hop_count: u8) -> WireResult<Self> {
        let n = hop_count as usize;
        if n > MAX_DR_HOPS {
            return Err(WireError::HopCountTooLarge { hop_count });
        }
        DrPath::from_ports(&wire[1..=n])
    }

    fn to_wire(self, wire: &mut [u8]) {
        wire.fill(0);
        wire[1..=self.len()].copy_from_slice(self.ports());
    }

    /// Parses the comma-separated form smpquery takes: `0,1,3` (a leading 0
    /// is the local port and is dropped).
    pub fn parse_text(text: &str) -> Result<Self, String> {
        let mut ports = Vec::new();
        for (i, part) in text.split(',').enumerate() {
            let part = part.trim();
            let v: u8 = part.parse().map_err(|_| format!("path element {i} `{part}` is not a port number 0-255"))?;
            if i == 0 && v == 0 {
                continue;
            }
            ports.push(v);
        }
        DrPath::from_ports(&ports).map_err(|e| e.to_string())
    }
}

impl Default for DrPath {
    fn default() -> Self {
        DrPath::local()
    }
}

impl fmt::Debug for DrPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for DrPath {
    /// The smpquery form: `0,1,3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0")?;
        for p in self.ports() {
            write!(f, ",{p}")?;
        }
        Ok(())
    }
}

/// How an SMP travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmpRoute {
    /// LID-routed (class 0x01).
    Lid,
    /// Directed route (class 0x81), IBA 14.2.1.2.
    Directed {
        inbound: bool,
        hop_pointer: u8,
        hop_count: u8,
        dr_slid: Lid,
        dr_dlid: Lid,
        initial_path: DrPath,
        return_path: DrPath,
    },
}

/// The owned form of an SMP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmpRepr {
    pub header: MadHeaderRepr,
    pub m_key: u64,
    pub route: SmpRoute,
    pub data: [u8; SMP_DATA_LEN],
}

impl SmpRepr {
    /// Parses an SMP, checking the versions and the directed-route hop fields.
    /// The header's `status` holds the 15-bit status for directed route (the
    /// D bit goes into `route`) and `class_specific` is zero there (the hop
    /// fields go into `route`).
    pub fn parse<T: AsRef<[u8]>>(smp: &Smp<T>) -> WireResult<Self> {
        let mut header = MadHeaderRepr::parse(&smp.header())?;
        let route = match header.mgmt_class {
            MgmtClass::SubnMgmtDirected => {
                let hop_count = smp.hop_count();
                let hop_pointer = smp.hop_pointer();
                if hop_count as usize > MAX_DR_HOPS {
                    return Err(WireError::HopCountTooLarge { hop_count });
                }
                if hop_pointer as usize > hop_count as usize + 1 {
                    return Err(WireError::HopPointerBeyondCount { hop_pointer, hop_count });
                }
                header.status = smp.status();
                header.class_specific = 0;
                SmpRoute::Directed {
                    inbound: smp.direction_inbound(),
                    hop_pointer,
                    hop_count,
                    dr_slid: smp.dr_slid(),
                    dr_dlid: smp.dr_dlid(),
                    initial_path: DrPath::from_wire(smp.initial_path(), hop_count)?,
                    return_path: DrPath::from_wire(smp.return_path(), hop_count)?,
                }
            }
            MgmtClass::SubnMgmtLid => SmpRoute::Lid,
            other => {
                return Err(WireError::Forbidden { what: "SMP", field: "MgmtClass", value: u8::from(other) as u64 })
            }
        };
        let mut data = [0u8; SMP_DATA_LEN];
        data.copy_from_slice(smp.data());
        Ok(SmpRepr { header, m_key: smp.m_key(), route, data })
    }

    /// Parses raw bytes (the common entry point for untrusted input).
    pub fn parse_bytes(bytes: &[u8]) -> WireResult<Self> {
        Self::parse(&Smp::new_checked(bytes)?)
    }

    pub fn buffer_len(&self) -> usize {
        MAD_SIZE
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, smp: &mut Smp<T>) {
        smp.buffer.as_mut().fill(0);
        self.header.emit(&mut smp.header_mut());
        smp.set_m_key(self.m_key);
        smp.data_mut().copy_from_slice(&self.data);
        if let SmpRoute::Directed { inbound, hop_pointer, hop_count, dr_slid, dr_dlid, initial_path, return_path } =
            self.route
        {
            smp.set_status(self.header.status);
            smp.set_direction_inbound(inbound);
            smp.set_hop_pointer(hop_pointer);
            smp.set_hop_count(hop_count);
            smp.set_dr_slid(dr_slid);
            smp.set_dr_dlid(dr_dlid);
            initial_path.to_wire(smp.initial_path_mut());
            return_path.to_wire(smp.return_path_mut());
        }
    }

    /// Emits into a fresh 256-byte buffer.
    pub fn to_bytes(&self) -> [u8; MAD_SIZE] {
        let mut buf = [0u8; MAD_SIZE];
        self.emit(&mut Smp::new_checked(&mut buf[..]).expect("256 bytes"));
        buf
    }

    /// A directed-route request from the SM's port along `path`, with both
    /// DrSLID and DrDLID permissive (pure directed route, IBA 14.2.2.1).
    pub fn directed_request(
        method: super::Method,
        attribute_id: super::AttributeId,
        attribute_modifier: u32,
        path: DrPath,
        m_key: u64,
        data: [u8; SMP_DATA_LEN],
    ) -> Self {
        SmpRepr {
            header: MadHeaderRepr {
                mgmt_class: MgmtClass::SubnMgmtDirected,
                class_version: 1,
                method,
                status: 0,
                class_specific: 0,
                transaction_id: 0,
                attribute_id,
                attribute_modifier,
            },
            m_key,
            route: SmpRoute::Directed {
                inbound: false,
                hop_pointer: 0,
                hop_count: path.len() as u8,
                dr_slid: Lid::PERMISSIVE,
                dr_dlid: Lid::PERMISSIVE,
                initial_path: path,
                // The wire carries hop_count return-path entries; devices fill them in.
                return_path: DrPath::zeros(path.len()),
            },
            data,
        }
    }

    /// A LID-routed request to `lid` (the address goes in the transport).
    pub fn lid_request(
        method: super::Method,
        attribute_id: super::AttributeId,
        attribute_modifier: u32,
        m_key: u64,
        data: [u8; SMP_DATA_LEN],
    ) -> Self {
        SmpRepr {
            header: MadHeaderRepr {
                mgmt_class: MgmtClass::SubnMgmtLid,
                class_version: 1,
                method,
                status: 0,
                class_specific: 0,
                transaction_id: 0,
                attribute_id,
                attribute_modifier,
            },
            m_key,
            route: SmpRoute::Lid,
            data,
        }
    }

    /// The initial path of a directed-route SMP, if it is one.
    pub fn path(&self) -> Option<DrPath> {
        match self.route {
            SmpRoute::Directed { initial_path, .. } => Some(initial_path),
            SmpRoute::Lid => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::{AttributeId, Method};

    fn get_nodeinfo(path: &[u8]) -> SmpRepr {
        SmpRepr::directed_request(Method::Get, AttributeId::NodeInfo, 0, DrPath::from_ports(path).unwrap(), 0, [0; 64])
    }

    #[test]
    fn directed_get_layout() {
        let mut r = get_nodeinfo(&[1, 3]);
        r.header.transaction_id = 0xdead_beef;
        let b = r.to_bytes();
        assert_eq!(&b[0..4], &[1, 0x81, 1, 1]);
        assert_eq!(&b[4..8], &[0, 0, 0, 2], "status 0, hop pointer 0, hop count 2");
        assert_eq!(&b[12..16], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&b[16..18], &[0, 0x11]);
        assert_eq!(&b[32..36], &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&b[128..131], &[0, 1, 3]);
        assert_eq!(SmpRepr::parse_bytes(&b).unwrap(), r);
    }

    #[test]
    fn direction_bit_and_status_share_a_word() {
        let mut r = get_nodeinfo(&[1]);
        if let SmpRoute::Directed { inbound, .. } = &mut r.route {
            *inbound = true;
        }
        r.header.status = 0x001c;
        let b = r.to_bytes();
        assert_eq!(&b[4..6], &[0x80, 0x1c]);
        let back = SmpRepr::parse_bytes(&b).unwrap();
        assert_eq!(back.header.status, 0x1c);
        assert_eq!(back, r);
    }

    #[test]
    fn hop_fields_are_checked() {
        let mut b = get_nodeinfo(&[1]).to_bytes();
        b[7] = 64;
        assert_eq!(SmpRepr::parse_bytes(&b), Err(WireError::HopCountTooLarge { hop_count: 64 }));
        let mut b = get_nodeinfo(&[1]).to_bytes();
        b[6] = 3;
        assert_eq!(SmpRepr::parse_bytes(&b), Err(WireError::HopPointerBeyondCount { hop_pointer: 3, hop_count: 1 }));
        assert!(SmpRepr::parse_bytes(&b[..255]).is_err());
        assert!(DrPath::from_ports(&[1; 64]).is_err());
        assert!(DrPath::from_ports(&[1; 63]).unwrap().extend(1).is_err());
    }

    #[test]
    fn path_text_form() {
        let p = DrPath::parse_text("0,1,3").unwrap();
        assert_eq!(p.ports(), &[1, 3]);
        assert_eq!(p.to_string(), "0,1,3");
        assert!(DrPath::parse_text("0,x").is_err());
        assert_eq!(DrPath::parse_text("0").unwrap(), DrPath::local());
    }
}
