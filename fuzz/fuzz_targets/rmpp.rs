#![no_main]
//! RMPP (IBA 13.6) under attack: a real sender and receiver joined by a
//! link the input drops, repeats and reorders, with forged DATA, ACK,
//! STOP and ABORT MADs and raw bytes thrown at either side, and time
//! jumping about. Neither panics, and both keep their documented
//! promises (see the `ibsm::rmpp` module docs).
//!
//! # Input
//! Bytes 0-3 set the transfer: byte 0 the class (SA 56-byte header,
//! device management 64, vendor range 2 40) and the receiver's window
//! (bits 2-5); bytes 1-2 the payload length; byte 3 the ACK timeout,
//! retries, total time and the receiver's `max_bytes`. Then operations,
//! an opcode byte each (bits 0-2, flags in 3-7) and what it reads after:
//! 0 the sender sends up to n segments onto the link (bit 3: all lost);
//! 1 the link delivers one segment (bit 3: and keeps a copy);
//! 2 the link delivers one ACK back (bit 3: and keeps a copy);
//! 3 a forged DATA segment to the receiver; 4 raw bytes to the receiver;
//! 5 a forged ACK/STOP/ABORT to the sender; 6 raw bytes to the sender;
//! 7 time passes (bit 3: to the next timeout), then both time out.
//! Finally the link delivers everything in order, time jumps from timeout
//! to timeout, and both sides must end.
//!
//! # What is checked
//! Sender: every MAD is 256 bytes, the template's header with an active
//! version-1 RMPP header; DATA segment n has First iff n = 1, Last iff
//! n = the count, the kernel's PayloadLength, the payload's bytes, comes
//! after n-1 was sent, and never past the larger of what ACKs granted and
//! the first unacknowledged segment; it stops sending once the transfer
//! ends, with exactly the ABORT its error calls for; it completes only
//! when every segment is acknowledged; its counters match what it sent.
//! Receiver: ACKs copy the header of a MAD it received with the method's
//! response bit flipped, never acknowledge more than arrived, and
//! neither their segment nor their window goes back; one ABORT at most,
//! the one its error calls for (a STOP when out of room); the result,
//! never more than `max_bytes` of data, is the first segment's header
//! and every segment's data cut to the last PayloadLength, as many
//! segments as the first PayloadLength announced, and exactly the
//! sender's payload when nothing forged reached it. Both: after
//! `handle_timeout(now)` the next timeout is later; an ended transfer
//! stays ended.

use std::collections::HashSet;
use std::time::Duration;

use ibsm::mad::rmpp::{RmppHeaderRepr, RmppStatus, RmppType, RMPP_DATA_OFFSET, RMPP_SEGMENT_DATA};
use ibsm::mad::MgmtClass;
use ibsm::rmpp::{data_offset, RmppConfig, RmppError, RmppReceiver, RmppSender, TransferState};
use libfuzzer_sys::fuzz_target;

const MAD: usize = 256;
const TID: u64 = 0x0000_0001_0000_00AB;

/// Reads the input; past its end every byte is 0.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.byte(), self.byte()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        b.to_vec()
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn rmpp(mad: &[u8]) -> RmppHeaderRepr {
    RmppHeaderRepr::parse_bytes(mad).expect("a whole MAD")
}

fn failed_abort(state: &TransferState) -> Option<RmppStatus> {
    match state {
        TransferState::Failed(e) => e.abort_status(),
        _ => None,
    }
}

/// The sender and what it promised so far.
struct Tx {
    s: RmppSender,
    template: Vec<u8>,
    payload: Vec<u8>,
    /// Data bytes per segment.
    seg_data: usize,
    highest_sent: u32,
    data_sent: u64,
    resent: u64,
    /// The largest NewWindowLast of an ACK it took (1 before any).
    granted: u32,
    acknowledged: u32,
    aborted: bool,
    /// Something other than the receiver's own MADs reached it.
    forged: bool,
    /// Segment 1's header as sent.
    first_header: Option<Vec<u8>>,
}

impl Tx {
    fn state_active(&self) -> bool {
        *self.s.state() == TransferState::Active
    }

    fn handle(&mut self, now: Duration, mad: &[u8]) {
        let before = self.s.state().clone();
        let r = self.s.handle_mad(now, mad);
        if let (Ok(()), Ok(h)) = (&r, RmppHeaderRepr::parse_bytes(mad)) {
            if h.rmpp_type == RmppType::Ack && before == TransferState::Active {
                self.granted = self.granted.max(h.new_window_last());
            }
        }
        if before != TransferState::Active {
            assert_eq!(*self.s.state(), before, "an ended send stays ended");
        }
        if let Err(e) = &r {
            // A refusal that did not end the transfer changes nothing.
            if let TransferState::Failed(f) = self.s.state() {
                if before == TransferState::Active {
                    assert_eq!(f, e, "the error returned is the one the send ended with");
                }
            }
        }
        self.check();
    }

