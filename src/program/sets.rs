//! Programming the fabric: port parameters, LIDs, forwarding tables, and the
//! INIT -> ARMED -> ACTIVE link passes.
//!
//! Packet thrift: a port's parameters ride in the same Set that arms it, so a
//! cold port costs two Sets (ARMED with everything, then ACTIVE). A Set is
//! sent only when the port holds something other than what the SM wants, and
//! LFT blocks only when they differ from what the SM last wrote there.
//!
//! Taking over a fabric another master programmed, or starting afresh on
//! one (a restart, a start on another host), the SM does not know what the
//! switches hold, so it reads first: every LFT block of a switch it has not
//! written, and with `Plan::read_before_write` every QoS table it would
//! write, is fetched, and only the ones that differ are sent. Nothing of a
//! cold switch or port is read (it holds nothing an SM wrote: the SM
//! writes it all anyway). PortInfo and SwitchInfo need no extra read:
//! discovery read them, and a Set is built only where they differ. What
//! does change on every end port is PortInfo.MasterSMLID, the new master's
//! LID; Sets that change only that are counted apart
//! (`ProgramReport::sm_lid_only_sets`).
//!
//! Alias GUIDs (GUIDInfo blocks, [`super::guids`]) ride in the first pass
//! too; the runtime also sends them alone ([`program_aliases`]) when the
//! SA's table changes between sweeps.
//!
//! P_Key tables ([`super::pkeys`]) are read (the blocks the SM does not
//! know) and planned before the first pass; the blocks that change lead
//! it, and the partition enforcement bits of switch ports ride in their
//! PortInfo Sets.

use std::collections::HashMap;

use crate::subnet::{ProgramReport, QosSet};
use crate::sweep::core::{SmpCore, SmpRequest};
use tracing::debug;

use crate::config::SmConfig;
use crate::exchange::SmpError;
use crate::mad::SmpAttribute;
use crate::mad::{
    AttributeId, CapabilityMask, DrPath, GuidInfoBlockRepr, LftBlockRepr, PortInfoRepr, PortState, SwitchInfoRepr,
};
use crate::subnet::{NodeId, Problem, Subnet, SweepProblem};
use crate::sweep::core::SmpDriver;
use crate::types::{Guid, Lid};

use super::guids::{GuidInfoSet, GuidMemo, GuidMemos};
use super::pkeys::{Enforcement, PKeyMemos};
use super::reads::{is_timeout, read_all, RESEND_ROUNDS};
use crate::partition::{PartEnforce, PartitionSet};

/// What the SM wants the fabric to hold after this sweep.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// Base LID and LMC of every end port and switch port 0.
    pub lids: HashMap<(NodeId, u8), (Lid, u8)>,
    /// The SM's own LID.
    pub sm_lid: Lid,
    /// The highest LID in use (SwitchInfo.LinearFDBTop).
    pub top: Lid,
    /// Output port per LID, per switch.
    pub lfts: HashMap<NodeId, Vec<u8>>,
    /// Set PortInfo.ClientReregister on end ports (first master sweep).
    pub client_reregister: bool,
    /// ... on every end port, ACTIVE ones too (a takeover whose copy of
    /// the old master's SA state is stale); otherwise only on ports being
    /// brought up.
    pub reregister_active: bool,
    /// Read every QoS table in `qos` and the GUIDInfo blocks the cache
    /// knows nothing of before writing; write only what differs (a fresh
    /// start or a takeover). LFT blocks of switches the cache knows nothing
    /// of are read in every mode.
    pub read_before_write: bool,
    /// SLtoVLMapping and VLArbitration Sets (engines using VLs, or QoS on).
    pub qos: Vec<QosSet>,
    /// PortInfo.VLHighLimit for every port, when QoS is on.
    pub vl_high_limit: Option<u8>,
    /// GUIDInfo blocks with alias GUIDs ([`super::guids::wanted_blocks`]);
    /// with `read_before_write`, those the cache knows nothing of are read
    /// first.
    pub guid_info: Vec<GuidInfoSet>,
    /// The P_Keys every port should hold ([`super::pkeys`]); `None`: every
    /// end port keeps what it holds, plus the default P_Key.
    pub partitions: Option<std::sync::Arc<PartitionSet>>,
    /// Where switches enforce partitions (OpenSM's `part_enforce`).
    pub part_enforce: PartEnforce,
    /// Ports of cables held down for flapping: never armed, and taken down
    /// (to retrain to INIT) when found ARMED or ACTIVE.
    pub held_ports: std::collections::HashSet<(NodeId, u8)>,
    /// What switches' forwarding tables held before this plan, where the
    /// SM knows it (it wrote them): their changed blocks are written in
    /// the order [`super::lft_order`] gives, after the ports are ACTIVE.
    pub held_lfts: HashMap<NodeId, std::sync::Arc<Vec<u8>>>,
}

/// One port's last PortInfo Set, see [`LftCache::ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMemo {
    /// PortInfo as the port answered our Set.
    pub held: PortInfoRepr,
    /// What we wanted it to hold.
    pub wanted: PortInfoRepr,
}

/// What the SM last wrote to each switch's forwarding table, by switch
/// GUID: one hash per 64-LID block.
#[derive(Debug, Clone, Default)]
pub struct LftCache {
    pub tables: HashMap<Guid, Vec<u64>>,
    /// PortInfo Sets, by node GUID and port: what the port held after our
    /// Set and what we wanted then. A device that keeps only some fields
    /// (ibsim drops SubnetTimeout and M_KeyLeasePeriod) is not sent the
    /// same Set again every sweep.
    pub ports: HashMap<(Guid, u8), PortMemo>,
    /// SLtoVLMapping and VLArbitration tables written.
    pub qos: super::qos::QosCache,
    /// GUIDInfo blocks written (or read before writing), by port GUID and
    /// block.
    pub guid_info: GuidMemos,
    /// P_Key blocks written or read, by node GUID, port and block: a later
    /// sweep reads only the blocks it does not know.
    pub pkeys: PKeyMemos,
}

