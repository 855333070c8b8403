//! From a sweep to the routing crate and back: builds the routing view of
//! the discovered subnet, runs the configured engine chain (by default
//! `auto`, the engine picked by topology) and maps the tables onto the
//! sweep's node IDs.

use std::collections::HashMap;
use std::sync::Arc;

use ibsm_routing::auto::{check_chain, route_chain_auto, AutoChoice, ChainEntry, PassReason};
use ibsm_routing::engine::EngineOptions;
use ibsm_routing::fabric::{EndPort, EndPortId, FabricError, PortEnd, RoutingFabric, Switch, SwitchId};
use tracing::info;

use crate::lid::LidRange;
use crate::subnet::RoutingRun;
use crate::subnet::{NodeId, Subnet};

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("routing view of the subnet is inconsistent: {0}")]
    Fabric(#[from] FabricError),
    #[error("unknown routing engine `{0}` (known: auto, minhop, updn, dnup, ftree, sssp, dfsssp, dor, nue)")]
    UnknownEngine(String),
    #[error("routing engine chain: {0}")]
    Chain(String),
}

/// The routing input built from a sweep, with the ID maps back to it.
pub struct RoutingView {
    pub fabric: RoutingFabric,
    pub switch_nodes: Vec<NodeId>,
    pub end_ports: Vec<(NodeId, u8)>,
}

/// Builds the routing view: switches and end ports that have LIDs (or not,
/// then they only forward / only source), and every cable between nodes the
/// SM manages. Quarantined nodes are left out entirely.
///
/// Nodes enter the view by node GUID and cables by their ends' (GUID,
/// port), never in the order discovery met them: discovery order depends
/// on where the SM sits and on which answers came first, and engines break
/// ties by the order they are given. So the same fabric, LIDs and
/// configuration route the same wherever the SM runs, and a restart or a
/// takeover finds every table already right.
pub fn routing_view(subnet: &Subnet, lids: &HashMap<(NodeId, u8), LidRange>) -> Result<RoutingView, RouteError> {
    let mut b = RoutingFabric::builder();
    let mut switch_of: HashMap<NodeId, SwitchId> = HashMap::new();
    let mut end_of: HashMap<(NodeId, u8), EndPortId> = HashMap::new();
    let mut switch_nodes = Vec::new();
    let mut end_ports = Vec::new();
    let mut by_guid: Vec<NodeId> = subnet.ids().filter(|&id| subnet.node(id).quarantined.is_none()).collect();
    by_guid.sort_by_key(|&id| subnet.node(id).guid());
    for &id in &by_guid {
        let node = subnet.node(id);
        if node.is_switch() {
            let (base, lmc) = lids.get(&(id, 0)).map(|r| (r.base().0, r.lmc())).unwrap_or((0, 0));
            let enhanced = node.switch_info.as_ref().is_some_and(|s| s.enhanced_port0);
            let mut sw = Switch::new(node.guid().0, node.info.num_ports, base).with_name(node.name());
            if enhanced {
                sw = sw.with_enhanced_port0(lmc);
            }
            switch_of.insert(id, b.add_switch(sw)?);
            switch_nodes.push(id);
        } else {
            for port in node.external_ports() {
                if node.ports[port as usize].info.is_none() {
                    continue;
                }
                let (base, lmc) = lids.get(&(id, port)).map(|r| (r.base().0, r.lmc())).unwrap_or((0, 0));
                let ep = EndPort::new(node.guid().0, node.port_guid(port).0, port, base)
                    .with_lmc(lmc)
                    .with_name(node.name());
                end_of.insert((id, port), b.add_end_port(ep)?);
                end_ports.push((id, port));
            }
        }
    }
    let end = |id: NodeId, port: u8| -> Option<PortEnd> {
        match switch_of.get(&id) {
            Some(&s) => Some(PortEnd::Switch(s, port)),
            None => end_of.get(&(id, port)).map(|&e| PortEnd::End(e)),
        }
    };
    let key = |id: NodeId, port: u8| (subnet.node(id).guid(), port);
    for &id in &by_guid {
        for (port, slot) in subnet.node(id).ports.iter().enumerate() {
            let Some((far, far_port)) = slot.remote else { continue };
            // Each cable once: from its lower (GUID, port) end.
            if key(far, far_port) < key(id, port as u8) || port == 0 {
                continue;
            }
            if let (Some(a), Some(z)) = (end(id, port as u8), end(far, far_port)) {
                b.connect(a, z)?;
            }
        }
    }
    Ok(RoutingView { fabric: b.build()?, switch_nodes, end_ports })
}

