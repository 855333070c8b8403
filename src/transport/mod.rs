//! Moving MADs: the backends (libibumad, the in-process fabric) and the
//! transaction layer on top of them.
//!
//! ```text
//!   SM tasks (tokio) ──request()──► bounded channel ──► I/O thread
//!        ▲                                              │ Transactions (TIDs, window, retries)
//!        └──── oneshot reply / unsolicited channel ◄────┤ MadDevice::send / recv
//!                                                       ▼
//!                                      libibumad (real port, ibsim) | sim::Fabric
//! ```
//! A dedicated thread owns the device because libibumad's calls block and
//! ibsim's simulated descriptors are invisible to epoll.

use std::time::Duration;

use crate::types::{Guid, Lid};

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
        MadAddress {
            lid: Lid::PERMISSIVE,
            qpn: 0,
            qkey: 0,
            sl: 0,
            pkey_index: 0,
        }
    }
    /// A LID-routed SMP to QP0 of `lid`.
    pub fn smi(lid: Lid) -> Self {
        MadAddress {
            lid,
            qpn: 0,
            qkey: 0,
            sl: 0,
            pkey_index: 0,
        }
    }
    /// A GMP (SA, PerfMgt) to QP1 of `lid`.
    pub fn gsi(lid: Lid, sl: u8) -> Self {
        MadAddress {
            lid,
            qpn: 1,
            qkey: Self::QP1_QKEY,
            sl,
            pkey_index: 0,
        }
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
    NotInfiniBand {
        ca: String,
        port: u8,
        link_layer: String,
    },
    #[error("{call} failed on {ca}/{port}: {reason}")]
    Call {
        call: &'static str,
        ca: String,
        port: u8,
        reason: String,
    },
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
