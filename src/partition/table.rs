//! One port's P_Key table, planned: which index each wanted P_Key goes to
//! and which 32-entry blocks change (IBA 10.9.2; the table's layout is
//! IBA 14.2.5.7, P_KeyTable). Pure: the held table comes in, the new table
//! goes out; [`crate::program`] reads and writes the blocks.
//!
//! # Rules, in the order they claim entries
//! 1. `index0`: the pinned partition's key goes to index 0 (OpenSM's
//!    `indx0`; full member when the port holds both). Whatever was there
//!    moves by the rules below. The trade-off: a QP bound to index 0 with
//!    another key loses it, but every consumer that uses index 0 by default
//!    (IPoIB's parent interface, MADs sent on QP1 with index 0) gets the
//!    partition the operator asked for.
//! 2. A wanted key already held stays at its index, the lowest one if the
//!    port holds it twice (OpenSM's `keep_pkey_indexes`): QPs bound to an
//!    index keep working across sweeps and reconfigurations.
//! 3. A wanted key whose partition the port holds with the other membership
//!    (full <-> limited) takes that entry, so the index stays and only bit
//!    15 changes.
//! 4. Other wanted keys, in declaration order, fill the empty entries
//!    (0, or 0x8000: no partition) lowest index first, then the entries
//!    holding keys no longer wanted, lowest first. Empty entries go first
//!    so a key just removed is not reused at once by another partition.
//! 5. Every other entry is cleared (0): a port holds its partitions' keys
//!    and nothing else.
//!
//! # Table size
//! The planned table always covers the port's whole capacity rounded up
//! to whole blocks ([`table_len`]): entries at or past `cap` are 0. Being
//! the same length as the table read from the port, a key removed from
//! any block is cleared there, and [`changed_blocks`] compares like with
//! like.
//!
//! # Too many keys
//! When the port is a member of more keys than it holds, the first `cap`
//! keys are planned (the `index0` key first, then declaration order) and
//! [`TableError::TooMany`] carries that plan: the caller decides whether to
//! program it, and reports the port.

use std::collections::{HashMap, HashSet};

use crate::mad::pkey_table::PKEY_BLOCK_ENTRIES;

use super::{PortPartitions, PARTITION_MASK};

/// One port's new P_Key table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePlan {
    /// Every entry, [`table_len`]`(cap)` of them; 0 is an empty entry.
    pub table: Vec<u16>,
}

impl TablePlan {
    /// Blocks in the table.
    pub fn blocks(&self) -> usize {
        self.table.len() / PKEY_BLOCK_ENTRIES
    }

    /// The 32 entries of `block` (all 0 past the table).
    pub fn block(&self, block: u16) -> [u16; PKEY_BLOCK_ENTRIES] {
        block_of(&self.table, block)
    }

    /// The valid keys the table holds, by index.
    pub fn keys(&self) -> impl Iterator<Item = u16> + '_ {
        self.table.iter().copied().filter(|&k| is_key(k))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// More keys wanted than the port holds; `plan` holds the first `cap`.
    #[error("{wanted} P_Keys wanted but the table holds {cap}: the first {cap} planned")]
    TooMany { wanted: usize, cap: usize, plan: TablePlan },
}

/// Entries in a planned table for a port of `cap` entries: `cap` rounded up
/// to whole 32-entry blocks.
pub fn table_len(cap: usize) -> usize {
    cap.div_ceil(PKEY_BLOCK_ENTRIES) * PKEY_BLOCK_ENTRIES
}

/// The new table for a port holding `held` (its whole table, every block
/// read; missing entries count as empty) with room for `cap` entries, that
/// should hold `wanted`'s keys. See the module docs for the rules.
/// O(cap + keys).
pub fn plan_table(held: &[u16], wanted: &PortPartitions, cap: usize) -> Result<TablePlan, TableError> {
    plan_keys(held, &wanted.pkeys(), wanted.index0, cap)
}

