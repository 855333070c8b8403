//! SA MADs in and out: what a received SA-class MAD is (a request, an RMPP
//! control segment for one of our answers, a ReportResp), and the bytes of
//! the answers and Reports the agent sends.
//!
//! Layout (IBA 15.2.1.1, Figure 193): the 24-byte common header, the RMPP
//! header (IBA 13.6.2.1) at 24..36, SM_Key 36..44, AttributeOffset 44..46,
//! ComponentMask 48..56, then 200 bytes of SA data.

use crate::datagram::{Datagram, MadAddress};
use crate::mad::header::status;
use crate::mad::rmpp::{RmppHeaderRepr, RmppType};
use crate::mad::sa::{SaAttributeId, SaMad, SA_DATA_LEN, SA_DATA_OFFSET};
use crate::mad::{AttributeId, NoticeRepr};
use crate::mad::{MadHeader, MadHeaderRepr, Method, MgmtClass, MAD_HEADER_LEN, MAD_SIZE};
use crate::rmpp::Segmentation;

/// The SA class version (IBA 15.2.1.1).
pub const SA_CLASS_VERSION: u8 = 2;

/// What one received SA-class MAD is.
#[derive(Debug)]
pub(crate) enum Received<'a> {
    /// A request the SA answers (or refuses).
    Request(Request<'a>),
    /// An RMPP segment that is not DATA (ACK, STOP, ABORT) — the receiver
    /// of one of our multi-MAD answers talking back.
    RmppControl { tid: u64 },
    /// A multi-segment RMPP request that was not reassembled.
    Segmented { request: Request<'a> },
    /// A response: a ReportResp to one of our Reports, or anything else.
    Response { method: Method, tid: u64 },
    /// The class version is not 2: answered BAD_VERSION when the method
    /// expects an answer.
    BadVersion { version: u8, answerable: bool },
    /// Not an SA MAD at all.
    Malformed,
}

/// One SA request, borrowed from the datagram.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    pub addr: MadAddress,
    pub method: Method,
    pub attribute: SaAttributeId,
    pub attribute_modifier: u32,
    pub tid: u64,
    pub sm_key: u64,
    pub mask: u64,
    /// The SA data: 200 bytes in a whole MAD, more in a reassembled RMPP
    /// request, less in a short one.
    pub data: &'a [u8],
    /// The MAD through ComponentMask, to echo into answers.
    header: &'a [u8],
    /// The whole MAD as received.
    pub mad: &'a [u8],
    /// It came as an RMPP DATA segment (a dual-sided RMPP GetMulti).
    pub rmpp: bool,
}

/// Classifies a received MAD. Never panics.
pub(crate) fn classify(dgram: &Datagram) -> Received<'_> {
    let mad = &dgram.mad[..];
    let Ok(h) = MadHeader::new_checked(&mad[..mad.len().min(MAD_HEADER_LEN)]) else {
        return Received::Malformed;
    };
    if h.base_version() != 1 || h.mgmt_class() != MgmtClass::SubnAdm {
        return Received::Malformed;
    }
    let method = h.method();
    let tid = h.transaction_id();
    if h.class_version() != SA_CLASS_VERSION {
        return Received::BadVersion { version: h.class_version(), answerable: method.expects_response() };
    }
    // The RMPP header (IBA 13.6.2.1); a MAD too short to hold one is no
    // RMPP segment (and is refused below as too short for the SA header).
    let rmpp = RmppHeaderRepr::parse_bytes(mad).ok().filter(|r| r.flags.active);
    if rmpp.is_some_and(|r| r.rmpp_type != RmppType::Data) {
        return Received::RmppControl { tid };
    }
    let rmpp_active = rmpp.is_some();
    if method.is_response() {
        return Received::Response { method, tid };
    }
    if !method.expects_response() {
        // Send, Trap, Report: one-way methods the SA does not take, and
        // codes no request has; never answered with a status (IBA 13.4.7,
        // as the dispatcher).
        return Received::Malformed;
    }
    let Ok(sa) = SaMad::new_checked(mad) else {
        return Received::Malformed;
    };
    let (sm_key, mask) = (sa.sm_key(), sa.component_mask());
    // The data runs to the end: 200 bytes in a whole MAD, more in a
    // reassembled RMPP request.
    let data = &mad[SA_DATA_OFFSET..];
    let request = Request {
        addr: dgram.addr,
        method,
        attribute: SaAttributeId::from(u16::from(h.attribute_id())),
        attribute_modifier: h.attribute_modifier(),
        tid,
        sm_key,
        mask,
        data,
        header: &mad[..SA_DATA_OFFSET],
        mad,
        rmpp: rmpp_active,
    };
    let whole = rmpp.is_some_and(|r| r.flags.first && r.flags.last);
    if rmpp_active && !whole && mad.len() <= MAD_SIZE {
        return Received::Segmented { request };
    }
    Received::Request(request)
}

