//! The core against a fake PMA: requests answered from a table, in the
//! order a test chooses.

use std::collections::{BTreeMap, HashSet};

use super::*;
use crate::mad::class_port_info::ClassPortInfoRepr;
use crate::mad::perf::perf_cap;

/// A fabric of PMAs: per LID a CapabilityMask (None: silent), per (LID,
/// port) the counters.
#[derive(Default)]
struct FakePma {
    caps: BTreeMap<u16, Option<u16>>,
    counters: BTreeMap<(u16, u8), PortCountersRepr>,
    ext: BTreeMap<(u16, u8), PortCountersExtendedRepr>,
    silent_ports: HashSet<(u16, u8)>,
    sets: Vec<(u16, u8, u16, u8)>,
}

impl FakePma {
    fn answer(&mut self, req: &PerfRequest) -> Result<[u8; PERF_DATA_LEN], PerfFailure> {
        let lid = req.lid.0;
        let cap = self.caps.get(&lid).copied().flatten().ok_or(PerfFailure::Timeout)?;
        let port = req.data[1];
        match req.attribute {
            PerfAttributeId::ClassPortInfo => {
                let mut data = [0u8; PERF_DATA_LEN];
                ClassPortInfoRepr { base_version: 1, class_version: 1, capability_mask: cap, ..Default::default() }
                    .emit(&mut data)
                    .unwrap();
                Ok(data)
            }
            _ if self.silent_ports.contains(&(lid, port)) => Err(PerfFailure::Timeout),
            PerfAttributeId::PortCounters => {
                let c = self.counters.entry((lid, port)).or_default();
                if req.method == Method::Set {
                    let s = PortCountersRepr::parse_bytes(&req.data).unwrap();
                    self.sets.push((lid, port, s.counter_select, s.counter_select2));
                    if s.counter_select & crate::mad::perf::port_counters::select::PORT_RCV_PKTS != 0 {
                        c.port_rcv_pkts = 0;
                    }
                    if s.counter_select & crate::mad::perf::port_counters::select::PORT_RCV_ERRORS != 0 {
                        c.port_rcv_errors = 0;
                    }
                }
                let mut c = *c;
                c.port_select = port;
                Ok(c.to_data())
            }
            PerfAttributeId::PortCountersExtended if perf_cap::has_extended(cap) => {
                let mut e = self.ext.get(&(lid, port)).copied().unwrap_or_default();
                e.port_select = port;
                Ok(e.to_data())
            }
            _ => Err(PerfFailure::Status(crate::mad::header::status::METHOD_ATTR_UNSUPPORTED)),
        }
    }
}

fn port(guid: u64, port: u8, lid: u16, is_switch: bool) -> PerfPort {
    PerfPort { node_guid: Guid(guid), node_desc: format!("node {guid}").into(), port, lid: Lid(lid), is_switch }
}

fn cfg(max_in_flight: usize) -> PerfMgrConfig {
    PerfMgrConfig { max_in_flight, ..PerfMgrConfig::default() }
}

/// Runs one cycle to its end, answering the oldest request first; returns
/// the most requests that were ever in flight at once.
fn run_cycle(core: &mut PerfCore, pma: &mut FakePma, now: Duration, targets: Vec<PerfPort>) -> usize {
    core.begin_cycle(now, targets);
    let mut queue: VecDeque<(Token, PerfRequest)> = VecDeque::new();
    let mut most = 0;
    for _ in 0..10_000 {
        while let Some(r) = core.poll_request() {
            queue.push_back(r);
        }
        most = most.max(core.in_flight());
        assert_eq!(core.in_flight(), queue.len());
        let Some((token, req)) = queue.pop_front() else { break };
        let answer = pma.answer(&req);
        core.handle_answer(now, token, answer);
    }
    assert!(!core.in_cycle(), "the cycle ends");
    most
}

