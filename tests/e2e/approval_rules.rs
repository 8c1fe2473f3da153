//! Approvals that cannot be gamed (issue #9), over real processes: `actiond api` and `policy`
//! escalate, `actiond web` (dev login, the loopback stand-in for SSO) and the break-glass CLI
//! decide. Every time bound is judged by the database clock when the decision is made, one
//! person counts once across channels, only the pinned issuer's subjects are persons, stale
//! claims and old sign-ins send the person to sign in again before an Approve counts, and
//! re-typed values must match the stored params. Every refusal is an `approval.refused` event.

use crate::support::{Options, Stack, TENANT, refund};
use actiond_testkit::{Service, cli, eventually};
use reqwest::StatusCode;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

/// `actiond web` with the dev login, and how to sign in to it.
pub(crate) struct Web {
    pub(crate) url: String,
    pub(crate) svc_index: usize,
}

/// A signed-in browser: its cookie jar and the person's subject.
pub(crate) struct Person {
    pub(crate) http: reqwest::Client,
    pub(crate) subject: String,
}

fn hidden(html: &str, name: &str) -> String {
    crate::web::hidden(html, name)
}

impl Web {
    async fn start(s: &mut Stack) -> Self {
        let mut web = Service::spawn(
            "web",
            "web",
            &[],
            &[
                ("DATABASE_URL", s.tdb.role_url("web").await),
                ("ACTIOND_WEB_LISTEN", "127.0.0.1:0".into()),
                (
                    "ACTIOND_WEB_CREDENTIALS_DIR",
                    s.keys.web_dir.display().to_string(),
                ),
                ("ACTIOND_WEB_GRANT_KEY_ID", "web-1".into()),
                ("ACTIOND_WEB_DEV_LOGIN", "true".into()),
            ],
            &s.logs,
        );
        let url = web.url("http").await;
        s.services.push(web);
        let w = Self {
            url,
            svc_index: s.services.len() - 1,
        };
        w.code(s).await;
        w
    }

    /// The current one-time code (the last one the log announced).
    pub(crate) async fn code(&self, s: &Stack) -> String {
        let svc = &s.services[self.svc_index];
        eventually(T, "dev login code on stderr", || {
            let log = svc.log_text();
            async move {
                log.lines()
                    .filter_map(|l| l.split_once("one-time code"))
                    .filter_map(|(_, rest)| rest.split_once(": "))
                    .filter_map(|(_, rest)| rest.split_whitespace().next().map(str::to_owned))
                    .next_back()
            }
        })
        .await
    }

