//! A whole gateway per test: a fresh database, keys, a counting receiver, and `actiond api`,
//! `actiond policy` and `actiond executor` as real processes.

use actiond_testkit::{Keys, Receiver, Seed, Seen, Service, TestDb, eventually, log_dir, seed};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

pub const TENANT: &str = r#"
tenant: acme
policy:
  default: escalate
  escalation_ttl: 1h
  rules:
    - name: shell-never
      when: 'action.startsWith("shell.")'
      effect: block
      reason: Agents never get a shell.
    - name: small-refund
      when: 'action == "billing.refund.issue" && params.amount <= 5000'
      effect: allow
      reason: Refunds up to 50.00 are automatic.
    - name: large-refund
      when: 'action == "billing.refund.issue" && params.amount > 5000'
      effect: escalate
      reason: Refunds over 50.00 need a person.
    - name: ping-webhook
      when: 'action == "webhook.post" && has(params.body.kind) && params.body.kind == "ping"'
      effect: allow
      reason: Pings are harmless.
    - name: prod-dns
      when: 'action == "dns.record.update" && params.zone == "prod.example.com"'
      effect: escalate
      reason: Production DNS changes need a person.
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
  webhook.post:
    url: RECEIVER/WEBHOOK_PATH
    credential: hooks
    timeout: 4s
  dns.record.update:
    credential: pdns
    zones: [prod.example.com, staging.example.com]
approvers:
  subjects: [alice, bob]
"#;

/// A scratch database migrated to `version`, with tenant `acme` and agent `bot`; dropped by
/// the returned guard's [`Scratch::drop_now`].
pub struct Scratch {
    pub name: String,
    admin: tokio_postgres::Client,
    pub db: actiond_store::Db,
    pub c: tokio_postgres::Client,
    pub agent: uuid::Uuid,
}

impl Scratch {
    pub async fn at(version: i32) -> Self {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let admin_url = actiond_testkit::server_url();
        let admin = actiond_store::tls::connect(&admin_url).await.unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        let (base, _) = admin_url.rsplit_once('/').unwrap();
        let url = format!("{base}/{name}");
        let db = actiond_store::Db::connect(&url, 2).unwrap();
        assert_eq!(db.migrate_to(version).await.unwrap().last(), Some(&version));
        let c = actiond_store::tls::connect(&url).await.unwrap();
        let agent = uuid::Uuid::new_v4();
        c.batch_execute(&format!(
            "INSERT INTO tenants (id) VALUES ('acme');
             INSERT INTO agents (id, tenant_id, name, token_sha256) VALUES ('{agent}', 'acme', 'bot', repeat('a', 64));"
        ))
        .await
        .unwrap();
        Self {
            name,
            admin,
            db,
            c,
            agent,
        }
    }

    /// One row in every state (written without triggers, as a deployed database holds them).
    pub async fn every_state(&self) {
        self.c
            .batch_execute(&format!(
                "SET session_replication_role = replica;
                 INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash,
                                        request_sha256, state, lease_owner, lease_until)
                 SELECT gen_random_uuid(), 'acme', '{}', 'webhook.post', '', '{{}}', md5(s) || md5(s), md5(s) || md5(s),
                        md5(s) || md5(s), s, CASE WHEN s = 'executing' THEN 'x' END,
                        CASE WHEN s = 'executing' THEN now() + interval '1 hour' END
                 FROM unnest(ARRAY['pending','escalated','approved','blocked','denied','expired',
                                   'executing','succeeded','failed','outcome_unknown']) s;
                 SET session_replication_role = origin;",
                self.agent
            ))
            .await
            .unwrap();
    }

    pub async fn rows(&self) -> Vec<(String, String, std::time::SystemTime)> {
        self.c
            .query(
                "SELECT id::text, state, updated_at FROM proposals ORDER BY id",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    }

    /// A new pending proposal, committed; returns its id.
    pub async fn submit(&self) -> uuid::Uuid {
        let id = uuid::Uuid::new_v4();
        let hex = format!("{:064x}", id.as_u128());
        self.c
            .execute(
                "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                        intent_hash, request_sha256)
                 VALUES ($1, 'acme', $2, 'webhook.post', '', '{}', $3, $3, $3)",
                &[&id, &self.agent, &hex],
            )
            .await
            .unwrap();
        id
    }

    pub async fn drop_now(self) {
        drop(self.c);
        drop(self.db);
        let _ = self
            .admin
            .batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .await;
    }
}

