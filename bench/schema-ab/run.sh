#!/usr/bin/env bash
# (pgbench runs as the URL's superuser; the script switches to each service role itself.)
# Deterministic cost of one proposal on actiond's own schema, at two migration versions.
#
#   bench/schema-ab/run.sh [OLD_VERSION [NEW_VERSION [PROPOSALS]]]     (default 12 13 1000)
#
# For each version: a scratch database migrated with sql/migrations/V<=version (psql, one
# transaction per file), one tenant and one agent, then `pgbench -t` over lifecycle-actiond.sql
# (actiond's statement shapes under its own roles: submit; decide + grant; claim; spend + start;
# finish), and per proposal: shared buffers touched and WAL bytes (pg_stat_statements, LSN
# difference) and how many `proposals` updates were HOT. Buffers and WAL barely move with the
# machine's load, unlike times, so two schemas compare on a busy machine.
#
# Needs a superuser URL in ACTIOND_TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)
# whose server preloads pg_stat_statements, and psql and pgbench on the PATH.
set -euo pipefail
old=${1:-12}; new=${2:-13}; n=${3:-1000}
here=$(cd "$(dirname "$0")" && pwd)
migrations="$here/../../sql/migrations"
url=${ACTIOND_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
base=${url%/*}
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
for v in "$old" "$new"; do
    db="actiond_ab_v${v}_$$"
    psql_ "$url" -c "CREATE DATABASE $db" >/dev/null
    trap 'psql_ "$url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
    for f in $(ls "$migrations"/V*__*.sql | sort -V); do
        fv=$(basename "$f"); fv=${fv%%__*}; fv=${fv#V}
        [ "$fv" -le "$v" ] && psql_ "$base/$db" -1 -f "$f" >/dev/null
    done
    # From V36 on, functions and triggers live in sql/functions/ (one file each, applied after
    # the migrations in name order, as the migrator does): the current files, so an older
    # version of those is not reproduced.
    if [ "$v" -ge 36 ]; then
        cat <(echo "SET check_function_bodies = off;") $(ls "$migrations"/../functions/*.sql | sort) \
            | psql_ "$base/$db" -1 >/dev/null
    fi
    psql_ "$base/$db" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
        INSERT INTO tenants (id) VALUES ('acme');
        INSERT INTO agents (id, tenant_id, name, token_sha256)
        VALUES ('00000000-0000-0000-0000-000000000001', 'acme', 'bot', repeat('a', 64));" >/dev/null
    # Warm-up, then statistics: the planner of a fresh, never-analysed table picks (and the
    # foreign-key checks cache) sequential scans that a deployed database does not run.
    pgbench -n -M simple -c 2 -j 2 -t 50 -f "$here/lifecycle-actiond.sql" "$base/$db" >/dev/null 2>&1
    psql_ "$base/$db" -c "ANALYZE" >/dev/null
    psql_ "$base/$db" -Atc "SELECT pg_stat_reset()" >/dev/null
    psql_ "$base/$db" -Atc "SELECT pg_stat_statements_reset(0::oid, (SELECT oid FROM pg_database WHERE datname = current_database()), 0::bigint)" >/dev/null
    l0=$(psql_ "$base/$db" -Atc "SELECT pg_current_wal_lsn()")
    pgbench -n -M simple -c 4 -j 2 -t $((n / 4)) -f "$here/lifecycle-actiond.sql" "$base/$db" 2>&1 | grep -E '^tps|aborted|ERROR' || true
    sleep 1 # let the backends' statistics reach the shared counters
    psql_ "$base/$db" -At -v l0="$l0" -v n="$n" -v v="$v" <<'SQL'
SELECT format('V%s: %s buffers, %s WAL bytes, exec %s ms per proposal (pg_stat_statements); proposals updates %s, of them HOT %s',
              :'v',
              round(sum(shared_blks_hit + shared_blks_read + shared_blks_dirtied) / :n::numeric, 1),
              round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'l0') / :n::numeric),
              round((sum(total_exec_time) / :n)::numeric, 3),
              (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'proposals'),
              (SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'proposals'))
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database());
SQL
    if [ -n "${KEEP:-}" ]; then echo "kept $db"; trap - EXIT; continue; fi
    psql_ "$url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
    trap - EXIT
done
