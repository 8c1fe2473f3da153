//! Postgres fails over under load, with a real HA stack: etcd and two PostgreSQL nodes under
//! Patroni on loopback ports (`synchronous_mode: true`, TLS on), and api, two policy workers and
//! two executors on a multi-host `DATABASE_URL` (`host=a,b … target_session_attrs=read-write`,
//! `sslmode=verify-full`). Proposals are submitted at a steady rate while the primary node is
//! lost (`kill -9` of its Patroni and its postmaster) or switched over (`patronictl
//! switchover`). Checked from the database and the loopback receiver: every proposal answered
//! 202 reaches a final state, no handler runs twice for one grant, LISTEN is resumed on the new
//! primary, and `/readyz` says "no writable database" while there is none. The time from the
//! kill to the first success on the new primary is measured and bounded.
//!
//! The binaries come from Debian (`patroni`, `etcd-server`, `postgresql`; `scripts/test.d/
//! 60-ha.sh` installs them). When one is missing the tests say so loudly and pass without
//! running: a developer machine without them still runs the rest of the suite.

use crate::support::{Options, Stack, refund};
use actiond_store::Db;
use actiond_testkit::{Scratch, Service, eventually, free_ports};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generous bound for waits on a loaded 2-core machine.
const T: Duration = Duration::from_secs(60);

/// The hard bound on the time from the loss of the primary to the first proposal accepted on
/// the new one (the target is under 5 s; Patroni's leader key lives `ttl` = 5 s).
const RECOVERY_BOUND: Duration = Duration::from_secs(15);

/// Submissions per second of the steady load.
const RATE: u32 = 20;

/// The newest `/usr/lib/postgresql/<v>/bin` holding `postgres` and `initdb`.
fn pg_bin() -> Option<PathBuf> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            (bin.join("postgres").exists() && bin.join("initdb").exists()).then_some((n, bin))
        })
        .collect();
    v.sort();
    v.pop().map(|(_, b)| b)
}

/// Whether `name` is an executable on `PATH`.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// What of the HA stack is not installed (empty: everything is).
pub fn missing_ha_binaries() -> Vec<&'static str> {
    let mut missing: Vec<&'static str> = ["patroni", "patronictl", "etcd"]
        .into_iter()
        .filter(|b| !on_path(b))
        .collect();
    if pg_bin().is_none() {
        missing.push("postgresql server (/usr/lib/postgresql/*/bin)");
    }
    missing
}

/// Says loudly that a test did not run, and why; true when it must be skipped.
pub fn skip_without(test: &str, missing: &[&str]) -> bool {
    if missing.is_empty() {
        return false;
    }
    eprintln!(
        "\n######## SKIPPED {test}: not installed: {} ########\n\
         ######## scripts/test installs them (scripts/test.d/60-ha.sh: apt-get install patroni etcd-server pgbouncer) ########\n",
        missing.join(", ")
    );
    true
}

/// The `postgres` user's ids when we run as root (Postgres refuses to run as root).
fn postgres_ids() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let u = nix::unistd::User::from_name("postgres")
        .ok()
        .flatten()
        .expect("running as root, the HA stack needs the `postgres` user");
    Some((u.uid.as_raw(), u.gid.as_raw()))
}

/// A command that runs as `postgres` when we are root; its PID is the program's own (no
/// `runuser` in between), so a `kill -9` of the child is a kill of the program.
fn as_postgres(program: &str, ids: Option<(u32, u32)>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(program);
    if let Some((uid, gid)) = ids {
        c.uid(uid).gid(gid);
    }
    c
}

fn chown(path: &Path, ids: Option<(u32, u32)>) {
    if let Some((uid, gid)) = ids {
        nix::unistd::chown(
            path,
            Some(nix::unistd::Uid::from_raw(uid)),
            Some(nix::unistd::Gid::from_raw(gid)),
        )
        .unwrap();
    }
}

/// One Patroni node: its PostgreSQL port, REST port, config file and process.
pub struct Node {
    pub name: String,
    pub pg_port: u16,
    rest_port: u16,
    config: PathBuf,
    data: PathBuf,
    log: PathBuf,
    patroni: Option<Child>,
}

