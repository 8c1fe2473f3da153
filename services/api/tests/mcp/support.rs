//! Test harness: a fresh database per test, a tenant, agents, the api on 127.0.0.1:0, and the
//! external MCP clients (Node, Python, the `actiond` binary) with clear install hints.

use actiond_api::{AppState, router};
use actiond_runtime::Metrics;
use actiond_store::Db;
use rand::RngCore;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The tenant every test applies: refunds over 50.00 escalate.
pub const TENANT_YAML: &str = r#"
tenant: acme
policy:
  default: allow
  escalation_ttl: 24h
  rules:
    - name: big-refund
      when: 'action == "billing.refund.issue" && params.amount > 5000'
      effect: escalate
      reason: Refunds over 50.00 need a person.
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
    currencies: [USD, EUR]
approvers:
  subjects: [ops-oncall]
"#;

/// What the escalation step writes (the policy worker's part, done by hand here).
pub const ESCALATION_REASON: &str = "Refunds over 50.00 need a person.";
/// The approver's comment written by the approval step.
pub const APPROVAL_COMMENT: &str = "Approved by ops-oncall: order verified.";

/// One test's world.
pub struct Env {
    /// Pool on the test database.
    pub db: Db,
    /// A plain connection on the test database, for assertions and state changes.
    pub sql: Arc<tokio_postgres::Client>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The agent's bearer token.
    pub token: String,
    /// The api's metrics registry.
    pub metrics: Metrics,
    dbname: String,
    admin_url: String,
}

/// `services/api`.
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `services/api/e2e`.
pub fn e2e_dir() -> PathBuf {
    crate_dir().join("e2e")
}

