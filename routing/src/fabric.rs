//! The routing view of a fabric: switches, end ports and the cables between
//! them, with nothing a routing engine does not need.
//!
//! It is deliberately independent of the SM's discovery model and of MAD
//! types: the SM (or a topology-file reader) translates its own model into a
//! [`RoutingFabric`] through [`FabricBuilder`], which checks the cabling and
//! the LID plan once so that engines can index flat arrays without checks.
//!
//! Layout: switches and end ports live in arenas addressed by [`SwitchId`] and
//! [`EndPortId`]. Each switch's ports `0..=num_ports` occupy a contiguous run
//! of one flat peer table, and the switch-to-switch adjacency is kept in a
//! compressed (CSR) form sorted by local port, so breadth-first searches walk
//! contiguous memory.

use std::fmt;

use petgraph::unionfind::UnionFind;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Highest unicast LID (IBA 4.1.3: 0x0001..=0xBFFF).
pub const UNICAST_LID_MAX: u16 = 0xBFFF;
/// Most physical ports a node can have (IBA 14.2.5.3, NodeInfo.NumPorts).
pub const MAX_PORTS: u8 = 254;
/// Largest LMC (IBA 14.2.5.6, PortInfo.LMC is 3 bits).
pub const MAX_LMC: u8 = 7;

/// Index of a switch in [`RoutingFabric::switches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SwitchId(pub u32);

/// Index of an end port (CA or router port) in [`RoutingFabric::end_ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EndPortId(pub u32);

/// Index of a cable in [`RoutingFabric::links`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinkId(pub u32);

impl SwitchId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl EndPortId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
impl LinkId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A switch as routing sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    pub guid: u64,
    pub name: String,
    /// Physical ports, not counting management port 0.
    pub num_ports: u8,
    /// LID of port 0; 0 means "not assigned yet" and makes the switch no
    /// destination (it still forwards).
    pub base_lid: u16,
    /// Only an enhanced port 0 may have LMC > 0 (IBA 14.2.5.6, PortInfo.LMC).
    pub lmc: u8,
    pub enhanced_port0: bool,
}

impl Switch {
    pub fn new(guid: u64, num_ports: u8, base_lid: u16) -> Switch {
        Switch { guid, name: String::new(), num_ports, base_lid, lmc: 0, enhanced_port0: false }
    }
    pub fn with_name(mut self, name: impl Into<String>) -> Switch {
        self.name = name.into();
        self
    }
    /// Sets LMC and marks port 0 enhanced (required for LMC > 0).
    pub fn with_enhanced_port0(mut self, lmc: u8) -> Switch {
        self.enhanced_port0 = true;
        self.lmc = lmc;
        self
    }
    /// The LIDs port 0 answers to (empty when no LID is assigned).
    pub fn lids(&self) -> std::ops::Range<u32> {
        lid_range(self.base_lid, self.lmc)
    }
}

/// A CA or router port: something that terminates packets instead of
/// forwarding them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndPort {
    pub node_guid: u64,
    pub port_guid: u64,
    pub port_num: u8,
    /// 0 = not assigned yet: the port sources traffic but is no destination.
    pub base_lid: u16,
    pub lmc: u8,
    pub name: String,
}

impl EndPort {
    pub fn new(node_guid: u64, port_guid: u64, port_num: u8, base_lid: u16) -> EndPort {
        EndPort { node_guid, port_guid, port_num, base_lid, lmc: 0, name: String::new() }
    }
    pub fn with_lmc(mut self, lmc: u8) -> EndPort {
        self.lmc = lmc;
        self
    }
    pub fn with_name(mut self, name: impl Into<String>) -> EndPort {
        self.name = name.into();
        self
    }
    /// The 2^LMC LIDs the port answers to (empty when no LID is assigned).
    pub fn lids(&self) -> std::ops::Range<u32> {
        lid_range(self.base_lid, self.lmc)
    }
}

fn lid_range(base: u16, lmc: u8) -> std::ops::Range<u32> {
    if base == 0 {
        0..0
    } else {
        let base = u32::from(base);
        base..base + (1u32 << lmc.min(MAX_LMC))
    }
}

