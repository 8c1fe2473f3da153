-- Passkey-signed approvals: approvers' WebAuthn credentials, the single-use challenges the web
-- app hands out, and the assertion stored with each approval that needed one.
-- Row-level security and per-role grants like the other web tables (V3, V4): the web role sees
-- only the tenants set for the current transaction.

-- One row per (tenant, credential): an approver registers a passkey for a tenant they approve
-- for, bound to their OIDC identity (issuer, subject). `public_key` is the COSE_Key from the
-- authenticator; `sign_count` the last signature counter seen (0 when the authenticator keeps
-- none).
CREATE TABLE passkeys (
    tenant_id      text NOT NULL REFERENCES tenants (id),
    credential_id  bytea NOT NULL CHECK (octet_length(credential_id) BETWEEN 1 AND 1023),
    issuer         text NOT NULL,
    subject        text NOT NULL,
    public_key     bytea NOT NULL CHECK (octet_length(public_key) BETWEEN 1 AND 2048),
    alg            integer NOT NULL CHECK (alg IN (-7, -8, -257)),
    sign_count     bigint NOT NULL DEFAULT 0 CHECK (sign_count >= 0),
    rp_id          text NOT NULL,
    label          text NOT NULL DEFAULT '' CHECK (length(label) <= 100),
    created_at     timestamptz NOT NULL DEFAULT now(),
    last_used_at   timestamptz,
    PRIMARY KEY (tenant_id, credential_id)
);
CREATE INDEX passkeys_person ON passkeys (tenant_id, issuer, subject);

-- Challenges handed out, consumed by one DELETE … RETURNING: a replayed registration or
-- assertion finds nothing. `purpose` register: a new passkey; approve: the Approve of one
-- proposal, whose intent hash and document version the challenge is derived from.
CREATE TABLE passkey_challenges (
    nonce          text PRIMARY KEY CHECK (nonce ~ '^[0-9a-f]{64}$'),
    tenant_id      text NOT NULL REFERENCES tenants (id),
    issuer         text NOT NULL,
    subject        text NOT NULL,
    purpose        text NOT NULL CHECK (purpose IN ('register', 'approve')),
    proposal_id    uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    CHECK ((purpose = 'approve') = (proposal_id IS NOT NULL))
);
CREATE INDEX passkey_challenges_expires ON passkey_challenges (expires_at);

-- The assertion of an approval that needed a passkey, beside its approvals row: everything
-- an offline verifier needs (`actiond audit verify-passkeys`) — the nonce, the public key as
-- registered, authenticator data, client data JSON and signature. Written once: no role may
-- change or delete a row (the trigger refuses even the owner).
CREATE TABLE approval_passkeys (
    proposal_id         uuid NOT NULL,
    tenant_id           text NOT NULL,
    issuer              text NOT NULL,
    subject             text NOT NULL,
    credential_id       bytea NOT NULL,
    public_key          bytea NOT NULL,
    nonce               text NOT NULL UNIQUE CHECK (nonce ~ '^[0-9a-f]{64}$'),
    intent_hash         text NOT NULL,
    doc_version         integer NOT NULL,
    rp_id               text NOT NULL,
    origin              text NOT NULL,
    authenticator_data  bytea NOT NULL,
    client_data_json    bytea NOT NULL,
    signature           bytea NOT NULL,
    sign_count          bigint NOT NULL,
    evidence_sha256     text NOT NULL CHECK (evidence_sha256 ~ '^[0-9a-f]{64}$'),
    created_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (proposal_id, issuer, subject),
    FOREIGN KEY (proposal_id, issuer, subject) REFERENCES approvals (proposal_id, issuer, subject)
);

CREATE FUNCTION approval_passkeys_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'approval_passkeys is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER approval_passkeys_no_update BEFORE UPDATE OR DELETE ON approval_passkeys
    FOR EACH ROW EXECUTE FUNCTION approval_passkeys_append_only();
CREATE TRIGGER approval_passkeys_no_truncate BEFORE TRUNCATE ON approval_passkeys
    FOR EACH STATEMENT EXECUTE FUNCTION approval_passkeys_append_only();

-- web: registers passkeys and advances their counters; hands out and consumes challenges;
-- stores assertions with approvals.
GRANT SELECT, INSERT, DELETE ON passkeys TO actiond_web;
GRANT UPDATE (sign_count, last_used_at) ON passkeys TO actiond_web;
GRANT SELECT, INSERT, DELETE ON passkey_challenges TO actiond_web;
GRANT SELECT, INSERT ON approval_passkeys TO actiond_web;
-- The operator CLI shows whether an approval was passkey-signed; the auditor re-verifies.
GRANT SELECT ON passkeys, approval_passkeys TO actiond_admin;
GRANT SELECT ON approval_passkeys TO actiond_auditor;
GRANT SELECT (id, tenant_id, intent_hash) ON proposals TO actiond_auditor;

ALTER TABLE passkeys ENABLE ROW LEVEL SECURITY;
ALTER TABLE passkeys FORCE ROW LEVEL SECURITY;
ALTER TABLE passkey_challenges ENABLE ROW LEVEL SECURITY;
ALTER TABLE passkey_challenges FORCE ROW LEVEL SECURITY;
ALTER TABLE approval_passkeys ENABLE ROW LEVEL SECURITY;
ALTER TABLE approval_passkeys FORCE ROW LEVEL SECURITY;

CREATE POLICY web_tenant ON passkeys FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));
CREATE POLICY web_tenant ON passkey_challenges FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));
CREATE POLICY web_tenant ON approval_passkeys FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));
CREATE POLICY workers ON passkeys FOR SELECT TO actiond_admin USING (true);
CREATE POLICY workers ON approval_passkeys FOR SELECT TO actiond_admin, actiond_auditor USING (true);
CREATE POLICY auditor ON proposals FOR SELECT TO actiond_auditor USING (true);
