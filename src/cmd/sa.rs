//! `ibsm sa`: queries to a running SA (ours or OpenSM's) from the command
//! line, many at once.
//!
//! `ibsm sa path --src-to-dst 1:5` prints one PathRecord, as
//! `saquery --src-to-dst` does; `--pairs-file` reads `<SLID> <DLID>` lines
//! and keeps `--window` queries in flight, so all the paths of a fabric are
//! read in seconds. `--path-sl-out` writes the answers' SLs in the path-SL
//! format `ibsm analyze --path-sl` reads: how OpenSM's SL per (source port,
//! destination) gets judged for deadlock freedom.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args as ClapArgs, Subcommand};
use futures::stream::{self, StreamExt};

use crate::mad::PathRecordRepr;
use crate::runtime::backend::{self, PortArgs, Role};
use crate::transport::sa_client::{SaClient, SaError};
use crate::transport::TxnConfig;
use crate::types::Lid;

/// `ibsm sa` and its queries.
#[derive(Debug, Clone, Subcommand)]
pub enum Args {
    /// PathRecords by SLID and DLID, many at once.
    Path(PathArgs),
}

/// `ibsm sa`.
pub async fn run(args: Args) -> ExitCode {
    match args {
        Args::Path(a) => path(a).await,
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
    fn path_sl_text_is_what_analyze_reads() {
        let r = PathRecordRepr { slid: 1, dlid: 5, sl: 3, ..Default::default() };
        let t = path_sl_text(&[r]);
        assert_eq!(t.lines().nth(1), Some("0x0001 0x0005 3"));
        assert!(render(&[r], false).contains("\n1 5 3 "));
    }
}
