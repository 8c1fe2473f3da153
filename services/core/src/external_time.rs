//! Times taken from outside: one rule for every one of them.
//!
//! A time that another party states (an identity provider's `auth_time`, `iat` and `nbf`,
//! the render stamp a decision form carries back) is believed only inside
//! `[now - max_age, now + CLOCK_SKEW]` by the clock that judges it: older than its bound is
//! refused, and so is a time in the future by more than [`CLOCK_SKEW`]. The second side is
//! the one that matters for step-up: a time in the future makes an age negative, and a
//! negative age passes every "at most this old" test for as long as the future lasts (an
//! identity provider sending `auth_time` in milliseconds states a sign-in tens of thousands of
//! years ahead).
//!
//! [`TimeBound::check_age`] judges an age already measured (by the database clock, in the
//! statement that uses it); [`TimeBound::check_unix`] a time against a given now;
//! [`TimeBound::check_numeric_date`] a raw JSON claim, which must be a NumericDate in whole
//! seconds (RFC 7519 §2; OpenID Connect Core 1.0 §2 states `iat` and `auth_time` in seconds).

use serde_json::Value;
use std::time::Duration;

/// How far in the future a time from outside may lie and still be believed: clocks of
/// well-run hosts (NTP) agree to well under a second, so 60 s is slack for a bad day, not for
/// a wrong clock or a wrong unit.
pub const CLOCK_SKEW: Duration = Duration::from_secs(60);

/// [`CLOCK_SKEW`] as a `chrono` duration, for comparing parsed times.
pub fn clock_skew_delta() -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(CLOCK_SKEW).unwrap_or(chrono::TimeDelta::MAX)
}

/// A refused time from outside; the message names the field and the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimeRefused {
    /// The time lies in the future by more than [`CLOCK_SKEW`].
    #[error(
        "{field}: {ahead_secs} s in the future, more than the {skew_secs} s clock skew allowed; the clock that stated it is wrong or the value is not in seconds"
    )]
    Ahead {
        /// The claim or form field.
        field: &'static str,
        /// Seconds ahead of now (rounded up).
        ahead_secs: u64,
        /// [`CLOCK_SKEW`] in seconds.
        skew_secs: u64,
    },
    /// The time is older than the bound.
    #[error("{field}: {age_secs} s old, older than the {max_secs} s allowed")]
    TooOld {
        /// The claim or form field.
        field: &'static str,
        /// Its age in seconds (rounded down; saturating).
        age_secs: u64,
        /// The bound in seconds.
        max_secs: u64,
    },
    /// The value is not a NumericDate in whole seconds.
    #[error("{field}: {why}; a time must be whole seconds since 1970-01-01 UTC (RFC 7519 §2)")]
    Malformed {
        /// The claim or form field.
        field: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl TimeRefused {
    /// The field the refusal is about.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Ahead { field, .. }
            | Self::TooOld { field, .. }
            | Self::Malformed { field, .. } => field,
        }
    }

    /// A stable name of the rule (`future`, `too_old`, `malformed`), for metrics and audit.
    pub fn rule(&self) -> &'static str {
        match self {
            Self::Ahead { .. } => "future",
            Self::TooOld { .. } => "too_old",
            Self::Malformed { .. } => "malformed",
        }
    }
}

/// The window `[now - max_age, now + CLOCK_SKEW]` a time from outside named `field` must fall
/// in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBound {
    /// The claim or form field, named in refusals.
    pub field: &'static str,
    /// The oldest the time may be.
    pub max_age: Duration,
}

impl TimeBound {
    /// The bound of `field`: at most `max_age` old, at most [`CLOCK_SKEW`] ahead.
    pub const fn new(field: &'static str, max_age: Duration) -> Self {
        Self { field, max_age }
    }

    /// Judges an age in seconds (`now - time`; negative when the time is in the future).
    /// A NaN age is refused as malformed.
    pub fn check_age(&self, age_secs: f64) -> Result<(), TimeRefused> {
        if age_secs.is_nan() {
            return Err(TimeRefused::Malformed {
                field: self.field,
                why: "not a number",
            });
        }
        let skew = CLOCK_SKEW.as_secs_f64();
        if age_secs < -skew {
            return Err(TimeRefused::Ahead {
                field: self.field,
                ahead_secs: saturating_secs((-age_secs).ceil()),
                skew_secs: CLOCK_SKEW.as_secs(),
            });
        }
        if age_secs > self.max_age.as_secs_f64() {
            return Err(TimeRefused::TooOld {
                field: self.field,
                age_secs: saturating_secs(age_secs.floor()),
                max_secs: self.max_age.as_secs(),
            });
        }
        Ok(())
    }

