//! A small HTTP/1.1 GET for `ibsm status` and `ibsm dump`: one request per
//! connection, the whole exchange under one timeout, errors naming the
//! URL.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::header::{CONNECTION, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;

/// One answer.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: Bytes,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{url}: not an http:// URL ({why})")]
    BadUrl { url: String, why: String },
    #[error("cannot reach {url}: {source} (is the SM running, with [metrics] listen at that address?)")]
    Connect { url: String, source: std::io::Error },
    #[error("{url}: {source}")]
    Http { url: String, source: hyper::Error },
    #[error("{url}: no complete answer within {:.1} s", after.as_secs_f64())]
    Timeout { url: String, after: Duration },
}

/// `GET url`, the whole exchange within `timeout`.
pub async fn get(url: &str, timeout: Duration) -> Result<Fetched, ClientError> {
    match tokio::time::timeout(timeout, get_inner(url)).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::Timeout { url: url.to_string(), after: timeout }),
    }
}

async fn get_inner(url: &str) -> Result<Fetched, ClientError> {
    let bad = |why: &str| ClientError::BadUrl { url: url.to_string(), why: why.to_string() };
    let uri: Uri = url.parse().map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only http:// is served"));
    }
    let authority = uri.authority().ok_or_else(|| bad("no host"))?.clone();
    let host = authority.host().trim_start_matches('[').trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(80);
    let connect = |source| ClientError::Connect { url: url.to_string(), source };
    let stream = tokio::net::TcpStream::connect((host, port)).await.map_err(connect)?;
    let http = |source| ClientError::Http { url: url.to_string(), source };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(http)?;
    // The connection is driven beside the request, and ends with it.
    let driver = tokio::spawn(conn);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let req = Request::get(path)
        .header(HOST, authority.as_str())
        .header(USER_AGENT, concat!("ibsm/", env!("CARGO_PKG_VERSION")))
        .header(CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| bad(&e.to_string()))?;
    let result = async {
        let resp = sender.send_request(req).await.map_err(http)?;
        let status = resp.status();
        let content_type = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = resp.into_body().collect().await.map_err(http)?.to_bytes();
        Ok(Fetched { status, content_type, body })
    }
    .await;
    driver.abort();
    result
}

/// The base URL of an SM's HTTP endpoint listening on `listen` (the
/// `[metrics] listen` value): a wildcard address is reached on loopback.
pub fn base_url_for_listen(listen: &str) -> String {
    match listen.parse::<SocketAddr>() {
        Ok(mut a) => {
            if a.ip().is_unspecified() {
                a.set_ip(match a {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            format!("http://{a}")
        }
        // A host name and port.
        Err(_) => format!("http://{listen}"),
    }
}

/// `base` (with or without a trailing slash) and `path` (from `/`).
pub fn join(base: &str, path: &str) -> String {
    format!("{}{path}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_from_listen_addresses() {
        assert_eq!(base_url_for_listen("127.0.0.1:9464"), "http://127.0.0.1:9464");
        assert_eq!(base_url_for_listen("0.0.0.0:9464"), "http://127.0.0.1:9464");
        assert_eq!(base_url_for_listen("[::]:80"), "http://[::1]:80");
        assert_eq!(base_url_for_listen("[fe80::1]:80"), "http://[fe80::1]:80");
        assert_eq!(base_url_for_listen("sm1.example:9464"), "http://sm1.example:9464");
        assert_eq!(join("http://h:1/", "/status"), "http://h:1/status");
        assert_eq!(join("http://h:1", "/status"), "http://h:1/status");
    }

    #[tokio::test]
    async fn bad_urls_and_closed_ports_name_the_url() {
        let e = get("https://127.0.0.1:1/status", Duration::from_secs(1)).await.unwrap_err();
        assert!(matches!(e, ClientError::BadUrl { .. }), "{e}");
        assert!(e.to_string().contains("https://127.0.0.1:1/status"), "{e}");
        // A port nobody listens on: bind one, learn its number, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let url = format!("http://127.0.0.1:{port}/status");
        let e = get(&url, Duration::from_secs(2)).await.unwrap_err();
        assert!(matches!(e, ClientError::Connect { .. }), "{e}");
        assert!(e.to_string().contains(&url), "{e}");
    }

    #[tokio::test]
    async fn a_silent_server_times_out() {
        // Accepts (the kernel does, from the backlog) and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/status", listener.local_addr().unwrap());
        let e = get(&url, Duration::from_millis(200)).await.unwrap_err();
        assert!(matches!(e, ClientError::Timeout { .. }), "{e}");
        assert!(e.to_string().contains(&url), "{e}");
    }
}
