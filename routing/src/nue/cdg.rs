//! One layer's complete channel dependency graph: edge states and the
//! cycle check that keeps the used edges acyclic (Pearce-Kelly).

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
    mark: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
    fwd: Vec<u32>,
    bwd: Vec<u32>,
    pool: Vec<u32>,
}

impl Cdg {
    pub(super) fn new(net: &Net) -> Cdg {
        Cdg {
            state: net.template.clone(),
            ord: (0..net.ch.num_channels() as u32).collect(),
            mark: vec![0; net.ch.num_channels()],
            stamp: 0,
            stack: Vec::new(),
            fwd: Vec::new(),
            bwd: Vec::new(),
            pool: Vec::new(),
        }
    }

    fn is_used(s: u8) -> bool {
        s == USED || s == WET
    }

    /// Whether the used dependencies plus `from -> to` stay acyclic; if so,
    /// reorders so that the order agrees with the new edge (the caller then
    /// marks it). Pearce-Kelly: only channels ordered between `to` and
    /// `from` are searched.
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
        let (ub, lb) = (self.ord[from as usize], self.ord[to as usize]);
        if ub < lb {
            return Some(true);
        }
        let mut visits = 0usize;
        if self.stamp >= u32::MAX - 2 {
            self.mark.fill(0);
            self.stamp = 0;
        }
        self.stamp += 2;
        let (sf, sb) = (self.stamp - 1, self.stamp);
        // Forward from `to` among channels ordered before `from`.
        self.fwd.clear();
        self.stack.clear();
        self.stack.push(to);
        self.mark[to as usize] = sf;
        while let Some(u) = self.stack.pop() {
            self.fwd.push(u);
            visits += 1;
            if visits > budget {
                return None;
            }
            let b = net.ch.head[u as usize] as usize;
            let g = net.ch.degree(b);
            let row = net.ch.dep_base[b] + (net.ch.rev[u as usize] - net.ch.base[b]) as usize * g;
            for j in 0..g {
                if !Cdg::is_used(self.state[row + j]) {
                    continue;
                }
                let w = net.ch.base[b] + j as u32;
                if w == from {
                    return Some(false);
                }
                if self.ord[w as usize] < ub && self.mark[w as usize] != sf {
                    self.mark[w as usize] = sf;
                    self.stack.push(w);
                }
            }
        }
        // Backward from `from` among channels ordered after `to`.
        self.bwd.clear();
        self.stack.push(from);
        self.mark[from as usize] = sb;
        while let Some(u) = self.stack.pop() {
            self.bwd.push(u);
            visits += 1;
            if visits > budget {
                self.stack.clear();
                return None;
            }
            let a = net.ch.tail[u as usize] as usize;
            let g = net.ch.degree(a);
            let j = (u - net.ch.base[a]) as usize;
            for k in 0..g {
                if !Cdg::is_used(self.state[net.ch.dep_base[a] + k * g + j]) {
                    continue;
                }
                let w = net.ch.rev[net.ch.base[a] as usize + k];
                if self.ord[w as usize] > lb && self.mark[w as usize] != sb {
                    self.mark[w as usize] = sb;
                    self.stack.push(w);
                }
            }
        }
        // Everything that reaches `from` goes before everything `to`
        // reaches, in the positions they held, each group in its old order.
        let ord = &self.ord;
        self.fwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.bwd.sort_unstable_by_key(|&c| ord[c as usize]);
        self.pool.clear();
        self.pool.extend(self.bwd.iter().chain(&self.fwd).map(|&c| ord[c as usize]));
        self.pool.sort_unstable();
        for (i, &c) in self.bwd.iter().chain(&self.fwd).enumerate() {
            self.ord[c as usize] = self.pool[i];
        }
        stats.reorders += 1;
        Some(true)
    }
}
