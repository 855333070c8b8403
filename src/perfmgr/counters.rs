//! The accounting: ibsm's own monotonic 64-bit total per port and counter,
//! whatever the port's counters do.
//!
//! - The first reading of a counter is its baseline: the total starts at
//!   the reading (what the port counted since its last clear).
//! - After that each reading adds its rise since the previous one.
//! - A reading below the previous one means someone cleared the counter
//!   (perfquery -R, another manager, a reset port); hardware counters stop
//!   at their maximum rather than wrap (IBA 16.1.3.5). The rise is then the
//!   reading itself, never a negative or a 2^32-sized spike.
//! - A counter past half its range is cleared by ibsm (Set PortCounters
//!   with its CounterSelect bit), so it never sits saturated, losing
//!   counts; after the clear is answered the next reading counts from 0.
//!   A clear whose answer was lost is caught by the backwards rule.
//!   Counters read from PortCountersExtended are 64 bits and never cleared.
//! - A port away from the fabric for a while keeps its account; when it
//!   returns ([`PortAccount::resume`]) the same rules continue from the
//!   reading before it left. Both rises (the difference, or the reading
//!   after a clear) only count what the port counted while away: never
//!   more, so never a spike, and the LinkDowned that took it away is kept.
//!   That rise spans the absence, not one interval, so it is not judged
//!   as an error jump. A counter whose width changed meanwhile (its node
//!   answered another CapabilityMask: 32-bit PortCounters against 64-bit
//!   PortCountersExtended) is not the same counter: its reading is a new
//!   base and adds nothing.
//!
//! Half, not OpenSM's 75%: the counts between the reading and the clear
//! are lost either way, and half leaves the most headroom for a port that
//! answers the clear late. (32-bit PortXmitData fills in seconds on a
//! modern link whatever the threshold; ports without extended counters
//! are old and slow, or their data counters are approximate.)

use std::time::Duration;

use crate::mad::perf::port_counters::{select, select2};
use crate::mad::perf::{perf_cap, PortCountersExtendedRepr, PortCountersRepr};

/// Every counter ibsm keeps, with its Prometheus name stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    SymbolErrors,
    LinkErrorRecoveries,
    LinkDowned,
    RcvErrors,
    RcvRemotePhysicalErrors,
    RcvSwitchRelayErrors,
    XmitDiscards,
    XmitConstraintErrors,
    RcvConstraintErrors,
    LocalLinkIntegrityErrors,
    ExcessiveBufferOverrunErrors,
    Vl15Dropped,
    XmitWait,
    XmitData,
    RcvData,
    XmitPkts,
    RcvPkts,
    UnicastXmitPkts,
    UnicastRcvPkts,
    MulticastXmitPkts,
    MulticastRcvPkts,
}

/// How many counters there are.
pub const COUNTERS: usize = 21;

/// One value per counter.
pub type PerCounter<T> = [T; COUNTERS];

