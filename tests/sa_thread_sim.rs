//! The SA answers on its own: an SA MAD goes from the I/O thread to the SA
//! task, which the daemon runs on a thread of its own, and never through
//! the owner task. Here the SM runs in-process in real time as the daemon
//! runs it (one current-thread runtime for the owner, the SA on its own
//! thread); the runtime that holds the owner is then blocked outright, as
//! a long stretch of work between two awaits would block it, and a client
//! on another host must still have every PathRecord answered.

use std::time::{Duration, Instant};

use ibsm::config::Config;
use ibsm::runtime::sa_task::SaPlacement;
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, SimDevice};
use ibsm::subnet::snapshot::Snapshots;
use ibsm::topology::{PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::sa_client::SaClient;
use ibsm::transport::txn::TxnConfig;
use ibsm::types::Lid;

const TOPO: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

#[test]
fn path_records_are_answered_while_the_owner_runtime_is_blocked() {
    let topo = Topology::from_spec_or_file(TOPO).unwrap();
    let fabric = FabricBuilder::new(&topo).seed(21).build_shared().unwrap();
    // Several threads in real time: the fabric's clock must not run ahead of them.
    fabric.lock().unwrap().pace_to_real_time();
    let hosts: Vec<_> = topo.hosts().collect();
    let dev = SimDevice::attach(&fabric, hosts[0], 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = MadTransport::spawn(dev, TxnConfig::default());
    let snapshots = Snapshots::new();
    let options = RunOptions {
        persist_lids: false,
        snapshots: snapshots.clone(),
        sa_placement: SaPlacement::OwnThread,
        ..RunOptions::default()
    };
    let owner_rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _sm = owner_rt.spawn(run(transport, unsolicited, Config::default(), options, std::future::pending::<()>()));
    owner_rt.block_on(async {
        let t0 = Instant::now();
        while !snapshots.latest().is_some_and(|s| s.sweep.subnet_up()) {
            assert!(t0.elapsed() < Duration::from_secs(60), "the SM did not bring {TOPO} up");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let lids: Vec<Lid> = {
        let f = fabric.lock().unwrap();
        hosts.iter().map(|&h| f.lid_of(PortRef { node: h, port: 1 }).unwrap()).collect()
    };

    // A client on the last host, on a thread and runtime of its own.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let client_dev = SimDevice::attach(&fabric, *hosts.last().unwrap(), 1).unwrap();
    let client = std::thread::spawn(move || {
        let (t, _unsolicited) = MadTransport::spawn(client_dev, TxnConfig::default());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let sa = SaClient::new(t).expect("the client's port knows the SM's LID");
            // The SA serves once the owner has told it the sweep is done:
            // wait for a first answer before the owner is held.
            let t0 = Instant::now();
            while sa.path_record(lids[1], lids[2]).await.is_err() {
                assert!(t0.elapsed() < Duration::from_secs(30), "the SA never answered");
            }
            ready_tx.send(()).unwrap();
            // The owner's runtime stops being driven once it has seen this.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let start = Instant::now();
            let mut answered = Vec::new();
            for (i, &slid) in lids.iter().enumerate() {
                let dlid = lids[(i + lids.len() / 2) % lids.len()];
                let rec = sa.path_record(slid, dlid).await.unwrap_or_else(|e| panic!("{slid} to {dlid}: {e}"));
                assert_eq!((rec.slid, rec.dlid), (slid.0, dlid.0));
                answered.push(start.elapsed());
            }
            answered
        })
    });
    // The owner runs until the SA has answered once.
    owner_rt.block_on(async {
        let t0 = Instant::now();
        while ready_rx.try_recv().is_err() {
            assert!(t0.elapsed() < Duration::from_secs(60), "the SA never answered a first query");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    // From here on nothing drives the owner's runtime: the owner task,
    // and anything else on it, is held until the client is done.
    let answered = client.join().expect("every PathRecord answered while the owner was held");
    assert_eq!(answered.len(), hosts.len());
    drop(owner_rt);
}
