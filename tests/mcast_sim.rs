//! Multicast end to end on the in-process fabric, the whole runtime in
//! virtual time: hosts bring IPoIB up as the kernel does (`ibsm sa ipoib`'s
//! library calls: broadcast group first, then the groups IPv4 and IPv6
//! join); within a second of each join the SM has routed the group and
//! every switch's MFT, read back with SubnGet, floods a packet from any
//! member to exactly the members, without loops. Leaves shrink the trees;
//! after the last leave the groups the SA made are gone, their MLIDs are
//! free (the next new group gets the lowest again) and no MFT holds them.

mod sm_support;

use std::collections::BTreeSet;
use std::time::Duration;

use ibsm::cmd::mcast::{self as mc, JoinAsk};
use ibsm::config::Config;
use ibsm::mad::sa::mc_member_record::{join_state, McMemberRecordRepr};
use ibsm::mad::{AttributeId, Method};
use ibsm::runtime::RunOptions;
use ibsm::subnet::snapshot::Snapshots;
use ibsm::subnet::Subnet;
use ibsm::transport::sa_client::SaClient;
use ibsm::transport::SmpClient;
use ibsm::types::{Guid, Lid};
use sm_support::mcast::{check_flood, flood_fault, mft_of};
use sm_support::{wait_every, Net, Sm};

const SM_HOST: usize = 0;
const PREFIX: u64 = 0xfe80_0000_0000_0000;

fn subnet(snapshots: &Snapshots) -> Subnet {
    snapshots.latest().expect("a sweep published").sweep.subnet.clone()
}

async fn within(what: &str, limit: Duration, cond: impl AsyncFnMut() -> bool) -> Duration {
    wait_every(Duration::from_millis(20), what, limit, cond).await
}

