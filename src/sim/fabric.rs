//! The fabric's state: nodes, ports and switches in flat arenas indexed by
//! typed ids, built once from a [`Topology`].

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::engine::Scheduled;
use super::fault::{Rule, RuleHandle, Rules};
use super::profile::{self, PortKind};
use super::{DropReason, SimError};
use crate::mad::{AttributeId, Method, PhysState, PortInfoRepr, PortState, SmInfoRepr, SwitchInfoRepr};
use crate::topology::{NodeIdx, NodeKind, PortRef, Topology};
use crate::transport::Datagram;
use crate::types::{Guid, Lid};

/// A fabric shared by several [`super::SimDevice`]s.
pub type SharedFabric = Arc<Mutex<Fabric>>;

/// Index of a port in the flat port arena. Node `n`'s port `p` is
/// `nodes[n].port_base + p` (CAs keep an unused slot 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PortId(pub u32);

/// Index of a switch in the switch arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SwitchId(pub u32);

/// Index of an attached device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct DevId(pub u32);

pub(crate) const NO_PORT: u32 = u32::MAX;

pub(crate) struct SimNode {
    pub kind: NodeKind,
    pub name: String,
    pub description: String,
    pub guid: Guid,
    pub system_guid: Guid,
    pub num_ports: u8,
    pub port_base: u32,
    pub switch: Option<SwitchId>,
    pub enhanced_port0: bool,
    pub crashed: bool,
}

/// Tables a port keeps only once an SM wrote one of them; until then Gets
/// read the defaults.
#[derive(Clone)]
pub(crate) struct PortTables {
    pub pkeys: Vec<u16>,
    pub vlarb_high: [[u8; 2]; 8],
    pub vlarb_low: [[u8; 2]; 8],
    /// GUIDInfo entries 1.. (entry 0 is the port GUID, read-only).
    pub alias_guids: Vec<u64>,
    /// CA ports: the one SL-to-VL table.
    pub sl2vl: [u8; 8],
}

pub(crate) struct SimPort {
    pub node: u32,
    pub num: u8,
    pub kind: PortKind,
    /// The other end of the cable, NO_PORT if none.
    pub peer: u32,
    /// Unplugged by the fault API (`link_down`) until `link_up`.
    pub cut: bool,
    pub guid: Guid,
    pub pi: PortInfoRepr,
    /// When the M_Key lease runs out (IBA 14.2.4.2); None when not running.
    pub lease_deadline: Option<Duration>,
    /// Client reregistration requests seen (the bit itself reads back 0).
    pub reregistrations: u32,
    pub tables: Option<Box<PortTables>>,
}

pub(crate) struct SimSwitch {
    pub info: SwitchInfoRepr,
    /// Linear forwarding table; entries past the end are 0xFF (unrouted).
    pub lft: Vec<u8>,
    /// Multicast forwarding table, `position`-major blocks of 16-bit masks,
    /// allocated on first Set.
    pub mft: Vec<u16>,
    /// SL-to-VL tables per (input, output) port pair, allocated on first Set.
    pub sl2vl: Vec<[u8; 8]>,
}

pub(crate) struct DeviceSlot {
    pub port: PortId,
    pub mailbox: VecDeque<Datagram>,
    pub sm_info: Option<SmInfoRepr>,
    pub is_sm: bool,
    pub attached: bool,
}

/// Knobs of a fabric; see [`FabricBuilder`].
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub seed: u64,
    pub hop_latency: Duration,
    pub processing: Duration,
    pub linear_fdb_cap: u16,
    pub multicast_fdb_cap: u16,
    pub mtu_cap: Option<u8>,
}

/// Builds a [`Fabric`] from a topology (turmoil style: seeded, with the
/// time model set up front).
///
/// ```
/// # use ibsm::topology::*; use ibsm::sim::FabricBuilder; use std::time::Duration;
/// let topo = Topology::default();
/// let fabric = FabricBuilder::new(&topo).seed(42).hop_latency(Duration::from_micros(1)).build().unwrap();
/// assert_eq!(fabric.seed(), 42);
/// ```
pub struct FabricBuilder<'a> {
    topo: &'a Topology,
    cfg: Config,
}

