//! Handlers against real servers: PowerDNS (Debian `pdns-server`, sqlite3 backend), an SMTP
//! server (aiosmtpd) and a second Postgres database with its own role; and the previews the
//! executor builds from them for escalated proposals; and a loopback ticket API (axum, in the
//! test) for `ticket.comment.add`.

use crate::support::{Options, Stack};
use actiond_testkit::providers::{PowerDns, SmtpSink, TargetDb};
use actiond_testkit::{Service, agent, cli, eventually};
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

pub(crate) const DOC: &str = r#"
tenant: hx
policy:
  default: escalate
  escalation_ttl: 1h
  rules:
    - name: staging-dns
      when: 'action == "dns.record.update" && params.zone == "staging.example.com"'
      effect: allow
      reason: Staging DNS is automatic.
    - name: inside-email
      when: 'action == "email.send" && params.recipients.all(r, r.endsWith("@acme.example"))'
      effect: allow
      reason: Mail inside the company is automatic.
    - name: one-order
      when: 'action == "db.statement.execute" && params.statement != "cancel_customer"'
      effect: allow
      reason: Single orders are automatic.
handlers:
  dns.record.update:
    credential: pdns
    zones: [prod.example.com, staging.example.com]
  email.send:
    from: support@acme.example
    recipient_domains: [acme.example, partner.example]
    max_recipients: 3
    templates:
      ticket-reply:
        subject: "Re: ticket {ticket}"
        body: "Hello {name},\n\nyour ticket {ticket} is closed.\n"
  db.statement.execute:
    credential: orders
    statement_timeout: 300ms
    statements:
      cancel_order:
        sql: "UPDATE orders SET status = 'cancelled' WHERE id = $1 AND status = 'open'"
        params: [{name: order_id, type: bigint}]
        max_rows: 1
      cancel_customer:
        sql: "UPDATE orders SET status = 'cancelled' WHERE customer = $1 AND status = 'open'"
        params: [{name: customer, type: text}]
        max_rows: 2
      slow_cancel:
        sql: "UPDATE orders SET status = 'cancelled' WHERE id = $1 AND pg_sleep(2) IS NOT NULL"
        params: [{name: order_id, type: bigint}]
        max_rows: 1
approvers:
  subjects: [alice]
"#;

/// A stack with the `hx` tenant, its agent, and an executor that reaches the given servers
/// (also used by `preview_bound.rs` for DNS previews bound to grants).
pub(crate) struct Hx {
    pub(crate) s: Stack,
    pub(crate) token: String,
}

