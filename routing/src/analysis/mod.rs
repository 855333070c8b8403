//! Route analysis: does every source reach every LID, how long are the
//! paths, and how evenly does all-to-all traffic load the links?
//!
//! For a fixed destination LID the LFTs give every switch exactly one next
//! hop, so the switches form a *functional graph*: following next hops from
//! any switch ends in a delivery, a black hole, a wrong destination, or a
//! cycle. [`validate`] resolves that graph once per LID with memoised walks
//! (each switch is visited once), which gives the outcome and hop count for
//! every switch source at once; an end port's outcome is its switch's plus
//! one cable. Cost: O(L·S) for L destination LIDs and S switches, plus one
//! breadth-first search per destination switch for the shortest distances,
//! O(S·(S + E)).
//!
//! All-to-all link load counts one path per ordered pair of end ports, to
//! the destination's base LID. Because the routes to one LID form a tree,
//! the load follows from accumulating sources down that tree, again O(S) per
//! LID.
//!
//! [`shift_balance`] loads the links with the shift pattern (end port i to
//! end port i + k, for every k), and [`analyze`] runs everything, including
//! the deadlock analysis of [`crate::cdg`], into one [`AnalysisReport`].

use std::fmt;

use serde::Serialize;

use crate::cdg::{analyze_cdg, CdgReport, CdgScope};
use crate::fabric::RoutingFabric;
use crate::lft::Routes;

mod loads;
mod shift;
mod validity;
mod walk;

pub use loads::{DirectedLink, LinkLoads, LoadStats};
pub use shift::{shift_balance, ShiftBalance, ShiftOrder};
pub use validity::{validate, validate_with_loads};
pub use walk::{trace, Hop, Trace, TraceEnd};

/// How many failure examples a report keeps; the counts are always complete.
pub const MAX_FAILURE_EXAMPLES: usize = 64;

/// Why a packet was dropped at a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BlackHoleReason {
    /// The LFT entry is 255 (or the switch has no LFT, or the LID is past
    /// LinearFDBTop).
    Unrouted,
    /// The entry names a port the switch does not have.
    PortOutOfRange,
    /// The entry names a port with no cable.
    NotCabled,
}

/// One way routes to a LID fail, with the number of sources (switches and
/// end ports) whose packets meet it. GUIDs are switch GUIDs or end-port port
/// GUIDs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Failure {
    /// Packets circle through `cycle` (switch GUIDs in forwarding order).
    Loop {
        lid: u16,
        cycle: Vec<u64>,
        sources: u64,
    },
    BlackHole {
        lid: u16,
        switch: u64,
        port: u8,
        reason: BlackHoleReason,
        sources: u64,
    },
    /// Packets leave `switch` by `port` (0 = the switch itself) and arrive at
    /// `reached`, which does not own the LID.
    WrongDestination {
        lid: u16,
        switch: u64,
        port: u8,
        reached: u64,
        sources: u64,
    },
}

impl Failure {
    pub fn lid(&self) -> u16 {
        match self {
            Failure::Loop { lid, .. } | Failure::BlackHole { lid, .. } | Failure::WrongDestination { lid, .. } => *lid,
        }
    }
    pub fn sources(&self) -> u64 {
        match self {
            Failure::Loop { sources, .. }
            | Failure::BlackHole { sources, .. }
            | Failure::WrongDestination { sources, .. } => *sources,
        }
    }
}

/// What [`validate`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub switches: usize,
    pub end_ports: usize,
    /// Every LID of every node (all 2^LMC of each).
    pub destination_lids: usize,
    /// (source, destination LID) pairs: every switch and end port towards
    /// every LID it does not own itself.
    pub pairs: u64,
    pub delivered: u64,
    /// Delivered on a path as short as the cabling allows.
    pub minimal: u64,
    /// Pairs the cabling does not connect at all; not routing failures.
    pub no_path: u64,
    pub loops: u64,
    pub black_holes: u64,
    pub wrong_destination: u64,
    /// Most extra cables any delivered path takes over the shortest one.
    /// The same counts restricted to (end port, end-port LID) pairs: the
    /// traffic applications send. OpenSM's updn, for one, leaves some
    /// switch-to-switch LIDs unrouted, which matters only for management.
    pub end_pairs: u64,
    pub end_delivered: u64,
    pub end_no_path: u64,
    pub max_stretch: u32,
    /// Extra cables over the shortest path, summed over delivered pairs
    /// (the mean stretch is this over `delivered`).
    pub extra_hops: u64,
    /// Delivered pairs by path length in cables (index = length).
    pub hop_histogram: Vec<u64>,
    /// All-to-all among end ports, switch-to-switch links.
    pub inter_switch_load: LoadStats,
    /// All-to-all among end ports, links with an end port on either side.
    pub access_load: LoadStats,
    /// The first [`MAX_FAILURE_EXAMPLES`] failures found (destination
    /// switches in index order), sorted by LID.
    pub failures: Vec<Failure>,
    /// Failures found beyond those.
    pub failures_omitted: usize,
}