impl Node {
    /// The PID of its postmaster (first line of `postmaster.pid`), while it runs.
    fn postmaster_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// `kill -9` of the node's Patroni and its postmaster, as a lost machine: nothing is
    /// shut down in order, the leader key stays in etcd until its TTL runs out. (The
    /// postmaster's children exit when they find it gone.)
    pub fn kill9(&mut self) {
        let pm = self.postmaster_pid();
        if let Some(mut p) = self.patroni.take() {
            let _ = p.kill();
            let _ = p.wait();
        }
        if let Some(pm) = pm {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pm),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// Patroni's log (with the PostgreSQL server's output).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The status of Patroni's REST `path`; `None` when it does not answer within 2 s (a
    /// process that took the port may accept and never answer).
    async fn rest_status(&self, path: &str) -> Option<u16> {
        let url = format!("http://127.0.0.1:{}{path}", self.rest_port);
        tokio::time::timeout(Duration::from_secs(2), reqwest::get(url))
            .await
            .ok()?
            .ok()
            .map(|r| r.status().as_u16())
    }
}

/// etcd and two Patroni nodes (`n1` starts first and leads), TLS on with a CA of the test's
/// own; every process stopped by its PID on drop.
pub struct HaCluster {
    dir: Scratch,
    ids: Option<(u32, u32)>,
    etcd: Option<Child>,
    pub nodes: Vec<Node>,
    switchover: Option<std::thread::JoinHandle<std::process::Output>>,
    /// The CA certificate (PEM file) that signed the servers' certificate.
    pub ca: PathBuf,
    pub logs: PathBuf,
}

impl HaCluster {
    /// Starts etcd, then `n1` (waits until it is the primary), then `n2` (waits until it is
    /// the synchronous standby). A start whose servers lost a port to another process before
    /// binding it (etcd and Patroni must be told their ports) is stopped and made again on
    /// fresh ports ([`actiond_testkit::with_free_ports_async`]).
    pub async fn start(test: &str) -> Self {
        actiond_testkit::with_free_ports_async(6, async |p: &[u16]| Self::try_start(test, p).await)
            .await
    }

    /// One start of [`HaCluster::start`] on ports `p` (etcd client and peer, then each node's
    /// PostgreSQL and REST ports). `Err` carries the logs when a server did not come up in
    /// time; what was started is stopped when the cluster is dropped on that return.
    async fn try_start(test: &str, p: &[u16]) -> Result<Self, String> {
        let ids = postgres_ids();
        let dir = Scratch::new("actiond-ha");
        chown(&dir, ids);
        let logs = actiond_testkit::log_dir(test);
        let bin = pg_bin().unwrap();
        // TLS: a CA of this test and a server certificate for 127.0.0.1.
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "actiond ha test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        let (ca_file, cert_file, key_file) = (
            dir.join("ca.pem"),
            dir.join("server.pem"),
            dir.join("server.key"),
        );
        std::fs::write(&ca_file, ca.pem()).unwrap();
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        for f in [&ca_file, &cert_file, &key_file] {
            chown(f, ids);
        }

