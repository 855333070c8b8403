//! `ibsm sa`: queries to a running SA (ours or OpenSM's) from the command
//! line, many at once.
//!
//! `ibsm sa path --src-to-dst 1:5` prints one PathRecord, as
//! `saquery --src-to-dst` does; `--pairs-file` reads `<SLID> <DLID>` lines
//! and keeps `--window` queries in flight, so all the paths of a fabric are
//! read in seconds. `--path-sl-out` writes the answers' SLs in the path-SL
//! format `ibsm analyze --path-sl` reads: how OpenSM's SL per (source port,
//! destination) gets judged for deadlock freedom.
//!
//! `ibsm sa nodes` / `ibsm sa ports` read the NodeRecord / PortInfoRecord
//! table whole (one GetTable, the answer reassembled from its RMPP
//! segments). `ibsm sa flood` keeps `--concurrency` queries in flight for
//! `--duration` seconds and reports what came back: answers, losses,
//! errors, the rate and the latencies (`--sim` measures ibsm's SA core
//! in-process, no transport in between). `ibsm sa service` registers a
//! ServiceRecord for the port and `ibsm sa subscribe` an InformInfo
//! subscription (one SubnAdmSet each).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use futures::stream::{self, StreamExt};
use serde::Serialize;

use super::latency::Latency;
use crate::mad::sa::{InformInfoRepr, NodeRecordRepr, PortInfoRecordRepr, ServiceRecordRepr};
use crate::mad::PathRecordRepr;
use crate::mad::SaRecord;
use crate::runtime::backend::{self, PortArgs, Role};
use crate::transport::sa_client::{SaClient, SaError};
use crate::transport::{Transport, TransportError, TxnConfig};
use crate::types::Lid;

/// `ibsm sa` and its queries.
#[derive(Debug, Clone, Subcommand)]
pub enum Args {
    /// PathRecords by SLID and DLID, many at once.
    Path(PathArgs),
    /// The whole NodeRecord table (GetTable, reassembled from RMPP).
    Nodes(TableArgs),
    /// The whole PortInfoRecord table (GetTable, reassembled from RMPP).
    Ports(TableArgs),
    /// Keeps queries in flight for a while; reports rate, losses, latency.
    Flood(FloodArgs),
    /// Registers a ServiceRecord for this port (SubnAdmSet).
    Service(ServiceArgs),
    /// Subscribes this port to a trap's Reports (SubnAdmSet(InformInfo)).
    Subscribe(SubscribeArgs),
    /// Joins (or with --leave leaves) one multicast group (MCMemberRecord).
    Join(super::mcast::JoinArgs),
    /// Joins the groups an IPoIB interface joins, as the kernel does
    /// (broadcast group first); --down leaves them.
    Ipoib(super::mcast::IpoibArgs),
    /// The whole MCMemberRecord table (GetTable, reassembled from RMPP).
    Groups(super::mcast::GroupsArgs),
    /// Creates, joins and leaves many multicast groups; reports rate, latency and (--sim) MFT Sets per join.
    JoinFlood(super::join_bench::JoinFloodArgs),
}

/// `ibsm sa`.
pub async fn run(args: Args) -> ExitCode {
    match args {
        Args::Path(a) => path(a).await,
        Args::Nodes(a) => table(a, Table::Nodes).await,
        Args::Ports(a) => table(a, Table::Ports).await,
        Args::Flood(a) => flood_cmd(a).await,
        Args::Service(a) => set_cmd(&a.port, "ibsm sa service", |port| service_record(&a, port)).await,
        Args::Subscribe(a) => set_cmd(&a.port, "ibsm sa subscribe", |_| Ok((0, inform_info(&a)))).await,
        Args::Join(a) => super::mcast::join_cmd(a).await,
        Args::Ipoib(a) => super::mcast::ipoib_cmd(a).await,
        Args::Groups(a) => super::mcast::groups_cmd(a).await,
        Args::JoinFlood(a) => super::join_bench::run(a).await,
    }
}

async fn path(args: PathArgs) -> ExitCode {
    let answers = match run_path(&args).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ibsm sa path: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", render(&answers.records, args.json));
    if let Some(out) = &args.path_sl_out {
        if let Err(e) = std::fs::write(out, path_sl_text(&answers.records)) {
            eprintln!("ibsm sa path: {}: {e}", out.display());
            return ExitCode::from(2);
        }
    }
    for ((s, d), e) in &answers.failures {
        eprintln!("ibsm sa path: {s}->{d}: {e}");
    }
    if answers.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "ibsm sa path: {} of {} paths failed",
            answers.failures.len(),
            answers.failures.len() + answers.records.len()
        );
        ExitCode::FAILURE
    }
}