impl Hx {
    pub(crate) async fn new(
        name: &str,
        extra: &[(&'static str, String)],
        creds: &[(&str, &str)],
    ) -> Self {
        Self::with_doc(name, DOC, extra, creds).await
    }

    /// [`Hx::new`] with another document for tenant `hx`.
    pub(crate) async fn with_doc(
        name: &str,
        doc: &str,
        extra: &[(&'static str, String)],
        creds: &[(&str, &str)],
    ) -> Self {
        let mut s = Stack::with(
            name,
            Options {
                executor: false,
                ..Options::default()
            },
        )
        .await;
        actiond_store::tenants::apply(&s.tdb.db, doc, "test")
            .await
            .unwrap();
        for (k, v) in creds {
            s.keys.credential("hx", k, v);
        }
        let (_, token) = agent(&s.tdb.db, "hx", "ops-bot", Some("owner-olivia")).await;
        let mut env = s.executor_env("exec-hx").await;
        env.extend(extra.iter().cloned());
        let svc = Service::spawn("executor", "exec-hx", &[], &env, &s.logs);
        s.services.push(svc);
        Self { s, token }
    }

    /// Proposes `action` with `params`; returns (status, body).
    async fn post(&self, action: &str, params: Value) -> (u16, Value) {
        let body = json!({"action": action, "params": params, "reason": "test"});
        self.s.post_as(&self.token, &body.to_string(), None).await
    }

    pub(crate) async fn propose(&self, action: &str, params: Value) -> uuid::Uuid {
        let (st, v) = self.post(action, params).await;
        assert_eq!(st, 202, "{v}");
        v["proposal_id"].as_str().unwrap().parse().unwrap()
    }

    pub(crate) async fn detail(&self, id: uuid::Uuid) -> String {
        let c = self.s.tdb.db.client().await.unwrap();
        c.query_one(
            "SELECT coalesce(outcome_detail, '') FROM proposals WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0)
    }

    /// Waits for the executor's preview of `id`: (ok, text).
    pub(crate) async fn preview(&self, id: uuid::Uuid) -> (bool, String) {
        let db = self.s.tdb.db.clone();
        eventually(T, "a preview", || {
            let db = db.clone();
            async move {
                let c = db.client().await.ok()?;
                c.query_opt(
                    "SELECT ok, text FROM proposal_previews WHERE proposal_id = $1",
                    &[&id],
                )
                .await
                .ok()?
                .map(|r| (r.get(0), r.get(1)))
            }
        })
        .await
    }

    /// The warnings of the executor's stored preview of `id` (waits for it).
    async fn warnings(&self, id: uuid::Uuid) -> Value {
        let db = self.s.tdb.db.clone();
        eventually(T, "a preview's warnings", || {
            let db = db.clone();
            async move {
                let c = db.client().await.ok()?;
                c.query_opt(
                    "SELECT warnings FROM proposal_previews WHERE proposal_id = $1",
                    &[&id],
                )
                .await
                .ok()?
                .map(|r| r.get(0))
            }
        })
        .await
    }

    /// Approves `id` on the break-glass CLI as alice.
    pub(crate) async fn approve(&self, id: uuid::Uuid) {
        self.s.approve_as_alice(id).await;
    }
}

pub(crate) fn dns(zone: &str, name: &str, rtype: &str, records: Value) -> Value {
    json!({"zone": zone, "name": name, "type": rtype, "ttl": 300, "records": records})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_changes_reach_a_real_powerdns() {
    let pdns = PowerDns::start(&["staging.example.com", "prod.example.com"]).await;
    let hx = Hx::new(
        "dns_changes_reach_a_real_powerdns",
        &[("ACTIOND_PDNS_BASE_URL", pdns.base_url.clone())],
        &[("pdns", &pdns.api_key)],
    )
    .await;
    let z = "staging.example.com";
    // Create, then replace; then every type the schema allows (TXT quoted for PowerDNS).
    let cases = [
        (
            "www.staging.example.com",
            "A",
            json!(["192.0.2.1"]),
            vec!["192.0.2.1"],
        ),
        (
            "www.staging.example.com",
            "A",
            json!(["198.51.100.7", "192.0.2.9"]),
            vec!["192.0.2.9", "198.51.100.7"],
        ),
        (
            "www.staging.example.com",
            "AAAA",
            json!(["2001:db8::1"]),
            vec!["2001:db8::1"],
        ),
        (
            "alias.staging.example.com",
            "CNAME",
            json!(["www.staging.example.com."]),
            vec!["www.staging.example.com."],
        ),
        (
            "staging.example.com",
            "MX",
            json!(["10 mail.example.net."]),
            vec!["10 mail.example.net."],
        ),
        // At the apex: below it, NS is a delegation, refused (see the next test).
        (
            "staging.example.com",
            "NS",
            json!(["ns1.example.net.", "ns2.example.net."]),
            vec!["ns1.example.net.", "ns2.example.net."],
        ),
        (
            "staging.example.com",
            "TXT",
            json!(["v=spf1 -all", "say \"hi\" \\o/"]),
            vec!["\"say \\\"hi\\\" \\\\o/\"", "\"v=spf1 -all\""],
        ),
    ];
    for (name, rtype, records, want) in cases {
        let id = hx
            .propose("dns.record.update", dns(z, name, rtype, records))
            .await;
        hx.s.wait_state(id, "succeeded", T).await;
        let (ttl, got) = pdns.rrset(z, name, rtype).await.unwrap();
        assert_eq!(
            (ttl, got),
            (300, want.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            "{name} {rtype}"
        );
    }
    // PowerDNS refuses a CNAME beside other records: failed, with its reason in one clean line.
    let id = hx
        .propose(
            "dns.record.update",
            dns(
                z,
                "www.staging.example.com",
                "CNAME",
                json!(["other.example.net."]),
            ),
        )
        .await;
    hx.s.wait_state(id, "failed", T).await;
    let detail = hx.detail(id).await;
    assert!(
        detail.starts_with("provider answered HTTP 422: PowerDNS refused the change: ")
            && detail.contains("Conflicts with pre-existing RRset")
            && !detail.contains('\n'),
        "{detail}"
    );
    assert!(
        pdns.rrset(z, "www.staging.example.com", "CNAME")
            .await
            .is_none()
    );

    // Production escalates; the executor previews the record set as it is now.
    pdns.set(
        "prod.example.com",
        "www.prod.example.com",
        "A",
        300,
        &["192.0.2.7"],
    )
    .await;
    let id = hx
        .propose(
            "dns.record.update",
            dns(
                "prod.example.com",
                "www.prod.example.com",
                "A",
                json!(["203.0.113.9"]),
            ),
        )
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    assert_eq!(
        hx.preview(id).await,
        (
            true,
            "www.prod.example.com A: 192.0.2.7 → 203.0.113.9".to_owned()
        )
    );
    let (ok, out, err) = cli(
        &["approvals", "show", &id.to_string()],
        &hx.s.cli_env().await,
    );
    assert!(ok, "{err}");
    assert!(
        out.lines().any(|l| l
            .starts_with("preview    www.prod.example.com A: 192.0.2.7 → 203.0.113.9 (read ")
            && l.ends_with(" UTC)")),
        "{out}"
    );
    // The preview changed nothing.
    assert_eq!(hx.s.state(id).await, "escalated");
    let (_, now) = pdns
        .rrset("prod.example.com", "www.prod.example.com", "A")
        .await
        .unwrap();
    assert_eq!(now, ["192.0.2.7"]);
    assert_eq!(
        hx.warnings(id).await,
        json!([]),
        "an address replaced warns of nothing"
    );
    hx.approve(id).await;
    hx.s.wait_state(id, "succeeded", T).await;
    let (_, now) = pdns
        .rrset("prod.example.com", "www.prod.example.com", "A")
        .await
        .unwrap();
    assert_eq!(now, ["203.0.113.9"]);
    // The zone's MX at its apex replaced: warned in the preview (issue #34, point 4); the same
    // records again are no change and warn of nothing.
    pdns.set(
        "prod.example.com",
        "prod.example.com",
        "MX",
        300,
        &["10 mx1.example.net."],
    )
    .await;
    let apex_mx = |mx: &str| dns("prod.example.com", "prod.example.com", "MX", json!([mx]));
    let id = hx
        .propose("dns.record.update", apex_mx("10 mx.evil.example.net."))
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    assert_eq!(
        hx.warnings(id).await,
        json!(["this change replaces the MX records of the zone apex prod.example.com"])
    );
    let id = hx
        .propose("dns.record.update", apex_mx("10 mx1.example.net."))
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    assert_eq!(hx.warnings(id).await, json!([]));
}

/// With two allowed zones, one inside the other, a record of the inner zone belongs to it: the
/// real PowerDNS answers `www.inner.example.com` from `inner.example.com`, so a change submitted
/// under `example.com` would skip the inner zone's rules (here: the outer zone's changes are
/// automatic, the inner zone's need a person), run, and be reported `succeeded` while the
/// server keeps serving the inner zone's record. It is refused at submission (400 naming the
/// zone it belongs to), as is an NS record below a zone's apex (a delegation); nothing is
/// stored and nothing reaches PowerDNS. The same change under its own zone escalates and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_names_belong_to_the_most_specific_zone_and_delegations_are_refused() {
    let pdns = PowerDns::start(&["example.com", "inner.example.com"]).await;
    let doc = DOC
        .replace(
            "zones: [prod.example.com, staging.example.com]",
            "zones: [example.com, inner.example.com]",
        )
        .replace(
            r#"params.zone == "staging.example.com"'"#,
            r#"params.zone == "example.com"'"#,
        );
    let hx = Hx::with_doc(
        "dns_most_specific_zone",
        &doc,
        &[("ACTIOND_PDNS_BASE_URL", pdns.base_url.clone())],
        &[("pdns", &pdns.api_key)],
    )
    .await;
    let inner_record = json!(["192.0.2.66"]);
    for (params, field, rule) in [
        (
            dns(
                "example.com",
                "www.inner.example.com",
                "A",
                inner_record.clone(),
            ),
            "params.zone",
            "must be inner.example.com: the most specific allowed zone that contains params.name",
        ),
        (
            dns(
                "example.com",
                "inner.example.com",
                "A",
                inner_record.clone(),
            ),
            "params.zone",
            "must be inner.example.com: the most specific allowed zone that contains params.name",
        ),
        (
            dns(
                "example.com",
                "sub.example.com",
                "NS",
                json!(["ns1.evil.example."]),
            ),
            "params.type",
            "NS below the zone apex is a delegation",
        ),
        (
            dns(
                "inner.example.com",
                "www.inner.example.com",
                "NS",
                json!(["ns1.evil.example."]),
            ),
            "params.type",
            "NS below the zone apex is a delegation",
        ),
    ] {
        let (st, v) = hx.post("dns.record.update", params.clone()).await;
        assert_eq!(st, 400, "{params}: {v}");
        let named = v["errors"].as_array().is_some_and(|errs| {
            errs.iter().any(|e| {
                e["field"] == field && e["rule"].as_str().is_some_and(|r| r.starts_with(rule))
            })
        });
        assert!(named, "{params}: {v}");
    }
    let c = hx.s.tdb.db.client().await.unwrap();
    let stored: i64 = c
        .query_one("SELECT count(*) FROM proposals WHERE tenant_id = 'hx'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "a refused change was stored");
    for (zone, name, rtype) in [
        ("example.com", "www.inner.example.com", "A"),
        ("example.com", "inner.example.com", "A"),
        ("example.com", "sub.example.com", "NS"),
        ("inner.example.com", "www.inner.example.com", "NS"),
    ] {
        assert!(
            pdns.rrset(zone, name, rtype).await.is_none(),
            "{zone} {name} {rtype} reached PowerDNS"
        );
    }
    // Under its own zone the change meets the inner zone's rule (a person approves) and the
    // served record changes.
    let id = hx
        .propose(
            "dns.record.update",
            dns(
                "inner.example.com",
                "www.inner.example.com",
                "A",
                inner_record,
            ),
        )
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    hx.approve(id).await;
    hx.s.wait_state(id, "succeeded", T).await;
    let (_, now) = pdns
        .rrset("inner.example.com", "www.inner.example.com", "A")
        .await
        .unwrap();
    assert_eq!(now, ["192.0.2.66"]);
    // The outer zone's own names stay automatic.
    let id = hx
        .propose(
            "dns.record.update",
            dns("example.com", "www.example.com", "A", json!(["192.0.2.1"])),
        )
        .await;
    hx.s.wait_state(id, "succeeded", T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_preview_is_unavailable_when_powerdns_is_down() {
    let pdns = PowerDns::start(&["prod.example.com"]).await;
    let (url, key) = (pdns.base_url.clone(), pdns.api_key.clone());
    drop(pdns);
    let hx = Hx::new(
        "dns_preview_is_unavailable_when_powerdns_is_down",
        &[("ACTIOND_PDNS_BASE_URL", url)],
        &[("pdns", &key)],
    )
    .await;
    let id = hx
        .propose(
            "dns.record.update",
            dns(
                "prod.example.com",
                "www.prod.example.com",
                "A",
                json!(["203.0.113.9"]),
            ),
        )
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    let (ok, text) = hx.preview(id).await;
    assert!(
        !ok && text.starts_with("could not reach PowerDNS"),
        "{text}"
    );
    assert_eq!(
        hx.s.state(id).await,
        "escalated",
        "a failed preview decides nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_send_reaches_a_real_smtp_server() {
    let smtp = SmtpSink::start();
    let mut hx = Hx::new(
        "email_send_reaches_a_real_smtp_server",
        &[("ACTIOND_SMTP_RELAY", smtp.host_port.clone())],
        &[],
    )
    .await;
    let vars = json!({"ticket": "T-42", "name": "Ann <b>bold</b>"});
    // Refused at submission, naming the field.
    for (params, field) in [
        (
            json!({"recipients": ["eve@evil.example"], "template": "ticket-reply", "variables": vars}),
            "params.recipients[0]",
        ),
        (
            json!({"recipients": ["ann@acme.example\r\nBcc: eve@evil.example"], "template": "ticket-reply", "variables": vars}),
            "params.recipients[0]",
        ),
        (
            json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "T-42\r\nBcc: eve@evil.example", "name": "Ann"}}),
            "params.variables.ticket",
        ),
        // Inside acme.example by its domain and by the inside-email rule, but a relay that
        // honours the percent hack or bang paths delivers it to evil.example.
        (
            json!({"recipients": ["eve%evil.example@acme.example"], "template": "ticket-reply", "variables": vars}),
            "params.recipients[0]: must not contain % or !",
        ),
        (
            json!({"recipients": ["evil.example!eve@acme.example"], "template": "ticket-reply", "variables": vars}),
            "params.recipients[0]: must not contain % or !",
        ),
        (
            json!({"recipients": ["ann@acme.example"], "template": "wire-money", "variables": vars}),
            "params.template",
        ),
        // A MIME encoded word in a value bound for the Subject: decoded by the mail client
        // into text (here a RIGHT-TO-LEFT OVERRIDE and "Pay now") nobody approved.
        (
            json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "=?UTF-8?B?4oCuUGF5IG5vdw==?=", "name": "Ann"}}),
            "params.variables.ticket: must not contain",
        ),
        (
            json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "=?utf-8?q?Verify_your_account?=", "name": "Ann"}}),
            "MIME encoded word (RFC 2047",
        ),
        (
            json!({"recipients": ["a@acme.example", "b@acme.example", "c@acme.example", "d@acme.example"], "template": "ticket-reply", "variables": vars}),
            "params.recipients",
        ),
    ] {
        let (st, v) = hx.post("email.send", params.clone()).await;
        assert_eq!(st, 400, "{params}: {v}");
        assert!(v.to_string().contains(field), "{params}: {v}");
    }
    let id = hx
        .propose("email.send", json!({"recipients": ["ann@acme.example", "bo@acme.example"], "template": "ticket-reply", "variables": vars}))
        .await;
    hx.s.wait_state(id, "succeeded", T).await;
    let msgs = smtp.messages();
    assert_eq!(msgs.len(), 1, "exactly one message");
    let m = &msgs[0];
    assert_eq!(m.header("From").as_deref(), Some("support@acme.example"));
    assert_eq!(
        m.header("To").as_deref(),
        Some("ann@acme.example, bo@acme.example")
    );
    assert_eq!(m.header("Subject").as_deref(), Some("Re: ticket T-42"));
    assert_eq!(
        m.header("Content-Type").as_deref(),
        Some("text/plain; charset=utf-8")
    );
    assert!(
        m.header("Message-ID")
            .is_some_and(|v| v.ends_with("@actiond>"))
    );
    assert_eq!(
        m.body(),
        // The rendered text exactly, plus the line end lettre adds before SMTP's end of data.
        "Hello Ann <b>bold</b>,\n\nyour ticket T-42 is closed.\n\n"
    );
    // SMTP cannot be read back: no proposal.effect event, and the card says so rather than
    // nothing.
    assert!(
        !hx.s
            .audit_kind_names(id)
            .await
            .contains(&"proposal.effect".to_owned())
    );
    let page = decision_page(&mut hx.s, id).await;
    assert!(page.contains("Before → approved → after"), "{page}");
    assert!(
        page.contains("not readable: SMTP gives only the relay"),
        "{page}"
    );
    // To a partner: escalated, previewed as the rendered email, nothing sent.
    let id = hx
        .propose("email.send", json!({"recipients": ["pat@partner.example"], "template": "ticket-reply", "variables": {"ticket": "T-7", "name": "Pat"}}))
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    assert_eq!(
        hx.preview(id).await,
        (true, "From: support@acme.example\nTo: pat@partner.example\nSubject: Re: ticket T-7\n\nHello Pat,\n\nyour ticket T-7 is closed.\n".to_owned())
    );
    assert_eq!(smtp.messages().len(), 1);
}

/// An email to a recipient domain the tenant never sent email to before (issue #34, point 4):
/// the api computes the fact at submission from the database (no earlier `succeeded` email of
/// the tenant to that domain) and stores it with the proposal; a rule on
/// `facts.new_recipient_domain` escalates it, and the card shows the warning as a banner and
/// the queue flags it. Once one email to the domain succeeded, the next is not new: the rule
/// does not match and it runs. A second proposal filed while the first still waits is new too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_email_to_a_new_domain_is_warned_and_a_rule_on_the_fact_escalates_it() {
    let smtp = SmtpSink::start();
    let doc = DOC.replace(
        "    - name: inside-email\n      when: 'action == \"email.send\" && params.recipients.all(r, r.endsWith(\"@acme.example\"))'\n",
        "    - name: new-domain\n      when: 'action == \"email.send\" && facts.new_recipient_domain'\n      effect: escalate\n      reason: A domain this tenant never wrote to.\n    - name: inside-email\n      when: 'action == \"email.send\"'\n",
    );
    assert_ne!(doc, DOC);
    let mut hx = Hx::with_doc(
        "email_new_domain_warned",
        &doc,
        &[("ACTIOND_SMTP_RELAY", smtp.host_port.clone())],
        &[],
    )
    .await;
    let email = |to: &str| json!({"recipients": [to], "template": "ticket-reply", "variables": {"ticket": "T-9", "name": "Pat"}});
    let facts = |hx: &Hx, id: uuid::Uuid| {
        let db = hx.s.tdb.db.clone();
        async move {
            db.client()
                .await
                .unwrap()
                .query_one(
                    "SELECT facts FROM proposal_facts WHERE proposal_id = $1",
                    &[&id],
                )
                .await
                .unwrap()
                .get::<_, Value>(0)
        }
    };
    let rule = |hx: &Hx, id: uuid::Uuid| {
        let db = hx.s.tdb.db.clone();
        async move {
            db.client()
                .await
                .unwrap()
                .query_one("SELECT rule_name FROM proposals WHERE id = $1", &[&id])
                .await
                .unwrap()
                .get::<_, Option<String>>(0)
        }
    };
    let first = hx.propose("email.send", email("pat@partner.example")).await;
    hx.s.wait_state(first, "escalated", T).await;
    assert_eq!(
        facts(&hx, first).await,
        json!({"new_recipient_domain": true, "new_recipient_domains": ["partner.example"]})
    );
    assert_eq!(rule(&hx, first).await.as_deref(), Some("new-domain"));
    let warning =
        "this email goes to partner.example, a domain this tenant has never sent email to before";
    assert_eq!(hx.warnings(first).await, json!([warning]));
    // Filed while the first still waits: nothing has gone to partner.example yet.
    let second = hx.propose("email.send", email("sam@partner.example")).await;
    hx.s.wait_state(second, "escalated", T).await;
    assert_eq!(rule(&hx, second).await.as_deref(), Some("new-domain"));
    // The queue flags a warning once the executor has read the preview: wait for the second's.
    assert_eq!(hx.warnings(second).await, json!([warning]));

