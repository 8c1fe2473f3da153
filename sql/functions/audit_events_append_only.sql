-- The audit log and its seals are append-only: no UPDATE, DELETE or TRUNCATE on audit_events,
-- audit_event_hashes, audit_seals and audit_moved_events (history imported from another cell,
-- V44), by any role that honours triggers. (The database owner can
-- disable triggers: sealing, not this, is what makes rewriting history detectable.)
CREATE OR REPLACE FUNCTION audit_events_append_only()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only' USING ERRCODE = 'insufficient_privilege';
END $function$;

CREATE OR REPLACE TRIGGER audit_event_hashes_no_truncate BEFORE TRUNCATE ON audit_event_hashes FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

CREATE OR REPLACE TRIGGER audit_event_hashes_no_update BEFORE DELETE OR UPDATE ON audit_event_hashes FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE OR REPLACE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

CREATE OR REPLACE TRIGGER audit_events_no_update BEFORE DELETE OR UPDATE ON audit_events FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE OR REPLACE TRIGGER audit_seals_no_truncate BEFORE TRUNCATE ON audit_seals FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

CREATE OR REPLACE TRIGGER audit_seals_no_update BEFORE DELETE OR UPDATE ON audit_seals FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE OR REPLACE TRIGGER audit_moved_events_no_truncate BEFORE TRUNCATE ON audit_moved_events FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

CREATE OR REPLACE TRIGGER audit_moved_events_no_update BEFORE DELETE OR UPDATE ON audit_moved_events FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
