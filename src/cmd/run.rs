//! `ibsm run`: the subnet manager, as a service or `--once`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;

use crate::config::Config;
use crate::exchange::txn::TxnConfig;
use crate::runtime::backend::{self, PortArgs, Role};
use crate::runtime::{self, RunOptions};

#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub port: PortArgs,
    /// Configuration file (TOML; see deploy/ibsm.toml).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Sweep until the subnet is up, log SUBNET UP and exit (non-zero with
    /// the reason when it cannot be brought up).
    #[arg(long)]
    pub once: bool,
    /// Where guid2lid is kept (overrides sm.cache_dir).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Ignore the LIDs ports hold and the guid2lid file on the first sweep (OpenSM -r).
    #[arg(long, short = 'r')]
    pub reassign_lids: bool,
    /// LID mask control 0-7 (overrides sm.lmc).
    #[arg(long, value_name = "N")]
    pub lmc: Option<u8>,
    /// Election priority 0-15, higher wins (overrides sm.priority).
    #[arg(long, short = 'p', value_name = "N", value_parser = clap::value_parser!(u8).range(0..=15))]
    pub priority: Option<u8>,
    /// How often a standby polls the master, in ms (overrides sm.sminfo_polling_timeout_ms).
    #[arg(long, value_name = "MS")]
    pub sminfo_polling_timeout: Option<u64>,
    /// Missed polls before a standby takes over (overrides sm.polling_retry_number).
    #[arg(long, value_name = "N")]
    pub polling_retry_number: Option<u32>,
    /// Seconds between sweeps (overrides sm.sweep_interval_s).
    #[arg(long, value_name = "S")]
    pub sweep_interval: Option<u64>,
    /// SMPs in flight at once (overrides transport.window).
    #[arg(long, value_name = "N")]
    pub window: Option<usize>,
    /// Write the log here instead of standard error.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// Log as JSON lines.
    #[arg(long)]
    pub log_json: bool,
    /// Routing engine chain, e.g. `ftree,updn,minhop` (overrides sm.routing_engine).
    #[arg(long, value_name = "ENGINES", value_delimiter = ',')]
    pub routing_engine: Vec<String>,
    /// OpenSM's partitions.conf (overrides sm.partition_config_file; OpenSM -P).
    #[arg(long, short = 'P', value_name = "FILE")]
    pub partitions: Option<PathBuf>,
    /// Partition enforcement on switch ports facing end ports: both, in,
    /// out, off (overrides sm.part_enforce; OpenSM -Z).
    #[arg(long, value_name = "MODE")]
    pub part_enforce: Option<crate::partition::PartEnforce>,
    /// Address of the Prometheus endpoint, e.g. 127.0.0.1:9464 (overrides metrics.listen).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
}

impl Args {
    /// The configuration file with the command line's overrides applied.
    pub fn config(&self) -> Result<Config, crate::config::ConfigError> {
        let mut c = match &self.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        if let Some(d) = &self.cache_dir {
            c.sm.cache_dir = d.clone();
        }
        if self.reassign_lids {
            c.sm.reassign_lids = true;
        }
        if let Some(l) = self.lmc {
            c.sm.lmc = l;
        }
        if let Some(s) = self.sweep_interval {
            c.sm.sweep_interval_s = s;
        }
        if let Some(p) = self.priority {
            c.sm.priority = p;
        }
        if let Some(ms) = self.sminfo_polling_timeout {
            c.sm.sminfo_polling_timeout_ms = ms.max(1);
        }
        if let Some(n) = self.polling_retry_number {
            c.sm.polling_retry_number = n.max(1);
        }
        if let Some(w) = self.window {
            c.transport.window = w;
        }
        if !self.routing_engine.is_empty() {
            c.sm.routing_engine = self.routing_engine.clone();
        }
        if let Some(p) = &self.partitions {
            c.sm.partition_config_file = Some(p.clone());
        }
        if let Some(e) = self.part_enforce {
            c.sm.part_enforce = e;
        }
        if let Some(l) = &self.metrics_listen {
            c.metrics.listen = Some(l.clone());
        }
        if let Some(ca) = &self.port.ca {
            c.port.ca = Some(ca.clone());
        }
        // The overrides are checked as the file's values are.
        let named = self.config.clone().unwrap_or_else(|| "the command line".into());
        c.validate().map_err(|invalid| crate::config::ConfigError::Invalid { path: named, invalid })?;
        Ok(c)
    }
}

