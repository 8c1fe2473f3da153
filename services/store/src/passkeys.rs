//! Approvers' passkeys, their single-use challenges, and the assertion stored with an approval
//! that needed one (tables of V15; rules in [`actiond_core::passkey`]).
//!
//! - A challenge is a 32-byte nonce (64 hex) the web app draws and stores here with who asked
//!   for it, what for and until when (database clock); it is consumed by one
//!   `DELETE … RETURNING`, so a replayed registration or assertion finds nothing.
//! - [`register`] verifies a registration against its consumed challenge and stores the
//!   credential with a `passkey.registered` audit event, in one transaction.
//! - [`check_for_approval`] runs inside the decision's transaction ([`crate::approvals`]): it
//!   consumes the approval challenge, requires it to be this person's for this proposal,
//!   verifies the assertion against the challenge derived from the proposal's intent hash and
//!   document version, and advances the passkey's signature counter.
//! - [`discard_for_refusal`] uses up the challenge of an Approve that another rule refused
//!   before the passkey rule ran (a stage's group, a missing re-typed amount), so the
//!   assertion cannot approve later, in another stage.
//! - [`verify_all`] re-verifies every stored assertion from the stored bytes alone (what
//!   `actiond audit verify-passkeys` runs), naming the first field that differs.

use crate::{Db, Result, audit, set_tenant};
use actiond_core::audit::AuditKind;
use actiond_core::passkey::{
    self as pk, Assertion, ChallengeInput, PasskeyError, Registered, RelyingParty,
};
use serde_json::json;
use uuid::Uuid;

/// How long a challenge may be used (database clock).
pub const CHALLENGE_LIFETIME_SECS: f64 = 300.0;

/// Who is asking: the approver's OIDC identity.
#[derive(Debug, Clone, Copy)]
pub struct Person<'a> {
    /// ID-token `iss`.
    pub issuer: &'a str,
    /// ID-token `sub`.
    pub subject: &'a str,
}

