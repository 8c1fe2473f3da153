//! Which IP addresses a handler or a notice may connect to: only publicly routable ones, unless
//! the operator allows private destinations.
//!
//! [`non_public`] says why an address is refused. IPv6 has several ways of carrying an IPv4
//! address inside it, and each is judged by the IPv4 address it carries, so `[::127.0.0.1]`,
//! `[::ffff:127.0.0.1]`, `[64:ff9b::7f00:1]` and `[2002:7f00:1::]` are all loopback:
//!
//! | form | prefix | where the IPv4 address sits |
//! |---|---|---|
//! | IPv4-mapped | `::ffff:0:0/96` | last 32 bits |
//! | IPv4-compatible (deprecated) | `::/96` | last 32 bits |
//! | IPv4/IPv4 translation (SIIT) | `::ffff:0:0:0/96` | last 32 bits |
//! | NAT64 well-known prefix | `64:ff9b::/96` | last 32 bits |
//! | 6to4 | `2002::/16` | bits 16–47 |
//! | Teredo | `2001::/32` | server: bits 32–63; client: last 32 bits, inverted |
//!
//! The local-use NAT64 prefix `64:ff9b:1::/48` is refused as a whole: what it translates to is
//! a local decision.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` is not a public destination, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4).map(str::to_owned),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

/// True when `ip` is not publicly routable (see [`non_public`]).
pub fn is_private(ip: IpAddr) -> bool {
    non_public(ip).is_some()
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    let reason = if ip.is_unspecified() || o[0] == 0 {
        "an unspecified or \"this network\" address (0.0.0.0/8)"
    } else if ip.is_loopback() {
        "a loopback address"
    } else if ip.is_private() {
        "a private address (RFC 1918)"
    } else if ip.is_link_local() {
        "a link-local address (169.254.0.0/16, cloud metadata)"
    } else if o[0] == 100 && (64..128).contains(&o[1]) {
        "a carrier-grade NAT address (100.64.0.0/10)"
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        "an IETF protocol address (192.0.0.0/24)"
    } else if ip.is_documentation() {
        "a documentation address"
    } else if o[0] == 198 && (o[1] & 0xfe) == 18 {
        "a benchmarking address (198.18.0.0/15)"
    } else if ip.is_broadcast() || ip.is_multicast() || o[0] >= 240 {
        "a multicast, broadcast or reserved address"
    } else {
        return None;
    };
    Some(reason)
}

/// The IPv4 addresses an IPv6 address carries, with the name of the form.
fn embedded_v4(ip: Ipv6Addr) -> Vec<(&'static str, Ipv4Addr)> {
    let s = ip.segments();
    let last32 = Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32);
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => vec![("IPv4-mapped", last32)],
        [0, 0, 0, 0, 0xffff, 0, _, _] => vec![("IPv4-translated", last32)],
        // `::` and `::1` are judged as IPv6 (unspecified, loopback).
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => vec![],
        [0, 0, 0, 0, 0, 0, _, _] => vec![("IPv4-compatible", last32)],
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => vec![("NAT64", last32)],
        [0x2002, hi, lo, ..] => vec![("6to4", v4(hi, lo))],
        [0x2001, 0, hi, lo, _, _, chi, clo] => vec![
            ("Teredo server", v4(hi, lo)),
            ("Teredo client", v4(!chi, !clo)),
        ],
        _ => vec![],
    }
}

