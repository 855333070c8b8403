//! `ibsm route`: routing and route analysis offline, on a topology file or
//! generator spec, with no fabric. It builds the routing view of the
//! topology, runs an engine chain (timed in process), analyses the tables
//! and can write them in OpenSM's `opensm-lfts.dump` format. The LID and
//! analysis arguments here are shared with `ibsm analyze`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args as ClapArgs, ValueEnum};
use serde::Serialize;

use ibsm_routing::analysis::{analyze, AnalysisOptions, AnalysisReport, ShiftOrder};
use ibsm_routing::auto::{check_chain, route_chain_auto, ChainEntry};
use ibsm_routing::dump::{write_opensm_dump_with, write_path_sl, LftDump, PATH_SL_HEADER};
use ibsm_routing::engine::EngineOptions;
use ibsm_routing::guidfile::{load_guid_file, GuidKind};
use ibsm_routing::{CdgScope, RoutingError};

use crate::lid::Guid2Lid;
use crate::topology::route_view::{check_planned, claims_to_guid2lid, route_view, LidPlan, RouteView};
use crate::topology::Topology;
use crate::types::Guid;

/// How the ports of the topology get LIDs.
#[derive(Debug, Clone, ClapArgs)]
pub struct LidArgs {
    /// `node-order` (1, 2, 3... in the file's node order), `sm` (ibsm's LID
    /// manager on a cold fabric: SM port first, then GUID order),
    /// `guid2lid=FILE` (an OpenSM/ibsm guid2lid file, the rest as `sm`) or
    /// `dump=FILE` (the LIDs an lfts dump or ibroute output names).
    /// Default: node-order for `route`, the analysed dump for `analyze`.
    #[arg(long, value_name = "PLAN")]
    pub lids: Option<String>,
    /// LID mask control for end ports (0-7).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub lmc: u8,
    /// Port GUID of the SM for `--lids sm` (default: the first CA's port).
    #[arg(long, value_name = "GUID")]
    pub sm_port: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShiftOrderArg {
    Guid,
    Lid,
}

/// What the analysis looks at.
#[derive(Debug, Clone, ClapArgs)]
pub struct AnalysisArgs {
    /// Evaluate at most N evenly spaced shifts of the shift pattern
    /// (default: all N-1).
    #[arg(long, value_name = "N")]
    pub shifts: Option<usize>,
    /// Number the end ports for the shift pattern by GUID or by LID.
    #[arg(long, value_enum, default_value = "guid")]
    pub shift_order: ShiftOrderArg,
    /// Deadlock analysis over every path, switch-sourced and to switch LIDs
    /// too (default: end-port traffic only).
    #[arg(long)]
    pub cdg_all: bool,
}

impl AnalysisArgs {
    pub(super) fn options(&self) -> AnalysisOptions {
        AnalysisOptions {
            shift_order: match self.shift_order {
                ShiftOrderArg::Guid => ShiftOrder::Guid,
                ShiftOrderArg::Lid => ShiftOrder::Lid,
            },
            max_shifts: self.shifts,
            cdg: CdgScope { include_switches: self.cdg_all },
        }
    }
}

#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Topology: an ibsim net file, ibnetdiscover output, or a generator
    /// spec such as `fattree2:radix=8` or `torus3d:4x4x4,hosts=2`.
    #[arg(long, short = 't', value_name = "T")]
    pub topology: String,
    /// Routing engines, tried in order until one applies (as OpenSM's
    /// routing_engine): minhop, updn, dnup, ftree, sssp, dfsssp, dor, nue,
    /// or auto (the SM's default, last only): ftree on fat trees, dor on
    /// meshes and tori within --max-vls, else the better of updn and nue
    /// on one VL, checked for credit loops.
    #[arg(long, short = 'e', value_delimiter = ',', default_value = "auto", value_name = "E[,E2...]")]
    pub engine: Vec<ChainEntry>,
    /// Write the tables here in OpenSM's opensm-lfts.dump format.
    #[arg(long, value_name = "FILE")]
    pub lfts_out: Option<PathBuf>,
    /// Write the path SLs (engines that use VLs) here, for `analyze
    /// --path-sl`; an engine without SLs writes only the header.
    #[arg(long, value_name = "FILE")]
    pub path_sl_out: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Data VLs the engines may use (1-15).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub max_vls: u8,
    /// Skip the balance searches of updn and nue (what the SM does when a
    /// loss could not be repaired): a few milliseconds instead of hundreds.
    #[arg(long)]
    pub quick: bool,
    /// Root switch GUIDs (updn, dnup, ftree), one per line.
    #[arg(long, value_name = "FILE")]
    pub root_guids: Option<PathBuf>,
    /// Compute-node port GUIDs (ftree, dfsssp), one per line.
    #[arg(long, value_name = "FILE")]
    pub cn_guids: Option<PathBuf>,
    /// I/O-node port GUIDs (ftree), one per line.
    #[arg(long, value_name = "FILE")]
    pub io_guids: Option<PathBuf>,
    #[command(flatten)]
    pub lid: LidArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

/// A skipped engine in the JSON output.
#[derive(Debug, Serialize)]
struct Skipped {
    engine: String,
    reason: String,
}

#[derive(Debug, Serialize)]
pub(super) struct FabricSummary {
    pub switches: usize,
    pub end_ports: usize,
    pub links: usize,
    pub max_lid: u16,
}

#[derive(Debug, Serialize)]
struct RouteOutput {
    topology: String,
    fabric: FabricSummary,
    lids: String,
    chain: Vec<String>,
    /// The engine whose tables these are.
    engine: String,
    skipped: Vec<Skipped>,
    /// When `auto` chose the engine: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// When `auto` chose: the candidates it tried and did not use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    passed_over: Vec<Skipped>,
    /// A problem the tables were computed despite (a disconnected fabric).
    warning: Option<String>,
    /// Wall-clock and thread CPU time of the engine chain.
    compute_ms: f64,
    compute_cpu_ms: Option<f64>,
    lfts_out: Option<String>,
    analysis: AnalysisReport,
}

pub(super) fn fabric_summary(v: &RouteView) -> FabricSummary {
    let f = &v.fabric;
    FabricSummary {
        switches: f.num_switches(),
        end_ports: f.num_end_ports(),
        links: f.links().len(),
        max_lid: f.max_lid(),
    }
}

/// Nanoseconds this thread has run, if the kernel says (Linux schedstat).
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

pub(super) fn load_topology(t: &str) -> Result<Topology, String> {
    Topology::from_spec_or_file(t).map_err(|e| format!("{t}: {e}"))
}

pub(super) fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn parse_guid(text: &str) -> Option<u64> {
    let t = text.trim();
    let h = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    if h.is_empty() || h.len() > 16 {
        return None;
    }
    u64::from_str_radix(h, 16).ok()
}

/// Reads a root/cn/io GUID list (OpenSM's format, see
/// `ibsm_routing::guidfile`) and checks it against the fabric; errors name
/// the file, the line and the GUID.
fn read_guid_file(path: &Path, view: &RouteView, kind: GuidKind) -> Result<Vec<u64>, RoutingError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| RoutingError::Input {
        file: file.clone(),
        line: 0,
        problem: e.to_string(),
    })?;
    load_guid_file(&text, &file, &view.fabric, kind)
}