    fn check(&mut self) {
        let a = self.s.acknowledged();
        assert!(a >= self.acknowledged, "acknowledged went back from {} to {a}", self.acknowledged);
        assert!(a <= self.s.segments() && a <= self.highest_sent);
        self.acknowledged = a;
        if *self.s.state() == TransferState::Done {
            assert_eq!(a, self.s.segments(), "done before every segment was acknowledged");
        }
        let st = self.s.stats();
        assert_eq!((st.sent, st.resent), (self.data_sent, self.resent), "sender counters");
    }

    /// Checks one MAD the sender sent.
    fn sent(&mut self, m: &[u8]) {
        assert_eq!(m.len(), MAD);
        let hdr = self.template.len();
        assert_eq!(&m[..24], &self.template[..24], "the template's common header");
        assert_eq!(&m[RMPP_DATA_OFFSET..hdr], &self.template[RMPP_DATA_OFFSET..], "the template's class header");
        let h = rmpp(m);
        assert!(h.flags.active && h.version == 1, "{h:?}");
        assert!(!self.aborted, "a MAD after the ABORT");
        match h.rmpp_type {
            RmppType::Data => {
                assert!(self.state_active(), "a segment after the transfer ended");
                assert_eq!(h.status, RmppStatus::Normal);
                let (n, count) = (h.segment_number(), self.s.segments());
                assert!((1..=count).contains(&n), "segment {n} of {count}");
                assert!(n <= self.highest_sent + 1, "segment {n} before {}", self.highest_sent + 1);
                let window = self.granted.max(self.s.acknowledged() + 1);
                assert!(n <= window, "segment {n} past the window {window}");
                assert_eq!((h.flags.first, h.flags.last), (n == 1, n == count), "segment {n} of {count}");
                let pad = count as usize * self.seg_data - self.payload.len();
                let want = if n == count {
                    RMPP_SEGMENT_DATA - pad
                } else if n == 1 {
                    count as usize * RMPP_SEGMENT_DATA - pad
                } else {
                    0
                };
                assert_eq!(h.payload_length() as usize, want, "PayloadLength of segment {n}");
                let start = (n as usize - 1) * self.seg_data;
                let end = (start + self.seg_data).min(self.payload.len());
                let data = &m[hdr..];
                assert_eq!(&data[..end - start], &self.payload[start..end], "segment {n}'s data");
                assert!(data[end - start..].iter().all(|&b| b == 0), "padding is zero");
                if n <= self.highest_sent {
                    self.resent += 1;
                }
                if n == 1 {
                    self.first_header = Some(m[..hdr].to_vec());
                }
                self.highest_sent = self.highest_sent.max(n);
                self.data_sent += 1;
            }
            RmppType::Abort => {
                assert_eq!(Some(h.status), failed_abort(self.s.state()), "the ABORT its error calls for");
                self.aborted = true;
            }
            t => panic!("a sender sent {t:?}"),
        }
    }

    fn poll(&mut self, now: Duration) -> Option<Vec<u8>> {
        let m = self.s.poll_transmit(now)?;
        self.sent(&m);
        self.check();
        Some(m)
    }

    fn timeout(&mut self, now: Duration) {
        let before = self.s.state().clone();
        self.s.handle_timeout(now);
        if before != TransferState::Active {
            assert_eq!(*self.s.state(), before);
        }
        if let Some(t) = self.s.poll_timeout() {
            assert!(t > now, "sender: handle_timeout({now:?}) left {t:?}");
        }
        self.check();
    }
}

/// The receiver and what it promised so far.
struct Rx {
    r: RmppReceiver,
    /// Common headers of every MAD it was given, method bit flipped.
    heard: HashSet<Vec<u8>>,
    /// The first segment it took: header, PayloadLength.
    first: Option<(Vec<u8>, u32)>,
    received: u32,
    last_ack: (u32, u32),
    aborted: bool,
    /// Something other than the sender's own segments reached it.
    forged: bool,
    /// The result once done.
    result: Option<Vec<u8>>,
    max_bytes: usize,
}

