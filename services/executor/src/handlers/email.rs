//! `email.send` through the operator's SMTP relay (`--smtp-relay host:port`), with STARTTLS
//! whenever the relay offers it. The message is text only, built from the approved template
//! ([`actiond_core::handlers::email::render`]); the grant id is its `Message-ID`.

use super::{Execution, Outcome, credential};
use actiond_core::handlers::email::{RenderedEmail, is_email_address, render};
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

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
/// is refused here rather than sent.
pub(crate) fn message(mail: &RenderedEmail, message_id: &str) -> Result<Message, String> {
    if let Some(r) = mail.to.iter().find(|r| !is_email_address(r)) {
        return Err(format!(
            "recipient {r:?}: not an address actiond sends to (a % or ! before the @ may be routed to another domain); nothing was sent"
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

/// Sends the approved email. A relay that refuses (4xx/5xx) or cannot be reached is `Failed`;
/// a timeout or a connection that breaks once the exchange has begun is `Unknown` (RFC 5321
/// §6.1: the relay takes responsibility at its reply to the end of DATA, which may be lost).
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
    let tls = match TlsParameters::new(host.clone()) {
        Ok(p) => Tls::Opportunistic(p),
        Err(e) => return Outcome::Failed(format!("TLS setup failed: {e}")),
    };
    let mut t = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.as_str())
        .port(*port)
        .tls(tls)
        .timeout(Some(ex.timeout));
    match credential(ex) {
        Ok(Some(c)) => {
            let (user, pass) = c.split_once(':').unwrap_or((c.as_str(), ""));
            t = t.credentials(Credentials::new(user.to_owned(), pass.to_owned()));
        }
        Ok(None) => {}
        Err(o) => return o,
    }
    let t = t.build();
    // Reach the relay first: whatever fails before a connection is open sent nothing, so it is
    // `Failed`. Once the exchange that carries the message has begun, a broken connection may
    // come after the relay stored it (the answer to the end of DATA is the only receipt), so
    // it is `Unknown` and never re-run.
    match t.test_connection().await {
        Ok(true) => {}
        Ok(false) => return Outcome::Failed("the SMTP relay did not answer NOOP".into()),
        Err(e) => return Outcome::Failed(format!("could not reach the SMTP relay: {e}")),
    }
    match t.send(msg).await {
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
