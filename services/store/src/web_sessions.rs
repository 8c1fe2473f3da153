//! Approver sessions and started OIDC logins of the approval web app (`web_sessions`,
//! `web_login_states`).
//!
//! Session ids and login `state` values never reach the database: callers pass their SHA-256
//! (lowercase hex). Idle and absolute timeouts are judged by the statements themselves against
//! the database clock, shifted by a [`Clock`] so tests can move time forward instead of
//! sleeping (production clocks are never shifted).

use crate::{Db, Result};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The time sessions and logins are judged at: the database's `now()` plus a shift that starts
/// at zero. Clones share the shift.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    ahead_ms: Arc<AtomicU64>,
}

impl Clock {
    /// Moves this clock (and its clones) forward by `by`, for tests of timeouts.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.ahead_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// The shift from the database clock, in seconds (the SQL parameter `$shift` of
    /// `now() + make_interval(secs => $shift)`).
    fn ahead_secs(&self) -> f64 {
        Duration::from_millis(self.ahead_ms.load(Ordering::SeqCst)).as_secs_f64()
    }
}

/// "now" in the statements below: the database clock shifted by `$1`.
const NOW: &str = "(now() + make_interval(secs => $1::float8))";

/// A session that is still valid, as read back by [`touch`].
#[derive(Debug, Clone)]
pub struct Session {
    /// OIDC issuer of the login.
    pub issuer: String,
    /// Subject (`sub`) at that issuer.
    pub subject: String,
    /// Email claim, for display only.
    pub email: Option<String>,
    /// Display name claim, for display only.
    pub display_name: Option<String>,
    /// The ID-token claims kept for tenant authorization.
    pub claims: Value,
    /// The session's CSRF token.
    pub csrf_token: String,
    /// True when made by the loopback dev login.
    pub dev_login: bool,
    /// When the session was made: the login that read `claims`.
    pub created_at: DateTime<Utc>,
    /// When the identity provider last authenticated the person (ID-token `auth_time`; the
    /// login itself for the dev login); `None` when the ID token had none.
    pub auth_time: Option<DateTime<Utc>>,
}

/// A session to create.
#[derive(Debug, Clone, Copy)]
pub struct NewSession<'a> {
    /// SHA-256 (hex) of the session id sent in the cookie.
    pub id_sha256: &'a str,
    /// OIDC issuer.
    pub issuer: &'a str,
    /// Subject at that issuer.
    pub subject: &'a str,
    /// Email claim.
    pub email: Option<&'a str>,
    /// Display name claim.
    pub display_name: Option<&'a str>,
    /// ID-token claims.
    pub claims: &'a Value,
    /// CSRF token of the session.
    pub csrf_token: &'a str,
    /// Made by the dev login.
    pub dev_login: bool,
    /// ID-token `auth_time`; for a dev login (none given) the session's creation.
    pub auth_time: Option<DateTime<Utc>>,
}

/// Creates a session that ends `absolute` after now, whatever its use.
pub async fn create(db: &Db, clock: &Clock, s: &NewSession<'_>, absolute: Duration) -> Result<()> {
    let c = db.client().await?;
    c.execute(
        &format!(
            "INSERT INTO web_sessions (id_sha256, issuer, subject, email, display_name, claims, csrf_token, dev_login,
                                       created_at, last_seen_at, expires_at, auth_time)
             VALUES ($2, $3, $4, $5, $6, $7, $8, $9, {NOW}, {NOW}, {NOW} + make_interval(secs => $10::float8),
                     COALESCE($11::timestamptz, CASE WHEN $9 THEN {NOW} END))"
        ),
        &[
            &clock.ahead_secs(),
            &s.id_sha256,
            &s.issuer,
            &s.subject,
            &s.email,
            &s.display_name,
            s.claims,
            &s.csrf_token,
            &s.dev_login,
            &absolute.as_secs_f64(),
            &s.auth_time,
        ],
    )
    .await?;
    Ok(())
}

