//! The RMPP header (IBA 13.6.2.1, Figure 171): bytes 24..36 of every MAD of
//! a class that uses the Reliable Multi-Packet Transaction Protocol (SA,
//! device management, vendor range 2), right after the common header.
//!
//! ```text
//! 24: RMPPVersion (8) | RMPPType (8) | RRespTime (5) RMPPFlags (3) | RMPPStatus (8)
//! 28: Data1 (32): SegmentNumber of a DATA or ACK
//! 32: Data2 (32): PayloadLength of a DATA, NewWindowLast of an ACK
//! ```
//!
//! RMPPFlags bit 0 is Active (the MAD is part of an RMPP transfer at all),
//! bit 1 First and bit 2 Last (IBA 13.6.2.1, Table 112). The transfer logic
//! lives in `crate::rmpp`; this file only reads and writes the 12 bytes.

use super::codes::open_enum;
use super::{be, check_len, WireResult};

mod field {
    use crate::mad::Bits;
    pub const VERSION: usize = 24;
    pub const TYPE: usize = 25;
    pub const RESP_TIME: Bits = Bits::new(26, 3, 5);
    pub const FLAGS: Bits = Bits::new(26, 0, 3);
    pub const STATUS: usize = 27;
    pub const DATA1: usize = 28;
    pub const DATA2: usize = 32;
}

/// Where the RMPP header starts in a MAD.
pub const RMPP_HEADER_OFFSET: usize = 24;
/// Where the RMPP payload starts: everything from here on in each segment
/// (class header included) counts in PayloadLength (IBA 13.6.2.3).
pub const RMPP_DATA_OFFSET: usize = 36;
/// RMPP payload bytes per 256-byte segment.
pub const RMPP_SEGMENT_DATA: usize = crate::mad::MAD_SIZE - RMPP_DATA_OFFSET;
/// The only RMPPVersion the IBA defines.
pub const RMPP_VERSION: u8 = 1;
/// RRespTime 0x1F: "no time value is given" (IBA 13.6.2.1).
pub const NO_RESP_TIME: u8 = 0x1F;

open_enum! {
    /// RMPPType (IBA 13.6.2.1, Table 111). 0 means "not RMPP".
    RmppType: u8 {
        Data = 1,
        Ack = 2,
        Stop = 3,
        Abort = 4,
    }
}

open_enum! {
    /// RMPPStatus (IBA 13.6.2.2, Table 113): 0 with DATA and ACK, 1 with
    /// STOP, 118..=127 with ABORT (128..=191 are class specific).
    RmppStatus: u8 {
        Normal = 0,
        /// STOP: the receiver has no room (ResX).
        ResourcesExhausted = 1,
        /// T2L: total time too long.
        TotalTimeTooLong = 118,
        /// Inconsistent Last and PayloadLength.
        InconsistentLastLength = 119,
        /// Inconsistent First and SegmentNumber.
        InconsistentFirstSegment = 120,
        /// BadT: bad RMPPType.
        BadType = 121,
        /// W2S: NewWindowLast too small.
        NewWindowLastTooSmall = 122,
        /// S2B: SegmentNumber too big.
        SegmentNumberTooBig = 123,
        /// Illegal status.
        IllegalStatus = 124,
        /// UnV: unsupported version.
        UnsupportedVersion = 125,
        /// TmR: too many retries.
        TooManyRetries = 126,
        /// Unspecified.
        Unspecified = 127,
    }
}

impl RmppStatus {
    /// Whether an ABORT may carry this status (IBA 13.6.2.2: 118..=127, and
    /// the class-specific 128..=191).
    pub fn is_abort_status(self) -> bool {
        matches!(u8::from(self), 118..=191)
    }
}

/// RMPPFlags (IBA 13.6.2.1, Table 112).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RmppFlags {
    pub active: bool,
    pub first: bool,
    pub last: bool,
}

impl RmppFlags {
    pub const ACTIVE: u8 = 0x1;
    pub const FIRST: u8 = 0x2;
    pub const LAST: u8 = 0x4;

