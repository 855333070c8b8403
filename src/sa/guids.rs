//! Alias GUIDs (GUIDInfoRecord Set and Delete, IBA 15.2.5.18): extra port
//! GUIDs the SA hands out in a port's GUIDInfo table, stored here, kept
//! across snapshots while the port is in the fabric. Every change bumps
//! [`AliasGuids::version`]; the runtime then hands [`AliasGuids::table`]
//! to the SM, which writes it into the ports (`crate::program::guids`),
//! and the SA's path index resolves the alias GIDs from then on.
//!
//! Index 0 of block 0 is the port GUID itself and cannot be set or
//! deleted. A GUID already in use (another port's GUID or another alias)
//! is not assigned: its entry reads back 0, as OpenSM answers. Indexes at
//! or past the port's GUIDCap are refused the same way.

use std::collections::{BTreeMap, HashMap};

use crate::mad::guid_info::GUID_BLOCK_ENTRIES;
use crate::mad::GuidInfoBlockRepr;
use crate::types::Guid;

/// What became of one imported alias.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AliasImport {
    Added,
    /// The index holds an alias already; it stays.
    Present,
    /// Index 0, at or past GUIDCap, GUID 0, or a GUID in use.
    Refused,
    /// The port's or the SA's cap is reached.
    OverCap,
}

#[derive(Debug, Default)]
pub(crate) struct AliasGuids {
    /// By port GUID: index in the port's table -> alias.
    by_port: HashMap<Guid, BTreeMap<u16, Guid>>,
    /// Alias -> its port.
    owner: HashMap<Guid, Guid>,
    /// Bumped by every change, so readers (the SM programming the ports,
    /// the path index) know when to look again.
    version: u64,
}

impl AliasGuids {
    pub fn len(&self) -> usize {
        self.owner.len()
    }

