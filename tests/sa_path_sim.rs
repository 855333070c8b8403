//! PathRecords on a fat tree whose every cable runs a different generation
//! and width (seeded): ibsm sweeps it in-process with LMC 1, and every
//! host-to-host and host-to-switch path is judged against the simulator:
//! its own LFT walk for the route and hop count, its ports' PortInfo for
//! the MTU, and the IBA rate code of each cable, written out here.

use std::collections::HashMap;
use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::mad::sa::path_mask as pm;
use ibsm::mad::sa::PathRecordRepr;
use ibsm::program::SubnetManager;
use ibsm::sa::path::{path_records, rate, PathConfig, PathIndex};
use ibsm::sim::{FabricBuilder, SimDevice};
use ibsm::topology::*;
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::types::Lid;

/// (LinkSpeedActive, extended speed, IBA rate code at 1x, 2x, 4x, 8x, 12x).
const GENERATIONS: [(LinkSpeedCode, LinkSpeedExtCode, [u8; 5]); 8] = [
    (SPEED_SDR, SPEED_EXT_NONE, [2, 5, 3, 6, 4]),
    (SPEED_DDR, SPEED_EXT_NONE, [5, 3, 6, 7, 8]),
    (SPEED_QDR, SPEED_EXT_NONE, [3, 6, 7, 9, 10]),
    (SPEED_QDR, SPEED_FDR, [11, 19, 12, 13, 14]),
    (SPEED_QDR, SPEED_EDR, [15, 20, 16, 17, 18]),
    (SPEED_QDR, SPEED_HDR, [20, 16, 17, 21, 22]),
    (SPEED_QDR, SPEED_NDR, [16, 17, 21, 23, 24]),
    (SPEED_QDR, SPEED_XDR, [17, 21, 23, 24, 24]),
];
const WIDTHS: [LinkWidthCode; 5] = [WIDTH_1X, WIDTH_2X, WIDTH_4X, WIDTH_8X, WIDTH_12X];

/// A tiny seeded generator (xorshift64*), so a failure names its seed.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

