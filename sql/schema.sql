--
-- PostgreSQL database dump
--



SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: actiond_compile_transitions(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.actiond_compile_transitions() RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    pairs text;
BEGIN
    SELECT string_agg(format('(%L, %L)', from_state, to_state), ', ' ORDER BY from_state, to_state)
    INTO pairs FROM proposal_transitions;
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION proposal_transition_legal(from_state text, to_state text) '
        'RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        'SELECT ' || CASE WHEN pairs IS NULL THEN 'false'
                          ELSE format('(from_state, to_state) IN (%s)', pairs) END);
    COMMENT ON FUNCTION proposal_transition_legal(text, text) IS
        'Generated from proposal_transitions by actiond_compile_transitions() (V29); never edit it by hand.';
END $$;


--
-- Name: actiond_current_tenants(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.actiond_current_tenants() RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    SELECT string_to_array(NULLIF(current_setting('actiond.tenant_ids', true), ''), ',')
$$;


--
-- Name: actiond_grants_row_check(text, text, text, timestamp with time zone, timestamp with time zone); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.actiond_grants_row_check(doc_sha256 text, intent_hash text, preview_sha256 text, used_at timestamp with time zone, voided_at timestamp with time zone) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    failed text;
BEGIN
    IF (doc_sha256 IS NULL OR (length(doc_sha256) = 64 AND doc_sha256 !~ '[^0-9a-f]')) IS FALSE THEN
        failed := 'grants_doc_sha256_check';
    ELSIF (length(intent_hash) = 64 AND intent_hash !~ '[^0-9a-f]') IS FALSE THEN
        failed := 'grants_intent_hash_check';
    ELSIF (preview_sha256 IS NULL OR (length(preview_sha256) = 64 AND preview_sha256 !~ '[^0-9a-f]')) IS FALSE THEN
        failed := 'grants_preview_sha256_check';
    ELSIF (voided_at IS NULL OR used_at IS NOT NULL) IS FALSE THEN
        failed := 'grants_voided_after_spent';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for relation "grants" violates check constraint "%"', failed
        USING ERRCODE = 'check_violation', CONSTRAINT = failed, TABLE = 'grants';
END $$;


--
-- Name: actiond_proposals_row_check(text, text, uuid, jsonb, integer, text, text, text, text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.actiond_proposals_row_check(action text, amended_by text, amended_from uuid, amendment_diff jsonb, approval_round integer, effect text, intent_hash text, outcome text, params_sha256 text, state text) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
DECLARE
    failed text;
BEGIN
    IF (length(action) <= 128) IS FALSE THEN
        failed := 'proposals_action_check';
    ELSIF (amended_by IS NULL OR (length(amended_by) >= 1 AND length(amended_by) <= 300)) IS FALSE THEN
        failed := 'proposals_amended_by_check';
    ELSIF ((amended_from IS NULL AND amended_by IS NULL AND amendment_diff IS NULL)
           OR (amended_from IS NOT NULL AND amended_by IS NOT NULL AND amendment_diff IS NOT NULL)) IS FALSE THEN
        failed := 'proposals_amendment_complete';
    ELSIF (amendment_diff IS NULL OR jsonb_typeof(amendment_diff) = 'array') IS FALSE THEN
        failed := 'proposals_amendment_diff_check';
    ELSIF (approval_round >= 0) IS FALSE THEN
        failed := 'proposals_approval_round_check';
    ELSIF (effect = ANY ('{allow,escalate,block}'::text[])) IS FALSE THEN
        failed := 'proposals_effect_check';
    ELSIF (length(intent_hash) = 64 AND intent_hash !~ '[^0-9a-f]') IS FALSE THEN
        failed := 'proposals_intent_hash_check';
    ELSIF (outcome = ANY ('{succeeded,failed,outcome_unknown,effect_mismatch}'::text[])) IS FALSE THEN
        failed := 'proposals_outcome_check';
    ELSIF (length(params_sha256) = 64 AND params_sha256 !~ '[^0-9a-f]') IS FALSE THEN
        failed := 'proposals_params_sha256_check';
    ELSIF (state = ANY ('{pending,escalated,approved,blocked,denied,expired,executing,succeeded,failed,outcome_unknown,withdrawn,amended,stale,effect_mismatch}'::text[])) IS FALSE THEN
        failed := 'proposals_state_check';
    ELSE
        RETURN true;
    END IF;
    RAISE EXCEPTION 'new row for relation "proposals" violates check constraint "%"', failed
        USING ERRCODE = 'check_violation', CONSTRAINT = failed, TABLE = 'proposals';
END $$;


--
-- Name: actiond_role_may(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.actiond_role_may(from_state text, to_state text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF ((from_state = 'pending' AND to_state IN ('approved','escalated','blocked','expired'))
         OR (from_state = 'escalated' AND to_state = 'expired'))
       AND pg_has_role(current_user, 'actiond_policy', 'MEMBER') THEN
        RETURN true;
    END IF;
    IF ((from_state = 'escalated' AND to_state IN ('approved','denied','expired','amended'))
         OR (from_state = 'pending' AND to_state = 'denied'))
       AND (pg_has_role(current_user, 'actiond_web', 'MEMBER') OR pg_has_role(current_user, 'actiond_admin', 'MEMBER')) THEN
        RETURN true;
    END IF;
    IF from_state IN ('pending','escalated') AND to_state = 'withdrawn'
       AND pg_has_role(current_user, 'actiond_api', 'MEMBER') THEN
        RETURN true;
    END IF;
    IF ((from_state = 'approved' AND to_state IN ('executing','blocked','expired'))
         OR (from_state = 'executing' AND to_state IN ('succeeded','failed','outcome_unknown','stale','effect_mismatch','escalated'))
         OR (from_state = 'outcome_unknown' AND to_state IN ('succeeded','failed','effect_mismatch')))
       AND pg_has_role(current_user, 'actiond_executor', 'MEMBER') THEN
        RETURN true;
    END IF;
    RETURN coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false);
END $$;


--
-- Name: actiond_tenant_visible(text, boolean); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.actiond_tenant_visible(tenant text, allow_all boolean DEFAULT false) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT tenant = ANY (actiond_current_tenants())
        OR (allow_all AND '*' = ANY (actiond_current_tenants()))
$$;


--
-- Name: agents_changed_notify(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.agents_changed_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('actiond_agents', '');
    RETURN NULL;
END $$;


--
-- Name: agents_revocation_final(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.agents_revocation_final() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'agent % was revoked at %: a revocation is not undone', OLD.id, OLD.revoked_at
        USING ERRCODE = 'check_violation';
END $$;


--
-- Name: approval_passkeys_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.approval_passkeys_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'approval_passkeys is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;


--
-- Name: approval_stages_check(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.approval_stages_check() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: approval_stages_kept(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.approval_stages_kept() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'approval_stages rows are never deleted' USING ERRCODE = 'insufficient_privilege';
END $$;


--
-- Name: approvals_current_round(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.approvals_current_round() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    SELECT p.approval_round INTO NEW.round FROM proposals p WHERE p.id = NEW.proposal_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'proposal % not found', NEW.proposal_id USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END $$;


--
-- Name: approvals_in_stage(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.approvals_in_stage() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


--
-- Name: audit_events_api_agent(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.audit_events_api_agent() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    bad record;
BEGIN
    SELECT n.id, n.tenant_id, n.actor, n.proposal_id INTO bad
    FROM audit_events_new n
    LEFT JOIN proposals p ON p.id = n.proposal_id AND p.tenant_id = n.tenant_id
    WHERE p.id IS NULL OR n.actor IS DISTINCT FROM 'agent:' || p.agent_id::text
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'role % may write audit events only as the agent of the proposal: event % (tenant %) names actor % for proposal %, which is not that agent''s in that tenant',
            current_user, bad.id, bad.tenant_id, bad.actor, bad.proposal_id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;


--
-- Name: audit_events_append_only(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.audit_events_append_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;


--
-- Name: proposal_transition_legal(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.proposal_transition_legal(from_state text, to_state text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$SELECT (from_state, to_state) IN (('approved', 'blocked'), ('approved', 'executing'), ('approved', 'expired'), ('escalated', 'amended'), ('escalated', 'approved'), ('escalated', 'denied'), ('escalated', 'expired'), ('escalated', 'withdrawn'), ('executing', 'effect_mismatch'), ('executing', 'escalated'), ('executing', 'failed'), ('executing', 'outcome_unknown'), ('executing', 'stale'), ('executing', 'succeeded'), ('outcome_unknown', 'effect_mismatch'), ('outcome_unknown', 'failed'), ('outcome_unknown', 'succeeded'), ('pending', 'approved'), ('pending', 'blocked'), ('pending', 'denied'), ('pending', 'escalated'), ('pending', 'expired'), ('pending', 'withdrawn'))$$;


--
-- Name: FUNCTION proposal_transition_legal(from_state text, to_state text); Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON FUNCTION public.proposal_transition_legal(from_state text, to_state text) IS 'Generated from proposal_transitions by actiond_compile_transitions() (V29); never edit it by hand.';


--
-- Name: proposal_transitions_changed(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.proposal_transitions_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM actiond_compile_transitions();
    RETURN NULL;
END $$;


--
-- Name: proposals_check_insert(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.proposals_check_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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
END $$;


--
-- Name: proposals_check_update(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.proposals_check_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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
END $$;


SET default_table_access_method = heap;

--
-- Name: actiond_sql_objects; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.actiond_sql_objects (
    name text NOT NULL,
    sha256 text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT actiond_sql_objects_name_check CHECK ((name ~ '^[a-z0-9_]+$'::text)),
    CONSTRAINT actiond_sql_objects_sha256_check CHECK ((length(sha256) = 64))
);


--
-- Name: agent_workload_identities; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.agent_workload_identities (
    agent_id uuid NOT NULL,
    tenant_id text NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_workload_identities_issuer_check CHECK (((length(issuer) >= 1) AND (length(issuer) <= 512))),
    CONSTRAINT agent_workload_identities_subject_check CHECK (((length(subject) >= 1) AND (length(subject) <= 512)))
);


--
-- Name: agents; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.agents (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    name text NOT NULL,
    owner_subject text,
    token_sha256 text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    frozen_at timestamp with time zone,
    frozen_by text,
    CONSTRAINT agents_name_check CHECK ((name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'::text)),
    CONSTRAINT agents_token_sha256_check CHECK ((token_sha256 ~ '^[0-9a-f]{64}$'::text))
);


--
-- Name: approval_passkeys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approval_passkeys (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    credential_id bytea NOT NULL,
    public_key bytea NOT NULL,
    nonce text NOT NULL,
    intent_hash text NOT NULL,
    doc_version integer NOT NULL,
    rp_id text NOT NULL,
    origin text NOT NULL,
    authenticator_data bytea NOT NULL,
    client_data_json bytea NOT NULL,
    signature bytea NOT NULL,
    sign_count bigint NOT NULL,
    evidence_sha256 text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    round integer DEFAULT 0 NOT NULL,
    CONSTRAINT approval_passkeys_evidence_sha256_check CHECK ((evidence_sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT approval_passkeys_nonce_check CHECK ((nonce ~ '^[0-9a-f]{64}$'::text))
);

ALTER TABLE ONLY public.approval_passkeys FORCE ROW LEVEL SECURITY;


--
-- Name: approval_stages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approval_stages (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    stage integer NOT NULL,
    of_stages integer NOT NULL,
    approvers text NOT NULL,
    required integer NOT NULL,
    within_secs double precision NOT NULL,
    on_timeout text NOT NULL,
    opened_at timestamp with time zone,
    due_at timestamp with time zone,
    completed_at timestamp with time zone,
    timed_out_at timestamp with time zone,
    CONSTRAINT approval_stages_approvers_check CHECK (((length(approvers) >= 1) AND (length(approvers) <= 128))),
    CONSTRAINT approval_stages_check CHECK ((stage <= of_stages)),
    CONSTRAINT approval_stages_check1 CHECK (((completed_at IS NULL) OR (timed_out_at IS NULL))),
    CONSTRAINT approval_stages_of_stages_check CHECK (((of_stages >= 1) AND (of_stages <= 5))),
    CONSTRAINT approval_stages_on_timeout_check CHECK ((on_timeout = ANY (ARRAY['next'::text, 'expire'::text]))),
    CONSTRAINT approval_stages_required_check CHECK (((required >= 1) AND (required <= 5))),
    CONSTRAINT approval_stages_stage_check CHECK (((stage >= 1) AND (stage <= 5))),
    CONSTRAINT approval_stages_within_secs_check CHECK ((within_secs > (0)::double precision))
);

ALTER TABLE ONLY public.approval_stages FORCE ROW LEVEL SECURITY;


--
-- Name: approvals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approvals (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    email text,
    decision text NOT NULL,
    comment text,
    intent_hash text NOT NULL,
    doc_version integer NOT NULL,
    channel text NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL,
    seconds_on_page double precision,
    stage integer,
    round integer DEFAULT 0 NOT NULL,
    CONSTRAINT approvals_channel_check CHECK ((channel = ANY (ARRAY['web'::text, 'breakglass'::text]))),
    CONSTRAINT approvals_decision_check CHECK ((decision = ANY (ARRAY['approve'::text, 'deny'::text]))),
    CONSTRAINT approvals_seconds_on_page_check CHECK (((seconds_on_page IS NULL) OR ((seconds_on_page >= (0)::double precision) AND (seconds_on_page <= (86400)::double precision))))
);

ALTER TABLE ONLY public.approvals FORCE ROW LEVEL SECURITY;


--
-- Name: audit_event_hashes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_event_hashes (
    event_id bigint NOT NULL,
    tenant_id text NOT NULL,
    seal_seq bigint NOT NULL,
    chain_hash text NOT NULL,
    CONSTRAINT audit_event_hashes_chain_hash_check CHECK ((chain_hash ~ '^[0-9a-f]{64}$'::text))
);


--
-- Name: audit_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_events (
    id bigint NOT NULL,
    tenant_id text NOT NULL,
    proposal_id uuid,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    kind text NOT NULL,
    actor text NOT NULL,
    from_state text,
    to_state text,
    intent_hash text,
    params_sha256 text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL
);

ALTER TABLE ONLY public.audit_events FORCE ROW LEVEL SECURITY;


--
-- Name: audit_events_id_seq; Type: SEQUENCE; Schema: public; Owner: -
--

CREATE SEQUENCE public.audit_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: audit_events_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: -
--

ALTER SEQUENCE public.audit_events_id_seq OWNED BY public.audit_events.id;


--
-- Name: audit_moved_events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_moved_events (
    id bigint NOT NULL,
    tenant_id text NOT NULL,
    proposal_id uuid,
    at timestamp with time zone NOT NULL,
    kind text NOT NULL,
    actor text NOT NULL,
    from_state text,
    to_state text,
    intent_hash text,
    params_sha256 text,
    detail jsonb NOT NULL,
    seal_seq bigint NOT NULL,
    chain_hash text NOT NULL,
    CONSTRAINT audit_moved_events_chain_hash_check CHECK ((chain_hash ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT audit_moved_events_seal_seq_check CHECK ((seal_seq > 0))
);

ALTER TABLE ONLY public.audit_moved_events FORCE ROW LEVEL SECURITY;


--
-- Name: audit_seals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_seals (
    tenant_id text NOT NULL,
    seq bigint NOT NULL,
    first_event_id bigint NOT NULL,
    last_event_id bigint NOT NULL,
    event_count bigint NOT NULL,
    start_hash text NOT NULL,
    head_hash text NOT NULL,
    prev_seal_hash text NOT NULL,
    key_id text NOT NULL,
    sealed_at text NOT NULL,
    sig text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT audit_seals_check CHECK ((last_event_id >= first_event_id)),
    CONSTRAINT audit_seals_event_count_check CHECK ((event_count > 0)),
    CONSTRAINT audit_seals_head_hash_check CHECK ((head_hash ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT audit_seals_prev_seal_hash_check CHECK ((prev_seal_hash ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT audit_seals_seq_check CHECK ((seq > 0)),
    CONSTRAINT audit_seals_start_hash_check CHECK ((start_hash ~ '^[0-9a-f]{64}$'::text))
);


--
-- Name: budget_reservations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.budget_reservations (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    agent_id uuid NOT NULL,
    action text NOT NULL,
    sum_of text NOT NULL,
    amount bigint NOT NULL,
    allowed boolean NOT NULL,
    reserved_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT budget_reservations_amount_check CHECK ((amount >= 0))
);

ALTER TABLE ONLY public.budget_reservations FORCE ROW LEVEL SECURITY;


--
-- Name: effect_settle_tries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.effect_settle_tries (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    next_try_at timestamp with time zone NOT NULL,
    tries integer DEFAULT 1 NOT NULL,
    last_reason text DEFAULT ''::text NOT NULL,
    CONSTRAINT effect_settle_tries_last_reason_check CHECK ((length(last_reason) <= 1000)),
    CONSTRAINT effect_settle_tries_tries_check CHECK ((tries > 0))
);

ALTER TABLE ONLY public.effect_settle_tries FORCE ROW LEVEL SECURITY;


--
-- Name: grants; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.grants (
    id uuid NOT NULL,
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    intent_hash text NOT NULL,
    doc_version integer NOT NULL,
    expires_at_us bigint NOT NULL,
    key_id text NOT NULL,
    sig bytea NOT NULL,
    issued_by text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    used_at timestamp with time zone,
    used_by text,
    expires_at timestamp with time zone GENERATED ALWAYS AS (to_timestamp(((expires_at_us)::double precision / (1000000)::double precision))) STORED,
    preview_sha256 text,
    voided_at timestamp with time zone,
    doc_sha256 text,
    CONSTRAINT grants_row_check CHECK (public.actiond_grants_row_check(doc_sha256, intent_hash, preview_sha256, used_at, voided_at))
)
WITH (autovacuum_vacuum_scale_factor='0.02', fillfactor='50');

ALTER TABLE ONLY public.grants FORCE ROW LEVEL SECURITY;


--
-- Name: COLUMN grants.expires_at; Type: COMMENT; Schema: public; Owner: -
--

COMMENT ON COLUMN public.grants.expires_at IS 'expires_at_us (the signed expiry) as timestamptz, generated (V34); the spend and the sweeper compare expires_at_us';


--
-- Name: passkey_challenges; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.passkey_challenges (
    nonce text NOT NULL,
    tenant_id text NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    purpose text NOT NULL,
    proposal_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT passkey_challenges_check CHECK (((purpose = 'approve'::text) = (proposal_id IS NOT NULL))),
    CONSTRAINT passkey_challenges_nonce_check CHECK ((nonce ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT passkey_challenges_purpose_check CHECK ((purpose = ANY (ARRAY['register'::text, 'approve'::text])))
);

ALTER TABLE ONLY public.passkey_challenges FORCE ROW LEVEL SECURITY;


--
-- Name: passkey_notices; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.passkey_notices (
    tenant_id text NOT NULL,
    credential_id bytea NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    email text,
    detail jsonb DEFAULT '{}'::jsonb NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    channels text[] DEFAULT '{}'::text[] NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT passkey_notices_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'sending'::text, 'sent'::text, 'failed'::text, 'skipped'::text])))
);

ALTER TABLE ONLY public.passkey_notices FORCE ROW LEVEL SECURITY;


--
-- Name: passkey_user_handles; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.passkey_user_handles (
    tenant_id text NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    user_handle bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT passkey_user_handles_user_handle_check CHECK ((octet_length(user_handle) = 32))
);

ALTER TABLE ONLY public.passkey_user_handles FORCE ROW LEVEL SECURITY;


--
-- Name: passkeys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.passkeys (
    tenant_id text NOT NULL,
    credential_id bytea NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    public_key bytea NOT NULL,
    alg integer NOT NULL,
    sign_count bigint DEFAULT 0 NOT NULL,
    rp_id text NOT NULL,
    label text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    backup_eligible boolean DEFAULT false NOT NULL,
    aaguid bytea DEFAULT '\x00000000000000000000000000000000'::bytea NOT NULL,
    attestation_fmt text DEFAULT 'none'::text NOT NULL,
    vouched_by bytea,
    CONSTRAINT passkeys_aaguid_check CHECK ((octet_length(aaguid) = 16)),
    CONSTRAINT passkeys_alg_check CHECK ((alg = ANY (ARRAY['-7'::integer, '-8'::integer, '-257'::integer]))),
    CONSTRAINT passkeys_attestation_fmt_check CHECK ((length(attestation_fmt) <= 32)),
    CONSTRAINT passkeys_credential_id_check CHECK (((octet_length(credential_id) >= 1) AND (octet_length(credential_id) <= 1023))),
    CONSTRAINT passkeys_label_check CHECK ((length(label) <= 100)),
    CONSTRAINT passkeys_public_key_check CHECK (((octet_length(public_key) >= 1) AND (octet_length(public_key) <= 2048))),
    CONSTRAINT passkeys_sign_count_check CHECK ((sign_count >= 0))
);

ALTER TABLE ONLY public.passkeys FORCE ROW LEVEL SECURITY;


--
-- Name: proposal_delegations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proposal_delegations (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    on_behalf_of text NOT NULL,
    CONSTRAINT proposal_delegations_on_behalf_of_check CHECK (((length(on_behalf_of) >= 1) AND (length(on_behalf_of) <= 512)))
);

ALTER TABLE ONLY public.proposal_delegations FORCE ROW LEVEL SECURITY;


--
-- Name: proposal_facts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proposal_facts (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    facts jsonb NOT NULL,
    CONSTRAINT proposal_facts_facts_check CHECK (((jsonb_typeof(facts) = 'object'::text) AND (length((facts)::text) <= 65536)))
);

ALTER TABLE ONLY public.proposal_facts FORCE ROW LEVEL SECURITY;


--
-- Name: proposal_previews; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proposal_previews (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    ok boolean NOT NULL,
    text text NOT NULL,
    read_at timestamp with time zone DEFAULT now() NOT NULL,
    canonical text,
    sha256 text,
    binding jsonb,
    warnings jsonb DEFAULT '[]'::jsonb NOT NULL,
    CONSTRAINT proposal_previews_canonical_check CHECK (((canonical IS NULL) OR (length(canonical) <= 200000))),
    CONSTRAINT proposal_previews_canonical_complete CHECK (((canonical IS NULL) = (sha256 IS NULL))),
    CONSTRAINT proposal_previews_sha256_check CHECK (((sha256 IS NULL) OR ((length(sha256) = 64) AND (ltrim(sha256, '0123456789abcdef'::text) = ''::text)))),
    CONSTRAINT proposal_previews_text_check CHECK ((length(text) <= 20000)),
    CONSTRAINT proposal_previews_warnings_check CHECK ((jsonb_typeof(warnings) = 'array'::text))
);

ALTER TABLE ONLY public.proposal_previews FORCE ROW LEVEL SECURITY;


--
-- Name: proposal_transitions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proposal_transitions (
    from_state text NOT NULL,
    to_state text NOT NULL,
    CONSTRAINT proposal_transitions_check CHECK ((from_state <> to_state))
);


--
-- Name: proposals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.proposals (
    id uuid NOT NULL,
    tenant_id text NOT NULL,
    agent_id uuid NOT NULL,
    action text NOT NULL,
    target text NOT NULL,
    params_json text NOT NULL,
    params_sha256 text NOT NULL,
    intent_hash text NOT NULL,
    agent_reason text,
    source_text text,
    session_id text,
    idempotency_key text,
    request_sha256 text NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    effect text,
    rule_name text,
    decision_reason text,
    doc_version integer,
    doc_sha256 text,
    decided_at timestamp with time zone,
    lease_owner text,
    lease_until timestamp with time zone,
    outcome text,
    outcome_detail text,
    finished_at timestamp with time zone,
    purged_at timestamp with time zone,
    amended_from uuid,
    amended_by text,
    amendment_diff jsonb,
    approval_round integer DEFAULT 0 NOT NULL,
    CONSTRAINT proposals_row_check CHECK (public.actiond_proposals_row_check(action, amended_by, amended_from, amendment_diff, approval_round, effect, intent_hash, outcome, params_sha256, state))
)
WITH (autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000', autovacuum_analyze_scale_factor='0.02', fillfactor='80');

ALTER TABLE ONLY public.proposals FORCE ROW LEVEL SECURITY;


--
-- Name: refinery_schema_history; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.refinery_schema_history (
    version integer NOT NULL,
    name character varying(255),
    applied_on character varying(255),
    checksum character varying(255)
);


--
-- Name: shadow_decisions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.shadow_decisions (
    tenant_id text NOT NULL,
    shadow_seq integer NOT NULL,
    proposal_id uuid NOT NULL,
    action text NOT NULL,
    live_effect text NOT NULL,
    live_rule text,
    shadow_effect text NOT NULL,
    shadow_rule text,
    shadow_reason text NOT NULL,
    decided_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT shadow_decisions_live_effect_check CHECK ((live_effect = ANY (ARRAY['allow'::text, 'escalate'::text, 'block'::text]))),
    CONSTRAINT shadow_decisions_shadow_effect_check CHECK ((shadow_effect = ANY (ARRAY['allow'::text, 'escalate'::text, 'block'::text])))
);

ALTER TABLE ONLY public.shadow_decisions FORCE ROW LEVEL SECURITY;


--
-- Name: shadow_documents; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.shadow_documents (
    tenant_id text NOT NULL,
    seq integer NOT NULL,
    sha256 text NOT NULL,
    source text NOT NULL,
    stored_by text NOT NULL,
    stored_at timestamp with time zone DEFAULT now() NOT NULL,
    live_version integer,
    closed_at timestamp with time zone,
    promoted_version integer,
    CONSTRAINT shadow_documents_seq_check CHECK ((seq > 0)),
    CONSTRAINT shadow_documents_sha256_check CHECK ((sha256 ~ '^[0-9a-f]{64}$'::text))
);

ALTER TABLE ONLY public.shadow_documents FORCE ROW LEVEL SECURITY;


--
-- Name: tenant_documents; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tenant_documents (
    tenant_id text NOT NULL,
    version integer NOT NULL,
    sha256 text NOT NULL,
    source text NOT NULL,
    document jsonb NOT NULL,
    applied_by text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_documents_sha256_check CHECK ((sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT tenant_documents_version_check CHECK ((version > 0))
);


--
-- Name: tenant_moves; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tenant_moves (
    tenant_id text NOT NULL,
    moved_to text NOT NULL,
    moved_by text NOT NULL,
    moved_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_moves_moved_by_check CHECK (((length(moved_by) >= 1) AND (length(moved_by) <= 300))),
    CONSTRAINT tenant_moves_moved_to_check CHECK ((moved_to ~ '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$'::text))
);


--
-- Name: tenants; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tenants (
    id text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenants_id_check CHECK ((id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'::text))
);


--
-- Name: web_login_states; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.web_login_states (
    state_sha256 text NOT NULL,
    binding_sha256 text NOT NULL,
    nonce text NOT NULL,
    pkce_verifier text NOT NULL,
    return_to text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    max_age_secs bigint,
    CONSTRAINT web_login_states_binding_sha256_check CHECK ((binding_sha256 ~ '^[0-9a-f]{64}$'::text)),
    CONSTRAINT web_login_states_max_age_secs_check CHECK ((max_age_secs >= 0)),
    CONSTRAINT web_login_states_return_to_check CHECK (((return_to ~~ '/%'::text) AND (return_to !~~ '//%'::text))),
    CONSTRAINT web_login_states_state_sha256_check CHECK ((state_sha256 ~ '^[0-9a-f]{64}$'::text))
);


--
-- Name: web_notifications; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.web_notifications (
    proposal_id uuid NOT NULL,
    tenant_id text NOT NULL,
    status text DEFAULT 'sending'::text NOT NULL,
    attempts integer DEFAULT 1 NOT NULL,
    channels text[] DEFAULT '{}'::text[] NOT NULL,
    last_error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    stage integer DEFAULT 1 NOT NULL,
    CONSTRAINT web_notifications_status_check CHECK ((status = ANY (ARRAY['sending'::text, 'sent'::text, 'failed'::text, 'skipped'::text])))
);

ALTER TABLE ONLY public.web_notifications FORCE ROW LEVEL SECURITY;


--
-- Name: web_sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.web_sessions (
    id_sha256 text NOT NULL,
    issuer text NOT NULL,
    subject text NOT NULL,
    email text,
    display_name text,
    claims jsonb DEFAULT '{}'::jsonb NOT NULL,
    csrf_token text NOT NULL,
    dev_login boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    auth_time timestamp with time zone,
    CONSTRAINT web_sessions_id_sha256_check CHECK ((id_sha256 ~ '^[0-9a-f]{64}$'::text))
);


--
-- Name: audit_events id; Type: DEFAULT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_events ALTER COLUMN id SET DEFAULT 
CASE
    WHEN (pg_current_xact_id() IS NOT NULL) THEN nextval('public.audit_events_id_seq'::regclass)
    ELSE NULL::bigint
END;


--
-- Name: actiond_sql_objects actiond_sql_objects_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.actiond_sql_objects
    ADD CONSTRAINT actiond_sql_objects_pkey PRIMARY KEY (name);


--
-- Name: agent_workload_identities agent_workload_identities_issuer_subject_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agent_workload_identities
    ADD CONSTRAINT agent_workload_identities_issuer_subject_key UNIQUE (issuer, subject);


--
-- Name: agent_workload_identities agent_workload_identities_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agent_workload_identities
    ADD CONSTRAINT agent_workload_identities_pkey PRIMARY KEY (agent_id);


--
-- Name: agents agents_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agents
    ADD CONSTRAINT agents_pkey PRIMARY KEY (id);


--
-- Name: agents agents_tenant_id_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agents
    ADD CONSTRAINT agents_tenant_id_id_key UNIQUE (tenant_id, id);


--
-- Name: agents agents_tenant_id_name_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agents
    ADD CONSTRAINT agents_tenant_id_name_key UNIQUE (tenant_id, name);


--
-- Name: agents agents_token_sha256_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agents
    ADD CONSTRAINT agents_token_sha256_key UNIQUE (token_sha256);


--
-- Name: approval_passkeys approval_passkeys_nonce_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approval_passkeys
    ADD CONSTRAINT approval_passkeys_nonce_key UNIQUE (nonce);


--
-- Name: approval_passkeys approval_passkeys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approval_passkeys
    ADD CONSTRAINT approval_passkeys_pkey PRIMARY KEY (proposal_id, round, issuer, subject);


--
-- Name: approval_stages approval_stages_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approval_stages
    ADD CONSTRAINT approval_stages_pkey PRIMARY KEY (proposal_id, stage);


--
-- Name: approvals approvals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_pkey PRIMARY KEY (proposal_id, round, issuer, subject);


--
-- Name: audit_event_hashes audit_event_hashes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_event_hashes
    ADD CONSTRAINT audit_event_hashes_pkey PRIMARY KEY (event_id);


--
-- Name: audit_events audit_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_events
    ADD CONSTRAINT audit_events_pkey PRIMARY KEY (id);


--
-- Name: audit_moved_events audit_moved_events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_moved_events
    ADD CONSTRAINT audit_moved_events_pkey PRIMARY KEY (tenant_id, id);


--
-- Name: audit_seals audit_seals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_seals
    ADD CONSTRAINT audit_seals_pkey PRIMARY KEY (tenant_id, seq);


--
-- Name: budget_reservations budget_reservations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.budget_reservations
    ADD CONSTRAINT budget_reservations_pkey PRIMARY KEY (proposal_id, sum_of);


--
-- Name: effect_settle_tries effect_settle_tries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.effect_settle_tries
    ADD CONSTRAINT effect_settle_tries_pkey PRIMARY KEY (proposal_id);


--
-- Name: grants grants_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_pkey PRIMARY KEY (id);


--
-- Name: passkey_challenges passkey_challenges_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkey_challenges
    ADD CONSTRAINT passkey_challenges_pkey PRIMARY KEY (nonce);


--
-- Name: passkey_notices passkey_notices_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkey_notices
    ADD CONSTRAINT passkey_notices_pkey PRIMARY KEY (tenant_id, credential_id);


--
-- Name: passkey_user_handles passkey_user_handles_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkey_user_handles
    ADD CONSTRAINT passkey_user_handles_pkey PRIMARY KEY (tenant_id, issuer, subject);


--
-- Name: passkey_user_handles passkey_user_handles_user_handle_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkey_user_handles
    ADD CONSTRAINT passkey_user_handles_user_handle_key UNIQUE (user_handle);


--
-- Name: passkeys passkeys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkeys
    ADD CONSTRAINT passkeys_pkey PRIMARY KEY (tenant_id, credential_id);


--
-- Name: proposal_delegations proposal_delegations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposal_delegations
    ADD CONSTRAINT proposal_delegations_pkey PRIMARY KEY (proposal_id);


--
-- Name: proposal_facts proposal_facts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposal_facts
    ADD CONSTRAINT proposal_facts_pkey PRIMARY KEY (proposal_id);


--
-- Name: proposal_previews proposal_previews_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposal_previews
    ADD CONSTRAINT proposal_previews_pkey PRIMARY KEY (proposal_id);


--
-- Name: proposal_transitions proposal_transitions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposal_transitions
    ADD CONSTRAINT proposal_transitions_pkey PRIMARY KEY (from_state, to_state);


--
-- Name: proposals proposals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposals
    ADD CONSTRAINT proposals_pkey PRIMARY KEY (id);


--
-- Name: proposals proposals_tenant_id_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposals
    ADD CONSTRAINT proposals_tenant_id_id_key UNIQUE (tenant_id, id);


--
-- Name: refinery_schema_history refinery_schema_history_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.refinery_schema_history
    ADD CONSTRAINT refinery_schema_history_pkey PRIMARY KEY (version);


--
-- Name: shadow_decisions shadow_decisions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shadow_decisions
    ADD CONSTRAINT shadow_decisions_pkey PRIMARY KEY (tenant_id, shadow_seq, proposal_id);


--
-- Name: shadow_documents shadow_documents_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shadow_documents
    ADD CONSTRAINT shadow_documents_pkey PRIMARY KEY (tenant_id, seq);


--
-- Name: tenant_documents tenant_documents_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tenant_documents
    ADD CONSTRAINT tenant_documents_pkey PRIMARY KEY (tenant_id, version);


--
-- Name: tenant_moves tenant_moves_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tenant_moves
    ADD CONSTRAINT tenant_moves_pkey PRIMARY KEY (tenant_id);


--
-- Name: tenants tenants_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (id);


--
-- Name: web_login_states web_login_states_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.web_login_states
    ADD CONSTRAINT web_login_states_pkey PRIMARY KEY (state_sha256);


--
-- Name: web_notifications web_notifications_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.web_notifications
    ADD CONSTRAINT web_notifications_pkey PRIMARY KEY (proposal_id, stage);


--
-- Name: web_sessions web_sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.web_sessions
    ADD CONSTRAINT web_sessions_pkey PRIMARY KEY (id_sha256);


--
-- Name: approvals_tenant_decided; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_tenant_decided ON public.approvals USING btree (tenant_id, decided_at);


--
-- Name: audit_events_at; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_events_at ON public.audit_events USING brin (at) WITH (autosummarize='on');


--
-- Name: audit_events_proposal; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_events_proposal ON public.audit_events USING btree (proposal_id, id);


--
-- Name: budget_reservations_window; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX budget_reservations_window ON public.budget_reservations USING btree (tenant_id, action, sum_of, reserved_at);


--
-- Name: grants_live_proposal; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX grants_live_proposal ON public.grants USING btree (proposal_id) WHERE (voided_at IS NULL);


--
-- Name: passkey_challenges_expires; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX passkey_challenges_expires ON public.passkey_challenges USING btree (expires_at);


--
-- Name: passkey_notices_due; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX passkey_notices_due ON public.passkey_notices USING btree (next_attempt_at) WHERE (status = ANY (ARRAY['pending'::text, 'failed'::text, 'sending'::text]));


--
-- Name: passkeys_person; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX passkeys_person ON public.passkeys USING btree (tenant_id, issuer, subject);


--
-- Name: proposals_amended_from; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX proposals_amended_from ON public.proposals USING btree (amended_from) WHERE (amended_from IS NOT NULL);


--
-- Name: proposals_approved; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_approved ON public.proposals USING btree (updated_at) WHERE (state = 'approved'::text);


--
-- Name: proposals_escalated; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_escalated ON public.proposals USING btree (tenant_id, created_at) WHERE (state = 'escalated'::text);


--
-- Name: proposals_escalated_by_agent; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_escalated_by_agent ON public.proposals USING btree (agent_id) WHERE ((state = 'escalated'::text) AND (agent_id IS NOT NULL));


--
-- Name: proposals_executing; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_executing ON public.proposals USING btree (id) WHERE (state = 'executing'::text);


--
-- Name: proposals_history; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_history ON public.proposals USING btree (agent_id, action, created_at);


--
-- Name: proposals_idempotency; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX proposals_idempotency ON public.proposals USING btree (tenant_id, agent_id, idempotency_key) WHERE (idempotency_key IS NOT NULL);


--
-- Name: proposals_open_intent; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX proposals_open_intent ON public.proposals USING btree (tenant_id, agent_id, intent_hash) WHERE (state = ANY (ARRAY['pending'::text, 'escalated'::text, 'approved'::text, 'executing'::text]));


--
-- Name: proposals_outcome_unknown; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_outcome_unknown ON public.proposals USING btree (finished_at) WHERE ((state = 'outcome_unknown'::text) AND (purged_at IS NULL));


--
-- Name: proposals_pending; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_pending ON public.proposals USING btree (created_at) WHERE (state = 'pending'::text);


--
-- Name: proposals_purge; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX proposals_purge ON public.proposals USING btree (tenant_id, updated_at) WHERE ((purged_at IS NULL) AND (state = ANY (ARRAY['blocked'::text, 'denied'::text, 'expired'::text, 'succeeded'::text, 'failed'::text, 'outcome_unknown'::text, 'withdrawn'::text, 'amended'::text, 'stale'::text, 'effect_mismatch'::text])));


--
-- Name: shadow_documents_one_open; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX shadow_documents_one_open ON public.shadow_documents USING btree (tenant_id) WHERE (closed_at IS NULL);


--
-- Name: web_login_states_expires; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX web_login_states_expires ON public.web_login_states USING btree (expires_at);


--
-- Name: web_notifications_retry; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX web_notifications_retry ON public.web_notifications USING btree (next_attempt_at) WHERE (status = ANY (ARRAY['failed'::text, 'sending'::text]));


--
-- Name: web_sessions_expires; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX web_sessions_expires ON public.web_sessions USING btree (expires_at);


--
-- Name: web_sessions_subject; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX web_sessions_subject ON public.web_sessions USING btree (issuer, subject);


--
-- Name: agent_workload_identities agent_workload_identities_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER agent_workload_identities_changed AFTER DELETE OR UPDATE OR TRUNCATE ON public.agent_workload_identities FOR EACH STATEMENT EXECUTE FUNCTION public.agents_changed_notify();


--
-- Name: agents agents_changed; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER agents_changed AFTER DELETE OR UPDATE OR TRUNCATE ON public.agents FOR EACH STATEMENT EXECUTE FUNCTION public.agents_changed_notify();


--
-- Name: agents agents_revocation_final; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER agents_revocation_final BEFORE UPDATE ON public.agents FOR EACH ROW WHEN (((old.revoked_at IS NOT NULL) AND (new.revoked_at IS DISTINCT FROM old.revoked_at))) EXECUTE FUNCTION public.agents_revocation_final();


--
-- Name: approval_passkeys approval_passkeys_current_round; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approval_passkeys_current_round BEFORE INSERT ON public.approval_passkeys FOR EACH ROW EXECUTE FUNCTION public.approvals_current_round();


--
-- Name: approval_passkeys approval_passkeys_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approval_passkeys_no_truncate BEFORE TRUNCATE ON public.approval_passkeys FOR EACH STATEMENT EXECUTE FUNCTION public.approval_passkeys_append_only();


--
-- Name: approval_passkeys approval_passkeys_no_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approval_passkeys_no_update BEFORE DELETE OR UPDATE ON public.approval_passkeys FOR EACH ROW EXECUTE FUNCTION public.approval_passkeys_append_only();


--
-- Name: approval_stages approval_stages_check; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approval_stages_check BEFORE INSERT OR UPDATE ON public.approval_stages FOR EACH ROW EXECUTE FUNCTION public.approval_stages_check();


--
-- Name: approval_stages approval_stages_no_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approval_stages_no_delete BEFORE DELETE ON public.approval_stages FOR EACH ROW EXECUTE FUNCTION public.approval_stages_kept();


--
-- Name: approval_stages approval_stages_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approval_stages_no_truncate BEFORE TRUNCATE ON public.approval_stages FOR EACH STATEMENT EXECUTE FUNCTION public.approval_stages_kept();


--
-- Name: approvals approvals_current_round; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approvals_current_round BEFORE INSERT ON public.approvals FOR EACH ROW EXECUTE FUNCTION public.approvals_current_round();


--
-- Name: approvals approvals_in_stage; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER approvals_in_stage BEFORE INSERT ON public.approvals FOR EACH ROW EXECUTE FUNCTION public.approvals_in_stage();


--
-- Name: audit_event_hashes audit_event_hashes_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_event_hashes_no_truncate BEFORE TRUNCATE ON public.audit_event_hashes FOR EACH STATEMENT EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: audit_event_hashes audit_event_hashes_no_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_event_hashes_no_update BEFORE DELETE OR UPDATE ON public.audit_event_hashes FOR EACH ROW EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: audit_events audit_events_api_agent; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_events_api_agent AFTER INSERT ON public.audit_events REFERENCING NEW TABLE AS audit_events_new FOR EACH STATEMENT WHEN (((current_setting('is_superuser'::text) = 'off'::text) AND pg_has_role(CURRENT_USER, 'actiond_api'::name, 'MEMBER'::text))) EXECUTE FUNCTION public.audit_events_api_agent();


--
-- Name: audit_events audit_events_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON public.audit_events FOR EACH STATEMENT EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: audit_events audit_events_no_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_events_no_update BEFORE DELETE OR UPDATE ON public.audit_events FOR EACH ROW EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: audit_moved_events audit_moved_events_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_moved_events_no_truncate BEFORE TRUNCATE ON public.audit_moved_events FOR EACH STATEMENT EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: audit_moved_events audit_moved_events_no_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_moved_events_no_update BEFORE DELETE OR UPDATE ON public.audit_moved_events FOR EACH ROW EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: audit_seals audit_seals_no_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_seals_no_truncate BEFORE TRUNCATE ON public.audit_seals FOR EACH STATEMENT EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: audit_seals audit_seals_no_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER audit_seals_no_update BEFORE DELETE OR UPDATE ON public.audit_seals FOR EACH ROW EXECUTE FUNCTION public.audit_events_append_only();


--
-- Name: proposal_transitions proposal_transitions_compile; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER proposal_transitions_compile AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON public.proposal_transitions FOR EACH STATEMENT EXECUTE FUNCTION public.proposal_transitions_changed();


--
-- Name: proposals proposals_transition_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER proposals_transition_insert BEFORE INSERT ON public.proposals FOR EACH ROW WHEN (((new.state <> 'pending'::text) OR (new.amended_from IS NOT NULL))) EXECUTE FUNCTION public.proposals_check_insert();


--
-- Name: proposals proposals_transition_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER proposals_transition_update BEFORE UPDATE ON public.proposals FOR EACH ROW EXECUTE FUNCTION public.proposals_check_update();


--
-- Name: agent_workload_identities agent_workload_identities_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agent_workload_identities
    ADD CONSTRAINT agent_workload_identities_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents(tenant_id, id);


--
-- Name: agents agents_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.agents
    ADD CONSTRAINT agents_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: approval_passkeys approval_passkeys_approval_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approval_passkeys
    ADD CONSTRAINT approval_passkeys_approval_fkey FOREIGN KEY (proposal_id, round, issuer, subject) REFERENCES public.approvals(proposal_id, round, issuer, subject);


--
-- Name: approval_stages approval_stages_tenant_id_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approval_stages
    ADD CONSTRAINT approval_stages_tenant_id_proposal_id_fkey FOREIGN KEY (tenant_id, proposal_id) REFERENCES public.proposals(tenant_id, id);


--
-- Name: approvals approvals_tenant_id_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_tenant_id_proposal_id_fkey FOREIGN KEY (tenant_id, proposal_id) REFERENCES public.proposals(tenant_id, id);


--
-- Name: budget_reservations budget_reservations_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.budget_reservations
    ADD CONSTRAINT budget_reservations_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: effect_settle_tries effect_settle_tries_tenant_id_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.effect_settle_tries
    ADD CONSTRAINT effect_settle_tries_tenant_id_proposal_id_fkey FOREIGN KEY (tenant_id, proposal_id) REFERENCES public.proposals(tenant_id, id) ON DELETE CASCADE;


--
-- Name: grants grants_tenant_id_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_tenant_id_proposal_id_fkey FOREIGN KEY (tenant_id, proposal_id) REFERENCES public.proposals(tenant_id, id);


--
-- Name: passkey_challenges passkey_challenges_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkey_challenges
    ADD CONSTRAINT passkey_challenges_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: passkey_notices passkey_notices_tenant_id_credential_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkey_notices
    ADD CONSTRAINT passkey_notices_tenant_id_credential_id_fkey FOREIGN KEY (tenant_id, credential_id) REFERENCES public.passkeys(tenant_id, credential_id);


--
-- Name: passkey_user_handles passkey_user_handles_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkey_user_handles
    ADD CONSTRAINT passkey_user_handles_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: passkeys passkeys_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.passkeys
    ADD CONSTRAINT passkeys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: proposal_delegations proposal_delegations_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposal_delegations
    ADD CONSTRAINT proposal_delegations_proposal_id_fkey FOREIGN KEY (proposal_id) REFERENCES public.proposals(id) ON DELETE CASCADE;


--
-- Name: proposal_facts proposal_facts_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposal_facts
    ADD CONSTRAINT proposal_facts_proposal_id_fkey FOREIGN KEY (proposal_id) REFERENCES public.proposals(id) ON DELETE CASCADE;


--
-- Name: proposal_previews proposal_previews_tenant_id_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposal_previews
    ADD CONSTRAINT proposal_previews_tenant_id_proposal_id_fkey FOREIGN KEY (tenant_id, proposal_id) REFERENCES public.proposals(tenant_id, id) ON DELETE CASCADE;


--
-- Name: proposals proposals_amended_from_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposals
    ADD CONSTRAINT proposals_amended_from_fkey FOREIGN KEY (amended_from) REFERENCES public.proposals(id);


--
-- Name: proposals proposals_tenant_id_agent_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.proposals
    ADD CONSTRAINT proposals_tenant_id_agent_id_fkey FOREIGN KEY (tenant_id, agent_id) REFERENCES public.agents(tenant_id, id);


--
-- Name: shadow_decisions shadow_decisions_tenant_id_shadow_seq_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shadow_decisions
    ADD CONSTRAINT shadow_decisions_tenant_id_shadow_seq_fkey FOREIGN KEY (tenant_id, shadow_seq) REFERENCES public.shadow_documents(tenant_id, seq);


--
-- Name: shadow_documents shadow_documents_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.shadow_documents
    ADD CONSTRAINT shadow_documents_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: tenant_documents tenant_documents_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tenant_documents
    ADD CONSTRAINT tenant_documents_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: tenant_moves tenant_moves_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tenant_moves
    ADD CONSTRAINT tenant_moves_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: web_notifications web_notifications_tenant_id_proposal_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.web_notifications
    ADD CONSTRAINT web_notifications_tenant_id_proposal_id_fkey FOREIGN KEY (tenant_id, proposal_id) REFERENCES public.proposals(tenant_id, id);


--
-- Name: audit_events admin_write; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY admin_write ON public.audit_events FOR INSERT TO actiond_admin WITH CHECK (((kind = ANY (ARRAY['tenant.document_applied'::text, 'tenant.shadow_stored'::text, 'tenant.shadow_promoted'::text, 'agent.created'::text, 'agent.revoked'::text, 'agent.frozen'::text, 'agent.unfrozen'::text, 'proposal.decided'::text, 'approval.breakglass'::text, 'approval.recorded'::text, 'approval.decided'::text, 'approval.refused'::text, 'proposal.expired'::text, 'approval.stage_opened'::text, 'approval.stage_completed'::text, 'approval.stage_timed_out'::text, 'proposal.amended'::text])) OR ((kind = 'proposal.submitted'::text) AND (actor ~~ 'operator:%'::text) AND (from_state IS NULL) AND (to_state = 'pending'::text))));


--
-- Name: proposals amendments_only; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY amendments_only ON public.proposals AS RESTRICTIVE FOR INSERT TO actiond_web, actiond_admin WITH CHECK ((amended_from IS NOT NULL));


--
-- Name: audit_events api_read; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY api_read ON public.audit_events FOR SELECT TO actiond_api USING (public.actiond_tenant_visible(tenant_id));


--
-- Name: proposal_delegations api_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY api_tenant ON public.proposal_delegations TO actiond_api USING (public.actiond_tenant_visible(tenant_id)) WITH CHECK (public.actiond_tenant_visible(tenant_id));


--
-- Name: proposal_facts api_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY api_tenant ON public.proposal_facts TO actiond_api USING (public.actiond_tenant_visible(tenant_id)) WITH CHECK (public.actiond_tenant_visible(tenant_id));


--
-- Name: proposals api_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY api_tenant ON public.proposals TO actiond_api USING (public.actiond_tenant_visible(tenant_id)) WITH CHECK (public.actiond_tenant_visible(tenant_id));


--
-- Name: audit_events api_write; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY api_write ON public.audit_events FOR INSERT TO actiond_api WITH CHECK ((public.actiond_tenant_visible(tenant_id) AND (actor ~~ 'agent:%'::text) AND (proposal_id IS NOT NULL) AND (((kind = 'proposal.submitted'::text) AND (from_state IS NULL) AND (to_state = 'pending'::text)) OR ((kind = 'proposal.withdrawn'::text) AND (from_state = ANY (ARRAY['pending'::text, 'escalated'::text])) AND (to_state = 'withdrawn'::text)))));


--
-- Name: approval_passkeys; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.approval_passkeys ENABLE ROW LEVEL SECURITY;

--
-- Name: approval_stages; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.approval_stages ENABLE ROW LEVEL SECURITY;

--
-- Name: approvals; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.approvals ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_events; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.audit_events ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_moved_events; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.audit_moved_events ENABLE ROW LEVEL SECURITY;

--
-- Name: proposals auditor; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY auditor ON public.proposals FOR SELECT TO actiond_auditor USING (true);


--
-- Name: audit_events auditor_read; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY auditor_read ON public.audit_events FOR SELECT TO actiond_auditor USING (true);


--
-- Name: audit_moved_events auditor_read; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY auditor_read ON public.audit_moved_events FOR SELECT TO actiond_auditor USING (true);


--
-- Name: budget_reservations; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.budget_reservations ENABLE ROW LEVEL SECURITY;

--
-- Name: effect_settle_tries; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.effect_settle_tries ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_events executor_write; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY executor_write ON public.audit_events FOR INSERT TO actiond_executor WITH CHECK ((kind = ANY (ARRAY['grant.spent'::text, 'grant.rejected'::text, 'grant.expired'::text, 'proposal.blocked_policy_changed'::text, 'proposal.executed'::text, 'proposal.outcome_unknown'::text, 'proposal.stale'::text, 'proposal.effect'::text, 'proposal.reescalated'::text])));


--
-- Name: grants; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.grants ENABLE ROW LEVEL SECURITY;

--
-- Name: passkey_challenges; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.passkey_challenges ENABLE ROW LEVEL SECURITY;

--
-- Name: passkey_notices; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.passkey_notices ENABLE ROW LEVEL SECURITY;

--
-- Name: passkey_user_handles; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.passkey_user_handles ENABLE ROW LEVEL SECURITY;

--
-- Name: passkeys; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.passkeys ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_events policy_write; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY policy_write ON public.audit_events FOR INSERT TO actiond_policy WITH CHECK ((kind = ANY (ARRAY['proposal.decided'::text, 'proposal.expired'::text, 'approval.stage_opened'::text, 'approval.stage_timed_out'::text])));


--
-- Name: proposal_delegations; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.proposal_delegations ENABLE ROW LEVEL SECURITY;

--
-- Name: proposal_facts; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.proposal_facts ENABLE ROW LEVEL SECURITY;

--
-- Name: proposal_previews; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.proposal_previews ENABLE ROW LEVEL SECURITY;

--
-- Name: proposals; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.proposals ENABLE ROW LEVEL SECURITY;

--
-- Name: approvals retention_decided; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY retention_decided ON public.approvals TO actiond_retention USING (true) WITH CHECK (true);


--
-- Name: proposals retention_decided; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY retention_decided ON public.proposals TO actiond_retention USING ((state = ANY (ARRAY['blocked'::text, 'denied'::text, 'expired'::text, 'succeeded'::text, 'failed'::text, 'outcome_unknown'::text, 'withdrawn'::text, 'amended'::text, 'stale'::text, 'effect_mismatch'::text]))) WITH CHECK ((state = ANY (ARRAY['blocked'::text, 'denied'::text, 'expired'::text, 'succeeded'::text, 'failed'::text, 'outcome_unknown'::text, 'withdrawn'::text, 'amended'::text, 'stale'::text, 'effect_mismatch'::text])));


--
-- Name: audit_events retention_write; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY retention_write ON public.audit_events TO actiond_retention USING ((kind = 'retention.purged'::text)) WITH CHECK ((kind = 'retention.purged'::text));


--
-- Name: audit_events sealer_read; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY sealer_read ON public.audit_events FOR SELECT TO actiond_sealer USING (true);


--
-- Name: shadow_decisions; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.shadow_decisions ENABLE ROW LEVEL SECURITY;

--
-- Name: shadow_documents; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.shadow_documents ENABLE ROW LEVEL SECURITY;

--
-- Name: web_notifications; Type: ROW SECURITY; Schema: public; Owner: -
--

ALTER TABLE public.web_notifications ENABLE ROW LEVEL SECURITY;

--
-- Name: audit_events web_read; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_read ON public.audit_events FOR SELECT TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: approval_passkeys web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.approval_passkeys TO actiond_web USING (public.actiond_tenant_visible(tenant_id)) WITH CHECK (public.actiond_tenant_visible(tenant_id));


--
-- Name: approval_stages web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.approval_stages TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: approvals web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.approvals TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: grants web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.grants TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: passkey_challenges web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.passkey_challenges TO actiond_web USING (public.actiond_tenant_visible(tenant_id)) WITH CHECK (public.actiond_tenant_visible(tenant_id));


--
-- Name: passkey_notices web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.passkey_notices TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: passkey_user_handles web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.passkey_user_handles TO actiond_web USING (public.actiond_tenant_visible(tenant_id)) WITH CHECK (public.actiond_tenant_visible(tenant_id));


--
-- Name: passkeys web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.passkeys TO actiond_web USING (public.actiond_tenant_visible(tenant_id)) WITH CHECK (public.actiond_tenant_visible(tenant_id));


--
-- Name: proposal_delegations web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.proposal_delegations TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: proposal_facts web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.proposal_facts TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: proposal_previews web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.proposal_previews FOR SELECT TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: proposals web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.proposals TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: shadow_decisions web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.shadow_decisions FOR SELECT TO actiond_web USING (public.actiond_tenant_visible(tenant_id));


--
-- Name: shadow_documents web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.shadow_documents FOR SELECT TO actiond_web USING (public.actiond_tenant_visible(tenant_id));


--
-- Name: web_notifications web_tenant; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_tenant ON public.web_notifications TO actiond_web USING (public.actiond_tenant_visible(tenant_id, true)) WITH CHECK (public.actiond_tenant_visible(tenant_id, true));


--
-- Name: audit_events web_write; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY web_write ON public.audit_events FOR INSERT TO actiond_web WITH CHECK ((public.actiond_tenant_visible(tenant_id, true) AND ((kind = ANY (ARRAY['approval.recorded'::text, 'approval.decided'::text, 'approval.refused'::text, 'proposal.expired'::text, 'approval.stage_opened'::text, 'approval.stage_completed'::text, 'approval.stage_timed_out'::text, 'agent.frozen'::text, 'agent.unfrozen'::text, 'agent.revoked'::text, 'proposal.decided'::text, 'passkey.registered'::text, 'passkey.registration_refused'::text, 'proposal.amended'::text])) OR ((kind = 'proposal.submitted'::text) AND (actor ~~ 'approver:%'::text) AND (from_state IS NULL) AND (to_state = 'pending'::text)))));


--
-- Name: approval_passkeys workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.approval_passkeys FOR SELECT TO actiond_admin, actiond_auditor USING (true);


--
-- Name: approval_stages workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.approval_stages TO actiond_policy, actiond_admin USING (true) WITH CHECK (true);


--
-- Name: approvals workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.approvals TO actiond_admin USING (true) WITH CHECK (true);


--
-- Name: budget_reservations workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.budget_reservations TO actiond_policy, actiond_admin USING (true) WITH CHECK (true);


--
-- Name: effect_settle_tries workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.effect_settle_tries TO actiond_executor, actiond_admin, actiond_retention USING (true) WITH CHECK (true);


--
-- Name: grants workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.grants TO actiond_policy, actiond_executor, actiond_admin USING (true) WITH CHECK (true);


--
-- Name: passkey_notices workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.passkey_notices FOR SELECT TO actiond_admin USING (true);


--
-- Name: passkey_user_handles workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.passkey_user_handles FOR SELECT TO actiond_admin USING (true);


--
-- Name: passkeys workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.passkeys FOR SELECT TO actiond_admin USING (true);


--
-- Name: proposal_delegations workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.proposal_delegations TO actiond_policy, actiond_executor, actiond_admin, actiond_retention USING (true) WITH CHECK (true);


--
-- Name: proposal_facts workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.proposal_facts TO actiond_policy, actiond_executor, actiond_admin, actiond_retention USING (true) WITH CHECK (true);


--
-- Name: proposal_previews workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.proposal_previews TO actiond_executor, actiond_admin, actiond_retention USING (true) WITH CHECK (true);


--
-- Name: proposals workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.proposals TO actiond_policy, actiond_executor, actiond_admin USING (true) WITH CHECK (true);


--
-- Name: shadow_decisions workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.shadow_decisions TO actiond_policy, actiond_admin USING (true) WITH CHECK (true);


--
-- Name: shadow_documents workers; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers ON public.shadow_documents TO actiond_policy, actiond_admin USING (true) WITH CHECK (true);


--
-- Name: audit_events workers_read; Type: POLICY; Schema: public; Owner: -
--

CREATE POLICY workers_read ON public.audit_events FOR SELECT TO actiond_policy, actiond_executor, actiond_admin USING (true);


--
-- Name: SCHEMA public; Type: ACL; Schema: -; Owner: -
--

GRANT USAGE ON SCHEMA public TO actiond_api;
GRANT USAGE ON SCHEMA public TO actiond_policy;
GRANT USAGE ON SCHEMA public TO actiond_web;
GRANT USAGE ON SCHEMA public TO actiond_executor;
GRANT USAGE ON SCHEMA public TO actiond_admin;
GRANT USAGE ON SCHEMA public TO actiond_sealer;
GRANT USAGE ON SCHEMA public TO actiond_auditor;
GRANT USAGE ON SCHEMA public TO actiond_retention;


--
-- Name: FUNCTION actiond_compile_transitions(); Type: ACL; Schema: public; Owner: -
--

REVOKE ALL ON FUNCTION public.actiond_compile_transitions() FROM PUBLIC;


--
-- Name: TABLE agent_workload_identities; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.agent_workload_identities TO actiond_api;
GRANT SELECT,INSERT ON TABLE public.agent_workload_identities TO actiond_admin;


--
-- Name: TABLE agents; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.agents TO actiond_api;
GRANT SELECT ON TABLE public.agents TO actiond_policy;
GRANT SELECT ON TABLE public.agents TO actiond_web;
GRANT SELECT ON TABLE public.agents TO actiond_executor;
GRANT SELECT,INSERT ON TABLE public.agents TO actiond_admin;


--
-- Name: COLUMN agents.revoked_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(revoked_at) ON TABLE public.agents TO actiond_admin;
GRANT UPDATE(revoked_at) ON TABLE public.agents TO actiond_web;


--
-- Name: COLUMN agents.frozen_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(frozen_at) ON TABLE public.agents TO actiond_web;
GRANT UPDATE(frozen_at) ON TABLE public.agents TO actiond_admin;


--
-- Name: COLUMN agents.frozen_by; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(frozen_by) ON TABLE public.agents TO actiond_web;
GRANT UPDATE(frozen_by) ON TABLE public.agents TO actiond_admin;


--
-- Name: TABLE approval_passkeys; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.approval_passkeys TO actiond_web;
GRANT SELECT ON TABLE public.approval_passkeys TO actiond_admin;
GRANT SELECT ON TABLE public.approval_passkeys TO actiond_auditor;


--
-- Name: TABLE approval_stages; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.approval_stages TO actiond_policy;
GRANT SELECT ON TABLE public.approval_stages TO actiond_web;
GRANT SELECT ON TABLE public.approval_stages TO actiond_admin;


--
-- Name: COLUMN approval_stages.opened_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(opened_at) ON TABLE public.approval_stages TO actiond_policy;
GRANT UPDATE(opened_at) ON TABLE public.approval_stages TO actiond_web;
GRANT UPDATE(opened_at) ON TABLE public.approval_stages TO actiond_admin;


--
-- Name: COLUMN approval_stages.due_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(due_at) ON TABLE public.approval_stages TO actiond_policy;
GRANT UPDATE(due_at) ON TABLE public.approval_stages TO actiond_web;
GRANT UPDATE(due_at) ON TABLE public.approval_stages TO actiond_admin;


--
-- Name: COLUMN approval_stages.completed_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(completed_at) ON TABLE public.approval_stages TO actiond_web;
GRANT UPDATE(completed_at) ON TABLE public.approval_stages TO actiond_admin;


--
-- Name: COLUMN approval_stages.timed_out_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(timed_out_at) ON TABLE public.approval_stages TO actiond_policy;
GRANT UPDATE(timed_out_at) ON TABLE public.approval_stages TO actiond_web;
GRANT UPDATE(timed_out_at) ON TABLE public.approval_stages TO actiond_admin;


--
-- Name: TABLE approvals; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.approvals TO actiond_web;
GRANT SELECT,INSERT ON TABLE public.approvals TO actiond_admin;


--
-- Name: COLUMN approvals.proposal_id; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(proposal_id) ON TABLE public.approvals TO actiond_retention;


--
-- Name: COLUMN approvals.tenant_id; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(tenant_id) ON TABLE public.approvals TO actiond_retention;


--
-- Name: COLUMN approvals.comment; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(comment),UPDATE(comment) ON TABLE public.approvals TO actiond_retention;


--
-- Name: TABLE audit_event_hashes; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.audit_event_hashes TO actiond_sealer;
GRANT SELECT ON TABLE public.audit_event_hashes TO actiond_auditor;


--
-- Name: TABLE audit_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.audit_events TO actiond_api;
GRANT SELECT ON TABLE public.audit_events TO actiond_policy;
GRANT SELECT ON TABLE public.audit_events TO actiond_web;
GRANT SELECT ON TABLE public.audit_events TO actiond_executor;
GRANT SELECT ON TABLE public.audit_events TO actiond_admin;
GRANT SELECT ON TABLE public.audit_events TO actiond_sealer;
GRANT SELECT ON TABLE public.audit_events TO actiond_auditor;
GRANT SELECT ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.tenant_id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(tenant_id) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(tenant_id) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(tenant_id) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(tenant_id) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(tenant_id) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(tenant_id) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.proposal_id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(proposal_id) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(proposal_id) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(proposal_id) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(proposal_id) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(proposal_id) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(proposal_id) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.kind; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(kind) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(kind) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(kind) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(kind) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(kind) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(kind) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.actor; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(actor) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(actor) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(actor) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(actor) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(actor) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(actor) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.from_state; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(from_state) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(from_state) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(from_state) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(from_state) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(from_state) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(from_state) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.to_state; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(to_state) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(to_state) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(to_state) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(to_state) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(to_state) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(to_state) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.intent_hash; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(intent_hash) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(intent_hash) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(intent_hash) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(intent_hash) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(intent_hash) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(intent_hash) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.params_sha256; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(params_sha256) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(params_sha256) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(params_sha256) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(params_sha256) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(params_sha256) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(params_sha256) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: COLUMN audit_events.detail; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(detail) ON TABLE public.audit_events TO actiond_api;
GRANT INSERT(detail) ON TABLE public.audit_events TO actiond_policy;
GRANT INSERT(detail) ON TABLE public.audit_events TO actiond_web;
GRANT INSERT(detail) ON TABLE public.audit_events TO actiond_executor;
GRANT INSERT(detail) ON TABLE public.audit_events TO actiond_admin;
GRANT INSERT(detail) ON TABLE public.audit_events TO actiond_retention;


--
-- Name: SEQUENCE audit_events_id_seq; Type: ACL; Schema: public; Owner: -
--

GRANT USAGE ON SEQUENCE public.audit_events_id_seq TO actiond_api;
GRANT USAGE ON SEQUENCE public.audit_events_id_seq TO actiond_policy;
GRANT USAGE ON SEQUENCE public.audit_events_id_seq TO actiond_web;
GRANT USAGE ON SEQUENCE public.audit_events_id_seq TO actiond_executor;
GRANT USAGE ON SEQUENCE public.audit_events_id_seq TO actiond_admin;
GRANT SELECT ON SEQUENCE public.audit_events_id_seq TO actiond_sealer;
GRANT USAGE ON SEQUENCE public.audit_events_id_seq TO actiond_retention;


--
-- Name: TABLE audit_moved_events; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.audit_moved_events TO actiond_auditor;


--
-- Name: TABLE audit_seals; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.audit_seals TO actiond_sealer;
GRANT SELECT ON TABLE public.audit_seals TO actiond_auditor;


--
-- Name: TABLE budget_reservations; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.budget_reservations TO actiond_policy;
GRANT SELECT ON TABLE public.budget_reservations TO actiond_admin;


--
-- Name: TABLE effect_settle_tries; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.effect_settle_tries TO actiond_executor;
GRANT SELECT ON TABLE public.effect_settle_tries TO actiond_admin;
GRANT SELECT,DELETE ON TABLE public.effect_settle_tries TO actiond_retention;


--
-- Name: TABLE grants; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT ON TABLE public.grants TO actiond_policy;
GRANT INSERT ON TABLE public.grants TO actiond_web;
GRANT SELECT ON TABLE public.grants TO actiond_executor;
GRANT SELECT,INSERT ON TABLE public.grants TO actiond_admin;


--
-- Name: COLUMN grants.used_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(used_at) ON TABLE public.grants TO actiond_executor;


--
-- Name: COLUMN grants.used_by; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(used_by) ON TABLE public.grants TO actiond_executor;


--
-- Name: COLUMN grants.voided_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(voided_at) ON TABLE public.grants TO actiond_executor;


--
-- Name: TABLE passkey_challenges; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE ON TABLE public.passkey_challenges TO actiond_web;


--
-- Name: TABLE passkey_notices; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.passkey_notices TO actiond_web;
GRANT SELECT ON TABLE public.passkey_notices TO actiond_admin;


--
-- Name: COLUMN passkey_notices.status; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(status) ON TABLE public.passkey_notices TO actiond_web;


--
-- Name: COLUMN passkey_notices.attempts; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(attempts) ON TABLE public.passkey_notices TO actiond_web;


--
-- Name: COLUMN passkey_notices.channels; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(channels) ON TABLE public.passkey_notices TO actiond_web;


--
-- Name: COLUMN passkey_notices.last_error; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(last_error) ON TABLE public.passkey_notices TO actiond_web;


--
-- Name: COLUMN passkey_notices.updated_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(updated_at) ON TABLE public.passkey_notices TO actiond_web;


--
-- Name: COLUMN passkey_notices.next_attempt_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(next_attempt_at) ON TABLE public.passkey_notices TO actiond_web;


--
-- Name: TABLE passkey_user_handles; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.passkey_user_handles TO actiond_web;
GRANT SELECT ON TABLE public.passkey_user_handles TO actiond_admin;


--
-- Name: TABLE passkeys; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE ON TABLE public.passkeys TO actiond_web;
GRANT SELECT ON TABLE public.passkeys TO actiond_admin;


--
-- Name: COLUMN passkeys.sign_count; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(sign_count) ON TABLE public.passkeys TO actiond_web;


--
-- Name: COLUMN passkeys.last_used_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(last_used_at) ON TABLE public.passkeys TO actiond_web;


--
-- Name: TABLE proposal_delegations; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.proposal_delegations TO actiond_api;
GRANT SELECT ON TABLE public.proposal_delegations TO actiond_policy;
GRANT SELECT,INSERT ON TABLE public.proposal_delegations TO actiond_web;
GRANT SELECT ON TABLE public.proposal_delegations TO actiond_executor;
GRANT SELECT,INSERT ON TABLE public.proposal_delegations TO actiond_admin;
GRANT SELECT,DELETE ON TABLE public.proposal_delegations TO actiond_retention;


--
-- Name: TABLE proposal_facts; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.proposal_facts TO actiond_api;
GRANT SELECT,INSERT ON TABLE public.proposal_facts TO actiond_web;
GRANT SELECT,INSERT ON TABLE public.proposal_facts TO actiond_admin;
GRANT SELECT ON TABLE public.proposal_facts TO actiond_policy;
GRANT SELECT ON TABLE public.proposal_facts TO actiond_executor;
GRANT SELECT,DELETE ON TABLE public.proposal_facts TO actiond_retention;


--
-- Name: TABLE proposal_previews; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,UPDATE ON TABLE public.proposal_previews TO actiond_executor;
GRANT SELECT ON TABLE public.proposal_previews TO actiond_web;
GRANT SELECT ON TABLE public.proposal_previews TO actiond_admin;
GRANT SELECT,DELETE ON TABLE public.proposal_previews TO actiond_retention;


--
-- Name: TABLE proposal_transitions; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.proposal_transitions TO actiond_api;
GRANT SELECT ON TABLE public.proposal_transitions TO actiond_policy;
GRANT SELECT ON TABLE public.proposal_transitions TO actiond_web;
GRANT SELECT ON TABLE public.proposal_transitions TO actiond_executor;
GRANT SELECT ON TABLE public.proposal_transitions TO actiond_admin;


--
-- Name: TABLE proposals; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.proposals TO actiond_api;
GRANT SELECT ON TABLE public.proposals TO actiond_policy;
GRANT SELECT ON TABLE public.proposals TO actiond_web;
GRANT SELECT ON TABLE public.proposals TO actiond_executor;
GRANT SELECT ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(id) ON TABLE public.proposals TO actiond_api;
GRANT SELECT(id) ON TABLE public.proposals TO actiond_retention;
GRANT SELECT(id) ON TABLE public.proposals TO actiond_auditor;
GRANT INSERT(id) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(id) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.tenant_id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(tenant_id) ON TABLE public.proposals TO actiond_api;
GRANT SELECT(tenant_id) ON TABLE public.proposals TO actiond_retention;
GRANT SELECT(tenant_id) ON TABLE public.proposals TO actiond_auditor;
GRANT INSERT(tenant_id) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(tenant_id) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.agent_id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(agent_id) ON TABLE public.proposals TO actiond_api;
GRANT INSERT(agent_id) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(agent_id) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.action; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(action) ON TABLE public.proposals TO actiond_api;
GRANT INSERT(action) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(action) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.target; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(target) ON TABLE public.proposals TO actiond_api;
GRANT INSERT(target) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(target) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.params_json; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(params_json) ON TABLE public.proposals TO actiond_api;
GRANT UPDATE(params_json) ON TABLE public.proposals TO actiond_retention;
GRANT INSERT(params_json) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(params_json) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.params_sha256; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(params_sha256) ON TABLE public.proposals TO actiond_api;
GRANT INSERT(params_sha256) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(params_sha256) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.intent_hash; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(intent_hash) ON TABLE public.proposals TO actiond_api;
GRANT SELECT(intent_hash) ON TABLE public.proposals TO actiond_auditor;
GRANT INSERT(intent_hash) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(intent_hash) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.agent_reason; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(agent_reason) ON TABLE public.proposals TO actiond_api;
GRANT UPDATE(agent_reason) ON TABLE public.proposals TO actiond_retention;
GRANT INSERT(agent_reason) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(agent_reason) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.source_text; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(source_text) ON TABLE public.proposals TO actiond_api;
GRANT UPDATE(source_text) ON TABLE public.proposals TO actiond_retention;
GRANT INSERT(source_text) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(source_text) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.session_id; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(session_id) ON TABLE public.proposals TO actiond_api;
GRANT INSERT(session_id) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(session_id) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.idempotency_key; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(idempotency_key) ON TABLE public.proposals TO actiond_api;


--
-- Name: COLUMN proposals.request_sha256; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(request_sha256) ON TABLE public.proposals TO actiond_api;
GRANT INSERT(request_sha256) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(request_sha256) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.state; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(state) ON TABLE public.proposals TO actiond_policy;
GRANT UPDATE(state) ON TABLE public.proposals TO actiond_web;
GRANT UPDATE(state) ON TABLE public.proposals TO actiond_executor;
GRANT UPDATE(state) ON TABLE public.proposals TO actiond_admin;
GRANT SELECT(state) ON TABLE public.proposals TO actiond_retention;
GRANT UPDATE(state) ON TABLE public.proposals TO actiond_api;


--
-- Name: COLUMN proposals.updated_at; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(updated_at) ON TABLE public.proposals TO actiond_retention;


--
-- Name: COLUMN proposals.effect; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(effect) ON TABLE public.proposals TO actiond_policy;


--
-- Name: COLUMN proposals.rule_name; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(rule_name) ON TABLE public.proposals TO actiond_policy;


--
-- Name: COLUMN proposals.decision_reason; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(decision_reason) ON TABLE public.proposals TO actiond_policy;
GRANT UPDATE(decision_reason) ON TABLE public.proposals TO actiond_web;
GRANT UPDATE(decision_reason) ON TABLE public.proposals TO actiond_executor;
GRANT UPDATE(decision_reason) ON TABLE public.proposals TO actiond_admin;
GRANT UPDATE(decision_reason) ON TABLE public.proposals TO actiond_retention;
GRANT UPDATE(decision_reason) ON TABLE public.proposals TO actiond_api;


--
-- Name: COLUMN proposals.doc_version; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(doc_version) ON TABLE public.proposals TO actiond_policy;


--
-- Name: COLUMN proposals.doc_sha256; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(doc_sha256) ON TABLE public.proposals TO actiond_policy;


--
-- Name: COLUMN proposals.decided_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(decided_at) ON TABLE public.proposals TO actiond_policy;


--
-- Name: COLUMN proposals.lease_owner; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(lease_owner) ON TABLE public.proposals TO actiond_executor;


--
-- Name: COLUMN proposals.lease_until; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(lease_until) ON TABLE public.proposals TO actiond_executor;


--
-- Name: COLUMN proposals.outcome; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(outcome) ON TABLE public.proposals TO actiond_executor;


--
-- Name: COLUMN proposals.outcome_detail; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(outcome_detail) ON TABLE public.proposals TO actiond_executor;
GRANT UPDATE(outcome_detail) ON TABLE public.proposals TO actiond_retention;


--
-- Name: COLUMN proposals.finished_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(finished_at) ON TABLE public.proposals TO actiond_executor;


--
-- Name: COLUMN proposals.purged_at; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT(purged_at),UPDATE(purged_at) ON TABLE public.proposals TO actiond_retention;


--
-- Name: COLUMN proposals.amended_from; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(amended_from) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(amended_from) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.amended_by; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(amended_by) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(amended_by) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.amendment_diff; Type: ACL; Schema: public; Owner: -
--

GRANT INSERT(amendment_diff) ON TABLE public.proposals TO actiond_web;
GRANT INSERT(amendment_diff) ON TABLE public.proposals TO actiond_admin;


--
-- Name: COLUMN proposals.approval_round; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(approval_round) ON TABLE public.proposals TO actiond_executor;


--
-- Name: TABLE shadow_decisions; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT ON TABLE public.shadow_decisions TO actiond_policy;
GRANT SELECT ON TABLE public.shadow_decisions TO actiond_admin;
GRANT SELECT ON TABLE public.shadow_decisions TO actiond_web;


--
-- Name: TABLE shadow_documents; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.shadow_documents TO actiond_policy;
GRANT SELECT,INSERT ON TABLE public.shadow_documents TO actiond_admin;
GRANT SELECT ON TABLE public.shadow_documents TO actiond_web;


--
-- Name: COLUMN shadow_documents.closed_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(closed_at) ON TABLE public.shadow_documents TO actiond_admin;


--
-- Name: COLUMN shadow_documents.promoted_version; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(promoted_version) ON TABLE public.shadow_documents TO actiond_admin;


--
-- Name: TABLE tenant_documents; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.tenant_documents TO actiond_api;
GRANT SELECT ON TABLE public.tenant_documents TO actiond_policy;
GRANT SELECT ON TABLE public.tenant_documents TO actiond_web;
GRANT SELECT ON TABLE public.tenant_documents TO actiond_executor;
GRANT SELECT,INSERT ON TABLE public.tenant_documents TO actiond_admin;
GRANT SELECT ON TABLE public.tenant_documents TO actiond_retention;


--
-- Name: TABLE tenant_moves; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.tenant_moves TO actiond_api;
GRANT SELECT ON TABLE public.tenant_moves TO actiond_policy;
GRANT SELECT ON TABLE public.tenant_moves TO actiond_web;
GRANT SELECT ON TABLE public.tenant_moves TO actiond_executor;
GRANT SELECT ON TABLE public.tenant_moves TO actiond_admin;
GRANT SELECT ON TABLE public.tenant_moves TO actiond_retention;
GRANT SELECT ON TABLE public.tenant_moves TO actiond_auditor;


--
-- Name: TABLE tenants; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT ON TABLE public.tenants TO actiond_api;
GRANT SELECT ON TABLE public.tenants TO actiond_policy;
GRANT SELECT ON TABLE public.tenants TO actiond_web;
GRANT SELECT ON TABLE public.tenants TO actiond_executor;
GRANT SELECT,INSERT ON TABLE public.tenants TO actiond_admin;
GRANT SELECT ON TABLE public.tenants TO actiond_auditor;
GRANT SELECT ON TABLE public.tenants TO actiond_retention;


--
-- Name: COLUMN tenants.created_at; Type: ACL; Schema: public; Owner: -
--

GRANT UPDATE(created_at) ON TABLE public.tenants TO actiond_admin;


--
-- Name: TABLE web_login_states; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.web_login_states TO actiond_web;


--
-- Name: TABLE web_notifications; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.web_notifications TO actiond_web;


--
-- Name: TABLE web_sessions; Type: ACL; Schema: public; Owner: -
--

GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.web_sessions TO actiond_web;


--
-- PostgreSQL database dump complete
--


