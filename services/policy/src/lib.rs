//! actiond-policy: the policy worker (`actiond policy`).
//!
//! Loop: wait for a NOTIFY on `actiond_pending` or the poll interval; claim a batch of
//! `pending` proposals with `FOR UPDATE SKIP LOCKED`; for each, evaluate the tenant's latest
//! document (CEL rules off the async executor, with a time budget; fail closed); record effect,
//! rule, reason, document version and sha256; on `allow` issue the grant in the same
//! transaction; commit; NOTIFY `actiond_approved` so executors wake.
//!
//! Policy also owns the timeouts of the states it produced: `pending` and `escalated` rows
//! older than the tenant's `escalation_ttl` become `expired` (swept every `sweep_interval`).
//! Its admin listener exports the database-derived queue gauges (oldest age per tenant and
//! state) and budget use (per tenant and action), so they come from one place.
//!
//! After the rules, declared budgets may raise `allow` to `escalate` (reserved atomically, see
//! `actiond_store::budgets`), and a tenant's open shadow document is evaluated beside the live
//! one without acting on it ([`shadow`]).

mod classifier;
mod config;
mod metrics;
mod run;
mod shadow;
mod worker;

pub use classifier::Classifiers;
pub use config::PolicyArgs;
pub use metrics::PolicyMetrics;
pub use run::{load_signer, run};
pub use worker::Worker;
