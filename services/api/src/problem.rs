//! RFC 9457 problem details. 4xx bodies name the field and the rule; 5xx bodies are opaque and
//! carry a request id, the detail goes to the log.

use actiond_core::FieldError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An HTTP error rendered as `application/problem+json`.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// A URI reference naming the problem type (`urn:actiond:problem:<code>`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Short summary.
    pub title: String,
    /// HTTP status.
    pub status: u16,
    /// What went wrong, for this occurrence.
    pub detail: String,
    /// Field errors, when the request had invalid fields.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    /// Request id for 5xx (find the detail in the log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    #[serde(skip)]
    retry_after: Option<u64>,
    #[serde(skip)]
    www_authenticate: bool,
}

impl Problem {
    /// A problem with a stable snake_case `code`.
    pub fn new(status: StatusCode, code: &str, title: &str, detail: impl Into<String>) -> Self {
        Self {
            type_: format!("urn:actiond:problem:{code}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            errors: Vec::new(),
            request_id: None,
            retry_after: None,
            www_authenticate: false,
        }
    }
    /// 400 with field errors; `detail` lists them.
    pub fn invalid(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        let mut p = Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "The request is invalid",
            detail,
        );
        p.errors = errors;
        p
    }
    /// 400 for one field.
    pub fn field(field: &str, rule: impl Into<String>) -> Self {
        Self::invalid(vec![FieldError::new(field, rule)])
    }
    /// 401 with `WWW-Authenticate: Bearer`.
    pub fn unauthorized(detail: &str) -> Self {
        let mut p = Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Authentication required",
            detail,
        );
        p.www_authenticate = true;
        p
    }
    /// 404.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "Not found",
            format!("{what} not found"),
        )
    }
    /// 500, opaque; logs `cause` with a fresh request id.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        let id = uuid::Uuid::new_v4().to_string();
        tracing::error!(request_id = %id, error = %cause, "internal error");
        let mut p = Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            "the request failed; quote the request_id to the operator",
        );
        p.request_id = Some(id);
        p
    }
    /// 503, opaque, retryable.
    pub fn unavailable(cause: &dyn std::fmt::Display) -> Self {
        let id = uuid::Uuid::new_v4().to_string();
        tracing::warn!(request_id = %id, error = %cause, "service unavailable");
        let mut p = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Temporarily unavailable",
            "try again shortly",
        );
        p.request_id = Some(id);
        p.retry_after = Some(2);
        p
    }
    /// Adds `Retry-After` seconds.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
}

impl From<actiond_store::StoreError> for Problem {
    fn from(e: actiond_store::StoreError) -> Self {
        match &e {
            actiond_store::StoreError::Pool(_) => Problem::unavailable(&e.detail()),
            actiond_store::StoreError::Db(d) if d.is_closed() || d.as_db_error().is_none() => {
                Problem::unavailable(&e.detail())
            }
            _ => Problem::internal(&e.detail()),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut resp = (status, body).into_response();
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(s) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&s.to_string())
        {
            h.insert(header::RETRY_AFTER, v);
        }
        if self.www_authenticate {
            h.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"actiond\""),
            );
        }
        resp
    }
}
