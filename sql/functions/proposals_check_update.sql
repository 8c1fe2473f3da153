-- Every rule of a proposal update, in this order (each refusal keeps its message and SQLSTATE):
-- the legal transition (proposal_transition_legal), the moved-tenant rule (V44: nothing leaves
-- pending, escalated or approved for a tenant in tenant_moves), `amended` only with its
-- amending proposal (V41), `executing → escalated` only as a run sent back to the approvers
-- (V45), the approval round moving only then, the frozen- and revoked-agent rules, the role allowed to
-- make it (actiond_role_may), the purge mark, the immutable identity (tenant, agent, action,
-- target, params, intent hash), staged approvals' last stage; then updated_at is stamped and
-- never goes backwards. Each rule tests its own columns first, so an update that changes none
-- of them (the executor's back-off, a lease change) passes every test and changes nothing; it
-- stays a HOT update (triggers do not decide that). The trigger has no WHEN clause: Postgres
-- reads a trigger's WHEN clause back from its stored text before the first row of every
-- statement that updates the table, and this one (nine columns compared) was 6% of Postgres'
-- instructions per allow-path proposal written one per statement, for the sake of the one
-- lease-only update, which is rare (bench/HISTORY.md, issue #36's fifth step).
CREATE OR REPLACE FUNCTION proposals_check_update()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    agent_frozen boolean;
    agent_revoked boolean;
    moved_to text;
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT proposal_transition_legal(OLD.state, NEW.state) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        -- V44: a tenant frozen for a move to another cell: nothing of it moves forward here.
        IF OLD.state IN ('pending', 'escalated', 'approved') THEN
            SELECT m.moved_to INTO moved_to FROM tenant_moves m WHERE m.tenant_id = NEW.tenant_id;
            IF FOUND THEN
                RAISE EXCEPTION 'tenant % moved to cell %: proposal % may not move % -> % here', NEW.tenant_id, moved_to, NEW.id, OLD.state, NEW.state
                    USING ERRCODE = 'object_not_in_prerequisite_state';
            END IF;
        END IF;
        IF OLD.state = 'pending' AND NEW.state = 'denied' THEN
            IF NOT EXISTS (SELECT 1 FROM agents a
                           WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id
                             AND (a.frozen_at IS NOT NULL OR a.revoked_at IS NOT NULL)) THEN
                RAISE EXCEPTION 'a pending proposal is denied only when its agent is frozen or revoked'
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        -- Nested, like every test below that reads a table: PL/pgSQL runs an IF condition
        -- holding a subquery as a query, on every call, whatever its first operand says (V48:
        -- this one ran on every state change of every proposal).
        IF NEW.state = 'amended' THEN
            IF NOT EXISTS (SELECT 1 FROM proposals n WHERE n.amended_from = NEW.id) THEN
                RAISE EXCEPTION 'proposal % becomes amended only when the proposal amending it exists', NEW.id
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        -- V45: a run whose preview changed goes back to the approvers only when its handler says
        -- so (the document version that escalated it), with its approvals void (the round moves
        -- by one), no live grant left, and a fresh preview read in this very transaction.
        IF OLD.state = 'executing' AND NEW.state = 'escalated' THEN
            IF NEW.approval_round IS DISTINCT FROM OLD.approval_round + 1 THEN
                RAISE EXCEPTION 'proposal % goes back to the approvers only with its approvals void (approval_round % -> %)', NEW.id, OLD.approval_round, OLD.approval_round + 1
                    USING ERRCODE = 'check_violation';
            END IF;
            IF EXISTS (SELECT 1 FROM grants g WHERE g.proposal_id = NEW.id AND g.voided_at IS NULL) THEN
                RAISE EXCEPTION 'proposal % goes back to the approvers only with its grant void', NEW.id
                    USING ERRCODE = 'check_violation';
            END IF;
            IF NOT EXISTS (SELECT 1 FROM proposal_previews v WHERE v.proposal_id = NEW.id AND v.ok AND v.read_at = now()) THEN
                RAISE EXCEPTION 'proposal % goes back to the approvers only with a preview read in this transaction', NEW.id
                    USING ERRCODE = 'check_violation';
            END IF;
            IF coalesce((SELECT d.document -> 'handlers' -> NEW.action ->> 'on_stale' FROM tenant_documents d
                         WHERE d.tenant_id = NEW.tenant_id AND d.version = NEW.doc_version), 'end') <> 'reapprove' THEN
                RAISE EXCEPTION 'proposal % goes back to the approvers only when its handler says on_stale: reapprove', NEW.id
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        IF (OLD.state = 'pending' AND NEW.state IN ('approved', 'escalated'))
           OR (OLD.state = 'approved' AND NEW.state = 'executing') THEN
            SELECT a.frozen_at IS NOT NULL, a.revoked_at IS NOT NULL INTO agent_frozen, agent_revoked
            FROM agents a WHERE a.tenant_id = NEW.tenant_id AND a.id = NEW.agent_id;
            IF agent_revoked THEN
                RAISE EXCEPTION 'the agent of proposal % is revoked: it may not move % -> %', NEW.id, OLD.state, NEW.state
                    USING ERRCODE = 'check_violation';
            END IF;
            IF agent_frozen THEN
                RAISE EXCEPTION 'the agent of proposal % is frozen: it may not move % -> %', NEW.id, OLD.state, NEW.state
                    USING ERRCODE = 'check_violation';
            END IF;
        END IF;
        NEW.updated_at := greatest(now(), OLD.updated_at);
    END IF;
    IF NEW.approval_round IS DISTINCT FROM OLD.approval_round
       AND NOT (OLD.state = 'executing' AND NEW.state = 'escalated') THEN
        RAISE EXCEPTION 'the approval round of proposal % moves only when a run goes back to the approvers', NEW.id
            USING ERRCODE = 'check_violation';
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
                    AND OLD.state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','amended','withdrawn','stale','effect_mismatch'))) THEN
        RAISE EXCEPTION 'proposal identity columns are immutable' USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state AND NOT actiond_role_may(OLD.state, NEW.state) THEN
        RAISE EXCEPTION 'role % may not move a proposal % -> %', current_user, OLD.state, NEW.state
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- V16's staged-approval rule, kept: nested, so roles that never approve (the executor
    -- cannot read approval_stages) never run the lookup.
    IF OLD.state = 'escalated' AND NEW.state = 'approved' THEN
        IF EXISTS (SELECT 1 FROM approval_stages s WHERE s.proposal_id = NEW.id
                   AND s.stage = s.of_stages AND s.completed_at IS NULL) THEN
            RAISE EXCEPTION 'proposal % has stages: it is approved only when its last stage completed', NEW.id
                USING ERRCODE = 'check_violation';
        END IF;
    END IF;
    RETURN NEW;
END $function$;

CREATE OR REPLACE TRIGGER proposals_transition_update BEFORE UPDATE ON proposals FOR EACH ROW EXECUTE FUNCTION proposals_check_update();