/// Each switch's forwarding table (port per LID), by sweep node ID.
pub type SwitchTables = HashMap<NodeId, Vec<u8>>;

/// Runs the engine chain (e.g. `ftree,updn,minhop`, or `auto`, the
/// default): the first engine that applies routes the fabric. Returns each
/// switch's table and notes worth a warning (engines of the chain passed
/// over, candidates auto refused for a credit loop or broken tables,
/// disconnected parts).
///
/// When `auto` chose, the engine and why are logged here at info, one line
/// per routing run with the candidates it passed over, and kept in
/// [`RoutingRun::auto`]: that a torus is no fat tree is no warning.
pub fn compute(
    view: &RoutingView,
    chain: &[String],
    max_vls: u8,
    effort: ibsm_routing::Effort,
) -> Result<Computed, RouteError> {
    let entries = parse_chain(chain)?;
    let mut notes = Vec::new();
    let options = EngineOptions { max_vls, effort, ..EngineOptions::default() };
    let started = std::time::Instant::now();
    let (routes, engine, auto) = match route_chain_auto(&entries, &view.fabric, &options) {
        Ok(outcome) => {
            for (kind, why) in &outcome.skipped {
                notes.push(format!("{kind} passed over: {why}"));
            }
            if let Some(choice) = &outcome.auto {
                log_choice(choice);
                // An engine that claims deadlock freedom and fails the
                // check is a bug worth a warning; the others only did
                // not apply.
                for p in &choice.passed_over {
                    if matches!(p.why, PassReason::CreditLoop { .. } | PassReason::Broken { .. }) {
                        notes.push(format!("auto: {p}"));
                    }
                }
                if !choice.deadlock_free {
                    notes.push(format!("auto: {}; its tables are programmed with a credit loop", choice.reason));
                }
            }
            if let Some(parts) = &outcome.parts {
                notes.push(parts.to_string());
            }
            (outcome.routes, Some(outcome.engine), outcome.auto)
        }
        Err(e) => {
            notes.push(e.to_string());
            let routing = RoutingRun { elapsed: started.elapsed(), ..RoutingRun::default() };
            return Ok(Computed { tables: HashMap::new(), path_sl: None, notes, routing });
        }
    };
    // A quick effort the chosen engine ignores (ftree, dor) gave the
    // tables a full one would: nothing to rebalance.
    let quick = effort == ibsm_routing::Effort::Quick && engine.is_some_and(|e| e.searches_for_balance());
    let routing = RoutingRun { engine, auto, elapsed: started.elapsed(), quick, ..RoutingRun::default() };
    // The engine's tables move into the plan: at 50,000 LIDs and 4,000
    // switches each copy is 200 MB.
    // One layer (nue on one VL) is no layering: every path on SL 0 is
    // what an engine without SLs gives, and so it is treated (no SL-to-VL
    // tables read or written for it, and reactions may repair it).
    let path_sl = routes.sl.filter(|sl| !sl.all_on_sl0());
    let tables = view.switch_nodes.iter().copied().zip(routes.lfts.into_iter().map(|l| l.ports)).collect();
    Ok(Computed { tables, path_sl, notes, routing })
}