        let (etcd_client, etcd_peer) = (p[0], p[1]);
        let etcd_dir = dir.join("etcd");
        let etcd_log = logs.join("etcd.log");
        let etcd = as_postgres("etcd", ids)
            .args(["--name", "e1", "--data-dir"])
            .arg(&etcd_dir)
            .arg(format!(
                "--listen-client-urls=http://127.0.0.1:{etcd_client}"
            ))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{etcd_client}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"
            ))
            .arg(format!("--initial-cluster=e1=http://127.0.0.1:{etcd_peer}"))
            .current_dir(&*dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&etcd_log).unwrap())
            .spawn()
            .expect("start etcd");
        let mut c = Self {
            ids,
            etcd: Some(etcd),
            nodes: Vec::new(),
            switchover: None,
            ca: ca_file.clone(),
            logs: logs.clone(),
            dir,
        };
        let health = format!("http://127.0.0.1:{etcd_client}/health");
        c.try_wait_for("etcd /health", || {
            let h = health.clone();
            async move {
                let r = reqwest::get(&h).await.ok()?;
                r.status().is_success().then_some(())
            }
        })
        .await?;

        for (i, name) in ["n1", "n2"].into_iter().enumerate() {
            let (pg_port, rest_port) = (p[2 + i], p[4 + i]);
            let node_dir = c.dir.join(name);
            std::fs::create_dir_all(&node_dir).unwrap();
            chown(&node_dir, ids);
            let data = node_dir.join("data");
            let config = node_dir.join("patroni.yml");
            // ttl 5 s, loop 1 s, retries 2 s (loop_wait + 2 × retry_timeout ≤ ttl): a lost
            // leader's key runs out within 5 s and the synchronous standby takes over.
            let yml = format!(
                r#"scope: actiond-ha
name: {name}
restapi: {{listen: "127.0.0.1:{rest_port}", connect_address: "127.0.0.1:{rest_port}"}}
etcd3: {{hosts: "127.0.0.1:{etcd_client}"}}
bootstrap:
  dcs:
    ttl: 5
    loop_wait: 1
    retry_timeout: 2
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        fsync: "off"
        max_connections: 200
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 5
        max_replication_slots: 5
        log_min_duration_statement: 1000
  initdb: [{{encoding: UTF8}}, {{locale: C}}, {{auth: trust}}]
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: "127.0.0.1:{pg_port}"
  connect_address: "127.0.0.1:{pg_port}"
  data_dir: "{data}"
  bin_dir: "{bin}"
  pgpass: "{node_dir}/pgpass"
  authentication:
    superuser: {{username: postgres}}
    replication: {{username: postgres}}
  parameters:
    unix_socket_directories: "{node_dir}"
    ssl: "on"
    ssl_cert_file: "{cert}"
    ssl_key_file: "{key}"
"#,
                data = data.display(),
                bin = bin.display(),
                node_dir = node_dir.display(),
                cert = cert_file.display(),
                key = key_file.display(),
            );
            std::fs::write(&config, yml).unwrap();
            chown(&config, ids);
            let mut node = Node {
                name: name.to_owned(),
                pg_port,
                rest_port,
                config,
                data,
                log: logs.join(format!("patroni-{name}.log")),
                patroni: None,
            };
            node.patroni = Some(c.spawn_patroni(&node));
            c.nodes.push(node);
            let want = if i == 0 { "/primary" } else { "/sync" };
            let n = &c.nodes[i];
            c.try_wait_for(&format!("{name} {want}"), || async move {
                (n.rest_status(want).await == Some(200)).then_some(())
            })
            .await?;
        }
        Ok(c)
    }

    fn spawn_patroni(&self, node: &Node) -> Child {
        as_postgres("patroni", self.ids)
            .arg(&node.config)
            .env("HOME", &*self.dir)
            .current_dir(&*self.dir)
            .stdout(std::fs::File::create(&node.log).unwrap())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&node.log)
                    .unwrap(),
            ))
            .spawn()
            .expect("start patroni")
    }

    /// Waits up to [`T`] for `f`; `Err` with the stack's logs otherwise.
    async fn try_wait_for<F, Fut>(&self, what: &str, mut f: F) -> Result<(), String>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<()>>,
    {
        let deadline = Instant::now() + T;
        loop {
            if f().await.is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "HA cluster: no {what} within {T:?}\n{}",
                    self.logs_tail()
                ));
            }
            actiond_testkit::poll_pause(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of etcd's and each node's log.
    pub fn logs_tail(&self) -> String {
        let mut out = String::new();
        let tail = |s: String| {
            let l: Vec<&str> = s.lines().collect();
            l[l.len().saturating_sub(25)..].join("\n")
        };
        out.push_str(&format!(
            "--- etcd ---\n{}\n",
            tail(std::fs::read_to_string(self.logs.join("etcd.log")).unwrap_or_default())
        ));
        for n in &self.nodes {
            out.push_str(&format!(
                "--- patroni {} ---\n{}\n",
                n.name,
                tail(n.log_text())
            ));
        }
        out
    }

    /// The superuser URL of `node` alone (for the test's own checks).
    pub fn node_url(&self, node: usize, db: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{db}?sslmode=verify-full&sslrootcert={}",
            self.nodes[node].pg_port,
            self.ca.display()
        )
    }

    /// A libpq keyword/value string naming both nodes, writable one wanted, TLS verified.
    pub fn multi_host_url(&self, user: &str, db: &str) -> String {
        format!(
            "host=127.0.0.1,127.0.0.1 port={},{} user={user} dbname={db} sslmode=verify-full sslrootcert={} target_session_attrs=read-write",
            self.nodes[0].pg_port,
            self.nodes[1].pg_port,
            self.ca.display()
        )
    }

    /// Starts `patronictl switchover` from `from` to `to`, forced (no prompt), on a thread
    /// of its own (it returns once the switchover is done): [`HaCluster::switchover_done`]
    /// waits for it and checks that it succeeded.
    pub fn start_switchover(&mut self, from: usize, to: usize) {
        let mut cmd = Command::new("patronictl");
        cmd.arg("-c")
            .arg(&self.nodes[from].config)
            .args([
                "switchover",
                "--leader",
                &self.nodes[from].name,
                "--candidate",
                &self.nodes[to].name,
                "--force",
            ])
            .env("HOME", &*self.dir);
        self.switchover = Some(std::thread::spawn(move || {
            cmd.output().expect("run patronictl")
        }));
    }

    /// Waits for the switchover [`HaCluster::start_switchover`] began; panics when it failed.
    pub fn switchover_done(&mut self) {
        let out = self
            .switchover
            .take()
            .expect("a switchover was started")
            .join()
            .unwrap();
        assert!(
            out.status.success(),
            "patronictl switchover failed: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.logs_tail()
        );
    }
}

impl Drop for HaCluster {
    fn drop(&mut self) {
        // Patroni first (else it restarts its postmaster), then each postmaster (SIGQUIT:
        // immediate shutdown), then etcd; each by its PID.
        for n in &mut self.nodes {
            let pm = n.postmaster_pid();
            if let Some(mut p) = n.patroni.take() {
                let _ = p.kill();
                let _ = p.wait();
            }
            if let Some(pm) = pm {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pm),
                    nix::sys::signal::Signal::SIGQUIT,
                );
            }
        }
        if let Some(mut e) = self.etcd.take() {
            let _ = e.kill();
            let _ = e.wait();
        }
        // Give the postmasters a moment to go before their directories do.
        for n in &self.nodes {
            let deadline = Instant::now() + Duration::from_secs(10);
            while n.data.join("postmaster.pid").exists() && Instant::now() < deadline {
                actiond_testkit::poll_pause_blocking(Duration::from_millis(50));
            }
        }
    }
}

