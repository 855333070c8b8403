//! RMPP, the Reliable Multi-Packet Transaction Protocol (IBA 13.6): how an
//! answer longer than one MAD (an SA GetTableResp) travels as numbered
//! 256-byte segments under a sliding window of ACKs.
//!
//! Two I/O-free cores in the quinn-proto shape, driven by `now`:
//! [`RmppSender`] sends one long answer, [`RmppReceiver`] reassembles one.
//! Neither reads a clock or touches a socket: the owner feeds received MADs
//! (`handle_mad`) and the passage of time (`handle_timeout`), and puts what
//! `poll_transmit` returns on the wire, waking at `poll_timeout`.
//!
//! Conventions, as the Linux kernel (drivers/infiniband/core/mad_rmpp.c)
//! implements them, since its receivers (saquery through libibumad) and
//! senders (OpenSM) are who ibsm talks to:
//! - Every segment repeats the whole class header (for SA the 56 bytes up
//!   to the SA data) and carries `256 - header` bytes of data.
//! - PayloadLength counts RMPP payload, everything after byte 36, class
//!   header included: the first segment carries the total,
//!   `segments × 220 - pad`; the last one its own share, `220 - pad`;
//!   the others 0 (`pad` is the unused tail of the last segment's data).
//!   A header-only answer is one segment with PayloadLength 20 (SA).
//! - The receiver reassembles to the first segment's header followed by
//!   every segment's data, cut to what the last PayloadLength says.
//! - The sender starts with a window of one segment; the receiver ACKs
//!   segment 1 at once and then the end of every window it grants, and
//!   the last segment.
//! - ACK, STOP and ABORT from a receiver copy the data's header with the
//!   response bit of the method flipped: an ACK of a GetTableResp is a
//!   GetTable (0x12), so the kernel routes it like a request to the agent
//!   that serves the class (the sender). An ABORT from a sender keeps the
//!   data's method.

use std::time::Duration;

use crate::mad::rmpp::{RmppHeader, RmppStatus, RmppType, RMPP_DATA_OFFSET, RMPP_SEGMENT_DATA};
use crate::mad::sa::SA_DATA_OFFSET;
use crate::mad::{MadHeader, MgmtClass, WireError, MAD_HEADER_LEN, MAD_SIZE};

pub mod receiver;
pub mod sender;

pub use receiver::{ReceiverStats, RmppReceiver};
pub use sender::{RmppSender, SenderStats};

/// Knobs of one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmppConfig {
    /// Segments a receiver grants past each ACK. The kernel's window is 64
    /// (a receive queue of 512 over 8). 0 is taken as 1. A sender has no
    /// use for it: its window is whatever the receiver grants.
    pub window: u32,
    /// How long a sender waits for the ACK that moves its window before it
    /// sends the unacknowledged segments again.
    pub segment_timeout: Duration,
    /// Re-sends of a window, without progress, before a sender gives up
    /// (with ABORT, status 126).
    pub retries: u32,
    /// The longest a whole transfer may take, either side (the kernel's
    /// receiver allows 40 s); past it the transfer ends with ABORT 118.
    pub total_timeout: Duration,
    /// The most data a receiver reassembles from one transfer (the
    /// segments' data; the headers they repeat not counted). A first segment
    /// whose PayloadLength announces more, or a transfer of unannounced
    /// length that grows past it, is ended with STOP, status 1 (ResX,
    /// resources exhausted): the receiver's way to refuse what it has no
    /// room for (IBA 13.6.2.2; an ABORT only carries 118..=191), which a
    /// kernel sender takes as the end of its send. A sender ignores it.
    pub max_bytes: usize,
}

impl Default for RmppConfig {
    fn default() -> Self {
        RmppConfig {
            window: 64,
            segment_timeout: Duration::from_millis(200),
            retries: 3,
            total_timeout: Duration::from_secs(40),
            // The SA's largest answer (`[sa] max_answer_bytes`) with room
            // to spare: every PortInfoRecord of a 50,000-port fabric.
            max_bytes: 16 << 20,
        }
    }
}

/// Where a transfer stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferState {
    /// Segments are still to be sent or received.
    Active,
    /// Every segment was acknowledged (sender) or received (receiver).
    Done,
    /// The transfer ended without completing.
    Failed(RmppError),
}

