//! What the last heavy sweep found and decided, published whole after each
//! one: readers (the SA, metrics, `/status`) take the newest snapshot
//! without a lock and keep it as long as they like while the next sweep
//! runs; the owner task never waits for a reader.

use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwapOption;

use crate::subnet::SweepReport;
use crate::types::{Guid, Lid};

/// One heavy sweep's results, immutable once published.
#[derive(Debug)]
pub struct Snapshot {
    /// Counts the snapshots this SM published, from 1.
    pub sequence: u64,
    pub taken_at: SystemTime,
    /// The SM that programmed it (this one) and its LID.
    pub master: Guid,
    pub master_lid: Lid,
    /// Nodes, ports, links, LIDs, routes, path SLs and SL-to-VL tables.
    /// The partitions in force are `sweep.partitions`.
    pub sweep: SweepReport,
}

/// The publication point; clones share it.
#[derive(Clone)]
pub struct Snapshots {
    latest: Arc<ArcSwapOption<Snapshot>>,
    /// The newest sequence number, for readers that wait for the next one.
    published: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for Snapshots {
    fn default() -> Self {
        Snapshots { latest: Arc::default(), published: Arc::new(tokio::sync::watch::Sender::new(0)) }
    }
}

impl Snapshots {
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes when a snapshot is published (the value is its sequence).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// The newest snapshot, if a sweep has published one.
    pub fn latest(&self) -> Option<Arc<Snapshot>> {
        self.latest.load_full()
    }

    pub(crate) fn publish(&self, snapshot: Snapshot) -> Arc<Snapshot> {
        let s = Arc::new(snapshot);
        self.latest.store(Some(s.clone()));
        self.published.send_replace(s.sequence);
        s
    }
}

impl std::fmt::Debug for Snapshots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshots").field("latest", &self.latest().map(|s| s.sequence)).finish()
    }
}
