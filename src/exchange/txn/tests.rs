use super::*;
use crate::mad::smp::SmpRepr;
use crate::mad::{AttributeId, DrPath, Method};
use crate::rmpp::RmppSender;
use crate::types::Lid;

const MS: Duration = Duration::from_millis(1);

fn get(attr: AttributeId, path: &[u8]) -> Datagram {
    let smp = SmpRepr::directed_request(Method::Get, attr, 0, DrPath::from_ports(path).unwrap(), 0, [0; 64]);
    Datagram { addr: MadAddress::smi_permissive(), mad: smp.to_bytes().to_vec() }
}

/// The response a device would send back, with the TID's high bits
/// scribbled over as the kernel and ibsim do.
fn answer(req: &Datagram) -> Datagram {
    let mut r = req.clone();
    let mut h = MadHeader::new_checked(&mut r.mad[..MAD_HEADER_LEN]).unwrap();
    h.set_method(Method::GetResp);
    let tid = h.transaction_id();
    h.set_transaction_id(0xabcd_0001_0000_0000 | (tid & 0xffff_ffff));
    r
}

fn tid_of(d: &Datagram) -> u64 {
    header_of(&d.mad).unwrap().transaction_id()
}

fn cfg(window: usize, retries: u32) -> TxnConfig {
    TxnConfig { window, gmp_window: window, timeout: 100 * MS, retries, ..TxnConfig::default() }
}

fn cfg2(window: usize, gmp_window: usize, retries: u32) -> TxnConfig {
    TxnConfig { window, gmp_window, timeout: 100 * MS, retries, ..TxnConfig::default() }
}

/// A Get of `class` to QP1 (an SMP class goes to QP0), told apart by
/// its attribute modifier.
fn gmp(class: MgmtClass, tag: u32) -> Datagram {
    let mut mad = vec![0u8; 256];
    let mut h = MadHeader::new_checked(&mut mad[..MAD_HEADER_LEN]).unwrap();
    h.set_base_version(1);
    h.set_mgmt_class(class);
    h.set_class_version(if class == MgmtClass::SubnAdm { 2 } else { 1 });
    h.set_method(Method::Get);
    h.set_attribute_id(AttributeId::from(0x0012));
    h.set_attribute_modifier(tag);
    let addr = match class {
        MgmtClass::SubnMgmtLid => MadAddress::smi(Lid(1)),
        _ => MadAddress::gsi(Lid(1), 0),
    };
    Datagram { addr, mad }
}

/// A directed-route SMP told apart by its attribute modifier.
fn dr(tag: u32) -> Datagram {
    let mut d = get(AttributeId::NodeInfo, &[1]);
    MadHeader::new_checked(&mut d.mad[..MAD_HEADER_LEN]).unwrap().set_attribute_modifier(tag);
    d
}

/// (class, attribute modifier) of a sent MAD.
fn tag(d: &Datagram) -> (MgmtClass, u32) {
    let h = header_of(&d.mad).unwrap();
    (h.mgmt_class(), h.attribute_modifier())
}

/// What [`run_mixed`] saw.
#[derive(Debug, Default)]
struct Outcome {
    /// Completed tokens in order, with the time each completed.
    done: Vec<(Duration, u32)>,
    failed: Vec<u32>,
    /// The most in flight at once, overall and by window (keyed by
    /// the window's class: 0x01 for both SMP classes).
    max_in_flight: usize,
    max_by_window: BTreeMap<u8, usize>,
}

/// Steps a fake clock to each wake-up, answering every request after
/// `rtt` unless `drop` (given the MAD and the send count) says so, and
/// checks every class's window on every step.
fn run_mixed(t: &mut Transactions<u32>, rtt: Duration, mut drop: impl FnMut(&Datagram, u32) -> bool) -> Outcome {
    let mut now = Duration::ZERO;
    let mut wire: Vec<(Duration, Datagram)> = Vec::new();
    let mut o = Outcome::default();
    let mut sends = 0u32;
    for _step in 0..10_000 {
        while let Some(d) = t.poll_transmit(now) {
            sends += 1;
            if !drop(&d, sends) {
                wire.push((now + rtt, answer(&d)));
            }
        }
        o.max_in_flight = o.max_in_flight.max(t.in_flight());
        for (&w, win) in &t.windows {
            let class = MgmtClass::from(w);
            assert_eq!(win.in_flight, t.in_flight_in(class));
            assert!(win.in_flight <= t.config().window_for(class), "window of {class:?} exceeded");
            let max = o.max_by_window.entry(w).or_default();
            *max = (*max).max(win.in_flight);
        }
        let in_windows: usize = t.windows.values().map(|w| w.in_flight).sum();
        assert_eq!(in_windows, t.in_flight(), "the windows account for every send");
        let next_wire = wire.iter().map(|w| w.0).min();
        let next = match (next_wire, t.poll_timeout()) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(x) => x,
                None => return o,
            },
        };
        assert!(next >= now, "time must not go backwards");
        now = next;
        let (due, rest): (Vec<_>, Vec<_>) = wire.drain(..).partition(|w| w.0 <= now);
        wire = rest;
        for (_, d) in due {
            match t.handle_receive(now, d) {
                Received::Response { token, .. } => o.done.push((now, token)),
                Received::Stray { .. } => {}
                // A late SA answer (to a retried query) goes to the SA agent.
                Received::Unsolicited(d) if tag(&d).0 == MgmtClass::SubnAdm => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        o.failed.extend(t.handle_timeout(now).into_iter().map(|(tok, _)| tok));
    }
    panic!("livelock: no quiescence after 10000 steps");
}

