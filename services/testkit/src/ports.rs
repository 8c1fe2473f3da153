//! Loopback ports for servers a test starts.
//!
//! A port read from a released listener ([`free_port`]) is only a guess: until the server
//! binds it, any other process (parallel tests start many services and Postgres clusters, and
//! every outgoing connection takes an ephemeral port) may take it, and the server then dies
//! with `Address already in use`. So:
//! - `actiond` services are started on port 0 and report the port they got
//!   ([`crate::Service::bound`]): no race at all;
//! - servers that must be told their port (Postgres, PowerDNS, aiosmtpd, `actiond dev`) are
//!   started through [`with_free_ports`] (or [`with_free_ports_async`]), which starts them
//!   again on fresh ports when their start failed because a port was taken.

/// How many starts [`with_free_ports`] makes before it gives up.
pub const PORT_ATTEMPTS: usize = 8;

/// A loopback port that was free a moment ago (bind `127.0.0.1:0`, read, release). Only a
/// guess for a server started later (see the module documentation): fit for an address that
/// is meant to stay closed, or inside [`with_free_ports`].
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct loopback ports that were free a moment ago: all bound at once, then released
/// (so, unlike `n` calls of [`free_port`], no two are the same).
pub fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

/// True when a failed start's output says a port was taken: `Address already in use` in any
/// case (Rust and Postgres say it capitalized, Python's asyncio in lower case, PowerDNS as
/// part of its bind error).
pub fn says_port_taken(failure: &str) -> bool {
    failure
        .to_ascii_lowercase()
        .contains("address already in use")
}

/// Starts a server that must be told its ports: calls `start` with `n` fresh free ports
/// ([`free_ports`]) and returns what it returns. When `start` fails (`Err` carries the
/// command's output and the server's log) and [`says_port_taken`], it is called again with
/// new ports, up to [`PORT_ATTEMPTS`] times; `start` must leave nothing running when it
/// fails. Panics with the failure when it is anything else, or when every attempt lost a
/// port.
pub fn with_free_ports<T>(n: usize, start: impl FnMut(&[u16]) -> Result<T, String>) -> T {
    with_ports_from(free_ports, n, start)
}

/// [`with_free_ports`] for a start that awaits (a server checked with an async client).
pub async fn with_free_ports_async<T>(
    n: usize,
    mut start: impl AsyncFnMut(&[u16]) -> Result<T, String>,
) -> T {
    let mut last = String::new();
    for _ in 0..PORT_ATTEMPTS {
        let ports = free_ports(n);
        match start(&ports).await {
            Ok(v) => return v,
            Err(e) => last = lost_port(&ports, e),
        }
    }
    gave_up(&last)
}

/// [`with_free_ports`] with the ports drawn from `pick` (a test hands out a taken one first).
pub(crate) fn with_ports_from<T>(
    mut pick: impl FnMut(usize) -> Vec<u16>,
    n: usize,
    mut start: impl FnMut(&[u16]) -> Result<T, String>,
) -> T {
    let mut last = String::new();
    for _ in 0..PORT_ATTEMPTS {
        let ports = pick(n);
        match start(&ports) {
            Ok(v) => return v,
            Err(e) => last = lost_port(&ports, e),
        }
    }
    gave_up(&last)
}

/// A failed start's output, when it lost a port (the caller tries again); panics with it
/// otherwise.
fn lost_port(ports: &[u16], failure: String) -> String {
    if !says_port_taken(&failure) {
        panic!("{failure}");
    }
    eprintln!(
        "port(s) {ports:?} were taken before the server bound them; starting it again on fresh ones"
    );
    failure
}

fn gave_up(last: &str) -> ! {
    panic!("every one of {PORT_ATTEMPTS} starts lost a port to another process; the last:\n{last}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_ports() {
        let p = free_ports(16);
        let mut d = p.clone();
        d.sort_unstable();
        d.dedup();
        assert_eq!(d.len(), 16, "{p:?}");
    }

    #[test]
    fn a_taken_port_is_detected_in_each_servers_words() {
        for said in [
            "cannot bind the http listener on 127.0.0.1:1: Address already in use (os error 98)",
            "LOG:  could not bind IPv4 address \"127.0.0.1\": Address already in use",
            "OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 1): address already in use",
            "[webserver] Listening on HTTP socket failed: While binding: Address already in use",
        ] {
            assert!(says_port_taken(said), "{said}");
        }
        assert!(!says_port_taken("initdb: error: directory exists"));
    }

    /// The first ports handed out are held by a listener of this test, as another process
    /// would hold them: the start fails there and succeeds on the next ones.
    #[test]
    fn a_start_that_lost_its_port_runs_again_on_fresh_ones() {
        let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = squatter.local_addr().unwrap().port();
        let mut picks = 0;
        let pick = |n| {
            picks += 1;
            if picks == 1 {
                vec![taken; n]
            } else {
                free_ports(n)
            }
        };
        let mut tried = Vec::new();
        let server = with_ports_from(pick, 1, |p| {
            tried.push(p[0]);
            std::net::TcpListener::bind(("127.0.0.1", p[0])).map_err(|e| e.to_string())
        });
        assert_eq!(tried.len(), 2, "{tried:?}");
        assert_eq!(tried[0], taken);
        assert_eq!(server.local_addr().unwrap().port(), tried[1]);
        assert_ne!(tried[1], taken);
    }

    #[test]
    #[should_panic(expected = "initdb failed")]
    fn other_failures_are_not_retried() {
        with_free_ports(1, |_| Err::<(), _>("initdb failed".to_owned()));
    }
}
