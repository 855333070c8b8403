//! The SA agent's MCMemberRecord requests (IBA 15.2.5.17) and the traps
//! its groups make: SubnAdmGet/GetTable query the groups, SubnAdmSet
//! joins, SubnAdmDelete leaves; traps 66/67 go to subscribers as Reports.
//!
//! # Queries
//! Candidates are matched on the wire bytes like every record
//! (`table::Query`), except MTU, Rate and PacketLifeTime, whose selectors
//! are applied to the group's values (greater, less, exactly, largest) as
//! a join's are. A trusted requester, or one naming a PortGID, gets one
//! record per member (a trusted one also gets each group that has no
//! member, so well-known groups show before anyone joins); any other gets
//! one record per group, its JoinState every kind the group has members
//! of. Untrusted requesters see only groups of partitions their port is a
//! member of, and PortGID, JoinState and ProxyJoin zeroed (IBA 15.2.5.17:
//! "shall be zero, except in the case of a trusted request"; OpenSM does
//! both, `osm_sa_mcmember_record.c`).
//!
//! # Traps 66 and 67
//! Produced by the SA itself (IBA 14.2.5.1: ProducerType class manager,
//! issuer the SM's port), the MGID at DataDetails bytes 6-21 (where traps
//! 64-67 carry their GID, as OpenSM's `ntc_64_67`), to the subscribers whose port is a member of
//! the group's partition, or who are trusted (OpenSM checks the partition).

use std::time::Duration;

use tracing::{info, warn, Level};

use super::fabric::{mlid_count, SnapshotFabric};
use super::{selectors_admit, McError, McEvent, McFabric, McLimits, Requester};
use crate::mad::notice::trap;
use crate::mad::sa::{mc_member_mask as m, sa_status, McMemberRecordRepr, SaRecord, MC_MEMBER_RECORD_LEN};
use crate::mad::{Method, NoticeRepr};
use crate::partition::{DEFAULT_PARTITION, PARTITION_MASK};
use crate::sa::table::{self, Spec};
use crate::sa::wire::{self, Request};
use crate::sa::SaAgent;
use crate::subnet::snapshot::Snapshot;

/// Components untrusted requesters see as zero: PortGID, JoinState,
/// ProxyJoin.
const SECRETS: [usize; 3] = [1, 16, 17];

/// Components a query's selectors apply to instead of being compared.
const SELECTED: u64 =
    m::MTU_SELECTOR | m::MTU | m::RATE_SELECTOR | m::RATE | m::PACKET_LIFE_TIME_SELECTOR | m::PACKET_LIFE_TIME;

impl SaAgent {
    /// A new snapshot: the groups follow its ports and partitions.
    pub(crate) fn sync_multicast(&mut self, snap: &Snapshot) {
        self.mlids = mlid_count(snap);
        let limits = McLimits::from_config(&self.cfg, self.mlids);
        let well_known = snap.sweep.partitions.as_deref().map_or(&[][..], |p| p.groups.as_slice());
        let fabric = SnapshotFabric::new(&self.paths, snap);
        let r = self.mcast.sync(well_known, &fabric, &limits);
        self.stats.mcast.members_dropped += r.members_dropped as u64;
        self.stats.mcast.well_known_unplaced += r.unplaced as u64;
        if r.unplaced > 0 {
            warn!(unplaced = r.unplaced, mlids = self.mlids, "well-known multicast groups found no free MLID");
        }
        if r.created + r.members_dropped + r.groups_dropped > 0 {
            info!(
                well_known_created = r.created,
                members_dropped = r.members_dropped,
                groups_dropped = r.groups_dropped,
                groups = self.mcast.len(),
                "SA multicast groups follow the snapshot"
            );
        }
    }

    /// Reports the traps 66/67 the groups made since the last call.
    pub(crate) fn report_multicast(&mut self, now: Duration) {
        let events = self.mcast.take_events();
        let Some(snap) = self.snapshot.clone().filter(|_| !events.is_empty()) else { return };
        let issuer_gid = self.paths.port_by_lid(snap.master_lid).map(|p| p.gid()).unwrap_or_default();
        for e in events {
            let (number, mgid, pkey) = match e {
                McEvent::Created { mgid, pkey } => {
                    self.stats.reports.mcast_created += 1;
                    (trap::MCAST_GROUP_CREATED, mgid, pkey)
                }
                McEvent::Deleted { mgid, pkey } => {
                    self.stats.reports.mcast_deleted += 1;
                    (trap::MCAST_GROUP_DELETED, mgid, pkey)
                }
            };
            let notice = NoticeRepr::gid_trap(number, mgid, snap.master_lid, issuer_gid);
            let partitions = snap.sweep.partitions.clone();
            let in_partition = move |port| match partitions.as_deref() {
                Some(set) => set.ports.get(&port).and_then(|p| p.membership(pkey)).is_some(),
                None => pkey & PARTITION_MASK == DEFAULT_PARTITION,
            };
            self.forward_where(now, &notice, |s| s.trusted || in_partition(s.owner));
        }
    }

