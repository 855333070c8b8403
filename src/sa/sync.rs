//! The master's SA state, pushed to every standby as it changes.
//!
//! # Why a vendor MAD class over the fabric
//! The SMs already reach each other over the fabric: a standby polls the
//! master's SMInfo, and the master's sweeps find every port that claims
//! IsSM. A class of our own (`crate::mad::sm_sync`) on QP1 needs no
//! address, port or firewall rule beyond the fabric, follows the master
//! wherever the election puts it, and is dropped by every SM that does not
//! know it (OpenSM does not register the class). TCP would need every SM
//! to be told every other's address, and a second network that can fail
//! apart from the fabric the SMs manage.
//!
//! # The protocol
//! ```text
//!  standby ── Hello{epoch, next} every HELLO, and ACK_DELAY after changes ─► master
//!  master  ── Reset{seq}, then Change{seq, table, add|remove, record}... ──► standby
//!  master  ── Beat{next} every BEAT ──────────────────────────────────────► standby
//! ```
//! - The master sees its registrations as four sets of records, each the
//!   bytes its SA emits (ServiceRecords, InformInfoRecords, GUIDInfoRecord
//!   blocks, MCMemberRecords: one per member, one per group without
//!   members), and three its SM keeps: its LID assignments, a digest of
//!   what each switch's MulticastForwardingTable holds, and each multicast
//!   group's tree (a new master builds its trees along the old ones, and
//!   writes a switch whose digest they match unread; these two only to a
//!   standby whose Hello says it takes them). A change is a record added or removed ([`Source::observe`]
//!   compares the sets), so applying one twice does nothing new.
//! - Each standby gets its own numbered stream, within the master's epoch
//!   (a new one each time an SM becomes master). A Hello carries the
//!   standby's epoch and the next number it lacks, and so acknowledges
//!   all below; a standby sends one [`ACK_DELAY`] after a burst begins. The master resends what is unacknowledged after
//!   [`RESEND_AFTER`], at most [`WINDOW`] in flight.
//! - A standby holding another epoch (new, or the master restarted), one
//!   whose queue outgrew [`QUEUE_CAP`], or one acknowledging a number never
//!   sent gets a Reset followed by every record as an add: a full resync.
//! - A standby's copy is current while it holds every number below the
//!   last Beat's (`synced_at`); [`Copy::lag`] is how long ago that was. At
//!   a takeover the runtime asks ([`Copy::current_as_of`]) and sets
//!   ClientReregister on every port when the copy is stale or missing.
//!
//! # Who may speak
//! Every message carries the SM_Key (`[sm] sm_key`); another key is
//! dropped. The master takes Hellos only from ports its last sweep found
//! claiming IsSM; a standby takes the stream only from the LID its
//! election names master. Each refusal is counted and logged (rate
//! limited), naming the sender's LID.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::mad::sm_sync::{
    PackedChange, SyncBody, SyncMadRepr, SyncOp, SyncPart, SyncTable, Takes, MAX_RECORD_LEN, SYNC_TABLES,
};
use crate::types::Lid;

/// A standby's Hello (and acknowledgement when idle) period.
pub const HELLO: Duration = Duration::from_millis(200);
/// The Hello period while the master sends nothing (it may not speak
/// the stream: OpenSM answers each Hello with an error).
pub const HELLO_IDLE: Duration = Duration::from_secs(2);
/// The master's Beat period to each standby.
pub const BEAT: Duration = Duration::from_millis(200);
/// An unacknowledged message goes again after this: a change must reach
/// the standby within a few of these, lost MADs included, since the
/// master may die any moment after it answered the client.
pub const RESEND_AFTER: Duration = Duration::from_millis(20);
/// Messages in flight to one standby.
pub const WINDOW: usize = 128;
/// Messages waiting for one standby; more and it is resynced instead.
pub const QUEUE_CAP: usize = 1 << 17;
/// A standby not heard from for this long is dropped by the master.
pub const PEER_SILENT: Duration = Duration::from_secs(3);
/// SMs a master knows of from their polls, at most.
pub const MAX_PEERS: usize = 64;
/// A standby acknowledges what came in this long after the first of it:
/// one Hello for a burst of changes, well within [`RESEND_AFTER`].
pub const ACK_DELAY: Duration = Duration::from_millis(2);
/// Changes arriving ahead of a missing one that a standby keeps.
pub const EARLY_CAP: usize = 4096;

/// A table's records, each as the SA emits it.
pub type RecordSet = HashSet<Arc<[u8]>>;

