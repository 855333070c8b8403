//! What the agent does with each of its inputs: the runtime's (role,
//! snapshot, mirror, trap, timers) and every SA-class MAD. A MAD is
//! classified (`wire`), then a request passes the serving and SM_Key
//! checks and is routed by method and attribute to its handler: a query
//! over the snapshot ([`super::queries`]), a Set or Delete of what
//! requesters register ([`super::registrations`]), a multicast join or
//! leave ([`super::mcast`]), or a refusal ([`super::sends`]).

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, error, info, trace, warn, Level};

use super::queries::guid_cap;
use super::records::Records;
use super::sends::SendKey;
use super::wire::{self, Received, Request};
use super::{mcast, mirror, path, reassembly, MirrorRead, NotServing, SaAgent, SaConfig, SaStats, Serving};
use crate::datagram::Datagram;
use crate::mad::sa::{sa_status, SaAttributeId};
use crate::mad::{Method, NoticeRepr, SmInfoRepr};
use crate::subnet::snapshot::Snapshot;
use crate::types::{Guid, Lid};

/// What [`SaAgent::answer_get`] leaves to [`SaAgent::handle_mad`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAGet;

/// A snapshot with the SA's indexes and records built from it, ready for
/// [`SaAgent::install`].
pub struct PreparedSnapshot {
    snap: Arc<Snapshot>,
    paths: path::PathIndex,
    records: Records,
    qos: super::records::QosKnown,
}

impl PreparedSnapshot {
    /// The sweep sequence it was built from.
    pub fn sequence(&self) -> u64 {
        self.snap.sequence
    }
}

impl SaAgent {
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
        let was_master = self.serving == Serving::Master;
        self.serving = serving;
        if serving == Serving::Master {
            self.start_source();
        } else if was_master {
            self.stop_source();
        }
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
        self.sync.mirror_read(now);
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
    pub(super) fn try_take_over(&mut self, now: Duration) {
        if !self.take_over || self.serving != Serving::Master {
            return;
        }
        let Some(snap) = self.snapshot.clone() else { return };
        self.take_over = false;
        // The stream's copy, when newer than the last periodic read.
        if let Some(read) = self.sync_copy_as_read() {
            info!("SA takes over from the state stream's copy of the master");
            self.mirror.keep(read, &self.cfg);
        }
        let Some(copy) = self.mirror.take() else {
            debug!("SA became master with no mirror of a previous master's state");
            return;
        };
        let fabric = mcast::SnapshotFabric::new(&self.paths, &snap);
        let live = mirror::Live {
            services: &mut self.services,
            subscriptions: &mut self.subscriptions,
            aliases: &mut self.aliases,
            mcast: &mut self.mcast,
            mcast_fabric: &fabric,
            mcast_limits: mcast::McLimits::from_config(&self.cfg, self.mlids),
        };
        let r = mirror::import(copy, now, &self.cfg, &self.paths, |p| guid_cap(&snap.sweep.subnet, p), live);
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
    pub(super) fn index_path_aliases(&mut self) {
        self.paths.set_aliases(self.aliases.iter());
    }

    /// [`Self::index_path_aliases`] after one port's change (`before`: its
    /// aliases until then), in O(its aliases).
    pub(super) fn index_port_aliases(&mut self, port: Guid, before: &[Guid]) {
        self.paths.update_aliases(before.iter().copied(), self.aliases.of_port(port).map(|(_, g)| (g, port)));
    }

    /// A new sweep snapshot: rebuilds the records and indexes from it;
    /// ports that left service since the last one are reported as trap 65,
    /// ports that entered it as trap 64, to the subscribers that asked;
    /// subscriptions, ServiceRecords and alias GUIDs of ports gone from
    /// the fabric are dropped; multicast members gone from the fabric or
    /// their group's partition leave, and the partitions' well-known
    /// groups are made or updated ([`mcast::McGroups::sync`]).
    pub fn new_snapshot(&mut self, now: Duration, snap: Arc<Snapshot>) {
        let build = self.prepare(snap);
        self.install(now, build());
    }

    /// The costly part of [`Self::new_snapshot`] (the path index and the
    /// records, in proportion to the fabric), as work that needs nothing
    /// of the agent: a runtime may run it on another thread while the
    /// agent keeps answering from the snapshot it has, then
    /// [`Self::install`] what it built. The QoS tables known so far go
    /// with it and come back at `install`: one preparation at a time.
    pub fn prepare(&mut self, snap: Arc<Snapshot>) -> impl FnOnce() -> PreparedSnapshot + Send + 'static {
        let mut qos = std::mem::take(&mut self.qos);
        move || {
            let paths = path::PathIndex::build(&snap.sweep);
            qos.update(&snap);
            let records = Records::build(&snap, &paths, &qos);
            PreparedSnapshot { snap, paths, records, qos }
        }
    }

