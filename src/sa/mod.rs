//! The subnet administrator (class 0x03, version 2): an I/O-free core that
//! answers SA queries from the last sweep's snapshot, keeps what requesters
//! register (ServiceRecords, InformInfo subscriptions, alias GUIDs,
//! multicast group memberships: [`mcast`]), and sends Reports to
//! subscribers.
//!
//! ```text
//!  runtime ── handle_mad(now, MAD) ──► SaAgent ── poll_transmit(now) ──► answers, RMPP segments, Reports
//!          ── new_snapshot(now, snap)     │      poll_timeout / handle_timeout(now): RMPP resends,
//!          ── set_serving(now, role)      │          Report retries, ServiceRecord leases
//!          ── handle_trap(now, notice) ───┤
//!          ── handle_mirror(now, read) ───┘   a standby's copy of the master's tables
//! ```
//!
//! It never reads a clock or touches a socket: `now` is an argument
//! (quinn-proto's shape, STYLE.md). Records are emitted to wire bytes once
//! per snapshot ([`table`]) and every query is matched on the wire bytes
//! with the record's component table (IBA 15.2.1.3).
//!
//! # Serving
//! The SA answers only while its SM is MASTER and after its first master
//! sweep (IBA C15-0.1.3, as OpenSM). Otherwise a request gets MAD status
//! BUSY (IBA 13.4.7: try again later), or nothing with
//! `not_serving = "silent"` (OpenSM's behaviour).
//!
//! # Trust
//! A request whose SM_Key is the configured `sa_key` (non-zero) is trusted;
//! SM_Key 0 is an ordinary requester, whose answers have PortInfoRecord
//! M_Key, ServiceRecord ServiceKey and SMInfoRecord SM_Key zeroed, who may
//! not read P_KeyTableRecords nor subscribe to the security traps
//! 256-259. Any other SM_Key is dropped (IBA C15-0.1.5, as OpenSM).
//!
//! # Partitions
//! An ordinary requester sees the records of the ports its own port (the
//! one its LID names) shares a partition with, as OpenSM: NodeRecords,
//! PortInfoRecords, SwitchInfoRecords, LinkRecords, forwarding table,
//! P_Key, SL-to-VL and VL arbitration records, SMInfoRecords and
//! GUIDInfoRecords ([`visibility`]); PathRecords and MultiPathRecords only
//! between ports it shares one with ([`path::PathConfig`]), and
//! MCMemberRecords of its partitions' groups ([`mcast`]). A trusted
//! requester sees everything.
//!
//! # TIDs
//! Reports are requests of ours that share the SA class with the
//! transport's own SA queries, whose TIDs count up from 1 in the low 32
//! bits (`transport::txn`). Reports use low 32 bits with bit 31 set
//! (0x8000_0000 | n), which the transport reaches only after 2^31
//! requests; ReportResps are matched on the low 32 bits (the kernel owns
//! the high ones).
//!
//! # Failover
//! A standby's runtime hands the agent copies of the master's
//! ServiceRecord, InformInfoRecord, GUIDInfoRecord and MCMemberRecord
//! tables
//! ([`handle_mirror`](SaAgent::handle_mirror)); when the agent starts
//! serving as master it adds the last copy to its live state ([`mirror`]).

pub mod mcast;
pub mod path;
pub mod stats;

mod guids;
pub(crate) mod index;
mod inform;
pub mod mirror;
mod records;
mod sends;
mod services;
mod table;
mod visibility;
mod wire;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, error, info, trace, warn, Level};

pub use crate::config::sa::{NotServing, SaConfig};
pub use mirror::MirrorRead;
pub use stats::SaStats;

use crate::datagram::Datagram;
use crate::mad::class_port_info::{class_cap, sa_cap, sa_cap2, ClassPortInfoRepr};
use crate::mad::notice::trap;
use crate::mad::sa::port_info_record::ATTR_MOD_CAPABILITY_MASK_MATCH;
use crate::mad::sa::{
    guid_info_mask, sa_status, GuidInfoRecordRepr, InformInfoRecordRepr, InformInfoRepr, LftRecordRepr, SaAttributeId,
    SaRecord, ServiceRecordRepr, SmInfoRecordRepr, SA_DATA_LEN,
};
use crate::mad::sa::{MultiPathRecordRepr, PathRecordRepr};
use crate::mad::{Method, NoticeRepr, SmInfoRepr};
use crate::rmpp::{RmppConfig, RmppReceiver};
use crate::subnet::snapshot::Snapshot;
use crate::types::{Guid, Lid};
use guids::AliasGuids;
use index::PortIndex;
use inform::{InformError, ReportFull, Reports, Subscription, Subscriptions};
use records::{QosKnown, Records};
use sends::{SendError, SendKey, Sends};
use services::{ServiceError, Services};
use stats::LogGate;
use table::{Query, QueryError, Spec};
use visibility::{Partitions, Viewer};
use wire::{Received, Request};

/// What the SA may do, as the runtime's election decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Serving {
    /// Not the master SM (standby, discovering, not active).
    #[default]
    NotMaster,
    /// Master, but its first master sweep has not published yet.
    MasterNotSwept,
    /// Master with a snapshot: answer.
    Master,
}

/// InformInfoRecord components untrusted requesters never see: the QPN
/// (component 11, `inform_info_record_mask::QPN`).
const INFORM_INFO_RECORD_SECRETS: &[usize] = &[11];

/// ClassPortInfo.RespTimeValue: 4.096 µs × 2^16 ≈ 268 ms, the first step
/// above a 200 ms transaction timeout (how OpenSM derives it). The agent
/// itself answers in microseconds; the margin is the runtime's queue.
const RESP_TIME_VALUE: u8 = 16;

/// The SA agent; see the module docs.
pub struct SaAgent {
    cfg: SaConfig,
    own_port_guid: Guid,
    serving: Serving,
    snapshot: Option<Arc<Snapshot>>,
    ports: PortIndex,
    records: Option<Records>,
    /// The switches' multicast tables: the snapshot's, with the passes
    /// between sweeps applied; `mft_stale` until the MFT records follow.
    mcast_tables: std::collections::HashMap<Guid, std::collections::BTreeMap<u16, ibsm_routing::mcast::PortSet>>,
    mft_stale: bool,
    paths: Option<path::PathIndex>,
    qos: QosKnown,
    /// This SM's SMInfo as the runtime last told (for SMInfoRecords).
    sm_info: Option<SmInfoRepr>,
    services: Services,
    subscriptions: Subscriptions,
    aliases: AliasGuids,
    reports: Reports,
    sends: Sends,
    out: VecDeque<Datagram>,
    stats: SaStats,
    log: LogGate,
    /// The last copy of the master's tables (while not master).
    mirror: mirror::Mirror,
    /// Became master: import the copy once a snapshot is here.
    take_over: bool,
    /// Multicast groups and their members (MCMemberRecord joins).
    mcast: mcast::McGroups,
    /// MLIDs every switch of the last snapshot can forward.
    mlids: u16,
}

