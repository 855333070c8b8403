//! Multicast groups (IBA 15.2.5.17 MCMemberRecord and its o15-0.1.x and
//! o15-0.2.x rules): joins (SubnAdmSet), leaves (SubnAdmDelete),
//! the groups' MLIDs, and who the SM must route each MLID to. I/O-free:
//! the SA agent hands in requests and a view of the fabric
//! ([`McFabric`]), and reads back records, [`McEvent`]s (traps 66/67)
//! and the [`membership`](McGroups::membership) to route.
//!
//! # Joining (SubnAdmSet)
//! - MGID, PortGID and JoinState must be in the component mask, else
//!   ERR_REQ_INSUFFICIENT_COMPONENTS (IBA 15.2.5.17; OpenSM's
//!   `JOIN_MC_COMP_MASK`). JoinState 0 is ERR_REQ_INVALID (o15-0.2.4).
//! - The PortGID names a port of the fabric by its GUID, with that port's
//!   subnet prefix (or the link-local one): an unknown port is
//!   ERR_REQ_INVALID, a wrong prefix ERR_REQ_INVALID_GID (as OpenSM).
//! - A requester may join for another port (a proxy join) when it is
//!   trusted (SM_Key), or when that port is on its own node and the two
//!   share a partition; otherwise ERR_REQ_DENIED. OpenSM lets any port
//!   that shares a partition join for any other; this is stricter.
//! - A new group (no group with the MGID, or MGID 0: the SA picks one,
//!   [`mgid::sa_assigned`] with a counter that skips MGIDs in use) needs
//!   a FullMember or SendOnlyFullMember JoinState (o15-0.1.9; SendOnly
//!   FullMember since IBA 1.3, as OpenSM) and Q_Key, TClass, P_Key,
//!   FlowLabel and SL in the mask (o15-0.2.3, OpenSM's
//!   `REQUIRED_MC_CREATE_COMP_MASK`), else ERR_REQ_INVALID /
//!   ERR_REQ_INSUFFICIENT_COMPONENTS. A requested MGID must be a valid one
//!   (o15-0.1.5, [`mgid::requestable`]). MTU and Rate come from the
//!   selectors against the joining port's link (its MTUCap and
//!   NeighborMTU, its active width and speed): 0 greater than (the port's
//!   value, when greater), 1 less than (the port's, or the largest value
//!   below the bound), 2 exactly (the value, when the port carries it),
//!   3 or absent: the port's. A value masked without its selector is
//!   "exactly", a selector without its value is ignored (as PathRecords
//!   read them). PacketLifeTime is the one asked exactly, else the SA's
//!   subnet timeout; HopLimit the one asked, else 0 for link-local scope
//!   and 0xFF beyond (as OpenSM's partition groups). Scope is the MGID's.
//! - An existing group must agree with every masked parameter: Q_Key,
//!   TClass, SL, FlowLabel, HopLimit, MLID (when non-zero) and Scope
//!   equal, P_Key of the same partition and not both limited (o15-0.2.4,
//!   OpenSM's `validate_other_comp_fields`), selectors satisfied by the
//!   group's MTU, Rate and PacketLifeTime; else ERR_REQ_INVALID.
//! - Every joiner must be a member of the group's partition
//!   ([`McFabric::membership`]) and its link must carry the group's MTU
//!   and Rate (OpenSM's `validate_port_caps`), else ERR_REQ_INVALID.
//! - Re-joining ORs the new JoinState bits into the member's (o15-0.1.11);
//!   a member joined by a proxy is marked ProxyJoin. Another requester
//!   may change a member only as o15-0.2.1 says: not one that joined
//!   itself (ProxyJoin 0) unless trusted.
//! - IPoIB groups (RFC 4391: signature 0x401B for IPv4, 0x601B for IPv6)
//!   other than a broadcast group are created only when their partition's
//!   broadcast group `ff1s:401b:<P_Key>::ffff:ffff` exists, and take its
//!   parameters: the masked Q_Key, P_Key, TClass, SL, FlowLabel and
//!   HopLimit must equal the broadcast group's, and MTU, Rate and
//!   PacketLifeTime are the broadcast group's (a selector they fail is
//!   refused). That is what the kernel's IPoIB sends (it copies the
//!   broadcast group's record), and a group that disagreed would break
//!   the interface (OpenSM's `ipoib_mcgroup_creation_validation`).
//!
//! # Leaving (SubnAdmDelete) and how long a group lives
//! A leave names MGID, PortGID and JoinState (ERR_REQ_INSUFFICIENT_
//! COMPONENTS otherwise); the group must exist and hold the port, and
//! the bits must be some of the member's (o15-0.1.14), else
//! ERR_REQ_INVALID. The bits are cleared; a member with none left is
//! removed.
//!
//! A group lives while it has a member with FullMember or
//! SendOnlyFullMember set (a "keeper"). When its last keeper goes — by a
//! leave, by leaving the fabric, or by leaving the partition — the group
//! is deleted with its remaining NonMember and SendOnlyNonMember members
//! and its MLID is free at once, unless it is well known. Joins and
//! leaves count the same two bits, so no sequence leaves a group without
//! keepers behind (OpenSM's leave path tests only FullMember while joins
//! count SendOnlyFullMember too, and a send-only-full join followed by a
//! partial leave leaks the MLID: its open PR #43).
//!
//! Trap 66 (IBA 14.2.5.1 "multicast group created") is reported when a
//! group gets its first keeper, trap 67 ("deleted") when it loses its
//! last: for an ordinary group that is its creation and its deletion; a
//! well-known group exists all along and the two traps tell when it
//! becomes used and unused (OpenSM: first full member in, last out).
//!
//! # Well-known groups
//! The partitions' groups ([`WellKnownGroup`]: IPoIB broadcast groups and
//! `mgid=` lines) exist from the snapshot that declares them, with the
//! partition's parameters, and take MLIDs before any join. Leaves never
//! delete them; [`McGroups::sync`] updates them when the partitions
//! change and turns the ones no longer declared into ordinary groups
//! (deleted at once when they have no keeper).
//!
//! # Bounds
//! Groups in all, members of one group, groups one port is a member of
//! (a join flood from one port fills only its share), memberships in all:
//! past any, ERR_NO_RESOURCES. MLIDs are 0xC000 up to the smallest
//! switch's MulticastFDBCap ([`McLimits::mlids`]): the requested MLID
//! when given and free, else the lowest free one (O(groups) to find).
//!
//! # What the SM routes
//! [`McGroups::membership`] gives every MLID's members split into
//! receivers (FullMember, NonMember) and send-only members; both must be
//! reached by the group's tree (a send-only member's packets enter the
//! fabric at its switch, which must be on the tree), but only receivers'
//! ports need the MLID in their switch port's mask.
//! [`McGroups::mcast_table`] gives all members per MLID in the form the
//! SM's multicast pass reads, and [`McGroups::version`] counts changes.
//!
//! # Takeover
//! [`McGroups::import`] adds a previous master's members, mirrored by a
//! standby, keeping the groups' MLIDs (see `import.rs`).