/// Why a transfer ended, or a MAD was refused. Grouped by who is to blame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RmppError {
    // The peer ended the transfer.
    #[error("the receiver sent STOP (status {})", u8::from(*status))]
    Stopped { status: RmppStatus },
    #[error("the peer sent ABORT (status {}: {})", u8::from(*status), describe(*status))]
    Aborted { status: RmppStatus },

    // This side gave up.
    #[error("segment {segment}: no ACK after {attempts} attempts")]
    TooManyRetries { segment: u32, attempts: u32 },
    #[error("the transfer was not complete after {limit:?}")]
    TotalTimeout { limit: Duration },

    // The peer broke the protocol; each is answered with an ABORT.
    #[error("RMPPVersion {version} (only 1 is defined)")]
    UnsupportedVersion { version: u8 },
    #[error("RMPPType {rmpp_type} is not defined")]
    BadType { rmpp_type: u8 },
    #[error("{rmpp_type:?} with RMPPStatus {status}")]
    IllegalStatus { rmpp_type: RmppType, status: u8 },
    #[error("segment {segment} with First {}", if *first { "set" } else { "clear" })]
    InconsistentFirst { segment: u32, first: bool },
    #[error("segment {segment}: Last {last} and PayloadLength {payload_length} disagree (the first segment said {first_payload_length})")]
    InconsistentLast { segment: u32, last: bool, payload_length: u32, first_payload_length: u32 },
    #[error("ACK of segment {segment} with NewWindowLast {new_window_last}, below it")]
    WindowTooSmall { segment: u32, new_window_last: u32 },
    #[error("ACK of segment {segment}, but only {sent} of {segments} were sent")]
    SegmentTooBig { segment: u32, sent: u32, segments: u32 },

    // This receiver has no room; answered with a STOP.
    #[error("a transfer of {bytes} bytes or more, past the receiver's limit of {limit}")]
    TooLarge { bytes: usize, limit: usize },

    // Not a MAD of this transfer: refused, the transfer goes on.
    #[error("not an active RMPP MAD")]
    NotActive,
    #[error("unreadable RMPP MAD: {0}")]
    Wire(WireError),
    #[error("class {class:#04x} TID {tid:#018x} method {method:#04x} belongs to another transfer")]
    OtherTransfer { class: u8, tid: u64, method: u8 },
    #[error("{rmpp_type:?} is not for a {role}")]
    Unexpected { rmpp_type: RmppType, role: &'static str },

    // A sender that cannot start.
    #[error("header template of {len} bytes: a segment needs 36 to 255")]
    Template { len: usize },
    #[error("a payload of {len} bytes is past what PayloadLength can count")]
    PayloadTooLong { len: usize },
}

impl RmppError {
    /// The status of the ABORT this error is answered with, if any.
    pub fn abort_status(&self) -> Option<RmppStatus> {
        Some(match self {
            RmppError::TooManyRetries { .. } => RmppStatus::TooManyRetries,
            RmppError::TotalTimeout { .. } => RmppStatus::TotalTimeTooLong,
            RmppError::UnsupportedVersion { .. } => RmppStatus::UnsupportedVersion,
            RmppError::BadType { .. } => RmppStatus::BadType,
            RmppError::IllegalStatus { .. } => RmppStatus::IllegalStatus,
            RmppError::InconsistentFirst { .. } => RmppStatus::InconsistentFirstSegment,
            RmppError::InconsistentLast { .. } => RmppStatus::InconsistentLastLength,
            RmppError::WindowTooSmall { .. } => RmppStatus::NewWindowLastTooSmall,
            RmppError::SegmentTooBig { .. } => RmppStatus::SegmentNumberTooBig,
            _ => return None,
        })
    }
}

/// What an RMPP status means, for messages.
pub fn describe(status: RmppStatus) -> &'static str {
    match status {
        RmppStatus::Normal => "normal",
        RmppStatus::ResourcesExhausted => "resources exhausted",
        RmppStatus::TotalTimeTooLong => "total time too long",
        RmppStatus::InconsistentLastLength => "inconsistent Last and PayloadLength",
        RmppStatus::InconsistentFirstSegment => "inconsistent First and SegmentNumber",
        RmppStatus::BadType => "bad RMPPType",
        RmppStatus::NewWindowLastTooSmall => "NewWindowLast too small",
        RmppStatus::SegmentNumberTooBig => "SegmentNumber too big",
        RmppStatus::IllegalStatus => "illegal status",
        RmppStatus::UnsupportedVersion => "unsupported version",
        RmppStatus::TooManyRetries => "too many retries",
        RmppStatus::Unspecified => "unspecified",
        RmppStatus::Unknown(128..=191) => "class specific",
        RmppStatus::Unknown(_) => "reserved",
    }
}