#[test]
fn every_path_of_a_mixed_generation_fat_tree_matches_the_simulator() {
    let seed = 0x5eed_0009;
    let mut topo = Topology::from_spec_or_file("fattree2:radix=8,leaves=4,spines=2,hosts=4").unwrap();
    let mut rng = Rng(seed);
    // Every cable a generation and width; the first eight get each
    // generation once, so all of them are on some path.
    let mut cable_code = HashMap::new();
    for (i, l) in topo.links.iter_mut().enumerate() {
        let g = if i < GENERATIONS.len() { i } else { rng.below(GENERATIONS.len()) };
        let w = rng.below(WIDTHS.len());
        let (speed, ext, codes) = GENERATIONS[g];
        (l.width, l.speed, l.ext_speed) = (WIDTHS[w], speed, ext);
        cable_code.insert((l.a, l.b), codes[w]);
        cable_code.insert((l.b, l.a), codes[w]);
    }
    topo.validate().unwrap();
    let fabric = FabricBuilder::new(&topo).seed(seed).mtu_cap(5).build_shared().unwrap();
    // Two hosts are older devices.
    let hosts: Vec<NodeIdx> = topo.hosts().collect();
    fabric.lock().unwrap().set_mtu_cap(PortRef { node: hosts[3], port: 1 }, 3).unwrap();
    fabric.lock().unwrap().set_mtu_cap(PortRef { node: hosts[10], port: 1 }, 4).unwrap();

    let dev = SimDevice::attach(&fabric, hosts[0], 1).unwrap();
    let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
    let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
    let mut sm = SubnetManager::new(transport, SmConfig { lmc: 1, ..SmConfig::default() }, false);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let report = rt.block_on(sm.sweep()).expect("sweep");
    assert!(report.subnet_up(), "seed {seed:#x}: {:?}", report.inactive);
    let index = PathIndex::build(&report);

    let f = fabric.lock().unwrap();
    let eff_mtu = |r: PortRef| {
        let pi = f.port_info(r).unwrap();
        pi.mtu_cap.min(pi.neighbor_mtu)
    };
    let end_of = |r: PortRef| index.end_by_guid(topo.node(r.node).port_guid(r.port)).unwrap();
    // The simulator's walk from `from` (a host port or a switch's port 0)
    // to `dlid`, which must end at `to`: links crossed, the smallest MTU of
    // the ports on them (and of a switch's port 0 at an end), the slowest
    // cable's IBA code.
    let sim_walk = |from: PortRef, dlid: Lid, to: PortRef| -> (u8, u8, u8) {
        let (mut hops, mut mtu, mut want_rate, start) = if from.port == 0 {
            (0u8, f.port_info(from).unwrap().mtu_cap, rate::RATE_MAX, from.node)
        } else {
            let leaf = topo.neighbor(from).unwrap();
            (1u8, eff_mtu(from).min(eff_mtu(leaf)), cable_code[&(from, leaf)], leaf.node)
        };
        let path = f.trace_lid_route(start, dlid).unwrap();
        assert_eq!(path.last().copied(), Some(to), "seed {seed:#x}");
        for &hop in &path {
            if topo.node(hop.node).kind == NodeKind::Switch && hop.port != 0 {
                let far = topo.neighbor(hop).unwrap();
                hops += 1;
                mtu = mtu.min(eff_mtu(hop)).min(eff_mtu(far));
                want_rate = rate::slower(want_rate, cable_code[&(hop, far)]);
            }
        }
        if to.port == 0 {
            mtu = mtu.min(f.port_info(to).unwrap().mtu_cap);
        }
        (hops, mtu, want_rate)
    };
    let mut dests: Vec<PortRef> = hosts.iter().map(|&h| PortRef { node: h, port: 1 }).collect();
    dests.extend(topo.switches().map(|s| PortRef { node: s, port: 0 }));
    let cfg = PathConfig::default();
    let mut rates_seen = std::collections::BTreeSet::new();
    for &h in &hosts {
        let a = PortRef { node: h, port: 1 };
        let src = end_of(a);
        for &b in &dests {
            if a == b {
                continue;
            }
            let dst = end_of(b);
            let q = PathRecordRepr { sgid: index.end(src).gid(), dgid: index.end(dst).gid(), ..Default::default() };
            let records = path_records(&index, &q, pm::SGID | pm::DGID, Lid(0), &cfg).unwrap();
            let pairs = if b.port == 0 { 2 } else { 4 };
            assert_eq!(records.len(), pairs, "seed {seed:#x}: {a:?} -> {b:?}: every LID pair of LMC 1 ends");
            for r in &records {
                let (hops, mtu, want_rate) = sim_walk(a, Lid(r.dlid), b);
                let (_, back_mtu, back_rate) = sim_walk(b, Lid(r.slid), a);
                let route = index.route(src, Lid(r.dlid)).unwrap();
                assert_eq!(route.hops, hops, "seed {seed:#x}: {a:?} -> {b:?} DLID {}", r.dlid);
                // A reversible record carries what both directions carry.
                let want = (mtu.min(back_mtu), rate::slower(want_rate, back_rate));
                assert_eq!((r.mtu, r.rate), want, "seed {seed:#x}: {a:?} -> {b:?} DLID {}", r.dlid);
                assert!(r.reversible);
                assert_eq!((r.sl, r.pkey, r.packet_life_time), (0, 0xFFFF, 18));
                rates_seen.insert(r.rate);
            }
        }
    }
    assert!(rates_seen.len() >= 6, "seed {seed:#x}: only rates {rates_seen:?}");
    // A GetTable from a host with nothing masked: every LID pair to every
    // port, itself included (hosts LMC 1, switch port 0 LMC 0).
    let me = index.end(end_of(PortRef { node: hosts[5], port: 1 })).base_lid;
    let table = path_records(&index, &PathRecordRepr::default(), 0, me, &cfg).unwrap();
    assert_eq!(table.len(), hosts.len() * 4 + topo.switches().count() * 2);
    assert!(table.iter().all(|r| r.slid == me.0 || r.slid == me.0 + 1));
}
