//! What every outgoing request (outbox deliveries, reconcile pulls) shares:
//! the address check after DNS resolution, and error text without the URL.

use std::net::IpAddr;

use domain::net_guard::OutboundPolicy;

/// Resolves the host and refuses internal addresses unless allow-listed,
/// so a public name that points inside is caught too.
pub async fn check_resolution(policy: &OutboundPolicy, url: &url::Url) -> Result<(), String> {
    let Some(host) = url.host_str() else {
        return Err("no host".into());
    };
    if policy.allows_host(host) {
        return Ok(());
    }
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs: Vec<IpAddr> =
        tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .map(|a| a.ip())
            .collect();
    policy.check_resolved(host, &addrs)
}

/// Error text without the URL: URLs may carry tokens in paths or queries.
pub fn without_url(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    if let Some(url) = err.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}

/// An HTTP client that never follows redirects: a redirect could lead the
/// request anywhere, past the address check.
pub fn client(timeout: std::time::Duration) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .user_agent(concat!("leadpipe/", env!("CARGO_PKG_VERSION")))
        .build()
}
