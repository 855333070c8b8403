//! Each heavy sweep publishes a snapshot of what it found and decided;
//! readers hold one while later sweeps publish newer ones. Judged against
//! the in-process fabric's own state.

use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::PortState;
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, SimDevice};
use ibsm::subnet::snapshot::Snapshots;
use ibsm::topology::{NodeIdx, NodeKind, PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;

#[tokio::test(flavor = "current_thread")]
async fn snapshots_hold_the_sweeps_nodes_lids_and_routes() {
    let topo = Topology::from_spec_or_file("fattree2:radix=8,leaves=4,spines=2,hosts=4").unwrap();
    let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
    let host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, host, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = MadTransport::spawn(dev, TxnConfig::default());
    let mut config = Config::default();
    config.sm.sweep_interval_s = 1;
    let snapshots = Snapshots::new();
    let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sm = tokio::spawn(run(transport, unsolicited, config, options, async {
        let _ = stopped.await;
    }));

    let mut first = None;
    for _ in 0..400 {
        if let Some(s) = snapshots.latest().filter(|s| s.sweep.subnet_up()) {
            first = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let first = first.expect("a snapshot of an up subnet within 10 s");
    assert_eq!(first.sweep.subnet.nodes.len(), topo.nodes.len());
    {
        let f = fabric.lock().unwrap();
        assert_eq!(first.master_lid, f.lid_of(PortRef { node: host, port: 1 }).unwrap());
        // Every switch's table as published is what the switch holds.
        for (i, node) in topo.nodes.iter().enumerate().filter(|(_, n)| n.kind == NodeKind::Switch) {
            let table = &first.sweep.routes.lfts[&node.node_guid];
            for lid in 1..=first.sweep.lids.max_lid.0 {
                let held = f.lft_port(NodeIdx(i), ibsm::types::Lid(lid));
                assert_eq!(held, Some(table[lid as usize]), "{} LID {lid}", node.name);
            }
        }
        // Every LID-bearing port's LID is the one published.
        for (guid, range) in &first.sweep.lids.ranges {
            let port = f.port_by_lid(range.base()).unwrap_or_else(|| panic!("no port holds {guid}'s LID"));
            assert_eq!(f.port_info(port).unwrap().port_state, PortState::Active);
        }
    }

    // A bounced cable makes a new heavy sweep; the reader's snapshot stays as it was.
    let victim = PortRef { node: topo.hosts().nth(5).unwrap(), port: 1 };
    fabric.lock().unwrap().link_down(victim).unwrap();
    fabric.lock().unwrap().link_up(victim).unwrap();
    let mut newer = None;
    for _ in 0..400 {
        if let Some(s) = snapshots.latest().filter(|s| s.sequence > first.sequence && s.sweep.subnet_up()) {
            newer = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let newer = newer.expect("a newer snapshot after the bounce");
    assert!(newer.taken_at >= first.taken_at);
    assert_eq!(first.sweep.subnet.nodes.len(), topo.nodes.len(), "the old snapshot is unchanged");
    stop.send(()).unwrap();
    sm.await.unwrap().expect("clean stop");
}
