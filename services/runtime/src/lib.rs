//! actiond-runtime: process plumbing shared by every service. No domain logic.
//!
//! - [`init_tracing_as`]: logs to stderr as text or JSON (`--log-format`,
//!   `ACTIOND_LOG_FORMAT`; `RUST_LOG` filters, rmcp's debug dump off by default).
//! - [`Metrics`]: a Prometheus registry and the admin listener (`/metrics`, `/healthz`,
//!   `/readyz`) on its own port.
//! - [`credentials`]: secrets read from files in `$CREDENTIALS_DIRECTORY` (systemd
//!   `LoadCredential=`) or a mounted directory — never from environment variables.
//! - [`shutdown_signal`]: resolves on the first SIGINT or SIGTERM, which starts draining
//!   ([`draining`]: `/readyz` 503, long-polls answered at once); a second signal exits at once.
//! - [`http::observe`]: the layer stack of every HTTP listener (`X-Request-Id`, per-request
//!   tracing span); [`http::serve`]: the connection handling of every listener (header-read
//!   timeout, connection cap, bounded drain).
//! - [`clock`]: the one place the wall clock is read and timers are made.
//! - [`Service`]: the one way a role starts: admin listener, ready check, its routes or
//!   worker, bounded drain and the `actiond <role> stopped` line.

pub mod clock;
pub mod credentials;
pub mod http;
pub mod service;

pub use service::{Running, Service, Stop};

use axum::{Router, extract::State, http::StatusCode, response::IntoResponse, routing::get};
use prometheus::{Encoder, Registry, TextEncoder};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

/// How log lines are written: `text` (one readable line) or `json` (one JSON object per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines; ANSI colour only when stderr is a terminal.
    Text,
    /// One JSON object per line, fields as JSON values.
    Json,
}

impl LogFormat {
    /// Parses `text` or `json` (the values of `--log-format` / `ACTIOND_LOG_FORMAT`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "text" => Some(Self::Text),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// The filter when `RUST_LOG` is unset: `info`, with rmcp's per-request debug dump off.
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

/// Initializes logging to stderr from the environment (`RUST_LOG`, `ACTIOND_LOG_FORMAT`); for
/// embedders and roles started without the `actiond` command line. A no-op when logging is
/// already set up.
pub fn init_tracing() {
    let format = std::env::var("ACTIOND_LOG_FORMAT")
        .ok()
        .and_then(|v| LogFormat::parse(&v))
        .unwrap_or(LogFormat::Text);
    init_tracing_as(format, DEFAULT_LOG_FILTER);
}

/// Initializes logging to stderr in `format`. `RUST_LOG` filters (default `default_filter`).
/// No ANSI colour unless stderr is a terminal. A no-op when logging is already set up.
pub fn init_tracing_as(format: LogFormat, default_filter: &str) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        // A log line that cannot be written (stderr a closed pipe) is dropped: reporting that
        // with `eprintln!` would panic on the same closed pipe.
        .log_internal_errors(false);
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// The process's draining flag: false until the first SIGINT/SIGTERM, then true for good.
fn drain_flag() -> &'static tokio::sync::watch::Sender<bool> {
    static FLAG: std::sync::OnceLock<tokio::sync::watch::Sender<bool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| tokio::sync::watch::channel(false).0)
}

/// True once the process is shutting down: `/readyz` answers 503, long-polls answer at once
/// with the current state, listeners stop accepting and finish what they hold.
pub fn draining() -> bool {
    *drain_flag().borrow()
}

/// Starts draining now (what the first SIGINT/SIGTERM does); idempotent.
pub fn start_draining() {
    drain_flag().send_if_modified(|d| !std::mem::replace(d, true));
}

/// Resolves when the process starts draining.
pub async fn until_draining() {
    let mut rx = drain_flag().subscribe();
    let _ = rx.wait_for(|d| *d).await;
}

/// SIGINT and SIGTERM, caught from the moment this is made (tokio registers a Unix signal
/// when its stream is created, so a signal that arrives before the first poll is kept, not
/// left to the default action that ends the process without a drain).
struct Signals {
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn catch() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                int: signal(SignalKind::interrupt()).ok(),
                term: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next SIGINT or SIGTERM.
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                () = recv(&mut self.int) => {},
                () = recv(&mut self.term) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Watches for signals once per process: the first SIGINT/SIGTERM starts draining, a second
/// one ends the process at once (exit code 130) whatever is still in flight. Signals are
/// caught from the moment of the first call (within a Tokio runtime): call it before telling
/// anyone the process is up (a banner, a ready line), so a signal right after is a drain, not
/// the default action. [`shutdown_signal`] calls it too.
pub fn watch_signals() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        let mut signals = Signals::catch();
        tokio::spawn(async move {
            signals.next().await;
            tracing::info!("shutdown signal received; draining (a second signal exits at once)");
            start_draining();
            signals.next().await;
            tracing::warn!("second shutdown signal; exiting without finishing the drain");
            std::process::exit(130);
        });
    });
}

