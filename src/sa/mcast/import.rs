//! A previous master's groups added to the live ones at a takeover
//! ([`McGroups::import`]): the records a standby mirrored from the master's
//! trusted SubnAdmGetTable(MCMemberRecord) (one per member with its
//! PortGID, JoinState and ProxyJoin, and one for each group without
//! members; `crate::sa::mirror`).
//!
//! The old master accepted every member, so no requester rule is checked
//! again; what this SA's own state says still holds:
//! - a member's port must be in the new master's fabric and a member of
//!   the group's partition there (as [`McGroups::sync`] keeps them);
//! - a group this SA already has (a well-known group made from the
//!   partitions, or one of its own from an earlier time as master) gets
//!   the members when Q_Key, partition, MTU, Rate, SL, FlowLabel, TClass
//!   and Scope agree, and nothing when they do not; its record and the
//!   members it has stay as they are;
//! - a group this SA lacks is made with the record's parameters and only
//!   when a member that keeps it (FullMember or SendOnlyFullMember) is
//!   added: an empty group the partitions here do not declare is not made;
//! - the caps of [`McLimits`] apply as to joins.
//!
//! # MLIDs
//! The switches still forward by the old master's MLIDs and the members
//! send to the MLIDs it answered, so every group keeps its MLID when that
//! is free and in this fabric's range. A group this SA made from the
//! partitions before anyone joined it (no members: no host knows its MLID
//! from this SA, and no MFT holds it) moves to the old master's MLID; its
//! MLID is released first, so two such groups may even swap. Otherwise a
//! group whose MLID is taken here, or past the smallest MulticastFDBCap,
//! gets the lowest free one and is counted in [`McImport::mlid_moved`]:
//! its MFT entries are written anew, and members that cached the old MLID
//! send into an empty tree until they join again.
//!
//! No trap 66 is reported for what the import adds: the old master
//! reported the groups when they were made.

use std::collections::BTreeMap;

use super::{mgid, Group, McFabric, McGroups, McLimits, Member, EXACTLY, KEEPS, MLID_BASE, MLID_SPACE};
use crate::mad::sa::{join_state as js, McMemberRecordRepr};
use crate::partition::PARTITION_MASK;
use crate::sa::index::gid_guid;
use crate::sa::path::rate;
use crate::types::Guid;

/// What one import did. Every record lands in exactly one of the record
/// counters (`members` to `over_cap`); `groups` and `mlid_moved` count
/// groups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McImport {
    /// Groups made (their MGID had no group here).
    pub groups: usize,
    /// Members added.
    pub members: usize,
    /// A member already in its group here, or the record of an empty
    /// group that exists here.
    pub present: usize,
    /// The member's port is not in the new master's fabric.
    pub port_gone: usize,
    /// The member's port is not in the group's partition here, or the
    /// record is no valid group (MGID not multicast, no partition, MTU or
    /// Rate not a code) or member (a PortGID without JoinState).
    pub refused: usize,
    /// The group here has other parameters.
    pub mismatch: usize,
    /// The group is not made for want of a member that keeps it.
    pub unkept: usize,
    /// Over a cap: groups, MLIDs, members of a group, groups of a port,
    /// memberships.
    pub over_cap: usize,
    /// Groups that could not keep the old master's MLID.
    pub mlid_moved: usize,
}

impl McImport {
    /// Records accounted for.
    pub fn records(&self) -> usize {
        self.members + self.present + self.port_gone + self.refused + self.mismatch + self.unkept + self.over_cap
    }
}

/// One mirrored group: its parameters and the members still in question.
struct Plan {
    /// The first record's group parameters (a master answers the same
    /// ones in every record of a group).
    rec: McMemberRecordRepr,
    /// Records of the group itself (no member).
    own: usize,
    /// Members whose port is in the fabric and the partition, keepers
    /// first.
    members: Vec<(Guid, Member)>,
}

impl Plan {
    /// Leaves the group out: the records still in question, now none.
    fn drop_all(&mut self) -> usize {
        let n = self.own + self.members.len();
        self.own = 0;
        self.members.clear();
        n
    }
}

/// How a mirrored group meets this SA.
enum Fate {
    /// It exists here; `detached` when its MLID was released to be moved.
    Existing { detached: Option<u16> },
    /// It is to be made.
    Fresh,
}

