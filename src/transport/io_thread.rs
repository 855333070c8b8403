//! The I/O thread: one std thread owns a [`MadDevice`] and the
//! [`Transactions`] core; tokio tasks talk to it over a bounded channel.
//!
//! ```text
//!  request() ─permit─► SyncSender<Input> ──► I/O thread ──► device.send
//!      ▲                 ▲                      │  Transactions (TIDs, a window per class, retries)
//!      │                 └── receiver thread ◄──┼── device.recv (umad), or the I/O thread polls it
//!      └──────── oneshot reply ◄────────────────┤         │
//!  unsolicited: tokio mpsc (bounded) ◄──────────┤         │ a diverted class's requests
//!  a diverted class (the SA's): its own mpsc ◄──┴─────────┘ (the rest: the I/O thread)
//! ```
//!
//! A thread rather than a task because libibumad blocks and ibsim's
//! simulated descriptors (umad2sim) are not real file descriptors, so epoll
//! cannot watch them. Every queue is bounded: a semaphore caps the commands
//! outstanding at the channel's capacity, so the non-blocking channel send
//! never finds it full; the unsolicited channel drops (and counts) when full
//! because the thread must never block on a slow consumer.
//!
//! Loop policy, with a device that gives a receiver
//! ([`MadDevice::receiver`], libibumad): a second thread waits on the
//! device and hands each MAD over the command channel, as OpenSM's umad
//! receiver thread does (a diverted class's requests go to its agent's
//! channel, or to its [`InlineServer`], which answers them on this thread
//! and writes the answers through the device's sender), so the I/O
//! thread sleeps on that one channel until a command or a MAD arrives or
//! the next transaction deadline passes. Nothing polls: a query is taken,
//! and an answer sent, as soon as it is there. Such a device also gives a sender ([`MadDevice::sender`]):
//! [`Transport::send`] (answers, which no transaction tracks) then writes
//! from the caller's thread, counted beside the thread's own sends, and
//! the I/O thread is not woken for it.
//!
//! Without one (the in-process fabric, whose `recv` moves virtual time):
//! with nothing in flight the thread blocks on the command channel for
//! [`IDLE_WAIT`] of real time, then polls the device with a deadline of
//! `device.now()` so unsolicited MADs still arrive. While MADs keep
//! arriving that wait shrinks to [`ACTIVE_IDLE_WAIT`], and it grows back
//! [`ACTIVE_SPAN`] after the last one. With requests in flight it waits in
//! `device.recv` until the next transaction deadline or [`BUSY_POLL`] from
//! now, whichever is first, and then drains the command channel. A
//! virtual-time device advances its clock inside `recv`, so the same loop
//! drives the in-process fabric.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::txn::{Received, RequestKind, Transactions, TxnConfig, TxnError};
use super::{
    Arrived, Datagram, DeviceError, InlineServer, LocalPort, MadDevice, MadKey, MadSummary, Transport, TransportError,
    TransportStats,
};
use crate::exchange::trap_gate::TrapGate;
use crate::mad::{MadHeader, MgmtClass, MAD_HEADER_LEN};

/// Commands (requests waiting for a response included) that may be
/// outstanding at once; also the command channel's capacity.
pub const MAX_OUTSTANDING: usize = 1024;
/// Capacity of the unsolicited-MAD channel.
pub const UNSOLICITED_CAPACITY: usize = 256;
/// Slots of that channel only SMPs may take: a flood of SA queries cannot
/// crowd out the SMInfo polls and traps the election depends on.
pub const SMP_RESERVE: usize = 64;
/// Real time the idle thread waits for a command before polling the device.
pub const IDLE_WAIT: Duration = Duration::from_millis(2);
/// The idle wait while MADs arrive (see the module doc).
pub const ACTIVE_IDLE_WAIT: Duration = Duration::from_micros(50);
/// How long after the last MAD received the thread stays quick to look.
pub const ACTIVE_SPAN: Duration = Duration::from_millis(100);
/// The idle wait once nothing has been received for [`QUIET_AFTER`]: an
/// SM at rest wakes 50 times a second, not 500 (an unsolicited MAD then
/// waits up to this long to be seen; the first one ends the quiet).
pub const QUIET_WAIT: Duration = Duration::from_millis(20);
/// Silence (nothing received, nothing sent) after which the idle wait
/// grows to [`QUIET_WAIT`].
pub const QUIET_AFTER: Duration = Duration::from_secs(1);
/// The longest device wait while requests are in flight, so new commands
/// are picked up promptly.
pub const BUSY_POLL: Duration = Duration::from_millis(1);
/// MADs taken from the device per loop turn after the first, before the
/// thread looks at its commands again (or inputs, with a receiver thread,
/// before it turns over).
const RECV_BURST: usize = 64;
/// MADs the receiver thread may queue for the I/O thread.
const RECEIVED_QUEUE: usize = 256;
/// The receiver thread's longest wait on the device: how soon it sees the
/// I/O thread stop.
const RECEIVER_SLICE: Duration = Duration::from_millis(20);
/// The receiver thread's pause while its queue is full.
const RECEIVER_HOLD_OFF: Duration = Duration::from_micros(200);
/// MADs the receiver thread reads without waiting, one after another, while
/// an inline server has requests to answer, before it answers some.
const RECEIVER_DRAIN: usize = 256;
/// Requests an inline server answers between two reads of the device: a
/// few microseconds each, so an SMP response read next waits little.
const INLINE_BURST: usize = 8;
/// With a receiver thread and nothing in flight, the I/O thread's wait for
/// an input; any input ends it at once.
const WOKEN_IDLE_WAIT: Duration = Duration::from_secs(1);

type Reply = oneshot::Sender<Result<Datagram, TransportError>>;

/// What wakes the I/O thread: a command from a task, a MAD the receiver
/// thread read, or the last handle going.
enum Input {
    Command(Command),
    Received(Datagram),
    ReceiveFailed(DeviceError),
    Stop,
}

enum Command {
    Request { dgram: Datagram, kind: RequestKind, reply: Reply, _permit: OwnedSemaphorePermit },
    Send { dgram: Datagram, _permit: OwnedSemaphorePermit },
}

/// Classes whose unsolicited MADs go to their own agent's channel
/// ([`Transport::divert`]), shared by the I/O thread and the receiver
/// thread: the receiver hands a diverted class's requests over itself
/// (a request is never the answer to one of ours), and counts them.
#[derive(Default)]
struct Diversions {
    by_class: std::sync::RwLock<Vec<(u8, tokio::sync::mpsc::Sender<Arrived>)>>,
    /// Requests the receiver thread handed over, by kind.
    taken: Mutex<HashMap<MadKey, u64>>,
    /// MADs a full agent queue refused.
    dropped: std::sync::atomic::AtomicU64,
    /// A class's inline server ([`Transport::serve_inline`]), until the
    /// receiver thread takes it to run; `inline_offered` says one waits.
    inline: Mutex<Option<(u8, Box<dyn InlineServer>)>>,
    inline_offered: AtomicBool,
}

/// What became of a MAD offered to its class's agent.
enum Offered {
    Taken,
    /// The agent's queue was full: dropped and counted.
    Dropped,
    /// Its class is not diverted (or its agent is gone, which ends the
    /// diversion): it goes the ordinary way.
    Declined(Datagram),
}

impl Diversions {
    fn add(&self, class: u8, sink: tokio::sync::mpsc::Sender<Arrived>) {
        let mut t = self.by_class.write().unwrap_or_else(|p| p.into_inner());
        t.retain(|(c, _)| *c != class);
        t.push((class, sink));
    }

