//! The ports of one snapshot by LID and by GUID: who a requester is (its
//! LID names its port), which ports are in service (for traps 64/65), and
//! which ports are gone (their subscriptions, services and alias GUIDs go
//! with them).

use std::collections::{BTreeMap, HashMap};

use crate::mad::PortState;
use crate::subnet::NodeId;
use crate::subnet::SweepReport;
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

#[derive(Debug, Default)]
pub(crate) struct PortIndex {
    by_lid: HashMap<u16, Guid>,
    ports: BTreeMap<Guid, PortAt>,
}

impl PortIndex {
    pub fn build(report: &SweepReport) -> Self {
        let subnet = &report.subnet;
        let mut ix = PortIndex::default();
        for (id, port) in subnet.lid_ports() {
            let node = subnet.node(id);
            if node.quarantined.is_some() {
                continue;
            }
            let guid = node.port_guid(port);
            let Some(range) = report.lids.ranges.get(&guid) else { continue };
            let info = node.ports.get(port as usize).and_then(|p| p.info.as_ref());
            let gid_prefix = info.map(|i| i.gid_prefix).filter(|&p| p != 0).unwrap_or(DEFAULT_SUBNET_PREFIX);
            let active = node.is_switch() || info.is_some_and(|i| i.port_state == PortState::Active);
            let at = PortAt { guid, node: id, port, base_lid: range.base(), lmc: range.lmc(), gid_prefix, active };
            for lid in range.base().0..=range.base().0.saturating_add((1u16 << range.lmc()) - 1) {
                ix.by_lid.insert(lid, guid);
            }
            ix.ports.insert(guid, at);
        }
        ix
    }

    /// The port that holds `lid` (any LID of its LMC range).
    pub fn by_lid(&self, lid: Lid) -> Option<&PortAt> {
        self.ports.get(self.by_lid.get(&lid.0)?)
    }

    pub fn by_guid(&self, guid: Guid) -> Option<&PortAt> {
        self.ports.get(&guid)
    }

    pub fn contains(&self, guid: Guid) -> bool {
        self.ports.contains_key(&guid)
    }

    /// Every port, in GUID order.
    pub fn all(&self) -> impl Iterator<Item = &PortAt> + '_ {
        self.ports.values()
    }

    /// Ports in service, in GUID order.
    pub fn in_service(&self) -> impl Iterator<Item = &PortAt> + '_ {
        self.ports.values().filter(|p| p.active)
    }

    pub fn is_in_service(&self, guid: Guid) -> bool {
        self.ports.get(&guid).is_some_and(|p| p.active)
    }
}