impl<'a> FabricBuilder<'a> {
    pub fn new(topo: &'a Topology) -> Self {
        FabricBuilder {
            topo,
            cfg: Config {
                seed: 0,
                hop_latency: Duration::from_micros(1),
                processing: Duration::from_micros(2),
                linear_fdb_cap: profile::LINEAR_FDB_CAP,
                multicast_fdb_cap: profile::MULTICAST_FDB_CAP,
                mtu_cap: None,
            },
        }
    }
    /// Seeds every random choice (probabilistic drops).
    pub fn seed(mut self, seed: u64) -> Self {
        self.cfg.seed = seed;
        self
    }
    /// Virtual time a MAD takes to cross one link (default 1 µs).
    pub fn hop_latency(mut self, d: Duration) -> Self {
        self.cfg.hop_latency = d;
        self
    }
    /// Virtual time an SMA takes to answer (default 2 µs).
    pub fn processing_delay(mut self, d: Duration) -> Self {
        self.cfg.processing = d;
        self
    }
    /// SwitchInfo.LinearFDBCap of every switch (default 49152; ibsim 0.10
    /// reports 30720).
    pub fn linear_fdb_cap(mut self, cap: u16) -> Self {
        self.cfg.linear_fdb_cap = cap;
        self
    }
    /// SwitchInfo.MulticastFDBCap of every switch (default 1024, as ibsim).
    pub fn multicast_fdb_cap(mut self, cap: u16) -> Self {
        self.cfg.multicast_fdb_cap = cap;
        self
    }
    /// PortInfo.MTUCap of CA and switch external ports (an MTU code; ibsim
    /// reports 4 = 2048 bytes, real EDR/HDR hardware 5 = 4096).
    pub fn mtu_cap(mut self, code: u8) -> Self {
        self.cfg.mtu_cap = Some(code);
        self
    }

    pub fn build(self) -> Result<Fabric, SimError> {
        Fabric::from_topology(self.topo, self.cfg)
    }

    pub fn build_shared(self) -> Result<SharedFabric, SimError> {
        Ok(Arc::new(Mutex::new(self.build()?)))
    }
}

/// The simulated subnet. All times are virtual; nothing here sleeps.
pub struct Fabric {
    pub(crate) cfg: Config,
    pub(crate) nodes: Vec<SimNode>,
    pub(crate) ports: Vec<SimPort>,
    pub(crate) switches: Vec<SimSwitch>,
    pub(crate) now: Duration,
    pub(crate) queue: BinaryHeap<Scheduled>,
    pub(crate) seq: u64,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) rules: Rules,
    pub(crate) held: Vec<(RuleHandle, Scheduled)>,
    pub(crate) devices: Vec<DeviceSlot>,
    pub(crate) counts: HashMap<(AttributeId, Method), u64>,
    pub(crate) drops: HashMap<DropReason, u64>,
    /// Port -> devices attached there, in attach order.
    pub(crate) port_devices: HashMap<PortId, Vec<DevId>>,
    /// Misbehaving devices: bytes written over a node's answers to one
    /// attribute (node, attribute, offset in the SMP data, bytes).
    pub(crate) answer_patches: Vec<(NodeIdx, AttributeId, usize, Vec<u8>)>,
    /// Real-time pacing: virtual time may not run ahead of the real time
    /// elapsed since (real start, virtual start).
    pub(crate) pace: Option<(std::time::Instant, Duration)>,
    /// Every node's PerfMgt agent: port counters (src/sim/pma.rs).
    pub(crate) pma: super::pma::Pma,
    /// LFT blocks written, in the order they landed, while recording.
    pub(crate) lft_log: Option<Vec<(NodeIdx, u32, [u8; 64])>>,
}

