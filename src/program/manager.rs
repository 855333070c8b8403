//! The glue of programming: [`SubnetManager`] keeps what outlives a sweep
//! (guid2lid and its file, what it wrote, the SA's alias and multicast
//! sources, the partitions file) and runs a heavy sweep: discovery through
//! its driver, the plan from [`super::planner`], the Sets through
//! [`super::sets`] and multicast through [`super::mcast`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::sets::{self, LftCache, Plan};
use super::{guids, mcast, partitions, planner, routes, SweepError};
use crate::config::SmConfig;
use crate::lid::{Guid2Lid, LidRange};
use crate::subnet::{ChangeKind, ChangeSet, Suspect, SweepKind, Trigger};
use crate::subnet::{MasterMode, McastReport, NodeId, ProgramReport, Subnet, SweepReport, SweptRoutes};
use crate::sweep::core::SmpDriver;
use crate::sweep::discovery;
use crate::sweep::light::{self, LightFinding, LightSweep};
use crate::sweep::react;

/// Changes a reaction logs one by one; the rest are counted.
const CHANGE_LINES: usize = 20;

/// How a reaction ended.
#[derive(Debug)]
pub enum Reaction {
    /// The change set was bounded and the subnet programmed as it stands.
    Programmed(Box<SweepReport>),
    /// It was not (`ChangeSet::unbounded` says why): sweep the fabric whole.
    Unbounded(ChangeSet),
    /// The suspects hold what the SM knew: nothing was programmed (a trap
    /// repeated, or one that changed nothing routes depend on).
    Unchanged(ChangeSet),
}
use crate::types::{Guid, Lid};

/// What discovery found, waiting for the election to decide whether this SM
/// takes charge of it ([`SubnetManager::take_charge`]) or stays standby.
#[derive(Debug)]
pub struct Discovered {
    pub subnet: Subnet,
    /// When discovery started: a sweep's time runs from there.
    started: Instant,
}

