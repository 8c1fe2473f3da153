-- One proposal through actiond's own schema with its own statement shapes and roles
-- (submit; decide + grant; claim; spend + start; finish), five commits.
BEGIN;
SET LOCAL ROLE actiond_api;
SELECT set_config('actiond.tenant_ids', 'acme', true);
INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash,
    agent_reason, source_text, session_id, idempotency_key, request_sha256)
SELECT gen_random_uuid(), 'acme', '00000000-0000-0000-0000-000000000001', 'ping', 'https://example.test/hook', '{"n":1}',
       md5(random()::text) || md5(random()::text), md5(random()::text) || md5(random()::text), NULL, NULL, NULL, NULL, repeat('c', 64)
WHERE (SELECT count(*) FROM proposals WHERE tenant_id = 'acme' AND agent_id = '00000000-0000-0000-0000-000000000001' AND state = 'escalated') < 100
ON CONFLICT DO NOTHING RETURNING id AS pid, intent_hash AS ih \gset
INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
SELECT 'acme', ':pid'::uuid, 'proposal.submitted', 'agent:00000000-0000-0000-0000-000000000001', NULL, 'pending', ':ih'::text, ':ih'::text, '{}'
WHERE EXISTS (SELECT 1 FROM proposals p WHERE p.id = ':pid'::uuid);
COMMIT;
SELECT gen_random_uuid() AS gid \gset
BEGIN;
SET LOCAL ROLE actiond_policy;
UPDATE proposals p SET state = 'approved', effect = 'allow', rule_name = 'r', decision_reason = 'ok', doc_version = 1, doc_sha256 = repeat('d', 64), decided_at = now()
WHERE p.id = ':pid'::uuid AND p.state = 'pending';
INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by)
VALUES (':gid'::uuid, ':pid'::uuid, 'acme', ':ih'::text, 1, (extract(epoch FROM now() + interval '5 minutes') * 1000000)::bigint, 'k', '\x00', 'policy');
INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
SELECT 'acme', ':pid'::uuid, 'proposal.decided', 'policy', 'pending', 'approved', ':ih'::text, ':ih'::text, '{}'
WHERE EXISTS (SELECT 1 FROM proposals p WHERE p.id = ':pid'::uuid);
COMMIT;
BEGIN;
SET LOCAL ROLE actiond_executor;
WITH c AS (SELECT id FROM proposals WHERE id = ':pid'::uuid AND state = 'approved' AND (lease_until IS NULL OR lease_until < now()) FOR UPDATE SKIP LOCKED)
UPDATE proposals p SET lease_owner = 'e1', lease_until = now() + interval '30 seconds' FROM c WHERE p.id = c.id;
COMMIT;
BEGIN;
SET LOCAL ROLE actiond_executor;
UPDATE grants SET used_at = now(), used_by = 'e1' WHERE id = ':gid'::uuid AND used_at IS NULL AND expires_at_us > (extract(epoch FROM now()) * 1000000)::bigint;
UPDATE proposals SET state = 'executing', lease_until = now() + interval '60 seconds' WHERE id = ':pid'::uuid AND state = 'approved' AND lease_owner = 'e1';
INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
SELECT 'acme', ':pid'::uuid, 'grant.spent', 'executor:e1', 'approved', 'executing', ':ih'::text, ':ih'::text, '{}'
WHERE EXISTS (SELECT 1 FROM proposals p WHERE p.id = ':pid'::uuid);
COMMIT;
BEGIN;
SET LOCAL ROLE actiond_executor;
UPDATE proposals SET state = 'succeeded', outcome = 'succeeded', outcome_detail = '200', finished_at = now(), lease_owner = NULL, lease_until = NULL
WHERE id = ':pid'::uuid AND state = 'executing' AND lease_owner = 'e1';
INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
SELECT 'acme', ':pid'::uuid, 'proposal.executed', 'executor:e1', 'executing', 'succeeded', ':ih'::text, ':ih'::text, '{}'
WHERE EXISTS (SELECT 1 FROM proposals p WHERE p.id = ':pid'::uuid);
COMMIT;
