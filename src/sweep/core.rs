//! The shape every SMP-sending core has: no I/O and no clock. A core hands
//! out the SMPs it wants sent ([`SmpCore::poll_request`]) and takes their
//! answers ([`SmpCore::handle_answer`]); the transaction layer below the
//! driver owns timeouts and retries. One driver sends for any core: the
//! runtime's over tokio ([`SmpDriver`], implemented in
//! `crate::runtime::driver`), the simulator's in virtual time for tests
//! (`crate::sim::drive_core`).

use crate::datagram::{Datagram, MadAddress};
use crate::exchange::SmpError;
use std::future::Future;

use crate::mad::{AttributeId, DrPath, Method, SmpRepr, SMP_DATA_LEN};

/// One directed-route SMP a core wants sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmpRequest {
    pub method: Method,
    pub path: DrPath,
    pub attr: AttributeId,
    pub amod: u32,
    pub data: [u8; SMP_DATA_LEN],
}

impl SmpRequest {
    pub fn get(path: DrPath, attr: AttributeId, amod: u32) -> Self {
        SmpRequest { method: Method::Get, path, attr, amod, data: [0; SMP_DATA_LEN] }
    }
    pub fn get_with(path: DrPath, attr: AttributeId, amod: u32, data: [u8; SMP_DATA_LEN]) -> Self {
        SmpRequest { method: Method::Get, path, attr, amod, data }
    }
    pub fn set(path: DrPath, attr: AttributeId, amod: u32, data: [u8; SMP_DATA_LEN]) -> Self {
        SmpRequest { method: Method::Set, path, attr, amod, data }
    }

    /// The datagram, with `m_key` in the SMP.
    pub fn to_datagram(&self, m_key: u64) -> Datagram {
        let smp = SmpRepr::directed_request(self.method, self.attr, self.amod, self.path, m_key, self.data);
        Datagram { addr: MadAddress::smi_permissive(), mad: smp.to_bytes().to_vec() }
    }
}

/// A protocol core that sends SMPs.
pub trait SmpCore {
    /// What the core needs back with an answer to know what it asked.
    type Token;
    /// The next SMP to send now, if any. `None` while the core waits for
    /// answers (a layer barrier) or has nothing left.
    fn poll_request(&mut self) -> Option<(Self::Token, SmpRequest)>;
    /// The answer's data, or why there is none, for the request `token`.
    fn handle_answer(&mut self, token: Self::Token, answer: Result<[u8; SMP_DATA_LEN], SmpError>);
    /// Nothing is left to send or to wait for.
    fn is_done(&self) -> bool;
    /// The driver found nothing to send, nothing in flight and the core not
    /// done: a bug in the core. It should make what it returns say so
    /// rather than pass for a whole result.
    fn stalled(&mut self) {}
}

/// What runs an [`SmpCore`] to its end: sends what it asks for and feeds
/// back the answers. The sequences that chain cores (a heavy sweep's
/// discovery, then programming) name only this trait, never a transport;
/// the runtime implements it over the transaction layer
/// (`crate::runtime::driver`).
pub trait SmpDriver: Send + Sync {
    /// Runs `core` until it is done.
    fn drive<C>(&self, core: &mut C) -> impl Future<Output = ()> + Send
    where
        C: SmpCore + Send,
        C::Token: Send;
    /// Requests sent again after a timeout, so far: a discovery's log line
    /// says how lossy the fabric was.
    fn retries(&self) -> u64;
    /// Runs CPU-bound `work` (the routing engines) where it does not hold
    /// up the executor the SMPs and the SA run on. Inline unless a driver
    /// has somewhere better.
    fn compute<R, W>(&self, work: W) -> impl Future<Output = R> + Send
    where
        R: Send + 'static,
        W: FnOnce() -> R + Send + 'static,
    {
        async move { work() }
    }
}
