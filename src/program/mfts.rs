//! MulticastForwardingTable blocks (IBA 14.2.5.12): what each switch should
//! hold for the multicast routes, against what the SM knows it holds, as
//! the Sets (and, after a takeover, the Gets) that close the gap. Pure
//! planning: the caller sends the SMPs and reports the answers back.
//!
//! # Blocks
//! A switch's MFT is addressed by (block, position): block `b` holds MLIDs
//! `0xC000 + 32b ..= 0xC000 + 32b + 31`, position `p` covers ports
//! `16p ..= 16p + 15` (port 0, the switch itself, is bit 0 of position 0),
//! and the AttributeModifier is `b | p << 28`
//! ([`crate::mad::mft::attribute_modifier`]). A switch with N ports has
//! positions `0..=N/16` (a 36-port switch: three, the last holding only
//! ports 32..=36). [`wanted_blocks`] builds the (block, position) pairs
//! that hold at least one port for one switch's MLID -> ports map; MLIDs at
//! or past the switch's MulticastFDBCap (IBA 14.2.5.4, the number of MLIDs
//! it supports) are left out and reported.
//!
//! # Only what changes is sent
//! [`MftMemo`] records, per switch GUID and (block, position), what the
//! switch answered to the SM's Sets and Gets. A pair the memo has no record
//! of is *unknown*, unless the memo knows it is zero (it was written or
//! read as zero). [`mft_sets`] returns:
//! - `reads`: the pairs of a wanted block (every position of it) the memo
//!   knows nothing about. After a takeover the memo is empty, so every
//!   wanted block is read first; the caller records the answers with
//!   [`MftMemo::apply_read`] and calls [`mft_sets`] again, which then sends
//!   only the pairs that differ. (OpenSM writes every block up to the
//!   highest in use, for every position, each time: no reads, no diff.)
//! - Sets for known pairs whose content differs from what is wanted, a pair
//!   the memo holds that is not wanted any more included: it is written
//!   all-zero once; the memo then knows it as zero and holds no masks for
//!   it.
//!
//! Blocks that are neither wanted nor held are never read: an MLID the SM
//! has not routed does not matter until it is routed, and then its block is
//! wanted and read before anything is written to it.
//!
//! # Order: removals before additions
//! A group's old tree and its new tree are each loop-free, but a switch
//! already on the new tree next to one still on the old can join them into
//! a loop (when the root moves, old and new trees may together close a
//! ring). The rule: every Set is split at the bit level into
//! - phase 1, `removals`: the old masks AND the new ones (only bits that go
//!   away are cleared), and
//! - phase 2, `additions`: the new masks (only bits that come are set),
//!
//! and the caller sends phase 1 to *every* switch, waits for all answers,
//! then sends phase 2. During phase 1 every switch's ports for an MLID are
//! a subset of its old tree's ports, during phase 2 a subset of the new
//! tree's (a superset of old AND new), and a flood over a subset of a
//! tree's links never comes back to a switch: packets can be dropped while
//! the trees change, never circulate. The test `root_move_is_loop_free`
//! checks every intermediate state of a root move on a ring, and that
//! additions first would loop.
//!
//! A switch whose MFT may have been reset (rebooted, replaced) must be
//! forgotten ([`MftMemo::forget`]) so that its blocks are read again.
//!
//! Cost: O(K log K) per switch for K (block, position) pairs wanted or
//! held; memory: 64 bytes per non-zero pair.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ibsm_routing::mcast::PortSet;

use crate::mad::mft::{attribute_modifier, locate, MFT_BLOCK_ENTRIES, MFT_MAX_BLOCK, PORTS_PER_POSITION};
use crate::mad::MftBlockRepr;
use crate::types::{Guid, Lid};

/// The 32 port masks of one (block, position).
pub type MftMasks = [u16; MFT_BLOCK_ENTRIES];

const ZERO: MftMasks = [0; MFT_BLOCK_ENTRIES];

/// One (block, position) of a switch's MFT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MftKey {
    pub block: u16,
    pub position: u8,
}

impl MftKey {
    pub fn new(block: u16, position: u8) -> MftKey {
        MftKey { block, position }
    }

    /// AttributeModifier of a Get or Set of this pair (IBA 14.2.5.12).
    pub fn attribute_modifier(self) -> u32 {
        attribute_modifier(self.block, self.position)
    }
}

/// What [`wanted_blocks`] left out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MftProblem {
    #[error("LID {mlid:#06x} is not a multicast LID")]
    NotMulticast { mlid: u16 },
    /// The switch holds MLIDs `0xC000 .. 0xC000 + cap` only.
    #[error("MLID {mlid:#06x} is past the switch's MulticastFDBCap {cap}")]
    BeyondCap { mlid: u16, cap: u16 },
    #[error("MLID {mlid:#06x} names port {port} on a switch with {num_ports} ports")]
    PortBeyondSwitch { mlid: u16, port: u8, num_ports: u8 },
}

