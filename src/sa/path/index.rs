//! [`PathIndex`]: the ports of one sweep, laid out for lookups: what
//! PathRecord queries need and the walk along the programmed forwarding
//! tables, and the SA's own port table (who a requester's LID names, who
//! is in service, whose registrations stay) over the same end ports.

use std::collections::HashMap;
use std::sync::Arc;

use super::rate;
use crate::mad::{PortInfoRepr, PortState};
use crate::sa::index::{PortAt, DEFAULT_SUBNET_PREFIX};
use crate::subnet::{NodeId, SweepReport};
use crate::types::{Guid, Lid};

/// Most links a route may cross before the walk calls it a loop (the
/// directed-route limit, IBA 14.2.1.2; OpenSM's PathRecord uses 64 too).
pub const MAX_HOPS: u8 = 64;

/// No end port at this LID.
const NONE: u32 = u32::MAX;

/// One end of a cable, as the sweep left it.
#[derive(Debug, Clone, Copy, Default)]
struct LinkEnd {
    /// (node index, port) at the other end.
    remote: Option<(u32, u8)>,
    /// PortState is Active.
    active: bool,
    /// MTU code the port carries ([`rate::port_mtu`]).
    mtu: u8,
    /// Rate code of its link ([`rate::port_rate`]).
    rate: u8,
}

#[derive(Debug, Clone)]
struct SwitchEntry {
    /// Output port per LID, as programmed: the snapshot's own table,
    /// shared, never copied.
    lft: Arc<Vec<u8>>,
    /// This switch's index in the routing engine's view (for path SLs).
    routed: Option<u32>,
}

#[derive(Debug, Clone)]
struct NodeEntry {
    switch: Option<SwitchEntry>,
    /// By port number; index 0 unused for CAs.
    ports: Vec<LinkEnd>,
}

/// A port with LIDs: a CA or router port, or a switch's port 0.
#[derive(Debug, Clone, Copy)]
pub struct EndPort {
    pub node: u32,
    pub port: u8,
    pub guid: Guid,
    pub gid_prefix: u64,
    pub base_lid: Lid,
    pub lmc: u8,
    /// Whether the node is a switch (then `port` is 0).
    pub is_switch: bool,
    /// CapabilityMask and CapabilityMask2 (of port 0 for a switch): which
    /// rate codes the port knows ([`rate::port_knows_rate`]).
    pub caps: PortInfoRepr,
    /// MTUCap: what a loopback path, or a path ending at a switch's port 0,
    /// carries at this end.
    pub mtu_cap: u8,
    /// The rate of the port's own link (a loopback path's rate).
    pub rate: u8,
    /// Where the port's P_Keys sit in the index's pool
    /// ([`PathIndex::pkeys`]): start and count.
    pkeys: (u32, u16),
    /// In the SA's port table: the node is not quarantined. Paths still
    /// reach a quarantined node's port where the forwarding tables lead;
    /// the SA does not take it for a requester nor keep its registrations.
    listed: bool,
}

impl EndPort {
    /// The 2^LMC LIDs the port answers to.
    pub fn lids(&self) -> impl Iterator<Item = Lid> + Clone {
        let base = self.base_lid.0;
        (0..1u16 << self.lmc.min(7)).map(move |i| Lid(base + i))
    }
    pub fn owns(&self, lid: Lid) -> bool {
        lid.0 >= self.base_lid.0 && u32::from(lid.0) < u32::from(self.base_lid.0) + (1u32 << self.lmc.min(7))
    }

    /// The port's GID: the subnet prefix it holds, then its port GUID.
    pub fn gid(&self) -> [u8; 16] {
        crate::sa::index::gid(self.gid_prefix, self.guid)
    }
}

/// A route the forwarding tables make from an end port to a LID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The end port reached.
    pub dest: u32,
    /// Links crossed (0 for loopback).
    pub hops: u8,
    /// Smallest MTU code of every port on the way.
    pub mtu: u8,
    /// Slowest rate code of every link crossed.
    pub rate: u8,
}

/// Why a route does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// A switch on the way has no forwarding table (not routed, quarantined).
    NoTable { node: u32 },
    /// The table has no usable port for the LID (0xFF, beyond the table, or
    /// a port the switch lacks).
    Unrouted { node: u32, port: u8 },
    /// A link on the way is uncabled or not Active at one end.
    Down { node: u32, port: u8 },
    /// The route reaches a port that does not own the LID.
    WrongEnd { node: u32, port: u8 },
    /// More than [`MAX_HOPS`] links: a loop.
    Loop,
}