impl Fabric {
    fn from_topology(topo: &Topology, cfg: Config) -> Result<Fabric, SimError> {
        let mut nodes = Vec::with_capacity(topo.nodes.len());
        let mut switches = Vec::new();
        let total_ports: usize = topo.nodes.iter().map(|n| n.num_ports as usize + 1).sum();
        if total_ports >= NO_PORT as usize {
            return Err(SimError::TooLarge { ports: total_ports });
        }
        let mut ports = Vec::with_capacity(total_ports);
        for (i, n) in topo.nodes.iter().enumerate() {
            let port_base = ports.len() as u32;
            let switch = (n.kind == NodeKind::Switch).then(|| {
                switches.push(SimSwitch {
                    info: profile::fresh_switch_info(cfg.linear_fdb_cap, cfg.multicast_fdb_cap, n.enhanced_port0),
                    lft: Vec::new(),
                    mft: Vec::new(),
                    sl2vl: Vec::new(),
                });
                SwitchId(switches.len() as u32 - 1)
            });
            for p in 0..=n.num_ports {
                let kind = match (n.kind, p) {
                    (NodeKind::Switch, 0) => PortKind::SwitchManagement,
                    (NodeKind::Switch, _) => PortKind::SwitchExternal,
                    (_, 0) => PortKind::Absent,
                    _ => PortKind::EndPort,
                };
                ports.push(SimPort {
                    node: i as u32,
                    num: p,
                    kind,
                    peer: NO_PORT,
                    cut: false,
                    guid: n.port_guid(p),
                    pi: profile::fresh_port_info(kind, false, cfg.mtu_cap),
                    lease_deadline: None,
                    reregistrations: 0,
                    tables: None,
                });
            }
            nodes.push(SimNode {
                kind: n.kind,
                name: n.name.clone(),
                description: n.description.clone(),
                guid: n.node_guid,
                system_guid: n.system_guid,
                num_ports: n.num_ports,
                port_base,
                switch,
                enhanced_port0: n.enhanced_port0,
                crashed: false,
            });
        }
        let mut f = Fabric {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            nodes,
            ports,
            switches,
            now: Duration::ZERO,
            queue: BinaryHeap::new(),
            seq: 0,
            rules: Rules::default(),
            held: Vec::new(),
            devices: Vec::new(),
            counts: HashMap::new(),
            answer_patches: Vec::new(),
            pace: None,
            drops: HashMap::new(),
            port_devices: HashMap::new(),
            pma: Default::default(),
            lft_log: None,
        };
        for (li, l) in topo.links.iter().enumerate() {
            let a = f.cable_end(li, l.a)?;
            let b = f.cable_end(li, l.b)?;
            if a == b {
                return Err(SimError::BadLink { link: li, end: l.a, reason: "both ends are the same port" });
            }
            f.ports[a.0 as usize].peer = b.0;
            f.ports[b.0 as usize].peer = a.0;
            for (me, w, s) in [(a, l.width, l.speed), (b, l.width, l.speed)] {
                let pi = &mut f.ports[me.0 as usize].pi;
                pi.link_width_enabled = if w == 0 { pi.link_width_enabled } else { w };
                // The cable's speed is what both ends enable, as ibsim does
                // for a `s=` port option (the topology writer's output).
                if s != 0 {
                    pi.link_speed_enabled = s;
                }
            }
            // Speeds beyond QDR: both ends support and enable the cable's,
            // and the node says so in its capabilities (a switch at port
            // 0, which speaks for its external ports).
            if l.ext_speed != 0 {
                for me in [a, b] {
                    profile::enable_ext_speed(&mut f.ports[me.0 as usize].pi, l.ext_speed);
                    let caps = f.mgmt_port(me);
                    profile::advertise_ext_speed(&mut f.ports[caps.0 as usize].pi, l.ext_speed);
                }
            }
            f.train(a, b);
        }
        Ok(f)
    }

    /// Checks one end of link `li` and returns its port.
    fn cable_end(&self, li: usize, end: PortRef) -> Result<PortId, SimError> {
        let Some(n) = self.nodes.get(end.node.0) else {
            return Err(SimError::BadLink { link: li, end, reason: "no such node" });
        };
        if end.port == 0 || end.port > n.num_ports {
            return Err(SimError::BadLink {
                link: li,
                end,
                reason: "no such port (cables attach to ports 1..=NumPorts)",
            });
        }
        let id = PortId(n.port_base + end.port as u32);
        if self.ports[id.0 as usize].peer != NO_PORT {
            return Err(SimError::BadLink { link: li, end, reason: "port already cabled" });
        }
        Ok(id)
    }

