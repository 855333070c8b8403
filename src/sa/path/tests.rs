//! PathRecords on real snapshots: a fabric of every link generation is
//! built in the simulator, ibsm's SubnetManager sweeps it, and the answers
//! are judged against the simulator's own state (its LFT walk, its ports'
//! PortInfo) and against link rates written out by hand.

use std::time::Duration;

use super::*;
use crate::config::SmConfig;
use crate::exchange::txn::TxnConfig;
use crate::mad::sa::{multi_path_mask as mm, path_mask as pm, MultiPathRecordRepr};
use crate::mad::PortState;
use crate::program::SubnetManager;
use crate::sim::{Fabric, FabricBuilder, SharedFabric, SimDevice};
use crate::subnet::SweepReport;
use crate::topology::*;
use crate::transport::io_thread::MadTransport;
use crate::types::{Guid, Lid};

const S1: usize = 0;
const S2: usize = 1;
const H1: usize = 2;
const H2: usize = 3;
const H3: usize = 4;
const H4: usize = 5;
const H5: usize = 6;
const H6: usize = 7;

fn p(node: usize, port: u8) -> PortRef {
    PortRef { node: NodeIdx(node), port }
}

/// A cable: (node, port, node, port, width, speed, extended speed, the IBA
/// rate code of that link).
type Cable = (usize, u8, usize, u8, LinkWidthCode, LinkSpeedCode, LinkSpeedExtCode, u8);

/// Each cable with the rate code the IBA gives it, by hand.
const CABLES: [Cable; 8] = [
    (H1, 1, S1, 1, WIDTH_4X, SPEED_QDR, SPEED_NDR, 21),      // 400
    (H2, 1, S1, 2, WIDTH_2X, SPEED_QDR, SPEED_HDR, 16),      // 100
    (S1, 3, S2, 1, WIDTH_2X, SPEED_QDR, SPEED_XDR, 21),      // 400
    (S1, 4, S2, 2, WIDTH_4X, SPEED_QDR, SPEED_XDR, 23),      // 800
    (H3, 1, S2, 3, WIDTH_4X, SPEED_QDR, SPEED_XDR, 23),      // 800
    (H4, 1, S2, 4, WIDTH_1X, SPEED_QDR, SPEED_FDR, 11),      // 14
    (H5, 1, S1, 5, WIDTH_12X, SPEED_DDR, SPEED_EXT_NONE, 8), // 60
    (H6, 1, S2, 5, WIDTH_8X, SPEED_SDR, SPEED_EXT_NONE, 6),  // 20
];

/// Two switches with two cables between them (XDR 2x and 4x) and six
/// hosts at NDR 4x, HDR 2x, XDR 4x, FDR 1x, DDR 12x and SDR 8x.
fn fabric_a() -> Topology {
    let mut t = Topology::default();
    t.add_node(Node::new(NodeKind::Switch, "S1", 8, Guid(0x200000)));
    t.add_node(Node::new(NodeKind::Switch, "S2", 8, Guid(0x200001)));
    for (i, name) in ["H1", "H2", "H3", "H4", "H5", "H6"].into_iter().enumerate() {
        t.add_node(Node::new(NodeKind::Ca, name, 1, Guid(0x100000 + 2 * i as u64)));
    }
    for (a, pa, b, pb, w, s, e, _) in CABLES {
        t.connect_ext(p(a, pa), p(b, pb), w, s, e);
    }
    t.validate().unwrap();
    t
}

fn cable_rate(a: PortRef, b: PortRef) -> u8 {
    CABLES
        .iter()
        .find(|c| (p(c.0, c.1) == a && p(c.2, c.3) == b) || (p(c.0, c.1) == b && p(c.2, c.3) == a))
        .map(|c| c.7)
        .unwrap_or_else(|| panic!("no cable {a:?}-{b:?}"))
}

struct Swept {
    topo: Topology,
    fabric: SharedFabric,
    sm: SubnetManager<crate::transport::SmpClient<MadTransport>>,
    report: SweepReport,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Sweeps `topo` with the SM on the first host: MTUCap 4096 everywhere,
/// except what `prep` changes before the sweep.
fn sweep(topo: Topology, config: SmConfig, prep: impl FnOnce(&mut Fabric)) -> Swept {
    let fabric = FabricBuilder::new(&topo).seed(9).mtu_cap(5).build_shared().unwrap();
    prep(&mut fabric.lock().unwrap());
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, host, 1).unwrap();
    let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
    let mut sm = SubnetManager::new(transport, config, false);
    let report = runtime().block_on(sm.sweep()).expect("sweep");
    assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
    Swept { topo, fabric, sm, report }
}

fn resweep(s: &mut Swept) {
    s.report = runtime().block_on(s.sm.sweep()).expect("sweep");
}

/// Fabric A with H4 an older device (MTUCap 1024).
fn swept_a(lmc: u8) -> Swept {
    // minhop named: the SL checks below are minhop's (SL 0 everywhere).
    let config = SmConfig { lmc, routing_engine: vec!["minhop".into()], ..SmConfig::default() };
    sweep(fabric_a(), config, |f| f.set_mtu_cap(p(H4, 1), 3).unwrap())
}

/// The end port of topology port `r` (port 0 for a switch).
fn end_of(index: &PathIndex, topo: &Topology, r: PortRef) -> u32 {
    index.end_by_guid(topo.node(r.node).port_guid(r.port)).expect("an end port")
}

/// Every LID-bearing port of the topology.
fn lid_ports(topo: &Topology) -> Vec<PortRef> {
    topo.nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| match n.kind {
            NodeKind::Switch => vec![p(i, 0)],
            _ => (1..=n.num_ports).map(|port| p(i, port)).filter(|&r| topo.neighbor(r).is_some()).collect(),
        })
        .collect()
}

/// What the simulator says of the route from `src` to `dlid`: links
/// crossed, the smallest MTU of the ports on them (and of a switch's port
/// 0 at either end), the slowest cable rate (from [`CABLES`]), and the
/// port reached.
fn sim_route(s: &Swept, src: PortRef, dlid: Lid) -> (u8, u8, u8, PortRef) {
    let f = s.fabric.lock().unwrap();
    let topo = &s.topo;
    let eff = |r: PortRef| {
        let pi = f.port_info(r).unwrap();
        pi.mtu_cap.min(pi.neighbor_mtu)
    };
    let (mut hops, mut mtu, mut rate) = (0u8, 5u8, 24u8);
    let first_switch = if topo.node(src.node).kind == NodeKind::Switch {
        mtu = mtu.min(f.port_info(src).unwrap().mtu_cap);
        src.node
    } else {
        let far = topo.neighbor(src).unwrap();
        hops += 1;
        mtu = mtu.min(eff(src)).min(eff(far));
        rate = rate::slower(rate, cable_rate(src, far));
        far.node
    };
    let path = f.trace_lid_route(first_switch, dlid).unwrap_or_else(|e| panic!("sim: {e}"));
    for &hop in &path {
        if topo.node(hop.node).kind == NodeKind::Switch && hop.port != 0 {
            let far = topo.neighbor(hop).unwrap();
            hops += 1;
            mtu = mtu.min(eff(hop)).min(eff(far));
            rate = rate::slower(rate, cable_rate(hop, far));
        }
    }
    let end = *path.last().unwrap();
    if end.port == 0 {
        mtu = mtu.min(f.port_info(end).unwrap().mtu_cap);
    }
    (hops, mtu, rate, end)
}