/// One end of a cable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum PortEnd {
    /// A physical switch port, `1..=num_ports`.
    Switch(SwitchId, u8),
    End(EndPortId),
}

/// The node a LID or a cable end belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeRef {
    Switch(SwitchId),
    End(EndPortId),
}

/// Link width and speed as PortInfo encodes them (IBA 14.2.5.6:
/// LinkWidthActive 1=1x 2=4x 4=8x 8=12x 16=2x; LinkSpeedActive 1=SDR 2=DDR
/// 4=QDR). 0 means unknown. MinHop ignores them; weighted engines will not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinkRate {
    pub width: u8,
    pub speed: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub a: PortEnd,
    pub b: PortEnd,
    pub rate: LinkRate,
}

/// A switch-to-switch adjacency entry, seen from the switch that owns the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchEdge {
    /// Our port the cable leaves from.
    pub port: u8,
    /// The port it lands on at `neighbor`.
    pub remote_port: u8,
    pub neighbor: SwitchId,
}

/// Errors found while building a fabric; each names the offending values.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FabricError {
    // --- nodes
    #[error("switch {guid:#018x} has {num_ports} ports (allowed 1..={MAX_PORTS})")]
    BadPortCount { guid: u64, num_ports: u8 },
    #[error("end port {port_guid:#018x} has port number {port_num} (allowed 1..={MAX_PORTS})")]
    BadEndPortNumber { port_guid: u64, port_num: u8 },
    #[error("node {guid:#018x} has LMC {lmc} (allowed 0..={MAX_LMC})")]
    BadLmc { guid: u64, lmc: u8 },
    #[error("switch {guid:#018x} has LMC {lmc} on a base (not enhanced) port 0")]
    LmcOnBasePort0 { guid: u64, lmc: u8 },
    #[error("GUID {guid:#018x} is used twice")]
    DuplicateGuid { guid: u64 },
    #[error("too many nodes for 32-bit indices")]
    TooManyNodes,

    // --- LIDs
    #[error("node {guid:#018x}: base LID {base_lid:#06x} with LMC {lmc} is not aligned to 2^LMC")]
    MisalignedLid { guid: u64, base_lid: u16, lmc: u8 },
    #[error("node {guid:#018x}: LIDs {base_lid:#06x}+2^{lmc} leave the unicast range")]
    LidOutOfRange { guid: u64, base_lid: u16, lmc: u8 },
    #[error("LID {lid:#06x} belongs to both {first:#018x} and {second:#018x}")]
    LidConflict { lid: u16, first: u64, second: u64 },

    // --- cables
    #[error("unknown switch {0:?}")]
    UnknownSwitch(SwitchId),
    #[error("unknown end port {0:?}")]
    UnknownEndPort(EndPortId),
    #[error("switch {guid:#018x} has no port {port} (it has {num_ports})")]
    PortOutOfRange { guid: u64, port: u8, num_ports: u8 },
    #[error("{end:?} is already cabled to {peer:?}")]
    AlreadyCabled { end: PortEnd, peer: PortEnd },
    #[error("{0:?} cannot be cabled to itself")]
    SelfLink(PortEnd),
}

/// Accumulates nodes and cables, checking each cable as it is added and the
/// LID plan in [`FabricBuilder::build`].
#[derive(Debug, Clone, Default)]
pub struct FabricBuilder {
    switches: Vec<Switch>,
    end_ports: Vec<EndPort>,
    links: Vec<Link>,
    /// Per switch, the peer of ports 0..=num_ports (0 stays None).
    sw_peers: Vec<Vec<Option<PortEnd>>>,
    end_peers: Vec<Option<PortEnd>>,
}

impl FabricBuilder {
    pub fn new() -> FabricBuilder {
        FabricBuilder::default()
    }

