//! A standby's copy of the master's SA state, and the takeover that makes
//! it live.
//!
//! OpenSM keeps what requesters registered only in memory (and in an
//! optional dump file a restarted SM may reload), so a failover loses every
//! ServiceRecord, subscription and alias GUID until the hosts register
//! again. Between ibsm SMs the master pushes each change as it happens
//! ([`super::sync`]); the copy that stream keeps is imported here as a
//! read would be. With any master, a standby also reads its tables every
//! `mirror_interval_s` (the runtime does the reading: trusted GetTables of
//! ServiceRecord, InformInfoRecord, GUIDInfoRecord and MCMemberRecord)
//! and hands them to
//! its agent, which keeps the last copy of each table ([`Mirror::keep`]).
//! When the agent starts serving as master it imports the copy
//! ([`import`]) into its live state, adding only what is not there.
//!
//! # What a record becomes
//! - **ServiceRecord**: stored as read, ServiceKey included (the read is
//!   trusted). Its owner, whose leaving removes it, is the port the
//!   ServiceGID names; a record whose ServiceGID names no port of the new
//!   master's fabric is skipped. The lease is re-armed in full from the
//!   record's ServiceLease: neither OpenSM nor ibsm shows the time left
//!   (OpenSM counts it down in a field beside the record, osm_svcr_t's
//!   lease_period, and answers the ServiceLease as registered), so an
//!   imported record may outlive the master's deadline by up to one lease;
//!   a client renewing on time never notices.
//! - **InformInfoRecord**: SubscriberGID and InformInfo (its QPN the
//!   subscriber's QP, which a trusted read shows, IBA C15-0.2-1.16). Reports
//!   go to the subscriber port's LID in the new master's snapshot, SL 0; a
//!   subscriber gone from it is skipped. A QPN of 0 (hidden by an
//!   untrusted read) becomes QP1, where the kernel's MAD layer listens. The
//!   record does not say whether the subscriber was trusted: subscriptions
//!   naming a security trap (256-259) are, since a master only accepts
//!   those from trusted requesters; all others are not (a wildcard
//!   subscription then misses security traps rather than leaking them).
//! - **GUIDInfoRecord**: every non-zero entry other than index 0 of block
//!   0 (the port's own GUID) is an alias. A record names its port by LID;
//!   block 0 of the same table names the GUID at that LID, so aliases are
//!   kept by port GUID and survive a LID change; a LID no block 0 named is
//!   resolved in the new master's snapshot.
//! - **MCMemberRecord**: a trusted GetTable answers one record per member
//!   (PortGID, JoinState, ProxyJoin shown) and one per group without
//!   members. [`McGroups::import`] remakes the groups at the old master's
//!   MLIDs, which the switches' MFTs still hold and the members send to,
//!   and adds the members whose port is in the new master's fabric and
//!   the group's partition; a group here whose parameters disagree gets
//!   none. The membership version then changes, so the SM routes the
//!   groups and writes the MFT blocks that differ (after a takeover it
//!   reads them first: on the same fabric few or none do). Without this a
//!   failover would leave the new master with no members, and the first
//!   join of, say, the IPoIB broadcast group would route a tree to that
//!   one host and take every other member's ports out of the MFTs, while
//!   the hosts are not told to join again (a takeover with a current copy
//!   sets no ClientReregister; a stale or missing one does, see
//!   [`super::sync`]).
//!
//! Nothing already present is overwritten: a ServiceRecord with the same
//! RID, the same subscription, an alias index already taken stay as they
//! are (a multicast member keeps its JoinState). The copy is bounded by
//! the live caps (`max_services`, `max_subscriptions`, `max_alias_guids`,
//! `max_mcast_members` records with a member and `max_mcast_groups`
//! groups), and the import by the live per-port caps too.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::guids::{AliasGuids, AliasImport};
use super::index::{gid_guid, PortAt};
use super::inform::{is_security_trap, Subscription, Subscriptions};
use super::mcast::{McFabric, McGroups, McLimits};
use super::path::PathIndex;
use super::services::Services;
use crate::config::sa::SaConfig;
use crate::datagram::MadAddress;
use crate::mad::guid_info::GUID_BLOCK_ENTRIES;
use crate::mad::sa::{
    join_state, GuidInfoRecordRepr, InformInfoRecordRepr, InformKind, McMemberRecordRepr, ServiceRecordRepr,
};
use crate::types::{Guid, Lid};

/// One mirror read: each table the master's SA answered; `None` for one
/// whose read failed (the copy from an earlier read is kept then).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MirrorRead {
    pub services: Option<Vec<ServiceRecordRepr>>,
    pub subscriptions: Option<Vec<InformInfoRecordRepr>>,
    pub guid_info: Option<Vec<GuidInfoRecordRepr>>,
    /// One record per member, and one per group without members.
    pub mcast_members: Option<Vec<McMemberRecordRepr>>,
}