    fn offer(&self, d: Datagram) -> Offered {
        let Some(&class) = d.mad.get(1) else { return Offered::Declined(d) };
        let sent = {
            let t = self.by_class.read().unwrap_or_else(|p| p.into_inner());
            match t.iter().find(|(c, _)| *c == class) {
                Some((_, sink)) => sink.try_send(Arrived { at: std::time::Instant::now(), dgram: d }),
                None => return Offered::Declined(d),
            }
        };
        match sent {
            Ok(()) => Offered::Taken,
            Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Offered::Dropped
            }
            Err(tokio::sync::mpsc::error::TrySendError::Closed(a)) => {
                self.by_class.write().unwrap_or_else(|p| p.into_inner()).retain(|(c, _)| *c != class);
                Offered::Declined(a.dgram)
            }
        }
    }

    /// The receiver thread's part: a well-formed request of a diverted
    /// class goes to its inline server, if it takes it, or to its agent
    /// from here, counted as the transaction layer counts an unsolicited
    /// MAD; anything else is given back.
    fn take_request(&self, d: Datagram, inline: Option<&mut (u8, Box<dyn InlineServer>)>) -> Option<Datagram> {
        let Ok(h) = MadHeader::new_checked(&d.mad[..d.mad.len().min(MAD_HEADER_LEN)]) else { return Some(d) };
        if h.method().is_response() {
            return Some(d);
        }
        let key = MadKey::of(&h);
        let d = match inline {
            Some((class, server)) if *class == u8::from(h.mgmt_class()) => server.take(d),
            _ => Some(d),
        };
        if let Some(d) = d {
            if let Offered::Declined(d) = self.offer(d) {
                return Some(d);
            }
        }
        *self.taken.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_default() += 1;
        None
    }

    /// The inline server waiting for the receiver thread, if any.
    fn take_inline(&self) -> Option<(u8, Box<dyn InlineServer>)> {
        // A load first: this runs once per MAD read, and a swap would
        // write the shared flag each time.
        if !self.inline_offered.load(Ordering::Relaxed) || !self.inline_offered.swap(false, Ordering::SeqCst) {
            return None;
        }
        self.inline.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

struct Shared {
    cmd: Option<SyncSender<Input>>,
    thread: Option<JoinHandle<()>>,
    local_port: LocalPort,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Stop is the thread's signal to stop (the receiver thread holds a
        // sender too, so the channel does not close); it waits at most for
        // the room the commands' permits leave it. Joining makes "the last
        // handle is gone" mean "the device is closed".
        if let Some(cmd) = self.cmd.take() {
            let _ = cmd.send(Input::Stop);
        }
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the MAD I/O thread panicked");
            }
        }
    }
}

/// Sends made from the caller's thread on a device that gives a sender
/// ([`MadDevice::sender`]), and what they count; the I/O thread empties
/// `sender` before the device closes.
#[derive(Default)]
struct DirectSends {
    sender: Option<Box<dyn super::DeviceSender>>,
    sent: HashMap<MadKey, u64>,
    errors: u64,
}

type Direct = Arc<Mutex<DirectSends>>;

fn lock_direct(direct: &Direct) -> std::sync::MutexGuard<'_, DirectSends> {
    direct.lock().unwrap_or_else(|p| p.into_inner())
}

/// A handle on the I/O thread; clones share it. The thread stops and closes
/// the device when the last handle is dropped.
#[derive(Clone)]
pub struct MadTransport {
    /// Holds the only long-lived command sender, so the thread sees the
    /// channel close exactly when the last handle is dropped.
    shared: Arc<Shared>,
    permits: Arc<Semaphore>,
    stats: Arc<Mutex<TransportStats>>,
    /// Where `send` writes directly, when the device allows it.
    direct: Option<Direct>,
    diversions: Arc<Diversions>,
}

impl MadTransport {
    /// Starts the I/O thread on `device`. Returns the handle and the
    /// receiving end of the unsolicited channel (requests, traps and
    /// reports from others; dropped and counted when full).
    pub fn spawn<D: MadDevice>(mut device: D, cfg: TxnConfig) -> (MadTransport, tokio::sync::mpsc::Receiver<Datagram>) {
        let direct: Option<Direct> = device
            .sender()
            .map(|sender| Arc::new(Mutex::new(DirectSends { sender: Some(sender), ..Default::default() })));
        let thread_direct = direct.clone();
        let diversions = Arc::new(Diversions::default());
        let (thread_diversions, transport_diversions) = (diversions.clone(), diversions);
        // Room for every command the permits allow, the MADs the receiver
        // thread may queue, and Stop: a command never finds it full.
        let (cmd_tx, cmd_rx) = mpsc::sync_channel(MAX_OUTSTANDING + RECEIVED_QUEUE + 1);
        let receiver_tx = cmd_tx.clone();
        let (unsol_tx, unsol_rx) = tokio::sync::mpsc::channel(UNSOLICITED_CAPACITY);
        let stats = Arc::new(Mutex::new(TransportStats::default()));
        let local_port = device.local_port();
        let thread_stats = stats.clone();
        let thread = std::thread::Builder::new()
            .name("ibsm-mad-io".into())
            .spawn(move || {
                IoLoop::new(device, cfg, cmd_rx, unsol_tx, thread_stats, thread_diversions)
                    .run(receiver_tx, thread_direct)
            })
            .expect("spawning the MAD I/O thread");
        let shared = Arc::new(Shared { cmd: Some(cmd_tx), thread: Some(thread), local_port });
        let t = MadTransport {
            shared,
            permits: Arc::new(Semaphore::new(MAX_OUTSTANDING)),
            stats,
            direct,
            diversions: transport_diversions,
        };
        (t, unsol_rx)
    }
}

impl MadTransport {
    fn sender(&self) -> &SyncSender<Input> {
        self.shared.cmd.as_ref().expect("taken only when the last handle drops")
    }

    fn submit(
        &self,
        dgram: Datagram,
        kind: RequestKind,
    ) -> impl std::future::Future<Output = Result<Datagram, TransportError>> + Send {
        let cmd = self.sender().clone();
        let permits = self.permits.clone();
        async move {
            if let Err(e) = MadHeader::new_checked(&dgram.mad[..dgram.mad.len().min(MAD_HEADER_LEN)]) {
                return Err(TransportError::Malformed(e));
            }
            let permit = permits.acquire_owned().await.map_err(|_| TransportError::Closed)?;
            let (reply, rx) = oneshot::channel();
            let sent = cmd.try_send(Input::Command(Command::Request { dgram, kind, reply, _permit: permit }));
            // Not a handle: waiting for the reply must not keep the thread alive.
            drop(cmd);
            sent.map_err(|_| TransportError::Closed)?;
            rx.await.map_err(|_| TransportError::Closed)?
        }
    }
}

/// [`Transport::request`] and [`Transport::request_rmpp`] for a transport
/// whose requests all go through a [`Transactions`] table by an inherent
/// `submit(dgram, RequestKind)` (this one and `sim::VirtualTransport`): the
/// two differ only in the kind submitted, an RMPP answer reassembled with
/// the default limits.
macro_rules! submit_requests {
    () => {
        fn request(
            &self,
            dgram: $crate::transport::Datagram,
        ) -> impl std::future::Future<
            Output = Result<$crate::transport::Datagram, $crate::transport::TransportError>,
        > + Send {
            self.submit(dgram, $crate::transport::RequestKind::Single)
        }

        fn request_rmpp(
            &self,
            dgram: $crate::transport::Datagram,
        ) -> impl std::future::Future<
            Output = Result<$crate::transport::Datagram, $crate::transport::TransportError>,
        > + Send {
            self.submit(dgram, $crate::transport::RequestKind::Rmpp($crate::rmpp::RmppConfig::default()))
        }
    };
}
pub(crate) use submit_requests;

