//! The discovery sweep: breadth-first over directed routes from the SM's port.
//!
//! Cost model (the SMPs a cold sweep cannot avoid): one NodeInfo per link,
//! one PortInfo per switch port and per reached CA port, one SwitchInfo and
//! one NodeDescription per node. The sweep proceeds a BFS layer at a time:
//! when layer L starts, every link toward layers < L is already known, so a
//! NodeInfo probe is sent only through ports whose far end is still unknown.
//! Inside a layer every SMP is in flight at once, up to the transport window.
//!
//! Last, one SMInfo Get to every port whose CapabilityMask has IsSM (other
//! than the SM's own), for the election (IBA 14.4.1): one SMP per SM port.

use futures::stream::{FuturesUnordered, StreamExt};
use tracing::{debug, warn};

use super::program::MAX_OUTSTANDING;
use super::subnet::{NodeId, RemoteSm, Subnet, SweepProblem};
use crate::mad::SmpAttribute;
use crate::mad::{
    AttributeId, CapabilityMask, DrPath, NodeDescriptionRepr, NodeInfoRepr, NodeType, PhysState, PortInfoRepr,
    PortState, SmInfoRepr, SmState, SwitchInfoRepr,
};
use crate::transport::smp_client::{SmpClient, SmpError};
use crate::transport::Transport;
use crate::types::{Guid, Lid, MAX_PORTS};

#[derive(Debug, Clone, Copy)]
enum Job {
    /// NodeInfo through `from`'s port, to learn what is cabled there.
    Probe {
        from: Option<(NodeId, u8)>,
    },
    SwitchInfo {
        node: NodeId,
    },
    NodeDescription {
        node: NodeId,
    },
    PortInfo {
        node: NodeId,
        port: u8,
    },
}

struct Request {
    job: Job,
    path: DrPath,
    attr: AttributeId,
    amod: u32,
}

/// Sweeps the fabric reachable from the SM's port, then reads the SMInfo of
/// every other SM port it found, presenting `sm_key`.
pub async fn discover<T: Transport>(client: &SmpClient<T>, sm_key: u64) -> Subnet {
    let mut subnet = discover_nodes(client).await;
    subnet.remote_sms = find_sms(client, &subnet, sm_key).await;
    subnet
}

async fn discover_nodes<T: Transport>(client: &SmpClient<T>) -> Subnet {
    let mut sweep = Sweep { subnet: Subnet::default(), layer_nodes: Vec::new() };
    let mut batch =
        vec![Request { job: Job::Probe { from: None }, path: DrPath::local(), attr: AttributeId::NodeInfo, amod: 0 }];
    // Each round: run a batch to completion; replies may add to the batch
    // (same-layer work), and new nodes start the next layer.
    while !batch.is_empty() {
        // Requests wait in `queue` and become futures only as room frees
        // up, which bounds memory on big fabrics.
        let mut queue: std::collections::VecDeque<Request> = batch.drain(..).collect();
        let mut in_flight = FuturesUnordered::new();
        loop {
            while in_flight.len() < MAX_OUTSTANDING {
                let Some(req) = queue.pop_front() else { break };
                in_flight.push(run(client, req));
            }
            let Some((req, result)) = in_flight.next().await else { break };
            queue.extend(sweep.handle(req, result));
        }
        // Layer barrier: every node found in this layer now gets read.
        for id in std::mem::take(&mut sweep.layer_nodes) {
            batch.extend(sweep.first_reads(id));
        }
        if batch.is_empty() {
            break;
        }
        // The switch-info reads gate the port reads (a switch reporting
        // nonsense is left alone), so they form their own round.
    }
    sweep.subnet
}

/// A port that says it runs an SM (IsSM), not the SM's own.
struct SmPort {
    port_guid: Guid,
    node: NodeId,
    port: u8,
    path: DrPath,
    lid: Lid,
}

/// Every IsSM port but our own: a CA's ports each over their own path, a
/// switch's port 0 over the switch's.
fn sm_ports(subnet: &Subnet) -> Vec<SmPort> {
    let mut out = Vec::new();
    for id in subnet.ids() {
        let node = subnet.node(id);
        let ports: Vec<u8> = if node.is_switch() { vec![0] } else { node.external_ports().collect() };
        for port in ports {
            if subnet.sm_port == Some((id, port)) {
                continue;
            }
            let Some(info) = node.ports.get(port as usize).and_then(|p| p.info.as_ref()) else { continue };
            if info.capability_mask & CapabilityMask::IS_SM == 0 {
                continue;
            }
            let path = node.path_for_port(port);
            out.push(SmPort { port_guid: node.port_guid(port), node: id, port, path, lid: info.lid });
        }
    }
    out
}