mod agent;
mod error;
mod fabric;
mod import;
pub mod mgid;

#[cfg(test)]
mod agent_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::mad::sa::mc_member_record::scope as mc_scope;
use crate::mad::sa::{join_state as js, mc_member_mask as m, McMemberRecordRepr};
use crate::partition::{Membership, WellKnownGroup, FULL_MEMBER, PARTITION_MASK};
use crate::program::mcast::McastTable;
use crate::sa::path::rate;
use crate::types::{Guid, Lid};

pub use error::{Cap, McError};
pub(crate) use fabric::SnapshotFabric;
pub use import::McImport;
pub use mgid::{broadcast_of, ipoib_broadcast, is_ipoib, is_ipoib_broadcast};

/// The first multicast LID (IBA 4.1.2).
pub const MLID_BASE: u16 = 0xC000;
/// The last one (0xFFFF is the permissive LID).
pub const MLID_LAST: u16 = 0xFFFE;
/// How many MLIDs there are.
pub const MLID_SPACE: u16 = MLID_LAST - MLID_BASE + 1;

/// The components a join or a leave must name.
pub const JOIN_MASK: u64 = m::MGID | m::PORT_GID | m::JOIN_STATE;
/// What a join that creates a group must name besides (o15-0.2.3).
pub const CREATE_MASK: u64 = m::Q_KEY | m::TCLASS | m::PKEY | m::FLOW_LABEL | m::SL;

/// The JoinState bits that keep a group alive.
const KEEPS: u8 = js::FULL | js::SEND_ONLY_FULL;
/// The JoinState bits of members that receive the group's packets.
const RECEIVES: u8 = js::FULL | js::NON_MEMBER;
/// The selector "exactly" (IBA 15.2.5.16), what stored records carry.
const EXACTLY: u8 = 2;

/// What the group manager needs to know of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortCaps {
    pub guid: Guid,
    /// Its node's GUID (a proxy join between ports of one node is allowed).
    pub node: Guid,
    pub gid_prefix: u64,
    /// The MTU code and the rate code its link carries.
    pub mtu: u8,
    pub rate: u8,
}

/// The fabric as the group manager sees it (the last snapshot).
pub trait McFabric {
    /// The LID-bearing port with this GUID, if it is in the fabric.
    fn port(&self, guid: Guid) -> Option<PortCaps>;
    /// How `port` belongs to the partition of `pkey` (its low 15 bits).
    fn membership(&self, port: Guid, pkey: u16) -> Option<Membership>;
    /// Whether two ports share a partition they may talk in.
    fn share_partition(&self, a: Guid, b: Guid) -> bool;
}

/// Who sends a join or a leave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requester {
    pub port: PortCaps,
    /// Its SM_Key was the SA key.
    pub trusted: bool,
}

/// The group manager's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McLimits {
    pub max_groups: usize,
    pub max_members_per_group: usize,
    pub max_groups_per_port: usize,
    pub max_members: usize,
    /// MLIDs usable from 0xC000 (at most [`MLID_SPACE`]).
    pub mlids: u16,
    /// PacketLifeTime of groups that did not ask for one, and of
    /// well-known groups (the SA's subnet timeout, as OpenSM).
    pub packet_life_time: u8,
    /// IPv6 Solicited-Node groups of one scope and partition share one
    /// MLID (`[sa] consolidate_ipv6_snm_req`).
    pub consolidate_ipv6_snm: bool,
}

impl McLimits {
    pub fn from_config(cfg: &crate::sa::SaConfig, mlids: u16) -> Self {
        McLimits {
            max_groups: cfg.max_mcast_groups,
            max_members_per_group: cfg.max_mcast_members_per_group,
            max_groups_per_port: cfg.max_mcast_groups_per_port,
            max_members: cfg.max_mcast_members,
            mlids: mlids.min(MLID_SPACE),
            packet_life_time: cfg.subnet_timeout & 0x3F,
            consolidate_ipv6_snm: cfg.consolidate_ipv6_snm_req,
        }
    }
}

/// Traps 66 and 67 to report (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McEvent {
    /// Trap 66: the group got its first keeper.
    Created { mgid: [u8; 16], pkey: u16 },
    /// Trap 67: it lost its last.
    Deleted { mgid: [u8; 16], pkey: u16 },
}

/// Members per JoinState bit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JoinCounts {
    pub full: u32,
    pub non_member: u32,
    pub send_only_non_member: u32,
    pub send_only_full: u32,
}

impl JoinCounts {
    fn add(&mut self, bits: u8) {
        self.full += u32::from(bits & js::FULL != 0);
        self.non_member += u32::from(bits & js::NON_MEMBER != 0);
        self.send_only_non_member += u32::from(bits & js::SEND_ONLY_NON_MEMBER != 0);
        self.send_only_full += u32::from(bits & js::SEND_ONLY_FULL != 0);
    }
    fn sub(&mut self, bits: u8) {
        self.full -= u32::from(bits & js::FULL != 0);
        self.non_member -= u32::from(bits & js::NON_MEMBER != 0);
        self.send_only_non_member -= u32::from(bits & js::SEND_ONLY_NON_MEMBER != 0);
        self.send_only_full -= u32::from(bits & js::SEND_ONLY_FULL != 0);
    }
}