/// [`plan_table`] for a list of P_Key values (bit 15 = full member) in
/// declaration order: a switch port enforcing partitions gets the keys of
/// the end port it faces. Invalid keys (no partition bits) and repeats are
/// ignored.
pub fn plan_keys(held: &[u16], keys: &[u16], index0: Option<u16>, cap: usize) -> Result<TablePlan, TableError> {
    let mut seen = HashSet::new();
    let mut wanted: Vec<u16> = keys.iter().copied().filter(|&k| is_key(k) && seen.insert(k)).collect();
    // The pinned partition's first key (full before limited, as
    // `Membership::keys` lists them) leads, so truncation keeps it.
    let pin = index0.and_then(|p| wanted.iter().position(|&k| k & PARTITION_MASK == p & PARTITION_MASK));
    if let Some(at) = pin {
        let k = wanted.remove(at);
        wanted.insert(0, k);
    }
    let asked = wanted.len();
    wanted.truncate(cap);

    let len = table_len(cap);
    let held_at = |i: usize| if i < cap { held.get(i).copied().unwrap_or(0) } else { 0 };
    let mut table = vec![0u16; len];
    let mut claimed = vec![false; cap];
    let mut placed: HashSet<u16> = HashSet::with_capacity(wanted.len());
    fn put(table: &mut [u16], claimed: &mut [bool], i: usize, k: u16) {
        table[i] = k;
        claimed[i] = true;
    }

    // 1. The pinned key at index 0.
    if pin.is_some() && cap > 0 {
        put(&mut table, &mut claimed, 0, wanted[0]);
        placed.insert(wanted[0]);
    }
    // 2. Wanted keys held: where they are (lowest index of repeats).
    let wanted_set: HashSet<u16> = wanted.iter().copied().collect();
    for i in 0..cap {
        let k = held_at(i);
        if !claimed[i] && wanted_set.contains(&k) && placed.insert(k) {
            put(&mut table, &mut claimed, i, k);
        }
    }
    // 3. The same partition held with the other membership: same index.
    let mut by_partition: HashMap<u16, Vec<usize>> = HashMap::new();
    for i in (0..cap).rev() {
        let k = held_at(i);
        if is_key(k) && !claimed[i] {
            // Reversed, so `pop` gives the lowest index first.
            by_partition.entry(k & PARTITION_MASK).or_default().push(i);
        }
    }
    for &k in &wanted {
        if placed.contains(&k) {
            continue;
        }
        let slots = by_partition.get_mut(&(k & PARTITION_MASK));
        if let Some(i) = slots.and_then(|s| std::iter::from_fn(|| s.pop()).find(|&i| !claimed[i])) {
            put(&mut table, &mut claimed, i, k);
            placed.insert(k);
        }
    }
    // 4. The rest: empty entries first, then those of keys not wanted.
    let empty = (0..cap).filter(|&i| !is_key(held_at(i)));
    let stale = (0..cap).filter(|&i| is_key(held_at(i)));
    let mut free = empty.chain(stale).filter(|&i| !claimed[i]).collect::<Vec<_>>().into_iter();
    for &k in &wanted {
        if placed.contains(&k) {
            continue;
        }
        // `wanted.len() <= cap` and every placed key claimed one entry, so
        // there is always a free one.
        if let Some(i) = free.next() {
            put(&mut table, &mut claimed, i, k);
            placed.insert(k);
        }
    }
    // 5. Unclaimed entries stay 0.
    let plan = TablePlan { table };
    if asked > cap {
        return Err(TableError::TooMany { wanted: asked, cap, plan });
    }
    Ok(plan)
}

/// The numbers of the 32-entry blocks in which `old` and `new` differ
/// (entries past the end of either count as 0), in order: the blocks to
/// send.
pub fn changed_blocks(old: &[u16], new: &[u16]) -> Vec<u16> {
    let blocks = old.len().max(new.len()).div_ceil(PKEY_BLOCK_ENTRIES);
    (0..blocks).map(|b| b as u16).filter(|&b| block_of(old, b) != block_of(new, b)).collect()
}

/// Entries `block * 32 ..` of `table`, 0 past its end.
pub fn block_of(table: &[u16], block: u16) -> [u16; PKEY_BLOCK_ENTRIES] {
    let mut out = [0u16; PKEY_BLOCK_ENTRIES];
    let first = usize::from(block) * PKEY_BLOCK_ENTRIES;
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = table.get(first + i).copied().unwrap_or(0);
    }
    out
}