/// A LID plan, its name for the output, and the persisted map (with its
/// file) every port of which must get exactly its LIDs.
type PlanChoice = (LidPlan, String, Option<(Guid2Lid, String)>);

/// The LID plan the arguments ask for; `dump_default` is the analysed dump
/// and its parsed form (for `analyze`), used when `--lids` is not given or
/// names the same file.
fn lid_plan(topo: &Topology, a: &LidArgs, dump_default: Option<(&Path, &LftDump)>) -> Result<PlanChoice, String> {
    let sm_port = match &a.sm_port {
        Some(g) => Some(Guid(parse_guid(g).ok_or_else(|| format!("--sm-port: `{g}` is not a GUID"))?)),
        None => None,
    };
    let spec = match (&a.lids, dump_default) {
        (Some(s), _) => s.clone(),
        (None, Some((p, _))) => format!("dump={}", p.display()),
        (None, None) => "node-order".into(),
    };
    let from_dump = |path: &str| -> Result<(Guid2Lid, u8), String> {
        // The analysed dump is parsed already; another one is read here.
        let parsed;
        let dump = match dump_default {
            Some((p, d)) if p == Path::new(path) => d,
            _ => {
                parsed = LftDump::parse(&read(Path::new(path))?, path).map_err(|e| e.to_string())?;
                &parsed
            }
        };
        let claims = dump.lid_claims(path).map_err(|e| e.to_string())?;
        claims_to_guid2lid(topo, &claims, path).map_err(|e| e.to_string())
    };
    match spec.split_once('=') {
        None if spec == "node-order" => Ok((LidPlan::NodeOrder { lmc: a.lmc }, spec, None)),
        None if spec == "sm" => Ok((LidPlan::Sm { sm_port, persisted: Guid2Lid::new(), lmc: a.lmc }, spec, None)),
        Some(("guid2lid", path)) => {
            let (map, warnings) = Guid2Lid::read(Path::new(path)).map_err(|e| format!("{path}: {e}"))?;
            if let Some(w) = warnings.first() {
                return Err(format!("{w}"));
            }
            let plan = LidPlan::Sm { sm_port, persisted: map.clone(), lmc: a.lmc };
            Ok((plan, spec.clone(), Some((map, path.to_string()))))
        }
        Some(("dump", path)) => {
            let (map, lmc) = from_dump(path)?;
            let plan = LidPlan::Sm { sm_port, persisted: map.clone(), lmc: lmc.max(a.lmc) };
            Ok((plan, spec.clone(), Some((map, path.to_string()))))
        }
        _ => Err(format!("--lids: `{spec}` is not node-order, sm, guid2lid=FILE or dump=FILE")),
    }
}

