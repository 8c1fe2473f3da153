-- V41: approve with an edit. A person may change an escalated proposal's editable params
-- (declared per handler in services/core/src/handlers) instead of denying it; the edited
-- intent is a NEW proposal, submitted by that person in the agent's name, that policy
-- evaluates like any other, and the original ends `amended` (final).
--
-- - proposals.amended_from: the original, on the new proposal (one amendment per original);
--   amended_by: the person (`approver:<sub>` or `operator:<sub>`); amendment_diff: the
--   field-by-field change, `[{"field", "from", "to"}, …]`.
-- - `escalated → amended` joins the lifecycle; only the web and admin roles make it
--   (sql/functions/actiond_role_may.sql), and only when the amending proposal exists
--   (sql/functions/proposals_check_update.sql). The amending proposal must name an escalated
--   original of the same tenant, agent, action and target (sql/functions/proposals_check_insert.sql).
-- - The web and admin roles may insert a proposal only as an amendment (a restrictive policy),
--   and write its `proposal.submitted` and the original's `proposal.amended` events. The api
--   gets no privilege on the new columns: an agent cannot file an amendment.

ALTER TABLE proposals
    ADD COLUMN amended_from uuid REFERENCES proposals (id),
    ADD COLUMN amended_by text CHECK (amended_by IS NULL OR length(amended_by) BETWEEN 1 AND 300),
    ADD COLUMN amendment_diff jsonb CHECK (amendment_diff IS NULL OR jsonb_typeof(amendment_diff) = 'array'),
    ADD CONSTRAINT proposals_amendment_complete CHECK (
        (amended_from IS NULL AND amended_by IS NULL AND amendment_diff IS NULL)
        OR (amended_from IS NOT NULL AND amended_by IS NOT NULL AND amendment_diff IS NOT NULL));
CREATE UNIQUE INDEX proposals_amended_from ON proposals (amended_from) WHERE amended_from IS NOT NULL;

ALTER TABLE proposals DROP CONSTRAINT proposals_state_check;
ALTER TABLE proposals ADD CONSTRAINT proposals_state_check CHECK (state = ANY (ARRAY['pending', 'escalated',
    'approved', 'blocked', 'denied', 'expired', 'executing', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended']));

INSERT INTO proposal_transitions (from_state, to_state) VALUES ('escalated', 'amended');

GRANT INSERT (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash, agent_reason,
              source_text, session_id, request_sha256, amended_from, amended_by, amendment_diff)
    ON proposals TO actiond_web, actiond_admin;
GRANT INSERT ON proposal_delegations TO actiond_web, actiond_admin;

CREATE POLICY amendments_only ON proposals AS RESTRICTIVE FOR INSERT TO actiond_web, actiond_admin
    WITH CHECK (amended_from IS NOT NULL);

-- An amended proposal is decided: retention may purge it as it purges the other final states.
DROP POLICY retention_decided ON proposals;
CREATE POLICY retention_decided ON proposals TO actiond_retention
    USING (state IN ('blocked', 'denied', 'expired', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended'))
    WITH CHECK (state IN ('blocked', 'denied', 'expired', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended'));

-- The purge and history index covers every final state, amended included, so the queries that
-- name all final states (retention.rs, queue_views.rs) still match its predicate.
DROP INDEX proposals_purge;
CREATE INDEX proposals_purge ON proposals (tenant_id, updated_at)
    WHERE purged_at IS NULL
      AND state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','withdrawn','amended');

DROP POLICY web_write ON audit_events;
CREATE POLICY web_write ON audit_events FOR INSERT TO actiond_web
    WITH CHECK (actiond_tenant_visible(tenant_id, true)
                AND (kind IN ('approval.recorded', 'approval.decided', 'approval.refused', 'proposal.expired',
                              'approval.stage_opened', 'approval.stage_completed', 'approval.stage_timed_out',
                              'agent.frozen', 'agent.unfrozen', 'agent.revoked', 'proposal.decided', 'passkey.registered',
                              'passkey.registration_refused', 'proposal.amended')
                     OR (kind = 'proposal.submitted' AND actor LIKE 'approver:%'
                         AND from_state IS NULL AND to_state = 'pending')));
DROP POLICY admin_write ON audit_events;
CREATE POLICY admin_write ON audit_events FOR INSERT TO actiond_admin
    WITH CHECK (kind IN ('tenant.document_applied', 'tenant.shadow_stored', 'tenant.shadow_promoted',
                         'agent.created', 'agent.revoked', 'agent.frozen', 'agent.unfrozen', 'proposal.decided',
                         'approval.breakglass', 'approval.recorded', 'approval.decided', 'approval.refused',
                         'proposal.expired', 'approval.stage_opened', 'approval.stage_completed',
                         'approval.stage_timed_out', 'proposal.amended')
                OR (kind = 'proposal.submitted' AND actor LIKE 'operator:%'
                    AND from_state IS NULL AND to_state = 'pending'));