/// `ibsm run`.
pub async fn run(args: Args) -> ExitCode {
    let config = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ibsm run: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(h) = crate::logging::handle() {
        if let Err(e) = h.set_config_level(&config.log.level) {
            eprintln!("ibsm run: log.level: {e}");
            return ExitCode::from(2);
        }
    }
    let mut port = args.port.clone();
    if port.sim.is_none() && port.ca.is_none() && port.guid.is_none() {
        port.ca = config.port.ca.clone();
        port.port = config.port.port;
        port.guid = config.port.guid.map(crate::types::Guid);
    }
    let txn = TxnConfig::of(&config.transport);
    let opened = match backend::open(&port, txn, Role::SubnetManager) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ibsm run: {e}");
            return ExitCode::from(2);
        }
    };
    // A simulated fabric has no state worth keeping across runs unless the
    // operator names a cache directory.
    let persist = port.sim.is_none() || args.cache_dir.is_some();
    // The HTTP endpoints (/metrics, /status, /healthz, /readyz, /dump)
    // run on a thread of their own.
    let status = crate::runtime::status::StatusBoard::new();
    let snapshots = crate::subnet::snapshot::Snapshots::new();
    let perf_counters = crate::perfmgr::PerfShared::new();
    let mut http = None;
    let metrics = match config.metrics.listen.as_deref().filter(|l| !l.is_empty() && !args.once) {
        Some(listen) => {
            let addr = match listen.parse::<std::net::SocketAddr>() {
                Ok(addr) => addr,
                Err(e) => {
                    eprintln!("ibsm run: metrics.listen = {listen}: {e}");
                    return ExitCode::from(2);
                }
            };
            let m = crate::runtime::metrics::Metrics::new();
            let state = crate::http::HttpState {
                metrics: m.clone(),
                status: status.clone(),
                snapshots: snapshots.clone(),
                perf_counters: perf_counters.clone(),
            };
            match crate::http::spawn(addr, state) {
                Ok(h) => {
                    tracing::info!(addr = %h.local_addr(), "HTTP endpoints served (/metrics, /status, /healthz, /readyz, /dump)");
                    http = Some(h);
                }
                // The fabric still needs its SM: run without the endpoints
                // (a second SM on the host holding the default port, say).
                Err(e) => tracing::error!(%addr, error = %e, "HTTP endpoints not served; the SM runs without them"),
            }
            Some(m)
        }
        None => None,
    };
    let options = RunOptions {
        metrics,
        once: args.once,
        persist_lids: persist,
        operator_signals: !args.once,
        status,
        snapshots,
        perf_counters,
        notifier: std::sync::Arc::new(crate::runtime::notify::Notifier::from_env()),
        sa_placement: crate::runtime::sa_task::SaPlacement::OwnThread,
        reload: {
            let args = args.clone();
            Some(std::sync::Arc::new(move || args.config().map_err(|e| e.to_string())))
        },
        ..RunOptions::default()
    };
    // SIGINT, or SIGTERM from systemd or an operator: the SM stops cleanly.
    let shutdown = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    let outcome = runtime::run(opened.transport.clone(), opened.unsolicited, config, options, shutdown).await;
    drop(http);
    match outcome {
        Ok(report) => {
            if args.once {
                let totals = crate::transport::Transport::stats(&opened.transport).txn.totals();
                println!(
                    "SUBNET UP: {} nodes, {} switches, max LID {}, {} SMPs sent ({} retries), {:.3} s",
                    report.subnet.nodes.len(),
                    report.subnet.switches().count(),
                    report.lids.max_lid.0,
                    totals.sent,
                    totals.retries,
                    report.elapsed.as_secs_f64()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm run: {e}");
            // A bad partitions.conf is a configuration error, exit 2 like
            // a bad config file or port; a subnet that fails is 1.
            if matches!(e, runtime::RunError::Partitions(_)) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