    pub fn add_switch(&mut self, sw: Switch) -> Result<SwitchId, FabricError> {
        if sw.num_ports == 0 || sw.num_ports > MAX_PORTS {
            return Err(FabricError::BadPortCount { guid: sw.guid, num_ports: sw.num_ports });
        }
        if sw.lmc > MAX_LMC {
            return Err(FabricError::BadLmc { guid: sw.guid, lmc: sw.lmc });
        }
        if sw.lmc != 0 && !sw.enhanced_port0 {
            return Err(FabricError::LmcOnBasePort0 { guid: sw.guid, lmc: sw.lmc });
        }
        let id = SwitchId(u32::try_from(self.switches.len()).map_err(|_| FabricError::TooManyNodes)?);
        self.sw_peers.push(vec![None; usize::from(sw.num_ports) + 1]);
        self.switches.push(sw);
        Ok(id)
    }

    pub fn add_end_port(&mut self, ep: EndPort) -> Result<EndPortId, FabricError> {
        if ep.port_num == 0 || ep.port_num > MAX_PORTS {
            return Err(FabricError::BadEndPortNumber { port_guid: ep.port_guid, port_num: ep.port_num });
        }
        if ep.lmc > MAX_LMC {
            return Err(FabricError::BadLmc { guid: ep.port_guid, lmc: ep.lmc });
        }
        let id = EndPortId(u32::try_from(self.end_ports.len()).map_err(|_| FabricError::TooManyNodes)?);
        self.end_peers.push(None);
        self.end_ports.push(ep);
        Ok(id)
    }

    /// Cables `a` to `b` with an unknown rate.
    pub fn connect(&mut self, a: PortEnd, b: PortEnd) -> Result<LinkId, FabricError> {
        self.connect_with(a, b, LinkRate::default())
    }

    /// Cables `a` to `b`. A port cabled to itself is refused; two ports of
    /// one switch cabled together (a loopback cable, which real fabrics
    /// have) are accepted: the cable shows in [`RoutingFabric::switch_neighbors`]
    /// as an edge from the switch to itself, once from each port, and
    /// carries no route, since it leads nowhere new.
    pub fn connect_with(&mut self, a: PortEnd, b: PortEnd, rate: LinkRate) -> Result<LinkId, FabricError> {
        if a == b {
            return Err(FabricError::SelfLink(a));
        }
        if let Some(peer) = *self.peer_slot(a)? {
            return Err(FabricError::AlreadyCabled { end: a, peer });
        }
        if let Some(peer) = *self.peer_slot(b)? {
            return Err(FabricError::AlreadyCabled { end: b, peer });
        }
        let id = LinkId(u32::try_from(self.links.len()).map_err(|_| FabricError::TooManyNodes)?);
        *self.peer_slot(a)? = Some(b);
        *self.peer_slot(b)? = Some(a);
        self.links.push(Link { a, b, rate });
        Ok(id)
    }

    fn peer_slot(&mut self, end: PortEnd) -> Result<&mut Option<PortEnd>, FabricError> {
        match end {
            PortEnd::Switch(s, port) => {
                let sw = self.switches.get(s.index()).ok_or(FabricError::UnknownSwitch(s))?;
                if port == 0 || port > sw.num_ports {
                    return Err(FabricError::PortOutOfRange { guid: sw.guid, port, num_ports: sw.num_ports });
                }
                Ok(&mut self.sw_peers[s.index()][usize::from(port)])
            }
            PortEnd::End(e) => self.end_peers.get_mut(e.index()).ok_or(FabricError::UnknownEndPort(e)),
        }
    }

