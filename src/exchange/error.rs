//! What can become of a MAD request: its fate as the transaction layer
//! or the device saw it. A value the protocol cores match on (a timeout is
//! retried later, a device error is not), so it lives below them, not in
//! the I/O half of the transport.

use crate::datagram::{DeviceError, MadSummary};
use crate::exchange::txn::TxnError;
use crate::mad::WireError;

/// Errors of the transport: a request's fate or the device's.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("{mad}: no response after {attempts} attempts")]
    Timeout { attempts: u32, mad: Box<MadSummary> },
    #[error("{}device error: {error}", .mad.as_ref().map(|m| format!("{m}: ")).unwrap_or_default())]
    Device { mad: Option<Box<MadSummary>>, error: DeviceError },
    #[error("the transport is closed (its I/O thread has ended)")]
    Closed,
    /// Every slot of the bounded command queue is taken (only `send` can
    /// see this; `request` waits for a slot instead).
    #[error("{mad}: the transport's queue is full")]
    Busy { mad: Box<MadSummary> },
    #[error("not a MAD: {0}")]
    Malformed(WireError),
    /// The response came as an RMPP transfer that failed.
    #[error("{mad}: RMPP transfer failed: {error}")]
    Rmpp { mad: Box<MadSummary>, error: crate::rmpp::RmppError },
    /// [`Transport::request_rmpp`] on a transport that cannot reassemble.
    #[error("{mad}: this transport does not reassemble RMPP answers")]
    RmppUnsupported { mad: Box<MadSummary> },
}

impl From<TxnError> for TransportError {
    fn from(e: TxnError) -> Self {
        match e {
            TxnError::Timeout { attempts, mad } => TransportError::Timeout { attempts, mad },
            TxnError::Malformed(w) => TransportError::Malformed(w),
            TxnError::Rmpp { mad, error } => TransportError::Rmpp { mad, error },
        }
    }
}
