//! What every outgoing request (outbox deliveries, reconcile pulls) shares:
//! one HTTP client whose DNS resolver hands the connector only addresses the
//! outbound policy allows, resolved once (so a name cannot answer a public
//! address to a check and an internal one to the connect); no proxy, no
//! redirects; bodies read up to a cap; error text without the URL.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use domain::net_guard::OutboundPolicy;
use futures::future::BoxFuture;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// How much of a receiver's or sender's error answer is read: enough for
/// the 200 characters ops see, never the whole of a hostile body.
pub const ERROR_BODY_BYTES: usize = 4 * 1024;
/// Characters of an error answer kept for ops.
pub const ERROR_DETAIL_CHARS: usize = 200;

/// Turns a host name into addresses. The system resolver in production;
/// tests plug in one that answers what they need (a rebinding name).
pub trait Lookup: Send + Sync + 'static {
    fn lookup(&self, host: String) -> BoxFuture<'static, io::Result<Vec<IpAddr>>>;
}

/// The operating system's resolver (getaddrinfo, via tokio).
struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: String) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|a| a.ip())
                .collect())
        })
    }
}

/// The resolver outgoing requests use; cheap to clone.
#[derive(Clone)]
pub struct Dns(Arc<dyn Lookup>);

impl Dns {
    pub fn system() -> Self {
        Self(Arc::new(SystemLookup))
    }

    pub fn custom(lookup: impl Lookup) -> Self {
        Self(Arc::new(lookup))
    }
}

impl Default for Dns {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for Dns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Dns(..)")
    }
}