impl Counter {
    pub const ALL: [Counter; COUNTERS] = [
        Counter::SymbolErrors,
        Counter::LinkErrorRecoveries,
        Counter::LinkDowned,
        Counter::RcvErrors,
        Counter::RcvRemotePhysicalErrors,
        Counter::RcvSwitchRelayErrors,
        Counter::XmitDiscards,
        Counter::XmitConstraintErrors,
        Counter::RcvConstraintErrors,
        Counter::LocalLinkIntegrityErrors,
        Counter::ExcessiveBufferOverrunErrors,
        Counter::Vl15Dropped,
        Counter::XmitWait,
        Counter::XmitData,
        Counter::RcvData,
        Counter::XmitPkts,
        Counter::RcvPkts,
        Counter::UnicastXmitPkts,
        Counter::UnicastRcvPkts,
        Counter::MulticastXmitPkts,
        Counter::MulticastRcvPkts,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// The metric name without the registry's `ibsm_` prefix.
    pub fn metric(self) -> &'static str {
        match self {
            Counter::SymbolErrors => "port_symbol_errors_total",
            Counter::LinkErrorRecoveries => "port_link_error_recoveries_total",
            Counter::LinkDowned => "port_link_downed_total",
            Counter::RcvErrors => "port_rcv_errors_total",
            Counter::RcvRemotePhysicalErrors => "port_rcv_remote_physical_errors_total",
            Counter::RcvSwitchRelayErrors => "port_rcv_switch_relay_errors_total",
            Counter::XmitDiscards => "port_xmit_discards_total",
            Counter::XmitConstraintErrors => "port_xmit_constraint_errors_total",
            Counter::RcvConstraintErrors => "port_rcv_constraint_errors_total",
            Counter::LocalLinkIntegrityErrors => "port_local_link_integrity_errors_total",
            Counter::ExcessiveBufferOverrunErrors => "port_excessive_buffer_overrun_errors_total",
            Counter::Vl15Dropped => "port_vl15_dropped_total",
            Counter::XmitWait => "port_xmit_wait_total",
            Counter::XmitData => "port_xmit_data_bytes_total",
            Counter::RcvData => "port_rcv_data_bytes_total",
            Counter::XmitPkts => "port_xmit_packets_total",
            Counter::RcvPkts => "port_rcv_packets_total",
            Counter::UnicastXmitPkts => "port_unicast_xmit_packets_total",
            Counter::UnicastRcvPkts => "port_unicast_rcv_packets_total",
            Counter::MulticastXmitPkts => "port_multicast_xmit_packets_total",
            Counter::MulticastRcvPkts => "port_multicast_rcv_packets_total",
        }
    }

