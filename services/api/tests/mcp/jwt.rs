//! Agents with workload JWTs: a real authorization server (oidc-provider issuing RFC 9068 JWT
//! access tokens to client-credentials clients, `services/api/e2e/issuer.mjs`) and two issuers
//! run here (JWK Sets served over HTTP, P-256 keys generated at run time) for the tokens a real
//! issuer would never sign: the negative table. Every refusal is a 401 problem+json on REST and
//! on `/mcp`, and nothing is stored.

use crate::support::*;
use actiond_api::jwt::Verifier;
use actiond_api::jwt::config::IssuersConfig;
use axum::Router;
use axum::response::IntoResponse as _;
use axum::routing::get;
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// The audience every trusted issuer is configured with.
const AUDIENCE: &str = "https://actiond.test";
/// The user the delegating client acts for.
const JANE: &str = "jane@customer.example";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A P-256 signing key generated at run time, with its public JWK.
struct TestKey {
    kid: String,
    pkcs8: Vec<u8>,
    jwk: Value,
}

impl TestKey {
    fn generate(kid: &str) -> Self {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
        let point = pair.public_key().as_ref();
        let jwk = json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": kid,
            "x": b64(&point[1..33]), "y": b64(&point[33..65])});
        Self {
            kid: kid.into(),
            pkcs8,
            jwk,
        }
    }

    /// Signs `claims` with ES256 under `kid` (this key's unless overridden).
    fn sign(&self, claims: &Value, kid: Option<&str>) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.unwrap_or(&self.kid).to_owned());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&self.pkcs8)).unwrap()
    }
}

/// An issuer run by the test: its JWK Set at `{url}/jwks`, counting fetches.
struct TestIssuer {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
    /// Milliseconds each JWKS answer is held back.
    delay_ms: Arc<AtomicUsize>,
    /// When set, the JWKS endpoint answers 503 (the issuer is down).
    down: Arc<std::sync::atomic::AtomicBool>,
}

impl TestIssuer {
    #[expect(
        clippy::disallowed_methods,
        reason = "an issuer that answers late: the delay is the fixture"
    )]
    async fn start(keys: &[&TestKey]) -> Self {
        let set = Arc::new(Mutex::new(
            keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>(),
        ));
        let fetches = Arc::new(AtomicUsize::new(0));
        let delay_ms = Arc::new(AtomicUsize::new(0));
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, f, d, dn) = (set.clone(), fetches.clone(), delay_ms.clone(), down.clone());
        let app = Router::new().route(
            "/jwks",
            get(move || {
                f.fetch_add(1, Ordering::SeqCst);
                let keys = s.lock().unwrap().clone();
                let delay = Duration::from_millis(d.load(Ordering::SeqCst) as u64);
                let down = dn.load(Ordering::SeqCst);
                async move {
                    tokio::time::sleep(delay).await;
                    if down {
                        return axum::http::StatusCode::SERVICE_UNAVAILABLE.into_response();
                    }
                    axum::Json(json!({ "keys": keys })).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url,
            keys: set,
            fetches,
            delay_ms,
            down,
        }
    }

    fn claims(&self, sub: &str) -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        json!({"iss": self.url, "sub": sub, "aud": AUDIENCE, "iat": now, "exp": now + 300})
    }
}

/// The oidc-provider child process and its issuer URL.
struct OidcIssuer {
    _child: tokio::process::Child,
    issuer: String,
}