fn gid(index: &PathIndex, e: u32) -> [u8; 16] {
    index.end(e).gid()
}

/// A query from end `src` to end `dst` by GID, with `mask` more bits and
/// fields set by `edit`.
fn between(
    index: &PathIndex,
    src: u32,
    dst: u32,
    mask: u64,
    edit: impl FnOnce(&mut PathRecordRepr),
) -> (PathRecordRepr, u64) {
    let mut q = PathRecordRepr { sgid: gid(index, src), dgid: gid(index, dst), ..Default::default() };
    edit(&mut q);
    (q, pm::SGID | pm::DGID | mask)
}

fn ask(index: &PathIndex, q: (PathRecordRepr, u64)) -> Result<Vec<PathRecordRepr>, u16> {
    path_records(index, &q.0, q.1, Lid(0), &PathConfig::default())
}

#[test]
fn every_path_follows_the_programmed_route_with_its_minimum_mtu_and_rate() {
    let s = swept_a(0);
    let index = PathIndex::build(&s.report);
    let ports = lid_ports(&s.topo);
    assert_eq!(index.ends().len(), ports.len());
    let f_lid = |r: PortRef| s.fabric.lock().unwrap().lid_of(r).unwrap();
    let mut seen_rates = std::collections::BTreeSet::new();
    for &a in &ports {
        let src = end_of(&index, &s.topo, a);
        assert_eq!(index.end(src).base_lid, f_lid(a), "the index's LID is the one the port holds");
        for &b in &ports {
            let dst = end_of(&index, &s.topo, b);
            let dlid = f_lid(b);
            let route = index.route(src, dlid).unwrap_or_else(|e| panic!("{a:?} -> {b:?}: {e:?}"));
            assert_eq!(route.dest, dst);
            let records = ask(&index, between(&index, src, dst, 0, |_| {})).unwrap();
            assert_eq!(records.len(), 1, "{a:?} -> {b:?}");
            let r = records[0];
            if a == b {
                assert_eq!((route.hops, r.packet_life_time), (0, 0), "loopback");
                continue;
            }
            let (hops, mtu, rate, end) = sim_route(&s, a, dlid);
            assert_eq!(end, b, "the simulator's walk ends at the same port");
            assert_eq!(route.hops, hops, "{a:?} -> {b:?} hops");
            // A reversible record carries what the way back carries too.
            let (_, back_mtu, back_rate, back_end) = sim_route(&s, b, f_lid(a));
            assert_eq!(back_end, a);
            let (mtu, rate) = (mtu.min(back_mtu), rate::slower(rate, back_rate));
            assert_eq!((r.mtu, r.rate), (mtu, rate), "{a:?} -> {b:?} MTU and rate");
            assert_eq!((r.slid, r.dlid), (f_lid(a).0, dlid.0));
            assert_eq!((r.sl, r.pkey, r.packet_life_time, r.preference), (0, 0xFFFF, 18, 0));
            assert_eq!((r.mtu_selector, r.rate_selector, r.packet_life_time_selector), (2, 2, 2));
            assert!(r.reversible, "{a:?} -> {b:?}");
            seen_rates.insert(r.rate);
        }
    }
    // The paths between hosts meet every link generation's minimum.
    for code in [21, 16, 23, 11, 8, 6] {
        assert!(seen_rates.contains(&code), "no path at rate code {code}: {seen_rates:?}");
    }
    // H1 (NDR 4x) to H3 (XDR 4x) over either XDR cable: 400 Gb/s.
    let (h1, h3) = (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H3, 1)));
    let r = ask(&index, between(&index, h1, h3, 0, |_| {})).unwrap()[0];
    assert_eq!((r.rate, r.mtu), (21, 5));
    // Paths through the older H4 carry 1024 bytes, and so do paths to a
    // switch (its port 0's MTUCap in the simulator, as in ibsim).
    let h4 = end_of(&index, &s.topo, p(H4, 1));
    assert_eq!(ask(&index, between(&index, h1, h4, 0, |_| {})).unwrap()[0].mtu, 3);
    let sw = end_of(&index, &s.topo, p(S2, 0));
    assert_eq!(ask(&index, between(&index, h3, sw, 0, |_| {})).unwrap()[0].mtu, 3);
}

#[test]
fn the_simulator_reports_every_generation_and_the_sweep_keeps_it() {
    let s = swept_a(0);
    let f = s.fabric.lock().unwrap();
    let port_info = |r: PortRef| {
        let node = s.report.subnet.by_guid(s.topo.node(r.node).node_guid).unwrap();
        node.ports[r.port as usize].info.unwrap()
    };
    use crate::mad::port_info::{link_speed_ext, link_speed_ext2, CapabilityMask2};
    for (a, pa, b, pb, w, _, e, code) in CABLES {
        for r in [p(a, pa), p(b, pb)] {
            let (pi, kept) = (f.port_info(r).unwrap(), port_info(r));
            let speeds = |x: &crate::mad::PortInfoRepr| {
                (
                    x.link_width_active,
                    x.link_speed_active,
                    x.link_speed_ext_active,
                    x.link_speed_ext_active2,
                    x.capability_mask2,
                )
            };
            assert_eq!(speeds(&pi), speeds(&kept), "the snapshot holds what the port reports ({r:?})");
            assert_eq!(pi.link_width_active, w);
            match e {
                SPEED_XDR => {
                    assert_eq!((pi.link_speed_ext_active, pi.link_speed_ext_active2), (0, link_speed_ext2::XDR))
                }
                SPEED_EXT_NONE => assert_eq!((pi.link_speed_ext_active, pi.link_speed_ext_active2), (0, 0)),
                e => assert_eq!((pi.link_speed_ext_active, pi.link_speed_ext_active2), (e, 0)),
            }
            let caps = if s.topo.node(r.node).kind == NodeKind::Switch { port_info(p(r.node.0, 0)) } else { pi };
            assert_eq!(rate::port_rate(&pi, &caps), code, "{r:?}");
        }
    }
    // Capabilities: XDR on the XDR host and on both switches (at port 0).
    for r in [p(H3, 1), p(S1, 0), p(S2, 0)] {
        let m2 = port_info(r).capability_mask2;
        assert_ne!(m2 & CapabilityMask2::IS_LINK_SPEED_XDR_SUPPORTED, 0, "{r:?}");
        assert_ne!(m2 & CapabilityMask2::IS_EXTENDED_SPEEDS_2_SUPPORTED, 0, "{r:?}");
    }
    assert_eq!(port_info(p(H2, 1)).capability_mask2 & CapabilityMask2::IS_LINK_SPEED_NDR_SUPPORTED, 0);
    // NDR supports FDR..NDR and enables NDR only; XDR enables only XDR.
    let h1 = port_info(p(H1, 1));
    assert_eq!((h1.link_speed_ext_supported, h1.link_speed_ext_enabled), (0xF, link_speed_ext::NDR));
    let h3 = port_info(p(H3, 1));
    assert_eq!((h3.link_speed_ext_enabled, h3.link_speed_ext_enabled2, h3.link_speed_ext_supported2), (0, 1, 1));
}

