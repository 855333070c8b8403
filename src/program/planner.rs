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
use ibsm_routing::UNROUTED;

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
    /// What a start or a takeover read the switches to hold (empty for a
    /// master that goes on): where `held_lfts` knows no table, the source
    /// of the entries kept for LIDs gone, so that a restart keeps them as
    /// the SM before it did.
    pub read_lfts: HashMap<NodeId, Arc<Vec<u8>>>,
}

/// The Sets of one heavy sweep: LIDs, routes, QoS, alias GUIDs and
/// partitions, with what `mode` asks of a new master (ClientReregister on
/// a fresh start, reads before writes on a fresh start or a takeover: a
/// fabric this SM did not program may hold everything already).
pub(super) fn plan(
    subnet: &Subnet,
    addressed: &Addressed,
    desired: Desired,
    qos: &QosConfig,
    mode: MasterMode,
) -> Plan {
    let mut lfts = desired.tables;
    let mut held = desired.read_lfts;
    held.extend(desired.held_lfts.iter().map(|(&id, table)| (id, table.clone())));
    let kept_top = keep_entries_of_lids_gone(subnet, &mut lfts, &held, &addressed.ranges);
    Plan {
        lids: addressed.ranges.iter().map(|(&k, r)| (k, (r.base(), r.lmc()))).collect(),
        sm_lid: addressed.sm_lid,
        top: addressed.lids.max_lid.max(kept_top),
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
/// The entries come from the last routes this SM wrote while the LID was
/// there, which had no loop, so a packet to it follows them towards where
/// the LID was and is dropped at the first cable down, or at a switch that
/// holds no route for it (a switch the SM knows no table of gets 0xFF as
/// before, and so does an entry that delivered to the switch itself). A
/// cable moved since could close those entries into a circle over today's
/// cables: each LID kept is traced from every switch, and one that circles
/// anywhere is cleared everywhere after all. A LID in use is never touched,
/// and when its port comes back (guid2lid gives it the same LID) the
/// entries are mostly right already.
///
/// Only entries up to a switch's LinearFDBTop count as held: a block
/// read whole, or a table kept as read, carries entries past it that no
/// route ever wrote.
///
/// The LIDs gone may be the highest (the last switch's, say): the tables
/// then keep their length, and the returned LID, the highest LID gone any
/// table still routes (0 if none), keeps LinearFDBTop where it was.
/// Lowering it would cost a SwitchInfo Set and a block on every switch,
/// and again when the LIDs come back.
fn keep_entries_of_lids_gone(
    subnet: &Subnet,
    tables: &mut SwitchTables,
    held: &HashMap<NodeId, Arc<Vec<u8>>>,
    ranges: &HashMap<(NodeId, u8), LidRange>,
) -> Lid {
    // A switch whose SwitchInfo the SM has not read is taken whole.
    let bound = |node: &NodeId, table: &[u8]| {
        let top = subnet.node(*node).switch_info.as_ref().map_or(usize::MAX, |s| usize::from(s.linear_fdb_top));
        table.len().min(top.saturating_add(1))
    };
    let held_len = held.iter().map(|(node, table)| bound(node, table)).max().unwrap_or(0);
    let routed = tables.values().map(Vec::len).max().unwrap_or(0);
    let top = held_len.max(routed);
    for table in tables.values_mut() {
        table.resize(top, UNROUTED);
    }
    let mut in_use = vec![false; top];
    for range in ranges.values() {
        let (min, max) = (usize::from(range.min().0), usize::from(range.max().0));
        in_use.iter_mut().take(max + 1).skip(min).for_each(|slot| *slot = true);
    }
    // Only the LIDs no port holds are looked at: a reaction at 11,664
    // hosts should not walk every entry of every table.
    let free: Vec<usize> = (1..top).filter(|&lid| !in_use[lid]).collect();
    let mut kept = std::collections::BTreeSet::new();
    for (node, table) in tables.iter_mut() {
        let Some(old) = held.get(node) else { continue };
        let old = &old[..bound(node, old)];
        for &lid in &free {
            let (Some(entry), Some(&was)) = (table.get_mut(lid), old.get(lid)) else { continue };
            // Port 0 is the switch itself: a LID gone is not.
            if *entry == UNROUTED && was != 0 && was != UNROUTED {
                *entry = was;
                kept.insert(lid);
            }
        }
    }
    for lid in kept {
        if forwards_in_a_circle(subnet, tables, lid) {
            warn!(lid, "the entries the switches hold for a LID gone would circle over today's cables: cleared");
            for table in tables.values_mut() {
                if let Some(entry) = table.get_mut(lid) {
                    *entry = UNROUTED;
                }
            }
        }
    }
    // The highest LID gone that some switch still routes, within what the
    // switches held (a table kept as read carries entries past its top).
    let highest = free
        .iter()
        .rev()
        .filter(|&&lid| lid < held_len)
        .find(|&&lid| tables.values().any(|t| t.get(lid).is_some_and(|&e| e != UNROUTED)))
        .map_or(0, |&lid| lid);
    for table in tables.values_mut() {
        table.truncate(routed.max(highest + 1));
    }
    Lid(highest as u16)
}

/// Whether following `tables` towards `lid` over the cables of `subnet`
/// comes back to a switch from any switch: a walk longer than there are
/// switches has.
fn forwards_in_a_circle(subnet: &Subnet, tables: &SwitchTables, lid: usize) -> bool {
    let most = tables.len();
    tables.keys().any(|&start| {
        let mut at = start;
        for _ in 0..=most {
            let Some(&port) = tables.get(&at).and_then(|t| t.get(lid)) else { return false };
            if port == 0 || port == UNROUTED {
                return false;
            }
            match subnet.node(at).ports.get(usize::from(port)).and_then(|p| p.remote) {
                Some((next, _)) if subnet.node(next).is_switch() => at = next,
                _ => return false,
            }
        }
        true
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::NodeType;
    use crate::program::test_nodes::add;

    /// Three switches in a ring (port 2 to the next, port 3 from the last),
    /// a host on port 1 of each; LIDs 1-3 the switches', 11-13 the hosts'.
    fn ring() -> (Subnet, Vec<NodeId>, HashMap<(NodeId, u8), LidRange>) {
        let mut subnet = Subnet::default();
        let switches: Vec<NodeId> =
            (0..3).map(|i| add(&mut subnet, 0x100 + i, NodeType::Switch, 4, 1 + i as u16)).collect();
        let mut ranges = HashMap::new();
        for (i, &s) in switches.iter().enumerate() {
            subnet.link((s, 2), (switches[(i + 1) % 3], 3));
            ranges.insert((s, 0), LidRange::single(Lid(1 + i as u16)).unwrap());
            if i != 2 {
                // The third switch's host, LID 13, is gone.
                let host = add(&mut subnet, 0x200 + i as u64, NodeType::Ca, 1, 11 + i as u16);
                subnet.link((s, 1), (host, 1));
                ranges.insert((host, 1), LidRange::single(Lid(11 + i as u16)).unwrap());
            }
        }
        (subnet, switches, ranges)
    }

    /// The engines' tables for the ring with LID 13 gone (0xFF everywhere)
    /// and LID 12 unreachable from the third switch; `held[i][13]` what
    /// switch i held for LID 13.
    fn tables(switches: &[NodeId], held13: [u8; 3]) -> (SwitchTables, HashMap<NodeId, Arc<Vec<u8>>>) {
        let mut wanted = HashMap::new();
        let mut held = HashMap::new();
        for (i, &s) in switches.iter().enumerate() {
            let mut t = vec![UNROUTED; 16];
            t[1 + i] = 0;
            t[12] = if i == 2 { UNROUTED } else { 2 };
            let mut h = t.clone();
            h[12] = 2;
            h[13] = held13[i];
            wanted.insert(s, t);
            held.insert(s, Arc::new(h));
        }
        (wanted, held)
    }

    #[test]
    fn entries_for_a_lid_gone_stay_unless_they_circle_over_todays_cables() {
        let (subnet, switches, ranges) = ring();
        // The last routes: 0 -> 1 -> 2 -> its host on port 1.
        let (mut wanted, held) = tables(&switches, [2, 2, 1]);
        keep_entries_of_lids_gone(&subnet, &mut wanted, &held, &ranges);
        for (i, s) in switches.iter().enumerate() {
            assert_eq!(wanted[s][13], [2, 2, 1][i], "switch {i} keeps what it holds for LID 13");
            // LID 12 is in use: unreachable stays unrouted.
            assert_eq!(wanted[s][12], if i == 2 { UNROUTED } else { 2 });
        }
        // The third switch's entry pointed at a cable that now runs back
        // to the first: the entries would circle, and all are cleared.
        let (mut wanted, held) = tables(&switches, [2, 2, 2]);
        keep_entries_of_lids_gone(&subnet, &mut wanted, &held, &ranges);
        assert!(switches.iter().all(|s| wanted[s][13] == UNROUTED), "a circle is cleared everywhere");
        // An entry that delivered to the switch itself is not kept.
        let (mut wanted, held) = tables(&switches, [2, 0, UNROUTED]);
        keep_entries_of_lids_gone(&subnet, &mut wanted, &held, &ranges);
        assert_eq!([0, 1, 2].map(|i| wanted[&switches[i]][13]), [2, UNROUTED, UNROUTED]);
    }

    /// LID 13, the highest, is gone: the engines' tables end at 12, but
    /// the entries kept for 13 keep the top (LinearFDBTop) at 13; when
    /// they would circle and are cleared, or the switches' own top is 12,
    /// the top is the engines' again.
    #[test]
    fn the_top_stays_where_the_highest_lid_went_while_its_entries_stay() {
        let (subnet, switches, ranges) = ring();
        let ends_at_12 = |wanted: &mut SwitchTables| wanted.values_mut().for_each(|t| t.truncate(13));
        let (mut wanted, held) = tables(&switches, [2, 2, 1]);
        ends_at_12(&mut wanted);
        assert_eq!(keep_entries_of_lids_gone(&subnet, &mut wanted, &held, &ranges), Lid(13));
        for (i, s) in switches.iter().enumerate() {
            assert_eq!((wanted[s].len(), wanted[s][13]), (14, [2, 2, 1][i]), "switch {i}");
        }
        let (mut wanted, held) = tables(&switches, [2, 2, 2]);
        ends_at_12(&mut wanted);
        assert_eq!(keep_entries_of_lids_gone(&subnet, &mut wanted, &held, &ranges), Lid(0), "no LID gone is kept");
        assert!(wanted.values().all(|t| t.len() == 13), "no entry kept past the top");
        // Switches whose LinearFDBTop is 12 never held LID 13: what their
        // tables carry past it (a block read whole) is no route.
        let mut subnet = subnet;
        for &s in &switches {
            let top = crate::mad::SwitchInfoRepr { linear_fdb_top: 12, ..Default::default() };
            subnet.node_mut(s).switch_info = Some(top);
        }
        let (mut wanted, held) = tables(&switches, [2, 2, 1]);
        ends_at_12(&mut wanted);
        assert_eq!(keep_entries_of_lids_gone(&subnet, &mut wanted, &held, &ranges), Lid(0), "held past the top");
        assert!(wanted.values().all(|t| t.len() == 13), "no entry kept past the top");
    }
}
