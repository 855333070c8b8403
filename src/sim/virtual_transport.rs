//! A [`Transport`] on the in-process fabric with no I/O thread: the
//! fabric's clock is tokio's, so under paused tokio time whole SMs (runtime,
//! election, sweeps) run in virtual time on one thread, several on one
//! fabric, deterministically.
//!
//! ```text
//!  runtime tasks ──request()/send()──► State (Transactions + SimDevice) ◄── pump task
//!                                        │                                 (one per transport)
//!  VirtualClock: fabric time = base + tokio elapsed; one Notify wakes every pump
//! ```
//!
//! Each pump, when woken: runs the fabric up to now, hands out what reached
//! its device, expires its timeouts, transmits what its window allows, and
//! sleeps until the earliest of its next deadline and the fabric's next
//! event. Any pump that moved something wakes all the others, so a MAD one
//! SM sends reaches another at its virtual arrival time.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Notify};

use super::{SharedFabric, SimDevice};
use crate::exchange::txn::{Received, RequestKind, Transactions, TxnConfig};
use crate::transport::{Datagram, LocalPort, MadDevice, MadSummary, Transport, TransportError, TransportStats};

/// The fabric's time as tokio's: create one per fabric, before any
/// transport on it.
#[derive(Clone)]
pub struct VirtualClock {
    fabric: SharedFabric,
    epoch: tokio::time::Instant,
    base: Duration,
    wake: Arc<Notify>,
}

impl VirtualClock {
    pub fn new(fabric: &SharedFabric) -> Self {
        let base = fabric.lock().unwrap_or_else(|e| e.into_inner()).now();
        VirtualClock { fabric: fabric.clone(), epoch: tokio::time::Instant::now(), base, wake: Arc::new(Notify::new()) }
    }

    /// Fabric time now.
    pub fn now(&self) -> Duration {
        self.base + self.epoch.elapsed()
    }

    fn instant(&self, at: Duration) -> tokio::time::Instant {
        self.epoch + at.saturating_sub(self.base)
    }
}

type Reply = oneshot::Sender<Result<Datagram, TransportError>>;

struct State {
    dev: SimDevice,
    txns: Transactions<Reply>,
    unsolicited: mpsc::Sender<Datagram>,
    /// Classes whose unsolicited MADs go to their own agent's channel.
    diverted: Vec<(u8, mpsc::Sender<crate::datagram::Arrived>)>,
    stats: TransportStats,
    /// The device failed and the pump ended: requests fail at once.
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    clock: VirtualClock,
    local: LocalPort,
}

/// See the module docs. Clones share one device; the pump ends when the
/// last clone is dropped.
#[derive(Clone)]
pub struct VirtualTransport {
    shared: Arc<Shared>,
    _alive: Arc<oneshot::Sender<()>>,
}

impl VirtualTransport {
    /// Spawns the pump on the current tokio runtime.
    pub fn spawn(dev: SimDevice, cfg: TxnConfig, clock: &VirtualClock) -> (VirtualTransport, mpsc::Receiver<Datagram>) {
        let (unsol_tx, unsol_rx) = mpsc::channel(crate::transport::io_thread::UNSOLICITED_CAPACITY);
        let local = dev.local_port();
        let state = State {
            dev,
            txns: Transactions::new(cfg),
            unsolicited: unsol_tx,
            diverted: Vec::new(),
            stats: TransportStats::default(),
            closed: false,
        };
        let shared = Arc::new(Shared { state: Mutex::new(state), clock: clock.clone(), local });
        let (alive, gone) = oneshot::channel();
        tokio::spawn(pump(shared.clone(), gone));
        (VirtualTransport { shared, _alive: Arc::new(alive) }, unsol_rx)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn submit(
        &self,
        dgram: Datagram,
        kind: RequestKind,
    ) -> impl std::future::Future<Output = Result<Datagram, TransportError>> + Send {
        let (tx, rx) = oneshot::channel();
        let submitted = {
            let mut st = self.lock();
            if st.closed {
                let _ = tx.send(Err(TransportError::Closed));
                Ok(())
            } else {
                st.txns.submit_with(tx, dgram, kind)
            }
        };
        self.shared.clock.wake.notify_waiters();
        async move {
            submitted.map_err(TransportError::from)?;
            rx.await.map_err(|_| TransportError::Closed)?
        }
    }
}

impl Transport for VirtualTransport {
    crate::transport::io_thread::submit_requests!();

