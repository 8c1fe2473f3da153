//! One way to start a service: every long-running role (`actiond api`, `policy`, `executor`,
//! `web`, `audit seal`, `audit purge --interval`) is started by a [`Service`].
//!
//! A [`Service`] names its role, holds its Prometheus registry and readiness check, and
//! [`Service::start`]s the admin listener (`/healthz`, `/readyz`, `/metrics`, see
//! [`crate::serve_admin`]) when an address is given. The admin listener outlives the drain, so
//! `/readyz` answers `503 draining` from the first SIGTERM/SIGINT until the process exits. The
//! [`Running`] service then runs its routes ([`Running::serve_http`]) or its worker
//! ([`Running::run_worker`]) until the shutdown signal, drains (bounded), and logs one line:
//! `actiond <role> stopped` with `drained_ms`, the milliseconds from the shutdown signal to the
//! end of the drain (not the uptime).

use crate::{Metrics, ReadyCheck, ScrapeHook, http};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// How long a worker ([`Running::run_worker`]) may take to finish its work in flight after the
/// shutdown signal before the process ends without it: under the 30 s stop timeouts of the
/// systemd units and the Helm chart, so the process logs its own end instead of being killed.
pub const WORKER_DRAIN_TIMEOUT: Duration = Duration::from_secs(25);

/// What starts the drain: the process's first SIGINT/SIGTERM by default ([`crate::shutdown_signal`]).
type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service about to start: its role, metrics, readiness check and admin listener.
pub struct Service {
    role: &'static str,
    metrics: Metrics,
    admin: Option<SocketAddr>,
    ready: ReadyCheck,
    scrape: Option<ScrapeHook>,
    shutdown: Shutdown,
    drain_timeout: Duration,
}

impl Service {
    /// A service in `role` (`api`, `policy`, `executor`, `web`, `sealer`, `retention`) with a
    /// fresh registry ([`Metrics::new`]), always ready, no admin listener, stopped by
    /// SIGINT/SIGTERM.
    pub fn new(role: &'static str) -> Self {
        Self::with_metrics(role, Metrics::new(role))
    }

    /// As [`Service::new`], with a registry made beforehand (it should be `Metrics::new(role)`).
    pub fn with_metrics(role: &'static str, metrics: Metrics) -> Self {
        Self {
            role,
            metrics,
            admin: None,
            ready: Arc::new(|| Box::pin(async { Ok(()) })),
            scrape: None,
            shutdown: Box::pin(crate::shutdown_signal()),
            drain_timeout: WORKER_DRAIN_TIMEOUT,
        }
    }

    /// The registry the service's metrics are registered in (served on `/metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Serves `/healthz`, `/readyz` and `/metrics` on `addr` (none when `None`).
    pub fn admin(mut self, addr: impl Into<Option<SocketAddr>>) -> Self {
        self.admin = addr.into();
        self
    }

    /// `/readyz` answers 200 when `check` resolves to `Ok` (e.g. Postgres takes writes), else
    /// 503 with the `Err` line (e.g. "no writable database: …"); 503 `draining` once the drain
    /// has started, whatever `check` says.
    pub fn ready<F, Fut>(mut self, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.ready = Arc::new(move || Box::pin(check()));
        self
    }

    /// Runs `hook` before each scrape of `/metrics` (to refresh gauges read from the database).
    pub fn on_scrape<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.scrape = Some(Arc::new(move || Box::pin(hook())));
        self
    }

    /// Drains when `shutdown` resolves instead of on SIGINT/SIGTERM (embedding, tests).
    pub fn until(mut self, shutdown: impl Future<Output = ()> + Send + 'static) -> Self {
        self.shutdown = Box::pin(shutdown);
        self
    }

    /// How long a worker may take to finish after the shutdown signal (default
    /// [`WORKER_DRAIN_TIMEOUT`]). HTTP routes drain within their [`http::Edge::drain_timeout`].
    pub fn drain_timeout(mut self, d: Duration) -> Self {
        self.drain_timeout = d;
        self
    }

    /// Binds the admin listener, if any (it serves until the process exits). Errors: the
    /// admin address cannot be bound (the message names the listener and the address).
    pub async fn start(self) -> anyhow::Result<Running> {
        let admin = match self.admin {
            Some(addr) => Some(
                crate::serve_admin(
                    addr,
                    self.metrics.clone(),
                    self.ready,
                    self.scrape,
                    std::future::pending(),
                )
                .await?,
            ),
            None => None,
        };
        Ok(Running {
            role: self.role,
            admin,
            shutdown: self.shutdown,
            drain_timeout: self.drain_timeout,
        })
    }
}