impl MirrorRead {
    /// No table answered.
    pub fn is_empty(&self) -> bool {
        self.services.is_none()
            && self.subscriptions.is_none()
            && self.guid_info.is_none()
            && self.mcast_members.is_none()
    }
}

/// The port an alias belongs to, as the mirrored table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortKey {
    /// Block 0 of the same table named the port's GUID.
    Guid(Guid),
    /// Only the LID is known; resolved at import.
    Lid(Lid),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Alias {
    port: PortKey,
    /// Index in the port's GUIDInfo table (block × 8 + entry), never 0.
    index: u16,
    guid: Guid,
}

/// The last copy of the master's tables.
#[derive(Debug, Default)]
pub(crate) struct Mirror {
    services: Vec<ServiceRecordRepr>,
    subscriptions: Vec<InformInfoRecordRepr>,
    aliases: Vec<Alias>,
    mcast: Vec<McMemberRecordRepr>,
    /// Groups among `mcast`.
    mcast_groups: usize,
    /// Some read was kept since the last import.
    held: bool,
}

impl Mirror {
    /// Keeps the tables `read` carries in place of the earlier copies,
    /// each cut at its cap; returns how many records the caps left out.
    pub fn keep(&mut self, read: MirrorRead, cfg: &SaConfig) -> usize {
        let mut over = 0;
        if let Some(mut s) = read.services {
            over += s.len().saturating_sub(cfg.max_services);
            s.truncate(cfg.max_services);
            self.services = s;
            self.held = true;
        }
        if let Some(mut s) = read.subscriptions {
            over += s.len().saturating_sub(cfg.max_subscriptions);
            s.truncate(cfg.max_subscriptions);
            self.subscriptions = s;
            self.held = true;
        }
        if let Some(records) = read.guid_info {
            let (aliases, left_out) = aliases_of(&records, cfg.max_alias_guids);
            over += left_out;
            self.aliases = aliases;
            self.held = true;
        }
        if let Some(records) = read.mcast_members {
            let (kept, groups, left_out) = mcast_of(records, cfg.max_mcast_members, cfg.max_mcast_groups);
            over += left_out;
            (self.mcast, self.mcast_groups) = (kept, groups);
            self.held = true;
        }
        over
    }

    /// ServiceRecords, subscriptions and alias GUIDs held.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.services.len(), self.subscriptions.len(), self.aliases.len())
    }

    /// Multicast groups and member records held.
    pub fn mcast_counts(&self) -> (usize, usize) {
        let members = self.mcast.iter().filter(|r| r.join_state & join_state::ALL != 0).count();
        (self.mcast_groups, members)
    }

    /// The copy, if a read was kept since the last take; the mirror is
    /// empty after.
    pub fn take(&mut self) -> Option<Mirror> {
        if !self.held {
            return None;
        }
        Some(std::mem::take(self))
    }
}

/// The aliases of a GUIDInfoRecord table, at most `cap`; and how many
/// more there were.
fn aliases_of(records: &[GuidInfoRecordRepr], cap: usize) -> (Vec<Alias>, usize) {
    // Index 0 of block 0 is the port's GUID (IBA 14.2.5.5: GUID 0 is the
    // port GUID); it names the port of every block at that LID.
    let named: HashMap<Lid, Guid> = records
        .iter()
        .filter(|r| r.block_num == 0 && r.guid_info.guids[0].0 != 0)
        .map(|r| (r.lid, r.guid_info.guids[0]))
        .collect();
    let mut out = Vec::new();
    let mut over = 0;
    for r in records {
        let port = named.get(&r.lid).map_or(PortKey::Lid(r.lid), |&g| PortKey::Guid(g));
        for (slot, &guid) in r.guid_info.guids.iter().enumerate() {
            let index = u16::from(r.block_num) * GUID_BLOCK_ENTRIES as u16 + slot as u16;
            if index == 0 || guid.0 == 0 {
                continue;
            }
            if out.len() >= cap {
                over += 1;
                continue;
            }
            out.push(Alias { port, index, guid });
        }
    }
    (out, over)
}

