//! The SM's HTTP endpoints: `/metrics`, `/status`, `/healthz`, `/readyz`
//! and `/dump/<name>`, on hyper's HTTP/1.1 server.
//!
//! ```text
//!  owner task (main runtime)          HTTP thread (its own current_thread runtime)
//!  ─────────────────────────          ──────────────────────────────────────────────
//!  Metrics ── counters ─────────┐     accept loop ── at most max_connections ──┐
//!  StatusBoard ── arc-swap ─────┼──►  one task per connection (hyper http1)    │
//!  Snapshots ── arc-swap ───────┘     renders (metrics, dumps) on its blocking ◄┘
//!                                     pool, so /healthz answers during them;
//!                                     /metrics one render at a time, cached
//! ```
//!
//! The SM only ever writes what it shares (atomics and pointer swaps) and
//! never waits for this thread; a client, however slow, holds nothing but
//! its own connection slot, and only for as long as [`HttpLimits`] allow.
//! A few slots are kept for probes: when slow clients hold every other
//! one, `/healthz` and `/readyz` are still answered, so a supervisor does
//! not restart an SM that is only being scraped badly.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Semaphore};
use tracing::{debug, warn};

use crate::runtime::metrics::Metrics;
use crate::runtime::status::StatusBoard;
use crate::subnet::snapshot::Snapshots;

pub mod client;
mod render;
mod routes;

pub use routes::{wants_openmetrics, DUMP_NAMES, PORT_COUNTERS_DUMP};

/// What the endpoints serve from; clones share everything.
#[derive(Clone)]
pub struct HttpState {
    pub metrics: Metrics,
    pub status: StatusBoard,
    pub snapshots: Snapshots,
    /// The performance manager's latest counters, for `/dump/port-counters`.
    pub perf_counters: crate::perfmgr::PerfShared,
}

/// The bounds on clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections open at once, `probe_connections` included; one more
    /// is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Of `max_connections`, the slots given only once all others are
    /// taken, and then only to answer one `/healthz` or `/readyz` (any
    /// other path is answered 503): a probe's answer is small enough never
    /// to stall on a slow reader, so these slots free up within
    /// `header_read_timeout` and a few seconds, whatever the others do.
    pub probe_connections: usize,
    /// Time to send a request's whole head, counted from when the server
    /// starts waiting for it: also how long a kept-alive connection may sit
    /// idle.
    pub header_read_timeout: Duration,
    /// The request line and headers together; more is answered 431 and the
    /// connection closed.
    pub max_header_bytes: usize,
    /// Time to build one answer (rendering included); past it, 503.
    pub request_timeout: Duration,
    /// A connection's whole life, whatever it does: a client reading its
    /// answer slowly is cut off here.
    pub connection_timeout: Duration,
    /// Requests one connection may make; the last answer says
    /// `Connection: close`.
    pub max_requests_per_connection: u32,
    /// How long a `/metrics` render is reused (per format): scrapers
    /// asking within it cost nothing. A render slower than this is reused
    /// for as long as it took. Zero still shares a render among the
    /// requests that wait for it.
    pub metrics_cache: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 32,
            probe_connections: 4,
            header_read_timeout: Duration::from_secs(5),
            max_header_bytes: 16 * 1024,
            request_timeout: Duration::from_secs(60),
            connection_timeout: Duration::from_secs(120),
            max_requests_per_connection: 100,
            metrics_cache: Duration::from_secs(1),
        }
    }
}

/// Connection counts since the server started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HttpStats {
    /// Connections served (given a slot).
    pub accepted: u64,
    /// Connections closed at once because every slot was taken.
    pub refused: u64,
    /// Connections given a probe slot (every other slot was taken).
    pub probe_only: u64,
    /// Connections open now.
    pub open: u64,
    /// Requests answered (any status).
    pub requests: u64,
    /// Connections ended by `connection_timeout`.
    pub timed_out: u64,
    /// `/metrics` expositions rendered (either format); requests answered
    /// from the cache, or sharing a render, do not count.
    pub metrics_renders: u64,
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    probe_only: AtomicU64,
    open: AtomicU64,
    requests: AtomicU64,
    timed_out: AtomicU64,
}

/// The running server. Dropping it stops the server (and waits for its
/// thread, at most about a second).
pub struct HttpHandle {
    addr: SocketAddr,
    counters: Arc<Counters>,
    renders: Arc<render::RenderCache>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpHandle {
    /// The address the server is bound to (the real port when asked for 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> HttpStats {
        let c = &self.counters;
        HttpStats {
            accepted: c.accepted.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            probe_only: c.probe_only.load(Ordering::Relaxed),
            open: c.open.load(Ordering::Relaxed),
            requests: c.requests.load(Ordering::Relaxed),
            timed_out: c.timed_out.load(Ordering::Relaxed),
            metrics_renders: self.renders.renders(),
        }
    }

    /// Stops accepting, drops every connection and waits for the thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for HttpHandle {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

impl std::fmt::Debug for HttpHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpHandle").field("addr", &self.addr).field("stats", &self.stats()).finish()
    }
}

/// Binds `addr` and serves `state` with the default [`HttpLimits`] on a
/// thread of its own; returns once bound.
pub fn spawn(addr: SocketAddr, state: HttpState) -> std::io::Result<HttpHandle> {
    spawn_with(addr, state, HttpLimits::default())
}

