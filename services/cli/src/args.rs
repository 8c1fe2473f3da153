//! Values the client and administration commands read the same way everywhere: `--since`,
//! `--wait` and proposal ids (a full id or a unique prefix of one).

use chrono::{DateTime, Utc};
use std::time::Duration;

/// The longest `--since` reaches back: 36500 days, the bound of a tenant document's
/// `retention.decided_after` (nothing older is kept). Older is refused, never clamped: a
/// typo (`70000d`, year `0201`) would otherwise read as "everything".
pub const MAX_SINCE_BACK: Duration = Duration::from_secs(36_500 * 86_400);

/// How far in the future a `--since` time may be, for a clock a little ahead of this one:
/// none. A later time selects nothing, so it is a mistake (a time zone read the wrong way).
pub const SINCE_SKEW: Duration = Duration::from_secs(0);

/// `--since`: a duration back from now (`90s`, `30m`, `1h`, `7d`) or an RFC 3339 time with
/// its offset (`2026-11-01T00:00:00Z`, `2026-11-01T01:00:00+01:00`); the instant it names.
/// Refused with a reason: anything else (a time without offset, `yesterday`), a time in the
/// future, and one more than [`MAX_SINCE_BACK`] ago.
pub fn since(s: &str) -> Result<DateTime<Utc>, String> {
    since_at(s, actiond_runtime::clock::now_utc())
}

/// [`since`] with the clock given.
pub fn since_at(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let t = s.trim();
    let at = if t.starts_with(|c: char| c.is_ascii_digit())
        && t.ends_with(|c: char| c.is_ascii_alphabetic())
        && !t.contains([':', '-', 'T'])
    {
        let back = actiond_core::ids::parse_duration(t).map_err(|_| since_rule(s))?;
        if back > MAX_SINCE_BACK {
            return Err(format!(
                "{s:?} reaches back more than 36500d (nothing older is kept)"
            ));
        }
        let back = chrono::Duration::from_std(back).map_err(|_| since_rule(s))?;
        now - back
    } else {
        DateTime::parse_from_rfc3339(t)
            .map_err(|_| format!("{}{}", since_rule(s), since_hint(t)))?
            .with_timezone(&Utc)
    };
    let skew = chrono::Duration::from_std(SINCE_SKEW).unwrap_or_default();
    if at > now + skew {
        return Err(format!(
            "{s:?} is in the future (now is {}); give a time before now or a duration back like 1h",
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ));
    }
    let oldest = now - chrono::Duration::from_std(MAX_SINCE_BACK).unwrap_or_default();
    if at < oldest {
        return Err(format!(
            "{s:?} is more than 36500d ago (nothing older is kept)"
        ));
    }
    Ok(at)
}

/// What to write instead of a date alone or a time without its offset, the two a person
/// types most (`2026-12-01`, `2026-12-01 10:00`); nothing for anything else. Before, the
/// parser's own words followed the rule (`(premature end of input)`), which say no fix.
fn since_hint(t: &str) -> String {
    use chrono::{NaiveDate, NaiveDateTime};
    if NaiveDate::parse_from_str(t, "%Y-%m-%d").is_ok() {
        return format!("; for that day from midnight UTC: {t}T00:00:00Z");
    }
    let spelled = t.replacen(' ', "T", 1);
    let local = [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(&spelled, f).ok());
    match local {
        Some(at) => format!(
            "; add the offset, e.g. {}Z for UTC",
            at.format("%Y-%m-%dT%H:%M:%S")
        ),
        None => String::new(),
    }
}

fn since_rule(s: &str) -> String {
    format!(
        "{s:?} must be a duration back from now (90s, 30m, 1h, 7d) or an RFC 3339 time with its offset (2026-11-01T00:00:00Z)"
    )
}

/// The longest `--wait`.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

