//! Alias GUIDs on the ports: the GUIDInfo blocks (IBA 14.2.5.5) the SM
//! writes so that a port answers to the additional port GUIDs the SA handed
//! out (SubnAdmSet(GUIDInfoRecord), IBA 15.2.5.18: the Set "causes the SM
//! to set the updated GUIDs in the specified port via the SM GUIDInfo
//! attribute").
//!
//! The SA keeps the registry and publishes it as an [`AliasTable`] through
//! a watch channel ([`AliasSource`]); the SubnetManager reads the table
//! when it programs: in every heavy sweep, and in the alias-only pass the
//! runtime runs when the table changes
//! ([`super::SubnetManager::program_aliases`]), so a Set reaches the port
//! without waiting for a sweep. (OpenSM does the same: the SA queues the
//! port's block and signals the state manager, which sends only that
//! SubnSet(GUIDInfo), outside any sweep.)
//!
//! # Which blocks are written
//! A block is wanted when the table puts an alias in it, or when this SM
//! wrote it before (then it may hold an alias since deleted). A block the
//! SM never wrote and that should hold no alias is left as it is: nothing
//! the SA answers depends on it, and a fabric without aliases costs no
//! GUIDInfo SMP at all. A wanted block is sent only when it differs from
//! what the SM last asked the port to hold ([`GuidMemo`]); the memo of a
//! port a sweep finds in INIT or DOWN is forgotten first, since its table
//! went with the link (a rebooted host), so its aliases are written again.
//!
//! Block 0 entry 0 is the port GUID, read-only (IBA 14.2.5.5): it is
//! always sent as the port GUID. Entries at or past the port's GUIDCap
//! are sent as 0.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::mad::guid_info::GUID_BLOCK_ENTRIES;
use crate::mad::{DrPath, GuidInfoBlockRepr, PortState};
use crate::subnet::{NodeId, Subnet};
use crate::types::Guid;

/// Every alias GUID the SA has handed out: by port GUID, the index in the
/// port's GUIDInfo table (1 and up) and the alias there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AliasTable {
    by_port: HashMap<Guid, BTreeMap<u16, Guid>>,
}

/// The SA's alias table as it stands: the SA task sends, the
/// SubnetManager reads at programming time and the runtime wakes on a
/// change.
pub type AliasSource = tokio::sync::watch::Receiver<Arc<AliasTable>>;

impl AliasTable {
    /// Puts `alias` at `index` of `port`'s table (index 0, the port GUID
    /// itself, and GUID 0 are ignored).
    pub fn insert(&mut self, port: Guid, index: u16, alias: Guid) {
        if index > 0 && alias.0 != 0 {
            self.by_port.entry(port).or_default().insert(index, alias);
        }
    }

    /// Aliases in all.
    pub fn len(&self) -> usize {
        self.by_port.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_port.is_empty()
    }

    /// `port`'s aliases by index.
    pub fn aliases(&self, port: Guid) -> impl Iterator<Item = (u16, Guid)> + '_ {
        self.by_port.get(&port).into_iter().flat_map(|m| m.iter().map(|(&i, &g)| (i, g)))
    }

    /// Block `block` as a port with `cap` GUIDs (PortInfo.GUIDCap) should
    /// hold it: the port GUID at index 0, its aliases, 0 elsewhere.
    pub fn block(&self, port: Guid, block: u8, cap: u16) -> GuidInfoBlockRepr {
        let mut b = GuidInfoBlockRepr::default();
        let first = u16::from(block) * GUID_BLOCK_ENTRIES as u16;
        if block == 0 && cap > 0 {
            b.guids[0] = port;
        }
        if let Some(m) = self.by_port.get(&port) {
            for (&i, &g) in m.range(first.max(1)..first + GUID_BLOCK_ENTRIES as u16) {
                if i < cap {
                    b.guids[usize::from(i - first)] = g;
                }
            }
        }
        b
    }

    /// Whether the table puts an alias in `block` of `port`'s table below
    /// `cap`.
    fn has_alias_in(&self, port: Guid, block: u8, cap: u16) -> bool {
        let first = u16::from(block) * GUID_BLOCK_ENTRIES as u16;
        let (start, end) = (first.max(1), (first + GUID_BLOCK_ENTRIES as u16).min(cap));
        end > start && self.by_port.get(&port).is_some_and(|m| m.range(start..end).next().is_some())
    }
}