/// One submission of the steady load.
#[derive(Debug, Clone)]
struct Sub {
    payment: String,
    sent: Instant,
    answered: Instant,
    status: u16,
    id: Option<uuid::Uuid>,
}

/// A gateway (api, 2 policy, 2 executors) on the cluster's multi-host URL.
struct Gateway {
    s: Stack,
    /// Superuser pool on the multi-host URL (follows the primary) for the checks.
    check: Db,
    api_admin: String,
}

impl Gateway {
    async fn start(ha: &HaCluster, test: &str) -> Self {
        let mut s = Stack::with(
            test,
            Options {
                server: Some(ha.node_url(0, "postgres")),
                api: false,
                policy: false,
                executor: false,
                ..Options::default()
            },
        )
        .await;
        let db = s.tdb.name.clone();
        let url = |role: &str| ha.multi_host_url(&format!("actiond_test_{role}"), &db);
        for role in ["api", "policy", "executor"] {
            s.tdb.role_url(role).await; // creates the login
        }
        let api = s.spawn_api("api", &[("DATABASE_URL", url("api"))]).await;
        s.api_url = api.url.clone();
        let api_admin = api.metrics.trim_end_matches("/metrics").to_owned();
        s.services.push(api.into_service());
        for i in 1..=2 {
            let env = vec![
                ("DATABASE_URL", url("policy")),
                ("ACTIOND_POLICY_ADMIN_LISTEN", "127.0.0.1:0".into()),
                (
                    "ACTIOND_POLICY_CREDENTIALS_DIR",
                    s.keys.policy_dir.display().to_string(),
                ),
                ("ACTIOND_POLICY_POLL_MS", "200".into()),
                ("ACTIOND_POLICY_SWEEP_MS", "500".into()),
            ];
            let svc = Service::spawn("policy", &format!("policy-{i}"), &[], &env, &s.logs);
            s.services.push(svc);
        }
        for i in 1..=2 {
            let id = format!("exec-{i}");
            let mut env = s.executor_env(&id).await;
            env.retain(|(k, _)| *k != "DATABASE_URL");
            env.push(("DATABASE_URL", url("executor")));
            let svc = Service::spawn("executor", &id, &[], &env, &s.logs);
            s.services.push(svc);
        }
        let check = Db::connect(&ha.multi_host_url("postgres", &db), 4).unwrap();
        Self {
            s,
            check,
            api_admin,
        }
    }

