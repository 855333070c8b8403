//! What one heavy sweep decided and did, as plain values: the report the
//! programmer fills and the snapshot carries to every reader (the SA's
//! records, `/status`, metrics, the dumps). Nothing here computes a route
//! or sends a Set; `crate::program` does, and fills these in.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ibsm_routing::auto::AutoChoice;
use ibsm_routing::mcast::PortSet;
use ibsm_routing::EngineKind;

use crate::lid::assign::LidAssignment;
use crate::mad::{AttributeId, DrPath, PKeyTableBlockRepr, PortState};
use crate::subnet::model::{NodeId, Subnet, SweepProblem};
use crate::types::Guid;

/// What one sweep found and did.
#[derive(Debug, Clone)]
pub struct SweepReport {
    pub mode: MasterMode,
    /// A heavy sweep, or a reaction to a bounded change set.
    pub kind: super::changes::SweepKind,
    pub subnet: Subnet,
    pub lids: LidAssignment,
    pub program: ProgramReport,
    /// Cabled ports that did not reach ACTIVE.
    pub inactive: Vec<InactivePort>,
    pub routing_notes: Vec<String>,
    /// The engine that routed and how long routing took.
    pub routing: RoutingRun,
    /// What the sweep decided to route.
    pub routes: SweptRoutes,
    /// The partitions this sweep programmed (`None`: the SM was given no
    /// partition source, and ports only gained the default P_Key).
    pub partitions: Option<Arc<crate::partition::PartitionSet>>,
    /// The multicast pass that ended the sweep.
    pub mcast: McastReport,
    /// The multicast trees as that pass routed them: each switch's MLID ->
    /// output ports, by node GUID (switches no group crosses are absent).
    /// What the SA's MulticastForwardingTableRecords answer from; joins
    /// routed between sweeps (`SubnetManager::program_multicast`) are in
    /// the next sweep's.
    pub mcast_tables: HashMap<Guid, BTreeMap<u16, PortSet>>,
    pub elapsed: Duration,
}

impl SweepReport {
    /// Every cabled port between managed nodes is ACTIVE, every port got a
    /// LID, and discovery saw the whole fabric: no read went unanswered
    /// without something known (a stale node or port) standing in for it.
    pub fn subnet_up(&self) -> bool {
        self.inactive.is_empty()
            && self.lids.error.is_none()
            && !self.subnet.nodes.is_empty()
            && self.subnet.unknown().next().is_none()
    }
    pub fn problems(&self) -> &[SweepProblem] {
        &self.subnet.problems
    }
}

/// The routes one sweep decided, for readers of its snapshot (the SA's
/// PathRecords, LinearForwardingTableRecords, `/status`).
#[derive(Debug, Clone, Default)]
pub struct SweptRoutes {
    /// Output port per LID, by switch node GUID. Shared: readers of the
    /// snapshot (the SA's path index) keep the tables without copying them
    /// (at 50,000 LIDs and 4,000 switches they are 200 MB).
    pub lfts: HashMap<Guid, Arc<Vec<u8>>>,
    /// The SL of every route when the engine uses VLs, by routed switch
    /// index (`switches`).
    pub path_sl: Option<ibsm_routing::lft::PathSl>,
    /// Node GUIDs of the routed switches, by index.
    pub switches: Vec<Guid>,
    /// The SL-to-VL and VL arbitration tables the sweep asked for.
    pub qos: Vec<QosSet>,
}

/// How this SM comes to program the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterMode {
    /// The first master sweep on a fabric nobody programmed: end ports get
    /// ClientReregister, and `reassign_lids` applies.
    Fresh,
    /// This SM becomes master of a fabric another master programmed
    /// (failover or handover). Nothing already right is rewritten: LIDs
    /// ports hold are kept, no ClientReregister, LFT blocks and QoS tables
    /// are read before any is written (what this SM remembers writing is
    /// forgotten: another master may have written since), and only those
    /// that differ are sent. The one change every end port gets is
    /// PortInfo.MasterSMLID, counted in `ProgramReport::sm_lid_only_sets`.
    Takeover,
    /// A takeover as [`MasterMode::Takeover`], by an SM whose copy of the
    /// old master's SA state is stale or missing (`crate::sa::sync`): end
    /// ports also get ClientReregister, so clients join and register
    /// again with it (what OpenSM does on every first master sweep).
    TakeoverReregister,
    /// A later sweep as master: Sets only where the fabric differs from what
    /// this SM wrote.
    Continuing,
}

impl MasterMode {
    /// Either kind of takeover: another master programmed the fabric.
    pub fn is_takeover(self) -> bool {
        matches!(self, MasterMode::Takeover | MasterMode::TakeoverReregister)
    }
}

/// A cabled port between managed nodes that is not ACTIVE after a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InactivePort {
    pub guid: Guid,
    pub name: String,
    pub port: u8,
    pub path: crate::mad::DrPath,
    /// As last read; `None` when it could not be read.
    pub state: Option<PortState>,
}

impl std::fmt::Display for InactivePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}) port {} at path {}: {:?}", self.guid, self.name, self.port, self.path, self.state)
    }
}