    /// SubnAdmGet / SubnAdmGetTable(MCMemberRecord); see the module docs.
    pub(crate) fn mc_member_query(&mut self, now: Duration, req: &Request<'_>, trusted: bool, snap: &Snapshot) {
        let spec = Spec::of::<McMemberRecordRepr>(&[]);
        let (Ok(q), Some(requester)) =
            (McMemberRecordRepr::parse_bytes(req.data), self.paths.port_by_lid(req.addr.lid).map(|p| p.guid))
        else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        let per_member = trusted || req.mask & m::PORT_GID != 0;
        let fabric = SnapshotFabric::new(&self.paths, snap);
        let result = self.run(req, spec, trusted, |agent, query| {
            query.relax(SELECTED, 0);
            let mut buf = [0u8; MC_MEMBER_RECORD_LEN];
            let mut offer = |r: &McMemberRecordRepr| {
                let _ = SaRecord::emit(r, &mut buf);
                query.offer(&buf)
            };
            for g in agent.mcast.groups() {
                if !trusted && fabric.membership(requester, g.pkey()).is_none() {
                    continue;
                }
                if selectors_admit(g.record(), &q, req.mask).is_err() {
                    continue;
                }
                if !per_member {
                    if !offer(&g.group_record()) {
                        return;
                    }
                    continue;
                }
                for (_, member) in g.members() {
                    if !offer(&g.member_record(member)) {
                        return;
                    }
                }
                let empty = g.members().next().is_none();
                if empty && req.mask & m::PORT_GID == 0 && !offer(g.record()) {
                    return;
                }
            }
        });
        let result = result.map(|(mut bytes, n)| {
            if !trusted {
                for record in bytes.chunks_mut(spec.stride()) {
                    for i in SECRETS {
                        table::zero_component(McMemberRecordRepr::COMPONENTS[i], record);
                    }
                }
            }
            (bytes, n)
        });
        self.answer(now, req, spec, result);
    }

    /// SubnAdmSet (join) and SubnAdmDelete (leave) of an MCMemberRecord:
    /// answered with the member's record as the SA now holds it.
    pub(crate) fn mc_member_change(&mut self, now: Duration, req: &Request<'_>, trusted: bool, snap: &Snapshot) {
        let join = req.method == Method::Set;
        let requester = self.paths.port_by_lid(req.addr.lid).map(|p| p.guid);
        let parsed = McMemberRecordRepr::parse_bytes(req.data);
        let (Ok(rec), Some(requester), false) =
            (parsed, requester, table::unknown_mask::<McMemberRecordRepr>(req.mask))
        else {
            self.count_mcast_error(join);
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        let limits = McLimits::from_config(&self.cfg, self.mlids);
        let fabric = SnapshotFabric::new(&self.paths, snap);
        let result = match fabric.port(requester) {
            None => Err(McError::UnknownPort(requester)),
            Some(port) => {
                let who = Requester { port, trusted };
                if join {
                    self.mcast.join(&rec, req.mask, &who, &fabric, &limits)
                } else {
                    self.mcast.leave(&rec, req.mask, &who, &fabric)
                }
            }
        };
        self.refresh_gauges();
        match result {
            Ok(r) => {
                if join {
                    self.stats.mcast.joins += 1;
                } else {
                    self.stats.mcast.leaves += 1;
                }
                let mut b = [0u8; MC_MEMBER_RECORD_LEN];
                let _ = SaRecord::emit(&r, &mut b);
                self.reply(now, req, 0, &b, 1);
            }
            Err(e) => {
                self.count_mcast_error(join);
                let lid = req.addr.lid;
                let what = if join { "join" } else { "leave" };
                if let McError::Full(_) = e {
                    self.stats.drops.mcast_cap += 1;
                    self.gate(now, Level::WARN, "mcast_cap", || {
                        format!("multicast {what} from LID {lid} refused (ERR_NO_RESOURCES): {e}")
                    });
                } else {
                    self.gate(now, Level::DEBUG, "mcast_refused", || {
                        format!("multicast {what} from LID {lid} refused: {e}")
                    });
                }
                self.refuse(now, req, wire::sa_error(e.status()));
            }
        }
        self.report_multicast(now);
    }

    fn count_mcast_error(&mut self, join: bool) {
        if join {
            self.stats.mcast.join_errors += 1;
        } else {
            self.stats.mcast.leave_errors += 1;
        }
    }
}
