-- V19: the foreign-key checks on `proposals` read its key, however small the table was when
-- a connection first planned them.
--
-- Measured (issue #10, `actiond-bench --pg-stat-statements` with `auto_explain` on a fresh
-- database): the check that `grants`, `approvals`, `approval_stages`, `web_notifications` and
-- `proposal_previews` run for every row they insert,
--     SELECT 1 FROM ONLY proposals x WHERE tenant_id = $1 AND id = $2 FOR KEY SHARE OF x
-- was planned, while the table was still small, as an index scan of `proposals_history` on
-- `tenant_id` alone with `id` as a filter. Postgres keeps that plan for the connection, so each
-- check walked every proposal of the tenant: 0.01 ms at first, 8–12 ms a few thousand
-- proposals later, and 31% of Postgres time on the allow path (the policy worker's grant
-- insert). `proposals_history` led with `tenant_id` only because every query that reads it also
-- names the agent; an agent id is a UUID unique across tenants (`agents.id` is the primary
-- key), so the same index without `tenant_id` serves those queries (the agent's history of an
-- action, its open and escalated proposals) through `agent_id`, and the only indexes left
-- whose leading column the check can use are the unique keys `proposals_pkey` (`id`) and
-- `proposals_tenant_id_id_key` (`tenant_id, id`): one probe each, whatever the plan.
--
-- No rule changes: the foreign keys, their columns and the unique key they reference stay as
-- they are; no row is moved. The index is rebuilt inside this migration's transaction, which
-- blocks writes to `proposals` while it builds (seconds per million rows).

DROP INDEX proposals_history;
CREATE INDEX proposals_history ON proposals (agent_id, action, created_at);