/// [`run_mixed`] for SMPs alone, with the overall window check.
/// Returns (completed tokens in order, failed tokens, max seen in flight).
fn run(
    t: &mut Transactions<u32>,
    rtt: Duration,
    mut drop: impl FnMut(u64, u32) -> bool,
) -> (Vec<u32>, Vec<u32>, usize) {
    let o = run_mixed(t, rtt, |d, sends| drop(tid_of(d), sends));
    assert!(o.max_in_flight <= t.config().window, "window exceeded");
    (o.done.into_iter().map(|(_, tok)| tok).collect(), o.failed, o.max_in_flight)
}

#[test]
fn window_is_never_exceeded_and_all_complete() {
    for window in [1, 2, 4, 7] {
        let mut t = Transactions::new(cfg(window, 3));
        for i in 0..50 {
            t.submit(i, get(AttributeId::NodeInfo, &[1])).unwrap();
        }
        let (done, failed, max) = run(&mut t, 3 * MS, |_, _| false);
        assert_eq!(done, (0..50).collect::<Vec<_>>(), "window {window}: FIFO completion");
        assert!(failed.is_empty());
        assert_eq!(max, window);
        let s = t.stats();
        let c = s.by_mad[&MadKey { class: 0x81, attribute: 0x11, method: 1 }];
        assert_eq!((c.sent, c.responses, c.retries, c.timeouts), (50, 50, 0, 0));
        assert_eq!((s.in_flight, s.queued), (0, 0));
    }
}

#[test]
fn tids_are_unique_among_live_transactions() {
    let mut t = Transactions::new(cfg(8, 0));
    for i in 0..8 {
        t.submit(i, get(AttributeId::PortInfo, &[])).unwrap();
    }
    let mut tids: Vec<u64> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tid_of(&d)).collect();
    assert_eq!(tids.len(), 8);
    assert!(tids.iter().all(|&x| x >> 32 == 0), "high 32 bits are left to the kernel");
    tids.sort();
    tids.dedup();
    assert_eq!(tids.len(), 8);
}

