//! Test support (dev-only): real Postgres, real processes, real HTTP.
//!
//! - [`TestDb`]: a fresh database per test, created from a migrated template database
//!   (`CREATE DATABASE t_<uuid> TEMPLATE actiond_tmpl_<hash of migrations>`), dropped on drop.
//!   The server comes from `ACTIOND_TEST_DATABASE_URL` (default
//!   `postgres://postgres@127.0.0.1:5432/postgres`), or is named with [`TestDb::new_on`].
//! - [`PgCluster`]: a private PostgreSQL server of one test's own (initdb + pg_ctl), for tests
//!   that restart or stop the server under running services.
//! - [`Keys`]: generated grant keys laid out like `actiond dev` does (one credentials
//!   directory per signer, the executor's `trusted_keys/`).
//! - [`Receiver`]: a local HTTP server that counts and records requests, optionally slow.
//! - [`Service`]: an `actiond <role>` child process with its log in a file, killed on drop;
//!   started on port 0, it says which port it got ([`Service::bound`]).
//! - [`ports`]: ports for servers that must be told theirs, started again on fresh ones when
//!   another process took one first.
//! - [`providers`]: real PowerDNS, SMTP and target-Postgres servers for handler tests.

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test kit: a failed set-up step stops the test loudly"
)]

pub mod cluster;
pub mod ports;
pub mod providers;

pub use cluster::{PgCluster, StopMode};
pub use ports::{free_port, free_ports, with_free_ports, with_free_ports_async};

