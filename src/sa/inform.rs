//! Event subscriptions (InformInfo, IBA 13.4.8.3) and the Reports that
//! carry notices to subscribers (IBA 13.4.8.2, SubnAdmReport).
//!
//! A SubnAdmSet(InformInfo) subscribes the requester's port: its GID is the
//! SubscriberGID, and Reports go back to the address the Set came from (its
//! LID and QP), as OpenSM does. The same subscription set twice is one
//! subscription; Subscribe = 0 removes it. Matching a notice follows IBA
//! 13.4.8.3 as OpenSM reads it: a non-zero GID must be the issuer's;
//! otherwise LIDRangeBegin 0xFFFF is any issuer, or the issuer LID must lie
//! in [LIDRangeBegin, LIDRangeEnd] (End 0 meaning Begin); IsGeneric must
//! agree; Type, TrapNumber / DeviceID 0xFFFF and ProducerType / VendorID
//! 0xFFFFFF are wildcards.
//!
//! Reports are resent every `report_timeout` until a ReportResp with their
//! TID comes or `report_retries` resends are spent; all in flight are
//! capped at `max_reports`, and those to one subscriber (by LID) at
//! `max_reports_per_subscriber`, so a subscriber that never answers holds
//! its own share and not the SA's whole room.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::datagram::{Datagram, MadAddress};
use crate::mad::notice::trap;
use crate::mad::sa::inform_info::wildcard;
use crate::mad::sa::{InformInfoRecordRepr, InformInfoRepr, InformKind, SaRecord, INFORM_INFO_RECORD_LEN};
use crate::mad::NoticeRepr;
use crate::types::Guid;

/// One subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subscription {
    /// As set, with QPN the requester's QP.
    pub info: InformInfoRepr,
    pub subscriber_gid: [u8; 16],
    /// The subscriber's port.
    pub owner: Guid,
    /// Where Reports go: the Set's source.
    pub addr: MadAddress,
    /// Made by a trusted requester (may receive the security traps).
    pub trusted: bool,
}

impl Subscription {
    /// The same subscription: one address, one selection (OpenSM's
    /// match_inf_rec: QPN and RespTimeValue included, Subscribe not).
    fn same(&self, other: &Subscription) -> bool {
        let (a, b) = (&self.info, &other.info);
        let range_or_gid = if a.gid != [0; 16] {
            a.gid == b.gid
        } else {
            b.gid == [0; 16] && (a.lid_range_begin, a.lid_range_end) == (b.lid_range_begin, b.lid_range_end)
        };
        self.addr.lid == other.addr.lid
            && self.addr.qpn == other.addr.qpn
            && range_or_gid
            && a.notice_type == b.notice_type
            && a.kind == b.kind
            && a.qpn == b.qpn
            && a.resp_time_value == b.resp_time_value
    }

    /// Whether `notice`, from the port with GID `issuer_gid`, is for this
    /// subscription.
    pub fn matches(&self, notice: &NoticeRepr, issuer_gid: &[u8; 16]) -> bool {
        let ii = &self.info;
        if ii.gid != [0; 16] {
            if ii.gid != *issuer_gid {
                return false;
            }
        } else if ii.lid_range_begin != wildcard::LID {
            let end = if ii.lid_range_end == 0 { ii.lid_range_begin } else { ii.lid_range_end };
            if !(ii.lid_range_begin..=end).contains(&notice.issuer_lid.0) {
                return false;
            }
        }
        if ii.kind.is_generic() != notice.is_generic {
            return false;
        }
        if ii.notice_type != wildcard::TYPE && ii.notice_type != u16::from(u8::from(notice.notice_type)) {
            return false;
        }
        let (number, producer) = match ii.kind {
            InformKind::Generic { trap_number, producer_type } => (trap_number, producer_type),
            InformKind::Vendor { device_id, vendor_id } => (device_id, vendor_id),
        };
        if number != wildcard::TRAP_NUMBER && number != notice.trap_number {
            return false;
        }
        if producer & 0x00FF_FFFF != wildcard::PRODUCER_TYPE && producer & 0x00FF_FFFF != notice.producer_type {
            return false;
        }
        // The security traps go to trusted subscribers only (OpenSM
        // requires a trusted Set to subscribe to them).
        !(notice.is_generic && is_security_trap(notice.trap_number) && !self.trusted)
    }
}

