//! A source's `expected_interval`: how often it usually delivers, written
//! as a duration (`90s`, `30m`, `2h`, `1d`), stored in seconds.

const MAX_SECS: i64 = 90 * 86_400;
const UNITS: [(&str, i64); 4] = [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)];

/// Seconds from `30s`, `30m`, `2h`, `1d` (a bare number is seconds),
/// between a second and 90 days.
pub fn parse(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit = if unit.is_empty() { "s" } else { unit };
    let n: i64 = number.parse().map_err(|_| RULE.to_owned())?;
    let per = UNITS
        .iter()
        .find(|(u, _)| *u == unit)
        .map(|(_, per)| *per)
        .ok_or_else(|| RULE.to_owned())?;
    n.checked_mul(per)
        .filter(|s| (1..=MAX_SECS).contains(s))
        .ok_or_else(|| RULE.to_owned())
}

const RULE: &str = "must be a duration like 90s, 30m, 2h or 1d, between 1s and 90d";

/// The largest whole unit: `7200` is `2h`, `5400` is `90m`.
pub fn show(secs: i64) -> String {
    UNITS.iter().find(|(_, per)| secs % per == 0).map_or_else(
        || format!("{secs}s"),
        |(u, per)| format!("{}{u}", secs / per),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip() {
        for (text, secs) in [("90s", 90), ("30m", 1800), ("2h", 7200), ("1d", 86_400)] {
            assert_eq!(parse(text), Ok(secs));
            assert_eq!(show(secs), text);
        }
        assert_eq!(parse("120"), Ok(120));
        assert_eq!(show(5400), "90m");
        for bad in ["", "often", "0s", "-1h", "1.5h", "91d", "2w"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
