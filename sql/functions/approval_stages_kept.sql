-- What a stage was and what happened to it is history: no DELETE or TRUNCATE, even by the owner
-- (a deleted stage would leave its proposal with no open stage and no event saying why).
CREATE OR REPLACE FUNCTION approval_stages_kept()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'approval_stages rows are never deleted' USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE OR REPLACE TRIGGER approval_stages_no_delete BEFORE DELETE ON approval_stages FOR EACH ROW EXECUTE FUNCTION approval_stages_kept();

CREATE OR REPLACE TRIGGER approval_stages_no_truncate BEFORE TRUNCATE ON approval_stages FOR EACH STATEMENT EXECUTE FUNCTION approval_stages_kept();
