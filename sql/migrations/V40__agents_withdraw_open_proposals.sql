-- V40: an agent may withdraw its own proposal while nobody has approved it yet (MCP Tasks'
-- `tasks/cancel`, docs/agents.md). `withdrawn` is a new final state, reached only from
-- `pending` or `escalated`, only by the agent-facing api (sql/functions/actiond_role_may.sql),
-- with a `proposal.withdrawn` event naming the agent. An approved proposal is never withdrawn:
-- the transition does not exist.

ALTER TABLE proposals DROP CONSTRAINT proposals_state_check;
ALTER TABLE proposals ADD CONSTRAINT proposals_state_check CHECK (state IN
    ('pending','escalated','approved','blocked','denied','expired',
     'executing','succeeded','failed','outcome_unknown','withdrawn'));

-- The lifecycle's rows; the statement trigger recompiles proposal_transition_legal().
INSERT INTO proposal_transitions (from_state, to_state) VALUES
    ('pending', 'withdrawn'), ('escalated', 'withdrawn');

-- The api changes only the state and the reason, and only its transaction's tenants (api_tenant).
GRANT UPDATE (state, decision_reason) ON proposals TO actiond_api;

-- The api's events: a submission (→ pending) or a withdrawal (pending | escalated → withdrawn),
-- by an agent, about a proposal; sql/functions/audit_events_api_agent.sql checks the agent is
-- the proposal's.
DROP POLICY api_write ON audit_events;
CREATE POLICY api_write ON audit_events FOR INSERT TO actiond_api
    WITH CHECK (actiond_tenant_visible(tenant_id) AND actor LIKE 'agent:%' AND proposal_id IS NOT NULL
                AND ((kind = 'proposal.submitted' AND from_state IS NULL AND to_state = 'pending')
                  OR (kind = 'proposal.withdrawn' AND from_state IN ('pending', 'escalated')
                      AND to_state = 'withdrawn')));

-- Retention purges withdrawn proposals like every other final one.
DROP POLICY retention_decided ON proposals;
CREATE POLICY retention_decided ON proposals FOR ALL TO actiond_retention
    USING (state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','withdrawn'))
    WITH CHECK (state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','withdrawn'));

-- The purge and history index covers the final states, withdrawn included, so the queries
-- that name all final states (retention.rs, queue_views.rs) still match its predicate.
DROP INDEX proposals_purge;
CREATE INDEX proposals_purge ON proposals (tenant_id, updated_at)
    WHERE purged_at IS NULL
      AND state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','withdrawn');