/// The session with this id hash when it has neither expired nor been idle longer than
/// `idle`; refreshes its idle timer.
pub async fn touch(
    db: &Db,
    clock: &Clock,
    id_sha256: &str,
    idle: Duration,
) -> Result<Option<Session>> {
    let c = db.client().await?;
    let row = c
        .query_opt(
            &format!(
                "UPDATE web_sessions SET last_seen_at = {NOW}
                 WHERE id_sha256 = $2 AND expires_at > {NOW}
                   AND last_seen_at > {NOW} - make_interval(secs => $3::float8)
                 RETURNING issuer, subject, email, display_name, claims, csrf_token, dev_login, created_at, auth_time"
            ),
            &[&clock.ahead_secs(), &id_sha256, &idle.as_secs_f64()],
        )
        .await?;
    Ok(row.map(|r| Session {
        issuer: r.get("issuer"),
        subject: r.get("subject"),
        email: r.get("email"),
        display_name: r.get("display_name"),
        claims: r.get("claims"),
        csrf_token: r.get("csrf_token"),
        dev_login: r.get("dev_login"),
        created_at: r.get("created_at"),
        auth_time: r.get("auth_time"),
    }))
}

/// Ends a session (logout).
pub async fn delete(db: &Db, id_sha256: &str) -> Result<()> {
    let c = db.client().await?;
    c.execute(
        "DELETE FROM web_sessions WHERE id_sha256 = $1",
        &[&id_sha256],
    )
    .await?;
    Ok(())
}

/// A started OIDC login (authorization code flow with PKCE).
#[derive(Debug, Clone)]
pub struct LoginState {
    /// SHA-256 (hex) of the browser-binding cookie value.
    pub binding_sha256: String,
    /// The `nonce` sent in the authorization request.
    pub nonce: String,
    /// The PKCE code verifier (RFC 7636).
    pub pkce_verifier: String,
    /// Local path to return to after the login.
    pub return_to: String,
    /// The OIDC `max_age` sent in the authorization request, in seconds, if any.
    pub max_age_secs: Option<i64>,
}

/// A login taken back at the callback: what [`start_login`] stored, and how long ago (by the
/// database clock) it was started.
#[derive(Debug, Clone)]
pub struct TakenLogin {
    /// What was stored.
    pub login: LoginState,
    /// Seconds since the login was started.
    pub age_secs: f64,
}

/// Records a started login under the SHA-256 (hex) of its `state`, valid for `ttl`.
pub async fn start_login(
    db: &Db,
    clock: &Clock,
    state_sha256: &str,
    login: &LoginState,
    ttl: Duration,
) -> Result<()> {
    let c = db.client().await?;
    c.execute(
        &format!(
            "INSERT INTO web_login_states (state_sha256, binding_sha256, nonce, pkce_verifier, return_to, created_at, expires_at, max_age_secs)
             VALUES ($2, $3, $4, $5, $6, {NOW}, {NOW} + make_interval(secs => $7::float8), $8)"
        ),
        &[
            &clock.ahead_secs(),
            &state_sha256,
            &login.binding_sha256,
            &login.nonce,
            &login.pkce_verifier,
            &login.return_to,
            &ttl.as_secs_f64(),
            &login.max_age_secs,
        ],
    )
    .await?;
    Ok(())
}

/// Consumes the unexpired login whose `state` hashes to `state_sha256` (one `DELETE …
/// RETURNING`, so a replayed callback finds nothing).
pub async fn take_login(db: &Db, clock: &Clock, state_sha256: &str) -> Result<Option<TakenLogin>> {
    let c = db.client().await?;
    let row = c
        .query_opt(
            &format!(
                "DELETE FROM web_login_states WHERE state_sha256 = $2 AND expires_at > {NOW}
                 RETURNING binding_sha256, nonce, pkce_verifier, return_to, max_age_secs,
                           extract(epoch FROM {NOW} - created_at)::float8 AS age_secs"
            ),
            &[&clock.ahead_secs(), &state_sha256],
        )
        .await?;
    Ok(row.map(|r| TakenLogin {
        login: LoginState {
            binding_sha256: r.get("binding_sha256"),
            nonce: r.get("nonce"),
            pkce_verifier: r.get("pkce_verifier"),
            return_to: r.get("return_to"),
            max_age_secs: r.get("max_age_secs"),
        },
        age_secs: r.get("age_secs"),
    }))
}

/// Deletes expired logins, and sessions that expired or were idle longer than `idle`.
pub async fn sweep(db: &Db, clock: &Clock, idle: Duration) -> Result<()> {
    let c = db.client().await?;
    c.execute(
        &format!("DELETE FROM web_login_states WHERE expires_at < {NOW}"),
        &[&clock.ahead_secs()],
    )
    .await?;
    c.execute(
        &format!(
            "DELETE FROM web_sessions
             WHERE expires_at < {NOW} OR last_seen_at < {NOW} - make_interval(secs => $2::float8)"
        ),
        &[&clock.ahead_secs(), &idle.as_secs_f64()],
    )
    .await?;
    Ok(())
}
