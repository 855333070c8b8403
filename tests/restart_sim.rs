//! Routes are a function of the fabric, not of where the SM sits or of the
//! order discovery found things in; and an SM that starts on a fabric that
//! is already right writes nothing to its switches. On the in-process
//! fabric, for every kind the SM routes (with the engine `auto` picks):
//! an SM brings the fabric up and goes away; a fresh SM on the same host
//! (a restart), one on another host (a start elsewhere) and a standby
//! there taking over read the
//! forwarding tables and send no LFT block, no SwitchInfo, no P_Key and no
//! VL table Set; and a cold bring-up reads none of what it writes. A
//! switch that reboots (tables zeroed) is found cold and written again.

use std::collections::HashMap;
use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::mad::{AttributeId, Method};
use ibsm::program::SubnetManager;
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice};
use ibsm::subnet::{MasterMode, SweepReport};
use ibsm::topology::{NodeIdx, NodeKind, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::types::{Guid, Lid};

/// One of each kind `auto` routes differently: fat tree (ftree), torus
/// (dor), mesh, dragonfly and an irregular fabric (up/down or nue).
const FABRICS: [&str; 5] = [
    "fattree2:radix=8,leaves=4,spines=2,hosts=4",
    "torus2d:4x4,hosts=1",
    "mesh2d:3x4,hosts=1",
    "dragonfly:routers=4,hosts=2,global=1,groups=5",
    "random:switches=40,degree=4,hosts=2,seed=1",
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn sm_on(fabric: &SharedFabric, host: NodeIdx) -> SubnetManager<ibsm::transport::SmpClient<MadTransport>> {
    let dev = SimDevice::attach(fabric, host, 1).unwrap();
    dev.set_is_sm(true);
    let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
    // Two data VLs: enough for dor's datelines on the torus.
    SubnetManager::new(transport, SmConfig { max_op_vls: 2, ..SmConfig::default() }, false)
}

/// Every switch's LFT as the simulator holds it, by switch GUID.
fn lfts(topo: &Topology, fabric: &SharedFabric) -> HashMap<NodeIdx, Vec<u8>> {
    let f = fabric.lock().unwrap();
    topo.switches().map(|sw| (sw, f.lft(sw).unwrap_or(&[]).to_vec())).collect()
}

/// The routes a sweep computed, by switch GUID (LFT entries up to its top).
fn routes_of(report: &SweepReport) -> HashMap<Guid, Vec<u8>> {
    let top = report.lids.max_lid.0 as usize;
    report.routes.lfts.iter().map(|(g, t)| (*g, t[..=top.min(t.len() - 1)].to_vec())).collect()
}

fn counts(fabric: &SharedFabric) -> HashMap<(AttributeId, Method), u64> {
    fabric.lock().unwrap().smp_counts().clone()
}

/// Sets per attribute the simulator saw since `before`.
fn sets_since(fabric: &SharedFabric, before: &HashMap<(AttributeId, Method), u64>) -> HashMap<AttributeId, u64> {
    counts(fabric)
        .into_iter()
        .filter(|((_, m), _)| *m == Method::Set)
        .map(|((a, _), n)| (a, n - before.get(&(a, Method::Set)).copied().unwrap_or(0)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// Every switch delivers every assigned LID to the port that holds it.
fn check_routes(topo: &Topology, fabric: &SharedFabric, what: &str) {
    let f = fabric.lock().unwrap();
    let mut owners: Vec<(PortRef, Lid)> = Vec::new();
    for (i, node) in topo.nodes.iter().enumerate() {
        let ports: Vec<u8> = match node.kind {
            NodeKind::Switch => vec![0],
            _ => (1..=node.num_ports)
                .filter(|&p| topo.neighbor(PortRef { node: NodeIdx(i), port: p }).is_some())
                .collect(),
        };
        for port in ports {
            let r = PortRef { node: NodeIdx(i), port };
            owners.push((r, f.lid_of(r).unwrap()));
        }
    }
    for sw in topo.switches() {
        for &(owner, lid) in &owners {
            let path = f.trace_lid_route(sw, lid).unwrap_or_else(|e| panic!("{what}: LID {lid} from {sw:?}: {e}"));
            assert_eq!(path.last().map(|p| p.node), Some(owner.node), "{what}: LID {lid} from {sw:?}");
        }
    }
}

/// A fresh SM sweeps a fabric that is already right: it reads, and sends
/// no Set but PortInfo (a new master's MasterSMLID and ClientReregister).
fn assert_writes_nothing_to_switches(report: &SweepReport, since: HashMap<AttributeId, u64>, what: &str) {
    assert!(report.subnet_up(), "{what}: {:?} {:?}", report.inactive, report.problems());
    let p = &report.program;
    assert_eq!(p.lft_blocks, 0, "{what}: {p:?}");
    assert_eq!((p.switch_info_sets, p.pkey_sets, p.sl2vl_sets, p.vlarb_sets), (0, 0, 0, 0), "{what}: {p:?}");
    assert!(p.lft_reads > 0, "{what}: a programmed fabric is read before it is written: {p:?}");
    assert_eq!(p.armed + p.activated, 0, "{what}: {p:?}");
    let others: Vec<_> = since.iter().filter(|(a, _)| **a != AttributeId::PortInfo).collect();
    assert!(others.is_empty(), "{what}: Sets the simulator saw besides PortInfo: {others:?}");
}

#[test]
fn a_restart_or_a_start_on_another_host_finds_every_table_right() {
    for spec in FABRICS {
        let topo = Topology::from_spec_or_file(spec).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
        let hosts: Vec<NodeIdx> = topo.hosts().collect();
        let rt = runtime();

        // Cold bring-up: nothing is read that is about to be written.
        let mut a = sm_on(&fabric, hosts[0]);
        let first = rt.block_on(a.sweep()).expect("A's sweep");
        assert!(first.subnet_up(), "{spec}: {:?} {:?}", first.inactive, first.problems());
        assert_eq!(first.mode, MasterMode::Fresh);
        assert_eq!((first.program.lft_reads, first.program.qos_reads), (0, 0), "{spec} cold: {:?}", first.program);
        let end_port_blocks: usize = first
            .program
            .pkey_blocks
            .iter()
            .filter(|((g, port), _)| !is_switch_guid(&topo, *g) || *port == 0)
            .map(|(_, blocks)| blocks.len())
            .sum();
        assert_eq!(
            first.program.pkey_reads, end_port_blocks,
            "{spec} cold: only end ports' tables are read, no switch port's"
        );
        rt.block_on(a.sweep()).expect("A's second sweep");
        check_routes(&topo, &fabric, spec);
        let held = lfts(&topo, &fabric);
        let routes_a = routes_of(&first);
        drop(a);

        // A restart on the same host, a start on another host, and a
        // standby there taking over.
        let other = *hosts.last().unwrap();
        let cases = [
            (hosts[0], MasterMode::Fresh, "restart on the same host"),
            (other, MasterMode::Fresh, "start on another host"),
            (other, MasterMode::Takeover, "takeover on another host"),
        ];
        for (host, mode, what) in cases {
            let before = counts(&fabric);
            let mut b = sm_on(&fabric, host);
            let found = rt.block_on(b.discover()).expect("discovery");
            let report = rt.block_on(b.take_charge(found, mode)).expect("sweep");
            let what = format!("{spec}, {what}");
            assert_eq!(report.mode, mode);
            assert_eq!(routes_of(&report), routes_a, "{what}: the same routes wherever the SM runs");
            assert_writes_nothing_to_switches(&report, sets_since(&fabric, &before), &what);
            assert_eq!(lfts(&topo, &fabric), held, "{what}");
            // And it keeps writing nothing.
            let again = rt.block_on(b.sweep()).expect("next sweep");
            assert_eq!(again.program.sets(), 0, "{what}, next sweep: {:?}", again.program);
            assert_eq!(again.program.lft_reads, 0, "{what}: the cache knows every block now");
        }
    }
}

fn is_switch_guid(topo: &Topology, guid: Guid) -> bool {
    topo.switches().any(|sw| topo.node(sw).node_guid == guid)
}

#[test]
fn a_rebooted_switch_is_found_cold_and_written_again() {
    for spec in [FABRICS[0], FABRICS[4]] {
        let topo = Topology::from_spec_or_file(spec).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
        let host = topo.hosts().next().unwrap();
        let rt = runtime();
        let mut sm = sm_on(&fabric, host);
        rt.block_on(sm.sweep()).expect("bring-up");
        rt.block_on(sm.sweep()).expect("second sweep");
        let held = lfts(&topo, &fabric);
        // A switch the SM does not hang off reboots: LFT, P_Keys, VL
        // tables and LID gone.
        let sm_switch = topo.neighbor(PortRef { node: host, port: 1 }).unwrap().node;
        let victim = topo.switches().find(|&s| s != sm_switch).unwrap();
        fabric.lock().unwrap().restart_node(victim).unwrap();
        assert!(fabric.lock().unwrap().lft(victim).is_none_or(|t| t.is_empty()));
        let report = rt.block_on(sm.sweep()).expect("sweep after the reboot");
        assert!(report.subnet_up(), "{spec}: {:?} {:?}", report.inactive, report.problems());
        let blocks = report.lids.max_lid.0 as usize / 64 + 1;
        assert_eq!(
            report.program.lft_blocks, blocks,
            "{spec}: the rebooted switch's table, whole: {:?}",
            report.program
        );
        assert_eq!(report.program.lft_reads, 0, "{spec}: a cold switch is not read");
        assert_eq!(lfts(&topo, &fabric), held, "{spec}: every table as before the reboot");
        check_routes(&topo, &fabric, spec);
    }
}

fn sm_with_engine(
    fabric: &SharedFabric,
    host: NodeIdx,
    engine: &str,
) -> SubnetManager<ibsm::transport::SmpClient<MadTransport>> {
    let dev = SimDevice::attach(fabric, host, 1).unwrap();
    dev.set_is_sm(true);
    let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
    let config = SmConfig { max_op_vls: 2, routing_engine: vec![engine.to_string()], ..SmConfig::default() };
    SubnetManager::new(transport, config, false)
}

/// A fabric another SM programmed (here: this SM with another engine, as
/// OpenSM would leave it) keeps its routes when they are complete and free
/// of credit loops on one VL: a takeover or a start sends no LFT block.
/// Routes with a credit loop (minhop on a torus) are routed afresh.
#[test]
fn valid_routes_another_sm_left_are_kept_and_unsafe_ones_replaced() {
    let cases = [
        ("fattree2:radix=8,leaves=4,spines=2,hosts=4", "updn", true),
        ("mesh2d:3x4,hosts=1", "updn", true),
        ("torus2d:6x6,hosts=1", "minhop", false),
    ];
    for (spec, engine, kept) in cases {
        let topo = Topology::from_spec_or_file(spec).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
        let hosts: Vec<NodeIdx> = topo.hosts().collect();
        let rt = runtime();
        let mut a = sm_with_engine(&fabric, hosts[0], engine);
        assert!(rt.block_on(a.sweep()).unwrap().subnet_up(), "{spec}: {engine} brings it up");
        rt.block_on(a.sweep()).unwrap();
        let held = lfts(&topo, &fabric);
        drop(a);
        for (round, mode) in [MasterMode::Takeover, MasterMode::Fresh].into_iter().enumerate() {
            let mut b = sm_on(&fabric, *hosts.last().unwrap());
            let found = rt.block_on(b.discover()).unwrap();
            let report = rt.block_on(b.take_charge(found, mode)).unwrap();
            let what = format!("{spec} programmed by {engine}, {mode:?}");
            assert!(report.subnet_up(), "{what}");
            assert_eq!(report.routing.kept, kept, "{what}: {:?}", report.routing);
            if kept {
                assert_eq!(report.routing.engine_name(), "kept");
                assert_eq!(report.program.lft_blocks, 0, "{what}: {:?}", report.program);
                assert_eq!(lfts(&topo, &fabric), held, "{what}");
            } else {
                // Replaced by the takeover; the start after it finds this
                // SM's own routes (layered on VLs: not kept on one VL
                // either, computed again and equal).
                assert_eq!(report.program.lft_blocks > 0, round == 0, "{what}: {:?}", report.program);
                assert_ne!(report.routing.engine_name(), "kept");
            }
            check_routes(&topo, &fabric, &what);
        }
    }
}

/// Routes another SM left and a takeover kept stay where a later loss
/// leaves them whole: a trunk down after the takeover moves only the
/// routes that crossed it, though this SM's engine (ftree) would route the
/// fat tree differently from the updn tables it kept.
#[test]
fn kept_routes_survive_a_later_loss_where_it_left_them_whole() {
    let spec = "fattree2:radix=8,leaves=4,spines=2,hosts=4";
    let topo = Topology::from_spec_or_file(spec).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
    let hosts: Vec<NodeIdx> = topo.hosts().collect();
    let rt = runtime();
    let mut a = sm_with_engine(&fabric, hosts[0], "updn");
    assert!(rt.block_on(a.sweep()).unwrap().subnet_up());
    rt.block_on(a.sweep()).unwrap();
    drop(a);
    let mut b = sm_on(&fabric, *hosts.last().unwrap());
    let found = rt.block_on(b.discover()).unwrap();
    let report = rt.block_on(b.take_charge(found, MasterMode::Takeover)).unwrap();
    assert!(report.routing.kept, "{:?}", report.routing);
    let held = lfts(&topo, &fabric);

    let trunk = *topo.trunks().next().unwrap();
    fabric.lock().unwrap().link_down(trunk.a).unwrap();
    let found = rt.block_on(b.light_sweep());
    let suspects = ibsm::sweep::react::switch_suspects(found.changed, found.silent);
    let reaction = rt.block_on(b.react(ibsm::subnet::Trigger::LightSweep, &suspects)).unwrap();
    let ibsm::program::Reaction::Programmed(report) = reaction else { panic!("not programmed: {reaction:?}") };
    assert!(report.routing.intact_kept > 0, "the kept updn routes the loss left whole: {:?}", report.routing);
    check_routes(&topo, &fabric, "trunk down after keeping updn's routes");
    // A few entries moved (those whose paths the loss broke), not the
    // tables.
    let now = lfts(&topo, &fabric);
    let changed: usize = held.iter().map(|(sw, t)| t.iter().zip(&now[sw]).filter(|(x, y)| x != y).count()).sum();
    let total: usize = held.values().map(|t| t.len()).sum();
    assert!(changed > 0 && changed * 4 < total, "{changed} of {total} entries changed");

    // The trunk comes back: a change that adds something, which this SM's
    // own routes would meet with a fresh run of its engine. The kept
    // routes are not replaced by ftree's: they come back whole.
    fabric.lock().unwrap().link_up(trunk.a).unwrap();
    let found = rt.block_on(b.light_sweep());
    let suspects = ibsm::sweep::react::switch_suspects(found.changed, found.silent);
    let reaction = rt.block_on(b.react(ibsm::subnet::Trigger::LightSweep, &suspects)).unwrap();
    let ibsm::program::Reaction::Programmed(report) = reaction else { panic!("not programmed: {reaction:?}") };
    check_routes(&topo, &fabric, "trunk back up after keeping updn's routes");
    assert_eq!(lfts(&topo, &fabric), held, "the kept routes, as the takeover found them");
    assert!(report.routing.untouched, "whole again, they need no engine run: {:?}", report.routing);
    assert!(report.program.lft_blocks <= topo.switches().count(), "{:?}", report.program);

    // A heavy sweep routes afresh: ftree's tables replace them.
    let report = rt.block_on(b.sweep()).unwrap();
    assert!(report.subnet_up());
    assert_eq!(report.routing.engine_name(), "ftree");
    assert_ne!(lfts(&topo, &fabric), held, "ftree routes this fat tree otherwise than updn");
    check_routes(&topo, &fabric, "a heavy sweep after keeping updn's routes");
}

/// A switch gone stays gone across a restart: the SM that saw it go kept
/// what the switches held for its LIDs and their LinearFDBTop, and a fresh
/// SM on the same host reads the tables and keeps them too, rather than
/// clearing those LIDs' entries in every block they fall in.
#[test]
fn a_restart_after_a_switch_went_writes_no_table() {
    for spec in FABRICS {
        let topo = Topology::from_spec_or_file(spec).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
        let host = topo.hosts().next().unwrap();
        let rt = runtime();
        let mut a = sm_on(&fabric, host);
        assert!(rt.block_on(a.sweep()).unwrap().subnet_up(), "{spec}: bring-up");
        rt.block_on(a.sweep()).unwrap();
        // The last switch (the highest LID), cut from the rest.
        let sm_switch = topo.neighbor(PortRef { node: host, port: 1 }).unwrap().node;
        let victim = topo.switches().filter(|&s| s != sm_switch).last().unwrap();
        for l in topo.trunks().filter(|l| l.a.node == victim || l.b.node == victim) {
            fabric.lock().unwrap().link_down(l.a).unwrap();
        }
        let gone = rt.block_on(a.sweep()).unwrap();
        let what = format!("{spec}, {} gone", topo.node(victim).name);
        assert!(gone.program.lft_blocks > 0, "{what}: routes moved off the switch: {:?}", gone.program);
        rt.block_on(a.sweep()).unwrap();
        let held = lfts(&topo, &fabric);
        drop(a);
        let before = counts(&fabric);
        let mut b = sm_on(&fabric, host);
        let found = rt.block_on(b.discover()).expect("discovery");
        let report = rt.block_on(b.take_charge(found, MasterMode::Fresh)).expect("sweep");
        let p = &report.program;
        assert_eq!((p.lft_blocks, p.switch_info_sets), (0, 0), "{what}, restart: LFT blocks, SwitchInfo Sets");
        let others: Vec<_> =
            sets_since(&fabric, &before).into_iter().filter(|(a, _)| *a != AttributeId::PortInfo).collect();
        assert!(others.is_empty(), "{what}, restart: Sets besides PortInfo: {others:?}");
        assert_eq!(lfts(&topo, &fabric), held, "{what}, restart");
    }
}