/// One switch's MFT as the routes want it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MftWanted {
    /// Every pair holding at least one port.
    pub blocks: BTreeMap<MftKey, MftMasks>,
    /// Positions the switch has: `0..positions`.
    pub positions: u8,
    pub problems: Vec<MftProblem>,
}

/// The MFT blocks for one switch with `num_ports` ports and
/// MulticastFDBCap `cap`, from its MLID -> ports map (the routing crate's
/// `McastRoutes::table`). O(G·P) for G MLIDs and P positions.
pub fn wanted_blocks(table: &BTreeMap<u16, PortSet>, num_ports: u8, cap: u16) -> MftWanted {
    let positions = num_ports / PORTS_PER_POSITION as u8 + 1;
    let entries = usize::from(cap).min((usize::from(MFT_MAX_BLOCK) + 1) * MFT_BLOCK_ENTRIES);
    let mut out = MftWanted { positions, ..MftWanted::default() };
    for (&mlid, &ports) in table {
        let Some((block, index)) = locate(Lid(mlid)).filter(|_| Lid(mlid).is_multicast()) else {
            out.problems.push(MftProblem::NotMulticast { mlid });
            continue;
        };
        if usize::from(mlid - Lid::MULTICAST_MIN.0) >= entries {
            out.problems.push(MftProblem::BeyondCap { mlid, cap });
            continue;
        }
        if let Some(port) = ports.iter().find(|&p| p > num_ports) {
            out.problems.push(MftProblem::PortBeyondSwitch { mlid, port, num_ports });
        }
        for position in 0..positions {
            let first = u32::from(position) * PORTS_PER_POSITION as u32;
            // Bits for ports past num_ports in the last position stay 0.
            let valid = u32::from(num_ports) - first + 1;
            let keep = if valid >= 16 { 0xffff } else { (1u16 << valid) - 1 };
            let mask = ports.mask16(position) & keep;
            if mask != 0 {
                out.blocks.entry(MftKey::new(block, position)).or_insert(ZERO)[index] = mask;
            }
        }
    }
    out
}

impl MftWanted {
    /// [`digest`] of the blocks wanted.
    pub fn digest(&self) -> u64 {
        digest(self.blocks.iter().map(|(k, m)| (*k, m)))
    }
}

/// A digest of a switch's non-zero (block, position) pairs, in key order:
/// 64-bit FNV-1a over each pair's block, position and 32 masks, all
/// big-endian. Two SMs that agree on the digest agree on the contents
/// (short of a collision, about 2^-64 for unrelated tables): a new master
/// compares its own routes' digest with the one the old master streamed
/// (`crate::sa::sync`) instead of reading the blocks. Defined here, not by
/// `std`'s hasher, so that SMs of different builds compute the same.
pub fn digest<'a>(pairs: impl IntoIterator<Item = (MftKey, &'a MftMasks)>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(PRIME);
        }
    };
    for (key, masks) in pairs {
        eat(&key.block.to_be_bytes());
        eat(&[key.position]);
        for m in masks {
            eat(&m.to_be_bytes());
        }
    }
    h
}

/// One switch as far as the SM knows it (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchMft {
    /// Non-zero pairs as the switch last answered.
    held: BTreeMap<MftKey, MftMasks>,
    /// Pairs known to be all zero.
    zero: BTreeSet<MftKey>,
    /// Every pair not in `held` is known to be zero.
    cleared: bool,
}

impl SwitchMft {
    /// What the switch holds at `key`; `None` when unknown.
    pub fn holds(&self, key: MftKey) -> Option<MftMasks> {
        match self.held.get(&key) {
            Some(m) => Some(*m),
            None if self.cleared || self.zero.contains(&key) => Some(ZERO),
            None => None,
        }
    }

    /// The non-zero pairs it holds.
    pub fn held(&self) -> impl Iterator<Item = (MftKey, &MftMasks)> + '_ {
        self.held.iter().map(|(k, m)| (*k, m))
    }

    fn record(&mut self, key: MftKey, masks: MftMasks) {
        if masks == ZERO {
            self.held.remove(&key);
            if !self.cleared {
                self.zero.insert(key);
            }
        } else {
            self.held.insert(key, masks);
            self.zero.remove(&key);
        }
    }
}

/// What the SM knows each switch's MFT holds, by switch GUID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MftMemo {
    switches: HashMap<Guid, SwitchMft>,
}