/// Traps 256-259: bad M_Key, P_Key, Q_Key, switch P_Key (IBA 14.2.5.1).
pub(crate) fn is_security_trap(number: u16) -> bool {
    (trap::BAD_M_KEY..=trap::BAD_SWITCH_P_KEY).contains(&number)
}

/// Why a Set(InformInfo) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InformError {
    /// Unsubscribe of nothing (ERR_REQ_INVALID, o13-13.1.1 as OpenSM).
    NotSubscribed,
    /// The port's or the SA's cap is reached (ERR_NO_RESOURCES).
    Full,
}

#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    list: Vec<Subscription>,
    per_owner: HashMap<Guid, usize>,
    /// The InformInfoRecords as emitted, built at the first query after a
    /// change: a flood of queries costs no emitting.
    emitted: OnceCell<Vec<[u8; INFORM_INFO_RECORD_LEN]>>,
    /// Bumped with every change that may change the records.
    version: u64,
}

impl Subscriptions {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Subscription> + '_ {
        self.list.iter()
    }

    /// Changes so far (the state stream looks again).
    pub fn version(&self) -> u64 {
        self.version
    }

    fn changing(&mut self) {
        self.emitted.take();
        self.version += 1;
    }

    /// Subscribes (a repeat renews) or unsubscribes.
    pub fn set(&mut self, sub: Subscription, per_port: usize, total: usize) -> Result<(), InformError> {
        self.changing();
        let existing = self.list.iter().position(|s| s.same(&sub));
        if !sub.info.subscribe {
            let i = existing.ok_or(InformError::NotSubscribed)?;
            let gone = self.list.remove(i);
            self.forget(gone.owner);
            return Ok(());
        }
        match existing {
            Some(i) => self.list[i] = sub,
            None => {
                let mine = self.per_owner.get(&sub.owner).copied().unwrap_or(0);
                if mine >= per_port || self.list.len() >= total {
                    return Err(InformError::Full);
                }
                *self.per_owner.entry(sub.owner).or_default() += 1;
                self.list.push(sub);
            }
        }
        Ok(())
    }

    /// A subscription taken over from the master's (`super::mirror`),
    /// unless the same one is here already (`Ok(false)`, nothing changed).
    /// `Err(Full)` past a cap.
    pub fn import(&mut self, sub: Subscription, per_port: usize, total: usize) -> Result<bool, InformError> {
        self.changing();
        if self.list.iter().any(|s| s.same(&sub)) {
            return Ok(false);
        }
        let mine = self.per_owner.get(&sub.owner).copied().unwrap_or(0);
        if mine >= per_port || self.list.len() >= total {
            return Err(InformError::Full);
        }
        *self.per_owner.entry(sub.owner).or_default() += 1;
        self.list.push(sub);
        Ok(true)
    }

    fn forget(&mut self, owner: Guid) {
        if let Some(n) = self.per_owner.get_mut(&owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(&owner);
            }
        }
    }

    /// Drops the subscriptions of ports that are gone and follows the LID
    /// changes of the others (`lid_of` gives an owner's base LID now).
    pub fn follow_ports(&mut self, lid_of: impl Fn(Guid) -> Option<u16>) -> usize {
        self.changing();
        let before = self.list.len();
        let mut kept = Vec::with_capacity(before);
        for mut s in std::mem::take(&mut self.list) {
            match lid_of(s.owner) {
                Some(lid) => {
                    s.addr.lid = crate::types::Lid(lid);
                    kept.push(s);
                }
                None => self.forget(s.owner),
            }
        }
        self.list = kept;
        before - self.list.len()
    }

    /// The subscriber port of each of [`Self::records`], in its order.
    pub fn owners(&self) -> impl Iterator<Item = Guid> + '_ {
        self.list.iter().map(|s| s.owner)
    }

    /// The InformInfoRecords (IBA 15.2.5.12): Enum numbers each
    /// subscriber's subscriptions from 0, in the order they were made.
    /// Emitted once per change of the subscriptions, not per query.
    pub fn records(&self) -> &[[u8; INFORM_INFO_RECORD_LEN]] {
        self.emitted.get_or_init(|| {
            let mut next: BTreeMap<[u8; 16], u16> = BTreeMap::new();
            self.list
                .iter()
                .map(|s| {
                    let n = next.entry(s.subscriber_gid).or_default();
                    let r =
                        InformInfoRecordRepr { subscriber_gid: s.subscriber_gid, enumeration: *n, inform_info: s.info };
                    *n = n.wrapping_add(1);
                    let mut b = [0u8; INFORM_INFO_RECORD_LEN];
                    let _ = SaRecord::emit(&r, &mut b);
                    b
                })
                .collect()
        })
    }
}

