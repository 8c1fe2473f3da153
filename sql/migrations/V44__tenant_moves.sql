-- V44: a tenant moves to another cell (`actiond tenant export` / `actiond tenant import`).
--
-- - tenant_moves: one row per tenant frozen on this cluster because it moved (or is moving) to
--   another cell. From the moment the row commits, nothing of the tenant moves forward here:
--   the api refuses its submissions, policy and the executor skip its queue rows, the web app
--   refuses decisions, and `proposals_check_update()` refuses every transition out of
--   `pending`, `escalated` and `approved` for every role (an approved grant is never spent on
--   the source once the tenant is frozen). Transitions out of `executing` stay allowed, so a
--   handler that was running when the freeze came records its outcome; the export waits for
--   it. Every service role reads the table; only the owner writes it.
-- - audit_moved_events: the sealed audit events of a tenant imported from another cell, with
--   the chain hash and seal number each had there. Event ids come from the source cluster's
--   sequence, so they may repeat another tenant's ids here: the key is (tenant_id, id), and
--   the sealer, which reads audit_events and audit_event_hashes only, never sees them. The
--   tenant's seals are imported into audit_seals as they were signed; its next seal here
--   continues the imported chain. Append-only like audit_events (same trigger function).

CREATE TABLE tenant_moves (
    tenant_id text PRIMARY KEY REFERENCES tenants (id),
    moved_to text NOT NULL CHECK (moved_to ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$'),
    moved_by text NOT NULL CHECK (length(moved_by) BETWEEN 1 AND 300),
    moved_at timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT ON tenant_moves TO actiond_api, actiond_policy, actiond_web, actiond_executor, actiond_admin,
    actiond_retention, actiond_auditor;

CREATE TABLE audit_moved_events (
    id bigint NOT NULL,
    tenant_id text NOT NULL,
    proposal_id uuid,
    at timestamptz NOT NULL,
    kind text NOT NULL,
    actor text NOT NULL,
    from_state text,
    to_state text,
    intent_hash text,
    params_sha256 text,
    detail jsonb NOT NULL,
    seal_seq bigint NOT NULL CHECK (seal_seq > 0),
    chain_hash text NOT NULL CHECK (chain_hash ~ '^[0-9a-f]{64}$'),
    PRIMARY KEY (tenant_id, id)
);
ALTER TABLE audit_moved_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_moved_events FORCE ROW LEVEL SECURITY;
GRANT SELECT ON audit_moved_events TO actiond_auditor;
CREATE POLICY auditor_read ON audit_moved_events FOR SELECT TO actiond_auditor USING (true);