/// As the executor's claim does, leases every `approved` proposal to `e1` in `tx` and returns how
/// many of those updates were HOT (no index entry written).
pub async fn lease_approved_rows(tx: &tokio_postgres::Transaction<'_>) -> i64 {
    tx.batch_execute(
        "SET LOCAL ROLE actiond_executor;
         UPDATE proposals SET lease_owner = 'e1', lease_until = now() + interval '30 seconds' WHERE state = 'approved'",
    )
    .await
    .unwrap();
    tx.query_one(
        "SELECT pg_stat_get_xact_tuples_hot_updated('proposals'::regclass)",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// A fresh database (no running services) with tenant `acme` configured by [`TENANT`], its
/// receiver and webhook on a closed port (nothing is ever delivered), and one live agent named
/// `agent_name`; returns the database and the agent's id. For tests that write and read rows
/// themselves: query plans, the schema's rules.
pub async fn acme_db(agent_name: &str) -> (TestDb, uuid::Uuid) {
    let tdb = TestDb::new().await;
    let doc = TENANT
        .replace("RECEIVER", "http://127.0.0.1:9")
        .replace("WEBHOOK_PATH", "hook");
    let seeded = seed(&tdb.db, "acme", &doc, agent_name, None).await;
    (tdb, seeded.agent_id)
}

/// The audit kinds of a proposal that policy allowed and the executor ran, in order.
pub const ALLOW_PATH_KINDS: [&str; 4] = [
    "proposal.submitted",
    "proposal.decided",
    "grant.spent",
    "proposal.executed",
];

/// The audit kinds of an allowed refund that ran: the allow path's, then what the executor read
/// back from the billing API (`proposal.effect`).
pub const REFUND_PATH_KINDS: [&str; 5] = [
    "proposal.submitted",
    "proposal.decided",
    "grant.spent",
    "proposal.executed",
    "proposal.effect",
];

/// Payment id prefix of [`Stack::sentinel`]'s refunds.
const SENTINEL: &str = "pi_sentinel_";

/// An api process started by [`Stack::spawn_api`]: its base URL and its metrics URL.
pub struct Api {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Its admin listener's `/metrics`.
    pub metrics: String,
    svc: Service,
}

impl Api {
    /// The process, to keep it running with a stack's other services.
    pub fn into_service(self) -> Service {
        self.svc
    }
}

pub struct Stack {
    pub tdb: TestDb,
    pub keys: Keys,
    pub recv: Receiver,
    /// `http://127.0.0.1:<port>` of the api ([`Stack::start_api`]); empty while none runs.
    pub api_url: String,
    pub token: String,
    pub agent_id: uuid::Uuid,
    pub logs: PathBuf,
    pub services: Vec<Service>,
    pub http: reqwest::Client,
}

/// A web process started by [`Stack::start_dev_web`].
pub struct DevWeb {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Its index in [`Stack::services`].
    pub svc_index: usize,
    /// Dev login codes used so far (each works once).
    used: std::sync::Mutex<Vec<String>>,
}

pub struct Options {
    pub webhook_path: &'static str,
    pub slow_delay: Duration,
    pub api: bool,
    pub policy: bool,
    pub executor: bool,
    /// Superuser URL of the Postgres server to create the test database on (a private
    /// [`actiond_testkit::PgCluster`]); `None` is the shared test server.
    pub server: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            webhook_path: "hook",
            slow_delay: Duration::from_secs(30),
            api: true,
            policy: true,
            executor: true,
            server: None,
        }
    }
}

impl Stack {
    pub async fn new(name: &str) -> Self {
        Self::with(name, Options::default()).await
    }

    pub async fn with(name: &str, o: Options) -> Self {
        let tdb = match &o.server {
            Some(server) => TestDb::new_on(server).await,
            None => TestDb::new().await,
        };
        let keys = Keys::generate();
        let recv = Receiver::start(o.slow_delay).await;
        for c in ["payments", "hooks", "pdns"] {
            keys.credential("acme", c, &format!("secret-{c}"));
        }
        let doc = TENANT
            .replace("RECEIVER", &recv.url)
            .replace("WEBHOOK_PATH", o.webhook_path);
        let Seed { agent_id, token } =
            seed(&tdb.db, "acme", &doc, "support-bot", Some("owner-olivia")).await;
        let mut s = Self {
            tdb,
            keys,
            recv,
            api_url: String::new(),
            token,
            agent_id,
            logs: log_dir(name),
            services: Vec::new(),
            http: reqwest::Client::new(),
        };
        if o.api {
            s.start_api().await;
        }
        if o.policy {
            s.start_policy().await;
        }
        if o.executor {
            s.start_executor("exec-1").await;
        }
        s
    }

