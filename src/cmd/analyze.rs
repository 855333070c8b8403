//! `ibsm analyze`: reads forwarding tables (an `opensm-lfts.dump`, ours or
//! OpenSM's, or `ibroute` output) and analyses them on a topology, by
//! default on the LIDs the dump itself names, so OpenSM's tables are judged
//! on OpenSM's LIDs.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args as ClapArgs;
use serde::Serialize;

use ibsm_routing::analysis::{analyze, AnalysisReport};
use ibsm_routing::dump::{parse_path_sl, LftDump};

use super::route::{build_view, fabric_summary, finish, load_topology, read, AnalysisArgs, FabricSummary, LidArgs};

#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    /// Topology the tables belong to (file or generator spec).
    #[arg(long, short = 't', value_name = "T")]
    pub topology: String,
    /// The tables: an opensm-lfts.dump (OpenSM's or `ibsm route
    /// --lfts-out`) or `ibroute` output for every switch.
    #[arg(long, value_name = "FILE")]
    pub lfts: PathBuf,
    /// Path SLs for the deadlock analysis (`route --path-sl-out`, or the
    /// SLs an SA gave: `ibsm sa path --pairs-file F --path-sl-out SL`, one
    /// line per source port and DLID); without it every path is on SL 0.
    #[arg(long, value_name = "FILE")]
    pub path_sl: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub lid: LidArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

#[derive(Debug, Serialize)]
struct AnalyzeOutput {
    topology: String,
    lfts: String,
    format: String,
    fabric: FabricSummary,
    lids: String,
    analysis: AnalysisReport,
}

/// `ibsm analyze`.
pub async fn run(args: Args) -> ExitCode {
    finish(analyze_text(&args), "analyze")
}

fn analyze_text(args: &Args) -> Result<String, String> {
    let topo = load_topology(&args.topology)?;
    let file = args.lfts.display().to_string();
    let text = read(&args.lfts)?;
    let dump = LftDump::parse(&text, &file).map_err(|e| e.to_string())?;
    let (view, lids) = build_view(&topo, &args.lid, Some((args.lfts.as_path(), &dump)))?;
    let mut routes = dump.to_routes(&view.fabric, &file).map_err(|e| e.to_string())?;
    if let Some(p) = &args.path_sl {
        let name = p.display().to_string();
        routes.sl = Some(parse_path_sl(&read(p)?, &name, &view.fabric).map_err(|e| e.to_string())?);
    }
    let analysis = analyze(&view.fabric, &routes, &args.analysis.options());
    let out = AnalyzeOutput {
        topology: args.topology.clone(),
        lfts: file,
        format: dump.format.to_string(),
        fabric: fabric_summary(&view),
        lids,
        analysis,
    };
    if args.json {
        return serde_json::to_string_pretty(&out).map(|s| s + "\n").map_err(|e| e.to_string());
    }
    let mut s = String::new();
    let _ = writeln!(s, "topology {}: {}", out.topology, view.fabric);
    let _ = writeln!(s, "tables: {} ({})", out.lfts, out.format);
    let _ = writeln!(s, "LIDs: {}", out.lids);
    let _ = write!(s, "{}", out.analysis);
    Ok(s)
}
