-- A cheaper proposal for Postgres, with the same rules. Measured on the allow path (bench), the
-- three single-row writes to `proposals` (insert, approved → executing, → finished) and the
-- executor's claim dominated Postgres time: every write ran two PL/pgSQL triggers, every claim
-- changed an indexed column (so no update was HOT), and the insert checked a foreign key that
-- another foreign key already implies. Nothing here moves or rewrites rows.

-- 1. Triggers that run PL/pgSQL only when there is something to check.
--
-- Before: `proposals_transition` (BEFORE INSERT OR UPDATE, every row) and
-- `proposals_transition_role` (BEFORE UPDATE when the state changes), two PL/pgSQL calls per
-- state change and one per insert or lease update. After: the same checks, in the same order,
-- with the same messages and error codes, in one function; the triggers' WHEN clauses (plain
-- expressions, no PL/pgSQL) skip it for a valid insert and for an update that changes neither
-- the state, nor the purge mark, nor an identity column (a lease renewal).

-- INSERT: a proposal starts as pending.
CREATE FUNCTION proposals_check_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a proposal starts as pending, not %', NEW.state USING ERRCODE = 'check_violation';
END $$;

-- UPDATE: legal transition (proposal_transitions), a purge is never undone, identity columns
-- never change (except params cleared once by a purge of a decided proposal), then the role
-- check (actiond_role_may) — the order the two V5 triggers ran in, by name.
CREATE FUNCTION proposals_check_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT EXISTS (SELECT 1 FROM proposal_transitions t
                       WHERE t.from_state = OLD.state AND t.to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        NEW.updated_at := now();
    END IF;
    IF OLD.purged_at IS NOT NULL AND NEW.purged_at IS DISTINCT FROM OLD.purged_at THEN
        RAISE EXCEPTION 'a purge is not undone' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
       OR NEW.action IS DISTINCT FROM OLD.action OR NEW.target IS DISTINCT FROM OLD.target
       OR NEW.intent_hash IS DISTINCT FROM OLD.intent_hash
       OR (NEW.params_json IS DISTINCT FROM OLD.params_json
           AND NOT (OLD.purged_at IS NULL AND NEW.purged_at IS NOT NULL AND NEW.params_json = '{}'
                    AND NEW.state = OLD.state
                    AND OLD.state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown'))) THEN
        RAISE EXCEPTION 'proposal identity columns are immutable' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state AND NOT actiond_role_may(OLD.state, NEW.state) THEN
        RAISE EXCEPTION 'role % may not move a proposal % -> %', current_user, OLD.state, NEW.state
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;

DROP TRIGGER proposals_transition ON proposals;
DROP TRIGGER proposals_transition_role ON proposals;
CREATE TRIGGER proposals_transition_insert BEFORE INSERT ON proposals
    FOR EACH ROW WHEN (NEW.state <> 'pending') EXECUTE FUNCTION proposals_check_insert();
CREATE TRIGGER proposals_transition_update BEFORE UPDATE ON proposals
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state
                       OR NEW.purged_at IS DISTINCT FROM OLD.purged_at
                       OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
                       OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
                       OR NEW.action IS DISTINCT FROM OLD.action
                       OR NEW.target IS DISTINCT FROM OLD.target
                       OR NEW.intent_hash IS DISTINCT FROM OLD.intent_hash
                       OR NEW.params_json IS DISTINCT FROM OLD.params_json)
    EXECUTE FUNCTION proposals_check_update();
-- The V1 function is no longer attached to anything.
DROP FUNCTION proposals_check_transition();
DROP FUNCTION proposals_check_role();

-- Which role may make which transition: the same answers as V8's function (web and admin may
-- also expire an escalation whose TTL ran out at decision time), but the cheap
-- membership tests come first and the superuser lookup (a catalog view read) last, so a service
-- role making a transition it may make never reads pg_roles.
CREATE OR REPLACE FUNCTION actiond_role_may(from_state text, to_state text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF pg_has_role(current_user, 'actiond_policy', 'MEMBER')
       AND ((from_state = 'pending' AND to_state IN ('approved','escalated','blocked','expired'))
         OR (from_state = 'escalated' AND to_state = 'expired')) THEN
        RETURN true;
    END IF;
    IF (pg_has_role(current_user, 'actiond_web', 'MEMBER') OR pg_has_role(current_user, 'actiond_admin', 'MEMBER'))
       AND from_state = 'escalated' AND to_state IN ('approved','denied','expired') THEN
        RETURN true;
    END IF;
    IF pg_has_role(current_user, 'actiond_executor', 'MEMBER')
       AND ((from_state = 'approved' AND to_state IN ('executing','blocked','expired'))
         OR (from_state = 'executing' AND to_state IN ('succeeded','failed','outcome_unknown'))) THEN
        RETURN true;
    END IF;
    RETURN coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false);
END $$;

-- 2. A lease change is a HOT update. An update is HOT (no index touched) only when no indexed
-- column changes; `lease_until` was the key of `proposals_executing`, so every claim and lease
-- renewal of an `approved` row wrote a new entry into every index of the table. The sweeper
-- reads the executing rows (at most the executors' in-flight work) and compares their lease
-- itself; the index's key is now a column that never changes.
DROP INDEX proposals_executing;
CREATE INDEX proposals_executing ON proposals (id) WHERE state = 'executing';

-- 3. One index fewer on every write. No query reads `proposals_agent_created`: an agent's history
-- is read through `proposals_history` (tenant, agent, action, created_at), the per-agent open
-- escalation count through the same prefix.
DROP INDEX proposals_agent_created;

-- 4. One foreign-key check fewer per insert. `(tenant_id, agent_id) REFERENCES agents
-- (tenant_id, id)` already proves the tenant exists (agents.tenant_id references tenants, and a
-- referenced agent or tenant cannot be deleted), so the direct reference to tenants adds a
-- lookup and a row lock per insert and no rule.
ALTER TABLE proposals DROP CONSTRAINT proposals_tenant_id_fkey;