    fn send(&self, dgram: Datagram) -> Result<(), TransportError> {
        let mut st = self.lock();
        st.txns.count_send(&dgram);
        let r = st
            .dev
            .send(&dgram)
            .map_err(|error| TransportError::Device { mad: Some(Box::new(MadSummary::of(&dgram))), error });
        drop(st);
        self.shared.clock.wake.notify_waiters();
        r
    }

    fn local_port(&self) -> LocalPort {
        self.shared.local.clone()
    }

    fn stats(&self) -> TransportStats {
        let st = self.lock();
        let mut s = st.stats.clone();
        s.txn = st.txns.stats();
        s
    }

    fn divert(&self, class: crate::mad::MgmtClass, sink: mpsc::Sender<crate::datagram::Arrived>) -> bool {
        let class = u8::from(class);
        let mut st = self.lock();
        st.diverted.retain(|(c, _)| *c != class);
        st.diverted.push((class, sink));
        true
    }
}

impl State {
    /// An unsolicited MAD to its class's own channel, if diverted (a
    /// closed one ends the diversion), or to the unsolicited channel.
    fn deliver_unsolicited(&mut self, d: Datagram) {
        let at = d.mad.get(1).and_then(|class| self.diverted.iter().position(|(c, _)| c == class));
        let d = match at {
            Some(at) => {
                match self.diverted[at].1.try_send(crate::datagram::Arrived { at: std::time::Instant::now(), dgram: d })
                {
                    Ok(()) => return,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        self.stats.unsolicited_dropped += 1;
                        return;
                    }
                    Err(mpsc::error::TrySendError::Closed(a)) => {
                        self.diverted.swap_remove(at);
                        a.dgram
                    }
                }
            }
            None => d,
        };
        if self.unsolicited.try_send(d).is_err() {
            self.stats.unsolicited_dropped += 1;
        }
    }
}

async fn pump(shared: Arc<Shared>, mut gone: oneshot::Receiver<()>) {
    let clock = &shared.clock;
    loop {
        let wake = clock.wake.notified();
        tokio::pin!(wake);
        wake.as_mut().enable();
        let (next, moved) = {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let now = clock.now();
            let mut moved = false;
            // Everything due reaches the mailboxes; ours is emptied.
            loop {
                match st.dev.recv(now) {
                    Ok(Some(d)) => {
                        moved = true;
                        match st.txns.handle_receive(now, d) {
                            Received::Response { token, dgram } => {
                                let _ = token.send(Ok(dgram));
                            }
                            Received::Failed { token, error } => {
                                let _ = token.send(Err(error.into()));
                            }
                            Received::Unsolicited(d) => st.deliver_unsolicited(d),
                            Received::Stray { .. } | Received::Segment { .. } | Received::Malformed(_) => {}
                        }
                    }
                    Ok(None) => break,
                    Err(_) => {
                        // The device is gone: every waiting request fails now.
                        st.stats.device_errors += 1;
                        st.closed = true;
                        for reply in st.txns.drain() {
                            let _ = reply.send(Err(TransportError::Closed));
                        }
                        return;
                    }
                }
            }
            for (reply, e) in st.txns.handle_timeout(now) {
                let _ = reply.send(Err(e.into()));
            }
            while let Some(d) = st.txns.poll_transmit(now) {
                moved = true;
                if st.dev.send(&d).is_err() {
                    st.stats.device_errors += 1;
                }
            }
            let fabric_next = clock.fabric.lock().unwrap_or_else(|e| e.into_inner()).next_event();
            let next = [st.txns.poll_timeout(), fabric_next].into_iter().flatten().min();
            (next, moved)
        };
        if moved {
            // Our sends and deliveries are others' news.
            clock.wake.notify_waiters();
        }
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(clock.instant(at)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => {}
            _ = &mut wake => {}
            _ = &mut gone => return,
        }
    }
}
