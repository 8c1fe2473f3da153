//! actiond-store: everything that talks to Postgres.
//!
//! - [`Db`]: the connection pool (deadpool-postgres) and migrations (refinery, under a session
//!   advisory lock so two replicas starting at once do not race).
//! - [`tenants`], [`agents`]: administration.
//! - [`proposals`]: submission (idempotency, open-intent dedupe) and the agent's read.
//! - [`policy_queue`], [`executor_queue`]: `FOR UPDATE SKIP LOCKED` claims, decisions, grant
//!   issue and spend, outcomes and the sweeps that own each state's timeout.
//! - [`approvals`]: decisions by people (web, break-glass CLI).
//! - [`audit`]: the append-only audit log; every state change writes one in its transaction.
//! - [`seals`], [`audit_export`], [`retention`]: the sealed audit chain, its export and
//!   verification, and the purge of decided proposals' customer data.
//! - [`listen`]: the dedicated LISTEN connection used as a wake-up hint.
//!
//! Every repository function that touches tenant data takes the tenant id.

pub mod agent_cache;
pub mod agents;
pub mod approvals;
pub mod audit;
pub mod audit_export;
pub mod budgets;
pub mod connect_error;
pub mod effects;
pub mod executor_queue;
pub mod grants;
pub mod listen;
pub mod metrics;
pub mod notifications;
pub mod passkeys;
pub mod policy_cache;
pub mod policy_queue;
pub mod previews;
pub mod proposals;
pub mod queue_views;
pub mod retention;
pub mod seals;
pub mod shadow;
pub mod sql_objects;
pub mod stages;
pub mod tenant_move;
pub mod tenants;
pub mod tls;
pub mod web_sessions;

mod suspect;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use std::time::Duration;

/// Errors from the store. `Db` carries the Postgres error; callers map it to an opaque 500.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A query failed. Made with `From`, which remembers a failure that
    /// [`StoreError::is_unavailable`] recognises so the pool checks connections before it hands
    /// them out again ([`Db::connect`]).
    #[error("database error: {}", db_detail(.0))]
    Db(#[source] tokio_postgres::Error),
    /// No connection could be had from the pool.
    #[error("database pool: {}", tls::error_chain(.0))]
    Pool(#[from] deadpool_postgres::PoolError),
    /// A connection could not be opened: the message names the address, the setting it came
    /// from and the likely fix ([`connect_error::explain`]). `retry` when the server could
    /// not be reached (or cannot serve now), so waiting may help; not for a refused login or a
    /// missing database.
    #[error("{message}")]
    Connect {
        /// One line: address, setting, what happened, what to do.
        message: String,
        /// Whether the failure is one of reaching the server ([`StoreError::is_unavailable`]).
        retry: bool,
    },
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migration(String),
    /// Invalid configuration (bad URL, pool build).
    #[error("database configuration: {0}")]
    Config(String),
    /// A row that must exist does not.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A request conflicts with the current state (message is safe to show).
    #[error("{0}")]
    Conflict(String),
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        let e = StoreError::Db(e);
        if e.is_unavailable() {
            suspect::connection_lost();
        }
        e
    }
}

impl StoreError {
    /// The SQLSTATE of a database error, if any.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            StoreError::Db(e) => e.as_db_error().map(|d| d.code().code()),
            _ => None,
        }
    }
    /// Whether the failure means "the database cannot serve now, try again" rather than "this
    /// request or actiond is wrong": no pooled connection, a closed connection, a failure with
    /// no server error (I/O, TLS), or a server error of SQLSTATE class 08 (connection
    /// exception), 53 (insufficient resources, e.g. `53300` too many connections) or 57
    /// (operator intervention: `57P01` admin shutdown during a restart, `57P02` crash
    /// shutdown, `57P03` still starting up), or `25006` (read-only transaction: a server that
    /// became a standby under a failover). Source for the classes: PostgreSQL, Appendix A
    /// "Error Codes". The api answers these with 503 and `Retry-After`, the web app with a 503
    /// page, the CLI with its "unreachable" exit code.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Pool(_) => true,
            StoreError::Connect { retry, .. } => *retry,
            StoreError::Db(e) => {
                e.is_closed() || e.code().is_none_or(|c| sqlstate_unavailable(c.code()))
            }
            _ => false,
        }
    }
    /// The full chain of a database error (tokio-postgres' `Display` hides the cause).
    pub fn detail(&self) -> String {
        match self {
            StoreError::Db(e) => db_detail(e),
            other => other.to_string(),
        }
    }
}

