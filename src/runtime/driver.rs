//! The one driver that sends what an SMP core asks for over a transport:
//! up to [`MAX_OUTSTANDING`] requests in flight (the transaction layer's
//! window bounds the wire; this bounds memory), answers fed back as they
//! come. It is the [`SmpDriver`] of every [`SmpClient`], so the cores'
//! sequences (discovery, programming) run over a transport without naming
//! one; and it gives the programmer its transport-backed constructor.

use std::future::Future;
use std::pin::Pin;

use futures::stream::{FuturesUnordered, StreamExt};

use crate::config::SmConfig;
use crate::program::sets::MAX_OUTSTANDING;
use crate::program::SubnetManager;
use crate::sweep::core::{SmpCore, SmpDriver, SmpRequest};
use crate::transport::smp_client::check_response;
use crate::transport::{SmpClient, SmpTarget, Transport};

type Answer<K> = (K, Result<[u8; 64], crate::transport::SmpError>);
type InFlight<'a, K> = Pin<Box<dyn Future<Output = Answer<K>> + Send + 'a>>;

/// Runs `core` until it is done.
pub async fn drive<T: Transport, C: SmpCore>(client: &SmpClient<T>, core: &mut C)
where
    C::Token: Send,
{
    // Boxed with the bounds spelt out: the compiler cannot always prove a
    // future generic over the core's token Send for every lifetime.
    let mut in_flight: FuturesUnordered<InFlight<'_, C::Token>> = FuturesUnordered::new();
    loop {
        while in_flight.len() < MAX_OUTSTANDING {
            let Some((token, req)) = core.poll_request() else { break };
            in_flight.push(Box::pin(send(client, token, req)));
        }
        match in_flight.next().await {
            Some((token, answer)) => core.handle_answer(token, answer),
            None => {
                if !core.is_done() {
                    tracing::error!("an SMP core stalled: nothing to send, nothing in flight, not done");
                    core.stalled();
                }
                return;
            }
        }
    }
}

async fn send<T: Transport, K>(client: &SmpClient<T>, token: K, req: SmpRequest) -> Answer<K> {
    let answer = client.transport().request(req.to_datagram(client.m_key())).await;
    let r = answer
        .map_err(crate::transport::SmpError::from)
        .and_then(|d| check_response(SmpTarget::Directed(req.path), req.method, req.attr, req.amod, &d.mad))
        .map(|smp| smp.data);
    (token, r)
}

impl<T: Transport> SmpDriver for SmpClient<T> {
    fn drive<C>(&self, core: &mut C) -> impl Future<Output = ()> + Send
    where
        C: SmpCore + Send,
        C::Token: Send,
    {
        drive(self, core)
    }

    fn retries(&self) -> u64 {
        self.transport().stats().txn.totals().retries
    }

    /// On a thread of its own in the idle scheduling class
    /// ([`super::background`]): the SA keeps answering from the last
    /// snapshot while routes are computed, and is not delayed by them.
    /// Outside a runtime (a test's plain executor) inline.
    async fn compute<R, W>(&self, work: W) -> R
    where
        R: Send + 'static,
        W: FnOnce() -> R + Send + 'static,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return work();
        }
        match super::background::spawn("ibsm-route", work).await {
            Ok(r) => r,
            // The work panicked: as it would have inline.
            Err(super::background::Failed::Panicked(payload)) => std::panic::resume_unwind(payload),
            Err(super::background::Failed::Cancelled) => panic!("the runtime shut down while routing"),
        }
    }
}

impl<T: Transport> SubnetManager<SmpClient<T>> {
    /// An SM that sends its SMPs over `transport` with `config.m_key`.
    /// Loads guid2lid from `config.cache_dir` when `persist` (a missing or
    /// corrupt file is a warning, never fatal: ports keep the LIDs they hold).
    pub fn new(transport: T, config: SmConfig, persist: bool) -> Self {
        let client = SmpClient::with_m_key(transport, config.m_key);
        SubnetManager::with_driver(client, config, persist)
    }
}
