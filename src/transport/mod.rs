//! Moving MADs: the backends (libibumad, the in-process fabric) and the
//! transaction layer on top of them.
//!
//! ```text
//!   SM tasks (tokio) ──request()──► bounded channel ──► I/O thread
//!        ▲                                              │ Transactions (TIDs, a window per class, retries)
//!        └──── oneshot reply / unsolicited channel ◄────┤ MadDevice::send / recv
//!                                                       ▼
//!                                      libibumad (real port, ibsim) | sim::Fabric
//! ```
//! A dedicated thread owns the device because libibumad's calls block and
//! ibsim's simulated descriptors are invisible to epoll.

use std::future::Future;
use std::time::Duration;

pub mod io_thread;
pub mod sa_client;
pub mod smp_client;
pub mod umad;

// The values the transport moves and the fates of its requests live below
// it (`crate::datagram`, `crate::exchange`); its users find them here too.
pub use crate::datagram::{Arrived, Datagram, DeviceError, LocalPort, MadAddress, MadSummary};
pub use crate::exchange::txn::{
    self, MadCounters, MadKey, Received, RequestKind, Transactions, TxnConfig, TxnError, TxnStats,
};
pub use crate::exchange::{SmpError, SmpTarget, TransportError};
pub use io_thread::MadTransport;
pub use smp_client::SmpClient;

/// A backend that moves raw MADs on one port.
pub trait MadDevice: Send + 'static {
    /// Time on this device's clock: real for libibumad, virtual for the
    /// in-process fabric. Only differences matter.
    fn now(&self) -> Duration;
    fn send(&mut self, dgram: &Datagram) -> Result<(), DeviceError>;
    /// Waits until `deadline` on the device clock for one MAD; `None` when
    /// the deadline passed first. A virtual-time device advances its clock.
    fn recv(&mut self, deadline: Duration) -> Result<Option<Datagram>, DeviceError>;
    fn local_port(&self) -> LocalPort;
    /// A second handle that waits for and reads MADs on a thread of its
    /// own while this one sends, as OpenSM's umad receiver thread does: the
    /// I/O thread then sleeps until a MAD or a command arrives, with no
    /// polling. `None` where the device's clock is virtual (its `recv`
    /// moves time, so only the thread that keeps the transactions' time
    /// may wait on it). The device must outlive the receiver.
    fn receiver(&mut self) -> Option<Box<dyn DeviceReceiver>> {
        None
    }
    /// A second handle that sends on this port from any thread, so an
    /// answer (the SA's) goes out from the thread that made it instead of
    /// waking the I/O thread. `None` where sends must pass the device's own
    /// thread (a virtual-time device). The device must outlive it.
    fn sender(&mut self) -> Option<Box<dyn DeviceSender>> {
        None
    }
}

/// The writing half of a [`MadDevice`], for a task that sends its answers
/// from its own thread.
pub trait DeviceSender: Send + 'static {
    fn send(&mut self, d: &Datagram) -> Result<(), DeviceError>;
}

/// The reading half of a [`MadDevice`], for a receiver thread.
pub trait DeviceReceiver: Send + 'static {
    /// Waits up to `wait` of real time for one MAD; `None` if none came.
    fn recv(&mut self, wait: Duration) -> Result<Option<Datagram>, DeviceError>;
}

/// Requests of one class answered on the transport's receiver thread
/// itself, where the device allows it ([`Transport::serve_inline`]): the
/// SA's single-MAD queries then go from the read to the answer's write on
/// one thread, with no hand to another thread and back.
///
/// The receiver reads every MAD already waiting before it answers any, and
/// answers a few at a time between reads, so the server may order what it
/// took (by requester, for fairness) and a flood cannot hold back the
/// SMP responses the same thread reads.
pub trait InlineServer: Send + 'static {
    /// A well-formed request of the class, just read: taken, to be answered
    /// by [`Self::serve_one`] (or dropped and counted by the server), or
    /// given back for the class's channel ([`Transport::divert`]).
    fn take(&mut self, d: Datagram) -> Option<Datagram>;
    /// Whether a request taken waits for its answer.
    fn waiting(&self) -> bool;
    /// Answers one waiting request; what it sends goes to `send`.
    fn serve_one(&mut self, send: &mut dyn FnMut(Datagram));
}

/// Counters of a transport: the transaction layer's and the I/O thread's.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransportStats {
    pub txn: TxnStats,
    /// Unsolicited MADs dropped because their channel was full or closed.
    pub unsolicited_dropped: u64,
    /// Failed device sends and receives.
    pub device_errors: u64,
    /// Traps dropped by the per-source rate limit, by source LID, since
    /// the transport started (`crate::exchange::trap_gate`).
    pub traps_dropped: std::collections::BTreeMap<crate::types::Lid, u64>,
}

/// Request/response and one-way MAD transport, as the SM's tasks see it.
pub trait Transport: Send + Sync + 'static {
    /// Sends a request and waits for its response, retrying on timeout.
    /// The TID is assigned underneath; whatever the caller put there is lost.
    fn request(&self, dgram: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send;
    /// Like [`request`](Self::request), for a request whose answer may be
    /// an RMPP transfer (a SubnAdmGetTable): resolves to the whole
    /// reassembled MAD, the first segment's header followed by all the
    /// data, or to the transfer's error. The request's timeout and retries
    /// hold until the first segment arrives, the transfer's limits after.
    /// Transports without RMPP (test fakes) refuse it.
    fn request_rmpp(&self, dgram: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send {
        std::future::ready(Err(TransportError::RmppUnsupported { mad: Box::new(MadSummary::of(&dgram)) }))
    }
    /// Sends a MAD that expects no response (a GetResp, a TrapRepress).
    fn send(&self, dgram: Datagram) -> Result<(), TransportError>;
    fn local_port(&self) -> LocalPort;
    fn stats(&self) -> TransportStats;
    /// From now on hands every unsolicited MAD of management class `class`,
    /// stamped with the moment it is handed over,
    /// (responses included: an SA's ReportResps and the RMPP ACKs of its
    /// answers are its own) straight to `sink` instead of the unsolicited
    /// channel, so an agent that owns a class is not served through the
    /// owner task. A full sink drops the MAD, counted in
    /// `unsolicited_dropped`; a closed one ends the diversion. `false`
    /// where the transport cannot divert (test fakes): the caller keeps
    /// forwarding those MADs itself.
    fn divert(&self, class: crate::mad::MgmtClass, sink: tokio::sync::mpsc::Sender<Arrived>) -> bool {
        let _ = (class, sink);
        false
    }
    /// From now on offers every request of `class` to `server` on the
    /// receiver thread first (see [`InlineServer`]); what it gives back
    /// goes the way [`Self::divert`] set. `false` (and `server` dropped)
    /// where the device has no receiver thread and sender of its own (the
    /// in-process fabric, test fakes).
    fn serve_inline(&self, class: crate::mad::MgmtClass, server: Box<dyn InlineServer>) -> bool {
        let _ = (class, server);
        false
    }
}
