//! Property tests for the outbound address guard: every special-purpose
//! range of the IANA IPv4 and IPv6 registries that is not globally
//! reachable is internal, in every textual form an attacker may write it
//! (plain, IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4, and
//! the odd IPv4 spellings a URL parser accepts), and a URL naming it is
//! refused. Public addresses just outside the ranges stay allowed.

#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use leadpipe_domain::net_guard::{OutboundPolicy, is_internal};
use proptest::prelude::*;

/// The IPv4 registry's ranges that are not globally reachable, plus
/// multicast and the reserved block, as (first address, prefix length).
const V4_RANGES: &[([u8; 4], u8)] = &[
    ([0, 0, 0, 0], 8),
    ([10, 0, 0, 0], 8),
    ([100, 64, 0, 0], 10),
    ([127, 0, 0, 0], 8),
    ([169, 254, 0, 0], 16),
    ([172, 16, 0, 0], 12),
    ([192, 0, 0, 0], 24),
    ([192, 0, 0, 170], 31),
    ([192, 0, 2, 0], 24),
    ([192, 88, 99, 0], 24),
    ([192, 168, 0, 0], 16),
    ([198, 18, 0, 0], 15),
    ([198, 51, 100, 0], 24),
    ([203, 0, 113, 0], 24),
    ([224, 0, 0, 0], 4),
    ([240, 0, 0, 0], 4),
    ([255, 255, 255, 255], 32),
];

/// The IPv6 registry's ranges (and the deprecated site-local one) that are
/// refused whatever they embed.
const V6_RANGES: &[([u16; 8], u8)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 1], 128),         // loopback
    ([0, 0, 0, 0, 0, 0, 0, 0], 128),         // unspecified
    ([0, 0, 0, 0, 0, 0, 0, 0], 96),          // IPv4-compatible (deprecated)
    ([0, 0, 0, 0, 0xffff, 0, 0, 0], 96),     // IPv4-translated
    ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),  // local-use NAT64
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64),      // discard-only
    ([0x100, 0, 0, 1, 0, 0, 0, 0], 64),      // dummy prefix
    ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),     // IETF protocol assignments
    ([0x2001, 0, 0, 0, 0, 0, 0, 0], 32),     // Teredo
    ([0x2001, 2, 0, 0, 0, 0, 0, 0], 48),     // benchmarking
    ([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28),  // ORCHID (deprecated)
    ([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28),  // ORCHIDv2
    ([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28),  // drone remote ID
    ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), // documentation
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),     // documentation
    ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),     // SRv6 SIDs
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),      // unique local
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),     // link-local
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),     // site-local (deprecated)
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),      // multicast
];

/// Public addresses, several right next to a range's edge.
const PUBLIC: &[&str] = &[
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.0",
    "192.0.3.0",
    "192.88.98.255",
    "192.88.100.0",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "223.255.255.255",
    "2606:4700:4700::1111",
    "2a00:1450:4001::200e",
    "2001:200::1",
    "2001:db7:ffff::1",
    "2001:db9::1",
    "2003::1",
    "3ffe:ffff::1",
    "3fff:1000::1",
    "64:ff9b::808:808",
    "::ffff:8.8.8.8",
    "2002:808:808::1",
];

fn in_v4_range() -> impl Strategy<Value = Ipv4Addr> {
    (0..V4_RANGES.len(), any::<u32>()).prop_map(|(i, bits)| {
        let (first, len) = V4_RANGES[i];
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        Ipv4Addr::from((u32::from_be_bytes(first) & mask) | (bits & !mask))
    })
}

fn in_v6_range() -> impl Strategy<Value = Ipv6Addr> {
    (0..V6_RANGES.len(), any::<u128>()).prop_map(|(i, bits)| {
        let (first, len) = V6_RANGES[i];
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        (u128::from(Ipv6Addr::from(first)) & mask | (bits & !mask)).into()
    })
}

/// Every IPv6 spelling of an IPv4 address that routes, or once routed, to it.
fn v6_forms(v4: Ipv4Addr) -> [Ipv6Addr; 5] {
    let [a, b, c, d] = v4.octets();
    let low = (u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]));
    [
        v4.to_ipv6_mapped(),
        v4.to_ipv6_compatible(),
        Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, low.0, low.1), // IPv4-translated
        Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, low.0, low.1), // NAT64
        Ipv6Addr::new(0x2002, low.0, low.1, 0, 0, 0, 0, 1), // 6to4
    ]
}

