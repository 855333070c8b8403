//! The SA records a snapshot answers, built once per snapshot: every
//! attribute's candidates as wire bytes ([`Table`]), except the large and
//! regular ones (LinearForwardingTableRecords: every 64-LID block of every
//! switch) and the small and changing ones (GUIDInfoRecords with alias
//! GUIDs, SMInfoRecords), which are emitted while a query runs.
//!
//! Which ports get which records (IBA 15.2.5, as OpenSM answers them):
//! - NodeRecord: one per LID-bearing port: a switch's one (port 0), each
//!   CA or router port with its own PortGUID and LocalPortNum.
//! - PortInfoRecord: every port whose PortInfo the sweep read, switch port
//!   0 and external switch ports included; EndportLID is the end port's LID
//!   (the switch's for switch ports).
//! - LinkRecord: both directions of every cable between managed nodes.
//! - P_KeyTableRecord: every block of every port whose table the SM
//!   programs (`ProgramReport::pkey_blocks`): end ports, a switch's port 0
//!   and the switch ports facing end ports (which enforce their keys), as
//!   the ports answered. OpenSM answers every switch port; the SM never
//!   reads an inter-switch port's table (nor any switch port's with
//!   `part_enforce = off`), so those have no record here.
//! - SLtoVLMappingTableRecord, VLArbitrationTableRecord: the tables the SM
//!   programmed (kept across snapshots: a sweep sends only changes).
//! - MulticastForwardingTableRecord: every switch a multicast tree
//!   crosses, as OpenSM answers them: every (block, position) from block 0
//!   to the highest block in use, position 0 to the last the switch's
//!   ports need, zero masks included. From the trees the heavy sweep
//!   routed (`SweepReport::mcast_tables`): a join or leave routed between
//!   sweeps reaches the switches within a few round trips, but these
//!   records only with the next heavy sweep's snapshot.
//!
//! Every record names the ports it belongs to ([`owner`]), by which an
//! untrusted requester's answers are cut to its partitions
//! (`super::visibility`).

use std::collections::{BTreeMap, HashMap};

use ibsm_routing::mcast::PortSet;

use super::path::PathIndex;
use super::table::{Owners, Query, Spec, Table};
use crate::mad::lft::{LFT_BLOCK_ENTRIES, LFT_NO_PORT};
use crate::mad::sa::{
    LftRecordRepr, LinkRecordRepr, MftRecordRepr, NodeRecordRepr, PKeyTableRecordRepr, PortInfoRecordRepr,
    SlToVlRecordRepr, SmInfoRecordRepr, SwitchInfoRecordRepr, VlArbRecordRepr,
};
use crate::mad::sl_to_vl::{ATTR_MOD_ALL_INPUT_PORTS, ATTR_MOD_ALL_OUTPUT_PORTS};
use crate::mad::{
    AttributeId, LftBlockRepr, MftBlockRepr, NodeDescriptionRepr, SlToVlTableRepr, SmInfoRepr, SmState, SmpAttribute,
    VlArbTableRepr,
};
use crate::subnet::snapshot::Snapshot;
use crate::subnet::{NodeId, Subnet};
use crate::types::{Guid, Lid};

/// Component indexes the tables are keyed on, and the secret ones.
pub(crate) mod key {
    /// NodeRecord: LID, NodeGUID, PortGUID.
    pub const NODE: &[usize] = &[0, 7, 8];
    /// PortInfoRecord: EndportLID; M_Key is secret; Options (2) is a
    /// request flag; CapabilityMask (7) and CapabilityMask2 (53) may be
    /// matched as bit sets.
    pub const PORT_INFO: &[usize] = &[0];
    pub const PORT_INFO_SECRETS: &[usize] = &[3];
    pub const PORT_INFO_OPTIONS: u64 = 1 << 2;
    pub const PORT_INFO_CAPABILITY_MASKS: u64 = 1 << 7 | 1 << 53;
    /// LinkRecord: FromLID, ToLID.
    pub const LINK: &[usize] = &[0, 3];
    /// The LID of every other record kind.
    pub const LID: &[usize] = &[0];
    /// SMInfoRecord's SM_Key.
    pub const SM_INFO_SECRETS: &[usize] = &[3];
}

