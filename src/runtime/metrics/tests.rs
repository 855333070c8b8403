//! Every family, fed from a real sweep of the in-process fabric where a
//! sweep is what feeds it.

use std::sync::OnceLock;
use std::time::Duration;

use super::*;
use crate::config::SmConfig;
use crate::election::{Peer, PeerAddr};
use crate::exchange::txn::{MadCounters, MadKey, TxnConfig};
use crate::mad::{SmInfoRepr, SmState};
use crate::program::SubnetManager;
use crate::runtime::status;
use crate::sim::{FabricBuilder, SimDevice};
use crate::topology::Topology;
use crate::transport::io_thread::MadTransport;
use crate::transport::Transport;

const SPEC: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

struct Swept {
    topo: Topology,
    report: SweepReport,
    stats: TransportStats,
}

/// One sweep of a small fat tree by an SM on the first host, shared by
/// the tests.
fn swept() -> &'static Swept {
    static SWEPT: OnceLock<Swept> = OnceLock::new();
    SWEPT.get_or_init(|| {
        let topo = Topology::from_spec_or_file(SPEC).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(11).build_shared().unwrap();
        let host = topo.hosts().next().unwrap();
        let dev = SimDevice::attach(&fabric, host, 1).unwrap();
        dev.set_is_sm(true);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let txn = TxnConfig { window: 16, timeout: Duration::from_millis(200), retries: 3, ..TxnConfig::default() };
            let (transport, _unsolicited) = MadTransport::spawn(dev, txn);
            let mut sm = SubnetManager::new(transport.clone(), SmConfig::default(), false);
            let report = sm.sweep().await.unwrap();
            assert!(report.subnet_up(), "the fixture fabric comes up");
            Swept { topo, report, stats: transport.stats() }
        })
    })
}

/// The value of the sample `series` (name and labels as written) in the
/// text format.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn type_of(text: &str, family: &str) -> Option<String> {
    text.lines().find_map(|l| Some(l.strip_prefix(&format!("# TYPE {family} "))?.to_string()))
}

#[test]
fn a_heavy_sweep_sets_the_fabric_gauges() {
    let s = swept();
    let m = Metrics::new();
    m.heavy_sweep(&s.report);
    let text = m.render();
    let switches = s.topo.switches().count() as f64;
    let hosts = s.topo.hosts().count() as f64;
    assert_eq!(value(&text, "ibsm_nodes{kind=\"switch\"}"), Some(switches), "{text}");
    assert_eq!(value(&text, "ibsm_nodes{kind=\"ca\"}"), Some(hosts));
    assert_eq!(value(&text, "ibsm_nodes_quarantined"), Some(0.0));
    assert_eq!(value(&text, "ibsm_subnet_up"), Some(1.0));
    // Every cable of the topology is one ACTIVE link.
    assert_eq!(value(&text, "ibsm_links{state=\"active\"}"), Some(s.topo.links.len() as f64), "{text}");
    assert!(!text.contains("ibsm_links{state=\"down\"}"), "{text}");
    // Ports: the hosts' cabled ports are ACTIVE; switch ports are ACTIVE
    // where cabled and DOWN elsewhere.
    let switch_ports: u32 = s.topo.switches().map(|n| u32::from(s.topo.node(n).num_ports)).sum();
    let switch_cabled =
        s.topo.links.iter().flat_map(|l| [l.a, l.b]).filter(|p| s.topo.switches().any(|n| n == p.node)).count();
    assert_eq!(value(&text, "ibsm_ports{kind=\"switch\",state=\"active\"}"), Some(switch_cabled as f64), "{text}");
    let down = value(&text, "ibsm_ports{kind=\"switch\",state=\"down\"}").unwrap_or(0.0);
    assert_eq!(down, f64::from(switch_ports) - switch_cabled as f64, "{text}");
    let host_cabled = s.topo.links.len() * 2 - switch_cabled;
    assert_eq!(value(&text, "ibsm_ports{kind=\"ca\",state=\"active\"}"), Some(host_cabled as f64), "{text}");
    // One LID per switch and per CA port (LMC 0).
    assert_eq!(value(&text, "ibsm_lids_in_use"), Some(switches + host_cabled as f64), "{text}");
    assert_eq!(value(&text, "ibsm_max_lid"), Some(f64::from(s.report.lids.max_lid.0)));
    assert_eq!(value(&text, "ibsm_ports_inactive"), Some(0.0));
    assert_eq!(value(&text, "ibsm_sweep_problems"), Some(0.0));
    // Counted and timed.
    assert_eq!(value(&text, "ibsm_sweeps_total{kind=\"heavy\"}"), Some(1.0));
    assert_eq!(value(&text, "ibsm_sweep_duration_seconds_count{kind=\"heavy\"}"), Some(1.0));
    let sum = value(&text, "ibsm_sweep_duration_seconds_sum{kind=\"heavy\"}").unwrap();
    assert!((sum - s.report.elapsed.as_secs_f64()).abs() < 1e-9, "{sum}");
    assert_eq!(value(&text, "ibsm_mcast_passes_total{kind=\"sweep\"}"), Some(1.0));
    assert_eq!(type_of(&text, "ibsm_sweep_duration_seconds").as_deref(), Some("histogram"));
    assert_eq!(type_of(&text, "ibsm_sweeps_total").as_deref(), Some("counter"));
}

