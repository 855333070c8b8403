//! The `ibsm` command: argument parsing and logging set-up only; the work
//! lives in the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "ibsm", version, about = "InfiniBand subnet manager and subnet administrator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the subnet manager (as a service, or --once).
    Run(ibsm::cli::RunArgs),
    /// Send one directed-route SubnGet and print the decoded attribute.
    Probe(ibsm::probe::ProbeArgs),
    /// Topology files and generators.
    #[command(subcommand)]
    Topology(ibsm::cli::TopologyCmd),
    /// Route a topology offline with an engine chain and analyse the tables.
    Route(ibsm::route_cli::RouteArgs),
    /// Analyse forwarding tables (an lfts dump or ibroute output) on a topology.
    Analyze(ibsm::route_cli::AnalyzeArgs),
    /// Query a running SA (ibsm's or OpenSM's).
    #[command(subcommand)]
    Sa(SaCmd),
}

#[derive(Debug, Subcommand)]
enum SaCmd {
    /// PathRecords by SLID and DLID, many at once.
    Path(ibsm::sa_cli::SaPathArgs),
}

// One thread runs the SM: its work is waiting on MADs, which the I/O thread moves.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // The SM logs what it does at info; tools only warn.
    let (default_level, file, json) = match &cli.command {
        Command::Run(a) => ("info", a.log_file.clone(), a.log_json),
        _ => ("warn", None, false),
    };
    if let Err(e) = init_logging(default_level, file.as_deref(), json) {
        eprintln!("ibsm: {e}");
        return ExitCode::from(2);
    }
    match cli.command {
        Command::Run(args) => ibsm::cli::run(args).await,
        Command::Topology(cmd) => ibsm::cli::topology(cmd),
        Command::Route(args) => ibsm::route_cli::route(args),
        Command::Analyze(args) => ibsm::route_cli::analyze_cmd(args),
        Command::Sa(SaCmd::Path(args)) => sa_path(args).await,
        Command::Probe(args) => match ibsm::probe::run(&args).await {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ibsm probe: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `IBSM_LOG` (tracing's filter syntax) overrides the default level.
fn init_logging(default_level: &str, file: Option<&std::path::Path>, json: bool) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("IBSM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match file {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
            let writer = std::sync::Mutex::new(f);
            if json {
                builder.json().with_writer(writer).init();
            } else {
                builder.with_ansi(false).with_writer(writer).init();
            }
        }
        None => {
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            if json {
                builder.json().with_writer(std::io::stderr).init();
            } else {
                builder.with_ansi(ansi).with_writer(std::io::stderr).init();
            }
        }
    }
    Ok(())
}

async fn sa_path(args: ibsm::sa_cli::SaPathArgs) -> ExitCode {
    let answers = match ibsm::sa_cli::run_path(&args).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ibsm sa path: {e}");
            return ExitCode::from(2);
        }
    };
    print!("{}", ibsm::sa_cli::render(&answers.records, args.json));
    if let Some(out) = &args.path_sl_out {
        if let Err(e) = std::fs::write(out, ibsm::sa_cli::path_sl_text(&answers.records)) {
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