    // ---- arena helpers -------------------------------------------------

    pub(crate) fn port(&self, id: PortId) -> &SimPort {
        &self.ports[id.0 as usize]
    }
    pub(crate) fn port_mut(&mut self, id: PortId) -> &mut SimPort {
        &mut self.ports[id.0 as usize]
    }
    pub(crate) fn node_of(&self, id: PortId) -> &SimNode {
        &self.nodes[self.ports[id.0 as usize].node as usize]
    }
    pub(crate) fn port_id(&self, node: u32, num: u8) -> PortId {
        PortId(self.nodes[node as usize].port_base + num as u32)
    }
    /// The port a switch's SMA and LID live on (port 0), or `id` itself for
    /// an end port.
    pub(crate) fn mgmt_port(&self, id: PortId) -> PortId {
        let p = self.port(id);
        match p.kind {
            PortKind::SwitchExternal | PortKind::SwitchManagement => self.port_id(p.node, 0),
            _ => id,
        }
    }
    pub(crate) fn switch_of(&self, node: u32) -> Option<&SimSwitch> {
        self.nodes[node as usize].switch.map(|s| &self.switches[s.0 as usize])
    }
    pub(crate) fn switch_mut(&mut self, node: u32) -> Option<&mut SimSwitch> {
        self.nodes[node as usize].switch.map(|s| &mut self.switches[s.0 as usize])
    }
    /// The port behind a topology reference, if the node and port exist.
    pub(crate) fn resolve(&self, r: PortRef) -> Result<PortId, SimError> {
        let n = self.nodes.get(r.node.0).ok_or(SimError::NoSuchNode(format!("#{}", r.node.0)))?;
        let first = if n.kind == NodeKind::Switch { 0 } else { 1 };
        if r.port < first || r.port > n.num_ports {
            return Err(SimError::NoSuchPort { node: r.node, port: r.port });
        }
        Ok(PortId(n.port_base + r.port as u32))
    }
    pub(crate) fn port_ref(&self, id: PortId) -> PortRef {
        let p = self.port(id);
        PortRef { node: NodeIdx(p.node as usize), port: p.num }
    }

    /// Whether the physical link behind `id` carries packets: both ends
    /// LinkUp on live nodes.
    pub(crate) fn live_peer(&self, id: PortId) -> Option<PortId> {
        let p = self.port(id);
        if p.peer == NO_PORT || p.pi.port_physical_state != PhysState::LinkUp {
            return None;
        }
        let q = self.port(PortId(p.peer));
        if q.pi.port_physical_state != PhysState::LinkUp
            || self.nodes[q.node as usize].crashed
            || self.nodes[p.node as usize].crashed
        {
            return None;
        }
        Some(PortId(p.peer))
    }

    /// Whether a cable at `id` would train: cabled, not unplugged, neither
    /// end disabled, both nodes alive.
    pub(crate) fn can_train(&self, id: PortId) -> Option<PortId> {
        let p = self.port(id);
        if p.peer == NO_PORT || p.cut || p.pi.port_physical_state == PhysState::Disabled {
            return None;
        }
        let q = self.port(PortId(p.peer));
        if q.cut
            || q.pi.port_physical_state == PhysState::Disabled
            || self.nodes[q.node as usize].crashed
            || self.nodes[p.node as usize].crashed
        {
            return None;
        }
        Some(PortId(p.peer))
    }

