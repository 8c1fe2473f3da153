-- One statement per rule. V4 re-declared V1's transition function to add the role check, and
-- spelled the row-level-security tenant predicate out in every policy. From here on:
--   * the legal state transitions are rows of `proposal_transitions` (the same table as
--     `ProposalState::can_become` in services/core/src/state.rs; an e2e test compares them),
--     read by the one transition trigger;
--   * which role may make which transition is checked by its own trigger (`actiond_role_may`,
--     unchanged from V4);
--   * which tenants a transaction may see is `actiond_tenant_visible`, used by every tenant
--     policy.
-- Behaviour is unchanged: the same transitions, the same roles, the same error codes and
-- messages, the same rows visible to the same roles.

-- The legal transitions (Proposal states: pending → approved|escalated|blocked|expired,
-- escalated → approved|denied|expired, approved → executing|blocked|expired,
-- executing → succeeded|failed|outcome_unknown). Changing the lifecycle is an INSERT or DELETE
-- here, in a new migration, together with the change to state.rs.
CREATE TABLE proposal_transitions (
    from_state  text NOT NULL,
    to_state    text NOT NULL,
    PRIMARY KEY (from_state, to_state),
    CHECK (from_state <> to_state)
);
INSERT INTO proposal_transitions (from_state, to_state) VALUES
    ('pending',   'approved'), ('pending',   'escalated'), ('pending', 'blocked'), ('pending', 'expired'),
    ('escalated', 'approved'), ('escalated', 'denied'),    ('escalated', 'expired'),
    ('approved',  'executing'), ('approved', 'blocked'),   ('approved', 'expired'),
    ('executing', 'succeeded'), ('executing', 'failed'),   ('executing', 'outcome_unknown');
-- Reference data: every service reads it (its triggers run as the service's role); nobody but
-- the migration owner changes it.
REVOKE ALL ON proposal_transitions FROM PUBLIC;
GRANT SELECT ON proposal_transitions TO actiond_api, actiond_policy, actiond_web, actiond_executor, actiond_admin;

-- Legal transitions and immutable identity, whatever the caller (V1's rule, now reading the
-- table). The role check is no longer here: see proposals_role_check below.
CREATE OR REPLACE FUNCTION proposals_check_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.state <> 'pending' THEN
            RAISE EXCEPTION 'a proposal starts as pending, not %', NEW.state USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END IF;
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NOT EXISTS (SELECT 1 FROM proposal_transitions t
                       WHERE t.from_state = OLD.state AND t.to_state = NEW.state) THEN
            RAISE EXCEPTION 'illegal proposal state transition % -> %', OLD.state, NEW.state
                USING ERRCODE = 'check_violation';
        END IF;
        NEW.updated_at := now();
    END IF;
    -- What was decided on never changes after submission.
    IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.agent_id IS DISTINCT FROM OLD.agent_id
       OR NEW.action IS DISTINCT FROM OLD.action OR NEW.target IS DISTINCT FROM OLD.target
       OR NEW.intent_hash IS DISTINCT FROM OLD.intent_hash OR NEW.params_json IS DISTINCT FROM OLD.params_json THEN
        RAISE EXCEPTION 'proposal identity columns are immutable' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;

-- Which role may make which transition (actiond_role_may, V4), as a trigger of its own. Triggers
-- of the same event fire in name order, so `proposals_transition` (is it legal at all?) runs
-- before `proposals_transition_role` (may this role make it?), as the single function did.
CREATE FUNCTION proposals_check_role() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT actiond_role_may(OLD.state, NEW.state) THEN
        RAISE EXCEPTION 'role % may not move a proposal % -> %', current_user, OLD.state, NEW.state
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER proposals_transition_role BEFORE UPDATE ON proposals
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION proposals_check_role();

-- Whether the current transaction may see `tenant`: it is one of the tenants set with
-- `set_config('actiond.tenant_ids', 'a,b', true)`, or `allow_all` is true and the set is '*'
-- (only the web role's policies pass true: its escalation notifier asks for every tenant).
-- A single SELECT over STABLE functions, so the planner inlines it into each policy's qual
-- (`tenant_id = ANY (…)` keeps using indexes; `false AND …` folds away for the api).
CREATE FUNCTION actiond_tenant_visible(tenant text, allow_all boolean DEFAULT false)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT tenant = ANY (actiond_current_tenants())
        OR (allow_all AND '*' = ANY (actiond_current_tenants()))
$$;

ALTER POLICY api_tenant ON proposals
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));
ALTER POLICY api_tenant ON audit_events
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));

ALTER POLICY web_tenant ON proposals
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
ALTER POLICY web_tenant ON approvals
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
ALTER POLICY web_tenant ON grants
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
ALTER POLICY web_tenant ON audit_events
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
ALTER POLICY web_tenant ON web_notifications
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
