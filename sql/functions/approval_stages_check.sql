-- Staged approvals: a stage opens, completes and times out by the database clock, in order,
-- once; completing needs the stage's own approvals; nothing about a stage changes once it
-- happened.
CREATE OR REPLACE FUNCTION approval_stages_check()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$;

CREATE OR REPLACE TRIGGER approval_stages_check BEFORE INSERT OR UPDATE ON approval_stages FOR EACH ROW EXECUTE FUNCTION approval_stages_check();
