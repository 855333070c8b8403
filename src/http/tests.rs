//! The server seen from a socket: raw HTTP/1.1 bytes in, the bytes it
//! answers read back, on plain threads (no runtime of the caller's: the
//! server brings its own).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::*;
use crate::runtime::status::{Status, StatusBoard};
use crate::subnet::snapshot::Snapshot;

fn state() -> HttpState {
    HttpState {
        metrics: Metrics::new(),
        status: StatusBoard::new(),
        snapshots: Snapshots::new(),
        perf_counters: Default::default(),
    }
}

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A parsed answer.
#[derive(Debug)]
struct Answer {
    code: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads one answer from `s`: the head, then Content-Length bytes.
fn read_answer(s: &mut TcpStream) -> Option<Answer> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8(buf).unwrap();
    let code = head.split(' ').nth(1)?.parse().ok()?;
    let mut a = Answer { code, head, body: Vec::new() };
    let len: usize = a.header("content-length").map_or(0, |v| v.parse().unwrap());
    a.body = vec![0; len];
    s.read_exact(&mut a.body).ok()?;
    Some(a)
}

fn request(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Answer {
    let mut s = connect(addr);
    write!(s, "{method} {path} HTTP/1.1\r\nHost: t\r\n{extra}Connection: close\r\n\r\n").unwrap();
    read_answer(&mut s).unwrap_or_else(|| panic!("{method} {path}: no answer"))
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, "GET", path, "")
}

/// Whether the server closed `s` (EOF or reset) before `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut sink = [0u8; 4096];
    loop {
        match s.read(&mut sink) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < until, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn every_route() {
    let st = state();
    st.metrics.light_sweep();
    let server = spawn(local(), st.clone()).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);

    let m = get(addr, "/metrics");
    assert_eq!(m.code, 200);
    assert_eq!(m.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert!(m.text().lines().any(|l| l.starts_with("ibsm_") && l.contains("light")), "{}", m.text());

    let s = get(addr, "/status");
    assert_eq!(s.code, 200);
    assert_eq!(s.header("content-type"), Some("application/json"));
    let status: Status = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(status.sm.state, "STARTING");
    assert!(!status.ready);
    st.status.set_election(crate::election::State::Master, 9, Some(crate::Guid(5)), Some(crate::Lid(1)));
    let status: Status = serde_json::from_slice(&get(addr, "/status").body).unwrap();
    assert_eq!((status.sm.state.as_str(), status.sm.priority), ("MASTER", 9));

    // Health follows the heartbeat; readiness the owner's say-so.
    let h = get(addr, "/healthz");
    assert_eq!(h.code, 503, "{}", h.text());
    assert!(h.text().contains("no heartbeat"), "{}", h.text());
    st.status.heartbeat();
    assert_eq!(get(addr, "/healthz").code, 200);
    let r = get(addr, "/readyz");
    assert_eq!(r.code, 503);
    assert!(r.text().starts_with("not ready: starting"), "{}", r.text());
    st.status.ready("standby reached");
    let r = get(addr, "/readyz");
    assert_eq!((r.code, r.text().as_str()), (200, "ready: standby reached\n"));

    // Dumps want a snapshot.
    for name in DUMP_NAMES {
        let d = get(addr, &format!("/dump/{name}"));
        assert_eq!(d.code, 503, "{name}");
        assert!(d.text().contains("no snapshot yet"), "{}", d.text());
    }
    let d = get(addr, "/dump/passwd");
    assert_eq!(d.code, 404);
    assert!(d.text().contains("subnet.lst"), "{}", d.text());

    for path in ["/", "/metricsx", "/status/", "/dump", "/dump/", "/healthz/x"] {
        assert_eq!(get(addr, path).code, 404, "{path}");
    }
    // A query string does not change the route.
    assert_eq!(get(addr, "/healthz?verbose=1").code, 200);

    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let a = request(addr, method, "/metrics", "Content-Length: 0\r\n");
        assert_eq!(a.code, 405, "{method}");
        assert_eq!(a.header("allow"), Some("GET, HEAD"));
    }
    // An unknown path stays 404 whatever the method.
    assert_eq!(request(addr, "POST", "/nope", "Content-Length: 0\r\n").code, 404);

    // HEAD: the head of GET's answer, no body.
    let mut c = connect(addr);
    c.write_all(b"HEAD /status HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200 OK\r\n"), "{raw}");
    assert!(raw.ends_with("\r\n\r\n"), "a body after the head: {raw}");
    assert!(raw.to_ascii_lowercase().contains("content-type: application/json"), "{raw}");

    let stats = server.stats();
    assert!(stats.requests >= 20 && stats.refused == 0, "{stats:?}");
}

