//! A new master taking over a fabric another master programmed, on the
//! in-process fabric: SM A brings the fabric up and goes away, SM B (fresh
//! state, no guid2lid) discovers and takes charge in `MasterMode::Takeover`.
//! Judged from the simulator's side (port states, LIDs, LFTs, its per
//! attribute and method SMP counters) as well as by B's report. Also:
//! discovery reads every other SM port's SMInfo, shows SM_Key only to the
//! holder of the key, and records a silent or lying SM port without
//! failing bring-up.

use std::collections::HashMap;
use std::time::Duration;

use ibsm::config::{QosConfig, SmConfig};
use ibsm::mad::{AttributeId, CapabilityMask, Method, PortState, SmInfoRepr, SmState};
use ibsm::program::SubnetManager;
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice};
use ibsm::subnet::MasterMode;
use ibsm::topology::{NodeIdx, NodeKind, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::types::{Guid, Lid};

const SPEC: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn txn() -> TxnConfig {
    TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() }
}

/// An SM on port 1 of `host`, with fresh state (no guid2lid).
fn sm_on(fabric: &SharedFabric, host: NodeIdx) -> SubnetManager<ibsm::transport::SmpClient<MadTransport>> {
    sm_with_qos(fabric, host, QosConfig::default())
}

fn sm_with_qos(
    fabric: &SharedFabric,
    host: NodeIdx,
    qos: QosConfig,
) -> SubnetManager<ibsm::transport::SmpClient<MadTransport>> {
    let dev = SimDevice::attach(fabric, host, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn());
    SubnetManager::new(transport, SmConfig::default(), false).with_qos(qos)
}

/// What the fabric holds, read from the simulator.
#[derive(Debug, PartialEq)]
struct Held {
    /// Switch port 0 and every cabled CA port.
    lids: HashMap<PortRef, Lid>,
    /// Both ends of every cable.
    states: HashMap<PortRef, PortState>,
    /// Every switch's LFT, in 64-LID blocks (unwritten entries 0xFF).
    lfts: HashMap<NodeIdx, Vec<[u8; 64]>>,
}

fn lid_ports(topo: &Topology) -> Vec<PortRef> {
    let mut out = Vec::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        let node_idx = NodeIdx(i);
        match node.kind {
            NodeKind::Switch => out.push(PortRef { node: node_idx, port: 0 }),
            _ => out.extend(
                (1..=node.num_ports)
                    .map(|port| PortRef { node: node_idx, port })
                    .filter(|&r| topo.neighbor(r).is_some()),
            ),
        }
    }
    out
}

fn held(topo: &Topology, fabric: &SharedFabric) -> Held {
    let f = fabric.lock().unwrap();
    let lids = lid_ports(topo).into_iter().map(|r| (r, f.lid_of(r).unwrap())).collect();
    let states = topo.links.iter().flat_map(|l| [l.a, l.b]).map(|r| (r, f.port_state(r).unwrap())).collect();
    let lfts = topo
        .switches()
        .map(|sw| {
            let t = f.lft(sw).unwrap();
            let blocks = t.len().div_ceil(64).max(1);
            let mut out = vec![[0xFFu8; 64]; blocks];
            for (i, &p) in t.iter().enumerate() {
                out[i / 64][i % 64] = p;
            }
            (sw, out)
        })
        .collect();
    Held { lids, states, lfts }
}

/// The block of `t` (0xFF past its end).
fn block(t: &[[u8; 64]], i: usize) -> [u8; 64] {
    t.get(i).copied().unwrap_or([0xFF; 64])
}

/// Blocks that differ between two LFT snapshots, over all switches.
fn changed_blocks(before: &Held, after: &Held) -> usize {
    before
        .lfts
        .iter()
        .map(|(sw, old)| {
            let new = &after.lfts[sw];
            (0..old.len().max(new.len())).filter(|&i| block(old, i) != block(new, i)).count()
        })
        .sum()
}

