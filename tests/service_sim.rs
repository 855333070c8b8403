//! The SM as a service on the in-process fabric: periodic light sweeps cost
//! one SwitchInfo per switch and change nothing; a cable that bounces is
//! noticed by the next light sweep and its ports are brought back to ACTIVE.
//!
//! Real time, not paused tokio time: the transport's I/O thread answers on
//! its own clock, and paused time would race ahead of it whenever the
//! runtime idles. The interval is the shortest the config allows (1 s) and
//! no assertion depends on how long anything took.

use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::{AttributeId, Method, PortState};
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice};
use ibsm::topology::{PortRef, Topology};
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;

fn all_hosts_active(topo: &Topology, fabric: &SharedFabric) -> bool {
    let f = fabric.lock().unwrap();
    topo.hosts().all(|h| f.port_state(PortRef { node: h, port: 1 }).ok() == Some(PortState::Active))
}

async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..600 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("waited 30 s for {what}");
}

#[tokio::test(flavor = "current_thread")]
async fn light_sweeps_notice_a_bounced_link() {
    let topo = Topology::from_spec_or_file("fattree2:radix=8,leaves=4,spines=2,hosts=4").unwrap();
    let fabric = FabricBuilder::new(&topo).seed(3).build_shared().unwrap();
    let sm_host = topo.hosts().next().unwrap();
    let dev = SimDevice::attach(&fabric, sm_host, 1).unwrap();
    dev.set_is_sm(true);
    let (transport, unsolicited) = MadTransport::spawn(
        dev,
        TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() },
    );
    let mut config = Config::default();
    config.sm.sweep_interval_s = 1;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let options = RunOptions { persist_lids: false, ..RunOptions::default() };
    let service = tokio::spawn(run(transport, unsolicited, config, options, async {
        let _ = stop_rx.await;
    }));

    wait_until("bring-up", || all_hosts_active(&topo, &fabric)).await;
    let count = |a, m| fabric.lock().unwrap().smp_count(a, m);
    let node_info_after_bringup = count(AttributeId::NodeInfo, Method::Get);

    // A few quiet intervals: light sweeps only (SwitchInfo Gets), no rediscovery.
    let switch_info_before = count(AttributeId::SwitchInfo, Method::Get);
    let switches = topo.switches().count() as u64;
    wait_until("two light sweeps", || count(AttributeId::SwitchInfo, Method::Get) - switch_info_before >= 2 * switches)
        .await;
    // At most one follow-up heavy sweep (our own ACTIVE transitions may
    // raise PortStateChange once), never one per interval.
    let extra_node_info = count(AttributeId::NodeInfo, Method::Get) - node_info_after_bringup;
    let links = topo.links.len() as u64 + 1;
    assert!(extra_node_info <= links, "quiet fabric was rediscovered: {extra_node_info} NodeInfo Gets");

    // A host cable bounces: the switch raises PortStateChange, the next
    // light sweep sees it, the heavy sweep brings the port back.
    let victim = PortRef { node: topo.hosts().nth(7).unwrap(), port: 1 };
    fabric.lock().unwrap().link_down(victim).unwrap();
    fabric.lock().unwrap().link_up(victim).unwrap();
    assert_eq!(fabric.lock().unwrap().port_state(victim).unwrap(), PortState::Init);
    wait_until("the bounced port back to ACTIVE", || {
        fabric.lock().unwrap().port_state(victim).ok() == Some(PortState::Active)
    })
    .await;

    stop_tx.send(()).unwrap();
    let report = service.await.unwrap().expect("service ends cleanly");
    assert!(report.subnet_up());
}