impl Transport for MadTransport {
    submit_requests!();

    fn send(&self, dgram: Datagram) -> Result<(), TransportError> {
        if let Some(direct) = &self.direct {
            // From this thread: the I/O thread is not woken for an answer.
            return send_direct(direct, &dgram);
        }
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return Err(TransportError::Busy { mad: Box::new(MadSummary::of(&dgram)) });
        };
        self.sender().try_send(Input::Command(Command::Send { dgram, _permit: permit })).map_err(|e| match e {
            mpsc::TrySendError::Full(Input::Command(Command::Send { dgram, .. })) => {
                TransportError::Busy { mad: Box::new(MadSummary::of(&dgram)) }
            }
            _ => TransportError::Closed,
        })
    }

    fn local_port(&self) -> LocalPort {
        self.shared.local_port.clone()
    }

    fn stats(&self) -> TransportStats {
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(direct) = &self.direct {
            let d = lock_direct(direct);
            for (key, n) in &d.sent {
                s.txn.by_mad.entry(*key).or_default().sent += n;
            }
            s.device_errors += d.errors;
        }
        for (key, n) in self.diversions.taken.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            s.txn.by_mad.entry(*key).or_default().unsolicited += n;
        }
        s.unsolicited_dropped += self.diversions.dropped.load(Ordering::Relaxed);
        s
    }

    fn divert(&self, class: MgmtClass, sink: tokio::sync::mpsc::Sender<Arrived>) -> bool {
        self.diversions.add(class.into(), sink);
        true
    }

    fn serve_inline(&self, class: MgmtClass, server: Box<dyn InlineServer>) -> bool {
        // A device that sends from any thread also reads on a thread of
        // its own (`MadDevice::sender`), where the server runs.
        if self.direct.is_none() {
            return false;
        }
        *self.diversions.inline.lock().unwrap_or_else(|p| p.into_inner()) = Some((class.into(), server));
        self.diversions.inline_offered.store(true, Ordering::SeqCst);
        true
    }
}

/// The thread's state.
struct IoLoop<D> {
    dev: D,
    core: Transactions<u64>,
    cmds: Receiver<Input>,
    /// MADs the receiver thread has queued and this thread not yet taken.
    received_queued: Arc<AtomicUsize>,
    unsolicited: tokio::sync::mpsc::Sender<Datagram>,
    diversions: Arc<Diversions>,
    shared_stats: Arc<Mutex<TransportStats>>,
    waiting: HashMap<u64, (Reply, OwnedSemaphorePermit)>,
    next_token: u64,
    unsolicited_dropped: u64,
    /// The per-source trap rate limit, and what it dropped so far.
    trap_gate: TrapGate,
    traps_dropped: std::collections::BTreeMap<crate::types::Lid, u64>,
    device_errors: u64,
    /// Replies computed this turn, delivered after the stats are published
    /// so a caller that sees its reply also sees it counted.
    ready: Vec<(Reply, Result<Datagram, TransportError>)>,
    /// Unsolicited MADs received this turn, handed on after the stats are
    /// published, like replies.
    arrived: Vec<Datagram>,
    dirty: bool,
    closing: bool,
    /// When the device last handed over a MAD (real time).
    last_traffic: Option<std::time::Instant>,
}

impl<D: MadDevice> IoLoop<D> {
    fn new(
        dev: D,
        cfg: TxnConfig,
        cmds: Receiver<Input>,
        unsolicited: tokio::sync::mpsc::Sender<Datagram>,
        shared_stats: Arc<Mutex<TransportStats>>,
        diversions: Arc<Diversions>,
    ) -> Self {
        // Starting TIDs at a random point keeps a restarted SM from matching
        // responses meant for its previous life.
        let first_tid = rand::random::<u32>() | 1;
        let trap_rate_limit = cfg.trap_rate_limit;
        IoLoop {
            dev,
            core: Transactions::with_first_tid(cfg, first_tid),
            cmds,
            received_queued: Arc::default(),
            unsolicited,
            diversions,
            shared_stats,
            waiting: HashMap::new(),
            next_token: 0,
            unsolicited_dropped: 0,
            trap_gate: TrapGate::new(trap_rate_limit),
            traps_dropped: Default::default(),
            device_errors: 0,
            ready: Vec::new(),
            arrived: Vec::new(),
            dirty: false,
            closing: false,
            last_traffic: None,
        }
    }

    fn run(mut self, to_self: SyncSender<Input>, direct: Option<Direct>) {
        let port = self.dev.local_port();
        tracing::debug!(ca = %port.ca_name, port = port.port_num, "MAD I/O thread started");
        match self.dev.receiver() {
            Some(reader) => {
                let stop = Arc::new(AtomicBool::new(false));
                let (queued, stopping) = (self.received_queued.clone(), stop.clone());
                let diversions = self.diversions.clone();
                let answers = direct.clone();
                let receiver = std::thread::Builder::new().name("ibsm-mad-recv".into()).spawn(move || {
                    Receiving { reader, to: to_self, queued, diversions, answers, stop: stopping }.run()
                });
                match receiver {
                    Ok(receiver) => {
                        self.run_woken();
                        // Before the device closes (when this loop's owner drops it).
                        stop.store(true, Ordering::SeqCst);
                        if receiver.join().is_err() {
                            tracing::error!("the MAD receiver thread panicked");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot start the MAD receiver thread: the I/O thread polls the device");
                        self.run_polling();
                    }
                }
            }
            None => {
                drop(to_self);
                self.run_polling();
            }
        }
        // Direct sends end before the device closes (when this loop's
        // owner drops it).
        if let Some(direct) = direct {
            lock_direct(&direct).sender = None;
        }
        // Pending requests learn of the shutdown through their dropped
        // reply senders (TransportError::Closed).
        self.core.drain();
        self.waiting.clear();
        tracing::debug!("MAD I/O thread stopped");
    }

    /// With a receiver thread: sleeps until a command or a MAD arrives or
    /// the next transaction deadline passes, with no polling.
    fn run_woken(&mut self) {
        while !self.closing {
            let now = self.dev.now();
            let wait = self.core.poll_timeout().map_or(WOKEN_IDLE_WAIT, |d| d.saturating_sub(now));
            match self.cmds.recv_timeout(wait) {
                Ok(input) => self.take(input),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.closing = true,
            }
            // What else is ready, bounded so timeouts and answers keep up.
            self.drain_inputs(RECV_BURST);
            self.turn_over();
        }
    }

    /// Without one (a virtual-time device, whose `recv` moves its clock):
    /// waits on the commands and polls the device in turn (module doc).
    fn run_polling(&mut self) {
        while !self.closing {
            // An RMPP transfer being reassembled is as busy as a request
            // on the wire: its segments must be taken as they come.
            if self.core.in_flight() + self.core.receiving() == 0 {
                let since = self.last_traffic.map(|t| t.elapsed());
                let wait = match since {
                    Some(s) if s < ACTIVE_SPAN => ACTIVE_IDLE_WAIT,
                    Some(s) if s >= QUIET_AFTER => QUIET_WAIT,
                    _ => IDLE_WAIT,
                };
                match self.cmds.recv_timeout(wait) {
                    Ok(input) => self.take(input),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => self.closing = true,
                }
                let now = self.dev.now();
                self.receive(now);
            } else {
                let now = self.dev.now();
                let deadline = self.core.poll_timeout().map_or(now + BUSY_POLL, |d| d.min(now + BUSY_POLL));
                self.receive(deadline);
            }
            self.drain_inputs(usize::MAX);
            self.turn_over();
        }
    }

    /// The end of a loop turn: expired requests fail, what the window
    /// allows is sent, results are handed out.
    fn turn_over(&mut self) {
        let now = self.dev.now();
        for (token, e) in self.core.handle_timeout(now) {
            self.dirty = true;
            tracing::debug!(error = %e, "request failed");
            self.finish(token, Err(e.into()));
        }
        self.transmit();
        self.publish();
    }

    fn take(&mut self, input: Input) {
        match input {
            Input::Command(c) => self.accept(c),
            Input::Received(d) => {
                self.received_queued.fetch_sub(1, Ordering::SeqCst);
                self.handle(d);
            }
            Input::ReceiveFailed(error) => self.receive_failed(error),
            Input::Stop => self.closing = true,
        }
    }

    fn accept(&mut self, c: Command) {
        self.dirty = true;
        match c {
            Command::Request { dgram, kind, reply, _permit } => {
                let token = self.next_token;
                self.next_token += 1;
                match self.core.submit_with(token, dgram, kind) {
                    Ok(()) => {
                        self.waiting.insert(token, (reply, _permit));
                    }
                    Err(e) => {
                        let TxnError::Malformed(w) = e else { unreachable!("submit fails only on malformed MADs") };
                        self.ready.push((reply, Err(TransportError::Malformed(w))));
                    }
                }
            }
            Command::Send { dgram, _permit } => {
                self.core.count_send(&dgram);
                if let Err(error) = self.dev.send(&dgram) {
                    self.device_errors += 1;
                    tracing::warn!(mad = %MadSummary::of(&dgram), %error, "send failed");
                    if matches!(error, DeviceError::Closed) {
                        self.closing = true;
                    }
                }
            }
        }
    }

    /// Takes up to `most` inputs that are ready.
    fn drain_inputs(&mut self, most: usize) {
        for _ in 0..most {
            match self.cmds.try_recv() {
                Ok(input) => self.take(input),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.closing = true;
                    break;
                }
            }
        }
    }

