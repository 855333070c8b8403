//! Engine selection: every engine behind one call, and chains that fall
//! back to the next engine when one does not apply (OpenSM's
//! `routing_engine=ftree,updn,minhop`).

use std::fmt;
use std::str::FromStr;

use crate::error::RoutingError;
use crate::fabric::RoutingFabric;
use crate::lft::Routes;
pub use crate::options::EngineOptions;

/// The routing engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    MinHop,
    UpDn,
    DnUp,
    FTree,
    Sssp,
    Dfsssp,
    Dor,
    Nue,
}

impl EngineKind {
    pub const ALL: [EngineKind; 8] = [
        EngineKind::MinHop,
        EngineKind::UpDn,
        EngineKind::DnUp,
        EngineKind::FTree,
        EngineKind::Sssp,
        EngineKind::Dfsssp,
        EngineKind::Dor,
        EngineKind::Nue,
    ];

    /// OpenSM's name for the engine.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::MinHop => "minhop",
            EngineKind::UpDn => "updn",
            EngineKind::DnUp => "dnup",
            EngineKind::FTree => "ftree",
            EngineKind::Sssp => "sssp",
            EngineKind::Dfsssp => "dfsssp",
            EngineKind::Dor => "dor",
            EngineKind::Nue => "nue",
        }
    }

    /// Whether the engine's tables are free of credit loops by construction
    /// (on every VL, given the SLs it returns).
    /// Whether [`crate::Effort::Quick`] changes this engine's tables (the
    /// engines that search for balance); the others route the same at any
    /// effort.
    pub fn searches_for_balance(self) -> bool {
        matches!(self, EngineKind::UpDn | EngineKind::Nue)
    }

    pub fn claims_deadlock_freedom(self) -> bool {
        matches!(
            self,
            EngineKind::UpDn
                | EngineKind::DnUp
                | EngineKind::FTree
                | EngineKind::Dfsssp
                | EngineKind::Dor
                | EngineKind::Nue
        )
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EngineKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        EngineKind::ALL.into_iter().find(|k| k.name() == s.trim()).ok_or_else(|| {
            let names: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown routing engine `{s}` (known: {})", names.join(", "))
        })
    }
}

/// Runs one engine.
/// Options are checked first, whatever the engine: a VL budget outside
/// 1-15 is [`RoutingError::VlBudget`]; a root, compute-node or I/O GUID the
/// fabric lacks, or of the wrong kind, is [`RoutingError::Input`] naming the
/// list, the place in it and the GUID ([`EngineOptions::check_against`]).
/// Node GUIDs in `cn_guids` and `io_guids` then stand for their end ports
/// ([`EngineOptions::with_port_guids`]).
pub fn route(kind: EngineKind, fabric: &RoutingFabric, options: &EngineOptions) -> Result<Routes, RoutingError> {
    options.check()?;
    options.check_against(fabric)?;
    let options = &*options.with_port_guids(fabric);
    match kind {
        EngineKind::MinHop => crate::minhop::minhop(fabric),
        EngineKind::Sssp => crate::sssp::sssp(fabric, options),
        EngineKind::Dfsssp => crate::sssp::dfsssp(fabric, options),
        EngineKind::FTree => crate::ftree::ftree(fabric, options),
        EngineKind::UpDn => crate::updn::updn(fabric, options),
        EngineKind::DnUp => crate::updn::dnup(fabric, options),
        EngineKind::Dor => crate::dor::dor(fabric, options),
        EngineKind::Nue => crate::nue::nue(fabric, options),
    }
}

/// The outcome of a chain: the routes of the first engine that applied.
#[derive(Debug, Clone)]
pub struct ChainOutcome {
    pub routes: Routes,
    pub engine: EngineKind,
    /// Engines tried before it, with why each was passed over.
    pub skipped: Vec<(EngineKind, RoutingError)>,
}

/// Tries each engine in order; the first one that routes wins. A
/// disconnected fabric is not a reason to fall back: its partial routes
/// are the answer. When every engine refuses, the last refusal is returned.
pub fn route_chain(
    chain: &[EngineKind],
    fabric: &RoutingFabric,
    options: &EngineOptions,
) -> Result<ChainOutcome, RoutingError> {
    let mut skipped = Vec::new();
    for &kind in chain {
        match route(kind, fabric, options) {
            Ok(routes) => return Ok(ChainOutcome { routes, engine: kind, skipped }),
            Err(e @ RoutingError::Disconnected { .. }) => return Err(e),
            Err(e) => skipped.push((kind, e)),
        }
    }
    Err(skipped
        .pop()
        .map(|(_, e)| e)
        .unwrap_or(RoutingError::NotApplicable { engine: "chain", reason: "the routing engine chain is empty".into() }))
}