/// What every sync counter counts (`SaStats::sync`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Changes first sent, and sent again for want of an acknowledgement.
    pub changes_sent: u64,
    pub changes_resent: u64,
    /// Full resyncs started (a new standby, another epoch, an overflow).
    pub resyncs: u64,
    /// Standbys being fed now (a gauge).
    pub peers: u64,
    /// Standby: changes applied, and duplicates ignored.
    pub changes_applied: u64,
    pub duplicates: u64,
    /// Standby: changes that arrived ahead of a missing one.
    pub out_of_order: u64,
    /// Refused: wrong SM_Key, not a known SM, not our master, malformed.
    pub rejected_key: u64,
    pub rejected_peer: u64,
    pub rejected_malformed: u64,
    /// Standby: a change whose record did not parse at takeover.
    pub unreadable_records: u64,
    /// Standby: Hellos an SM answered with an error (it is not ibsm).
    pub answered_by_other_sm: u64,
}

#[derive(Debug, Clone)]
enum Item {
    Reset,
    /// A record, or a part of one (see `crate::mad::sm_sync`).
    Change {
        table: SyncTable,
        op: SyncOp,
        part: SyncPart,
        record: Arc<[u8]>,
    },
}

/// The Changes that carry `record`: one, or two parts for a record longer
/// than one MAD holds.
fn changes(table: SyncTable, op: SyncOp, record: &Arc<[u8]>) -> Vec<Item> {
    if record.len() <= MAX_RECORD_LEN {
        return vec![Item::Change { table, op, part: SyncPart::Whole, record: record.clone() }];
    }
    debug_assert!(record.len() <= 2 * MAX_RECORD_LEN, "no SA record is longer than two parts");
    let (head, tail) = record.split_at(MAX_RECORD_LEN);
    vec![
        Item::Change { table, op, part: SyncPart::First, record: head.into() },
        Item::Change { table, op, part: SyncPart::Last, record: tail.into() },
    ]
}

#[derive(Debug)]
struct Pending {
    seq: u64,
    item: Item,
    sent_at: Option<Duration>,
}

#[derive(Debug)]
struct Peer {
    next_seq: u64,
    queue: VecDeque<Pending>,
    /// How many of the queue's first entries were sent at least once: the
    /// next new one is `queue[sent]`, found without a scan.
    sent: usize,
    /// No resend is due before this: the window is scanned for late
    /// entries only from then (not on every poll, once per SA answer while
    /// a standby is fed).
    resend_check: Duration,
    last_heard: Duration,
    next_beat: Duration,
    /// What its Hello says it understands: it gets nothing else.
    takes: Takes,
}

impl Peer {
    fn new(now: Duration) -> Self {
        Peer {
            next_seq: 1,
            queue: VecDeque::new(),
            sent: 0,
            resend_check: Duration::MAX,
            last_heard: now,
            next_beat: now + BEAT,
            takes: Takes::default(),
        }
    }

    /// The first entry of the window unacknowledged for [`RESEND_AFTER`];
    /// `resend_check` moves to when another can be (the caller, resending
    /// this one, brings it nearer).
    fn late(&mut self, now: Duration) -> Option<usize> {
        if now < self.resend_check {
            return None;
        }
        let window = self.queue.iter().take(self.sent);
        let late = window.clone().position(|p| p.sent_at.is_some_and(|at| now >= at + RESEND_AFTER));
        self.resend_check = window
            .enumerate()
            .filter(|&(i, _)| Some(i) != late)
            .filter_map(|(_, p)| p.sent_at)
            .map(|at| at + RESEND_AFTER)
            .min()
            .unwrap_or(Duration::MAX);
        late
    }
}

/// What a message to send is: its body and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub to: Lid,
    pub mad: SyncMadRepr,
}

/// The master's side: the records it last saw, and each standby's stream.
#[derive(Debug)]
pub struct Source {
    epoch: u64,
    sm_key: u64,
    tables: [RecordSet; SYNC_TABLES],
    peers: HashMap<Lid, Peer>,
    tid: u64,
}