    // The card shows the warning as a banner; the queue flags both.
    let web = hx.s.start_dev_web().await;
    let http = hx.s.dev_sign_in(&web, "alice").await;
    let get = |path: String| {
        let http = http.clone();
        async move { http.get(path).send().await.unwrap().text().await.unwrap() }
    };
    let page = get(format!("{}/p/{first}", web.url)).await;
    assert!(page.contains("id=\"preview-banner\""), "{page}");
    assert!(page.contains(warning), "{page}");
    let queue = get(format!("{}/queue", web.url)).await;
    assert_eq!(
        queue.matches(&format!("⚠ preview: {warning}")).count(),
        2,
        "{queue}"
    );

    // Once one email to the domain succeeded, the next is not new: allowed, sent, no warning.
    hx.approve(first).await;
    hx.s.wait_state(first, "succeeded", T).await;
    let third = hx.propose("email.send", email("kim@partner.example")).await;
    hx.s.wait_state(third, "succeeded", T).await;
    assert_eq!(
        facts(&hx, third).await,
        json!({"new_recipient_domain": false, "new_recipient_domains": []})
    );
    assert_eq!(rule(&hx, third).await.as_deref(), Some("inside-email"));
    assert_eq!(smtp.messages().len(), 2);
    // Allowed by the tenant's recipient_domains is not written to: acme.example is new too.
    let fourth = hx.propose("email.send", email("ann@acme.example")).await;
    hx.s.wait_state(fourth, "escalated", T).await;
    assert_eq!(
        facts(&hx, fourth).await,
        json!({"new_recipient_domain": true, "new_recipient_domains": ["acme.example"]})
    );
}

