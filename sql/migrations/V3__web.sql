-- actiond-web: OIDC login state, approver sessions and escalation notifications.
-- Secrets are never stored in clear: login states and sessions are keyed by the SHA-256 of the
-- random value the browser holds, so a database reader cannot replay a callback or ride a
-- session. All times come from the database clock.

-- One row per login started (authorization code + PKCE + state + nonce). Consumed by a single
-- DELETE … RETURNING at the callback, so a state is single-use and a replayed callback finds
-- nothing. `binding_sha256` ties the state to the browser that started the login (cookie).
CREATE TABLE web_login_states (
    state_sha256    text PRIMARY KEY CHECK (state_sha256 ~ '^[0-9a-f]{64}$'),
    binding_sha256  text NOT NULL CHECK (binding_sha256 ~ '^[0-9a-f]{64}$'),
    nonce           text NOT NULL,
    pkce_verifier   text NOT NULL,
    return_to       text NOT NULL CHECK (return_to LIKE '/%' AND return_to NOT LIKE '//%'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);
CREATE INDEX web_login_states_expires ON web_login_states (expires_at);

-- Approver sessions: identity is (issuer, subject), never email. `claims` keeps the ID-token
-- claims used for tenant authorization, re-evaluated against the current tenant documents on
-- every request. Idle and absolute timeouts are enforced in the lookup statement.
CREATE TABLE web_sessions (
    id_sha256       text PRIMARY KEY CHECK (id_sha256 ~ '^[0-9a-f]{64}$'),
    issuer          text NOT NULL,
    subject         text NOT NULL,
    email           text,
    display_name    text,
    claims          jsonb NOT NULL DEFAULT '{}'::jsonb,
    csrf_token      text NOT NULL,
    dev_login       boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);
CREATE INDEX web_sessions_subject ON web_sessions (issuer, subject);

-- Escalation notices: one row per escalated proposal, inserted by the replica that claims it
-- (INSERT … ON CONFLICT DO NOTHING), so every escalation is announced once across replicas.
CREATE TABLE web_notifications (
    proposal_id      uuid PRIMARY KEY,
    tenant_id        text NOT NULL,
    status           text NOT NULL DEFAULT 'sending' CHECK (status IN ('sending', 'sent', 'failed', 'skipped')),
    attempts         integer NOT NULL DEFAULT 1,
    channels         text[] NOT NULL DEFAULT '{}',
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals(tenant_id, id)
);
CREATE INDEX web_notifications_retry ON web_notifications (next_attempt_at) WHERE status IN ('failed', 'sending');