/// What programming sent, by kind; every count but `failures`, `*_reads`
/// and `armed`/`activated` is a Set the fabric answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramReport {
    /// PortInfo Sets, `sm_lid_only_sets` included.
    pub port_sets: usize,
    /// PortInfo Sets whose only change is MasterSMLID (a new master's
    /// LID): the one change a takeover cannot avoid.
    pub sm_lid_only_sets: usize,
    pub switch_info_sets: usize,
    pub lft_blocks: usize,
    /// Rounds the LFT blocks of switches with known tables went out in,
    /// nearest their destinations first (`crate::program::lft_order`), and
    /// the writes of intermediate contents that order took (included in
    /// `lft_blocks`).
    pub lft_rounds: usize,
    pub lft_staged: usize,
    pub armed: usize,
    pub activated: usize,
    pub pkey_reads: usize,
    pub pkey_sets: usize,
    pub sl2vl_sets: usize,
    pub vlarb_sets: usize,
    /// LFT blocks read before writing (takeover).
    pub lft_reads: usize,
    /// SLtoVLMapping and VLArbitration tables read before writing (takeover).
    pub qos_reads: usize,
    /// GUIDInfo blocks (alias GUIDs) written.
    pub guid_info_sets: usize,
    /// GUIDInfo blocks read before writing (takeover).
    pub guid_info_reads: usize,
    /// SMPs (Gets or Sets) that got no usable answer, after any resends.
    pub failures: usize,
    /// Sets sent again in the same sweep after every attempt timed out.
    pub resent: usize,
    /// The whole P_Key table of every port the SM programs P_Keys on (end
    /// ports, switch port 0, and the switch ports enforcing partitions), by
    /// node GUID and port, block by block, as the ports answered the SM's
    /// Sets and reads: what the SA's P_KeyTableRecords answer from. Ports
    /// with a block unknown (a read or Set that failed) are absent.
    pub pkey_blocks: HashMap<(Guid, u8), Vec<PKeyTableBlockRepr>>,
    /// The alias GUIDs ports hold, by port GUID and GUIDInfo index, as they
    /// answered this SM's GUIDInfo Sets and reads (this one's and earlier
    /// ones'). Ports whose table the SM never wrote are absent.
    pub alias_guids: HashMap<Guid, BTreeMap<u16, Guid>>,
}

impl ProgramReport {
    /// Every Set the fabric answered.
    pub fn sets(&self) -> usize {
        self.port_sets
            + self.switch_info_sets
            + self.lft_blocks
            + self.pkey_sets
            + self.sl2vl_sets
            + self.vlarb_sets
            + self.guid_info_sets
    }
    /// Sets that changed something besides PortInfo.MasterSMLID: zero for a
    /// takeover of a fabric that needed nothing else.
    pub fn changing_sets(&self) -> usize {
        self.sets() - self.sm_lid_only_sets
    }
}

/// Which engine of the chain routed, and how long the chain took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingRun {
    /// The engine whose tables were programmed (auto's pick when `auto`
    /// chose). `None`: every engine refused and nothing was routed.
    pub engine: Option<EngineKind>,
    /// Set when `auto` chose the engine: why, and the candidates passed over.
    pub auto: Option<AutoChoice>,
    pub elapsed: Duration,
    /// No engine ran: the routes the switches held (a start or a takeover
    /// on a fabric another SM programmed) were complete, loop-free and
    /// credit-loop free, and were kept (`crate::program::routes::keep_held`).
    pub kept: bool,
    /// After a loss: table entries the engine changed but that were kept,
    /// their old paths still whole (`crate::program::routes::keep_intact`).
    pub intact_kept: u64,
    /// No engine ran: the change crossed no route, and the tables routed
    /// last stand (`crate::program::routes::keep_untouched`); `engine` and
    /// `auto` are those of the run that made them.
    pub untouched: bool,
    /// LIDs routed again when only what a loss broke was repaired
    /// (`crate::program::routes::repair_tree`, `repair_one_vl`); 0 when
    /// the engine routed every LID, or none.
    pub repaired_lids: u32,
    /// No engine ran: the fabric is the one the last engine run routed
    /// (`crate::program::routes::LastRun`), and its tables were taken
    /// again; `engine` and `auto` are that run's.
    pub remembered: bool,
    /// The engines ran without their balance searches
    /// ([`ibsm_routing::Effort::Quick`]): a loss the tables could not be
    /// repaired around, routed for speed. The runtime routes again with
    /// every search once the fabric is quiet.
    pub quick: bool,
}

impl RoutingRun {
    /// The engine's name, `kept` for routes kept as the fabric held
    /// them, or `none`.
    pub fn engine_name(&self) -> &'static str {
        if self.kept || (self.untouched && self.engine.is_none()) {
            return "kept";
        }
        self.engine.map_or("none", |e| e.name())
    }
}

/// What a multicast pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McastReport {
    /// Groups with a tree.
    pub groups: usize,
    /// MFT blocks read before writing (after a takeover, or for switches
    /// the SM knows nothing of).
    pub mft_reads: usize,
    /// Switches whose MFT blocks were taken as the old master's digest
    /// said, unread (after a takeover with a current copy).
    pub mft_vouched: usize,
    /// MFT Sets the switches answered: removals then additions.
    pub mft_sets: usize,
    /// SwitchInfo Sets of MulticastFDBTop (switches that support it).
    pub fdb_top_sets: usize,
    /// Gets or Sets that got no usable answer.
    pub failures: usize,
    /// Members not routed, blocks past a switch's capacity: one line each.
    pub problems: Vec<String>,
    /// Some switch's SMPs failed: a later pass must revisit it (the
    /// runtime schedules one).
    pub retry: bool,
    /// After a pass between sweeps: the MLID -> ports tables of the
    /// switches whose entries it changed, by switch GUID (empty: the
    /// switch holds none now), for the SA's MulticastForwardingTableRecords.
    pub tables: Vec<(Guid, BTreeMap<u16, PortSet>)>,
}

/// One QoS table Set (SLtoVLMapping or VLArbitration) to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosSet {
    pub node: NodeId,
    pub path: DrPath,
    pub attr: AttributeId,
    pub amod: u32,
    pub data: [u8; 64],
}
