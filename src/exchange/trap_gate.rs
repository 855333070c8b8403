//! The per-source trap rate limit: a port that floods the SM with traps
//! (a broken SMA, a rogue host) must not starve the sweep, the SA or the
//! other ports' traps. Each source LID has a bucket of
//! `sm.trap_rate_limit` tokens, refilled at that rate; a trap with no
//! token is dropped unanswered and counted. Unanswered, a genuine trap is
//! sent again by its port (IBA 13.4.9: until the SM represses it), so a
//! burst over the limit delays the SM's reaction, never loses it.
//!
//! I/O-free and driven by `now`. The transport's I/O thread runs it on
//! every trap it receives, before the queue to the SM: a flood never
//! fills that queue, which SA queries and SMInfo polls share.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::types::Lid;

/// Sources kept at most; past this, buckets that are full again (their
/// sources quiet for a second) are forgotten.
const SOURCES_KEPT: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Duration,
}

/// Token buckets per source LID, and the drops not yet reported.
#[derive(Debug, Clone)]
pub struct TrapGate {
    /// Traps per second per source; 0: no limit.
    rate: u32,
    buckets: HashMap<Lid, Bucket>,
    /// Drops since the last [`TrapGate::take_dropped`], by source.
    dropped: BTreeMap<Lid, u64>,
}

impl TrapGate {
    pub fn new(rate: u32) -> Self {
        TrapGate { rate, buckets: HashMap::new(), dropped: BTreeMap::new() }
    }

    /// Whether a trap from `source` arriving `now` is taken.
    pub fn admit(&mut self, now: Duration, source: Lid) -> bool {
        if self.rate == 0 {
            return true;
        }
        let rate = self.rate as f64;
        if self.buckets.len() >= SOURCES_KEPT && !self.buckets.contains_key(&source) {
            self.buckets.retain(|_, b| b.tokens + now.saturating_sub(b.last).as_secs_f64() * rate < rate);
        }
        let b = self.buckets.entry(source).or_insert(Bucket { tokens: rate, last: now });
        b.tokens = (b.tokens + now.saturating_sub(b.last).as_secs_f64() * rate).min(rate);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            *self.dropped.entry(source).or_default() += 1;
            false
        }
    }

    /// The drops by source since the last call, for one log line each.
    pub fn take_dropped(&mut self) -> BTreeMap<Lid, u64> {
        std::mem::take(&mut self.dropped)
    }

    /// Whether `mad` is a trap (an SMP of method Trap), which the gate
    /// applies to.
    pub fn is_trap(mad: &[u8]) -> bool {
        mad.len() > 3
            && (mad[1] == u8::from(crate::mad::MgmtClass::SubnMgmtLid)
                || mad[1] == u8::from(crate::mad::MgmtClass::SubnMgmtDirected))
            && mad[3] == u8::from(crate::mad::Method::Trap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_from_one_source_is_cut_to_the_rate_and_others_pass() {
        let mut gate = TrapGate::new(100);
        let (flood, quiet) = (Lid(7), Lid(9));
        let mut taken = 0;
        // 10,000 traps in one second from one port, one a second from another.
        for i in 0..10_000u64 {
            let now = Duration::from_micros(i * 100);
            taken += gate.admit(now, flood) as u32;
            if i % 1000 == 0 {
                assert!(gate.admit(now, quiet), "the quiet source is never limited");
            }
        }
        // A full bucket, then the refill over the second.
        assert!((195..=201).contains(&taken), "taken {taken}");
        let dropped = gate.take_dropped();
        assert_eq!(dropped.get(&flood).copied(), Some(10_000 - taken as u64));
        assert!(!dropped.contains_key(&quiet));
        assert!(gate.take_dropped().is_empty(), "reported once");
    }

    #[test]
    fn a_burst_within_the_bucket_passes_whole() {
        let mut gate = TrapGate::new(100);
        // A leaf that lost 36 cables at once.
        assert!((0..36).all(|_| gate.admit(Duration::from_secs(5), Lid(3))));
    }

    #[test]
    fn zero_means_no_limit() {
        let mut gate = TrapGate::new(0);
        assert!((0..100_000).all(|_| gate.admit(Duration::ZERO, Lid(1))));
    }

    #[test]
    fn many_sources_stay_bounded() {
        let mut gate = TrapGate::new(10);
        for lid in 1..20_000u16 {
            gate.admit(Duration::from_secs(lid as u64), Lid(lid));
        }
        assert!(gate.buckets.len() <= SOURCES_KEPT);
    }
}