#[derive(Debug, Clone, ClapArgs)]
pub struct PathArgs {
    #[command(flatten)]
    pub port: PortArgs,
    /// A path to query, `SLID:DLID` (decimal or 0x-hex); repeatable.
    #[arg(long = "src-to-dst", value_name = "SLID:DLID", value_parser = parse_pair)]
    pub pairs: Vec<(u16, u16)>,
    /// A file of `<SLID> <DLID>` lines (`#` starts a comment).
    #[arg(long, value_name = "FILE")]
    pub pairs_file: Option<PathBuf>,
    /// Also write the SLs as a path-SL file for `ibsm analyze --path-sl`.
    #[arg(long, value_name = "FILE")]
    pub path_sl_out: Option<PathBuf>,
    /// Print JSON records instead of one line per path.
    #[arg(long)]
    pub json: bool,
    /// Queries in flight at once.
    #[arg(long, default_value = "16")]
    pub window: usize,
    /// Per-attempt timeout.
    #[arg(long, default_value = "500")]
    pub timeout_ms: u64,
    /// Retries after the first attempt.
    #[arg(long, default_value = "3")]
    pub retries: u32,
}

fn parse_lid(s: &str) -> Option<u16> {
    crate::config::parse_u64(s).and_then(|v| u16::try_from(v).ok())
}

fn parse_pair(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = s.split_once(':').ok_or_else(|| format!("`{s}` is not SLID:DLID"))?;
    match (parse_lid(a), parse_lid(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!("`{s}` is not SLID:DLID (LIDs are 16-bit numbers)")),
    }
}

/// Reads `<SLID> <DLID>` lines; errors name the file and line.
pub fn parse_pairs(text: &str, file: &str) -> Result<Vec<(u16, u16)>, String> {
    let mut pairs = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            [a, b] => match (parse_lid(a), parse_lid(b)) {
                (Some(a), Some(b)) => pairs.push((a, b)),
                _ => return Err(format!("{file}:{}: `{line}` is not two LIDs", i + 1)),
            },
            _ => return Err(format!("{file}:{}: expected `<SLID> <DLID>`, found `{line}`", i + 1)),
        }
    }
    Ok(pairs)
}

/// What a run produced: the records and the pairs that failed.
pub struct PathAnswers {
    pub records: Vec<PathRecordRepr>,
    pub failures: Vec<((u16, u16), SaError)>,
}

/// Runs the queries; returns the text to print, or an error that stopped
/// everything (no port, no SM, unreadable pairs file). Failed pairs do not
/// stop the others: they are listed on stderr and make the exit non-zero.
pub async fn run_path(args: &PathArgs) -> Result<PathAnswers, String> {
    if args.port.sim.is_some() {
        return Err("the in-process fabric has no SA to query; run against a port (--ca/--guid)".into());
    }
    let mut pairs = args.pairs.clone();
    if let Some(f) = &args.pairs_file {
        let name = f.display().to_string();
        let text = std::fs::read_to_string(f).map_err(|e| format!("{name}: {e}"))?;
        pairs.extend(parse_pairs(&text, &name)?);
    }
    if pairs.is_empty() {
        return Err("no paths asked for: give --src-to-dst SLID:DLID or --pairs-file FILE".into());
    }
    // The queries are SA GMPs: --window is the SA class's window.
    let cfg = TxnConfig {
        gmp_window: args.window,
        timeout: Duration::from_millis(args.timeout_ms),
        retries: args.retries,
        ..TxnConfig::default()
    };
    let opened = backend::open(&args.port, cfg, Role::SaClient).map_err(|e| e.to_string())?;
    let client = SaClient::new(opened.transport).map_err(|e| e.to_string())?;
    let answers: Vec<((u16, u16), Result<PathRecordRepr, SaError>)> = stream::iter(pairs)
        .map(|(s, d)| {
            let client = client.clone();
            async move { ((s, d), client.path_record(Lid(s), Lid(d)).await) }
        })
        .buffered(args.window.max(1))
        .collect()
        .await;
    let mut out = PathAnswers { records: Vec::new(), failures: Vec::new() };
    for (pair, r) in answers {
        match r {
            Ok(rec) => out.records.push(rec),
            Err(e) => out.failures.push((pair, e)),
        }
    }
    Ok(out)
}

/// One line per record: `slid dlid sl mtu rate packet_life_time`.
pub fn render(records: &[PathRecordRepr], json: bool) -> String {
    if json {
        return serde_json::to_string_pretty(records).unwrap_or_default() + "\n";
    }
    let mut s = String::from("# slid dlid sl mtu rate pkt_life reversible\n");
    for r in records {
        let _ = writeln!(
            s,
            "{} {} {} {} {} {} {}",
            r.slid,
            r.dlid,
            r.sl,
            r.mtu,
            r.rate,
            r.packet_life_time,
            u8::from(r.reversible)
        );
    }
    s
}

/// The answers as a path-SL file (`<source LID> <DLID> <SL>`).
pub fn path_sl_text(records: &[PathRecordRepr]) -> String {
    let mut s = format!("{}\n", ibsm_routing::dump::PATH_SL_HEADER);
    for r in records {
        let _ = writeln!(s, "0x{:04x} 0x{:04x} {}", r.slid, r.dlid, r.sl);
    }
    s
}

// ---------------------------------------------------------------------------
// Whole tables

#[derive(Debug, Clone, ClapArgs)]
pub struct TableArgs {
    #[command(flatten)]
    pub port: PortArgs,
    /// Print JSON records instead of one line per record.
    #[arg(long)]
    pub json: bool,
    /// Ask with this SM_Key (the SA's key makes the request trusted).
    #[arg(long, value_name = "KEY", value_parser = parse_key)]
    pub sm_key: Option<u64>,
    /// Per-attempt timeout until the first segment arrives.
    #[arg(long, default_value = "1000")]
    pub timeout_ms: u64,
    /// Retries after the first attempt.
    #[arg(long, default_value = "3")]
    pub retries: u32,
}

