-- The floor's lifecycle (bench/floor) on a wide row carrying actiond's columns and its whole
-- index set: the tenant-scoped key the foreign keys use, the rules' history, the open-intent
-- and idempotency uniqueness, the four queue indexes, the purge index, and the audit log's two
-- extra indexes. No triggers, no RLS, no foreign keys: what the index set alone costs.
DROP TABLE IF EXISTS m_events, m_grants, m_proposals, m_queue;
CREATE TABLE m_proposals (id uuid PRIMARY KEY, tenant_id text NOT NULL, agent_id uuid NOT NULL,
  action text NOT NULL, target text NOT NULL, params_json text NOT NULL, intent_hash text NOT NULL,
  idempotency_key text, state text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now(),
  effect text, rule_name text, decision_reason text, decided_at timestamptz, lease_owner text,
  lease_until timestamptz, outcome text, finished_at timestamptz, purged_at timestamptz,
  UNIQUE (tenant_id, id)) WITH (fillfactor = 80);
CREATE UNIQUE INDEX m_idem ON m_proposals (tenant_id, agent_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX m_open_intent ON m_proposals (tenant_id, agent_id, intent_hash) WHERE state IN ('pending','escalated','approved','executing');
CREATE INDEX m_pending ON m_proposals (created_at) WHERE state = 'pending';
CREATE INDEX m_escalated ON m_proposals (tenant_id, created_at) WHERE state = 'escalated';
CREATE INDEX m_approved ON m_proposals (updated_at) WHERE state = 'approved';
CREATE INDEX m_executing ON m_proposals (id) WHERE state = 'executing';
CREATE INDEX m_history ON m_proposals (agent_id, action, created_at);
CREATE INDEX m_purge ON m_proposals (tenant_id, updated_at) WHERE purged_at IS NULL AND state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown');
CREATE TABLE m_grants (id uuid PRIMARY KEY, tenant_id text NOT NULL, proposal_id uuid NOT NULL UNIQUE, intent_hash text NOT NULL,
  expires_at timestamptz NOT NULL, sig bytea NOT NULL, used_at timestamptz) WITH (fillfactor = 50);
CREATE TABLE m_events (id bigserial PRIMARY KEY, tenant_id text NOT NULL, proposal_id uuid, at timestamptz NOT NULL DEFAULT now(), kind text NOT NULL);
CREATE INDEX m_ev_prop ON m_events (proposal_id, id);
CREATE INDEX m_ev_tenant ON m_events (tenant_id, at);