async fn start(seed: u64) -> (Net, Snapshots, Sm) {
    let net = Net::new(seed);
    let snapshots = Snapshots::new();
    let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
    let sm = net.start_sm_with(SM_HOST, Config::default(), options);
    within("bring-up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    (net, snapshots, sm)
}

fn count(net: &Net, attr: AttributeId, method: Method) -> u64 {
    net.fabric.lock().unwrap().smp_count(attr, method)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn ipoib_joins_get_loop_free_trees_that_reach_exactly_the_members_and_leaves_free_everything() {
    let (net, snapshots, sm) = start(21).await;
    let probe = SmpClient::new(net.transport(15).0);
    let hosts = [1usize, 4, 9, 14];
    let mut clients = Vec::new();
    for &h in &hosts {
        clients.push(SaClient::new(net.transport(h).0).unwrap());
    }
    let guids: Vec<Guid> = clients.iter().map(|c| c.local_port().port_guid).collect();

    // IPoIB up on each host, as the kernel joins.
    let mft_sets_before = count(&net, AttributeId::MulticastForwardingTable, Method::Set);
    let mut up = Vec::new();
    for c in &clients {
        let u = mc::ipoib_up(c, PREFIX, 0xffff, 2).await.expect("IPoIB comes up without a join error");
        assert_eq!((u.datagram_mtu, u.connected_mtu, u.q_key), (2044, 65520, 0x0b1b));
        assert_eq!(u.groups.len(), 5);
        up.push(u);
    }
    // Before unicast (datagram or connected mode) IPoIB resolves each
    // neighbour's path with its P_Key.
    let path = mc::ipoib_path(&clients[0], PREFIX, 0xffff, guids[1].0).await.expect("a path in the default partition");
    assert_eq!((path.pkey, path.dlid), (0xffff, clients[1].local_port().lid.0));
    let mlids: Vec<u16> = up[0].groups.iter().map(|g| g.mlid).collect();
    assert_eq!(mlids[0], 0xC000, "the broadcast group is the first, well-known group");
    for u in &up {
        let theirs: Vec<u16> = u.groups.iter().map(|g| g.mlid).collect();
        // Solicited-node groups differ per port; the other four are shared.
        assert_eq!(theirs[..4], mlids[..4], "every host joins the same shared groups");
    }
    let subnet = subnet(&snapshots);
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
    // The SA's MulticastForwardingTableRecords follow the passes between
    // sweeps: the broadcast group's entries are what the switches hold.
    let records: Vec<ibsm::mad::sa::MftRecordRepr> =
        clients[0].clone().with_sm_key(1).get_table(0, &ibsm::mad::sa::MftRecordRepr::default()).await.unwrap();
    let mft = mft_of(&probe, &subnet, bcast).await;
    for id in subnet.switches() {
        let lid = subnet.current_lid(id, 0).unwrap().0;
        let mut from_sa = BTreeSet::new();
        for r in records.iter().filter(|r| r.lid == lid && r.block_num == 0) {
            for bit in 0..16u8 {
                if r.block.port_masks[0] & (1 << bit) != 0 {
                    from_sa.insert(r.position * 16 + bit);
                }
            }
        }
        assert_eq!(from_sa, mft[&id], "switch at LID {lid}: the SA's MFT record for 0xC000 is what the switch holds");
    }
    let mft_sets = count(&net, AttributeId::MulticastForwardingTable, Method::Set) - mft_sets_before;
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
        leaves_with_members > 0 && flood_fault(&subnet, &mft, &rest).is_none()
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

    sm_support::kill(sm).await;
}

/// MFT Sets to one spine are lost while hosts join: no tree ever loops
/// (the blocks whose Sets failed are held back everywhere), and once the
/// spine answers again the SM completes the trees by itself, with no
/// membership change to prompt it.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn lost_mft_sets_never_make_a_loop_and_are_retried_until_written() {
    use ibsm::sim::{Match, Rule};
    let (net, snapshots, sm) = start(23).await;
    let probe = SmpClient::new(net.transport(15).0);
    let subnet = subnet(&snapshots);
    // A spine: a switch with no host cabled to it.
    let spine = net
        .topo
        .switches()
        .find(|&s| {
            !net.topo.links.iter().any(|l| {
                (l.a.node == s && net.topo.node(l.b.node).kind == ibsm::topology::NodeKind::Ca)
                    || (l.b.node == s && net.topo.node(l.a.node).kind == ibsm::topology::NodeKind::Ca)
            })
        })
        .expect("the fat tree has spines");
    let lost =
        Rule::drop_all(Match::any().node(spine).attribute(AttributeId::MulticastForwardingTable).method(Method::Set));
    let rule = net.fabric.lock().unwrap().add_rule(lost);

    let hosts = [1usize, 6, 11, 14];
    let mut guids = BTreeSet::new();
    let mut incomplete = 0;
    for &h in &hosts {
        let c = SaClient::new(net.transport(h).0).unwrap();
        guids.insert(c.local_port().port_guid);
        mc::ipoib_up(&c, PREFIX, 0xffff, 2).await.expect("joins are answered while MFT Sets are lost");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mft = mft_of(&probe, &subnet, Lid(0xC000)).await;
        if let Some(fault) = flood_fault(&subnet, &mft, &guids) {
            assert!(!fault.contains("twice"), "a lost Set must never leave a loop: {fault}");
            incomplete += 1;
        }
    }
    assert!(incomplete > 0, "the lost Sets must have kept some tree from being whole (else the test proves nothing)");
    // Long enough for every transport retry of those Sets to run out.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mft = mft_of(&probe, &subnet, Lid(0xC000)).await;
    let fault = flood_fault(&subnet, &mft, &guids).expect("the broadcast tree is not whole while its spine drops Sets");
    assert!(!fault.contains("twice"), "{fault}");
    // The spine answers again: within a few retries every tree is whole.
    net.fabric.lock().unwrap().remove_rule(rule);
    let took = within("the trees completed after the losses", Duration::from_secs(5), async || {
        let mft = mft_of(&probe, &subnet, Lid(0xC000)).await;
        flood_fault(&subnet, &mft, &guids).is_none()
    })
    .await;
    eprintln!("trees whole {took:?} after the spine answered again");
    for m in [0xC000u16, 0xC001, 0xC002, 0xC003] {
        check_flood(&subnet, &mft_of(&probe, &subnet, Lid(m)).await, &guids);
    }
    sm_support::kill(sm).await;
}

/// Switches that honour SwitchInfo.MulticastFDBTop (port 0's
/// IsMulticastFDBTopSupported) get a top that covers the blocks in use:
/// 0xC01F while MLIDs of block 0 are routed there, 0xBFFF (no entry)
/// once the last group is gone; switches without the capability are not
/// sent one.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn switches_that_honour_multicast_fdb_top_get_one_that_covers_the_blocks_in_use() {
    use ibsm::mad::port_info::CapabilityMask;
    use ibsm::mad::{SmpAttribute, SwitchInfoRepr};
    use ibsm::topology::PortRef;
    let net = Net::new(29);
    let capable: Vec<_> = net.topo.switches().take(3).collect();
    for &s in &capable {
        let r = PortRef { node: s, port: 0 };
        net.fabric.lock().unwrap().set_capability(r, CapabilityMask::IS_MULTICAST_FDB_TOP_SUPPORTED, true).unwrap();
    }
    let snapshots = Snapshots::new();
    let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
    let sm = net.start_sm_with(SM_HOST, Config::default(), options);
    within("bring-up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let probe = SmpClient::new(net.transport(15).0);
    let subnet = subnet(&snapshots);
    let tops = async || {
        let mut out = Vec::new();
        for id in subnet.switches() {
            let lid = subnet.current_lid(id, 0).unwrap();
            let smp = probe.lid_get(lid, AttributeId::SwitchInfo, 0).await.unwrap();
            out.push((subnet.node(id).guid(), SwitchInfoRepr::parse_data(&smp.data).unwrap().multicast_fdb_top));
        }
        out
    };
    let capable_guids: BTreeSet<Guid> = capable.iter().map(|&s| net.topo.node(s).node_guid).collect();
    // No group has members yet: the capable switches say "no entry".
    for (g, top) in tops().await {
        let want = if capable_guids.contains(&g) { 0xBFFF } else { 0 };
        assert_eq!(top, want, "switch {g} before any join");
    }
    let hosts = [1usize, 6, 11, 14];
    let mut clients = Vec::new();
    for &h in &hosts {
        let c = SaClient::new(net.transport(h).0).unwrap();
        mc::ipoib_up(&c, PREFIX, 0xffff, 2).await.unwrap();
        clients.push(c);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mft = mft_of(&probe, &subnet, Lid(0xC000)).await;
    for (g, top) in tops().await {
        let id = subnet.by_guid[&g];
        let routed = !mft[&id].is_empty();
        let want = match (capable_guids.contains(&g), routed) {
            (false, _) => 0,
            (true, true) => 0xC01F,
            (true, false) => 0xBFFF,
        };
        assert_eq!(top, want, "switch {g} (on the broadcast tree: {routed}) after the joins");
    }
    for c in &clients {
        mc::ipoib_down(c, PREFIX, 0xffff, 2).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (g, top) in tops().await {
        assert_eq!(top, if capable_guids.contains(&g) { 0xBFFF } else { 0 }, "switch {g} after the last leave");
    }
    sm_support::kill(sm).await;
}
