//! Multicast across a failover, whole SMs on the in-process fabric in
//! virtual time: four hosts bring IPoIB up with master A (the kernel's
//! joins: broadcast group, all-hosts, all-nodes, all-routers,
//! solicited-node); standby B mirrors A's SA; A dies; B takes over without
//! any host joining again (the hosts get no ClientReregister: B's copy is
//! current).
//! B's SA then answers the same groups at the same MLIDs with the same
//! members, every switch's MFT (read back with SubnGet) still floods from
//! each member to exactly the members, no MFT block was read or written
//! (A streamed its trees and its digests of the switches' MFTs, and B's
//! trees match them), and a new
//! host's IPoIB joins keep every old member on the trees. The same run
//! with B's mirroring off shows what the mirror prevents: the new host's
//! join of the broadcast group cuts the old members off its tree.
//! `SHOW_LOGS=1` prints each run's log.

mod sm_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ibsm::cmd::mcast as mc;
use ibsm::config::Config;
use ibsm::mad::sa::mc_member_record::McMemberRecordRepr;
use ibsm::mad::{AttributeId, Method, SmState};
use ibsm::runtime::RunOptions;
use ibsm::sim::VirtualTransport;
use ibsm::subnet::snapshot::Snapshots;
use ibsm::subnet::{NodeId, Subnet};
use ibsm::transport::SmpClient;
use ibsm::types::{Guid, Lid};
use sm_support::mcast::{flood_fault, mft_of};
use sm_support::{kill, sa_table, sm_state, wait_every, Logs, Net, Sm};

/// Hosts (by index among the topology's 16) for each role; every role has
/// its own port, since a port hands unsolicited MADs to one device.
const A_HOST: usize = 0;
const B_HOST: usize = 15;
/// On all four leaves.
const IPOIB_HOSTS: [usize; 4] = [1, 4, 9, 14];
const NEW_HOST: usize = 10;
const PROBE_HOST: usize = 6;
const READER_A_HOST: usize = 7;
const READER_B_HOST: usize = 8;

const PREFIX: u64 = 0xfe80_0000_0000_0000;
const PKEY: u16 = 0xffff;
const SCOPE: u8 = 2;
/// The default `[sa] sa_key`: a trusted GetTable lists every member.
const SA_KEY: u64 = 1;
const BCAST: Lid = Lid(0xC000);

/// One record of a trusted GetTable(MCMemberRecord): MGID, MLID, PortGID
/// (zero for a group without members), JoinState, ProxyJoin.
type Row = ([u8; 16], u16, [u8; 16], u8, bool);

fn rows(records: &[McMemberRecordRepr]) -> BTreeSet<Row> {
    records.iter().map(|r| (r.mgid, r.mlid, r.port_gid, r.join_state, r.proxy_join)).collect()
}

/// Each MLID's members (by port GUID), from the rows.
fn groups_of(rows: &BTreeSet<Row>) -> BTreeMap<u16, BTreeSet<Guid>> {
    let mut out: BTreeMap<u16, BTreeSet<Guid>> = BTreeMap::new();
    for &(_, mlid, port_gid, _, _) in rows {
        let members = out.entry(mlid).or_default();
        if port_gid != [0; 16] {
            members.insert(Guid(u64::from_be_bytes(port_gid[8..].try_into().unwrap())));
        }
    }
    out
}

async fn wait_for(what: &str, limit: Duration, cond: impl AsyncFnMut() -> bool) -> Duration {
    wait_every(Duration::from_millis(50), what, limit, cond).await
}

fn start_sm(net: &Net, host: usize, priority: u8, mirror_interval_s: u64, snapshots: &Snapshots) -> Sm {
    let mut config = Config::default();
    config.sm.priority = priority;
    config.sa.mirror_interval_s = mirror_interval_s;
    // Without the periodic mirror, without the state stream too: these
    // runs show what the periodic mirror alone carries (tests/sa_sync_sim.rs
    // the stream).
    config.sa.state_sync = mirror_interval_s > 0;
    let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
    net.start_sm_with(host, config, options)
}

/// MFT (Gets, Sets) the fabric has seen.
fn mft_counts(net: &Net) -> (u64, u64) {
    let f = net.fabric.lock().unwrap();
    let attr = AttributeId::MulticastForwardingTable;
    (f.smp_count(attr, Method::Get), f.smp_count(attr, Method::Set))
}

