//! strftime-style time formats: `time = { field = "ts", format = "%Y-%m-%d %H:%M:%S" }`.
//!
//! Feeds written by loggers often carry a formatted time rather than a number. A format is
//! compiled once, when the rules are loaded (an unknown directive, a format that names no
//! date, a directive given twice are rules errors with their line), into a list of items;
//! reading a line's time walks those items over the text, with no allocation. The directives
//! are the strptime ones a log time uses: `%Y` (up to 4 digits), `%y` (POSIX: 69-99 are
//! 19xx, 00-68 20xx), `%m`, `%d`, `%e`, `%j`, `%H`, `%M`, `%S` (1 or 2 digits), `%f` (1 to 9
//! fraction digits; milliseconds are kept, the rest truncated), `%z` (`Z`, `+hh`, `+hhmm`,
//! `+hh:mm`), `%b`/`%h` (English month abbreviations, any case), `%s` (Unix seconds), `%T`
//! (`%H:%M:%S`), `%F` (`%Y-%m-%d`), `%%`. A space in the format matches any run of
//! whitespace, possibly empty, as strptime's does; any other character matches itself.
//! Without `%z` the time is UTC. A date that does not exist (February 30, month 13, hour 24)
//! is an unparseable time, rejected with the line like any other.

use std::fmt;

/// One compiled piece of a format.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Item {
    Literal(u8),
    Space,
    Year,
    Year2,
    Month,
    MonthName,
    Day,
    DayOfYear,
    Hour,
    Minute,
    Second,
    Fraction,
    Zone,
    Epoch,
}

/// A compiled time format.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeFormat {
    items: Vec<Item>,
    text: String,
}

impl fmt::Display for TimeFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Longest format accepted.
const MAX_FORMAT_BYTES: usize = 128;

