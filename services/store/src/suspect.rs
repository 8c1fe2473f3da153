//! Which pooled connections to check before they are handed out again: those handed out
//! before the last failure that [`crate::StoreError::is_unavailable`] recognised (a terminated
//! backend, a lost connection). Process-wide: a failure on one pool makes the connections of
//! every pool in the process handed out before it suspect, which costs each of them one
//! round trip once and is never wrong.

use deadpool_postgres::{ClientWrapper, HookError, Metrics};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the check of a suspect connection may take before the connection is dropped.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The instant the failure times below count from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds after [`epoch`] of the last failure, plus 1; 0 when there was none.
static LAST_LOST: AtomicU64 = AtomicU64::new(0);

/// Records that a statement failed because the server or the connection could not serve.
pub(crate) fn connection_lost() {
    LAST_LOST.fetch_max(now_value(), Ordering::Relaxed);
}

/// Whether a pooled connection with these metrics was handed out (created or last recycled)
/// no later than the last failure, so it may have been the one that failed.
fn is_suspect(m: &Metrics) -> bool {
    handed_out_by(m, LAST_LOST.load(Ordering::Relaxed))
}

/// Whether `m`'s connection was handed out no later than `lost` (a [`LAST_LOST`] value).
fn handed_out_by(m: &Metrics, lost: u64) -> bool {
    if lost == 0 {
        return false;
    }
    m.recycled.unwrap_or(m.created) <= epoch() + Duration::from_nanos(lost - 1)
}

/// The [`LAST_LOST`] value of a failure now.
fn now_value() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).map_or(u64::MAX, |n| n.saturating_add(1))
}

/// The pool's `pre_recycle` hook: a suspect connection must answer an empty query within
/// [`CHECK_TIMEOUT`], else the pool drops it and takes or opens another.
pub(crate) fn check_hook() -> deadpool_postgres::Hook {
    deadpool_postgres::Hook::async_fn(|client: &mut ClientWrapper, metrics: &Metrics| {
        let suspect = is_suspect(metrics);
        Box::pin(async move {
            if !suspect {
                return Ok(());
            }
            match tokio::time::timeout(CHECK_TIMEOUT, client.simple_query("")).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "pooled connection dropped after an outage");
                    Err(HookError::Backend(e))
                }
                Err(_) => Err(HookError::message(
                    "pooled connection did not answer its check after an outage",
                )),
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handed_out_now() -> Metrics {
        Metrics {
            created: Instant::now(),
            recycled: None,
            recycle_count: 0,
        }
    }

    /// A connection handed out before a failure is suspect; one handed out after it is not,
    /// and none is before any failure.
    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "three readings of a millisecond clock must differ: 2 ms must pass between them"
    )]
    fn only_connections_handed_out_before_the_last_failure_are_suspect() {
        let before = handed_out_now();
        std::thread::sleep(Duration::from_millis(2));
        let lost = now_value();
        std::thread::sleep(Duration::from_millis(2));
        let after = handed_out_now();
        assert!(handed_out_by(&before, lost));
        assert!(!handed_out_by(&after, lost));
        assert!(!handed_out_by(&before, 0));
        let mut recycled = before;
        recycled.recycled = Some(after.created);
        assert!(!handed_out_by(&recycled, lost));
    }
}