#[test]
fn selectors_bind_mtu_rate_and_life_time() {
    let s = swept_a(0);
    let index = PathIndex::build(&s.report);
    let (h1, h3) = (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H3, 1)));
    let h4 = end_of(&index, &s.topo, p(H4, 1));
    // H1 -> H3 carries MTU 5 at rate 21 with life time 18.
    let one = |mask: u64, edit: fn(&mut PathRecordRepr)| -> Option<PathRecordRepr> {
        let got = ask(&index, between(&index, h1, h3, mask, edit)).unwrap();
        assert!(got.len() <= 1);
        got.first().copied()
    };
    let mtu = pm::MTU_SELECTOR | pm::MTU;
    assert_eq!(one(mtu, |q| (q.mtu_selector, q.mtu) = (0, 4)).map(|r| r.mtu), Some(5));
    assert_eq!(one(mtu, |q| (q.mtu_selector, q.mtu) = (0, 5)), None, "nothing above 4096");
    assert_eq!(one(mtu, |q| (q.mtu_selector, q.mtu) = (1, 4)).map(|r| r.mtu), Some(3));
    assert_eq!(one(mtu, |q| (q.mtu_selector, q.mtu) = (1, 1)), None, "nothing below 256");
    assert_eq!(one(mtu, |q| (q.mtu_selector, q.mtu) = (2, 3)).map(|r| r.mtu), Some(3));
    assert_eq!(one(mtu, |q| (q.mtu_selector, q.mtu) = (3, 1)).map(|r| r.mtu), Some(5));
    assert_eq!(one(pm::MTU, |q| q.mtu = 4).map(|r| r.mtu), Some(4), "a value alone is 'exactly'");
    assert_eq!(one(pm::MTU_SELECTOR, |q| q.mtu_selector = 0).map(|r| r.mtu), Some(5), "a selector alone is ignored");
    let rate = pm::RATE_SELECTOR | pm::RATE;
    assert_eq!(one(rate, |q| (q.rate_selector, q.rate) = (0, 18)).map(|r| r.rate), Some(21), "400 > 300");
    assert_eq!(one(rate, |q| (q.rate_selector, q.rate) = (0, 21)), None);
    assert_eq!(one(rate, |q| (q.rate_selector, q.rate) = (1, 21)).map(|r| r.rate), Some(18), "under 400: 300");
    assert_eq!(one(rate, |q| (q.rate_selector, q.rate) = (1, 23)).map(|r| r.rate), Some(21));
    assert_eq!(one(rate, |q| (q.rate_selector, q.rate) = (2, 16)).map(|r| r.rate), Some(16));
    assert_eq!(one(rate, |q| (q.rate_selector, q.rate) = (2, 23)), None, "no 800 on this path");
    assert_eq!(one(rate, |q| (q.rate_selector, q.rate) = (3, 2)).map(|r| r.rate), Some(21));
    let life = pm::PACKET_LIFE_TIME_SELECTOR | pm::PACKET_LIFE_TIME;
    assert_eq!(
        one(life, |q| (q.packet_life_time_selector, q.packet_life_time) = (0, 17)).map(|r| r.packet_life_time),
        Some(18)
    );
    assert_eq!(one(life, |q| (q.packet_life_time_selector, q.packet_life_time) = (0, 18)), None);
    assert_eq!(
        one(life, |q| (q.packet_life_time_selector, q.packet_life_time) = (1, 10)).map(|r| r.packet_life_time),
        Some(9)
    );
    assert_eq!(one(life, |q| (q.packet_life_time_selector, q.packet_life_time) = (2, 20)), None);
    assert_eq!(
        one(life, |q| (q.packet_life_time_selector, q.packet_life_time) = (2, 10)).map(|r| r.packet_life_time),
        Some(10)
    );
    // SL: minhop routes everything on SL 0.
    assert!(one(pm::SL, |q| q.sl = 0).is_some());
    assert_eq!(one(pm::SL, |q| q.sl = 1), None);
    // Bad codes are refused, not answered.
    assert_eq!(ask(&index, between(&index, h1, h3, mtu, |q| q.mtu = 6)), Err(sa_status::REQ_INVALID));
    assert_eq!(ask(&index, between(&index, h1, h3, rate, |q| q.rate = 25)), Err(sa_status::REQ_INVALID));
    assert_eq!(ask(&index, between(&index, h1, h3, rate, |q| q.rate = 1)), Err(sa_status::REQ_INVALID));
    assert_eq!(ask(&index, between(&index, h1, h3, 1 << 0, |_| {})), Err(sa_status::INSUFFICIENT_COMPONENTS));
    assert_eq!(ask(&index, between(&index, h1, h3, 1 << 30, |_| {})), Err(sa_status::REQ_INVALID));
    // The older H4's 1024 bytes: "exactly 2048" cannot be had.
    assert_eq!(ask(&index, between(&index, h1, h4, mtu, |q| (q.mtu_selector, q.mtu) = (2, 4))).unwrap(), vec![]);
    // Fields the requester chooses come back as asked.
    let echo = pm::SERVICE_ID | pm::FLOW_LABEL | pm::TCLASS | pm::QOS_CLASS | pm::HOP_LIMIT;
    let r = ask(
        &index,
        between(&index, h1, h3, echo, |q| {
            (q.service_id, q.flow_label, q.tclass, q.qos_class, q.hop_limit) = (0x1000_0000_0000_0042, 0x12345, 7, 3, 1)
        }),
    )
    .unwrap()[0];
    assert_eq!(
        (r.service_id, r.flow_label, r.tclass, r.qos_class, r.hop_limit),
        (0x1000_0000_0000_0042, 0x12345, 7, 3, 1)
    );
}

#[test]
fn pkeys_must_be_shared() {
    let s = swept_a(0);
    let index = PathIndex::build(&s.report);
    let (h1, h3) = (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H3, 1)));
    assert!(!s.report.program.pkey_blocks.is_empty(), "the sweep kept the hosts' P_Key blocks");
    let with = |pkey: u16| ask(&index, between(&index, h1, h3, pm::PKEY, |q| q.pkey = pkey)).unwrap();
    assert_eq!(with(0xFFFF)[0].pkey, 0xFFFF);
    assert_eq!(with(0x7FFF)[0].pkey, 0x7FFF, "a limited member reaches the full members");
    assert_eq!(with(0x8001), vec![], "a partition neither port holds");
    // H3 holds only a limited membership: two limited members cannot talk.
    let mut report = s.report.clone();
    let h3_guid = s.topo.node(NodeIdx(H3)).port_guid(1);
    let h3_table = report.program.pkey_blocks.get_mut(&(s.topo.node(NodeIdx(H3)).node_guid, 1)).unwrap();
    for k in h3_table.iter_mut().flat_map(|b| b.pkeys.iter_mut()) {
        if *k == 0xFFFF {
            *k = 0x7FFF;
        }
    }
    let index = PathIndex::build(&report);
    assert_eq!(index.pkeys(index.end_by_guid(h3_guid).unwrap()), &[0x7FFF]);
    let r = ask(&index, between(&index, h1, h3, 0, |_| {})).unwrap();
    assert_eq!(r[0].pkey, 0xFFFF, "H1 is a full member");
    assert_eq!(ask(&index, between(&index, h3, h3, pm::PKEY, |q| q.pkey = 0x7FFF)).unwrap(), vec![]);
}

