//! Where leadpipe may send requests: not to loopback, private, link-local
//! (cloud metadata lives at 169.254.169.254) or other internal addresses,
//! unless an operator allow-lists the host. Guards outgoing webhooks and pull
//! URLs against server-side request forgery.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

    /// Checks a URL's form: http(s), a host, no credentials.
    pub fn check_url(&self, raw: &str) -> Result<url::Url, String> {
        let url = url::Url::parse(raw).map_err(|e| format!("is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err("must be an http or https URL".into());
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("must not carry credentials".into());
        }
        let host = url.host_str().ok_or("must have a host")?.to_owned();
        if !self.allows_host(&host) {
            if let Ok(ip) = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                && is_internal(ip)
            {
                return Err(format!(
                    "points at an internal address ({ip}); allow-list it to permit"
                ));
            }
            if host == "localhost" || host.ends_with(".localhost") || host.ends_with(".internal") {
                return Err("points at an internal host; allow-list it to permit".into());
            }
        }
        Ok(url)
    }

    /// Checks the addresses a host resolved to, just before connecting.
    pub fn check_resolved(&self, host: &str, addrs: &[IpAddr]) -> Result<(), String> {
        if self.allows_host(host) {
            return Ok(());
        }
        match addrs.iter().find(|ip| is_internal(**ip)) {
            Some(ip) => Err(format!("{host} resolves to an internal address ({ip})")),
            None => Ok(()),
        }
    }
}

/// Loopback, private, link-local, shared, unspecified, multicast, documentation
/// and other non-public ranges, IPv4-mapped IPv6 included.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_internal_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_internal_v4(v4),
            None => is_internal_v6(v6),
        },
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
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
    fn resolved_addresses_are_checked() {
        let strict = OutboundPolicy::default();
        let internal: Vec<IpAddr> = vec!["8.8.8.8".parse().unwrap(), "10.0.0.5".parse().unwrap()];
        assert!(strict.check_resolved("evil.example", &internal).is_err());
        assert!(
            strict
                .check_resolved("ok.example", &["8.8.8.8".parse().unwrap()])
                .is_ok()
        );
        let lenient = OutboundPolicy::from_list("evil.example");
        assert!(lenient.check_resolved("evil.example", &internal).is_ok());
    }
}
