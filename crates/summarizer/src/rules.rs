//! Rules files: TOML in, checked feeds and summaries out.
//!
//! A rules file is refused as a whole, with the line and the reason of the first problem
//! found: TOML syntax (the `toml` crate's own position), an unknown key (`deny_unknown_fields`,
//! so a misspelt `dimension` is an error rather than a summary without dimensions), and every
//! semantic check (a summary naming an unknown feed, a metric of an unknown field, a bad
//! `where`...), located with the spans the parser keeps for each value. Everything a line
//! will need at run time is resolved here once (field names to indexes, paths parsed,
//! filters compiled), so parsing a line never looks a name up.
//!
//! Limits: at most [`MAX_FEEDS`] feeds, [`MAX_SUMMARIES`] summaries, [`MAX_FIELDS`] fields per
//! feed, [`MAX_DIMENSIONS`] dimensions and [`MAX_METRICS`] metrics per summary.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use toml::Spanned;

use crate::event::JsonPath;
use crate::filter::Expr;
use crate::timefmt::TimeFormat;

pub const MAX_FEEDS: usize = 64;
pub const MAX_SUMMARIES: usize = 256;
pub const MAX_FIELDS: usize = 256;
pub const MAX_DIMENSIONS: usize = 16;
pub const MAX_METRICS: usize = 64;
/// Default longest line a feed accepts (a feed may set `max_line_bytes`).
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 * 1024;

/// Why a rules file was refused: a 1-based line (0 when the problem has no place, such as a
/// file without summaries) and the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct RulesError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            f.write_str(&self.message)
        }
    }
}

/// How a feed's lines are written.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// Comma-separated values (RFC 4180 quoting); a field is a column, by position.
    Csv,
    /// One JSON object per line; a field is a JSON path.
    Jsonl,
}

/// The unit of a numeric time value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    S,
    Ms,
    Us,
}

impl Unit {
    /// Milliseconds per unit, as a divisor/multiplier pair.
    pub fn to_ms(self, v: f64) -> f64 {
        match self {
            Unit::S => v * 1000.0,
            Unit::Ms => v,
            Unit::Us => v / 1000.0,
        }
    }
}

/// Where an event's time is.
#[derive(Debug, Clone)]
pub enum TimeSource {
    /// A CSV column (index among the columns).
    Column(usize),
    /// A JSON path.
    Path(JsonPath),
}

/// One feed: how to read a line into field values and a time.
#[derive(Debug, Clone)]
pub struct Feed {
    pub name: String,
    pub format: Format,
    /// Field names; for CSV the columns in order, for JSON lines the `fields` table's keys.
    pub fields: Vec<String>,
    /// For JSON lines, each field's path (same order as `fields`).
    pub paths: Vec<JsonPath>,
    pub time: TimeSource,
    pub unit: Unit,
    /// A strftime-style format the time is written in (`time = { ..., format = "..." }`),
    /// instead of a number in `unit`.
    pub time_format: Option<TimeFormat>,
    /// `when_full = "drop"`: a batch that finds the summarizer's queue full is dropped (and
    /// counted) rather than waiting for room.
    pub drop_when_full: bool,
    /// Whether a field must hold a number (a `sum`, `min` or `max` reads it).
    pub numeric: Vec<bool>,
    pub max_line_bytes: usize,
    /// The summaries fed by this feed (indexes into [`Rules::summaries`]).
    pub summaries: Vec<usize>,
    /// For CSV, the header line (the columns joined by commas), skipped where it appears.
    pub header: String,
    /// For JSON lines, the keys the paths take at each depth with the paths that take them
    /// (see `json.rs`'s `path_keys`).
    pub(crate) path_keys: Vec<Vec<(String, u64)>>,
}

impl Feed {
    pub fn field(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f == name)
    }
}

/// A time bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bucket {
    Minute,
    Hour,
    Day,
    None,
}