#[test]
fn dumps_come_from_the_newest_snapshot() {
    let (_, report) = crate::runtime::status::tests::swept();
    let st = state();
    let server = spawn(local(), st.clone()).unwrap();
    let addr = server.local_addr();
    let (node, port) = report.subnet.sm_port.unwrap();
    st.snapshots.publish(Snapshot {
        sequence: 1,
        taken_at: std::time::SystemTime::now(),
        master: report.subnet.node(node).port_guid(port),
        master_lid: report.subnet.current_lid(node, port).unwrap(),
        sweep: report.clone(),
    });
    for name in DUMP_NAMES {
        let d = get(addr, &format!("/dump/{name}"));
        let format = routes::dump_formatter(name).unwrap_or_else(|| panic!("{name} has no formatter"));
        assert_eq!(d.code, 200, "{name}: {}", d.text());
        assert_eq!(d.text(), format(&st.snapshots.latest().unwrap()), "{name}");
        // The fixture has no multicast groups: its MFT dump may be empty.
        assert!(!d.body.is_empty() || name == "opensm-mfts.dump", "{name}");
        let dot = name.ends_with(".dot");
        assert_eq!(d.header("content-type").unwrap().starts_with("text/vnd.graphviz"), dot, "{name}");
    }
}

#[test]
fn port_counters_come_from_the_performance_managers_last_cycle() {
    use crate::perfmgr::core::{PerfSnapshot, PerfStats, PortTotals};
    let st = state();
    let server = spawn(local(), st.clone()).unwrap();
    let addr = server.local_addr();
    let d = get(addr, "/dump/port-counters");
    assert_eq!(d.code, 503);
    assert!(d.text().contains("no port counters yet"), "{}", d.text());
    let mut totals = [Some(1); crate::perfmgr::counters::COUNTERS];
    totals[0] = Some(42);
    let port = PortTotals { node_guid: crate::types::Guid(0x77), node_desc: "h1".into(), port: 1, totals };
    st.perf_counters
        .publish_for_test(PerfSnapshot { ports: vec![port], stats: PerfStats { cycles: 1, ..Default::default() } });
    let d = get(addr, "/dump/port-counters");
    assert_eq!(d.code, 200, "{}", d.text());
    assert_eq!(d.text(), crate::perfmgr::table::port_counters(&st.perf_counters.latest()));
    assert!(d.text().lines().nth(1).unwrap().starts_with("0x0000000000000077\t1\th1\t42\t"), "{}", d.text());
    assert!(get(addr, "/dump/passwd").text().contains("port-counters"));
}

#[test]
fn accept_negotiation() {
    // What Prometheus 2.x sends by default, and a few others.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                      text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert!(wants_openmetrics(Some(prometheus)));
    assert!(wants_openmetrics(Some("application/openmetrics-text")));
    assert!(wants_openmetrics(Some("Application/OpenMetrics-Text; version=1.0.0")));
    assert!(!wants_openmetrics(None));
    assert!(!wants_openmetrics(Some("*/*")));
    assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
    assert!(!wants_openmetrics(Some("text/plain, application/openmetrics-text;q=0.5")));
    assert!(!wants_openmetrics(Some("application/openmetrics-text;q=0")));
    assert!(!wants_openmetrics(Some("application/openmetrics-text;q=nonsense")));
    assert!(wants_openmetrics(Some("text/plain;q=0.2, application/openmetrics-text;q=0.9")));
    assert!(!wants_openmetrics(Some(",,;;=,")));

    // On the wire: the content type follows what the server can write.
    let server = spawn(local(), state()).unwrap();
    let a = request(server.local_addr(), "GET", "/metrics", &format!("Accept: {prometheus}\r\n"));
    assert_eq!(a.code, 200);
    assert_eq!(a.header("content-type"), Some(routes::OPENMETRICS_TEXT));
    assert!(a.text().ends_with("# EOF\n"), "{}", a.text());
    let a = request(server.local_addr(), "GET", "/metrics", "Accept: text/plain\r\n");
    assert_eq!(a.header("content-type"), Some(routes::PROMETHEUS_TEXT));
    assert!(!a.text().contains("# EOF"), "{}", a.text());
}

