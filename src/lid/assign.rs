//! The LID manager: an I/O-free function from one sweep's ports and the
//! persisted map to a LID range per port.
//!
//! Rules (OpenSM-compatible in outcome, see reference/opensm.md §1 "LID
//! assignment"), applied in phases so that no phase can take what an earlier
//! one granted:
//!
//! 1. **Current LIDs.** A port keeps the LIDs it already holds if its base is
//!    a unicast LID aligned to `2^LMC` and no other port holds any of them. So
//!    a restarted SM, a new master, or ibsm taking over from OpenSM never
//!    renumbers a running fabric, whatever the file says. When claims overlap
//!    (two fabrics merged, a stale LID), the port whose guid2lid entry has
//!    the same base wins, else the lower GUID; the others move on.
//!    OpenSM differs here: it prefers the file over the port's current LID,
//!    which renumbers a live port whenever the file is stale.
//! 2. **guid2lid.** A port without usable current LIDs (typically a rebooted
//!    host, LID 0) gets its guid2lid range if it is still aligned for the
//!    configured LMC and free.
//! 3. **Fresh.** Everyone else gets the first free range aligned to `2^LMC`.
//!
//! The SM's own port goes first in phases 2 and 3 (it gets LID 1 on a new
//! fabric), then ports in ascending GUID order. Ports that are absent from the
//! sweep keep their guid2lid entries, and those LIDs stay reserved: a new port
//! never takes them while any other LID is free. Only when the unicast space
//! is exhausted are reservations reclaimed, lowest GUID first (the file
//! records no age), each reclaim reported. An absent port's entry is also
//! dropped when a present port already holds those LIDs (phase 1 wins).
//!
//! `reassign_all` (OpenSM `-r`) ignores current LIDs and the file: every port
//! gets a fresh range and absent ports' entries are forgotten.
//!
//! Switch base port 0 always gets one LID; an enhanced port 0 gets `2^LMC`
//! only with `lmc_esp0` (IBA 14.2.5.6 PortInfo.LMC).
//!
//! Complexity: O(n log n) for n ports plus O(2^LMC) per port for range checks;
//! free ranges are found with a 49,152-bit bitmap scanned 64 LIDs at a time
//! from a per-size cursor, so fresh assignment is linear in the LID space
//! overall, not per port.

use std::collections::BTreeMap;
use std::fmt;

use super::{Guid2Lid, LidRange, RangeError, MAX_LMC};
use crate::types::{Guid, Lid};

/// What kind of port a LID is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortRole {
    /// A CA or router port.
    EndPort,
    /// A switch's management port 0; `enhanced` from SwitchInfo
    /// (EnhancedPort0, IBA 14.2.5.4).
    SwitchPort0 { enhanced: bool },
}

/// A port found by the sweep, with the LIDs its PortInfo reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweptPort {
    pub guid: Guid,
    pub role: PortRole,
    /// PortInfo.LID (0 when the port has none).
    pub lid: Lid,
    /// PortInfo.LMC.
    pub lmc: u8,
}

/// The configuration the LID manager obeys. The default is OpenSM's: LMC 0,
/// no `lmc_esp0`, no reassignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LidPolicy {
    lmc: u8,
    /// Give an enhanced switch port 0 `2^LMC` LIDs too (OpenSM `lmc_esp0`).
    pub lmc_esp0: bool,
    /// Ignore current LIDs and the file (OpenSM `reassign_lids`, `-r`; OpenSM
    /// honours it only on the first master sweep, which is the caller's call).
    pub reassign_all: bool,
}

impl LidPolicy {
    pub fn new(lmc: u8) -> Result<LidPolicy, LidError> {
        if lmc > MAX_LMC {
            return Err(LidError::InvalidLmc(lmc));
        }
        Ok(LidPolicy { lmc, lmc_esp0: false, reassign_all: false })
    }

    pub fn with_lmc_esp0(self, lmc_esp0: bool) -> LidPolicy {
        LidPolicy { lmc_esp0, ..self }
    }

    pub fn with_reassign_all(self, reassign_all: bool) -> LidPolicy {
        LidPolicy { reassign_all, ..self }
    }

    pub fn lmc(&self) -> u8 {
        self.lmc
    }

