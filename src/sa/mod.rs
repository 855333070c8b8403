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
//! bits (`exchange::txn`). Reports use low 32 bits with bit 31 set
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
//!
//! # Where things are
//! [`SaAgent`] is here; what it does with each input, and the checks and
//! method/attribute routing of a request, in `agent`; Get and GetTable
//! answered from the snapshot in `queries` (records in `records`, matched
//! by `table`; PathRecords in [`path`]); Set and Delete of what requesters
//! register in `registrations` (kept in `services`, `inform`, `guids`;
//! multicast in [`mcast`]); building and queueing answers and Reports, and
//! multi-MAD answers in flight, in `sends` (their bytes in `wire`).

pub mod fair;
pub mod mcast;
pub mod path;
pub mod stats;

mod agent;
mod guids;
pub(crate) mod index;
mod inform;
pub mod mirror;
mod queries;
mod reassembly;
mod records;
mod registrations;
mod sends;
mod services;
mod state_sync;
pub mod sync;
mod table;
mod visibility;
mod wire;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::Arc;

pub use crate::config::sa::{NotServing, SaConfig};
pub use agent::{NotAGet, PreparedSnapshot};
pub use mirror::MirrorRead;
pub use stats::SaStats;

use crate::datagram::Datagram;
use crate::mad::SmInfoRepr;
use crate::subnet::snapshot::Snapshot;
use crate::types::Guid;
use guids::AliasGuids;
use inform::{Reports, Subscriptions};
use records::{QosKnown, Records};
use sends::Sends;
use services::Services;
use stats::LogGate;

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
    records: Option<Records>,
    /// The switches' multicast tables: the snapshot's, with the passes
    /// between sweeps applied; `mft_stale` until the MFT records follow.
    mcast_tables: std::collections::HashMap<Guid, std::collections::BTreeMap<u16, ibsm_routing::mcast::PortSet>>,
    mft_stale: bool,
    /// The snapshot's ports: end ports for PathRecords and the SA's
    /// port table (empty until the first snapshot).
    paths: path::PathIndex,
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
    /// The state stream to standbys, or from the master ([`sync`]).
    sync: state_sync::StateSync,
    /// Requests coming in several RMPP segments ([`reassembly`]).
    reassembly: reassembly::Reassembly,
}

impl SaAgent {
    pub fn new(cfg: SaConfig, own_port_guid: Guid) -> Self {
        SaAgent {
            cfg,
            own_port_guid,
            serving: Serving::NotMaster,
            snapshot: None,
            records: None,
            mcast_tables: Default::default(),
            mft_stale: false,
            paths: path::PathIndex::default(),
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
            sync: Default::default(),
            reassembly: Default::default(),
        }
    }
}
