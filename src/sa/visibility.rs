//! Which records a requester may see: partitions (IBA 10.9) applied to SA
//! queries, as OpenSM applies them (`osm_physp_share_pkey` with the
//! requester's port in its NodeRecord, PortInfoRecord, SwitchInfoRecord,
//! LinkRecord, LinearForwardingTableRecord, MulticastForwardingTableRecord,
//! P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord,
//! SMInfoRecord and GUIDInfoRecord handlers).
//!
//! A record belongs to ports (`table::Owners`): the port it describes, a
//! switch's port 0 for what describes the switch, and for a switch's
//! external port the end port across its cable when there is one (the SM
//! gives that switch port the end port's keys to enforce, `program::pkeys`;
//! OpenSM checks the switch port's own table, which then holds the same
//! keys), else port 0. A LinkRecord belongs to both ends.
//!
//! An untrusted requester sees a record when it shares a partition with
//! every owner, one of the two a full member (IBA 10.9.3: two limited
//! members cannot talk); a port always sees its own. Where the partitions
//! come from: the snapshot's [`PartitionSet`] (what the SM programs) when it
//! has one, else the P_Key tables the sweep read (the path index's,
//! `path::PathIndex::pkeys`, so there is one copy of them).
//!
//! Where this differs from OpenSM: a trusted requester (SM_Key = the SA
//! key) sees every record (OpenSM filters it too); a requester whose LID
//! names no port sees none of these records (OpenSM drops its request);
//! a port in no partition sees only its own records (OpenSM's check
//! passes for any port whose table it holds empty).

use crate::partition::PartitionSet;
use crate::types::Guid;

use super::path::PathIndex;

/// Who asks, and by which partitions its view is cut.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Viewer<'a> {
    /// A trusted requester: every record.
    All,
    /// An untrusted requester at port `me`.
    Port { me: Guid, by: Partitions<'a> },
    /// An untrusted requester whose LID names no port of the snapshot.
    Nobody,
}

/// Where the partitions come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Partitions<'a> {
    Set(&'a PartitionSet),
    Tables(&'a PathIndex),
}

impl Partitions<'_> {
    /// Whether ports `a` and `b` may talk: a partition both are members
    /// of, one of them as a full member.
    pub fn share(self, a: Guid, b: Guid) -> bool {
        if a == b {
            return true;
        }
        match self {
            Partitions::Set(set) => set.shared(a, b, None).is_some(),
            Partitions::Tables(index) => match (index.end_by_guid(a), index.end_by_guid(b)) {
                (Some(x), Some(y)) => super::path::ends_share(index, x, y),
                _ => false,
            },
        }
    }
}

impl Viewer<'_> {
    /// Whether the requester may see a record of port `owner`.
    pub fn sees(&self, owner: Guid) -> bool {
        match *self {
            Viewer::All => true,
            Viewer::Port { me, by } => by.share(me, owner),
            Viewer::Nobody => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::{Membership, PortPartitions};

    #[test]
    fn a_partition_set_decides_who_sees_whom() {
        let mut set = PartitionSet::default();
        let port = |m: Vec<(u16, Membership)>| PortPartitions { members: m, index0: None };
        set.ports.insert(Guid(1), port(vec![(0x10, Membership::Full)]));
        set.ports.insert(Guid(2), port(vec![(0x20, Membership::Full)]));
        set.ports.insert(Guid(3), port(vec![(0x10, Membership::Limited), (0x20, Membership::Limited)]));
        set.ports.insert(Guid(4), port(vec![(0x10, Membership::Limited)]));
        let by = Partitions::Set(&set);
        let v = |me: u64| Viewer::Port { me: Guid(me), by };
        assert!(v(1).sees(Guid(1)) && !v(1).sees(Guid(2)), "isolated from each other");
        assert!(v(1).sees(Guid(3)) && v(2).sees(Guid(3)), "a limited member sees the full ones");
        assert!(!v(3).sees(Guid(4)), "two limited members do not");
        assert!(v(9).sees(Guid(9)) && !v(9).sees(Guid(1)), "a port in no partition sees itself only");
        assert!(Viewer::All.sees(Guid(2)));
        assert!(!Viewer::Nobody.sees(Guid(1)));
    }
}
