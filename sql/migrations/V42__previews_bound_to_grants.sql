-- V42: a preview the grant is bound to, and warnings from the preview.
--
-- - proposal_previews keeps the preview document the approver is shown, canonical (RFC 8785
--   JSON: action, proposal id, the time it was read in microseconds from the database clock,
--   the lines, the handler's binding fields and its warnings) with its SHA-256. `binding` and
--   `warnings` are copies of two of its members, for the executor's comparison and the queue.
-- - grants.preview_sha256: the hash of the stored preview a person approved, signed inside the
--   grant (services/core/src/grant.rs); NULL when there was none (policy's allow, actions
--   without a preview, a decision made before the preview was read).
-- - `executing → stale` joins the lifecycle: before running, the executor read the provider
--   again with the same handler preview code and a binding field had changed, so the handler
--   did not run. Final; only the executor makes it (sql/functions/actiond_role_may.sql), with a
--   `proposal.stale` event.

ALTER TABLE proposal_previews
    ADD COLUMN canonical text CHECK (canonical IS NULL OR length(canonical) <= 200000),
    ADD COLUMN sha256 text CHECK (sha256 IS NULL OR (length(sha256) = 64 AND ltrim(sha256, '0123456789abcdef') = '')),
    ADD COLUMN binding jsonb,
    ADD COLUMN warnings jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(warnings) = 'array'),
    ADD CONSTRAINT proposal_previews_canonical_complete CHECK ((canonical IS NULL) = (sha256 IS NULL));

ALTER TABLE grants
    ADD COLUMN preview_sha256 text CHECK (preview_sha256 IS NULL
        OR (length(preview_sha256) = 64 AND ltrim(preview_sha256, '0123456789abcdef') = ''));

ALTER TABLE proposals DROP CONSTRAINT proposals_state_check;
ALTER TABLE proposals ADD CONSTRAINT proposals_state_check CHECK (state = ANY (ARRAY['pending', 'escalated',
    'approved', 'blocked', 'denied', 'expired', 'executing', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn',
    'amended', 'stale']));

INSERT INTO proposal_transitions (from_state, to_state) VALUES ('executing', 'stale');

-- A stale proposal is decided: retention may purge it as it purges the other final states.
DROP POLICY retention_decided ON proposals;
CREATE POLICY retention_decided ON proposals TO actiond_retention
    USING (state IN ('blocked', 'denied', 'expired', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended', 'stale'))
    WITH CHECK (state IN ('blocked', 'denied', 'expired', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended', 'stale'));

DROP INDEX proposals_purge;
CREATE INDEX proposals_purge ON proposals (tenant_id, updated_at)
    WHERE purged_at IS NULL
      AND state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','withdrawn','amended','stale');

DROP POLICY executor_write ON audit_events;
CREATE POLICY executor_write ON audit_events FOR INSERT TO actiond_executor
    WITH CHECK (kind IN ('grant.spent', 'grant.rejected', 'grant.expired', 'proposal.blocked_policy_changed',
                         'proposal.executed', 'proposal.outcome_unknown', 'proposal.stale'));
