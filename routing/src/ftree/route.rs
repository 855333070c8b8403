//! Filling the tables: down from the ancestors of a destination's switch, up
//! (by the destination's index) everywhere else.

use crate::error::RoutingError;
use crate::fabric::{PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Lft, Routes};

use super::detect::{refuse, Tree};

/// `ud` of a switch with no up/down path to the destination switch.
const NO_PATH: u16 = u16::MAX;

/// One destination LID and the index digits that choose its ports.
#[derive(Debug, Clone, Copy)]
struct Dest {
    lid: u16,
    /// The port the LID leaves its own switch by (0 = the switch itself).
    out_port: u8,
    /// Traffic to end ports counts towards port balance; to switches not.
    counted: bool,
    /// `dig[h]` = index / W_h + LMC offset: chooses among the ports of a
    /// switch of height h going up, or of height h + 1 going down.
    dig: [u32; 8],
    /// `dig[h]` modulo the most up ports at height h (the common case).
    dm: [u16; 8],
}

/// What the engine produced besides the tables.
pub(super) struct Outcome {
    pub routes: Routes,
    /// (switch, destination switch) pairs with no up/down path, routed by a
    /// detour instead: only switch-sourced traffic and traffic to switch
    /// LIDs takes them.
    pub detours: u64,
}

