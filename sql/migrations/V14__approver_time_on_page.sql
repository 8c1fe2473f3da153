-- V14: how long each person looked at the decision page before deciding (approval fatigue).
--
-- The web app stores the seconds from the page being rendered (a signed stamp the form carries)
-- to the decision, on the person's approvals row; NULL when the channel has no page (break-glass
-- CLI) or the stamp was missing or did not verify. The tenant-admin "Approvers" page aggregates
-- it per person over the last 30 days; Prometheus only ever sees it by tenant and verdict.
ALTER TABLE approvals ADD COLUMN seconds_on_page double precision
    CHECK (seconds_on_page IS NULL OR (seconds_on_page >= 0 AND seconds_on_page <= 86400));

-- The web role inserts approvals (table-level INSERT from V4, which covers the new column) and
-- reads them under its tenant policy; the Approvers page reads a tenant's last 30 days by time.
CREATE INDEX approvals_tenant_decided ON approvals (tenant_id, decided_at);

-- Freezing an agent: the way out of an approval flood that is not "approve to make it stop".
-- An approver of the tenant freezes it from any of its proposals (the web app denies its open
-- escalations in the same transaction); the api refuses its new proposals with 403 while
-- frozen_at is set; its owner or a tenant admin unfreezes it. Both are audit events
-- (agent.frozen, agent.unfrozen). `agents` has no row-level security: the web app filters by
-- the person's tenants in the statement, as it does for every agent read.
ALTER TABLE agents ADD COLUMN frozen_at timestamptz, ADD COLUMN frozen_by text;
GRANT UPDATE (frozen_at, frozen_by) ON agents TO actiond_web, actiond_admin;