    /// The LMC a port of this role gets.
    pub fn lmc_for(&self, role: PortRole) -> u8 {
        match role {
            PortRole::EndPort => self.lmc,
            PortRole::SwitchPort0 { enhanced: true } if self.lmc_esp0 => self.lmc,
            PortRole::SwitchPort0 { .. } => 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LidError {
    #[error("LMC {0} is out of range (0..=7)")]
    InvalidLmc(u8),
    #[error("unicast LID space exhausted: {} port(s) left without LIDs: {}", unassigned.len(), list(unassigned))]
    Exhausted { unassigned: Vec<Guid> },
}

fn list(guids: &[Guid]) -> String {
    let shown: Vec<String> = guids.iter().take(16).map(|g| g.to_string()).collect();
    let more = guids.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Why a candidate range (the port's current LIDs, or its guid2lid entry)
/// was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unused {
    /// There was no candidate: LID 0, or no guid2lid entry.
    None,
    /// `reassign_all` was set.
    Ignored { lid: Lid },
    /// Not a valid range for the port's LMC (unaligned, multicast, ...).
    Invalid { lid: Lid, error: RangeError },
    /// Another present port holds (some of) these LIDs.
    HeldBy { lid: Lid, holder: Guid, holder_range: LidRange },
    /// guid2lid reserves (some of) these LIDs for a port absent from this sweep.
    ReservedFor { lid: Lid, absent: Guid, absent_range: LidRange },
}

impl fmt::Display for Unused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unused::None => f.write_str("none"),
            Unused::Ignored { lid } => write!(f, "{lid} ignored (reassigning all LIDs)"),
            Unused::Invalid { lid, error } => write!(f, "{lid} unusable: {error}"),
            Unused::HeldBy { lid, holder, holder_range } => {
                write!(f, "{lid} conflicts with {holder}, which holds {holder_range}")
            }
            Unused::ReservedFor { lid, absent, absent_range } => {
                write!(f, "{lid} overlaps {absent_range}, reserved for absent port {absent}")
            }
        }
    }
}

/// Why a port got its LIDs, or what happened to a reservation. One per port
/// (GUID order), then reservation events in the order they happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    KeptCurrent {
        port: Guid,
        range: LidRange,
    },
    FromFile {
        port: Guid,
        range: LidRange,
        current: Unused,
    },
    Fresh {
        port: Guid,
        range: LidRange,
        current: Unused,
        file: Unused,
    },
    Unassigned {
        port: Guid,
        current: Unused,
        file: Unused,
    },
    /// A present port kept current LIDs that guid2lid had for an absent port;
    /// the absent port's entry is forgotten.
    ReservationDropped {
        absent: Guid,
        range: LidRange,
        holder: Guid,
    },
    /// The LID space ran out and an absent port's reservation was given up.
    ReservationReclaimed {
        absent: Guid,
        range: LidRange,
        for_port: Guid,
    },
    /// The sweep listed this GUID more than once; only the first was used.
    DuplicateInput {
        port: Guid,
    },
}

impl Decision {
    /// The port this decision is about (the absent one for reservations).
    pub fn guid(&self) -> Guid {
        match *self {
            Decision::KeptCurrent { port, .. }
            | Decision::FromFile { port, .. }
            | Decision::Fresh { port, .. }
            | Decision::Unassigned { port, .. }
            | Decision::DuplicateInput { port } => port,
            Decision::ReservationDropped { absent, .. } | Decision::ReservationReclaimed { absent, .. } => absent,
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::KeptCurrent { port, range } => write!(f, "{port}: keeps its current LIDs {range}"),
            Decision::FromFile { port, range, current } => {
                write!(f, "{port}: LIDs {range} from guid2lid (current LID: {current})")
            }
            Decision::Fresh { port, range, current, file } => {
                write!(f, "{port}: new LIDs {range} (current LID: {current}; guid2lid: {file})")
            }
            Decision::Unassigned { port, current, file } => {
                write!(f, "{port}: no free LIDs left (current LID: {current}; guid2lid: {file})")
            }
            Decision::ReservationDropped { absent, range, holder } => {
                write!(f, "{absent}: absent; its guid2lid LIDs {range} are held by {holder}, entry dropped")
            }
            Decision::ReservationReclaimed { absent, range, for_port } => {
                write!(f, "{absent}: absent; LID space exhausted, its reserved LIDs {range} reclaimed for {for_port}")
            }
            Decision::DuplicateInput { port } => {
                write!(f, "{port}: listed twice by the sweep; the first entry is used")
            }
        }
    }
}

/// A port whose PortInfo must be Set: its base LID or its LMC changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LidChange {
    pub guid: Guid,
    pub old_lid: Lid,
    pub old_lmc: u8,
    pub new: LidRange,
}

