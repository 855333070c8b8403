//! SA state across a failover, whole SMs on the in-process fabric in
//! virtual time: a client registers a ServiceRecord and subscribes to trap
//! 65 with master A; standby B mirrors A's SA; A dies; B takes over. The
//! client's ServiceRecord (its ServiceKey and lease included) is answered
//! by B, and a host port going down under B reaches the client as a Report
//! of trap 65, with nobody registering again. The same run with B's
//! mirroring off loses both, so it is the mirror that carries them.
//! `SHOW_LOGS=1` prints each run's log.

mod sm_support;

use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::sa::service_record::SERVICE_RECORD_LEN;
use ibsm::mad::sa::{service_mask, InformInfoRepr, InformKind, ServiceRecordRepr, SA_DATA_OFFSET};
use ibsm::mad::{NoticeRepr, SaRecord, SmState};
use ibsm::runtime::metrics::Metrics;
use ibsm::sim::VirtualTransport;
use ibsm::transport::sa_client::{SaClient, SaError};
use ibsm::transport::{Datagram, MadAddress, SmpClient, Transport};
use ibsm::types::{Guid, Lid};
use sm_support::{sm_state, Logs, Net, Sm};
use tokio::sync::mpsc;

/// Hosts (by index among the topology's hosts) for each role; every role
/// has its own port, since a port hands unsolicited MADs to one device.
const A_HOST: usize = 0;
const B_HOST: usize = 15;
const CLIENT_HOST: usize = 5;
const PROBE_HOST: usize = 6;
const READER_HOST: usize = 7;
const DOWNED_HOST: usize = 9;

const SERVICE_ID: u64 = 0x0011_2233_4455_6677;
const SERVICE_KEY: [u8; 16] = [0x5A; 16];
const SERVICE_LEASE: u32 = 3600;
/// The default `[sa] sa_key`: trusted readers see ServiceKeys.
const SA_KEY: u64 = 1;

/// An SM on `host` mirroring its master's SA every `mirror_interval_s`
/// (0: not at all), and its metrics.
fn start_sm(net: &Net, host: usize, priority: u8, mirror_interval_s: u64) -> (Sm, Metrics) {
    let mut config = Config::default();
    config.sm.priority = priority;
    config.sa.mirror_interval_s = mirror_interval_s;
    // Without the periodic mirror, without the state stream too: these
    // runs show what the periodic mirror alone carries (tests/sa_sync_sim.rs
    // the stream).
    config.sa.state_sync = mirror_interval_s > 0;
    let metrics = Metrics::new();
    (net.start_sm(host, config, Some(metrics.clone())), metrics)
}

async fn wait_for(what: &str, limit: Duration, cond: impl AsyncFnMut() -> bool) -> Duration {
    sm_support::wait_every(Duration::from_millis(100), what, limit, cond).await
}

/// The value of one metric line of `text` (`name{labels}` exactly).
fn metric(text: &str, line: &str) -> Option<i64> {
    text.lines().find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
}

fn gid(guid: Guid) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    g[8..].copy_from_slice(&guid.0.to_be_bytes());
    g
}

/// An SA request MAD (IBA 15.2.1.1): `method` of `R`, `rec`'s bytes.
fn sa_request<R: SaRecord>(to: Lid, method: u8, mask: u64, sm_key: u64, rec: &R) -> Datagram {
    let mad = ibsm::transport::sa_client::request_mad(ibsm::mad::Method::from(method), sm_key, mask, rec).unwrap();
    Datagram { addr: MadAddress::gsi(to, 0), mad }
}

/// Sends a SubnAdmSet and checks the GetResp is a success.
async fn set<R: SaRecord>(client: &VirtualTransport, sa: Lid, mask: u64, rec: &R) {
    let answer = client.request(sa_request(sa, 0x02, mask, 0, rec)).await.unwrap();
    let status = u16::from_be_bytes([answer.mad[4], answer.mad[5]]);
    assert_eq!((answer.mad[3], status), (0x81, 0), "SubnAdmSet({:?}) refused", R::ATTRIBUTE);
}

