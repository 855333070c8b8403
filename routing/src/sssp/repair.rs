//! Keeping SSSP's paths when only management routes close cycles.
//!
//! DFSSSP layers every path that carries traffic (see [`super::cdg`]):
//! end ports to end ports, end ports to switch LIDs, and switches' port 0
//! to end ports. On a fat tree with cables cut, SSSP's end-port paths are
//! minimal and acyclic on one layer, but a spine that lost its cable to a
//! leaf reaches that leaf, and a leaf reaches such a spine's LID, only by
//! turning down then up, and those turns close cycles. DFSSSP then needed
//! two layers, and on one VL fell back to one tree per destination switch
//! (10,044 routes on the busiest link of a 648-host tree with 15% of its
//! cables cut, where SSSP's own paths carry 1,188).
//!
//! Those management routes carry no end-port load, so they may take any
//! path. When the end-port paths alone are acyclic, [`repair`] keeps every
//! table entry they use and routes the rest anew, one (switch, LID) entry
//! at a time, so that the channel dependency graph of all traffic stays
//! acyclic: the routes towards each switch LID, and the entries towards an
//! end-port LID at switches no end-port path to it crosses. Per LID, the
//! switches not yet routed are taken breadth-first from those that are; each
//! forwards to a routed neighbour (one hop nearer first), whose own route
//! adds the one dependency `(u -> v, v -> next)`, accepted only if `next`'s
//! channel does not already reach `u -> v`. A routed neighbour never routes
//! back through `u`, so no forwarding loop forms.
//!
//! Cost: O(P) to collect the end-port dependencies (P = end-port paths ×
//! hops, each tree walked once per LID), one depth-first search to order
//! them, then per re-routed entry one insertion against that order
//! ([`OrderedInsert`]: free when the dependency agrees with the order,
//! else a search of the channels ordered between its ends, O(C + D) at
//! worst for C channels, D dependencies); on the 648-host tree with 15%
//! cut a few ms.

use crate::channels::{topological_order, DepGraph, DepSet, OrderedInsert};
use crate::fabric::{NodeRef, RoutingFabric};
use crate::lft::UNROUTED;

use super::{Net, NONE};

/// The channel dependency graph built so far and, once it is known to be
/// acyclic, a topological order of it for [`OrderedInsert`].
struct Deps {
    set: DepSet,
    ord: Vec<u32>,
    insert: OrderedInsert,
}

impl Deps {
    fn new(net: &Net) -> Deps {
        Deps { set: DepSet::new(&net.ch), ord: Vec::new(), insert: OrderedInsert::new(net.ch.num_channels()) }
    }

    /// Adds `a -> b` without a check (before [`Deps::order`], or one
    /// already present).
    fn add(&mut self, net: &Net, a: u32, b: u32) {
        let e = net.ch.dep(a as usize, b as usize);
        debug_assert!(self.ord.is_empty() || self.set.contains(e), "a new dependency after ordering needs try_add");
        self.set.insert(e);
    }

    /// Orders the dependencies added so far; false if they close a cycle.
    fn order(&mut self, net: &Net) -> bool {
        let set = &self.set;
        match topological_order(&DepGraph { g: &net.ch, has: |e| set.contains(e) }) {
            Ok(ord) => {
                self.ord = ord;
                true
            }
            Err(_) => false,
        }
    }

    /// Adds `a -> b` unless it closes a cycle (`b` reaches `a`).
    fn try_add(&mut self, net: &Net, a: u32, b: u32) -> bool {
        let set = &self.set;
        let mut unlimited = u64::MAX;
        let fits = self.insert.try_insert(&net.ch, &mut self.ord, |e| set.contains(e), a, b, &mut unlimited);
        if fits == Some(true) {
            self.set.insert(net.ch.dep(a as usize, b as usize));
        }
        fits == Some(true)
    }
}

