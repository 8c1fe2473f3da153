//! The agent-facing routes and their shared state.

use crate::error::SubmitError;
use crate::{ApiMetrics, jwt, mcp, openapi, problem, resource, submit};
use actiond_runtime::Metrics;
use actiond_store::agent_cache::{AgentCache, AgentKey};
use actiond_store::policy_cache::PolicyCache;
use actiond_store::{Db, agents, proposals};
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::sync::Arc;
use std::time::Duration;

/// Body limit of `POST /v1/proposals` (design rule: 64 KiB). Larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest long-poll, seconds.
pub const MAX_WAIT_SECS: u64 = 60;
/// Long-polls one agent may hold at once by default (`--max-waits-per-agent`).
pub const DEFAULT_MAX_WAITS_PER_AGENT: usize = 8;

/// The long-polls each agent holds, capped per agent ([`wait_for_change`]).
#[derive(Clone)]
pub struct WaitSlots {
    cap: usize,
    held: Arc<std::sync::Mutex<std::collections::HashMap<uuid::Uuid, usize>>>,
}

/// One held long-poll; released on drop.
pub struct WaitSlot {
    slots: WaitSlots,
    agent: uuid::Uuid,
}

impl WaitSlots {
    /// At most `cap` held long-polls per agent (at least 1).
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            held: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<uuid::Uuid, usize>> {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for `agent`, or `None` when it already holds `cap`.
    pub fn try_hold(&self, agent: uuid::Uuid) -> Option<WaitSlot> {
        let mut held = self.lock();
        let n = held.entry(agent).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(WaitSlot {
            slots: self.clone(),
            agent,
        })
    }
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut held = self.slots.lock();
        if let Some(n) = held.get_mut(&self.agent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.agent);
            }
        }
    }
}

/// Shared state of the api router.
#[derive(Clone)]
pub struct AppState {
    /// Pool.
    pub db: Db,
    /// Debounced NOTIFY to wake policy workers.
    pub notifier: actiond_store::listen::Notifier,
    /// Tenant document cache (the store's, shared with every service).
    pub docs: Arc<PolicyCache>,
    /// Metrics.
    pub metrics: ApiMetrics,
    /// Trusted issuers of workload JWTs; `None`: static agent tokens only.
    pub jwt: Option<Arc<jwt::Verifier>>,
    /// The API's public origin (`https://actiond.example.com`) for the RFC 9728 metadata;
    /// `None`: taken from each request's `Host`.
    pub public_origin: Option<String>,
    /// Per-process cache of agent lookups (disabled unless [`AppState::with_agent_cache`]).
    pub agents: AgentCache,
    /// Stores submissions, batching concurrent ones ([`DEFAULT_SUBMIT_WORKERS`] workers
    /// unless [`AppState::with_submit_workers`]).
    pub submitter: actiond_store::proposals::Submitter,
    /// Long-polls held per agent ([`DEFAULT_MAX_WAITS_PER_AGENT`] unless
    /// [`AppState::with_max_waits_per_agent`]).
    pub waits: WaitSlots,
}

/// Submission batches an api process stores at once by default (`--submit-workers`).
pub const DEFAULT_SUBMIT_WORKERS: usize = 2;

impl AppState {
    /// Builds the state (spawns the NOTIFY sender).
    pub fn new(db: Db, metrics: &Metrics) -> Self {
        // At most one NOTIFY per 10 ms per api process: a submission waits at most that long
        // for the hint that wakes policy. With 20 ms, submit → decided took 12–13 ms at the
        // median in an open loop at 500 proposals/s; with 10 ms, 7–8 (issue #10). The NOTIFYs
        // themselves cost nothing measurable (766 of 0.004 ms for 5,000 proposals); policy's
        // batches get smaller below saturation (5.7 → 6.1 statements per proposal at 500/s),
        // and at saturation they are full either way, so capacity is unchanged.
        let notifier = actiond_store::listen::Notifier::spawn(
            db.clone(),
            actiond_store::listen::CHANNEL_PENDING,
            Duration::from_millis(10),
        );
        let submitter =
            actiond_store::proposals::Submitter::spawn(db.clone(), DEFAULT_SUBMIT_WORKERS);
        Self {
            db,
            notifier,
            submitter,
            docs: Arc::new(PolicyCache::default()),
            metrics: ApiMetrics::new(metrics),
            jwt: None,
            public_origin: None,
            agents: AgentCache::disabled(),
            waits: WaitSlots::new(DEFAULT_MAX_WAITS_PER_AGENT),
        }
    }

