-- A revocation is final (V51): once `agents.revoked_at` is set, no role that honours triggers
-- may clear it or move it to another time. The service roles that revoke (`actiond_admin`,
-- `actiond_web`) hold UPDATE (revoked_at) to set it, and a column privilege cannot say "only
-- from NULL": without this rule a taken-over web login could bring a revoked agent's token back
-- with `UPDATE agents SET revoked_at = NULL`, and no audit event would say so. The trigger fires
-- only on such an update (its WHEN clause), so setting `revoked_at` the first time, freezing
-- and every other update of `agents` never call the function.
CREATE OR REPLACE FUNCTION agents_revocation_final()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    RAISE EXCEPTION 'agent % was revoked at %: a revocation is not undone', OLD.id, OLD.revoked_at
        USING ERRCODE = 'check_violation';
END $function$;

CREATE OR REPLACE TRIGGER agents_revocation_final BEFORE UPDATE ON agents FOR EACH ROW WHEN (OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at) EXECUTE FUNCTION agents_revocation_final();