fn parse_key(s: &str) -> Result<u64, String> {
    crate::config::parse_u64(s).ok_or_else(|| format!("`{s}` is not a 64-bit key (decimal or 0x-hex)"))
}

/// Which table `ibsm sa nodes` / `ports` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Nodes,
    Ports,
}

/// One NodeRecord, as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRow {
    pub lid: u16,
    pub node_type: String,
    pub num_ports: u8,
    pub node_guid: String,
    pub port_guid: String,
    pub port_num: u8,
    pub description: String,
}

impl From<&NodeRecordRepr> for NodeRow {
    fn from(r: &NodeRecordRepr) -> Self {
        let ni = &r.node_info;
        NodeRow {
            lid: r.lid.0,
            node_type: format!("{:?}", ni.node_type),
            num_ports: ni.num_ports,
            node_guid: format!("{:#018x}", ni.node_guid.0),
            port_guid: format!("{:#018x}", ni.port_guid.0),
            port_num: ni.local_port_num,
            description: r.node_description.text.clone(),
        }
    }
}

/// One PortInfoRecord, as printed: where it is and the link's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortRow {
    pub lid: u16,
    pub port: u8,
    pub port_lid: u16,
    pub state: String,
    pub phys_state: String,
    pub width_active: u8,
    pub speed_active: u8,
    pub neighbor_mtu: u8,
    pub capability_mask: String,
}

impl From<&PortInfoRecordRepr> for PortRow {
    fn from(r: &PortInfoRecordRepr) -> Self {
        let pi = &r.port_info;
        PortRow {
            lid: r.endport_lid.0,
            port: r.port_num,
            port_lid: pi.lid.0,
            state: format!("{:?}", pi.port_state),
            phys_state: format!("{:?}", pi.port_physical_state),
            width_active: pi.link_width_active,
            speed_active: pi.link_speed_active,
            neighbor_mtu: pi.neighbor_mtu,
            capability_mask: format!("{:#010x}", pi.capability_mask),
        }
    }
}

/// The rows of a whole table read from the SA at the port's SM LID.
pub async fn read_table<T: Transport>(client: &SaClient<T>, which: Table) -> Result<TableRows, SaError> {
    Ok(match which {
        Table::Nodes => {
            TableRows::Nodes(client.get_table(0, &NodeRecordRepr::default()).await?.iter().map(NodeRow::from).collect())
        }
        Table::Ports => TableRows::Ports(
            client.get_table(0, &PortInfoRecordRepr::default()).await?.iter().map(PortRow::from).collect(),
        ),
    })
}

/// A table's rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum TableRows {
    Nodes(Vec<NodeRow>),
    Ports(Vec<PortRow>),
}

