#!/usr/bin/env bash
# Postgres' own cost of the allow path, batched as the services batch it, on the current schema
# plus optional SQL files applied after it (an A/B of a schema change without a build):
#
#   bench/batch-ab/run.sh [BATCHES [FILE...]]        (default 500 batches of 20 proposals)
#
# BATCH_AB_SIZE sets the proposals per batch (default 20, about what the services' batches
# hold in the closed-loop bench): comparing two sizes shows what is paid per statement and
# what per row.
#
# A scratch database gets sql/schema.sql, one tenant and one agent, 200 warm-up batches and
# ANALYZE, then FILEs in order, then one pgbench client runs BATCHES batches of
# lifecycle-batch.sql (four commits each, synchronous_commit off so WAL flushes do not count).
# One client on an otherwise idle server measures the database's work, not contention. Prints
# ms per proposal (on a shared VM it moves by a tenth from run to run: README.md says how to
# count instructions instead), buffers and WAL bytes per proposal, and HOT updates.
set -euo pipefail
n=${1:-500}; shift || true
b=${BATCH_AB_SIZE:-20}
case $b in ''|*[!0-9]*|0) echo "BATCH_AB_SIZE must be a positive whole number of proposals (got '$b')" >&2; exit 2 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
url=${ACTIOND_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
base=${url%/*}
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
db="actiond_batch_ab_$$"
psql_ "$url" -c "CREATE DATABASE $db" >/dev/null
trap 'psql_ "$url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
# The service roles are the cluster's (a migrated database's schema names them; V4 creates them).
psql_ "$url" -c "DO \$\$ DECLARE r text; BEGIN
    FOREACH r IN ARRAY ARRAY['actiond_api','actiond_policy','actiond_web','actiond_executor','actiond_admin',
                             'actiond_sealer','actiond_auditor','actiond_retention'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN EXECUTE format('CREATE ROLE %I NOLOGIN', r); END IF;
    END LOOP; END \$\$" >/dev/null
psql_ "$base/$db" -f "$here/../../sql/schema.sql" >/dev/null
psql_ "$base/$db" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
    INSERT INTO tenants (id) VALUES ('acme');
    INSERT INTO agents (id, tenant_id, name, token_sha256)
    VALUES ('00000000-0000-0000-0000-000000000001', 'acme', 'bot', repeat('a', 64));" >/dev/null
export PGOPTIONS="-c synchronous_commit=off ${BATCH_AB_PGOPTIONS:-}"
pgbench -n -M prepared -c 1 -D b="$b" -t "${BATCH_AB_WARMUP:-200}" -f "$here/lifecycle-batch.sql" "$base/$db" >/dev/null
psql_ "$base/$db" -c "VACUUM ANALYZE" >/dev/null
for f in "$@"; do psql_ "$base/$db" -f "$f" >/dev/null; done
psql_ "$base/$db" -Atc "SELECT pg_stat_reset(), pg_stat_statements_reset(0::oid, (SELECT oid FROM pg_database WHERE datname = current_database()), 0::bigint)" >/dev/null
l0=$(psql_ "$base/$db" -Atc "SELECT pg_current_wal_lsn()")
lat=$(pgbench -n -M prepared -c 1 -D b="$b" -t "$n" -f "$here/lifecycle-batch.sql" "$base/$db" 2>&1 | sed -n 's/^latency average = \([0-9.]*\) ms/\1/p')
sleep 1
psql_ "$base/$db" -At -v l0="$l0" -v n="$((n * b))" -v b="$b" -v lat="$lat" <<'SQL'
SELECT format('%s ms per proposal (latency %s ms per batch of %s); %s buffers, %s WAL bytes per proposal; proposals updates %s, HOT %s',
              round(:lat::numeric / :b, 4), :lat, :b,
              round(sum(shared_blks_hit + shared_blks_read + shared_blks_dirtied) / :n::numeric, 1),
              round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'l0') / :n::numeric),
              (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'proposals'),
              (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'proposals'))
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database());
SQL
