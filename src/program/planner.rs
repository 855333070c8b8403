//! The heavy sweep's plan: from what discovery found and what the SM holds
//! (guid2lid, what it remembers writing, the configuration), what the
//! fabric should hold: LIDs, routes, QoS tables and the Sets of a
//! [`Plan`]. Desired state against held state, and nothing else: no
//! driver, no file, no clock. The manager (`super::manager`) gathers the
//! inputs, persists guid2lid and hands the plan to [`super::sets`].

use std::collections::HashMap;
use std::sync::Arc;

use tracing::warn;

use super::guids::GuidInfoSet;
use super::qos::{self, QosCache};
use super::routes::{self, RoutingView, SwitchTables};
use super::sets::Plan;
use super::SweepError;
use crate::config::{QosConfig, SmConfig};
use crate::lid::assign::{assign_lids, LidAssignment, LidPolicy, PortRole, SweptPort};
use crate::lid::{Guid2Lid, LidRange};
use crate::mad::PortState;
use crate::partition::{PartEnforce, PartitionSet};
use crate::subnet::{InactivePort, MasterMode, NodeId, QosSet, RoutingRun, Subnet};
use crate::types::{Guid, Lid};

/// The LIDs of one sweep: the assignment, and where each range landed.
pub(super) struct Addressed {
    pub lids: LidAssignment,
    /// Base LID and LMC by port, as the sweep's node IDs name ports.
    pub ranges: HashMap<(NodeId, u8), LidRange>,
    /// The SM's own base LID (0 when it got none).
    pub sm_lid: Lid,
}

/// LIDs for every LID-bearing port of `subnet` that is not quarantined:
/// kept from `guid2lid` and what ports hold where the policy allows.
pub(super) fn address(
    subnet: &Subnet,
    sm_port: (NodeId, u8),
    guid2lid: &Guid2Lid,
    config: &SmConfig,
    mode: MasterMode,
) -> Result<Addressed, SweepError> {
    let mut port_of_guid: HashMap<Guid, (NodeId, u8)> = HashMap::new();
    let mut swept = Vec::new();
    for (id, port) in subnet.lid_ports() {
        let node = subnet.node(id);
        let Some(info) = node.ports.get(port as usize).and_then(|p| p.info.as_ref()) else { continue };
        if node.quarantined.is_some() {
            continue;
        }
        let role = if node.is_switch() {
            PortRole::SwitchPort0 { enhanced: node.switch_info.as_ref().is_some_and(|s| s.enhanced_port0) }
        } else {
            PortRole::EndPort
        };
        let guid = node.port_guid(port);
        port_of_guid.insert(guid, (id, port));
        swept.push(SweptPort { guid, role, lid: info.lid, lmc: info.lmc });
    }
    let policy = LidPolicy::new(config.lmc)
        .map_err(|e| SweepError::Lid(e.to_string()))?
        .with_lmc_esp0(config.lmc_esp0)
        .with_reassign_all(mode == MasterMode::Fresh && config.reassign_lids);
    let (sm_node, sm_port) = sm_port;
    let sm_guid = subnet.node(sm_node).port_guid(sm_port);
    let lids = assign_lids(&swept, guid2lid, sm_guid, &policy);
    for d in &lids.decisions {
        tracing::debug!(%d, "LID decision");
    }
    if let Some(e) = &lids.error {
        warn!(error = %e, "LID space exhausted; some ports stay without a LID");
    }
    let mut ranges: HashMap<(NodeId, u8), LidRange> = HashMap::new();
    for (guid, range) in &lids.ranges {
        if let Some(&at) = port_of_guid.get(guid) {
            ranges.insert(at, *range);
        }
    }
    let sm_lid = ranges.get(&(sm_node, sm_port)).map(|r| r.base()).unwrap_or(Lid(0));
    Ok(Addressed { lids, ranges, sm_lid })
}

/// Takes the cables held down for flapping out of `subnet`: no route
/// crosses them and their ports are not brought up. Returns the ports
/// found (both ends of each cable the subnet holds), for the plan.
pub(super) fn hold_cables(
    subnet: &mut Subnet,
    held: &[crate::subnet::flaps::CableEnd],
) -> std::collections::HashSet<(NodeId, u8)> {
    let mut ports = std::collections::HashSet::new();
    for &(guid, port) in held {
        let Some(&id) = subnet.by_guid.get(&guid) else { continue };
        if subnet.node(id).ports.get(port as usize).is_none() {
            continue;
        }
        ports.insert((id, port));
        if let Some(far) = subnet.unlink((id, port)) {
            ports.insert(far);
        }
    }
    ports
}

/// What routing decided for one sweep.
pub(super) struct Routed {
    /// The fabric as the engines saw it (multicast routes over it too).
    pub view: RoutingView,
    pub tables: SwitchTables,
    /// The SL of every route when the engine uses VLs, indexed like
    /// `view.switch_nodes`.
    pub path_sl: Option<ibsm_routing::lft::PathSl>,
    pub notes: Vec<String>,
    pub routing: RoutingRun,
    /// The SL-to-VL and VL arbitration tables to write (those `held`
    /// already holds left out).
    pub qos_sets: Vec<QosSet>,
}

/// The routing engines' input: the fabric as they see it, and how many
/// data VLs its ports offer.
pub(super) fn routing_input(
    subnet: &Subnet,
    ranges: &HashMap<(NodeId, u8), LidRange>,
    config: &SmConfig,
) -> Result<(RoutingView, u8), SweepError> {
    Ok((routes::routing_view(subnet, ranges)?, qos::vl_budget(subnet, config)))
}

