//! The transaction table: TIDs, the send window, timeouts and retries.
//!
//! An I/O-free core in the quinn-proto shape: the owner feeds it requests
//! ([`Transactions::submit`]), received MADs ([`Transactions::handle_receive`])
//! and the passage of time ([`Transactions::handle_timeout`]), and pulls out
//! what to put on the wire ([`Transactions::poll_transmit`]) and when to wake
//! up next ([`Transactions::poll_timeout`]). It never reads a clock.
//!
//! Windows: each management class has its own send window, so a class
//! that is slow to answer or has a deep backlog (SA queries, PerfMgt
//! counter reads) never holds back another; the sweep's SMPs above all.
//! The two SMP classes (LID-routed 0x01 and directed route 0x81) share one
//! window: both are VL15 traffic, which OpenSM's `max_wire_smps` bounds as
//! one. Within a class, retries go first, then new requests in submission
//! order.
//!
//! TIDs: only the low 32 bits are ours. The Linux kernel overwrites the high
//! 32 bits of every request's TID with the sending agent's `hi_tid`
//! (ib_umad_write), and ibsim/umad2sim overwrite bits 32-63 with their agent
//! and client numbers, so responses are matched on the low 32 bits alone.
//!
//! Every attempt of a transaction gets a fresh TID. The kernel refuses a
//! second outstanding send with the same TID (`is_duplicate` in user_mad.c),
//! and a kernel-timed-out send may still be outstanding when our own timer
//! fires. A response to any earlier attempt of a live transaction still
//! completes it (a "late" response): the answer is as good as the retry's.
//!
//! RMPP: a request submitted as [`RequestKind::Rmpp`] (a SubnAdmGetTable)
//! may be answered by a multi-segment transfer (IBA 13.6). Its first
//! response with RMPP Active starts an [`RmppReceiver`]; from then on the
//! request's own timer and retries stop, its window slot is free, and the
//! receiver's limits apply. Segments go to the receiver, its ACKs leave
//! through [`Transactions::poll_transmit`] ahead of any request (they are
//! counted, never windowed), and the transaction completes with the whole
//! reassembled MAD, or fails with the transfer's error. A finished
//! receiver lingers [`RMPP_LINGER`] to repeat its final ACK to a sender
//! that missed it, as the kernel does.
//!
//! A response that matches nothing is a stray, except in the SA class:
//! there it is handed on as unsolicited, because the SA agent takes RMPP
//! ACK/STOP/ABORT from its clients and ReportResps to its Reports.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use crate::datagram::{Datagram, MadAddress, MadSummary};
use crate::mad::{AttributeId, MadHeader, Method, MgmtClass, WireError, MAD_HEADER_LEN};
use crate::rmpp::{is_rmpp_active, RmppConfig, RmppError, RmppReceiver, TransferState};

/// How long a finished RMPP receiver keeps answering repeats of its
/// segments with the final ACK (the kernel's 10 s).
pub const RMPP_LINGER: Duration = Duration::from_secs(10);
/// Finished receivers kept lingering at most; the oldest goes first.
const MAX_LINGERING: usize = 64;

/// Knobs of the transaction layer; the SMP defaults are OpenSM's
/// (`max_wire_smps` 4, `transaction_timeout` 200 ms, `transaction_retries` 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnConfig {
    /// SMPs on the wire at once, LID-routed and directed route together
    /// (OpenSM's VL15 window). 0 is taken as 1.
    pub window: usize,
    /// GMPs on the wire at once, per management class: SA, PerfMgt and
    /// every other class each have a window of this size. 0 is taken as 1.
    pub gmp_window: usize,
    /// How long one attempt waits for its response.
    pub timeout: Duration,
    /// Re-sends after the first attempt before the transaction fails.
    pub retries: u32,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig { window: 4, gmp_window: 16, timeout: Duration::from_millis(200), retries: 3 }
    }
}

impl TxnConfig {
    /// The size of `class`'s window.
    pub fn window_for(&self, class: MgmtClass) -> usize {
        match window_of(class.into()) {
            SMP_WINDOW => self.window,
            _ => self.gmp_window,
        }
    }
}

/// The window a class's requests go through: its own class code, except
/// that directed-route SMPs share the LID-routed SMPs' window.
fn window_of(class: u8) -> u8 {
    match MgmtClass::from(class) {
        MgmtClass::SubnMgmtDirected => SMP_WINDOW,
        _ => class,
    }
}

const SMP_WINDOW: u8 = 0x01;

/// Whether `class` is a subnet management class (SMPs, LID-routed or
/// directed): what shares the SMP window and the SMP-only slots of the
/// unsolicited channel.
pub(crate) fn is_smp_class(class: u8) -> bool {
    window_of(class) == SMP_WINDOW
}

/// The key benchmarks group counters by: management class, attribute and
/// request method (a response is filed under the method it answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct MadKey {
    pub class: u8,
    pub attribute: u16,
    pub method: u8,
}

impl MadKey {
    /// The key of a MAD header; the response bit is cleared so a GetResp
    /// counts under Get.
    pub fn of<T: AsRef<[u8]>>(h: &MadHeader<T>) -> Self {
        let method = u8::from(h.method());
        let method = if method & 0x80 != 0 { method & 0x7f } else { method };
        MadKey { class: h.mgmt_class().into(), attribute: h.attribute_id().into(), method }
    }
    pub fn class(&self) -> MgmtClass {
        self.class.into()
    }
    pub fn attribute(&self) -> AttributeId {
        self.attribute.into()
    }
    pub fn method(&self) -> Method {
        self.method.into()
    }
}

impl fmt::Display for MadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?} {:?}", self.class(), self.method(), self.attribute())
    }
}

/// Counters for one [`MadKey`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MadCounters {
    /// MADs put on the wire, retries and unsolicited sends included.
    pub sent: u64,
    /// Of `sent`, the re-sends after a timeout.
    pub retries: u64,
    /// Attempts whose timer expired (each leads to a retry or a failure).
    pub timeouts: u64,
    /// Transactions given up after the last retry.
    pub failed: u64,
    /// Responses that completed a transaction.
    pub responses: u64,
    /// Of `responses`, those answering an earlier attempt than the last.
    pub late: u64,
    /// Responses that matched no live transaction (dropped).
    pub strays: u64,
    /// Requests, traps and reports from others, and SA-class responses
    /// that answer none of ours (for the SA agent).
    pub unsolicited: u64,
    /// RMPP segments received for a transfer being reassembled (repeats
    /// included).
    pub segments: u64,
    /// RMPP ACKs and ABORTs sent by our receivers (also in `sent`).
    pub acks: u64,
}

/// A snapshot of the transaction layer's counters and gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TxnStats {
    /// Serialised as a list of `{class, attribute, method, name, sent, ...}`
    /// (JSON maps need string keys).
    #[serde(serialize_with = "by_mad_as_list")]
    pub by_mad: BTreeMap<MadKey, MadCounters>,
    /// Received buffers too short to hold a MAD header.
    pub malformed: u64,
    /// Sum and maximum of response times (first transmit of the answered
    /// attempt to its response), for the mean RTT.
    pub rtt_total: Duration,
    pub rtt_max: Duration,
    /// Transactions on the wire now.
    pub in_flight: usize,
    /// Transactions waiting for window space (new and retries).
    pub queued: usize,
    /// Transactions whose RMPP answer is being reassembled.
    pub receiving: usize,
}

fn by_mad_as_list<S: serde::Serializer>(m: &BTreeMap<MadKey, MadCounters>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Entry<'a> {
        #[serde(flatten)]
        key: &'a MadKey,
        name: String,
        #[serde(flatten)]
        counters: &'a MadCounters,
    }
    s.collect_seq(m.iter().map(|(key, counters)| Entry { key, name: key.to_string(), counters }))
}

impl TxnStats {
    /// The counters summed over every key.
    pub fn totals(&self) -> MadCounters {
        let mut t = MadCounters::default();
        for c in self.by_mad.values() {
            t.sent += c.sent;
            t.retries += c.retries;
            t.timeouts += c.timeouts;
            t.failed += c.failed;
            t.responses += c.responses;
            t.late += c.late;
            t.strays += c.strays;
            t.unsolicited += c.unsolicited;
            t.segments += c.segments;
            t.acks += c.acks;
        }
        t
    }
}

/// Why a transaction ended without a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// `mad` is the last attempt as sent, so its TID is the last one used.
    #[error("{mad}: no response after {attempts} attempts")]
    Timeout { attempts: u32, mad: Box<MadSummary> },
    #[error("cannot submit: {0}")]
    Malformed(WireError),
    /// The response's RMPP transfer failed; `mad` is the request.
    #[error("{mad}: RMPP transfer failed: {error}")]
    Rmpp { mad: Box<MadSummary>, error: RmppError },
}

/// What a request expects back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RequestKind {
    /// One response MAD completes it.
    #[default]
    Single,
    /// The response may come as an RMPP transfer, to be reassembled
    /// (SubnAdmGetTable); a response without RMPP Active completes it as is.
    Rmpp(RmppConfig),
}