impl TableRows {
    pub fn len(&self) -> usize {
        match self {
            TableRows::Nodes(r) => r.len(),
            TableRows::Ports(r) => r.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// JSON, or one line per record under a `#` header.
    pub fn render(&self, json: bool) -> String {
        if json {
            return serde_json::to_string_pretty(self).unwrap_or_default() + "\n";
        }
        let mut s = String::new();
        match self {
            TableRows::Nodes(rows) => {
                s.push_str("# lid node_type ports node_guid port_guid port description\n");
                for r in rows {
                    let _ = writeln!(
                        s,
                        "{} {} {} {} {} {} {:?}",
                        r.lid, r.node_type, r.num_ports, r.node_guid, r.port_guid, r.port_num, r.description
                    );
                }
            }
            TableRows::Ports(rows) => {
                s.push_str("# lid port port_lid state phys_state width speed mtu capability_mask\n");
                for r in rows {
                    let _ = writeln!(
                        s,
                        "{} {} {} {} {} {} {} {} {}",
                        r.lid,
                        r.port,
                        r.port_lid,
                        r.state,
                        r.phys_state,
                        r.width_active,
                        r.speed_active,
                        r.neighbor_mtu,
                        r.capability_mask
                    );
                }
            }
        }
        s
    }
}

fn open_client(
    port: &PortArgs,
    cfg: TxnConfig,
    what: &str,
) -> Result<SaClient<crate::transport::io_thread::MadTransport>, String> {
    if port.sim.is_some() {
        return Err(format!("{what}: --sim is only for `ibsm sa flood` (it runs its own SA); run against a port"));
    }
    let opened = backend::open(port, cfg, Role::SaClient).map_err(|e| e.to_string())?;
    SaClient::new(opened.transport).map_err(|e| e.to_string())
}

async fn table(args: TableArgs, which: Table) -> ExitCode {
    let what = match which {
        Table::Nodes => "ibsm sa nodes",
        Table::Ports => "ibsm sa ports",
    };
    let cfg =
        TxnConfig { timeout: Duration::from_millis(args.timeout_ms), retries: args.retries, ..TxnConfig::default() };
    let client = match open_client(&args.port, cfg, what) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{what}: {e}");
            return ExitCode::from(2);
        }
    };
    let client = match args.sm_key {
        Some(k) => client.with_sm_key(k),
        None => client,
    };
    match read_table(&client, which).await {
        Ok(rows) => {
            print!("{}", rows.render(args.json));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---------------------------------------------------------------------------
// Flood

/// What `ibsm sa flood` asks, over and over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FloodKind {
    /// SubnAdmGet(PathRecord) by SLID and DLID, the pairs in turn.
    Path,
    /// SubnAdmGetTable(NodeRecord), the whole table each time.
    Nodes,
}

#[derive(Debug, Clone, ClapArgs)]
pub struct FloodArgs {
    /// The port to flood from; with --sim, the fabric ibsm's own SM and SA
    /// run on in-process (the SM on --sm-node, the flood from the last host).
    #[command(flatten)]
    pub port: PortArgs,
    /// Seconds to keep the queries coming.
    #[arg(long, default_value = "10")]
    pub duration: f64,
    /// Queries in flight at once.
    #[arg(long, default_value = "16")]
    pub concurrency: usize,
    /// Milliseconds each query slot waits after an answer before its next
    /// query: a light probe of latency (while the SM reacts to a change,
    /// say) instead of a flood that loads the fabric.
    #[arg(long, value_name = "MS")]
    pub pace_ms: Option<f64>,
    #[arg(long, value_enum, default_value = "path")]
    pub kind: FloodKind,
    /// A path to ask for, `SLID:DLID`; repeatable.
    #[arg(long = "src-to-dst", value_name = "SLID:DLID", value_parser = parse_pair)]
    pub pairs: Vec<(u16, u16)>,
    /// A file of `<SLID> <DLID>` lines.
    #[arg(long, value_name = "FILE")]
    pub pairs_file: Option<PathBuf>,
    /// Ask each pair once, then stop (--duration still caps it): an MPI
    /// job's start, every rank resolving its peers once.
    #[arg(long)]
    pub each_once: bool,
    /// With --sim: an MPI start-up storm, `CLIENTSxDESTS`. CLIENTS hosts
    /// spread over the fabric each ask, once, a PathRecord from themselves
    /// to each of the DESTS hosts after them, the clients' queries
    /// interleaved as they would reach the SA together; the report's time
    /// is the time to the last answer (--duration still caps it).
    #[arg(long, value_name = "CLIENTSxDESTS", value_parser = parse_storm)]
    pub storm: Option<(usize, usize)>,
    /// How long one query waits for its answer before it counts as lost.
    #[arg(long, default_value = "1000")]
    pub timeout_ms: u64,
    /// Re-sends of a query before it counts as lost (0: a lost answer is
    /// counted, not hidden).
    #[arg(long, default_value = "0")]
    pub retries: u32,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What to ask and for how long.
#[derive(Debug, Clone)]
pub struct FloodPlan {
    pub kind: FloodKind,
    /// (SLID, DLID) for PathRecords, asked in turn.
    pub pairs: Vec<(u16, u16)>,
    pub duration: Duration,
    pub concurrency: usize,
    /// A pause after each answer, per slot: a paced probe (`None`: flood).
    pub pace: Option<Duration>,
    /// Each pair once, then stop.
    pub each_once: bool,
}

/// `CLIENTSxDESTS`, both at least 1.
fn parse_storm(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("`{s}`: expected CLIENTSxDESTS, such as 1024x1023");
    let (c, d) = s.split_once('x').ok_or_else(bad)?;
    let (c, d): (usize, usize) = (c.parse().map_err(|_| bad())?, d.parse().map_err(|_| bad())?);
    if c == 0 || d == 0 {
        return Err(bad());
    }
    Ok((c, d))
}

/// What a flood saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FloodReport {
    pub kind: String,
    pub concurrency: usize,
    /// From the first query sent to the last answer (or loss) in.
    pub elapsed_s: f64,
    pub sent: u64,
    pub answered: u64,
    /// Queries with no answer within the timeout (and retries).
    pub lost: u64,
    /// Answers that were errors (a status, an unreadable or cut table).
    pub errors: u64,
    /// Errors and losses by what they were.
    pub failures: BTreeMap<String, u64>,
    /// Answered queries per second.
    pub qps: f64,
    pub latency_ms: Latency,
    /// Records per answer (tables: what a whole GetTable brought back).
    pub records_min: u64,
    pub records_max: u64,
}

impl FloodReport {
    pub fn render(&self, json: bool) -> String {
        if json {
            return serde_json::to_string(self).unwrap_or_default() + "\n";
        }
        let mut s = format!(
            "{}: {} answered in {:.2} s ({:.1}/s), {} lost, {} errors, {} in flight; latency ms p50 {:.3} p90 {:.3} p99 {:.3} max {:.3}; records per answer {}-{}\n",
            self.kind,
            self.answered,
            self.elapsed_s,
            self.qps,
            self.lost,
            self.errors,
            self.concurrency,
            self.latency_ms.p50,
            self.latency_ms.p90,
            self.latency_ms.p99,
            self.latency_ms.max,
            self.records_min,
            self.records_max
        );
        for (what, n) in &self.failures {
            let _ = writeln!(s, "  {n} x {what}");
        }
        s
    }
}

/// One worker's tally.
#[derive(Default)]
struct Tally {
    sent: u64,
    answered: u64,
    lost: u64,
    errors: u64,
    failures: BTreeMap<String, u64>,
    latency_us: Vec<u64>,
    records: Vec<u64>,
}

/// What an error is, for the tally: a loss or an error of some kind.
fn classify(e: &SaError) -> (bool, String) {
    match e {
        SaError::Transport(TransportError::Timeout { .. }) => (true, "lost (no answer in time)".into()),
        SaError::Transport(TransportError::Rmpp { error, .. }) => (false, format!("RMPP: {error}")),
        SaError::Transport(t) => (false, format!("transport: {t}")),
        SaError::Status { status, .. } => (false, format!("SA status {status:#06x}")),
        SaError::Table { attribute_offset, data_len, .. } => {
            (false, format!("table cut: {data_len} bytes at AttributeOffset {attribute_offset}"))
        }
        SaError::Unexpected { method, attribute, .. } => (false, format!("unexpected {method:?} {attribute:#06x}")),
        SaError::Wire { .. } => (false, "unreadable answer".into()),
        SaError::NoSm => (false, "no SM".into()),
    }
}

/// Keeps `plan.concurrency` queries in flight on `client` for
/// `plan.duration`; a query running when time is up is waited for. Time
/// is tokio's, so this runs in virtual time too.
pub async fn flood<T: Transport>(client: &SaClient<T>, plan: &FloodPlan) -> FloodReport {
    let start = tokio::time::Instant::now();
    let deadline = start + plan.duration;
    let next = AtomicUsize::new(0);
    let worker = || async {
        let mut t = Tally::default();
        while tokio::time::Instant::now() < deadline {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if plan.each_once && i >= plan.pairs.len() {
                break;
            }
            let t0 = tokio::time::Instant::now();
            t.sent += 1;
            let got: Result<u64, SaError> = match plan.kind {
                FloodKind::Path => {
                    let (s, d) = plan.pairs[i % plan.pairs.len()];
                    client.path_record(Lid(s), Lid(d)).await.map(|_| 1)
                }
                FloodKind::Nodes => {
                    client.get_table(0, &NodeRecordRepr::default()).await.map(|r: Vec<NodeRecordRepr>| r.len() as u64)
                }
            };
            match got {
                Ok(n) => {
                    t.answered += 1;
                    t.latency_us.push(t0.elapsed().as_micros() as u64);
                    t.records.push(n);
                }
                Err(e) => {
                    let (lost, what) = classify(&e);
                    if lost {
                        t.lost += 1;
                    } else {
                        t.errors += 1;
                    }
                    *t.failures.entry(what).or_default() += 1;
                }
            }
            if let Some(pace) = plan.pace {
                tokio::time::sleep(pace).await;
            }
        }
        t
    };
    let tallies = futures::future::join_all((0..plan.concurrency.max(1)).map(|_| worker())).await;
    let elapsed = start.elapsed().as_secs_f64();
    let mut all = Tally::default();
    for t in tallies {
        all.sent += t.sent;
        all.answered += t.answered;
        all.lost += t.lost;
        all.errors += t.errors;
        for (k, n) in t.failures {
            *all.failures.entry(k).or_default() += n;
        }
        all.latency_us.extend(t.latency_us);
        all.records.extend(t.records);
    }
    FloodReport {
        kind: format!("{:?}", plan.kind).to_lowercase(),
        concurrency: plan.concurrency.max(1),
        elapsed_s: elapsed,
        sent: all.sent,
        answered: all.answered,
        lost: all.lost,
        errors: all.errors,
        failures: all.failures,
        qps: if elapsed > 0.0 { all.answered as f64 / elapsed } else { 0.0 },
        latency_ms: Latency::of(all.latency_us),
        records_min: all.records.iter().copied().min().unwrap_or(0),
        records_max: all.records.iter().copied().max().unwrap_or(0),
    }
}

/// The flood's transactions: a window as wide as the concurrency, and a
/// lost answer counted after `timeout` (no retries unless asked).
fn flood_txn(args: &FloodArgs) -> TxnConfig {
    TxnConfig {
        gmp_window: args.concurrency.max(1),
        timeout: Duration::from_millis(args.timeout_ms),
        retries: args.retries,
        ..TxnConfig::default()
    }
}

fn flood_pairs(args: &FloodArgs) -> Result<Vec<(u16, u16)>, String> {
    let mut pairs = args.pairs.clone();
    if let Some(f) = &args.pairs_file {
        let name = f.display().to_string();
        let text = std::fs::read_to_string(f).map_err(|e| format!("{name}: {e}"))?;
        pairs.extend(parse_pairs(&text, &name)?);
    }
    Ok(pairs)
}

/// `ibsm sa flood` against the SA at a port's SM LID.
pub async fn run_flood(args: &FloodArgs) -> Result<FloodReport, String> {
    if args.port.sim.is_some() {
        return sim::flood(args).await;
    }
    if args.storm.is_some() {
        return Err("--storm runs in-process (--sim); on a fabric, run one --each-once client per host".into());
    }
    let pairs = flood_pairs(args)?;
    if args.kind == FloodKind::Path && pairs.is_empty() {
        return Err("no paths to ask for: give --src-to-dst SLID:DLID or --pairs-file FILE".into());
    }
    let client = open_client(&args.port, flood_txn(args), "ibsm sa flood")?;
    let plan = FloodPlan {
        kind: args.kind,
        pairs,
        duration: Duration::from_secs_f64(args.duration.max(0.0)),
        concurrency: args.concurrency,
        pace: args.pace_ms.map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0)),
        each_once: args.each_once,
    };
    Ok(flood(&client, &plan).await)
}