/// How one transfer's data splits into segments, and the PayloadLength
/// each segment carries (IBA 13.6.2.3, counted as the kernel counts it):
/// every segment repeats a `header_len`-byte header (common, RMPP and
/// class header: 56 for SA) and carries `256 - header_len` bytes of data;
/// PayloadLength counts RMPP payload, everything after byte 36, so the
/// first segment says `segments × 220 - pad` (the whole transfer), the
/// last `220 - pad` (its own share), the others 0, `pad` being the unused
/// tail of the last segment's data. One segment is first and last at
/// once: its own share is the whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segmentation {
    /// Data bytes per segment.
    pub data_per_segment: usize,
    /// At least 1: no data is one segment carrying only the header.
    pub segments: u32,
    /// Unused bytes at the end of the last segment's data.
    pub pad: usize,
}

impl Segmentation {
    /// The segments of `data_len` bytes behind a `header_len`-byte header.
    /// Errors: a header outside 36..=255 bytes (`Template`), or more data
    /// than a 32-bit PayloadLength counts (`PayloadTooLong`).
    pub fn new(header_len: usize, data_len: usize) -> Result<Self, RmppError> {
        if !(RMPP_DATA_OFFSET..MAD_SIZE).contains(&header_len) {
            return Err(RmppError::Template { len: header_len });
        }
        let data_per_segment = MAD_SIZE - header_len;
        let segments = data_len.div_ceil(data_per_segment).max(1);
        let pad = segments * data_per_segment - data_len;
        let total = (segments as u64) * (RMPP_SEGMENT_DATA as u64) - pad as u64;
        if total > u64::from(u32::MAX) {
            return Err(RmppError::PayloadTooLong { len: data_len });
        }
        Ok(Segmentation { data_per_segment, segments: segments as u32, pad })
    }

    /// PayloadLength of segment `n` (1-based).
    pub fn payload_length(&self, n: u32) -> u32 {
        let per = RMPP_SEGMENT_DATA as u32;
        if n == self.segments {
            per - self.pad as u32
        } else if n == 1 {
            self.segments * per - self.pad as u32
        } else {
            0
        }
    }
}

/// Whether a class carries the RMPP header at bytes 24..36 (IBA 13.6.1;
/// the kernel's `ib_is_mad_class_rmpp`): SA, device management (0x06) and
/// the vendor classes of range 2 (0x30..=0x4F). In others those bytes are
/// class data (an SMP's M_Key, say) and mean nothing to RMPP.
pub fn class_uses_rmpp(class: MgmtClass) -> bool {
    matches!(u8::from(class), 0x03 | 0x06 | 0x30..=0x4F)
}

/// Where a class's data starts, i.e. the header every segment repeats (the
/// kernel's `ib_get_mad_data_offset`): SA 56, device management 64, vendor
/// range 2 40; any other class just the RMPP header.
pub fn data_offset(class: MgmtClass) -> usize {
    match u8::from(class) {
        0x03 => SA_DATA_OFFSET,
        0x06 => 64,
        0x30..=0x4F => 40,
        _ => RMPP_DATA_OFFSET,
    }
}

/// Whether `mad` is a MAD of an RMPP class with the Active flag set: part
/// of a multi-packet transfer, however short. Never panics.
pub fn is_rmpp_active(mad: &[u8]) -> bool {
    let Ok(h) = MadHeader::new_checked(&mad[..mad.len().min(MAD_HEADER_LEN)]) else {
        return false;
    };
    class_uses_rmpp(h.mgmt_class()) && RmppHeader::new_checked(mad).is_ok_and(|r| r.flags().active)
}

/// Class, TID and method of a MAD that reaches past the RMPP header.
fn identity(mad: &[u8]) -> (u8, u64, u8) {
    let h = MadHeader::new_checked(&mad[..MAD_HEADER_LEN]).expect("callers checked 36 bytes");
    (h.mgmt_class().into(), h.transaction_id(), h.method().into())
}

/// Whether two TIDs name one transaction: the low 32 bits are the
/// requester's own, the kernel and ibsim rewrite the high ones (see
/// `exchange::txn`).
fn same_tid(a: u64, b: u64) -> bool {
    a as u32 == b as u32
}

#[cfg(test)]
mod tests;
