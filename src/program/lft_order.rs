//! The order LFT blocks are written in, so that traffic crossing the fabric
//! while they land meets no transient loop and no new black hole.
//!
//! The order chosen: per destination LID, a switch's entry changes only
//! after the entry of the switch it will forward to (its new next hop) has
//! changed, when that one changes too: nearest the destination first,
//! farthest last. Then, whatever subset of the writes has landed,
//! - a packet at an updated switch follows new entries only (each next hop
//!   is updated or did not change), and the new routes are loop-free;
//! - a packet at a switch not yet updated follows old entries until it
//!   meets an updated switch, then new ones: old routes are loop-free, and
//!   once on new entries it never returns to old ones;
//! - so no loop, and a packet is only dropped where the old entries
//!   already dropped it (a cable that went down) or the new ones do.
//!
//! A block holds 64 LIDs and is written whole, and two LIDs of one block
//! can need opposite orders between the same two switches (on a torus,
//! where every LID fits in block 0, that is common). So the order is kept
//! per LID: each changed entry gets a level, 0 when its new next hop's
//! entry does not change (or is not ordered: a switch written before
//! activation), else one more than that next hop's. Round k writes every
//! block holding an entry of level k, with the new entries of levels up to
//! k and the old ones elsewhere; a block whose changed entries all share a
//! level is written once, with its final contents. Each round waits until
//! the previous one has been answered, and entries of one level never
//! depend on each other, so within a round any order is safe.
//!
//! New routes never loop, so levels are finite; an entry whose chain of
//! next hops runs past 64 switches (tables that loop) is written in round 0
//! and counted.

use std::collections::HashMap;

use crate::subnet::{NodeId, Subnet};

/// An LFT block to write: the switch, the block index.
pub type LftBlockAt = (NodeId, u32);

/// One block write of a round: where, and the 64 entries.
pub type LftWrite = (NodeId, u32, [u8; 64]);

/// The rounds of writes, and what they cost beyond one write per block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LftRounds {
    pub rounds: Vec<Vec<LftWrite>>,
    /// Writes of intermediate contents (a block written more than once).
    pub staged: usize,
    /// Entries whose next hops ran in a circle (tables that loop).
    pub looping: usize,
}

/// Orders the writes of `changing` (blocks whose wanted contents differ
/// from what the switch holds; every switch named has a known old table)
/// into rounds. `new` is every switch's wanted table, `old` what the
/// switches of `changing` held before.
pub fn rounds(
    subnet: &Subnet,
    changing: &[LftBlockAt],
    new: &HashMap<NodeId, Vec<u8>>,
    old: &HashMap<NodeId, std::sync::Arc<Vec<u8>>>,
) -> LftRounds {
    let entry = |table: &[u8], lid: usize| table.get(lid).copied().unwrap_or(0xFF);
    let ordered: std::collections::HashSet<LftBlockAt> = changing.iter().copied().collect();
    let changes = |node: NodeId, lid: usize| -> bool {
        if !ordered.contains(&(node, (lid / 64) as u32)) {
            return false;
        }
        match (old.get(&node), new.get(&node)) {
            (Some(had), Some(want)) => entry(had, lid) != entry(want, lid),
            _ => false,
        }
    };
    let mut out = LftRounds::default();
    let mut levels: HashMap<(NodeId, usize), usize> = HashMap::new();
    // The level of a changed entry: its chain of changed next hops, walked
    // to its end and memoised on the way back.
    let mut level_of = |start: NodeId, lid: usize, out: &mut LftRounds| -> usize {
        let mut chain = vec![start];
        let mut base = 0;
        loop {
            let at = *chain.last().expect("never empty");
            if let Some(&l) = levels.get(&(at, lid)) {
                chain.pop();
                base = l + 1;
                break;
            }
            let will = new.get(&at).map_or(0xFF, |t| entry(t, lid));
            let next = (will != 0xFF && will != 0)
                .then(|| subnet.node(at).ports.get(will as usize).and_then(|p| p.remote))
                .flatten()
                .map(|(n, _)| n)
                .filter(|&n| changes(n, lid));
            match next {
                Some(n) if chain.len() > 64 || chain.contains(&n) => {
                    out.looping += 1;
                    break;
                }
                Some(n) => chain.push(n),
                None => break,
            }
        }
        // chain's last entry has level `base`, each before it one more.
        for (l, &node) in (base..).zip(chain.iter().rev()) {
            levels.insert((node, lid), l);
        }
        levels[&(start, lid)]
    };
    let mut writes: Vec<(usize, LftWrite)> = Vec::new();
    let mut sorted: Vec<LftBlockAt> = changing.to_vec();
    sorted.sort_unstable_by_key(|&(node, block)| (block, node));
    for (node, block) in sorted {
        let (Some(had), Some(want)) = (old.get(&node), new.get(&node)) else { continue };
        let first = block as usize * 64;
        let mut entry_levels: Vec<Option<usize>> = vec![None; 64];
        for (i, slot) in entry_levels.iter_mut().enumerate() {
            if changes(node, first + i) {
                *slot = Some(level_of(node, first + i, &mut out));
            }
        }
        let mut distinct: Vec<usize> = entry_levels.iter().flatten().copied().collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.is_empty() {
            // Only entries past either table's end differ: one write.
            distinct.push(0);
        }
        out.staged += distinct.len() - 1;
        for &k in &distinct {
            let mut ports = [0xFFu8; 64];
            for (i, p) in ports.iter_mut().enumerate() {
                let lid = first + i;
                *p = match entry_levels[i] {
                    Some(l) if l > k => entry(had, lid),
                    _ => entry(want, lid),
                };
            }
            writes.push((k, (node, block, ports)));
        }
    }
    for (k, w) in writes {
        if out.rounds.len() <= k {
            out.rounds.resize(k + 1, Vec::new());
        }
        out.rounds[k].push(w);
    }
    out.rounds.retain(|r| !r.is_empty());
    out
}
