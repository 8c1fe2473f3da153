//! Sessions, cookies, CSRF, and the OIDC login routes.
//!
//! A session is a random 256-bit id in an `HttpOnly`, `SameSite=Lax` cookie (`Secure`, with
//! the `__Host-` prefix, unless the public URL is plain-http loopback); Postgres keeps only its
//! SHA-256, so sessions survive restarts and work across replicas. Idle and absolute timeouts
//! are enforced by the lookup statement with the database clock (shifted by the state's
//! session clock, which only tests move). Every POST needs the
//! session's CSRF token (constant-time compare) and, when the browser says where it comes from
//! (`Origin`, `Sec-Fetch-Site`), this origin.
//!
//! A login keeps its `state`, `nonce` and PKCE verifier in `web_login_states`, keyed by the
//! SHA-256 of `state` and bound to the browser by a short-lived cookie; the callback consumes
//! the row with one `DELETE … RETURNING`, so a replayed or forged callback finds nothing.

use crate::error::{WebError, WebResult};
use crate::oidc::Identity;
use crate::pages::chrome::{Chrome, render};
use crate::token::{ct_eq, random_token};
use crate::{AppState, authz, headers};
use actiond_core::canonical::sha256_hex;
use actiond_core::text::reveal_invisible;
use actiond_store::web_sessions;
use askama::Template;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use std::time::Duration;

/// `/login`.
#[derive(Template)]
#[template(path = "login.html")]
pub(crate) struct LoginPage {
    pub(crate) oidc_issuer: Option<String>,
    pub(crate) oidc_href: String,
    pub(crate) dev: bool,
    pub(crate) prelogin: String,
    pub(crate) next: String,
    pub(crate) logged_out: bool,
}

/// Lifetime of a started login.
const LOGIN_TTL: Duration = Duration::from_secs(600);

/// Cookie names, `__Host-` prefixed when cookies are Secure.
pub(crate) fn cookie_name(state: &AppState, base: &str) -> String {
    if state.secure_cookies {
        format!("__Host-{base}")
    } else {
        base.to_owned()
    }
}

/// The value of cookie `name`, if sent.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

/// A `Set-Cookie` value; `max_age` `Some(0)` deletes, `None` makes a browser-session cookie.
pub(crate) fn set_cookie(
    state: &AppState,
    base: &str,
    value: &str,
    max_age: Option<u64>,
) -> WebResult<HeaderValue> {
    let mut c = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Lax",
        cookie_name(state, base)
    );
    if state.secure_cookies {
        c.push_str("; Secure");
    }
    if let Some(a) = max_age {
        c.push_str(&format!("; Max-Age={a}"));
    }
    HeaderValue::from_str(&c).map_err(|e| WebError::Internal(e.into()))
}

/// The one check of every redirect target a request names (`next` of the login, the dev
/// login, the OIDC callback and the passkeys page): `Some` only for a path on this site, at most
/// 512 bytes of printable ASCII without spaces, that starts with one `/` and holds no backslash
/// anywhere. Browsers drop tabs and newlines from URLs and read a backslash as `/`, so
/// `/<TAB>/evil`, `/<backslash>evil` and `//evil` all lead off-site; `https://evil` is no path at all.
pub(crate) fn local_target(next: &str) -> Option<&str> {
    (next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && next.len() <= 512
        && next.chars().all(|c| c.is_ascii_graphic()))
    .then_some(next)
}

/// `next` when [`local_target`] accepts it, else `/queue` (no open redirect).
pub(crate) fn safe_next(next: Option<&str>) -> String {
    next.and_then(local_target).unwrap_or("/queue").to_owned()
}

/// The logged-in person of a request.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    pub(crate) id_sha256: String,
    pub(crate) issuer: String,
    pub(crate) subject: String,
    pub(crate) email: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) csrf: String,
    pub(crate) dev: bool,
    /// Tenants this person approves for, from the current tenant documents.
    pub(crate) tenants: Vec<String>,
    /// Tenants whose current document lists this person under `admins:` (the Approvers and
    /// Shadow policy pages; their links show only to them).
    pub(crate) admin_tenants: Vec<String>,
    /// The login that read the claims, and the IdP's `auth_time`.
    pub(crate) times: actiond_store::approvals::SessionTimes,
    /// The ID-token claims of the session (tenant-admin pages check them like approvers).
    pub(crate) claims: serde_json::Value,
}