/// A Report waiting for its ReportResp.
#[derive(Debug)]
struct Pending {
    dgram: Datagram,
    /// Sends so far.
    sent: u32,
    deadline: Duration,
}

/// Why a Report could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReportFull {
    /// `max_reports` are in flight.
    Total,
    /// `max_reports_per_subscriber` are in flight to this subscriber.
    Subscriber,
}

/// Reports in flight.
#[derive(Debug)]
pub(crate) struct Reports {
    pending: BTreeMap<u32, Pending>,
    deadlines: BTreeSet<(Duration, u32)>,
    /// Reports in flight per destination LID.
    per_lid: HashMap<u16, usize>,
    /// Next TID (low 32 bits); always has bit 31 set.
    next_tid: u32,
}

/// What the transport's own TIDs never reach (see the module docs of
/// `crate::sa`).
const TID_BASE: u32 = 0x8000_0000;

impl Default for Reports {
    fn default() -> Self {
        Reports { pending: BTreeMap::new(), deadlines: BTreeSet::new(), per_lid: HashMap::new(), next_tid: TID_BASE }
    }
}

impl Reports {
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    fn alloc_tid(&mut self) -> u32 {
        loop {
            let tid = self.next_tid;
            self.next_tid = self.next_tid.wrapping_add(1) | TID_BASE;
            if !self.pending.contains_key(&tid) {
                return tid;
            }
        }
    }

    /// A new Report of `notice` to `to`; returns the MAD to send now, or
    /// why not: `max` in flight in all, or `max_per_subscriber` to `to`'s
    /// LID.
    pub fn start(
        &mut self,
        now: Duration,
        timeout: Duration,
        to: MadAddress,
        notice: &NoticeRepr,
        max: usize,
        max_per_subscriber: usize,
    ) -> Result<Datagram, ReportFull> {
        if self.pending.len() >= max {
            return Err(ReportFull::Total);
        }
        let mine = self.per_lid.entry(to.lid.0).or_default();
        if *mine >= max_per_subscriber {
            return Err(ReportFull::Subscriber);
        }
        *mine += 1;
        let tid = self.alloc_tid();
        let dgram = super::wire::report(to, u64::from(tid), notice);
        let deadline = now + timeout;
        self.deadlines.insert((deadline, tid));
        self.pending.insert(tid, Pending { dgram: dgram.clone(), sent: 1, deadline });
        Ok(dgram)
    }

    /// Reports in flight to the subscriber at `lid`.
    #[cfg(test)]
    pub fn to_subscriber(&self, lid: u16) -> usize {
        self.per_lid.get(&lid).copied().unwrap_or(0)
    }

    fn forget(&mut self, p: &Pending) {
        if let Some(n) = self.per_lid.get_mut(&p.dgram.addr.lid.0) {
            *n -= 1;
            if *n == 0 {
                self.per_lid.remove(&p.dgram.addr.lid.0);
            }
        }
    }

    /// A ReportResp with `tid`: whether it answered one of ours.
    pub fn acknowledge(&mut self, tid: u64) -> bool {
        let tid = tid as u32;
        match self.pending.remove(&tid) {
            Some(p) => {
                self.deadlines.remove(&(p.deadline, tid));
                self.forget(&p);
                true
            }
            None => false,
        }
    }

    pub fn next_deadline(&self) -> Option<Duration> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    /// Reports whose wait ran out: those with retries left come back to be
    /// sent again (the first list), the others are given up (the count).
    pub fn expire(&mut self, now: Duration, timeout: Duration, retries: u32) -> (Vec<Datagram>, usize) {
        let mut again = Vec::new();
        let mut given_up = 0;
        while let Some(&(at, tid)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(p) = self.pending.get_mut(&tid) else { continue };
            if p.sent > retries {
                if let Some(p) = self.pending.remove(&tid) {
                    self.forget(&p);
                }
                given_up += 1;
                continue;
            }
            p.sent += 1;
            p.deadline = now + timeout;
            self.deadlines.insert((p.deadline, tid));
            again.push(p.dgram.clone());
        }
        (again, given_up)
    }

