-- V47: the settler's "unread, ask again later" list lives in the database, not in each
-- executor's memory. Before an executor asks a provider whether an `outcome_unknown`
-- proposal's effect happened, it claims the proposal here by setting its next try in the
-- future (one statement, INSERT … ON CONFLICT DO UPDATE … WHERE next_try_at <= now(): of two
-- replicas claiming at once, the second sees the first's row and gets nothing). A provider
-- that could not be read is asked again only after that time, by whichever executor claims it
-- then; a restarted executor does not ask again at once. The row goes when the proposal is
-- settled (in the settling transaction) or purged by retention.

CREATE TABLE effect_settle_tries (
    proposal_id uuid PRIMARY KEY,
    tenant_id   text NOT NULL,
    -- No executor asks the provider about this proposal before this time (database clock).
    next_try_at timestamptz NOT NULL,
    -- How many times it was claimed (asked, or about to be).
    tries       integer NOT NULL DEFAULT 1 CHECK (tries > 0),
    -- Why the last read-back concluded nothing (the provider's error, cut to 1000 characters).
    last_reason text NOT NULL DEFAULT '' CHECK (length(last_reason) <= 1000),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals (tenant_id, id) ON DELETE CASCADE
);

-- The executor claims, notes and removes tries; the operator CLI may read them.
GRANT SELECT, INSERT, UPDATE, DELETE ON effect_settle_tries TO actiond_executor;
GRANT SELECT ON effect_settle_tries TO actiond_admin;
-- Retention removes them with the rest of a purged proposal's data.
GRANT SELECT, DELETE ON effect_settle_tries TO actiond_retention;

ALTER TABLE effect_settle_tries ENABLE ROW LEVEL SECURITY;
ALTER TABLE effect_settle_tries FORCE ROW LEVEL SECURITY;
CREATE POLICY workers ON effect_settle_tries FOR ALL TO actiond_executor, actiond_admin, actiond_retention
    USING (true) WITH CHECK (true);
