-- V45: `on_stale: reapprove` (issue 34, point 2: "or goes back to the approvers with a fresh
-- preview, per handler setting").
--
-- When the executor's read before a run differs from the preview a person's grant is bound to,
-- a handler whose tenant document entry says `on_stale: reapprove` does not run and does not end
-- `stale`: in one transaction (database clock) the executor voids the grant it just spent,
-- stores the fresh read as the proposal's preview, and moves the proposal `executing →
-- escalated` with its approvals void (`approval_round` + 1), writing `proposal.reescalated`.
-- People then decide again on the fresh preview; a new grant is issued for the new round.
--
-- - grants: one live grant per proposal (was: one grant); a voided grant was spent first and is
--   never spendable again (the spend needs `used_at IS NULL`; the claim reads live grants).
-- - approvals / approval_passkeys: the round joins their keys, so the same person may approve
--   again in the new round; the round is set by the database from the proposal
--   (sql/functions/approvals_current_round.sql), never by the writer; decisions count only the
--   proposal's current round.
-- - `executing → escalated` joins the lifecycle, executor only (actiond_role_may), and only as
--   above (proposals_check_update): the round moves by one, no live grant is left, a preview was
--   read in this transaction, and the proposal's document version says `on_stale: reapprove`.

ALTER TABLE proposals ADD COLUMN approval_round integer NOT NULL DEFAULT 0 CHECK (approval_round >= 0);
GRANT UPDATE (approval_round) ON proposals TO actiond_executor;

ALTER TABLE grants
    ADD COLUMN voided_at timestamptz,
    ADD CONSTRAINT grants_voided_after_spent CHECK (voided_at IS NULL OR used_at IS NOT NULL);
ALTER TABLE grants DROP CONSTRAINT grants_proposal_id_key;
CREATE UNIQUE INDEX grants_live_proposal ON grants (proposal_id) WHERE voided_at IS NULL;
GRANT UPDATE (voided_at) ON grants TO actiond_executor;

ALTER TABLE approvals ADD COLUMN round integer NOT NULL DEFAULT 0;
ALTER TABLE approval_passkeys ADD COLUMN round integer NOT NULL DEFAULT 0;
ALTER TABLE approval_passkeys DROP CONSTRAINT approval_passkeys_proposal_id_issuer_subject_fkey;
ALTER TABLE approval_passkeys DROP CONSTRAINT approval_passkeys_pkey;
ALTER TABLE approvals DROP CONSTRAINT approvals_pkey;
ALTER TABLE approvals ADD CONSTRAINT approvals_pkey PRIMARY KEY (proposal_id, round, issuer, subject);
ALTER TABLE approval_passkeys ADD CONSTRAINT approval_passkeys_pkey PRIMARY KEY (proposal_id, round, issuer, subject);
ALTER TABLE approval_passkeys ADD CONSTRAINT approval_passkeys_approval_fkey
    FOREIGN KEY (proposal_id, round, issuer, subject) REFERENCES approvals (proposal_id, round, issuer, subject);

-- The fresh preview replaces the one the void grant was bound to.
GRANT UPDATE ON proposal_previews TO actiond_executor;

INSERT INTO proposal_transitions (from_state, to_state) VALUES ('executing', 'escalated');

DROP POLICY executor_write ON audit_events;
CREATE POLICY executor_write ON audit_events FOR INSERT TO actiond_executor
    WITH CHECK (kind IN ('grant.spent', 'grant.rejected', 'grant.expired', 'proposal.blocked_policy_changed',
                         'proposal.executed', 'proposal.outcome_unknown', 'proposal.stale', 'proposal.effect',
                         'proposal.reescalated'));