/// Everything PathRecord and MultiPathRecord queries need from one sweep,
/// and the SA's port table over the same end ports (`port_by_lid`
/// and the rest: no second table of the ports per snapshot).
///
/// Built once per snapshot in O(nodes + ports + top LID) time: end ports
/// by LID (a dense table over the assigned LIDs, so a LID is one index),
/// by port GUID and by alias GUID (hash maps), each cabled port's MTU, rate
/// and state, and every switch's forwarding table, shared with the
/// snapshot (`SweptRoutes::lfts` holds them behind an `Arc`), so the index
/// adds no copy of the largest part (switches × top LID bytes). A query
/// then walks one route in O(hops) per (SLID, DLID) pair.
#[derive(Debug, Clone, Default)]
pub struct PathIndex {
    nodes: Vec<NodeEntry>,
    ends: Vec<EndPort>,
    by_lid: Vec<u32>,
    by_guid: HashMap<Guid, u32>,
    /// Alias GUIDs (additional port GUIDs, IBA 15.2.5.18) to their end port.
    by_alias: HashMap<Guid, u32>,
    path_sl: Option<ibsm_routing::lft::PathSl>,
    /// Every end port's P_Keys, one run per port ([`EndPort::pkeys`]),
    /// each in [`pkey_order`].
    pkey_pool: Vec<u16>,
    /// The SA's port table, in GUID order: (GUID, SA port number), where
    /// a number below `ends.len()` is that end port (a listed one) and
    /// `ends.len() + k` is `unread[k]`. Of two ports with one GUID the
    /// later in the sweep's order holds it.
    sa_by_guid: Vec<(Guid, u32)>,
    /// LID-bearing ports without PortInfo (a switch whose port 0 was not
    /// read): no path ends there, but the SA's table holds them.
    unread: Vec<PortAt>,
    /// LIDs the SA's table gives another port than `by_lid` does (an
    /// unread port's, or where ranges overlap: ports with one GUID); empty
    /// in a fabric of distinct GUIDs, so a lookup costs one index.
    sa_lid_fixups: HashMap<u16, u32>,
    /// Every route from a switch a CA is cabled to, walked once per
    /// snapshot ([`RouteTable`]).
    routes: RouteTable,
}

/// The most cells a [`RouteTable`] may hold (4 bytes each): 64 MiB, which
/// the 11,664-host fat tree (648 leaf switches, 13,000 LIDs) fits in half.
/// A larger fabric's queries walk the tables.
const ROUTE_TABLE_CELLS: usize = 16 << 20;

/// Where a route goes from each switch that CAs are cabled to, for every
/// LID: a PathRecord between two CAs is then its two cables and two table
/// cells, with no walk through the forwarding tables (the walk stays the
/// definition, and answers what the table does not hold: a route that is
/// broken, a source at a switch's port 0).
///
/// A cell packs the route from the switch on: [`CELL_OK`], then the links
/// crossed (bits 0-7), the smallest MTU (8-15) and the slowest rate
/// (16-23). Zero: broken, or too long; the walk says why. Rates of one
/// speed with different codes keep the walk's choice: both take the first
/// link, in route order, of the slowest speed ([`rate::slower`] keeps its
/// first argument on a tie).
#[derive(Debug, Clone, Default)]
struct RouteTable {
    /// Per node: its row, or [`NONE`].
    row_of: Vec<u32>,
    /// Row by row, `width` cells each: one per LID below the top one.
    cells: Vec<u32>,
    width: usize,
}

const CELL_OK: u32 = 1 << 31;

fn cell(hops: u8, mtu: u8, rate: u8) -> u32 {
    CELL_OK | u32::from(hops) | u32::from(mtu) << 8 | u32::from(rate) << 16
}

/// (hops, MTU, rate) of a cell that is not zero.
fn uncell(c: u32) -> (u8, u8, u8) {
    (c as u8, (c >> 8) as u8, (c >> 16) as u8)
}

/// A switch's first step toward a LID, for [`RouteTable::build`].
enum Step {
    /// The route ends here or at the next port: its cell (0 if broken).
    Ends(u32),
    /// On to switch `next` (its node), across a link that carries `mtu`
    /// and `rate`.
    Next { next: u32, mtu: u8, rate: u8 },
}

/// The default P_Key, full member: what a port whose table the sweep does
/// not know is taken to hold.
const DEFAULT_PKEYS: [u16; 1] = [0xFFFF];

/// The order of a port's P_Keys in the index: by partition (the low 15
/// bits), the full-member key before the limited one. The first key two
/// ports share is then the lowest partition they share, as OpenSM's
/// `osm_physp_find_common_pkey` walks its tables, and a port holding both
/// keys of a partition offers the full one.
pub fn pkey_order(k: u16) -> (u16, bool) {
    (k & 0x7FFF, k & 0x8000 == 0)
}

/// The valid keys of a P_Key table (IBA 10.9.1: the low 15 bits name the
/// partition, bit 15 says full member; 0 and 0x8000 are empty entries), in
/// [`pkey_order`], each once.
fn sorted_keys(blocks: &[crate::mad::PKeyTableBlockRepr]) -> Vec<u16> {
    let mut keys: Vec<u16> = blocks.iter().flat_map(|b| b.pkeys).filter(|k| k & 0x7FFF != 0).collect();
    keys.sort_unstable_by_key(|&k| pkey_order(k));
    keys.dedup();
    keys
}

