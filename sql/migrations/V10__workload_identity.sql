-- Workload identity for agents, and the user an agent acts for.
--
-- * An agent may authenticate with a short-lived JWT from the platform's identity (Kubernetes
--   service-account tokens, SPIFFE JWT-SVIDs, OAuth client-credentials access tokens) instead of
--   a static token: `agent_workload_identities` binds one (issuer, subject) pair to one agent.
--   Such an agent has no token at all, so `agents.token_sha256` becomes optional. Revoking the
--   agent (`agents.revoked_at`) refuses its JWTs at once: the api reads the agent on every
--   request.
-- * A JWT carrying an RFC 8693 `act` claim says the agent acts for a user (the token's `sub`).
--   That user is recorded per proposal in `proposal_delegations` (a side table: the proposal
--   row itself is write-once and kept narrow), read by rules as `on_behalf_of` and shown to
--   approvers.

ALTER TABLE agents ALTER COLUMN token_sha256 DROP NOT NULL;

CREATE TABLE agent_workload_identities (
    agent_id    uuid PRIMARY KEY,
    tenant_id   text NOT NULL,
    issuer      text NOT NULL CHECK (length(issuer) BETWEEN 1 AND 512),
    subject     text NOT NULL CHECK (length(subject) BETWEEN 1 AND 512),
    created_at  timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, agent_id) REFERENCES agents(tenant_id, id),
    -- One (iss, sub) is one agent, across all tenants: a token cannot choose its tenant.
    UNIQUE (issuer, subject)
);

CREATE TABLE proposal_delegations (
    proposal_id   uuid PRIMARY KEY REFERENCES proposals(id) ON DELETE CASCADE,
    tenant_id     text NOT NULL,
    -- The `sub` of the JWT whose `act` claim names the agent: the user the agent acts for.
    on_behalf_of  text NOT NULL CHECK (length(on_behalf_of) BETWEEN 1 AND 512)
);

-- api: authenticates before it knows the tenant (like `agents`), records delegations of the
-- proposals it inserts. Everyone who reads proposals reads their delegation.
GRANT SELECT ON agent_workload_identities TO actiond_api, actiond_admin;
GRANT INSERT ON agent_workload_identities TO actiond_admin;
GRANT SELECT, INSERT ON proposal_delegations TO actiond_api;
GRANT SELECT ON proposal_delegations TO actiond_policy, actiond_web, actiond_executor, actiond_admin;
-- retention: a delegation names a person, so it goes with the proposal's other customer data.
GRANT SELECT, DELETE ON proposal_delegations TO actiond_retention;

ALTER TABLE proposal_delegations ENABLE ROW LEVEL SECURITY;
ALTER TABLE proposal_delegations FORCE ROW LEVEL SECURITY;
CREATE POLICY api_tenant ON proposal_delegations FOR ALL TO actiond_api
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));
CREATE POLICY web_tenant ON proposal_delegations FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
CREATE POLICY workers ON proposal_delegations FOR ALL
    TO actiond_policy, actiond_executor, actiond_admin, actiond_retention
    USING (true) WITH CHECK (true);