/// The attribute an answer to a request for `attribute` carries: the
/// same, except that a GetMultiResp to a MultiPathRecord query, and its
/// refusal, carry PathRecord (IBA o15-0.2.7: the answer is a set of
/// PathRecords; OpenSM's answers and errors do the same).
pub(crate) fn answer_attribute(attribute: SaAttributeId) -> SaAttributeId {
    match attribute {
        SaAttributeId::MultiPathRecord => SaAttributeId::PathRecord,
        other => other,
    }
}

/// The header of an answer to `req`: its header with the response method,
/// the answer's attribute ([`answer_attribute`]), `status`, no RMPP,
/// SM_Key 0 (IBA C15-0.1.5: the SA never reveals its key) and
/// `attribute_offset`; the ComponentMask is echoed.
pub(crate) fn answer_header(req: &Request<'_>, status: u16, attribute_offset: u16) -> [u8; SA_DATA_OFFSET] {
    let mut h = [0u8; SA_DATA_OFFSET];
    h.copy_from_slice(req.header);
    let repr = MadHeaderRepr {
        mgmt_class: MgmtClass::SubnAdm,
        class_version: SA_CLASS_VERSION,
        method: req.method.response(),
        status,
        class_specific: 0,
        transaction_id: req.tid,
        attribute_id: AttributeId::from(u16::from(answer_attribute(req.attribute))),
        attribute_modifier: req.attribute_modifier,
    };
    repr.emit(&mut MadHeader::new_checked(&mut h[..MAD_HEADER_LEN]).expect("24 bytes hold a header"));
    RmppHeaderRepr::INACTIVE.emit_bytes(&mut h).expect("56 bytes hold the RMPP header");
    let mut sa = SaMad::new_checked(&mut h[..]).expect("56 bytes hold the SA header");
    sa.set_sm_key(0);
    sa.set_attribute_offset(attribute_offset);
    h
}

/// A one-MAD answer carrying `data` (at most 200 bytes; more is cut).
pub(crate) fn single_answer(req: &Request<'_>, status: u16, attribute_offset: u16, data: &[u8]) -> Datagram {
    let mut mad = vec![0u8; MAD_SIZE];
    mad[..SA_DATA_OFFSET].copy_from_slice(&answer_header(req, status, attribute_offset));
    let n = data.len().min(SA_DATA_LEN);
    mad[SA_DATA_OFFSET..SA_DATA_OFFSET + n].copy_from_slice(&data[..n]);
    if req.method == Method::GetTable || req.method == Method::GetMulti {
        // GetTableResp and GetMultiResp always travel as RMPP (IBA 13.6;
        // OpenSM marks a one-MAD GetTableResp the same way): one whole
        // segment, First and Last, which a receiver ACKs and we need not
        // wait for.
        mark_single_segment(&mut mad, n);
        // Only the records go out, as OpenSM sends them: a receiver with no
        // kernel RMPP (ibsim's clients) counts records by the MAD's length,
        // and a kernel pads a short MAD to 256 bytes anyway.
        mad.truncate(SA_DATA_OFFSET + n);
    }
    Datagram { addr: req.addr, mad }
}

/// Marks a one-MAD answer as the only RMPP DATA segment (First and
/// Last) of `data_len` bytes of SA data, with the PayloadLength the
/// sender's segments carry (`crate::rmpp::Segmentation`).
fn mark_single_segment(mad: &mut [u8], data_len: usize) {
    let Ok(layout) = Segmentation::new(SA_DATA_OFFSET, data_len.min(SA_DATA_LEN)) else { return };
    let header = RmppHeaderRepr::data(1, layout.payload_length(1), true, true);
    header.emit_bytes(mad).expect("a whole MAD holds the RMPP header");
}