/// Why the MFTs do not flood each group from each member to exactly its
/// members, if they do not.
async fn trees_fault(
    probe: &SmpClient<VirtualTransport>,
    subnet: &Subnet,
    groups: &BTreeMap<u16, BTreeSet<Guid>>,
) -> Option<String> {
    for (&mlid, members) in groups {
        let mft = mft_of(probe, subnet, Lid(mlid)).await;
        if let Some(f) = flood_fault(subnet, &mft, members) {
            return Some(format!("MLID {mlid:#x}: {f}"));
        }
    }
    None
}

/// MFT entries by switch GUID (node IDs are each SM's discovery order).
fn by_guid(subnet: &Subnet, mft: BTreeMap<NodeId, BTreeSet<u8>>) -> BTreeMap<Guid, BTreeSet<u8>> {
    mft.into_iter().map(|(id, ports)| (subnet.node(id).guid(), ports)).collect()
}

/// What a failover left.
struct After {
    /// A's table before it died, B's after the takeover.
    before: BTreeSet<Row>,
    after: BTreeSet<Row>,
    /// MFT Gets and Sets from A's death until B's multicast pass settled.
    takeover_mft_gets: u64,
    takeover_mft_sets: u64,
    /// Why B's trees are wrong for A's groups right after the takeover.
    takeover_fault: Option<String>,
    /// Switches' MFT entries for A's groups that B changed.
    entries_changed: usize,
    /// The new host's groups, by MLID, as it joined them under B.
    new_host_mlids: Vec<u16>,
    /// Why the trees are wrong for the old members plus the new host after
    /// its joins.
    joined_fault: Option<String>,
    /// The old members and the new host, per MLID of the shared groups.
    joined_groups: BTreeMap<u16, BTreeSet<Guid>>,
    logs: String,
}

