//! The dev login: `actiond dev` without an identity provider.
//!
//! It exists only when `--dev-login` is given, and start-up refuses it unless the web listener
//! is bound to a loopback address. Each login needs the current one-time code, printed on
//! stderr (the operator's terminal) at start and again after every use; five wrong codes
//! replace it too. A local agent that can reach the port still cannot read the terminal, so it
//! cannot approve its own proposals through this door. The person picks a subject and groups
//! (the `groups` claim); sessions record the issuer [`crate::DEV_ISSUER`], so a tenant document
//! that pins `approvers.issuer` never trusts a dev login.

use crate::error::{WebError, WebResult};
use crate::session::{cookie, cookie_name, create_session, ct_eq, safe_next, set_cookie};
use crate::{AppState, DEV_ISSUER, headers};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use rand::Rng as _;
use serde_json::json;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// Wrong codes accepted before the code is replaced.
const MAX_FAILURES: u32 = 5;
/// Unambiguous characters; 12 of them carry 60 bits.
const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

fn new_code() -> String {
    let mut rng = rand::rng();
    (0..12)
        .map(|i| {
            let c = ALPHABET
                .get(rng.random_range(0..ALPHABET.len()))
                .copied()
                .unwrap_or(b'A') as char;
            if i == 4 || i == 8 {
                format!("-{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// State of the dev login.
pub(crate) struct DevLogin {
    code: Mutex<String>,
    failures: AtomicU32,
    url: String,
}

impl DevLogin {
    /// Creates the first code and prints it on stderr.
    pub(crate) fn new(public_url: &url::Url) -> Self {
        let url = public_url
            .join("login")
            .map(|u| u.to_string())
            .unwrap_or_default();
        let d = Self {
            code: Mutex::new(new_code()),
            failures: AtomicU32::new(0),
            url,
        };
        d.announce("");
        d
    }

    fn announce(&self, why: &str) {
        let code = self.current();
        actiond_runtime::tell(&format!(
            "actiond web: dev login one-time code{why}: {code}   (sign in at {})",
            self.url
        ));
    }

    fn rotate(&self, why: &str) {
        if let Ok(mut c) = self.code.lock() {
            *c = new_code();
        }
        self.failures.store(0, Ordering::SeqCst);
        self.announce(why);
    }

    /// The current code.
    pub(crate) fn current(&self) -> String {
        self.code.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Checks a code; a match consumes it, too many misses replace it.
    fn check(&self, given: &str) -> bool {
        let given = given.trim().to_ascii_uppercase();
        let ok = ct_eq(&given, &self.current());
        if ok {
            self.rotate(" (the previous one was used)");
        } else if self.failures.fetch_add(1, Ordering::SeqCst) + 1 >= MAX_FAILURES {
            self.rotate(" (too many wrong codes)");
        }
        ok
    }
}

/// `GET /dev-login`: the form is on the login page.
pub(crate) async fn page(State(state): State<AppState>) -> WebResult<Redirect> {
    if state.dev.is_none() {
        return Err(WebError::NotFound);
    }
    Ok(Redirect::to("/login"))
}

fn valid_text(s: &str, max: usize) -> bool {
    !s.is_empty() && s.chars().count() <= max && !s.chars().any(actiond_core::text::is_suspicious)
}

/// `POST /dev-login`.
pub(crate) async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> WebResult<Response> {
    let Some(dev) = state.dev.as_ref() else {
        return Err(WebError::NotFound);
    };
    if headers::foreign_origin(&state, &headers).is_some() {
        return Err(WebError::Forbidden(
            "This form was not sent from this site.".into(),
        ));
    }
    let form = crate::pages::parse_form(&body)?;
    let get = |k: &str| form.get(k).map(|s| s.trim().to_owned()).unwrap_or_default();
    let pre_cookie = cookie(&headers, &cookie_name(&state, "actiond_prelogin")).unwrap_or_default();
    if pre_cookie.is_empty() || !ct_eq(&pre_cookie, &get("prelogin")) {
        return Err(WebError::Forbidden(
            "The sign-in form expired or came from elsewhere; reload the sign-in page.".into(),
        ));
    }
    if !dev.check(&get("code")) {
        state
            .metrics
            .logins
            .with_label_values(&["dev", "bad_code"])
            .inc();
        return Err(WebError::Forbidden(
            "Wrong or used one-time code. The current code is on the terminal running actiond web."
                .into(),
        ));
    }
    let subject = get("subject");
    if !valid_text(&subject, 128) {
        return Err(WebError::BadRequest(
            "subject: 1 to 128 visible characters".into(),
        ));
    }
    let email = Some(get("email")).filter(|e| !e.is_empty());
    if email
        .as_deref()
        .is_some_and(|e| !valid_text(e, 254) || !e.contains('@'))
    {
        return Err(WebError::BadRequest("email: an email address".into()));
    }
    let groups: Vec<String> = get("groups")
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(str::to_owned)
        .collect();
    if groups.len() > 50 || groups.iter().any(|g| !valid_text(g, 128)) {
        return Err(WebError::BadRequest(
            "groups: at most 50 comma-separated names of visible characters".into(),
        ));
    }
    let claims = json!({"groups": groups});
    let who = crate::oidc::Identity {
        issuer: DEV_ISSUER.to_owned(),
        subject: subject.clone(),
        email: email.clone(),
        name: None,
        claims,
        auth_time: None,
    };
    let cookie_v = create_session(&state, &who, true).await?;
    state.metrics.logins.with_label_values(&["dev", "ok"]).inc();
    tracing::warn!(subject = %subject, "dev login used");
    let next = safe_next(form.get("next").map(String::as_str));
    let mut res = (StatusCode::SEE_OTHER, [(header::LOCATION, next)]).into_response();
    res.headers_mut().append(header::SET_COOKIE, cookie_v);
    res.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, "actiond_prelogin", "", Some(0))?,
    );
    Ok(res)
}