/// The status answer to a MAD whose class version is not 2 (IBA 13.4.7:
/// BAD_VERSION), or any request the SA refuses before reading it: the
/// MAD echoed with the response method, the answer's attribute
/// ([`answer_attribute`]), `status` and SM_Key 0 (IBA C15-0.1.5, as every
/// answer).
pub(crate) fn status_echo(dgram: &Datagram, status_word: u16) -> Option<Datagram> {
    if dgram.mad.len() < MAD_HEADER_LEN {
        return None;
    }
    let mut mad = dgram.mad.clone();
    mad.truncate(MAD_SIZE);
    mad.resize(MAD_SIZE, 0);
    let mut h = MadHeader::new_checked(&mut mad[..MAD_HEADER_LEN]).ok()?;
    let method = h.method();
    h.set_method(method.response());
    h.set_status(status_word);
    let attribute = answer_attribute(SaAttributeId::from(u16::from(h.attribute_id())));
    h.set_attribute_id(AttributeId::from(u16::from(attribute)));
    // A status answer is one plain MAD: whatever RMPP header the request
    // carried (an ACK's, a segment's) does not go back.
    RmppHeaderRepr::INACTIVE.emit_bytes(&mut mad).ok()?;
    SaMad::new_checked(&mut mad[..]).ok()?.set_sm_key(0);
    Some(Datagram { addr: dgram.addr, mad })
}

/// A SubnAdmReport(Notice) (IBA 13.4.8.2) to `to` with TID `tid`,
/// carrying the 80-byte Notice.
pub(crate) fn report(to: MadAddress, tid: u64, notice: &NoticeRepr) -> Datagram {
    let mut mad = vec![0u8; MAD_SIZE];
    let repr = MadHeaderRepr {
        mgmt_class: MgmtClass::SubnAdm,
        class_version: SA_CLASS_VERSION,
        method: Method::Report,
        status: 0,
        class_specific: 0,
        transaction_id: tid,
        attribute_id: AttributeId::Notice,
        attribute_modifier: 0,
    };
    repr.emit(&mut MadHeader::new_checked(&mut mad[..MAD_HEADER_LEN]).expect("a MAD holds a header"));
    let n = notice.to_full_bytes();
    mad[SA_DATA_OFFSET..SA_DATA_OFFSET + n.len()].copy_from_slice(&n);
    Datagram { addr: to, mad }
}

/// The status word of an SA-specific error code (IBA 15.2.1.2: bits 8-15).
pub(crate) fn sa_error(code: u16) -> u16 {
    code << 8
}