/// The SLtoVLMapping and VLArbitration tables the SM programmed, kept
/// across snapshots (a sweep's `routes.qos` holds only what it sent).
#[derive(Debug, Default)]
pub(crate) struct QosKnown {
    /// By node GUID: the table of every (input, output) pair, keyed
    /// input << 8 | output; `all` when one Set covered every pair.
    sl2vl: HashMap<Guid, NodeSl2Vl>,
    /// By (node GUID, output port, block 1-4).
    vlarb: BTreeMap<(Guid, u8, u8), [u8; 64]>,
}

#[derive(Debug, Default)]
struct NodeSl2Vl {
    all: Option<[u8; 16]>,
    pairs: BTreeMap<u16, [u8; 16]>,
}

impl QosKnown {
    /// Takes in what `snap`'s sweep programmed and forgets nodes it no
    /// longer has.
    pub fn update(&mut self, snap: &Snapshot) {
        let subnet = &snap.sweep.subnet;
        for set in &snap.sweep.routes.qos {
            let Some(node) = subnet.nodes.get(set.node.index()) else { continue };
            let guid = node.guid();
            // A CA's table is for the port its SMP entered by.
            let ca_port = || {
                (!node.is_switch())
                    .then(|| node.external_ports().find(|&p| node.path_for_port(p) == set.path))
                    .flatten()
            };
            if set.attr == AttributeId::SlToVlMappingTable {
                let Ok(t) = SlToVlTableRepr::parse_data(&set.data) else { continue };
                let entry = self.sl2vl.entry(guid).or_default();
                if node.is_switch() && set.amod & (ATTR_MOD_ALL_INPUT_PORTS | ATTR_MOD_ALL_OUTPUT_PORTS) != 0 {
                    entry.all = Some(t.vl);
                    entry.pairs.clear();
                } else if node.is_switch() {
                    entry.pairs.insert((set.amod & 0xFFFF) as u16, t.vl);
                } else if let Some(p) = ca_port() {
                    entry.pairs.insert(u16::from(p), t.vl);
                }
            } else if set.attr == AttributeId::VlArbitrationTable {
                let block = (set.amod >> 16) as u8;
                let port = if node.is_switch() { (set.amod & 0xFF) as u8 } else { ca_port().unwrap_or(0) };
                if (1..=4).contains(&block) && (node.is_switch() || port != 0) {
                    self.vlarb.insert((guid, port, block), set.data);
                }
            }
        }
        self.sl2vl.retain(|g, _| subnet.by_guid.contains_key(g));
        self.vlarb.retain(|(g, _, _), _| subnet.by_guid.contains_key(g));
    }
}

/// Every record kind of one snapshot.
#[derive(Debug)]
pub(crate) struct Records {
    pub node: Table,
    pub port_info: Table,
    pub switch_info: Table,
    pub link: Table,
    pub pkey: Table,
    pub sl2vl: Table,
    pub vlarb: Table,
    pub mft: Table,
    /// Routed switches by LID, for LinearForwardingTableRecords: node
    /// GUID and port 0's GUID (the records' owner).
    lft_switches: BTreeMap<u16, (Guid, Guid)>,
    /// The highest LID routed: the last LFT block answered.
    lft_top: u16,
}

/// The LID a node's records carry for `port`: the switch's (port 0's) on
/// a switch, the port's own base LID on a CA.
fn record_lid(subnet: &Subnet, ports: &PathIndex, id: NodeId, port: u8) -> Option<Lid> {
    let node = subnet.node(id);
    let p = if node.is_switch() { 0 } else { port };
    ports.port_by_guid(node.port_guid(p)).map(|at| at.base_lid)
}

/// The port a record about (`id`, `port`) belongs to, for partition
/// filtering (`super::visibility`): the port itself on a CA or router; on a
/// switch the end port across the cable of an external port when there is
/// one (the switch port enforces that port's keys), else port 0.
pub(crate) fn owner(subnet: &Subnet, id: NodeId, port: u8) -> Guid {
    let node = subnet.node(id);
    if !node.is_switch() {
        return node.port_guid(port);
    }
    let far = (port != 0).then(|| node.ports.get(usize::from(port)).and_then(|s| s.remote)).flatten();
    match far {
        Some((far, far_port)) if !subnet.node(far).is_switch() => subnet.node(far).port_guid(far_port),
        _ => node.port_guid(0),
    }
}

