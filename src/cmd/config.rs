//! `ibsm config`: print the default configuration, check a file, or
//! convert an opensm.conf.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use crate::config::{docs, opensm, Config};

#[derive(Debug, Clone, ClapArgs)]
#[group(required = true, multiple = false)]
pub struct Args {
    /// Print every key with its default value and a comment, as TOML.
    #[arg(long)]
    pub print_default: bool,
    /// Check a configuration file: OK, or the first error (exit 2).
    #[arg(long, value_name = "FILE")]
    pub check: Option<PathBuf>,
    /// Convert OpenSM's opensm.conf: the TOML on standard output, the keys
    /// left out listed as comments at its end, bad lines on standard error
    /// (exit 2 if there are any).
    #[arg(long, value_name = "OPENSM_CONF")]
    pub from_opensm: Option<PathBuf>,
}

/// `ibsm config`.
pub async fn run(args: Args) -> ExitCode {
    if args.print_default {
        print!("{}", docs::default_toml());
        return ExitCode::SUCCESS;
    }
    if let Some(path) = &args.check {
        return match Config::load(path) {
            Ok(_) => {
                println!("{}: OK", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ibsm config: {e}");
                ExitCode::from(2)
            }
        };
    }
    match &args.from_opensm {
        Some(path) => from_opensm(path),
        None => ExitCode::from(2),
    }
}

fn from_opensm(path: &Path) -> ExitCode {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ibsm config: cannot read {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let conversion = opensm::convert(&text);
    let toml = conversion.to_toml(&path.display().to_string());
    // Each value was checked alone; the whole must parse too.
    if let Err(e) = Config::parse(&toml, Path::new("<converted>")) {
        eprintln!("ibsm config: the converted file does not parse ({e}); this is a bug");
        return ExitCode::FAILURE;
    }
    print!("{toml}");
    for bad in &conversion.errors {
        eprintln!("ibsm config: {}:{}: {}", path.display(), bad.line, bad.message);
    }
    eprintln!(
        "ibsm config: {} keys converted, {} not converted (listed at the end), {} bad lines",
        conversion.converted.len(),
        conversion.skipped.len(),
        conversion.errors.len()
    );
    if conversion.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}
