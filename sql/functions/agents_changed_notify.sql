-- Any UPDATE, DELETE or TRUNCATE of agents or agent_workload_identities notifies
-- actiond_agents at commit (statement-level triggers), so api processes can cache agent lookups
-- and empty the cache the moment an agent is revoked, frozen, unfrozen or changed.
CREATE OR REPLACE FUNCTION agents_changed_notify()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_notify('actiond_agents', '');
    RETURN NULL;
END $function$;

CREATE OR REPLACE TRIGGER agent_workload_identities_changed AFTER DELETE OR UPDATE OR TRUNCATE ON agent_workload_identities FOR EACH STATEMENT EXECUTE FUNCTION agents_changed_notify();

CREATE OR REPLACE TRIGGER agents_changed AFTER DELETE OR UPDATE OR TRUNCATE ON agents FOR EACH STATEMENT EXECUTE FUNCTION agents_changed_notify();
