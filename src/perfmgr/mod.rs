//! The performance manager (PerfMgt, class 0x04): polls every port's
//! PortCounters (and PortCountersExtended where the port has them) at an
//! interval, keeps ibsm's own monotonic totals, clears 32-bit counters
//! before they saturate, warns of sudden error-rate jumps, and exports the
//! totals to Prometheus.
//!
//! ```text
//!  Snapshots ──targets()──► runtime::perfmgr::run ──PerfRequest──► Transport (PerfMgt window)
//!                              │  ▲ answers
//!                              ▼  │
//!                           core::PerfCore (I/O-free: ClassPortInfo cache,
//!                              │  cycles, counters::PortAccount per port)
//!                              ▼ published once per cycle
//!                           PerfShared ──► runtime::metrics::perfmgr::register: PortSection, SelfCollector (scrape)
//! ```
//!
//! This module is the I/O-free half: the core, its counter accounts and
//! the choice of ports. The runtime drives it over a transport
//! (`crate::runtime::perfmgr`) and exports it (`crate::runtime::metrics::perfmgr`).

pub mod core;
pub mod counters;
pub mod table;
pub mod targets;

pub use self::core::{PerfCore, PerfEvent, PerfShared, PerfSnapshot, PerfStats};
pub use crate::config::perfmgr::PerfMgrConfig;
pub use counters::{Counter, PortAccount};
pub use targets::PerfPort;
