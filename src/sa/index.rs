//! A port as the SA's port table gives it, and GIDs. The table itself is
//! [`super::path::PathIndex`]'s end ports, built once per snapshot: by LID
//! and by GUID it says who a requester is (its LID names its port), which
//! ports are in service (for traps 64/65), and which ports are gone (their
//! subscriptions, services and alias GUIDs go with them).

use crate::subnet::NodeId;
use crate::types::{Guid, Lid};

/// The default subnet prefix (IBA 4.1.1), for ports whose PortInfo was
/// not read.
pub const DEFAULT_SUBNET_PREFIX: u64 = 0xfe80_0000_0000_0000;

/// One LID-bearing port (a CA or router port, or switch port 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PortAt {
    pub guid: Guid,
    pub node: NodeId,
    /// The CA port number, or 0 for a switch.
    pub port: u8,
    pub base_lid: Lid,
    pub lmc: u8,
    pub gid_prefix: u64,
    /// ACTIVE (a switch's port 0 counts as in service when the switch has
    /// a LID).
    pub active: bool,
}

impl PortAt {
    /// The port's GID: subnet prefix and port GUID (IBA 4.1.1).
    pub fn gid(&self) -> [u8; 16] {
        gid(self.gid_prefix, self.guid)
    }
}

pub(crate) fn gid(prefix: u64, guid: Guid) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&prefix.to_be_bytes());
    g[8..].copy_from_slice(&guid.0.to_be_bytes());
    g
}

/// The port GUID of a GID (its low 64 bits).
pub(crate) fn gid_guid(g: &[u8; 16]) -> Guid {
    let mut b = [0u8; 8];
    b.copy_from_slice(&g[8..]);
    Guid(u64::from_be_bytes(b))
}