    /// The flags of the low 3 bits of `b`.
    pub fn from_bits(b: u8) -> Self {
        RmppFlags { active: b & Self::ACTIVE != 0, first: b & Self::FIRST != 0, last: b & Self::LAST != 0 }
    }
    pub fn bits(self) -> u8 {
        u8::from(self.active) * Self::ACTIVE + u8::from(self.first) * Self::FIRST + u8::from(self.last) * Self::LAST
    }
}

/// A zero-copy view of the RMPP header of a whole MAD (offsets are from
/// the start of the MAD, as in every other MAD view here).
#[derive(Debug, Clone, Copy)]
pub struct RmppHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RmppHeader<T> {
    /// Wraps `buffer` after checking it reaches past the RMPP header; the
    /// payload after it may be short or absent.
    pub fn new_checked(buffer: T) -> WireResult<Self> {
        check_len("RMPP header", buffer.as_ref(), RMPP_DATA_OFFSET)?;
        Ok(RmppHeader { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn rmpp_type(&self) -> RmppType {
        self.buffer.as_ref()[field::TYPE].into()
    }
    /// RRespTime (5 bits): how long the receiver of this MAD may take to
    /// answer, 4.096 us × 2^RRespTime; 0x1F when not given.
    pub fn resp_time(&self) -> u8 {
        field::RESP_TIME.get(self.buffer.as_ref())
    }
    pub fn flags(&self) -> RmppFlags {
        RmppFlags::from_bits(field::FLAGS.get(self.buffer.as_ref()))
    }
    pub fn status(&self) -> RmppStatus {
        self.buffer.as_ref()[field::STATUS].into()
    }
    pub fn data1(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::DATA1)
    }
    pub fn data2(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::DATA2)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RmppHeader<T> {
    pub fn set_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }
    pub fn set_rmpp_type(&mut self, v: RmppType) {
        self.buffer.as_mut()[field::TYPE] = v.into();
    }
    /// Stores the low 5 bits of `v`.
    pub fn set_resp_time(&mut self, v: u8) {
        field::RESP_TIME.set(self.buffer.as_mut(), v);
    }
    pub fn set_flags(&mut self, v: RmppFlags) {
        field::FLAGS.set(self.buffer.as_mut(), v.bits());
    }
    pub fn set_status(&mut self, v: RmppStatus) {
        self.buffer.as_mut()[field::STATUS] = v.into();
    }
    pub fn set_data1(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::DATA1, v);
    }
    pub fn set_data2(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::DATA2, v);
    }
}

/// The owned form of the RMPP header. Parsing only needs the bytes to be
/// there: every code point is open, and what a value means for a transfer
/// is the RMPP core's judgement, not the wire layer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmppHeaderRepr {
    pub version: u8,
    pub rmpp_type: RmppType,
    /// 5 bits.
    pub resp_time: u8,
    pub flags: RmppFlags,
    pub status: RmppStatus,
    /// SegmentNumber for DATA and ACK; reserved (0) for STOP and ABORT.
    pub data1: u32,
    /// PayloadLength for DATA (First and Last only, else 0), NewWindowLast
    /// for ACK; reserved (0) for STOP and ABORT.
    pub data2: u32,
}

impl RmppHeaderRepr {
    /// No RMPP at all (an all-zero header, as single-MAD GMPs carry).
    pub const INACTIVE: RmppHeaderRepr = RmppHeaderRepr {
        version: 0,
        rmpp_type: RmppType::Unknown(0),
        resp_time: 0,
        flags: RmppFlags { active: false, first: false, last: false },
        status: RmppStatus::Normal,
        data1: 0,
        data2: 0,
    };

    fn active(rmpp_type: RmppType, status: RmppStatus, data1: u32, data2: u32) -> Self {
        RmppHeaderRepr {
            version: RMPP_VERSION,
            rmpp_type,
            resp_time: NO_RESP_TIME,
            flags: RmppFlags { active: true, first: false, last: false },
            status,
            data1,
            data2,
        }
    }