impl Viewer {
    /// The signed-in header of this person's pages.
    pub(crate) fn chrome(&self) -> Chrome {
        let who = self
            .name
            .clone()
            .or_else(|| self.email.clone())
            .unwrap_or_else(|| self.subject.clone());
        Chrome {
            who: reveal_invisible(&who, false),
            subject: reveal_invisible(&self.subject, false),
            tenants: self.tenants.join(", "),
            csrf: self.csrf.clone(),
            dev: self.dev,
            admin: !self.admin_tenants.is_empty(),
        }
    }
}

/// The session of this request, if valid; refreshes its idle timer.
pub(crate) async fn viewer(state: &AppState, headers: &HeaderMap) -> WebResult<Option<Viewer>> {
    let Some(id) = cookie(headers, &cookie_name(state, "actiond_session")) else {
        return Ok(None);
    };
    if id.len() != 43 {
        return Ok(None);
    }
    let id_sha256 = sha256_hex(id.as_bytes());
    let Some(s) =
        web_sessions::touch(&state.db, &state.clock, &id_sha256, state.session_idle).await?
    else {
        return Ok(None);
    };
    let docs = {
        let c = state.db.client().await?;
        state.docs.latest_of_every_tenant(&c).await?
    };
    let tenants = authz::authorized_tenants(
        &docs,
        state.person_issuer(),
        &s.issuer,
        &s.subject,
        &s.claims,
    );
    let admin_tenants = authz::admin_tenants(
        &docs,
        state.person_issuer(),
        &s.issuer,
        &s.subject,
        &s.claims,
    );
    Ok(Some(Viewer {
        admin_tenants,
        claims: s.claims,
        id_sha256,
        issuer: s.issuer,
        subject: s.subject,
        email: s.email,
        name: s.display_name,
        csrf: s.csrf_token,
        dev: s.dev_login,
        tenants,
        times: actiond_store::approvals::SessionTimes {
            claims_at: s.created_at,
            auth_time: s.auth_time,
        },
    }))
}

/// Middleware: a 4xx page (a 404 above all) keeps the navigation. Error pages are rendered
/// where the person is not known; when the request carries a valid session, the page is
/// rendered again with the signed-in header (queue, history, admin links, sign out). Clients
/// that asked for problem details are left to `error::problem_when_asked`.
pub(crate) async fn navigation_on_errors(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let headers = request.headers().clone();
    let response = next.run(request).await;
    if !response.status().is_client_error()
        || crate::error::wants_problem(&headers)
        || response
            .extensions()
            .get::<crate::error::WithoutNavigation>()
            .is_none()
    {
        return response;
    }
    let Some(info) = response
        .extensions()
        .get::<crate::error::ProblemInfo>()
        .cloned()
    else {
        return response;
    };
    let viewer = match viewer(&state, &headers).await {
        Ok(Some(v)) => v,
        _ => return response,
    };
    let page = crate::error::ErrorPage {
        status: response.status().as_u16(),
        title: info.title,
        message: &info.detail,
        operation_id: None,
        chrome: Some(viewer.chrome()),
    };
    let body = render(&page).into_body();
    let (mut parts, _) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, body)
}

/// The session of a GET page, or a redirect to the login page coming back to `next`.
pub(crate) async fn require_viewer(
    state: &AppState,
    headers: &HeaderMap,
    next: &str,
) -> WebResult<Viewer> {
    viewer(state, headers)
        .await?
        .ok_or_else(|| WebError::Login {
            next: next.to_owned(),
        })
}

/// The session of a POST: same origin, a valid session, and its CSRF token.
pub(crate) async fn require_post(
    state: &AppState,
    headers: &HeaderMap,
    csrf: Option<&str>,
) -> WebResult<Viewer> {
    if let Some(reason) = headers::foreign_origin(state, headers) {
        state
            .metrics
            .csrf_rejections
            .with_label_values(&[reason])
            .inc();
        return Err(WebError::Forbidden(
            "This form was not sent from this site; nothing was done.".into(),
        ));
    }
    let Some(v) = viewer(state, headers).await? else {
        return Err(WebError::Unauthorized);
    };
    match csrf {
        Some(t) if ct_eq(t, &v.csrf) => Ok(v),
        other => {
            let reason = if other.is_none() {
                "missing"
            } else {
                "mismatch"
            };
            state
                .metrics
                .csrf_rejections
                .with_label_values(&[reason])
                .inc();
            Err(WebError::Forbidden(
                "The form's security token is missing or belongs to another session; reload the page and try again. Nothing was done.".into(),
            ))
        }
    }
}

