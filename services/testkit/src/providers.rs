//! Real provider servers for handler tests, each a child process on loopback ports (started
//! again on fresh ones when another process took one first: [`crate::with_free_ports`]),
//! killed on drop:
//! - [`PowerDns`]: Debian's `pdns_server` with the sqlite3 backend (schema from the package) and
//!   its HTTP API;
//! - [`SmtpSink`]: aiosmtpd (Debian `python3-aiosmtpd`) storing every message it receives in a
//!   Maildir;
//! - [`TargetDb`]: a second database on the test Postgres server with its own login role, as the
//!   target of `db.statement.execute`.

use crate::{Scratch, admin_client, server_url, with_db};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Waits until `up` says the child `what` serves (given its log so far). Something else
/// accepting on the port proves nothing (it may be whoever took the port), so `up` must
/// recognize this child. When the child exits, its log says a port was taken (PowerDNS keeps
/// running without its web server then) or 20 s pass, the child is killed and the error
/// carries its log, for [`crate::with_free_ports`] to judge.
fn wait_up(
    child: &mut Child,
    what: &str,
    log: &Path,
    mut up: impl FnMut(&str) -> bool,
) -> Result<(), String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if up(&text) {
            return Ok(());
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some()
            || crate::ports::says_port_taken(&text)
            || std::time::Instant::now() > deadline
        {
            let _ = child.kill();
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            let text = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("{what} did not start ({status}):\n{text}"));
        }
        crate::poll_pause_blocking(Duration::from_millis(25));
    }
}

/// True when `127.0.0.1:port` answers `GET path` with status 200 when sent `header`.
fn http_ok(port: u16, path: &str, header: &str) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut c) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n{header}\r\n\r\n");
    if c.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    c.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