/// Everything the LID manager decided in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LidAssignment {
    /// Every present port that got LIDs.
    pub ranges: BTreeMap<Guid, LidRange>,
    /// Ports to reprogram, in GUID order.
    pub changes: Vec<LidChange>,
    pub decisions: Vec<Decision>,
    /// What to persist: present ports' ranges plus absent ports' surviving
    /// reservations.
    pub map: Guid2Lid,
    /// The highest LID any present port got (LinearFDBTop); 0 if none.
    pub max_lid: Lid,
    /// `Some(Exhausted)` when some ports got no LIDs; the others are assigned.
    pub error: Option<LidError>,
}

impl LidAssignment {
    /// The decision about `guid`'s own LIDs (not reservation events).
    pub fn decision(&self, guid: Guid) -> Option<&Decision> {
        self.decisions.iter().find(|d| {
            d.guid() == guid
                && matches!(
                    d,
                    Decision::KeptCurrent { .. }
                        | Decision::FromFile { .. }
                        | Decision::Fresh { .. }
                        | Decision::Unassigned { .. }
                )
        })
    }
}

/// Assigns LIDs to `ports`. See the module docs for the rules.
pub fn assign_lids(ports: &[SweptPort], persisted: &Guid2Lid, sm_port: Guid, policy: &LidPolicy) -> LidAssignment {
    let mut events = Vec::new();

    // Present ports in GUID order, one per GUID (a stable sort keeps the
    // first of any duplicates).
    let mut sorted: Vec<&SweptPort> = ports.iter().collect();
    sorted.sort_by_key(|p| p.guid);
    let mut ps: Vec<&SweptPort> = Vec::with_capacity(sorted.len());
    for p in sorted {
        match ps.last() {
            Some(last) if last.guid == p.guid => events.push(Decision::DuplicateInput { port: p.guid }),
            _ => ps.push(p),
        }
    }
    let n = ps.len();
    let index_of = |g: Guid| ps.binary_search_by_key(&g, |p| p.guid).ok();
    let lmc: Vec<u8> = ps.iter().map(|p| policy.lmc_for(p.role)).collect();
    let sm_idx = index_of(sm_port);
    let order: Vec<usize> = sm_idx.into_iter().chain((0..n).filter(|&i| Some(i) != sm_idx)).collect();

    let mut space = Space::new();
    let mut got: Vec<Option<(LidRange, Phase)>> = vec![None; n];
    let mut why_current = vec![Unused::None; n];
    let mut why_file = vec![Unused::None; n];

    // Absent ports' entries reserve their LIDs.
    let mut reserved = Guid2Lid::new();
    if !policy.reassign_all {
        for (g, r) in persisted.iter().filter(|(g, _)| index_of(*g).is_none()) {
            // A subset of a valid map cannot overlap itself.
            if reserved.insert(g, r).is_ok() {
                space.set_reserved(r, true);
            }
        }
    }

    if policy.reassign_all {
        for (i, p) in ps.iter().enumerate() {
            if p.lid.0 != 0 {
                why_current[i] = Unused::Ignored { lid: p.lid };
            }
            if let Some(f) = persisted.get(p.guid) {
                why_file[i] = Unused::Ignored { lid: f.base() };
            }
        }
    } else {
        // Phase 1: current LIDs. Claims whose base matches the file go first,
        // then lower GUIDs; `ps` is in GUID order so the index breaks ties.
        let mut claims: Vec<(bool, usize, LidRange)> = Vec::with_capacity(n);
        for (i, p) in ps.iter().enumerate() {
            if p.lid.0 == 0 {
                continue;
            }
            match LidRange::new(p.lid, lmc[i]) {
                Err(error) => why_current[i] = Unused::Invalid { lid: p.lid, error },
                Ok(r) => {
                    let in_file = persisted.get(p.guid).is_some_and(|f| f.base() == r.base());
                    claims.push((!in_file, i, r));
                }
            }
        }
        claims.sort_unstable_by_key(|&(not_in_file, i, _)| (not_in_file, i));
        for (_, i, r) in claims {
            if let Some(h) = space.holder(r) {
                why_current[i] =
                    Unused::HeldBy { lid: r.base(), holder: ps[h].guid, holder_range: range_of(&got, h, r) };
                continue;
            }
            space.take(r, i);
            got[i] = Some((r, Phase::Current));
            let dropped: Vec<(Guid, LidRange)> = reserved.overlapping(r).collect();
            for (g, rr) in dropped {
                reserved.remove(g);
                space.set_reserved(rr, false);
                events.push(Decision::ReservationDropped { absent: g, range: rr, holder: ps[i].guid });
            }
        }

        // Phase 2: guid2lid entries of ports that kept no current LIDs.
        for &i in &order {
            if got[i].is_some() {
                continue;
            }
            let Some(f) = persisted.get(ps[i].guid) else {
                continue;
            };
            let lid = f.base();
            why_file[i] = match LidRange::new(lid, lmc[i]) {
                Err(error) => Unused::Invalid { lid, error },
                Ok(r) => {
                    if let Some(h) = space.holder(r) {
                        Unused::HeldBy { lid, holder: ps[h].guid, holder_range: range_of(&got, h, r) }
                    } else if let Some((absent, absent_range)) = reserved.overlapping(r).next() {
                        // Only when the LMC grew since the file was written.
                        Unused::ReservedFor { lid, absent, absent_range }
                    } else {
                        space.take(r, i);
                        got[i] = Some((r, Phase::File));
                        continue;
                    }
                }
            };
        }
    }

    // Phase 3: fresh ranges, reclaiming reservations only when nothing is free.
    let mut reclaimable = reserved.iter().collect::<Vec<_>>().into_iter();
    let mut unassigned = Vec::new();
    for &i in &order {
        if got[i].is_some() {
            continue;
        }
        loop {
            if let Some(r) = space.find_free(lmc[i]) {
                space.take(r, i);
                got[i] = Some((r, Phase::Fresh));
                break;
            }
            let Some((g, rr)) = reclaimable.next() else {
                unassigned.push(i);
                break;
            };
            reserved.remove(g);
            space.set_reserved(rr, false);
            space.rewind(rr.base());
            events.push(Decision::ReservationReclaimed { absent: g, range: rr, for_port: ps[i].guid });
        }
    }

    // Assemble.
    let mut ranges = BTreeMap::new();
    let mut changes = Vec::new();
    let mut decisions = Vec::with_capacity(n + events.len());
    let mut map = reserved;
    let mut max_lid = Lid(0);
    for (i, p) in ps.iter().enumerate() {
        let (current, file) = (why_current[i], why_file[i]);
        let Some((r, phase)) = got[i] else {
            decisions.push(Decision::Unassigned { port: p.guid, current, file });
            continue;
        };
        decisions.push(match phase {
            Phase::Current => Decision::KeptCurrent { port: p.guid, range: r },
            Phase::File => Decision::FromFile { port: p.guid, range: r, current },
            Phase::Fresh => Decision::Fresh { port: p.guid, range: r, current, file },
        });
        ranges.insert(p.guid, r);
        max_lid = max_lid.max(r.max());
        // A base switch port 0 has no LMC of its own to program.
        let lmc_differs = p.role != (PortRole::SwitchPort0 { enhanced: false }) && p.lmc != r.lmc();
        if p.lid != r.base() || lmc_differs {
            changes.push(LidChange { guid: p.guid, old_lid: p.lid, old_lmc: p.lmc, new: r });
        }
        let stored = map.insert(p.guid, r);
        // Present ranges are disjoint from each other and from surviving
        // reservations by construction.
        debug_assert!(stored.is_ok(), "{stored:?}");
    }
    decisions.extend(events);
    let error = (!unassigned.is_empty())
        .then(|| LidError::Exhausted { unassigned: unassigned.iter().map(|&i| ps[i].guid).collect() });
    LidAssignment { ranges, changes, decisions, map, max_lid, error }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Current,
    File,
    Fresh,
}