/// Resolves when the process receives SIGINT (Ctrl-C) or SIGTERM (or [`start_draining`] is
/// called). The first signal starts draining; a second one exits at once.
pub async fn shutdown_signal() {
    watch_signals();
    until_draining().await;
}

/// A readiness check: `Ok` when the service can do its work (e.g. Postgres takes writes), else
/// one line saying why (`/readyz` answers it with 503, e.g. "no writable database: …").
pub type ReadyCheck =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync>;

/// A hook run before each scrape (to refresh gauges computed from the database).
pub type ScrapeHook = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The Prometheus registry of one process.
#[derive(Clone)]
pub struct Metrics {
    /// The registry every metric of this process is registered in.
    pub registry: Registry,
}

impl Metrics {
    /// A registry for the process running `role` (api, policy, executor, web, sealer, …).
    /// Metrics carry no role label: the scrape target (job, instance) already says which
    /// process they come from. The role appears once, in `actiond_build_info`.
    pub fn new(role: &str) -> Self {
        let registry = Registry::new_custom(Some("actiond".into()), None).unwrap_or_default();
        let m = Self { registry };
        m.register_build_info(role);
        m
    }

    /// `actiond_build_info{role="…",version="…"} 1`: which build a scrape target runs and in
    /// which role (join on it in queries, e.g. to follow a rollout).
    fn register_build_info(&self, role: &str) {
        match prometheus::IntGaugeVec::new(
            prometheus::Opts::new("build_info", "The running build and role (always 1)"),
            &["role", "version"],
        ) {
            Ok(g) => self
                .register(g)
                .with_label_values(&[role, env!("CARGO_PKG_VERSION")])
                .set(1),
            Err(e) => tracing::warn!(error = %e, "build_info not registered"),
        }
    }

