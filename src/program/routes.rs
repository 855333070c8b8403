//! From a sweep to the routing crate and back: builds the routing view of
//! the discovered subnet, runs the configured engine and maps the tables
//! onto the sweep's node IDs.

use std::collections::HashMap;

use ibsm_routing::engine::{route_chain, EngineKind, EngineOptions};
use ibsm_routing::fabric::{EndPort, EndPortId, FabricError, PortEnd, RoutingFabric, Switch, SwitchId};

use crate::lid::LidRange;
use crate::sweep::subnet::{NodeId, Subnet};

#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("routing view of the subnet is inconsistent: {0}")]
    Fabric(#[from] FabricError),
    #[error("unknown routing engine `{0}` (known: minhop, updn, dnup, ftree, sssp, dfsssp, dor, nue)")]
    UnknownEngine(String),
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
pub fn routing_view(subnet: &Subnet, lids: &HashMap<(NodeId, u8), LidRange>) -> Result<RoutingView, RouteError> {
    let mut b = RoutingFabric::builder();
    let mut switch_of: HashMap<NodeId, SwitchId> = HashMap::new();
    let mut end_of: HashMap<(NodeId, u8), EndPortId> = HashMap::new();
    let mut switch_nodes = Vec::new();
    let mut end_ports = Vec::new();
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
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
    for id in subnet.ids() {
        for (port, slot) in subnet.node(id).ports.iter().enumerate() {
            let Some((far, far_port)) = slot.remote else { continue };
            // Each cable once: from its lower (node, port) end.
            if (far, far_port) < (id, port as u8) || port == 0 {
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

/// Runs the engine chain (e.g. `ftree,updn,minhop`): the first engine that
/// applies routes the fabric. Returns each switch's table and notes worth
/// reporting (engines passed over, disconnected parts).
pub fn compute(view: &RoutingView, chain: &[String], max_vls: u8) -> Result<Computed, RouteError> {
    let kinds = parse_chain(chain)?;
    let mut notes = Vec::new();
    let options = EngineOptions { max_vls, ..EngineOptions::default() };
    let started = std::time::Instant::now();
    let (routes, engine) = match route_chain(&kinds, &view.fabric, &options) {
        Ok(outcome) => {
            for (kind, why) in &outcome.skipped {
                notes.push(format!("{kind} passed over: {why}"));
            }
            (outcome.routes, Some(outcome.engine))
        }
        Err(e) => {
            notes.push(e.to_string());
            match e.partial_routes() {
                Some(r) => (r.clone(), None),
                None => {
                    let routing = RoutingRun { engine: None, elapsed: started.elapsed() };
                    return Ok(Computed { tables: HashMap::new(), path_sl: None, notes, routing });
                }
            }
        }
    };
    let routing = RoutingRun { engine, elapsed: started.elapsed() };
    // The engine's tables move into the plan: at 50,000 LIDs and 4,000
    // switches each copy is 200 MB.
    let path_sl = routes.sl;
    let tables = view.switch_nodes.iter().copied().zip(routes.lfts.into_iter().map(|l| l.ports)).collect();
    Ok(Computed { tables, path_sl, notes, routing })
}

/// Which engine of the chain routed, and how long the chain took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoutingRun {
    /// `None`: every engine refused (the routes are partial or none).
    pub engine: Option<EngineKind>,
    pub elapsed: std::time::Duration,
}

impl RoutingRun {
    /// The engine's name, or `none`.
    pub fn engine_name(&self) -> &'static str {
        self.engine.map_or("none", |e| e.name())
    }
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

/// Parses engine names; an empty chain means minhop.
pub fn parse_chain(chain: &[String]) -> Result<Vec<EngineKind>, RouteError> {
    if chain.is_empty() {
        return Ok(vec![EngineKind::MinHop]);
    }
    chain.iter().map(|name| name.parse::<EngineKind>().map_err(|_| RouteError::UnknownEngine(name.clone()))).collect()
}