    /// States of `ids` (missing ones left out); none while no primary answers (the callers
    /// wait with a deadline).
    async fn states(&self, ids: &[uuid::Uuid]) -> HashMap<uuid::Uuid, String> {
        let Ok(c) = self.check.client().await else {
            return HashMap::new();
        };
        c.query(
            "SELECT id, state::text FROM proposals WHERE id = ANY($1)",
            &[&ids],
        )
        .await
        .map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect())
        .unwrap_or_default()
    }

    fn logs_tail(&self) -> String {
        self.s
            .services
            .iter()
            .map(|s| {
                let t = s.log_text();
                let l: Vec<&str> = t.lines().collect();
                format!(
                    "--- {} ---\n{}",
                    s.role,
                    l[l.len().saturating_sub(15)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Submits refunds (allowed by policy) at [`RATE`] per second until `stop` is set; each
/// submission on its own task, so a slow answer does not slow the rate.
fn steady_load(
    s: &Stack,
    tag: &'static str,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> (Arc<Mutex<Vec<Sub>>>, tokio::task::JoinHandle<()>) {
    let subs: Arc<Mutex<Vec<Sub>>> = Arc::default();
    let (http, url, token) = (
        reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
        format!("{}/v1/proposals", s.api_url),
        s.token.clone(),
    );
    let out = subs.clone();
    let h = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE);
        let mut tasks = Vec::new();
        let mut i = 0u32;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            tick.tick().await;
            i += 1;
            let payment = format!("pi_{tag}{i}");
            let (http, url, token, out) = (http.clone(), url.clone(), token.clone(), out.clone());
            tasks.push(tokio::spawn(async move {
                let sent = Instant::now();
                let r = http
                    .post(&url)
                    .bearer_auth(&token)
                    .header("content-type", "application/json")
                    .body(refund(&payment, 100))
                    .send()
                    .await;
                let (status, id) = match r {
                    Ok(r) => {
                        let st = r.status().as_u16();
                        let v: serde_json::Value = r.json().await.unwrap_or_default();
                        (st, v["proposal_id"].as_str().and_then(|s| s.parse().ok()))
                    }
                    Err(_) => (0, None),
                };
                out.lock().unwrap().push(Sub {
                    payment,
                    sent,
                    answered: Instant::now(),
                    status,
                    id,
                });
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    (subs, h)
}

/// What one failover run measured.
#[derive(Debug)]
struct Measured {
    accepted: usize,
    refused: usize,
    first_accepted_after: Duration,
    first_executed_after: Duration,
    /// The longest time between two accepted submissions' answers around the disruption:
    /// how long writes were unavailable to agents.
    longest_gap: Duration,
    readyz_no_writable: bool,
    finals: HashMap<String, usize>,
    handler_calls: usize,
}

/// Runs the load around `disrupt` (which returns the instant the primary was lost or the
/// switchover began) until node `new_primary` leads and a few seconds after, and checks every
/// invariant; returns what was measured.
async fn under_load(
    ha: &mut HaCluster,
    g: &Gateway,
    tag: &'static str,
    new_primary: usize,
    disrupt: impl FnOnce(&mut HaCluster) -> Instant,
) -> Measured {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let (subs, load) = steady_load(&g.s, tag, stop.clone());
    // Warm: the flow runs end to end on the first primary.
    {
        let subs = subs.clone();
        eventually(
            T,
            "10 proposals accepted before the disruption",
            move || {
                let n = subs
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|x| x.status == 202)
                    .count();
                async move { (n >= 10).then_some(()) }
            },
        )
        .await;
    }
    g.s.sentinel().await;

    // /readyz of the api, polled from just before the disruption until it is ready again.
    let readyz = {
        let url = format!("{}/readyz", g.api_admin);
        let seen: Arc<Mutex<Vec<(u16, String)>>> = Arc::default();
        let out = seen.clone();
        let stop = stop.clone();
        let h = tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            while !stop.load(Ordering::SeqCst) {
                if let Ok(r) = http.get(&url).send().await {
                    let st = r.status().as_u16();
                    let body = r.text().await.unwrap_or_default();
                    out.lock().unwrap().push((st, body));
                }
                actiond_testkit::poll_pause(Duration::from_millis(100)).await;
            }
        });
        (seen, h)
    };

    let lost_at = disrupt(ha);
    // The first proposal submitted after the disruption and accepted (202): it was stored on
    // the new primary.
    let first = {
        let subs = subs.clone();
        let deadline = lost_at + T;
        loop {
            let f = subs
                .lock()
                .unwrap()
                .iter()
                .filter(|x| x.sent > lost_at && x.status == 202)
                .min_by_key(|x| x.answered)
                .cloned();
            if let Some(f) = f {
                break f;
            }
            if Instant::now() > deadline {
                panic!(
                    "no proposal accepted within {T:?} after the disruption\n{}\n{}",
                    ha.logs_tail(),
                    g.logs_tail()
                );
            }
            actiond_testkit::poll_pause(Duration::from_millis(20)).await;
        }
    };
    let first_accepted_after = first.answered - lost_at;
    // ... and run end to end there.
    let first_id = first.id.unwrap();
    let mut first_executed_after = None;
    let deadline = Instant::now() + T;
    while first_executed_after.is_none() {
        let st = g.states(&[first_id]).await;
        if st.get(&first_id).is_some_and(|s| s == "succeeded") {
            first_executed_after = Some(lost_at.elapsed());
        } else if Instant::now() > deadline {
            panic!(
                "{first_id} did not run on the new primary\n{}",
                g.logs_tail()
            );
        } else {
            actiond_testkit::poll_pause(Duration::from_millis(20)).await;
        }
    }
    // Keep the load on until the new primary leads (a switchover may still be under way),
    // and a few seconds more there; then stop it.
    let deadline = Instant::now() + T;
    while !is_primary(ha, new_primary).await {
        assert!(
            Instant::now() < deadline,
            "node {new_primary} did not become the primary\n{}",
            ha.logs_tail()
        );
        actiond_testkit::poll_pause(Duration::from_millis(100)).await;
    }
    // Keep the load on the new primary for a while: the submissions after the change are
    // what shows the services really write there (time is the point of this pause).
    #[expect(
        clippy::disallowed_methods,
        reason = "load runs for a fixed time on the new primary"
    )]
    let () = tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    load.await.unwrap();
    let _ = readyz.1.await;

    let subs = subs.lock().unwrap().clone();
    let accepted: Vec<&Sub> = subs.iter().filter(|x| x.status == 202).collect();
    let ids: Vec<uuid::Uuid> = accepted.iter().map(|x| x.id.unwrap()).collect();
    // Every proposal answered 202 reaches a final state.
    let finals = [
        "succeeded",
        "failed",
        "outcome_unknown",
        "blocked",
        "expired",
        "denied",
    ];
    let deadline = Instant::now() + T;
    let states = loop {
        let st = g.states(&ids).await;
        let open: Vec<_> = ids
            .iter()
            .filter(|id| !st.get(id).is_some_and(|s| finals.contains(&s.as_str())))
            .collect();
        if open.is_empty() {
            break st;
        }
        if Instant::now() > deadline {
            panic!(
                "{} proposals answered 202 are not final ({:?} …; states: {:?})\n{}",
                open.len(),
                open.first(),
                open.iter().take(5).map(|id| st.get(id)).collect::<Vec<_>>(),
                g.logs_tail()
            );
        }
        actiond_testkit::poll_pause(Duration::from_millis(200)).await;
    };
    assert_eq!(
        states.len(),
        ids.len(),
        "every 202 is stored on the new primary"
    );
    // No handler ran twice for one grant (the grant id is the provider's Idempotency-Key),
    // and each succeeded proposal's refund reached the provider exactly once.
    let calls: Vec<_> =
        g.s.recv
            .requests()
            .into_iter()
            .filter(|r| r.path == "/v1/refunds")
            .collect();
    let mut per_grant: HashMap<String, usize> = HashMap::new();
    for c in &calls {
        *per_grant
            .entry(
                c.headers
                    .get("idempotency-key")
                    .cloned()
                    .unwrap_or_default(),
            )
            .or_default() += 1;
    }
    let twice: Vec<_> = per_grant.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "handlers ran twice for grants {twice:?}");
    for sub in &accepted {
        let marker = format!("{}&", sub.payment);
        let n = calls
            .iter()
            .filter(|c| String::from_utf8_lossy(&c.body).contains(&marker))
            .count();
        let state = &states[&sub.id.unwrap()];
        if state == "succeeded" {
            assert_eq!(
                n, 1,
                "{} ({state}) reached the provider {n} times",
                sub.payment
            );
        } else {
            assert!(
                n <= 1,
                "{} ({state}) reached the provider {n} times",
                sub.payment
            );
        }
    }
    let mut counts: HashMap<String, usize> = HashMap::new();
    for s in states.values() {
        *counts.entry(s.clone()).or_default() += 1;
    }
    let mut answered: Vec<Instant> = accepted.iter().map(|x| x.answered).collect();
    answered.sort();
    let longest_gap = answered
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    let seen = readyz.0.lock().unwrap().clone();
    Measured {
        accepted: accepted.len(),
        refused: subs.len() - accepted.len(),
        first_accepted_after,
        first_executed_after: first_executed_after.unwrap(),
        longest_gap,
        readyz_no_writable: seen
            .iter()
            .any(|(st, b)| *st == 503 && b.starts_with(actiond_store::NO_WRITABLE_DATABASE)),
        finals: counts,
        handler_calls: calls.len(),
    }
}

/// LISTEN runs on node `node` for both queue channels: each policy worker on
/// `actiond_pending`, each executor on `actiond_approved`.
async fn assert_listening_on(ha: &HaCluster, node: usize, db: &str) {
    let url = ha.node_url(node, db);
    eventually(T, "LISTEN on the new primary", || {
        let url = url.clone();
        async move {
            let c = actiond_store::tls::connect(&url).await.ok()?;
            let rows = c
                .query(
                    "SELECT query, count(*) FROM pg_stat_activity \
                     WHERE datname = current_database() AND query LIKE 'LISTEN %' GROUP BY query",
                    &[],
                )
                .await
                .ok()?;
            let n: HashMap<String, i64> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
            (n.get("LISTEN actiond_pending").copied().unwrap_or(0) >= 2
                && n.get("LISTEN actiond_approved").copied().unwrap_or(0) >= 2)
                .then_some(())
        }
    })
    .await;
}

/// Whether `node` is the writable primary now.
async fn is_primary(ha: &HaCluster, node: usize) -> bool {
    match actiond_store::tls::connect(&ha.node_url(node, "postgres")).await {
        Ok(c) => c
            .query_one("SELECT NOT pg_is_in_recovery()", &[])
            .await
            .map(|r| r.get::<_, bool>(0))
            .unwrap_or(false),
        Err(_) => false,
    }
}

fn report(what: &str, m: &Measured) {
    eprintln!(
        "FAILOVER MEASURED ({what}): first 202 for a submission sent after it {:.2} s after, that proposal run end to end {:.2} s after; \
         longest time without an accepted submission {:.2} s; \
         {} accepted (202), {} refused or failed to connect meanwhile; final states {:?}; {} provider calls, none twice for one grant; \
         /readyz said \"no writable database\": {}",
        m.first_accepted_after.as_secs_f64(),
        m.first_executed_after.as_secs_f64(),
        m.longest_gap.as_secs_f64(),
        m.accepted,
        m.refused,
        m.finals,
        m.handler_calls,
        m.readyz_no_writable,
    );
}

/// The primary node is lost (`kill -9` of its Patroni and its postmaster) under a steady load:
/// the synchronous standby takes over when the leader key runs out, every service finds it
/// through the multi-host URL, and nothing answered 202 is lost or run twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_primary_is_lost_under_load_and_nothing_is_lost_or_run_twice() {
    if skip_without("failover::the_primary_is_lost…", &missing_ha_binaries()) {
        return;
    }
    let started = Instant::now();
    let mut ha = HaCluster::start("failover_kill9").await;
    let g = Gateway::start(&ha, "failover_kill9").await;
    assert_listening_on(&ha, 0, &g.s.tdb.name).await;
    let m = under_load(&mut ha, &g, "fk", 1, |ha| {
        let at = Instant::now();
        ha.nodes[0].kill9();
        at
    })
    .await;
    report("kill -9 of the primary's Patroni and postmaster", &m);
    assert!(is_primary(&ha, 1).await, "n2 is the primary now");
    assert_listening_on(&ha, 1, &g.s.tdb.name).await;
    assert!(
        m.readyz_no_writable,
        "/readyz never said \"no writable database\" while the primary was gone"
    );
    assert!(
        m.first_accepted_after < RECOVERY_BOUND,
        "recovery took {:?} (bound {RECOVERY_BOUND:?})",
        m.first_accepted_after
    );
    assert!(m.finals.get("succeeded").copied().unwrap_or(0) > 0);
    eprintln!("failover test took {:?}", started.elapsed());
}