/// One member of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// The PortGID it joined with.
    pub gid: [u8; 16],
    pub join_state: u8,
    pub proxy: bool,
}

/// One group.
#[derive(Debug, Clone)]
pub struct Group {
    /// The group's parameters as an MCMemberRecord: PortGID zero,
    /// JoinState 0, selectors "exactly".
    rec: McMemberRecordRepr,
    well_known: bool,
    members: BTreeMap<Guid, Member>,
    counts: JoinCounts,
    /// Members with FullMember or SendOnlyFullMember.
    keepers: u32,
}

impl Group {
    fn new(rec: McMemberRecordRepr, well_known: bool) -> Self {
        Group { rec, well_known, members: BTreeMap::new(), counts: JoinCounts::default(), keepers: 0 }
    }
    pub fn record(&self) -> &McMemberRecordRepr {
        &self.rec
    }
    pub fn mgid(&self) -> [u8; 16] {
        self.rec.mgid
    }
    pub fn mlid(&self) -> u16 {
        self.rec.mlid
    }
    pub fn pkey(&self) -> u16 {
        self.rec.pkey
    }
    pub fn well_known(&self) -> bool {
        self.well_known
    }
    pub fn counts(&self) -> JoinCounts {
        self.counts
    }
    pub fn keepers(&self) -> u32 {
        self.keepers
    }
    pub fn members(&self) -> impl Iterator<Item = (Guid, &Member)> + '_ {
        self.members.iter().map(|(&g, m)| (g, m))
    }
    pub fn member(&self, port: Guid) -> Option<&Member> {
        self.members.get(&port)
    }
    /// The record of one member: the group's with its PortGID, JoinState
    /// and ProxyJoin.
    pub fn member_record(&self, m: &Member) -> McMemberRecordRepr {
        McMemberRecordRepr { port_gid: m.gid, join_state: m.join_state, proxy_join: m.proxy, ..self.rec }
    }
    /// The record of the group itself: JoinState every kind it has
    /// members of, no PortGID.
    pub fn group_record(&self) -> McMemberRecordRepr {
        let state = self.members.values().fold(0, |s, m| s | m.join_state);
        McMemberRecordRepr { join_state: state, ..self.rec }
    }

    /// The masked parameters a join must agree on (see the module docs);
    /// `identity` adds MLID and Scope (not compared when an IPoIB group
    /// is checked against its broadcast group).
    fn check_params(&self, q: &McMemberRecordRepr, mask: u64, identity: bool) -> Result<(), McError> {
        let g = &self.rec;
        let has = |bit: u64| mask & bit != 0;
        let differ = |field: &'static str, asked: u32, group: u32| Err(McError::Mismatch { field, asked, group });
        if has(m::Q_KEY) && q.q_key != g.q_key {
            return differ("Q_Key", q.q_key, g.q_key);
        }
        if has(m::PKEY) {
            let both_limited = q.pkey & FULL_MEMBER == 0 && g.pkey & FULL_MEMBER == 0;
            if q.pkey & PARTITION_MASK != g.pkey & PARTITION_MASK || both_limited {
                return differ("P_Key", q.pkey.into(), g.pkey.into());
            }
        }
        if has(m::TCLASS) && q.tclass != g.tclass {
            return differ("TClass", q.tclass.into(), g.tclass.into());
        }
        if has(m::SL) && q.sl & 0xF != g.sl {
            return differ("SL", q.sl.into(), g.sl.into());
        }
        if has(m::FLOW_LABEL) && q.flow_label & 0xF_FFFF != g.flow_label {
            return differ("FlowLabel", q.flow_label, g.flow_label);
        }
        if has(m::HOP_LIMIT) && q.hop_limit != g.hop_limit {
            return differ("HopLimit", q.hop_limit.into(), g.hop_limit.into());
        }
        if identity && has(m::MLID) && q.mlid != 0 && q.mlid != g.mlid {
            return differ("MLID", q.mlid.into(), g.mlid.into());
        }
        if identity && has(m::SCOPE) && q.scope & 0xF != g.scope {
            return differ("Scope", q.scope.into(), g.scope.into());
        }
        Ok(())
    }
}

/// A selector and its value, as masked (None: not asked).
fn bound(mask: u64, sel_bit: u64, val_bit: u64, sel: u8, val: u8) -> Option<(u8, u8)> {
    (mask & val_bit != 0).then_some((if mask & sel_bit != 0 { sel & 3 } else { EXACTLY }, val & 0x3F))
}

fn mtu_bound(q: &McMemberRecordRepr, mask: u64) -> Option<(u8, u8)> {
    bound(mask, m::MTU_SELECTOR, m::MTU, q.mtu_selector, q.mtu)
}
fn rate_bound(q: &McMemberRecordRepr, mask: u64) -> Option<(u8, u8)> {
    bound(mask, m::RATE_SELECTOR, m::RATE, q.rate_selector, q.rate)
}
fn life_bound(q: &McMemberRecordRepr, mask: u64) -> Option<(u8, u8)> {
    bound(mask, m::PACKET_LIFE_TIME_SELECTOR, m::PACKET_LIFE_TIME, q.packet_life_time_selector, q.packet_life_time)
}

/// Whether `have` meets a selector (IBA 15.2.5.17 reads them as
/// PathRecord does: 0 greater than, 1 less than, 2 exactly, 3 largest
/// available), ordered by `gt`.
fn meets(b: (u8, u8), have: u8, gt: impl Fn(u8, u8) -> bool) -> bool {
    let (sel, v) = b;
    match sel {
        0 => gt(have, v),
        1 => gt(v, have),
        2 => have == v,
        _ => true,
    }
}

fn mtu_gt(a: u8, b: u8) -> bool {
    a > b
}
fn rate_gt(a: u8, b: u8) -> bool {
    rate::cmp_rates(a, b).is_gt()
}

