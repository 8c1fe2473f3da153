-- V43: the effect, read back. After a handler reports success the executor reads the provider
-- again and records what it found as a `proposal.effect` audit event; a run whose read-back is
-- not what was approved ends `effect_mismatch` (final, never re-run, like `outcome_unknown`).
-- The same read-back, under the spent grant's idempotency key, settles `outcome_unknown`:
-- `outcome_unknown → succeeded | failed | effect_mismatch`, by the executor only
-- (sql/functions/actiond_role_may.sql), never by running the handler again. Every list below
-- keeps V42's `stale` and `proposal.stale`.

ALTER TABLE proposals DROP CONSTRAINT proposals_state_check;
ALTER TABLE proposals ADD CONSTRAINT proposals_state_check CHECK (state = ANY (ARRAY['pending', 'escalated',
    'approved', 'blocked', 'denied', 'expired', 'executing', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn',
    'amended', 'stale', 'effect_mismatch']));
ALTER TABLE proposals DROP CONSTRAINT proposals_outcome_check;
ALTER TABLE proposals ADD CONSTRAINT proposals_outcome_check CHECK (outcome = ANY (ARRAY['succeeded', 'failed',
    'outcome_unknown', 'effect_mismatch']));

INSERT INTO proposal_transitions (from_state, to_state) VALUES
    ('executing', 'effect_mismatch'),
    ('outcome_unknown', 'succeeded'),
    ('outcome_unknown', 'failed'),
    ('outcome_unknown', 'effect_mismatch');

-- effect_mismatch is decided: retention purges it as it purges the other final states.
DROP POLICY retention_decided ON proposals;
CREATE POLICY retention_decided ON proposals TO actiond_retention
    USING (state IN ('blocked', 'denied', 'expired', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended', 'stale', 'effect_mismatch'))
    WITH CHECK (state IN ('blocked', 'denied', 'expired', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended', 'stale', 'effect_mismatch'));

DROP INDEX proposals_purge;
CREATE INDEX proposals_purge ON proposals (tenant_id, updated_at)
    WHERE purged_at IS NULL
      AND state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','withdrawn','amended','stale','effect_mismatch');

-- The sweep that settles outcome_unknown finds its rows by this partial index.
CREATE INDEX proposals_outcome_unknown ON proposals (finished_at) WHERE state = 'outcome_unknown' AND purged_at IS NULL;

DROP POLICY executor_write ON audit_events;
CREATE POLICY executor_write ON audit_events FOR INSERT TO actiond_executor
    WITH CHECK (kind IN ('grant.spent', 'grant.rejected', 'grant.expired', 'proposal.blocked_policy_changed',
                         'proposal.executed', 'proposal.outcome_unknown', 'proposal.stale', 'proposal.effect'));