#[test]
fn links_take_the_state_of_their_lower_end_and_gauges_follow_the_last_sweep() {
    let s = swept();
    let mut report = s.report.clone();
    // One host's port reads INIT: its link is INIT, the switch end stays ACTIVE.
    let host = report.subnet.ids().find(|&id| !report.subnet.node(id).is_switch()).unwrap();
    let port = report
        .subnet
        .node(host)
        .external_ports()
        .find(|&p| report.subnet.node(host).ports[p as usize].remote.is_some())
        .unwrap();
    report.subnet.node_mut(host).ports[port as usize].info.as_mut().unwrap().port_state = crate::mad::PortState::Init;
    let m = Metrics::new();
    m.heavy_sweep(&s.report);
    m.heavy_sweep(&report);
    let text = m.render();
    assert_eq!(value(&text, "ibsm_links{state=\"init\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "ibsm_links{state=\"active\"}"), Some(s.topo.links.len() as f64 - 1.0));
    assert_eq!(value(&text, "ibsm_ports{kind=\"ca\",state=\"init\"}"), Some(1.0));
    assert_eq!(value(&text, "ibsm_sweeps_total{kind=\"heavy\"}"), Some(2.0));
    // Back to all ACTIVE: the INIT series is gone, not left at 1.
    m.heavy_sweep(&s.report);
    let text = m.render();
    assert_eq!(value(&text, "ibsm_links{state=\"init\"}"), None, "{text}");
}

#[test]
fn mad_counts_of_a_real_sweep_are_counters_read_at_scrape_time() {
    let s = swept();
    let m = Metrics::new();
    // Nothing stored yet: the families are declared but have no series.
    assert!(!m.render().contains("ibsm_mads_sent_total"));
    m.transport(&s.stats);
    let text = m.render();
    assert_eq!(type_of(&text, "ibsm_mads_sent_total").as_deref(), Some("counter"), "{text}");
    assert_eq!(type_of(&text, "ibsm_mads_in_flight").as_deref(), Some("gauge"));
    let key = MadKey { class: 0x81, attribute: 0x0011, method: 0x01 };
    let sent = s.stats.txn.by_mad[&key].sent;
    assert!(sent > 0, "the sweep read NodeInfo");
    let series = "ibsm_mads_sent_total{attribute=\"NodeInfo\",class=\"SubnMgmtDirected\",method=\"Get\"}";
    assert_eq!(value(&text, series), Some(sent as f64), "{text}");
    let responses = "ibsm_mad_responses_total{attribute=\"NodeInfo\",class=\"SubnMgmtDirected\",method=\"Get\"}";
    assert_eq!(value(&text, responses), Some(s.stats.txn.by_mad[&key].responses as f64));
    // Newer figures replace the older ones as they stand (no deltas).
    let mut later = s.stats.clone();
    later.txn.by_mad.get_mut(&key).unwrap().sent += 5;
    later.txn.in_flight = 3;
    m.transport(&later);
    let text = m.render();
    assert_eq!(value(&text, series), Some((sent + 5) as f64));
    assert_eq!(value(&text, "ibsm_mads_in_flight"), Some(3.0));
}

#[test]
fn unknown_codes_fold_into_one_series() {
    let m = Metrics::new();
    let mut t = TransportStats::default();
    let c = MadCounters { sent: 2, timeouts: 1, retries: 1, ..MadCounters::default() };
    t.txn.by_mad.insert(MadKey { class: 0x81, attribute: 0xFF01, method: 0x01 }, c);
    t.txn.by_mad.insert(MadKey { class: 0x81, attribute: 0xFF02, method: 0x01 }, c);
    t.txn.by_mad.insert(MadKey { class: 0x42, attribute: 0x0011, method: 0x7E }, c);
    // PerfMgt's 0x0012 is PortCounters, not SwitchInfo.
    t.txn.by_mad.insert(MadKey { class: 0x04, attribute: 0x0012, method: 0x01 }, c);
    m.transport(&t);
    let text = m.render();
    assert_eq!(
        value(&text, "ibsm_mads_sent_total{attribute=\"other\",class=\"SubnMgmtDirected\",method=\"Get\"}"),
        Some(4.0),
        "{text}"
    );
    assert_eq!(
        value(&text, "ibsm_mad_timeouts_total{attribute=\"other\",class=\"other\",method=\"other\"}"),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "ibsm_mad_retries_total{attribute=\"PortCounters\",class=\"Perf\",method=\"Get\"}"),
        Some(1.0)
    );
    assert_eq!(text.lines().filter(|l| l.starts_with("ibsm_mads_sent_total{")).count(), 3, "{text}");
}

