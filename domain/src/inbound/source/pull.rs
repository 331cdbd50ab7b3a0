//! A source's pull API: where to `GET` its records, how to authenticate, how
//! many per page, and when to reconcile by itself. Set through the source's
//! configuration (`SourceConfig`); the auth value is write-only, like the
//! webhook secrets.

use std::fmt;

use crate::error::FieldError;
use crate::net_guard::OutboundPolicy;

pub const DEFAULT_PAGE_SIZE: i64 = 100;
pub const MAX_PAGE_SIZE: i64 = 1000;
const MAX_AUTH_VALUE_LEN: usize = 4096;

/// How reconcile reaches a sender: `GET {url}?since={cursor}&limit={page_size}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullConfig {
    pub url: String,
    pub auth: Option<PullAuth>,
    pub page_size: u32,
    /// A cron expression with a seconds field (`0 */5 * * * *`).
    pub cron: Option<String>,
}

/// A header sent with every pull request, e.g. `Authorization: Bearer …`.
#[derive(Clone, PartialEq, Eq)]
pub struct PullAuth {
    pub header: String,
    pub value: String,
}

// Hand-written so the value never reaches a log through `{:?}`.
impl fmt::Debug for PullAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PullAuth")
            .field("header", &self.header)
            .field("value", &"[redacted]")
            .finish()
    }
}

/// The pull fields of a source input, before validation.
#[derive(Default)]
pub struct PullInput {
    pub url: Option<String>,
    pub auth_header: Option<String>,
    pub auth_secret: Option<String>,
    pub page_size: Option<i64>,
    pub cron: Option<String>,
}

/// What happens to the stored auth value on a save.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretChange {
    /// Omitted on an update: the stored value stays.
    Keep,
    Set(String),
    /// No auth header: no value either.
    Clear,
}

/// Validated pull fields with their defaults, as stored.
#[derive(Clone)]
pub struct ValidPull {
    pub url: Option<String>,
    pub auth_header: Option<String>,
    pub auth_secret: SecretChange,
    pub page_size: i64,
    pub cron: Option<String>,
}

/// Checks the pull fields, pushing field errors. The URL must pass the
/// outbound policy (no internal address unless allow-listed): it is checked
/// again, with DNS resolution, before every request.
pub fn validate(
    errors: &mut Vec<FieldError>,
    input: PullInput,
    outbound: &OutboundPolicy,
) -> ValidPull {
    let url = input
        .url
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty());
    if let Some(url) = &url {
        if url.len() > 2048 {
            errors.push(FieldError::new(
                "pull_url",
                "must be at most 2048 characters",
            ));
        } else if let Err(reason) = outbound.check_url(url) {
            errors.push(FieldError::new("pull_url", reason));
        }
    }
    let auth_header = input
        .auth_header
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty());
    if let Some(header) = &auth_header {
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if header.len() > 128 || !header.bytes().all(token) {
            errors.push(FieldError::new(
                "pull_auth_header",
                "must be an HTTP header name",
            ));
        }
    }
    let auth_secret = match (&auth_header, input.auth_secret) {
        (None, Some(_)) => {
            errors.push(FieldError::new(
                "pull_auth_secret",
                "needs pull_auth_header (the header that carries it)",
            ));
            SecretChange::Clear
        }
        (None, None) => SecretChange::Clear,
        (Some(_), None) => SecretChange::Keep,
        (Some(_), Some(secret)) => {
            if secret.is_empty()
                || secret.len() > MAX_AUTH_VALUE_LEN
                || secret.bytes().any(|b| b.is_ascii_control())
            {
                errors.push(FieldError::new(
                    "pull_auth_secret",
                    "must be 1 to 4096 characters without control characters",
                ));
            }
            SecretChange::Set(secret)
        }
    };
    if auth_header.is_some() && url.is_none() {
        errors.push(FieldError::new(
            "pull_auth_header",
            "needs pull_url (the API it authenticates to)",
        ));
    }
    let page_size = input.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&page_size) {
        errors.push(FieldError::new(
            "pull_page_size",
            "must be between 1 and 1000",
        ));
    }
    let cron = input
        .cron
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    if let Some(expr) = &cron {
        if let Err(reason) = super::schedule::parse(expr) {
            errors.push(FieldError::new("cron", reason));
        } else if url.is_none() {
            errors.push(FieldError::new(
                "cron",
                "needs pull_url (what the schedule reconciles from)",
            ));
        }
    }
    ValidPull {
        url,
        auth_header,
        auth_secret,
        page_size,
        cron,
    }
}

