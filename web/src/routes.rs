//! The web service's HTTP routes.

use crate::pages::{decide, decision, history, queue};
use crate::{AppState, admin, devlogin, error, freeze, headers, passkey, session};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

/// The HTTP routes with security headers on every response.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(queue::root))
        .route("/queue", get(queue::queue))
        .route("/history", get(history::history))
        .route("/admin/shadow", get(admin::shadow))
        .route("/admin/approvers", get(admin::approvers))
        .route("/admin/agents", get(admin::agents))
        .route("/admin/agents/{id}/revoke", post(admin::revoke))
        .route("/agents/{id}/freeze", post(freeze::freeze))
        .route("/agents/{id}/unfreeze", post(freeze::unfreeze))
        .route("/p/{id}", get(decision::decision))
        .route("/p/{id}/decide", post(decide::decide))
        .route("/login", get(session::login_page))
        .route("/login/oidc", get(session::login_oidc))
        .route("/oidc/callback", get(session::callback))
        .route("/logout", post(session::logout))
        .route("/dev-login", get(devlogin::page).post(devlogin::submit))
        .route("/passkeys", get(passkey::page).post(passkey::register))
        .route("/passkeys/challenge", post(passkey::challenge))
        .route("/static/app.css", get(headers::stylesheet))
        .route("/static/passkey.js", get(headers::passkey_script))
        .fallback(error::not_found)
        .layer(DefaultBodyLimit::max(16 * 1024))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            session::navigation_on_errors,
        ))
        .layer(axum::middleware::from_fn(error::problem_when_asked))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            headers::security_headers,
        ))
        .with_state(state)
}
