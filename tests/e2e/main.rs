//! End-to-end tests: the gateway's services as real processes on a fresh Postgres database per
//! test, with a real local HTTP receiver counting what the executor sends.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test harness: a failed step stops the test loudly"
)]

mod admin;
mod amend;
mod api;
mod approval_rules;
mod attacks;
mod audit_seal;
mod budgets;
mod classifier;
mod cli;
mod edge;
mod effects;
mod failover;
mod flows;
mod freeze;
mod handlers;
mod idp_clocks;
mod newcomer;
mod preview_bound;
mod privileges;
mod proposal_checks;
mod queue_plans;
mod read_plans;
mod restarts;
mod revoke;
mod schema;
mod shadow;
mod sql_layout;
mod staged;
mod submission;
mod support;
mod tenant_move;
mod web;
mod wire;
mod withdraw;
