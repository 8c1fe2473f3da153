//! What a DNS server serves for one name and type, asked over DNS (UDP, one query, no
//! recursion): `dns.record.update`'s read-back. PowerDNS's API answers 204 to a change it
//! stored, but only a DNS answer shows what resolvers get: a record written into an outer zone
//! under a name an inner zone of the same server owns is stored and never served.
//!
//! The wire format is the part of RFC 1035 §4 this needs, written here: one question out; the
//! header, the question and the answer section back, names decompressed (§4.1.4), rdata of
//! the six types the handler writes. (hickory-proto was tried: its `std` feature re-features
//! crates the whole workspace shares, rebuilding it; one query does not warrant that.)
//! The address is the operator's (`--pdns-dns-addr`), never the tenant's, so it does not pass
//! the destination guard. The answer must come from that address and carry the query's id.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// What the server answered: its response code and the records of the asked type at the
/// asked name, each in the form `dns.record.update` params use (sorted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Served {
    /// `NOERROR`, `NXDOMAIN`, `REFUSED`, … (RCODE, RFC 1035 §4.1.1).
    pub rcode: String,
    /// Whether the server answered authoritatively (AA).
    pub authoritative: bool,
    /// Records of the asked type at the asked name.
    pub records: Vec<String>,
    /// Their TTL (the first record's), if any.
    pub ttl: Option<u32>,
}

/// RR type numbers of the types `dns.record.update` writes (RFC 1035 §3.2.2, RFC 3596).
fn type_code(rtype: &str) -> Option<u16> {
    Some(match rtype {
        "A" => 1,
        "NS" => 2,
        "CNAME" => 5,
        "MX" => 15,
        "TXT" => 16,
        "AAAA" => 28,
        _ => return None,
    })
}

/// Asks `server` for `name` (`www.example.com.`) of type `rtype` within `timeout`.
pub(crate) async fn query(
    server: SocketAddr,
    name: &str,
    rtype: &str,
    timeout: Duration,
) -> Result<Served, String> {
    let qtype = type_code(rtype).ok_or_else(|| format!("unknown DNS record type {rtype}"))?;
    let id: u16 = rand_id();
    let wire = encode_query(id, name, qtype)?;
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let ask = async {
        let socket = tokio::net::UdpSocket::bind(bind)
            .await
            .map_err(|e| format!("could not open a UDP socket: {e}"))?;
        socket
            .send_to(&wire, server)
            .await
            .map_err(|e| format!("could not send the DNS query to {server}: {e}"))?;
        let mut buf = vec![0u8; 65_535];
        loop {
            let (n, from) = socket
                .recv_from(&mut buf)
                .await
                .map_err(|e| format!("no DNS answer from {server}: {e}"))?;
            let answer = &buf[..n];
            if from == server && answer.len() >= 12 && answer[..2] == id.to_be_bytes() {
                return decode_answer(answer, name, qtype);
            }
        }
    };
    tokio::time::timeout(timeout, ask)
        .await
        .map_err(|_| format!("{server} did not answer over DNS within {timeout:?}"))?
}

/// A query id that is not predictable from outside (the low bits of a random UUID).
fn rand_id() -> u16 {
    let b = uuid::Uuid::new_v4().into_bytes();
    u16::from_be_bytes([b[0], b[1]])
}

/// One standard query without recursion: header, then `name` (labels), `qtype`, class IN.
fn encode_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0]); // flags 0, QDCOUNT 1
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(format!("bad DNS name {name}"));
        }
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    Ok(out)
}

/// Reads a (possibly compressed) name at `pos`; returns it lowercase with its trailing dot,
/// and the position after it in the message.
fn read_name(msg: &[u8], mut pos: usize) -> Result<(String, usize), String> {
    let bad = || "malformed name in the DNS answer".to_owned();
    let mut labels: Vec<String> = Vec::new();
    let mut after = None;
    for _ in 0..128 {
        let len = *msg.get(pos).ok_or_else(bad)? as usize;
        if len & 0xC0 == 0xC0 {
            let lo = *msg.get(pos + 1).ok_or_else(bad)? as usize;
            after.get_or_insert(pos + 2);
            pos = ((len & 0x3F) << 8) | lo;
            continue;
        }
        if len == 0 {
            let name = format!("{}.", labels.join(".")).to_ascii_lowercase();
            return Ok((name, after.unwrap_or(pos + 1)));
        }
        let label = msg.get(pos + 1..pos + 1 + len).ok_or_else(bad)?;
        labels.push(String::from_utf8_lossy(label).into_owned());
        pos += 1 + len;
    }
    Err(bad())
}