/// Sets end port `host`'s (port 1) table to `blocks` blocks holding
/// `keys` at (block, index).
fn set_table(report: &mut SweepReport, topo: &Topology, host: usize, blocks: usize, keys: &[(usize, usize, u16)]) {
    let mut t = vec![crate::mad::PKeyTableBlockRepr::default(); blocks];
    for &(b, i, k) in keys {
        t[b].pkeys[i] = k;
    }
    report.program.pkey_blocks.insert((topo.node(NodeIdx(host)).node_guid, 1), t);
}

#[test]
fn every_block_counts_and_the_lowest_shared_partition_is_answered() {
    let s = swept_a(0);
    let mut report = s.report.clone();
    // H1 holds the default key in block 0 and 0x8020 far into block 1; H3
    // holds 0x8020 and no default key; H2 only the default one.
    set_table(&mut report, &s.topo, H1, 2, &[(0, 0, 0xFFFF), (1, 30, 0x8020)]);
    set_table(&mut report, &s.topo, H3, 1, &[(0, 7, 0x8020)]);
    let index = PathIndex::build(&report);
    let (h1, h2, h3) =
        (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H2, 1)), end_of(&index, &s.topo, p(H3, 1)));
    assert_eq!(index.pkeys(h1), &[0x8020, 0xFFFF], "both blocks, by partition");
    let r = ask(&index, between(&index, h1, h3, 0, |_| {})).unwrap();
    assert_eq!(r[0].pkey, 0x8020, "the one partition shared, found in block 1");
    assert_eq!(ask(&index, between(&index, h1, h3, pm::PKEY, |q| q.pkey = 0xFFFF)).unwrap(), vec![]);
    assert_eq!(ask(&index, between(&index, h2, h3, 0, |_| {})).unwrap(), vec![], "H2 and H3 share nothing");
    // A lower partition both hold (H3 a limited member): that one, with
    // H1's full key, whichever block holds it; both keys of 0x20 on H1
    // give the full one.
    set_table(&mut report, &s.topo, H1, 2, &[(0, 0, 0xFFFF), (0, 3, 0x0020), (1, 30, 0x8020), (1, 31, 0x8010)]);
    set_table(&mut report, &s.topo, H3, 1, &[(0, 7, 0x8020), (0, 9, 0x0010)]);
    let index = PathIndex::build(&report);
    assert_eq!(index.pkeys(h1), &[0x8010, 0x8020, 0x0020, 0xFFFF]);
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |_| {})).unwrap()[0].pkey, 0x8010);
    assert_eq!(ask(&index, between(&index, h3, h1, 0, |_| {})).unwrap()[0].pkey, 0x0010, "the source's key");

    // A requester that must share with both ends: H2 (default only) gets
    // no path between H1 and H3, H1 gets its own, and without the check
    // H2 gets it too.
    let strict = PathConfig { requester_must_share: true, ..PathConfig::default() };
    let (q, mask) = between(&index, h1, h3, 0, |_| {});
    let lid = |e: u32| index.end(e).base_lid;
    assert_eq!(path_records(&index, &q, mask, lid(h2), &strict).unwrap(), vec![]);
    assert_eq!(path_records(&index, &q, mask, lid(h1), &strict).unwrap().len(), 1);
    assert_eq!(path_records(&index, &q, mask, Lid(0xBFFF), &strict).unwrap(), vec![], "a requester no port is");
    assert_eq!(path_records(&index, &q, mask, lid(h2), &PathConfig::default()).unwrap().len(), 1);
    // H2's "from me to all": only the ports sharing its default partition.
    let from_h2 = path_records(&index, &PathRecordRepr::default(), 0, lid(h2), &strict).unwrap();
    let reached: std::collections::BTreeSet<u16> = from_h2.iter().map(|r| r.dlid).collect();
    assert!(reached.contains(&lid(h2).0) && !reached.contains(&lid(h3).0), "{reached:?}");
    assert!(reached.contains(&lid(h1).0), "H1 still holds the default key");
}

#[test]
fn numb_path_spreads_over_both_lmc_ranges() {
    let s = swept_a(2);
    let index = PathIndex::build(&s.report);
    let (h1, h3) = (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H3, 1)));
    let (s_base, d_base) = (index.end(h1).base_lid.0, index.end(h3).base_lid.0);
    assert_eq!((index.end(h1).lmc, index.end(h3).lmc), (2, 2));
    let all = ask(&index, between(&index, h1, h3, 0, |_| {})).unwrap();
    assert_eq!(all.len(), 16, "every (SLID, DLID) pair of two LMC-2 ports");
    let pairs: std::collections::BTreeSet<(u16, u16)> = all.iter().map(|r| (r.slid, r.dlid)).collect();
    assert_eq!(pairs.len(), 16);
    for (i, r) in all.iter().take(4).enumerate() {
        assert_eq!((r.slid, r.dlid, r.preference), (s_base + i as u16, d_base + i as u16, 0), "the diagonal first");
    }
    assert!(all[4..].iter().all(|r| r.preference == 2));
    let four = ask(&index, between(&index, h1, h3, pm::NUMB_PATH, |q| q.numb_path = 4)).unwrap();
    assert_eq!(four, all[..4].to_vec());
    assert_eq!(ask(&index, between(&index, h1, h3, pm::NUMB_PATH, |q| q.numb_path = 0)).unwrap(), vec![]);
    // The four diagonal DLIDs leave S1 by both cables to S2: distinct routes.
    let f = s.fabric.lock().unwrap();
    let out: std::collections::BTreeSet<u8> =
        four.iter().map(|r| f.lft_port(NodeIdx(S1), Lid(r.dlid)).unwrap()).collect();
    assert_eq!(out, [3, 4].into(), "both inter-switch cables");
    drop(f);
    // Each record's MTU and rate are the simulator's along its own route.
    for r in &four {
        let (hops, mtu, rate, end) = sim_route(&s, p(H1, 1), Lid(r.dlid));
        let (_, back_mtu, back_rate, _) = sim_route(&s, p(H3, 1), Lid(r.slid));
        assert_eq!((hops, mtu.min(back_mtu), rate::slower(rate, back_rate), end), (3, r.mtu, r.rate, p(H3, 1)));
    }
    // A masked SLID keeps that one source LID.
    let q = between(&index, h1, h3, pm::SLID, |q| q.slid = s_base + 3);
    let got = ask(&index, q).unwrap();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|r| r.slid == s_base + 3));
    assert_eq!((got[0].dlid, got[0].preference), (d_base, 0));
    // A Get takes one path per pair.
    let get = path_record_get(
        &index,
        &between(&index, h1, h3, 0, |_| {}).0,
        pm::SGID | pm::DGID,
        Lid(0),
        &PathConfig::default(),
    );
    assert_eq!(get, Ok(all[0]));
}