impl LftCache {
    /// `switch` answered a Set of LFT block `block` with `ports` (tables
    /// sized for LIDs up to `top`).
    fn note_lft_block(&mut self, switch: Guid, top: Lid, block: u32, ports: &[u8; 64]) {
        let blocks = (top.0 as usize / 64 + 1).max(block as usize + 1);
        let entry = self.tables.entry(switch).or_default();
        if entry.len() < blocks {
            entry.resize(blocks, UNKNOWN_BLOCK);
        }
        entry[block as usize] = block_hash(ports);
    }

    /// Forgets what this SM wrote to the switches of `subnet` found cold
    /// ([`crate::subnet::SubnetNode::is_cold_switch`]): a switch that
    /// rebooted lost its forwarding, P_Key and VL tables, and is written
    /// again from what the SM wants, not from what it remembers writing.
    pub fn forget_cold_switches(&mut self, subnet: &Subnet) {
        for id in subnet.switches() {
            let node = subnet.node(id);
            if !node.is_cold_switch() {
                continue;
            }
            let guid = node.guid();
            if self.tables.remove(&guid).is_some() {
                tracing::info!(switch = %guid, name = %node.name(), path = %node.path, "switch found reset (LinearFDBTop 0): its tables are written again");
            }
            self.qos.forget(guid);
            self.pkeys.retain(|&(g, _, _), _| g != guid);
            self.ports.retain(|&(g, _), _| g != guid);
        }
    }
}

/// SMP futures alive at once; the transport's window bounds the wire, this
/// bounds memory. Far above any useful window.
pub const MAX_OUTSTANDING: usize = 512;

#[derive(Debug, Clone, Copy)]
enum Target {
    Port {
        node: NodeId,
        port: u8,
    },
    PKeys {
        node: NodeId,
        port: u8,
        block: u16,
    },
    SwitchInfo {
        node: NodeId,
    },
    Lft {
        node: NodeId,
        block: u32,
    },
    /// Index into `Plan::qos`.
    Qos {
        index: u32,
    },
    /// Index into `Plan::guid_info`.
    GuidInfo {
        index: u32,
    },
}

struct SetRequest {
    target: Target,
    path: DrPath,
    attr: AttributeId,
    amod: u32,
    data: [u8; 64],
    /// A PortInfo Set whose only change is MasterSMLID.
    sm_lid_only: bool,
    /// A PortInfo Set: the port before it, and what we want it to hold.
    port_before: Option<(PortInfoRepr, PortInfoRepr)>,
}