impl OidcIssuer {
    async fn start() -> Self {
        require_node_client();
        let module = e2e_dir().join("node_modules/oidc-provider/package.json");
        assert!(
            module.exists(),
            "oidc-provider is not installed; run: npm ci --prefix services/api/e2e"
        );
        let mut child = Command::new("node")
            .arg("issuer.mjs")
            .current_dir(e2e_dir())
            .env("AUDIENCE", AUDIENCE)
            .env("DELEGATED_USER", JANE)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node is required (apt-get install nodejs)");
        // What the issuer says on stderr, kept for the failure message (read all along, so a
        // full pipe never stalls it).
        let said = Arc::new(Mutex::new(String::new()));
        let mut errors = BufReader::new(child.stderr.take().unwrap()).lines();
        let keep = said.clone();
        tokio::spawn(async move {
            while let Ok(Some(l)) = errors.next_line().await {
                let mut k = keep.lock().unwrap();
                k.push_str(&l);
                k.push('\n');
            }
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let started = std::time::Instant::now();
        let line = match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!(
                "issuer.mjs did not start ({other:?} after {:?}); its stderr:\n{}",
                started.elapsed(),
                said.lock().unwrap()
            ),
        };
        let ready: Value = serde_json::from_str(&line).unwrap();
        Self {
            _child: child,
            issuer: ready["issuer"].as_str().unwrap().to_owned(),
        }
    }

    /// A client-credentials access token for `client` (RFC 6749 §4.4, resource RFC 8707).
    async fn token(&self, client: &str) -> String {
        let resp: Value = reqwest::Client::new()
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(format!("{client}-secret")))
            .form(&[("grant_type", "client_credentials"), ("resource", AUDIENCE)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        resp["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access token: {resp}"))
            .to_owned()
    }
}

fn issuers_yaml(a: &TestIssuer, b: &TestIssuer, oidc: &str) -> String {
    format!(
        "jwks_refresh_interval: 2s
issuers:
  - issuer: {a}
    jwks_uri: {a}/jwks
    audience: {AUDIENCE}
    algorithms: [ES256]
    max_token_lifetime: 10m
  - issuer: {b}
    jwks_uri: {b}/jwks
    audience: {AUDIENCE}
    algorithms: [ES256]
    max_token_lifetime: 10m
  - issuer: {oidc}
    discovery: true
    audience: {AUDIENCE}
    algorithms: [ES256]
    max_token_lifetime: 10m
",
        a = a.url,
        b = b.url
    )
}

/// The world of these tests: the api trusting issuers A, B and the oidc-provider, and four
/// JWT agents: `jwt-bot` (A, `spiffe://acme/jwt-bot`), `b-bot` (B), `oidc-bot` and
/// `delegating-bot` (the oidc-provider's clients).
struct World {
    env: Env,
    a: TestIssuer,
    a_key: TestKey,
    b: TestIssuer,
    b_key: TestKey,
    oidc: OidcIssuer,
}

impl World {
    async fn start() -> Self {
        let a_key = TestKey::generate("a-1");
        let b_key = TestKey::generate("b-1");
        let a = TestIssuer::start(&[&a_key]).await;
        let b = TestIssuer::start(&[&b_key]).await;
        let oidc = OidcIssuer::start().await;
        let config = IssuersConfig::from_yaml(&issuers_yaml(&a, &b, &oidc.issuer)).unwrap();
        let env = Env::start_with(|s| s.with_jwt(Verifier::new(config).unwrap())).await;
        for (name, iss, sub) in [
            ("jwt-bot", a.url.as_str(), "spiffe://acme/jwt-bot"),
            ("b-bot", b.url.as_str(), "spiffe://acme/b-bot"),
            ("oidc-bot", oidc.issuer.as_str(), "support-bot"),
            ("delegating-bot", oidc.issuer.as_str(), "delegating-bot"),
        ] {
            actiond_store::agents::create_workload(&env.db, "acme", name, None, iss, sub)
                .await
                .unwrap();
        }
        Self {
            env,
            a,
            a_key,
            b,
            b_key,
            oidc,
        }
    }

    /// `POST /v1/proposals` with `token`; returns the status, `WWW-Authenticate` and the body.
    async fn rest(&self, token: &str, payment: &str) -> (u16, String, Value) {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/proposals", self.env.base))
            .bearer_auth(token)
            .json(&refund_args(payment))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let auth = resp
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        if status == 401 {
            assert_eq!(
                resp.headers()["content-type"],
                "application/problem+json",
                "401s are problem+json"
            );
        }
        (status, auth, resp.json().await.unwrap())
    }

