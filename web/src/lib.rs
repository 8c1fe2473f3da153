//! actiond-web: the approval app (design, "web (approvals)").
//!
//! People log in through OpenID Connect (authorization code + PKCE S256 + `state` + `nonce`,
//! discovery from the issuer URL, ID-token algorithms from configuration only) and decide one
//! escalated proposal at a time. Approvers are identified by (issuer, subject), never by email;
//! which tenants a person approves for is computed on every request from the ID-token claims
//! kept in the session and the tenants' *current* documents (`approvers:`), so a document
//! change takes effect at once and a group removal at the next login (sessions are short).
//!
//! - [`WebArgs`]: configuration (flags and `ACTIOND_WEB_*` variables; secrets from files only).
//! - [`serve`] / [`run`]: the process; [`router`]: the HTTP routes, for tests to mount.
//! - `oidc`: the OpenID Connect client; `session`: Postgres-backed sessions, cookies, CSRF,
//!   the login page; `authz`: tenant authorization from claims; `pages`: one module per page
//!   (queue, history, decision page, decision POST) above `pages::chrome` (rendering, the
//!   signed-in header, form parsing), which imports nothing of the crate; `admin`, `passkey`,
//!   `freeze`: the tenant-admin pages, passkeys, freezing an agent, each with its templates;
//!   `notify`: escalation notices (Slack-compatible webhook, SMTP email); `devlogin`: the
//!   loopback-only dev login with a one-time code (`devcode`); `headers`: security headers.
//! - Imports go one way (no module imports one that imports it back): `state` and the leaves
//!   below it (`config`, `metrics`, `oidc`, `fatigue`, `devcode`, `token`), then `error`,
//!   `headers`, `session`, the pages and the modules they compute with, then `routes` and
//!   `run`.
//!
//! Routes: `GET /queue`, `GET /history`, `GET /p/{id}`, `POST /p/{id}/decide`, `GET /login`,
//! `GET /login/oidc`, `GET /oidc/callback`, `POST /logout`, `GET|POST /dev-login`,
//! `GET|POST /passkeys`, `POST /passkeys/challenge` (`passkey`: passkey-signed approvals),
//! `GET /static/app.css`, `GET /static/passkey.js`. No state change on GET except starting a login.

mod admin;
mod authz;
mod card;
mod config;
mod describe;
mod devcode;
mod devlogin;
mod effect_view;
mod error;
mod fact_text;
mod fatigue;
mod freeze;
mod headers;
mod metrics;
mod notify;
mod oidc;
mod pages;
mod params_view;
mod passkey;
mod pieces;
mod routes;
mod run;
mod session;
mod staging;
mod state;
mod token;

pub use config::WebArgs;
pub use metrics::WebMetrics;
pub use notify::{escape_for_chat, notification_text};
pub use routes::router;
pub use run::{run, serve, serve_state, serve_state_with};
pub use state::{AppState, Inner};

/// Issuer recorded for people who logged in through the dev login (never a real IdP's).
pub const DEV_ISSUER: &str = "urn:actiond:dev-login";