impl FromIterator<(Guid, u16, Guid)> for AliasTable {
    /// From (port GUID, index, alias) triples.
    fn from_iter<I: IntoIterator<Item = (Guid, u16, Guid)>>(iter: I) -> Self {
        let mut t = AliasTable::default();
        for (port, index, alias) in iter {
            t.insert(port, index, alias);
        }
        t
    }
}

/// One GUIDInfo block of one port, as the SM last asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuidMemo {
    /// What the port answered (the Set's GetResp, or a read before
    /// writing).
    pub held: GuidInfoBlockRepr,
    /// What the SM asked it to hold (after a read: what it held).
    pub wanted: GuidInfoBlockRepr,
}

/// The memos, by port GUID and block.
pub type GuidMemos = HashMap<(Guid, u8), GuidMemo>;

/// One GUIDInfo block the SM wants a port to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuidInfoSet {
    pub node: NodeId,
    pub port: u8,
    pub port_guid: Guid,
    pub block: u8,
    /// Where SMPs for this port go (a CA's GUIDInfo is the table of the
    /// port the SMP arrives on; a switch has one, at port 0).
    pub path: DrPath,
    pub want: GuidInfoBlockRepr,
}

/// Every block the SM wants written or kept, by the rules in the module
/// docs (those the memo says are in place are filtered when the Sets are
/// built). O(LID ports + aliases).
pub fn wanted_blocks(subnet: &Subnet, table: &AliasTable, memos: &GuidMemos) -> Vec<GuidInfoSet> {
    let mut out = Vec::new();
    if table.is_empty() && memos.is_empty() {
        return out;
    }
    for (id, port) in subnet.lid_ports() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let Some(info) = node.ports.get(usize::from(port)).and_then(|p| p.info.as_ref()) else { continue };
        let cap = u16::from(info.guid_cap);
        if cap <= 1 {
            // Room for the port GUID only.
            continue;
        }
        let port_guid = node.port_guid(port);
        let blocks = cap.div_ceil(GUID_BLOCK_ENTRIES as u16) as u8;
        for block in 0..blocks {
            if !table.has_alias_in(port_guid, block, cap) && !memos.contains_key(&(port_guid, block)) {
                continue;
            }
            out.push(GuidInfoSet {
                node: id,
                port,
                port_guid,
                block,
                path: node.path_for_port(port),
                want: table.block(port_guid, block, cap),
            });
        }
    }
    out
}

/// Forgets the memos of ports gone from `subnet` (or quarantined) and of
/// ports it found in INIT or DOWN (their link came up anew: the table may
/// have been reset with it). Call with the subnet as discovered, before
/// programming moves port states.
pub fn forget_reset_ports(subnet: &Subnet, memos: &mut GuidMemos) {
    if memos.is_empty() {
        return;
    }
    let mut kept: HashMap<Guid, bool> = HashMap::new();
    for (id, port) in subnet.lid_ports() {
        let node = subnet.node(id);
        let state = node.ports.get(usize::from(port)).and_then(|p| p.info.as_ref()).map(|i| i.port_state);
        // A switch's port 0 has no link of its own: it is reset with the
        // switch, which discovery sees as its external ports going down.
        let fresh = !node.is_switch() && matches!(state, Some(PortState::Init | PortState::Down) | None);
        kept.insert(node.port_guid(port), node.quarantined.is_none() && !fresh);
    }
    memos.retain(|(guid, _), _| kept.get(guid).copied().unwrap_or(false));
}