/// Programs everything in `plan`; the returned report counts what was sent.
pub async fn program<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    plan: &Plan,
    config: &SmConfig,
    cache: &mut LftCache,
) -> ProgramReport {
    let mut report = ProgramReport::default();

    // P_Keys: read what the SM does not know, plan every table; the blocks
    // that change go first in pass 1, the enforcement bits ride in the
    // PortInfo Sets.
    let pkeys = super::pkeys::prepare(
        driver,
        subnet,
        plan.partitions.as_deref(),
        plan.part_enforce,
        &mut report,
        &mut cache.pkeys,
    )
    .await;
    let pkey_sets: Vec<SetRequest> = pkeys.sets.iter().map(pkey_set).collect();

    let managed: Vec<NodeId> = subnet.ids().filter(|&id| subnet.node(id).quarantined.is_none()).collect();
    let switches: Vec<NodeId> = managed.iter().copied().filter(|&id| subnet.node(id).is_switch()).collect();
    let blocks = plan.top.0 as usize / 64 + 1;

    // Learn what switches hold before writing over it: those this SM has
    // not written (a restart, a start on another host, a takeover, a
    // switch programmed by someone else), unless they are cold.
    let planned: Vec<NodeId> = switches.iter().copied().filter(|id| plan.lfts.contains_key(id)).collect();
    read_lfts(driver, subnet, &planned, blocks, &mut report, cache).await;
    let mut qos_held = vec![false; plan.qos.len()];
    if plan.read_before_write {
        read_qos(driver, subnet, plan, &mut qos_held, &mut report, cache).await;
        read_guid_info(driver, subnet, plan, &mut report, cache).await;
    }

    // Pass 1: parameters + ARMED, SwitchInfo, LFTs; all independent. LFT
    // blocks go out block-major across switches so every switch is busy.
    let mut targets: Vec<Target> = switches.iter().map(|&node| Target::SwitchInfo { node }).collect();
    for &node in &managed {
        for port in 0..subnet.node(node).ports.len() as u8 {
            targets.push(Target::Port { node, port });
        }
    }
    // LFT blocks, block-major across switches so every switch is busy.
    // Those of switches whose old table the SM knows carry traffic now:
    // they go after activation, in the rounds lft_order gives (no
    // transient loop, no new black hole, no route onto a link not yet
    // ACTIVE). The others (a cold switch, one not written by this SM
    // before) have nothing to keep safe and go with pass 1.
    let changing: Vec<(NodeId, u32)> = (0..blocks * switches.len())
        .map(|i| (switches[i % switches.len()], (i / switches.len()) as u32))
        .filter(|&(node, block)| lft_set(subnet, node, block, plan, cache).is_some())
        .collect();
    let (ordered, unordered): (Vec<_>, Vec<_>) =
        changing.into_iter().partition(|(node, _)| plan.held_lfts.contains_key(node));
    let unordered_lfts: Vec<Target> = unordered.into_iter().map(|(node, block)| Target::Lft { node, block }).collect();
    let order = super::lft_order::order(subnet, &ordered, &plan.lfts, &plan.held_lfts);
    report.lft_rounds = order.depth;
    report.lft_staged = order.staged;
    if order.looping > 0 {
        tracing::warn!(entries = order.looping, "new forwarding entries whose next hops run in a circle");
    }
    let sl2vl_targets =
        (0..plan.qos.len() as u32).filter(|&i| !qos_held[i as usize]).map(|index| Target::Qos { index });
    let guid_targets = (0..plan.guid_info.len() as u32).map(|index| Target::GuidInfo { index });
    let first = Work::Prepared(pkey_sets.into_iter());
    let rest = targets.into_iter().chain(sl2vl_targets).chain(guid_targets).chain(unordered_lfts);
    let ctx = Ctx { plan, config, state: PortState::Armed, enforcement: &pkeys.enforcement };
    execute(driver, subnet, first, rest, &ctx, &mut report, cache).await;
    report.pkey_blocks = super::pkeys::held_blocks(&cache.pkeys, &pkeys.ports);

    // Pass 2: ACTIVE, once both ends of a link are armed. A port whose
    // peer did not arm (its Set was lost) would refuse the Set (ibsim
    // answers 0x001C); the next sweep arms the peer and activates both.
    let state =
        |node: NodeId, port: u8| subnet.node(node).ports.get(port as usize)?.info.as_ref().map(|i| i.port_state);
    let armed: Vec<Target> = managed
        .iter()
        .flat_map(|&node| {
            let n = subnet.node(node);
            (1..n.ports.len() as u8)
                .filter(move |&p| state(node, p) == Some(PortState::Armed))
                .filter(move |&p| match n.ports[p as usize].remote {
                    Some((peer, peer_port)) => {
                        !matches!(state(peer, peer_port), Some(s) if s != PortState::Armed && s != PortState::Active)
                    }
                    None => true,
                })
                .map(move |port| Target::Port { node, port })
        })
        .collect();
    let ctx = Ctx { plan, config, state: PortState::Active, enforcement: &pkeys.enforcement };
    execute(driver, subnet, Work::Prepared(Vec::new().into_iter()), armed.into_iter(), &ctx, &mut report, cache).await;

    // Pass 3: the ordered LFT writes, each sent once those it waits for
    // have landed.
    if !order.writes.is_empty() {
        let failed = {
            let mut pass = OrderedLftPass::new(subnet, plan, order, &mut report, cache);
            driver.drive(&mut pass).await;
            pass.failed
        };
        record_failures(subnet, plan, failed, &mut report);
    }
    report.alias_guids = super::guids::held_aliases(&cache.guid_info);
    report
}

/// Only the GUIDInfo blocks of `plan` (alias GUIDs changed between
/// sweeps), those the cache says differ, read first with
/// `read_before_write`; the rest of the plan is ignored.
pub async fn program_aliases<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    plan: &Plan,
    config: &SmConfig,
    cache: &mut LftCache,
) -> ProgramReport {
    let mut report = ProgramReport::default();
    if plan.read_before_write {
        read_guid_info(driver, subnet, plan, &mut report, cache).await;
    }
    let targets = (0..plan.guid_info.len() as u32).map(|index| Target::GuidInfo { index });
    let no_enforcement = HashMap::new();
    let ctx = Ctx { plan, config, state: PortState::Armed, enforcement: &no_enforcement };
    execute(driver, subnet, Work::Prepared(Vec::new().into_iter()), targets, &ctx, &mut report, cache).await;
    report.alias_guids = super::guids::held_aliases(&cache.guid_info);
    report
}

/// One LFT block read: the switch, its GUID, the block.
type LftBlockKey = (NodeId, Guid, u32);

/// Reads the blocks `plan` would write to switches the cache holds nothing
/// for, and records what they hold, so `lft_set` sends only blocks that
/// differ. A block that could not be read stays unknown and is written.
///
/// Only what may hold a route is read: nothing of a cold switch (its
/// LinearFDBTop is 0, so the SM writes every block anyway), and no block
/// above the LinearFDBTop a switch reports. A cold bring-up reads no
/// block; a restart or a takeover of a programmed fabric reads each block
/// once and writes only those that differ.
pub(super) async fn read_lfts<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    switches: &[NodeId],
    blocks: usize,
    report: &mut ProgramReport,
    cache: &mut LftCache,
) -> HashMap<NodeId, Vec<u8>> {
    let mut reads: Vec<(LftBlockKey, DrPath, AttributeId, u32)> = Vec::new();
    let mut unknown = 0usize;
    // What each switch read holds, block by block; a switch with a block
    // unread is dropped from it.
    let mut held: HashMap<NodeId, Vec<u8>> = HashMap::new();
    for &id in switches {
        let node = subnet.node(id);
        let guid = node.guid();
        if cache.tables.contains_key(&guid) {
            continue;
        }
        cache.tables.insert(guid, vec![UNKNOWN_BLOCK; blocks]);
        let held_top = node.switch_info.as_ref().map_or(0, |s| s.linear_fdb_top);
        if held_top == 0 {
            continue;
        }
        let held_blocks = (held_top as usize / 64 + 1).min(blocks);
        held.insert(id, vec![0xFF; held_blocks * 64]);
        unknown += 1;
        reads.extend(
            (0..held_blocks as u32)
                .map(|block| ((id, guid, block), node.path, AttributeId::LinearForwardingTable, block)),
        );
    }
    if unknown == 0 {
        return held;
    }
    // Block-major across switches, as the writes go: every switch busy.
    reads.sort_by_key(|&((id, _, block), ..)| (block, id));
    read_all(driver, reads.into_iter(), |(id, guid, block), path, result| {
        match result.map_err(|e| e.to_string()).and_then(|d| LftBlockRepr::parse_data(&d).map_err(|e| e.to_string())) {
            Ok(b) => {
                report.lft_reads += 1;
                if let Some(slot) = cache.tables.get_mut(&guid).and_then(|t| t.get_mut(block as usize)) {
                    *slot = block_hash(&b.ports);
                }
                if let Some(table) = held.get_mut(&id) {
                    let first = block as usize * 64;
                    table[first..first + 64].copy_from_slice(&b.ports);
                }
            }
            Err(e) => {
                report.failures += 1;
                held.remove(&id);
                // The block is written, as if it differed.
                let what =
                    Problem::ReadFailed { attr: AttributeId::LinearForwardingTable, amod: block, error: e.to_string() };
                subnet.problems.push(SweepProblem { path, guid: Some(subnet.node(id).guid()), what });
            }
        }
    })
    .await;
    held
}

