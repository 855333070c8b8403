//! The dispatcher: every MAD that is not a response to one of ours goes, by
//! management class and method, to the agent that serves it, or gets the
//! IBA's status answer (IBA 13.4.7: unsupported class or version, method,
//! or method/attribute combination). The SA class goes whole to the SA
//! agent, responses included (ReportResps to its Reports; RMPP ACKs of its
//! answers come as requests), and it answers versions and methods itself. Nothing here
//! panics on any input.

use std::fmt;

use crate::mad::header::status;
use crate::mad::smp::SmpRoute;
use crate::mad::{
    AttributeId, MadHeader, Method, MgmtClass, SmControl, SmInfoRepr, SmpRepr, WireError, MAD_HEADER_LEN,
};
use crate::transport::Datagram;

/// What a received request is, for the owner task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// SubnGet(SMInfo): another SM or `sminfo` asks who we are. `payload` is
    /// the requester's SMInfo, when it put one there (ibsm does, OpenSM
    /// sends zeros).
    SmInfoGet { req: SmpRepr, payload: Option<SmInfoRepr> },
    /// SubnSet(SMInfo): another SM's control (the attribute modifier).
    SmInfoSet { req: SmpRepr, control: SmControl, payload: Result<SmInfoRepr, WireError> },
    /// SubnTrap(Notice) sent to the master.
    Trap { req: SmpRepr },
    /// Any subnet administration MAD (class 0x03): for the SA agent.
    Sa,
    /// No agent serves this request: answer with `reply`.
    Refused { reply: Datagram, why: Refusal },
    /// Nothing to answer: not a request, or too broken to answer.
    Ignored { why: String },
}

/// Why a request got a status answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Refusal {
    /// No agent for the class (or not at this class version).
    Class {
        class: u8,
        version: u8,
    },
    Method {
        class: u8,
        method: u8,
    },
    Attribute {
        class: u8,
        method: u8,
        attribute: u16,
    },
}

impl Refusal {
    pub fn status(self) -> u16 {
        match self {
            Refusal::Class { .. } => status::BAD_VERSION,
            Refusal::Method { .. } => status::METHOD_UNSUPPORTED,
            Refusal::Attribute { .. } => status::METHOD_ATTR_UNSUPPORTED,
        }
    }
    /// The key this refusal is counted under (and the class label of its
    /// metric): a class, method or attribute code that names nothing this
    /// crate knows is folded into one "other" value (class 0xFF, version 0,
    /// method 0xFF, attribute 0xFFFF), so a flood of made-up codes adds
    /// one key, not one per code.
    pub fn counted_as(self) -> Refusal {
        const OTHER_CLASS: u8 = 0xFF;
        const OTHER_METHOD: u8 = 0xFF;
        const OTHER_ATTRIBUTE: u16 = 0xFFFF;
        let class = |c: u8| if let MgmtClass::Unknown(_) = MgmtClass::from(c) { OTHER_CLASS } else { c };
        let method = |m: u8| if let Method::Unknown(_) = Method::from(m) { OTHER_METHOD } else { m };
        match self {
            Refusal::Class { class: c, .. } if class(c) == OTHER_CLASS => {
                Refusal::Class { class: OTHER_CLASS, version: 0 }
            }
            Refusal::Class { .. } => self,
            Refusal::Method { class: c, method: m } => Refusal::Method { class: class(c), method: method(m) },
            Refusal::Attribute { class: c, method: m, attribute: a } => Refusal::Attribute {
                class: class(c),
                method: method(m),
                attribute: if let AttributeId::Unknown(_) = AttributeId::from(a) { OTHER_ATTRIBUTE } else { a },
            },
        }
    }

