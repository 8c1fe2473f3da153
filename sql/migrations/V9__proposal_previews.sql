-- Previews: what an escalated proposal would change, read from the provider by the executor
-- (the only credential holder) and shown, dated, to approvers. A table beside `proposals`
-- (whose shape is the queue's business), one row per proposal, written once.
--
-- A preview never changes a decision or a grant: nothing reads it but the approval page and
-- the operator CLI. A failed preview is stored too (ok = false), so the page can say
-- "preview unavailable" and the executor does not retry it forever.

CREATE TABLE proposal_previews (
    proposal_id uuid PRIMARY KEY,
    tenant_id   text NOT NULL,
    ok          boolean NOT NULL,
    -- One or more lines for the approver ("www.prod.example.com A: 192.0.2.7 → 203.0.113.9"),
    -- or why the preview is unavailable.
    text        text NOT NULL CHECK (length(text) <= 20000),
    -- When the provider was read (database clock).
    read_at     timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, proposal_id) REFERENCES proposals (tenant_id, id) ON DELETE CASCADE
);

-- The executor writes previews (once: no UPDATE) and reads which ones exist.
GRANT SELECT, INSERT ON proposal_previews TO actiond_executor;
-- The approval page and the operator CLI read them.
GRANT SELECT ON proposal_previews TO actiond_web, actiond_admin;
-- Retention removes them with the rest of a decided proposal's customer data.
GRANT SELECT, DELETE ON proposal_previews TO actiond_retention;

ALTER TABLE proposal_previews ENABLE ROW LEVEL SECURITY;
ALTER TABLE proposal_previews FORCE ROW LEVEL SECURITY;
CREATE POLICY web_tenant ON proposal_previews FOR SELECT TO actiond_web
    USING (actiond_tenant_visible(tenant_id, true));
CREATE POLICY workers ON proposal_previews FOR ALL TO actiond_executor, actiond_admin, actiond_retention
    USING (true) WITH CHECK (true);
