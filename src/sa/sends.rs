//! What the agent sends, and how much of it may wait.
//!
//! Answers: a status with no data, one MAD of records, or a multi-MAD
//! answer over RMPP, built to a budget known before the records are (the
//! answer cap cut to the RMPP room left), and ERR_NO_RESOURCES when that
//! room is short. Reports: a Notice to every subscription that matches it
//! (traps 64/65 for ports that entered or left service between snapshots,
//! traps the SM received). Every MAD waits in one bounded queue
//! (`max_queued`; a full queue drops and counts).
//!
//! Multi-MAD answers in flight ([`Sends`]): one [`RmppSender`] per answer,
//! keyed by the requester's LID and QP and the request's TID (low 32 bits:
//! a requester's kernel owns the high ones), so its ACK, STOP and ABORT
//! find their transfer and a repeated request while the answer is still
//! going out starts nothing new. Bounded in number, in bytes and per
//! requester; segments of concurrent answers go out in turn.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use std::time::Duration;

use tracing::Level;

use super::inform::{ReportFull, Subscription};
use super::path::PathIndex;
use super::table::{QueryError, Spec};
use super::wire::{self, Request};
use super::{SaAgent, Serving};
use crate::datagram::{Datagram, MadAddress};
use crate::mad::notice::trap;
use crate::mad::sa::{sa_status, PathRecordRepr, SaRecord, SA_DATA_LEN};
use crate::mad::{Method, NoticeRepr};
use crate::rmpp::{RmppConfig, RmppError, RmppSender, TransferState};
use crate::subnet::snapshot::Snapshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SendKey {
    pub lid: u16,
    pub qpn: u32,
    pub tid: u32,
}

impl SendKey {
    pub fn new(addr: &MadAddress, tid: u64) -> Self {
        SendKey { lid: addr.lid.0, qpn: addr.qpn, tid: tid as u32 }
    }
}

#[derive(Debug)]
struct Send {
    addr: MadAddress,
    sender: RmppSender,
    bytes: usize,
}

/// Why an answer could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// `max_rmpp_sends` or `max_rmpp_bytes` reached.
    Busy,
    /// The requester (by LID) has `max_rmpp_sends_per_requester` in flight.
    RequesterBusy,
    /// The sender refused the payload (longer than RMPP can count).
    Refused,
}

/// How transfers ended, for the stats.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Ended {
    pub completed: u64,
    pub failed: u64,
    /// Each failed transfer: to whom, and why.
    pub failures: Vec<(SendKey, RmppError)>,
}

#[derive(Debug, Default)]
pub(crate) struct Sends {
    map: BTreeMap<SendKey, Send>,
    bytes: usize,
    /// The last transfer a segment came from (segments go out in turn).
    cursor: Option<SendKey>,
}

impl Sends {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn contains(&self, key: &SendKey) -> bool {
        self.map.contains_key(key)
    }

    /// Transfers in flight to the requester at `lid` (any QP, any TID).
    pub fn to_requester(&self, lid: u16) -> usize {
        let (lo, hi) = (SendKey { lid, qpn: 0, tid: 0 }, SendKey { lid, qpn: u32::MAX, tid: u32::MAX });
        self.map.range(lo..=hi).count()
    }

    /// Whether one more answer to the requester at `lid` may start, and
    /// then the bytes of `max_bytes` still free for it: checked before an
    /// answer is built, so a full table costs no building.
    pub fn room(&self, lid: u16, max_sends: usize, max_bytes: usize, per_requester: usize) -> Result<usize, SendError> {
        if self.map.len() >= max_sends || self.bytes >= max_bytes {
            return Err(SendError::Busy);
        }
        if self.to_requester(lid) >= per_requester {
            return Err(SendError::RequesterBusy);
        }
        Ok(max_bytes - self.bytes)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        now: Duration,
        key: SendKey,
        addr: MadAddress,
        template: &[u8],
        payload: Vec<u8>,
        cfg: RmppConfig,
        max_sends: usize,
        max_bytes: usize,
    ) -> Result<(), SendError> {
        let bytes = payload.len();
        if self.map.len() >= max_sends || self.bytes + bytes > max_bytes {
            return Err(SendError::Busy);
        }
        let sender = RmppSender::new(now, template, payload, cfg).map_err(|_| SendError::Refused)?;
        self.bytes += bytes;
        self.map.insert(key, Send { addr, sender, bytes });
        Ok(())
    }

