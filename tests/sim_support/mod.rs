//! Shared pieces of the simulator tests: hand-built topologies and a tiny
//! test SM that talks to the fabric only through SMPs.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use ibsm::mad::smp::SmpRoute;
use ibsm::mad::{
    AttributeId, DrPath, LftBlockRepr, Method, MgmtClass, PortInfoRepr, PortState, SmpRepr, SwitchInfoRepr,
};
use ibsm::sim::{SharedFabric, SimDevice};
use ibsm::topology::{Link, Node, NodeIdx, NodeKind, PortRef, Topology};
use ibsm::transport::{Datagram, MadAddress, MadDevice};
use ibsm::{Guid, Lid};

pub fn switch(name: &str, guid: u64, ports: u8, enhanced: bool) -> Node {
    Node {
        kind: NodeKind::Switch,
        name: name.into(),
        description: name.to_lowercase(),
        num_ports: ports,
        node_guid: Guid(guid),
        system_guid: Guid(guid),
        port_guids: vec![Guid(guid)],
        enhanced_port0: enhanced,
    }
}

pub fn ca(name: &str, guid: u64, ports: u8) -> Node {
    Node {
        kind: NodeKind::Ca,
        name: name.into(),
        description: name.to_lowercase(),
        num_ports: ports,
        node_guid: Guid(guid),
        system_guid: Guid(guid),
        port_guids: (0..=ports as u64).map(|p| Guid(guid + p)).collect(),
        enhanced_port0: false,
    }
}

pub fn link(a: usize, pa: u8, b: usize, pb: u8) -> Link {
    Link {
        a: PortRef { node: NodeIdx(a), port: pa },
        b: PortRef { node: NodeIdx(b), port: pb },
        width: 2,
        speed: 1,
        ext_speed: 0,
    }
}

pub fn pr(node: usize, port: u8) -> PortRef {
    PortRef { node: NodeIdx(node), port }
}

/// Node indices of [`small`].
pub const S1: usize = 0;
pub const H1: usize = 1;
pub const H2: usize = 2;
pub const S2: usize = 3;
pub const H3: usize = 4;

/// Two switches and three hosts, with ibsim's GUID numbering:
///
/// ```text
///  H-0001 p1 ── p1 S-0001 p3 ── p1 S-0002 p2 ── p1 H-0003
///  (2 ports)       p2                    (base port 0)
///                  └── p1 H-0002
/// ```
pub fn small() -> Topology {
    Topology {
        nodes: vec![
            switch("S-0001", 0x200000, 8, true),
            ca("H-0001", 0x100000, 2),
            ca("H-0002", 0x100003, 1),
            switch("S-0002", 0x200001, 8, false),
            ca("H-0003", 0x100005, 1),
        ],
        links: vec![link(S1, 1, H1, 1), link(S1, 2, H2, 1), link(S1, 3, S2, 1), link(S2, 2, H3, 1)],
    }
}

/// A test SM: builds requests, matches answers by TID, waits in virtual time.
pub struct TestSm {
    pub dev: SimDevice,
    tid: u64,
    pub m_key: u64,
    /// Unsolicited MADs seen while waiting for answers.
    pub unsolicited: Vec<Datagram>,
}

/// How long the test SM waits for an answer (virtual).
pub const TIMEOUT: Duration = Duration::from_millis(1);

impl TestSm {
    pub fn attach(f: &SharedFabric, node: &str, port: u8) -> Self {
        TestSm { dev: SimDevice::attach(f, node, port).unwrap(), tid: 0x1000, m_key: 0, unsolicited: Vec::new() }
    }

    fn next_tid(&mut self) -> u64 {
        self.tid += 1;
        self.tid
    }

    /// Sends `smp` to `addr` and waits for the MAD with its TID.
    pub fn exchange(&mut self, mut smp: SmpRepr, addr: MadAddress) -> Option<Datagram> {
        let tid = self.next_tid();
        smp.header.transaction_id = tid;
        self.dev.send(&Datagram { addr, mad: smp.to_bytes().to_vec() }).unwrap();
        let deadline = self.dev.now() + TIMEOUT;
        while let Some(d) = self.dev.recv(deadline).unwrap() {
            let got = u64::from_be_bytes(d.mad[8..16].try_into().unwrap());
            if got == tid && d.mad[3] & 0x80 != 0 {
                return Some(d);
            }
            self.unsolicited.push(d);
        }
        None
    }

    pub fn dr(&mut self, method: Method, path: &[u8], attr: AttributeId, amod: u32, data: [u8; 64]) -> Option<SmpRepr> {
        let smp = SmpRepr::directed_request(method, attr, amod, DrPath::from_ports(path).unwrap(), self.m_key, data);
        let d = self.exchange(smp, MadAddress::smi_permissive())?;
        Some(SmpRepr::parse_bytes(&d.mad).unwrap())
    }

    pub fn dr_get(&mut self, path: &[u8], attr: AttributeId, amod: u32) -> Option<SmpRepr> {
        self.dr(Method::Get, path, attr, amod, [0; 64])
    }