    /// The IBA name, for log lines.
    pub fn iba_name(self) -> &'static str {
        match self {
            Counter::SymbolErrors => "SymbolErrorCounter",
            Counter::LinkErrorRecoveries => "LinkErrorRecoveryCounter",
            Counter::LinkDowned => "LinkDownedCounter",
            Counter::RcvErrors => "PortRcvErrors",
            Counter::RcvRemotePhysicalErrors => "PortRcvRemotePhysicalErrors",
            Counter::RcvSwitchRelayErrors => "PortRcvSwitchRelayErrors",
            Counter::XmitDiscards => "PortXmitDiscards",
            Counter::XmitConstraintErrors => "PortXmitConstraintErrors",
            Counter::RcvConstraintErrors => "PortRcvConstraintErrors",
            Counter::LocalLinkIntegrityErrors => "LocalLinkIntegrityErrors",
            Counter::ExcessiveBufferOverrunErrors => "ExcessiveBufferOverrunErrors",
            Counter::Vl15Dropped => "VL15Dropped",
            Counter::XmitWait => "PortXmitWait",
            Counter::XmitData => "PortXmitData",
            Counter::RcvData => "PortRcvData",
            Counter::XmitPkts => "PortXmitPkts",
            Counter::RcvPkts => "PortRcvPkts",
            Counter::UnicastXmitPkts => "PortUnicastXmitPkts",
            Counter::UnicastRcvPkts => "PortUnicastRcvPkts",
            Counter::MulticastXmitPkts => "PortMulticastXmitPkts",
            Counter::MulticastRcvPkts => "PortMulticastRcvPkts",
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            Counter::SymbolErrors => "Minor link errors detected on a physical lane (SymbolErrorCounter)",
            Counter::LinkErrorRecoveries => "Link error recovery processes completed (LinkErrorRecoveryCounter)",
            Counter::LinkDowned => "Times the link error recovery failed and the link went down (LinkDownedCounter)",
            Counter::RcvErrors => "Packets received with errors (PortRcvErrors)",
            Counter::RcvRemotePhysicalErrors => {
                "Packets received marked bad by an upstream port (PortRcvRemotePhysicalErrors)"
            }
            Counter::RcvSwitchRelayErrors => "Packets a switch could not forward (PortRcvSwitchRelayErrors)",
            Counter::XmitDiscards => "Outbound packets discarded: port down or congested (PortXmitDiscards)",
            Counter::XmitConstraintErrors => {
                "Packets not sent for partition or raw filtering (PortXmitConstraintErrors)"
            }
            Counter::RcvConstraintErrors => {
                "Packets received and dropped by partition or raw filtering (PortRcvConstraintErrors)"
            }
            Counter::LocalLinkIntegrityErrors => {
                "Times the local physical error rate exceeded its threshold (LocalLinkIntegrityErrors)"
            }
            Counter::ExcessiveBufferOverrunErrors => {
                "Times consecutive flow-control overruns exceeded the limit (ExcessiveBufferOverrunErrors)"
            }
            Counter::Vl15Dropped => "Subnet management packets dropped for lack of buffers (VL15Dropped)",
            Counter::XmitWait => "Ticks the port had data to send but no credits (PortXmitWait)",
            Counter::XmitData => "Bytes sent, LRH to VCRC exclusive (PortXmitData x 4)",
            Counter::RcvData => "Bytes received, LRH to VCRC exclusive (PortRcvData x 4)",
            Counter::XmitPkts => "Packets sent on all VLs (PortXmitPkts)",
            Counter::RcvPkts => "Packets received on all VLs (PortRcvPkts)",
            Counter::UnicastXmitPkts => "Unicast packets sent (PortUnicastXmitPkts)",
            Counter::UnicastRcvPkts => "Unicast packets received (PortUnicastRcvPkts)",
            Counter::MulticastXmitPkts => "Multicast packets sent (PortMulticastXmitPkts)",
            Counter::MulticastRcvPkts => "Multicast packets received (PortMulticastRcvPkts)",
        }
    }

    /// Counted errors: what an error jump is about.
    pub fn is_error(self) -> bool {
        self.index() <= Counter::Vl15Dropped.index()
    }

    /// The data counters count 4-byte words.
    pub fn unit_factor(self) -> u64 {
        match self {
            Counter::XmitData | Counter::RcvData => 4,
            _ => 1,
        }
    }

    /// The PortCounters CounterSelect and CounterSelect2 bits that clear
    /// this counter (none for those PortCounters lacks).
    pub fn select(self) -> (u16, u8) {
        match self {
            Counter::SymbolErrors => (select::SYMBOL_ERROR_COUNTER, 0),
            Counter::LinkErrorRecoveries => (select::LINK_ERROR_RECOVERY_COUNTER, 0),
            Counter::LinkDowned => (select::LINK_DOWNED_COUNTER, 0),
            Counter::RcvErrors => (select::PORT_RCV_ERRORS, 0),
            Counter::RcvRemotePhysicalErrors => (select::PORT_RCV_REMOTE_PHYSICAL_ERRORS, 0),
            Counter::RcvSwitchRelayErrors => (select::PORT_RCV_SWITCH_RELAY_ERRORS, 0),
            Counter::XmitDiscards => (select::PORT_XMIT_DISCARDS, 0),
            Counter::XmitConstraintErrors => (select::PORT_XMIT_CONSTRAINT_ERRORS, 0),
            Counter::RcvConstraintErrors => (select::PORT_RCV_CONSTRAINT_ERRORS, 0),
            Counter::LocalLinkIntegrityErrors => (select::LOCAL_LINK_INTEGRITY_ERRORS, 0),
            Counter::ExcessiveBufferOverrunErrors => (select::EXCESSIVE_BUFFER_OVERRUN_ERRORS, 0),
            Counter::Vl15Dropped => (select::VL15_DROPPED, 0),
            Counter::XmitWait => (0, select2::PORT_XMIT_WAIT),
            Counter::XmitData => (select::PORT_XMIT_DATA, 0),
            Counter::RcvData => (select::PORT_RCV_DATA, 0),
            Counter::XmitPkts => (select::PORT_XMIT_PKTS, 0),
            Counter::RcvPkts => (select::PORT_RCV_PKTS, 0),
            _ => (0, 0),
        }
    }
}

/// One reading of a port: each counter's raw value and width in bits, or
/// `None` where this reading did not carry the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub values: PerCounter<Option<(u64, u8)>>,
}

/// Which 64-bit counters a port's PMA offers, from its ClassPortInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extended {
    /// No PortCountersExtended: data and packets from 32-bit PortCounters.
    None,
    /// Data and packets in and out only (IsExtendedWidthSupportedNoIETF).
    DataOnly,
    /// Every counter (IsExtendedWidthSupported).
    Full,
}

