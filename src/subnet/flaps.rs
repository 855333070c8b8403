//! Flap damping: a cable that keeps going down and coming back is held
//! down for a while instead of being routed around and back again on every
//! bounce. Each bounce costs the fabric a reaction and two rounds of LFT
//! updates, and traffic that happens to cross it in between is lost.
//!
//! I/O-free and driven by `now`: the owner feeds it every reaction's change
//! set ([`FlapDamper::observe`]), asks which ports are held before each
//! sweep or reaction ([`FlapDamper::held_ports`]; the programmer leaves a
//! held cable out of the routes and does not bring its ports up), and
//! releases holds when they run out ([`FlapDamper::release`]).
//!
//! A cable is keyed by its lower (GUID, port) end, so the traps of both
//! ends count one bounce once. Only downs are counted: while a cable is
//! held the SM knows it as down, so its bounces add nothing.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use super::changes::{ChangeKind, ChangeSet};
use crate::mad::DrPath;
use crate::types::Guid;

/// When a cable counts as flapping, and for how long it is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlapPolicy {
    /// Downs within `window` that hold the cable; 0 turns damping off.
    pub downs: u32,
    pub window: Duration,
    pub hold: Duration,
}

/// One end of a cable: node GUID and port.
pub type CableEnd = (Guid, u8);

/// A cable being held down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCable {
    /// Its two ends, the lower first (the far end when the SM knew it).
    pub ends: (CableEnd, Option<CableEnd>),
    /// The node the change named, and the path to it, for the log line.
    pub name: String,
    pub path: DrPath,
    /// Downs counted in the window that started the hold.
    pub downs: u32,
    pub since: Duration,
    pub until: Duration,
}

impl fmt::Display for HeldCable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ((guid, port), far) = self.ends;
        write!(f, "{guid} port {port}")?;
        if let Some((g, p)) = far {
            write!(f, " <-> {g} port {p}")?;
        }
        write!(f, " ('{}' at path {}): {} downs", self.name, self.path, self.downs)
    }
}

/// The downs of every cable seen recently, and the cables held.
#[derive(Debug, Clone)]
pub struct FlapDamper {
    policy: FlapPolicy,
    downs: HashMap<CableEnd, VecDeque<Duration>>,
    held: BTreeMap<CableEnd, HeldCable>,
    /// Holds ever started, for the metrics.
    pub holds_total: u64,
}

impl FlapDamper {
    pub fn new(policy: FlapPolicy) -> Self {
        FlapDamper { policy, downs: HashMap::new(), held: BTreeMap::new(), holds_total: 0 }
    }

    /// A reloaded policy; cables held stay held until their time is up.
    pub fn set_policy(&mut self, policy: FlapPolicy) {
        self.policy = policy;
    }

    /// Counts the links `changes` found down (a link that went down and
    /// came back between two looks, `LinkRetrained`, is a bounce too) and
    /// returns the cables this puts on hold.
    pub fn observe(&mut self, now: Duration, changes: &ChangeSet) -> Vec<HeldCable> {
        if self.policy.downs == 0 {
            return Vec::new();
        }
        let mut newly = Vec::new();
        for c in &changes.changes {
            if !matches!(c.kind, ChangeKind::LinkDown | ChangeKind::LinkRetrained) {
                continue;
            }
            let here = (c.guid, c.port);
            let (key, far) = match c.peer {
                Some(peer) if peer < here => (peer, Some(here)),
                peer => (here, peer),
            };
            if self.held.contains_key(&key) {
                continue;
            }
            let seen = self.downs.entry(key).or_default();
            // Both ends' traps in one change set are one down.
            if seen.back() == Some(&now) {
                continue;
            }
            seen.push_back(now);
            while seen.front().is_some_and(|&t| now.saturating_sub(t) > self.policy.window) {
                seen.pop_front();
            }
            if seen.len() as u32 >= self.policy.downs {
                let held = HeldCable {
                    ends: (key, far),
                    name: c.name.clone(),
                    path: c.path,
                    downs: seen.len() as u32,
                    since: now,
                    until: now + self.policy.hold,
                };
                self.downs.remove(&key);
                self.held.insert(key, held.clone());
                self.holds_total += 1;
                newly.push(held);
            }
        }
        // Memory stays bounded by the cables that bounced in the window.
        self.downs.retain(|_, seen| seen.back().is_some_and(|&t| now.saturating_sub(t) <= self.policy.window));
        newly
    }