impl Report {
    /// No loops, black holes or wrong destinations between connected nodes.
    pub fn is_clean(&self) -> bool {
        self.loops == 0 && self.black_holes == 0 && self.wrong_destination == 0
    }
    /// Every delivered path is a shortest one.
    pub fn all_minimal(&self) -> bool {
        self.minimal == self.delivered
    }
    /// Every pair is connected by cables.
    pub fn fully_connected(&self) -> bool {
        self.no_path == 0
    }
    /// The longest delivered path, in cables.
    pub fn max_hops(&self) -> usize {
        self.hop_histogram.len().saturating_sub(1)
    }
    /// Mean delivered path length, in cables.
    pub fn mean_hops(&self) -> f64 {
        let n: u64 = self.hop_histogram.iter().sum();
        let total: u64 = self.hop_histogram.iter().enumerate().map(|(len, c)| len as u64 * c).sum();
        if n == 0 {
            0.0
        } else {
            total as f64 / n as f64
        }
    }
    /// Mean extra cables per delivered pair over the shortest path.
    pub fn mean_stretch(&self) -> f64 {
        if self.delivered == 0 {
            0.0
        } else {
            self.extra_hops as f64 / self.delivered as f64
        }
    }
    /// Clean, and every pair the cabling connects is delivered.
    pub fn is_valid(&self) -> bool {
        self.is_clean() && self.delivered + self.no_path == self.pairs
    }
    /// Every end port the cabling connects reaches every LID of every other
    /// end port (failures towards switch LIDs do not count).
    pub fn end_ports_valid(&self) -> bool {
        self.end_delivered + self.end_no_path == self.end_pairs
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} switches, {} end ports, {} destination LIDs, {} (source, LID) pairs",
            self.switches, self.end_ports, self.destination_lids, self.pairs
        )?;
        writeln!(
            f,
            "delivered {} ({} on a shortest path, max stretch {} cables); no cabled path {}",
            self.delivered, self.minimal, self.max_stretch, self.no_path
        )?;
        writeln!(
            f,
            "failed: {} looping, {} black-holed, {} to the wrong destination{}",
            self.loops,
            self.black_holes,
            self.wrong_destination,
            if self.is_clean() { " (clean)" } else { "" }
        )?;
        write!(f, "path lengths (cables: pairs):")?;
        for (len, n) in self.hop_histogram.iter().enumerate().filter(|(_, n)| **n > 0) {
            write!(f, " {len}: {n}")?;
        }
        writeln!(f)?;
        for (name, s) in [("switch-to-switch", &self.inter_switch_load), ("end-port", &self.access_load)] {
            write!(
                f,
                "all-to-all load on {} {name} links: max {} ({} at max), mean {:.1}",
                s.links, s.max, s.at_max, s.mean
            )?;
            if let Some(l) = s.max_link {
                write!(f, ", e.g. {:#018x} port {} -> {:#018x}", l.from, l.port, l.to)?;
            }
            writeln!(f)?;
        }
        for x in &self.failures {
            match x {
                Failure::Loop { lid, cycle, sources } => {
                    write!(f, "  LID {lid}: loop through")?;
                    for g in cycle {
                        write!(f, " {g:#018x}")?;
                    }
                    writeln!(f, " ({sources} sources)")?;
                }
                Failure::BlackHole { lid, switch, port, reason, sources } => {
                    writeln!(f, "  LID {lid}: dropped at {switch:#018x} port {port} ({reason:?}, {sources} sources)")?
                }
                Failure::WrongDestination { lid, switch, port, reached, sources } => writeln!(
                    f,
                    "  LID {lid}: {switch:#018x} port {port} delivers to {reached:#018x} ({sources} sources)"
                )?,
            }
        }
        if self.failures_omitted > 0 {
            writeln!(f, "  ... and {} more failures", self.failures_omitted)?;
        }
        Ok(())
    }
}

// --- Everything at once ----------------------------------------------------

/// What [`analyze`] looks at beyond the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnalysisOptions {
    pub shift_order: ShiftOrder,
    /// Evaluate at most this many shifts (evenly spaced); None = all.
    pub max_shifts: Option<usize>,
    pub cdg: CdgScope,
}

