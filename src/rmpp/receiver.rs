//! The receiving side of one RMPP transfer (IBA 13.6.3.3): takes segments
//! in order, grants the sender a window at a time, and reassembles.
//!
//! Segment 1 (with First) starts the transfer and is acknowledged at once,
//! granting `window` more; after that the receiver acknowledges the end of
//! each window it granted, and the last segment. A segment out of order is
//! dropped; a duplicate of one already acknowledged, or one past a gap
//! inside the window, is answered with an ACK of what arrived in order, so
//! the sender learns where to go back to (IBA 13.6.3.3). Segments beyond
//! the window are dropped unanswered, as the kernel does.
//!
//! Checks that end the transfer with an ABORT: First set on a segment
//! other than 1 or clear on segment 1 (status 120); Last and PayloadLength
//! that disagree (119): the last PayloadLength must cover the class header
//! and fit one segment, and when the first segment's PayloadLength is not
//! 0 it fixes the segment count, so Last must come exactly there. The
//! total-time limit ends it with 118.
//!
//! Memory is bounded by `max_bytes`: a first segment announcing more data,
//! or a transfer without an announced length that grows past it, is ended
//! with a STOP of status 1 (ResX), the receiver's refusal (IBA 13.6.2.2).
//!
//! After the transfer completes the receiver still answers a repeat of its
//! segments with the final ACK, in case that ACK was lost (the kernel keeps
//! a finished receive 10 s for this).

use std::collections::VecDeque;
use std::time::Duration;

use super::{data_offset, identity, same_tid, RmppConfig, RmppError, TransferState};
use crate::mad::rmpp::{RmppHeaderRepr, RmppStatus, RmppType, RMPP_DATA_OFFSET, RMPP_SEGMENT_DATA, RMPP_VERSION};
use crate::mad::{MadHeader, Method, MgmtClass, MAD_HEADER_LEN, MAD_SIZE};

/// The data a first segment's PayloadLength announces: the RMPP payload
/// of every segment less the class header each repeats (0 when the
/// sender did not say).
fn announced_data(first_payload_length: u32, header_len: usize) -> usize {
    let class_header = header_len.saturating_sub(RMPP_DATA_OFFSET);
    let segments = (first_payload_length as usize).div_ceil(RMPP_SEGMENT_DATA);
    (first_payload_length as usize).saturating_sub(segments * class_header)
}

/// What a receiver did, for tests and counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Segments taken in order.
    pub segments: u64,
    /// Segments seen again.
    pub duplicates: u64,
    /// Segments dropped for arriving ahead of one still missing.
    pub out_of_order: u64,
    /// ACKs and ABORTs queued.
    pub sent: u64,
}

/// Who the transfer belongs to, fixed by its first segment.
#[derive(Debug, Clone)]
struct Origin {
    class: u8,
    tid: u64,
    method: u8,
    /// The first segment's header (common and class header): the start of
    /// the result and the model of every ACK.
    header: Vec<u8>,
    first_payload_length: u32,
}

/// Reassembles one answer; see the module docs.
#[derive(Debug)]
pub struct RmppReceiver {
    cfg: RmppConfig,
    started: Duration,
    origin: Option<Origin>,
    /// Before the transfer starts: the header of the MAD being handled, so
    /// an ABORT can still answer whoever sent a broken segment 1.
    peer_header: Option<Vec<u8>>,
    data: Vec<u8>,
    /// The next segment wanted in order (1 until the transfer starts).
    expected: u32,
    /// The NewWindowLast granted so far.
    window_last: u32,
    state: TransferState,
    /// Set when complete, until taken.
    result: Option<Vec<u8>>,
    outbox: VecDeque<Vec<u8>>,
    stats: ReceiverStats,
}

impl RmppReceiver {
    pub fn new(now: Duration, cfg: RmppConfig) -> Self {
        RmppReceiver {
            cfg,
            started: now,
            origin: None,
            peer_header: None,
            data: Vec::new(),
            expected: 1,
            window_last: 1,
            state: TransferState::Active,
            result: None,
            outbox: VecDeque::new(),
            stats: ReceiverStats::default(),
        }
    }

    pub fn state(&self) -> &TransferState {
        &self.state
    }

    /// The transfer is over, either way, and nothing is left to send.
    pub fn is_done(&self) -> bool {
        self.state != TransferState::Active && self.outbox.is_empty()
    }

    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// Segments taken in order so far.
    pub fn received(&self) -> u32 {
        self.expected - 1
    }