/// Whether group record `g` meets the MTU, Rate and PacketLifeTime
/// selectors of query `q` (for queries and joins alike).
pub(crate) fn selectors_admit(g: &McMemberRecordRepr, q: &McMemberRecordRepr, mask: u64) -> Result<(), McError> {
    let check = |field: &'static str, b: Option<(u8, u8)>, have: u8, gt: fn(u8, u8) -> bool| match b {
        Some(b) if !meets(b, have, gt) => Err(McError::Unrealizable { field, selector: b.0, asked: b.1, have }),
        _ => Ok(()),
    };
    check("MTU", mtu_bound(q, mask), g.mtu, mtu_gt)?;
    check("Rate", rate_bound(q, mask), g.rate, rate_gt)?;
    check("PacketLifeTime", life_bound(q, mask), g.packet_life_time, mtu_gt)
}

/// The value a new group gets from a selector and the port's value
/// `port` (see the module docs), None when the port cannot meet it.
fn create_value(b: Option<(u8, u8)>, port: u8, gt: fn(u8, u8) -> bool, below: impl Fn(u8) -> Option<u8>) -> Option<u8> {
    match b {
        None | Some((3, _)) => Some(port),
        Some((0, v)) => gt(port, v).then_some(port),
        Some((1, v)) if gt(v, port) => Some(port),
        Some((1, v)) => below(v),
        Some((_, v)) => (!gt(v, port)).then_some(v),
    }
}

/// The multicast groups and their members; see the module docs.
#[derive(Debug, Default)]
pub struct McGroups {
    groups: BTreeMap<[u8; 16], Group>,
    /// The groups on each MLID: one, or with `consolidate_ipv6_snm` the
    /// Solicited-Node groups of one scope and partition.
    by_mlid: BTreeMap<u16, Vec<[u8; 16]>>,
    /// Groups each port is a member of.
    per_port: HashMap<Guid, usize>,
    members: usize,
    events: Vec<McEvent>,
    version: u64,
    /// Groups changed since [`McGroups::take_touched`] last looked.
    touched: Touched,
    next_mgid: u32,
}

/// What changed: whole groups (created, deleted, moved, their
/// parameters), single memberships, or everything.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Touched {
    pub all: bool,
    pub groups: std::collections::HashSet<[u8; 16]>,
    pub members: std::collections::HashSet<([u8; 16], Guid)>,
}

impl McGroups {
    pub fn new() -> Self {
        Self::default()
    }

    /// Groups alive.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Memberships of all groups.
    pub fn member_count(&self) -> usize {
        self.members
    }

    /// Bumped by every change of the groups or their members.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The groups changed (created, deleted, joined, left, moved) since the
    /// last call: what the state stream compares again, group by group.
    pub fn take_touched(&mut self) -> Touched {
        std::mem::take(&mut self.touched)
    }

    pub fn group(&self, mgid: &[u8; 16]) -> Option<&Group> {
        self.groups.get(mgid)
    }

    /// The (first) group on `mlid`.
    pub fn by_mlid(&self, mlid: u16) -> Option<&Group> {
        self.groups.get(self.by_mlid.get(&mlid)?.first()?)
    }

