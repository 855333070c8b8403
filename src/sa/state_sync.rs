//! The agent's side of the state stream ([`super::sync`]): as master it
//! shows the stream its registrations as record sets and takes standbys'
//! Hellos; as standby it keeps the master's stream; at a takeover the
//! stream's copy is what the new master imports (through
//! [`super::mirror`], as a periodic read would be).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tracing::Level;

use super::sync::{Copy, Outgoing, RecordSet, Source};
use super::{MirrorRead, SaAgent, Serving};
use crate::datagram::{Datagram, MadAddress};
use crate::mad::sa::{GuidInfoRecordRepr, InformInfoRecordRepr, McMemberRecordRepr, SaRecord, ServiceRecordRepr};
use crate::mad::sm_sync::{SyncBody, SyncMadRepr, SyncTable, SYNC_TABLES};
use crate::types::{Guid, Lid};

/// Registrations changed: the stream looks at them this much later, so a
/// join flood costs one comparison per batch, not one per join.
pub const OBSERVE_BATCH: Duration = Duration::from_millis(5);
/// ... plus this much per thousand records held. A join or leave is
/// compared alone, but a change of services, subscriptions or alias GUIDs
/// compares its whole table (a whole look at 60,000 records takes
/// about 56 ms on the 2-core test machine: `sync::cost`), so a flood of
/// those pays a bounded share of the SA's time.
pub const OBSERVE_BATCH_PER_1000: Duration = Duration::from_micros(500);

fn observe_batch(src: Option<&Source>) -> Duration {
    let thousands = src.map_or(0, |s| s.records() / 1000) as u32;
    OBSERVE_BATCH + OBSERVE_BATCH_PER_1000 * thousands
}

/// The stream as the agent holds it.
#[derive(Debug)]
pub(super) struct StateSync {
    /// `None`: `[sa] state_sync` is off, or the runtime never enabled it.
    settings: Option<Settings>,
    /// While serving as master.
    source: Option<Source>,
    /// While not.
    copy: Copy,
    /// The registrations' versions the source last looked at.
    seen: Option<[u64; SYNC_TABLES]>,
    /// When the source looks again.
    due: Option<Duration>,
    /// Times this SM became master (each a new epoch).
    terms: u64,
    /// When the last periodic mirror read was kept.
    mirror_read_at: Option<Duration>,
    /// Ports of SMs that polled this one with our SM_Key.
    peer_sms: std::collections::HashSet<crate::types::Guid>,
    /// What the master's SM keeps for a new master (its guid2lid, its
    /// digests of what each switch's MFT holds, its groups' trees),
    /// encoded as the stream carries them, as its SM last told
    /// (`set_published`, `change_published`). Changes reach the source as
    /// they come, never by comparing a whole table per look: the trees of
    /// a large fabric run to tens of thousands of records.
    lid_map: RecordSet,
    mft_digests: RecordSet,
    mcast_trees: RecordSet,
    /// The multicast records last shown to the source, by group and
    /// member (`None`: the record of a group without members): a join
    /// compares one record again, not its group's.
    mc_shown: HashMap<[u8; 16], GroupRecords>,
}

/// A group's records by member (`None`: the group's own record).
type GroupRecords = HashMap<Option<Guid>, Arc<[u8]>>;

/// A group's records as a trusted GetTable shows them, by member: one per
/// member, or the group's own (`None`) when it has none.
fn group_records(g: &super::mcast::Group) -> GroupRecords {
    let mut out: GroupRecords = g.members().map(|(p, m)| (Some(p), Arc::from(g.member_record(m).to_bytes()))).collect();
    if out.is_empty() {
        out.insert(None, g.group_record().to_bytes().into());
    }
    out
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    sm_key: u64,
    epoch_seed: u64,
}

impl Default for StateSync {
    fn default() -> Self {
        StateSync {
            settings: None,
            source: None,
            copy: Copy::new(0),
            seen: None,
            due: None,
            terms: 0,
            mirror_read_at: None,
            peer_sms: Default::default(),
            lid_map: RecordSet::default(),
            mft_digests: RecordSet::default(),
            mcast_trees: RecordSet::default(),
            mc_shown: Default::default(),
        }
    }
}

impl StateSync {
    pub fn mirror_read(&mut self, now: Duration) {
        self.mirror_read_at = Some(now);
    }

