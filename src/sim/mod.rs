//! An in-process simulated InfiniBand fabric, for fast deterministic tests,
//! fault injection and fabrics far larger than ibsim holds.
//!
//! ```text
//!  Topology ──FabricBuilder──► Fabric (Arc<Mutex<_>> when shared)
//!                               ├─ nodes / ports / switches: flat arenas, typed indices
//!                               ├─ every node's SMA: Get/Set of the SM attributes, M_Key
//!                               ├─ directed-route (IBA 14.2.2) and LID routing, O(hops)
//!                               ├─ event queue in virtual time (hop latency + processing)
//!                               └─ fault rules + operator verbs (link down/up, hold, crash)
//!  SimDevice (MadDevice) ◄─────► one port of the fabric; recv() advances virtual time
//! ```
//!
//! A fresh fabric looks like a fresh ibsim one (same PortInfo, NodeInfo,
//! SwitchInfo and table contents, see `profile`), with cabled ports in
//! Init/LinkUp and the rest Down/Polling. Where ibsim departs from the IBA
//! the simulator follows the IBA: DrSLID/DrDLID LID-routed segments work,
//! M_Key is enforced, SMInfo and unknown attributes get an answer (0x000C)
//! instead of silence, the return path's entry 0 is left alone, and an LFT
//! lookup past LinearFDBTop drops the packet like a real switch.
//!
//! A switch's SMA is reached through any of its ports and answers for the
//! whole switch (port 0 holds its LID and M_Key); a CA's SMA answers on the
//! port the SMP came in on.

mod device;
mod drive;
mod engine;
mod fabric;
pub mod fault;
mod pma;
mod profile;
mod route;
mod sma;
mod virtual_transport;

pub use device::{NodeSel, SimDevice};
pub use drive::{drive_core, DriveError, Driven};
pub use fabric::{Fabric, FabricBuilder, SharedFabric};
pub use fault::{Action, Direction, Match, Rule, RuleHandle};
pub use pma::DEFAULT_PMA_CAPABILITY;
pub use virtual_transport::{VirtualClock, VirtualTransport};

use crate::topology::{NodeIdx, PortRef};
use crate::types::Lid;

/// Errors of building or driving a simulated fabric.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("topology link #{link}: end {end:?}: {reason}")]
    BadLink { link: usize, end: PortRef, reason: &'static str },
    #[error("the fabric would have {ports} ports, more than the simulator indexes")]
    TooLarge { ports: usize },
    #[error("no node named or numbered {0}")]
    NoSuchNode(String),
    #[error("node #{} has no port {port} here", node.0)]
    NoSuchPort { node: NodeIdx, port: u8 },
    #[error("port {0:?} has no cable")]
    NotCabled(PortRef),
    #[error("port {0:?} takes no cable (port 0, or the port the cable comes from)")]
    PortTaken(PortRef),
    #[error("no PerfMgt counter is named {0:?}")]
    NoSuchCounter(String),
}

/// Why the fabric lost a MAD (counted, see [`Fabric::dropped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Too short, wrong size for its class, bad header or hop count.
    BadMad,
    /// A directed-route hop pointer that does not fit the step (IBA 14.2.2).
    DrHopPointer,
    /// A CA or router in the middle of a directed route, or asked to
    /// LID-route the rest of one.
    DrEndNodeInPath,
    /// A directed-route hop names a port the node lacks (or, on a CA, a
    /// port other than the one it is on).
    DrBadPort,
    /// The link is down (or the node behind it crashed).
    LinkDown,
    /// A data-VL packet met a link that is not Active at both ends.
    NotActive,
    /// No LFT entry (0xFF or a port the switch lacks), or LID 0/permissive.
    Unrouted,
    /// The DLID is above the switch's LinearFDBTop.
    BeyondLinearFdbTop,
    /// The packet reached an end port (or switch port 0) not owning its DLID.
    NotForThisPort,
    /// Forwarded more than 64 times: an LFT loop.
    HopLimit,
    /// The destination node is crashed.
    NodeCrashed,
    /// No device is attached where the MAD arrived.
    NoListener,
    /// Failed the M_Key check (IBA 14.2.4).
    MKey,
    /// A fault rule dropped it.
    Rule,
}

/// Why [`Fabric::trace_lid_route`] could not deliver a LID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    #[error("node #{} is not a switch", .0.0)]
    NotASwitch(NodeIdx),
    #[error("switch #{} has no route to LID {lid} (LFT entry {port:#04x})", switch.0)]
    Unrouted { switch: NodeIdx, lid: Lid, port: u8 },
    #[error("LID {lid} is above LinearFDBTop {top} of switch #{}", switch.0)]
    BeyondTop { switch: NodeIdx, lid: Lid, top: u16 },
    #[error("LID {lid} loops back to switch #{} after {path:?}", switch.0)]
    Loop { switch: NodeIdx, lid: Lid, path: Vec<PortRef> },
    #[error("the link at {port:?} is down")]
    LinkDown { port: PortRef },
    #[error("port {port:?} is not Active")]
    NotActive { port: PortRef },
    #[error("LID {lid} was delivered to {port:?}, which does not own it")]
    WrongDestination { port: PortRef, lid: Lid },
    #[error("node #{} is crashed", .0.0)]
    NodeCrashed(NodeIdx),
}
