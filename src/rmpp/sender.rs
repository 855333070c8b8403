//! The sending side of one RMPP transfer (IBA 13.6.3.2): segments the
//! answer, sends what the receiver's window allows, moves the window on
//! each ACK, and sends the unacknowledged rest again when an ACK is late.
//!
//! The window starts at one segment (IBA 13.6.3.2: until the receiver's
//! first ACK names a NewWindowLast) and only ever grows. A timeout goes back
//! to the first unacknowledged segment (go-back-N, as the kernel's
//! `ib_retry_rmpp`); every ACK that moves the window restarts the retry
//! count. Past `retries` timeouts without progress, or `total_timeout`
//! after the start, the sender gives up and sends an ABORT.

use std::time::Duration;

use super::{identity, same_tid, RmppConfig, RmppError, Segmentation, TransferState};
use crate::mad::rmpp::{RmppHeaderRepr, RmppStatus, RmppType};
use crate::mad::MAD_SIZE;

/// What a sender did, for tests and counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Segments put on the wire, re-sends included.
    pub sent: u64,
    /// Of `sent`, segments sent again after a timeout.
    pub resent: u64,
    /// ACKs taken (old and repeated ones included).
    pub acks: u64,
    /// ACK waits that expired.
    pub timeouts: u64,
}

/// Sends one long answer; see the module docs.
#[derive(Debug)]
pub struct RmppSender {
    cfg: RmppConfig,
    /// The header every segment repeats (its RMPP bytes are rewritten).
    template: Vec<u8>,
    payload: Vec<u8>,
    /// Segments and their PayloadLengths.
    layout: Segmentation,
    segments: u32,
    started: Duration,
    /// Every segment up to this one is acknowledged.
    last_ack: u32,
    /// The receiver's NewWindowLast.
    window_last: u32,
    /// The next segment to send.
    next: u32,
    /// The highest segment sent so far.
    highest_sent: u32,
    /// ACK waits expired since the window last moved.
    timeouts: u32,
    ack_deadline: Option<Duration>,
    state: TransferState,
    /// An ABORT waiting to go out.
    outbox: Option<Vec<u8>>,
    stats: SenderStats,
}

impl RmppSender {
    /// Starts a transfer of `payload` behind `template`, the first N bytes
    /// of every segment (common MAD header and class header; N = 56 for
    /// SA). The template's bytes 24..36 are overwritten in each segment.
    pub fn new(now: Duration, template: &[u8], payload: Vec<u8>, cfg: RmppConfig) -> Result<Self, RmppError> {
        let layout = Segmentation::new(template.len(), payload.len())?;
        Ok(RmppSender {
            cfg,
            template: template.to_vec(),
            payload,
            layout,
            segments: layout.segments,
            started: now,
            last_ack: 0,
            window_last: 1,
            next: 1,
            highest_sent: 0,
            timeouts: 0,
            ack_deadline: None,
            state: TransferState::Active,
            outbox: None,
            stats: SenderStats::default(),
        })
    }

    /// Segments in the transfer (at least 1).
    pub fn segments(&self) -> u32 {
        self.segments
    }

    /// Every segment up to this one is acknowledged.
    pub fn acknowledged(&self) -> u32 {
        self.last_ack
    }

    pub fn state(&self) -> &TransferState {
        &self.state
    }

    /// The transfer is over, either way, and nothing is left to send.
    pub fn is_done(&self) -> bool {
        self.state != TransferState::Active && self.outbox.is_none()
    }

    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// The last segment the window lets out now: at least the first
    /// unacknowledged one, so a receiver that grants nothing more still
    /// gets probed (and refuses, and the retries run out).
    fn window_end(&self) -> u32 {
        self.window_last.max(self.last_ack + 1).min(self.segments)
    }

