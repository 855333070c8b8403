//! The SA state stream across a failover, whole SMs on the in-process
//! fabric in virtual time. Master A and standby B are both ibsm with the
//! periodic mirror off, so only the stream (`ibsm::sa::sync`) can carry
//! A's state. Two hosts bring IPoIB up; then a third brings IPoIB up and
//! registers a ServiceRecord, and A is killed 100 ms after its last answer.
//! B must serve all of it (the last joins and the service included), with
//! the MFTs as A left them and no host told to re-register; with the
//! stream's MADs dropped 1-10% of the time too. Without the stream, or
//! with a copy that stopped long before A died, B sets ClientReregister
//! on every host port instead.
//! `SHOW_LOGS=1` prints each run's log.

mod sm_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ibsm::cmd::mcast as mc;
use ibsm::config::Config;
use ibsm::mad::port_info::CapabilityMask;
use ibsm::mad::sa::mc_member_record::McMemberRecordRepr;
use ibsm::mad::sa::{service_mask, ServiceRecordRepr};
use ibsm::mad::sm_sync::SM_SYNC_ATTRIBUTE;
use ibsm::mad::{AttributeId, MgmtClass, SmState};
use ibsm::runtime::metrics::Metrics;
use ibsm::runtime::RunOptions;
use ibsm::sim::fault::{Match, Rule};
use ibsm::subnet::snapshot::Snapshots;
use ibsm::subnet::{NodeId, Subnet};
use ibsm::transport::SmpClient;
use ibsm::types::{Guid, Lid};
use sm_support::mcast::{flood_fault, mft_of};
use sm_support::{kill, sa_table, sm_state, wait_every, Logs, Net, Sm};

const A_HOST: usize = 0;
const B_HOST: usize = 15;
/// IPoIB up well before the failover.
const EARLY_HOSTS: [usize; 2] = [1, 4];
/// IPoIB up, and a ServiceRecord, 100 ms before A dies.
const LAST_HOST: usize = 9;
const PROBE_HOST: usize = 6;
const READER_HOST: usize = 8;

const PREFIX: u64 = 0xfe80_0000_0000_0000;
const PKEY: u16 = 0xffff;
const SCOPE: u8 = 2;
const SA_KEY: u64 = 1;
const SERVICE_ID: u64 = 0x5157_4E43_0000_0001;

fn start_sm(net: &Net, host: usize, priority: u8, state_sync: bool, snapshots: &Snapshots) -> (Sm, Metrics) {
    let mut config = Config::default();
    config.sm.priority = priority;
    config.sa.mirror_interval_s = 0;
    config.sa.state_sync = state_sync;
    let metrics = Metrics::new();
    let options = RunOptions {
        persist_lids: false,
        snapshots: snapshots.clone(),
        metrics: Some(metrics.clone()),
        ..RunOptions::default()
    };
    (net.start_sm_with(host, config, options), metrics)
}

async fn wait_for(what: &str, limit: Duration, cond: impl AsyncFnMut() -> bool) -> Duration {
    wait_every(Duration::from_millis(50), what, limit, cond).await
}

fn gauge(text: &str, line: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
}

/// Each MLID's members by port GUID.
fn groups_of(records: &[McMemberRecordRepr]) -> BTreeMap<u16, BTreeSet<Guid>> {
    let mut g: BTreeMap<u16, BTreeSet<Guid>> = BTreeMap::new();
    for r in records {
        let members = g.entry(r.mlid).or_default();
        if r.port_gid != [0; 16] {
            members.insert(Guid(u64::from_be_bytes(r.port_gid[8..].try_into().unwrap())));
        }
    }
    g
}

fn by_guid(subnet: &Subnet, mft: BTreeMap<NodeId, BTreeSet<u8>>) -> BTreeMap<Guid, BTreeSet<u8>> {
    mft.into_iter().map(|(id, ports)| (subnet.node(id).guid(), ports)).collect()
}

/// ClientReregister Sets every host port has had.
fn reregistrations(net: &Net) -> Vec<u32> {
    let f = net.fabric.lock().unwrap();
    (0..16).map(|h| f.client_reregistrations(net.host_port(h)).unwrap()).collect()
}

