//! Where leadpipe may send requests: not to loopback, private, link-local
//! (cloud metadata lives at 169.254.169.254) or other internal addresses,
//! unless an operator allow-lists the host. Guards outgoing webhooks and pull
//! URLs against server-side request forgery.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Host names or IP addresses exempt from the address check, lower-case.
    pub allow: Vec<String>,
}

impl OutboundPolicy {
    /// Parses a comma-separated allow-list (`LEADPIPE_OUTBOUND_ALLOW`).
    pub fn from_list(list: &str) -> Self {
        let allow = list
            .split(',')
            .map(|h| {
                h.trim()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_lowercase()
            })
            .filter(|h| !h.is_empty())
            .collect();
        Self { allow }
    }

    pub fn allows_host(&self, host: &str) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_lowercase();
        self.allow.contains(&host)
    }

    /// Checks a URL's form: http(s), a host, no credentials, and no
    /// internal address or host name unless allow-listed. Numeric hosts in
    /// any IPv4 spelling (`2130706433`, `0x7f.1`, `0177.0.0.1`) are
    /// normalised by the URL parser first, so they are judged as addresses.
    pub fn check_url(&self, raw: &str) -> Result<url::Url, String> {
        let url = url::Url::parse(raw).map_err(|e| format!("is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("must be an http or https URL".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not carry credentials".into());
        }
        let host = url.host_str().ok_or("must have a host")?.to_owned();
        if self.allows_host(&host) {
            return Ok(url);
        }
        let ip = match url.host() {
            Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
            _ => None,
        };
        if let Some(ip) = ip
            && is_internal(ip)
        {
            return Err(format!(
                "points at an internal address ({ip}); to permit it, name {host} in \
                 LEADPIPE_OUTBOUND_ALLOW (--outbound-allow)"
            ));
        }
        let name = host.trim_end_matches('.').to_ascii_lowercase();
        if name == "localhost" || name.ends_with(".localhost") || name.ends_with(".internal") {
            return Err(format!(
                "points at an internal host; to permit it, name {host} in \
                 LEADPIPE_OUTBOUND_ALLOW (--outbound-allow)"
            ));
        }
        Ok(url)
    }

    /// The addresses `host` resolved to that a request may connect to: all
    /// of them for an allow-listed host, else only the public ones. An error
    /// when none is left, naming the host but not the URL.
    pub fn allowed_addrs(&self, host: &str, addrs: &[IpAddr]) -> Result<Vec<IpAddr>, String> {
        if self.allows_host(host) {
            return Ok(addrs.to_vec());
        }
        let public: Vec<IpAddr> = addrs
            .iter()
            .copied()
            .filter(|ip| !is_internal(*ip))
            .collect();
        match (public.is_empty(), addrs.iter().find(|ip| is_internal(**ip))) {
            (true, Some(ip)) => Err(format!("{host} resolves to an internal address ({ip})")),
            (true, None) => Err(format!("{host} resolves to no address")),
            (false, _) => Ok(public),
        }
    }
}

/// IPv4 ranges that are not globally reachable: the IANA IPv4
/// Special-Purpose Address Registry, plus multicast and the reserved block.
/// Whole blocks are refused even where the registry makes an exception for a
/// few anycast addresses: no webhook receiver lives there.
const V4_INTERNAL: &[Ipv4Net] = &[
    v4(0, 0, 0, 0, 8),       // "this network"
    v4(10, 0, 0, 0, 8),      // private
    v4(100, 64, 0, 0, 10),   // shared address space (carrier-grade NAT)
    v4(127, 0, 0, 0, 8),     // loopback
    v4(169, 254, 0, 0, 16),  // link-local (cloud metadata)
    v4(172, 16, 0, 0, 12),   // private
    v4(192, 0, 0, 0, 24),    // IETF protocol assignments (192.0.0.170/171: NAT64 discovery)
    v4(192, 0, 2, 0, 24),    // documentation (TEST-NET-1)
    v4(192, 88, 99, 0, 24),  // deprecated 6to4 relay anycast
    v4(192, 168, 0, 0, 16),  // private
    v4(198, 18, 0, 0, 15),   // benchmarking
    v4(198, 51, 100, 0, 24), // documentation (TEST-NET-2)
    v4(203, 0, 113, 0, 24),  // documentation (TEST-NET-3)
    v4(224, 0, 0, 0, 4),     // multicast
    v4(240, 0, 0, 0, 4),     // reserved, and the limited broadcast 255.255.255.255
];