    /// Every group, in MGID order.
    pub fn groups(&self) -> impl Iterator<Item = &Group> + '_ {
        self.groups.values()
    }

    /// Groups `port` is a member of.
    pub fn groups_of(&self, port: Guid) -> usize {
        self.per_port.get(&port).copied().unwrap_or(0)
    }

    /// The traps to report since the last call, in order.
    pub fn take_events(&mut self) -> Vec<McEvent> {
        std::mem::take(&mut self.events)
    }

    /// Every MLID with its receivers and send-only members (see the module
    /// docs), in MLID order; well-known groups without members included.
    pub fn membership(&self) -> Vec<MlidMembers> {
        self.by_mlid
            .iter()
            .filter_map(|(&mlid, mgids)| {
                let first = *mgids.first()?;
                let (mut receivers, mut send_only) = (BTreeSet::new(), BTreeSet::new());
                for g in mgids.iter().filter_map(|m| self.groups.get(m)) {
                    for (&port, m) in &g.members {
                        if m.join_state & RECEIVES != 0 {
                            receivers.insert(port);
                        } else {
                            send_only.insert(port);
                        }
                    }
                }
                // A port that receives on one group of a shared MLID receives.
                let send_only = send_only.difference(&receivers).copied().collect();
                Some(MlidMembers {
                    mlid: Lid(mlid),
                    mgid: first,
                    receivers: receivers.into_iter().collect(),
                    send_only,
                })
            })
            .collect()
    }

    /// Every MLID's members of every JoinState, for the SM's multicast
    /// pass (groups without members have nothing to route and are left
    /// out).
    pub fn mcast_table(&self) -> McastTable {
        let mut t = McastTable::default();
        for g in self.groups.values() {
            for &port in g.members.keys() {
                t.insert(Lid(g.rec.mlid), port);
            }
        }
        t
    }

    // ---- Join.

    /// SubnAdmSet(MCMemberRecord): joins `rec`'s port to its group,
    /// creating the group when there is none; returns the member's record
    /// as the SA now holds it (the answer).
    pub fn join(
        &mut self,
        rec: &McMemberRecordRepr,
        mask: u64,
        who: &Requester,
        fabric: &dyn McFabric,
        limits: &McLimits,
    ) -> Result<McMemberRecordRepr, McError> {
        require(mask, JOIN_MASK)?;
        let bits = rec.join_state & js::ALL;
        if bits == 0 {
            return Err(McError::JoinStateZero);
        }
        check_codes(rec, mask)?;
        let port = joining_port(rec, fabric)?;
        check_proxy(who, &port, fabric)?;
        if mask & m::PKEY != 0 && rec.pkey & PARTITION_MASK == 0 {
            return Err(McError::BadPKey(rec.pkey));
        }
        let proxy = who.port.guid != port.guid;
        let mgid = match self.groups.get(&rec.mgid).filter(|_| rec.mgid != [0; 16]) {
            Some(g) => {
                g.check_params(rec, mask, true)?;
                admit(g, rec, mask, &port, who, fabric)?;
                if !g.members.contains_key(&port.guid) {
                    self.room_for_member(g, port.guid, limits)?;
                }
                rec.mgid
            }
            None => {
                let mut g = self.new_group(rec, mask, bits, &port, limits)?;
                admit(&g, rec, mask, &port, who, fabric)?;
                if self.groups.len() >= limits.max_groups {
                    return Err(McError::Full(Cap::Groups));
                }
                self.room_for_member(&g, port.guid, limits)?;
                let requested = (mask & m::MLID != 0).then_some(rec.mlid);
                g.rec.mlid = match self.snm_sibling(&g.rec.mgid, limits) {
                    Some(shared) => shared,
                    None => self.free_mlid(requested, limits.mlids).ok_or(McError::Full(Cap::Mlids))?,
                };
                let mgid = g.rec.mgid;
                self.insert_group(g);
                mgid
            }
        };
        let member = self.add_bits(&mgid, port.guid, rec.port_gid, bits, proxy);
        Ok(member)
    }

    /// The group a creating join describes (not inserted, no MLID yet).
    fn new_group(
        &mut self,
        rec: &McMemberRecordRepr,
        mask: u64,
        bits: u8,
        port: &PortCaps,
        limits: &McLimits,
    ) -> Result<Group, McError> {
        if bits & KEEPS == 0 {
            return Err(McError::CreateNeedsFullMember { join_state: bits });
        }
        require(mask, CREATE_MASK)?;
        let mgid = if rec.mgid == [0; 16] {
            let scope = if mask & m::SCOPE != 0 { rec.scope & 0xF } else { mc_scope::LINK_LOCAL };
            self.pick_mgid(scope, port.gid_prefix)
        } else {
            if !mgid::requestable(&rec.mgid) {
                return Err(McError::BadMgid(rec.mgid));
            }
            let scope = mgid::scope(&rec.mgid);
            if mask & m::SCOPE != 0 && rec.scope & 0xF != scope {
                return Err(McError::Mismatch { field: "Scope", asked: rec.scope.into(), group: scope.into() });
            }
            rec.mgid
        };
        let scope = mgid::scope(&mgid);
        if let Some(b) = mgid::broadcast_of(&mgid).filter(|b| *b != mgid) {
            // An IPoIB group: its broadcast group's parameters.
            let bcast = self.groups.get(&b).ok_or(McError::NoBroadcastGroup(b))?;
            bcast.check_params(rec, mask, false)?;
            let rec = McMemberRecordRepr { mgid, mlid: 0, scope, ..bcast.rec };
            return Ok(Group::new(rec, false));
        }
        let unrealizable = |field, b: Option<(u8, u8)>, have| {
            let (selector, asked) = b.unwrap_or((3, 0));
            McError::Unrealizable { field, selector, asked, have }
        };
        let mb = mtu_bound(rec, mask);
        let mtu = create_value(mb, port.mtu, mtu_gt, |v| (v > rate::MTU_MIN).then(|| v - 1))
            .filter(|&v| rate::is_mtu(v))
            .ok_or_else(|| unrealizable("MTU", mb, port.mtu))?;
        let rb = rate_bound(rec, mask);
        let rate = create_value(rb, port.rate, rate_gt, rate::rate_below)
            .filter(|&v| rate::is_rate(v))
            .ok_or_else(|| unrealizable("Rate", rb, port.rate))?;
        let packet_life_time = match life_bound(rec, mask) {
            Some((EXACTLY, v)) => v,
            _ => limits.packet_life_time,
        };
        let hop_limit = if mask & m::HOP_LIMIT != 0 {
            rec.hop_limit
        } else if scope == mc_scope::LINK_LOCAL {
            0
        } else {
            0xFF
        };
        let rec = McMemberRecordRepr {
            mgid,
            port_gid: [0; 16],
            q_key: rec.q_key,
            mlid: 0,
            mtu_selector: EXACTLY,
            mtu,
            tclass: rec.tclass,
            pkey: rec.pkey,
            rate_selector: EXACTLY,
            rate,
            packet_life_time_selector: EXACTLY,
            packet_life_time,
            sl: rec.sl & 0xF,
            flow_label: rec.flow_label & 0xF_FFFF,
            hop_limit,
            scope,
            join_state: 0,
            proxy_join: false,
        };
        Ok(Group::new(rec, false))
    }

    /// An SA-assigned MGID no group has: at most one try per group alive
    /// plus one.
    fn pick_mgid(&mut self, scope: u8, prefix: u64) -> [u8; 16] {
        loop {
            let g = mgid::sa_assigned(scope, prefix, self.next_mgid);
            self.next_mgid = self.next_mgid.wrapping_add(1);
            if !self.groups.contains_key(&g) {
                return g;
            }
        }
    }

    fn room_for_member(&self, g: &Group, port: Guid, limits: &McLimits) -> Result<(), McError> {
        if g.members.len() >= limits.max_members_per_group {
            return Err(McError::Full(Cap::MembersPerGroup));
        }
        if self.groups_of(port) >= limits.max_groups_per_port {
            return Err(McError::Full(Cap::GroupsPerPort));
        }
        if self.members >= limits.max_members {
            return Err(McError::Full(Cap::Members));
        }
        Ok(())
    }

    /// With `consolidate_ipv6_snm`, the MLID of a Solicited-Node group of
    /// `mgid`'s scope and partition, for a new one of them to share (as
    /// OpenSM's `consolidate_ipv6_snm_req`: every host joins its own, and
    /// one MLID each would spend the switches' multicast tables on them).
    fn snm_sibling(&self, mgid: &[u8; 16], limits: &McLimits) -> Option<u16> {
        if !limits.consolidate_ipv6_snm || !mgid::is_ipv6_snm(mgid) {
            return None;
        }
        let family = mgid::snm_family(mgid);
        let (mut low, mut high) = ([0u8; 16], [0xFFu8; 16]);
        low[..13].copy_from_slice(&family);
        high[..13].copy_from_slice(&family);
        self.groups.range(low..=high).map(|(_, g)| g).find(|g| mgid::is_ipv6_snm(&g.rec.mgid)).map(|g| g.rec.mlid)
    }

    /// Whether `mgid` may have `mlid`: no group holds it, or (with
    /// `consolidate_ipv6_snm`) only Solicited-Node groups of its family.
    pub(super) fn mlid_open_to(&self, mlid: u16, mgid: &[u8; 16], limits: &McLimits) -> bool {
        match self.by_mlid.get(&mlid) {
            None => true,
            Some(holders) => {
                limits.consolidate_ipv6_snm
                    && mgid::is_ipv6_snm(mgid)
                    && holders.iter().all(|h| mgid::is_ipv6_snm(h) && mgid::snm_family(h) == mgid::snm_family(mgid))
            }
        }
    }

    /// Files `mgid` under `mlid`.
    pub(super) fn index_mlid(&mut self, mlid: u16, mgid: [u8; 16]) {
        let holders = self.by_mlid.entry(mlid).or_default();
        if !holders.contains(&mgid) {
            holders.push(mgid);
        }
    }

    /// Takes `mgid` off `mlid`; the MLID is free once no group holds it.
    pub(super) fn unindex_mlid(&mut self, mlid: u16, mgid: &[u8; 16]) {
        if let Some(holders) = self.by_mlid.get_mut(&mlid) {
            holders.retain(|h| h != mgid);
            if holders.is_empty() {
                self.by_mlid.remove(&mlid);
            }
        }
    }

    /// The requested MLID when it is in range and free, else the lowest
    /// free one of the `count` from 0xC000.
    fn free_mlid(&self, requested: Option<u16>, count: u16) -> Option<u16> {
        let count = count.min(MLID_SPACE);
        if count == 0 {
            return None;
        }
        let last = MLID_BASE + (count - 1);
        if let Some(r) = requested.filter(|r| (MLID_BASE..=last).contains(r) && !self.by_mlid.contains_key(r)) {
            return Some(r);
        }
        let mut want = MLID_BASE;
        for &used in self.by_mlid.range(MLID_BASE..=last).map(|(k, _)| k) {
            if used != want {
                break;
            }
            want += 1;
        }
        (want <= last).then_some(want)
    }

    fn insert_group(&mut self, g: Group) {
        self.index_mlid(g.rec.mlid, g.rec.mgid);
        self.touched.groups.insert(g.rec.mgid);
        self.groups.insert(g.rec.mgid, g);
        self.version += 1;
    }

    /// ORs `bits` into `port`'s JoinState in group `mgid` (present).
    fn add_bits(&mut self, mgid: &[u8; 16], port: Guid, gid: [u8; 16], bits: u8, proxy: bool) -> McMemberRecordRepr {
        let g = self.groups.get_mut(mgid).expect("the caller found or made the group");
        let fresh = !g.members.contains_key(&port);
        let member = g.members.entry(port).or_insert(Member { gid, join_state: 0, proxy });
        let before = member.join_state;
        member.join_state |= bits;
        let added = member.join_state & !before;
        let member = *member;
        let answer = g.member_record(&member);
        g.counts.add(added);
        if before & KEEPS == 0 && added & KEEPS != 0 {
            g.keepers += 1;
            if g.keepers == 1 {
                self.events.push(McEvent::Created { mgid: *mgid, pkey: g.rec.pkey });
            }
        }
        if fresh {
            *self.per_port.entry(port).or_default() += 1;
            self.members += 1;
        }
        if fresh || added != 0 {
            self.version += 1;
            self.touched.members.insert((*mgid, port));
        }
        answer
    }

    // ---- Leave.

    /// SubnAdmDelete(MCMemberRecord): clears `rec`'s JoinState bits of its
    /// port in its group; returns the member's record as left (JoinState
    /// 0 when the member, or the group, is gone).
    pub fn leave(
        &mut self,
        rec: &McMemberRecordRepr,
        mask: u64,
        who: &Requester,
        fabric: &dyn McFabric,
    ) -> Result<McMemberRecordRepr, McError> {
        require(mask, JOIN_MASK)?;
        let port = crate::sa::index::gid_guid(&rec.port_gid);
        let g = self.groups.get(&rec.mgid).ok_or(McError::NoSuchGroup(rec.mgid))?;
        let member = *g.members.get(&port).ok_or(McError::NotMember(port))?;
        if member.gid[..8] != rec.port_gid[..8] {
            let prefix = |g: &[u8; 16]| u64::from_be_bytes(g[..8].try_into().expect("8 bytes"));
            return Err(McError::PortGidPrefix { asked: prefix(&rec.port_gid), port: prefix(&member.gid) });
        }
        let bits = rec.join_state & js::ALL;
        if bits == 0 || bits & !member.join_state != 0 {
            return Err(McError::LeaveBits { asked: bits, held: member.join_state });
        }
        if who.port.guid != port && !who.trusted {
            let same_node = fabric.port(port).is_some_and(|p| p.node == who.port.node);
            if !same_node || !fabric.share_partition(who.port.guid, port) {
                return Err(McError::ProxyDenied { requester: who.port.guid, port });
            }
            if !member.proxy {
                return Err(McError::NotOwner(port));
            }
            if fabric.membership(who.port.guid, g.rec.pkey).is_none() {
                return Err(McError::NotInPartition { port: who.port.guid, pkey: g.rec.pkey });
            }
        }
        let mut answer = g.member_record(&member);
        answer.join_state = self.remove_bits(&rec.mgid, port, bits);
        Ok(answer)
    }

    /// Clears `bits` of `port` in group `mgid`, removing the member when
    /// nothing is left and the group when no keeper is (unless well
    /// known). Returns the member's JoinState left (0: gone).
    fn remove_bits(&mut self, mgid: &[u8; 16], port: Guid, bits: u8) -> u8 {
        let Some(g) = self.groups.get_mut(mgid) else { return 0 };
        let Some(member) = g.members.get_mut(&port) else { return 0 };
        let before = member.join_state;
        member.join_state &= !bits;
        let (left, removed) = (member.join_state, before & !member.join_state);
        g.counts.sub(removed);
        let lost_keeper = before & KEEPS != 0 && left & KEEPS == 0;
        if lost_keeper {
            g.keepers -= 1;
        }
        if left == 0 {
            g.members.remove(&port);
            self.forget_member(port);
        }
        if removed != 0 {
            self.version += 1;
            self.touched.members.insert((*mgid, port));
        }
        let g = &self.groups[mgid];
        if lost_keeper && g.keepers == 0 {
            self.events.push(McEvent::Deleted { mgid: *mgid, pkey: g.rec.pkey });
            if !g.well_known {
                self.delete_group(mgid);
                return 0;
            }
        }
        left
    }

    fn forget_member(&mut self, port: Guid) {
        self.members -= 1;
        if let Some(n) = self.per_port.get_mut(&port) {
            *n -= 1;
            if *n == 0 {
                self.per_port.remove(&port);
            }
        }
    }

    /// Removes a group with whatever members it has left; its MLID is free.
    fn delete_group(&mut self, mgid: &[u8; 16]) {
        let Some(g) = self.groups.remove(mgid) else { return };
        self.unindex_mlid(g.rec.mlid, mgid);
        for &port in g.members.keys() {
            self.forget_member(port);
        }
        self.version += 1;
        self.touched.groups.insert(*mgid);
    }

    /// Forgets every membership, keeping only the well-known groups,
    /// empty, at their MLIDs: what an SA that stops being master does. The
    /// next master holds the truth (and a standby's mirror copies it); an
    /// SA that became master again with its old members would keep groups
    /// whose members left through the other master, and their MLIDs, for
    /// ever. Returns the memberships dropped. No traps: this SA is not
    /// the one that reports.
    pub fn forget_members(&mut self) -> usize {
        let dropped = self.members;
        let ordinary: Vec<[u8; 16]> = self.groups.values().filter(|g| !g.well_known).map(|g| g.rec.mgid).collect();
        for mgid in &ordinary {
            self.delete_group(mgid);
        }
        for g in self.groups.values_mut() {
            if !g.members.is_empty() {
                g.members.clear();
                g.counts = JoinCounts::default();
                g.keepers = 0;
            }
        }
        self.per_port.clear();
        self.members = 0;
        self.events.clear();
        if dropped > 0 || !ordinary.is_empty() {
            self.version += 1;
            self.touched.all = true;
        }
        dropped
    }

    // ---- Snapshots.

    /// A new snapshot: the partitions' `well_known` groups are created or
    /// updated (MLIDs reserved, lowest first), those no longer declared
    /// become ordinary groups; members whose port left the fabric or the
    /// group's partition leave (all their bits); groups left without a
    /// keeper go (unless well known).
    pub fn sync(&mut self, well_known: &[WellKnownGroup], fabric: &dyn McFabric, limits: &McLimits) -> SyncReport {
        let mut report = SyncReport::default();
        let mut wanted: BTreeMap<[u8; 16], &WellKnownGroup> = BTreeMap::new();
        for wk in well_known {
            wanted.entry(wk.mgid).or_insert(wk);
        }
        for g in self.groups.values_mut() {
            if g.well_known && !wanted.contains_key(&g.rec.mgid) {
                g.well_known = false;
                self.version += 1;
                self.touched.groups.insert(g.rec.mgid);
            }
        }
        for (mgid, wk) in &wanted {
            if let Some(g) = self.groups.get_mut(mgid) {
                let rec = well_known_record(wk, g.rec.mlid, limits.packet_life_time);
                if !g.well_known || g.rec != rec {
                    g.well_known = true;
                    g.rec = rec;
                    self.version += 1;
                    self.touched.groups.insert(*mgid);
                }
                continue;
            }
            let Some(mlid) = self.free_mlid(None, limits.mlids) else {
                report.unplaced += 1;
                continue;
            };
            self.insert_group(Group::new(well_known_record(wk, mlid, limits.packet_life_time), true));
            report.created += 1;
        }
        let gone: Vec<([u8; 16], Guid)> = self
            .groups
            .values()
            .flat_map(|g| g.members.keys().map(move |&p| (g, p)))
            .filter(|&(g, p)| fabric.port(p).is_none() || fabric.membership(p, g.rec.pkey).is_none())
            .map(|(g, p)| (g.rec.mgid, p))
            .collect();
        for (mgid, port) in gone {
            if self.groups.get(&mgid).is_some_and(|g| g.members.contains_key(&port)) {
                self.remove_bits(&mgid, port, js::ALL);
                report.members_dropped += 1;
            }
        }
        let unkept: Vec<[u8; 16]> =
            self.groups.values().filter(|g| !g.well_known && g.keepers == 0).map(|g| g.rec.mgid).collect();
        for mgid in &unkept {
            self.delete_group(mgid);
        }
        report.groups_dropped = unkept.len();
        report
    }

    /// Checks every invariant against a recount from the members (tests
    /// and debug assertions): MLIDs in use are exactly the groups', each
    /// in range once; counts, keepers, per-port and total memberships
    /// recount; only well-known groups lack keepers.
    pub fn check_invariants(&self) -> Result<(), String> {
        let indexed: usize = self.by_mlid.values().map(Vec::len).sum();
        if indexed != self.groups.len() || self.by_mlid.values().any(Vec::is_empty) {
            return Err(format!("{indexed} groups on {} MLIDs for {} groups", self.by_mlid.len(), self.groups.len()));
        }
        for (mlid, holders) in &self.by_mlid {
            let shared = holders.len() > 1;
            if shared
                && !holders.iter().all(|h| mgid::is_ipv6_snm(h) && mgid::snm_family(h) == mgid::snm_family(&holders[0]))
            {
                return Err(format!("MLID {mlid:#x} shared by groups that are not one Solicited-Node family"));
            }
        }
        let mut per_port: HashMap<Guid, usize> = HashMap::new();
        let mut members = 0;
        for (mgid, g) in &self.groups {
            if !self.by_mlid.get(&g.rec.mlid).is_some_and(|h| h.contains(mgid))
                || !(MLID_BASE..=MLID_LAST).contains(&g.rec.mlid)
            {
                return Err(format!("group {mgid:02x?} MLID {:#x} not indexed", g.rec.mlid));
            }
            let mut counts = JoinCounts::default();
            let mut keepers = 0;
            for (&p, mbr) in &g.members {
                if mbr.join_state & js::ALL == 0 || mbr.join_state & !js::ALL != 0 {
                    return Err(format!("member {p} with JoinState {:#x}", mbr.join_state));
                }
                counts.add(mbr.join_state);
                keepers += u32::from(mbr.join_state & KEEPS != 0);
                *per_port.entry(p).or_default() += 1;
                members += 1;
            }
            if counts != g.counts || keepers != g.keepers {
                return Err(format!(
                    "group {:#x}: counts {:?}/{} recount {:?}/{}",
                    g.rec.mlid, g.counts, g.keepers, counts, keepers
                ));
            }
            if !g.well_known && keepers == 0 {
                return Err(format!("group {:#x} without a keeper", g.rec.mlid));
            }
        }
        if per_port != self.per_port || members != self.members {
            return Err(format!("per-port counts {:?} recount {:?}", self.per_port, per_port));
        }
        Ok(())
    }
}