    /// A DATA segment's header.
    pub fn data(segment: u32, payload_length: u32, first: bool, last: bool) -> Self {
        let mut r = Self::active(RmppType::Data, RmppStatus::Normal, segment, payload_length);
        r.flags.first = first;
        r.flags.last = last;
        r
    }
    /// An ACK of every segment up to `segment`, granting up to
    /// `new_window_last`.
    pub fn ack(segment: u32, new_window_last: u32) -> Self {
        Self::active(RmppType::Ack, RmppStatus::Normal, segment, new_window_last)
    }
    /// A STOP (the receiver wants no more; IBA uses status 1 only).
    pub fn stop(status: RmppStatus) -> Self {
        Self::active(RmppType::Stop, status, 0, 0)
    }
    /// An ABORT with `status`.
    pub fn abort(status: RmppStatus) -> Self {
        Self::active(RmppType::Abort, status, 0, 0)
    }

    pub fn segment_number(&self) -> u32 {
        self.data1
    }
    pub fn payload_length(&self) -> u32 {
        self.data2
    }
    pub fn new_window_last(&self) -> u32 {
        self.data2
    }

    pub fn parse<T: AsRef<[u8]>>(h: &RmppHeader<T>) -> WireResult<Self> {
        Ok(RmppHeaderRepr {
            version: h.version(),
            rmpp_type: h.rmpp_type(),
            resp_time: h.resp_time(),
            flags: h.flags(),
            status: h.status(),
            data1: h.data1(),
            data2: h.data2(),
        })
    }

    /// Parses the header of a whole MAD held in `mad`.
    pub fn parse_bytes(mad: &[u8]) -> WireResult<Self> {
        Self::parse(&RmppHeader::new_checked(mad)?)
    }

    /// Bytes of the MAD up to the end of the RMPP header.
    pub fn buffer_len(&self) -> usize {
        RMPP_DATA_OFFSET
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, h: &mut RmppHeader<T>) {
        h.set_version(self.version);
        h.set_rmpp_type(self.rmpp_type);
        h.set_resp_time(self.resp_time);
        h.set_flags(self.flags);
        h.set_status(self.status);
        h.set_data1(self.data1);
        h.set_data2(self.data2);
    }

