//! `actiond docs configuration` (hidden): the configuration reference of `docs/configuration.md`,
//! rendered from the clap definitions themselves (every subcommand, flag, environment variable,
//! default and help text), so the document cannot drift from the binary. The unit test below
//! compares the file with a fresh rendering and says how to regenerate it when they differ.

use clap::{Arg, ArgAction, Command};
use std::fmt::Write as _;

/// The line in `docs/configuration.md` after which everything is generated; the text above it is
/// written by hand and kept as it is.
pub(crate) const MARKER: &str = "<!-- Everything below this line is generated from the clap definitions by `actiond docs configuration`; do not edit it by hand. -->";

/// `actiond docs …`.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum DocsCmd {
    /// Print the generated part of docs/configuration.md (the marker line, then the reference).
    Configuration,
}

/// Runs `actiond docs …`: prints the rendering on stdout.
pub(crate) fn run(cmd: &DocsCmd, root: &Command) {
    match cmd {
        DocsCmd::Configuration => actiond_runtime::say(configuration(root).trim_end()),
    }
}

/// The generated part of `docs/configuration.md`: [`MARKER`], an index of environment variables,
/// then one section per (sub)command with a table of its flags. Hidden commands and arguments
/// are left out; `--help` and `--version` are not listed.
pub(crate) fn configuration(root: &Command) -> String {
    let mut sections = Vec::new();
    collect(root, &mut Vec::new(), &mut sections);
    let mut out = String::new();
    let _ = writeln!(out, "{MARKER}\n");
    out.push_str("## Environment variables\n\n");
    out.push_str(
        "Every environment variable the binary reads through its flags, and the commands that \
         read it. A flag given on the command line wins over its variable.\n\n",
    );
    out.push_str("| variable | read by |\n|---|---|\n");
    let mut index: Vec<(String, String)> = Vec::new();
    for (path, cmd) in &sections {
        for arg in visible_args(cmd) {
            if let Some(env) = arg.get_env() {
                let name = env.to_string_lossy().into_owned();
                let anchor = anchor(path);
                index.push((name, format!("[`{path}`](#{anchor})")));
            }
        }
    }
    index.sort();
    index.dedup();
    let mut i = 0;
    while i < index.len() {
        let name = &index[i].0;
        let users: Vec<&str> = index[i..]
            .iter()
            .take_while(|(n, _)| n == name)
            .map(|(_, u)| u.as_str())
            .collect();
        let _ = writeln!(out, "| `{name}` | {} |", users.join(", "));
        i += users.len();
    }
    for (path, cmd) in &sections {
        render_command(&mut out, path, cmd);
    }
    out
}

/// Walks the command tree depth-first in definition order, collecting `(full name, command)`.
fn collect<'a>(cmd: &'a Command, prefix: &mut Vec<&'a str>, out: &mut Vec<(String, &'a Command)>) {
    prefix.push(cmd.get_name());
    out.push((prefix.join(" "), cmd));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        collect(sub, prefix, out);
    }
    prefix.pop();
}

/// The arguments a reader may set: not hidden, not `--help` / `--version`.
fn visible_args(cmd: &Command) -> impl Iterator<Item = &Arg> {
    cmd.get_arguments().filter(|a| {
        !a.is_hide_set()
            && !matches!(
                a.get_action(),
                ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
            )
    })
}

/// GitHub's anchor for a heading whose text is `` `path` ``.
fn anchor(path: &str) -> String {
    path.chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// One command's section: heading, about text, subcommands, and its flags' table.
fn render_command(out: &mut String, path: &str, cmd: &Command) {
    let level = if path.contains(' ') { "###" } else { "##" };
    let _ = writeln!(out, "\n{level} `{path}`\n");
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|s| sentence(&one_paragraph(&s.to_string())))
        .unwrap_or_default();
    if !about.is_empty() {
        let _ = writeln!(out, "{about}\n");
    }
    let subs: Vec<&Command> = cmd.get_subcommands().filter(|s| !s.is_hide_set()).collect();
    if !subs.is_empty() {
        let names: Vec<String> = subs
            .iter()
            .map(|s| {
                let p = format!("{path} {}", s.get_name());
                format!("[`{}`](#{})", s.get_name(), anchor(&p))
            })
            .collect();
        let _ = writeln!(out, "Subcommands: {}.\n", names.join(", "));
    }
    let args: Vec<&Arg> = visible_args(cmd).collect();
    if args.is_empty() {
        if subs.is_empty() {
            out.push_str("No flags.\n");
        }
        return;
    }
    out.push_str("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for arg in args {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            flag(arg),
            arg.get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_else(|| "—".to_owned()),
            default(arg),
            meaning(arg)
        );
    }
}

