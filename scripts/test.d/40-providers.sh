# Real provider servers for the handler tests (tests/e2e/handlers.rs), all from Debian: PowerDNS
# with its sqlite3 backend (the harness loads the schema the package ships and starts
# pdns_server on loopback ports; the package's own service is not used), the sqlite3 shell, and
# aiosmtpd as the SMTP server that stores what it receives. The second Postgres database of
# db.statement.execute lives on the test server itself.
apt_install pdns-server pdns-backend-sqlite3 sqlite3 python3-aiosmtpd
# Installing pdns-server may start its packaged service on port 53; the tests never use it.
if command -v systemctl >/dev/null && systemctl is-active --quiet pdns 2>/dev/null; then
  ${SUDO:-} systemctl stop pdns >/dev/null 2>&1 || true
fi
