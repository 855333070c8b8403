//! What requesters register, by SubnAdmSet and SubnAdmDelete: alias GUIDs
//! (GUIDInfoRecord, kept in [`super::guids`]), ServiceRecords
//! ([`super::services`]) and InformInfo subscriptions
//! ([`super::inform`]). Multicast joins and leaves are [`super::mcast`]'s.

use std::time::Duration;

use tracing::Level;

use super::inform::{self, InformError, Subscription};
use super::queries::guid_cap;
use super::services::{self, ServiceError};
use super::table;
use super::wire::{self, Request};
use super::{index, SaAgent};
use crate::mad::sa::{guid_info_mask, sa_status, GuidInfoRecordRepr, InformInfoRepr, SaRecord, ServiceRecordRepr};
use crate::mad::Method;
use crate::types::Guid;

impl SaAgent {
    /// GUIDInfoRecord Set and Delete: alias GUIDs of one port, named by
    /// LID (required) and BlockNum, the GUIDs by their mask bits. Only the
    /// port itself or a trusted requester may change them.
    pub(super) fn guid_info_change(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
        let Ok(rec) = GuidInfoRecordRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        if req.mask & guid_info_mask::LID == 0 || table::unknown_mask::<GuidInfoRecordRepr>(req.mask) {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        }
        let Some(port) = self.paths.port_by_lid(rec.lid).filter(|p| p.base_lid == rec.lid) else {
            self.refuse(now, req, wire::sa_error(sa_status::NO_RECORDS));
            return;
        };
        let requester = self.paths.port_by_lid(req.addr.lid).map(|p| p.guid);
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
            let ports = &self.paths;
            let refused = self.aliases.set(
                port.guid,
                block,
                entries,
                &rec.guid_info,
                cap,
                |g| ports.has_port(g),
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
    pub(super) fn service_change(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
        let Ok(rec) = ServiceRecordRepr::parse_bytes(req.data) else {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        };
        if table::unknown_mask::<ServiceRecordRepr>(req.mask) {
            self.refuse(now, req, wire::sa_error(sa_status::REQ_INVALID));
            return;
        }
        let Some(owner) = self.paths.port_by_lid(req.addr.lid).map(|p| p.guid) else {
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
    pub(super) fn inform_info(&mut self, now: Duration, req: &Request<'_>, trusted: bool) {
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
        let Some(owner) = self.paths.port_by_lid(req.addr.lid) else {
            refuse_echo(self, sa_status::REQ_INVALID);
            return;
        };
        if info.subscribe {
            // A GID must name a port of the fabric (o13-14.1.1 as OpenSM).
            if info.gid != [0; 16] && !self.paths.has_port(index::gid_guid(&info.gid)) {
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
}