fn the_service(owner: Guid) -> ServiceRecordRepr {
    let mut gid = [0u8; 16];
    gid[..8].copy_from_slice(&PREFIX.to_be_bytes());
    gid[8..].copy_from_slice(&owner.0.to_be_bytes());
    let mut r =
        ServiceRecordRepr { service_id: SERVICE_ID, service_gid: gid, service_lease: 600, ..Default::default() };
    r.set_name("sync-test").unwrap();
    r
}

/// How the stream fares before A dies.
#[derive(Clone, Copy, Debug)]
enum Stream {
    /// B runs with `[sa] state_sync` on; the stream's MADs are dropped
    /// with this probability.
    Lossy(f64),
    /// B runs with the stream off.
    Off,
    /// The stream works, then every MAD of it is dropped for 30 s before
    /// A dies: B's copy is stale.
    CutEarly,
}

struct After {
    /// Each MLID's members: what the hosts joined, and what B answers.
    joined: BTreeMap<u16, BTreeSet<Guid>>,
    answered: BTreeMap<u16, BTreeSet<Guid>>,
    services: Vec<ServiceRecordRepr>,
    /// ClientReregister Sets per host port during the takeover.
    reregistered: Vec<u32>,
    mft_fault: Option<String>,
    entries_changed: usize,
    resent: Option<f64>,
    logs: String,
}