    /// Writes the header into bytes 24..36 of `mad`, which must reach that
    /// far.
    pub fn emit_bytes(&self, mad: &mut [u8]) -> WireResult<()> {
        self.emit(&mut RmppHeader::new_checked(mad)?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    /// Bytes 24..36 of a first DATA segment as the Linux kernel sends a
    /// 5-segment GetTableResp: Active|First, RRespTime 0x1F, segment 1,
    /// PayloadLength 0x0428 (5 × 220 - 36 bytes of padding).
    const FIRST_DATA: [u8; 12] = [0x01, 0x01, 0xFB, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x04, 0x28];
    /// An ACK of segment 1 opening the window to segment 65.
    const ACK: [u8; 12] = [0x01, 0x02, 0xF9, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x41];
    /// An ABORT, too many retries.
    const ABORT: [u8; 12] = [0x01, 0x04, 0xF9, 0x7E, 0, 0, 0, 0, 0, 0, 0, 0];

    fn mad_with(h: &[u8; 12]) -> [u8; 36] {
        let mut m = [0x55u8; 36];
        m[24..].copy_from_slice(h);
        m
    }

    #[test]
    fn bytes_to_repr() {
        let r = RmppHeaderRepr::parse_bytes(&mad_with(&FIRST_DATA)).unwrap();
        assert_eq!(r, RmppHeaderRepr::data(1, 0x428, true, false));
        assert_eq!((r.version, r.rmpp_type, r.resp_time), (1, RmppType::Data, 0x1F));
        assert_eq!(r.flags, RmppFlags { active: true, first: true, last: false });
        assert_eq!((r.segment_number(), r.payload_length()), (1, 1064));
        let a = RmppHeaderRepr::parse_bytes(&mad_with(&ACK)).unwrap();
        assert_eq!((a.rmpp_type, a.segment_number(), a.new_window_last()), (RmppType::Ack, 1, 65));
        let x = RmppHeaderRepr::parse_bytes(&mad_with(&ABORT)).unwrap();
        assert_eq!((x.rmpp_type, x.status), (RmppType::Abort, RmppStatus::TooManyRetries));
    }

    #[test]
    fn repr_to_bytes_touches_only_the_header() {
        for (repr, bytes) in [
            (RmppHeaderRepr::data(1, 0x428, true, false), FIRST_DATA),
            (RmppHeaderRepr::ack(1, 65), ACK),
            (RmppHeaderRepr::abort(RmppStatus::TooManyRetries), ABORT),
        ] {
            let mut m = [0xAAu8; 40];
            repr.emit_bytes(&mut m).unwrap();
            assert_eq!(&m[24..36], &bytes);
            assert!(m[..24].iter().chain(&m[36..]).all(|&b| b == 0xAA), "only bytes 24..36 are written");
        }
        let mut m = [0u8; 36];
        RmppHeaderRepr::data(7, 0, false, true).emit_bytes(&mut m).unwrap();
        assert_eq!(m[26], 0xF8 | 0x5, "Active|Last under RRespTime 0x1F");
        assert_eq!(&m[28..32], &[0, 0, 0, 7]);
        let mut m = [0u8; 36];
        RmppHeaderRepr::INACTIVE.emit_bytes(&mut m).unwrap();
        assert_eq!(m, [0u8; 36]);
    }

    #[test]
    fn short_buffers_and_unknown_codes() {
        for len in 0..36 {
            assert!(matches!(RmppHeaderRepr::parse_bytes(&vec![0u8; len]), Err(WireError::Truncated { need: 36, .. })));
            assert!(RmppHeaderRepr::ack(1, 1).emit_bytes(&mut vec![0u8; len]).is_err());
        }
        let mut h = FIRST_DATA;
        h[1] = 9;
        h[3] = 200;
        let r = RmppHeaderRepr::parse_bytes(&mad_with(&h)).unwrap();
        assert_eq!((r.rmpp_type, r.status), (RmppType::Unknown(9), RmppStatus::Unknown(200)));
        assert!(RmppStatus::TotalTimeTooLong.is_abort_status() && RmppStatus::from(191).is_abort_status());
        assert!(!RmppStatus::ResourcesExhausted.is_abort_status() && !RmppStatus::from(192).is_abort_status());
    }

    #[test]
    fn the_status_codes_are_the_iba_ones() {
        let codes: Vec<u8> = [
            RmppStatus::Normal,
            RmppStatus::ResourcesExhausted,
            RmppStatus::TotalTimeTooLong,
            RmppStatus::InconsistentLastLength,
            RmppStatus::InconsistentFirstSegment,
            RmppStatus::BadType,
            RmppStatus::NewWindowLastTooSmall,
            RmppStatus::SegmentNumberTooBig,
            RmppStatus::IllegalStatus,
            RmppStatus::UnsupportedVersion,
            RmppStatus::TooManyRetries,
            RmppStatus::Unspecified,
        ]
        .into_iter()
        .map(u8::from)
        .collect();
        assert_eq!(codes, vec![0, 1, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]);
        assert_eq!([RmppType::Data, RmppType::Ack, RmppType::Stop, RmppType::Abort].map(u8::from), [1, 2, 3, 4]);
    }

    proptest! {
        #[test]
        fn parse_emit_is_identity_on_the_header(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            match RmppHeaderRepr::parse_bytes(&bytes) {
                Err(_) => prop_assert!(bytes.len() < 36),
                Ok(r) => {
                    let mut out = bytes.clone();
                    out[24..36].fill(0);
                    r.emit_bytes(&mut out).unwrap();
                    prop_assert_eq!(&out, &bytes);
                }
            }
        }
    }
}
