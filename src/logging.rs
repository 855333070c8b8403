//! Logging: tracing's fmt output (standard error or a file, text or JSON
//! lines) behind a filter that can be swapped while the SM runs, so
//! SIGHUP can change `[log] level` without a restart.
//!
//! Precedence: `IBSM_LOG` (tracing's filter syntax), when set and valid,
//! decides the filter and the config file's level is not applied over it
//! ([`LogHandle::set_config_level`]); otherwise the command's default
//! level, then the config's.

use std::path::Path;
use std::sync::OnceLock;

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::config::LogConfig;

/// The environment variable that overrides every other level.
pub const ENV: &str = "IBSM_LOG";

type Filtered = Layered<reload::Layer<EnvFilter, Registry>, Registry>;

/// Swaps the running filter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LogHandle {
    filter: reload::Handle<EnvFilter, Registry>,
    /// `IBSM_LOG`, when it was set and parsed.
    env: Option<String>,
}

static GLOBAL: OnceLock<LogHandle> = OnceLock::new();

/// Installs the global subscriber: `default_level` unless `IBSM_LOG` is
/// set (an invalid `IBSM_LOG` falls back to `default_level`), written to
/// `file` (appended) or standard error, as JSON lines with `json`.
/// Colours only on a terminal. The handle is also kept for [`handle`].
pub fn init(default_level: &str, file: Option<&Path>, json: bool) -> Result<LogHandle, String> {
    let from_env = EnvFilter::try_from_env(ENV).ok();
    let env = from_env.as_ref().map(|_| std::env::var(ENV).unwrap_or_default());
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(default_level));
    let (filter, reload) = reload::Layer::new(filter);
    let output: Box<dyn Layer<Filtered> + Send + Sync> = match file {
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
            fmt_layer(std::sync::Mutex::new(f), json, false)
        }
        None => fmt_layer(std::io::stderr, json, std::io::IsTerminal::is_terminal(&std::io::stderr())),
    };
    tracing_subscriber::registry().with(filter).with(output).try_init().map_err(|e| e.to_string())?;
    let handle = LogHandle { filter: reload, env };
    let _ = GLOBAL.set(handle.clone());
    Ok(handle)
}

/// The handle [`init`] made, if it ran (the runtime reaches it on SIGHUP
/// without threading it through every call).
pub fn handle() -> Option<&'static LogHandle> {
    GLOBAL.get()
}

fn fmt_layer<S, W>(writer: W, json: bool, ansi: bool) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer().with_writer(writer);
    if json {
        Box::new(layer.json())
    } else {
        Box::new(layer.with_ansi(ansi))
    }
}

impl LogHandle {
    /// Replaces the filter: a level (`debug`) or directives
    /// (`info,ibsm::sa=debug`), checked as `[log] level` is.
    pub fn set_level(&self, level: &str) -> Result<(), String> {
        let directives = LogConfig::directives(level)?;
        let filter = EnvFilter::try_new(&directives).map_err(|e| e.to_string())?;
        self.filter.reload(filter).map_err(|e| e.to_string())
    }

    /// Applies the config file's level unless `IBSM_LOG` decides:
    /// `Ok(false)` when it does and nothing changed. Call at start-up
    /// once the config is read, and on every reload.
    pub fn set_config_level(&self, level: &str) -> Result<bool, String> {
        if self.env.is_some() {
            return Ok(false);
        }
        self.set_level(level).map(|()| true)
    }

    /// `IBSM_LOG`, when it set the filter.
    pub fn env_filter(&self) -> Option<&str> {
        self.env.as_deref()
    }

    /// The filter in force, in tracing's syntax.
    pub fn current(&self) -> String {
        self.filter.with_current(|f| f.to_string()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn local(level: &str, env: Option<&str>, json: bool) -> (impl Subscriber + Send + Sync, LogHandle, Buffer) {
        let buf = Buffer::default();
        let (filter, reload) = reload::Layer::new(EnvFilter::new(level));
        let writer = buf.clone();
        let output: Box<dyn Layer<Filtered> + Send + Sync> = fmt_layer(move || writer.clone(), json, false);
        let subscriber = tracing_subscriber::registry().with(filter).with(output);
        (subscriber, LogHandle { filter: reload, env: env.map(str::to_string) }, buf)
    }

    #[test]
    fn the_level_changes_while_running() {
        let (subscriber, handle, buf) = local("info", None, false);
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!("hidden at info");
            tracing::info!("shown at info");
            assert_eq!(handle.set_config_level("debug"), Ok(true));
            tracing::debug!("shown at debug");
            assert_eq!(handle.current(), "debug");
            handle.set_level("warn,ibsm::logging=error").unwrap();
            tracing::warn!("hidden: this module is at error");
            assert!(handle.set_level("verbose").is_err());
            assert!(handle.set_level("").is_err());
            tracing::error!("still at error after the refused levels");
        });
        let text = buf.text();
        assert!(!text.contains("hidden"), "{text}");
        for line in ["shown at info", "shown at debug", "still at error"] {
            assert!(text.contains(line), "{line} missing: {text}");
        }
    }

    #[test]
    fn ibsm_log_wins_over_the_config_file() {
        let (subscriber, handle, buf) = local("warn", Some("warn"), false);
        tracing::subscriber::with_default(subscriber, || {
            assert_eq!(handle.set_config_level("debug"), Ok(false));
            tracing::info!("not shown");
            // An operator's explicit request still goes through.
            handle.set_level("info").unwrap();
            tracing::info!("shown");
        });
        assert_eq!(handle.env_filter(), Some("warn"));
        let text = buf.text();
        assert!(!text.contains("not shown") && text.contains("shown"), "{text}");
    }

    #[test]
    fn json_lines() {
        let (subscriber, _handle, buf) = local("info", None, true);
        tracing::subscriber::with_default(subscriber, || tracing::info!(port = 3, "link up"));
        let line = buf.text();
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(v["fields"]["message"], "link up");
        assert_eq!(v["fields"]["port"], 3);
        assert_eq!(v["level"], "INFO");
    }
}
