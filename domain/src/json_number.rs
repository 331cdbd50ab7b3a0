//! Numbers in senders' JSON, kept exactly. serde_json keeps every number as
//! the text it was sent as (`arbitrary_precision`): read as 64-bit floats,
//! two large numeric ids became one natural key and payloads came back
//! rounded. PostgreSQL's `jsonb` writes a number out in full (`1e3` is
//! `1000`), so a few bytes of exponent can become hundreds of kilobytes
//! there: a number is kept written out as PostgreSQL writes it, on both
//! backends, and one that would take more than [`MAX_DIGITS`] digits is
//! refused. Every 64-bit float fits.

use serde_json::{Number, Value};

/// The most digits a number may take written out in full.
pub const MAX_DIGITS: usize = 400;

pub const NUMBER_RULE: &str =
    "numbers must take at most 400 digits written out in full (without an exponent)";

/// Rewrites every number of `value` with an exponent (and `-0`) written out
/// as PostgreSQL writes it; `Err` holds the JSON pointer of the first
/// number longer than [`MAX_DIGITS`], and `value` is then partly rewritten.
pub fn write_out(value: &mut Value) -> Result<(), String> {
    match value {
        Value::Number(n) => match written_out(n.as_str()) {
            Written::Kept => Ok(()),
            Written::As(text) => {
                // Our own plain decimal: always a valid JSON number.
                if let Ok(number) = text.parse::<Number>() {
                    *n = number;
                }
                Ok(())
            }
            Written::TooLong => Err(String::new()),
        },
        Value::Array(items) => items
            .iter_mut()
            .enumerate()
            .try_for_each(|(i, item)| write_out(item).map_err(|rest| format!("/{i}{rest}"))),
        Value::Object(map) => map.iter_mut().try_for_each(|(key, item)| {
            write_out(item).map_err(|rest| format!("/{}{rest}", pointer_step(key)))
        }),
        _ => Ok(()),
    }
}

/// A number as a rejected record is kept for ops: as it is, or as its text
/// when it is longer than [`MAX_DIGITS`] (the caller walks the record).
pub fn storable(n: &Number) -> Value {
    match written_out(n.as_str()) {
        Written::TooLong => Value::String(n.as_str().to_owned()),
        Written::Kept | Written::As(_) => Value::Number(n.clone()),
    }
}

/// One key of a JSON pointer, escaped (`~0`, `~1`), a NUL written `\u0000`:
/// pointers end up in stored errors, and PostgreSQL's `text` refuses NUL.
pub(crate) fn pointer_step(key: &str) -> String {
    key.replace('~', "~0")
        .replace('/', "~1")
        .replace('\0', "\\u0000")
}

/// A number as the text of a field (a mapped `source_ref`, email, name…):
/// written out as it is in the stored payload, so the key is the same
/// whatever form the sender used and on either backend (a rejected record
/// retried from PostgreSQL's copy has it written out already).
pub fn as_text(n: &Number) -> String {
    match written_out(n.as_str()) {
        Written::As(text) => text,
        Written::Kept | Written::TooLong => n.as_str().to_owned(),
    }
}

#[derive(Debug, PartialEq)]
enum Written {
    /// Already as PostgreSQL writes it.
    Kept,
    As(String),
    TooLong,
}