/// Whether a SQLSTATE names a server that cannot serve now (classes 08, 53, 57; see
/// [`StoreError::is_unavailable`]).
pub fn sqlstate_unavailable(sqlstate: &str) -> bool {
    // 25006 read_only_sql_transaction: the connection reached a server that is (now) a
    // standby, as a demoted primary is after a switchover: another host takes the writes.
    sqlstate == "25006"
        || ["08", "53", "57"]
            .iter()
            .any(|class| sqlstate.starts_with(class))
}

pub(crate) fn db_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} ({}): {}", d.severity(), d.code().code(), d.message()),
        None => tls::error_chain(e),
    }
}

/// A transaction on a pooled connection.
pub type Tx<'a> = deadpool_postgres::Transaction<'a>;

/// Result alias for the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A pooled client.
pub type Client = deadpool_postgres::Object;

/// How a pool's connections choose plans for prepared statements (see
/// [`Db::connect_generic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plans {
    /// Postgres' default (`plan_cache_mode = auto`).
    Auto,
    /// `plan_cache_mode = force_generic_plan` for every connection.
    Generic,
}

/// The pool's `post_create` hook of [`Db::connect_generic`]: one statement when a connection
/// is opened.
fn generic_plans_hook() -> deadpool_postgres::Hook {
    deadpool_postgres::Hook::async_fn(|client: &mut deadpool_postgres::ClientWrapper, _| {
        Box::pin(async move {
            client
                .batch_execute("SET plan_cache_mode = force_generic_plan")
                .await
                .map_err(deadpool_postgres::HookError::Backend)
        })
    })
}

/// Connection pool plus the config it was built from (for dedicated connections).
#[derive(Clone)]
pub struct Db {
    pool: Pool,
    /// Shared, not copied: a `Db` is cloned into every request's state, and a `Config` clone
    /// is a dozen allocations.
    config: std::sync::Arc<tokio_postgres::Config>,
    tls: tls::Connector,
}

mod embedded {
    refinery::embed_migrations!("../../sql/migrations");
}

/// Every schema source compiled into this binary, as `(name, SQL)`: each embedded migration
/// (`V<n>__<name>`) in version order, then each function file of `sql/functions` by stem. What
/// [`Db::migrate`] would create is a function of exactly these (test kits key their migrated
/// template databases by them, not by the files on disk, which a stale build may not match).
pub fn embedded_schema_sources() -> Vec<(String, String)> {
    let mut migrations = embedded::migrations::runner().get_migrations().clone();
    migrations.sort_by_key(refinery::Migration::version);
    migrations
        .iter()
        .map(|m| {
            (
                format!("V{}__{}", m.version(), m.name()),
                m.sql().unwrap_or_default().to_owned(),
            )
        })
        .chain(
            sql_objects::FILES
                .iter()
                .map(|(stem, sql)| ((*stem).to_owned(), (*sql).to_owned())),
        )
        .collect()
}

/// The versions of the embedded migrations (`sql/migrations/V<version>__*.sql`), ascending.
pub fn migration_versions() -> Vec<i32> {
    let mut v: Vec<i32> = embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| m.version())
        .collect();
    v.sort_unstable();
    v
}

/// Session advisory lock key serializing migrations across replicas.
const MIGRATION_LOCK: i64 = 0x6163_7469_6f6e_6400; // "actiond\0"

impl Db {
    /// Builds a pool from a libpq connection string (`postgres://user@host:port/db?sslmode=…`).
    /// TLS follows libpq's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` (see [`tls`]); the
    /// same connector serves the pool and every dedicated connection.
    /// `max_size` is the pool size per process. Connections are opened lazily.
    ///
    /// A connection goes back to the pool when its request ends, even when its last statement
    /// failed because the backend was terminated or the connection was lost; its socket may
    /// not show the close yet, so the pool's own check ("is the connection task finished?")
    /// can pass and the next request would fail on it too. So after such a failure anywhere in
    /// the process, a pooled connection handed out before it is checked with an empty query
    /// (one round trip, at most 5 s) before it is handed out again, and
    /// dropped (a new one is opened) when that fails. Connections handed out after the last
    /// failure are not checked.
    pub fn connect(url: &str, max_size: usize) -> Result<Self> {
        Self::connect_with(url, max_size, Plans::Auto)
    }

