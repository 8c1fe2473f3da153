-- actiond core schema: tenants, versioned tenant documents, agents, proposals, grants,
-- approvals and the append-only audit log. Every row carries tenant_id.
-- Forward-only: never edit an applied migration, add a new one.

CREATE TABLE tenants (
    id          text PRIMARY KEY CHECK (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Immutable, versioned tenant documents (`actiond tenant apply`). The source YAML is what was
-- applied; `document` is the same content as JSON for inspection.
CREATE TABLE tenant_documents (
    tenant_id   text NOT NULL REFERENCES tenants(id),
    version     integer NOT NULL CHECK (version > 0),
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    source      text NOT NULL,
    document    jsonb NOT NULL,
    applied_by  text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, version)
);

CREATE TABLE agents (
    id             uuid PRIMARY KEY,
    tenant_id      text NOT NULL REFERENCES tenants(id),
    name           text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    owner_subject  text,
    token_sha256   text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz,
    revoked_at     timestamptz,
    UNIQUE (tenant_id, name),
    UNIQUE (tenant_id, id)
);

CREATE TABLE proposals (
    id               uuid PRIMARY KEY,
    tenant_id        text NOT NULL REFERENCES tenants(id),
    agent_id         uuid NOT NULL,
    action           text NOT NULL CHECK (length(action) <= 128),
    target           text NOT NULL,
    params_json      text NOT NULL,          -- RFC 8785 canonical form, computed once at submission
    params_sha256    text NOT NULL CHECK (params_sha256 ~ '^[0-9a-f]{64}$'),
    intent_hash      text NOT NULL CHECK (intent_hash ~ '^[0-9a-f]{64}$'),
    agent_reason     text,                   -- agent-written: untrusted
    source_text      text,                   -- agent-written: the text that led to it
    session_id       text,
    idempotency_key  text,
    request_sha256   text NOT NULL,
    state            text NOT NULL DEFAULT 'pending' CHECK (state IN
                       ('pending','escalated','approved','blocked','denied','expired',
                        'executing','succeeded','failed','outcome_unknown')),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- decision (policy worker)
    effect           text CHECK (effect IN ('allow','escalate','block')),
    rule_name        text,
    decision_reason  text,                   -- tenant-written rule reason or approver comment
    doc_version      integer,
    doc_sha256       text,
    decided_at       timestamptz,
    -- execution (executor)
    lease_owner      text,
    lease_until      timestamptz,
    outcome          text CHECK (outcome IN ('succeeded','failed','outcome_unknown')),
    outcome_detail   text,                   -- internal; never shown to agents
    finished_at      timestamptz,
    FOREIGN KEY (tenant_id, agent_id) REFERENCES agents(tenant_id, id),
    UNIQUE (tenant_id, id)
);

-- Idempotency-Key is unique per (tenant, agent, key).
CREATE UNIQUE INDEX proposals_idempotency ON proposals (tenant_id, agent_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
-- The same agent proposing the same intent while an earlier one is open gets the open one back.
CREATE UNIQUE INDEX proposals_open_intent ON proposals (tenant_id, agent_id, intent_hash)
    WHERE state IN ('pending','escalated','approved','executing');
-- Claim queues and "age of the oldest row" read partial indexes over live states only, so their
-- cost does not grow with history.
CREATE INDEX proposals_pending ON proposals (created_at) WHERE state = 'pending';
CREATE INDEX proposals_escalated ON proposals (tenant_id, created_at) WHERE state = 'escalated';
CREATE INDEX proposals_approved ON proposals (updated_at) WHERE state = 'approved';
CREATE INDEX proposals_executing ON proposals (lease_until) WHERE state = 'executing';
-- Rules' history: the same agent's same action over a window.
CREATE INDEX proposals_history ON proposals (tenant_id, agent_id, action, created_at);
CREATE INDEX proposals_agent_created ON proposals (tenant_id, agent_id, created_at DESC);

-- Dead rows at the head of the queue indexes are the enemy: vacuum the queue table eagerly.
ALTER TABLE proposals SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                           autovacuum_analyze_scale_factor = 0.02, fillfactor = 80);

-- One grant per proposal. expires_at_us is the signed value (microseconds since the epoch);
-- expires_at is the same instant as timestamptz for the spend's comparison with now().
CREATE TABLE grants (
    id             uuid PRIMARY KEY,
    proposal_id    uuid NOT NULL UNIQUE,
    tenant_id      text NOT NULL,
    intent_hash    text NOT NULL CHECK (intent_hash ~ '^[0-9a-f]{64}$'),
    doc_version    integer NOT NULL,
    expires_at_us  bigint NOT NULL,
    expires_at     timestamptz NOT NULL,
    key_id         text NOT NULL,
    sig            bytea NOT NULL,
    issued_by      text NOT NULL,            -- 'policy' or the approver subject(s)
    created_at     timestamptz NOT NULL DEFAULT now(),
    used_at        timestamptz,
    used_by        text,
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals(tenant_id, id)
);
ALTER TABLE grants SET (autovacuum_vacuum_scale_factor = 0.02);

-- Decisions by people (web, break-glass CLI): one row per person per proposal, so
-- approvals_required: N means N distinct (issuer, subject).
CREATE TABLE approvals (
    proposal_id     uuid NOT NULL,
    tenant_id       text NOT NULL,
    issuer          text NOT NULL,
    subject         text NOT NULL,
    email           text,
    decision        text NOT NULL CHECK (decision IN ('approve','deny')),
    comment         text,
    intent_hash     text NOT NULL,
    doc_version     integer NOT NULL,
    channel         text NOT NULL CHECK (channel IN ('web','breakglass')),
    decided_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (proposal_id, issuer, subject),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals(tenant_id, id)
);

-- Append-only audit log: every state change writes one in the same transaction. It stores
-- hashes of params, never params.
CREATE TABLE audit_events (
    id            bigserial PRIMARY KEY,
    tenant_id     text NOT NULL,
    proposal_id   uuid,
    at            timestamptz NOT NULL DEFAULT now(),
    kind          text NOT NULL,
    actor         text NOT NULL,
    from_state    text,
    to_state      text,
    intent_hash   text,
    params_sha256 text,
    detail        jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_events_proposal ON audit_events (proposal_id, id);
CREATE INDEX audit_events_tenant_at ON audit_events (tenant_id, at);

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_events_no_update BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

-- Legal state transitions, enforced whatever the caller (DESIGN.md, "Proposal states").
CREATE FUNCTION proposals_check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'pending' THEN
            RAISE EXCEPTION 'a proposal starts as pending, not %', NEW.state USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT ((OLD.state = 'pending'   AND NEW.state IN ('approved','escalated','blocked','expired'))
             OR (OLD.state = 'escalated' AND NEW.state IN ('approved','denied','expired'))
             OR (OLD.state = 'approved'  AND NEW.state IN ('executing','blocked','expired'))
             OR (OLD.state = 'executing' AND NEW.state IN ('succeeded','failed','outcome_unknown'))) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        NEW.updated_at := now();
    END IF;
    -- What was decided on never changes after submission.
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
       OR NEW.action IS DISTINCT FROM OLD.action OR NEW.target IS DISTINCT FROM OLD.target
       OR NEW.intent_hash IS DISTINCT FROM OLD.intent_hash OR NEW.params_json IS DISTINCT FROM OLD.params_json THEN
        RAISE EXCEPTION 'proposal identity columns are immutable' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER proposals_transition BEFORE INSERT OR UPDATE ON proposals
    FOR EACH ROW EXECUTE FUNCTION proposals_check_transition();
