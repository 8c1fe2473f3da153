//! Where handlers may connect. Destinations come from the operator's configuration, never from
//! a proposal: webhook hosts must be listed, provider base URLs are configured, no redirects
//! are followed, and private, loopback and link-local addresses are refused unless the
//! operator allows them (`--allow-private-destinations`, for single-machine setups and tests).
//!
//! The check runs inside the HTTP client's DNS resolver, so the address that was checked is
//! the address that is connected to (no DNS-rebinding window).

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// True for addresses that are not publicly routable (RFC 1918, RFC 4193, loopback,
/// link-local, CGNAT, unspecified, multicast, documentation, and every IPv6 form that carries
/// one of these IPv4 addresses: mapped, compatible, NAT64, 6to4, Teredo). See
/// [`actiond_core::netaddr`].
pub fn is_private(ip: IpAddr) -> bool {
    actiond_core::netaddr::is_private(ip)
}

/// A resolver that drops private addresses unless allowed.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    allow_private: bool,
}

impl GuardedResolver {
    /// Builds the resolver.
    pub fn new(allow_private: bool) -> Arc<Self> {
        Arc::new(Self { allow_private })
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = addrs
                .into_iter()
                .filter(|a| allow || !is_private(a.ip()))
                .collect();
            if kept.is_empty() {
                let e: Box<dyn std::error::Error + Send + Sync> =
                    format!("{host} resolves only to private or loopback addresses, which this executor does not allow").into();
                return Err(e);
            }
            let it: Addrs = Box::new(kept.into_iter());
            Ok(it)
        })
    }
}

/// Checks a URL's host against the operator's allow-list and, for IP literals (which bypass
/// the resolver), the private-address rule. Returns a reason on refusal.
pub fn check_url(
    url: &url::Url,
    allowed_hosts: &[String],
    allow_private: bool,
) -> Result<(), String> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("scheme {} is not allowed", url.scheme()));
    }
    let Some(host) = url.host_str() else {
        return Err("URL has no host".into());
    };
    let host_l = host.trim_end_matches('.').to_ascii_lowercase();
    let listed = allowed_hosts.iter().any(|h| {
        let h = h.trim().to_ascii_lowercase();
        h == host_l || url.port().is_some_and(|p| h == format!("{host_l}:{p}"))
    });
    if !listed {
        return Err(format!(
            "host {host_l} is not in the executor's allowed destinations"
        ));
    }
    let literal = match url.host() {
        Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
        _ => None,
    };
    if let Some(ip) = literal
        && !allow_private
        && let Some(why) = actiond_core::netaddr::non_public(ip)
    {
        return Err(format!("{ip} is not a public address: {why}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn private_ranges() {
        for ip in [
            "10.1.2.3",
            "127.0.0.1",
            "169.254.169.254",
            "192.168.0.1",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1::"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }
    #[test]
    fn urls_need_listed_hosts() {
        let u = url::Url::parse("https://hooks.example.com/x").unwrap();
        assert!(check_url(&u, &["hooks.example.com".into()], false).is_ok());
        assert!(check_url(&u, &["other.example.com".into()], false).is_err());
        let u = url::Url::parse("http://169.254.169.254/latest/meta-data").unwrap();
        assert!(check_url(&u, &["169.254.169.254".into()], false).is_err());
        assert!(check_url(&u, &["169.254.169.254".into()], true).is_ok());
        // `[::127.0.0.1]` is loopback in IPv4-compatible form.
        for literal in [
            "[::127.0.0.1]",
            "[::ffff:7f00:1]",
            "[64:ff9b::a9fe:a9fe]",
            "[2002:a00:1::]",
        ] {
            let u = url::Url::parse(&format!("http://{literal}/hook")).unwrap();
            let listed = u.host_str().unwrap().to_owned();
            let err = check_url(&u, &[listed], false).unwrap_err();
            assert!(err.contains("not a public address"), "{literal}: {err}");
        }
        let u = url::Url::parse("file:///etc/passwd").unwrap();
        assert!(check_url(&u, &["".into()], true).is_err());
    }
}
