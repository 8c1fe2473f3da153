//! A newcomer's first hour (issue 37): `actiond dev` says where everything is and refuses
//! before it starts anything; connection failures name the address, the setting and the fix;
//! every metric the docs, the dashboard and the alerts name is on the first scrape.

use actiond_testkit::{TestDb, actiond_bin};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `actiond args…` with `envs` and no inherited actiond settings; (code, stdout, stderr).
fn run(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(actiond_bin());
    cmd.args(args)
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("RUST_LOG")
        .env_remove("DATABASE_URL")
        .env_remove("ACTIOND_URL")
        .env_remove("ACTIOND_TOKEN");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The repository's root (where docs/, deploy/ and helm/ are).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A refused Postgres: the CLI and `actiond dev` name the address, the setting and the fix,
/// exit 4 ("unreachable"); before, "database error: error connecting to server: Connection
/// refused (os error 111)", and dev's "migrations failed" hid what failed.
#[test]
fn a_refused_postgres_names_the_address_the_setting_and_the_fix() {
    let url = format!(
        "postgres://nobody@127.0.0.1:{}/none",
        actiond_testkit::free_port()
    );
    let port = url.split(':').nth(2).unwrap().split('/').next().unwrap();
    let at = format!("127.0.0.1:{port}");
    let (code, _, err) = run(&["migrate"], &[("DATABASE_URL", &url)]);
    assert_eq!(code, 4, "{err}");
    for says in [
        format!("cannot connect to Postgres at {at}"),
        "DATABASE_URL (or --database-url)".into(),
        "nothing listens at that address: start Postgres there".into(),
    ] {
        assert!(err.contains(&says), "{says:?} in {err}");
    }
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let dir = std::env::temp_dir().join(format!("actiond-dev-refused-{}", uuid::Uuid::new_v4()));
    let state = dir.display().to_string();
    let (code, out, err) = run(
        &[
            "dev",
            "--state-dir",
            &state,
            "--api-listen",
            "127.0.0.1:0",
            "--web-listen",
            "127.0.0.1:0",
        ],
        &[("DATABASE_URL", &url)],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains(&format!("cannot connect to Postgres at {at}")),
        "{err}"
    );
    assert!(err.contains("nothing listens"), "{err}");
}

/// A service that cannot reach Postgres says where it tried, in the line it repeats while it
/// retries.
#[test]
fn a_service_retrying_postgres_names_the_address() {
    use std::io::BufRead as _;
    let port = actiond_testkit::free_port();
    let mut api = Command::new(actiond_bin())
        .args([
            "api",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("RUST_LOG")
        .env(
            "DATABASE_URL",
            format!("postgres://nobody@127.0.0.1:{port}/none"),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(api.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut found = None;
    for l in lines.map_while(Result::ok).take(200) {
        if l.contains("LISTEN connection failed") {
            found = Some(l);
            break;
        }
        seen.push(l);
    }
    let _ = api.kill();
    let _ = api.wait();
    let line = found.unwrap_or_else(|| panic!("no retry line: {seen:?}"));
    assert!(
        line.contains(&format!("cannot connect to Postgres at 127.0.0.1:{port}")),
        "{line}"
    );
    assert!(line.contains("DATABASE_URL"), "{line}");
}

/// An API nobody listens on: the client names the address, `ACTIOND_URL` and what to start.
#[test]
fn an_unreachable_api_names_the_address_the_setting_and_the_fix() {
    let port = actiond_testkit::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let (code, out, err) = run(
        &["status", "00000000-0000-0000-0000-000000000000"],
        &[("ACTIOND_URL", &url), ("ACTIOND_TOKEN", "t")],
    );
    assert_eq!(code, 4, "{err}");
    assert!(out.is_empty(), "{out}");
    for says in [
        format!("cannot reach the API at 127.0.0.1:{port}"),
        "ACTIOND_URL".into(),
        "nothing listens there: start the API".into(),
    ] {
        assert!(err.contains(&says), "{says:?} in {err}");
    }
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

/// What makes a second `actiond dev` fail is found before it starts a Postgres: a state
/// directory whose dev still runs, an address another process holds, and a `DATABASE_URL`
/// left over from an earlier run's `export` line (named as the cause, with `unset`).
#[test]
fn a_second_dev_is_refused_before_it_starts_postgres() {
    let base = std::env::temp_dir().join(format!("actiond-dev-second-{}", uuid::Uuid::new_v4()));
    // A state directory a running dev holds: this test process stands in for it.
    let held = base.join("held");
    std::fs::create_dir_all(&held).unwrap();
    std::fs::write(
        held.join(".actiond-dev-state"),
        format!("{}\n", std::process::id()),
    )
    .unwrap();
    let held_s = held.display().to_string();
    let any = ["--api-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0"];
    let (code, out, err) = run(&[&["dev", "--state-dir", &held_s][..], &any].concat(), &[]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("another actiond dev"), "{err}");
    assert!(!out.contains("starting a throwaway PostgreSQL"), "{out}");

    // The api address is taken (a first dev with the defaults).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let fresh = base.join("fresh").display().to_string();
    let (code, out, err) = run(
        &[
            "dev",
            "--state-dir",
            &fresh,
            "--api-listen",
            &addr,
            "--web-listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    drop(taken);
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains(&format!("--api-listen {addr}")), "{err}");
    assert!(err.contains("pass --api-listen 127.0.0.1:0"), "{err}");
    assert!(!out.contains("starting a throwaway PostgreSQL"), "{out}");

    // The banner's export line of an earlier run, still in this shell.
    let leftover = "postgres://actiond_admin_login@127.0.0.1:45678/actiond";
    let (code, out, err) = run(
        &[&["dev", "--state-dir", &fresh][..], &any].concat(),
        &[("DATABASE_URL", leftover)],
    );
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        err.contains("DATABASE_URL is actiond_admin_login@127.0.0.1:45678/actiond"),
        "{err}"
    );
    assert!(err.contains("unset DATABASE_URL"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&base);
}

/// `scripts/dev` lets cargo show its progress (the first build is minutes) and says so first;
/// before, `cargo build -q` printed nothing for 86 s. A stand-in `cargo` records its
/// arguments and stops the script.
#[test]
fn scripts_dev_shows_the_builds_progress() {
    let dir = std::env::temp_dir().join(format!("actiond-scripts-dev-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("cargo");
    std::fs::write(&fake, "#!/bin/sh\necho \"cargo $*\" >&2\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(repo().join("scripts/dev"))
        .env("PATH", path)
        // With DATABASE_URL no PostgreSQL server package is looked for.
        .env("DATABASE_URL", "postgres://unused@127.0.0.1:1/x")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("installing Debian packages") {
        // A machine without the build packages would install them first; not this test's job.
        return;
    }
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("==> building actiond"), "{err}");
    let cargo = err
        .lines()
        .find(|l| l.starts_with("cargo "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(cargo.starts_with("cargo build"), "{cargo}");
    assert!(!cargo.split_whitespace().any(|a| a == "-q"), "{cargo}");
}

/// A running `actiond dev` (api and web on port 0), its banner read up to the first command.
struct Dev {
    _tdb: TestDb,
    dir: PathBuf,
    child: tokio::process::Child,
    banner: Vec<String>,
}

impl Dev {
    async fn start() -> Self {
        use tokio::io::AsyncBufReadExt as _;
        let tdb = TestDb::new().await;
        let dir =
            std::env::temp_dir().join(format!("actiond-dev-metrics-{}", uuid::Uuid::new_v4()));
        let mut child = tokio::process::Command::new(actiond_bin())
            .args(["dev", "--state-dir", &dir.display().to_string()])
            .args(["--api-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0"])
            .env("DATABASE_URL", &tdb.url)
            .env_remove("CREDENTIALS_DIRECTORY")
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut banner = Vec::new();
        let read = tokio::time::timeout(std::time::Duration::from_secs(180), async {
            while let Some(l) = lines.next_line().await.unwrap() {
                if l.starts_with("Try it from another terminal") {
                    return true;
                }
                banner.push(l);
            }
            false
        })
        .await;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        assert_eq!(read, Ok(true), "banner: {banner:#?}");
        Self {
            _tdb: tdb,
            dir,
            child,
            banner,
        }
    }

    /// The banner line starting with `label`, and the lines continuing it (indented, no label).
    fn section(&self, label: &str) -> String {
        let mut out = String::new();
        let mut inside = false;
        for l in &self.banner {
            let label_of = l.get(2..16).unwrap_or("").trim();
            if l.starts_with("  ") && !label_of.is_empty() {
                inside = label_of == label;
            }
            if inside {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), self.child.wait()).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every `(name, labels)` series of a Prometheus text exposition.
fn series(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (head, _) = l.rsplit_once(' ').unwrap_or((l, ""));
        let (name, labels) = match head.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (head, ""),
        };
        let mut map = BTreeMap::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            if let Some((k, v)) = pair.split_once('=') {
                map.insert(k.to_owned(), v.trim_matches('"').to_owned());
            }
        }
        out.push((name.to_owned(), map));
    }
    out
}

/// Label matchers of a mention: `(label, Some(value))` for `label="value"`, `(label, None)`
/// for a bare label name.
type Matchers = Vec<(String, Option<String>)>;

/// The metric names (`actiond_…`) with their label matchers (`k="v"` or a bare label name) in
/// `text`: a PromQL expression or a documentation code span.
fn mentions(text: &str) -> Vec<(String, Matchers)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("actiond_") {
        let from = &rest[i..];
        let end = from
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(from.len());
        let name = &from[..end];
        let before = rest[..i].chars().next_back();
        let mut matchers = Vec::new();
        if let Some(body) = from[end..].strip_prefix('{')
            && let Some(close) = body.find('}')
        {
            for m in body[..close].split(',') {
                let m = m.trim();
                match m.split_once('=') {
                    Some((k, _)) if k.ends_with('!') || m.contains("=~") => {}
                    Some((k, v)) => {
                        for value in v.split('|') {
                            matchers.push((
                                k.trim().to_owned(),
                                Some(value.trim_matches('"').to_owned()),
                            ));
                        }
                    }
                    None if !m.is_empty() => matchers.push((m.to_owned(), None)),
                    None => {}
                }
            }
        }
        // Part of a longer identifier (`x_actiond_y`) is not a mention.
        if before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_')) {
            out.push((name.to_owned(), matchers));
        }
        rest = &from[end..];
    }
    out
}

/// Whether a documentation name is a metric (not a database role or function): its suffix.
fn looks_like_metric(name: &str) -> bool {
    [
        "_total", "_seconds", "_ratio", "_info", "_events", "_refused", "_depth", "_bucket",
        "_count", "_sum",
    ]
    .iter()
    .any(|s| name.ends_with(s))
}

/// Every metric the docs (docs/*.md, deploy/README.md), the Grafana dashboard and the
/// Prometheus alerts (deploy/ and the Helm chart's copies) name, with where it is named.
fn documented_metrics() -> Vec<(String, Matchers, String)> {
    let root = repo();
    let mut out = Vec::new();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root.join("deploy/README.md"));
    for p in docs {
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, span) in text.split('`').enumerate() {
            if i % 2 == 1 && span.starts_with("actiond_") {
                for (name, m) in mentions(span) {
                    if looks_like_metric(&name) {
                        out.push((name, m, p.display().to_string()));
                    }
                }
            }
        }
    }
    for p in [
        "deploy/prometheus/actiond-alerts.yaml",
        "helm/actiond/files/actiond-alerts.yaml",
    ] {
        let v: serde_json::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(root.join(p)).unwrap()).unwrap();
        for rule in v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
        {
            for (name, m) in mentions(rule["expr"].as_str().unwrap_or("")) {
                out.push((name, m, format!("{p} {}", rule["alert"])));
            }
        }
    }
    for p in [
        "deploy/grafana/actiond.json",
        "helm/actiond/files/actiond.json",
    ] {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.join(p)).unwrap()).unwrap();
        let mut todo = vec![&v];
        while let Some(x) = todo.pop() {
            match x {
                serde_json::Value::Object(o) => {
                    if let Some(e) = o.get("expr").and_then(|e| e.as_str()) {
                        for (name, m) in mentions(e) {
                            out.push((name, m, p.to_owned()));
                        }
                    }
                    todo.extend(o.values());
                }
                serde_json::Value::Array(a) => todo.extend(a),
                _ => {}
            }
        }
    }
    out
}

/// Series that appear only with data no fresh `actiond dev` has: the decision-time histogram,
/// one series per tenant and verdict from the first decision. (The retention job's purge
/// counter was here too: dev did not run the job, and the job exported a tenant's series only
/// once a round had gone through it.)
const NOT_ON_A_FRESH_DEV: [&str; 3] = [
    "actiond_web_decision_seconds",
    "actiond_web_decision_seconds_bucket",
    "actiond_web_decision_seconds_count",
];

/// A fresh `actiond dev` with `--api-listen 127.0.0.1:0`: the banner shows the port the API
/// got (it printed port 0), every service's admin address and who can approve at the dev
/// login; and the first scrape of those admin addresses has every metric that the docs, the
/// dashboard and the alerts name, with the labels they name (a documented label list is the
/// exported one exactly; a matched value such as `reason="replayed"` is there at 0). Before,
/// the docs named `grants_rejected_total` (exported `actiond_grants_rejected_total`), and
/// `actiond_grants_rejected_total` and `actiond_policy_expired_total` did not exist until
/// their first event, so their panels said "No data".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_banner_addresses_and_every_documented_metric_on_the_first_scrape() {
    let dev = Dev::start().await;
    let api_line = dev.section("API");
    let metrics = dev.section("metrics");
    let approvers = dev.section("approvers");
    let text = dev.banner.join("\n");
    let admin: BTreeMap<String, String> = metrics
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[1].starts_with("http://"))
        .map(|w| (w[0].to_owned(), w[1].to_owned()))
        .collect();
    let http = reqwest::Client::new();
    let mut exported: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let mut scraped = Vec::new();
    for (role, url) in &admin {
        let body = http
            .get(format!("{url}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        scraped.push(role.clone());
        exported.extend(series(&body));
    }
    let api = api_line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_default()
        .to_owned();
    let openapi = http
        .get(format!("{api}/openapi.yaml"))
        .send()
        .await
        .map(|r| r.status().as_u16());
    dev.stop().await;

    assert!(!api.ends_with(":0"), "{text}");
    assert_eq!(
        openapi.ok(),
        Some(200),
        "the API at the banner's address: {text}"
    );
    assert_eq!(
        scraped,
        ["api", "executor", "policy", "retention", "sealer", "web"],
        "{text}"
    );
    for who in ["dev-operator", "demo-approvers", "team-leads", "finance"] {
        assert!(approvers.contains(who), "{who} in {approvers}");
    }

    let names: BTreeSet<&str> = exported.iter().map(|(n, _)| n.as_str()).collect();
    let mut missing = Vec::new();
    for (name, matchers, at) in documented_metrics() {
        if NOT_ON_A_FRESH_DEV.contains(&name.as_str()) {
            continue;
        }
        // A histogram is named by its base name in docs; exported as _bucket, _sum, _count.
        let of_name: Vec<&BTreeMap<String, String>> = exported
            .iter()
            .filter(|(n, _)| *n == name || *n == format!("{name}_count"))
            .map(|(_, l)| l)
            .collect();
        if of_name.is_empty() {
            missing.push(format!("{name} ({at})"));
            continue;
        }
        let bare: BTreeSet<&str> = matchers
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.as_str())
            .collect();
        if !bare.is_empty() {
            let exported_labels: BTreeSet<&str> = of_name[0]
                .keys()
                .map(String::as_str)
                .filter(|k| *k != "le")
                .collect();
            if exported_labels != bare {
                missing.push(format!(
                    "{name}{bare:?}: exported with {exported_labels:?} ({at})"
                ));
            }
        }
        for (k, v) in matchers.iter().filter_map(|(k, v)| Some((k, v.as_ref()?))) {
            if k == "namespace" {
                continue; // added by Prometheus from the scrape target
            }
            if !of_name.iter().any(|l| l.get(k) == Some(v)) {
                missing.push(format!("{name}{{{k}=\"{v}\"}} ({at})"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "not on the first scrape:\n{}\nexported: {names:?}",
        missing.join("\n")
    );
}

/// Ctrl-C in the terminal of an `actiond dev` on its throwaway Postgres (SIGINT to the whole
/// foreground process group, as a terminal sends it) stops everything cleanly: exit 0,
/// `actiond dev stopped`, and no service logs that it lost its database while draining.
/// Before, Postgres was in the same group, got the SIGINT too and shut down under the
/// services, which logged `WARN … LISTEN connection lost` and `Connection error: db error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_dev_on_its_throwaway_postgres_without_warnings() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = std::env::temp_dir().join(format!("actiond-dev-ctrlc-{}", uuid::Uuid::new_v4()));
    let mut child = tokio::process::Command::new(actiond_bin())
        .args(["dev", "--state-dir", &dir.display().to_string()])
        .args(["--api-listen", "127.0.0.1:0", "--web-listen", "127.0.0.1:0"])
        .env_remove("DATABASE_URL")
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let errors = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Ok(Some(l)) = err.next_line().await {
            all.push(l);
        }
        all
    });
    let up = tokio::time::timeout(std::time::Duration::from_secs(180), async {
        while let Some(l) = out.next_line().await.unwrap() {
            if l.starts_with("Try it from another terminal") {
                return true;
            }
        }
        false
    })
    .await;
    let pid = child.id().unwrap() as i32;
    let group = nix::unistd::Pid::from_raw(-pid);
    let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGINT);
    let rest = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Ok(Some(l)) = out.next_line().await {
            all.push(l);
        }
        all
    });
    let status = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait()).await;
    let (rest, errors) = (rest.await.unwrap(), errors.await.unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(up, Ok(true), "{errors:#?}");
    let status = status.expect("dev stopped within 60 s").unwrap();
    assert!(status.success(), "{status}: {errors:#?}");
    assert!(rest.iter().any(|l| l == "actiond dev stopped"), "{rest:#?}");
    let after: Vec<&String> = errors
        .iter()
        .skip_while(|l| !l.contains("shutdown signal received"))
        .filter(|l| l.contains("db error") || l.contains("connection lost"))
        .collect();
    assert!(
        after.is_empty(),
        "lost the database while stopping: {after:#?}"
    );
}