impl Bucket {
    /// Width in seconds; 0 for `none`.
    pub fn seconds(self) -> i64 {
        match self {
            Bucket::Minute => 60,
            Bucket::Hour => 3600,
            Bucket::Day => 86400,
            Bucket::None => 0,
        }
    }

    /// The start (Unix seconds) of the bucket holding `time_ms`; None for `none`.
    pub fn start(self, time_ms: i64) -> Option<i64> {
        let w = self.seconds();
        (w > 0).then(|| time_ms.div_euclid(1000).div_euclid(w) * w)
    }
}

/// What a metric computes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MetricKind {
    Count,
    Sum(usize),
    Min(usize),
    Max(usize),
    Last(usize),
    Hll(usize),
    Distinct(usize),
}

impl MetricKind {
    /// Whether the metric is a field of the summary's hash (the others are keys of their own).
    pub fn in_hash(self) -> bool {
        !matches!(self, MetricKind::Hll(_) | MetricKind::Distinct(_))
    }

    pub fn field(self) -> Option<usize> {
        match self {
            MetricKind::Count => None,
            MetricKind::Sum(f) | MetricKind::Min(f) | MetricKind::Max(f) | MetricKind::Last(f) | MetricKind::Hll(f) | MetricKind::Distinct(f) => Some(f),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Metric {
    pub name: String,
    pub kind: MetricKind,
    /// For an `hll(field, log2m=.., regwidth=.., expthresh=.., sparseon=..)` metric, the
    /// parameters it names; the others come from the server's `hll-*` defaults.
    pub hll: HllOptions,
}

/// An HLL metric's own parameters (None: the server's default), checked against
/// postgresql-hll's ranges when the rules are loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HllOptions {
    pub log2m: Option<i64>,
    pub regwidth: Option<i64>,
    pub expthresh: Option<i64>,
    pub sparseon: Option<bool>,
}

impl HllOptions {
    pub fn is_default(&self) -> bool {
        *self == HllOptions::default()
    }
}

/// One summary.
#[derive(Debug, Clone)]
pub struct Summary {
    pub name: String,
    pub feed: usize,
    pub filter: Option<Expr>,
    /// Dimension fields (indexes into the feed's fields) and their names.
    pub dims: Vec<usize>,
    pub dim_names: Vec<String>,
    pub bucket: Bucket,
    /// Metrics in name order; the hash metrics first are not separated: see [`MetricKind::in_hash`].
    pub metrics: Vec<Metric>,
    pub ttl_ms: Option<i64>,
    /// Every field the summary reads (dimensions, filter, metrics), sorted, without repeats.
    pub uses: Vec<usize>,
    /// `stream = { key = "user:{user}", fields = [...], maxlen = N }`: each update of the
    /// summary (an event past its filter, per fan-out combination) is also appended to the
    /// stream its key template names.
    pub stream: Option<StreamRule>,
}

/// A part of a stream key template: literal text or a field's value.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplatePart {
    Text(String),
    Field(usize),
}

/// A summary's stream rule (see [`Summary::stream`]).
#[derive(Debug, Clone)]
pub struct StreamRule {
    /// The key: `{field}` is replaced by the field's value, as it is (no escaping).
    pub key: Vec<TemplatePart>,
    /// The fields each entry holds, by name, in this order (indexes into the feed's fields).
    pub fields: Vec<usize>,
    pub field_names: Vec<String>,
    /// `XADD ... MAXLEN ~ maxlen`, if set.
    pub maxlen: Option<u64>,
}

/// Longest stream key template.
pub const MAX_STREAM_KEY_BYTES: usize = 512;

impl Summary {
    pub fn metric(&self, name: &str) -> Option<usize> {
        self.metrics.iter().position(|m| m.name == name)
    }
}

/// A checked rules file.
#[derive(Debug, Clone)]
pub struct Rules {
    pub feeds: Vec<Feed>,
    pub summaries: Vec<Summary>,
    /// The text it was parsed from (SUMMARY.RULES GET).
    pub text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    feed: BTreeMap<Spanned<String>, Spanned<RawFeed>>,
    #[serde(default)]
    summary: Vec<Spanned<RawSummary>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFeed {
    format: Spanned<String>,
    columns: Option<Spanned<Vec<String>>>,
    time: Spanned<RawTime>,
    fields: Option<BTreeMap<Spanned<String>, Spanned<String>>>,
    when_full: Option<Spanned<String>>,
    max_line_bytes: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTime {
    field: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    unit: Option<Spanned<String>>,
    format: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSummary {
    name: Spanned<String>,
    feed: Spanned<String>,
    #[serde(rename = "where")]
    filter: Option<Spanned<String>>,
    #[serde(default)]
    dimensions: Option<Spanned<Vec<String>>>,
    bucket: Option<Spanned<String>>,
    metrics: Option<Spanned<BTreeMap<Spanned<String>, Spanned<String>>>>,
    ttl: Option<Spanned<String>>,
    stream: Option<Spanned<RawStream>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStream {
    key: Spanned<String>,
    fields: Spanned<Vec<String>>,
    maxlen: Option<Spanned<i64>>,
}

/// Turns byte offsets into 1-based line numbers.
struct Lines<'a>(&'a str);

impl Lines<'_> {
    fn line(&self, offset: usize) -> usize {
        self.0.as_bytes()[..offset.min(self.0.len())].iter().filter(|&&b| b == b'\n').count() + 1
    }

    fn err<T>(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> Result<T, RulesError> {
        Err(RulesError { line: self.line(span.start), message: message.into() })
    }
}

/// Whether `name` may be a feed, summary, field or metric name: it becomes part of keys and
/// of the `where` language, so letters, digits, `_` and `-` only.
fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Parses a duration such as `90d`, `12h`, `30m`, `45s` into milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit())?);
    let n: i64 = num.parse().ok()?;
    let per = match unit {
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return None,
    };
    n.checked_mul(per).filter(|&ms| ms > 0)
}

impl Rules {
    /// Parses and checks a rules file.
    pub fn parse(text: &str) -> Result<Rules, RulesError> {
        let lines = Lines(text);
        let raw: RawFile = toml::from_str(text).map_err(|e| RulesError {
            line: e.span().map_or(0, |s| lines.line(s.start)),
            message: e.message().trim().to_string(),
        })?;
        if raw.feed.len() > MAX_FEEDS {
            return Err(RulesError { line: 0, message: format!("more than {MAX_FEEDS} feeds") });
        }
        if raw.summary.len() > MAX_SUMMARIES {
            return Err(RulesError { line: 0, message: format!("more than {MAX_SUMMARIES} summaries") });
        }
        let mut feeds = Vec::new();
        for (name, feed) in raw.feed {
            feeds.push(compile_feed(&lines, name, feed)?);
        }
        let mut summaries: Vec<Summary> = Vec::new();
        for s in raw.summary {
            let span = s.span();
            let s = s.into_inner();
            if !valid_name(s.name.get_ref()) {
                return lines.err(s.name.span(), format!("summary name '{}' must be letters, digits, '_' or '-' (at most 64)", s.name.get_ref()));
            }
            if summaries.iter().any(|x| &x.name == s.name.get_ref()) {
                return lines.err(s.name.span(), format!("summary '{}' is declared twice", s.name.get_ref()));
            }
            let Some(fi) = feeds.iter().position(|f| &f.name == s.feed.get_ref()) else {
                return lines.err(s.feed.span(), format!("summary '{}' names an unknown feed '{}'", s.name.get_ref(), s.feed.get_ref()));
            };
            let summary = compile_summary(&lines, span, s, fi, &mut feeds[fi])?;
            feeds[fi].summaries.push(summaries.len());
            summaries.push(summary);
        }
        if summaries.is_empty() {
            return Err(RulesError { line: 0, message: "the rules declare no [[summary]]".into() });
        }
        Ok(Rules { feeds, summaries, text: text.to_string() })
    }

