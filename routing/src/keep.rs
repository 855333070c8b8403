//! Keeping the routes that still work after a fabric lost something.
//!
//! When a cable or a switch goes, an engine run over what is left computes
//! tables that may differ from the old ones far from the loss: a leaf that
//! lost one of 18 uplinks spreads every destination over 17 now, and the
//! balancing counters shift elsewhere too. On a 3-level fat tree of 11,664
//! hosts one leaf uplink down changed 192,000 entries in 4,700 blocks,
//! though only the destinations whose paths crossed the cable had to move.
//!
//! [`keep_intact`] merges the old tables into the new ones, one LID at a
//! time, the least-moving way that works:
//!
//! 1. Only the switches whose own next hop is gone (the cable or the node
//!    behind it) take the new entry; every other switch keeps its old one,
//!    even where its path crossed the loss further on: a leaf whose spine
//!    lost a core keeps sending up to that spine, which now goes up to
//!    another core. The LID's tables are walked from every switch, and the
//!    merge stands if no walk loops or ends at the wrong port.
//! 2. Otherwise a switch keeps its old entry only when the old tables still
//!    deliver the LID from it, over cables that are all there, and takes
//!    the new entry otherwise. This merge is loop-free and delivers
//!    everything the new tables deliver, by construction:
//! - a switch whose old path is intact follows it, and that path crosses
//!   only switches whose old paths are intact (each one's old path is a
//!   suffix of it);
//! - a switch whose old path is broken follows the new tables until it
//!   meets a switch whose old path is intact, and the old path from there:
//!   a prefix of a loop-free path, then a path that never comes back to a
//!   broken switch.
//!
//! Credit loops are another matter: such a path turns from the new routes
//! to the old at the meeting switch, and two up/down routings with one
//! orientation stay up/down, but other engines' may not. The caller checks
//! the merged tables' channel dependencies before it uses them.
//!
//! Cost: O(switches × LIDs), each switch's hop for a LID looked at once,
//! row by row for the LIDs nothing lost, walked only for the others.

use crate::channels::{ChannelGraph, SelfLoops, UsedDeps, NO_CHANNEL};
use crate::fabric::{NodeRef, PortEnd, RoutingFabric, SwitchId};
use crate::lft::{Routes, UNROUTED};
use crate::refine::tree_pairs;

/// What [`keep_intact`] kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept {
    /// (switch, LID) entries where the old entry was kept and differs from
    /// the new one.
    pub kept: u64,
    /// Entries taken from the new tables that differ from the old ones.
    pub moved: u64,
    /// LIDs some switch's old path to was broken.
    pub broken_lids: u32,
}

/// Passes of [`keep_intact_acyclic`] over the LIDs.
const MERGE_PASSES: usize = 3;

const UNKNOWN: u8 = 0;
const WALKING: u8 = 1;
const INTACT: u8 = 2;
const BROKEN: u8 = 3;

/// The LIDs (by LID, `true`) some switch's `old` entry no longer takes
/// one hop further: its cable is gone, it leads to an end port that does
/// not own the LID, it names the switch itself for a LID another owns, or
/// there is none (no old table, or unrouted). From every other LID's
/// entries every hop still leads over a cable that is there, so the old
/// walks, which were loop-free and ended at the owner, still do: only
/// these LIDs need routing. One pass over the tables, row by row (the
/// 11,664-host tree's 21 million entries in about 20 ms).
pub fn lids_to_repair(f: &RoutingFabric, old: &[Option<&[u8]>]) -> Vec<bool> {
    let top = usize::from(f.max_lid());
    let owners: Vec<Option<NodeRef>> = (0..=top).map(|lid| f.lid_owner(lid as u16)).collect();
    let mut broken = vec![false; top + 1];
    for s in 0..f.num_switches() {
        let Some(table) = old.get(s).copied().flatten() else {
            for (lid, b) in broken.iter_mut().enumerate() {
                *b |= owners[lid].is_some();
            }
            continue;
        };
        let id = SwitchId(s as u32);
        let peers: Vec<Option<PortEnd>> = (0..=f.switch(id).num_ports).map(|p| f.switch_peer(id, p)).collect();
        for lid in 1..=top {
            let Some(owner) = owners[lid] else { continue };
            if broken[lid] {
                continue;
            }
            broken[lid] = match table.get(lid).copied() {
                None | Some(UNROUTED) => true,
                Some(0) => owner != NodeRef::Switch(id),
                Some(p) => match peers.get(usize::from(p)).copied().flatten() {
                    Some(PortEnd::Switch(..)) => false,
                    Some(PortEnd::End(e)) => owner != NodeRef::End(e),
                    None => true,
                },
            };
        }
    }
    broken
}

