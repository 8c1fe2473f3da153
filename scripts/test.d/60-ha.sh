# A real high-availability stack for the failover and pooler tests (tests/e2e/failover.rs), all
# from Debian: Patroni with etcd as its store, over the PostgreSQL server the suite already
# uses, and PgBouncer. The tests start their own etcd, Patroni nodes and PgBouncer on loopback
# ports and stop them by PID; the packages' own services are not used.
apt_install patroni etcd-server pgbouncer
# On a machine with systemd, installing them may start their packaged services; the tests
# never use those.
if command -v systemctl >/dev/null; then
  for unit in etcd pgbouncer; do
    if systemctl is-active --quiet "$unit" 2>/dev/null; then
      ${SUDO:-} systemctl stop "$unit" >/dev/null 2>&1 || true
    fi
  done
fi