/// What a received MAD turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received<T> {
    /// The response to a transaction, which is now complete.
    Response { token: T, dgram: Datagram },
    /// A request, trap or report from someone else.
    Unsolicited(Datagram),
    /// A response that matches no live transaction (for instance one that
    /// arrives after its transaction failed). Counted and dropped.
    Stray { tid: u64 },
    /// An RMPP segment taken by a transfer still under way, or repeated to
    /// one just finished; any ACK it calls for waits in `poll_transmit`.
    Segment { tid: u64 },
    /// A transaction ended by what arrived: its RMPP transfer failed (the
    /// sender aborted, or broke the protocol and was sent an ABORT).
    Failed { token: T, error: TxnError },
    /// Too short to be a MAD. Counted and dropped.
    Malformed(WireError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued,
    InFlight {
        sent_at: Duration,
        deadline: Duration,
    },
    /// Reassembling an RMPP answer (`rx` is set); `deadline` is the
    /// receiver's next timeout.
    Receiving {
        deadline: Duration,
    },
}

/// A receiver and where its ACKs go: back to the segments' source.
#[derive(Debug)]
struct Rx {
    receiver: RmppReceiver,
    addr: MadAddress,
}

/// A finished receiver still answering repeats of its segments.
#[derive(Debug)]
struct Lingering {
    tid: u32,
    class: u8,
    until: Duration,
    rx: Rx,
}

#[derive(Debug)]
struct Txn<T> {
    token: T,
    dgram: Datagram,
    key: MadKey,
    kind: RequestKind,
    attempts: u32,
    /// Every TID this transaction has used, the current one last.
    tids: Vec<u32>,
    state: State,
    rx: Option<Rx>,
}

/// One class's send window.
#[derive(Debug)]
struct Window {
    size: usize,
    in_flight: usize,
    /// Transactions waiting for room, retries first. Entries whose
    /// transaction has completed or is already in flight are skipped when
    /// popped.
    queue: VecDeque<u64>,
}

/// The transaction table. `T` is the caller's token for a request.
#[derive(Debug)]
pub struct Transactions<T> {
    cfg: TxnConfig,
    next_tid: u32,
    next_id: u64,
    txns: HashMap<u64, Txn<T>>,
    by_tid: HashMap<u32, u64>,
    /// By [`window_of`] the class. Ordered, so the SMP window (0x01) is
    /// served first when several have room.
    windows: BTreeMap<u8, Window>,
    deadlines: BTreeSet<(Duration, u64)>,
    /// Receiver timeouts of the transactions in `State::Receiving`.
    rmpp_deadlines: BTreeSet<(Duration, u64)>,
    /// RMPP ACKs and ABORTs to send, ahead of any request.
    outbox: VecDeque<Datagram>,
    lingering: VecDeque<Lingering>,
    stats: TxnStats,
}

/// The first 24 bytes of a datagram as a header view, if it has them.
fn header_of(mad: &[u8]) -> Result<MadHeader<&[u8]>, WireError> {
    MadHeader::new_checked(&mad[..mad.len().min(MAD_HEADER_LEN)])
}

impl<T> Transactions<T> {
    pub fn new(cfg: TxnConfig) -> Self {
        Self::with_first_tid(cfg, 1)
    }

    /// Starts TID allocation at `first` (tests use it to reach wraparound).
    pub fn with_first_tid(mut cfg: TxnConfig, first: u32) -> Self {
        cfg.window = cfg.window.max(1);
        cfg.gmp_window = cfg.gmp_window.max(1);
        Transactions {
            cfg,
            next_tid: first,
            next_id: 0,
            txns: HashMap::new(),
            by_tid: HashMap::new(),
            windows: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            rmpp_deadlines: BTreeSet::new(),
            outbox: VecDeque::new(),
            lingering: VecDeque::new(),
            stats: TxnStats::default(),
        }
    }

    pub fn config(&self) -> &TxnConfig {
        &self.cfg
    }

    /// Queues a request. Its TID is assigned when it is transmitted.
    pub fn submit(&mut self, token: T, dgram: Datagram) -> Result<(), TxnError> {
        self.submit_with(token, dgram, RequestKind::Single)
    }

    /// Queues a request that expects `kind` of answer.
    pub fn submit_with(&mut self, token: T, dgram: Datagram, kind: RequestKind) -> Result<(), TxnError> {
        let key = MadKey::of(&header_of(&dgram.mad).map_err(TxnError::Malformed)?);
        let id = self.next_id;
        self.next_id += 1;
        let txn = Txn { token, dgram, key, kind, attempts: 0, tids: Vec::new(), state: State::Queued, rx: None };
        self.txns.insert(id, txn);
        self.window(key.class).queue.push_back(id);
        Ok(())
    }

    /// The window of `class`, made on first use.
    fn window(&mut self, class: u8) -> &mut Window {
        let cfg = &self.cfg;
        self.windows.entry(window_of(class)).or_insert_with(|| Window {
            size: cfg.window_for(class.into()),
            in_flight: 0,
            queue: VecDeque::new(),
        })
    }

    /// Counts a MAD sent outside any transaction (a response or a trap).
    pub fn count_send(&mut self, dgram: &Datagram) {
        if let Ok(h) = header_of(&dgram.mad) {
            self.stats.by_mad.entry(MadKey::of(&h)).or_default().sent += 1;
        }
    }