    pub fn feed(&self, name: &str) -> Option<usize> {
        self.feeds.iter().position(|f| f.name == name)
    }

    pub fn summary(&self, name: &str) -> Option<usize> {
        self.summaries.iter().position(|s| s.name == name)
    }
}

fn compile_feed(lines: &Lines, name: Spanned<String>, feed: Spanned<RawFeed>) -> Result<Feed, RulesError> {
    let feed_span = feed.span();
    let feed = feed.into_inner();
    let name_span = name.span();
    let name = name.into_inner();
    if !valid_name(&name) {
        return lines.err(name_span, format!("feed name '{name}' must be letters, digits, '_' or '-' (at most 64)"));
    }
    let format = match feed.format.get_ref().as_str() {
        "csv" => Format::Csv,
        "jsonl" => Format::Jsonl,
        other => return lines.err(feed.format.span(), format!("feed '{name}': unknown format '{other}' (csv or jsonl)")),
    };
    let drop_when_full = match feed.when_full.as_ref().map(|w| w.get_ref().as_str()) {
        None | Some("wait") => false,
        Some("drop") => true,
        Some(other) => return lines.err(feed.when_full.as_ref().unwrap().span(), format!("feed '{name}': when_full '{other}' is \"wait\" or \"drop\"")),
    };
    let max_line_bytes = match &feed.max_line_bytes {
        None => DEFAULT_MAX_LINE_BYTES,
        Some(m) if *m.get_ref() >= 16 && *m.get_ref() <= 64 * 1024 * 1024 => *m.get_ref() as usize,
        Some(m) => return lines.err(m.span(), format!("feed '{name}': max_line_bytes must be 16..=67108864")),
    };
    let mut fields = Vec::new();
    let mut paths = Vec::new();
    match format {
        Format::Csv => {
            let Some(cols) = &feed.columns else {
                return lines.err(feed_span, format!("feed '{name}': a csv feed needs `columns = [...]` (a header line equal to them is skipped)"));
            };
            if feed.fields.is_some() {
                return lines.err(feed_span, format!("feed '{name}': a csv feed names its fields with `columns`, not `fields`"));
            }
            for c in cols.get_ref() {
                if !valid_name(c) {
                    return lines.err(cols.span(), format!("feed '{name}': column name '{c}' must be letters, digits, '_' or '-'"));
                }
                if fields.contains(c) {
                    return lines.err(cols.span(), format!("feed '{name}': column '{c}' appears twice"));
                }
                fields.push(c.clone());
            }
        }
        Format::Jsonl => {
            if let Some(c) = &feed.columns {
                return lines.err(c.span(), format!("feed '{name}': a jsonl feed names its fields with `fields = {{ name = \"$.path\" }}`, not `columns`"));
            }
            for (f, p) in feed.fields.iter().flatten() {
                if !valid_name(f.get_ref()) {
                    return lines.err(f.span(), format!("feed '{name}': field name '{}' must be letters, digits, '_' or '-'", f.get_ref()));
                }
                let path = JsonPath::parse(p.get_ref()).map_err(|e| RulesError { line: lines.line(p.span().start), message: format!("feed '{name}': field '{}': {e}", f.get_ref()) })?;
                fields.push(f.get_ref().clone());
                paths.push(path);
            }
        }
    }
    if fields.is_empty() {
        return lines.err(feed_span, format!("feed '{name}' declares no fields"));
    }
    if fields.len() > MAX_FIELDS {
        return lines.err(feed_span, format!("feed '{name}': more than {MAX_FIELDS} fields"));
    }
    let time_span = feed.time.span();
    let t = feed.time.into_inner();
    let time_format = match (&t.format, &t.unit) {
        (Some(f), None) => Some(TimeFormat::parse(f.get_ref()).map_err(|e| RulesError { line: lines.line(f.span().start), message: format!("feed '{name}': {e}") })?),
        (Some(f), Some(_)) => return lines.err(f.span(), format!("feed '{name}': time has a `format` or a `unit`, not both")),
        (None, _) => None,
    };
    let unit = match t.unit.as_ref().map(|u| u.get_ref().as_str()) {
        None if time_format.is_some() => Unit::Ms,
        Some("s") => Unit::S,
        Some("ms") => Unit::Ms,
        Some("us") => Unit::Us,
        Some(other) => return lines.err(t.unit.as_ref().unwrap().span(), format!("feed '{name}': unknown time unit '{other}' (s, ms or us)")),
        None => return lines.err(time_span, format!("feed '{name}': time needs a unit (s, ms or us) or a strftime `format`")),
    };
    let time = match (&format, &t.field, &t.path) {
        (Format::Csv, Some(f), None) => match fields.iter().position(|c| c == f.get_ref()) {
            Some(i) => TimeSource::Column(i),
            None => return lines.err(f.span(), format!("feed '{name}': time field '{}' is not a column", f.get_ref())),
        },
        (Format::Jsonl, None, Some(p)) => {
            let path = JsonPath::parse(p.get_ref()).map_err(|e| RulesError { line: lines.line(p.span().start), message: format!("feed '{name}': time path: {e}") })?;
            if path.fans_out() {
                return lines.err(p.span(), format!("feed '{name}': the time path cannot fan out ([*])"));
            }
            TimeSource::Path(path)
        }
        (Format::Csv, _, _) => return lines.err(time_span, format!("feed '{name}': a csv feed's time is `{{ field = \"column\", unit = ... }}`")),
        (Format::Jsonl, _, _) => return lines.err(time_span, format!("feed '{name}': a jsonl feed's time is `{{ path = \"$.x\", unit = ... }}`")),
    };
    let header = fields.join(",");
    let numeric = vec![false; fields.len()];
    let path_keys = match &time {
        TimeSource::Path(tp) => crate::json::path_keys(&paths, tp),
        TimeSource::Column(_) => Vec::new(),
    };
    Ok(Feed { name, format, fields, paths, time, unit, time_format, drop_when_full, numeric, max_line_bytes, summaries: Vec::new(), header, path_keys })
}

fn compile_summary(lines: &Lines, span: std::ops::Range<usize>, s: RawSummary, fi: usize, feed: &mut Feed) -> Result<Summary, RulesError> {
    let name = s.name.get_ref().clone();
    let mut uses = Vec::new();
    let filter = match &s.filter {
        None => None,
        Some(w) => {
            let e = Expr::parse(w.get_ref(), |f| feed.field(f)).map_err(|e| RulesError { line: lines.line(w.span().start), message: format!("summary '{name}': where: {e}") })?;
            e.fields(&mut uses);
            Some(e)
        }
    };
    let mut dims = Vec::new();
    let mut dim_names = Vec::new();
    if let Some(d) = &s.dimensions {
        if d.get_ref().len() > MAX_DIMENSIONS {
            return lines.err(d.span(), format!("summary '{name}': more than {MAX_DIMENSIONS} dimensions"));
        }
        for dim in d.get_ref() {
            let Some(i) = feed.field(dim) else {
                return lines.err(d.span(), format!("summary '{name}': dimension '{dim}' is not a field of feed '{}'", feed.name));
            };
            if dims.contains(&i) {
                return lines.err(d.span(), format!("summary '{name}': dimension '{dim}' appears twice"));
            }
            dims.push(i);
            dim_names.push(dim.clone());
            uses.push(i);
        }
    }
    let bucket = match s.bucket.as_ref().map(|b| b.get_ref().as_str()) {
        None | Some("none") => Bucket::None,
        Some("1m") => Bucket::Minute,
        Some("1h") => Bucket::Hour,
        Some("1d") => Bucket::Day,
        Some(other) => return lines.err(s.bucket.as_ref().unwrap().span(), format!("summary '{name}': unknown bucket '{other}' (1m, 1h, 1d or none)")),
    };
    let ttl_ms = match &s.ttl {
        None => None,
        Some(t) => match parse_duration_ms(t.get_ref()) {
            Some(ms) => Some(ms),
            None => return lines.err(t.span(), format!("summary '{name}': bad ttl '{}' (a number and s, m, h, d or w: \"90d\")", t.get_ref())),
        },
    };
    let stream = match s.stream {
        None => None,
        Some(st) => Some(compile_stream(lines, &name, st, feed, &mut uses)?),
    };
    let mut metrics = Vec::new();
    let no_metrics = BTreeMap::new();
    let raw_metrics = match &s.metrics {
        Some(m) if m.get_ref().is_empty() && stream.is_none() => return lines.err(m.span(), format!("summary '{name}' has no metrics")),
        Some(m) if m.get_ref().len() > MAX_METRICS => return lines.err(m.span(), format!("summary '{name}': more than {MAX_METRICS} metrics")),
        Some(m) => m.get_ref(),
        None if stream.is_some() => &no_metrics,
        None => return lines.err(span, format!("summary '{name}' needs `metrics = {{ ... }}` or a `stream = {{ ... }}`")),
    };
    for (m, def) in raw_metrics {
        let mname = m.get_ref();
        if !valid_name(mname) {
            return lines.err(m.span(), format!("summary '{name}': metric name '{mname}' must be letters, digits, '_' or '-'"));
        }
        let at = def.span();
        let text = def.get_ref().trim();
        let mut hll = HllOptions::default();
        let kind = if text == "count" {
            MetricKind::Count
        } else {
            let Some((func, rest)) = text.split_once('(') else {
                return lines.err(at, format!("summary '{name}': metric '{mname}': '{text}' is not count, sum(f), min(f), max(f), last(f), hll(f) or distinct(f)"));
            };
            let Some(arg) = rest.strip_suffix(')') else {
                return lines.err(at, format!("summary '{name}': metric '{mname}': missing ')' in '{text}'"));
            };
            let mut args = arg.split(',').map(str::trim);
            let arg = args.next().unwrap_or("");
            let options: Vec<&str> = args.collect();
            if !options.is_empty() && func.trim() != "hll" {
                return lines.err(at, format!("summary '{name}': metric '{mname}': only hll(...) takes options, in '{text}'"));
            }
            hll = hll_options(&options).map_err(|e| RulesError { line: lines.line(at.start), message: format!("summary '{name}': metric '{mname}': {e}") })?;
            let Some(f) = feed.field(arg) else {
                return lines.err(at, format!("summary '{name}': metric '{mname}': '{arg}' is not a field of feed '{}'", feed.name));
            };
            uses.push(f);
            match func.trim() {
                "sum" => MetricKind::Sum(f),
                "min" => MetricKind::Min(f),
                "max" => MetricKind::Max(f),
                "last" => MetricKind::Last(f),
                "hll" => MetricKind::Hll(f),
                "distinct" => MetricKind::Distinct(f),
                other => return lines.err(at, format!("summary '{name}': metric '{mname}': unknown function '{other}' (sum, min, max, last, hll, distinct)")),
            }
        };
        if let MetricKind::Sum(f) | MetricKind::Min(f) | MetricKind::Max(f) = kind {
            feed.numeric[f] = true;
        }
        metrics.push(Metric { name: mname.clone(), kind, hll });
    }
    uses.sort_unstable();
    uses.dedup();
    Ok(Summary { name, feed: fi, filter, dims, dim_names, bucket, metrics, ttl_ms, uses, stream })
}

/// Checks a summary's `stream = { key = "...{field}...", fields = [...], maxlen = N }`.
fn compile_stream(lines: &Lines, name: &str, st: Spanned<RawStream>, feed: &Feed, uses: &mut Vec<usize>) -> Result<StreamRule, RulesError> {
    let st = st.into_inner();
    let template = st.key.get_ref();
    let at = st.key.span();
    if template.is_empty() || template.len() > MAX_STREAM_KEY_BYTES {
        return lines.err(at, format!("summary '{name}': a stream key is 1 to {MAX_STREAM_KEY_BYTES} bytes"));
    }
    let mut key = Vec::new();
    let mut rest = template.as_str();
    while !rest.is_empty() {
        match rest.find(['{', '}']) {
            None => {
                key.push(TemplatePart::Text(rest.to_string()));
                break;
            }
            Some(i) if rest.as_bytes()[i] == b'}' => return lines.err(at, format!("summary '{name}': stream key '{template}': '}}' without '{{'")),
            Some(i) => {
                if i > 0 {
                    key.push(TemplatePart::Text(rest[..i].to_string()));
                }
                let Some(close) = rest[i..].find('}') else {
                    return lines.err(at, format!("summary '{name}': stream key '{template}': '{{' without '}}'"));
                };
                let field = &rest[i + 1..i + close];
                let Some(f) = feed.field(field) else {
                    return lines.err(at, format!("summary '{name}': stream key '{template}': '{field}' is not a field of feed '{}'", feed.name));
                };
                uses.push(f);
                key.push(TemplatePart::Field(f));
                rest = &rest[i + close + 1..];
            }
        }
    }
    if st.fields.get_ref().is_empty() {
        return lines.err(st.fields.span(), format!("summary '{name}': a stream needs at least one field"));
    }
    let mut fields = Vec::new();
    for f in st.fields.get_ref() {
        let Some(i) = feed.field(f) else {
            return lines.err(st.fields.span(), format!("summary '{name}': stream field '{f}' is not a field of feed '{}'", feed.name));
        };
        if fields.contains(&i) {
            return lines.err(st.fields.span(), format!("summary '{name}': stream field '{f}' appears twice"));
        }
        uses.push(i);
        fields.push(i);
    }
    let maxlen = match &st.maxlen {
        None => None,
        Some(m) if *m.get_ref() >= 1 => Some(*m.get_ref() as u64),
        Some(m) => return lines.err(m.span(), format!("summary '{name}': stream maxlen must be at least 1")),
    };
    Ok(StreamRule { key, fields, field_names: st.fields.into_inner(), maxlen })
}

/// `log2m=14, regwidth=5, expthresh=-1, sparseon=1` (each at most once), checked as
/// postgresql-hll checks them; the server's `hll-max-log2m` is checked when a sketch is made.
fn hll_options(options: &[&str]) -> Result<HllOptions, String> {
    let mut o = HllOptions::default();
    for opt in options {
        let Some((k, v)) = opt.split_once('=') else {
            return Err(format!("hll option '{opt}' is not name=value (log2m, regwidth, expthresh, sparseon)"));
        };
        let (k, v) = (k.trim(), v.trim());
        let Ok(n) = v.parse::<i64>() else { return Err(format!("hll option {k}: '{v}' is not an integer")) };
        let slot = match k {
            "log2m" => &mut o.log2m,
            "regwidth" => &mut o.regwidth,
            "expthresh" => &mut o.expthresh,
            "sparseon" => {
                if o.sparseon.is_some() || !(0..=1).contains(&n) {
                    return Err(format!("hll option sparseon is given once, 0 or 1 (got '{v}')"));
                }
                o.sparseon = Some(n == 1);
                continue;
            }
            other => return Err(format!("unknown hll option '{other}' (log2m, regwidth, expthresh, sparseon)")),
        };
        if slot.is_some() {
            return Err(format!("hll option {k} is given twice"));
        }
        *slot = Some(n);
    }
    // The ranges as postgresql-hll states them, whatever the other values will be.
    abacus_hll::Params::new(o.log2m.unwrap_or(11), o.regwidth.unwrap_or(5), o.expthresh.unwrap_or(-1), o.sparseon.unwrap_or(true)).map_err(|e| e.to_string())?;
    Ok(o)
}