impl Source {
    /// `epoch` must differ from any earlier master's (the runtime takes
    /// the port GUID's low bits and the time).
    pub fn new(epoch: u64, sm_key: u64) -> Self {
        Source { epoch: epoch.max(1), sm_key, tables: Default::default(), peers: HashMap::new(), tid: 0 }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn peers(&self) -> usize {
        self.peers.len()
    }

    /// Takes the tables given (`None`: unchanged) as they stand; every
    /// difference from the last look becomes a Change for each standby.
    pub fn observe(&mut self, current: [Option<RecordSet>; SYNC_TABLES], stats: &mut SyncStats) {
        let mut changes = Vec::new();
        for (i, new) in current.into_iter().enumerate() {
            let Some(new) = new else { continue };
            let table = SyncTable::ALL[i];
            let old = std::mem::replace(&mut self.tables[i], new);
            if self.peers.is_empty() {
                continue;
            }
            let new = &self.tables[i];
            for r in old.difference(new) {
                changes.extend(self::changes(table, SyncOp::Remove, r));
            }
            for r in new.difference(&old) {
                changes.extend(self::changes(table, SyncOp::Add, r));
            }
        }
        for item in changes {
            self.queue_all(item, stats);
        }
    }

    /// Records of `table` removed and added, as the caller compared them
    /// itself (a table kept in parts: multicast members group by group).
    pub fn change(&mut self, table: SyncTable, removed: Vec<Arc<[u8]>>, added: Vec<Arc<[u8]>>, stats: &mut SyncStats) {
        let set = &mut self.tables[table.index()];
        let mut changes = Vec::new();
        for r in removed {
            if set.remove(&r) {
                changes.extend(self::changes(table, SyncOp::Remove, &r));
            }
        }
        for r in added {
            if set.insert(r.clone()) {
                changes.extend(self::changes(table, SyncOp::Add, &r));
            }
        }
        if self.peers.is_empty() {
            return;
        }
        for item in changes {
            self.queue_all(item, stats);
        }
    }

    /// Records held in all tables.
    pub fn records(&self) -> usize {
        self.tables.iter().map(|t| t.len()).sum()
    }

    fn queue_all(&mut self, item: Item, stats: &mut SyncStats) {
        let mut overflowed = Vec::new();
        for (&lid, peer) in self.peers.iter_mut() {
            if let Item::Change { table, .. } = &item {
                if !peer.takes.table(*table) {
                    continue;
                }
            }
            if peer.queue.len() >= QUEUE_CAP {
                overflowed.push(lid);
                continue;
            }
            peer.queue.push_back(Pending { seq: peer.next_seq, item: item.clone(), sent_at: None });
            peer.next_seq += 1;
        }
        for lid in overflowed {
            self.resync(lid, stats);
        }
    }

    /// Queues a Reset and every record for `lid`, dropping what it had.
    fn resync(&mut self, lid: Lid, stats: &mut SyncStats) {
        let Some(peer) = self.peers.get_mut(&lid) else { return };
        stats.resyncs += 1;
        peer.queue.clear();
        peer.sent = 0;
        peer.resend_check = Duration::MAX;
        peer.queue.push_back(Pending { seq: peer.next_seq, item: Item::Reset, sent_at: None });
        peer.next_seq += 1;
        for (i, set) in self.tables.iter().enumerate() {
            let table = SyncTable::ALL[i];
            if !peer.takes.table(table) {
                continue;
            }
            for r in set {
                for item in changes(table, SyncOp::Add, r) {
                    peer.queue.push_back(Pending { seq: peer.next_seq, item, sent_at: None });
                    peer.next_seq += 1;
                }
            }
        }
    }

    /// A standby's Hello from `from`, already checked to be a known SM
    /// with the right key: its acknowledgement, or its first word.
    pub fn on_hello(&mut self, now: Duration, from: Lid, epoch: u64, next: u64, takes: Takes, stats: &mut SyncStats) {
        let fresh = !self.peers.contains_key(&from);
        let peer = self.peers.entry(from).or_insert_with(|| Peer::new(now));
        peer.last_heard = now;
        // What it takes changes only with the process behind the LID, and
        // a new process holds another epoch: a resync follows.
        peer.takes = takes;
        let reset_waiting = matches!(peer.queue.front(), Some(Pending { item: Item::Reset, .. }));
        let claims_unsent = epoch == self.epoch && next > peer.next_seq;
        if fresh || claims_unsent || (epoch != self.epoch && !reset_waiting) {
            self.resync(from, stats);
        } else if epoch == self.epoch {
            while peer.queue.front().is_some_and(|p| p.seq < next) {
                peer.queue.pop_front();
                peer.sent = peer.sent.saturating_sub(1);
            }
        }
        stats.peers = self.peers.len() as u64;
    }

    /// The next message to send: a new or late change within the window,
    /// or a Beat that is due.
    pub fn poll_transmit(&mut self, now: Duration, stats: &mut SyncStats) -> Option<Outgoing> {
        let before = self.peers.len();
        self.peers.retain(|_, p| now.saturating_sub(p.last_heard) < PEER_SILENT);
        if self.peers.len() != before {
            stats.peers = self.peers.len() as u64;
        }
        for (&lid, peer) in self.peers.iter_mut() {
            // A late one first, then the next new one within the window.
            let next = match peer.late(now) {
                Some(i) => Some(i),
                None if peer.sent < WINDOW.min(peer.queue.len()) => {
                    peer.sent += 1;
                    Some(peer.sent - 1)
                }
                None => None,
            };
            if let Some(i) = next {
                let packed = if peer.takes.packs { pack_from(peer, i) } else { 1 };
                if i + packed > peer.sent {
                    // The records packed behind a new one are sent now too.
                    peer.sent = i + packed;
                }
                for p in peer.queue.range_mut(i..i + packed) {
                    match p.sent_at {
                        None if matches!(p.item, Item::Change { .. }) => stats.changes_sent += 1,
                        Some(_) if matches!(p.item, Item::Change { .. }) => stats.changes_resent += 1,
                        _ => {}
                    }
                    p.sent_at = Some(now);
                }
                peer.resend_check = peer.resend_check.min(now + RESEND_AFTER);
                let p = &peer.queue[i];
                let body = match &p.item {
                    Item::Reset => SyncBody::Reset { seq: p.seq },
                    Item::Change { .. } if packed > 1 => SyncBody::Changes {
                        seq: p.seq,
                        records: peer
                            .queue
                            .range(i..i + packed)
                            .filter_map(|p| match &p.item {
                                Item::Change { table, op, record, .. } => {
                                    Some(PackedChange { table: *table, op: *op, record: record.to_vec() })
                                }
                                Item::Reset => None,
                            })
                            .collect(),
                    },
                    Item::Change { table, op, part, record } => {
                        SyncBody::Change { seq: p.seq, table: *table, op: *op, part: *part, record: record.to_vec() }
                    }
                };
                self.tid += 1;
                return Some(Outgoing { to: lid, mad: message(self.tid, self.sm_key, self.epoch, body) });
            }
            if now >= peer.next_beat {
                peer.next_beat = now + BEAT;
                self.tid += 1;
                let body = SyncBody::Beat { next: peer.next_seq };
                return Some(Outgoing { to: lid, mad: message(self.tid, self.sm_key, self.epoch, body) });
            }
        }
        None
    }

    /// When `poll_transmit` has something next: a resend or a Beat.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.peers
            .values()
            .flat_map(|p| {
                let resend = (p.resend_check != Duration::MAX).then_some(p.resend_check);
                [resend, Some(p.next_beat), Some(p.last_heard + PEER_SILENT)]
            })
            .flatten()
            .min()
    }
}

