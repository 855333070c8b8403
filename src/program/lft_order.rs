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
//! activation), else one more than that next hop's. A block is written
//! once per level its changed entries hold, stage k with the new entries
//! of levels up to k and the old ones elsewhere; a block whose changed
//! entries share a level is written once, with its final contents.
//!
//! Each write waits only for the writes it depends on (those holding the
//! next hops' entries of its LIDs, and the block's previous stage), not
//! for a whole round: on a lossy fabric one slow Set delays what routes
//! through it, not every other switch.
//!
//! New routes never loop, so levels are finite; an entry whose chain of
//! next hops runs past 64 switches (tables that loop) gets level 0 and is
//! counted.

use std::collections::HashMap;

use crate::subnet::{NodeId, Subnet};

/// An LFT block to write: the switch, the block index.
pub type LftBlockAt = (NodeId, u32);

/// One block write: where, and the 64 entries.
pub type LftWrite = (NodeId, u32, [u8; 64]);

/// The writes, what each must wait for, and what the order cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LftOrder {
    pub writes: Vec<LftWrite>,
    /// `after[i]`: the writes (indices) that must have landed before
    /// write `i` is sent.
    pub after: Vec<Vec<usize>>,
    /// The longest chain of writes, in writes (what rounds would be).
    pub depth: usize,
    /// Writes of intermediate contents (a block written more than once).
    pub staged: usize,
    /// Entries whose next hops ran in a circle (tables that loop).
    pub looping: usize,
}

/// Orders the writes of `changing` (blocks whose wanted contents differ
/// from what the switch holds; every switch named has a known old table).
/// `new` is every switch's wanted table, `old` what the switches of
/// `changing` held before.
pub fn order(
    subnet: &Subnet,
    changing: &[LftBlockAt],
    new: &HashMap<NodeId, Vec<u8>>,
    old: &HashMap<NodeId, std::sync::Arc<Vec<u8>>>,
) -> LftOrder {
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
    // The switch an entry's new value forwards to, when its entry for the
    // same LID changes too (what the entry must wait for).
    let next_changing = |at: NodeId, lid: usize| -> Option<NodeId> {
        let will = new.get(&at).map_or(0xFF, |t| entry(t, lid));
        if will == 0xFF || will == 0 {
            return None;
        }
        let (next, _) = subnet.node(at).ports.get(will as usize)?.remote?;
        changes(next, lid).then_some(next)
    };
    let mut out = LftOrder::default();
    let mut levels: HashMap<(NodeId, usize), usize> = HashMap::new();
    // A changed entry's level: its chain of changed next hops, walked to
    // its end and memoised on the way back.
    let mut level_of = |start: NodeId, lid: usize, looping: &mut usize| -> usize {
        let mut chain = vec![start];
        let mut base = 0;
        loop {
            let at = *chain.last().expect("never empty");
            if let Some(&l) = levels.get(&(at, lid)) {
                chain.pop();
                base = l + 1;
                break;
            }
            match next_changing(at, lid) {
                Some(n) if chain.len() > 64 || chain.contains(&n) => {
                    *looping += 1;
                    break;
                }
                Some(n) => chain.push(n),
                None => break,
            }
        }
        for (l, &node) in (base..).zip(chain.iter().rev()) {
            levels.insert((node, lid), l);
        }
        levels[&(start, lid)]
    };
    // Every block's stages, and which write holds each changed entry.
    let mut sorted: Vec<LftBlockAt> = changing.to_vec();
    sorted.sort_unstable_by_key(|&(node, block)| (block, node));
    let mut write_of: HashMap<(NodeId, usize), usize> = HashMap::new();
    let mut stage_levels: Vec<usize> = Vec::new();
    for (node, block) in sorted {
        let (Some(had), Some(want)) = (old.get(&node), new.get(&node)) else { continue };
        let first = block as usize * 64;
        let mut entry_levels: Vec<Option<usize>> = vec![None; 64];
        for (i, slot) in entry_levels.iter_mut().enumerate() {
            if changes(node, first + i) {
                *slot = Some(level_of(node, first + i, &mut out.looping));
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
        let mut previous: Option<usize> = None;
        for &k in &distinct {
            let mut ports = [0xFFu8; 64];
            for (i, p) in ports.iter_mut().enumerate() {
                *p = match entry_levels[i] {
                    Some(l) if l > k => entry(had, first + i),
                    _ => entry(want, first + i),
                };
            }
            let w = out.writes.len();
            out.writes.push((node, block, ports));
            out.after.push(previous.into_iter().collect());
            stage_levels.push(k);
            for (i, l) in entry_levels.iter().enumerate() {
                if *l == Some(k) {
                    write_of.insert((node, first + i), w);
                }
            }
            previous = Some(w);
        }
    }
    // Each write waits for the writes holding its entries' next hops.
    for w in 0..out.writes.len() {
        let (node, block, _) = out.writes[w];
        let first = block as usize * 64;
        for lid in first..first + 64 {
            if write_of.get(&(node, lid)) != Some(&w) {
                continue;
            }
            let Some(next) = next_changing(node, lid) else { continue };
            if let Some(&dep) = write_of.get(&(next, lid)) {
                // Strictly lower levels only: an entry in a looping chain
                // must not make two writes wait for each other.
                if stage_levels[dep] < stage_levels[w] && !out.after[w].contains(&dep) {
                    out.after[w].push(dep);
                }
            }
        }
    }
    out.depth = stage_levels.iter().max().map_or(0, |&k| k + 1);
    out
}