/// Reads SMInfo from every other SM port. The request's SMInfo carries our
/// GUID and SM_Key: an SM shows its SM_Key only to a requester presenting
/// the same one (IBA 14.4.1.1). Failures are the answer's business, not the
/// sweep's: they land in `RemoteSm::info`.
async fn find_sms<T: Transport>(client: &SmpClient<T>, subnet: &Subnet, sm_key: u64) -> Vec<RemoteSm> {
    let ports = sm_ports(subnet);
    if ports.is_empty() {
        return Vec::new();
    }
    let ours = subnet.sm_port.map(|(id, port)| subnet.node(id).port_guid(port)).unwrap_or(Guid(0));
    let ask = SmInfoRepr { guid: ours, sm_key, act_count: 0, priority: 0, sm_state: SmState::NotActive }.to_data();
    let mut queue = ports.into_iter().enumerate();
    let get = |(i, p): (usize, SmPort)| async move {
        let r = client.dr_get_with_data(&p.path, AttributeId::SmInfo, 0, ask).await;
        (i, p, r)
    };
    let mut in_flight = FuturesUnordered::new();
    in_flight.extend(queue.by_ref().take(MAX_OUTSTANDING).map(get));
    let mut found = Vec::new();
    while let Some((i, p, result)) = in_flight.next().await {
        if let Some(next) = queue.next() {
            in_flight.push(get(next));
        }
        let info = check_sm_info(&p, result.map(|smp| smp.data));
        match &info {
            Ok(si) => debug!(guid = %p.port_guid, path = %p.path, lid = %p.lid, state = ?si.sm_state,
                priority = si.priority, "found an SM"),
            Err(e) => {
                warn!(guid = %p.port_guid, path = %p.path, lid = %p.lid, error = %e, "IsSM port without a usable SMInfo")
            }
        }
        found
            .push((i, RemoteSm { port_guid: p.port_guid, node: p.node, port: p.port, path: p.path, lid: p.lid, info }));
    }
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().map(|(_, r)| r).collect()
}

/// The SMInfo an SM port answered, or what is wrong with it.
fn check_sm_info(p: &SmPort, answer: Result<[u8; 64], SmpError>) -> Result<SmInfoRepr, String> {
    let at = format!("SM port {} at {}", p.port_guid, p.path);
    let data = answer.map_err(|e| format!("{at}: SMInfo read failed: {e}"))?;
    let si = SmInfoRepr::parse_data(&data).map_err(|e| format!("{at}: unreadable SMInfo: {e}"))?;
    if si.guid == Guid(0) {
        return Err(format!("{at}: SMInfo.GUID is 0"));
    }
    if si.guid != p.port_guid {
        return Err(format!("{at}: SMInfo.GUID is {}, not the port's GUID", si.guid));
    }
    if let SmState::Unknown(code) = si.sm_state {
        return Err(format!("{at}: SMInfo.SMState {code} is not a state (0-3)"));
    }
    Ok(si)
}

async fn run<T: Transport>(client: &SmpClient<T>, req: Request) -> (Request, Result<[u8; 64], SmpError>) {
    let r = client.dr_get(&req.path, req.attr, req.amod).await.map(|smp| smp.data);
    (req, r)
}

struct Sweep {
    subnet: Subnet,
    /// Nodes inserted during the current layer.
    layer_nodes: Vec<NodeId>,
}

impl Sweep {
    fn problem(&mut self, path: DrPath, guid: Option<crate::types::Guid>, what: String) {
        let p = SweepProblem { path, guid, what };
        warn!(%p, "sweep problem");
        self.subnet.problems.push(p);
    }

    /// The reads a newly found node needs before its ports can be probed.
    fn first_reads(&mut self, id: NodeId) -> Vec<Request> {
        let node = self.subnet.node(id);
        let path = node.path;
        let mut out =
            vec![Request { job: Job::NodeDescription { node: id }, path, attr: AttributeId::NodeDescription, amod: 0 }];
        if node.quarantined.is_some() {
            return out;
        }
        if node.is_switch() {
            out.push(Request { job: Job::SwitchInfo { node: id }, path, attr: AttributeId::SwitchInfo, amod: 0 });
        } else {
            let port = node.info.local_port_num;
            out.push(Request {
                job: Job::PortInfo { node: id, port },
                path,
                attr: AttributeId::PortInfo,
                amod: port as u32,
            });
        }
        out
    }

    fn handle(&mut self, req: Request, result: Result<[u8; 64], SmpError>) -> Vec<Request> {
        let data = match result {
            Ok(d) => d,
            Err(e) => {
                let guid = match req.job {
                    Job::Probe { .. } => None,
                    Job::SwitchInfo { node } | Job::NodeDescription { node } | Job::PortInfo { node, .. } => {
                        Some(self.subnet.node(node).guid())
                    }
                };
                self.problem(req.path, guid, format!("{:?} read failed: {e}", req.attr));
                return Vec::new();
            }
        };
        match req.job {
            Job::Probe { from } => self.on_node_info(req.path, from, &data),
            Job::NodeDescription { node } => {
                match NodeDescriptionRepr::parse_data(&data) {
                    Ok(nd) => self.subnet.node_mut(node).description = Some(nd.text),
                    Err(e) => {
                        self.problem(req.path, Some(self.subnet.node(node).guid()), format!("bad NodeDescription: {e}"))
                    }
                }
                Vec::new()
            }
            Job::SwitchInfo { node } => self.on_switch_info(node, &data),
            Job::PortInfo { node, port } => self.on_port_info(node, port, &data),
        }
    }

