-- Approvals that cannot be gamed: in time, by distinct people, from people entitled now.
--
-- 1. The decision path is the guard of the escalation TTL: an approve or deny that arrives after
--    `escalation_ttl` (by the database clock, in the decision's own transaction) moves the
--    proposal `escalated → expired` instead of deciding it. The web and admin (break-glass)
--    roles therefore gain that one transition; the policy sweep keeps it too and only tidies up.
-- 2. Sessions remember when the identity provider last authenticated the person (ID-token
--    `auth_time`, OpenID Connect Core 1.0 §2), so a handler's `reauth_within` can be judged at
--    decision time. NULL means the ID token carried no `auth_time`: such a session never meets a
--    `reauth_within`.

ALTER TABLE web_sessions ADD COLUMN auth_time timestamptz;

CREATE OR REPLACE FUNCTION actiond_role_may(from_state text, to_state text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
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
       AND from_state = 'escalated' AND to_state IN ('approved','denied','expired') THEN
        RETURN true;
    END IF;
    IF pg_has_role(current_user, 'actiond_executor', 'MEMBER')
       AND ((from_state = 'approved' AND to_state IN ('executing','blocked','expired'))
         OR (from_state = 'executing' AND to_state IN ('succeeded','failed','outcome_unknown'))) THEN
        RETURN true;
    END IF;
    RETURN false;
END $$;
