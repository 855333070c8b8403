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
//!
//! Lost SMPs. The transport retries each SMP (4 attempts); a read that
//! still fails goes to the back of the queue for a later pass, up to
//! [`RETRY_PASSES`] more times, so a lossy hop costs time, not a node.
//! A read that every pass lost is answered from what the last sweep knew
//! (`known`): the node's NodeInfo through that cable, its SwitchInfo, its
//! NodeDescription, the port's PortInfo, marked stale, for up to
//! [`MAX_STALE_SWEEPS`] sweeps in a row. So one unlucky sweep does not make
//! a known port vanish, lose its LID or get reprogrammed, and the sweep
//! still walks on behind it. Every such read is listed in
//! `Subnet::missing`; one with nothing known behind it is also a sweep
//! problem, and the fabric is not up while one remains.

use std::collections::VecDeque;

use tracing::{debug, warn};

use super::core::{SmpCore, SmpRequest};
use crate::exchange::SmpError;
use crate::exchange::TransportError;
use crate::mad::SmpAttribute;
use crate::mad::{
    AttributeId, CapabilityMask, DrPath, NodeDescriptionRepr, NodeInfoRepr, NodeType, PhysState, PortInfoRepr,
    PortState, SmInfoRepr, SmState, SwitchInfoRepr,
};
use crate::subnet::{MissingRead, NodeId, Problem, Read, RemoteSm, Subnet, SweepProblem};
use crate::sweep::core::SmpDriver;
use crate::types::{Guid, Lid, MAX_PORTS};

/// Passes after the first in which a read the transport gave up on is
/// asked again, within one discovery.
pub const RETRY_PASSES: u32 = 3;

/// Heavy sweeps in a row a node or port may go unanswered and still be
/// taken from what an earlier sweep read. Past that it is gone.
pub const MAX_STALE_SWEEPS: u32 = 3;

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
    /// Passes this read has been through already.
    pass: u32,
}

impl Request {
    fn new(job: Job, path: DrPath, attr: AttributeId, amod: u32) -> Request {
        Request { job, path, attr, amod, pass: 0 }
    }
}

/// Lost on the way (worth asking again), as opposed to refused or garbled.
fn is_loss(e: &SmpError) -> bool {
    matches!(e, SmpError::Transport(TransportError::Timeout { .. } | TransportError::Busy { .. }))
}

/// Sweeps the fabric reachable from the SM's port, then reads the SMInfo of
/// every other SM port it found, presenting `sm_key`. `known` is what the
/// last sweep found: it stands in for reads that get no answer.
pub async fn discover<D: SmpDriver>(driver: &D, sm_key: u64, known: Option<&Subnet>) -> Subnet {
    let mut core = DiscoveryCore::new(sm_key, known);
    driver.drive(&mut core).await;
    core.finish()
}

/// Discovery as an I/O-free core ([`SmpCore`]): breadth-first a layer at a
/// time (a layer's reads all answered before the next layer's start), then
/// the SMInfo of every other SM port. Lost reads go to the back of the queue
/// for a later pass.
pub struct DiscoveryCore<'k> {
    sweep: Sweep<'k>,
    phase: Phase,
    /// Reads waiting to be sent, this layer.
    queue: VecDeque<Request>,
    /// Requests handed out and not yet answered.
    outstanding: usize,
    /// The SMInfo phase: the ports, which to ask next (with the pass), and
    /// what each answered.
    sm_ports: Vec<SmPort>,
    sm_queue: VecDeque<(usize, u32)>,
    sm_found: Vec<Option<RemoteSm>>,
    /// Our SMInfo with our key, the payload of each SMInfo Get.
    ask: [u8; 64],
    sm_key: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Nodes,
    Sms,
    Done,
}

/// What a discovery request was for (opaque to the driver).
pub struct DiscoveryToken(TokenKind);

enum TokenKind {
    Read(Request),
    SmInfo { index: usize, pass: u32 },
}