/// What a port's PMA offers, from the CapabilityMask of its PerfMgt
/// ClassPortInfo (IBA 16.1.3.1; the bits in [`perf_cap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PmaCaps {
    pub extended: Extended,
    /// PortCounters' PortXmitWait counts (IsPortCountersXmitWaitSupported,
    /// bit 12). Without it the field is reserved: whatever it holds is no
    /// count, so it is neither exported nor cleared.
    pub xmit_wait: bool,
}

impl PmaCaps {
    pub fn from_mask(mask: u16) -> PmaCaps {
        let extended = if mask & perf_cap::IS_EXTENDED_WIDTH_SUPPORTED != 0 {
            Extended::Full
        } else if perf_cap::has_extended(mask) {
            Extended::DataOnly
        } else {
            Extended::None
        };
        PmaCaps { extended, xmit_wait: mask & perf_cap::IS_PORT_COUNTERS_XMIT_WAIT_SUPPORTED != 0 }
    }
}

impl Reading {
    /// A reading from PortCounters and, where the port has them (and they
    /// were read), PortCountersExtended. With `caps.extended` not `None`
    /// the 32-bit data and packet counters are left out even when `ext` is
    /// missing: mixing the two widths would look like clears. PortXmitWait
    /// only where `caps.xmit_wait`.
    pub fn new(pc: &PortCountersRepr, caps: PmaCaps, ext: Option<&PortCountersExtendedRepr>) -> Reading {
        let mut values = [None; COUNTERS];
        let mut put = |c: Counter, v: u64, w: u8| values[c.index()] = Some((v, w));
        put(Counter::SymbolErrors, pc.symbol_error_counter.into(), 16);
        put(Counter::LinkErrorRecoveries, pc.link_error_recovery_counter.into(), 8);
        put(Counter::LinkDowned, pc.link_downed_counter.into(), 8);
        put(Counter::RcvErrors, pc.port_rcv_errors.into(), 16);
        put(Counter::RcvRemotePhysicalErrors, pc.port_rcv_remote_physical_errors.into(), 16);
        put(Counter::RcvSwitchRelayErrors, pc.port_rcv_switch_relay_errors.into(), 16);
        put(Counter::XmitDiscards, pc.port_xmit_discards.into(), 16);
        put(Counter::XmitConstraintErrors, pc.port_xmit_constraint_errors.into(), 8);
        put(Counter::RcvConstraintErrors, pc.port_rcv_constraint_errors.into(), 8);
        put(Counter::LocalLinkIntegrityErrors, (pc.local_link_integrity_errors & 0xF).into(), 4);
        put(Counter::ExcessiveBufferOverrunErrors, (pc.excessive_buffer_overrun_errors & 0xF).into(), 4);
        put(Counter::Vl15Dropped, pc.vl15_dropped.into(), 16);
        if caps.xmit_wait {
            put(Counter::XmitWait, pc.port_xmit_wait.into(), 32);
        }
        match (caps.extended, ext) {
            (Extended::None, _) => {
                put(Counter::XmitData, pc.port_xmit_data.into(), 32);
                put(Counter::RcvData, pc.port_rcv_data.into(), 32);
                put(Counter::XmitPkts, pc.port_xmit_pkts.into(), 32);
                put(Counter::RcvPkts, pc.port_rcv_pkts.into(), 32);
            }
            (_, None) => {}
            (kind, Some(e)) => {
                put(Counter::XmitData, e.port_xmit_data, 64);
                put(Counter::RcvData, e.port_rcv_data, 64);
                put(Counter::XmitPkts, e.port_xmit_pkts, 64);
                put(Counter::RcvPkts, e.port_rcv_pkts, 64);
                if kind == Extended::Full {
                    put(Counter::UnicastXmitPkts, e.port_unicast_xmit_pkts, 64);
                    put(Counter::UnicastRcvPkts, e.port_unicast_rcv_pkts, 64);
                    put(Counter::MulticastXmitPkts, e.port_multicast_xmit_pkts, 64);
                    put(Counter::MulticastRcvPkts, e.port_multicast_rcv_pkts, 64);
                }
            }
        }
        Reading { values }
    }
}