impl Rx {
    fn handle(&mut self, now: Duration, mad: &[u8], back: &mut Vec<Vec<u8>>) {
        if mad.len() >= 24 {
            let mut h = mad[..24].to_vec();
            h[3] ^= 0x80;
            self.heard.insert(h);
        }
        let before = self.r.state().clone();
        let res = self.r.handle_mad(now, mad);
        if before != TransferState::Active {
            assert_eq!(*self.r.state(), before, "an ended receive stays ended");
        } else if let (TransferState::Failed(f), Err(e)) = (self.r.state(), &res) {
            assert_eq!(f, e, "the error returned is the one the receive ended with");
        }
        let got = self.r.received();
        assert!(got >= self.received, "received went back");
        if self.received == 0 && got > 0 {
            // `mad` was segment 1.
            let h = rmpp(mad);
            assert!(h.flags.first && h.segment_number() == 1, "{h:?}");
            let class = MgmtClass::from(mad[1]);
            self.first = Some((mad[..data_offset(class).min(mad.len())].to_vec(), h.payload_length()));
        }
        if got > self.received {
            assert!(res.is_ok(), "a segment taken but refused: {res:?}");
            assert_eq!(got, self.received + 1, "one segment at a time");
        }
        self.received = got;
        if before == TransferState::Active && *self.r.state() == TransferState::Done {
            self.completed(rmpp(mad).payload_length());
        }
        self.drain(back);
    }

    /// The transfer just completed with a segment of PayloadLength `last`.
    fn completed(&mut self, last: u32) {
        let (header, first_len) = self.first.clone().expect("done without segment 1");
        let result = match self.r.result() {
            Some(Ok(r)) => r,
            other => panic!("done without a result: {other:?}"),
        };
        let hdr = header.len();
        let class_header = (hdr - RMPP_DATA_OFFSET) as u32;
        assert!(last >= class_header && last <= RMPP_SEGMENT_DATA as u32, "last PayloadLength {last}");
        assert_eq!(&result[..hdr], &header[..], "the result starts with segment 1's header");
        let seg_data = MAD - hdr;
        let n = self.received as usize;
        assert_eq!(result.len(), hdr + (n - 1) * seg_data + (last - class_header) as usize, "{n} segments");
        if first_len != 0 {
            let announced = (first_len as usize).div_ceil(RMPP_SEGMENT_DATA);
            assert_eq!(n, announced, "segments announced by PayloadLength {first_len}");
            assert!(result.len() - hdr <= announced * seg_data);
        }
        assert!(result.len() - hdr <= self.max_bytes, "{} bytes kept, past max_bytes", result.len() - hdr);
        assert_eq!(self.r.result().map(|r| r.ok()), Some(Some(result.clone())), "result() repeats");
        self.result = Some(result);
    }

    fn drain(&mut self, back: &mut Vec<Vec<u8>>) {
        while let Some(m) = self.r.poll_transmit() {
            assert_eq!(m.len(), MAD);
            assert!(self.heard.contains(&m[..24]), "a reply to a MAD nobody sent");
            assert!(!self.aborted, "a MAD after the ABORT");
            let h = rmpp(&m);
            assert!(h.flags.active && h.version == 1);
            match h.rmpp_type {
                RmppType::Ack => {
                    assert_eq!(h.status, RmppStatus::Normal);
                    let ack = (h.segment_number(), h.new_window_last());
                    assert!(ack.0 <= self.r.received(), "ACK of {} with {} received", ack.0, self.r.received());
                    assert!(ack.1 >= ack.0, "window below the ACK");
                    assert!(ack.0 >= self.last_ack.0 && ack.1 >= self.last_ack.1, "{ack:?} after {:?}", self.last_ack);
                    assert!(ack.0 >= 1, "an ACK before segment 1");
                    self.last_ack = ack;
                }
                RmppType::Abort => {
                    assert_eq!(Some(h.status), failed_abort(self.r.state()), "the ABORT its error calls for");
                    self.aborted = true;
                }
                RmppType::Stop => {
                    // Out of room (`max_bytes`): STOP ResX, not ABORT.
                    assert_eq!(h.status, RmppStatus::ResourcesExhausted);
                    assert!(matches!(self.r.state(), TransferState::Failed(RmppError::TooLarge { .. })));
                    self.aborted = true;
                }
                t => panic!("a receiver sent {t:?}"),
            }
            back.push(m);
        }
    }

    fn timeout(&mut self, now: Duration, back: &mut Vec<Vec<u8>>) {
        let before = self.r.state().clone();
        self.r.handle_timeout(now);
        if before != TransferState::Active {
            assert_eq!(*self.r.state(), before);
        }
        if let Some(t) = self.r.poll_timeout() {
            assert!(t > now, "receiver: handle_timeout({now:?}) left {t:?}");
        }
        self.drain(back);
    }
}

