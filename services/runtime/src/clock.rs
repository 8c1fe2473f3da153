//! The clock module: the one place actiond reads the wall clock or sleeps.
//!
//! Everywhere else `SystemTime::now`, `chrono::Utc::now`, `std::thread::sleep` and
//! `tokio::time::sleep(_until)` are refused by clippy (`disallowed-methods` in `clippy.toml`):
//! a decision that depends on the time reads it here (or from the database, for session and
//! approval deadlines), and a wait is a timer that says what it waits for (a poll interval, a
//! back-off), so a reviewer finds every use of time by looking for this module.

#![expect(
    clippy::disallowed_methods,
    reason = "the clock module: every wall-clock reading and timer of actiond goes through here"
)]

use std::time::{Duration, SystemTime};

/// The wall clock now, UTC.
pub fn now_utc() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now()
}

/// The wall clock now, as a [`SystemTime`].
pub fn now_system() -> SystemTime {
    SystemTime::now()
}

/// A timer that fires after `d`: a poll interval, a back-off or a pacing delay, never a wait
/// for something that can be observed (wait on that instead). Usable in `tokio::select!`.
pub fn sleep(d: Duration) -> tokio::time::Sleep {
    tokio::time::sleep(d)
}

/// A timer that fires at `deadline` (see [`sleep`]).
pub fn sleep_until(deadline: tokio::time::Instant) -> tokio::time::Sleep {
    tokio::time::sleep_until(deadline)
}

/// Blocks the calling (non-async) thread for `d`: a pause between attempts of a blocking
/// loop, see [`sleep`].
pub fn sleep_blocking(d: Duration) {
    std::thread::sleep(d);
}