impl Records {
    pub fn build(snap: &Snapshot, ports: &PathIndex, qos: &QosKnown) -> Records {
        let sweep = &snap.sweep;
        let subnet = &sweep.subnet;
        let mut node_t = Table::new(Spec::of::<NodeRecordRepr>(&[]), key::NODE);
        let mut port_t = Table::new(Spec::of::<PortInfoRecordRepr>(key::PORT_INFO_SECRETS), key::PORT_INFO);
        let mut switch_t = Table::new(Spec::of::<SwitchInfoRecordRepr>(&[]), key::LID);
        let mut link_t = Table::new(Spec::of::<LinkRecordRepr>(&[]), key::LINK);
        let mut pkey_t = Table::new(Spec::of::<PKeyTableRecordRepr>(&[]), key::LID);
        let mut sl2vl_t = Table::new(Spec::of::<SlToVlRecordRepr>(&[]), key::LID);
        let mut vlarb_t = Table::new(Spec::of::<VlArbRecordRepr>(&[]), key::LID);
        let mut lft_switches = BTreeMap::new();

        for id in subnet.ids() {
            let node = subnet.node(id);
            if node.quarantined.is_some() {
                continue;
            }
            let description = NodeDescriptionRepr::new(node.description.clone().unwrap_or_default());
            // NodeRecords.
            let node_ports: Vec<u8> = if node.is_switch() {
                vec![0]
            } else {
                node.external_ports().filter(|&p| node.ports[p as usize].info.is_some()).collect()
            };
            for &p in &node_ports {
                let Some(lid) = record_lid(subnet, ports, id, p) else { continue };
                let mut info = node.info;
                if !node.is_switch() {
                    info.port_guid = node.port_guid(p);
                    info.local_port_num = p;
                }
                let record = NodeRecordRepr { lid, node_info: info, node_description: description.clone() };
                node_t.push(&record, Owners::port(owner(subnet, id, p)));
            }
            // PortInfoRecords: every port read (switch port 0 included).
            for (p, slot) in node.ports.iter().enumerate() {
                let Some(info) = slot.info.as_ref() else { continue };
                let Some(lid) = record_lid(subnet, ports, id, p as u8) else { continue };
                let record = PortInfoRecordRepr { endport_lid: lid, port_num: p as u8, options: 0, port_info: *info };
                port_t.push(&record, Owners::port(owner(subnet, id, p as u8)));
            }
            if let (Some(si), Some(lid)) = (node.switch_info.as_ref(), record_lid(subnet, ports, id, 0)) {
                switch_t.push(&SwitchInfoRecordRepr { lid, switch_info: *si }, Owners::port(node.port_guid(0)));
                if sweep.routes.lfts.contains_key(&node.guid()) {
                    lft_switches.insert(lid.0, (node.guid(), node.port_guid(0)));
                }
            }
            // P_KeyTableRecords: every block of each port whose table the
            // SM programmed (a switch's: port 0 and enforcing ports).
            let pkey_ports: Vec<u8> =
                if node.is_switch() { (0..node.ports.len() as u8).collect() } else { node_ports.clone() };
            for p in pkey_ports {
                let (Some(blocks), Some(lid)) =
                    (sweep.program.pkey_blocks.get(&(node.guid(), p)), record_lid(subnet, ports, id, p))
                else {
                    continue;
                };
                for (n, block) in blocks.iter().enumerate() {
                    let record = PKeyTableRecordRepr { lid, block_num: n as u16, port_num: p, pkey_table: *block };
                    pkey_t.push(&record, Owners::port(owner(subnet, id, p)));
                }
            }
            // QoS tables programmed.
            if let Some(known) = qos.sl2vl.get(&node.guid()) {
                push_sl2vl(&mut sl2vl_t, subnet, ports, id, known);
            }
        }
        for (&(guid, port, block), data) in &qos.vlarb {
            let Some(&id) = subnet.by_guid.get(&guid) else { continue };
            let (Some(lid), Ok(table)) = (record_lid(subnet, ports, id, port), VlArbTableRepr::parse_data(data)) else {
                continue;
            };
            let record = VlArbRecordRepr { lid: lid.0, output_port_num: port, block_num: block, table };
            vlarb_t.push(&record, Owners::port(owner(subnet, id, port)));
        }
        let mft_t = mft_table(subnet, ports, &sweep.mcast_tables);
        // LinkRecords: every cable, from each end.
        for (id, port, _, (far, far_port)) in subnet.cabled_ports() {
            if subnet.node(far).quarantined.is_some() {
                continue;
            }
            let (Some(from), Some(to)) =
                (record_lid(subnet, ports, id, port), record_lid(subnet, ports, far, far_port))
            else {
                continue;
            };
            let record = LinkRecordRepr { from_lid: from, from_port: port, to_port: far_port, to_lid: to };
            link_t.push(&record, Owners(owner(subnet, id, port), owner(subnet, far, far_port)));
        }
        Records {
            node: node_t,
            port_info: port_t,
            switch_info: switch_t,
            link: link_t,
            pkey: pkey_t,
            sl2vl: sl2vl_t,
            vlarb: vlarb_t,
            mft: mft_t,
            lft_switches,
            lft_top: sweep.lids.max_lid.0,
        }
    }