    /// Forgets every Report (the SA stopped serving).
    pub fn clear(&mut self) {
        self.pending.clear();
        self.deadlines.clear();
        self.per_lid.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::NoticeType;
    use crate::types::Lid;

    fn notice(trap_number: u16, issuer: u16) -> NoticeRepr {
        NoticeRepr {
            is_generic: true,
            notice_type: NoticeType::Informational,
            producer_type: 4,
            trap_number,
            issuer_lid: Lid(issuer),
            notice_toggle: false,
            notice_count: 0,
            data_details: [0; 54],
            issuer_gid: [0; 16],
        }
    }

    fn sub(trap_number: u16, begin: u16, end: u16) -> Subscription {
        Subscription {
            info: InformInfoRepr {
                gid: [0; 16],
                lid_range_begin: begin,
                lid_range_end: end,
                subscribe: true,
                notice_type: wildcard::TYPE,
                kind: InformKind::Generic { trap_number, producer_type: wildcard::PRODUCER_TYPE },
                qpn: 1,
                resp_time_value: 0,
            },
            subscriber_gid: [1; 16],
            owner: Guid(1),
            addr: MadAddress::gsi(Lid(3), 0),
            trusted: false,
        }
    }

    #[test]
    fn matching_rules() {
        let gid = [7u8; 16];
        assert!(sub(65, 0xFFFF, 0).matches(&notice(65, 9), &gid));
        assert!(!sub(64, 0xFFFF, 0).matches(&notice(65, 9), &gid), "trap number");
        assert!(sub(0xFFFF, 5, 10).matches(&notice(128, 9), &gid), "in range");
        assert!(!sub(0xFFFF, 5, 8).matches(&notice(128, 9), &gid), "out of range");
        assert!(sub(0xFFFF, 9, 0).matches(&notice(128, 9), &gid), "End 0 is Begin");
        let mut s = sub(0xFFFF, 0xFFFF, 0);
        s.info.gid = gid;
        assert!(s.matches(&notice(128, 9), &gid));
        assert!(!s.matches(&notice(128, 9), &[8; 16]), "another issuer");
        let mut t = notice(128, 9);
        t.is_generic = false;
        assert!(!sub(0xFFFF, 0xFFFF, 0).matches(&t, &gid), "IsGeneric must agree");
        let mut typed = sub(0xFFFF, 0xFFFF, 0);
        typed.info.notice_type = 1;
        assert!(!typed.matches(&notice(128, 9), &gid), "type Urgent asked, Informational sent");
        assert!(!sub(0xFFFF, 0xFFFF, 0).matches(&notice(256, 9), &gid), "security traps need trust");
        let mut trusted = sub(0xFFFF, 0xFFFF, 0);
        trusted.trusted = true;
        assert!(trusted.matches(&notice(256, 9), &gid));
    }

    #[test]
    fn subscribe_renew_unsubscribe_and_caps() {
        let mut s = Subscriptions::default();
        s.set(sub(64, 0xFFFF, 0), 2, 10).unwrap();
        s.set(sub(64, 0xFFFF, 0), 2, 10).unwrap();
        assert_eq!(s.len(), 1, "the same subscription once");
        s.set(sub(65, 0xFFFF, 0), 2, 10).unwrap();
        assert_eq!(s.set(sub(66, 0xFFFF, 0), 2, 10), Err(InformError::Full));
        let mut off = sub(64, 0xFFFF, 0);
        off.info.subscribe = false;
        s.set(off.clone(), 2, 10).unwrap();
        assert_eq!(s.set(off, 2, 10), Err(InformError::NotSubscribed));
        assert_eq!(s.records().len(), 1);
        assert_eq!(s.follow_ports(|_| None), 1);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn records_are_emitted_once_per_change() {
        let mut s = Subscriptions::default();
        assert!(s.records().is_empty());
        s.set(sub(64, 0xFFFF, 0), 2, 10).unwrap();
        let first = s.records().as_ptr();
        assert_eq!(s.records().len(), 1);
        assert!(std::ptr::eq(first, s.records().as_ptr()), "no change, no new emission");
        s.set(sub(65, 0xFFFF, 0), 2, 10).unwrap();
        let enums: Vec<u16> =
            s.records().iter().map(|b| InformInfoRecordRepr::parse_bytes(b).unwrap().enumeration).collect();
        assert_eq!(enums, vec![0, 1], "rebuilt after a Set");
        let mut off = sub(64, 0xFFFF, 0);
        off.info.subscribe = false;
        s.set(off, 2, 10).unwrap();
        let left = InformInfoRecordRepr::parse_bytes(&s.records()[0]).unwrap();
        assert_eq!((s.records().len(), left.enumeration), (1, 0), "and after an unsubscribe");
        assert!(s.import(sub(66, 0xFFFF, 0), 2, 10).unwrap());
        assert_eq!(s.records().len(), 2, "and after an import");
        s.follow_ports(|_| None);
        assert!(s.records().is_empty(), "and when ports go");
    }

    #[test]
    fn imports_add_only_new_subscriptions_within_the_caps() {
        let mut s = Subscriptions::default();
        s.set(sub(64, 0xFFFF, 0), 2, 10).unwrap();
        let mut again = sub(64, 0xFFFF, 0);
        again.trusted = true;
        assert_eq!(s.import(again, 2, 10), Ok(false), "the same subscription");
        assert!(!s.iter().next().unwrap().trusted, "not overwritten");
        assert_eq!(s.import(sub(65, 0xFFFF, 0), 2, 10), Ok(true));
        assert_eq!(s.import(sub(66, 0xFFFF, 0), 2, 10), Err(InformError::Full), "per port");
        let mut other = sub(66, 0xFFFF, 0);
        other.owner = Guid(2);
        other.addr.lid = Lid(4);
        assert_eq!(s.import(other.clone(), 2, 2), Err(InformError::Full), "in all");
        assert_eq!(s.import(other, 2, 3), Ok(true));
        assert_eq!(s.len(), 3);
        assert_eq!(s.follow_ports(|g| (g == Guid(2)).then_some(9)), 2);
        assert_eq!(s.iter().next().unwrap().addr.lid, Lid(9));
    }

    #[test]
    fn reports_retry_then_give_up_and_tids_keep_bit_31() {
        let mut r = Reports::default();
        let t = Duration::from_secs(1);
        let d = r.start(Duration::ZERO, t, MadAddress::gsi(Lid(3), 0), &notice(65, 1), 10, 10).unwrap();
        let tid = u64::from_be_bytes(d.mad[8..16].try_into().unwrap());
        assert_eq!(tid >> 31, 1);
        assert_eq!(r.expire(t, t, 2).0.len(), 1);
        assert_eq!(r.expire(2 * t, t, 2).0.len(), 1);
        assert_eq!(r.expire(3 * t, t, 2), (vec![], 1), "three sends, then given up");
        let d = r.start(Duration::ZERO, t, MadAddress::gsi(Lid(3), 0), &notice(65, 1), 10, 10).unwrap();
        let tid = u64::from_be_bytes(d.mad[8..16].try_into().unwrap());
        assert!(r.acknowledge(0xFFFF_0000_0000_0000 | tid), "matched on the low 32 bits");
        assert!(!r.acknowledge(tid));
        assert_eq!(r.next_deadline(), None);
    }

    #[test]
    fn one_silent_subscriber_fills_only_its_share() {
        let mut r = Reports::default();
        let t = Duration::from_secs(1);
        let (silent, other) = (MadAddress::gsi(Lid(3), 0), MadAddress::gsi(Lid(4), 0));
        for _ in 0..3 {
            assert!(r.start(Duration::ZERO, t, silent, &notice(65, 1), 10, 3).is_ok());
        }
        assert_eq!(r.start(Duration::ZERO, t, silent, &notice(65, 1), 10, 3), Err(ReportFull::Subscriber));
        assert_eq!(r.to_subscriber(3), 3);
        let d = r.start(Duration::ZERO, t, other, &notice(65, 1), 10, 3).unwrap();
        assert_eq!((r.len(), r.to_subscriber(4)), (4, 1), "others still have room");
        assert_eq!(r.start(Duration::ZERO, t, other, &notice(65, 1), 4, 3), Err(ReportFull::Total));
        // An answer frees the answerer's share; giving up frees the silent one's.
        assert!(r.acknowledge(u64::from_be_bytes(d.mad[8..16].try_into().unwrap())));
        assert_eq!(r.to_subscriber(4), 0);
        assert_eq!(r.expire(t, t, 0), (vec![], 3), "no retries: all three given up");
        assert_eq!((r.len(), r.to_subscriber(3)), (0, 0));
        assert!(r.start(t, t, silent, &notice(65, 1), 10, 3).is_ok(), "room again");
        r.clear();
        assert_eq!(r.to_subscriber(3), 0);
    }
}