/// Requests per (attribute, method) the simulator saw since `before`.
fn counts_since(
    fabric: &SharedFabric,
    before: &HashMap<(AttributeId, Method), u64>,
) -> HashMap<(AttributeId, Method), u64> {
    let f = fabric.lock().unwrap();
    f.smp_counts()
        .iter()
        .map(|(&k, &n)| (k, n - before.get(&k).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

fn sets_of(counts: &HashMap<(AttributeId, Method), u64>) -> HashMap<AttributeId, u64> {
    counts.iter().filter(|((_, m), _)| *m == Method::Set).map(|(&(a, _), &n)| (a, n)).collect()
}

/// A brings the fabric up on the first host (two sweeps, as a master that
/// has run a while: the second clears the PortStateChange bits its own
/// activations raised) and is dropped, closing its port.
fn master_a_then_gone(topo: &Topology, fabric: &SharedFabric, qos: QosConfig) {
    let a_host = topo.hosts().next().unwrap();
    let mut a = sm_with_qos(fabric, a_host, qos);
    let rt = runtime();
    let first = rt.block_on(a.sweep()).expect("A's sweep");
    assert!(first.subnet_up(), "A: {:?} {:?}", first.inactive, first.problems());
    assert_eq!(first.mode, MasterMode::Fresh);
    let second = rt.block_on(a.sweep()).expect("A's second sweep");
    assert_eq!(second.mode, MasterMode::Continuing);
    assert_eq!(second.program.lft_blocks, 0, "{:?}", second.program);
}

#[test]
fn takeover_of_an_unchanged_fabric_changes_nothing_but_the_master_lid() {
    let topo = Topology::from_spec_or_file(SPEC).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(11).build_shared().unwrap();
    master_a_then_gone(&topo, &fabric, QosConfig::default());
    let before = held(&topo, &fabric);
    assert!(before.states.values().all(|&s| s == PortState::Active));
    let rereg_before: Vec<u32> = {
        let f = fabric.lock().unwrap();
        lid_ports(&topo).iter().map(|&r| f.client_reregistrations(r).unwrap()).collect()
    };
    let counts_before = fabric.lock().unwrap().smp_counts().clone();

    // B on the last host, on another leaf than A.
    let b_host = topo.hosts().last().unwrap();
    let mut b = sm_on(&fabric, b_host);
    let rt = runtime();
    let found = rt.block_on(b.discover()).expect("B's discovery");
    assert!(found.subnet.remote_sms.is_empty(), "A is gone: {:?}", found.subnet.remote_sms);
    let report = rt.block_on(b.take_charge(found, MasterMode::Takeover)).expect("B's takeover");
    assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
    assert!(report.problems().is_empty(), "{:?}", report.problems());

    // The simulator's view: nothing moved.
    let after = held(&topo, &fabric);
    assert_eq!(after.states, before.states, "every port stays ACTIVE");
    assert_eq!(after.lids, before.lids, "no LID renumbered");
    assert_eq!(after.lfts, before.lfts, "every switch's LFT unchanged");

    // B's report: LFTs read, none written, every Set a MasterSMLID update.
    let p = &report.program;
    let switches = topo.switches().count();
    let blocks = report.lids.max_lid.0 as usize / 64 + 1;
    assert_eq!(p.lft_reads, switches * blocks, "{p:?}");
    assert_eq!(p.lft_blocks, 0, "{p:?}");
    assert_eq!(p.changing_sets(), 0, "{p:?}");
    assert_eq!((p.switch_info_sets, p.pkey_sets, p.sl2vl_sets, p.vlarb_sets), (0, 0, 0, 0), "{p:?}");
    assert_eq!(p.armed + p.activated, 0, "{p:?}");
    let end_ports = lid_ports(&topo).len();
    assert_eq!(p.sm_lid_only_sets, end_ports, "one MasterSMLID Set per end port and switch port 0: {p:?}");
    assert_eq!(p.sets(), p.sm_lid_only_sets);
    assert_eq!(p.failures, 0);

    // Cross-check with the simulator's counters: the only Sets are PortInfo,
    // as many as the report says, and nobody was asked to reregister.
    let since = counts_since(&fabric, &counts_before);
    let sets = sets_of(&since);
    assert_eq!(sets, HashMap::from([(AttributeId::PortInfo, p.port_sets as u64)]), "{since:?}");
    assert_eq!(since.get(&(AttributeId::LinearForwardingTable, Method::Get)).copied(), Some(p.lft_reads as u64));
    let f = fabric.lock().unwrap();
    let rereg_after: Vec<u32> = lid_ports(&topo).iter().map(|&r| f.client_reregistrations(r).unwrap()).collect();
    assert_eq!(rereg_after, rereg_before, "no ClientReregister on takeover");
    let b_lid = f.lid_of(PortRef { node: b_host, port: 1 }).unwrap();
    for r in lid_ports(&topo) {
        assert_eq!(f.port_info(r).unwrap().master_sm_lid, b_lid, "{r:?} points at the new master");
    }
    drop(f);

    // And B's next sweep, as master, sends nothing at all.
    let again = rt.block_on(b.sweep()).expect("B's next sweep");
    assert_eq!(again.mode, MasterMode::Continuing);
    assert_eq!(again.program.sets(), 0, "{:?}", again.program);
    assert_eq!(again.program.lft_reads, 0, "the cache knows every block now");
}

#[test]
fn takeover_after_a_link_failure_sends_only_the_blocks_that_change() {
    let topo = Topology::from_spec_or_file(SPEC).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(11).build_shared().unwrap();
    master_a_then_gone(&topo, &fabric, QosConfig::default());
    let before = held(&topo, &fabric);

    // Between A's death and B's start a leaf-to-spine cable fails.
    let is_switch = |r: PortRef| topo.node(r.node).kind == NodeKind::Switch;
    let cut = topo.links.iter().find(|l| is_switch(l.a) && is_switch(l.b)).expect("a switch-to-switch link");
    fabric.lock().unwrap().link_down(cut.a).unwrap();
    let counts_before = fabric.lock().unwrap().smp_counts().clone();

    let b_host = topo.hosts().last().unwrap();
    let mut b = sm_on(&fabric, b_host);
    let rt = runtime();
    let found = rt.block_on(b.discover()).expect("B's discovery");
    let report = rt.block_on(b.take_charge(found, MasterMode::Takeover)).expect("B's takeover");
    assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
    assert!(report.problems().is_empty(), "{:?}", report.problems());

    let after = held(&topo, &fabric);
    assert_eq!(after.lids, before.lids, "no LID renumbered");
    for (r, s) in &after.states {
        if *r != cut.a && *r != cut.b {
            assert_eq!(*s, PortState::Active, "{r:?} left ACTIVE");
        }
    }
    // Routes around the cut: every switch delivers every LID to its owner.
    {
        let f = fabric.lock().unwrap();
        for sw in topo.switches() {
            for (&owner, &lid) in &after.lids {
                let path = f.trace_lid_route(sw, lid).unwrap_or_else(|e| panic!("LID {lid} from {sw:?}: {e}"));
                assert_eq!(path.last().copied(), Some(owner));
            }
        }
    }
    // Exactly the blocks that differ were sent: every changed block was
    // written (only B wrote), and no block was written that did not change.
    let changed = changed_blocks(&before, &after);
    assert!(changed > 0, "a failed spine link must move some routes");
    assert_eq!(report.program.lft_blocks, changed, "{:?}", report.program);
    let sets = sets_of(&counts_since(&fabric, &counts_before));
    assert_eq!(sets.get(&AttributeId::LinearForwardingTable).copied(), Some(changed as u64));
    assert_eq!(report.program.armed + report.program.activated, 0, "no port left ACTIVE and came back");
}

/// A port GUID as the simulator reports it.
fn port_guid(topo: &Topology, host: NodeIdx) -> Guid {
    topo.node(host).port_guid(1)
}

#[test]
fn discovery_reads_other_sms_and_a_silent_sm_port_does_not_block_bring_up() {
    let topo = Topology::from_spec_or_file(SPEC).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(11).build_shared().unwrap();
    let hosts: Vec<NodeIdx> = topo.hosts().collect();
    const KEY: u64 = 0x5eed_0000_c0ff_ee00;

    // Host 0: a master at priority 5 (registered SMInfo, answered by the fabric).
    let a = SimDevice::attach(&fabric, hosts[0], 1).unwrap();
    let a_info = SmInfoRepr {
        guid: port_guid(&topo, hosts[0]),
        sm_key: KEY,
        act_count: 42,
        priority: 5,
        sm_state: SmState::Master,
    };
    a.set_sm_info(Some(a_info));
    // Host 1: IsSM set, an SM that never answers.
    let silent = SimDevice::attach(&fabric, hosts[1], 1).unwrap();
    silent.set_is_sm(true);
    // Host 2: an SMInfo naming GUID 0. Host 3: someone else's GUID.
    let zero = SimDevice::attach(&fabric, hosts[2], 1).unwrap();
    zero.set_sm_info(Some(SmInfoRepr { guid: Guid(0), ..a_info }));
    let liar = SimDevice::attach(&fabric, hosts[3], 1).unwrap();
    liar.set_sm_info(Some(SmInfoRepr { guid: Guid(0xdead), ..a_info }));
    // Host 4: claims IsSM in its PortInfo, with no SM behind it (the port
    // answers SMInfo "unsupported").
    {
        let mut f = fabric.lock().unwrap();
        let mask = f.port_info(PortRef { node: hosts[4], port: 1 }).unwrap().capability_mask | CapabilityMask::IS_SM;
        f.corrupt_answers(hosts[4], AttributeId::PortInfo, 20, &mask.to_be_bytes());
    }

    // B brings the fabric up from the last host.
    let b_host = *hosts.last().unwrap();
    let mut b = sm_on(&fabric, b_host);
    let rt = runtime();
    let report = rt.block_on(b.sweep()).expect("B's sweep");
    assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
    assert!(report.problems().is_empty(), "SM ports are not sweep problems: {:?}", report.problems());

    let sms = &report.subnet.remote_sms;
    let by_guid = |g: Guid| sms.iter().find(|s| s.port_guid == g).unwrap_or_else(|| panic!("{g} not in {sms:?}"));
    assert_eq!(sms.len(), 5, "{sms:?}");
    assert!(sms.iter().all(|s| s.port_guid != port_guid(&topo, b_host)), "our own port is not another SM");

    let found_a = by_guid(port_guid(&topo, hosts[0]));
    let info = found_a.info.as_ref().expect("A's SMInfo");
    assert_eq!((info.guid, info.priority, info.sm_state, info.act_count), (a_info.guid, 5, SmState::Master, 42));
    assert_eq!(info.sm_key, 0, "SM_Key hidden from a requester without it");
    assert_eq!(found_a.port, 1);
    assert_eq!(found_a.lid, fabric.lock().unwrap().lid_of(PortRef { node: hosts[0], port: 1 }).unwrap());
    assert_eq!(report.subnet.node(found_a.node).guid(), topo.node(hosts[0]).node_guid);

    for (host, says) in [
        (hosts[1], "read failed"),
        (hosts[2], "GUID is 0"),
        (hosts[3], "not the port's GUID"),
        (hosts[4], "read failed"),
    ] {
        let guid = port_guid(&topo, host);
        let e = by_guid(guid).info.as_ref().expect_err("no usable SMInfo");
        assert!(e.contains(says) && e.contains(&guid.to_string()), "{guid}: {e}");
    }
    let e = by_guid(port_guid(&topo, hosts[4])).info.as_ref().unwrap_err();
    assert!(e.contains("0x000c"), "the port answers unsupported: {e}");

    // SM_Key is shown to a requester that presents it, and only then.
    b.set_sm_key(KEY);
    let found = rt.block_on(b.discover()).unwrap();
    let a_again = found.subnet.remote_sms.iter().find(|s| s.port_guid == a_info.guid).unwrap();
    assert_eq!(a_again.info.as_ref().unwrap().sm_key, KEY);
    b.set_sm_key(KEY ^ 1);
    let found = rt.block_on(b.discover()).unwrap();
    let a_again = found.subnet.remote_sms.iter().find(|s| s.port_guid == a_info.guid).unwrap();
    assert_eq!(a_again.info.as_ref().unwrap().sm_key, 0, "a wrong key sees 0");
    drop((a, silent, zero, liar));
}

#[test]
fn takeover_reads_qos_tables_and_rewrites_none_that_are_in_place() {
    let topo = Topology::from_spec_or_file(SPEC).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(11).build_shared().unwrap();
    let qos = QosConfig { enabled: true, high_limit: 4, ..Default::default() };
    master_a_then_gone(&topo, &fabric, qos.clone());
    let before = held(&topo, &fabric);
    let counts_before = fabric.lock().unwrap().smp_counts().clone();

    let mut b = sm_with_qos(&fabric, topo.hosts().last().unwrap(), qos);
    let rt = runtime();
    let found = rt.block_on(b.discover()).expect("B's discovery");
    let report = rt.block_on(b.take_charge(found, MasterMode::Takeover)).expect("B's takeover");
    assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
    let p = &report.program;
    assert!(p.qos_reads > 0, "SL-to-VL and VL arbitration tables read first: {p:?}");
    assert_eq!((p.sl2vl_sets, p.vlarb_sets, p.lft_blocks), (0, 0, 0), "{p:?}");
    assert_eq!(p.changing_sets(), 0, "{p:?}");
    let sets = sets_of(&counts_since(&fabric, &counts_before));
    assert_eq!(sets, HashMap::from([(AttributeId::PortInfo, p.port_sets as u64)]));
    assert_eq!(held(&topo, &fabric), before);
}
