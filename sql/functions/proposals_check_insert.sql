-- A proposal starts as pending. Runs only for an INSERT whose state is not 'pending' (the
-- trigger's WHEN clause), so a valid insert runs no PL/pgSQL.
CREATE OR REPLACE FUNCTION proposals_check_insert()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'a proposal starts as pending, not %', NEW.state USING ERRCODE = 'check_violation';
END $function$;

CREATE OR REPLACE TRIGGER proposals_transition_insert BEFORE INSERT ON proposals FOR EACH ROW WHEN ((new.state <> 'pending'::text)) EXECUTE FUNCTION proposals_check_insert();