/// A P_Key that names a partition (0x0000 and 0x8000 are empty entries,
/// IBA 10.9.1).
fn is_key(k: u16) -> bool {
    k & PARTITION_MASK != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::{Membership, DEFAULT_PARTITION};
    use proptest::prelude::*;

    fn port(members: &[(u16, Membership)], index0: Option<u16>) -> PortPartitions {
        PortPartitions { members: members.to_vec(), index0 }
    }

    /// A `cap`-entry table holding `keys` at the given indexes.
    fn table(cap: usize, keys: &[(usize, u16)]) -> Vec<u16> {
        let mut t = vec![0; table_len(cap)];
        for &(i, k) in keys {
            t[i] = k;
        }
        t
    }

    fn plan(held: &[u16], wanted: &PortPartitions, cap: usize) -> Vec<u16> {
        plan_table(held, wanted, cap).expect("fits").table
    }

    use Membership::{Both, Full, Limited};

    #[test]
    fn held_keys_keep_their_indexes() {
        let held = table(64, &[(3, 0x8010), (5, 0xffff), (40, 0x0020)]);
        let wanted = port(&[(DEFAULT_PARTITION, Full), (0x10, Full), (0x20, Limited)], None);
        assert_eq!(plan(&held, &wanted, 64), held);
        assert_eq!(changed_blocks(&held, &held), Vec::<u16>::new());
    }

    #[test]
    fn a_membership_change_keeps_the_index() {
        let held = table(32, &[(0, 0xffff), (4, 0x0010), (7, 0x8020)]);
        let wanted = port(&[(DEFAULT_PARTITION, Full), (0x10, Full), (0x20, Limited)], None);
        assert_eq!(plan(&held, &wanted, 32), table(32, &[(0, 0xffff), (4, 0x8010), (7, 0x0020)]));
    }

    #[test]
    fn both_keeps_the_held_key_and_adds_the_other() {
        let held = table(32, &[(0, 0xffff), (4, 0x0010)]);
        let wanted = port(&[(DEFAULT_PARTITION, Full), (0x10, Both)], None);
        assert_eq!(plan(&held, &wanted, 32), table(32, &[(0, 0xffff), (1, 0x8010), (4, 0x0010)]));
        // Held twice, both wanted: both stay.
        let held = table(32, &[(2, 0x8010), (9, 0x0010)]);
        assert_eq!(plan(&held, &port(&[(0x10, Both)], None), 32), held);
        // Both held, one wanted: the other is cleared.
        assert_eq!(plan(&held, &port(&[(0x10, Limited)], None), 32), table(32, &[(9, 0x0010)]));
    }

    #[test]
    fn new_keys_fill_empty_entries_then_stale_ones() {
        let held = table(32, &[(0, 0xffff), (1, 0x8020), (3, 0x8021)]);
        let wanted = port(&[(DEFAULT_PARTITION, Full), (0x30, Full), (0x31, Full), (0x32, Full)], None);
        // Empty entries first (2, 4, 5); the stale ones (1, 3) are cleared.
        assert_eq!(plan(&held, &wanted, 32), table(32, &[(0, 0xffff), (2, 0x8030), (4, 0x8031), (5, 0x8032)]));
        // A full table: only stale entries are left, lowest first.
        let held = table(4, &[(0, 0xffff), (1, 0x8020), (2, 0x8021), (3, 0x8022)]);
        let wanted = port(&[(DEFAULT_PARTITION, Full), (0x30, Full), (0x31, Full)], None);
        let got = plan(&held, &wanted, 4);
        assert_eq!(got, table(4, &[(0, 0xffff), (1, 0x8030), (2, 0x8031)]));
        assert_eq!(got.len(), 32, "a whole block, entries past the cap 0");
    }

    #[test]
    fn unwanted_keys_and_repeats_are_cleared() {
        let held = table(64, &[(0, 0xffff), (1, 0x8005), (2, 0xffff), (33, 0x0006), (34, 0x8000)]);
        let wanted = port(&[(DEFAULT_PARTITION, Full)], None);
        let got = plan(&held, &wanted, 64);
        assert_eq!(got, table(64, &[(0, 0xffff)]));
        assert_eq!(changed_blocks(&held, &got), vec![0, 1]);
        // Nothing wanted: an empty table.
        assert_eq!(plan(&held, &PortPartitions::default(), 64), vec![0; 64]);
    }

    #[test]
    fn index0_pins_its_partition_and_moves_what_was_there() {
        let held = table(32, &[(0, 0x8010), (1, 0xffff), (2, 0x8011)]);
        let wanted = port(&[(0x10, Full), (0x11, Full), (DEFAULT_PARTITION, Full)], Some(DEFAULT_PARTITION));
        // 0xffff to 0; 0x8010 to the first empty entry (3), not the one
        // 0xffff left (1), which is cleared; 0x8011 stays.
        assert_eq!(plan(&held, &wanted, 32), table(32, &[(0, 0xffff), (2, 0x8011), (3, 0x8010)]));
        // Already there: nothing moves.
        let held = table(32, &[(0, 0xffff), (1, 0x8010)]);
        assert_eq!(plan(&held, &wanted, 32), table(32, &[(0, 0xffff), (1, 0x8010), (2, 0x8011)]));
        // Both memberships: the full key is pinned.
        let wanted = port(&[(0x10, Full), (0x20, Both)], Some(0x20));
        assert_eq!(plan(&[], &wanted, 32), table(32, &[(0, 0x8020), (1, 0x8010), (2, 0x0020)]));
        // A partition the port is not in pins nothing.
        let wanted = port(&[(0x10, Full)], Some(0x20));
        assert_eq!(plan(&table(32, &[(5, 0x8010)]), &wanted, 32), table(32, &[(5, 0x8010)]));
    }

    #[test]
    fn too_many_keys_plan_the_first_cap() {
        let held = table(2, &[(0, 0x8003)]);
        let wanted = port(&[(1, Full), (2, Full), (3, Full)], None);
        match plan_table(&held, &wanted, 2) {
            Err(TableError::TooMany { wanted: 3, cap: 2, plan }) => {
                // 0x8003 is third: dropped. 0x8001 takes the empty entry,
                // 0x8002 the one 0x8003 leaves.
                assert_eq!(plan.table, table(2, &[(0, 0x8002), (1, 0x8001)]));
            }
            other => panic!("{other:?}"),
        }
        // The pinned key survives truncation even when declared last.
        let wanted = port(&[(1, Full), (2, Full), (3, Full)], Some(3));
        let Err(TableError::TooMany { plan, .. }) = plan_table(&[], &wanted, 2) else { panic!() };
        assert_eq!(plan.table, table(2, &[(0, 0x8003), (1, 0x8001)]));
        // No room at all.
        let Err(TableError::TooMany { wanted: 1, cap: 0, plan }) = plan_table(&[], &port(&[(1, Full)], None), 0) else {
            panic!()
        };
        assert!(plan.table.is_empty());
        assert_eq!(plan_table(&[], &PortPartitions::default(), 0), Ok(TablePlan { table: vec![] }));
    }

    #[test]
    fn keys_are_deduplicated_and_invalid_ones_dropped() {
        let got = plan_keys(&[], &[0x8000, 0xffff, 0x0000, 0xffff, 0x0010], None, 32).unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), vec![0xffff, 0x0010]);
        assert_eq!(got.blocks(), 1);
    }

    #[test]
    fn held_shorter_or_longer_than_the_cap() {
        let wanted = port(&[(DEFAULT_PARTITION, Full), (0x10, Full)], None);
        // Short: the rest counts as empty.
        assert_eq!(plan(&[0x8010], &wanted, 40), table(40, &[(0, 0x8010), (1, 0xffff)]));
        // Entries past the cap are never used, even if the port shows some.
        let mut held = table(40, &[(0, 0xffff)]);
        held[45] = 0x8010;
        let got = plan(&held, &wanted, 40);
        assert_eq!(got, table(40, &[(0, 0xffff), (1, 0x8010)]));
        assert_eq!(got.len(), 64);
        assert_eq!(changed_blocks(&held, &got), vec![0, 1]);
    }

    #[test]
    fn changed_blocks_compare_every_block() {
        let a = table(96, &[(0, 0xffff), (40, 0x8001), (70, 0x8002)]);
        let mut b = a.clone();
        assert!(changed_blocks(&a, &b).is_empty());
        b[41] = 0x8003;
        assert_eq!(changed_blocks(&a, &b), vec![1]);
        b[95] = 0x8004;
        b[0] = 0x7fff;
        assert_eq!(changed_blocks(&a, &b), vec![0, 1, 2]);
        // Lengths differ: missing entries are 0.
        assert_eq!(changed_blocks(&a[..64], &a), vec![2]);
        assert_eq!(
            changed_blocks(&a[..32], &a[..32].iter().copied().chain([0; 32]).collect::<Vec<_>>()),
            Vec::<u16>::new()
        );
        assert_eq!(block_of(&a, 2)[6], 0x8002);
        assert_eq!(block_of(&a, 9), [0; 32]);
    }

    /// Up to 12 partitions (1..=12) with any membership, and a held table
    /// of those partitions' keys, empty entries, and 0x8000.
    fn scenario(
        caps: std::ops::RangeInclusive<usize>,
    ) -> impl Strategy<Value = (usize, Vec<u16>, Vec<(u16, Membership)>)> {
        let membership = prop_oneof![Just(Full), Just(Limited), Just(Both)];
        caps.prop_flat_map(move |cap| {
            let entry = prop_oneof![
                3 => Just(0u16),
                1 => Just(0x8000u16),
                6 => (1u16..=14, any::<bool>()).prop_map(|(p, full)| if full { p | 0x8000 } else { p }),
            ];
            let held = proptest::collection::vec(entry, table_len(cap));
            let members = proptest::collection::btree_map(1u16..=12, membership.clone(), 0..=12)
                .prop_map(|m| m.into_iter().collect::<Vec<_>>());
            (Just(cap), held, members)
        })
    }

    fn key_count(members: &[(u16, Membership)]) -> usize {
        members.iter().map(|&(p, m)| m.keys(p).count()).sum()
    }

    proptest! {
        #[test]
        fn plans_within_the_cap((cap, held, members) in scenario(1..=80), pin in proptest::option::of(1u16..=12)) {
            prop_assume!(key_count(&members) <= cap);
            let wanted = PortPartitions { members, index0: pin };
            let plan = plan_table(&held, &wanted, cap).expect("fits");
            let t = &plan.table;
            prop_assert_eq!(t.len(), table_len(cap));
            prop_assert!(t[cap..].iter().all(|&k| k == 0), "nothing past the cap");
            let keys = wanted.pkeys();
            // Every wanted key exactly once, nothing else valid.
            for &k in &keys {
                prop_assert_eq!(t.iter().filter(|&&x| x == k).count(), 1, "{:#x}", k);
            }
            prop_assert!(t.iter().all(|&x| x == 0 || keys.contains(&x)), "an unwanted key remains: {:x?}", t);
            // The pinned partition at index 0.
            let pinned = pin.and_then(|p| keys.iter().copied().find(|&k| k & PARTITION_MASK == p));
            if let Some(k) = pinned {
                prop_assert_eq!(t[0], k);
            }
            // Held wanted keys keep their (lowest) index, unless index 0
            // went to the pinned key.
            for &k in &keys {
                if let Some(i) = held.iter().take(cap).position(|&x| x == k) {
                    if !pinned.is_some_and(|p| p == k || i == 0) {
                        prop_assert_eq!(t[i], k, "held {:#x} at {} moved", k, i);
                    }
                }
            }
            // Exactly the blocks that differ are reported.
            let changed = changed_blocks(&held, t);
            for b in 0..plan.blocks() as u16 {
                prop_assert_eq!(changed.contains(&b), block_of(&held, b) != block_of(t, b), "block {}", b);
            }
            // Planning again from the result changes nothing.
            prop_assert_eq!(&plan_table(t, &wanted, cap).unwrap().table, t);
        }

        #[test]
        fn too_many_keys_keep_the_first_cap((cap, held, members) in scenario(0..=6)) {
            let wanted = PortPartitions { members, index0: None };
            let keys = wanted.pkeys();
            prop_assume!(keys.len() > cap);
            let Err(TableError::TooMany { wanted: n, cap: c, plan }) = plan_table(&held, &wanted, cap) else {
                return Err(TestCaseError::fail("fits?"));
            };
            prop_assert_eq!((n, c), (keys.len(), cap));
            let mut got: Vec<u16> = plan.keys().collect();
            let mut first: Vec<u16> = keys[..cap].to_vec();
            got.sort_unstable();
            first.sort_unstable();
            prop_assert_eq!(got, first);
        }

        /// Any input, however odd, plans without panicking.
        #[test]
        fn never_panics(held in proptest::collection::vec(any::<u16>(), 0..200),
                        keys in proptest::collection::vec(any::<u16>(), 0..100),
                        index0 in proptest::option::of(any::<u16>()),
                        cap in 0usize..150) {
            let plan = match plan_keys(&held, &keys, index0, cap) {
                Ok(p) => p,
                Err(TableError::TooMany { plan, .. }) => plan,
            };
            prop_assert_eq!(plan.table.len(), table_len(cap));
            let _ = changed_blocks(&held, &plan.table);
        }
    }
}