/// The routes the switches hold (`held`, read from every switch of the
/// view), when they can stay: every LID delivered from everywhere the
/// cables reach, no loop, and no credit loop on one VL (a foreign SM's
/// SL layering is not known, so its tables must be safe without it).
/// Keeping them on a start or a takeover spares the fabric a re-route:
/// the first change after it routes with the configured engines.
pub fn keep_held(view: &RoutingView, held: &HashMap<NodeId, Vec<u8>>) -> Option<Computed> {
    use ibsm_routing::cdg::{analyze_cdg, CdgScope};
    use ibsm_routing::lft::{Lft, Routes};
    if held.is_empty() {
        return None;
    }
    let started = std::time::Instant::now();
    let mut lfts = Vec::with_capacity(view.switch_nodes.len());
    for id in &view.switch_nodes {
        lfts.push(Lft { ports: held.get(id)?.clone() });
    }
    let routes = Routes { lfts, sl: None };
    let validity = ibsm_routing::analysis::validate(&view.fabric, &routes);
    if !validity.is_valid() {
        info!(
            loops = validity.loops,
            black_holes = validity.black_holes,
            wrong_destination = validity.wrong_destination,
            "the routes the switches hold are incomplete or wrong: routing afresh"
        );
        return None;
    }
    if let Some(cycle) = analyze_cdg(&view.fabric, &routes, CdgScope::default()).first_cycle() {
        info!(vl = cycle.vl, "the routes the switches hold have a credit loop on one VL: routing afresh");
        return None;
    }
    info!("the routes the switches hold are complete and credit-loop free: kept");
    let tables = view.switch_nodes.iter().copied().zip(routes.lfts.into_iter().map(|l| l.ports)).collect();
    let routing = RoutingRun { elapsed: started.elapsed(), kept: true, ..RoutingRun::default() };
    Some(Computed { tables, path_sl: None, notes: Vec::new(), routing })
}

/// After a loss (cables or switches gone, nothing new), or with routes
/// kept at a takeover: each switch keeps its `old` entry for every LID
/// whose old path from it is still whole ([`ibsm_routing::keep`]), so only
/// the routes that crossed the loss move, not whatever else a fresh run
/// reshuffles (one leaf uplink of 11,664 hosts: 4,700 LFT blocks fresh);
/// LIDs `old` does not route take the engine's entries. Not for engines
/// that layer routes onto VLs (their SLs are per path), and the engine's
/// own tables stand when the merge would break its promise of no credit
/// loop, or when `always_check` (old routes of another engine) and the
/// merge has a credit loop on one VL. `broken`: [`lids_to_repair`] of
/// the same `view` and `old`, if the caller found it.
pub fn keep_intact(
    view: &RoutingView,
    mut computed: Computed,
    old: &HashMap<NodeId, Arc<Vec<u8>>>,
    broken: Option<&[bool]>,
    always_check: bool,
) -> Computed {
    use ibsm_routing::cdg::{analyze_cdg, CdgScope};
    use ibsm_routing::lft::{Lft, Routes};
    let Some(engine) = computed.routing.engine else { return computed };
    if old.is_empty() || computed.path_sl.is_some() || computed.routing.kept {
        return computed;
    }
    let started = std::time::Instant::now();
    let take = |id: &NodeId| Lft { ports: computed.tables.get(id).cloned().unwrap_or_default() };
    let fresh = || Routes { lfts: view.switch_nodes.iter().map(take).collect(), sl: None };
    let mut routes = fresh();
    let before = old_by_switch(view, old);
    // The caller's [`lids_to_repair`] when it found them (every switch
    // with an old table), else found here.
    let found;
    let broken = match broken {
        Some(b) => b,
        None => {
            found = ibsm_routing::keep::lids_to_repair(&view.fabric, &before);
            &found
        }
    };
    let mut kept = ibsm_routing::keep::keep_intact_with(&view.fabric, &before, broken, &mut routes);
    if kept.kept == 0 {
        return computed;
    }
    let promised = computed.routing.auto.as_ref().map_or(engine.claims_deadlock_freedom(), |a| a.deadlock_free);
    if promised || always_check {
        if let Some(cycle) = analyze_cdg(&view.fabric, &routes, CdgScope::default()).first_cycle() {
            // Old routes turn onto new ones where no run would: keep what
            // fits, LID by LID.
            let merged = std::mem::replace(&mut routes, fresh());
            match ibsm_routing::keep::keep_intact_acyclic(&view.fabric, &before, &merged, &mut routes) {
                Some(by_lid) if by_lid.kept > 0 => {
                    info!(
                        vl = cycle.vl,
                        "old routes kept beside new ones whole would make a credit loop: kept LID by LID"
                    );
                    kept = ibsm_routing::keep::Kept { broken_lids: kept.broken_lids, ..by_lid };
                }
                _ => {
                    info!(
                        vl = cycle.vl,
                        "old routes kept beside new ones would make a credit loop: the engine's tables stand"
                    );
                    return computed;
                }
            }
        }
    }
    info!(
        kept = kept.kept,
        moved = kept.moved,
        broken_lids = kept.broken_lids,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "routes whose paths the loss left whole are kept"
    );
    computed.tables = view.switch_nodes.iter().copied().zip(routes.lfts.into_iter().map(|l| l.ports)).collect();
    computed.routing.intact_kept = kept.kept;
    computed.routing.elapsed += started.elapsed();
    computed
}

