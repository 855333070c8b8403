//! The subnet administrator (class 0x03, version 2): an I/O-free core that
//! answers SA queries from the last sweep's snapshot, keeps what requesters
//! register (ServiceRecords, InformInfo subscriptions, alias GUIDs), and
//! sends Reports to subscribers.
//!
//! ```text
//!  runtime ── handle_mad(now, MAD) ──► SaAgent ── poll_transmit(now) ──► answers, RMPP segments, Reports
//!          ── new_snapshot(now, snap)     │      poll_timeout / handle_timeout(now): RMPP resends,
//!          ── set_serving(now, role)      │          Report retries, ServiceRecord leases
//!          ── handle_trap(now, notice) ───┘
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
//! # TIDs
//! Reports are requests of ours that share the SA class with the
//! transport's own SA queries, whose TIDs count up from 1 in the low 32
//! bits (`transport::txn`). Reports use low 32 bits with bit 31 set
//! (0x8000_0000 | n), which the transport reaches only after 2^31
//! requests; ReportResps are matched on the low 32 bits (the kernel owns
//! the high ones).

pub mod config;
pub mod stats;

mod index;
mod table;
mod wire;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

pub use config::{NotServing, SaConfig};
pub use stats::SaStats;

use crate::mad::sa::sa_status;
use crate::mad::{Method, NoticeRepr};
use crate::runtime::snapshot::Snapshot;
use crate::transport::Datagram;
use crate::types::{Guid, Lid};
use index::PortIndex;
use stats::LogGate;
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

/// The SA agent; see the module docs.
pub struct SaAgent {
    cfg: SaConfig,
    own_port_guid: Guid,
    serving: Serving,
    snapshot: Option<Arc<Snapshot>>,
    ports: PortIndex,
    out: VecDeque<Datagram>,
    stats: SaStats,
    log: LogGate,
}

impl SaAgent {
    pub fn new(cfg: SaConfig, own_port_guid: Guid) -> Self {
        SaAgent {
            cfg,
            own_port_guid,
            serving: Serving::NotMaster,
            snapshot: None,
            ports: PortIndex::default(),
            out: VecDeque::new(),
            stats: SaStats::default(),
            log: LogGate::default(),
        }
    }

    /// The role changes. Leaving MASTER stops what the SA was sending
    /// (multi-MAD answers, Reports); what requesters registered is kept.
    pub fn set_serving(&mut self, now: Duration, serving: Serving) {
        if serving == self.serving {
            return;
        }
        info!(from = ?self.serving, to = ?serving, "SA serving state");
        let _ = now;
        self.serving = serving;
        if serving != Serving::Master {
            self.out.clear();
        }
    }

    pub fn serving(&self) -> Serving {
        self.serving
    }

    /// A new sweep snapshot: rebuilds the records and indexes from it.
    pub fn new_snapshot(&mut self, now: Duration, snap: Arc<Snapshot>) {
        let _ = now;
        self.stats.snapshots += 1;
        self.ports = PortIndex::build(&snap.sweep);
        debug!(sequence = snap.sequence, ports = self.ports.in_service().count(), "SA took a snapshot");
        self.snapshot = Some(snap);
    }

    /// Any SA-class MAD: a request, an RMPP ACK/STOP/ABORT for one of our
    /// answers, a ReportResp. Never panics.
    pub fn handle_mad(&mut self, now: Duration, dgram: &Datagram) {
        self.stats.received += 1;
        match wire::classify(dgram) {
            Received::Malformed => self.stats.drops.malformed += 1,
            Received::BadVersion { version, answerable } => {
                if answerable {
                    self.gate_debug(now, "bad_version", || format!("SA MAD of class version {version} refused"));
                    if let Some(reply) = wire::status_echo(dgram, wire::BAD_VERSION) {
                        self.count_status(wire::BAD_VERSION);
                        self.push(now, reply);
                    }
                } else {
                    self.stats.drops.malformed += 1;
                }
            }
            Received::Response { .. } => self.stats.drops.stray_responses += 1,
            Received::RmppControl { .. } => self.stats.drops.stray_rmpp += 1,
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

    /// A trap the SM received: Reports to the subscribers that match it.
    pub fn handle_trap(&mut self, now: Duration, notice: &NoticeRepr, from: Lid) {
        let _ = (now, notice, from);
        self.stats.reports.traps_received += 1;
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Datagram> {
        let _ = now;
        self.out.pop_front()
    }

    /// When `handle_timeout` should run next.
    pub fn poll_timeout(&self) -> Option<Duration> {
        None
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        let _ = now;
    }

    pub fn stats(&self) -> &SaStats {
        &self.stats
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
            self.gate_warn(now, "bad_sm_key", || format!("SA request from LID {lid} with SM_Key {key:#x} dropped"));
            return false;
        }
        true
    }

    fn trusted(&self, req: &Request<'_>) -> bool {
        self.cfg.sa_key != 0 && req.sm_key == self.cfg.sa_key
    }

    fn handle_request(&mut self, now: Duration, req: &Request<'_>) {
        let (attr, method) = (req.attr_raw(), u8::from(req.method));
        if !matches!(req.method, Method::Get | Method::Set | Method::GetTable | Method::Delete | Method::GetMulti) {
            // Report is only sent by the SA; GetTraceTable, Send and the
            // rest are not SA requests it serves (IBA 15.2.2).
            self.refuse(now, req, wire::METHOD_UNSUPPORTED);
            return;
        }
        self.stats.query(attr, method).requests += 1;
        let _trusted = self.trusted(req);
        // No record is served yet: every attribute is refused as an
        // unsupported method/attribute combination (IBA 13.4.7).
        self.refuse(now, req, wire::METHOD_ATTR_UNSUPPORTED);
    }

    /// A status answer with no data.
    fn refuse(&mut self, now: Duration, req: &Request<'_>, status: u16) {
        if req.method != Method::Report && req.method.is_response() {
            return;
        }
        self.stats.query(req.attr_raw(), req.method.into()).errors += 1;
        self.count_status(status);
        let d = wire::single_answer(req, status, 0, &[]);
        self.push(now, d);
    }

    fn count_status(&mut self, status: u16) {
        *self.stats.by_status.entry(status).or_default() += 1;
    }

    /// Queues one MAD; a full queue drops it (counted).
    fn push(&mut self, now: Duration, d: Datagram) {
        if self.out.len() >= self.cfg.max_queued {
            self.stats.drops.queue_full += 1;
            let n = self.stats.drops.queue_full;
            self.gate_warn(now, "queue_full", || format!("SA send queue full: {n} MADs dropped so far"));
            return;
        }
        self.stats.answered += 1;
        self.out.push_back(d);
    }

    fn gate_warn(&mut self, now: Duration, reason: &'static str, msg: impl FnOnce() -> String) {
        if self.log.allow(now, self.cfg.log_period(), reason) {
            warn!(reason, "{}", msg());
        }
    }

    fn gate_debug(&mut self, now: Duration, reason: &'static str, msg: impl FnOnce() -> String) {
        if self.log.allow(now, self.cfg.log_period(), reason) {
            debug!(reason, "{}", msg());
        }
    }
}
