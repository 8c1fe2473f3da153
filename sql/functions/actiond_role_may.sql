-- Which service role may make which proposal state transition (web and admin decide escalations,
-- policy decides pending rows, the executor runs approved ones and settles outcome_unknown ones
-- by reading the provider back (V43) and sends a run whose preview changed back to the approvers
-- (V45, `executing → escalated`, further checked in proposals_check_update), the agent-facing api withdraws
-- an agent's own pending or escalated proposal, …). Called by
-- proposals_check_update() after the legal-transition check; the superuser lookup comes last.
-- Each test compares the states before it asks for a role membership (V48: one membership
-- lookup per call instead of up to five on the executor's changes).
CREATE OR REPLACE FUNCTION actiond_role_may(from_state text, to_state text)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    IF ((from_state = 'pending' AND to_state IN ('approved','escalated','blocked','expired'))
         OR (from_state = 'escalated' AND to_state = 'expired'))
       AND pg_has_role(current_user, 'actiond_policy', 'MEMBER') THEN
        RETURN true;
    END IF;
    IF ((from_state = 'escalated' AND to_state IN ('approved','denied','expired','amended'))
         OR (from_state = 'pending' AND to_state = 'denied'))
       AND (pg_has_role(current_user, 'actiond_web', 'MEMBER') OR pg_has_role(current_user, 'actiond_admin', 'MEMBER')) THEN
        RETURN true;
    END IF;
    IF from_state IN ('pending','escalated') AND to_state = 'withdrawn'
       AND pg_has_role(current_user, 'actiond_api', 'MEMBER') THEN
        RETURN true;
    END IF;
    IF ((from_state = 'approved' AND to_state IN ('executing','blocked','expired'))
         OR (from_state = 'executing' AND to_state IN ('succeeded','failed','outcome_unknown','stale','effect_mismatch','escalated'))
         OR (from_state = 'outcome_unknown' AND to_state IN ('succeeded','failed','effect_mismatch')))
       AND pg_has_role(current_user, 'actiond_executor', 'MEMBER') THEN
        RETURN true;
    END IF;
    RETURN coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false);
END $function$;
