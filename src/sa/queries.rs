//! The query engine over the snapshot: SubnAdmGet and SubnAdmGetTable for
//! each record kind, answered from the records emitted once per snapshot
//! ([`super::records`], matched by [`super::table::Query`]), the path index
//! ([`super::path`]) and what requesters registered, as the requester may
//! see them ([`super::visibility`]). How an answer goes out is
//! [`super::sends`]'.

use std::time::Duration;

use super::index::PortAt;
use super::records::{self, Records};
use super::table::{self, Query, QueryError, Spec};
use super::visibility::{Partitions, Viewer};
use super::wire::{self, Request};
use super::{path, services, SaAgent};
use crate::datagram::Datagram;
use crate::mad::class_port_info::{class_cap, sa_cap, sa_cap2, ClassPortInfoRepr};
use crate::mad::sa::port_info_record::ATTR_MOD_CAPABILITY_MASK_MATCH;
use crate::mad::sa::{
    sa_status, GuidInfoRecordRepr, InformInfoRecordRepr, LftRecordRepr, MultiPathRecordRepr, PathRecordRepr, SaRecord,
    ServiceRecordRepr, SmInfoRecordRepr,
};
use crate::mad::Method;
use crate::rmpp::RmppReceiver;
use crate::subnet::snapshot::Snapshot;
use crate::types::Lid;

/// InformInfoRecord components untrusted requesters never see: the QPN
/// (component 11, `inform_info_record_mask::QPN`).
const INFORM_INFO_RECORD_SECRETS: &[usize] = &[11];

/// ClassPortInfo.RespTimeValue: 4.096 µs × 2^16 ≈ 268 ms, the first step
/// above a 200 ms transaction timeout (how OpenSM derives it). The agent
/// itself answers in microseconds; the margin is the runtime's queue.
const RESP_TIME_VALUE: u8 = 16;