/// MAD status words the agent uses (IBA 13.4.7, Table 107).
pub(crate) const BUSY: u16 = status::BUSY;
pub(crate) const BAD_VERSION: u16 = status::BAD_VERSION;
pub(crate) const METHOD_UNSUPPORTED: u16 = status::METHOD_UNSUPPORTED;
pub(crate) const METHOD_ATTR_UNSUPPORTED: u16 = status::METHOD_ATTR_UNSUPPORTED;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Lid;

    fn get(method: u8, version: u8) -> Datagram {
        let mut mad = vec![0u8; MAD_SIZE];
        mad[..4].copy_from_slice(&[1, 0x03, version, method]);
        mad[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        mad[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
        mad[36..44].copy_from_slice(&7u64.to_be_bytes());
        mad[48..56].copy_from_slice(&1u64.to_be_bytes());
        mad[56] = 0xAB;
        Datagram { addr: MadAddress::gsi(Lid(9), 0), mad }
    }

    #[test]
    fn requests_and_answers() {
        let d = get(0x12, 2);
        let Received::Request(r) = classify(&d) else { panic!() };
        assert_eq!((r.method, r.attribute, r.sm_key, r.mask), (Method::GetTable, SaAttributeId::NodeRecord, 7, 1));
        assert_eq!((r.data.len(), r.data[0]), (200, 0xAB));
        let a = single_answer(&r, 0, 14, &[1, 2, 3]);
        assert_eq!(&a.mad[..4], &[1, 0x03, 2, 0x92]);
        assert_eq!(&a.mad[8..16], &0x1122_3344_5566_7788u64.to_be_bytes());
        assert_eq!(&a.mad[24..28], &[1, 1, 0xFF, 0], "RMPP DATA, active, first and last");
        assert_eq!(&a.mad[32..36], &23u32.to_be_bytes(), "20 bytes of SA header plus the data");
        assert_eq!(&a.mad[36..44], &[0; 8], "SM_Key not echoed");
        assert_eq!(&a.mad[44..46], &[0, 14]);
        assert_eq!(&a.mad[48..56], &1u64.to_be_bytes());
        assert_eq!(&a.mad[56..], &[1, 2, 3], "only the records go out");
        let get_one = get(0x01, 2);
        let Received::Request(g) = classify(&get_one) else { panic!() };
        let resp = single_answer(&g, 0x0300, 0, &[]);
        assert_eq!(resp.mad[24..27], [0, 0, 0], "a GetResp is no RMPP");
        assert_eq!(resp.mad.len(), MAD_SIZE, "and goes out whole");
    }

    #[test]
    fn versions_responses_and_rmpp_control_are_told_apart() {
        assert!(matches!(classify(&get(0x01, 1)), Received::BadVersion { version: 1, answerable: true }));
        assert!(matches!(classify(&get(0x06, 1)), Received::BadVersion { answerable: false, .. }));
        assert!(matches!(classify(&get(0x86, 2)), Received::Response { method: Method::ReportResp, .. }));
        let mut ack = get(0x92, 2);
        ack.mad[24..27].copy_from_slice(&[1, 2, 0x01]);
        assert!(matches!(classify(&ack), Received::RmppControl { tid: 0x1122_3344_5566_7788 }));
        let mut seg = get(0x14, 2);
        seg.mad[24..27].copy_from_slice(&[1, 1, 0x03]);
        assert!(matches!(classify(&seg), Received::Segmented { .. }));
        seg.mad[26] = 0x07;
        assert!(matches!(classify(&seg), Received::Request(_)));
        assert!(matches!(classify(&Datagram { addr: ack.addr, mad: vec![1, 3] }), Received::Malformed));
        assert!(matches!(classify(&get(0x03, 2)), Received::Malformed), "Send is one-way");
        assert!(matches!(classify(&get(0x06, 2)), Received::Malformed), "the SA takes no Report");
        for undefined in [0x00, 0x04, 0x08, 0x0F] {
            assert!(matches!(classify(&get(undefined, 2)), Received::Malformed), "{undefined:#x} is no request");
        }
        assert!(matches!(classify(&get(0x04, 1)), Received::BadVersion { answerable: false, .. }));
        let echo = status_echo(&get(0x01, 1), BAD_VERSION).unwrap();
        assert_eq!((&echo.mad[..4], &echo.mad[4..6]), (&[1, 0x03, 1, 0x81][..], &[0, 4][..]));
        assert_eq!(&echo.mad[36..44], &[0; 8], "SM_Key 0 in a status answer too (the request said 7)");
        assert_eq!(&echo.mad[16..18], &[0, 0x11], "the attribute echoed");
        assert_eq!(&echo.mad[48..56], &1u64.to_be_bytes(), "the rest echoed");
    }

    #[test]
    fn multipath_answers_and_refusals_carry_path_record() {
        let mut d = get(0x14, 2);
        d.mad[16..18].copy_from_slice(&0x003Au16.to_be_bytes());
        let Received::Request(r) = classify(&d) else { panic!() };
        assert_eq!(r.attribute, SaAttributeId::MultiPathRecord);
        let ok = single_answer(&r, 0, 8, &[0; 64]);
        assert_eq!((ok.mad[3], &ok.mad[16..18]), (0x94, &[0, 0x35][..]), "GetMultiResp(PathRecord)");
        let refused = single_answer(&r, sa_error(crate::mad::sa::sa_status::REQ_INVALID), 0, &[]);
        let invalid = sa_error(crate::mad::sa::sa_status::REQ_INVALID).to_be_bytes();
        assert_eq!((&refused.mad[16..18], &refused.mad[4..6]), (&[0, 0x35][..], &invalid[..]));
        assert_eq!(answer_header(&r, 0, 8)[16..18], [0, 0x35]);
        let busy = status_echo(&d, BUSY).unwrap();
        assert_eq!((busy.mad[3], &busy.mad[16..18], &busy.mad[36..44]), (0x94, &[0, 0x35][..], &[0; 8][..]));
        // Every other attribute is answered as asked.
        let table = get(0x12, 2);
        let Received::Request(n) = classify(&table) else { panic!() };
        assert_eq!(single_answer(&n, 0, 0, &[]).mad[16..18], [0, 0x11]);
    }

    #[test]
    fn reports_carry_the_whole_notice() {
        let n = NoticeRepr {
            is_generic: true,
            notice_type: crate::mad::NoticeType::Informational,
            producer_type: 4,
            trap_number: 65,
            issuer_lid: Lid(1),
            notice_toggle: false,
            notice_count: 0,
            data_details: [0; 54],
            issuer_gid: [0xEE; 16],
        };
        let r = report(MadAddress::gsi(Lid(5), 0), 0x8000_0001, &n);
        assert_eq!(&r.mad[..4], &[1, 0x03, 2, 0x06]);
        assert_eq!(&r.mad[16..18], &[0, 2]);
        assert_eq!(&r.mad[56 + 4..56 + 6], &[0, 65]);
        assert_eq!(&r.mad[56 + 64..56 + 80], &[0xEE; 16]);
    }
}