#[test]
fn election_state_and_refusals_are_exported() {
    let m = Metrics::new();
    m.sm_state(2);
    m.refused(0x03);
    m.refused(0x03);
    m.refused(0x42);
    let text = m.render();
    assert!(text.contains("ibsm_sm_state 2"), "{text}");
    assert!(text.contains("ibsm_mads_refused_total{class=\"SubnAdm\"} 2"), "{text}");
    assert!(text.contains("ibsm_mads_refused_total{class=\"other\"} 1"), "{text}");
}

fn peer(guid: u64) -> Peer {
    let info = SmInfoRepr { guid: Guid(guid), sm_key: 0, act_count: 0, priority: 1, sm_state: SmState::Master };
    Peer { info, addr: PeerAddr { lid: Lid(1), path: None } }
}

#[test]
fn failovers_and_handovers_are_told_apart() {
    let m = Metrics::new();
    let count = |m: &Metrics, s: &str| value(&m.render(), s).unwrap();
    // Starting up and winning is neither.
    m.state_change(State::Discovering, State::Master, &TransitionCause::Won);
    assert_eq!(count(&m, "ibsm_failovers_total"), 0.0);
    assert_eq!(count(&m, "ibsm_sm_state"), 3.0);
    // Handing over to another SM: out.
    m.state_change(State::Master, State::Standby, &TransitionCause::HandedOver { to: peer(2) });
    assert_eq!(count(&m, "ibsm_handovers_total{direction=\"out\"}"), 1.0);
    assert_eq!(count(&m, "ibsm_sm_state"), 2.0);
    // The master stops answering; we rediscover and win: a failover.
    m.state_change(State::Standby, State::Discovering, &TransitionCause::MasterLost { master: peer(2), misses: 3 });
    assert_eq!(count(&m, "ibsm_failovers_total"), 0.0, "not yet master");
    m.state_change(State::Discovering, State::Master, &TransitionCause::Won);
    assert_eq!(count(&m, "ibsm_failovers_total"), 1.0);
    // Given the subnet by a HANDOVER: in, not a failover.
    m.state_change(State::Master, State::Standby, &TransitionCause::OutrankedBy { master: peer(3) });
    let handover = TransitionCause::Control { control: SmControl::Handover, from: Guid(3) };
    m.state_change(State::Standby, State::Master, &handover);
    assert_eq!(count(&m, "ibsm_handovers_total{direction=\"in\"}"), 1.0);
    assert_eq!(count(&m, "ibsm_failovers_total"), 1.0);
    // A lost master then a new one found: standby again, the loss is over.
    m.state_change(State::Master, State::Standby, &TransitionCause::OutrankedBy { master: peer(4) });
    m.state_change(State::Standby, State::Discovering, &TransitionCause::MasterLost { master: peer(4), misses: 3 });
    m.state_change(State::Discovering, State::Standby, &TransitionCause::MasterFound { master: peer(5) });
    m.state_change(
        State::Standby,
        State::Discovering,
        &TransitionCause::Control { control: SmControl::Discover, from: Guid(5) },
    );
    m.state_change(State::Discovering, State::Master, &TransitionCause::Won);
    assert_eq!(count(&m, "ibsm_failovers_total"), 1.0, "the lost master was replaced before we won");
}

