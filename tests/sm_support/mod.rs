//! Shared pieces of the tests that run whole SMs (`runtime::run`: election,
//! sweeps, SA) on the in-process fabric: starting and killing an SM,
//! waiting on a condition in tokio's time, what the fabric says about its
//! ports, SMInfo from a probe port, captured log lines, and `Net`, a fat
//! tree whose SMs and clients run in virtual time (`sim::VirtualTransport`).
#![allow(dead_code)]

pub mod mcast;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ibsm::config::Config;
use ibsm::mad::SaRecord;
use ibsm::mad::{AttributeId, Method, PortState, SmInfoRepr, SmState};
use ibsm::runtime::metrics::Metrics;
use ibsm::runtime::{run, RunOptions};
use ibsm::sim::{FabricBuilder, SharedFabric, SimDevice, VirtualClock, VirtualTransport};
use ibsm::topology::{NodeIdx, NodeKind, PortRef, Topology};
use ibsm::transport::sa_client::{SaClient, SaError};
use ibsm::transport::txn::TxnConfig;
use ibsm::transport::{Datagram, SmpClient, Transport};
use ibsm::types::{Guid, Lid};
use tokio::sync::mpsc;

/// The fabric of these tests: 4 leaves, 2 spines, 16 hosts.
pub const TOPO: &str = "fattree2:radix=8,leaves=4,spines=2,hosts=4";

/// A running SM: its runtime task and the port it sits on.
pub struct Sm {
    pub task: tokio::task::JoinHandle<()>,
    pub port: PortRef,
}

/// Runs a whole SM on `transport` until it is killed.
pub fn spawn_sm<T: Transport + Clone + Send + Sync + 'static>(
    transport: T,
    unsolicited: mpsc::Receiver<Datagram>,
    config: Config,
    options: RunOptions,
    port: PortRef,
) -> Sm {
    let task = tokio::spawn(async move {
        let _ = run(transport, unsolicited, config, options, std::future::pending::<()>()).await;
    });
    Sm { task, port }
}

/// Ends the SM as SIGKILL would: its transport and port go with it.
pub async fn kill(sm: Sm) {
    sm.task.abort();
    let _ = sm.task.await;
}

/// Checks `cond` every `step` of tokio's time (virtual when paused) until
/// it holds, for at most `limit`; returns how long that took.
pub async fn wait_every(step: Duration, what: &str, limit: Duration, mut cond: impl AsyncFnMut() -> bool) -> Duration {
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if cond().await {
            return start.elapsed();
        }
        tokio::time::sleep(step).await;
    }
    panic!("waited {limit:?} (tokio's clock) for {what}");
}

/// Every cabled port ACTIVE, and every LID-bearing port's LID.
pub fn lids_if_up(topo: &Topology, fabric: &SharedFabric) -> Option<HashMap<PortRef, Lid>> {
    let f = fabric.lock().unwrap();
    let mut out = HashMap::new();
    for link in &topo.links {
        for end in [link.a, link.b] {
            if f.port_state(end).ok()? != PortState::Active {
                return None;
            }
            let lid_port = match topo.node(end.node).kind {
                NodeKind::Switch => PortRef { node: end.node, port: 0 },
                _ => end,
            };
            out.insert(lid_port, f.lid_of(lid_port).ok()?);
        }
    }
    Some(out)
}

/// Sets other than SMInfo (polls and controls) the fabric has seen.
pub fn programming_sets(fabric: &SharedFabric) -> u64 {
    let f = fabric.lock().unwrap();
    f.smp_counts().iter().filter(|((a, m), _)| *m == Method::Set && *a != AttributeId::SmInfo).map(|(_, n)| n).sum()
}

/// SubnGet(SMInfo) of the SM at `lid`, as `sminfo` asks; `None` when it
/// does not answer with one.
pub async fn sm_state<T: Transport>(probe: &SmpClient<T>, lid: Lid) -> Option<SmState> {
    let smp = probe.lid_get(lid, AttributeId::SmInfo, 0).await.ok()?;
    SmInfoRepr::parse_bytes(&smp.data).ok().map(|i| i.sm_state)
}

/// A fabric (the fat tree [`TOPO`] unless told) whose SMs and clients run
/// in virtual time.
pub struct Net {
    pub topo: Topology,
    pub fabric: SharedFabric,
    pub clock: VirtualClock,
}

impl Net {
    pub fn new(seed: u64) -> Net {
        Net::with_spec(seed, TOPO)
    }

