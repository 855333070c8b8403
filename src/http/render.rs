//! `/metrics` rendered once for many: at most one render runs at a time
//! (both formats share the one lock), every request waiting for it takes
//! its result, and a result is reused for a while after.
//!
//! ```text
//!  request ── lock ──► fresh?  ── yes ──► the cached bytes
//!                        │ no
//!                        ▼
//!               blocking pool: render, store, unlock ──► the new bytes
//! ```
//!
//! The render task, not the request, holds the lock: a request that gives
//! up (its `request_timeout`) leaves the render running to the end, and
//! the client that retries waits for that same render instead of starting
//! another beside it. So however many scrapers ask, the exposition costs
//! one render per format per [`HttpLimits::metrics_cache`] at most, on one
//! core at most.
//!
//! [`HttpLimits::metrics_cache`]: super::HttpLimits::metrics_cache

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Bytes;
use tokio::sync::Mutex;

/// The two expositions `/metrics` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// The Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics 1.0.
    OpenMetrics,
}

impl Format {
    fn slot(self) -> usize {
        match self {
            Format::Text => 0,
            Format::OpenMetrics => 1,
        }
    }
}

/// What renders an exposition; the server's calls `Metrics::render*`.
pub(super) type RenderFn = dyn Fn(Format) -> String + Send + Sync;

/// One render's result.
struct Rendered {
    body: Bytes,
    /// When it was finished.
    done: Instant,
    /// How long it took.
    took: Duration,
}

/// The cache and its single-flight lock; shared by every connection.
pub(super) struct RenderCache {
    render: Arc<RenderFn>,
    ttl: Duration,
    slots: Arc<Mutex<[Option<Rendered>; 2]>>,
    renders: Arc<AtomicU64>,
}

impl RenderCache {
    /// Reuses a render for `ttl` after it finished, or for as long as it
    /// took when that is longer: rendering then keeps at most half of one
    /// core busy, however many ask.
    pub(super) fn new(ttl: Duration, render: Arc<RenderFn>) -> RenderCache {
        RenderCache { render, ttl, slots: Arc::new(Mutex::new([None, None])), renders: Arc::default() }
    }

    /// Renders run so far (either format).
    pub(super) fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }

    /// The exposition in `format`: cached, the one being rendered, or a new
    /// render. Errs only when the render panicked.
    pub(super) async fn get(&self, format: Format) -> Result<Bytes, String> {
        let asked = Instant::now();
        let mut slots = self.slots.clone().lock_owned().await;
        if let Some(r) = &slots[format.slot()] {
            // Finished after this request came means it was in flight
            // when it came: as good as one started for it.
            if r.done >= asked || r.done.elapsed() < self.ttl.max(r.took) {
                return Ok(r.body.clone());
            }
        }
        // Stale: let it go before the new one is built, so that (past the
        // responses still sending it) one body per format is held.
        slots[format.slot()] = None;
        let render = self.render.clone();
        let renders = self.renders.clone();
        // The guard moves into the render, and is released when the render
        // has stored its result, whether or not this request still waits.
        let job = tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            let body = Bytes::from(render(format));
            renders.fetch_add(1, Ordering::Relaxed);
            slots[format.slot()] = Some(Rendered { body: body.clone(), done: Instant::now(), took: start.elapsed() });
            drop(slots);
            body
        });
        job.await.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A render that takes `took`, counts the renders running at once and
    /// the most ever, and writes its format and sequence number.
    struct Slow {
        took: Duration,
        running: AtomicUsize,
        most: AtomicUsize,
        n: AtomicU64,
    }

    fn slow(took: Duration) -> Arc<Slow> {
        Arc::new(Slow { took, running: AtomicUsize::new(0), most: AtomicUsize::new(0), n: AtomicU64::new(0) })
    }

    fn cache(ttl: Duration, s: &Arc<Slow>) -> Arc<RenderCache> {
        let s = s.clone();
        Arc::new(RenderCache::new(
            ttl,
            Arc::new(move |f| {
                let now = s.running.fetch_add(1, Ordering::SeqCst) + 1;
                s.most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(s.took);
                s.running.fetch_sub(1, Ordering::SeqCst);
                format!("{f:?} {}", s.n.fetch_add(1, Ordering::SeqCst) + 1)
            }),
        ))
    }

    fn runtime() -> tokio::runtime::Runtime {
        // The server's: one thread, a blocking pool of two.
        tokio::runtime::Builder::new_current_thread().enable_all().max_blocking_threads(2).build().unwrap()
    }

    #[test]
    fn concurrent_requests_share_one_render() {
        let s = slow(Duration::from_millis(200));
        let c = cache(Duration::ZERO, &s);
        runtime().block_on(async {
            let asks: Vec<_> = (0..16)
                .map(|_| {
                    tokio::spawn({
                        let c = c.clone();
                        async move { c.get(Format::Text).await }
                    })
                })
                .collect();
            for a in asks {
                assert_eq!(a.await.unwrap().unwrap(), "Text 1");
            }
        });
        assert_eq!((c.renders(), s.most.load(Ordering::SeqCst)), (1, 1));
    }

    #[test]
    fn formats_are_cached_apart_and_never_rendered_at_once() {
        let s = slow(Duration::from_millis(100));
        let c = cache(Duration::from_secs(60), &s);
        runtime().block_on(async {
            let asks: Vec<_> = [Format::Text, Format::OpenMetrics, Format::Text, Format::OpenMetrics]
                .into_iter()
                .map(|f| {
                    tokio::spawn({
                        let c = c.clone();
                        async move { c.get(f).await.unwrap() }
                    })
                })
                .collect();
            let mut got = Vec::new();
            for a in asks {
                got.push(a.await.unwrap());
            }
            assert_eq!(got[0], got[2]);
            assert_eq!(got[1], got[3]);
            assert!(got[0].starts_with(b"Text ") && got[1].starts_with(b"OpenMetrics "), "{got:?}");
            // Within the ttl: cached.
            assert_eq!(c.get(Format::Text).await.unwrap(), got[0]);
        });
        assert_eq!((c.renders(), s.most.load(Ordering::SeqCst)), (2, 1));
    }

    #[test]
    fn a_request_that_gives_up_does_not_start_a_second_render() {
        let s = slow(Duration::from_millis(300));
        let c = cache(Duration::ZERO, &s);
        runtime().block_on(async {
            // Times out while its render runs on.
            assert!(tokio::time::timeout(Duration::from_millis(50), c.get(Format::Text)).await.is_err());
            // The retry waits for that render rather than starting one.
            assert_eq!(c.get(Format::Text).await.unwrap(), "Text 1");
        });
        assert_eq!((c.renders(), s.most.load(Ordering::SeqCst)), (1, 1));
    }

    #[test]
    fn a_stale_render_is_replaced() {
        let s = slow(Duration::from_millis(1));
        let c = cache(Duration::from_millis(50), &s);
        runtime().block_on(async {
            assert_eq!(c.get(Format::Text).await.unwrap(), "Text 1");
            tokio::time::sleep(Duration::from_millis(120)).await;
            assert_eq!(c.get(Format::Text).await.unwrap(), "Text 2");
        });
        assert_eq!(c.renders(), 2);
    }
}
