-- For `actiond-bench --schema-sql`: puts back the per-row proposal checks that V27 replaced
-- (V20's `proposals_check_update()` behind V13's trigger), so the statement-level checks can be
-- measured against them with one build, in one session. Never apply it to a real database.
DROP TRIGGER proposals_check_updates ON proposals;
DROP TRIGGER proposals_stamp_update ON proposals;
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
        IF ((OLD.state = 'pending' AND NEW.state IN ('approved', 'escalated'))
            OR (OLD.state = 'approved' AND NEW.state = 'executing'))
           AND EXISTS (SELECT 1 FROM agents a
                       WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id
                         AND a.frozen_at IS NOT NULL) THEN
            RAISE EXCEPTION 'the agent of proposal % is frozen: it may not move % -> %', NEW.id, OLD.state, NEW.state
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

CREATE TRIGGER proposals_transition_update BEFORE UPDATE ON proposals
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state
                       OR NEW.purged_at IS DISTINCT FROM OLD.purged_at
                       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
                       OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
                       OR NEW.action IS DISTINCT FROM OLD.action
                       OR NEW.target IS DISTINCT FROM OLD.target
                       OR NEW.intent_hash IS DISTINCT FROM OLD.intent_hash
                       OR NEW.params_json IS DISTINCT FROM OLD.params_json)
    EXECUTE FUNCTION proposals_check_update();
