//! A failed attempt to open a Postgres connection, said so that the reader knows what to do:
//! the `host:port` tried, the setting it came from (`DATABASE_URL`, or the `--database-url`
//! flag that every command reading it also takes), what happened, and the likely fix.
//!
//! Before, the pool, the migrations and the LISTEN connection all said `error connecting to
//! server: Connection refused (os error 111)`, which names neither the address nor the setting.

use crate::StoreError;

/// Where a connection string's address comes from, as the reader set it.
pub const SETTING: &str = "DATABASE_URL (or --database-url)";

/// The addresses `config` tries, in order, as `host:port` (a Unix-socket directory as
/// `dir/.s.PGSQL.port`, the file Postgres listens on); `5432` when no port is given.
pub fn addresses(config: &tokio_postgres::Config) -> Vec<String> {
    let ports = config.get_ports();
    let port = |i: usize| match ports {
        [] => 5432,
        [one] => *one,
        many => many.get(i).copied().unwrap_or(5432),
    };
    config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| match h {
            tokio_postgres::config::Host::Tcp(name) if name.contains(':') => {
                format!("[{name}]:{}", port(i))
            }
            tokio_postgres::config::Host::Tcp(name) => format!("{name}:{}", port(i)),
            tokio_postgres::config::Host::Unix(dir) => {
                format!("{}/.s.PGSQL.{}", dir.display(), port(i))
            }
        })
        .collect()
}

/// The likely fix for a connection that failed with `e`, when it is one a reader can act on.
fn hint(config: &tokio_postgres::Config, e: &tokio_postgres::Error) -> Option<String> {
    if let Some(db) = e.as_db_error() {
        let user = config.get_user().unwrap_or("(default)");
        return match db.code().code() {
            "28P01" | "28000" => Some(format!(
                "the server refused the login of user {user:?}: check the user and password in {SETTING} (a password may also come from PGPASSWORD or PGPASSFILE)"
            )),
            "3D000" => Some(format!(
                "the database {:?} does not exist on that server: create it (createdb), or name an existing one in {SETTING}",
                config.get_dbname().unwrap_or(user)
            )),
            _ => None,
        };
    }
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => Some(format!(
                    "nothing listens at that address: start Postgres there, or set {SETTING} to the address of a running server"
                )),
                std::io::ErrorKind::TimedOut => Some(format!(
                    "no answer in time: the host is down, wrong, or a firewall drops the connection; check the host in {SETTING}"
                )),
                std::io::ErrorKind::NotFound => Some(format!(
                    "no such socket: start Postgres, or set {SETTING} to its host and port"
                )),
                _ if io.to_string().contains("lookup address") => Some(format!(
                    "the host name does not resolve: check the host in {SETTING}"
                )),
                _ => None,
            };
        }
        src = s.source();
    }
    if e.to_string().contains("timeout") || e.to_string().contains("timed out") {
        return Some(format!(
            "no answer in time: the host is down, wrong, or a firewall drops the connection; check the host in {SETTING}"
        ));
    }
    None
}

/// The error of a connection attempt to `config` that failed with `e`: one line naming the
/// address(es) tried and [`SETTING`], then what happened (the whole error chain, so a TLS
/// refusal keeps its reason), then the likely fix when there is one.
/// [`StoreError::Connect`]; `retry` (the server cannot be reached now) unless the server
/// answered with a refusal that waiting does not fix (a wrong password, a missing database).
pub fn explain(config: &tokio_postgres::Config, e: &tokio_postgres::Error) -> StoreError {
    let at = addresses(config).join(", ");
    let mut message = format!(
        "cannot connect to Postgres at {at}, the address in {SETTING}: {}",
        crate::db_detail(e)
    );
    if let Some(h) = hint(config, e) {
        message.push_str("; ");
        message.push_str(&h);
    }
    // Only a refusal that waiting cannot fix is final: a wrong login (class 28) or a missing
    // database (3D000). Anything else — no answer, a restart, a database that does not allow
    // connections now (55000) — is "unavailable, try again" (503 at the api).
    let retry = e
        .code()
        .is_none_or(|c| !(c.code().starts_with("28") || c.code() == "3D000"));
    StoreError::Connect { message, retry }
}

/// [`explain`] for a pool that could not hand out a connection because opening one failed or
/// took longer than its create timeout; any other pool error as it is.
pub fn explain_pool(
    config: &tokio_postgres::Config,
    e: deadpool_postgres::PoolError,
) -> StoreError {
    use deadpool_postgres::{PoolError, TimeoutType};
    match e {
        PoolError::Backend(ref pg) => explain(config, pg),
        PoolError::Timeout(TimeoutType::Create) => StoreError::Connect {
            message: format!(
                "cannot connect to Postgres at {}, the address in {SETTING}: no connection within the connect timeout; the host is down, wrong, or a firewall drops the connection; check the host in {SETTING}",
                addresses(config).join(", ")
            ),
            retry: true,
        },
        other => StoreError::Pool(other),
    }
}

#[cfg(test)]
mod tests {
    /// The addresses of a connection string, as a reader would type them back.
    #[test]
    fn addresses_name_each_host_with_its_port() {
        let a = |s: &str| super::addresses(&s.parse::<tokio_postgres::Config>().unwrap());
        assert_eq!(a("postgres://u@127.0.0.1:9/x"), ["127.0.0.1:9"]);
        assert_eq!(a("postgres://u@db.example/x"), ["db.example:5432"]);
        assert_eq!(a("postgres://u@h1:5433,h2:5434/x"), ["h1:5433", "h2:5434"]);
        assert_eq!(a("host=/run/pg port=5999"), ["/run/pg/.s.PGSQL.5999"]);
        assert_eq!(a("postgres://u@[::1]:7/x"), ["[::1]:7"]);
    }
}
