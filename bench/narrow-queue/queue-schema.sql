-- The same lifecycle and index set split into a write-once wide record and a narrow queue row
-- that lives only while the proposal is open (the "narrow queue table" design). No index of
-- `m_proposals` reads the state or `updated_at`, so every state change of the wide row is HOT;
-- the queue indexes and the open-intent uniqueness move to `m_queue`, whose row is deleted at
-- the outcome; the purge index keys on `created_at` instead of the state.
DROP TABLE IF EXISTS m_events, m_grants, m_proposals, m_queue;
CREATE TABLE m_proposals (id uuid PRIMARY KEY, tenant_id text NOT NULL, agent_id uuid NOT NULL,
  action text NOT NULL, target text NOT NULL, params_json text NOT NULL, intent_hash text NOT NULL,
  idempotency_key text, state text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
  effect text, rule_name text, decision_reason text, decided_at timestamptz, lease_owner text,
  lease_until timestamptz, outcome text, finished_at timestamptz, purged_at timestamptz,
  UNIQUE (tenant_id, id)) WITH (fillfactor = 80);
CREATE UNIQUE INDEX m_idem ON m_proposals (tenant_id, agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX m_history ON m_proposals (agent_id, action, created_at);
CREATE INDEX m_purge ON m_proposals (tenant_id, created_at) WHERE purged_at IS NULL;
CREATE TABLE m_queue (id uuid PRIMARY KEY, tenant_id text NOT NULL, agent_id uuid NOT NULL, intent_hash text NOT NULL,
  state text NOT NULL, at timestamptz NOT NULL DEFAULT now(), lease_until timestamptz) WITH (fillfactor = 70);
CREATE UNIQUE INDEX m_open_intent ON m_queue (tenant_id, agent_id, intent_hash);
CREATE INDEX m_pending ON m_queue (at) WHERE state = 'pending';
CREATE INDEX m_escalated ON m_queue (tenant_id, at) WHERE state = 'escalated';
CREATE INDEX m_approved ON m_queue (at) WHERE state = 'approved';
CREATE INDEX m_executing ON m_queue (id) WHERE state = 'executing';
CREATE TABLE m_grants (id uuid PRIMARY KEY, tenant_id text NOT NULL, proposal_id uuid NOT NULL UNIQUE, intent_hash text NOT NULL,
  expires_at timestamptz NOT NULL, sig bytea NOT NULL, used_at timestamptz) WITH (fillfactor = 50);
CREATE TABLE m_events (id bigserial PRIMARY KEY, tenant_id text NOT NULL, proposal_id uuid, at timestamptz NOT NULL DEFAULT now(), kind text NOT NULL);
CREATE INDEX m_ev_prop ON m_events (proposal_id, id);
CREATE INDEX m_ev_tenant ON m_events (tenant_id, at);