impl SaAgent {
    pub fn new(cfg: SaConfig, own_port_guid: Guid) -> Self {
        SaAgent {
            cfg,
            own_port_guid,
            serving: Serving::NotMaster,
            snapshot: None,
            ports: PortIndex::default(),
            records: None,
            mcast_tables: Default::default(),
            mft_stale: false,
            paths: None,
            qos: QosKnown::default(),
            sm_info: None,
            services: Services::default(),
            subscriptions: Subscriptions::default(),
            aliases: AliasGuids::default(),
            reports: Reports::default(),
            sends: Sends::default(),
            out: VecDeque::new(),
            stats: SaStats::default(),
            log: LogGate::default(),
            mirror: mirror::Mirror::default(),
            take_over: false,
            mcast: mcast::McGroups::new(),
            mlids: mcast::MLID_SPACE,
        }
    }

    /// The role changes. Leaving MASTER stops what the SA was sending
    /// (multi-MAD answers, Reports, queued answers); what requesters
    /// registered is kept. Becoming MASTER takes over the mirror of the
    /// previous master's tables, if one was kept (once a snapshot is here
    /// to find the ports in).
    pub fn set_serving(&mut self, now: Duration, serving: Serving) {
        if serving == self.serving {
            return;
        }
        info!(from = ?self.serving, to = ?serving, "SA serving state");
        if self.serving == Serving::Master {
            // Another SM holds the groups now; what this one kept would
            // outlive the leaves it never sees (see `McGroups::forget_members`).
            let dropped = self.mcast.forget_members();
            if dropped > 0 {
                info!(
                    memberships = dropped,
                    "SA no longer master: multicast memberships forgotten (the mirror keeps the master's)"
                );
            }
        }
        self.take_over = serving == Serving::Master;
        self.serving = serving;
        if serving != Serving::Master {
            self.out.clear();
            self.reports.clear();
            self.stats.rmpp.failed += self.sends.clear() as u64;
            self.stats.rmpp.in_flight = 0;
        }
        self.try_take_over(now);
    }

    /// A standby's read of the master's tables (see [`mirror`]): each table
    /// that answered replaces the copy kept of it. Dropped while serving as
    /// master: this SA's own state is the live one then.
    pub fn handle_mirror(&mut self, now: Duration, read: MirrorRead) {
        if self.serving == Serving::Master {
            self.stats.mirror.ignored += 1;
            return;
        }
        let over = self.mirror.keep(read, &self.cfg);
        let m = &mut self.stats.mirror;
        m.reads += 1;
        m.over_cap += over as u64;
        let (services, subscriptions, aliases) = self.mirror.counts();
        (m.held_services, m.held_subscriptions, m.held_alias_guids) =
            (services as u64, subscriptions as u64, aliases as u64);
        let (mcast_groups, mcast_members) = self.mirror.mcast_counts();
        if over > 0 {
            self.gate(now, Level::WARN, "mirror_cap", || {
                format!("the master's SA holds more than the [sa] caps: {over} records left out of the mirror")
            });
        }
        debug!(
            services,
            subscriptions,
            alias_guids = aliases,
            mcast_groups,
            mcast_members,
            "SA mirror of the master's tables"
        );
    }

    /// Imports the mirror into the live state, once serving as master
    /// with a snapshot.
    fn try_take_over(&mut self, now: Duration) {
        if !self.take_over || self.serving != Serving::Master {
            return;
        }
        let Some(snap) = self.snapshot.clone() else { return };
        self.take_over = false;
        let Some(copy) = self.mirror.take() else {
            debug!("SA became master with no mirror of a previous master's state");
            return;
        };
        let fabric = mcast::SnapshotFabric::new(&self.ports, &snap);
        let live = mirror::Live {
            services: &mut self.services,
            subscriptions: &mut self.subscriptions,
            aliases: &mut self.aliases,
            mcast: &mut self.mcast,
            mcast_fabric: &fabric,
            mcast_limits: mcast::McLimits::from_config(&self.cfg, self.mlids),
        };
        let r = mirror::import(copy, now, &self.cfg, &self.ports, |p| guid_cap(&snap.sweep.subnet, p), live);
        let m = &mut self.stats.mirror;
        m.takeovers += 1;
        m.imported_services += r.services as u64;
        m.imported_subscriptions += r.subscriptions as u64;
        m.imported_alias_guids += r.alias_guids as u64;
        m.skipped_present += r.present as u64;
        m.skipped_port_gone += r.port_gone as u64;
        m.skipped_refused += r.refused as u64;
        m.skipped_over_cap += r.over_cap as u64;
        (m.held_services, m.held_subscriptions, m.held_alias_guids) = (0, 0, 0);
        self.index_path_aliases();
        self.refresh_gauges();
        info!(
            present = r.present,
            port_gone = r.port_gone,
            refused = r.refused,
            over_cap = r.over_cap,
            mcast_mismatch = r.mcast_mismatch,
            mcast_unkept = r.mcast_unkept,
            mcast_mlid_moved = r.mcast_mlid_moved,
            "SA state taken over from the mirror: {} services, {} subscriptions, {} alias GUIDs, \
             {} multicast members ({} groups made)",
            r.services,
            r.subscriptions,
            r.alias_guids,
            r.mcast_members,
            r.mcast_groups
        );
        if r.mcast_mismatch + r.mcast_mlid_moved > 0 {
            // Their members send to an MLID, or with parameters, this SA
            // does not route; they work again once they join again.
            warn!(
                mismatch = r.mcast_mismatch,
                mlid_moved = r.mcast_mlid_moved,
                "multicast groups of the old master not taken over as they were"
            );
        }
    }

    pub fn serving(&self) -> Serving {
        self.serving
    }

    /// This SM's SMInfo (GUID, SM_Key, ActCount, priority, state), for its
    /// SMInfoRecord. Until told, the SA answers with the snapshot's master
    /// GUID, MASTER, priority 0 and ActCount the snapshot sequence.
    pub fn set_sm_info(&mut self, info: SmInfoRepr) {
        self.sm_info = Some(info);
    }

    /// Bumped by every change of the alias GUIDs: the runtime then sends
    /// [`Self::alias_table`] to the SM, which programs the ports.
    pub fn alias_version(&self) -> u64 {
        self.aliases.version()
    }

    /// The alias GUIDs handed out, for the SM to program
    /// (`crate::program::guids`).
    pub fn alias_table(&self) -> crate::program::guids::AliasTable {
        self.aliases.table()
    }

    /// PathRecords resolve the alias GIDs this SA answers GUIDInfoRecords
    /// with, from the moment they are set (as OpenSM's).
    fn index_path_aliases(&mut self) {
        if let Some(paths) = self.paths.as_mut() {
            paths.set_aliases(self.aliases.iter());
        }
    }

    /// [`Self::index_path_aliases`] after one port's change (`before`: its
    /// aliases until then), in O(its aliases).
    fn index_port_aliases(&mut self, port: Guid, before: &[Guid]) {
        if let Some(paths) = self.paths.as_mut() {
            paths.update_aliases(before.iter().copied(), self.aliases.of_port(port).map(|(_, g)| (g, port)));
        }
    }

