-- V25: cheaper audit indexes; no rule, privilege or row changes.
--
-- 1. The audit log's time index becomes a BRIN index. `audit_events_tenant_at`, a btree on (tenant_id, at), cost every audit event (four per
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

-- 2. `audit_event_hashes_seal` (tenant_id, seal_seq) had no reader: export and verify join the
--    hashes to their events by `event_id` (the primary key) and read seals from `audit_seals`.
--    It cost the sealer an index entry per event: sealing 2,000 allow-path proposals (8,000
--    events) wrote 24,129 WAL records with it and 16,028 without (12.1 → 8.0 per proposal).
DROP INDEX audit_event_hashes_seal;
