//! Approval fatigue: how long a person looked at a decision page before deciding.
//!
//! The decision form carries `shown`: when the page was rendered (milliseconds since the
//! epoch) and an HMAC over it, the proposal and the session, keyed by a secret derived from
//! the web service's grant signing key (so every replica with that key verifies it, and a
//! person cannot forge a slower or faster time, nor reuse a stamp from another page or
//! session). A missing or forged stamp, or one for another page or session, refuses the
//! decision (400 naming `shown`: reloading the page gives a good one), so a script cannot
//! approve without its time being counted. The stamp's time is a time taken from outside
//! (another replica's clock, carried by the browser) and passes the one window of
//! [`actiond_core::external_time`]: a stamp older than a day, or in the future by more than
//! the clock skew, refuses the decision naming `shown` (reload the page); one slightly in the
//! future, within the skew, records no time and the decision stands.

use actiond_core::external_time::{TimeBound, TimeRefused};
use ring::hmac;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The window of a stamp's time: at most a day old (a tab left open overnight is reloaded
/// before it decides), at most the clock skew ahead.
const SHOWN: TimeBound = TimeBound::new("shown", std::time::Duration::from_secs(86_400));

/// Signs and checks the `shown` stamp of decision forms.
#[derive(Clone)]
pub(crate) struct FormClock {
    key: hmac::Key,
}

impl FormClock {
    /// A clock keyed by a secret derived from `secret` (the grant signing key's text).
    pub(crate) fn from_secret(secret: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"actiond-web decision page shown-at v1\0");
        h.update(secret.trim().as_bytes());
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, &h.finalize()),
        }
    }

    /// The stamp of a page rendered at `ms` for `proposal` in the session `session`.
    pub(crate) fn stamp(&self, proposal: Uuid, session: &str, ms: i64) -> String {
        let msg = format!("{proposal}\n{session}\n{ms}");
        let tag = hmac::sign(&self.key, msg.as_bytes());
        format!("{ms}.{}", hex::encode(tag.as_ref()))
    }

    /// Seconds from the stamped rendering to `now_ms`: `Ok(None)` when the stamp is genuine
    /// but its time is ahead of `now_ms` by no more than the clock skew.
    ///
    /// Errors: [`BadStamp::Forged`] when the stamp is missing, malformed, forged, or made for
    /// another page or session; [`BadStamp::Time`] when its time is older than a day or ahead
    /// by more than the clock skew.
    pub(crate) fn seconds(
        &self,
        stamp: Option<&str>,
        proposal: Uuid,
        session: &str,
        now_ms: i64,
    ) -> Result<Option<f64>, BadStamp> {
        use BadStamp::Forged;
        let (ms, tag) = stamp.ok_or(Forged)?.split_once('.').ok_or(Forged)?;
        let ms: i64 = ms.parse().map_err(|_| Forged)?;
        let tag = hex::decode(tag).map_err(|_| Forged)?;
        let msg = format!("{proposal}\n{session}\n{ms}");
        hmac::verify(&self.key, msg.as_bytes(), &tag).map_err(|_| Forged)?;
        let secs = now_ms.saturating_sub(ms) as f64 / 1000.0;
        SHOWN.check_age(secs).map_err(BadStamp::Time)?;
        Ok((secs >= 0.0).then_some(secs))
    }
}

/// A decision form's `shown` stamp that refuses the decision.
#[derive(Debug, PartialEq)]
pub(crate) enum BadStamp {
    /// Missing, or does not verify for this page and session.
    Forged,
    /// Genuine, but its time is outside its window.
    Time(TimeRefused),
}

impl std::fmt::Display for BadStamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Forged => f.write_str(
                "shown: the page's signed render time is missing or is not this page's in this \
                 session; reload the page and decide again. Nothing was decided.",
            ),
            Self::Time(e) => write!(
                f,
                "{e} (the page's render time); reload the page and decide again. Nothing was decided."
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_verify_only_for_their_page_and_session() {
        let c = FormClock::from_secret("key-a");
        let p = Uuid::new_v4();
        let s = c.stamp(p, "sess", 1_000_000);
        let forged_err = Err(BadStamp::Forged);
        assert_eq!(c.seconds(Some(&s), p, "sess", 1_004_500), Ok(Some(4.5)));
        assert_eq!(
            c.seconds(Some(&s), Uuid::new_v4(), "sess", 1_004_500),
            forged_err
        );
        assert_eq!(c.seconds(Some(&s), p, "other", 1_004_500), forged_err);
        let forged = s.replacen("1000000", "900000", 1);
        assert_eq!(c.seconds(Some(&forged), p, "sess", 1_004_500), forged_err);
        let other = FormClock::from_secret("key-b");
        assert_eq!(other.seconds(Some(&s), p, "sess", 1_004_500), forged_err);
        assert_eq!(c.seconds(None, p, "sess", 1), forged_err);
        assert_eq!(c.seconds(Some("garbage"), p, "sess", 1), forged_err);
        assert_eq!(c.seconds(Some("1.abc"), p, "sess", 1), forged_err);
    }

    #[test]
    fn a_genuine_stamp_passes_the_external_time_window_on_both_sides() {
        let c = FormClock::from_secret("key-a");
        let p = Uuid::new_v4();
        let s = c.stamp(p, "sess", 1_000_000);
        // Ahead by up to the skew (another replica's clock): no time recorded, decision stands.
        assert_eq!(c.seconds(Some(&s), p, "sess", 999_000), Ok(None));
        assert_eq!(c.seconds(Some(&s), p, "sess", 1_000_000 - 60_000), Ok(None));
        let ahead = c.seconds(Some(&s), p, "sess", 1_000_000 - 61_000);
        let Err(BadStamp::Time(e)) = &ahead else {
            panic!("{ahead:?}")
        };
        assert_eq!(e.rule(), "future");
        let msg = BadStamp::Time(e.clone()).to_string();
        assert!(msg.starts_with("shown: 61 s in the future"), "{msg}");
        let day_later = 1_000_000 + 86_401_000;
        let stale = c.seconds(Some(&s), p, "sess", day_later);
        assert!(
            matches!(&stale, Err(BadStamp::Time(e)) if e.rule() == "too_old"),
            "{stale:?}"
        );
        assert_eq!(
            c.seconds(Some(&s), p, "sess", 1_000_000 + 86_400_000),
            Ok(Some(86_400.0))
        );
        // A stamp made (with the key) at the end of time is refused, not overflowed.
        let far = c.stamp(p, "sess", i64::MAX);
        assert!(matches!(
            c.seconds(Some(&far), p, "sess", 1_000_000),
            Err(BadStamp::Time(_))
        ));
    }
}