    /// `propose_action` over `/mcp` with `token`.
    async fn mcp(&self, token: &str, payment: &str) -> (u16, Value) {
        let call = RawCall {
            base: &self.env.base,
            token: Some(token),
            host: None,
            origin: None,
        };
        let (status, _, body) = call
            .post(&tools_call(1, "propose_action", refund_args(payment)))
            .await;
        (status, body)
    }

    async fn agent_of(&self, proposal: &str) -> String {
        let id = uuid::Uuid::parse_str(proposal).unwrap();
        self.env
            .sql
            .query_one(
                "SELECT a.name FROM proposals p JOIN agents a ON a.id = p.agent_id WHERE p.id = $1",
                &[&id],
            )
            .await
            .unwrap()
            .get(0)
    }
}

fn unsigned(claims: &Value) -> String {
    format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims.to_string().as_bytes())
    )
}

/// HS256 keyed with the issuer's *public* key (the algorithm-confusion attack).
fn hs256_with_public_key(key: &TestKey, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(key.kid.clone());
    let secret = key.jwk.to_string();
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_issuers_access_tokens_identify_agents_on_rest_and_mcp() {
    let w = World::start().await;
    // A client-credentials JWT access token from oidc-provider, on REST.
    let token = w.oidc.token("support-bot").await;
    let (status, _, body) = w.rest(&token, "pi_oidc_rest").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        w.agent_of(body["proposal_id"].as_str().unwrap()).await,
        "oidc-bot"
    );
    // The same token on /mcp.
    let (status, body) = w.mcp(&token, "pi_oidc_mcp").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    let id = body["result"]["structuredContent"]["proposal_id"]
        .as_str()
        .unwrap();
    assert_eq!(w.agent_of(id).await, "oidc-bot");

    // RFC 8693 delegation: the token's sub is the user, act.sub the agent.
    let delegated = w.oidc.token("delegating-bot").await;
    let (status, _, body) = w.rest(&delegated, "pi_for_jane").await;
    assert_eq!(status, 202, "{body}");
    let id = uuid::Uuid::parse_str(body["proposal_id"].as_str().unwrap()).unwrap();
    assert_eq!(w.agent_of(&id.to_string()).await, "delegating-bot");
    let row = w
        .env
        .sql
        .query_one(
            &format!(
                "SELECT {} FROM proposals p JOIN agents a ON a.id = p.agent_id WHERE p.id = $1",
                actiond_store::proposals::PROPOSAL_COLUMNS
            ),
            &[&id],
        )
        .await
        .unwrap();
    let row = actiond_store::proposals::ProposalRow::from_row(&row).unwrap();
    assert_eq!(row.on_behalf_of.as_deref(), Some(JANE));
    // Rules see it as on_behalf_of.
    let doc = actiond_core::tenant::TenantDocument::parse(
        &TENANT_YAML.replace(
            "  rules:\n",
            "  rules:\n    - name: for-a-customer\n      when: 'on_behalf_of.endsWith(\"@customer.example\")'\n      effect: escalate\n      reason: Acting for a customer.\n",
        ),
    )
    .unwrap();
    let policy = actiond_core::policy::CompiledPolicy::new(doc, 2, "x".into()).unwrap();
    let decision = actiond_core::policy::decide(&policy, &row.eval_input(Default::default()));
    assert_eq!(decision.rule.as_deref(), Some("for-a-customer"));
    // An undelegated token records nobody.
    let first: i64 = w
        .env
        .sql
        .query_one("SELECT count(*) FROM proposal_delegations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(first, 1);

    // Revoking the agent refuses the very same, still valid token at once.
    assert!(
        actiond_store::agents::revoke(
            &w.env.db,
            "acme",
            actiond_store::agents::AgentRef::Name("oidc-bot"),
            "operator"
        )
        .await
        .unwrap()
        .is_some()
    );
    let before = w.env.proposal_count().await;
    let (status, _, body) = w.rest(&token, "pi_after_revoke").await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("revoked"),
        "{body}"
    );
    let (status, body) = w.mcp(&token, "pi_after_revoke_mcp").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(w.env.proposal_count().await, before);
    w.env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_misfit_tokens_are_refused_and_store_nothing() {
    let w = World::start().await;
    let sub = "spiffe://acme/jwt-bot";
    let good = w.a.claims(sub);
    // The control: A's own token works.
    let (status, _, body) = w.rest(&w.a_key.sign(&good, None), "pi_control").await;
    assert_eq!(status, 202, "{body}");
    let stored = w.env.proposal_count().await;
    let events = w.env.proposal_event_count().await;

    let now = jsonwebtoken::get_current_timestamp();
    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let mut expired = with("exp", json!(now - 120));
    expired["iat"] = json!(now - 300);
    let mut no_sub = good.clone();
    no_sub.as_object_mut().unwrap().remove("sub");
    let mut no_exp = good.clone();
    no_exp.as_object_mut().unwrap().remove("exp");
    let other_issuer_kid = {
        // Signed by B's key, naming B's kid, but claiming to come from A.
        w.b_key.sign(&good, None)
    };
    let cases: Vec<(&str, String, &str)> = vec![
        ("alg none", unsigned(&good), "alg: none"),
        (
            "HS256 keyed with the public key",
            hs256_with_public_key(&w.a_key, &good),
            "JWT header alg",
        ),
        (
            "wrong aud",
            w.a_key
                .sign(&with("aud", json!("https://other.example")), None),
            "claim aud",
        ),
        ("expired", w.a_key.sign(&expired, None), "claim exp"),
        (
            "not yet valid",
            w.a_key.sign(&with("nbf", json!(now + 600)), None),
            "claim nbf",
        ),
        (
            "issued ten minutes in the future",
            w.a_key.sign(&with("iat", json!(now + 600)), None),
            "claim iat",
        ),
        ("unknown kid", w.a_key.sign(&good, Some("a-unknown")), "kid"),
        ("a kid of another issuer", other_issuer_kid, "kid"),
        ("missing sub", w.a_key.sign(&no_sub, None), "required"),
        ("missing exp", w.a_key.sign(&no_exp, None), "required"),
        (
            "lifetime over the maximum",
            w.a_key.sign(&with("exp", json!(now + 3600)), None),
            "max_token_lifetime",
        ),
        (
            "untrusted issuer",
            w.a_key
                .sign(&with("iss", json!("https://evil.example")), None),
            "claim iss",
        ),
        (
            "a subject bound to no agent",
            w.a_key
                .sign(&with("sub", json!("spiffe://acme/nobody")), None),
            "no live agent",
        ),
        (
            "bad signature",
            {
                let t = w.a_key.sign(&good, None);
                let (head, _) = t.rsplit_once('.').unwrap();
                format!("{head}.{}", b64(&[7u8; 64]))
            },
            "signature",
        ),
    ];
    for (name, token, detail) in &cases {
        let (status, auth, body) = w.rest(token, "pi_attack").await;
        assert_eq!(status, 401, "{name}: {body}");
        assert_eq!(body["type"], "urn:actiond:problem:unauthorized", "{name}");
        assert!(
            body["detail"].as_str().unwrap().contains(detail),
            "{name}: {body}"
        );
        assert!(auth.contains("resource_metadata="), "{name}: {auth}");
        let (status, body) = w.mcp(token, "pi_attack").await;
        assert_eq!(status, 401, "{name} on /mcp: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains(detail),
            "{name} on /mcp: {body}"
        );
    }
    assert_eq!(w.env.proposal_count().await, stored, "nothing stored");
    assert_eq!(w.env.proposal_event_count().await, events);
    // Bounded metric labels, never the token's own values.
    let scrape = w.env.metrics.render();
    assert!(scrape.contains(r#"reason="jwt_algorithm""#), "{scrape}");
    assert!(!scrape.contains("a-unknown"), "{scrape}");
    // A token claiming A's iss is checked against A's keys only: B's set was never read.
    assert_eq!(w.b.fetches.load(Ordering::SeqCst), 0);
    w.env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "the JWKS refresh interval must pass: time is the subject"
)]
async fn a_rotated_key_is_fetched_once_per_interval_and_mcp_points_to_metadata() {
    let w = World::start().await;
    let sub = "spiffe://acme/jwt-bot";
    let (status, _, _) = w.rest(&w.a_key.sign(&w.a.claims(sub), None), "pi_1").await;
    assert_eq!(status, 202);
    assert_eq!(w.a.fetches.load(Ordering::SeqCst), 1);
    // The issuer rotates: a new key appears in its set.
    let rotated = TestKey::generate("a-2");
    w.a.keys.lock().unwrap().push(rotated.jwk.clone());
    // Right after the last fetch, a flood of unknown kids fetches nothing more…
    for i in 0..5 {
        let t = w
            .a_key
            .sign(&w.a.claims(sub), Some(&format!("made-up-{i}")));
        assert_eq!(w.rest(&t, "pi_x").await.0, 401);
    }
    assert_eq!(w.a.fetches.load(Ordering::SeqCst), 1);
    // …and once the interval (2 s here) has passed, the new kid is fetched and accepted.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, _, body) = w.rest(&rotated.sign(&w.a.claims(sub), None), "pi_2").await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(w.a.fetches.load(Ordering::SeqCst), 2);

    // /mcp without a token: 401 pointing at the RFC 9728 metadata, which names the issuers.
    let (status, headers, _) = RawCall {
        base: &w.env.base,
        token: None,
        host: None,
        origin: None,
    }
    .post(&tools_call(1, "propose_action", refund_args("pi_3")))
    .await;
    assert_eq!(status, 401);
    let metadata_url = format!("{}/.well-known/oauth-protected-resource", w.env.base);
    assert!(
        headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{headers:?}"
    );
    let meta: Value = reqwest::get(&metadata_url)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["resource"], w.env.base);
    let servers = meta["authorization_servers"].as_array().unwrap();
    for iss in [&w.a.url, &w.b.url, &w.oidc.issuer] {
        assert!(servers.contains(&json!(iss)), "{meta}");
    }
    assert_eq!(meta["bearer_methods_supported"], json!(["header"]));
    let mcp_meta: Value = reqwest::get(format!("{metadata_url}/mcp"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(mcp_meta["resource"], format!("{}/mcp", w.env.base));
    w.env.finish().await;
}

/// An api trusting only `issuer`, with the given cache settings, and the agent `jwt-bot` bound
/// to `spiffe://acme/jwt-bot` there.
async fn single_issuer_env(issuer: &TestIssuer, cache: &str) -> Env {
    let yaml = format!(
        "{cache}
issuers:
  - issuer: {u}
    jwks_uri: {u}/jwks
    audience: {AUDIENCE}
    algorithms: [ES256]
    max_token_lifetime: 10m
",
        u = issuer.url
    );
    let config = IssuersConfig::from_yaml(&yaml).unwrap();
    let env = Env::start_with(|s| s.with_jwt(Verifier::new(config).unwrap())).await;
    actiond_store::agents::create_workload(
        &env.db,
        "acme",
        "jwt-bot",
        None,
        &issuer.url,
        "spiffe://acme/jwt-bot",
    )
    .await
    .unwrap();
    env
}

/// `POST /v1/proposals` with `token`; the status.
async fn post_status(env: &Env, token: &str, payment: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{}/v1/proposals", env.base))
        .bearer_auth(token)
        .json(&refund_args(payment))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A token with an invented `kid` makes the api fetch the issuer's key set, and that fetch
/// hangs (the issuer is slow, or made slow): agents whose `kid` is known are answered from the
/// cache meanwhile, and a flood of invented `kid`s adds no fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "the JWKS refresh interval and a slow issuer: time is the subject"
)]
async fn an_unknown_kid_fetch_that_hangs_holds_up_no_known_key() {
    let key = TestKey::generate("a-1");
    let issuer = TestIssuer::start(&[&key]).await;
    let env = single_issuer_env(&issuer, "jwks_refresh_interval: 1s").await;
    let sub = "spiffe://acme/jwt-bot";
    assert_eq!(
        post_status(&env, &key.sign(&issuer.claims(sub), None), "pi_0").await,
        202
    );
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1);
    // Past the refresh interval, an unknown kid may fetch again.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // The issuer now takes 4 s to answer; an invented kid starts a fetch and waits for it.
    issuer.delay_ms.store(4000, Ordering::SeqCst);
    let invented = key.sign(&issuer.claims(sub), Some("made-up"));
    let started = std::time::Instant::now();
    let mut flood = Vec::new();
    for i in 0..20 {
        let (base, t) = (env.base.clone(), invented.clone());
        flood.push(tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{base}/v1/proposals"))
                .bearer_auth(t)
                .json(&refund_args(&format!("pi_x{i}")))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A known kid is answered at once, while the fetch hangs.
    let t = std::time::Instant::now();
    assert_eq!(
        post_status(&env, &key.sign(&issuer.claims(sub), None), "pi_1").await,
        202
    );
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "a known kid waited {:?} for another caller's JWKS fetch",
        t.elapsed()
    );
    for f in flood {
        assert_eq!(f.await.unwrap(), 401);
    }
    assert!(
        started.elapsed() >= Duration::from_millis(3500),
        "they waited for the one fetch"
    );
    // Twenty invented kids, one fetch (single flight; the interval passed only once).
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    let rows: i64 = env
        .sql
        .query_one("SELECT count(*) FROM proposals", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 2, "only the two known-kid proposals were stored");
    env.finish().await;
}

/// While the issuer is unreachable, its keys stay trusted for `jwks_max_age + jwks_max_stale`
/// after the last successful fetch (refreshed in the background meanwhile), never longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "the JWKS max_age and max_stale must pass: time is the subject"
)]
async fn keys_of_an_unreachable_issuer_are_trusted_for_a_bounded_time() {
    let key = TestKey::generate("a-1");
    let issuer = TestIssuer::start(&[&key]).await;
    let env = single_issuer_env(
        &issuer,
        "jwks_refresh_interval: 1s\njwks_max_age: 1s\njwks_max_stale: 2s",
    )
    .await;
    let sub = "spiffe://acme/jwt-bot";
    let fetched = std::time::Instant::now();
    assert_eq!(
        post_status(&env, &key.sign(&issuer.claims(sub), None), "pi_0").await,
        202
    );
    issuer.down.store(true, Ordering::SeqCst);
    // Past max_age: stale, served while the refresh fails.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        post_status(&env, &key.sign(&issuer.claims(sub), None), "pi_1").await,
        202
    );
    assert!(fetched.elapsed() < Duration::from_secs(3));
    // Past max_age + max_stale: refused until a fetch succeeds.
    tokio::time::sleep(
        Duration::from_secs(3).saturating_sub(fetched.elapsed()) + Duration::from_millis(300),
    )
    .await;
    assert_eq!(
        post_status(&env, &key.sign(&issuer.claims(sub), None), "pi_2").await,
        401
    );
    // The issuer is back: the next fetch (at most one per second) restores it.
    issuer.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        post_status(&env, &key.sign(&issuer.claims(sub), None), "pi_3").await,
        202
    );
    env.finish().await;
}
