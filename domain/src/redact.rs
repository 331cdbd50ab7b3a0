//! Masking of what must never reach a log line: bearer tokens, signing
//! secrets, signatures, email addresses and phone numbers. Applied to every
//! formatted log line, so a field logged by mistake is caught too.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};

struct Rule {
    pattern: Regex,
    replace: fn(&Captures<'_>) -> String,
}

fn rule(pattern: &str, replace: fn(&Captures<'_>) -> String) -> Rule {
    Rule {
        pattern: Regex::new(pattern).expect("redaction patterns are valid"),
        replace,
    }
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    vec![
        rule(r"(?i)\bbearer\s+[^\s,;]+", |_| "Bearer ***".into()),
        rule(r"\blp_[A-Za-z0-9_-]{16,}", |_| "lp_***".into()),
        rule(r"\b(whsec|whpk|whsk)_[A-Za-z0-9+/=_-]+", |c| {
            format!("{}_***", &c[1])
        }),
        rule(r"\bv1a?,[A-Za-z0-9+/]{16,}={0,2}", |_| "v1,***".into()),
        rule(r"\bsha256=[0-9a-fA-F]{32,}", |_| "sha256=***".into()),
        rule(r"\bv1=[0-9a-fA-F]{32,}", |_| "v1=***".into()),
        rule(r"[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]{2,}", |c| {
            let domain = c[0].rsplit_once('@').map_or("", |(_, d)| d);
            format!("***@{domain}")
        }),
        rule(r"\+\d{6,}", |_| "+***".into()),
    ]
});

/// The text with every secret and personal datum masked.
pub fn mask(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for rule in RULES.iter() {
        if rule.pattern.is_match(&out) {
            out = Cow::Owned(
                rule.pattern
                    .replace_all(&out, |c: &Captures<'_>| (rule.replace)(c))
                    .into_owned(),
            );
        }
    }
    out
}

/// Every string in `value` (object keys kept) passed through [`mask`]: a
/// payload shown to ops as a log line would show it.
pub fn mask_json(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => Value::String(mask(&text).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(mask_json).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key, mask_json(value)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::{mask, mask_json};

    #[test]
    fn masks_every_string_of_a_document() {
        let masked = mask_json(serde_json::json!({
            "data": {"id": "form-1", "email": "ada@example.com", "phones": ["+442079460018"], "n": 7},
            "secret": "whsec_c2VjcmV0c2VjcmV0c2VjcmV0"
        }));
        assert_eq!(
            masked,
            serde_json::json!({
                "data": {"id": "form-1", "email": "***@example.com", "phones": ["+***"], "n": 7},
                "secret": "whsec_***"
            })
        );
    }

    #[test]
    fn masks_tokens_secrets_and_signatures() {
        let cases = [
            (
                "authorization: Bearer lp_abc.def-123",
                "authorization: Bearer ***",
            ),
            (
                "token=lp_THFFwMjAtQ3j1fGyB66-Arm6b5Y6Wx8Pf_lITM5jH_g",
                "token=lp_***",
            ),
            (
                "secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw ok",
                "secret whsec_*** ok",
            ),
            (
                "key whpk_6kpsY+KcUgq+9VB7Ey7F+ZVHdq6+vnuSQh7qaRRG0iw=",
                "key whpk_***",
            ),
            (
                "sig v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,4QW1ZrlOs/gNikr9vOXLSpuXeMFTaHZX",
                "sig v1,*** v1,***",
            ),
            (
                "x-hub-signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
                "x-hub-signature-256: sha256=***",
            ),
            (
                "t=1700000000,v1=1c2817ecef1b5288c0f960c28802e41e0c7412f8c7358e47a38526587b697930",
                "t=1700000000,v1=***",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(mask(input), expected, "{input}");
        }
    }

    #[test]
    fn masks_personal_data_but_keeps_the_rest() {
        assert_eq!(
            mask("lead ada.lovelace@example.com created"),
            "lead ***@example.com created"
        );
        assert_eq!(mask("phone +493012345678 stored"), "phone +*** stored");
        let harmless =
            "2026-11-30T01:14:05.123Z INFO http.request{path=/api/leads/42 status=201} v1 done";
        assert_eq!(mask(harmless), harmless);
        assert!(matches!(mask(harmless), std::borrow::Cow::Borrowed(_)));
    }
}
