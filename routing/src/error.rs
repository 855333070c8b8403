//! Errors routing engines return.

use std::fmt;

use thiserror::Error;

use crate::lft::Routes;

/// Routes an engine computed before giving up, for callers that prefer
/// programming the reachable part of a fabric to programming nothing. Its
/// `Debug` is a one-line summary: a full table dump in a panic message helps
/// nobody.
#[derive(Clone, PartialEq, Eq)]
pub struct PartialRoutes(pub Box<Routes>);

impl fmt::Debug for PartialRoutes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let top = self.0.lfts.first().map_or(0, |l| l.linear_fdb_top().0);
        write!(f, "PartialRoutes({} LFTs, top LID {})", self.0.lfts.len(), top)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RoutingError {
    /// The cabling has more than one connected part. Every part was routed
    /// on its own (`partial`); `unreachable` lists the GUIDs (switch GUIDs,
    /// end-port port GUIDs) outside the largest part, switches first.
    #[error(
        "fabric is in {components} disconnected parts; {} node(s) outside the largest: {}",
        unreachable.len(),
        GuidList(unreachable)
    )]
    Disconnected { components: usize, unreachable: Vec<u64>, partial: PartialRoutes },
    /// The engine does not apply to this fabric (e.g. ftree on a torus); a
    /// chain falls back to its next engine.
    #[error("{engine} does not apply: {reason}")]
    NotApplicable { engine: &'static str, reason: String },
    /// Deadlock freedom needs more virtual lanes than the fabric offers.
    #[error("{engine} needs {needed} virtual lanes, the fabric offers {available}")]
    TooFewVls { engine: &'static str, needed: u8, available: u8 },
    /// A VL budget no port can have (a port has 1-15 data VLs).
    #[error("a VL budget of {given} is outside 1-15 (PortInfo:VLCap)")]
    VlBudget { given: u8 },
    /// A root, compute-node or I/O GUID list is unusable: a file (`file`
    /// its path, `line` 1-based, 0 when it could not be read) or one of
    /// [`crate::EngineOptions`]' lists (`file` the field's name, `line` the
    /// GUID's 1-based place in it). `problem` names the GUID.
    #[error("{file}:{line}: {problem}")]
    Input { file: String, line: usize, problem: String },
}

impl RoutingError {
    /// The routes computed despite the error, if the engine produced any.
    pub fn partial_routes(&self) -> Option<&Routes> {
        match self {
            RoutingError::Disconnected { partial, .. } => Some(&partial.0),
            _ => None,
        }
    }
}

/// Prints at most eight GUIDs, then a count.
struct GuidList<'a>(&'a [u64]);

impl fmt::Display for GuidList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 8;
        for (i, g) in self.0.iter().take(SHOWN).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{g:#018x}")?;
        }
        if self.0.len() > SHOWN {
            write!(f, " and {} more", self.0.len() - SHOWN)?;
        }
        Ok(())
    }
}

/// The routes, or [`RoutingError::Disconnected`] carrying them when the
/// fabric is in several parts (naming every node outside the largest part).
/// Every engine ends with this.
pub fn disconnected_or_ok(fabric: &crate::fabric::RoutingFabric, routes: Routes) -> Result<Routes, RoutingError> {
    let comps = fabric.components();
    if comps.count() <= 1 {
        return Ok(routes);
    }
    let unreachable = fabric
        .switch_ids()
        .filter(|s| comps.of_switch[s.index()] != 0)
        .map(|s| fabric.switch(s).guid)
        .chain(
            fabric.end_port_ids().filter(|e| comps.of_end_port[e.index()] != 0).map(|e| fabric.end_port(e).port_guid),
        )
        .collect();
    Err(RoutingError::Disconnected { components: comps.count(), unreachable, partial: PartialRoutes(Box::new(routes)) })
}