impl Discovered {
    /// How long ago discovery started.
    pub fn age(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The SM's state that outlives a sweep.
pub struct SubnetManager<D: SmpDriver> {
    /// Sends this SM's SMPs (the runtime's `SmpClient` over a transport).
    driver: D,
    config: SmConfig,
    guid2lid: Guid2Lid,
    guid2lid_path: Option<PathBuf>,
    lft_cache: LftCache,
    sweeps: u64,
    /// Switches of the last heavy sweep, for light sweeps: GUID and path.
    known_switches: Vec<(Guid, crate::mad::DrPath)>,
    /// The SL of every route when the engine uses VLs (for PathRecords),
    /// with the sweep node of each source switch index.
    path_sl: Option<(ibsm_routing::lft::PathSl, Vec<NodeId>)>,
    /// Node GUIDs of the routing view's switches, by index.
    routed_switch_guids: Vec<Guid>,
    qos: crate::config::QosConfig,
    /// Presented in SMInfo Gets to other SMs (IBA 14.4.1.1).
    sm_key: u64,
    /// What the last sweep knew (after programming, when it programmed):
    /// discovery answers reads that get lost from it.
    known: Option<Subnet>,
    /// The SA's alias GUIDs.
    aliases: Option<guids::AliasSource>,
    /// The last master sweep was a takeover.
    took_over: bool,
    /// The P_Keys every port should hold; `None`: the default P_Key only.
    partitions: Option<Arc<crate::partition::PartitionSet>>,
    /// Where switches enforce partitions.
    part_enforce: crate::partition::PartEnforce,
    /// partitions.conf: when set, every heavy sweep resolves `partitions`
    /// from it.
    partition_source: Option<partitions::PartitionSource>,
    /// Multicast trees and what the switches' MFTs hold.
    mcast: mcast::McastState,
    /// The SA's groups.
    mcast_source: Option<mcast::McastSource>,
    /// Ends of the cables held down for flapping ([`Self::hold_cables`]).
    held_cables: Vec<crate::subnet::flaps::CableEnd>,
    /// The forwarding tables of the last sweep that programmed, by switch
    /// GUID: what the switches hold where the cache says this SM wrote
    /// them, so the next changes can be ordered (`super::lft_order`).
    routed_lfts: std::collections::HashMap<Guid, Arc<Vec<u8>>>,
    /// The tables the switches held when this SM took charge, kept because
    /// they were complete and safe though the configured engines route
    /// otherwise (another SM's, or this SM's under another config). A
    /// reaction keeps every route of them its change leaves whole, and
    /// returns to them as cables come back, rather than replace them all
    /// on the first change that adds something. `None` once a heavy sweep
    /// routed afresh, or the engines' routes took over whole.
    kept_from_takeover: Option<std::collections::HashMap<Guid, Arc<Vec<u8>>>>,
    /// The routing run `routed_lfts` came from.
    routed_by: crate::subnet::RoutingRun,
    /// The last full engine runs' own tables and the fabrics they were for.
    /// The last two, newest first: a fabric that lost a part its tables
    /// could not be repaired around is rebalanced by a full run of its
    /// own, and the part's return still finds the run from before.
    last_runs: Vec<routes::LastRun>,
}

impl<D: SmpDriver> SubnetManager<D> {
    /// Loads guid2lid from `config.cache_dir` (a missing or corrupt file is
    /// a warning, never fatal: ports keep the LIDs they hold).
    /// `driver` must present `config.m_key` in its SMPs (the runtime's
    /// `SubnetManager::new` builds one that does).
    pub fn with_driver(driver: D, config: SmConfig, persist: bool) -> Self {
        let guid2lid_path = persist.then(|| config.cache_dir.join("guid2lid"));
        let mut guid2lid = Guid2Lid::new();
        if let Some(path) = &guid2lid_path {
            match Guid2Lid::read(path) {
                Ok((map, warnings)) => {
                    for w in warnings {
                        warn!(%w, "guid2lid line skipped");
                    }
                    info!(path = %path.display(), entries = map.len(), "loaded guid2lid");
                    guid2lid = map;
                }
                Err(e) if e.is_not_found() => info!(path = %path.display(), "no guid2lid yet"),
                Err(e) => warn!(error = %e, "guid2lid unreadable; assigning afresh, keeping the LIDs ports hold"),
            }
        }
        let part_enforce = config.part_enforce;
        SubnetManager {
            driver,
            config,
            guid2lid,
            guid2lid_path,
            lft_cache: LftCache::default(),
            sweeps: 0,
            known_switches: Vec::new(),
            path_sl: None,
            routed_switch_guids: Vec::new(),
            qos: crate::config::QosConfig::default(),
            sm_key: 0,
            known: None,
            aliases: None,
            took_over: false,
            partitions: None,
            part_enforce,
            partition_source: None,
            mcast: mcast::McastState::default(),
            mcast_source: None,
            held_cables: Vec::new(),
            routed_lfts: std::collections::HashMap::new(),
            kept_from_takeover: None,
            routed_by: crate::subnet::RoutingRun::default(),
            last_runs: Vec::new(),
        }
    }

    /// The SM_Key discovery presents when it reads other SMs' SMInfo; an SM
    /// shows its own SM_Key only to a requester with the same one.
    pub fn set_sm_key(&mut self, sm_key: u64) {
        self.sm_key = sm_key;
    }

    /// Where the SA publishes its alias GUIDs; every heavy sweep and
    /// [`Self::program_aliases`] program them into the ports ([`guids`]).
    /// Without a source no GUIDInfo is written.
    pub fn set_alias_source(&mut self, source: guids::AliasSource) {
        self.aliases = Some(source);
    }

    /// The SA's alias table as it stands now.
    fn alias_table(&self) -> Arc<guids::AliasTable> {
        self.aliases.as_ref().map(|rx| rx.borrow().clone()).unwrap_or_default()
    }

    /// Writes the GUIDInfo blocks whose alias GUIDs changed since they were
    /// last written, on the fabric as the last master sweep left it (no
    /// discovery: a Set of the SA's reaches its port in a round trip, not a
    /// sweep). `None` before this SM programmed the fabric. Ports gone since
    /// then fail their Set (counted) and are dropped by the next sweep.
    /// After a takeover, blocks this SM has not written are read first (the
    /// SA's takeover import arrives after the takeover sweep, and the old
    /// master wrote those aliases already).
    pub async fn program_aliases(&mut self) -> Option<ProgramReport> {
        if self.sweeps == 0 {
            return None;
        }
        let mut subnet = self.known.take()?;
        let table = self.alias_table();
        let plan = Plan {
            guid_info: guids::wanted_blocks(&subnet, &table, &self.lft_cache.guid_info),
            read_before_write: self.took_over,
            ..Plan::default()
        };
        let report = sets::program_aliases(&self.driver, &mut subnet, &plan, &self.config, &mut self.lft_cache).await;
        // What the last sweep knew stays free of this pass's findings.
        for p in std::mem::take(&mut subnet.problems) {
            warn!(problem = %p, "alias GUID programming");
        }
        self.known = Some(subnet);
        Some(report)
    }

    /// The partitions the next sweeps program into the P_Key tables
    /// ([`pkeys`]); `None`: every end port keeps its keys and gets the
    /// default P_Key where it lacks it.
    pub fn set_partitions(&mut self, partitions: Option<Arc<crate::partition::PartitionSet>>) {
        self.partitions = partitions;
    }

    /// Reads `sm.partition_config_file` (a missing file is the no-file
    /// default); from now on every heavy sweep re-reads it and resolves the
    /// partitions for the ports it found. An error names file, line and
    /// column, and nothing is in force yet: the caller should not start.
    pub fn load_partitions(&mut self) -> Result<(), crate::partition::conf::PartitionConfError> {
        let options = crate::partition::policy::PolicyOptions {
            allow_both_pkeys: self.config.allow_both_pkeys,
            qos: self.qos.enabled,
        };
        let mut source = partitions::PartitionSource::new(self.config.partition_config_file.clone(), options);
        source.load()?;
        self.partition_source = Some(source);
        Ok(())
    }

    /// Where the SA publishes its multicast groups; every heavy sweep and
    /// [`Self::program_multicast`] route them and write the MFTs. Without
    /// a source no MFT is written.
    pub fn set_mcast_source(&mut self, source: mcast::McastSource) {
        self.mcast_source = Some(source);
    }

    fn mcast_table(&self) -> Arc<mcast::McastTable> {
        self.mcast_source.as_ref().map(|rx| rx.borrow().clone()).unwrap_or_default()
    }

    /// Routes the groups whose members changed since the last pass over
    /// the last heavy sweep's topology and writes the MFT blocks that
    /// differ (no discovery: a join reaches the switches in a few round
    /// trips). `None` before this SM programmed the fabric.
    pub async fn program_multicast(&mut self) -> Option<McastReport> {
        if self.sweeps == 0 {
            return None;
        }
        let table = self.mcast_table();
        self.mcast.membership_changed(&self.driver, table).await
    }

    /// What this SM knows its switches' MFTs hold, as digests by switch
    /// GUID ([`super::mfts::digest`]), for the standbys.
    pub fn mft_digests(&self) -> Vec<(Guid, u64)> {
        self.mcast.digests()
    }

    /// Every multicast group's tree as the standbys are told
    /// ([`mcast::TreeEntry`]), in MLID order.
    pub fn mcast_trees(&self) -> Vec<mcast::TreeEntry> {
        self.mcast.tree_entries()
    }

    /// How the multicast trees changed since this was last asked.
    pub fn take_mcast_tree_delta(&mut self) -> mcast::TreeDelta {
        self.mcast.take_tree_delta()
    }

    /// At a takeover with a current copy: the old master's MFT digests and
    /// multicast trees (`crate::sa::sync`). The groups are routed along the
    /// old master's trees; a switch whose routes then give the old
    /// master's digest is written without reading its blocks first.
    pub fn vouch_mfts(&mut self, digests: Vec<(Guid, u64)>, trees: Vec<mcast::TreeEntry>) {
        self.mcast.vouch(digests, trees);
    }

    /// Where the next sweeps have switches enforce partitions (OpenSM's
    /// `part_enforce`; default both).
    pub fn set_part_enforce(&mut self, part_enforce: crate::partition::PartEnforce) {
        self.part_enforce = part_enforce;
    }

    /// A reloaded configuration's live keys (SIGHUP), for the next heavy
    /// sweep: QoS, partition enforcement and the partitions file. A new
    /// file is read now; if it cannot be, the partitions in force and the
    /// old file stay and the error is returned.
    pub fn reconfigure(
        &mut self,
        config: &SmConfig,
        qos: &crate::config::QosConfig,
    ) -> Result<(), crate::partition::conf::PartitionConfError> {
        // The partition policy reads qos.enabled (SLs from the file or
        // none): a change of it rebuilds the source as a new path does.
        let policy_changed = self.qos.enabled != qos.enabled;
        self.qos = qos.clone();
        self.part_enforce = config.part_enforce;
        self.config.part_enforce = config.part_enforce;
        if config.partition_config_file != self.config.partition_config_file || policy_changed {
            let before = (self.config.partition_config_file.clone(), self.partition_source.take());
            self.config.partition_config_file = config.partition_config_file.clone();
            if let Err(e) = self.load_partitions() {
                (self.config.partition_config_file, self.partition_source) = before;
                return Err(e);
            }
        }
        Ok(())
    }

    /// The partitions file the SM reads (`sm.partition_config_file` as
    /// last accepted).
    pub fn partition_file(&self) -> Option<&std::path::Path> {
        self.config.partition_config_file.as_deref()
    }

    /// The ends of cables held down for flapping
    /// (`crate::subnet::flaps`): from the next sweep or reaction on, no
    /// route crosses them and their ports are left in INIT. An empty list
    /// releases them all.
    pub fn hold_cables(&mut self, ends: Vec<crate::subnet::flaps::CableEnd>) {
        self.held_cables = ends;
    }

    /// Fabric QoS tables to program (OpenSM's `qos_*`).
    pub fn with_qos(mut self, qos: crate::config::QosConfig) -> Self {
        self.qos = qos;
        self
    }

    /// What sends this SM's SMPs.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The SL the routing engine chose from `source_switch` to `dlid`; 0
    /// for engines that do not use VLs.
    pub fn path_sl(&self, source_switch: NodeId, dlid: Lid) -> u8 {
        let Some((sl, switches)) = &self.path_sl else { return 0 };
        let Some(index) = switches.iter().position(|&n| n == source_switch) else { return 0 };
        sl.sl(ibsm_routing::SwitchId(index as u32), dlid.0).unwrap_or(0)
    }

    /// The SL-to-VL table the routing engine asked for on the switch with
    /// node GUID `switch` between two of its ports, when it switches VL
    /// along paths (dor on tori).
    pub fn hop_vl_table(&self, switch: Guid, in_port: u8, out_port: u8) -> Option<[u8; 16]> {
        let (sl, _) = self.path_sl.as_ref()?;
        let index = self.routed_switch_guids.iter().position(|&g| g == switch)?;
        Some(sl.hop_vls.as_ref()?.table(ibsm_routing::SwitchId(index as u32), in_port, out_port))
    }

    /// One heavy sweep: discover, assign LIDs, route, program, activate, as
    /// the master: [`MasterMode::Fresh`] the first time this SM takes
    /// charge, [`MasterMode::Continuing`] afterwards.
    pub async fn sweep(&mut self) -> Result<SweepReport, SweepError> {
        let found = self.discover().await?;
        let mode = if self.sweeps == 0 { MasterMode::Fresh } else { MasterMode::Continuing };
        self.take_charge(found, mode).await
    }

    /// Discovery only: nodes, ports, links, and the SMInfo of every other SM
    /// port (`Subnet::remote_sms`). Sends Gets only; changes nothing.
    pub async fn discover(&mut self) -> Result<Discovered, SweepError> {
        let started = Instant::now();
        let subnet = discovery::discover(&self.driver, self.sm_key, self.known.as_ref()).await;
        if subnet.sm_port.is_none() {
            let why = subnet.problems.first().map(|p| p.to_string()).unwrap_or_else(|| "no answer".into());
            return Err(SweepError::OwnNodeUnreadable(why));
        }
        let unknown = subnet.unknown().count();
        let (stale_nodes, stale_ports) = subnet.stale_counts();
        let retries = self.driver.retries();
        // One line per discovery, whatever was lost; the reads themselves
        // are in `Subnet::missing` (and at debug level).
        let first_unknown = subnet.unknown().next().map(|m| m.to_string()).unwrap_or_default();
        info!(
            nodes = subnet.nodes.len(),
            switches = subnet.switches().count(),
            problems = subnet.problems.len(),
            other_sms = subnet.remote_sms.len(),
            missing = subnet.missing.len(),
            unknown,
            stale_nodes,
            stale_ports,
            retries,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "discovery done{}",
            if unknown > 0 { format!("; still missing, e.g. {first_unknown}") } else { String::new() }
        );
        self.remember(&subnet);
        Ok(Discovered { subnet, started })
    }

    /// The tables the switches of `subnet` hold, where this SM knows them:
    /// it computed them last sweep and its cache says it wrote (or read)
    /// them since the switch last came up.
    fn known_lfts(&self, subnet: &Subnet) -> std::collections::HashMap<NodeId, Arc<Vec<u8>>> {
        subnet
            .switches()
            .filter_map(|id| {
                let guid = subnet.node(id).guid();
                let table = self.routed_lfts.get(&guid).filter(|_| self.lft_cache.tables.contains_key(&guid))?;
                Some((id, table.clone()))
            })
            .collect()
    }

    /// Keeps what a sweep knew for the next discovery (not its findings
    /// about itself: problems, missing reads, other SMs).
    fn remember(&mut self, subnet: &Subnet) {
        self.known =
            Some(Subnet { problems: Vec::new(), missing: Vec::new(), remote_sms: Vec::new(), ..subnet.clone() });
    }

    /// The LIDs this SM keeps for every port it has assigned (guid2lid).
    pub fn guid2lid(&self) -> &Guid2Lid {
        &self.guid2lid
    }

    /// Takes another master's LID assignments over this SM's own (a
    /// takeover with the old master's copy, `crate::sa::sync`): each entry
    /// replaces this SM's entry for that GUID and any of another GUID that
    /// shares a LID with it. Returns how many entries changed; the map is
    /// saved at the next heavy sweep.
    pub fn adopt_guid2lid(&mut self, entries: &[(Guid, LidRange)]) -> usize {
        let mut changed = 0;
        for &(guid, range) in entries {
            if self.guid2lid.get(guid) == Some(range) {
                continue;
            }
            let clashing: Vec<Guid> = self.guid2lid.overlapping(range).map(|(g, _)| g).filter(|&g| g != guid).collect();
            for g in clashing {
                self.guid2lid.remove(g);
            }
            if self.guid2lid.insert(guid, range).is_ok() {
                changed += 1;
            }
        }
        changed
    }

    /// Takes `map` as the LIDs to keep, saving it to the cache directory
    /// when it changed and this SM persists LIDs (a failed save is a
    /// warning: the LIDs stay in force).
    fn keep_guid2lid(&mut self, map: &Guid2Lid) {
        if *map == self.guid2lid {
            return;
        }
        if let Some(path) = &self.guid2lid_path {
            if let Err(e) = std::fs::create_dir_all(&self.config.cache_dir)
                .map_err(|e| e.to_string())
                .and_then(|_| map.write(path).map_err(|e| e.to_string()))
            {
                warn!(path = %path.display(), error = %e, "could not save guid2lid");
            }
        }
        self.guid2lid = map.clone();
    }

    /// The rest of a heavy sweep on what `discover` found: LIDs, routes,
    /// programming and activation, as `mode` says.
    pub async fn take_charge(&mut self, found: Discovered, mode: MasterMode) -> Result<SweepReport, SweepError> {
        self.charge(found, mode, Routing::Afresh).await
    }

    /// [`Self::take_charge`], routing as `routing` says.
    async fn charge(
        &mut self,
        found: Discovered,
        mode: MasterMode,
        routing: Routing,
    ) -> Result<SweepReport, SweepError> {
        let Discovered { mut subnet, started } = found;
        let Some((sm_node, sm_port)) = subnet.sm_port else {
            return Err(SweepError::OwnNodeUnreadable("the discovered subnet lacks the SM's own port".into()));
        };
        self.sweeps += 1;
        self.took_over = mode.is_takeover();
        if mode.is_takeover() {
            // Another master may have written anything since this SM last did.
            self.lft_cache = LftCache::default();
            self.routed_lfts.clear();
            self.mcast.forget_tables();
        }
        // A switch that rebooted lost its tables: written again in full.
        self.lft_cache.forget_cold_switches(&subnet);
        let held_ports = planner::hold_cables(&mut subnet, &self.held_cables);

        // LIDs, kept in guid2lid.
        let addressed = planner::address(&subnet, (sm_node, sm_port), &self.guid2lid, &self.config, mode)?;
        self.keep_guid2lid(&addressed.lids.map);

        // Routes.
        // The engines run where they do not hold up the SA and the
        // election (the runtime's background thread, idle class); the
        // fabric view moves there and back.
        let (view, vls) = planner::routing_input(&subnet, &addressed.ranges, &self.config)?;
        // A fabric this SM did not program (a start, a takeover) may hold
        // routes that can stay: read what the switches hold first.
        let mut early_reads = crate::subnet::ProgramReport::default();
        let held = if mode == MasterMode::Continuing {
            std::collections::HashMap::new()
        } else {
            let blocks = addressed.lids.max_lid.0 as usize / 64 + 1;
            let switches = view.switch_nodes.clone();
            sets::read_lfts(&self.driver, &mut subnet, &switches, blocks, &mut early_reads, &mut self.lft_cache).await
        };
        // What the switches hold, for the entries of LIDs gone where this
        // SM knows no table of its own (see `planner::plan`).
        let read_lfts: std::collections::HashMap<NodeId, Arc<Vec<u8>>> =
            held.iter().map(|(&id, table)| (id, Arc::new(table.clone()))).collect();
        let chain = self.config.routing_engine.clone();
        let top = addressed.lids.max_lid.0 as usize;
        // The routes a reaction keeps where its change left them whole:
        // the tables kept at a takeover, while they last; else what this
        // SM routed last, where a loss alone changed the fabric.
        let kept_from_takeover = match routing {
            Routing::Reaction { .. } => self.kept_from_takeover.take(),
            Routing::Afresh => None,
        };
        let keep = match (&kept_from_takeover, routing) {
            (Some(kept), _) => Some(kept),
            (None, Routing::Reaction { after_loss: true }) => Some(&self.routed_lfts),
            _ => None,
        };
        let before: std::collections::HashMap<NodeId, Arc<Vec<u8>>> = keep
            .map(|keep| {
                view.switch_nodes
                    .iter()
                    .filter_map(|&id| Some((id, keep.get(&subnet.node(id).guid())?.clone())))
                    .collect()
            })
            .unwrap_or_default();
        // Another engine's routes, merged with this one's: checked for
        // credit loops as when they were kept, whatever this engine claims.
        let check_merge = kept_from_takeover.is_some();
        // Routes layered on VLs carry an SL per path, indexed by switch:
        // never reused without their engine.
        let last = Some(self.routed_by.clone()).filter(|_| self.path_sl.is_none());
        let mut last_runs = std::mem::take(&mut self.last_runs);
        let (view, computed, last_runs) = self
            .driver
            .compute(move || {
                let broken = routes::lids_to_repair(&view, &before);
                if let (Some(last), Some(broken)) = (&last, &broken) {
                    let kept = routes::keep_untouched(&view, &before, broken, last);
                    let kept = kept
                        .or_else(|| routes::repair_tree(&view, &before, broken, last))
                        .or_else(|| routes::repair_one_vl(&view, &before, broken, last));
                    if let Some(kept) = kept {
                        return (view, Ok(kept), last_runs);
                    }
                }
                // A fabric back in the shape one of the last two full engine
                // runs routed (a cable or a switch back) takes that run's
                // tables again.
                //
                // A loss the old tables could not be repaired around is
                // routed without the balance searches: the traffic the loss
                // cut waits on these tables (a 6x6 mesh's switch: 1 ms, not
                // 235). The runtime routes again in full once the fabric is
                // quiet; meanwhile the last full run stays remembered, so the
                // part's return brings its tables back.
                let effort = match routing {
                    Routing::Reaction { after_loss: true } if broken.is_some() => ibsm_routing::Effort::Quick,
                    _ => ibsm_routing::Effort::Full,
                };
                let print = routes::fingerprint(&view, &chain, vls);
                let fresh = match last_runs.iter().position(|r| r.fingerprint == print) {
                    Some(i) => {
                        let run = last_runs.remove(i);
                        let computed = run.computed(&view);
                        last_runs.insert(0, run);
                        Ok(computed)
                    }
                    None => {
                        let fresh = routes::compute(&view, &chain, vls, effort);
                        let run = fresh.as_ref().ok().filter(|c| !c.routing.quick);
                        if let Some(run) = run.and_then(|c| routes::LastRun::of(print, &view, c)) {
                            last_runs.insert(0, run);
                            last_runs.truncate(2);
                        }
                        fresh
                    }
                };
                let computed = fresh.map(|c| routes::keep_intact(&view, c, &before, broken.as_deref(), check_merge));
                // The engines' routes when the switches hold them already
                // (they keep their VL layering); otherwise what the
                // switches hold, if it can stay.
                let same = computed.as_ref().is_ok_and(|c| routes::tables_equal(&c.tables, &held, top));
                if !same {
                    if let Some(kept) = routes::keep_held(&view, &held) {
                        return (view, Ok(kept), last_runs);
                    }
                }
                (view, computed, last_runs)
            })
            .await;
        self.last_runs = last_runs;
        let computed = computed?;
        // Kept whole at a start or a takeover: what later reactions keep.
        // Merged into a reaction's routes: kept while any of it stands.
        let kept_whole = computed.routing.kept;
        self.kept_from_takeover =
            kept_from_takeover.filter(|_| computed.routing.intact_kept > 0 || computed.routing.untouched);
        self.routed_by = computed.routing.clone();
        let routed = planner::routed(&subnet, view, computed, vls, &self.qos, &self.lft_cache.qos);
        let planner::Routed { view, tables, path_sl, notes: routing_notes, routing, qos_sets } = routed;
        self.path_sl = path_sl.map(|sl| (sl, view.switch_nodes.clone()));
        self.routed_switch_guids = view.switch_nodes.iter().map(|&n| subnet.node(n).guid()).collect();

        // Partitions: the file re-read, resolved for the ports found.
        if let Some(source) = &mut self.partition_source {
            self.partitions = Some(source.resolve(&subnet));
        }

        // Programming. Alias GUIDs: ports whose link came up anew lost
        // what this SM wrote (judged on the subnet as discovered).
        guids::forget_reset_ports(&subnet, &mut self.lft_cache.guid_info);
        let guid_info = guids::wanted_blocks(&subnet, &self.alias_table(), &self.lft_cache.guid_info);
        let desired = planner::Desired {
            tables,
            qos_sets,
            guid_info,
            partitions: self.partitions.clone(),
            part_enforce: self.part_enforce,
            held_ports,
            held_lfts: self.known_lfts(&subnet),
            read_lfts,
        };
        let plan = planner::plan(&subnet, &addressed, desired, &self.qos, mode);
        let lids = addressed.lids;
        let mut program = sets::program(&self.driver, &mut subnet, &plan, &self.config, &mut self.lft_cache).await;
        program.lft_reads += early_reads.lft_reads;
        program.failures += early_reads.failures;
        // Multicast last: trees over the topology just programmed.
        let mcast_table = self.mcast_table();
        let mcast = self.mcast.after_sweep(&self.driver, &subnet, view, mcast_table).await;
        for p in &mcast.problems {
            warn!(problem = %p, "multicast");
        }
        // What the ports answered to the Sets is the newest knowledge.
        self.remember(&subnet);
        self.known_switches = subnet
            .switches()
            .filter(|&id| subnet.node(id).quarantined.is_none())
            .map(|id| (subnet.node(id).guid(), subnet.node(id).path))
            .collect();
        // Other SMs' ports may have just got their LIDs.
        let lids_now: Vec<Option<Lid>> = subnet.remote_sms.iter().map(|r| subnet.current_lid(r.node, r.port)).collect();
        for (remote, lid) in subnet.remote_sms.iter_mut().zip(lids_now) {
            remote.lid = lid.unwrap_or(remote.lid);
        }
        let inactive = planner::inactive_ports(&subnet);
        let lfts: std::collections::HashMap<Guid, Arc<Vec<u8>>> =
            plan.lfts.into_iter().map(|(id, t)| (subnet.node(id).guid(), Arc::new(t))).collect();
        self.routed_lfts = lfts.clone();
        if kept_whole {
            self.kept_from_takeover = Some(lfts.clone());
        }
        let routes = SweptRoutes {
            lfts,
            path_sl: self.path_sl.as_ref().map(|(sl, _)| sl.clone()),
            switches: self.routed_switch_guids.clone(),
            qos: plan.qos,
        };
        let report = SweepReport {
            mode,
            kind: crate::subnet::SweepKind::Heavy,
            subnet,
            lids,
            program,
            inactive,
            routing_notes,
            routing,
            routes,
            partitions: plan.partitions.clone(),
            mcast,
            mcast_tables: self.mcast.tables(),
            elapsed: started.elapsed(),
        };
        info!(
            up = report.subnet_up(),
            inactive = report.inactive.len(),
            ?mode,
            sets = report.program.sets(),
            changing_sets = report.program.changing_sets(),
            port_sets = report.program.port_sets,
            lft_blocks = report.program.lft_blocks,
            lft_reads = report.program.lft_reads,
            guid_info_sets = report.program.guid_info_sets,
            pkey_sets = report.program.pkey_sets,
            mcast_groups = report.mcast.groups,
            mft_sets = report.mcast.mft_sets,
            engine = report.routing.engine_name(),
            routing_ms = report.routing.elapsed.as_millis() as u64,
            resent = report.program.resent,
            failures = report.program.failures,
            elapsed_ms = report.elapsed.as_millis() as u64,
            "sweep done"
        );
        Ok(report)
    }
}

impl<D: SmpDriver> SubnetManager<D> {
    /// A light sweep (what OpenSM does between heavy ones): SwitchInfo from
    /// every switch of the last heavy sweep: which switches report a port
    /// state change, or why a heavy sweep is needed. A fabric without
    /// switches is always swept whole (it is two ports).
    pub async fn light_sweep(&self) -> LightSweep {
        let heavy = |finding| LightSweep { finding: Some(finding), needs_heavy: true, ..LightSweep::default() };
        if self.sweeps == 0 {
            return heavy(LightFinding::NoHeavySweepYet);
        }
        if self.known_switches.is_empty() {
            return heavy(LightFinding::NoSwitches);
        }
        light::light_sweep(&self.driver, &self.known_switches).await
    }

    /// A reaction to a change (a trap, a light sweep's finding): reads
    /// what `suspects` name and what their changes touch
    /// ([`crate::sweep::react`]), and when the change set is bounded
    /// programs the subnet as it stands now, as a master's sweep does:
    /// routes recomputed, and only the Sets that change something sent.
    /// When it cannot be bounded nothing is written, and the caller sweeps
    /// the fabric whole.
    pub async fn react(&mut self, trigger: Trigger, suspects: &[Suspect]) -> Result<Reaction, SweepError> {
        let started = Instant::now();
        let Some(known) = self.known.as_ref().filter(|_| self.sweeps > 0) else {
            let changes = ChangeSet { unbounded: Some("no heavy sweep yet".into()), ..ChangeSet::default() };
            return Ok(Reaction::Unbounded(changes));
        };
        let (subnet, changes) = react::react(&self.driver, known, suspects).await;
        if changes.unbounded.is_some() || subnet.sm_port.is_none() {
            let mut changes = changes;
            changes.unbounded.get_or_insert_with(|| "the SM's own port is unreachable".into());
            return Ok(Reaction::Unbounded(changes));
        }
        // Nothing to route or write: spurious or repeated traps cost their
        // reads, never a routing run. A hold that starts changes what is
        // routed though the fabric did not (a cable that bounced back up
        // between two looks is taken out now).
        if changes.changes.is_empty() && !matches!(trigger, Trigger::FlapDamping | Trigger::Rebalance) {
            return Ok(Reaction::Unchanged(changes));
        }
        for c in changes.changes.iter().take(CHANGE_LINES) {
            info!(change = %c, %trigger, "fabric change");
        }
        // Every one: a node where another cable had it is an operator's
        // doing, or a spoof.
        for c in changes.changes.iter().filter(|c| c.kind == ChangeKind::Moved) {
            warn!(change = %c, %trigger, "known node found behind another port");
        }
        if changes.changes.len() > CHANGE_LINES {
            info!(more = changes.changes.len() - CHANGE_LINES, "more fabric changes, not logged one by one");
        }
        // A loss alone moves only the routes that crossed it; anything new
        // (a cable up, a node, a move) is routed afresh, so that routes
        // spread over it again (but for routes kept at a takeover).
        let after_loss = trigger != Trigger::Rebalance
            && !changes
                .changes
                .iter()
                .any(|c| matches!(c.kind, ChangeKind::LinkUp | ChangeKind::NodeNew | ChangeKind::Moved));
        let routing = Routing::Reaction { after_loss };
        let mut report = self.charge(Discovered { subnet, started }, MasterMode::Continuing, routing).await?;
        info!(
            %trigger,
            changes = %changes.summary(),
            reads = changes.reads,
            vouched = changes.vouched,
            sets = report.program.sets(),
            lft_blocks = report.program.lft_blocks,
            routes_kept = report.routing.intact_kept,
            routed_quickly = report.routing.quick,
            elapsed_ms = report.elapsed.as_millis() as u64,
            "reaction done"
        );
        report.kind = SweepKind::Reaction { trigger, changes };
        Ok(Reaction::Programmed(Box::new(report)))
    }
}

/// How a sweep's routing run treats the routes before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Routing {
    /// A heavy sweep: the engines' routes, or on a start or a takeover what
    /// the switches hold, if it can stay.
    Afresh,
    /// A reaction: routes kept at a takeover stay where its change left
    /// them whole; else, after a loss alone (`after_loss`: nothing added),
    /// the routes this SM routed last do.
    Reaction { after_loss: bool },
}
