//! Approvers' passkeys, their single-use challenges, and the assertion stored with an approval
//! that needed one (tables of V15; rules in [`actiond_core::passkey`]).
//!
//! - A challenge is a 32-byte nonce (64 hex) the web app draws and stores here with who asked
//!   for it, what for and until when (database clock); it is consumed by one
//!   `DELETE … RETURNING`, so a replayed registration or assertion finds nothing.
//! - [`register`] verifies a registration against its consumed challenge — a sign-in at the
//!   identity provider within [`pk::REGISTER_SIGN_IN_WITHIN_SECS`] (database clock), a key
//!   and flags an authenticator can have made, and, when the person already has a passkey for
//!   the tenant, an assertion by it — and stores the credential with a `passkey.registered`
//!   audit event and a notice (`passkey_notices`), in one transaction; a refusal is a
//!   `passkey.registration_refused` event naming the rule.
//! - [`user_handle`] is the WebAuthn user handle of a (tenant, person): random, one per tenant.
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

/// A registration to finish ([`register`]).
#[derive(Debug, Clone, Copy)]
pub struct Registration<'a> {
    /// Tenant the passkey approves for.
    pub tenant: &'a str,
    /// Who registers.
    pub person: Person<'a>,
    /// The person's email from the session (where the registration notice goes), if known.
    pub email: Option<&'a str>,
    /// The session's ID-token `auth_time` (when the IdP last authenticated the person).
    pub auth_time: Option<chrono::DateTime<chrono::Utc>>,
    /// The relying party.
    pub rp: &'a RelyingParty,
    /// The registration challenge's nonce (64 hex).
    pub nonce: &'a str,
    /// `clientDataJSON` of `navigator.credentials.create`.
    pub client_data_json: &'a [u8],
    /// `attestationObject` of `navigator.credentials.create`.
    pub attestation_object: &'a [u8],
    /// Label given by the person (at most 100 characters).
    pub label: &'a str,
    /// An assertion by one of the person's passkeys for the tenant over
    /// [`pk::vouch_challenge`]; required when they have one.
    pub vouch: Option<&'a Assertion>,
    /// The tenant's attestation policy when it requires attestation
    /// (`approvers.passkey_attestation: required`), with the operator's roots.
    pub attestation: Option<&'a actiond_core::passkey_attestation::AttestationPolicy>,
}