/// After a change no route crossed (a host's cable, a cable no table sent
/// anything over, a link retrained, a switch reset), when `old` routed
/// every switch of the view: its tables stand, the LIDs no one owns now
/// unrouted, and no engine runs (`broken`, from [`lids_to_repair`], holds
/// nothing to repair). Every path left is one the old tables had,
/// so they stay free of loops and of credit loops. `None` when some LID
/// needs routing. `last` is the routing run the tables came from.
pub fn keep_untouched(
    view: &RoutingView,
    old: &HashMap<NodeId, Arc<Vec<u8>>>,
    broken: &[bool],
    last: &RoutingRun,
) -> Option<Computed> {
    let started = std::time::Instant::now();
    let before = old_by_switch(view, old);
    if broken.contains(&true) {
        return None;
    }
    let f = &view.fabric;
    // Who owns each LID, once, not once per switch.
    let owned: Vec<bool> = (0..=f.max_lid()).map(|lid| f.lid_owner(lid).is_some()).collect();
    let tables = view
        .switch_nodes
        .iter()
        .zip(&before)
        .map(|(&id, table)| {
            let table = table.expect("broken comes from lids_to_repair, which needs every switch's table");
            let row = owned.iter().enumerate().map(|(lid, &o)| if o { table[lid] } else { ibsm_routing::UNROUTED });
            (id, row.collect())
        })
        .collect();
    let routing = RoutingRun {
        engine: last.engine,
        auto: last.auto.clone(),
        elapsed: started.elapsed(),
        untouched: true,
        ..RoutingRun::default()
    };
    Some(Computed { tables, path_sl: None, notes: Vec::new(), routing })
}

