//! The owner task's state: everything it owns, and how `run` builds it
//! (the SubnetManager, the SA's and the performance manager's tasks, the
//! channels between them).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use super::dispatch::Refusal;
use super::perfmgr_task::{spawn_perfmgr, AbortOnDrop, StandbyPorts, PERF_MASTER, PERF_OFF, PERF_STANDBY};
use super::{sa_task, RunError, RunOptions};
use crate::config::Config;
use crate::election::{Election, State};
use crate::program::{Discovered, SubnetManager};
use crate::transport::{SmpClient, Transport};

/// Everything the owner task owns.
pub(super) struct Owner<T: Transport + Clone> {
    pub(super) election: Election,
    /// `None` while the sweep slot's job holds it.
    pub(super) sm: Option<SubnetManager<SmpClient<T>>>,
    pub(super) client: SmpClient<T>,
    pub(super) transport: T,
    pub(super) config: Config,
    pub(super) options: RunOptions,
    pub(super) started: tokio::time::Instant,
    pub(super) queue: VecDeque<SweepWork>,
    pub(super) discovered: Option<Discovered>,
    /// A master sweep ran before: later ones are `Continuing`.
    pub(super) took_charge: bool,
    /// The last published snapshot (its report is what `run` returns).
    pub(super) last: Option<Arc<crate::subnet::Snapshot>>,
    pub(super) was_up: bool,
    pub(super) next_sweep: Option<Duration>,
    pub(super) attempts: u32,
    pub(super) refused: BTreeMap<Refusal, u64>,
    /// Snapshots published so far.
    pub(super) published: u64,
    /// Problems the last discovery logged (programming's follow them).
    pub(super) discovery_problems: usize,
    /// Remote-SM read failures already logged (each once).
    pub(super) logged_remote: HashSet<(crate::types::Guid, String)>,
    /// The SA's task; it answers only while `master_swept`.
    pub(super) sa: sa_task::SaHandle,
    /// MASTER, and a master sweep has published a snapshot since.
    pub(super) master_swept: bool,
    /// When the last "SA queue full" line was logged.
    pub(super) sa_drop_logged: Option<Duration>,
    /// The master the SA was last told of (`tell_sa_master`).
    pub(super) sa_master: Option<crate::types::Lid>,
    /// The guid2lid the SA was last told of (`tell_sa_lids`).
    pub(super) sa_lids: Option<Vec<crate::mad::sm_sync::LidMapRecord>>,
    /// The MFT digests the SA was last told of (`tell_sa_mcast`).
    pub(super) sa_mft_digests: Option<std::sync::Arc<Vec<(crate::types::Guid, u64)>>>,
    /// A change of the multicast trees found the SA's queue full: the
    /// whole table goes next.
    pub(super) sa_trees_lost: bool,
    /// SMs the SA was told of (`tell_sa_peer`).
    pub(super) sa_peers: std::collections::HashSet<crate::types::Guid>,
    /// When this SM last became master (a takeover's copy must be
    /// current as of then).
    pub(super) master_since: Option<tokio::time::Instant>,
    /// When to run a multicast pass again after one whose SMPs failed.
    pub(super) mcast_retry: Option<Duration>,
    pub(super) mirror: MirrorReads,
    /// When the owner next stamps the `/healthz` heartbeat (it also
    /// stamps it on every turn of its loop).
    pub(super) next_heartbeat: Duration,
    /// Whether the performance manager polls now: as master, or as standby
    /// with `perfmgr.on_standby`.
    pub(super) perf_active: Arc<std::sync::atomic::AtomicU8>,
    /// What a standby's performance manager polls: the ports its own
    /// discovery found (a standby publishes no snapshots).
    pub(super) standby_ports: StandbyPorts,
    /// The performance manager's configuration; a reload publishes here.
    pub(super) perf_config: tokio::sync::watch::Sender<crate::perfmgr::PerfMgrConfig>,
    /// A SIGHUP changed keys the SubnetManager holds; applied when it is
    /// home.
    pub(super) reconfigure_pending: bool,
    /// systemd has had READY=1 (a reload ends with another).
    pub(super) told_ready: bool,
    /// LID -> node, for log lines, built once per snapshot (its sequence).
    pub(super) lid_names: std::cell::RefCell<Option<(u64, super::inbound::LidIndex)>>,
    /// Trap lines logged in the current second (its start, the count): a
    /// storm is logged as a count, not line by line.
    pub(super) traps_logged: (Duration, u32),
    /// Where the queued reaction looks ([`SweepWork::React`]): traps and
    /// light sweep findings that come while it waits join it, so a burst
    /// is one change set.
    pub(super) pending_react: Option<(crate::subnet::Trigger, std::collections::BTreeSet<crate::subnet::Suspect>)>,
    /// A trap burst being gathered: when its first trap came, and when the
    /// reaction is queued unless another trap comes first.
    pub(super) react_due: Option<(Duration, Duration)>,
    /// A reaction routed quickly around a loss: the next light sweep that
    /// finds the fabric quiet routes it again in full.
    pub(super) rebalance_wanted: bool,
    /// Cables that bounce too often, held down (`sm.flap_*`).
    pub(super) flaps: crate::subnet::flaps::FlapDamper,
    /// Traps the I/O thread's rate limit dropped, by source, as last
    /// logged, and when.
    pub(super) trap_drops: std::collections::BTreeMap<crate::types::Lid, u64>,
    pub(super) drops_logged: Duration,
}