const MONTHS: [&[u8; 3]; 12] = [b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec"];

impl TimeFormat {
    /// Compiles a format; the error says what is wrong with it.
    pub fn parse(s: &str) -> Result<TimeFormat, String> {
        if s.is_empty() || s.len() > MAX_FORMAT_BYTES {
            return Err(format!("a time format is 1 to {MAX_FORMAT_BYTES} bytes"));
        }
        let mut items = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            i += 1;
            if c.is_ascii_whitespace() {
                if items.last() != Some(&Item::Space) {
                    items.push(Item::Space);
                }
                continue;
            }
            if c != b'%' {
                items.push(Item::Literal(c));
                continue;
            }
            let Some(&d) = b.get(i) else { return Err(format!("time format '{s}' ends with a lone '%'")) };
            i += 1;
            match d {
                b'Y' => items.push(Item::Year),
                b'y' => items.push(Item::Year2),
                b'm' => items.push(Item::Month),
                b'b' | b'h' => items.push(Item::MonthName),
                b'd' | b'e' => items.push(Item::Day),
                b'j' => items.push(Item::DayOfYear),
                b'H' => items.push(Item::Hour),
                b'M' => items.push(Item::Minute),
                b'S' => items.push(Item::Second),
                b'f' => items.push(Item::Fraction),
                b'z' => items.push(Item::Zone),
                b's' => items.push(Item::Epoch),
                b'T' => items.extend([Item::Hour, Item::Literal(b':'), Item::Minute, Item::Literal(b':'), Item::Second]),
                b'F' => items.extend([Item::Year, Item::Literal(b'-'), Item::Month, Item::Literal(b'-'), Item::Day]),
                b'%' => items.push(Item::Literal(b'%')),
                other => {
                    let shown = s[i - 1..].chars().next().unwrap_or(other as char);
                    return Err(format!(
                        "time format '{s}': unknown directive '%{shown}' (%Y %y %m %b %d %e %j %H %M %S %f %z %s %T %F %%)"
                    ));
                }
            }
        }
        let count = |x: &[Item]| items.iter().filter(|i| x.contains(i)).count();
        for (group, name) in [
            (&[Item::Year, Item::Year2][..], "the year"),
            (&[Item::Month, Item::MonthName], "the month"),
            (&[Item::Day], "the day"),
            (&[Item::DayOfYear], "the day of the year"),
            (&[Item::Hour], "the hour"),
            (&[Item::Minute], "the minute"),
            (&[Item::Second], "the second"),
            (&[Item::Fraction], "the fraction"),
            (&[Item::Zone], "the zone"),
            (&[Item::Epoch], "the Unix time"),
        ] {
            if count(group) > 1 {
                return Err(format!("time format '{s}' gives {name} twice"));
            }
        }
        let has = |x: Item| items.contains(&x);
        let year = has(Item::Year) || has(Item::Year2);
        let month_day = (has(Item::Month) || has(Item::MonthName)) && has(Item::Day);
        if has(Item::Epoch) {
            if items.iter().any(|i| !matches!(i, Item::Epoch | Item::Fraction | Item::Literal(_) | Item::Space)) {
                return Err(format!("time format '{s}': %s is the whole time (only %f may go with it)"));
            }
        } else if !(year && (month_day || has(Item::DayOfYear))) || (has(Item::DayOfYear) && (has(Item::Month) || has(Item::MonthName) || has(Item::Day))) {
            return Err(format!("time format '{s}' names no date: give %Y (or %y) with %m and %d, or with %j, or %s"));
        }
        Ok(TimeFormat { items, text: s.to_string() })
    }

    /// The time `text` holds, in milliseconds since the Unix epoch (may be negative); None
    /// when the text does not match the format or names a date that does not exist.
    pub fn parse_ms(&self, text: &str) -> Option<i64> {
        let b = text.as_bytes();
        let mut at = 0;
        let (mut year, mut month, mut day, mut yday) = (1970i64, 1i64, 1i64, None::<i64>);
        let (mut hour, mut minute, mut second, mut frac_ms, mut offset_s) = (0i64, 0i64, 0i64, 0i64, 0i64);
        let mut epoch = None;
        for item in &self.items {
            match *item {
                Item::Literal(c) => {
                    if b.get(at) != Some(&c) {
                        return None;
                    }
                    at += 1;
                }
                Item::Space => {
                    while b.get(at).is_some_and(u8::is_ascii_whitespace) {
                        at += 1;
                    }
                }
                Item::Year => year = digits(b, &mut at, 4)?,
                Item::Year2 => {
                    let y = digits(b, &mut at, 2)?;
                    year = if y >= 69 { 1900 + y } else { 2000 + y };
                }
                Item::Month => month = digits(b, &mut at, 2)?,
                Item::MonthName => {
                    let name = b.get(at..at + 3)?;
                    month = MONTHS.iter().position(|m| name.eq_ignore_ascii_case(&m[..]))? as i64 + 1;
                    at += 3;
                }
                Item::Day => {
                    // %e pads with a space: " 5".
                    if b.get(at) == Some(&b' ') {
                        at += 1;
                    }
                    day = digits(b, &mut at, 2)?;
                }
                Item::DayOfYear => yday = Some(digits(b, &mut at, 3)?),
                Item::Hour => hour = digits(b, &mut at, 2)?,
                Item::Minute => minute = digits(b, &mut at, 2)?,
                Item::Second => second = digits(b, &mut at, 2)?,
                Item::Fraction => {
                    let start = at;
                    let f = digits(b, &mut at, 9)?;
                    let n = (at - start) as u32;
                    frac_ms = if n >= 3 { f / 10i64.pow(n - 3) } else { f * 10i64.pow(3 - n) };
                }
                Item::Zone => {
                    match b.get(at) {
                        Some(b'Z') | Some(b'z') => at += 1,
                        Some(&sign @ (b'+' | b'-')) => {
                            at += 1;
                            let hh = fixed(b, &mut at, 2)?;
                            if b.get(at) == Some(&b':') {
                                at += 1;
                            }
                            let mm = if b.get(at).is_some_and(u8::is_ascii_digit) { fixed(b, &mut at, 2)? } else { 0 };
                            if hh > 23 || mm > 59 {
                                return None;
                            }
                            let s = hh * 3600 + mm * 60;
                            offset_s = if sign == b'-' { -s } else { s };
                        }
                        _ => return None,
                    }
                }
                Item::Epoch => {
                    let neg = b.get(at) == Some(&b'-');
                    if neg {
                        at += 1;
                    }
                    let v = digits(b, &mut at, 12)?;
                    epoch = Some(if neg { -v } else { v });
                }
            }
        }
        if at != b.len() {
            return None;
        }
        if let Some(e) = epoch {
            return Some(e * 1000 + frac_ms);
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        let days = if let Some(yday) = yday {
            // %j is 001-366: day 0 does not exist.
            let len = if is_leap(year) { 366 } else { 365 };
            if !(1..=len).contains(&yday) {
                return None;
            }
            days_from_civil(year, 1, 1) + yday - 1
        } else {
            if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
                return None;
            }
            days_from_civil(year, month, day)
        };
        Some((days * 86400 + hour * 3600 + minute * 60 + second - offset_s) * 1000 + frac_ms)
    }
}