/// A forged DATA segment: the transfer's header (or, bit 4, another
/// TID), a segment number, flags and PayloadLength (bit 5: raw), the
/// version, type and status (bit 6: raw), the data one byte repeated.
fn forged_data(template: &[u8], op: u8, inp: &mut Input<'_>) -> Vec<u8> {
    let mut m = vec![0u8; MAD];
    m[..template.len()].copy_from_slice(template);
    if op & 0x10 != 0 {
        m[8..16].copy_from_slice(&u64::from(inp.u32()).to_be_bytes());
    }
    let fill = inp.byte();
    m[template.len()..].fill(fill);
    let (segment, flags, payload_length) = if op & 0x20 != 0 {
        (inp.u32(), inp.byte(), inp.u32())
    } else {
        let s = u32::from(inp.byte() % 32);
        let f = 1 | if s == 1 { 2 } else { 0 } | (inp.byte() & 4);
        (s, f, u32::from(inp.u16() % 6000))
    };
    let mut h = RmppHeaderRepr::data(segment, payload_length, false, false);
    h.flags = ibsm::mad::rmpp::RmppFlags::from_bits(flags);
    if op & 0x40 != 0 {
        h.version = inp.byte() % 3;
        h.rmpp_type = RmppType::from(inp.byte() % 6);
        h.status = RmppStatus::from(inp.byte());
    }
    h.emit_bytes(&mut m).expect("a whole MAD");
    m
}