    /// An ACK, STOP or ABORT from a receiver; `false` when no transfer has
    /// that key.
    pub fn handle_mad(&mut self, now: Duration, key: &SendKey, mad: &[u8]) -> bool {
        match self.map.get_mut(key) {
            Some(s) => {
                // A refused MAD leaves the transfer as it was, or ends it;
                // its state says which.
                let _ = s.sender.handle_mad(now, mad);
                true
            }
            None => false,
        }
    }

    /// The next segment (or ABORT) to send, taking transfers in turn.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<(Datagram, bool)> {
        let keys: Vec<SendKey> = match self.cursor {
            Some(c) => self.map.range((Excluded(c), Unbounded)).chain(self.map.range(..=c)).map(|(k, _)| *k).collect(),
            None => self.map.keys().copied().collect(),
        };
        for key in keys {
            let Some(s) = self.map.get_mut(&key) else { continue };
            let resent_before = s.sender.stats().resent;
            if let Some(mad) = s.sender.poll_transmit(now) {
                self.cursor = Some(key);
                let resent = s.sender.stats().resent > resent_before;
                return Some((Datagram { addr: s.addr, mad }, resent));
            }
        }
        None
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        self.map.values().filter_map(|s| s.sender.poll_timeout()).min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        for s in self.map.values_mut() {
            s.sender.handle_timeout(now);
        }
    }

    /// Removes finished transfers.
    pub fn reap(&mut self) -> Ended {
        let mut ended = Ended::default();
        let done: Vec<SendKey> = self.map.iter().filter(|(_, s)| s.sender.is_done()).map(|(k, _)| *k).collect();
        for k in done {
            if let Some(s) = self.map.remove(&k) {
                self.bytes -= s.bytes;
                match s.sender.state() {
                    TransferState::Done => ended.completed += 1,
                    TransferState::Failed(e) => {
                        ended.failed += 1;
                        ended.failures.push((k, e.clone()));
                    }
                    TransferState::Active => ended.failed += 1,
                }
            }
        }
        ended
    }

    /// Drops every transfer (the SA stopped serving); returns how many.
    pub fn clear(&mut self) -> usize {
        let n = self.map.len();
        self.map.clear();
        self.bytes = 0;
        self.cursor = None;
        n
    }
}

/// How large an answer may be built (`SaAgent::budget`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    pub bytes: usize,
    /// The RMPP room that cut `bytes` below `max_answer_bytes`.
    pub rmpp: Option<SendError>,
}

impl SaAgent {
    // ---- Answers.

    /// A status answer with no data.
    pub(super) fn refuse(&mut self, now: Duration, req: &Request<'_>, status: u16) {
        self.stats.query(req.attribute, req.method).errors += 1;
        self.count_status(status);
        let d = wire::single_answer(req, status, 0, &[]);
        self.push(now, d);
    }

    /// A successful one-MAD answer carrying `data` (`n` records).
    pub(super) fn reply(&mut self, now: Duration, req: &Request<'_>, attribute_offset: u16, data: &[u8], n: usize) {
        self.count_ok(req, n);
        let d = wire::single_answer(req, 0, attribute_offset, data);
        self.push(now, d);
    }

    /// Answers a query: a Get with exactly one record, a GetTable with all.
    pub(super) fn answer(
        &mut self,
        now: Duration,
        req: &Request<'_>,
        spec: Spec,
        result: Result<(Vec<u8>, usize), QueryError>,
    ) {
        let (bytes, n) = match result {
            Ok(r) => r,
            Err(QueryError::Invalid) => {
                self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
                return;
            }
            Err(QueryError::TooLarge) => {
                if let Some(e) = self.budget(req).rmpp {
                    // Cut by the RMPP room left, not by the answer cap.
                    self.rmpp_refusal(now, req, e);
                    return;
                }
                self.stats.drops.answer_too_large += 1;
                let (attr, lid, cap) = (req.attribute, req.addr.lid, self.cfg.max_answer_bytes);
                self.gate(now, Level::WARN, "answer_too_large", || {
                    format!("{attr:?} query from LID {lid} matches over {cap} bytes: refused (ERR_NO_RESOURCES)")
                });
                self.refuse(now, req, wire::sa_error(sa_status::NO_RESOURCES));
                return;
            }
        };
        if req.method == Method::Get {
            match n {
                0 => self.refuse(now, req, wire::sa_error(sa_status::NO_RECORDS)),
                1 => self.reply(now, req, 0, &bytes[..spec.len], 1),
                _ => self.refuse(now, req, wire::sa_error(sa_status::TOO_MANY_RECORDS)),
            }
            return;
        }
        self.table_answer(now, req, spec.attribute_offset(), bytes, n);
    }