    /// Judges `time` against `now`, both in seconds since the Unix epoch.
    pub fn check_unix(&self, time: f64, now: f64) -> Result<(), TimeRefused> {
        self.check_age(now - time)
    }

    /// Reads a raw JSON claim as a NumericDate in whole seconds (a JSON integer; a fraction,
    /// a string or anything else is refused) and judges it against `now` (seconds since the
    /// Unix epoch). Returns the time in seconds since the epoch.
    pub fn check_numeric_date(&self, claim: &Value, now: i64) -> Result<i64, TimeRefused> {
        let malformed = |why| TimeRefused::Malformed {
            field: self.field,
            why,
        };
        let t = match claim {
            Value::Number(n) => match n.as_i64() {
                Some(t) => t,
                None if n.is_f64() => return Err(malformed("not a JSON integer")),
                None => return Err(malformed("out of range")),
            },
            _ => return Err(malformed("not a number")),
        };
        // i64 seconds differ by at most 2^64, which f64 holds to within rounding: enough to
        // tell a minute from a millennium.
        self.check_unix(t as f64, now as f64)?;
        Ok(t)
    }
}

/// A non-negative whole number of seconds as `u64`, saturating.
fn saturating_secs(s: f64) -> u64 {
    if s >= u64::MAX as f64 {
        u64::MAX
    } else if s > 0.0 {
        s as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: i64 = 1_790_000_000;

    fn bound() -> TimeBound {
        TimeBound::new("auth_time", Duration::from_secs(600))
    }

    #[test]
    fn inside_the_window_passes_on_both_sides() {
        let b = bound();
        for age in [0.0, 1.0, 599.9, 600.0, -1.0, -59.0, -60.0] {
            assert_eq!(b.check_age(age), Ok(()), "{age}");
        }
    }

    #[test]
    fn future_beyond_the_skew_is_refused_naming_it() {
        let b = bound();
        let e = b.check_age(-60.5).unwrap_err();
        assert_eq!(
            e,
            TimeRefused::Ahead {
                field: "auth_time",
                ahead_secs: 61,
                skew_secs: 60
            }
        );
        assert_eq!(e.rule(), "future");
        assert!(e.to_string().contains("60 s clock skew"), "{e}");
        // Hours ahead, and milliseconds read as seconds (tens of thousands of years ahead).
        assert!(matches!(
            b.check_unix((NOW + 3 * 3600) as f64, NOW as f64),
            Err(TimeRefused::Ahead {
                ahead_secs: 10_800,
                ..
            })
        ));
        assert!(matches!(
            b.check_numeric_date(&json!(NOW * 1000), NOW),
            Err(TimeRefused::Ahead { .. })
        ));
        assert!(matches!(
            b.check_age(f64::NEG_INFINITY),
            Err(TimeRefused::Ahead {
                ahead_secs: u64::MAX,
                ..
            })
        ));
    }

    #[test]
    fn older_than_the_bound_is_refused() {
        let b = bound();
        assert_eq!(
            b.check_age(600.5),
            Err(TimeRefused::TooOld {
                field: "auth_time",
                age_secs: 600,
                max_secs: 600
            })
        );
        assert!(matches!(
            b.check_numeric_date(&json!(-1), NOW),
            Err(TimeRefused::TooOld { .. })
        ));
        assert!(matches!(
            b.check_age(f64::INFINITY),
            Err(TimeRefused::TooOld { .. })
        ));
    }

    #[test]
    fn only_whole_seconds_are_a_numeric_date() {
        let b = bound();
        assert_eq!(b.check_numeric_date(&json!(NOW - 5), NOW), Ok(NOW - 5));
        for (bad, why) in [
            (json!(NOW as f64 - 0.5), "not a JSON integer"),
            (json!(1.79e9), "not a JSON integer"),
            (json!(u64::MAX), "out of range"),
            (json!("1790000000"), "not a number"),
            (json!(null), "not a number"),
        ] {
            assert_eq!(
                b.check_numeric_date(&bad, NOW),
                Err(TimeRefused::Malformed {
                    field: "auth_time",
                    why
                }),
                "{bad}"
            );
        }
        assert!(b.check_age(f64::NAN).is_err());
    }
}