#[test]
fn a_missing_side_is_the_requester_and_a_missing_destination_is_everyone() {
    let s = swept_a(0);
    let index = PathIndex::build(&s.report);
    let h2 = end_of(&index, &s.topo, p(H2, 1));
    let me = index.end(h2).base_lid;
    let cfg = PathConfig::default();
    let from_me = path_records(&index, &PathRecordRepr::default(), 0, me, &cfg).unwrap();
    assert_eq!(from_me.len(), index.ends().len(), "one path to every port, H2 itself included");
    assert!(from_me.iter().all(|r| r.slid == me.0 && r.sgid == gid(&index, h2)));
    let to_self = from_me.iter().find(|r| r.dlid == me.0).unwrap();
    assert_eq!(to_self.packet_life_time, 0, "loopback");
    // Only a destination: from the requester to it.
    let h6 = end_of(&index, &s.topo, p(H6, 1));
    let q = PathRecordRepr { dlid: index.end(h6).base_lid.0, ..Default::default() };
    let got = path_records(&index, &q, pm::DLID, me, &cfg).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].slid, got[0].rate), (me.0, 6), "HDR 2x to SDR 8x: 20 Gb/s");
    // Gets: one pair is one record, all destinations are too many.
    assert!(path_record_get(&index, &q, pm::DLID, me, &cfg).is_ok());
    assert_eq!(path_record_get(&index, &PathRecordRepr::default(), 0, me, &cfg), Err(sa_status::TOO_MANY_RECORDS));
    let nowhere = PathRecordRepr { dlid: 0x3000, ..Default::default() };
    assert_eq!(path_record_get(&index, &nowhere, pm::DLID, me, &cfg), Err(sa_status::NO_RECORDS));
    // An unknown requester with no source named: nothing.
    assert_eq!(path_records(&index, &PathRecordRepr::default(), 0, Lid(0x3000), &cfg).unwrap(), vec![]);
    // A cap on the answer.
    let small = PathConfig { max_records: 3, ..cfg };
    assert_eq!(path_records(&index, &PathRecordRepr::default(), 0, me, &small), Err(sa_status::NO_RESOURCES));
}

#[test]
fn unknown_gids_and_lids() {
    let s = swept_a(0);
    let index = PathIndex::build(&s.report);
    let (h1, h3) = (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H3, 1)));
    let h2 = end_of(&index, &s.topo, p(H2, 1));
    let mut stranger = gid(&index, h3);
    stranger[15] ^= 0x80;
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |q| q.dgid = stranger)), Err(sa_status::INVALID_GID));
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |q| q.sgid = stranger)), Err(sa_status::INVALID_GID));
    // Another subnet's prefix is refused; the link-local one is the port's.
    let mut other = gid(&index, h3);
    other[..8].copy_from_slice(&0xfec0_0000_0000_0001u64.to_be_bytes());
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |q| q.dgid = other)), Err(sa_status::INVALID_GID));
    // A LID nobody has: no records; SGID and SLID of two ports: invalid.
    let q = PathRecordRepr { slid: index.end(h1).base_lid.0, dlid: 0x2fff, ..Default::default() };
    assert_eq!(path_records(&index, &q, pm::SLID | pm::DLID, Lid(0), &PathConfig::default()), Ok(vec![]));
    let q = PathRecordRepr { sgid: gid(&index, h1), slid: index.end(h2).base_lid.0, ..Default::default() };
    assert_eq!(
        path_records(&index, &q, pm::SGID | pm::SLID, Lid(0), &PathConfig::default()),
        Err(sa_status::REQ_INVALID)
    );
    // Multicast destinations are not unicast paths.
    let mut mgid = [0u8; 16];
    mgid[0] = 0xff;
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |q| q.dgid = mgid)), Ok(vec![]));
}

#[test]
fn broken_and_one_way_routes() {
    let s = swept_a(0);
    let (h1, h3) = (p(H1, 1), p(H3, 1));
    let lid = |r: PortRef| s.fabric.lock().unwrap().lid_of(r).unwrap();
    // S2 forgets H1: H1 still reaches H3, but not back.
    let mut report = s.report.clone();
    let s2 = s.topo.node(NodeIdx(S2)).node_guid;
    std::sync::Arc::make_mut(report.routes.lfts.get_mut(&s2).unwrap())[lid(h1).0 as usize] = 0xFF;
    let index = PathIndex::build(&report);
    let (e1, e3) = (end_of(&index, &s.topo, h1), end_of(&index, &s.topo, h3));
    let there = ask(&index, between(&index, e1, e3, 0, |_| {})).unwrap();
    assert_eq!(there.len(), 1);
    assert!(!there[0].reversible);
    assert_eq!(ask(&index, between(&index, e3, e1, 0, |_| {})).unwrap(), vec![], "no route back");
    assert!(matches!(index.route(e3, lid(h1)), Err(Broken::Unrouted { port: 0xFF, .. })));
    let q = between(&index, e1, e3, pm::REVERSIBLE, |q| q.reversible = true);
    assert_eq!(ask(&index, q).unwrap(), vec![], "a reversible path was asked for");
    let q = between(&index, e1, e3, pm::REVERSIBLE, |q| q.reversible = false);
    assert_eq!(ask(&index, q).unwrap().len(), 1, "Reversible 0 does not care");

    // A loop: S1 and S2 send H3's LID to each other.
    let mut report = s.report.clone();
    let s1 = s.topo.node(NodeIdx(S1)).node_guid;
    std::sync::Arc::make_mut(report.routes.lfts.get_mut(&s1).unwrap())[lid(h3).0 as usize] = 3;
    std::sync::Arc::make_mut(report.routes.lfts.get_mut(&s2).unwrap())[lid(h3).0 as usize] = 1;
    let index = PathIndex::build(&report);
    assert_eq!(index.route(e1, lid(h3)), Err(Broken::Loop));
    assert_eq!(ask(&index, between(&index, e1, e3, 0, |_| {})).unwrap(), vec![]);

    // A port on the way not Active in the snapshot.
    let mut report = s.report.clone();
    let node = report.subnet.by_guid.get(&s2).copied().unwrap();
    for port in [1, 2] {
        report.subnet.node_mut(node).ports[port].info.as_mut().unwrap().port_state = PortState::Down;
    }
    let index = PathIndex::build(&report);
    assert!(matches!(index.route(e1, lid(h3)), Err(Broken::Down { .. })));
    assert_eq!(ask(&index, between(&index, e1, e3, 0, |_| {})).unwrap(), vec![]);
    let h2 = end_of(&index, &s.topo, p(H2, 1));
    assert_eq!(ask(&index, between(&index, e1, h2, 0, |_| {})).unwrap().len(), 1, "H1 still reaches H2");
}