    fn on_node_info(&mut self, path: DrPath, from: Option<(NodeId, u8)>, data: &[u8; 64]) -> Vec<Request> {
        let info = match NodeInfoRepr::parse_data(data) {
            Ok(i) => i,
            Err(e) => {
                self.problem(path, None, format!("bad NodeInfo: {e}"));
                return Vec::new();
            }
        };
        let (id, new) = self.subnet.insert(info, path);
        let here = (id, info.local_port_num);
        match from {
            Some(from) => self.subnet.link(from, here),
            None => self.subnet.sm_port = Some(here),
        }
        if !new {
            if info.node_type != NodeType::Switch {
                // A CA reached through another of its ports: that port's
                // GUID and state are read now.
                let node = self.subnet.node_mut(id);
                if let Some(slot) = node.port_guids.get_mut(info.local_port_num as usize) {
                    *slot = Some(info.port_guid);
                    node.port_paths[info.local_port_num as usize] = Some(path);
                    if node.ports[info.local_port_num as usize].info.is_none() {
                        let port = info.local_port_num;
                        return vec![Request {
                            job: Job::PortInfo { node: id, port },
                            path,
                            attr: AttributeId::PortInfo,
                            amod: port as u32,
                        }];
                    }
                }
            }
            return Vec::new();
        }
        debug!(guid = %info.node_guid, %path, kind = ?info.node_type, "found node");
        if info.num_ports == 0 || info.num_ports > MAX_PORTS {
            let why = format!("NodeInfo.NumPorts is {}, outside 1-{MAX_PORTS}", info.num_ports);
            self.problem(path, Some(info.node_guid), why.clone());
            self.subnet.node_mut(id).quarantined = Some(why);
        } else if info.node_type != NodeType::Switch
            && (info.local_port_num == 0 || info.local_port_num > info.num_ports)
        {
            let why = format!(
                "NodeInfo.LocalPortNum {} is not a port of this {}-port node",
                info.local_port_num, info.num_ports
            );
            self.problem(path, Some(info.node_guid), why.clone());
            self.subnet.node_mut(id).quarantined = Some(why);
        }
        self.layer_nodes.push(id);
        Vec::new()
    }

    fn on_switch_info(&mut self, id: NodeId, data: &[u8; 64]) -> Vec<Request> {
        let path = self.subnet.node(id).path;
        let guid = self.subnet.node(id).guid();
        let si = match SwitchInfoRepr::parse_data(data) {
            Ok(si) => si,
            Err(e) => {
                self.problem(path, Some(guid), format!("bad SwitchInfo: {e}"));
                return Vec::new();
            }
        };
        if si.linear_fdb_cap == 0 {
            let why = "SwitchInfo.LinearFDBCap is 0: the switch cannot hold a forwarding table".to_string();
            self.problem(path, Some(guid), why.clone());
            let node = self.subnet.node_mut(id);
            node.quarantined = Some(why);
            node.switch_info = Some(si);
            return Vec::new();
        }
        let node = self.subnet.node_mut(id);
        node.switch_info = Some(si);
        (0..=node.info.num_ports)
            .map(|port| Request {
                job: Job::PortInfo { node: id, port },
                path,
                attr: AttributeId::PortInfo,
                amod: port as u32,
            })
            .collect()
    }

    fn on_port_info(&mut self, id: NodeId, port: u8, data: &[u8; 64]) -> Vec<Request> {
        let path = self.subnet.node(id).path;
        let guid = self.subnet.node(id).guid();
        let pi = match PortInfoRepr::parse_data(data) {
            Ok(pi) => pi,
            Err(e) => {
                self.problem(path, Some(guid), format!("bad PortInfo for port {port}: {e}"));
                return Vec::new();
            }
        };
        let up = port != 0 && link_is_up(&pi);
        let node = self.subnet.node_mut(id);
        let Some(slot) = node.ports.get_mut(port as usize) else {
            return Vec::new();
        };
        slot.info = Some(pi);
        let unknown_far_end = slot.remote.is_none();
        // The SM's own port on a CA is probed like any other; a CA port that
        // is not the SM's was reached over its cable already.
        let probe = up && unknown_far_end && (node.is_switch() || self.subnet.sm_port == Some((id, port)));
        if !probe {
            return Vec::new();
        }
        match path.extend(port) {
            Ok(next) => vec![Request {
                job: Job::Probe { from: Some((id, port)) },
                path: next,
                attr: AttributeId::NodeInfo,
                amod: 0,
            }],
            Err(e) => {
                self.problem(path, Some(guid), format!("port {port} not probed: {e}"));
                Vec::new()
            }
        }
    }
}

/// A port whose link trained: logical state Init or above.
pub fn link_is_up(pi: &PortInfoRepr) -> bool {
    matches!(pi.port_state, PortState::Init | PortState::Armed | PortState::Active)
        || pi.port_physical_state == PhysState::LinkUp
}