    pub fn lid_req(
        &mut self,
        method: Method,
        lid: Lid,
        attr: AttributeId,
        amod: u32,
        data: [u8; 64],
    ) -> Option<SmpRepr> {
        let smp = SmpRepr::lid_request(method, attr, amod, self.m_key, data);
        let d = self.exchange(smp, MadAddress::smi(lid))?;
        Some(SmpRepr::parse_bytes(&d.mad).unwrap())
    }

    pub fn port_info(&mut self, path: &[u8], port: u8) -> PortInfoRepr {
        let r = self.dr_get(path, AttributeId::PortInfo, port as u32).expect("PortInfo answered");
        assert_eq!(r.header.status, 0);
        PortInfoRepr::parse_bytes(&r.data).unwrap()
    }

    /// SubnSet(PortInfo) built from the port's current PortInfo; returns
    /// the answer's status and PortInfo.
    pub fn set_port_info(&mut self, path: &[u8], port: u8, f: impl FnOnce(&mut PortInfoRepr)) -> (u16, PortInfoRepr) {
        let mut pi = self.port_info(path, port).for_set();
        f(&mut pi);
        let r = self.dr(Method::Set, path, AttributeId::PortInfo, port as u32, pi.to_bytes()).expect("Set answered");
        (r.header.status, PortInfoRepr::parse_bytes(&r.data).unwrap())
    }

    pub fn set_state(&mut self, path: &[u8], port: u8, state: PortState) -> u16 {
        self.set_port_info(path, port, |pi| pi.port_state = state).0
    }
}

/// Status word and D bit of a directed-route answer as on the wire.
pub fn dr_route(r: &SmpRepr) -> (bool, u8, u8, DrPath) {
    match r.route {
        SmpRoute::Directed { inbound, hop_pointer, hop_count, return_path, .. } => {
            (inbound, hop_pointer, hop_count, return_path)
        }
        SmpRoute::Lid => panic!("not directed route"),
    }
}

/// What the topology says about node adjacency: (port, peer node, peer port).
pub fn adjacency(t: &Topology) -> Vec<Vec<(u8, usize, u8)>> {
    let mut adj = vec![Vec::new(); t.nodes.len()];
    for l in &t.links {
        adj[l.a.node.0].push((l.a.port, l.b.node.0, l.b.port));
        adj[l.b.node.0].push((l.b.port, l.a.node.0, l.a.port));
    }
    for a in &mut adj {
        a.sort();
    }
    adj
}

/// Directed-route paths from the SM's port to every reachable node (BFS;
/// end nodes are not crossed).
pub fn dr_paths(t: &Topology, sm_node: usize, sm_port: u8) -> HashMap<usize, Vec<u8>> {
    let adj = adjacency(t);
    let mut paths = HashMap::new();
    paths.insert(sm_node, vec![]);
    let mut q = VecDeque::new();
    for &(p, peer, _) in &adj[sm_node] {
        if p == sm_port || t.nodes[sm_node].kind == NodeKind::Switch {
            paths.entry(peer).or_insert_with(|| vec![p]);
            q.push_back(peer);
        }
    }
    while let Some(n) = q.pop_front() {
        if t.nodes[n].kind != NodeKind::Switch {
            continue;
        }
        let base = paths[&n].clone();
        for &(p, peer, _) in &adj[n] {
            if let std::collections::hash_map::Entry::Vacant(e) = paths.entry(peer) {
                let mut path = base.clone();
                path.push(p);
                e.insert(path);
                q.push_back(peer);
            }
        }
    }
    paths
}

/// LIDs the test SM hands out: switches and CA ports in node order from 1.
pub fn assign_lids(t: &Topology) -> HashMap<PortRef, Lid> {
    let mut lids = HashMap::new();
    let mut next = 1u16;
    for (i, n) in t.nodes.iter().enumerate() {
        let ports: Vec<u8> = if n.kind == NodeKind::Switch { vec![0] } else { (1..=n.num_ports).collect() };
        for p in ports {
            lids.insert(pr(i, p), Lid(next));
            next += 1;
        }
    }
    lids
}

