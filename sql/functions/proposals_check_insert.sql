-- A proposal starts as pending; an amendment (V41: `amended_from` set, written by a person
-- approving with an edit) must name an escalated proposal of the same tenant, agent, action
-- and target, and be that proposal's only amendment (a unique index). Runs only for an INSERT
-- whose state is not 'pending' or that is an amendment (the trigger's WHEN clause), so an
-- agent's valid submission runs no PL/pgSQL.
CREATE OR REPLACE FUNCTION proposals_check_insert()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.state <> 'pending' THEN
        RAISE EXCEPTION 'a proposal starts as pending, not %', NEW.state USING ERRCODE = 'check_violation';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM proposals o
                   WHERE o.id = NEW.amended_from AND o.tenant_id = NEW.tenant_id AND o.agent_id = NEW.agent_id
                     AND o.action = NEW.action AND o.target = NEW.target AND o.state = 'escalated') THEN
        RAISE EXCEPTION 'an amendment names an escalated proposal of its tenant, agent, action and target; % is not one', NEW.amended_from
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $function$;

CREATE OR REPLACE TRIGGER proposals_transition_insert BEFORE INSERT ON proposals FOR EACH ROW WHEN (((new.state <> 'pending'::text) OR (new.amended_from IS NOT NULL))) EXECUTE FUNCTION proposals_check_insert();