/// Routes every LID in the tree. For each destination switch `z` (each
/// leaf, and every switch for its own LID or for end ports hanging off it):
///
/// 1. its ancestors (switches with a downward path to `z`) are marked by a
///    walk up from `z`;
/// 2. top-down, every other switch gets its up/down distance to `z`: one
///    more than its nearest parent's; a parent at that distance is
///    *eligible*;
/// 3. for each LID at `z`, ancestors forward down, choosing among children
///    that are ancestors of `z` (parallel cables, several paths) by the
///    index digit of the level below; other switches forward up through
///    their up cable at position `digit mod count` in the canonical order
///    when it is eligible, otherwise through the eligible parent that the
///    fewest switches already send this LID to (then the cable that carries
///    the fewest routes). Counting per parent matters in degraded trees:
///    every leaf whose digit points at a parent that lost its cable to `z`
///    remaps the LID, and choosing by their own cables' use alone (alike on
///    every leaf) sent them all to one other parent, whose cable down
///    towards `z` then carried all of them (bench ft2-r8-cut: 64 routes on
///    the busiest link instead of 48; ft3-r8-cut 124 instead of 100).
///
/// With index `i = leaf position × slots + place`, the digit of level h is
/// `i / W_h` with `W_0 = 1`, `W_{h+1} = W_h × up ports at level h`, which is
/// D-mod-k routing: on a full tree every directed cable carries at most one
/// flow of any shift permutation (Zahavi et al.).
///
/// Switches with no up/down path to `z` (one spine to another, aggregation
/// switches in different positions, in degraded trees a root that lost its
/// cable to a subtree) get a detour: towards the turn leaf when that leaf
/// reaches `z`, else through a neighbour that already routes `z` (see
/// `detour`); the caller checks such tables for credit loops. If such a
/// switch has end ports of its own and `z` has end ports, the tree is
/// refused: compute traffic must not take detours.
///
/// Cost: for each of S destination switches, O(S + E) for the distances
/// and O(S · m) for its m LIDs: O(S·(S + E) + S·L) in all, plus the tables.
///
/// With `only` (flags by LID), only the flagged LIDs are routed and a
/// destination switch none of whose LIDs is flagged costs nothing; the
/// others stay unrouted.
pub(super) fn route(f: &RoutingFabric, t: &Tree, only: Option<&[bool]>) -> Result<Outcome, RoutingError> {
    let ns = f.num_switches();
    let top = f.max_lid();
    let mut lfts: Vec<Lft> = (0..ns).map(|_| Lft::unrouted(top)).collect();
    let levels = usize::from(t.levels);

    // W_h and the usual number of up ports per level.
    let mut k_max = [1u32; 8];
    for &s in &t.by_order {
        let h = usize::from(t.height[s as usize]);
        k_max[h] = k_max[h].max(t.ups(s as usize).len() as u32);
    }
    let mut w = [1u64; 8];
    for h in 1..levels {
        w[h] = w[h - 1].saturating_mul(u64::from(k_max[h - 1]));
    }
    let make_dest = |lid: u32, out_port: u8, counted: bool, index: u64, offset: u32| {
        let mut d = Dest { lid: lid as u16, out_port, counted, dig: [0; 8], dm: [0; 8] };
        for h in 0..levels {
            d.dig[h] = ((index / w[h]) as u32).wrapping_add(offset);
            d.dm[h] = (d.dig[h] % k_max[h]) as u16;
        }
        d
    };

    // Destination switches: leaves first (compute nodes in index order),
    // then the rest top-down; the order only matters for the counters.
    let mut zs: Vec<u32> = t.leaves.clone();
    zs.extend(t.by_order.iter().copied().filter(|&s| t.height[s as usize] != 0));

    let mut anc = vec![u32::MAX; ns];
    let mut ud = vec![NO_PATH; ns];
    let mut elig = vec![0u16; ns];
    let mut repair = vec![0u8; ns];
    let mut routes_on = vec![0u32; t.up.len()];
    let mut into: Vec<u32> = Vec::new();
    let mut stack: Vec<u32> = Vec::new();
    let mut dests: Vec<Dest> = Vec::new();
    let mut cands: Vec<u8> = Vec::new();
    let mut unrouted: Vec<u32> = Vec::new();
    let mut detours = 0u64;

    // The turn leaf: detours go towards it, so that they all turn from
    // down to up in one place (OpenSM's fabric_route_roots idea). Pick the
    // first leaf below the most switches that have no parent.
    let parentless: Vec<u32> = t.by_order.iter().copied().filter(|&s| t.ups(s as usize).is_empty()).collect();
    let mut turn: Option<(u32, usize)> = None;
    for (i, &l) in t.leaves.iter().enumerate() {
        let stamp = u32::MAX - 2 - i as u32;
        ancestors(t, l, stamp, &mut anc, &mut stack);
        let covered = parentless.iter().filter(|&&p| anc[p as usize] == stamp).count();
        if turn.is_none_or(|(_, c)| covered > c) {
            turn = Some((l, covered));
        }
        if covered == parentless.len() {
            break;
        }
    }
    // Each switch's port towards the turn leaf (0: none, or the leaf).
    let mut to_turn = vec![0u8; ns];
    const TURN_STAMP: u32 = u32::MAX - 1;
    if let Some((tl, _)) = turn {
        distances(t, tl, TURN_STAMP, &mut anc, &mut ud, &mut elig, &mut stack, &mut unrouted);
        for &x in &t.by_order {
            let xu = x as usize;
            to_turn[xu] = if x == tl {
                0
            } else if anc[xu] == TURN_STAMP {
                t.downs(xu).iter().find(|l| anc[l.peer as usize] == TURN_STAMP).map_or(0, |l| l.port)
            } else if ud[xu] != NO_PATH {
                t.ups(xu).iter().find(|l| ud[l.peer as usize] == ud[xu] - 1).map_or(0, |l| l.port)
            } else {
                0
            };
        }
        anc.fill(u32::MAX);
    }

    for (zi, &z) in zs.iter().enumerate() {
        let zu = z as usize;
        let stamp = zi as u32;
        // LIDs that end at z: its end ports by index, then its own.
        dests.clear();
        let mut end_port_dests = false;
        for (port, peer) in f.switch_ports(SwitchId(z)).iter().enumerate() {
            let Some(PortEnd::End(e)) = *peer else { continue };
            let Some(index) = t.role[e.index()].index() else { continue };
            for (off, lid) in f.end_port(e).lids().enumerate() {
                dests.push(make_dest(lid, port as u8, true, index, off as u32));
                end_port_dests = true;
            }
        }
        let sw = f.switch(SwitchId(z));
        for (off, lid) in sw.lids().enumerate() {
            dests.push(make_dest(lid, 0, false, u64::from(t.order[zu]), off as u32));
        }
        if let Some(only) = only {
            dests.retain(|d| only.get(usize::from(d.lid)).copied().unwrap_or(false));
        }
        if dests.is_empty() {
            continue;
        }

        distances(t, z, stamp, &mut anc, &mut ud, &mut elig, &mut stack, &mut unrouted);
        // into[s * m + j]: switches that send the j-th LID of z up to s.
        let m = dests.len();
        into.clear();
        into.resize(ns * m, 0);
        if !unrouted.is_empty() {
            // The turn leaf serves only if it reaches z itself.
            let via_turn = turn.filter(|&(tl, _)| anc[tl as usize] == stamp || ud[tl as usize] != NO_PATH);
            let to_turn = via_turn.map(|_| to_turn.as_slice());
            detour(f, t, z, stamp, end_port_dests, &anc, &ud, to_turn, &mut unrouted, &mut repair)?;
            detours += unrouted.len() as u64;
        }

        // 3. The tables.
        for &x in &t.by_order {
            let xu = x as usize;
            let hx = usize::from(t.height[xu]);
            let ports = &mut lfts[xu].ports;
            if x == z {
                for d in &dests {
                    ports[usize::from(d.lid)] = d.out_port;
                }
            } else if anc[xu] == stamp {
                cands.clear();
                cands.extend(t.downs(xu).iter().filter(|l| anc[l.peer as usize] == stamp).map(|l| l.port));
                debug_assert!(!cands.is_empty(), "an ancestor has a child on the way down");
                if cands.len() == 1 {
                    for d in &dests {
                        ports[usize::from(d.lid)] = cands[0];
                    }
                } else {
                    let n = cands.len() as u32;
                    for d in &dests {
                        ports[usize::from(d.lid)] = cands[(d.dig[hx - 1] % n) as usize];
                    }
                }
            } else if ud[xu] != NO_PATH {
                let base = t.up_base[xu] as usize;
                let ups = t.ups(xu);
                let k = ups.len() as u32;
                if u32::from(elig[xu]) == k {
                    let usual = k == k_max[hx];
                    for (j, d) in dests.iter().enumerate() {
                        let i = if usual { usize::from(d.dm[hx]) } else { (d.dig[hx] % k) as usize };
                        ports[usize::from(d.lid)] = ups[i].port;
                        routes_on[base + i] += u32::from(d.counted);
                        into[ups[i].peer as usize * m + j] += u32::from(d.counted);
                    }
                } else {
                    let want = ud[xu] - 1;
                    for (j, d) in dests.iter().enumerate() {
                        let i0 = (d.dig[hx] % k) as usize;
                        let i = if ud[ups[i0].peer as usize] == want {
                            i0
                        } else {
                            // The eligible parent the fewest switches already
                            // send this LID to (their routes meet on the
                            // parent's cable down towards z), then the least
                            // used cable, scanning from i0.
                            let mut best = (u32::MAX, u32::MAX, i0);
                            for step in 0..ups.len() {
                                let i = (i0 + step) % ups.len();
                                let parent = ups[i].peer as usize;
                                if ud[parent] == want {
                                    let score = (into[parent * m + j], routes_on[base + i], i);
                                    if (score.0, score.1) < (best.0, best.1) {
                                        best = score;
                                    }
                                }
                            }
                            best.2
                        };
                        ports[usize::from(d.lid)] = ups[i].port;
                        routes_on[base + i] += u32::from(d.counted);
                        into[ups[i].peer as usize * m + j] += u32::from(d.counted);
                    }
                }
            } else {
                let p = repair[xu];
                debug_assert_ne!(p, 0, "every switch of a connected tree is reached");
                for d in &dests {
                    ports[usize::from(d.lid)] = p;
                }
            }
        }
    }
    Ok(Outcome { routes: Routes { lfts, sl: None }, detours })
}

