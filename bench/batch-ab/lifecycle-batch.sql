-- One batch of :b proposals through actiond's schema under its own roles, in the shapes the
-- services use (one statement per stage for the whole batch, the event written from the moved
-- rows): submit; decide + grant; spend + start; finish — four commits per batch. The batch
-- size :b comes from run.sh (`pgbench -D b=…`, BATCH_AB_SIZE, default 20).
BEGIN;
SET LOCAL ROLE actiond_api;
SELECT set_config('actiond.tenant_ids', 'acme', true);
WITH ins AS (
    INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash, request_sha256)
    SELECT gen_random_uuid(), 'acme', '00000000-0000-0000-0000-000000000001', 'webhook.post', 'https://hooks.example/x',
           '{"body":{"n":' || g || '}}', md5(random()::text) || md5(random()::text), md5(random()::text) || md5(random()::text), repeat('c', 64)
    FROM generate_series(1, :b) g
    ON CONFLICT DO NOTHING
    RETURNING id, tenant_id, state, intent_hash, params_sha256
), ev AS (
    INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
    SELECT tenant_id, id, 'proposal.submitted', 'agent:00000000-0000-0000-0000-000000000001', NULL, state, intent_hash, params_sha256,
           '{"action_len": 12, "idempotency_key": false}'
    FROM ins RETURNING proposal_id
)
SELECT array_agg(proposal_id)::text AS ids FROM ev \gset
COMMIT;
BEGIN;
SET LOCAL ROLE actiond_policy;
WITH c AS (
    SELECT id, tenant_id, intent_hash FROM proposals WHERE id = ANY (CAST(:ids AS uuid[])) AND state = 'pending' FOR UPDATE SKIP LOCKED
), g AS (
    INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by)
    SELECT gen_random_uuid(), id, tenant_id, intent_hash, 1, (extract(epoch FROM now() + interval '5 minutes') * 1000000)::bigint,
           'k1', decode(repeat('ab', 64), 'hex'), 'policy'
    FROM c
), d AS (
    UPDATE proposals p SET state = 'approved', effect = 'allow', rule_name = 'allow-pings', decision_reason = 'pings are fine',
           doc_version = 1, doc_sha256 = repeat('d', 64), decided_at = greatest(now(), p.created_at)
    FROM c WHERE p.id = c.id AND p.state = 'pending'
    RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256
), ev AS (
    INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
    SELECT tenant_id, id, 'proposal.decided', 'policy', 'pending', 'approved', intent_hash, params_sha256,
           jsonb_build_object('effect', 'allow', 'rule', 'allow-pings', 'doc_version', 1)
    FROM d RETURNING proposal_id
)
SELECT (SELECT count(*) FROM d) AS decided, (SELECT count(*) FROM ev) AS events;
COMMIT;
BEGIN;
SET LOCAL ROLE actiond_executor;
WITH held AS (
    SELECT p.id FROM proposals p WHERE p.id = ANY (CAST(:ids AS uuid[])) AND p.state = 'approved' FOR UPDATE OF p
), spent AS (
    UPDATE grants g SET used_at = now(), used_by = 'e1'
    FROM held WHERE g.proposal_id = held.id AND g.voided_at IS NULL AND g.used_at IS NULL
    RETURNING g.proposal_id, g.id AS grant_id
), started AS (
    UPDATE proposals p SET state = 'executing', lease_owner = 'e1', lease_until = now() + interval '60 seconds'
    FROM spent WHERE p.id = spent.proposal_id
    RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256, spent.grant_id
), ev AS (
    INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
    SELECT tenant_id, id, 'grant.spent', 'executor' || chr(58) || 'e1', 'approved', 'executing', intent_hash, params_sha256,
           jsonb_build_object('grant_id', grant_id, 'key_id', 'k1')
    FROM started RETURNING proposal_id
)
SELECT count(*) FROM ev;
COMMIT;
BEGIN;
SET LOCAL ROLE actiond_executor;
WITH moved AS (
    UPDATE proposals p SET state = 'succeeded', outcome = 'succeeded', outcome_detail = 'HTTP 200',
           finished_at = greatest(now(), p.updated_at), lease_owner = NULL, lease_until = NULL
    WHERE p.id = ANY (CAST(:ids AS uuid[])) AND p.state = 'executing' AND p.lease_owner = 'e1'
    RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256
), ev AS (
    INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
    SELECT tenant_id, id, 'proposal.executed', 'executor' || chr(58) || 'e1', 'executing', 'succeeded', intent_hash, params_sha256,
           jsonb_build_object('outcome', 'succeeded', 'detail', 'HTTP 200')
    FROM moved RETURNING proposal_id
)
SELECT count(*) FROM ev;
COMMIT;
