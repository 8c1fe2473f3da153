-- V27: the checks on a proposal update run once per statement instead of once per row; a
-- proposal's times never go backwards. No rule is weakened, no privilege changes, no row moves.
--
-- 1. Since V13 every state change ran `proposals_check_update()`, a PL/pgSQL row trigger that
--    looked up `proposal_transitions`, the agent's freeze and the role's transitions for that one
--    row: three to five queries per row. Policy, the executor and retention change proposals in
--    batches (a decision, spend or outcome batch moves 10–30 rows in one statement), so most of
--    that work was repeated per row. Measured on the unbatched lifecycle of
--    `bench/schema-ab/lifecycle-actiond.sql` (pgbench, 2,000 proposals): the row trigger was
--    0.25–0.3 ms of 1.4–1.5 ms of statement time per proposal, and a trigger that only stamps
--    `updated_at` costs 0.05.
--
--    Now `proposals_check_updates()` is an AFTER … FOR EACH STATEMENT trigger over the
--    statement's transition tables (every old and new row version): the same checks, in the same
--    order, with the same messages and error codes, each one query over all the rows the
--    statement changed. It raises before the statement completes, so a statement that breaks a
--    rule for any one row changes nothing at all, as before. It reads `agents.frozen_at` with its
--    own fresh snapshot, after every row of the statement was written, so a freeze committed
--    while the statement ran still counts (V20's rule).
--
--    Statement-level triggers cannot have a `WHEN` clause or, with transition tables, a column
--    list, so the trigger fires for every UPDATE of `proposals` (the executor's lease changes
--    too). Its first query finds out in one pass over the changed rows whether any state, purge
--    mark or identity column changed; when none did it returns at once.
--
--    One check is new: a row's `id` cannot change either. The row trigger never compared it;
--    the statement trigger pairs old and new versions by `id`, so a changed `id` would otherwise
--    escape every other check. It is refused as an identity change.
--
-- 2. `updated_at` is still stamped per row, by a BEFORE row trigger that runs no query
--    (`proposals_stamp_update`, only when the state changes), and it never goes backwards:
--    `greatest(now(), OLD.updated_at)`. `now()` is the start of the writing transaction, which may
--    begin before the submission it decides commits: a decision could be stamped a few
--    milliseconds before the proposal's own `created_at`. The store's statements set
--    `decided_at` and `finished_at` the same way.
CREATE FUNCTION proposals_stamp_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_at := greatest(now(), OLD.updated_at);
    RETURN NEW;
END $$;

CREATE FUNCTION proposals_check_updates() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
    moved boolean;
BEGIN
    -- Which kinds of change this statement made, in one pass; most statements (lease changes)
    -- made none of them. A new version whose id has no old version is an identity change.
    SELECT bool_or(o.id IS NULL OR n.state IS DISTINCT FROM o.state) AS moved,
           bool_or(o.id IS NULL OR n.purged_at IS DISTINCT FROM o.purged_at
                   OR n.tenant_id IS DISTINCT FROM o.tenant_id OR n.agent_id IS DISTINCT FROM o.agent_id
                   OR n.action IS DISTINCT FROM o.action OR n.target IS DISTINCT FROM o.target
                   OR n.intent_hash IS DISTINCT FROM o.intent_hash
                   OR n.params_json IS DISTINCT FROM o.params_json) AS other
      INTO r
      FROM new_rows n LEFT JOIN old_rows o ON o.id = n.id;
    IF NOT coalesce(r.moved, false) AND NOT coalesce(r.other, false) THEN
        RETURN NULL;
    END IF;
    moved := coalesce(r.moved, false);
    IF moved THEN
        SELECT o.state AS from_state, n.state AS to_state INTO r
          FROM old_rows o JOIN new_rows n ON n.id = o.id
         WHERE n.state IS DISTINCT FROM o.state
           AND NOT EXISTS (SELECT 1 FROM proposal_transitions t
                           WHERE t.from_state = o.state AND t.to_state = n.state)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', r.from_state, r.to_state
                USING ERRCODE = 'check_violation';
        END IF;
        IF EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
                   WHERE o.state = 'pending' AND n.state = 'denied'
                     AND NOT EXISTS (SELECT 1 FROM agents a
                                     WHERE a.tenant_id = n.tenant_id AND a.id = n.agent_id
                                       AND a.frozen_at IS NOT NULL)) THEN
            RAISE EXCEPTION 'a pending proposal is denied only when its agent is frozen'
                USING ERRCODE = 'check_violation';
        END IF;
        SELECT n.id, o.state AS from_state, n.state AS to_state INTO r
          FROM old_rows o JOIN new_rows n ON n.id = o.id
         WHERE ((o.state = 'pending' AND n.state IN ('approved', 'escalated'))
                OR (o.state = 'approved' AND n.state = 'executing'))
           AND EXISTS (SELECT 1 FROM agents a
                       WHERE a.tenant_id = n.tenant_id AND a.id = n.agent_id
                         AND a.frozen_at IS NOT NULL)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'the agent of proposal % is frozen: it may not move % -> %', r.id, r.from_state, r.to_state
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    IF EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
               WHERE o.purged_at IS NOT NULL AND n.purged_at IS DISTINCT FROM o.purged_at) THEN
        RAISE EXCEPTION 'a purge is not undone' USING ERRCODE = 'check_violation';
    END IF;
    IF EXISTS (SELECT 1 FROM new_rows n LEFT JOIN old_rows o ON o.id = n.id
               WHERE o.id IS NULL
                  OR n.tenant_id IS DISTINCT FROM o.tenant_id OR n.agent_id IS DISTINCT FROM o.agent_id
                  OR n.action IS DISTINCT FROM o.action OR n.target IS DISTINCT FROM o.target
                  OR n.intent_hash IS DISTINCT FROM o.intent_hash
                  OR (n.params_json IS DISTINCT FROM o.params_json
                      AND NOT (o.purged_at IS NULL AND n.purged_at IS NOT NULL AND n.params_json = '{}'
                               AND n.state = o.state
                               AND o.state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown')))) THEN
        RAISE EXCEPTION 'proposal identity columns are immutable' USING ERRCODE = 'check_violation';
    END IF;
    IF moved THEN
        -- `actiond_role_may` once per distinct transition of the statement, not per row.
        SELECT t.from_state, t.to_state INTO r
          FROM (SELECT DISTINCT o.state AS from_state, n.state AS to_state
                  FROM old_rows o JOIN new_rows n ON n.id = o.id
                 WHERE n.state IS DISTINCT FROM o.state) t
         WHERE NOT actiond_role_may(t.from_state, t.to_state)
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'role % may not move a proposal % -> %', current_user, r.from_state, r.to_state
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        -- V16's staged-approval rule; only statements approving an escalation read
        -- approval_stages (the executor may not read it).
        IF EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
                   WHERE o.state = 'escalated' AND n.state = 'approved') THEN
            SELECT n.id INTO r
              FROM old_rows o JOIN new_rows n ON n.id = o.id
             WHERE o.state = 'escalated' AND n.state = 'approved'
               AND EXISTS (SELECT 1 FROM approval_stages s WHERE s.proposal_id = n.id
                           AND s.stage = s.of_stages AND s.completed_at IS NULL)
             LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'proposal % has stages: it is approved only when its last stage completed', r.id
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER proposals_transition_update ON proposals;
DROP FUNCTION proposals_check_update();
CREATE TRIGGER proposals_stamp_update BEFORE UPDATE ON proposals
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION proposals_stamp_update();
CREATE TRIGGER proposals_check_updates AFTER UPDATE ON proposals
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION proposals_check_updates();