/// Min-hop LFTs: for every switch, the egress port towards every LID.
pub fn min_hop_lfts(t: &Topology, lids: &HashMap<PortRef, Lid>) -> HashMap<usize, Vec<u8>> {
    let adj = adjacency(t);
    let top = lids.values().map(|l| l.0).max().unwrap_or(0) as usize;
    let mut out = HashMap::new();
    for (s, n) in t.nodes.iter().enumerate() {
        if n.kind != NodeKind::Switch {
            continue;
        }
        // BFS from s: first egress port to every node.
        let mut first: HashMap<usize, u8> = HashMap::new();
        first.insert(s, 0);
        let mut q = VecDeque::from([s]);
        while let Some(x) = q.pop_front() {
            if x != s && t.nodes[x].kind != NodeKind::Switch {
                continue;
            }
            for &(p, peer, _) in &adj[x] {
                if !first.contains_key(&peer) {
                    let f = if x == s { p } else { first[&x] };
                    first.insert(peer, f);
                    q.push_back(peer);
                }
            }
        }
        let mut lft = vec![0xffu8; top + 1];
        for (r, lid) in lids {
            if let Some(&f) = first.get(&r.node.0) {
                // A CA with two ports cabled elsewhere is reached through the
                // port whose cable BFS found; good enough for these tests.
                lft[lid.0 as usize] = f;
            }
        }
        // Route a CA port's LID through the switch it is cabled to, when
        // that switch is this one.
        for &(p, peer, peer_port) in &adj[s] {
            if let Some(l) = lids.get(&pr(peer, peer_port)) {
                lft[l.0 as usize] = p;
            }
        }
        out.insert(s, lft);
    }
    out
}

/// Brings a fabric up the way an SM would, with SMPs only: LIDs and SM LID
/// on every end port and switch port 0, LFTs and LinearFDBTop, then every
/// link Armed and Active. Returns the LIDs it set.
pub fn bring_up(sm: &mut TestSm, t: &Topology, sm_node: usize, sm_port: u8) -> HashMap<PortRef, Lid> {
    let paths = dr_paths(t, sm_node, sm_port);
    let lids = assign_lids(t);
    let mut assigned = HashMap::new();
    let sm_lid = lids[&pr(sm_node, sm_port)];
    let mut order: Vec<usize> = paths.keys().copied().collect();
    order.sort();
    for &n in &order {
        let path = paths[&n].clone();
        let node = &t.nodes[n];
        let ports: Vec<u8> = if node.kind == NodeKind::Switch { vec![0] } else { (1..=node.num_ports).collect() };
        for p in ports {
            // A CA's SMA configures only the port the SMP came in on.
            if node.kind != NodeKind::Switch && !arrives_on(t, &paths, n, p, sm_node, sm_port) {
                continue;
            }
            let lid = lids[&pr(n, p)];
            let (st, _) = sm.set_port_info(&path, if node.kind == NodeKind::Switch { 0 } else { p }, |pi| {
                pi.lid = lid;
                pi.master_sm_lid = sm_lid;
            });
            assert_eq!(st, 0, "set LID on {n}:{p}");
            assigned.insert(pr(n, p), lid);
        }
    }
    let lfts = min_hop_lfts(t, &lids);
    for &n in &order {
        let Some(lft) = lfts.get(&n) else { continue };
        let path = paths[&n].clone();
        let mut si = SwitchInfoRepr::parse_bytes(&sm.dr_get(&path, AttributeId::SwitchInfo, 0).unwrap().data).unwrap();
        si.linear_fdb_top = (lft.len() - 1) as u16;
        // Writing 1 clears PortStateChange.
        si.port_state_change = true;
        let r = sm.dr(Method::Set, &path, AttributeId::SwitchInfo, 0, si.to_bytes()).unwrap();
        assert_eq!(r.header.status, 0);
        for (b, chunk) in lft.chunks(64).enumerate() {
            let mut ports = [0xffu8; 64];
            ports[..chunk.len()].copy_from_slice(chunk);
            let r = sm
                .dr(Method::Set, &path, AttributeId::LinearForwardingTable, b as u32, LftBlockRepr { ports }.to_bytes())
                .unwrap();
            assert_eq!(r.header.status, 0);
        }
    }
    for state in [PortState::Armed, PortState::Active] {
        for l in &t.links {
            for end in [l.a, l.b] {
                let n = end.node.0;
                let Some(path) = paths.get(&n).cloned() else {
                    continue;
                };
                if t.nodes[n].kind != NodeKind::Switch && !arrives_on(t, &paths, n, end.port, sm_node, sm_port) {
                    continue;
                }
                let port = if t.nodes[n].kind == NodeKind::Switch { end.port } else { 0 };
                assert_eq!(sm.set_state(&path, port, state), 0, "{state:?} on {end:?}");
            }
        }
    }
    assigned
}

/// Whether the DR path to CA `n` enters it on port `p`.
fn arrives_on(t: &Topology, paths: &HashMap<usize, Vec<u8>>, n: usize, p: u8, sm_node: usize, sm_port: u8) -> bool {
    if n == sm_node {
        return p == sm_port;
    }
    let path = &paths[&n];
    // The previous node on the path and the port it left by.
    let prev_path = &path[..path.len() - 1];
    let prev = paths.iter().find(|(_, v)| v.as_slice() == prev_path).map(|(k, _)| *k);
    let Some(prev) = prev else { return false };
    let out = *path.last().unwrap();
    t.links.iter().any(|l| (l.a == pr(prev, out) && l.b == pr(n, p)) || (l.b == pr(prev, out) && l.a == pr(n, p)))
}

pub fn is_directed(r: &SmpRepr) -> bool {
    r.header.mgmt_class == MgmtClass::SubnMgmtDirected
}