    /// Registers a collector; a duplicate registration is logged and ignored.
    pub fn register<C: prometheus::core::Collector + Clone + 'static>(&self, c: C) -> C {
        if let Err(e) = self.registry.register(Box::new(c.clone())) {
            tracing::warn!(error = %e, "metric registration failed");
        }
        c
    }

    /// Creates and registers a counter vector. Metric definitions are static strings checked by
    /// the tests, so an invalid one is a programming error.
    #[expect(
        clippy::expect_used,
        reason = "static metric definitions; covered by every service's tests"
    )]
    pub fn counter_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> prometheus::IntCounterVec {
        self.register(
            prometheus::IntCounterVec::new(prometheus::Opts::new(name, help), labels)
                .expect("valid metric definition"),
        )
    }

    /// Creates and registers a gauge vector.
    #[expect(
        clippy::expect_used,
        reason = "static metric definitions; covered by every service's tests"
    )]
    pub fn gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> prometheus::GaugeVec {
        self.register(
            prometheus::GaugeVec::new(prometheus::Opts::new(name, help), labels)
                .expect("valid metric definition"),
        )
    }

    /// Creates and registers a histogram vector (seconds buckets from 0.5 ms to 10 s).
    #[expect(
        clippy::expect_used,
        reason = "static metric definitions; covered by every service's tests"
    )]
    pub fn histogram_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> prometheus::HistogramVec {
        let opts = prometheus::HistogramOpts::new(name, help).buckets(vec![
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ]);
        self.register(prometheus::HistogramVec::new(opts, labels).expect("valid metric definition"))
    }

    /// Text exposition of every registered metric, then the process's own (`process_cpu_seconds_total`,
    /// `process_resident_memory_bytes`, `process_open_fds`, …: unprefixed, as every exporter
    /// names them).
    pub fn render(&self) -> String {
        let mut families = self.registry.gather();
        families.extend(process_families());
        let mut buf = Vec::new();
        let _ = TextEncoder::new().encode(&families, &mut buf);
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// The process collector's metric families (Linux; none elsewhere).
fn process_families() -> Vec<prometheus::proto::MetricFamily> {
    #[cfg(target_os = "linux")]
    {
        use prometheus::core::Collector as _;
        static PROCESS: std::sync::OnceLock<prometheus::process_collector::ProcessCollector> =
            std::sync::OnceLock::new();
        PROCESS
            .get_or_init(prometheus::process_collector::ProcessCollector::for_self)
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    Vec::new()
}

#[derive(Clone)]
struct AdminState {
    metrics: Metrics,
    ready: ReadyCheck,
    scrape: Option<ScrapeHook>,
}

/// Serves `/metrics`, `/healthz` (process alive) and `/readyz` (the ready check passes) on
/// `addr` until `shutdown` resolves. Returns the bound address (port 0 picks a free port),
/// which is also logged as the `admin` listener ([`http::bind`]).
pub async fn serve_admin(
    addr: SocketAddr,
    metrics: Metrics,
    ready: ReadyCheck,
    scrape: Option<ScrapeHook>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<SocketAddr> {
    let state = AdminState {
        metrics,
        ready,
        scrape,
    };
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready_handler))
        .with_state(state);
    let app = http::observe(app);
    let listener = http::bind("admin", addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(http::serve(listener, app, http::Edge::default(), shutdown));
    Ok(bound)
}

async fn metrics_handler(State(s): State<AdminState>) -> impl IntoResponse {
    if let Some(h) = &s.scrape {
        h().await;
    }
    (
        [("content-type", "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
}

async fn ready_handler(State(s): State<AdminState>) -> impl IntoResponse {
    if draining() {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n".to_owned())
    } else {
        match (s.ready)().await {
            Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
            Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        }
    }
}

/// Prints a line for a person on stdout (CLI output). Services log with `tracing` instead.
/// A closed pipe (`actiond approvals list | head -1`) ends the process quietly instead of
/// panicking.
pub fn say(line: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}")
        && e.kind() == std::io::ErrorKind::BrokenPipe
    {
        std::process::exit(0);
    }
}

/// Prints a line for a person on stderr (an error that ends a command, a dev notice). Unlike
/// `eprintln!`, which panics (exit 101) when stderr is a closed pipe (`actiond … 2>&1 | head
/// -1` after head has gone), a failed write is dropped: nobody is left to read it, and the
/// exit code still says how the command ended.
pub fn tell(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Runs CPU-bound work off the async executor with a time budget. `None` when the budget ran
/// out or the work panicked (the thread may keep running: budget the inputs too).
pub async fn with_budget<T: Send + 'static>(
    budget: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    match tokio::time::timeout(budget, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(v)) => Some(v),
        _ => None,
    }
}

/// [`with_budget`] for a batch: one handoff to the blocking pool for all of `items` instead of
/// one per item. `f` runs on each item in turn on one blocking thread; each item keeps its own
/// `budget`, counted from the moment the previous item's answer arrived (the first's from the
/// call). Answers come in the order of `items`: `None` where the budget ran out or `f`
/// panicked, as with [`with_budget`].
///
/// When an item overruns or panics, the thread is left to it and takes no further item; the
/// items it had not taken run with [`with_budget`] each. One slow item so costs the others no
/// more time than if each had been handed off alone. Handing off each item of a batch
/// separately woke a blocking thread per item: measured with `perf` on the executor, those
/// wake-ups and parks cost about three times the rule evaluations themselves.
pub async fn with_budget_each<I, T, F>(
    budget: std::time::Duration,
    items: Vec<I>,
    f: F,
) -> Vec<Option<T>>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(I) -> T + Send + Sync + 'static,
{
    use std::sync::atomic::{AtomicBool, Ordering};
    let n = items.len();
    let f = std::sync::Arc::new(f);
    // Items not yet taken by the thread. `stop` is set under this lock, so that once it is set,
    // what the queue holds is exactly what the thread will never take.
    let queue = std::sync::Arc::new(std::sync::Mutex::new(
        items.into_iter().collect::<std::collections::VecDeque<I>>(),
    ));
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    if n > 0 {
        let (f, queue, stop) = (f.clone(), queue.clone(), stop.clone());
        tokio::task::spawn_blocking(move || {
            loop {
                let item = {
                    let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    q.pop_front()
                };
                let Some(item) = item else { return };
                // A panic ends the thread here and drops `tx`: the caller sees the channel close.
                if tx.send(f(item)).is_err() {
                    return;
                }
            }
        });
    }
    let mut out: Vec<Option<T>> = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout(budget, rx.recv()).await {
            Ok(Some(v)) => out.push(Some(v)),
            // Over budget (`Err`) or panicked (`Ok(None)`): this item has no answer.
            _ => {
                out.push(None);
                break;
            }
        }
    }
    if out.len() == n {
        return out;
    }
    let rest: Vec<I> = {
        let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
        stop.store(true, Ordering::Release);
        q.drain(..).collect()
    };
    let taken = n - rest.len();
    // The item given up on may never have been taken: its budget ran out while the thread
    // waited for the blocking pool or the CPU, or the runtime is shutting down and never ran
    // it. It is still in `rest` and runs there; its `None` goes, so that every answer stays at
    // its item's position. (`out` holds an answer for each item the thread took, but the last.)
    if taken < out.len() {
        out.truncate(taken);
    }
    // The thread may have answered the item given up on and taken the next one just before
    // `stop` was set: that answer is dropped, the next one still gets its own budget.
    if taken > out.len() {
        let _late = rx.recv().await;
        while out.len() < taken {
            match tokio::time::timeout(budget, rx.recv()).await {
                Ok(Some(v)) => out.push(Some(v)),
                _ => out.push(None),
            }
        }
    }
    let alone = rest.into_iter().map(|item| {
        let f = f.clone();
        with_budget(budget, move || f(item))
    });
    out.extend(futures_util::future::join_all(alone).await);
    debug_assert_eq!(out.len(), n, "one answer per item");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item answered, in order, on one blocking thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_budget_each_answers_every_item_in_order_on_one_thread() {
        let out = with_budget_each(
            std::time::Duration::from_secs(5),
            (0..50).collect(),
            |i: u32| (i * 2, std::thread::current().id()),
        )
        .await;
        assert_eq!(out.len(), 50);
        let threads: std::collections::HashSet<_> = out.iter().map(|o| o.unwrap().1).collect();
        assert_eq!(threads.len(), 1, "one handoff for the batch");
        let values: Vec<u32> = out.iter().map(|o| o.unwrap().0).collect();
        assert_eq!(values, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert!(
            with_budget_each(std::time::Duration::from_secs(1), Vec::<u32>::new(), |i| i)
                .await
                .is_empty()
        );
    }

    /// When the blocking pool is busy, the first item's budget runs out before the batch's
    /// thread has taken it: the item was never evaluated, so it runs on its own, and every
    /// answer stays at its item's position (one answer per item, none shifted).
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "keeps the blocking pool busy for longer than the budget: the delay is the subject"
    )]
    fn with_budget_each_keeps_positions_when_the_pool_is_busy() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(async {
            // The pool's only blocking thread is busy for 300 ms; the budget is 200 ms.
            let busy = tokio::task::spawn_blocking(|| {
                std::thread::sleep(std::time::Duration::from_millis(300))
            });
            tokio::task::yield_now().await;
            let out = with_budget_each(
                std::time::Duration::from_millis(200),
                (0..5).collect(),
                |i: u32| i,
            )
            .await;
            busy.await.unwrap();
            out
        });
        assert_eq!(out, (0..5).map(Some).collect::<Vec<_>>());
    }

    /// An item over budget gets `None`, a panicking one too; every other item is answered, in
    /// order, and the slow item delays the batch by about one budget, not more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[expect(
        clippy::disallowed_methods,
        reason = "an item slower than its budget: the delay is the subject"
    )]
    async fn with_budget_each_gives_up_on_a_slow_or_panicking_item_only() {
        let budget = std::time::Duration::from_millis(200);
        let started = std::time::Instant::now();
        let out = with_budget_each(budget, (0..10).collect(), |i: u32| {
            if i == 3 {
                std::thread::sleep(std::time::Duration::from_secs(2));
            }
            if i == 6 {
                panic!("item 6");
            }
            i
        })
        .await;
        let took = started.elapsed();
        let expected: Vec<Option<u32>> = (0..10).map(|i| (i != 3 && i != 6).then_some(i)).collect();
        assert_eq!(out, expected);
        assert!(
            took < std::time::Duration::from_millis(1500),
            "took {took:?}"
        );
    }

    /// The first scrape names the build and role once; no series carries a role label.
    #[test]
    fn build_info_names_the_role_and_no_metric_carries_it() {
        let m = Metrics::new("api");
        let c = m.counter_vec("x_total", "x", &["result"]);
        c.with_label_values(&["ok"]).inc();
        let text = m.render();
        assert!(
            text.contains(&format!(
                "actiond_build_info{{role=\"api\",version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
        assert!(text.contains("actiond_x_total{result=\"ok\"} 1"), "{text}");
        assert!(!text.contains("service="), "{text}");
        #[cfg(target_os = "linux")]
        assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
    }
}
