//! Multicast end to end on the in-process fabric, the whole runtime in
//! virtual time: hosts bring IPoIB up as the kernel does (`ibsm sa ipoib`'s
//! library calls: broadcast group first, then the groups IPv4 and IPv6
//! join); within a second of each join the SM has routed the group and
//! every switch's MFT, read back with SubnGet, floods a packet from any
//! member to exactly the members, without loops. Leaves shrink the trees;
//! after the last leave the groups the SA made are gone, their MLIDs are
//! free (the next new group gets the lowest again) and no MFT holds them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use ibsm::cmd::mcast::{self as mc, JoinAsk};
use ibsm::config::Config;
use ibsm::mad::sa::mc_member_record::{join_state, mc_member_mask, McMemberRecordRepr};
use ibsm::mad::{AttributeId, Method, MftBlockRepr, PortState, SmpAttribute};
use ibsm::runtime::snapshot::Snapshots;
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice, VirtualClock, VirtualTransport};
use ibsm::sweep::subnet::{NodeId, Subnet};
use ibsm::topology::{NodeIdx, PortRef, Topology};
use ibsm::transport::sa_client::SaClient;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::SmpClient;
use ibsm::types::{Guid, Lid};

const TOPO: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";
const SM_HOST: usize = 0;
const PREFIX: u64 = 0xfe80_0000_0000_0000;

struct Net {
    topo: Topology,
    fabric: SharedFabric,
    clock: VirtualClock,
    snapshots: Snapshots,
}

impl Net {
    fn host(&self, i: usize) -> PortRef {
        let node: NodeIdx = self.topo.hosts().nth(i).unwrap();
        PortRef { node, port: 1 }
    }
    fn transport(&self, host: usize) -> VirtualTransport {
        let dev = SimDevice::attach(&self.fabric, self.host(host).node, 1).unwrap();
        VirtualTransport::spawn(dev, TxnConfig::default(), &self.clock).0
    }
    fn all_active(&self) -> bool {
        let f = self.fabric.lock().unwrap();
        self.topo.links.iter().all(|l| [l.a, l.b].iter().all(|&e| f.port_state(e).ok() == Some(PortState::Active)))
    }
    fn count(&self, attr: AttributeId, method: Method) -> u64 {
        self.fabric.lock().unwrap().smp_count(attr, method)
    }
    fn subnet(&self) -> Subnet {
        self.snapshots.latest().expect("a sweep published").sweep.subnet.clone()
    }
}