/// The range of `holder`, a port `Space::holder` named; such a port always
/// has one, `fallback` only keeps this total.
fn range_of(got: &[Option<(LidRange, Phase)>], holder: usize, fallback: LidRange) -> LidRange {
    got[holder].map_or(fallback, |(r, _)| r)
}

/// Number of LIDs below the multicast space, LID 0 included.
const SPACE: usize = Lid::MULTICAST_MIN.0 as usize;
const WORDS: usize = SPACE / 64;
const NO_OWNER: u32 = u32::MAX;

/// Bit `i` set at every multiple of `2^k` within a 64-bit word, k = 0..=6.
const ALIGNED: [u64; 7] = [
    u64::MAX,
    0x5555_5555_5555_5555,
    0x1111_1111_1111_1111,
    0x0101_0101_0101_0101,
    0x0001_0001_0001_0001,
    0x0000_0001_0000_0001,
    0x0000_0000_0000_0001,
];

/// The unicast LID space: LIDs taken by present ports (with their owner) and
/// LIDs reserved for absent ones.
struct Space {
    taken: Vec<u64>,
    reserved: Vec<u64>,
    owner: Vec<u32>,
    /// Per LMC: no aligned free block starts below this LID. Valid because
    /// free space only shrinks, except on reclaim, which rewinds.
    cursor: [usize; MAX_LMC as usize + 1],
}