    /// The management class, for counters.
    pub fn class(self) -> u8 {
        match self {
            Refusal::Class { class, .. } | Refusal::Method { class, .. } | Refusal::Attribute { class, .. } => class,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::Class { class, version } => {
                write!(f, "no agent for class {:?} version {version}", MgmtClass::from(class))
            }
            Refusal::Method { class, method } => {
                write!(f, "{:?} does not serve method {:?}", MgmtClass::from(class), Method::from(method))
            }
            Refusal::Attribute { class, method, attribute } => write!(
                f,
                "{:?} {:?} of attribute {:?} is not served",
                MgmtClass::from(class),
                Method::from(method),
                AttributeId::from(attribute)
            ),
        }
    }
}

/// Classifies one unsolicited MAD.
pub fn classify(dgram: &Datagram) -> Inbound {
    let head = &dgram.mad[..dgram.mad.len().min(MAD_HEADER_LEN)];
    let h = match MadHeader::new_checked(head) {
        Ok(h) => h,
        Err(e) => return Inbound::Ignored { why: format!("not a MAD: {e}") },
    };
    let (class, method, version) = (h.mgmt_class(), h.method(), h.class_version());
    if class == MgmtClass::SubnAdm {
        return Inbound::Sa;
    }
    if method.is_response() {
        return Inbound::Ignored { why: format!("unmatched {class:?} {method:?}") };
    }
    match class {
        MgmtClass::SubnMgmtLid | MgmtClass::SubnMgmtDirected => classify_smp(dgram),
        _ if method.expects_response() => {
            let why = Refusal::Class { class: class.into(), version };
            refuse(dgram, why)
        }
        _ => Inbound::Ignored { why: format!("{class:?} {method:?} needs no answer and no agent serves it") },
    }
}

fn classify_smp(dgram: &Datagram) -> Inbound {
    let req = match SmpRepr::parse_bytes(&dgram.mad) {
        Ok(r) => r,
        // A bad class version is answered; a broken route cannot be.
        Err(WireError::ClassVersion { class, version }) => return refuse(dgram, Refusal::Class { class, version }),
        Err(e) => return Inbound::Ignored { why: format!("unreadable SMP: {e}") },
    };
    let class = u8::from(req.header.mgmt_class);
    let method = u8::from(req.header.method);
    match (req.header.method, req.header.attribute_id) {
        (Method::Get, AttributeId::SmInfo) => {
            let payload = SmInfoRepr::parse_bytes(&req.data).ok().filter(|p| p.guid.0 != 0);
            Inbound::SmInfoGet { req, payload }
        }
        (Method::Set, AttributeId::SmInfo) => {
            let control = SmControl::from(req.header.attribute_modifier);
            let payload = SmInfoRepr::parse_bytes(&req.data);
            Inbound::SmInfoSet { req, control, payload }
        }
        (Method::Trap, _) => Inbound::Trap { req },
        (Method::Get | Method::Set, attr) => {
            refuse(dgram, Refusal::Attribute { class, method, attribute: attr.into() })
        }
        (m, _) if m.expects_response() => refuse(dgram, Refusal::Method { class, method }),
        (m, a) => Inbound::Ignored { why: format!("SMP {m:?} {a:?} needs no answer") },
    }
}

fn refuse(dgram: &Datagram, why: Refusal) -> Inbound {
    match status_reply(dgram, why.status()) {
        Some(reply) => Inbound::Refused { reply, why },
        None => Inbound::Ignored { why: format!("{why}, and the request is too short to answer") },
    }
}

/// The answer to `req` with `status` and no attribute data changed: the
/// same TID and address, the response method, and for a directed-route SMP
/// the direction bit set.
pub fn status_reply(req: &Datagram, status: u16) -> Option<Datagram> {
    if let Ok(mut smp) = SmpRepr::parse_bytes(&req.mad) {
        smp.header.method = smp.header.method.response();
        smp.header.status = status;
        if let SmpRoute::Directed { inbound, .. } = &mut smp.route {
            *inbound = true;
        }
        return Some(Datagram { addr: req.addr, mad: smp.to_bytes().to_vec() });
    }
    if req.mad.len() < MAD_HEADER_LEN {
        return None;
    }
    let mut mad = req.mad.clone();
    let mut h = MadHeader::new_checked(&mut mad[..MAD_HEADER_LEN]).ok()?;
    let method = h.method();
    h.set_method(method.response());
    h.set_status(status);
    Some(Datagram { addr: req.addr, mad })
}