/// When an error counter's rise is a jump worth a warning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JumpRule {
    /// A rise above this within one reading interval.
    pub threshold: u64,
    /// A rate (per second) this many times the previous interval's; 0 off.
    pub factor: f64,
    /// The smallest rise the rate rule considers.
    pub floor: u64,
}

/// Why a rise counts as a jump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JumpKind {
    /// Above the configured threshold within one interval.
    Threshold,
    /// Many times the previous interval's rate.
    Rate,
}

/// An error counter's jump, as the accounting found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jump {
    pub counter: Counter,
    pub kind: JumpKind,
    /// The rise in this interval, and that interval's length.
    pub delta: u64,
    pub elapsed: Duration,
    /// The previous interval's rise and length, when there was one.
    pub previous: Option<(u64, Duration)>,
}

/// What one reading changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Counters past half their range: CounterSelect and CounterSelect2 of
    /// the clear to send (both 0: none).
    pub clear: (u16, u8),
    /// Counters that went backwards (cleared by someone else).
    pub backwards: Vec<Counter>,
    pub jumps: Vec<Jump>,
}

/// ibsm's totals for one port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortAccount {
    /// Monotonic totals in the counter's own unit; `None` until read once.
    totals: PerCounter<Option<u64>>,
    /// The previous raw reading: the base the next rise is measured from.
    last: PerCounter<Option<u64>>,
    /// The previous interval's rise and length, for the rate rule.
    last_rise: PerCounter<Option<(u64, Duration)>>,
    /// When each counter was last read.
    last_at: PerCounter<Option<Duration>>,
    /// The width in bits of each counter's previous reading.
    widths: PerCounter<u8>,
}

impl PortAccount {
    pub fn new() -> Self {
        Self::default()
    }

    /// The total of `c` so far, in its own unit (4-byte words for data),
    /// or `None` before its first reading.
    pub fn total(&self, c: Counter) -> Option<u64> {
        self.totals[c.index()]
    }

    pub fn totals(&self) -> &PerCounter<Option<u64>> {
        &self.totals
    }

    /// Takes a reading made at `now`.
    pub fn apply(&mut self, now: Duration, reading: &Reading, rule: &JumpRule) -> Applied {
        let mut out = Applied::default();
        for c in Counter::ALL {
            let i = c.index();
            let Some((raw, width)) = reading.values[i] else { continue };
            let max = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
            let raw = raw.min(max);
            let since = self.last_at[i].map(|t| now.saturating_sub(t));
            let rise = match self.last[i] {
                None => None,
                Some(_) if self.widths[i] != width => None,
                Some(prev) if raw >= prev => Some(raw - prev),
                Some(_) => {
                    out.backwards.push(c);
                    Some(raw)
                }
            };
            self.totals[i] = Some(match (self.totals[i], rise) {
                (Some(total), Some(rise)) => total.saturating_add(rise),
                // A new base (width changed): what it holds was not counted here.
                (Some(total), None) => total,
                // The first reading ever: the total starts at what the port holds.
                (None, _) => raw,
            });
            self.last[i] = Some(raw);
            self.last_at[i] = Some(now);
            self.widths[i] = width;
            if let (Some(rise), Some(elapsed)) = (rise, since) {
                if c.is_error() {
                    if let Some(kind) = jump(rule, rise, elapsed, self.last_rise[i]) {
                        out.jumps.push(Jump { counter: c, kind, delta: rise, elapsed, previous: self.last_rise[i] });
                    }
                }
                self.last_rise[i] = Some((rise, elapsed));
            }
            let (sel, sel2) = c.select();
            if width < 64 && raw > max / 2 && (sel, sel2) != (0, 0) {
                out.clear.0 |= sel;
                out.clear.1 |= sel2;
            }
        }
        out
    }

    /// The port is back after an absence (not polled for a while): the
    /// next reading's rises are added as usual but span the absence, so
    /// they are judged for no jump and are no previous rate for the next.
    pub fn resume(&mut self) {
        self.last_at = [None; COUNTERS];
        self.last_rise = [None; COUNTERS];
    }