    /// A new sweep snapshot: rebuilds the records and indexes from it;
    /// ports that left service since the last one are reported as trap 65,
    /// ports that entered it as trap 64, to the subscribers that asked;
    /// subscriptions, ServiceRecords and alias GUIDs of ports gone from
    /// the fabric are dropped; multicast members gone from the fabric or
    /// their group's partition leave, and the partitions' well-known
    /// groups are made or updated ([`mcast::McGroups::sync`]).
    pub fn new_snapshot(&mut self, now: Duration, snap: Arc<Snapshot>) {
        self.stats.snapshots += 1;
        let ports = PortIndex::build(&snap.sweep);
        let old = std::mem::replace(&mut self.ports, ports);
        let first = self.snapshot.is_none();
        self.qos.update(&snap);
        let records = Records::build(&snap, &self.ports, &self.qos);
        self.stats.records = records.count() as u64;
        self.records = Some(records);
        self.mcast_tables = snap.sweep.mcast_tables.clone();
        self.mft_stale = false;
        self.paths = Some(path::PathIndex::build(&snap.sweep));
        self.snapshot = Some(snap.clone());

        let (subs, services, aliases) = {
            let ports = &self.ports;
            (
                self.subscriptions.follow_ports(|g| ports.by_guid(g).map(|p| p.base_lid.0)),
                self.services.retain_owners(|g| ports.contains(g)),
                self.aliases.retain_ports(|g| ports.contains(g)),
            )
        };
        self.index_path_aliases();
        if subs + services + aliases > 0 {
            info!(subscriptions = subs, services, alias_guids = aliases, "SA dropped what ports gone had registered");
        }
        self.sync_multicast(&snap);
        self.refresh_gauges();
        if !first {
            self.report_service_changes(now, &old, &snap);
        }
        self.report_multicast(now);
        debug!(sequence = snap.sequence, records = self.stats.records, "SA took a snapshot");
        // After the Reports: a takeover's subscriptions hear of changes
        // from this snapshot on.
        self.try_take_over(now);
    }

    /// Any SA-class MAD: a request, an RMPP ACK/STOP/ABORT for one of our
    /// answers, a ReportResp. Never panics.
    pub fn handle_mad(&mut self, now: Duration, dgram: &Datagram) {
        self.stats.received += 1;
        match wire::classify(dgram) {
            Received::Malformed => self.stats.drops.malformed += 1,
            Received::BadVersion { version, answerable } => {
                if answerable {
                    self.gate(now, Level::DEBUG, "bad_version", || {
                        format!("SA MAD of class version {version} refused")
                    });
                    if let Some(reply) = wire::status_echo(dgram, wire::BAD_VERSION) {
                        self.count_status(wire::BAD_VERSION);
                        self.push(now, reply);
                    }
                } else {
                    self.stats.drops.malformed += 1;
                }
            }
            Received::Response { method, tid } => {
                if method == Method::ReportResp && self.reports.acknowledge(tid) {
                    self.stats.reports.acknowledged += 1;
                } else {
                    self.stats.drops.stray_responses += 1;
                }
            }
            Received::RmppControl { tid } => {
                let key = SendKey::new(&dgram.addr, tid);
                if self.sends.handle_mad(now, &key, &dgram.mad) {
                    self.reap_sends();
                } else {
                    self.stats.drops.stray_rmpp += 1;
                }
            }
            Received::Segmented { request } => {
                self.stats.drops.segmented_requests += 1;
                if self.may_answer(now, dgram, &request) {
                    self.refuse(now, &request, wire::sa_error(sa_status::REQ_INVALID));
                }
            }
            Received::Request(request) => {
                if self.may_answer(now, dgram, &request) {
                    self.handle_request(now, &request);
                }
            }
        }
    }

    /// A trap the SM received (from the port at `from`): Reports to the
    /// subscribers that match it. A Notice from an SMP has no IssuerGID;
    /// it is filled in from the issuer's port.
    pub fn handle_trap(&mut self, now: Duration, notice: &NoticeRepr, from: Lid) {
        self.stats.reports.traps_received += 1;
        if self.serving != Serving::Master {
            return;
        }
        let mut n = *notice;
        if n.issuer_gid == [0; 16] {
            let issuer = if n.issuer_lid.0 != 0 { n.issuer_lid } else { from };
            if let Some(p) = self.ports.by_lid(issuer) {
                n.issuer_gid = p.gid();
            }
        }
        self.forward(now, &n);
    }