/// After a loss that broke some routes, when the fat-tree engine routed
/// the tables in `old`: ftree routes only the LIDs whose paths crossed the
/// loss ([`ibsm_routing::keep::lids_to_repair`]; a destination switch
/// none of whose LIDs did costs nothing), every other LID keeps its
/// entries without an engine run over it, and the merge is walked LID by
/// LID ([`ibsm_routing::keep::keep_intact`]) and checked for credit loops.
/// `None`, and the engines run whole, for another engine, a switch without
/// an old table, a fabric ftree no longer takes, or a merge with a credit
/// loop.
pub fn repair_tree(
    view: &RoutingView,
    old: &HashMap<NodeId, Arc<Vec<u8>>>,
    broken: &[bool],
    last: &RoutingRun,
) -> Option<Computed> {
    use ibsm_routing::cdg::{analyze_cdg, CdgScope};
    use ibsm_routing::engine::EngineKind;
    use ibsm_routing::lft::Routes;
    if last.engine != Some(EngineKind::FTree) || last.kept {
        return None;
    }
    let started = std::time::Instant::now();
    let before = old_by_switch(view, old);
    let repaired = broken.iter().filter(|&&b| b).count();
    let options = EngineOptions::default();
    let lfts = match ibsm_routing::ftree::ftree_only(&view.fabric, &options, broken) {
        Ok(routes) => routes.lfts,
        Err(e) => {
            info!(error = %e, "ftree cannot repair the routes the loss broke: routing afresh");
            return None;
        }
    };
    let mut routes = Routes { lfts, sl: None };
    let kept = ibsm_routing::keep::keep_intact_with(&view.fabric, &before, broken, &mut routes);
    if let Some(cycle) = analyze_cdg(&view.fabric, &routes, CdgScope::default()).first_cycle() {
        info!(vl = cycle.vl, "the repaired routes would make a credit loop: routing afresh");
        return None;
    }
    info!(
        repaired_lids = repaired,
        kept = kept.kept,
        moved = kept.moved,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "routes repaired where the loss broke them, the rest kept"
    );
    Some(repaired_routes(view, routes, last, started, kept.kept, repaired as u32))
}

/// A repair's tables as the SM takes them: no engine of its own ran, so
/// the run names `last`'s engine and choice.
fn repaired_routes(
    view: &RoutingView,
    routes: ibsm_routing::lft::Routes,
    last: &RoutingRun,
    started: std::time::Instant,
    intact_kept: u64,
    repaired_lids: u32,
) -> Computed {
    let tables = view.switch_nodes.iter().copied().zip(routes.lfts.into_iter().map(|l| l.ports)).collect();
    let routing = RoutingRun {
        engine: last.engine,
        auto: last.auto.clone(),
        elapsed: started.elapsed(),
        intact_kept,
        repaired_lids,
        ..RoutingRun::default()
    };
    Computed { tables, path_sl: None, notes: Vec::new(), routing }
}

/// After a loss that broke some routes, for any engine whose routes share
/// one VL (the fat-tree engine's when [`repair_tree`] cannot): the broken
/// LIDs are routed again from the switches whose old path still holds,
/// every other entry kept, with no engine run
/// ([`ibsm_routing::repair::repair`]). The merge keeps the old routes'
/// dependency graph acyclic when the engine promised deadlock freedom, or
/// when the old routes were another SM's, kept at a takeover. `None`, and
/// the engines run whole, when the repair cannot keep that promise
/// (logged with why).
pub fn repair_one_vl(
    view: &RoutingView,
    old: &HashMap<NodeId, Arc<Vec<u8>>>,
    broken: &[bool],
    last: &RoutingRun,
) -> Option<Computed> {
    // Tables kept from a foreign SM (no engine of ours) are held to one
    // VL's acyclicity, as when they were kept.
    let promised = match last.engine {
        None => true,
        Some(engine) => last.auto.as_ref().map_or(engine.claims_deadlock_freedom(), |a| a.deadlock_free),
    };
    let started = std::time::Instant::now();
    let before = old_by_switch(view, old);
    let (routes, stats) = match ibsm_routing::repair::repair(&view.fabric, &before, broken, promised) {
        Ok(done) => done,
        Err(why) => {
            info!(%why, "the routes the loss broke cannot be repaired alone: routing afresh");
            return None;
        }
    };
    info!(
        repaired_lids = stats.lids,
        moved = stats.moved,
        backtracks = stats.backtracks,
        ripped = stats.ripped,
        regrown = stats.regrown,
        credit_loop_checked = promised,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "routes repaired where the loss broke them, the rest kept"
    );
    Some(repaired_routes(view, routes, last, started, stats.kept, stats.lids))
}

