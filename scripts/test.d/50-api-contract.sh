# The API contract as standard tools read it (sourced by scripts/test, which provides ROOT, log,
# apt_install and runs with `set -euo pipefail`): a live `actiond dev` on a fresh database of
# $ACTIOND_TEST_DATABASE_URL serves both OpenAPI documents; openapi-spec-validator validates
# them and schemathesis fuzzes the static one with every check, bounded in time
# (services/api/contract/schemathesis.toml says which answers a schema cannot predict). Tools:
# a Python venv under $ROOT/.cache/api-contract/ (gitignored), pinned versions.

api_contract_checks() {
  local tools="$ROOT/.cache/api-contract" work api web db url pid rc=0 i
  if ! "$tools/venv/bin/python" -c 'import schemathesis, openapi_spec_validator' >/dev/null 2>&1; then
    log "api contract: Python venv (schemathesis, openapi-spec-validator)"
    python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
    rm -rf "$tools/venv"
    mkdir -p "$tools"
    python3 -m venv "$tools/venv"
    "$tools/venv/bin/pip" install -q --disable-pip-version-check \
      schemathesis==4.32.5 openapi-spec-validator==0.9.0
  fi
  cargo build -q --workspace --all-targets  # the test build's feature set: built once
  work=$(mktemp -d)
  read -r api web < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
  db="contract_$(date +%s)_$$"
  psql "$ACTIOND_TEST_DATABASE_URL" -qc "CREATE DATABASE $db"
  url=$(python3 -c 'import sys,urllib.parse as u; p=u.urlparse(sys.argv[1]); print(p._replace(path="/"+sys.argv[2]).geturl())' \
    "$ACTIOND_TEST_DATABASE_URL" "$db")
  DATABASE_URL="$url" "$ROOT/target/debug/actiond" dev --state-dir "$work/state" \
    --api-listen "127.0.0.1:$api" --web-listen "127.0.0.1:$web" >"$work/dev.log" 2>&1 &
  pid=$!
  for i in $(seq 150); do
    [ -s "$work/state/agent-token" ] && curl -sf "http://127.0.0.1:$api/healthz" >/dev/null && break
    sleep 0.2
  done
  export ACTIOND_TOKEN
  ACTIOND_TOKEN=$(cat "$work/state/agent-token" 2>/dev/null || true)
  local base="http://127.0.0.1:$api" st="$tools/venv/bin/schemathesis"
  curl -sf "$base/openapi.yaml" -o "$work/openapi.yaml" \
    && curl -sf -H "Authorization: Bearer $ACTIOND_TOKEN" "$base/v1/openapi.yaml" -o "$work/tenant.yaml" \
    && "$tools/venv/bin/openapi-spec-validator" "$work/openapi.yaml" "$work/tenant.yaml" || rc=1
  if [ "$rc" -eq 0 ]; then
    (cd "$work" && timeout 600 "$st" --config-file "$ROOT/services/api/contract/schemathesis.toml" \
      run "$base/openapi.yaml" --url "$base" --checks all --max-time "${ACTIOND_SCHEMATHESIS_SECONDS:-90}" \
      --no-color >"$work/schemathesis.log" 2>&1) || rc=1
    tail -25 "$work/schemathesis.log" >&2
    [ "$rc" -eq 0 ] || sed -n '/FAILURES/,/SUMMARY/p' "$work/schemathesis.log" | head -200 >&2
  else
    tail -40 "$work/dev.log" >&2
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  psql "$ACTIOND_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  rm -rf "$work"
  unset ACTIOND_TOKEN
  return "$rc"
}

api_contract_checks || { log "api contract checks failed"; exit 1; }
