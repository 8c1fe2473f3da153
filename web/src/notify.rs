//! Escalation notices and the background loop of `actiond web`.
//!
//! Every few seconds one replica claims escalated proposals not yet announced by inserting
//! their row into `web_notifications` (`ON CONFLICT DO NOTHING`: each escalation is claimed by
//! exactly one replica), then posts to the tenant's chat webhook (Slack-compatible JSON; the URL
//! is the credential `<tenant>.<notify.webhook>`) and/or emails `notify.email` through the
//! operator's SMTP relay. Failures are retried with backoff, at most five times.
//!
//! A notice carries the one-sentence summary, the tenant, the agent, the time limit and a link
//! to the decision page, which requires sign-in: there is never an approve-by-link. Agent text
//! is escaped for the channel: `&`, `<`, `>` become entities (so `<!channel>`, `<@U123>` and
//! `<https://evil|innocent>` are inert), `@channel`/`@here`/`@everyone` are broken, Markdown
//! links are split, and invisible or bidirectional characters are shown as `⟨U+XXXX⟩`.

use crate::AppState;
use crate::describe::describe;
use crate::pages::chrome::human_age;
use actiond_core::text::reveal_invisible;
use actiond_store::{notifications, passkeys};
use anyhow::Context as _;
use serde_json::{Value, json};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use uuid::Uuid;

/// Escapes agent-written text for a Slack-compatible chat message: entities for `&<>`, broken
/// mass mentions, split Markdown links, visible invisible characters. Newlines become visible
/// markers too, so agent text cannot fake extra lines of the notice.
pub fn escape_for_chat(s: &str) -> String {
    let s = reveal_invisible(s, false);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(c),
        }
    }
    let mut out = out.replace("](", "] (");
    for word in ["channel", "here", "everyone"] {
        let mut i = 0;
        while let Some(pos) = out[i..].to_ascii_lowercase().find(&format!("@{word}")) {
            let at = i + pos;
            out.replace_range(at..at + 1, "(at)");
            i = at + 4;
        }
    }
    out
}

/// The chat text of one notice. Only `link` and the fixed words are trusted; everything else
/// is escaped with [`escape_for_chat`].
pub fn notification_text(
    tenant: &str,
    sentence: &str,
    agent: &str,
    action: &str,
    limit: &str,
    link: &str,
) -> String {
    format!(
        "Approval needed in {tenant}: {sentence}\nAgent: {agent} · action: {action} · {limit}\nDecide after signing in: <{link}|open the decision page> (nothing is approved from this message)",
        tenant = escape_for_chat(tenant),
        sentence = escape_for_chat(sentence),
        agent = escape_for_chat(agent),
        action = escape_for_chat(action),
        limit = escape_for_chat(limit),
    )
}

/// The loop: notices every `interval`, sweeping expired sessions about once a minute.
pub(crate) async fn background(state: AppState) {
    let sweep_every = (60 / state.notify.interval.as_secs().max(1)).max(1);
    let mut tick: u64 = 0;
    loop {
        match notify_once(&state).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(n, "escalation notices handled"),
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "escalation notices failed"),
        }
        match passkey_notices_once(&state).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(n, "passkey notices handled"),
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "passkey notices failed"),
        }
        if tick.is_multiple_of(sweep_every)
            && let Err(e) = crate::session::sweep(&state).await
        {
            tracing::warn!(error = %format!("{e:#}"), "session sweep failed");
        }
        tick = tick.wrapping_add(1);
        actiond_runtime::clock::sleep(state.notify.interval).await;
    }
}

/// Claims and sends pending notices once; returns how many were handled.
pub(crate) async fn notify_once(state: &AppState) -> anyhow::Result<usize> {
    let claimed = notifications::claim(&state.db).await?;
    let n = claimed.len();
    for (id, tenant, stage) in claimed {
        match send_one(state, &tenant, id).await {
            Ok(channels) => {
                notifications::mark_sent(&state.db, &tenant, (id, stage), &channels).await?
            }
            Err(e) => {
                let msg = format!("{e:#}");
                tracing::warn!(proposal = %id, tenant, stage, error = %msg, "escalation notice failed");
                notifications::mark_failed(&state.db, &tenant, (id, stage), &msg).await?;
            }
        }
    }
    Ok(n)
}