#[test]
fn the_window_is_bounded_and_every_port_is_read() {
    let shared = PerfShared::new();
    let mut core = PerfCore::new(cfg(3), shared.clone());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(0));
    let mut targets = Vec::new();
    for p in 1..=20u8 {
        targets.push(port(0x100, p, 1, true));
        pma.counters.insert((1, p), PortCountersRepr { symbol_error_counter: p.into(), ..Default::default() });
    }
    let most = run_cycle(&mut core, &mut pma, Duration::ZERO, targets);
    assert_eq!(most, 3, "never more than max_in_flight");
    let s = core.stats();
    assert_eq!(s.queries[QueryKind::ClassPortInfo.index()], 1, "one ClassPortInfo per node");
    assert_eq!(s.queries[QueryKind::PortCounters.index()], 20);
    assert_eq!(s.queries[QueryKind::PortCountersExtended.index()], 0, "no extended counters on this PMA");
    assert_eq!((s.cycles, s.last_cycle_polled, s.last_cycle_skipped), (1, 20, 0));
    let snap = shared.latest();
    assert_eq!(snap.ports.len(), 20);
    let p7 = snap.ports.iter().find(|p| p.port == 7).unwrap();
    assert_eq!(p7.totals[Counter::SymbolErrors.index()], Some(7));
    assert_eq!(core.next_cycle_at(), Duration::from_secs(60));
}

#[test]
fn silent_ports_and_nodes_are_skipped_and_counted() {
    let mut core = PerfCore::new(cfg(8), PerfShared::new());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED));
    pma.caps.insert(2, None); // the whole node is silent
    pma.caps.insert(3, Some(0));
    pma.silent_ports.insert((1, 2));
    let targets = vec![port(1, 1, 1, true), port(1, 2, 1, true), port(2, 1, 2, false), port(3, 1, 3, false)];
    run_cycle(&mut core, &mut pma, Duration::ZERO, targets.clone());
    let s = core.stats().clone();
    assert_eq!((s.last_cycle_polled, s.last_cycle_skipped, s.ports_skipped_total), (2, 2, 2));
    let timeouts = |s: &PerfStats, k: QueryKind| s.unanswered[k.index()][0];
    assert_eq!(timeouts(&s, QueryKind::ClassPortInfo), 1);
    assert_eq!(timeouts(&s, QueryKind::PortCounters), 1);
    assert!(core.port_account(Guid(1), 2).is_none());
    // The silent node's ClassPortInfo is asked again next cycle, the others' not.
    run_cycle(&mut core, &mut pma, Duration::from_secs(60), targets);
    let s2 = core.stats();
    assert_eq!(s2.queries[QueryKind::ClassPortInfo.index()] - s.queries[QueryKind::ClassPortInfo.index()], 1);
    assert_eq!(s2.ports_skipped_total, 4);
    assert_eq!(s2.queries[QueryKind::PortCountersExtended.index()], 2, "port 1 of node 1, both cycles");
}

#[test]
fn extended_counters_are_used_where_the_pma_has_them() {
    let mut core = PerfCore::new(cfg(4), PerfShared::new());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED_NO_IETF));
    pma.counters.insert((1, 1), PortCountersRepr { port_xmit_data: u32::MAX, ..Default::default() });
    pma.ext.insert((1, 1), PortCountersExtendedRepr { port_xmit_data: 1 << 40, ..Default::default() });
    run_cycle(&mut core, &mut pma, Duration::ZERO, vec![port(1, 1, 1, false)]);
    let a = core.port_account(Guid(1), 1).unwrap();
    assert_eq!(a.total(Counter::XmitData), Some(1 << 40));
    assert!(pma.sets.is_empty(), "the saturated 32-bit copy is left alone");
}

#[test]
fn counters_past_half_are_cleared_and_keep_counting() {
    let mut core = PerfCore::new(cfg(4), PerfShared::new());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(0));
    pma.counters.insert((1, 1), PortCountersRepr { port_rcv_pkts: 3_000_000_000, ..Default::default() });
    let t = vec![port(1, 1, 1, false)];
    run_cycle(&mut core, &mut pma, Duration::ZERO, t.clone());
    assert_eq!(pma.sets, vec![(1, 1, crate::mad::perf::port_counters::select::PORT_RCV_PKTS, 0)]);
    assert_eq!(core.stats().clears, 1);
    pma.counters.get_mut(&(1, 1)).unwrap().port_rcv_pkts = 10;
    run_cycle(&mut core, &mut pma, Duration::from_secs(60), t);
    assert_eq!(core.port_account(Guid(1), 1).unwrap().total(Counter::RcvPkts), Some(3_000_000_010));
    assert_eq!(core.stats().backwards, 0);
}

