//! Times as `status` and `list` show them: the local time zone, a timestamp in it or in UTC.

/// The local time zone: `$TZ` read on every call (a Python program may change it at run time,
/// which the system zone's cache would miss), else the system's, else UTC.
pub fn local_time_zone() -> jiff::tz::TimeZone {
    use jiff::tz::TimeZone;
    match std::env::var("TZ") {
        Ok(tz) if !tz.is_empty() => {
            let name = tz.strip_prefix(':').unwrap_or(&tz);
            TimeZone::get(name)
                .or_else(|_| TimeZone::posix(name))
                .unwrap_or_else(|_| TimeZone::try_system().unwrap_or(TimeZone::UTC))
        }
        _ => TimeZone::try_system().unwrap_or(TimeZone::UTC),
    }
}

/// `YYYY-MM-DD HH:MM:SS` for a unix timestamp in the time zone `tz`.
pub fn format_time(secs: i64, tz: &jiff::tz::TimeZone) -> String {
    match jiff::Timestamp::from_second(secs) {
        Ok(t) => t
            .to_zoned(tz.clone())
            .strftime("%Y-%m-%d %H:%M:%S")
            .to_string(),
        Err(_) => format_utc(secs),
    }
}

/// `YYYY-MM-DD HH:MM:SS` in UTC for a unix timestamp.
pub fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_in_utc_and_in_a_zone() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20");
        // A POSIX rule, so the test needs no zoneinfo files: UTC+1.
        let bst = jiff::tz::TimeZone::posix("BST-1").unwrap();
        assert_eq!(format_time(1_293_182, &bst), "1970-01-16 00:13:02");
    }
}
