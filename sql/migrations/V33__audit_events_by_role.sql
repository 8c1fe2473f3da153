-- V33: each service role may insert only the audit events it produces.
--
-- Before, every service login could insert events of any kind, by any actor, for any tenant it
-- sees (the api: its transaction's tenants; the workers: all): an agent-facing api that was
-- taken over could write `approval.decided` by `approver:alice`, or a submission in another
-- agent's name, into the chain the sealer then signs. Now Postgres refuses it:
--
-- - Row-level security WITH CHECK, per role, on the kind (and, for the api, the form of every
--   column): no query, no cost beyond comparing the row's own columns.
-- - The api's events must also name the agent of the proposal they are about, in the
--   proposal's tenant. The api writes a submission and its event in one statement (a CTE), so
--   the proposal is not visible to a WITH CHECK subquery (same snapshot); a statement-level
--   AFTER trigger with a transition table checks the whole statement's events in one join,
--   once per statement (a batch of 64 submissions is one check, not 64).
--
-- Refusals are SQLSTATE 42501 (insufficient_privilege): `new row violates row-level security
-- policy` for the kind, and a message naming the event, actor and proposal for the agent.

-- api: `proposal.submitted` only, by an agent, about a proposal, `→ pending`.
DROP POLICY api_tenant ON audit_events;
CREATE POLICY api_read ON audit_events FOR SELECT TO actiond_api
    USING (actiond_tenant_visible(tenant_id));
CREATE POLICY api_write ON audit_events FOR INSERT TO actiond_api
    WITH CHECK (actiond_tenant_visible(tenant_id)
                AND kind = 'proposal.submitted' AND actor LIKE 'agent:%'
                AND proposal_id IS NOT NULL AND from_state IS NULL AND to_state = 'pending');

-- web: what a person does on the approval page.
DROP POLICY web_tenant ON audit_events;
CREATE POLICY web_read ON audit_events FOR SELECT TO actiond_web
    USING (actiond_tenant_visible(tenant_id, true));
CREATE POLICY web_write ON audit_events FOR INSERT TO actiond_web
    WITH CHECK (actiond_tenant_visible(tenant_id, true)
                AND kind IN ('approval.recorded', 'approval.decided', 'approval.refused', 'proposal.expired',
                             'approval.stage_opened', 'approval.stage_completed', 'approval.stage_timed_out',
                             'agent.frozen', 'agent.unfrozen', 'proposal.decided', 'passkey.registered',
                             'passkey.registration_refused'));

-- Workers serve every tenant; each writes its own kinds.
DROP POLICY workers ON audit_events;
CREATE POLICY workers_read ON audit_events FOR SELECT TO actiond_policy, actiond_executor, actiond_admin
    USING (true);
CREATE POLICY policy_write ON audit_events FOR INSERT TO actiond_policy
    WITH CHECK (kind IN ('proposal.decided', 'proposal.expired', 'approval.stage_opened', 'approval.stage_timed_out'));
CREATE POLICY executor_write ON audit_events FOR INSERT TO actiond_executor
    WITH CHECK (kind IN ('grant.spent', 'grant.rejected', 'grant.expired', 'proposal.blocked_policy_changed',
                         'proposal.executed', 'proposal.outcome_unknown'));
-- admin (the operator's CLI): tenants, agents, shadow documents, break-glass decisions. Never
-- a submission, a spend, an outcome, a purge or a passkey.
CREATE POLICY admin_write ON audit_events FOR INSERT TO actiond_admin
    WITH CHECK (kind IN ('tenant.document_applied', 'tenant.shadow_stored', 'tenant.shadow_promoted',
                         'agent.created', 'agent.revoked', 'agent.frozen', 'agent.unfrozen', 'proposal.decided',
                         'approval.breakglass', 'approval.recorded', 'approval.decided', 'approval.refused',
                         'proposal.expired', 'approval.stage_opened', 'approval.stage_completed',
                         'approval.stage_timed_out'));

-- The api's events name the agent of their proposal, in its tenant. The trigger fires only for
-- the api's logins (its WHEN clause; the owner and other roles pay nothing). Measured as the
-- api role, warm session, on a loaded 2-core machine: 0.02-0.03 ms per statement of one
-- submission (statement execution 0.23-0.37 ms), 0.15-0.37 ms per batch of 64 (8-23 ms); the
-- role checks inside the function instead of WHEN cost three times as much.
CREATE FUNCTION audit_events_api_agent() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.id, n.tenant_id, n.actor, n.proposal_id INTO bad
    FROM audit_events_new n
    LEFT JOIN proposals p ON p.id = n.proposal_id AND p.tenant_id = n.tenant_id
    WHERE p.id IS NULL OR n.actor IS DISTINCT FROM 'agent:' || p.agent_id::text
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'role % may write audit events only as the agent of the proposal: event % (tenant %) names actor % for proposal %, which is not that agent''s in that tenant',
            current_user, bad.id, bad.tenant_id, bad.actor, bad.proposal_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER audit_events_api_agent AFTER INSERT ON audit_events
    REFERENCING NEW TABLE AS audit_events_new
    FOR EACH STATEMENT
    WHEN (current_setting('is_superuser') = 'off' AND pg_has_role(current_user, 'actiond_api', 'MEMBER'))
    EXECUTE FUNCTION audit_events_api_agent();
