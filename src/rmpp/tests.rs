//! A sender and a receiver against each other through a lossy in-memory
//! link in virtual time, plus the error paths of each side on its own.

use std::time::Duration;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::mad::rmpp::{RmppHeaderRepr, RmppStatus, RmppType, RMPP_SEGMENT_DATA};
use crate::mad::MAD_SIZE;

const MS: Duration = Duration::from_millis(1);
/// The TID of the request the transfer answers (high bits as the kernel
/// sets them).
const TID: u64 = 0x0000_0007_1234_5678;
/// NodeRecord on the wire: 108 bytes padded to 14 words (IBA 15.2.5.2).
const NODE_RECORD: usize = 112;

/// The 56 bytes every segment of a SubnAdmGetTableResp(NodeRecord)
/// repeats: common header, (blank) RMPP header, SA header.
fn template() -> Vec<u8> {
    let mut t = vec![0u8; 56];
    t[..4].copy_from_slice(&[1, 0x03, 2, 0x92]);
    t[8..16].copy_from_slice(&TID.to_be_bytes());
    t[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    t[44..46].copy_from_slice(&14u16.to_be_bytes());
    t
}

fn cfg() -> RmppConfig {
    RmppConfig {
        window: 8,
        segment_timeout: 50 * MS,
        retries: 4,
        total_timeout: Duration::from_secs(40),
        max_bytes: 1 << 20,
    }
}

/// What the receiver must hand over: the first segment's header (its RMPP
/// bytes are segment 1's) and the payload.
fn expected(payload: &[u8], segments: u32) -> Vec<u8> {
    let mut whole = template();
    let pad = segments as usize * 200 - payload.len();
    let first_len = segments * 220 - pad as u32;
    RmppHeaderRepr::data(1, if segments == 1 { 220 - pad as u32 } else { first_len }, true, segments == 1)
        .emit_bytes(&mut whole)
        .unwrap();
    whole.extend_from_slice(payload);
    whole
}

fn rmpp(mad: &[u8]) -> RmppHeaderRepr {
    RmppHeaderRepr::parse_bytes(mad).unwrap()
}

/// A MAD from the receiver's side with `h` as its RMPP header.
fn from_receiver(h: RmppHeaderRepr) -> Vec<u8> {
    let mut m = vec![0u8; MAD_SIZE];
    m[..56].copy_from_slice(&template());
    m[3] = 0x12;
    h.emit_bytes(&mut m).unwrap();
    m
}

/// What one direction of the link does to each MAD.
#[derive(Debug, Clone, Copy)]
struct Faults {
    loss: f64,
    dup: f64,
    /// Each copy is delivered after 1 ms plus up to this much, so any
    /// jitter reorders a burst.
    jitter: Duration,
}

const CLEAN: Faults = Faults { loss: 0.0, dup: 0.0, jitter: Duration::ZERO };

#[derive(Debug)]
struct Outcome {
    result: Option<Result<Vec<u8>, RmppError>>,
    sender: TransferState,
    sent: SenderStats,
    received: ReceiverStats,
    end: Duration,
}

fn put(
    wire: &mut Vec<(Duration, u64, Vec<u8>)>,
    seq: &mut u64,
    rng: &mut ChaCha8Rng,
    f: Faults,
    now: Duration,
    m: Vec<u8>,
) {
    let copies = if rng.gen_bool(f.loss) {
        0
    } else if rng.gen_bool(f.dup) {
        2
    } else {
        1
    };
    for _ in 0..copies {
        let jitter = if f.jitter.is_zero() { Duration::ZERO } else { rng.gen_range(Duration::ZERO..f.jitter) };
        *seq += 1;
        wire.push((now + MS + jitter, *seq, m.clone()));
    }
}

fn take_due(wire: &mut Vec<(Duration, u64, Vec<u8>)>, now: Duration) -> Vec<Vec<u8>> {
    wire.sort_by_key(|w| (w.0, w.1));
    let n = wire.iter().take_while(|w| w.0 <= now).count();
    wire.drain(..n).map(|w| w.2).collect()
}

/// Runs one transfer of `payload` to its end, stepping virtual time to the
/// next event; panics (naming the seed) if it has not ended in `cap` steps.
fn transfer(seed: u64, payload: &[u8], fwd: Faults, back: Faults, cfg: RmppConfig) -> Outcome {
    let cap = 200_000;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s = RmppSender::new(Duration::ZERO, &template(), payload.to_vec(), cfg).unwrap();
    let mut r = RmppReceiver::new(Duration::ZERO, cfg);
    let (mut to_r, mut to_s) = (Vec::new(), Vec::new());
    let mut seq = 0u64;
    let mut now = Duration::ZERO;
    // The largest NewWindowLast that reached the sender: it may never
    // send past it (or past its first unacknowledged segment).
    let mut granted = 1u32;
    for _ in 0..cap {
        while let Some(m) = s.poll_transmit(now) {
            let h = rmpp(&m);
            if h.rmpp_type == RmppType::Data {
                let n = h.segment_number();
                assert!(n <= granted.max(s.acknowledged() + 1), "seed {seed}: segment {n} beyond window {granted}");
            }
            put(&mut to_r, &mut seq, &mut rng, fwd, now, m);
        }
        while let Some(m) = r.poll_transmit() {
            put(&mut to_s, &mut seq, &mut rng, back, now, m);
        }
        if s.is_done() && r.is_done() {
            break;
        }
        let next = [to_r.iter().map(|w| w.0).min(), to_s.iter().map(|w| w.0).min(), s.poll_timeout(), r.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = next else { break };
        assert!(next >= now, "seed {seed}: time went back");
        now = next;
        for m in take_due(&mut to_r, now) {
            let _ = r.handle_mad(now, &m);
        }
        for m in take_due(&mut to_s, now) {
            let h = rmpp(&m);
            if h.rmpp_type == RmppType::Ack {
                granted = granted.max(h.new_window_last());
            }
            let _ = s.handle_mad(now, &m);
        }
        s.handle_timeout(now);
        r.handle_timeout(now);
        if s.state() != &TransferState::Active && r.state() != &TransferState::Active && to_r.is_empty() {
            // Both ended; what is still on the wire to the sender is moot.
            while s.poll_transmit(now).is_some() {}
            break;
        }
    }
    assert!(
        s.state() != &TransferState::Active && r.state() != &TransferState::Active,
        "seed {seed}: livelock, no end after {cap} steps ({:?} / {:?})",
        s.state(),
        r.state()
    );
    Outcome { result: r.result(), sender: s.state().clone(), sent: s.stats(), received: r.stats(), end: now }
}

fn payload(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xabcdef);
    (0..len).map(|_| rng.gen()).collect()
}

/// Byte-identical, or ended with an error that names its cause.
fn assert_sound(seed: u64, o: &Outcome, payload: &[u8]) {
    let segments = payload.len().div_ceil(200).max(1) as u32;
    match &o.result {
        Some(Ok(bytes)) => assert!(bytes == &expected(payload, segments), "seed {seed}: payload differs"),
        Some(Err(e)) => {
            assert!(
                matches!(e, RmppError::Aborted { .. } | RmppError::TotalTimeout { .. }),
                "seed {seed}: receiver failed with {e}"
            );
            assert!(
                matches!(o.sender, TransferState::Failed(_)),
                "seed {seed}: receiver failed, sender {:?}",
                o.sender
            );
        }
        None => panic!("seed {seed}: the receiver never ended"),
    }
}

#[test]
fn a_clean_link_delivers_every_size() {
    for len in [0, 1, 199, 200, 201, 400, 1000, 8 * 200, 8 * 200 + 1, 5000] {
        let p = payload(len as u64, len);
        let o = transfer(1, &p, CLEAN, CLEAN, cfg());
        assert_sound(1, &o, &p);
        assert!(matches!(o.result, Some(Ok(_))), "{len} bytes: {:?}", o.result);
        assert_eq!(o.sender, TransferState::Done, "{len} bytes");
        let segments = len.div_ceil(200).max(1) as u64;
        assert_eq!((o.sent.sent, o.sent.resent, o.sent.timeouts), (segments, 0, 0), "{len} bytes: no waste");
        assert_eq!(o.received.segments, segments);
    }
}

#[test]
fn the_window_opens_after_the_first_ack() {
    let mut s = RmppSender::new(Duration::ZERO, &template(), vec![7; 20 * 200], cfg()).unwrap();
    assert_eq!(s.segments(), 20);
    let one = s.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(rmpp(&one).segment_number(), 1);
    assert!(s.poll_transmit(Duration::ZERO).is_none(), "a window of one until the first ACK");
    let mut r = RmppReceiver::new(Duration::ZERO, cfg());
    r.handle_mad(MS, &one).unwrap();
    let ack = r.poll_transmit().unwrap();
    let a = rmpp(&ack);
    assert_eq!((a.rmpp_type, a.segment_number(), a.new_window_last()), (RmppType::Ack, 1, 9), "1 + window 8");
    assert!(r.poll_transmit().is_none());
    s.handle_mad(2 * MS, &ack).unwrap();
    let burst: Vec<u32> = std::iter::from_fn(|| s.poll_transmit(2 * MS)).map(|m| rmpp(&m).segment_number()).collect();
    assert_eq!(burst, (2..=9).collect::<Vec<_>>());
}

#[test]
fn acks_copy_the_data_header_with_the_method_flipped() {
    let mut s = RmppSender::new(Duration::ZERO, &template(), vec![1; 300], cfg()).unwrap();
    let mut r = RmppReceiver::new(Duration::ZERO, cfg());
    let seg = s.poll_transmit(Duration::ZERO).unwrap();
    r.handle_mad(MS, &seg).unwrap();
    let ack = r.poll_transmit().unwrap();
    assert_eq!(ack.len(), 256);
    assert_eq!(&ack[..3], &seg[..3]);
    assert_eq!(ack[3], 0x12, "an ACK of a GetTableResp is a GetTable");
    assert_eq!(&ack[8..24], &seg[8..24], "same TID, attribute and modifier");
    assert_eq!(&ack[36..56], &seg[36..56], "the SA header is kept");
    assert!(ack[56..].iter().all(|&b| b == 0), "no data");
    assert_eq!(&ack[24..28], &[1, 2, 0xF9, 0], "version 1, ACK, Active, status 0");
    // The sender's ABORT keeps the data's method.
    let mut s2 = RmppSender::new(Duration::ZERO, &template(), vec![1; 300], cfg()).unwrap();
    s2.handle_mad(MS, &from_receiver(RmppHeaderRepr::ack(3, 9))).unwrap_err();
    let abort = s2.poll_transmit(MS).unwrap();
    assert_eq!((abort[3], rmpp(&abort).rmpp_type), (0x92, RmppType::Abort));
}

#[test]
fn payload_length_follows_the_kernel() {
    // 1300 NodeRecords, a 648-host fabric's table: 145,600 bytes.
    let len = 1300 * NODE_RECORD;
    let mut s = RmppSender::new(Duration::ZERO, &template(), payload(3, len), cfg()).unwrap();
    assert_eq!(s.segments(), 728);
    let first = rmpp(&s.poll_transmit(Duration::ZERO).unwrap());
    assert_eq!((first.flags.first, first.flags.last, first.payload_length()), (true, false, 728 * 220));

    // 964 bytes: 5 segments, 36 bytes of padding in the last.
    let p = payload(4, 964);
    let mut s = RmppSender::new(Duration::ZERO, &template(), p.clone(), cfg()).unwrap();
    let mut segs = vec![s.poll_transmit(Duration::ZERO).unwrap()];
    s.handle_mad(MS, &from_receiver(RmppHeaderRepr::ack(1, 5))).unwrap();
    segs.extend(std::iter::from_fn(|| s.poll_transmit(MS)));
    let lens: Vec<(u32, bool, bool, u32)> = segs
        .iter()
        .map(|m| {
            let h = rmpp(m);
            (h.segment_number(), h.flags.first, h.flags.last, h.payload_length())
        })
        .collect();
    assert_eq!(
        lens,
        vec![
            (1, true, false, 5 * 220 - 36),
            (2, false, false, 0),
            (3, false, false, 0),
            (4, false, false, 0),
            (5, false, true, 184)
        ]
    );
    // The kernel's get_mad_len: header + segments × data - (220 - last).
    assert_eq!(56 + 5 * 200 - (220 - 184), 56 + p.len());
    let data: Vec<u8> = segs.iter().flat_map(|m| m[56..].to_vec()).collect();
    assert_eq!(&data[..964], &p[..], "the data follows each segment's header");
    assert!(data[964..].iter().all(|&b| b == 0), "padding is zero");
    assert!(segs.iter().all(|m| m[..24] == template()[..24] && m[36..56] == template()[36..56]));

    // A header-only answer (no records) is one segment of 20.
    let mut s = RmppSender::new(Duration::ZERO, &template(), Vec::new(), cfg()).unwrap();
    let only = rmpp(&s.poll_transmit(Duration::ZERO).unwrap());
    assert_eq!((only.flags.first, only.flags.last, only.payload_length()), (true, true, 20));
}

#[test]
fn one_segment_and_header_only_answers() {
    for len in [0, NODE_RECORD] {
        let p = payload(9, len);
        let o = transfer(9, &p, CLEAN, CLEAN, cfg());
        let got = o.result.unwrap().unwrap();
        assert_eq!(got.len(), 56 + len);
        assert_eq!(got, expected(&p, 1));
        assert_eq!((o.sent.sent, o.received.segments), (1, 1));
    }
}

#[test]
fn a_segment_sent_short_reads_as_the_kernel_pads_it() {
    let p = payload(11, 112);
    let mut s = RmppSender::new(Duration::ZERO, &template(), p.clone(), cfg()).unwrap();
    let mut seg = s.poll_transmit(Duration::ZERO).unwrap();
    seg.truncate(56 + 112);
    let mut r = RmppReceiver::new(Duration::ZERO, cfg());
    r.handle_mad(Duration::ZERO, &seg).unwrap();
    assert_eq!(r.result().unwrap().as_ref().unwrap(), &expected(&p, 1));
    // Shorter than the SA header: refused, and the receiver waits on.
    let mut r = RmppReceiver::new(Duration::ZERO, cfg());
    assert!(r.handle_mad(Duration::ZERO, &seg[..40]).is_err());
    assert!(r.result().is_none());
}

#[test]
fn a_648_host_node_table() {
    let p = payload(648, 1300 * NODE_RECORD);
    let big = RmppConfig { window: 64, ..cfg() };
    let o = transfer(648, &p, CLEAN, CLEAN, big);
    assert_sound(648, &o, &p);
    assert_eq!(o.sender, TransferState::Done);
    assert_eq!(o.sent.sent, 728);
    // 12 windows of 64 after segment 1: a round trip (2 ms) per ACK.
    assert!(o.end <= 30 * MS, "{:?}", o.end);

    let lossy = Faults { loss: 0.02, dup: 0.02, jitter: 3 * MS };
    let o = transfer(649, &p, lossy, lossy, RmppConfig { retries: 8, ..big });
    assert_sound(649, &o, &p);
    assert!(matches!(o.result, Some(Ok(_))), "2% loss: {:?}", o.result.map(|r| r.map(|b| b.len())));
    assert!(
        o.sent.resent > 0 && o.received.duplicates > 0 && o.received.out_of_order > 0,
        "{:?} {:?}",
        o.sent,
        o.received
    );
}

#[test]
fn lost_duplicated_and_reordered_segments_and_acks() {
    let p = payload(5, 60 * 200 + 17);
    let f = Faults { loss: 0.1, dup: 0.1, jitter: 4 * MS };
    let mut completed = 0;
    for seed in 0..20 {
        let o = transfer(seed, &p, f, f, RmppConfig { retries: 10, ..cfg() });
        assert_sound(seed, &o, &p);
        completed += u32::from(matches!(o.result, Some(Ok(_))));
    }
    assert!(completed >= 18, "10% loss with 10 retries should nearly always complete: {completed}/20");
}

#[test]
fn when_every_ack_is_lost_the_sender_gives_up_with_abort() {
    let p = payload(6, 30 * 200);
    // Every ACK after the first few dropped: the sender retries and gives up.
    let o = transfer(6, &p, CLEAN, Faults { loss: 1.0, ..CLEAN }, cfg());
    assert!(
        matches!(o.sender, TransferState::Failed(RmppError::TooManyRetries { segment: 1, attempts: 5 })),
        "{:?}",
        o.sender
    );
    assert_eq!(o.result, Some(Err(RmppError::Aborted { status: RmppStatus::TooManyRetries })), "the ABORT arrived");
    assert_eq!(o.sent.sent, 5, "segment 1, four times more");
}

#[test]
fn a_dead_sender_leaves_the_receiver_to_its_total_limit() {
    let mut s = RmppSender::new(Duration::ZERO, &template(), vec![1; 1000], cfg()).unwrap();
    let mut r = RmppReceiver::new(Duration::ZERO, cfg());
    r.handle_mad(MS, &s.poll_transmit(Duration::ZERO).unwrap()).unwrap();
    r.poll_transmit().unwrap();
    assert_eq!(r.poll_timeout(), Some(Duration::from_secs(40)));
    r.handle_timeout(Duration::from_secs(39));
    assert_eq!(r.state(), &TransferState::Active);
    r.handle_timeout(Duration::from_secs(40));
    assert_eq!(r.result(), Some(Err(RmppError::TotalTimeout { limit: Duration::from_secs(40) })));
    let abort = rmpp(&r.poll_transmit().unwrap());
    assert_eq!((abort.rmpp_type, abort.status), (RmppType::Abort, RmppStatus::TotalTimeTooLong));
    assert!(r.is_done() && r.poll_timeout().is_none());

    // The sender's own total limit, however many ACKs keep it alive.
    let c = RmppConfig { total_timeout: 100 * MS, ..cfg() };
    let mut s = RmppSender::new(Duration::ZERO, &template(), vec![1; 1000], c).unwrap();
    s.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(s.poll_timeout(), Some(50 * MS));
    s.handle_timeout(100 * MS);
    assert_eq!(s.state(), &TransferState::Failed(RmppError::TotalTimeout { limit: 100 * MS }));
    assert_eq!(rmpp(&s.poll_transmit(100 * MS).unwrap()).status, RmppStatus::TotalTimeTooLong);
    assert!(s.is_done() && s.poll_transmit(100 * MS).is_none());
}

#[test]
fn stop_and_abort_end_the_sender() {
    let start = || {
        let mut s = RmppSender::new(Duration::ZERO, &template(), vec![1; 1000], cfg()).unwrap();
        s.poll_transmit(Duration::ZERO).unwrap();
        s
    };
    let mut s = start();
    let e = s.handle_mad(MS, &from_receiver(RmppHeaderRepr::stop(RmppStatus::ResourcesExhausted))).unwrap_err();
    assert_eq!(e, RmppError::Stopped { status: RmppStatus::ResourcesExhausted });
    assert!(s.poll_transmit(MS).is_none(), "a STOP is not answered");
    assert!(s.is_done());
    // Later MADs change nothing.
    s.handle_mad(2 * MS, &from_receiver(RmppHeaderRepr::ack(1, 9))).unwrap();
    assert_eq!(s.state(), &TransferState::Failed(RmppError::Stopped { status: RmppStatus::ResourcesExhausted }));

    let mut s = start();
    let e = s.handle_mad(MS, &from_receiver(RmppHeaderRepr::abort(RmppStatus::TotalTimeTooLong))).unwrap_err();
    assert_eq!(e, RmppError::Aborted { status: RmppStatus::TotalTimeTooLong });
    assert!(e.to_string().contains("total time too long"), "{e}");
    assert!(s.poll_transmit(MS).is_none() && s.poll_timeout().is_none());

    // A STOP or ABORT with a status it may not carry: ABORT 124 back.
    for bad in [RmppHeaderRepr::stop(RmppStatus::Normal), RmppHeaderRepr::abort(RmppStatus::ResourcesExhausted)] {
        let mut s = start();
        assert!(matches!(s.handle_mad(MS, &from_receiver(bad)), Err(RmppError::IllegalStatus { .. })));
        assert_eq!(rmpp(&s.poll_transmit(MS).unwrap()).status, RmppStatus::IllegalStatus);
    }
}

#[test]
fn the_sender_refuses_bad_acks() {
    let start = || {
        let mut s = RmppSender::new(Duration::ZERO, &template(), vec![1; 2000], cfg()).unwrap();
        s.poll_transmit(Duration::ZERO).unwrap();
        s
    };
    let cases: [(RmppHeaderRepr, RmppStatus); 4] = [
        (RmppHeaderRepr::ack(1, 0), RmppStatus::NewWindowLastTooSmall),
        (RmppHeaderRepr::ack(2, 9), RmppStatus::SegmentNumberTooBig),
        (RmppHeaderRepr { status: RmppStatus::Unspecified, ..RmppHeaderRepr::ack(1, 9) }, RmppStatus::IllegalStatus),
        (RmppHeaderRepr { rmpp_type: RmppType::Unknown(9), ..RmppHeaderRepr::ack(1, 9) }, RmppStatus::BadType),
    ];
    for (h, status) in cases {
        let mut s = start();
        let e = s.handle_mad(MS, &from_receiver(h)).unwrap_err();
        assert_eq!(e.abort_status(), Some(status), "{e}");
        assert_eq!(rmpp(&s.poll_transmit(MS).unwrap()).status, status);
        assert!(matches!(s.state(), TransferState::Failed(_)));
    }
    let mut s = start();
    let e = s.handle_mad(MS, &from_receiver(RmppHeaderRepr { version: 2, ..RmppHeaderRepr::ack(1, 9) })).unwrap_err();
    assert_eq!(e, RmppError::UnsupportedVersion { version: 2 });

    // Not this transfer's, not active, too short, or DATA: refused, no harm.
    let mut s = start();
    let mut other = from_receiver(RmppHeaderRepr::ack(1, 9));
    other[15] ^= 1;
    assert!(matches!(s.handle_mad(MS, &other), Err(RmppError::OtherTransfer { .. })));
    assert_eq!(s.handle_mad(MS, &from_receiver(RmppHeaderRepr::INACTIVE)), Err(RmppError::NotActive));
    assert!(matches!(s.handle_mad(MS, &[0u8; 30]), Err(RmppError::Wire(_))));
    let data = from_receiver(RmppHeaderRepr::data(1, 20, true, true));
    assert!(matches!(s.handle_mad(MS, &data), Err(RmppError::Unexpected { .. })));
    assert_eq!(s.state(), &TransferState::Active);
    assert!(s.poll_transmit(MS).is_none());
    // An old ACK after a newer one is ignored.
    s.handle_mad(MS, &from_receiver(RmppHeaderRepr::ack(1, 9))).unwrap();
    while s.poll_transmit(MS).is_some() {}
    s.handle_mad(MS, &from_receiver(RmppHeaderRepr::ack(5, 13))).unwrap();
    s.handle_mad(MS, &from_receiver(RmppHeaderRepr::ack(1, 9))).unwrap();
    assert_eq!(s.acknowledged(), 5);
    assert_eq!(s.state(), &TransferState::Active);
}

#[test]
fn a_timeout_goes_back_to_the_first_unacknowledged_segment() {
    let mut s = RmppSender::new(Duration::ZERO, &template(), vec![1; 10 * 200], cfg()).unwrap();
    s.poll_transmit(Duration::ZERO).unwrap();
    s.handle_mad(MS, &from_receiver(RmppHeaderRepr::ack(1, 9))).unwrap();
    let sent: Vec<u32> = std::iter::from_fn(|| s.poll_transmit(MS)).map(|m| rmpp(&m).segment_number()).collect();
    assert_eq!(sent, (2..=9).collect::<Vec<_>>());
    // The receiver got 2..4 and says so (a gap ACK).
    s.handle_mad(2 * MS, &from_receiver(RmppHeaderRepr::ack(4, 9))).unwrap();
    assert!(s.poll_transmit(2 * MS).is_none(), "no go-back before the timeout");
    assert_eq!(s.poll_timeout(), Some(52 * MS), "progress restarts the ACK wait");
    s.handle_timeout(52 * MS);
    let again: Vec<u32> = std::iter::from_fn(|| s.poll_transmit(52 * MS)).map(|m| rmpp(&m).segment_number()).collect();
    assert_eq!(again, (5..=9).collect::<Vec<_>>());
    assert_eq!((s.stats().resent, s.stats().timeouts), (5, 1));
}

#[test]
fn the_receiver_refuses_inconsistent_segments() {
    let seg = |h: RmppHeaderRepr| {
        let mut m = vec![0u8; MAD_SIZE];
        m[..56].copy_from_slice(&template());
        h.emit_bytes(&mut m).unwrap();
        m
    };
    let started = || {
        let mut r = RmppReceiver::new(Duration::ZERO, cfg());
        r.handle_mad(MS, &seg(RmppHeaderRepr::data(1, 3 * 220, true, false))).unwrap();
        r.poll_transmit().unwrap();
        r
    };
    let cases: Vec<(Option<RmppHeaderRepr>, RmppHeaderRepr, RmppStatus)> = vec![
        // Segment 1 without First, segment 2 with it.
        (None, RmppHeaderRepr::data(1, 660, false, false), RmppStatus::InconsistentFirstSegment),
        (
            Some(RmppHeaderRepr::data(1, 660, true, false)),
            RmppHeaderRepr::data(2, 0, true, false),
            RmppStatus::InconsistentFirstSegment,
        ),
        // Last at 2 when the first PayloadLength says 3 segments.
        (
            Some(RmppHeaderRepr::data(1, 660, true, false)),
            RmppHeaderRepr::data(2, 220, false, true),
            RmppStatus::InconsistentLastLength,
        ),
        // A last PayloadLength that cannot be (more than a segment, less than the SA header).
        (None, RmppHeaderRepr::data(1, 221, true, true), RmppStatus::InconsistentLastLength),
        (None, RmppHeaderRepr::data(1, 19, true, true), RmppStatus::InconsistentLastLength),
        (
            None,
            RmppHeaderRepr { version: 3, ..RmppHeaderRepr::data(1, 20, true, true) },
            RmppStatus::UnsupportedVersion,
        ),
        (
            None,
            RmppHeaderRepr { rmpp_type: RmppType::Unknown(0), ..RmppHeaderRepr::data(1, 20, true, true) },
            RmppStatus::BadType,
        ),
        (
            None,
            RmppHeaderRepr { status: RmppStatus::Unspecified, ..RmppHeaderRepr::data(1, 20, true, true) },
            RmppStatus::IllegalStatus,
        ),
    ];
    for (before, bad, status) in cases {
        let mut r = match before {
            Some(_) => started(),
            None => RmppReceiver::new(Duration::ZERO, cfg()),
        };
        let e = r.handle_mad(2 * MS, &seg(bad)).unwrap_err();
        assert_eq!(e.abort_status(), Some(status), "{e}");
        assert!(matches!(r.result(), Some(Err(_))));
        // Before segment 1 too: the ABORT goes to the broken MAD's sender.
        let abort = r.poll_transmit().expect("an ABORT");
        let a = rmpp(&abort);
        assert_eq!((a.rmpp_type, a.status), (RmppType::Abort, status));
        assert_eq!((abort[3], &abort[8..16]), (0x12, &TID.to_be_bytes()[..]));
        assert!(r.poll_transmit().is_none() && r.is_done());
    }
    // Missing Last: segment 3 of 3 without it.
    let mut r = started();
    r.handle_mad(2 * MS, &seg(RmppHeaderRepr::data(2, 0, false, false))).unwrap();
    let e = r.handle_mad(2 * MS, &seg(RmppHeaderRepr::data(3, 0, false, false))).unwrap_err();
    assert!(matches!(e, RmppError::InconsistentLast { segment: 3, last: false, .. }), "{e}");

    // An ABORT from the sender ends it, unanswered.
    let mut r = started();
    let e = r.handle_mad(2 * MS, &seg(RmppHeaderRepr::abort(RmppStatus::TooManyRetries))).unwrap_err();
    assert_eq!(e, RmppError::Aborted { status: RmppStatus::TooManyRetries });
    assert!(r.poll_transmit().is_none() && r.is_done());

    // ACK, STOP, short segments and other transfers are refused, harmlessly.
    let mut r = started();
    assert!(matches!(r.handle_mad(2 * MS, &seg(RmppHeaderRepr::ack(1, 2))), Err(RmppError::Unexpected { .. })));
    assert!(matches!(
        r.handle_mad(2 * MS, &seg(RmppHeaderRepr::data(2, 0, false, false))[..200]),
        Err(RmppError::Wire(_))
    ));
    let mut other = seg(RmppHeaderRepr::data(2, 0, false, false));
    other[3] = 0x81;
    assert!(matches!(r.handle_mad(2 * MS, &other), Err(RmppError::OtherTransfer { method: 0x81, .. })));
    assert_eq!((r.state(), r.received()), (&TransferState::Active, 1));
}

#[test]
fn the_receiver_answers_gaps_and_repeats_with_what_it_has() {
    let mut s = RmppSender::new(Duration::ZERO, &template(), payload(8, 5 * 200), cfg()).unwrap();
    let mut r = RmppReceiver::new(Duration::ZERO, cfg());
    let one = s.poll_transmit(Duration::ZERO).unwrap();
    r.handle_mad(MS, &one).unwrap();
    s.handle_mad(MS, &r.poll_transmit().unwrap()).unwrap();
    let segs: Vec<Vec<u8>> = std::iter::from_fn(|| s.poll_transmit(MS)).collect();
    assert_eq!(segs.len(), 4);
    let acks = |r: &mut RmppReceiver| -> Vec<(u32, u32)> {
        std::iter::from_fn(|| r.poll_transmit())
            .map(|m| (rmpp(&m).segment_number(), rmpp(&m).new_window_last()))
            .collect()
    };
    // 3 before 2: dropped, ACK of 1.
    r.handle_mad(2 * MS, &segs[1]).unwrap();
    assert_eq!(acks(&mut r), vec![(1, 9)]);
    r.handle_mad(2 * MS, &segs[0]).unwrap();
    assert_eq!(acks(&mut r), vec![], "in the middle of a window: no ACK");
    // 1 again: already acknowledged, so the ACK was lost.
    r.handle_mad(2 * MS, &one).unwrap();
    assert_eq!(acks(&mut r), vec![(2, 9)]);
    for m in &segs[1..] {
        r.handle_mad(3 * MS, m).unwrap();
    }
    assert_eq!(acks(&mut r), vec![(5, 9)], "the last segment is acknowledged");
    assert_eq!(r.result().unwrap().unwrap()[56..], payload(8, 1000)[..]);
    // After the end, a repeat gets the final ACK again (it was lost).
    r.handle_mad(4 * MS, &segs[3]).unwrap();
    assert_eq!(acks(&mut r), vec![(5, 9)]);
    assert_eq!(r.take_result().map(|x| x.map(|b| b.len())), Some(Ok(1056)));
    assert_eq!(r.take_result(), None, "taken");
    let st = r.stats();
    assert_eq!((st.segments, st.duplicates, st.out_of_order), (5, 2, 1));
}

#[test]
fn helpers_read_the_class_and_flag() {
    let seg = {
        let mut m = vec![0u8; MAD_SIZE];
        m[..56].copy_from_slice(&template());
        RmppHeaderRepr::data(1, 20, true, true).emit_bytes(&mut m).unwrap();
        m
    };
    assert!(is_rmpp_active(&seg));
    assert!(!is_rmpp_active(&seg[..30]));
    assert!(!is_rmpp_active(&template()), "the template's RMPP header is blank");
    let mut smp = seg.clone();
    smp[1] = 0x81;
    assert!(!is_rmpp_active(&smp), "bytes 24..36 of an SMP are M_Key");
    assert!(class_uses_rmpp(MgmtClass::from(0x30)) && !class_uses_rmpp(MgmtClass::Perf));
    assert_eq!((data_offset(MgmtClass::SubnAdm), data_offset(MgmtClass::from(0x40))), (56, 40));
    assert!(RmppSender::new(Duration::ZERO, &[0; 35], vec![], cfg()).is_err());
    assert!(RmppSender::new(Duration::ZERO, &[0; 256], vec![], cfg()).is_err());
    assert_eq!(RMPP_SEGMENT_DATA, 220);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever the seed and fault rates, a transfer ends, and ends sound.
    #[test]
    fn any_seed_ends_sound(seed in any::<u64>(), len in 0usize..6000, loss in 0.0f64..0.3, dup in 0.0f64..0.3) {
        let p = payload(seed, len);
        let f = Faults { loss, dup, jitter: 3 * MS };
        let o = transfer(seed, &p, f, f, cfg());
        assert_sound(seed, &o, &p);
    }

    /// Neither core panics on arbitrary bytes, before or during a transfer.
    #[test]
    fn handle_mad_never_panics(mads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..20)) {
        let mut s = RmppSender::new(Duration::ZERO, &template(), vec![5; 3000], cfg()).unwrap();
        let mut r = RmppReceiver::new(Duration::ZERO, cfg());
        let mut started = RmppReceiver::new(Duration::ZERO, cfg());
        started.handle_mad(Duration::ZERO, &s.poll_transmit(Duration::ZERO).unwrap()).unwrap();
        for (i, mut m) in mads.into_iter().enumerate() {
            let now = MS * i as u32;
            let _ = s.handle_mad(now, &m);
            let _ = r.handle_mad(now, &m);
            // Also as if it were one of ours: our class, TID and method.
            if m.len() >= 24 {
                m[..4].copy_from_slice(&[1, 3, 2, 0x92]);
                m[8..16].copy_from_slice(&TID.to_be_bytes());
            }
            let _ = started.handle_mad(now, &m);
            if m.len() >= 4 {
                m[3] = 0x12;
            }
            let _ = s.handle_mad(now, &m);
            s.handle_timeout(now);
            while s.poll_transmit(now).is_some() {}
            while r.poll_transmit().is_some() || started.poll_transmit().is_some() {}
        }
    }
}