/// Merges `old` (each switch's previous table, by switch index; `None`
/// for a switch that had none) into `new`, in place: see the module
/// documentation. The LIDs nothing lost ([`lids_to_repair`]) take their
/// old entries row by row; only the others are walked.
pub fn keep_intact(f: &RoutingFabric, old: &[Option<&[u8]>], new: &mut Routes) -> Kept {
    keep_intact_with(f, old, &lids_to_repair(f, old), new)
}

/// [`keep_intact`] with the caller's [`lids_to_repair`] of the same `f`
/// and `old`, so that it is not found twice.
pub fn keep_intact_with(f: &RoutingFabric, old: &[Option<&[u8]>], broken: &[bool], new: &mut Routes) -> Kept {
    let ns = f.num_switches();
    let mut out = Kept::default();
    let owned: Vec<bool> = (0..broken.len()).map(|lid| f.lid_owner(lid as u16).is_some()).collect();
    for (lft, table) in new.lfts.iter_mut().zip(old) {
        let Some(table) = table else { continue };
        for (lid, slot) in lft.ports.iter_mut().enumerate().skip(1) {
            if broken.get(lid).is_none_or(|&b| b) || !owned[lid] {
                continue;
            }
            let was = table[lid];
            out.kept += u64::from(*slot != was);
            *slot = was;
        }
    }
    let mut state = vec![UNKNOWN; ns];
    let mut walk: Vec<u32> = Vec::new();
    let entry = |s: usize, lid: u16| old.get(s).copied().flatten().and_then(|t| t.get(usize::from(lid)).copied());
    let mut pick: Vec<u8> = vec![UNROUTED; ns];
    for lid in (1..broken.len()).filter(|&lid| broken[lid]).map(|lid| lid as u16) {
        let Some(owner) = f.lid_owner(lid) else { continue };
        let new_entry = |new: &Routes, s: usize| new.lfts[s].ports.get(usize::from(lid)).copied().unwrap_or(UNROUTED);
        // 1: only a switch whose own hop is gone takes the new entry.
        for (s, slot) in pick.iter_mut().enumerate() {
            *slot = match entry(s, lid) {
                Some(p) if hop_is_there(f, s, p, owner) => p,
                _ => new_entry(new, s),
            };
        }
        // A walk that ends unrouted is no worse than the new tables,
        // which left that entry unrouted.
        judge(f, owner, |s| Some(pick[s]), INTACT, &mut state, &mut walk);
        if !state.contains(&BROKEN) {
            apply(new, lid, &pick, |s| entry(s, lid), &mut out);
            out.broken_lids += 1;
            continue;
        }
        // 2: only switches whose old path is whole keep their entry.
        judge(f, owner, |s| entry(s, lid), BROKEN, &mut state, &mut walk);
        let mut broken = false;
        for (s, slot) in pick.iter_mut().enumerate() {
            *slot = if state[s] == INTACT {
                entry(s, lid).expect("an intact path starts with an entry")
            } else {
                broken = true;
                new_entry(new, s)
            };
        }
        apply(new, lid, &pick, |s| entry(s, lid), &mut out);
        out.broken_lids += u32::from(broken);
    }
    out
}