/// A relay that stored the message and died before its reply to the end of DATA: the email
/// may have been delivered, so the proposal is `outcome_unknown` (never re-run). A relay that
/// cannot be reached at all sent nothing: `failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_cut_off_after_data_is_outcome_unknown_and_a_dead_relay_is_failed() {
    let smtp = SmtpSink::start_dropping_after_data();
    let dead = format!("127.0.0.1:{}", actiond_testkit::free_port());
    let params = json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "T-9", "name": "Ann"}});

    let hx = Hx::new(
        "email_cut_off_after_data",
        &[("ACTIOND_SMTP_RELAY", smtp.host_port.clone())],
        &[],
    )
    .await;
    let id = hx.propose("email.send", params.clone()).await;
    hx.s.wait_state(id, "outcome_unknown", T).await;
    assert_eq!(smtp.messages().len(), 1, "the relay did store the message");
    let d = hx.detail(id).await;
    assert!(d.contains("may have accepted the message"), "{d}");
    let (_, v) = hx.s.get(&hx.token, &id.to_string(), "").await;
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("The action may have reached"), "{v}");
    drop(hx);

    let hx = Hx::new("email_dead_relay", &[("ACTIOND_SMTP_RELAY", dead)], &[]).await;
    let id = hx.propose("email.send", params).await;
    hx.s.wait_state(id, "failed", T).await;
    let d = hx.detail(id).await;
    assert!(d.starts_with("could not reach the SMTP relay"), "{d}");
    // The agent is told that it failed, not the approval's "approved by …" (and never the
    // relay's error text, which stays in the audit log).
    let (code, v) = hx.s.get(&hx.token, &id.to_string(), "").await;
    assert_eq!(code, 200, "{v}");
    assert_eq!(v["outcome"], "failed", "{v}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("The action ran and failed"), "{v}");
    assert!(
        !reason.contains("SMTP") && !reason.contains("approved"),
        "{v}"
    );
}