/// A scratch directory `<prefix>-<uuid>` under the system's temporary directory, removed with
/// everything in it when dropped (at the end of the test that holds it, pass or fail): test
/// credentials directories hold freshly generated private keys, which must not pile up in
/// `/tmp`. Derefs to its [`Path`](std::path::Path).
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    /// Creates the directory (panics when it cannot).
    pub fn new(prefix: &str) -> Self {
        let p = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

use actiond_core::grant::{GrantSigner, generate_key};
use actiond_store::Db;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The admin connection URL of the test Postgres server.
pub fn server_url() -> String {
    std::env::var("ACTIOND_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

fn with_db(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let head = base.rsplit_once('/').map(|x| x.0).unwrap_or(base);
    format!("{head}/{db}{query}")
}

async fn admin_client(server: &str) -> tokio_postgres::Client {
    actiond_store::tls::connect(server)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to the test Postgres at {server} ({e}); start it or set ACTIOND_TEST_DATABASE_URL"))
}

/// Key of the migrated template database: a hash of the schema sources compiled into this
/// binary ([`actiond_store::embedded_schema_sources`]), so a template is never reused by a build
/// whose migrations or function files differ.
fn migrations_hash() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (name, sql) in actiond_store::embedded_schema_sources() {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(sql.as_bytes());
        h.update([0]);
    }
    hex::encode(&h.finalize()[..8])
}

/// Template database name per server admin URL, built once per test process and server.
static TEMPLATES: std::sync::LazyLock<tokio::sync::Mutex<HashMap<String, String>>> =
    std::sync::LazyLock::new(Default::default);

/// The migrated template database on `server`, created (by one test binary at a time, under an
/// advisory lock) when that server lacks it.
async fn template(server: &str) -> String {
    let mut known = TEMPLATES.lock().await;
    if let Some(name) = known.get(server) {
        return name.clone();
    }
    let name = format!("actiond_tmpl_{}", migrations_hash());
    let c = admin_client(server).await;
    // Serialize template creation across test binaries running at once.
    c.execute("SELECT pg_advisory_lock(4242424242)", &[])
        .await
        .unwrap();
    let exists = c
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .unwrap()
        .is_some();
    if !exists {
        build_template(&c, server, &name).await;
    }
    c.execute("SELECT pg_advisory_unlock(4242424242)", &[])
        .await
        .unwrap();
    known.insert(server.to_owned(), name.clone());
    name
}

/// Migrates `<name>_building` on `server`, then renames it to `name`.
async fn build_template(c: &tokio_postgres::Client, server: &str, name: &str) {
    let building = format!("{name}_building");
    c.batch_execute(&format!("DROP DATABASE IF EXISTS {building}"))
        .await
        .unwrap();
    c.batch_execute(&format!("CREATE DATABASE {building}"))
        .await
        .unwrap();
    let db = Db::connect(&with_db(server, &building), 1).unwrap();
    db.migrate()
        .await
        .unwrap_or_else(|e| panic!("migrations failed: {e}"));
    drop(db);
    // A database with sessions can be neither renamed nor used as a template: wait until the
    // migration's connections have gone.
    eventually(Duration::from_secs(10), "migration sessions closed", || {
        let building = &building;
        async move {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = $1",
                    &[building],
                )
                .await
                .unwrap()
                .get(0);
            (n == 0).then_some(())
        }
    })
    .await;
    c.batch_execute(&format!("ALTER DATABASE {building} RENAME TO {name}"))
        .await
        .unwrap();
}

/// A fresh, migrated database of its own.
pub struct TestDb {
    /// Database name.
    pub name: String,
    /// URL of the database (superuser).
    pub url: String,
    /// A pool on it.
    pub db: Db,
    /// Admin URL of the server it lives on (see [`TestDb::new_on`]).
    pub server: String,
}

impl TestDb {
    /// Creates the database from the migrated template on the test server ([`server_url`]).
    pub async fn new() -> Self {
        Self::new_on(&server_url()).await
    }

    /// Creates the database on the server whose superuser connection URL is `server` (e.g.
    /// [`PgCluster::admin_url`]), migrating a template there first when it has none. Panics
    /// when the server cannot be reached or migrated.
    pub async fn new_on(server: &str) -> Self {
        let tmpl = template(server).await;
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let c = admin_client(server).await;
        // Another test copying the template at the same moment makes Postgres refuse with
        // "source database is being accessed by other users": retry until a deadline.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match c
                .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {tmpl}"))
                .await
            {
                Ok(()) => break,
                Err(_) if tokio::time::Instant::now() < deadline => {
                    poll_pause(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("CREATE DATABASE failed: {e}"),
            }
        }
        let url = with_db(server, &name);
        let db = Db::connect(&url, 8).unwrap();
        Self {
            name,
            url,
            db,
            server: server.to_owned(),
        }
    }

    /// URL of a login user that is a member of exactly one service role
    /// (`actiond_api`, `actiond_policy`, `actiond_web`, `actiond_executor`, `actiond_admin`),
    /// created on first use on this database's server (cluster-wide, trust authentication
    /// assumed).
    pub async fn role_url(&self, role: &str) -> String {
        let login = format!("actiond_test_{role}");
        let c = admin_client(&self.server).await;
        let sql = format!(
            "DO $$ BEGIN CREATE ROLE {login} LOGIN IN ROLE actiond_{role}; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        );
        c.batch_execute(&sql).await.unwrap();
        let mut u = url::Url::parse(&self.url).unwrap();
        u.set_username(&login).unwrap();
        u.set_password(None).unwrap();
        u.to_string()
    }

    /// A direct client as a service role's login user (see [`TestDb::role_url`]).
    pub async fn as_role(&self, role: &str) -> tokio_postgres::Client {
        actiond_store::tls::connect(&self.role_url(role).await)
            .await
            .unwrap()
    }

    /// A direct superuser client (for tampering like an attacker with database access).
    pub async fn superuser(&self) -> tokio_postgres::Client {
        actiond_store::tls::connect(&self.url).await.unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        let server = self.server.clone();
        if std::env::var_os("ACTIOND_TEST_KEEP_DB").is_some() {
            eprintln!("kept test database {name}");
            return;
        }
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                // A private server may be stopped already (or gone with its test): then there
                // is nothing to drop.
                if let Ok(c) = actiond_store::tls::connect(&server).await {
                    let _ = c
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// Grant keys and credentials laid out per service in a temporary directory.
pub struct Keys {
    /// Root directory (removed on drop).
    pub dir: PathBuf,
    /// Policy credentials dir (`grant_signing_key`).
    pub policy_dir: PathBuf,
    /// Break-glass CLI credentials dir.
    pub cli_dir: PathBuf,
    /// Web credentials dir.
    pub web_dir: PathBuf,
    /// Executor credentials dir (`trusted_keys/`, tenant credentials).
    pub executor_dir: PathBuf,
    /// The break-glass signer, for tests that forge or craft grants.
    pub breakglass: Arc<GrantSigner>,
    /// The policy signer.
    pub policy: Arc<GrantSigner>,
}

impl Keys {
    /// Generates keys; the executor trusts policy-1, web-1 and breakglass-1.
    pub fn generate() -> Self {
        let dir =
            std::env::temp_dir().join(format!("actiond-test-{}", uuid::Uuid::new_v4().simple()));
        let executor_dir = dir.join("executor");
        std::fs::create_dir_all(executor_dir.join("trusted_keys")).unwrap();
        let mut signers = HashMap::new();
        for (role, key_id) in [
            ("policy", "policy-1"),
            ("cli", "breakglass-1"),
            ("web", "web-1"),
        ] {
            let d = dir.join(role);
            std::fs::create_dir_all(&d).unwrap();
            let k = generate_key().unwrap();
            std::fs::write(d.join("grant_signing_key"), &k.private_pkcs8_b64).unwrap();
            std::fs::write(
                executor_dir
                    .join("trusted_keys")
                    .join(format!("{key_id}.pub")),
                &k.public_b64,
            )
            .unwrap();
            signers.insert(
                role,
                Arc::new(GrantSigner::from_pkcs8_b64(key_id, &k.private_pkcs8_b64).unwrap()),
            );
        }
        Self {
            policy_dir: dir.join("policy"),
            cli_dir: dir.join("cli"),
            web_dir: dir.join("web"),
            executor_dir,
            breakglass: signers["cli"].clone(),
            policy: signers["policy"].clone(),
            dir,
        }
    }

    /// Writes an executor credential `<tenant>.<name>`.
    pub fn credential(&self, tenant: &str, name: &str, value: &str) {
        std::fs::write(self.executor_dir.join(format!("{tenant}.{name}")), value).unwrap();
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One request seen by a [`Receiver`].
#[derive(Debug, Clone)]
pub struct Seen {
    /// Path.
    pub path: String,
    /// Headers (lowercase names).
    pub headers: HashMap<String, String>,
    /// Body.
    pub body: Vec<u8>,
}

/// A local HTTP server that records every request. Requests to paths starting with `/slow`
/// are answered only after `slow_delay`. Reads of `/v1/payment_intents/{id}` (the executor's
/// refund previews) are answered with a payment of 150.00 USD, 25.00 already refunded (a test
/// changes that with [`Receiver::set_amount_refunded`], as a refund made elsewhere would), and are
/// not recorded: [`Receiver::requests`] are the actions that reached the provider.
///
/// It also holds refunds as a Stripe-style billing API would: a `POST …/v1/refunds` (under any
/// prefix, `/slow/` too, stored before the late answer) stores one refund per `Idempotency-Key`
/// (a repeated key gets the same refund), and `GET …/v1/refunds?payment_intent=…` (the
/// executor's read-back, answered at once and not recorded) lists them with their metadata.
/// [`Receiver::hold_refunds_as`] makes it store later refunds with another status or amount
/// than asked, as a provider that got it wrong.
#[derive(Clone)]
pub struct Receiver {
    /// Base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// `127.0.0.1:PORT`.
    pub host_port: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    refunded: Arc<std::sync::atomic::AtomicI64>,
    billing: Arc<Mutex<Billing>>,
}

/// The refunds a [`Receiver`] holds.
#[derive(Default)]
struct Billing {
    /// Refunds in creation order, with the idempotency key that made each.
    refunds: Vec<(String, serde_json::Value)>,
    /// Status and amount stored instead of what was asked ([`Receiver::hold_refunds_as`]).
    hold_as: Option<(String, Option<i64>)>,
}

impl Billing {
    /// Stores the refund of a `POST /v1/refunds` (form body), once per idempotency key.
    fn refund(&mut self, key: &str, body: &[u8]) -> serde_json::Value {
        if let Some((_, r)) = self.refunds.iter().find(|(k, _)| !k.is_empty() && k == key) {
            return r.clone();
        }
        let form: Vec<(String, String)> = url::form_urlencoded::parse(body).into_owned().collect();
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let mut metadata = serde_json::Map::new();
        for (k, v) in &form {
            if let Some(m) = k
                .strip_prefix("metadata[")
                .and_then(|m| m.strip_suffix(']'))
            {
                metadata.insert(m.to_owned(), v.clone().into());
            }
        }
        let mut amount = get("amount").and_then(|a| a.parse::<i64>().ok());
        let mut status = "succeeded".to_owned();
        if let Some((st, am)) = &self.hold_as {
            status = st.clone();
            if am.is_some() {
                amount = *am;
            }
        }
        let r = serde_json::json!({
            "id": format!("re_{}", self.refunds.len() + 1),
            "object": "refund",
            "amount": amount,
            "currency": get("currency"),
            "payment_intent": get("payment_intent"),
            "status": status,
            "metadata": metadata,
        });
        self.refunds.push((key.to_owned(), r.clone()));
        r
    }

    /// `GET /v1/refunds?payment_intent=…`: the payment's refunds, newest first.
    fn list(&self, query: &str) -> serde_json::Value {
        let payment = url::form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "payment_intent")
            .map(|(_, v)| v.into_owned());
        let data: Vec<serde_json::Value> = self
            .refunds
            .iter()
            .rev()
            .map(|(_, r)| r.clone())
            .filter(|r| payment.is_none() || r["payment_intent"].as_str() == payment.as_deref())
            .collect();
        serde_json::json!({"object": "list", "data": data, "has_more": false})
    }
}

impl Receiver {
    /// Sets what the payment reads as already refunded (minor units) from now on.
    pub fn set_amount_refunded(&self, minor_units: i64) {
        self.refunded
            .store(minor_units, std::sync::atomic::Ordering::SeqCst);
    }

    /// Starts the receiver.
    pub async fn start(slow_delay: Duration) -> Self {
        use axum::body::Bytes;
        use axum::http::{HeaderMap, Method, Uri};
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let billing: Arc<Mutex<Billing>> = Arc::default();
        let refunded = Arc::new(std::sync::atomic::AtomicI64::new(2500));
        let r2 = refunded.clone();
        let (s2, b2) = (seen.clone(), billing.clone());
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let (s, b) = (s2.clone(), b2.clone());
                let refunded = r2.load(std::sync::atomic::Ordering::SeqCst);
                async move {
                    let path = uri.path().to_owned();
                    if path.starts_with("/v1/payment_intents/") {
                        // A preview's read-only lookup: answered, not recorded as an action.
                        return axum::Json(serde_json::json!({"id": path.rsplit('/').next(), "amount": 15000, "currency": "usd", "latest_charge": {"amount_refunded": refunded}}));
                    }
                    let refunds = path.ends_with("/v1/refunds");
                    if refunds && method == Method::GET {
                        // A read-back: answered at once, not recorded as an action.
                        let list = b.lock().unwrap().list(uri.query().unwrap_or_default());
                        return axum::Json(list);
                    }
                    let header = |k: &str| {
                        headers
                            .get(k)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let refund = refunds
                        .then(|| b.lock().unwrap().refund(&header("idempotency-key"), &body));
                    s.lock().unwrap().push(Seen {
                        path: path.clone(),
                        headers: headers
                            .iter()
                            .map(|(k, v)| {
                                (
                                    k.as_str().to_owned(),
                                    v.to_str().unwrap_or_default().to_owned(),
                                )
                            })
                            .collect(),
                        body: body.to_vec(),
                    });
                    if path.starts_with("/slow") {
                        answer_late(slow_delay).await;
                    }
                    axum::Json(refund.unwrap_or_else(
                        || serde_json::json!({"id": "re_test", "status": "succeeded"}),
                    ))
                }
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url: format!("http://{addr}"),
            host_port: addr.to_string(),
            seen,
            refunded,
            billing,
        }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Number of requests so far.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Refunds made from now on are stored with `status` (and `amount`, when given) instead of
    /// what was asked: the provider answers 200 but holds something else.
    pub fn hold_refunds_as(&self, status: &str, amount: Option<i64>) {
        self.billing.lock().unwrap().hold_as = Some((status.to_owned(), amount));
    }

    /// The refunds held, oldest first.
    pub fn refunds(&self) -> Vec<serde_json::Value> {
        let b = self.billing.lock().unwrap();
        b.refunds.iter().map(|(_, r)| r.clone()).collect()
    }
}

/// `target/<profile>` of the running test or binary (tests live in `target/<profile>/deps`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent().unwrap().to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// Path of the `actiond` binary, built once per test process. It is built as `cargo test
/// --workspace` builds it (`cargo build --workspace --all-targets`): `cargo build -p actiond`
/// would resolve other dependency features and rebuild rustls and friends a second time (minutes
/// on a cold CI run). `ACTIOND_TEST_NO_BUILD=1` skips the build and uses what is there.
pub fn actiond_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let profile_dir = profile_dir();
        let bin = profile_dir.join("actiond");
        if std::env::var_os("ACTIOND_TEST_NO_BUILD").is_none() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-q", "--workspace", "--all-targets"])
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let st = cmd.status().expect("cargo build --workspace --all-targets");
            assert!(st.success(), "cargo build --workspace --all-targets failed");
        }
        assert!(bin.exists(), "{} not found", bin.display());
        bin
    })
    .clone()
}

/// Directory for child process logs of one test: `target/e2e-logs/<test>/`.
pub fn log_dir(test: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let d = target.join("e2e-logs").join(test);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A running `actiond <role>` process; SIGKILLed on drop.
pub struct Service {
    /// The child.
    pub child: Child,
    /// Its log file.
    pub log: PathBuf,
    /// Role name.
    pub role: String,
}

impl Service {
    /// Spawns `actiond <role> <args>` with `envs`, logging to `<log_dir>/<name>.log`.
    pub fn spawn(
        role: &str,
        name: &str,
        args: &[&str],
        envs: &[(&str, String)],
        log_dir: &Path,
    ) -> Self {
        let log = log_dir.join(format!("{name}.log"));
        let f = std::fs::File::create(&log).unwrap();
        let mut cmd = Command::new(actiond_bin());
        cmd.arg(role)
            .args(args)
            .env_remove("CREDENTIALS_DIRECTORY")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(f));
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        Self {
            child,
            log,
            role: role.to_owned(),
        }
    }

    /// SIGKILL, like a crash.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait (graceful stop).
    pub fn terminate(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }

    /// CPU time the process has used so far, all its threads, user and system
    /// (`/proc/<pid>/stat` fields `utime` + `stime`, proc(5), in ticks of 10 ms); zero once
    /// it has exited.
    pub fn cpu_time(&self) -> Duration {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name in parentheses: utime is field 14, stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .map_or("", |(_, rest)| rest)
            .split_whitespace()
            .collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Duration::from_millis((ticks(11) + ticks(12)) * 10)
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The address the process's listener `listener` is bound to (`http`: the `--listen` of
    /// `actiond api` or `web`; `admin`: any role's `--admin-listen`), read from the line it
    /// logs once bound (`actiond_runtime::http::bind`, target `actiond::listen`, text or JSON
    /// format). Start the listener on port 0 (`127.0.0.1:0`) and ask here: a port picked
    /// before the start may be taken by another process by then. Waits up to 30 s; panics
    /// with the log when the process exits first (a failed bind says why) or the line does
    /// not come (a `RUST_LOG` must let `actiond::listen=info` through; [`Service::spawn`]'s
    /// default `info` does).
    pub async fn bound(&mut self, listener: &str) -> std::net::SocketAddr {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            // Read before asking whether the process is gone: a line written just before it
            // exited is still seen.
            let log = self.log_text();
            if let Some(addr) = log
                .lines()
                .filter_map(listen_line)
                .filter(|(name, _)| name == listener)
                .map(|(_, addr)| addr)
                .next_back()
            {
                return addr;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "actiond {} ({}) exited ({status}) before its {listener} listener was bound:\n{log}",
                    self.role,
                    self.log.display()
                );
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "actiond {} ({}) logged no bound {listener} listener in 30 s:\n{log}",
                    self.role,
                    self.log.display()
                );
            }
            poll_pause(Duration::from_millis(20)).await;
        }
    }

    /// `http://<address>` of the listener `listener` ([`Service::bound`]).
    pub async fn url(&mut self, listener: &str) -> String {
        format!("http://{}", self.bound(listener).await)
    }
}

/// (listener, address) of a log line that says a listener is bound (target `actiond::listen`,
/// fields `listener` and `addr`), in the text or the JSON log format.
fn listen_line(line: &str) -> Option<(String, std::net::SocketAddr)> {
    const TARGET: &str = "actiond::listen";
    if line.trim_start().starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        if v["target"] != TARGET {
            return None;
        }
        let fields = if v["fields"].is_object() {
            &v["fields"]
        } else {
            &v
        };
        let name = fields["listener"].as_str()?;
        let addr = fields["addr"].as_str()?.parse().ok()?;
        return Some((name.to_owned(), addr));
    }
    let (_, rest) = line.split_once(&format!("{TARGET}:"))?;
    let mut name = None;
    let mut addr = None;
    for token in rest.split_whitespace() {
        if let Some(v) = token.strip_prefix("listener=") {
            name = Some(v.trim_matches('"').to_owned());
        } else if let Some(v) = token.strip_prefix("addr=") {
            addr = v.trim_matches('"').parse().ok();
        }
    }
    Some((name?, addr?))
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the `actiond` CLI to completion; returns (success, stdout, stderr).
pub fn cli(args: &[&str], envs: &[(&str, String)]) -> (bool, String, String) {
    let mut cmd = Command::new(actiond_bin());
    cmd.args(args)
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("RUST_LOG");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How often [`eventually`] and [`wait_until`] check their condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The pause between two checks of a condition: the test kit's clock, the one place test
/// code waits for time to pass without naming what it waits for ([`wait_until`],
/// [`eventually`], and the start-up loops of this crate go through it).
#[expect(
    clippy::disallowed_methods,
    reason = "the test kit's clock: the pause between two checks of a condition"
)]
pub async fn poll_pause(d: Duration) {
    tokio::time::sleep(d).await;
}

/// The receiver's `/slow…` paths answer after `d`: a provider that answers late.
#[expect(
    clippy::disallowed_methods,
    reason = "a provider that answers late: the delay is the fixture itself"
)]
async fn answer_late(d: Duration) {
    tokio::time::sleep(d).await;
}