#[test]
fn retries_then_failure() {
    let mut t = Transactions::new(cfg(4, 2));
    t.submit(7u32, get(AttributeId::SwitchInfo, &[1, 3])).unwrap();
    let d1 = t.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(t.poll_timeout(), Some(100 * MS));
    assert!(t.handle_timeout(99 * MS).is_empty());
    assert!(t.handle_timeout(100 * MS).is_empty(), "first retry");
    assert_eq!(t.in_flight(), 0);
    let d2 = t.poll_transmit(100 * MS).unwrap();
    assert_ne!(tid_of(&d1), tid_of(&d2), "each attempt has its own TID");
    assert!(t.handle_timeout(200 * MS).is_empty(), "second retry");
    let d3 = t.poll_transmit(200 * MS).unwrap();
    let failed = t.handle_timeout(300 * MS);
    assert_eq!(failed.len(), 1);
    let (tok, err) = &failed[0];
    assert_eq!(*tok, 7);
    match err {
        TxnError::Timeout { attempts, mad } => {
            assert_eq!(*attempts, 3);
            assert_eq!(mad.tid, tid_of(&d3));
            assert_eq!(mad.attribute, AttributeId::SwitchInfo);
            assert_eq!(mad.path, Some(DrPath::from_ports(&[1, 3]).unwrap()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(t.pending(), 0);
    // Every attempt's late answer is now a stray.
    for d in [&d1, &d2, &d3] {
        assert!(matches!(t.handle_receive(310 * MS, answer(d)), Received::Stray { .. }));
    }
    let c = t.stats().by_mad[&MadKey { class: 0x81, attribute: 0x12, method: 1 }];
    assert_eq!((c.sent, c.retries, c.timeouts, c.failed, c.strays), (3, 2, 3, 1, 3));
}

#[test]
fn late_response_after_retry_completes_and_the_retry_answer_is_stray() {
    let mut t = Transactions::new(cfg(1, 3));
    t.submit(1u32, get(AttributeId::NodeInfo, &[2])).unwrap();
    t.submit(2u32, get(AttributeId::NodeInfo, &[3])).unwrap();
    let first = t.poll_transmit(Duration::ZERO).unwrap();
    assert!(t.poll_transmit(Duration::ZERO).is_none(), "window 1");
    t.handle_timeout(100 * MS);
    let retry = t.poll_transmit(100 * MS).unwrap();
    assert_eq!(&retry.mad[129..130], &[2], "the retry goes before request 2");
    // The first attempt's answer arrives late: it completes transaction 1.
    match t.handle_receive(120 * MS, answer(&first)) {
        Received::Response { token, .. } => assert_eq!(token, 1),
        other => panic!("{other:?}"),
    }
    // The retry's answer then matches nothing.
    assert!(matches!(t.handle_receive(130 * MS, answer(&retry)), Received::Stray { .. }));
    // Window space freed: request 2 goes out.
    let second = t.poll_transmit(130 * MS).unwrap();
    assert_eq!(&second.mad[129..130], &[3]);
    let c = t.stats().by_mad[&MadKey { class: 0x81, attribute: 0x11, method: 1 }];
    assert_eq!((c.responses, c.late, c.strays, c.retries), (1, 1, 1, 1));
}

#[test]
fn retries_jump_the_queue_in_deadline_order() {
    let mut t = Transactions::new(cfg(2, 1));
    for (i, p) in [(0u32, 1u8), (1, 2), (2, 3)] {
        t.submit(i, get(AttributeId::NodeInfo, &[p])).unwrap();
    }
    t.poll_transmit(Duration::ZERO).unwrap();
    t.poll_transmit(MS).unwrap();
    assert!(t.handle_timeout(101 * MS).is_empty());
    let order: Vec<u8> = std::iter::from_fn(|| t.poll_transmit(101 * MS)).map(|d| d.mad[129]).collect();
    assert_eq!(order, vec![1, 2], "both retries before request 3");
}

#[test]
fn lossy_link_eventually_delivers_with_retries() {
    use rand::{Rng, SeedableRng};
    let mut t = Transactions::new(cfg(4, 8));
    for i in 0..40 {
        t.submit(i, get(AttributeId::PortInfo, &[1])).unwrap();
    }
    // Drop a third of all sends (seeded: the outcome is fixed).
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut drops = 0u64;
    let (done, failed, _) = run(&mut t, 2 * MS, |_, _| {
        let d = rng.gen_ratio(1, 3);
        drops += u64::from(d);
        d
    });
    assert!(failed.is_empty());
    let mut sorted = done.clone();
    sorted.sort();
    assert_eq!(sorted, (0..40).collect::<Vec<_>>());
    let c = t.stats().totals();
    assert_eq!(c.responses, 40);
    assert_eq!(c.sent, 40 + c.retries);
    assert_eq!(c.retries, drops, "one retry per dropped send: {c:?}");
    assert_eq!(c.timeouts, drops);
    assert!(drops >= 10, "the seed drops a fair share: {drops}");
}

#[test]
fn tid_wraparound_skips_zero_and_live_tids() {
    let mut t = Transactions::with_first_tid(cfg(8, 0), u32::MAX - 1);
    t.submit(0u32, get(AttributeId::NodeInfo, &[])).unwrap();
    let a = t.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(tid_of(&a), u64::from(u32::MAX - 1));
    for i in 1..4 {
        t.submit(i, get(AttributeId::NodeInfo, &[])).unwrap();
    }
    let tids: Vec<u64> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tid_of(&d)).collect();
    assert_eq!(tids, vec![u64::from(u32::MAX), 1, 2]);
    // A response whose high bits were rewritten still matches.
    let mut r = answer(&a);
    r.mad[8..12].copy_from_slice(&[0xff; 4]);
    assert!(matches!(t.handle_receive(MS, r), Received::Response { token: 0, .. }));

    // Wrap all the way round with TID 1 and 2 still live.
    let mut t2 = Transactions::with_first_tid(cfg(8, 0), 1);
    t2.submit(10u32, get(AttributeId::NodeInfo, &[])).unwrap();
    t2.submit(11u32, get(AttributeId::NodeInfo, &[])).unwrap();
    t2.poll_transmit(Duration::ZERO).unwrap();
    t2.poll_transmit(Duration::ZERO).unwrap();
    t2.next_tid = u32::MAX;
    t2.submit(12u32, get(AttributeId::NodeInfo, &[])).unwrap();
    t2.submit(13u32, get(AttributeId::NodeInfo, &[])).unwrap();
    let tids: Vec<u64> = std::iter::from_fn(|| t2.poll_transmit(Duration::ZERO)).map(|d| tid_of(&d)).collect();
    assert_eq!(tids, vec![u64::from(u32::MAX), 3]);
}

#[test]
fn unsolicited_stray_and_malformed_are_classified() {
    let mut t: Transactions<u32> = Transactions::new(TxnConfig::default());
    // A Get from another SM.
    let req = get(AttributeId::SmInfo, &[]);
    assert!(matches!(t.handle_receive(Duration::ZERO, req.clone()), Received::Unsolicited(_)));
    // A trap.
    let mut trap = req.clone();
    trap.mad[3] = u8::from(Method::Trap);
    assert!(matches!(t.handle_receive(Duration::ZERO, trap), Received::Unsolicited(_)));
    // A response nobody asked for.
    assert!(matches!(t.handle_receive(Duration::ZERO, answer(&req)), Received::Stray { .. }));
    // One in the SA class is for the SA agent: an RMPP ACK of one of its
    // answers, a ReportResp to one of its Reports.
    let mut report_resp = gmp(MgmtClass::SubnAdm, 0);
    report_resp.mad[3] = u8::from(Method::ReportResp);
    assert_eq!(t.handle_receive(Duration::ZERO, report_resp.clone()), Received::Unsolicited(report_resp));
    // Garbage.
    let short = Datagram { addr: req.addr, mad: vec![1, 2, 3] };
    assert!(matches!(t.handle_receive(Duration::ZERO, short.clone()), Received::Malformed(_)));
    assert!(matches!(t.submit(1, short), Err(TxnError::Malformed(_))));
    let s = t.stats();
    assert_eq!(s.malformed, 1);
    assert_eq!(s.totals().unsolicited, 3);
    assert_eq!(s.totals().strays, 1);
    assert_eq!(s.by_mad[&MadKey { class: 0x03, attribute: 0x12, method: 0x06 }].unsolicited, 1);
}

#[test]
fn response_of_another_class_does_not_complete() {
    let mut t = Transactions::new(TxnConfig::default());
    t.submit(1u32, get(AttributeId::NodeInfo, &[])).unwrap();
    let d = t.poll_transmit(Duration::ZERO).unwrap();
    let mut r = answer(&d);
    r.mad[1] = 0x04; // PerfMgt with the same TID
    assert!(matches!(t.handle_receive(MS, r.clone()), Received::Stray { .. }));
    r.mad[1] = 0x03; // SubnAdm: not ours, so the SA agent's
    assert!(matches!(t.handle_receive(MS, r), Received::Unsolicited(_)));
    assert_eq!(t.pending(), 1);
}

#[test]
fn cancel_and_drain() {
    let mut t = Transactions::new(TxnConfig::default());
    t.submit(1u32, get(AttributeId::NodeInfo, &[])).unwrap();
    t.submit(2u32, get(AttributeId::NodeInfo, &[])).unwrap();
    let d = t.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(t.cancel_tid(tid_of(&d) as u32), Some(1));
    assert_eq!(t.in_flight(), 0);
    assert_eq!(t.drain(), vec![2]);
    assert_eq!(t.pending(), 0);
    assert!(t.poll_transmit(Duration::ZERO).is_none());
}

/// The completion times of the SMP tokens (those below `n`).
fn smp_times(o: &Outcome, n: u32) -> Vec<(Duration, u32)> {
    o.done.iter().copied().filter(|&(_, tok)| tok < n).collect()
}

#[test]
fn a_full_sa_window_does_not_hold_back_smps() {
    // 100 SMPs answered in 1 ms; 1000 SA queries queued ahead of them
    // that nobody answers, so the SA window stays full throughout.
    let sweep = |t: &mut Transactions<u32>| {
        for i in 0..100 {
            t.submit(i, if i % 2 == 0 { dr(i) } else { gmp(MgmtClass::SubnMgmtLid, i) }).unwrap();
        }
    };
    let mut alone = Transactions::new(cfg2(4, 8, 3));
    sweep(&mut alone);
    let alone = run_mixed(&mut alone, MS, |_, _| false);

    let loaded = || {
        let mut t = Transactions::new(cfg2(4, 8, 3));
        for i in 0..1000 {
            t.submit(1000 + i, gmp(MgmtClass::SubnAdm, i)).unwrap();
        }
        sweep(&mut t);
        t
    };
    let mut t = loaded();
    let first: Vec<_> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tag(&d).0).collect();
    assert_eq!(first.iter().filter(|&&c| c == MgmtClass::SubnAdm).count(), 8, "the SA window fills");
    assert_eq!(first.iter().filter(|&&c| c != MgmtClass::SubnAdm).count(), 4, "and so does the SMPs'");
    assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 4);
    assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtLid), 4, "LID-routed and DR SMPs share a window");
    assert_eq!(t.in_flight_in(MgmtClass::SubnAdm), 8);
    assert_eq!(t.in_flight_in(MgmtClass::Perf), 0);
    let mut t = loaded();
    let o = run_mixed(&mut t, MS, |d, _| tag(d).0 == MgmtClass::SubnAdm);

    assert_eq!(smp_times(&o, 100), smp_times(&alone, 100), "SMPs finish as if the SA backlog were not there");
    assert_eq!(smp_times(&o, 100).last().unwrap().0, 25 * MS, "100 SMPs, window 4, 1 ms each");
    assert_eq!(o.max_by_window[&0x01], 4);
    assert_eq!(o.max_by_window[&0x03], 8);
    let mut failed = o.failed.clone();
    failed.sort();
    assert_eq!(failed, (1000..2000).collect::<Vec<_>>(), "every SA query failed, none was lost");
    let s = t.stats();
    assert_eq!(s.by_mad[&MadKey { class: 0x03, attribute: 0x12, method: 1 }].sent, 4000);
    assert_eq!((s.in_flight, s.queued), (0, 0));
}