#[test]
fn a_downed_cable_reroutes_and_the_paths_follow() {
    let mut s = swept_a(0);
    // Take down the 800 Gb/s cable between the switches and sweep again.
    s.fabric.lock().unwrap().link_down(p(S1, 4)).unwrap();
    resweep(&mut s);
    let index = PathIndex::build(&s.report);
    let ports = lid_ports(&s.topo);
    for &a in &ports {
        for &b in &ports {
            if a == b {
                continue;
            }
            let (src, dst) = (end_of(&index, &s.topo, a), end_of(&index, &s.topo, b));
            let r = ask(&index, between(&index, src, dst, 0, |_| {})).unwrap();
            assert_eq!(r.len(), 1, "{a:?} -> {b:?}");
            let (hops, mtu, rate, end) = sim_route(&s, a, Lid(r[0].dlid));
            let (_, back_mtu, back_rate, _) = sim_route(&s, b, Lid(r[0].slid));
            assert_eq!(end, b);
            let want = (hops, mtu.min(back_mtu), rate::slower(rate, back_rate));
            assert_eq!((index.route(src, Lid(r[0].dlid)).unwrap().hops, r[0].mtu, r[0].rate), want);
        }
    }
    // Everything between the switches now crosses the XDR 2x cable.
    let f = s.fabric.lock().unwrap();
    let h3_lid = f.lid_of(p(H3, 1)).unwrap();
    assert_eq!(f.lft_port(NodeIdx(S1), h3_lid), Some(3));
}

#[test]
fn path_sls_come_from_the_routing_engine() {
    // A 3x3 torus routed by dfsssp puts some routes on SL 1 and above.
    let topo = Topology::from_spec_or_file("torus2d:3x3,hosts=1").unwrap();
    let config = SmConfig { routing_engine: vec!["dfsssp".into()], ..SmConfig::default() };
    let s = sweep(topo, config, |_| {});
    let index = PathIndex::build(&s.report);
    assert!(s.report.routes.path_sl.is_some(), "dfsssp layers its routes");
    let ports = lid_ports(&s.topo);
    let mut nonzero = 0;
    for &a in &ports {
        let src = end_of(&index, &s.topo, a);
        // The switch the source's traffic enters the fabric at.
        let entry = if a.port == 0 { a.node } else { s.topo.neighbor(a).unwrap().node };
        let entry_id = s.report.subnet.by_guid[&s.topo.node(entry).node_guid];
        for &b in &ports {
            let dst = end_of(&index, &s.topo, b);
            let dlid = index.end(dst).base_lid;
            let want = s.sm.path_sl(entry_id, dlid);
            assert_eq!(index.path_sl(src, dlid), want, "{a:?} -> {b:?}");
            nonzero += usize::from(want != 0);
            if let Ok(r) = ask(&index, between(&index, src, dst, 0, |_| {})) {
                assert_eq!(r[0].sl, want);
                let other = ask(&index, between(&index, src, dst, pm::SL, |q| q.sl = want ^ 1)).unwrap();
                assert_eq!(other, vec![], "an SL other than the route's");
            }
        }
    }
    assert!(nonzero > 0, "some route off SL 0");
}

#[test]
fn end_ports_that_do_not_know_a_rate_get_one_they_do() {
    let s = swept_a(0);
    let (h1, h3) = (p(H1, 1), p(H3, 1));
    let mut report = s.report.clone();
    // H1 as an EDR-era HCA: extended speeds, no HDR/NDR/XDR in CapabilityMask2.
    let id = report.subnet.by_guid[&s.topo.node(NodeIdx(H1)).node_guid];
    report.subnet.node_mut(id).ports[1].info.as_mut().unwrap().capability_mask2 = 0;
    let index = PathIndex::build(&report);
    let (e1, e3) = (end_of(&index, &s.topo, h1), end_of(&index, &s.topo, h3));
    // Its link still reads NDR 4x with extended speeds... but no NDR code
    // without CapabilityMask2 knowledge: 400 Gb/s lowered to 300.
    let r = ask(&index, between(&index, e1, e3, 0, |_| {})).unwrap()[0];
    assert_eq!(r.rate, 18);
    // The other way too: H1 answers on the path.
    let r = ask(&index, between(&index, e3, e1, 0, |_| {})).unwrap()[0];
    assert_eq!(r.rate, 18);
}

fn mpr(
    index: &PathIndex,
    src: &[u32],
    dst: &[u32],
    edit: impl FnOnce(&mut MultiPathRecordRepr),
) -> MultiPathRecordRepr {
    let g = |v: &[u32]| v.iter().map(|&e| gid(index, e)).collect::<Vec<_>>();
    let mut r = MultiPathRecordRepr::default().with_gids(&g(src), &g(dst)).unwrap();
    edit(&mut r);
    r
}

#[test]
fn multipath_spreads_over_ports_and_lmc_and_seeks_independence() {
    let s = swept_a(1);
    let index = PathIndex::build(&s.report);
    let e = |n: usize| end_of(&index, &s.topo, p(n, 1));
    let (src, dst) = ([e(H1), e(H2)], [e(H3), e(H6)]);
    let cfg = PathConfig::default();
    let counts = mm::SGID_COUNT | mm::DGID_COUNT;
    let lid_of = |e: u32| index.end(e).base_lid.0;
    // NumbPath 4: one path of each of the four port pairs.
    let req = mpr(&index, &src, &dst, |r| r.numb_path = 4);
    let got = multipath_records(&index, &req, counts | mm::NUMB_PATH, Lid(0), &cfg).unwrap();
    assert_eq!(got.len(), 4);
    let pairs: std::collections::BTreeSet<([u8; 16], [u8; 16])> = got.iter().map(|r| (r.sgid, r.dgid)).collect();
    assert_eq!(pairs.len(), 4, "every port pair once");
    // Unbounded: every (SLID, DLID) of every pair, 4 pairs × 2 × 2.
    let all = multipath_records(&index, &req, counts, Lid(0), &cfg).unwrap();
    assert_eq!(all.len(), 16);
    // Independence, two paths: disjoint ports, and the two routes between
    // the switches use both cables when the LFTs allow.
    let req = mpr(&index, &src, &dst, |r| (r.numb_path, r.independence_selector) = (2, 1));
    let two =
        multipath_records(&index, &req, counts | mm::NUMB_PATH | mm::INDEPENDENCE_SELECTOR, Lid(0), &cfg).unwrap();
    assert_eq!(two.len(), 2);
    assert_ne!(two[0].sgid, two[1].sgid);
    assert_ne!(two[0].dgid, two[1].dgid);
    let links = |r: &PathRecordRepr| {
        let src = index.end_by_lid(Lid(r.slid)).unwrap();
        index.route_links(src, Lid(r.dlid)).unwrap().1
    };
    let (a, b) = (links(&two[0]), links(&two[1]));
    assert!(a.iter().all(|l| !b.contains(l)), "no link shared: {a:?} {b:?}");
    assert!(two.iter().all(|r| [lid_of(e(H1)), lid_of(e(H1)) + 1, lid_of(e(H2)), lid_of(e(H2)) + 1].contains(&r.slid)));
    // Refusals.
    assert_eq!(multipath_records(&index, &req, mm::SGID_COUNT, Lid(0), &cfg), Err(sa_status::INSUFFICIENT_COMPONENTS));
    let empty = mpr(&index, &src, &[], |_| {});
    assert_eq!(multipath_records(&index, &empty, counts, Lid(0), &cfg), Err(sa_status::REQ_INVALID));
    let mut stranger = mpr(&index, &src, &dst, |_| {});
    stranger.gids[3][15] ^= 0x80;
    assert_eq!(multipath_records(&index, &stranger, counts, Lid(0), &cfg), Err(sa_status::INVALID_GID));
    // Constraints bind every path: exactly 2048 bytes, at most 100 Gb/s.
    let req = mpr(&index, &src, &dst, |r| (r.mtu_selector, r.mtu, r.rate_selector, r.rate) = (2, 4, 1, 17));
    let mask = counts | mm::MTU_SELECTOR | mm::MTU | mm::RATE_SELECTOR | mm::RATE;
    let bound = multipath_records(&index, &req, mask, Lid(0), &cfg).unwrap();
    assert_eq!(bound.len(), 16);
    assert!(bound.iter().all(|r| r.mtu == 4 && rate::cmp_rates(r.rate, 17).is_lt()), "{bound:?}");
}

