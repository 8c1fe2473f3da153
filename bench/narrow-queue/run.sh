#!/usr/bin/env bash
# Is the narrow queue table worth it? Counts, per proposal, what four schemas make Postgres
# write and touch for the same allow path:
#   floor    bench/floor: the least audited lifecycle (three partial indexes, nothing else)
#   wide     the floor's lifecycle with actiond's columns and whole index set (wide-schema.sql)
#   queue    the same index set split into a write-once record and a narrow queue row
#            (queue-schema.sql): every state change of the wide row is HOT
#   actiond  actiond's own migrations, roles, RLS, triggers and statement shapes
#            (bench/schema-ab/lifecycle-actiond.sql)
#   bare     the same with row-level security and user triggers disabled and foreign keys
#            dropped: what those rules cost (a measurement only; actiond never runs so)
#
#   bench/narrow-queue/run.sh [PROPOSALS]        (default 2000)
#
# NQ_VARIANTS picks and orders the variants (default "floor wide queue actiond bare");
# NQ_PROTOCOL is pgbench's query protocol, simple (default: parsed and planned on every call)
# or prepared (planned once per connection, as the services run; floor, wide and queue only,
# since actiond's script puts variables inside string literals). Run on a server under
# callgrind, each variant's four measured backends count its instructions (bench/README.md).
#
# Prints WAL records and bytes per proposal (pg_stat_wal: the server must have no other
# writer, so use a cluster of its own), shared buffers per proposal (pg_stat_statements, when
# the server preloads it) and HOT updates. These are counts, which barely move with the
# machine's load; the CPU they cost is measured by actiond-bench on a quiet machine.
# Needs a superuser URL in ACTIOND_TEST_DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/postgres), psql and pgbench on the PATH.
set -euo pipefail
n=${1:-2000}
variants=${NQ_VARIANTS:-floor wide queue actiond bare}
protocol=${NQ_PROTOCOL:-simple}
for v in $variants; do
    case $protocol/$v in
    simple/floor|simple/wide|simple/queue|simple/actiond|simple/bare|prepared/floor|prepared/wide|prepared/queue) ;;
    prepared/*) echo "NQ_PROTOCOL=prepared runs floor, wide and queue only (got variant '$v')" >&2; exit 2 ;;
    *) echo "unknown variant '$v' or NQ_PROTOCOL '$protocol' (variants: floor wide queue actiond bare; protocols: simple prepared)" >&2; exit 2 ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
migrations="$here/../../sql/migrations"
url=${ACTIOND_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
base=${url%/*}
export PGOPTIONS='-c client_min_messages=warning'
psql_() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
for v in $variants; do
    db="actiond_nq_${v}_$$"
    psql_ "$url" -c "CREATE DATABASE $db" >/dev/null
    trap 'psql_ "$url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
    case $v in
    floor) psql_ "$base/$db" -f "$here/../floor/min-schema.sql" >/dev/null; script="$here/../floor/lifecycle-min.sql" ;;
    wide|queue) psql_ "$base/$db" -f "$here/$v-schema.sql" >/dev/null; script="$here/$v.sql" ;;
    actiond|bare)
        for f in $(ls "$migrations"/V*__*.sql | sort -V); do psql_ "$base/$db" -1 -f "$f" >/dev/null; done
        # Functions and triggers: sql/functions/, after the migrations, as the migrator does.
        cat <(echo "SET check_function_bodies = off;") $(ls "$migrations"/../functions/*.sql | sort) \
            | psql_ "$base/$db" -1 >/dev/null
        psql_ "$base/$db" -c "INSERT INTO tenants (id) VALUES ('acme');
            INSERT INTO agents (id, tenant_id, name, token_sha256)
            VALUES ('00000000-0000-0000-0000-000000000001', 'acme', 'bot', repeat('a', 64));" >/dev/null
        script="$here/../schema-ab/lifecycle-actiond.sql"
        if [ "$v" = bare ]; then
            psql_ "$base/$db" -Atc "SELECT format('ALTER TABLE %I DISABLE ROW LEVEL SECURITY, NO FORCE ROW LEVEL SECURITY, DISABLE TRIGGER USER;', relname)
                FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
                UNION ALL
                SELECT format('ALTER TABLE %s DROP CONSTRAINT %I;', conrelid::regclass, conname)
                FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace" | psql_ "$base/$db" >/dev/null
        fi ;;
    esac
    pgss=$(psql_ "$base/$db" -Atc "SELECT count(*) FROM pg_settings WHERE name = 'shared_preload_libraries' AND setting LIKE '%pg_stat_statements%'")
    [ "$pgss" = 1 ] && psql_ "$base/$db" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
    # Warm-up, then statistics, as a deployed database has them.
    pgbench -n -M "$protocol" -c 2 -j 2 -t 50 -f "$script" "$base/$db" >/dev/null 2>&1
    psql_ "$base/$db" -c "ANALYZE" >/dev/null
    psql_ "$base/$db" -Atc "SELECT pg_stat_reset(), pg_stat_reset_shared('wal')" >/dev/null
    [ "$pgss" = 1 ] && psql_ "$base/$db" -Atc "SELECT pg_stat_statements_reset(0::oid, (SELECT oid FROM pg_database WHERE datname = current_database()), 0::bigint)" >/dev/null
    pgbench -n -M "$protocol" -c 4 -j 2 -t $((n / 4)) -f "$script" "$base/$db" 2>&1 | grep -E 'aborted|ERROR' || true
    sleep 1 # let the backends' statistics reach the shared counters
    buffers="-"
    [ "$pgss" = 1 ] && buffers=$(psql_ "$base/$db" -Atc "SELECT round(sum(shared_blks_hit + shared_blks_read + shared_blks_dirtied) / $n::numeric, 1)
        FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")
    psql_ "$base/$db" -At -v n="$n" -v v="$v" -v b="$buffers" <<'SQL'
SELECT format('%-8s %5s WAL records, %5s WAL bytes, %6s buffers per proposal; updates %s, HOT %s',
              :'v', round(w.wal_records / :n::numeric, 1), round(w.wal_bytes / :n::numeric), :'b',
              sum(t.n_tup_upd), sum(t.n_tup_hot_upd))
FROM pg_stat_wal w, pg_stat_user_tables t GROUP BY w.wal_records, w.wal_bytes;
SQL
    psql_ "$url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
    trap - EXIT
done