    /// Lets each agent hold at most `cap` long-polls at once.
    pub fn with_max_waits_per_agent(mut self, cap: usize) -> Self {
        self.waits = WaitSlots::new(cap);
        self
    }

    /// Stores submissions with `workers` batch workers instead of [`DEFAULT_SUBMIT_WORKERS`].
    pub fn with_submit_workers(mut self, workers: usize) -> Self {
        self.submitter = actiond_store::proposals::Submitter::spawn(self.db.clone(), workers);
        self
    }

    /// Reuses live agents found by token or workload identity (see [`AgentCache`]).
    pub fn with_agent_cache(mut self, cache: AgentCache) -> Self {
        self.agents = cache;
        self
    }

    /// The live agent for `key`: through the agent cache when `cached` (the caller re-checks
    /// liveness in its own statement), otherwise from `load` (the database).
    async fn lookup_agent<Fut>(
        &self,
        key: AgentKey,
        cached: Cached,
        load: impl FnOnce() -> Fut,
    ) -> Result<Option<agents::Agent>, SubmitError>
    where
        Fut: std::future::Future<Output = actiond_store::Result<Option<agents::Agent>>>,
    {
        let (agent, cached) = match cached {
            Cached::Allowed => self.agents.get_or_load(key, load).await?,
            Cached::No => (load().await?, false),
        };
        let source = if cached { "cache" } else { "database" };
        self.metrics
            .agent_lookups
            .with_label_values(&[source])
            .inc();
        Ok(agent)
    }

    /// Accepts workload JWTs from `verifier`'s trusted issuers as well as agent tokens.
    pub fn with_jwt(mut self, verifier: jwt::Verifier) -> Self {
        self.jwt = Some(Arc::new(verifier));
        self
    }

    /// Sets the public origin named in the RFC 9728 metadata (see [`resource`]).
    pub fn with_public_origin(mut self, origin: Option<String>) -> Self {
        self.public_origin = origin;
        self
    }

    pub(crate) fn auth_failure(&self, reason: &str, detail: &'static str) -> SubmitError {
        self.metrics
            .auth_failures
            .with_label_values(&[reason])
            .inc();
        SubmitError::Unauthorized { detail }
    }
}

/// The agent-facing router; `/mcp` accepts loopback `Host`/`Origin` only.
pub fn router(state: AppState) -> Router {
    router_with_mcp(state, &mcp::McpConfig::default())
}

/// The agent-facing router with `/mcp` accepting the configured public origins, inside the
/// observation stack (`X-Request-Id`, per-request span).
pub fn router_with_mcp(state: AppState, mcp_config: &mcp::McpConfig) -> Router {
    let routes = Router::new()
        .merge(mcp::routes(state.clone(), mcp_config))
        .route("/v1/proposals", post(create_proposal))
        .route("/v1/proposals/{id}", get(get_proposal))
        .route("/openapi.yaml", get(openapi))
        .route("/v1/openapi.yaml", get(tenant_openapi))
        .merge(resource::routes())
        .route("/healthz", get(|| async { "ok\n" }))
        .fallback(|| async { SubmitError::NotFound { what: "route" } })
        .method_not_allowed_fallback(|| async { problem::Problem::method_not_allowed() })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        // A client that announces a body and never sends it does not hold a connection forever.
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            Duration::from_secs(10),
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            resource::point_to_metadata,
        ))
        .with_state(state);
    actiond_runtime::http::observe(routes)
}

/// The OpenAPI 3.1 document describing this API, as written; it is served with each action's
/// params typed from the handler registry ([`openapi::static_yaml`]).
pub const OPENAPI_YAML: &str = include_str!("../openapi.yaml");

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/yaml")],
        openapi::static_yaml(),
    )
        .into_response()
}

