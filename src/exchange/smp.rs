//! An SMP's answer checked against its request: what a core gets back for
//! each SMP it asked for, whoever sent it (the runtime's driver, the
//! simulator's). Pure: no transport, no clock.

use std::fmt;

use crate::exchange::error::TransportError;
use crate::mad::{AttributeId, DrPath, Method, SmpRepr, WireError};
use crate::types::Lid;

/// Where an SMP went: a directed-route path or a LID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmpTarget {
    Directed(DrPath),
    Lid(Lid),
}

impl fmt::Display for SmpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmpTarget::Directed(p) => write!(f, "DR path {p}"),
            SmpTarget::Lid(l) => write!(f, "LID {l}"),
        }
    }
}

/// Why an SMP request did not produce the attribute asked for.
#[derive(Debug, thiserror::Error)]
pub enum SmpError {
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The responder refused (IBA 13.4.7, Table 107).
    #[error("{method:?} {attr:?} (modifier {amod:#x}) at {path}: status {status:#06x} ({})", describe_status(*status))]
    Status { status: u16, attr: AttributeId, method: Method, amod: u32, path: SmpTarget },
    /// The response does not answer the request (another attribute or a
    /// method that is not GetResp).
    #[error("{path}: asked {method:?} {attr:?}, the response is {got_method:?} {got_attr:?}")]
    Unexpected { path: SmpTarget, method: Method, attr: AttributeId, got_method: Method, got_attr: AttributeId },
    #[error("{path}: unreadable response to {attr:?}: {error}")]
    Wire { path: SmpTarget, attr: AttributeId, error: WireError },
}

/// A human reading of an SMP status word (kept under its old name).
pub use crate::mad::header::status::describe as describe_status;

/// Parses `bytes` as the answer to `method attr amod` sent to `path`.
pub fn check_response(
    path: SmpTarget,
    method: Method,
    attr: AttributeId,
    amod: u32,
    bytes: &[u8],
) -> Result<SmpRepr, SmpError> {
    let r = SmpRepr::parse_bytes(bytes).map_err(|error| SmpError::Wire { path, attr, error })?;
    if r.header.method != Method::GetResp || r.header.attribute_id != attr {
        return Err(SmpError::Unexpected {
            path,
            method,
            attr,
            got_method: r.header.method,
            got_attr: r.header.attribute_id,
        });
    }
    if r.header.status != 0 {
        return Err(SmpError::Status { status: r.header.status, attr, method, amod, path });
    }
    Ok(r)
}