/// Marks `z` and its ancestors (the switches with a downward path to it) in
/// `anc` with `stamp`.
fn ancestors(t: &Tree, z: u32, stamp: u32, anc: &mut [u32], stack: &mut Vec<u32>) {
    anc[z as usize] = stamp;
    stack.clear();
    stack.push(z);
    while let Some(x) = stack.pop() {
        for l in t.ups(x as usize) {
            if anc[l.peer as usize] != stamp {
                anc[l.peer as usize] = stamp;
                stack.push(l.peer);
            }
        }
    }
}

/// Marks the ancestors of `z` in `anc` with `stamp` (a walk up from `z`),
/// then gives every tree switch its up/down distance to `z` in `ud`
/// (top-down, so parents come first) and its number of eligible up cables
/// in `elig`; switches with no up/down path go to `unrouted`.
#[allow(clippy::too_many_arguments)]
fn distances(
    t: &Tree,
    z: u32,
    stamp: u32,
    anc: &mut [u32],
    ud: &mut [u16],
    elig: &mut [u16],
    stack: &mut Vec<u32>,
    unrouted: &mut Vec<u32>,
) {
    let zu = z as usize;
    ancestors(t, z, stamp, anc, stack);
    let hz = t.height[zu];
    unrouted.clear();
    for &x in &t.by_order {
        let xu = x as usize;
        if anc[xu] == stamp {
            ud[xu] = u16::from(t.height[xu] - hz);
            continue;
        }
        let (mut best, mut count) = (NO_PATH, 0u16);
        for l in t.ups(xu) {
            let v = ud[l.peer as usize];
            if v < best {
                (best, count) = (v, 1);
            } else if v == best && v != NO_PATH {
                count += 1;
            }
        }
        if best == NO_PATH {
            ud[xu] = NO_PATH;
            unrouted.push(x);
        } else {
            ud[xu] = best + 1;
            elig[xu] = count;
        }
    }
}

