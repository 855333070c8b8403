//! Multicast forwarding: the SA's groups, routed as one tree each over the
//! last sweep's topology (`ibsm_routing::mcast`) and written into the
//! switches' MulticastForwardingTables ([`super::mfts`]).
//!
//! The SA task publishes [`McastTable`] whenever membership changes; the
//! runtime then asks the SubnetManager for a multicast pass (no sweep), and
//! every heavy sweep routes all groups again over what it found.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ibsm_routing::fabric::{EndPortId, SwitchId};
use ibsm_routing::mcast::{McastGroup, McastMember, McastRoutes, PortSet, TreeHint};

use super::mfts::{mft_sets, wanted_blocks, MftKey, MftMemo, MftSet, MftSets};
use super::routes::RoutingView;
use crate::exchange::SmpError;
use crate::mad::{AttributeId, CapabilityMask, DrPath, MftBlockRepr, PortState, SmpAttribute, SwitchInfoRepr};
use crate::subnet::McastReport;
use crate::subnet::Subnet;
use crate::sweep::core::SmpDriver;
use crate::sweep::core::{SmpCore, SmpRequest};
use crate::types::{Guid, Lid};

/// The multicast groups to route: for every MLID, the ports of its members
/// (every JoinState: a send-only member's packets enter the tree at its
/// port, so the tree must reach it too).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McastTable {
    groups: BTreeMap<u16, Vec<Guid>>,
}

/// The SA's groups as they stand: the SA task sends, the SubnetManager
/// reads at programming time, the runtime wakes on a change.
pub type McastSource = tokio::sync::watch::Receiver<Arc<McastTable>>;

impl McastTable {
    /// Adds `port` to the group at `mlid` (a unicast LID is ignored).
    pub fn insert(&mut self, mlid: Lid, port: Guid) {
        if mlid.0 < Lid::MULTICAST_MIN.0 {
            return;
        }
        let members = self.groups.entry(mlid.0).or_default();
        if let Err(at) = members.binary_search(&port) {
            members.insert(at, port);
        }
    }

    /// Every group, by MLID, with its member ports (sorted).
    pub fn groups(&self) -> impl Iterator<Item = (Lid, &[Guid])> + '_ {
        self.groups.iter().map(|(&m, ports)| (Lid(m), ports.as_slice()))
    }

    pub fn members(&self, mlid: Lid) -> &[Guid] {
        self.groups.get(&mlid.0).map_or(&[], |v| v.as_slice())
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The MLIDs whose members differ between `self` and `newer`, groups
    /// that appeared or went away included.
    pub fn changed(&self, newer: &McastTable) -> Vec<Lid> {
        let mut out: Vec<Lid> = Vec::new();
        for (&m, ports) in &newer.groups {
            if self.groups.get(&m) != Some(ports) {
                out.push(Lid(m));
            }
        }
        for &m in self.groups.keys() {
            if !newer.groups.contains_key(&m) {
                out.push(Lid(m));
            }
        }
        out.sort();
        out
    }
}

// ---------------------------------------------------------------------------
// Routing the groups and writing the tables

/// What a pass needs of a routed switch, kept from the heavy sweep that
/// built the view (the SubnetManager's subnet may be a later discovery's,
/// with other node IDs, when a sweep failed after discovering).
#[derive(Debug, Clone)]
struct SwitchAt {
    guid: Guid,
    name: String,
    path: DrPath,
    num_ports: u8,
    mcast_cap: u16,
    /// SwitchInfo as last known, when the switch honours MulticastFDBTop
    /// (port 0's CapabilityMask.IsMulticastFDBTopSupported, IBA
    /// 14.2.5.6): it then forwards no MLID above the top, which must
    /// follow the blocks in use.
    fdb_top: Option<SwitchInfoRepr>,
}