    /// Changes so far.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The ports holding aliases.
    pub fn ports(&self) -> impl Iterator<Item = Guid> + '_ {
        self.by_port.keys().copied()
    }

    /// `port`'s aliases by index.
    pub fn of_port(&self, port: Guid) -> impl Iterator<Item = (u16, Guid)> + '_ {
        self.by_port.get(&port).into_iter().flat_map(|m| m.iter().map(|(&i, &g)| (i, g)))
    }

    /// Every alias with its port: (alias, port GUID).
    pub fn iter(&self) -> impl Iterator<Item = (Guid, Guid)> + '_ {
        self.owner.iter().map(|(&a, &p)| (a, p))
    }

    /// The table the SM programs into the ports (`crate::program::guids`).
    pub fn table(&self) -> crate::program::guids::AliasTable {
        self.by_port.iter().flat_map(|(&p, m)| m.iter().map(move |(&i, &g)| (p, i, g))).collect()
    }

    /// Block `block` of `port`'s table: its GUID at index 0, its aliases.
    pub fn block(&self, port: Guid, block: u8) -> GuidInfoBlockRepr {
        let mut b = GuidInfoBlockRepr::default();
        if block == 0 {
            b.guids[0] = port;
        }
        if let Some(aliases) = self.by_port.get(&port) {
            let first = u16::from(block) * GUID_BLOCK_ENTRIES as u16;
            for (&i, &g) in aliases.range(first..first + GUID_BLOCK_ENTRIES as u16) {
                b.guids[usize::from(i - first)] = g;
            }
        }
        b
    }

    /// Assigns the entries of `want` named by `entries` (a bit per index in
    /// the block) to `port`. `cap` is the port's GUIDCap; `in_use` says
    /// whether a GUID is some port's own. Returns how many were refused for
    /// the caps (`per_port`, `total`).
    #[allow(clippy::too_many_arguments)]
    pub fn set(
        &mut self,
        port: Guid,
        block: u8,
        entries: u8,
        want: &GuidInfoBlockRepr,
        cap: u16,
        in_use: impl Fn(Guid) -> bool,
        per_port: usize,
        total: usize,
    ) -> usize {
        let mut refused = 0;
        for slot in 0..GUID_BLOCK_ENTRIES {
            if entries >> slot & 1 == 0 {
                continue;
            }
            let index = u16::from(block) * GUID_BLOCK_ENTRIES as u16 + slot as u16;
            let g = want.guids[slot];
            if index == 0 || index >= cap || g.0 == 0 || in_use(g) {
                continue;
            }
            // Already held, by this port or another: nothing to import.
            if self.owner.contains_key(&g) {
                continue;
            }
            let have = self.by_port.get(&port).map_or(0, |a| a.len());
            let replacing = self.by_port.get(&port).is_some_and(|a| a.contains_key(&index));
            if !replacing && (have >= per_port || self.owner.len() >= total) {
                refused += 1;
                continue;
            }
            let aliases = self.by_port.entry(port).or_default();
            if let Some(old) = aliases.insert(index, g) {
                self.owner.remove(&old);
            }
            self.owner.insert(g, port);
            self.version += 1;
        }
        refused
    }

    /// One alias taken over from the master's (`super::mirror`): `guid`
    /// at `index` of `port`'s table, unless that index holds an alias
    /// already. `cap` is the port's GUIDCap; `in_use` says whether a GUID
    /// is some port's own.
    #[allow(clippy::too_many_arguments)]
    pub fn import(
        &mut self,
        port: Guid,
        index: u16,
        guid: Guid,
        cap: u16,
        in_use: impl Fn(Guid) -> bool,
        per_port: usize,
        total: usize,
    ) -> AliasImport {
        let aliases = self.by_port.get(&port);
        if aliases.is_some_and(|a| a.contains_key(&index)) {
            return AliasImport::Present;
        }
        if index == 0 || index >= cap || guid.0 == 0 || in_use(guid) || self.owner.contains_key(&guid) {
            return AliasImport::Refused;
        }
        if aliases.map_or(0, |a| a.len()) >= per_port || self.owner.len() >= total {
            return AliasImport::OverCap;
        }
        self.by_port.entry(port).or_default().insert(index, guid);
        self.owner.insert(guid, port);
        self.version += 1;
        AliasImport::Added
    }

    /// Removes the aliases at the indexes `entries` names in `block`.
    pub fn delete(&mut self, port: Guid, block: u8, entries: u8) {
        let Some(aliases) = self.by_port.get_mut(&port) else { return };
        for slot in 0..GUID_BLOCK_ENTRIES {
            if entries >> slot & 1 == 1 {
                let index = u16::from(block) * GUID_BLOCK_ENTRIES as u16 + slot as u16;
                if let Some(g) = aliases.remove(&index) {
                    self.owner.remove(&g);
                    self.version += 1;
                }
            }
        }
        if aliases.is_empty() {
            self.by_port.remove(&port);
        }
    }

    /// Drops the aliases of ports that are gone; returns how many.
    pub fn retain_ports(&mut self, alive: impl Fn(Guid) -> bool) -> usize {
        let before = self.owner.len();
        self.by_port.retain(|p, _| alive(*p));
        let by_port = &self.by_port;
        self.owner.retain(|_, p| by_port.contains_key(p));
        let dropped = before - self.owner.len();
        self.version += (dropped > 0) as u64;
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(guids: &[(usize, u64)]) -> GuidInfoBlockRepr {
        let mut b = GuidInfoBlockRepr::default();
        for &(i, g) in guids {
            b.guids[i] = Guid(g);
        }
        b
    }

    #[test]
    fn imports_fill_free_indexes_only() {
        let mut a = AliasGuids::default();
        let port = Guid(0x100);
        let none = |_| false;
        a.set(port, 0, 0b10, &want(&[(1, 0x201)]), 32, none, 10, 100);
        assert_eq!(a.import(port, 1, Guid(0x301), 32, none, 10, 100), AliasImport::Present);
        assert_eq!(a.block(port, 0).guids[1], Guid(0x201), "not overwritten");
        assert_eq!(a.import(port, 9, Guid(0x209), 32, none, 10, 100), AliasImport::Added);
        assert_eq!(a.block(port, 1).guids[1], Guid(0x209));
        assert_eq!(a.import(port, 0, Guid(0x300), 32, none, 10, 100), AliasImport::Refused, "the port GUID's index");
        assert_eq!(a.import(port, 32, Guid(0x300), 32, none, 10, 100), AliasImport::Refused, "past GUIDCap");
        assert_eq!(a.import(Guid(0x101), 1, Guid(0x209), 32, none, 10, 100), AliasImport::Refused, "another's alias");
        assert_eq!(a.import(port, 2, Guid(0x999), 32, |g| g == Guid(0x999), 10, 100), AliasImport::Refused);
        assert_eq!(a.import(port, 2, Guid(0x202), 32, none, 2, 100), AliasImport::OverCap, "per port");
        assert_eq!(a.import(Guid(0x101), 1, Guid(0x202), 32, none, 2, 2), AliasImport::OverCap, "in all");
        assert_eq!(a.import(Guid(0x101), 1, Guid(0x202), 32, none, 2, 3), AliasImport::Added);
        assert_eq!(a.len(), 3);
    }

    #[test]
    fn every_change_bumps_the_version_and_shows_in_the_table() {
        let mut a = AliasGuids::default();
        let (port, none) = (Guid(0x100), |_| false);
        let v0 = a.version();
        a.set(port, 0, 0b110, &want(&[(1, 0x201), (2, 0x202)]), 32, none, 10, 100);
        assert_eq!(a.version(), v0 + 2);
        a.set(port, 0, 0b10, &want(&[(1, 0x201)]), 32, none, 10, 100);
        assert_eq!(a.version(), v0 + 2, "the same again changes nothing");
        let t = a.table();
        assert_eq!(t.aliases(port).collect::<Vec<_>>(), vec![(1, Guid(0x201)), (2, Guid(0x202))]);
        assert_eq!(t.block(port, 0, 32), a.block(port, 0), "the SM writes what the SA answers");
        let mut pairs: Vec<_> = a.iter().collect();
        pairs.sort();
        assert_eq!(pairs, vec![(Guid(0x201), port), (Guid(0x202), port)]);
        assert_eq!(a.of_port(port).count(), 2);
        a.delete(port, 0, 0b100);
        assert_eq!(a.version(), v0 + 3);
        a.delete(port, 0, 0b100);
        assert_eq!(a.version(), v0 + 3, "nothing left to delete");
        assert_eq!(a.import(port, 5, Guid(0x205), 32, none, 10, 100), AliasImport::Added);
        assert_eq!(a.version(), v0 + 4);
        assert_eq!(a.retain_ports(|_| true), 0);
        assert_eq!(a.version(), v0 + 4);
        assert_eq!(a.retain_ports(|_| false), 2);
        assert_eq!(a.version(), v0 + 5);
        assert!(a.table().is_empty());
    }

    #[test]
    fn set_read_delete_and_refusals() {
        let mut a = AliasGuids::default();
        let port = Guid(0x100);
        let none = |_| false;
        // Index 0 is the port GUID; index 1 and 2 become aliases.
        a.set(port, 0, 0b111, &want(&[(0, 5), (1, 0x201), (2, 0x202)]), 32, none, 10, 100);
        let b = a.block(port, 0);
        assert_eq!((b.guids[0], b.guids[1], b.guids[2]), (port, Guid(0x201), Guid(0x202)));
        // A GUID in use elsewhere, or past GUIDCap, is not assigned.
        a.set(Guid(0x300), 0, 0b10, &want(&[(1, 0x201)]), 32, none, 10, 100);
        assert_eq!(a.block(Guid(0x300), 0).guids[1], Guid(0));
        a.set(port, 4, 0b1, &want(&[(0, 0x240)]), 32, none, 10, 100);
        assert_eq!(a.block(port, 4).guids[0], Guid(0), "index 32 is past GUIDCap 32");
        a.set(port, 0, 0b1000, &want(&[(3, 0x999)]), 32, |g| g == Guid(0x999), 10, 100);
        assert_eq!(a.block(port, 0).guids[3], Guid(0), "some port's own GUID");
        // Caps.
        assert_eq!(a.set(port, 0, 0b1111_0000, &want(&[(4, 1), (5, 2), (6, 3), (7, 4)]), 32, none, 4, 100), 2);
        assert_eq!(a.len(), 4);
        a.delete(port, 0, 0b10);
        assert_eq!(a.block(port, 0).guids[1], Guid(0));
        assert!(!a.owner.contains_key(&Guid(0x201)));
        assert_eq!(a.retain_ports(|_| false), 3);
        assert_eq!(a.len(), 0);
    }
}
