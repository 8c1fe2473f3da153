-- V34: the signed values are the ones checked.
--
-- 1. A grant's expiry has one source of truth: `expires_at_us`, the microseconds since the
--    Unix epoch that the grant's signature covers. `expires_at` was a second, unsigned copy
--    written beside it, and the executor's spend compared that copy with `now()`: whoever could
--    write the column (the table's owner, a superuser, a role granted UPDATE by mistake) could
--    push an expired, never-spent grant's `expires_at` into the future and have it run. Now
--    `expires_at` is generated from `expires_at_us` (nobody writes it; it stays for people's
--    queries), and neither the spend nor the sweeper reads it: the spend compares the expiry
--    inside the grant the executor verified (a parameter of the statement) with the database
--    clock, the sweeper compares `expires_at_us`. A writer of `expires_at_us` breaks the
--    signature instead (`bad_signature`). `to_timestamp(float8)` is IMMUTABLE and gives back
--    every microsecond value of the next centuries exactly.
--    Replacing the column rewrites `grants` once (ACCESS EXCLUSIVE while it runs; V22's
--    `fillfactor = 50` is kept).
ALTER TABLE grants DROP COLUMN expires_at;
ALTER TABLE grants ADD COLUMN expires_at timestamptz
    GENERATED ALWAYS AS (to_timestamp(expires_at_us::double precision / 1000000)) STORED;
COMMENT ON COLUMN grants.expires_at IS
    'expires_at_us (the signed expiry) as timestamptz, generated (V34); the spend and the sweeper compare expires_at_us';