/// What the engines computed over `view` ([`routes::compute`], run apart
/// from this plan), with the QoS tables the routes need.
pub(super) fn routed(
    subnet: &Subnet,
    view: RoutingView,
    computed: routes::Computed,
    vls: u8,
    qos: &QosConfig,
    held: &QosCache,
) -> Routed {
    for n in &computed.notes {
        warn!(note = %n, "routing");
    }
    // Engines that put routes on VLs get SL n on VL n everywhere (or
    // their own table per port pair when they switch VL along paths);
    // with QoS on, the configured SL-to-VL and arbitration tables.
    let mut qos_sets = match (&computed.path_sl, qos.enabled) {
        (Some(sl), _) => {
            let plan = match &sl.hop_vls {
                // The engine switches VL along paths (dor on tori).
                Some(hop_vls) => qos::Sl2VlPlan::PerHop { hop_vls, switch_nodes: &view.switch_nodes },
                None => qos::Sl2VlPlan::Uniform(qos::identity_table(vls)),
            };
            qos::sl2vl_sets(subnet, plan, held)
        }
        (None, true) => qos::sl2vl_sets(subnet, qos::Sl2VlPlan::Uniform(qos::configured_sl2vl(qos)), held),
        (None, false) => Vec::new(),
    };
    if qos.enabled {
        qos_sets.extend(qos::vlarb_sets(subnet, qos, held));
    }
    Routed {
        view,
        tables: computed.tables,
        path_sl: computed.path_sl,
        notes: computed.notes,
        routing: computed.routing,
        qos_sets,
    }
}

/// What the programming pass is to make the fabric hold.
pub(super) struct Desired {
    pub tables: SwitchTables,
    pub qos_sets: Vec<QosSet>,
    pub guid_info: Vec<GuidInfoSet>,
    pub partitions: Option<Arc<PartitionSet>>,
    pub part_enforce: PartEnforce,
    /// Ports of cables held down for flapping.
    pub held_ports: std::collections::HashSet<(NodeId, u8)>,
    /// What the switches' tables held, where the SM knows it.
    pub held_lfts: HashMap<NodeId, Arc<Vec<u8>>>,
}

/// The Sets of one heavy sweep: LIDs, routes, QoS, alias GUIDs and
/// partitions, with what `mode` asks of a new master (ClientReregister on
/// a fresh start, reads before writes on a fresh start or a takeover: a
/// fabric this SM did not program may hold everything already).
pub(super) fn plan(addressed: &Addressed, desired: Desired, qos: &QosConfig, mode: MasterMode) -> Plan {
    let mut lfts = desired.tables;
    keep_entries_of_lids_gone(&mut lfts, &desired.held_lfts, &addressed.ranges);
    Plan {
        lids: addressed.ranges.iter().map(|(&k, r)| (k, (r.base(), r.lmc()))).collect(),
        sm_lid: addressed.sm_lid,
        top: addressed.lids.max_lid,
        lfts,
        client_reregister: matches!(mode, MasterMode::Fresh | MasterMode::TakeoverReregister),
        reregister_active: mode == MasterMode::TakeoverReregister,
        read_before_write: mode != MasterMode::Continuing,
        qos: desired.qos_sets,
        vl_high_limit: qos.enabled.then_some(qos.high_limit),
        guid_info: desired.guid_info,
        partitions: desired.partitions,
        part_enforce: desired.part_enforce,
        held_ports: desired.held_ports,
        held_lfts: desired.held_lfts,
    }
}

/// Leaves what the switches hold for a LID no port answers to any more
/// (its switch or host gone) instead of clearing it: the engines route such
/// a LID nowhere (0xFF), and clearing it would rewrite, on every switch,
/// each block the LIDs gone fall in, though no packet can reach them.
/// Keeping is safe: every switch's entry for the LID comes from the last
/// routes this SM wrote while the LID was there, which had no loop, so a
/// packet to it follows them towards where the LID was and is dropped at
/// the first cable down, or at a switch that holds no route for it (a
/// switch the SM knows no table of gets 0xFF as before, and so does an
/// entry that delivered to the switch itself). A LID in use is
/// never touched, and when its port comes back (guid2lid gives it the
/// same LID) the entries are mostly right already.
fn keep_entries_of_lids_gone(
    tables: &mut SwitchTables,
    held: &HashMap<NodeId, Arc<Vec<u8>>>,
    ranges: &HashMap<(NodeId, u8), LidRange>,
) {
    let top = tables.values().map(Vec::len).max().unwrap_or(0);
    let mut in_use = vec![false; top];
    for range in ranges.values() {
        let (min, max) = (usize::from(range.min().0), usize::from(range.max().0));
        in_use.iter_mut().take(max + 1).skip(min).for_each(|slot| *slot = true);
    }
    for (node, table) in tables.iter_mut() {
        let Some(old) = held.get(node) else { continue };
        for (lid, (entry, &was)) in table.iter_mut().zip(old.iter()).enumerate().skip(1) {
            // Port 0 is the switch itself: a LID gone is not.
            if *entry == NO_ROUTE && !in_use[lid] && was != 0 {
                *entry = was;
            }
        }
    }
}

/// An LFT entry that forwards nowhere.
const NO_ROUTE: u8 = 0xFF;

/// Cabled ports between managed nodes that are not ACTIVE.
pub(super) fn inactive_ports(subnet: &Subnet) -> Vec<InactivePort> {
    subnet
        .cabled_ports()
        .filter(|(_, _, _, (far, _))| subnet.node(*far).quarantined.is_none())
        .filter_map(|(id, port, slot, _)| {
            let state = slot.info.as_ref().map(|i| i.port_state);
            let node = subnet.node(id);
            (state != Some(PortState::Active)).then(|| InactivePort {
                guid: node.guid(),
                name: node.name(),
                port,
                path: node.path_for_port(port),
                state,
            })
        })
        .collect()
}