impl<'k> DiscoveryCore<'k> {
    pub fn new(sm_key: u64, known: Option<&'k Subnet>) -> Self {
        let first = Request::new(Job::Probe { from: None }, DrPath::local(), AttributeId::NodeInfo, 0);
        DiscoveryCore {
            sweep: Sweep { subnet: Subnet::default(), layer_nodes: Vec::new(), known },
            phase: Phase::Nodes,
            queue: VecDeque::from([first]),
            outstanding: 0,
            sm_ports: Vec::new(),
            sm_queue: VecDeque::new(),
            sm_found: Vec::new(),
            ask: [0; 64],
            sm_key,
        }
    }

    /// What discovery found; call once [`SmpCore::is_done`].
    pub fn finish(self) -> Subnet {
        let mut subnet = self.sweep.subnet;
        subnet.remote_sms = self.sm_found.into_iter().flatten().collect();
        subnet
    }

    fn start_sms(&mut self) {
        let subnet = &self.sweep.subnet;
        let ours = subnet.sm_port.map(|(id, port)| subnet.node(id).port_guid(port)).unwrap_or(Guid(0));
        let sm_key = self.sm_key;
        self.ask = SmInfoRepr { guid: ours, sm_key, act_count: 0, priority: 0, sm_state: SmState::NotActive }.to_data();
        self.sm_ports = sm_ports(subnet);
        self.sm_found = (0..self.sm_ports.len()).map(|_| None).collect();
        self.sm_queue = (0..self.sm_ports.len()).map(|i| (i, 0)).collect();
        self.phase = Phase::Sms;
    }
}

impl SmpCore for DiscoveryCore<'_> {
    type Token = DiscoveryToken;

    fn poll_request(&mut self) -> Option<(DiscoveryToken, SmpRequest)> {
        loop {
            match self.phase {
                Phase::Nodes => {
                    if let Some(req) = self.queue.pop_front() {
                        self.outstanding += 1;
                        let smp = SmpRequest::get(req.path, req.attr, req.amod);
                        return Some((DiscoveryToken(TokenKind::Read(req)), smp));
                    }
                    if self.outstanding > 0 {
                        return None;
                    }
                    // Layer barrier: every node found in this layer now gets
                    // read (its SwitchInfo gates its port reads: a switch
                    // reporting nonsense is left alone).
                    for id in std::mem::take(&mut self.sweep.layer_nodes) {
                        let reads = self.sweep.first_reads(id);
                        self.queue.extend(reads);
                    }
                    if self.queue.is_empty() {
                        self.start_sms();
                    }
                }
                Phase::Sms => {
                    if let Some((index, pass)) = self.sm_queue.pop_front() {
                        self.outstanding += 1;
                        let p = &self.sm_ports[index];
                        let smp = SmpRequest::get_with(p.path, AttributeId::SmInfo, 0, self.ask);
                        return Some((DiscoveryToken(TokenKind::SmInfo { index, pass }), smp));
                    }
                    if self.outstanding > 0 {
                        return None;
                    }
                    self.phase = Phase::Done;
                }
                Phase::Done => return None,
            }
        }
    }

    fn handle_answer(&mut self, token: DiscoveryToken, answer: Result<[u8; 64], SmpError>) {
        self.outstanding -= 1;
        match token.0 {
            TokenKind::Read(mut req) => match answer {
                // Behind everything queued: a later pass of this layer.
                Err(e) if is_loss(&e) && req.pass < RETRY_PASSES => {
                    req.pass += 1;
                    debug!(path = %req.path, attr = ?req.attr, amod = req.amod, pass = req.pass, "read lost; asking again");
                    self.queue.push_back(req);
                }
                answer => {
                    let next = self.sweep.handle(req, answer);
                    self.queue.extend(next);
                }
            },
            TokenKind::SmInfo { index, pass } => match answer {
                // One more pass at most: nothing from the last sweep can stand
                // in for an SM's answer, and a hung SM must not hold up a takeover.
                Err(e) if is_loss(&e) && pass < 1 => self.sm_queue.push_back((index, pass + 1)),
                answer => {
                    let p = &self.sm_ports[index];
                    let info = check_sm_info(p, answer);
                    match &info {
                        Ok(si) => debug!(guid = %p.port_guid, path = %p.path, lid = %p.lid, state = ?si.sm_state,
                            priority = si.priority, "found an SM"),
                        Err(e) => warn!(guid = %p.port_guid, path = %p.path, lid = %p.lid, error = %e,
                            "IsSM port without a usable SMInfo"),
                    }
                    let remote =
                        RemoteSm { port_guid: p.port_guid, node: p.node, port: p.port, path: p.path, lid: p.lid, info };
                    self.sm_found[index] = Some(remote);
                }
            },
        }
    }

    fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }
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