/// Creates a session for the person `who` and returns its `Set-Cookie` value.
pub(crate) async fn create_session(
    state: &AppState,
    who: &Identity,
    dev: bool,
) -> WebResult<HeaderValue> {
    let id = random_token();
    let csrf = random_token();
    let id_sha256 = sha256_hex(id.as_bytes());
    let session = web_sessions::NewSession {
        id_sha256: &id_sha256,
        issuer: &who.issuer,
        subject: &who.subject,
        email: who.email.as_deref(),
        display_name: who.name.as_deref(),
        claims: &who.claims,
        csrf_token: &csrf,
        dev_login: dev,
        auth_time: who.auth_time,
    };
    web_sessions::create(&state.db, &state.clock, &session, state.session_absolute).await?;
    set_cookie(state, "actiond_session", &id, None)
}

/// Where to send a person who must sign in again before an Approve counts (`max_age`
/// seconds: `approvers.max_claims_age` or a handler's `reauth_within`), coming back to `next`:
/// the IdP with OIDC `max_age`, or the dev login form.
pub(crate) fn sign_in_again(state: &AppState, v: &Viewer, next: &str, max_age: u64) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    q.append_pair("next", next);
    if v.dev || state.oidc.is_none() {
        q.append_pair("again", "1");
        format!("/login?{}", q.finish())
    } else {
        q.append_pair("max_age", &max_age.to_string());
        format!("/login/oidc?{}", q.finish())
    }
}

/// Query of `/login` and `/login/oidc`.
#[derive(Debug, Deserialize)]
pub(crate) struct NextQuery {
    next: Option<String>,
    logged_out: Option<String>,
    /// Show the sign-in choices even with a session (a rule asked for a fresh sign-in).
    again: Option<String>,
    /// OIDC `max_age` in seconds for the authorization request.
    max_age: Option<u64>,
}

/// `GET /login`: the sign-in choices.
pub(crate) async fn login_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<NextQuery>,
) -> WebResult<Response> {
    let next = safe_next(q.next.as_deref());
    if q.again.is_none() && viewer(&state, &headers).await?.is_some() {
        return Ok(Redirect::to(&next).into_response());
    }
    let prelogin = state.dev.as_ref().map(|_| random_token());
    let next_q = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("next", &next)
        .finish();
    let page = LoginPage {
        oidc_issuer: state.oidc.as_ref().map(|o| o.issuer().to_owned()),
        oidc_href: format!("/login/oidc?{next_q}"),
        dev: state.dev.is_some(),
        prelogin: prelogin.clone().unwrap_or_default(),
        next,
        logged_out: q.logged_out.is_some(),
    };
    let mut res = render(&page).into_response();
    if let Some(p) = prelogin {
        res.headers_mut().append(
            header::SET_COOKIE,
            set_cookie(&state, "actiond_prelogin", &p, Some(600))?,
        );
    }
    Ok(res)
}

/// `GET /login/oidc`: starts the authorization code flow.
pub(crate) async fn login_oidc(
    State(state): State<AppState>,
    Query(q): Query<NextQuery>,
) -> WebResult<Response> {
    let Some(oidc) = state.oidc.as_ref() else {
        return Err(WebError::NotFound);
    };
    let next = safe_next(q.next.as_deref());
    // A `max_age` beyond the oldest `auth_time` believed at all asks for nothing more.
    let max_age = q
        .max_age
        .filter(|m| *m < crate::oidc::AUTH_TIME_MAX_AGE.as_secs())
        .map(Duration::from_secs);
    let started = oidc.start(max_age).await?;
    let binding = random_token();
    let login = web_sessions::LoginState {
        binding_sha256: sha256_hex(binding.as_bytes()),
        nonce: started.nonce,
        pkce_verifier: started.pkce_verifier,
        return_to: next,
        // Below a year, so it fits.
        max_age_secs: max_age.map(|m| m.as_secs() as i64),
    };
    web_sessions::start_login(
        &state.db,
        &state.clock,
        &sha256_hex(started.state.as_bytes()),
        &login,
        LOGIN_TTL,
    )
    .await?;
    let mut res = Redirect::to(started.auth_url.as_str()).into_response();
    res.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, "actiond_login", &binding, Some(LOGIN_TTL.as_secs()))?,
    );
    Ok(res)
}

/// Query of the OIDC callback.
#[derive(Debug, Deserialize)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

