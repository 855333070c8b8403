//! Requests that come in several RMPP segments (IBA 13.6): a
//! MultiPathRecord naming more GIDs than one MAD holds, for one. ibsm
//! runs its own RMPP rather than the kernel's, so the SA reassembles them
//! itself: one [`RmppReceiver`] per transfer, keyed by the requester's
//! LID, QP and TID, ACKing each window; the whole request is then handled
//! as if it had come in one MAD.
//!
//! Bounded, because each transfer holds memory until it ends: at most
//! [`MAX_TRANSFERS`] at once and [`PER_REQUESTER`] of one LID (a further
//! first segment is refused with ERR_NO_RESOURCES), at most
//! [`MAX_REQUEST_BYTES`] each (the receiver STOPs a longer one), and the
//! receiver's total time (`[sa] rmpp_total_timeout_ms`, then ABORT 118).
//! A segment that starts no transfer and belongs to none is dropped, as a
//! receiver drops what is out of order. A finished transfer is kept (its
//! data gone) for [`KEEP_DONE`], counted in no bound, so a repeat of its
//! last segment, sent because the final ACK was lost, gets that ACK again
//! (the kernel keeps a finished receive as long).

use std::collections::HashMap;
use std::time::Duration;

use crate::datagram::{Datagram, MadAddress};
use crate::mad::rmpp::RmppHeaderRepr;
use crate::rmpp::{RmppConfig, RmppError, RmppReceiver};
use crate::types::Lid;

/// Transfers under way at once.
pub(super) const MAX_TRANSFERS: usize = 64;
/// Of those, from one requester LID.
pub(super) const PER_REQUESTER: usize = 4;
/// The data one request may carry: a MultiPathRecord of 255 SGIDs and
/// 255 DGIDs is 8 KiB.
pub(super) const MAX_REQUEST_BYTES: usize = 64 << 10;

/// How long a finished transfer still answers repeats.
pub(super) const KEEP_DONE: Duration = Duration::from_secs(10);

type Key = (Lid, u32, u64);

struct Transfer {
    addr: MadAddress,
    rx: RmppReceiver,
    /// When the request came whole (then only repeats are answered).
    done_at: Option<Duration>,
}

/// What one segment did.
#[derive(Debug)]
pub(super) enum Step {
    /// The transfer goes on (or the segment was dropped).
    Going,
    /// The request is whole: the first segment's header and all the data.
    Whole(Vec<u8>),
    /// The transfer ended without it (an ABORT or STOP went back).
    Failed(RmppError),
    /// A new transfer with no room: refuse the request.
    NoRoom,
    /// Not a segment 1 with First, and no transfer of it: dropped.
    Stray,
}

/// Every multi-segment request being received.
#[derive(Default)]
pub(super) struct Reassembly {
    transfers: HashMap<Key, Transfer>,
}

impl Reassembly {
    /// Transfers under way (finished ones not counted).
    pub(super) fn len(&self) -> usize {
        self.transfers.values().filter(|t| t.done_at.is_none()).count()
    }

    /// Takes one segment of a request with `tid` from `dgram.addr`; what
    /// it calls for (ACKs, an ABORT or STOP) goes to `send`.
    pub(super) fn take(
        &mut self,
        now: Duration,
        dgram: &Datagram,
        tid: u64,
        cfg: RmppConfig,
        send: &mut impl FnMut(Datagram),
    ) -> Step {
        let key = (dgram.addr.lid, dgram.addr.qpn, tid);
        if !self.transfers.contains_key(&key) {
            let first = RmppHeaderRepr::parse_bytes(&dgram.mad).is_ok_and(|h| h.flags.first);
            if !first {
                return Step::Stray;
            }
            let active = self.transfers.iter().filter(|(_, t)| t.done_at.is_none());
            let mine = active.clone().filter(|(k, _)| k.0 == key.0).count();
            if active.count() >= MAX_TRANSFERS || mine >= PER_REQUESTER {
                return Step::NoRoom;
            }
            let cfg = RmppConfig { max_bytes: MAX_REQUEST_BYTES, ..cfg };
            let rx = RmppReceiver::new(now, cfg);
            self.transfers.insert(key, Transfer { addr: dgram.addr, rx, done_at: None });
        }
        let t = self.transfers.get_mut(&key).expect("present or just made");
        // A segment it refuses is answered (or not) by the receiver itself.
        let _ = t.rx.handle_mad(now, &dgram.mad);
        while let Some(mad) = t.rx.poll_transmit() {
            send(Datagram { addr: t.addr, mad });
        }
        match t.rx.take_result() {
            // Under way, or a repeat of a finished one (answered above).
            None => Step::Going,
            Some(Ok(whole)) => {
                t.done_at = Some(now);
                Step::Whole(whole)
            }
            Some(Err(e)) => {
                self.transfers.remove(&key);
                Step::Failed(e)
            }
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) next has work.
    pub(super) fn poll_timeout(&self) -> Option<Duration> {
        self.transfers.values().filter_map(|t| t.done_at.map(|d| d + KEEP_DONE).or(t.rx.poll_timeout())).min()
    }

    /// Ends the transfers past their total time (their ABORTs to `send`);
    /// returns who each was from and why it ended.
    pub(super) fn handle_timeout(&mut self, now: Duration, send: &mut impl FnMut(Datagram)) -> Vec<(Lid, RmppError)> {
        let mut ended = Vec::new();
        self.transfers.retain(|key, t| {
            if let Some(done) = t.done_at {
                return now < done + KEEP_DONE;
            }
            t.rx.handle_timeout(now);
            while let Some(mad) = t.rx.poll_transmit() {
                send(Datagram { addr: t.addr, mad });
            }
            match t.rx.take_result() {
                Some(Err(e)) => {
                    ended.push((key.0, e));
                    false
                }
                Some(Ok(_)) => false,
                None => true,
            }
        });
        ended
    }
}