fn the_service(owner: Guid) -> ServiceRecordRepr {
    let mut r = ServiceRecordRepr {
        service_id: SERVICE_ID,
        service_gid: gid(owner),
        service_lease: SERVICE_LEASE,
        service_key: SERVICE_KEY,
        ..ServiceRecordRepr::default()
    };
    r.set_name("mirror-test").unwrap();
    r
}

/// Every ServiceRecord the master's SA holds, read trusted from a host
/// that learnt the master's LID after the takeover (retried while it is
/// not serving yet).
async fn services_now(net: &Net, master: Lid) -> Vec<ServiceRecordRepr> {
    let reader = net.host_port(READER_HOST);
    wait_for("the reader's port to name the new master", Duration::from_secs(30), async || {
        net.master_sm_lid(reader) == master
    })
    .await;
    let (t, _rx) = net.transport(READER_HOST);
    let sa = SaClient::new(t).unwrap().with_sm_key(SA_KEY);
    assert_eq!(sa.sa_lid(), master);
    let mut records = None;
    wait_for("the new master's SA to answer", Duration::from_secs(30), async || {
        match sa.get_table::<ServiceRecordRepr>(0, &ServiceRecordRepr::default()).await {
            Ok(r) => {
                records = Some(r);
                true
            }
            Err(SaError::Status { .. }) => false,
            Err(e) => panic!("GetTable(ServiceRecord): {e}"),
        }
    })
    .await;
    records.unwrap()
}

/// The first Report of trap 65 for `gone` among the MADs reaching the
/// client within `limit`, answered with a ReportResp; `None` if none came.
async fn report_65(
    client: &VirtualTransport,
    inbox: &mut mpsc::Receiver<Datagram>,
    gone: [u8; 16],
    limit: Duration,
) -> Option<(Datagram, NoticeRepr)> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let d = tokio::time::timeout_at(deadline, inbox.recv()).await.ok()??;
        if d.mad.len() < SA_DATA_OFFSET + 80 || d.mad[1] != 0x03 || d.mad[3] != 0x06 {
            continue;
        }
        let n = NoticeRepr::parse_bytes(&d.mad[SA_DATA_OFFSET..SA_DATA_OFFSET + 80]).unwrap();
        // The SA answers the ReportResp check by TID: echo the Report.
        let mut resp = d.clone();
        resp.mad[3] = 0x86;
        client.send(resp).unwrap();
        if n.trap_number == 65 && n.data_details[6..22] == gone {
            return Some((d, n));
        }
    }
}

/// What the client still had after the failover.
struct After {
    services: Vec<ServiceRecordRepr>,
    report: Option<(Datagram, NoticeRepr)>,
    b_lid: Lid,
    /// B's SA gauge of ServiceRecords held, once it serves.
    b_services: Option<i64>,
    logs: String,
}