#[test]
fn an_error_jump_is_an_event_naming_the_port() {
    let mut core = PerfCore::new(cfg(4), PerfShared::new());
    let mut pma = FakePma::default();
    pma.caps.insert(9, Some(0));
    let t = vec![port(0xabc, 3, 9, true)];
    run_cycle(&mut core, &mut pma, Duration::ZERO, t.clone());
    pma.counters.insert((9, 3), PortCountersRepr { port_rcv_errors: 500, ..Default::default() });
    run_cycle(&mut core, &mut pma, Duration::from_secs(60), t);
    let e = core.poll_event().expect("an event");
    assert_eq!(
        (e.node_guid, e.port, e.counter, e.delta, e.kind),
        (Guid(0xabc), 3, Counter::RcvErrors, 500, JumpKind::Threshold)
    );
    let text = e.to_string();
    assert!(text.contains("PortRcvErrors") && text.contains("port 3") && text.contains("node 2748"), "{text}");
    assert!(core.poll_event().is_none());
}

#[test]
fn ports_that_leave_the_targets_leave_the_export() {
    let shared = PerfShared::new();
    let mut core = PerfCore::new(cfg(4), shared.clone());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(0));
    run_cycle(&mut core, &mut pma, Duration::ZERO, vec![port(1, 1, 1, true), port(1, 2, 1, true)]);
    assert_eq!(shared.latest().ports.len(), 2);
    run_cycle(&mut core, &mut pma, Duration::from_secs(60), vec![port(1, 2, 1, true), port(1, 2, 1, true)]);
    assert_eq!(shared.latest().ports.len(), 1, "gone, and duplicates count once");
    assert!(core.port_account(Guid(1), 1).is_some(), "kept for a while, in case it comes back");
    // No targets: the cycle ends at once.
    core.begin_cycle(Duration::from_secs(120), Vec::new());
    assert!(!core.in_cycle());
    assert!(shared.latest().ports.is_empty());
    // Forgotten once away (last targeted at 0) for longer than the grace.
    core.begin_cycle(ABSENT_GRACE, Vec::new());
    assert!(core.port_account(Guid(1), 1).is_some(), "not longer yet");
    core.begin_cycle(ABSENT_GRACE + Duration::from_secs(1), Vec::new());
    assert!(core.port_account(Guid(1), 1).is_none());
}

/// A port cleared by ibsm, then away (Down at a sweep) and back: its
/// exported total goes on from where it was, never below it (which
/// Prometheus would take for a reset and count the raw value whole).
#[test]
fn a_port_back_after_an_absence_continues_its_total() {
    use crate::mad::perf::port_counters::select;
    let shared = PerfShared::new();
    let mut core = PerfCore::new(cfg(4), shared.clone());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(0));
    pma.counters.insert((1, 1), PortCountersRepr { port_rcv_pkts: 3_000_000_000, ..Default::default() });
    let both = vec![port(1, 1, 1, true), port(1, 2, 1, true)];
    let exported = |shared: &PerfShared, c: Counter| {
        let snap = shared.latest();
        snap.ports.iter().find(|p| p.port == 1).map(|p| p.totals[c.index()].unwrap())
    };
    let mut t = Duration::ZERO;
    run_cycle(&mut core, &mut pma, t, both.clone());
    assert_eq!(pma.sets, vec![(1, 1, select::PORT_RCV_PKTS, 0)], "cleared by ibsm: the hardware now holds less");
    t += Duration::from_secs(60);
    run_cycle(&mut core, &mut pma, t, vec![port(1, 2, 1, true)]);
    assert_eq!(exported(&shared, Counter::RcvPkts), None, "away: not exported");
    // While away the port counted on, and its receive errors burst.
    let c = pma.counters.get_mut(&(1, 1)).unwrap();
    c.port_rcv_pkts = 25;
    c.port_rcv_errors = 400;
    t += Duration::from_secs(600);
    run_cycle(&mut core, &mut pma, t, both.clone());
    assert_eq!(exported(&shared, Counter::RcvPkts), Some(3_000_000_025), "continued, not restarted at 25");
    assert_eq!(exported(&shared, Counter::RcvErrors), Some(400));
    assert_eq!(core.stats().error_jumps, 0, "a rise over an absence is no jump of one interval");
    assert_eq!(core.stats().backwards, 0);
    // Back in step: the next cycle judges jumps again.
    pma.counters.get_mut(&(1, 1)).unwrap().port_rcv_errors = 900;
    t += Duration::from_secs(60);
    run_cycle(&mut core, &mut pma, t, both);
    assert_eq!(exported(&shared, Counter::RcvErrors), Some(900));
    assert_eq!(core.stats().error_jumps, 1);
}

