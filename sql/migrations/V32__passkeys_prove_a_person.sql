-- Passkeys prove a person, not a session (V15's tables, tightened).
--
-- 1. `passkeys` remembers what the authenticator said at registration: `backup_eligible` (the
--    BE flag, fixed for a credential's life; an assertion with another value is refused), the
--    `aaguid` (authenticator model, 16 bytes, zero when not disclosed), the attestation
--    statement's format, and which passkey of the same person vouched for the registration
--    (`vouched_by`, NULL for a person's first passkey in the tenant). The checks of the key
--    itself (alg/kty/crv agreement, on-curve, prime order, RSA size) are in
--    actiond_core::passkey and run before any row is written.
-- 2. `passkey_user_handles`: the WebAuthn user handle of each (tenant, person), 32 random
--    bytes drawn once. A handle per tenant means a synced passkey registered for one tenant never
--    replaces (same RP ID, same user handle) the one of another tenant on the same device.
-- 3. `passkey_notices`: one row per registered passkey, inserted in the registration's
--    transaction and sent by the web app's notice loop to the person (their email at
--    registration) and to the tenant's notify channels (`notify.webhook`, `notify.email`: the
--    tenant's admins), retried with backoff like `web_notifications`.

ALTER TABLE passkeys
    ADD COLUMN backup_eligible boolean NOT NULL DEFAULT false,
    ADD COLUMN aaguid bytea NOT NULL DEFAULT '\x00000000000000000000000000000000'::bytea
        CHECK (octet_length(aaguid) = 16),
    ADD COLUMN attestation_fmt text NOT NULL DEFAULT 'none' CHECK (length(attestation_fmt) <= 32),
    ADD COLUMN vouched_by bytea;

-- What a passkey says about itself never changes after registration; only its counter and
-- last use do (V15 grants the web role UPDATE of those two columns only).

CREATE TABLE passkey_user_handles (
    tenant_id    text NOT NULL REFERENCES tenants (id),
    issuer       text NOT NULL,
    subject      text NOT NULL,
    user_handle  bytea NOT NULL UNIQUE CHECK (octet_length(user_handle) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, issuer, subject)
);

CREATE TABLE passkey_notices (
    tenant_id        text NOT NULL,
    credential_id    bytea NOT NULL,
    issuer           text NOT NULL,
    subject          text NOT NULL,
    email            text,
    -- What the notice says about the passkey: label, alg, backup_eligible, aaguid, vouched_by.
    detail           jsonb NOT NULL DEFAULT '{}',
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'sending', 'sent', 'failed', 'skipped')),
    attempts         integer NOT NULL DEFAULT 0,
    channels         text[] NOT NULL DEFAULT '{}',
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, credential_id),
    FOREIGN KEY (tenant_id, credential_id) REFERENCES passkeys (tenant_id, credential_id)
);
CREATE INDEX passkey_notices_due ON passkey_notices (next_attempt_at)
    WHERE status IN ('pending', 'failed', 'sending');

GRANT SELECT, INSERT ON passkey_user_handles TO actiond_web;
GRANT SELECT, INSERT ON passkey_notices TO actiond_web;
GRANT UPDATE (status, attempts, channels, last_error, updated_at, next_attempt_at)
    ON passkey_notices TO actiond_web;
GRANT SELECT ON passkey_user_handles, passkey_notices TO actiond_admin;

ALTER TABLE passkey_user_handles ENABLE ROW LEVEL SECURITY;
ALTER TABLE passkey_user_handles FORCE ROW LEVEL SECURITY;
ALTER TABLE passkey_notices ENABLE ROW LEVEL SECURITY;
ALTER TABLE passkey_notices FORCE ROW LEVEL SECURITY;

CREATE POLICY web_tenant ON passkey_user_handles FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));
-- The notice loop claims due notices of every tenant in one statement (like web_notifications).
CREATE POLICY web_tenant ON passkey_notices FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
CREATE POLICY workers ON passkey_user_handles FOR SELECT TO actiond_admin USING (true);
CREATE POLICY workers ON passkey_notices FOR SELECT TO actiond_admin USING (true);
