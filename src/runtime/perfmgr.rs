//! Runs a [`PerfCore`] over any [`Transport`]: a cycle every interval,
//! the core's requests sent as they come (the core bounds how many wait
//! for an answer; the transport's PerfMgt window bounds the wire, apart
//! from the SMPs' window), answers fed back, error jumps logged at warn.

use std::future::Future;
use std::pin::Pin;

use futures::stream::{FuturesUnordered, StreamExt};

use crate::mad::perf::PERF_DATA_LEN;
use crate::perfmgr::core::{PerfCore, PerfFailure, PerfRequest, Token};
use crate::perfmgr::targets::PerfPort;
use crate::transport::{Transport, TransportError};

/// How soon to ask for targets again after there were none.
const EMPTY_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

type Answer = (Token, Result<[u8; PERF_DATA_LEN], PerfFailure>);
type InFlight<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// Polls until `shutdown` resolves: at each cycle's start `targets()` says
/// which ports to read (e.g. [`crate::perfmgr::targets::from_snapshots`]); a cycle
/// with no ports is skipped. Time is tokio's, so paused-clock tests step
/// through cycles in virtual time.
pub async fn run<T, F, S>(transport: &T, core: &mut PerfCore, targets: F, shutdown: S)
where
    T: Transport,
    F: FnMut() -> Vec<PerfPort>,
    S: Future<Output = ()>,
{
    let (_fixed, configs) = tokio::sync::watch::channel(core.config().clone());
    run_configured(transport, core, targets, configs, shutdown).await
}

/// [`run`], taking each new configuration `configs` publishes (a SIGHUP
/// reload) between cycles.
pub async fn run_configured<T, F, S>(
    transport: &T,
    core: &mut PerfCore,
    mut targets: F,
    mut configs: tokio::sync::watch::Receiver<crate::perfmgr::PerfMgrConfig>,
    shutdown: S,
) where
    T: Transport,
    F: FnMut() -> Vec<PerfPort>,
    S: Future<Output = ()>,
{
    let origin = tokio::time::Instant::now();
    let now = || origin.elapsed();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(origin + core.next_cycle_at()) => {}
            Ok(()) = configs.changed() => {
                let cfg = configs.borrow_and_update().clone();
                tracing::info!(interval_s = cfg.interval_s, "perfmgr: new configuration");
                core.set_config(cfg);
                continue;
            }
            _ = &mut shutdown => return,
        }
        let ports = targets();
        if ports.is_empty() {
            // Nothing to poll yet (no sweep published, or not master):
            // look again shortly rather than a whole interval later, so
            // the first cycle follows the first sweep.
            tokio::select! {
                _ = tokio::time::sleep(EMPTY_RETRY.min(core.config().interval())) => continue,
                _ = &mut shutdown => return,
            }
        }
        tracing::debug!(ports = ports.len(), "perfmgr: cycle starts");
        core.begin_cycle(now(), ports);
        let mut in_flight: FuturesUnordered<InFlight<'_>> = FuturesUnordered::new();
        while core.in_cycle() {
            while let Some((token, req)) = core.poll_request() {
                in_flight.push(Box::pin(ask(transport, token, req)));
            }
            let answer = tokio::select! {
                a = in_flight.next() => a,
                _ = &mut shutdown => return,
            };
            match answer {
                Some((token, answer)) => core.handle_answer(now(), token, answer),
                None => {
                    // Cannot happen: a cycle with nothing in flight and
                    // nothing to send has ended. Wait for the next one
                    // rather than spin.
                    tracing::error!("perfmgr: a cycle stalled with nothing in flight; abandoned");
                    let next = now() + core.config().interval();
                    core.begin_cycle(next, Vec::new());
                    break;
                }
            }
            while let Some(e) = core.poll_event() {
                tracing::warn!(
                    node_guid = %e.node_guid,
                    node_desc = %e.node_desc,
                    port = e.port,
                    counter = e.counter.iba_name(),
                    delta = e.delta,
                    "error rate jump: {e}"
                );
            }
        }
        let s = core.stats();
        tracing::debug!(
            ports = s.last_cycle_ports,
            polled = s.last_cycle_polled,
            skipped = s.last_cycle_skipped,
            seconds = s.last_cycle_duration.as_secs_f64(),
            "perfmgr: cycle done"
        );
        if s.last_cycle_skipped > 0 {
            tracing::info!(
                skipped = s.last_cycle_skipped,
                of = s.last_cycle_ports,
                "perfmgr: ports did not answer PerfMgt this cycle"
            );
        }
    }
}

async fn ask<T: Transport>(transport: &T, token: Token, req: PerfRequest) -> Answer {
    let answer = match transport.request(req.to_datagram()).await {
        Ok(d) => req.check_answer(&d.mad),
        Err(TransportError::Timeout { .. }) => Err(PerfFailure::Timeout),
        Err(TransportError::Malformed(_)) => Err(PerfFailure::Malformed),
        Err(_) => Err(PerfFailure::Transport),
    };
    (token, answer)
}