/// Reads the table each QoS Set in `plan` would write; marks in `held` the
/// ones the port already holds (and remembers them as written). An
/// optimized all-ports SL-to-VL Set cannot be read back as one table: the
/// table from port 0 to the first cabled port stands for the switch.
async fn read_qos<D: SmpDriver>(
    driver: &D,
    subnet: &Subnet,
    plan: &Plan,
    held: &mut [bool],
    report: &mut ProgramReport,
    cache: &mut LftCache,
) {
    use crate::mad::sl_to_vl::{attribute_modifier, ATTR_MOD_ALL_INPUT_PORTS, ATTR_MOD_ALL_OUTPUT_PORTS};
    use crate::mad::{SlToVlTableRepr, VlArbTableRepr};
    let all = ATTR_MOD_ALL_INPUT_PORTS | ATTR_MOD_ALL_OUTPUT_PORTS;
    let reads = plan.qos.iter().enumerate().filter(|(_, set)| !is_cold(subnet, set.node)).filter_map(|(i, set)| {
        let amod = if set.attr == AttributeId::SlToVlMappingTable && set.amod & all != 0 {
            let node = subnet.node(set.node);
            let first = node.external_ports().find(|&p| node.ports[p as usize].remote.is_some())?;
            attribute_modifier(0, first)
        } else {
            set.amod
        };
        Some((i, set.path, set.attr, amod))
    });
    read_all(driver, reads, |i, _, result| {
        let Ok(have) = result else {
            report.failures += 1;
            return;
        };
        report.qos_reads += 1;
        let set = &plan.qos[i];
        let same = match set.attr {
            AttributeId::SlToVlMappingTable => {
                SlToVlTableRepr::parse_data(&have).ok() == SlToVlTableRepr::parse_data(&set.data).ok()
            }
            AttributeId::VlArbitrationTable => {
                VlArbTableRepr::parse_data(&have).ok() == VlArbTableRepr::parse_data(&set.data).ok()
            }
            _ => have == set.data,
        };
        if same {
            held[i] = true;
            cache.qos.remember(subnet.node(set.node).guid(), set);
        }
    })
    .await;
}

/// A node no SM has programmed since it was reset: a cold switch, or a CA
/// or router none of whose ports has a LID. Its tables are written, not
/// read.
fn is_cold(subnet: &Subnet, id: NodeId) -> bool {
    let node = subnet.node(id);
    if node.is_switch() {
        return node.is_cold_switch();
    }
    node.ports.iter().all(|p| p.info.as_ref().is_none_or(|i| i.lid.0 == 0))
}

/// Reads the GUIDInfo blocks `plan` would write that the cache knows
/// nothing of, and remembers what they hold as if the SM had asked for it,
/// so only blocks that differ are sent. A block that could not be read is
/// written.
async fn read_guid_info<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    plan: &Plan,
    report: &mut ProgramReport,
    cache: &mut LftCache,
) {
    let reads = plan
        .guid_info
        .iter()
        .filter(|s| !cache.guid_info.contains_key(&(s.port_guid, s.block)))
        .map(|s| (*s, s.path, AttributeId::GuidInfo, u32::from(s.block)))
        .collect::<Vec<_>>();
    read_all(driver, reads.into_iter(), |set, path, result| {
        match result
            .map_err(|e| e.to_string())
            .and_then(|d| GuidInfoBlockRepr::parse_data(&d).map_err(|e| e.to_string()))
        {
            Ok(held) => {
                report.guid_info_reads += 1;
                cache.guid_info.insert((set.port_guid, set.block), GuidMemo { held, wanted: held });
            }
            Err(e) => {
                report.failures += 1;
                let what = Problem::ReadFailed {
                    attr: AttributeId::GuidInfo,
                    amod: u32::from(set.block),
                    error: format!("port {}: {e}", set.port),
                };
                subnet.problems.push(SweepProblem { path, guid: Some(subnet.node(set.node).guid()), what });
            }
        }
    })
    .await;
}

/// What a pass needs to turn a target into its Set.
struct Ctx<'a> {
    plan: &'a Plan,
    config: &'a SmConfig,
    /// The logical state ports move to in this pass.
    state: PortState,
    /// Partition enforcement bits of switch ports ([`super::pkeys`]).
    enforcement: &'a HashMap<(NodeId, u8), Enforcement>,
}

