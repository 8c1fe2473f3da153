-- Least privilege enforced by Postgres itself (DESIGN.md, "Boundaries"): one NOLOGIN role per
-- service, column-level privileges, state transitions allowed per role, and row-level security
-- on tenant data for the api and web roles. Login users are created by the operator (or
-- `actiond dev`) and granted exactly one of these roles, e.g.
--   CREATE ROLE actiond_api_login LOGIN PASSWORD '…' IN ROLE actiond_api;
-- Roles are cluster-wide, so their creation tolerates a concurrent creator.

DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['actiond_api', 'actiond_policy', 'actiond_web', 'actiond_executor', 'actiond_admin'] LOOP
        BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END LOOP;
END $$;

-- Start from nothing on every table.
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO actiond_api, actiond_policy, actiond_web, actiond_executor, actiond_admin;
GRANT USAGE ON SEQUENCE audit_events_id_seq TO actiond_api, actiond_policy, actiond_web, actiond_executor, actiond_admin;
-- Nobody may change or remove the audit log (the trigger refuses even the owner).
GRANT SELECT, INSERT ON audit_events TO actiond_api, actiond_policy, actiond_web, actiond_executor, actiond_admin;

-- api: submit proposals (never state, decision or result columns), read its own tenant's rows.
-- No access to grants or approvals at all.
GRANT SELECT ON tenants, tenant_documents, agents TO actiond_api;
GRANT SELECT ON proposals TO actiond_api;
GRANT INSERT (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash, agent_reason,
              source_text, session_id, idempotency_key, request_sha256)
    ON proposals TO actiond_api;

-- policy: decide pending rows and issue grants.
GRANT SELECT ON tenants, tenant_documents, agents, proposals TO actiond_policy;
GRANT UPDATE (state, effect, rule_name, decision_reason, doc_version, doc_sha256, decided_at) ON proposals TO actiond_policy;
GRANT INSERT ON grants TO actiond_policy;

-- web: decide escalated rows, record approvals, issue grants; its own session tables.
GRANT SELECT ON tenants, tenant_documents, agents, proposals, approvals TO actiond_web;
GRANT UPDATE (state, decision_reason) ON proposals TO actiond_web;
GRANT INSERT ON approvals, grants TO actiond_web;
GRANT SELECT, INSERT, UPDATE, DELETE ON web_login_states, web_sessions, web_notifications TO actiond_web;

-- executor: read approved work and grants, spend grants (used_at/used_by only), record outcomes.
-- It may not INSERT grants.
GRANT SELECT ON tenants, tenant_documents, agents, proposals, grants TO actiond_executor;
GRANT UPDATE (state, decision_reason, lease_owner, lease_until, outcome, outcome_detail, finished_at) ON proposals TO actiond_executor;
GRANT UPDATE (used_at, used_by) ON grants TO actiond_executor;

-- admin: `actiond tenant|agent|approvals` (break-glass decides like web).
GRANT SELECT, INSERT ON tenants, tenant_documents TO actiond_admin;
GRANT UPDATE (created_at) ON tenants TO actiond_admin; -- SELECT … FOR UPDATE serializes appliers
GRANT SELECT, INSERT, UPDATE (revoked_at) ON agents TO actiond_admin;
GRANT SELECT ON proposals, grants, approvals TO actiond_admin;
GRANT UPDATE (state, decision_reason) ON proposals TO actiond_admin;
GRANT INSERT ON approvals, grants TO actiond_admin;

-- Which tenants the current transaction may see: `set_config('actiond.tenant_ids', 'a,b', true)`
-- (SET LOCAL semantics), so a pooled connection never carries a tenant into the next request.
-- NULLIF(…, ''): after a transaction ends the setting reads as '' (not NULL) on that connection.
CREATE FUNCTION actiond_current_tenants() RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT string_to_array(NULLIF(current_setting('actiond.tenant_ids', true), ''), ',')
$$;

