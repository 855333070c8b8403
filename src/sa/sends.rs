//! Multi-MAD answers in flight: one [`RmppSender`] per answer, keyed by
//! the requester's LID and QP and the request's TID (low 32 bits: a
//! requester's kernel owns the high ones), so its ACK, STOP and ABORT find
//! their transfer and a repeated request while the answer is still going
//! out starts nothing new. Bounded in number, in bytes and per requester;
//! segments of concurrent answers go out in turn.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use std::time::Duration;

use crate::datagram::{Datagram, MadAddress};
use crate::rmpp::{RmppConfig, RmppSender, TransferState};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SendKey {
    pub lid: u16,
    pub qpn: u32,
    pub tid: u32,
}

impl SendKey {
    pub fn new(addr: &MadAddress, tid: u64) -> Self {
        SendKey { lid: addr.lid.0, qpn: addr.qpn, tid: tid as u32 }
    }
}

#[derive(Debug)]
struct Send {
    addr: MadAddress,
    sender: RmppSender,
    bytes: usize,
}

/// Why an answer could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendError {
    /// `max_rmpp_sends` or `max_rmpp_bytes` reached.
    Busy,
    /// The requester (by LID) has `max_rmpp_sends_per_requester` in flight.
    RequesterBusy,
    /// The sender refused the payload (longer than RMPP can count).
    Refused,
}

/// How transfers ended, for the stats.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ended {
    pub completed: u64,
    pub failed: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Sends {
    map: BTreeMap<SendKey, Send>,
    bytes: usize,
    /// The last transfer a segment came from (segments go out in turn).
    cursor: Option<SendKey>,
}

impl Sends {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn contains(&self, key: &SendKey) -> bool {
        self.map.contains_key(key)
    }

    /// Transfers in flight to the requester at `lid` (any QP, any TID).
    pub fn to_requester(&self, lid: u16) -> usize {
        let (lo, hi) = (SendKey { lid, qpn: 0, tid: 0 }, SendKey { lid, qpn: u32::MAX, tid: u32::MAX });
        self.map.range(lo..=hi).count()
    }

    /// Whether one more answer to the requester at `lid` may start, and
    /// then the bytes of `max_bytes` still free for it: checked before an
    /// answer is built, so a full table costs no building.
    pub fn room(&self, lid: u16, max_sends: usize, max_bytes: usize, per_requester: usize) -> Result<usize, SendError> {
        if self.map.len() >= max_sends || self.bytes >= max_bytes {
            return Err(SendError::Busy);
        }
        if self.to_requester(lid) >= per_requester {
            return Err(SendError::RequesterBusy);
        }
        Ok(max_bytes - self.bytes)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &mut self,
        now: Duration,
        key: SendKey,
        addr: MadAddress,
        template: &[u8],
        payload: Vec<u8>,
        cfg: RmppConfig,
        max_sends: usize,
        max_bytes: usize,
    ) -> Result<(), SendError> {
        let bytes = payload.len();
        if self.map.len() >= max_sends || self.bytes + bytes > max_bytes {
            return Err(SendError::Busy);
        }
        let sender = RmppSender::new(now, template, payload, cfg).map_err(|_| SendError::Refused)?;
        self.bytes += bytes;
        self.map.insert(key, Send { addr, sender, bytes });
        Ok(())
    }

    /// An ACK, STOP or ABORT from a receiver; `false` when no transfer has
    /// that key.
    pub fn handle_mad(&mut self, now: Duration, key: &SendKey, mad: &[u8]) -> bool {
        match self.map.get_mut(key) {
            Some(s) => {
                // A refused MAD leaves the transfer as it was, or ends it;
                // its state says which.
                let _ = s.sender.handle_mad(now, mad);
                true
            }
            None => false,
        }
    }