    /// Checks GUID uniqueness and the LID plan, then lays out the flat tables.
    pub fn build(self) -> Result<RoutingFabric, FabricError> {
        let FabricBuilder { switches, end_ports, links, sw_peers, end_peers } = self;

        let mut guids: Vec<u64> =
            switches.iter().map(|s| s.guid).chain(end_ports.iter().map(|e| e.port_guid)).collect();
        guids.sort_unstable();
        if let Some(w) = guids.windows(2).find(|w| w[0] == w[1]) {
            return Err(FabricError::DuplicateGuid { guid: w[0] });
        }

        // LID plan: aligned, unicast, no overlap.
        let owners = switches
            .iter()
            .enumerate()
            .map(|(i, s)| (NodeRef::Switch(SwitchId(i as u32)), s.guid, s.base_lid, s.lmc))
            .chain(
                end_ports
                    .iter()
                    .enumerate()
                    .map(|(i, e)| (NodeRef::End(EndPortId(i as u32)), e.port_guid, e.base_lid, e.lmc)),
            );
        let mut max_lid: u16 = 0;
        let mut claims: Vec<(u16, u16, NodeRef, u64)> = Vec::new();
        for (node, guid, base_lid, lmc) in owners {
            if base_lid == 0 {
                continue;
            }
            let span = 1u32 << lmc;
            if u32::from(base_lid) % span != 0 {
                return Err(FabricError::MisalignedLid { guid, base_lid, lmc });
            }
            let last = u32::from(base_lid) + span - 1;
            if last > u32::from(UNICAST_LID_MAX) {
                return Err(FabricError::LidOutOfRange { guid, base_lid, lmc });
            }
            max_lid = max_lid.max(last as u16);
            claims.push((base_lid, last as u16, node, guid));
        }
        let mut lid_owner: Vec<Option<NodeRef>> = vec![None; usize::from(max_lid) + 1];
        let mut lid_guid: Vec<u64> = vec![0; usize::from(max_lid) + 1];
        for &(first, last, node, guid) in &claims {
            for lid in first..=last {
                let slot = &mut lid_owner[usize::from(lid)];
                if slot.is_some() {
                    return Err(FabricError::LidConflict { lid, first: lid_guid[usize::from(lid)], second: guid });
                }
                *slot = Some(node);
                lid_guid[usize::from(lid)] = guid;
            }
        }

        // Flat peer table and switch adjacency.
        let mut sw_port_base = Vec::with_capacity(switches.len() + 1);
        let mut port_peers = Vec::new();
        for peers in &sw_peers {
            sw_port_base.push(port_peers.len() as u32);
            port_peers.extend_from_slice(peers);
        }
        sw_port_base.push(port_peers.len() as u32);

        let mut adj_base = Vec::with_capacity(switches.len() + 1);
        let mut adj = Vec::new();
        for peers in &sw_peers {
            adj_base.push(adj.len() as u32);
            for (port, peer) in peers.iter().enumerate() {
                if let Some(PortEnd::Switch(n, rp)) = *peer {
                    adj.push(SwitchEdge { port: port as u8, remote_port: rp, neighbor: n });
                }
            }
        }
        adj_base.push(adj.len() as u32);

        Ok(RoutingFabric {
            switches,
            end_ports,
            links,
            sw_port_base,
            port_peers,
            end_peers,
            adj_base,
            adj,
            lid_owner,
            max_lid,
        })
    }
}

/// A checked, immutable fabric. Build it with [`RoutingFabric::builder`].
#[derive(Debug, Clone)]
pub struct RoutingFabric {
    switches: Vec<Switch>,
    end_ports: Vec<EndPort>,
    links: Vec<Link>,
    /// `port_peers[sw_port_base[s] + p]` is the peer of switch `s` port `p`.
    sw_port_base: Vec<u32>,
    port_peers: Vec<Option<PortEnd>>,
    end_peers: Vec<Option<PortEnd>>,
    /// CSR adjacency over switch-to-switch cables, sorted by local port.
    adj_base: Vec<u32>,
    adj: Vec<SwitchEdge>,
    lid_owner: Vec<Option<NodeRef>>,
    max_lid: u16,
}

/// Connected components of a fabric (switches and end ports together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Components {
    /// Component number of each switch, numbered so that 0 is the largest
    /// (ties: the one holding the lowest switch, then end port, index).
    pub of_switch: Vec<u32>,
    pub of_end_port: Vec<u32>,
    /// Number of nodes (switches + end ports) in each component.
    pub sizes: Vec<usize>,
}

impl Components {
    pub fn count(&self) -> usize {
        self.sizes.len()
    }
}

impl RoutingFabric {
    pub fn builder() -> FabricBuilder {
        FabricBuilder::new()
    }