#[test]
fn concurrent_scrapes_cost_one_render() {
    // A long cache, so that how slowly the threads start does not matter.
    let limits = HttpLimits { metrics_cache: Duration::from_secs(60), ..HttpLimits::default() };
    let st = state();
    st.metrics.light_sweep();
    let server = spawn_with(local(), st.clone(), limits).unwrap();
    let addr = server.local_addr();
    let start = Arc::new(std::sync::Barrier::new(16));
    let scrapers: Vec<_> = (0..16)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                let mut s = connect(addr);
                start.wait();
                s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
                read_answer(&mut s).expect("an answer")
            })
        })
        .collect();
    let bodies: Vec<Answer> = scrapers.into_iter().map(|t| t.join().unwrap()).collect();
    for a in &bodies {
        assert_eq!(a.code, 200, "{}", a.text());
        assert_eq!(a.body, bodies[0].body);
    }
    assert!(bodies[0].text().contains("ibsm_sweeps_total{kind=\"light\"} 1"), "{}", bodies[0].text());
    assert_eq!(server.stats().metrics_renders, 1, "{:?}", server.stats());
    // The other format is rendered apart, once.
    for _ in 0..3 {
        let a = request(addr, "GET", "/metrics", "Accept: application/openmetrics-text\r\n");
        assert!(a.text().ends_with("# EOF\n"), "{}", a.text());
    }
    assert_eq!(server.stats().metrics_renders, 2, "{:?}", server.stats());
}

#[test]
fn the_metrics_cache_expires() {
    let limits = HttpLimits { metrics_cache: Duration::from_millis(50), ..HttpLimits::default() };
    let st = state();
    let server = spawn_with(local(), st.clone(), limits).unwrap();
    let addr = server.local_addr();
    assert!(!get(addr, "/metrics").text().contains("ibsm_sweeps_total{kind=\"light\"} 1"));
    st.metrics.light_sweep();
    std::thread::sleep(Duration::from_millis(200));
    // A new render, with the sweep in it.
    assert!(get(addr, "/metrics").text().contains("ibsm_sweeps_total{kind=\"light\"} 1"));
    assert_eq!(server.stats().metrics_renders, 2);
}

#[test]
fn keep_alive_is_bounded() {
    let limits = HttpLimits { max_requests_per_connection: 3, ..HttpLimits::default() };
    let server = spawn_with(local(), state(), limits).unwrap();
    let mut s = connect(server.local_addr());
    for i in 1..=3 {
        s.write_all(b"GET /readyz HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let a = read_answer(&mut s).unwrap_or_else(|| panic!("answer {i}"));
        assert_eq!(a.code, 503);
        assert_eq!(a.header("connection") == Some("close"), i == 3, "request {i}: {}", a.head);
    }
    assert!(closed_within(&mut s, Duration::from_secs(5)), "closed after the last allowed request");
}

#[test]
fn idle_keep_alive_connections_are_closed() {
    let limits = HttpLimits { header_read_timeout: Duration::from_millis(300), ..HttpLimits::default() };
    let server = spawn_with(local(), state(), limits).unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET /status HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_answer(&mut s).unwrap().code, 200);
    assert!(closed_within(&mut s, Duration::from_secs(5)), "an idle connection outlived the header timeout");
}

#[test]
fn a_stalled_half_request_is_dropped() {
    let limits = HttpLimits { header_read_timeout: Duration::from_millis(300), ..HttpLimits::default() };
    let server = spawn_with(local(), state(), limits).unwrap();
    let mut s = connect(server.local_addr());
    s.write_all(b"GET /metr").unwrap();
    assert!(closed_within(&mut s, Duration::from_secs(5)), "a half request line held its connection");
    wait_for("the slot to be freed", || server.stats().open == 0);
}