/// [`spawn`] with other limits.
pub fn spawn_with(addr: SocketAddr, state: HttpState, limits: HttpLimits) -> std::io::Result<HttpHandle> {
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("HTTP limits: {why}"));
    if limits.max_connections <= limits.probe_connections {
        return Err(invalid("max_connections must be more than probe_connections"));
    }
    if limits.max_requests_per_connection == 0 {
        return Err(invalid("max_requests_per_connection must be at least 1"));
    }
    let std_listener = std::net::TcpListener::bind(addr)?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        // Renders run here; the connection limit bounds the queue.
        .max_blocking_threads(2)
        .thread_name("ibsm-http-render")
        .build()?;
    let listener = {
        let _guard = rt.enter();
        TcpListener::from_std(std_listener)?
    };
    let counters = Arc::new(Counters::default());
    let metrics = state.metrics.clone();
    let renders = Arc::new(render::RenderCache::new(
        limits.metrics_cache,
        Arc::new(move |format| match format {
            render::Format::Text => metrics.render(),
            render::Format::OpenMetrics => metrics.render_openmetrics(),
        }),
    ));
    let (stop_tx, stop_rx) = oneshot::channel();
    let c = counters.clone();
    let r = renders.clone();
    let thread = std::thread::Builder::new().name("ibsm-http".into()).spawn(move || {
        rt.block_on(accept_loop(listener, Arc::new(state), r, limits, c, stop_rx));
        // A render still running is abandoned, not awaited.
        rt.shutdown_timeout(Duration::from_secs(1));
    })?;
    Ok(HttpHandle { addr, counters, renders, stop: Some(stop_tx), thread: Some(thread) })
}

/// How long a probe slot's connection may take past its request head.
const PROBE_ANSWER_TIME: Duration = Duration::from_secs(5);

/// Decrements the open count when a connection ends, however it ends.
struct OpenGuard(Arc<Counters>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<HttpState>,
    renders: Arc<render::RenderCache>,
    limits: HttpLimits,
    counters: Arc<Counters>,
    mut stop: oneshot::Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections - limits.probe_connections));
    let probe_slots = Arc::new(Semaphore::new(limits.probe_connections));
    // A probe connection asks once, gets a few hundred bytes, and is gone.
    let probe_life = limits.connection_timeout.min(limits.header_read_timeout + PROBE_ANSWER_TIME);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes)
        // The read buffer holds the head; hyper's minimum is 8 KiB.
        .max_buf_size((limits.max_header_bytes * 2).max(8192))
        .keep_alive(limits.max_requests_per_connection > 1);
    let mut probe_builder = builder.clone();
    probe_builder.keep_alive(false);
    let (builder, probe_builder) = (Arc::new(builder), Arc::new(probe_builder));
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = &mut stop => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors, say: do not spin on it.
                warn!(error = %e, "http: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (permit, probe_only) = match slots.clone().try_acquire_owned() {
            Ok(p) => (p, false),
            Err(_) => match probe_slots.clone().try_acquire_owned() {
                Ok(p) => {
                    counters.probe_only.fetch_add(1, Ordering::Relaxed);
                    (p, true)
                }
                Err(_) => {
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                    debug!(%peer, max = limits.max_connections, "http: every connection slot taken; closing");
                    drop(stream);
                    continue;
                }
            },
        };
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        counters.open.fetch_add(1, Ordering::Relaxed);
        let guard = OpenGuard(counters.clone());
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let renders = renders.clone();
        let (builder, life) = match probe_only {
            false => (builder.clone(), limits.connection_timeout),
            true => (probe_builder.clone(), probe_life),
        };
        let counters = counters.clone();
        tokio::spawn(async move {
            let _slot = permit;
            let _guard = guard;
            let served = Arc::new(AtomicU32::new(0));
            let service = {
                let counters = counters.clone();
                service_fn(move |req| {
                    let state = state.clone();
                    let renders = renders.clone();
                    let n = served.fetch_add(1, Ordering::Relaxed) + 1;
                    let counters = counters.clone();
                    async move {
                        if probe_only && !routes::is_probe(req.uri().path()) {
                            counters.requests.fetch_add(1, Ordering::Relaxed);
                            return Ok(routes::probes_only(req.uri().path()));
                        }
                        let mut resp =
                            match tokio::time::timeout(limits.request_timeout, routes::respond(&state, &renders, req))
                                .await
                            {
                                Ok(r) => r,
                                Err(_) => routes::text(
                                    hyper::StatusCode::SERVICE_UNAVAILABLE,
                                    format!(
                                        "timed out after {:.1} s building the answer\n",
                                        limits.request_timeout.as_secs_f64()
                                    ),
                                ),
                            };
                        if n >= limits.max_requests_per_connection {
                            resp.headers_mut()
                                .insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
                        }
                        counters.requests.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, Infallible>(resp)
                    }
                })
            };
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(life, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!(%peer, error = %e, "http: connection ended with an error"),
                Err(_) => {
                    counters.timed_out.fetch_add(1, Ordering::Relaxed);
                    debug!(%peer, "http: connection open too long; closed");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests;
