//! The performance manager end to end on the in-process fabric, in
//! virtual time: a whole SM brings the fat tree up and publishes its
//! snapshot; the manager (run from another host's port, over the virtual
//! transport) polls every cabled port's PMA. After a cycle the exported
//! counters are what the simulated PMAs held when they answered; a
//! counter set as ibsim's `PerformanceSet` would shows up as that rise; a
//! node whose PMA is silent is skipped and counted; a burst of errors is
//! a warning naming the port; a PMA without extended counters gets its
//! 32-bit data counters cleared before they saturate, and nothing is lost.

mod sm_support;

use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::MgmtClass;
use ibsm::perfmgr::core::PerfSnapshot;
use ibsm::perfmgr::{targets, Counter, PerfCore, PerfMgrConfig, PerfShared};
use ibsm::runtime::metrics::perfmgr::{self as collector, PerfCollector};
use ibsm::runtime::perfmgr as driver;
use ibsm::runtime::RunOptions;
use ibsm::sim::{Match, Rule};
use ibsm::subnet::snapshot::Snapshots;
use ibsm::topology::{NodeKind, PortRef};
use ibsm::types::Guid;
use sm_support::{wait_every, Logs, Net};

/// The SM's own performance manager is turned off so the counters see
/// one manager only (this test runs its own, to look inside it).
fn sm_config() -> Config {
    let mut c = Config::default();
    c.perfmgr.enabled = false;
    c
}

fn totals(snap: &PerfSnapshot, guid: Guid, port: u8) -> ibsm::perfmgr::counters::PerCounter<Option<u64>> {
    snap.ports
        .iter()
        .find(|p| p.node_guid == guid && p.port == port)
        .unwrap_or_else(|| panic!("{guid} port {port} exported"))
        .totals
}

