-- V18: freezing an agent denies its *pending* proposals too, not only its escalated ones.
--
-- Before: a freeze denied the agent's escalated proposals; one still `pending` (policy had not
-- claimed it yet) went on to be decided by policy and, if its rules allowed it, ran. Now the
-- freeze transaction moves those to `denied` as well, with the same reason and an audit event
-- each. `pending → denied` is a new legal transition with a rule of its own: it is legal only
-- while the proposal's agent is frozen (checked in the same statement, so no other path can use
-- it to skip policy), and only the web and admin roles (the ones that freeze) may make it.
-- Policy claims pending rows `FOR UPDATE SKIP LOCKED` and updates `WHERE state = 'pending'`:
-- a row the freeze denied is skipped or left alone, never decided twice.

INSERT INTO proposal_transitions (from_state, to_state) VALUES ('pending', 'denied');

-- V16's checks (V13's plus the staged-approval rule), in the same order with the same messages,
-- plus the frozen-agent rule right after the legal-transition check. It reads `agents.frozen_at` (not a `proposals` column), and
-- `pending → denied` changes the state, which the trigger's WHEN clause already covers.
CREATE OR REPLACE FUNCTION proposals_check_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT EXISTS (SELECT 1 FROM proposal_transitions t
                       WHERE t.from_state = OLD.state AND t.to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        IF OLD.state = 'pending' AND NEW.state = 'denied'
           AND NOT EXISTS (SELECT 1 FROM agents a
                           WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id
                             AND a.frozen_at IS NOT NULL) THEN
            RAISE EXCEPTION 'a pending proposal is denied only when its agent is frozen'
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
    IF NEW.state IS DISTINCT FROM OLD.state AND NOT actiond_role_may(OLD.state, NEW.state) THEN
        RAISE EXCEPTION 'role % may not move a proposal % -> %', current_user, OLD.state, NEW.state
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- V16's staged-approval rule, kept: nested, so roles that never approve (the executor
    -- cannot read approval_stages) never run the lookup.
    IF OLD.state = 'escalated' AND NEW.state = 'approved' THEN
        IF EXISTS (SELECT 1 FROM approval_stages s WHERE s.proposal_id = NEW.id
                   AND s.stage = s.of_stages AND s.completed_at IS NULL) THEN
            RAISE EXCEPTION 'proposal % has stages: it is approved only when its last stage completed', NEW.id
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $$;

-- V13's answers, plus `pending → denied` for web and admin (freezing an agent).
CREATE OR REPLACE FUNCTION actiond_role_may(from_state text, to_state text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF pg_has_role(current_user, 'actiond_policy', 'MEMBER')
       AND ((from_state = 'pending' AND to_state IN ('approved','escalated','blocked','expired'))
         OR (from_state = 'escalated' AND to_state = 'expired')) THEN
        RETURN true;
    END IF;
    IF (pg_has_role(current_user, 'actiond_web', 'MEMBER') OR pg_has_role(current_user, 'actiond_admin', 'MEMBER'))
       AND ((from_state = 'escalated' AND to_state IN ('approved','denied','expired'))
         OR (from_state = 'pending' AND to_state = 'denied')) THEN
        RETURN true;
    END IF;
    IF pg_has_role(current_user, 'actiond_executor', 'MEMBER')
       AND ((from_state = 'approved' AND to_state IN ('executing','blocked','expired'))
         OR (from_state = 'executing' AND to_state IN ('succeeded','failed','outcome_unknown'))) THEN
        RETURN true;
    END IF;
    RETURN coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false);
END $$;