/// The MCMemberRecords of at most `max_groups` groups and `max_members`
/// members (records of a group beyond are left out, as are members past
/// the cap); the groups kept, and how many records were left out.
fn mcast_of(
    records: Vec<McMemberRecordRepr>,
    max_members: usize,
    max_groups: usize,
) -> (Vec<McMemberRecordRepr>, usize, usize) {
    let mut groups: HashSet<[u8; 16]> = HashSet::new();
    let (mut members, mut over) = (0, 0);
    let mut kept = Vec::with_capacity(records.len().min(max_members.saturating_add(max_groups)));
    for r in records {
        let is_member = r.join_state & join_state::ALL != 0;
        let known = groups.contains(&r.mgid);
        if (!known && groups.len() >= max_groups) || (is_member && members >= max_members) {
            over += 1;
            continue;
        }
        if !known {
            groups.insert(r.mgid);
        }
        members += usize::from(is_member);
        kept.push(r);
    }
    (kept, groups.len(), over)
}

/// What one import added and left out, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Imported {
    pub services: usize,
    pub subscriptions: usize,
    pub alias_guids: usize,
    /// Multicast groups made, and members added to groups made or here.
    pub mcast_groups: usize,
    pub mcast_members: usize,
    /// Multicast records of a group here whose parameters disagree.
    pub mcast_mismatch: usize,
    /// Multicast records of a group not made for want of a member that
    /// keeps it (an empty group the partitions here do not declare).
    pub mcast_unkept: usize,
    /// Multicast groups that could not keep the old master's MLID.
    pub mcast_mlid_moved: usize,
    /// Already there (same RID, same subscription, the alias index taken,
    /// the multicast member in its group).
    pub present: usize,
    /// Its port is not in the new master's fabric.
    pub port_gone: usize,
    /// An alias GUID in use (some port's own or another port's alias), or
    /// at or past the port's GUIDCap; a multicast member out of its
    /// group's partition here, or a record no master makes.
    pub refused: usize,
    /// Over a per-port or total cap of the live state.
    pub over_cap: usize,
}

/// The live state an import adds to.
pub(crate) struct Live<'a> {
    pub services: &'a mut Services,
    pub subscriptions: &'a mut Subscriptions,
    pub aliases: &'a mut AliasGuids,
    pub mcast: &'a mut McGroups,
    /// The new master's snapshot as the group manager sees it, and its
    /// caps and MLIDs.
    pub mcast_fabric: &'a dyn McFabric,
    pub mcast_limits: McLimits,
}

/// Adds `mirror` to the live state, resolving ports in `ports` (the new
/// master's snapshot); `guid_cap` is a port's GUIDCap there.
pub(crate) fn import(
    mirror: Mirror,
    now: Duration,
    cfg: &SaConfig,
    ports: &PathIndex,
    guid_cap: impl Fn(&PortAt) -> u16,
    live: Live<'_>,
) -> Imported {
    let mut r = Imported::default();
    for rec in mirror.services {
        let Some(owner) = ports.port_by_guid(gid_guid(&rec.service_gid)).map(|p| p.guid) else {
            r.port_gone += 1;
            continue;
        };
        match live.services.import(now, rec, owner, cfg.max_services_per_port, cfg.max_services) {
            Ok(true) => r.services += 1,
            Ok(false) => r.present += 1,
            Err(_) => r.over_cap += 1,
        }
    }
    for rec in mirror.subscriptions {
        let Some(port) = ports.port_by_guid(gid_guid(&rec.subscriber_gid)) else {
            r.port_gone += 1;
            continue;
        };
        match live.subscriptions.import(
            subscription(&rec, &port),
            cfg.max_subscriptions_per_port,
            cfg.max_subscriptions,
        ) {
            Ok(true) => r.subscriptions += 1,
            Ok(false) => r.present += 1,
            Err(_) => r.over_cap += 1,
        }
    }
    for a in mirror.aliases {
        let port = match a.port {
            PortKey::Guid(g) => ports.port_by_guid(g),
            PortKey::Lid(lid) => ports.port_by_lid(lid).filter(|p| p.base_lid == lid),
        };
        let Some(port) = port else {
            r.port_gone += 1;
            continue;
        };
        let outcome = live.aliases.import(
            port.guid,
            a.index,
            a.guid,
            guid_cap(&port),
            |g| ports.has_port(g),
            cfg.max_alias_guids_per_port,
            cfg.max_alias_guids,
        );
        match outcome {
            AliasImport::Added => r.alias_guids += 1,
            AliasImport::Present => r.present += 1,
            AliasImport::Refused => r.refused += 1,
            AliasImport::OverCap => r.over_cap += 1,
        }
    }
    let m = live.mcast.import(&mirror.mcast, live.mcast_fabric, &live.mcast_limits);
    (r.mcast_groups, r.mcast_members, r.mcast_mismatch, r.mcast_unkept, r.mcast_mlid_moved) =
        (m.groups, m.members, m.mismatch, m.unkept, m.mlid_moved);
    r.present += m.present;
    r.port_gone += m.port_gone;
    r.refused += m.refused;
    r.over_cap += m.over_cap;
    r
}

