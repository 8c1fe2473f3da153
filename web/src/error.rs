//! Errors of the web pages. 4xx pages say what to do; 5xx pages are opaque and carry an
//! operation id that is also in the log line with the detail.

use crate::views::{ErrorPage, render};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

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
    /// Anything else: opaque to the person.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl From<actiond_store::StoreError> for WebError {
    fn from(e: actiond_store::StoreError) -> Self {
        match e {
            actiond_store::StoreError::NotFound(_) => WebError::NotFound,
            actiond_store::StoreError::Conflict(m) => WebError::Conflict(m),
            other => WebError::Internal(anyhow::anyhow!(other.detail())),
        }
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
            WebError::Internal(e) => {
                let op = uuid::Uuid::new_v4();
                tracing::error!(operation_id = %op, error = %format!("{e:#}"), "internal error");
                let page = ErrorPage {
                    status: 500,
                    title: "Internal error",
                    message: "Something failed on our side; nothing was decided. Try again, and give this operation id to your operator if it keeps failing.",
                    operation_id: Some(op.to_string()),
                };
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    [(header::CACHE_CONTROL, "no-store")],
                    render(&page),
                )
                    .into_response();
            }
        };
        let page = ErrorPage {
            status: status.as_u16(),
            title,
            message: &message,
            operation_id: None,
        };
        (status, [(header::CACHE_CONTROL, "no-store")], render(&page)).into_response()
    }
}

/// Result of page handlers.
pub(crate) type WebResult<T> = Result<T, WebError>;