/// For when the whole merge ([`keep_intact_with`]'s `merged`, made from
/// `new`) closes a credit loop (the old routes turn onto the new ones
/// where no engine run would): LID by LID, in LID order, a LID's merged
/// entries replace its new ones
/// only when their dependencies (every switch a source, as
/// [`crate::repair`] counts them) close no cycle with those of every other
/// LID as it stands; the others keep the new entries. Each LID's tree is
/// the merged one or the new one, both loop-free, and the dependencies
/// stay acyclic on one VL. `None`, `new` untouched, when `new`'s own
/// dependencies are cyclic (an engine that promised less). Switch LIDs,
/// outside the deadlock promise, take the merged entries. The
/// [`Kept::broken_lids`] returned are 0: the caller's merge counted them.
pub fn keep_intact_acyclic(
    f: &RoutingFabric,
    old: &[Option<&[u8]>],
    merged: &Routes,
    new: &mut Routes,
) -> Option<Kept> {
    let ch = ChannelGraph::in_fabric_order(f, SelfLoops::Skip);
    let ns = f.num_switches();
    let port = |r: &Routes, v: usize, lid: u16| r.lfts[v].ports.get(usize::from(lid)).copied().unwrap_or(UNROUTED);
    let fill_row = |r: &Routes, lid: u16, row: &mut [u32]| {
        for (v, slot) in row.iter_mut().enumerate() {
            *slot = ch.chan_of_port(v, port(r, v, lid));
        }
    };
    let end_port_lid = |lid: u16| matches!(f.lid_owner(lid), Some(NodeRef::End(e)) if f.attached_switch(e).is_some());
    let mut deps = UsedDeps::new(&ch);
    let mut row = vec![NO_CHANNEL; ns];
    for lid in (1..=f.max_lid()).filter(|&lid| end_port_lid(lid)) {
        fill_row(new, lid, &mut row);
        for (a, b) in tree_pairs(&ch, &row) {
            deps.count(&ch, a, b);
        }
    }
    if !deps.order(&ch) {
        return None;
    }
    let fresh = new.clone();
    let mut out = Kept::default();
    let mut want = vec![NO_CHANNEL; ns];
    // LIDs that took their merged entries; a LID refused may fit once
    // others have moved, so the LIDs are offered again while any moves.
    let mut took = vec![false; usize::from(f.max_lid()) + 1];
    for _ in 0..MERGE_PASSES {
        let mut any = false;
        for lid in 1..=f.max_lid() {
            if took[usize::from(lid)]
                || f.lid_owner(lid).is_none()
                || (0..ns).all(|v| port(merged, v, lid) == port(&fresh, v, lid))
            {
                continue;
            }
            if end_port_lid(lid) {
                fill_row(&fresh, lid, &mut row);
                fill_row(merged, lid, &mut want);
                let gone: Vec<(u32, u32)> = tree_pairs(&ch, &row).collect();
                for &(a, b) in &gone {
                    deps.remove(&ch, a, b);
                }
                let wanted: Vec<(u32, u32)> = tree_pairs(&ch, &want).collect();
                let added = wanted.iter().take_while(|&&(a, b)| deps.add(&ch, a, b)).count();
                if added < wanted.len() {
                    for &(a, b) in &wanted[..added] {
                        deps.remove(&ch, a, b);
                    }
                    for &(a, b) in &gone {
                        let back = deps.add(&ch, a, b);
                        debug_assert!(back, "restoring a dependency of an acyclic set");
                    }
                    continue;
                }
            }
            for (v, lft) in new.lfts.iter_mut().enumerate() {
                if let Some(slot) = lft.ports.get_mut(usize::from(lid)) {
                    *slot = port(merged, v, lid);
                }
            }
            took[usize::from(lid)] = true;
            any = true;
        }
        if !any {
            break;
        }
    }
    let entry = |v: usize, lid: usize| old.get(v).copied().flatten().and_then(|t| t.get(lid).copied());
    for (v, (now, was_new)) in new.lfts.iter().zip(&fresh.lfts).enumerate() {
        for (lid, (&p, &q)) in now.ports.iter().zip(&was_new.ports).enumerate().skip(1) {
            let old_p = entry(v, lid);
            out.kept += u64::from(old_p == Some(p) && p != q);
            out.moved += u64::from(old_p != Some(p));
        }
    }
    Some(out)
}

/// Switch `s`'s entry `port` still leads somewhere for a LID of `owner`:
/// to itself when it owns the LID, to the owning end port, or over a
/// cable that is there to another switch.
fn hop_is_there(f: &RoutingFabric, s: usize, port: u8, owner: NodeRef) -> bool {
    match port {
        UNROUTED => false,
        0 => owner == NodeRef::Switch(SwitchId(s as u32)),
        _ => match f.switch_peer(SwitchId(s as u32), port) {
            Some(PortEnd::Switch(..)) => true,
            Some(PortEnd::End(e)) => owner == NodeRef::End(e),
            None => false,
        },
    }
}