/// The multicast state that outlives a sweep: the trees over the last
/// heavy sweep's routing view, the groups they were built for, and what
/// the switches hold.
#[derive(Default)]
pub struct McastState {
    view: Option<RoutingView>,
    /// Where the view has each member port (built once per view).
    members_at: HashMap<Guid, McastMember>,
    /// The view's switches, by `SwitchId`.
    switches: Vec<SwitchAt>,
    /// Switches with SMPs that failed: every later pass revisits them
    /// until they are written.
    dirty: BTreeSet<SwitchId>,
    routes: Option<McastRoutes>,
    routed: Arc<McastTable>,
    memo: MftMemo,
    /// What the memo knows each switch holds, as [`super::mfts::digest`]s, for
    /// the switches the passes looked at: what a master streams to its
    /// standbys.
    digests: HashMap<Guid, u64>,
    /// After a takeover: the old master's digests of what its switches
    /// held. A switch the memo knows nothing of whose wanted blocks give
    /// the same digest is taken to hold them, unread (once each).
    vouched: HashMap<Guid, u64>,
    /// After a takeover: the old master's trees, by MLID, for the next
    /// routes made (`McastRoutes::hint_trees`).
    tree_hints: HashMap<u16, Vec<(Guid, u8)>>,
    /// Each group's tree as the standbys were last told (by MLID: switch
    /// GUID and port towards the root, sorted), and what changed since.
    told_trees: BTreeMap<u16, Vec<(Guid, u8)>>,
    tree_delta: TreeDelta,
}

/// One switch of a group's tree as a master tells its standbys: MLID,
/// switch GUID, the switch's port towards the root (0: it is the root).
pub type TreeEntry = (u16, Guid, u8);

/// How the trees changed since the standbys were last told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeDelta {
    pub removed: Vec<TreeEntry>,
    pub added: Vec<TreeEntry>,
}

impl TreeDelta {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty()
    }
}

impl McastState {
    /// A takeover: another master may have written any block, and its
    /// trees, not this SM's from an earlier term, are what the switches
    /// hold: the next sweep routes every group afresh.
    pub fn forget_tables(&mut self) {
        self.memo.clear();
        self.digests.clear();
        self.routes = None;
        self.told_trees.clear();
        self.tree_delta = TreeDelta::default();
    }

    /// After a takeover with a current copy of the old master's state:
    /// its digests of what each switch's MFT held, and its groups' trees
    /// (replacing any given before). The next routes build each group
    /// along the old master's tree where the members and cables allow, so
    /// that the trees are the ones the switches hold; a switch whose wanted
    /// blocks then give its digest is written without reading, any other
    /// is read first, as without them.
    pub fn vouch(&mut self, digests: Vec<(Guid, u64)>, trees: Vec<TreeEntry>) {
        self.vouched = digests.into_iter().collect();
        self.tree_hints.clear();
        for (mlid, switch, parent) in trees {
            self.tree_hints.entry(mlid).or_default().push((switch, parent));
        }
    }

    /// Every group's tree as the standbys are told, in MLID order.
    pub fn tree_entries(&self) -> Vec<TreeEntry> {
        self.told_trees.iter().flat_map(|(&mlid, v)| v.iter().map(move |&(g, p)| (mlid, g, p))).collect()
    }

    /// How the trees changed since this was last asked.
    pub fn take_tree_delta(&mut self) -> TreeDelta {
        std::mem::take(&mut self.tree_delta)
    }

    /// Brings `told_trees` up to the routes for `mlids` (every group when
    /// `None`), noting the difference in `tree_delta`. O(T log T) per
    /// group of T tree switches.
    fn track_trees(&mut self, mlids: Option<&[Lid]>) {
        let Some(routes) = &self.routes else { return };
        let switches = &self.switches;
        let now_of = |mlid: u16| -> Vec<(Guid, u8)> {
            let Some(t) = routes.tree(mlid) else { return Vec::new() };
            let mut v: Vec<(Guid, u8)> = t
                .switches
                .iter()
                .zip(&t.parent_ports)
                .filter_map(|(s, p)| Some((switches.get(s.index())?.guid, *p)))
                .collect();
            v.sort_unstable();
            v
        };
        let mlids: BTreeSet<u16> = match mlids {
            Some(m) => m.iter().map(|l| l.0).collect(),
            None => self.told_trees.keys().copied().chain(routes.trees().map(|(m, _)| m)).collect(),
        };
        for mlid in mlids {
            let new = now_of(mlid);
            let old = self.told_trees.remove(&mlid).unwrap_or_default();
            if old != new {
                let gone = old.iter().filter(|e| new.binary_search(e).is_err());
                self.tree_delta.removed.extend(gone.map(|&(g, p)| (mlid, g, p)));
                let came = new.iter().filter(|e| old.binary_search(e).is_err());
                self.tree_delta.added.extend(came.map(|&(g, p)| (mlid, g, p)));
            }
            if !new.is_empty() {
                self.told_trees.insert(mlid, new);
            }
        }
    }