impl Space {
    fn new() -> Space {
        let mut s =
            Space { taken: vec![0; WORDS], reserved: vec![0; WORDS], owner: vec![NO_OWNER; SPACE], cursor: [0; 8] };
        s.taken[0] = 1; // LID 0 is never assignable
        s
    }

    /// Calls `f(word, mask)` for the words covering `r`.
    fn words(r: LidRange, mut f: impl FnMut(usize, u64)) {
        let (min, len) = (usize::from(r.min().0), usize::from(r.len()));
        if len >= 64 {
            (min / 64..(min + len) / 64).for_each(|w| f(w, u64::MAX));
        } else {
            // Aligned blocks shorter than a word never straddle two.
            f(min / 64, ((1u64 << len) - 1) << (min % 64));
        }
    }

    fn set_reserved(&mut self, r: LidRange, on: bool) {
        let bits = &mut self.reserved;
        Space::words(r, |w, m| if on { bits[w] |= m } else { bits[w] &= !m });
    }

    fn take(&mut self, r: LidRange, owner: usize) {
        let bits = &mut self.taken;
        Space::words(r, |w, m| bits[w] |= m);
        let lo = usize::from(r.min().0);
        self.owner[lo..lo + usize::from(r.len())].fill(owner as u32);
    }

    /// The owner of the first taken LID in `r`.
    fn holder(&self, r: LidRange) -> Option<usize> {
        let lo = usize::from(r.min().0);
        self.owner[lo..lo + usize::from(r.len())].iter().find(|&&o| o != NO_OWNER).map(|&o| o as usize)
    }

    fn free_word(&self, w: usize) -> u64 {
        !(self.taken[w] | self.reserved[w])
    }

    /// The lowest free (neither taken nor reserved) block of `2^lmc` LIDs.
    fn find_free(&mut self, lmc: u8) -> Option<LidRange> {
        let k = usize::from(lmc);
        let len = 1usize << k;
        let start = self.cursor[k];
        let found = if len <= 64 {
            (start / 64..WORDS).find_map(|w| {
                // Fold so bit i says "LIDs i..i+len are all free"; shifting
                // in zeros from the top only spoils unaligned positions.
                let mut m = self.free_word(w);
                let mut s = 1;
                while s < len {
                    m &= m >> s;
                    s <<= 1;
                }
                m &= ALIGNED[k];
                if w == start / 64 {
                    m &= u64::MAX << (start % 64);
                }
                (m != 0).then(|| w * 64 + m.trailing_zeros() as usize)
            })
        } else {
            (start.div_ceil(128) * 2..WORDS)
                .step_by(2)
                .find(|&w| self.free_word(w) == u64::MAX && self.free_word(w + 1) == u64::MAX)
                .map(|w| w * 64)
        };
        self.cursor[k] = found.map_or(SPACE, |lid| lid + len);
        found.and_then(|lid| LidRange::new(Lid(lid as u16), lmc).ok())
    }

    /// LIDs at `lid` became free: let every size look there again.
    fn rewind(&mut self, lid: Lid) {
        for (k, c) in self.cursor.iter_mut().enumerate() {
            *c = (*c).min(usize::from(lid.0) & !((1 << k) - 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(base: u16, lmc: u8) -> LidRange {
        LidRange::new(Lid(base), lmc).unwrap()
    }

    #[test]
    fn find_free_first_fit_per_size() {
        let mut s = Space::new();
        assert_eq!(s.find_free(0), Some(r(1, 0)));
        assert_eq!(s.find_free(2), Some(r(4, 2)));
        s.take(r(4, 2), 0);
        s.set_reserved(r(8, 3), true);
        assert_eq!(s.find_free(2), Some(r(16, 2)));
        assert_eq!(s.find_free(7), Some(r(128, 7)));
        assert_eq!(s.find_free(6), Some(r(64, 6)));
        s.set_reserved(r(8, 3), false);
        s.rewind(Lid(8));
        assert_eq!(s.find_free(2), Some(r(8, 2)));
        assert_eq!(s.holder(r(4, 0)), Some(0));
        assert_eq!(s.holder(r(8, 0)), None);
    }

    #[test]
    fn find_free_reaches_the_top_of_unicast_space() {
        let mut s = Space::new();
        s.cursor = [0xBF00; 8];
        assert_eq!(s.find_free(7), Some(r(0xBF00, 7)));
        assert_eq!(s.find_free(7), Some(r(0xBF80, 7)));
        assert_eq!(s.find_free(7), None);
        s.cursor[0] = 0xBFFF;
        assert_eq!(s.find_free(0), Some(r(0xBFFF, 0)));
        assert_eq!(s.find_free(0), None);
    }
}