/// Virtual time until `cond`, at most `limit`.
async fn within(what: &str, limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> Duration {
    let start = tokio::time::Instant::now();
    while start.elapsed() <= limit {
        if cond().await {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what}: not within {limit:?} (virtual)");
}

/// Every switch's MFT entry for `mlid`, read with SubnGet from `probe`:
/// the output ports, by switch node.
async fn mft_of(probe: &SmpClient<VirtualTransport>, subnet: &Subnet, mlid: Lid) -> BTreeMap<NodeId, BTreeSet<u8>> {
    let off = (mlid.0 - 0xC000) as u32;
    let (block, index) = (off / 32, (off % 32) as usize);
    let mut out = BTreeMap::new();
    for id in subnet.switches() {
        let lid = subnet.current_lid(id, 0).expect("switch LID");
        let positions = subnet.node(id).info.num_ports / 16 + 1;
        let mut ports = BTreeSet::new();
        for pos in 0..positions {
            let amod = ibsm::mad::mft::attribute_modifier(block as u16, pos);
            let smp = probe.lid_get(lid, AttributeId::MulticastForwardingTable, amod).await.unwrap();
            let mask = MftBlockRepr::parse_data(&smp.data).unwrap().port_masks[index];
            for bit in 0..16u8 {
                if mask & (1 << bit) != 0 {
                    ports.insert(pos * 16 + bit);
                }
            }
        }
        out.insert(id, ports);
    }
    out
}

/// Floods from every member through the MFTs: each must reach every other
/// member exactly once and no other end port, and enter no switch twice.
fn check_flood(subnet: &Subnet, mft: &BTreeMap<NodeId, BTreeSet<u8>>, members: &BTreeSet<Guid>) {
    let end_of: HashMap<Guid, (NodeId, u8)> = subnet
        .ids()
        .filter(|&id| !subnet.node(id).is_switch())
        .map(|id| (subnet.node(id).port_guid(1), (id, 1)))
        .collect();
    for &from in members {
        let (node, port) = end_of[&from];
        let (sw, in_port) = subnet.node(node).ports[port as usize].remote.expect("cabled");
        let mut reached = BTreeSet::new();
        let mut entered = BTreeSet::new();
        let mut queue = vec![(sw, in_port)];
        while let Some((sw, in_port)) = queue.pop() {
            assert!(entered.insert(sw), "MLID flood from {from} enters switch {sw:?} twice: a loop or a second path");
            for &out in mft.get(&sw).into_iter().flatten() {
                if out == in_port || out == 0 {
                    continue;
                }
                let (far, far_port) = subnet.node(sw).ports[out as usize]
                    .remote
                    .unwrap_or_else(|| panic!("{sw:?} port {out} is not cabled"));
                if subnet.node(far).is_switch() {
                    queue.push((far, far_port));
                } else {
                    let g = subnet.node(far).port_guid(far_port);
                    assert!(members.contains(&g), "the flood from {from} reaches non-member {g}");
                    assert!(reached.insert(g), "the flood from {from} reaches {g} twice");
                }
            }
        }
        let others: BTreeSet<Guid> = members.iter().copied().filter(|&g| g != from).collect();
        assert_eq!(reached, others, "the flood from {from} must reach exactly the other members");
    }
}

async fn start(seed: u64) -> (Net, tokio::task::JoinHandle<()>) {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(seed).build_shared().unwrap();
    let clock = VirtualClock::new(&fabric);
    let snapshots = Snapshots::new();
    let net = Net { topo, fabric, clock, snapshots: snapshots.clone() };
    let dev = SimDevice::attach(&net.fabric, net.host(SM_HOST).node, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = VirtualTransport::spawn(dev, TxnConfig::default(), &net.clock);
    let options = RunOptions { persist_lids: false, snapshots, ..RunOptions::default() };
    let sm = tokio::spawn(async move {
        let _ = run(transport, unsolicited, Config::default(), options, std::future::pending::<()>()).await;
    });
    within("bring-up", Duration::from_secs(30), async || net.all_active()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    (net, sm)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn ipoib_joins_get_loop_free_trees_that_reach_exactly_the_members_and_leaves_free_everything() {
    let (net, sm) = start(21).await;
    let probe = SmpClient::new(net.transport(15));
    let hosts = [1usize, 4, 9, 14];
    let mut clients = Vec::new();
    for &h in &hosts {
        clients.push(SaClient::new(net.transport(h)).unwrap());
    }
    let guids: Vec<Guid> = clients.iter().map(|c| c.local_port().port_guid).collect();

    // IPoIB up on each host, as the kernel joins.
    let mft_sets_before = net.count(AttributeId::MulticastForwardingTable, Method::Set);
    let mut up = Vec::new();
    for c in &clients {
        let u = mc::ipoib_up(c, PREFIX, 0xffff, 2).await.expect("IPoIB comes up without a join error");
        assert_eq!((u.datagram_mtu, u.connected_mtu, u.q_key), (2044, 65520, 0x0b1b));
        assert_eq!(u.groups.len(), 5);
        up.push(u);
    }
    let mlids: Vec<u16> = up[0].groups.iter().map(|g| g.mlid).collect();
    assert_eq!(mlids[0], 0xC000, "the broadcast group is the first, well-known group");
    for u in &up {
        let theirs: Vec<u16> = u.groups.iter().map(|g| g.mlid).collect();
        // Solicited-node groups differ per port; the other four are shared.
        assert_eq!(theirs[..4], mlids[..4], "every host joins the same shared groups");
    }
    let subnet = net.subnet();
    let everyone: BTreeSet<Guid> = guids.iter().copied().collect();
    let bcast = Lid(0xC000);
    within("the broadcast group routed", Duration::from_secs(1), async || {
        let mft = mft_of(&probe, &subnet, bcast).await;
        mft.values().any(|p| !p.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for &m in &mlids[..4] {
        let mft = mft_of(&probe, &subnet, Lid(m)).await;
        check_flood(&subnet, &mft, &everyone);
    }
    for (u, &g) in up.iter().zip(&guids) {
        let snm = Lid(u.groups[4].mlid);
        let mft = mft_of(&probe, &subnet, snm).await;
        check_flood(&subnet, &mft, &BTreeSet::from([g]));
    }
    let mft_sets = net.count(AttributeId::MulticastForwardingTable, Method::Set) - mft_sets_before;
    let joins = 5 * hosts.len() as u64;
    eprintln!("{joins} joins: {mft_sets} MFT Sets ({:.2} per join)", mft_sets as f64 / joins as f64);
    assert!(mft_sets > 0, "joins must be routed");

    // Two hosts leave: the trees shrink to the other two.
    for c in &clients[..2] {
        assert_eq!(mc::ipoib_down(c, PREFIX, 0xffff, 2).await.unwrap(), 5);
    }
    let rest: BTreeSet<Guid> = guids[2..].iter().copied().collect();
    within("the trees shrink", Duration::from_secs(1), async || {
        let mft = mft_of(&probe, &subnet, bcast).await;
        let leaves_with_members: usize = mft.values().filter(|p| !p.is_empty()).count();
        leaves_with_members > 0 && {
            let members = rest.clone();
            std::panic::catch_unwind(|| check_flood(&subnet, &mft, &members)).is_ok()
        }
    })
    .await;
    for &m in &mlids[..4] {
        check_flood(&subnet, &mft_of(&probe, &subnet, Lid(m)).await, &rest);
    }

    // The last two leave: no MFT holds any of the groups, the SA made ones
    // are gone and their MLIDs free; the broadcast group stays (well known).
    for c in &clients[2..] {
        mc::ipoib_down(c, PREFIX, 0xffff, 2).await.unwrap();
    }
    let all: Vec<u16> =
        up.iter().flat_map(|u| u.groups.iter().map(|g| g.mlid)).collect::<BTreeSet<_>>().into_iter().collect();
    within("every MFT entry gone", Duration::from_secs(1), async || {
        for &m in &all {
            if mft_of(&probe, &subnet, Lid(m)).await.values().any(|p| !p.is_empty()) {
                return false;
            }
        }
        true
    })
    .await;
    let c = &clients[0];
    let port_gid = mc::port_gid(PREFIX, guids[0].0);
    let table: Vec<McMemberRecordRepr> = c.get_table(0, &McMemberRecordRepr::default()).await.unwrap();
    let listed: Vec<[u8; 16]> = table.iter().map(|r| r.mgid).collect();
    assert_eq!(listed, vec![mc::broadcast_mgid(2, 0xffff)], "only the well-known group is left");
    // A new group gets the lowest free MLID again: 0xC001.
    let create = McMemberRecordRepr { q_key: 0x0b1b, mtu: 4, rate: 3, ..Default::default() };
    let mgid = mc::ipv4_group(2, 0xffff, [239, 1, 2, 3]);
    let ask = JoinAsk { mgid, port_gid, pkey: 0xffff, join_state: join_state::FULL, create: Some(create) };
    let got = mc::join(c, &ask).await.unwrap();
    assert_eq!(got.mlid, 0xC001, "freed MLIDs are reused, lowest first");
    let _ = mc_member_mask::MGID;

    sm.abort();
    let _ = sm.await;
}