    /// Brings the link a-b up to Init/LinkUp, training width and speed from
    /// both ends' enabled masks. LIDs and other settings stay.
    pub(crate) fn train(&mut self, a: PortId, b: PortId) {
        let (wa, sa) = (self.port(a).pi.link_width_enabled, self.port(a).pi.link_speed_enabled);
        let (wb, sb) = (self.port(b).pi.link_width_enabled, self.port(b).pi.link_speed_enabled);
        let width = profile::train_width(wa, wb);
        let speed = profile::train_speed(sa, sb);
        let ext_of = |p: &SimPort| (p.pi.link_speed_ext_enabled, p.pi.link_speed_ext_enabled2);
        let (ext, ext2) = profile::train_ext_speed(ext_of(self.port(a)), ext_of(self.port(b)));
        for id in [a, b] {
            let p = self.port_mut(id);
            let fresh_cap = p.kind == PortKind::EndPort;
            p.pi.port_state = PortState::Init;
            p.pi.port_physical_state = PhysState::LinkUp;
            p.pi.link_width_active = width;
            p.pi.link_speed_active = speed;
            p.pi.link_speed_ext_active = ext;
            p.pi.link_speed_ext_active2 = ext2;
            p.pi.local_phy_errors = 0;
            if fresh_cap {
                p.pi.capability_mask |= crate::mad::port_info::CapabilityMask::IS_CAPABILITY_MASK_NOTICE_SUPPORTED;
            }
        }
    }

    /// Takes the port's link down: `id` goes Down with `phys`, its peer (if
    /// any) Down/Polling.
    pub(crate) fn drop_link(&mut self, id: PortId, phys: PhysState) -> Option<PortId> {
        let peer = self.port(id).peer;
        let p = self.port_mut(id);
        p.pi.port_state = PortState::Down;
        p.pi.port_physical_state = phys;
        if peer == NO_PORT {
            return None;
        }
        let q = self.port_mut(PortId(peer));
        if q.pi.port_physical_state != PhysState::Disabled {
            q.pi.port_state = PortState::Down;
            q.pi.port_physical_state = PhysState::Polling;
        }
        Some(PortId(peer))
    }

    // ---- lookups -------------------------------------------------------

