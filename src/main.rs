//! The `ibsm` command: argument parsing and logging set-up only; the work
//! lives in the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ibsm::cmd;

#[derive(Debug, Parser)]
#[command(name = "ibsm", version, about = "InfiniBand subnet manager and subnet administrator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the subnet manager (as a service, or --once).
    Run(cmd::run::Args),
    /// Send one directed-route SubnGet and print the decoded attribute.
    Probe(cmd::probe::Args),
    /// Topology files and generators.
    #[command(subcommand)]
    Topology(cmd::topology::Args),
    /// Route a topology offline with an engine chain and analyse the tables.
    Route(cmd::route::Args),
    /// Analyse forwarding tables (an lfts dump or ibroute output) on a topology.
    Analyze(cmd::analyze::Args),
    /// Query a running SA (ibsm's or OpenSM's).
    #[command(subcommand)]
    Sa(cmd::sa::Args),
    /// Print the default configuration, check a file, or convert an opensm.conf.
    Config(cmd::config::Args),
    /// Print a running SM's /status (state, counts, sweeps, errors).
    Status(cmd::status::Args),
    /// Write a running SM's subnet list, LFTs, MFTs, guid2lid and topology.dot into a directory.
    Dump(cmd::dump::Args),
}

// One thread runs the SM: its work is waiting on MADs, which the I/O thread moves.
fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
    let code = match runtime {
        Ok(rt) => rt.block_on(run(Cli::parse())),
        Err(e) => {
            eprintln!("ibsm: cannot start the async runtime: {e}");
            ExitCode::from(2)
        }
    };
    // The runtime is gone: every task, transport and device with it.
    let code = (0..=u8::MAX).find(|&n| ExitCode::from(n) == code).unwrap_or(1);
    ibsm::transport::umad::exit_process(code)
}

async fn run(cli: Cli) -> ExitCode {
    // The SM logs what it does at info; tools only warn.
    let (default_level, file, json) = match &cli.command {
        Command::Run(a) => ("info", a.log_file.clone(), a.log_json),
        _ => ("warn", None, false),
    };
    // The handle stays reachable as ibsm::logging::handle() (SIGHUP reload).
    if let Err(e) = ibsm::logging::init(default_level, file.as_deref(), json) {
        eprintln!("ibsm: {e}");
        return ExitCode::from(2);
    }
    match cli.command {
        Command::Run(args) => cmd::run::run(args).await,
        Command::Probe(args) => cmd::probe::run(args).await,
        Command::Topology(args) => cmd::topology::run(args).await,
        Command::Route(args) => cmd::route::run(args).await,
        Command::Analyze(args) => cmd::analyze::run(args).await,
        Command::Sa(args) => cmd::sa::run(args).await,
        Command::Config(args) => cmd::config::run(args).await,
        Command::Status(args) => cmd::status::run(args).await,
        Command::Dump(args) => cmd::dump::run(args).await,
    }
}