impl McGroups {
    /// Adds a previous master's `records` to the groups (see the module
    /// docs); `fabric` is the new master's snapshot.
    pub fn import(&mut self, records: &[McMemberRecordRepr], fabric: &dyn McFabric, limits: &McLimits) -> McImport {
        let mut r = McImport::default();
        let events = self.events.len();
        let mut plans = self.plans(records, fabric, &mut r);

        // Which groups are here, which are to be made, and which may move.
        let mut fates: Vec<([u8; 16], Fate)> = Vec::new();
        for (mgid, plan) in &mut plans {
            let fate = match self.groups.get(mgid) {
                Some(g) if !agrees(&g.rec, &plan.rec) => {
                    r.mismatch += plan.drop_all();
                    continue;
                }
                Some(g) => {
                    r.present += std::mem::take(&mut plan.own);
                    let movable = g.members.is_empty() && !plan.members.is_empty() && g.rec.mlid != plan.rec.mlid;
                    let detached = movable.then_some(g.rec.mlid);
                    if let Some(old) = detached {
                        self.unindex_mlid(old, mgid);
                    }
                    Fate::Existing { detached }
                }
                None if !valid_group(&plan.rec) => {
                    r.refused += plan.drop_all();
                    continue;
                }
                None if !plan.members.iter().any(|(_, m)| m.join_state & KEEPS != 0) => {
                    r.unkept += plan.drop_all();
                    continue;
                }
                None => Fate::Fresh,
            };
            fates.push((*mgid, fate));
        }

        // Groups that move first: each takes its old master's MLID when
        // free, else its own again, else the lowest free.
        let in_range = |mlid: u16| mlid >= MLID_BASE && mlid - MLID_BASE < limits.mlids.min(MLID_SPACE);
        let mut moving: Vec<([u8; 16], u16, u16)> = Vec::new();
        for (mgid, fate) in &fates {
            if let Fate::Existing { detached: Some(own) } = fate {
                let wanted = plans[mgid].rec.mlid;
                if in_range(wanted) && self.mlid_open_to(wanted, mgid, limits) {
                    self.move_group(mgid, wanted);
                } else {
                    moving.push((*mgid, wanted, *own));
                }
            }
        }
        for (mgid, _, own) in moving {
            // Past this fabric's range only when it is full: the whole
            // MLID space has room, since the group released one.
            let mlid = self
                .free_mlid(Some(own), limits.mlids)
                .or_else(|| self.free_mlid(Some(own), MLID_SPACE))
                .expect("a group released its MLID");
            self.move_group(&mgid, mlid);
            r.mlid_moved += 1;
        }
        for (mgid, fate) in &fates {
            if let Fate::Existing { detached: None } = fate {
                let g = &self.groups[mgid];
                if g.rec.mlid != plans[mgid].rec.mlid
                    && plans[mgid].members.iter().any(|(p, _)| !g.members.contains_key(p))
                {
                    r.mlid_moved += 1;
                }
            }
        }

        // Groups to make: those whose MLID is free first, so that one
        // that must move takes none another could keep.
        let fresh: Vec<[u8; 16]> =
            fates.iter().filter(|(_, f)| matches!(f, Fate::Fresh)).map(|(mgid, _)| *mgid).collect();
        let (keep, moved): (Vec<[u8; 16]>, Vec<[u8; 16]>) = fresh.iter().partition(|mgid| {
            let wanted = plans[*mgid].rec.mlid;
            in_range(wanted) && self.mlid_open_to(wanted, mgid, limits)
        });
        let mut made: Vec<[u8; 16]> = Vec::new();
        for mgid in keep.iter().chain(&moved) {
            let plan = plans.get_mut(mgid).expect("planned");
            let wanted = plan.rec.mlid;
            // The old master's MLID, shared with the Solicited-Node groups
            // it consolidated there, or the first free.
            let kept = (in_range(wanted) && self.mlid_open_to(wanted, mgid, limits)).then_some(wanted);
            let mlid = match kept.or_else(|| self.free_mlid(Some(wanted), limits.mlids)) {
                Some(mlid) if self.groups.len() < limits.max_groups => mlid,
                _ => {
                    r.over_cap += plan.drop_all();
                    continue;
                }
            };
            r.mlid_moved += usize::from(mlid != wanted);
            r.present += std::mem::take(&mut plan.own);
            self.insert_group(Group::new(group_record(&plan.rec, mlid), false));
            made.push(*mgid);
        }

        // Members, then groups made that kept no keeper go again.
        for (mgid, plan) in &plans {
            if !self.groups.contains_key(mgid) {
                continue;
            }
            for &(port, member) in &plan.members {
                let g = &self.groups[mgid];
                if g.members.contains_key(&port) {
                    r.present += 1;
                } else if self.room_for_member(g, port, limits).is_err() {
                    r.over_cap += 1;
                } else {
                    self.add_bits(mgid, port, member.gid, member.join_state, member.proxy);
                    r.members += 1;
                }
            }
        }
        for mgid in &made {
            let g = &self.groups[mgid];
            if g.keepers > 0 {
                r.groups += 1;
                continue;
            }
            // Every keeper was over a cap: the group is not made, and the
            // members it got go with it.
            let added = g.members.len();
            r.members -= added;
            r.over_cap += added;
            self.delete_group(mgid);
        }
        self.events.truncate(events);
        debug_assert_eq!(self.check_invariants(), Ok(()));
        r
    }

