//! TLS to Postgres with libpq's meaning of the connection parameters.
//!
//! tokio-postgres alone knows `sslmode=disable|prefer|require` and no certificate parameters,
//! so this module takes the TLS parameters out of the connection string before tokio-postgres
//! parses it and builds a rustls connector (ring provider) that behaves like libpq
//! (PostgreSQL documentation, "SSL Support", table "SSL Mode Descriptions"):
//!
//! | `sslmode`     | encrypted         | server certificate checked                     |
//! |---------------|-------------------|------------------------------------------------|
//! | `disable`     | never             | —                                              |
//! | `prefer`      | if the server can | no (default, as in libpq)                      |
//! | `require`     | always            | no (but as `verify-ca` when `sslrootcert` set) |
//! | `verify-ca`   | always            | chain to a trusted root                        |
//! | `verify-full` | always            | chain, and the host name or IP address matches |
//!
//! - `sslrootcert`: a PEM file of trusted roots, or `system` for the platform's roots
//!   (rustls-native-certs; as in libpq 16, this needs `sslmode=verify-full` and makes it the
//!   default). Without it, `verify-ca`/`verify-full` use `~/.postgresql/root.crt` like libpq and
//!   fail clearly when that file does not exist.
//! - `sslcert`, `sslkey`: a PEM client certificate (chain) and its private key, for servers
//!   that authenticate clients by certificate (`hostssl … cert`). Both or neither.
//!
//! Even when the certificate is not checked (`prefer`, `require`) the handshake signature is
//! verified, so the session is bound to the key of the certificate the server presented.
//! `prefer` falls back to plaintext only when the server declines TLS; a failed handshake is
//! an error. Both the URL form (`postgres://…?sslmode=verify-full&sslrootcert=/ca.pem`) and the
//! keyword/value form (`host=… sslmode=verify-full`) are understood.
//!
//! The libpq environment variables an operator expects (`PGHOST`, `PGPORT`, `PGUSER`,
//! `PGPASSWORD`, `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`, `PGCONNECT_TIMEOUT`,
//! `PGTARGETSESSIONATTRS`, …: [`LIBPQ_ENV`]) supply what the connection string leaves out, as
//! in libpq; those actiond cannot honour (`PGSERVICE`, `PGPASSFILE`, `PGSSLCRL`, …:
//! [`UNSUPPORTED_ENV`]) stop the process at start, naming the variable: a setting an operator
//! made is never silently dropped.

use crate::{Result, StoreError};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The TLS connector used for every Postgres connection (pooled, LISTEN, dedicated): the
/// tokio-postgres-rustls connector, with a refused certificate reported by its reason alone
/// (rustls would wrap it as `invalid peer certificate: Other(OtherError(…))`).
#[derive(Clone)]
pub struct Connector(MakeRustlsConnect);

impl<S> MakeTlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = <MakeRustlsConnect as MakeTlsConnect<S>>::Stream;
    type TlsConnect = Connect<<MakeRustlsConnect as MakeTlsConnect<S>>::TlsConnect>;
    type Error = <MakeRustlsConnect as MakeTlsConnect<S>>::Error;

    fn make_tls_connect(
        &mut self,
        domain: &str,
    ) -> std::result::Result<Self::TlsConnect, Self::Error> {
        <MakeRustlsConnect as MakeTlsConnect<S>>::make_tls_connect(&mut self.0, domain).map(Connect)
    }
}

/// One handshake of [`Connector`].
pub struct Connect<T>(T);

