//! One MAD request and its answer, as values and bookkeeping with no I/O:
//! the transaction table that gives TIDs, keeps a window per class and
//! retries ([`txn`]), and what it counts per MAD kind ([`counters`]); what can become of a request ([`error`]); and an
//! SMP's answer checked against what was asked ([`smp`]); and the
//! per-source rate limit on the traps that arrive unasked ([`trap_gate`]). The transport's
//! I/O thread and the simulator's virtual-time driver both run on these,
//! and the protocol cores match on their errors.

pub mod counters;
pub mod error;
pub mod smp;
pub mod trap_gate;
pub mod txn;

pub use error::TransportError;
pub use smp::{check_response, SmpError, SmpTarget};
pub use txn::{MadCounters, MadKey, Received, RequestKind, Transactions, TxnConfig, TxnError, TxnStats};
