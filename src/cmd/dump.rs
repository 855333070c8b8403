//! `ibsm dump --dir DIR`: the files OpenSM writes about its subnet (the
//! subnet list, `opensm-lfts.dump`, `opensm-mfts.dump`, guid2lid) and a
//! Graphviz drawing, fetched from a running SM's `/dump/<name>` (its
//! newest snapshot) and written into DIR under those names.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args as ClapArgs;

use super::status::Target;
use crate::http::{client, DUMP_NAMES};

#[derive(Debug, Clone, ClapArgs)]
pub struct Args {
    #[command(flatten)]
    pub target: Target,
    /// Directory to write the files into (made if missing).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
}

pub async fn run(args: Args) -> ExitCode {
    let base = match args.target.base_url() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ibsm dump: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&args.dir) {
        eprintln!("ibsm dump: cannot make {}: {e}", args.dir.display());
        return ExitCode::FAILURE;
    }
    let mut failed = false;
    for name in DUMP_NAMES {
        match fetch_one(&base, name, &args.dir, args.target.timeout()).await {
            Ok((path, bytes)) => println!("wrote {} ({bytes} bytes)", path.display()),
            Err(e) => {
                eprintln!("ibsm dump: {e}");
                failed = true;
                // The other files would fail the same way.
                if e.unreachable {
                    break;
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Why one file was not written.
#[derive(Debug)]
struct FetchError {
    message: String,
    /// The SM could not be reached at all.
    unreachable: bool,
}

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for FetchError {
    fn from(message: String) -> Self {
        FetchError { message, unreachable: false }
    }
}

/// Fetches `/dump/<name>` and writes it to `dir/name`, whole or not at all
/// (a temporary file renamed into place): where it went and its size.
async fn fetch_one(
    base: &str,
    name: &str,
    dir: &Path,
    timeout: std::time::Duration,
) -> Result<(PathBuf, usize), FetchError> {
    let url = client::join(base, &format!("/dump/{name}"));
    let f = client::get(&url, timeout).await.map_err(|e| FetchError {
        unreachable: matches!(e, client::ClientError::Connect { .. } | client::ClientError::BadUrl { .. }),
        message: e.to_string(),
    })?;
    if !f.status.is_success() {
        return Err(format!("{url}: {}: {}", f.status, String::from_utf8_lossy(&f.body).trim_end()).into());
    }
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.part"));
    let write = std::fs::write(&tmp, &f.body).and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = write {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {} (from {url}): {e}", path.display()).into());
    }
    Ok((path, f.body.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{spawn, HttpState};
    use crate::runtime::metrics::Metrics;
    use crate::runtime::status::StatusBoard;
    use crate::subnet::snapshot::{Snapshot, Snapshots};

    fn target(url: String) -> Target {
        Target { url: Some(url), config: None, timeout: 10.0 }
    }

    #[test]
    fn writes_every_dump_the_sm_serves() {
        // The fixture runs its own runtime: take it before starting one.
        let (_, report) = crate::runtime::status::tests::swept();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(writes_every_dump(report));
    }

    async fn writes_every_dump(report: &crate::subnet::SweepReport) {
        let state = HttpState {
            metrics: Metrics::new(),
            status: StatusBoard::new(),
            snapshots: Snapshots::new(),
            perf_counters: Default::default(),
        };
        let server = spawn("127.0.0.1:0".parse().unwrap(), state.clone()).unwrap();
        let base = format!("http://{}", server.local_addr());
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("dumps");

        // Before a snapshot: every file fails, naming its URL, none written.
        for name in DUMP_NAMES {
            let e = fetch_one(&base, name, &out, std::time::Duration::from_secs(5)).await;
            assert!(e.is_err(), "{name}");
        }
        let args = Args { target: target(base.clone()), dir: out.clone() };
        assert_eq!(run(args.clone()).await, ExitCode::FAILURE);
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
        let e = fetch_one(&base, "guid2lid", &out, std::time::Duration::from_secs(5)).await.unwrap_err();
        assert!(!e.unreachable);
        let e = e.message;
        assert!(e.contains(&format!("{base}/dump/guid2lid")) && e.contains("503"), "{e}");

        let (node, port) = report.subnet.sm_port.unwrap();
        state.snapshots.publish(Snapshot {
            sequence: 1,
            taken_at: std::time::SystemTime::now(),
            master: report.subnet.node(node).port_guid(port),
            master_lid: report.subnet.current_lid(node, port).unwrap(),
            sweep: report.clone(),
        });
        let code = run(args).await;
        let mut served = 0;
        for name in DUMP_NAMES {
            let url = format!("{base}/dump/{name}");
            let f = client::get(&url, std::time::Duration::from_secs(5)).await.unwrap();
            if f.status.is_success() {
                served += 1;
                assert_eq!(std::fs::read(out.join(name)).unwrap(), f.body.to_vec(), "{name}");
            } else {
                assert!(!out.join(name).exists(), "{name} written from a failed answer");
            }
        }
        assert_eq!((code, served), (ExitCode::SUCCESS, DUMP_NAMES.len()));
        // No temporary files left behind.
        for entry in std::fs::read_dir(&out).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            assert!(DUMP_NAMES.contains(&name.as_str()), "{name}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_sm_is_named() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let base = format!("http://127.0.0.1:{port}");
        let dir = tempfile::tempdir().unwrap();
        let e = fetch_one(&base, "subnet.lst", dir.path(), std::time::Duration::from_secs(2)).await.unwrap_err();
        assert!(e.unreachable);
        let e = e.message;
        assert!(e.contains(&format!("{base}/dump/subnet.lst")) && e.contains("cannot reach"), "{e}");
    }
}
