-- Which service role may make which proposal state transition (web and admin decide escalations,
-- policy decides pending rows, the executor runs approved ones and settles outcome_unknown ones
-- by reading the provider back (V43) and sends a run whose preview changed back to the approvers
-- (V45, `executing → escalated`, further checked in proposals_check_update), the agent-facing api withdraws
-- an agent's own pending or escalated proposal, …). Called by
-- proposals_check_update() after the legal-transition check; the superuser lookup comes last.
CREATE OR REPLACE FUNCTION actiond_role_may(from_state text, to_state text)
 RETURNS boolean
 LANGUAGE plpgsql
 STABLE
AS $function$
BEGIN
    IF pg_has_role(current_user, 'actiond_policy', 'MEMBER')
       AND ((from_state = 'pending' AND to_state IN ('approved','escalated','blocked','expired'))
         OR (from_state = 'escalated' AND to_state = 'expired')) THEN
        RETURN true;
    END IF;
    IF (pg_has_role(current_user, 'actiond_web', 'MEMBER') OR pg_has_role(current_user, 'actiond_admin', 'MEMBER'))
       AND ((from_state = 'escalated' AND to_state IN ('approved','denied','expired','amended'))
         OR (from_state = 'pending' AND to_state = 'denied')) THEN
        RETURN true;
    END IF;
    IF pg_has_role(current_user, 'actiond_api', 'MEMBER')
       AND from_state IN ('pending','escalated') AND to_state = 'withdrawn' THEN
        RETURN true;
    END IF;
    IF pg_has_role(current_user, 'actiond_executor', 'MEMBER')
       AND ((from_state = 'approved' AND to_state IN ('executing','blocked','expired'))
         OR (from_state = 'executing' AND to_state IN ('succeeded','failed','outcome_unknown','stale','effect_mismatch','escalated'))
         OR (from_state = 'outcome_unknown' AND to_state IN ('succeeded','failed','effect_mismatch'))) THEN
        RETURN true;
    END IF;
    RETURN coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false);
END $function$;