/// `patronictl switchover` under a steady load: the old primary becomes a standby (still up,
/// first in the URL: `target_session_attrs=read-write` passes over it), nothing answered 202
/// is lost or run twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchover_under_load_loses_and_runs_twice_nothing() {
    if skip_without("failover::a_switchover_under_load…", &missing_ha_binaries()) {
        return;
    }
    let started = Instant::now();
    let mut ha = HaCluster::start("failover_switchover").await;
    let g = Gateway::start(&ha, "failover_switchover").await;
    let m = under_load(&mut ha, &g, "fs", 1, |ha| {
        let at = Instant::now();
        ha.start_switchover(0, 1);
        at
    })
    .await;
    ha.switchover_done();
    report("patronictl switchover", &m);
    assert!(is_primary(&ha, 1).await, "n2 is the primary now");
    assert_listening_on(&ha, 1, &g.s.tdb.name).await;
    // The switchover runs while the load goes on: the outage is the longest time without an
    // accepted submission.
    assert!(
        m.longest_gap < RECOVERY_BOUND,
        "writes were unavailable for {:?} (bound {RECOVERY_BOUND:?})",
        m.longest_gap
    );
    eprintln!("switchover test took {:?}", started.elapsed());
}

/// PgBouncer (Debian's) in session mode on a loopback port, in front of the test server, run
/// as `postgres` (it refuses root) and stopped by its PID on drop.
struct PgBouncer {
    port: u16,
    child: Option<Child>,
    log: PathBuf,
    _dir: Scratch,
}