async fn flood_cmd(args: FloodArgs) -> ExitCode {
    match run_flood(&args).await {
        Ok(report) => {
            print!("{}", report.render(args.json));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm sa flood: {e}");
            ExitCode::from(2)
        }
    }
}

/// `ibsm sa flood --sim`: the SA's own ceiling, no transport in between.
/// ibsm's runtime brings the in-process fabric up (in virtual time, on a
/// thread of its own) and publishes its snapshot; then the SA core
/// ([`crate::sa::SaAgent`], what the SA task runs) is handed the queries
/// one after another on this thread and every answer is taken out, timed
/// with the wall clock. `--concurrency` has no meaning here (one core, one
/// query at a time); the report says 1.
mod sim {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;
    use crate::config::Config;
    use crate::mad::header::MadHeader;
    use crate::mad::sa::path_mask;
    use crate::mad::Method;
    use crate::runtime::{run, RunOptions};
    use crate::sa::{SaAgent, SaConfig, Serving};
    use crate::sim::{FabricBuilder, SimDevice};
    use crate::subnet::snapshot::{Snapshot, Snapshots};
    use crate::topology::{PortRef, Topology};
    use crate::transport::io_thread::MadTransport;
    use crate::transport::sa_client::request_mad;
    use crate::transport::{Datagram, MadAddress};
    use crate::types::Guid;