/// The LIDs (by LID) some table of `old` sends over what the view no
/// longer has ([`ibsm_routing::keep::lids_to_repair`]), found once for
/// [`keep_untouched`] and [`repair_tree`]; `None` when `old` lacks a
/// switch of the view (then neither applies).
pub fn lids_to_repair(view: &RoutingView, old: &HashMap<NodeId, Arc<Vec<u8>>>) -> Option<Vec<bool>> {
    let before = old_by_switch(view, old);
    if before.is_empty() || before.iter().any(Option::is_none) {
        return None;
    }
    Some(ibsm_routing::keep::lids_to_repair(&view.fabric, &before))
}

/// `old`'s table of each switch of the view, in the view's switch order
/// (`None` for a switch it has none of), as the routing crate takes them.
fn old_by_switch<'a>(view: &RoutingView, old: &'a HashMap<NodeId, Arc<Vec<u8>>>) -> Vec<Option<&'a [u8]>> {
    view.switch_nodes.iter().map(|id| old.get(id).map(|t| &t[..])).collect()
}

/// The routing input that decides an engine run's tables: every switch,
/// end port and cable of the view (in the view's GUID order), their LIDs,
/// and the chain and VLs, hashed. Engines are deterministic functions of
/// it, so two views with the same fingerprint get the same tables.
pub fn fingerprint(view: &RoutingView, chain: &[String], vls: u8) -> u64 {
    use std::hash::{Hash, Hasher};
    let f = &view.fabric;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (chain, vls).hash(&mut h);
    for s in f.switches() {
        (s.guid, s.num_ports, s.base_lid, s.lmc, s.enhanced_port0).hash(&mut h);
    }
    for e in f.end_ports() {
        (e.node_guid, e.port_guid, e.port_num, e.base_lid, e.lmc).hash(&mut h);
    }
    for l in f.links() {
        (l.a, l.b, l.rate).hash(&mut h);
    }
    h.finish()
}

/// An engine run's own tables (before any merge with old routes), by
/// switch GUID, with the fingerprint of the view they were computed for.
/// A fabric that returns to that shape (a cable back up, a switch back)
/// takes them again without running the engines: the tables a run would
/// give, in no time. Only for routes on one VL (per-path SLs are indexed
/// by the view's switch order).
pub struct LastRun {
    pub fingerprint: u64,
    tables: HashMap<u64, Vec<u8>>,
    notes: Vec<String>,
    routing: RoutingRun,
}

impl LastRun {
    /// `computed` remembered, when an engine made it and it sets no SLs.
    pub fn of(fingerprint: u64, view: &RoutingView, computed: &Computed) -> Option<LastRun> {
        if computed.path_sl.is_some() || computed.routing.engine.is_none() || computed.routing.kept {
            return None;
        }
        let guids = view.switch_nodes.iter().enumerate().map(|(i, id)| (id, view.fabric.switches()[i].guid));
        let tables = guids.filter_map(|(id, guid)| Some((guid, computed.tables.get(id)?.clone()))).collect();
        let routing = computed.routing.clone();
        Some(LastRun { fingerprint, tables, notes: computed.notes.clone(), routing })
    }

    /// The tables again, for `view` (whose fingerprint matched).
    pub fn computed(&self, view: &RoutingView) -> Computed {
        let started = std::time::Instant::now();
        let guids = view.switch_nodes.iter().enumerate().map(|(i, &id)| (id, view.fabric.switches()[i].guid));
        let tables = guids.filter_map(|(id, guid)| Some((id, self.tables.get(&guid)?.clone()))).collect();
        info!(
            engine = self.routing.engine_name(),
            "the fabric is the one the last engine run routed: its tables again"
        );
        let routing = RoutingRun { elapsed: started.elapsed(), remembered: true, ..self.routing.clone() };
        Computed { tables, path_sl: None, notes: self.notes.clone(), routing }
    }
}