async fn send_one(state: &AppState, tenant: &str, id: Uuid) -> anyhow::Result<Vec<String>> {
    let tenants = [tenant.to_owned()];
    let Some(p) = actiond_store::approvals::get(&state.db, Some(&tenants), id).await? else {
        return Ok(Vec::new());
    };
    if p.state != "escalated" {
        return Ok(Vec::new());
    }
    let (current, escalated_by) = {
        let c = state.db.client().await?;
        let Some(current) = state.docs.latest_of(&c, tenant).await? else {
            return Ok(Vec::new());
        };
        let escalated_by = match p.doc_version {
            Some(v) => state.docs.version_of(&c, tenant, v).await?,
            None => None,
        };
        (current, escalated_by)
    };
    let params: Value = serde_json::from_str(&p.params_json).unwrap_or(Value::Null);
    let d = describe(escalated_by.as_deref(), &p.action, &params, &p.target);
    let ttl = chrono::Duration::from_std(current.policy.escalation_ttl).unwrap_or_default();
    let deadline = p.created_at + ttl;
    let left = (deadline - actiond_runtime::clock::now_utc()).num_seconds();
    let mut limit = format!(
        "expires {} (in {})",
        deadline.format("%Y-%m-%d %H:%M UTC"),
        human_age(left)
    );
    // A staged approval names the stage that waits (after a re-route, the new group).
    let staged = actiond_store::stages::of_proposals(&state.db, &tenants, &[id]).await?;
    if let Some(st) = staged.get(&id) {
        let (line, next) = crate::staging::stage_line(st);
        limit = format!("{line} · {next}; {limit}");
    }
    let link = state
        .public_url
        .join(&format!("p/{id}"))
        .context("decision page link")?
        .to_string();
    let mut channels = Vec::new();
    if let Some(name) = &current.notify.webhook {
        let creds = state
            .creds
            .as_ref()
            .context("no credentials directory for the webhook URL")?;
        let url = creds.read_tenant(tenant, name)?;
        let text = notification_text(tenant, &d.sentence, &p.agent_name, &p.action, &limit, &link);
        post_webhook(state, &url, &text).await?;
        state
            .metrics
            .notifications
            .with_label_values(&["webhook", "sent"])
            .inc();
        channels.push("webhook".to_owned());
    }
    if !current.notify.email.is_empty() {
        match &state.notify.smtp_relay {
            Some(relay) => {
                send_email(
                    state,
                    relay,
                    &current.notify.email,
                    tenant,
                    &d.sentence,
                    &p.agent_name,
                    &p.action,
                    &limit,
                    &link,
                )
                .await?;
                state
                    .metrics
                    .notifications
                    .with_label_values(&["email", "sent"])
                    .inc();
                channels.push("email".to_owned());
            }
            None => tracing::warn!(
                tenant,
                "notify.email is set but --smtp-relay is not; no email sent"
            ),
        }
    }
    Ok(channels)
}

/// Claims and sends pending passkey-registration notices once; returns how many were handled.
pub(crate) async fn passkey_notices_once(state: &AppState) -> anyhow::Result<usize> {
    let claimed = passkeys::claim_notices(&state.db).await?;
    let n = claimed.len();
    for notice in claimed {
        match send_passkey_notice(state, &notice).await {
            Ok(channels) => passkeys::mark_notice(&state.db, &notice, Ok(&channels)).await?,
            Err(e) => {
                let msg = format!("{e:#}");
                tracing::warn!(tenant = %notice.tenant_id, subject = %notice.subject, error = %msg, "passkey notice failed");
                passkeys::mark_notice(&state.db, &notice, Err(&msg)).await?;
            }
        }
    }
    Ok(n)
}

/// The text of a passkey-registration notice, for the chat channel (`chat`: text escaped with
/// [`escape_for_chat`], a chat link) or for email (invisible characters revealed, the plain
/// link). Only the fixed words and `link` are trusted; the label is the person's own text.
pub fn passkey_notice_text(n: &passkeys::Notice, link: &str, chat: bool) -> String {
    let d = &n.detail;
    let alg = match d["alg"].as_i64() {
        Some(-7) => "ES256",
        Some(-8) => "EdDSA",
        Some(-257) => "RS256",
        _ => "?",
    };
    let synced = if d["backup_eligible"].as_bool() == Some(true) {
        "may be synced to other devices"
    } else {
        "bound to one device"
    };
    let vouched = if d["vouched_by"].is_string() {
        "allowed by their existing passkey"
    } else {
        "allowed by a fresh sign-in alone: their first passkey for this tenant"
    };
    let who = match &n.email {
        Some(e) => format!("{} ({})", n.subject, e),
        None => n.subject.clone(),
    };
    let at = n.created_at.format("%Y-%m-%d %H:%M:%S UTC");
    let warning = "If this was not them, their session may be stolen: sign them out at the identity provider and tell the operator.";
    if chat {
        return format!(
            "New passkey in {tenant}: {who} registered a passkey \"{label}\" ({alg}, {synced}; {vouched}) at {at}. From now on it can sign their approvals.\n{warning} Their passkeys (sign-in required): <{link}|the passkeys page>",
            tenant = escape_for_chat(&n.tenant_id),
            who = escape_for_chat(&who),
            label = escape_for_chat(d["label"].as_str().unwrap_or_default()),
        );
    }
    format!(
        "New passkey in {tenant} for {who}.\n\nLabel: \"{label}\"\nAlgorithm: {alg}, {synced}\nHow: {vouched}\nRegistered: {at}\n\nFrom now on it can sign their approvals.\n{warning}\n\nTheir passkeys (sign-in required):\n{link}\n",
        tenant = reveal_invisible(&n.tenant_id, false),
        who = reveal_invisible(&who, false),
        label = reveal_invisible(d["label"].as_str().unwrap_or_default(), false),
    )
}