/// A registered passkey as listed to its owner.
#[derive(Debug, Clone)]
pub struct PasskeyInfo {
    /// Tenant it approves for.
    pub tenant_id: String,
    /// Credential id, base64url.
    pub credential_id: String,
    /// COSE algorithm.
    pub alg: i32,
    /// Label given at registration.
    pub label: String,
    /// Registered at.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Last used for an approval.
    pub last_used_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Stores a fresh challenge (`nonce`: 64 lowercase hex) for `person` in `tenant`: to register
/// a passkey (`proposal: None`) or to approve `proposal`.
pub async fn issue_challenge(
    db: &Db,
    tenant: &str,
    person: Person<'_>,
    nonce: &str,
    proposal: Option<Uuid>,
) -> Result<()> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let purpose = if proposal.is_some() {
        "approve"
    } else {
        "register"
    };
    tx.execute(
        "DELETE FROM passkey_challenges WHERE tenant_id = $1 AND expires_at < now()",
        &[&tenant],
    )
    .await?;
    tx.execute(
        "INSERT INTO passkey_challenges (nonce, tenant_id, issuer, subject, purpose, proposal_id, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))",
        &[&nonce, &tenant, &person.issuer, &person.subject, &purpose, &proposal, &CHALLENGE_LIFETIME_SECS],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The consumed challenge, checked: it existed, was live, and was this person's for this
/// purpose (and proposal). Errors name what did not match.
async fn consume(
    tx: &crate::Tx<'_>,
    nonce: &str,
    person: Person<'_>,
    proposal: Option<Uuid>,
) -> Result<std::result::Result<(), PasskeyError>> {
    let row = tx
        .query_opt(
            "DELETE FROM passkey_challenges WHERE nonce = $1
             RETURNING issuer, subject, proposal_id, expires_at > now() AS live",
            &[&nonce],
        )
        .await?;
    let fail = |m: &str| Ok(Err(PasskeyError(m.to_owned())));
    let Some(row) = row else {
        return fail("passkey_nonce: unknown or already used challenge; start again");
    };
    let (iss, sub): (String, String) = (row.try_get("issuer")?, row.try_get("subject")?);
    if iss != person.issuer || sub != person.subject {
        return fail("passkey_nonce: this challenge was issued to someone else");
    }
    let for_proposal: Option<Uuid> = row.try_get("proposal_id")?;
    if for_proposal != proposal {
        return fail("passkey_nonce: this challenge was issued for another proposal");
    }
    if !row.try_get::<_, bool>("live")? {
        return fail("passkey_nonce: the challenge expired; start again");
    }
    Ok(Ok(()))
}

/// Finishes a registration: consumes `nonce`, verifies `client_data_json` and
/// `attestation_object` against it, stores the passkey for `person` in `tenant` with a
/// `passkey.registered` event. `Ok(Err)` is a refusal (nothing stored but the challenge's use).
#[allow(clippy::too_many_arguments)]
pub async fn register(
    db: &Db,
    tenant: &str,
    person: Person<'_>,
    rp: &RelyingParty,
    nonce: &str,
    client_data_json: &[u8],
    attestation_object: &[u8],
    label: &str,
) -> Result<std::result::Result<Registered, PasskeyError>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let checked = match consume(&tx, nonce, person, None).await? {
        Ok(()) => {
            // A registration's challenge is the nonce's 32 bytes.
            let challenge = hex::decode(nonce).unwrap_or_default();
            pk::verify_registration(rp, &challenge, client_data_json, attestation_object)
        }
        Err(e) => Err(e),
    };
    let reg = match checked {
        Ok(r) => r,
        Err(e) => {
            tx.commit().await?;
            return Ok(Err(e));
        }
    };
    let n = tx
        .execute(
            "INSERT INTO passkeys (tenant_id, credential_id, issuer, subject, public_key, alg, sign_count, rp_id, label)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
            &[&tenant, &reg.credential_id, &person.issuer, &person.subject, &reg.public_key,
              &(reg.alg as i32), &i64::from(reg.sign_count), &rp.id, &label],
        )
        .await?;
    if n == 0 {
        tx.commit().await?;
        return Ok(Err(PasskeyError(
            "credential_id: this passkey is already registered".into(),
        )));
    }
    let actor = format!("approver:{}", person.subject);
    audit::write(
        &tx,
        &audit::Event::new(
            tenant,
            None,
            AuditKind::PasskeyRegistered,
            &actor,
            json!({"issuer": person.issuer, "subject": person.subject,
                   "credential_id": pk::b64url(&reg.credential_id), "alg": reg.alg, "rp_id": rp.id}),
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(Ok(reg))
}

/// This person's passkeys in the given tenants, newest first.
pub async fn list(db: &Db, tenants: &[String], person: Person<'_>) -> Result<Vec<PasskeyInfo>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    crate::set_tenants(&tx, tenants).await?;
    let rows = tx
        .query(
            "SELECT tenant_id, credential_id, alg, label, created_at, last_used_at FROM passkeys
             WHERE issuer = $1 AND subject = $2 AND tenant_id = ANY($3) ORDER BY created_at DESC",
            &[&person.issuer, &person.subject, &tenants],
        )
        .await?;
    tx.commit().await?;
    rows.iter()
        .map(|r| {
            let id: Vec<u8> = r.try_get("credential_id")?;
            Ok(PasskeyInfo {
                tenant_id: r.try_get("tenant_id")?,
                credential_id: pk::b64url(&id),
                alg: r.try_get("alg")?,
                label: r.try_get("label")?,
                created_at: r.try_get("created_at")?,
                last_used_at: r.try_get("last_used_at")?,
            })
        })
        .collect()
}

/// The assertion a person submitted with an Approve, and where the web app is served (which
/// the browser signed; from configuration, never from the request).
#[derive(Debug, Clone)]
pub struct SubmittedAssertion {
    /// The approval challenge's nonce (64 hex).
    pub nonce: String,
    /// The assertion's bytes.
    pub assertion: Assertion,
    /// The relying party.
    pub rp: RelyingParty,
}

/// A verified assertion, to store beside the approval (see [`store_for_approval`]).
#[derive(Debug, Clone)]
pub struct VerifiedPasskey {
    submitted: SubmittedAssertion,
    public_key: Vec<u8>,
    sign_count: u32,
    intent_hash: String,
    doc_version: i32,
    /// [`pk::evidence_sha256`], also written into the decision's audit event.
    pub evidence_sha256: String,
}

impl VerifiedPasskey {
    /// What the decision's audit event records about the passkey.
    pub fn audit_json(&self) -> serde_json::Value {
        json!({
            "credential_id": pk::b64url(&self.submitted.assertion.credential_id),
            "nonce": self.submitted.nonce,
            "sign_count": self.sign_count,
            "evidence_sha256": self.evidence_sha256,
        })
    }
}

/// What an approval binds, for [`check_for_approval`].
#[derive(Debug, Clone, Copy)]
pub struct ApprovalBinding<'a> {
    /// Tenant.
    pub tenant: &'a str,
    /// Proposal.
    pub proposal_id: Uuid,
    /// The proposal's intent hash (from its locked row).
    pub intent_hash: &'a str,
    /// The document version that escalated it.
    pub doc_version: i32,
}

/// Inside a refused decision's transaction: deletes the approval challenge `nonce` when it was
/// issued to `person` for `proposal` (a challenge is consumed by the decision, refused or
/// not). Without this, an assertion refused by an earlier rule — finance approving during the
/// team-leads stage — stayed usable for five minutes and approved the next stage when posted
/// again, without a new touch of the authenticator. A nonce of anyone else is left alone.
pub async fn discard_for_refusal(
    tx: &crate::Tx<'_>,
    nonce: &str,
    person: Person<'_>,
    proposal: Uuid,
) -> Result<()> {
    tx.execute(
        "DELETE FROM passkey_challenges
         WHERE nonce = $1 AND issuer = $2 AND subject = $3 AND proposal_id = $4",
        &[&nonce, &person.issuer, &person.subject, &proposal],
    )
    .await?;
    Ok(())
}

/// Inside the decision's transaction: consumes the approval challenge and verifies the
/// assertion (see the module doc). `Ok(Err)` is a refusal; the challenge stays used.
pub async fn check_for_approval(
    tx: &crate::Tx<'_>,
    b: ApprovalBinding<'_>,
    person: Person<'_>,
    s: &SubmittedAssertion,
) -> Result<std::result::Result<VerifiedPasskey, PasskeyError>> {
    if let Err(e) = consume(tx, &s.nonce, person, Some(b.proposal_id)).await? {
        return Ok(Err(e));
    }
    let row = tx
        .query_opt(
            "SELECT public_key, sign_count FROM passkeys
             WHERE tenant_id = $1 AND credential_id = $2 AND issuer = $3 AND subject = $4 FOR UPDATE",
            &[&b.tenant, &s.assertion.credential_id, &person.issuer, &person.subject],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Err(PasskeyError(
            "passkey_credential_id: not a passkey you registered for this tenant".into(),
        )));
    };
    let public_key: Vec<u8> = row.try_get("public_key")?;
    let stored: i64 = row.try_get("sign_count")?;
    let pid = b.proposal_id.to_string();
    let challenge = pk::approval_challenge(&ChallengeInput {
        proposal_id: &pid,
        tenant_id: b.tenant,
        intent_hash: b.intent_hash,
        doc_version: b.doc_version,
        nonce: &s.nonce,
    });
    let count = match pk::verify_assertion(&s.rp, &challenge, &public_key, &s.assertion) {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    if !pk::counter_ok(u32::try_from(stored).unwrap_or(u32::MAX), count) {
        return Ok(Err(PasskeyError(format!(
            "authenticator_data: signature counter {count} is not above {stored} (a cloned or replayed authenticator)"
        ))));
    }
    tx.execute(
        "UPDATE passkeys SET sign_count = $3, last_used_at = now() WHERE tenant_id = $1 AND credential_id = $2",
        &[&b.tenant, &s.assertion.credential_id, &i64::from(count)],
    )
    .await?;
    Ok(Ok(VerifiedPasskey {
        evidence_sha256: pk::evidence_sha256(&s.assertion, &public_key),
        submitted: s.clone(),
        public_key,
        sign_count: count,
        intent_hash: b.intent_hash.to_owned(),
        doc_version: b.doc_version,
    }))
}

/// Stores a verified assertion beside the person's approvals row (same transaction).
pub async fn store_for_approval(
    tx: &crate::Tx<'_>,
    tenant: &str,
    proposal_id: Uuid,
    person: Person<'_>,
    v: &VerifiedPasskey,
) -> Result<()> {
    let a = &v.submitted.assertion;
    tx.execute(
        "INSERT INTO approval_passkeys (proposal_id, tenant_id, issuer, subject, credential_id, public_key, nonce,
            intent_hash, doc_version, rp_id, origin, authenticator_data, client_data_json, signature, sign_count, evidence_sha256)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
        &[&proposal_id, &tenant, &person.issuer, &person.subject, &a.credential_id, &v.public_key,
          &v.submitted.nonce, &v.intent_hash, &v.doc_version, &v.submitted.rp.id, &v.submitted.rp.origin,
          &a.authenticator_data, &a.client_data_json, &a.signature, &i64::from(v.sign_count), &v.evidence_sha256],
    )
    .await?;
    Ok(())
}

/// One stored assertion that failed re-verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Proposal.
    pub proposal_id: Uuid,
    /// Approver subject.
    pub subject: String,
    /// What failed, naming the field.
    pub problem: String,
}