    /// The next segment (or ABORT) to send, taking transfers in turn.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<(Datagram, bool)> {
        let keys: Vec<SendKey> = match self.cursor {
            Some(c) => self.map.range((Excluded(c), Unbounded)).chain(self.map.range(..=c)).map(|(k, _)| *k).collect(),
            None => self.map.keys().copied().collect(),
        };
        for key in keys {
            let Some(s) = self.map.get_mut(&key) else { continue };
            let resent_before = s.sender.stats().resent;
            if let Some(mad) = s.sender.poll_transmit(now) {
                self.cursor = Some(key);
                let resent = s.sender.stats().resent > resent_before;
                return Some((Datagram { addr: s.addr, mad }, resent));
            }
        }
        None
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        self.map.values().filter_map(|s| s.sender.poll_timeout()).min()
    }

    pub fn handle_timeout(&mut self, now: Duration) {
        for s in self.map.values_mut() {
            s.sender.handle_timeout(now);
        }
    }

    /// Removes finished transfers.
    pub fn reap(&mut self) -> Ended {
        let mut ended = Ended::default();
        let done: Vec<SendKey> = self.map.iter().filter(|(_, s)| s.sender.is_done()).map(|(k, _)| *k).collect();
        for k in done {
            if let Some(s) = self.map.remove(&k) {
                self.bytes -= s.bytes;
                match s.sender.state() {
                    TransferState::Done => ended.completed += 1,
                    _ => ended.failed += 1,
                }
            }
        }
        ended
    }

    /// Drops every transfer (the SA stopped serving); returns how many.
    pub fn clear(&mut self) -> usize {
        let n = self.map.len();
        self.map.clear();
        self.bytes = 0;
        self.cursor = None;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::rmpp::RmppHeaderRepr;
    use crate::mad::sa::SA_DATA_OFFSET;
    use crate::types::Lid;

    fn template(tid: u64) -> Vec<u8> {
        let mut t = vec![0u8; SA_DATA_OFFSET];
        t[..4].copy_from_slice(&[1, 0x03, 2, 0x92]);
        t[8..16].copy_from_slice(&tid.to_be_bytes());
        t
    }

    /// Found by fuzz/fuzz_targets/sa_agent.rs (seed `flood`): once the
    /// transfer the round-robin cursor points at has ended and been
    /// reaped, the next transfer after it was skipped, so a lone one
    /// never sent again (its segments nor its ABORT) and held its slot
    /// for good.
    #[test]
    fn room_counts_slots_bytes_and_each_requester() {
        let now = Duration::ZERO;
        let mut s = Sends::default();
        let (a, b) = (MadAddress::gsi(Lid(1), 0), MadAddress::gsi(Lid(2), 0));
        assert_eq!(s.room(1, 3, 1000, 2), Ok(1000));
        for tid in [7, 8] {
            s.start(now, SendKey::new(&a, tid), a, &template(tid), vec![0; 300], RmppConfig::default(), 3, 1000)
                .unwrap();
        }
        assert_eq!(s.to_requester(1), 2);
        assert_eq!(s.room(1, 3, 1000, 2), Err(SendError::RequesterBusy), "LID 1 has its two");
        assert_eq!(s.room(2, 3, 1000, 2), Ok(400), "another requester gets what is left");
        s.start(now, SendKey::new(&b, 7), b, &template(7), vec![0; 400], RmppConfig::default(), 3, 1000).unwrap();
        assert_eq!(s.room(3, 4, 1000, 2), Err(SendError::Busy), "no byte left");
        assert_eq!(s.room(3, 3, 2000, 2), Err(SendError::Busy), "no slot left");
        assert_eq!(s.clear(), 3);
        assert_eq!(s.room(1, 3, 1000, 2), Ok(1000));
    }

    #[test]
    fn a_reaped_cursor_skips_no_transfer() {
        let now = Duration::ZERO;
        let mut s = Sends::default();
        let (a, b) = (MadAddress::gsi(Lid(1), 0), MadAddress::gsi(Lid(2), 0));
        let (ka, kb) = (SendKey::new(&a, 7), SendKey::new(&b, 7));
        for (k, addr) in [(ka, a), (kb, b)] {
            s.start(now, k, addr, &template(7), vec![0xAB; 10], RmppConfig::default(), 4, 1 << 20).unwrap();
        }
        let (first, _) = s.poll_transmit(now).expect("A's only segment");
        assert_eq!(first.addr, a);
        let mut ack = template(7);
        ack.resize(256, 0);
        ack[3] = 0x12;
        RmppHeaderRepr::ack(1, 1).emit_bytes(&mut ack).unwrap();
        assert!(s.handle_mad(now, &ka, &ack));
        assert_eq!(s.reap(), Ended { completed: 1, failed: 0 });
        let (next, _) = s.poll_transmit(now).expect("B's segment still goes out");
        assert_eq!(next.addr, b);
    }
}
