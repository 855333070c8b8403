//! The performance manager as a task beside the owner, and which ports it
//! polls as the election changes.

use std::sync::Arc;

use super::{metrics, perfmgr, RunOptions};
use crate::transport::Transport;

/// The performance manager polls nothing, the newest snapshot's ports
/// (master), or the standby's discovered ports.
pub(super) const PERF_OFF: u8 = 0;
pub(super) const PERF_MASTER: u8 = 1;
pub(super) const PERF_STANDBY: u8 = 2;

pub(super) type StandbyPorts = Arc<arc_swap::ArcSwap<Vec<crate::perfmgr::PerfPort>>>;

/// Aborts its task when dropped: a task `run` started ends with it.
pub(super) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The performance manager as a task of its own beside the owner: it
/// polls the ports of the newest snapshot while `active` says so, in the
/// transport's PerfMgt window, and its counters are scraped through the
/// metrics registry.
pub(super) fn spawn_perfmgr<T: Transport + Clone>(
    transport: T,
    configs: tokio::sync::watch::Receiver<crate::perfmgr::PerfMgrConfig>,
    options: &RunOptions,
    mode: Arc<std::sync::atomic::AtomicU8>,
    standby_ports: StandbyPorts,
) -> AbortOnDrop {
    let shared = options.perf_counters.clone();
    if let Some(m) = &options.metrics {
        metrics::perfmgr::register(m, &shared, configs.clone());
    }
    let mut core = crate::perfmgr::PerfCore::new(configs.borrow().clone(), shared);
    let mut of_snapshot = crate::perfmgr::targets::from_snapshots(options.snapshots.clone());
    let targets = move || match mode.load(std::sync::atomic::Ordering::Relaxed) {
        PERF_MASTER => of_snapshot(),
        PERF_STANDBY => standby_ports.load().as_ref().clone(),
        _ => Vec::new(),
    };
    AbortOnDrop(tokio::spawn(async move {
        perfmgr::run_configured(&transport, &mut core, targets, configs, std::future::pending()).await;
    }))
}
