-- V46: facts a handler computed at submission, stored with the proposal (issue #34, point 4).
--
-- Policy has no I/O: what a rule may know beyond the proposal itself is computed when the
-- proposal is filed and stored beside it, read by rules as `facts`. For an email, the recipient
-- domains this tenant never wrote to before (no earlier succeeded proposal of the same handler
-- to that domain), read by the api from this database at submission, or by the amending
-- person's web session for an amended proposal. The executor adds the matching warning to the
-- email's preview, so the card shows it as a banner and the queue counts it.
--
-- A side table like `proposal_delegations` (the proposal row is write-once and kept narrow).
-- Written once, in the statement that inserts the proposal; never updated.

CREATE TABLE proposal_facts (
    proposal_id  uuid PRIMARY KEY REFERENCES proposals(id) ON DELETE CASCADE,
    tenant_id    text NOT NULL,
    facts        jsonb NOT NULL CHECK (jsonb_typeof(facts) = 'object' AND length(facts::text) <= 65536)
);

GRANT SELECT, INSERT ON proposal_facts TO actiond_api, actiond_web, actiond_admin;
GRANT SELECT ON proposal_facts TO actiond_policy, actiond_executor;
-- retention: the domains an email went to go with the proposal's other customer data.
GRANT SELECT, DELETE ON proposal_facts TO actiond_retention;

ALTER TABLE proposal_facts ENABLE ROW LEVEL SECURITY;
ALTER TABLE proposal_facts FORCE ROW LEVEL SECURITY;
CREATE POLICY api_tenant ON proposal_facts FOR ALL TO actiond_api
    USING (actiond_tenant_visible(tenant_id)) WITH CHECK (actiond_tenant_visible(tenant_id));
CREATE POLICY web_tenant ON proposal_facts FOR ALL TO actiond_web
    USING (actiond_tenant_visible(tenant_id, true)) WITH CHECK (actiond_tenant_visible(tenant_id, true));
CREATE POLICY workers ON proposal_facts FOR ALL
    TO actiond_policy, actiond_executor, actiond_admin, actiond_retention
    USING (true) WITH CHECK (true);