/// `GET /v1/openapi.yaml`: the OpenAPI document of the calling agent's tenant.
async fn tenant_openapi(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let agent = match authenticate(&state, &headers).await {
        Ok(a) => a,
        Err(p) => return p.into_response(),
    };
    if let Err(p) = no_query(raw.as_deref()) {
        return p.into_response();
    }
    let doc = {
        let read = async {
            let c = state.db.client().await?;
            state.docs.latest_of(&c, &agent.tenant_id).await
        };
        match read.await {
            Ok(d) => d,
            Err(e) => return SubmitError::Store(e).into_response(),
        }
    };
    match openapi::for_tenant(&agent.tenant_id, doc.as_deref()) {
        Ok(text) => ([(header::CONTENT_TYPE, "application/yaml")], text).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "per-tenant OpenAPI document");
            SubmitError::Store(actiond_store::StoreError::Config(e)).into_response()
        }
    }
}

/// Whether an agent lookup may be answered by the agent cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cached {
    /// Yes: the request's own statement re-checks that the agent is live and not frozen
    /// (a submission's insert), so a revocation that has not reached the cache yet still wins.
    Allowed,
    /// No: read the agent now.
    No,
}

/// Resolves the bearer credential to a live agent, read from Postgres now; 401 otherwise. A
/// value shaped like a JWT is verified against the trusted issuers ([`jwt`]) and mapped through
/// its `(iss, sub)`; any other value is an agent token, looked up by its SHA-256. A request
/// with more than one `Authorization` header is refused (401) whatever they hold.
pub async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<agents::Agent, SubmitError> {
    authenticate_with(state, headers, Cached::No).await
}

/// [`authenticate`] for a submission: the agent may come from the agent cache, because the
/// insert re-checks in its own statement that it is live and not frozen
/// (`proposals::submit`).
pub async fn authenticate_for_submit(
    state: &AppState,
    headers: &HeaderMap,
) -> Result<agents::Agent, SubmitError> {
    authenticate_with(state, headers, Cached::Allowed).await
}

async fn authenticate_with(
    state: &AppState,
    headers: &HeaderMap,
    cached: Cached,
) -> Result<agents::Agent, SubmitError> {
    const SEND: &str = "send Authorization: Bearer <agent token or workload JWT>";
    // Two credentials in one request are ambiguous (which one did a proxy add?): RFC 9110
    // allows one Authorization field, so a second is refused rather than one picked.
    if headers
        .get_all(header::AUTHORIZATION)
        .iter()
        .nth(1)
        .is_some()
    {
        return Err(state.auth_failure(
            "invalid",
            "Authorization: send exactly one Authorization header, not several",
        ));
    }
    let Some(value) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Err(state.auth_failure("missing", SEND));
    };
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .unwrap_or("")
        .trim();
    if jwt::looks_like_jwt(token) {
        return authenticate_jwt(state, token, cached).await;
    }
    if token.is_empty() || token.len() > 256 {
        return Err(state.auth_failure("invalid", SEND));
    }
    let hash = actiond_core::canonical::sha256_hex(token.as_bytes());
    let db = &state.db;
    let key = AgentKey::Token(hash.clone());
    match state
        .lookup_agent(key, cached, || agents::authenticate(db, &hash))
        .await?
    {
        Some(a) => Ok(a),
        None => Err(state.auth_failure("invalid", "the token is unknown, expired or revoked")),
    }
}

async fn authenticate_jwt(
    state: &AppState,
    token: &str,
    cached: Cached,
) -> Result<agents::Agent, SubmitError> {
    let Some(verifier) = &state.jwt else {
        return Err(state.auth_failure(
            "jwt_not_configured",
            "JWT: this API trusts no JWT issuer (--jwt-issuers-file); use the agent token",
        ));
    };
    let id = match verifier.verify(token).await {
        Ok(id) => id,
        Err(r) => return Err(state.auth_failure(r.label(), r.detail())),
    };
    let db = &state.db;
    let key = AgentKey::Workload(id.issuer.clone(), id.subject.clone());
    let load = || agents::authenticate_workload(db, &id.issuer, &id.subject);
    match state.lookup_agent(key, cached, load).await? {
        Some(mut a) => {
            a.on_behalf_of = id.on_behalf_of;
            Ok(a)
        }
        None => {
            let r = jwt::Rejection::NoAgent;
            Err(state.auth_failure(r.label(), r.detail()))
        }
    }
}

