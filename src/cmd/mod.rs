//! The `ibsm` subcommands, one file each, all in one shape: an `Args` type
//! (clap) and `pub async fn run(args: Args) -> ExitCode`, which prints its
//! result on standard output and its errors on standard error as
//! `ibsm <subcommand>: <what went wrong>`. `main.rs` only parses the
//! command line, sets up logging and calls `run`.

pub mod analyze;
pub mod config;
pub mod dump;
pub mod join_bench;
pub mod latency;
pub mod mcast;
pub mod probe;
pub mod route;
pub mod run;
pub mod sa;
pub mod status;
pub mod topology;
