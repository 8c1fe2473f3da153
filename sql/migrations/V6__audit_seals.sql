-- Sealed audit chain and retention.
--
-- Sealing: a sealer process chains each tenant's audit events in id order
-- (hash = SHA-256(prev ‖ RFC 8785 form of the event)) and signs seal rows with its own Ed25519
-- key, so even the database owner cannot edit, delete, insert or reorder events unnoticed.
-- Sequence ids are handed out before commit; to make "every id at or below N is final" decidable,
-- an event takes its transaction id *before* its sequence id (trigger below). The sealer then
-- reads the sequence, takes a snapshot, and seals up to that id only once every transaction of
-- that snapshot has ended — never past an event that may still commit, never leaving a gap.
--
-- Retention: decided proposals lose params, source text and reasons after a per-tenant age; their
-- audit events (which hold hashes only) and seals are untouched, so verification still passes.

DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['actiond_sealer', 'actiond_auditor', 'actiond_retention'] LOOP
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END LOOP;
END $$;

-- Transaction id first, then the sequence id: a transaction holding an id is always visible in
-- snapshots as running. The id default is removed so no caller can choose an id.
ALTER TABLE audit_events ALTER COLUMN id DROP DEFAULT;
CREATE FUNCTION audit_events_assign_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_current_xact_id();
    NEW.id := nextval('audit_events_id_seq');
    RETURN NEW;
END $$;
CREATE TRIGGER audit_events_assign_id BEFORE INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_assign_id();

-- One row per seal: a tenant's events first_event_id..=last_event_id. `sealed_at` is the signed
-- text; `sig` the base64 Ed25519 signature over "actiond-audit-seal-v1\n" ‖ JCS(payload).
CREATE TABLE audit_seals (
    tenant_id       text NOT NULL,
    seq             bigint NOT NULL CHECK (seq > 0),
    first_event_id  bigint NOT NULL,
    last_event_id   bigint NOT NULL CHECK (last_event_id >= first_event_id),
    event_count     bigint NOT NULL CHECK (event_count > 0),
    start_hash      text NOT NULL CHECK (start_hash ~ '^[0-9a-f]{64}$'),
    head_hash       text NOT NULL CHECK (head_hash ~ '^[0-9a-f]{64}$'),
    prev_seal_hash  text NOT NULL CHECK (prev_seal_hash ~ '^[0-9a-f]{64}$'),
    key_id          text NOT NULL,
    sealed_at       text NOT NULL,
    sig             text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, seq)
);

-- Each sealed event's chain hash, so a verifier names the exact event that differs (and a
-- deleted event leaves its record behind).
CREATE TABLE audit_event_hashes (
    event_id    bigint PRIMARY KEY,
    tenant_id   text NOT NULL,
    seal_seq    bigint NOT NULL,
    chain_hash  text NOT NULL CHECK (chain_hash ~ '^[0-9a-f]{64}$')
);
CREATE INDEX audit_event_hashes_seal ON audit_event_hashes (tenant_id, seal_seq);

CREATE TRIGGER audit_seals_no_update BEFORE UPDATE OR DELETE ON audit_seals
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_seals_no_truncate BEFORE TRUNCATE ON audit_seals
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_event_hashes_no_update BEFORE UPDATE OR DELETE ON audit_event_hashes
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_event_hashes_no_truncate BEFORE TRUNCATE ON audit_event_hashes
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

REVOKE ALL ON audit_seals, audit_event_hashes FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO actiond_sealer, actiond_auditor, actiond_retention;

-- sealer: read events, read the sequence position, insert seals. Nothing else.
GRANT SELECT ON audit_events TO actiond_sealer;
GRANT SELECT ON SEQUENCE audit_events_id_seq TO actiond_sealer;
GRANT SELECT, INSERT ON audit_seals, audit_event_hashes TO actiond_sealer;
CREATE POLICY sealer_read ON audit_events FOR SELECT TO actiond_sealer USING (true);

-- auditor: read-only (verify, export).
GRANT SELECT ON tenants, audit_events, audit_seals, audit_event_hashes TO actiond_auditor;
CREATE POLICY auditor_read ON audit_events FOR SELECT TO actiond_auditor USING (true);

-- retention: clear customer data of decided proposals, and say so in the audit log.
ALTER TABLE proposals ADD COLUMN purged_at timestamptz;
CREATE INDEX proposals_purge ON proposals (tenant_id, updated_at)
    WHERE purged_at IS NULL AND state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown');
GRANT SELECT ON tenants, tenant_documents TO actiond_retention;
GRANT SELECT (id, tenant_id, state, updated_at, purged_at) ON proposals TO actiond_retention;
GRANT UPDATE (params_json, agent_reason, source_text, decision_reason, outcome_detail, purged_at)
    ON proposals TO actiond_retention;
GRANT SELECT (proposal_id, tenant_id, comment), UPDATE (comment) ON approvals TO actiond_retention;
GRANT SELECT, INSERT ON audit_events TO actiond_retention;
GRANT USAGE ON SEQUENCE audit_events_id_seq TO actiond_retention;
-- Row-level security keeps live proposals out of its reach entirely.
CREATE POLICY retention_decided ON proposals FOR ALL TO actiond_retention
    USING (state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown'))
    WITH CHECK (state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown'));
CREATE POLICY retention_decided ON approvals FOR ALL TO actiond_retention USING (true) WITH CHECK (true);
CREATE POLICY retention_write ON audit_events FOR ALL TO actiond_retention
    USING (kind = 'retention.purged') WITH CHECK (kind = 'retention.purged');

-- Same rules as before, plus: params may be cleared once, by a purge, on a decided proposal;
-- a purge is never undone.
CREATE OR REPLACE FUNCTION proposals_check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'pending' THEN
            RAISE EXCEPTION 'a proposal starts as pending, not %', NEW.state USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT EXISTS (SELECT 1 FROM proposal_transitions t
                       WHERE t.from_state = OLD.state AND t.to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        NEW.updated_at := now();
    END IF;
    IF OLD.purged_at IS NOT NULL AND NEW.purged_at IS DISTINCT FROM OLD.purged_at THEN
        RAISE EXCEPTION 'a purge is not undone' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
       OR NEW.action IS DISTINCT FROM OLD.action OR NEW.target IS DISTINCT FROM OLD.target
       OR NEW.intent_hash IS DISTINCT FROM OLD.intent_hash
       OR (NEW.params_json IS DISTINCT FROM OLD.params_json
           AND NOT (OLD.purged_at IS NULL AND NEW.purged_at IS NOT NULL AND NEW.params_json = '{}'
                    AND NEW.state = OLD.state
                    AND OLD.state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown'))) THEN
        RAISE EXCEPTION 'proposal identity columns are immutable' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