/// Re-verifies every stored approval assertion from the stored bytes and public key alone:
/// the challenge recomputed from the proposal's intent hash (as the proposal row holds it now),
/// the document version and the nonce; the signature; and the evidence hash the approval's
/// audit event recorded. Returns how many were checked and what failed, oldest first.
pub async fn verify_all(db: &Db) -> Result<(usize, Vec<Finding>)> {
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT ap.*, p.intent_hash AS proposal_intent,
                    (SELECT e.detail->'passkey'->>'evidence_sha256' FROM audit_events e
                      WHERE e.proposal_id = ap.proposal_id AND e.detail->'approver'->>'subject' = ap.subject
                        AND e.detail->'passkey'->>'evidence_sha256' IS NOT NULL ORDER BY e.id LIMIT 1) AS audited_sha256
             FROM approval_passkeys ap LEFT JOIN proposals p ON p.id = ap.proposal_id
             ORDER BY ap.created_at, ap.proposal_id",
            &[],
        )
        .await?;
    let mut findings = Vec::new();
    for r in &rows {
        let proposal_id: Uuid = r.try_get("proposal_id")?;
        let subject: String = r.try_get("subject")?;
        if let Err(problem) = verify_row(r) {
            findings.push(Finding {
                proposal_id,
                subject,
                problem,
            });
        }
    }
    Ok((rows.len(), findings))
}