async fn cycles(shared: &PerfShared, n: u64) {
    wait_every(Duration::from_millis(100), "a polling cycle", Duration::from_secs(120), async || {
        shared.latest().stats.cycles >= n
    })
    .await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn counters_are_polled_exported_and_accounted_as_the_pmas_hold_them() {
    let (logs, _guard) = Logs::capture();
    let net = Net::new(11);
    let snapshots = Snapshots::new();
    let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
    let _sm = net.start_sm_with(0, sm_config(), options);
    wait_every(Duration::from_millis(50), "bring-up", Duration::from_secs(30), async || {
        net.lids_if_up().is_some() && snapshots.latest().is_some_and(|s| s.sweep.subnet_up())
    })
    .await;

    // One leaf's PMA has no extended counters, as an old switch (or ibsim).
    let leaf = net
        .topo
        .switches()
        .find(|&s| net.topo.node(s).name.contains("leaf"))
        .unwrap_or_else(|| net.topo.switches().next().unwrap());
    let leaf_guid = net.topo.node(leaf).node_guid;
    let leaf_host_port = net.topo.links.iter().find_map(|l| {
        let (a, b) = (l.a, l.b);
        if a.node == leaf && net.topo.node(b.node).kind != NodeKind::Switch {
            Some(a.port)
        } else if b.node == leaf && net.topo.node(a.node).kind != NodeKind::Switch {
            Some(b.port)
        } else {
            None
        }
    });
    let leaf_port = leaf_host_port.expect("a leaf with a host");
    net.fabric.lock().unwrap().set_pma_capability(leaf, 0);

    let expected_ports = 2 * net.topo.links.len();
    let found = targets::from_snapshot(&snapshots.latest().unwrap());
    assert_eq!(found.len(), expected_ports, "every cabled port, both ends");
    for t in &found {
        let node = net.topo.nodes.iter().find(|n| n.node_guid == t.node_guid).unwrap();
        assert_eq!(t.is_switch, node.kind == NodeKind::Switch);
        assert_eq!(&*t.node_desc, node.description.as_str());
    }

    let cfg = PerfMgrConfig { interval_s: 10, error_threshold: 100, ..PerfMgrConfig::default() };
    let shared = PerfShared::new();
    // As the runtime registers them, and the old collector beside, whose
    // encoding the section's must match.
    let metrics = ibsm::runtime::metrics::Metrics::new();
    // Every port's series, as the reference collector writes them all.
    let all = PerfMgrConfig { port_series: ibsm::config::perfmgr::PortSeries::All, ..PerfMgrConfig::default() };
    collector::register(&metrics, &shared, tokio::sync::watch::channel(all).1);
    let registry = prometheus::Registry::new_custom(Some("ibsm".into()), None).unwrap();
    registry.register(Box::new(PerfCollector::new(shared.clone()))).unwrap();
    let (transport, _unsolicited) = net.transport(5);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mgr = {
        let shared = shared.clone();
        let snapshots = snapshots.clone();
        tokio::spawn(async move {
            let mut core = PerfCore::new(cfg, shared);
            driver::run(&transport, &mut core, targets::from_snapshots(snapshots), async {
                let _ = stopped.await;
            })
            .await;
            core
        })
    };

    // Cycle 1: everything exported is what the PMAs held when they answered.
    cycles(&shared, 1).await;
    let s1 = shared.latest();
    assert_eq!(s1.ports.len(), expected_ports);
    assert_eq!((s1.stats.last_cycle_polled, s1.stats.last_cycle_skipped), (expected_ports, 0));
    {
        let f = net.fabric.lock().unwrap();
        for p in &s1.ports {
            let node = net.topo.nodes.iter().position(|n| n.node_guid == p.node_guid).unwrap();
            let (pc, ext) = f.port_counters(PortRef { node: ibsm::topology::NodeIdx(node), port: p.port }).unwrap();
            assert_eq!(p.totals[Counter::SymbolErrors.index()], Some(0));
            assert_eq!(p.totals[Counter::RcvErrors.index()], Some(0));
            let pkts = p.totals[Counter::XmitPkts.index()].unwrap();
            let now = if node == leaf.0 { u64::from(pc.port_xmit_pkts) } else { ext.port_xmit_pkts };
            assert!(pkts > 0 && pkts <= now, "{} port {}: exported {pkts}, the PMA holds {now}", p.node_guid, p.port);
            let data = p.totals[Counter::RcvData.index()].unwrap();
            let held = if node == leaf.0 { u64::from(pc.port_rcv_data) } else { ext.port_rcv_data };
            assert!(data > 0 && data <= held);
            assert_eq!(
                p.totals[Counter::UnicastXmitPkts.index()].is_some(),
                node != leaf.0,
                "extended only where offered"
            );
            assert_eq!(
                p.totals[Counter::XmitWait.index()].is_some(),
                node != leaf.0,
                "PortXmitWait only where ClassPortInfo has bit 12"
            );
        }
    }
    let text = metrics.render();
    {
        let mut buf = Vec::new();
        prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut buf).unwrap();
        let old = String::from_utf8(buf).unwrap();
        let ours = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| {
                    let name = l.strip_prefix("# HELP ").or_else(|| l.strip_prefix("# TYPE ")).unwrap_or(l);
                    name.starts_with("ibsm_perfmgr_") || name.starts_with("ibsm_port_")
                })
                .map(str::to_string)
                .collect()
        };
        assert_eq!(ours(&text), ours(&old), "the section writes what the collector encoded");
        let om = metrics.render_openmetrics();
        let old_om = ibsm::runtime::metrics::openmetrics::encode(&registry.gather());
        assert_eq!(ours(&om), ours(&old_om), "in OpenMetrics too");
    }
    let line = format!("ibsm_port_symbol_errors_total{{node_guid=\"{leaf_guid}\",node_desc=");
    assert!(text.contains(&line), "{line} in\n{text}");
    let wait = format!("ibsm_port_xmit_wait_total{{node_guid=\"{leaf_guid}\"");
    assert!(!text.contains(&wait), "not on the leaf without bit 12");
    assert!(text.contains("ibsm_port_xmit_wait_total{"), "but elsewhere");
    assert!(text.contains(&format!("ibsm_perfmgr_ports{{outcome=\"polled\"}} {expected_ports}")));

    // A PerformanceSet on a host port, a burst of receive errors on the
    // leaf, a leaf data counter near saturation, and one silent host.
    let host = net.host(9);
    let host_guid = net.topo.node(host).node_guid;
    let silent = net.host(12);
    let silent_guid = net.topo.node(silent).node_guid;
    let before_silent = totals(&s1, silent_guid, 1);
    let leaf_data_before = totals(&s1, leaf_guid, leaf_port)[Counter::XmitData.index()].unwrap();
    {
        let mut f = net.fabric.lock().unwrap();
        f.performance_set(PortRef { node: host, port: 1 }, "SymbolErrorCounter", 5).unwrap();
        f.performance_set(PortRef { node: leaf, port: leaf_port }, "PortRcvErrors", 500).unwrap();
        f.performance_set(PortRef { node: leaf, port: leaf_port }, "PortXmitData", 3_000_000_000).unwrap();
        f.add_rule(Rule::drop_all(Match::any().node(silent).class(MgmtClass::Perf)));
    }
    cycles(&shared, 2).await;
    let s2 = shared.latest();
    assert_eq!(totals(&s2, host_guid, 1)[Counter::SymbolErrors.index()], Some(5), "the set value is the rise");
    assert_eq!(totals(&s2, leaf_guid, leaf_port)[Counter::RcvErrors.index()], Some(500));
    assert_eq!(s2.stats.last_cycle_skipped, 1, "the silent host's port");
    assert_eq!(s2.stats.ports_skipped_total, 1);
    assert!(s2.stats.unanswered.iter().flatten().sum::<u64>() >= 1);
    assert_eq!(totals(&s2, silent_guid, 1), before_silent, "a skipped port keeps its totals");
    assert!(s2.stats.error_jumps >= 1);
    let log = logs.text();
    let warn = log.lines().find(|l| l.contains("error rate jump")).expect("a warning");
    assert!(warn.contains("WARN") && warn.contains(&leaf_guid.to_string()), "{warn}");
    assert!(warn.contains(&format!("port {leaf_port}")) && warn.contains("PortRcvErrors"), "{warn}");
    // The leaf's 32-bit counters past half were cleared (data, errors are
    // under half of 65535 so left), and the total kept counting.
    let leaf_data = totals(&s2, leaf_guid, leaf_port)[Counter::XmitData.index()].unwrap();
    assert!(leaf_data >= 3_000_000_000 && leaf_data > leaf_data_before, "{leaf_data}");
    assert!(s2.stats.clears >= 1);
    let (pc, _) = net.fabric.lock().unwrap().port_counters(PortRef { node: leaf, port: leaf_port }).unwrap();
    assert!(pc.port_xmit_data < 1_000_000, "cleared: {}", pc.port_xmit_data);
    assert_eq!(pc.port_rcv_errors, 500, "under half its range: not cleared");

    // Cycle 3: counting goes on from the clear; nothing went backwards.
    cycles(&shared, 3).await;
    let s3 = shared.latest();
    let after = totals(&s3, leaf_guid, leaf_port)[Counter::XmitData.index()].unwrap();
    let (pc, _) = net.fabric.lock().unwrap().port_counters(PortRef { node: leaf, port: leaf_port }).unwrap();
    assert!(after > leaf_data && after - leaf_data <= u64::from(pc.port_xmit_data), "{leaf_data} -> {after}");
    assert_eq!(s3.stats.backwards, 0);
    assert_eq!(s3.stats.ports_skipped_total, 2, "still silent, skipped again");
    stop.send(()).unwrap();
    let core = mgr.await.unwrap();
    assert_eq!(core.stats().cycles, 3);
}