/// The Set of one P_Key block.
fn pkey_set(s: &super::pkeys::PKeySet) -> SetRequest {
    SetRequest {
        target: Target::PKeys { node: s.node, port: s.port, block: s.block },
        path: s.path,
        attr: AttributeId::PKeyTable,
        amod: s.amod,
        data: s.want.to_data(),
        sm_lid_only: false,
        port_before: None,
    }
}

/// Requests built before the pass (P_Key blocks, which needed a read).
enum Work {
    Prepared(std::vec::IntoIter<SetRequest>),
}

/// The Set for `target`, or `None` when the fabric already holds it.
/// Built only when there is room on the wire, from the subnet as it is then.
fn make(subnet: &Subnet, target: Target, ctx: &Ctx, cache: &LftCache) -> Option<SetRequest> {
    match target {
        Target::Port { node, port } => {
            let memo = cache.ports.get(&(subnet.node(node).guid(), port));
            port_set(subnet, node, port, ctx, memo)
        }
        Target::SwitchInfo { node } => switch_info_set(subnet, node, ctx.plan, ctx.config),
        Target::Lft { node, block } => lft_set(subnet, node, block, ctx.plan, cache),
        Target::Qos { index } => {
            let set = ctx.plan.qos.get(index as usize)?;
            Some(SetRequest {
                target,
                path: set.path,
                attr: set.attr,
                amod: set.amod,
                data: set.data,
                sm_lid_only: false,
                port_before: None,
            })
        }
        Target::GuidInfo { index } => {
            let set = ctx.plan.guid_info.get(index as usize)?;
            if cache.guid_info.get(&(set.port_guid, set.block)).is_some_and(|m| m.wanted == set.want) {
                return None;
            }
            Some(SetRequest {
                target,
                path: set.path,
                attr: AttributeId::GuidInfo,
                amod: u32::from(set.block),
                data: set.want.to_data(),
                sm_lid_only: false,
                port_before: None,
            })
        }
        Target::PKeys { .. } => None,
    }
}

async fn execute<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    first: Work,
    targets: impl Iterator<Item = Target> + Send,
    ctx: &Ctx<'_>,
    report: &mut ProgramReport,
    cache: &mut LftCache,
) {
    let Work::Prepared(prepared) = first;
    let mut failed = run_pass(driver, subnet, prepared, targets, ctx, report, cache).await;
    // A lossy fabric loses all of a Set's attempts now and then (four tries
    // on a six-hop path at 10% loss a hop fail about one time in four):
    // sending those again now costs one timeout, a new sweep costs a whole
    // discovery. Refusals are not resent; they would be refused again.
    for _ in 0..RESEND_ROUNDS {
        let (again, refused): (Vec<_>, Vec<_>) = failed.into_iter().partition(|(_, e)| is_timeout(e));
        record_failures(subnet, ctx.plan, refused, report);
        if again.is_empty() {
            return;
        }
        report.resent += again.len();
        // P_Key and LFT blocks are resent as they were planned (an ordered
        // round's LFT block may hold intermediate contents); every other
        // target is built again from the subnet as it stands now.
        let (pkeys, others): (Vec<_>, Vec<_>) = again
            .into_iter()
            .map(|(req, _)| req)
            .partition(|req| matches!(req.target, Target::PKeys { .. } | Target::Lft { .. }));
        let targets: Vec<Target> = others.iter().map(|req| req.target).collect();
        failed = run_pass(driver, subnet, pkeys.into_iter(), targets.into_iter(), ctx, report, cache).await;
    }
    record_failures(subnet, ctx.plan, failed, report);
}

async fn run_pass<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    prepared: std::vec::IntoIter<SetRequest>,
    targets: impl Iterator<Item = Target> + Send,
    ctx: &Ctx<'_>,
    report: &mut ProgramReport,
    cache: &mut LftCache,
) -> Vec<(SetRequest, SmpError)> {
    let mut pass =
        SetPass { subnet, prepared, targets, ctx, report, cache, outstanding: 0, exhausted: false, failed: Vec::new() };
    driver.drive(&mut pass).await;
    debug!(report = ?pass.report, failed = pass.failed.len(), "programming batch done");
    pass.failed
}

/// The Sets that failed for good: counted, and each a problem of the sweep
/// naming the node, its path and the error.
fn record_failures(subnet: &mut Subnet, plan: &Plan, failed: Vec<(SetRequest, SmpError)>, report: &mut ProgramReport) {
    for (req, e) in failed {
        report.failures += 1;
        let (node, port) = match req.target {
            Target::Port { node, port } | Target::PKeys { node, port, .. } => (node, Some(port)),
            Target::SwitchInfo { node } | Target::Lft { node, .. } => (node, None),
            Target::Qos { index } => (plan.qos[index as usize].node, None),
            Target::GuidInfo { index } => {
                let set = &plan.guid_info[index as usize];
                (set.node, Some(set.port))
            }
        };
        let what = Problem::SetFailed { attr: req.attr, amod: req.amod, port, error: e.to_string() };
        subnet.problems.push(SweepProblem { path: req.path, guid: Some(subnet.node(node).guid()), what });
    }
}

/// One programming pass as an I/O-free core: the prepared Sets first, then
/// each target's Set, built only when the driver has room (a big fabric
/// has millions of Sets) from the subnet as it is then, and skipped when
/// the fabric already holds it.
struct SetPass<'a, 'c, I> {
    subnet: &'a mut Subnet,
    prepared: std::vec::IntoIter<SetRequest>,
    targets: I,
    ctx: &'a Ctx<'c>,
    report: &'a mut ProgramReport,
    cache: &'a mut LftCache,
    outstanding: usize,
    exhausted: bool,
    /// Sets that got no usable answer, with why.
    failed: Vec<(SetRequest, SmpError)>,
}