#[test]
fn a_huge_header_is_refused() {
    let server = spawn(local(), state()).unwrap();
    let mut s = connect(server.local_addr());
    let big = "a".repeat(64 * 1024);
    // The server may close while the header is still being written.
    let _ = write!(s, "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: {big}\r\n\r\n");
    // Closed without an answer is refused too.
    if let Some(a) = read_answer(&mut s) {
        assert_eq!(a.code, 431, "{}", a.head);
    }
    assert!(closed_within(&mut s, Duration::from_secs(5)));
    // The server still serves others.
    assert_eq!(get(server.local_addr(), "/status").code, 200);
}

#[test]
fn a_slow_reader_is_cut_off() {
    let limits = HttpLimits {
        connection_timeout: Duration::from_millis(500),
        max_requests_per_connection: u32::MAX,
        ..HttpLimits::default()
    };
    let server = spawn_with(local(), state(), limits).unwrap();
    let mut s = connect(server.local_addr());
    // Asks again and again without ever reading: the answers fill the
    // socket buffers, the server's writes stall, it stops reading, and
    // this write times out.
    s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
    for _ in 0..200_000 {
        if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").is_err() {
            break;
        }
    }
    wait_for("the connection to be timed out", || server.stats().timed_out == 1 && server.stats().open == 0);
    assert_eq!(get(server.local_addr(), "/status").code, 200);
}

#[test]
fn connections_beyond_the_limit_are_refused() {
    let limits =
        HttpLimits { max_connections: 8, header_read_timeout: Duration::from_secs(5), ..HttpLimits::default() };
    let st = state();
    st.status.heartbeat();
    let server = spawn_with(local(), st.clone(), limits).unwrap();
    let addr = server.local_addr();
    // Eight clients that open and say nothing hold every slot.
    let mut stallers: Vec<TcpStream> = (0..8).map(|_| connect(addr)).collect();
    wait_for("the stallers to hold every slot", || server.stats().open == 8);

    // A hundred more, all at once: each is closed at once, long before the
    // header timeout would have freed it.
    let flood: Vec<_> = (0..100)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = connect(addr);
                let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
                let mut buf = Vec::new();
                let _ = s.read_to_end(&mut buf);
                buf
            })
        })
        .collect();
    for t in flood {
        let answer = t.join().unwrap();
        assert!(answer.is_empty(), "a refused client got {:?}", String::from_utf8_lossy(&answer));
    }
    let stats = server.stats();
    assert_eq!((stats.refused, stats.accepted, stats.open), (100, 8, 8), "{stats:?}");
    // The last four stallers took the probe slots.
    assert_eq!(stats.probe_only, 4, "{stats:?}");

    // The stallers are dropped at their header timeout; then a client that
    // behaves is served.
    for s in &mut stallers {
        assert!(closed_within(s, Duration::from_secs(10)), "a staller kept its slot");
    }
    wait_for("the slots to be freed", || server.stats().open == 0);
    let h = get(addr, "/healthz");
    assert_eq!(h.code, 200, "{}", h.text());
    for s in &stallers {
        let _ = s.shutdown(Shutdown::Both);
    }
}

