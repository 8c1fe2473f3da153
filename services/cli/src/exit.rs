//! How `actiond` ends: one line on stderr and an exit code a script can branch on.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done |
//! | 1 | failed for another reason (refused, verification failed, a server error) |
//! | 2 | invalid input: a bad flag or argument, or a document or value that does not validate |
//! | 3 | not found: the proposal, tenant, agent, document or file named does not exist |
//! | 4 | unreachable: Postgres or the API could not be reached |
//!
//! Code 2 is also what clap uses for a command line it cannot parse, so "you asked for
//! something malformed" has one code whichever layer noticed.

use actiond_store::StoreError;
use std::process::ExitCode;

/// Why a command failed, as far as the exit code is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Anything else (exit 1).
    Other,
    /// Invalid input (exit 2).
    Invalid,
    /// The thing named does not exist (exit 3).
    NotFound,
    /// Postgres or the API could not be reached (exit 4).
    Unreachable,
}

impl Kind {
    /// The process exit code of this kind.
    pub fn code(self) -> u8 {
        match self {
            Kind::Other => 1,
            Kind::Invalid => 2,
            Kind::NotFound => 3,
            Kind::Unreachable => 4,
        }
    }
}

/// An error whose kind the command knows; its message is shown as is.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Tagged {
    kind: Kind,
    message: String,
}

/// A "not found" error (exit 3).
pub fn not_found(message: impl Into<String>) -> anyhow::Error {
    Tagged {
        kind: Kind::NotFound,
        message: message.into(),
    }
    .into()
}

/// An "invalid input" error (exit 2).
pub fn invalid(message: impl Into<String>) -> anyhow::Error {
    Tagged {
        kind: Kind::Invalid,
        message: message.into(),
    }
    .into()
}

/// The kind of `e`: the first cause in its chain that says what it is.
pub fn classify(e: &anyhow::Error) -> Kind {
    for cause in e.chain() {
        if let Some(t) = cause.downcast_ref::<Tagged>() {
            return t.kind;
        }
        if let Some(s) = cause.downcast_ref::<StoreError>() {
            return match s {
                StoreError::NotFound(_) => Kind::NotFound,
                StoreError::Conflict(_) | StoreError::Config(_) => Kind::Invalid,
                s if s.is_unavailable() => Kind::Unreachable,
                StoreError::Pool(_)
                | StoreError::Db(_)
                | StoreError::Connect { .. }
                | StoreError::Migration(_) => Kind::Other,
            };
        }
        if cause.is::<actiond_core::FieldErrors>() {
            return Kind::Invalid;
        }
        // No credentials directory named, or a credential name that is not a plain name: a
        // flag to fix (2). A credential that cannot be read goes on to its io error (3 if
        // missing).
        if let Some(c) = cause.downcast_ref::<actiond_runtime::credentials::CredentialError>()
            && !matches!(
                c,
                actiond_runtime::credentials::CredentialError::Read { .. }
            )
        {
            return Kind::Invalid;
        }
        if let Some(r) = cause.downcast_ref::<reqwest::Error>()
            && (r.is_connect() || r.is_timeout())
        {
            return Kind::Unreachable;
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::NotFound => Kind::NotFound,
                // A file that is not UTF-8 (`tenant validate -f`, `--token-file`, …) is a
                // document that does not validate.
                std::io::ErrorKind::InvalidData => Kind::Invalid,
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::TimedOut => {
                    Kind::Unreachable
                }
                _ => Kind::Other,
            };
        }
        if cause.is::<serde_json::Error>() || cause.is::<uuid::Error>() {
            return Kind::Invalid;
        }
    }
    Kind::Other
}

/// Prints `e` as one line on stderr (a log line when `json`, so a log collector parses it like
/// the others) and returns its exit code.
pub fn report(e: &anyhow::Error, json: bool) -> ExitCode {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    let kind = classify(e);
    if json {
        tracing::error!(
            exit_code = kind.code(),
            error = msg.as_str(),
            "actiond: error"
        );
    } else {
        // One line, with the control and bidi characters of any agent text made visible.
        actiond_runtime::tell(&format!(
            "actiond: error: {}",
            crate::output::text(&msg.replace('\n', " "))
        ));
    }
    ExitCode::from(kind.code())
}

/// Ends a command line clap could not parse with one line on stderr, exit 2: clap's message,
/// its tips and the usage joined (`actiond: error: unexpected argument '--x' found (usage:
/// actiond status [OPTIONS] <ID>; more with --help)`); a command given without its subcommand
/// names them ([`missing_subcommand`]). `--help` and `--version` print clap's own text.
pub fn usage_error(e: clap::Error, root: &clap::Command) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit()
    }
    let text = e.render().to_string();
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return missing_subcommand(&text);
    }
    let mut parts = Vec::new();
    let mut usage = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(u) = line.strip_prefix("Usage: ") {
            usage = Some(u);
        } else if !line.starts_with("For more information") {
            parts.push(line.strip_prefix("error: ").unwrap_or(line));
        }
    }
    // A missing flag that an environment variable can give says which (`--database-url
    // <DATABASE_URL> (or DATABASE_URL)`): before, nothing said that the `export …` line of
    // actiond dev's banner sets it.
    let envs = usage.map(|u| flag_envs(root, u)).unwrap_or_default();
    let missing = e.kind() == ErrorKind::MissingRequiredArgument;
    let usage = usage
        .map(|u| {
            format!(
                " (usage: {}; more with --help)",
                env_flags_optional(u, &envs)
            )
        })
        .unwrap_or_default();
    // "…were not provided:" runs on into its list; other lines are separate sentences.
    let mut line = String::new();
    for p in parts {
        if !line.is_empty() {
            line.push_str(if line.ends_with(':') { " " } else { "; " });
        }
        line.push_str(p);
        let flag = p.split_whitespace().next().unwrap_or_default();
        if let Some((_, env)) = envs.iter().find(|(f, _)| missing && f == flag) {
            line.push_str(&format!(" (or set {env})"));
        }
    }
    actiond_runtime::tell(&format!(
        "actiond: error: {}{usage}",
        crate::output::text(&line)
    ));
    ExitCode::from(Kind::Invalid.code())
}