    /// Takes a prepared snapshot in: the rest of [`Self::new_snapshot`].
    pub fn install(&mut self, now: Duration, prepared: PreparedSnapshot) {
        let PreparedSnapshot { snap, paths, records, qos } = prepared;
        self.stats.snapshots += 1;
        let old = std::mem::replace(&mut self.paths, paths);
        let first = self.snapshot.is_none();
        self.qos = qos;
        self.stats.records = records.count() as u64;
        self.records = Some(records);
        self.mcast_tables = snap.sweep.mcast_tables.clone();
        self.mft_stale = false;
        self.snapshot = Some(snap.clone());

        let (subs, services, aliases) = {
            let ports = &self.paths;
            (
                self.subscriptions.follow_ports(|g| ports.port_by_guid(g).map(|p| p.base_lid.0)),
                self.services.retain_owners(|g| ports.has_port(g)),
                self.aliases.retain_ports(|g| ports.has_port(g)),
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
        if crate::mad::sm_sync::is_sync_mad(&dgram.mad) {
            return self.handle_sync_mad(now, dgram);
        }
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
                    self.reap_sends(now);
                } else {
                    self.stats.drops.stray_rmpp += 1;
                }
            }
            Received::Segmented { request } => {
                if self.may_answer(now, dgram, &request) {
                    self.reassemble(now, dgram, &request);
                }
            }
            Received::Request(request) => {
                if self.may_answer(now, dgram, &request) {
                    self.handle_request(now, &request);
                }
            }
        }
    }

    /// Whether `mad` is a request [`Self::answer_get`] takes, from its
    /// header alone: a SubnAdmGet of the SA's class version (not a sync
    /// MAD, which shares the class).
    pub fn is_get(mad: &[u8]) -> bool {
        mad.len() >= crate::mad::MAD_HEADER_LEN
            && mad[2] == wire::SA_CLASS_VERSION
            && Method::from(mad[3]) == Method::Get
            && !crate::mad::sm_sync::is_sync_mad(mad)
    }

    /// A SubnAdmGet, handled as [`Self::handle_mad`] would and its one
    /// answer (or refusal) handed back rather than queued, for a caller
    /// that sends it from its own thread: a Get is answered in one MAD,
    /// with no transfer, Report or change to publish after it. `Ok(None)`:
    /// dropped (not serving and silent, a wrong SM_Key), counted as
    /// `handle_mad` counts it. Anything but a well-formed Get is `Err`,
    /// untouched, for `handle_mad`.
    pub fn answer_get(&mut self, now: Duration, dgram: &Datagram) -> Result<Option<Datagram>, NotAGet> {
        if !Self::is_get(&dgram.mad) {
            return Err(NotAGet);
        }
        let Received::Request(request) = wire::classify(dgram) else { return Err(NotAGet) };
        self.stats.received += 1;
        let queued = self.out.len();
        if self.may_answer(now, dgram, &request) {
            self.handle_request(now, &request);
        }
        debug_assert!(self.out.len() <= queued + 1, "a Get is answered in one MAD");
        Ok(if self.out.len() > queued { self.out.pop_back() } else { None })
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
            if let Some(p) = self.paths.port_by_lid(issuer) {
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
        let Some((d, resent)) = self.sends.poll_transmit(now) else {
            return self.sync_transmit(now);
        };
        self.stats.rmpp.segments += 1;
        if resent {
            self.stats.rmpp.resent += 1;
        }
        self.reap_sends(now);
        Some(d)
    }

    /// When `handle_timeout` should run next: an RMPP wait, a Report
    /// retry or a ServiceRecord lease.
    pub fn poll_timeout(&self) -> Option<Duration> {
        [
            self.sends.poll_timeout(),
            self.reports.next_deadline(),
            self.services.next_expiry(),
            self.sync_timeout(),
            self.reassembly.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        let mut aborts = Vec::new();
        let ended = self.reassembly.handle_timeout(now, &mut |d| aborts.push(d));
        for d in aborts {
            self.push(now, d);
        }
        for (lid, e) in ended {
            self.stats.drops.segmented_requests += 1;
            self.gate(now, Level::INFO, "segmented_request", || {
                format!("a multi-segment request from LID {lid} ended unreceived: {e}")
            });
        }
        self.sends.handle_timeout(now);
        self.reap_sends(now);
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

    pub(super) fn refresh_gauges(&mut self) {
        self.stats.mcast.groups = self.mcast.len() as u64;
        self.stats.mcast.members = self.mcast.member_count() as u64;
        self.stats.services = self.services.len() as u64;
        self.stats.subscriptions = self.subscriptions.len() as u64;
        self.stats.alias_guids = self.aliases.len() as u64;
    }

    /// One log line about `reason` at `level`, at most once per
    /// `log_period` (floods are counted in the stats, not logged one by
    /// one); `msg` is only formatted when the line goes out.
    pub(super) fn gate(&mut self, now: Duration, level: Level, reason: &'static str, msg: impl FnOnce() -> String) {
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

    /// A MAD from `from` was dropped unread: the requester held more than
    /// its share of the SA's queue (a flood; `super::fair`).
    /// Requests dropped because the SA's queue was full, by a caller that
    /// answers on its own thread.
    pub fn count_queue_full(&mut self, dropped: u64) {
        self.stats.drops.queue_full += dropped;
    }

    pub fn count_share_drop(&mut self, now: Duration, from: Lid) {
        self.stats.drops.requester_share += 1;
        let n = self.stats.drops.requester_share;
        self.gate(now, Level::WARN, "requester_share", || {
            format!(
                "SA MADs from LID {from} dropped unread: it sends more than its share of the SA's queue \
                 (a flood from one requester); {n} dropped so far, other requesters are served in turn"
            )
        });
    }

    /// One segment of a multi-segment request: ACKed, and once the
    /// request is whole, handled as one that came in a single MAD.
    fn reassemble(&mut self, now: Duration, dgram: &Datagram, request: &Request<'_>) {
        let cfg = self.rmpp_config();
        let mut acks = Vec::new();
        let step = self.reassembly.take(now, dgram, request.tid, cfg, &mut |d| acks.push(d));
        for d in acks {
            self.push(now, d);
        }
        let lid = dgram.addr.lid;
        match step {
            reassembly::Step::Going => {}
            reassembly::Step::Whole(mut whole) => {
                self.stats.rmpp.requests_received += 1;
                // Whole now: its RMPPFlags (Active, First, Last; the low
                // bits of byte 26) cleared, it is no transfer to ACK again.
                if let Some(flags) = whole.get_mut(crate::mad::rmpp::RMPP_HEADER_OFFSET + 2) {
                    *flags &= !0x07;
                }
                let whole = Datagram { addr: dgram.addr, mad: whole };
                if let Received::Request(r) = wire::classify(&whole) {
                    self.handle_request(now, &r);
                }
            }
            reassembly::Step::Failed(e) => {
                self.stats.drops.segmented_requests += 1;
                self.gate(now, Level::INFO, "segmented_request", || {
                    format!("a multi-segment request from LID {lid} (TID {:#x}) ended unreceived: {e}", request.tid)
                });
            }
            reassembly::Step::NoRoom => {
                self.stats.drops.segmented_requests += 1;
                let held = self.reassembly.len();
                self.gate(now, Level::WARN, "segmented_request", || {
                    format!(
                        "a multi-segment request from LID {lid} refused (ERR_NO_RESOURCES): {held} being received, \
                         at most {} at once and {} from one requester",
                        reassembly::MAX_TRANSFERS,
                        reassembly::PER_REQUESTER
                    )
                });
                self.refuse(now, request, wire::sa_error(sa_status::NO_RESOURCES));
            }
            reassembly::Step::Stray => self.stats.drops.segmented_requests += 1,
        }
    }

    // ---- Requests.

    /// Serving and key checks before a request is read. Returns whether to
    /// go on (a refusal has been queued or the MAD dropped otherwise).
    pub(super) fn may_answer(&mut self, now: Duration, dgram: &Datagram, req: &Request<'_>) -> bool {
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

    pub(super) fn trusted(&self, req: &Request<'_>) -> bool {
        self.cfg.sa_key != 0 && req.sm_key == self.cfg.sa_key
    }

    pub(super) fn handle_request(&mut self, now: Duration, req: &Request<'_>) {
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
            A::PortInfoRecord => self.port_info_records(now, req, trusted),
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
            A::MulticastForwardingTableRecord => self.mft_records(now, req, trusted, &snap),
            A::SlToVlMappingTableRecord => self.table_query(now, req, trusted, |r| &r.sl2vl),
            A::VlArbitrationTableRecord => self.table_query(now, req, trusted, |r| &r.vlarb),
            A::LinearForwardingTableRecord => self.lft_records(now, req, trusted, &snap),
            A::SmInfoRecord => self.sm_info_records(now, req, trusted, &snap),
            A::GuidInfoRecord if read => self.guid_info_query(now, req, trusted, &snap),
            A::GuidInfoRecord => self.guid_info_change(now, req, trusted),
            A::ServiceRecord if read => self.service_records(now, req, trusted),
            A::ServiceRecord => self.service_change(now, req, trusted),
            A::InformInfo => self.inform_info(now, req, trusted),
            A::McMemberRecord if read => self.mc_member_query(now, req, trusted, &snap),
            A::McMemberRecord => self.mc_member_change(now, req, trusted, &snap),
            A::PathRecord => self.path_record(now, req),
            A::MultiPathRecord => self.multi_path_record(now, req),
            A::InformInfoRecord => self.inform_info_records(now, req, trusted),
            _ => self.refuse(now, req, wire::METHOD_ATTR_UNSUPPORTED),
        }
    }
}