impl<I: Iterator<Item = Target>> SmpCore for SetPass<'_, '_, I> {
    type Token = SetRequest;

    fn poll_request(&mut self) -> Option<(SetRequest, SmpRequest)> {
        let next = self.prepared.next().or_else(|| {
            let (subnet, ctx, cache) = (&*self.subnet, self.ctx, &*self.cache);
            self.targets.by_ref().find_map(|t| make(subnet, t, ctx, cache))
        });
        let Some(req) = next else {
            self.exhausted = true;
            return None;
        };
        self.outstanding += 1;
        let smp = SmpRequest::set(req.path, req.attr, req.amod, req.data);
        Some((req, smp))
    }

    fn handle_answer(&mut self, req: SetRequest, result: Result<[u8; 64], SmpError>) {
        self.outstanding -= 1;
        let data = match result {
            Ok(d) => d,
            Err(e) => {
                // Whatever we believed the fabric holds there is unknown now:
                // a resend or the next sweep writes it again.
                match req.target {
                    Target::PKeys { node, port, block } => {
                        self.cache.pkeys.remove(&(self.subnet.node(node).guid(), port, block));
                    }
                    Target::Lft { node, .. } => {
                        self.cache.tables.remove(&self.subnet.node(node).guid());
                    }
                    Target::GuidInfo { index } => {
                        let set = &self.ctx.plan.guid_info[index as usize];
                        self.cache.guid_info.remove(&(set.port_guid, set.block));
                    }
                    Target::Port { .. } | Target::SwitchInfo { .. } | Target::Qos { .. } => {}
                }
                self.failed.push((req, e));
                return;
            }
        };
        match req.target {
            Target::Port { node, port } => {
                self.report.port_sets += 1;
                let requested = PortInfoRepr::parse_data(&req.data).map(|p| p.port_state).ok();
                let answered = PortInfoRepr::parse_data(&data).ok();
                // Judged by what the port answered: a field the device does
                // not keep was not changed by the Set.
                let sm_lid_only = match (req.port_before, answered) {
                    (Some((before, _)), Some(after)) => {
                        req.sm_lid_only
                            || (after.master_sm_lid != before.master_sm_lid
                                && PortInfoRepr { master_sm_lid: before.master_sm_lid, ..after } == before)
                    }
                    _ => req.sm_lid_only,
                };
                self.report.sm_lid_only_sets += sm_lid_only as usize;
                if let (Some((_, wanted)), Some(held)) = (req.port_before, answered) {
                    self.cache.ports.insert((self.subnet.node(node).guid(), port), PortMemo { held, wanted });
                }
                if let Some(now) = answered {
                    match (requested, now.port_state) {
                        (Some(PortState::Armed), PortState::Armed) => self.report.armed += 1,
                        (Some(PortState::Active), PortState::Active) => self.report.activated += 1,
                        _ => {}
                    }
                    // Keep the state the port reports, and what we wrote.
                    if let Some(slot) = self.subnet.node_mut(node).ports.get_mut(port as usize) {
                        slot.info = Some(now);
                    }
                }
            }
            Target::PKeys { node, port, block } => {
                self.report.pkey_sets += 1;
                let key = (self.subnet.node(node).guid(), port, block);
                super::pkeys::remember_set(&mut self.cache.pkeys, key, &req.data, &data);
            }
            Target::GuidInfo { index } => {
                self.report.guid_info_sets += 1;
                let set = &self.ctx.plan.guid_info[index as usize];
                // What the port answered is what it holds (a device may
                // keep fewer entries than asked); asking the same again
                // would not change that, so the memo keeps both.
                let held = GuidInfoBlockRepr::parse_data(&data).unwrap_or(set.want);
                self.cache.guid_info.insert((set.port_guid, set.block), GuidMemo { held, wanted: set.want });
            }
            Target::Qos { index } => {
                let set = &self.ctx.plan.qos[index as usize];
                match set.attr {
                    AttributeId::SlToVlMappingTable => self.report.sl2vl_sets += 1,
                    _ => self.report.vlarb_sets += 1,
                }
                self.cache.qos.remember(self.subnet.node(set.node).guid(), set);
            }
            Target::SwitchInfo { node } => {
                self.report.switch_info_sets += 1;
                if let Ok(si) = SwitchInfoRepr::parse_data(&data) {
                    self.subnet.node_mut(node).switch_info = Some(si);
                }
            }
            Target::Lft { node, block } => {
                self.report.lft_blocks += 1;
                let ports = LftBlockRepr::parse_data(&req.data).map(|b| b.ports).unwrap_or([0xFF; 64]);
                self.cache.note_lft_block(self.subnet.node(node).guid(), self.ctx.plan.top, block, &ports);
            }
        }
    }

    fn is_done(&self) -> bool {
        self.exhausted && self.outstanding == 0
    }
}

/// A block hash no real block has: "we do not know what is there".
const UNKNOWN_BLOCK: u64 = 0;

/// The ordered LFT writes as an I/O-free core ([`super::lft_order`]): a
/// write is sent once every write it waits for has been answered; one that
/// times out is sent again at once, up to [`RESEND_ROUNDS`] times. A write
/// that fails for good takes the writes waiting on it with it, unsent (the
/// next sweep writes those switches again: their cache entries go).
struct OrderedLftPass<'a> {
    subnet: &'a Subnet,
    plan: &'a Plan,
    writes: Vec<super::lft_order::LftWrite>,
    /// Writes each one still waits for, and who waits on it.
    waiting: Vec<usize>,
    dependents: Vec<Vec<usize>>,
    ready: std::collections::VecDeque<usize>,
    attempts: Vec<u8>,
    outstanding: usize,
    report: &'a mut ProgramReport,
    cache: &'a mut LftCache,
    failed: Vec<(SetRequest, SmpError)>,
}

