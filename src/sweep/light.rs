//! The light sweep (what OpenSM does between heavy sweeps): SwitchInfo from
//! every switch the last heavy sweep found. The switches that report a port
//! state change are where a reaction looks (`super::react`); a switch that
//! stopped answering or one that answers nonsense calls for a heavy sweep.

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

/// What a light sweep found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LightSweep {
    /// The first finding, `None` when nothing changed.
    pub finding: Option<LightFinding>,
    /// Every switch that reports a port state change, by GUID.
    pub changed: Vec<Guid>,
    /// Every switch that did not answer over the path the SM knew.
    pub silent: Vec<Guid>,
    /// Only a heavy sweep can say what happened: a switch answered
    /// nonsense, or switches went silent and none reports a change that
    /// could explain it.
    pub needs_heavy: bool,
}

/// SwitchInfo from each of `switches` (GUID and path).
pub async fn light_sweep<D: SmpDriver>(driver: &D, switches: &[(Guid, DrPath)]) -> LightSweep {
    let mut core = LightSweepCore::new(switches.to_vec());
    driver.drive(&mut core).await;
    let needs_heavy = core.unreadable || (core.changed.is_empty() && !core.silent.is_empty());
    LightSweep { finding: core.finding(), changed: core.changed, silent: core.silent, needs_heavy }
}

/// The light sweep as an I/O-free core ([`SmpCore`]): one SwitchInfo Get per
/// switch; the first finding in the order answers came.
pub struct LightSweepCore {
    switches: Vec<(Guid, DrPath)>,
    next: usize,
    answered: usize,
    finding: Option<LightFinding>,
    changed: Vec<Guid>,
    silent: Vec<Guid>,
    unreadable: bool,
}

impl LightSweepCore {
    pub fn new(switches: Vec<(Guid, DrPath)>) -> Self {
        LightSweepCore {
            switches,
            next: 0,
            answered: 0,
            finding: None,
            changed: Vec::new(),
            silent: Vec::new(),
            unreadable: false,
        }
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
        let (guid, path) = self.switches[index];
        let finding = match answer.map(|data| SwitchInfoRepr::parse_data(&data)) {
            Ok(Ok(si)) if si.port_state_change => {
                self.changed.push(guid);
                Some(LightFinding::PortStateChange { guid, path })
            }
            Ok(Ok(_)) => None,
            Ok(Err(e)) => {
                self.unreadable = true;
                Some(LightFinding::Unreadable { guid, path, error: e.to_string() })
            }
            Err(e) => {
                self.silent.push(guid);
                Some(LightFinding::NoAnswer { guid, path, error: e.to_string() })
            }
        };
        if self.finding.is_none() {
            self.finding = finding;
        }
    }

    fn is_done(&self) -> bool {
        self.answered == self.switches.len()
    }
}