    /// The node with this name (the topology's unique name).
    pub fn node_by_name(&self, name: &str) -> Option<NodeIdx> {
        self.nodes.iter().position(|n| n.name == name).map(NodeIdx)
    }
    /// The node with this node GUID, or owning this port GUID.
    pub fn node_by_guid(&self, guid: Guid) -> Option<NodeIdx> {
        if let Some(i) = self.nodes.iter().position(|n| n.guid == guid) {
            return Some(NodeIdx(i));
        }
        self.ports.iter().find(|p| p.kind != PortKind::Absent && p.guid == guid).map(|p| NodeIdx(p.node as usize))
    }
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }
    /// The seed every random choice comes from.
    pub fn seed(&self) -> u64 {
        self.cfg.seed
    }
    /// Current virtual time; when paced, never behind real time.
    pub fn now(&self) -> Duration {
        self.paced_now().map_or(self.now, |paced| self.now.max(paced))
    }

    /// Paced: the virtual time real time has reached.
    pub(crate) fn paced_now(&self) -> Option<Duration> {
        self.pace.map(|(real, virt)| virt + real.elapsed())
    }

    /// Paces virtual time to real time from now on: a device's `recv` then
    /// waits in real time instead of jumping to its deadline, and the clock
    /// moves on with real time while every device is idle. Needed when
    /// several SMs, each on its own I/O thread, share the fabric: without
    /// it one SM's wait for a timeout runs the clock past the moment another
    /// SM would have answered it.
    pub fn pace_to_real_time(&mut self) {
        self.pace = Some((std::time::Instant::now(), self.now));
    }

    /// The latest virtual time a device may wait to: its deadline, or less
    /// when paced.
    pub(crate) fn wait_bound(&self, deadline: Duration) -> Duration {
        self.paced_now().map_or(deadline, |paced| deadline.min(paced))
    }

    // ---- introspection for tests --------------------------------------

    /// PortInfo.PortState of a port.
    pub fn port_state(&self, r: PortRef) -> Result<PortState, SimError> {
        Ok(self.port(self.resolve(r)?).pi.port_state)
    }
    /// PortInfo.PortPhysicalState of a port.
    pub fn phys_state(&self, r: PortRef) -> Result<PhysState, SimError> {
        Ok(self.port(self.resolve(r)?).pi.port_physical_state)
    }
    /// The port's whole PortInfo as its SMA would report it (LocalPortNum =
    /// the port itself).
    pub fn port_info(&self, r: PortRef) -> Result<PortInfoRepr, SimError> {
        let id = self.resolve(r)?;
        let mut pi = self.port(id).pi;
        pi.local_port_num = r.port;
        Ok(pi)
    }
    /// Gives one port a smaller (or larger) PortInfo.MTUCap than the
    /// fabric's, as an older device would have: SMs read it at the next
    /// sweep. The NeighborMTU the port holds drops to the new cap if above.
    pub fn set_mtu_cap(&mut self, r: PortRef, code: u8) -> Result<(), SimError> {
        let id = self.resolve(r)?;
        let pi = &mut self.port_mut(id).pi;
        pi.mtu_cap = code;
        pi.neighbor_mtu = pi.neighbor_mtu.min(code);
        Ok(())
    }
    /// Adds or removes PortInfo.CapabilityMask bits on one port (a switch's
    /// port 0 for switch-wide capabilities such as
    /// IsMulticastFDBTopSupported), as a device with other firmware would
    /// report: SMs read it at the next sweep.
    pub fn set_capability(&mut self, r: PortRef, bits: u32, on: bool) -> Result<(), SimError> {
        let id = self.resolve(r)?;
        let pi = &mut self.port_mut(id).pi;
        if on {
            pi.capability_mask |= bits;
        } else {
            pi.capability_mask &= !bits;
        }
        Ok(())
    }
    /// The LID a port answers to: a switch's ports all report port 0's.
    pub fn lid_of(&self, r: PortRef) -> Result<Lid, SimError> {
        let id = self.resolve(r)?;
        Ok(self.port(self.mgmt_port(id)).pi.lid)
    }
    /// The port (CA port or switch port 0) whose LID range holds `lid`.
    pub fn port_by_lid(&self, lid: Lid) -> Option<PortRef> {
        self.ports
            .iter()
            .enumerate()
            .find(|(_, p)| {
                matches!(p.kind, PortKind::EndPort | PortKind::SwitchManagement)
                    && profile::lid_in_range(p.pi.lid, self.effective_lmc(p), lid)
            })
            .map(|(i, _)| self.port_ref(PortId(i as u32)))
    }
    pub(crate) fn effective_lmc(&self, p: &SimPort) -> u8 {
        match p.kind {
            PortKind::SwitchManagement if !self.nodes[p.node as usize].enhanced_port0 => 0,
            _ => p.pi.lmc,
        }
    }
    /// Records every LFT block written from now on, in the order the
    /// blocks land ([`Fabric::take_lft_log`]).
    pub fn record_lft_sets(&mut self) {
        self.lft_log = Some(Vec::new());
    }

    /// The LFT blocks written since [`Fabric::record_lft_sets`] (switch,
    /// block, contents), in the order they landed; recording stops.
    pub fn take_lft_log(&mut self) -> Vec<(NodeIdx, u32, [u8; 64])> {
        self.lft_log.take().unwrap_or_default()
    }

    /// A switch's linear forwarding table; entries past the slice read as
    /// 0xFF (unrouted). None for a node that is not a switch.
    pub fn lft(&self, switch: NodeIdx) -> Option<&[u8]> {
        self.nodes.get(switch.0)?;
        self.switch_of(switch.0 as u32).map(|s| &s.lft[..])
    }
    /// One LFT entry (None when unrouted, or not a switch).
    pub fn lft_port(&self, switch: NodeIdx, lid: Lid) -> Option<u8> {
        let t = self.lft(switch)?;
        t.get(lid.0 as usize).copied().filter(|&p| p != 0xff)
    }
    /// A switch's SL-to-VL table for (input port, output port), as its SMA
    /// would report it (None when not a switch or a port is out of range).
    pub fn switch_sl2vl(&self, switch: NodeIdx, in_port: u8, out_port: u8) -> Option<crate::mad::SlToVlTableRepr> {
        use crate::mad::SmpAttribute as _;
        let node = self.nodes.get(switch.0)?;
        let n = usize::from(node.num_ports) + 1;
        let (i, o) = (usize::from(in_port), usize::from(out_port));
        if i >= n || o >= n {
            return None;
        }
        let sw = self.switch_of(switch.0 as u32)?;
        let packed = sw.sl2vl.get(i * n + o).copied().unwrap_or(profile::DEFAULT_SL2VL);
        let mut data = [0u8; 64];
        data[..8].copy_from_slice(&packed);
        crate::mad::SlToVlTableRepr::parse_data(&data).ok()
    }
    /// A switch's SwitchInfo as its SMA would report it.
    pub fn switch_info(&self, switch: NodeIdx) -> Option<SwitchInfoRepr> {
        self.nodes.get(switch.0)?;
        self.switch_of(switch.0 as u32).map(|s| s.info)
    }
    /// A port's P_Key table (PartitionCap or PartitionEnforcementCap entries).
    pub fn pkeys(&self, r: PortRef) -> Result<Vec<u16>, SimError> {
        let id = self.resolve(r)?;
        Ok(self.pkey_table(id))
    }
    /// How many SMP requests with this attribute and method reached an SMA
    /// or SM (dropped ones, e.g. by M_Key, included).
    pub fn smp_count(&self, attr: AttributeId, method: Method) -> u64 {
        self.counts.get(&(attr, method)).copied().unwrap_or(0)
    }
    /// Every (attribute, method) count.
    pub fn smp_counts(&self) -> &HashMap<(AttributeId, Method), u64> {
        &self.counts
    }
    /// MADs lost for `reason` so far.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops.get(&reason).copied().unwrap_or(0)
    }
    /// Times the port was asked to reregister its clients (ClientReregister
    /// set in a SubnSet(PortInfo)).
    pub fn client_reregistrations(&self, r: PortRef) -> Result<u32, SimError> {
        Ok(self.port(self.resolve(r)?).reregistrations)
    }
    /// Whether the node is crashed.
    pub fn is_crashed(&self, node: NodeIdx) -> bool {
        self.nodes.get(node.0).is_some_and(|n| n.crashed)
    }

    pub(crate) fn count_drop(&mut self, reason: DropReason) {
        *self.drops.entry(reason).or_default() += 1;
    }

    // ---- fault rules ---------------------------------------------------

    /// Appends a rule (evaluated after those already installed).
    /// Makes `node` a misbehaving device: from now on its answers to
    /// `attribute` carry `bytes` at `offset` of the SMP data (e.g. a
    /// SwitchInfo with LinearFDBCap 0, a NodeInfo with 255 ports).
    pub fn corrupt_answers(&mut self, node: NodeIdx, attribute: AttributeId, offset: usize, bytes: &[u8]) {
        self.answer_patches.push((node, attribute, offset, bytes.to_vec()));
    }

    pub fn add_rule(&mut self, rule: Rule) -> RuleHandle {
        self.rules.push(rule)
    }
    /// Removes a rule; MADs it held are released at the current time.
    pub fn remove_rule(&mut self, h: RuleHandle) -> bool {
        let removed = self.rules.remove(h);
        self.release_held(h);
        removed
    }
    /// Holds every MAD addressed to (or answered by) `node` until
    /// [`Fabric::release`]; takes precedence over installed rules.
    pub fn hold(&mut self, node: NodeIdx) -> RuleHandle {
        self.rules.push_front(Rule::hold(super::fault::Match::any().node(node)))
    }
    /// Ends a hold: the rule goes and its parked MADs move on, in the order
    /// they arrived, as of now.
    pub fn release(&mut self, h: RuleHandle) {
        self.remove_rule(h);
    }
    /// MADs parked by hold rules.
    pub fn held_count(&self) -> usize {
        self.held.len()
    }
}

impl PortTables {
    pub(crate) fn new(pkey_cap: usize, guid_cap: usize) -> Self {
        let mut pkeys = vec![0u16; pkey_cap];
        if let Some(first) = pkeys.first_mut() {
            *first = crate::mad::pkey_table::DEFAULT_PKEY;
        }
        PortTables {
            pkeys,
            vlarb_high: profile::DEFAULT_VLARB_HIGH,
            vlarb_low: profile::DEFAULT_VLARB_LOW,
            alias_guids: vec![0; guid_cap.saturating_sub(1)],
            sl2vl: profile::DEFAULT_SL2VL,
        }
    }
}
