//! `email.send` through the operator's SMTP relay (`--smtp-relay host:port`), with STARTTLS
//! whenever the relay offers it, and always when a credential is sent ([`send`]). The message is text only, built from the approved template
//! ([`actiond_core::handlers::email::render`]); the grant id is its `Message-ID`.

use super::{Execution, Handler, Outcome, credential};
use actiond_core::handlers::email::{
    RenderedEmail, decode_encoded_words, is_email_address, render,
};
use lettre::Message;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::{Credentials, DEFAULT_MECHANISMS};
use lettre::transport::smtp::client::{AsyncSmtpConnection, TlsParameters};
use lettre::transport::smtp::extension::ClientId;

/// The executor's entry of `email.send`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(send(ex)),
    preview: Some(|ex| Box::pin(async move { preview(ex) })),
    read_back: None,
};

/// The relay's address as the operator configured it: `host:port` (port 25 when absent).
pub fn parse_relay(s: &str) -> Result<(String, u16), String> {
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("--smtp-relay {s:?}: the port must be 1-65535"))?,
        ),
        None => (s, 25),
    };
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return Err(format!("--smtp-relay {s:?}: expected host:port"));
    }
    Ok((host.trim_matches(['[', ']']).to_owned(), port))
}

/// The rendered email as a MIME message (`text/plain; charset=utf-8`).
///
/// Every recipient is checked again with [`is_email_address`], so a proposal stored before a
/// rule tightened (a `%` or `!` in the local part, which a relay may route to another domain)
/// is refused here rather than sent; so is a subject holding a MIME encoded word (refused at
/// submission since, [`actiond_core::handlers::email::NO_ENCODED_WORD`]).
pub(crate) fn message(mail: &RenderedEmail, message_id: &str) -> Result<Message, String> {
    if let Some(r) = mail.to.iter().find(|r| !is_email_address(r)) {
        return Err(format!(
            "recipient {r:?}: not an address actiond sends to (a % or ! before the @ may be routed to another domain); nothing was sent"
        ));
    }
    if let Some(shown) = decode_encoded_words(&mail.subject) {
        return Err(format!(
            "the subject holds a MIME encoded word that mail clients would show as {:?}, which the approver never read; nothing was sent",
            actiond_core::text::reveal_invisible(&shown, false)
        ));
    }
    let mut b = Message::builder()
        .from(
            mail.from
                .parse()
                .map_err(|e| format!("from address {:?}: {e}", mail.from))?,
        )
        .subject(mail.subject.clone())
        .message_id(Some(message_id.to_owned()))
        .header(ContentType::TEXT_PLAIN);
    for r in &mail.to {
        b = b.to(r.parse().map_err(|e| format!("recipient {r:?}: {e}"))?);
    }
    b.body(mail.body.clone())
        .map_err(|e| format!("message could not be built: {e}"))
}

/// Sends the approved email in **one** SMTP session: connect, EHLO, STARTTLS, AUTH (when the
/// approved settings name a credential), then the message.
///
/// With a credential, TLS is required (RFC 8314 §3: no credential in clear): a relay that does
/// not offer STARTTLS — or an on-path attacker who strips it from the EHLO answer — gets
/// neither the credential nor the message, and the outcome names the refusal. Only
/// `--smtp-allow-plaintext` (`ACTIOND_SMTP_ALLOW_PLAINTEXT`, off by default) lets a credential
/// go out in clear. Without a credential STARTTLS is used whenever the relay offers it.
///
/// A relay that refuses (4xx/5xx) or cannot be reached is `Failed`; a timeout or a connection
/// that breaks once the message has begun to travel is `Unknown` (RFC 5321 §6.1: the relay
/// takes responsibility at its reply to the end of DATA, which may be lost).
pub(super) async fn send(ex: &Execution<'_>) -> Outcome {
    let Some((host, port)) = &ex.destinations.smtp_relay else {
        return Outcome::Failed(
            "no SMTP relay is configured on this executor (--smtp-relay)".into(),
        );
    };
    let Some(mail) = render(ex.params, ex.settings) else {
        return Outcome::Failed("the template is missing from the approved settings".into());
    };
    let msg = match message(&mail, &format!("<{}@actiond>", ex.grant_id)) {
        Ok(m) => m,
        Err(e) => return Outcome::Failed(e),
    };
    let credentials = match credential(ex) {
        Ok(Some(c)) => {
            let (user, pass) = c.split_once(':').unwrap_or((c.as_str(), ""));
            Some(Credentials::new(user.to_owned(), pass.to_owned()))
        }
        Ok(None) => None,
        Err(o) => return o,
    };
    let relay = format!("{host}:{port}");
    // Whatever fails before the message begins to travel sent nothing: `Failed`.
    let mut conn = match open_session(
        host,
        *port,
        ex.timeout,
        credentials.as_ref(),
        ex.destinations.smtp_allow_plaintext,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(format!("{e} (relay {relay})")),
    };
    let result = conn.send(msg.envelope(), &msg.formatted()).await;
    conn.abort().await;
    match result {
        Ok(r) => Outcome::Succeeded(format!(
            "SMTP relay accepted the message for {} recipient(s): {}",
            mail.to.len(),
            r.code()
        )),
        Err(e) if e.is_permanent() || e.is_transient() => {
            Outcome::Failed(format!("the SMTP relay refused the message: {e}"))
        }
        Err(e) if e.is_client() => Outcome::Failed(format!("the message could not be sent: {e}")),
        Err(e) => Outcome::Unknown(format!(
            "the SMTP exchange broke off; the relay may have accepted the message: {e}"
        )),
    }
}

