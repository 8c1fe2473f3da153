//! Operator tools: `actiond tenant diff` and the what-if `actiond policy test`.

use crate::support::{Options, Stack, TENANT, refund};
use actiond_testkit::cli;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_test_reports_what_a_candidate_document_would_change() {
    let s = Stack::with(
        "policy_test_what_if",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let mut ids = Vec::new();
    for (p, amount) in [
        ("pi_1", 1000),
        ("pi_2", 3000),
        ("pi_3", 6000),
        ("pi_4", 12000),
    ] {
        ids.push(s.propose(&refund(p, amount)).await);
    }
    ids.push(
        s.propose(r#"{"action":"shell.exec","params":{"cmd":"id"}}"#)
            .await,
    );
    for (id, state) in ids
        .iter()
        .zip(["approved", "approved", "escalated", "escalated", "blocked"])
    {
        s.wait_state(*id, state, Duration::from_secs(20)).await;
    }
    // Candidate: automatic refunds only up to 20.00.
    let candidate = TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace("params.amount <= 5000", "params.amount <= 2000")
        .replace("params.amount > 5000", "params.amount > 2000");
    let file = s.keys.dir.join("candidate.yaml");
    std::fs::write(&file, &candidate).unwrap();
    let f = file.display().to_string();
    let env = s.cli_env().await;
    let (ok, out, err) = cli(&["policy", "test", "-f", &f, "--since", "1h"], &env);
    assert!(ok, "{err}");
    assert!(out.contains("5 decided proposals"), "{out}");
    assert!(out.contains("unchanged  4"), "{out}");
    assert!(
        out.contains("allow → escalate: 1 (deciding rule now: large-refund)"),
        "{out}"
    );
    let (ok, out, err) = cli(
        &["policy", "test", "-f", &f, "--since", "1h", "--json"],
        &env,
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["changed"], 1);
    assert_eq!(v["changes"][0]["from"], "allow");
    assert_eq!(v["changes"][0]["proposal_ids"][0], ids[1].to_string());
    assert_eq!(v["failed_to_evaluate"], 0);
    // A rule that passes the type check but fails on the data (`order_id` is optional and
    // these refunds leave it out) is reported as failed to evaluate, apart from a match,
    // with the proposals it would change.
    let failing = TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "  rules:\n",
            "  rules:\n    - name: order-prefix\n      when: 'action == \"billing.refund.issue\" && params.order_id.startsWith(\"ord_\")'\n      effect: block\n      reason: x\n",
        );
    let failing_file = s.keys.dir.join("failing.yaml");
    std::fs::write(&failing_file, &failing).unwrap();
    let ff = failing_file.display().to_string();
    let (ok, out, err) = cli(&["policy", "test", "-f", &ff, "--since", "1h"], &env);
    assert!(ok, "{err}");
    assert!(out.contains("failed to evaluate  4"), "{out}");
    assert!(
        out.contains(
            "allow → block: 2 (rule order-prefix failed to evaluate, so it failed closed)"
        ),
        "{out}"
    );
    assert!(out.contains(&format!("      {}", ids[0])), "{out}");
    let (ok, out, err) = cli(
        &["policy", "test", "-f", &ff, "--since", "1h", "--json"],
        &env,
    );
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["failed_to_evaluate"], 4, "{v}");
    assert_eq!(v["changes"][0]["failed_to_evaluate"], true, "{v}");
    assert!(
        v["failures"][0]["errors"][0]
            .as_str()
            .unwrap()
            .contains("order-prefix"),
        "{v}"
    );
    // Nothing was applied by the what-if.
    let c = s.tdb.db.client().await.unwrap();
    let versions: i64 = c
        .query_one(
            "SELECT count(*) FROM tenant_documents WHERE tenant_id = 'acme'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(versions, 1);

    let (ok, out, err) = cli(&["tenant", "diff", "-f", &f], &env);
    assert!(ok, "{err}");
    assert!(out.contains("2 change(s)"), "{out}");
    assert!(out.contains("~ policy.rules.small-refund.when:"), "{out}");
    // Applying records who applied it; history lists both versions.
    let (ok, out, err) = cli(&["tenant", "apply", "-f", &f, "--as", "carol"], &env);
    assert!(ok && out.contains("applied version 2"), "{out}{err}");
    let (ok, out, _) = cli(&["tenant", "history", "--tenant", "acme"], &env);
    assert!(
        ok && out.starts_with("VERSION  ")
            && out.lines().nth(1).unwrap().starts_with("2  ")
            && out.contains("carol"),
        "{out}"
    );
    // The older positional spelling still works (hidden).
    let (ok, old, _) = cli(&["tenant", "history", "acme"], &env);
    assert!(ok && old == out, "{old}");
    // `show` prints the latest document, or the version asked for.
    let (ok, out, err) = cli(&["tenant", "show", "acme"], &env);
    assert!(
        ok && out.starts_with("# tenant acme version 2 "),
        "{out}{err}"
    );
    let (ok, out, err) = cli(&["tenant", "show", "acme", "--version", "1"], &env);
    assert!(
        ok && out.starts_with("# tenant acme version 1 "),
        "{out}{err}"
    );
    let (ok, _, err) = cli(
        &["tenant", "show", "--tenant", "acme", "--version", "9"],
        &env,
    );
    assert!(
        !ok && err.trim()
            == "actiond: error: tenant \"acme\" has no version 9: its versions are 1 to 2 (`actiond tenant history --tenant acme` lists them)",
        "{err}"
    );
    let (ok, out, _) = cli(&["tenant", "apply", "-f", &f], &env);
    assert!(ok && out.contains("unchanged"), "{out}");
    // Agent tokens: bounded lifetimes; a token file that cannot be written creates no agent.
    for bad in ["0d", "99999999d"] {
        let (ok, _, err) = cli(
            &[
                "agent",
                "create",
                "--tenant",
                "acme",
                "--name",
                "short-lived",
                "--owner",
                "alice",
                "--expires-in",
                bad,
            ],
            &env,
        );
        assert!(!ok);
        assert_eq!(
            err.trim(),
            "actiond: error: --expires-in: must be between 1s and 3650d",
            "{bad}"
        );
    }
    let taken = s.keys.dir.join("taken-token");
    std::fs::write(&taken, "keep me").unwrap();
    let t = taken.display().to_string();
    let (ok, _, err) = cli(
        &[
            "agent",
            "create",
            "--tenant",
            "acme",
            "--name",
            "lost-token",
            "--owner",
            "alice",
            "--token-file",
            &t,
        ],
        &env,
    );
    assert!(!ok && err.contains("it must not exist yet"), "{err}");
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "keep me");
    let (ok, out, _) = cli(&["agent", "list", "--tenant", "acme"], &env);
    assert!(
        ok && !out.contains("lost-token") && !out.contains("short-lived"),
        "{out}"
    );
    // A bad document: one readable line naming the field.
    std::fs::write(&file, candidate.replace("effect: block", "effect: maybe")).unwrap();
    let (ok, _, err) = cli(&["tenant", "apply", "-f", &f], &env);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            r#"policy.rules[0].effect: must be one of allow, escalate, block (got "maybe")"#
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_migrating_at_once_both_succeed() {
    // An empty database (not from the migrated template), migrated by two processes at once.
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let admin_url = actiond_testkit::server_url();
    let c = actiond_store::tls::connect(&admin_url).await.unwrap();
    c.batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = admin_url.rsplit_once('/').unwrap();
    let url = format!("{base}/{name}");
    let env = [("DATABASE_URL", url.clone())];
    let bin = actiond_testkit::actiond_bin();
    let spawn = || {
        std::process::Command::new(&bin)
            .arg("migrate")
            .envs(env.iter().cloned())
            .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    let out = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(a.status.success(), "{}", out(&a));
    assert!(b.status.success(), "{}", out(&b));
    let both = format!("{}{}", out(&a), out(&b));
    assert!(
        both.contains("already up to date"),
        "one of them found nothing to do: {both}"
    );
    let m = actiond_store::tls::connect(&url).await.unwrap();
    let applied: i64 = m
        .query_one("SELECT count(*) FROM refinery_schema_history", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        applied,
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../sql/migrations"))
            .unwrap()
            .filter(|e| {
                // Only migration files (`V<n>__<name>.sql`); the README is not one.
                let name = e.as_ref().unwrap().file_name();
                let name = name.to_string_lossy();
                name.starts_with('V') && name.ends_with(".sql")
            })
            .count() as i64
    );
    drop(m);
    let _ = c
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_a_workload_identity_has_no_token() {
    let t = actiond_testkit::TestDb::new().await;
    let doc = "tenant: acme\npolicy:\n  default: escalate\nhandlers:\n  billing.refund.issue:\n    credential: payments\n    max_amount: 100000\napprovers:\n  subjects: [alice]\n";
    actiond_store::tenants::apply(&t.db, doc, "test")
        .await
        .unwrap();
    let env = vec![("DATABASE_URL", t.role_url("admin").await)];
    let create = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "agent", "create", "--tenant", "acme", "--name", name, "--owner", "alice",
        ];
        args.extend_from_slice(extra);
        cli(&args, &env)
    };
    let jwt = [
        "--jwt-issuer",
        "https://k8s.example",
        "--jwt-subject",
        "system:serviceaccount:support:bot",
    ];
    let (ok, out, err) = create("k8s-bot", &jwt);
    assert!(ok, "{err}");
    assert!(out.contains("no token was created"), "{out}");
    assert!(!out.contains("token (shown once)"), "{out}");
    let sql = t.superuser().await;
    let row = sql
        .query_one(
            "SELECT a.token_sha256, w.issuer, w.subject FROM agents a
             JOIN agent_workload_identities w ON w.agent_id = a.id WHERE a.name = 'k8s-bot'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0), None, "no token exists");
    assert_eq!(row.get::<_, String>(1), "https://k8s.example");
    assert_eq!(row.get::<_, String>(2), "system:serviceaccount:support:bot");
    // One (iss, sub) is one agent: a second binding is one readable line, and no agent.
    let (ok, _, err) = create("k8s-bot-2", &jwt);
    assert!(!ok);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("already belong to another agent"), "{err}");
    // The two flags go together, and never with a token's options.
    let (ok, _, err) = create("half", &jwt[..2]);
    assert!(!ok && err.contains("--jwt-subject"), "{err}");
    let (ok, _, err) = create("both", &[&jwt[..], &["--expires-in", "1d"]].concat());
    assert!(!ok && err.contains("--expires-in"), "{err}");
    let (ok, out, _) = cli(&["agent", "list", "--tenant", "acme"], &env);
    assert!(
        ok && out.contains("k8s-bot") && !out.contains("k8s-bot-2") && !out.contains("half"),
        "{out}"
    );
}