/// A port that misses a cycle (Down at a sweep, say) and comes back goes
/// on from its total: after ibsm cleared its 32-bit data counter, the
/// hardware holds far less than the exported total, and restarting there
/// would read as a counter reset to Prometheus, counted whole.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_port_away_for_a_cycle_continues_its_totals() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let net = Net::new(12);
    let snapshots = Snapshots::new();
    let options = RunOptions { persist_lids: false, snapshots: snapshots.clone(), ..RunOptions::default() };
    let _sm = net.start_sm_with(0, sm_config(), options);
    wait_every(Duration::from_millis(50), "bring-up", Duration::from_secs(30), async || {
        net.lids_if_up().is_some() && snapshots.latest().is_some_and(|s| s.sweep.subnet_up())
    })
    .await;
    // An old host: 32-bit counters only, its data counter past half.
    let host = net.host(9);
    let guid = net.topo.node(host).node_guid;
    {
        let mut f = net.fabric.lock().unwrap();
        f.set_pma_capability(host, 0);
        f.performance_set(PortRef { node: host, port: 1 }, "PortXmitData", 3_000_000_000).unwrap();
    }
    let away = Arc::new(AtomicBool::new(false));
    let targets = {
        let mut all = targets::from_snapshots(snapshots.clone());
        let away = away.clone();
        move || {
            let mut t = all();
            if away.load(Ordering::SeqCst) {
                t.retain(|p| p.node_guid != guid);
            }
            t
        }
    };
    let cfg = PerfMgrConfig { interval_s: 10, ..PerfMgrConfig::default() };
    let shared = PerfShared::new();
    let (transport, _unsolicited) = net.transport(5);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mgr = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut core = PerfCore::new(cfg, shared);
            driver::run(&transport, &mut core, targets, async {
                let _ = stopped.await;
            })
            .await;
        })
    };

    cycles(&shared, 1).await;
    let before = totals(&shared.latest(), guid, 1);
    assert!(before[Counter::XmitData.index()].unwrap() >= 3_000_000_000);
    let (pc, _) = net.fabric.lock().unwrap().port_counters(PortRef { node: host, port: 1 }).unwrap();
    assert!(pc.port_xmit_data < 1_000_000, "cleared by ibsm: {}", pc.port_xmit_data);

    away.store(true, Ordering::SeqCst);
    cycles(&shared, 2).await;
    assert!(shared.latest().ports.iter().all(|p| p.node_guid != guid), "away: not exported");
    net.fabric.lock().unwrap().performance_set(PortRef { node: host, port: 1 }, "SymbolErrorCounter", 7).unwrap();
    away.store(false, Ordering::SeqCst);
    cycles(&shared, 3).await;
    let s3 = shared.latest();
    let after = totals(&s3, guid, 1);
    for c in Counter::ALL {
        if let Some(b) = before[c.index()] {
            let a = after[c.index()].unwrap_or_else(|| panic!("{c:?} exported again"));
            assert!(a >= b, "{c:?} went back from {b} to {a}: a reset to Prometheus");
        }
    }
    assert_eq!(after[Counter::SymbolErrors.index()], Some(7), "what it counted while away");
    assert_eq!(s3.stats.backwards, 0);
    stop.send(()).unwrap();
    mgr.await.unwrap();
}