/// `--wait`: how long to wait, as a duration (`10s`, `2m`) or a number of seconds (`10`, the
/// older spelling, kept for scripts); 0 does not wait. At most [`MAX_WAIT`].
pub fn wait(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let d = if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        Duration::from_secs(
            t.parse()
                .map_err(|_| format!("{s:?} must be at most 3600 seconds"))?,
        )
    } else {
        actiond_core::ids::parse_duration(t).map_err(|_| {
            format!("{s:?} must be a duration like 10s or 2m (or a number of seconds)")
        })?
    };
    if d > MAX_WAIT {
        return Err(format!("{s:?} must be at most 1h"));
    }
    Ok(d)
}

/// The shortest proposal id prefix accepted, in hex digits.
pub const MIN_ID_PREFIX: usize = 4;

/// A proposal id as typed: a full UUID, or the start of one (at least [`MIN_ID_PREFIX`] hex
/// digits, dashes where the id has them or none; case-insensitive), as `approvals list` and
/// the README's examples abbreviate them. Resolved against the database by [`resolve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdArg {
    /// A whole id.
    Full(uuid::Uuid),
    /// Lowercase hex digits, dashes removed.
    Prefix(String),
}

impl std::fmt::Display for IdArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full(id) => write!(f, "{id}"),
            Self::Prefix(p) => write!(f, "{p}"),
        }
    }
}

/// Parses a proposal id or prefix (see [`IdArg`]); a clap value parser, so a refusal is one
/// usage line naming the argument (exit 2).
pub fn id_arg(s: &str) -> Result<IdArg, String> {
    let t = s.trim().trim_end_matches(['…', '.']);
    if let Ok(id) = uuid::Uuid::parse_str(t)
        && t.len() == 36
    {
        return Ok(IdArg::Full(id));
    }
    let hex: String = t.chars().filter(|c| *c != '-').collect();
    let dashes_ok = t
        .char_indices()
        .filter(|(_, c)| *c == '-')
        .all(|(i, _)| [8, 13, 18, 23].contains(&i));
    if hex.len() < MIN_ID_PREFIX
        || hex.len() > 32
        || !dashes_ok
        || !hex.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Err(format!(
            "{s:?} is not a proposal id: give the id, or its first {MIN_ID_PREFIX} or more hex digits"
        ));
    }
    let hex = hex.to_ascii_lowercase();
    if hex.len() == 32 {
        return uuid::Uuid::parse_str(&hex)
            .map(IdArg::Full)
            .map_err(|e| e.to_string());
    }
    Ok(IdArg::Prefix(hex))
}