    /// What this SM knows its switches' MFTs hold, as digests by switch
    /// GUID, in GUID order: switches with SMPs outstanding or failed, and
    /// those never looked at, are left out.
    pub fn digests(&self) -> Vec<(Guid, u64)> {
        let mut v: Vec<(Guid, u64)> = self.digests.iter().map(|(g, d)| (*g, *d)).collect();
        v.sort_unstable();
        v
    }

    /// Each switch's MLID -> ports, by node GUID, as routed.
    pub fn tables(&self) -> HashMap<Guid, BTreeMap<u16, PortSet>> {
        let (Some(view), Some(routes)) = (&self.view, &self.routes) else { return HashMap::new() };
        let fabric = &view.fabric;
        fabric
            .switch_ids()
            .filter(|&s| !routes.table(s).is_empty())
            .map(|s| (Guid(fabric.switch(s).guid), routes.table(s).clone()))
            .collect()
    }

    /// A heavy sweep: forgets switches gone or reset, routes every group
    /// over the new view (from scratch when the topology changed) and
    /// writes what differs.
    pub async fn after_sweep<D: SmpDriver>(
        &mut self,
        driver: &D,
        subnet: &Subnet,
        view: RoutingView,
        table: Arc<McastTable>,
    ) -> McastReport {
        self.forget_reset_switches(subnet);
        let mut report = McastReport::default();
        let fresh = !self.routes.as_ref().is_some_and(|r| r.is_for(&view.fabric));
        if fresh {
            self.routes = Some(McastRoutes::new(&view.fabric));
        }
        let routes = self.routes.as_mut().expect("set above");
        if !self.tree_hints.is_empty() {
            let fabric = &view.fabric;
            let at: HashMap<u64, SwitchId> = fabric.switch_ids().map(|s| (fabric.switch(s).guid, s)).collect();
            let hints = std::mem::take(&mut self.tree_hints).into_iter().map(|(mlid, entries)| {
                let mut hint = TreeHint::default();
                for (g, parent) in entries {
                    let Some(&s) = at.get(&g.0) else { continue };
                    if parent == 0 {
                        hint.root = Some(s);
                    } else {
                        hint.parents.push((s, parent));
                    }
                }
                (mlid, hint)
            });
            routes.hint_trees(hints);
        }
        // On a new fabric every group is routed; on the same one only the
        // groups whose members changed (their old trees are kept, and so
        // are the blocks).
        let changed: Vec<Lid> =
            if fresh { table.groups().map(|(m, _)| m).collect() } else { self.routed.changed(&table) };
        self.members_at = member_index(&view, subnet);
        self.switches = view
            .switch_nodes
            .iter()
            .map(|&id| {
                let node = subnet.node(id);
                SwitchAt {
                    guid: node.guid(),
                    name: node.name(),
                    path: node.path,
                    num_ports: node.info.num_ports,
                    mcast_cap: node.switch_info.as_ref().map_or(0, |s| s.multicast_fdb_cap),
                    fdb_top: node
                        .ports
                        .first()
                        .and_then(|p| p.info.as_ref())
                        .filter(|pi| pi.capability_mask & CapabilityMask::IS_MULTICAST_FDB_TOP_SUPPORTED != 0)
                        .and(node.switch_info),
                }
            })
            .collect();
        self.dirty.clear();
        route_changed(&view, &self.members_at, routes, &table, &changed, &mut report);
        self.view = Some(view);
        self.routed = table;
        self.track_trees(if fresh { None } else { Some(&changed) });
        // Every switch: the sweep may have found switches reset or new,
        // whose tables must be read and written whatever changed.
        self.write(driver, None, &mut report).await;
        report
    }