    /// The records by group, in MGID order, with the members that may
    /// stay; members that may not are counted in `r`.
    fn plans(
        &self,
        records: &[McMemberRecordRepr],
        fabric: &dyn McFabric,
        r: &mut McImport,
    ) -> BTreeMap<[u8; 16], Plan> {
        let mut plans: BTreeMap<[u8; 16], Plan> = BTreeMap::new();
        for rec in records {
            let plan = plans.entry(rec.mgid).or_insert_with(|| Plan { rec: *rec, own: 0, members: Vec::new() });
            let bits = rec.join_state & js::ALL;
            if rec.port_gid == [0; 16] && bits == 0 {
                plan.own += 1;
                continue;
            }
            let port = gid_guid(&rec.port_gid);
            if bits == 0 {
                r.refused += 1;
            } else if fabric.port(port).is_none() {
                r.port_gone += 1;
            } else if fabric.membership(port, plan.rec.pkey).is_none() {
                r.refused += 1;
            } else {
                plan.members.push((port, Member { gid: rec.port_gid, join_state: bits, proxy: rec.proxy_join }));
            }
        }
        for plan in plans.values_mut() {
            // Keepers first: a cap reached part way leaves out members
            // that do not keep the group.
            plan.members.sort_by_key(|(_, m)| m.join_state & KEEPS == 0);
        }
        plans
    }

    /// Gives an existing group, whose MLID is released, `mlid` (free).
    fn move_group(&mut self, mgid: &[u8; 16], mlid: u16) {
        let g = self.groups.get_mut(mgid).expect("an existing group");
        g.rec.mlid = mlid;
        self.index_mlid(mlid, *mgid);
        self.version += 1;
        self.touched.groups.insert(*mgid);
    }
}

/// Whether the group here agrees with the mirrored one on what its
/// members use: Q_Key, partition, MTU, Rate, SL, FlowLabel, TClass and
/// Scope (PacketLifeTime and HopLimit follow each SA's own settings).
fn agrees(here: &McMemberRecordRepr, theirs: &McMemberRecordRepr) -> bool {
    here.q_key == theirs.q_key
        && here.pkey & PARTITION_MASK == theirs.pkey & PARTITION_MASK
        && here.mtu == theirs.mtu & 0x3F
        && here.rate == theirs.rate & 0x3F
        && here.sl == theirs.sl & 0xF
        && here.flow_label == theirs.flow_label & 0xF_FFFF
        && here.tclass == theirs.tclass
        && here.scope == mgid::scope(&theirs.mgid)
}

/// A group a master could have made: a multicast MGID, a partition, MTU
/// and Rate codes.
fn valid_group(rec: &McMemberRecordRepr) -> bool {
    rec.mgid[0] == 0xFF
        && rec.pkey & PARTITION_MASK != 0
        && rate::is_mtu(rec.mtu & 0x3F)
        && rate::is_rate(rec.rate & 0x3F)
}

