//! The owner and the SA task: what the owner hands the SA (MADs, traps,
//! its SMInfo, whether to answer) and the reprogramming the SA's alias
//! GUIDs and multicast groups ask of the sweep slot.

use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use super::owner::Owner;
use super::owner::SweepWork;
use super::sa_task;
use crate::election::State;
use crate::mad::sm_sync::{LidMapRecord, McastTreeRecord, MftDigestRecord, SyncTable};
use crate::program::mcast::TreeEntry;
use crate::subnet::MasterMode;
use crate::transport::Transport;
use crate::types::Guid;

/// `entries` less every key that comes more than once, sorted by key.
fn unique_by_key<T, K: Ord + Copy>(mut entries: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    entries.sort_by_key(|e| key(e));
    let twice: std::collections::BTreeSet<K> =
        entries.windows(2).filter(|w| key(&w[0]) == key(&w[1])).map(|w| key(&w[0])).collect();
    entries.retain(|e| !twice.contains(&key(e)));
    entries
}

impl<T: Transport + Clone> Owner<T> {
    /// Tells the SA the master the election names, when that changes: a
    /// standby asks it for the state stream. `None` while this SM is master.
    pub(super) fn tell_sa_master(&mut self) {
        let master = match self.election.state() {
            State::Master => None,
            _ => self.election.master().map(|p| p.addr.lid).filter(|l| l.0 != 0),
        };
        if self.sa_master != master {
            self.sa_master = master;
            self.hand_to_sa(sa_task::SaInput::Master(master));
        }
    }

    /// An SM that polled this one with our SM_Key: the SA feeds it the
    /// state stream when it asks (each told once; at most
    /// `MAX_SYNC_PEERS`).
    pub(super) fn tell_sa_peer(&mut self, port: crate::types::Guid) {
        if self.sa_peers.len() < crate::sa::sync::MAX_PEERS && self.sa_peers.insert(port) {
            self.hand_to_sa(sa_task::SaInput::PeerSm(port));
        }
    }

    /// The master's guid2lid to the SA, when it changed, for the standbys.
    pub(super) fn tell_sa_lids(&mut self) {
        let Some(sm) = self.sm.as_ref() else { return };
        let lids: Vec<LidMapRecord> = sm
            .guid2lid()
            .iter()
            .map(|(g, r)| LidMapRecord { port_guid: g.0, base_lid: r.base().0, lmc: r.lmc() })
            .collect();
        if self.sa_lids.as_ref() != Some(&lids) {
            let records = lids.iter().map(|l| Arc::from(&l.to_bytes()[..])).collect();
            // Not handed over (the SA queue is full): offered again next
            // time, whether or not it changes meanwhile.
            if self.sa.offer(sa_task::SaInput::Published(SyncTable::Lids, records)) {
                self.sa_lids = Some(lids);
            }
        }
    }

    /// The master's multicast tables to the SA, for the standbys: its
    /// digests of the switches' MFTs when they changed, and how its trees
    /// changed (all of them when `whole`, or when a change could not be
    /// handed over).
    pub(super) fn tell_sa_mcast(&mut self, whole: bool) {
        let Some(sm) = self.sm.as_mut() else { return };
        let digests = sm.mft_digests();
        let delta = sm.take_mcast_tree_delta();
        let whole = whole || self.sa_trees_lost;
        let trees = whole.then(|| sm.mcast_trees());
        if self.sa_mft_digests.as_deref() != Some(&digests) {
            let records = digests
                .iter()
                .map(|&(g, digest)| Arc::from(&MftDigestRecord { switch_guid: g.0, digest }.to_bytes()[..]))
                .collect();
            // Not handed over (the SA queue is full): offered again next
            // time, whether or not they change meanwhile.
            if self.sa.offer(sa_task::SaInput::Published(SyncTable::MftDigests, records)) {
                self.sa_mft_digests = Some(Arc::new(digests));
            }
        }
        let record = |&(mlid, g, parent_port): &TreeEntry| -> Arc<[u8]> {
            Arc::from(&McastTreeRecord { mlid, switch_guid: g.0, parent_port }.to_bytes()[..])
        };
        let input = match trees {
            Some(all) => sa_task::SaInput::Published(SyncTable::McastTrees, all.iter().map(record).collect()),
            None if delta.is_empty() => return,
            None => sa_task::SaInput::PublishedChanges(
                SyncTable::McastTrees,
                delta.removed.iter().map(record).collect(),
                delta.added.iter().map(record).collect(),
            ),
        };
        // A change lost would leave the standbys' copy wrong for good: the
        // whole table goes next time instead.
        self.sa_trees_lost = !self.sa.offer(input);
    }

    /// At a takeover with a current copy: the old master's MFT digests
    /// and multicast trees, as the state stream copied them, so that its
    /// trees are rebuilt where they were and switches left as they were
    /// are written without reading their blocks first. With a stale copy
    /// none is taken: the old master may have written since.
    pub(super) fn adopt_old_masters_mcast(
        &self,
        sm: &mut crate::program::SubnetManager<crate::transport::SmpClient<T>>,
        mode: MasterMode,
    ) {
        let copied = |table| if mode == MasterMode::Takeover { self.sa.copy_records(table) } else { Vec::new() };
        let digests: Vec<(Guid, u64)> = copied(SyncTable::MftDigests)
            .iter()
            .filter_map(|r| MftDigestRecord::parse(r).ok())
            .map(|d| (Guid(d.switch_guid), d.digest))
            .collect();
        // One per switch, and per switch of a tree: a copy caught between
        // a remove and an add of one keeps neither.
        let digests = unique_by_key(digests, |d| d.0);
        let trees: Vec<TreeEntry> = copied(SyncTable::McastTrees)
            .iter()
            .filter_map(|r| McastTreeRecord::parse(r).ok())
            .map(|r| (r.mlid, Guid(r.switch_guid), r.parent_port))
            .collect();
        let trees = unique_by_key(trees, |t| (t.0, t.1));
        if !digests.is_empty() || !trees.is_empty() {
            info!(
                switches = digests.len(),
                tree_switches = trees.len(),
                "takeover: the old master's MFT digests and multicast trees adopted from the state stream"
            );
        }
        sm.vouch_mfts(digests, trees);
    }