    /// [`Db::connect`] for the services on the allow path (api, policy, executor): every
    /// connection of the pool plans its prepared statements generically (`SET
    /// plan_cache_mode = force_generic_plan` once, when it is opened).
    ///
    /// Why: Postgres plans a prepared statement afresh for each of its first five executions
    /// on a connection, and afterwards whenever it estimates the generic plan to cost more,
    /// which it always does for a claim whose `LIMIT` is a parameter. A worker's batched
    /// statements run a few hundred times per connection, and planning one costs 0.5–2.5 ms:
    /// measured in the release bench (`pg_stat_statements.track_planning`), about half of the
    /// executor's claims and a fifth to a quarter of its spends and outcomes were planned
    /// anew, 4% of Postgres CPU per proposal; each new api connection planned the submission
    /// five times, 2.5 ms each. The statements these services run on the allow path are
    /// written to find their rows by primary key or through a queue's partial index whatever
    /// their parameters; `tests/e2e/queue_plans.rs` checks their generic plans at 10k and 200k
    /// rows. The web app keeps Postgres' default: its list pages' filters are optional.
    pub fn connect_generic(url: &str, max_size: usize) -> Result<Self> {
        Self::connect_with(url, max_size, Plans::Generic)
    }

    fn connect_with(url: &str, max_size: usize, plans: Plans) -> Result<Self> {
        let (config, params) = tls::parse(url)?;
        let connector = params.connector()?;
        let mut cfg = config.clone();
        if cfg.get_application_name().is_none() {
            cfg.application_name("actiond");
        }
        // 5 s unless the string or PGCONNECT_TIMEOUT says otherwise (as libpq, which has none).
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(Duration::from_secs(5));
        }
        dead_peer_defaults(&mut cfg, &tls::given_keys(url));
        let mgr = Manager::from_config(
            cfg.clone(),
            connector.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(max_size)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .pre_recycle(suspect::check_hook());
        let pool = match plans {
            Plans::Auto => pool,
            Plans::Generic => pool.post_create(generic_plans_hook()),
        };
        let pool = pool
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self {
            pool,
            config: std::sync::Arc::new(cfg),
            tls: connector,
        })
    }

    /// A pooled client.
    pub async fn client(&self) -> Result<Client> {
        self.pool
            .get()
            .await
            .map_err(|e| connect_error::explain_pool(&self.config, e))
    }

    /// The connection config (for a dedicated LISTEN connection).
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The TLS connector of this database's connections (for a dedicated LISTEN connection).
    pub(crate) fn tls(&self) -> &tls::Connector {
        &self.tls
    }

    /// Opens a dedicated (non-pooled) connection; its driver runs on a spawned task.
    pub async fn dedicated(&self) -> Result<tokio_postgres::Client> {
        let (client, conn) = self.config.connect(self.tls.clone()).await.map_err(|e| {
            let e = connect_error::explain(&self.config, &e);
            if e.is_unavailable() {
                suspect::connection_lost();
            }
            e
        })?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "dedicated connection ended");
            }
        });
        Ok(client)
    }

    /// Applies the embedded migrations (`sql/migrations`), idempotently. Two replicas starting at
    /// once serialize on a session advisory lock; the second finds nothing to do.
    /// Returns the versions applied by this call.
    ///
    /// Then, under the same lock, applies the replaceable objects (`sql/functions/`, see
    /// [`sql_objects`]) whose content changed, or all of them when a migration was applied.
    pub async fn migrate(&self) -> Result<Vec<i32>> {
        self.migrate_runner(embedded::migrations::runner(), true)
            .await
    }

    /// Applies the embedded migrations up to and including `version` only (for tests that
    /// load rows into an older schema and then migrate them forward). Returns the versions
    /// applied by this call.
    pub async fn migrate_to(&self, version: i32) -> Result<Vec<i32>> {
        self.migrate_runner(
            embedded::migrations::runner().set_target(refinery::Target::Version(version)),
            false,
        )
        .await
    }

    /// Runs `runner` under the migration lock, then the replaceable objects when `objects`.
    async fn migrate_runner(&self, runner: refinery::Runner, objects: bool) -> Result<Vec<i32>> {
        let mut client = self.dedicated().await?;
        client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        let res = Self::migrate_locked(&mut client, runner, objects).await;
        let _ = client
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await;
        res
    }

    /// The body of [`Db::migrate_runner`], with the lock held.
    async fn migrate_locked(
        client: &mut tokio_postgres::Client,
        runner: refinery::Runner,
        objects: bool,
    ) -> Result<Vec<i32>> {
        let report = runner.run_async(client).await.map_err(|e| {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(": ");
                msg.push_str(&s.to_string());
                src = s.source();
            }
            StoreError::Migration(msg)
        })?;
        let applied: Vec<i32> = report
            .applied_migrations()
            .iter()
            .map(|m| m.version())
            .collect();
        if objects {
            sql_objects::apply(client, !applied.is_empty()).await?;
        }
        Ok(applied)
    }

    /// True when the database can take writes now ([`Db::readiness`]).
    pub async fn ping(&self) -> bool {
        self.readiness().await.is_ok()
    }

    /// Readiness: `Ok` when a pooled connection answers and its session may write (`SHOW
    /// transaction_read_only` is `off`: a primary, not a hot standby or a server made
    /// read-only); otherwise [`NO_WRITABLE_DATABASE`] and why, one line for `/readyz`.
    /// While a failover runs, no host of a multi-host `DATABASE_URL` is a writable primary
    /// (`target_session_attrs=read-write` refuses the standby), and this says so until one is.
    pub async fn readiness(&self) -> std::result::Result<(), String> {
        let c = self
            .client()
            .await
            .map_err(|e| format!("{NO_WRITABLE_DATABASE}: {}", e.detail()))?;
        let rows = c
            .simple_query("SHOW transaction_read_only")
            .await
            .map_err(|e| format!("{NO_WRITABLE_DATABASE}: {}", db_detail(&e)))?;
        let read_only = rows.iter().any(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0) == Some("on"),
            _ => false,
        });
        if read_only {
            return Err(format!(
                "{NO_WRITABLE_DATABASE}: the server connected to is read-only (a standby?)"
            ));
        }
        Ok(())
    }
}