    /// A GetTableResp (or GetMultiResp) of `n` records spaced
    /// `attribute_offset` words apart: one MAD when they fit, RMPP
    /// otherwise. No record is an empty answer with status 0 and
    /// AttributeOffset 0 (as OpenSM's osm_sa_respond: only a Get fails with
    /// ERR_NO_RECORDS, and saquery counts the records as the payload over
    /// the offset, so a non-zero offset over no data would read as one).
    pub(super) fn table_answer(
        &mut self,
        now: Duration,
        req: &Request<'_>,
        attribute_offset: u16,
        bytes: Vec<u8>,
        n: usize,
    ) {
        let attribute_offset = if n == 0 { 0 } else { attribute_offset };
        if bytes.len() <= SA_DATA_LEN {
            let d = wire::single_answer(req, 0, attribute_offset, &bytes);
            self.count_ok(req, n);
            self.push(now, d);
            return;
        }
        let limits = (self.cfg.max_rmpp_sends, self.cfg.max_rmpp_bytes, self.cfg.max_rmpp_sends_per_requester);
        match self.sends.room(req.addr.lid.0, limits.0, limits.1, limits.2) {
            Ok(left) if bytes.len() <= left => {}
            Ok(_) => return self.rmpp_refusal(now, req, SendError::Busy),
            Err(e) => return self.rmpp_refusal(now, req, e),
        }
        let template = wire::answer_header(req, 0, attribute_offset);
        let key = SendKey::new(&req.addr, req.tid);
        let cfg = self.rmpp_config();
        match self.sends.start(
            now,
            key,
            req.addr,
            &template,
            bytes,
            cfg,
            self.cfg.max_rmpp_sends,
            self.cfg.max_rmpp_bytes,
        ) {
            Ok(()) => {
                self.count_ok(req, n);
                self.stats.rmpp.started += 1;
                self.stats.rmpp.in_flight = self.sends.len() as u64;
            }
            Err(SendError::Refused) => self.refuse(now, req, wire::sa_error(sa_status::NO_RESOURCES)),
            Err(e) => self.rmpp_refusal(now, req, e),
        }
    }

    pub(super) fn path_answer(&mut self, now: Duration, req: &Request<'_>, records: &[PathRecordRepr]) {
        let stride = usize::from(PathRecordRepr::attribute_offset()) * 8;
        let mut bytes = vec![0u8; records.len() * stride];
        for (r, out) in records.iter().zip(bytes.chunks_mut(stride)) {
            let _ = r.emit(out);
        }
        self.table_answer(now, req, PathRecordRepr::attribute_offset(), bytes, records.len());
    }

    pub(super) fn path_refusal(&mut self, now: Duration, req: &Request<'_>, code: u16) {
        if code == sa_status::NO_RESOURCES {
            if let Some(e) = self.budget(req).rmpp.filter(|_| req.method == Method::GetTable) {
                return self.rmpp_refusal(now, req, e);
            }
            self.stats.drops.answer_too_large += 1;
        }
        self.refuse(now, req, wire::sa_error(code));
    }

    /// What a GetTable or GetMulti answer may be built to, known before it
    /// is built: `max_answer_bytes`, cut to the RMPP bytes still free, and
    /// to one MAD (which needs no RMPP send) when no send slot is free for
    /// this requester. `rmpp` says why it was cut, if it was.
    pub(super) fn budget(&self, req: &Request<'_>) -> Budget {
        let cap = self.cfg.max_answer_bytes;
        if !matches!(req.method, Method::GetTable | Method::GetMulti) {
            return Budget { bytes: cap, rmpp: None };
        }
        let (sends, bytes, per) =
            (self.cfg.max_rmpp_sends, self.cfg.max_rmpp_bytes, self.cfg.max_rmpp_sends_per_requester);
        match self.sends.room(req.addr.lid.0, sends, bytes, per) {
            Ok(left) if left >= cap => Budget { bytes: cap, rmpp: None },
            Ok(left) => Budget { bytes: left.max(SA_DATA_LEN).min(cap), rmpp: Some(SendError::Busy) },
            Err(e) => Budget { bytes: SA_DATA_LEN.min(cap), rmpp: Some(e) },
        }
    }