#[test]
fn a_full_smp_window_does_not_hold_back_sa_or_perf() {
    // 1000 SMPs to a dead switch (never answered) queued ahead of 20 SA
    // queries and 20 PerfMgt Gets that are answered in 2 ms.
    let gmps = |t: &mut Transactions<u32>| {
        for i in 0..20 {
            t.submit(i, gmp(MgmtClass::SubnAdm, i)).unwrap();
            t.submit(100 + i, gmp(MgmtClass::Perf, i)).unwrap();
        }
    };
    let mut alone = Transactions::new(cfg2(4, 4, 1));
    gmps(&mut alone);
    let alone = run_mixed(&mut alone, 2 * MS, |_, _| false);

    let mut t = Transactions::new(cfg2(4, 4, 1));
    for i in 0..1000 {
        t.submit(1000 + i, dr(i)).unwrap();
    }
    gmps(&mut t);
    let o = run_mixed(&mut t, 2 * MS, |d, _| tag(d).0 == MgmtClass::SubnMgmtDirected);
    assert_eq!(smp_times(&o, 1000), smp_times(&alone, 1000), "GMPs finish as if the SMP backlog were not there");
    assert_eq!(smp_times(&o, 1000).last().unwrap().0, 10 * MS, "20 of each, window 4, 2 ms each");
    assert_eq!(o.failed.len(), 1000);
    assert_eq!((o.max_by_window[&0x01], o.max_by_window[&0x03], o.max_by_window[&0x04]), (4, 4, 4));
}