impl PathIndex {
    /// Lays out `report` for path queries. LIDs are the sweep's assignment
    /// (`report.lids`), ports as the sweep last read them (after its Sets),
    /// routes as it programmed them (`report.routes`), alias GUIDs as the
    /// ports hold them (`report.program.alias_guids`; the SA puts its own
    /// registry in their place, [`Self::set_aliases`]).
    pub fn build(report: &SweepReport) -> PathIndex {
        let subnet = &report.subnet;
        let routed: HashMap<Guid, u32> =
            report.routes.switches.iter().enumerate().map(|(i, &g)| (g, i as u32)).collect();
        let mut nodes = Vec::with_capacity(subnet.nodes.len());
        for node in &subnet.nodes {
            // A switch's capabilities live at its port 0.
            let caps0 = node.ports.first().and_then(|p| p.info);
            let ports = node
                .ports
                .iter()
                .enumerate()
                .map(|(num, slot)| match (&slot.info, num) {
                    (Some(pi), n) if n > 0 => {
                        let caps = if node.is_switch() { caps0.as_ref().unwrap_or(pi) } else { pi };
                        LinkEnd {
                            remote: slot.remote.map(|(id, p)| (id.0, p)),
                            active: pi.port_state == PortState::Active,
                            mtu: rate::port_mtu(pi),
                            rate: rate::port_rate(pi, caps),
                        }
                    }
                    _ => LinkEnd { remote: slot.remote.map(|(id, p)| (id.0, p)), ..LinkEnd::default() },
                })
                .collect();
            let switch = node.is_switch().then(|| SwitchEntry {
                lft: report.routes.lfts.get(&node.guid()).map(Arc::clone).unwrap_or_default(),
                routed: routed.get(&node.guid()).copied(),
            });
            nodes.push(NodeEntry { switch, ports });
        }

        let mut ends = Vec::new();
        let mut pkey_pool = Vec::new();
        let mut unread = Vec::new();
        // The SA's ports in the sweep's order: (an end port, its index in
        // `ends` before the sort or in `unread`).
        let mut listed = Vec::new();
        for (id, port) in subnet.lid_ports() {
            let node = subnet.node(id);
            let guid = node.port_guid(port);
            let Some(range) = report.lids.ranges.get(&guid) else { continue };
            let Some(pi) = node.ports.get(port as usize).and_then(|p| p.info.as_ref()) else {
                if node.quarantined.is_none() {
                    listed.push((false, unread.len()));
                    unread.push(PortAt {
                        guid,
                        node: id,
                        port,
                        base_lid: range.base(),
                        lmc: range.lmc(),
                        gid_prefix: DEFAULT_SUBNET_PREFIX,
                        // A switch's port 0 is in service while the switch
                        // has a LID.
                        active: node.is_switch(),
                    });
                }
                continue;
            };
            if node.quarantined.is_none() {
                listed.push((true, ends.len()));
            }
            let caps = if node.is_switch() { node.ports.first().and_then(|p| p.info).unwrap_or(*pi) } else { *pi };
            let own_rate = rate::port_rate(pi, &caps);
            // Every block of the table as the sweep left it; a port whose
            // table is unknown (a read that failed) holds the default
            // P_Key for paths (`DEFAULT_PKEYS`).
            let keys = report.program.pkey_blocks.get(&(node.guid(), port)).map(|t| sorted_keys(t));
            let pkeys = match keys {
                Some(k) => {
                    let at = (pkey_pool.len() as u32, k.len().min(usize::from(u16::MAX)) as u16);
                    pkey_pool.extend(k.into_iter().take(usize::from(u16::MAX)));
                    at
                }
                None => (u32::MAX, 0),
            };
            ends.push(EndPort {
                node: id.0,
                port,
                guid,
                gid_prefix: pi.gid_prefix,
                base_lid: range.base(),
                lmc: range.lmc(),
                is_switch: node.is_switch(),
                caps,
                mtu_cap: if rate::is_mtu(pi.mtu_cap) { pi.mtu_cap } else { rate::MTU_MIN },
                rate: own_rate,
                pkeys,
                listed: node.quarantined.is_none(),
            });
        }
        // By base LID, stable (ports of one base LID keep the sweep's
        // order); `moved_to` says where each went, for the SA's table.
        let mut order: Vec<u32> = (0..ends.len() as u32).collect();
        order.sort_by_key(|&k| ends[k as usize].base_lid);
        let mut moved_to = vec![0u32; ends.len()];
        for (to, &from) in order.iter().enumerate() {
            moved_to[from as usize] = to as u32;
        }
        let ends: Vec<EndPort> = order.iter().map(|&k| ends[k as usize]).collect();
        let n = ends.len() as u32;
        let sa_order: Vec<u32> = listed.iter().map(|&(end, k)| if end { moved_to[k] } else { n + k as u32 }).collect();
        let top = ends.iter().map(|e| u32::from(e.base_lid.0) + (1u32 << e.lmc.min(7))).max().unwrap_or(0);
        let mut by_lid = vec![NONE; top as usize];
        let mut by_guid = HashMap::with_capacity(ends.len());
        for (i, e) in ends.iter().enumerate() {
            for lid in e.lids() {
                by_lid[lid.0 as usize] = i as u32;
            }
            by_guid.insert(e.guid, i as u32);
        }
        let mut index = PathIndex {
            nodes,
            ends,
            by_lid,
            by_guid,
            by_alias: HashMap::new(),
            path_sl: report.routes.path_sl.clone(),
            pkey_pool,
            sa_by_guid: Vec::new(),
            unread,
            sa_lid_fixups: HashMap::new(),
            routes: RouteTable::default(),
        };
        index.routes = RouteTable::build(&index);
        index.index_sa_ports(&sa_order);
        index.set_aliases(
            report.program.alias_guids.iter().flat_map(|(&port, held)| held.values().map(move |&alias| (alias, port))),
        );
        index
    }

