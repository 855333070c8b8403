//! Local search over up*/down* orders, for fabrics where no root gives
//! balanced tables (dragonflies, random graphs).
//!
//! Any strict total order in which every switch but the first has an
//! earlier neighbour is a valid up*/down* order: every switch can climb to
//! the first and descend from it to every other, and no legal path turns
//! down then up, so the tables stay free of credit loops on one VL whatever
//! the order (see the parent module). The breadth-first orders from a root
//! are only a small corner of that space. On a dragonfly their busiest
//! link stays far above what a multi-VL routing reaches, because a
//! breadth-first ranking puts whole groups below each other and forces
//! their traffic through a few global cables.
//!
//! The search moves one switch at a time to another place in the order,
//! keeps the move when the order stays valid and the tables are no worse
//! (busiest link, then the number of links carrying it), and so also walks
//! along plateaus. Moves are drawn from a generator with a fixed seed, so a
//! fabric always gets the same tables. Each try costs a whole routing, so
//! the number of tries shrinks with switches × LIDs and the search is
//! skipped where it could try only a handful.
//!
//! Busiest link at 1 VL before / after: `testfab::dragonfly(4, 2)` 150 /
//! 114, `testfab::dragonfly(6, 2)` 456 / 330, a 40-switch random fabric
//! 467 / 415; on ibsim with `ibsm route` (`bench/routing.py`, see
//! `docs/benchmarks.md`) `random:switches=40,degree=3,hosts=160,seed=1`
//! 1,892 / 1,681 and the 4x4x4 torus 452 / 346.

use super::{route_scored, Scored, UpDownOrder, REFINE_PASSES};
use crate::fabric::{RoutingFabric, SwitchId};
use crate::testfab::SplitMix64;

/// Most routings one search may try.
const MAX_TRIES: usize = 800;

/// Fewer tries than this are not worth a search.
const MIN_TRIES: usize = 16;

/// The search ends after this many tries in a row without a strictly
/// better routing.
const PATIENCE: usize = 200;

/// Switches × LIDs the whole search may route, summed over its tries
/// (each a single pass, without the re-routing passes): a few hundred
/// milliseconds on one core.
const WORK: usize = 2_000_000;

/// The move generator's seed: any fixed value keeps the tables reproducible.
const SEED: u64 = 0x75d0_5ea2_c4f1_2b3d;

/// How good a routing is: busiest link first, then how many links carry
/// it. Lower is better.
fn quality(s: &Scored) -> (u64, usize) {
    (s.busiest, s.at_max)
}

/// Tries for a fabric of this size: none when below [`MIN_TRIES`].
fn tries_for(f: &RoutingFabric) -> usize {
    let size = f.num_switches().max(1) * usize::from(f.max_lid()).max(1);
    let tries = (WORK / size).min(MAX_TRIES);
    if tries < MIN_TRIES {
        0
    } else {
        tries
    }
}

/// Improves `start` (a valid order of a connected fabric, with `scored` its
/// routing with the re-routing passes) by local search; returns the best
/// order found and its routing, `start` itself when nothing better turned
/// up. Tries are judged on the first routing pass alone, three times
/// cheaper and as good a guide; the winner gets the re-routing passes.
pub(super) fn improve(f: &RoutingFabric, start: UpDownOrder, scored: Scored) -> (UpDownOrder, Scored) {
    let tries = tries_for(f);
    let n = start.order.len();
    if tries == 0 || n < 3 || scored.busiest <= scored.bound || scored.routes.is_err() {
        return (start, scored);
    }
    let mut seq = start.order.clone();
    let mut current = quality(&route_scored(f, &start, 0));
    let mut moved = false;
    let mut rng = SplitMix64(SEED);
    let mut pos = vec![0u32; f.num_switches()];
    let mut last_gain = 0;
    for t in 0..tries {
        if t - last_gain > PATIENCE {
            break;
        }
        let (from, to) = (rng.below(n), rng.below(n));
        if from == to {
            continue;
        }
        let s = seq.remove(from);
        seq.insert(to, s);
        let kept = every_switch_has_an_earlier_neighbour(f, &seq, &mut pos) && {
            let tried = route_scored(f, &order_from_sequence(f, seq.clone()), 0);
            let better = tried.routes.is_ok() && quality(&tried) <= current;
            if better {
                if quality(&tried) < current {
                    last_gain = t;
                }
                current = quality(&tried);
            }
            better
        };
        if kept {
            moved = true;
            if current.0 <= scored.bound {
                break;
            }
        } else {
            let s = seq.remove(to);
            seq.insert(from, s);
        }
    }
    if !moved {
        return (start, scored);
    }
    let order = order_from_sequence(f, seq);
    let refined = route_scored(f, &order, REFINE_PASSES);
    if refined.routes.is_ok() && quality(&refined) < quality(&scored) {
        (order, refined)
    } else {
        (start, scored)
    }
}

/// The up*/down* condition on a whole order: each switch after the first
/// has a cable to one placed before it.
fn every_switch_has_an_earlier_neighbour(f: &RoutingFabric, seq: &[SwitchId], pos: &mut [u32]) -> bool {
    for (i, s) in seq.iter().enumerate() {
        pos[s.index()] = i as u32;
    }
    seq.iter()
        .enumerate()
        .skip(1)
        .all(|(i, s)| f.switch_neighbors(*s).iter().any(|e| (pos[e.neighbor.index()] as usize) < i))
}

/// An order of one connected part from its switch sequence. Its root is
/// the first switch, and ranks are distances from it.
fn order_from_sequence(f: &RoutingFabric, seq: Vec<SwitchId>) -> UpDownOrder {
    let n = seq.len();
    let mut pos = vec![0u32; f.num_switches()];
    for (i, s) in seq.iter().enumerate() {
        pos[s.index()] = i as u32;
    }
    let (mut rank, mut queue) = (Vec::new(), Vec::new());
    f.switch_distances(seq[0], &mut rank, &mut queue);
    let roots = vec![seq[0]];
    UpDownOrder { order: seq, pos, rank, part: vec![(0, n as u32); n], roots }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testfab::{random_connected, RandomSpec};

    #[test]
    fn moves_that_strand_a_switch_are_refused() {
        let f = crate::testfab::ring(3, 1);
        let ids: Vec<SwitchId> = f.switch_ids().collect();
        let mut pos = vec![0; 3];
        assert!(every_switch_has_an_earlier_neighbour(&f, &ids, &mut pos));
        let f = random_connected(3, RandomSpec { switches: 6, extra_links: 0, max_hosts_per_switch: 1, max_lmc: 0 });
        let leafs: Vec<SwitchId> = f.switch_ids().filter(|s| f.switch_neighbors(*s).len() == 1).collect();
        assert!(leafs.len() >= 2);
        // Two tree leaves placed first and second: the second's only
        // neighbour comes later.
        let mut seq = leafs[..2].to_vec();
        seq.extend(f.switch_ids().filter(|s| !leafs[..2].contains(s)));
        let mut pos = vec![0; f.num_switches()];
        assert!(!every_switch_has_an_earlier_neighbour(&f, &seq, &mut pos));
    }
}