/// How many queue entries from `i` on go in one message: whole records
/// that fit one Changes together, all within the window (one when the
/// entry at `i` is a Reset or a part).
fn pack_from(peer: &Peer, i: usize) -> usize {
    let whole = |p: &Pending| match &p.item {
        Item::Change { part: SyncPart::Whole, record, .. } => Some(record.len()),
        _ => None,
    };
    let mut room = MAX_RECORD_LEN;
    let mut n = 0;
    for p in peer.queue.iter().skip(i).take(WINDOW.saturating_sub(i).max(1)) {
        let Some(len) = whole(p) else { break };
        let need = PackedChange::packed_len(len);
        if need > room || n == crate::mad::sm_sync::MAX_PACKED {
            break;
        }
        room -= need;
        n += 1;
    }
    n.max(1)
}

fn message(tid: u64, sm_key: u64, epoch: u64, body: SyncBody) -> SyncMadRepr {
    SyncMadRepr { transaction_id: tid, sm_key, epoch, body }
}

/// A change that came ahead of a missing one: table, op, part, bytes.
type Early = (SyncTable, SyncOp, SyncPart, Arc<[u8]>);

/// The standby's side: its copy of the master's records.
#[derive(Debug)]
pub struct Copy {
    sm_key: u64,
    master: Option<Lid>,
    epoch: u64,
    /// The next number this copy lacks.
    next: u64,
    tables: [RecordSet; SYNC_TABLES],
    early: BTreeMap<u64, Early>,
    /// The first part of a record whose last part is next.
    partial: Option<(SyncTable, SyncOp, Vec<u8>)>,
    /// Changes applied, by table.
    versions: [u64; SYNC_TABLES],
    /// A Reset of this epoch was applied.
    reset_seen: bool,
    /// The master's next number at its last Beat, and when it came.
    beat: Option<(u64, Duration)>,
    synced_at: Option<Duration>,
    next_hello: Duration,
    /// When the acknowledgement of what came in goes out.
    ack_at: Option<Duration>,
    /// When the master last sent anything.
    heard: Option<Duration>,
    tid: u64,
}

impl Copy {
    pub fn new(sm_key: u64) -> Self {
        Copy {
            sm_key,
            master: None,
            epoch: 0,
            next: 0,
            tables: Default::default(),
            early: BTreeMap::new(),
            partial: None,
            versions: [0; SYNC_TABLES],
            reset_seen: false,
            beat: None,
            synced_at: None,
            next_hello: Duration::ZERO,
            ack_at: None,
            heard: None,
            tid: 0,
        }
    }

    /// The master the election names (`None`: this SM is master, or none
    /// is known). A new master's stream starts over.
    pub fn set_master(&mut self, master: Option<Lid>) {
        if master != self.master {
            self.master = master;
            self.next_hello = Duration::ZERO;
            self.heard = None;
        }
    }

    pub fn master(&self) -> Option<Lid> {
        self.master
    }