#[test]
fn probes_are_answered_while_slow_readers_hold_every_other_slot() {
    let limits = HttpLimits {
        max_connections: 6,
        probe_connections: 2,
        max_requests_per_connection: u32::MAX,
        ..HttpLimits::default()
    };
    let st = state();
    st.status.heartbeat();
    let server = spawn_with(local(), st, limits).unwrap();
    let addr = server.local_addr();
    // Six clients scrape without ever reading, to hold every slot: on a
    // general slot the answers fill the socket buffers and the client
    // holds it until connection_timeout (two minutes); on a probe slot it
    // is answered 503 and closed.
    let (ended_tx, ended) = std::sync::mpsc::channel();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..6)
        .map(|_| {
            let (ended_tx, stop) = (ended_tx.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut s = connect(addr);
                s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
                let e = loop {
                    if let Err(e) = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n") {
                        break e;
                    }
                };
                let stalled = matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
                ended_tx.send(stalled).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        })
        .collect();
    let stalled = (0..6)
        .map(|_| ended.recv_timeout(Duration::from_secs(60)).expect("a slow reader to stall or be closed"))
        .filter(|&s| s)
        .count();
    assert_eq!(stalled, 4, "{:?}", server.stats());
    wait_for("the probe slots to be freed", || server.stats().open == 4);

    let h = get(addr, "/healthz");
    assert_eq!(h.code, 200, "{}", h.text());
    let r = get(addr, "/readyz");
    assert_eq!(r.code, 503);
    assert!(r.text().starts_with("not ready"), "{}", r.text());
    // A probe slot answers nothing else.
    let m = get(addr, "/metrics");
    assert_eq!(m.code, 503);
    assert!(m.text().contains("only /healthz and /readyz"), "{}", m.text());
    assert_eq!(m.header("retry-after"), Some("1"));
    // And one request only: a client cannot keep the slot.
    let mut s = connect(addr);
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(read_answer(&mut s).unwrap().code, 200);
    assert!(closed_within(&mut s, Duration::from_secs(5)), "a probe slot was kept alive");
    let stats = server.stats();
    assert_eq!((stats.probe_only, stats.refused, stats.timed_out), (6, 0, 0), "{stats:?}");

    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    // No slot for probes at all is refused.
    let limits = HttpLimits { max_connections: 4, probe_connections: 4, ..HttpLimits::default() };
    assert!(spawn_with(local(), state(), limits).is_err());
}

#[test]
fn a_well_behaved_client_is_served_during_a_flood() {
    // The flood opens and closes connections as fast as it can; slots free
    // up as fast, and the client that retries on a refusal gets in.
    let limits = HttpLimits { max_connections: 4, probe_connections: 1, ..HttpLimits::default() };
    let st = state();
    st.status.heartbeat();
    let server = spawn_with(local(), st, limits).unwrap();
    let addr = server.local_addr();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooders: Vec<_> = (0..8)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // Holds a slot a little while, sending nothing.
                    let s = connect(addr);
                    std::thread::sleep(Duration::from_millis(20));
                    drop(s);
                }
            })
        })
        .collect();
    // The client starts once the flood fills the slots, not before.
    wait_for("the flood to hit the limit", || server.stats().refused > 0);
    let until = Instant::now() + Duration::from_secs(20);
    let mut served = false;
    while Instant::now() < until && !served {
        let mut s = connect(addr);
        if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").is_ok() {
            served = read_answer(&mut s).is_some_and(|a| a.code == 200);
        }
    }
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.join().unwrap();
    }
    assert!(served, "the well-behaved client was never served: {:?}", server.stats());
    assert!(server.stats().refused > 0, "the flood never hit the limit: {:?}", server.stats());
}

#[test]
fn the_client_reads_what_the_server_serves() {
    let st = state();
    st.status.record_error("disk full");
    let server = spawn(local(), st).unwrap();
    let base = format!("http://{}", server.local_addr());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let f = client::get(&client::join(&base, "/status"), Duration::from_secs(5)).await.unwrap();
        assert_eq!(f.status, hyper::StatusCode::OK);
        assert_eq!(f.content_type.as_deref(), Some("application/json"));
        let s: Status = serde_json::from_slice(&f.body).unwrap();
        assert_eq!(s.errors[0].message, "disk full");
        let f = client::get(&client::join(&base, "/dump/guid2lid"), Duration::from_secs(5)).await.unwrap();
        assert_eq!(f.status, hyper::StatusCode::SERVICE_UNAVAILABLE);
    });
}

#[test]
fn shutdown_frees_the_port() {
    let server = spawn(local(), state()).unwrap();
    let addr = server.local_addr();
    assert_eq!(get(addr, "/status").code, 200);
    server.shutdown();
    assert!(TcpStream::connect(addr).is_err(), "still listening after shutdown");
    // Bound twice: the second is an error, not a panic.
    let first = spawn(local(), state()).unwrap();
    assert!(spawn(first.local_addr(), state()).is_err());
}