    /// Waits for one MAD until `deadline`, then takes what else is ready.
    fn receive(&mut self, deadline: Duration) {
        let mut deadline = deadline;
        for _ in 0..=RECV_BURST {
            match self.dev.recv(deadline) {
                Ok(Some(d)) => self.handle(d),
                Ok(None) => break,
                Err(error) => {
                    let closed = matches!(error, DeviceError::Closed);
                    self.receive_failed(error);
                    if !closed {
                        // Don't spin on a persistent error.
                        std::thread::sleep(BUSY_POLL);
                    }
                    break;
                }
            }
            deadline = self.dev.now();
        }
    }

    fn receive_failed(&mut self, error: DeviceError) {
        self.device_errors += 1;
        self.dirty = true;
        if matches!(error, DeviceError::Closed) {
            tracing::error!("the MAD device closed");
            self.closing = true;
        } else {
            tracing::warn!(%error, "receive failed");
        }
    }

    fn handle(&mut self, d: Datagram) {
        self.dirty = true;
        self.last_traffic = Some(std::time::Instant::now());
        let now = self.dev.now();
        match self.core.handle_receive(now, d) {
            Received::Response { token, dgram } => self.finish(token, Ok(dgram)),
            Received::Failed { token, error } => self.finish(token, Err(error.into())),
            Received::Segment { .. } => {}
            Received::Unsolicited(d) => {
                if TrapGate::is_trap(&d.mad) && !self.trap_gate.admit(self.dev.now(), d.addr.lid) {
                    // Unanswered: a genuine trap is sent again by its port.
                    self.dirty = true;
                } else {
                    self.arrived.push(d);
                }
            }
            Received::Stray { tid } => {
                tracing::debug!(tid = format_args!("{tid:#018x}"), "stray response")
            }
            Received::Malformed(e) => tracing::debug!(error = %e, "malformed MAD dropped"),
        }
    }

    fn transmit(&mut self) {
        loop {
            let now = self.dev.now();
            let Some(d) = self.core.poll_transmit(now) else {
                break;
            };
            self.dirty = true;
            if let Err(error) = self.dev.send(&d) {
                self.device_errors += 1;
                let mad = MadSummary::of(&d);
                tracing::warn!(%mad, %error, "request send failed");
                if matches!(error, DeviceError::Closed) {
                    self.closing = true;
                }
                if let Some(token) = self.core.cancel_tid(mad.tid as u32) {
                    self.finish(token, Err(TransportError::Device { mad: Some(Box::new(mad)), error }));
                }
            }
        }
    }

    fn finish(&mut self, token: u64, result: Result<Datagram, TransportError>) {
        if let Some((reply, _permit)) = self.waiting.remove(&token) {
            self.ready.push((reply, result));
        }
    }

    fn publish(&mut self) {
        if self.dirty {
            for (lid, n) in self.trap_gate.take_dropped() {
                *self.traps_dropped.entry(lid).or_default() += n;
            }
            let snapshot = TransportStats {
                txn: self.core.stats(),
                unsolicited_dropped: self.unsolicited_dropped,
                device_errors: self.device_errors,
                traps_dropped: self.traps_dropped.clone(),
            };
            *self.shared_stats.lock().unwrap_or_else(|p| p.into_inner()) = snapshot;
            self.dirty = false;
        }
        for d in std::mem::take(&mut self.arrived) {
            let Some(d) = self.hand_to_diverted(d) else { continue };
            let smp = d.mad.get(1).is_some_and(|&c| super::txn::is_smp_class(c));
            if !smp && self.unsolicited.capacity() <= SMP_RESERVE {
                self.drop_unsolicited(&d, "unsolicited channel nearly full (the rest is kept for SMPs), MAD dropped");
                continue;
            }
            match self.unsolicited.try_send(d) {
                Ok(()) => {}
                Err(tokio::sync::mpsc::error::TrySendError::Full(d)) => {
                    self.drop_unsolicited(&d, "unsolicited channel full, MAD dropped");
                }
                Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => {
                    self.unsolicited_dropped += 1;
                    self.dirty = true;
                }
            }
        }
        for (reply, result) in self.ready.drain(..) {
            // The requester may have given up (its future was dropped).
            let _ = reply.send(result);
        }
    }

    /// Hands `d` to its class's own channel, if its class is diverted;
    /// gives it back otherwise (or when that channel is closed, which ends
    /// the diversion).
    fn hand_to_diverted(&mut self, d: Datagram) -> Option<Datagram> {
        let summary = MadSummary::of(&d);
        match self.diversions.offer(d) {
            Offered::Taken => None,
            Offered::Dropped => {
                // Counted by the diversions (the receiver thread drops too).
                let dropped = self.diversions.dropped.load(Ordering::Relaxed);
                if dropped.is_power_of_two() {
                    tracing::warn!(mad = %summary, dropped, "the agent's queue is full, MAD dropped");
                }
                None
            }
            Offered::Declined(d) => Some(d),
        }
    }

    /// Counts a MAD the consumer had no room for; a flood logs at the 1st,
    /// 2nd, 4th, 8th... drop, not at each.
    fn drop_unsolicited(&mut self, d: &Datagram, why: &'static str) {
        self.unsolicited_dropped += 1;
        self.dirty = true;
        if self.unsolicited_dropped.is_power_of_two() {
            tracing::warn!(mad = %MadSummary::of(d), dropped = self.unsolicited_dropped, "{why}");
        }
    }
}

/// The receiver thread's ends: the device's reading half, the I/O
/// thread's channel (and how much waits in it), the diversions, and the
/// device's sending half for an inline server's answers.
struct Receiving {
    reader: Box<dyn super::DeviceReceiver>,
    to: SyncSender<Input>,
    queued: Arc<AtomicUsize>,
    diversions: Arc<Diversions>,
    answers: Option<Direct>,
    stop: Arc<AtomicBool>,
}