/// The flap damping policy of `sm`'s keys.
pub(super) fn flap_policy(sm: &crate::config::SmConfig) -> crate::subnet::flaps::FlapPolicy {
    crate::subnet::flaps::FlapPolicy {
        downs: sm.flap_downs,
        window: Duration::from_secs(sm.flap_window_s),
        hold: Duration::from_secs(sm.flap_hold_s),
    }
}

/// A trap's reaction waits this long after the last trap for more of the
/// same burst: one change set, not one reaction per trap against a subnet
/// only partly told. The wait restarts with every trap, so a burst of any
/// length coalesces as long as its traps come closer than this. On ibsim a
/// whole switch's neighbours trap within 0.5 ms and a cable's two ends
/// within 0.1 ms; at 10 ms the wait was half of a cable-down reaction's
/// 20 ms, and at 3 ms (4-5 with the timer's millisecond ticks) still a
/// third of 13 ms. A trap that comes later still gets its own reaction,
/// which reads only what it names.
pub(super) const TRAP_SETTLE: Duration = Duration::from_millis(1);
/// ... but never longer than this after the burst's first trap.
pub(super) const TRAP_SETTLE_MAX: Duration = Duration::from_millis(100);

/// What `Owner::start` sets up besides the owner: the SA's change feeds,
/// which the loop waits on, and the performance manager's task, which ends
/// when `run` drops it.
pub(super) struct Started<T: Transport + Clone> {
    pub(super) owner: Owner<T>,
    /// The SA's alias GUIDs.
    pub(super) alias_changes: crate::program::guids::AliasSource,
    /// The SA's multicast groups.
    pub(super) mcast_changes: crate::program::mcast::McastSource,
    pub(super) perfmgr: Option<AbortOnDrop>,
}

impl<T: Transport + Clone> Owner<T> {
    /// Builds the SubnetManager and the owner around it, starts the SA's
    /// task and the performance manager's, and shows the election as it
    /// starts. A bad partitions.conf stops here.
    pub(super) fn start(transport: T, config: Config, options: RunOptions) -> Result<Started<T>, RunError> {
        let local = transport.local_port();
        let election = Election::new(config.sm.election(), local.port_guid);
        let mut sm =
            SubnetManager::new(transport.clone(), config.sm.clone(), options.persist_lids).with_qos(config.qos.clone());
        sm.set_sm_key(config.sm.sm_key);
        // The SA hands out alias GUIDs; the SM writes them into the ports.
        let (alias_tx, alias_changes) = tokio::sync::watch::channel(Arc::default());
        sm.set_alias_source(alias_changes.clone());
        // partitions.conf: a bad file stops the SM here (nothing is in force
        // yet to keep); later ones are refused sweep by sweep.
        sm.load_partitions()?;
        // The SA's multicast groups; the SM routes them and writes the MFTs.
        let (mcast_tx, mcast_changes) = tokio::sync::watch::channel(Arc::default());
        sm.set_mcast_source(mcast_changes.clone());
        let client = SmpClient::with_m_key(transport.clone(), config.sm.m_key);
        let perf_active = Arc::new(std::sync::atomic::AtomicU8::new(PERF_OFF));
        let standby_ports: StandbyPorts = Arc::default();
        let (perf_config, perf_configs) = tokio::sync::watch::channel(config.perfmgr.clone());
        let perfmgr = config.perfmgr.enabled.then(|| {
            spawn_perfmgr(transport.clone(), perf_configs, &options, perf_active.clone(), standby_ports.clone())
        });
        let sa = sa_task::spawn(
            transport.clone(),
            crate::sa::SaConfig {
                subnet_timeout: config.sm.subnet_timeout,
                sm_key: config.sm.sm_key,
                ..config.sa.clone()
            },
            local.port_guid,
            options.snapshots.clone(),
            options.metrics.clone(),
            sa_task::ToProgram { aliases: alias_tx, mcast: mcast_tx },
            options.sa_placement,
        );
        info!(
            guid = %local.port_guid,
            priority = config.sm.priority,
            poll_ms = config.sm.sminfo_polling_timeout_ms,
            poll_misses = config.sm.polling_retry_number,
            "SM starting in DISCOVERING"
        );
        options.status.set_port(local.port_guid, local.lid);
        let flaps = crate::subnet::flaps::FlapDamper::new(flap_policy(&config.sm));
        let mut owner = Owner {
            election,
            sm: Some(sm),
            client,
            transport,
            config,
            options,
            started: tokio::time::Instant::now(),
            queue: VecDeque::new(),
            discovered: None,
            took_charge: false,
            last: None,
            was_up: false,
            next_sweep: None,
            attempts: 0,
            refused: BTreeMap::new(),
            published: 0,
            discovery_problems: 0,
            logged_remote: HashSet::new(),
            sa,
            master_swept: false,
            sa_drop_logged: None,
            sa_master: None,
            sa_peers: Default::default(),
            sa_lids: None,
            sa_mft_digests: None,
            sa_trees_lost: false,
            master_since: None,
            mirror: MirrorReads::default(),
            mcast_retry: None,
            next_heartbeat: Duration::ZERO,
            perf_active,
            standby_ports,
            perf_config,
            reconfigure_pending: false,
            told_ready: false,
            lid_names: std::cell::RefCell::new(None),
            traps_logged: (Duration::ZERO, 0),
            pending_react: None,
            rebalance_wanted: false,
            react_due: None,
            flaps,
            trap_drops: Default::default(),
            drops_logged: Duration::ZERO,
        };
        owner.publish_election();
        Ok(Started { owner, alias_changes, mcast_changes, perfmgr })
    }