    pub fn switches(&self) -> &[Switch] {
        &self.switches
    }
    pub fn end_ports(&self) -> &[EndPort] {
        &self.end_ports
    }
    pub fn links(&self) -> &[Link] {
        &self.links
    }
    pub fn num_switches(&self) -> usize {
        self.switches.len()
    }
    pub fn num_end_ports(&self) -> usize {
        self.end_ports.len()
    }
    pub fn switch(&self, id: SwitchId) -> &Switch {
        &self.switches[id.index()]
    }
    pub fn end_port(&self, id: EndPortId) -> &EndPort {
        &self.end_ports[id.index()]
    }
    pub fn switch_ids(&self) -> impl ExactSizeIterator<Item = SwitchId> + '_ {
        (0..self.switches.len() as u32).map(SwitchId)
    }
    pub fn end_port_ids(&self) -> impl ExactSizeIterator<Item = EndPortId> + '_ {
        (0..self.end_ports.len() as u32).map(EndPortId)
    }

    /// The highest LID any node answers to (0 if none is assigned); every LFT
    /// an engine produces covers `0..=max_lid`.
    pub fn max_lid(&self) -> u16 {
        self.max_lid
    }

    /// Who answers to `lid`, if anyone.
    pub fn lid_owner(&self, lid: u16) -> Option<NodeRef> {
        self.lid_owner.get(usize::from(lid)).copied().flatten()
    }

    /// What is cabled to switch `s` port `port` (None for port 0, an empty
    /// port or a port beyond `num_ports`).
    pub fn switch_peer(&self, s: SwitchId, port: u8) -> Option<PortEnd> {
        let base = self.sw_port_base[s.index()] as usize;
        let end = self.sw_port_base[s.index() + 1] as usize;
        let i = base + usize::from(port);
        if i < end {
            self.port_peers[i]
        } else {
            None
        }
    }

    /// What end port `e` is cabled to.
    pub fn end_peer(&self, e: EndPortId) -> Option<PortEnd> {
        self.end_peers[e.index()]
    }

    pub fn peer(&self, end: PortEnd) -> Option<PortEnd> {
        match end {
            PortEnd::Switch(s, p) => self.switch_peer(s, p),
            PortEnd::End(e) => self.end_peer(e),
        }
    }

    /// The peers of switch `s` ports 0..=num_ports (index = port number).
    pub fn switch_ports(&self, s: SwitchId) -> &[Option<PortEnd>] {
        let base = self.sw_port_base[s.index()] as usize;
        let end = self.sw_port_base[s.index() + 1] as usize;
        &self.port_peers[base..end]
    }

    /// Index of switch `s` port `port` in a flat per-switch-port array of
    /// length [`RoutingFabric::num_switch_port_slots`].
    pub fn switch_port_slot(&self, s: SwitchId, port: u8) -> usize {
        self.sw_port_base[s.index()] as usize + usize::from(port)
    }

    /// Length of a flat array with one slot per switch port (port 0 included).
    pub fn num_switch_port_slots(&self) -> usize {
        self.port_peers.len()
    }

    /// Switch-to-switch cables leaving `s`, sorted by local port; parallel
    /// cables to the same neighbour appear once each, a loopback cable
    /// (two ports of `s`) twice, with `neighbor == s`.
    pub fn switch_neighbors(&self, s: SwitchId) -> &[SwitchEdge] {
        let a = self.adj_base[s.index()] as usize;
        let b = self.adj_base[s.index() + 1] as usize;
        &self.adj[a..b]
    }

    /// Number of inter-switch hops from every switch to `dest`, by
    /// breadth-first search over switch-to-switch cables; `u32::MAX` marks a
    /// switch that cannot reach `dest`. `dist` and `queue` are scratch space
    /// reused across calls. O(S + E) for S switches and E cables.
    pub fn switch_distances(&self, dest: SwitchId, dist: &mut Vec<u32>, queue: &mut Vec<u32>) {
        dist.clear();
        dist.resize(self.switches.len(), u32::MAX);
        queue.clear();
        dist[dest.index()] = 0;
        queue.push(dest.0);
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head] as usize;
            head += 1;
            let du = dist[u] + 1;
            let (a, b) = (self.adj_base[u] as usize, self.adj_base[u + 1] as usize);
            for e in &self.adj[a..b] {
                let n = e.neighbor.index();
                if dist[n] == u32::MAX {
                    dist[n] = du;
                    queue.push(n as u32);
                }
            }
        }
    }

    /// The switch an end port hangs off, and the switch port it uses.
    pub fn attached_switch(&self, e: EndPortId) -> Option<(SwitchId, u8)> {
        match self.end_peers[e.index()] {
            Some(PortEnd::Switch(s, p)) => Some((s, p)),
            _ => None,
        }
    }

    /// The number of end ports cabled to each switch, indexed by switch
    /// index: the traffic a switch injects and the destinations it delivers
    /// to, which the engines' balance and the analysis both weigh by. `u64`
    /// because every caller adds it into route or load counts. End ports
    /// cabled to another end port or to nothing count nowhere. O(N) for N end
    /// ports.
    pub fn end_ports_per_switch(&self) -> Vec<u64> {
        let mut n = vec![0u64; self.switches.len()];
        for peer in &self.end_peers {
            if let Some(PortEnd::Switch(s, _)) = *peer {
                n[s.index()] += 1;
            }
        }
        n
    }

    /// GUID of a node: the switch GUID or the end port's port GUID.
    pub fn guid_of(&self, node: NodeRef) -> u64 {
        match node {
            NodeRef::Switch(s) => self.switches[s.index()].guid,
            NodeRef::End(e) => self.end_ports[e.index()].port_guid,
        }
    }

    /// The LIDs a node answers to.
    pub fn lids_of(&self, node: NodeRef) -> std::ops::Range<u32> {
        match node {
            NodeRef::Switch(s) => self.switches[s.index()].lids(),
            NodeRef::End(e) => self.end_ports[e.index()].lids(),
        }
    }

    /// Connected components over all cables (union-find, near O(N + E)).
    pub fn components(&self) -> Components {
        let ns = self.switches.len();
        let n = ns + self.end_ports.len();
        let node = |end: PortEnd| match end {
            PortEnd::Switch(s, _) => s.index(),
            PortEnd::End(e) => ns + e.index(),
        };
        let mut uf = UnionFind::<usize>::new(n);
        for l in &self.links {
            uf.union(node(l.a), node(l.b));
        }
        // Number representatives in first-seen order, then sort by size.
        let mut rep_num = vec![u32::MAX; n];
        let mut raw = vec![0u32; n];
        let mut sizes: Vec<usize> = Vec::new();
        for (i, slot) in raw.iter_mut().enumerate() {
            let r = uf.find(i);
            if rep_num[r] == u32::MAX {
                rep_num[r] = sizes.len() as u32;
                sizes.push(0);
            }
            *slot = rep_num[r];
            sizes[rep_num[r] as usize] += 1;
        }
        let mut order: Vec<u32> = (0..sizes.len() as u32).collect();
        // Stable sort keeps first-seen order among equal sizes.
        order.sort_by(|a, b| sizes[*b as usize].cmp(&sizes[*a as usize]));
        let mut renum = vec![0u32; sizes.len()];
        for (new, old) in order.iter().enumerate() {
            renum[*old as usize] = new as u32;
        }
        let sorted_sizes = order.iter().map(|o| sizes[*o as usize]).collect();
        Components {
            of_switch: raw[..ns].iter().map(|c| renum[*c as usize]).collect(),
            of_end_port: raw[ns..].iter().map(|c| renum[*c as usize]).collect(),
            sizes: sorted_sizes,
        }
    }
}