/// `--long <VALUE>`, `-s, --long`, or `<NAME>` for a positional argument.
fn flag(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .map(|v| {
            v.iter()
                .map(|n| format!("<{n}>"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| format!("<{}>", arg.get_id().as_str().to_uppercase()));
    if arg.is_positional() {
        return format!("`{value}` (argument)");
    }
    let takes_value = matches!(arg.get_action(), ArgAction::Set | ArgAction::Append);
    let mut names = Vec::new();
    if let Some(s) = arg.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = arg.get_long() {
        names.push(format!("--{l}"));
    }
    let mut s = names.join(", ");
    if takes_value {
        let _ = write!(s, " {value}");
    }
    if matches!(arg.get_action(), ArgAction::Append) {
        s.push_str(" (repeatable)");
    }
    format!("`{s}`")
}

/// The default value(s), `required`, or `—`.
fn default(arg: &Arg) -> String {
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && !arg.is_hide_default_value_set() {
        let shown = defaults.join(",");
        if shown.is_empty() {
            return "empty".to_owned();
        }
        return format!("`{}`", cell(&shown));
    }
    if arg.is_required_set() {
        "required".to_owned()
    } else if matches!(arg.get_action(), ArgAction::SetTrue) {
        "off".to_owned()
    } else {
        "—".to_owned()
    }
}

/// The help text in one line, with the possible values and the delimiter when clap knows them.
fn meaning(arg: &Arg) -> String {
    let mut text = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|s| sentence(&one_paragraph(&s.to_string())))
        .unwrap_or_default();
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    let is_flag = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse);
    if !values.is_empty() && !is_flag && !arg.is_hide_possible_values_set() {
        let _ = write!(text, " One of: {}.", values.join(", "));
    }
    if let Some(d) = arg.get_value_delimiter() {
        let _ = write!(text, " Several values separated by `{d}`.");
    }
    if arg.get_env().is_some() && arg.is_hide_env_values_set() {
        text.push_str(" Its value is never printed.");
    }
    cell(text.trim())
}

/// Paragraphs joined into one line (Markdown table cells hold one line).
fn one_paragraph(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Help text as a sentence: clap drops the final period of a one-paragraph doc comment, and
/// more text follows it in the table.
fn sentence(s: &str) -> String {
    if s.is_empty() || s.ends_with(['.', '!', '?']) {
        s.to_owned()
    } else {
        format!("{s}.")
    }
}

/// Escapes what would end a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;
    use std::path::PathBuf;

    fn doc_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md")
    }

    /// docs/configuration.md below its marker is exactly what the binary's clap definitions
    /// render: a flag, variable, default or help text changed without the document fails here.
    /// `ACTIOND_UPDATE_DOCS=1` rewrites the generated part instead.
    #[test]
    fn docs_configuration_md_matches_the_clap_definitions() {
        let path = doc_path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let fresh = configuration(&crate::Cli::command());
        let update = std::env::var_os("ACTIOND_UPDATE_DOCS").is_some();
        let Some(at) = text.find(MARKER) else {
            if update {
                std::fs::write(&path, format!("{}\n\n{fresh}", text.trim_end())).unwrap();
                return;
            }
            panic!(
                "{} has no marker line; the generated part starts with:\n{MARKER}",
                path.display()
            );
        };
        let (hand, generated) = text.split_at(at);
        if update {
            std::fs::write(&path, format!("{hand}{fresh}")).unwrap();
            return;
        }
        if generated != fresh {
            let first = generated
                .lines()
                .zip(fresh.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(generated.lines().count().min(fresh.lines().count()));
            panic!(
                "docs/configuration.md is stale: the clap definitions changed (first difference at \
                 generated line {}: file has {:?}, binary renders {:?}).\nRegenerate it with\n    \
                 ACTIOND_UPDATE_DOCS=1 cargo test -p actiond --bin actiond docs::tests::docs_configuration_md\n\
                 (or replace everything from the marker line on with the output of \
                 `cargo run -q -p actiond -- docs configuration`) and commit the result.",
                first + 1,
                generated.lines().nth(first).unwrap_or("<end>"),
                fresh.lines().nth(first).unwrap_or("<end>"),
            );
        }
    }

    /// Every environment variable any flag reads is in the index and in a table, and the
    /// rendering names the roles: a test of the renderer, so that "matches" above means
    /// something.
    #[test]
    fn the_rendering_lists_every_environment_variable_of_every_role() {
        let root = crate::Cli::command();
        let text = configuration(&root);
        let mut sections = Vec::new();
        collect(&root, &mut Vec::new(), &mut sections);
        let mut seen = 0;
        for (path, cmd) in &sections {
            assert!(text.contains(&format!("`{path}`")), "{path} has no section");
            for arg in visible_args(cmd) {
                if let Some(env) = arg.get_env() {
                    let env = env.to_string_lossy();
                    assert!(text.contains(&format!("| `{env}` |")), "{env} not indexed");
                    seen += 1;
                }
            }
        }
        for role in [
            "actiond api",
            "actiond policy",
            "actiond executor",
            "actiond web",
        ] {
            assert!(
                text.contains(&format!("## `{role}`")),
                "no section for {role}"
            );
        }
        for env in [
            "ACTIOND_API_LISTEN",
            "ACTIOND_POLICY_EVAL_BUDGET_MS",
            "ACTIOND_EXECUTOR_TRUSTED_KEYS_DIR",
            "ACTIOND_WEB_OIDC_ISSUER",
            "ACTIOND_LOG_FORMAT",
        ] {
            assert!(text.contains(&format!("`{env}`")), "{env} missing");
        }
        assert!(seen > 50, "only {seen} environment variables found");
        assert!(!text.contains("--help"), "--help is listed");
    }

    #[test]
    fn anchors_follow_github() {
        assert_eq!(anchor("actiond tenant apply"), "actiond-tenant-apply");
        assert_eq!(anchor("actiond mcp-stdio"), "actiond-mcp-stdio");
    }
}

/// Checks of the repository's Markdown that need no binary: relative links resolve, the
/// README stays short, and the security-rule table of docs/ARCHITECTURE.md names functions
/// that exist.
#[cfg(test)]
mod docs_tests {
    use std::collections::{BTreeSet, HashMap};
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .unwrap()
    }

    /// Every Markdown file of the repository, outside build output and installed modules.
    fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && !matches!(name.as_str(), "target" | "node_modules") {
                    markdown_files(&path, out);
                }
            } else if name.ends_with(".md") {
                out.push(path);
            }
        }
    }

    /// Lines outside fenced code blocks, with inline code spans removed, and their numbers.
    fn prose_lines(text: &str) -> Vec<(usize, String)> {
        let mut fenced = false;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if !fenced {
                let mut kept = String::new();
                for (j, part) in line.split('`').enumerate() {
                    if j % 2 == 0 {
                        kept.push_str(part);
                    }
                }
                out.push((i + 1, kept));
            }
        }
        out
    }

    /// GitHub's anchors of a page's headings (`## A b: c` → `a-b-c`; repeats get `-1`, `-2`).
    fn anchors(text: &str) -> BTreeSet<String> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut out = BTreeSet::new();
        let mut fenced = false;
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced || !line.starts_with('#') {
                continue;
            }
            let title = line.trim_start_matches('#');
            if !title.starts_with(' ') {
                continue;
            }
            let slug: String = title
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect();
            let n = seen.entry(slug.clone()).or_insert(0);
            out.insert(if *n == 0 {
                slug.clone()
            } else {
                format!("{slug}-{n}")
            });
            *n += 1;
        }
        out
    }

    /// The targets of `[text](target)` links on a line.
    fn link_targets(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
        out
    }

    #[test]
    fn every_relative_link_in_the_repositorys_markdown_resolves() {
        let root = root();
        let mut files = Vec::new();
        markdown_files(&root, &mut files);
        assert!(
            files.len() >= 8,
            "only {} Markdown files found",
            files.len()
        );
        let mut broken = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let rel = file.strip_prefix(&root).unwrap().display().to_string();
            for (n, line) in prose_lines(&text) {
                for target in link_targets(&line) {
                    if target.contains("://") || target.starts_with("mailto:") {
                        continue;
                    }
                    let (path, anchor) = match target.split_once('#') {
                        Some((p, a)) => (p, Some(a)),
                        None => (target.as_str(), None),
                    };
                    let dest = if path.is_empty() {
                        file.clone()
                    } else {
                        file.parent().unwrap().join(path)
                    };
                    if !dest.exists() {
                        // docs/security.md is written by the security work, one heading per
                        // defence; until the first lands, the README may already point at it.
                        if path.ends_with("security.md") && anchor.is_none() {
                            continue;
                        }
                        broken.push(format!("{rel}:{n}: {target}: no such file"));
                        continue;
                    }
                    if let Some(a) = anchor
                        && dest.extension().is_some_and(|e| e == "md")
                    {
                        let known = anchors(&std::fs::read_to_string(&dest).unwrap());
                        if !known.contains(a) {
                            broken
                                .push(format!("{rel}:{n}: {target}: no heading with anchor #{a}"));
                        }
                    }
                }
            }
        }
        assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    }

    #[test]
    fn anchors_are_the_ones_github_makes() {
        let page = "# actiond\n## Walk-through: the guide's injected ticket\n\
                    ## Is a narrow queue table worth it? `narrow-queue/run.sh`\n\
                    ```sh\n# not a heading\n```\n## History\n## History\n";
        let a = anchors(page);
        for want in [
            "actiond",
            "walk-through-the-guides-injected-ticket",
            "is-a-narrow-queue-table-worth-it-narrow-queuerunsh",
            "history",
            "history-1",
        ] {
            assert!(a.contains(want), "{want} missing from {a:?}");
        }
        assert!(!a.contains("not-a-heading"));
        assert_eq!(
            link_targets("see [a](b.md#c) and [d](../e)"),
            ["b.md#c", "../e"]
        );
    }

    #[test]
    fn the_readme_stays_short() {
        let len = std::fs::metadata(root().join("README.md")).unwrap().len();
        assert!(
            len <= 15_000,
            "README.md is {len} bytes; it is the front page (at most 15,000 bytes): move detail \
             into docs/ and link to it"
        );
    }

    /// Each row of "Where each security rule lives" names a file that exists and functions
    /// (`fn`, SQL `FUNCTION`, `static` or `const`) that the file defines.
    #[test]
    fn architecture_table_names_real_functions() {
        let root = root();
        let text = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
        let start = text
            .find("## Where each security rule lives")
            .expect("docs/ARCHITECTURE.md has no \"Where each security rule lives\" section");
        let section = &text[start..];
        let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
        let mut rows = 0;
        let mut wrong = Vec::new();
        for line in section.lines().filter(|l| l.starts_with("| ")).skip(2) {
            let mut cells: Vec<&str> = line.split(" | ").collect();
            assert!(cells.len() >= 4, "not a row of four cells: {line}");
            cells[0] = cells[0].trim_start_matches('|').trim();
            // The rule may span several files (a function and its helper): each function
            // named must be defined in one of the files the row links.
            let links = link_targets(cells[1]);
            if links.is_empty() {
                wrong.push(format!("{}: no file link", cells[0]));
                continue;
            }
            let mut sources = Vec::new();
            for target in &links {
                match std::fs::read_to_string(root.join("docs").join(target)) {
                    Ok(source) => sources.push(source),
                    Err(_) => wrong.push(format!("{}: {target} does not exist", cells[0])),
                }
            }
            let names: Vec<&str> = cells[2].split('`').skip(1).step_by(2).collect();
            assert!(!names.is_empty(), "{}: no function named", cells[0]);
            for name in names {
                let defined = [
                    format!("fn {name}("),
                    format!("fn {name}<"),
                    format!("FUNCTION {name}("),
                    format!("static {name}:"),
                    format!("const {name}:"),
                ]
                .iter()
                .any(|d| sources.iter().any(|s| s.contains(d.as_str())));
                if !defined {
                    wrong.push(format!(
                        "{}: {} defines no {name}",
                        cells[0],
                        links.join(", ")
                    ));
                }
            }
            rows += 1;
        }
        assert!(rows >= 20, "only {rows} rows read");
        assert!(
            wrong.is_empty(),
            "docs/ARCHITECTURE.md, \"Where each security rule lives\", is out of date:\n{}",
            wrong.join("\n")
        );
    }

    /// Every `ACTIOND_*` variable the shipped code names (`std::env::var` reads as well as clap
    /// `env =`), outside tests and the test harness, is written in docs/configuration.md.
    #[test]
    fn every_actiond_variable_the_code_reads_is_in_docs_configuration_md() {
        let root = root();
        let doc = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
        let mut sources = Vec::new();
        for dir in ["services", "web/src"] {
            rust_files(&root.join(dir), &mut sources);
        }
        let mut missing = BTreeSet::new();
        let mut seen = 0;
        for file in sources {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (i, _) in code.match_indices("\"ACTIOND_") {
                let name: String = code[i + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                seen += 1;
                if !doc.contains(&format!("`{name}`")) {
                    missing.insert(format!("{name} ({})", file.display()));
                }
            }
        }
        assert!(seen > 40, "only {seen} ACTIOND_ names found");
        assert!(
            missing.is_empty(),
            "docs/configuration.md does not mention: {missing:?}"
        );
    }

    /// Rust sources of shipped crates: not `tests/` directories, not the test harness.
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(
                    name.as_str(),
                    "tests" | "testkit" | "target" | "node_modules" | "e2e"
                ) && !name.starts_with('.')
                {
                    rust_files(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
}
