-- V28: the format checks on proposals' and grants' hashes cost less. Same rule, no privilege
-- or row changes.
--
-- `proposals.params_sha256`, `proposals.intent_hash` and `grants.intent_hash` must be 64
-- lower-case hexadecimal digits. V1 said so with regular expressions (`~ '^[0-9a-f]{64}$'`).
-- Postgres evaluates a table's CHECK constraints on every INSERT and on every UPDATE of a row,
-- whatever columns the update changes, so these ran on each state change, each lease change
-- and each spend: 11 regular-expression matches per allow-path proposal, 8% of Postgres CPU on
-- the allow path (perf, release bench). The same rule without the regular-expression engine:
-- exactly 64 characters, and nothing left once the sixteen digits are trimmed from the start.
-- `[0-9a-f]` in a Postgres regular expression is a range of code points, so both forms accept
-- exactly the same strings (e2e `proposal_checks::v28_refuses_what_v1_refused`).
--
-- Adding a CHECK constraint reads the table once to validate its rows; inside this migration's
-- transaction that blocks writes to `proposals` and `grants` until it has.
ALTER TABLE proposals
    DROP CONSTRAINT proposals_params_sha256_check,
    ADD CONSTRAINT proposals_params_sha256_check
        CHECK (length(params_sha256) = 64 AND ltrim(params_sha256, '0123456789abcdef') = ''),
    DROP CONSTRAINT proposals_intent_hash_check,
    ADD CONSTRAINT proposals_intent_hash_check
        CHECK (length(intent_hash) = 64 AND ltrim(intent_hash, '0123456789abcdef') = '');

ALTER TABLE grants
    DROP CONSTRAINT grants_intent_hash_check,
    ADD CONSTRAINT grants_intent_hash_check
        CHECK (length(intent_hash) = 64 AND ltrim(intent_hash, '0123456789abcdef') = '');