    /// Starts `actiond api` on a port of its choosing and points [`Stack::api_url`] at it.
    pub async fn start_api(&mut self) {
        let api = self.spawn_api("api", &[]).await;
        self.api_url = api.url;
        self.services.push(api.svc);
    }

    /// Spawns one more `actiond api` process on this stack's database (its `actiond_api`
    /// login), on ports of its choosing, with `extra` environment on top, and waits until its
    /// `/healthz` answers. The process ends when the returned [`Api`] is dropped.
    pub async fn spawn_api(&self, name: &str, extra: &[(&'static str, String)]) -> Api {
        let mut env = vec![
            ("DATABASE_URL", self.tdb.role_url("api").await),
            ("ACTIOND_API_LISTEN", "127.0.0.1:0".into()),
            ("ACTIOND_API_ADMIN_LISTEN", "127.0.0.1:0".into()),
        ];
        env.extend(extra.iter().cloned());
        let mut svc = Service::spawn("api", name, &[], &env, &self.logs);
        let url = svc.url("http").await;
        let metrics = format!("{}/metrics", svc.url("admin").await);
        let health = format!("{url}/healthz");
        let http = self.http.clone();
        eventually(Duration::from_secs(20), "api /healthz", || {
            let (h, u) = (http.clone(), health.clone());
            async move {
                h.get(&u)
                    .send()
                    .await
                    .ok()
                    .filter(|r| r.status().is_success())
            }
        })
        .await;
        Api { url, metrics, svc }
    }

    pub async fn start_policy(&mut self) {
        self.start_policy_with(Vec::new()).await;
    }

    /// Starts `actiond policy` with `extra` environment besides the defaults.
    pub async fn start_policy_with(&mut self, extra: Vec<(&'static str, String)>) {
        let url = self.tdb.role_url("policy").await;
        let mut env = vec![
            ("DATABASE_URL", url),
            ("ACTIOND_POLICY_ADMIN_LISTEN", "127.0.0.1:0".into()),
            (
                "ACTIOND_POLICY_CREDENTIALS_DIR",
                self.keys.policy_dir.display().to_string(),
            ),
            ("ACTIOND_POLICY_POLL_MS", "200".into()),
            ("ACTIOND_POLICY_SWEEP_MS", "500".into()),
        ];
        env.extend(extra);
        let svc = Service::spawn("policy", "policy", &[], &env, &self.logs);
        self.services.push(svc);
    }

    pub async fn executor_env(&self, id: &str) -> Vec<(&'static str, String)> {
        vec![
            ("DATABASE_URL", self.tdb.role_url("executor").await),
            ("ACTIOND_EXECUTOR_ADMIN_LISTEN", "127.0.0.1:0".into()),
            (
                "ACTIOND_EXECUTOR_CREDENTIALS_DIR",
                self.keys.executor_dir.display().to_string(),
            ),
            ("ACTIOND_EXECUTOR_ID", id.into()),
            ("ACTIOND_WEBHOOK_ALLOWED_HOSTS", self.recv.host_port.clone()),
            ("ACTIOND_BILLING_BASE_URL", format!("{}/", self.recv.url)),
            ("ACTIOND_ALLOW_PRIVATE_DESTINATIONS", "true".into()),
            ("ACTIOND_EXECUTOR_POLL_MS", "200".into()),
            ("ACTIOND_EXECUTOR_SWEEP_MS", "300".into()),
            ("ACTIOND_EXECUTOR_LEASE_MARGIN_MS", "1000".into()),
        ]
    }

    /// Starts `actiond web` with the dev login (the loopback-only stand-in for SSO) on a free
    /// port, signing grants as `web-1`; sign people in with [`Stack::dev_sign_in`].
    pub async fn start_dev_web(&mut self) -> DevWeb {
        let mut web = Service::spawn(
            "web",
            "web",
            &[],
            &[
                ("DATABASE_URL", self.tdb.role_url("web").await),
                ("ACTIOND_WEB_LISTEN", "127.0.0.1:0".into()),
                (
                    "ACTIOND_WEB_CREDENTIALS_DIR",
                    self.keys.web_dir.display().to_string(),
                ),
                ("ACTIOND_WEB_GRANT_KEY_ID", "web-1".into()),
                ("ACTIOND_WEB_DEV_LOGIN", "true".into()),
            ],
            &self.logs,
        );
        let url = web.url("http").await;
        self.services.push(web);
        DevWeb {
            url,
            svc_index: self.services.len() - 1,
            used: Default::default(),
        }
    }

    /// Signs `subject` (email `SUBJECT@acme.test`, no groups) in on `web` with the dev login's
    /// current one-time code (a new one is printed after every use); returns the client, which
    /// keeps the session cookie and follows redirects.
    pub async fn dev_sign_in(&self, web: &DevWeb, subject: &str) -> reqwest::Client {
        let svc = &self.services[web.svc_index];
        let used = web.used.lock().unwrap().clone();
        let code = eventually(Duration::from_secs(30), "a fresh dev login code", || {
            let log = svc.log_text();
            let used = used.clone();
            async move {
                let code = log
                    .lines()
                    .rev()
                    .find_map(|l| l.split("one-time code").nth(1))?
                    .split(": ")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .to_owned();
                (!used.contains(&code)).then_some(code)
            }
        })
        .await;
        web.used.lock().unwrap().push(code.clone());
        let http = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .unwrap();
        let login = http
            .get(format!("{}/login", web.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let email = format!("{subject}@acme.test");
        let r = http
            .post(format!("{}/dev-login", web.url))
            .header("origin", &web.url)
            .form(&[
                ("prelogin", crate::web::hidden(&login, "prelogin").as_str()),
                ("next", "/queue"),
                ("code", code.as_str()),
                ("subject", subject),
                ("email", email.as_str()),
                ("groups", ""),
            ])
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{subject}: {}", r.status());
        http
    }

    /// Starts an executor; returns its index in `services`.
    pub async fn start_executor(&mut self, id: &str) -> usize {
        let env = self.executor_env(id).await;
        let svc = Service::spawn("executor", id, &[], &env, &self.logs);
        self.services.push(svc);
        self.services.len() - 1
    }

    pub async fn post(&self, body: &str, key: Option<&str>) -> (u16, Value) {
        self.post_as(&self.token, body, key).await
    }

    pub async fn post_as(&self, token: &str, body: &str, key: Option<&str>) -> (u16, Value) {
        let (status, _, v) = self.post_with_headers(token, body, key).await;
        (status, v)
    }

    /// [`Stack::post_as`] that also returns the answer's headers.
    pub async fn post_with_headers(
        &self,
        token: &str,
        body: &str,
        key: Option<&str>,
    ) -> (u16, reqwest::header::HeaderMap, Value) {
        let mut r = self
            .http
            .post(format!("{}/v1/proposals", self.api_url))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(k) = key {
            r = r.header("idempotency-key", k);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        (
            status,
            headers,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Proposes and returns the new proposal id (asserts 202).
    pub async fn propose(&self, body: &str) -> uuid::Uuid {
        let (st, v) = self.post(body, None).await;
        assert_eq!(st, 202, "{v}");
        v["proposal_id"].as_str().unwrap().parse().unwrap()
    }

    pub async fn get(&self, token: &str, id: &str, query: &str) -> (u16, Value) {
        let resp = self
            .http
            .get(format!("{}/v1/proposals/{id}{query}", self.api_url))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn state(&self, id: uuid::Uuid) -> String {
        let c = self.tdb.db.client().await.unwrap();
        c.query_one("SELECT state FROM proposals WHERE id = $1", &[&id])
            .await
            .unwrap()
            .get(0)
    }

    /// Whether the live grant of proposal `id` has been spent (`used_at` set).
    pub async fn grant_spent(&self, id: uuid::Uuid) -> bool {
        let c = self.tdb.db.client().await.unwrap();
        c.query_one(
            "SELECT used_at IS NOT NULL FROM grants WHERE proposal_id = $1 AND voided_at IS NULL",
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
    }

    pub async fn row(&self, id: uuid::Uuid) -> tokio_postgres::Row {
        let c = self.tdb.db.client().await.unwrap();
        c.query_one(
            "SELECT state, decision_reason, outcome, intent_hash, params_json, effect, rule_name FROM proposals WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
    }

    /// Waits until the proposal is in `state` (panics with the service logs otherwise).
    pub async fn wait_state(&self, id: uuid::Uuid, state: &str, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let s = self.state(id).await;
            if s == state {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                let logs: Vec<String> = self
                    .services
                    .iter()
                    .map(|s| format!("--- {} ---\n{}", s.role, tail(&s.log_text())))
                    .collect();
                panic!(
                    "proposal {id} is {s}, expected {state}\n{}",
                    logs.join("\n")
                );
            }
            actiond_testkit::poll_pause(Duration::from_millis(50)).await;
        }
    }

    /// Waits for a sentinel: a small refund, proposed now, that the policy allows and the
    /// executor runs. Policy and executors take work in order of arrival, so once a later
    /// proposal has been decided and executed, anything earlier that was going to reach the
    /// receiver has reached it: "nothing more happened" can be asserted without sleeping.
    /// Needs the policy worker and an executor running; returns the sentinel's id. Leave its
    /// call out of counts with [`Stack::calls`].
    pub async fn sentinel(&self) -> uuid::Uuid {
        let payment = format!("{SENTINEL}{}", uuid::Uuid::new_v4().simple());
        let id = self.propose(&refund(&payment, 1)).await;
        self.wait_state(id, "succeeded", Duration::from_secs(30))
            .await;
        id
    }

    /// The requests the receiver has seen, leaving out the sentinels' refunds.
    pub fn calls(&self) -> Vec<Seen> {
        self.recv
            .requests()
            .into_iter()
            .filter(|r| !String::from_utf8_lossy(&r.body).contains(SENTINEL))
            .collect()
    }

    /// Freezes the stack's agent as an approver's stop button does (`frozen_by` `approver:bob`).
    pub async fn freeze_agent(&self) {
        self.tdb
            .superuser()
            .await
            .execute(
                "UPDATE agents SET frozen_at = now(), frozen_by = 'approver:bob' WHERE id = $1",
                &[&self.agent_id],
            )
            .await
            .unwrap();
    }

    /// The kinds of `id`'s audit events, in order.
    pub async fn audit_kind_names(&self, id: uuid::Uuid) -> Vec<String> {
        self.audit_kinds(id)
            .await
            .into_iter()
            .map(|k| k.0)
            .collect()
    }

    pub async fn audit_kinds(&self, id: uuid::Uuid) -> Vec<(String, Value)> {
        let c = self.tdb.db.client().await.unwrap();
        c.query(
            "SELECT kind, detail FROM audit_events WHERE proposal_id = $1 ORDER BY id",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
    }

    /// How many decisions (approve or deny, any channel) are recorded for proposal `id`.
    pub async fn approval_count(&self, id: uuid::Uuid) -> i64 {
        let c = self.tdb.db.client().await.unwrap();
        c.query_one(
            "SELECT count(*) FROM approvals WHERE proposal_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
    }

    /// `actiond approvals approve ID --as alice` on the break-glass CLI, confirming the first
    /// 16 characters of its stored intent hash; returns whether it succeeded, its stdout and
    /// its stderr.
    pub async fn break_glass_approve(&self, id: uuid::Uuid) -> (bool, String, String) {
        let intent: String = self.row(id).await.get(3);
        actiond_testkit::cli(
            &[
                "approvals",
                "approve",
                &id.to_string(),
                "--as",
                "alice",
                "--intent",
                &intent[..16],
            ],
            &self.cli_env().await,
        )
    }

    /// [`Stack::break_glass_approve`]; panics with the CLI's output when it refuses.
    pub async fn approve_as_alice(&self, id: uuid::Uuid) {
        let (ok, out, err) = self.break_glass_approve(id).await;
        assert!(ok, "{out}{err}");
    }

    /// Environment of the operator CLI, connected as the admin role.
    pub async fn cli_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("DATABASE_URL", self.tdb.role_url("admin").await),
            (
                "ACTIOND_CLI_CREDENTIALS_DIR",
                self.keys.cli_dir.display().to_string(),
            ),
        ]
    }
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

pub fn refund(payment: &str, amount: i64) -> String {
    format!(
        r#"{{"action":"billing.refund.issue","params":{{"payment_id":"{payment}","amount":{amount},"currency":"USD"}},"reason":"test"}}"#
    )
}