    /// ERR_NO_RESOURCES for an answer that finds no RMPP room: counted by
    /// why, one log line per period.
    pub(super) fn rmpp_refusal(&mut self, now: Duration, req: &Request<'_>, why: SendError) {
        let (sends, lid) = (self.sends.len(), req.addr.lid);
        if why == SendError::RequesterBusy {
            self.stats.drops.rmpp_requester_cap += 1;
            let per = self.cfg.max_rmpp_sends_per_requester;
            self.gate(now, Level::WARN, "rmpp_requester_cap", || {
                format!("LID {lid} has {per} multi-MAD answers in flight: one more refused (ERR_NO_RESOURCES)")
            });
        } else {
            self.stats.drops.rmpp_busy += 1;
            self.gate(now, Level::WARN, "rmpp_busy", || {
                format!("{sends} multi-MAD answers in flight: the one for LID {lid} refused (ERR_NO_RESOURCES)")
            });
        }
        self.refuse(now, req, wire::sa_error(sa_status::NO_RESOURCES));
    }

    pub(super) fn rmpp_config(&self) -> RmppConfig {
        RmppConfig {
            segment_timeout: self.cfg.rmpp_timeout(),
            retries: self.cfg.rmpp_retries,
            total_timeout: self.cfg.rmpp_total_timeout(),
            ..RmppConfig::default()
        }
    }

    pub(super) fn reap_sends(&mut self, now: Duration) {
        let ended = self.sends.reap();
        self.stats.rmpp.completed += ended.completed;
        self.stats.rmpp.failed += ended.failed;
        self.stats.rmpp.in_flight = self.sends.len() as u64;
        for (key, why) in ended.failures {
            self.gate(now, Level::INFO, "rmpp_answer_failed", || {
                format!("a multi-MAD answer to LID {} (TID {:#x}) ended unsent: {why}", key.lid, key.tid)
            });
        }
    }

    pub(super) fn count_ok(&mut self, req: &Request<'_>, n: usize) {
        let q = self.stats.query(req.attribute, req.method);
        q.ok += 1;
        q.records += n as u64;
    }

    pub(super) fn count_status(&mut self, status: u16) {
        *self.stats.by_status.entry(status).or_default() += 1;
    }

    /// Queues one MAD; a full queue drops it (counted).
    pub(super) fn push(&mut self, now: Duration, d: Datagram) {
        if self.out.len() >= self.cfg.max_queued {
            self.stats.drops.queue_full += 1;
            let n = self.stats.drops.queue_full;
            self.gate(now, Level::WARN, "queue_full", || format!("SA send queue full: {n} MADs dropped so far"));
            return;
        }
        self.stats.answered += 1;
        self.out.push_back(d);
    }

    // ---- Reports.

    /// Traps 64 and 65 for the end ports that entered or left service
    /// between the last snapshot and `snap` (IBA 14.2.5.1, sent by the SM:
    /// ProducerType class manager, issuer the SM's port, the port's GID at
    /// DataDetails bytes 6-21).
    pub(super) fn report_service_changes(&mut self, now: Duration, old: &PathIndex, snap: &Snapshot) {
        let gone: Vec<[u8; 16]> =
            old.ports_in_service().filter(|p| !self.paths.port_in_service(p.guid)).map(|p| p.gid()).collect();
        let came: Vec<[u8; 16]> =
            self.paths.ports_in_service().filter(|p| !old.port_in_service(p.guid)).map(|p| p.gid()).collect();
        let issuer_gid = self.paths.port_by_lid(snap.master_lid).map(|p| p.gid()).unwrap_or_default();
        for (number, gids) in [(trap::GID_OUT_OF_SERVICE, gone), (trap::GID_IN_SERVICE, came)] {
            for gid in gids {
                if number == trap::GID_IN_SERVICE {
                    self.stats.reports.gid_in_service += 1;
                } else {
                    self.stats.reports.gid_out_of_service += 1;
                }
                let notice = NoticeRepr::gid_trap(number, gid, snap.master_lid, issuer_gid);
                self.forward(now, &notice);
            }
        }
    }

    /// Reports `notice` to every subscription it matches (only a serving
    /// SA sends Reports).
    pub(super) fn forward(&mut self, now: Duration, notice: &NoticeRepr) {
        self.forward_where(now, notice, |_| true);
    }

