-- V27: a proposal's times never go backwards. No rule, privilege or row changes.
--
-- `updated_at` was stamped `now()` on every state change: the start of the writing transaction.
-- Policy's claim reads rows committed after its transaction began, so a decision could be
-- stamped a few milliseconds before the proposal's own `created_at` (and an outcome before the
-- move to `executing`). The stamp is now `greatest(now(), OLD.updated_at)`; the store's
-- statements set `decided_at` and `finished_at` the same way (`greatest(now(), created_at)`,
-- `greatest(now(), updated_at)`).
--
-- V20's function otherwise unchanged: the same checks in the same order with the same messages.
-- (Measured and not kept: the same checks as one statement-level trigger over the transition
-- tables. In the release bench its queries cost about 0.2 ms of statement time per proposal,
-- where the per-row checks' lookups cost about 0.05: every UPDATE of `proposals` fires a
-- statement trigger, the claim's lease changes too, and joins over transition tables have no
-- statistics.)
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
        NEW.updated_at := greatest(now(), OLD.updated_at);
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