/// Re-routes the management entries of `cols` (destination-major, as
/// `route_columns` returns them) so that all traffic is acyclic on one
/// layer, keeping every entry an end-port path uses. Returns false, with
/// `cols` partly changed, when the end-port paths alone have a cycle or
/// some entry finds no acyclic way; the caller then discards `cols`.
pub(super) fn repair(f: &RoutingFabric, net: &Net, cols: &mut [u8], to_end_port: &[bool]) -> bool {
    let ns = net.ns;
    if ns == 0 {
        return true;
    }
    let nl = cols.len() / ns;
    let mut deps = Deps::new(net);
    // Per LID, the switches whose entry an end-port path uses (stamped
    // with the LID).
    let mut used = vec![0u32; ns];
    for lid in (1..nl).filter(|&l| to_end_port[l]) {
        walk_used(net, cols, &mut deps, &mut used, lid);
    }
    if !deps.order(net) {
        return false;
    }
    let mut routed = vec![false; ns];
    let mut dist = vec![u32::MAX; ns];
    let mut queue: Vec<usize> = Vec::with_capacity(ns);
    for (lid, &to_end) in to_end_port.iter().enumerate().take(nl).skip(1) {
        let col = lid * ns;
        if cols[col..col + ns].iter().all(|&p| p == UNROUTED) {
            continue;
        }
        // The switches that keep their entry: those end-port paths use,
        // or the switch owning the LID.
        routed.fill(false);
        dist.fill(u32::MAX);
        queue.clear();
        if to_end {
            walk_used(net, cols, &mut deps, &mut used, lid);
            for (r, &u) in routed.iter_mut().zip(&used) {
                *r = u == lid as u32;
            }
        } else if let Some(NodeRef::Switch(d)) = f.lid_owner(lid as u16) {
            routed[d.index()] = true;
        }
        queue.extend((0..ns).filter(|&s| routed[s]));
        for &s in &queue {
            dist[s] = 0;
        }
        // Breadth-first over the switches not routed, nearest first.
        let mut head = 0;
        while head < queue.len() {
            let v = queue[head];
            head += 1;
            for c in net.ch.channels(v) {
                let u = net.ch.head[c] as usize;
                if dist[u] == u32::MAX {
                    dist[u] = dist[v] + 1;
                    queue.push(u);
                }
            }
        }
        for &u in &queue {
            if routed[u] {
                continue;
            }
            // Candidates: routed neighbours, one hop nearer first.
            let mut best: Option<u8> = None;
            for near in [true, false] {
                for c in net.ch.channels(u) {
                    let v = net.ch.head[c] as usize;
                    if !routed[v] || (dist[v] + 1 == dist[u]) != near {
                        continue;
                    }
                    let onward = net.ch.chan_of_port(v, cols[col + v]);
                    if onward == NONE || deps.try_add(net, c as u32, onward) {
                        best = Some(net.ch.port[c]);
                        break;
                    }
                }
                if best.is_some() {
                    break;
                }
            }
            let Some(port) = best else { return false };
            cols[col + u] = port;
            routed[u] = true;
        }
    }
    true
}

/// Walks every end-port path to `lid` (from each switch with end ports),
/// adding its dependencies and stamping the switches it crosses with
/// `lid`; a path stops where an earlier one to the same LID went on.
fn walk_used(net: &Net, cols: &[u8], deps: &mut Deps, used: &mut [u32], lid: usize) {
    let ns = net.ns;
    let stamp = lid as u32;
    for s in (0..ns).filter(|&s| net.local[s] > 0) {
        let (mut cur, mut prev) = (s, NONE);
        for _ in 0..=ns {
            let chan = net.ch.chan_of_port(cur, cols[lid * ns + cur]);
            if prev != NONE && chan != NONE {
                deps.add(net, prev, chan);
            }
            let seen = used[cur] == stamp;
            used[cur] = stamp;
            if seen || chan == NONE {
                break;
            }
            prev = chan;
            cur = net.ch.head[chan as usize] as usize;
        }
    }
}
