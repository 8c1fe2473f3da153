-- V21: the per-agent cap on open escalations reads that agent's escalated proposals only.
--
-- Every submission checks, in its INSERT, that the agent has fewer than the tenant's
-- `max_open_escalations_per_agent` proposals in `escalated`:
--     (SELECT count(*) FROM proposals WHERE tenant_id = $2 AND agent_id = $3 AND state = 'escalated')
-- The api prepares that statement once per connection. Measured (issue #10, `actiond-bench`
-- with `auto_explain`): its plan counted through `proposals_history` on `agent_id`, filtering
-- on the state, so each submission walked the agent's whole history (2,996 rows, 4,000 buffers
-- and 4-6 ms for an agent with 3,000 proposals; 37% of Postgres time on the allow path), and
-- it grows with every proposal the agent ever made. `proposals_escalated` cannot serve it: it
-- is keyed `(tenant_id, created_at)` for the approval queue.
--
-- This partial index holds one entry per escalated proposal and none for the allow path, so it
-- costs nothing on proposals that are never escalated; the count reads the agent's open
-- escalations (at most the cap) whatever the table's size or the plan's age.
--
-- `agent_id IS NOT NULL` is always true (the column is NOT NULL) and is there for the planner:
-- the cap's `agent_id = $3` implies it, so the cap can use this index, while a query that names
-- no agent cannot. Without it the queue gauge's per-tenant read of the escalated queue (ordered
-- by `created_at`, at most 1,000 rows through `proposals_escalated`) was planned as a full
-- read of this index plus a sort: every tenant's escalated rows, once per tenant.
--
-- No rule changes and no row is moved. Built inside this migration's transaction, which
-- blocks writes to `proposals` while it builds (only escalated rows are indexed).

CREATE INDEX proposals_escalated_by_agent ON proposals (agent_id)
    WHERE state = 'escalated' AND agent_id IS NOT NULL;