/// The headline figures of an [`AnalysisReport`], flat for tables and
/// scripts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub switches: usize,
    pub end_ports: usize,
    pub destination_lids: usize,
    /// No loops, black holes or wrong destinations, and every pair the
    /// cabling connects is delivered.
    pub valid: bool,
    /// Every connected end port reaches every other end port's LIDs (what
    /// `valid` says for application traffic only).
    pub end_ports_valid: bool,
    /// Every pair is connected by cables at all.
    pub fully_connected: bool,
    /// Every VL's channel dependency graph is acyclic.
    pub deadlock_free: bool,
    /// VLs the paths use.
    pub vls: usize,
    pub max_stretch: u32,
    pub mean_stretch: f64,
    pub mean_hops: f64,
    pub max_hops: usize,
    /// All-to-all among end ports, switch-to-switch links: the edge
    /// forwarding index, the mean, and the links carrying the maximum.
    pub all_to_all_max: u64,
    pub all_to_all_mean: f64,
    pub all_to_all_at_max: usize,
    pub shift_worst_max: u64,
    pub shift_worst_shift: usize,
    pub shift_mean_max: f64,
}

/// Validity, stretch, deadlock freedom and balance of one set of tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisReport {
    pub summary: Summary,
    pub validity: Report,
    pub deadlock: CdgReport,
    pub shift: ShiftBalance,
}

/// Runs every analysis: [`validate`], [`analyze_cdg`] and [`shift_balance`].
pub fn analyze(f: &RoutingFabric, routes: &Routes, options: &AnalysisOptions) -> AnalysisReport {
    let validity = validate(f, routes);
    let deadlock = analyze_cdg(f, routes, options.cdg);
    let shift = shift_balance(f, routes, options.shift_order, options.max_shifts);
    let summary = Summary {
        switches: validity.switches,
        end_ports: validity.end_ports,
        destination_lids: validity.destination_lids,
        valid: validity.is_valid(),
        end_ports_valid: validity.end_ports_valid(),
        fully_connected: validity.fully_connected(),
        deadlock_free: deadlock.deadlock_free(),
        vls: deadlock.vls.len(),
        max_stretch: validity.max_stretch,
        mean_stretch: validity.mean_stretch(),
        mean_hops: validity.mean_hops(),
        max_hops: validity.max_hops(),
        all_to_all_max: validity.inter_switch_load.max,
        all_to_all_mean: validity.inter_switch_load.mean,
        all_to_all_at_max: validity.inter_switch_load.at_max,
        shift_worst_max: shift.worst_max,
        shift_worst_shift: shift.worst_shift,
        shift_mean_max: shift.mean_max,
    };
    AnalysisReport { summary, validity, deadlock, shift }
}

impl fmt::Display for AnalysisReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        let valid = match (s.valid, s.end_ports_valid) {
            (true, _) => "yes",
            (false, true) => "NO (end ports all reach each other; switch LIDs fail)",
            (false, false) => "NO",
        };
        writeln!(
            f,
            "valid: {}; deadlock free: {} ({} VL(s)); stretch max {} mean {:.3}; \
             all-to-all max {} mean {:.1} ({} at max); shift worst {} mean {:.2}",
            valid,
            if s.deadlock_free { "yes" } else { "NO" },
            s.vls,
            s.max_stretch,
            s.mean_stretch,
            s.all_to_all_max,
            s.all_to_all_mean,
            s.all_to_all_at_max,
            s.shift_worst_max,
            s.shift_mean_max
        )?;
        write!(f, "{}", self.validity)?;
        writeln!(f, "mean path {:.3} cables, mean stretch {:.4} cables", s.mean_hops, s.mean_stretch)?;
        write!(f, "{}", self.deadlock)?;
        writeln!(f, "{}", self.shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhop::minhop;
    use crate::testfab;

    #[test]
    fn report_serializes() {
        let f = testfab::ring(3, 1);
        let rep = validate(&f, &minhop(&f).unwrap());
        let json = serde_json::to_value(&rep).unwrap();
        assert_eq!(json["loops"], 0);
        assert_eq!(json["pairs"], rep.pairs);
    }

    #[test]
    fn combined_report_serializes_and_prints() {
        let f = testfab::ring(5, 2);
        let r = minhop(&f).unwrap();
        let a = analyze(&f, &r, &AnalysisOptions::default());
        assert!(a.summary.valid && !a.summary.deadlock_free);
        assert_eq!(a.summary.all_to_all_max, a.validity.inter_switch_load.max);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["summary"]["deadlock_free"], false);
        assert_eq!(json["deadlock"]["vls"][0]["acyclic"], false);
        assert_eq!(json["shift"]["end_ports"], 10);
        let text = a.to_string();
        assert!(text.starts_with("valid: yes; deadlock free: NO"), "{text}");
        assert!(text.contains("cycle of"), "{text}");
    }
}