impl MftMemo {
    /// Records what `switch` answered to a Get of `key`.
    pub fn apply_read(&mut self, switch: Guid, key: MftKey, answered: &MftBlockRepr) {
        self.switches.entry(switch).or_default().record(key, answered.port_masks);
    }

    /// Records the answer to `set` (the GetResp holds what the switch now
    /// has, which is what a later plan compares against).
    pub fn apply_set(&mut self, set: &MftSet, answered: &MftBlockRepr) {
        self.apply_read(set.switch, set.key, answered);
    }

    /// Declares `switch`'s whole MFT zero except what is recorded: for a
    /// caller that knows the table was cleared and wants to skip the reads.
    pub fn assume_cleared(&mut self, switch: Guid) {
        let s = self.switches.entry(switch).or_default();
        s.cleared = true;
        s.zero.clear();
    }

    /// Takes `switch`'s MFT to hold exactly `wanted` in the wanted blocks
    /// (every other position of them zero), without reading: for a caller
    /// that has it on another SM's word that the switch holds that (the
    /// old master's digest, [`digest`]). Blocks not wanted stay unknown.
    pub fn adopt(&mut self, switch: Guid, wanted: &MftWanted) {
        let mut s = SwitchMft { held: wanted.blocks.clone(), ..SwitchMft::default() };
        for block in wanted.blocks.keys().map(|k| k.block).collect::<BTreeSet<_>>() {
            let zero = (0..wanted.positions).map(|p| MftKey::new(block, p)).filter(|k| !s.held.contains_key(k));
            s.zero.extend(zero);
        }
        self.switches.insert(switch, s);
    }

    /// [`digest`] of what `switch` (with `positions` positions) holds,
    /// when the memo knows every position of each block it holds masks
    /// in; `None` otherwise, or when it knows nothing of the switch.
    pub fn digest_of(&self, switch: Guid, positions: u8) -> Option<u64> {
        let s = self.switches.get(&switch)?;
        let blocks: BTreeSet<u16> = s.held.keys().map(|k| k.block).collect();
        let whole = blocks.iter().all(|&b| (0..positions).all(|p| s.holds(MftKey::new(b, p)).is_some()));
        whole.then(|| digest(s.held()))
    }

    /// Forgets `switch` (its MFT may have been reset, or it is gone): its
    /// wanted blocks are read again before anything is written.
    pub fn forget(&mut self, switch: Guid) {
        self.switches.remove(&switch);
    }

    /// Keeps only the switches `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(Guid) -> bool) {
        self.switches.retain(|g, _| keep(*g));
    }

    pub fn switch(&self, switch: Guid) -> Option<&SwitchMft> {
        self.switches.get(&switch)
    }

    pub fn clear(&mut self) {
        self.switches.clear();
    }
}

/// One SubnSet(MulticastForwardingTable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MftSet {
    pub switch: Guid,
    pub key: MftKey,
    pub want: MftBlockRepr,
}

impl MftSet {
    pub fn attribute_modifier(&self) -> u32 {
        self.key.attribute_modifier()
    }
}

/// What one switch needs, in the order the caller sends it (module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MftSets {
    /// Pairs to Get first (then [`MftMemo::apply_read`] and plan again);
    /// while any is outstanding no Set is planned for its block.
    pub reads: Vec<MftKey>,
    /// Phase 1: Sets that only clear bits.
    pub removals: Vec<MftSet>,
    /// Phase 2, after every switch answered its phase 1: Sets that only
    /// set bits.
    pub additions: Vec<MftSet>,
}

impl MftSets {
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.removals.is_empty() && self.additions.is_empty()
    }
    /// SMPs in all.
    pub fn len(&self) -> usize {
        self.reads.len() + self.removals.len() + self.additions.len()
    }
}