    /// Replaces the alias GUIDs the index knows with `aliases`, (alias,
    /// port GUID) pairs. An alias whose port is no end port here, or that is
    /// some end port's own GUID (the port's GUID wins), is left out. O(aliases).
    pub fn set_aliases(&mut self, aliases: impl IntoIterator<Item = (Guid, Guid)>) {
        self.by_alias.clear();
        self.update_aliases(std::iter::empty(), aliases);
    }

    /// Forgets the aliases `removed`, then learns `added` as
    /// [`Self::set_aliases`] does: one port's change in O(its aliases).
    pub fn update_aliases(
        &mut self,
        removed: impl IntoIterator<Item = Guid>,
        added: impl IntoIterator<Item = (Guid, Guid)>,
    ) {
        for alias in removed {
            self.by_alias.remove(&alias);
        }
        for (alias, port) in added {
            if self.by_guid.contains_key(&alias) {
                continue;
            }
            if let Some(&e) = self.by_guid.get(&port) {
                self.by_alias.insert(alias, e);
            }
        }
    }

    /// Every end port, by base LID.
    pub fn ends(&self) -> &[EndPort] {
        &self.ends
    }

    pub fn end(&self, i: u32) -> &EndPort {
        &self.ends[i as usize]
    }

    /// The valid P_Keys end port `i` holds, every block of its table, in
    /// [`pkey_order`]; the default P_Key (full member) when the sweep does
    /// not know its table.
    pub fn pkeys(&self, i: u32) -> &[u16] {
        let (start, n) = self.ends[i as usize].pkeys;
        if start == u32::MAX {
            return &DEFAULT_PKEYS;
        }
        &self.pkey_pool[start as usize..start as usize + usize::from(n)]
    }

    /// The end port answering to `lid` (any LID of its LMC range).
    pub fn end_by_lid(&self, lid: Lid) -> Option<u32> {
        self.by_lid.get(lid.0 as usize).copied().filter(|&i| i != NONE)
    }

    /// The end port with this port GUID.
    pub fn end_by_guid(&self, guid: Guid) -> Option<u32> {
        self.by_guid.get(&guid).copied()
    }

    /// The end port this alias GUID was given to.
    pub fn end_by_alias(&self, guid: Guid) -> Option<u32> {
        self.by_alias.get(&guid).copied()
    }

    /// Alias GUIDs known, in all.
    pub fn aliases(&self) -> usize {
        self.by_alias.len()
    }

    // ---- The SA's port table: every LID-bearing port of a node not
    // quarantined, read or not, by LID and GUID.