#[test]
fn priority_and_master_follow_the_last_call() {
    let m = Metrics::new();
    m.election(5, Some((Guid(0x0002_c903_0000_0001), Lid(1))));
    m.election(5, Some((Guid(0x0002_c903_0000_0002), Lid(7))));
    let text = m.render();
    assert_eq!(value(&text, "ibsm_sm_priority"), Some(5.0));
    assert_eq!(value(&text, "ibsm_sm_master_info{guid=\"0x0002c90300000002\",lid=\"7\"}"), Some(1.0), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("ibsm_sm_master_info{")).count(), 1, "{text}");
    m.election(5, None);
    assert!(!m.render().contains("ibsm_sm_master_info{"));
}

#[test]
fn traps_are_counted_by_bounded_number() {
    let m = Metrics::new();
    let mut n = NoticeRepr::gid_trap(64, [0; 16], Lid(1), [0; 16]);
    m.trap(Some(&n));
    n.trap_number = 128;
    m.trap(Some(&n));
    m.trap(Some(&n));
    n.trap_number = 4242;
    m.trap(Some(&n));
    n.trap_number = 4243;
    m.trap(Some(&n));
    n.is_generic = false;
    m.trap(Some(&n));
    m.trap(None);
    let text = m.render();
    for (series, v) in [("64", 1.0), ("128", 2.0), ("other", 2.0), ("vendor", 1.0), ("unreadable", 1.0)] {
        assert_eq!(value(&text, &format!("ibsm_traps_total{{number=\"{series}\"}}")), Some(v), "{text}");
    }
}

