//! Which path answers what: one `match` on the path, then the method.

use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};

use super::render::{Format, RenderCache};
use super::HttpState;
use crate::runtime::status::Health;
use crate::subnet::snapshot::Snapshot;

/// The files `/dump/<name>` serves, in the order `ibsm dump` writes them.
pub const DUMP_NAMES: [&str; 5] = ["subnet.lst", "opensm-lfts.dump", "opensm-mfts.dump", "guid2lid", "topology.dot"];

pub(super) const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
pub(super) const OPENMETRICS_TEXT: &str = crate::runtime::metrics::openmetrics::CONTENT_TYPE;
const PLAIN: &str = "text/plain; charset=utf-8";

pub(super) type Body = Full<Bytes>;

enum Route<'a> {
    Metrics,
    Status,
    Healthz,
    Readyz,
    Dump(&'a str, fn(&Snapshot) -> String),
    PortCounters,
}

/// The dump of every port's counters, apart from [`DUMP_NAMES`]: it comes
/// from the performance manager, not from a sweep's snapshot.
pub const PORT_COUNTERS_DUMP: &str = "port-counters";

/// The answer to one request.
pub(super) async fn respond(state: &Arc<HttpState>, renders: &RenderCache, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let route = match path {
        "/metrics" => Route::Metrics,
        "/status" => Route::Status,
        "/healthz" => Route::Healthz,
        "/readyz" => Route::Readyz,
        p => match p.strip_prefix("/dump/") {
            Some(PORT_COUNTERS_DUMP) => Route::PortCounters,
            Some(name) if dump_formatter(name).is_some() => Route::Dump(name, dump_formatter(name).expect("checked")),
            Some(name) => {
                return text(
                    StatusCode::NOT_FOUND,
                    format!(
                        "no dump named {name:?}; there are: {}, {PORT_COUNTERS_DUMP}\n",
                        DUMP_NAMES.join(", ")
                    ),
                )
            }
            None => {
                return text(
                    StatusCode::NOT_FOUND,
                    format!(
                        "nothing at {p}; ibsm serves /metrics, /status, /healthz, /readyz and /dump/<{}|{PORT_COUNTERS_DUMP}>\n",
                        DUMP_NAMES.join("|")
                    ),
                )
            }
        },
    };
    // HEAD is answered as GET; hyper sends the head only.
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, format!("{} {path}: only GET and HEAD\n", req.method()));
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match route {
        Route::Metrics => {
            let (format, content_type) =
                match wants_openmetrics(req.headers().get(ACCEPT).and_then(|v| v.to_str().ok())) {
                    true => (Format::OpenMetrics, OPENMETRICS_TEXT),
                    false => (Format::Text, PROMETHEUS_TEXT),
                };
            // A big fabric's exposition takes a while: it is rendered off
            // this thread (so a probe's /healthz is answered meanwhile),
            // once for every request waiting, and reused a moment.
            match renders.get(format).await {
                Ok(body) => with_type(StatusCode::OK, content_type, body),
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("rendering the metrics failed: {e}\n")),
            }
        }
        Route::Status => {
            let mut body = serde_json::to_vec_pretty(&state.status.status()).expect("the status serializes");
            body.push(b'\n');
            with_type(StatusCode::OK, "application/json", body)
        }
        Route::Healthz => match state.status.health() {
            h @ Health::Alive(_) => text(StatusCode::OK, format!("{h}\n")),
            h => text(StatusCode::SERVICE_UNAVAILABLE, format!("{h}\n")),
        },
        Route::Readyz => match state.status.readiness() {
            (true, why) => text(StatusCode::OK, format!("ready: {why}\n")),
            (false, why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")),
        },
        Route::PortCounters => {
            let snap = state.perf_counters.latest();
            if snap.stats.cycles == 0 {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no port counters yet: the performance manager is off ([perfmgr] enabled), not polling \
                     (a standby without on_standby), or has not finished its first cycle\n"
                        .to_string(),
                );
            }
            match tokio::task::spawn_blocking(move || crate::perfmgr::table::port_counters(&snap)).await {
                Ok(body) => with_type(StatusCode::OK, PLAIN, body),
                Err(e) => {
                    text(StatusCode::INTERNAL_SERVER_ERROR, format!("writing {PORT_COUNTERS_DUMP} failed: {e}\n"))
                }
            }
        }
        Route::Dump(name, format) => {
            let Some(snap) = state.snapshots.latest() else {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no snapshot yet: this SM has not finished a heavy sweep as master (standby, or still sweeping)\n"
                        .to_string(),
                );
            };
            let content_type = if name.ends_with(".dot") { "text/vnd.graphviz; charset=utf-8" } else { PLAIN };
            match tokio::task::spawn_blocking(move || format(&snap)).await {
                Ok(body) => with_type(StatusCode::OK, content_type, body),
                Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("writing {name} failed: {e}\n")),
            }
        }
    }
}

/// The formatter of the dump `name`, one of [`DUMP_NAMES`] (`crate::dump`
/// writes them from a snapshot, as OpenSM writes its files).
pub(super) fn dump_formatter(name: &str) -> Option<fn(&Snapshot) -> String> {
    Some(match name {
        "subnet.lst" => crate::dump::subnet_list,
        "opensm-lfts.dump" => crate::dump::lfts,
        "opensm-mfts.dump" => crate::dump::mfts,
        "guid2lid" => crate::dump::guid2lid,
        "topology.dot" => crate::dump::dot,
        _ => return None,
    })
}

/// Whether an `Accept` header prefers OpenMetrics to the Prometheus text
/// format: `application/openmetrics-text` with a quality above 0 and no
/// lower than that of `text/plain` (or of a wildcard covering it). No
/// header, or one naming neither, gets the text format.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    let (mut openmetrics, mut text) = (None::<f32>, None::<f32>);
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(Some(1.0), |(_, v)| v.trim().parse::<f32>().ok().filter(|q| (0.0..=1.0).contains(q)));
        let Some(q) = q else { continue };
        let slot = match media.as_str() {
            "application/openmetrics-text" => &mut openmetrics,
            "text/plain" | "text/*" | "*/*" => &mut text,
            _ => continue,
        };
        *slot = Some(slot.map_or(q, |old| old.max(q)));
    }
    match openmetrics {
        Some(om) if om > 0.0 => om >= text.unwrap_or(0.0),
        _ => false,
    }
}

/// Whether `path` is a probe's, one a probe slot serves.
pub(super) fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// The answer on a probe slot to anything but a probe.
pub(super) fn probes_only(path: &str) -> Response<Body> {
    let mut r = text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("{path}: every connection slot is taken; only /healthz and /readyz are answered now\n"),
    );
    r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

pub(super) fn text(status: StatusCode, body: String) -> Response<Body> {
    with_type(status, PLAIN, body)
}

fn with_type(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Every answer is the state of the moment.
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