/// What [`McGroups::sync`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Well-known groups created.
    pub created: usize,
    /// Well-known groups that found no free MLID (not created).
    pub unplaced: usize,
    /// Members whose port left the fabric or the group's partition.
    pub members_dropped: usize,
    /// Groups no longer well known, deleted for want of a keeper.
    pub groups_dropped: usize,
}

/// One MLID's members, for routing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MlidMembers {
    pub mlid: Lid,
    pub mgid: [u8; 16],
    /// FullMember or NonMember: the MLID goes into their ports' masks.
    pub receivers: Vec<Guid>,
    /// Only SendOnly bits: the tree must reach them, their ports need not
    /// receive.
    pub send_only: Vec<Guid>,
}

/// A well-known group's record (OpenSM's `osm_prtn_add_mcgroup`: the
/// partition's full P_Key, its parameters "exactly", HopLimit 0 for
/// link-local scope and 0xFF beyond, Scope the MGID's).
fn well_known_record(wk: &WellKnownGroup, mlid: u16, packet_life_time: u8) -> McMemberRecordRepr {
    let p = &wk.params;
    let scope = mgid::scope(&wk.mgid);
    McMemberRecordRepr {
        mgid: wk.mgid,
        port_gid: [0; 16],
        q_key: p.q_key,
        mlid,
        mtu_selector: EXACTLY,
        mtu: p.mtu,
        tclass: p.tclass,
        pkey: wk.pkey,
        rate_selector: EXACTLY,
        rate: p.rate,
        packet_life_time_selector: EXACTLY,
        packet_life_time: packet_life_time & 0x3F,
        sl: p.sl & 0xF,
        flow_label: p.flow_label & 0xF_FFFF,
        hop_limit: if scope == mc_scope::LINK_LOCAL { 0 } else { 0xFF },
        scope,
        join_state: 0,
        proxy_join: false,
    }
}

