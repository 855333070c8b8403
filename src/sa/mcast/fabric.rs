//! The group manager's view of one snapshot ([`McFabric`]): ports by GUID
//! with their links' MTU and rate, and the partitions they belong to.

use super::{McFabric, PortCaps, MLID_SPACE};
use crate::partition::{Membership, DEFAULT_PARTITION, PARTITION_MASK};
use crate::sa::path::{rate, PathIndex};
use crate::subnet::snapshot::Snapshot;
use crate::types::Guid;

/// A snapshot and its port index, as the group manager asks.
pub(crate) struct SnapshotFabric<'a> {
    ports: &'a PathIndex,
    snap: &'a Snapshot,
}

impl<'a> SnapshotFabric<'a> {
    pub fn new(ports: &'a PathIndex, snap: &'a Snapshot) -> Self {
        SnapshotFabric { ports, snap }
    }
}

impl McFabric for SnapshotFabric<'_> {
    /// MTU and rate of the port's own link (the smaller of MTUCap and
    /// NeighborMTU; width times speed, a switch's read with port 0's
    /// capabilities), as OpenSM checks a joiner; a port whose PortInfo was
    /// not read counts as 256 bytes at 2.5 Gb/s, never more than certain.
    fn port(&self, guid: Guid) -> Option<PortCaps> {
        let p = self.ports.port_by_guid(guid)?;
        let node = self.snap.sweep.subnet.node(p.node);
        let info = |n: u8| node.ports.get(usize::from(n)).and_then(|s| s.info.as_ref());
        let (mtu, rate) = match info(p.port) {
            Some(pi) => {
                let caps = if node.is_switch() { info(0).unwrap_or(pi) } else { pi };
                (rate::port_mtu(pi), rate::port_rate(pi, caps))
            }
            None => (rate::MTU_MIN, rate::RATE_MIN),
        };
        Some(PortCaps { guid, node: node.guid(), gid_prefix: p.gid_prefix, mtu, rate })
    }

    /// As the snapshot's partitions say; without them every port is a
    /// full member of the default partition and of no other.
    fn membership(&self, port: Guid, pkey: u16) -> Option<Membership> {
        match self.snap.sweep.partitions.as_deref() {
            Some(set) => set.ports.get(&port)?.membership(pkey),
            None => (pkey & PARTITION_MASK == DEFAULT_PARTITION).then_some(Membership::Full),
        }
    }

    fn share_partition(&self, a: Guid, b: Guid) -> bool {
        match self.snap.sweep.partitions.as_deref() {
            Some(set) => set.shared(a, b, None).is_some(),
            None => true,
        }
    }
}

/// MLIDs every switch can forward: the smallest MulticastFDBCap of the
/// snapshot's switches (IBA 14.2.5.4), all of 0xC000..=0xFFFE without
/// switches.
pub(crate) fn mlid_count(snap: &Snapshot) -> u16 {
    let subnet = &snap.sweep.subnet;
    subnet
        .switches()
        .filter_map(|id| subnet.node(id).switch_info.as_ref().map(|si| si.multicast_fdb_cap))
        .min()
        .unwrap_or(MLID_SPACE)
        .min(MLID_SPACE)
}
