//! What travels on the wire: no service follows a proxy from its environment around its own
//! destination rules, and the libpq environment variables an operator sets are honoured or
//! refused at start, never dropped.

use crate::support::{Options, Stack, TENANT, refund};
use actiond_testkit::{Service, TestDb, actiond_bin, eventually};
use axum::Json;
use serde_json::{Value, json};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// A loopback "proxy" that counts the connections it accepts and answers none.
pub(crate) struct ProxyTrap {
    url: String,
    pub(crate) seen: Arc<AtomicUsize>,
}

impl ProxyTrap {
    pub(crate) async fn start() -> Self {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        tokio::spawn(async move {
            while let Ok((c, _)) = l.accept().await {
                s.fetch_add(1, Ordering::SeqCst);
                drop(c);
            }
        });
        Self { url, seen }
    }

    /// Every proxy variable reqwest reads, pointing here.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ]
        .into_iter()
        .map(|k| (k, self.url.clone()))
        .chain([("NO_PROXY", String::new()), ("no_proxy", String::new())])
        .collect()
    }
}

/// The executor (refund and preview), the policy worker (classifier) and the web notifier
/// (chat webhook) run with every proxy variable pointing at a trap: each request reaches its
/// own destination, and the trap sees no connection at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_in_the_environment_are_not_followed() {
    let trap = ProxyTrap::start().await;
    let mut s = Stack::with(
        "wire_proxies",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    // A classifier that agrees with the rules, counting its calls.
    let asked = Arc::new(AtomicUsize::new(0));
    let a = asked.clone();
    let app = axum::Router::new().route(
        "/classify",
        axum::routing::post(move |Json(req): Json<Value>| {
            a.fetch_add(1, Ordering::SeqCst);
            async move { Json(json!({"effect": req["effect"]})) }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let classifier = format!("http://{}/classify", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    let doc = TENANT
        .replace(
            "  escalation_ttl: 1h\n",
            "  escalation_ttl: 1h\n  classifier: {endpoint: guard, timeout: 2s}\n",
        )
        .replace("approvers:\n", "notify:\n  webhook: chat\napprovers:\n")
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook");
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    std::fs::write(
        s.keys.web_dir.join("acme.chat"),
        format!("{}/chat-hook", s.recv.url),
    )
    .unwrap();

    let mut policy_env = trap.env();
    policy_env.push(("ACTIOND_POLICY_CLASSIFIERS", format!("guard={classifier}")));
    s.start_policy_with(policy_env).await;
    let mut exec_env = s.executor_env("exec-wire").await;
    exec_env.extend(trap.env());
    let svc = Service::spawn("executor", "exec-wire", &[], &exec_env, &s.logs);
    s.services.push(svc);
    let mut web_env = vec![
        ("DATABASE_URL", s.tdb.role_url("web").await),
        ("ACTIOND_WEB_LISTEN", "127.0.0.1:0".into()),
        (
            "ACTIOND_WEB_CREDENTIALS_DIR",
            s.keys.web_dir.display().to_string(),
        ),
        ("ACTIOND_WEB_GRANT_KEY_ID", "web-1".into()),
        ("ACTIOND_WEB_DEV_LOGIN", "true".into()),
        ("ACTIOND_WEB_NOTIFY_INTERVAL", "1s".into()),
        ("ACTIOND_WEB_NOTIFY_ALLOW_PRIVATE", "true".into()),
    ];
    web_env.extend(trap.env());
    let svc = Service::spawn("web", "web-wire", &[], &web_env, &s.logs);
    s.services.push(svc);

    // Allowed by the rules (the classifier agrees): the executor refunds.
    let small = s.propose(&refund("pi_wire_small", 1000)).await;
    s.wait_state(small, "succeeded", T).await;
    // Escalated: the executor previews it, the web notifier posts to the chat webhook.
    let large = s.propose(&refund("pi_wire_large", 9000)).await;
    s.wait_state(large, "escalated", T).await;
    let recv = s.recv.clone();
    eventually(T, "the chat notice", || {
        let r = recv.clone();
        async move {
            r.requests()
                .iter()
                .any(|q| q.path == "/chat-hook")
                .then_some(())
        }
    })
    .await;
    let paths: Vec<String> = s.recv.requests().iter().map(|q| q.path.clone()).collect();
    assert!(paths.iter().any(|p| p == "/v1/refunds"), "{paths:?}");
    assert_eq!(asked.load(Ordering::SeqCst), 2, "the classifier saw both");
    assert_eq!(
        trap.seen.load(Ordering::SeqCst),
        0,
        "a service connected to the proxy from its environment"
    );
}

/// Runs `actiond args…` with only `envs` of the libpq variables; (exit code, stderr).
fn run(args: &[&str], envs: &[(&str, String)]) -> (i32, String) {
    let mut cmd = Command::new(actiond_bin());
    cmd.args(args)
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("RUST_LOG");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("PG")) {
        cmd.env_remove(k);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `PGSSLMODE=verify-full` without a root that signed the test server's certificate stops
/// the process at start, naming the mode and where it came from; a variable actiond cannot
/// honour (`PGSERVICE`) stops it naming the variable; and the ones it honours fill in what
/// `DATABASE_URL` leaves out (user and database from `PGUSER` and `PGDATABASE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libpq_variables_are_honoured_or_refused_at_start() {
    let t = TestDb::new().await;
    let server = url::Url::parse(&t.url).unwrap();
    let home = std::env::temp_dir().join(format!("actiond-wire-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&home).unwrap();
    let base = [
        ("HOME", home.display().to_string()),
        ("DATABASE_URL", t.url.clone()),
        ("ACTIOND_API_LISTEN", "127.0.0.1:0".into()),
        ("ACTIOND_API_ADMIN_LISTEN", "127.0.0.1:0".into()),
    ];
    let with = |extra: &[(&'static str, String)]| {
        let mut v: Vec<(&str, String)> = base.to_vec();
        v.extend(extra.iter().cloned());
        v
    };

    // verify-full with no trusted root at all: `actiond api` stops at start.
    let (code, err) = run(&["api"], &with(&[("PGSSLMODE", "verify-full".into())]));
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("sslmode=verify-full (from PGSSLMODE)") && err.contains("no trusted roots"),
        "{err}"
    );
    // verify-full with a root that did not sign the server's certificate: `actiond migrate`
    // (which connects at once) stops with the refusal.
    let ca = home.join("other-ca.pem");
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    std::fs::write(&ca, params.self_signed(&key).unwrap().pem()).unwrap();
    let (code, err) = run(
        &["migrate"],
        &with(&[
            ("PGSSLMODE", "verify-full".into()),
            ("PGSSLROOTCERT", ca.display().to_string()),
        ]),
    );
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("sslmode=verify-full (from PGSSLMODE)")
            && err.contains("not signed by a trusted root"),
        "{err}"
    );
    // Not honoured: refused at start, naming the variable.
    for (var, value) in [("PGSERVICE", "prod"), ("PGPASSFILE", "/root/.pgpass")] {
        let (code, err) = run(&["api"], &with(&[(var, value.into())]));
        assert_ne!(code, 0, "{var}: {err}");
        assert!(err.contains(&format!("{var} is set")), "{var}: {err}");
    }
    // Honoured: DATABASE_URL names only the server; PGUSER and PGDATABASE the rest.
    let bare = format!(
        "postgres://{}:{}",
        server.host_str().unwrap(),
        server.port().unwrap_or(5432)
    );
    let mut env = with(&[
        ("PGUSER", server.username().to_owned()),
        ("PGDATABASE", t.name.clone()),
        ("PGAPPNAME", "wire-test".into()),
    ]);
    env.retain(|(k, _)| *k != "DATABASE_URL");
    env.push(("DATABASE_URL", bare));
    let (code, err) = run(&["migrate"], &env);
    assert_eq!(code, 0, "{err}");
    let _ = std::fs::remove_dir_all(&home);
}
