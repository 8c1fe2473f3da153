-- V29: the checks on a proposal update run a query only where a rule needs another table's row.
-- Same rules, same order, same messages and error codes; no privilege or row changes.
--
-- Measured (issue #10, release bench with `pg_stat_statements.track = all`, 3,000 allow-path
-- proposals): every state change ran V27's `proposals_check_update()` with three SQL
-- statements of its own, each through the executor (SPI) however little it had to do:
--   * the legal-transition test, `NOT EXISTS (SELECT … FROM proposal_transitions …)`, on every
--     state change: 9,003 executions, 0.045 ms of statement time per proposal;
--   * `OLD.state = 'pending' AND NEW.state = 'denied' AND NOT EXISTS (…agents…)` and the
--     frozen-agent test: PL/pgSQL evaluates an IF condition that holds a subquery as a query,
--     so both ran on every state change, including the many they cannot concern (an outcome,
--     a decision): 0.04 ms per proposal.
-- Together with the function calls around them, about 7% of Postgres statement time per
-- proposal. A condition without a subquery is a "simple expression" to PL/pgSQL, evaluated
-- without the executor.
--
-- 1. The legal transitions stay the rows of `proposal_transitions`: the one place the
--    lifecycle is written (migrations README, rule 5). `proposal_transition_legal(from, to)` is
--    generated from them, as an IMMUTABLE SQL expression that Postgres inlines into the
--    trigger's simple expression. `actiond_compile_transitions()` regenerates it, and a
--    statement-level trigger on `proposal_transitions` runs it after every change of the
--    table, so the two cannot disagree (e2e `schema::transition_trigger_enforces_exactly_the_core_table`
--    tries every pair on a real row; `schema::a_changed_transition_table_changes_the_trigger`
--    changes the table).
-- 2. The two agent tests are nested under the plain state comparison that decides whether they
--    apply, so they run only for `pending → denied`, `pending → approved|escalated` and
--    `approved → executing`.

CREATE FUNCTION actiond_compile_transitions() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    pairs text;
BEGIN
    SELECT string_agg(format('(%L, %L)', from_state, to_state), ', ' ORDER BY from_state, to_state)
    INTO pairs FROM proposal_transitions;
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION proposal_transition_legal(from_state text, to_state text) '
        'RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        'SELECT ' || CASE WHEN pairs IS NULL THEN 'false'
                          ELSE format('(from_state, to_state) IN (%s)', pairs) END);
    COMMENT ON FUNCTION proposal_transition_legal(text, text) IS
        'Generated from proposal_transitions by actiond_compile_transitions() (V29); never edit it by hand.';
END $$;
REVOKE ALL ON FUNCTION actiond_compile_transitions() FROM PUBLIC;

SELECT actiond_compile_transitions();

CREATE FUNCTION proposal_transitions_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM actiond_compile_transitions();
    RETURN NULL;
END $$;
CREATE TRIGGER proposal_transitions_compile AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
    ON proposal_transitions FOR EACH STATEMENT EXECUTE FUNCTION proposal_transitions_changed();

-- V27's function, with the legal-transition test through `proposal_transition_legal` and the
-- two agent tests nested. Everything else as it was.
CREATE OR REPLACE FUNCTION proposals_check_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT proposal_transition_legal(OLD.state, NEW.state) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        IF OLD.state = 'pending' AND NEW.state = 'denied' THEN
            IF NOT EXISTS (SELECT 1 FROM agents a
                           WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id
                             AND a.frozen_at IS NOT NULL) THEN
                RAISE EXCEPTION 'a pending proposal is denied only when its agent is frozen'
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        IF (OLD.state = 'pending' AND NEW.state IN ('approved', 'escalated'))
           OR (OLD.state = 'approved' AND NEW.state = 'executing') THEN
            IF EXISTS (SELECT 1 FROM agents a
                       WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id
                         AND a.frozen_at IS NOT NULL) THEN
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