    /// A message from `from` (already of the right key); `false` when it
    /// is not our master's, and so refused.
    pub fn on_message(&mut self, now: Duration, from: Lid, epoch: u64, body: SyncBody, stats: &mut SyncStats) -> bool {
        if self.master != Some(from) || matches!(body, SyncBody::Hello { .. }) {
            return false;
        }
        self.ack_at.get_or_insert(now + ACK_DELAY);
        self.heard = Some(now);
        match body {
            SyncBody::Hello { .. } => unreachable!("refused above"),
            SyncBody::Reset { seq } => {
                if epoch == self.epoch && seq < self.next {
                    stats.duplicates += 1;
                    return true;
                }
                if epoch != self.epoch {
                    self.early.clear();
                }
                self.epoch = epoch;
                self.next = seq + 1;
                self.tables = Default::default();
                self.partial = None;
                for v in &mut self.versions {
                    *v += 1;
                }
                self.early.retain(|&s, _| s > seq);
                self.reset_seen = true;
                self.beat = None;
                self.synced_at = None;
                self.drain_early(stats);
            }
            SyncBody::Change { seq, table, op, part, record } => {
                self.on_change(epoch, seq, (table, op, part, record.into()), stats);
            }
            SyncBody::Changes { seq, records } => {
                for (k, r) in records.into_iter().enumerate() {
                    let early = (r.table, r.op, SyncPart::Whole, r.record.into());
                    self.on_change(epoch, seq.saturating_add(k as u64), early, stats);
                }
            }
            SyncBody::Beat { next } => {
                if epoch == self.epoch {
                    self.beat = Some((next, now));
                }
            }
        }
        if let Some((beat_next, at)) = self.beat {
            if self.reset_seen && self.next >= beat_next {
                self.synced_at = Some(at);
            }
        }
        true
    }

    /// Change number `seq`: applied if it is the next, kept if it came
    /// early, counted if it is another stream's or held already (the
    /// Hello this prompts tells the master what we hold).
    fn on_change(&mut self, epoch: u64, seq: u64, (table, op, part, record): Early, stats: &mut SyncStats) {
        if epoch != self.epoch || !self.reset_seen || seq < self.next {
            stats.duplicates += 1;
            return;
        }
        if seq > self.next {
            stats.out_of_order += 1;
            if self.early.len() < EARLY_CAP {
                self.early.insert(seq, (table, op, part, record));
            }
            return;
        }
        self.apply(table, op, part, record, stats);
        self.next += 1;
        self.drain_early(stats);
    }

    fn apply(&mut self, table: SyncTable, op: SyncOp, part: SyncPart, record: Arc<[u8]>, stats: &mut SyncStats) {
        let record: Arc<[u8]> = match (part, self.partial.take()) {
            (SyncPart::Whole, _) => record,
            (SyncPart::First, _) => {
                self.partial = Some((table, op, record.to_vec()));
                return;
            }
            (SyncPart::Last, Some((t, o, mut head))) if (t, o) == (table, op) => {
                head.extend_from_slice(&record);
                head.into()
            }
            (SyncPart::Last, _) => {
                // A last part with no first part before it: the master's
                // stream is broken; its next Reset mends the copy.
                stats.rejected_malformed += 1;
                return;
            }
        };
        self.versions[table.index()] += 1;
        let set = &mut self.tables[table.index()];
        match op {
            SyncOp::Add => set.insert(record),
            SyncOp::Remove => set.remove(&record),
        };
        stats.changes_applied += 1;
    }

    fn drain_early(&mut self, stats: &mut SyncStats) {
        while let Some((table, op, part, record)) = self.early.remove(&self.next) {
            self.apply(table, op, part, record, stats);
            self.next += 1;
        }
        let next = self.next;
        self.early.retain(|&s, _| s > next);
    }

    /// A Hello when one is due: [`ACK_DELAY`] after a message came in
    /// (one for all that came meanwhile), and every [`HELLO`] while the
    /// master is known.
    pub fn poll_transmit(&mut self, now: Duration) -> Option<Outgoing> {
        let to = self.master?;
        if self.ack_at.is_none_or(|at| now < at) && now < self.next_hello {
            return None;
        }
        self.ack_at = None;
        let streaming = self.heard.is_some_and(|at| now.saturating_sub(at) < HELLO_IDLE);
        self.next_hello = now + if streaming { HELLO } else { HELLO_IDLE };
        self.tid += 1;
        let body = SyncBody::Hello { next: self.next, takes: Takes::ALL };
        Some(Outgoing { to, mad: message(self.tid, self.sm_key, self.epoch, body) })
    }

    pub fn poll_timeout(&self) -> Option<Duration> {
        self.master.map(|_| self.ack_at.map_or(self.next_hello, |at| at.min(self.next_hello)))
    }

    /// The last moment this copy was known to hold all the master had
    /// (`None`: never, since this SM started or its master changed).
    pub fn current_as_of(&self) -> Option<Duration> {
        self.synced_at
    }

    /// How far behind the master this copy may be: the time since it was
    /// last known current (`None`: never).
    pub fn lag(&self, now: Duration) -> Option<Duration> {
        self.synced_at.map(|at| now.saturating_sub(at))
    }

    /// The records held, by table.
    pub fn tables(&self) -> &[RecordSet; SYNC_TABLES] {
        &self.tables
    }

    /// A number that changes whenever `table`'s records may have.
    pub fn version(&self, table: SyncTable) -> u64 {
        self.versions[table.index()]
    }

