//! `actiond-bench`: measures the gateway over real processes on a fresh database, beside the
//! floor measured in the same run.
//!
//! ```text
//! cargo run --release -p actiond-bench -- --proposals 5000 --concurrency 32
//! cargo run --release -p actiond-bench -- --proposals 3000 --rate 300 --json
//! ```
//!
//! Per run it prints the floor (`floor/`: the least durable, audited allow path, driven by
//! `pgbench` on a scratch database), actiond's throughput, the ratio of the two, CPU
//! milliseconds per proposal for each component (from `/proc`), per-stage latency percentiles
//! (from the audit log) and optionally a `pg_stat_statements` profile. See `bench/README.md`.
//!
//! Scenarios:
//! - `allow`: agents submit allowed `webhook.post` proposals; policy approves and signs,
//!   executors verify, spend and POST to a local receiver.
//! - `submit`: submission only (escalating proposals, no executor work): API + Postgres.
//!
//! Speed is measured here, never asserted in tests.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "benchmark tool: a failed step stops the run loudly; its report goes to stdout"
)]

mod cpu;
mod floor;
mod load;
mod pgss;
mod report;
mod stages;

use actiond_testkit::{Keys, Receiver, Service, TestDb, agent, eventually, log_dir, server_url};
use clap::Parser;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Parser)]
#[command(about = "Measures actiond's allow path beside the floor, in the same run")]
struct Args {
    /// Proposals to submit (after the `--warm-up` proposals, which are not counted).
    #[arg(long, default_value_t = 3000)]
    proposals: usize,
    /// Concurrent HTTP clients of the closed loop (ignored with --rate).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Open loop: a fixed arrival rate in proposals per second instead of closed-loop clients.
    #[arg(long)]
    rate: Option<f64>,
    /// Executor processes.
    #[arg(long, default_value_t = 2)]
    executors: usize,
    /// API processes; the load's proposals go to them in turn (proposal i to api i mod N).
    #[arg(long, default_value_t = 1)]
    apis: usize,
    /// N api, N policy and N executor processes (sets --apis, --policies and --executors), so
    /// that contention between replicas (locks, LISTEN fan-out, SKIP LOCKED misses) shows as
    /// their number grows.
    #[arg(long, value_name = "N")]
    replicas: Option<usize>,
    /// Policy worker processes.
    #[arg(long, default_value_t = 1)]
    policies: usize,
    /// Scenario: allow or submit.
    #[arg(long, default_value = "allow")]
    scenario: String,
    /// Seconds of the floor run (pgbench); 0 skips the floor.
    #[arg(long, default_value_t = 15)]
    floor_seconds: u64,
    /// pgbench clients of the floor run.
    #[arg(long, default_value_t = 16)]
    floor_clients: usize,
    /// Print one JSON line instead of the text report.
    #[arg(long)]
    json: bool,
    /// Profile statements with pg_stat_statements (reset before, top statements after), if
    /// the server preloads it.
    #[arg(long)]
    pg_stat_statements: bool,
    /// Also run the audit sealer (`actiond audit seal --interval 1s`), as production does: its
    /// process counts as `sealer`, its backends in `postgres`. Off by default, so figures
    /// compare with earlier runs, which had no sealer.
    #[arg(long)]
    seal: bool,
    /// SQL files run in order as the superuser on the fresh bench database after its
    /// migrations and before any service starts, to compare a schema change within one build
    /// (an A/B; repeat the flag for several files), for instance one that puts back an
    /// earlier migration's trigger function and the trigger that ran it. Each file
    /// is named on stderr; figures taken with them are not those of the migrations as shipped.
    #[arg(long, value_name = "FILE")]
    schema_sql: Vec<std::path::PathBuf>,
    /// Finished proposals of another tenant stored before the run, after which the database
    /// is analyzed: a gateway in service, not an empty one. On an empty `proposals` table
    /// each connection's cached generic plan (the services set `plan_cache_mode =
    /// force_generic_plan`) of the batched decide, claim and outcome statements is a
    /// sequential scan, chosen while the table is a few pages long, and it stays one for
    /// the whole run as the table grows: only a new analyze makes a backend plan again,
    /// and autovacuum does not analyze within a run of seconds. 0 measures that empty start
    /// (every run before 2026-12-04 did).
    #[arg(long, default_value_t = 20_000)]
    history: u32,
    /// Proposals sent through the whole allow path before metering starts, closed loop with
    /// `--concurrency` clients (at most one client per proposal), not counted. With 1, the
    /// services' connection pools are nearly empty when the measured load starts, so the
    /// first burst opens connections and plans every statement on each of them (the
    /// services' pools open connections lazily).
    #[arg(long, default_value_t = 1)]
    warm_up: usize,
    /// After the closed loop, run the open loop at half the closed loop's end-to-end rate (the
    /// "maximum" of that moment) on a fresh database and services, and report both runs (two
    /// reports; with `--json`, two lines). The latency target of an open loop is stated at
    /// half the maximum rate, and on a shared machine the maximum moves from hour to hour, so
    /// both are measured together. Not with `--rate`.
    #[arg(long, conflicts_with = "rate")]
    then_half_rate: bool,
}

