-- V50: the CHECK rules of `proposals` and `grants` are read once per connection instead of
-- once per statement, with exactly the same rules, names, SQLSTATE and messages.
--
-- Postgres evaluates a table's CHECK constraints on every INSERT and UPDATE of a row, and
-- before the first row of every statement that writes the table it reads each constraint back
-- from its stored text (`stringToNode`), simplifies it and checks the privileges of each
-- function it calls. `proposals` had ten constraints (8.7 kB of stored text) and `grants` four
-- (3.9 kB); an allow-path proposal writes `proposals` four times and `grants` twice. Counted
-- with `bench/batch-ab` under callgrind, one proposal per statement (an open loop below
-- saturation batches about that): 7.45 M instructions of Postgres per proposal, of which the
-- constraints' read-back was 1.7 M. Each table now has one constraint calling a PL/pgSQL
-- function (`sql/functions/actiond_proposals_row_check.sql`, `actiond_grants_row_check.sql`)
-- that tests the same rules in the same order; PL/pgSQL compiles a function once per
-- connection, so a statement reads back 1.4 kB and 0.8 kB. 6.39 M per proposal (-14%) at one
-- proposal per statement; at twenty, 1.60 M and 1.57 M (-2%, within the count's noise).
--
-- Same rules: each old constraint is one test of the function, in the constraint names' order
-- (the order Postgres tests them), and a refusal raises what the constraint raised (SQLSTATE
-- 23514, "new row for relation … violates check constraint "<old name>"", the error's
-- constraint field set to the old name), so callers and `proposal_checks::` see no change. A
-- test that is NULL passes, as in a CHECK constraint.
--
-- The functions are defined here as well as in their files because the constraints need them
-- now, and the files are applied after the migrations; the file is the one to edit. Adding the
-- constraints reads `proposals` and `grants` once to validate them: writes to both wait until
-- this migration commits.

CREATE OR REPLACE FUNCTION actiond_proposals_row_check(
    action text, amended_by text, amended_from uuid, amendment_diff jsonb, approval_round integer,
    effect text, intent_hash text, outcome text, params_sha256 text, state text)
 RETURNS boolean
 LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $function$
DECLARE
    failed text;
BEGIN
    IF (length(action) <= 128) IS FALSE THEN
        failed := 'proposals_action_check';
    ELSIF (amended_by IS NULL OR (length(amended_by) >= 1 AND length(amended_by) <= 300)) IS FALSE THEN
        failed := 'proposals_amended_by_check';
    ELSIF ((amended_from IS NULL AND amended_by IS NULL AND amendment_diff IS NULL)
           OR (amended_from IS NOT NULL AND amended_by IS NOT NULL AND amendment_diff IS NOT NULL)) IS FALSE THEN
        failed := 'proposals_amendment_complete';
    ELSIF (amendment_diff IS NULL OR jsonb_typeof(amendment_diff) = 'array') IS FALSE THEN
        failed := 'proposals_amendment_diff_check';
    ELSIF (approval_round >= 0) IS FALSE THEN
        failed := 'proposals_approval_round_check';
    ELSIF (effect = ANY ('{allow,escalate,block}'::text[])) IS FALSE THEN
        failed := 'proposals_effect_check';
    ELSIF (length(intent_hash) = 64 AND intent_hash !~ '[^0-9a-f]') IS FALSE THEN
        failed := 'proposals_intent_hash_check';
    ELSIF (outcome = ANY ('{succeeded,failed,outcome_unknown,effect_mismatch}'::text[])) IS FALSE THEN
        failed := 'proposals_outcome_check';
    ELSIF (length(params_sha256) = 64 AND params_sha256 !~ '[^0-9a-f]') IS FALSE THEN
        failed := 'proposals_params_sha256_check';
    ELSIF (state = ANY ('{pending,escalated,approved,blocked,denied,expired,executing,succeeded,failed,outcome_unknown,withdrawn,amended,stale,effect_mismatch}'::text[])) IS FALSE THEN
        failed := 'proposals_state_check';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for relation "proposals" violates check constraint "%"', failed
        USING ERRCODE = 'check_violation', CONSTRAINT = failed, TABLE = 'proposals';
END $function$;

CREATE OR REPLACE FUNCTION actiond_grants_row_check(
    doc_sha256 text, intent_hash text, preview_sha256 text, used_at timestamptz, voided_at timestamptz)
 RETURNS boolean
 LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $function$
DECLARE
    failed text;
BEGIN
    IF (doc_sha256 IS NULL OR (length(doc_sha256) = 64 AND doc_sha256 !~ '[^0-9a-f]')) IS FALSE THEN
        failed := 'grants_doc_sha256_check';
    ELSIF (length(intent_hash) = 64 AND intent_hash !~ '[^0-9a-f]') IS FALSE THEN
        failed := 'grants_intent_hash_check';
    ELSIF (preview_sha256 IS NULL OR (length(preview_sha256) = 64 AND preview_sha256 !~ '[^0-9a-f]')) IS FALSE THEN
        failed := 'grants_preview_sha256_check';
    ELSIF (voided_at IS NULL OR used_at IS NOT NULL) IS FALSE THEN
        failed := 'grants_voided_after_spent';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for relation "grants" violates check constraint "%"', failed
        USING ERRCODE = 'check_violation', CONSTRAINT = failed, TABLE = 'grants';
END $function$;

ALTER TABLE proposals
    DROP CONSTRAINT proposals_action_check, DROP CONSTRAINT proposals_amended_by_check,
    DROP CONSTRAINT proposals_amendment_complete, DROP CONSTRAINT proposals_amendment_diff_check,
    DROP CONSTRAINT proposals_approval_round_check, DROP CONSTRAINT proposals_effect_check,
    DROP CONSTRAINT proposals_intent_hash_check, DROP CONSTRAINT proposals_outcome_check,
    DROP CONSTRAINT proposals_params_sha256_check, DROP CONSTRAINT proposals_state_check,
    ADD CONSTRAINT proposals_row_check CHECK (actiond_proposals_row_check(action, amended_by, amended_from,
        amendment_diff, approval_round, effect, intent_hash, outcome, params_sha256, state));
ALTER TABLE grants
    DROP CONSTRAINT grants_doc_sha256_check, DROP CONSTRAINT grants_intent_hash_check,
    DROP CONSTRAINT grants_preview_sha256_check, DROP CONSTRAINT grants_voided_after_spent,
    ADD CONSTRAINT grants_row_check CHECK (actiond_grants_row_check(doc_sha256, intent_hash, preview_sha256, used_at, voided_at));