/// The `--flag`s of the subcommand `usage` names (`actiond approvals deny --as …`) that an
/// environment variable can give, with that variable.
fn flag_envs(root: &clap::Command, usage: &str) -> Vec<(String, String)> {
    let mut cmd = root;
    for word in usage.split_whitespace().skip(1) {
        match cmd.find_subcommand(word) {
            Some(sub) => cmd = sub,
            None => break,
        }
    }
    cmd.get_arguments()
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?.to_owned();
            Some((format!("--{}", a.get_long()?), env))
        })
        .collect()
}

/// `usage` with each of the `--flag <VALUE>`s in `envs` in brackets: clap lists a flag an
/// environment variable gives as if it had to be typed (`actiond status --url <URL> <ID>`
/// when `ACTIOND_URL` is set, `actiond approvals show --database-url <DATABASE_URL> <ID>`),
/// and it need not be (`actiond status [--url <URL>] <ID>`).
fn env_flags_optional(usage: &str, envs: &[(String, String)]) -> String {
    let mut words: Vec<String> = usage.split(' ').map(str::to_owned).collect();
    let mut i = 0;
    while i + 1 < words.len() {
        if envs.iter().any(|(f, _)| *f == words[i]) && words[i + 1].starts_with('<') {
            words[i].insert(0, '[');
            words[i + 1].push(']');
            i += 1;
        }
        i += 1;
    }
    words.join(" ")
}

/// A command given without its subcommand (`actiond tenant`): clap would print the whole help
/// text; one line names the subcommands instead, exit 2.
fn missing_subcommand(help: &str) -> ExitCode {
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    let usage = help
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
        .map(|u| format!(" (usage: {u}; more with --help)"))
        .unwrap_or_default();
    actiond_runtime::tell(&format!(
        "actiond: error: a subcommand is required: {}{usage}",
        commands.join(", ")
    ));
    ExitCode::from(Kind::Invalid.code())
}

/// The HTTP status of an API answer as an error kind (`actiond propose`, `actiond status`).
pub fn of_status(status: u16) -> Kind {
    match status {
        404 => Kind::NotFound,
        400 | 413 | 415 | 422 => Kind::Invalid,
        502..=504 => Kind::Unreachable,
        _ => Kind::Other,
    }
}

/// An error of `kind` with `message`.
pub fn tagged(kind: Kind, message: impl Into<String>) -> anyhow::Error {
    Tagged {
        kind,
        message: message.into(),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_errors_keep_their_kind_under_context() {
        let e = not_found("proposal x not found").context("actiond approvals show");
        assert_eq!(classify(&e), Kind::NotFound);
        assert_eq!(classify(&invalid("bad")), Kind::Invalid);
        assert_eq!(
            classify(&tagged(Kind::Unreachable, "down")),
            Kind::Unreachable
        );
        assert_eq!(classify(&anyhow::anyhow!("other")), Kind::Other);
    }

    #[test]
    fn usage_marks_flags_an_environment_variable_gives_optional() {
        let envs = [
            ("--url".to_owned(), "ACTIOND_URL".to_owned()),
            ("--database-url".to_owned(), "DATABASE_URL".to_owned()),
        ];
        assert_eq!(
            env_flags_optional("actiond status --url <URL> <ID>", &envs),
            "actiond status [--url <URL>] <ID>"
        );
        assert_eq!(
            env_flags_optional(
                "actiond approvals approve --database-url <DATABASE_URL> --as <AS> <ID>",
                &envs
            ),
            "actiond approvals approve [--database-url <DATABASE_URL>] --as <AS> <ID>"
        );
        // Already optional, another flag, or no value: as clap wrote it.
        for u in [
            "actiond status [OPTIONS] <ID>",
            "actiond x --url-base <U> <ID>",
            "actiond x [--url <URL>]",
            "actiond x --url",
        ] {
            assert_eq!(env_flags_optional(u, &envs), u);
        }
    }

    #[test]
    fn store_and_io_errors_are_classified() {
        let e: anyhow::Error = StoreError::NotFound("tenant").into();
        assert_eq!(classify(&e), Kind::NotFound);
        let e: anyhow::Error = StoreError::Conflict("policy.default: required".into()).into();
        assert_eq!(classify(&e), Kind::Invalid);
        let e = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound))
            .context("cannot read tenant.yaml");
        assert_eq!(classify(&e), Kind::NotFound);
        assert_eq!(Kind::Unreachable.code(), 4);
    }
}
