//! One layer's complete channel dependency graph: edge states and the
//! cycle check that keeps the used edges acyclic (Pearce-Kelly).

use crate::channels::OrderedInsert;

use super::net::Net;
use super::NueStats;

// Dependency edge states.
pub(super) const UNUSED: u8 = 0;
/// Used by a routed destination (or an escape path).
pub(super) const USED: u8 = 1;
/// Used tentatively by the search for the current destination.
pub(super) const WET: u8 = 2;
pub(super) const BLOCKED: u8 = 3;

/// One layer's dependency states and the topological order of its used
/// (and tentatively used) dependencies.
pub(super) struct Cdg {
    pub(super) state: Vec<u8>,
    /// Position of each channel in the topological order.
    pub(super) ord: Vec<u32>,
    insert: OrderedInsert,
}

impl Cdg {
    pub(super) fn new(net: &Net) -> Cdg {
        Cdg {
            state: net.template.clone(),
            ord: (0..net.ch.num_channels() as u32).collect(),
            insert: OrderedInsert::new(net.ch.num_channels()),
        }
    }

    fn is_used(s: u8) -> bool {
        s == USED || s == WET
    }

    /// Whether the used dependencies plus `from -> to` stay acyclic; if so,
    /// reorders so that the order agrees with the new edge (the caller then
    /// marks it). Pearce-Kelly ([`OrderedInsert`]).
    pub(super) fn admit(&mut self, net: &Net, from: u32, to: u32, stats: &mut NueStats) -> bool {
        self.admit_within(net, from, to, usize::MAX, stats) == Some(true)
    }

    /// [`Cdg::admit`] that gives up (`None`, nothing changed) after
    /// visiting `budget` channels; `Some(false)` is a proven cycle.
    pub(super) fn admit_within(
        &mut self,
        net: &Net,
        from: u32,
        to: u32,
        budget: usize,
        stats: &mut NueStats,
    ) -> Option<bool> {
        if self.ord[from as usize] < self.ord[to as usize] {
            return Some(true);
        }
        let mut left = budget as u64;
        let state = &self.state;
        let fits = self.insert.try_insert(&net.ch, &mut self.ord, |e| Cdg::is_used(state[e]), from, to, &mut left);
        if fits == Some(true) {
            stats.reorders += 1;
        }
        fits
    }
}