/// Sends one passkey notice: email to the person (their email at registration) and to the
/// tenant's `notify.email`, and the tenant's `notify.webhook` — the tenant's admins' channels.
async fn send_passkey_notice(
    state: &AppState,
    n: &passkeys::Notice,
) -> anyhow::Result<Vec<String>> {
    let current = {
        let c = state.db.client().await?;
        state.docs.latest_of(&c, &n.tenant_id).await?
    };
    let link = state
        .public_url
        .join("passkeys")
        .context("passkeys page link")?
        .to_string();
    let text = passkey_notice_text(n, &link, true);
    let mut channels = Vec::new();
    if let Some(name) = current.as_ref().and_then(|d| d.notify.webhook.as_ref()) {
        let creds = state
            .creds
            .as_ref()
            .context("no credentials directory for the webhook URL")?;
        let url = creds.read_tenant(&n.tenant_id, name)?;
        post_webhook(state, &url, &text).await?;
        channels.push("webhook".to_owned());
    }
    let mut to: Vec<String> = n.email.iter().cloned().collect();
    if let Some(d) = &current {
        to.extend(
            d.notify
                .email
                .iter()
                .filter(|e| !to.contains(e))
                .cloned()
                .collect::<Vec<_>>(),
        );
    }
    if !to.is_empty() {
        match &state.notify.smtp_relay {
            Some(relay) => {
                let subject = format!(
                    "[actiond] New passkey in {} for {}",
                    reveal_invisible(&n.tenant_id, false),
                    reveal_invisible(&n.subject, false)
                );
                let body = passkey_notice_text(n, &link, false);
                send_plain(state, relay, &to, &subject, &body).await?;
                channels.push("email".to_owned());
            }
            None => tracing::warn!(
                tenant = %n.tenant_id,
                "a passkey notice has email recipients but --smtp-relay is not set; no email sent"
            ),
        }
    }
    Ok(channels)
}

fn is_private(ip: IpAddr) -> bool {
    actiond_core::netaddr::is_private(ip)
}

/// Posts `{"text": …}` to a webhook URL from the operator's credentials: http(s) only, no
/// redirects, no private or link-local address unless allowed, the checked address pinned.
async fn post_webhook(state: &AppState, url: &str, text: &str) -> anyhow::Result<()> {
    let u = url::Url::parse(url).context("webhook credential is not a URL")?;
    if !matches!(u.scheme(), "http" | "https") || !u.username().is_empty() {
        anyhow::bail!("webhook URL must be http(s) without user info");
    }
    let host = u.host_str().context("webhook URL has no host")?.to_owned();
    let port = u.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
        .await
        .context("webhook host does not resolve")?
        .collect();
    let addr = addrs
        .iter()
        .copied()
        .find(|a| state.notify.allow_private || !is_private(a.ip()))
        .context("webhook host resolves only to private, loopback or link-local addresses (allow with --notify-allow-private)")?;
    // No proxy from the environment: a proxy would be connected to instead of `addr`, the
    // address checked above.
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .resolve(&host, addr)
        .build()?;
    let body = json!({"text": text, "unfurl_links": false, "unfurl_media": false, "mrkdwn": true});
    // A webhook URL is a credential (chat webhooks carry their secret in the path): errors
    // are logged and stored without it.
    let res = client
        .post(u)
        .json(&body)
        .send()
        .await
        .map_err(|e| anyhow::Error::from(e.without_url()).context("webhook POST"))?;
    if !res.status().is_success() {
        anyhow::bail!("webhook answered {}", res.status());
    }
    Ok(())
}