/// IPv6 ranges that are refused outright, whatever follows the prefix.
/// Everything outside global unicast `2000::/3` is refused as well (that
/// covers `::/96` IPv4-compatible, `::ffff:0:0:0/96` IPv4-translated,
/// `100::/64` discard, `5f00::/16` SRv6, unique-local, link-local,
/// site-local and multicast). Forms that embed an IPv4 address and are
/// routable (IPv4-mapped, NAT64 `64:ff9b::/96`, 6to4) are judged by that
/// address instead.
const V6_INTERNAL: &[Ipv6Net] = &[
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), // IETF protocol assignments: Teredo, benchmarking, ORCHID, ...
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), // documentation
];

const V6_GLOBAL_UNICAST: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);
const V6_NAT64: Ipv6Net = v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96);
const V6_6TO4: Ipv6Net = v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16);

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(s: [u16; 8], len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
    )
}

/// Whether `ip` is not a public, globally reachable address, in any of its
/// textual forms (an IPv4 address embedded in IPv6 is judged as itself).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => is_internal_v6(v6),
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    V4_INTERNAL.iter().any(|net| net.contains(&ip))
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return is_internal_v4(v4);
    }
    // `::ffff:0:0/96` and `64:ff9b::/96` lie outside 2000::/3 but were
    // handled above; everything else out there is not public unicast.
    !V6_GLOBAL_UNICAST.contains(&ip) || V6_INTERNAL.iter().any(|net| net.contains(&ip))
}

/// The IPv4 address a packet to `ip` really goes to, for the forms that are
/// routed as IPv4: IPv4-mapped, NAT64 (well-known prefix) and 6to4.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let o = ip.octets();
    if V6_NAT64.contains(&ip) {
        return Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
    }
    if V6_6TO4.contains(&ip) {
        return Some(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "172.32.0.1"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn urls_are_checked_unless_allow_listed() {
        let strict = OutboundPolicy::default();
        assert!(strict.check_url("https://hooks.example.com/x").is_ok());
        assert!(strict.check_url("http://127.0.0.1:9000/x").is_err());
        assert!(strict.check_url("http://[::1]:9000/x").is_err());
        assert!(strict.check_url("http://localhost/x").is_err());
        assert!(
            strict
                .check_url("http://169.254.169.254/latest/meta-data")
                .is_err()
        );
        assert!(strict.check_url("ftp://example.com/x").is_err());
        assert!(strict.check_url("https://user:pw@example.com/").is_err());
        assert!(strict.check_url("not a url").is_err());

        let lenient = OutboundPolicy::from_list(" 127.0.0.1 , localhost");
        assert!(lenient.check_url("http://127.0.0.1:9000/x").is_ok());
        assert!(lenient.check_url("http://localhost:9000/x").is_ok());
        assert!(lenient.check_url("http://10.0.0.1/x").is_err());
    }

    #[test]
    fn resolved_addresses_are_filtered() {
        let strict = OutboundPolicy::default();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mixed = vec![ip("8.8.8.8"), ip("10.0.0.5")];
        assert_eq!(
            strict.allowed_addrs("mixed.example", &mixed).unwrap(),
            [ip("8.8.8.8")]
        );
        let err = strict
            .allowed_addrs("evil.example", &[ip("127.0.0.1")])
            .unwrap_err();
        assert!(err.contains("resolves to an internal address"), "{err}");
        assert!(strict.allowed_addrs("none.example", &[]).is_err());
        let lenient = OutboundPolicy::from_list("evil.example");
        assert_eq!(
            lenient.allowed_addrs("evil.example", &mixed).unwrap(),
            mixed
        );
    }
}
