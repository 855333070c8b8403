//! The SM as a service: periodic sweeps, answers to other SMs and tools,
//! traps, and the `--once` mode.
//!
//! ```text
//!  run() ── sweep loop (owns SubnetManager) ◄── Notify "sweep now" ──┐
//!             │ SmpClient                                           │
//!             ▼                                                     │
//!        MadTransport ── unsolicited MADs ──► responder task ───────┘
//!                                              (SMInfo GetResp, TrapRepress)
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tracing::{debug, error, info, warn};

use crate::config::Config;
use crate::mad::smp::SmpRoute;
use crate::mad::{AttributeId, Method, MgmtClass, SmInfoRepr, SmState, SmpAttribute, SmpRepr};
use crate::sm::{SubnetManager, SweepReport};
use crate::transport::{Datagram, Transport};

/// How `run` should behave.
#[derive(Clone)]
pub struct RunOptions {
    /// Where sweep results and MAD counts are published.
    pub metrics: Option<crate::metrics::Metrics>,
    /// Sweep until the subnet is up (at most `once_attempts` sweeps), then return.
    pub once: bool,
    pub once_attempts: u32,
    /// Keep guid2lid in `config.sm.cache_dir`.
    pub persist_lids: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { metrics: None, once: false, once_attempts: 3, persist_lids: true }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("sweep failed: {0}")]
    Sweep(#[from] crate::sm::SweepError),
    #[error("the subnet did not come up after {attempts} sweeps: {reasons}")]
    NotUp { attempts: u32, reasons: String },
}

/// Shared between the sweep loop and the responder.
struct Shared {
    sm_info: Mutex<SmInfoRepr>,
    sweep_now: Notify,
}

/// Runs the SM until `shutdown` resolves (or, with `once`, until the subnet
/// is up). Returns the last sweep's report.
pub async fn run<T: Transport + Clone>(
    transport: T,
    unsolicited: mpsc::Receiver<Datagram>,
    config: Config,
    options: RunOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<SweepReport, RunError> {
    let local = transport.local_port();
    let shared = Arc::new(Shared {
        sm_info: Mutex::new(SmInfoRepr {
            guid: local.port_guid,
            sm_key: 0,
            act_count: 0,
            priority: config.sm.priority,
            sm_state: SmState::Discovering,
        }),
        sweep_now: Notify::new(),
    });
    let responder = tokio::spawn(respond(transport.clone(), unsolicited, shared.clone()));
    let result = sweep_loop(transport, config, options, shared, shutdown).await;
    responder.abort();
    result
}

async fn sweep_loop<T: Transport>(
    transport: T,
    config: Config,
    options: RunOptions,
    shared: Arc<Shared>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<SweepReport, RunError> {
    let interval = Duration::from_secs(config.sm.sweep_interval_s);
    let mut sm = SubnetManager::new(transport, config.sm.clone(), options.persist_lids).with_qos(config.qos.clone());
    tokio::pin!(shutdown);
    let mut attempts = 0;
    let mut was_up = false;
    let mut last: Option<SweepReport>;
    loop {
        attempts += 1;
        let report = sm.sweep().await?;
        let up = report.subnet_up();
        if let Some(m) = &options.metrics {
            m.heavy_sweep(&report);
            m.transport(&sm.client().transport().stats());
        }
        if let Ok(mut info) = shared.sm_info.lock() {
            info.sm_state = SmState::Master;
            info.act_count = info.act_count.wrapping_add(1);
        }
        if up && !was_up {
            info!(
                nodes = report.subnet.nodes.len(),
                max_lid = report.lids.max_lid.0,
                elapsed_ms = report.elapsed.as_millis() as u64,
                "SUBNET UP"
            );
        } else if !up {
            for p in &report.inactive {
                warn!(port = %p, "port not active");
            }
            for p in report.problems() {
                warn!(problem = %p, "sweep problem");
            }
        }
        was_up = up;
        if options.once {
            if up {
                return Ok(report);
            }
            if attempts >= options.once_attempts {
                let mut reasons: Vec<String> = report.inactive.iter().take(5).cloned().collect();
                reasons.extend(report.problems().iter().take(5).map(|p| p.to_string()));
                if let Some(e) = &report.lids.error {
                    reasons.push(e.to_string());
                }
                return Err(RunError::NotUp { attempts, reasons: reasons.join("; ") });
            }
            continue;
        }
        last = Some(report);
        // Between heavy sweeps: light sweeps every interval until one finds
        // a change, a trap arrives, or the fabric was not fully up.
        loop {
            let wait = async {
                if interval.is_zero() {
                    std::future::pending::<()>().await
                } else {
                    tokio::time::sleep(interval).await
                }
            };
            tokio::select! {
                _ = &mut shutdown => {
                    info!("shutting down");
                    return Ok(last.take().expect("a sweep ran"));
                }
                _ = wait => {}
                _ = shared.sweep_now.notified() => {
                    info!("heavy sweep requested");
                    break;
                }
            }
            if !was_up {
                break;
            }
            let verdict = sm.light_sweep().await;
            if let Some(m) = &options.metrics {
                m.light_sweep();
                m.transport(&sm.client().transport().stats());
            }
            match verdict {
                Some(why) => {
                    info!(reason = %why, "heavy sweep");
                    break;
                }
                None => debug!("light sweep: no change"),
            }
        }
    }
}

/// Answers what other SMs and tools ask of the SM's port: SubnGet(SMInfo)
/// (how `sminfo` and peer SMs find us) and Trap() (answered with
/// TrapRepress; link traps trigger a sweep).
async fn respond<T: Transport>(transport: T, mut unsolicited: mpsc::Receiver<Datagram>, shared: Arc<Shared>) {
    while let Some(dgram) = unsolicited.recv().await {
        let Ok(req) = SmpRepr::parse_bytes(&dgram.mad) else {
            debug!(len = dgram.mad.len(), "unsolicited MAD that is not an SMP ignored");
            continue;
        };
        let reply = match (req.header.method, req.header.attribute_id) {
            (Method::Get, AttributeId::SmInfo) | (Method::Set, AttributeId::SmInfo) => {
                let info = shared.sm_info.lock().map(|i| *i).ok();
                info.map(|i| response(&req, Method::GetResp, i.to_data()))
            }
            (Method::Trap, _) => {
                info!(attr = ?req.header.attribute_id, "trap received; sweeping");
                shared.sweep_now.notify_one();
                Some(response(&req, Method::TrapRepress, req.data))
            }
            (m, a) => {
                debug!(method = ?m, attr = ?a, "unsolicited SMP not handled");
                None
            }
        };
        if let Some(mad) = reply {
            if let Err(e) = transport.send(Datagram { addr: dgram.addr, mad: mad.to_bytes().to_vec() }) {
                error!(error = %e, "could not answer SMP");
            }
        }
    }
}

/// The response to `req`: same TID and route, direction bit set on the way back.
fn response(req: &SmpRepr, method: Method, data: [u8; 64]) -> SmpRepr {
    let mut resp = req.clone();
    resp.header.method = method;
    resp.header.status = 0;
    resp.data = data;
    if let SmpRoute::Directed { inbound, .. } = &mut resp.route {
        *inbound = true;
    }
    debug_assert!(matches!(resp.header.mgmt_class, MgmtClass::SubnMgmtDirected | MgmtClass::SubnMgmtLid));
    resp
}