    /// Both ends of every held cable (an end whose far side was unknown
    /// alone).
    pub fn held_ports(&self) -> Vec<CableEnd> {
        self.held.values().flat_map(|h| std::iter::once(h.ends.0).chain(h.ends.1)).collect()
    }

    pub fn held(&self) -> impl Iterator<Item = &HeldCable> {
        self.held.values()
    }

    /// When the next hold runs out.
    pub fn next_release(&self) -> Option<Duration> {
        self.held.values().map(|h| h.until).min()
    }

    /// Ends the holds whose time is up and returns them: the SM looks at
    /// their ends again, and a cable that is up is routed over.
    pub fn release(&mut self, now: Duration) -> Vec<HeldCable> {
        let done: Vec<CableEnd> = self.held.iter().filter(|(_, h)| h.until <= now).map(|(&k, _)| k).collect();
        done.into_iter().filter_map(|k| self.held.remove(&k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subnet::changes::Change;

    fn policy() -> FlapPolicy {
        FlapPolicy { downs: 5, window: Duration::from_secs(10), hold: Duration::from_secs(60) }
    }

    fn down(guid: u64, port: u8, peer: Option<(u64, u8)>) -> ChangeSet {
        ChangeSet {
            changes: vec![Change {
                kind: ChangeKind::LinkDown,
                guid: Guid(guid),
                name: "leaf".into(),
                port,
                path: DrPath::local(),
                peer: peer.map(|(g, p)| (Guid(g), p)),
                was: None,
            }],
            ..ChangeSet::default()
        }
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn five_downs_in_ten_seconds_hold_the_cable_from_either_end() {
        let mut d = FlapDamper::new(policy());
        // The downs alternate between the two ends' traps: one cable.
        for i in 0..4 {
            let cs = if i % 2 == 0 { down(2, 3, Some((1, 7))) } else { down(1, 7, Some((2, 3))) };
            assert!(d.observe(secs(i as f64 * 2.0), &cs).is_empty(), "down {i} holds nothing yet");
        }
        let held = d.observe(secs(8.5), &down(2, 3, Some((1, 7))));
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].ends, ((Guid(1), 7), Some((Guid(2), 3))));
        assert_eq!(held[0].until, secs(68.5));
        assert_eq!(d.held_ports(), vec![(Guid(1), 7), (Guid(2), 3)]);
        assert_eq!(d.next_release(), Some(secs(68.5)));
        // Held: further downs do not start another hold.
        assert!(d.observe(secs(9.0), &down(1, 7, Some((2, 3)))).is_empty());
        assert!(d.release(secs(68.0)).is_empty());
        assert_eq!(d.release(secs(68.5)).len(), 1);
        assert!(d.held_ports().is_empty());
        assert_eq!(d.holds_total, 1);
    }

    #[test]
    fn downs_spread_wider_than_the_window_hold_nothing() {
        let mut d = FlapDamper::new(policy());
        for i in 0..20 {
            assert!(d.observe(secs(i as f64 * 3.0), &down(2, 3, Some((1, 7)))).is_empty());
        }
        assert!(d.held_ports().is_empty());
    }

    #[test]
    fn both_ends_in_one_change_set_count_once() {
        let mut d = FlapDamper::new(policy());
        for i in 0..4 {
            let mut cs = down(2, 3, Some((1, 7)));
            cs.changes.extend(down(1, 7, Some((2, 3))).changes);
            assert!(d.observe(secs(i as f64), &cs).is_empty(), "down {i}");
        }
        assert_eq!(d.observe(secs(4.0), &down(1, 7, Some((2, 3)))).len(), 1);
    }

    #[test]
    fn off_when_downs_is_zero() {
        let mut d = FlapDamper::new(FlapPolicy { downs: 0, ..policy() });
        for i in 0..50 {
            assert!(d.observe(secs(i as f64 * 0.1), &down(2, 3, None)).is_empty());
        }
    }

    #[test]
    fn other_kinds_of_change_are_not_bounces() {
        let mut d = FlapDamper::new(policy());
        for i in 0..10 {
            let mut cs = down(2, 3, Some((1, 7)));
            cs.changes[0].kind = if i % 2 == 0 { ChangeKind::LinkUp } else { ChangeKind::PortChanged };
            assert!(d.observe(secs(i as f64 * 0.1), &cs).is_empty());
        }
    }
}