fn alias_gid(index: &PathIndex, e: u32, alias: u64) -> [u8; 16] {
    let mut g = gid(index, e);
    g[8..].copy_from_slice(&alias.to_be_bytes());
    g
}

/// The SM programs the SA's alias GUIDs; the sweep's snapshot knows them
/// and PathRecords resolve a GID made of one to its port.
#[test]
fn alias_gids_name_their_port() {
    let mut s = swept_a(0);
    let (g3, g5) = (s.topo.node(NodeIdx(H3)).port_guid(1), s.topo.node(NodeIdx(H5)).port_guid(1));
    let table: crate::program::guids::AliasTable =
        [(g3, 1, Guid(0xa1)), (g3, 12, Guid(0xa12)), (g5, 2, Guid(0xb2))].into_iter().collect();
    let (_tx, rx) = tokio::sync::watch::channel(std::sync::Arc::new(table));
    s.sm.set_alias_source(rx);
    resweep(&mut s);
    assert_eq!(s.report.program.guid_info_sets, 3, "H3's blocks 0 and 1, H5's block 0");
    let index = PathIndex::build(&s.report);
    assert_eq!(index.aliases(), 3);
    let (h1, h3, h5) =
        (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H3, 1)), end_of(&index, &s.topo, p(H5, 1)));
    assert_eq!((index.end_by_alias(Guid(0xa12)), index.end_by_alias(Guid(0xb2))), (Some(h3), Some(h5)));
    assert_eq!(index.end_by_guid(Guid(0xa1)), None, "port GUIDs and aliases are apart");

    // To an alias GID: H3's path, answered with the GID as asked.
    let plain = ask(&index, between(&index, h1, h3, 0, |_| {})).unwrap();
    let to_alias = ask(&index, between(&index, h1, h3, 0, |q| q.dgid = alias_gid(&index, h3, 0xa1))).unwrap();
    assert_eq!(to_alias.len(), 1);
    assert_eq!(to_alias[0].dgid, alias_gid(&index, h3, 0xa1));
    assert_eq!(PathRecordRepr { dgid: plain[0].dgid, ..to_alias[0] }, plain[0]);
    // From one, and between two, link-local prefix or the port's.
    let both = |q: &mut PathRecordRepr| (q.sgid, q.dgid) = (alias_gid(&index, h5, 0xb2), alias_gid(&index, h3, 0xa12));
    let r = ask(&index, between(&index, h5, h3, 0, both)).unwrap();
    assert_eq!((r.len(), r[0].slid, r[0].dlid), (1, index.end(h5).base_lid.0, index.end(h3).base_lid.0));
    let mut ll = alias_gid(&index, h3, 0xa1);
    ll[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |q| q.dgid = ll)).unwrap().len(), 1);
    // A Get too, by DGID alone from the requester.
    let q = PathRecordRepr { dgid: alias_gid(&index, h3, 0xa1), ..Default::default() };
    let got = path_record_get(&index, &q, pm::DGID, index.end(h1).base_lid, &PathConfig::default()).unwrap();
    assert_eq!(got.dlid, index.end(h3).base_lid.0);
    // Another subnet's prefix, an alias nobody holds, an alias GID with
    // another port's LID: refused as for port GIDs.
    let mut other = alias_gid(&index, h3, 0xa1);
    other[..8].copy_from_slice(&0xfec0_0000_0000_0001u64.to_be_bytes());
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |q| q.dgid = other)), Err(sa_status::INVALID_GID));
    let nobody = alias_gid(&index, h3, 0xa2);
    assert_eq!(ask(&index, between(&index, h1, h3, 0, |q| q.dgid = nobody)), Err(sa_status::INVALID_GID));
    let q = PathRecordRepr { dgid: alias_gid(&index, h3, 0xa1), dlid: index.end(h5).base_lid.0, ..Default::default() };
    assert_eq!(
        path_records(&index, &q, pm::DGID | pm::DLID, index.end(h1).base_lid, &PathConfig::default()),
        Err(sa_status::REQ_INVALID)
    );
    // MultiPathRecords take alias GIDs too.
    let req = MultiPathRecordRepr::default().with_gids(&[gid(&index, h1)], &[alias_gid(&index, h3, 0xa12)]).unwrap();
    let got = multipath_records(&index, &req, mm::SGID_COUNT | mm::DGID_COUNT, Lid(0), &PathConfig::default()).unwrap();
    assert_eq!((got.len(), got[0].dlid), (1, index.end(h3).base_lid.0));
}

/// The SA's registry replaces what the sweep saw, whole or one port at a
/// time; an alias that is some port's GUID, or of a port not here, is left
/// out.
#[test]
fn the_sa_sets_the_aliases_the_index_knows() {
    let s = swept_a(0);
    let mut index = PathIndex::build(&s.report);
    assert_eq!(index.aliases(), 0, "no alias programmed");
    let (h1, h2) = (end_of(&index, &s.topo, p(H1, 1)), end_of(&index, &s.topo, p(H2, 1)));
    let (g1, g2) = (index.end(h1).guid, index.end(h2).guid);
    index.set_aliases([(Guid(0xa1), g1), (g2, g1), (Guid(0xa2), Guid(0xdead)), (Guid(0xa3), g2)]);
    assert_eq!(index.aliases(), 2);
    assert_eq!((index.end_by_alias(Guid(0xa1)), index.end_by_alias(Guid(0xa3))), (Some(h1), Some(h2)));
    assert_eq!(end_by_gid(&index, &gid(&index, h2)), Ok(h2), "H2's own GUID still names H2");
    assert_eq!(index.end_by_alias(Guid(0xa2)), None);
    index.update_aliases([Guid(0xa1)], [(Guid(0xa4), g1)]);
    assert_eq!((index.end_by_alias(Guid(0xa1)), index.end_by_alias(Guid(0xa4))), (None, Some(h1)));
    assert_eq!(index.aliases(), 2);
    index.set_aliases([]);
    assert_eq!(index.aliases(), 0);
}

