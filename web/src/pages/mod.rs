//! The approval pages, one module a page, each page's askama template struct beside its
//! handler: [`queue`] (`GET /`, `GET /queue`), [`history`] (`GET /history`), [`decision`]
//! (`GET /p/{id}`) and [`decide`] (`POST /p/{id}/decide`). [`list`] is what the queue and the
//! history share; [`chrome`] is the bottom: page chrome, rendering and form parsing, which
//! imports nothing of the crate.
//!
//! The imports go one way: a page uses `chrome`, `error`, `session` and the modules that
//! compute what it shows (`card`, `describe`, `staging`, `params_view`, `freeze`,
//! `passkey`); none of those imports a page back.

pub(crate) mod chrome;
pub(crate) mod decide;
pub(crate) mod decision;
pub(crate) mod history;
pub(crate) mod list;
pub(crate) mod queue;
