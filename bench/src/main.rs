//! `actiond-bench`: measures the gateway over real processes on a fresh database.
//!
//! ```text
//! cargo run --release -p actiond-bench -- --proposals 5000 --concurrency 64
//! ```
//!
//! Scenarios:
//! - `allow`: agents submit allowed `webhook.post` proposals; policy approves and signs,
//!   executors verify, spend and POST to a local receiver. Reports submit latency (HTTP
//!   round trip of `POST /v1/proposals`), end-to-end latency (created → succeeded, database
//!   clock) and end-to-end throughput (all proposals succeeded / wall time).
//! - `submit`: submission only (escalating proposals, no executor work): API + Postgres.
//!
//! Speed is measured here, never asserted in tests.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use actiond_testkit::{Keys, Receiver, Service, TestDb, agent, eventually, free_port, log_dir};
use clap::Parser;
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
struct Args {
    /// Proposals to submit.
    #[arg(long, default_value_t = 3000)]
    proposals: usize,
    /// Concurrent HTTP clients.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Executor processes.
    #[arg(long, default_value_t = 2)]
    executors: usize,
    /// Policy worker processes.
    #[arg(long, default_value_t = 1)]
    policies: usize,
    /// Scenario: allow or submit.
    #[arg(long, default_value = "allow")]
    scenario: String,
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

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let tdb = TestDb::new().await;
    let keys = Keys::generate();
    let recv = Receiver::start(Duration::from_secs(1)).await;
    actiond_store::tenants::apply(&tdb.db, &DOC.replace("RECEIVER", &recv.url), "bench")
        .await
        .unwrap();
    let (_, token) = agent(&tdb.db, "bench", "bench-bot", None).await;
    let logs = log_dir("bench");
    let port = free_port();
    let mut services = vec![Service::spawn(
        "api",
        "api",
        &[],
        &[
            ("DATABASE_URL", tdb.role_url("api").await),
            ("ACTIOND_API_LISTEN", format!("127.0.0.1:{port}")),
            ("ACTIOND_API_ADMIN_LISTEN", "127.0.0.1:0".into()),
            ("ACTIOND_API_POOL_SIZE", "32".into()),
            ("RUST_LOG", "warn".into()),
        ],
        &logs,
    )];
    let api = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()
        .unwrap();
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
    let allow = args.scenario == "allow";
    if allow {
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
    }
    let kind = if allow { "ping" } else { "review" };
    let started = Instant::now();
    let per_client = args.proposals.div_ceil(args.concurrency);
    let mut tasks = Vec::new();
    for c in 0..args.concurrency {
        let (http, api, token) = (http.clone(), api.clone(), token.clone());
        let n = per_client.min(args.proposals.saturating_sub(c * per_client));
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n);
            for i in 0..n {
                let body = format!(r#"{{"action":"webhook.post","params":{{"body":{{"kind":"{kind}","c":{c},"i":{i}}}}}}}"#);
                let t = Instant::now();
                let r = http
                    .post(format!("{api}/v1/proposals"))
                    .bearer_auth(&token)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 202, "{}", r.text().await.unwrap_or_default());
                let _ = r.bytes().await;
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            lat
        }));
    }
    let mut submit_ms = Vec::new();
    for t in futures_util::future::join_all(tasks).await {
        submit_ms.extend(t.unwrap());
    }
    let submit_secs = started.elapsed().as_secs_f64();
    submit_ms.sort_by(f64::total_cmp);
    println!("scenario          {}", args.scenario);
    println!("proposals         {}", args.proposals);
    println!(
        "concurrency       {} HTTP clients; {} policy, {} executor processes",
        args.concurrency, args.policies, args.executors
    );
    println!(
        "submit            {:.0} proposals/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.proposals as f64 / submit_secs,
        pct(&submit_ms, 0.5),
        pct(&submit_ms, 0.99),
        submit_ms.last().copied().unwrap_or_default()
    );
    if allow {
        let c = tdb.db.client().await.unwrap();
        let total = args.proposals as i64;
        eventually(Duration::from_secs(600), "all proposals succeeded", || {
            let c = &c;
            async move {
                let n: i64 = c
                    .query_one(
                        "SELECT count(*) FROM proposals WHERE state = 'succeeded'",
                        &[],
                    )
                    .await
                    .unwrap()
                    .get(0);
                (n == total).then_some(())
            }
        })
        .await;
        let e2e_secs = started.elapsed().as_secs_f64();
        let mut e2e_ms: Vec<f64> = c
            .query(
                "SELECT extract(epoch FROM finished_at - created_at)::float8 * 1000 FROM proposals",
                &[],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        e2e_ms.sort_by(f64::total_cmp);
        println!(
            "allow path        {:.0} proposals/s end to end (submitted, decided, signed, spent, executed, recorded)",
            args.proposals as f64 / e2e_secs
        );
        println!(
            "end-to-end        latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (created → succeeded, database clock)",
            pct(&e2e_ms, 0.5),
            pct(&e2e_ms, 0.99),
            e2e_ms.last().copied().unwrap_or_default()
        );
        let stage = |sql: &'static str| {
            let c = &c;
            async move {
                let mut v: Vec<f64> = c
                    .query(sql, &[])
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                v.sort_by(f64::total_cmp);
                v
            }
        };
        let policy_ms = stage(
            "SELECT extract(epoch FROM decided_at - created_at)::float8 * 1000 FROM proposals",
        )
        .await;
        let exec_ms = stage(
            "SELECT extract(epoch FROM finished_at - decided_at)::float8 * 1000 FROM proposals",
        )
        .await;
        println!(
            "stages            created → decided p50 {:.1} ms p99 {:.1} ms; decided → finished p50 {:.1} ms p99 {:.1} ms",
            pct(&policy_ms, 0.5),
            pct(&policy_ms, 0.99),
            pct(&exec_ms, 0.5),
            pct(&exec_ms, 0.99)
        );
        assert_eq!(
            recv.count(),
            args.proposals,
            "each proposal executed exactly once"
        );
    }
    drop(services);
}
