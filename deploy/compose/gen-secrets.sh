#!/usr/bin/env bash
# Generates the secrets docker-compose.yml mounts, into deploy/compose/secrets/ (gitignored;
# never commit it). Grant keys come from `actiond keygen`; passwords from /dev/urandom.
#
#   deploy/compose/gen-secrets.sh              # uses target/debug/actiond, else `actiond` on PATH
#   ACTIOND=/path/to/actiond deploy/compose/gen-secrets.sh
#   deploy/compose/gen-secrets.sh --force      # replace existing secrets (rotates every key)
#
# Files are mode 0644 inside a 0700 directory: Compose bind-mounts them as they are, and the
# containers run as uid 10001, not as you. This is for a single-machine demo only; production
# uses Kubernetes Secrets (helm/actiond) or systemd LoadCredential= (packaging/systemd).
set -euo pipefail
cd "$(dirname "$0")"
OUT=secrets
ROOT=$(cd ../.. && pwd)
ACTIOND=${ACTIOND:-}
if [ -z "$ACTIOND" ]; then
  if [ -x "$ROOT/target/debug/actiond" ]; then ACTIOND="$ROOT/target/debug/actiond"
  elif command -v actiond >/dev/null; then ACTIOND=actiond
  else echo "gen-secrets.sh: no actiond binary (cargo build -p actiond, or set ACTIOND=)" >&2; exit 1
  fi
fi
if [ -e "$OUT/policy_grant_signing_key" ] && [ "${1:-}" != "--force" ]; then
  echo "gen-secrets.sh: $OUT/ already has secrets (pass --force to replace them)" >&2
  exit 0
fi
umask 077
rm -rf "$OUT"
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rand() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# Database passwords: the superuser (migrate) and one login user per service.
for who in pg_superuser db_api db_policy db_web db_executor db_admin db_sealer; do
  rand > "$OUT/${who}_password"
done
# Grant-signing keys: policy and web each their own; the executor trusts only the public halves.
"$ACTIOND" keygen --key-id policy-1 --out-dir "$TMP/policy" >/dev/null
"$ACTIOND" keygen --key-id web-1 --out-dir "$TMP/web" >/dev/null
cp "$TMP/policy/grant_signing_key" "$OUT/policy_grant_signing_key"
cp "$TMP/web/grant_signing_key" "$OUT/web_grant_signing_key"
cp "$TMP/policy/policy-1.pub" "$OUT/trusted_policy-1.pub"
cp "$TMP/web/web-1.pub" "$OUT/trusted_web-1.pub"
# Break-glass: a key for the operator's CLI; executors do NOT trust it unless you add
# `breakglass-1.pub` to the executor's trusted_keys in docker-compose.yml.
"$ACTIOND" keygen --key-id breakglass-1 --out-dir "$TMP/cli" >/dev/null
cp "$TMP/cli/grant_signing_key" "$OUT/cli_grant_signing_key"
cp "$TMP/cli/breakglass-1.pub" "$OUT/breakglass-1.pub"
# Postgres TLS: a demo CA and a server certificate for the compose host name `postgres`
# (ECDSA P-256, 825 days). Services verify it with sslmode=verify-full&sslrootcert=<the CA>.
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 825 \
  -subj "/CN=actiond compose demo CA" -keyout "$TMP/pg_ca.key" -out "$OUT/pg_ca.crt" 2>/dev/null
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -subj "/CN=postgres" -keyout "$OUT/pg_server.key" -out "$TMP/pg_server.csr" 2>/dev/null
printf 'subjectAltName=DNS:postgres\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' > "$TMP/pg_server.ext"
openssl x509 -req -in "$TMP/pg_server.csr" -CA "$OUT/pg_ca.crt" -CAkey "$TMP/pg_ca.key" \
  -CAserial "$TMP/pg_ca.srl" -CAcreateserial -days 825 -extfile "$TMP/pg_server.ext" -out "$OUT/pg_server.crt" 2>/dev/null
# The audit sealer's key; sealer-1.pub is what `actiond audit verify --public-key` takes.
"$ACTIOND" audit keygen --key-id sealer-1 --out-dir "$TMP/sealer" >/dev/null
cp "$TMP/sealer/audit_seal_key" "$OUT/sealer_audit_seal_key"
cp "$TMP/sealer/sealer-1.pub" "$OUT/sealer-1.pub"
# OIDC client secret (shared by the demo IdP and the web app).
rand > "$OUT/oidc_client_secret"
# A provider credential for the demo tenant's billing handler (`demo.payments`).
printf 'sk_test_%s\n' "$(rand)" > "$OUT/demo.payments"

chmod 0700 "$OUT"
chmod 0644 "$OUT"/*
chmod 0600 "$OUT/cli_grant_signing_key"   # the operator's; no container mounts it
echo "secrets written to deploy/compose/secrets/ ($(ls "$OUT" | wc -l) files)"
