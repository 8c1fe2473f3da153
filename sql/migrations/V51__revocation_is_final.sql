-- V51: a revocation is final.
--
-- docs/security.md and V34 say that a revocation is never undone, but nothing held it:
-- `actiond_admin` (V4) and `actiond_web` (V37) hold UPDATE (revoked_at) on `agents` so they can
-- revoke, and a column privilege cannot tell setting the column from clearing it. A taken-over
-- web login could run `UPDATE agents SET revoked_at = NULL` (or move the time) in a tenant it
-- sees, and the revoked agent's token authenticated again, with no audit event.
--
-- Now a BEFORE UPDATE trigger on `agents` refuses any change of `revoked_at` once it is set,
-- for every role that honours triggers (SQLSTATE 23514, "agent … was revoked at …: a revocation
-- is not undone"). Its WHEN clause (`OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT
-- FROM OLD.revoked_at`) keeps it off every other update: the revocation itself (from NULL),
-- freezing and unfreezing. No statement of a proposal's path updates `agents`. Nothing in
-- actiond changes `revoked_at` after it is set (`agents::revoke` updates only rows whose
-- `revoked_at IS NULL`), so no caller changes.
--
-- The function and its trigger live in `sql/functions/agents_revocation_final.sql` (the file to
-- edit); they are defined here as well so that the rule holds from the commit of this migration,
-- not only from the function files' transaction that follows it. No row, privilege or other
-- rule changes.

CREATE OR REPLACE FUNCTION agents_revocation_final()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'agent % was revoked at %: a revocation is not undone', OLD.id, OLD.revoked_at
        USING ERRCODE = 'check_violation';
END $function$;

CREATE OR REPLACE TRIGGER agents_revocation_final BEFORE UPDATE ON agents FOR EACH ROW
    WHEN (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at)
    EXECUTE FUNCTION agents_revocation_final();
