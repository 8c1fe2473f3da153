#!/bin/bash
# Runs once, when the compose Postgres volume is initialised. Creates the NOLOGIN roles the
# migration would create (it tolerates them existing) and one LOGIN user per service, granted
# exactly that service's role, with the password from its compose secret.
set -euo pipefail
for svc in api policy web executor admin sealer; do
  pw=$(cat "/run/secrets/db_${svc}_password")
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -v pw="$pw" <<SQL
CREATE ROLE actiond_${svc} NOLOGIN;
CREATE ROLE actiond_${svc}_login LOGIN PASSWORD :'pw' IN ROLE actiond_${svc};
SQL
done