impl Args {
    /// `--replicas N` sets the api, policy and executor process counts to N.
    fn with_replicas(mut self) -> Self {
        if let Some(n) = self.replicas {
            (self.apis, self.policies, self.executors) = (n, n, n);
        }
        self
    }
}

const DOC: &str = r#"
tenant: bench
policy:
  default: escalate
  max_open_escalations_per_agent: 10000
  rules:
    - name: ping
      when: 'action == "webhook.post" && params.body.kind == "ping"'
      effect: allow
      reason: Pings are harmless.
handlers:
  webhook.post:
    url: RECEIVER/hook
"#;

/// Statements shown by `--pg-stat-statements`.
const TOP_STATEMENTS: i64 = 12;

/// Spawns the api (on a port of its choosing) and, for the allow scenario, the policy and
/// executor processes; returns them and the api's URL.
async fn spawn_services(
    args: &Args,
    tdb: &TestDb,
    keys: &Keys,
    recv: &Receiver,
) -> (Vec<Service>, Vec<String>) {
    let logs = log_dir("bench");
    let mut services = Vec::new();
    let mut api_urls = Vec::new();
    // 32 connections in all, at least 4 each: the replicas share one server's connections.
    let pool = (32 / args.apis).max(4).to_string();
    for i in 0..args.apis {
        let mut api = Service::spawn(
            "api",
            &if i == 0 {
                "api".into()
            } else {
                format!("api-{i}")
            },
            &[],
            &[
                ("DATABASE_URL", tdb.role_url("api").await),
                ("ACTIOND_API_LISTEN", "127.0.0.1:0".into()),
                ("ACTIOND_API_ADMIN_LISTEN", "127.0.0.1:0".into()),
                ("ACTIOND_API_POOL_SIZE", pool.clone()),
                // The bound-listener line is how the port is learnt (Service::bound).
                ("RUST_LOG", "warn,actiond::listen=info".into()),
            ],
            &logs,
        );
        api_urls.push(api.url("http").await);
        services.push(api);
    }
    if args.scenario != "allow" {
        return (services, api_urls);
    }
    for i in 0..args.policies {
        services.push(Service::spawn(
            "policy",
            &format!("policy-{i}"),
            &[],
            &[
                ("DATABASE_URL", tdb.role_url("policy").await),
                ("ACTIOND_POLICY_ADMIN_LISTEN", "127.0.0.1:0".into()),
                (
                    "ACTIOND_POLICY_CREDENTIALS_DIR",
                    keys.policy_dir.display().to_string(),
                ),
                ("RUST_LOG", "warn".into()),
            ],
            &logs,
        ));
    }
    for i in 0..args.executors {
        services.push(Service::spawn(
            "executor",
            &format!("executor-{i}"),
            &[],
            &[
                ("DATABASE_URL", tdb.role_url("executor").await),
                ("ACTIOND_EXECUTOR_ADMIN_LISTEN", "127.0.0.1:0".into()),
                (
                    "ACTIOND_EXECUTOR_CREDENTIALS_DIR",
                    keys.executor_dir.display().to_string(),
                ),
                ("ACTIOND_EXECUTOR_ID", format!("bench-{i}")),
                ("ACTIOND_WEBHOOK_ALLOWED_HOSTS", recv.host_port.clone()),
                ("ACTIOND_ALLOW_PRIVATE_DESTINATIONS", "true".into()),
                ("ACTIOND_EXECUTOR_BATCH", "64".into()),
                ("ACTIOND_EXECUTOR_CONCURRENCY", "64".into()),
                ("RUST_LOG", "warn".into()),
            ],
            &logs,
        ));
    }
    if args.seal {
        services.push(spawn_sealer(tdb, keys, &logs).await);
    }
    (services, api_urls)
}

