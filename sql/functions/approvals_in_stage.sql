-- An approve of a staged proposal counts only in the open stage, before its due time (database
-- clock).
CREATE OR REPLACE FUNCTION approvals_in_stage()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
END $function$;

CREATE OR REPLACE TRIGGER approvals_in_stage BEFORE INSERT ON approvals FOR EACH ROW EXECUTE FUNCTION approvals_in_stage();