    /// The outcome once the transfer has ended: the whole reassembled MAD
    /// (the first segment's header, then all data cut to PayloadLength),
    /// or why it failed.
    pub fn result(&self) -> Option<Result<Vec<u8>, RmppError>> {
        match &self.state {
            TransferState::Active => None,
            TransferState::Done => self.result.clone().map(Ok),
            TransferState::Failed(e) => Some(Err(e.clone())),
        }
    }

    /// Like [`result`](Self::result) but moves the answer out; the
    /// receiver keeps answering repeats with the final ACK.
    pub fn take_result(&mut self) -> Option<Result<Vec<u8>, RmppError>> {
        match &self.state {
            TransferState::Active => None,
            TransferState::Done => self.result.take().map(Ok),
            TransferState::Failed(e) => Some(Err(e.clone())),
        }
    }

    /// The next ACK or ABORT to send back, to the address the segments
    /// came from.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.outbox.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work: the
    /// total-time limit while the transfer runs.
    pub fn poll_timeout(&self) -> Option<Duration> {
        (self.state == TransferState::Active).then(|| self.started + self.cfg.total_timeout)
    }

    /// Ends the transfer with ABORT 118 once the total time has passed.
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.state == TransferState::Active && now >= self.started + self.cfg.total_timeout {
            self.fail(RmppError::TotalTimeout { limit: self.cfg.total_timeout });
        }
    }

    /// A reply to the sender: `header` with the response bit of its method
    /// flipped (see the `rmpp` module docs) and `rmpp` as its RMPP header.
    fn reply(&mut self, rmpp: RmppHeaderRepr) {
        let Some(header) = self.origin.as_ref().map(|o| &o.header).or(self.peer_header.as_ref()) else { return };
        let mut mad = vec![0u8; MAD_SIZE];
        mad[..header.len()].copy_from_slice(header);
        let mut h = MadHeader::new_checked(&mut mad[..MAD_HEADER_LEN]).expect("a whole MAD");
        let method = u8::from(h.method());
        h.set_method(Method::from(method ^ 0x80));
        rmpp.emit_bytes(&mut mad).expect("a whole MAD");
        self.outbox.push_back(mad);
        self.stats.sent += 1;
    }

    fn ack(&mut self) {
        self.reply(RmppHeaderRepr::ack(self.expected - 1, self.window_last));
    }

    /// Ends the transfer with `e`, queueing the ABORT (or, out of room,
    /// the STOP) it calls for.
    fn fail(&mut self, e: RmppError) -> RmppError {
        if let RmppError::TooLarge { .. } = e {
            self.reply(RmppHeaderRepr::stop(RmppStatus::ResourcesExhausted));
        } else if let Some(status) = e.abort_status() {
            self.reply(RmppHeaderRepr::abort(status));
        }
        self.state = TransferState::Failed(e.clone());
        self.data = Vec::new();
        e
    }

    /// Takes one MAD from the sender. `Err` says why it was refused; the
    /// transfer has ended exactly when [`state`](Self::state) says so (a
    /// MAD of another transfer, or one too short, changes nothing).
    pub fn handle_mad(&mut self, _now: Duration, mad: &[u8]) -> Result<(), RmppError> {
        let h = RmppHeaderRepr::parse_bytes(mad).map_err(RmppError::Wire)?;
        let (class, tid, method) = identity(mad);
        if let Some(o) = &self.origin {
            if o.class != class || !same_tid(o.tid, tid) || o.method != method {
                return Err(RmppError::OtherTransfer { class, tid, method });
            }
        }
        if !h.flags.active {
            return Err(RmppError::NotActive);
        }
        if self.origin.is_none() {
            self.peer_header = Some(mad[..data_offset(MgmtClass::from(class)).min(mad.len())].to_vec());
        }
        if self.state != TransferState::Active {
            if self.state == TransferState::Done && h.rmpp_type == RmppType::Data {
                // The sender missed the final ACK.
                self.stats.duplicates += 1;
                self.ack();
            }
            return Ok(());
        }
        if h.version != RMPP_VERSION {
            return Err(self.fail(RmppError::UnsupportedVersion { version: h.version }));
        }
        match h.rmpp_type {
            RmppType::Data if h.status != RmppStatus::Normal => {
                Err(self.fail(RmppError::IllegalStatus { rmpp_type: RmppType::Data, status: h.status.into() }))
            }
            RmppType::Data => {
                // A last segment sent short (OpenSM and ibsm send a one-MAD
                // table as header + records) reads as the kernel delivers
                // it: padded with zeros to a whole MAD, PayloadLength saying
                // what counts. Any other short segment is refused.
                if mad.len() < MAD_SIZE && h.flags.last {
                    let header_len = data_offset(MgmtClass::from(class)).min(MAD_SIZE);
                    crate::mad::check_len("RMPP segment", mad, header_len).map_err(RmppError::Wire)?;
                    let mut whole = mad.to_vec();
                    whole.resize(MAD_SIZE, 0);
                    return self.handle_data(&whole, &h);
                }
                crate::mad::check_len("RMPP segment", mad, MAD_SIZE).map_err(RmppError::Wire)?;
                self.handle_data(mad, &h)
            }
            RmppType::Abort if h.status.is_abort_status() => Err(self.fail(RmppError::Aborted { status: h.status })),
            RmppType::Abort => {
                Err(self.fail(RmppError::IllegalStatus { rmpp_type: RmppType::Abort, status: h.status.into() }))
            }
            RmppType::Ack | RmppType::Stop => Err(RmppError::Unexpected { rmpp_type: h.rmpp_type, role: "receiver" }),
            RmppType::Unknown(t) => Err(self.fail(RmppError::BadType { rmpp_type: t })),
        }
    }

    fn handle_data(&mut self, mad: &[u8], h: &RmppHeaderRepr) -> Result<(), RmppError> {
        let segment = h.segment_number();
        let first = h.flags.first;
        if (segment == 1) != first {
            return Err(self.fail(RmppError::InconsistentFirst { segment, first }));
        }
        if self.origin.is_none() {
            if segment != 1 {
                // Segment 1 is lost or late; nobody to answer yet.
                self.stats.out_of_order += 1;
                return Ok(());
            }
            let (class, tid, method) = identity(mad);
            let header_len = data_offset(MgmtClass::from(class)).min(mad.len());
            self.peer_header = None;
            self.origin = Some(Origin {
                class,
                tid,
                method,
                header: mad[..header_len].to_vec(),
                first_payload_length: h.payload_length(),
            });
            let announced = announced_data(h.payload_length(), header_len);
            if announced > self.cfg.max_bytes {
                return Err(self.fail(RmppError::TooLarge { bytes: announced, limit: self.cfg.max_bytes }));
            }
        }
        if segment < self.expected {
            self.stats.duplicates += 1;
            self.ack();
            return Ok(());
        }
        if segment > self.window_last {
            self.stats.out_of_order += 1;
            return Ok(());
        }
        if segment > self.expected {
            self.stats.out_of_order += 1;
            self.ack();
            return Ok(());
        }
        let o = self.origin.as_ref().expect("set above");
        let (header_len, first_len) = (o.header.len(), o.first_payload_length);
        // With a first PayloadLength, it fixes the segment count.
        let count = (first_len != 0).then(|| first_len.div_ceil(RMPP_SEGMENT_DATA as u32));
        let last = h.flags.last;
        // Class header bytes each segment's PayloadLength includes.
        let class_header = (header_len - RMPP_DATA_OFFSET.min(header_len)) as u32;
        let inconsistent = match (last, count) {
            (true, _) if h.payload_length() < class_header || h.payload_length() > RMPP_SEGMENT_DATA as u32 => true,
            (true, Some(n)) => segment != n,
            (false, Some(n)) => segment >= n,
            (_, None) => false,
        };
        if inconsistent {
            let e = RmppError::InconsistentLast {
                segment,
                last,
                payload_length: h.payload_length(),
                first_payload_length: first_len,
            };
            return Err(self.fail(e));
        }
        let chunk = &mad[header_len..MAD_SIZE];
        let keep = if last { ((h.payload_length() - class_header) as usize).min(chunk.len()) } else { chunk.len() };
        if self.data.len() + keep > self.cfg.max_bytes {
            let bytes = self.data.len() + keep;
            return Err(self.fail(RmppError::TooLarge { bytes, limit: self.cfg.max_bytes }));
        }
        self.data.extend_from_slice(&chunk[..keep]);
        self.stats.segments += 1;
        self.expected += 1;
        if last {
            let o = self.origin.as_ref().expect("set above");
            let mut whole = o.header.clone();
            whole.append(&mut self.data);
            self.result = Some(whole);
            self.state = TransferState::Done;
            self.ack();
        } else if segment == self.window_last {
            self.window_last = segment + self.cfg.window.max(1);
            self.ack();
        }
        Ok(())
    }
}