/// Each switch's verdict in `state`, following `entry` (each switch's
/// port for a LID of `owner`; `None`: no table) from every switch, each
/// hop looked at once: INTACT when the walk reaches the owner, BROKEN when
/// it loops, leaves by a port with no cable or ends at a port that does
/// not own the LID; a walk that ends at an unrouted entry gets `unrouted`.
fn judge(
    f: &RoutingFabric,
    owner: NodeRef,
    entry: impl Fn(usize) -> Option<u8>,
    unrouted: u8,
    state: &mut [u8],
    walk: &mut Vec<u32>,
) {
    state.fill(UNKNOWN);
    for start in 0..state.len() {
        if state[start] != UNKNOWN {
            continue;
        }
        walk.clear();
        let mut at = start;
        let verdict = loop {
            match state[at] {
                INTACT => break INTACT,
                BROKEN | WALKING => break BROKEN,
                _ => {}
            }
            state[at] = WALKING;
            walk.push(at as u32);
            let port = match entry(at) {
                None | Some(UNROUTED) => break unrouted,
                Some(p) => p,
            };
            if port == 0 {
                break if owner == NodeRef::Switch(SwitchId(at as u32)) { INTACT } else { BROKEN };
            }
            match f.switch_peer(SwitchId(at as u32), port) {
                Some(PortEnd::Switch(next, _)) => at = next.index(),
                Some(PortEnd::End(e)) => break if owner == NodeRef::End(e) { INTACT } else { BROKEN },
                None => break BROKEN,
            }
        };
        for &s in walk.iter() {
            state[s as usize] = verdict;
        }
    }
}