fn login_refused(state: &AppState, reason: &'static str, message: &str) -> WebError {
    state
        .metrics
        .logins
        .with_label_values(&["oidc", reason])
        .inc();
    WebError::BadRequest(message.to_owned())
}

/// `GET /oidc/callback`: consumes the login state, exchanges the code, verifies the ID token,
/// creates the session.
pub(crate) async fn callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> WebResult<Response> {
    let Some(oidc) = state.oidc.as_ref() else {
        return Err(WebError::NotFound);
    };
    if let Some(e) = q.error.as_deref() {
        let e: String = e.chars().filter(char::is_ascii_graphic).take(64).collect();
        return Err(login_refused(
            &state,
            "idp_error",
            &format!(
                "The identity provider did not sign you in ({e}). Start again from the sign-in page."
            ),
        ));
    }
    let (Some(code), Some(st)) = (q.code.as_deref(), q.state.as_deref()) else {
        return Err(login_refused(
            &state,
            "malformed",
            "The sign-in answer lacks code or state. Start again from the sign-in page.",
        ));
    };
    let binding = cookie(&headers, &cookie_name(&state, "actiond_login"));
    let row = web_sessions::take_login(&state.db, &state.clock, &sha256_hex(st.as_bytes())).await?;
    let Some(web_sessions::TakenLogin {
        login,
        age_secs: login_age_secs,
    }) = row
    else {
        return Err(login_refused(
            &state,
            "unknown_state",
            "This sign-in is unknown, expired or already used. Start again from the sign-in page.",
        ));
    };
    let same_browser =
        binding.is_some_and(|b| ct_eq(&sha256_hex(b.as_bytes()), &login.binding_sha256));
    if !same_browser {
        return Err(login_refused(
            &state,
            "foreign_browser",
            "This sign-in was started in another browser. Start again from the sign-in page.",
        ));
    }
    let (nonce, verifier, return_to) = (login.nonce, login.pkce_verifier, login.return_to);
    let asked = login.max_age_secs.map(|m| crate::oidc::MaxAgeAsked {
        max_age: Duration::from_secs(m.max(0) as u64),
        login_age_secs,
    });
    let who = match oidc.finish(code, &verifier, &nonce, asked).await {
        Ok(w) => w,
        Err(r) => {
            // The reason and what was wrong only: never the code, a token, the nonce or state.
            tracing::warn!(reason = r.reason, detail = %r.detail, "OIDC login refused");
            return Err(login_refused(
                &state,
                r.reason,
                &format!(
                    "The identity provider's answer was refused: {}. Nothing was signed in. Start again; if it keeps failing, tell your operator the time and this message.",
                    r.detail
                ),
            ));
        }
    };
    let cookie_v = create_session(&state, &who, false).await?;
    state
        .metrics
        .logins
        .with_label_values(&["oidc", "ok"])
        .inc();
    tracing::info!(issuer = %who.issuer, subject = %who.subject, "approver signed in");
    let mut res = Redirect::to(&safe_next(Some(&return_to))).into_response();
    res.headers_mut().append(header::SET_COOKIE, cookie_v);
    res.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, "actiond_login", "", Some(0))?,
    );
    Ok(res)
}

/// `POST /logout`.
pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> WebResult<Response> {
    let form = crate::pages::chrome::parse_form(&body)?;
    let v = require_post(&state, &headers, form.get("csrf").map(String::as_str)).await?;
    web_sessions::delete(&state.db, &v.id_sha256).await?;
    let mut res = (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, "/login?logged_out=1")],
    )
        .into_response();
    res.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, "actiond_session", "", Some(0))?,
    );
    Ok(res)
}

/// Deletes expired login states and sessions.
pub(crate) async fn sweep(state: &AppState) -> anyhow::Result<()> {
    web_sessions::sweep(&state.db, &state.clock, state.session_idle).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_redirect_targets() {
        for ok in ["/queue", "/p/0b7c?x=1", "/passkeys?next=%2Fp%2F1"] {
            assert_eq!(local_target(ok), Some(ok));
        }
        for bad in [
            "",
            "queue",
            "//evil.example",
            "/\\evil.example",
            "\\/evil.example",
            "/p\\x",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r\n/evil",
            "/p/1 x",
            "https://evil.example",
            "javascript:alert(1)",
            "/p/\u{e9}",
        ] {
            assert_eq!(local_target(bad), None, "{bad:?}");
            assert_eq!(safe_next(Some(bad)), "/queue");
        }
        assert_eq!(local_target(&format!("/{}", "a".repeat(512))), None);
    }
}