impl<S, T> TlsConnect<S> for Connect<T>
where
    T: TlsConnect<S, Error = std::io::Error>,
    T::Future: Send + 'static,
{
    type Stream = T::Stream;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<T::Stream>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let handshake = self.0.connect(stream);
        Box::pin(async move {
            handshake.await.map_err(|e| match refusal(&e) {
                Some(r) => std::io::Error::new(e.kind(), Refusal(r)),
                None => e,
            })
        })
    }
}

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// TLS if the server offers it, without checking its certificate; else plaintext.
    Prefer,
    /// TLS, without checking the certificate (unless a root file is given: then as `VerifyCa`).
    Require,
    /// TLS; the certificate must chain to a trusted root. The host name is not checked.
    VerifyCa,
    /// TLS; the certificate must chain to a trusted root and name the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            "allow" => {
                return Err("sslmode=allow is not supported (use prefer, require, verify-ca or verify-full)".into());
            }
            other => {
                return Err(format!(
                    "invalid sslmode {other:?} (expected disable, prefer, require, verify-ca or verify-full)"
                ));
            }
        })
    }

    /// The libpq spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres must negotiate for this mode.
    fn negotiation(self) -> tokio_postgres::config::SslMode {
        match self {
            Self::Disable => tokio_postgres::config::SslMode::Disable,
            Self::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where trusted roots come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCerts {
    /// A PEM file of one or more CA certificates.
    File(PathBuf),
    /// The platform's trust store (`sslrootcert=system`).
    System,
}

/// The TLS parameters of a connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsParams {
    /// `sslmode` (default `prefer`, or `verify-full` with `sslrootcert=system`).
    pub mode: SslMode,
    /// `sslrootcert`.
    pub root: Option<RootCerts>,
    /// `sslcert`: the client certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// `sslkey`: the client private key (PEM, PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// Whether `sslmode` came from `PGSSLMODE` (refusals then name the variable).
    pub mode_from_env: bool,
}

const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Parses a libpq connection string (URL or keyword/value form) into a tokio-postgres config
/// whose TLS negotiation matches `sslmode`, and the TLS parameters. The libpq environment
/// variables ([`LIBPQ_ENV`]) supply what the string leaves out, as in libpq; the ones actiond
/// cannot honour ([`UNSUPPORTED_ENV`]) are refused, never ignored.
///
/// # Errors
/// [`StoreError::Config`] naming the parameter or the environment variable at fault.
pub fn parse(url: &str) -> Result<(tokio_postgres::Config, TlsParams)> {
    parse_with_env(url, |k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// The libpq environment variables actiond honours, with the connection parameter each gives
/// a default for (PostgreSQL documentation, "Environment Variables"). A parameter in the
/// connection string wins over its variable.
pub const LIBPQ_ENV: [(&str, &str); 16] = [
    ("PGHOST", "host"),
    ("PGHOSTADDR", "hostaddr"),
    ("PGPORT", "port"),
    ("PGDATABASE", "dbname"),
    ("PGUSER", "user"),
    ("PGPASSWORD", "password"),
    ("PGOPTIONS", "options"),
    ("PGAPPNAME", "application_name"),
    ("PGCONNECT_TIMEOUT", "connect_timeout"),
    ("PGTARGETSESSIONATTRS", "target_session_attrs"),
    ("PGLOADBALANCEHOSTS", "load_balance_hosts"),
    ("PGCHANNELBINDING", "channel_binding"),
    ("PGSSLMODE", "sslmode"),
    ("PGSSLROOTCERT", "sslrootcert"),
    ("PGSSLCERT", "sslcert"),
    ("PGSSLKEY", "sslkey"),
];

/// The libpq environment variables actiond does not honour: set (non-empty) to anything but
/// the values listed (which are what actiond does anyway), each stops the process at start
/// with the reason.
pub const UNSUPPORTED_ENV: [(&str, &[&str], &str); 24] = [
    (
        "PGSERVICE",
        &[],
        "connection service files (pg_service.conf) are not read",
    ),
    (
        "PGSERVICEFILE",
        &[],
        "connection service files (pg_service.conf) are not read",
    ),
    (
        "PGSYSCONFDIR",
        &[],
        "connection service files (pg_service.conf) are not read",
    ),
    (
        "PGPASSFILE",
        &[],
        "password files are not read; give the password in DATABASE_URL or PGPASSWORD",
    ),
    (
        "PGREQUIRESSL",
        &[],
        "deprecated in libpq; use PGSSLMODE=require",
    ),
    (
        "PGSSLCRL",
        &[],
        "certificate revocation lists are not checked",
    ),
    (
        "PGSSLCRLDIR",
        &[],
        "certificate revocation lists are not checked",
    ),
    (
        "PGSSLCERTMODE",
        &["allow"],
        "only allow (the default: a client certificate is sent when sslcert names one) is supported",
    ),
    (
        "PGSSLMINPROTOCOLVERSION",
        &["TLSv1.2"],
        "TLS 1.2 is always the minimum; another minimum is not supported",
    ),
    (
        "PGSSLMAXPROTOCOLVERSION",
        &[],
        "a maximum TLS version is not supported",
    ),
    ("PGSSLSNI", &["1"], "the server name is always sent"),
    ("PGSSLCOMPRESSION", &["0"], "TLS compression is never used"),
    (
        "PGSSLNEGOTIATION",
        &["postgres"],
        "only the Postgres negotiation (SSLRequest) is supported",
    ),
    (
        "PGGSSENCMODE",
        &["disable", "prefer"],
        "GSSAPI encryption is not supported",
    ),
    ("PGKRBSRVNAME", &[], "GSSAPI/Kerberos is not supported"),
    ("PGGSSLIB", &[], "GSSAPI/Kerberos is not supported"),
    (
        "PGGSSDELEGATION",
        &["0"],
        "GSSAPI/Kerberos is not supported",
    ),
    (
        "PGREQUIREPEER",
        &[],
        "peer checks over Unix sockets are not supported",
    ),
    (
        "PGREQUIREAUTH",
        &[],
        "a required authentication method is not supported",
    ),
    (
        "PGCLIENTENCODING",
        &["UTF8", "utf8", "UTF-8", "utf-8"],
        "the client encoding is always UTF8",
    ),
    (
        "PGDATESTYLE",
        &[],
        "session settings are not taken from the environment",
    ),
    (
        "PGTZ",
        &[],
        "session settings are not taken from the environment",
    ),
    (
        "PGGEQO",
        &[],
        "session settings are not taken from the environment",
    ),
    (
        "PGLOCALEDIR",
        &[],
        "libpq's message translations are not used",
    ),
];

/// [`parse`] with the environment read through `env` (unset and empty variables: `None`).
fn parse_with_env(
    url: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(tokio_postgres::Config, TlsParams)> {
    let cfg_err = |e: String| StoreError::Config(format!("DATABASE_URL: {e}"));
    for (var, allowed, why) in UNSUPPORTED_ENV {
        if let Some(v) = env(var)
            && !allowed.contains(&v.as_str())
        {
            return Err(StoreError::Config(format!(
                "{var} is set ({v:?}) and actiond cannot honour it: {why}; unset {var} (libpq would use it)"
            )));
        }
    }
    // Neither a URL nor keyword=value pairs (`postgresql:/h/db`, `localhost:5432`, a URL with
    // a typo in its scheme): said so with both forms, without echoing the value (it may hold a
    // password). Before, the keyword/value parser's `missing "=" after "<the whole value>"`.
    if !is_url(url) && !url.contains('=') {
        return Err(cfg_err(
            "neither a URL starting with postgres:// or postgresql:// nor keyword=value pairs; \
             write it as postgres://USER[:PASSWORD]@HOST:5432/DATABASE (or host=HOST user=USER dbname=DATABASE)"
                .to_owned(),
        ));
    }
    let (rest, mut pairs) = split_tls_params(url).map_err(cfg_err)?;
    // Defaults from the environment go first: the string's own values come later and win.
    let mut from_env = Vec::new();
    for (var, key) in LIBPQ_ENV.iter().filter(|(_, k)| TLS_KEYS.contains(k)) {
        if !pairs.iter().any(|(k, _)| k == key)
            && let Some(v) = env(var)
        {
            from_env.push((key.to_string(), v));
        }
    }
    let mode_var = from_env
        .iter()
        .any(|(k, _)| k == "sslmode")
        .then_some("PGSSLMODE");
    from_env.append(&mut pairs);
    let mut params = TlsParams::from_pairs(&from_env).map_err(|e| match mode_var {
        Some(var) if e.contains("sslmode") => {
            StoreError::Config(format!("DATABASE_URL with {var}: {e}"))
        }
        _ => cfg_err(e),
    })?;
    params.mode_from_env = mode_var.is_some();
    let config: tokio_postgres::Config = rest
        .parse()
        .map_err(|e: tokio_postgres::Error| cfg_err(error_chain(&e)))?;
    let mut config = with_env_defaults(&rest, config, &env)?;
    config.ssl_mode(params.mode.negotiation());
    Ok((config, params))
}

/// Adds to `config` (parsed from `rest`) the parameters of [`LIBPQ_ENV`] it lacks, each checked
/// on its own so an error names the variable.
fn with_env_defaults(
    rest: &str,
    config: tokio_postgres::Config,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<tokio_postgres::Config> {
    let given: Vec<String> = split_params(rest, |_| true)
        .map(|(_, all)| all.into_iter().map(|(k, _)| k).collect())
        .unwrap_or_default();
    let lacks = |key: &str| {
        !given.iter().any(|k| k == key)
            && match key {
                "host" => config.get_hosts().is_empty() && config.get_hostaddrs().is_empty(),
                "hostaddr" => config.get_hostaddrs().is_empty(),
                "port" => config.get_ports().is_empty(),
                "dbname" => config.get_dbname().is_none(),
                "user" => config.get_user().is_none(),
                "password" => config.get_password().is_none(),
                _ => true,
            }
    };
    let mut added = Vec::new();
    for (var, key) in LIBPQ_ENV.iter().filter(|(_, k)| !TLS_KEYS.contains(k)) {
        let Some(v) = env(var) else { continue };
        if !lacks(key) {
            continue;
        }
        let one = with_param(rest, key, &v);
        one.parse::<tokio_postgres::Config>()
            .map_err(|e| StoreError::Config(format!("{var}={v:?}: {}", error_chain(&e))))?;
        added.push((*key, v));
    }
    if added.is_empty() {
        return Ok(config);
    }
    let mut all = rest.to_owned();
    for (key, v) in &added {
        all = with_param(&all, key, v);
    }
    all.parse().map_err(|e: tokio_postgres::Error| {
        StoreError::Config(format!(
            "DATABASE_URL with the PG* environment: {}",
            error_chain(&e)
        ))
    })
}

/// `s` with `key=value` appended, in the string's own form (URL query or keyword/value).
fn with_param(s: &str, key: &str, value: &str) -> String {
    if is_url(s) {
        let sep = if s.contains('?') { '&' } else { '?' };
        let enc: String = value
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        format!("{s}{sep}{key}={enc}")
    } else {
        let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
        format!("{s} {key}='{quoted}'")
    }
}

/// Opens one unpooled connection for a libpq connection string, honouring its TLS parameters;
/// the connection's driver runs on a spawned task. For tools and tests; services use
/// [`crate::Db`].
///
/// # Errors
/// [`StoreError::Config`] for a bad string or certificate file, [`StoreError::Connect`] when
/// the connection fails (naming the address and the likely fix; the `sslmode` when the TLS
/// handshake is at fault).
pub async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (config, params) = parse(url)?;
    let (client, conn) = config
        .connect(params.connector()?)
        .await
        .map_err(|e| crate::connect_error::explain(&config, &e))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "connection ended");
        }
    });
    Ok(client)
}