fn require(mask: u64, bits: u64) -> Result<(), McError> {
    match bits & !mask {
        0 => Ok(()),
        missing => Err(McError::Insufficient { missing }),
    }
}

/// MTU and Rate values must be codes, unless their selector is "largest".
fn check_codes(rec: &McMemberRecordRepr, mask: u64) -> Result<(), McError> {
    if let Some((sel, v)) = mtu_bound(rec, mask) {
        if sel != 3 && !rate::is_mtu(v) {
            return Err(McError::BadCode { field: "MTU", value: v });
        }
    }
    if let Some((sel, v)) = rate_bound(rec, mask) {
        if sel != 3 && !rate::is_rate(v) {
            return Err(McError::BadCode { field: "Rate", value: v });
        }
    }
    Ok(())
}

/// The port a PortGID names, with its subnet prefix (or the link-local
/// one, which every port answers to).
fn joining_port(rec: &McMemberRecordRepr, fabric: &dyn McFabric) -> Result<PortCaps, McError> {
    let guid = crate::sa::index::gid_guid(&rec.port_gid);
    let port = fabric.port(guid).ok_or(McError::UnknownPort(guid))?;
    let prefix = u64::from_be_bytes(rec.port_gid[..8].try_into().expect("8 bytes"));
    if prefix != port.gid_prefix && prefix != crate::sa::index::DEFAULT_SUBNET_PREFIX {
        return Err(McError::PortGidPrefix { asked: prefix, port: port.gid_prefix });
    }
    Ok(port)
}