/// Finishes a registration, in one transaction: consumes the challenge `nonce`; requires a
/// sign-in at the identity provider at most [`pk::REGISTER_SIGN_IN_WITHIN_SECS`] ago and not
/// more than [`pk::AUTH_TIME_SKEW_SECS`] ahead (database clock); verifies the attestation
/// object ([`pk::verify_registration`]: flags, key shape); when the person already has a
/// passkey for the tenant, requires `vouch` to be a valid assertion by one of them (counter
/// and BE checked, counter advanced); then stores the passkey, a `passkey.registered` event and
/// a notice for the person and the tenant's channels. `Ok(Err)` is a refusal: only the
/// challenge's use and a `passkey.registration_refused` event are stored.
pub async fn register(
    db: &Db,
    r: &Registration<'_>,
) -> Result<std::result::Result<Registered, PasskeyError>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, r.tenant).await?;
    let checked = match checked_registration(&tx, r).await? {
        Ok(reg) => store_registration(&tx, r, &reg).await?.map(|()| reg),
        Err(e) => Err(e),
    };
    if let Err(e) = &checked {
        let actor = format!("approver:{}", r.person.subject);
        audit::write(
            &tx,
            &audit::Event::new(
                r.tenant,
                None,
                AuditKind::PasskeyRegistrationRefused,
                &actor,
                json!({"issuer": r.person.issuer, "subject": r.person.subject, "reason": e.0}),
            ),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(checked)
}

/// The checks of [`register`] before anything is stored (the challenge is consumed).
async fn checked_registration(
    tx: &crate::Tx<'_>,
    r: &Registration<'_>,
) -> Result<std::result::Result<Registered, PasskeyError>> {
    if let Err(e) = consume(tx, r.nonce, r.person, None).await? {
        return Ok(Err(e));
    }
    if let Err(e) = fresh_sign_in(tx, r.auth_time).await? {
        return Ok(Err(e));
    }
    // A registration's challenge is the nonce's 32 bytes.
    let challenge = hex::decode(r.nonce).unwrap_or_default();
    let reg =
        match pk::verify_registration(r.rp, &challenge, r.client_data_json, r.attestation_object) {
            Ok(reg) => reg,
            Err(e) => return Ok(Err(e)),
        };
    if let Some(policy) = r.attestation {
        // The attestation certificates' validity is judged by the database clock, like every
        // other time of the registration (not the web host's clock).
        let now: i64 = tx
            .query_one("SELECT extract(epoch FROM now())::int8", &[])
            .await?
            .get(0);
        let now = u64::try_from(now).unwrap_or(0);
        if let Err(e) = actiond_core::passkey_attestation::check_attestation(
            policy,
            r.client_data_json,
            r.attestation_object,
            &reg.aaguid,
            now,
        ) {
            return Ok(Err(e));
        }
    }
    Ok(Ok(reg))
}

/// Whether a session's `auth_time` is recent enough to register a passkey (see
/// [`register`], which checks it again); `Ok(Err)` names why not.
pub async fn sign_in_fresh(
    db: &Db,
    auth_time: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<std::result::Result<(), PasskeyError>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let out = fresh_sign_in(&tx, auth_time).await?;
    tx.commit().await?;
    Ok(out)
}

/// Whether `auth_time` is within [`pk::REGISTER_SIGN_IN_WITHIN_SECS`] before the database
/// clock and at most [`pk::AUTH_TIME_SKEW_SECS`] after it (the window of every time taken
/// from outside, [`actiond_core::external_time::TimeBound`]).
async fn fresh_sign_in(
    tx: &crate::Tx<'_>,
    auth_time: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<std::result::Result<(), PasskeyError>> {
    use actiond_core::external_time::{TimeBound, TimeRefused};
    let within = pk::REGISTER_SIGN_IN_WITHIN_SECS;
    let bound = TimeBound::new("auth_time", std::time::Duration::from_secs(within));
    let row = tx
        .query_one(
            "SELECT extract(epoch FROM now() - $1::timestamptz)::float8 AS age",
            &[&auth_time],
        )
        .await?;
    let age: Option<f64> = row.try_get("age")?;
    let stale = || {
        PasskeyError(format!(
            "auth_time: registering a passkey needs a sign-in at the identity provider within the last {within} s; sign in again, then register"
        ))
    };
    let Some(age) = age else {
        return Ok(Err(stale()));
    };
    Ok(match bound.check_age(age) {
        Ok(()) => Ok(()),
        Err(TimeRefused::Ahead {
            ahead_secs,
            skew_secs,
            ..
        }) => Err(PasskeyError(format!(
            "auth_time: the sign-in is dated {ahead_secs} s in the future (more than the {skew_secs} s skew allowed); sign in again"
        ))),
        Err(_) => Err(stale()),
    })
}

/// A passkey of the person in the tenant, for the vouching check.
struct Existing {
    credential_id: Vec<u8>,
    public_key: Vec<u8>,
    sign_count: i64,
    backup_eligible: bool,
}

/// Requires `vouch` when the person already has passkeys for the tenant; stores the passkey,
/// its event and its notice. `Ok(Err)` is a refusal (the caller records it).
async fn store_registration(
    tx: &crate::Tx<'_>,
    r: &Registration<'_>,
    reg: &Registered,
) -> Result<std::result::Result<(), PasskeyError>> {
    let vouched_by = match vouched(tx, r).await? {
        Ok(v) => v,
        Err(e) => return Ok(Err(e)),
    };
    let n = tx
        .execute(
            "INSERT INTO passkeys (tenant_id, credential_id, issuer, subject, public_key, alg, sign_count, rp_id, label,
                                   backup_eligible, aaguid, attestation_fmt, vouched_by)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT DO NOTHING",
            &[&r.tenant, &reg.credential_id, &r.person.issuer, &r.person.subject, &reg.public_key,
              &(reg.alg as i32), &i64::from(reg.sign_count), &r.rp.id, &r.label,
              &reg.backup_eligible, &reg.aaguid.as_slice(), &reg.fmt.chars().take(32).collect::<String>(), &vouched_by],
        )
        .await?;
    if n == 0 {
        return Ok(Err(PasskeyError(
            "credential_id: this passkey is already registered".into(),
        )));
    }
    let notice = json!({"label": r.label, "alg": reg.alg, "backup_eligible": reg.backup_eligible,
                        "aaguid": hex::encode(reg.aaguid), "vouched_by": vouched_by.as_deref().map(pk::b64url)});
    tx.execute(
        "INSERT INTO passkey_notices (tenant_id, credential_id, issuer, subject, email, detail)
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            &r.tenant,
            &reg.credential_id,
            &r.person.issuer,
            &r.person.subject,
            &r.email,
            &notice,
        ],
    )
    .await?;
    let actor = format!("approver:{}", r.person.subject);
    audit::write(
        tx,
        &audit::Event::new(
            r.tenant,
            None,
            AuditKind::PasskeyRegistered,
            &actor,
            json!({"issuer": r.person.issuer, "subject": r.person.subject,
                   "credential_id": pk::b64url(&reg.credential_id), "alg": reg.alg, "rp_id": r.rp.id,
                   "backup_eligible": reg.backup_eligible, "aaguid": hex::encode(reg.aaguid),
                   "attestation_fmt": reg.fmt, "auth_time": r.auth_time,
                   "vouched_by": vouched_by.as_deref().map(pk::b64url)}),
        ),
    )
    .await?;
    Ok(Ok(()))
}