#[test]
fn each_class_has_its_own_window() {
    use rand::{Rng, SeedableRng};
    // SMPs of both routings share window 3; SA, PerfMgt and DevMgt
    // (0x06, a class ibsm has no agent for) each have window 2.
    let classes = [MgmtClass::SubnMgmtDirected, MgmtClass::SubnMgmtLid, MgmtClass::SubnAdm, MgmtClass::Perf];
    let classes = classes.into_iter().chain([MgmtClass::from(0x06)]);
    let mut t = Transactions::new(cfg2(3, 2, 8));
    let mut next = 0u32;
    for c in classes.clone() {
        for _ in 0..30 {
            let d = if c == MgmtClass::SubnMgmtDirected { dr(next) } else { gmp(c, next) };
            t.submit(next, d).unwrap();
            next += 1;
        }
    }
    assert_eq!(t.config().window_for(MgmtClass::SubnMgmtDirected), 3);
    assert_eq!(t.config().window_for(MgmtClass::SubnMgmtLid), 3);
    assert_eq!(t.config().window_for(MgmtClass::SubnAdm), 2);
    assert_eq!(t.config().window_for(MgmtClass::from(0x06)), 2);
    // No loss: each class completes in submission order.
    let o = run_mixed(&mut t, 3 * MS, |_, _| false);
    assert!(o.failed.is_empty());
    for (k, c) in classes.clone().enumerate() {
        let k = k as u32;
        let got: Vec<u32> = o.done.iter().map(|&(_, tok)| tok).filter(|tok| tok / 30 == k).collect();
        assert_eq!(got, (30 * k..30 * k + 30).collect::<Vec<_>>(), "{c:?} in FIFO order");
    }
    let windows: Vec<(u8, usize)> = o.max_by_window.into_iter().collect();
    assert_eq!(windows, vec![(0x01, 3), (0x03, 2), (0x04, 2), (0x06, 2)], "every window filled, none exceeded");
    assert_eq!(o.max_in_flight, 3 + 2 + 2 + 2);

    // With a third of all sends lost, still no window is exceeded
    // (run_mixed checks every step) and everything arrives.
    let mut t = Transactions::new(cfg2(3, 2, 8));
    for (k, c) in classes.enumerate() {
        for i in 0..30 {
            t.submit(k as u32 * 30 + i, gmp(c, i)).unwrap();
        }
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let o = run_mixed(&mut t, 3 * MS, |_, _| rng.gen_ratio(1, 3));
    assert!(o.failed.is_empty());
    assert_eq!(o.done.len(), 150);
    assert!(t.stats().totals().retries >= 30, "the seed drops a fair share");
}

#[test]
fn retries_go_first_within_their_class() {
    let mut t = Transactions::new(cfg2(1, 1, 1));
    t.submit(0u32, gmp(MgmtClass::SubnAdm, 0)).unwrap();
    t.submit(1u32, gmp(MgmtClass::SubnAdm, 1)).unwrap();
    t.submit(2u32, dr(2)).unwrap();
    t.submit(3u32, dr(3)).unwrap();
    let sent: Vec<_> = std::iter::from_fn(|| t.poll_transmit(Duration::ZERO)).map(|d| tag(&d)).collect();
    assert_eq!(sent, vec![(MgmtClass::SubnMgmtDirected, 2), (MgmtClass::SubnAdm, 0)], "SMPs first, one per window");
    assert!(t.handle_timeout(100 * MS).is_empty());
    let retried: Vec<_> = std::iter::from_fn(|| t.poll_transmit(100 * MS)).collect();
    assert_eq!(retried.iter().map(tag).collect::<Vec<_>>(), sent, "each retry before its class's next request");
    for d in &retried {
        assert!(matches!(t.handle_receive(101 * MS, answer(d)), Received::Response { .. }));
    }
    let rest: Vec<_> = std::iter::from_fn(|| t.poll_transmit(101 * MS)).map(|d| tag(&d)).collect();
    assert_eq!(rest, vec![(MgmtClass::SubnMgmtDirected, 3), (MgmtClass::SubnAdm, 1)]);
    let c = t.stats().totals();
    assert_eq!((c.sent, c.retries, c.timeouts, c.responses), (6, 2, 2, 2));
}

#[test]
fn an_answer_or_a_cancel_frees_only_its_own_window() {
    let mut t = Transactions::new(cfg2(1, 1, 3));
    t.submit(0u32, dr(0)).unwrap();
    t.submit(1u32, dr(1)).unwrap();
    t.submit(2u32, gmp(MgmtClass::SubnAdm, 2)).unwrap();
    t.submit(3u32, gmp(MgmtClass::SubnAdm, 3)).unwrap();
    t.submit(4u32, gmp(MgmtClass::Perf, 4)).unwrap();
    let smp = t.poll_transmit(Duration::ZERO).unwrap();
    let sa = t.poll_transmit(Duration::ZERO).unwrap();
    let perf = t.poll_transmit(Duration::ZERO).unwrap();
    assert!(t.poll_transmit(Duration::ZERO).is_none(), "every window is full");
    assert_eq!([tag(&smp).1, tag(&sa).1, tag(&perf).1], [0, 2, 4]);

    // The SA answer lets the next SA query out, not the waiting SMP.
    assert!(matches!(t.handle_receive(MS, answer(&sa)), Received::Response { token: 2, .. }));
    let next = t.poll_transmit(MS).unwrap();
    assert_eq!(tag(&next), (MgmtClass::SubnAdm, 3));
    assert!(t.poll_transmit(MS).is_none());

    // Cancelling the PerfMgt Get frees the PerfMgt window only.
    assert_eq!(t.cancel_tid(tid_of(&perf) as u32), Some(4));
    assert_eq!(t.in_flight_in(MgmtClass::Perf), 0);
    assert!(t.poll_transmit(MS).is_none(), "no PerfMgt left, and the SMP window is still full");
    assert_eq!((t.in_flight_in(MgmtClass::SubnMgmtLid), t.in_flight_in(MgmtClass::SubnAdm), t.in_flight()), (1, 1, 2));

    // The SMP times out; its answer arrives while the retry still
    // waits in the queue: the window holds nothing of it, and the next
    // SMP goes out.
    assert!(t.handle_timeout(100 * MS).is_empty());
    assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 0);
    assert!(matches!(t.handle_receive(100 * MS, answer(&smp)), Received::Response { token: 0, .. }));
    let second = t.poll_transmit(100 * MS).unwrap();
    assert_eq!(tag(&second), (MgmtClass::SubnMgmtDirected, 1), "the completed retry's queue entry is skipped");
    assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 1);
    assert_eq!(t.drain().len(), 2);
    assert_eq!((t.in_flight(), t.in_flight_in(MgmtClass::SubnAdm)), (0, 0));
}

