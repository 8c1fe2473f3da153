//! RFC 9457 problem details: the HTTP form of a [`SubmitError`]. 4xx bodies name the field and
//! the rule; 5xx bodies are opaque, the detail goes to the log. Every body carries the request's
//! `X-Request-Id` as `request_id`, written by the HTTP layer (actiond_runtime::http), the same id
//! the request's log lines carry.

use crate::error::SubmitError;
use actiond_core::FieldError;
use actiond_store::StoreError;
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
    #[serde(skip)]
    retry_after: Option<u64>,
    #[serde(skip)]
    www_authenticate: bool,
}

impl Problem {
    /// A problem with a stable snake_case `code`.
    fn new(status: StatusCode, code: &str, title: &str, detail: impl Into<String>) -> Self {
        Self {
            type_: format!("urn:actiond:problem:{code}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail: detail.into(),
            errors: Vec::new(),
            retry_after: None,
            www_authenticate: false,
        }
    }
    /// A refusal made by the HTTP layer before any handler ran (405, 406, 415, a foreign
    /// `Host`…): `code` a stable snake_case name, `detail` what to send instead.
    pub fn transport(status: StatusCode, code: &str, detail: impl Into<String>) -> Self {
        let title = status.canonical_reason().unwrap_or("Request refused");
        Self::new(status, code, title, detail)
    }

    /// 405: the path exists, the method does not (the router adds `Allow`).
    pub fn method_not_allowed() -> Self {
        Self::transport(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this path does not accept this method; the Allow header lists those it does",
        )
    }

    /// 400 with field errors; `detail` lists them.
    fn invalid(errors: Vec<FieldError>) -> Self {
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
    /// 401 with `WWW-Authenticate: Bearer`.
    fn unauthorized(detail: &str) -> Self {
        let mut p = Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Authentication required",
            detail,
        );
        p.www_authenticate = true;
        p
    }
    /// 500, opaque; logs `cause` inside the request's span, whose `request_id` is the one the
    /// HTTP layer writes into the body and the `X-Request-Id` header (actiond_runtime::http), so
    /// the id a client quotes finds this line.
    fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            "the request failed; quote the request_id to the operator",
        )
    }
    /// 503, opaque, retryable; logged like [`Problem::internal`].
    fn unavailable(cause: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %cause, "service unavailable");
        let mut p = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Temporarily unavailable",
            "try again shortly",
        );
        p.retry_after = Some(2);
        p
    }
    /// 503 when the database is unreachable (retrying may help), 500 for any other failure.
    fn store(e: &StoreError) -> Self {
        match e {
            e if e.is_unavailable() => Problem::unavailable(&e.detail()),
            // Every other store failure is the server's fault, whatever variants store adds.
            _ => Problem::internal(&e.detail()),
        }
    }
}

/// The one place an error becomes an HTTP status and a problem body.
impl From<SubmitError> for Problem {
    fn from(e: SubmitError) -> Self {
        match e {
            SubmitError::Invalid(errors) => Problem::invalid(errors),
            SubmitError::Unauthorized { detail } => Problem::unauthorized(detail),
            SubmitError::NotFound { what } => Problem::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "Not found",
                format!("{what} not found"),
            ),
            SubmitError::AgentFrozen => Problem::new(
                StatusCode::FORBIDDEN,
                "agent_frozen",
                "Agent frozen",
                "this agent is frozen: an approver stopped it, and its proposals are refused until its owner or a tenant admin unfreezes it",
            ),
            SubmitError::TenantMoved { moved_to, moved_at } => Problem::new(
                StatusCode::CONFLICT,
                "tenant_moved",
                "Tenant moved",
                format!(
                    "this tenant moved to cell {moved_to} at {moved_at}: nothing is filed or run here any more; send proposals and status checks to that cell's API"
                ),
            ),
            SubmitError::TenantNotConfigured => Problem::new(
                StatusCode::CONFLICT,
                "tenant_not_configured",
                "Tenant not configured",
                "this tenant has no document applied; ask the operator to run actiond tenant apply",
            ),
            SubmitError::BodyTooLarge { limit } => Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "Request body too large",
                format!("the body must be at most {limit} bytes"),
            ),
            SubmitError::UnsupportedMediaType => Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Unsupported media type",
                "send Content-Type: application/json",
            ),
            SubmitError::UnsupportedContentEncoding(enc) => Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Unsupported media type",
                format!(
                    "Content-Encoding: {enc:?} is not accepted: send the body uncompressed (no Content-Encoding, or identity)"
                ),
            ),
            SubmitError::IdempotencyKeyReused => Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                "Idempotency-Key reused",
                "this Idempotency-Key was used with a different request body; use a new key for a new request",
            ),
            SubmitError::TooManyOpenEscalations { cap } => {
                let mut p = Problem::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_open_escalations",
                    "Too many open escalations",
                    format!(
                        "this agent already has {cap} proposals waiting for a person; wait for decisions before proposing more"
                    ),
                );
                p.retry_after = Some(60);
                p
            }
            SubmitError::Store(e) => Problem::store(&e),
        }
    }
}

impl IntoResponse for SubmitError {
    fn into_response(self) -> Response {
        Problem::from(self).into_response()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has its status, type and headers; a new variant must be added here too.
    #[test]
    fn every_error_has_its_status_and_type() {
        let cases = [
            (
                SubmitError::field("params.amount", "must be an integer"),
                400,
                "invalid_request",
            ),
            (
                SubmitError::Unauthorized {
                    detail: "send a token",
                },
                401,
                "unauthorized",
            ),
            (SubmitError::NotFound { what: "proposal" }, 404, "not_found"),
            (
                SubmitError::TenantNotConfigured,
                409,
                "tenant_not_configured",
            ),
            (
                SubmitError::BodyTooLarge { limit: 10 },
                413,
                "body_too_large",
            ),
            (
                SubmitError::UnsupportedMediaType,
                415,
                "unsupported_media_type",
            ),
            (
                SubmitError::IdempotencyKeyReused,
                422,
                "idempotency_key_reused",
            ),
            (
                SubmitError::TooManyOpenEscalations { cap: 3 },
                429,
                "too_many_open_escalations",
            ),
            (
                SubmitError::Store(StoreError::Conflict("x".into())),
                500,
                "internal",
            ),
        ];
        for (e, status, code) in cases {
            let p = Problem::from(e);
            assert_eq!(p.status, status, "{p:?}");
            assert_eq!(p.type_, format!("urn:actiond:problem:{code}"));
        }
    }

    #[test]
    fn field_errors_name_the_field_and_the_rule() {
        let p = Problem::from(SubmitError::field("params.amount", "must be an integer"));
        assert_eq!(p.detail, "params.amount: must be an integer");
        assert_eq!(
            p.errors,
            vec![FieldError::new("params.amount", "must be an integer")]
        );
    }

    #[test]
    fn headers_follow_the_variant() {
        let r = SubmitError::TooManyOpenEscalations { cap: 3 }.into_response();
        assert_eq!(r.headers()[header::RETRY_AFTER], "60");
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let r = SubmitError::Unauthorized {
            detail: "send a token",
        }
        .into_response();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert!(r.headers().contains_key(header::WWW_AUTHENTICATE));
    }
}
