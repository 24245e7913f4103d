//! A request to stop a client early: SIGTERM or SIGINT (the harness stops a competing bulk flow
//! that way when the foreground transfer ends). The client then ends its workload, still asks
//! the server for its counters and writes its metrics (crate::run), so a stopped flow records
//! what its stack did (congestion events, repairs, recoveries) instead of nothing.

use std::time::Duration;

use tokio::sync::watch;

/// How the error of a stopped run begins (the CLI exits with `cli::EXIT_STOPPED` then).
pub const STOPPED_PREFIX: &str = "stopped by a signal after ";

/// How long a stopped client may still take to fetch the server's counters and close: a round
/// trip on a long path, behind the queue its own transfer filled. The harness waits longer.
pub const STOP_GRACE: Duration = Duration::from_millis(2500);

/// Watched by the workload (it ends at once) and by the client as a whole (it ends STOP_GRACE
/// later whatever it is doing).
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// A stop that never comes (in-process runs: loopback, bench, tests).
    pub fn never() -> Self {
        Stop(watch::channel(false).1)
    }

    /// Stop on SIGTERM or SIGINT, from now on (inside a tokio runtime).
    pub fn on_signals() -> Result<Self, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term =
            signal(SignalKind::terminate()).map_err(|e| format!("signal handler: {e}"))?;
        let mut int =
            signal(SignalKind::interrupt()).map_err(|e| format!("signal handler: {e}"))?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            let _ = tx.send(true);
        });
        Ok(Stop(rx))
    }

    /// Once a stop was requested (never, for `never`).
    pub async fn requested(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|stopped| *stopped).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Once STOP_GRACE has passed since a stop was requested.
    pub async fn grace_over(&self) {
        self.requested().await;
        tokio::time::sleep(STOP_GRACE).await;
    }
}
