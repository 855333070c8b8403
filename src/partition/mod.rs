//! Partitions (IBA 10.9): which ports may talk, as the operator's
//! `partitions.conf` says (OpenSM's grammar, so operators keep their files).
//!
//! - [`conf`] reads the file into a [`conf::PartitionConf`], naming file,
//!   line and column on any error;
//! - [`policy`] resolves it against the ports a sweep found into a
//!   [`PartitionSet`]: the P_Keys every port should hold, and the
//!   multicast groups the partitions declare (IPoIB broadcast groups and
//!   `mgid=` lines);
//! - [`table`] plans one port's P_Key table: where each wanted P_Key goes,
//!   keeping the indexes the port's QPs use, and which blocks change.
//!
//! None of them does I/O but [`conf::PartitionConf::read`].

use std::collections::HashMap;

use crate::types::Guid;

pub mod conf;
pub mod policy;
pub mod table;

/// The low 15 bits of a P_Key: the partition (IBA 10.9.1).
pub const PARTITION_MASK: u16 = 0x7fff;
/// Bit 15 of a P_Key: full member (clear: limited member).
pub const FULL_MEMBER: u16 = 0x8000;
/// The default partition, 0x7fff; its full-member key is 0xffff.
pub const DEFAULT_PARTITION: u16 = 0x7fff;

/// Where switches enforce partitions (OpenSM's `part_enforce`): on the
/// switch ports facing end ports, inbound (PortInfo bit
/// PartitionEnforcementInbound), outbound, both, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PartEnforce {
    #[default]
    Both,
    In,
    Out,
    Off,
}

impl PartEnforce {
    pub fn inbound(self) -> bool {
        matches!(self, PartEnforce::Both | PartEnforce::In)
    }
    pub fn outbound(self) -> bool {
        matches!(self, PartEnforce::Both | PartEnforce::Out)
    }
}

impl std::str::FromStr for PartEnforce {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "both" => Ok(PartEnforce::Both),
            "in" => Ok(PartEnforce::In),
            "out" => Ok(PartEnforce::Out),
            "off" => Ok(PartEnforce::Off),
            other => Err(format!("part_enforce: '{other}' is none of both, in, out, off")),
        }
    }
}

/// One port's membership in one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Membership {
    Full,
    Limited,
    /// Both keys (OpenSM's `=both` with `allow_both_pkeys`).
    Both,
}

impl Membership {
    /// The P_Key values (bit 15 = full) this membership puts in a table.
    pub fn keys(self, partition: u16) -> impl Iterator<Item = u16> {
        let p = partition & PARTITION_MASK;
        let (full, limited) = match self {
            Membership::Full => (Some(p | FULL_MEMBER), None),
            Membership::Limited => (None, Some(p)),
            Membership::Both => (Some(p | FULL_MEMBER), Some(p)),
        };
        full.into_iter().chain(limited)
    }
    pub fn is_full(self) -> bool {
        matches!(self, Membership::Full | Membership::Both)
    }
}

/// What a port should hold: partitions (low 15 bits) and how it belongs to
/// each, plus the one pinned at index 0 (`indx0`), if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortPartitions {
    pub members: Vec<(u16, Membership)>,
    pub index0: Option<u16>,
}

impl PortPartitions {
    /// The P_Key values to program, in the order partitions were declared.
    pub fn pkeys(&self) -> Vec<u16> {
        self.members.iter().flat_map(|&(p, m)| m.keys(p)).collect()
    }
    pub fn membership(&self, partition: u16) -> Option<Membership> {
        let p = partition & PARTITION_MASK;
        self.members.iter().find(|&&(q, _)| q == p).map(|&(_, m)| m)
    }
}

/// Multicast group parameters a partition line declares (IBA 15.2.5.17
/// codes: MTU and rate are the IBTA enums, whatever the file spelled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupParams {
    pub mtu: u8,
    pub rate: u8,
    pub sl: u8,
    pub scope: u8,
    pub q_key: u32,
    pub tclass: u8,
    pub flow_label: u32,
}

impl Default for GroupParams {
    /// OpenSM's IPoIB broadcast group defaults: 2048-byte MTU (code 4),
    /// 10 Gb/s (code 3), SL 0, link-local scope (2), Q_Key 0x0b1b.
    fn default() -> Self {
        GroupParams { mtu: 4, rate: 3, sl: 0, scope: 2, q_key: 0x0b1b, tclass: 0, flow_label: 0 }
    }
}

/// A multicast group that exists because the partitions say so ("well
/// known"): it is never deleted when its last member leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WellKnownGroup {
    pub mgid: [u8; 16],
    /// The partition's full-member P_Key (bit 15 set).
    pub pkey: u16,
    pub params: GroupParams,
    /// The IPoIB broadcast group of its partition: other IPoIB groups of
    /// the partition must agree with it.
    pub ipoib_broadcast: bool,
}

/// One partition as resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub name: String,
    /// Low 15 bits.
    pub pkey: u16,
    pub ipoib: bool,
    pub params: GroupParams,
}

/// Every partition and every port's membership, as the policy resolved
/// them for one sweep's ports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionSet {
    pub partitions: Vec<Partition>,
    /// By port GUID (end ports and switch port 0).
    pub ports: HashMap<Guid, PortPartitions>,
    pub groups: Vec<WellKnownGroup>,
}

impl PartitionSet {
    /// The partition two ports share as members that may talk (IBA 10.9.3:
    /// not both limited), preferring `wanted` when given. `None`: they may
    /// not talk.
    pub fn shared(&self, a: Guid, b: Guid, wanted: Option<u16>) -> Option<u16> {
        let (pa, pb) = (self.ports.get(&a)?, self.ports.get(&b)?);
        let ok = |p: u16, ma: Membership, mb: Membership| (ma.is_full() || mb.is_full()).then_some(p);
        if let Some(w) = wanted {
            let p = w & PARTITION_MASK;
            return ok(p, pa.membership(p)?, pb.membership(p)?);
        }
        pa.members.iter().find_map(|&(p, ma)| ok(p, ma, pb.membership(p)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_keys() {
        assert_eq!(Membership::Full.keys(0x7fff).collect::<Vec<_>>(), vec![0xffff]);
        assert_eq!(Membership::Limited.keys(0x8010).collect::<Vec<_>>(), vec![0x0010]);
        assert_eq!(Membership::Both.keys(0x0010).collect::<Vec<_>>(), vec![0x8010, 0x0010]);
    }

    #[test]
    fn two_limited_members_share_nothing() {
        let mut set = PartitionSet::default();
        let port = |m: Vec<(u16, Membership)>| PortPartitions { members: m, index0: None };
        set.ports.insert(Guid(1), port(vec![(0x7fff, Membership::Limited), (0x10, Membership::Full)]));
        set.ports.insert(Guid(2), port(vec![(0x7fff, Membership::Limited), (0x10, Membership::Limited)]));
        set.ports.insert(Guid(3), port(vec![(0x7fff, Membership::Limited)]));
        assert_eq!(set.shared(Guid(1), Guid(2), None), Some(0x10));
        assert_eq!(set.shared(Guid(1), Guid(2), Some(0xffff)), None);
        assert_eq!(set.shared(Guid(2), Guid(3), None), None);
        assert_eq!(set.shared(Guid(1), Guid(9), None), None);
    }
}