/// Whether `held` holds every table of `computed`, entry for entry up to
/// LID `top` (entries past a table's end are unrouted).
pub fn tables_equal(computed: &SwitchTables, held: &HashMap<NodeId, Vec<u8>>, top: usize) -> bool {
    let entry = |t: &[u8], lid: usize| t.get(lid).copied().unwrap_or(0xFF);
    !held.is_empty()
        && computed
            .iter()
            .all(|(id, want)| held.get(id).is_some_and(|had| (0..=top).all(|lid| entry(want, lid) == entry(had, lid))))
}

/// Auto's choice, one info line: the engine, why, and what it passed over.
fn log_choice(choice: &AutoChoice) {
    let passed: Vec<String> = choice.passed_over.iter().map(|p| format!("{}: {}", p.engine, p.why)).collect();
    info!(
        engine = choice.engine.name(),
        reason = %choice.reason,
        passed_over = %passed.join("; "),
        "routing engine chosen by topology"
    );
}

/// What routing produced for the SM.
pub struct Computed {
    pub tables: SwitchTables,
    /// The SL of every (source switch, DLID) route, for engines that layer
    /// routes onto VLs; indexed like `RoutingView::switch_nodes`.
    pub path_sl: Option<ibsm_routing::lft::PathSl>,
    pub notes: Vec<String>,
    pub routing: RoutingRun,
}