    /// Between sweeps: the SA's groups changed. Routes the groups that
    /// differ over the last sweep's view and writes what differs. `None`
    /// before a heavy sweep built a view.
    pub async fn membership_changed<D: SmpDriver>(
        &mut self,
        driver: &D,
        table: Arc<McastTable>,
    ) -> Option<McastReport> {
        let view = self.view.as_ref()?;
        let routes = self.routes.as_mut()?;
        let mut report = McastReport::default();
        let changed = self.routed.changed(&table);
        if changed.is_empty() && self.dirty.is_empty() {
            return Some(report);
        }
        let touched = route_changed(view, &self.members_at, routes, &table, &changed, &mut report);
        report.tables = touched
            .iter()
            .filter_map(|&id| Some((self.switches.get(id.index())?.guid, routes.table(id).clone())))
            .collect();
        self.routed = table;
        self.track_trees(Some(&changed));
        // Only the switches whose entries moved (and those a failed SMP
        // left dirty): a join on a large fabric touches a handful of its
        // thousands.
        self.write(driver, Some(&touched), &mut report).await;
        Some(report)
    }

    fn forget_reset_switches(&mut self, subnet: &Subnet) {
        let mut live: HashMap<Guid, bool> = HashMap::new();
        for id in subnet.switches() {
            let node = subnet.node(id);
            // A switch whose cabled ports were all found down or
            // initializing came up anew: its tables may be empty.
            let mut cabled = node.external_ports().filter(|&p| node.ports[p as usize].remote.is_some()).peekable();
            let reset = cabled.peek().is_some()
                && cabled.all(|p| {
                    node.ports[p as usize]
                        .info
                        .as_ref()
                        .is_none_or(|i| matches!(i.port_state, PortState::Init | PortState::Down))
                });
            live.insert(node.guid(), node.quarantined.is_none() && !reset);
        }
        let live = |g: &Guid| live.get(g).copied().unwrap_or(false);
        self.memo.retain(|g| live(&g));
        self.digests.retain(|g, _| live(g));
        self.vouched.retain(|g, _| live(g));
    }