impl TlsParams {
    fn from_pairs(pairs: &[(String, String)]) -> Result<Self, String> {
        let get = |k: &str| pairs.iter().rev().find(|(key, _)| key == k).map(|(_, v)| v);
        let root = get("sslrootcert")
            .filter(|v| !v.is_empty())
            .map(|v| match v.as_str() {
                "system" => RootCerts::System,
                path => RootCerts::File(PathBuf::from(path)),
            });
        let mode = match get("sslmode") {
            Some(m) => SslMode::parse(m)?,
            None if root == Some(RootCerts::System) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if root == Some(RootCerts::System) && mode != SslMode::VerifyFull {
            return Err(format!(
                "sslmode={mode} may not be used with sslrootcert=system (use sslmode=verify-full)"
            ));
        }
        let path = |k: &str| get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let (cert, key) = (path("sslcert"), path("sslkey"));
        if cert.is_some() != key.is_some() {
            return Err("sslcert and sslkey must be given together".into());
        }
        Ok(Self {
            mode,
            root,
            cert,
            key,
            mode_from_env: false,
        })
    }

    /// The mode after libpq's rule that `require` with a root file behaves as `verify-ca`.
    fn effective_mode(&self) -> SslMode {
        match (self.mode, &self.root) {
            (SslMode::Require, Some(RootCerts::File(_))) => SslMode::VerifyCa,
            (m, _) => m,
        }
    }

    /// Builds the rustls connector for these parameters (ring provider, TLS 1.2 and 1.3).
    ///
    /// # Errors
    /// [`StoreError::Config`] when a certificate or key file cannot be read or holds nothing
    /// usable, or no trusted roots are available for a verifying mode.
    pub fn connector(&self) -> Result<Connector> {
        let mode = self.effective_mode();
        let source = if self.mode_from_env {
            " (from PGSSLMODE)"
        } else {
            ""
        };
        let label = if mode == self.mode {
            format!("sslmode={mode}{source}")
        } else {
            format!(
                "sslmode={}{source} ({mode}, as sslrootcert is set)",
                self.mode
            )
        };
        let err =
            |what: String| StoreError::Config(format!("sslmode={}{source}: {what}", self.mode));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match mode {
            SslMode::Disable | SslMode::Prefer | SslMode::Require => Arc::new(ModeVerifier {
                mode,
                label,
                chain: None,
                provider: provider.clone(),
            }),
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let roots = Arc::new(self.roots().map_err(err)?);
                let chain = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| err(format!("trusted roots: {e}")))?;
                Arc::new(ModeVerifier {
                    mode,
                    label,
                    chain: Some(chain),
                    provider: provider.clone(),
                })
            }
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| err(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let (chain, key) = client_identity(cert, key).map_err(err)?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| err(format!("sslcert/sslkey: {e}")))?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Connector(MakeRustlsConnect::new(config)))
    }

    fn roots(&self) -> Result<RootCertStore, String> {
        let mut store = RootCertStore::empty();
        let file = match &self.root {
            Some(RootCerts::System) => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = store.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(format!(
                        "sslrootcert=system: no usable certificates in the platform trust store ({} errors)",
                        found.errors.len()
                    ));
                }
                return Ok(store);
            }
            Some(RootCerts::File(p)) => p.clone(),
            None => {
                let default = std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".postgresql/root.crt"))
                    .filter(|p| p.exists());
                default.ok_or_else(|| {
                    "no trusted roots: set sslrootcert to a CA file (PEM) or to \"system\" \
                     (~/.postgresql/root.crt does not exist)"
                        .to_string()
                })?
            }
        };
        let certs = read_certs(&file, "sslrootcert")?;
        let (added, _) = store.add_parsable_certificates(certs);
        if added == 0 {
            return Err(format!(
                "sslrootcert {}: no usable CA certificate",
                file.display()
            ));
        }
        Ok(store)
    }
}