/// The aliases ports hold as they answered the SM (its memos), by port
/// GUID: what a sweep's snapshot says of them. Ports the SM never wrote or
/// read are absent.
pub fn held_aliases(memos: &GuidMemos) -> HashMap<Guid, BTreeMap<u16, Guid>> {
    let mut out: HashMap<Guid, BTreeMap<u16, Guid>> = HashMap::new();
    for (&(port, block), memo) in memos {
        for (slot, &g) in memo.held.guids.iter().enumerate() {
            let index = u16::from(block) * GUID_BLOCK_ENTRIES as u16 + slot as u16;
            if index > 0 && g.0 != 0 {
                out.entry(port).or_default().insert(index, g);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SmConfig;
    use crate::exchange::txn::TxnConfig;
    use crate::mad::{AttributeId, Method, SmpAttribute};
    use crate::program::SubnetManager;
    use crate::sim::{FabricBuilder, Match, Rule, SharedFabric, SimDevice};
    use crate::subnet::{MasterMode, SweepReport};
    use crate::topology::{Node, NodeIdx, NodeKind, PortRef, Topology, SPEED_QDR, WIDTH_4X};
    use crate::transport::io_thread::MadTransport;
    use std::time::Duration;

    /// One switch, three hosts (GUIDCap 32 each; the switch's port 0 has 1).
    fn topo() -> Topology {
        let mut t = Topology::default();
        t.add_node(Node::new(NodeKind::Switch, "S", 4, Guid(0x5000)));
        for i in 0..3u64 {
            t.add_node(Node::new(NodeKind::Ca, format!("H{}", i + 1), 1, Guid(0x1000 + 0x10 * i)));
            let h = PortRef { node: NodeIdx(1 + i as usize), port: 1 };
            t.connect(h, PortRef { node: NodeIdx(0), port: 1 + i as u8 }, WIDTH_4X, SPEED_QDR);
        }
        t.validate().unwrap();
        t
    }

    fn host(i: usize) -> PortRef {
        PortRef { node: NodeIdx(1 + i), port: 1 }
    }

    struct Net {
        topo: Topology,
        fabric: SharedFabric,
        rt: tokio::runtime::Runtime,
    }

    struct Sm {
        sm: SubnetManager<crate::transport::SmpClient<MadTransport>>,
        aliases: tokio::sync::watch::Sender<Arc<AliasTable>>,
    }

    impl Net {
        fn new() -> Net {
            let topo = topo();
            let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            Net { topo, fabric, rt }
        }

        /// An SM on host `i`'s port, reading its aliases from a channel.
        fn sm(&self, i: usize) -> Sm {
            let dev = SimDevice::attach(&self.fabric, host(i).node, 1).unwrap();
            let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
            let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
            let mut sm = SubnetManager::new(transport, SmConfig::default(), false);
            let (aliases, rx) = tokio::sync::watch::channel(Arc::default());
            sm.set_alias_source(rx);
            Sm { sm, aliases }
        }

        fn sweep(&self, sm: &mut Sm) -> SweepReport {
            let r = self.rt.block_on(sm.sm.sweep()).expect("sweep");
            assert!(r.subnet_up(), "{:?} {:?}", r.inactive, r.problems());
            r
        }

        fn port_guid(&self, r: PortRef) -> Guid {
            self.topo.node(r.node).port_guid(r.port)
        }

        /// GUIDInfo block `block` as host port `r` answers a SubnGet.
        fn held(&self, sm: &Sm, r: PortRef, block: u8) -> GuidInfoBlockRepr {
            let lid = self.fabric.lock().unwrap().lid_of(r).unwrap();
            let smp = self.rt.block_on(sm.sm.driver().lid_get(lid, AttributeId::GuidInfo, block.into())).unwrap();
            GuidInfoBlockRepr::parse_data(&smp.data).unwrap()
        }

        fn guid_info_sets(&self) -> u64 {
            self.fabric.lock().unwrap().smp_count(AttributeId::GuidInfo, Method::Set)
        }
    }

    fn table(entries: &[(Guid, u16, u64)]) -> Arc<AliasTable> {
        Arc::new(entries.iter().map(|&(p, i, g)| (p, i, Guid(g))).collect())
    }

    #[test]
    fn no_aliases_no_guid_info_smp() {
        let net = Net::new();
        let mut sm = net.sm(0);
        let r = net.sweep(&mut sm);
        assert_eq!((r.program.guid_info_sets, net.guid_info_sets()), (0, 0));
        assert!(r.program.alias_guids.is_empty());
        assert_eq!(net.rt.block_on(sm.sm.program_aliases()).unwrap().sets(), 0);
        assert_eq!(net.guid_info_sets(), 0);
    }

    #[test]
    fn aliases_reach_the_port_once_and_follow_the_table() {
        let net = Net::new();
        let mut sm = net.sm(0);
        // Before any master sweep there is no fabric to write to.
        assert!(net.rt.block_on(sm.sm.program_aliases()).is_none());
        let h2 = net.port_guid(host(1));
        let switch = net.port_guid(PortRef { node: NodeIdx(0), port: 0 });
        // The switch's port 0 has room for its own GUID only: never written.
        sm.aliases.send_replace(table(&[(h2, 1, 0xa1), (h2, 9, 0xa9), (switch, 1, 0xbad)]));
        let r = net.sweep(&mut sm);
        assert_eq!(r.program.guid_info_sets, 2, "blocks 0 and 1 of H2");
        assert_eq!(net.guid_info_sets(), 2);
        let b0 = net.held(&sm, host(1), 0);
        assert_eq!((b0.guids[0], b0.guids[1], b0.guids[2]), (h2, Guid(0xa1), Guid(0)));
        assert_eq!(net.held(&sm, host(1), 1).guids[1], Guid(0xa9));
        let want: BTreeMap<u16, Guid> = [(1, Guid(0xa1)), (9, Guid(0xa9))].into_iter().collect();
        assert_eq!(r.program.alias_guids.get(&h2), Some(&want), "the snapshot knows what the port holds");
        assert_eq!(r.program.alias_guids.len(), 1);
        assert_eq!(r.program.sets(), r.program.changing_sets());

        // Nothing changed: nothing sent again.
        let r = net.sweep(&mut sm);
        assert_eq!((r.program.guid_info_sets, net.guid_info_sets()), (0, 2));
        assert_eq!(r.program.alias_guids.get(&h2), Some(&want));

        // The SA deletes index 9: the alias pass clears block 1 alone, no
        // discovery.
        let node_info_gets = net.fabric.lock().unwrap().smp_count(AttributeId::NodeInfo, Method::Get);
        sm.aliases.send_replace(table(&[(h2, 1, 0xa1)]));
        let p = net.rt.block_on(sm.sm.program_aliases()).unwrap();
        assert_eq!((p.guid_info_sets, p.failures, p.sets()), (1, 0, 1));
        assert_eq!(net.held(&sm, host(1), 1), GuidInfoBlockRepr::default());
        assert_eq!(net.held(&sm, host(1), 0).guids[1], Guid(0xa1));
        assert_eq!(p.alias_guids[&h2].len(), 1);
        assert_eq!(net.fabric.lock().unwrap().smp_count(AttributeId::NodeInfo, Method::Get), node_info_gets);
        assert_eq!(net.rt.block_on(sm.sm.program_aliases()).unwrap().guid_info_sets, 0);

        // H2's link bounces: its table may be gone, so block 0 is written
        // again (block 1 holds no alias any more: left alone).
        net.fabric.lock().unwrap().link_down(host(1)).unwrap();
        net.fabric.lock().unwrap().link_up(host(1)).unwrap();
        let r = net.sweep(&mut sm);
        assert_eq!(r.program.guid_info_sets, 1);
        assert_eq!(net.held(&sm, host(1), 0).guids[1], Guid(0xa1));

        // The SA drops the last alias: block 0 goes back to the port GUID.
        sm.aliases.send_replace(Arc::default());
        let r = net.sweep(&mut sm);
        assert_eq!(r.program.guid_info_sets, 1);
        let mut bare = GuidInfoBlockRepr::default();
        bare.guids[0] = h2;
        assert_eq!(net.held(&sm, host(1), 0), bare);
        assert!(r.program.alias_guids.is_empty());
        assert_eq!(net.rt.block_on(sm.sm.program_aliases()).unwrap().guid_info_sets, 0);
    }

    #[test]
    fn a_refused_set_is_a_problem_and_is_sent_again() {
        let net = Net::new();
        let mut sm = net.sm(0);
        net.sweep(&mut sm);
        let h3 = net.port_guid(host(2));
        let rule = net
            .fabric
            .lock()
            .unwrap()
            .add_rule(Rule::drop_all(Match::any().attribute(AttributeId::GuidInfo).method(Method::Set)));
        sm.aliases.send_replace(table(&[(h3, 3, 0xc3)]));
        let r = net.sweep(&mut sm);
        assert_eq!(r.program.guid_info_sets, 0);
        assert!(r.program.failures >= 1);
        assert!(
            r.problems().iter().any(|p| matches!(
                &p.what,
                crate::subnet::Problem::SetFailed { attr: AttributeId::GuidInfo, amod: 0, port: Some(1), .. }
            )),
            "{:?}",
            r.problems()
        );
        assert!(r.program.alias_guids.is_empty());
        net.fabric.lock().unwrap().remove_rule(rule);
        let p = net.rt.block_on(sm.sm.program_aliases()).unwrap();
        assert_eq!(p.guid_info_sets, 1, "not remembered as written: sent again");
        assert_eq!(net.held(&sm, host(2), 0).guids[3], Guid(0xc3));
    }

    #[test]
    fn a_takeover_reads_before_writing() {
        let net = Net::new();
        let mut a = net.sm(0);
        let h2 = net.port_guid(host(1));
        let aliases = table(&[(h2, 1, 0xa1), (h2, 9, 0xa9)]);
        a.aliases.send_replace(aliases.clone());
        assert_eq!(net.sweep(&mut a).program.guid_info_sets, 2);
        let takeover = |sm: &mut Sm| {
            let found = net.rt.block_on(sm.sm.discover()).unwrap();
            net.rt.block_on(sm.sm.take_charge(found, MasterMode::Takeover)).unwrap()
        };

        // B takes over with the same table at hand: it reads the two
        // blocks and writes neither.
        let mut b = net.sm(2);
        b.aliases.send_replace(aliases.clone());
        let r = takeover(&mut b);
        assert_eq!((r.program.guid_info_reads, r.program.guid_info_sets), (2, 0));
        assert_eq!(r.program.alias_guids[&h2].len(), 2, "what the ports hold, as read");
        assert_eq!(net.guid_info_sets(), 2);
        // Then only what differs is written.
        b.aliases.send_replace(table(&[(h2, 1, 0xb1), (h2, 9, 0xa9)]));
        let p = net.rt.block_on(b.sm.program_aliases()).unwrap();
        assert_eq!((p.guid_info_reads, p.guid_info_sets), (0, 1));
        assert_eq!(net.held(&b, host(1), 0).guids[1], Guid(0xb1));

        // As the runtime has it, C's SA imports the table after the
        // takeover sweep: the alias pass reads first and writes only what
        // differs (block 0 holds B's 0xb1).
        let mut c = net.sm(1);
        let r = takeover(&mut c);
        assert_eq!((r.program.guid_info_reads, r.program.guid_info_sets), (0, 0));
        c.aliases.send_replace(aliases);
        let p = net.rt.block_on(c.sm.program_aliases()).unwrap();
        assert_eq!((p.guid_info_reads, p.guid_info_sets), (2, 1));
        assert_eq!(net.held(&c, host(1), 0).guids[1], Guid(0xa1));
        assert_eq!(net.guid_info_sets(), 4);
    }

    #[test]
    fn blocks_hold_the_port_guid_and_aliases_below_cap() {
        let port = Guid(0x10);
        let t: AliasTable =
            [(port, 1, Guid(0xa1)), (port, 9, Guid(0xa9)), (port, 31, Guid(0xaf)), (port, 0, Guid(0xbad))]
                .into_iter()
                .collect();
        assert_eq!(t.len(), 3, "index 0 is the port GUID, never an alias");
        let b0 = t.block(port, 0, 32);
        assert_eq!((b0.guids[0], b0.guids[1], b0.guids[2]), (port, Guid(0xa1), Guid(0)));
        assert_eq!(t.block(port, 1, 32).guids[1], Guid(0xa9));
        assert_eq!(t.block(port, 3, 32).guids[7], Guid(0xaf));
        assert_eq!(t.block(port, 3, 30).guids[7], Guid(0), "index 31 is past GUIDCap 30");
        assert!(t.has_alias_in(port, 0, 32) && t.has_alias_in(port, 1, 32) && !t.has_alias_in(port, 2, 32));
        assert!(!t.has_alias_in(port, 3, 30));
        assert!(!t.has_alias_in(port, 0, 1), "GUIDCap 1: room for the port GUID only");
        assert_eq!(t.block(Guid(0x11), 0, 8).guids[0], Guid(0x11), "a port without aliases");
        assert_eq!(t.aliases(port).collect::<Vec<_>>(), vec![(1, Guid(0xa1)), (9, Guid(0xa9)), (31, Guid(0xaf))]);
    }

    #[test]
    fn held_aliases_skip_the_port_guid_and_zeros() {
        let mut memos = GuidMemos::new();
        let mut held = GuidInfoBlockRepr::default();
        held.guids[0] = Guid(0x10);
        held.guids[3] = Guid(0xa3);
        memos.insert((Guid(0x10), 0), GuidMemo { held, wanted: held });
        let mut b1 = GuidInfoBlockRepr::default();
        b1.guids[0] = Guid(0xa8);
        memos.insert((Guid(0x10), 1), GuidMemo { held: b1, wanted: b1 });
        let got = held_aliases(&memos);
        assert_eq!(
            got[&Guid(0x10)].iter().map(|(&i, &g)| (i, g)).collect::<Vec<_>>(),
            vec![(3, Guid(0xa3)), (8, Guid(0xa8))]
        );
    }
}
