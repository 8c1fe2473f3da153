-- V34: the signed values are the ones checked, and a revoked agent's proposals never run.
--
-- 1. A grant's expiry has one source of truth: `expires_at_us`, the microseconds since the
--    Unix epoch that the grant's signature covers. `expires_at` was a second, unsigned copy
--    written beside it, and the executor's spend compared that copy with `now()`: whoever could
--    write the column (the table's owner, a superuser, a role granted UPDATE by mistake) could
--    push an expired, never-spent grant's `expires_at` into the future and have it run. Now
--    `expires_at` is generated from `expires_at_us` (nobody writes it; it stays for people's
--    queries), and neither the spend nor the sweeper reads it: the spend compares the expiry
--    inside the grant the executor verified (a parameter of the statement) with the database
--    clock, the sweeper compares `expires_at_us`. A writer of `expires_at_us` breaks the
--    signature instead (`bad_signature`). `to_timestamp(float8)` is IMMUTABLE and gives back
--    every microsecond value of the next centuries exactly.
--    Replacing the column rewrites `grants` once (ACCESS EXCLUSIVE while it runs; V22's
--    `fillfactor = 50` is kept).
ALTER TABLE grants DROP COLUMN expires_at;
ALTER TABLE grants ADD COLUMN expires_at timestamptz
    GENERATED ALWAYS AS (to_timestamp(expires_at_us::double precision / 1000000)) STORED;
COMMENT ON COLUMN grants.expires_at IS
    'expires_at_us (the signed expiry) as timestamptz, generated (V34); the spend and the sweeper compare expires_at_us';

-- 2. Revoking an agent stops what it asked for, by the rule that stops a frozen agent (V18,
--    V20). Before, a revocation only refused the agent's next submissions: its escalated
--    refund could still be approved and run, and an approved, unspent grant ran. Now the
--    revoking transaction denies its pending and escalated proposals (`pending → denied` is
--    legal for a revoked agent as for a frozen one), and `proposals_check_update()` refuses
--    `pending → approved|escalated` and `approved → executing` for a revoked agent's proposal,
--    for every role, as it does for a frozen one. Policy and the executor read
--    `agents.revoked_at` in their own statements first and block such a proposal with a reason
--    of its own (rule `agent-revoked`; `grants_rejected_total{reason="agent_revoked"}`), spending
--    nothing. A revocation is never undone (`revoked_at` has no way back), so neither is this.
--
-- V29's function with the two agent tests reading `revoked_at` beside `frozen_at` (one agents
-- lookup, as before); everything else in the same order with the same messages and codes,
-- except that a pending proposal's denial now names both conditions.
CREATE OR REPLACE FUNCTION proposals_check_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    agent_frozen boolean;
    agent_revoked boolean;
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT proposal_transition_legal(OLD.state, NEW.state) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        IF OLD.state = 'pending' AND NEW.state = 'denied' THEN
            IF NOT EXISTS (SELECT 1 FROM agents a
                           WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id
                             AND (a.frozen_at IS NOT NULL OR a.revoked_at IS NOT NULL)) THEN
                RAISE EXCEPTION 'a pending proposal is denied only when its agent is frozen or revoked'
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        IF (OLD.state = 'pending' AND NEW.state IN ('approved', 'escalated'))
           OR (OLD.state = 'approved' AND NEW.state = 'executing') THEN
            SELECT a.frozen_at IS NOT NULL, a.revoked_at IS NOT NULL INTO agent_frozen, agent_revoked
            FROM agents a WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id;
            IF agent_revoked THEN
                RAISE EXCEPTION 'the agent of proposal % is revoked: it may not move % -> %', NEW.id, OLD.state, NEW.state
                    USING ERRCODE = 'check_violation';
            END IF;
            IF agent_frozen THEN
                RAISE EXCEPTION 'the agent of proposal % is frozen: it may not move % -> %', NEW.id, OLD.state, NEW.state
                    USING ERRCODE = 'check_violation';
            END IF;
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