/// The proposal `arg` names: itself when whole, else the one proposal whose id starts with it.
/// No match is "not found" (exit 3); two or more is invalid input (exit 2) naming some of them.
pub async fn resolve(db: &actiond_store::Db, arg: &IdArg) -> anyhow::Result<uuid::Uuid> {
    let prefix = match arg {
        IdArg::Full(id) => return Ok(*id),
        IdArg::Prefix(p) => p,
    };
    let ids = actiond_store::approvals::ids_with_prefix(db, prefix, 3).await?;
    match ids.as_slice() {
        [one] => Ok(*one),
        [] => Err(crate::exit::not_found(format!(
            "no proposal id starts with {prefix}"
        ))),
        many => Err(crate::exit::invalid(format!(
            "proposal id prefix {prefix} is ambiguous: it starts {}{}; give more digits",
            many.iter()
                .take(2)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" and "),
            if many.len() > 2 { " and more" } else { "" }
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn since_reads_durations_and_rfc3339_and_refuses_the_rest() {
        let now = at("2026-12-06T12:00:00Z");
        assert_eq!(since_at("1h", now).unwrap(), at("2026-12-06T11:00:00Z"));
        assert_eq!(since_at("7d", now).unwrap(), at("2026-11-29T12:00:00Z"));
        assert_eq!(since_at("90s", now).unwrap(), at("2026-12-06T11:58:30Z"));
        assert_eq!(since_at("0s", now).unwrap(), now);
        assert_eq!(
            since_at("2026-12-06T12:00:00+01:00", now).unwrap(),
            at("2026-12-06T11:00:00Z")
        );
        assert_eq!(
            since_at(" 2026-11-01T00:00:00Z ", now).unwrap(),
            at("2026-11-01T00:00:00Z")
        );
        for bad in [
            "",
            "1",
            "1y",
            "h",
            "-1h",
            "now",
            "yesterday",
            "2026-12-01",
            "2026-12-01 10:00:00",
            "2026-12-01T10:00:00",
            "2026-12-01T24:00:00Z",
            "2026-02-30T00:00:00Z",
        ] {
            let e = since_at(bad, now).unwrap_err();
            assert!(
                e.contains("must be a duration back from now"),
                "{bad:?}: {e}"
            );
            assert!(!e.contains("premature"), "{bad:?}: {e}");
        }
        // A date alone, or a time without its offset, is refused with the spelling to use.
        for (bad, says, good) in [
            (
                "2026-12-01",
                "; for that day from midnight UTC: 2026-12-01T00:00:00Z",
                "2026-12-01T00:00:00Z",
            ),
            (
                "2026-12-01 10:00",
                "; add the offset, e.g. 2026-12-01T10:00:00Z for UTC",
                "2026-12-01T10:00:00Z",
            ),
            (
                "2026-12-01T10:00:00",
                "; add the offset, e.g. 2026-12-01T10:00:00Z for UTC",
                "2026-12-01T10:00:00Z",
            ),
        ] {
            let e = since_at(bad, now).unwrap_err();
            assert!(e.ends_with(says), "{bad:?}: {e}");
            assert!(since_at(good, now).is_ok(), "{good}");
        }
    }

    #[test]
    fn since_refuses_the_future_and_the_too_old() {
        let now = at("2026-12-06T12:00:00Z");
        for future in [
            "2026-12-06T12:00:01Z",
            "2026-12-06T12:30:00+00:00",
            "2099-01-01T00:00:00Z",
        ] {
            let e = since_at(future, now).unwrap_err();
            assert!(e.contains("is in the future"), "{future}: {e}");
        }
        for old in [
            "36501d",
            "99999999999d",
            "1900-01-01T00:00:00Z",
            "0201-12-06T00:00:00Z",
        ] {
            let e = since_at(old, now).unwrap_err();
            assert!(e.contains("36500d"), "{old}: {e}");
        }
        assert!(since_at("36500d", now).is_ok());
    }

    #[test]
    fn wait_reads_durations_and_plain_seconds() {
        assert_eq!(wait("10").unwrap(), Duration::from_secs(10));
        assert_eq!(wait("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(wait("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(wait("0").unwrap(), Duration::ZERO);
        assert_eq!(wait("1h").unwrap(), MAX_WAIT);
        for bad in ["3601", "2h", "-1", "ten", "", "99999999999999999999999"] {
            assert!(wait(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ids_are_whole_or_a_prefix_of_four_or_more_hex_digits() {
        let id = "01a229a0-5e2b-7c3d-9e4f-0123456789ab";
        assert_eq!(id_arg(id).unwrap(), IdArg::Full(id.parse().unwrap()));
        assert_eq!(
            id_arg(&id.to_uppercase()).unwrap(),
            IdArg::Full(id.parse().unwrap())
        );
        assert_eq!(
            id_arg("01a229a0-…").unwrap(),
            IdArg::Prefix("01a229a0".into())
        );
        assert_eq!(id_arg("01A2").unwrap(), IdArg::Prefix("01a2".into()));
        assert_eq!(
            id_arg("01a229a0-5e").unwrap(),
            IdArg::Prefix("01a229a05e".into())
        );
        for bad in [
            "",
            "01a",
            "xyz12",
            "01a2%",
            "01a2_",
            "0-1a2",
            "01a229a05-e",
            &format!("{id}0"),
        ] {
            let e = id_arg(bad).unwrap_err();
            assert!(e.contains("is not a proposal id"), "{bad:?}: {e}");
        }
    }
}