/// Writes `pick` into the new tables for `lid`, counting what differs.
fn apply(new: &mut Routes, lid: u16, pick: &[u8], old: impl Fn(usize) -> Option<u8>, out: &mut Kept) {
    for (s, lft) in new.lfts.iter_mut().enumerate() {
        let Some(slot) = lft.ports.get_mut(usize::from(lid)) else { continue };
        let chosen = pick[s];
        if old(s) == Some(chosen) && *slot != chosen {
            out.kept += 1;
        }
        if old(s) != Some(chosen) {
            out.moved += 1;
        }
        *slot = chosen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::validate;
    use crate::engine::{route, EngineKind};
    use crate::options::EngineOptions;
    use crate::testfab;

    /// A fabric routed, one switch-to-switch cable cut, routed again and
    /// merged with the first tables.
    fn cut_and_merge(f: &RoutingFabric, cut: usize, kind: EngineKind) -> (RoutingFabric, Routes, Routes, Kept) {
        let options = EngineOptions::default();
        let before = route(kind, f, &options).unwrap();
        let trunks: Vec<usize> = f
            .links()
            .iter()
            .enumerate()
            .filter(|(_, l)| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..))))
            .map(|(i, _)| i)
            .collect();
        let g = testfab::without_links(f, &[trunks[cut]]);
        let fresh = route(kind, &g, &options).unwrap();
        let mut merged = fresh.clone();
        let old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
        let kept = keep_intact(&g, &old, &mut merged);
        (g, fresh, merged, kept)
    }

    fn changed(a: &Routes, b: &Routes) -> usize {
        a.lfts.iter().zip(&b.lfts).map(|(x, y)| x.ports.iter().zip(&y.ports).filter(|(p, q)| p != q).count()).sum()
    }

    #[test]
    fn a_cut_trunk_moves_only_what_crossed_it_and_the_merge_is_valid() {
        for (f, kind) in [
            (testfab::FatTree::full(8, 3).build(), EngineKind::FTree),
            (testfab::FatTree::full(8, 3).build(), EngineKind::UpDn),
            (testfab::grid(&[5, 5], &[true, true], 1, 1), EngineKind::MinHop),
        ] {
            let before = route(kind, &f, &EngineOptions::default()).unwrap();
            let (g, fresh, merged, kept) = cut_and_merge(&f, 3, kind);
            let report = validate(&g, &merged);
            assert!(report.is_valid(), "{kind:?}: {report:?}");
            // Fewer entries move than a fresh run moves, and some do.
            let (moved_fresh, moved_merged) = (changed(&before, &fresh), changed(&before, &merged));
            assert!(moved_merged > 0 && moved_merged <= moved_fresh, "{kind:?}: {moved_merged} vs {moved_fresh}");
            assert_eq!(moved_merged as u64, kept.moved, "{kind:?}");
            assert!(kept.broken_lids > 0, "{kind:?}");
        }
    }

    /// Random fabrics routed by nue on one VL, each trunk cut: where the
    /// whole merge of old and fresh tables closes a credit loop, the merge
    /// LID by LID is valid, free of credit loops, and still keeps old
    /// entries.
    #[test]
    fn a_merge_that_would_close_a_credit_loop_is_kept_lid_by_lid() {
        use crate::cdg::{analyze_cdg, CdgScope};
        let o = EngineOptions { max_vls: 1, ..EngineOptions::default() };
        let (mut cyclic, mut kept_some) = (0, 0);
        for seed in 0..3 {
            let spec = testfab::RandomSpec { switches: 20, extra_links: 24, max_hosts_per_switch: 3, max_lmc: 0 };
            let f = testfab::random_connected(seed, spec);
            let before = crate::nue::nue(&f, &o).unwrap();
            let old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
            let trunks = f
                .links()
                .iter()
                .enumerate()
                .filter(|(_, l)| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..))));
            for (i, _) in trunks {
                let g = testfab::without_links(&f, &[i]);
                let Ok(fresh) = crate::nue::nue(&g, &o) else { continue };
                let mut whole = fresh.clone();
                keep_intact(&g, &old, &mut whole);
                if analyze_cdg(&g, &whole, CdgScope::default()).deadlock_free() {
                    continue;
                }
                cyclic += 1;
                let mut merged = fresh.clone();
                let kept = keep_intact_acyclic(&g, &old, &whole, &mut merged).unwrap();
                let v = validate(&g, &merged);
                assert!(v.is_valid(), "seed {seed}, cut {i}: {v:?}");
                assert!(analyze_cdg(&g, &merged, CdgScope::default()).deadlock_free(), "seed {seed}, cut {i}");
                assert_eq!(kept.moved as usize, changed(&before, &merged), "seed {seed}, cut {i}");
                kept_some += usize::from(kept.kept > 0);
            }
        }
        assert!(cyclic > 0, "some whole merge must close a credit loop for this test to say anything");
        assert!(kept_some * 10 >= cyclic * 9, "{kept_some} of {cyclic} merges kept old entries");
    }

    #[test]
    fn the_lids_to_repair_are_those_some_table_sent_over_the_cut() {
        let f = testfab::FatTree::full(8, 3).build();
        let before = route(EngineKind::FTree, &f, &EngineOptions::default()).unwrap();
        let old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
        assert!(!lids_to_repair(&f, &old).contains(&true), "nothing lost, nothing to repair");
        let trunk = f.links().iter().position(|l| matches!((l.a, l.b), (PortEnd::Switch(..), PortEnd::Switch(..))));
        let link = f.links()[trunk.unwrap()];
        let g = testfab::without_links(&f, &[trunk.unwrap()]);
        let broken = lids_to_repair(&g, &old);
        let (PortEnd::Switch(a, pa), PortEnd::Switch(b, pb)) = (link.a, link.b) else { unreachable!() };
        for lid in 1..=f.max_lid() {
            let over = |s: SwitchId, p: u8| before.lfts[s.index()].ports[usize::from(lid)] == p;
            let crossed = f.lid_owner(lid).is_some() && (over(a, pa) || over(b, pb));
            assert_eq!(broken[usize::from(lid)], crossed, "LID {lid}");
        }
        assert!(broken.contains(&true));
        // A switch without an old table: every owned LID.
        let mut partial = old.clone();
        partial[0] = None;
        let all = lids_to_repair(&f, &partial);
        assert!((1..=f.max_lid()).all(|lid| all[usize::from(lid)] == f.lid_owner(lid).is_some()));
    }

    #[test]
    fn nothing_lost_keeps_every_old_entry() {
        let f = testfab::FatTree::full(8, 3).build();
        let before = route(EngineKind::FTree, &f, &EngineOptions::default()).unwrap();
        let mut merged = route(EngineKind::UpDn, &f, &EngineOptions::default()).unwrap();
        let old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
        let kept = keep_intact(&f, &old, &mut merged);
        assert_eq!((kept.moved, kept.broken_lids), (0, 0));
        assert_eq!(changed(&before, &merged), 0);
    }

    #[test]
    fn a_switch_without_an_old_table_takes_the_new_one() {
        let f = testfab::FatTree::full(8, 3).build();
        let before = route(EngineKind::FTree, &f, &EngineOptions::default()).unwrap();
        let fresh = route(EngineKind::UpDn, &f, &EngineOptions::default()).unwrap();
        let mut merged = fresh.clone();
        let mut old: Vec<Option<&[u8]>> = before.lfts.iter().map(|l| Some(&l.ports[..])).collect();
        old[2] = None;
        keep_intact(&f, &old, &mut merged);
        assert_eq!(merged.lfts[2], fresh.lfts[2]);
        assert!(validate(&f, &merged).is_valid());
    }
}
