//! Working time. A team's response target counts only its working hours,
//! in its own time zone: a lead that arrives on Friday evening in Berlin is
//! due on Monday morning there, across daylight-saving changes.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::error::Error;

/// Working days (Monday first) and a daily window, in a time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusinessHours {
    pub time_zone: Tz,
    /// Monday = 0 … Sunday = 6.
    pub days: [bool; 7],
    /// Minutes after local midnight the day starts and ends (end ≤ 1440).
    pub start: u32,
    pub end: u32,
}

pub const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

impl BusinessHours {
    /// Every minute of every day, in UTC: no team hours configured.
    pub fn always() -> Self {
        Self {
            time_zone: Tz::UTC,
            days: [true; 7],
            start: 0,
            end: 24 * 60,
        }
    }

    /// Parses a team's settings, naming the field that is wrong.
    pub fn parse(time_zone: &str, days: &[String], start: &str, end: &str) -> Result<Self, Error> {
        let time_zone: Tz = time_zone.parse().map_err(|_| {
            Error::invalid("time_zone", "must be an IANA time zone, e.g. Europe/Berlin")
        })?;
        let mut set = [false; 7];
        for day in days {
            let index = DAY_NAMES
                .iter()
                .position(|d| d.eq_ignore_ascii_case(day.trim()))
                .ok_or_else(|| {
                    Error::invalid("work_days", "days are mon, tue, wed, thu, fri, sat, sun")
                })?;
            set[index] = true;
        }
        if !set.contains(&true) {
            return Err(Error::invalid("work_days", "must name at least one day"));
        }
        let start = minutes_of("work_start", start)?;
        let end = minutes_of("work_end", end)?;
        if end <= start {
            return Err(Error::invalid("work_end", "must be after work_start"));
        }
        Ok(Self {
            time_zone,
            days: set,
            start,
            end,
        })
    }

    /// The working days' names, Monday first.
    pub fn day_names(&self) -> Vec<String> {
        DAY_NAMES
            .iter()
            .zip(self.days)
            .filter(|(_, on)| *on)
            .map(|(d, _)| (*d).to_owned())
            .collect()
    }

    /// `HH:MM` of a minute of the day (`24:00` for the end of it).
    pub fn clock(minutes: u32) -> String {
        format!("{:02}:{:02}", minutes / 60, minutes % 60)
    }

    /// The moment `work` of working time after `from` has passed.
    pub fn add(&self, from: DateTime<Utc>, work: Duration) -> DateTime<Utc> {
        let mut remaining = work.max(Duration::zero());
        let mut date = from.with_timezone(&self.time_zone).date_naive();
        // Two years of days: a target is minutes to days, and every
        // configuration has a working day each week.
        for _ in 0..731 {
            let weekday = date.weekday().num_days_from_monday() as usize;
            if self.days[weekday] {
                let open = self.instant(date, self.start).max(from);
                let close = self.instant(date, self.end);
                if open < close {
                    let available = close - open;
                    if remaining <= available {
                        return open + remaining;
                    }
                    remaining -= available;
                }
            }
            let Some(next) = date.succ_opt() else { break };
            date = next;
        }
        from + work
    }

    /// The UTC instant of `minutes` after local midnight on `date`: a time
    /// the clocks skip (spring forward) counts as the first one after it, a
    /// time they repeat as its first occurrence.
    fn instant(&self, date: NaiveDate, minutes: u32) -> DateTime<Utc> {
        let (date, minutes) = if minutes >= 24 * 60 {
            (date.succ_opt().unwrap_or(date), 0)
        } else {
            (date, minutes)
        };
        let time = NaiveTime::from_hms_opt(minutes / 60, minutes % 60, 0).unwrap_or(NaiveTime::MIN);
        let local = date.and_time(time);
        for skip in 0..4 {
            let candidate = local + Duration::minutes(30 * skip);
            if let Some(found) = self.time_zone.from_local_datetime(&candidate).earliest() {
                return found.with_timezone(&Utc);
            }
        }
        Utc.from_utc_datetime(&local)
    }
}

fn minutes_of(field: &str, text: &str) -> Result<u32, Error> {
    let invalid = || Error::invalid(field, "must be HH:MM, from 00:00 to 24:00");
    let (h, m) = text.trim().split_once(':').ok_or_else(invalid)?;
    let (h, m): (u32, u32) = (
        h.parse().map_err(|_| invalid())?,
        m.parse().map_err(|_| invalid())?,
    );
    if m >= 60 || h > 24 || (h == 24 && m != 0) {
        return Err(invalid());
    }
    Ok(h * 60 + m)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn berlin_office() -> BusinessHours {
        let days: Vec<String> = ["mon", "tue", "wed", "thu", "fri"]
            .into_iter()
            .map(String::from)
            .collect();
        BusinessHours::parse("Europe/Berlin", &days, "09:00", "17:00").unwrap()
    }

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn within_the_day_the_target_is_wall_clock_time() {
        // Tuesday 10:00 Berlin (09:00 UTC in winter) + 1 h.
        let due = berlin_office().add(at("2026-12-08T09:00:00Z"), Duration::hours(1));
        assert_eq!(due, at("2026-12-08T10:00:00Z"));
    }

    #[test]
    fn friday_evening_is_due_on_monday_morning() {
        // Friday 18:30 Berlin: closed; Monday opens 09:00 Berlin = 08:00 UTC.
        let due = berlin_office().add(at("2026-12-11T17:30:00Z"), Duration::minutes(30));
        assert_eq!(due, at("2026-12-14T08:30:00Z"));
    }

    #[test]
    fn what_is_left_at_closing_time_carries_to_the_next_working_day() {
        // Wednesday 16:30 Berlin + 2 h: 30 min today, 90 min Thursday.
        let due = berlin_office().add(at("2026-12-09T15:30:00Z"), Duration::hours(2));
        assert_eq!(due, at("2026-12-10T09:30:00Z"));
    }

    #[test]
    fn the_clock_change_moves_the_utc_opening_time() {
        // Saturday 28 March 2026 evening; Berlin goes to summer time on the
        // Sunday: Monday opens 09:00 CEST = 07:00 UTC.
        let due = berlin_office().add(at("2026-03-28T20:00:00Z"), Duration::minutes(15));
        assert_eq!(due, at("2026-03-30T07:15:00Z"));
    }

    #[test]
    fn always_is_plain_time() {
        let from = at("2026-12-12T23:50:00Z");
        assert_eq!(
            BusinessHours::always().add(from, Duration::minutes(30)),
            from + Duration::minutes(30)
        );
    }

    #[test]
    fn bad_settings_name_their_field() {
        let days = vec!["mon".to_owned()];
        let field = |r: Result<BusinessHours, Error>| match r {
            Err(Error::Invalid(f)) => f[0].field.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(BusinessHours::parse(
                "Mars/Olympus",
                &days,
                "09:00",
                "17:00"
            )),
            "time_zone"
        );
        assert_eq!(
            field(BusinessHours::parse(
                "UTC",
                &["funday".into()],
                "09:00",
                "17:00"
            )),
            "work_days"
        );
        assert_eq!(
            field(BusinessHours::parse("UTC", &[], "09:00", "17:00")),
            "work_days"
        );
        assert_eq!(
            field(BusinessHours::parse("UTC", &days, "9", "17:00")),
            "work_start"
        );
        assert_eq!(
            field(BusinessHours::parse("UTC", &days, "18:00", "17:00")),
            "work_end"
        );
        let all_day = BusinessHours::parse("UTC", &days, "00:00", "24:00").unwrap();
        assert_eq!(BusinessHours::clock(all_day.end), "24:00");
    }
}
