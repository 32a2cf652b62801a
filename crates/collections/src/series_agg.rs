//! Aggregators over time buckets, for TS.RANGE's AGGREGATION and compaction rules.
//!
//! Each aggregator folds the samples of one bucket into a value. `twa` (time-weighted
//! average) also needs the samples just before and after the bucket, to interpolate the
//! series at the bucket's edges, so the fold takes them as optional neighbours. Variance and
//! standard deviation use Welford's running update, which stays accurate where the naive
//! sum-of-squares formula cancels.

/// An aggregation function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregator {
    Avg,
    Sum,
    Min,
    Max,
    Range,
    Count,
    First,
    Last,
    StdP,
    StdS,
    VarP,
    VarS,
    Twa,
}

impl Aggregator {
    pub const ALL: [Aggregator; 13] = [
        Self::Avg,
        Self::Sum,
        Self::Min,
        Self::Max,
        Self::Range,
        Self::Count,
        Self::First,
        Self::Last,
        Self::StdP,
        Self::StdS,
        Self::VarP,
        Self::VarS,
        Self::Twa,
    ];

    /// The lower-case name replies use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Avg => "avg",
            Self::Sum => "sum",
            Self::Min => "min",
            Self::Max => "max",
            Self::Range => "range",
            Self::Count => "count",
            Self::First => "first",
            Self::Last => "last",
            Self::StdP => "std.p",
            Self::StdS => "std.s",
            Self::VarP => "var.p",
            Self::VarS => "var.s",
            Self::Twa => "twa",
        }
    }

    pub fn parse(s: &[u8]) -> Option<Aggregator> {
        Self::ALL.into_iter().find(|a| a.name().as_bytes().eq_ignore_ascii_case(s))
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<Aggregator> {
        Self::ALL.get(c as usize).copied()
    }

    /// Folds one bucket `[start, end)` of `samples` (non-empty, increasing timestamps).
    /// `prev` / `next` are the samples just outside the bucket (used by `twa` only).
    pub fn fold(self, samples: &[(u64, f64)], start: u64, end: u64, prev: Option<(u64, f64)>, next: Option<(u64, f64)>) -> f64 {
        let vals = || samples.iter().map(|s| s.1);
        match self {
            Self::Avg => {
                // Near DBL_MAX the sum overflows where the mean does not: the module replies
                // the mean (1.7976931348623157E308 of two such samples); so does the mean of
                // the samples each divided by the count.
                let n = samples.len() as f64;
                let sum = vals().sum::<f64>();
                if sum.is_finite() {
                    sum / n
                } else {
                    vals().map(|v| v / n).sum()
                }
            }
            Self::Sum => vals().sum(),
            Self::Min => vals().fold(f64::INFINITY, f64::min),
            Self::Max => vals().fold(f64::NEG_INFINITY, f64::max),
            Self::Range => vals().fold(f64::NEG_INFINITY, f64::max) - vals().fold(f64::INFINITY, f64::min),
            Self::Count => samples.len() as f64,
            Self::First => samples[0].1,
            Self::Last => samples[samples.len() - 1].1,
            Self::StdP | Self::StdS | Self::VarP | Self::VarS => {
                let (mut n, mut mean, mut m2) = (0f64, 0f64, 0f64);
                for v in vals() {
                    n += 1.0;
                    let d = v - mean;
                    mean += d / n;
                    m2 += d * (v - mean);
                }
                let var = match self {
                    Self::StdP | Self::VarP => m2 / n,
                    _ if n > 1.0 => m2 / (n - 1.0),
                    _ => 0.0,
                };
                if matches!(self, Self::StdP | Self::StdS) {
                    var.sqrt()
                } else {
                    var
                }
            }
            Self::Twa => twa(samples, start, end, prev, next),
        }
    }
}

/// Linear interpolation of the value at `t` between two samples.
fn lerp(a: (u64, f64), b: (u64, f64), t: u64) -> f64 {
    if b.0 == a.0 {
        return a.1;
    }
    a.1 + (b.1 - a.1) * (t as f64 - a.0 as f64) / (b.0 as f64 - a.0 as f64)
}

/// Time-weighted average over `[start, end)`: the area under the piecewise-linear curve
/// through the samples, divided by the time it covers. With a sample before the bucket the
/// curve starts at the bucket's start (interpolated); without, at the first sample; likewise
/// at the end with the next sample. A single point with no neighbours is its own value.
fn twa(samples: &[(u64, f64)], start: u64, end: u64, prev: Option<(u64, f64)>, next: Option<(u64, f64)>) -> f64 {
    let first = samples[0];
    let last = samples[samples.len() - 1];
    let mut pts: Vec<(u64, f64)> = Vec::with_capacity(samples.len() + 2);
    match prev {
        Some(p) if first.0 > start && p.0 < first.0 => pts.push((start, lerp(p, first, start))),
        _ => {}
    }
    pts.extend_from_slice(samples);
    match next {
        Some(n) if last.0 < end && n.0 > last.0 => pts.push((end, lerp(last, n, end))),
        _ => {}
    }
    let span = pts[pts.len() - 1].0 as f64 - pts[0].0 as f64;
    if span <= 0.0 {
        return vals_avg(&pts);
    }
    let area: f64 = pts.windows(2).map(|w| (w[1].0 as f64 - w[0].0 as f64) * (w[0].1 + w[1].1) / 2.0).sum();
    area / span
}

fn vals_avg(pts: &[(u64, f64)]) -> f64 {
    pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64
}

/// The start of the bucket holding `t`, for buckets of `bucket_ms` aligned to `align_ms`.
pub fn bucket_start(t: u64, bucket_ms: u64, align_ms: u64) -> u64 {
    let b = bucket_ms as i128;
    let diff = t as i128 - align_ms as i128;
    let start = t as i128 - ((diff % b) + b) % b;
    start.max(0) as u64
}
