//! Page chrome and form parsing: the bottom of the pages. Every page renders through
//! [`render`] with the signed-in header [`Chrome`], reads its POST body with [`parse_form`], and
//! writes times and ages with [`human_age`] and [`when`]. This module imports nothing of the
//! crate, so every page, `error` and `session` may use it without an import circle.
//!
//! All agent-written text reaches the page models already passed through
//! `text::reveal_invisible`; askama HTML-escapes every value (no `|safe` anywhere).

use actiond_core::text::reveal_invisible;
use askama::Template;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// Renders a template as an HTML response, or an opaque 500.
pub(crate) fn render<T: Template>(t: &T) -> Response {
    match t.render() {
        Ok(html) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response(),
        Err(e) => {
            let op = uuid::Uuid::new_v4();
            tracing::error!(operation_id = %op, error = %e, "template rendering failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("internal error; operation id {op}"),
            )
                .into_response()
        }
    }
}

/// The header of every signed-in page.
#[derive(Debug, Clone, Default)]
pub(crate) struct Chrome {
    pub(crate) who: String,
    pub(crate) subject: String,
    pub(crate) tenants: String,
    pub(crate) csrf: String,
    pub(crate) dev: bool,
    /// The person administers at least one tenant: the nav links the admin pages.
    pub(crate) admin: bool,
}

/// A form field given more than once ([`parse_form`]); `error` answers it as a 400 with
/// this message, which names the field.
#[derive(Debug)]
pub(crate) struct RepeatedField(pub(crate) String);

/// Parses an `application/x-www-form-urlencoded` body whatever its declared content type (the
/// CSRF check must run before any content-type rejection).
///
/// Errors: a field given more than once is a 400 naming it. Our forms send each field once,
/// and reading only the first (or last) of `verdict=deny&verdict=approve` would let what a
/// proxy, a log and the app each think was decided differ.
pub(crate) fn parse_form(body: &[u8]) -> Result<HashMap<String, String>, RepeatedField> {
    let mut m = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(body) {
        if m.insert(k.to_string(), v.into_owned()).is_some() {
            return Err(RepeatedField(format!(
                "{}: given more than once; each form field is sent once",
                reveal_invisible(&k.chars().take(64).collect::<String>(), false)
            )));
        }
    }
    Ok(m)
}

/// The request's path and query, to come back to after a login.
pub(crate) fn path_and_query(uri: &Uri) -> String {
    uri.path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/queue".into())
}

/// "3 min", "2 h 05 min", "4 d 3 h".
pub(crate) fn human_age(secs: i64) -> String {
    let s = secs.max(0);
    if s < 60 {
        "<1 min".into()
    } else if s < 3600 {
        format!("{} min", s / 60)
    } else if s < 86_400 {
        format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
    } else {
        format!("{} d {} h", s / 86_400, (s % 86_400) / 3600)
    }
}

/// A time as pages show it: `2026-01-31 14:05:09 UTC`.
pub(crate) fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `s` cut to `max` characters, with `…` when anything was cut.
pub(crate) fn short(s: String, max: usize) -> String {
    if s.chars().count() <= max {
        s
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}
