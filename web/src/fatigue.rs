//! Approval fatigue: how long a person looked at a decision page before deciding.
//!
//! The decision form carries `shown`: when the page was rendered (milliseconds since the
//! epoch) and an HMAC over it, the proposal and the session, keyed by a secret derived from
//! the web service's grant signing key (so every replica with that key verifies it, and a
//! person cannot forge a slower or faster time, nor reuse a stamp from another page or
//! session). A missing, forged or implausible stamp records no time; the decision itself is
//! never refused for it.

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

    /// Seconds from the stamped rendering to `now_ms`, or `None` when the stamp is missing,
    /// forged, for another page or session, in the future or older than a day.
    pub(crate) fn seconds(
        &self,
        stamp: Option<&str>,
        proposal: Uuid,
        session: &str,
        now_ms: i64,
    ) -> Option<f64> {
        let (ms, tag) = stamp?.split_once('.')?;
        let ms: i64 = ms.parse().ok()?;
        let tag = hex::decode(tag).ok()?;
        let msg = format!("{proposal}\n{session}\n{ms}");
        hmac::verify(&self.key, msg.as_bytes(), &tag).ok()?;
        let secs = (now_ms - ms) as f64 / 1000.0;
        (0.0..=MAX_SECONDS).contains(&secs).then_some(secs)
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
        assert_eq!(c.seconds(Some(&s), p, "sess", 1_004_500), Some(4.5));
        assert_eq!(c.seconds(Some(&s), Uuid::new_v4(), "sess", 1_004_500), None);
        assert_eq!(c.seconds(Some(&s), p, "other", 1_004_500), None);
        assert_eq!(c.seconds(Some(&s), p, "sess", 999_000), None, "future");
        let forged = s.replacen("1000000", "900000", 1);
        assert_eq!(c.seconds(Some(&forged), p, "sess", 1_004_500), None);
        let other = FormClock::from_secret("key-b");
        assert_eq!(other.seconds(Some(&s), p, "sess", 1_004_500), None);
        assert_eq!(c.seconds(None, p, "sess", 1), None);
        assert_eq!(c.seconds(Some("garbage"), p, "sess", 1), None);
    }
}