/// A relay with AUTH but without STARTTLS (misconfigured, or stripped by someone on the path):
/// with a credential in the settings, neither the credential nor the message goes out in
/// clear, and the outcome names the refusal. With the operator's explicit plaintext opt-in the
/// message goes out in one session that authenticates once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_credentials_never_travel_in_clear() {
    let doc = DOC.replace(
        "  email.send:\n    from:",
        "  email.send:\n    credential: smtp\n    from:",
    );
    assert_ne!(doc, DOC);
    let params = json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "T-1", "name": "Ann"}});
    let creds = [("smtp", "mailer:s3cret-relay-password")];

    let smtp = SmtpSink::start_plaintext_auth();
    let hx = Hx::with_doc(
        "email_credentials_never_travel_in_clear",
        &doc,
        &[("ACTIOND_SMTP_RELAY", smtp.host_port.clone())],
        &creds,
    )
    .await;
    let id = hx.propose("email.send", params.clone()).await;
    hx.s.wait_state(id, "failed", T).await;
    let d = hx.detail(id).await;
    assert!(
        d.contains("did not offer STARTTLS") && d.contains("nothing was sent"),
        "{d}"
    );
    assert_eq!(
        smtp.auth_attempts(),
        Vec::<String>::new(),
        "no AUTH in clear"
    );
    assert_eq!(smtp.messages().len(), 0, "no message in clear");
    drop(hx);

    // The operator's opt-in: one session, one AUTH, one message.
    let smtp = SmtpSink::start_plaintext_auth();
    let hx = Hx::with_doc(
        "email_plaintext_opt_in",
        &doc,
        &[
            ("ACTIOND_SMTP_RELAY", smtp.host_port.clone()),
            ("ACTIOND_SMTP_ALLOW_PLAINTEXT", "true".into()),
        ],
        &creds,
    )
    .await;
    let id = hx.propose("email.send", params).await;
    hx.s.wait_state(id, "succeeded", T).await;
    assert_eq!(smtp.auth_attempts().len(), 1, "{:?}", smtp.auth_attempts());
    assert_eq!(smtp.messages().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_statement_runs_as_the_tenant_role_under_its_cap() {
    let target = TargetDb::create(
        "CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, status text NOT NULL);
         INSERT INTO orders VALUES (1, 'c1', 'open'), (2, 'c1', 'open'), (3, 'c1', 'open'), (4, 'c2', 'open'),
           (9007199254740993, 'c3', 'open');
         CREATE TABLE secrets (v text); INSERT INTO secrets VALUES ('s');
         GRANT SELECT, UPDATE ON orders TO {role};",
    )
    .await;
    let hx = Hx::new(
        "db_statement_runs_as_the_tenant_role_under_its_cap",
        &[],
        &[("orders", &target.url)],
    )
    .await;
    let status = |id: i64| {
        let t = &target;
        async move {
            t.admin()
                .await
                .query_one("SELECT status FROM orders WHERE id = $1", &[&id])
                .await
                .unwrap()
                .get::<_, String>(0)
        }
    };
    // The agent chooses a name and typed values, never SQL.
    for (params, field) in [
        (
            json!({"statement": "drop_secrets", "values": {}}),
            "params.statement",
        ),
        (
            json!({"statement": "cancel_order", "values": {"order_id": "1 OR true"}}),
            "params.values.order_id",
        ),
        (
            json!({"statement": "cancel_order", "values": {"order_id": 1}, "sql": "DELETE FROM orders"}),
            "params.sql",
        ),
    ] {
        let (st, v) = hx.post("db.statement.execute", params.clone()).await;
        assert_eq!(st, 400, "{params}: {v}");
        assert!(v.to_string().contains(field), "{params}: {v}");
    }
    let id = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "cancel_order", "values": {"order_id": 4}}),
        )
        .await;
    hx.s.wait_state(id, "succeeded", T).await;
    assert_eq!(hx.detail(id).await, "1 row(s) affected");
    assert_eq!(status(4).await, "cancelled");
    // A bigint beyond ±(2^53−1) travels as a string of its digits and binds as that bigint.
    let id = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "cancel_order", "values": {"order_id": "9007199254740993"}}),
        )
        .await;
    hx.s.wait_state(id, "succeeded", T).await;
    assert_eq!(hx.detail(id).await, "1 row(s) affected");
    assert_eq!(status(9_007_199_254_740_993).await, "cancelled");
    // Over statement_timeout: failed, nothing kept.
    let id = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "slow_cancel", "values": {"order_id": 1}}),
        )
        .await;
    hx.s.wait_state(id, "failed", T).await;
    assert!(
        hx.detail(id)
            .await
            .contains("canceled by statement_timeout"),
        "{}",
        hx.detail(id).await
    );
    assert_eq!(status(1).await, "open");
    // Three rows against a cap of two: escalated, previewed (rolled back), approved, refused.
    let id = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "cancel_customer", "values": {"customer": "c1"}}),
        )
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    assert_eq!(
        hx.preview(id).await,
        (true, "Statement cancel_customer would touch 3 rows now, over its cap of 2: it would fail and be rolled back".to_owned())
    );
    assert_eq!(
        hx.warnings(id).await,
        json!(["this statement touches 3 rows now, more than its max_rows of 2"])
    );
    assert_eq!(status(1).await, "open", "the preview was rolled back");
    // Within the cap (no open order of c9): escalated by the same rule, nothing to warn of.
    let within = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "cancel_customer", "values": {"customer": "c9"}}),
        )
        .await;
    hx.s.wait_state(within, "escalated", T).await;
    assert_eq!(hx.warnings(within).await, json!([]));
    hx.approve(id).await;
    hx.s.wait_state(id, "failed", T).await;
    assert_eq!(
        hx.detail(id).await,
        "would touch 3 rows, cap 2; rolled back"
    );
    for i in 1..=3 {
        assert_eq!(status(i).await, "open");
    }
}