    /// Records held (LinearForwardingTableRecords not counted: they are
    /// emitted on demand).
    pub fn count(&self) -> usize {
        [&self.node, &self.port_info, &self.switch_info, &self.link, &self.pkey, &self.sl2vl, &self.vlarb, &self.mft]
            .iter()
            .map(|t| t.len())
            .sum()
    }

    /// LinearForwardingTableRecords (IBA 15.2.5.6): the routed table of
    /// every switch in 64-LID blocks up to the highest LID, emitted as the
    /// query runs; a LID or BlockNum in the query narrows which.
    /// Only switches whose port 0 `sees` lets the requester see.
    pub fn lft(&self, snap: &Snapshot, query: &mut Query<'_>, sees: impl Fn(Guid) -> bool) {
        let lids: Vec<(u16, Guid)> = match query.key(0) {
            Some(lid) => self.lft_switches.get(&(lid as u16)).map(|&g| vec![(lid as u16, g)]).unwrap_or_default(),
            None => self.lft_switches.iter().map(|(&l, &g)| (l, g)).collect(),
        }
        .into_iter()
        .filter(|&(_, (_, port0))| sees(port0))
        .map(|(l, (node, _))| (l, node))
        .collect();
        let last_block = self.lft_top / LFT_BLOCK_ENTRIES as u16;
        let blocks = match query.key(1) {
            Some(b) if b <= u64::from(last_block) => b as u16..=b as u16,
            Some(_) => return,
            None => 0..=last_block,
        };
        let mut buf = [0u8; crate::mad::sa::LFT_RECORD_LEN];
        for (lid, guid) in lids {
            let Some(table) = snap.sweep.routes.lfts.get(&guid) else { continue };
            for block in blocks.clone() {
                let mut ports = [LFT_NO_PORT; LFT_BLOCK_ENTRIES];
                let start = usize::from(block) * LFT_BLOCK_ENTRIES;
                for (i, p) in ports.iter_mut().enumerate() {
                    if let Some(&out) = table.get(start + i) {
                        *p = out;
                    }
                }
                let rec = LftRecordRepr { lid, block_num: block, block: LftBlockRepr { ports } };
                if rec.emit(&mut buf).is_err() || !query.offer(&buf) {
                    return;
                }
            }
        }
    }
}

/// One switch's MulticastForwardingTableRecords (IBA 15.2.5.8) from its
/// routed MLID -> ports map, as the SM writes the blocks
/// MulticastForwardingTableRecords of `tables` (switch GUID -> MLID ->
/// ports), by switch LID; switches gone from `subnet` are left out.
pub(super) fn mft_table(subnet: &Subnet, ports: &PathIndex, tables: &HashMap<Guid, BTreeMap<u16, PortSet>>) -> Table {
    let mut t = Table::new(Spec::of::<MftRecordRepr>(&[]), key::LID);
    let mut switches: Vec<(Lid, NodeId)> = tables
        .keys()
        .filter_map(|g| subnet.by_guid.get(g).copied())
        .filter(|&id| subnet.node(id).quarantined.is_none())
        .filter_map(|id| Some((record_lid(subnet, ports, id, 0)?, id)))
        .collect();
    switches.sort();
    for (lid, id) in switches {
        let node = subnet.node(id);
        let (Some(si), Some(table)) = (node.switch_info.as_ref(), tables.get(&node.guid())) else { continue };
        push_mfts(&mut t, lid, node.port_guid(0), table, node.info.num_ports, si.multicast_fdb_cap);
    }
    t
}

