//! Identity-provider clocks and step-up, over real processes: `actiond api`, `policy`,
//! `executor` and `web` (OIDC against the misbehaving provider `web/e2e/fake-idp.mjs`).
//!
//! An ID token whose `auth_time`, `iat` or `nbf` is impossible (hours ahead, in milliseconds or
//! microseconds, before 1970, fractional; `iat`/`nbf` ahead) is refused at sign-in naming the
//! claim, and no session is stored. A sign-in started with OIDC `max_age` (a step-up) is
//! refused when the provider ignores it: an `auth_time` older than `max_age` before the login
//! began, or none at all (OpenID Connect Core 1.0 §3.1.2.1). A session whose stored `auth_time` lies in the future (a
//! row written before the sign-in check existed) never counts as a recent sign-in for a
//! handler's `reauth_within`: the Approve is refused (`auth_time_future`), nothing is granted or
//! executed. No code, access token, ID token, nonce, state or client secret reaches the web
//! service's log, whatever failed.

use crate::approval_rules::{Person, Web, grants, refusals};
use crate::support::{Options, Stack, TENANT, refund};
use actiond_testkit::Service;
use reqwest::StatusCode;
use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);
const CLIENT_SECRET: &str = "idp-clock-client-secret-5c0f7e1a9b3d";

/// `node web/e2e/fake-idp.mjs`, killed when dropped.
struct FakeIdp {
    child: Child,
    issuer: String,
    http: reqwest::Client,
}