/// [`poll_pause`] for a blocking loop.
#[expect(
    clippy::disallowed_methods,
    reason = "the test kit's clock: the pause between two checks of a condition"
)]
pub fn poll_pause_blocking(d: Duration) {
    std::thread::sleep(d);
}

/// Polls `f` every [`POLL_INTERVAL`] until it returns `Some`, or panics with `what` after
/// `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        poll_pause(POLL_INTERVAL).await;
    }
}

/// Waits until `condition` is true, checking every [`POLL_INTERVAL`]; panics with `what`
/// after `timeout`. What a test waits on instead of a fixed sleep.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually(timeout, what, || {
        let c = condition();
        async move { c.await.then_some(()) }
    })
    .await;
}

/// Creates an agent and returns (agent id, token).
pub async fn agent(db: &Db, tenant: &str, name: &str, owner: Option<&str>) -> (uuid::Uuid, String) {
    use base64::Engine as _;
    let bytes: [u8; 32] = rand::random();
    let token = format!(
        "actiond_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = actiond_core::canonical::sha256_hex(token.as_bytes());
    let a = actiond_store::agents::create(db, tenant, name, owner, &hash, None)
        .await
        .unwrap();
    (a.id, token)
}

/// A tenant as a test starts from it: its document applied and one agent ([`seed`]).
#[derive(Debug, Clone)]
pub struct Seed {
    /// The agent's id.
    pub agent_id: uuid::Uuid,
    /// The agent's bearer token (`actiond_…`).
    pub token: String,
}

/// The one seed fixture of the suites: applies the tenant document `doc` (for `tenant`, the
/// tenant it names; its `approvers:` say who may decide) as version 1 by `test`, then creates
/// agent `agent_name` of `tenant` owned by `owner` ([`agent`]). Each suite keeps the document
/// its rules need and calls this instead of repeating the two steps.
pub async fn seed(db: &Db, tenant: &str, doc: &str, agent_name: &str, owner: Option<&str>) -> Seed {
    actiond_store::tenants::apply(db, doc, "test")
        .await
        .unwrap();
    let (agent_id, token) = agent(db, tenant, agent_name, owner).await;
    Seed { agent_id, token }
}

#[cfg(test)]
mod tests {
    use super::listen_line;

    /// The line `actiond_runtime::http::bind` writes, as the text and the JSON formats print
    /// it (tracing-subscriber 0.3, no ANSI colour), inside a span too.
    #[test]
    fn listen_lines_are_read_in_both_log_formats() {
        let addr: std::net::SocketAddr = "127.0.0.1:40123".parse().unwrap();
        for line in [
            "2026-01-02T03:04:05.678901Z  INFO actiond::listen: listening listener=\"http\" addr=127.0.0.1:40123",
            "2026-01-02T03:04:05.678901Z  INFO run: actiond::listen: listening listener=\"http\" addr=127.0.0.1:40123",
            r#"{"timestamp":"2026-01-02T03:04:05.678901Z","level":"INFO","fields":{"message":"listening","listener":"http","addr":"127.0.0.1:40123"},"target":"actiond::listen"}"#,
        ] {
            assert_eq!(listen_line(line), Some(("http".to_owned(), addr)), "{line}");
        }
        for other in [
            "2026-01-02T03:04:05.678901Z  INFO actiond_api: actiond api listening listen=127.0.0.1:40123 admin=127.0.0.1:40124",
            r#"{"level":"INFO","fields":{"message":"listening","listener":"http","addr":"127.0.0.1:1"},"target":"actiond::access"}"#,
            "not a log line",
        ] {
            assert_eq!(listen_line(other), None, "{other}");
        }
    }
}