/// The index shares the snapshot's forwarding tables rather than copying
/// them (reviewer F3).
#[test]
fn the_index_shares_the_forwarding_tables() {
    let s = swept_a(0);
    let tables = &s.report.routes.lfts;
    assert!(!tables.is_empty());
    // The SubnetManager keeps the last tables too (to order the next
    // changes): owners are counted from what they are before the index.
    let owners = |t: &std::sync::Arc<Vec<u8>>| std::sync::Arc::strong_count(t);
    let before: Vec<usize> = tables.values().map(owners).collect();
    let index = PathIndex::build(&s.report);
    let with_index: Vec<usize> = tables.values().map(owners).collect();
    assert!(with_index.iter().zip(&before).all(|(w, b)| *w == b + 1), "one more owner each, no copy");
    drop(index);
    assert_eq!(tables.values().map(owners).collect::<Vec<_>>(), before);
}

/// A Get without a destination stops at the second record (reviewer F1):
/// enough to answer TOO_MANY_RECORDS.
#[test]
fn a_get_to_everyone_stops_at_two_records() {
    let s = swept_a(1);
    let index = PathIndex::build(&s.report);
    let me = index.end(end_of(&index, &s.topo, p(H2, 1))).base_lid;
    let cfg = PathConfig::default();
    let q = PathRecordRepr::default();
    let mut two = TwoAtMost::default();
    collect(&index, &q, 0, me, &cfg, Some(1), &mut two).unwrap();
    assert_eq!(two.count(), 2);
    let mut all = Vec::new();
    collect(&index, &q, 0, me, &cfg, Some(1), &mut all).unwrap();
    assert_eq!(all.len(), index.ends().len());
    assert_eq!(path_record_get(&index, &q, 0, me, &cfg), Err(sa_status::TOO_MANY_RECORDS));
    // Even with the cap on records below what everyone would take.
    let small = PathConfig { max_records: 3, ..cfg };
    assert_eq!(path_record_get(&index, &q, 0, me, &small), Err(sa_status::TOO_MANY_RECORDS));
    assert_eq!(path_records(&index, &q, 0, me, &small), Err(sa_status::NO_RESOURCES));
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    /// Fabric A swept once with LMC 1, for every case.
    fn index() -> &'static PathIndex {
        static INDEX: OnceLock<PathIndex> = OnceLock::new();
        INDEX.get_or_init(|| PathIndex::build(&swept_a(1).report))
    }

    fn status_ok(e: u16) -> bool {
        [
            sa_status::REQ_INVALID,
            sa_status::INVALID_GID,
            sa_status::INSUFFICIENT_COMPONENTS,
            sa_status::NO_RESOURCES,
            sa_status::NO_RECORDS,
            sa_status::TOO_MANY_RECORDS,
        ]
        .contains(&e)
    }

    proptest! {
        /// Any PathRecord query (arbitrary bytes, any mask, any requester)
        /// is answered or refused with an SA status; every record names
        /// real ports and a LID each of them owns.
        #[test]
        fn any_path_query(bytes in proptest::collection::vec(any::<u8>(), 64), mask in any::<u64>(), small in 0u64..(1 << 24),
                          use_small in any::<bool>(), requester in 0u16..64, real_gids in any::<bool>()) {
            let index = index();
            let mut q = PathRecordRepr::parse_bytes(&bytes).unwrap();
            if real_gids {
                let n = index.ends().len();
                q.sgid = index.ends()[bytes[0] as usize % n].gid();
                q.dgid = index.ends()[bytes[1] as usize % n].gid();
            }
            let mask = if use_small { small } else { mask };
            let cfg = PathConfig { max_records: 200, ..PathConfig::default() };
            match path_records(index, &q, mask, Lid(requester), &cfg) {
                Ok(records) => for r in records {
                    let s = index.end_by_lid(Lid(r.slid)).expect("a source port");
                    let d = index.end_by_lid(Lid(r.dlid)).expect("a destination port");
                    prop_assert!(index.route(s, Lid(r.dlid)).is_ok());
                    prop_assert!(rate::is_mtu(r.mtu) && rate::is_rate(r.rate));
                    prop_assert_eq!(index.end(d).owns(Lid(r.dlid)), true);
                },
                Err(e) => prop_assert!(status_ok(e), "status {}", e),
            }
            if let Err(e) = path_record_get(index, &q, mask, Lid(requester), &cfg) {
                prop_assert!(status_ok(e), "status {}", e);
            }
        }

        /// Any MultiPathRecord the wire parser accepts, with any mask.
        #[test]
        fn any_multipath_query(bytes in proptest::collection::vec(any::<u8>(), 24..200), mask in any::<u64>(),
                               picks in proptest::collection::vec(any::<u8>(), 0..6), nsrc in 0usize..4) {
            let index = index();
            let Ok(mut req) = MultiPathRecordRepr::parse_bytes(&bytes) else { return Ok(()) };
            if !picks.is_empty() {
                let n = index.ends().len();
                let gids: Vec<[u8; 16]> = picks.iter().map(|&i| index.ends()[i as usize % n].gid()).collect();
                let k = nsrc.min(gids.len());
                req = req.with_gids(&gids[..k], &gids[k..]).unwrap();
            }
            let cfg = PathConfig { max_records: 200, ..PathConfig::default() };
            for mask in [mask, mask & 0x3F_FFFF, mm::SGID_COUNT | mm::DGID_COUNT | (mask & 0xFFFF)] {
                match multipath_records(index, &req, mask, Lid(1), &cfg) {
                    Ok(records) => prop_assert!(records.len() <= 127),
                    Err(e) => prop_assert!(status_ok(e), "status {}", e),
                }
            }
        }
    }
}

/// The route table answers as the walk on other kinds of fabric: a torus
/// (dor), a mesh, a random graph and a dragonfly, with two LIDs per port.
#[test]
fn the_route_table_answers_as_the_walk_on_every_kind_of_fabric() {
    for spec in [
        "torus2d:4x4,hosts=1",
        "mesh2d:3x4,hosts=2",
        "random:switches=10,degree=3,hosts=12,seed=3",
        "dragonfly:routers=3,hosts=2,global=1,groups=4",
    ] {
        let topo = Topology::from_spec_or_file(spec).unwrap();
        let s = sweep(topo, SmConfig { lmc: 1, ..SmConfig::default() }, |_| {});
        let index = PathIndex::build(&s.report);
        assert!(index.route_table_rows() > 0, "{spec}: a route table");
        let top = index.ends().iter().map(|e| e.base_lid.0 + 2).max().unwrap();
        let mut routed = 0;
        for src in 0..index.ends().len() as u32 {
            for lid in 0..top + 2 {
                let walked = index.route_walked(src, Lid(lid));
                assert_eq!(index.route(src, Lid(lid)), walked, "{spec}: end {src} to LID {lid}");
                routed += usize::from(walked.is_ok());
            }
        }
        assert!(routed > index.ends().len() * index.ends().len(), "{spec}: {routed} routes");
    }
}
