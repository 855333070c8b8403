//! Driving an SMP core ([`SmpCore`]) against the in-process fabric in
//! virtual time, on the caller's thread: the transaction core (TIDs,
//! window, retries) between them, the fabric's clock advanced only by
//! waiting, and a cap on the steps so a livelock fails fast instead of
//! hanging. What the runtime's driver does over tokio, minus tokio.

use std::time::Duration;

use crate::exchange::txn::{Received, Transactions, TxnConfig, TxnError};
use crate::sweep::core::{SmpCore, SmpRequest};
use crate::transport::smp_client::check_response;
use crate::transport::{DeviceError, MadDevice, SmpError, SmpTarget};

/// How a driven core went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Driven {
    /// Loop steps taken (each sends what fits, then waits for one event).
    pub steps: usize,
    /// Requests the core asked for.
    pub requests: u64,
    /// Virtual time from start to done.
    pub elapsed: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error("the core is not done after {steps} steps ({requests} requests, {outstanding} outstanding)")]
    StepCap { steps: usize, requests: u64, outstanding: usize },
    #[error("the core stalled: nothing to send, nothing in flight, not done")]
    Stalled,
    #[error("device: {0}")]
    Device(#[from] DeviceError),
    #[error("a request the core built is not a MAD: {0}")]
    Malformed(TxnError),
}

/// Runs `core` until it is done, sending with `m_key` through `dev`.
pub fn drive_core<D: MadDevice, C: SmpCore>(
    dev: &mut D,
    core: &mut C,
    cfg: TxnConfig,
    m_key: u64,
    max_steps: usize,
) -> Result<Driven, DriveError> {
    let start = dev.now();
    let mut txns: Transactions<(C::Token, SmpRequest)> = Transactions::new(cfg);
    let mut requests = 0u64;
    for steps in 0..max_steps {
        while let Some((token, req)) = core.poll_request() {
            txns.submit((token, req), req.to_datagram(m_key)).map_err(DriveError::Malformed)?;
            requests += 1;
        }
        if txns.pending() == 0 {
            if core.is_done() {
                return Ok(Driven { steps, requests, elapsed: dev.now() - start });
            }
            core.stalled();
            return Err(DriveError::Stalled);
        }
        let now = dev.now();
        while let Some(d) = txns.poll_transmit(now) {
            dev.send(&d)?;
        }
        let deadline = txns.poll_timeout().unwrap_or(now);
        if let Some(d) = dev.recv(deadline)? {
            if let Received::Response { token: (token, req), dgram } = txns.handle_receive(dev.now(), d) {
                let answer = check_response(SmpTarget::Directed(req.path), req.method, req.attr, req.amod, &dgram.mad);
                core.handle_answer(token, answer.map(|smp| smp.data));
            }
        }
        for ((token, _), e) in txns.handle_timeout(dev.now()) {
            core.handle_answer(token, Err(SmpError::Transport(e.into())));
        }
    }
    Err(DriveError::StepCap { steps: max_steps, requests, outstanding: txns.pending() })
}