    /// The next MAD to put on the wire: an ABORT first, then the next
    /// segment the window allows.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Vec<u8>> {
        if let Some(m) = self.outbox.take() {
            return Some(m);
        }
        if self.state != TransferState::Active || self.next > self.window_end() {
            return None;
        }
        let n = self.next;
        self.next += 1;
        self.stats.sent += 1;
        if n <= self.highest_sent {
            self.stats.resent += 1;
        }
        self.highest_sent = self.highest_sent.max(n);
        self.ack_deadline = Some(now + self.cfg.segment_timeout);
        Some(self.segment(n))
    }

    /// Segment `n` (1-based) as it goes on the wire.
    fn segment(&self, n: u32) -> Vec<u8> {
        let mut mad = vec![0u8; MAD_SIZE];
        let hdr = self.template.len();
        mad[..hdr].copy_from_slice(&self.template);
        let (first, last) = (n == 1, n == self.segments);
        let payload_length = self.layout.payload_length(n);
        RmppHeaderRepr::data(n, payload_length, first, last).emit_bytes(&mut mad).expect("a whole MAD");
        let per = self.layout.data_per_segment;
        let start = (n as usize - 1) * per;
        let end = (start + per).min(self.payload.len());
        if start < end {
            mad[hdr..hdr + end - start].copy_from_slice(&self.payload[start..end]);
        }
        mad
    }

    /// An ABORT with `status`: the template's header (same method, TID and
    /// attribute), the data area zero.
    fn abort_mad(&self, status: RmppStatus) -> Vec<u8> {
        let mut mad = vec![0u8; MAD_SIZE];
        mad[..self.template.len()].copy_from_slice(&self.template);
        RmppHeaderRepr::abort(status).emit_bytes(&mut mad).expect("a whole MAD");
        mad
    }

    /// Ends the transfer with `e`, queueing the ABORT it calls for.
    fn fail(&mut self, e: RmppError) -> RmppError {
        if let Some(status) = e.abort_status() {
            self.outbox = Some(self.abort_mad(status));
        }
        self.state = TransferState::Failed(e.clone());
        self.ack_deadline = None;
        e
    }

    /// Takes a MAD from the receiver: an ACK moves the window, STOP and
    /// ABORT end the transfer. `Err` says why the MAD was refused; the
    /// transfer has ended exactly when [`state`](Self::state) says so
    /// (a MAD of another transfer, or one too short, changes nothing).
    pub fn handle_mad(&mut self, now: Duration, mad: &[u8]) -> Result<(), RmppError> {
        let h = RmppHeaderRepr::parse_bytes(mad).map_err(RmppError::Wire)?;
        let (class, tid, method) = identity(mad);
        let (our_class, our_tid, _) = identity(&self.template);
        if class != our_class || !same_tid(tid, our_tid) {
            return Err(RmppError::OtherTransfer { class, tid, method });
        }
        if !h.flags.active {
            return Err(RmppError::NotActive);
        }
        if self.state != TransferState::Active {
            // A repeated final ACK or a late STOP: the transfer is over.
            return Ok(());
        }
        if h.version != crate::mad::rmpp::RMPP_VERSION {
            return Err(self.fail(RmppError::UnsupportedVersion { version: h.version }));
        }
        match h.rmpp_type {
            RmppType::Ack => self.handle_ack(now, &h),
            RmppType::Stop if h.status == RmppStatus::ResourcesExhausted => {
                Err(self.fail(RmppError::Stopped { status: h.status }))
            }
            RmppType::Abort if h.status.is_abort_status() => Err(self.fail(RmppError::Aborted { status: h.status })),
            RmppType::Stop | RmppType::Abort => {
                Err(self.fail(RmppError::IllegalStatus { rmpp_type: h.rmpp_type, status: h.status.into() }))
            }
            RmppType::Data => Err(RmppError::Unexpected { rmpp_type: RmppType::Data, role: "sender" }),
            RmppType::Unknown(t) => Err(self.fail(RmppError::BadType { rmpp_type: t })),
        }
    }

    fn handle_ack(&mut self, now: Duration, h: &RmppHeaderRepr) -> Result<(), RmppError> {
        if h.status != RmppStatus::Normal {
            return Err(self.fail(RmppError::IllegalStatus { rmpp_type: RmppType::Ack, status: h.status.into() }));
        }
        let (segment, new_window_last) = (h.segment_number(), h.new_window_last());
        if new_window_last < segment {
            return Err(self.fail(RmppError::WindowTooSmall { segment, new_window_last }));
        }
        if segment > self.highest_sent {
            let e = RmppError::SegmentTooBig { segment, sent: self.highest_sent, segments: self.segments };
            return Err(self.fail(e));
        }
        self.stats.acks += 1;
        if segment < self.last_ack || new_window_last < self.window_last {
            // An old ACK overtaken by a newer one (IBA 13.6.3.2).
            return Ok(());
        }
        if segment > self.last_ack {
            self.last_ack = segment;
            self.timeouts = 0;
            self.ack_deadline = Some(now + self.cfg.segment_timeout);
        }
        self.window_last = new_window_last;
        if self.last_ack == self.segments {
            self.state = TransferState::Done;
            self.ack_deadline = None;
        } else if self.next <= self.last_ack {
            // Acknowledged while a go-back was under way.
            self.next = self.last_ack + 1;
        }
        Ok(())
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.state != TransferState::Active {
            return None;
        }
        let total = self.started + self.cfg.total_timeout;
        Some(self.ack_deadline.map_or(total, |d| d.min(total)))
    }

    /// Expires the ACK wait (go back to the first unacknowledged segment,
    /// or give up after `retries`) and the total-time limit.
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.state != TransferState::Active {
            return;
        }
        if now >= self.started + self.cfg.total_timeout {
            self.fail(RmppError::TotalTimeout { limit: self.cfg.total_timeout });
            return;
        }
        let Some(deadline) = self.ack_deadline else { return };
        if now < deadline {
            return;
        }
        self.stats.timeouts += 1;
        self.timeouts += 1;
        if self.timeouts > self.cfg.retries {
            self.fail(RmppError::TooManyRetries { segment: self.last_ack + 1, attempts: self.timeouts });
            return;
        }
        self.next = self.last_ack + 1;
        self.ack_deadline = Some(now + self.cfg.segment_timeout);
    }
}