fn u16_at(msg: &[u8], pos: usize) -> Result<u16, String> {
    msg.get(pos..pos + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .ok_or_else(|| "the DNS answer ends early".to_owned())
}

/// The records of type `qtype` at `name` in the answer section of `msg`.
fn decode_answer(msg: &[u8], name: &str, qtype: u16) -> Result<Served, String> {
    let flags = u16_at(msg, 2)?;
    if flags & 0x0200 != 0 {
        return Err("the DNS answer was truncated".into());
    }
    let rcode = match flags & 0x000F {
        0 => "NOERROR".to_owned(),
        1 => "FORMERR".to_owned(),
        2 => "SERVFAIL".to_owned(),
        3 => "NXDOMAIN".to_owned(),
        4 => "NOTIMP".to_owned(),
        5 => "REFUSED".to_owned(),
        n => format!("RCODE {n}"),
    };
    let (qd, an) = (u16_at(msg, 4)?, u16_at(msg, 6)?);
    let mut pos = 12;
    for _ in 0..qd {
        pos = read_name(msg, pos)?.1 + 4;
    }
    let want = format!("{}.", name.trim_end_matches('.')).to_ascii_lowercase();
    let (mut records, mut ttl) = (Vec::new(), None);
    for _ in 0..an {
        let (owner, p) = read_name(msg, pos)?;
        let rtype = u16_at(msg, p)?;
        let rttl = u32::from(u16_at(msg, p + 4)?) << 16 | u32::from(u16_at(msg, p + 6)?);
        let len = u16_at(msg, p + 8)? as usize;
        let start = p + 10;
        let rdata = msg
            .get(start..start + len)
            .ok_or("the DNS answer ends early")?;
        pos = start + len;
        if owner != want || rtype != qtype {
            continue;
        }
        ttl.get_or_insert(rttl);
        records.push(content(msg, start, rtype, rdata)?);
    }
    records.sort();
    Ok(Served {
        rcode,
        authoritative: flags & 0x0400 != 0,
        records,
        ttl,
    })
}

/// A record's content in the form `dns.record.update` params use: addresses as Rust prints
/// them (RFC 5952 for IPv6), names lowercase with their trailing dot, MX as `pref host.`, TXT
/// as its character-strings joined (the text as approved, before quoting).
fn content(msg: &[u8], start: usize, rtype: u16, rdata: &[u8]) -> Result<String, String> {
    let bad = || "malformed record data in the DNS answer".to_owned();
    Ok(match rtype {
        1 => {
            let b: [u8; 4] = rdata.try_into().map_err(|_| bad())?;
            Ipv4Addr::from(b).to_string()
        }
        28 => {
            let b: [u8; 16] = rdata.try_into().map_err(|_| bad())?;
            Ipv6Addr::from(b).to_string()
        }
        2 | 5 => read_name(msg, start)?.0,
        15 => format!("{} {}", u16_at(msg, start)?, read_name(msg, start + 2)?.0),
        16 => {
            let mut text = Vec::new();
            let mut i = 0;
            while i < rdata.len() {
                let n = rdata[i] as usize;
                text.extend_from_slice(rdata.get(i + 1..i + 1 + n).ok_or_else(bad)?);
                i += 1 + n;
            }
            String::from_utf8_lossy(&text).into_owned()
        }
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer to `encode_query(7, "www.example.com.", 1)` with the given records
    /// (owner as a pointer to the question's name, or a literal name).
    fn answer(flags: u16, records: &[(Option<&str>, u16, Vec<u8>)]) -> Vec<u8> {
        let mut m = encode_query(7, "www.example.com.", 1).unwrap();
        m[2..4].copy_from_slice(&flags.to_be_bytes());
        m[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
        for (owner, t, rdata) in records {
            match owner {
                None => m.extend_from_slice(&[0xC0, 12]),
                Some(n) => {
                    for l in n.trim_end_matches('.').split('.') {
                        m.push(l.len() as u8);
                        m.extend_from_slice(l.as_bytes());
                    }
                    m.push(0);
                }
            }
            m.extend_from_slice(&t.to_be_bytes());
            m.extend_from_slice(&[0, 1, 0, 0, 1, 44]);
            m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            m.extend_from_slice(rdata);
        }
        m
    }

    #[test]
    fn only_the_asked_name_and_type_count_in_params_form() {
        let m = answer(
            0x8400,
            &[
                (None, 1, vec![192, 0, 2, 9]),
                (Some("WWW.Example.com"), 1, vec![192, 0, 2, 1]),
                (Some("other.example.com"), 1, vec![203, 0, 113, 1]),
                (None, 5, vec![0xC0, 12]),
            ],
        );
        let s = decode_answer(&m, "www.example.com", 1).unwrap();
        assert_eq!(s.records, vec!["192.0.2.1", "192.0.2.9"]);
        assert_eq!(
            (s.rcode.as_str(), s.authoritative, s.ttl),
            ("NOERROR", true, Some(300))
        );
        let nx = decode_answer(&answer(0x8403, &[]), "www.example.com.", 1).unwrap();
        assert_eq!((nx.rcode.as_str(), nx.records.len()), ("NXDOMAIN", 0));
        assert!(decode_answer(&answer(0x8600, &[]), "www.example.com.", 1).is_err());
    }

    #[test]
    fn record_data_reads_as_params_write_it() {
        let m = answer(0x8400, &[]);
        let mut mx = vec![0, 10, 4];
        mx.extend_from_slice(b"Mail");
        mx.extend_from_slice(&[0xC0, 16]); // example.com. of the question
        let start = m.len();
        let mut msg = m.clone();
        msg.extend_from_slice(&mx);
        assert_eq!(
            content(&msg, start, 15, &mx).unwrap(),
            "10 mail.example.com."
        );
        let txt = [&[7u8][..], b"v=spf1 ", &[4], b"-all"].concat();
        assert_eq!(content(&m, 0, 16, &txt).unwrap(), "v=spf1 -all");
        let mut v6 = [0u8; 16];
        v6[..2].copy_from_slice(&[0x20, 0x01]);
        v6[2..4].copy_from_slice(&[0x0d, 0xb8]);
        v6[15] = 1;
        assert_eq!(content(&m, 0, 28, &v6).unwrap(), "2001:db8::1");
        assert!(content(&m, 0, 1, &[1, 2, 3]).is_err());
    }
}
