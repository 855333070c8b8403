//! The subnet as the SM knows it, below every reader: what a sweep found
//! ([`model`]: nodes and ports in an arena, links, directed-route paths),
//! what a heavy sweep decided and did ([`report`]), what changed between
//! two looks at the fabric ([`changes`]), which cables bounce too often
//! to route over ([`flaps`]), and the snapshot it
//! publishes whole ([`snapshot`]) for the SA, metrics, `/status` and the
//! dumps to read without a lock; and what a sweep found, counted once
//! ([`census`]) for `/status` and the metrics alike.

pub mod census;
pub mod changes;
pub mod flaps;
pub mod model;
pub mod report;
pub mod snapshot;

pub use census::Census;
pub use changes::{Change, ChangeKind, ChangeSet, Suspect, SweepKind, Trigger};
pub use model::*;
pub use report::{InactivePort, MasterMode, McastReport, ProgramReport, QosSet, RoutingRun, SweepReport, SweptRoutes};
pub use snapshot::{Snapshot, Snapshots};