fn read_certs(path: &PathBuf, param: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{param} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{param} {}: no PEM certificate in the file",
            path.display()
        ));
    }
    Ok(certs)
}

fn client_identity(
    cert: &PathBuf,
    key: &PathBuf,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let chain = read_certs(cert, "sslcert")?;
    let key =
        PrivateKeyDer::from_pem_file(key).map_err(|e| format!("sslkey {}: {e}", key.display()))?;
    Ok((chain, key))
}

/// The message carried out of the handshake when a certificate is refused; it names the mode.
struct Refusal(String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

fn refuse(msg: String) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(
        Refusal(msg),
    ))))
}

/// Checks the server certificate as the mode says; always checks handshake signatures.
#[derive(Debug)]
struct ModeVerifier {
    mode: SslMode,
    /// How refusals name the mode: `sslmode=verify-full`, or `sslmode=require (verify-ca, as
    /// sslrootcert is set)`.
    label: String,
    /// WebPKI chain (and name) verification; `None` for the modes that do not verify.
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ModeVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let host = server_name.to_str();
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Ok(v) => Ok(v),
            // WebPKI checks the chain before the name: a name error means the chain is trusted.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.mode == SslMode::VerifyCa => Ok(ServerCertVerified::assertion()),
            Err(rustls::Error::InvalidCertificate(
                e @ (CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. }),
            )) => Err(refuse(format!(
                "{}: server certificate not valid for host {host:?} ({e})",
                self.label
            ))),
            Err(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
                Err(refuse(format!(
                    "{}: server certificate for {host:?} is not signed by a trusted root \
                     (sslrootcert)",
                    self.label
                )))
            }
            Err(e) => Err(refuse(format!(
                "{}: server certificate for {host:?} refused: {e}",
                self.label
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Splits the TLS parameters out of a connection string. Returns the string without them and
/// the `(key, value)` pairs taken out, in order.
fn split_tls_params(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    split_params(s, |k| TLS_KEYS.contains(&k))
}

/// Splits the parameters whose keyword `take` accepts out of a connection string.
fn split_params(
    s: &str,
    take: impl Fn(&str) -> bool,
) -> Result<(String, Vec<(String, String)>), String> {
    if is_url(s) {
        Ok(split_url_with(s, take))
    } else {
        split_keyword_value_with(s, take)
    }
}

/// The keywords a connection string gives itself (URL query or keyword/value form, TLS ones
/// included), for defaults that apply only where the operator set nothing.
pub(crate) fn given_keys(s: &str) -> Vec<String> {
    split_params(s, |_| true)
        .map(|(_, all)| all.into_iter().map(|(k, _)| k).collect())
        .unwrap_or_default()
}

fn is_url(s: &str) -> bool {
    let trimmed = s.trim_start();
    trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://")
}

#[cfg(test)]
fn split_url(s: &str) -> (String, Vec<(String, String)>) {
    split_url_with(s, |k| TLS_KEYS.contains(&k))
}

fn split_url_with(s: &str, take: impl Fn(&str) -> bool) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = s.split_once('?') else {
        return (s.to_owned(), Vec::new());
    };
    let decode = |x: &str| percent_decode(&x.replace('+', " "));
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for part in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        let key = decode(k);
        if take(&key) {
            taken.push((key, decode(v)));
        } else {
            kept.push(part);
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (rest, taken)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Keyword/value form: `key = value` separated by whitespace; a value may be single-quoted,
/// and `\` escapes the next character (libpq's rules).
#[cfg(test)]
fn split_keyword_value(s: &str) -> Result<(String, Vec<(String, String)>), String> {
    split_keyword_value_with(s, |k| TLS_KEYS.contains(&k))
}

fn split_keyword_value_with(
    s: &str,
    take: impl Fn(&str) -> bool,
) -> Result<(String, Vec<(String, String)>), String> {
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut i = 0;
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].1.is_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= chars.len() {
            break;
        }
        let start = chars[i].0;
        let mut key = String::new();
        while i < chars.len() && !chars[i].1.is_whitespace() && chars[i].1 != '=' {
            key.push(chars[i].1);
            i += 1;
        }
        skip_ws(&mut i);
        if i >= chars.len() || chars[i].1 != '=' {
            return Err(format!(
                "missing \"=\" after {key:?} in the connection string"
            ));
        }
        i += 1;
        skip_ws(&mut i);
        let value = keyword_value(&chars, &mut i)?;
        let end = chars.get(i).map_or(s.len(), |c| c.0);
        if take(&key) {
            taken.push((key, value));
        } else {
            kept.push(&s[start..end]);
        }
    }
    Ok((kept.join(" "), taken))
}

fn keyword_value(chars: &[(usize, char)], i: &mut usize) -> Result<String, String> {
    let mut value = String::new();
    let quoted = chars.get(*i).is_some_and(|c| c.1 == '\'');
    if quoted {
        *i += 1;
    }
    loop {
        let Some(&(_, c)) = chars.get(*i) else {
            return if quoted {
                Err("unterminated quoted value in the connection string".into())
            } else {
                Ok(value)
            };
        };
        *i += 1;
        match c {
            '\\' => {
                if let Some(&(_, n)) = chars.get(*i) {
                    value.push(n);
                    *i += 1;
                }
            }
            '\'' if quoted => return Ok(value),
            c if c.is_whitespace() && !quoted => {
                *i -= 1; // the separator is not part of this parameter
                return Ok(value);
            }
            c => value.push(c),
        }
    }
}

/// An error and its causes joined with `": "` (tokio-postgres' `Display` shows only the top).
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let next = s.to_string();
        if !msg.contains(&next) {
            msg.push_str(": ");
            msg.push_str(&next);
        }
        src = s.source();
    }
    msg
}