    pub(super) fn now(&self) -> Duration {
        self.started.elapsed()
    }

    pub(super) fn interval(&self) -> Option<Duration> {
        let s = self.config.sm.sweep_interval_s;
        (s > 0).then(|| Duration::from_secs(s))
    }
}

/// Work for the sweep slot, queued while it is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SweepWork {
    /// React to the changes in `Owner::pending_react`.
    React,
    Discover,
    TakeCharge {
        takeover: bool,
    },
    Light,
    /// The SA's alias GUIDs changed: write the GUIDInfo blocks that differ.
    Aliases,
    /// The SA's multicast groups changed: route them, write the MFT blocks
    /// that differ.
    Multicast,
}

/// A standby's mirror reads of the master's SA (`crate::sa::mirror`).
#[derive(Debug, Default)]
pub(super) struct MirrorReads {
    /// When the next read starts (only while STANDBY, with mirroring on).
    pub(super) next: Option<Duration>,
    /// A read is under way (never two at once).
    pub(super) running: bool,
    /// The reads are failing: the first failure of a run was logged as a
    /// warning, the others at debug until a read works again.
    pub(super) failing: bool,
}

impl<T: Transport + Clone> Owner<T> {
    /// Queues a reaction at `suspects`, or adds them to the one waiting. A
    /// trap's reaction is queued [`TRAP_SETTLE`] after the last trap of its
    /// burst (at most [`TRAP_SETTLE_MAX`] after the first); a light sweep's
    /// at once. A reaction needs a master that has programmed the fabric:
    /// before that the change goes to the election as a heavy sweep would.
    pub(super) fn react_to(&mut self, trigger: crate::subnet::Trigger, suspects: Vec<crate::subnet::Suspect>) {
        let now = self.now();
        if self.election.state() != State::Master || !self.took_charge || self.options.once {
            self.election.handle(now, crate::election::Event::SweepWanted);
            return;
        }
        let settle = matches!(
            trigger,
            crate::subnet::Trigger::LinkStateTrap
                | crate::subnet::Trigger::PortChangeTrap
                | crate::subnet::Trigger::FlapDamping
        );
        match &mut self.pending_react {
            Some((_, waiting)) => {
                waiting.extend(suspects);
                if let Some((first, due)) = &mut self.react_due {
                    *due = (now + TRAP_SETTLE).min(*first + TRAP_SETTLE_MAX);
                }
            }
            None => {
                self.pending_react = Some((trigger, suspects.into_iter().collect()));
                if settle {
                    self.react_due = Some((now, now + TRAP_SETTLE));
                } else {
                    self.queue.push_back(SweepWork::React);
                }
            }
        }
    }

    /// The performance manager polls as master, and as standby when
    /// `perfmgr.on_standby` says so.
    pub(super) fn update_perf_active(&self) {
        let mode = match self.election.state() {
            State::Master => PERF_MASTER,
            State::Standby if self.config.perfmgr.on_standby => PERF_STANDBY,
            _ => PERF_OFF,
        };
        self.perf_active.store(mode, std::sync::atomic::Ordering::Relaxed);
    }
}