#[expect(clippy::too_many_arguments, reason = "one parameter per notice field")]
async fn send_email(
    state: &AppState,
    relay: &str,
    to: &[String],
    tenant: &str,
    sentence: &str,
    agent: &str,
    action: &str,
    limit: &str,
    link: &str,
) -> anyhow::Result<()> {
    let body = format!(
        "An agent's action needs a decision in tenant {tenant}.\n\n    {sentence}\n\nAgent: {agent}\nAction: {action}\nTime limit: {limit}\n\nOpen the decision page (sign-in required; nothing is approved from this email):\n{link}\n",
        tenant = reveal_invisible(tenant, false),
        sentence = reveal_invisible(sentence, false),
        agent = reveal_invisible(agent, false),
        action = reveal_invisible(action, false),
    );
    let subject = format!(
        "[actiond] Approval needed in {}: {}",
        reveal_invisible(tenant, false),
        reveal_invisible(action, false)
    );
    send_plain(state, relay, to, &subject, &body).await
}

/// Sends a plain-text email through the operator's SMTP relay (`host[:port]`).
async fn send_plain(
    state: &AppState,
    relay: &str,
    to: &[String],
    subject: &str,
    body: &str,
) -> anyhow::Result<()> {
    use lettre::message::header::ContentType;
    use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
    let (host, port) = match relay.rsplit_once(':') {
        Some((h, p)) => (h.to_owned(), p.parse::<u16>().context("--smtp-relay port")?),
        None => (relay.to_owned(), 25),
    };
    let mut b = Message::builder()
        .from(state.notify.smtp_from.parse().context("--smtp-from")?)
        .subject(subject)
        .header(ContentType::TEXT_PLAIN);
    for r in to {
        b = b.to(r
            .parse()
            .with_context(|| format!("email recipient {r:?}"))?);
    }
    let msg = b.body(body.to_owned())?;
    let transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
        .port(port)
        .timeout(Some(Duration::from_secs(10)))
        .build();
    transport.send(msg).await.context("SMTP relay")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_escaping_neutralizes_mentions_and_links() {
        let e = escape_for_chat(
            "hi <!channel> <@U123> <https://evil.example|invoice> @here @Everyone [x](https://e) a&b \u{202E}cba",
        );
        assert!(!e.contains('<') && !e.contains('>'), "{e}");
        assert!(e.contains("&lt;!channel&gt;"));
        assert!(e.contains("&lt;@U123&gt;"));
        assert!(e.contains("(at)here") && e.contains("(at)Everyone"), "{e}");
        assert!(e.contains("[x] (https://e)"));
        assert!(e.contains("a&amp;b"));
        assert!(e.contains("⟨U+202E⟩"));
        let t = notification_text(
            "acme",
            "Refund <!channel>\nfake line",
            "bot",
            "billing.refund.issue",
            "expires soon",
            "https://app/p/1",
        );
        assert!(t.contains("<https://app/p/1|open the decision page>"));
        assert!(!t.contains("<!channel>"));
        assert!(t.contains("⟨U+000A⟩fake line"));
    }

    #[test]
    fn passkey_notices_escape_the_label_and_say_how_it_was_allowed() {
        let n = passkeys::Notice {
            tenant_id: "acme".into(),
            credential_id: vec![1],
            issuer: "https://idp".into(),
            subject: "alice".into(),
            email: Some("alice@acme.test".into()),
            detail: serde_json::json!({"label": "key <!channel> @here\u{202E}", "alg": -8,
                                       "backup_eligible": true, "vouched_by": null}),
            created_at: chrono::DateTime::UNIX_EPOCH,
        };
        let chat = passkey_notice_text(&n, "https://app/passkeys", true);
        assert!(
            chat.starts_with("New passkey in acme: alice (alice@acme.test) registered a passkey"),
            "{chat}"
        );
        assert!(chat.contains("&lt;!channel&gt; (at)here⟨U+202E⟩"), "{chat}");
        assert!(
            chat.contains(
                "EdDSA, may be synced to other devices; allowed by a fresh sign-in alone"
            ),
            "{chat}"
        );
        assert_eq!(
            chat.matches('<').count(),
            1,
            "only our own link is markup: {chat}"
        );
        let mail = passkey_notice_text(&n, "https://app/passkeys", false);
        assert!(
            mail.contains("Label: \"key <!channel> @here⟨U+202E⟩\""),
            "{mail}"
        );
        assert!(mail.ends_with("\nhttps://app/passkeys\n"), "{mail}");
    }

    #[test]
    fn private_addresses_are_recognized() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }
}