/// One row of [`verify_all`].
fn verify_row(r: &tokio_postgres::Row) -> std::result::Result<(), String> {
    let get_s = |k: &str| r.try_get::<_, String>(k).map_err(|e| format!("{k}: {e}"));
    let get_b = |k: &str| r.try_get::<_, Vec<u8>>(k).map_err(|e| format!("{k}: {e}"));
    let intent = get_s("intent_hash")?;
    match r.try_get::<_, Option<String>>("proposal_intent") {
        Ok(Some(p)) if p == intent => {}
        Ok(Some(_)) => return Err("intent_hash: differs from the proposal's".into()),
        _ => return Err("proposal_id: the proposal is missing".into()),
    }
    let a = Assertion {
        credential_id: get_b("credential_id")?,
        authenticator_data: get_b("authenticator_data")?,
        client_data_json: get_b("client_data_json")?,
        signature: get_b("signature")?,
    };
    let public_key = get_b("public_key")?;
    let pid: Uuid = r.try_get("proposal_id").map_err(|e| e.to_string())?;
    let pid = pid.to_string();
    let tenant = get_s("tenant_id")?;
    let nonce = get_s("nonce")?;
    let challenge = pk::approval_challenge(&ChallengeInput {
        proposal_id: &pid,
        tenant_id: &tenant,
        intent_hash: &intent,
        doc_version: r.try_get("doc_version").map_err(|e| e.to_string())?,
        nonce: &nonce,
    });
    let rp = RelyingParty {
        id: get_s("rp_id")?,
        origin: get_s("origin")?,
    };
    pk::verify_assertion(&rp, &challenge, &public_key, &a).map_err(|e| e.0)?;
    let evidence = pk::evidence_sha256(&a, &public_key);
    if evidence != get_s("evidence_sha256")? {
        return Err("evidence_sha256: differs from the stored bytes".into());
    }
    match r.try_get::<_, Option<String>>("audited_sha256") {
        Ok(Some(h)) if h == evidence => Ok(()),
        Ok(Some(_)) => Err("evidence_sha256: differs from the approval's audit event".into()),
        _ => Err("audit event: the approval's event records no passkey evidence".into()),
    }
}
