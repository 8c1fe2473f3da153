-- V25: the audit log's time index becomes a BRIN index; no rule, privilege or row changes.
--
-- `audit_events_tenant_at`, a btree on (tenant_id, at), cost every audit event (four per
-- proposal on the allow path) an index entry: 4 of about 57 WAL records per proposal. Its one
-- reader, the start of `actiond audit export --since`, did not even use it: Postgres answered
-- that query's `min(id)` by walking the primary key from the oldest event. Events are appended
-- in time order, so a BRIN index on `at` (a few pages, one summary per 128 heap pages) finds a
-- time window as well. An insert into the last, not yet summarized range writes nothing to it;
-- `autosummarize` has an autovacuum worker summarize each range as it fills, so the unsummarized
-- tail that every search must read stays one range long instead of growing until the next
-- vacuum of this insert-only table. The export's start query (`audit_export::START_SQL`) now
-- reads the window through it. The BRIN index is built inside the migration, blocking inserts into
-- `audit_events` while it builds (a sequential read of the table, no sort).
DROP INDEX audit_events_tenant_at;
CREATE INDEX audit_events_at ON audit_events USING brin (at) WITH (autosummarize = on);