async fn create_proposal(
    State(state): State<AppState>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    // The token and the headers are judged before a byte of the body is read: an anonymous or
    // malformed request is answered at once, never held while it trickles its body in.
    let agent = match authenticate_for_submit(&state, &headers).await {
        Ok(a) => a,
        Err(p) => return p.into_response(),
    };
    if headers.get_all(header::CONTENT_TYPE).iter().count() > 1 {
        // Only one is read: a second one must not ride along unchecked.
        return SubmitError::field("Content-Type", "must be sent once").into_response();
    }
    if let Some(ct) = headers.get(header::CONTENT_TYPE)
        && ct
            .to_str()
            .map_err(|_| String::new())
            .and_then(actiond_runtime::http::check_json_media_type)
            .is_err()
    {
        return SubmitError::UnsupportedMediaType.into_response();
    }
    if let Some(enc) = headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
        .find(|v| !v.eq_ignore_ascii_case("identity"))
    {
        let shown: String = enc.chars().take(64).collect();
        return SubmitError::UnsupportedContentEncoding(shown).into_response();
    }
    if headers.get_all("idempotency-key").iter().count() > 1 {
        return SubmitError::field("Idempotency-Key", "must be sent once").into_response();
    }
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => match v.to_str() {
            Ok(s)
                if !s.is_empty()
                    && s.len() <= 255
                    && s.chars().all(|c| (' '..='~').contains(&c)) =>
            {
                Some(s.to_owned())
            }
            _ => {
                return SubmitError::field(
                    "Idempotency-Key",
                    "must be 1 to 255 printable ASCII characters",
                )
                .into_response();
            }
        },
    };
    // A declared length over the limit is refused without waiting for the body.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return SubmitError::BodyTooLarge {
            limit: MAX_BODY_BYTES,
        }
        .into_response();
    }
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e) if too_large(&e) => {
            return SubmitError::BodyTooLarge {
                limit: MAX_BODY_BYTES,
            }
            .into_response();
        }
        Err(e) => {
            return SubmitError::field("body", format!("Failed to buffer the request body: {e}"))
                .into_response();
        }
    };
    let req = match submit::SubmitRequest::from_json_bytes(&body) {
        Ok(r) => r,
        Err(p) => {
            state
                .metrics
                .submissions
                .with_label_values(&["invalid"])
                .inc();
            return p.into_response();
        }
    };
    match submit::submit(&state, &agent, req, key).await {
        Ok(resp) => {
            let mut r = (StatusCode::ACCEPTED, Json(&resp)).into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("/v1/proposals/{}", resp.proposal_id)) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            if resp.replayed {
                r.headers_mut()
                    .insert("idempotent-replayed", HeaderValue::from_static("true"));
            }
            r
        }
        Err(p) => p.into_response(),
    }
}

/// Whether reading a body failed on the size limit (`http_body_util::LengthLimitError`
/// anywhere in the error's chain).
fn too_large(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// The 400 for a query parameter a route does not take: the field is the parameter's name (at
/// most 64 characters of it), the rule names the ones it does take (`known`, or "none").
fn unknown_query_parameter(name: &str, known: &str) -> SubmitError {
    let shown: String = name.chars().take(64).collect();
    SubmitError::field(
        &shown,
        format!("is not a query parameter of this route (it takes {known})"),
    )
}

/// Refuses any query parameter, for a route that takes none.
fn no_query(raw: Option<&str>) -> Result<(), SubmitError> {
    match url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()).next() {
        Some((name, _)) => Err(unknown_query_parameter(&name, "none")),
        None => Ok(()),
    }
}

/// The query of `GET /v1/proposals/{id}`: `wait` (seconds) and `state` (the state last seen).
#[derive(Debug, Default, PartialEq, Eq)]
struct WaitQuery {
    wait: u64,
    state: Option<String>,
}