fn v6_reason(ip: Ipv6Addr) -> Option<String> {
    for (form, v4) in embedded_v4(ip) {
        if let Some(r) = v4_reason(v4) {
            return Some(format!("the {form} form of {v4}, {r}"));
        }
    }
    let s = ip.segments();
    let reason = if ip.is_unspecified() {
        "the unspecified address"
    } else if ip.is_loopback() {
        "a loopback address"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "a unique local address (fc00::/7)"
    } else if (s[0] & 0xffc0) == 0xfe80 {
        "a link-local address (fe80::/10)"
    } else if (s[0] & 0xffc0) == 0xfec0 {
        "a site-local address (fec0::/10)"
    } else if ip.is_multicast() {
        "a multicast address"
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        "a documentation address (2001:db8::/32)"
    } else if s[0] == 0x2001 && s[1] == 0x0002 && s[2] == 0 {
        "a benchmarking address (2001:2::/48)"
    } else if s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0 {
        "a discard-only address (100::/64)"
    } else if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 {
        "a local-use NAT64 address (64:ff9b:1::/48)"
    } else {
        return None;
    };
    Some(reason.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (address, refused?, what the reason must mention)
    const CASES: &[(&str, bool, &str)] = &[
        ("93.184.216.34", false, ""),
        ("8.8.8.8", false, ""),
        ("10.1.2.3", true, "RFC 1918"),
        ("172.16.0.1", true, "RFC 1918"),
        ("192.168.0.1", true, "RFC 1918"),
        ("127.0.0.1", true, "loopback"),
        ("0.0.0.0", true, "unspecified"),
        ("169.254.169.254", true, "link-local"),
        ("100.64.0.1", true, "carrier-grade"),
        ("192.0.0.8", true, "IETF"),
        ("198.18.0.1", true, "benchmarking"),
        ("192.0.2.1", true, "documentation"),
        ("224.0.0.1", true, "multicast"),
        ("255.255.255.255", true, "broadcast"),
        ("240.0.0.1", true, "reserved"),
        // IPv6 proper.
        ("2606:2800:220:1::", false, ""),
        ("::", true, "unspecified"),
        ("::1", true, "loopback"),
        ("fd00::1", true, "unique local"),
        ("fe80::1", true, "link-local"),
        ("fec0::1", true, "site-local"),
        ("ff02::1", true, "multicast"),
        ("2001:db8::1", true, "documentation"),
        ("2001:2::1", true, "benchmarking"),
        ("100::1", true, "discard"),
        ("64:ff9b:1::1", true, "local-use NAT64"),
        // IPv4-mapped.
        (
            "::ffff:127.0.0.1",
            true,
            "IPv4-mapped form of 127.0.0.1, a loopback",
        ),
        ("::ffff:10.0.0.1", true, "IPv4-mapped form of 10.0.0.1"),
        ("::ffff:169.254.169.254", true, "link-local"),
        ("::ffff:93.184.216.34", false, ""),
        // IPv4-translated (SIIT).
        (
            "::ffff:0:127.0.0.1",
            true,
            "IPv4-translated form of 127.0.0.1",
        ),
        ("::ffff:0:93.184.216.34", false, ""),
        // IPv4-compatible (deprecated): `[::127.0.0.1]`.
        (
            "::127.0.0.1",
            true,
            "IPv4-compatible form of 127.0.0.1, a loopback",
        ),
        ("::192.168.1.1", true, "IPv4-compatible form of 192.168.1.1"),
        ("::169.254.169.254", true, "link-local"),
        ("::93.184.216.34", false, ""),
        // NAT64 well-known prefix.
        ("64:ff9b::127.0.0.1", true, "NAT64 form of 127.0.0.1"),
        ("64:ff9b::a9fe:a9fe", true, "NAT64 form of 169.254.169.254"),
        ("64:ff9b::93.184.216.34", false, ""),
        // 6to4.
        ("2002:7f00:1::", true, "6to4 form of 127.0.0.1"),
        ("2002:a00:1::1", true, "6to4 form of 10.0.0.1"),
        ("2002:c0a8:101::", true, "6to4 form of 192.168.1.1"),
        ("2002:5db8:d822::1", false, ""),
        // Teredo: server 65.54.227.120 (public); client is the inverted last 32 bits.
        (
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            true,
            "Teredo client form of 127.0.0.1",
        ),
        (
            "2001:0:4136:e378:8000:63bf:f5ff:fffe",
            true,
            "Teredo client form of 10.0.0.1",
        ),
        (
            "2001:0:7f00:1:8000:63bf:a247:27dd",
            true,
            "Teredo server form of 127.0.0.1",
        ),
        ("2001:0:4136:e378:8000:63bf:a247:27dd", false, ""),
    ];

    #[test]
    fn every_form_is_judged_by_the_address_it_carries() {
        for (text, refused, says) in CASES {
            let ip: IpAddr = text.parse().unwrap();
            let got = non_public(ip);
            assert_eq!(got.is_some(), *refused, "{text}: {got:?}");
            if let Some(r) = got {
                assert!(r.contains(says), "{text}: {r:?} should mention {says:?}");
            }
            assert_eq!(is_private(ip), *refused, "{text}");
        }
    }
}