/// A forged ACK, STOP or ABORT for the transfer (bit 4: another TID;
/// bit 5: raw numbers; bit 6: raw version and status).
fn forged_control(template: &[u8], op: u8, inp: &mut Input<'_>) -> Vec<u8> {
    let mut m = vec![0u8; MAD];
    m[..template.len()].copy_from_slice(template);
    m[3] ^= 0x80;
    if op & 0x10 != 0 {
        m[8..16].copy_from_slice(&u64::from(inp.u32()).to_be_bytes());
    }
    let kind = inp.byte();
    let mut h = match kind % 6 {
        0..=2 => {
            let (s, w) = if op & 0x20 != 0 {
                (inp.u32(), inp.u32())
            } else {
                let s = u32::from(inp.byte() % 32);
                (s, s + u32::from(inp.byte() % 16))
            };
            RmppHeaderRepr::ack(s, w)
        }
        3 => RmppHeaderRepr::stop(RmppStatus::ResourcesExhausted),
        4 => RmppHeaderRepr::abort(RmppStatus::from(118 + inp.byte() % 10)),
        _ => {
            let mut h = RmppHeaderRepr::ack(0, 0);
            h.rmpp_type = RmppType::from(inp.byte());
            h
        }
    };
    if op & 0x40 != 0 {
        h.version = inp.byte() % 3;
        h.status = RmppStatus::from(inp.byte());
        h.flags = ibsm::mad::rmpp::RmppFlags::from_bits(inp.byte());
    }
    h.emit_bytes(&mut m).expect("a whole MAD");
    m
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input(data);
    let (b0, len, b3) = (inp.byte(), inp.u16(), inp.byte());
    let class = [0x03u8, 0x06, 0x30][usize::from(b0 % 3)];
    let cfg = RmppConfig {
        window: u32::from(b0 >> 2 & 0x0F),
        segment_timeout: Duration::from_millis([1, 50, 200, 1000][usize::from(b3 & 3)]),
        retries: u32::from(b3 >> 2 & 3),
        total_timeout: Duration::from_secs([2, 40][usize::from(b3 >> 4 & 1)]),
        max_bytes: [16 << 20, 600, 2000, 4000][usize::from(b3 >> 5 & 3)],
    };
    let hdr = data_offset(MgmtClass::from(class));
    // A GetTableResp-like header, the class header a recognisable pattern.
    let mut template: Vec<u8> = (0..hdr).map(|i| (i as u8).wrapping_mul(37) ^ 0x5A).collect();
    template[..4].copy_from_slice(&[1, class, 2, 0x92]);
    template[4..8].fill(0);
    template[8..16].copy_from_slice(&TID.to_be_bytes());
    template[24..RMPP_DATA_OFFSET].fill(0);
    let payload: Vec<u8> =
        (0..usize::from(len) % 4400).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 24) as u8).collect();

    let mut now = Duration::from_secs(1);
    let s = RmppSender::new(now, &template, payload.clone(), cfg).expect("a valid template and payload");
    let mut tx = Tx {
        s,
        template: template.clone(),
        payload,
        seg_data: MAD - hdr,
        highest_sent: 0,
        data_sent: 0,
        resent: 0,
        granted: 1,
        acknowledged: 0,
        aborted: false,
        forged: false,
        first_header: None,
    };
    let mut rx = Rx {
        r: RmppReceiver::new(now, cfg),
        heard: HashSet::new(),
        first: None,
        received: 0,
        last_ack: (0, 0),
        aborted: false,
        forged: false,
        result: None,
        max_bytes: cfg.max_bytes,
    };
    let (mut fwd, mut back): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (Vec::new(), Vec::new());

    let mut ops = 0;
    while !inp.is_empty() && ops < 2000 {
        ops += 1;
        let op = inp.byte();
        match op & 7 {
            0 => {
                for _ in 0..=(inp.byte() & 15) {
                    let Some(m) = tx.poll(now) else { break };
                    if op & 0x08 == 0 {
                        fwd.push(m);
                    }
                }
            }
            1 | 2 => {
                let queue = if op & 7 == 1 { &mut fwd } else { &mut back };
                if queue.is_empty() {
                    continue;
                }
                let i = usize::from(inp.byte()) % queue.len();
                let m = if op & 0x08 != 0 { queue[i].clone() } else { queue.remove(i) };
                if op & 7 == 1 {
                    rx.handle(now, &m, &mut back);
                } else {
                    tx.handle(now, &m);
                }
            }
            3 => {
                rx.forged = true;
                let m = forged_data(&template, op, &mut inp);
                rx.handle(now, &m, &mut back);
            }
            4 => {
                rx.forged = true;
                let n = usize::from(inp.byte()) + usize::from(op >> 3 & 1) * 256;
                let mut m = inp.bytes(n);
                if op & 0x10 != 0 && m.len() >= 16 {
                    // The transfer's identity, so the bytes reach its checks.
                    m[..4].copy_from_slice(&[1, class, 2, 0x92]);
                    m[8..16].copy_from_slice(&TID.to_be_bytes());
                }
                rx.handle(now, &m, &mut back);
            }
            5 => {
                tx.forged = true;
                let m = forged_control(&template, op, &mut inp);
                tx.handle(now, &m);
            }
            6 => {
                tx.forged = true;
                let n = usize::from(inp.byte()) + usize::from(op >> 3 & 1) * 256;
                let mut m = inp.bytes(n);
                if op & 0x10 != 0 && m.len() >= 16 {
                    m[..4].copy_from_slice(&[1, class, 2, 0x12]);
                    m[8..16].copy_from_slice(&TID.to_be_bytes());
                }
                tx.handle(now, &m);
            }
            _ => {
                if op & 0x08 != 0 {
                    let next = [tx.s.poll_timeout(), rx.r.poll_timeout()].into_iter().flatten().min();
                    now = now.max(next.unwrap_or(now));
                } else {
                    now += Duration::from_millis(u64::from(inp.u16()));
                }
                tx.timeout(now);
                rx.timeout(now, &mut back);
            }
        }
    }

    // A clean link from here on: everything queued arrives in order, both
    // sides run to their end (the total time bounds either).
    for _ in 0..100_000 {
        let mut moved = false;
        while let Some(m) = tx.poll(now) {
            fwd.push(m);
        }
        for m in std::mem::take(&mut fwd) {
            rx.handle(now, &m, &mut back);
            moved = true;
        }
        for m in std::mem::take(&mut back) {
            tx.handle(now, &m);
            moved = true;
        }
        if moved {
            continue;
        }
        let next = [tx.s.poll_timeout(), rx.r.poll_timeout()].into_iter().flatten().min();
        let Some(t) = next else { break };
        now = now.max(t);
        tx.timeout(now);
        rx.timeout(now, &mut back);
    }
    assert!(tx.s.is_done(), "the sender never ended: {:?}", tx.s.state());
    assert!(rx.r.state() != &TransferState::Active, "the receiver never ended");
    assert!(tx.s.poll_transmit(now).is_none());
    if !tx.forged && !rx.forged && *tx.s.state() == TransferState::Done {
        assert_eq!(*rx.r.state(), TransferState::Done, "every segment ACKed, yet the receiver is not done");
    }
    if !rx.forged {
        if let (Some(result), Some(seg1)) = (&rx.result, &tx.first_header) {
            let want: Vec<u8> = seg1.iter().chain(&tx.payload).copied().collect();
            assert_eq!(result, &want, "the receiver's answer is the sender's payload");
        }
    }
});
