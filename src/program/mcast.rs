//! Multicast forwarding: the SA's groups, routed as one tree each over the
//! last sweep's topology (`ibsm_routing::mcast`) and written into the
//! switches' MulticastForwardingTables ([`super::mfts`]).
//!
//! The SA task publishes [`McastTable`] whenever membership changes; the
//! runtime then asks the SubnetManager for a multicast pass (no sweep), and
//! every heavy sweep routes all groups again over what it found.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::types::{Guid, Lid};

/// The multicast groups to route: for every MLID, the ports of its members
/// (every JoinState: a send-only member's packets enter the tree at its
/// port, so the tree must reach it too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McastTable {
    groups: BTreeMap<u16, Vec<Guid>>,
}

/// The SA's groups as they stand: the SA task sends, the SubnetManager
/// reads at programming time, the runtime wakes on a change.
pub type McastSource = tokio::sync::watch::Receiver<Arc<McastTable>>;

impl McastTable {
    /// Adds `port` to the group at `mlid` (a unicast LID is ignored).
    pub fn insert(&mut self, mlid: Lid, port: Guid) {
        if mlid.0 < Lid::MULTICAST_MIN.0 {
            return;
        }
        let members = self.groups.entry(mlid.0).or_default();
        if let Err(at) = members.binary_search(&port) {
            members.insert(at, port);
        }
    }

    /// Every group, by MLID, with its member ports (sorted).
    pub fn groups(&self) -> impl Iterator<Item = (Lid, &[Guid])> + '_ {
        self.groups.iter().map(|(&m, ports)| (Lid(m), ports.as_slice()))
    }

    pub fn members(&self, mlid: Lid) -> &[Guid] {
        self.groups.get(&mlid.0).map_or(&[], |v| v.as_slice())
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The MLIDs whose members differ between `self` and `newer`, groups
    /// that appeared or went away included.
    pub fn changed(&self, newer: &McastTable) -> Vec<Lid> {
        let mut out: Vec<Lid> = Vec::new();
        for (&m, ports) in &newer.groups {
            if self.groups.get(&m) != Some(ports) {
                out.push(Lid(m));
            }
        }
        for &m in self.groups.keys() {
            if !newer.groups.contains_key(&m) {
                out.push(Lid(m));
            }
        }
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_keeps_members_sorted_and_unique() {
        let mut t = McastTable::default();
        t.insert(Lid(0xC000), Guid(3));
        t.insert(Lid(0xC000), Guid(1));
        t.insert(Lid(0xC000), Guid(3));
        t.insert(Lid(0x0005), Guid(9));
        assert_eq!(t.members(Lid(0xC000)), &[Guid(1), Guid(3)]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn changed_names_new_gone_and_different_groups() {
        let mut old = McastTable::default();
        old.insert(Lid(0xC000), Guid(1));
        old.insert(Lid(0xC001), Guid(1));
        old.insert(Lid(0xC002), Guid(1));
        let mut new = old.clone();
        new.insert(Lid(0xC001), Guid(2));
        new.groups.remove(&0xC002);
        new.insert(Lid(0xC003), Guid(4));
        assert_eq!(old.changed(&new), vec![Lid(0xC001), Lid(0xC002), Lid(0xC003)]);
        assert!(old.changed(&old).is_empty());
    }
}