/// A started service: its admin listener is up; its routes or worker run next.
pub struct Running {
    role: &'static str,
    admin: Option<SocketAddr>,
    shutdown: Shutdown,
    drain_timeout: Duration,
}

impl Running {
    /// The admin listener's bound address (port 0 resolved), when there is one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// Serves `router` on `listener` with the `edge` limits until the shutdown signal, then
    /// drains the connections (at most `edge.drain_timeout`) and logs the stop line.
    pub async fn serve_http(
        self,
        listener: TcpListener,
        router: axum::Router,
        edge: http::Edge,
    ) -> anyhow::Result<()> {
        let drain_started = Arc::new(std::sync::OnceLock::new());
        let marker = drain_started.clone();
        let shutdown = self.shutdown;
        http::serve(listener, router, edge, async move {
            shutdown.await;
            let _ = marker.set(Instant::now());
        })
        .await;
        log_stopped(self.role, drain_started.get().copied());
        Ok(())
    }

    /// Runs `work` until it returns. `work` gets a [`Stop`] that turns true at the shutdown
    /// signal, and should then finish what it holds and return; past the drain timeout the
    /// service stops without it (logged). The work's error ends the service with that error.
    /// The stop line is logged after a drain only: work that ends on its own (`--once`, an
    /// error) has its own last word.
    pub async fn run_worker<F, Fut>(self, work: F) -> anyhow::Result<()>
    where
        F: FnOnce(Stop) -> Fut,
        Fut: Future<Output = anyhow::Result<()>>,
    {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let work = work(Stop(rx));
        let mut work = std::pin::pin!(work);
        let mut shutdown = self.shutdown;
        let result = tokio::select! {
            r = &mut work => Some(r),
            () = &mut shutdown => None,
        };
        if let Some(r) = result {
            // The work ended on its own (a single run, or an error): nothing was drained.
            return r;
        }
        let started = Instant::now();
        let _ = tx.send(true);
        let r = match tokio::time::timeout(self.drain_timeout, work).await {
            Ok(r) => r,
            Err(_) => {
                tracing::warn!(
                    drain_timeout_ms = self.drain_timeout.as_millis() as u64,
                    "drain timeout: stopping with work still in flight"
                );
                Ok(())
            }
        };
        log_stopped(self.role, Some(started));
        r
    }
}

/// The stop line of every service: `drained_ms` counts from the shutdown signal (0 when the
/// service ended without one).
fn log_stopped(role: &str, drain_started: Option<Instant>) {
    let drained_ms = drain_started.map_or(0, |s| s.elapsed().as_millis() as u64);
    tracing::info!(drained_ms, "actiond {role} stopped");
}

/// What a worker watches to know when to stop: false while it should work, true from the
/// shutdown signal on.
#[derive(Clone)]
pub struct Stop(tokio::sync::watch::Receiver<bool>);

impl Stop {
    /// True once the worker should stop.
    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once the worker should stop (at once when it already should).
    pub async fn wait(&mut self) {
        let _ = self.0.wait_for(|s| *s).await;
    }

    /// The underlying channel (for loops that `select!` on `changed()`).
    pub fn receiver(&self) -> tokio::sync::watch::Receiver<bool> {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker sees the stop, finishes, and the service returns; the admin listener answers
    /// `/readyz` 503 `draining` during the drain, then the stop line is logged.
    #[tokio::test]
    async fn a_worker_stops_when_the_shutdown_resolves() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let running = Service::new("test")
            .until(async {
                let _ = rx.await;
            })
            .start()
            .await
            .unwrap();
        assert!(running.admin_addr().is_none());
        let task = tokio::spawn(running.run_worker(|mut stop| async move {
            stop.wait().await;
            assert!(stop.is_set());
            Ok(())
        }));
        tx.send(()).unwrap();
        task.await.unwrap().unwrap();
    }

    /// Work that does not finish is left after the drain timeout: the service still returns.
    #[tokio::test]
    async fn a_worker_that_does_not_stop_is_left_after_the_drain_timeout() {
        let running = Service::new("test")
            .until(async {})
            .drain_timeout(Duration::from_millis(50))
            .start()
            .await
            .unwrap();
        let r = running
            .run_worker(|_| std::future::pending::<anyhow::Result<()>>())
            .await;
        assert!(r.is_ok());
    }
}
