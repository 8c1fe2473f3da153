//! A private PostgreSQL server for one test: `initdb` and `pg_ctl` on a free loopback port
//! (started again on another one when some other process took it first:
//! [`crate::with_free_ports`]), its socket and data in a temporary directory, so the test may
//! restart or stop it under running services without disturbing any other test.
//!
//! The binaries come from `ACTIOND_TEST_PG_BIN` (a directory holding `initdb` and `pg_ctl`),
//! else the newest `/usr/lib/postgresql/<version>/bin` (Debian's layout), else the directory
//! `pg_config --bindir` names. None of them: the test fails and says what to install. As root
//! (CI), the server runs as the `postgres` user through `runuser`, as `scripts/test` does.

use std::path::{Path, PathBuf};
use std::process::Command;

/// How `pg_ctl` stops the server (`-m`): see the PostgreSQL documentation of `pg_ctl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// `fast`: sessions are terminated (`57P01`), their transactions rolled back, then a
    /// checkpoint.
    Fast,
    /// `immediate`: every server process is killed at once; the next start runs crash
    /// recovery from the WAL.
    Immediate,
}

impl StopMode {
    fn arg(self) -> &'static str {
        match self {
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        }
    }
}

/// A running private PostgreSQL server (trust authentication, `fsync=off`, no TLS), stopped
/// with `-m immediate` and its directory removed on drop.
pub struct PgCluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// Run the binaries as `postgres` (we are root, which Postgres refuses to run as).
    as_postgres: bool,
}

impl PgCluster {
    /// Creates the cluster (`initdb`) and starts it; waits until it accepts connections.
    /// A start that finds its port taken is made again on a fresh one. Panics with the
    /// command's output when a step fails, or when no PostgreSQL server binaries are
    /// installed.
    pub fn start() -> Self {
        Self::start_on(crate::free_ports)
    }

    /// [`PgCluster::start`] on ports drawn from `pick` (a test hands out a taken one first).
    fn start_on(pick: impl FnMut(usize) -> Vec<u16>) -> Self {
        let bin = pg_bin();
        let dir =
            std::env::temp_dir().join(format!("actiond-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let as_postgres = nix::unistd::geteuid().is_root();
        if as_postgres {
            let user = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .unwrap_or_else(|| {
                    panic!("running as root, a private PostgreSQL server needs the `postgres` user (Debian: apt-get install postgresql)")
                });
            nix::unistd::chown(&dir, Some(user.uid), Some(user.gid)).unwrap();
        }
        let mut c = Self {
            dir,
            bin,
            port: 0,
            as_postgres,
        };
        let data = c.data();
        c.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        );
        crate::ports::with_ports_from(pick, 1, |p| {
            c.port = p[0];
            c.try_start()
        });
        c
    }

    /// The superuser connection URL (`postgres://postgres@127.0.0.1:<port>/postgres`), for
    /// [`crate::TestDb::new_on`].
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The TCP port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `pg_ctl restart -m <mode>`: stops the server as `mode` says, starts it with the same
    /// options and waits until it accepts connections again.
    pub fn restart(&self, mode: StopMode) {
        self.pg_ctl(&["restart", "-m", mode.arg()]);
    }

    /// `pg_ctl stop -m <mode>`; waits until the server has stopped.
    pub fn stop(&self, mode: StopMode) {
        self.pg_ctl(&["stop", "-m", mode.arg()]);
    }

    /// `pg_ctl start` (again after [`PgCluster::stop`]: same port and socket directory);
    /// waits until it accepts connections. The port cannot change under the services that
    /// use the server, so a port another process took meanwhile fails the test.
    pub fn start_again(&self) {
        self.try_start().unwrap_or_else(|e| panic!("{e}"));
    }

    /// `pg_ctl start` on [`PgCluster::port`]; the failure's output and what the server
    /// logged during this start.
    fn try_start(&self) -> Result<(), String> {
        // Only `restart` reuses the last options (postmaster.opts); `start` needs them again.
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port,
            self.dir.display()
        );
        // Only this start's part of the log: an earlier lost port is no reason to try again.
        let logged = self.log_text().len();
        self.try_pg_ctl(&["start", "-o", &opts]).map_err(|e| {
            let log = self.log_text();
            format!(
                "{e}\n--- server log of this start ---\n{}",
                log.get(logged..).unwrap_or(&log)
            )
        })
    }

    /// The server log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// `pg_ctl <args> -D <data> -l <log> -w -t 60`.
    fn pg_ctl(&self, args: &[&str]) {
        self.try_pg_ctl(args)
            .unwrap_or_else(|e| panic!("{e}\n--- server log ---\n{}", self.log_text()));
    }

    /// [`PgCluster::pg_ctl`]; its output when it fails.
    fn try_pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let (data, log) = (self.data(), self.dir.join("log").display().to_string());
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-D", &data, "-l", &log, "-w", "-t", "60"]);
        self.try_run("pg_ctl", &all)
    }

    /// Runs one of the server binaries to completion; panics with its output (and the server
    /// log) when it fails.
    fn run(&self, tool: &str, args: &[&str]) {
        self.try_run(tool, args)
            .unwrap_or_else(|e| panic!("{e}\n--- server log ---\n{}", self.log_text()));
    }

    /// [`PgCluster::run`]; the command line, its exit status and output when it fails.
    fn try_run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(tool);
        let out = self
            .command(tool)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{tool} {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        ))
    }

    /// A command running the server binary `tool`, as `postgres` when we are root, in the
    /// cluster's directory (the `postgres` user may not be allowed into the working
    /// directory of the test).
    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.current_dir(&self.dir);
        cmd
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data();
        // Already stopped is fine: the directory goes either way.
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-m", "immediate", "-D", &data, "-w", "-t", "30"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory holding `initdb` and `pg_ctl` (see the module documentation).
fn pg_bin() -> PathBuf {
    if let Some(d) = std::env::var_os("ACTIOND_TEST_PG_BIN") {
        let d = PathBuf::from(d);
        assert!(
            d.join("initdb").exists(),
            "ACTIOND_TEST_PG_BIN={}: no initdb there",
            d.display()
        );
        return d;
    }
    let debian = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(debian)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|d| d.join("initdb").exists());
    from_pg_config.unwrap_or_else(|| {
        panic!(
            "initdb not found (looked in ACTIOND_TEST_PG_BIN, /usr/lib/postgresql/*/bin and `pg_config --bindir`): \
             install the PostgreSQL server (Debian: apt-get install postgresql) or set ACTIOND_TEST_PG_BIN"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The port handed out first is held by a listener of this test, as another process
    /// would hold it: Postgres cannot bind it, and the cluster comes up on the next one.
    #[tokio::test]
    async fn a_cluster_whose_port_was_taken_starts_on_another() {
        let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = squatter.local_addr().unwrap().port();
        let mut picks = 0;
        let c = PgCluster::start_on(|n| {
            picks += 1;
            if picks == 1 {
                vec![taken; n]
            } else {
                crate::free_ports(n)
            }
        });
        assert_eq!(picks, 2, "one start lost its port, the next came up");
        assert_ne!(c.port(), taken);
        let client = actiond_store::tls::connect(&c.admin_url()).await.unwrap();
        let one: i32 = client.query_one("SELECT 1", &[]).await.unwrap().get(0);
        assert_eq!(one, 1);
    }
}
