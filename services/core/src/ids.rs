//! Validated identifiers and durations.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Maximum length of an action name accepted at submission (characters).
pub const MAX_ACTION_LEN: usize = 128;

/// A tenant id: `^[a-z0-9][a-z0-9_-]{0,62}$`. Also the namespace of its credential names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TenantId(String);

impl TenantId {
    /// Parses a tenant id; the error says the rule.
    pub fn parse(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 63
            && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err("must match ^[a-z0-9][a-z0-9_-]{0,62}$".into())
        }
    }
    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TenantId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s)
    }
}
impl From<TenantId> for String {
    fn from(t: TenantId) -> String {
        t.0
    }
}
impl std::fmt::Display for TenantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// True when `s` is a valid credential-name part: `^[a-z0-9_-]+$`, at most 64 characters.
/// Credential files are `<tenant>.<name>` in the executor's credentials directory, so a tenant
/// can never name another tenant's secret or a path.
pub fn is_credential_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Parses durations written as an integer and a unit: `90s`, `5m`, `24h`, `7d`, `250ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 90s, 5m, 24h or 7d"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("{s:?} is not a duration like 90s, 5m, 24h or 7d")),
    };
    Ok(Duration::from_secs(secs))
}

/// Formats a duration the way [`parse_duration`] reads it (largest exact unit).
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    if d.subsec_millis() != 0 || s == 0 {
        format!("{}ms", d.as_millis())
    } else if s.is_multiple_of(86_400) {
        format!("{}d", s / 86_400)
    } else if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ids_and_durations() {
        assert!(TenantId::parse("acme-1").is_ok());
        for bad in ["", "Acme", "../x", "a.b", "-a", &"a".repeat(64)] {
            assert!(TenantId::parse(bad).is_err(), "{bad}");
        }
        assert!(is_credential_part("payments_live"));
        assert!(!is_credential_part("../etc"));
        assert!(!is_credential_part("a.b"));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("7d").unwrap(), Duration::from_secs(604_800));
        assert!(parse_duration("5 minutes").is_err());
        assert_eq!(format_duration(Duration::from_secs(300)), "5m");
    }
}