    /// [`Self::forward`] to the matching subscriptions `allow` lets hear it.
    pub(super) fn forward_where(&mut self, now: Duration, notice: &NoticeRepr, allow: impl Fn(&Subscription) -> bool) {
        if self.serving != Serving::Master {
            return;
        }
        let targets: Vec<_> = self
            .subscriptions
            .iter()
            .filter(|s| s.matches(notice, &notice.issuer_gid) && allow(s))
            .map(|s| {
                let mut to = s.addr;
                to.qkey = crate::datagram::MadAddress::QP1_QKEY;
                to
            })
            .collect();
        for to in targets {
            self.stats.reports.queued += 1;
            let (max, per) = (self.cfg.max_reports, self.cfg.max_reports_per_subscriber);
            match self.reports.start(now, self.cfg.report_timeout(), to, notice, max, per) {
                Ok(d) => {
                    self.stats.reports.sent += 1;
                    self.push(now, d);
                }
                Err(ReportFull::Total) => {
                    self.stats.drops.report_cap += 1;
                    let n = self.reports.len();
                    self.gate(now, Level::WARN, "report_cap", || {
                        format!("{n} Reports in flight: a Report was dropped")
                    });
                }
                Err(ReportFull::Subscriber) => {
                    self.stats.drops.report_subscriber_cap += 1;
                    let lid = to.lid;
                    self.gate(now, Level::WARN, "report_subscriber_cap", || {
                        format!("{per} Reports to LID {lid} wait for a ReportResp: a Report to it was dropped")
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::rmpp::RmppHeaderRepr;
    use crate::mad::sa::SA_DATA_OFFSET;
    use crate::types::Lid;

    fn template(tid: u64) -> Vec<u8> {
        let mut t = vec![0u8; SA_DATA_OFFSET];
        t[..4].copy_from_slice(&[1, 0x03, 2, 0x92]);
        t[8..16].copy_from_slice(&tid.to_be_bytes());
        t
    }

    /// Found by fuzz/fuzz_targets/sa_agent.rs (seed `flood`): once the
    /// transfer the round-robin cursor points at has ended and been
    /// reaped, the next transfer after it was skipped, so a lone one
    /// never sent again (its segments nor its ABORT) and held its slot
    /// for good.
    #[test]
    fn room_counts_slots_bytes_and_each_requester() {
        let now = Duration::ZERO;
        let mut s = Sends::default();
        let (a, b) = (MadAddress::gsi(Lid(1), 0), MadAddress::gsi(Lid(2), 0));
        assert_eq!(s.room(1, 3, 1000, 2), Ok(1000));
        for tid in [7, 8] {
            s.start(now, SendKey::new(&a, tid), a, &template(tid), vec![0; 300], RmppConfig::default(), 3, 1000)
                .unwrap();
        }
        assert_eq!(s.to_requester(1), 2);
        assert_eq!(s.room(1, 3, 1000, 2), Err(SendError::RequesterBusy), "LID 1 has its two");
        assert_eq!(s.room(2, 3, 1000, 2), Ok(400), "another requester gets what is left");
        s.start(now, SendKey::new(&b, 7), b, &template(7), vec![0; 400], RmppConfig::default(), 3, 1000).unwrap();
        assert_eq!(s.room(3, 4, 1000, 2), Err(SendError::Busy), "no byte left");
        assert_eq!(s.room(3, 3, 2000, 2), Err(SendError::Busy), "no slot left");
        assert_eq!(s.clear(), 3);
        assert_eq!(s.room(1, 3, 1000, 2), Ok(1000));
    }

    #[test]
    fn a_reaped_cursor_skips_no_transfer() {
        let now = Duration::ZERO;
        let mut s = Sends::default();
        let (a, b) = (MadAddress::gsi(Lid(1), 0), MadAddress::gsi(Lid(2), 0));
        let (ka, kb) = (SendKey::new(&a, 7), SendKey::new(&b, 7));
        for (k, addr) in [(ka, a), (kb, b)] {
            s.start(now, k, addr, &template(7), vec![0xAB; 10], RmppConfig::default(), 4, 1 << 20).unwrap();
        }
        let (first, _) = s.poll_transmit(now).expect("A's only segment");
        assert_eq!(first.addr, a);
        let mut ack = template(7);
        ack.resize(256, 0);
        ack[3] = 0x12;
        RmppHeaderRepr::ack(1, 1).emit_bytes(&mut ack).unwrap();
        assert!(s.handle_mad(now, &ka, &ack));
        assert_eq!(s.reap(), Ended { completed: 1, failed: 0, failures: Vec::new() });
        let (next, _) = s.poll_transmit(now).expect("B's segment still goes out");
        assert_eq!(next.addr, b);
    }
}