/// The GetResp (or TrapRepress) to an SMP, carrying `data`.
pub fn smp_response(req: &SmpRepr, method: Method, status: u16, data: [u8; 64]) -> SmpRepr {
    let mut resp = req.clone();
    resp.header.method = method;
    resp.header.status = status;
    resp.data = data;
    if let SmpRoute::Directed { inbound, .. } = &mut resp.route {
        *inbound = true;
    }
    resp
}

/// The SMInfo payload of a request or answer.
pub fn sm_info_data(info: &SmInfoRepr) -> [u8; 64] {
    let mut data = [0u8; 64];
    data[..info.buffer_len()].copy_from_slice(&info.to_bytes()[..info.buffer_len()]);
    data
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::{DrPath, SmState};
    use crate::transport::MadAddress;
    use crate::types::Guid;

    fn smp(method: Method, attr: AttributeId, amod: u32, data: [u8; 64]) -> Datagram {
        let r = SmpRepr::directed_request(method, attr, amod, DrPath::from_ports(&[1]).unwrap(), 0, data);
        Datagram { addr: MadAddress::smi_permissive(), mad: r.to_bytes().to_vec() }
    }

    fn sa_get() -> Datagram {
        gmp(0x03, 2)
    }

    /// A Get of `class`, PathRecord's attribute ID.
    fn gmp(class: u8, version: u8) -> Datagram {
        let mut mad = vec![0u8; 256];
        mad[0] = 1;
        mad[1] = class;
        mad[2] = version;
        mad[3] = 0x01;
        mad[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        mad[16..18].copy_from_slice(&0x0035u16.to_be_bytes()); // PathRecord
        Datagram { addr: MadAddress::gsi(crate::types::Lid(7), 0), mad }
    }

    #[test]
    fn refusals_of_made_up_codes_count_under_one_key() {
        let keys: std::collections::BTreeSet<Refusal> = (0..=255u8)
            .flat_map(|x| {
                [
                    Refusal::Class { class: 0x60 ^ (x & 0x0F), version: x },
                    Refusal::Method { class: 0x81, method: 0x20 | (x & 0x5F) },
                    Refusal::Attribute { class: 0x01, method: 0x01, attribute: 0xFF00 | u16::from(x) },
                    Refusal::Attribute { class: 0x01, method: 0x40 | (x & 0x3F), attribute: 0x0015 },
                ]
            })
            .map(Refusal::counted_as)
            .collect();
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            vec![
                Refusal::Class { class: 0xFF, version: 0 },
                Refusal::Method { class: 0x81, method: 0xFF },
                Refusal::Attribute { class: 0x01, method: 0x01, attribute: 0xFFFF },
                Refusal::Attribute { class: 0x01, method: 0xFF, attribute: 0x0015 },
            ]
        );
        // What the crate knows is counted as itself.
        for known in [
            Refusal::Class { class: 0x04, version: 2 },
            Refusal::Method { class: 0x81, method: 0x07 },
            Refusal::Attribute { class: 0x81, method: 0x02, attribute: 0x0019 },
        ] {
            assert_eq!(known.counted_as(), known);
        }
    }

    #[test]
    fn sm_info_gets_and_sets_go_to_the_sm_agent() {
        let info = SmInfoRepr { guid: Guid(5), sm_key: 1, act_count: 9, priority: 3, sm_state: SmState::Master };
        match classify(&smp(Method::Get, AttributeId::SmInfo, 0, sm_info_data(&info))) {
            Inbound::SmInfoGet { payload: Some(p), .. } => assert_eq!(p, info),
            other => panic!("{other:?}"),
        }
        // OpenSM's Get carries zeros: no payload.
        assert!(matches!(
            classify(&smp(Method::Get, AttributeId::SmInfo, 0, [0; 64])),
            Inbound::SmInfoGet { payload: None, .. }
        ));
        match classify(&smp(Method::Set, AttributeId::SmInfo, 1, sm_info_data(&info))) {
            Inbound::SmInfoSet { control: SmControl::Handover, payload: Ok(p), .. } => assert_eq!(p, info),
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify(&smp(Method::Trap, AttributeId::Notice, 0, [0; 64])), Inbound::Trap { .. }));
    }

    #[test]
    fn unserved_requests_get_the_iba_status() {
        // An SMP Get of an attribute the SM does not serve.
        match classify(&smp(Method::Get, AttributeId::NodeInfo, 0, [0; 64])) {
            Inbound::Refused { reply, why } => {
                assert_eq!(why.status(), 0x000c);
                let r = SmpRepr::parse_bytes(&reply.mad).unwrap();
                assert_eq!(r.header.method, Method::GetResp);
                assert_eq!(r.header.status, 0x000c);
                assert!(matches!(r.route, SmpRoute::Directed { inbound: true, .. }));
            }
            other => panic!("{other:?}"),
        }
        // A class no agent serves (communication management): unsupported
        // class, same TID.
        match classify(&gmp(0x07, 2)) {
            Inbound::Refused { reply, why: Refusal::Class { class: 7, version: 2 } } => {
                let h = MadHeader::new_checked(&reply.mad[..24]).unwrap();
                assert_eq!(h.method(), Method::GetResp);
                assert_eq!(h.status(), 0x0004);
                assert_eq!(h.transaction_id(), 0x1122_3344_5566_7788);
                assert_eq!(reply.addr, gmp(0x07, 2).addr);
            }
            other => panic!("{other:?}"),
        }
        // An SMP method that exists but is not served here.
        let mut m = smp(Method::Get, AttributeId::SmInfo, 0, [0; 64]);
        m.mad[3] = 0x14;
        assert!(matches!(classify(&m), Inbound::Refused { why: Refusal::Method { method: 0x14, .. }, .. }));
    }

    #[test]
    fn every_sa_mad_goes_to_the_sa_agent() {
        assert_eq!(classify(&sa_get()), Inbound::Sa);
        let mut ack = sa_get();
        ack.mad[3] = 0x12; // an RMPP ACK of a GetTableResp is a GetTable (the response bit flipped)
        ack.mad[24..27].copy_from_slice(&[1, 2, 0x01]);
        assert_eq!(classify(&ack), Inbound::Sa);
        let mut resp = sa_get();
        resp.mad[3] = 0x86; // a ReportResp to one of the SA's Reports
        assert_eq!(classify(&resp), Inbound::Sa);
        assert_eq!(classify(&gmp(0x03, 1)), Inbound::Sa, "the SA answers a bad version itself");
    }

    #[test]
    fn garbage_responses_and_one_way_mads_are_ignored() {
        assert!(matches!(classify(&Datagram { addr: sa_get().addr, mad: vec![1, 2, 3] }), Inbound::Ignored { .. }));
        let mut resp = gmp(0x07, 2);
        resp.mad[3] = 0x81;
        assert!(matches!(classify(&resp), Inbound::Ignored { .. }));
        let mut one_way = gmp(0x07, 2);
        one_way.mad[3] = 0x06;
        assert!(matches!(classify(&one_way), Inbound::Ignored { .. }));
    }

    proptest::proptest! {
        #[test]
        fn classify_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let d = Datagram { addr: MadAddress::smi_permissive(), mad: bytes };
            let _ = classify(&d);
            let _ = status_reply(&d, 0x000c);
        }
    }
}
