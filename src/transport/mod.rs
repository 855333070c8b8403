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

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::mad::{AttributeId, DrPath, MadHeader, Method, MgmtClass, SmpRepr, WireError, MAD_HEADER_LEN};
use crate::types::{Guid, Lid};

pub mod io_thread;
pub mod sa_client;
pub mod smp_client;
pub mod txn;
pub mod umad;

pub use io_thread::MadTransport;
pub use smp_client::{SmpClient, SmpError, SmpTarget};
pub use txn::{MadCounters, MadKey, Received, RequestKind, Transactions, TxnConfig, TxnError, TxnStats};

/// Where a MAD goes or came from: the fields of `ib_mad_addr` that an SM uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MadAddress {
    pub lid: Lid,
    pub qpn: u32,
    pub qkey: u32,
    pub sl: u8,
    pub pkey_index: u16,
}

impl MadAddress {
    /// QP1's well-known Q_Key (IBA 13.5.1).
    pub const QP1_QKEY: u32 = 0x8001_0000;

    /// Directed-route SMPs go to the permissive LID on QP0.
    pub fn smi_permissive() -> Self {
        MadAddress { lid: Lid::PERMISSIVE, qpn: 0, qkey: 0, sl: 0, pkey_index: 0 }
    }
    /// A LID-routed SMP to QP0 of `lid`.
    pub fn smi(lid: Lid) -> Self {
        MadAddress { lid, qpn: 0, qkey: 0, sl: 0, pkey_index: 0 }
    }
    /// A GMP (SA, PerfMgt) to QP1 of `lid`.
    pub fn gsi(lid: Lid, sl: u8) -> Self {
        MadAddress { lid, qpn: 1, qkey: Self::QP1_QKEY, sl, pkey_index: 0 }
    }
}

/// One MAD with its address. `mad` is 256 bytes except for reassembled
/// RMPP payloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub addr: MadAddress,
    pub mad: Vec<u8>,
}

/// What the SM needs to know about its own port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPort {
    pub ca_name: String,
    pub port_num: u8,
    pub port_guid: Guid,
    pub node_guid: Guid,
    pub lid: Lid,
    pub sm_lid: Lid,
}

/// Errors of a backend device.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("libibumad could not be loaded ({library}): {reason}; install rdma-core's libibumad3 or use --sim")]
    LibraryMissing { library: String, reason: String },
    #[error("no InfiniBand port found{hint}")]
    NoPort { hint: String },
    #[error("port {ca}/{port} has link layer {link_layer}: no subnet manager runs there (RoCE and iWARP have none)")]
    NotInfiniBand { ca: String, port: u8, link_layer: String },
    #[error("{call} failed on {ca}/{port}: {reason}")]
    Call { call: &'static str, ca: String, port: u8, reason: String },
    #[error("the device was closed")]
    Closed,
}

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
}

/// What a log line or an error needs to name one MAD: its code points, TID
/// and where it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadSummary {
    pub class: MgmtClass,
    pub method: Method,
    pub attribute: AttributeId,
    pub attribute_modifier: u32,
    /// The whole TID as it was sent or received.
    pub tid: u64,
    /// The destination LID (permissive for directed route).
    pub lid: Lid,
    /// The initial path of a directed-route SMP.
    pub path: Option<DrPath>,
}

impl MadSummary {
    /// Summarises a datagram; fields a short buffer lacks read as zero.
    pub fn of(d: &Datagram) -> Self {
        let mut head = [0u8; MAD_HEADER_LEN];
        let n = d.mad.len().min(MAD_HEADER_LEN);
        head[..n].copy_from_slice(&d.mad[..n]);
        let h = MadHeader::new_checked(&head[..]).expect("a full header buffer");
        let path = if h.mgmt_class() == MgmtClass::SubnMgmtDirected {
            SmpRepr::parse_bytes(&d.mad).ok().and_then(|r| r.path())
        } else {
            None
        };
        MadSummary {
            class: h.mgmt_class(),
            method: h.method(),
            attribute: h.attribute_id(),
            attribute_modifier: h.attribute_modifier(),
            tid: h.transaction_id(),
            lid: d.addr.lid,
            path,
        }
    }
}

impl fmt::Display for MadSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?} {:?}", self.class, self.method, self.attribute)?;
        if self.attribute_modifier != 0 {
            write!(f, " (modifier {:#x})", self.attribute_modifier)?;
        }
        match self.path {
            Some(p) => write!(f, " via DR path {p}")?,
            None => write!(f, " to LID {}", self.lid)?,
        }
        write!(f, ", TID {:#018x}", self.tid)
    }
}

/// Errors of the transport: a request's fate or the device's.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("{mad}: no response after {attempts} attempts")]
    Timeout { attempts: u32, mad: Box<MadSummary> },
    #[error("{}device error: {error}", .mad.as_ref().map(|m| format!("{m}: ")).unwrap_or_default())]
    Device { mad: Option<Box<MadSummary>>, error: DeviceError },
    #[error("the transport is closed (its I/O thread has ended)")]
    Closed,
    /// Every slot of the bounded command queue is taken (only `send` can
    /// see this; `request` waits for a slot instead).
    #[error("{mad}: the transport's queue is full")]
    Busy { mad: Box<MadSummary> },
    #[error("not a MAD: {0}")]
    Malformed(WireError),
    /// The response came as an RMPP transfer that failed.
    #[error("{mad}: RMPP transfer failed: {error}")]
    Rmpp { mad: Box<MadSummary>, error: crate::rmpp::RmppError },
    /// [`Transport::request_rmpp`] on a transport that cannot reassemble.
    #[error("{mad}: this transport does not reassemble RMPP answers")]
    RmppUnsupported { mad: Box<MadSummary> },
}

impl From<TxnError> for TransportError {
    fn from(e: TxnError) -> Self {
        match e {
            TxnError::Timeout { attempts, mad } => TransportError::Timeout { attempts, mad },
            TxnError::Malformed(w) => TransportError::Malformed(w),
            TxnError::Rmpp { mad, error } => TransportError::Rmpp { mad, error },
        }
    }
}

/// Counters of a transport: the transaction layer's and the I/O thread's.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransportStats {
    pub txn: TxnStats,
    /// Unsolicited MADs dropped because their channel was full or closed.
    pub unsolicited_dropped: u64,
    /// Failed device sends and receives.
    pub device_errors: u64,
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
}