#[test]
fn smps_presumed_lost_free_their_slots_up_to_the_wider_cap() {
    let cfg = TxnConfig { smp_lost_after: 10 * MS, smp_window_with_lost: 5, ..cfg(2, 1) };
    let mut t: Transactions<u32> = Transactions::new(cfg);
    for i in 0..8 {
        t.submit(i, dr(i)).unwrap();
    }
    t.submit(100, gmp(MgmtClass::SubnAdm, 1)).unwrap();
    let mut now = Duration::ZERO;
    let mut sent = Vec::new();
    let sa = std::cell::Cell::new(0);
    let pump = |t: &mut Transactions<u32>, now: Duration, sent: &mut Vec<Datagram>| {
        while let Some(d) = t.poll_transmit(now) {
            if tag(&d).0 == MgmtClass::SubnAdm {
                sa.set(sa.get() + 1);
            } else {
                sent.push(d);
            }
        }
    };
    pump(&mut t, now, &mut sent);
    assert_eq!(sent.len(), 2, "the window");
    assert_eq!(sa.get(), 1, "the SA window is no SMP window: its query went at once");
    // Unanswered for 10 ms: presumed lost, two more go.
    assert_eq!(t.poll_timeout(), Some(10 * MS));
    now = 10 * MS;
    assert!(t.handle_timeout(now).is_empty());
    pump(&mut t, now, &mut sent);
    assert_eq!(sent.len(), 4);
    // Then one more only: five out at most, lost ones counted.
    now = 20 * MS;
    t.handle_timeout(now);
    pump(&mut t, now, &mut sent);
    assert_eq!(sent.len(), 5);
    assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 5);
    // A late answer to one presumed lost still completes it, and frees
    // its place.
    let late = answer(&sent[0]);
    assert!(matches!(t.handle_receive(now, late), Received::Response { token: 0, .. }));
    pump(&mut t, now, &mut sent);
    assert_eq!(sent.len(), 6);
    // The first attempts time out at 100 ms, are retried, and the last
    // ones fail at the end of their second attempt: every transaction
    // ends (the unanswered SA query too).
    let mut failed = 0;
    while t.pending() > 0 {
        now = t.poll_timeout().unwrap();
        failed += t.handle_timeout(now).len();
        pump(&mut t, now, &mut sent);
        assert!(t.in_flight_in(MgmtClass::SubnMgmtDirected) <= 5);
    }
    assert_eq!(failed, 7 + 1);
    assert_eq!(t.in_flight_in(MgmtClass::SubnMgmtDirected), 0);
}

#[test]
fn zero_windows_are_taken_as_one() {
    let t: Transactions<u32> = Transactions::new(cfg2(0, 0, 0));
    assert_eq!((t.config().window, t.config().gmp_window), (1, 1));
    assert_eq!(TxnConfig::default().window_for(MgmtClass::SubnMgmtDirected), 4, "OpenSM's max_wire_smps");
}

// RMPP answers (SubnAdmGetTable).

const SA_RMPP: RmppConfig = RmppConfig {
    window: 4,
    segment_timeout: Duration::from_millis(20),
    retries: 5,
    total_timeout: Duration::from_secs(2),
    max_bytes: 1 << 20,
};

/// Where the SA's segments come from: its LID on QP1, with the GSI's
/// Q_Key as the devices report it.
const FROM_SA: MadAddress = MadAddress { lid: Lid(1), qpn: 1, qkey: MadAddress::QP1_QKEY, sl: 0, pkey_index: 0 };

/// A SubnAdmGetTable told apart by its attribute modifier.
fn get_table(tag: u32) -> Datagram {
    let mut d = gmp(MgmtClass::SubnAdm, tag);
    d.mad[3] = u8::from(Method::GetTable);
    d
}

/// The records the fake SA answers request `tag` with.
fn table(tag: u32) -> Vec<u8> {
    (0..(tag as usize * 317) % 3000).map(|i| (i as u32 ^ tag) as u8).collect()
}

/// The SA's side of an answer to `req`: a GetTableResp with the TID's
/// high bits scribbled over, as the kernel does.
fn sa_sender(now: Duration, req: &Datagram) -> RmppSender {
    let mut template = req.mad[..56].to_vec();
    template[3] = u8::from(Method::GetTableResp);
    template[8..12].copy_from_slice(&[0xab, 0xcd, 0x00, 0x01]);
    let tag = header_of(&req.mad).unwrap().attribute_modifier();
    RmppSender::new(now, &template, table(tag), SA_RMPP).unwrap()
}

fn seg(mad: Vec<u8>) -> Datagram {
    Datagram { addr: FROM_SA, mad }
}

#[test]
fn an_rmpp_answer_completes_only_when_reassembled() {
    let mut t = Transactions::new(cfg2(4, 4, 3));
    t.submit_with(7u32, get_table(5), RequestKind::Rmpp(SA_RMPP)).unwrap();
    let req = t.poll_transmit(Duration::ZERO).unwrap();
    let mut sa = sa_sender(MS, &req);
    assert_eq!(sa.segments(), 8, "1585 bytes of records");
    let mut now = MS;
    let mut acks = Vec::new();
    let whole = loop {
        now += MS;
        let segs: Vec<Vec<u8>> = std::iter::from_fn(|| sa.poll_transmit(now)).collect();
        assert!(!segs.is_empty(), "the SA stalled");
        let mut done = None;
        for m in segs {
            match t.handle_receive(now, seg(m)) {
                Received::Segment { tid } => assert_eq!(tid as u32, tid_of(&req) as u32),
                Received::Response { token: 7, dgram } => done = Some(dgram),
                other => panic!("{other:?}"),
            }
        }
        if done.is_none() {
            assert_eq!((t.in_flight(), t.receiving()), (0, 1), "the request's window slot is free");
            assert_eq!(t.in_flight_in(MgmtClass::SubnAdm), 0);
        }
        while let Some(ack) = t.poll_transmit(now) {
            assert_eq!(ack.addr, FROM_SA, "back to the SA, where the segments came from");
            assert_eq!((ack.mad[3], &ack.mad[8..16]), (0x12, &[0xab, 0xcd, 0, 1, 0, 0, 0, 1][..]));
            sa.handle_mad(now, &ack.mad).unwrap();
            acks.push(ack);
        }
        if let Some(d) = done {
            break d;
        }
    };
    assert_eq!(sa.state(), &TransferState::Done);
    assert_eq!(whole.addr, FROM_SA);
    assert_eq!(whole.mad.len(), 56 + 1585);
    assert_eq!(&whole.mad[56..], &table(5)[..]);
    assert_eq!(whole.mad[3], 0x92);
    assert_eq!(acks.len(), 3, "segment 1, the end of window 1+4, and the last");
    assert_eq!((t.pending(), t.receiving(), t.poll_timeout()), (0, 0, None));
    let c = t.stats().by_mad[&MadKey { class: 0x03, attribute: 0x12, method: 0x12 }];
    assert_eq!((c.sent, c.acks, c.segments, c.responses, c.retries), (1 + 3, 3, 8, 1, 0));

    // The SA missed the final ACK and repeats the last segment: the
    // lingering receiver answers it again.
    let last = acks.last().unwrap().clone();
    let mut again = sa_sender(MS, &req);
    let mut segs: Vec<Vec<u8>> = vec![again.poll_transmit(MS).unwrap()];
    again.handle_mad(MS, &from_ack(1, 9, &last)).unwrap();
    segs.extend(std::iter::from_fn(|| again.poll_transmit(MS)));
    assert!(matches!(t.handle_receive(now, seg(segs.pop().unwrap())), Received::Segment { .. }));
    assert_eq!(t.poll_transmit(now).map(|d| d.mad), Some(last.mad));
    // Past the linger time it is the SA agent's business.
    let later = now + RMPP_LINGER;
    assert!(matches!(t.handle_receive(later, seg(segs.pop().unwrap())), Received::Unsolicited(_)));
}