    /// Reads what must be known, then removals everywhere, then additions
    /// (the order `mfts` explains: never a transient loop). `only`: the
    /// switches to look at besides the dirty ones (all with `None`).
    ///
    /// A failed SMP leaves its switch dirty (revisited by every later pass)
    /// and its block held back: no switch gets additions in a block where
    /// some switch's removal or read failed, since that switch may still
    /// hold the old tree's ports and an addition elsewhere could close a
    /// loop with them. Held back, the block drops packets until a later
    /// pass completes it; it never loops.
    async fn write<D: SmpDriver>(&mut self, driver: &D, only: Option<&BTreeSet<SwitchId>>, report: &mut McastReport) {
        let (Some(_), Some(routes)) = (&self.view, &self.routes) else { return };
        let mut wanted = Vec::new();
        for (i, sw) in self.switches.iter().enumerate() {
            let id = SwitchId(i as u32);
            if only.is_some_and(|o| !o.contains(&id)) && !self.dirty.contains(&id) {
                continue;
            }
            let w = wanted_blocks(routes.table(id), sw.num_ports, sw.mcast_cap);
            for p in &w.problems {
                report.problems.push(format!("switch {} ({}): {p}", sw.guid, sw.name));
            }
            if self.memo.switch(sw.guid).is_none() && self.vouched.get(&sw.guid) == Some(&w.digest()) {
                self.vouched.remove(&sw.guid);
                self.memo.adopt(sw.guid, &w);
                report.mft_vouched += 1;
            }
            wanted.push((id, sw.guid, sw.path, w));
        }
        // Every dirty switch is in `wanted` now; what fails again is
        // marked again below.
        self.dirty.clear();
        let mut held_back: BTreeSet<u16> = BTreeSet::new();
        let mut failed: BTreeSet<SwitchId> = BTreeSet::new();
        // Reads first, for every switch at once; then plan again.
        let reads: Vec<((SwitchId, Guid, MftKey), SmpRequest)> = wanted
            .iter()
            .flat_map(|(id, g, path, w)| {
                mft_sets(*g, w, &self.memo).reads.into_iter().map(move |k| {
                    let req = SmpRequest::get(*path, AttributeId::MulticastForwardingTable, k.attribute_modifier());
                    ((*id, *g, k), req)
                })
            })
            .collect();
        report.mft_reads += reads.len();
        for ((id, g, k), answer) in batch(driver, reads.into_iter()).await {
            match answer.ok().and_then(|d| MftBlockRepr::parse_data(&d).ok()) {
                Some(held) => self.memo.apply_read(g, k, &held),
                None => {
                    // Still unknown: no Set is planned for its block here.
                    report.failures += 1;
                    held_back.insert(k.block);
                    failed.insert(id);
                }
            }
        }
        let plans: Vec<(SwitchId, DrPath, MftSets)> =
            wanted.iter().map(|(id, g, path, w)| (*id, *path, mft_sets(*g, w, &self.memo))).collect();
        let removals = plans.iter().flat_map(|(id, path, p)| p.removals.iter().map(move |s| (*id, *path, *s)));
        let removals: Vec<_> = removals.collect();
        self.send(driver, removals, report, &mut held_back, &mut failed).await;
        let additions = plans
            .iter()
            .flat_map(|(id, path, p)| p.additions.iter().map(move |s| (*id, *path, *s)))
            .filter(|(id, _, s)| {
                let keep = !held_back.contains(&s.key.block);
                if !keep {
                    // Planned again (and sent) by the pass that retries.
                    failed.insert(*id);
                }
                keep
            })
            .collect::<Vec<_>>();
        let mut no_more = BTreeSet::new();
        self.send(driver, additions, report, &mut no_more, &mut failed).await;
        // The top follows the blocks now written: raised after additions,
        // lowered after removals, so no entry in use is ever above it.
        let tops: Vec<(SwitchId, DrPath, SwitchInfoRepr)> = wanted
            .iter()
            .filter(|(id, ..)| !failed.contains(id))
            .filter_map(|(id, _, path, w)| {
                let si = self.switches[id.index()].fdb_top?;
                let top = match w.blocks.keys().map(|k| k.block).max() {
                    // Block 511 ends at 0xFFFF; u32 so that sum cannot wrap.
                    Some(b) => (u32::from(Lid::MULTICAST_MIN.0) + (u32::from(b) + 1) * 32 - 1).min(0xFFFF) as u16,
                    None => Lid::MULTICAST_MIN.0 - 1,
                };
                // Writing PortStateChange as one would clear it (IBA
                // 14.2.5.4); this Set is only about the top.
                let want = SwitchInfoRepr { multicast_fdb_top: top, port_state_change: false, ..si };
                (si.multicast_fdb_top != top).then_some((*id, *path, want))
            })
            .collect();
        let requests = tops
            .into_iter()
            .map(|(id, path, si)| (id, SmpRequest::set(path, AttributeId::SwitchInfo, 0, si.to_data())));
        for (id, answer) in batch(driver, requests).await {
            match answer.ok().and_then(|d| SwitchInfoRepr::parse_data(&d).ok()) {
                Some(held) => {
                    report.fdb_top_sets += 1;
                    self.switches[id.index()].fdb_top = Some(held);
                }
                None => {
                    report.failures += 1;
                    failed.insert(id);
                }
            }
        }
        report.retry = !failed.is_empty();
        for (id, g, _, w) in &wanted {
            match self.memo.digest_of(*g, w.positions).filter(|_| !failed.contains(id)) {
                Some(d) => self.digests.insert(*g, d),
                None => self.digests.remove(g),
            };
        }
        self.dirty.extend(failed);
    }

    async fn send<D: SmpDriver>(
        &mut self,
        driver: &D,
        sets: Vec<(SwitchId, DrPath, MftSet)>,
        report: &mut McastReport,
        held_back: &mut BTreeSet<u16>,
        failed: &mut BTreeSet<SwitchId>,
    ) {
        let requests = sets.into_iter().map(|(id, path, set)| {
            let data = set.want.to_data();
            ((id, set), SmpRequest::set(path, AttributeId::MulticastForwardingTable, set.attribute_modifier(), data))
        });
        for ((id, set), answer) in batch(driver, requests).await {
            match answer.ok().and_then(|d| MftBlockRepr::parse_data(&d).ok()) {
                Some(held) => {
                    report.mft_sets += 1;
                    self.memo.apply_set(&set, &held);
                }
                None => {
                    report.failures += 1;
                    // What the switch holds is unknown: read it next time.
                    self.memo.forget(set.switch);
                    held_back.insert(set.key.block);
                    failed.insert(id);
                }
            }
        }
    }
}

