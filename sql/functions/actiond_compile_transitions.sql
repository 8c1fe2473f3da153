-- The proposal lifecycle, compiled: regenerates proposal_transition_legal(from, to), an
-- IMMUTABLE SQL expression, from the rows of proposal_transitions. Called by the statement
-- trigger proposal_transitions_changed (sql/functions/proposal_transitions_changed.sql) after
-- every change of that table, so the table stays the one place the lifecycle is written and
-- checking a transition runs no query. Only the owner may execute it.
CREATE OR REPLACE FUNCTION actiond_compile_transitions()
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
END $function$;