/// The audit sealer with a key of its own (`actiond audit keygen`), chaining and signing
/// events every second as a deployment runs it.
async fn spawn_sealer(tdb: &TestDb, keys: &Keys, logs: &std::path::Path) -> Service {
    let dir = keys.dir.join("sealer");
    let dir = dir.to_str().unwrap();
    let out = std::process::Command::new(actiond_testkit::actiond_bin())
        .args(["audit", "keygen", "--out-dir", dir])
        .output()
        .unwrap();
    assert!(out.status.success(), "audit keygen: {out:?}");
    Service::spawn(
        "audit",
        "sealer",
        &["seal", "--interval", "1s", "--credentials-dir", dir],
        &[
            ("DATABASE_URL", tdb.role_url("sealer").await),
            ("RUST_LOG", "warn".into()),
        ],
        logs,
    )
}

/// Waits until `total` allowed proposals of the bench tenant have succeeded: first on the
/// receiver's count (no database work but a check every 2 s that none left the allow path),
/// then on the audit log (the outcome is recorded after the POST).
///
/// Stops the run (a panic naming the proposal's state and reason; the services' processes are
/// stopped as main unwinds) when a
/// proposal left the allow path, e.g. escalated because policy evaluation ran over its time
/// budget on an overloaded machine: it would never succeed, and a figure without it is wrong.
///
/// Stops it too when one of `services` exited (a service that failed at start, or crashed):
/// without it nothing would ever be executed, and the run would wait out its limit.
async fn wait_succeeded(
    c: &tokio_postgres::Client,
    recv: &Receiver,
    total: usize,
    services: &[Service],
) {
    let limit = Duration::from_secs(1800);
    let mut checked = std::time::Instant::now();
    let watched: Vec<(&str, u32, &std::path::Path)> = services
        .iter()
        .map(|s| (s.role.as_str(), s.child.id(), s.log.as_path()))
        .collect();
    let watched = &watched;
    eventually(limit, "every proposal executed", || {
        let due = checked.elapsed() >= Duration::from_secs(2);
        if due {
            checked = std::time::Instant::now();
        }
        async move {
            if recv.count() >= total {
                return Some(());
            }
            if due {
                for (role, pid, log) in watched {
                    assert!(
                        !exited(*pid),
                        "the {role} process (pid {pid}) exited during the run; its log: {}",
                        log.display()
                    );
                }
                exit_if_off_the_allow_path(c).await;
            }
            None
        }
    })
    .await;
    let total = total as i64;
    eventually(limit, "every proposal recorded as succeeded", || async move {
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM audit_events WHERE tenant_id = 'bench' AND to_state = 'succeeded'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        (n >= total).then_some(())
    })
    .await;
}

/// Waits until the sealer has chained every audit event written so far (`--seal`).
async fn wait_sealed(c: &tokio_postgres::Client) {
    eventually(
        Duration::from_secs(120),
        "every event sealed",
        || async move {
            let r = c
                .query_one(
                    "SELECT (SELECT coalesce(max(event_id), 0) FROM audit_event_hashes)
                        >= (SELECT coalesce(max(id), 0) FROM audit_events)",
                    &[],
                )
                .await
                .unwrap();
            r.get::<_, bool>(0).then_some(())
        },
    )
    .await;
}

/// Whether process `pid`, a child of the bench, has exited: it is a zombie until the bench
/// reaps it (state `Z` in `/proc/<pid>/stat`, proc(5)), or gone.
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold spaces.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => true,
    }
}

