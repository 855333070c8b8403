//! `promtool check metrics` on a populated exposition: a sweep of the
//! in-process fabric, its MAD counts, SA figures, the election, traps, a
//! registered collector and a cycle of the performance manager. promtool must be installed (Debian: `prometheus`);
//! a missing promtool fails the test rather than skipping it.
//!
//! promtool reads only the Prometheus text format (fed OpenMetrics it
//! misreads the `_total` samples), so the OpenMetrics rendering is checked
//! with Python's prometheus_client parser (Debian's, installed by
//! scripts/test.sh), and by
//! the encoder's own tests in `src/runtime/metrics/openmetrics.rs`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use ibsm::config::SmConfig;
use ibsm::election::{State, TransitionCause};
use ibsm::perfmgr::{targets, PerfCore, PerfMgrConfig, PerfShared};
use ibsm::program::SubnetManager;
use ibsm::runtime::metrics::perfmgr as collector;
use ibsm::runtime::metrics::{Handover, Metrics, SweepFailure};
use ibsm::runtime::perfmgr as driver;
use ibsm::sim::{FabricBuilder, SimDevice};
use ibsm::topology::Topology;
use ibsm::transport::io_thread::MadTransport;
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::Transport;
use ibsm::{Guid, Lid};

fn populated() -> Metrics {
    let topo = Topology::from_spec_or_file("fattree2:radix=8,leaves=4,spines=2,hosts=4").unwrap();
    let fabric = FabricBuilder::new(&topo).seed(5).build_shared().unwrap();
    let dev = SimDevice::attach(&fabric, topo.hosts().next().unwrap(), 1).unwrap();
    dev.set_is_sm(true);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let shared = PerfShared::new();
    let (report, stats) = rt.block_on(async {
        let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
        let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
        let mut sm = SubnetManager::new(transport.clone(), SmConfig::default(), false);
        let report = sm.sweep().await.unwrap();
        // One cycle of the performance manager over the swept fabric.
        let ports = targets::from_subnet(&report.subnet, |g| report.lids.ranges.get(&g).map(|r| r.base()));
        assert!(!ports.is_empty());
        let mut core = PerfCore::new(PerfMgrConfig::default(), shared.clone());
        let done = async {
            while shared.latest().stats.cycles == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        driver::run(&transport, &mut core, move || ports.clone(), done).await;
        (report, transport.stats())
    });
    assert!(report.subnet_up());
    let m = Metrics::new();
    // Every port's series: promtool and the parser see each kind of family.
    let all = PerfMgrConfig { port_series: ibsm::config::perfmgr::PortSeries::All, ..PerfMgrConfig::default() };
    collector::register(&m, &shared, tokio::sync::watch::channel(all).1);
    m.heavy_sweep(&report);
    m.transport(&stats);
    m.light_sweep_timed(Duration::from_millis(2));
    m.routing("minhop", Duration::from_millis(1));
    m.sweep_failed(SweepFailure::Programming);
    m.election(7, Some((Guid(0x0002_c903_0000_0001), Lid(1))));
    m.state_change(State::Discovering, State::Master, &TransitionCause::Won);
    m.handover(Handover::Out);
    m.failover();
    m.trap(None);
    m.refused(0x03);
    m.sm_state(3);
    let mut sa = ibsm::sa::SaStats::default();
    sa.by_query.insert((0x0035, 0x01), ibsm::sa::stats::QueryCounts { requests: 3, ok: 2, errors: 1, records: 2 });
    sa.by_status.insert(0x0300, 1);
    sa.mcast.groups = 2;
    m.sa(&sa);
    // A collector from elsewhere; a label value that needs escaping.
    let per_port = prometheus::IntCounterVec::new(
        prometheus::Opts::new("other_port_errors_total", "Errors by port, from elsewhere"),
        &["node_desc", "port"],
    )
    .unwrap();
    per_port.with_label_values(&["sw \"leaf\" 1\\a", "3"]).inc_by(4);
    m.register(Box::new(per_port));
    m
}

#[test]
fn promtool_finds_nothing_to_say() {
    let text = populated().render();
    assert!(text.contains("ibsm_mads_sent_total{"), "populated: {text}");
    assert!(text.contains("ibsm_port_xmit_data_bytes_total{node_guid=\""), "the perfmgr's section: {text}");
    assert!(text.contains("ibsm_perfmgr_cycles_total 1\n"), "{text}");
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!("promtool is needed (apt-get install --no-install-recommends prometheus): {e}"),
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics says:\n{said}\non:\n{text}");
}

#[test]
fn openmetrics_parses_with_prometheus_client() {
    let text = populated().render_openmetrics();
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("# TYPE ibsm_port_xmit_data_bytes counter\n"), "{text}");
    // Debian's python3 and its python3-prometheus-client, which
    // scripts/test.sh installs: a missing parser fails the test.
    let probe = Command::new("/usr/bin/python3").args(["-c", "import prometheus_client.openmetrics.parser"]).output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "/usr/bin/python3 cannot import prometheus_client (Debian's python3-prometheus-client; scripts/test.sh installs it)"
    );
    // The parser is strict: it raises on anything the spec forbids
    // (interleaved families, bad suffixes, a missing EOF, bad escapes,
    // non-canonical le values are tolerated as the spec says parsers must).
    let script = "import sys\n\
from prometheus_client.openmetrics.parser import text_string_to_metric_families as p\n\
fams = list(p(sys.stdin.read()))\n\
print(len(fams), sum(len(f.samples) for f in fams))\n";
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "prometheus_client rejects it: {}\n{text}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    let families: usize = said.split_whitespace().next().unwrap().parse().unwrap();
    let declared = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(families, declared, "every family parsed: {said}");
}