    /// A clear of the counters `select`/`select2` name was answered: they
    /// count from 0 again.
    pub fn cleared(&mut self, select: u16, select2: u8) {
        for c in Counter::ALL {
            let (s, s2) = c.select();
            if (s != 0 && select & s != 0) || (s2 != 0 && select2 & s2 != 0) {
                // Extended counters share no bits with these, but a port
                // read through PortCountersExtended is never cleared anyway.
                if self.last[c.index()].is_some() {
                    self.last[c.index()] = Some(0);
                }
            }
        }
    }
}

fn jump(rule: &JumpRule, rise: u64, elapsed: Duration, previous: Option<(u64, Duration)>) -> Option<JumpKind> {
    if rise > rule.threshold {
        return Some(JumpKind::Threshold);
    }
    if rule.factor <= 0.0 || rise < rule.floor.max(1) {
        return None;
    }
    let (prev, prev_elapsed) = previous?;
    let rate = rise as f64 / elapsed.as_secs_f64().max(1e-3);
    let prev_rate = prev as f64 / prev_elapsed.as_secs_f64().max(1e-3);
    (rate > rule.factor * prev_rate).then_some(JumpKind::Rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: JumpRule = JumpRule { threshold: 100, factor: 10.0, floor: 10 };
    const S: Duration = Duration::from_secs(60);

    fn pc(f: impl FnOnce(&mut PortCountersRepr)) -> PortCountersRepr {
        let mut r = PortCountersRepr::default();
        f(&mut r);
        r
    }

    fn at(n: u32) -> Duration {
        S * n
    }

    /// A PMA with PortXmitWait.
    fn w(extended: Extended) -> PmaCaps {
        PmaCaps { extended, xmit_wait: true }
    }

    #[test]
    fn first_reading_is_the_baseline_and_rises_add_up() {
        let mut a = PortAccount::new();
        assert_eq!(a.total(Counter::SymbolErrors), None);
        let r = Reading::new(&pc(|r| r.symbol_error_counter = 7), w(Extended::None), None);
        let out = a.apply(at(0), &r, &RULE);
        assert_eq!(a.total(Counter::SymbolErrors), Some(7));
        assert!(out.jumps.is_empty(), "no jump on a baseline");
        a.apply(at(1), &Reading::new(&pc(|r| r.symbol_error_counter = 10), w(Extended::None), None), &RULE);
        assert_eq!(a.total(Counter::SymbolErrors), Some(10));
        assert_eq!(a.total(Counter::UnicastXmitPkts), None, "not in a 32-bit reading");
    }

    #[test]
    fn a_counter_going_backwards_is_a_clear_not_a_spike() {
        let mut a = PortAccount::new();
        a.apply(at(0), &Reading::new(&pc(|r| r.port_xmit_data = 1_000_000), w(Extended::None), None), &RULE);
        let out = a.apply(at(1), &Reading::new(&pc(|r| r.port_xmit_data = 40), w(Extended::None), None), &RULE);
        assert_eq!(out.backwards, vec![Counter::XmitData]);
        assert_eq!(a.total(Counter::XmitData), Some(1_000_040), "the rise is the new reading");
        // The same for a 64-bit counter (a reset port).
        let mut a = PortAccount::new();
        let e = |v| PortCountersExtendedRepr { port_rcv_pkts: v, ..Default::default() };
        a.apply(at(0), &Reading::new(&pc(|_| ()), w(Extended::Full), Some(&e(u64::MAX - 1))), &RULE);
        a.apply(at(1), &Reading::new(&pc(|_| ()), w(Extended::Full), Some(&e(3))), &RULE);
        assert_eq!(a.total(Counter::RcvPkts), Some(u64::MAX), "totals saturate, never wrap");
    }

    #[test]
    fn thirty_two_bit_counters_are_cleared_past_half_their_range() {
        let mut a = PortAccount::new();
        let half = u32::MAX / 2;
        let out = a.apply(at(0), &Reading::new(&pc(|r| r.port_rcv_pkts = half), w(Extended::None), None), &RULE);
        assert_eq!(out.clear, (0, 0), "exactly half is not past it");
        let out = a.apply(
            at(1),
            &Reading::new(
                &pc(|r| {
                    r.port_rcv_pkts = half + 1;
                    r.port_xmit_wait = u32::MAX;
                }),
                w(Extended::None),
                None,
            ),
            &RULE,
        );
        assert_eq!(out.clear, (select::PORT_RCV_PKTS, select2::PORT_XMIT_WAIT));
        assert_eq!(a.total(Counter::RcvPkts), Some(u64::from(half) + 1));
        a.cleared(out.clear.0, out.clear.1);
        let out = a.apply(at(2), &Reading::new(&pc(|r| r.port_rcv_pkts = 5), w(Extended::None), None), &RULE);
        assert!(out.backwards.is_empty(), "after our own clear a low reading is no surprise");
        assert_eq!(a.total(Counter::RcvPkts), Some(u64::from(half) + 6));
        assert_eq!(a.total(Counter::XmitWait), Some(u64::from(u32::MAX)), "cleared, then read 0");
    }

    #[test]
    fn saturated_small_error_counters_are_cleared_too() {
        let mut a = PortAccount::new();
        let out = a.apply(
            at(0),
            &Reading::new(
                &pc(|r| {
                    r.local_link_integrity_errors = 0xF;
                    r.link_downed_counter = 0xFF;
                    r.excessive_buffer_overrun_errors = 7;
                }),
                w(Extended::None),
                None,
            ),
            &RULE,
        );
        assert_eq!(out.clear.0, select::LOCAL_LINK_INTEGRITY_ERRORS | select::LINK_DOWNED_COUNTER);
    }

    #[test]
    fn extended_counters_replace_the_32_bit_ones_and_are_never_cleared() {
        let mut a = PortAccount::new();
        let base = pc(|r| r.port_xmit_data = u32::MAX);
        let e = PortCountersExtendedRepr { port_xmit_data: 1 << 40, port_multicast_rcv_pkts: 9, ..Default::default() };
        let out = a.apply(at(0), &Reading::new(&base, w(Extended::DataOnly), Some(&e)), &RULE);
        assert_eq!(a.total(Counter::XmitData), Some(1 << 40));
        assert_eq!(a.total(Counter::MulticastRcvPkts), None, "NoIETF keeps only the first four");
        assert_eq!(out.clear, (0, 0), "the saturated 32-bit copy is not ours to clear");
        let mut b = PortAccount::new();
        b.apply(at(0), &Reading::new(&base, w(Extended::Full), Some(&e)), &RULE);
        assert_eq!(b.total(Counter::MulticastRcvPkts), Some(9));
        // An extended read that failed leaves data out rather than mixing widths.
        b.apply(at(1), &Reading::new(&base, w(Extended::Full), None), &RULE);
        assert_eq!(b.total(Counter::XmitData), Some(1 << 40));
    }

    #[test]
    fn xmit_wait_only_where_the_pma_counts_it() {
        let base = pc(|r| r.port_xmit_wait = u32::MAX);
        let without = PmaCaps::from_mask(perf_cap::ALL_PORT_SELECT | perf_cap::IS_EXTENDED_WIDTH_SUPPORTED);
        assert_eq!(without, PmaCaps { extended: Extended::Full, xmit_wait: false });
        let mut a = PortAccount::new();
        let out = a.apply(at(0), &Reading::new(&base, without, None), &RULE);
        assert_eq!(a.total(Counter::XmitWait), None, "a reserved field is no count");
        assert_eq!(out.clear, (0, 0), "and not ours to clear");
        let with = PmaCaps::from_mask(perf_cap::IS_PORT_COUNTERS_XMIT_WAIT_SUPPORTED);
        assert_eq!(with, PmaCaps { extended: Extended::None, xmit_wait: true });
        let out = a.apply(at(1), &Reading::new(&base, with, None), &RULE);
        assert_eq!(a.total(Counter::XmitWait), Some(u64::from(u32::MAX)));
        assert_eq!(out.clear.1, select2::PORT_XMIT_WAIT);
        assert_eq!(PmaCaps::from_mask(perf_cap::IS_EXTENDED_WIDTH_SUPPORTED_NO_IETF).extended, Extended::DataOnly);
    }

    #[test]
    fn error_jumps_by_threshold_and_by_rate() {
        let mut a = PortAccount::new();
        let read = |v: u16| Reading::new(&pc(|r| r.port_rcv_errors = v), w(Extended::None), None);
        a.apply(at(0), &read(0), &RULE);
        let out = a.apply(at(1), &read(5), &RULE);
        assert!(out.jumps.is_empty(), "5 is under both rules");
        let out = a.apply(at(2), &read(10), &RULE);
        assert!(out.jumps.is_empty(), "the same rate again");
        let out = a.apply(at(3), &read(70), &RULE);
        assert_eq!(out.jumps.len(), 1);
        assert_eq!(out.jumps[0].kind, JumpKind::Rate);
        assert_eq!((out.jumps[0].delta, out.jumps[0].previous), (60, Some((5, S))));
        let out = a.apply(at(4), &read(300), &RULE);
        assert_eq!(out.jumps[0].kind, JumpKind::Threshold);
        assert_eq!(out.jumps[0].counter, Counter::RcvErrors);
        // Data counters never jump.
        let mut d = PortAccount::new();
        d.apply(at(0), &Reading::new(&pc(|_| ()), w(Extended::None), None), &RULE);
        let out = d.apply(at(1), &Reading::new(&pc(|r| r.port_xmit_pkts = 1_000_000), w(Extended::None), None), &RULE);
        assert!(out.jumps.is_empty());
    }

    #[test]
    fn a_port_back_from_an_absence_continues_and_never_spikes() {
        let mut a = PortAccount::new();
        let read = |f: fn(&mut PortCountersRepr)| Reading::new(&pc(f), w(Extended::None), None);
        a.apply(at(0), &read(|r| r.port_rcv_errors = 400), &RULE);
        a.apply(at(1), &read(|r| r.port_rcv_errors = 410), &RULE);
        // Away for an hour; meanwhile the link went down once and errors rose.
        a.resume();
        let out = a.apply(
            at(61),
            &read(|r| {
                r.port_rcv_errors = 700;
                r.link_downed_counter = 1;
            }),
            &RULE,
        );
        assert_eq!(a.total(Counter::RcvErrors), Some(700), "the rise while away, once");
        assert_eq!(a.total(Counter::LinkDowned), Some(1), "the down that took it away is kept");
        assert!(out.jumps.is_empty(), "a rise over an hour is no jump of one interval");
        // Someone cleared the counter while it was away: only what it holds is new.
        a.resume();
        let out = a.apply(
            at(70),
            &read(|r| {
                r.port_rcv_errors = 3;
                r.link_downed_counter = 1;
            }),
            &RULE,
        );
        assert_eq!(out.backwards, vec![Counter::RcvErrors]);
        assert_eq!(a.total(Counter::RcvErrors), Some(703));
        // Back with 64-bit counters where it had 32-bit ones: a new base.
        a.apply(at(71), &read(|r| r.port_xmit_data = 1000), &RULE);
        a.resume();
        let e = PortCountersExtendedRepr { port_xmit_data: 1 << 50, ..Default::default() };
        a.apply(at(80), &Reading::new(&pc(|_| ()), w(Extended::Full), Some(&e)), &RULE);
        assert_eq!(a.total(Counter::XmitData), Some(1000), "another counter, not a rise of 2^50");
        a.apply(
            at(81),
            &Reading::new(
                &pc(|_| ()),
                w(Extended::Full),
                Some(&PortCountersExtendedRepr { port_xmit_data: (1 << 50) + 5, ..e }),
            ),
            &RULE,
        );
        assert_eq!(a.total(Counter::XmitData), Some(1005));
        assert_eq!(a.total(Counter::UnicastXmitPkts), Some(0), "new counters start at their reading");
    }

    #[test]
    fn names_are_by_the_book() {
        for c in Counter::ALL {
            assert!(c.metric().starts_with("port_") && c.metric().ends_with("_total"), "{c:?}");
            assert_eq!(Counter::ALL[c.index()], c);
        }
        assert_eq!(Counter::XmitData.unit_factor(), 4);
        assert!(Counter::Vl15Dropped.is_error() && !Counter::XmitWait.is_error());
    }
}
