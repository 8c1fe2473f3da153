//! Errors of the web pages. 4xx pages say what to do; 5xx pages are opaque and carry an
//! operation id that is also in the log line with the detail.

use crate::pages::chrome::{Chrome, RepeatedField, render};
use askama::Template;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

/// An error page.
#[derive(Template)]
#[template(path = "error.html")]
pub(crate) struct ErrorPage<'a> {
    pub(crate) status: u16,
    pub(crate) title: &'a str,
    pub(crate) message: &'a str,
    pub(crate) operation_id: Option<String>,
    /// The signed-in header, when the request carried a valid session (see
    /// `session::navigation_on_errors`); anonymous error pages link the queue and history.
    pub(crate) chrome: Option<Chrome>,
}

/// A page-level error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebError {
    /// Not found, or not visible to this person (another tenant's proposal).
    #[error("not found")]
    NotFound,
    /// Not logged in: redirect to the login page, coming back to `next`.
    #[error("login required")]
    Login { next: String },
    /// Not logged in on a POST: no redirect, 401.
    #[error("login required")]
    Unauthorized,
    /// Refused (CSRF, origin, owner…); the message is safe to show.
    #[error("{0}")]
    Forbidden(String),
    /// Bad input; the message names the field.
    #[error("{0}")]
    BadRequest(String),
    /// Conflicts with the current state; the message is safe to show.
    #[error("{0}")]
    Conflict(String),
    /// The database cannot serve now (a restart, a failover, no free connection): 503 with
    /// `Retry-After`, and nothing was decided ([`actiond_store::StoreError::is_unavailable`]).
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// Anything else: opaque to the person.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<actiond_store::StoreError> for WebError {
    fn from(e: actiond_store::StoreError) -> Self {
        match e {
            actiond_store::StoreError::NotFound(_) => WebError::NotFound,
            actiond_store::StoreError::Conflict(m) => WebError::Conflict(m),
            other if other.is_unavailable() => WebError::Unavailable(other.detail()),
            other => WebError::Internal(anyhow::anyhow!(other.detail())),
        }
    }
}

impl From<RepeatedField> for WebError {
    fn from(e: RepeatedField) -> Self {
        WebError::BadRequest(e.0)
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let (status, title, message) = match self {
            WebError::Login { next } => {
                let q = url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("next", &next)
                    .finish();
                return Redirect::to(&format!("/login?{q}")).into_response();
            }
            WebError::Unauthorized => (
                StatusCode::UNAUTHORIZED,
                "Sign in required",
                "Your session has ended. Sign in again, then reload the proposal before deciding."
                    .to_owned(),
            ),
            WebError::NotFound => (
                StatusCode::NOT_FOUND,
                "Not found",
                "There is no such page or proposal, or it belongs to a tenant you do not approve for."
                    .to_owned(),
            ),
            WebError::Forbidden(m) => (StatusCode::FORBIDDEN, "Refused", m),
            WebError::BadRequest(m) => (StatusCode::BAD_REQUEST, "Bad request", m),
            WebError::Conflict(m) => (StatusCode::CONFLICT, "Not done", m),
            WebError::Unavailable(detail) => {
                tracing::warn!(error = %detail, "database unavailable");
                let message = "The database cannot be reached just now (a restart or a failover); nothing was decided. Try again in a moment.";
                let page = ErrorPage {
                    status: 503,
                    title: "Temporarily unavailable",
                    message,
                    operation_id: None,
                    chrome: None,
                };
                let mut r = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [
                        (header::CACHE_CONTROL, "no-store"),
                        (header::RETRY_AFTER, "2"),
                    ],
                    render(&page),
                )
                    .into_response();
                r.extensions_mut().insert(ProblemInfo {
                    title: "Temporarily unavailable",
                    detail: message.to_owned(),
                    operation_id: None,
                    extra: None,
                });
                r.extensions_mut().insert(WithoutNavigation);
                return r;
            }
            WebError::Internal(e) => {
                let op = uuid::Uuid::new_v4();
                tracing::error!(operation_id = %op, error = %format!("{e:#}"), "internal error");
                let page = ErrorPage {
                    status: 500,
                    title: "Internal error",
                    message: "Something failed on our side; nothing was decided. Try again, and give this operation id to your operator if it keeps failing.",
                    operation_id: Some(op.to_string()),
                    chrome: None,
                };
                let mut r = (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    [(header::CACHE_CONTROL, "no-store")],
                    render(&page),
                )
                    .into_response();
                r.extensions_mut().insert(ProblemInfo {
                    title: "Internal error",
                    detail: "something failed on our side; nothing was decided".to_owned(),
                    operation_id: Some(op.to_string()),
                    extra: None,
                });
                return r;
            }
        };
        let page = ErrorPage {
            status: status.as_u16(),
            title,
            message: &message,
            operation_id: None,
            chrome: None,
        };
        let mut r = (status, [(header::CACHE_CONTROL, "no-store")], render(&page)).into_response();
        let extra = if status == StatusCode::BAD_REQUEST {
            field_errors(&message)
        } else {
            None
        };
        r.extensions_mut().insert(ProblemInfo {
            title,
            detail: message,
            operation_id: None,
            extra,
        });
        r.extensions_mut().insert(WithoutNavigation);
        r
    }
}