/// A JSON number's text written out in full, as PostgreSQL's `numeric`
/// writes it: the digits of the mantissa with the point moved by the
/// exponent, as many fraction digits as the mantissa had minus the exponent
/// (`1.50` keeps its zero, `10e-1` is `1.0`), no sign on zero.
fn written_out(text: &str) -> Written {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let is_zero = mantissa.bytes().all(|b| b == b'0' || b == b'.');
    let Some(exponent) = exponent else {
        // JSON has no leading zeros: only the sign of a zero can change.
        if whole.len() + fraction.len() > MAX_DIGITS {
            return Written::TooLong;
        }
        return if negative && is_zero {
            Written::As(unsigned.to_owned())
        } else {
            Written::Kept
        };
    };
    // Beyond this the number is far too long whatever its digits.
    const EXPONENT_BOUND: i64 = 1_000_000;
    let exponent = match exponent
        .strip_prefix('+')
        .unwrap_or(exponent)
        .parse::<i64>()
    {
        Ok(e) if e.abs() <= EXPONENT_BOUND => e,
        _ => return Written::TooLong,
    };
    let digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    let count = digits.len() as i64;
    // Where the point falls among the digits, and the fraction digits kept.
    let point = whole.len() as i64 + exponent;
    let scale = (fraction.len() as i64 - exponent).max(0);
    // The whole part starts at the first digit that is not a leading zero
    // (a zero is all zeros, padding included: it is written `0`).
    let first = if is_zero {
        point.max(0)
    } else {
        let leading_zeros = digits.iter().take_while(|&&d| d == b'0').count() as i64;
        leading_zeros.min(point.max(0))
    };
    let whole_len = (point - first).max(1);
    if whole_len + scale > MAX_DIGITS as i64 {
        return Written::TooLong;
    }
    let digit = |at: i64| {
        if (0..count).contains(&at) {
            digits[at as usize] as char
        } else {
            '0'
        }
    };
    let mut out = String::with_capacity((whole_len + scale + 2) as usize);
    if negative && !is_zero {
        out.push('-');
    }
    if point - first <= 0 {
        out.push('0');
    } else {
        out.extend((first..point).map(digit));
    }
    if scale > 0 {
        out.push('.');
        out.extend((point..point + scale).map(digit));
    }
    Written::As(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Pairs checked against PostgreSQL 15: `SELECT 'x'::jsonb::text`.
    #[test]
    fn exponents_are_written_out_as_postgresql_writes_them() {
        for (sent, written) in [
            ("1.5E3", "1500"),
            ("25e-3", "0.025"),
            ("-0.0", "0.0"),
            ("-0", "0"),
            ("1.0e+2", "100"),
            ("6.02214076e23", "602214076000000000000000"),
            ("1e-5", "0.00001"),
            ("-1.5e-3", "-0.0015"),
            ("123.4500e1", "1234.500"),
            ("0e5", "0"),
            ("0.0e-3", "0.0000"),
            ("-0e-2", "0.00"),
            ("10e-1", "1.0"),
            ("0.5e1", "5"),
            ("-12.0E-0", "-12.0"),
            ("1e0", "1"),
            ("0.05e1", "0.5"),
            ("0.001e2", "0.1"),
        ] {
            assert_eq!(written_out(sent), Written::As(written.into()), "{sent}");
        }
    }

    #[test]
    fn plain_numbers_are_kept() {
        for sent in ["0", "7", "-7", "1.50", "0.0001", "-98765432109876543210987"] {
            assert_eq!(written_out(sent), Written::Kept, "{sent}");
        }
    }

    #[test]
    fn the_limit_counts_the_digits_written_out() {
        let max = format!("1{}", "0".repeat(MAX_DIGITS - 1));
        assert_eq!(written_out(&max), Written::Kept);
        assert_eq!(written_out(&format!("{max}0")), Written::TooLong);
        assert_eq!(written_out(&format!("{max}.0")), Written::TooLong);
        assert_eq!(
            written_out("1e399"),
            Written::As(format!("1{}", "0".repeat(399)))
        );
        assert_eq!(written_out("1e400"), Written::TooLong);
        // 0. and 399 digits after the point.
        assert!(matches!(written_out("1e-399"), Written::As(_)));
        assert_eq!(written_out("1e-400"), Written::TooLong);
        assert_eq!(written_out("1e99999999999999999999"), Written::TooLong);
        assert_eq!(written_out("1e-1000001"), Written::TooLong);
        // The extremes of a 64-bit float.
        assert!(matches!(written_out("1.7976931348623157e308"), Written::As(s) if s.len() == 309));
        assert!(matches!(written_out("5e-324"), Written::As(s) if s.len() == 326));
    }

    #[test]
    fn write_out_names_the_first_long_number_and_rewrites_the_rest() {
        let mut value: Value =
            serde_json::from_str(r#"{"a": 1E2, "b/c": [0, {"d": 1e400}]}"#).unwrap();
        assert_eq!(write_out(&mut value), Err("/b~1c/1/d".into()));
        let mut value: Value = serde_json::from_str(r#"{"a": 1E2, "b": [-0.0]}"#).unwrap();
        assert_eq!(write_out(&mut value), Ok(()));
        assert_eq!(value.to_string(), r#"{"a":100,"b":[0.0]}"#);
    }

    #[test]
    fn a_pointer_writes_a_nul_in_a_key_as_an_escape() {
        let mut value: Value = serde_json::from_str(r#"{"a\u0000/b": 1e400}"#).unwrap();
        assert_eq!(write_out(&mut value), Err("/a\\u0000~1b".into()));
    }

    #[test]
    fn a_number_as_text_is_written_out() {
        let text = |s: &str| as_text(&s.parse::<Number>().unwrap());
        assert_eq!(text("1.5E3"), "1500");
        assert_eq!(text("12345678901234567890123"), "12345678901234567890123");
        assert_eq!(text("42.50"), "42.50");
        assert_eq!(text("-0"), "0");
    }

    #[test]
    fn storable_keeps_a_long_number_as_its_text() {
        let number = |s: &str| s.parse::<Number>().unwrap();
        // serde_json keeps the digits; it writes an exponent `e+`.
        assert_eq!(storable(&number("1e400")), Value::String("1e+400".into()));
        assert_eq!(storable(&number("1.5E3")).to_string(), "1.5e+3");
    }
}