impl fmt::Display for RoutingFabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let isl =
            self.links.iter().filter(|l| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..)))).count();
        write!(
            f,
            "{} switches, {} end ports, {} links ({} switch-to-switch), max LID {}",
            self.switches.len(),
            self.end_ports.len(),
            self.links.len(),
            isl,
            self.max_lid
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_switches() -> (FabricBuilder, SwitchId, SwitchId) {
        let mut b = RoutingFabric::builder();
        let s0 = b.add_switch(Switch::new(0x10, 4, 1)).unwrap();
        let s1 = b.add_switch(Switch::new(0x11, 4, 2)).unwrap();
        (b, s0, s1)
    }

    #[test]
    fn rejects_port_out_of_range_and_port_zero() {
        let (mut b, s0, s1) = two_switches();
        assert_eq!(
            b.connect(PortEnd::Switch(s0, 5), PortEnd::Switch(s1, 1)),
            Err(FabricError::PortOutOfRange { guid: 0x10, port: 5, num_ports: 4 })
        );
        assert_eq!(
            b.connect(PortEnd::Switch(s0, 1), PortEnd::Switch(s1, 0)),
            Err(FabricError::PortOutOfRange { guid: 0x11, port: 0, num_ports: 4 })
        );
        assert_eq!(
            b.connect(PortEnd::Switch(SwitchId(9), 1), PortEnd::Switch(s1, 1)),
            Err(FabricError::UnknownSwitch(SwitchId(9)))
        );
    }

    #[test]
    fn rejects_a_port_cabled_twice_and_self_links() {
        let (mut b, s0, s1) = two_switches();
        b.connect(PortEnd::Switch(s0, 1), PortEnd::Switch(s1, 1)).unwrap();
        assert_eq!(
            b.connect(PortEnd::Switch(s1, 2), PortEnd::Switch(s0, 1)),
            Err(FabricError::AlreadyCabled { end: PortEnd::Switch(s0, 1), peer: PortEnd::Switch(s1, 1) })
        );
        assert_eq!(
            b.connect(PortEnd::Switch(s0, 2), PortEnd::Switch(s0, 2)),
            Err(FabricError::SelfLink(PortEnd::Switch(s0, 2)))
        );
        // A failed connect must not half-cable: s1 port 2 is still free.
        b.connect(PortEnd::Switch(s1, 2), PortEnd::Switch(s0, 2)).unwrap();
        let f = b.build().unwrap();
        assert_eq!(f.switch_neighbors(s0).len(), 2, "parallel cables both listed");
        assert_eq!(f.switch_peer(s1, 2), Some(PortEnd::Switch(s0, 2)));
    }

    #[test]
    fn rejects_bad_nodes() {
        let mut b = RoutingFabric::builder();
        assert_eq!(b.add_switch(Switch::new(1, 0, 1)), Err(FabricError::BadPortCount { guid: 1, num_ports: 0 }));
        let mut sw = Switch::new(1, 8, 2);
        sw.lmc = 1;
        assert_eq!(b.add_switch(sw), Err(FabricError::LmcOnBasePort0 { guid: 1, lmc: 1 }));
        assert_eq!(
            b.add_end_port(EndPort::new(2, 3, 0, 5)),
            Err(FabricError::BadEndPortNumber { port_guid: 3, port_num: 0 })
        );
        assert_eq!(b.add_end_port(EndPort::new(2, 3, 1, 8).with_lmc(8)), Err(FabricError::BadLmc { guid: 3, lmc: 8 }));
    }

    #[test]
    fn build_checks_lid_plan() {
        let mut b = RoutingFabric::builder();
        b.add_switch(Switch::new(0x10, 4, 4)).unwrap();
        b.add_end_port(EndPort::new(0x20, 0x21, 1, 2).with_lmc(2)).unwrap();
        // LMC 2 needs a base LID that is a multiple of 4.
        assert_eq!(b.clone().build().unwrap_err(), FabricError::MisalignedLid { guid: 0x21, base_lid: 2, lmc: 2 });
        let mut b = RoutingFabric::builder();
        b.add_switch(Switch::new(0x10, 4, 5)).unwrap();
        b.add_end_port(EndPort::new(0x20, 0x21, 1, 4).with_lmc(2)).unwrap();
        assert_eq!(b.build().unwrap_err(), FabricError::LidConflict { lid: 5, first: 0x10, second: 0x21 });

        let mut b = RoutingFabric::builder();
        b.add_end_port(EndPort::new(0x20, 0x21, 1, 0xBFFE).with_lmc(1)).unwrap();
        assert!(b.clone().build().is_ok());
        b.add_end_port(EndPort::new(0x20, 0x22, 2, 0xBFFC).with_lmc(2)).unwrap();
        assert_eq!(b.build().unwrap_err(), FabricError::LidConflict { lid: 0xBFFE, first: 0x21, second: 0x22 });

        let mut b = RoutingFabric::builder();
        b.add_end_port(EndPort::new(0x20, 0x21, 1, 0xC000)).unwrap();
        assert_eq!(b.build().unwrap_err(), FabricError::LidOutOfRange { guid: 0x21, base_lid: 0xC000, lmc: 0 });

        let mut b = RoutingFabric::builder();
        b.add_switch(Switch::new(0x10, 4, 1)).unwrap();
        b.add_end_port(EndPort::new(0x10, 0x10, 1, 2)).unwrap();
        assert_eq!(b.build().unwrap_err(), FabricError::DuplicateGuid { guid: 0x10 });
    }

    #[test]
    fn lookups_and_components() {
        let mut b = RoutingFabric::builder();
        let s0 = b.add_switch(Switch::new(0x10, 4, 1)).unwrap();
        let s1 = b.add_switch(Switch::new(0x11, 4, 2)).unwrap();
        let s2 = b.add_switch(Switch::new(0x12, 4, 3)).unwrap();
        let h0 = b.add_end_port(EndPort::new(0x20, 0x21, 1, 4).with_lmc(1)).unwrap();
        let h1 = b.add_end_port(EndPort::new(0x30, 0x31, 1, 6)).unwrap();
        let h2 = b.add_end_port(EndPort::new(0x40, 0x41, 1, 0)).unwrap();
        b.connect(PortEnd::Switch(s0, 3), PortEnd::Switch(s1, 1)).unwrap();
        b.connect(PortEnd::Switch(s1, 2), PortEnd::Switch(s2, 1)).unwrap();
        b.connect(PortEnd::End(h0), PortEnd::Switch(s0, 1)).unwrap();
        b.connect(PortEnd::End(h1), PortEnd::End(h2)).unwrap();
        let f = b.build().unwrap();
        assert_eq!(f.max_lid(), 6);
        assert_eq!(f.lid_owner(5), Some(NodeRef::End(h0)));
        assert_eq!(f.lid_owner(7), None);
        assert_eq!(f.lid_owner(0), None);
        assert_eq!(f.attached_switch(h0), Some((s0, 1)));
        assert_eq!(f.attached_switch(h1), None);
        // h1 and h2 are cabled to each other, so only h0 counts.
        assert_eq!(f.end_ports_per_switch(), vec![1, 0, 0]);
        assert_eq!(f.switch_peer(s0, 0), None);
        assert_eq!(f.switch_peer(s0, 200), None);

        let mut dist = Vec::new();
        let mut q = Vec::new();
        f.switch_distances(s2, &mut dist, &mut q);
        assert_eq!(dist, vec![2, 1, 0]);

        let c = f.components();
        assert_eq!(c.sizes, vec![4, 2]);
        assert_eq!(c.of_switch, vec![0, 0, 0]);
        assert_eq!(c.of_end_port, vec![0, 1, 1]);
    }

    #[test]
    fn end_ports_per_switch_counts_each_cabled_end_port() {
        let mut b = RoutingFabric::builder();
        let s0 = b.add_switch(Switch::new(0x10, 4, 1)).unwrap();
        let s1 = b.add_switch(Switch::new(0x11, 4, 2)).unwrap();
        let h: Vec<EndPortId> =
            (0..4).map(|i| b.add_end_port(EndPort::new(0x20 + i, 0x30 + i, 1, 3 + i as u16)).unwrap()).collect();
        b.connect(PortEnd::Switch(s0, 1), PortEnd::Switch(s1, 1)).unwrap();
        b.connect(PortEnd::End(h[0]), PortEnd::Switch(s1, 2)).unwrap();
        b.connect(PortEnd::End(h[1]), PortEnd::Switch(s1, 3)).unwrap();
        b.connect(PortEnd::End(h[2]), PortEnd::Switch(s1, 4)).unwrap();
        // h[3] is not cabled.
        let f = b.build().unwrap();
        assert_eq!(f.end_ports_per_switch(), vec![0, 3]);
    }
}