/// Opens the one session a message is sent in: TCP, the relay's greeting, EHLO, STARTTLS when
/// offered (required when `credentials` are given, unless `allow_plaintext`), then AUTH.
/// Nothing of the message has been sent when this fails; the error says why.
async fn open_session(
    host: &str,
    port: u16,
    timeout: std::time::Duration,
    credentials: Option<&Credentials>,
    allow_plaintext: bool,
) -> Result<AsyncSmtpConnection, String> {
    let hello = ClientId::default();
    let mut conn =
        AsyncSmtpConnection::connect_tokio1((host, port), Some(timeout), &hello, None, None)
            .await
            .map_err(|e| format!("could not reach the SMTP relay: {e}"))?;
    if conn.can_starttls() {
        let tls =
            TlsParameters::new(host.to_owned()).map_err(|e| format!("TLS setup failed: {e}"))?;
        conn.starttls(tls, &hello)
            .await
            .map_err(|e| format!("STARTTLS with the SMTP relay failed; nothing was sent: {e}"))?;
    }
    let Some(credentials) = credentials else {
        return Ok(conn);
    };
    if !conn.is_encrypted() && !allow_plaintext {
        let _ = conn.quit().await;
        return Err("refused: the SMTP relay did not offer STARTTLS, and the credential and the message are never sent in clear (ACTIOND_SMTP_ALLOW_PLAINTEXT allows it); nothing was sent".into());
    }
    if let Err(e) = conn.auth(DEFAULT_MECHANISMS, credentials).await {
        conn.abort().await;
        return Err(format!(
            "the SMTP relay refused the credential; nothing was sent: {e}"
        ));
    }
    Ok(conn)
}

/// The email as it would be sent.
/// Binds nothing: the message comes from the approved params and settings alone.
fn preview(ex: &Execution<'_>) -> Result<super::Read, String> {
    let m = render(ex.params, ex.settings).ok_or("the template is missing")?;
    Ok(super::Read {
        text: format!(
            "From: {}\nTo: {}\nSubject: {}\n\n{}",
            m.from,
            m.to.join(", "),
            m.subject,
            m.body
        ),
        binding: serde_json::json!({}),
        warnings: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_addresses() {
        assert_eq!(
            parse_relay("mail.example.com:587"),
            Ok(("mail.example.com".into(), 587))
        );
        assert_eq!(
            parse_relay("mail.example.com"),
            Ok(("mail.example.com".into(), 25))
        );
        assert!(parse_relay("smtp://x:25").is_err());
        assert!(parse_relay("x:99999").is_err());
    }

    fn mail(to: &str) -> RenderedEmail {
        RenderedEmail {
            from: "support@acme.example".into(),
            to: vec![to.into()],
            subject: "s".into(),
            body: "b".into(),
        }
    }

    #[test]
    fn a_routed_recipient_is_never_sent() {
        assert!(message(&mail("ann@acme.example"), "<g@actiond>").is_ok());
        for to in [
            "eve%evil.example@acme.example",
            "evil.example!eve@acme.example",
        ] {
            let e = message(&mail(to), "<g@actiond>").unwrap_err();
            assert!(e.contains("nothing was sent"), "{to}: {e}");
        }
    }
}
