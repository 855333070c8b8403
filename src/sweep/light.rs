//! The light sweep (what OpenSM does between heavy sweeps): SwitchInfo from
//! every switch the last heavy sweep found. A port state change, a switch
//! that stopped answering or one that answers nonsense calls for a heavy
//! sweep.

use std::fmt;

use futures::stream::{FuturesUnordered, StreamExt};

use crate::mad::{AttributeId, DrPath, SmpAttribute, SwitchInfoRepr};
use crate::program::sets::MAX_OUTSTANDING;
use crate::transport::{SmpClient, Transport};
use crate::types::Guid;

/// Why a light sweep asks for a heavy one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LightFinding {
    /// No heavy sweep has run yet.
    NoHeavySweepYet,
    /// Nothing to watch: a fabric without switches is swept whole.
    NoSwitches,
    /// SwitchInfo.PortStateChange is set.
    PortStateChange { guid: Guid, path: DrPath },
    /// The switch's SwitchInfo does not parse.
    Unreadable { guid: Guid, path: DrPath, error: String },
    /// The switch did not answer (or answered with an error status).
    NoAnswer { guid: Guid, path: DrPath, error: String },
}

impl fmt::Display for LightFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LightFinding::NoHeavySweepYet => write!(f, "no heavy sweep yet"),
            LightFinding::NoSwitches => write!(f, "no switches to watch"),
            LightFinding::PortStateChange { guid, path } => {
                write!(f, "switch {guid} at {path} reports a port state change")
            }
            LightFinding::Unreadable { guid, path, error } => {
                write!(f, "switch {guid} at {path}: unreadable SwitchInfo: {error}")
            }
            LightFinding::NoAnswer { guid, path, error } => {
                write!(f, "switch {guid} at {path} did not answer: {error}")
            }
        }
    }
}

/// SwitchInfo from each of `switches` (GUID and path); the first finding,
/// or `None` when nothing changed.
pub async fn light_sweep<T: Transport>(client: &SmpClient<T>, switches: &[(Guid, DrPath)]) -> Option<LightFinding> {
    let mut queue = switches.iter();
    let get = |(guid, path): &(Guid, DrPath)| {
        let (guid, path) = (*guid, *path);
        async move { (guid, path, client.dr_get(&path, AttributeId::SwitchInfo, 0).await) }
    };
    let mut in_flight = FuturesUnordered::new();
    in_flight.extend(queue.by_ref().take(MAX_OUTSTANDING).map(get));
    let mut finding = None;
    while let Some((guid, path, result)) = in_flight.next().await {
        if let Some(next) = queue.next() {
            in_flight.push(get(next));
        }
        if finding.is_some() {
            continue;
        }
        finding = match result.map(|smp| SwitchInfoRepr::parse_data(&smp.data)) {
            Ok(Ok(si)) if si.port_state_change => Some(LightFinding::PortStateChange { guid, path }),
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(LightFinding::Unreadable { guid, path, error: e.to_string() }),
            Err(e) => Some(LightFinding::NoAnswer { guid, path, error: e.to_string() }),
        };
    }
    finding
}