/// The group's own record from a mirrored one, at `mlid`: selectors
/// "exactly", no member fields, Scope the MGID's.
fn group_record(rec: &McMemberRecordRepr, mlid: u16) -> McMemberRecordRepr {
    McMemberRecordRepr {
        port_gid: [0; 16],
        mlid,
        mtu_selector: EXACTLY,
        mtu: rec.mtu & 0x3F,
        rate_selector: EXACTLY,
        rate: rec.rate & 0x3F,
        packet_life_time_selector: EXACTLY,
        packet_life_time: rec.packet_life_time & 0x3F,
        sl: rec.sl & 0xF,
        flow_label: rec.flow_label & 0xF_FFFF,
        scope: mgid::scope(&rec.mgid),
        join_state: 0,
        proxy_join: false,
        ..*rec
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::super::{ipoib_broadcast, Cap, McError, PortCaps, Requester, CREATE_MASK, JOIN_MASK};
    use super::*;
    use crate::mad::sa::mc_member_mask as m;
    use crate::partition::{GroupParams, Membership, PortPartitions, WellKnownGroup};
    use crate::types::Lid;

    const PREFIX: u64 = 0xfe80_0000_0000_0000;
    /// A port the old master had and the new one's fabric lacks.
    const GONE: u64 = 99;

    /// Ports by GUID, each at 4096 bytes and 100 Gb/s; without
    /// `partitions` every port is a full member of the default partition.
    #[derive(Default)]
    struct Fabric {
        ports: HashMap<Guid, PortCaps>,
        partitions: Option<HashMap<Guid, PortPartitions>>,
    }

    impl Fabric {
        fn with_ports(guids: &[u64]) -> Self {
            let mut f = Fabric::default();
            for &g in guids {
                let caps = PortCaps { guid: Guid(g), node: Guid(g), gid_prefix: PREFIX, mtu: 5, rate: 16 };
                f.ports.insert(Guid(g), caps);
            }
            f
        }
    }

    impl McFabric for Fabric {
        fn port(&self, guid: Guid) -> Option<PortCaps> {
            self.ports.get(&guid).copied()
        }
        fn membership(&self, port: Guid, pkey: u16) -> Option<Membership> {
            match &self.partitions {
                Some(p) => p.get(&port)?.membership(pkey),
                None => (pkey & PARTITION_MASK == PARTITION_MASK).then_some(Membership::Full),
            }
        }
        fn share_partition(&self, _: Guid, _: Guid) -> bool {
            true
        }
    }

    use super::super::tests::{gid, limits};

    /// A site-local MGID ff15::n.
    fn mg(n: u8) -> [u8; 16] {
        let mut g = [0u8; 16];
        (g[0], g[1], g[15]) = (0xFF, 0x15, n);
        g
    }

    fn bcast() -> [u8; 16] {
        ipoib_broadcast(2, 0xffff)
    }

    fn well_known(mgid: [u8; 16]) -> WellKnownGroup {
        WellKnownGroup { mgid, pkey: 0xffff, params: GroupParams::default(), ipoib_broadcast: mgid == bcast() }
    }

    /// A group record as a master answers it: the partitions' defaults
    /// (2048 bytes, 10 Gb/s, Q_Key 0x0b1b), "exactly".
    fn group(mgid: [u8; 16], mlid: u16) -> McMemberRecordRepr {
        let p = GroupParams::default();
        McMemberRecordRepr {
            mgid,
            q_key: p.q_key,
            mlid,
            mtu_selector: EXACTLY,
            mtu: p.mtu,
            pkey: 0xffff,
            rate_selector: EXACTLY,
            rate: p.rate,
            packet_life_time_selector: EXACTLY,
            packet_life_time: 18,
            scope: mgid::scope(&mgid),
            ..Default::default()
        }
    }

    fn member(g: &McMemberRecordRepr, port: u64, bits: u8, proxy: bool) -> McMemberRecordRepr {
        McMemberRecordRepr { port_gid: gid(port), join_state: bits, proxy_join: proxy, ..*g }
    }

    /// A trusted creating join with `g`'s parameters.
    fn join(groups: &mut McGroups, f: &Fabric, g: &McMemberRecordRepr, port: u64, bits: u8) -> McMemberRecordRepr {
        let who = Requester { port: f.port(Guid(port)).unwrap(), trusted: true };
        let mask = JOIN_MASK | CREATE_MASK | m::MTU_SELECTOR | m::MTU | m::RATE_SELECTOR | m::RATE;
        groups.join(&member(g, port, bits, false), mask, &who, f, &limits()).unwrap()
    }

    fn state_of(groups: &McGroups, mgid: &[u8; 16], port: u64) -> Option<(u8, bool)> {
        groups.group(mgid)?.member(Guid(port)).map(|m| (m.join_state, m.proxy))
    }

    #[test]
    fn the_old_masters_groups_come_back_with_their_mlids_and_members() {
        let f = Fabric::with_ports(&[10, 20, 30]);
        let mut groups = McGroups::new();
        groups.sync(&[well_known(bcast())], &f, &limits());
        assert_eq!(groups.group(&bcast()).unwrap().mlid(), 0xC000);
        let _ = groups.take_events();
        let before = groups.version();

        let b = group(bcast(), 0xC000);
        let hosts = group(mg(1), 0xC001);
        let sa_made = group(mg(7), 0xC007);
        let records = vec![
            member(&b, 10, js::FULL, false),
            member(&b, 20, js::FULL, false),
            member(&b, GONE, js::FULL, false),
            member(&hosts, 10, js::FULL, false),
            member(&hosts, 30, js::SEND_ONLY_NON_MEMBER, false),
            member(&sa_made, 20, js::NON_MEMBER, false),
            member(&sa_made, 30, js::FULL | js::NON_MEMBER, true),
            // An empty group the old master's partitions declared; these
            // do not.
            group(mg(9), 0xC009),
        ];
        let r = groups.import(&records, &f, &limits());
        assert_eq!(r, McImport { groups: 2, members: 6, port_gone: 1, unkept: 1, ..Default::default() });
        assert_eq!(r.records(), records.len());

        let mlids: Vec<(u16, usize)> = groups.groups().map(|g| (g.mlid(), g.members().count())).collect();
        assert_eq!(mlids, vec![(0xC000, 2), (0xC001, 2), (0xC007, 2)], "every group at the old master's MLID");
        assert_eq!(state_of(&groups, &bcast(), 20), Some((js::FULL, false)));
        assert_eq!(state_of(&groups, &mg(1), 30), Some((js::SEND_ONLY_NON_MEMBER, false)));
        assert_eq!(state_of(&groups, &mg(7), 30), Some((js::FULL | js::NON_MEMBER, true)), "ProxyJoin kept");
        let made = groups.group(&mg(7)).unwrap();
        assert!(!made.well_known());
        assert_eq!(made.record(), &group(mg(7), 0xC007), "the group's parameters as the old master had them");
        assert_eq!(made.keepers(), 1);
        assert!(groups.group(&mg(9)).is_none());
        assert_eq!(groups.mcast_table().members(Lid(0xC001)), &[Guid(10), Guid(30)]);
        assert!(groups.take_events().is_empty(), "the old master reported these groups");
        assert!(groups.version() > before, "the SM routes what came in");
        groups.check_invariants().unwrap();

        // Everything is there now: a second import adds nothing.
        let v = groups.version();
        let again = groups.import(&records, &f, &limits());
        assert_eq!(again, McImport { present: 6, port_gone: 1, unkept: 1, ..Default::default() });
        assert_eq!(groups.version(), v);
    }

    /// An old master that consolidated Solicited-Node groups on one MLID:
    /// a new master that consolidates too keeps them sharing it; one that
    /// does not gives the second its own (counted as moved).
    #[test]
    fn consolidated_solicited_node_groups_come_back_on_their_shared_mlid() {
        let f = Fabric::with_ports(&[10, 20]);
        let snm = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap().octets();
        let (a, b) = (group(snm("ff12:601b:ffff::1:ff00:aa"), 0xC001), group(snm("ff12:601b:ffff::1:ff00:bb"), 0xC001));
        let records = vec![member(&a, 10, js::FULL, false), member(&b, 20, js::FULL, false)];
        for (consolidate, mlids, moved) in [(true, [0xC001, 0xC001], 0), (false, [0xC001, 0xC000], 1)] {
            let mut groups = McGroups::new();
            let lim = McLimits { consolidate_ipv6_snm: consolidate, ..limits() };
            let r = groups.import(&records, &f, &lim);
            assert_eq!((r.groups, r.members, r.mlid_moved), (2, 2, moved), "consolidate {consolidate}");
            let got: Vec<u16> = [&a, &b].iter().map(|g| groups.group(&g.mgid).unwrap().mlid()).collect();
            assert_eq!(got, mlids, "consolidate {consolidate}");
            groups.check_invariants().unwrap();
        }
    }

    #[test]
    fn an_mlid_taken_here_or_past_the_fabrics_range_is_replaced_by_the_lowest_free() {
        let f = Fabric::with_ports(&[10, 20]);
        let mut groups = McGroups::new();
        groups.sync(&[well_known(bcast())], &f, &limits());
        // This SA's own group from an earlier time as master, at 0xC001.
        let own = join(&mut groups, &f, &group(mg(1), 0), 10, js::FULL);
        assert_eq!(own.mlid, 0xC001);
        let lim = McLimits { mlids: 8, ..limits() };
        let records = vec![
            // Wants 0xC001 (taken by another group): moves.
            member(&group(mg(2), 0xC001), 20, js::FULL, false),
            // Wants 0xC002, free: keeps it though the one above moves.
            member(&group(mg(3), 0xC002), 20, js::FULL, false),
            // Past the 8 MLIDs every switch forwards: moves.
            member(&group(mg(4), 0xC100), 20, js::FULL, false),
            // Our own group, which the old master had at 0xC005: it keeps
            // ours (its member joined us) and gains the other.
            member(&group(mg(1), 0xC005), 20, js::FULL, false),
        ];
        let r = groups.import(&records, &f, &lim);
        assert_eq!(r, McImport { groups: 3, members: 4, mlid_moved: 3, ..Default::default() });
        let mlid = |n| groups.group(&mg(n)).unwrap().mlid();
        assert_eq!((mlid(1), mlid(2), mlid(3), mlid(4)), (0xC001, 0xC003, 0xC002, 0xC004));
        assert_eq!(groups.group(&mg(1)).unwrap().members().count(), 2);
        groups.check_invariants().unwrap();
    }

    #[test]
    fn well_known_groups_nobody_joined_yet_move_to_the_old_masters_mlids() {
        let f = Fabric::with_ports(&[10, 20]);
        let mut groups = McGroups::new();
        // Declared in another order here than on the old master.
        let wk = [well_known(bcast()), well_known(mg(1)), well_known(mg(2)), well_known(mg(3))];
        groups.sync(&wk, &f, &limits());
        let mlid = |g: &McGroups, mgid| g.group(&mgid).unwrap().mlid();
        assert_eq!((mlid(&groups, bcast()), mlid(&groups, mg(1)), mlid(&groups, mg(2))), (0xC000, 0xC001, 0xC002));
        // mg(3) has a member here already: it keeps its MLID.
        join(&mut groups, &f, &group(mg(3), 0), 10, js::FULL);
        let records = vec![
            // mg(1) and mg(2) swapped, the broadcast group moved up.
            member(&group(mg(1), 0xC002), 10, js::FULL, false),
            member(&group(mg(2), 0xC001), 10, js::FULL, false),
            member(&group(bcast(), 0xC010), 10, js::FULL, false),
            member(&group(mg(3), 0xC011), 20, js::FULL, false),
            // Nobody in it on the old master: stays where it is.
            group(mg(2), 0xC001),
        ];
        let r = groups.import(&records, &f, &limits());
        assert_eq!(r, McImport { members: 4, present: 1, mlid_moved: 1, ..Default::default() });
        assert_eq!(
            (mlid(&groups, bcast()), mlid(&groups, mg(1)), mlid(&groups, mg(2)), mlid(&groups, mg(3))),
            (0xC010, 0xC002, 0xC001, 0xC003)
        );
        assert!(groups.groups().all(|g| g.well_known()));
        assert_eq!(groups.by_mlid(0xC000).map(|g| g.mgid()), None, "0xC000 is free again");
        groups.check_invariants().unwrap();
    }

    #[test]
    fn disagreeing_groups_partitions_caps_and_bad_records_are_left_out() {
        let mut f = Fabric::with_ports(&[10, 20, 30]);
        let default_only = PortPartitions { members: vec![(0x7fff, Membership::Full)], index0: None };
        let both = PortPartitions {
            members: vec![(0x7fff, Membership::Full), (0x0001, Membership::Full)],
            ..default_only.clone()
        };
        f.partitions = Some(HashMap::from([(Guid(10), both.clone()), (Guid(20), default_only), (Guid(30), both)]));
        let mut groups = McGroups::new();
        groups.sync(&[well_known(bcast())], &f, &limits());
        let lim = McLimits { max_groups: 3, max_members_per_group: 2, ..limits() };

        let other_qkey = McMemberRecordRepr { q_key: 0x1234, ..group(bcast(), 0xC000) };
        let p1 = McMemberRecordRepr { pkey: 0x8001, ..group(mg(1), 0xC001) };
        let not_multicast = McMemberRecordRepr { mgid: gid(5), ..group(mg(2), 0xC002) };
        let no_partition = McMemberRecordRepr { pkey: 0x8000, ..group(mg(3), 0xC003) };
        let crowded = group(mg(4), 0xC004);
        let records = vec![
            member(&other_qkey, 10, js::FULL, false),
            member(&other_qkey, 20, js::FULL, false),
            // 20 is not in partition 1 here.
            member(&p1, 20, js::FULL, false),
            member(&p1, 10, js::FULL, false),
            member(&not_multicast, 10, js::FULL, false),
            member(&no_partition, 10, js::FULL, false),
            // A PortGID without JoinState.
            member(&p1, 30, 0, false),
            // Two members per group: the keeper goes first though listed last.
            member(&crowded, 10, js::NON_MEMBER, false),
            member(&crowded, 20, js::NON_MEMBER, false),
            member(&crowded, 30, js::FULL, false),
            // The fourth group: past max_groups.
            member(&group(mg(5), 0xC005), 10, js::FULL, false),
            // Only a send-only non-member is left: nothing keeps it.
            member(&group(mg(6), 0xC006), GONE, js::FULL, false),
            member(&group(mg(6), 0xC006), 10, js::SEND_ONLY_NON_MEMBER, false),
        ];
        let r = groups.import(&records, &f, &lim);
        let want = McImport {
            groups: 2,
            members: 3,
            port_gone: 1,
            refused: 4,
            mismatch: 2,
            unkept: 1,
            over_cap: 2,
            ..Default::default()
        };
        assert_eq!(r, want);
        assert_eq!(r.records(), records.len());
        assert_eq!(groups.group(&bcast()).unwrap().members().count(), 0, "a mismatch adds nobody");
        assert_eq!(groups.group(&bcast()).unwrap().record().q_key, 0x0b1b, "nor changes the group");
        let crowded = groups.group(&mg(4)).unwrap();
        assert_eq!(crowded.members().map(|(p, _)| p).collect::<Vec<_>>(), vec![Guid(10), Guid(30)]);
        assert_eq!(crowded.keepers(), 1);
        assert_eq!(groups.group(&mg(1)).unwrap().members().count(), 1);
        assert_eq!(groups.len(), 3);
        groups.check_invariants().unwrap();
    }

    #[test]
    fn members_already_here_keep_their_join_state() {
        let f = Fabric::with_ports(&[10, 20]);
        let mut groups = McGroups::new();
        let here = group(mg(1), 0);
        join(&mut groups, &f, &here, 10, js::SEND_ONLY_FULL);
        let ours = *groups.group(&mg(1)).unwrap().record();
        let theirs = McMemberRecordRepr { packet_life_time: 5, hop_limit: 7, ..ours };
        let records = [member(&theirs, 10, js::FULL, true), member(&theirs, 20, js::FULL, false)];
        let r = groups.import(&records, &f, &limits());
        assert_eq!(r, McImport { members: 1, present: 1, ..Default::default() });
        assert_eq!(state_of(&groups, &mg(1), 10), Some((js::SEND_ONLY_FULL, false)));
        assert_eq!(groups.group(&mg(1)).unwrap().record(), &ours, "PacketLifeTime and HopLimit are this SA's");
    }

    #[test]
    fn a_keeper_over_a_cap_leaves_no_group_behind() {
        let f = Fabric::with_ports(&[10, 20]);
        let mut groups = McGroups::new();
        let lim = McLimits { max_groups_per_port: 1, ..limits() };
        join(&mut groups, &f, &group(mg(1), 0), 10, js::FULL);
        let g2 = group(mg(2), 0xC002);
        // 10 is in its one group already; 20 does not keep the group.
        let records = [member(&g2, 10, js::FULL, false), member(&g2, 20, js::NON_MEMBER, false)];
        let r = groups.import(&records, &f, &lim);
        assert_eq!(r, McImport { over_cap: 2, ..Default::default() });
        assert!(groups.group(&mg(2)).is_none());
        assert_eq!(groups.len(), 1);
        assert_eq!(McError::Full(Cap::GroupsPerPort).status(), crate::mad::sa::sa_status::NO_RESOURCES);
        groups.check_invariants().unwrap();
    }

    proptest! {
        /// Any mirror over any live state: every record accounted for
        /// once, the invariants hold, the live members stay, and a group
        /// made keeps its MLID when nothing here held it.
        #[test]
        fn any_import_accounts_for_every_record(
            joins in prop::collection::vec((1u8..5, 0u64..4, 1u8..16), 0..8),
            mirrored in prop::collection::vec((1u8..7, 0u64..5, 0u8..16, 0u16..10, any::<bool>(), 0u8..3), 0..40),
            mlids in 4u16..12,
            per_group in 1usize..5,
        ) {
            let f = Fabric::with_ports(&[10, 11, 12, 13]);
            let lim = McLimits { mlids, max_members_per_group: per_group, max_groups: 5, ..limits() };
            let mut groups = McGroups::new();
            groups.sync(&[well_known(bcast()), well_known(mg(1))], &f, &lim);
            for (n, port, bits) in joins {
                let who = Requester { port: f.port(Guid(10 + port)).unwrap(), trusted: true };
                let rec = member(&group(mg(n), 0), 10 + port, bits & js::ALL, false);
                let _ = groups.join(&rec, JOIN_MASK | CREATE_MASK | m::MTU | m::RATE, &who, &f, &lim);
            }
            let before: Vec<([u8; 16], Guid, u8)> =
                groups.groups().flat_map(|g| g.members().map(move |(p, m)| (g.mgid(), p, m.join_state))).collect();
            let existed: Vec<[u8; 16]> = groups.groups().map(|g| g.mgid()).collect();
            let records: Vec<McMemberRecordRepr> = mirrored
                .iter()
                .map(|&(n, port, bits, mlid, proxy, kind)| {
                    let mut g = group(if n == 6 { bcast() } else { mg(n) }, 0xC000 + mlid);
                    if kind == 1 {
                        g.q_key ^= u32::from(n);
                    }
                    match (port, kind) {
                        (_, 2) => g,
                        (4, _) => member(&g, GONE, bits, proxy),
                        (p, _) => member(&g, 10 + p, bits, proxy),
                    }
                })
                .collect();
            let r = groups.import(&records, &f, &lim);
            prop_assert_eq!(r.records(), records.len());
            prop_assert_eq!(groups.check_invariants(), Ok(()));
            for (mgid, port, bits) in before {
                prop_assert_eq!(groups.group(&mgid).and_then(|g| g.member(port)).map(|m| m.join_state), Some(bits));
            }
            // A group made here sits at the MLID its first record named,
            // unless some group was counted as moved.
            let mut wanted: HashMap<[u8; 16], u16> = HashMap::new();
            for rec in &records {
                wanted.entry(rec.mgid).or_insert(rec.mlid);
            }
            for (mgid, mlid) in wanted {
                let made = groups.group(&mgid).filter(|_| !existed.contains(&mgid));
                if let Some(g) = made {
                    prop_assert!(g.mlid() == mlid || r.mlid_moved > 0, "{:#x} for {:#x}", g.mlid(), mlid);
                    prop_assert!(g.keepers() > 0);
                }
            }
        }
    }
}
