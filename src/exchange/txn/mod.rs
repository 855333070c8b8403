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
use std::time::Duration;

use crate::datagram::{Datagram, MadAddress, MadSummary};
use crate::mad::{MadHeader, MgmtClass, WireError, MAD_HEADER_LEN};
use crate::rmpp::{is_rmpp_active, RmppConfig, RmppError, RmppReceiver, TransferState};

pub use super::counters::{MadCounters, MadKey, TxnStats};

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
    /// Traps taken per second from one source LID by the transport that
    /// runs these transactions ([`super::trap_gate`]); 0: no limit.
    pub trap_rate_limit: u32,
    /// An SMP unanswered this long is presumed lost: it no longer holds a
    /// slot of `window` (its timeout still runs, and a late answer still
    /// completes it), so a lossy fabric does not leave the window full of
    /// packets that are gone, as OpenSM's `max_smps_timeout`. Zero: off.
    pub smp_lost_after: Duration,
    /// SMPs out at once counting those presumed lost (OpenSM's
    /// `max_wire_smps2`); at least `window`.
    pub smp_window_with_lost: usize,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            window: 4,
            gmp_window: 16,
            timeout: Duration::from_millis(200),
            retries: 3,
            trap_rate_limit: 0,
            smp_lost_after: Duration::ZERO,
            smp_window_with_lost: 4,
        }
    }
}

impl TxnConfig {
    /// What the SM's configuration asks of its transport.
    pub fn of(t: &crate::config::TransportConfig) -> TxnConfig {
        TxnConfig {
            window: t.window,
            gmp_window: t.gmp_window,
            timeout: t.timeout(),
            retries: t.retries,
            trap_rate_limit: t.trap_rate_limit,
            smp_lost_after: Duration::from_millis(t.smp_lost_after_ms),
            smp_window_with_lost: t.smp_window_with_lost,
        }
    }

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
        /// Out longer than `smp_lost_after`: counted among its window's
        /// `lost`, not its `in_flight`.
        presumed_lost: bool,
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
    /// Out longer than `smp_lost_after`: presumed lost, not counted in
    /// `in_flight`.
    lost: usize,
    /// `in_flight` plus `lost` at most.
    cap: usize,
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
    /// When in-flight SMPs are presumed lost (`smp_lost_after`).
    stale: BTreeSet<(Duration, u64)>,
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
            stale: BTreeSet::new(),
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
        let size = cfg.window_for(class.into());
        let lossy = is_smp_class(class) && cfg.smp_lost_after > Duration::ZERO;
        self.windows.entry(window_of(class)).or_insert_with(|| Window {
            size,
            in_flight: 0,
            lost: 0,
            cap: if lossy { cfg.smp_window_with_lost.max(size) } else { size },
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
        let id = self.windows.values_mut().filter(|w| w.in_flight < w.size && w.in_flight + w.lost < w.cap).find_map(
            |w| {
                while let Some(id) = w.queue.pop_front() {
                    if matches!(txns.get(&id), Some(t) if t.state == State::Queued) {
                        w.in_flight += 1;
                        return Some(id);
                    }
                }
                None
            },
        )?;
        let tid = self.alloc_tid();
        let txn = self.txns.get_mut(&id).expect("checked when popped");
        let mut h = MadHeader::new_checked(&mut txn.dgram.mad[..MAD_HEADER_LEN]).expect("checked at submit");
        h.set_transaction_id(u64::from(tid));
        txn.attempts += 1;
        txn.tids.push(tid);
        let deadline = now + self.cfg.timeout;
        txn.state = State::InFlight { sent_at: now, deadline, presumed_lost: false };
        self.by_tid.insert(tid, id);
        self.deadlines.insert((deadline, id));
        if is_smp_class(txn.key.class) && self.cfg.smp_lost_after > Duration::ZERO {
            self.stale.insert((now + self.cfg.smp_lost_after, id));
        }
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
        let (state, class) = {
            let txn = &self.txns[&id];
            (txn.state, txn.key.class)
        };
        if let State::InFlight { sent_at, deadline, presumed_lost } = state {
            self.deadlines.remove(&(deadline, id));
            self.free_slot(id, class, sent_at, presumed_lost);
            let rtt = now.saturating_sub(sent_at);
            self.stats.rtt_total += rtt;
            self.stats.rtt_max = self.stats.rtt_max.max(rtt);
        }
        let txn = self.txns.get_mut(&id).expect("a live transaction");
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
        // SMPs out so long they are presumed lost give up their slot.
        while let Some(&(at, id)) = self.stale.first() {
            if at > now {
                break;
            }
            self.stale.pop_first();
            if let Some(txn) = self.txns.get_mut(&id) {
                if let State::InFlight { presumed_lost, .. } = &mut txn.state {
                    *presumed_lost = true;
                    let w = self.windows.get_mut(&window_of(txn.key.class)).expect("an in-flight class has a window");
                    w.in_flight -= 1;
                    w.lost += 1;
                }
            }
        }
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
            let (state, class) = {
                let txn = &self.txns[&id];
                (txn.state, txn.key.class)
            };
            if let State::InFlight { sent_at, presumed_lost, .. } = state {
                self.free_slot(id, class, sent_at, presumed_lost);
            }
            let txn = self.txns.get_mut(&id).expect("a deadline belongs to a live transaction");
            txn.state = State::Queued;
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
        let c = self.stale.first().map(|&(d, _)| d);
        a.into_iter().chain(b).chain(c).min()
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
        self.stale.clear();
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
            State::InFlight { deadline, sent_at, presumed_lost } => {
                self.deadlines.remove(&(deadline, id));
                self.free_slot(id, txn.key.class, sent_at, presumed_lost);
            }
            State::Receiving { deadline } => {
                self.rmpp_deadlines.remove(&(deadline, id));
            }
            State::Queued => {}
        }
        txn
    }

    /// Transaction `id`, sent at `sent_at`, is no longer in flight: its
    /// window slot (or its place among those presumed lost) is free.
    fn free_slot(&mut self, id: u64, class: u8, sent_at: Duration, presumed_lost: bool) {
        if self.cfg.smp_lost_after > Duration::ZERO {
            self.stale.remove(&(sent_at + self.cfg.smp_lost_after, id));
        }
        let w = self.windows.get_mut(&window_of(class)).expect("an in-flight class has a window");
        if presumed_lost {
            w.lost -= 1;
        } else {
            w.in_flight -= 1;
        }
    }

    /// Transactions on the wire.
    pub fn in_flight(&self) -> usize {
        self.deadlines.len()
    }

    /// Transactions on the wire in `class`'s window (for an SMP class, both
    /// SMP classes together).
    pub fn in_flight_in(&self, class: MgmtClass) -> usize {
        self.windows.get(&window_of(class.into())).map_or(0, |w| w.in_flight + w.lost)
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
mod tests;
