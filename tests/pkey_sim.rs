//! P_Key programming on the in-process fabric, judged from the simulator's
//! side (each port's table, PortInfo enforcement bits, its SMP counters) as
//! well as by the SM's report: partitions reach every end port and the
//! switch ports facing them, nothing is resent, a change sends exactly the
//! blocks it changes, held keys keep their indexes, and without partitions
//! the default P_Key is added and nothing taken away.
//!
//! The fabric is `sim_support::small()`:
//! ```text
//!  H-0001 p1 ── p1 S-0001 p3 ── p1 S-0002 p2 ── p1 H-0003
//!                  p2
//!                  └── p1 H-0002
//! ```
//! Hosts hold 64 P_Keys (2 blocks), switch port 0 holds 8, switch external
//! ports 64 (PartitionEnforcementCap); every table starts as 0xFFFF at
//! index 0, zeros elsewhere.

mod sim_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::mad::{AttributeId, Method, PortInfoRepr};
use ibsm::partition::{Membership, PartEnforce, Partition, PartitionSet, PortPartitions, DEFAULT_PARTITION};
use ibsm::program::SubnetManager;
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice};
use ibsm::subnet::Problem;
use ibsm::subnet::{MasterMode, SweepReport};
use ibsm::topology::{NodeIdx, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::Guid;
use sim_support::{pr, small, TestSm, H1, H2, H3, S1, S2};

use Membership::{Both, Full, Limited};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

struct Net {
    topo: Topology,
    fabric: SharedFabric,
    rt: tokio::runtime::Runtime,
}

impl Net {
    fn new() -> Net {
        let topo = small();
        let fabric = FabricBuilder::new(&topo).seed(3).build_shared().unwrap();
        Net { topo, fabric, rt: runtime() }
    }

    /// An SM with fresh state on port 1 of `host`.
    fn sm_on(&self, host: usize) -> SubnetManager<ibsm::transport::SmpClient<MadTransport>> {
        let dev = SimDevice::attach(&self.fabric, NodeIdx(host), 1).unwrap();
        dev.set_is_sm(true);
        let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
        let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
        SubnetManager::new(transport, SmConfig::default(), false)
    }

    fn sweep(&self, sm: &mut SubnetManager<ibsm::transport::SmpClient<MadTransport>>) -> SweepReport {
        let report = self.rt.block_on(sm.sweep()).expect("sweep");
        assert!(report.subnet_up(), "{:?} {:?}", report.inactive, report.problems());
        report
    }

    fn port_guid(&self, node: usize, port: u8) -> Guid {
        self.topo.node(NodeIdx(node)).port_guid(port)
    }

    fn node_guid(&self, node: usize) -> Guid {
        self.topo.node(NodeIdx(node)).node_guid
    }

    /// The whole table, as the port's SMA holds it.
    fn table(&self, r: PortRef) -> Vec<u16> {
        self.fabric.lock().unwrap().pkeys(r).unwrap()
    }

    fn port_info(&self, r: PortRef) -> PortInfoRepr {
        self.fabric.lock().unwrap().port_info(r).unwrap()
    }

    /// PKeyTable requests the simulator saw, Gets and Sets.
    fn pkey_smps(&self) -> (u64, u64) {
        let f = self.fabric.lock().unwrap();
        (f.smp_count(AttributeId::PKeyTable, Method::Get), f.smp_count(AttributeId::PKeyTable, Method::Set))
    }

    /// A partition set: `hosts` by (node, port), switch port 0 of both
    /// switches full members of the default partition.
    fn set(&self, hosts: &[(usize, &[(u16, Membership)])]) -> Arc<PartitionSet> {
        let mut set = PartitionSet::default();
        let mut seen = std::collections::BTreeSet::new();
        for &(node, members) in hosts {
            seen.extend(members.iter().map(|&(p, _)| p));
            set.ports.insert(self.port_guid(node, 1), PortPartitions { members: members.to_vec(), index0: None });
        }
        for sw in [S1, S2] {
            let default = PortPartitions { members: vec![(DEFAULT_PARTITION, Full)], index0: None };
            set.ports.insert(self.port_guid(sw, 0), default);
        }
        set.partitions = seen
            .into_iter()
            .map(|p| Partition { name: format!("p{p:x}"), pkey: p, ipoib: false, params: Default::default() })
            .collect();
        Arc::new(set)
    }
}

/// The valid keys of a table, sorted.
fn keys(table: &[u16]) -> Vec<u16> {
    let mut k: Vec<u16> = table.iter().copied().filter(|&k| k & 0x7fff != 0).collect();
    k.sort_unstable();
    k
}

/// The keys a membership list puts in a table, sorted.
fn wanted(members: &[(u16, Membership)]) -> Vec<u16> {
    let mut k: Vec<u16> = members.iter().flat_map(|&(p, m)| m.keys(p)).collect();
    k.sort_unstable();
    k
}

/// Where each valid key sits.
fn indexes(table: &[u16]) -> HashMap<u16, usize> {
    table.iter().enumerate().filter(|(_, &k)| k & 0x7fff != 0).map(|(i, &k)| (k, i)).collect()
}

const H1_KEYS: &[(u16, Membership)] = &[(DEFAULT_PARTITION, Full), (0x10, Full)];
const H2_KEYS: &[(u16, Membership)] = &[(DEFAULT_PARTITION, Limited), (0x10, Limited), (0x20, Both)];
const H3_KEYS: &[(u16, Membership)] = &[(DEFAULT_PARTITION, Full), (0x20, Full)];

/// Host, its port, and the switch port facing it.
const HOSTS: [(usize, PortRef); 3] = [
    (H1, PortRef { node: NodeIdx(S1), port: 1 }),
    (H2, PortRef { node: NodeIdx(S1), port: 2 }),
    (H3, PortRef { node: NodeIdx(S2), port: 2 }),
];
const INTER_SWITCH: [PortRef; 2] = [PortRef { node: NodeIdx(S1), port: 3 }, PortRef { node: NodeIdx(S2), port: 1 }];

fn first_set(net: &Net) -> Arc<PartitionSet> {
    net.set(&[(H1, H1_KEYS), (H2, H2_KEYS), (H3, H3_KEYS)])
}

#[test]
fn every_port_holds_its_partitions_keys_and_the_switch_ports_facing_hosts_enforce_them() {
    let net = Net::new();
    let mut sm = net.sm_on(H1);
    sm.set_partitions(Some(first_set(&net)));
    let report = net.sweep(&mut sm);
    assert!(report.problems().is_empty(), "{:?}", report.problems());

    for ((host, facing), members) in HOSTS.iter().zip([H1_KEYS, H2_KEYS, H3_KEYS]) {
        let table = net.table(pr(*host, 1));
        assert_eq!(keys(&table), wanted(members), "host {host}: {table:x?}");
        assert_eq!(keys(&net.table(*facing)), wanted(members), "switch port facing host {host}");
        let pi = net.port_info(*facing);
        assert!(pi.partition_enforcement_inbound && pi.partition_enforcement_outbound, "{facing:?}");
        let host_pi = net.port_info(pr(*host, 1));
        assert!(!host_pi.partition_enforcement_inbound && !host_pi.partition_enforcement_outbound, "CA bits untouched");
    }
    for r in INTER_SWITCH {
        let pi = net.port_info(r);
        assert!(!pi.partition_enforcement_inbound && !pi.partition_enforcement_outbound, "{r:?}");
        assert_eq!(keys(&net.table(r)), vec![0xffff], "{r:?}: inter-switch tables are not touched");
    }
    for sw in [S1, S2] {
        assert_eq!(keys(&net.table(pr(sw, 0))), vec![0xffff]);
    }
    // Keys already held stay where they were: 0xFFFF at index 0 on H1 and
    // H3; H2's default partition turns limited in place.
    assert_eq!(net.table(pr(H1, 1))[0], 0xffff);
    assert_eq!(net.table(pr(H3, 1))[0], 0xffff);
    assert_eq!(net.table(pr(H2, 1))[0], 0x7fff);

    // Reads: 3 hosts, 2 blocks each, and 2 switch port 0s of 1 block; the
    // switches are cold (never programmed), so the 3 ports facing the hosts
    // are not read but written: block 0 (block 1 holds no key, as a reset
    // left it). Sets: block 0 of each host and of each facing port (switch
    // port 0 already holds the default key).
    let p = &report.program;
    assert_eq!((p.pkey_reads, p.pkey_sets, p.failures), (8, 6, 0), "{p:?}");
    assert_eq!(net.pkey_smps(), (8, 6), "the simulator saw as many");

    // What the SA answers from: every block of every table programmed.
    assert_eq!(p.pkey_blocks.len(), 8, "{:?}", p.pkey_blocks.keys());
    let h2 = &p.pkey_blocks[&(net.node_guid(H2), 1)];
    assert_eq!(h2.len(), 2);
    let flat: Vec<u16> = h2.iter().flat_map(|b| b.pkeys).collect();
    assert_eq!(flat, net.table(pr(H2, 1)));
    assert_eq!(p.pkey_blocks[&(net.node_guid(S2), 2)].len(), 2, "the switch port facing H3");
}

#[test]
fn a_second_sweep_sends_no_pkey_smp_at_all() {
    let net = Net::new();
    let mut sm = net.sm_on(H1);
    sm.set_partitions(Some(first_set(&net)));
    net.sweep(&mut sm);
    let before = net.pkey_smps();
    let again = net.sweep(&mut sm);
    let p = &again.program;
    assert_eq!((p.pkey_reads, p.pkey_sets, p.port_sets), (0, 0, 0), "{p:?}");
    assert_eq!(net.pkey_smps(), before);
    assert_eq!(p.pkey_blocks.len(), 8, "still known, from the memo");
}

#[test]
fn a_membership_change_sends_only_the_changed_block_of_that_port_and_its_switch_port() {
    let net = Net::new();
    let mut sm = net.sm_on(H1);
    sm.set_partitions(Some(first_set(&net)));
    net.sweep(&mut sm);
    let ports: Vec<PortRef> = HOSTS.iter().flat_map(|&(h, f)| [pr(h, 1), f]).chain(INTER_SWITCH).collect();
    let before: HashMap<PortRef, Vec<u16>> = ports.iter().map(|&r| (r, net.table(r))).collect();
    let smps = net.pkey_smps();

    // H2: 0x20 becomes full only (its limited key goes), 0x30 joins.
    let h2: &[(u16, Membership)] = &[(DEFAULT_PARTITION, Limited), (0x10, Limited), (0x20, Full), (0x30, Limited)];
    sm.set_partitions(Some(net.set(&[(H1, H1_KEYS), (H2, h2), (H3, H3_KEYS)])));
    let report = net.sweep(&mut sm);
    let p = &report.program;
    assert_eq!((p.pkey_reads, p.pkey_sets, p.port_sets), (0, 2, 0), "{p:?}");
    assert_eq!(net.pkey_smps(), (smps.0, smps.1 + 2), "block 0 of H2 and of S1 port 2");

    let (old, new) = (&before[&pr(H2, 1)], net.table(pr(H2, 1)));
    assert_eq!(keys(&new), wanted(h2));
    assert_eq!(keys(&net.table(pr(S1, 2))), wanted(h2));
    // Kept keys keep their index; 0x30 takes the entry the limited 0x20
    // left or an empty one, never a kept key's.
    let (was, is) = (indexes(old), indexes(&new));
    for k in [0x7fff, 0x0010, 0x8020] {
        assert_eq!(is[&k], was[&k], "{k:#x} moved: {old:x?} -> {new:x?}");
    }
    assert!(!is.contains_key(&0x0020));
    assert_eq!(old[32..], new[32..], "block 1 untouched");
    for r in ports.iter().filter(|&&r| r != pr(H2, 1) && r != pr(S1, 2)) {
        assert_eq!(&net.table(*r), &before[r], "{r:?} changed");
    }
}

#[test]
fn a_change_in_block_1_sends_block_1_only() {
    let net = Net::new();
    let mut sm = net.sm_on(H1);
    // H3 in 40 partitions and the default: 41 keys over both blocks.
    let many: Vec<(u16, Membership)> =
        std::iter::once((DEFAULT_PARTITION, Full)).chain((0x100..0x128).map(|p| (p, Full))).collect();
    sm.set_partitions(Some(net.set(&[(H1, H1_KEYS), (H2, H2_KEYS), (H3, &many)])));
    let first = net.sweep(&mut sm);
    assert!(first.problems().is_empty(), "{:?}", first.problems());
    let before = (net.table(pr(H3, 1)), net.table(pr(S2, 2)));
    assert_eq!(keys(&before.0), wanted(&many));
    assert_eq!(keys(&before.1), wanted(&many));
    let at = indexes(&before.0)[&0x8127];
    assert!(at >= 32, "the last partition is in block 1: {at}");

    // The last partition turns limited: one entry of block 1 changes.
    let mut changed = many.clone();
    changed.last_mut().unwrap().1 = Limited;
    sm.set_partitions(Some(net.set(&[(H1, H1_KEYS), (H2, H2_KEYS), (H3, &changed)])));
    let smps = net.pkey_smps();
    let report = net.sweep(&mut sm);
    assert_eq!((report.program.pkey_reads, report.program.pkey_sets), (0, 2), "{:?}", report.program);
    assert_eq!(net.pkey_smps().1, smps.1 + 2);
    let after = (net.table(pr(H3, 1)), net.table(pr(S2, 2)));
    assert_eq!(after.0[at], 0x0127, "same index, limited now");
    assert_eq!(after.0[..32], before.0[..32], "block 0 untouched");
    assert_eq!(after.1[..32], before.1[..32], "block 0 of the switch port untouched");
    assert_eq!(keys(&after.1), wanted(&changed));
}

#[test]
fn without_partitions_ports_keep_their_keys_and_gain_the_default() {
    let net = Net::new();
    // Another tool left H2 with 0x8005 at 0 and the limited default at 1.
    {
        let mut other = TestSm::attach(&net.fabric, "H-0002", 1);
        let mut d = [0u8; 64];
        d[..4].copy_from_slice(&[0x80, 0x05, 0x7f, 0xff]);
        assert_eq!(other.dr(Method::Set, &[], AttributeId::PKeyTable, 0, d).unwrap().header.status, 0);
    }
    let mut sm = net.sm_on(H1);
    let report = net.sweep(&mut sm);
    assert!(report.problems().is_empty(), "{:?}", report.problems());
    let h2 = net.table(pr(H2, 1));
    assert_eq!(&h2[..3], &[0x8005, 0xffff, 0], "kept at 0, upgraded in place at 1");
    assert_eq!(keys(&net.table(pr(S1, 2))), vec![0x8005, 0xffff], "the switch port enforces what H2 holds");
    for (host, facing) in [HOSTS[0], HOSTS[2]] {
        assert_eq!(keys(&net.table(pr(host, 1))), vec![0xffff]);
        assert_eq!(keys(&net.table(facing)), vec![0xffff]);
        assert!(net.port_info(facing).partition_enforcement_inbound);
    }
    // Today's result for everyone else: nothing to write but the facing
    // ports of the cold switches, written unread (block 0 of each).
    assert_eq!(report.program.pkey_sets, 1 + 3, "H2's block 0 and the facing ports: {:?}", report.program);
    let again = net.sweep(&mut sm);
    assert_eq!((again.program.pkey_sets, again.program.pkey_reads), (0, 0));
}

#[test]
fn part_enforce_off_reads_and_writes_no_switch_table_and_clears_the_bits() {
    let net = Net::new();
    let mut sm = net.sm_on(H1);
    sm.set_partitions(Some(first_set(&net)));
    let first = net.sweep(&mut sm);
    // Block 0 of each host and of each facing port of a cold switch.
    assert_eq!(first.program.pkey_sets, 3 + 3);
    let facing_tables: Vec<Vec<u16>> = HOSTS.iter().map(|&(_, f)| net.table(f)).collect();

    sm.set_part_enforce(PartEnforce::Off);
    let smps = net.pkey_smps();
    let off = net.sweep(&mut sm);
    let p = &off.program;
    assert_eq!((p.pkey_reads, p.pkey_sets), (0, 0), "{p:?}");
    assert_eq!(p.port_sets, 3, "one PortInfo Set per switch port facing a host: {p:?}");
    assert_eq!(net.pkey_smps(), smps);
    for (&(_, f), table) in HOSTS.iter().zip(&facing_tables) {
        let pi = net.port_info(f);
        assert!(!pi.partition_enforcement_inbound && !pi.partition_enforcement_outbound, "{f:?}");
        assert_eq!(&net.table(f), table, "{f:?}: left as it was");
    }

    // A fresh SM with enforcement off from the start: host tables only.
    let net = Net::new();
    let mut sm = net.sm_on(H1);
    sm.set_partitions(Some(first_set(&net)));
    sm.set_part_enforce(PartEnforce::Off);
    let p = net.sweep(&mut sm).program;
    assert_eq!((p.pkey_reads, p.pkey_sets), (3 * 2 + 2, 3), "{p:?}");
    for (_, f) in HOSTS {
        assert_eq!(keys(&net.table(f)), vec![0xffff]);
        assert!(!net.port_info(f).partition_enforcement_inbound);
    }
}

#[test]
fn inbound_only_sets_one_bit() {
    let net = Net::new();
    let mut sm = net.sm_on(H1);
    sm.set_partitions(Some(first_set(&net)));
    sm.set_part_enforce(PartEnforce::In);
    net.sweep(&mut sm);
    for (_, f) in HOSTS {
        let pi = net.port_info(f);
        assert!(pi.partition_enforcement_inbound && !pi.partition_enforcement_outbound, "{f:?}");
    }
}

#[test]
fn too_many_keys_are_truncated_and_a_small_switch_table_turns_enforcement_off() {
    let net = Net::new();
    // S1 claims room for 2 P_Keys per external port.
    net.fabric.lock().unwrap().corrupt_answers(NodeIdx(S1), AttributeId::SwitchInfo, 14, &[0, 2]);
    let mut sm = net.sm_on(H1);
    // H3: 70 partitions, 6 more than its 64 entries.
    let many: Vec<(u16, Membership)> = (0x200..0x246).map(|p| (p, Full)).collect();
    sm.set_partitions(Some(net.set(&[(H1, H1_KEYS), (H2, H2_KEYS), (H3, &many)])));
    let report = net.sweep(&mut sm);

    let full: Vec<_> = report
        .problems()
        .iter()
        .filter_map(|p| match p.what {
            Problem::PKeyTableFull { port, port_guid, cap, wanted } => Some((port, port_guid, cap, wanted)),
            _ => None,
        })
        .collect();
    assert_eq!(full, vec![(1, net.port_guid(H3, 1), 64, 70)], "{:?}", report.problems());
    let small: Vec<_> = report
        .problems()
        .iter()
        .filter_map(|p| match p.what {
            Problem::EnforcementCapTooSmall { port, cap, needed, end_port } => {
                Some((p.guid, port, cap, needed, end_port))
            }
            _ => None,
        })
        .collect();
    assert_eq!(small, vec![(Some(net.node_guid(S1)), 2, 2, 4, net.port_guid(H2, 1))], "{:?}", report.problems());
    assert_eq!(report.problems().len(), 2, "{:?}", report.problems());

    // H3 got the first 64, and so did the switch port facing it.
    assert_eq!(keys(&net.table(pr(H3, 1))), wanted(&many[..64]));
    assert_eq!(keys(&net.table(pr(S2, 2))), wanted(&many[..64]));
    assert!(net.port_info(pr(S2, 2)).partition_enforcement_inbound);
    // H2's 4 keys do not fit S1's 2: enforcement off, table left alone.
    let s1p2 = net.port_info(pr(S1, 2));
    assert!(!s1p2.partition_enforcement_inbound && !s1p2.partition_enforcement_outbound);
    assert_eq!(keys(&net.table(pr(S1, 2))), vec![0xffff]);
    // H1's 2 keys fit.
    assert!(net.port_info(pr(S1, 1)).partition_enforcement_outbound);
    assert_eq!(keys(&net.table(pr(S1, 1))), wanted(H1_KEYS));
}

#[test]
fn a_takeover_reads_every_table_and_rewrites_none() {
    let net = Net::new();
    {
        let mut a = net.sm_on(H1);
        a.set_partitions(Some(first_set(&net)));
        net.sweep(&mut a);
        net.sweep(&mut a);
    }
    let mut b = net.sm_on(H3);
    b.set_partitions(Some(first_set(&net)));
    let found = net.rt.block_on(b.discover()).unwrap();
    let report = net.rt.block_on(b.take_charge(found, MasterMode::Takeover)).unwrap();
    assert!(report.subnet_up());
    let p = &report.program;
    assert_eq!((p.pkey_reads, p.pkey_sets), (14, 0), "{p:?}");
    assert_eq!(p.changing_sets(), 0, "{p:?}");
    let again = net.sweep(&mut b);
    assert_eq!((again.program.pkey_reads, again.program.sets()), (0, 0), "{:?}", again.program);
}