    /// Signs `subject` in with `groups` through the dev login, in `http`'s cookie jar (a fresh
    /// browser when `None`).
    pub(crate) async fn login(
        &self,
        s: &Stack,
        subject: &str,
        groups: &str,
        again: Option<Person>,
    ) -> Person {
        let http = again.map(|p| p.http).unwrap_or_else(|| {
            reqwest::Client::builder()
                .cookie_store(true)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap()
        });
        let page = http
            .get(format!("{}/login?again=1", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let code = self.code(s).await;
        let r = http
            .post(format!("{}/dev-login", self.url))
            .header("origin", &self.url)
            .form(&[
                ("prelogin", hidden(&page, "prelogin").as_str()),
                ("next", "/queue"),
                ("code", code.as_str()),
                ("subject", subject),
                ("email", &format!("{subject}@acme.test")),
                ("groups", groups),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "dev login of {subject}");
        // The next login needs the next code: wait until the used one is replaced.
        eventually(T, "a fresh one-time code", || {
            let c = self.code(s);
            let used = code.clone();
            async move { Some(c.await).filter(|c| *c != used) }
        })
        .await;
        Person {
            http,
            subject: subject.to_owned(),
        }
    }

    /// GETs the decision page: (status, html).
    pub(crate) async fn page(&self, p: &Person, id: uuid::Uuid) -> (StatusCode, String) {
        let r = p
            .http
            .get(format!("{}/p/{id}", self.url))
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    }

    /// Reads the decision page: the form fields of a decision with `verdict`.
    pub(crate) async fn form(
        &self,
        p: &Person,
        id: uuid::Uuid,
        verdict: &str,
    ) -> Vec<(String, String)> {
        let (st, page) = self.page(p, id).await;
        assert_eq!(st, StatusCode::OK, "{} reads {id}: {page}", p.subject);
        ["csrf", "intent_hash", "doc_version", "shown"]
            .iter()
            .map(|k| ((*k).to_owned(), hidden(&page, k)))
            .chain([("verdict".to_owned(), verdict.to_owned())])
            .collect()
    }

    /// POSTs a decision form with `extra` fields: (status, Location, body).
    pub(crate) async fn post(
        &self,
        p: &Person,
        id: uuid::Uuid,
        mut form: Vec<(String, String)>,
        extra: &[(&str, &str)],
    ) -> (StatusCode, String, String) {
        form.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let r = p
            .http
            .post(format!("{}/p/{id}/decide", self.url))
            .header("origin", &self.url)
            .form(&form)
            .send()
            .await
            .unwrap();
        let loc = r
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (r.status(), loc, r.text().await.unwrap())
    }

    /// Reads the decision page, then POSTs `verdict` with `extra` fields.
    pub(crate) async fn decide(
        &self,
        p: &Person,
        id: uuid::Uuid,
        verdict: &str,
        extra: &[(&str, &str)],
    ) -> (StatusCode, String, String) {
        let form = self.form(p, id, verdict).await;
        self.post(p, id, form, extra).await
    }
}

/// A stack with `tenant_edit` applied to the test tenant, no executor, and one web app.
pub(crate) async fn stack(name: &str, tenant_edit: impl Fn(String) -> String) -> (Stack, Web) {
    let mut s = Stack::with(
        name,
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let doc = tenant_edit(
        TENANT
            .replace("RECEIVER", &s.recv.url)
            .replace("WEBHOOK_PATH", "hook"),
    );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    let web = Web::start(&mut s).await;
    (s, web)
}

/// `actiond approvals approve|deny ID --as SUBJECT --intent …` with `extra` flags.
pub(crate) async fn breakglass(
    s: &Stack,
    id: uuid::Uuid,
    verb: &str,
    subject: &str,
    extra: &[&str],
) -> (bool, String, String) {
    let intent: String = s.row(id).await.get("intent_hash");
    let id_s = id.to_string();
    let mut args = vec![
        "approvals",
        verb,
        &id_s,
        "--as",
        subject,
        "--intent",
        &intent[..16],
    ];
    args.extend_from_slice(extra);
    cli(&args, &s.cli_env().await)
}

/// The approve and deny commands `approvals show` prints for proposal `id` (with
/// `ACTIOND_OPERATOR` set, so without `--as`), as printed; no approve command when it prints
/// none.
pub(crate) async fn printed_commands(s: &Stack, id: uuid::Uuid) -> (Option<String>, String) {
    let mut env = s.cli_env().await;
    env.push(("ACTIOND_OPERATOR", "someone".into()));
    let (ok, out, err) = cli(&["approvals", "show", &id.to_string()], &env);
    assert!(ok, "{err}");
    let line = |verb: &str| {
        out.lines()
            .find(|l| l.contains(&format!(" approvals {verb} {id} ")))
            .map(|l| l.trim().to_owned())
    };
    let deny = line("deny").unwrap_or_else(|| panic!("no deny command: {out}"));
    (line("approve"), deny)
}

/// Runs a command `approvals show` printed, pasted into a shell as it is, as `operator`
/// (`ACTIOND_OPERATOR`).
pub(crate) async fn paste(s: &Stack, command: &str, operator: &str) -> (bool, String, String) {
    let out = std::process::Command::new("bash")
        .args(["-c", command])
        .envs(s.cli_env().await)
        .env("ACTIOND_OPERATOR", operator)
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(crate) async fn grants(s: &Stack, id: uuid::Uuid) -> i64 {
    let c = s.tdb.db.client().await.unwrap();
    c.query_one("SELECT count(*) FROM grants WHERE proposal_id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

/// Who the proposal's grant names as its approvers (`grants.issued_by`).
pub(crate) async fn issued_by(s: &Stack, id: uuid::Uuid) -> String {
    let c = s.tdb.db.client().await.unwrap();
    c.query_one(
        "SELECT issued_by FROM grants WHERE proposal_id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .get(0)
}

/// The `detail.rule` of every `approval.refused` event of a proposal, in order.
pub(crate) async fn refusals(s: &Stack, id: uuid::Uuid) -> Vec<String> {
    s.audit_kinds(id)
        .await
        .into_iter()
        .filter(|(k, _)| k == "approval.refused")
        .map(|(_, d)| d["rule"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Moves a proposal's creation back so that its `escalation_ttl` (1h in the test tenant) ends
/// `left` from now by the database clock (negative: already passed).
async fn ttl_ends_in(s: &Stack, id: uuid::Uuid, left_secs: f64) {
    let c = s.tdb.db.client().await.unwrap();
    c.execute(
        "UPDATE proposals SET created_at = now() - interval '1 hour' + make_interval(secs => $2) WHERE id = $1",
        &[&id, &left_secs],
    )
    .await
    .unwrap();
}

fn policy_index(s: &Stack) -> usize {
    s.services.iter().position(|x| x.role == "policy").unwrap()
}

/// A tenant whose stored document no longer parses does not stop expiry for the tenants after
/// it: the policy sweep used to give up at the first tenant that failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broken_tenant_does_not_stop_expiry_for_the_others() {
    let s = Stack::with(
        "sweep_one_broken_tenant",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_sweep_broken", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    // "aaa" sorts before "acme"; its stored source is edited past the validator, as a bad
    // restore or a hand edit would.
    let c = s.tdb.db.client().await.unwrap();
    c.batch_execute(
        "INSERT INTO tenants (id) VALUES ('aaa');
         INSERT INTO tenant_documents (tenant_id, version, sha256, source, document, applied_by)
         VALUES ('aaa', 1, repeat('0', 64), E'tenant: aaa\\npolicy: {default: maybe}\\n', '{}', 'test')",
    )
    .await
    .unwrap();
    ttl_ends_in(&s, id, -30.0).await;
    s.wait_state(id, "expired", T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_after_the_ttl_expires_the_proposal_on_web_and_cli() {
    let (mut s, web) = stack("approval_ttl_by_db_clock", |d| d).await;
    let ids = [
        s.propose(&refund("pi_ttl_web", 12000)).await,
        s.propose(&refund("pi_ttl_cli", 13000)).await,
        s.propose(&refund("pi_ttl_deny", 14000)).await,
        s.propose(&refund("pi_ttl_inside", 15000)).await,
    ];
    for id in ids {
        s.wait_state(id, "escalated", T).await;
    }
    // The policy worker (whose sweep also expires) is down: the decision is the only guard.
    let i = policy_index(&s);
    s.services[i].terminate();
    let alice = web.login(&s, "alice", "", None).await;
    let [web_id, cli_id, deny_id, inside_id] = ids;
    for id in [web_id, cli_id, deny_id] {
        ttl_ends_in(&s, id, -30.0).await;
    }
    // One second before the TTL by the database clock, an approval counts.
    let form = web.form(&alice, inside_id, "approve").await;
    ttl_ends_in(&s, inside_id, 1.0).await;
    let (st, loc, body) = web.post(&alice, inside_id, form, &[]).await;
    assert_eq!(
        (st, loc.as_str()),
        (
            StatusCode::SEE_OTHER,
            &*format!("/p/{inside_id}?result=approved")
        ),
        "{body}"
    );
    assert_eq!(s.state(inside_id).await, "approved");

    let (st, _, body) = web.decide(&alice, web_id, "approve", &[]).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("expired at") && body.contains("nothing will run"),
        "{body}"
    );
    let (ok, out, err) = breakglass(&s, cli_id, "approve", "bob", &[]).await;
    assert!(!ok, "{out}");
    assert!(
        err.contains("expired at") && err.contains("nothing will run"),
        "{err}"
    );
    let (st, _, body) = web.decide(&alice, deny_id, "deny", &[]).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    for id in [web_id, cli_id, deny_id] {
        assert_eq!(s.state(id).await, "expired", "{id}");
        assert_eq!(grants(&s, id).await, 0);
        assert_eq!(refusals(&s, id).await, ["escalation_ttl"]);
        let kinds: Vec<String> = s
            .audit_kinds(id)
            .await
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert!(kinds.contains(&"proposal.expired".to_owned()), "{kinds:?}");
        let n = s.approval_count(id).await;
        assert_eq!(n, 0, "a late decision is not recorded");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_person_counts_once_across_break_glass_and_web() {
    let (s, web) = stack("approval_one_person", |d| {
        d.replace(
            "    max_amount: 100000\n",
            "    max_amount: 100000\n    approvals_required: 2\n",
        )
        .replace(
            "  subjects: [alice, bob]",
            "  subjects: [alice, bob, dev-operator]",
        )
    })
    .await;
    let id = s.propose(&refund("pi_two_people", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let (ok, out, err) = breakglass(&s, id, "approve", "dev-operator", &[]).await;
    assert!(ok && out.contains("1 of 2"), "{out}{err}");
    // The same subject signed in to the web app is the same person.
    let op = web.login(&s, "dev-operator", "", None).await;
    let (st, _, body) = web.decide(&op, id, "approve", &[]).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("you already decided"), "{body}");
    assert_eq!(s.state(id).await, "escalated");
    assert_eq!(grants(&s, id).await, 0);
    assert_eq!(refusals(&s, id).await, ["same_person"]);
    // A second person completes it.
    let bob = web.login(&s, "bob", "", None).await;
    let (st, loc, _) = web.decide(&bob, id, "approve", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{id}?result=approved"))
    );
    assert_eq!(s.state(id).await, "approved");
    assert_eq!(grants(&s, id).await, 1);
    assert_eq!(issued_by(&s, id).await, "dev-operator,bob");
}

/// "The person is an approver now" holds in the decision's own transaction. alice's decision
/// page is open and her Approve passes the web app's check at the start of the request; bob's
/// break-glass command passes the CLI's. Both then wait for the proposal rows (someone else
/// holds them), and while they wait a new tenant document removes alice and bob from the
/// approvers. When the rows are free, both decisions are refused, naming the rule, audited,
/// and nothing is approved: each decision reads the current document after it has locked its
/// proposal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_removed_while_the_decision_waits_decides_nothing() {
    let (s, web) = stack("approval_removed_meanwhile", |d| d).await;
    let on_web = s.propose(&refund("pi_removed_web", 12000)).await;
    let on_cli = s.propose(&refund("pi_removed_cli", 13000)).await;
    for id in [on_web, on_cli] {
        s.wait_state(id, "escalated", T).await;
    }
    let alice = web.login(&s, "alice", "", None).await;
    let form = web.form(&alice, on_web, "approve").await;

    let mut holder = s.tdb.superuser().await;
    let held = holder.transaction().await.unwrap();
    held.execute(
        "SELECT 1 FROM proposals WHERE id = ANY($1) FOR UPDATE",
        &[&vec![on_web, on_cli]],
    )
    .await
    .unwrap();
    let (web_url, http) = (web.url.clone(), alice.http.clone());
    let web_decision = tokio::spawn(async move {
        let r = http
            .post(format!("{web_url}/p/{on_web}/decide"))
            .header("origin", &web_url)
            .form(&form)
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    });
    let intent: String = s.row(on_cli).await.get("intent_hash");
    let env = s.cli_env().await;
    let cli_decision = tokio::task::spawn_blocking(move || {
        let id = on_cli.to_string();
        cli(
            &[
                "approvals",
                "approve",
                &id,
                "--as",
                "bob",
                "--intent",
                &intent[..16],
            ],
            &env,
        )
    });
    // Both decisions passed their channel's check and wait for the rows.
    let watcher = s.tdb.superuser().await;
    let watcher = &watcher;
    eventually(
        T,
        "the web and CLI decisions waiting for the rows",
        || async move {
            let n: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'
                   AND usename IN ('actiond_test_web', 'actiond_test_admin')",
                    &[],
                )
                .await
                .ok()?
                .get(0);
            (n == 2).then_some(())
        },
    )
    .await;
    let doc = TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace("  subjects: [alice, bob]", "  subjects: [carol]");
    let actiond_store::tenants::Applied::New(applied) =
        actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
            .await
            .unwrap()
    else {
        panic!("the document without alice and bob was not stored as a new version");
    };
    held.commit().await.unwrap();

    let (st, body) = web_decision.await.unwrap();
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    let why = format!(
        "you are not an approver of tenant acme now: its current document (version {}) does not list you under approvers",
        applied.version
    );
    assert!(body.contains(&why), "{body}");
    let (ok, out, err) = cli_decision.await.unwrap();
    assert!(!ok, "bob approved after his removal: {out}");
    assert!(
        err.contains(&format!("refused (not_an_approver): {why}")),
        "{err}"
    );
    for id in [on_web, on_cli] {
        assert_eq!(s.state(id).await, "escalated", "{id}");
        assert_eq!(grants(&s, id).await, 0);
        assert_eq!(s.approval_count(id).await, 0);
        assert_eq!(refusals(&s, id).await, ["not_an_approver"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subject_of_another_issuer_is_not_an_approver() {
    // The tenant's persons are subjects of its pinned issuer; this web app's logins come from
    // another one (the dev login), so "alice" here is not the tenant's alice.
    let (s, web) = stack("approval_pinned_issuer", |d| {
        d.replace(
            "approvers:\n",
            "approvers:\n  issuer: https://sso.acme.example\n",
        )
    })
    .await;
    let id = s.propose(&refund("pi_pinned", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let alice = web.login(&s, "alice", "", None).await;
    assert_eq!(web.page(&alice, id).await.0, StatusCode::NOT_FOUND);
    let r = alice
        .http
        .post(format!("{}/p/{id}/decide", web.url))
        .header("origin", &web.url)
        .form(&[("verdict", "approve")])
        .send()
        .await
        .unwrap();
    assert_ne!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(s.state(id).await, "escalated");
    assert_eq!(grants(&s, id).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_amount_must_be_typed_again_and_match() {
    let (s, web) = stack("approval_confirm_amount", |d| {
        d.replace(
            "    max_amount: 100000\n",
            "    max_amount: 100000\n    confirm: [amount]\n    confirm_over: 50000\n",
        )
    })
    .await;
    let big = s.propose(&refund("pi_confirm_big", 60050)).await;
    let small = s.propose(&refund("pi_confirm_small", 12000)).await;
    s.wait_state(big, "escalated", T).await;
    s.wait_state(small, "escalated", T).await;
    let alice = web.login(&s, "alice", "", None).await;
    let (_, page) = web.page(&alice, big).await;
    assert!(page.contains("name=\"confirm_amount\""), "{page}");
    assert!(
        !web.page(&alice, small)
            .await
            .1
            .contains("name=\"confirm_amount\"")
    );
    let cases: [(&[(&str, &str)], &str); 3] = [
        (&[], "confirm_missing"),
        (&[("confirm_amount", "600.05")], "confirm_mismatch"),
        (&[("confirm_amount", "60050")], "confirm_mismatch"),
    ];
    for (extra, rule) in cases {
        let (st, _, body) = web.decide(&alice, big, "approve", extra).await;
        assert_eq!(st, StatusCode::CONFLICT, "{extra:?}: {body}");
        assert!(body.contains("confirm_amount"), "{body}");
        assert_eq!(s.state(big).await, "escalated");
        assert_eq!(
            refusals(&s, big).await.last().map(String::as_str),
            Some(rule)
        );
    }
    // The CLI names its flag, not the form's field, when the amount is missing or wrong.
    let (ok, _, err) = breakglass(&s, big, "approve", "bob", &[]).await;
    assert!(
        !ok && err.contains("refused (confirm_missing): --confirm-amount: type the amount shown"),
        "{err}"
    );
    let (ok, _, err) = breakglass(&s, big, "approve", "bob", &["--confirm-amount", "600.00"]).await;
    assert!(
        !ok && err.contains("refused (confirm_mismatch): --confirm-amount: the amount typed"),
        "{err}"
    );
    assert_eq!(grants(&s, big).await, 0);
    // `approvals show` asks for the amount in its approve command (not under `confirm_over`),
    // with a placeholder, never the amount itself: pasted as printed it is refused, and only
    // the amount the person read and typed approves.
    let (approve, _) = printed_commands(&s, small).await;
    assert!(!approve.unwrap().contains("--confirm-amount"));
    let (approve, _) = printed_commands(&s, big).await;
    let approve = approve.unwrap();
    assert!(
        approve.contains(" --confirm-amount AMOUNT_AS_SHOWN") && !approve.contains("600.50"),
        "the approve command asks for the amount without carrying it: {approve}"
    );
    let pasted = s.propose(&refund("pi_confirm_pasted", 60050)).await;
    s.wait_state(pasted, "escalated", T).await;
    let (approve, _) = printed_commands(&s, pasted).await;
    let approve = approve.unwrap();
    let (ok, out, err) = paste(&s, &approve, "bob").await;
    assert!(
        !ok && err.contains("refused (confirm_mismatch): --confirm-amount"),
        "pasted unchanged: {out}{err}"
    );
    assert_eq!(grants(&s, pasted).await, 0);
    let typed = approve.replace("AMOUNT_AS_SHOWN", "600.50");
    let (ok, out, err) = paste(&s, &typed, "bob").await;
    assert!(ok && out.contains("approved"), "{out}{err}");
    assert_eq!(grants(&s, pasted).await, 1);
    let (st, loc, _) = web
        .decide(&alice, big, "approve", &[("confirm_amount", "600.50")])
        .await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{big}?result=approved"))
    );
    assert_eq!(s.state(big).await, "approved");
    // Under confirm_over nothing is typed; a deny never needs it.
    let (st, loc, _) = web.decide(&alice, small, "deny", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{small}?result=denied"))
    );
}

/// Makes every session of `subject` look as if its claims were read, and the IdP last
/// authenticated the person, `secs` ago (instead of waiting).
async fn age_sessions(s: &Stack, subject: &str, claims_secs: f64, auth_secs: f64) {
    let c = s.tdb.db.client().await.unwrap();
    c.execute(
        "UPDATE web_sessions SET created_at = now() - make_interval(secs => $2),
                auth_time = now() - make_interval(secs => $3) WHERE subject = $1",
        &[&subject, &claims_secs, &auth_secs],
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_claims_and_old_sign_ins_must_sign_in_again_before_an_approve_counts() {
    let (s, web) = stack("approval_fresh_sign_in", |d| {
        d.replace(
            "    max_amount: 100000\n",
            "    max_amount: 100000\n    reauth_within: 10m\n",
        )
        .replace(
            "  subjects: [alice, bob]",
            "  subjects: [bob]\n  claim: groups\n  values: [acme-approvers]\n  max_claims_age: 5m",
        )
    })
    .await;
    let ids = [
        s.propose(&refund("pi_fresh_1", 12000)).await,
        s.propose(&refund("pi_fresh_2", 13000)).await,
        s.propose(&refund("pi_fresh_3", 14000)).await,
    ];
    for id in ids {
        s.wait_state(id, "escalated", T).await;
    }
    let [a, b, c] = ids;
    let next = |id: uuid::Uuid| format!("/login?next=%2Fp%2F{id}&again=1");

    // reauth_within: an old auth_time → Approve sends bob to sign in again; Deny works at once.
    let bob = web.login(&s, "bob", "", None).await;
    age_sessions(&s, "bob", 60.0, 3600.0).await;
    let (st, loc, _) = web.decide(&bob, a, "approve", &[]).await;
    assert_eq!((st, loc), (StatusCode::SEE_OTHER, next(a)));
    assert_eq!(
        (s.state(a).await, grants(&s, a).await),
        ("escalated".into(), 0)
    );
    let (st, loc, _) = web.decide(&bob, b, "deny", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{b}?result=denied"))
    );
    let bob = web.login(&s, "bob", "", Some(bob)).await;
    let (st, loc, _) = web.decide(&bob, a, "approve", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{a}?result=approved"))
    );

    // max_claims_age: carol approves by group; the group is gone at the IdP, her claims are
    // old → Approve sends her to sign in again, and then she is no approver at all.
    let carol = web.login(&s, "carol", "acme-approvers", None).await;
    age_sessions(&s, "carol", 600.0, 60.0).await;
    let (st, loc, _) = web.decide(&carol, c, "approve", &[]).await;
    assert_eq!((st, loc), (StatusCode::SEE_OTHER, next(c)));
    let carol = web.login(&s, "carol", "", Some(carol)).await;
    assert_eq!(web.page(&carol, c).await.0, StatusCode::NOT_FOUND);
    assert_eq!(
        (s.state(c).await, grants(&s, c).await),
        ("escalated".into(), 0)
    );
    assert_eq!(refusals(&s, a).await, ["reauth_within"]);
    assert_eq!(refusals(&s, c).await, ["max_claims_age"]);
    // Still in the group after signing in again: the Approve counts.
    let carol = web.login(&s, "carol", "acme-approvers", Some(carol)).await;
    let (st, loc, _) = web.decide(&carol, c, "approve", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{c}?result=approved"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approve_that_needs_a_passkey_is_never_break_glass_nor_unsigned() {
    let (s, web) = stack("approval_passkey", |d| {
        d.replace(
            "    max_amount: 100000\n",
            "    max_amount: 100000\n    require_passkey: true\n",
        )
    })
    .await;
    let id = s.propose(&refund("pi_passkey", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let (ok, _, err) = breakglass(&s, id, "approve", "bob", &[]).await;
    assert!(!ok && err.contains("needs your passkey"), "{err}");
    // `approvals show` prints no approve command that cannot succeed, and says where.
    assert_eq!(printed_commands(&s, id).await.0, None);
    let (_, out, _) = cli(&["approvals", "show", &id.to_string()], &s.cli_env().await);
    assert!(
        out.contains("approve in the approval web app, with your passkey"),
        "{out}"
    );
    let alice = web.login(&s, "alice", "", None).await;
    let (st, _, body) = web.decide(&alice, id, "approve", &[]).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("no passkey registered for <strong>acme</strong>"),
        "{body}"
    );
    let nonce = "a".repeat(64);
    let forged = [
        ("passkey_nonce", nonce.as_str()),
        ("passkey_credential_id", "AAAA"),
        ("passkey_authenticator_data", "AAAA"),
        ("passkey_client_data_json", "e30"),
        ("passkey_signature", "AAAA"),
    ];
    let (st, _, body) = web.decide(&alice, id, "approve", &forged).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("passkey_nonce: unknown or already used challenge"),
        "{body}"
    );
    let (st, _, body) = web
        .decide(
            &alice,
            id,
            "approve",
            &[
                ("passkey_nonce", nonce.as_str()),
                ("passkey_signature", "not base64!"),
            ],
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.contains("passkey_credential_id: is required"),
        "{body}"
    );
    assert_eq!(s.state(id).await, "escalated");
    assert_eq!(grants(&s, id).await, 0);
    assert_eq!(
        refusals(&s, id).await,
        ["passkey_required", "passkey_required", "passkey_refused"]
    );
    // Deny never needs a passkey.
    let (st, loc, _) = web.decide(&alice, id, "deny", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{id}?result=denied"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passkeys_are_tenant_scoped_and_stored_assertions_are_append_only() {
    let s = Stack::new("passkey_rls").await;
    let su = s.tdb.superuser().await;
    su.batch_execute(
        "INSERT INTO tenants (id) VALUES ('globex');
         INSERT INTO passkeys (tenant_id, credential_id, issuer, subject, public_key, alg, rp_id)
         VALUES ('acme', '\\x01', 'urn:i', 'alice', '\\xa0', -7, 'localhost'),
                ('globex', '\\x02', 'urn:i', 'carol', '\\xa0', -7, 'localhost');",
    )
    .await
    .unwrap();
    let mut web = s.tdb.as_role("web").await;
    let tx = web.transaction().await.unwrap();
    tx.execute(
        "SELECT set_config('actiond.tenant_ids', 'globex', true)",
        &[],
    )
    .await
    .unwrap();
    let seen: Vec<String> = tx
        .query("SELECT subject FROM passkeys", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(seen, ["carol"], "another tenant's passkeys are invisible");
    let e = tx
        .execute(
            "INSERT INTO passkeys (tenant_id, credential_id, issuer, subject, public_key, alg, rp_id)
             VALUES ('acme', '\\x03', 'urn:i', 'mallory', '\\xa0', -7, 'localhost')",
            &[],
        )
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("row-level security"), "{e:?}");
    drop(tx);
    let e = web
        .execute("UPDATE passkeys SET public_key = '\\xa1'", &[])
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("permission denied"), "{e:?}");
    let e = su
        .execute("TRUNCATE approval_passkeys", &[])
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("append-only"), "{e:?}");
}

/// `approvers.require_passkey` switched on after a proposal escalated: the decision is checked
/// against the tenant's current document, so the page must follow it too and load the passkey
/// prompt (before, it did not, and Approve ended on the refusal page). Switched off again, the
/// prompt goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_asks_for_a_passkey_when_the_tenant_starts_requiring_one_after_escalation() {
    let (s, web) = stack("approval_passkey_later", |d| d).await;
    let id = s.propose(&refund("pi_passkey_later", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let alice = web.login(&s, "alice", "", None).await;
    let prompt = r#"data-passkey="required""#;
    let (st, page) = web.page(&alice, id).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    assert!(!page.contains(prompt), "{page}");
    let apply = |on: bool| {
        let doc = TENANT
            .replace("RECEIVER", &s.recv.url)
            .replace("WEBHOOK_PATH", "hook")
            .replace(
                "approvers:\n",
                &format!("approvers:\n  require_passkey: {on}\n"),
            );
        let db = s.tdb.db.clone();
        async move {
            actiond_store::tenants::apply(&db, &doc, "test")
                .await
                .unwrap();
        }
    };
    apply(true).await;
    let (st, page) = web.page(&alice, id).await;
    assert_eq!(st, StatusCode::OK, "{page}");
    assert!(page.contains(prompt), "{page}");
    // Without a registered passkey, Approve leads to the page that says how to register one.
    let (st, _, body) = web.decide(&alice, id, "approve", &[]).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("no passkey registered"), "{body}");
    assert_eq!(grants(&s, id).await, 0);
    apply(false).await;
    let (_, page) = web.page(&alice, id).await;
    assert!(!page.contains(prompt), "{page}");
}