/// Parses engine names (`auto` among them, which may only end the chain);
/// an empty chain means `auto`.
pub fn parse_chain(chain: &[String]) -> Result<Vec<ChainEntry>, RouteError> {
    let entries = chain
        .iter()
        .map(|name| name.parse::<ChainEntry>().map_err(|_| RouteError::UnknownEngine(name.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    check_chain(&entries).map_err(RouteError::Chain)?;
    if entries.is_empty() {
        return Ok(vec![ChainEntry::Auto]);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ibsm_routing::engine::EngineKind;
    use ibsm_routing::testfab::{self, FatTree, RandomSpec};
    use ibsm_routing::{analyze_cdg, CdgScope};

    use super::*;
    use crate::config::SmConfig;
    use crate::exchange::txn::TxnConfig;
    use crate::program::SubnetManager;
    use crate::sim::{FabricBuilder, SimDevice};
    use crate::topology::Topology;
    use crate::transport::io_thread::MadTransport;

    /// A routing view of a generated fabric, switch i as node i.
    fn view(fabric: RoutingFabric) -> RoutingView {
        let switch_nodes = (0..fabric.num_switches() as u32).map(NodeId).collect();
        RoutingView { fabric, switch_nodes, end_ports: Vec::new() }
    }

    fn default_chain() -> Vec<String> {
        SmConfig::default().routing_engine
    }

    #[test]
    fn the_default_chain_is_auto_and_says_why() {
        let cases = [
            (FatTree::full(8, 2).build(), EngineKind::FTree, "fat tree detected: 2 levels, 8 leaves → ftree"),
            (testfab::grid(&[5, 5], &[true, true], 1, 1), EngineKind::Dor, "5x5 torus within 8 VLs (needs 2) → dor"),
        ];
        for (fabric, engine, reason) in cases {
            let v = view(fabric);
            let c = compute(&v, &default_chain(), 8, ibsm_routing::Effort::Full).unwrap();
            assert_eq!(c.routing.engine, Some(engine));
            let auto = c.routing.auto.as_ref().expect("auto chose");
            assert_eq!((auto.engine, auto.reason.as_str()), (engine, reason));
            assert!(c.notes.is_empty(), "a refusal of ftree or dor is no warning: {:?}", c.notes);
            assert_eq!(c.tables.len(), v.fabric.num_switches());
        }
        // Elsewhere: a single-VL engine, whatever the budget, and its
        // tables are the ones programmed.
        let spec = RandomSpec { switches: 16, extra_links: 20, max_hosts_per_switch: 3, max_lmc: 0 };
        let v = view(testfab::random_connected(7, spec));
        let c = compute(&v, &default_chain(), 8, ibsm_routing::Effort::Full).unwrap();
        let auto = c.routing.auto.as_ref().unwrap();
        assert!(matches!(c.routing.engine, Some(EngineKind::UpDn | EngineKind::Nue)), "{}", auto.reason);
        assert_eq!(
            auto.passed_over.iter().map(|p| p.engine).collect::<Vec<_>>()[..2],
            [EngineKind::FTree, EngineKind::Dor]
        );
        assert!(auto.reason.ends_with("on 1 VL"), "{}", auto.reason);
        let routes = ibsm_routing::Routes {
            lfts: v.switch_nodes.iter().map(|n| ibsm_routing::Lft { ports: c.tables[n].clone() }).collect(),
            sl: c.path_sl.clone(),
        };
        assert!(analyze_cdg(&v.fabric, &routes, CdgScope::default()).deadlock_free());
    }

    #[test]
    fn explicit_chains_are_obeyed_and_auto_may_only_end_one() {
        let v = view(testfab::grid(&[5, 5], &[true, true], 1, 1));
        // minhop leaves credit loops on a torus; asked for, it is used.
        let c = compute(&v, &["minhop".into()], 8, ibsm_routing::Effort::Full).unwrap();
        assert_eq!((c.routing.engine, c.routing.auto.is_none()), (Some(EngineKind::MinHop), true));
        assert!(c.notes.is_empty(), "{:?}", c.notes);
        // ftree refuses and auto takes over: the refusal is the operator's
        // engine, so it is a note.
        let c = compute(&v, &["ftree".into(), "auto".into()], 8, ibsm_routing::Effort::Full).unwrap();
        assert_eq!(c.routing.engine, Some(EngineKind::Dor));
        assert!(c.notes.len() == 1 && c.notes[0].starts_with("ftree passed over: "), "{:?}", c.notes);
        // An empty chain is auto too.
        // An empty chain is auto too; on one VL the torus is dor's no more.
        let c = compute(&v, &[], 1, ibsm_routing::Effort::Full).unwrap();
        assert!(c.routing.auto.is_some());
        assert!(matches!(c.routing.engine, Some(EngineKind::UpDn | EngineKind::Nue)), "{:?}", c.routing);
        let e = compute(&v, &["auto".into(), "minhop".into()], 8, ibsm_routing::Effort::Full).err().unwrap();
        assert!(e.to_string().contains("`auto` must be the last engine"), "{e}");
        let e = compute(&v, &["lash".into()], 8, ibsm_routing::Effort::Full).err().unwrap();
        assert!(e.to_string().contains("unknown routing engine `lash` (known: auto, minhop"), "{e}");
    }

    #[test]
    fn a_sweep_with_the_default_config_routes_a_torus_with_dor() {
        let topo = Topology::from_spec_or_file("torus2d:5x5,hosts=1").unwrap();
        let fabric = FabricBuilder::new(&topo).seed(3).build_shared().unwrap();
        let host = topo.hosts().next().unwrap();
        let dev = SimDevice::attach(&fabric, host, 1).unwrap();
        let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
        let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
        // max_op_vls 2 = VL0-VL1: enough for dor's datelines.
        let config = SmConfig { max_op_vls: 2, ..SmConfig::default() };
        let mut sm = SubnetManager::new(transport, config, false);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let report = rt.block_on(sm.sweep()).expect("sweep");
        assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
        assert_eq!(report.routing.engine_name(), "dor");
        let auto = report.routing.auto.as_ref().expect("auto chose");
        assert_eq!(auto.reason, "5x5 torus within 2 VLs (needs 2) → dor");
        assert!(report.routing_notes.is_empty(), "{:?}", report.routing_notes);
        assert!(report.program.sl2vl_sets > 0, "dor's datelines need SL-to-VL tables");
    }
}