    /// Fills the SA's table from its ports in the sweep's order (SA port
    /// numbers, see `sa_by_guid`), as maps filled in that order would
    /// answer: a later port takes a GUID, or a LID, an earlier one held,
    /// and a LID names the port that holds the GUID of its last holder.
    fn index_sa_ports(&mut self, sweep_order: &[u32]) {
        let mut by_guid: Vec<(Guid, u32)> = sweep_order.iter().map(|&i| (self.port_at(i).guid, i)).collect();
        by_guid.sort_by_key(|&(g, _)| g);
        by_guid.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                *earlier = *later;
            }
            same
        });
        self.sa_by_guid = by_guid;
        let mut lid_guid: HashMap<u16, Guid> = HashMap::new();
        for &i in sweep_order {
            let p = self.port_at(i);
            for lid in p.base_lid.0..=p.base_lid.0.saturating_add((1u16 << p.lmc) - 1) {
                lid_guid.insert(lid, p.guid);
            }
        }
        for (lid, guid) in lid_guid {
            let Some(sa) = self.sa_port(guid) else { continue };
            if self.listed_end_by_lid(Lid(lid)) != Some(sa) {
                self.sa_lid_fixups.insert(lid, sa);
            }
        }
    }

    fn listed_end_by_lid(&self, lid: Lid) -> Option<u32> {
        self.end_by_lid(lid).filter(|&i| self.ends[i as usize].listed)
    }

    /// The SA port number of the port with this GUID.
    fn sa_port(&self, guid: Guid) -> Option<u32> {
        let k = self.sa_by_guid.binary_search_by_key(&guid, |&(g, _)| g).ok()?;
        Some(self.sa_by_guid[k].1)
    }

    /// SA port `i` as the SA uses it: the subnet prefix a port holds, the
    /// default one (IBA 4.1.1) when it holds 0 or was not read; in service
    /// when ACTIVE, or a switch's port 0.
    fn port_at(&self, i: u32) -> PortAt {
        match self.ends.get(i as usize) {
            Some(e) => PortAt {
                guid: e.guid,
                node: NodeId(e.node),
                port: e.port,
                base_lid: e.base_lid,
                lmc: e.lmc,
                gid_prefix: if e.gid_prefix != 0 { e.gid_prefix } else { DEFAULT_SUBNET_PREFIX },
                active: e.is_switch || e.caps.port_state == PortState::Active,
            },
            None => self.unread[i as usize - self.ends.len()],
        }
    }

    /// The port that holds `lid` (any LID of its LMC range).
    pub(crate) fn port_by_lid(&self, lid: Lid) -> Option<PortAt> {
        let i = match self.sa_lid_fixups.get(&lid.0) {
            Some(&i) => i,
            None => self.listed_end_by_lid(lid)?,
        };
        Some(self.port_at(i))
    }

    pub(crate) fn port_by_guid(&self, guid: Guid) -> Option<PortAt> {
        self.sa_port(guid).map(|i| self.port_at(i))
    }

    pub(crate) fn has_port(&self, guid: Guid) -> bool {
        self.sa_port(guid).is_some()
    }

    /// Every port, in GUID order.
    pub(crate) fn ports(&self) -> impl Iterator<Item = PortAt> + '_ {
        self.sa_by_guid.iter().map(|&(_, i)| self.port_at(i))
    }

    /// Ports in service, in GUID order.
    pub(crate) fn ports_in_service(&self) -> impl Iterator<Item = PortAt> + '_ {
        self.ports().filter(|p| p.active)
    }

    pub(crate) fn port_in_service(&self, guid: Guid) -> bool {
        self.port_by_guid(guid).is_some_and(|p| p.active)
    }

    fn link_end(&self, node: u32, port: u8) -> Option<&LinkEnd> {
        self.nodes.get(node as usize)?.ports.get(port as usize)
    }

    /// Crosses the cable at (node, port): both ends must be Active.
    fn cross(
        &self,
        node: u32,
        port: u8,
        route: &mut Route,
        on_link: &mut impl FnMut(u32, u8),
    ) -> Result<(u32, u8), Broken> {
        let down = Broken::Down { node, port };
        let here = self.link_end(node, port).ok_or(down)?;
        let (far_node, far_port) = here.remote.ok_or(down)?;
        let far = self.link_end(far_node, far_port).ok_or(down)?;
        if !here.active || !far.active {
            return Err(down);
        }
        route.hops += 1;
        if route.hops > MAX_HOPS {
            return Err(Broken::Loop);
        }
        on_link(node, port);
        route.mtu = route.mtu.min(here.mtu).min(far.mtu);
        route.rate = rate::slower(route.rate, rate::slower(here.rate, far.rate));
        Ok((far_node, far_port))
    }

    fn is_switch(&self, node: u32) -> bool {
        self.nodes.get(node as usize).is_some_and(|n| n.switch.is_some())
    }

    /// The route the forwarding tables make from end port `src` to `dlid`:
    /// the source's cable, then at every switch the LFT's output port for
    /// `dlid`, until a CA port that owns it or, at output port 0, the
    /// switch itself. A loopback (`dlid` is the source's own) crosses
    /// nothing. O(hops).
    pub fn route(&self, src: u32, dlid: Lid) -> Result<Route, Broken> {
        self.route_by_table(src, dlid).map_or_else(|| self.walk(src, dlid, &mut |_, _| {}), Ok)
    }

    /// [`Self::route`] from the route table, for a CA whose cable reaches
    /// a switch with a row: `None` where the walk must answer.
    fn route_by_table(&self, src: u32, dlid: Lid) -> Option<Route> {
        let s = self.ends[src as usize];
        if s.is_switch || s.owns(dlid) {
            return None;
        }
        let mut route = Route { dest: src, hops: 0, mtu: rate::MTU_MAX, rate: rate::RATE_MAX };
        let (switch, _) = self.cross(s.node, s.port, &mut route, &mut |_, _| {}).ok()?;
        let row = *self.routes.row_of.get(switch as usize)?;
        if row == NONE {
            return None;
        }
        let c = *self.routes.cells.get(row as usize * self.routes.width + usize::from(dlid.0))?;
        if c == 0 {
            return None;
        }
        let (hops, mtu, rate) = uncell(c);
        let hops = route.hops.checked_add(hops).filter(|&h| h <= MAX_HOPS)?;
        Some(Route {
            dest: self.end_by_lid(dlid)?,
            hops,
            mtu: route.mtu.min(mtu),
            rate: rate::slower(route.rate, rate),
        })
    }

    /// How many switches have a row in the route table.
    #[cfg(test)]
    pub(crate) fn route_table_rows(&self) -> usize {
        self.routes.cells.len().checked_div(self.routes.width).unwrap_or(0)
    }

    /// The walk alone, to check the table against.
    #[cfg(test)]
    pub(crate) fn route_walked(&self, src: u32, dlid: Lid) -> Result<Route, Broken> {
        self.walk(src, dlid, &mut |_, _| {})
    }

    /// [`Self::route`], with every link crossed as the (node, port) it
    /// leaves by, in order.
    pub fn route_links(&self, src: u32, dlid: Lid) -> Result<(Route, Vec<(u32, u8)>), Broken> {
        let mut links = Vec::new();
        let route = self.walk(src, dlid, &mut |n, p| links.push((n, p)))?;
        Ok((route, links))
    }

    fn walk(&self, src: u32, dlid: Lid, on_link: &mut impl FnMut(u32, u8)) -> Result<Route, Broken> {
        let s = self.ends[src as usize];
        let mut route = Route { dest: src, hops: 0, mtu: rate::MTU_MAX, rate: rate::RATE_MAX };
        if s.owns(dlid) {
            return Ok(Route { mtu: s.mtu_cap, rate: s.rate, ..route });
        }
        let dest = self.end_by_lid(dlid);
        let mut node = s.node;
        if s.is_switch {
            route.mtu = route.mtu.min(s.mtu_cap);
        } else {
            let (far_node, far_port) = self.cross(s.node, s.port, &mut route, on_link)?;
            if !self.is_switch(far_node) {
                return self.arrive(dest, far_node, far_port, route);
            }
            node = far_node;
        }
        loop {
            let entry = &self.nodes[node as usize];
            let table = entry.switch.as_ref().filter(|sw| !sw.lft.is_empty()).ok_or(Broken::NoTable { node })?;
            let out = table.lft.get(dlid.0 as usize).copied().unwrap_or(0xFF);
            if out == 0 {
                let d = dest.filter(|&d| self.ends[d as usize].node == node && self.ends[d as usize].port == 0);
                let Some(d) = d else { return Err(Broken::WrongEnd { node, port: 0 }) };
                route.mtu = route.mtu.min(self.ends[d as usize].mtu_cap);
                return Ok(Route { dest: d, ..route });
            }
            if out as usize >= entry.ports.len() {
                return Err(Broken::Unrouted { node, port: out });
            }
            let (far_node, far_port) = self.cross(node, out, &mut route, on_link)?;
            if !self.is_switch(far_node) {
                return self.arrive(dest, far_node, far_port, route);
            }
            node = far_node;
        }
    }

    /// The route ends at CA port (node, port): it must own the LID.
    fn arrive(&self, dest: Option<u32>, node: u32, port: u8, route: Route) -> Result<Route, Broken> {
        match dest {
            Some(d) if self.ends[d as usize].node == node && self.ends[d as usize].port == port => {
                Ok(Route { dest: d, ..route })
            }
            _ => Err(Broken::WrongEnd { node, port }),
        }
    }

    /// The SL the routing engine gave traffic from end port `src` to
    /// `dlid`: the entry of the switch where it enters the fabric (the
    /// source's own switch, or the one its cable reaches); 0 when the
    /// engine uses no VLs or the source touches no switch.
    pub fn path_sl(&self, src: u32, dlid: Lid) -> u8 {
        let Some(sl) = &self.path_sl else { return 0 };
        let s = &self.ends[src as usize];
        let entry_switch = if s.is_switch {
            Some(s.node)
        } else {
            self.link_end(s.node, s.port).and_then(|l| l.remote).map(|(n, _)| n).filter(|&n| self.is_switch(n))
        };
        entry_switch
            .and_then(|n| self.nodes[n as usize].switch.as_ref()?.routed)
            .and_then(|i| sl.sl(ibsm_routing::SwitchId(i), dlid.0))
            .unwrap_or(0)
    }
}