    /// The next MAD to send: single-MAD answers and Reports first, then
    /// segments of multi-MAD answers, in turn.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Datagram> {
        if let Some(d) = self.out.pop_front() {
            return Some(d);
        }
        let (d, resent) = self.sends.poll_transmit(now)?;
        self.stats.rmpp.segments += 1;
        if resent {
            self.stats.rmpp.resent += 1;
        }
        self.reap_sends();
        Some(d)
    }

    /// When `handle_timeout` should run next: an RMPP wait, a Report
    /// retry or a ServiceRecord lease.
    pub fn poll_timeout(&self) -> Option<Duration> {
        [self.sends.poll_timeout(), self.reports.next_deadline(), self.services.next_expiry()]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        self.sends.handle_timeout(now);
        self.reap_sends();
        let (again, given_up) = self.reports.expire(now, self.cfg.report_timeout(), self.cfg.report_retries);
        self.stats.reports.given_up += given_up as u64;
        if given_up > 0 {
            self.gate(now, Level::INFO, "report_given_up", || {
                format!("{given_up} Reports got no ReportResp; given up")
            });
        }
        for d in again {
            self.stats.reports.sent += 1;
            self.stats.reports.resent += 1;
            self.push(now, d);
        }
        let expired = self.services.expire(now);
        if expired > 0 {
            self.stats.leases_expired += expired as u64;
            self.refresh_gauges();
        }
    }

    pub fn stats(&self) -> &SaStats {
        &self.stats
    }

    /// Switches' multicast tables a pass between sweeps changed (an empty
    /// table: the switch holds no group now): the MulticastForwardingTable
    /// records follow them, rebuilt when next asked for.
    pub fn update_mcast_tables(
        &mut self,
        tables: Vec<(Guid, std::collections::BTreeMap<u16, ibsm_routing::mcast::PortSet>)>,
    ) {
        for (switch, table) in tables {
            if table.is_empty() {
                self.mcast_tables.remove(&switch);
            } else {
                self.mcast_tables.insert(switch, table);
            }
            self.mft_stale = true;
        }
    }

    fn refresh_mft(&mut self, snap: &Snapshot) {
        if !self.mft_stale {
            return;
        }
        if let Some(r) = self.records.as_mut() {
            r.mft = records::mft_table(&snap.sweep.subnet, &self.ports, &self.mcast_tables);
        }
        self.mft_stale = false;
    }

    /// The multicast groups: what the runtime publishes for the SM to
    /// route ([`mcast::McGroups::mcast_table`], bumped
    /// [`mcast::McGroups::version`] on every change).
    pub fn multicast(&self) -> &mcast::McGroups {
        &self.mcast
    }

    pub fn config(&self) -> &SaConfig {
        &self.cfg
    }

    /// The port the SA runs on.
    pub fn own_port_guid(&self) -> Guid {
        self.own_port_guid
    }

    // ---- Requests.

    /// Serving and key checks before a request is read. Returns whether to
    /// go on (a refusal has been queued or the MAD dropped otherwise).
    fn may_answer(&mut self, now: Duration, dgram: &Datagram, req: &Request<'_>) -> bool {
        if self.serving != Serving::Master || self.snapshot.is_none() {
            match self.cfg.not_serving {
                NotServing::Busy => {
                    if let Some(reply) = wire::status_echo(dgram, wire::BUSY) {
                        self.count_status(wire::BUSY);
                        self.push(now, reply);
                    }
                }
                NotServing::Silent => self.stats.drops.not_serving += 1,
            }
            return false;
        }
        if req.sm_key != 0 && req.sm_key != self.cfg.sa_key {
            self.stats.drops.bad_sm_key += 1;
            let (lid, key) = (req.addr.lid, req.sm_key);
            self.gate(now, Level::WARN, "bad_sm_key", || {
                format!("SA request from LID {lid} with SM_Key {key:#x} dropped")
            });
            return false;
        }
        true
    }

    fn trusted(&self, req: &Request<'_>) -> bool {
        self.cfg.sa_key != 0 && req.sm_key == self.cfg.sa_key
    }

    fn handle_request(&mut self, now: Duration, req: &Request<'_>) {
        use Method as M;
        use SaAttributeId as A;
        if !matches!(req.method, M::Get | M::Set | M::GetTable | M::Delete | M::GetMulti) {
            // GetTraceTable (TraceRecord) and methods no SA defines
            // (IBA 15.2.2); one-way methods never get here.
            self.refuse(now, req, wire::METHOD_UNSUPPORTED);
            return;
        }
        self.stats.query(req.attribute, req.method).requests += 1;
        let read = matches!(req.method, M::Get | M::GetTable);
        let supported = match req.attribute {
            A::ClassPortInfo => req.method == M::Get,
            A::NodeRecord
            | A::PortInfoRecord
            | A::SwitchInfoRecord
            | A::LinkRecord
            | A::PKeyTableRecord
            | A::LinearForwardingTableRecord
            | A::MulticastForwardingTableRecord
            | A::SmInfoRecord
            | A::SlToVlMappingTableRecord
            | A::VlArbitrationTableRecord
            | A::InformInfoRecord
            | A::PathRecord => read,
            A::MultiPathRecord => req.method == M::GetMulti,
            A::GuidInfoRecord | A::ServiceRecord | A::McMemberRecord => {
                read || matches!(req.method, M::Set | M::Delete)
            }
            A::InformInfo => req.method == M::Set,
            _ => false,
        };
        if !supported {
            self.refuse(now, req, wire::METHOD_ATTR_UNSUPPORTED);
            return;
        }
        if matches!(req.method, M::GetTable | M::GetMulti) && self.sends.contains(&SendKey::new(&req.addr, req.tid)) {
            // The requester asked again while the answer is still going
            // out: the transfer in progress answers it.
            self.stats.drops.duplicate_requests += 1;
            return;
        }
        let trusted = self.trusted(req);
        let Some(snap) = self.snapshot.clone() else { return };
        match req.attribute {
            A::ClassPortInfo => self.class_port_info(now, req),
            A::NodeRecord => self.table_query(now, req, trusted, |r| &r.node),
            A::PortInfoRecord => {
                let superset = if req.attribute_modifier & ATTR_MOD_CAPABILITY_MASK_MATCH != 0 {
                    records::key::PORT_INFO_CAPABILITY_MASKS
                } else {
                    0
                };
                let relax = (records::key::PORT_INFO_OPTIONS, superset);
                self.table_query_relaxed(now, req, trusted, relax, |r| &r.port_info);
            }
            A::SwitchInfoRecord => self.table_query(now, req, trusted, |r| &r.switch_info),
            A::LinkRecord => self.table_query(now, req, trusted, |r| &r.link),
            A::PKeyTableRecord => {
                if trusted {
                    self.table_query(now, req, trusted, |r| &r.pkey);
                } else {
                    // OpenSM answers P_Key tables to trusted requesters only
                    // (osm_sa_pkey_record.c: ERR_REQ_INVALID otherwise).
                    self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
                }
            }
            A::MulticastForwardingTableRecord => {
                self.refresh_mft(&snap);
                self.table_query(now, req, trusted, |r| &r.mft)
            }
            A::SlToVlMappingTableRecord => self.table_query(now, req, trusted, |r| &r.sl2vl),
            A::VlArbitrationTableRecord => self.table_query(now, req, trusted, |r| &r.vlarb),
            A::LinearForwardingTableRecord => {
                let spec = Spec::of::<LftRecordRepr>(&[]);
                let result = self.run_viewed(req, spec, trusted, |agent, viewer, q| {
                    if let Some(r) = agent.records.as_ref() {
                        r.lft(&snap, q, |g| viewer.sees(g));
                    }
                });
                self.answer(now, req, spec, result);
            }
            A::SmInfoRecord => {
                let spec = Spec::of::<SmInfoRecordRepr>(records::key::SM_INFO_SECRETS);
                let ours = self.sm_info.unwrap_or_else(|| records::default_sm_info(&snap));
                let result = self.run_viewed(req, spec, trusted, |_, viewer, q| {
                    records::sm_info(&snap, &ours, q, |g| viewer.sees(g))
                });
                self.answer(now, req, spec, result);
            }
            A::GuidInfoRecord if read => {
                let spec = Spec::of::<GuidInfoRecordRepr>(&[]);
                let result =
                    self.run_viewed(req, spec, trusted, |agent, viewer, q| agent.guid_info_records(&snap, viewer, q));
                self.answer(now, req, spec, result);
            }
            A::GuidInfoRecord => self.guid_info_change(now, req, trusted),
            A::ServiceRecord if read => {
                let spec = Spec::of::<ServiceRecordRepr>(services::SECRETS);
                // Only services of ports the requester shares a partition
                // with (OpenSM's match_service_pkey_with_ports_pkey).
                let result = self.run_viewed(req, spec, trusted, |agent, viewer, q| {
                    for (owner, r) in agent.services.records_by_owner() {
                        if viewer.sees(owner) && !q.offer(r) {
                            break;
                        }
                    }
                });
                self.answer(now, req, spec, result);
            }
            A::ServiceRecord => self.service_change(now, req, trusted),
            A::InformInfo => self.inform_info(now, req, trusted),
            A::McMemberRecord if read => self.mc_member_query(now, req, trusted, &snap),
            A::McMemberRecord => self.mc_member_change(now, req, trusted, &snap),
            A::PathRecord => self.path_record(now, req),
            A::MultiPathRecord => self.multi_path_record(now, req),
            A::InformInfoRecord => {
                // QPN 0 to untrusted requesters (IBA C15-0.2-1.16, as
                // OpenSM): a subscriber's QP is for the SA's Reports.
                let spec = Spec::of::<InformInfoRecordRepr>(INFORM_INFO_RECORD_SECRETS);
                // Emitted once per change of the subscriptions.
                let records = self.subscriptions.records();
                // Only subscriptions of ports the requester shares a
                // partition with, as OpenSM.
                let result = self.run_viewed(req, spec, trusted, |agent, viewer, q| {
                    for (owner, r) in agent.subscriptions.owners().zip(records) {
                        if viewer.sees(owner) && !q.offer(r) {
                            break;
                        }
                    }
                });
                self.answer(now, req, spec, result);
            }
            _ => self.refuse(now, req, wire::METHOD_ATTR_UNSUPPORTED),
        }
    }

    /// Runs one query: `fill` offers the candidates.
    fn run(
        &self,
        req: &Request<'_>,
        spec: Spec,
        trusted: bool,
        fill: impl FnOnce(&Self, &mut Query<'_>),
    ) -> Result<(Vec<u8>, usize), QueryError> {
        self.run_viewed(req, spec, trusted, |agent, _, q| fill(agent, q))
    }

    /// [`Self::run`], `fill` told whose records the requester may see.
    fn run_viewed(
        &self,
        req: &Request<'_>,
        spec: Spec,
        trusted: bool,
        fill: impl FnOnce(&Self, &Viewer<'_>, &mut Query<'_>),
    ) -> Result<(Vec<u8>, usize), QueryError> {
        let max = self.budget(req).bytes;
        let mut q = Query::new(spec, req.data, req.mask, trusted, req.method == Method::Get, max)?;
        fill(self, &self.viewer(req, trusted), &mut q);
        q.finish()
    }

    /// Whose records `req`'s requester may see (see [`visibility`]): all
    /// when trusted; else those of the ports its own port shares a
    /// partition with, by the snapshot's partitions, or the P_Key tables
    /// the sweep read when the snapshot has none.
    fn viewer(&self, req: &Request<'_>, trusted: bool) -> Viewer<'_> {
        if trusted {
            return Viewer::All;
        }
        let Some(me) = self.ports.by_lid(req.addr.lid).map(|p| p.guid) else { return Viewer::Nobody };
        let by = match (self.snapshot.as_ref().and_then(|s| s.sweep.partitions.as_deref()), self.paths.as_ref()) {
            (Some(set), _) => Partitions::Set(set),
            (None, Some(paths)) => Partitions::Tables(paths),
            (None, None) => return Viewer::Nobody,
        };
        Viewer::Port { me, by }
    }

    /// A query over one of the snapshot's tables.
    fn table_query(
        &mut self,
        now: Duration,
        req: &Request<'_>,
        trusted: bool,
        table: impl Fn(&Records) -> &table::Table,
    ) {
        self.table_query_relaxed(now, req, trusted, (0, 0), table);
    }

    /// A query over a table, with components ignored or matched as bit
    /// sets (`Query::relax`).
    fn table_query_relaxed(
        &mut self,
        now: Duration,
        req: &Request<'_>,
        trusted: bool,
        (ignore, superset): (u64, u64),
        table: impl Fn(&Records) -> &table::Table,
    ) {
        let Some(records) = self.records.as_ref() else { return };
        let t = table(records);
        let spec = t.spec();
        let max = self.budget(req).bytes;
        let viewer = self.viewer(req, trusted);
        let result = Query::new(spec, req.data, req.mask, trusted, req.method == Method::Get, max).and_then(|mut q| {
            q.relax(ignore, superset);
            t.scan(&mut q, |g| viewer.sees(g));
            q.finish()
        });
        self.answer(now, req, spec, result);
    }

    /// Answers a query: a Get with exactly one record, a GetTable with all.
    fn answer(&mut self, now: Duration, req: &Request<'_>, spec: Spec, result: Result<(Vec<u8>, usize), QueryError>) {
        let (bytes, n) = match result {
            Ok(r) => r,
            Err(QueryError::Invalid) => {
                self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
                return;
            }
            Err(QueryError::TooLarge) => {
                if let Some(e) = self.budget(req).rmpp {
                    // Cut by the RMPP room left, not by the answer cap.
                    self.rmpp_refusal(now, req, e);
                    return;
                }
                self.stats.drops.answer_too_large += 1;
                let (attr, lid, cap) = (req.attribute, req.addr.lid, self.cfg.max_answer_bytes);
                self.gate(now, Level::WARN, "answer_too_large", || {
                    format!("{attr:?} query from LID {lid} matches over {cap} bytes: refused (ERR_NO_RESOURCES)")
                });
                self.refuse(now, req, wire::sa_error(sa_status::NO_RESOURCES));
                return;
            }
        };
        if req.method == Method::Get {
            match n {
                0 => self.refuse(now, req, wire::sa_error(sa_status::NO_RECORDS)),
                1 => self.reply(now, req, 0, &bytes[..spec.len], 1),
                _ => self.refuse(now, req, wire::sa_error(sa_status::TOO_MANY_RECORDS)),
            }
            return;
        }
        self.table_answer(now, req, spec.attribute_offset(), bytes, n);
    }

    /// A GetTableResp (or GetMultiResp) of `n` records spaced
    /// `attribute_offset` words apart: one MAD when they fit, RMPP
    /// otherwise. No record is an empty answer with status 0 and
    /// AttributeOffset 0 (as OpenSM's osm_sa_respond: only a Get fails with
    /// ERR_NO_RECORDS, and saquery counts the records as the payload over
    /// the offset, so a non-zero offset over no data would read as one).
    fn table_answer(&mut self, now: Duration, req: &Request<'_>, attribute_offset: u16, bytes: Vec<u8>, n: usize) {
        let attribute_offset = if n == 0 { 0 } else { attribute_offset };
        if bytes.len() <= SA_DATA_LEN {
            let d = wire::single_answer(req, 0, attribute_offset, &bytes);
            self.count_ok(req, n);
            self.push(now, d);
            return;
        }
        let limits = (self.cfg.max_rmpp_sends, self.cfg.max_rmpp_bytes, self.cfg.max_rmpp_sends_per_requester);
        match self.sends.room(req.addr.lid.0, limits.0, limits.1, limits.2) {
            Ok(left) if bytes.len() <= left => {}
            Ok(_) => return self.rmpp_refusal(now, req, SendError::Busy),
            Err(e) => return self.rmpp_refusal(now, req, e),
        }
        let template = wire::answer_header(req, 0, attribute_offset);
        let key = SendKey::new(&req.addr, req.tid);
        let cfg = self.rmpp_config();
        match self.sends.start(
            now,
            key,
            req.addr,
            &template,
            bytes,
            cfg,
            self.cfg.max_rmpp_sends,
            self.cfg.max_rmpp_bytes,
        ) {
            Ok(()) => {
                self.count_ok(req, n);
                self.stats.rmpp.started += 1;
                self.stats.rmpp.in_flight = self.sends.len() as u64;
            }
            Err(SendError::Refused) => self.refuse(now, req, wire::sa_error(sa_status::NO_RESOURCES)),
            Err(e) => self.rmpp_refusal(now, req, e),
        }
    }

    /// What a GetTable or GetMulti answer may be built to, known before it
    /// is built: `max_answer_bytes`, cut to the RMPP bytes still free, and
    /// to one MAD (which needs no RMPP send) when no send slot is free for
    /// this requester. `rmpp` says why it was cut, if it was.
    fn budget(&self, req: &Request<'_>) -> Budget {
        let cap = self.cfg.max_answer_bytes;
        if !matches!(req.method, Method::GetTable | Method::GetMulti) {
            return Budget { bytes: cap, rmpp: None };
        }
        let (sends, bytes, per) =
            (self.cfg.max_rmpp_sends, self.cfg.max_rmpp_bytes, self.cfg.max_rmpp_sends_per_requester);
        match self.sends.room(req.addr.lid.0, sends, bytes, per) {
            Ok(left) if left >= cap => Budget { bytes: cap, rmpp: None },
            Ok(left) => Budget { bytes: left.max(SA_DATA_LEN).min(cap), rmpp: Some(SendError::Busy) },
            Err(e) => Budget { bytes: SA_DATA_LEN.min(cap), rmpp: Some(e) },
        }
    }

    /// ERR_NO_RESOURCES for an answer that finds no RMPP room: counted by
    /// why, one log line per period.
    fn rmpp_refusal(&mut self, now: Duration, req: &Request<'_>, why: SendError) {
        let (sends, lid) = (self.sends.len(), req.addr.lid);
        if why == SendError::RequesterBusy {
            self.stats.drops.rmpp_requester_cap += 1;
            let per = self.cfg.max_rmpp_sends_per_requester;
            self.gate(now, Level::WARN, "rmpp_requester_cap", || {
                format!("LID {lid} has {per} multi-MAD answers in flight: one more refused (ERR_NO_RESOURCES)")
            });
        } else {
            self.stats.drops.rmpp_busy += 1;
            self.gate(now, Level::WARN, "rmpp_busy", || {
                format!("{sends} multi-MAD answers in flight: the one for LID {lid} refused (ERR_NO_RESOURCES)")
            });
        }
        self.refuse(now, req, wire::sa_error(sa_status::NO_RESOURCES));
    }

    fn rmpp_config(&self) -> RmppConfig {
        RmppConfig {
            segment_timeout: self.cfg.rmpp_timeout(),
            retries: self.cfg.rmpp_retries,
            total_timeout: self.cfg.rmpp_total_timeout(),
            ..RmppConfig::default()
        }
    }

    fn reap_sends(&mut self) {
        let ended = self.sends.reap();
        self.stats.rmpp.completed += ended.completed;
        self.stats.rmpp.failed += ended.failed;
        self.stats.rmpp.in_flight = self.sends.len() as u64;
    }

    /// ClassPortInfo (IBA 13.4.8.1, 15.2.5.1): what this SA really does.
    fn class_port_info(&mut self, now: Duration, req: &Request<'_>) {
        let cpi = ClassPortInfoRepr {
            base_version: 1,
            class_version: wire::SA_CLASS_VERSION,
            // No TraceRecord, but MultiPathRecords: OpenSM sets the same
            // bit for the same support, and clients read it for GetMulti.
            // UD multicast (bit 9): MCMemberRecord joins, routed into the
            // switches' MFTs.
            capability_mask: class_cap::IS_CAPABILITY_MASK2_SUPPORTED
                | sa_cap::IS_OPTIONAL_RECORDS_SUPPORTED
                | sa_cap::IS_UD_MULTICAST_SUPPORTED
                | sa_cap::IS_MULTIPATH_SUPPORTED
                | sa_cap::IS_PORT_INFO_CAPMASK_MATCH_SUPPORTED,
            // PathRecord rates for every generation and width (`path::rate`).
            // SendOnlyFullMember joins (CapabilityMask2 bit 12, OpenSM's
            // OSM_CAP2_IS_SEND_ONLY_FULL_MEMBER_SUPPORTED): without it the
            // kernel's IPoIB joins send-only groups as SendOnlyNonMember.
            // Not claimed: MulticastFDBTop (bit 3; the SM leaves
            // SwitchInfo.MulticastFDBTop alone) and multicast
            // ServiceRecords (bit 8).
            capability_mask2: sa_cap2::IS_ALIAS_GUIDS_SUPPORTED
                | sa_cap2::IS_SEND_ONLY_FULL_MEMBER_SUPPORTED
                | sa_cap2::IS_FULL_PORT_INFO_RECORD_SUPPORTED
                | sa_cap2::IS_EXTENDED_SPEEDS_SUPPORTED
                | sa_cap2::IS_PORT_INFO_CAPMASK2_MATCH_SUPPORTED
                | sa_cap2::IS_LINK_WIDTH_2X_SUPPORTED
                | sa_cap2::IS_LINK_SPEED_HDR_SUPPORTED
                | sa_cap2::IS_LINK_SPEED_NDR_SUPPORTED,
            resp_time_value: RESP_TIME_VALUE,
            ..ClassPortInfoRepr::default()
        };
        let mut b = vec![0u8; ClassPortInfoRepr::LEN];
        if cpi.emit(&mut b).is_ok() {
            self.reply(now, req, 0, &b, 1);
        }
    }

    /// PathRecord settings for answers of at most `max_bytes` to `req`'s
    /// requester (an untrusted one gets only paths between ports it shares
    /// a partition with).
    fn path_config(&self, req: &Request<'_>, max_bytes: usize) -> path::PathConfig {
        path::PathConfig {
            packet_life_time: self.cfg.subnet_timeout,
            max_records: max_bytes / (usize::from(PathRecordRepr::attribute_offset()) * 8),
            requester_must_share: !self.trusted(req),
        }
    }

    /// PathRecords (IBA 15.2.5.16) from `path`: a Get answers the one path
    /// of a port pair, a GetTable every path asked for.
    fn path_record(&mut self, now: Duration, req: &Request<'_>) {
        let Ok(query) = PathRecordRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        let Some(paths) = self.paths.as_ref() else { return };
        let cfg = self.path_config(req, self.budget(req).bytes);
        if req.method == Method::Get {
            match path::path_record_get(paths, &query, req.mask, req.addr.lid, &cfg) {
                Ok(r) => {
                    let mut b = [0u8; crate::mad::sa::PATH_RECORD_LEN];
                    let _ = r.emit(&mut b);
                    self.reply(now, req, 0, &b, 1);
                }
                Err(code) => self.path_refusal(now, req, code),
            }
            return;
        }
        match path::path_records(paths, &query, req.mask, req.addr.lid, &cfg) {
            Ok(records) => self.path_answer(now, req, &records),
            Err(code) => self.path_refusal(now, req, code),
        }
    }

    /// SubnAdmGetMulti(MultiPathRecord) (IBA 15.2.5.20): PathRecords
    /// between sets of ports, answered as GetMultiResp. A request that came
    /// as an RMPP segment (dual-sided RMPP) is ACKed first, as its receiver.
    fn multi_path_record(&mut self, now: Duration, req: &Request<'_>) {
        if req.rmpp {
            let mut rx = RmppReceiver::new(now, self.rmpp_config());
            if rx.handle_mad(now, req.mad).is_ok() {
                while let Some(ack) = rx.poll_transmit() {
                    self.push(now, Datagram { addr: req.addr, mad: ack });
                }
            }
        }
        let Ok(query) = MultiPathRecordRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        let Some(paths) = self.paths.as_ref() else { return };
        // Not cut to the RMPP room: MultiPath answers are short (NumbPath
        // at most 127), and `multipath` would cut them silently.
        let cfg = self.path_config(req, self.cfg.max_answer_bytes);
        match path::multipath_records(paths, &query, req.mask, req.addr.lid, &cfg) {
            Ok(records) => self.path_answer(now, req, &records),
            Err(code) => self.path_refusal(now, req, code),
        }
    }

    fn path_answer(&mut self, now: Duration, req: &Request<'_>, records: &[PathRecordRepr]) {
        let stride = usize::from(PathRecordRepr::attribute_offset()) * 8;
        let mut bytes = vec![0u8; records.len() * stride];
        for (r, out) in records.iter().zip(bytes.chunks_mut(stride)) {
            let _ = r.emit(out);
        }
        self.table_answer(now, req, PathRecordRepr::attribute_offset(), bytes, records.len());
    }

    fn path_refusal(&mut self, now: Duration, req: &Request<'_>, code: u16) {
        if code == sa_status::NO_RESOURCES {
            if let Some(e) = self.budget(req).rmpp.filter(|_| req.method == Method::GetTable) {
                return self.rmpp_refusal(now, req, e);
            }
            self.stats.drops.answer_too_large += 1;
        }
        self.refuse(now, req, wire::sa_error(code));
    }

    /// GUIDInfoRecords: every LID-bearing port's table in blocks of 8
    /// (GUIDCap GUIDs, at least one block), its GUID and alias GUIDs; the
    /// ports `viewer` may see.
    fn guid_info_records(&self, snap: &Snapshot, viewer: &Viewer<'_>, q: &mut Query<'_>) {
        let subnet = &snap.sweep.subnet;
        let one = |lid: u16| self.ports.by_lid(Lid(lid)).map(|p| vec![*p]).unwrap_or_default();
        let ports: Vec<index::PortAt> = match q.key(0) {
            Some(lid) => one(lid as u16).into_iter().filter(|p| p.base_lid.0 == lid as u16).collect(),
            None => self.ports.all().copied().collect(),
        };
        let mut buf = [0u8; crate::mad::sa::GUID_INFO_RECORD_LEN];
        for p in ports.into_iter().filter(|p| viewer.sees(p.guid)) {
            let cap = guid_cap(subnet, &p);
            let blocks = cap.div_ceil(8).max(1);
            let range = match q.key(1) {
                Some(b) if b < u64::from(blocks) => b as u16..b as u16 + 1,
                Some(_) => continue,
                None => 0..blocks,
            };
            for block in range {
                let r = GuidInfoRecordRepr {
                    lid: p.base_lid,
                    block_num: block as u8,
                    guid_info: self.aliases.block(p.guid, block as u8),
                };
                if r.emit(&mut buf).is_err() || !q.offer(&buf) {
                    return;
                }
            }
        }
    }

    /// GUIDInfoRecord Set and Delete: alias GUIDs of one port, named by
    /// LID (required) and BlockNum, the GUIDs by their mask bits. Only the
    /// port itself or a trusted requester may change them.
    fn guid_info_change(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
        let Ok(rec) = GuidInfoRecordRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        if req.mask & guid_info_mask::LID == 0 || table::unknown_mask::<GuidInfoRecordRepr>(req.mask) {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        }
        let Some(port) = self.ports.by_lid(rec.lid).copied().filter(|p| p.base_lid == rec.lid) else {
            self.refuse(now, req, wire::sa_error(sa_status::NO_RECORDS));
            return;
        };
        let requester = self.ports.by_lid(req.addr.lid).map(|p| p.guid);
        if !trusted && requester != Some(port.guid) {
            self.refuse(now, req, wire::sa_error(sa_status::DENIED));
            return;
        }
        let block = if req.mask & guid_info_mask::BLOCK_NUM != 0 { rec.block_num } else { 0 };
        let entries = (0..8).filter(|&i| req.mask & guid_info_mask::guid(i) != 0).fold(0u8, |m, i| m | 1 << i);
        let Some(snap) = self.snapshot.clone() else { return };
        let cap = guid_cap(&snap.sweep.subnet, &port);
        if u16::from(block) * 8 >= cap.max(1) {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        }
        let before: Vec<Guid> = self.aliases.of_port(port.guid).map(|(_, g)| g).collect();
        if req.method == Method::Set {
            let ports = &self.ports;
            let refused = self.aliases.set(
                port.guid,
                block,
                entries,
                &rec.guid_info,
                cap,
                |g| ports.contains(g),
                self.cfg.max_alias_guids_per_port,
                self.cfg.max_alias_guids,
            );
            if refused > 0 {
                self.stats.drops.alias_guid_cap += refused as u64;
                let g = port.guid;
                self.gate(now, Level::WARN, "alias_guid_cap", || {
                    format!("alias GUIDs for port {g} over the cap: {refused} refused")
                });
            }
        } else {
            self.aliases.delete(port.guid, block, entries);
        }
        self.index_port_aliases(port.guid, &before);
        self.refresh_gauges();
        let out = GuidInfoRecordRepr {
            lid: port.base_lid,
            block_num: block,
            guid_info: self.aliases.block(port.guid, block),
        };
        let mut b = [0u8; crate::mad::sa::GUID_INFO_RECORD_LEN];
        if out.emit(&mut b).is_ok() {
            self.reply(now, req, 0, &b, 1);
        }
    }

    /// ServiceRecord Set and Delete (see `services`).
    fn service_change(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
        let Ok(rec) = ServiceRecordRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        if table::unknown_mask::<ServiceRecordRepr>(req.mask) {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        }
        let Some(owner) = self.ports.by_lid(req.addr.lid).map(|p| p.guid) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        let result = if req.method == Method::Set {
            let (per, total) = (self.cfg.max_services_per_port, self.cfg.max_services);
            self.services.set(now, rec, req.mask, owner, trusted, per, total).map(|r| {
                let mut b = [0u8; crate::mad::sa::SERVICE_RECORD_LEN];
                let _ = SaRecord::emit(&r, &mut b);
                b
            })
        } else {
            self.services.delete(&rec, req.mask, trusted)
        };
        self.refresh_gauges();
        match result {
            Ok(mut b) => {
                if !trusted {
                    for &i in services::SECRETS {
                        table::zero_component(ServiceRecordRepr::COMPONENTS[i], &mut b);
                    }
                }
                self.reply(now, req, 0, &b, 1);
            }
            Err(e) => {
                let code = match e {
                    ServiceError::Invalid => sa_status::REQ_INVALID,
                    ServiceError::NoRecord => sa_status::NO_RECORDS,
                    ServiceError::Denied => sa_status::DENIED,
                    ServiceError::Full => {
                        self.stats.drops.service_cap += 1;
                        let lid = req.addr.lid;
                        self.gate(now, Level::WARN, "service_cap", || {
                            format!("ServiceRecords from LID {lid} over the cap")
                        });
                        sa_status::NO_RESOURCES
                    }
                };
                self.refuse(now, req, wire::sa_error(code));
            }
        }
    }

    /// SubnAdmSet(InformInfo): subscribe or unsubscribe the requester's
    /// port; the answer echoes the InformInfo (IBA o13-12.1.1), with
    /// Subscribe 0 when refused (o13-13.1.1).
    fn inform_info(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
        let Ok(info) = InformInfoRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        let refuse_echo = |agent: &mut Self, code: u16| {
            let mut echo = info;
            echo.subscribe = false;
            let mut b = [0u8; crate::mad::sa::INFORM_INFO_LEN];
            let _ = echo.emit(&mut b);
            let status = wire::sa_error(code);
            agent.stats.query(req.attribute, req.method).errors += 1;
            agent.count_status(status);
            let d = wire::single_answer(req, status, 0, &b);
            agent.push(now, d);
        };
        let raw_subscribe = req.data.get(23).copied().unwrap_or(0);
        if raw_subscribe > 1 {
            refuse_echo(self, sa_status::REQ_INVALID);
            return;
        }
        let Some(owner) = self.ports.by_lid(req.addr.lid).copied() else {
            refuse_echo(self, sa_status::REQ_INVALID);
            return;
        };
        if info.subscribe {
            // A GID must name a port of the fabric (o13-14.1.1 as OpenSM).
            if info.gid != [0; 16] && !self.ports.contains(index::gid_guid(&info.gid)) {
                refuse_echo(self, sa_status::REQ_INVALID);
                return;
            }
            let security = match info.kind {
                crate::mad::sa::InformKind::Generic { trap_number, .. } => inform::is_security_trap(trap_number),
                crate::mad::sa::InformKind::Vendor { .. } => false,
            };
            if security && !trusted {
                refuse_echo(self, sa_status::DENIED);
                return;
            }
        }
        // Reports go to the QP the Set came from (OpenSM keeps the QPN
        // field equal to it).
        let mut stored = info;
        stored.qpn = req.addr.qpn & 0x00FF_FFFF;
        let sub =
            Subscription { info: stored, subscriber_gid: owner.gid(), owner: owner.guid, addr: req.addr, trusted };
        let (per, total) = (self.cfg.max_subscriptions_per_port, self.cfg.max_subscriptions);
        match self.subscriptions.set(sub, per, total) {
            Ok(()) => {
                self.refresh_gauges();
                let mut b = [0u8; crate::mad::sa::INFORM_INFO_LEN];
                let _ = info.emit(&mut b);
                self.reply(now, req, 0, &b, 1);
            }
            Err(InformError::NotSubscribed) => refuse_echo(self, sa_status::REQ_INVALID),
            Err(InformError::Full) => {
                self.stats.drops.subscription_cap += 1;
                let lid = req.addr.lid;
                self.gate(now, Level::WARN, "subscription_cap", || {
                    format!("InformInfo subscriptions from LID {lid} over the cap")
                });
                refuse_echo(self, sa_status::NO_RESOURCES);
            }
        }
    }

    // ---- Reports.

    /// Traps 64 and 65 for the end ports that entered or left service
    /// between the last snapshot and `snap` (IBA 14.2.5.1, sent by the SM:
    /// ProducerType class manager, issuer the SM's port, the port's GID at
    /// DataDetails bytes 6-21).
    fn report_service_changes(&mut self, now: Duration, old: &PortIndex, snap: &Snapshot) {
        let gone: Vec<[u8; 16]> =
            old.in_service().filter(|p| !self.ports.is_in_service(p.guid)).map(|p| p.gid()).collect();
        let came: Vec<[u8; 16]> =
            self.ports.in_service().filter(|p| !old.is_in_service(p.guid)).map(|p| p.gid()).collect();
        let issuer_gid = self.ports.by_lid(snap.master_lid).map(|p| p.gid()).unwrap_or_default();
        for (number, gids) in [(trap::GID_OUT_OF_SERVICE, gone), (trap::GID_IN_SERVICE, came)] {
            for gid in gids {
                if number == trap::GID_IN_SERVICE {
                    self.stats.reports.gid_in_service += 1;
                } else {
                    self.stats.reports.gid_out_of_service += 1;
                }
                let notice = NoticeRepr::gid_trap(number, gid, snap.master_lid, issuer_gid);
                self.forward(now, &notice);
            }
        }
    }

    /// Reports `notice` to every subscription it matches (only a serving
    /// SA sends Reports).
    fn forward(&mut self, now: Duration, notice: &NoticeRepr) {
        self.forward_where(now, notice, |_| true);
    }

    /// [`Self::forward`] to the matching subscriptions `allow` lets hear it.
    fn forward_where(&mut self, now: Duration, notice: &NoticeRepr, allow: impl Fn(&Subscription) -> bool) {
        if self.serving != Serving::Master {
            return;
        }
        let targets: Vec<_> = self
            .subscriptions
            .iter()
            .filter(|s| s.matches(notice, &notice.issuer_gid) && allow(s))
            .map(|s| {
                let mut to = s.addr;
                to.qkey = crate::datagram::MadAddress::QP1_QKEY;
                to
            })
            .collect();
        for to in targets {
            self.stats.reports.queued += 1;
            let (max, per) = (self.cfg.max_reports, self.cfg.max_reports_per_subscriber);
            match self.reports.start(now, self.cfg.report_timeout(), to, notice, max, per) {
                Ok(d) => {
                    self.stats.reports.sent += 1;
                    self.push(now, d);
                }
                Err(ReportFull::Total) => {
                    self.stats.drops.report_cap += 1;
                    let n = self.reports.len();
                    self.gate(now, Level::WARN, "report_cap", || {
                        format!("{n} Reports in flight: a Report was dropped")
                    });
                }
                Err(ReportFull::Subscriber) => {
                    self.stats.drops.report_subscriber_cap += 1;
                    let lid = to.lid;
                    self.gate(now, Level::WARN, "report_subscriber_cap", || {
                        format!("{per} Reports to LID {lid} wait for a ReportResp: a Report to it was dropped")
                    });
                }
            }
        }
    }

    // ---- Answers.

    /// A status answer with no data.
    fn refuse(&mut self, now: Duration, req: &Request<'_>, status: u16) {
        self.stats.query(req.attribute, req.method).errors += 1;
        self.count_status(status);
        let d = wire::single_answer(req, status, 0, &[]);
        self.push(now, d);
    }

    /// A successful one-MAD answer carrying `data` (`n` records).
    fn reply(&mut self, now: Duration, req: &Request<'_>, attribute_offset: u16, data: &[u8], n: usize) {
        self.count_ok(req, n);
        let d = wire::single_answer(req, 0, attribute_offset, data);
        self.push(now, d);
    }

    fn count_ok(&mut self, req: &Request<'_>, n: usize) {
        let q = self.stats.query(req.attribute, req.method);
        q.ok += 1;
        q.records += n as u64;
    }

    fn count_status(&mut self, status: u16) {
        *self.stats.by_status.entry(status).or_default() += 1;
    }

    fn refresh_gauges(&mut self) {
        self.stats.mcast.groups = self.mcast.len() as u64;
        self.stats.mcast.members = self.mcast.member_count() as u64;
        self.stats.services = self.services.len() as u64;
        self.stats.subscriptions = self.subscriptions.len() as u64;
        self.stats.alias_guids = self.aliases.len() as u64;
    }

    /// Queues one MAD; a full queue drops it (counted).
    fn push(&mut self, now: Duration, d: Datagram) {
        if self.out.len() >= self.cfg.max_queued {
            self.stats.drops.queue_full += 1;
            let n = self.stats.drops.queue_full;
            self.gate(now, Level::WARN, "queue_full", || format!("SA send queue full: {n} MADs dropped so far"));
            return;
        }
        self.stats.answered += 1;
        self.out.push_back(d);
    }

    /// One log line about `reason` at `level`, at most once per
    /// `log_period` (floods are counted in the stats, not logged one by
    /// one); `msg` is only formatted when the line goes out.
    fn gate(&mut self, now: Duration, level: Level, reason: &'static str, msg: impl FnOnce() -> String) {
        if !self.log.allow(now, self.cfg.log_period(), reason) {
            return;
        }
        // The tracing macros take their level as a constant.
        match level {
            Level::ERROR => error!(reason, "{}", msg()),
            Level::WARN => warn!(reason, "{}", msg()),
            Level::INFO => info!(reason, "{}", msg()),
            Level::DEBUG => debug!(reason, "{}", msg()),
            _ => trace!(reason, "{}", msg()),
        }
    }
}

/// How large an answer may be built (`SaAgent::budget`).
#[derive(Debug, Clone, Copy)]
struct Budget {
    bytes: usize,
    /// The RMPP room that cut `bytes` below `max_answer_bytes`.
    rmpp: Option<SendError>,
}

/// A port's GUIDCap as its PortInfo says (at least 1: its own GUID).
fn guid_cap(subnet: &crate::subnet::Subnet, p: &index::PortAt) -> u16 {
    let node = subnet.node(p.node);
    let info = node.ports.get(usize::from(p.port)).and_then(|s| s.info.as_ref());
    u16::from(info.map_or(1, |i| i.guid_cap)).max(1)
}
