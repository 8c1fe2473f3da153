-- The agent-facing api may write audit events only as the agent of the proposal they are about,
-- in that proposal's tenant (row-level security WITH CHECK, V33, restricts the kind and the
-- form). A statement-level AFTER trigger with a transition table: the api writes a submission
-- and its event in one statement, so a WITH CHECK subquery could not see the proposal; one join
-- per statement checks a whole batch. Fires only for api logins (its WHEN clause); refusals
-- are SQLSTATE 42501 naming the event, actor and proposal.
CREATE OR REPLACE FUNCTION audit_events_api_agent()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$;

CREATE OR REPLACE TRIGGER audit_events_api_agent AFTER INSERT ON audit_events REFERENCING NEW TABLE AS audit_events_new FOR EACH STATEMENT WHEN (((current_setting('is_superuser'::text) = 'off'::text) AND pg_has_role(CURRENT_USER, 'actiond_api'::name, 'MEMBER'::text))) EXECUTE FUNCTION audit_events_api_agent();