/// A join for another port: trusted, or a port of the requester's own
/// node it shares a partition with.
fn check_proxy(who: &Requester, port: &PortCaps, fabric: &dyn McFabric) -> Result<(), McError> {
    if who.port.guid == port.guid || who.trusted {
        return Ok(());
    }
    if who.port.node != port.node || !fabric.share_partition(who.port.guid, port.guid) {
        return Err(McError::ProxyDenied { requester: who.port.guid, port: port.guid });
    }
    Ok(())
}

/// What every join of group `g` must pass: its selectors, the port's
/// link, the partition, and o15-0.2.1 for a member someone else changes.
fn admit(
    g: &Group,
    rec: &McMemberRecordRepr,
    mask: u64,
    port: &PortCaps,
    who: &Requester,
    fabric: &dyn McFabric,
) -> Result<(), McError> {
    selectors_admit(&g.rec, rec, mask)?;
    if port.mtu < g.rec.mtu {
        return Err(McError::PortTooSlow { field: "MTU", port: port.mtu, group: g.rec.mtu });
    }
    if rate::cmp_rates(port.rate, g.rec.rate).is_lt() {
        return Err(McError::PortTooSlow { field: "Rate", port: port.rate, group: g.rec.rate });
    }
    if fabric.membership(port.guid, g.rec.pkey).is_none() {
        return Err(McError::NotInPartition { port: port.guid, pkey: g.rec.pkey });
    }
    if let Some(member) = g.members.get(&port.guid) {
        if who.port.guid != port.guid && !who.trusted && !member.proxy {
            return Err(McError::NotOwner(port.guid));
        }
    }
    Ok(())
}