impl RouteTable {
    /// One row per switch a CA is cabled to, when they fit
    /// [`ROUTE_TABLE_CELLS`]. For each LID, every switch's route is found
    /// once: followed through the forwarding tables until a switch already
    /// known or the end, then each switch on the way takes the route
    /// from the next plus its own link. O(switches × LIDs).
    fn build(index: &PathIndex) -> RouteTable {
        let width = index.by_lid.len();
        let mut row_of = vec![NONE; index.nodes.len()];
        let mut rows = 0u32;
        for e in index.ends.iter().filter(|e| !e.is_switch) {
            let far = index.link_end(e.node, e.port).and_then(|l| l.remote).map(|(n, _)| n);
            if let Some(n) = far.filter(|&n| index.is_switch(n)) {
                if row_of[n as usize] == NONE {
                    row_of[n as usize] = rows;
                    rows += 1;
                }
            }
        }
        if rows == 0 || (rows as usize).saturating_mul(width) > ROUTE_TABLE_CELLS {
            return RouteTable::default();
        }
        let mut cells = vec![0u32; rows as usize * width];
        // Listed once: the loop below starts from each for every LID.
        let starts: Vec<u32> = (0..index.nodes.len() as u32).filter(|&n| row_of[n as usize] != NONE).collect();
        const UNKNOWN: u32 = u32::MAX;
        const ON_THE_WAY: u32 = u32::MAX - 1;
        let mut known = vec![UNKNOWN; index.nodes.len()];
        let mut touched: Vec<u32> = Vec::new();
        // Switches on the way, each with the link to the next (none: the
        // route ends at it).
        let mut way: Vec<(u32, Option<(u8, u8)>)> = Vec::new();
        for lid in 1..width {
            let dest = index.end_by_lid(Lid(lid as u16));
            for &n in &touched {
                known[n as usize] = UNKNOWN;
            }
            touched.clear();
            for &start in &starts {
                let mut node = start;
                // Along the forwarding tables to a switch whose route is
                // known (on this way already: a loop, no route) or ends.
                let mut after = loop {
                    match known[node as usize] {
                        UNKNOWN => {}
                        ON_THE_WAY => break 0,
                        c => break c,
                    }
                    known[node as usize] = ON_THE_WAY;
                    touched.push(node);
                    match index.first_step(node, Lid(lid as u16), dest) {
                        Step::Ends(c) => {
                            way.push((node, None));
                            break c;
                        }
                        Step::Next { next, mtu, rate } => {
                            way.push((node, Some((mtu, rate))));
                            node = next;
                        }
                    }
                };
                // Back along the way: each switch's route is its link, then
                // the next one's.
                while let Some((n, link)) = way.pop() {
                    if let (Some((mtu, rate)), true) = (link, after != 0) {
                        let (hops, m, r) = uncell(after);
                        after = if hops < MAX_HOPS { cell(hops + 1, mtu.min(m), rate::slower(rate, r)) } else { 0 };
                    }
                    known[n as usize] = after;
                    let row = row_of[n as usize];
                    if row != NONE {
                        cells[row as usize * width + lid] = after;
                    }
                }
            }
        }
        RouteTable { row_of, cells, width }
    }
}