impl PgBouncer {
    /// Starts it in `pool_mode = session` for every database of `server` (a
    /// `postgres://user@host:port/db` URL), trusting the users listed, and waits until it
    /// answers.
    async fn start(server: &str, users: &[&str], logs: &Path) -> Self {
        let ids = postgres_ids();
        let dir = Scratch::new("actiond-pgbouncer");
        chown(&dir, ids);
        let u = url::Url::parse(server).unwrap();
        let (host, port) = (u.host_str().unwrap().to_owned(), u.port().unwrap_or(5432));
        let auth = dir.join("users.txt");
        let lines: String = users.iter().map(|u| format!("\"{u}\" \"\"\n")).collect();
        std::fs::write(&auth, lines).unwrap();
        chown(&auth, ids);
        let log = logs.join("pgbouncer.log");
        let listen = free_ports(1)[0];
        let ini = dir.join("pgbouncer.ini");
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={port}\n\n[pgbouncer]\n\
                 listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
                 auth_type = trust\nauth_file = {auth}\nadmin_users = postgres\n\
                 pool_mode = session\nmax_client_conn = 300\ndefault_pool_size = 100\n\
                 ignore_startup_parameters = extra_float_digits\n\
                 pidfile = {pid}\n",
                auth = auth.display(),
                pid = dir.join("pgbouncer.pid").display(),
            ),
        )
        .unwrap();
        chown(&ini, ids);
        let child = as_postgres("pgbouncer", ids)
            .arg(&ini)
            .current_dir(&*dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start pgbouncer");
        let b = Self {
            port: listen,
            child: Some(child),
            log,
            _dir: dir,
        };
        let url = b.url("postgres", "pgbouncer");
        let log = b.log.clone();
        let deadline = Instant::now() + T;
        while actiond_store::tls::connect(&url).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not answer:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            actiond_testkit::poll_pause(Duration::from_millis(100)).await;
        }
        b
    }

    /// A URL through the pooler (no TLS between client and pooler in this test).
    fn url(&self, user: &str, db: &str) -> String {
        format!(
            "postgres://{user}@127.0.0.1:{}/{db}?sslmode=disable",
            self.port
        )
    }

    /// `SHOW CLIENTS` on the admin console: (user, database) of every client connection.
    async fn clients(&self) -> Vec<(String, String)> {
        let c = actiond_store::tls::connect(&self.url("postgres", "pgbouncer"))
            .await
            .unwrap();
        let rows = c.simple_query("SHOW CLIENTS").await.unwrap();
        rows.iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some((
                    r.get("user").unwrap_or_default().to_owned(),
                    r.get("database").unwrap_or_default().to_owned(),
                )),
                _ => None,
            })
            .collect()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Every service behind PgBouncer in session mode: `actiond migrate` (its session advisory
/// lock), api, policy and executor (prepared statements, LISTEN on a dedicated connection)
/// and the break-glass CLI all work through the pooler, and the flow runs end to end, woken by
/// LISTEN/NOTIFY through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_pgbouncer_in_session_mode_everything_works() {
    if skip_without("failover::behind_pgbouncer…", &missing_pooler_binaries()) {
        return;
    }
    let mut s = Stack::with(
        "pgbouncer_session",
        Options {
            api: false,
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    for role in ["api", "policy", "executor", "admin"] {
        s.tdb.role_url(role).await; // creates the login
    }
    let users = [
        "postgres",
        "actiond_test_api",
        "actiond_test_policy",
        "actiond_test_executor",
        "actiond_test_admin",
    ];
    let b = PgBouncer::start(&s.tdb.server, &users, &s.logs).await;
    let db = s.tdb.name.clone();
    let url = |role: &str| b.url(&format!("actiond_test_{role}"), &db);

    // Migrations through the pooler: the session advisory lock holds (nothing to apply).
    let (ok, out, err) =
        actiond_testkit::cli(&["migrate"], &[("DATABASE_URL", b.url("postgres", &db))]);
    assert!(ok, "actiond migrate through pgbouncer: {out}{err}");

    let api = s.spawn_api("api", &[("DATABASE_URL", url("api"))]).await;
    s.api_url = api.url.clone();
    s.services.push(api.into_service());
    s.start_policy_with(vec![
        ("DATABASE_URL", url("policy")),
        // A long poll: the flow below moves on NOTIFY through the pooler, not on the timer.
        ("ACTIOND_POLICY_POLL_MS", "30000".into()),
    ])
    .await;
    let mut env = s.executor_env("exec-1").await;
    env.retain(|(k, _)| *k != "DATABASE_URL" && *k != "ACTIOND_EXECUTOR_POLL_MS");
    env.push(("DATABASE_URL", url("executor")));
    env.push(("ACTIOND_EXECUTOR_POLL_MS", "30000".into()));
    let svc = Service::spawn("executor", "exec-1", &[], &env, &s.logs);
    s.services.push(svc);

    // Every role's connections come through the pooler.
    for role in ["api", "policy", "executor"] {
        let user = format!("actiond_test_{role}");
        eventually(T, &format!("{user} connected through pgbouncer"), || {
            let b = &b;
            let user = user.clone();
            async move {
                b.clients()
                    .await
                    .iter()
                    .any(|(u, _)| *u == user)
                    .then_some(())
            }
        })
        .await;
    }

    // The flow end to end, allowed and escalated-then-approved (break-glass CLI through the
    // pooler): each ran once.
    let started = Instant::now();
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(s.propose(&refund(&format!("pi_pgb{i}"), 100 + i)).await);
    }
    for id in &ids {
        s.wait_state(*id, "succeeded", Duration::from_secs(20))
            .await;
    }
    let big = s.propose(&refund("pi_pgb_big", 9000)).await;
    s.wait_state(big, "escalated", T).await;
    let intent: String = s.row(big).await.get(3);
    let mut cli_env = s.cli_env().await;
    cli_env.retain(|(k, _)| *k != "DATABASE_URL");
    cli_env.push(("DATABASE_URL", url("admin")));
    let (ok, out, err) = actiond_testkit::cli(
        &[
            "approvals",
            "approve",
            &big.to_string(),
            "--as",
            "alice",
            "--intent",
            &intent[..16],
        ],
        &cli_env,
    );
    assert!(ok, "{out}{err}");
    s.wait_state(big, "succeeded", T).await;
    // Woken by NOTIFY through the pooler: well inside the 30 s poll.
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the flow waited for the poll timer ({:?}): LISTEN/NOTIFY did not pass the pooler",
        started.elapsed()
    );
    let calls = s.calls();
    assert_eq!(calls.len(), 11, "each refund reached the provider once");
}

/// What the pooler test needs that is not installed.
fn missing_pooler_binaries() -> Vec<&'static str> {
    if on_path("pgbouncer") {
        Vec::new()
    } else {
        vec!["pgbouncer"]
    }
}