/// The Gets and Sets that bring `switch` from what `memo` knows to
/// `wanted`. Pairs looked at: every position of every wanted block, and
/// every pair the memo holds masks for. O(K log K).
pub fn mft_sets(switch: Guid, wanted: &MftWanted, memo: &MftMemo) -> MftSets {
    let empty = SwitchMft::default();
    let known = memo.switch(switch).unwrap_or(&empty);
    let mut keys: BTreeSet<MftKey> = known.held.keys().copied().collect();
    let mut last_block = None;
    for key in wanted.blocks.keys() {
        if last_block != Some(key.block) {
            last_block = Some(key.block);
            keys.extend((0..wanted.positions).map(|p| MftKey::new(key.block, p)));
        }
    }
    let mut out = MftSets::default();
    let unknown_blocks: BTreeSet<u16> = keys.iter().filter(|k| known.holds(**k).is_none()).map(|k| k.block).collect();
    for key in keys {
        let Some(old) = known.holds(key) else {
            out.reads.push(key);
            continue;
        };
        // A block some of whose positions are still being read is planned
        // whole once the reads are in.
        if unknown_blocks.contains(&key.block) {
            continue;
        }
        let new = wanted.blocks.get(&key).copied().unwrap_or(ZERO);
        if old == new {
            continue;
        }
        let mut kept = ZERO;
        for (k, (o, n)) in kept.iter_mut().zip(old.iter().zip(new.iter())) {
            *k = o & n;
        }
        if kept != old {
            out.removals.push(MftSet { switch, key, want: MftBlockRepr { port_masks: kept } });
        }
        if kept != new {
            out.additions.push(MftSet { switch, key, want: MftBlockRepr { port_masks: new } });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_routing::mcast::{McastGroup, McastMember, McastRoutes};
    use ibsm_routing::testfab::{self, FatTree};
    use ibsm_routing::{RoutingFabric, SwitchId};
    use proptest::prelude::*;

    fn ports(list: &[u8]) -> PortSet {
        list.iter().copied().collect()
    }

    /// Sends `sets` to a switch that keeps whatever it is told.
    fn answer(memo: &mut MftMemo, sets: &[MftSet]) {
        for s in sets {
            memo.apply_set(s, &s.want);
        }
    }

    /// Plans, answers both phases, and returns the plan.
    fn program(memo: &mut MftMemo, guid: Guid, wanted: &MftWanted) -> MftSets {
        let plan = mft_sets(guid, wanted, memo);
        assert!(plan.reads.is_empty(), "nothing unknown in these tests: {:?}", plan.reads);
        answer(memo, &plan.removals);
        answer(memo, &plan.additions);
        plan
    }

    #[test]
    fn blocks_are_byte_exact_for_a_36_port_switch() {
        let table: BTreeMap<u16, PortSet> = [
            (0xC000, ports(&[0, 1, 17, 36])),
            (0xC001, ports(&[2])),
            (0xC021, ports(&[16, 31])),
            (0xC01F, ports(&[15, 32])),
        ]
        .into_iter()
        .collect();
        let w = wanted_blocks(&table, 36, 1024);
        assert!(w.problems.is_empty());
        // Ports 0..=36: positions 0 (0-15), 1 (16-31), 2 (32-36).
        assert_eq!(w.positions, 3);
        let keys: Vec<(u16, u8)> = w.blocks.keys().map(|k| (k.block, k.position)).collect();
        assert_eq!(keys, vec![(0, 0), (0, 1), (0, 2), (1, 1)]);
        let bytes = |k: (u16, u8)| MftBlockRepr { port_masks: w.blocks[&MftKey::new(k.0, k.1)] }.to_bytes();
        let mut b00 = [0u8; 64];
        b00[0..2].copy_from_slice(&[0x00, 0x03]); // MLID 0xC000: ports 0, 1
        b00[2..4].copy_from_slice(&[0x00, 0x04]); // 0xC001: port 2
        b00[62..64].copy_from_slice(&[0x80, 0x00]); // 0xC01F: port 15
        assert_eq!(bytes((0, 0)), b00);
        let mut b01 = [0u8; 64];
        b01[0..2].copy_from_slice(&[0x00, 0x02]); // 0xC000: port 17
        assert_eq!(bytes((0, 1)), b01);
        let mut b02 = [0u8; 64];
        b02[0..2].copy_from_slice(&[0x00, 0x10]); // 0xC000: port 36
        b02[62..64].copy_from_slice(&[0x00, 0x01]); // 0xC01F: port 32
        assert_eq!(bytes((0, 2)), b02);
        let mut b11 = [0u8; 64];
        b11[2..4].copy_from_slice(&[0x80, 0x01]); // 0xC021: ports 16, 31
        assert_eq!(bytes((1, 1)), b11);
        assert_eq!(MftKey::new(0, 2).attribute_modifier(), 0x2000_0000);
        assert_eq!(MftKey::new(1, 1).attribute_modifier(), 0x1000_0001);
        // 31 ports fit two positions.
        assert_eq!(wanted_blocks(&table, 31, 1024).positions, 2);
    }

    #[test]
    fn cap_ports_and_non_multicast_lids_are_reported() {
        let table: BTreeMap<u16, PortSet> =
            [(0x0010, ports(&[1])), (0xC000, ports(&[1, 9])), (0xC020, ports(&[2])), (0xFFFF, ports(&[1]))]
                .into_iter()
                .collect();
        let w = wanted_blocks(&table, 8, 32);
        assert_eq!(
            w.problems,
            vec![
                MftProblem::NotMulticast { mlid: 0x0010 },
                MftProblem::PortBeyondSwitch { mlid: 0xC000, port: 9, num_ports: 8 },
                MftProblem::BeyondCap { mlid: 0xC020, cap: 32 },
                MftProblem::NotMulticast { mlid: 0xFFFF },
            ]
        );
        // Port 9 of an 8-port switch is dropped, port 1 kept.
        assert_eq!(w.blocks.len(), 1);
        assert_eq!(w.blocks[&MftKey::new(0, 0)][0], 0x0002);
        assert!(wanted_blocks(&table, 8, 0).blocks.is_empty());
    }

    #[test]
    fn second_call_sends_nothing_and_clearing_writes_zeros_once() {
        let guid = Guid(0x10);
        let mut memo = MftMemo::default();
        memo.assume_cleared(guid);
        let table: BTreeMap<u16, PortSet> = [(0xC000, ports(&[1, 2])), (0xC040, ports(&[20]))].into_iter().collect();
        let w = wanted_blocks(&table, 24, 1024);
        let first = program(&mut memo, guid, &w);
        assert!(first.removals.is_empty());
        assert_eq!(first.additions.len(), 2);
        assert!(mft_sets(guid, &w, &memo).is_empty(), "second call");
        // The group at 0xC040 goes: its block is written zero once, then
        // forgotten.
        let table: BTreeMap<u16, PortSet> = [(0xC000, ports(&[1, 2]))].into_iter().collect();
        let w = wanted_blocks(&table, 24, 1024);
        let clear = program(&mut memo, guid, &w);
        assert_eq!(
            clear.removals,
            vec![MftSet { switch: guid, key: MftKey::new(2, 1), want: MftBlockRepr::default() }]
        );
        assert!(clear.additions.is_empty());
        assert!(mft_sets(guid, &w, &memo).is_empty());
        assert_eq!(memo.switch(guid).unwrap().held().count(), 1);
        // Every group gone: block 0 once, then nothing.
        let w = wanted_blocks(&BTreeMap::new(), 24, 1024);
        assert_eq!(program(&mut memo, guid, &w).len(), 1);
        assert!(mft_sets(guid, &w, &memo).is_empty());
        assert_eq!(memo.switch(guid).unwrap().held().count(), 0);
    }

    #[test]
    fn after_a_takeover_wanted_blocks_are_read_and_only_differences_sent() {
        let guid = Guid(0x20);
        let table: BTreeMap<u16, PortSet> = [(0xC000, ports(&[1, 17])), (0xC001, ports(&[3]))].into_iter().collect();
        let w = wanted_blocks(&table, 24, 1024);
        let mut memo = MftMemo::default();
        let plan = mft_sets(guid, &w, &memo);
        // Both positions of block 0 are unknown: read, nothing written yet.
        assert_eq!(plan.reads, vec![MftKey::new(0, 0), MftKey::new(0, 1)]);
        assert!(plan.removals.is_empty() && plan.additions.is_empty());
        // The old master left position 0 right (and a stale MLID 0xC005 on
        // port 4), position 1 right.
        let mut p0 = w.blocks[&MftKey::new(0, 0)];
        p0[5] = 1 << 4;
        memo.apply_read(guid, MftKey::new(0, 0), &MftBlockRepr { port_masks: p0 });
        let plan = mft_sets(guid, &w, &memo);
        assert_eq!(plan.reads, vec![MftKey::new(0, 1)], "position 1 still unknown: block 0 waits");
        assert!(plan.removals.is_empty());
        memo.apply_read(guid, MftKey::new(0, 1), &MftBlockRepr { port_masks: w.blocks[&MftKey::new(0, 1)] });
        let plan = mft_sets(guid, &w, &memo);
        assert!(plan.reads.is_empty() && plan.additions.is_empty());
        assert_eq!(plan.removals.len(), 1);
        assert_eq!(plan.removals[0].key, MftKey::new(0, 0));
        assert_eq!(plan.removals[0].want.port_masks, w.blocks[&MftKey::new(0, 0)]);
        answer(&mut memo, &plan.removals);
        assert!(mft_sets(guid, &w, &memo).is_empty());
        // A switch forgotten (rebooted) is read again.
        memo.forget(guid);
        assert_eq!(mft_sets(guid, &w, &memo).reads.len(), 2);
    }

    #[test]
    fn a_digest_the_old_master_vouched_for_stands_in_for_the_reads() {
        let guid = Guid(0x30);
        let table: BTreeMap<u16, PortSet> = [(0xC000, ports(&[1, 17])), (0xC041, ports(&[3]))].into_iter().collect();
        let w = wanted_blocks(&table, 24, 1024);
        // The old master wrote it all and knows every position of its
        // blocks: its digest is the wanted blocks' digest.
        let mut old = MftMemo::default();
        old.assume_cleared(guid);
        program(&mut old, guid, &w);
        assert_eq!(old.digest_of(guid, w.positions), Some(w.digest()));
        // A master that only read one position of a block it holds masks
        // in cannot vouch for the switch.
        let mut partial = MftMemo::default();
        partial.apply_read(guid, MftKey::new(0, 0), &MftBlockRepr { port_masks: w.blocks[&MftKey::new(0, 0)] });
        assert_eq!(partial.digest_of(guid, w.positions), None);
        assert_eq!(MftMemo::default().digest_of(guid, w.positions), None);
        // Another port, another MLID or another block: another digest.
        for other in [
            [(0xC000, ports(&[1, 18])), (0xC041, ports(&[3]))],
            [(0xC000, ports(&[1, 17])), (0xC042, ports(&[3]))],
            [(0xC000, ports(&[1, 17])), (0xC061, ports(&[3]))],
        ] {
            let table: BTreeMap<u16, PortSet> = other.into_iter().collect();
            assert_ne!(wanted_blocks(&table, 24, 1024).digest(), w.digest(), "{table:?}");
        }
        // The new master adopts the switch: no read, no Set, and the memo
        // is what the old master's was for those blocks.
        let mut new = MftMemo::default();
        new.adopt(guid, &w);
        assert!(mft_sets(guid, &w, &new).is_empty());
        assert_eq!(new.digest_of(guid, w.positions), Some(w.digest()));
        for key in (0..w.positions).flat_map(|p| [MftKey::new(0, p), MftKey::new(2, p)]) {
            assert_eq!(new.switch(guid).unwrap().holds(key), old.switch(guid).unwrap().holds(key), "{key:?}");
        }
        // A group that goes is cleared with one Set, as the old master would.
        let fewer: BTreeMap<u16, PortSet> = [(0xC000, ports(&[1, 17]))].into_iter().collect();
        let plan = mft_sets(guid, &wanted_blocks(&fewer, 24, 1024), &new);
        assert!(plan.reads.is_empty());
        assert_eq!(plan.removals.len(), 1);
        assert_eq!(plan.removals[0].key, MftKey::new(2, 0));
    }

    #[test]
    fn a_set_that_moves_a_port_is_split_into_a_removal_then_an_addition() {
        let guid = Guid(0x30);
        let mut memo = MftMemo::default();
        memo.assume_cleared(guid);
        let old: BTreeMap<u16, PortSet> = [(0xC000, ports(&[1, 2])), (0xC001, ports(&[5]))].into_iter().collect();
        program(&mut memo, guid, &wanted_blocks(&old, 8, 64));
        let new: BTreeMap<u16, PortSet> = [(0xC000, ports(&[1, 3])), (0xC001, ports(&[5]))].into_iter().collect();
        let w = wanted_blocks(&new, 8, 64);
        let plan = mft_sets(guid, &w, &memo);
        assert_eq!(plan.removals.len(), 1);
        assert_eq!(plan.removals[0].want.port_masks[..2], [0b0010, 0b10_0000]);
        assert_eq!(plan.additions.len(), 1);
        assert_eq!(plan.additions[0].want.port_masks[..2], [0b1010, 0b10_0000]);
    }

    /// Every switch's wanted blocks for `routes` (cap 1024).
    fn all_wanted(f: &RoutingFabric, routes: &McastRoutes) -> Vec<(Guid, MftWanted)> {
        f.switch_ids()
            .map(|s| (Guid(f.switch(s).guid), wanted_blocks(routes.table(s), f.switch(s).num_ports, 1024)))
            .collect()
    }

    #[test]
    fn one_member_leaving_changes_one_block_on_each_affected_switch() {
        // 2-level radix 36: 18 spines, 36 leaves of 18 hosts; 32 groups
        // (block 0), every third host in each, shifted per group.
        let f = FatTree::full(36, 2).build();
        let hosts: Vec<McastMember> = f.end_port_ids().map(McastMember::Port).collect();
        let mut groups: Vec<McastGroup> = (0..32u16)
            .map(|i| {
                let m = hosts.iter().copied().skip(usize::from(i % 3)).step_by(3).collect();
                McastGroup::new(0xC000 + i, m)
            })
            .collect();
        let mut routes = McastRoutes::new(&f);
        routes.route_groups(&f, &groups).unwrap();
        let mut memo = MftMemo::default();
        for (guid, w) in all_wanted(&f, &routes) {
            memo.assume_cleared(guid);
            program(&mut memo, guid, &w);
        }
        // Members of one leaf leave one by one: while the leaf keeps
        // members, only its host port goes (one pair, on the leaf). The
        // last one takes the leaf out of the tree: its whole entry goes
        // (host port and up port: one pair per position they are in) and
        // the root spine loses its port to the leaf (one pair).
        let leaf_of = |m: &McastMember| {
            let McastMember::Port(e) = m else { unreachable!() };
            f.attached_switch(*e).unwrap().0
        };
        let positions_of = |p: PortSet| p.iter().map(|p| p / 16).collect::<BTreeSet<u8>>().len();
        let mlid = 0xC007;
        let leaf = leaf_of(&groups[7].members[0]);
        let on_leaf: Vec<McastMember> = groups[7].members.iter().copied().filter(|m| leaf_of(m) == leaf).collect();
        assert!(on_leaf.len() >= 2);
        for (k, leaving) in on_leaf.iter().enumerate() {
            let root = routes.tree(mlid).unwrap().root;
            let before: Vec<PortSet> = f.switch_ids().map(|s| routes.ports(s, mlid)).collect();
            groups[7].members.retain(|m| m != leaving);
            let u = routes.route_groups(&f, std::slice::from_ref(&groups[7])).unwrap();
            assert_eq!(routes.tree(mlid).unwrap().root, root);
            let last = k + 1 == on_leaf.len();
            let mut expect = vec![leaf];
            if last {
                expect.push(root);
                expect.sort();
            }
            assert_eq!(u.touched, expect);
            for (guid, w) in all_wanted(&f, &routes) {
                let s = f.switch_ids().find(|&s| f.switch(s).guid == guid.0).unwrap();
                let plan = program(&mut memo, guid, &w);
                assert!(plan.additions.is_empty(), "a leave only clears bits");
                let pairs = match s {
                    s if s == leaf && !last => 1,
                    s if s == leaf => positions_of(before[s.index()]),
                    s if s == root && last => 1,
                    _ => 0,
                };
                assert_eq!(plan.removals.len(), pairs, "switch {s:?}, leave {k}");
                assert!(plan.removals.iter().all(|r| r.key.block == 0));
            }
        }
    }

    /// Ports per switch index for `mlid` as the memo says the switches hold
    /// them.
    fn held_ports(f: &RoutingFabric, memo: &MftMemo, mlid: u16) -> Vec<PortSet> {
        let (block, index) = locate(Lid(mlid)).unwrap();
        f.switch_ids()
            .map(|s| {
                let mut p = PortSet::EMPTY;
                if let Some(sw) = memo.switch(Guid(f.switch(s).guid)) {
                    for pos in 0..16 {
                        if let Some(m) = sw.holds(MftKey::new(block, pos)) {
                            p.set_mask16(pos, m[index]);
                        }
                    }
                }
                p
            })
            .collect()
    }

    /// A packet injected at any switch, on any port, floods without
    /// entering a switch twice.
    fn loop_free(f: &RoutingFabric, sets: &[PortSet]) -> bool {
        for s in f.switch_ids() {
            for in_port in 0..=f.switch(s).num_ports {
                let mut entered = vec![false; f.num_switches()];
                let mut stack = vec![(s, in_port)];
                while let Some((sw, inp)) = stack.pop() {
                    if std::mem::replace(&mut entered[sw.index()], true) {
                        return false;
                    }
                    for p in sets[sw.index()].iter().filter(|&p| p != inp && p != 0) {
                        if let Some(ibsm_routing::PortEnd::Switch(n, rp)) = f.switch_peer(sw, p) {
                            stack.push((n, rp));
                        }
                    }
                }
            }
        }
        true
    }

    /// Applies every subset of `sets` to a copy of `memo` and checks the
    /// flood is loop-free in each.
    fn every_subset_loop_free(f: &RoutingFabric, memo: &MftMemo, sets: &[MftSet], mlid: u16) -> bool {
        assert!(sets.len() < 16);
        (0u32..1 << sets.len()).all(|mask| {
            let mut m = memo.clone();
            for (i, s) in sets.iter().enumerate() {
                if mask >> i & 1 == 1 {
                    m.apply_set(s, &s.want);
                }
            }
            loop_free(f, &held_ports(f, &m, mlid))
        })
    }

    #[test]
    fn root_move_is_loop_free() {
        // A ring of 6 switches, one host each. The group first spans
        // switches 0..=3, then 3, 4, 5, 0: the root moves from switch 1
        // to switch 4, and the two trees together close the ring.
        let f = testfab::ring(6, 1);
        let host_on = |i: u32| {
            McastMember::Port(f.end_port_ids().find(|&e| f.attached_switch(e).unwrap().0 == SwitchId(i)).unwrap())
        };
        let mlid = 0xC000;
        let before = McastGroup::new(mlid, (0..4).map(host_on).collect());
        let after = McastGroup::new(mlid, [3, 4, 5, 0].into_iter().map(host_on).collect());
        let mut routes = McastRoutes::new(&f);
        routes.route_groups(&f, std::slice::from_ref(&before)).unwrap();
        let old_root = routes.tree(mlid).unwrap().root;
        let mut memo = MftMemo::default();
        for (guid, w) in all_wanted(&f, &routes) {
            memo.assume_cleared(guid);
            program(&mut memo, guid, &w);
        }
        routes.route_groups(&f, std::slice::from_ref(&after)).unwrap();
        assert_ne!(routes.tree(mlid).unwrap().root, old_root, "the root moved");
        let plans: Vec<MftSets> = all_wanted(&f, &routes).iter().map(|(g, w)| mft_sets(*g, w, &memo)).collect();
        let removals: Vec<MftSet> = plans.iter().flat_map(|p| p.removals.iter().copied()).collect();
        let additions: Vec<MftSet> = plans.iter().flat_map(|p| p.additions.iter().copied()).collect();
        assert!(!removals.is_empty() && !additions.is_empty());

        // Writing each switch's new masks directly, in some order, can
        // loop (e.g. switch 0 on the new tree while switch 3 is still on
        // the old: the two trees make the ring).
        let direct: Vec<MftSet> = additions
            .iter()
            .copied()
            .chain(
                removals.iter().copied().filter(|r| !additions.iter().any(|a| (a.switch, a.key) == (r.switch, r.key))),
            )
            .collect();
        assert!(!every_subset_loop_free(&f, &memo, &direct, mlid));

        // Phase 1 in any order, then phase 2 in any order: never a loop.
        assert!(every_subset_loop_free(&f, &memo, &removals, mlid));
        answer(&mut memo, &removals);
        assert!(every_subset_loop_free(&f, &memo, &additions, mlid));
        answer(&mut memo, &additions);
        for (guid, w) in all_wanted(&f, &routes) {
            assert!(mft_sets(guid, &w, &memo).is_empty());
        }
    }

    proptest! {
        /// Random old and new tables: phase 1 only clears bits and leaves
        /// old AND new, phase 2 only sets bits and leaves new, and a third
        /// plan is empty.
        #[test]
        fn phases_clear_then_set(
            old in proptest::collection::btree_map(0xC000u16..0xC0C0, proptest::collection::vec(0u8..=40, 0..6), 0..20),
            new in proptest::collection::btree_map(0xC000u16..0xC0C0, proptest::collection::vec(0u8..=40, 0..6), 0..20),
        ) {
            let to_table = |m: &BTreeMap<u16, Vec<u8>>| -> BTreeMap<u16, PortSet> {
                m.iter().map(|(&k, v)| (k, v.iter().copied().collect())).collect()
            };
            let guid = Guid(1);
            let mut memo = MftMemo::default();
            memo.assume_cleared(guid);
            let wo = wanted_blocks(&to_table(&old), 40, 256);
            let wn = wanted_blocks(&to_table(&new), 40, 256);
            program(&mut memo, guid, &wo);
            prop_assert!(mft_sets(guid, &wo, &memo).is_empty());
            let plan = mft_sets(guid, &wn, &memo);
            prop_assert!(plan.reads.is_empty());
            let get = |m: &MftMemo, k: MftKey| m.switch(guid).unwrap().holds(k).unwrap();
            for s in &plan.removals {
                let before = get(&memo, s.key);
                let target = wn.blocks.get(&s.key).copied().unwrap_or(ZERO);
                for ((w, b), t) in s.want.port_masks.iter().zip(&before).zip(&target) {
                    prop_assert_eq!(*w, b & t);
                }
                prop_assert_ne!(s.want.port_masks, before);
            }
            answer(&mut memo, &plan.removals);
            for s in &plan.additions {
                let before = get(&memo, s.key);
                for (w, b) in s.want.port_masks.iter().zip(&before) {
                    prop_assert_eq!(w & b, *b, "phase 2 clears nothing");
                }
                prop_assert_eq!(Some(&s.want.port_masks), wn.blocks.get(&s.key));
            }
            answer(&mut memo, &plan.additions);
            prop_assert!(mft_sets(guid, &wn, &memo).is_empty());
            let held: BTreeMap<MftKey, MftMasks> =
                memo.switch(guid).unwrap().held().map(|(k, m)| (k, *m)).collect();
            prop_assert_eq!(held, wn.blocks.clone());
        }
    }
}