fn admin_url() -> String {
    std::env::var("ACTIOND_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

async fn connect(url: &str) -> tokio_postgres::Client {
    actiond_store::tls::connect(url).await.unwrap_or_else(|e| {
        panic!("cannot reach Postgres at {url} ({e}); start it or set ACTIOND_TEST_DATABASE_URL")
    })
}

/// A random agent token (`actiond_` + 64 hex characters).
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "actiond_{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

impl Env {
    /// Starts `script` (a Python MCP client in `services/api/e2e`) with `python` on
    /// `actiond mcp-stdio` against this api, the agent's token in a file only its owner may
    /// read; returns the running script and the folder of the token file, which the test
    /// removes when it is done.
    pub fn python_on_stdio(
        &self,
        python: &Path,
        actiond: &Path,
        script: &str,
    ) -> (Script, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("actiond-mcp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let token_file = dir.join("token");
        std::fs::write(&token_file, format!("{}\n", self.token)).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let mut cmd = Command::new(python);
        cmd.arg(e2e_dir().join(script))
            .arg("--")
            .arg(actiond)
            .args(["mcp-stdio", "--url", &self.base, "--token-file"])
            .arg(&token_file);
        (Script::spawn(cmd), dir)
    }

    /// Fresh database, migrated; tenant `acme` applied; one agent; the api served on port 0.
    pub async fn start() -> Env {
        Self::start_with(|s| s).await
    }

    /// As [`Env::start`], with the api's state changed by `configure` (e.g. trusted JWT
    /// issuers) before it serves.
    pub async fn start_with(configure: impl FnOnce(AppState) -> AppState) -> Env {
        let admin_url = admin_url();
        let admin = connect(&admin_url).await;
        let dbname = format!("t_{}", uuid::Uuid::new_v4().simple());
        admin
            .batch_execute(&format!("CREATE DATABASE {dbname}"))
            .await
            .unwrap();
        let mut url = url::Url::parse(&admin_url).unwrap();
        url.set_path(&format!("/{dbname}"));
        let db = Db::connect(url.as_str(), 8).unwrap();
        db.migrate().await.unwrap();
        let token = actiond_testkit::seed(&db, "acme", TENANT_YAML, "support-bot", Some("alice"))
            .await
            .token;
        let sql = Arc::new(connect(url.as_str()).await);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let metrics = Metrics::new("api");
        let app = router(configure(AppState::new(db.clone(), &metrics)));
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Env {
            db,
            sql,
            base,
            token,
            metrics,
            dbname,
            admin_url,
        }
    }

    /// Another agent of the same tenant; returns its token.
    pub async fn another_agent(&self, name: &str) -> String {
        actiond_testkit::agent(&self.db, "acme", name, None).await.1
    }

    /// Applies `yaml` (a tenant document for tenant `tenant`) and creates an agent of that
    /// tenant; returns the agent's token.
    pub async fn agent_of_tenant(&self, tenant: &str, yaml: &str, name: &str) -> String {
        actiond_testkit::seed(&self.db, tenant, yaml, name, None)
            .await
            .token
    }

    /// Number of proposals in the database.
    pub async fn proposal_count(&self) -> i64 {
        self.sql
            .query_one("SELECT count(*) FROM proposals", &[])
            .await
            .unwrap()
            .get(0)
    }

    /// Number of audit events about proposals.
    pub async fn proposal_event_count(&self) -> i64 {
        self.sql
            .query_one(
                "SELECT count(*) FROM audit_events WHERE proposal_id IS NOT NULL",
                &[],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// Drops the test database (only when the test got this far, so a failure leaves it to inspect).
    pub async fn finish(self) {
        let admin = connect(&self.admin_url).await;
        drop(self.sql);
        let _ = admin
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.dbname
            ))
            .await;
    }
}

/// What the policy worker would do for the big-refund rule: `pending → escalated`.
pub async fn escalate(sql: &tokio_postgres::Client, id: uuid::Uuid) {
    let n = sql
        .execute(
            "UPDATE proposals SET state = 'escalated', effect = 'escalate', rule_name = 'big-refund',
                 decision_reason = $2, doc_version = 1, decided_at = now()
             WHERE id = $1 AND state = 'pending'",
            &[&id, &ESCALATION_REASON],
        )
        .await
        .unwrap();
    assert_eq!(n, 1, "proposal {id} was not pending");
}

/// A person approves, then an executor runs it: `escalated → approved → executing → succeeded`,
/// with pauses so a long-polling client sees the steps.
#[expect(
    clippy::disallowed_methods,
    reason = "pauses between state changes so a long-polling client sees each step: the pacing is the fixture"
)]
pub async fn approve_and_execute(sql: Arc<tokio_postgres::Client>, id: uuid::Uuid) {
    let pause = || tokio::time::sleep(Duration::from_millis(1500));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let approved = sql
        .execute("UPDATE proposals SET state = 'approved', decision_reason = $2 WHERE id = $1 AND state = 'escalated'", &[&id, &APPROVAL_COMMENT])
        .await
        .unwrap();
    assert_eq!(approved, 1, "proposal {id} was not escalated");
    pause().await;
    let executing = sql
        .execute(
            "UPDATE proposals SET state = 'executing', lease_owner = 'test-executor', lease_until = now() + interval '1 minute'
             WHERE id = $1 AND state = 'approved'",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(executing, 1);
    pause().await;
    let done = sql
        .execute(
            "UPDATE proposals SET state = 'succeeded', outcome = 'succeeded', finished_at = now(), lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'executing'",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(done, 1);
}

/// A client script run as a child process, speaking JSON events (stdout) and commands (stdin).
pub struct Script {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every event received, in order.
    pub events: Vec<Value>,
}

impl Script {
    /// Spawns `cmd` with piped stdin/stdout; stderr goes to the test's output.
    pub fn spawn(mut cmd: Command) -> Script {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Script {
            child,
            stdin,
            stdout,
            events: Vec::new(),
        }
    }

    /// The next event; panics on an `error` event, EOF or a 120 s silence.
    pub async fn next_event(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(120), self.stdout.next_line())
            .await
            .expect("the client script went silent for 120 s")
            .unwrap();
        let Some(line) = line else {
            let status = self.child.wait().await.unwrap();
            panic!(
                "the client script ended ({status}) after events {:#?}",
                self.events
            );
        };
        let event: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not a JSON event ({e}): {line}"));
        if event["event"] == "error" {
            panic!(
                "the client script failed: {}\nevents so far: {:#?}",
                event["message"].as_str().unwrap_or(""),
                self.events
            );
        }
        self.events.push(event.clone());
        event
    }

    /// Sends one command line.
    pub async fn command(&mut self, c: &str) {
        self.stdin
            .write_all(format!("{c}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Waits for the script to exit successfully.
    pub async fn wait_success(mut self) -> Vec<Value> {
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the client script did not exit")
            .unwrap();
        assert!(status.success(), "the client script exited with {status}");
        self.events
    }
}

/// Drives the shared refund flow: proposed → (escalate) → escalated → waiting → (approve,
/// execute) → final → done. Returns the proposal id.
pub async fn drive_refund_flow(env: &Env, script: &mut Script) -> uuid::Uuid {
    let mut id = None;
    let mut approval = None;
    loop {
        let event = script.next_event().await;
        match event["event"].as_str().unwrap_or("") {
            "proposed" => {
                let pid = uuid::Uuid::parse_str(event["proposal_id"].as_str().unwrap()).unwrap();
                let state: String = env
                    .sql
                    .query_one("SELECT state FROM proposals WHERE id = $1", &[&pid])
                    .await
                    .unwrap()
                    .get(0);
                assert_eq!(state, "pending");
                escalate(&env.sql, pid).await;
                script.command("escalated").await;
                id = Some(pid);
            }
            "escalated" => {
                assert_eq!(event["result"]["state"], "escalated");
                assert_eq!(event["result"]["reason"], ESCALATION_REASON);
                let message = event["result"]["message"].as_str().unwrap();
                assert!(message.contains("has NOT happened"), "{message}");
            }
            "waiting" => {
                let pid = id.expect("waiting before proposed");
                approval = Some(tokio::spawn(approve_and_execute(env.sql.clone(), pid)));
            }
            "final" => {
                assert_eq!(event["result"]["state"], "succeeded");
                assert_eq!(event["result"]["outcome"], "succeeded");
                assert_eq!(event["result"]["reason"], APPROVAL_COMMENT);
                let states: Vec<&str> = event["states"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert_eq!(
                    states.first(),
                    Some(&"approved"),
                    "the first long-poll returns at the first change: {states:?}"
                );
            }
            "done" => break,
            _ => {}
        }
    }
    if let Some(a) = approval {
        a.await.unwrap();
    }
    id.expect("no proposal")
}

/// `node` can run the TypeScript client, or a panic naming the install command.
pub fn require_node_client() {
    let sdk = e2e_dir().join("node_modules/@modelcontextprotocol/sdk/package.json");
    let Ok(pkg) = std::fs::read_to_string(&sdk) else {
        panic!("the TypeScript MCP SDK is not installed; run: npm ci --prefix services/api/e2e");
    };
    let pkg: Value = serde_json::from_str(&pkg).unwrap();
    assert_eq!(
        pkg["version"], "1.32.2",
        "unexpected @modelcontextprotocol/sdk version; run: npm ci --prefix services/api/e2e"
    );
}

/// The Python interpreter that has `mcp` 2.3.0, or a panic naming the install command.
pub async fn require_python_client() -> PathBuf {
    let venv = e2e_dir().join(".venv/bin/python");
    let python = match std::env::var_os("ACTIOND_E2E_PYTHON") {
        Some(p) => PathBuf::from(p),
        None if venv.exists() => venv,
        None => PathBuf::from("python3"),
    };
    let hint = "the Python MCP SDK is not installed; run: python3 -m venv services/api/e2e/.venv && \
                services/api/e2e/.venv/bin/pip install -r services/api/e2e/requirements.txt \
                (or set ACTIOND_E2E_PYTHON to a python that has mcp==2.3.0)";
    let out = Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m, mcp; print(m.version('mcp'))",
        ])
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); {hint}", python.display()));
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success() && version == "2.3.0",
        "{} has mcp {version:?}: {hint}",
        python.display()
    );
    python
}

/// The `actiond` binary with the `mcp-stdio` subcommand, or a panic naming the build command.
pub async fn require_actiond_binary() -> PathBuf {
    let bin = match std::env::var_os("ACTIOND_BIN") {
        Some(p) => PathBuf::from(p),
        // target/debug/deps/mcp-HASH → target/debug/actiond
        None => std::env::current_exe()
            .unwrap()
            .parent()
            .and_then(Path::parent)
            .unwrap()
            .join("actiond"),
    };
    let hint = "build it first: cargo build -p actiond (or set ACTIOND_BIN)";
    let out = Command::new(&bin)
        .args(["mcp-stdio", "--help"])
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {} ({e}); {hint}", bin.display()));
    assert!(
        out.status.success(),
        "{} mcp-stdio --help failed ({}): {hint}\n{}",
        bin.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    bin
}

/// A JSON-RPC POST to `/mcp` as a handshake-era (2025-06-18) client would send it.
pub struct RawCall<'a> {
    /// `http://127.0.0.1:PORT`.
    pub base: &'a str,
    /// Bearer token, if any.
    pub token: Option<&'a str>,
    /// `Host` override.
    pub host: Option<&'a str>,
    /// `Origin` header.
    pub origin: Option<&'a str>,
}

impl RawCall<'_> {
    /// POSTs `body`; returns the status and the body (JSON when it parses, else a string).
    pub async fn post(&self, body: &str) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut req = reqwest::Client::new()
            .post(format!("{}/mcp", self.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_owned());
        if let Some(t) = self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        if let Some(h) = self.host {
            req = req.header("host", h);
        }
        if let Some(o) = self.origin {
            req = req.header("origin", o);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, headers, body)
    }
}

/// A `tools/call` JSON-RPC request.
pub fn tools_call(id: u64, name: &str, arguments: Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}).to_string()
}

/// The arguments of a valid 120.00 USD refund proposal.
pub fn refund_args(payment_id: &str) -> Value {
    serde_json::json!({
        "action": "billing.refund.issue",
        "params": {"payment_id": payment_id, "amount": 12000, "currency": "USD"},
        "reason": "customer asked",
    })
}