/// Gives every switch in `unrouted` (no up/down path to `z`) a detour.
///
/// When the turn leaf reaches `z` (`to_turn` is given), a switch with an
/// up/down path to the turn leaf heads for it: the packet turns up at the
/// first switch on that path that routes `z`, which is the turn leaf or one
/// of its ancestors, so detours to every destination turn around the same
/// leaf. The others take a neighbour that already routes `z`: a child if
/// they can, else a parent; lower switches first, repeated until nothing
/// changes. Each switch points at one that had a route before it or lies on
/// a path to the turn leaf, so no forwarding loop can form.
#[allow(clippy::too_many_arguments)]
fn detour(
    f: &RoutingFabric,
    t: &Tree,
    z: u32,
    stamp: u32,
    end_port_dests: bool,
    anc: &[u32],
    ud: &[u16],
    to_turn: Option<&[u8]>,
    unrouted: &mut [u32],
    repair: &mut [u8],
) -> Result<(), RoutingError> {
    let guid = |s: u32| f.switch(SwitchId(s)).guid;
    if end_port_dests {
        if let Some(&x) = unrouted.iter().find(|&&x| t.has_end_ports[x as usize]) {
            return Err(refuse(format!(
                "no up/down path from switch {:#018x} at rank {} (it has end ports) to switch {:#018x} at rank {} \
                 (it has end ports): too many links are missing",
                guid(x),
                t.rank(x as usize),
                guid(z),
                t.rank(z as usize)
            )));
        }
    }
    // Lowest level first, then canonical order.
    unrouted.sort_by_key(|&x| (t.height[x as usize], t.order[x as usize]));
    let mut left = 0;
    for &x in unrouted.iter() {
        repair[x as usize] = to_turn.map_or(0, |tt| tt[x as usize]);
        left += usize::from(repair[x as usize] == 0);
    }
    let routed = |s: u32, repair: &[u8]| {
        let su = s as usize;
        anc[su] == stamp || ud[su] != NO_PATH || repair[su] != 0
    };
    while left > 0 {
        let before = left;
        for &x in unrouted.iter() {
            let xu = x as usize;
            if repair[xu] != 0 {
                continue;
            }
            let port = t
                .downs(xu)
                .iter()
                .find(|l| routed(l.peer, repair))
                .or_else(|| t.ups(xu).iter().find(|l| routed(l.peer, repair)))
                .map(|l| l.port);
            if let Some(p) = port {
                repair[xu] = p;
                left -= 1;
            }
        }
        if left == before {
            let x = unrouted.iter().copied().find(|&x| repair[x as usize] == 0).unwrap_or(z);
            return Err(refuse(format!(
                "switch {:#018x} at rank {} has no way to switch {:#018x} at rank {}",
                guid(x),
                t.rank(x as usize),
                guid(z),
                t.rank(z as usize)
            )));
        }
    }
    Ok(())
}