async fn failover(seed: u64, b_mirror_interval_s: u64) -> After {
    let (logs, _guard) = Logs::capture();
    let net = Net::new(seed);
    let (probe_t, _probe_rx) = net.transport(PROBE_HOST);
    let probe = SmpClient::new(probe_t);
    let (a, a_metrics) = start_sm(&net, A_HOST, 5, 10);
    wait_for("A brings the fabric up", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let (b, b_metrics) = start_sm(&net, B_HOST, 1, b_mirror_interval_s);
    let (a_lid, b_lid) = (net.lid(a.port), net.lid(b.port));
    wait_for("B standby", Duration::from_secs(30), async || sm_state(&probe, b_lid).await == Some(SmState::Standby))
        .await;

    // The client registers with A, which its port names as the SM.
    let (client, mut inbox) = net.transport(CLIENT_HOST);
    let me = client.local_port();
    assert_eq!(me.sm_lid, a_lid);
    let mask = service_mask::SERVICE_ID
        | service_mask::SERVICE_GID
        | service_mask::SERVICE_LEASE
        | service_mask::SERVICE_KEY
        | service_mask::SERVICE_NAME;
    set(&client, a_lid, mask, &the_service(me.port_guid)).await;
    let subscribe = InformInfoRepr {
        gid: [0; 16],
        lid_range_begin: 0xFFFF,
        lid_range_end: 0,
        subscribe: true,
        notice_type: 0xFFFF,
        kind: InformKind::Generic { trap_number: 65, producer_type: 0x00FF_FFFF },
        qpn: 0,
        resp_time_value: 0,
    };
    set(&client, a_lid, 0, &subscribe).await;

    // Two mirror intervals of standby. A's SA counts B's trusted reads.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let reads = metric(
        &a_metrics.render(),
        "ibsm_sa_queries_total{attribute=\"ServiceRecord\",method=\"GetTable\",result=\"ok\"}",
    );
    // Every request A's SA took counts in its answer-time histogram: the
    // client's two Sets at least, and B's reads.
    let answered = metric(&a_metrics.render(), "ibsm_sa_answer_seconds_count");
    assert!(answered.is_some_and(|n| n >= 2 + reads.unwrap_or(0)), "A's SA answer histogram: {answered:?}, {reads:?}");
    if b_mirror_interval_s > 0 {
        assert!(reads.is_some_and(|n| n >= 2), "A answered {reads:?} ServiceRecord GetTables in 25 s");
    } else {
        assert_eq!(reads, None, "nobody reads A's tables with mirroring off");
    }

    // A dies; B takes over.
    a.task.abort();
    let _ = a.task.await;
    wait_for("B master", Duration::from_secs(60), async || sm_state(&probe, b_lid).await == Some(SmState::Master))
        .await;
    wait_for("every port ACTIVE under B", Duration::from_secs(30), async || net.lids_if_up().is_some()).await;
    let services = services_now(&net, b_lid).await;
    // The SA task copies its counters to the metrics once a second.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b_services = metric(&b_metrics.render(), "ibsm_sa_registered{kind=\"service\"}");

    // A host port goes down under B: trap 65 to whoever subscribed.
    let downed = net.host_port(DOWNED_HOST);
    let gone = gid(net.port_guid(downed));
    net.fabric.lock().unwrap().link_down(downed).unwrap();
    let report = report_65(&client, &mut inbox, gone, Duration::from_secs(40)).await;
    eprintln!(
        "mirror {b_mirror_interval_s} s: B at LID {b_lid}, {} services, report {:?}",
        services.len(),
        report.as_ref().map(|r| r.1.trap_number)
    );
    b.task.abort();
    let _ = b.task.await;
    if std::env::var_os("SHOW_LOGS").is_some() {
        eprintln!("{}", logs.text());
    }
    After { services, report, b_lid, b_services, logs: logs.text() }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_takeover_keeps_service_records_and_subscriptions() {
    let after = failover(41, 10).await;
    let mine: Vec<_> = after.services.iter().filter(|r| r.service_id == SERVICE_ID).collect();
    assert_eq!(mine.len(), 1, "the client's ServiceRecord under B: {:?}", after.services);
    let r = mine[0];
    assert_eq!(r.name(), "mirror-test");
    assert_eq!(r.service_key, SERVICE_KEY, "the ServiceKey survived (trusted mirror, trusted read)");
    assert_eq!((r.service_lease, r.service_pkey), (SERVICE_LEASE, 0xFFFF));
    assert_eq!(r.to_bytes().len(), SERVICE_RECORD_LEN);
    assert_eq!(after.b_services, Some(1), "B's SA holds the one service");
    let (d, n) = after.report.expect("no Report of trap 65 reached the client after the takeover");
    assert_eq!(d.addr.lid, after.b_lid, "the Report comes from B's SA");
    assert_eq!((n.trap_number, n.issuer_lid), (65, after.b_lid));
    let line = "SA state taken over from the mirror: 1 services, 1 subscriptions, 0 alias GUIDs";
    assert_eq!(after.logs.matches(line).count(), 1, "{}", after.logs);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_the_mirror_a_takeover_loses_them() {
    let after = failover(41, 0).await;
    assert!(after.services.iter().all(|r| r.service_id != SERVICE_ID), "{:?}", after.services);
    assert_eq!(after.b_services, Some(0));
    assert!(after.report.is_none(), "a Report reached the client with no subscription under B");
    assert!(!after.logs.contains("taken over from the mirror"), "{}", after.logs);
}