impl Receiving {
    /// Waits on the device in slices of [`RECEIVER_SLICE`] (so it sees
    /// `stop` soon), hands a diverted class's requests to their inline
    /// server or agent and each other MAD to the I/O thread, and holds off
    /// while [`RECEIVED_QUEUE`] wait there untaken (the device queues them
    /// meanwhile). While an inline server has requests waiting, it reads
    /// without waiting until the device is empty (or [`RECEIVER_DRAIN`]
    /// in a row), then lets the server answer [`INLINE_BURST`] of them.
    fn run(mut self) {
        let mut inline: Option<(u8, Box<dyn InlineServer>)> = None;
        let mut read_in_a_row = 0usize;
        while !self.stop.load(Ordering::SeqCst) {
            if let Some(taken) = self.diversions.take_inline().filter(|_| self.answers.is_some()) {
                inline = Some(taken);
            }
            let answering = inline.as_ref().is_some_and(|(_, s)| s.waiting());
            let room = self.queued.load(Ordering::SeqCst) < RECEIVED_QUEUE;
            if room && (!answering || read_in_a_row < RECEIVER_DRAIN) {
                let wait = if answering { Duration::ZERO } else { RECEIVER_SLICE };
                match self.reader.recv(wait) {
                    Ok(Some(d)) => {
                        read_in_a_row += 1;
                        let Some(d) = self.diversions.take_request(d, inline.as_mut()) else { continue };
                        self.queued.fetch_add(1, Ordering::SeqCst);
                        if self.to.send(Input::Received(d)).is_err() {
                            return;
                        }
                        continue;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        let closed = matches!(error, DeviceError::Closed);
                        if self.to.send(Input::ReceiveFailed(error)).is_err() || closed {
                            return;
                        }
                        // Don't spin on a persistent error.
                        std::thread::sleep(BUSY_POLL);
                    }
                }
            } else if !answering {
                std::thread::sleep(RECEIVER_HOLD_OFF);
                continue;
            }
            read_in_a_row = 0;
            if let (Some((_, server)), Some(direct)) = (inline.as_mut(), self.answers.as_ref()) {
                // A failed write is counted with the device's errors; the
                // requester asks again.
                let mut send = |d: Datagram| {
                    let _ = send_direct(direct, &d);
                };
                for _ in 0..INLINE_BURST {
                    if !server.waiting() {
                        break;
                    }
                    server.serve_one(&mut send);
                }
            }
        }
    }
}

