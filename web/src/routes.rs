//! The web service's HTTP routes.

use crate::{AppState, admin, devlogin, error, freeze, headers, pages, passkey, session};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

/// The HTTP routes with security headers on every response.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(pages::root))
        .route("/queue", get(pages::queue))
        .route("/history", get(pages::history))
        .route("/admin/shadow", get(admin::shadow))
        .route("/admin/approvers", get(admin::approvers))
        .route("/admin/agents", get(admin::agents))
        .route("/admin/agents/{id}/revoke", post(admin::revoke))
        .route("/agents/{id}/freeze", post(freeze::freeze))
        .route("/agents/{id}/unfreeze", post(freeze::unfreeze))
        .route("/p/{id}", get(pages::decision))
        .route("/p/{id}/decide", post(pages::decide))
        .route("/login", get(session::login_page))
        .route("/login/oidc", get(session::login_oidc))
        .route("/oidc/callback", get(session::callback))
        .route("/logout", post(session::logout))
        .route("/dev-login", get(devlogin::page).post(devlogin::submit))
        .route("/passkeys", get(passkey::page).post(passkey::register))
        .route("/passkeys/challenge", post(passkey::challenge))
        .route("/static/app.css", get(headers::stylesheet))
        .route("/static/passkey.js", get(headers::passkey_script))
        .fallback(pages::not_found)
        .layer(DefaultBodyLimit::max(16 * 1024))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            error::navigation_on_errors,
        ))
        .layer(axum::middleware::from_fn(error::problem_when_asked))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            headers::security_headers,
        ))
        .with_state(state)
}
