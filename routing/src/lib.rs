//! Routing engines and route analysis for InfiniBand fabrics.
//!
//! Engines are pure functions from a [`RoutingFabric`] to [`Routes`] (one
//! linear forwarding table per switch): no I/O, no MAD types, so the same
//! code runs inside the SM and offline on a topology file.
//!
//! - [`fabric`]: the routing view of a fabric and its checked builder.
//! - [`lft`]: forwarding tables, their 64-LID blocks and block diffs.
//! - [`mcast`]: one spanning tree per multicast group, spread over the links.
//! - [`mod@minhop`]: OpenSM's default engine (shortest paths, balanced per port).
//! - [`analysis`]: traces every (source, LID) pair through the tables.
//! - [`auto`]: the engine picked by topology, checked free of credit loops.
//! - [`cdg`]: channel dependency graphs per VL (deadlock freedom).
//! - [`keep`]: old routes kept where they still deliver, after a loss.
//! - [`repair`]: only the LIDs a loss broke routed again, on one VL.
//! - [`dump`]: OpenSM's `opensm-lfts.dump` and `ibroute` text, read and written.
//! - [`testfab`]: fabric generators for tests and benchmarks.
#![forbid(unsafe_code)]

pub mod analysis;
pub mod auto;
pub mod cdg;
mod channels;
pub mod dor;
mod dragonfly;
pub mod dump;
pub mod engine;
pub mod error;
pub mod fabric;
pub mod ftree;
pub mod guidfile;
pub mod keep;
pub mod lft;
pub mod mcast;
pub mod minhop;
pub mod nue;
pub mod options;
mod refine;
pub mod repair;
mod select;
pub mod sssp;
mod switch_graph;
pub mod testfab;
pub mod updn;

pub use analysis::{
    analyze, shift_balance, trace, validate, validate_with_loads, AnalysisOptions, AnalysisReport, Report,
    ShiftBalance, ShiftOrder,
};
pub use auto::{route_auto, route_chain_auto, AutoChoice, AutoOutcome, ChainEntry, ChainRouted};
pub use cdg::{analyze_cdg, CdgReport, CdgScope};
pub use dump::{write_opensm_dump, DumpError, LftDump};
pub use engine::{route, route_chain, ChainOutcome, EngineKind};
pub use error::RoutingError;
pub use fabric::{
    EndPort, EndPortId, FabricBuilder, FabricError, LinkRate, NodeRef, PortEnd, RoutingFabric, Switch, SwitchId,
};
pub use lft::{diff_blocks, Lft, LftBlock, LinearFdbTop, Routes, UNROUTED};
pub use mcast::{
    route_mcast, verify_mcast, McastError, McastFault, McastGroup, McastMember, McastProblem, McastRoutes, McastTree,
    McastUpdate, PortSet, TreeHint,
};
pub use minhop::minhop;
pub use options::{Effort, EngineOptions};
