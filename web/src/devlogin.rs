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
use crate::session::{cookie, cookie_name, create_session, safe_next, set_cookie};
use crate::token::ct_eq;
use crate::{AppState, DEV_ISSUER, headers};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::json;

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
    let form = crate::pages::chrome::parse_form(&body)?;
    let get = |k: &str| form.get(k).map(|s| s.trim().to_owned()).unwrap_or_default();
    let pre_cookie = cookie(&headers, &cookie_name(&state, "actiond_prelogin")).unwrap_or_default();
    if pre_cookie.is_empty() || !ct_eq(&pre_cookie, &get("prelogin")) {
        return Err(WebError::Forbidden(
            "The sign-in form expired or came from elsewhere; reload the sign-in page.".into(),
        ));
    }
    if get("code").trim().is_empty() {
        return Err(WebError::BadRequest(
            "code: the one-time code is required; it is on the terminal running actiond web".into(),
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
    if groups.len() > 50 {
        return Err(WebError::BadRequest(format!(
            "groups: at most 50 comma-separated names, this has {}",
            groups.len()
        )));
    }
    if groups.iter().any(|g| !valid_text(g, 128)) {
        return Err(WebError::BadRequest(
            "groups: each name at most 128 visible characters".into(),
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
