-- One proposal through the wide schema (wide-schema.sql): submit; claim + decide + grant; claim +
-- spend + start; claim + finish. Four commits, an audit event each, as bench/floor does.
\set n random(1, 2000000000)
BEGIN;
WITH p AS (INSERT INTO m_proposals (id, tenant_id, agent_id, action, target, params_json, intent_hash, idempotency_key, state)
  VALUES (gen_random_uuid(), 'bench', 'a0a0a0a0-0000-4000-8000-000000000001', 'webhook.post', 'https://hooks.example/x',
          '{"body":{"kind":"ping","n":' || :n || '}}', md5(CAST(:n AS text)) || md5(CAST(:n AS text)), CAST(:n AS text), 'pending') RETURNING id)
INSERT INTO m_events (tenant_id, proposal_id, kind) SELECT 'bench', id, 'submitted' FROM p;
COMMIT;
WITH c AS (SELECT id FROM m_proposals WHERE state = 'pending' ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED),
     u AS (UPDATE m_proposals p SET state = 'approved', updated_at = now(), effect = 'allow', rule_name = 'r', decision_reason = 'ok', decided_at = now() FROM c WHERE p.id = c.id RETURNING p.id, p.intent_hash),
     g AS (INSERT INTO m_grants (id, tenant_id, proposal_id, intent_hash, expires_at, sig)
           SELECT gen_random_uuid(), 'bench', u.id, u.intent_hash, now() + interval '5 min', decode(repeat('ab', 64), 'hex') FROM u RETURNING proposal_id)
INSERT INTO m_events (tenant_id, proposal_id, kind) SELECT 'bench', proposal_id, 'approved' FROM g;
WITH c AS (SELECT id FROM m_proposals WHERE state = 'approved' ORDER BY updated_at LIMIT 1 FOR UPDATE SKIP LOCKED),
     s AS (UPDATE m_grants g SET used_at = now() FROM c WHERE g.proposal_id = c.id AND g.used_at IS NULL AND g.expires_at > now() RETURNING g.proposal_id),
     u AS (UPDATE m_proposals p SET state = 'executing', updated_at = now(), lease_owner = 'x', lease_until = now() + interval '30 s' FROM s WHERE p.id = s.proposal_id RETURNING p.id)
INSERT INTO m_events (tenant_id, proposal_id, kind) SELECT 'bench', id, 'spent' FROM u;
WITH c AS (SELECT id FROM m_proposals WHERE state = 'executing' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED),
     u AS (UPDATE m_proposals p SET state = 'succeeded', updated_at = now(), outcome = 'succeeded', finished_at = now() FROM c WHERE p.id = c.id RETURNING p.id)
INSERT INTO m_events (tenant_id, proposal_id, kind) SELECT 'bench', id, 'finished' FROM u;