impl<'a> OrderedLftPass<'a> {
    fn new(
        subnet: &'a Subnet,
        plan: &'a Plan,
        order: super::lft_order::LftOrder,
        report: &'a mut ProgramReport,
        cache: &'a mut LftCache,
    ) -> Self {
        let n = order.writes.len();
        let mut dependents = vec![Vec::new(); n];
        for (w, after) in order.after.iter().enumerate() {
            for &d in after {
                dependents[d].push(w);
            }
        }
        let waiting: Vec<usize> = order.after.iter().map(Vec::len).collect();
        let ready = (0..n).filter(|&w| waiting[w] == 0).collect();
        OrderedLftPass {
            subnet,
            plan,
            writes: order.writes,
            waiting,
            dependents,
            ready,
            attempts: vec![0; n],
            outstanding: 0,
            report,
            cache,
            failed: Vec::new(),
        }
    }

    fn request(&self, w: usize) -> SetRequest {
        let (node, block, ports) = self.writes[w];
        lft_request(self.subnet, node, block, ports)
    }

    /// `w` will not be written: neither will anything waiting on it.
    fn abandon(&mut self, w: usize) {
        let mut stack = vec![w];
        while let Some(w) = stack.pop() {
            let guid = self.subnet.node(self.writes[w].0).guid();
            self.cache.tables.remove(&guid);
            stack.extend(std::mem::take(&mut self.dependents[w]));
        }
    }
}

impl SmpCore for OrderedLftPass<'_> {
    type Token = usize;

    fn poll_request(&mut self) -> Option<(usize, SmpRequest)> {
        let w = self.ready.pop_front()?;
        self.outstanding += 1;
        let req = self.request(w);
        Some((w, SmpRequest::set(req.path, req.attr, req.amod, req.data)))
    }

    fn handle_answer(&mut self, w: usize, answer: Result<[u8; 64], SmpError>) {
        self.outstanding -= 1;
        match answer {
            Ok(_) => {
                let (node, block, ports) = self.writes[w];
                self.report.lft_blocks += 1;
                self.cache.note_lft_block(self.subnet.node(node).guid(), self.plan.top, block, &ports);
                for d in std::mem::take(&mut self.dependents[w]) {
                    self.waiting[d] -= 1;
                    if self.waiting[d] == 0 {
                        self.ready.push_back(d);
                    }
                }
            }
            Err(e) if is_timeout(&e) && (self.attempts[w] as usize) < RESEND_ROUNDS => {
                self.attempts[w] += 1;
                self.report.resent += 1;
                self.ready.push_front(w);
            }
            Err(e) => {
                self.failed.push((self.request(w), e));
                self.abandon(w);
            }
        }
    }

    fn is_done(&self) -> bool {
        self.ready.is_empty() && self.outstanding == 0
    }
}

/// A 64-bit hash of one LFT block (never `UNKNOWN_BLOCK`). The cache keeps
/// hashes, not tables: an eighth of the memory, and a collision would take
/// 2^-64 luck to hide a changed block.
fn block_hash(ports: &[u8; 64]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ports.hash(&mut h);
    h.finish().max(1)
}

fn switch_info_set(subnet: &Subnet, id: NodeId, plan: &Plan, config: &SmConfig) -> Option<SetRequest> {
    let node = subnet.node(id);
    let current = node.switch_info.as_ref()?;
    let mut want = *current;
    want.linear_fdb_top = plan.top.0;
    want.life_time_value = config.packet_life_time;
    // PortStateChange is cleared by writing a one (IBA 14.2.5.4).
    let clear_change = current.port_state_change;
    if want == *current && !clear_change {
        return None;
    }
    Some(SetRequest {
        target: Target::SwitchInfo { node: id },
        path: node.path,
        attr: AttributeId::SwitchInfo,
        amod: 0,
        data: want.to_data(),
        sm_lid_only: false,
        port_before: None,
    })
}

fn lft_set(subnet: &Subnet, id: NodeId, block: u32, plan: &Plan, cache: &LftCache) -> Option<SetRequest> {
    let node = subnet.node(id);
    let want = plan.lfts.get(&id)?;
    let start = block as usize * 64;
    let mut ports = [0xFFu8; 64];
    for (i, slot) in ports.iter_mut().enumerate() {
        if let Some(&p) = want.get(start + i) {
            *slot = p;
        }
    }
    let held = cache.tables.get(&node.guid()).and_then(|h| h.get(block as usize)).copied();
    if held == Some(block_hash(&ports)) {
        return None;
    }
    Some(lft_request(subnet, id, block, ports))
}

/// The Set that writes `ports` into LFT block `block` of switch `id`.
fn lft_request(subnet: &Subnet, id: NodeId, block: u32, ports: [u8; 64]) -> SetRequest {
    SetRequest {
        target: Target::Lft { node: id, block },
        path: subnet.node(id).path,
        attr: AttributeId::LinearForwardingTable,
        amod: block,
        data: LftBlockRepr { ports }.to_data(),
        sm_lid_only: false,
        port_before: None,
    }
}