/// An ACK like `model` with another segment and window.
fn from_ack(segment: u32, window: u32, model: &Datagram) -> Vec<u8> {
    let mut m = model.mad.clone();
    crate::mad::rmpp::RmppHeaderRepr::ack(segment, window).emit_bytes(&mut m).unwrap();
    m
}

#[test]
fn until_the_first_segment_the_request_retries_and_then_it_does_not() {
    let mut t = Transactions::new(cfg2(4, 4, 3));
    t.submit_with(1u32, get_table(40), RequestKind::Rmpp(SA_RMPP)).unwrap();
    let first = t.poll_transmit(Duration::ZERO).unwrap();
    assert!(t.handle_timeout(100 * MS).is_empty());
    let retry = t.poll_transmit(100 * MS).unwrap();
    assert_ne!(tid_of(&first), tid_of(&retry));
    // The answer to the first attempt arrives late: it is taken.
    let mut sa = sa_sender(101 * MS, &first);
    let one = sa.poll_transmit(101 * MS).unwrap();
    assert!(matches!(t.handle_receive(101 * MS, seg(one)), Received::Segment { .. }));
    assert_eq!(t.stats().totals().late, 1);
    assert_eq!(t.poll_timeout(), Some(101 * MS + SA_RMPP.total_timeout), "the request's timer is gone");
    assert!(t.handle_timeout(250 * MS).is_empty());
    let out: Vec<Datagram> = std::iter::from_fn(|| t.poll_transmit(250 * MS)).collect();
    assert_eq!(out.len(), 1, "the ACK, no further retry");
    assert_eq!(out[0].mad[3], 0x12);
    assert!(crate::rmpp::is_rmpp_active(&out[0].mad));
    // The second attempt's answer is another transfer: refused.
    let mut other = sa_sender(251 * MS, &retry);
    assert!(matches!(
        t.handle_receive(251 * MS, seg(other.poll_transmit(251 * MS).unwrap())),
        Received::Segment { .. }
    ));
    assert!(t.poll_transmit(251 * MS).is_none(), "nothing acknowledged for it");
    // The rest of the first one completes it.
    sa.handle_mad(252 * MS, &out[0].mad).unwrap();
    let mut done = None;
    let mut now = 252 * MS;
    while done.is_none() {
        now += MS;
        for m in std::iter::from_fn(|| sa.poll_transmit(now)).collect::<Vec<_>>() {
            if let Received::Response { dgram, .. } = t.handle_receive(now, seg(m)) {
                done = Some(dgram);
            }
        }
        while let Some(a) = t.poll_transmit(now) {
            sa.handle_mad(now, &a.mad).unwrap();
        }
    }
    assert_eq!(&done.unwrap().mad[56..], &table(40)[..]);
}