    fn published_mut(&mut self, table: SyncTable) -> Option<&mut RecordSet> {
        match table {
            SyncTable::Lids => Some(&mut self.lid_map),
            SyncTable::MftDigests => Some(&mut self.mft_digests),
            SyncTable::McastTrees => Some(&mut self.mcast_trees),
            _ => None,
        }
    }
}

impl SaAgent {
    /// Turns the state stream on (`[sa] state_sync`): messages carry
    /// `sm_key`; `epoch_seed` must differ between runs of the SM (the
    /// runtime takes the clock and port GUID), so a restarted master's
    /// stream is never mistaken for the one before.
    pub fn enable_sync(&mut self, sm_key: u64, epoch_seed: u64) {
        if !self.cfg.state_sync {
            return;
        }
        self.sync.settings = Some(Settings { sm_key, epoch_seed });
        self.sync.copy = Copy::new(sm_key);
        if self.serving == Serving::Master {
            self.start_source();
        }
    }

    /// The master the election names, whose stream a standby asks for
    /// (`None`: none known).
    pub fn set_master_lid(&mut self, master: Option<Lid>) {
        if self.serving != Serving::Master && self.sync.settings.is_some() {
            self.sync.copy.set_master(master);
        }
    }

    /// An SM (its port GUID) that polled this one's SMInfo with our
    /// SM_Key: a Hello from its port is taken, even before a sweep finds it.
    pub fn add_sync_peer(&mut self, port: crate::types::Guid) {
        if self.sync.peer_sms.len() < super::sync::MAX_PEERS {
            self.sync.peer_sms.insert(port);
        }
    }

    /// Records the master's SM keeps for a new master, streamed to the
    /// standbys with the SA state: [`SyncTable::Lids`] (its guid2lid, so a
    /// port away during a failover comes back to the LID it had),
    /// [`SyncTable::MftDigests`] and [`SyncTable::McastTrees`] (the
    /// multicast pass makes them); any other table is ignored. The whole
    /// table: what differs from the last is streamed.
    pub fn set_published(&mut self, table: SyncTable, records: Vec<Arc<[u8]>>) {
        let Some(p) = self.sync.published_mut(table) else { return };
        let new: RecordSet = records.into_iter().collect();
        let removed: Vec<Arc<[u8]>> = p.difference(&new).cloned().collect();
        let added: Vec<Arc<[u8]>> = new.difference(p).cloned().collect();
        self.change_published(table, removed, added);
    }

    /// [`Self::set_published`] as the records removed and added.
    pub fn change_published(&mut self, table: SyncTable, removed: Vec<Arc<[u8]>>, added: Vec<Arc<[u8]>>) {
        let Some(p) = self.sync.published_mut(table) else { return };
        for r in &removed {
            p.remove(r);
        }
        p.extend(added.iter().cloned());
        if let Some(src) = self.sync.source.as_mut() {
            src.change(table, removed, added, &mut self.stats.sync);
        }
    }

    /// A number that changes with `table`'s records in the standby's copy
    /// ([`Self::sync_records`]).
    pub fn sync_records_version(&self, table: SyncTable) -> u64 {
        self.sync.copy.version(table)
    }

    /// `table`'s records as the standby's copy holds them, in no order.
    pub fn sync_records(&self, table: SyncTable) -> Vec<Arc<[u8]>> {
        self.sync.copy.tables()[table.index()].iter().cloned().collect()
    }

    /// The last moment the standby's copy held everything its master had
    /// (`None`: never, or the stream is off).
    pub fn sync_current_as_of(&self) -> Option<Duration> {
        self.sync.settings.and(self.sync.copy.current_as_of())
    }

    /// How far behind its master the standby's copy may be.
    pub fn sync_lag(&self, now: Duration) -> Option<Duration> {
        self.sync.settings.and(self.sync.copy.lag(now))
    }