/// Ends the run when a bench proposal is in a state off the allow path (see [`wait_succeeded`]).
async fn exit_if_off_the_allow_path(c: &tokio_postgres::Client) {
    let off = c
        .query_opt(
            "SELECT state, coalesce(decision_reason, '') FROM proposals
             WHERE tenant_id = 'bench' AND state NOT IN ('pending', 'approved', 'executing', 'succeeded')
             LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    if let Some(r) = off {
        let (state, reason): (String, String) = (r.get(0), r.get(1));
        // A panic unwinds main, so the services' Drop stops their processes.
        panic!(
            "a proposal left the allow path ({state}: {reason}); its figures would be wrong, so the run stops (an overloaded machine can push policy evaluation past ACTIOND_POLICY_EVAL_BUDGET_MS)"
        );
    }
}

/// The component label of a service's role.
fn label(role: &str) -> &'static str {
    match role {
        "api" => "api",
        "policy" => "policy",
        "audit" => "sealer",
        _ => "executor",
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse().with_replicas();
    if args.apis == 0 {
        eprintln!("--apis and --replicas must be at least 1");
        std::process::exit(2);
    }
    if args.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        eprintln!("--rate must be a positive number of proposals per second");
        std::process::exit(2);
    }
    // The floor first, while nothing of actiond runs yet.
    let floor = if args.floor_seconds > 0 {
        let f = floor::run(&server_url(), args.floor_seconds, args.floor_clients).await;
        Some(f.map_err(|e| format!("{e:#}")))
    } else {
        None
    };
    let run = measure(&args, floor).await;
    report(&args, &run);
    if args.then_half_rate {
        let half = run.per_second() / 2.0;
        let open = Args {
            rate: Some(half.max(1.0)),
            ..args.clone()
        };
        if !args.json {
            println!(
                "then the open loop at half of {:.0} proposals/s:",
                run.per_second()
            );
        }
        let second = measure(&open, None).await;
        report(&open, &second);
    }
}

/// Prints a run: its text report, or one JSON line with `--json`.
fn report(args: &Args, run: &report::Run) {
    if args.json {
        println!("{}", run.json());
    } else {
        print!("{}", run.text());
    }
}

/// What a measured run starts from: a fresh database with the bench tenant (changed by any
/// `--schema-sql`), the receiver its handlers call, the gateway's processes, and the load's
/// target once the api answers.
struct Setup {
    tdb: TestDb,
    recv: Receiver,
    /// The gateway's processes; dropping them stops them.
    services: Vec<Service>,
    target: load::Target,
    /// The signing keys and credentials the processes read from their directories, kept until
    /// the run ends: dropping them removes the directories, and a process that starts slowly
    /// (a loaded machine) read its key after they were gone and exited.
    _keys: Keys,
}

/// Sets up a measured run ([`Setup`]).
async fn set_up(args: &Args, allow: bool) -> Setup {
    let tdb = TestDb::new().await;
    for path in &args.schema_sql {
        let sql = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("--schema-sql {}: {e}", path.display()));
        tdb.superuser()
            .await
            .batch_execute(&sql)
            .await
            .unwrap_or_else(|e| {
                let detail = e
                    .as_db_error()
                    .map_or_else(|| e.to_string(), |d| d.to_string());
                panic!("--schema-sql {}: {detail}", path.display())
            });
        eprintln!("bench database changed by --schema-sql {}", path.display());
    }
    seed_history(&tdb, args.history).await;
    let keys = Keys::generate();
    let recv = Receiver::start(Duration::from_secs(1)).await;
    actiond_store::tenants::apply(&tdb.db, &DOC.replace("RECEIVER", &recv.url), "bench")
        .await
        .unwrap();
    let (_, token) = agent(&tdb.db, "bench", "bench-bot", None).await;
    let (services, apis) = spawn_services(args, &tdb, &keys, &recv).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency.max(256))
        .build()
        .unwrap();
    for api in &apis {
        eventually(Duration::from_secs(30), "api up", || {
            let (h, u) = (http.clone(), format!("{api}/healthz"));
            async move {
                h.get(u)
                    .send()
                    .await
                    .ok()
                    .filter(|r| r.status().is_success())
            }
        })
        .await;
    }
    let target = load::Target {
        http,
        apis,
        token,
        kind: if allow { "ping" } else { "review" },
        first: 0,
    };
    Setup {
        tdb,
        recv,
        services,
        target,
        _keys: keys,
    }
}

