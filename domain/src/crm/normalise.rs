//! How contacts and companies are recognised as the same one: the keys their
//! unique constraints hold.

/// Mail providers whose domain says nothing about a person's employer: two
/// leads at gmail.com are not one company.
const FREE_MAIL_DOMAINS: &[&str] = &[
    "aol.com",
    "gmail.com",
    "gmx.de",
    "gmx.net",
    "googlemail.com",
    "hotmail.com",
    "icloud.com",
    "live.com",
    "mail.com",
    "me.com",
    "msn.com",
    "outlook.com",
    "proton.me",
    "protonmail.com",
    "t-online.de",
    "web.de",
    "yahoo.com",
    "yandex.ru",
];

/// Trimmed and lower-cased; `None` when empty.
pub fn email(raw: &str) -> Option<String> {
    let e = raw.trim().to_lowercase();
    (!e.is_empty()).then_some(e)
}

/// A domain or website as a bare host: lower-case, no scheme, path, port or
/// `www.`. `https://www.Example.com/about` → `example.com`.
pub fn domain(raw: &str) -> Option<String> {
    let s = raw.trim().to_lowercase();
    let s = s.split_once("://").map_or(s.as_str(), |(_, rest)| rest);
    let host = s.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = host.split(':').next().unwrap_or("");
    let host = host.trim_end_matches('.');
    let host = host.strip_prefix("www.").unwrap_or(host);
    let valid = host.contains('.')
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        && !host.starts_with(['.', '-']);
    valid.then(|| host.to_owned())
}

/// The company domain an email address gives away, unless it is a free-mail provider.
pub fn company_domain_of_email(email: &str) -> Option<String> {
    let (_, host) = email.rsplit_once('@')?;
    domain(host).filter(|d| !FREE_MAIL_DOMAINS.contains(&d.as_str()))
}

/// A company name for matching: lower-case, whitespace collapsed.
pub fn company_name(raw: &str) -> Option<String> {
    let n = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    (!n.is_empty()).then(|| n.to_lowercase())
}

/// The unique key a company is matched on: its domain when known, else its name.
pub fn company_match_key(domain: Option<&str>, name: &str) -> Option<String> {
    match domain {
        Some(d) => Some(format!("domain:{d}")),
        None => company_name(name).map(|n| format!("name:{n}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_lose_scheme_www_path_and_case() {
        assert_eq!(
            domain("https://www.Example.com/about").as_deref(),
            Some("example.com")
        );
        assert_eq!(domain("EXAMPLE.com.").as_deref(), Some("example.com"));
        assert_eq!(
            domain("shop.example.co.uk:8443").as_deref(),
            Some("shop.example.co.uk")
        );
        assert_eq!(domain("localhost"), None);
        assert_eq!(domain("not a domain"), None);
    }

    #[test]
    fn email_domains_skip_free_mail() {
        assert_eq!(
            company_domain_of_email("ada@Analytical.example").as_deref(),
            Some("analytical.example")
        );
        assert_eq!(company_domain_of_email("ada@gmail.com"), None);
        assert_eq!(company_domain_of_email("nobody"), None);
    }

    #[test]
    fn match_keys_prefer_the_domain() {
        assert_eq!(
            company_match_key(Some("acme.example"), "ACME Inc").as_deref(),
            Some("domain:acme.example")
        );
        assert_eq!(
            company_match_key(None, "  ACME   Inc ").as_deref(),
            Some("name:acme inc")
        );
        assert_eq!(company_match_key(None, "  "), None);
    }
}