impl WaitQuery {
    /// Parses the raw query. Each parameter at most once; `wait` an integer from 0 to
    /// [`MAX_WAIT_SECS`]; `state` one of the proposal states. Any other name is a 400 naming
    /// it ([`unknown_query_parameter`]): a misspelt `wiat` must not pass as "no wait".
    fn parse(raw: Option<&str>) -> Result<Self, SubmitError> {
        let mut q = Self::default();
        let (mut seen_wait, mut seen_state) = (false, false);
        for (name, value) in url::form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            let seen = match name.as_ref() {
                "wait" => &mut seen_wait,
                "state" => &mut seen_state,
                other => return Err(unknown_query_parameter(other, "wait and state")),
            };
            if std::mem::replace(seen, true) {
                return Err(SubmitError::field(&name, "must be given at most once"));
            }
            if name == "wait" {
                q.wait = match value.parse::<u64>() {
                    Ok(w) if w <= MAX_WAIT_SECS => w,
                    _ => {
                        return Err(SubmitError::field(
                            "wait",
                            format!(
                                "must be an integer number of seconds from 0 to {MAX_WAIT_SECS}"
                            ),
                        ));
                    }
                };
            } else if actiond_core::state::ProposalState::parse(&value).is_some() {
                q.state = Some(value.into_owned());
            } else {
                return Err(SubmitError::field(
                    "state",
                    "must be a proposal state: pending, escalated, approved, blocked, denied, expired, executing, succeeded, failed, outcome_unknown, amended, withdrawn, stale or effect_mismatch",
                ));
            }
        }
        Ok(q)
    }
}

async fn get_proposal(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let agent = match authenticate(&state, &headers).await {
        Ok(a) => a,
        Err(p) => return p.into_response(),
    };
    // A malformed id is the client's mistake (400 naming the field), not a missing proposal.
    let Ok(id) = uuid::Uuid::parse_str(&id) else {
        return SubmitError::field(
            "proposal_id",
            "must be a UUID: the proposal_id that POST /v1/proposals returned",
        )
        .into_response();
    };
    let q = match WaitQuery::parse(raw.as_deref()) {
        Ok(q) => q,
        Err(p) => return p.into_response(),
    };
    match wait_for_change(
        &state,
        &agent,
        id,
        Duration::from_secs(q.wait),
        q.state.as_deref(),
    )
    .await
    {
        Ok(Some(s)) => Json(s).into_response(),
        Ok(None) => SubmitError::NotFound { what: "proposal" }.into_response(),
        Err(p) => p.into_response(),
    }
}

/// Reads the agent's proposal; with a `wait`, polls until its state differs from `seen` (the
/// state first read when `seen` is `None`), it reaches a final state, the wait ends, or the
/// process starts draining (then the current state is the answer, so shutdown is not held).
/// An agent that already holds its cap of long-polls ([`WaitSlots`]) gets the current state
/// at once, as with no `wait`.
pub async fn wait_for_change(
    state: &AppState,
    agent: &agents::Agent,
    id: uuid::Uuid,
    wait: Duration,
    seen: Option<&str>,
) -> Result<Option<proposals::ProposalStatus>, SubmitError> {
    let deadline = tokio::time::Instant::now() + wait;
    let first = proposals::get_for_agent(&state.db, &agent.tenant_id, agent.id, id).await?;
    let Some(first) = first else { return Ok(None) };
    let baseline = seen
        .map(str::to_owned)
        .unwrap_or_else(|| first.state.clone());
    let is_final =
        |s: &str| actiond_core::state::ProposalState::parse(s).is_some_and(|s| s.is_answered());
    // A draining process answers with what it has: the client polls again, elsewhere.
    if wait.is_zero()
        || first.state != baseline
        || is_final(&first.state)
        || actiond_runtime::draining()
    {
        return Ok(Some(first));
    }
    // Past the agent's cap of held long-polls: the current state at once (as `wait=0`).
    let Some(_slot) = state.waits.try_hold(agent.id) else {
        return Ok(Some(first));
    };
    let mut interval = Duration::from_millis(100);
    let mut last = first;
    while tokio::time::Instant::now() < deadline && !actiond_runtime::draining() {
        let pause = interval.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        tokio::select! {
            () = actiond_runtime::clock::sleep(pause) => {}
            () = actiond_runtime::until_draining() => {}
        }
        interval = (interval * 2).min(Duration::from_secs(1));
        match proposals::get_for_agent(&state.db, &agent.tenant_id, agent.id, id).await? {
            Some(s) if s.state != baseline || is_final(&s.state) => return Ok(Some(s)),
            Some(s) => last = s,
            None => return Ok(None),
        }
    }
    Ok(Some(last))
}