ALTER TABLE proposals ENABLE ROW LEVEL SECURITY;
ALTER TABLE proposals FORCE ROW LEVEL SECURITY;
ALTER TABLE approvals ENABLE ROW LEVEL SECURITY;
ALTER TABLE approvals FORCE ROW LEVEL SECURITY;
ALTER TABLE grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE grants FORCE ROW LEVEL SECURITY;
ALTER TABLE audit_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_events FORCE ROW LEVEL SECURITY;
ALTER TABLE web_notifications ENABLE ROW LEVEL SECURITY;
ALTER TABLE web_notifications FORCE ROW LEVEL SECURITY;

-- api: exactly the tenants set for this transaction.
CREATE POLICY api_tenant ON proposals FOR ALL TO actiond_api
    USING (tenant_id = ANY (actiond_current_tenants())) WITH CHECK (tenant_id = ANY (actiond_current_tenants()));
CREATE POLICY api_tenant ON audit_events FOR ALL TO actiond_api
    USING (tenant_id = ANY (actiond_current_tenants())) WITH CHECK (tenant_id = ANY (actiond_current_tenants()));

-- web: the approver's tenants; '*' only where the code asks for every tenant explicitly
-- (the escalation notifier).
CREATE POLICY web_tenant ON proposals FOR ALL TO actiond_web
    USING (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()))
    WITH CHECK (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()));
CREATE POLICY web_tenant ON approvals FOR ALL TO actiond_web
    USING (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()))
    WITH CHECK (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()));
CREATE POLICY web_tenant ON grants FOR ALL TO actiond_web
    USING (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()))
    WITH CHECK (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()));
CREATE POLICY web_tenant ON audit_events FOR ALL TO actiond_web
    USING (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()))
    WITH CHECK (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()));
CREATE POLICY web_tenant ON web_notifications FOR ALL TO actiond_web
    USING (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()))
    WITH CHECK (tenant_id = ANY (actiond_current_tenants()) OR '*' = ANY (actiond_current_tenants()));

-- Workers serve every tenant; what they may change is limited by column privileges and the
-- transition rules below.
CREATE POLICY workers ON proposals FOR ALL TO actiond_policy, actiond_executor, actiond_admin USING (true) WITH CHECK (true);
CREATE POLICY workers ON approvals FOR ALL TO actiond_admin USING (true) WITH CHECK (true);
CREATE POLICY workers ON grants FOR ALL TO actiond_policy, actiond_executor, actiond_admin USING (true) WITH CHECK (true);
CREATE POLICY workers ON audit_events FOR ALL TO actiond_policy, actiond_executor, actiond_admin USING (true) WITH CHECK (true);

-- Which role may make which transition (on top of the legal-transition table of V1).
CREATE FUNCTION actiond_role_may(from_state text, to_state text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RETURN true;
    END IF;
    IF pg_has_role(current_user, 'actiond_policy', 'MEMBER')
       AND ((from_state = 'pending' AND to_state IN ('approved','escalated','blocked','expired'))
         OR (from_state = 'escalated' AND to_state = 'expired')) THEN
        RETURN true;
    END IF;
    IF (pg_has_role(current_user, 'actiond_web', 'MEMBER') OR pg_has_role(current_user, 'actiond_admin', 'MEMBER'))
       AND from_state = 'escalated' AND to_state IN ('approved','denied') THEN
        RETURN true;
    END IF;
    IF pg_has_role(current_user, 'actiond_executor', 'MEMBER')
       AND ((from_state = 'approved' AND to_state IN ('executing','blocked','expired'))
         OR (from_state = 'executing' AND to_state IN ('succeeded','failed','outcome_unknown'))) THEN
        RETURN true;
    END IF;
    RETURN false;
END $$;

CREATE OR REPLACE FUNCTION proposals_check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
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
        IF NOT actiond_role_may(OLD.state, NEW.state) THEN
            RAISE EXCEPTION 'role % may not move a proposal % -> %', current_user, OLD.state, NEW.state
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        NEW.updated_at := now();
    END IF;
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
       OR NEW.action IS DISTINCT FROM OLD.action OR NEW.target IS DISTINCT FROM OLD.target
       OR NEW.intent_hash IS DISTINCT FROM OLD.intent_hash OR NEW.params_json IS DISTINCT FROM OLD.params_json THEN
        RAISE EXCEPTION 'proposal identity columns are immutable' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
