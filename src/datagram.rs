//! What moves between a port and the SM, as plain values every layer
//! exchanges: a MAD with its address, the port it moves on, and what a
//! device can fail with. The transport (I/O), the in-process fabric and
//! the protocol cores all speak in these; none of them owns them.

use std::fmt;

use crate::mad::{AttributeId, DrPath, MadHeader, Method, MgmtClass, SmpRepr, MAD_HEADER_LEN};
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

/// A MAD as the transport hands it to the agent that owns its class
/// ([`crate::transport::Transport::divert`]), with when it did: the agent's
/// answer time counts from there, its queue included.
#[derive(Debug, Clone)]
pub struct Arrived {
    pub at: std::time::Instant,
    pub dgram: Datagram,
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

#[cfg(test)]
impl LocalPort {
    /// Port 1 of GUID 1 at `lid`, with `sm_lid` as its SM: what test
    /// transports say of their port.
    pub(crate) fn fake(lid: u16, sm_lid: u16) -> Self {
        LocalPort {
            ca_name: "fake".into(),
            port_num: 1,
            port_guid: crate::types::Guid(1),
            node_guid: crate::types::Guid(1),
            lid: crate::types::Lid(lid),
            sm_lid: crate::types::Lid(sm_lid),
        }
    }
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