/// The spellings of an IPv4 host that the URL parser turns into an address.
fn v4_url_hosts(v4: Ipv4Addr) -> Vec<String> {
    let n = u32::from(v4);
    let [a, b, c, d] = v4.octets();
    vec![
        v4.to_string(),
        n.to_string(),
        format!("{n:#x}"),
        format!("0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}"),
        format!("0{a:o}.0{b:o}.0{c:o}.0{d:o}"),
        format!(
            "{a}.{}",
            (u32::from(b) << 16) | (u32::from(c) << 8) | u32::from(d)
        ),
        format!("{v4}."),
    ]
}

fn refused(url: &str) -> bool {
    OutboundPolicy::default().check_url(url).is_err()
}

proptest! {
    #[test]
    fn every_v4_special_range_is_internal_in_every_form(v4 in in_v4_range()) {
        prop_assert!(is_internal(IpAddr::V4(v4)), "{v4}");
        for v6 in v6_forms(v4) {
            prop_assert!(is_internal(IpAddr::V6(v6)), "{v6} (from {v4})");
            prop_assert!(refused(&format!("http://[{v6}]/hook")), "[{v6}]");
            let upper = format!("http://[{}]:8080/hook", v6.to_string().to_uppercase());
            prop_assert!(refused(&upper), "{upper}");
        }
        for host in v4_url_hosts(v4) {
            let url = format!("http://{host}:9000/hook");
            prop_assert!(refused(&url), "{url}");
        }
        // The same address mapped into IPv6 in its dotted form.
        let dotted = format!("https://[::ffff:{v4}]/");
        prop_assert!(refused(&dotted), "{dotted}");
    }

    #[test]
    fn every_v6_special_range_is_internal(v6 in in_v6_range()) {
        prop_assert!(is_internal(IpAddr::V6(v6)), "{v6}");
        let url = format!("https://[{v6}]/hook");
        prop_assert!(refused(&url), "{url}");
        let full = format!("https://[{}]/hook", v6.segments().map(|s| format!("{s:04X}")).join(":"));
        prop_assert!(refused(&full), "{full}");
    }

    /// An IPv4 address and its routable IPv6 spellings get one verdict.
    #[test]
    fn embedded_v4_is_judged_as_itself(v4 in any::<Ipv4Addr>()) {
        let verdict = is_internal(IpAddr::V4(v4));
        let [mapped, compatible, translated, nat64, six_to_four] = v6_forms(v4);
        prop_assert_eq!(is_internal(IpAddr::V6(mapped)), verdict);
        prop_assert_eq!(is_internal(IpAddr::V6(nat64)), verdict);
        prop_assert_eq!(is_internal(IpAddr::V6(six_to_four)), verdict);
        // Deprecated or untranslated forms are never public.
        prop_assert!(is_internal(IpAddr::V6(compatible)));
        prop_assert!(is_internal(IpAddr::V6(translated)));
    }
}

#[test]
fn public_addresses_next_to_the_ranges_are_allowed() {
    for ip in PUBLIC {
        let addr: IpAddr = ip.parse().unwrap();
        assert!(!is_internal(addr), "{ip}");
        let url = match addr {
            IpAddr::V4(_) => format!("https://{ip}/hook"),
            IpAddr::V6(_) => format!("https://[{ip}]/hook"),
        };
        assert!(OutboundPolicy::default().check_url(&url).is_ok(), "{url}");
    }
}

/// The literal forms that slipped through before, one by one.
#[test]
fn known_bypasses_are_refused() {
    for url in [
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://[::a9fe:a9fe]/",
        "http://[::127.0.0.1]/",
        "http://[::ffff:0:7f00:1]/",
        "http://[fec0::1]/",
        "http://[2002:a9fe:a9fe::1]/",
        "http://192.0.0.170/",
        "http://192.0.0.171/",
        "http://192.88.99.1/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://localhost./",
        "http://LOCALHOST/",
        "http://metadata.google.internal/",
        "http://[100::1]/",
        "http://[2001::1]/",
        "http://[2001:20::1]/",
    ] {
        assert!(refused(url), "{url}");
    }
}

/// The URL parser turns odd IPv4 spellings into the address they mean, so
/// the guard sees the address (and not a host name it would let through).
#[test]
fn the_url_parser_normalises_numeric_hosts() {
    for raw in [
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://127.1/",
    ] {
        let url = url::Url::parse(raw).unwrap();
        assert_eq!(
            url.host(),
            Some(url::Host::Ipv4(Ipv4Addr::LOCALHOST)),
            "{raw}"
        );
    }
}
