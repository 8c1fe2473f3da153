-- Every change to an agent or to its workload identity announces itself at commit, so each api
-- process can keep a short-lived cache of its per-request agent lookups and drop it the moment
-- anything about an agent changes (revocation, freeze, unfreeze, a new expiry, a deleted
-- identity). Before, the api read `agents` on every request to learn that a token was still
-- live; now it reads it once per token and cache lifetime, and a revocation still takes effect
-- at once: the api empties its cache when the notification arrives, and uses no cache while its
-- LISTEN connection is down.
--
-- One statement-level trigger per table: one notification per statement whatever the number
-- of rows, and Postgres folds identical notifications of one transaction into one. Inserting
-- an agent needs no notice (the api caches only live agents it has found). Nothing else changes:
-- no row is moved, no privilege is granted (pg_notify needs none).

CREATE FUNCTION agents_changed_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('actiond_agents', '');
    RETURN NULL;
END $$;

CREATE TRIGGER agents_changed AFTER UPDATE OR DELETE OR TRUNCATE ON agents
    FOR EACH STATEMENT EXECUTE FUNCTION agents_changed_notify();
CREATE TRIGGER agent_workload_identities_changed AFTER UPDATE OR DELETE OR TRUNCATE ON agent_workload_identities
    FOR EACH STATEMENT EXECUTE FUNCTION agents_changed_notify();