#[test]
fn segmentation_and_payload_lengths() {
    // SA: 56-byte header, 200 bytes of data per segment, 220 of payload.
    let none = Segmentation::new(56, 0).unwrap();
    assert_eq!((none.segments, none.payload_length(1)), (1, 20), "a header-only answer");
    let full = Segmentation::new(56, 200).unwrap();
    assert_eq!((full.segments, full.pad, full.payload_length(1)), (1, 0, 220));
    let two = Segmentation::new(56, 201).unwrap();
    assert_eq!((two.segments, two.pad), (2, 199));
    assert_eq!((two.payload_length(1), two.payload_length(2)), (241, 21), "the total first, the last its share");
    // The kernel's 5-segment example (mad::rmpp tests): PayloadLength 0x428.
    let five = Segmentation::new(56, 5 * 200 - 36).unwrap();
    assert_eq!(
        (five.segments, five.payload_length(1), five.payload_length(3), five.payload_length(5)),
        (5, 0x428, 0, 184)
    );
    // Other classes: device management repeats 64 bytes.
    assert_eq!(Segmentation::new(64, 192).unwrap().payload_length(1), 220);
    assert!(matches!(Segmentation::new(35, 1), Err(RmppError::Template { len: 35 })));
    assert!(matches!(Segmentation::new(256, 1), Err(RmppError::Template { len: 256 })));
    // The sender's segments say the same.
    let mut s = RmppSender::new(Duration::ZERO, &template(), vec![7; 201], cfg()).unwrap();
    let first = s.poll_transmit(Duration::ZERO).unwrap();
    assert_eq!(RmppHeaderRepr::parse_bytes(&first).unwrap().payload_length(), 241);
}