    /// The fabric up and its snapshot, with the host LIDs and the SM
    /// port's GUID: the runtime as `ibsm run --sim` runs it (its port's
    /// I/O thread drives the fabric's time), stopped once it published.
    async fn swept(spec: &str, seed: u64, sm_node: Option<&str>) -> Result<(Arc<Snapshot>, Vec<u16>, Guid), String> {
        let topo = Topology::from_spec_or_file(spec).map_err(|e| format!("topology {spec}: {e}"))?;
        let fabric = FabricBuilder::new(&topo).seed(seed).build_shared().map_err(|e| e.to_string())?;
        let hosts: Vec<_> = topo.hosts().collect();
        let sm = match sm_node {
            Some(name) => topo.node_by_name(name).ok_or_else(|| format!("no node `{name}` in {spec}"))?,
            None => *hosts.first().ok_or("the fabric has no host")?,
        };
        let dev = SimDevice::attach(&fabric, sm, 1).map_err(|e| e.to_string())?;
        dev.set_is_sm(true);
        let (transport, unsolicited) = MadTransport::spawn(dev, TxnConfig::default());
        let snapshots = Snapshots::new();
        let options = RunOptions {
            persist_lids: false,
            snapshots: snapshots.clone(),
            sa_placement: crate::runtime::sa_task::SaPlacement::OwnThread,
            ..RunOptions::default()
        };
        let task = tokio::spawn(run(transport, unsolicited, Config::default(), options, std::future::pending::<()>()));
        let t0 = std::time::Instant::now();
        let snap = loop {
            if let Some(s) = snapshots.latest().filter(|s| s.sweep.subnet_up()) {
                break s;
            }
            if task.is_finished() || t0.elapsed() > Duration::from_secs(600) {
                return Err(format!("ibsm did not bring {spec} up in-process"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        task.abort();
        let f = fabric.lock().unwrap();
        let lids = hosts.iter().filter_map(|&h| f.lid_of(PortRef { node: h, port: 1 }).ok()).map(|l| l.0).collect();
        Ok((snap, lids, topo.node(sm).port_guid(1)))
    }

    /// A SubnAdmGet(PathRecord) or GetTable(NodeRecord) from `from`.
    fn query(kind: FloodKind, tid: u64, from: u16, pair: (u16, u16)) -> Datagram {
        let mad = match kind {
            FloodKind::Path => {
                let rec = PathRecordRepr { slid: pair.0, dlid: pair.1, ..Default::default() };
                request_mad(Method::Get, 0, path_mask::SLID | path_mask::DLID, &rec)
            }
            // A zero template: every NodeRecord.
            FloodKind::Nodes => request_mad(Method::GetTable, 0, 0, &NodeRecordRepr::default()),
        };
        let mut mad = mad.expect("PathRecord and NodeRecord fit in an SA MAD");
        MadHeader::new_checked(&mut mad[..]).expect("a whole MAD holds a header").set_transaction_id(tid);
        Datagram { addr: MadAddress::gsi(Lid(from), 0), mad }
    }

    /// `clients` of the hosts `lids`, evenly spread, each to the `dests`
    /// hosts after it (wrapping round), in rounds: every client's first
    /// query, then every client's second, and so on.
    pub(super) fn storm_pairs(lids: &[u16], clients: usize, dests: usize) -> Vec<(u16, u16)> {
        let n = lids.len();
        let step = (n / clients.max(1)).max(1);
        let sources: Vec<usize> = (0..clients.min(n)).map(|c| c * step).collect();
        let mut pairs = Vec::with_capacity(sources.len() * dests);
        for j in 1..=dests.min(n.saturating_sub(1)) {
            pairs.extend(sources.iter().map(|&s| (lids[s], lids[(s + j) % n])));
        }
        pairs
    }

    pub async fn flood(args: &FloodArgs) -> Result<FloodReport, String> {
        if args.storm.is_some() && args.kind != FloodKind::Path {
            return Err("--storm asks PathRecords: it takes no --kind but path".into());
        }
        let spec = args.port.sim.as_deref().unwrap_or("builtin");
        let spec = if spec == "builtin" { backend::BUILTIN_TOPOLOGY } else { spec };
        let (snap, lids, sm_guid) = swept(spec, args.port.seed, args.port.sm_node.as_deref()).await?;
        let records = match args.kind {
            FloodKind::Path => 1,
            FloodKind::Nodes => snap.sweep.subnet.nodes.len() as u64,
        };
        let pairs = match (args.storm, flood_pairs(args)?) {
            (Some((clients, dests)), _) => storm_pairs(&lids, clients, dests),
            (None, p) if !p.is_empty() => p,
            // Every host to the host half the fabric away.
            _ => (0..lids.len()).map(|i| (lids[i], lids[(i + lids.len() / 2) % lids.len()])).collect(),
        };
        if pairs.is_empty() {
            return Err(format!("{spec} has too few hosts for a storm"));
        }
        let flood_from = *lids.last().ok_or("no host")?;
        let each_once = args.each_once || args.storm.is_some();

        let mut agent = SaAgent::new(SaConfig::default(), sm_guid);
        let start = Instant::now();
        let now = || start.elapsed();
        agent.set_serving(now(), Serving::Master);
        agent.new_snapshot(now(), snap);
        let deadline = Duration::from_secs_f64(args.duration.max(0.0));
        let mut t = Tally::default();
        let mut tid = 0u64;
        while now() < deadline && (!each_once || (tid as usize) < pairs.len()) {
            let pair = pairs[tid as usize % pairs.len()];
            tid += 1;
            // A storm's queries come from their own sources.
            let from = if args.storm.is_some() { pair.0 } else { flood_from };
            let d = query(args.kind, tid, from, pair);
            let t0 = Instant::now();
            agent.handle_mad(now(), &d);
            // The answer (a GetTable's first RMPP window too) is what the
            // SA task would send next.
            let mut got = None;
            while let Some(out) = agent.poll_transmit(now()) {
                got.get_or_insert(out);
            }
            let took = t0.elapsed();
            t.sent += 1;
            match got.as_ref().and_then(|g| MadHeader::new_checked(&g.mad[..]).ok().map(|h| h.status())) {
                Some(0) => {
                    t.answered += 1;
                    t.latency_us.push(took.as_micros() as u64);
                }
                Some(status) => {
                    t.errors += 1;
                    *t.failures.entry(format!("SA status {status:#06x}")).or_default() += 1;
                }
                None => {
                    t.lost += 1;
                    *t.failures.entry("no answer".into()).or_default() += 1;
                }
            }
            if args.kind == FloodKind::Nodes {
                // Nobody ACKs: end the transfer so the next one starts.
                agent.set_serving(now(), Serving::NotMaster);
                agent.set_serving(now(), Serving::Master);
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        let kind = match args.storm {
            Some((clients, dests)) => {
                format!("path storm, {clients} clients x {dests} destinations (SA core, one thread)")
            }
            None => format!("{:?} (SA core, one thread)", args.kind).to_lowercase(),
        };
        Ok(FloodReport {
            kind,
            concurrency: 1,
            elapsed_s: elapsed,
            sent: t.sent,
            answered: t.answered,
            lost: t.lost,
            errors: t.errors,
            failures: t.failures,
            qps: if elapsed > 0.0 { t.answered as f64 / elapsed } else { 0.0 },
            latency_ms: Latency::of(t.latency_us),
            records_min: records,
            records_max: records,
        })
    }
}

// ---------------------------------------------------------------------------
// Sets: a ServiceRecord, an InformInfo subscription

#[derive(Debug, Clone, ClapArgs)]
pub struct ServiceArgs {
    #[command(flatten)]
    pub port: PortArgs,
    /// ServiceID (decimal or 0x-hex).
    #[arg(long, value_parser = parse_key)]
    pub id: u64,
    /// ServiceName (at most 64 bytes).
    #[arg(long, default_value = "")]
    pub name: String,
    /// ServiceLease in seconds; absent: infinite.
    #[arg(long)]
    pub lease: Option<u32>,
    /// ServiceP_Key.
    #[arg(long, default_value = "0xffff", value_parser = parse_key)]
    pub pkey: u64,
}

#[derive(Debug, Clone, ClapArgs)]
pub struct SubscribeArgs {
    #[command(flatten)]
    pub port: PortArgs,
    /// The generic trap whose Reports this port wants (64: a port in
    /// service, 65: out of service).
    #[arg(long, default_value = "64")]
    pub trap: u16,
    /// Unsubscribe instead.
    #[arg(long)]
    pub remove: bool,
}

/// The ServiceRecord this port registers: `--id`, `--name`, `--pkey` and
/// `--lease` from the port's own GID (the default subnet prefix).
fn service_record(a: &ServiceArgs, port: &crate::transport::LocalPort) -> Result<(u64, ServiceRecordRepr), String> {
    use crate::mad::sa::service_mask as m;
    let mut rec = ServiceRecordRepr {
        service_id: a.id,
        service_gid: crate::sa::index::gid(crate::sa::index::DEFAULT_SUBNET_PREFIX, port.port_guid),
        service_pkey: a.pkey as u16,
        service_lease: a.lease.unwrap_or(crate::mad::sa::service_record::SERVICE_LEASE_INFINITE),
        ..ServiceRecordRepr::default()
    };
    let name = a.name.as_bytes();
    if name.len() > rec.service_name.len() {
        return Err(format!("--name is {} bytes; a ServiceName holds {}", name.len(), rec.service_name.len()));
    }
    rec.service_name[..name.len()].copy_from_slice(name);
    let lease = if a.lease.is_some() { m::SERVICE_LEASE } else { 0 };
    Ok((m::SERVICE_ID | m::SERVICE_GID | m::SERVICE_PKEY | m::SERVICE_NAME | lease, rec))
}

/// A subscription to (or, with `--remove`, from) one generic trap, from
/// any LID, with Reports to QP1.
fn inform_info(a: &SubscribeArgs) -> InformInfoRepr {
    use crate::mad::sa::{inform_wildcard as w, InformKind};
    InformInfoRepr {
        gid: [0; 16],
        lid_range_begin: w::LID,
        lid_range_end: 0,
        subscribe: !a.remove,
        notice_type: w::TYPE,
        kind: InformKind::Generic { trap_number: a.trap, producer_type: w::PRODUCER_TYPE },
        qpn: 1,
        resp_time_value: 18,
    }
}

/// One SubnAdmSet to the SA at the port's SM LID; prints what the SA
/// stored.
async fn set_cmd<R: SaRecord + std::fmt::Debug>(
    port: &PortArgs,
    what: &str,
    build: impl FnOnce(&crate::transport::LocalPort) -> Result<(u64, R), String>,
) -> ExitCode {
    let result = async {
        let client = open_client(port, TxnConfig::default(), what)?;
        let (mask, record) = build(&client.local_port())?;
        client.set(mask, &record).await.map_err(|e| e.to_string())
    };
    match result.await {
        Ok(stored) => {
            println!("{what}: set; the SA stored {stored:?}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_read_or_refused_with_the_line() {
        assert_eq!(parse_pairs("1 5\n# c\n0x10 7 # x\n", "f").unwrap(), vec![(1, 5), (16, 7)]);
        assert_eq!(parse_pairs("1 5\n1\n", "f").unwrap_err(), "f:2: expected `<SLID> <DLID>`, found `1`");
        assert!(parse_pairs("1 70000\n", "f").unwrap_err().starts_with("f:1: `1 70000` is not two LIDs"));
        assert_eq!(parse_pair("1:0x20"), Ok((1, 32)));
        assert!(parse_pair("1-2").is_err());
    }

    #[test]
    fn a_storm_interleaves_its_clients_each_to_the_hosts_after_it() {
        assert_eq!(parse_storm("1024x1023"), Ok((1024, 1023)));
        for bad in ["0x5", "5x0", "5", "ax3"] {
            assert!(parse_storm(bad).is_err(), "{bad}");
        }
        let lids = [10, 11, 12, 13, 14, 15];
        // Clients at 10, 12 and 14, two destinations each, round by round.
        assert_eq!(sim::storm_pairs(&lids, 3, 2), vec![(10, 11), (12, 13), (14, 15), (10, 12), (12, 14), (14, 10)]);
        // More destinations than other hosts: each host once.
        assert_eq!(sim::storm_pairs(&lids[..3], 1, 9), vec![(10, 11), (10, 12)]);
    }

    #[test]
    fn latency_percentiles_are_of_the_samples() {
        let l = Latency::of((1..=100).map(|ms| ms * 1000).collect());
        assert_eq!((l.p50, l.p90, l.p99, l.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(l.mean, 50.5);
        assert_eq!(Latency::of(vec![]), Latency::default());
        assert_eq!(Latency::of(vec![7000]).p99, 7.0);
    }

    #[test]
    fn losses_and_errors_are_told_apart() {
        let status = SaError::Status { query: "q".into(), status: 0x0001 };
        assert_eq!(classify(&status), (false, "SA status 0x0001".to_string()));
        let cut = SaError::Table { query: "q".into(), attribute_offset: 14, data_len: 200, record_len: 108 };
        assert_eq!(classify(&cut), (false, "table cut: 200 bytes at AttributeOffset 14".to_string()));
        let report = FloodReport { kind: "path".into(), answered: 10, elapsed_s: 2.0, qps: 5.0, ..Default::default() };
        assert!(report.render(false).starts_with("path: 10 answered in 2.00 s (5.0/s), 0 lost"));
        let json: serde_json::Value = serde_json::from_str(&report.render(true)).unwrap();
        assert_eq!(json["qps"], 5.0);
    }

    #[test]
    fn path_sl_text_is_what_analyze_reads() {
        let r = PathRecordRepr { slid: 1, dlid: 5, sl: 3, ..Default::default() };
        let t = path_sl_text(&[r]);
        assert_eq!(t.lines().nth(1), Some("0x0001 0x0005 3"));
        assert!(render(&[r], false).contains("\n1 5 3 "));
    }
}