async fn failover(seed: u64, b_mirror_interval_s: u64) -> After {
    let (logs, _guard) = Logs::capture();
    let net = Net::new(seed);
    let probe = SmpClient::new(net.transport(PROBE_HOST).0);
    let (a_snaps, b_snaps) = (Snapshots::new(), Snapshots::new());
    let a = start_sm(&net, A_HOST, 5, 10, &a_snaps);
    wait_for("A brings the fabric up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let b = start_sm(&net, B_HOST, 1, b_mirror_interval_s, &b_snaps);
    let (a_lid, b_lid) = (net.lid(a.port), net.lid(b.port));
    wait_for("B standby", Duration::from_secs(30), async || sm_state(&probe, b_lid).await == Some(SmState::Standby))
        .await;

    // IPoIB comes up on four hosts under A.
    let mut ipoib = Vec::new();
    for &h in &IPOIB_HOSTS {
        let c = net.sa_client(h, a_lid, 0).await;
        let up = mc::ipoib_up(&c, PREFIX, PKEY, SCOPE).await.expect("IPoIB comes up under A");
        assert_eq!((up.groups.len(), up.groups[0].mlid), (5, BCAST.0));
        ipoib.push(c);
    }
    let a_subnet = a_snaps.latest().expect("A published a sweep").sweep.subnet.clone();
    let reader_a = net.sa_client(READER_A_HOST, a_lid, SA_KEY).await;
    let before = rows(&sa_table::<McMemberRecordRepr>(&reader_a).await);
    let groups = groups_of(&before);
    assert_eq!(groups.len(), 4 + IPOIB_HOSTS.len(), "four shared groups and a solicited-node group per host");
    assert_eq!(groups[&BCAST.0].len(), IPOIB_HOSTS.len());
    let mut fault = Some(String::new());
    wait_for("A's trees", Duration::from_secs(5), async || {
        fault = trees_fault(&probe, &a_subnet, &groups).await;
        fault.is_none()
    })
    .await;
    let mut a_mfts = Vec::new();
    for &mlid in groups.keys() {
        a_mfts.push(by_guid(&a_subnet, mft_of(&probe, &a_subnet, Lid(mlid)).await));
    }

    // Two mirror intervals of standby; then A dies and B takes over.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let (gets_before, sets_before) = mft_counts(&net);
    kill(a).await;
    wait_for("B master", Duration::from_secs(60), async || sm_state(&probe, b_lid).await == Some(SmState::Master))
        .await;
    wait_for("every port ACTIVE under B", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let reader_b = net.sa_client(READER_B_HOST, b_lid, SA_KEY).await;
    let after = rows(&sa_table::<McMemberRecordRepr>(&reader_b).await);
    // B's multicast pass follows its SA's import within a round trip or two.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (gets, sets) = mft_counts(&net);
    let (takeover_mft_gets, takeover_mft_sets) = (gets - gets_before, sets - sets_before);
    let b_subnet = b_snaps.latest().expect("B published a sweep").sweep.subnet.clone();
    let takeover_fault = trees_fault(&probe, &b_subnet, &groups).await;
    let mut entries_changed = 0;
    for (&mlid, a_mft) in groups.keys().zip(&a_mfts) {
        let b_mft = by_guid(&b_subnet, mft_of(&probe, &b_subnet, Lid(mlid)).await);
        entries_changed += a_mft.iter().filter(|(id, ports)| b_mft.get(id) != Some(ports)).count();
    }

    // A new host brings IPoIB up under B.
    let new_host = net.sa_client(NEW_HOST, b_lid, 0).await;
    let up = mc::ipoib_up(&new_host, PREFIX, PKEY, SCOPE).await.expect("IPoIB comes up under B");
    let new_host_mlids: Vec<u16> = up.groups.iter().map(|g| g.mlid).collect();
    let new_guid = new_host.local_port().port_guid;
    let joined_groups: BTreeMap<u16, BTreeSet<Guid>> = groups
        .iter()
        .filter(|(_, m)| m.len() > 1)
        .map(|(&mlid, m)| (mlid, m.iter().copied().chain([new_guid]).collect()))
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let joined_fault = trees_fault(&probe, &b_subnet, &joined_groups).await;
    eprintln!(
        "mirror {b_mirror_interval_s} s: {} rows before, {} after; {takeover_mft_gets} MFT Gets and {takeover_mft_sets} Sets during the takeover, \
         {entries_changed} switch entries changed; after the new host's joins: {joined_fault:?}",
        before.len(),
        after.len()
    );
    drop(ipoib);
    kill(b).await;
    if std::env::var_os("SHOW_LOGS").is_some() {
        eprintln!("{}", logs.text());
    }
    After {
        before,
        after,
        takeover_mft_gets,
        takeover_mft_sets,
        takeover_fault,
        entries_changed,
        new_host_mlids,
        joined_fault,
        joined_groups,
        logs: logs.text(),
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_takeover_keeps_the_multicast_groups_their_mlids_members_and_trees() {
    let after = failover(43, 10).await;
    assert_eq!(after.after, after.before, "B's SA answers A's groups, MLIDs and members");
    assert_eq!(after.takeover_fault, None, "the MFTs still flood each group to exactly its members under B");
    assert_eq!(after.entries_changed, 0, "B rewrote no switch's entry for A's groups");
    // A streamed its groups' trees and its digest of every switch's MFT;
    // B's trees, built along A's, give the same digests, so B neither
    // reads a block nor writes one (without the digests it read the 6
    // switches' one block of 32 MLIDs each).
    assert_eq!(after.takeover_mft_sets, 0, "MFT Sets during the takeover");
    assert_eq!(after.takeover_mft_gets, 0, "MFT Gets during the takeover");
    assert!(after.logs.contains("vouched=6"), "B took the 6 switches' MFTs on A's digests");
    // The new host's joins: the shared groups at A's MLIDs, and every old
    // member still on their trees.
    let shared: Vec<u16> = after.joined_groups.keys().copied().collect();
    assert_eq!(after.new_host_mlids[..4], shared[..], "the new host joins the groups A made");
    assert_eq!(after.new_host_mlids[0], BCAST.0);
    assert_eq!(after.joined_fault, None, "the old members stay reachable after the new host joins");
    let line = "SA state taken over from the mirror: 0 services, 0 subscriptions, 0 alias GUIDs, \
                20 multicast members (7 groups made)";
    assert_eq!(after.logs.matches(line).count(), 1, "{}", after.logs);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_the_mirror_the_first_join_cuts_the_old_members_off() {
    let after = failover(43, 0).await;
    let empty_broadcast: BTreeSet<Row> =
        after.after.iter().filter(|r| r.1 == BCAST.0 && r.2 == [0; 16]).copied().collect();
    assert_eq!(after.after, empty_broadcast, "B starts with only the well-known broadcast group, empty");
    let fault = after.joined_fault.expect("the new host's joins must cut the old members off");
    assert!(fault.contains("MLID 0xc000"), "{fault}");
    assert!(!after.logs.contains("taken over from the mirror"), "{}", after.logs);
}
