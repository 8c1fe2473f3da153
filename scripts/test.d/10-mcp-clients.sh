# MCP client tests (services/api/tests/mcp): the official TypeScript SDK from npm and the
# Python SDK from PyPI (in a venv: Debian's Python refuses system-wide pip installs); the
# workload-JWT tests there use oidc-provider from the same npm package.
E2E="$ROOT/services/api/e2e"
command -v node >/dev/null || apt_install nodejs npm
[ -d "$E2E/node_modules/@modelcontextprotocol/sdk" ] && [ -d "$E2E/node_modules/oidc-provider" ] \
  || npm ci --prefix "$E2E" --no-audit --no-fund --loglevel=error
if ! "$E2E/.venv/bin/python" -c 'import mcp' >/dev/null 2>&1; then
  python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
  rm -rf "$E2E/.venv"
  python3 -m venv "$E2E/.venv"
  "$E2E/.venv/bin/pip" install -q --disable-pip-version-check -r "$E2E/requirements.txt"
fi
# The Python test runs `actiond mcp-stdio` from target/debug: build it first, with the feature
# set of the test build below (`-p actiond` alone would compile the dependency tree twice).
cargo build -q --workspace --all-targets