impl FakeIdp {
    fn start() -> Self {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../web/e2e/fake-idp.mjs")
            .canonicalize()
            .unwrap();
        let mut child = Command::new("node")
            .arg(&script)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node must be installed");
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&first)
            .unwrap_or_else(|e| panic!("fake-idp.mjs did not start ({e}): {first:?}"));
        Self {
            child,
            issuer: v["issuer"].as_str().unwrap().to_owned(),
            http: reqwest::Client::new(),
        }
    }

    async fn mode(&self, m: &str) {
        let r = self
            .http
            .get(format!("{}/mode?m={m}", self.issuer))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }

    /// Every code, access token and ID token it handed out.
    async fn issued(&self) -> Vec<String> {
        let v: Vec<serde_json::Value> = self
            .http
            .get(format!("{}/issued", self.issuer))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v.iter()
            .flat_map(|o| o.as_object().unwrap().values())
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for FakeIdp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `actiond web` with OIDC against `issuer` on a port picked here (the redirect URI is
/// derived from the public URL, so it must be known before the start).
async fn start_web(s: &mut Stack, issuer: &str) -> Web {
    start_web_with(s, issuer, Vec::new()).await
}

/// [`start_web`] with `extra` variables in the web process's environment.
async fn start_web_with(s: &mut Stack, issuer: &str, extra: Vec<(&'static str, String)>) -> Web {
    std::fs::write(s.keys.web_dir.join("oidc_client_secret"), CLIENT_SECRET).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let mut env = vec![
        ("DATABASE_URL", s.tdb.role_url("web").await),
        ("ACTIOND_WEB_LISTEN", format!("127.0.0.1:{port}")),
        ("ACTIOND_WEB_PUBLIC_URL", url.clone()),
        (
            "ACTIOND_WEB_CREDENTIALS_DIR",
            s.keys.web_dir.display().to_string(),
        ),
        ("ACTIOND_WEB_GRANT_KEY_ID", "web-1".into()),
        ("ACTIOND_WEB_OIDC_ISSUER", issuer.to_owned()),
        ("ACTIOND_WEB_OIDC_CLIENT_ID", "actiond-idp-clocks".into()),
        ("ACTIOND_WEB_OIDC_SCOPES", "email groups".into()),
    ];
    env.extend(extra);
    let web = Service::spawn("web", "web", &[], &env, &s.logs);
    s.services.push(web);
    let svc_index = s.services.len() - 1;
    let bound = s.services[svc_index].url("http").await;
    assert_eq!(bound, url);
    Web { url, svc_index }
}

/// One OIDC sign-in through the fake IdP in `mode`, in a fresh cookie jar: the callback's
/// (status, Location, body), the browser, and the `state` and `nonce` the web app sent.
struct SignIn {
    status: StatusCode,
    location: String,
    body: String,
    person: Person,
    sent: Vec<String>,
}

/// The login started with OIDC `max_age` seconds when given.
async fn sign_in_with(web: &Web, idp: &FakeIdp, mode: &str, max_age: Option<u64>) -> SignIn {
    idp.mode(mode).await;
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let location = |r: &reqwest::Response| {
        r.headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let extra = max_age.map(|m| format!("&max_age={m}")).unwrap_or_default();
    let r = http
        .get(format!("{}/login/oidc?next=%2Fqueue{extra}", web.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER, "{mode}: start");
    let authorize = reqwest::Url::parse(&location(&r)).unwrap();
    if let Some(m) = max_age {
        assert!(
            authorize
                .query_pairs()
                .any(|(k, v)| k == "max_age" && v == m.to_string()),
            "{authorize}"
        );
    }
    let sent: Vec<String> = authorize
        .query_pairs()
        .filter(|(k, _)| k == "state" || k == "nonce")
        .map(|(_, v)| v.into_owned())
        .collect();
    assert_eq!(sent.len(), 2, "{authorize}");
    let r = http.get(authorize).send().await.unwrap();
    let callback = location(&r);
    assert!(callback.starts_with(&web.url), "{mode}: {callback}");
    let r = http.get(callback).send().await.unwrap();
    SignIn {
        status: r.status(),
        location: location(&r),
        body: r.text().await.unwrap(),
        person: Person {
            http,
            subject: "eve".into(),
        },
        sent,
    }
}

async fn eve_sessions(s: &Stack) -> i64 {
    let c = s.tdb.db.client().await.unwrap();
    c.query_one(
        "SELECT count(*) FROM web_sessions WHERE subject = 'eve'",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// Whether `log` holds `secret` as text, or as the decimal byte list a `{:?}` of its bytes
/// prints (how a response body in a debug-printed error shows).
fn holds(log: &str, secret: &str) -> bool {
    let bytes: Vec<String> = secret.bytes().map(|b| b.to_string()).collect();
    log.contains(secret) || log.contains(&bytes.join(", "))
}

/// The parts of a secret worth looking for: the whole, and for a JWT its payload and its
/// signature (its header is the same in every token and says nothing).
fn secret_parts(secret: &str) -> Vec<&str> {
    let mut parts = vec![secret];
    let segs: Vec<&str> = secret.split('.').collect();
    if segs.len() == 3 {
        parts.extend_from_slice(&segs[1..]);
    }
    parts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_provider_clock_makes_no_sign_in_fresh_and_no_token_reaches_the_log() {
    let mut s = Stack::with("idp_clocks", Options::default()).await;
    let idp = FakeIdp::start();
    let doc = TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "    max_amount: 100000\n",
            "    max_amount: 100000\n    reauth_within: 10m\n",
        )
        .replace(
            "  subjects: [alice, bob]",
            "  claim: groups\n  values: [acme-approvers]",
        );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    let web = start_web(&mut s, &idp.issuer).await;
    let id = s.propose(&refund("pi_idp_clock", 12000)).await;
    s.wait_state(id, "escalated", T).await;

    // Impossible times, and the classic refusals: refused at sign-in, naming the claim and
    // the rule; no session is stored.
    let mut sent = Vec::new();
    for (mode, max_age, named) in [
        ("auth_time_future", None, "auth_time: 10800 s in the future"),
        ("auth_time_ms", None, "auth_time: "),
        ("auth_time_us", None, "as UTC datetime (in seconds)"),
        ("auth_time_negative", None, "auth_time: "),
        ("auth_time_fraction", None, "auth_time: not a JSON integer"),
        ("iat_future", None, "iat: 3600 s in the future"),
        ("nbf_future", None, "nbf: 3600 s in the future"),
        ("wrong_nonce", None, "nonce mismatch"),
        ("wrong_aud", None, "Invalid audiences"),
        // A step-up sign-in (max_age 10 minutes) answered with an hour-old sign-in, or with
        // no auth_time: the provider ignored max_age.
        (
            "auth_time_old",
            Some(600),
            "auth_time (the identity provider ignored max_age): ",
        ),
        (
            "no_auth_time",
            Some(600),
            "auth_time: missing although the sign-in was requested with max_age",
        ),
    ] {
        let r = sign_in_with(&web, &idp, mode, max_age).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{mode}: {}", r.body);
        assert!(
            r.body.contains(named) || r.body.contains(&a_second_later(named)),
            "{mode}: {}",
            r.body
        );
        assert!(
            r.body.contains("Nothing was signed in"),
            "{mode}: {}",
            r.body
        );
        if mode.starts_with("auth_time_") && mode != "auth_time_us" {
            let rule = match mode {
                "auth_time_negative" => "older than",
                "auth_time_old" => "s old, older than the 660 s allowed",
                "auth_time_fraction" => "whole seconds",
                _ => "more than the 60 s clock skew allowed",
            };
            assert!(r.body.contains(rule), "{mode}: {}", r.body);
        }
        sent.extend(r.sent);
        assert_eq!(eve_sessions(&s).await, 0, "{mode} stored a session");
    }
    assert_eq!(
        (s.state(id).await, grants(&s, id).await),
        ("escalated".into(), 0)
    );

    // The control: a good token signs eve in, also when the login asked for max_age.
    let good = sign_in_with(&web, &idp, "good", Some(600)).await;
    assert_eq!(
        (good.status, good.location.as_str()),
        (StatusCode::SEE_OTHER, "/queue"),
        "{}",
        good.body
    );
    sent.extend(good.sent);
    let eve = good.person;

    // A stored auth_time in the future (rows written before the sign-in check): hours ahead,
    // and milliseconds read as seconds. The Approve never counts; the rule is named.
    let c = s.tdb.db.client().await.unwrap();
    for ahead in [
        "now() + interval '3 hours'",
        "to_timestamp(extract(epoch FROM now()) * 1000)",
    ] {
        c.execute(
            &format!("UPDATE web_sessions SET auth_time = {ahead} WHERE subject = 'eve'"),
            &[],
        )
        .await
        .unwrap();
        let (st, loc, body) = web.decide(&eve, id, "approve", &[]).await;
        assert_eq!(st, StatusCode::SEE_OTHER, "{ahead}: {body}");
        assert!(
            loc.starts_with("/login/oidc?next=%2Fp%2F") && loc.ends_with("&max_age=600"),
            "{ahead}: sent to sign in again, got {loc}"
        );
        assert_eq!(
            (s.state(id).await, grants(&s, id).await),
            ("escalated".into(), 0)
        );
    }
    assert_eq!(
        refusals(&s, id).await,
        ["auth_time_future", "auth_time_future"]
    );

    // The session row itself dated hours ahead (a writer of the sessions table): its claims
    // would stay "fresh" past max_claims_age until then. Refused, and the rule is named.
    c.execute(
        "UPDATE web_sessions SET auth_time = now() - interval '1 minute',
                                 created_at = now() + interval '3 hours' WHERE subject = 'eve'",
        &[],
    )
    .await
    .unwrap();
    let (st, loc, body) = web.decide(&eve, id, "approve", &[]).await;
    assert_eq!(st, StatusCode::SEE_OTHER, "{body}");
    assert!(
        loc.starts_with("/login/oidc?next=%2Fp%2F"),
        "sent to sign in again, got {loc}"
    );
    assert_eq!(
        (s.state(id).await, grants(&s, id).await),
        ("escalated".into(), 0)
    );
    assert_eq!(
        refusals(&s, id).await,
        ["auth_time_future", "auth_time_future", "claims_future"]
    );
    c.execute(
        "UPDATE web_sessions SET created_at = now() WHERE subject = 'eve'",
        &[],
    )
    .await
    .unwrap();
    s.sentinel().await;
    assert!(s.calls().is_empty(), "nothing ran");

    // A sign-in a minute ago counts: the same session approves and the executor runs it.
    c.execute(
        "UPDATE web_sessions SET auth_time = now() - interval '1 minute' WHERE subject = 'eve'",
        &[],
    )
    .await
    .unwrap();
    let (st, loc, body) = web.decide(&eve, id, "approve", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{id}?result=approved")),
        "{body}"
    );
    s.wait_state(id, "succeeded", T).await;
    assert_eq!(s.calls().len(), 1);

    // Nothing secret in the web service's log, whatever failed: no code, access token or ID
    // token the IdP handed out, no state or nonce, not the client secret.
    let issued = idp.issued().await;
    assert!(issued.len() >= 20, "{issued:?}");
    let log = s.services[web.svc_index].log_text();
    assert!(log.contains("OIDC login refused"), "{log}");
    for secret in issued
        .iter()
        .chain(&sent)
        .map(String::as_str)
        .chain([CLIENT_SECRET])
    {
        for part in secret_parts(secret) {
            assert!(!holds(&log, part), "the web log holds {part:?}:\n{log}");
        }
    }
}

/// `"auth_time: 10800 s in the future"` as it reads when the check ran in the second after the
/// provider stamped the token (`10799 s`); other texts unchanged.
fn a_second_later(named: &str) -> String {
    let Some((claim, rest)) = named.split_once(": ") else {
        return named.to_owned();
    };
    let Some((secs, tail)) = rest.split_once(" s in the future") else {
        return named.to_owned();
    };
    match secs.parse::<i64>() {
        Ok(n) => format!("{claim}: {} s in the future{tail}", n - 1),
        Err(_) => named.to_owned(),
    }
}

/// The web app's OIDC client (discovery, JWKS, the token exchange with the client secret)
/// does not follow a proxy from its environment: with every proxy variable pointing at a
/// trap, a sign-in against the provider completes and the trap sees no connection. A proxy
/// that answered these requests would see the client secret and the code, and could serve an
/// `http` provider's keys of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sign_in_does_not_follow_a_proxy_from_the_environment() {
    let trap = crate::wire::ProxyTrap::start().await;
    let mut s = Stack::with(
        "idp_proxy",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let idp = FakeIdp::start();
    let doc = TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "  subjects: [alice, bob]",
            "  claim: groups\n  values: [acme-approvers]",
        );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    let web = start_web_with(&mut s, &idp.issuer, trap.env()).await;
    let good = sign_in_with(&web, &idp, "good", None).await;
    assert_eq!(
        (good.status, good.location.as_str()),
        (StatusCode::SEE_OTHER, "/queue"),
        "{}",
        good.body
    );
    assert_eq!(eve_sessions(&s).await, 1);
    assert_eq!(
        trap.seen.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the web app's OIDC client connected to the proxy from its environment"
    );
}