/// The message of a [`Refusal`] inside an I/O error from the TLS handshake.
fn refusal(e: &std::io::Error) -> Option<String> {
    match e.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::InvalidCertificate(CertificateError::Other(o)) => {
            o.0.downcast_ref::<Refusal>().map(|r| r.0.clone())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn url_parameters_are_taken_out() {
        let (rest, taken) = split_url(
            "postgres://u@h:5432/db?application_name=x&sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(rest, "postgres://u@h:5432/db?application_name=x");
        assert_eq!(
            taken,
            pairs(&[("sslmode", "verify-full"), ("sslrootcert", "/etc/ca.pem")])
        );
        let (rest, taken) = split_url("postgres://u@h/db?sslmode=disable");
        assert_eq!(rest, "postgres://u@h/db");
        assert_eq!(taken, pairs(&[("sslmode", "disable")]));
    }

    #[test]
    fn keyword_value_parameters_are_taken_out() {
        let (rest, taken) = split_keyword_value(
            "host=h  sslmode = require dbname='my db' sslrootcert='/a b/ca.pem' user=u\\ x",
        )
        .unwrap_or_default();
        assert_eq!(rest, "host=h dbname='my db' user=u\\ x");
        assert_eq!(
            taken,
            pairs(&[("sslmode", "require"), ("sslrootcert", "/a b/ca.pem")])
        );
        assert!(split_keyword_value("host").is_err());
        assert!(split_keyword_value("host='h").is_err());
    }

    #[test]
    fn modes_follow_libpq() {
        let p = |v: &[(&str, &str)]| TlsParams::from_pairs(&pairs(v));
        assert_eq!(p(&[]).map(|t| t.mode), Ok(SslMode::Prefer));
        assert_eq!(
            p(&[("sslrootcert", "system")]).map(|t| t.mode),
            Ok(SslMode::VerifyFull)
        );
        assert!(p(&[("sslmode", "require"), ("sslrootcert", "system")]).is_err());
        assert!(p(&[("sslmode", "verify-everything")]).is_err());
        assert!(p(&[("sslcert", "/c.pem")]).is_err());
        let require_with_root = p(&[("sslmode", "require"), ("sslrootcert", "/ca.pem")]);
        assert_eq!(
            require_with_root.map(|t| t.effective_mode()),
            Ok(SslMode::VerifyCa)
        );
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn libpq_environment_fills_what_the_string_leaves_out() {
        let vars = [
            ("PGHOST", "db.internal"),
            ("PGPORT", "6543"),
            ("PGUSER", "envuser"),
            ("PGDATABASE", "envdb"),
            ("PGCONNECT_TIMEOUT", "7"),
            ("PGTARGETSESSIONATTRS", "read-write"),
            ("PGSSLMODE", "require"),
        ];
        for url in ["postgres://", "postgres:///", "host=db.internal"] {
            let (c, t) = parse_with_env(url, env(&vars)).unwrap();
            assert_eq!(c.get_user(), Some("envuser"), "{url}");
            assert_eq!(c.get_dbname(), Some("envdb"), "{url}");
            assert_eq!(c.get_ports(), [6543], "{url}");
            assert_eq!(c.get_hosts().len(), 1, "{url}");
            assert_eq!(
                c.get_connect_timeout(),
                Some(&std::time::Duration::from_secs(7))
            );
            assert_eq!(
                c.get_target_session_attrs(),
                tokio_postgres::config::TargetSessionAttrs::ReadWrite
            );
            assert_eq!(t.mode, SslMode::Require);
            assert!(t.mode_from_env);
        }
        // The string wins.
        let (c, t) = parse_with_env(
            "postgres://u@h:5432/d?sslmode=disable&target_session_attrs=any",
            env(&vars),
        )
        .unwrap();
        assert_eq!(
            (c.get_user(), c.get_dbname(), c.get_ports()),
            (Some("u"), Some("d"), &[5432][..])
        );
        assert_eq!(
            c.get_target_session_attrs(),
            tokio_postgres::config::TargetSessionAttrs::Any
        );
        assert_eq!(t.mode, SslMode::Disable);
        assert!(!t.mode_from_env);
        // A bad value names its variable.
        let e = parse_with_env(
            "postgres://h/d",
            env(&[("PGTARGETSESSIONATTRS", "primary")]),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("PGTARGETSESSIONATTRS"), "{e}");
        let e = parse_with_env("postgres://h/d", env(&[("PGSSLMODE", "verify-everything")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("PGSSLMODE"), "{e}");
    }

    /// A value that is neither a URL nor keyword=value pairs is refused with both forms to
    /// write, and never echoed (it may hold a password); both forms still parse.
    #[test]
    fn a_malformed_database_url_says_the_forms_and_hides_the_value() {
        let env = |_: &str| None;
        for bad in [
            "postgresql:/u:s3cret@h/db",
            "postgres//u:s3cret@h/db",
            "localhost:5432",
            "s3cret",
        ] {
            let e = parse_with_env(bad, env)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                e.contains("postgres://USER[:PASSWORD]@HOST:5432/DATABASE")
                    && e.contains("host=HOST"),
                "{bad}: {e}"
            );
            assert!(!e.contains("s3cret") && !e.contains("5432\""), "{bad}: {e}");
        }
        for good in [
            "postgres://u@h:5432/db",
            "postgresql://u@h/db",
            "host=h user=u dbname=db",
        ] {
            assert!(parse_with_env(good, env).is_ok(), "{good}");
        }
    }

    #[test]
    fn libpq_variables_actiond_cannot_honour_are_refused() {
        for (var, value) in [
            ("PGSERVICE", "prod"),
            ("PGPASSFILE", "/root/.pgpass"),
            ("PGSSLCRL", "/crl.pem"),
            ("PGGSSENCMODE", "require"),
            ("PGTZ", "UTC"),
        ] {
            let e = parse_with_env("postgres://h/d", env(&[(var, value)]))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(&format!("{var} is set")), "{var}: {e}");
        }
        // Values that are what actiond does anyway pass.
        for (var, value) in [("PGGSSENCMODE", "disable"), ("PGCLIENTENCODING", "UTF8")] {
            assert!(parse_with_env("postgres://h/d", env(&[(var, value)])).is_ok());
        }
    }

    #[test]
    fn verifying_mode_without_roots_is_refused_clearly() {
        let params = TlsParams {
            mode: SslMode::VerifyFull,
            root: Some(RootCerts::File("/nonexistent/ca.pem".into())),
            cert: None,
            key: None,
            mode_from_env: false,
        };
        let err = params.connector().err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.contains("sslmode=verify-full") && err.contains("/nonexistent/ca.pem"),
            "{err}"
        );
    }
}
