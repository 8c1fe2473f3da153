-- For `actiond-bench`: with `--schema-sql sql/migrations/V20__frozen_agents_never_run.sql`
-- before it (which defines V20's per-row `proposals_check_update()` again), puts back the
-- per-row proposal checks that V27 replaced, behind V13's trigger, so the statement-level checks
-- can be measured against them with one build, in one session. Never apply it to a real
-- database.
DROP TRIGGER proposals_check_updates ON proposals;
DROP TRIGGER proposals_stamp_update ON proposals;
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