    /// Another fabric than [`TOPO`] (a topology spec).
    pub fn with_spec(seed: u64, spec: &str) -> Net {
        let topo = Topology::from_spec_or_file(spec).unwrap();
        let fabric = FabricBuilder::new(&topo).seed(seed).build_shared().unwrap();
        let clock = VirtualClock::new(&fabric);
        Net { topo, fabric, clock }
    }

    /// The `i`th host (in the topology's order).
    pub fn host(&self, i: usize) -> NodeIdx {
        self.topo.hosts().nth(i).unwrap()
    }

    /// Port 1 of the `i`th host.
    pub fn host_port(&self, i: usize) -> PortRef {
        PortRef { node: self.host(i), port: 1 }
    }

    /// A transport on port 1 of host `host`, and its unsolicited MADs.
    pub fn transport(&self, host: usize) -> (VirtualTransport, mpsc::Receiver<Datagram>) {
        let dev = SimDevice::attach(&self.fabric, self.host(host), 1).unwrap();
        VirtualTransport::spawn(dev, TxnConfig::default(), &self.clock)
    }

    /// A whole SM on port 1 of host `host` with `config`, LIDs not
    /// persisted, its metrics into `metrics` when given.
    pub fn start_sm(&self, host: usize, config: Config, metrics: Option<Metrics>) -> Sm {
        self.start_sm_with(host, config, RunOptions { persist_lids: false, metrics, ..RunOptions::default() })
    }

    /// A whole SM on port 1 of host `host`, run with `options`.
    pub fn start_sm_with(&self, host: usize, config: Config, options: RunOptions) -> Sm {
        let port = self.host_port(host);
        let dev = SimDevice::attach(&self.fabric, port.node, 1).unwrap();
        dev.set_is_sm(true);
        let (transport, unsolicited) = VirtualTransport::spawn(dev, TxnConfig::default(), &self.clock);
        spawn_sm(transport, unsolicited, config, options, port)
    }

    /// A trusted (`sm_key`) or ordinary (0) SA client on host `host`, once
    /// its port names `master` as its SM.
    pub async fn sa_client(&self, host: usize, master: Lid, sm_key: u64) -> SaClient<VirtualTransport> {
        let port = self.host_port(host);
        wait_every(Duration::from_millis(50), "the port to name the master", Duration::from_secs(30), async || {
            self.master_sm_lid(port) == master
        })
        .await;
        let sa = SaClient::new(self.transport(host).0).unwrap().with_sm_key(sm_key);
        assert_eq!(sa.sa_lid(), master);
        sa
    }

    /// Every cabled port ACTIVE, and every LID-bearing port's LID.
    pub fn lids_if_up(&self) -> Option<HashMap<PortRef, Lid>> {
        lids_if_up(&self.topo, &self.fabric)
    }

    pub fn lid(&self, port: PortRef) -> Lid {
        self.fabric.lock().unwrap().lid_of(port).unwrap()
    }

    pub fn master_sm_lid(&self, port: PortRef) -> Lid {
        self.fabric.lock().unwrap().port_info(port).unwrap().master_sm_lid
    }

    pub fn port_guid(&self, port: PortRef) -> Guid {
        self.topo.node(port.node).port_guid(port.port)
    }
}

/// Log lines, captured: everything at INFO and above polled on this thread
/// (the SMs' tasks under `current_thread`), so a test can check what the
/// SMs said.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

impl Logs {
    /// Starts capturing this thread's INFO-and-above lines until the guard drops.
    pub fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let sub = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish();
        (logs, tracing::subscriber::set_default(sub))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The lines that contain every one of `all`.
    pub fn lines_with(&self, all: &[&str]) -> Vec<String> {
        self.text().lines().filter(|l| all.iter().all(|w| l.contains(w))).map(str::to_owned).collect()
    }
}

/// Every record of `R` the SA at `sa` holds (retried while it answers
/// with an error status: not serving yet).
pub async fn sa_table<R: SaRecord + Default + Send + Sync>(sa: &SaClient<VirtualTransport>) -> Vec<R> {
    let mut records = None;
    wait_every(Duration::from_millis(50), "the SA to answer", Duration::from_secs(30), async || {
        match sa.get_table::<R>(0, &R::default()).await {
            Ok(r) => {
                records = Some(r);
                true
            }
            Err(SaError::Status { .. }) => false,
            Err(e) => panic!("GetTable({:?}): {e}", R::ATTRIBUTE),
        }
    })
    .await;
    records.unwrap()
}