/// A loopback ticket API (`/api/tickets/{id}`, `/api/tickets/{id}/comments`) that records
/// every comment request: (Authorization, Idempotency-Key, JSON body), stores each comment once
/// per idempotency key (`c-1`, `c-2`, …) and lists a ticket's comments with their keys
/// (`GET …/comments`, the executor's read-back). [`TicketApi::hang_posts`] makes it store a
/// comment and never answer (the executor's handler times out: `outcome_unknown`);
/// [`TicketApi::readable`] off answers the list 503. Tickets `T-100` and `T-200` exist.
pub(crate) struct TicketApi {
    pub(crate) url: String,
    pub(crate) host_port: String,
    comments: std::sync::Arc<std::sync::Mutex<Vec<(String, String, Value)>>>,
    /// Ticket ids whose comments were listed, in order.
    lists: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    pub(crate) hang_posts: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub(crate) readable: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl TicketApi {
    pub(crate) async fn start() -> Self {
        use axum::extract::Path;
        use axum::http::{HeaderMap, StatusCode};
        use std::sync::atomic::{AtomicBool, Ordering};
        let comments = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let lists = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let hang_posts = std::sync::Arc::new(AtomicBool::new(false));
        let readable = std::sync::Arc::new(AtomicBool::new(true));
        let (seen, held, listed) = (comments.clone(), comments.clone(), lists.clone());
        let (hang, read) = (hang_posts.clone(), readable.clone());
        let header = |h: &HeaderMap, k: &str| {
            h.get(k)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let app = axum::Router::new()
            .route(
                "/api/tickets/{id}",
                axum::routing::get(move |Path(id): Path<String>, h: HeaderMap| async move {
                    if header(&h, "authorization") != "Bearer tok-ticket-1" {
                        return (StatusCode::UNAUTHORIZED, axum::Json(json!({})));
                    }
                    match id.as_str() {
                        "T-100" | "T-200" => (
                            StatusCode::OK,
                            axum::Json(
                                json!({"id": id, "title": "Printer on fire", "status": "open"}),
                            ),
                        ),
                        _ => (
                            StatusCode::NOT_FOUND,
                            axum::Json(json!({"error": "no such ticket"})),
                        ),
                    }
                }),
            )
            .route(
                "/api/tickets/{id}/comments",
                axum::routing::post(
                    move |Path(id): Path<String>,
                          h: HeaderMap,
                          axum::Json(body): axum::Json<Value>| {
                        let (seen, hang) = (seen.clone(), hang.clone());
                        async move {
                            let key = header(&h, "idempotency-key");
                            let n = {
                                let mut seen = seen.lock().unwrap();
                                let known = seen.iter().position(|(_, k, _)| !key.is_empty() && *k == key);
                                match known {
                                    Some(i) => i + 1,
                                    None => {
                                        seen.push((
                                            header(&h, "authorization"),
                                            key,
                                            json!({"ticket": id, "body": body}),
                                        ));
                                        seen.len()
                                    }
                                }
                            };
                            if hang.load(Ordering::SeqCst) {
                                std::future::pending::<()>().await;
                            }
                            (StatusCode::CREATED, axum::Json(json!({"id": format!("c-{n}")})))
                        }
                    },
                )
                .get(move |Path(id): Path<String>, h: HeaderMap| {
                    let (held, listed, read) = (held.clone(), listed.clone(), read.clone());
                    async move {
                        listed.lock().unwrap().push(id.clone());
                        if header(&h, "authorization") != "Bearer tok-ticket-1" {
                            return (StatusCode::UNAUTHORIZED, axum::Json(json!({})));
                        }
                        if !read.load(Ordering::SeqCst) {
                            return (
                                StatusCode::SERVICE_UNAVAILABLE,
                                axum::Json(json!({"error": "try later"})),
                            );
                        }
                        let list: Vec<Value> = held
                            .lock()
                            .unwrap()
                            .iter()
                            .enumerate()
                            .filter(|(_, (_, _, c))| c["ticket"] == id.as_str())
                            .map(|(i, (_, key, c))| {
                                json!({"id": format!("c-{}", i + 1), "body": c["body"]["body"], "idempotency_key": key})
                            })
                            .collect();
                        (StatusCode::OK, axum::Json(json!({"comments": list})))
                    }
                }),
            );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host_port = l.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        Self {
            url: format!("http://{host_port}"),
            host_port,
            comments,
            lists,
            hang_posts,
            readable,
        }
    }

    pub(crate) fn comments(&self) -> Vec<(String, String, Value)> {
        self.comments.lock().unwrap().clone()
    }

    /// How many times the comments of `ticket` were listed (read back).
    pub(crate) fn lists_of(&self, ticket: &str) -> usize {
        self.lists
            .lock()
            .unwrap()
            .iter()
            .filter(|t| *t == ticket)
            .count()
    }
}

/// Signs in to a fresh web app as alice (dev login) and returns the decision page of `id`.
async fn decision_page(s: &mut Stack, id: uuid::Uuid) -> String {
    let web = s.start_dev_web().await;
    let web_url = web.url.clone();
    let http = s.dev_sign_in(&web, "alice").await;
    http.get(format!("{web_url}/p/{id}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_comment_is_previewed_with_its_title_and_posted_once() {
    let api = TicketApi::start().await;
    let doc = DOC.replace(
        "handlers:\n",
        &format!(
            "handlers:\n  ticket.comment.add:\n    credential: tickets\n    base_url: {}/api\n",
            api.url
        ),
    );
    let mut hx = Hx::with_doc(
        "a_ticket_comment_is_previewed_with_its_title_and_posted_once",
        &doc,
        &[("ACTIOND_WEBHOOK_ALLOWED_HOSTS", api.host_port.clone())],
        &[("tickets", "tok-ticket-1")],
    )
    .await;
    // The agent chooses a ticket and text; a path, a URL or an empty comment is a 400 naming
    // the field.
    for (params, field) in [
        (
            json!({"ticket_id": "../admin", "body": "hi"}),
            "params.ticket_id",
        ),
        (json!({"ticket_id": "T-100", "body": " "}), "params.body"),
        (
            json!({"ticket_id": "T-100", "body": "x".repeat(4001)}),
            "params.body",
        ),
        (
            json!({"ticket_id": "T-100", "body": "hi", "url": "http://evil.example"}),
            "params.url",
        ),
    ] {
        let (st, v) = hx.post("ticket.comment.add", params.clone()).await;
        assert_eq!(st, 400, "{params}: {v}");
        assert!(v.to_string().contains(field), "{params}: {v}");
    }
    let text = "Restarted the printer.\nPlease confirm it prints.";
    let id = hx
        .propose(
            "ticket.comment.add",
            json!({"ticket_id": "T-100", "body": text}),
        )
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    assert_eq!(
        hx.preview(id).await,
        (true, "Ticket T-100: \"Printer on fire\" (open)".to_owned())
    );
    // The approver's card shows which ticket it is, by its title, and the comment.
    let page = decision_page(&mut hx.s, id).await;
    assert!(page.contains("Printer on fire"), "{page}");
    assert!(page.contains("Approve comment on ticket T-100"), "{page}");
    assert!(page.contains("Please confirm it prints."), "{page}");
    assert!(
        api.comments().is_empty(),
        "nothing is posted before approval"
    );
    hx.approve(id).await;
    hx.s.wait_state(id, "succeeded", T).await;
    // The effect, read back: the ticket's comment under the grant's idempotency key.
    let (e, _, _) = effect_of(&hx.s, id).await;
    assert_eq!(e["verdict"], "matches", "{e}");
    assert_eq!(e["evidence"]["comment_id"], "c-1", "{e}");
    assert_eq!(
        e["after"], "Comment c-1 on ticket T-100, 48 characters",
        "{e}"
    );
    assert_eq!(api.lists_of("T-100"), 1);
    let grant: uuid::Uuid =
        hx.s.tdb
            .db
            .client()
            .await
            .unwrap()
            .query_one("SELECT id FROM grants WHERE proposal_id = $1", &[&id])
            .await
            .unwrap()
            .get(0);
    // A base_url the executor's destination guard does not list: failed, nothing sent.
    let moved = doc.replace(&api.url, "http://127.0.0.1:9");
    actiond_store::tenants::apply(&hx.s.tdb.db, &moved, "test")
        .await
        .unwrap();
    let refused = hx
        .propose(
            "ticket.comment.add",
            json!({"ticket_id": "T-100", "body": "second"}),
        )
        .await;
    hx.s.wait_state(refused, "escalated", T).await;
    hx.approve(refused).await;
    hx.s.wait_state(refused, "failed", T).await;
    let detail = hx.detail(refused).await;
    assert!(
        detail.contains(
            "destination refused: host 127.0.0.1 is not in the executor's allowed destinations"
        ),
        "{detail}"
    );
    // Exactly one comment arrived, with the tenant's token and the grant as idempotency key.
    assert_eq!(
        api.comments(),
        vec![(
            "Bearer tok-ticket-1".to_owned(),
            grant.to_string(),
            json!({"ticket": "T-100", "body": {"body": text}}),
        )]
    );
}

/// The effect of a proposal as the executor read it back (the newest `proposal.effect`
/// event's detail and its transition).
pub(crate) async fn effect_of(
    s: &Stack,
    id: uuid::Uuid,
) -> (Value, Option<String>, Option<String>) {
    let c = s.tdb.db.client().await.unwrap();
    let r = c
        .query_one(
            "SELECT detail, from_state, to_state FROM audit_events
             WHERE proposal_id = $1 AND kind = 'proposal.effect' ORDER BY id DESC LIMIT 1",
            &[&id],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// The effect, read back over DNS with a real PowerDNS: a served change matches; a name of the
/// inner zone written into the outer one (the tenant allows only the outer zone, so nothing
/// refuses it) is answered 204 and stored, but PowerDNS answers that name from the inner zone
/// and never serves it: the run ends `effect_mismatch`, with the served and stored records as
/// evidence, and `approvals show` prints before → approved → after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_effects_are_read_back_over_dns_and_an_unserved_change_is_effect_mismatch() {
    let pdns = PowerDns::start(&["example.com", "inner.example.com", "staging.example.com"]).await;
    let doc = DOC.replace(
        "zones: [prod.example.com, staging.example.com]",
        "zones: [example.com, staging.example.com]",
    );
    let hx = Hx::with_doc(
        "dns_effects_read_back",
        &doc,
        &[
            ("ACTIOND_PDNS_BASE_URL", pdns.base_url.clone()),
            ("ACTIOND_PDNS_DNS_ADDR", pdns.dns_addr.clone()),
        ],
        &[("pdns", &pdns.api_key)],
    )
    .await;
    let served = hx
        .propose(
            "dns.record.update",
            dns(
                "staging.example.com",
                "www.staging.example.com",
                "TXT",
                json!(["v=spf1 -all"]),
            ),
        )
        .await;
    hx.s.wait_state(served, "succeeded", T).await;
    let (e, from, to) = effect_of(&hx.s, served).await;
    assert_eq!(e["verdict"], "matches", "{e}");
    assert_eq!(e["evidence"]["served"], json!(["v=spf1 -all"]));
    assert_eq!(
        (from, to),
        (None, None),
        "a read-back after a run moves nothing"
    );

    let hidden = hx
        .propose(
            "dns.record.update",
            dns(
                "example.com",
                "www.inner.example.com",
                "A",
                json!(["192.0.2.9"]),
            ),
        )
        .await;
    hx.s.wait_state(hidden, "escalated", T).await;
    hx.approve(hidden).await;
    hx.s.wait_state(hidden, "effect_mismatch", T).await;
    // PowerDNS's API took it (204) and holds it in the outer zone...
    let (_, stored) = pdns
        .rrset("example.com", "www.inner.example.com", "A")
        .await
        .unwrap();
    assert_eq!(stored, vec!["192.0.2.9"]);
    // ...but over DNS the name is the inner zone's, which has no such record.
    let (e, _, _) = effect_of(&hx.s, hidden).await;
    assert_eq!(e["verdict"], "absent", "{e}");
    assert_eq!(e["evidence"]["served"], json!([]));
    assert_eq!(e["evidence"]["api_rrset"]["records"], json!(["192.0.2.9"]));
    let detail = hx.detail(hidden).await;
    assert!(
        detail.contains("approved 192.0.2.9, served nothing; the API holds 192.0.2.9 in zone example.com, which does not serve it"),
        "{detail}"
    );
    let (ok, out, err) = cli(
        &["approvals", "show", &hidden.to_string()],
        &hx.s.cli_env().await,
    );
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("effect     before → approved → after"),
        "{out}"
    );
    assert!(
        out.contains("  after    www.inner.example.com A: nothing served ("),
        "{out}"
    );
    let (st, v) = hx.s.get(&hx.token, &hidden.to_string(), "").await;
    assert_eq!(
        (st, v["state"].as_str()),
        (200, Some("effect_mismatch")),
        "{v}"
    );
}