impl PathIndex {
    /// Where switch `node` sends `lid` (the walk's step, see
    /// [`Self::route`]): the end of the route (a cell: its port 0, or the
    /// CA port one link on), or the next switch and the link to it.
    fn first_step(&self, node: u32, lid: Lid, dest: Option<u32>) -> Step {
        let entry = &self.nodes[node as usize];
        let Some(table) = entry.switch.as_ref().filter(|sw| !sw.lft.is_empty()) else { return Step::Ends(0) };
        let out = table.lft.get(lid.0 as usize).copied().unwrap_or(0xFF);
        if out == 0 {
            let d = dest.filter(|&d| self.ends[d as usize].node == node && self.ends[d as usize].port == 0);
            return Step::Ends(d.map_or(0, |d| cell(0, self.ends[d as usize].mtu_cap, rate::RATE_MAX)));
        }
        if out as usize >= entry.ports.len() {
            return Step::Ends(0);
        }
        let mut link = Route { dest: 0, hops: 0, mtu: rate::MTU_MAX, rate: rate::RATE_MAX };
        let Ok((far_node, far_port)) = self.cross(node, out, &mut link, &mut |_, _| {}) else { return Step::Ends(0) };
        if self.is_switch(far_node) {
            return Step::Next { next: far_node, mtu: link.mtu, rate: link.rate };
        }
        match self.arrive(dest, far_node, far_port, link) {
            Ok(r) => Step::Ends(cell(1, r.mtu, r.rate)),
            Err(_) => Step::Ends(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use super::*;
    use crate::sa::tests::swept;

    /// The SA's port table as two maps filled in the sweep's order (how
    /// the SA kept it before the path index held it): LIDs to GUIDs, GUIDs
    /// to ports.
    fn maps(report: &SweepReport) -> (HashMap<u16, Guid>, BTreeMap<Guid, PortAt>) {
        let subnet = &report.subnet;
        let (mut by_lid, mut ports) = (HashMap::new(), BTreeMap::new());
        for (id, port) in subnet.lid_ports() {
            let node = subnet.node(id);
            if node.quarantined.is_some() {
                continue;
            }
            let guid = node.port_guid(port);
            let Some(range) = report.lids.ranges.get(&guid) else { continue };
            let info = node.ports.get(port as usize).and_then(|p| p.info.as_ref());
            let gid_prefix = info.map(|i| i.gid_prefix).filter(|&p| p != 0).unwrap_or(DEFAULT_SUBNET_PREFIX);
            let active = node.is_switch() || info.is_some_and(|i| i.port_state == PortState::Active);
            let at = PortAt { guid, node: id, port, base_lid: range.base(), lmc: range.lmc(), gid_prefix, active };
            for lid in range.base().0..=range.base().0.saturating_add((1u16 << range.lmc()) - 1) {
                by_lid.insert(lid, guid);
            }
            ports.insert(guid, at);
        }
        (by_lid, ports)
    }

    fn same_answers(report: &SweepReport, what: &str) {
        let index = PathIndex::build(report);
        let (by_lid, ports) = maps(report);
        for lid in 0..=u16::MAX {
            let want = by_lid.get(&lid).and_then(|g| ports.get(g)).copied();
            assert_eq!(index.port_by_lid(Lid(lid)), want, "{what}: LID {lid}");
        }
        let guids = ports.keys().copied().chain(index.ends().iter().map(|e| e.guid)).chain([Guid(0), Guid(u64::MAX)]);
        for g in guids {
            assert_eq!(index.port_by_guid(g), ports.get(&g).copied(), "{what}: GUID {g}");
            assert_eq!(index.has_port(g), ports.contains_key(&g), "{what}: GUID {g}");
            assert_eq!(index.port_in_service(g), ports.get(&g).is_some_and(|p| p.active), "{what}: GUID {g}");
        }
        assert_eq!(index.ports().collect::<Vec<_>>(), ports.values().copied().collect::<Vec<_>>(), "{what}");
        let in_service: Vec<PortAt> = ports.values().filter(|p| p.active).copied().collect();
        assert_eq!(index.ports_in_service().collect::<Vec<_>>(), in_service, "{what}");
    }

    /// Every route the table gives is the walk's, and the walk's errors
    /// stay the walk's; returns how many routes the table gave.
    fn table_matches_walk(report: &SweepReport, what: &str) -> usize {
        let index = PathIndex::build(report);
        assert!(!index.routes.cells.is_empty(), "{what}: a table is built");
        let mut by_table = 0;
        for src in 0..index.ends.len() as u32 {
            for lid in 0..index.by_lid.len() as u16 + 2 {
                assert_eq!(index.route(src, Lid(lid)), index.route_walked(src, Lid(lid)), "{what}: {src} to LID {lid}");
                by_table += usize::from(index.route_by_table(src, Lid(lid)).is_some());
            }
        }
        by_table
    }

    #[test]
    fn the_route_table_answers_as_the_walk_through_loops_holes_and_links_down() {
        let base = swept();
        let cas = base.subnet.lid_ports().filter(|&(id, _)| !base.subnet.node(id).is_switch()).count();
        let all = table_matches_walk(base, "as swept");
        // CA to CA routes, every one (the rest are loopback or to switches).
        assert!(all >= cas * (cas - 1), "{all} routes from the table");

        // Two switches that send one LID to each other, a LID one switch
        // sends nowhere, a cable between switches down.
        let mut r = base.clone();
        let (a, pa, b, pb) = r
            .subnet
            .ids()
            .filter(|&id| r.subnet.node(id).is_switch())
            .find_map(|id| {
                r.subnet.node(id).ports.iter().enumerate().find_map(|(p, slot)| {
                    let (far, fp) = slot.remote?;
                    r.subnet.node(far).is_switch().then_some((id, p as u8, far, fp))
                })
            })
            .unwrap();
        let lids: Vec<u16> = r.lids.ranges.values().map(|range| range.base().0).collect();
        let (ga, gb) = (r.subnet.node(a).guid(), r.subnet.node(b).guid());
        let mut la = r.routes.lfts[&ga].as_ref().clone();
        let mut lb = r.routes.lfts[&gb].as_ref().clone();
        la[lids[0] as usize] = pa;
        lb[lids[0] as usize] = pb;
        la[lids[1] as usize] = 0xFF;
        r.routes.lfts.insert(ga, Arc::new(la));
        r.routes.lfts.insert(gb, Arc::new(lb));
        let with_holes = table_matches_walk(&r, "a loop and a hole");
        assert!(with_holes < all);
        r.subnet.node_mut(a).ports[pa as usize].info.as_mut().unwrap().port_state = PortState::Down;
        assert!(table_matches_walk(&r, "a cable down too") < with_holes);
    }

    /// The SA's lookups answer as its own maps did, also for the ports
    /// only one of the two tables held: quarantined nodes (paths still
    /// reach them), ports without PortInfo (no path ends there), ports
    /// not ACTIVE or holding GID prefix 0, and LID ranges two ports share.
    #[test]
    fn the_sa_port_table_answers_as_its_own_maps_did() {
        let base = swept();
        same_answers(base, "as swept");
        let switch = base.subnet.ids().find(|&id| base.subnet.node(id).is_switch()).unwrap();
        let cas: Vec<(NodeId, u8)> =
            base.subnet.lid_ports().filter(|&(id, _)| !base.subnet.node(id).is_switch()).collect();
        let guid = |r: &SweepReport, (id, p): (NodeId, u8)| r.subnet.node(id).port_guid(p);

        let mut r = base.clone();
        r.subnet.node_mut(switch).quarantined = Some("test".into());
        same_answers(&r, "a quarantined switch");

        let mut r = base.clone();
        r.subnet.node_mut(switch).ports[0].info = None;
        same_answers(&r, "a switch whose port 0 was not read");

        let mut r = base.clone();
        let (id, p) = cas[0];
        let info = r.subnet.node_mut(id).ports[p as usize].info.as_mut().unwrap();
        info.port_state = PortState::Down;
        let (id, p) = cas[1];
        r.subnet.node_mut(id).ports[p as usize].info.as_mut().unwrap().gid_prefix = 0;
        same_answers(&r, "a port down, a port with prefix 0");

        for quarantined in [None, Some(0), Some(1)] {
            let mut r = base.clone();
            let (a, b) = (cas[0], cas[2]);
            let range = r.lids.ranges[&guid(&r, a)];
            r.lids.ranges.insert(guid(&r, b), range);
            if let Some(k) = quarantined {
                r.subnet.node_mut([a, b][k].0).quarantined = Some("test".into());
            }
            same_answers(&r, &format!("two ports on one LID range, quarantined {quarantined:?}"));
        }
    }
}