/// Whether two pull URLs share scheme, host and port: a stored auth value
/// may only keep going where it went before.
pub fn same_origin(a: &str, b: &str) -> bool {
    match (url::Url::parse(a), url::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin() && a.origin().is_tuple(),
        _ => false,
    }
}

/// The stored columns as a `PullConfig`; `None` without a pull URL.
pub fn from_columns(
    url: Option<&String>,
    auth_header: Option<&String>,
    auth_secret: Option<&String>,
    page_size: i64,
    cron: Option<&String>,
) -> Option<PullConfig> {
    let url = url?.clone();
    let auth = match (auth_header, auth_secret) {
        (Some(header), Some(value)) => Some(PullAuth {
            header: header.clone(),
            value: value.clone(),
        }),
        _ => None,
    };
    Some(PullConfig {
        url,
        auth,
        page_size: u32::try_from(page_size.clamp(1, MAX_PAGE_SIZE)).unwrap_or(100),
        cron: cron.cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: PullInput) -> (ValidPull, Vec<String>) {
        let mut errors = Vec::new();
        let valid = validate(&mut errors, input, &OutboundPolicy::default());
        (valid, errors.into_iter().map(|e| e.field).collect())
    }

    #[test]
    fn defaults_and_a_valid_config() {
        let (v, errors) = check(PullInput {
            url: Some(" https://api.example.com/leads ".into()),
            auth_header: Some("Authorization".into()),
            auth_secret: Some("Bearer abc".into()),
            cron: Some("0 */5 * * * *".into()),
            ..Default::default()
        });
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(v.url.as_deref(), Some("https://api.example.com/leads"));
        assert_eq!(v.auth_header.as_deref(), Some("authorization"));
        assert!(v.auth_secret == SecretChange::Set("Bearer abc".into()));
        assert_eq!(v.page_size, DEFAULT_PAGE_SIZE);
    }

    #[test]
    fn internal_urls_bad_cron_and_orphans_are_refused() {
        let (_, errors) = check(PullInput {
            url: Some("http://10.0.0.1/leads".into()),
            page_size: Some(0),
            cron: Some("*/5 * * * *x".into()),
            ..Default::default()
        });
        assert_eq!(errors, ["pull_url", "pull_page_size", "cron"]);
        let (_, errors) = check(PullInput {
            auth_secret: Some("x".into()),
            cron: Some("0 * * * * *".into()),
            ..Default::default()
        });
        assert_eq!(errors, ["pull_auth_secret", "cron"]);
    }

    #[test]
    fn origins() {
        assert!(same_origin(
            "https://api.example.com/leads",
            "https://API.example.com:443/other?x=1"
        ));
        for other in [
            "http://api.example.com/leads",
            "https://api.example.com:8443/leads",
            "https://evil.example.net/leads",
            "not a url",
        ] {
            assert!(
                !same_origin("https://api.example.com/leads", other),
                "{other}"
            );
        }
    }

    #[test]
    fn an_omitted_secret_is_kept_and_never_printed() {
        let (v, _) = check(PullInput {
            url: Some("https://api.example.com/leads".into()),
            auth_header: Some("x-api-key".into()),
            ..Default::default()
        });
        assert!(v.auth_secret == SecretChange::Keep);
        let auth = PullAuth {
            header: "x-api-key".into(),
            value: "super-secret".into(),
        };
        assert!(!format!("{auth:?}").contains("super-secret"));
    }
}