/// Runs actiond on a fresh database and measures it.
async fn measure(args: &Args, floor: Option<Result<floor::Floor, String>>) -> report::Run {
    let allow = args.scenario == "allow";
    let Setup {
        tdb,
        recv,
        services,
        target,
        _keys,
    } = set_up(args, allow).await;
    let su = tdb.superuser().await;
    // The warm-up, through the whole path, before metering: every process is up, and with
    // `--warm-up` above 1 every pool holds the connections the load needs.
    let warm = if allow { args.warm_up.max(1) } else { 0 };
    if allow {
        let warm_target = load::Target {
            first: 1 << 40,
            ..target.clone()
        };
        load::closed(&warm_target, warm, args.concurrency.min(warm)).await;
        wait_succeeded(&su, &recv, warm, &services).await;
    }
    let statements_on = if args.pg_stat_statements {
        Some(pgss::reset(&su).await.map_err(|e| format!("{e:#}")))
    } else {
        None
    };
    let t0: f64 = su
        .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
        .await
        .unwrap()
        .get(0);
    let backend: i32 = su
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let fixed = services
        .iter()
        .map(|s| (label(&s.role), s.child.id()))
        .chain([("bench client", std::process::id())])
        // The bench's own backend (its polls for the end of the run and its checks) is the
        // bench's work, not the gateway's: metered apart from `postgres`.
        .chain(
            u32::try_from(backend)
                .ok()
                .map(|pid| ("bench backend", pid)),
        )
        .collect();
    let activity_before = proposal_activity(&su).await;
    let scans_before = seq_scans(&su).await;
    let maintenance_before = maintenance(&su).await;
    let wal_before = wal_segments(&su).await;
    let meter = cpu::Meter::start(fixed, cpu::Postgres::from_backend(backend, &tdb.name));
    let started = std::time::Instant::now();
    let submitted = match args.rate {
        Some(rate) => load::open(&target, args.proposals, rate).await,
        None => load::closed(&target, args.proposals, args.concurrency).await,
    };
    let e2e_seconds = if allow {
        wait_succeeded(&su, &recv, warm + args.proposals, &services).await;
        Some(started.elapsed().as_secs_f64())
    } else {
        None
    };
    if allow && args.seal {
        // The sealer's work for these proposals counts too: meter until it is done.
        wait_sealed(&su).await;
    }
    let cpu = meter.stop();
    let wal_segments_added = match (wal_before, wal_segments(&su).await) {
        (Some(before), Some(after)) => Some(after - before),
        _ => None,
    };
    let statements = match statements_on {
        Some(Ok(())) => Some(
            pgss::profile(&su, TOP_STATEMENTS)
                .await
                .map_err(|e| format!("{e:#}")),
        ),
        Some(Err(e)) => Some(Err(e)),
        None => None,
    };
    let stages = stages::read(&su, "bench", t0).await;
    if allow {
        assert_eq!(
            recv.count(),
            warm + args.proposals,
            "each proposal executed exactly once"
        );
    }
    drop(services);
    // The services' backends flush their table statistics when they exit.
    #[expect(
        clippy::disallowed_methods,
        reason = "no event says the exited backends' statistics are flushed; a second is the margin"
    )]
    tokio::time::sleep(Duration::from_secs(1)).await;
    let activity = match (activity_before, proposal_activity(&su).await) {
        (Some(before), Some(after)) => Some(after.since(&before)),
        _ => None,
    };
    let seq_scanned = report::SeqScans::since(&scans_before, &seq_scans(&su).await);
    let maintained = report::Maintenance::since(&maintenance_before, &maintenance(&su).await);
    report::Run {
        scenario: args.scenario.clone(),
        mode: match args.rate {
            Some(r) => format!("open loop at {r:.0} proposals/s"),
            None => format!("closed loop, {} clients", args.concurrency),
        },
        rate: args.rate,
        proposals: args.proposals,
        apis: args.apis,
        policies: if allow { args.policies } else { 0 },
        executors: if allow { args.executors } else { 0 },
        submitted,
        e2e_seconds,
        cpu,
        stages,
        floor,
        statements,
        activity,
        seq_scanned,
        maintained,
        wal_segments_added,
        history: args.history,
    }
}