/// Marks an error page rendered without the signed-in header, which
/// `session::navigation_on_errors` renders again with it. Pages that carry their own header (the
/// passkey page) have no such mark and are left as they are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WithoutNavigation;

/// What an error page says, kept beside the HTML so [`problem_when_asked`] can answer
/// `application/problem+json` instead.
#[derive(Debug, Clone)]
pub(crate) struct ProblemInfo {
    pub(crate) title: &'static str,
    pub(crate) detail: String,
    operation_id: Option<String>,
    /// Members added to the problem document (RFC 9457 §3.2 extension members).
    extra: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ProblemInfo {
    /// The title and detail a problem client gets for a page rendered outside [`WebError`].
    pub(crate) fn new(title: &'static str, detail: &str) -> Self {
        Self {
            title,
            detail: detail.to_owned(),
            operation_id: None,
            extra: None,
        }
    }

    /// The same, with extension members (e.g. `sign_in`: where to sign in again).
    pub(crate) fn with_extra(mut self, extra: serde_json::Map<String, serde_json::Value>) -> Self {
        self.extra = Some(extra);
        self
    }
}

/// The `errors` member of a 400 problem, as the API writes it (`[{"field", "rule"}]`), from a
/// message of `field: rule` parts joined by `; ` (every [`WebError::BadRequest`] names its
/// field so); `None` when the message does not name a field.
fn field_errors(message: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    let is_field = |f: &str| {
        !f.is_empty()
            && f.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.[]-".contains(c))
    };
    let errors = message
        .split("; ")
        .map(|part| {
            let (field, rule) = part.split_once(": ")?;
            is_field(field).then(|| serde_json::json!({"field": field, "rule": rule}))
        })
        .collect::<Option<Vec<_>>>()?;
    let mut extra = serde_json::Map::new();
    extra.insert("errors".into(), serde_json::Value::Array(errors));
    Some(extra)
}

/// Whether `Accept` asks for problem details or JSON (with a non-zero `q`) rather than a page.
pub(crate) fn wants_problem(headers: &axum::http::HeaderMap) -> bool {
    actiond_runtime::http::accept_admits(headers, &["application/problem+json", "application/json"])
        .unwrap_or(false)
}

/// Middleware: a client that asks for `application/problem+json` (or JSON) gets every 4xx and
/// 5xx answer as an RFC 9457 problem document instead of an HTML page (the same title and
/// detail; a 5xx keeps only its operation id). Browsers, which ask for `text/html`, still get
/// pages.
pub(crate) async fn problem_when_asked(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let asked = wants_problem(request.headers());
    let response = next.run(request).await;
    let status = response.status();
    if !asked || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let info = response.extensions().get::<ProblemInfo>().cloned();
    let (title, detail, operation_id, extra) = match info {
        Some(i) => (i.title, i.detail, i.operation_id, i.extra),
        None => (
            status.canonical_reason().unwrap_or("Error"),
            status.canonical_reason().unwrap_or("Error").to_owned(),
            None,
            None,
        ),
    };
    let code = title.to_ascii_lowercase().replace(' ', "_");
    let mut body = serde_json::json!({
        "type": format!("urn:actiond:problem:{code}"),
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    if let Some(op) = operation_id {
        body["operation_id"] = serde_json::json!(op);
    }
    for (k, v) in extra.into_iter().flatten() {
        if body.get(&k).is_none() {
            body[k] = v;
        }
    }
    let (mut parts, _) = response.into_parts();
    parts.headers.insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/problem+json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body.to_string()))
}

/// Result of page handlers.
pub(crate) type WebResult<T> = Result<T, WebError>;

/// The answer to any path no route takes.
pub(crate) async fn not_found() -> WebError {
    WebError::NotFound
}

#[cfg(test)]
mod tests {
    /// A 400's problem document lists its fields as the API's does; a message that names no
    /// field gets no `errors`.
    #[test]
    fn bad_requests_list_their_fields() {
        let e = super::field_errors(
            "doc_version: must be an integer: the policy version shown on the page",
        )
        .unwrap();
        assert_eq!(
            serde_json::Value::Object(e),
            serde_json::json!({"errors": [{"field": "doc_version",
                "rule": "must be an integer: the policy version shown on the page"}]})
        );
        let two = super::field_errors("a.b[0]: is required; c: must be short").unwrap();
        assert_eq!(two["errors"].as_array().unwrap().len(), 2);
        assert!(super::field_errors("The sign-in answer lacks code or state.").is_none());
        assert!(super::field_errors("Nothing was decided: try again").is_none());
    }
}
