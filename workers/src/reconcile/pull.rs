//! The pull client: `GET {pull_url}?since={cursor}&limit={n}` with the
//! source's auth header, answered by `{"data": [...], "next_cursor": "…",
//! "has_more": true|false}`. Errors are classified as for jobs: timeouts,
//! broken connections, `408`, `429` and `5xx` are transient (retried);
//! anything else is permanent.

use std::time::Duration;

use domain::net_guard::OutboundPolicy;
use domain::reconcile::{PullConfig, PulledPage};
use serde::Deserialize;
use serde_json::Value;

use crate::outbound::{Dns, error_detail, read_capped, refusal, without_url};
use crate::publisher::parse_retry_after;

/// A page larger than this is refused (permanent): ask for smaller pages.
pub const MAX_PAGE_BYTES: usize = 32 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// Worth another try, after `retry_after` if the sender named one.
    #[error("{reason}")]
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    #[error("{0}")]
    Permanent(String),
}

impl FetchError {
    fn transient(reason: impl Into<String>) -> Self {
        Self::Transient {
            reason: reason.into(),
            retry_after: None,
        }
    }
}

/// The body of one page, as the common cursor shape has it.
#[derive(Deserialize)]
struct PageBody {
    data: Vec<Value>,
    #[serde(default)]
    next_cursor: Option<Value>,
    #[serde(default)]
    has_more: bool,
}

#[derive(Clone)]
pub struct PullClient {
    http: reqwest::Client,
    outbound: OutboundPolicy,
}

impl PullClient {
    pub fn new(
        timeout: Duration,
        outbound: OutboundPolicy,
        dns: &Dns,
    ) -> Result<Self, reqwest::Error> {
        Ok(Self {
            http: crate::outbound::client(timeout, &outbound, dns)?,
            outbound,
        })
    }

    /// Fetches the page after `cursor` (`None`: the first page).
    pub async fn fetch(
        &self,
        pull: &PullConfig,
        cursor: Option<&str>,
    ) -> Result<PulledPage, FetchError> {
        // Checked again at each request: the policy may have changed, and a
        // literal address does not pass through the resolver.
        let mut url = self
            .outbound
            .check_url(&pull.url)
            .map_err(|reason| FetchError::Permanent(format!("pull_url {reason}")))?;
        {
            let mut query = url.query_pairs_mut();
            if let Some(cursor) = cursor {
                query.append_pair("since", cursor);
            }
            query.append_pair("limit", &pull.page_size.to_string());
        }
        let mut request = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(auth) = &pull.auth {
            request = request.header(auth.header.as_str(), auth.value.as_str());
        }
        let mut response = request.send().await.map_err(|err| {
            if let Some(reason) = refusal(&err) {
                FetchError::Permanent(format!("pull_url refused: {reason}"))
            } else if err.is_timeout() {
                FetchError::transient("timed out")
            } else {
                FetchError::transient(without_url(&err))
            }
        })?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let detail = error_detail(response).await;
            let reason = format!("the pull API answered HTTP {}: {detail}", status.as_u16());
            return Err(
                if status.is_server_error() || matches!(status.as_u16(), 408 | 429) {
                    FetchError::Transient {
                        reason,
                        retry_after,
                    }
                } else {
                    FetchError::Permanent(reason)
                },
            );
        }
        let too_large = || {
            FetchError::Permanent(format!(
                "a page is larger than {MAX_PAGE_BYTES} bytes; lower pull_page_size"
            ))
        };
        // Refused before reading when announced, else stopped at the cap.
        if response
            .content_length()
            .is_some_and(|n| n > MAX_PAGE_BYTES as u64)
        {
            return Err(too_large());
        }
        let (body, truncated) =
            read_capped(&mut response, MAX_PAGE_BYTES)
                .await
                .map_err(|err| {
                    if err.is_timeout() {
                        FetchError::transient("timed out reading the page")
                    } else {
                        FetchError::transient(without_url(&err))
                    }
                })?;
        if truncated {
            return Err(too_large());
        }
        parse_page(&body)
    }
}

/// `{data, next_cursor, has_more}`; a cursor may be a string or a number.
pub fn parse_page(body: &[u8]) -> Result<PulledPage, FetchError> {
    let page: PageBody = serde_json::from_slice(body).map_err(|e| {
        FetchError::Permanent(format!(
            "the pull API's answer is not {{\"data\": [...], \"next_cursor\", \"has_more\"}}: {e}"
        ))
    })?;
    let next_cursor = match page.next_cursor {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => {
            return Err(FetchError::Permanent(
                "next_cursor must be a string, a number or null".into(),
            ));
        }
    };
    Ok(PulledPage {
        records: page.data,
        next_cursor,
        has_more: page.has_more,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pages_parse_with_string_or_number_cursors() {
        let p = parse_page(br#"{"data":[{"id":1}],"next_cursor":"abc","has_more":true}"#).unwrap();
        assert_eq!(p.records.len(), 1);
        assert_eq!(p.next_cursor.as_deref(), Some("abc"));
        assert!(p.has_more);
        let p = parse_page(br#"{"data":[],"next_cursor":42}"#).unwrap();
        assert_eq!(p.next_cursor.as_deref(), Some("42"));
        assert!(!p.has_more);
        let p = parse_page(br#"{"data":[],"next_cursor":null,"has_more":false}"#).unwrap();
        assert_eq!(p.next_cursor, None);
    }

    /// A pull API answering 200 with `head` then `body_bytes` of filler.
    async fn pull_api(head: String, body_bytes: usize) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://127.0.0.1:{}/leads",
            listener.local_addr().unwrap().port()
        );
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 16 * 1024];
            let _ = socket.read(&mut buf).await;
            let _ = socket.write_all(head.as_bytes()).await;
            let chunk = vec![b' '; 64 * 1024];
            let mut sent = 0;
            while sent < body_bytes {
                if socket.write_all(&chunk).await.is_err() {
                    return;
                }
                sent += chunk.len();
            }
        });
        url
    }

    async fn fetch(url: String) -> Result<PulledPage, FetchError> {
        let client = PullClient::new(
            Duration::from_secs(30),
            OutboundPolicy::from_list("127.0.0.1"),
            &crate::outbound::Dns::default(),
        )
        .unwrap();
        let pull = PullConfig {
            url,
            auth: None,
            page_size: 100,
            cron: None,
        };
        client.fetch(&pull, None).await
    }

    #[tokio::test]
    async fn an_announced_oversized_page_is_refused_unread() {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1073741824\r\n\r\n";
        let err = fetch(pull_api(head.into(), 64 * 1024).await)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, FetchError::Permanent(m) if m.contains("larger than")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn an_unannounced_oversized_page_is_cut_at_the_cap() {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
        let err = fetch(pull_api(head.into(), MAX_PAGE_BYTES + 1024 * 1024).await)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, FetchError::Permanent(m) if m.contains("larger than")),
            "{err:?}"
        );
    }

    #[test]
    fn other_shapes_are_permanent_errors() {
        for bad in [
            &br#"[1,2]"#[..],
            br#"{"items":[]}"#,
            br#"not json"#,
            br#"{"data":[],"next_cursor":{"a":1}}"#,
        ] {
            assert!(matches!(parse_page(bad), Err(FetchError::Permanent(_))));
        }
    }
}