/// The PowerDNS schema for the sqlite3 backend, as the Debian package ships it.
fn pdns_schema() -> PathBuf {
    [
        "/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql",
        "/usr/share/doc/pdns-backend-sqlite3/schema.sqlite3.sql",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
    .unwrap_or_else(|| {
        panic!("pdns-backend-sqlite3 is not installed (scripts/test.d/40-providers.sh installs it)")
    })
}

/// A running PowerDNS authoritative server (sqlite3 backend, HTTP API on a loopback port).
pub struct PowerDns {
    child: Child,
    /// Base URL of the HTTP API, with a trailing slash (`http://127.0.0.1:PORT/`).
    pub base_url: String,
    /// The API key (`X-API-Key`).
    pub api_key: String,
    /// Where it answers DNS queries (`127.0.0.1:PORT`, UDP and TCP).
    pub dns_addr: String,
    http: reqwest::Client,
    _dir: Scratch,
}

impl PowerDns {
    /// Starts `pdns_server` with a fresh sqlite3 database and creates `zones` (Native, one NS).
    pub async fn start(zones: &[&str]) -> Self {
        Self::start_on(crate::free_ports, zones).await
    }

    /// [`PowerDns::start`] on ports drawn from `pick` (a test hands out taken ones first).
    async fn start_on(pick: impl FnMut(usize) -> Vec<u16>, zones: &[&str]) -> Self {
        let dir = Scratch::new("actiond-pdns");
        let db = dir.0.join("pdns.sqlite3");
        let st = Command::new("sqlite3")
            .arg(&db)
            .stdin(std::fs::File::open(pdns_schema()).unwrap())
            .status()
            .expect("sqlite3 (Debian package sqlite3)");
        assert!(st.success(), "loading the PowerDNS schema failed");
        let api_key = format!("k{}", uuid::Uuid::new_v4().simple());
        // The DNS port is bound for UDP as well as TCP; either may be taken.
        let (child, api_port, dns_port) = crate::ports::with_ports_from(pick, 2, |ports| {
            let (api_port, dns_port) = (ports[0], ports[1]);
            let conf = format!(
                "launch=gsqlite3\ngsqlite3-database={}\napi=yes\napi-key={api_key}\nwebserver=yes\n\
                 webserver-address=127.0.0.1\nwebserver-port={api_port}\nwebserver-allow-from=127.0.0.0/8\n\
                 local-address=127.0.0.1\nlocal-port={dns_port}\nsocket-dir={}\nguardian=no\ndaemon=no\n\
                 disable-syslog=yes\nloglevel=4\n",
                db.display(),
                dir.0.display()
            );
            std::fs::write(dir.0.join("pdns.conf"), conf).unwrap();
            let log = dir.0.join("pdns.log");
            let mut child = Command::new("pdns_server")
                .arg(format!("--config-dir={}", dir.0.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
                .spawn()
                .expect("pdns_server (Debian package pdns-server)");
            // Only this server knows the key.
            let key = format!("X-API-Key: {api_key}");
            wait_up(&mut child, "pdns_server", &log, |_| {
                http_ok(api_port, "/api/v1/servers/localhost", &key)
            })?;
            Ok((child, api_port, dns_port))
        });
        let s = Self {
            child,
            base_url: format!("http://127.0.0.1:{api_port}/"),
            api_key,
            dns_addr: format!("127.0.0.1:{dns_port}"),
            http: reqwest::Client::new(),
            _dir: dir,
        };
        for z in zones {
            let body = serde_json::json!({"name": format!("{z}."), "kind": "Native", "nameservers": ["ns1.example.net."]});
            let r = s
                .http
                .post(s.url("zones"))
                .header("x-api-key", &s.api_key)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 201, "{}", r.text().await.unwrap());
        }
        s
    }

    fn url(&self, path: &str) -> String {
        format!("{}api/v1/servers/localhost/{path}", self.base_url)
    }

    /// Sets an RRset directly through the API (test setup, not the handler).
    pub async fn set(&self, zone: &str, name: &str, rtype: &str, ttl: u32, records: &[&str]) {
        let recs: Vec<serde_json::Value> = records
            .iter()
            .map(|c| serde_json::json!({"content": c, "disabled": false}))
            .collect();
        let body = serde_json::json!({"rrsets": [{"name": format!("{name}."), "type": rtype, "ttl": ttl, "changetype": "REPLACE", "records": recs}]});
        let r = self
            .http
            .patch(self.url(&format!("zones/{zone}.")))
            .header("x-api-key", &self.api_key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204, "{}", r.text().await.unwrap());
    }

    /// The record contents of `name`/`rtype` in `zone` as PowerDNS serves them now (sorted),
    /// with the RRset's TTL; `None` when there is no such RRset.
    pub async fn rrset(&self, zone: &str, name: &str, rtype: &str) -> Option<(u64, Vec<String>)> {
        let v: serde_json::Value = self
            .http
            .get(self.url(&format!("zones/{zone}.")))
            .header("x-api-key", &self.api_key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let set = v["rrsets"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == format!("{name}.") && r["type"] == rtype)?
            .clone();
        let mut recs: Vec<String> = set["records"]
            .as_array()?
            .iter()
            .filter_map(|r| r["content"].as_str().map(str::to_owned))
            .collect();
        recs.sort();
        Some((set["ttl"].as_u64().unwrap_or_default(), recs))
    }
}

impl Drop for PowerDns {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One message an [`SmtpSink`] received.
#[derive(Debug, Clone)]
pub struct Mail {
    /// The message as received (headers and body, CRLF or LF line ends as stored).
    pub raw: String,
}

impl Mail {
    /// The value of header `name` (case-insensitive; unfolded).
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.raw.split("\n\n").next().unwrap_or_default();
        let mut out: Option<String> = None;
        for line in head.lines() {
            if (line.starts_with(' ') || line.starts_with('\t')) && out.is_some() {
                if let Some(o) = out.as_mut() {
                    o.push_str(line.trim_end());
                }
                continue;
            }
            if out.is_some() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case(name)
            {
                out = Some(v.trim().to_owned());
            }
        }
        out
    }

    /// The body (after the first empty line), with line ends as LF.
    pub fn body(&self) -> String {
        let raw = self.raw.replace("\r\n", "\n");
        raw.split_once("\n\n")
            .map(|x| x.1.to_owned())
            .unwrap_or_default()
    }
}

/// A real SMTP server (aiosmtpd's Mailbox handler) on a loopback port, storing every message.
pub struct SmtpSink {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub host_port: String,
    dir: Scratch,
}

impl SmtpSink {
    /// Starts `python3 -m aiosmtpd` (Debian's `/usr/bin/python3` with `python3-aiosmtpd`).
    pub fn start() -> Self {
        Self::start_with("aiosmtpd.handlers.Mailbox", None, crate::free_ports)
    }

    /// A relay that stores the message and then dies before it answers the end of DATA: the
    /// message was accepted, but the client never hears so (a connection cut mid-transfer).
    pub fn start_dropping_after_data() -> Self {
        // A raw string: a `\` line continuation would eat Python's indentation.
        const HANDLER: &str = r#"import os
from aiosmtpd.handlers import Mailbox
class DropAfterData(Mailbox):
    async def handle_DATA(self, server, session, envelope):
        self.handle_message(self.prepare_message(session, envelope))
        os._exit(0)
"#;
        Self::start_with(
            "actiond_drop.DropAfterData",
            Some(HANDLER),
            crate::free_ports,
        )
    }

    /// A relay that offers AUTH (PLAIN, LOGIN) over plaintext and never STARTTLS — a relay
    /// misconfigured, or one whose STARTTLS an on-path attacker stripped from the EHLO answer.
    /// Every AUTH attempt is recorded ([`SmtpSink::auth_attempts`]) and accepted; messages are
    /// stored as by [`SmtpSink::start`].
    pub fn start_plaintext_auth() -> Self {
        const SCRIPT: &str = r#"import sys, threading
from aiosmtpd.controller import Controller
from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import AuthResult
host, port, maildir, authlog = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def authenticator(server, session, envelope, mechanism, data):
    with open(authlog, "a") as f:
        f.write(mechanism + "\n")
    return AuthResult(success=True)
c = Controller(Mailbox(maildir), hostname=host, port=port, authenticator=authenticator,
               auth_require_tls=False)
c.start()
print(f"Server is listening on {host}:{port}", file=sys.stderr, flush=True)
threading.Event().wait()
"#;
        Self::start_with("", Some(SCRIPT), crate::free_ports)
    }

    /// The AUTH mechanisms clients tried, one per attempt (only a
    /// [`SmtpSink::start_plaintext_auth`] relay records them).
    pub fn auth_attempts(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.0.join("auth.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Starts aiosmtpd with `handler` (defined by the Python source `module`, when given) on
    /// a port drawn from `pick`. An empty `handler` runs `module` as a script instead, with
    /// the arguments host, port, Maildir and AUTH log.
    fn start_with(
        handler: &str,
        module: Option<&str>,
        pick: impl FnMut(usize) -> Vec<u16>,
    ) -> Self {
        let dir = Scratch::new("actiond-smtp");
        let log = dir.0.join("smtp.log");
        let py = if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        };
        if let Some(src) = module {
            std::fs::write(dir.0.join("actiond_drop.py"), src).unwrap();
        }
        let (child, port) = crate::ports::with_ports_from(pick, 1, |ports| {
            let port = ports[0];
            // `-d`: it logs "Server is listening on HOST:PORT" once bound.
            let mut cmd = Command::new(py);
            cmd.env("PYTHONPATH", &dir.0);
            if handler.is_empty() {
                cmd.arg(dir.0.join("actiond_drop.py"))
                    .args(["127.0.0.1", &port.to_string()])
                    .arg(dir.0.join("maildir"))
                    .arg(dir.0.join("auth.log"));
            } else {
                cmd.args(["-m", "aiosmtpd", "-n", "-d", "-l"])
                    .arg(format!("127.0.0.1:{port}"))
                    .args(["-c", handler])
                    .arg(dir.0.join("maildir"));
            }
            let mut child = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
                .spawn()
                .expect("python3 -m aiosmtpd (Debian package python3-aiosmtpd)");
            let listening = format!("Server is listening on 127.0.0.1:{port}");
            wait_up(&mut child, "aiosmtpd", &log, |text| {
                text.contains(&listening)
            })?;
            Ok((child, port))
        });
        Self {
            child,
            host_port: format!("127.0.0.1:{port}"),
            dir,
        }
    }

    /// Every message received so far (Maildir `new/`), oldest first by file time.
    pub fn messages(&self) -> Vec<Mail> {
        let new = self.dir.0.join("maildir").join("new");
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&new)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| {
                        let t = e
                            .metadata()
                            .and_then(|m| m.modified())
                            .unwrap_or(std::time::UNIX_EPOCH);
                        (t, e.path())
                    })
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
            .into_iter()
            .map(|(_, p)| Mail {
                raw: std::fs::read_to_string(p).unwrap_or_default(),
            })
            .collect()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A second database with its own login role on the test server, dropped on drop: the target
/// of `db.statement.execute`.
pub struct TargetDb {
    /// Database name.
    pub name: String,
    /// The login role that owns nothing but the grants `setup` gives it.
    pub role: String,
    /// The URL the handler's credential file holds (that role, that database).
    pub url: String,
}

impl TargetDb {
    /// Creates the database and role, then runs `setup` in it as the server's admin (create
    /// tables, grant the role what the statements need: the name is `{role}` in `setup`).
    pub async fn create(setup: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (name, role) = (format!("tgt_{id}"), format!("tgt_role_{id}"));
        let c = admin_client(&server_url()).await;
        c.batch_execute(&format!("CREATE ROLE {role} LOGIN"))
            .await
            .unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        let admin = actiond_store::tls::connect(&with_db(&server_url(), &name))
            .await
            .unwrap();
        admin
            .batch_execute(&setup.replace("{role}", &role))
            .await
            .unwrap();
        let url = with_db(&server_url(), &name);
        let url = match url::Url::parse(&url) {
            Ok(mut u) => {
                let _ = u.set_username(&role);
                let _ = u.set_password(None);
                u.to_string()
            }
            Err(_) => url,
        };
        Self { name, role, url }
    }

    /// An admin connection to the target database (to read what a statement did).
    pub async fn admin(&self) -> tokio_postgres::Client {
        actiond_store::tls::connect(&with_db(&server_url(), &self.name))
            .await
            .unwrap()
    }
}

impl Drop for TargetDb {
    fn drop(&mut self) {
        let (name, role) = (self.name.clone(), self.role.clone());
        let url = server_url();
        // Drop needs its own runtime: the test's may be shutting down.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(c) = actiond_store::tls::connect(&url).await {
                    let _ = c
                        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .await;
                    let _ = c
                        .batch_execute(&format!("DROP ROLE IF EXISTS {role}"))
                        .await;
                }
            });
        })
        .join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out `taken` as the first port of the first pick (the others free), then free
    /// ports only.
    fn taken_first(taken: u16) -> impl FnMut(usize) -> Vec<u16> {
        let mut picks = 0;
        move |n| {
            picks += 1;
            let mut ports = crate::free_ports(n);
            if picks == 1 {
                ports[0] = taken;
            }
            ports
        }
    }

    /// aiosmtpd exits when its port is held by another process; the sink starts again on a
    /// fresh one and receives mail there.
    #[test]
    fn an_smtp_sink_whose_port_was_taken_starts_on_another() {
        let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = squatter.local_addr().unwrap().port();
        let sink = SmtpSink::start_with("aiosmtpd.handlers.Mailbox", None, taken_first(taken));
        assert_ne!(sink.host_port, format!("127.0.0.1:{taken}"));
        let mut c = std::net::TcpStream::connect(&sink.host_port).unwrap();
        let mut greeting = [0u8; 4];
        std::io::Read::read_exact(&mut c, &mut greeting).unwrap();
        assert_eq!(&greeting, b"220 ");
    }

    /// PowerDNS keeps running without its web server when the API port is held by another
    /// process (only its log says so): the harness sees that line, stops it and starts it
    /// again on fresh ports, and the API answers there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_powerdns_whose_api_port_was_taken_starts_on_another() {
        let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = squatter.local_addr().unwrap().port();
        // The first start's API port is taken, its DNS port free.
        let pdns = PowerDns::start_on(taken_first(taken), &["example.org"]).await;
        assert!(
            !pdns.base_url.contains(&format!(":{taken}/")),
            "{}",
            pdns.base_url
        );
        pdns.set("example.org", "www.example.org", "A", 60, &["192.0.2.1"])
            .await;
        assert_eq!(
            pdns.rrset("example.org", "www.example.org", "A").await,
            Some((60, vec!["192.0.2.1".to_owned()]))
        );
    }
}