/// What `/readyz` answers (with 503) while no host of `DATABASE_URL` takes writes: down,
/// refusing connections, or a standby (see [`Db::readiness`]).
pub const NO_WRITABLE_DATABASE: &str = "no writable database";

/// TCP keepalive idle time of every connection unless the connection string sets
/// `keepalives_idle` (tokio-postgres' default is two hours, the kernel's).
pub const KEEPALIVES_IDLE: Duration = Duration::from_secs(5);
/// Interval between keepalive probes unless `keepalives_interval` is set.
pub const KEEPALIVES_INTERVAL: Duration = Duration::from_secs(2);
/// Unanswered probes before the connection is dropped unless `keepalives_retries` is set.
pub const KEEPALIVES_RETRIES: u32 = 3;
/// How long sent data may stay unacknowledged before the connection is dropped
/// (`TCP_USER_TIMEOUT`) unless `tcp_user_timeout` is set.
pub const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// Makes a connection to a server that vanished without closing it (a lost machine, a
/// partition: nothing answers, no reset arrives) fail within seconds instead of hanging on the
/// kernel's defaults (hours): TCP keepalives after [`KEEPALIVES_IDLE`] of silence, every
/// [`KEEPALIVES_INTERVAL`], [`KEEPALIVES_RETRIES`] unanswered probes (about 11 s), and
/// [`TCP_USER_TIMEOUT`] for a request the server never acknowledged. A server that is alive
/// answers probes from its kernel, so a long statement is never cut by these. Each applies
/// only when the connection string (`given`: its keywords) does not set it; `keepalives=0`
/// turns keepalives off as in libpq.
fn dead_peer_defaults(cfg: &mut tokio_postgres::Config, given: &[String]) {
    let has = |k: &str| given.iter().any(|g| g == k);
    if !has("keepalives_idle") {
        cfg.keepalives_idle(KEEPALIVES_IDLE);
    }
    if !has("keepalives_interval") {
        cfg.keepalives_interval(KEEPALIVES_INTERVAL);
    }
    if !has("keepalives_retries") {
        cfg.keepalives_retries(KEEPALIVES_RETRIES);
    }
    if !has("tcp_user_timeout") {
        cfg.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
}

/// Sets the current transaction's tenants for row-level security: `$1` a comma-separated
/// list of tenant ids (see [`set_tenants`]), local to the transaction.
pub(crate) const SET_TENANTS_SQL: &str = "SELECT set_config('actiond.tenant_ids', $1, true)";

/// Sets the tenant for row-level security for the rest of the current transaction only
/// (`SET LOCAL` semantics via `set_config(…, true)`), so a pooled connection never carries a
/// tenant into the next request. The policies read `actiond.tenant_ids` (V4 migration).
pub async fn set_tenant(tx: &tokio_postgres::Transaction<'_>, tenant: &str) -> Result<()> {
    set_tenants(tx, &[tenant.to_owned()]).await
}

/// Like [`set_tenant`] for several tenants (an approver of more than one). Tenant ids never
/// contain commas (`^[a-z0-9][a-z0-9_-]*$`); any that would is dropped.
pub async fn set_tenants(tx: &tokio_postgres::Transaction<'_>, tenants: &[String]) -> Result<()> {
    let list: Vec<&str> = tenants
        .iter()
        .map(String::as_str)
        .filter(|t| actiond_core::ids::TenantId::parse(t).is_ok())
        .collect();
    tx.execute(SET_TENANTS_SQL, &[&list.join(",")]).await?;
    Ok(())
}

/// Lets the current transaction of the web role see every tenant (`'*'`): only for code that
/// must, like the escalation notifier. The api role's policies ignore `'*'`.
pub async fn set_all_tenants(tx: &tokio_postgres::Transaction<'_>) -> Result<()> {
    tx.execute("SELECT set_config('actiond.tenant_ids', '*', true)", &[])
        .await?;
    Ok(())
}

#[cfg(test)]
mod dead_peer_tests {
    use super::*;

    /// Without settings of its own a pool's connections give up on a silent server within
    /// seconds; a connection string's own values win, and a multi-host string keeps its hosts
    /// and `target_session_attrs`.
    #[test]
    fn keepalives_and_user_timeout_default_to_seconds_unless_the_string_sets_them() {
        let db = Db::connect(
            "host=127.0.0.1,127.0.0.2 port=5432,5433 user=u dbname=d target_session_attrs=read-write",
            1,
        )
        .unwrap();
        let c = db.config();
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), KEEPALIVES_IDLE);
        assert_eq!(c.get_keepalives_interval(), Some(KEEPALIVES_INTERVAL));
        assert_eq!(c.get_keepalives_retries(), Some(KEEPALIVES_RETRIES));
        assert_eq!(c.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
        assert_eq!(c.get_hosts().len(), 2);
        assert_eq!(c.get_ports(), &[5432, 5433]);
        assert_eq!(
            c.get_target_session_attrs(),
            tokio_postgres::config::TargetSessionAttrs::ReadWrite
        );

        let db = Db::connect(
            "postgres://u@h/d?keepalives_idle=30&keepalives_interval=7&keepalives_retries=9&tcp_user_timeout=60",
            1,
        )
        .unwrap();
        let c = db.config();
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(30));
        assert_eq!(c.get_keepalives_interval(), Some(Duration::from_secs(7)));
        assert_eq!(c.get_keepalives_retries(), Some(9));
        assert_eq!(c.get_tcp_user_timeout(), Some(&Duration::from_secs(60)));
    }
}

#[cfg(test)]
mod unavailable_tests {
    use super::sqlstate_unavailable;

    /// A restart's terminated backend, a server still starting and a full connection table are
    /// "try again"; a constraint, syntax, serialization or internal error is not.
    #[test]
    fn server_states_that_pass_are_unavailable_not_internal() {
        for code in [
            "57P01", "57P02", "57P03", "08006", "08001", "53300", "25006",
        ] {
            assert!(sqlstate_unavailable(code), "{code}");
        }
        for code in ["23505", "42601", "40001", "XX000", "P0001", "42501"] {
            assert!(!sqlstate_unavailable(code), "{code}");
        }
    }
}