/// 1 to `max` ASCII digits at `at`.
fn digits(b: &[u8], at: &mut usize, max: usize) -> Option<i64> {
    let start = *at;
    let mut v = 0i64;
    while *at < b.len() && *at - start < max && b[*at].is_ascii_digit() {
        v = v * 10 + i64::from(b[*at] - b'0');
        *at += 1;
    }
    (*at > start).then_some(v)
}

/// Exactly `n` ASCII digits at `at`.
fn fixed(b: &[u8], at: &mut usize, n: usize) -> Option<i64> {
    let start = *at;
    let v = digits(b, at, n)?;
    (*at - start == n).then_some(v)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(f: &str, t: &str) -> Option<i64> {
        TimeFormat::parse(f).unwrap().parse_ms(t)
    }

    #[test]
    fn formats_read_the_times_they_write() {
        assert_eq!(ms("%Y-%m-%d %H:%M:%S", "1970-01-01 00:00:00"), Some(0));
        assert_eq!(ms("%Y-%m-%d %H:%M:%S", "2023-11-14 22:13:20"), Some(1_700_000_000_000));
        assert_eq!(ms("%FT%T%z", "2023-11-14T23:13:20+01:00"), Some(1_700_000_000_000));
        assert_eq!(ms("%FT%T%z", "2023-11-14T17:13:20-0500"), Some(1_700_000_000_000));
        assert_eq!(ms("%FT%T.%f%z", "2023-11-14T22:13:20.25Z"), Some(1_700_000_000_250));
        assert_eq!(ms("%FT%T.%f", "2023-11-14T22:13:20.123456789"), Some(1_700_000_000_123));
        assert_eq!(ms("%d/%b/%Y:%H:%M:%S %z", "14/NOV/2023:22:13:20 +0000"), Some(1_700_000_000_000));
        assert_eq!(ms("%Y %j", "2024 60"), Some(days_from_civil(2024, 2, 29) * 86_400_000));
        assert_eq!(ms("%y%m%d", "691231"), Some(-86_400_000));
        assert_eq!(ms("%s.%f", "1700000000.5"), Some(1_700_000_000_500));
        assert_eq!(ms("%Y-%m-%d  %H", "2024-02-29 7"), Some(days_from_civil(2024, 2, 29) * 86_400_000 + 7 * 3_600_000));
        assert_eq!(ms("%Y-%m-%e", "2024-03- 5"), Some(days_from_civil(2024, 3, 5) * 86_400_000));
    }

    #[test]
    fn impossible_or_mismatched_times_are_none() {
        for t in ["2023-02-29 00:00:00", "2023-13-01 00:00:00", "2023-01-01 24:00:00", "2023-01-01 00:60:00", "2023-01-01 00:00", "2023-01-01 00:00:00x", "x"] {
            assert_eq!(ms("%Y-%m-%d %H:%M:%S", t), None, "{t}");
        }
        assert_eq!(ms("%Y %j", "2023 366"), None);
        assert_eq!(ms("%Y %j", "2024 000"), None);
        assert_eq!(ms("%FT%T%z", "2023-11-14T22:13:20+2400"), None);
    }

    #[test]
    fn bad_formats_are_refused() {
        for f in ["%H:%M", "%Y-%m", "%Y-%m-%d %Q", "%Y-%m-%d %Y", "%s %Y", "", "%Y-%m-%d%"] {
            assert!(TimeFormat::parse(f).is_err(), "{f}");
        }
    }
}
