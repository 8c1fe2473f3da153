# Approval web app tests (web/tests/web): a real OpenID provider (npm oidc-provider) and
# headless Debian Chromium driven by playwright-core. Never `npx playwright install`.
command -v node >/dev/null || apt_install nodejs npm
[ -x /usr/bin/chromium ] || apt_install chromium
[ -d "$ROOT/web/e2e/node_modules/oidc-provider" ] && [ -d "$ROOT/web/e2e/node_modules/playwright-core" ] \
  || npm ci --prefix "$ROOT/web/e2e" --no-audit --no-fund --loglevel=error
