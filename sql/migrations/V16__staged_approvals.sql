-- Staged approvals that re-route (a handler's `approvals: {stages, on_timeout}`).
--
-- When policy escalates a proposal whose handler declares stages, it writes one row per stage
-- that applies, in the same transaction; stage 1 opens at once. Every rule of a stage is
-- enforced here, whatever the caller, by the database clock:
--   * an approve names its stage, which must be the open one and not past its `due_at`
--     (`approvals_in_stage`); a person approves once per proposal (the approvals primary key),
--     so never in two stages;
--   * a stage opens only after the one before it completed or timed out; its `due_at` is
--     `now() + within` when it opens; it completes only with `required` distinct approvers of
--     its own; it times out only after `due_at`; what happened is never undone
--     (`approval_stages_check`);
--   * a staged proposal becomes `approved` only when its last stage completed
--     (`proposals_check_update`).
-- The audit events of every stage transition are written by the same transactions.

CREATE TABLE approval_stages (
    proposal_id   uuid NOT NULL,
    tenant_id     text NOT NULL,
    stage         integer NOT NULL CHECK (stage BETWEEN 1 AND 5),
    of_stages     integer NOT NULL CHECK (of_stages BETWEEN 1 AND 5),
    approvers     text NOT NULL CHECK (length(approvers) BETWEEN 1 AND 128),
    required      integer NOT NULL CHECK (required BETWEEN 1 AND 5),
    within_secs   double precision NOT NULL CHECK (within_secs > 0),
    on_timeout    text NOT NULL CHECK (on_timeout IN ('next', 'expire')),
    opened_at     timestamptz,
    due_at        timestamptz,
    completed_at  timestamptz,
    timed_out_at  timestamptz,
    PRIMARY KEY (proposal_id, stage),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals (tenant_id, id),
    CHECK (stage <= of_stages),
    CHECK (completed_at IS NULL OR timed_out_at IS NULL)
);
-- No index on open stages: a stage stays "open" when its proposal is denied or expires by
-- `escalation_ttl`, so such an index would grow with history. The sweeper starts from the
-- escalated proposals (`proposals_escalated`, live rows only) and reads their stages by key.

-- Which stage an approval was given in (NULL for proposals without stages, and for denies
-- given while no stage was open).
ALTER TABLE approvals ADD COLUMN stage integer;

-- Opening, completing and timing out, by the database clock, in order, once.
CREATE FUNCTION approval_stages_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    have integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.stage > NEW.of_stages OR NEW.completed_at IS NOT NULL OR NEW.timed_out_at IS NOT NULL THEN
            RAISE EXCEPTION 'a stage starts neither completed nor timed out' USING ERRCODE = 'check_violation';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM proposals WHERE id = NEW.proposal_id AND state = 'escalated') THEN
            RAISE EXCEPTION 'stages belong to an escalated proposal' USING ERRCODE = 'check_violation';
        END IF;
        IF NEW.stage = 1 THEN
            NEW.opened_at := now();
            NEW.due_at := now() + make_interval(secs => NEW.within_secs);
        ELSE
            NEW.opened_at := NULL;
            NEW.due_at := NULL;
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.proposal_id IS DISTINCT FROM OLD.proposal_id OR NEW.tenant_id IS DISTINCT FROM OLD.tenant_id
       OR NEW.stage IS DISTINCT FROM OLD.stage OR NEW.of_stages IS DISTINCT FROM OLD.of_stages
       OR NEW.approvers IS DISTINCT FROM OLD.approvers OR NEW.required IS DISTINCT FROM OLD.required
       OR NEW.within_secs IS DISTINCT FROM OLD.within_secs OR NEW.on_timeout IS DISTINCT FROM OLD.on_timeout
       OR (OLD.opened_at IS NOT NULL AND NEW.opened_at IS DISTINCT FROM OLD.opened_at)
       OR (OLD.completed_at IS NOT NULL AND NEW.completed_at IS DISTINCT FROM OLD.completed_at)
       OR (OLD.timed_out_at IS NOT NULL AND NEW.timed_out_at IS DISTINCT FROM OLD.timed_out_at)
       OR (NEW.due_at IS DISTINCT FROM OLD.due_at AND NEW.opened_at IS NOT DISTINCT FROM OLD.opened_at) THEN
        RAISE EXCEPTION 'a stage''s definition and what happened to it never change' USING ERRCODE = 'check_violation';
    END IF;
    IF OLD.opened_at IS NULL AND NEW.opened_at IS NOT NULL THEN
        IF NOT EXISTS (SELECT 1 FROM approval_stages s WHERE s.proposal_id = NEW.proposal_id AND s.stage = NEW.stage - 1
                       AND (s.completed_at IS NOT NULL OR s.timed_out_at IS NOT NULL)) THEN
            RAISE EXCEPTION 'stage % opens only after stage % completed or timed out', NEW.stage, NEW.stage - 1
                USING ERRCODE = 'check_violation';
        END IF;
        NEW.opened_at := now();
        NEW.due_at := now() + make_interval(secs => NEW.within_secs);
    END IF;
    IF OLD.completed_at IS NULL AND NEW.completed_at IS NOT NULL THEN
        SELECT count(DISTINCT subject) INTO have FROM approvals
        WHERE proposal_id = NEW.proposal_id AND stage = NEW.stage AND decision = 'approve';
        IF NEW.opened_at IS NULL OR have < NEW.required THEN
            RAISE EXCEPTION 'stage % needs % approvals of its own, has %', NEW.stage, NEW.required, have
                USING ERRCODE = 'check_violation';
        END IF;
        NEW.completed_at := now();
    END IF;
    IF OLD.timed_out_at IS NULL AND NEW.timed_out_at IS NOT NULL THEN
        IF NEW.opened_at IS NULL OR now() <= NEW.due_at THEN
            RAISE EXCEPTION 'stage % is not past its due time' , NEW.stage USING ERRCODE = 'check_violation';
        END IF;
        NEW.timed_out_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER approval_stages_check BEFORE INSERT OR UPDATE ON approval_stages
    FOR EACH ROW EXECUTE FUNCTION approval_stages_check();

