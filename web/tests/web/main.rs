//! Integration tests of actiond-web against a real Postgres (a fresh database per test), a
//! real OpenID provider and headless Chromium (see `browser.rs`), and over plain HTTP with the
//! dev login (`http.rs`). One test binary, modules per concern.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers fail the test loudly"
)]

mod browser;
mod http;
mod passkey;
mod passkey_attacks;
mod support;