impl SaAgent {
    /// ClassPortInfo (IBA 13.4.8.1, 15.2.5.1): what this SA really does.
    pub(super) fn class_port_info(&mut self, now: Duration, req: &Request<'_>) {
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

    pub(super) fn refresh_mft(&mut self, snap: &Snapshot) {
        if !self.mft_stale {
            return;
        }
        if let Some(r) = self.records.as_mut() {
            r.mft = records::mft_table(&snap.sweep.subnet, &self.paths, &self.mcast_tables);
        }
        self.mft_stale = false;
    }

    /// Runs one query: `fill` offers the candidates.
    pub(super) fn run(
        &self,
        req: &Request<'_>,
        spec: Spec,
        trusted: bool,
        fill: impl FnOnce(&Self, &mut Query<'_>),
    ) -> Result<(Vec<u8>, usize), QueryError> {
        self.run_viewed(req, spec, trusted, |agent, _, q| fill(agent, q))
    }

    /// [`Self::run`], `fill` told whose records the requester may see.
    pub(super) fn run_viewed(
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
    pub(super) fn viewer(&self, req: &Request<'_>, trusted: bool) -> Viewer<'_> {
        if trusted {
            return Viewer::All;
        }
        let Some(me) = self.paths.port_by_lid(req.addr.lid).map(|p| p.guid) else { return Viewer::Nobody };
        // The path index holds the sweep's P_Key tables once a snapshot is here.
        let by = match (self.snapshot.as_ref().map(|s| s.sweep.partitions.as_deref()), &self.paths) {
            (Some(Some(set)), _) => Partitions::Set(set),
            (Some(None), paths) => Partitions::Tables(paths),
            (None, _) => return Viewer::Nobody,
        };
        Viewer::Port { me, by }
    }

    /// A query over one of the snapshot's tables.
    pub(super) fn table_query(
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
    pub(super) fn table_query_relaxed(
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

    /// PortInfoRecords: the options components ignored, and with
    /// CapabilityMask matching asked for (the attribute modifier), the
    /// capability masks matched as bit sets.
    pub(super) fn port_info_records(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
        let superset = if req.attribute_modifier & ATTR_MOD_CAPABILITY_MASK_MATCH != 0 {
            records::key::PORT_INFO_CAPABILITY_MASKS
        } else {
            0
        };
        let relax = (records::key::PORT_INFO_OPTIONS, superset);
        self.table_query_relaxed(now, req, trusted, relax, |r| &r.port_info);
    }

    /// MulticastForwardingTableRecords, rebuilt first if a pass between
    /// sweeps changed the tables.
    pub(super) fn mft_records(&mut self, now: Duration, req: &Request<'_>, trusted: bool, snap: &Snapshot) {
        self.refresh_mft(snap);
        self.table_query(now, req, trusted, |r| &r.mft)
    }

    /// LinearForwardingTableRecords, read from the snapshot's tables.
    pub(super) fn lft_records(&mut self, now: Duration, req: &Request<'_>, trusted: bool, snap: &Snapshot) {
        let spec = Spec::of::<LftRecordRepr>(&[]);
        let result = self.run_viewed(req, spec, trusted, |agent, viewer, q| {
            if let Some(r) = agent.records.as_ref() {
                r.lft(snap, q, |g| viewer.sees(g));
            }
        });
        self.answer(now, req, spec, result);
    }

    /// SMInfoRecords ([`records::sm_info`]).
    pub(super) fn sm_info_records(&mut self, now: Duration, req: &Request<'_>, trusted: bool, snap: &Snapshot) {
        let spec = Spec::of::<SmInfoRecordRepr>(records::key::SM_INFO_SECRETS);
        let ours = self.sm_info.unwrap_or_else(|| records::default_sm_info(snap));
        let result =
            self.run_viewed(req, spec, trusted, |_, viewer, q| records::sm_info(snap, &ours, q, |g| viewer.sees(g)));
        self.answer(now, req, spec, result);
    }

    /// GUIDInfoRecord Get and GetTable ([`Self::guid_info_records`]).
    pub(super) fn guid_info_query(&mut self, now: Duration, req: &Request<'_>, trusted: bool, snap: &Snapshot) {
        let spec = Spec::of::<GuidInfoRecordRepr>(&[]);
        let result = self.run_viewed(req, spec, trusted, |agent, viewer, q| agent.guid_info_records(snap, viewer, q));
        self.answer(now, req, spec, result);
    }

    /// ServiceRecord Get and GetTable.
    pub(super) fn service_records(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
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

    /// InformInfoRecord Get and GetTable: the subscriptions.
    pub(super) fn inform_info_records(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
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

    /// GUIDInfoRecords: every LID-bearing port's table in blocks of 8
    /// (GUIDCap GUIDs, at least one block), its GUID and alias GUIDs; the
    /// ports `viewer` may see.
    pub(super) fn guid_info_records(&self, snap: &Snapshot, viewer: &Viewer<'_>, q: &mut Query<'_>) {
        let subnet = &snap.sweep.subnet;
        let one = |lid: u16| self.paths.port_by_lid(Lid(lid)).map(|p| vec![p]).unwrap_or_default();
        let ports: Vec<PortAt> = match q.key(0) {
            Some(lid) => one(lid as u16).into_iter().filter(|p| p.base_lid.0 == lid as u16).collect(),
            None => self.paths.ports().collect(),
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

    /// PathRecord settings for answers of at most `max_bytes` to `req`'s
    /// requester (an untrusted one gets only paths between ports it shares
    /// a partition with).
    pub(super) fn path_config(&self, req: &Request<'_>, max_bytes: usize) -> path::PathConfig {
        path::PathConfig {
            packet_life_time: self.cfg.subnet_timeout,
            max_records: max_bytes / (usize::from(PathRecordRepr::attribute_offset()) * 8),
            requester_must_share: !self.trusted(req),
        }
    }

    /// PathRecords (IBA 15.2.5.16) from `path`: a Get answers the one path
    /// of a port pair, a GetTable every path asked for.
    pub(super) fn path_record(&mut self, now: Duration, req: &Request<'_>) {
        let Ok(query) = PathRecordRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        let paths = &self.paths;
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
    pub(super) fn multi_path_record(&mut self, now: Duration, req: &Request<'_>) {
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
        let paths = &self.paths;
        // Not cut to the RMPP room: MultiPath answers are short (NumbPath
        // at most 127), and `multipath` would cut them silently.
        let cfg = self.path_config(req, self.cfg.max_answer_bytes);
        match path::multipath_records(paths, &query, req.mask, req.addr.lid, &cfg) {
            Ok(records) => self.path_answer(now, req, &records),
            Err(code) => self.path_refusal(now, req, code),
        }
    }
}

/// A port's GUIDCap as its PortInfo says (at least 1: its own GUID).
pub(super) fn guid_cap(subnet: &crate::subnet::Subnet, p: &PortAt) -> u16 {
    let node = subnet.node(p.node);
    let info = node.ports.get(usize::from(p.port)).and_then(|s| s.info.as_ref());
    u16::from(info.map_or(1, |i| i.guid_cap)).max(1)
}