/// The live subscription an InformInfoRecord stands for (see the module
/// docs).
fn subscription(rec: &InformInfoRecordRepr, port: &PortAt) -> Subscription {
    let mut info = rec.inform_info;
    info.subscribe = true;
    info.qpn = match info.qpn & 0x00FF_FFFF {
        0 => 1,
        q => q,
    };
    let trusted = matches!(info.kind, InformKind::Generic { trap_number, .. } if is_security_trap(trap_number));
    let addr = MadAddress { lid: port.base_lid, qpn: info.qpn, qkey: MadAddress::QP1_QKEY, sl: 0, pkey_index: 0 };
    Subscription { info, subscriber_gid: rec.subscriber_gid, owner: port.guid, addr, trusted }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{drain, fetch, other_hosts, query, sm_lid, snapshot, swept, SA_KEY};
    use super::super::{index, SaAgent, Serving};
    use super::*;
    use crate::mad::sa::{guid_info_mask, inform_info::wildcard, service_mask, InformInfoRepr, SA_DATA_OFFSET};
    use crate::mad::{GuidInfoBlockRepr, NoticeRepr, NoticeType};
    use crate::sa::mcast::ipoib_broadcast;
    use crate::transport::Datagram;

    const S: Duration = Duration::from_secs(1);
    const RID: u64 = service_mask::SERVICE_ID | service_mask::SERVICE_GID;
    /// A LID no port of the fixture holds.
    const NO_LID: u16 = 0xBFF0;

    fn gid(g: Guid) -> [u8; 16] {
        index::gid(index::DEFAULT_SUBNET_PREFIX, g)
    }

    /// A ServiceRecord as a master stores it (P_Key filled in).
    fn service(id: u64, owner: Guid, lease: u32, key: u8, name: &str) -> ServiceRecordRepr {
        let mut r = ServiceRecordRepr {
            service_id: id,
            service_gid: gid(owner),
            service_pkey: 0xFFFF,
            service_lease: lease,
            service_key: [key; 16],
            ..ServiceRecordRepr::default()
        };
        r.set_name(name).unwrap();
        r
    }

    fn subscription_record(subscriber: Guid, trap_number: u16, qpn: u32) -> InformInfoRecordRepr {
        InformInfoRecordRepr {
            subscriber_gid: gid(subscriber),
            enumeration: 0,
            inform_info: InformInfoRepr {
                gid: [0; 16],
                lid_range_begin: wildcard::LID,
                lid_range_end: 0,
                subscribe: true,
                notice_type: wildcard::TYPE,
                kind: InformKind::Generic { trap_number, producer_type: wildcard::PRODUCER_TYPE },
                qpn,
                resp_time_value: 0,
            },
        }
    }

    fn guid_block(lid: u16, block_num: u8, guids: &[(usize, u64)]) -> GuidInfoRecordRepr {
        let mut guid_info = GuidInfoBlockRepr::default();
        for &(i, g) in guids {
            guid_info.guids[i] = Guid(g);
        }
        GuidInfoRecordRepr { lid: Lid(lid), block_num, guid_info }
    }

    /// A standby's agent with the fixture's snapshot.
    fn standby(cfg: SaConfig) -> SaAgent {
        let snap = snapshot(1, swept().clone());
        let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..cfg }, snap.master);
        a.new_snapshot(Duration::ZERO, snap);
        a
    }

    fn services_read(a: &mut SaAgent, sm_key: u64) -> Vec<ServiceRecordRepr> {
        fetch(a, &query(0x12, &ServiceRecordRepr::default(), 0, sm_key, sm_lid())).parse()
    }

    fn guid_block_read(a: &mut SaAgent, lid: u16, block: u8) -> GuidInfoBlockRepr {
        let key = GuidInfoRecordRepr { lid: Lid(lid), block_num: block, ..Default::default() };
        let mask = guid_info_mask::LID | guid_info_mask::BLOCK_NUM;
        fetch(a, &query(0x01, &key, mask, SA_KEY, sm_lid())).parse::<GuidInfoRecordRepr>()[0].guid_info
    }

    /// The Reports among `out`: (destination LID, QPN, trap number).
    fn reports(out: &[Datagram]) -> Vec<(u16, u32, u16)> {
        out.iter()
            .filter(|d| d.mad[3] == 0x06)
            .map(|d| {
                let n = NoticeRepr::parse_bytes(&d.mad[SA_DATA_OFFSET..SA_DATA_OFFSET + 80]).unwrap();
                (d.addr.lid.0, d.addr.qpn, n.trap_number)
            })
            .collect()
    }

    #[test]
    fn a_takeover_adds_the_mirror_to_what_is_there_and_overwrites_nothing() {
        let hs = other_hosts();
        let ((h1, h1_lid), (h2, h2_lid)) = (hs[0], hs[1]);
        let mut a = standby(SaConfig::default());
        // Live state of its own from an earlier time as master.
        a.set_serving(Duration::ZERO, Serving::Master);
        let ours = service(0x1000, h1, u32::MAX, 0, "ours");
        assert_eq!(fetch(&mut a, &query(0x02, &ours, RID | service_mask::SERVICE_NAME, 0, h1_lid)).status, 0);
        let alias = guid_block(h1_lid, 0, &[(1, 0xA1)]);
        let alias_mask = guid_info_mask::LID | guid_info_mask::BLOCK_NUM | guid_info_mask::guid(1);
        assert_eq!(fetch(&mut a, &query(0x02, &alias, alias_mask, 0, h1_lid)).status, 0);
        a.set_serving(S, Serving::NotMaster);

        let read = MirrorRead {
            services: Some(vec![
                service(0x1000, h1, 60, 0, "theirs"),
                service(0x2000, h1, 60, 7, "keyed"),
                service(0x3000, Guid(0xDEAD), u32::MAX, 0, "port gone"),
            ]),
            subscriptions: Some(vec![
                subscription_record(h1, 65, 1),
                subscription_record(Guid(0xDEAD), 65, 1),
                subscription_record(h1, 256, 0),
            ]),
            guid_info: Some(vec![
                guid_block(h1_lid, 0, &[(0, h1.0), (1, 0xB1), (2, 0xB2)]),
                // Block 1 names no GUID: block 0 at the same LID does.
                guid_block(h1_lid, 1, &[(0, 0xB8)]),
                guid_block(NO_LID, 0, &[(0, 0xDEAD), (1, 0xB9)]),
                guid_block(h2_lid, 0, &[(0, h2.0), (1, h1.0)]),
            ]),
            mcast_members: None,
        };
        a.handle_mirror(2 * S, read);
        let m = a.stats().mirror;
        assert_eq!((m.reads, m.held_services, m.held_subscriptions, m.held_alias_guids), (1, 3, 3, 5));
        assert_eq!(a.stats().services, 1, "nothing live changes before the takeover");

        a.set_serving(100 * S, Serving::Master);
        let m = a.stats().mirror;
        assert_eq!(m.takeovers, 1);
        assert_eq!((m.imported_services, m.imported_subscriptions, m.imported_alias_guids), (1, 2, 2));
        assert_eq!((m.skipped_present, m.skipped_port_gone, m.skipped_refused, m.skipped_over_cap), (2, 3, 1, 0));
        assert_eq!((m.held_services, m.held_subscriptions, m.held_alias_guids), (0, 0, 0));
        assert_eq!((a.stats().services, a.stats().subscriptions, a.stats().alias_guids), (2, 2, 3));

        // ServiceRecords: ours untouched, theirs with its key, shown only
        // to trusted requesters.
        let trusted = services_read(&mut a, SA_KEY);
        assert_eq!(trusted.len(), 2);
        let find = |rs: &[ServiceRecordRepr], id| rs.iter().find(|r| r.service_id == id).cloned().unwrap();
        assert_eq!(find(&trusted, 0x1000).name(), "ours");
        assert_eq!(find(&trusted, 0x1000).service_lease, u32::MAX);
        assert_eq!(find(&trusted, 0x2000).service_key, [7; 16]);
        assert_eq!(find(&services_read(&mut a, 0), 0x2000).service_key, [0; 16]);
        // The key protects it as it did on the old master.
        let del = fetch(&mut a, &query(0x15, &service(0x2000, h1, 0, 0, ""), RID, 0, h1_lid));
        assert_ne!(del.status, 0, "deleted without its key");
        // Its lease runs from the takeover.
        a.handle_timeout(159 * S);
        assert_eq!(a.stats().services, 2);
        a.handle_timeout(160 * S);
        assert_eq!((a.stats().services, a.stats().leases_expired), (1, 1));

        // Alias GUIDs: index 1 kept ours, 2 and block 1 came from the mirror.
        let b0 = guid_block_read(&mut a, h1_lid, 0);
        assert_eq!((b0.guids[0], b0.guids[1], b0.guids[2]), (h1, Guid(0xA1), Guid(0xB2)));
        assert_eq!(guid_block_read(&mut a, h1_lid, 1).guids[0], Guid(0xB8));
        assert_eq!(guid_block_read(&mut a, h2_lid, 0).guids[1], Guid(0), "a port's own GUID is no alias");

        // Subscriptions: Reports to the subscriber's port on QP1; the
        // security-trap one is trusted, the other not.
        let now = 200 * S;
        let bad_key = NoticeRepr {
            is_generic: true,
            notice_type: NoticeType::Security,
            producer_type: 1,
            trap_number: 256,
            issuer_lid: Lid(h2_lid),
            notice_toggle: false,
            notice_count: 0,
            data_details: [0; 54],
            issuer_gid: [0; 16],
        };
        a.handle_trap(now, &bad_key, Lid(h2_lid));
        assert_eq!(reports(&drain(&mut a, now)), vec![(h1_lid, 1, 256)]);
        let mut report = swept().clone();
        report.lids.ranges.remove(&h2);
        a.new_snapshot(now, snapshot(2, report));
        assert_eq!(reports(&drain(&mut a, now)), vec![(h1_lid, 1, 65)]);

        // The mirror was used up: a second takeover imports nothing.
        a.set_serving(now, Serving::NotMaster);
        a.set_serving(now, Serving::Master);
        assert_eq!(a.stats().mirror.takeovers, 1);
    }

    #[test]
    fn the_mirror_is_capped_kept_table_by_table_and_ignored_while_master() {
        let hs = other_hosts();
        let ((h1, h1_lid), (h2, _)) = (hs[0], hs[1]);
        let cfg = SaConfig {
            max_services: 2,
            max_services_per_port: 1,
            max_subscriptions: 1,
            max_alias_guids: 3,
            ..SaConfig::default()
        };
        let mut a = standby(cfg);
        a.handle_mirror(
            S,
            MirrorRead {
                services: Some(vec![
                    service(1, h1, u32::MAX, 0, "a"),
                    service(2, h1, u32::MAX, 0, "b"),
                    service(3, h2, u32::MAX, 0, "c"),
                ]),
                subscriptions: Some(vec![subscription_record(h1, 65, 1), subscription_record(h2, 65, 1)]),
                guid_info: Some(vec![guid_block(h1_lid, 0, &[(0, h1.0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)])]),
                mcast_members: None,
            },
        );
        let m = a.stats().mirror;
        assert_eq!(m.over_cap, 1 + 1 + 2);
        assert_eq!((m.held_services, m.held_subscriptions, m.held_alias_guids), (2, 1, 3));
        // A read where one table failed and one was empty.
        a.handle_mirror(2 * S, MirrorRead { subscriptions: Some(vec![]), ..Default::default() });
        let m = a.stats().mirror;
        assert_eq!((m.reads, m.held_services, m.held_subscriptions, m.held_alias_guids), (2, 2, 0, 3));

        a.set_serving(3 * S, Serving::Master);
        let m = a.stats().mirror;
        assert_eq!((m.imported_services, m.imported_subscriptions, m.imported_alias_guids), (1, 0, 3));
        assert_eq!(m.skipped_over_cap, 1, "the second of h1's services is past its per-port cap");
        // Serving now: a read still under way at the takeover is dropped.
        a.handle_mirror(4 * S, MirrorRead { services: Some(vec![service(9, h2, 0, 0, "late")]), ..Default::default() });
        assert_eq!((a.stats().mirror.ignored, a.stats().mirror.held_services), (1, 0));
        assert_eq!(a.stats().services, 1);
    }

    #[test]
    fn a_takeover_waits_for_the_first_snapshot() {
        let (h1, h1_lid) = other_hosts()[0];
        let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, Guid(1));
        a.handle_mirror(
            S,
            MirrorRead {
                subscriptions: Some(vec![subscription_record(h1, 65, 0x42)]),
                guid_info: Some(vec![guid_block(h1_lid, 1, &[(3, 0xB3)])]),
                ..Default::default()
            },
        );
        a.set_serving(2 * S, Serving::Master);
        assert_eq!(a.stats().mirror.takeovers, 0, "no ports to find yet");
        a.new_snapshot(3 * S, snapshot(1, swept().clone()));
        let m = a.stats().mirror;
        assert_eq!((m.takeovers, m.imported_subscriptions, m.imported_alias_guids), (1, 1, 1));
        // Block 1 alone named its port by LID, resolved in the snapshot.
        assert_eq!(guid_block_read(&mut a, h1_lid, 1).guids[3], Guid(0xB3));
        let iir = fetch(&mut a, &query(0x12, &InformInfoRecordRepr::default(), 0, SA_KEY, sm_lid()));
        let rec = &iir.parse::<InformInfoRecordRepr>()[0];
        assert_eq!((rec.subscriber_gid, rec.inform_info.qpn), (gid(h1), 0x42));
        // Untrusted requesters are not shown the subscriber's QP.
        let iir = fetch(&mut a, &query(0x12, &InformInfoRecordRepr::default(), 0, 0, sm_lid()));
        assert_eq!(iir.parse::<InformInfoRecordRepr>()[0].inform_info.qpn, 0);
    }

    /// The fixture's snapshot with the default partition holding every CA
    /// port, and its IPoIB broadcast group.
    fn partitioned(sequence: u64) -> std::sync::Arc<crate::subnet::snapshot::Snapshot> {
        use crate::partition::{GroupParams, Membership, PartitionSet, PortPartitions, WellKnownGroup};
        let base = snapshot(sequence, swept().clone());
        let mut set = PartitionSet {
            groups: vec![WellKnownGroup {
                mgid: ipoib_broadcast(2, 0xffff),
                pkey: 0xffff,
                params: GroupParams::default(),
                ipoib_broadcast: true,
            }],
            ..Default::default()
        };
        let subnet = &base.sweep.subnet;
        for id in subnet.ids().filter(|&id| !subnet.node(id).is_switch()) {
            let members = vec![(0x7fff, Membership::Full)];
            set.ports.insert(subnet.node(id).port_guid(1), PortPartitions { members, index0: None });
        }
        std::sync::Arc::new(crate::subnet::snapshot::Snapshot {
            sequence,
            taken_at: std::time::SystemTime::UNIX_EPOCH,
            master: base.master,
            master_lid: base.master_lid,
            sweep: crate::subnet::SweepReport { partitions: Some(std::sync::Arc::new(set)), ..swept().clone() },
        })
    }

    /// Every MCMemberRecord, read trusted.
    fn mcast_read(a: &mut SaAgent) -> Vec<McMemberRecordRepr> {
        fetch(a, &query(0x12, &McMemberRecordRepr::default(), 0, SA_KEY, sm_lid())).parse()
    }

    /// IPoIB's joins from `port` at `lid`: the broadcast group, then an
    /// IPv4 group made with its parameters; the MLIDs answered.
    fn ipoib_joins(a: &mut SaAgent, port: Guid, lid: u16, group: [u8; 16]) -> (u16, u16) {
        use crate::mad::sa::mc_member_mask as m;
        use crate::sa::mcast::{CREATE_MASK, JOIN_MASK};
        let q = McMemberRecordRepr { mgid: ipoib_broadcast(2, 0xffff), ..Default::default() };
        let bcast = fetch(a, &query(0x01, &q, m::MGID, 0, lid)).parse::<McMemberRecordRepr>()[0];
        let join = McMemberRecordRepr { port_gid: gid(port), join_state: join_state::FULL, ..bcast };
        let b = fetch(a, &query(0x02, &join, JOIN_MASK | m::Q_KEY, 0, lid));
        let mask = JOIN_MASK | CREATE_MASK | m::MTU_SELECTOR | m::MTU | m::RATE_SELECTOR | m::RATE;
        let g = fetch(a, &query(0x02, &McMemberRecordRepr { mgid: group, ..join }, mask, 0, lid));
        assert_eq!((b.status, g.status), (0, 0));
        (b.parse::<McMemberRecordRepr>()[0].mlid, g.parse::<McMemberRecordRepr>()[0].mlid)
    }

    #[test]
    fn a_takeover_keeps_the_multicast_groups_at_their_mlids() {
        let hs = other_hosts();
        let ((h1, l1), (h2, l2), (h3, l3)) = (hs[0], hs[1], hs[2]);
        let all_hosts = crate::cmd::mcast::ipv4_group(2, 0xffff, [224, 0, 0, 1]);
        let other = crate::cmd::mcast::ipv4_group(2, 0xffff, [239, 1, 1, 1]);
        // The master: two hosts up, h2 also in a group of its own.
        let snap = partitioned(1);
        let mut master = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snap.master);
        master.new_snapshot(Duration::ZERO, snap);
        master.set_serving(Duration::ZERO, Serving::Master);
        assert_eq!(ipoib_joins(&mut master, h1, l1, all_hosts), (0xC000, 0xC001));
        assert_eq!(ipoib_joins(&mut master, h2, l2, other), (0xC000, 0xC002));
        assert_eq!(ipoib_joins(&mut master, h2, l2, all_hosts).1, 0xC001);
        let theirs = mcast_read(&mut master);
        assert_eq!(theirs.len(), 5);

        // The standby, whose partitions declare the broadcast group too.
        let snap = partitioned(1);
        let mut a = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, snap.master);
        a.new_snapshot(Duration::ZERO, snap);
        a.handle_mirror(S, MirrorRead { mcast_members: Some(theirs.clone()), ..Default::default() });
        assert_eq!(a.multicast().member_count(), 0, "nothing live changes before the takeover");
        let version = a.multicast().version();
        a.set_serving(2 * S, Serving::Master);
        assert!(a.multicast().version() > version, "the SM routes the groups");
        let key = |r: &McMemberRecordRepr| (r.mgid, r.mlid, r.port_gid, r.join_state, r.q_key, r.mtu, r.rate);
        let mut ours: Vec<_> = mcast_read(&mut a).iter().map(key).collect();
        let mut want: Vec<_> = theirs.iter().map(key).collect();
        ours.sort();
        want.sort();
        assert_eq!(ours, want, "the same groups, MLIDs and members");
        assert_eq!(a.multicast().mcast_table(), master.multicast().mcast_table());
        assert!(drain(&mut a, 2 * S).is_empty(), "no trap 66 for groups the old master made");

        // A new host's joins keep the old members in.
        assert_eq!(ipoib_joins(&mut a, h3, l3, all_hosts), (0xC000, 0xC001));
        let table = a.multicast().mcast_table();
        let mut members = [h1, h2, h3];
        members.sort();
        assert_eq!(table.members(Lid(0xC000)), &members[..]);
        assert_eq!(table.members(Lid(0xC001)), &members[..]);
        assert_eq!(table.members(Lid(0xC002)), &[h2]);
    }

    #[test]
    fn the_multicast_mirror_is_capped_by_groups_and_members() {
        let g = |n: u8| {
            let mut mgid = [0u8; 16];
            (mgid[0], mgid[1], mgid[15]) = (0xFF, 0x15, n);
            McMemberRecordRepr { mgid, mlid: 0xC000 + u16::from(n), ..Default::default() }
        };
        let m = |n: u8, port: u64| McMemberRecordRepr { port_gid: gid(Guid(port)), join_state: 1, ..g(n) };
        let records = vec![m(1, 10), m(1, 11), g(2), m(3, 10), m(1, 12), m(2, 10)];
        let (kept, groups, over) = mcast_of(records.clone(), 3, 2);
        // Group 3 is past 2 groups; group 2's member past 3 members (group
        // 2's own record is none).
        assert_eq!(kept, vec![m(1, 10), m(1, 11), g(2), m(1, 12)]);
        assert_eq!((groups, over), (2, 2));
        let mut mirror = Mirror::default();
        let cfg = SaConfig { max_mcast_members: 3, max_mcast_groups: 2, ..SaConfig::default() };
        assert_eq!(mirror.keep(MirrorRead { mcast_members: Some(records), ..Default::default() }, &cfg), 2);
        assert_eq!(mirror.mcast_counts(), (2, 3));
        // A read whose MCMemberRecord table failed keeps the copy.
        mirror.keep(MirrorRead { services: Some(vec![]), ..Default::default() }, &cfg);
        assert_eq!(mirror.mcast_counts(), (2, 3));
        assert!(!MirrorRead { mcast_members: Some(vec![]), ..Default::default() }.is_empty());
    }

    #[test]
    fn guid_tables_become_aliases_by_port() {
        let records = [
            guid_block(5, 1, &[(0, 0x18), (7, 0x1F)]),
            guid_block(5, 0, &[(0, 0x500), (1, 0x11)]),
            guid_block(6, 2, &[(2, 0x22)]),
            guid_block(7, 0, &[(0, 0x700)]),
        ];
        let (aliases, over) = aliases_of(&records, 10);
        let g = |x| PortKey::Guid(Guid(x));
        assert_eq!(
            aliases,
            vec![
                Alias { port: g(0x500), index: 8, guid: Guid(0x18) },
                Alias { port: g(0x500), index: 15, guid: Guid(0x1F) },
                Alias { port: g(0x500), index: 1, guid: Guid(0x11) },
                Alias { port: PortKey::Lid(Lid(6)), index: 18, guid: Guid(0x22) },
            ]
        );
        assert_eq!(over, 0);
        assert_eq!(aliases_of(&records, 3).1, 1);
        assert!(MirrorRead::default().is_empty());
    }

    #[test]
    fn recorded_subscriptions_become_live_ones() {
        let (h1, _) = other_hosts()[0];
        let snap = snapshot(1, swept().clone());
        let ports = PathIndex::build(&snap.sweep);
        let port = ports.port_by_guid(h1).unwrap();
        let mut rec = subscription_record(h1, 0xFFFF, 0x0100_0007);
        rec.inform_info.subscribe = false;
        let s = subscription(&rec, &port);
        assert!(s.info.subscribe);
        assert_eq!((s.info.qpn, s.addr.qpn, s.addr.lid, s.owner), (7, 7, port.base_lid, h1));
        assert!(!s.trusted, "a wildcard subscription is not taken as trusted");
        assert!(subscription(&subscription_record(h1, 259, 1), &port).trusted);
        assert_eq!(subscription(&subscription_record(h1, 64, 0), &port).addr.qpn, 1);
    }
}
