-- Budgets that escalate, and shadow policies.
--
-- Budgets: a tenant document may declare `budgets:` (a sum of one numeric param of one action,
-- per agent or per tenant, over a window). The policy worker writes one row here per proposal
-- it does not block and summed param, in the same transaction as the decision; `allowed` says
-- whether policy allowed it. Reservations of one (tenant, action) are serialized by a
-- transaction-scoped advisory lock taken before the usage is read, so concurrent proposals
-- cannot jointly overrun a budget. What counts (read from the proposal's state; nothing here is
-- ever updated): an allowed proposal until it ends blocked or expired; an escalated one once a
-- person approved it.
--
-- Shadow policies: `actiond tenant shadow -f NEW.yaml` stores a candidate document; the policy
-- worker evaluates it beside the live one on every new proposal and records both results in
-- `shadow_decisions` without acting on them; `actiond tenant promote` applies the candidate
-- through the ordinary versioned, audited apply and closes it.
--
-- None of this adds a column to `proposals`: rows are keyed by proposal id.

CREATE TABLE budget_reservations (
    proposal_id  uuid NOT NULL,
    tenant_id    text NOT NULL REFERENCES tenants (id),
    agent_id     uuid NOT NULL,
    action       text NOT NULL,
    sum_of       text NOT NULL,
    amount       bigint NOT NULL CHECK (amount >= 0),
    allowed      boolean NOT NULL,
    reserved_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (proposal_id, sum_of)
);
CREATE INDEX budget_reservations_window ON budget_reservations (tenant_id, action, sum_of, reserved_at);

CREATE TABLE shadow_documents (
    tenant_id         text NOT NULL REFERENCES tenants (id),
    seq               integer NOT NULL CHECK (seq > 0),
    sha256            text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    source            text NOT NULL,
    stored_by         text NOT NULL,
    stored_at         timestamptz NOT NULL DEFAULT now(),
    live_version      integer,
    closed_at         timestamptz,
    promoted_version  integer,
    PRIMARY KEY (tenant_id, seq)
);
-- At most one candidate is evaluated per tenant at a time.
CREATE UNIQUE INDEX shadow_documents_one_open ON shadow_documents (tenant_id) WHERE closed_at IS NULL;

CREATE TABLE shadow_decisions (
    tenant_id      text NOT NULL,
    shadow_seq     integer NOT NULL,
    proposal_id    uuid NOT NULL,
    action         text NOT NULL,
    live_effect    text NOT NULL CHECK (live_effect IN ('allow', 'escalate', 'block')),
    live_rule      text,
    shadow_effect  text NOT NULL CHECK (shadow_effect IN ('allow', 'escalate', 'block')),
    shadow_rule    text,
    shadow_reason  text NOT NULL,
    decided_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, shadow_seq, proposal_id),
    FOREIGN KEY (tenant_id, shadow_seq) REFERENCES shadow_documents (tenant_id, seq)
);

REVOKE ALL ON budget_reservations, shadow_documents, shadow_decisions FROM PUBLIC;
-- policy: reserves budget and records shadow results; reads candidates.
GRANT SELECT, INSERT ON budget_reservations, shadow_decisions TO actiond_policy;
GRANT SELECT ON shadow_documents TO actiond_policy;
-- admin (the operator CLI): stores, promotes and reports on candidates; reads budgets.
GRANT SELECT, INSERT ON shadow_documents TO actiond_admin;
GRANT UPDATE (closed_at, promoted_version) ON shadow_documents TO actiond_admin;
GRANT SELECT ON shadow_decisions, budget_reservations TO actiond_admin;
-- web: the tenant-admin report page reads, scoped by row-level security.
GRANT SELECT ON shadow_documents, shadow_decisions TO actiond_web;

ALTER TABLE budget_reservations ENABLE ROW LEVEL SECURITY;
ALTER TABLE budget_reservations FORCE ROW LEVEL SECURITY;
ALTER TABLE shadow_documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE shadow_documents FORCE ROW LEVEL SECURITY;
ALTER TABLE shadow_decisions ENABLE ROW LEVEL SECURITY;
ALTER TABLE shadow_decisions FORCE ROW LEVEL SECURITY;

CREATE POLICY workers ON budget_reservations FOR ALL TO actiond_policy, actiond_admin
    USING (true) WITH CHECK (true);
CREATE POLICY workers ON shadow_documents FOR ALL TO actiond_policy, actiond_admin
    USING (true) WITH CHECK (true);
CREATE POLICY workers ON shadow_decisions FOR ALL TO actiond_policy, actiond_admin
    USING (true) WITH CHECK (true);
CREATE POLICY web_tenant ON shadow_documents FOR SELECT TO actiond_web
    USING (actiond_tenant_visible(tenant_id));
CREATE POLICY web_tenant ON shadow_decisions FOR SELECT TO actiond_web
    USING (actiond_tenant_visible(tenant_id));

