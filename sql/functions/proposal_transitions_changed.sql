-- After any change of proposal_transitions (statement level, same transaction), recompiles
-- proposal_transition_legal() with actiond_compile_transitions().
CREATE OR REPLACE FUNCTION proposal_transitions_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM actiond_compile_transitions();
    RETURN NULL;
END $function$;

CREATE OR REPLACE TRIGGER proposal_transitions_compile AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON proposal_transitions FOR EACH STATEMENT EXECUTE FUNCTION proposal_transitions_changed();
