-- A passkey assertion stored beside its approval is evidence: no UPDATE, DELETE or TRUNCATE,
-- by any role.
CREATE OR REPLACE FUNCTION approval_passkeys_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'approval_passkeys is append-only' USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE OR REPLACE TRIGGER approval_passkeys_no_truncate BEFORE TRUNCATE ON approval_passkeys FOR EACH STATEMENT EXECUTE FUNCTION approval_passkeys_append_only();

CREATE OR REPLACE TRIGGER approval_passkeys_no_update BEFORE DELETE OR UPDATE ON approval_passkeys FOR EACH ROW EXECUTE FUNCTION approval_passkeys_append_only();