#[test]
fn a_receiver_stops_transfers_past_its_limit() {
    let limit = RmppConfig { max_bytes: 1000, ..cfg() };
    // Exactly the limit announced: taken whole.
    let o = transfer(1, &payload(1, 1000), CLEAN, CLEAN, limit);
    assert_eq!(o.result.as_ref().map(|r| r.as_ref().map(|m| m.len())), Some(Ok(56 + 1000)));
    // One byte more announced by segment 1: STOP with ResX at once, before
    // any data is kept, and the sender ends on it.
    let mut s = RmppSender::new(Duration::ZERO, &template(), payload(2, 1001), limit).unwrap();
    let mut r = RmppReceiver::new(Duration::ZERO, limit);
    let first = s.poll_transmit(Duration::ZERO).unwrap();
    let e = r.handle_mad(Duration::ZERO, &first).unwrap_err();
    assert_eq!(e, RmppError::TooLarge { bytes: 1001, limit: 1000 });
    assert!(matches!(r.state(), TransferState::Failed(RmppError::TooLarge { .. })));
    let stop = r.poll_transmit().unwrap();
    let h = rmpp(&stop);
    assert_eq!((h.rmpp_type, h.status), (RmppType::Stop, RmppStatus::ResourcesExhausted));
    assert_eq!(stop[3], 0x12, "to the sender, method flipped");
    assert!(r.poll_transmit().is_none());
    assert!(s.handle_mad(Duration::ZERO, &stop).is_err());
    assert_eq!(s.state(), &TransferState::Failed(RmppError::Stopped { status: RmppStatus::ResourcesExhausted }));
    // No length announced (PayloadLength 0 on segment 1): stopped once the
    // data passes the limit, at segment 6 of 200 bytes each.
    let mut s =
        RmppSender::new(Duration::ZERO, &template(), payload(3, 3000), RmppConfig { window: 64, ..limit }).unwrap();
    let mut r = RmppReceiver::new(Duration::ZERO, RmppConfig { window: 64, ..limit });
    let mut stopped_at = None;
    for n in 1..=15u32 {
        let mut seg = loop {
            let m = s.poll_transmit(Duration::ZERO).expect("the window lets segments out");
            if rmpp(&m).rmpp_type == RmppType::Data {
                break m;
            }
        };
        if n == 1 {
            seg[32..36].fill(0);
        }
        let res = r.handle_mad(Duration::ZERO, &seg);
        while let Some(back) = r.poll_transmit() {
            let _ = s.handle_mad(Duration::ZERO, &back);
            if rmpp(&back).rmpp_type == RmppType::Stop {
                stopped_at = Some(n);
            }
        }
        if let Err(e) = res {
            assert_eq!(e, RmppError::TooLarge { bytes: 1200, limit: 1000 });
            break;
        }
    }
    assert_eq!(stopped_at, Some(6));
    assert!(r.result().is_some_and(|r| r.is_err()));
}
