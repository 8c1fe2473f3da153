//! actiond-executor: the only holder of provider credentials (`actiond executor`).
//!
//! A claim batch is one short transaction: claim `approved` proposals with `FOR UPDATE SKIP
//! LOCKED` (other executors skip them; nothing is written to claim them), then for each:
//! 1. load its grant; verify the Ed25519 signature against the public keys in this executor's
//!    own configuration (`--trusted-keys-dir`, files `<key_id>.pub`); the batch's signatures
//!    are verified together, and one by one only when that fails
//!    ([`actiond_core::grant::TrustedKeys::verify_many`]);
//! 2. recompute the intent hash from the stored row; on mismatch refuse ("grant does not match
//!    this proposal");
//! 3. evaluate the tenant's **current** policy: a `policy-` grant needs `allow` now, a person's
//!    grant needs "not `block`" now — otherwise `blocked` ("policy changed since approval");
//! 4. in one statement for the whole batch, for each proposal that passed 1–3: spend the
//!    grant if the expiry inside the verified grant is after the database clock (never the
//!    table's unsigned copy, V34), move the proposal to `executing` with a run lease, write the audit event (per
//!    proposal all or nothing); not spent → read the grant: `used_at` set = replay, null =
//!    expired; refusals are recorded in the same transaction, which then commits. Stages 1–3
//!    are CPU work and reads: no network call runs inside the transaction, and an executor
//!    that dies in it leaves its rows free at once (Postgres ends the transaction);
//! 5. after the commit, when the grant binds a preview, read the provider again with the
//!    handler's preview code and end `stale` instead of running when a binding field changed
//!    ([`prerun`]); then run the handler with a timeout, using the handler settings of the
//!    document version the grant names (checked before the spend: the version that decided
//!    the proposal, its source still hashing to the grant's `doc_sha256`); record the outcome
//!    (outcomes that are ready together share one statement, [`finisher`]).
//!
//! A sweeper turns `executing` rows whose run lease ran out into `outcome_unknown` (never a
//! re-run) and `approved` rows whose grant expired unspent into `expired`.
//!
//! After a successful run the handler's `read_back` reads the provider again and the outcome is
//! recorded with a `proposal.effect` event; a read-back that is not what was approved ends
//! `effect_mismatch`. The settler reads `outcome_unknown` proposals back the same way and
//! records `succeeded`, `failed` or `effect_mismatch` ([`effects`]): never a second run.

pub mod destinations;
pub mod effects;
pub mod finisher;
pub mod handlers;
pub mod prerun;
pub mod previews;
pub mod refusal;

mod config;
mod metrics;
mod run;
mod worker;

pub use config::ExecutorArgs;
pub use metrics::ExecutorMetrics;
pub use run::run;
pub use worker::{Worker, load_trusted_keys};