    /// The next MAD to put on the wire: RMPP ACKs and ABORTs first, then a
    /// request from a window with room: the SMPs' window first (0x01 is
    /// the lowest class in use), then the others in class order; within a
    /// class, retries first, then new requests in submission order. A full
    /// window holds back only its own class.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Datagram> {
        if let Some(d) = self.outbox.pop_front() {
            if let Ok(h) = header_of(&d.mad) {
                let c = self.stats.by_mad.entry(MadKey::of(&h)).or_default();
                c.sent += 1;
                c.acks += 1;
            }
            return Some(d);
        }
        let txns = &self.txns;
        let id = self.windows.values_mut().filter(|w| w.in_flight < w.size).find_map(|w| {
            while let Some(id) = w.queue.pop_front() {
                if matches!(txns.get(&id), Some(t) if t.state == State::Queued) {
                    w.in_flight += 1;
                    return Some(id);
                }
            }
            None
        })?;
        let tid = self.alloc_tid();
        let txn = self.txns.get_mut(&id).expect("checked when popped");
        let mut h = MadHeader::new_checked(&mut txn.dgram.mad[..MAD_HEADER_LEN]).expect("checked at submit");
        h.set_transaction_id(u64::from(tid));
        txn.attempts += 1;
        txn.tids.push(tid);
        let deadline = now + self.cfg.timeout;
        txn.state = State::InFlight { sent_at: now, deadline };
        self.by_tid.insert(tid, id);
        self.deadlines.insert((deadline, id));
        let c = self.stats.by_mad.entry(txn.key).or_default();
        c.sent += 1;
        if txn.attempts > 1 {
            c.retries += 1;
        }
        Some(txn.dgram.clone())
    }

    /// The next free low-32-bit TID. 0 is skipped (it reads as "unset" in
    /// traces) and so are TIDs still owned by a live transaction.
    fn alloc_tid(&mut self) -> u32 {
        loop {
            let tid = self.next_tid;
            self.next_tid = self.next_tid.wrapping_add(1);
            if tid != 0 && !self.by_tid.contains_key(&tid) {
                return tid;
            }
        }
    }

    /// Classifies a received MAD and completes the transaction it answers.
    pub fn handle_receive(&mut self, now: Duration, dgram: Datagram) -> Received<T> {
        let h = match header_of(&dgram.mad) {
            Ok(h) => h,
            Err(e) => {
                self.stats.malformed += 1;
                return Received::Malformed(e);
            }
        };
        let key = MadKey::of(&h);
        if !h.method().is_response() {
            self.stats.by_mad.entry(key).or_default().unsolicited += 1;
            return Received::Unsolicited(dgram);
        }
        let full_tid = h.transaction_id();
        let tid = full_tid as u32;
        let class: u8 = h.mgmt_class().into();
        let id = match self.by_tid.get(&tid) {
            Some(&id) if self.txns[&id].key.class == class => id,
            _ => return self.unmatched(now, dgram, key),
        };
        let rmpp = is_rmpp_active(&dgram.mad);
        let txn = &self.txns[&id];
        match (txn.kind, txn.state) {
            (RequestKind::Rmpp(_), State::Receiving { .. }) if rmpp => self.feed(now, id, dgram),
            (RequestKind::Rmpp(_), State::Receiving { .. }) => {
                // Not part of the transfer under way (a non-RMPP answer to
                // an earlier attempt, say).
                self.stats.by_mad.entry(key).or_default().strays += 1;
                Received::Stray { tid: full_tid }
            }
            (RequestKind::Rmpp(cfg), _) if rmpp => {
                self.start_receiving(now, id, tid, cfg, dgram.addr);
                self.feed(now, id, dgram)
            }
            _ => {
                let txn = self.remove(id);
                self.count_response(now, &txn, tid);
                Received::Response { token: txn.token, dgram }
            }
        }
    }

    /// Counts the first response of `txn` (on attempt TID `tid`): RTT, and
    /// whether it answers an earlier attempt.
    fn count_response(&mut self, now: Duration, txn: &Txn<T>, tid: u32) {
        let c = self.stats.by_mad.entry(txn.key).or_default();
        c.responses += 1;
        if txn.tids.last() != Some(&tid) {
            c.late += 1;
        }
        if let State::InFlight { sent_at, .. } = txn.state {
            let rtt = now.saturating_sub(sent_at);
            self.stats.rtt_total += rtt;
            self.stats.rtt_max = self.stats.rtt_max.max(rtt);
        }
    }

    /// A response that matches no live transaction: a repeat for a
    /// lingering receiver, an SA-class MAD for the SA agent, or a stray.
    fn unmatched(&mut self, now: Duration, dgram: Datagram, key: MadKey) -> Received<T> {
        let full_tid = header_of(&dgram.mad).map_or(0, |h| h.transaction_id());
        while self.lingering.front().is_some_and(|l| l.until <= now) {
            self.lingering.pop_front();
        }
        if is_rmpp_active(&dgram.mad) {
            let found = self.lingering.iter_mut().find(|l| l.tid == full_tid as u32 && l.class == key.class);
            if let Some(l) = found {
                self.stats.by_mad.entry(key).or_default().segments += 1;
                let _ = l.rx.receiver.handle_mad(now, &dgram.mad);
                while let Some(mad) = l.rx.receiver.poll_transmit() {
                    self.outbox.push_back(Datagram { addr: l.rx.addr, mad });
                }
                return Received::Segment { tid: full_tid };
            }
        }
        let c = self.stats.by_mad.entry(key).or_default();
        if key.class() == MgmtClass::SubnAdm {
            c.unsolicited += 1;
            return Received::Unsolicited(dgram);
        }
        c.strays += 1;
        tracing::debug!(tid = format_args!("{full_tid:#018x}"), mad = %key, "stray response dropped");
        Received::Stray { tid: full_tid }
    }

    /// The first RMPP segment answered transaction `id` (on attempt TID
    /// `tid`): its request timer and window slot go, a receiver takes over.
    fn start_receiving(&mut self, now: Duration, id: u64, tid: u32, cfg: RmppConfig, from: MadAddress) {
        let txn = self.txns.get_mut(&id).expect("a live transaction");
        if let State::InFlight { sent_at, deadline } = txn.state {
            self.deadlines.remove(&(deadline, id));
            self.windows.get_mut(&window_of(txn.key.class)).expect("an in-flight class has a window").in_flight -= 1;
            let rtt = now.saturating_sub(sent_at);
            self.stats.rtt_total += rtt;
            self.stats.rtt_max = self.stats.rtt_max.max(rtt);
        }
        if txn.tids.last() != Some(&tid) {
            self.stats.by_mad.entry(txn.key).or_default().late += 1;
        }
        // ACKs go back where the segments came from (the device reports
        // QP1's well-known Q_Key, `umad::received_address`).
        let addr = from;
        let receiver = RmppReceiver::new(now, cfg);
        let deadline = receiver.poll_timeout().unwrap_or(now);
        txn.rx = Some(Rx { receiver, addr });
        txn.state = State::Receiving { deadline };
        self.rmpp_deadlines.insert((deadline, id));
    }

    /// Moves the ACKs of transaction `id`'s receiver to the outbox and,
    /// when its transfer has ended, completes the transaction.
    fn settle(&mut self, now: Duration, id: u64) -> Option<Result<(T, Datagram), (T, TxnError)>> {
        let txn = self.txns.get_mut(&id).expect("a live transaction");
        let rx = txn.rx.as_mut().expect("a receiving transaction has a receiver");
        while let Some(mad) = rx.receiver.poll_transmit() {
            self.outbox.push_back(Datagram { addr: rx.addr, mad });
        }
        let State::Receiving { deadline } = txn.state else { unreachable!("only receiving transactions settle") };
        match rx.receiver.state() {
            TransferState::Active => {
                let next = rx.receiver.poll_timeout().unwrap_or(now);
                if next != deadline {
                    self.rmpp_deadlines.remove(&(deadline, id));
                    self.rmpp_deadlines.insert((next, id));
                    txn.state = State::Receiving { deadline: next };
                }
                None
            }
            TransferState::Done | TransferState::Failed(_) => {
                let mut txn = self.remove(id);
                let mut rx = txn.rx.take().expect("checked above");
                let result = rx.receiver.take_result().expect("an ended transfer has a result");
                let c = self.stats.by_mad.entry(txn.key).or_default();
                match result {
                    Ok(mad) => {
                        c.responses += 1;
                        let tid = *txn.tids.last().expect("a received transaction was sent");
                        if self.lingering.len() == MAX_LINGERING {
                            self.lingering.pop_front();
                        }
                        let addr = rx.addr;
                        let class = txn.key.class;
                        self.lingering.push_back(Lingering { tid, class, until: now + RMPP_LINGER, rx });
                        Some(Ok((txn.token, Datagram { addr, mad })))
                    }
                    Err(error) => {
                        c.failed += 1;
                        tracing::debug!(mad = %MadSummary::of(&txn.dgram), %error, "RMPP transfer failed");
                        let err = TxnError::Rmpp { mad: Box::new(MadSummary::of(&txn.dgram)), error };
                        Some(Err((txn.token, err)))
                    }
                }
            }
        }
    }

    /// Hands a segment to transaction `id`'s receiver.
    fn feed(&mut self, now: Duration, id: u64, dgram: Datagram) -> Received<T> {
        let full_tid = header_of(&dgram.mad).map_or(0, |h| h.transaction_id());
        let txn = self.txns.get_mut(&id).expect("a live transaction");
        let rx = txn.rx.as_mut().expect("a receiving transaction has a receiver");
        let from = dgram.addr;
        if let Err(e) = rx.receiver.handle_mad(now, &dgram.mad) {
            tracing::debug!(tid = format_args!("{full_tid:#018x}"), error = %e, "RMPP segment refused");
        }
        self.stats.by_mad.entry(txn.key).or_default().segments += 1;
        match self.settle(now, id) {
            None => Received::Segment { tid: full_tid },
            Some(Ok((token, mut whole))) => {
                // The answer comes from where its segments did.
                whole.addr = from;
                Received::Response { token, dgram: whole }
            }
            Some(Err((token, error))) => Received::Failed { token, error },
        }
    }

    /// Expires attempts whose deadline is at or before `now`. Those with
    /// retries left go to the front of the queue (ahead of new requests, in
    /// deadline order); the others fail and are returned, with the RMPP
    /// transfers that ran out of time (their ABORTs wait in the outbox).
    pub fn handle_timeout(&mut self, now: Duration) -> Vec<(T, TxnError)> {
        let mut expired = Vec::new();
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            expired.push(id);
        }
        let mut requeue = Vec::new();
        let mut failed = Vec::new();
        for id in expired {
            let txn = self.txns.get_mut(&id).expect("a deadline belongs to a live transaction");
            txn.state = State::Queued;
            self.windows.get_mut(&window_of(txn.key.class)).expect("an in-flight class has a window").in_flight -= 1;
            let c = self.stats.by_mad.entry(txn.key).or_default();
            c.timeouts += 1;
            if txn.attempts <= self.cfg.retries {
                requeue.push(id);
            } else {
                c.failed += 1;
                let txn = self.remove(id);
                let err = TxnError::Timeout { attempts: txn.attempts, mad: Box::new(MadSummary::of(&txn.dgram)) };
                failed.push((txn.token, err));
            }
        }
        for id in requeue.into_iter().rev() {
            let class = self.txns[&id].key.class;
            self.window(class).queue.push_front(id);
        }
        let due: Vec<u64> = self.rmpp_deadlines.iter().take_while(|&&(d, _)| d <= now).map(|&(_, id)| id).collect();
        for id in due {
            let rx = self.txns.get_mut(&id).and_then(|t| t.rx.as_mut()).expect("a receiver deadline has a receiver");
            rx.receiver.handle_timeout(now);
            if let Some(Err(f)) = self.settle(now, id) {
                failed.push(f);
            }
        }
        failed
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let a = self.deadlines.first().map(|&(d, _)| d);
        let b = self.rmpp_deadlines.first().map(|&(d, _)| d);
        a.into_iter().chain(b).min()
    }

    /// Abandons the transaction whose current TID is `tid` (its send failed).
    pub fn cancel_tid(&mut self, tid: u32) -> Option<T> {
        let id = *self.by_tid.get(&tid)?;
        Some(self.remove(id).token)
    }

    /// Abandons everything (shutdown), returning the tokens.
    pub fn drain(&mut self) -> Vec<T> {
        self.by_tid.clear();
        self.windows.clear();
        self.deadlines.clear();
        self.rmpp_deadlines.clear();
        self.outbox.clear();
        self.lingering.clear();
        self.txns.drain().map(|(_, t)| t.token).collect()
    }

    fn remove(&mut self, id: u64) -> Txn<T> {
        let txn = self.txns.remove(&id).expect("live transaction");
        for tid in &txn.tids {
            self.by_tid.remove(tid);
        }
        match txn.state {
            State::InFlight { deadline, .. } => {
                self.deadlines.remove(&(deadline, id));
                let w = self.windows.get_mut(&window_of(txn.key.class)).expect("an in-flight class has a window");
                w.in_flight -= 1;
            }
            State::Receiving { deadline } => {
                self.rmpp_deadlines.remove(&(deadline, id));
            }
            State::Queued => {}
        }
        txn
    }

    /// Transactions on the wire.
    pub fn in_flight(&self) -> usize {
        self.deadlines.len()
    }

    /// Transactions on the wire in `class`'s window (for an SMP class, both
    /// SMP classes together).
    pub fn in_flight_in(&self, class: MgmtClass) -> usize {
        self.windows.get(&window_of(class.into())).map_or(0, |w| w.in_flight)
    }

    /// Transactions whose RMPP answer is being reassembled.
    pub fn receiving(&self) -> usize {
        self.rmpp_deadlines.len()
    }

    /// Transactions not yet complete (queued, on the wire or receiving).
    pub fn pending(&self) -> usize {
        self.txns.len()
    }

    /// Counters and gauges.
    pub fn stats(&self) -> TxnStats {
        let mut s = self.stats.clone();
        s.in_flight = self.deadlines.len();
        s.receiving = self.rmpp_deadlines.len();
        s.queued = self.txns.len() - s.in_flight - s.receiving;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::smp::SmpRepr;
    use crate::mad::DrPath;
    use crate::rmpp::RmppSender;
    use crate::types::Lid;

    const MS: Duration = Duration::from_millis(1);

    fn get(attr: AttributeId, path: &[u8]) -> Datagram {
        let smp = SmpRepr::directed_request(Method::Get, attr, 0, DrPath::from_ports(path).unwrap(), 0, [0; 64]);
        Datagram { addr: MadAddress::smi_permissive(), mad: smp.to_bytes().to_vec() }
    }

    /// The response a device would send back, with the TID's high bits
    /// scribbled over as the kernel and ibsim do.
    fn answer(req: &Datagram) -> Datagram {
        let mut r = req.clone();
        let mut h = MadHeader::new_checked(&mut r.mad[..MAD_HEADER_LEN]).unwrap();
        h.set_method(Method::GetResp);
        let tid = h.transaction_id();
        h.set_transaction_id(0xabcd_0001_0000_0000 | (tid & 0xffff_ffff));
        r
    }

    fn tid_of(d: &Datagram) -> u64 {
        header_of(&d.mad).unwrap().transaction_id()
    }

    fn cfg(window: usize, retries: u32) -> TxnConfig {
        TxnConfig { window, gmp_window: window, timeout: 100 * MS, retries }
    }

    fn cfg2(window: usize, gmp_window: usize, retries: u32) -> TxnConfig {
        TxnConfig { window, gmp_window, timeout: 100 * MS, retries }
    }

    /// A Get of `class` to QP1 (an SMP class goes to QP0), told apart by
    /// its attribute modifier.
    fn gmp(class: MgmtClass, tag: u32) -> Datagram {
        let mut mad = vec![0u8; 256];
        let mut h = MadHeader::new_checked(&mut mad[..MAD_HEADER_LEN]).unwrap();
        h.set_base_version(1);
        h.set_mgmt_class(class);
        h.set_class_version(if class == MgmtClass::SubnAdm { 2 } else { 1 });
        h.set_method(Method::Get);
        h.set_attribute_id(AttributeId::from(0x0012));
        h.set_attribute_modifier(tag);
        let addr = match class {
            MgmtClass::SubnMgmtLid => MadAddress::smi(Lid(1)),
            _ => MadAddress::gsi(Lid(1), 0),
        };
        Datagram { addr, mad }
    }

    /// A directed-route SMP told apart by its attribute modifier.
    fn dr(tag: u32) -> Datagram {
        let mut d = get(AttributeId::NodeInfo, &[1]);
        MadHeader::new_checked(&mut d.mad[..MAD_HEADER_LEN]).unwrap().set_attribute_modifier(tag);
        d
    }

    /// (class, attribute modifier) of a sent MAD.
    fn tag(d: &Datagram) -> (MgmtClass, u32) {
        let h = header_of(&d.mad).unwrap();
        (h.mgmt_class(), h.attribute_modifier())
    }

    /// What [`run_mixed`] saw.
    #[derive(Debug, Default)]
    struct Outcome {
        /// Completed tokens in order, with the time each completed.
        done: Vec<(Duration, u32)>,
        failed: Vec<u32>,
        /// The most in flight at once, overall and by window (keyed by
        /// the window's class: 0x01 for both SMP classes).
        max_in_flight: usize,
        max_by_window: BTreeMap<u8, usize>,
    }

    /// Steps a fake clock to each wake-up, answering every request after
    /// `rtt` unless `drop` (given the MAD and the send count) says so, and
    /// checks every class's window on every step.
    fn run_mixed(t: &mut Transactions<u32>, rtt: Duration, mut drop: impl FnMut(&Datagram, u32) -> bool) -> Outcome {
        let mut now = Duration::ZERO;
        let mut wire: Vec<(Duration, Datagram)> = Vec::new();
        let mut o = Outcome::default();
        let mut sends = 0u32;
        for _step in 0..10_000 {
            while let Some(d) = t.poll_transmit(now) {
                sends += 1;
                if !drop(&d, sends) {
                    wire.push((now + rtt, answer(&d)));
                }
            }
            o.max_in_flight = o.max_in_flight.max(t.in_flight());
            for (&w, win) in &t.windows {
                let class = MgmtClass::from(w);
                assert_eq!(win.in_flight, t.in_flight_in(class));
                assert!(win.in_flight <= t.config().window_for(class), "window of {class:?} exceeded");
                let max = o.max_by_window.entry(w).or_default();
                *max = (*max).max(win.in_flight);
            }
            let in_windows: usize = t.windows.values().map(|w| w.in_flight).sum();
            assert_eq!(in_windows, t.in_flight(), "the windows account for every send");
            let next_wire = wire.iter().map(|w| w.0).min();
            let next = match (next_wire, t.poll_timeout()) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(x) => x,
                    None => return o,
                },
            };
            assert!(next >= now, "time must not go backwards");
            now = next;
            let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= now);
            wire = rest;
            for (_, d) in due {
                match t.handle_receive(now, d) {
                    Received::Response { token, .. } => o.done.push((now, token)),
                    Received::Stray { .. } => {}
                    // A late SA answer (to a retried query) goes to the SA agent.
                    Received::Unsolicited(d) if tag(&d).0 == MgmtClass::SubnAdm => {}
                    other => panic!("unexpected {other:?}"),
                }
            }
            o.failed.extend(t.handle_timeout(now).into_iter().map(|(tok, _)| tok));
        }
        panic!("livelock: no quiescence after 10000 steps");
    }

    /// [`run_mixed`] for SMPs alone, with the overall window check.
    /// Returns (completed tokens in order, failed tokens, max seen in flight).
    fn run(
        t: &mut Transactions<u32>,
        rtt: Duration,
        mut drop: impl FnMut(u64, u32) -> bool,
    ) -> (Vec<u32>, Vec<u32>, usize) {
        let o = run_mixed(t, rtt, |d, sends| drop(tid_of(d), sends));
        assert!(o.max_in_flight <= t.config().window, "window exceeded");
        (o.done.into_iter().map(|(_, tok)| tok).collect(), o.failed, o.max_in_flight)
    }

    #[test]
    fn window_is_never_exceeded_and_all_complete() {
        for window in [1, 2, 4, 7] {
            let mut t = Transactions::new(cfg(window, 3));
            for i in 0..50 {
                t.submit(i, get(AttributeId::NodeInfo, &[1])).unwrap();
            }
            let (done, failed, max) = run(&mut t, 3 * MS, |_, _| false);
            assert_eq!(done, (0..50).collect::<Vec<_>>(), "window {window}: FIFO completion");
            assert!(failed.is_empty());
            assert_eq!(max, window);
            let s = t.stats();
            let c = s.by_mad[&MadKey { class: 0x81, attribute: 0x11, method: 1 }];
            assert_eq!((c.sent, c.responses, c.retries, c.timeouts), (50, 50, 0, 0));
            assert_eq!((s.in_flight, s.queued), (0, 0));
        }
    }

    #[test]
    fn tids_are_unique_among_live_transactions() {
        let mut t = Transactions::new(cfg(8, 0));
        for i in 0..8 {
            t.submit(i, get(AttributeId::PortInfo, &[])).unwrap();
        }
        let mut tids: Vec<u64> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tid_of(&d)).collect();
        assert_eq!(tids.len(), 8);
        assert!(tids.iter().all(|&x| x >> 32 == 0), "high 32 bits are left to the kernel");
        tids.sort();
        tids.dedup();
        assert_eq!(tids.len(), 8);
    }

    #[test]
    fn retries_then_failure() {
        let mut t = Transactions::new(cfg(4, 2));
        t.submit(7u32, get(AttributeId::SwitchInfo, &[1, 3])).unwrap();
        let d1 = t.poll_transmit(Duration::ZERO).unwrap();
        assert_eq!(t.poll_timeout(), Some(100 * MS));
        assert!(t.handle_timeout(99 * MS).is_empty());
        assert!(t.handle_timeout(100 * MS).is_empty(), "first retry");
        assert_eq!(t.in_flight(), 0);
        let d2 = t.poll_transmit(100 * MS).unwrap();
        assert_ne!(tid_of(&d1), tid_of(&d2), "each attempt has its own TID");
        assert!(t.handle_timeout(200 * MS).is_empty(), "second retry");
        let d3 = t.poll_transmit(200 * MS).unwrap();
        let failed = t.handle_timeout(300 * MS);
        assert_eq!(failed.len(), 1);
        let (tok, err) = &failed[0];
        assert_eq!(*tok, 7);
        match err {
            TxnError::Timeout { attempts, mad } => {
                assert_eq!(*attempts, 3);
                assert_eq!(mad.tid, tid_of(&d3));
                assert_eq!(mad.attribute, AttributeId::SwitchInfo);
                assert_eq!(mad.path, Some(DrPath::from_ports(&[1, 3]).unwrap()));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(t.pending(), 0);
        // Every attempt's late answer is now a stray.
        for d in [&d1, &d2, &d3] {
            assert!(matches!(t.handle_receive(310 * MS, answer(d)), Received::Stray { .. }));
        }
        let c = t.stats().by_mad[&MadKey { class: 0x81, attribute: 0x12, method: 1 }];
        assert_eq!((c.sent, c.retries, c.timeouts, c.failed, c.strays), (3, 2, 3, 1, 3));
    }

    #[test]
    fn late_response_after_retry_completes_and_the_retry_answer_is_stray() {
        let mut t = Transactions::new(cfg(1, 3));
        t.submit(1u32, get(AttributeId::NodeInfo, &[2])).unwrap();
        t.submit(2u32, get(AttributeId::NodeInfo, &[3])).unwrap();
        let first = t.poll_transmit(Duration::ZERO).unwrap();
        assert!(t.poll_transmit(Duration::ZERO).is_none(), "window 1");
        t.handle_timeout(100 * MS);
        let retry = t.poll_transmit(100 * MS).unwrap();
        assert_eq!(&retry.mad[129..130], &[2], "the retry goes before request 2");
        // The first attempt's answer arrives late: it completes transaction 1.
        match t.handle_receive(120 * MS, answer(&first)) {
            Received::Response { token, .. } => assert_eq!(token, 1),
            other => panic!("{other:?}"),
        }
        // The retry's answer then matches nothing.
        assert!(matches!(t.handle_receive(130 * MS, answer(&retry)), Received::Stray { .. }));
        // Window space freed: request 2 goes out.
        let second = t.poll_transmit(130 * MS).unwrap();
        assert_eq!(&second.mad[129..130], &[3]);
        let c = t.stats().by_mad[&MadKey { class: 0x81, attribute: 0x11, method: 1 }];
        assert_eq!((c.responses, c.late, c.strays, c.retries), (1, 1, 1, 1));
    }

    #[test]
    fn retries_jump_the_queue_in_deadline_order() {
        let mut t = Transactions::new(cfg(2, 1));
        for (i, p) in [(0u32, 1u8), (1, 2), (2, 3)] {
            t.submit(i, get(AttributeId::NodeInfo, &[p])).unwrap();
        }
        t.poll_transmit(Duration::ZERO).unwrap();
        t.poll_transmit(MS).unwrap();
        assert!(t.handle_timeout(101 * MS).is_empty());
        let order: Vec<u8> = std::iter::from_fn(|| t.poll_transmit(101 * MS)).map(|d| d.mad[129]).collect();
        assert_eq!(order, vec![1, 2], "both retries before request 3");
    }

    #[test]
    fn lossy_link_eventually_delivers_with_retries() {
        use rand::{Rng, SeedableRng};
        let mut t = Transactions::new(cfg(4, 8));
        for i in 0..40 {
            t.submit(i, get(AttributeId::PortInfo, &[1])).unwrap();
        }
        // Drop a third of all sends (seeded: the outcome is fixed).
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut drops = 0u64;
        let (done, failed, _) = run(&mut t, 2 * MS, |_, _| {
            let d = rng.gen_ratio(1, 3);
            drops += u64::from(d);
            d
        });
        assert!(failed.is_empty());
        let mut sorted = done.clone();
        sorted.sort();
        assert_eq!(sorted, (0..40).collect::<Vec<_>>());
        let c = t.stats().totals();
        assert_eq!(c.responses, 40);
        assert_eq!(c.sent, 40 + c.retries);
        assert_eq!(c.retries, drops, "one retry per dropped send: {c:?}");
        assert_eq!(c.timeouts, drops);
        assert!(drops >= 10, "the seed drops a fair share: {drops}");
    }

    #[test]
    fn tid_wraparound_skips_zero_and_live_tids() {
        let mut t = Transactions::with_first_tid(cfg(8, 0), u32::MAX - 1);
        t.submit(0u32, get(AttributeId::NodeInfo, &[])).unwrap();
        let a = t.poll_transmit(Duration::ZERO).unwrap();
        assert_eq!(tid_of(&a), u64::from(u32::MAX - 1));
        for i in 1..4 {
            t.submit(i, get(AttributeId::NodeInfo, &[])).unwrap();
        }
        let tids: Vec<u64> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tid_of(&d)).collect();
        assert_eq!(tids, vec![u64::from(u32::MAX), 1, 2]);
        // A response whose high bits were rewritten still matches.
        let mut r = answer(&a);
        r.mad[8..12].copy_from_slice(&[0xff; 4]);
        assert!(matches!(t.handle_receive(MS, r), Received::Response { token: 0, .. }));

        // Wrap all the way round with TID 1 and 2 still live.
        let mut t2 = Transactions::with_first_tid(cfg(8, 0), 1);
        t2.submit(10u32, get(AttributeId::NodeInfo, &[])).unwrap();
        t2.submit(11u32, get(AttributeId::NodeInfo, &[])).unwrap();
        t2.poll_transmit(Duration::ZERO).unwrap();
        t2.poll_transmit(Duration::ZERO).unwrap();
        t2.next_tid = u32::MAX;
        t2.submit(12u32, get(AttributeId::NodeInfo, &[])).unwrap();
        t2.submit(13u32, get(AttributeId::NodeInfo, &[])).unwrap();
        let tids: Vec<u64> = std::iter::from_fn(|| t2.poll_transmit(Duration::ZERO)).map(|d| tid_of(&d)).collect();
        assert_eq!(tids, vec![u64::from(u32::MAX), 3]);
    }

    #[test]
    fn unsolicited_stray_and_malformed_are_classified() {
        let mut t: Transactions<u32> = Transactions::new(TxnConfig::default());
        // A Get from another SM.
        let req = get(AttributeId::SmInfo, &[]);
        assert!(matches!(t.handle_receive(Duration::ZERO, req.clone()), Received::Unsolicited(_)));
        // A trap.
        let mut trap = req.clone();
        trap.mad[3] = u8::from(Method::Trap);
        assert!(matches!(t.handle_receive(Duration::ZERO, trap), Received::Unsolicited(_)));
        // A response nobody asked for.
        assert!(matches!(t.handle_receive(Duration::ZERO, answer(&req)), Received::Stray { .. }));
        // One in the SA class is for the SA agent: an RMPP ACK of one of its
        // answers, a ReportResp to one of its Reports.
        let mut report_resp = gmp(MgmtClass::SubnAdm, 0);
        report_resp.mad[3] = u8::from(Method::ReportResp);
        assert_eq!(t.handle_receive(Duration::ZERO, report_resp.clone()), Received::Unsolicited(report_resp));
        // Garbage.
        let short = Datagram { addr: req.addr, mad: vec![1, 2, 3] };
        assert!(matches!(t.handle_receive(Duration::ZERO, short.clone()), Received::Malformed(_)));
        assert!(matches!(t.submit(1, short), Err(TxnError::Malformed(_))));
        let s = t.stats();
        assert_eq!(s.malformed, 1);
        assert_eq!(s.totals().unsolicited, 3);
        assert_eq!(s.totals().strays, 1);
        assert_eq!(s.by_mad[&MadKey { class: 0x03, attribute: 0x12, method: 0x06 }].unsolicited, 1);
    }

    #[test]
    fn response_of_another_class_does_not_complete() {
        let mut t = Transactions::new(TxnConfig::default());
        t.submit(1u32, get(AttributeId::NodeInfo, &[])).unwrap();
        let d = t.poll_transmit(Duration::ZERO).unwrap();
        let mut r = answer(&d);
        r.mad[1] = 0x04; // PerfMgt with the same TID
        assert!(matches!(t.handle_receive(MS, r.clone()), Received::Stray { .. }));
        r.mad[1] = 0x03; // SubnAdm: not ours, so the SA agent's
        assert!(matches!(t.handle_receive(MS, r), Received::Unsolicited(_)));
        assert_eq!(t.pending(), 1);
    }

    #[test]
    fn cancel_and_drain() {
        let mut t = Transactions::new(TxnConfig::default());
        t.submit(1u32, get(AttributeId::NodeInfo, &[])).unwrap();
        t.submit(2u32, get(AttributeId::NodeInfo, &[])).unwrap();
        let d = t.poll_transmit(Duration::ZERO).unwrap();
        assert_eq!(t.cancel_tid(tid_of(&d) as u32), Some(1));
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.drain(), vec![2]);
        assert_eq!(t.pending(), 0);
        assert!(t.poll_transmit(Duration::ZERO).is_none());
    }

    /// The completion times of the SMP tokens (those below `n`).
    fn smp_times(o: &Outcome, n: u32) -> Vec<(Duration, u32)> {
        o.done.iter().copied().filter(|&(_, tok)| tok < n).collect()
    }

    #[test]
    fn a_full_sa_window_does_not_hold_back_smps() {
        // 100 SMPs answered in 1 ms; 1000 SA queries queued ahead of them
        // that nobody answers, so the SA window stays full throughout.
        let sweep = |t: &mut Transactions<u32>| {
            for i in 0..100 {
                t.submit(i, if i % 2 == 0 { dr(i) } else { gmp(MgmtClass::SubnMgmtLid, i) }).unwrap();
            }
        };
        let mut alone = Transactions::new(cfg2(4, 8, 3));
        sweep(&mut alone);
        let alone = run_mixed(&mut alone, MS, |_, _| false);

        let loaded = || {
            let mut t = Transactions::new(cfg2(4, 8, 3));
            for i in 0..1000 {
                t.submit(1000 + i, gmp(MgmtClass::SubnAdm, i)).unwrap();
            }
            sweep(&mut t);
            t
        };
        let mut t = loaded();
        let first: Vec<_> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tag(&d).0).collect();
        assert_eq!(first.iter().filter(|&&c| c == MgmtClass::SubnAdm).count(), 8, "the SA window fills");
        assert_eq!(first.iter().filter(|&&c| c != MgmtClass::SubnAdm).count(), 4, "and so does the SMPs'");
        assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 4);
        assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtLid), 4, "LID-routed and DR SMPs share a window");
        assert_eq!(t.in_flight_in(MgmtClass::SubnAdm), 8);
        assert_eq!(t.in_flight_in(MgmtClass::Perf), 0);
        let mut t = loaded();
        let o = run_mixed(&mut t, MS, |d, _| tag(d).0 == MgmtClass::SubnAdm);

        assert_eq!(smp_times(&o, 100), smp_times(&alone, 100), "SMPs finish as if the SA backlog were not there");
        assert_eq!(smp_times(&o, 100).last().unwrap().0, 25 * MS, "100 SMPs, window 4, 1 ms each");
        assert_eq!(o.max_by_window[&0x01], 4);
        assert_eq!(o.max_by_window[&0x03], 8);
        let mut failed = o.failed.clone();
        failed.sort();
        assert_eq!(failed, (1000..2000).collect::<Vec<_>>(), "every SA query failed, none was lost");
        let s = t.stats();
        assert_eq!(s.by_mad[&MadKey { class: 0x03, attribute: 0x12, method: 1 }].sent, 4000);
        assert_eq!((s.in_flight, s.queued), (0, 0));
    }

    #[test]
    fn a_full_smp_window_does_not_hold_back_sa_or_perf() {
        // 1000 SMPs to a dead switch (never answered) queued ahead of 20 SA
        // queries and 20 PerfMgt Gets that are answered in 2 ms.
        let gmps = |t: &mut Transactions<u32>| {
            for i in 0..20 {
                t.submit(i, gmp(MgmtClass::SubnAdm, i)).unwrap();
                t.submit(100 + i, gmp(MgmtClass::Perf, i)).unwrap();
            }
        };
        let mut alone = Transactions::new(cfg2(4, 4, 1));
        gmps(&mut alone);
        let alone = run_mixed(&mut alone, 2 * MS, |_, _| false);

        let mut t = Transactions::new(cfg2(4, 4, 1));
        for i in 0..1000 {
            t.submit(1000 + i, dr(i)).unwrap();
        }
        gmps(&mut t);
        let o = run_mixed(&mut t, 2 * MS, |d, _| tag(d).0 == MgmtClass::SubnMgmtDirected);
        assert_eq!(smp_times(&o, 1000), smp_times(&alone, 1000), "GMPs finish as if the SMP backlog were not there");
        assert_eq!(smp_times(&o, 1000).last().unwrap().0, 10 * MS, "20 of each, window 4, 2 ms each");
        assert_eq!(o.failed.len(), 1000);
        assert_eq!((o.max_by_window[&0x01], o.max_by_window[&0x03], o.max_by_window[&0x04]), (4, 4, 4));
    }

    #[test]
    fn each_class_has_its_own_window() {
        use rand::{Rng, SeedableRng};
        // SMPs of both routings share window 3; SA, PerfMgt and DevMgt
        // (0x06, a class ibsm has no agent for) each have window 2.
        let classes = [MgmtClass::SubnMgmtDirected, MgmtClass::SubnMgmtLid, MgmtClass::SubnAdm, MgmtClass::Perf];
        let classes = classes.into_iter().chain([MgmtClass::from(0x06)]);
        let mut t = Transactions::new(cfg2(3, 2, 8));
        let mut next = 0u32;
        for c in classes.clone() {
            for _ in 0..30 {
                let d = if c == MgmtClass::SubnMgmtDirected { dr(next) } else { gmp(c, next) };
                t.submit(next, d).unwrap();
                next += 1;
            }
        }
        assert_eq!(t.config().window_for(MgmtClass::SubnMgmtDirected), 3);
        assert_eq!(t.config().window_for(MgmtClass::SubnMgmtLid), 3);
        assert_eq!(t.config().window_for(MgmtClass::SubnAdm), 2);
        assert_eq!(t.config().window_for(MgmtClass::from(0x06)), 2);
        // No loss: each class completes in submission order.
        let o = run_mixed(&mut t, 3 * MS, |_, _| false);
        assert!(o.failed.is_empty());
        for (k, c) in classes.clone().enumerate() {
            let k = k as u32;
            let got: Vec<u32> = o.done.iter().map(|&(_, tok)| tok).filter(|tok| tok / 30 == k).collect();
            assert_eq!(got, (30 * k..30 * k + 30).collect::<Vec<_>>(), "{c:?} in FIFO order");
        }
        let windows: Vec<(u8, usize)> = o.max_by_window.into_iter().collect();
        assert_eq!(windows, vec![(0x01, 3), (0x03, 2), (0x04, 2), (0x06, 2)], "every window filled, none exceeded");
        assert_eq!(o.max_in_flight, 3 + 2 + 2 + 2);

        // With a third of all sends lost, still no window is exceeded
        // (run_mixed checks every step) and everything arrives.
        let mut t = Transactions::new(cfg2(3, 2, 8));
        for (k, c) in classes.enumerate() {
            for i in 0..30 {
                t.submit(k as u32 * 30 + i, gmp(c, i)).unwrap();
            }
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let o = run_mixed(&mut t, 3 * MS, |_, _| rng.gen_ratio(1, 3));
        assert!(o.failed.is_empty());
        assert_eq!(o.done.len(), 150);
        assert!(t.stats().totals().retries >= 30, "the seed drops a fair share");
    }

    #[test]
    fn retries_go_first_within_their_class() {
        let mut t = Transactions::new(cfg2(1, 1, 1));
        t.submit(0u32, gmp(MgmtClass::SubnAdm, 0)).unwrap();
        t.submit(1u32, gmp(MgmtClass::SubnAdm, 1)).unwrap();
        t.submit(2u32, dr(2)).unwrap();
        t.submit(3u32, dr(3)).unwrap();
        let sent: Vec<_> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tag(&d)).collect();
        assert_eq!(sent, vec![(MgmtClass::SubnMgmtDirected, 2), (MgmtClass::SubnAdm, 0)], "SMPs first, one per window");
        assert!(t.handle_timeout(100 * MS).is_empty());
        let retried: Vec<_> = std::iter::from_fn(|| t.poll_transmit(100 * MS)).collect();
        assert_eq!(retried.iter().map(tag).collect::<Vec<_>>(), sent, "each retry before its class's next request");
        for d in &retried {
            assert!(matches!(t.handle_receive(101 * MS, answer(d)), Received::Response { .. }));
        }
        let rest: Vec<_> = std::iter::from_fn(|| t.poll_transmit(101 * MS)).map(|d| tag(&d)).collect();
        assert_eq!(rest, vec![(MgmtClass::SubnMgmtDirected, 3), (MgmtClass::SubnAdm, 1)]);
        let c = t.stats().totals();
        assert_eq!((c.sent, c.retries, c.timeouts, c.responses), (6, 2, 2, 2));
    }

    #[test]
    fn an_answer_or_a_cancel_frees_only_its_own_window() {
        let mut t = Transactions::new(cfg2(1, 1, 3));
        t.submit(0u32, dr(0)).unwrap();
        t.submit(1u32, dr(1)).unwrap();
        t.submit(2u32, gmp(MgmtClass::SubnAdm, 2)).unwrap();
        t.submit(3u32, gmp(MgmtClass::SubnAdm, 3)).unwrap();
        t.submit(4u32, gmp(MgmtClass::Perf, 4)).unwrap();
        let smp = t.poll_transmit(Duration::ZERO).unwrap();
        let sa = t.poll_transmit(Duration::ZERO).unwrap();
        let perf = t.poll_transmit(Duration::ZERO).unwrap();
        assert!(t.poll_transmit(Duration::ZERO).is_none(), "every window is full");
        assert_eq!([tag(&smp).1, tag(&sa).1, tag(&perf).1], [0, 2, 4]);

        // The SA answer lets the next SA query out, not the waiting SMP.
        assert!(matches!(t.handle_receive(MS, answer(&sa)), Received::Response { token: 2, .. }));
        let next = t.poll_transmit(MS).unwrap();
        assert_eq!(tag(&next), (MgmtClass::SubnAdm, 3));
        assert!(t.poll_transmit(MS).is_none());

        // Cancelling the PerfMgt Get frees the PerfMgt window only.
        assert_eq!(t.cancel_tid(tid_of(&perf) as u32), Some(4));
        assert_eq!(t.in_flight_in(MgmtClass::Perf), 0);
        assert!(t.poll_transmit(MS).is_none(), "no PerfMgt left, and the SMP window is still full");
        assert_eq!(
            (t.in_flight_in(MgmtClass::SubnMgmtLid), t.in_flight_in(MgmtClass::SubnAdm), t.in_flight()),
            (1, 1, 2)
        );

        // The SMP times out; its answer arrives while the retry still
        // waits in the queue: the window holds nothing of it, and the next
        // SMP goes out.
        assert!(t.handle_timeout(100 * MS).is_empty());
        assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 0);
        assert!(matches!(t.handle_receive(100 * MS, answer(&smp)), Received::Response { token: 0, .. }));
        let second = t.poll_transmit(100 * MS).unwrap();
        assert_eq!(tag(&second), (MgmtClass::SubnMgmtDirected, 1), "the completed retry's queue entry is skipped");
        assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 1);
        assert_eq!(t.drain().len(), 2);
        assert_eq!((t.in_flight(), t.in_flight_in(MgmtClass::SubnAdm)), (0, 0));
    }

    #[test]
    fn zero_windows_are_taken_as_one() {
        let t: Transactions<u32> = Transactions::new(cfg2(0, 0, 0));
        assert_eq!((t.config().window, t.config().gmp_window), (1, 1));
        assert_eq!(TxnConfig::default().window_for(MgmtClass::SubnMgmtDirected), 4, "OpenSM's max_wire_smps");
    }

    // RMPP answers (SubnAdmGetTable).

    const SA_RMPP: RmppConfig = RmppConfig {
        window: 4,
        segment_timeout: Duration::from_millis(20),
        retries: 5,
        total_timeout: Duration::from_secs(2),
        max_bytes: 1 << 20,
    };

    /// Where the SA's segments come from: its LID on QP1, with the GSI's
    /// Q_Key as the devices report it.
    const FROM_SA: MadAddress = MadAddress { lid: Lid(1), qpn: 1, qkey: MadAddress::QP1_QKEY, sl: 0, pkey_index: 0 };

    /// A SubnAdmGetTable told apart by its attribute modifier.
    fn get_table(tag: u32) -> Datagram {
        let mut d = gmp(MgmtClass::SubnAdm, tag);
        d.mad[3] = u8::from(Method::GetTable);
        d
    }

    /// The records the fake SA answers request `tag` with.
    fn table(tag: u32) -> Vec<u8> {
        (0..(tag as usize * 317) % 3000).map(|i| (i as u32 ^ tag) as u8).collect()
    }

    /// The SA's side of an answer to `req`: a GetTableResp with the TID's
    /// high bits scribbled over, as the kernel does.
    fn sa_sender(now: Duration, req: &Datagram) -> RmppSender {
        let mut template = req.mad[..56].to_vec();
        template[3] = u8::from(Method::GetTableResp);
        template[8..12].copy_from_slice(&[0xab, 0xcd, 0x00, 0x01]);
        let tag = header_of(&req.mad).unwrap().attribute_modifier();
        RmppSender::new(now, &template, table(tag), SA_RMPP).unwrap()
    }

    fn seg(mad: Vec<u8>) -> Datagram {
        Datagram { addr: FROM_SA, mad }
    }

    #[test]
    fn an_rmpp_answer_completes_only_when_reassembled() {
        let mut t = Transactions::new(cfg2(4, 4, 3));
        t.submit_with(7u32, get_table(5), RequestKind::Rmpp(SA_RMPP)).unwrap();
        let req = t.poll_transmit(Duration::ZERO).unwrap();
        let mut sa = sa_sender(MS, &req);
        assert_eq!(sa.segments(), 8, "1585 bytes of records");
        let mut now = MS;
        let mut acks = Vec::new();
        let whole = loop {
            now += MS;
            let segs: Vec<Vec<u8>> = std::iter::from_fn(|| sa.poll_transmit(now)).collect();
            assert!(!segs.is_empty(), "the SA stalled");
            let mut done = None;
            for m in segs {
                match t.handle_receive(now, seg(m)) {
                    Received::Segment { tid } => assert_eq!(tid as u32, tid_of(&req) as u32),
                    Received::Response { token: 7, dgram } => done = Some(dgram),
                    other => panic!("{other:?}"),
                }
            }
            if done.is_none() {
                assert_eq!((t.in_flight(), t.receiving()), (0, 1), "the request's window slot is free");
                assert_eq!(t.in_flight_in(MgmtClass::SubnAdm), 0);
            }
            while let Some(ack) = t.poll_transmit(now) {
                assert_eq!(ack.addr, FROM_SA, "back to the SA, where the segments came from");
                assert_eq!((ack.mad[3], &ack.mad[8..16]), (0x12, &[0xab, 0xcd, 0, 1, 0, 0, 0, 1][..]));
                sa.handle_mad(now, &ack.mad).unwrap();
                acks.push(ack);
            }
            if let Some(d) = done {
                break d;
            }
        };
        assert_eq!(sa.state(), &TransferState::Done);
        assert_eq!(whole.addr, FROM_SA);
        assert_eq!(whole.mad.len(), 56 + 1585);
        assert_eq!(&whole.mad[56..], &table(5)[..]);
        assert_eq!(whole.mad[3], 0x92);
        assert_eq!(acks.len(), 3, "segment 1, the end of window 1+4, and the last");
        assert_eq!((t.pending(), t.receiving(), t.poll_timeout()), (0, 0, None));
        let c = t.stats().by_mad[&MadKey { class: 0x03, attribute: 0x12, method: 0x12 }];
        assert_eq!((c.sent, c.acks, c.segments, c.responses, c.retries), (1 + 3, 3, 8, 1, 0));

        // The SA missed the final ACK and repeats the last segment: the
        // lingering receiver answers it again.
        let last = acks.last().unwrap().clone();
        let mut again = sa_sender(MS, &req);
        let mut segs: Vec<Vec<u8>> = vec![again.poll_transmit(MS).unwrap()];
        again.handle_mad(MS, &from_ack(1, 9, &last)).unwrap();
        segs.extend(std::iter::from_fn(|| again.poll_transmit(MS)));
        assert!(matches!(t.handle_receive(now, seg(segs.pop().unwrap())), Received::Segment { .. }));
        assert_eq!(t.poll_transmit(now).map(|d| d.mad), Some(last.mad));
        // Past the linger time it is the SA agent's business.
        let later = now + RMPP_LINGER;
        assert!(matches!(t.handle_receive(later, seg(segs.pop().unwrap())), Received::Unsolicited(_)));
    }

    /// An ACK like `model` with another segment and window.
    fn from_ack(segment: u32, window: u32, model: &Datagram) -> Vec<u8> {
        let mut m = model.mad.clone();
        crate::mad::rmpp::RmppHeaderRepr::ack(segment, window).emit_bytes(&mut m).unwrap();
        m
    }

    #[test]
    fn until_the_first_segment_the_request_retries_and_then_it_does_not() {
        let mut t = Transactions::new(cfg2(4, 4, 3));
        t.submit_with(1u32, get_table(40), RequestKind::Rmpp(SA_RMPP)).unwrap();
        let first = t.poll_transmit(Duration::ZERO).unwrap();
        assert!(t.handle_timeout(100 * MS).is_empty());
        let retry = t.poll_transmit(100 * MS).unwrap();
        assert_ne!(tid_of(&first), tid_of(&retry));
        // The answer to the first attempt arrives late: it is taken.
        let mut sa = sa_sender(101 * MS, &first);
        let one = sa.poll_transmit(101 * MS).unwrap();
        assert!(matches!(t.handle_receive(101 * MS, seg(one)), Received::Segment { .. }));
        assert_eq!(t.stats().totals().late, 1);
        assert_eq!(t.poll_timeout(), Some(101 * MS + SA_RMPP.total_timeout), "the request's timer is gone");
        assert!(t.handle_timeout(250 * MS).is_empty());
        let out: Vec<Datagram> = std::iter::from_fn(|| t.poll_transmit(250 * MS)).collect();
        assert_eq!(out.len(), 1, "the ACK, no further retry");
        assert_eq!(out[0].mad[3], 0x12);
        assert!(crate::rmpp::is_rmpp_active(&out[0].mad));
        // The second attempt's answer is another transfer: refused.
        let mut other = sa_sender(251 * MS, &retry);
        assert!(matches!(
            t.handle_receive(251 * MS, seg(other.poll_transmit(251 * MS).unwrap())),
            Received::Segment { .. }
        ));
        assert!(t.poll_transmit(251 * MS).is_none(), "nothing acknowledged for it");
        // The rest of the first one completes it.
        sa.handle_mad(252 * MS, &out[0].mad).unwrap();
        let mut done = None;
        let mut now = 252 * MS;
        while done.is_none() {
            now += MS;
            for m in std::iter::from_fn(|| sa.poll_transmit(now)).collect::<Vec<_>>() {
                if let Received::Response { dgram, .. } = t.handle_receive(now, seg(m)) {
                    done = Some(dgram);
                }
            }
            while let Some(a) = t.poll_transmit(now) {
                sa.handle_mad(now, &a.mad).unwrap();
            }
        }
        assert_eq!(&done.unwrap().mad[56..], &table(40)[..]);
    }

    #[test]
    fn a_failed_transfer_fails_its_transaction() {
        // The SA aborts.
        let mut t = Transactions::new(cfg2(4, 4, 3));
        t.submit_with(3u32, get_table(9), RequestKind::Rmpp(SA_RMPP)).unwrap();
        let req = t.poll_transmit(Duration::ZERO).unwrap();
        let mut sa = sa_sender(MS, &req);
        t.handle_receive(MS, seg(sa.poll_transmit(MS).unwrap()));
        t.poll_transmit(MS).unwrap();
        for _ in 0..=SA_RMPP.retries {
            let now = sa.poll_timeout().unwrap();
            sa.handle_timeout(now);
        }
        let abort = sa.poll_transmit(Duration::from_secs(1)).unwrap();
        match t.handle_receive(Duration::from_secs(1), seg(abort)) {
            Received::Failed { token: 3, error: TxnError::Rmpp { mad, error } } => {
                assert_eq!(error, RmppError::Aborted { status: crate::mad::rmpp::RmppStatus::TooManyRetries });
                assert_eq!(mad.method, Method::GetTable);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!((t.pending(), t.receiving()), (0, 0));
        assert_eq!(t.stats().totals().failed, 1);

        // The SA goes silent: the receiver's total limit, with an ABORT.
        let mut t = Transactions::new(cfg2(4, 4, 3));
        t.submit_with(4u32, get_table(9), RequestKind::Rmpp(SA_RMPP)).unwrap();
        let req = t.poll_transmit(Duration::ZERO).unwrap();
        let mut sa = sa_sender(MS, &req);
        t.handle_receive(MS, seg(sa.poll_transmit(MS).unwrap()));
        t.poll_transmit(MS).unwrap();
        let limit = MS + SA_RMPP.total_timeout;
        assert_eq!(t.poll_timeout(), Some(limit));
        assert!(t.handle_timeout(limit - MS).is_empty());
        let failed = t.handle_timeout(limit);
        assert!(
            matches!(&failed[..], [(4, TxnError::Rmpp { error: RmppError::TotalTimeout { .. }, .. })]),
            "{failed:?}"
        );
        let abort = t.poll_transmit(limit).unwrap();
        assert_eq!(abort.mad[25], 4, "an ABORT");
        assert_eq!(
            sa.handle_mad(limit, &abort.mad),
            Err(RmppError::Aborted { status: crate::mad::rmpp::RmppStatus::TotalTimeTooLong })
        );
    }

    #[test]
    fn plain_answers_complete_as_before() {
        // An RMPP request answered without RMPP (an error status, say).
        let mut t = Transactions::new(cfg2(4, 4, 3));
        t.submit_with(1u32, get_table(1), RequestKind::Rmpp(SA_RMPP)).unwrap();
        let req = t.poll_transmit(Duration::ZERO).unwrap();
        let mut refusal = answer(&req);
        refusal.mad[4] = 0x03;
        assert!(matches!(t.handle_receive(MS, refusal), Received::Response { token: 1, .. }));
        // A plain request answered with RMPP: the first segment is the answer.
        t.submit(2u32, get_table(2)).unwrap();
        let req = t.poll_transmit(MS).unwrap();
        let mut sa = sa_sender(MS, &req);
        match t.handle_receive(2 * MS, seg(sa.poll_transmit(MS).unwrap())) {
            Received::Response { token: 2, dgram } => assert_eq!(dgram.mad.len(), 256),
            other => panic!("{other:?}"),
        }
        assert!(t.poll_transmit(2 * MS).is_none(), "no ACK");
        assert_eq!(t.stats().totals().segments, 0);
    }

    #[test]
    fn rmpp_answers_over_a_lossy_link() {
        use rand::{Rng, SeedableRng};
        for seed in 0..6u64 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut t = Transactions::new(cfg2(4, 3, 6));
            for tag in 1..=12 {
                t.submit_with(tag, get_table(tag), RequestKind::Rmpp(SA_RMPP)).unwrap();
            }
            let mut senders: HashMap<u32, RmppSender> = HashMap::new();
            type Wire = Vec<(Duration, Datagram)>;
            let (mut to_sa, mut to_t): (Wire, Wire) = (vec![], vec![]);
            let (mut done, mut failed) = (BTreeMap::new(), Vec::new());
            let mut now = Duration::ZERO;
            for step in 0.. {
                assert!(step < 100_000, "seed {seed}: livelock");
                while let Some(d) = t.poll_transmit(now) {
                    assert!(t.in_flight_in(MgmtClass::SubnAdm) <= 3, "seed {seed}: window");
                    if !rng.gen_bool(0.1) {
                        to_sa.push((now + MS, d));
                    }
                }
                for s in senders.values_mut() {
                    while let Some(m) = s.poll_transmit(now) {
                        if !rng.gen_bool(0.1) {
                            to_t.push((now + MS + rng.gen_range(Duration::ZERO..2 * MS), seg(m)));
                        }
                    }
                }
                if t.pending() == 0 {
                    break;
                }
                let next = to_sa
                    .iter()
                    .chain(&to_t)
                    .map(|w| w.0)
                    .chain(t.poll_timeout())
                    .chain(senders.values().filter_map(|s| s.poll_timeout()))
                    .min()
                    .expect("something pending");
                now = now.max(next);
                let (due, rest): (Vec<_>, Vec<_>) = to_sa.drain(..).partition(|w| w.0 <= now);
                to_sa = rest;
                for (_, d) in due {
                    let tid = tid_of(&d) as u32;
                    if crate::rmpp::is_rmpp_active(&d.mad) {
                        if let Some(s) = senders.get_mut(&tid) {
                            let _ = s.handle_mad(now, &d.mad);
                        }
                    } else {
                        senders.entry(tid).or_insert_with(|| sa_sender(now, &d));
                    }
                }
                let (due, rest): (Vec<_>, Vec<_>) = to_t.drain(..).partition(|w| w.0 <= now);
                to_t = rest;
                for (_, d) in due {
                    match t.handle_receive(now, d) {
                        Received::Response { token, dgram } => assert!(done.insert(token, dgram).is_none()),
                        Received::Failed { token, error } => failed.push((token, error)),
                        Received::Segment { .. } | Received::Unsolicited(_) | Received::Stray { .. } => {}
                        Received::Malformed(e) => panic!("{e}"),
                    }
                }
                failed.extend(t.handle_timeout(now));
                for s in senders.values_mut() {
                    s.handle_timeout(now);
                }
            }
            for (token, error) in &failed {
                assert!(
                    matches!(
                        error,
                        TxnError::Rmpp { error: RmppError::Aborted { .. } | RmppError::TotalTimeout { .. }, .. }
                            | TxnError::Timeout { .. }
                    ),
                    "seed {seed}: {token} failed with {error}"
                );
            }
            assert_eq!(done.len() + failed.len(), 12, "seed {seed}: every request ended once");
            assert!(done.len() >= 10, "seed {seed}: 10% loss each way, most complete: {failed:?}");
            for (tag, d) in &done {
                assert_eq!(&d.mad[56..], &table(*tag)[..], "seed {seed}: table {tag}");
            }
            let resent: u64 = senders.values().map(|s| s.stats().resent).sum();
            assert!(resent > 0, "seed {seed}: segments were lost and sent again");
            let s = t.stats();
            assert!(s.totals().acks > 0 && s.totals().segments > 0);
            assert_eq!((s.in_flight, s.receiving, s.queued), (0, 0, 0));
        }
    }
}