#[test]
fn answers_are_checked_against_their_request() {
    let req = PerfRequest {
        lid: Lid(4),
        method: Method::Get,
        attribute: PerfAttributeId::PortCounters,
        data: PortCountersRepr::get(5).to_data(),
        kind: QueryKind::PortCounters,
    };
    let d = req.to_datagram();
    assert_eq!((d.addr.qpn, d.addr.qkey, d.addr.lid), (1, MadAddress::QP1_QKEY, Lid(4)));
    let mut resp = PerfMadRepr::parse_bytes(&d.mad).unwrap();
    assert_eq!(req.check_answer(&d.mad), Err(PerfFailure::Malformed), "a Get is no answer");
    resp.header.method = Method::GetResp;
    assert_eq!(req.check_answer(&resp.to_bytes()).unwrap()[1], 5);
    resp.header.status = 0x000C;
    assert_eq!(req.check_answer(&resp.to_bytes()), Err(PerfFailure::Status(0x000C)));
    resp.header.status = 0;
    resp.data[1] = 6;
    assert_eq!(req.check_answer(&resp.to_bytes()), Err(PerfFailure::Malformed), "another port's counters");
    assert_eq!(req.check_answer(&[0u8; 10]), Err(PerfFailure::Malformed));
}

/// PortXmitWait is reserved in PortCounters unless ClassPortInfo has
/// IsPortCountersXmitWaitSupported: not exported, never cleared there.
#[test]
fn xmit_wait_is_exported_only_where_supported() {
    use crate::mad::perf::port_counters::select2;
    let shared = PerfShared::new();
    let mut core = PerfCore::new(cfg(4), shared.clone());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED));
    pma.caps.insert(2, Some(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED | perf_cap::IS_PORT_COUNTERS_XMIT_WAIT_SUPPORTED));
    for lid in [1, 2] {
        pma.counters.insert((lid, 1), PortCountersRepr { port_xmit_wait: u32::MAX, ..Default::default() });
    }
    run_cycle(&mut core, &mut pma, Duration::ZERO, vec![port(1, 1, 1, false), port(2, 1, 2, false)]);
    let snap = shared.latest();
    let wait = |g: u64| snap.ports.iter().find(|p| p.node_guid == Guid(g)).unwrap().totals[Counter::XmitWait.index()];
    assert_eq!(wait(1), None, "unsupported: not exported");
    assert_eq!(wait(2), Some(u64::from(u32::MAX)));
    assert_eq!(pma.sets, vec![(2, 1, 0, select2::PORT_XMIT_WAIT)], "cleared only where it counts");
    let families = crate::runtime::metrics::perfmgr::families(&snap);
    let f = families.iter().find(|f| f.get_name() == "port_xmit_wait_total").expect("the family");
    assert_eq!(f.get_metric().len(), 1, "one port has it");
}

/// The fabric-wide sums add each port's rises and never fall: a port that
/// leaves takes nothing back, and one cleared keeps adding from 0.
#[test]
fn fabric_sums_only_rise() {
    let shared = PerfShared::new();
    let mut core = PerfCore::new(cfg(4), shared.clone());
    let mut pma = FakePma::default();
    pma.caps.insert(1, Some(0));
    pma.counters.insert((1, 1), PortCountersRepr { symbol_error_counter: 5, ..Default::default() });
    pma.counters.insert((1, 2), PortCountersRepr { symbol_error_counter: 7, ..Default::default() });
    let both = vec![port(1, 1, 1, true), port(1, 2, 1, true)];
    let sum = |shared: &PerfShared| shared.latest().stats.fabric[Counter::SymbolErrors.index()];
    run_cycle(&mut core, &mut pma, Duration::ZERO, both.clone());
    assert_eq!(sum(&shared), Some(12), "first readings count whole, as each port's total does");
    pma.counters.get_mut(&(1, 1)).unwrap().symbol_error_counter = 8;
    run_cycle(&mut core, &mut pma, Duration::from_secs(60), both.clone());
    assert_eq!(sum(&shared), Some(15));
    run_cycle(&mut core, &mut pma, Duration::from_secs(120), vec![port(1, 2, 1, true)]);
    assert_eq!(sum(&shared), Some(15), "port 1 left: the sum does not fall");
    pma.counters.get_mut(&(1, 2)).unwrap().symbol_error_counter = 2;
    run_cycle(&mut core, &mut pma, Duration::from_secs(180), vec![port(1, 2, 1, true)]);
    assert_eq!(sum(&shared), Some(17), "cleared by someone else: 7 -> 2 counts as 2 more");
    assert_eq!(shared.latest().stats.fabric[Counter::XmitWait.index()], None, "no port counts PortXmitWait here");
}