/// Stores `n` finished (`succeeded`) proposals of tenant `history` as the allow path leaves
/// them: each with its spent grant and its four audit events (submitted, decided, spent,
/// executed), spread over one agent per 10 proposals; then vacuums and analyzes the database (see
/// `--history`). Written as the superuser with triggers off (`session_replication_role =
/// replica`): the tenant exists only as these rows, which no service reads; the bench
/// tenant's rules and history windows do not see them. Every table the allow path plans
/// against holds rows, so no statement's cached plan is one made for an empty table.
async fn seed_history(tdb: &TestDb, n: u32) {
    if n == 0 {
        return;
    }
    let agents = n.div_ceil(10);
    let su = tdb.superuser().await;
    su.batch_execute(&format!(
        "SET session_replication_role = replica;
         INSERT INTO agents (id, tenant_id, name, token_sha256, created_at)
         SELECT md5('history-agent' || a)::uuid, 'history', 'history-' || a,
                md5(a || 't') || md5(a || 'u'), now() - interval '2 days'
         FROM generate_series(1, {agents}) AS a;
         WITH p AS (
            INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                   intent_hash, request_sha256, state, created_at, updated_at, effect,
                                   decided_at, outcome, finished_at)
            SELECT gen_random_uuid(), 'history', md5('history-agent' || (1 + i % {agents}))::uuid,
                   'webhook.post', 'hook', '{{\"body\":{{\"kind\":\"ping\",\"n\":' || i || '}}}}',
                   md5(i::text) || md5(i::text), md5(i || 'i') || md5(i || 'i'),
                   md5(i || 'r') || md5(i || 'r'), 'succeeded', t, t, 'allow', t, 'succeeded', t
            FROM generate_series(1, {n}) AS i,
                 LATERAL (SELECT now() - interval '1 day' + i * interval '1 ms' AS t) AS at
            RETURNING id, agent_id, intent_hash, params_sha256, created_at
         ), g AS (
            INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us,
                                key_id, sig, issued_by, created_at, used_at, used_by)
            SELECT gen_random_uuid(), id, 'history', intent_hash, 1,
                   (extract(epoch FROM created_at + interval '5 min') * 1e6)::int8, 'history-key', '\\x00', 'policy', created_at,
                   created_at, 'executor'
            FROM p
         )
         INSERT INTO audit_events (tenant_id, proposal_id, at, kind, actor, from_state, to_state,
                                   intent_hash, params_sha256, detail)
         SELECT 'history', p.id, p.created_at, e.kind, e.actor, e.from_state, e.to_state,
                p.intent_hash, p.params_sha256, '{{}}'
         FROM p, (VALUES (1, 'proposal.submitted', 'agent', NULL, 'pending'),
                         (2, 'proposal.decided', 'policy', 'pending', 'approved'),
                         (3, 'grant.spent', 'executor', 'approved', 'executing'),
                         (4, 'proposal.executed', 'executor', 'executing', 'succeeded'))
                 AS e(ord, kind, actor, from_state, to_state)
         -- Ids in time order, as the database writes them: the sealer names an event dated
         -- more than 60 s before the one before it.
         ORDER BY p.created_at, e.ord;
         RESET session_replication_role;"
    ))
    .await
    .unwrap_or_else(|e| panic!("--history {n}: {e:?}"));
    // On its own: VACUUM cannot run inside the implicit transaction of a multi-statement
    // batch.
    su.batch_execute("VACUUM ANALYZE")
        .await
        .unwrap_or_else(|e| panic!("--history {n}: VACUUM ANALYZE: {e:?}"));
}

/// Every table's cumulative sequential scans and the rows they read
/// (`pg_stat_user_tables`), by table name; empty when not readable.
async fn seq_scans(c: &tokio_postgres::Client) -> BTreeMap<String, (i64, i64)> {
    table_counters(c, "seq_scan, seq_tup_read").await
}

/// WAL segment files in `pg_wal` (`pg_ls_waldir()`, superuser or `pg_monitor`); `None` when
/// not readable.
async fn wal_segments(c: &tokio_postgres::Client) -> Option<i64> {
    c.query_one(
        "SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'",
        &[],
    )
    .await
    .ok()
    .map(|r| r.get(0))
}