/// Writes `d` from the calling thread, counted as the I/O thread counts
/// its own sends.
fn send_direct(direct: &Direct, d: &Datagram) -> Result<(), TransportError> {
    let mut sends = lock_direct(direct);
    let Some(sender) = sends.sender.as_mut() else { return Err(TransportError::Closed) };
    if let Err(error) = sender.send(d) {
        sends.errors += 1;
        return Err(TransportError::Device { mad: Some(Box::new(MadSummary::of(d))), error });
    }
    if let Ok(h) = MadHeader::new_checked(&d.mad[..d.mad.len().min(MAD_HEADER_LEN)]) {
        *sends.sent.entry(MadKey::of(&h)).or_default() += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::smp::SmpRepr;
    use crate::mad::{AttributeId, DrPath, MadHeader, Method, MgmtClass};
    use crate::transport::{MadAddress, MadKey};
    use crate::types::{Guid, Lid};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// What the fake device saw, shared with the test.
    #[derive(Default)]
    struct Observed {
        sent: usize,
        outstanding: usize,
        max_outstanding: usize,
    }

    /// A virtual-time fabric: answers every directed Get after `latency`
    /// unless its first hop is `black_hole`, and delivers `inject`ed MADs at
    /// their time. `recv` jumps the clock, as the in-process fabric does.
    /// GMPs (SA queries and the like) are never answered: a silent SA.
    struct FakeDevice {
        clock: Duration,
        latency: Duration,
        black_hole: Option<u8>,
        wire: Vec<(Duration, Datagram)>,
        seen: Arc<Mutex<Observed>>,
        dropped: Arc<AtomicBool>,
        /// While false, only responses come off the wire: a test holds
        /// unsolicited MADs back until the thread has taken its commands.
        unsolicited_open: Arc<AtomicBool>,
    }

    impl FakeDevice {
        fn new(latency: Duration) -> (Self, Arc<Mutex<Observed>>, Arc<AtomicBool>) {
            let seen = Arc::new(Mutex::new(Observed::default()));
            let dropped = Arc::new(AtomicBool::new(false));
            let d = FakeDevice {
                clock: Duration::ZERO,
                latency,
                black_hole: None,
                wire: Vec::new(),
                seen: seen.clone(),
                dropped: dropped.clone(),
                unsolicited_open: Arc::new(AtomicBool::new(true)),
            };
            (d, seen, dropped)
        }
    }

    impl Drop for FakeDevice {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    impl MadDevice for FakeDevice {
        fn now(&self) -> Duration {
            self.clock
        }
        fn send(&mut self, d: &Datagram) -> Result<(), DeviceError> {
            let mut s = self.seen.lock().unwrap();
            s.sent += 1;
            let class = MadHeader::new_checked(&d.mad[..24]).unwrap().mgmt_class();
            if !matches!(class, MgmtClass::SubnMgmtDirected | MgmtClass::SubnMgmtLid) {
                s.outstanding += 1;
                s.max_outstanding = s.max_outstanding.max(s.outstanding);
                return Ok(());
            }
            let smp = SmpRepr::parse_bytes(&d.mad).expect("the transport sends what it was given");
            if smp.header.method.is_response() {
                return Ok(());
            }
            s.outstanding += 1;
            s.max_outstanding = s.max_outstanding.max(s.outstanding);
            if smp.path().and_then(|p| p.ports().first().copied()) == self.black_hole && self.black_hole.is_some() {
                s.outstanding -= 1;
                return Ok(());
            }
            let mut r = d.clone();
            let mut h = MadHeader::new_checked(&mut r.mad[..24]).unwrap();
            h.set_method(Method::GetResp);
            // The kernel's hi_tid.
            let tid = h.transaction_id();
            h.set_transaction_id(0x0000_0007_0000_0000 | tid);
            r.mad[64] = 0x5a;
            self.wire.push((self.clock + self.latency, r));
            Ok(())
        }
        fn recv(&mut self, deadline: Duration) -> Result<Option<Datagram>, DeviceError> {
            let open = self.unsolicited_open.load(Ordering::SeqCst);
            let next = self
                .wire
                .iter()
                .enumerate()
                .filter(|(_, w)| open || MadHeader::new_checked(&w.1.mad[..24]).unwrap().method().is_response())
                .min_by_key(|(_, w)| w.0)
                .map(|(i, w)| (i, w.0));
            match next {
                Some((i, due)) if due <= deadline.max(self.clock) => {
                    self.clock = self.clock.max(due);
                    let (_, d) = self.wire.swap_remove(i);
                    let mut s = self.seen.lock().unwrap();
                    if MadHeader::new_checked(&d.mad[..24]).unwrap().method().is_response() {
                        s.outstanding -= 1;
                    }
                    Ok(Some(d))
                }
                _ => {
                    self.clock = self.clock.max(deadline);
                    Ok(None)
                }
            }
        }
        fn local_port(&self) -> LocalPort {
            LocalPort {
                ca_name: "fake0".into(),
                port_num: 1,
                port_guid: Guid(0x1234),
                node_guid: Guid(0x1234),
                lid: Lid(0),
                sm_lid: Lid(0),
            }
        }
    }

    fn get(path: &[u8]) -> Datagram {
        let smp = SmpRepr::directed_request(
            Method::Get,
            AttributeId::NodeInfo,
            0,
            DrPath::from_ports(path).unwrap(),
            0,
            [0; 64],
        );
        Datagram { addr: MadAddress::smi_permissive(), mad: smp.to_bytes().to_vec() }
    }

    /// An SA Get (a PathRecord query, say) to the SA at LID 1.
    fn sa_get() -> Datagram {
        let mut mad = vec![0u8; 256];
        let mut h = MadHeader::new_checked(&mut mad[..24]).unwrap();
        h.set_base_version(1);
        h.set_mgmt_class(MgmtClass::SubnAdm);
        h.set_class_version(2);
        h.set_method(Method::Get);
        h.set_attribute_id(AttributeId::from(0x0035));
        Datagram { addr: MadAddress::gsi(Lid(1), 0), mad }
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    #[test]
    fn many_concurrent_requests_respect_the_window() {
        let (dev, seen, _) = FakeDevice::new(Duration::from_micros(300));
        let cfg = TxnConfig { window: 4, ..TxnConfig::default() };
        let (t, _unsol) = MadTransport::spawn(dev, cfg);
        rt().block_on(async {
            let tasks: Vec<_> = (0..200u8)
                .map(|i| {
                    let t = t.clone();
                    tokio::spawn(async move { t.request(get(&[i % 8 + 1])).await })
                })
                .collect();
            for (i, task) in tasks.into_iter().enumerate() {
                let r = task.await.unwrap().unwrap();
                let smp = SmpRepr::parse_bytes(&r.mad).unwrap();
                assert_eq!(smp.header.method, Method::GetResp);
                assert_eq!(smp.path().unwrap().ports(), &[i as u8 % 8 + 1], "each caller gets its own answer");
                assert_eq!(smp.data[0], 0x5a);
            }
        });
        let s = seen.lock().unwrap();
        assert_eq!(s.sent, 200);
        assert_eq!(s.max_outstanding, 4, "the window fills but is never exceeded");
        let stats = t.stats();
        let c = stats.txn.totals();
        assert_eq!((c.sent, c.responses, c.retries), (200, 200, 0));
        assert_eq!(stats.txn.in_flight, 0);
    }

    #[test]
    fn a_silent_sa_does_not_hold_back_smps() {
        let (dev, seen, _) = FakeDevice::new(Duration::from_micros(300));
        // SA queries that never time out hold their window for the whole
        // test (virtual time runs fast while anything is in flight).
        let cfg = TxnConfig {
            window: 4,
            gmp_window: 2,
            timeout: Duration::from_secs(1 << 30),
            retries: 0,
            ..TxnConfig::default()
        };
        let (t, _unsol) = MadTransport::spawn(dev, cfg);
        rt().block_on(async {
            let sa: Vec<_> = (0..50)
                .map(|_| {
                    let t = t.clone();
                    tokio::spawn(async move { t.request(sa_get()).await })
                })
                .collect();
            let sa_key = MadKey { class: 0x03, attribute: 0x35, method: 1 };
            tokio::time::timeout(Duration::from_secs(10), async {
                while t.stats().txn.by_mad.get(&sa_key).map_or(0, |c| c.sent) < 2 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await
            .expect("the SA window fills");
            let smps: Vec<_> = (0..100u8)
                .map(|i| {
                    let t = t.clone();
                    tokio::spawn(async move { t.request(get(&[i % 8 + 1])).await })
                })
                .collect();
            for task in smps {
                let r = tokio::time::timeout(Duration::from_secs(10), task).await.expect("SMPs are not held back");
                assert_eq!(SmpRepr::parse_bytes(&r.unwrap().unwrap().mad).unwrap().header.method, Method::GetResp);
            }
            let s = t.stats().txn;
            assert_eq!(s.by_mad[&sa_key].sent, 2, "the SA window stays full and is never exceeded");
            assert_eq!(s.totals().responses, 100);
            assert_eq!((s.in_flight, s.queued), (2, 48));
            for task in sa {
                task.abort();
            }
        });
        assert_eq!(seen.lock().unwrap().max_outstanding, 4 + 2, "both windows filled side by side");
    }

    #[test]
    fn timeouts_report_the_mad_and_attempts_in_virtual_time() {
        let (mut dev, seen, _) = FakeDevice::new(Duration::from_micros(100));
        dev.black_hole = Some(9);
        let cfg = TxnConfig { window: 2, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
        let (t, _unsol) = MadTransport::spawn(dev, cfg);
        let wall = std::time::Instant::now();
        rt().block_on(async {
            let lost = t.request(get(&[9, 2]));
            let fine = t.request(get(&[1]));
            let (lost, fine) = tokio::join!(lost, fine);
            assert!(fine.is_ok());
            match lost {
                Err(TransportError::Timeout { attempts, mad }) => {
                    assert_eq!(attempts, 4);
                    assert_eq!(mad.attribute, AttributeId::NodeInfo);
                    assert_eq!(mad.path, Some(DrPath::from_ports(&[9, 2]).unwrap()));
                    assert_eq!(mad.tid >> 32, 0);
                }
                other => panic!("{other:?}"),
            }
        });
        // 4 × 200 ms of virtual time should pass in far less real time; a
        // generous bound, only to catch the loop sleeping in real time.
        assert!(wall.elapsed() < Duration::from_secs(5));
        assert_eq!(seen.lock().unwrap().sent, 5);
        let c = t.stats().txn.totals();
        assert_eq!((c.sent, c.retries, c.timeouts, c.failed), (5, 3, 4, 1));
    }

    #[test]
    fn unsolicited_mads_arrive_while_idle() {
        let (mut dev, _, _) = FakeDevice::new(Duration::from_micros(100));
        let mut trap = get(&[]);
        trap.mad[3] = u8::from(Method::Trap);
        trap.mad[1] = 0x01;
        dev.wire.push((Duration::ZERO, trap.clone()));
        let (t, mut unsol) = MadTransport::spawn(dev, TxnConfig::default());
        rt().block_on(async {
            let got = tokio::time::timeout(Duration::from_secs(5), unsol.recv()).await.unwrap().unwrap();
            assert_eq!(got.mad, trap.mad);
        });
        assert_eq!(t.stats().txn.totals().unsolicited, 1);
    }

    #[test]
    fn a_flood_of_gmps_leaves_room_for_smps() {
        let (mut dev, _, _) = FakeDevice::new(Duration::from_micros(100));
        let mut sa = get(&[]);
        sa.mad[1] = 0x03;
        for _ in 0..UNSOLICITED_CAPACITY + 50 {
            dev.wire.push((Duration::ZERO, sa.clone()));
        }
        let mut trap = get(&[]);
        trap.mad[1] = 0x01;
        trap.mad[3] = u8::from(Method::Trap);
        dev.wire.push((Duration::ZERO, trap.clone()));
        let (t, mut unsol) = MadTransport::spawn(dev, TxnConfig::default());
        // Nobody reads until the thread has taken every MAD off the wire.
        let t0 = std::time::Instant::now();
        while t.stats().txn.totals().unsolicited < (UNSOLICITED_CAPACITY + 51) as u64 {
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t.stats());
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(20));
        let mut got = Vec::new();
        while let Ok(d) = unsol.try_recv() {
            got.push(d.mad[1]);
        }
        assert!(got.contains(&0x01), "the trap got through the SA flood");
        let sa_delivered = got.iter().filter(|&&c| c == 0x03).count();
        assert!(sa_delivered <= UNSOLICITED_CAPACITY - SMP_RESERVE, "{sa_delivered} SA MADs took SMP slots");
        assert!(sa_delivered + 1 >= UNSOLICITED_CAPACITY - SMP_RESERVE, "only {sa_delivered} SA MADs got in");
        assert_eq!(t.stats().unsolicited_dropped as usize, UNSOLICITED_CAPACITY + 50 - sa_delivered);
    }

    /// A device with an SA query and a trap waiting behind the gate, the
    /// transport on it, and the gate.
    fn sa_query_and_trap_held() -> (MadTransport, tokio::sync::mpsc::Receiver<Datagram>, Arc<AtomicBool>) {
        let (mut dev, _, _) = FakeDevice::new(Duration::from_micros(100));
        let mut sa = get(&[]);
        sa.mad[1] = 0x03;
        let mut trap = get(&[]);
        trap.mad[1] = 0x01;
        trap.mad[3] = u8::from(Method::Trap);
        dev.wire.push((Duration::ZERO, sa));
        dev.wire.push((Duration::ZERO, trap));
        dev.unsolicited_open.store(false, Ordering::SeqCst);
        let gate = dev.unsolicited_open.clone();
        let (t, unsol) = MadTransport::spawn(dev, TxnConfig::default());
        (t, unsol, gate)
    }

    #[test]
    fn a_diverted_class_goes_to_its_own_channel() {
        let (t, mut unsol, gate) = sa_query_and_trap_held();
        let (sink, mut sa) = tokio::sync::mpsc::channel(4);
        assert!(t.divert(MgmtClass::SubnAdm, sink));
        rt().block_on(async {
            // Commands are taken in order: this answer means the diversion is in place.
            t.request(get(&[1])).await.unwrap();
            gate.store(true, Ordering::SeqCst);
            let got = tokio::time::timeout(Duration::from_secs(5), sa.recv()).await.unwrap().unwrap();
            assert_eq!(got.dgram.mad[1], 0x03);
            let got = tokio::time::timeout(Duration::from_secs(5), unsol.recv()).await.unwrap().unwrap();
            assert_eq!(got.mad[1], 0x01, "the trap still comes on the unsolicited channel");
        });
        assert!(unsol.try_recv().is_err(), "the SA query came on the unsolicited channel too");
        assert_eq!(t.stats().unsolicited_dropped, 0);
    }

    #[test]
    fn a_closed_diversion_ends_and_its_mads_come_unsolicited_again() {
        let (t, mut unsol, gate) = sa_query_and_trap_held();
        let (sink, sa) = tokio::sync::mpsc::channel(4);
        drop(sa);
        assert!(t.divert(MgmtClass::SubnAdm, sink));
        rt().block_on(async {
            t.request(get(&[1])).await.unwrap();
            gate.store(true, Ordering::SeqCst);
            let mut classes = Vec::new();
            for _ in 0..2 {
                let got = tokio::time::timeout(Duration::from_secs(5), unsol.recv()).await.unwrap().unwrap();
                classes.push(got.mad[1]);
            }
            classes.sort();
            assert_eq!(classes, [0x01, 0x03]);
        });
    }

    /// A real-time device whose reading is done by a receiver thread: it
    /// answers every request it is sent through that receiver, and can be
    /// told to deliver unsolicited MADs. Its direct sender counts what it
    /// sends. It checks that it is not dropped (the port closed) while its
    /// receiver still reads or its sender may still send.
    struct ThreadedDevice {
        started: std::time::Instant,
        wire: std::sync::mpsc::Sender<Datagram>,
        reader: Option<std::sync::mpsc::Receiver<Datagram>>,
        reading: Arc<AtomicBool>,
        sending: Arc<AtomicBool>,
        sent_directly: Arc<AtomicUsize>,
        closed_while_reading: Arc<AtomicBool>,
    }

    struct ThreadedSender {
        sending: Arc<AtomicBool>,
        sent: Arc<AtomicUsize>,
    }

    impl Drop for ThreadedSender {
        fn drop(&mut self) {
            self.sending.store(false, Ordering::SeqCst);
        }
    }

    impl super::super::DeviceSender for ThreadedSender {
        fn send(&mut self, _d: &Datagram) -> Result<(), DeviceError> {
            self.sent.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    struct ThreadedReader {
        wire: std::sync::mpsc::Receiver<Datagram>,
        reading: Arc<AtomicBool>,
    }

    impl Drop for ThreadedReader {
        fn drop(&mut self) {
            self.reading.store(false, Ordering::SeqCst);
        }
    }

    impl super::super::DeviceReceiver for ThreadedReader {
        fn recv(&mut self, wait: Duration) -> Result<Option<Datagram>, DeviceError> {
            Ok(self.wire.recv_timeout(wait).ok())
        }
    }

    impl ThreadedDevice {
        /// The device, the wire into it, how many MADs were sent through
        /// its sender, and whether it closed while a half was still live.
        #[allow(clippy::type_complexity)]
        fn new() -> (Self, std::sync::mpsc::Sender<Datagram>, Arc<AtomicUsize>, Arc<AtomicBool>) {
            let (wire, reader) = std::sync::mpsc::channel();
            let sent_directly = Arc::new(AtomicUsize::new(0));
            let closed_while_reading = Arc::new(AtomicBool::new(false));
            let dev = ThreadedDevice {
                started: std::time::Instant::now(),
                wire: wire.clone(),
                reader: Some(reader),
                reading: Arc::new(AtomicBool::new(false)),
                sending: Arc::new(AtomicBool::new(false)),
                sent_directly: sent_directly.clone(),
                closed_while_reading: closed_while_reading.clone(),
            };
            (dev, wire, sent_directly, closed_while_reading)
        }
    }

    impl Drop for ThreadedDevice {
        fn drop(&mut self) {
            if self.reading.load(Ordering::SeqCst) || self.sending.load(Ordering::SeqCst) {
                self.closed_while_reading.store(true, Ordering::SeqCst);
            }
        }
    }

    impl MadDevice for ThreadedDevice {
        fn now(&self) -> Duration {
            self.started.elapsed()
        }
        fn send(&mut self, d: &Datagram) -> Result<(), DeviceError> {
            let mut r = d.clone();
            let mut h = MadHeader::new_checked(&mut r.mad[..24]).unwrap();
            if h.method().is_response() {
                return Ok(());
            }
            h.set_method(Method::GetResp);
            let _ = self.wire.send(r);
            Ok(())
        }
        fn recv(&mut self, _deadline: Duration) -> Result<Option<Datagram>, DeviceError> {
            panic!("a device with a receiver is never polled");
        }
        fn local_port(&self) -> LocalPort {
            LocalPort {
                ca_name: "threaded0".into(),
                port_num: 1,
                port_guid: Guid(0x99),
                node_guid: Guid(0x99),
                lid: Lid(0),
                sm_lid: Lid(0),
            }
        }
        fn receiver(&mut self) -> Option<Box<dyn super::super::DeviceReceiver>> {
            let wire = self.reader.take()?;
            self.reading.store(true, Ordering::SeqCst);
            Some(Box::new(ThreadedReader { wire, reading: self.reading.clone() }))
        }
        fn sender(&mut self) -> Option<Box<dyn super::super::DeviceSender>> {
            self.sending.store(true, Ordering::SeqCst);
            Some(Box::new(ThreadedSender { sending: self.sending.clone(), sent: self.sent_directly.clone() }))
        }
    }

    #[test]
    fn a_receiver_thread_wakes_the_io_thread_and_both_halves_end_before_the_device_closes() {
        let (dev, wire, sent_directly, closed_while_reading) = ThreadedDevice::new();
        let (t, mut unsol) = MadTransport::spawn(dev, TxnConfig::default());
        rt().block_on(async {
            // Requests in a row and at once: each answer comes through the
            // receiver thread, with nothing polled (a poll would panic).
            for i in 0..20u8 {
                let got = tokio::time::timeout(Duration::from_secs(5), t.request(get(&[1, i]))).await;
                assert!(got.unwrap().is_ok(), "request {i}");
            }
            let many = futures::future::join_all((0..300u16).map(|i| t.request(get(&[2, (i % 200) as u8 + 1]))));
            let answers = tokio::time::timeout(Duration::from_secs(10), many).await.unwrap();
            assert!(answers.iter().all(|a| a.is_ok()));
            // An unsolicited MAD arriving while the thread sleeps.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let mut trap = get(&[]);
            trap.mad[1] = 0x01;
            trap.mad[3] = u8::from(Method::Trap);
            let sent_at = std::time::Instant::now();
            wire.send(trap.clone()).unwrap();
            let got = tokio::time::timeout(Duration::from_secs(5), unsol.recv()).await.unwrap().unwrap();
            assert_eq!(got.mad, trap.mad);
            // Woken, not found by a poll: well under the receiver's slice.
            assert!(sent_at.elapsed() < RECEIVER_SLICE, "took {:?}", sent_at.elapsed());
        });
        assert_eq!(t.stats().txn.totals().unsolicited, 1);
        // A diverted class's request goes from the receiver thread to its
        // agent, counted as unsolicited.
        let (sink, mut sa) = tokio::sync::mpsc::channel(4);
        assert!(t.divert(MgmtClass::SubnAdm, sink));
        let mut query = get(&[]);
        query.mad[1] = 0x03;
        wire.send(query.clone()).unwrap();
        let got =
            rt().block_on(async { tokio::time::timeout(Duration::from_secs(5), sa.recv()).await.unwrap().unwrap() });
        assert_eq!(got.dgram.mad, query.mad);
        assert_eq!(t.stats().txn.totals().unsolicited, 2);
        // An answer goes out from this thread, counted with the rest.
        let mut resp = get(&[]);
        resp.mad[3] = u8::from(Method::GetResp);
        let before = t.stats().txn.totals().sent;
        t.send(resp).unwrap();
        assert_eq!(sent_directly.load(Ordering::SeqCst), 1);
        assert_eq!(t.stats().txn.totals().sent, before + 1);
        drop(t);
        assert!(
            !closed_while_reading.load(Ordering::SeqCst),
            "the device closed while its receiver or sender was live"
        );
    }

    /// An inline server that answers each Get it takes with a GetResp,
    /// lowest requester first, and notes how many it held when it first
    /// answered. Its first `take` waits until the test lets it go.
    struct HeldServer {
        gate: Option<std::sync::mpsc::Receiver<()>>,
        held: std::collections::BTreeMap<u16, std::collections::VecDeque<Datagram>>,
        taken: usize,
        log: Arc<Mutex<Vec<(usize, u16)>>>,
    }

    impl InlineServer for HeldServer {
        fn take(&mut self, d: Datagram) -> Option<Datagram> {
            if d.mad[3] != u8::from(Method::Get) {
                return Some(d);
            }
            if let Some(gate) = self.gate.take() {
                gate.recv().unwrap();
            }
            self.taken += 1;
            self.held.entry(d.addr.lid.0).or_default().push_back(d);
            None
        }
        fn waiting(&self) -> bool {
            !self.held.is_empty()
        }
        fn serve_one(&mut self, send: &mut dyn FnMut(Datagram)) {
            let mut first = self.held.first_entry().unwrap();
            let mut d = first.get_mut().pop_front().unwrap();
            if first.get().is_empty() {
                first.remove();
            }
            self.log.lock().unwrap().push((self.taken, d.addr.lid.0));
            d.mad[3] = u8::from(Method::GetResp);
            send(d);
        }
    }

    #[test]
    fn an_inline_server_answers_on_the_receiver_thread_after_reading_all_that_waits() {
        let (dev, wire, sent_directly, closed_while_reading) = ThreadedDevice::new();
        let (t, _unsol) = MadTransport::spawn(dev, TxnConfig::default());
        let (sink, mut sa) = tokio::sync::mpsc::channel(16);
        assert!(t.divert(MgmtClass::SubnAdm, sink));
        let (open_gate, gate) = std::sync::mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let server = HeldServer { gate: Some(gate), held: Default::default(), taken: 0, log: log.clone() };
        assert!(t.serve_inline(MgmtClass::SubnAdm, Box::new(server)));
        let from = |lid: u16, method: Method| {
            let mut d = sa_get();
            d.addr.lid = Lid(lid);
            d.mad[3] = u8::from(method);
            d
        };
        // The first Get holds the server in `take` while a flood from LID 7,
        // one Get from LID 3 and a Set arrive behind it.
        wire.send(from(7, Method::Get)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        for _ in 0..40 {
            wire.send(from(7, Method::Get)).unwrap();
        }
        wire.send(from(3, Method::Get)).unwrap();
        wire.send(from(3, Method::Set)).unwrap();
        open_gate.send(()).unwrap();
        // The Set goes to the class's channel.
        let set =
            rt().block_on(async { tokio::time::timeout(Duration::from_secs(5), sa.recv()).await.unwrap().unwrap() });
        assert_eq!(set.dgram.mad[3], u8::from(Method::Set));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while sent_directly.load(Ordering::SeqCst) < 42 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(sent_directly.load(Ordering::SeqCst), 42, "every Get answered from the receiver thread");
        let log = log.lock().unwrap().clone();
        // Everything was read before the first answer, so the server could
        // put LID 3's one Get before the flood that came first.
        assert_eq!(log[0], (42, 3), "{log:?}");
        assert!(sa.try_recv().is_err(), "no Get reached the channel");
        let totals = t.stats().txn.totals();
        assert_eq!((totals.unsolicited, totals.sent), (43, 42));
        drop(t);
        assert!(!closed_while_reading.load(Ordering::SeqCst));
    }

    #[test]
    fn send_counts_and_needs_no_response() {
        let (dev, seen, _) = FakeDevice::new(Duration::from_micros(100));
        let (t, _unsol) = MadTransport::spawn(dev, TxnConfig::default());
        let mut resp = get(&[]);
        resp.mad[3] = u8::from(Method::GetResp);
        t.send(resp).unwrap();
        // The send is processed by the thread; a request after it proves it.
        rt().block_on(async { t.request(get(&[1])).await.unwrap() });
        assert_eq!(seen.lock().unwrap().sent, 2);
        assert_eq!(t.stats().txn.totals().sent, 2);
    }

    #[test]
    fn dropping_the_last_handle_closes_the_device() {
        let (dev, _, dropped) = FakeDevice::new(Duration::from_micros(100));
        let (t, _unsol) = MadTransport::spawn(dev, TxnConfig::default());
        let t2 = t.clone();
        drop(t);
        assert!(!dropped.load(Ordering::SeqCst), "one handle is still alive");
        drop(t2);
        assert!(dropped.load(Ordering::SeqCst), "drop of the last handle joins the thread");
    }

    #[test]
    fn malformed_requests_are_refused() {
        let (dev, _, _) = FakeDevice::new(Duration::from_micros(100));
        let (t, _unsol) = MadTransport::spawn(dev, TxnConfig::default());
        let bad = Datagram { addr: MadAddress::smi_permissive(), mad: vec![1; 10] };
        let r = rt().block_on(t.request(bad));
        assert!(matches!(r, Err(TransportError::Malformed(_))));
    }
}