async fn failover(seed: u64, stream: Stream) -> After {
    let (logs, _guard) = Logs::capture();
    let net = Net::new(seed);
    {
        // Hosts take ClientReregister, as HCAs do (ibsim's ports, and so
        // the simulator's by default, do not say so).
        let mut f = net.fabric.lock().unwrap();
        for h in 0..16 {
            f.set_capability(net.host_port(h), CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED, true).unwrap();
        }
    }
    let probe = SmpClient::new(net.transport(PROBE_HOST).0);
    let (a_snaps, b_snaps) = (Snapshots::new(), Snapshots::new());
    let (a, a_metrics) = start_sm(&net, A_HOST, 5, true, &a_snaps);
    wait_for("A brings the fabric up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let (b, b_metrics) = start_sm(&net, B_HOST, 1, !matches!(stream, Stream::Off), &b_snaps);
    let (a_lid, b_lid) = (net.lid(a.port), net.lid(b.port));
    wait_for("B standby", Duration::from_secs(30), async || sm_state(&probe, b_lid).await == Some(SmState::Standby))
        .await;
    let the_stream = Match::any().class(MgmtClass::SubnAdm).attribute(AttributeId::from(SM_SYNC_ATTRIBUTE));
    if let Stream::Lossy(p) = stream {
        net.fabric.lock().unwrap().add_rule(Rule::drop_with(the_stream, p));
    }

    let mut hosts = Vec::new();
    for &h in &EARLY_HOSTS {
        let c = net.sa_client(h, a_lid, 0).await;
        mc::ipoib_up(&c, PREFIX, PKEY, SCOPE).await.expect("IPoIB comes up under A");
        hosts.push(c);
    }
    if !matches!(stream, Stream::Off) {
        // B's copy catches up: its lag gauge reads a Beat's worth at most.
        let t0 = tokio::time::Instant::now();
        while !gauge(&b_metrics.render(), "ibsm_mirror_lag_seconds ").is_some_and(|lag| lag < 1.0) {
            if t0.elapsed() > Duration::from_secs(30) {
                let text = b_metrics.render() + &a_metrics.render();
                let sync: Vec<&str> = text.lines().filter(|l| l.contains("sync") || l.contains("lag")).collect();
                panic!("B's copy is not current after 30 s: {sync:#?}\n{}", logs.text());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    if let Stream::CutEarly = stream {
        net.fabric.lock().unwrap().add_rule(Rule::drop_all(the_stream));
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
    let reregistered_before = reregistrations(&net);

    // The last host: IPoIB and a ServiceRecord; A dies 100 ms after its
    // last answer.
    let last = net.sa_client(LAST_HOST, a_lid, 0).await;
    let last_guid = last.local_port().port_guid;
    let up = mc::ipoib_up(&last, PREFIX, PKEY, SCOPE).await.expect("IPoIB comes up under A");
    let mask =
        service_mask::SERVICE_ID | service_mask::SERVICE_GID | service_mask::SERVICE_LEASE | service_mask::SERVICE_NAME;
    last.set(mask, &the_service(last_guid)).await.expect("A takes the ServiceRecord");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resent = gauge(&a_metrics.render(), "ibsm_sa_events_total{kind=\"sync\",what=\"changes_resent\"} ");
    kill(a).await;

    // What the hosts joined, and A's trees as it left them.
    let a_subnet = a_snaps.latest().expect("A published a sweep").sweep.subnet.clone();
    let mut joined: BTreeMap<u16, BTreeSet<Guid>> = BTreeMap::new();
    for g in &up.groups {
        joined.entry(g.mlid).or_default().insert(last_guid);
    }
    let mut a_mfts = BTreeMap::new();
    for &mlid in joined.keys() {
        a_mfts.insert(mlid, by_guid(&a_subnet, mft_of(&probe, &a_subnet, Lid(mlid)).await));
    }

    wait_for("B master", Duration::from_secs(60), async || sm_state(&probe, b_lid).await == Some(SmState::Master))
        .await;
    wait_for("every port ACTIVE under B", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let reader = net.sa_client(READER_HOST, b_lid, SA_KEY).await;
    let members: Vec<McMemberRecordRepr> = sa_table(&reader).await;
    let answered = groups_of(&members);
    let services: Vec<ServiceRecordRepr> = sa_table(&reader).await;
    // B's multicast pass follows its SA's import.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reregistered: Vec<u32> =
        reregistrations(&net).iter().zip(&reregistered_before).map(|(now, before)| now - before).collect();
    let b_subnet = b_snaps.latest().expect("B published a sweep").sweep.subnet.clone();
    let mut mft_fault = None;
    let mut entries_changed = 0;
    for (&mlid, a_mft) in &a_mfts {
        let b_mft = mft_of(&probe, &b_subnet, Lid(mlid)).await;
        if let Some(members) = answered.get(&mlid) {
            if let Some(f) = flood_fault(&b_subnet, &b_mft, members) {
                mft_fault.get_or_insert(format!("MLID {mlid:#x}: {f}"));
            }
        }
        let b_mft = by_guid(&b_subnet, b_mft);
        entries_changed += a_mft.iter().filter(|(id, ports)| b_mft.get(id) != Some(ports)).count();
    }
    eprintln!(
        "{stream:?}: {} groups answered, {} services, reregistered {:?}, {entries_changed} MFT entries changed, \
         {resent:?} changes resent",
        answered.len(),
        services.len(),
        reregistered
    );
    drop(hosts);
    kill(b).await;
    if std::env::var_os("SHOW_LOGS").is_some() {
        eprintln!("{}", logs.text());
    }
    After { joined, answered, services, reregistered, mft_fault, entries_changed, resent, logs: logs.text() }
}

fn assert_served(after: &After, what: &str) {
    for (mlid, members) in &after.joined {
        let answered = after.answered.get(mlid).cloned().unwrap_or_default();
        assert!(members.is_subset(&answered), "{what}: MLID {mlid:#x} under B is {answered:?}, joined {members:?}");
    }
    // The early hosts too: every shared group holds three members.
    let shared = after.answered.values().filter(|m| m.len() == 3).count();
    assert!(shared >= 4, "{what}: {:?}", after.answered);
    let mine: Vec<_> = after.services.iter().filter(|r| r.service_id == SERVICE_ID).collect();
    assert_eq!(mine.len(), 1, "{what}: the last ServiceRecord under B: {:?}", after.services);
    assert_eq!(mine[0].name(), "sync-test");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_last_joins_and_registrations_survive_a_failover_with_no_reregister() {
    let after = failover(51, Stream::Lossy(0.0)).await;
    assert_served(&after, "no loss");
    assert_eq!(after.reregistered, vec![0; 16], "no host port got ClientReregister");
    assert_eq!(after.mft_fault, None, "the MFTs flood each group to exactly its members under B");
    assert_eq!(after.entries_changed, 0, "B rewrote no switch's entry for A's groups");
    assert!(after.logs.contains("a current copy of the old master's SA state: no ClientReregister"), "{}", after.logs);
    assert!(after.logs.contains("SA takes over from the state stream's copy"), "{}", after.logs);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_stream_carries_them_through_one_to_ten_percent_loss() {
    // The stream packs records (two memberships, nine LIDs to a message),
    // so it sends few enough that some draws drop only Beats: at 5% and
    // 10% the seeds go on from the first until one drops a message that
    // carries changes (each run is checked whole), so that a change of
    // how many messages the stream sends cannot leave the resends untried.
    for (first_seed, loss) in [(52, 0.01), (57, 0.05), (67, 0.10)] {
        let what = format!("{}% loss", loss * 100.0);
        let mut resent = Vec::new();
        for seed in first_seed..first_seed + 20 {
            let after = failover(seed, Stream::Lossy(loss)).await;
            let what = format!("{what}, seed {seed}");
            assert_served(&after, &what);
            assert_eq!(after.reregistered, vec![0; 16], "{what}: no host port got ClientReregister");
            assert_eq!(after.mft_fault, None, "{what}");
            assert_eq!(after.entries_changed, 0, "{what}");
            resent.push(after.resent);
            if loss < 0.05 || after.resent.is_some_and(|n| n > 0.0) {
                break;
            }
        }
        if loss >= 0.05 {
            assert!(resent.iter().any(|r| r.is_some_and(|n| n > 0.0)), "{what}: nothing was resent: {resent:?}");
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_a_current_copy_every_port_is_told_to_reregister() {
    for stream in [Stream::Off, Stream::CutEarly] {
        let after = failover(55, stream).await;
        // ClientReregister once on every host port (A's host is still up).
        assert_eq!(after.reregistered, vec![1; 16], "{stream:?}");
        let line = match stream {
            Stream::Off => "with no copy of the old master's SA state",
            _ => "with a stale copy of the old master's SA state",
        };
        assert!(after.logs.contains(line), "{stream:?}: {}", after.logs);
        assert!(after.services.iter().all(|r| r.service_id != SERVICE_ID), "{stream:?}: {:?}", after.services);
    }
}

/// Two hosts go down under A (A's guid2lid keeps their LIDs); A dies;
/// under B the second host boots again, its port with no LID. Returns its
/// LID before and after.
async fn lid_across_failover(seed: u64, state_sync: bool) -> (Lid, Lid, String) {
    let (logs, _guard) = Logs::capture();
    let net = Net::new(seed);
    let probe = SmpClient::new(net.transport(PROBE_HOST).0);
    let snaps = Snapshots::new();
    let (a, _) = start_sm(&net, A_HOST, 5, true, &snaps);
    wait_for("A brings the fabric up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let (b, b_metrics) = start_sm(&net, B_HOST, 1, state_sync, &snaps);
    let b_lid = net.lid(b.port);
    wait_for("B standby", Duration::from_secs(30), async || sm_state(&probe, b_lid).await == Some(SmState::Standby))
        .await;
    // The two hosts away, by LID order: the later one comes back.
    let mut ports: Vec<_> = [2usize, 3].iter().map(|&h| net.host_port(h)).collect();
    ports.sort_by_key(|&p| net.lid(p).0);
    let (first, second) = (ports[0], ports[1]);
    let second_lid = net.lid(second);
    for p in [first, second] {
        net.fabric.lock().unwrap().crash_node(p.node).unwrap();
    }
    if state_sync {
        wait_for("B's copy to be current", Duration::from_secs(30), async || {
            gauge(&b_metrics.render(), "ibsm_mirror_lag_seconds ").is_some_and(|lag| lag < 1.0)
        })
        .await;
    }
    // A's reaction to the two links has passed and been streamed.
    tokio::time::sleep(Duration::from_secs(5)).await;
    kill(a).await;
    wait_for("B master", Duration::from_secs(60), async || sm_state(&probe, b_lid).await == Some(SmState::Master))
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    net.fabric.lock().unwrap().restart_node(second.node).unwrap();
    wait_for("the host back with a LID", Duration::from_secs(60), async || net.lid(second).0 != 0).await;
    // Settled: B's sweep after the trap.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = net.lid(second);
    kill(b).await;
    (second_lid, after, logs.text())
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_port_away_during_the_failover_comes_back_to_its_lid() {
    let (before, after, logs) = lid_across_failover(56, true).await;
    assert_eq!(after, before, "the host's LID under B\n{logs}");
    assert!(logs.contains("the old master's guid2lid adopted from the state stream"), "{logs}");
    // Without the stream, B knows nothing of that LID: the host gets the
    // lowest free one, the first host's.
    let (before, after, logs) = lid_across_failover(56, false).await;
    assert_ne!(after, before, "without the stream the LID is B's choice\n{logs}");
}