/// Every table's cumulative autovacuum and autoanalyze runs (`pg_stat_user_tables`), by
/// table name; empty when not readable.
async fn maintenance(c: &tokio_postgres::Client) -> BTreeMap<String, (i64, i64)> {
    table_counters(c, "autovacuum_count, autoanalyze_count").await
}

/// Two bigint counters of `pg_stat_user_tables` (`columns`, a fixed list of this file) for
/// every table, by name.
async fn table_counters(c: &tokio_postgres::Client, columns: &str) -> BTreeMap<String, (i64, i64)> {
    c.query(
        &format!("SELECT relname::text, {columns} FROM pg_stat_user_tables"),
        &[],
    )
    .await
    .map(|rows| {
        rows.iter()
            .map(|r| (r.get(0), (r.get(1), r.get(2))))
            .collect()
    })
    .unwrap_or_default()
}

/// `proposals`' cumulative activity in `pg_stat_user_tables`, when readable.
async fn proposal_activity(c: &tokio_postgres::Client) -> Option<report::TableActivity> {
    c.query_opt(
        "SELECT n_tup_upd, n_tup_hot_upd, seq_scan, seq_tup_read FROM pg_stat_user_tables
         WHERE relname = 'proposals'",
        &[],
    )
    .await
    .ok()
    .flatten()
    .map(|r| report::TableActivity {
        updates: r.get(0),
        hot_updates: r.get(1),
        seq_scans: r.get(2),
        seq_rows_read: r.get(3),
    })
}

#[cfg(test)]
mod tests {
    /// A child that exited is seen as exited before it is reaped; a running one is not.
    #[tokio::test]
    async fn an_exited_child_is_seen_before_it_is_reaped() {
        assert!(!super::exited(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        actiond_testkit::wait_until(Duration::from_secs(10), "`true` to exit", || async move {
            super::exited(pid)
        })
        .await;
        child.wait().unwrap();
        assert!(super::exited(pid), "a reaped child is gone");
    }

    use super::*;

    /// `--history` stores its rows on the schema as migrated now (a new required column of
    /// `proposals` fails here, not in someone's benchmark) and leaves them analyzed.
    #[test]
    fn half_rate_follows_a_closed_loop_only() {
        let a = Args::try_parse_from(["bench", "--then-half-rate"]).unwrap();
        assert!(a.then_half_rate && a.rate.is_none());
        let err = Args::try_parse_from(["bench", "--then-half-rate", "--rate", "100"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
    }

    #[test]
    fn replicas_set_every_process_count() {
        let a = Args::try_parse_from(["bench", "--replicas", "4"])
            .unwrap()
            .with_replicas();
        assert_eq!((a.apis, a.policies, a.executors), (4, 4, 4));
        let a = Args::try_parse_from(["bench", "--apis", "2"])
            .unwrap()
            .with_replicas();
        assert_eq!((a.apis, a.policies, a.executors), (2, 1, 2));
    }

    #[tokio::test]
    async fn history_is_stored_and_analyzed() {
        let tdb = TestDb::new().await;
        seed_history(&tdb, 250).await;
        let su = tdb.superuser().await;
        let row = su
            .query_one(
                "SELECT (SELECT count(*) FROM proposals WHERE tenant_id = 'history' AND state = 'succeeded'),
                        (SELECT reltuples FROM pg_class WHERE relname = 'proposals'),
                        (SELECT count(*) FROM grants g JOIN proposals p ON p.id = g.proposal_id
                          WHERE p.tenant_id = 'history' AND g.used_at IS NOT NULL),
                        (SELECT count(*) FROM audit_events WHERE tenant_id = 'history'),
                        (SELECT count(*) FROM agents WHERE tenant_id = 'history'),
                        (SELECT reltuples FROM pg_class WHERE relname = 'grants'),
                        (SELECT reltuples FROM pg_class WHERE relname = 'audit_events')",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(row.get::<_, i64>(0), 250);
        assert_eq!(row.get::<_, f32>(1), 250.0);
        assert_eq!(row.get::<_, i64>(2), 250, "one spent grant each");
        assert_eq!(row.get::<_, i64>(3), 1000, "four audit events each");
        assert_eq!(row.get::<_, i64>(4), 25, "one agent per 10 proposals");
        assert_eq!(row.get::<_, f32>(5), 250.0);
        assert_eq!(row.get::<_, f32>(6), 1000.0);
    }
}