/// Routes the groups in `changed` (those gone lose their trees); returns
/// the switches whose entries changed.
fn route_changed(
    view: &RoutingView,
    at: &HashMap<Guid, McastMember>,
    routes: &mut McastRoutes,
    table: &McastTable,
    changed: &[Lid],
    report: &mut McastReport,
) -> BTreeSet<SwitchId> {
    let mut touched = BTreeSet::new();
    let mut groups = Vec::new();
    for &mlid in changed {
        let ports = table.members(mlid);
        if ports.is_empty() {
            touched.extend(routes.remove_group(mlid.0));
            continue;
        }
        let mut members = Vec::with_capacity(ports.len());
        for g in ports {
            match at.get(g) {
                Some(&m) => members.push(m),
                None => report.problems.push(format!("MLID {:#06x}: member port {g} is not in the fabric", mlid.0)),
            }
        }
        if members.is_empty() {
            touched.extend(routes.remove_group(mlid.0));
            continue;
        }
        groups.push(McastGroup::new(mlid.0, members));
    }
    match routes.route_groups(&view.fabric, &groups) {
        Ok(update) => {
            touched.extend(update.touched);
            report.problems.extend(update.problems.iter().map(|p| p.to_string()));
        }
        Err(e) => report.problems.push(e.to_string()),
    }
    report.groups = routes.trees().count();
    touched
}

/// Port GUID -> where the routing view has it.
fn member_index(view: &RoutingView, subnet: &Subnet) -> HashMap<Guid, McastMember> {
    let mut at = HashMap::new();
    for (i, &(node, port)) in view.end_ports.iter().enumerate() {
        at.insert(subnet.node(node).port_guid(port), McastMember::Port(EndPortId(i as u32)));
    }
    for (i, &node) in view.switch_nodes.iter().enumerate() {
        at.insert(subnet.node(node).port_guid(0), McastMember::Switch(SwitchId(i as u32)));
    }
    at
}

/// Sends every request (the driver's window) and returns the answers.
async fn batch<D: SmpDriver, K: Send>(
    driver: &D,
    requests: impl Iterator<Item = (K, SmpRequest)> + Send,
) -> Vec<(K, Result<[u8; 64], SmpError>)> {
    let mut core = Batch { requests: requests.collect::<Vec<_>>().into_iter(), answers: Vec::new(), outstanding: 0 };
    driver.drive(&mut core).await;
    core.answers
}

struct Batch<K> {
    requests: std::vec::IntoIter<(K, SmpRequest)>,
    answers: Vec<(K, Result<[u8; 64], SmpError>)>,
    outstanding: usize,
}

impl<K> SmpCore for Batch<K> {
    type Token = K;
    fn poll_request(&mut self) -> Option<(K, SmpRequest)> {
        let next = self.requests.next()?;
        self.outstanding += 1;
        Some(next)
    }
    fn handle_answer(&mut self, token: K, answer: Result<[u8; 64], SmpError>) {
        self.outstanding -= 1;
        self.answers.push((token, answer));
    }
    fn is_done(&self) -> bool {
        self.requests.len() == 0 && self.outstanding == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_keeps_members_sorted_and_unique() {
        let mut t = McastTable::default();
        t.insert(Lid(0xC000), Guid(3));
        t.insert(Lid(0xC000), Guid(1));
        t.insert(Lid(0xC000), Guid(3));
        t.insert(Lid(0x0005), Guid(9));
        assert_eq!(t.members(Lid(0xC000)), &[Guid(1), Guid(3)]);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn changed_names_new_gone_and_different_groups() {
        let mut old = McastTable::default();
        old.insert(Lid(0xC000), Guid(1));
        old.insert(Lid(0xC001), Guid(1));
        old.insert(Lid(0xC002), Guid(1));
        let mut new = old.clone();
        new.insert(Lid(0xC001), Guid(2));
        new.groups.remove(&0xC002);
        new.insert(Lid(0xC003), Guid(4));
        assert_eq!(old.changed(&new), vec![Lid(0xC001), Lid(0xC002), Lid(0xC003)]);
        assert!(old.changed(&old).is_empty());
    }
}