-- An approve of a staged proposal counts only in the open stage, before its due time.
CREATE FUNCTION approvals_in_stage() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    s approval_stages%ROWTYPE;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM approval_stages WHERE proposal_id = NEW.proposal_id) THEN
        IF NEW.stage IS NOT NULL THEN
            RAISE EXCEPTION 'proposal % has no stages', NEW.proposal_id USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.decision = 'deny' AND NEW.stage IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT * INTO s FROM approval_stages WHERE proposal_id = NEW.proposal_id AND stage = NEW.stage;
    IF NOT FOUND OR s.opened_at IS NULL OR s.completed_at IS NOT NULL OR s.timed_out_at IS NOT NULL THEN
        RAISE EXCEPTION 'an approval of proposal % must name its open stage (got %)', NEW.proposal_id, NEW.stage
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.decision = 'approve' AND now() > s.due_at THEN
        RAISE EXCEPTION 'stage % of proposal % closed at % (within); the approval is refused', s.stage, NEW.proposal_id, s.due_at
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER approvals_in_stage BEFORE INSERT ON approvals
    FOR EACH ROW EXECUTE FUNCTION approvals_in_stage();

-- V13's update checks, unchanged, plus: a staged proposal is approved only after its last
-- stage completed. The rule reads `state` only, already in the trigger's WHEN clause.
CREATE OR REPLACE FUNCTION proposals_check_update() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- Nested, so roles that never approve (the executor cannot read approval_stages) never
    -- run the lookup.
    IF OLD.state = 'escalated' AND NEW.state = 'approved' THEN
        IF EXISTS (SELECT 1 FROM approval_stages s WHERE s.proposal_id = NEW.id
                   AND s.stage = s.of_stages AND s.completed_at IS NULL) THEN
            RAISE EXCEPTION 'proposal % has stages: it is approved only when its last stage completed', NEW.id
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $$;

-- What a stage was and what happened to it is history: no DELETE or TRUNCATE, even by the owner
-- (a deleted stage would leave its proposal with no open stage and no event saying why).
CREATE FUNCTION approval_stages_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'approval_stages rows are never deleted' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER approval_stages_no_delete BEFORE DELETE ON approval_stages
    FOR EACH ROW EXECUTE FUNCTION approval_stages_kept();
CREATE TRIGGER approval_stages_no_truncate BEFORE TRUNCATE ON approval_stages
    FOR EACH STATEMENT EXECUTE FUNCTION approval_stages_kept();

-- Escalation notices: one per stage that opens (stage 1 is the escalation itself).
ALTER TABLE web_notifications ADD COLUMN stage integer NOT NULL DEFAULT 1;
ALTER TABLE web_notifications DROP CONSTRAINT web_notifications_pkey;
ALTER TABLE web_notifications ADD PRIMARY KEY (proposal_id, stage);

-- Privileges: policy writes the stages when it escalates and moves timed-out ones on; web and
-- break-glass complete them (and move a timed-out one on when a decision finds it). Nobody
-- deletes a stage.
GRANT SELECT, INSERT, UPDATE (opened_at, due_at, timed_out_at) ON approval_stages TO actiond_policy;
GRANT SELECT, UPDATE (opened_at, due_at, completed_at, timed_out_at) ON approval_stages TO actiond_web, actiond_admin;
ALTER TABLE approval_stages ENABLE ROW LEVEL SECURITY;
ALTER TABLE approval_stages FORCE ROW LEVEL SECURITY;
CREATE POLICY workers ON approval_stages FOR ALL TO actiond_policy, actiond_admin USING (true) WITH CHECK (true);
CREATE POLICY web_tenant ON approval_stages FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