    /// Forgets the copy (it was taken over, or this SM leaves standby).
    pub fn clear(&mut self) {
        let versions = self.versions.map(|v| v + 1);
        *self = Copy { sm_key: self.sm_key, master: self.master, versions, ..Copy::new(self.sm_key) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Lid = Lid(1);
    const B: Lid = Lid(2);

    /// A record of 52 bytes (an MCMemberRecord), or 176 (a ServiceRecord:
    /// two parts) for odd `b`.
    fn rec(b: u8) -> Arc<[u8]> {
        let len = if b % 2 == 1 { 176 } else { 52 };
        let mut r = vec![b; len];
        r[len - 1] = b.wrapping_add(1);
        r.into()
    }

    fn all(members: &[u8]) -> [Option<RecordSet>; SYNC_TABLES] {
        tables(members).map(Some)
    }

    fn tables(members: &[u8]) -> [RecordSet; SYNC_TABLES] {
        let mut t: [RecordSet; SYNC_TABLES] = Default::default();
        t[SyncTable::McMembers.index()] = members.iter().map(|&b| rec(b)).collect();
        t
    }

    /// A master and a standby joined by a channel that drops every
    /// message whose running number `lose` says.
    struct Pair {
        src: Source,
        copy: Copy,
        now: Duration,
        s: SyncStats,
        c: SyncStats,
        sent: u64,
        /// The standby's Hellos reach the master saying it takes Changes
        /// (an older ibsm's do not).
        packs: bool,
        /// Messages the master sent, and how many of them were Changes.
        from_master: (u64, u64),
    }

    impl Pair {
        fn new() -> Pair {
            let mut copy = Copy::new(9);
            copy.set_master(Some(A));
            Pair {
                src: Source::new(77, 9),
                copy,
                now: Duration::ZERO,
                s: SyncStats::default(),
                c: SyncStats::default(),
                sent: 0,
                packs: true,
                from_master: (0, 0),
            }
        }

        /// Moves time by `step` `turns` times, delivering what both sides send.
        fn run(&mut self, turns: usize, step: Duration, lose: &dyn Fn(u64) -> bool) {
            for _ in 0..turns {
                while let Some(o) = self.copy.poll_transmit(self.now) {
                    self.sent += 1;
                    if lose(self.sent) {
                        continue;
                    }
                    let SyncBody::Hello { next, takes } = o.mad.body else { panic!() };
                    let takes = Takes { packs: takes.packs && self.packs, ..takes };
                    self.src.on_hello(self.now, B, o.mad.epoch, next, takes, &mut self.s);
                }
                while let Some(o) = self.src.poll_transmit(self.now, &mut self.s) {
                    assert_eq!(o.to, B);
                    self.sent += 1;
                    self.from_master.0 += 1;
                    self.from_master.1 += u64::from(matches!(o.mad.body, SyncBody::Changes { .. }));
                    if lose(self.sent) {
                        continue;
                    }
                    let wire = SyncMadRepr::parse(&o.mad.emit().unwrap()).unwrap();
                    assert!(self.copy.on_message(self.now, A, wire.epoch, wire.body, &mut self.c));
                }
                self.now += step;
            }
        }
    }

    fn held(copy: &Copy) -> Vec<u8> {
        let mut v: Vec<u8> = copy.tables()[SyncTable::McMembers.index()].iter().map(|r| r[0]).collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_standby_gets_everything_then_each_change() {
        let mut p = Pair::new();
        p.src.observe(all(&[1, 2, 3]), &mut p.s);
        assert_eq!(p.copy.current_as_of(), None);
        p.run(30, Duration::from_millis(10), &|_| false);
        assert_eq!(held(&p.copy), vec![1, 2, 3]);
        assert!(p.copy.lag(p.now).unwrap() <= BEAT + Duration::from_millis(10));
        p.src.observe(all(&[2, 3, 4]), &mut p.s);
        p.run(2, Duration::from_millis(1), &|_| false);
        assert_eq!(held(&p.copy), vec![2, 3, 4]);
        assert_eq!(p.s.resyncs, 1);
        assert_eq!(p.s.changes_resent, 0);
    }

    /// Members go two to a message to a standby that takes Changes, one
    /// to a message to one that does not, and both copies end the same.
    #[test]
    fn changes_pack_for_a_standby_that_takes_them() {
        let members: Vec<u8> = (0..60).map(|k| k * 2).collect();
        let mut counts = Vec::new();
        for packs in [true, false] {
            let mut p = Pair::new();
            p.packs = packs;
            p.src.observe(all(&members[..1]), &mut p.s);
            p.run(30, Duration::from_millis(10), &|_| false);
            let before = p.from_master;
            p.src.observe(all(&members), &mut p.s);
            p.run(3, Duration::from_millis(1), &|_| false);
            assert_eq!(held(&p.copy), members, "packs {packs}");
            assert_eq!(p.s.changes_sent, 60, "every record counted once");
            counts.push((p.from_master.0 - before.0, p.from_master.1 - before.1));
        }
        let (packed, unpacked) = (counts[0], counts[1]);
        assert!(packed.0 <= 35 && packed.1 >= 29, "59 members in {packed:?} (messages, Changes) and Beats");
        assert!(unpacked.0 >= 59 && unpacked.1 == 0, "one a message: {unpacked:?}");
    }

    #[test]
    fn an_unacknowledged_change_is_resent_when_it_is_late_and_not_before() {
        let mut p = Pair::new();
        p.src.observe(all(&[1]), &mut p.s);
        p.run(30, Duration::from_millis(10), &|_| false);
        let sent_at = p.now;
        p.src.observe(all(&[1, 2]), &mut p.s);
        assert!(p.src.poll_transmit(sent_at, &mut p.s).is_some(), "the change, at once");
        assert!(p.src.poll_timeout().is_some_and(|t| t <= sent_at + RESEND_AFTER));
        let just_before = sent_at + RESEND_AFTER - Duration::from_millis(1);
        let early = p.src.poll_transmit(just_before, &mut p.s);
        assert!(early.as_ref().is_none_or(|o| matches!(o.mad.body, SyncBody::Beat { .. })), "{early:?}");
        assert_eq!(p.s.changes_resent, 0);
        let late = p.src.poll_transmit(sent_at + RESEND_AFTER, &mut p.s).expect("resent");
        assert!(matches!(late.mad.body, SyncBody::Change { .. }), "{late:?}");
        assert_eq!(p.s.changes_resent, 1);
        // Once, then not again until another RESEND_AFTER has passed.
        let again = p.src.poll_transmit(sent_at + RESEND_AFTER, &mut p.s);
        assert!(again.as_ref().is_none_or(|o| matches!(o.mad.body, SyncBody::Beat { .. })), "{again:?}");
        assert!(p.src.poll_timeout().is_some_and(|t| t <= sent_at + 2 * RESEND_AFTER));
    }

    /// Drops a message with probability `p`, from a fixed xorshift stream.
    fn lossy(p: f64, seed: u64) -> impl Fn(u64) -> bool {
        move |n| {
            let mut x = seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 10_000) as f64 / 10_000.0 < p
        }
    }

    #[test]
    fn lost_messages_are_resent_and_arrive_in_order() {
        for (loss, seed) in [(0.01, 1u64), (0.05, 2), (0.10, 3)] {
            let lose = lossy(loss, seed);
            let mut p = Pair::new();
            p.src.observe(all(&[1]), &mut p.s);
            p.run(20, Duration::from_millis(10), &|_| false);
            for round in 0..50u8 {
                let set: Vec<u8> = (0..round % 9 + 1).map(|i| i.wrapping_mul(13).wrapping_add(round)).collect();
                p.src.observe(all(&set), &mut p.s);
                // Every change is held within 100 ms, losses and all.
                p.run(100, Duration::from_millis(1), &lose);
                let mut want = set.clone();
                want.sort();
                want.dedup();
                assert_eq!(held(&p.copy), want, "round {round}, losing {loss}");
            }
            assert!(p.s.changes_resent > 0, "losing {loss}: nothing resent");
            p.run(100, Duration::from_millis(10), &|_| false);
            assert!(p.copy.lag(p.now).unwrap() <= BEAT + Duration::from_millis(10));
        }
    }

    #[test]
    fn a_missing_beat_makes_the_copy_stale_and_a_master_restart_resyncs() {
        let mut p = Pair::new();
        p.src.observe(all(&[1, 2]), &mut p.s);
        p.run(30, Duration::from_millis(10), &|_| false);
        let as_of = p.copy.current_as_of().unwrap();
        // The master goes quiet: its beats stop, the lag grows.
        p.now += Duration::from_secs(5);
        assert!(p.copy.lag(p.now).unwrap() >= Duration::from_secs(5));
        assert_eq!(p.copy.current_as_of(), Some(as_of));
        // A restarted master (another epoch, other records) resyncs it.
        p.src = Source::new(78, 9);
        p.src.observe(all(&[5]), &mut p.s);
        p.run(30, Duration::from_millis(10), &|_| false);
        assert_eq!(held(&p.copy), vec![5]);
        assert!(p.copy.current_as_of().unwrap() > as_of);
    }

    #[test]
    fn a_stream_from_another_lid_or_a_replay_changes_nothing() {
        let mut p = Pair::new();
        p.src.observe(all(&[1, 2]), &mut p.s);
        p.run(30, Duration::from_millis(10), &|_| false);
        let change = SyncBody::Change {
            seq: 1,
            table: SyncTable::McMembers,
            op: SyncOp::Remove,
            part: SyncPart::Whole,
            record: rec(2).to_vec(),
        };
        assert!(!p.copy.on_message(p.now, Lid(99), 77, change.clone(), &mut p.c));
        // A replay of an old number is a duplicate, not a removal.
        assert!(p.copy.on_message(p.now, A, 77, change, &mut p.c));
        assert_eq!(held(&p.copy), vec![1, 2]);
        assert!(p.c.duplicates >= 1);
        // A Hello claiming numbers never sent resyncs that standby.
        let resyncs = p.s.resyncs;
        p.src.on_hello(p.now, B, 77, 1_000_000, Takes::ALL, &mut p.s);
        assert_eq!(p.s.resyncs, resyncs + 1);
        p.run(30, Duration::from_millis(10), &|_| false);
        assert_eq!(held(&p.copy), vec![1, 2]);
    }

    #[test]
    fn a_silent_standby_is_dropped_and_an_overflow_resyncs() {
        let mut p = Pair::new();
        p.src.observe(all(&[1]), &mut p.s);
        p.run(5, Duration::from_millis(10), &|_| false);
        assert_eq!(p.src.peers(), 1);
        // Nothing from the standby for PEER_SILENT: dropped.
        p.now += PEER_SILENT;
        while p.src.poll_transmit(p.now, &mut p.s).is_some() {}
        assert_eq!(p.src.peers(), 0);
    }

    #[test]
    fn multicast_tables_go_only_to_a_standby_that_takes_them() {
        let mut stats = SyncStats::default();
        let mut src = Source::new(5, 9);
        let (old, new) = (Lid(2), Lid(3));
        let older = Takes { packs: true, mcast: false };
        src.on_hello(Duration::ZERO, old, 0, 0, older, &mut stats);
        src.on_hello(Duration::ZERO, new, 0, 0, Takes::ALL, &mut stats);
        let mut t: [Option<RecordSet>; SYNC_TABLES] = Default::default();
        t[SyncTable::McMembers.index()] = Some([rec(2)].into_iter().collect());
        t[SyncTable::MftDigests.index()] = Some([Arc::from(&[7u8; 16][..])].into_iter().collect());
        t[SyncTable::McastTrees.index()] = Some([Arc::from(&[8u8; 11][..])].into_iter().collect());
        src.observe(t, &mut stats);
        // What each got: after its Reset, the changes observed.
        let tables_sent = |src: &mut Source, now: Duration, stats: &mut SyncStats| {
            let mut by_peer: HashMap<Lid, Vec<SyncTable>> = HashMap::new();
            while let Some(o) = src.poll_transmit(now, stats) {
                let tables = by_peer.entry(o.to).or_default();
                match o.mad.body {
                    SyncBody::Change { table, .. } => tables.push(table),
                    SyncBody::Changes { records, .. } => tables.extend(records.iter().map(|r| r.table)),
                    _ => {}
                }
            }
            by_peer
        };
        let sent = tables_sent(&mut src, Duration::ZERO, &mut stats);
        assert_eq!(sent[&old], vec![SyncTable::McMembers]);
        assert_eq!(sent[&new], vec![SyncTable::McMembers, SyncTable::MftDigests, SyncTable::McastTrees]);
        // A full resync (each claims a number never sent) leaves them out
        // for the older one too.
        src.on_hello(Duration::from_millis(1), old, 5, 1_000, older, &mut stats);
        src.on_hello(Duration::from_millis(1), new, 5, 1_000, Takes::ALL, &mut stats);
        let sent = tables_sent(&mut src, Duration::from_millis(1), &mut stats);
        assert_eq!(sent[&old], vec![SyncTable::McMembers]);
        let mut got = sent[&new].clone();
        got.sort();
        assert_eq!(got, vec![SyncTable::McMembers, SyncTable::MftDigests, SyncTable::McastTrees]);
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    /// The cost of one look at 60,000 multicast members: building the set
    /// and comparing it with the last. `cargo test --release -- --ignored
    /// one_look_at_sixty_thousand --nocapture` prints it.
    #[test]
    #[ignore]
    fn one_look_at_sixty_thousand_members() {
        let record = |i: u32| -> Arc<[u8]> {
            let mut r = [0u8; 52];
            r[..4].copy_from_slice(&i.to_be_bytes());
            r[16..20].copy_from_slice(&(i * 7).to_be_bytes());
            Arc::from(&r[..])
        };
        let mut src = Source::new(1, 1);
        let mut stats = SyncStats::default();
        src.on_hello(Duration::ZERO, Lid(2), 0, 0, Takes::ALL, &mut stats);
        let first: RecordSet = (0..60_000).map(record).collect();
        src.observe([None, None, None, Some(first), None, None, None], &mut stats);
        let started = std::time::Instant::now();
        let rounds = 20;
        for round in 0..rounds {
            let set: RecordSet = (0..60_000).map(|i| record(i + round)).collect();
            src.observe([None, None, None, Some(set), None, None, None], &mut stats);
        }
        eprintln!("one look at 60,000 members: {:.2?}", started.elapsed() / rounds);
    }
}