#[test]
fn a_failed_transfer_fails_its_transaction() {
    // The SA aborts.
    let mut t = Transactions::new(cfg2(4, 4, 3));
    t.submit_with(3u32, get_table(9), RequestKind::Rmpp(SA_RMPP)).unwrap();
    let req = t.poll_transmit(Duration::ZERO).unwrap();
    let mut sa = sa_sender(MS, &req);
    t.handle_receive(MS, seg(sa.poll_transmit(MS).unwrap()));
    t.poll_transmit(MS).unwrap();
    for _ in 0..=SA_RMPP.retries {
        let now = sa.poll_timeout().unwrap();
        sa.handle_timeout(now);
    }
    let abort = sa.poll_transmit(Duration::from_secs(1)).unwrap();
    match t.handle_receive(Duration::from_secs(1), seg(abort)) {
        Received::Failed { token: 3, error: TxnError::Rmpp { mad, error } } => {
            assert_eq!(error, RmppError::Aborted { status: crate::mad::rmpp::RmppStatus::TooManyRetries });
            assert_eq!(mad.method, Method::GetTable);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!((t.pending(), t.receiving()), (0, 0));
    assert_eq!(t.stats().totals().failed, 1);

    // The SA goes silent: the receiver's total limit, with an ABORT.
    let mut t = Transactions::new(cfg2(4, 4, 3));
    t.submit_with(4u32, get_table(9), RequestKind::Rmpp(SA_RMPP)).unwrap();
    let req = t.poll_transmit(Duration::ZERO).unwrap();
    let mut sa = sa_sender(MS, &req);
    t.handle_receive(MS, seg(sa.poll_transmit(MS).unwrap()));
    t.poll_transmit(MS).unwrap();
    let limit = MS + SA_RMPP.total_timeout;
    assert_eq!(t.poll_timeout(), Some(limit));
    assert!(t.handle_timeout(limit - MS).is_empty());
    let failed = t.handle_timeout(limit);
    assert!(matches!(&failed[..], [(4, TxnError::Rmpp { error: RmppError::TotalTimeout { .. }, .. })]), "{failed:?}");
    let abort = t.poll_transmit(limit).unwrap();
    assert_eq!(abort.mad[25], 4, "an ABORT");
    assert_eq!(
        sa.handle_mad(limit, &abort.mad),
        Err(RmppError::Aborted { status: crate::mad::rmpp::RmppStatus::TotalTimeTooLong })
    );
}

#[test]
fn plain_answers_complete_as_before() {
    // An RMPP request answered without RMPP (an error status, say).
    let mut t = Transactions::new(cfg2(4, 4, 3));
    t.submit_with(1u32, get_table(1), RequestKind::Rmpp(SA_RMPP)).unwrap();
    let req = t.poll_transmit(Duration::ZERO).unwrap();
    let mut refusal = answer(&req);
    refusal.mad[4] = 0x03;
    assert!(matches!(t.handle_receive(MS, refusal), Received::Response { token: 1, .. }));
    // A plain request answered with RMPP: the first segment is the answer.
    t.submit(2u32, get_table(2)).unwrap();
    let req = t.poll_transmit(MS).unwrap();
    let mut sa = sa_sender(MS, &req);
    match t.handle_receive(2 * MS, seg(sa.poll_transmit(MS).unwrap())) {
        Received::Response { token: 2, dgram } => assert_eq!(dgram.mad.len(), 256),
        other => panic!("{other:?}"),
    }
    assert!(t.poll_transmit(2 * MS).is_none(), "no ACK");
    assert_eq!(t.stats().totals().segments, 0);
}

#[test]
fn rmpp_answers_over_a_lossy_link() {
    use rand::{Rng, SeedableRng};
    for seed in 0..6u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut t = Transactions::new(cfg2(4, 3, 6));
        for tag in 1..=12 {
            t.submit_with(tag, get_table(tag), RequestKind::Rmpp(SA_RMPP)).unwrap();
        }
        let mut senders: HashMap<u32, RmppSender> = HashMap::new();
        type Wire = Vec<(Duration, Datagram)>;
        let (mut to_sa, mut to_t): (Wire, Wire) = (vec![], vec![]);
        let (mut done, mut failed) = (BTreeMap::new(), Vec::new());
        let mut now = Duration::ZERO;
        for step in 0.. {
            assert!(step < 100_000, "seed {seed}: livelock");
            while let Some(d) = t.poll_transmit(now) {
                assert!(t.in_flight_in(MgmtClass::SubnAdm) <= 3, "seed {seed}: window");
                if !rng.gen_bool(0.1) {
                    to_sa.push((now + MS, d));
                }
            }
            for s in senders.values_mut() {
                while let Some(m) = s.poll_transmit(now) {
                    if !rng.gen_bool(0.1) {
                        to_t.push((now + MS + rng.gen_range(Duration::ZERO..2 * MS), seg(m)));
                    }
                }
            }
            if t.pending() == 0 {
                break;
            }
            let next = to_sa
                .iter()
                .chain(&to_t)
                .map(|w| w.0)
                .chain(t.poll_timeout())
                .chain(senders.values().filter_map(|s| s.poll_timeout()))
                .min()
                .expect("something pending");
            now = now.max(next);
            let (due, rest): (Vec<_>, Vec<_>) = to_sa.drain(..).partition(|w| w.0 <= now);
            to_sa = rest;
            for (_, d) in due {
                let tid = tid_of(&d) as u32;
                if crate::rmpp::is_rmpp_active(&d.mad) {
                    if let Some(s) = senders.get_mut(&tid) {
                        let _ = s.handle_mad(now, &d.mad);
                    }
                } else {
                    senders.entry(tid).or_insert_with(|| sa_sender(now, &d));
                }
            }
            let (due, rest): (Vec<_>, Vec<_>) = to_t.drain(..).partition(|w| w.0 <= now);
            to_t = rest;
            for (_, d) in due {
                match t.handle_receive(now, d) {
                    Received::Response { token, dgram } => assert!(done.insert(token, dgram).is_none()),
                    Received::Failed { token, error } => failed.push((token, error)),
                    Received::Segment { .. } | Received::Unsolicited(_) | Received::Stray { .. } => {}
                    Received::Malformed(e) => panic!("{e}"),
                }
            }
            failed.extend(t.handle_timeout(now));
            for s in senders.values_mut() {
                s.handle_timeout(now);
            }
        }
        for (token, error) in &failed {
            assert!(
                matches!(
                    error,
                    TxnError::Rmpp { error: RmppError::Aborted { .. } | RmppError::TotalTimeout { .. }, .. }
                        | TxnError::Timeout { .. }
                ),
                "seed {seed}: {token} failed with {error}"
            );
        }
        assert_eq!(done.len() + failed.len(), 12, "seed {seed}: every request ended once");
        assert!(done.len() >= 10, "seed {seed}: 10% loss each way, most complete: {failed:?}");
        for (tag, d) in &done {
            assert_eq!(&d.mad[56..], &table(*tag)[..], "seed {seed}: table {tag}");
        }
        let resent: u64 = senders.values().map(|s| s.stats().resent).sum();
        assert!(resent > 0, "seed {seed}: segments were lost and sent again");
        let s = t.stats();
        assert!(s.totals().acks > 0 && s.totals().segments > 0);
        assert_eq!((s.in_flight, s.receiving, s.queued), (0, 0, 0));
    }
}