#[test]
fn routing_light_sweeps_and_failures() {
    let m = Metrics::new();
    m.routing("ftree", Duration::from_millis(20));
    m.routing("minhop", Duration::from_millis(2));
    m.routing("made-up", Duration::from_millis(1));
    m.light_sweep_timed(Duration::from_millis(3));
    m.sweep_failed(SweepFailure::Programming);
    let text = m.render();
    assert_eq!(value(&text, "ibsm_routing_info{engine=\"other\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "ibsm_routing_info{engine=\"minhop\"}"), None, "only the last engine");
    assert_eq!(value(&text, "ibsm_routing_duration_seconds_count"), Some(3.0));
    assert_eq!(value(&text, "ibsm_routing_duration_seconds_bucket{le=\"0.01\"}"), Some(2.0));
    assert_eq!(value(&text, "ibsm_sweeps_total{kind=\"light\"}"), Some(1.0));
    assert_eq!(value(&text, "ibsm_sweep_duration_seconds_count{kind=\"light\"}"), Some(1.0));
    assert_eq!(value(&text, "ibsm_sweep_failures_total{stage=\"programming\"}"), Some(1.0));
    assert_eq!(value(&text, "ibsm_sweep_failures_total{stage=\"discovery\"}"), Some(0.0));
    m.routing("ftree", Duration::from_millis(1));
    assert_eq!(value(&m.render(), "ibsm_routing_info{engine=\"ftree\"}"), Some(1.0));
}

#[test]
fn sa_counts_are_exported_as_counters_and_gauges() {
    let m = Metrics::new();
    let mut s = crate::sa::SaStats::default();
    s.by_query.insert((0x0035, 0x01), crate::sa::stats::QueryCounts { requests: 5, ok: 4, errors: 1, records: 4 });
    let other = crate::sa::stats::QueryCounts { requests: 7, ok: 0, errors: 7, records: 0 };
    s.by_query.insert(crate::sa::SaStats::OTHER_QUERY, other);
    s.by_status.insert(0x0300, 6);
    s.drops.bad_sm_key = 3;
    s.services = 2;
    s.mirror.held_services = 5;
    m.sa(&s);
    let text = m.render();
    assert!(text.contains("ibsm_sa_queries_total{attribute=\"PathRecord\",method=\"Get\",result=\"ok\"} 4"), "{text}");
    assert!(text.contains("ibsm_sa_queries_total{attribute=\"other\",method=\"other\",result=\"error\"} 7"), "{text}");
    assert!(text.contains("ibsm_sa_error_answers_total{status=\"0x0300\"} 6"), "{text}");
    assert!(text.contains("ibsm_sa_events_total{kind=\"drop\",what=\"bad_sm_key\"} 3"), "{text}");
    assert!(text.contains("ibsm_sa_registered{kind=\"service\"} 2"), "{text}");
    assert!(text.contains("ibsm_sa_registered{kind=\"mirrored_service\"} 5"), "{text}");
    assert_eq!(type_of(&text, "ibsm_sa_events_total").as_deref(), Some("counter"));
    assert_eq!(type_of(&text, "ibsm_sa_registered").as_deref(), Some("gauge"));
}

#[test]
fn multicast_figures_are_exported() {
    let m = Metrics::new();
    let mut s = crate::sa::SaStats::default();
    s.mcast.joins = 7;
    s.mcast.leave_errors = 2;
    s.mcast.groups = 3;
    s.mcast.members = 11;
    s.drops.mcast_cap = 4;
    s.reports.mcast_created = 5;
    m.sa(&s);
    let pass = McastReport {
        groups: 3,
        mft_reads: 2,
        mft_sets: 9,
        failures: 1,
        problems: vec!["x".into()],
        retry: true,
        ..Default::default()
    };
    m.mcast_pass("membership", &pass);
    m.mcast_pass("membership", &McastReport { groups: 2, mft_sets: 1, ..McastReport::default() });
    let text = m.render();
    for line in [
        "ibsm_sa_events_total{kind=\"mcast\",what=\"join\"} 7",
        "ibsm_sa_events_total{kind=\"mcast\",what=\"leave_error\"} 2",
        "ibsm_sa_events_total{kind=\"drop\",what=\"mcast_cap\"} 4",
        "ibsm_sa_events_total{kind=\"report\",what=\"mcast_created\"} 5",
        "ibsm_mcast_groups 3",
        "ibsm_mcast_members 11",
        "ibsm_mcast_passes_total{kind=\"membership\"} 2",
        "ibsm_mcast_mads_total{what=\"mft_set\"} 10",
        "ibsm_mcast_mads_total{what=\"mft_read\"} 2",
        "ibsm_mcast_mads_total{what=\"failure\"} 1",
        "ibsm_mcast_trees 2",
        "ibsm_mcast_problems 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

/// A Metrics fed everything it can be fed.
fn populated() -> Metrics {
    let s = swept();
    let m = Metrics::new();
    m.heavy_sweep(&s.report);
    m.transport(&s.stats);
    m.light_sweep_timed(Duration::from_millis(4));
    m.routing("minhop", Duration::from_millis(3));
    m.election(3, Some((Guid(1), Lid(1))));
    m.state_change(State::Discovering, State::Master, &TransitionCause::Won);
    m.trap(None);
    m.refused(0x03);
    m.sweep_failed(SweepFailure::Discovery);
    let mut sa = crate::sa::SaStats::default();
    sa.by_query.insert((0x0035, 0x01), crate::sa::stats::QueryCounts { requests: 1, ok: 1, errors: 0, records: 1 });
    m.sa(&sa);
    m
}

/// The series names of a text exposition (before `{` or the value).
fn series_names(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

#[test]
fn family_names_cover_everything_a_render_emits_and_empty_families() {
    let m = Metrics::new();
    let names = m.family_names();
    // Families with no series yet are listed, histograms by their parts.
    for n in [
        "ibsm_traps_total",
        "ibsm_routing_duration_seconds_bucket",
        "ibsm_routing_duration_seconds_sum",
        "ibsm_routing_duration_seconds_count",
        "ibsm_sweep_duration_seconds_bucket",
        "ibsm_mads_sent_total",
        "ibsm_mad_timeouts_total",
        "ibsm_mads_in_flight",
        "ibsm_sa_queries_total",
        "ibsm_sm_master_info",
        "ibsm_failovers_total",
        "ibsm_handovers_total",
        "ibsm_links",
        "ibsm_ports",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
    }
    assert!(!names.iter().any(|x| x == "ibsm_routing_duration_seconds"), "a histogram is listed by its parts");
    let populated = populated();
    let listed: std::collections::BTreeSet<String> = populated.family_names().into_iter().collect();
    let emitted = series_names(&populated.render());
    assert!(emitted.len() > 40, "{emitted:?}");
    let missing: Vec<_> = emitted.difference(&listed).collect();
    assert!(missing.is_empty(), "emitted but not listed: {missing:?}");
}

#[test]
fn registered_collectors_are_gathered_and_listed() {
    let m = Metrics::new();
    let c = IntCounterVec::new(Opts::new("port_symbol_errors_total", "Symbol errors"), &["port"]).unwrap();
    let g = IntGaugeVec::new(Opts::new("port_up", "Up"), &["port"]).unwrap();
    let h = HistogramVec::new(HistogramOpts::new("poll_seconds", "Polls"), &["x"]).unwrap();
    m.register(Box::new(c.clone()));
    m.register(Box::new(g));
    m.register(Box::new(h.clone()));
    // A name taken is refused, not a panic.
    m.register(Box::new(IntGauge::new("subnet_up", "again").unwrap()));
    let names = m.family_names();
    for n in ["ibsm_port_symbol_errors_total", "ibsm_port_up", "ibsm_poll_seconds"] {
        assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
    }
    // Once it has a series, a histogram's type is known and its parts listed.
    h.with_label_values(&["a"]).observe(1.0);
    assert!(m.family_names().iter().any(|x| x == "ibsm_poll_seconds_bucket"));
    c.with_label_values(&["1"]).inc_by(3);
    assert_eq!(value(&m.render(), "ibsm_port_symbol_errors_total{port=\"1\"}"), Some(3.0));
    assert!(m.render_openmetrics().contains("\nibsm_port_symbol_errors_total{port=\"1\"} 3\n"));
}

#[test]
fn the_openmetrics_rendering_of_a_populated_registry() {
    let text = populated().render_openmetrics();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(text.contains("# TYPE ibsm_sweeps counter\n"), "{text}");
    assert!(text.contains("\nibsm_sweeps_total{kind=\"heavy\"} 1\n"), "{text}");
    assert!(text.contains("# TYPE ibsm_sm_master info\n"), "{text}");
    assert!(text.contains("\nibsm_sm_master_info{guid=\"0x0000000000000001\",lid=\"1\"} 1\n"), "{text}");
    assert!(text.contains("# TYPE ibsm_mads_sent counter\n"), "{text}");
    assert!(text.contains("ibsm_sweep_duration_seconds_bucket{kind=\"light\",le=\"0.005\"} 1\n"), "{text}");
    assert!(text.contains("ibsm_sweep_duration_seconds_bucket{kind=\"light\",le=\"1.0\"} 1\n"), "{text}");
    assert!(!text.contains("# TYPE ibsm_sweeps_total"), "{text}");
}

/// The README's metrics section names every family, and nothing else.
#[test]
fn the_readme_lists_every_family() {
    let readme = include_str!("../../../README.md");
    let start = readme.find("\n## Metrics").expect("a ## Metrics section in the README");
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut listed = std::collections::BTreeSet::new();
    for word in section.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if word.starts_with("ibsm_") {
            listed.insert(word.to_string());
        }
    }
    let m = Metrics::new();
    // The performance manager's families, registered as the runtime does.
    crate::runtime::metrics::perfmgr::register(
        &m,
        &crate::perfmgr::PerfShared::new(),
        tokio::sync::watch::channel(crate::perfmgr::PerfMgrConfig::default()).1,
    );
    let names = m.family_names();
    assert!(names.iter().any(|n| n == "ibsm_port_symbol_errors_total"), "{names:?}");
    let mut missing = Vec::new();
    for name in names {
        let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(&name);
        // Histograms are listed by family name, the rest by series name.
        if !listed.contains(&name) && !listed.contains(base) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "not in the README's metrics section: {missing:?}");
}

/// The fixture fabric with what the two surfaces count differently: a
/// quarantined switch (cables to it listed from one end only), one cable
/// end unread, one ActiveDefer, one state IBA does not define.
fn odd_fabric() -> SweepReport {
    use crate::mad::PortState;
    let mut report = swept().report.clone();
    let subnet = &mut report.subnet;
    let left_alone = subnet.switches().last().unwrap();
    subnet.node_mut(left_alone).quarantined = Some("test: left alone".into());
    let managed: Vec<_> = subnet
        .cabled_ports()
        .filter(|&(id, port, _, far)| subnet.node(far.0).quarantined.is_none() && (id, port) < far)
        .map(|(id, port, _, far)| (id, port, far))
        .collect();
    assert!(managed.len() >= 3, "the fixture has cables between managed nodes");
    let (id, port, _) = managed[0];
    subnet.node_mut(id).ports[port as usize].info = None;
    let (_, _, (far, far_port)) = managed[1];
    subnet.node_mut(far).ports[far_port as usize].info.as_mut().unwrap().port_state = PortState::ActiveDefer;
    let (id, port, _) = managed[2];
    subnet.node_mut(id).ports[port as usize].info.as_mut().unwrap().port_state = PortState::Unknown(9);
    report
}

/// `/status`'s fabric figures by its rules, walked over the subnet itself.
fn status_by_its_rules(subnet: &crate::subnet::Subnet) -> (u64, u64, u64, u64, u64, status::LinkCounts) {
    use crate::mad::PortState;
    let (mut switches, mut cas, mut ca_ports, mut quarantined) = (0, 0, 0, 0);
    for node in &subnet.nodes {
        if node.is_switch() {
            switches += 1;
        } else {
            cas += 1;
            ca_ports += node.ports.iter().skip(1).filter(|p| p.info.is_some()).count() as u64;
        }
        quarantined += u64::from(node.quarantined.is_some());
    }
    let rank = |s: Option<PortState>| match s? {
        PortState::Down => Some(0),
        PortState::Init => Some(1),
        PortState::Armed => Some(2),
        PortState::Active | PortState::ActiveDefer => Some(3),
        _ => None,
    };
    let mut links = status::LinkCounts::default();
    for (id, port, slot, (far_id, far_port)) in subnet.cabled_ports() {
        if subnet.node(far_id).quarantined.is_none() && (far_id, far_port) < (id, port) {
            continue;
        }
        let far = subnet.node(far_id).ports.get(far_port as usize).and_then(|p| p.info.as_ref());
        let ends = [rank(slot.info.as_ref().map(|i| i.port_state)), rank(far.map(|i| i.port_state))];
        match ends[0].zip(ends[1]).map(|(a, b)| a.min(b)) {
            Some(0) => links.down += 1,
            Some(1) => links.init += 1,
            Some(2) => links.armed += 1,
            Some(3) => links.active += 1,
            _ => links.unknown += 1,
        }
    }
    (subnet.nodes.len() as u64, switches, cas, ca_ports, quarantined, links)
}

/// The gauges' figures by their rules, walked over the subnet itself.
fn metrics_by_their_rules(subnet: &crate::subnet::Subnet) -> fabric::Counts {
    let rank = |s: &str| match s {
        "unread" | "other" => 0,
        "down" => 1,
        "init" => 2,
        "armed" => 3,
        _ => 4,
    };
    let state = |p: &crate::subnet::SubnetPort| fabric::state(p.info.as_ref().map(|i| i.port_state));
    let mut c = fabric::Counts::default();
    for node in &subnet.nodes {
        *c.nodes.entry(fabric::kind(node.info.node_type)).or_default() += 1;
        if node.quarantined.is_some() {
            c.quarantined += 1;
            continue;
        }
        for p in node.external_ports() {
            *c.ports.entry((fabric::kind(node.info.node_type), state(&node.ports[p as usize]))).or_default() += 1;
        }
    }
    for (id, port, slot, (far, far_port)) in subnet.cabled_ports() {
        if (id, port) > (far, far_port) || subnet.node(far).quarantined.is_some() {
            continue;
        }
        let Some(other) = subnet.node(far).ports.get(far_port as usize) else { continue };
        let (a, b) = (state(slot), state(other));
        *c.links.entry(if rank(a) <= rank(b) { a } else { b }).or_default() += 1;
    }
    c
}

#[test]
fn one_census_gives_status_and_metrics_their_own_figures_with_a_quarantined_node() {
    use crate::subnet::census::{Census, FarEnd};
    let report = odd_fabric();
    let census = Census::of(&report.subnet);
    assert_eq!(census.quarantined, 1);
    let to_quarantined: u64 =
        census.cables.iter().filter(|(k, _)| k.far_end == FarEnd::Quarantined).map(|(_, &n)| n).sum();
    assert!(to_quarantined > 0, "cables to the quarantined switch are in the census: {census:?}");

    // /status: every cable a managed node lists, the quarantined node's too.
    let f = status::fabric_counts_of(&report, &census);
    assert_eq!(f, status::fabric_counts(&report));
    let (nodes, switches, cas, ca_ports, quarantined, links) = status_by_its_rules(&report.subnet);
    assert_eq!((f.nodes, f.switches, f.cas, f.ca_ports, f.quarantined), (nodes, switches, cas, ca_ports, quarantined));
    assert_eq!(f.links, links);
    assert_eq!((links.unknown, links.active), (2, census.cables.values().sum::<u64>() - 2), "{links:?}");

    // The gauges: cables between managed nodes only.
    let counts = fabric::Counts::of(&census);
    assert_eq!(counts, metrics_by_their_rules(&report.subnet));
    let shown: i64 = counts.links.values().sum();
    assert_eq!(shown as u64 + to_quarantined, census.cables.values().sum::<u64>());
    assert_eq!((counts.links.get("unread"), counts.links.get("other")), (Some(&1), Some(&1)), "{counts:?}");

    // Both surfaces fed the census the owner takes answer as they do alone.
    let (by_census, alone) = (Metrics::new(), Metrics::new());
    by_census.heavy_sweep_counted(&report, &census);
    alone.heavy_sweep(&report);
    assert_eq!(by_census.render(), alone.render());
    let (by_census, alone) = (status::StatusBoard::new(), status::StatusBoard::new());
    by_census.heavy_sweep_counted(&report, &census, "minhop");
    alone.heavy_sweep(&report, "minhop");
    assert_eq!(by_census.status().fabric, alone.status().fabric);
}