    pub(super) fn start_source(&mut self) {
        let Some(s) = self.sync.settings else { return };
        self.sync.terms += 1;
        let epoch = s.epoch_seed.wrapping_add(self.sync.terms.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        self.sync.source = Some(Source::new(epoch, s.sm_key));
        self.sync.seen = None;
        self.sync.due = None;
        self.sync.copy.set_master(None);
    }

    pub(super) fn stop_source(&mut self) {
        self.sync.source = None;
        self.stats.sync.peers = 0;
    }

    /// A MAD of the stream's class. Never panics; every refusal counted.
    pub(super) fn handle_sync_mad(&mut self, now: Duration, d: &Datagram) {
        let from = d.addr.lid;
        let Some(settings) = self.sync.settings else {
            self.stats.sync.rejected_peer += 1;
            self.gate(now, Level::INFO, "sync_off", || {
                format!("SM sync MAD from LID {from} dropped: [sa] state_sync is off here")
            });
            return;
        };
        if d.mad.get(3).is_some_and(|m| m & 0x80 != 0) {
            // An SM that does not speak the stream answered a Hello with
            // an error status (OpenSM does): Hellos slow down by themselves.
            self.stats.sync.answered_by_other_sm += 1;
            self.gate(now, Level::INFO, "sync_not_ibsm", || {
                format!(
                    "the SM at LID {from} does not speak ibsm's state stream: only periodic mirror reads \
                     copy its SA, and a takeover from it re-registers every client"
                )
            });
            return;
        }
        let msg = match SyncMadRepr::parse(&d.mad) {
            Ok(m) => m,
            Err(e) => {
                self.stats.sync.rejected_malformed += 1;
                self.gate(now, Level::WARN, "sync_malformed", || format!("SM sync MAD from LID {from} dropped: {e}"));
                return;
            }
        };
        if msg.sm_key != settings.sm_key {
            self.stats.sync.rejected_key += 1;
            self.gate(now, Level::WARN, "sync_key", || {
                format!("SM sync MAD from LID {from} dropped: its SM_Key is not this SM's [sm] sm_key")
            });
            return;
        }
        match (msg.body, self.serving == Serving::Master) {
            (SyncBody::Hello { next, takes }, true) => {
                if !self.known_sm(from) {
                    self.stats.sync.rejected_peer += 1;
                    self.gate(now, Level::WARN, "sync_not_peer", || {
                        format!(
                            "SM sync Hello from LID {from} dropped: no SM at that LID polled this one with \
                             our SM_Key, nor did the last sweep find one there"
                        )
                    });
                    return;
                }
                if let Some(src) = self.sync.source.as_mut() {
                    src.on_hello(now, from, msg.epoch, next, takes, &mut self.stats.sync);
                }
                // A first standby: the look skipped while nobody was fed
                // happens now, not a batch later.
                self.sync_observe();
            }
            (SyncBody::Hello { .. }, false) => {
                // A standby asking an SM that is not (or not yet) serving
                // as master: it asks again.
                self.stats.sync.rejected_peer += 1;
            }
            (body, false) => {
                let was_current = self.sync.copy.current_as_of().is_some();
                if self.sync.copy.on_message(now, from, msg.epoch, body, &mut self.stats.sync) {
                    if !was_current && self.sync.copy.current_as_of().is_some() {
                        let records: usize = self.sync.copy.tables().iter().map(|t| t.len()).sum();
                        tracing::info!(
                            master_lid = %from,
                            records,
                            "SA state stream: this standby's copy of the master's SA state is current"
                        );
                    }
                } else {
                    self.stats.sync.rejected_peer += 1;
                    let master = self.sync.copy.master();
                    self.gate(now, Level::WARN, "sync_not_master", || {
                        format!("SM sync MAD from LID {from} dropped: not from the master (election names {master:?})")
                    });
                }
            }
            (_, true) => {
                // Another SM streams to us while we are master: two
                // masters, or a replay. The election sorts out the first.
                self.stats.sync.rejected_peer += 1;
                self.gate(now, Level::WARN, "sync_to_master", || {
                    format!("SM sync stream from LID {from} dropped: this SM is master")
                });
            }
        }
    }

    /// Whether the port at `lid` is an SM: one that polled this SM with
    /// our SM_Key, or one the last sweep found.
    fn known_sm(&self, lid: Lid) -> bool {
        let (Some(snap), Some(port)) = (self.snapshot.as_ref(), self.paths.port_by_lid(lid)) else {
            return false;
        };
        self.sync.peer_sms.contains(&port.guid) || snap.sweep.subnet.remote_sms.iter().any(|r| r.port_guid == port.guid)
    }

    fn sync_versions(&self) -> [u64; SYNC_TABLES] {
        [
            self.services.version(),
            self.subscriptions.version(),
            self.aliases.version(),
            self.mcast.version(),
            // Changed as they come (`change_published`): looked at whole
            // only at the first look.
            0,
            0,
            0,
        ]
    }

    /// The source takes the registrations that changed since its last
    /// look. With no standby to feed it looks at nothing: the first
    /// Hello's look then takes everything.
    fn sync_observe(&mut self) {
        let Some(src) = self.sync.source.as_ref() else { return };
        self.sync.due = None;
        if src.peers() == 0 {
            self.sync.seen = None;
            return;
        }
        let v = self.sync_versions();
        let seen = self.sync.seen;
        if seen == Some(v) {
            return;
        }
        self.sync.seen = Some(v);
        let mut changed: [bool; SYNC_TABLES] = std::array::from_fn(|i| seen.is_none_or(|s| s[i] != v[i]));
        // Multicast: only the memberships and groups touched.
        let touched = self.mcast.take_touched();
        let mc = SyncTable::McMembers.index();
        if changed[mc] && seen.is_some() && !touched.all {
            changed[mc] = false;
            let (mut removed, mut added) = (Vec::new(), Vec::new());
            let mut compare = |before: Option<Arc<[u8]>>, now: Option<Arc<[u8]>>| {
                if before != now {
                    removed.extend(before);
                    added.extend(now);
                }
            };
            for mgid in &touched.groups {
                let before = self.sync.mc_shown.remove(mgid).unwrap_or_default();
                let now = self.mcast.group(mgid).map(group_records).unwrap_or_default();
                for (k, r) in &before {
                    compare(Some(r.clone()), now.get(k).cloned());
                }
                for (k, r) in &now {
                    if !before.contains_key(k) {
                        compare(None, Some(r.clone()));
                    }
                }
                if !now.is_empty() {
                    self.sync.mc_shown.insert(*mgid, now);
                }
            }
            for (mgid, port) in touched.members {
                if touched.groups.contains(&mgid) {
                    continue;
                }
                let g = self.mcast.group(&mgid);
                let shown = self.sync.mc_shown.entry(mgid).or_default();
                let now = g.and_then(|g| g.member(port).map(|m| Arc::<[u8]>::from(g.member_record(m).to_bytes())));
                let before = match &now {
                    Some(r) => shown.insert(Some(port), r.clone()),
                    None => shown.remove(&Some(port)),
                };
                compare(before, now);
                // A group's own record stands for it while it has no members.
                let own =
                    g.filter(|g| g.members().next().is_none()).map(|g| Arc::<[u8]>::from(g.group_record().to_bytes()));
                let before = match &own {
                    Some(r) => shown.insert(None, r.clone()),
                    None => shown.remove(&None),
                };
                compare(before, own);
                if shown.is_empty() {
                    self.sync.mc_shown.remove(&mgid);
                }
            }
            if let Some(src) = self.sync.source.as_mut() {
                src.change(SyncTable::McMembers, removed, added, &mut self.stats.sync);
            }
        }
        let tables = self.sync_tables(changed);
        if let Some(src) = self.sync.source.as_mut() {
            src.observe(tables, &mut self.stats.sync);
        }
    }

    /// The registrations of the tables `which` names as record sets, as a
    /// trusted GetTable shows them.
    fn sync_tables(&mut self, which: [bool; SYNC_TABLES]) -> [Option<RecordSet>; SYNC_TABLES] {
        let wanted = |t: SyncTable| which[t.index()];
        let mut t: [Option<RecordSet>; SYNC_TABLES] = Default::default();
        if wanted(SyncTable::Services) {
            t[SyncTable::Services.index()] =
                Some(self.services.records_by_owner().map(|(_, r)| Arc::from(r)).collect());
        }
        if wanted(SyncTable::Subscriptions) {
            t[SyncTable::Subscriptions.index()] =
                Some(self.subscriptions.records().iter().map(|r| Arc::from(&r[..])).collect());
        }
        if wanted(SyncTable::GuidInfo) {
            let mut guid_info = RecordSet::new();
            for port in self.aliases.ports() {
                let Some(at) = self.paths.port_by_guid(port) else { continue };
                let last = self.aliases.of_port(port).map(|(i, _)| i).max().unwrap_or(0);
                for block in 0..=(last / 8) as u8 {
                    let r = GuidInfoRecordRepr {
                        lid: at.base_lid,
                        block_num: block,
                        guid_info: self.aliases.block(port, block),
                    };
                    guid_info.insert(r.to_bytes().into());
                }
            }
            t[SyncTable::GuidInfo.index()] = Some(guid_info);
        }
        if wanted(SyncTable::McMembers) {
            let mut members = RecordSet::new();
            let mut shown = HashMap::new();
            for g in self.mcast.groups() {
                let records = group_records(g);
                members.extend(records.values().cloned());
                shown.insert(g.mgid(), records);
            }
            t[SyncTable::McMembers.index()] = Some(members);
            self.sync.mc_shown = shown;
        }
        for table in [SyncTable::Lids, SyncTable::MftDigests, SyncTable::McastTrees] {
            if wanted(table) {
                let p = self.sync.published_mut(table).expect("a published table");
                t[table.index()] = Some(p.clone());
            }
        }
        t
    }

    /// The stream's next message, if one is due.
    pub(super) fn sync_transmit(&mut self, now: Duration) -> Option<Datagram> {
        self.sync.settings?;
        if self.sync.source.is_some() {
            let feeding = self.sync.source.as_ref().is_some_and(|s| s.peers() > 0);
            if feeding && self.sync.seen != Some(self.sync_versions()) {
                match self.sync.due {
                    None => self.sync.due = Some(now + observe_batch(self.sync.source.as_ref())),
                    Some(at) if now >= at => self.sync_observe(),
                    Some(_) => {}
                }
            }
            let out = self.sync.source.as_mut()?.poll_transmit(now, &mut self.stats.sync);
            return out.and_then(to_datagram);
        }
        self.sync.copy.poll_transmit(now).and_then(to_datagram)
    }

    pub(super) fn sync_timeout(&self) -> Option<Duration> {
        self.sync.settings?;
        match &self.sync.source {
            Some(src) => [src.poll_timeout(), self.sync.due].into_iter().flatten().min(),
            None => self.sync.copy.poll_timeout(),
        }
    }

    /// At a takeover: the stream's copy, if it is newer than the last
    /// periodic read, as a mirror read (each table complete).
    pub(super) fn sync_copy_as_read(&mut self) -> Option<MirrorRead> {
        let as_of = self.sync_current_as_of()?;
        if self.sync.mirror_read_at.is_some_and(|at| at > as_of) {
            return None;
        }
        let tables = self.sync.copy.tables();
        let mut unreadable = 0u64;
        let parse = |t: SyncTable| -> Vec<Arc<[u8]>> { tables[t.index()].iter().cloned().collect() };
        let read = MirrorRead {
            services: Some(parsed::<ServiceRecordRepr>(parse(SyncTable::Services), &mut unreadable)),
            subscriptions: Some(parsed::<InformInfoRecordRepr>(parse(SyncTable::Subscriptions), &mut unreadable)),
            guid_info: Some(parsed::<GuidInfoRecordRepr>(parse(SyncTable::GuidInfo), &mut unreadable)),
            mcast_members: Some(parsed::<McMemberRecordRepr>(parse(SyncTable::McMembers), &mut unreadable)),
        };
        self.stats.sync.unreadable_records += unreadable;
        self.sync.copy.clear();
        Some(read)
    }
}

fn parsed<R: SaRecord>(records: Vec<Arc<[u8]>>, unreadable: &mut u64) -> Vec<R> {
    let mut out: Vec<R> = Vec::with_capacity(records.len());
    for r in records {
        match R::parse_bytes(&r) {
            Ok(rec) => out.push(rec),
            Err(_) => *unreadable += 1,
        }
    }
    out
}

fn to_datagram(o: Outgoing) -> Option<Datagram> {
    let mad = o.mad.emit().ok()?;
    Some(Datagram { addr: MadAddress::gsi(o.to, 0), mad })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{agent, other_hosts, query, sm_lid, snapshot, swept, SA_KEY};
    use super::*;
    use crate::mad::sa::{service_mask, SERVICE_RECORD_LEN};
    use crate::mad::sm_sync::is_sync_mad;
    use crate::sa::SaConfig;
    use crate::types::Guid;

    const KEY: u64 = 7;

    /// Master M on the fixture's SM port and standby S on a host, both
    /// streaming, and what travels between them.
    struct Pair {
        m: SaAgent,
        s: SaAgent,
        m_lid: Lid,
        s_lid: Lid,
        now: Duration,
        /// Every stream MAD M sent S, in order.
        to_s: Vec<Vec<u8>>,
    }

    impl Pair {
        fn new() -> Pair {
            let mut m = agent();
            m.enable_sync(KEY, 1);
            let (s_guid, s_lid) = other_hosts()[1];
            let snap = snapshot(1, swept().clone());
            let m_lid = Lid(sm_lid());
            let mut s = SaAgent::new(SaConfig { sa_key: SA_KEY, ..SaConfig::default() }, s_guid);
            s.new_snapshot(Duration::ZERO, snap);
            s.enable_sync(KEY, 2);
            s.set_master_lid(Some(m_lid));
            m.add_sync_peer(s_guid);
            Pair { m, s, m_lid, s_lid: Lid(s_lid), now: Duration::ZERO, to_s: Vec::new() }
        }

        /// Moves time on by `ms` milliseconds, one at a time, delivering
        /// the stream both ways (answers to requesters are dropped).
        fn run(&mut self, ms: u64) {
            for _ in 0..ms {
                for _ in 0..10_000 {
                    let mut moved = false;
                    while let Some(d) = self.m.poll_transmit(self.now) {
                        moved = true;
                        if is_sync_mad(&d.mad) && d.addr.lid == self.s_lid {
                            self.to_s.push(d.mad.clone());
                            let from = Datagram { addr: MadAddress::gsi(self.m_lid, 0), mad: d.mad };
                            self.s.handle_mad(self.now, &from);
                        }
                    }
                    while let Some(d) = self.s.poll_transmit(self.now) {
                        moved = true;
                        if is_sync_mad(&d.mad) && d.addr.lid == self.m_lid {
                            let from = Datagram { addr: MadAddress::gsi(self.s_lid, 0), mad: d.mad };
                            self.m.handle_mad(self.now, &from);
                        }
                    }
                    if !moved {
                        break;
                    }
                }
                self.now += Duration::from_millis(1);
                for a in [&mut self.m, &mut self.s] {
                    if a.poll_timeout().is_some_and(|t| t <= self.now) {
                        a.handle_timeout(self.now);
                    }
                }
            }
        }

        fn held(&self, t: SyncTable) -> usize {
            self.s.sync.copy.tables()[t.index()].len()
        }
    }

    fn service(id: u64, owner: Guid) -> ServiceRecordRepr {
        let mut r = ServiceRecordRepr::parse_bytes(&[0u8; SERVICE_RECORD_LEN]).unwrap();
        r.service_id = id;
        r.service_gid = crate::sa::index::gid(crate::sa::index::DEFAULT_SUBNET_PREFIX, owner);
        r.service_name[..6].copy_from_slice(b"synced");
        r.service_data64 = [0x1122_3344_5566_7788, 0x99AA_BBCC_DDEE_FF00];
        r
    }

    #[test]
    fn a_registration_reaches_the_standby_and_a_takeover_serves_it() {
        let mut p = Pair::new();
        p.run(300);
        assert!(p.s.sync_current_as_of().is_some(), "the copy is current after a Beat");
        let (host, host_lid) = other_hosts()[2];
        let rid = service_mask::SERVICE_ID | service_mask::SERVICE_GID;
        p.m.handle_mad(p.now, &query(0x02, &service(0x77, host), rid, 0, host_lid));
        p.run(20);
        assert_eq!(p.held(SyncTable::Services), 1, "within 20 ms");
        let held = p.s.sync.copy.tables()[SyncTable::Services.index()].iter().next().unwrap().clone();
        let parsed = ServiceRecordRepr::parse_bytes(&held).unwrap();
        assert_eq!(parsed.service_data64, service(0x77, host).service_data64, "both parts of the record");
        assert_eq!(p.m.stats().sync.peers, 1);

        p.s.set_master_lid(None);
        p.s.set_serving(p.now, Serving::Master);
        assert_eq!(p.s.stats().services, 1, "the new master serves the registration");
        assert_eq!(p.s.sync_current_as_of(), None, "the copy is used up");
    }

    #[test]
    fn the_sms_multicast_tables_reach_the_standby_whole_and_as_changes() {
        let mut p = Pair::new();
        p.run(300);
        let rec = |b: u8, len: usize| -> Arc<[u8]> { vec![b; len].into() };
        let held = |p: &Pair, t: SyncTable| -> std::collections::BTreeSet<Vec<u8>> {
            p.s.sync_records(t).iter().map(|r| r.to_vec()).collect()
        };
        p.m.set_published(SyncTable::MftDigests, vec![rec(1, 16), rec(2, 16)]);
        p.m.change_published(SyncTable::McastTrees, Vec::new(), vec![rec(3, 11), rec(4, 11)]);
        let sent = p.to_s.len();
        p.run(20);
        assert_eq!(held(&p, SyncTable::MftDigests), [vec![1; 16], vec![2; 16]].into_iter().collect());
        assert_eq!(held(&p, SyncTable::McastTrees), [vec![3; 11], vec![4; 11]].into_iter().collect());
        // A whole table again: only its difference travels.
        let before = p.to_s.len();
        assert!(before > sent);
        p.m.set_published(SyncTable::MftDigests, vec![rec(2, 16), rec(5, 16)]);
        p.m.change_published(SyncTable::McastTrees, vec![rec(3, 11)], Vec::new());
        p.run(20);
        assert_eq!(held(&p, SyncTable::MftDigests), [vec![2; 16], vec![5; 16]].into_iter().collect());
        assert_eq!(held(&p, SyncTable::McastTrees), [vec![4; 11]].into_iter().collect());
        let changes: usize = p.to_s[before..]
            .iter()
            .map(|m| match SyncMadRepr::parse(m).unwrap().body {
                SyncBody::Change { .. } => 1,
                SyncBody::Changes { records, .. } => records.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(changes, 3, "digest 1 removed, 5 added, tree record 3 removed");
        // Another table is not the SM's to publish.
        p.m.set_published(SyncTable::Services, vec![rec(6, 16)]);
        p.run(20);
        assert_eq!(p.held(SyncTable::Services), 0);
    }

    #[test]
    fn garbage_keys_strangers_and_replays_are_refused_and_counted() {
        let mut p = Pair::new();
        p.run(300);
        let (host, host_lid) = other_hosts()[2];
        let rid = service_mask::SERVICE_ID | service_mask::SERVICE_GID;
        p.m.handle_mad(p.now, &query(0x02, &service(0x77, host), rid, 0, host_lid));
        p.run(20);
        let change = p.to_s.iter().rev().find(|m| m[72] == 2).expect("a Change went to S").clone();
        let deliver = |p: &mut Pair, mad: Vec<u8>, from: Lid| {
            let now = p.now;
            p.s.handle_mad(now, &Datagram { addr: MadAddress::gsi(from, 0), mad });
        };
        let before = p.s.stats().sync;
        let m_lid = p.m_lid;

        let mut garbage = change.clone();
        garbage[72] = 9;
        deliver(&mut p, garbage, m_lid);
        let mut wrong_key = change.clone();
        wrong_key[36..44].copy_from_slice(&8u64.to_be_bytes());
        deliver(&mut p, wrong_key, m_lid);
        deliver(&mut p, change.clone(), Lid(host_lid));
        deliver(&mut p, change.clone(), m_lid);
        let after = p.s.stats().sync;
        assert_eq!(after.rejected_malformed, before.rejected_malformed + 1);
        assert_eq!(after.rejected_key, before.rejected_key + 1);
        assert_eq!(after.rejected_peer, before.rejected_peer + 1, "a stream from a host, not the master");
        assert_eq!(after.duplicates, before.duplicates + 1, "a replay is a duplicate");
        assert_eq!(p.held(SyncTable::Services), 1, "nothing already held was lost");

        // The master takes Hellos only from SMs it knows.
        let hello = SyncMadRepr {
            transaction_id: 1,
            sm_key: KEY,
            epoch: 0,
            body: SyncBody::Hello { next: 0, takes: crate::mad::sm_sync::Takes::ALL },
        };
        let now = p.now;
        p.m.handle_mad(now, &Datagram { addr: MadAddress::gsi(Lid(host_lid), 0), mad: hello.emit().unwrap() });
        assert_eq!(p.m.stats().sync.rejected_peer, 1);
        assert_eq!(p.m.stats().sync.peers, 1, "the stranger is fed nothing");
        p.run(300);
        assert_eq!(p.held(SyncTable::Services), 1);
        assert!(p.s.sync_lag(p.now).unwrap() < Duration::from_millis(250), "and the stream goes on");
    }
}