/// (`program::mfts::wanted_blocks`: MLIDs past MulticastFDBCap left out):
/// every (block, position) up to the highest block holding a port, zero
/// masks included (OpenSM's `osm_sa_mft_record.c` range).
fn push_mfts(t: &mut Table, lid: Lid, port0: Guid, table: &BTreeMap<u16, PortSet>, num_ports: u8, cap: u16) {
    let wanted = crate::program::mfts::wanted_blocks(table, num_ports, cap);
    let Some(last) = wanted.blocks.keys().map(|k| k.block).max() else { return };
    for block_num in 0..=last {
        for position in 0..wanted.positions {
            let key = crate::program::mfts::MftKey::new(block_num, position);
            let port_masks = wanted.blocks.get(&key).copied().unwrap_or_default();
            let record = MftRecordRepr { lid: lid.0, position, block_num, block: MftBlockRepr { port_masks } };
            t.push(&record, Owners::port(port0));
        }
    }
}

/// A switch's SL-to-VL tables for every (input, output) pair it was given
/// (OpenSM lists port 0 as an input too), or each CA port's (input 0,
/// output the port, as OpenSM answers end nodes).
fn push_sl2vl(t: &mut Table, subnet: &Subnet, ports: &PathIndex, id: NodeId, known: &NodeSl2Vl) {
    let node = subnet.node(id);
    if !node.is_switch() {
        for (&pair, &vl) in &known.pairs {
            let port = (pair & 0xFF) as u8;
            if let Some(lid) = record_lid(subnet, ports, id, port) {
                let table = SlToVlTableRepr { vl };
                let record = SlToVlRecordRepr { lid: lid.0, input_port_num: 0, output_port_num: port, table };
                t.push(&record, Owners::port(owner(subnet, id, port)));
            }
        }
        return;
    }
    let Some(lid) = record_lid(subnet, ports, id, 0) else { return };
    let n = node.ports.len() as u8;
    let mut push = |input: u8, output: u8, vl: [u8; 16]| {
        let table = SlToVlTableRepr { vl };
        // OpenSM checks the output port (osm_sa_slvl_record.c).
        let record = SlToVlRecordRepr { lid: lid.0, input_port_num: input, output_port_num: output, table };
        t.push(&record, Owners::port(owner(subnet, id, output)));
    };
    if let Some(vl) = known.all {
        for input in 0..n {
            for output in (1..n).filter(|&o| o != input) {
                push(input, output, vl);
            }
        }
    }
    for (&pair, &vl) in &known.pairs {
        push((pair >> 8) as u8, (pair & 0xFF) as u8, vl);
    }
}

/// SMInfoRecords (IBA 15.2.5.9): this SM and every other SM the sweep
/// read, each at its port's LID.
/// Only SMs whose port `sees` lets the requester see (OpenSM checks its
/// own; the others' are cut the same way here).
pub(crate) fn sm_info(snap: &Snapshot, ours: &SmInfoRepr, query: &mut Query<'_>, sees: impl Fn(Guid) -> bool) {
    let mut buf = [0u8; crate::mad::sa::SM_INFO_RECORD_LEN];
    let mut offer = |lid: Lid, sm_info: SmInfoRepr, port: Guid| {
        if !sees(port) {
            return true;
        }
        let r = SmInfoRecordRepr { lid, sm_info };
        r.emit(&mut buf).is_ok() && query.offer(&buf)
    };
    if !offer(snap.master_lid, *ours, snap.master) {
        return;
    }
    for remote in &snap.sweep.subnet.remote_sms {
        if let Ok(info) = &remote.info {
            if !offer(remote.lid, *info, remote.port_guid) {
                return;
            }
        }
    }
}

/// This SM's own SMInfo when the runtime has not told the SA: the snapshot's
/// master, MASTER, priority 0, ActCount the snapshot sequence.
pub(crate) fn default_sm_info(snap: &Snapshot) -> SmInfoRepr {
    SmInfoRepr { guid: snap.master, sm_key: 0, act_count: snap.sequence as u32, priority: 0, sm_state: SmState::Master }
}
