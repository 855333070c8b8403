//! Multicast trees across a failover on a torus, whole SMs on the
//! in-process fabric in virtual time. On a torus equal cables are chosen
//! by the load earlier trees left, so the trees a master builds as joins
//! come depend on their order; a new master routing the same groups at
//! once builds others. Master A streams its trees and its digests of the
//! switches' MFTs to standby B; A dies; B builds its trees along A's and
//! writes no MFT block, reads none, and every group still floods from each
//! member to exactly its members. `SHOW_LOGS=1` prints the log.

mod sm_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ibsm::cmd::join_bench::{bench_mgid, join_record};
use ibsm::cmd::mcast::port_gid;
use ibsm::config::Config;
use ibsm::mad::{AttributeId, Method, SmState};
use ibsm::runtime::RunOptions;
use ibsm::subnet::snapshot::Snapshots;
use ibsm::transport::SmpClient;
use ibsm::types::{Guid, Lid};
use sm_support::mcast::{flood_fault, mft_of};
use sm_support::{kill, sm_state, wait_every, Logs, Net};

const SPEC: &str = "torus2d:4x4,hosts=2";
const A_HOST: usize = 0;
const B_HOST: usize = 31;
const PROBE_HOST: usize = 30;
/// Spread over the torus.
const JOINERS: [usize; 5] = [3, 9, 14, 20, 27];
const GROUPS: u32 = 40;
const PREFIX: u64 = 0xfe80_0000_0000_0000;

fn mft_counts(net: &Net) -> (u64, u64) {
    let f = net.fabric.lock().unwrap();
    let attr = AttributeId::MulticastForwardingTable;
    (f.smp_count(attr, Method::Get), f.smp_count(attr, Method::Set))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_new_master_builds_the_old_masters_trees_and_writes_no_mft_block() {
    let (logs, _guard) = Logs::capture();
    let net = Net::with_spec(61, SPEC);
    let probe = SmpClient::new(net.transport(PROBE_HOST).0);
    let b_snaps = Snapshots::new();
    let start = |host, priority, snapshots: &Snapshots| {
        let mut config = Config::default();
        config.sm.priority = priority;
        let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
        net.start_sm_with(host, config, options)
    };
    let a = start(A_HOST, 5, &Snapshots::new());
    let step = Duration::from_millis(50);
    wait_every(step, "A brings the fabric up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let b = start(B_HOST, 1, &b_snaps);
    let (a_lid, b_lid) = (net.lid(a.port), net.lid(b.port));
    wait_every(step, "B standby", Duration::from_secs(30), async || {
        sm_state(&probe, b_lid).await == Some(SmState::Standby)
    })
    .await;

    // Joins in an order no batch would take: the first joiner creates the
    // groups two members at a time, in MLID order; each later joiner joins
    // them backwards, or every other one, a pass each.
    // Each group's members by the MLID A gave it.
    let mut mlids: BTreeMap<u16, BTreeSet<Guid>> = BTreeMap::new();
    for (k, &h) in JOINERS.iter().enumerate() {
        let client = net.sa_client(h, a_lid, 0).await;
        let guid = net.port_guid(net.host_port(h));
        let mut order: Vec<u32> = (0..GROUPS).collect();
        if k % 2 == 1 {
            order.reverse();
        }
        for g in order.into_iter().filter(|g| k < 3 || g % 2 == 0) {
            let mgid = bench_mgid(7, g);
            let (mask, rec) = join_record(mgid, port_gid(PREFIX, guid.0), k == 0);
            let got = client.set(mask, &rec).await.unwrap_or_else(|e| panic!("host {h} joins group {g}: {e}"));
            mlids.entry(got.mlid).or_default().insert(guid);
            if k == 0 {
                // Each group's tree grows with the later joins, not at once.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The stream carries the last joins and trees; a Beat or two later the
    // copy is current.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(mlids.len(), GROUPS as usize);

    let (gets_before, sets_before) = mft_counts(&net);
    kill(a).await;
    wait_every(step, "B master", Duration::from_secs(60), async || {
        sm_state(&probe, b_lid).await == Some(SmState::Master)
    })
    .await;
    wait_every(step, "every port ACTIVE under B", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (gets, sets) = mft_counts(&net);
    let b_subnet = b_snaps.latest().expect("B published a sweep").sweep.subnet.clone();
    let mut fault = None;
    for (&mlid, m) in &mlids {
        let mft = mft_of(&probe, &b_subnet, Lid(mlid)).await;
        if let Some(f) = flood_fault(&b_subnet, &mft, m) {
            fault = Some(format!("MLID {mlid:#x}: {f}"));
            break;
        }
    }
    let text = logs.text();
    kill(b).await;
    if std::env::var_os("SHOW_LOGS").is_some() {
        eprintln!("{text}");
    }
    eprintln!("takeover: {} MFT Gets, {} Sets", gets - gets_before, sets - sets_before);
    assert_eq!(fault, None, "every group floods to exactly its members under B");
    assert!(text.contains("a current copy of the old master's SA state: no ClientReregister"), "{text}");
    assert_eq!((gets - gets_before, sets - sets_before), (0, 0), "MFT Gets and Sets by B");
}
