//! The light sweep (what OpenSM does between heavy sweeps): SwitchInfo from
//! every switch the last heavy sweep found. A port state change, a switch
//! that stopped answering or one that answers nonsense calls for a heavy
//! sweep.

use std::fmt;

use super::core::{SmpCore, SmpRequest};
use crate::exchange::SmpError;
use crate::mad::{AttributeId, DrPath, SmpAttribute, SwitchInfoRepr};
use crate::sweep::core::SmpDriver;
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
pub async fn light_sweep<D: SmpDriver>(driver: &D, switches: &[(Guid, DrPath)]) -> Option<LightFinding> {
    let mut core = LightSweepCore::new(switches.to_vec());
    driver.drive(&mut core).await;
    core.finding()
}

/// The light sweep as an I/O-free core ([`SmpCore`]): one SwitchInfo Get per
/// switch; the first finding in the order answers came.
pub struct LightSweepCore {
    switches: Vec<(Guid, DrPath)>,
    next: usize,
    answered: usize,
    finding: Option<LightFinding>,
}

impl LightSweepCore {
    pub fn new(switches: Vec<(Guid, DrPath)>) -> Self {
        LightSweepCore { switches, next: 0, answered: 0, finding: None }
    }

    /// Why a heavy sweep is needed, if it is.
    pub fn finding(&self) -> Option<LightFinding> {
        self.finding.clone()
    }
}

impl SmpCore for LightSweepCore {
    /// Index into the switches.
    type Token = usize;

    fn poll_request(&mut self) -> Option<(usize, SmpRequest)> {
        let (_, path) = *self.switches.get(self.next)?;
        self.next += 1;
        Some((self.next - 1, SmpRequest::get(path, AttributeId::SwitchInfo, 0)))
    }

    fn handle_answer(&mut self, index: usize, answer: Result<[u8; 64], SmpError>) {
        self.answered += 1;
        if self.finding.is_some() {
            return;
        }
        let (guid, path) = self.switches[index];
        self.finding = match answer.map(|data| SwitchInfoRepr::parse_data(&data)) {
            Ok(Ok(si)) if si.port_state_change => Some(LightFinding::PortStateChange { guid, path }),
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(LightFinding::Unreadable { guid, path, error: e.to_string() }),
            Err(e) => Some(LightFinding::NoAnswer { guid, path, error: e.to_string() }),
        };
    }

    fn is_done(&self) -> bool {
        self.answered == self.switches.len()
    }
}
