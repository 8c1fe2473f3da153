//! Security headers on every response, the stylesheet, and the same-origin check of POSTs.
//!
//! The only script is the passkey ceremony (`/static/passkey.js`): the CSP allows scripts and
//! `fetch` to this origin only, never inline (`default-src 'none'`), styles only from this
//! origin, forms only to this origin, and no framing (`frame-ancestors 'none'` plus
//! `X-Frame-Options: DENY` for old browsers), so a decision page cannot be clickjacked.
//! `Referrer-Policy: same-origin` keeps proposal URLs from leaking to other sites; it is not
//! `no-referrer` because under that policy browsers send `Origin: null` on form POSTs, which
//! the origin check below (rightly) refuses.

use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The Content-Security-Policy of every response.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const STYLESHEET: &str = include_str!("../static/app.css");
const PASSKEY_SCRIPT: &str = include_str!("../static/passkey.js");

/// Adds the security headers; pages are never cached (they show live decisions).
pub(crate) async fn security_headers(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "permissions-policy",
        HeaderValue::from_static("camera=(), microphone=(), geolocation=(), payment=()"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if state.secure_cookies {
        h.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    res
}

/// `GET /static/app.css`.
pub(crate) async fn stylesheet() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        STYLESHEET,
    )
        .into_response()
}

/// `GET /static/passkey.js`: the WebAuthn ceremonies of the passkeys and decision pages.
pub(crate) async fn passkey_script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        PASSKEY_SCRIPT,
    )
        .into_response()
}

/// Why a POST was refused before its CSRF token was even looked at.
pub(crate) fn foreign_origin(state: &AppState, headers: &HeaderMap) -> Option<&'static str> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && (site == "cross-site" || site == "same-site")
    {
        return Some("sec-fetch-site");
    }
    match headers.get(header::ORIGIN).map(HeaderValue::to_str) {
        None => None,
        Some(Ok(o)) if o == state.origin => None,
        Some(_) => Some("origin"),
    }
}