/// The PortInfo Set for one port, or `None` when the port already holds what
/// the SM wants. `ctx.state` is the logical state to move to when the port
/// is one step below it.
fn port_set(subnet: &Subnet, id: NodeId, port: u8, ctx: &Ctx, memo: Option<&PortMemo>) -> Option<SetRequest> {
    let (plan, config, target) = (ctx.plan, ctx.config, ctx.state);
    let enforce = ctx.enforcement.get(&(id, port)).copied();
    let node = subnet.node(id);
    let current = node.ports.get(port as usize)?.info.as_ref()?;
    let is_switch = node.is_switch();
    let remote = node.ports[port as usize].remote;
    // `want` holds the managed fields at their wanted values and every
    // other field as read, so comparing it with `current` says whether the
    // port needs a Set at all.
    let mut want = *current;

    let end_port = !is_switch || port == 0;
    if end_port {
        let &(lid, lmc) = plan.lids.get(&(id, port))?;
        want.lid = lid;
        want.lmc = lmc;
        want.master_sm_lid = plan.sm_lid;
        want.master_sm_sl = config.sm_sl;
        want.gid_prefix = config.subnet_prefix;
        want.subnet_timeout = config.subnet_timeout;
        want.m_key = config.m_key;
        want.m_key_protect_bits = config.m_key_protection_level;
        want.m_key_lease_period = config.m_key_lease_period;
    }
    // A cable held down for flapping (unlinked in the plan) that is up (it
    // bounced back between two looks) is taken down: the link retrains to
    // INIT, and stays there unarmed while held. Nothing else is written.
    if port != 0 && plan.held_ports.contains(&(id, port)) {
        if !matches!(current.port_state, PortState::Armed | PortState::Active) {
            return None;
        }
        let mut set = current.for_set();
        set.port_state = PortState::Down;
        return Some(SetRequest {
            target: Target::Port { node: id, port },
            path: node.path_for_port(port),
            attr: AttributeId::PortInfo,
            amod: port as u32,
            data: set.to_data(),
            sm_lid_only: false,
            port_before: None,
        });
    }
    // Link parameters live on each physical port: what both ends support.
    if port != 0 {
        let (far_node, far_port) = remote?;
        if subnet.node(far_node).quarantined.is_some() {
            return None;
        }
        let far = subnet.node(far_node).ports.get(far_port as usize)?.info.as_ref()?;
        want.neighbor_mtu = current.mtu_cap.min(far.mtu_cap).max(1);
        if let Some(limit) = plan.vl_high_limit {
            want.vl_high_limit = limit;
        }
        want.operational_vls = current.vl_cap.min(far.vl_cap).min(config.max_op_vls).max(1);
    }
    // Switch external ports: partition enforcement as `super::pkeys` decided.
    if let Some(e) = enforce.filter(|_| is_switch && port != 0) {
        want.partition_enforcement_inbound = e.inbound;
        want.partition_enforcement_outbound = e.outbound;
    }

    // The port still holds what it answered our last Set with, and we want
    // the same again: whatever differs is a field the device does not keep.
    // (The state is the link passes' business, not a parameter.)
    // LocalPortNum is the port the SMP entered by: it changes with the
    // path (a cable on the old one went down), not with the port.
    let same = |a: &PortInfoRepr, b: &PortInfoRepr| PortInfoRepr { local_port_num: b.local_port_num, ..*a } == *b;
    let kept = memo.is_some_and(|m| {
        same(&m.held, current) && same(&PortInfoRepr { port_state: want.port_state, ..m.wanted }, &want)
    });
    let changed = want != *current && !kept;
    if let Some(m) = memo.filter(|_| changed) {
        tracing::debug!(node = %node.guid(), port, held = ?m.held, current = ?current, wanted = ?m.wanted, want = ?want, "port differs from what it answered our last Set with");
    }
    let step = match (current.port_state, target) {
        (PortState::Init, PortState::Armed) if port != 0 => Some(PortState::Armed),
        (PortState::Armed, PortState::Active) if port != 0 => Some(PortState::Active),
        _ => None,
    };
    let reregister = plan.client_reregister
        && !is_switch
        && (target == PortState::Armed || plan.reregister_active)
        && current.capability_mask & CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED != 0;
    if !changed && step.is_none() && !reregister {
        return None;
    }
    let sm_lid_only = step.is_none()
        && !reregister
        && want.master_sm_lid != current.master_sm_lid
        && PortInfoRepr { master_sm_lid: current.master_sm_lid, ..want } == *current;
    // A Set writes every field: start from the no-change codes so only what
    // the SM manages takes effect (IBA 14.2.5.6).
    let mut set = current.for_set();
    set.lid = want.lid;
    set.lmc = want.lmc;
    set.master_sm_lid = want.master_sm_lid;
    set.master_sm_sl = want.master_sm_sl;
    set.gid_prefix = want.gid_prefix;
    set.subnet_timeout = want.subnet_timeout;
    set.m_key = want.m_key;
    set.m_key_protect_bits = want.m_key_protect_bits;
    set.m_key_lease_period = want.m_key_lease_period;
    set.neighbor_mtu = want.neighbor_mtu;
    set.vl_high_limit = want.vl_high_limit;
    // 0 means "no change" in the spec, but ibsim stores it literally: say
    // the value every time.
    set.operational_vls = want.operational_vls;
    set.partition_enforcement_inbound = want.partition_enforcement_inbound;
    set.partition_enforcement_outbound = want.partition_enforcement_outbound;
    set.port_state = step.unwrap_or(PortState::NoChange);
    set.client_reregister = reregister;
    Some(SetRequest {
        target: Target::Port { node: id, port },
        path: node.path_for_port(port),
        attr: AttributeId::PortInfo,
        amod: port as u32,
        data: set.to_data(),
        sm_lid_only,
        port_before: Some((*current, want)),
    })
}