pub(super) fn build_view(
    topo: &Topology,
    a: &LidArgs,
    dump_default: Option<(&Path, &LftDump)>,
) -> Result<(RouteView, String), String> {
    let (plan, name, planned) = lid_plan(topo, a, dump_default)?;
    let view = route_view(topo, &plan).map_err(|e| e.to_string())?;
    if let Some((map, origin)) = planned {
        check_planned(&view, &map, &origin).map_err(|e| e.to_string())?;
    }
    Ok((view, name))
}

pub(super) fn finish(result: Result<String, String>, cmd: &str) -> ExitCode {
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm {cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `ibsm route`.
pub async fn run(args: Args) -> ExitCode {
    finish(route_text(&args), "route")
}

fn route_text(args: &Args) -> Result<String, String> {
    let topo = load_topology(&args.topology)?;
    let (view, lids) = build_view(&topo, &args.lid, None)?;
    if !(1..=15).contains(&args.max_vls) {
        return Err(format!("--max-vls {} is out of range (1-15)", args.max_vls));
    }
    let effort = if args.quick { ibsm_routing::Effort::Quick } else { ibsm_routing::Effort::Full };
    let mut options = EngineOptions { max_vls: args.max_vls, effort, ..EngineOptions::default() };
    let files = [
        (&args.root_guids, GuidKind::Switch),
        (&args.cn_guids, GuidKind::EndPort),
        (&args.io_guids, GuidKind::EndPort),
    ];
    for (i, (path, role)) in files.into_iter().enumerate() {
        if let Some(p) = path {
            let guids = read_guid_file(p, &view, role).map_err(|e| e.to_string())?;
            match i {
                0 => options.root_guids = guids,
                1 => options.cn_guids = guids,
                _ => options.io_guids = guids,
            }
        }
    }

    check_chain(&args.engine).map_err(|e| format!("-e: {e}"))?;
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    let outcome = route_chain_auto(&args.engine, &view.fabric, &options);
    let compute_ms = t0.elapsed().as_secs_f64() * 1e3;
    let compute_cpu_ms = match (cpu0, thread_cpu_ns()) {
        (Some(a), Some(b)) => Some((b - a) as f64 / 1e6),
        _ => None,
    };
    let chain: Vec<String> = args.engine.iter().map(|k| k.to_string()).collect();
    let o = outcome.map_err(|e| format!("no engine of {} routes {}: {e}", chain.join(","), args.topology))?;
    // A disconnected fabric: the parts are routed, the rest reported.
    let mut warnings: Vec<String> = o.parts.iter().map(|p| p.to_string()).collect();
    if o.auto.as_ref().is_some_and(|a| !a.deadlock_free) {
        warnings.push("no candidate of auto passed the credit-loop check; these tables have a credit loop".into());
    }
    let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
    let (routes, engine) = (o.routes, o.engine.name().to_string());
    let skipped: Vec<Skipped> =
        o.skipped.into_iter().map(|(k, e)| Skipped { engine: k.name().to_string(), reason: e.to_string() }).collect();
    let reason = o.auto.as_ref().map(|a| a.reason.clone());
    let passed_over: Vec<Skipped> = o
        .auto
        .iter()
        .flat_map(|a| &a.passed_over)
        .map(|p| Skipped { engine: p.engine.name().to_string(), reason: p.why.to_string() })
        .collect();

    if let Some(path) = &args.lfts_out {
        let text = write_opensm_dump_with(&view.fabric, &routes, &|e| view.end_kind_text(e));
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = &args.path_sl_out {
        let text = match &routes.sl {
            Some(sl) => write_path_sl(&view.fabric, sl),
            None => format!("{PATH_SL_HEADER}\n"),
        };
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let analysis = analyze(&view.fabric, &routes, &args.analysis.options());
    let out = RouteOutput {
        topology: args.topology.clone(),
        fabric: fabric_summary(&view),
        lids,
        chain,
        engine,
        skipped,
        reason,
        passed_over,
        warning,
        compute_ms,
        compute_cpu_ms,
        lfts_out: args.lfts_out.as_ref().map(|p| p.display().to_string()),
        analysis,
    };
    if args.json {
        return serde_json::to_string_pretty(&out).map(|s| s + "\n").map_err(|e| e.to_string());
    }
    let mut s = String::new();
    let _ = writeln!(s, "topology {}: {}", out.topology, view.fabric);
    let _ = writeln!(s, "LIDs: {}", out.lids);
    for k in &out.skipped {
        let _ = writeln!(s, "engine {} skipped: {}", k.engine, k.reason);
    }
    for k in &out.passed_over {
        let _ = writeln!(s, "auto passed over {}: {}", k.engine, k.reason);
    }
    if let Some(r) = &out.reason {
        let _ = writeln!(s, "auto: {r}");
    }
    let cpu = out.compute_cpu_ms.map(|c| format!(", {c:.1} ms CPU")).unwrap_or_default();
    let _ = writeln!(s, "engine {}: routed in {:.1} ms{cpu}", out.engine, out.compute_ms);
    if let Some(w) = &out.warning {
        let _ = writeln!(s, "warning: {w}");
    }
    if let Some(p) = &out.lfts_out {
        let _ = writeln!(s, "tables written to {p}");
    }
    let _ = write!(s, "{}", out.analysis);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        route: Args,
    }

    fn route(args: &[&str]) -> Result<String, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("route").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        route_text(&cli.route)
    }

    fn json(args: &[&str]) -> serde_json::Value {
        let args: Vec<&str> = args.iter().copied().chain(["--json"]).collect();
        serde_json::from_str(&route(&args).unwrap()).unwrap()
    }

    #[test]
    fn the_default_is_auto_and_the_output_says_what_it_chose_and_why() {
        let text = route(&["-t", "fattree2:radix=8"]).unwrap();
        assert!(
            text.contains("auto: fat tree detected: 2 levels, 8 leaves → ftree\nengine ftree: routed in"),
            "{text}"
        );
        let v = json(&["-t", "fattree2:radix=8"]);
        assert_eq!(v["chain"], serde_json::json!(["auto"]));
        assert_eq!(v["engine"], "ftree");
        assert_eq!(v["reason"], "fat tree detected: 2 levels, 8 leaves → ftree");
        assert!(v.get("passed_over").is_none(), "nothing passed over: {v}");

        // A torus with one VL: ftree and dor refuse, a single-VL engine
        // routes it free of credit loops.
        let text = route(&["-t", "torus2d:5x3", "--max-vls", "1"]).unwrap();
        assert!(text.contains("auto passed over ftree: ftree does not apply"), "{text}");
        assert!(text.contains("auto passed over dor: dor needs 2 virtual lanes, the fabric offers 1"), "{text}");
        assert!(text.contains("deadlock free: yes"), "{text}");
        let v = json(&["-t", "torus2d:5x3", "--max-vls", "1"]);
        let engine = v["engine"].as_str().unwrap();
        assert!(["updn", "nue"].contains(&engine), "{v}");
        let reason = v["reason"].as_str().unwrap();
        assert!(reason.starts_with("no fat tree, and no mesh or torus within 1 VL → "), "{reason}");
        assert!(reason.contains(&format!("→ {engine} (busiest link")), "{reason}");
        let passed: Vec<&str> =
            v["passed_over"].as_array().unwrap().iter().map(|p| p["engine"].as_str().unwrap()).collect();
        assert_eq!(passed[..2], ["ftree", "dor"]);
        assert_eq!(v["analysis"]["summary"]["deadlock_free"], true);
    }

    #[test]
    fn an_explicit_engine_is_used_as_named_and_auto_only_ends_a_chain() {
        let v = json(&["-t", "torus2d:5x3", "-e", "minhop"]);
        assert_eq!(v["engine"], "minhop");
        assert!(v.get("reason").is_none());
        assert_eq!(v["analysis"]["summary"]["deadlock_free"], false);
        let v = json(&["-t", "torus2d:5x3", "-e", "ftree,auto"]);
        assert_eq!((v["engine"].as_str(), v["skipped"][0]["engine"].as_str()), (Some("dor"), Some("ftree")));
        assert_eq!(v["reason"], "5x3 torus within 8 VLs (needs 2) → dor");
        let err = route(&["-t", "torus2d:5x3", "-e", "auto,minhop"]).unwrap_err();
        assert!(err.starts_with("-e: `auto` must be the last engine of the chain"), "{err}");
    }
}
