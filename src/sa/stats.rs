//! What the SA did, counted: per query kind, per status, every drop by
//! reason, RMPP sends and Reports. Counters only grow (except the gauges
//! marked so), so a reader can take differences.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::mad::{Method, SaAttributeId};

/// Counters of one (attribute, method) pair of requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryCounts {
    /// Requests that reached the attribute's handler.
    pub requests: u64,
    /// Answered with status 0.
    pub ok: u64,
    /// Answered with a non-zero status.
    pub errors: u64,
    /// Records carried by the successful answers.
    pub records: u64,
}

/// Why a MAD got no answer, or an answer could not be sent whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drops {
    /// Shorter than a MAD header, not of the SA class, or a one-way method
    /// the SA does not take (Send, Trap, Report, TrapRepress).
    pub malformed: u64,
    /// Requests while not serving and `not_serving = "silent"`.
    pub not_serving: u64,
    /// A non-zero SM_Key other than the SA key (IBA C15-0.1.5).
    pub bad_sm_key: u64,
    /// Responses nobody waits for (no Report with that TID).
    pub stray_responses: u64,
    /// RMPP ACK/STOP/ABORT for no send in progress.
    pub stray_rmpp: u64,
    /// A request again while its multi-MAD answer is still being sent.
    pub duplicate_requests: u64,
    /// Multi-segment RMPP requests not reassembled: no room for another
    /// transfer (answered ERR_NO_RESOURCES), a transfer the requester
    /// broke or let time out (ABORTed), a segment of no transfer.
    pub segmented_requests: u64,
    /// Answers refused because `max_rmpp_sends` or `max_rmpp_bytes` was
    /// reached (answered ERR_NO_RESOURCES).
    pub rmpp_busy: u64,
    /// Answers refused because their requester had
    /// `max_rmpp_sends_per_requester` in flight (ERR_NO_RESOURCES).
    pub rmpp_requester_cap: u64,
    /// Answers over `max_answer_bytes` (answered ERR_NO_RESOURCES).
    pub answer_too_large: u64,
    /// ServiceRecord Sets over a cap (answered ERR_NO_RESOURCES).
    pub service_cap: u64,
    /// InformInfo subscriptions over a cap (answered ERR_NO_RESOURCES).
    pub subscription_cap: u64,
    /// Alias GUIDs over a cap (answered ERR_NO_RESOURCES).
    pub alias_guid_cap: u64,
    /// Multicast joins over a cap, or with no MLID free (answered
    /// ERR_NO_RESOURCES).
    pub mcast_cap: u64,
    /// Reports with no room in `max_reports`.
    pub report_cap: u64,
    /// Reports to a subscriber with `max_reports_per_subscriber` waiting.
    pub report_subscriber_cap: u64,
    /// Answers with no room in `max_queued`, and requests the receiver
    /// thread had to hand to the SA task when its queue was full.
    pub queue_full: u64,
    /// MADs dropped before they were read because their requester held
    /// more than its share of the SA's queue (`super::fair`).
    pub requester_share: u64,
}

/// Multi-MAD answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RmppCounts {
    /// Multi-segment requests received whole (`super::reassembly`).
    pub requests_received: u64,
    pub started: u64,
    /// Every segment acknowledged.
    pub completed: u64,
    /// Ended without the last ACK: timed out, STOPped or ABORTed.
    pub failed: u64,
    /// Segments put on the wire, resends included.
    pub segments: u64,
    /// Of `segments`, sent again after an ACK was late.
    pub resent: u64,
    /// In flight now (a gauge).
    pub in_flight: u64,
}

/// Reports (IBA 13.4.8.2), sent to InformInfo subscribers (13.4.8.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportCounts {
    /// Reports made for subscribers (traps 64/65 and forwarded traps).
    pub queued: u64,
    /// Report MADs put on the wire, resends included.
    pub sent: u64,
    pub resent: u64,
    /// Answered with ReportResp.
    pub acknowledged: u64,
    /// Retries ran out.
    pub given_up: u64,
    /// Traps 64 and 65 the SA made from snapshot differences.
    pub gid_in_service: u64,
    pub gid_out_of_service: u64,
    /// Traps the SM received and handed to the SA.
    pub traps_received: u64,
    /// Traps 66 and 67 the SA made (a multicast group got its first full
    /// member, lost its last).
    pub mcast_created: u64,
    pub mcast_deleted: u64,
}

/// Multicast groups (MCMemberRecord, `super::mcast`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct McastCounts {
    /// Joins (SubnAdmSet) and leaves (SubnAdmDelete) answered with status 0.
    pub joins: u64,
    pub leaves: u64,
    /// Refused (any SA status).
    pub join_errors: u64,
    pub leave_errors: u64,
    /// Members a snapshot removed: their port left the fabric or the
    /// group's partition.
    pub members_dropped: u64,
    /// Well-known groups of the partitions that found no free MLID.
    pub well_known_unplaced: u64,
    /// Groups and memberships now (gauges).
    pub groups: u64,
    pub members: u64,
}