    /// At a takeover: the old master's guid2lid, as the state stream
    /// copied it, over this SM's own, so a port away now comes back to the
    /// LID the old master gave it.
    pub(super) fn adopt_old_masters_lids(
        &self,
        sm: &mut crate::program::SubnetManager<crate::transport::SmpClient<T>>,
    ) {
        let copied = self.sa.copy_records(SyncTable::Lids);
        if copied.is_empty() {
            return;
        }
        let mut entries: Vec<_> = copied
            .iter()
            .filter_map(|r| LidMapRecord::parse(r).ok())
            .filter_map(|l| {
                let range = crate::lid::LidRange::new(crate::types::Lid(l.base_lid), l.lmc).ok()?;
                Some((Guid(l.port_guid), range))
            })
            .collect();
        // In GUID order, as the copy held them before it was a record set.
        entries.sort_unstable_by_key(|&(g, _)| g);
        let changed = sm.adopt_guid2lid(&entries);
        info!(entries = entries.len(), changed, "takeover: the old master's guid2lid adopted from the state stream");
    }

    /// How a takeover programs: without ClientReregister when the SA's
    /// copy of the old master's state was current when this SM became
    /// master (within one detection of a dead master, plus two Beats),
    /// with it otherwise, so clients join and register again.
    pub(super) fn takeover_mode(&self) -> MasterMode {
        let sm = &self.config.sm;
        let detection = Duration::from_millis(sm.sminfo_polling_timeout_ms) * (sm.polling_retry_number + 1);
        let limit = detection + 2 * crate::sa::sync::BEAT + Duration::from_secs(1);
        let since = self.master_since.unwrap_or_else(tokio::time::Instant::now);
        match self.sa.copy_current_as_of() {
            Some(at) if since.saturating_duration_since(at) <= limit => {
                info!(
                    copy_age_ms = since.saturating_duration_since(at).as_millis() as u64,
                    "taking over with a current copy of the old master's SA state: no ClientReregister"
                );
                MasterMode::Takeover
            }
            Some(at) => {
                warn!(
                    copy_age_s = since.saturating_duration_since(at).as_secs_f64(),
                    limit_s = limit.as_secs_f64(),
                    "taking over with a stale copy of the old master's SA state: every end port gets \
                     ClientReregister, so clients join and register again"
                );
                MasterMode::TakeoverReregister
            }
            None => {
                warn!(
                    "taking over with no copy of the old master's SA state from the state stream (the old \
                     master is not ibsm, [sa] state_sync is off, or the stream never caught up): every end port \
                     gets ClientReregister, so clients join and register again"
                );
                MasterMode::TakeoverReregister
            }
        }
    }

    /// Our SMInfo, key included: the SA shows the key to trusted
    /// requesters only.
    pub(super) fn tell_sa_sm_info(&mut self) {
        let info = self.election.sm_info(true);
        self.hand_to_sa(sa_task::SaInput::SmInfo(info));
    }

    /// What the SA may answer (IBA C15-0.1.3: only the master SM's SA, and
    /// only once its first sweep is done).
    pub(super) fn sa_serving(&self) -> crate::sa::Serving {
        use crate::sa::Serving;
        match (self.election.state(), self.master_swept) {
            (State::Master, true) => Serving::Master,
            (State::Master, false) => Serving::MasterNotSwept,
            _ => Serving::NotMaster,
        }
    }

    /// Hands an SA-class MAD (or a trap) to the SA task; a full queue drops
    /// it, counted, with one log line per 10 s.
    pub(super) fn hand_to_sa(&mut self, input: sa_task::SaInput) {
        if self.sa.offer(input) {
            return;
        }
        if let Some(m) = &self.options.metrics {
            m.refused(u8::from(crate::mad::MgmtClass::SubnAdm));
        }
        let now = self.now();
        if self.sa_drop_logged.is_none_or(|at| now.saturating_sub(at) >= Duration::from_secs(10)) {
            self.sa_drop_logged = Some(now);
            warn!(dropped = self.sa.dropped, queue = sa_task::SA_QUEUE, "SA queue full: SA MADs dropped");
        }
    }

    /// The SA's alias GUIDs changed: a master that programmed the fabric
    /// writes them now, without a sweep (as OpenSM's SA asks its state
    /// manager for just those GUIDInfo Sets). A heavy sweep already queued
    /// reads the table itself.
    pub(super) fn on_aliases_changed(&mut self) {
        let queued = self.queue.iter().any(|w| !matches!(w, SweepWork::Light));
        if self.master_swept && !queued {
            self.queue.push_back(SweepWork::Aliases);
        }
    }

    /// The SA's multicast groups changed: a master that programmed the
    /// fabric routes them and writes the MFTs now, without a sweep. One
    /// pass queued at a time: it reads the newest table when it runs.
    pub(super) fn on_mcast_changed(&mut self) {
        let queued = self.queue.iter().any(|w| !matches!(w, SweepWork::Light | SweepWork::Aliases));
        if self.master_swept && !queued {
            self.queue.push_back(SweepWork::Multicast);
        }
    }
}
