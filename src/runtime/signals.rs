//! The operator's Unix signals as the owner waits for them: SIGUSR1 asks
//! for a handover, SIGHUP for a reload. Tests run without them.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// One signal, or nothing to wait for (signals off, or the handler could
/// not be installed).
pub(super) struct OperatorSignal(Option<Signal>);

impl OperatorSignal {
    /// SIGUSR1: hand over now.
    pub(super) fn handover(enabled: bool) -> OperatorSignal {
        OperatorSignal::of(enabled, SignalKind::user_defined1())
    }

    /// SIGHUP: re-read the configuration and partitions.conf now (a heavy
    /// sweep), as OpenSM does.
    pub(super) fn reload(enabled: bool) -> OperatorSignal {
        OperatorSignal::of(enabled, SignalKind::hangup())
    }

    fn of(enabled: bool, kind: SignalKind) -> OperatorSignal {
        OperatorSignal(if enabled { signal(kind).ok() } else { None })
    }

    /// The next delivery; pends forever when there is no signal.
    pub(super) async fn recv(&mut self) -> Option<()> {
        match self.0.as_mut() {
            Some(s) => s.recv().await,
            None => std::future::pending().await,
        }
    }
}