/// A standby's mirror of the master's SA state, and what takeovers
/// imported from it (`super::mirror`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MirrorCounts {
    /// Mirror reads kept (at least one table answered).
    pub reads: u64,
    /// Reads that came while serving as master, dropped (one under way at
    /// the takeover).
    pub ignored: u64,
    /// Records a read carried past the caps, left out of the copy.
    pub over_cap: u64,
    /// Held in the copy now (gauges).
    pub held_services: u64,
    pub held_subscriptions: u64,
    pub held_alias_guids: u64,
    /// Takeovers that found a copy to import.
    pub takeovers: u64,
    /// Added to the live state by takeovers.
    pub imported_services: u64,
    pub imported_subscriptions: u64,
    pub imported_alias_guids: u64,
    /// Left out by takeovers: already present (not overwritten), their
    /// port gone from the fabric, refused (an alias GUID in use or past
    /// GUIDCap), over a live cap.
    pub skipped_present: u64,
    pub skipped_port_gone: u64,
    pub skipped_refused: u64,
    pub skipped_over_cap: u64,
}

/// Everything the SA counts; see [`super::SaAgent::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaStats {
    /// Every MAD handed to `handle_mad`.
    pub received: u64,
    /// Answer MADs emitted (one per single-MAD answer; RMPP segments are
    /// in `rmpp.segments`).
    pub answered: u64,
    /// Requests by (attribute ID, method); codes the SA does not know
    /// under [`SaStats::OTHER_QUERY`].
    pub by_query: BTreeMap<(u16, u8), QueryCounts>,
    /// Non-zero status words sent, by value.
    pub by_status: BTreeMap<u16, u64>,
    pub drops: Drops,
    pub rmpp: RmppCounts,
    pub reports: ReportCounts,
    /// Snapshots taken in, and the records built from the last (a gauge).
    pub snapshots: u64,
    pub records: u64,
    /// Registered now (gauges).
    pub services: u64,
    pub subscriptions: u64,
    pub alias_guids: u64,
    /// ServiceRecords whose lease ran out.
    pub leases_expired: u64,
    pub mirror: MirrorCounts,
    pub mcast: McastCounts,
    /// The state stream between SMs (`super::sync`).
    pub sync: super::sync::SyncStats,
}

impl SaStats {
    /// The `by_query` key of requests whose attribute or method is no code
    /// the SA knows: all of them count here, so made-up IDs add one key
    /// (and one metric series), not one each.
    pub const OTHER_QUERY: (u16, u8) = (0xFFFF, 0xFF);

    /// The counters of one (attribute, method) pair; unknown codes share
    /// [`Self::OTHER_QUERY`].
    pub(crate) fn query(&mut self, attribute: SaAttributeId, method: Method) -> &mut QueryCounts {
        let key = match (attribute, method) {
            (SaAttributeId::Unknown(_), _) | (_, Method::Unknown(_)) => Self::OTHER_QUERY,
            (a, m) => (a.into(), m.into()),
        };
        self.by_query.entry(key).or_default()
    }
}

/// At most one log line per reason per period: floods are counted, not
/// logged one by one.
#[derive(Debug, Default)]
pub(crate) struct LogGate {
    last: BTreeMap<&'static str, Duration>,
}

impl LogGate {
    /// Whether a line about `reason` may be logged now.
    pub fn allow(&mut self, now: Duration, period: Duration, reason: &'static str) -> bool {
        match self.last.get(reason) {
            Some(&at) if now.saturating_sub(at) < period => false,
            _ => {
                self.last.insert(reason, now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_attributes_and_methods_share_one_key() {
        let mut s = SaStats::default();
        for raw in 0..=u16::MAX {
            s.query(SaAttributeId::from(raw), Method::Get).requests += 1;
            s.query(SaAttributeId::NodeRecord, Method::from(raw as u8)).requests += 1;
        }
        let known_attributes = (0..=u16::MAX).filter(|&a| !matches!(SaAttributeId::from(a), SaAttributeId::Unknown(_)));
        let known_methods = (0..=255u8).filter(|&m| !matches!(Method::from(m), Method::Unknown(_)));
        let (na, nm) = (known_attributes.count(), known_methods.count());
        // Each known attribute with Get, each known method with NodeRecord
        // (one pair in both), and the one bucket for the rest.
        assert_eq!(s.by_query.len(), na + nm - 1 + 1);
        let unknown = (1 << 16) - na as u64 + 256 * (256 - nm as u64);
        assert_eq!(s.by_query[&SaStats::OTHER_QUERY].requests, unknown);
        // NodeRecord Get: once as an attribute, 256 times as a method.
        assert_eq!(s.by_query[&(0x0011, 0x01)].requests, 1 + 256);
        assert!(!s.by_query.contains_key(&(0x0035, 0x12)), "untouched pairs are absent");
    }

    #[test]
    fn the_gate_lets_one_line_per_reason_per_period() {
        let mut g = LogGate::default();
        let p = Duration::from_secs(10);
        assert!(g.allow(Duration::from_secs(1), p, "a"));
        assert!(!g.allow(Duration::from_secs(5), p, "a"));
        assert!(g.allow(Duration::from_secs(5), p, "b"));
        assert!(g.allow(Duration::from_secs(11), p, "a"));
    }
}