/// When the person has passkeys for the tenant: `vouch` must be an assertion by one of them
/// over [`pk::vouch_challenge`] of this registration's nonce; returns its credential id (and
/// advances its counter). `None` for a first passkey.
async fn vouched(
    tx: &crate::Tx<'_>,
    r: &Registration<'_>,
) -> Result<std::result::Result<Option<Vec<u8>>, PasskeyError>> {
    let rows = tx
        .query(
            "SELECT credential_id, public_key, sign_count, backup_eligible FROM passkeys
             WHERE tenant_id = $1 AND issuer = $2 AND subject = $3 FOR UPDATE",
            &[&r.tenant, &r.person.issuer, &r.person.subject],
        )
        .await?;
    if rows.is_empty() {
        return Ok(Ok(None));
    }
    let existing = rows
        .iter()
        .map(|row| {
            Ok(Existing {
                credential_id: row.try_get("credential_id")?,
                public_key: row.try_get("public_key")?,
                sign_count: row.try_get("sign_count")?,
                backup_eligible: row.try_get("backup_eligible")?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let fail = |m: &str| Ok(Err(PasskeyError(m.to_owned())));
    let Some(a) = r.vouch else {
        return fail(
            "vouch: you already have a passkey for this tenant; a new one is registered only with an assertion by it",
        );
    };
    let Some(k) = existing.iter().find(|k| k.credential_id == a.credential_id) else {
        return fail("vouch.credential_id: not one of your passkeys for this tenant");
    };
    let challenge = pk::vouch_challenge(r.tenant, r.nonce);
    let got = match pk::verify_assertion(r.rp, &challenge, &k.public_key, a) {
        Ok(got) => got,
        Err(e) => return Ok(Err(PasskeyError(format!("vouch: {e}")))),
    };
    if let Err(e) = pk::backup_eligibility_unchanged(k.backup_eligible, &got) {
        return Ok(Err(PasskeyError(format!("vouch: {e}"))));
    }
    if !pk::counter_ok(
        u32::try_from(k.sign_count).unwrap_or(u32::MAX),
        got.sign_count,
    ) {
        return Ok(Err(PasskeyError(format!(
            "vouch: authenticator_data: signature counter {} is not above {} (a cloned or replayed authenticator)",
            got.sign_count, k.sign_count
        ))));
    }
    tx.execute(
        "UPDATE passkeys SET sign_count = $3, last_used_at = now() WHERE tenant_id = $1 AND credential_id = $2",
        &[&r.tenant, &k.credential_id, &i64::from(got.sign_count)],
    )
    .await?;
    Ok(Ok(Some(k.credential_id.clone())))
}

/// The WebAuthn user handle of `person` in `tenant`: 32 random bytes drawn on first use and
/// kept, so each (tenant, person) has its own and a synced passkey of one tenant never
/// replaces another tenant's on the same authenticator (same RP ID and user handle would).
pub async fn user_handle(db: &Db, tenant: &str, person: Person<'_>) -> Result<Vec<u8>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let fresh: [u8; 32] = rand::random();
    tx.execute(
        "INSERT INTO passkey_user_handles (tenant_id, issuer, subject, user_handle)
         VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, issuer, subject) DO NOTHING",
        &[&tenant, &person.issuer, &person.subject, &fresh.as_slice()],
    )
    .await?;
    let row = tx
        .query_one(
            "SELECT user_handle FROM passkey_user_handles WHERE tenant_id = $1 AND issuer = $2 AND subject = $3",
            &[&tenant, &person.issuer, &person.subject],
        )
        .await?;
    tx.commit().await?;
    Ok(row.try_get("user_handle")?)
}

/// A new passkey to tell its owner and the tenant's admins about ([`claim_notices`]).
#[derive(Debug, Clone)]
pub struct Notice {
    /// Tenant.
    pub tenant_id: String,
    /// Credential id.
    pub credential_id: Vec<u8>,
    /// Owner's issuer.
    pub issuer: String,
    /// Owner's subject.
    pub subject: String,
    /// Owner's email at registration.
    pub email: Option<String>,
    /// `{label, alg, backup_eligible, aaguid, vouched_by}`.
    pub detail: serde_json::Value,
    /// When the passkey was registered.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Claims due registration notices across tenants (new ones, failed ones whose backoff is
/// over, sends stuck for five minutes; at most five attempts), oldest first, at most 20;
/// `FOR UPDATE SKIP LOCKED`, so replicas never claim the same notice at once.
pub async fn claim_notices(db: &Db) -> Result<Vec<Notice>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    crate::set_all_tenants(&tx).await?;
    let rows = tx
        .query(
            "UPDATE passkey_notices SET status = 'sending', attempts = attempts + 1, updated_at = now()
             WHERE (tenant_id, credential_id) IN (
               SELECT tenant_id, credential_id FROM passkey_notices
               WHERE attempts < 5 AND (status = 'pending'
                  OR (status = 'failed' AND next_attempt_at <= now())
                  OR (status = 'sending' AND updated_at < now() - interval '5 minutes'))
               ORDER BY next_attempt_at LIMIT 20 FOR UPDATE SKIP LOCKED)
             RETURNING tenant_id, credential_id, issuer, subject, email, detail, created_at",
            &[],
        )
        .await?;
    tx.commit().await?;
    rows.iter()
        .map(|r| {
            Ok(Notice {
                tenant_id: r.try_get("tenant_id")?,
                credential_id: r.try_get("credential_id")?,
                issuer: r.try_get("issuer")?,
                subject: r.try_get("subject")?,
                email: r.try_get("email")?,
                detail: r.try_get("detail")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

/// Records a notice's send: `Ok(channels)` sent on those channels (`skipped` when none), or
/// `Err(error)` failed (first 500 characters), next attempt 30 s × 2^attempts from now.
pub async fn mark_notice(
    db: &Db,
    n: &Notice,
    outcome: std::result::Result<&[String], &str>,
) -> Result<()> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, &n.tenant_id).await?;
    match outcome {
        Ok(channels) => {
            let status = if channels.is_empty() {
                "skipped"
            } else {
                "sent"
            };
            tx.execute(
                "UPDATE passkey_notices SET status = $3, channels = $4, last_error = NULL, updated_at = now()
                 WHERE tenant_id = $1 AND credential_id = $2",
                &[&n.tenant_id, &n.credential_id, &status, &channels],
            )
            .await?;
        }
        Err(error) => {
            let error: String = error.chars().take(500).collect();
            tx.execute(
                "UPDATE passkey_notices SET status = 'failed', last_error = $3, updated_at = now(),
                    next_attempt_at = now() + make_interval(secs => 30 * power(2, attempts))
                 WHERE tenant_id = $1 AND credential_id = $2",
                &[&n.tenant_id, &n.credential_id, &error],
            )
            .await?;
        }
    }
    tx.commit().await?;
    Ok(())
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
    /// When the signing passkey was registered (its age at signing is on the decision page).
    key_registered_at: chrono::DateTime<chrono::Utc>,
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
            "key_registered_at": self.key_registered_at,
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
            "SELECT public_key, sign_count, backup_eligible, created_at FROM passkeys
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
    let got = match pk::verify_assertion(&s.rp, &challenge, &public_key, &s.assertion) {
        Ok(got) => got,
        Err(e) => return Ok(Err(e)),
    };
    if let Err(e) = pk::backup_eligibility_unchanged(row.try_get("backup_eligible")?, &got) {
        return Ok(Err(e));
    }
    let count = got.sign_count;
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
        key_registered_at: row.try_get("created_at")?,
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
///
/// Which audit event is "the approval's": the `approval.recorded` or `approval.decided` event
/// (the two kinds written with a stored assertion, in its transaction) of the same proposal
/// and person (issuer and subject) **and the same approval round**. With `on_stale:
/// reapprove` (V45) a person approves a proposal once per round, so taking that person's first
/// event compared a round-1 assertion with the round-0 event and reported tampering where
/// there was none — and would have accepted a round-1 row replaced by the round-0 one. Events
/// written since record their round (`detail.approval_round`) and are matched by it. Older
/// events record none; for them the k-th such event of that person on that proposal (by event
/// id) belongs to the k-th of that person's stored assertions on it (by round). That pairing
/// holds for every row written before the change: each assertion was stored with exactly one
/// such event carrying its evidence, in one transaction, and a later round's decision commits
/// only after the earlier round's did (the run that sent it back to the approvers comes in
/// between), so ids and rounds run in the same order. An old round's untagged event is never
/// taken for a newer round that has a tagged one.
pub async fn verify_all(db: &Db) -> Result<(usize, Vec<Finding>)> {
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT ap.*, p.intent_hash AS proposal_intent,
                    coalesce(
                      (SELECT e.detail->'passkey'->>'evidence_sha256' FROM audit_events e
                        WHERE e.proposal_id = ap.proposal_id AND e.kind IN ('approval.recorded', 'approval.decided')
                          AND e.detail->'approver'->>'issuer' = ap.issuer AND e.detail->'approver'->>'subject' = ap.subject
                          AND e.detail->'approval_round' = to_jsonb(ap.round)
                          AND e.detail->'passkey'->>'evidence_sha256' IS NOT NULL
                        ORDER BY e.id LIMIT 1),
                      (SELECT u.sha FROM (
                         SELECT e.detail->'passkey'->>'evidence_sha256' AS sha, row_number() OVER (ORDER BY e.id) AS k
                         FROM audit_events e
                         WHERE e.proposal_id = ap.proposal_id AND e.kind IN ('approval.recorded', 'approval.decided')
                           AND e.detail->'approver'->>'issuer' = ap.issuer AND e.detail->'approver'->>'subject' = ap.subject
                           AND NOT e.detail ? 'approval_round'
                           AND e.detail->'passkey'->>'evidence_sha256' IS NOT NULL) u
                       WHERE u.k = (SELECT count(*) FROM approval_passkeys o
                                    WHERE o.proposal_id = ap.proposal_id AND o.issuer = ap.issuer
                                      AND o.subject = ap.subject AND o.round <= ap.round))
                    ) AS audited_sha256
             FROM approval_passkeys ap LEFT JOIN proposals p ON p.id = ap.proposal_id
             ORDER BY ap.created_at, ap.proposal_id, ap.round",
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
