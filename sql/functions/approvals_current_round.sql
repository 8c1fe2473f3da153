-- An approval (and its passkey evidence) belongs to its proposal's current approval round (V45):
-- the database sets the round, whatever the writer sent, so nobody writes into a round that a
-- run sent back to the approvers made void.
CREATE OR REPLACE FUNCTION approvals_current_round()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    SELECT p.approval_round INTO NEW.round FROM proposals p WHERE p.id = NEW.proposal_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'proposal % not found', NEW.proposal_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END $function$;

CREATE OR REPLACE TRIGGER approvals_current_round BEFORE INSERT ON approvals FOR EACH ROW EXECUTE FUNCTION approvals_current_round();

CREATE OR REPLACE TRIGGER approval_passkeys_current_round BEFORE INSERT ON approval_passkeys FOR EACH ROW EXECUTE FUNCTION approvals_current_round();