struct Sweep<'k> {
    subnet: Subnet,
    /// Nodes inserted during the current layer.
    layer_nodes: Vec<NodeId>,
    /// What the last sweep found.
    known: Option<&'k Subnet>,
}

impl Sweep<'_> {
    /// Records a problem; the runtime logs a sweep's problems in one place.
    fn problem(&mut self, path: DrPath, guid: Option<crate::types::Guid>, what: Problem) {
        let p = SweepProblem { path, guid, what };
        debug!(%p, "sweep problem");
        self.subnet.problems.push(p);
    }

    /// The last sweep's record of the node with this GUID, if it may still
    /// stand in for this one: same kind and port count, and not stale for
    /// too long already.
    fn known_node(&self, guid: Guid) -> Option<&crate::subnet::SubnetNode> {
        let n = self.known?.by_guid(guid)?;
        (n.stale < MAX_STALE_SWEEPS).then_some(n)
    }

    /// The reads a newly found node needs before its ports can be probed.
    fn first_reads(&mut self, id: NodeId) -> Vec<Request> {
        let node = self.subnet.node(id);
        let path = node.path;
        let mut out = vec![Request::new(Job::NodeDescription { node: id }, path, AttributeId::NodeDescription, 0)];
        if node.quarantined.is_some() {
            return out;
        }
        if node.is_switch() {
            out.push(Request::new(Job::SwitchInfo { node: id }, path, AttributeId::SwitchInfo, 0));
        } else {
            let port = node.info.local_port_num;
            out.push(Request::new(Job::PortInfo { node: id, port }, path, AttributeId::PortInfo, port as u32));
        }
        out
    }

    fn handle(&mut self, req: Request, result: Result<[u8; 64], SmpError>) -> Vec<Request> {
        let data = match result {
            Ok(d) => d,
            // Lost: the last sweep's answer may stand in.
            Err(e) if is_loss(&e) => return self.unanswered(req, e),
            // Refused or garbled: the node said something, and it was no.
            Err(e) => {
                let guid = match req.job {
                    Job::Probe { .. } => None,
                    Job::SwitchInfo { node } | Job::NodeDescription { node } | Job::PortInfo { node, .. } => {
                        Some(self.subnet.node(node).guid())
                    }
                };
                self.problem(
                    req.path,
                    guid,
                    Problem::ReadFailed { attr: req.attr, amod: req.amod, error: e.to_string() },
                );
                return Vec::new();
            }
        };
        // The node answered: it is not stale, whatever else is.
        if let Job::SwitchInfo { node } | Job::NodeDescription { node } | Job::PortInfo { node, .. } = req.job {
            self.subnet.node_mut(node).stale = 0;
        }
        match req.job {
            Job::Probe { from } => match NodeInfoRepr::parse_data(&data) {
                Ok(info) => self.on_node_info(req.path, from, info, None),
                Err(e) => {
                    self.problem(
                        req.path,
                        None,
                        Problem::BadAnswer { attr: AttributeId::NodeInfo, port: None, error: e.to_string() },
                    );
                    Vec::new()
                }
            },
            Job::NodeDescription { node } => {
                match NodeDescriptionRepr::parse_data(&data) {
                    Ok(nd) => self.subnet.node_mut(node).description = Some(nd.text),
                    Err(e) => {
                        let what =
                            Problem::BadAnswer { attr: AttributeId::NodeDescription, port: None, error: e.to_string() };
                        self.problem(req.path, Some(self.subnet.node(node).guid()), what)
                    }
                }
                Vec::new()
            }
            Job::SwitchInfo { node } => match SwitchInfoRepr::parse_data(&data) {
                Ok(si) => self.on_switch_info(node, si),
                Err(e) => {
                    let (path, guid) = (self.subnet.node(node).path, self.subnet.node(node).guid());
                    self.problem(
                        path,
                        Some(guid),
                        Problem::BadAnswer { attr: AttributeId::SwitchInfo, port: None, error: e.to_string() },
                    );
                    Vec::new()
                }
            },
            Job::PortInfo { node, port } => match PortInfoRepr::parse_data(&data) {
                Ok(pi) => self.on_port_info(node, port, pi),
                Err(e) => {
                    let (path, guid) = (self.subnet.node(node).path, self.subnet.node(node).guid());
                    let what =
                        Problem::BadAnswer { attr: AttributeId::PortInfo, port: Some(port), error: e.to_string() };
                    self.problem(path, Some(guid), what);
                    Vec::new()
                }
            },
        }
    }

    /// A read every pass lost: answered from the last sweep when it can be
    /// (and the sweep goes on behind it), recorded as missing either way.
    fn unanswered(&mut self, req: Request, e: SmpError) -> Vec<Request> {
        let (what, guid) = match req.job {
            Job::Probe { from } => {
                (Read::NodeInfo { from: from.map(|(id, port)| (self.subnet.node(id).guid(), port)) }, None)
            }
            Job::NodeDescription { node } => (Read::NodeDescription, Some(self.subnet.node(node).guid())),
            Job::SwitchInfo { node } => (Read::SwitchInfo, Some(self.subnet.node(node).guid())),
            Job::PortInfo { node, port } => (Read::PortInfo { port }, Some(self.subnet.node(node).guid())),
        };
        let (kept, guid, next) = match self.recall(&req) {
            Some((far, next)) => (true, far.or(guid), next),
            None => (false, guid, Vec::new()),
        };
        let missing = MissingRead { guid, path: req.path, what, kept };
        debug!(%missing, error = %e, "read unanswered after every pass");
        if !kept {
            self.problem(req.path, guid, Problem::ReadFailed { attr: req.attr, amod: req.amod, error: e.to_string() });
        }
        self.subnet.missing.push(missing);
        next
    }

    /// The last sweep's answer to `req`, applied as if it had come now, and
    /// marked stale. Returns the GUID it names (a probe's far end) and the
    /// reads that follow from it; `None` when nothing is known.
    fn recall(&mut self, req: &Request) -> Option<(Option<Guid>, Vec<Request>)> {
        match req.job {
            Job::Probe { from: None } => None,
            Job::Probe { from: Some((id, port)) } => {
                let here = self.known_node(self.subnet.node(id).guid())?;
                let (far_id, far_port) = here.ports.get(port as usize)?.remote?;
                let far = self.known?.node(far_id);
                if far.stale >= MAX_STALE_SWEEPS {
                    return None;
                }
                // NodeInfo as it reads through that cable: LocalPortNum
                // and, on a CA, PortGUID are the entry port's.
                let info = NodeInfoRepr { local_port_num: far_port, port_guid: far.port_guid(far_port), ..far.info };
                let guid = info.node_guid;
                let stale = far.stale + 1;
                Some((Some(guid), self.on_node_info(req.path, Some((id, port)), info, Some(stale))))
            }
            Job::NodeDescription { node } => {
                let text = self.known_node(self.subnet.node(node).guid())?.description.clone()?;
                self.subnet.node_mut(node).description = Some(text);
                Some((None, Vec::new()))
            }
            Job::SwitchInfo { node } => {
                let si = self.known_node(self.subnet.node(node).guid())?.switch_info?;
                Some((None, self.on_switch_info(node, si)))
            }
            Job::PortInfo { node, port } => {
                let k = self.known_node(self.subnet.node(node).guid())?;
                if k.ports.len() != self.subnet.node(node).ports.len() {
                    return None;
                }
                let slot = k.ports.get(port as usize)?;
                if slot.stale >= MAX_STALE_SWEEPS {
                    return None;
                }
                let (pi, stale) = (slot.info?, slot.stale + 1);
                let next = self.on_port_info(node, port, pi);
                if let Some(slot) = self.subnet.node_mut(node).ports.get_mut(port as usize) {
                    slot.stale = stale;
                }
                Some((None, next))
            }
        }
    }

    /// A NodeInfo through `from` (or the SM's own, `None`); `stale` when it
    /// is the last sweep's, and how many sweeps in a row that makes.
    fn on_node_info(
        &mut self,
        path: DrPath,
        from: Option<(NodeId, u8)>,
        info: NodeInfoRepr,
        stale: Option<u32>,
    ) -> Vec<Request> {
        let (id, new) = self.subnet.insert(info, path);
        let here = (id, info.local_port_num);
        match from {
            Some(from) => self.subnet.link(from, here),
            None => self.subnet.sm_port = Some(here),
        }
        // A node first taken from the last sweep (its route lost every
        // pass) now answers over this route: use the one that works.
        let was_stale = !new && self.subnet.node(id).stale > 0;
        if new || stale.is_none() {
            self.subnet.node_mut(id).stale = stale.unwrap_or(0);
        }
        if was_stale && stale.is_none() {
            self.subnet.node_mut(id).path = path;
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
                        return vec![Request::new(
                            Job::PortInfo { node: id, port },
                            path,
                            AttributeId::PortInfo,
                            port as u32,
                        )];
                    }
                }
            }
            return Vec::new();
        }
        debug!(guid = %info.node_guid, %path, kind = ?info.node_type, stale = ?stale, "found node");
        if info.num_ports == 0 || info.num_ports > MAX_PORTS {
            let what = Problem::BadNumPorts { num_ports: info.num_ports };
            self.subnet.node_mut(id).quarantined = Some(what.to_string());
            self.problem(path, Some(info.node_guid), what);
        } else if info.node_type != NodeType::Switch
            && (info.local_port_num == 0 || info.local_port_num > info.num_ports)
        {
            let what = Problem::BadLocalPort { local_port: info.local_port_num, num_ports: info.num_ports };
            self.subnet.node_mut(id).quarantined = Some(what.to_string());
            self.problem(path, Some(info.node_guid), what);
        }
        self.layer_nodes.push(id);
        Vec::new()
    }

    fn on_switch_info(&mut self, id: NodeId, si: SwitchInfoRepr) -> Vec<Request> {
        let path = self.subnet.node(id).path;
        let guid = self.subnet.node(id).guid();
        if si.linear_fdb_cap == 0 {
            let why = Problem::NoLinearFdb.to_string();
            self.problem(path, Some(guid), Problem::NoLinearFdb);
            let node = self.subnet.node_mut(id);
            node.quarantined = Some(why);
            node.switch_info = Some(si);
            return Vec::new();
        }
        let node = self.subnet.node_mut(id);
        node.switch_info = Some(si);
        (0..=node.info.num_ports)
            .map(|port| Request::new(Job::PortInfo { node: id, port }, path, AttributeId::PortInfo, port as u32))
            .collect()
    }

    fn on_port_info(&mut self, id: NodeId, port: u8, pi: PortInfoRepr) -> Vec<Request> {
        let path = self.subnet.node(id).path;
        let guid = self.subnet.node(id).guid();
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
            Ok(next) => vec![Request::new(Job::Probe { from: Some((id, port)) }, next, AttributeId::NodeInfo, 0)],
            Err(e) => {
                self.problem(path, Some(guid), Problem::NotProbed { port, error: e.to_string() });
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
