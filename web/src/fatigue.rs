//! Approval fatigue: how long a person looked at a decision page before deciding.
//!
//! The decision form carries `shown`: when the page was rendered (milliseconds since the
//! epoch) and an HMAC over it, the proposal and the session, keyed by a secret derived from
//! the web service's grant signing key (so every replica with that key verifies it, and a
//! person cannot forge a slower or faster time, nor reuse a stamp from another page or
//! session). A missing or forged stamp, or one for another page or session, refuses the
//! decision (400 naming `shown`: reloading the page gives a good one), so a script cannot
//! approve without its time being counted. A genuine stamp whose time is implausible (in the
//! future, older than a day) records no time and the decision stands.

use ring::hmac;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Longest time on page that is recorded (a tab left open overnight says nothing).
const MAX_SECONDS: f64 = 86_400.0;

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
    /// but its time is in the future or older than a day.
    ///
    /// Errors: [`BadStamp`] when the stamp is missing, malformed, forged, or made for another
    /// page or session.
    pub(crate) fn seconds(
        &self,
        stamp: Option<&str>,
        proposal: Uuid,
        session: &str,
        now_ms: i64,
    ) -> Result<Option<f64>, BadStamp> {
        let (ms, tag) = stamp.ok_or(BadStamp)?.split_once('.').ok_or(BadStamp)?;
        let ms: i64 = ms.parse().map_err(|_| BadStamp)?;
        let tag = hex::decode(tag).map_err(|_| BadStamp)?;
        let msg = format!("{proposal}\n{session}\n{ms}");
        hmac::verify(&self.key, msg.as_bytes(), &tag).map_err(|_| BadStamp)?;
        let secs = (now_ms - ms) as f64 / 1000.0;
        Ok((0.0..=MAX_SECONDS).contains(&secs).then_some(secs))
    }
}

/// A decision form's `shown` stamp that is missing or does not verify for this page and
/// session.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadStamp;

impl std::fmt::Display for BadStamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "shown: the page's signed render time is missing or is not this page's in this \
             session; reload the page and decide again. Nothing was decided.",
        )
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
        assert_eq!(c.seconds(Some(&s), p, "sess", 1_004_500), Ok(Some(4.5)));
        assert_eq!(
            c.seconds(Some(&s), Uuid::new_v4(), "sess", 1_004_500),
            Err(BadStamp)
        );
        assert_eq!(c.seconds(Some(&s), p, "other", 1_004_500), Err(BadStamp));
        assert_eq!(c.seconds(Some(&s), p, "sess", 999_000), Ok(None), "future");
        let day_later = 1_000_000 + 86_401_000;
        assert_eq!(c.seconds(Some(&s), p, "sess", day_later), Ok(None), "stale");
        let forged = s.replacen("1000000", "900000", 1);
        assert_eq!(
            c.seconds(Some(&forged), p, "sess", 1_004_500),
            Err(BadStamp)
        );
        let other = FormClock::from_secret("key-b");
        assert_eq!(other.seconds(Some(&s), p, "sess", 1_004_500), Err(BadStamp));
        assert_eq!(c.seconds(None, p, "sess", 1), Err(BadStamp));
        assert_eq!(c.seconds(Some("garbage"), p, "sess", 1), Err(BadStamp));
        assert_eq!(c.seconds(Some("1.abc"), p, "sess", 1), Err(BadStamp));
    }
}