impl PartialEq for Dns {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Dns {}

/// The request was not sent: its host resolves only to addresses the
/// outbound policy forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// reqwest's resolver: one lookup, filtered by the policy. The connector
/// connects only to what this returns, so what was checked is what is used.
struct PinnedResolver {
    policy: OutboundPolicy,
    dns: Dns,
}

impl Resolve for PinnedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        let policy = self.policy.clone();
        let lookup = self.dns.0.lookup(host.clone());
        Box::pin(async move {
            let addrs = lookup
                .await
                .map_err(|e| format!("cannot resolve {host}: {e}"))?;
            let allowed = policy.allowed_addrs(&host, &addrs).map_err(Refused)?;
            // Port 0: reqwest puts in the URL's port.
            let addrs: Addrs = Box::new(allowed.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The HTTP client for outgoing requests: DNS pinned by the policy, no
/// redirects (a redirect could lead anywhere), no proxy from the
/// environment (a proxy would resolve and connect on its own, past the
/// check). Literal IP hosts bypass the resolver: callers check them with
/// `OutboundPolicy::check_url` before each request.
pub fn client(
    timeout: Duration,
    policy: &OutboundPolicy,
    dns: &Dns,
) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(PinnedResolver {
            policy: policy.clone(),
            dns: dns.clone(),
        }))
        .timeout(timeout)
        .user_agent(concat!("leadpipe/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// The resolver's refusal, if that is why the request failed.
pub fn refusal(err: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(Refused(reason)) = e.downcast_ref::<Refused>() {
            return Some(reason.clone());
        }
        source = e.source();
    }
    None
}

/// Error text with its causes and without the URL: URLs may carry tokens
/// in paths or queries.
pub fn without_url(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if let Some(url) = err.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}

/// Reads at most `cap` bytes of a body, chunk by chunk, and stops there:
/// the rest is never read (the connection is dropped with the response).
/// `Ok((bytes, true))` when the body was longer than `cap`.
pub async fn read_capped(
    response: &mut reqwest::Response,
    cap: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The start of an error answer, for ops: read up to a few KiB, cut to 200
/// characters. A body that breaks off gives what arrived.
pub async fn error_detail(mut response: reqwest::Response) -> String {
    let body = match read_capped(&mut response, ERROR_BODY_BYTES).await {
        Ok((body, _)) => body,
        Err(_) => Vec::new(),
    };
    String::from_utf8_lossy(&body)
        .chars()
        .take(ERROR_DETAIL_CHARS)
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// Answers a public address on the first lookup and loopback after.
    struct Rebinding(Arc<AtomicUsize>);

    impl Lookup for Rebinding {
        fn lookup(&self, _host: String) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok(vec![if n == 0 {
                    "192.88.100.1".parse().unwrap()
                } else {
                    "127.0.0.1".parse().unwrap()
                }])
            })
        }
    }

    /// Always loopback.
    struct Loopback;

    impl Lookup for Loopback {
        fn lookup(&self, _host: String) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
            Box::pin(async { Ok(vec!["127.0.0.1".parse().unwrap()]) })
        }
    }

    /// A server answering every request with `answer`; counts connections.
    async fn server(answer: &'static str) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = hits.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = socket.read(&mut buf).await;
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        (port, hits)
    }

    const NO_CONTENT: &str = "HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";

    #[tokio::test]
    async fn a_name_resolving_inside_is_refused_without_connecting() {
        let (port, hits) = server(NO_CONTENT).await;
        let strict = OutboundPolicy::default();
        let strict = client(Duration::from_secs(2), &strict, &Dns::custom(Loopback)).unwrap();
        let err = strict
            .get(format!("http://inside.test:{port}/?token=secret"))
            .send()
            .await
            .unwrap_err();
        assert_eq!(
            refusal(&err).unwrap(),
            "inside.test resolves to an internal address (127.0.0.1)"
        );
        assert!(
            !without_url(&err).contains("secret"),
            "{}",
            without_url(&err)
        );
        assert_eq!(hits.load(Ordering::SeqCst), 0);

        // Allow-listed by name: the same answer is used as it is.
        let lenient = OutboundPolicy::from_list("inside.test");
        let lenient = client(Duration::from_secs(2), &lenient, &Dns::custom(Loopback)).unwrap();
        let ok = lenient
            .get(format!("http://inside.test:{port}/"))
            .send()
            .await
            .unwrap();
        assert_eq!(ok.status(), 204);
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }

    /// The rebinding attack: the name answers public once, then loopback.
    /// Each request resolves exactly once and connects only to what that
    /// lookup returned, so the loopback answer is refused, never connected.
    #[tokio::test]
    async fn each_request_resolves_once_and_uses_that_answer() {
        let (port, hits) = server(NO_CONTENT).await;
        let lookups = Arc::new(AtomicUsize::new(0));
        let dns = Dns::custom(Rebinding(lookups.clone()));
        let http = client(Duration::from_secs(2), &OutboundPolicy::default(), &dns).unwrap();
        let url = format!("http://rebind.test:{port}/");
        // First request: the public answer is what it tries (and cannot reach).
        let first = http.get(&url).send().await.unwrap_err();
        assert_eq!(refusal(&first), None);
        assert_eq!(lookups.load(Ordering::SeqCst), 1);
        // Second: loopback, refused.
        let second = http.get(&url).send().await.unwrap_err();
        assert!(refusal(&second).is_some());
        assert_eq!(lookups.load(Ordering::SeqCst), 2);
        assert_eq!(hits.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn error_bodies_are_read_up_to_the_cap() {
        // Announces a gigabyte and sends 64 KiB of it: the reader stops at
        // its cap rather than waiting for (or buffering) the rest.
        let body = "x".repeat(64 * 1024);
        let answer: &'static str = Box::leak(
            format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 1073741824\r\n\r\n{body}"
            )
            .into_boxed_str(),
        );
        let (port, _) = server(answer).await;
        let http = client(
            Duration::from_secs(5),
            &OutboundPolicy::from_list("127.0.0.1"),
            &Dns::default(),
        )
        .unwrap();
        let response = http
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .unwrap();
        let detail = error_detail(response).await;
        assert_eq!(detail.chars().count(), ERROR_DETAIL_CHARS);
    }

    /// `HTTP_PROXY` and friends are ignored. The environment is global to the
    /// process (and setting it needs `unsafe`), so the test runs itself again
    /// as a child process with the proxy variables set.
    #[test]
    fn proxy_variables_in_the_environment_are_ignored() {
        if std::env::var_os("LEADPIPE_PROXY_TEST_CHILD").is_some() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(proxy_child());
            return;
        }
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "outbound::tests::proxy_variables_in_the_environment_are_ignored",
                "--nocapture",
            ])
            .env("LEADPIPE_PROXY_TEST_CHILD", "1")
            // Port 9 (discard) on loopback: nothing listens, a proxied
            // request fails to connect.
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("http_proxy", "http://127.0.0.1:9")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("ALL_PROXY", "http://127.0.0.1:9")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .status()
            .unwrap();
        assert!(status.success(), "the child test failed: {status}");
    }

    async fn proxy_child() {
        let (port, hits) = server(NO_CONTENT).await;
        let policy = OutboundPolicy::from_list("receiver.test");
        let dns = Dns::custom(Loopback);
        let url = format!("http://receiver.test:{port}/");
        // A plain reqwest client does honour the variables here (the
        // control: proves the environment is set and would be used)...
        let plain = reqwest::Client::builder()
            .dns_resolver(Arc::new(PinnedResolver {
                policy: policy.clone(),
                dns: dns.clone(),
            }))
            .build()
            .unwrap();
        assert!(plain.get(&url).send().await.is_err());
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        // ...ours goes straight to the receiver.
        let ours = client(Duration::from_secs(5), &policy, &dns).unwrap();
        assert_eq!(ours.get(&url).send().await.unwrap().status(), 204);
        assert_eq!(hits.load(Ordering::SeqCst), 1);
    }
}
