-- The CHECK rules of a proposal row (V50: the one CHECK constraint `proposals_row_check` calls
-- this on every INSERT and UPDATE of a row, as Postgres evaluates CHECK constraints). Each rule
-- is one of V1–V49's constraints, tested in their name order (the order Postgres tests CHECK
-- constraints in), and a refusal is theirs: SQLSTATE 23514, the message
-- `new row for relation "proposals" violates check constraint "<name>"`, and the constraint
-- and table fields of the error set to that name and `proposals`. As with a CHECK constraint, a
-- rule whose test is NULL passes (`IS FALSE`). Why a function and not ten constraints: Postgres
-- reads every CHECK constraint of a table back from its stored text and prepares it before
-- the first row of each statement that writes the table; ten constraints were 8.7 kB of text
-- per statement, a quarter of Postgres' work for a proposal written one per statement.
-- A rule added here is a rule added to `proposals`: say so in a migration that validates the
-- stored rows (this file changing does not re-check them).
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
