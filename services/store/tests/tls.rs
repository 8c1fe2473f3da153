//! Postgres over TLS with libpq's `sslmode` against real servers:
//! - the test server (`ACTIOND_TEST_DATABASE_URL`, ssl on with a self-signed certificate);
//! - a throwaway cluster started here (initdb, `hostssl`-only pg_hba) whose CA, server and
//!   client certificates are generated at run time with rcgen.

#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test harness: a failed step stops the test loudly"
)]

use actiond_store::{Db, tls};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn server_url() -> String {
    std::env::var("ACTIOND_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// `url` with `params` appended to its query string.
fn with_params(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

/// A private temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let p = std::env::temp_dir().join(format!("actiond-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA and certificates it issues, all generated at run time.
struct Pki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { ca }
    }

    /// (certificate PEM, private key PEM) for `names` (DNS names or IP addresses) and `cn`.
    fn issue(&self, names: &[&str], cn: &str) -> (String, String) {
        let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

async fn ssl_in_use(c: &tokio_postgres::Client) -> bool {
    c.query_one(
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

async fn connect_err(url: &str) -> String {
    match tls::connect(url).await {
        Ok(_) => panic!("connecting with {url} should have failed"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn local_server_require_encrypts_and_verify_full_refuses_its_self_signed_certificate() {
    let url = server_url();
    let c = tls::connect(&with_params(&url, "sslmode=require"))
        .await
        .unwrap();
    assert!(ssl_in_use(&c).await, "sslmode=require must encrypt");

    // The pool and its dedicated connections use the same connector.
    let db = Db::connect(&with_params(&url, "sslmode=require"), 2).unwrap();
    assert!(ssl_in_use(&db.client().await.unwrap()).await);
    assert!(ssl_in_use(&db.dedicated().await.unwrap()).await);

    // disable: plaintext even though the server offers TLS.
    let c = tls::connect(&with_params(&url, "sslmode=disable"))
        .await
        .unwrap();
    assert!(!ssl_in_use(&c).await);

    // verify-full with a CA that did not sign the server's certificate.
    let dir = TempDir::new();
    let ca = dir.0.join("other-ca.pem");
    std::fs::write(&ca, Pki::new("another CA").ca.pem()).unwrap();
    let verify = with_params(
        &url,
        &format!("sslmode=verify-full&sslrootcert={}", ca.display()),
    );
    let err = connect_err(&verify).await;
    assert!(
        err.contains("sslmode=verify-full") && err.contains("not signed by a trusted root"),
        "{err}"
    );
    assert!(
        !err.contains("OtherError") && err.matches("sslmode=").count() == 1,
        "the refusal reads as one sentence: {err}"
    );
    let pool_err = Db::connect(&verify, 1)
        .unwrap()
        .client()
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(pool_err.contains("sslmode=verify-full"), "{pool_err}");
}

#[test]
fn connection_string_errors_name_the_parameter() {
    let url = server_url();
    let err = |u: &str| {
        Db::connect(u, 1)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = err(&with_params(&url, "sslmode=verify-everything"));
    assert!(e.contains("invalid sslmode \"verify-everything\""), "{e}");
    let e = err(&with_params(&url, "sslmode=require&sslrootcert=system"));
    assert!(e.contains("sslrootcert=system"), "{e}");
    let e = err(&with_params(
        &url,
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    ));
    assert!(
        e.contains("sslmode=verify-full") && e.contains("/nonexistent/ca.pem"),
        "{e}"
    );
}

/// A Postgres cluster of its own on a loopback port that accepts only TLS (`hostssl`).
struct Cluster {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SIGTERM would be "smart" shutdown; the test is done with it, so stop it now.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pg_bin() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|b| b.join("initdb").exists() && b.join("postgres").exists())
        .collect();
    found.sort();
    found.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs `bin` as the `postgres` user when we are root (Postgres refuses to run as root).
fn as_postgres(bin: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    }
}

impl Cluster {
    /// Starts a cluster with `pki`'s server certificate for 127.0.0.1 (IP only, no DNS name).
    /// `None` when initdb is not installed.
    async fn start(pki: &Pki) -> Option<Self> {
        let bin = pg_bin()?;
        let dir = TempDir::new();
        let data = dir.0.join("data");
        if is_root() {
            let ok = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir.0)
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let out = as_postgres(&bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {out:?}");
        let (cert, key) = pki.issue(&["127.0.0.1"], "127.0.0.1");
        std::fs::write(data.join("server.crt"), cert).unwrap();
        std::fs::write(data.join("server.key"), key).unwrap();
        std::fs::write(data.join("root.crt"), pki.ca.pem()).unwrap();
        std::fs::write(
            data.join("pg_hba.conf"),
            "hostssl all certuser 127.0.0.1/32 cert\n\
             hostssl all all 127.0.0.1/32 trust\n",
        )
        .unwrap();
        let mut perms = Command::new("chmod");
        assert!(
            perms
                .arg("0600")
                .arg(data.join("server.key"))
                .status()
                .unwrap()
                .success()
        );
        if is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir.0)
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let log = dir.0.join("postgres.log");
        // Started again on a fresh port when another process took the first one.
        let (child, port) = actiond_testkit::with_free_ports_async(1, async |ports: &[u16]| {
            let port = ports[0];
            let mut child = as_postgres(&bin.join("postgres"))
                .arg("-D")
                .arg(&data)
                .args(["-p", &port.to_string(), "-k"])
                .arg(&dir.0)
                .args([
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "ssl=on",
                    "-c",
                    "ssl_ca_file=root.crt",
                    "-c",
                    "fsync=off",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
                .spawn()
                .unwrap();
            match wait_ready(&mut child, port).await {
                Ok(()) => Ok((child, port)),
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let logged = std::fs::read_to_string(&log).unwrap_or_default();
                    Err(format!("{e}\n--- server log ---\n{logged}"))
                }
            }
        })
        .await;
        Some(Self { child, port, dir })
    }

    fn url(&self, host: &str, params: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{params}", self.port)
    }
}

/// Waits until the server `child` started on `port` accepts a TLS session; the reason when it
/// exits first (its log says why) or is not ready in 60 s.
async fn wait_ready(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres?sslmode=require");
    loop {
        match tls::connect(&url).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("throwaway cluster not ready in 60 s: {e}"));
            }
            Err(_) => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("throwaway cluster exited ({status})"));
        }
        actiond_testkit::poll_pause(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn throwaway_cluster_verifies_chain_and_host_name() {
    let pki = Pki::new("actiond test CA");
    let Some(cluster) = Cluster::start(&pki).await else {
        eprintln!("SKIPPED: no initdb under /usr/lib/postgresql/*/bin; TLS cluster test not run");
        return;
    };
    let ca = cluster.dir.0.join("client-ca.pem");
    std::fs::write(&ca, pki.ca.pem()).unwrap();
    let root = format!("sslrootcert={}", ca.display());

    // verify-full: chain and the IP address the certificate names.
    let c = tls::connect(&cluster.url("127.0.0.1", &format!("sslmode=verify-full&{root}")))
        .await
        .unwrap();
    assert!(ssl_in_use(&c).await);
    let db = Db::connect(
        &cluster.url("127.0.0.1", &format!("sslmode=verify-full&{root}")),
        2,
    )
    .unwrap();
    assert!(db.ping().await, "pooled verify-full connection");

    // verify-full to a host name the certificate does not carry.
    let err = connect_err(&cluster.url("localhost", &format!("sslmode=verify-full&{root}"))).await;
    assert!(
        err.contains("sslmode=verify-full") && err.contains("not valid for host \"localhost\""),
        "{err}"
    );

    // verify-ca: the chain is checked, the host name is not.
    let c = tls::connect(&cluster.url("localhost", &format!("sslmode=verify-ca&{root}")))
        .await
        .unwrap();
    assert!(ssl_in_use(&c).await);

    // require with a root file behaves as verify-ca (libpq); a foreign CA is refused.
    let other = cluster.dir.0.join("other-ca.pem");
    std::fs::write(&other, Pki::new("another CA").ca.pem()).unwrap();
    let err = connect_err(&cluster.url(
        "127.0.0.1",
        &format!("sslmode=require&sslrootcert={}", other.display()),
    ))
    .await;
    assert!(
        err.contains("sslmode=require (verify-ca, as sslrootcert is set)")
            && err.contains("not signed by a trusted root"),
        "{err}"
    );

    // disable against a server that accepts only TLS.
    let err = connect_err(&cluster.url("127.0.0.1", "sslmode=disable")).await;
    assert!(
        err.contains("no pg_hba.conf entry") && err.contains("no encryption"),
        "{err}"
    );

    client_certificate_authenticates(&cluster, &pki, &root).await;
}

/// `sslcert`/`sslkey`: a user whose pg_hba method is `cert` logs in with a certificate whose
/// CN is its name, and is refused without one.
async fn client_certificate_authenticates(cluster: &Cluster, pki: &Pki, root: &str) {
    let admin = tls::connect(&cluster.url("127.0.0.1", "sslmode=require"))
        .await
        .unwrap();
    admin
        .batch_execute("CREATE ROLE certuser LOGIN")
        .await
        .unwrap();
    let (cert, key) = pki.issue(&[], "certuser");
    let cert_path = cluster.dir.0.join("client.crt");
    let key_path = cluster.dir.0.join("client.key");
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    let base = format!(
        "postgres://certuser@127.0.0.1:{}/postgres?sslmode=verify-full&{root}",
        cluster.port
    );
    let with_cert = format!(
        "{base}&sslcert={}&sslkey={}",
        cert_path.display(),
        key_path.display()
    );
    let c = tls::connect(&with_cert).await.unwrap();
    let who: String = c
        .query_one("SELECT current_user", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(who, "certuser");
    let err = connect_err(&base).await;
    assert!(err.contains("certificate"), "{err}");
}
