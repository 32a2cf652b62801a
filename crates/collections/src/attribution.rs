//! Multi-touch attribution over event streams: which channels get the credit for each
//! conversion, under the five classic models, computed where the streams are.
//!
//! Each stream is one user's events in ID order (the ID's milliseconds are the event's time).
//! An entry whose CONVERSION field holds the conversion value is a conversion (its VALUE
//! field, if asked for, is its value: a number, 0 when missing or not a number); any other
//! entry with the CHANNEL field is a touch of that channel. An entry without the CONVERSION
//! field, or a non-conversion without the CHANNEL field, is skipped (and counted).
//!
//! A conversion's path is the touches after the user's previous conversion and at most
//! LOOKBACK before it (`t >= T - lookback`; entries of the same millisecond count in ID
//! order). The models share one conversion (and its value) among the path's touches:
//!
//! - first: all to the first touch; last: all to the last;
//! - linear: equally;
//! - position (U-shaped, 40/20/40): 40% each to the first and last touch and the remaining
//!   20% equally among the ones between (one touch: all of it; two: half each);
//! - decay: in proportion to 2^(-(T - t) / HALFLIFE), so a touch one half-life older than
//!   another gets half its credit.
//!
//! A touch's credit goes to its channel, summed per model and channel; a conversion without
//! touches in its window is counted as unattributed. Everything is additive per user, so
//! shards compute their users' sums independently and [`Attribution::merge`] adds them.

use std::collections::HashMap;

use crate::stream::{Stream, StreamId, Val};
use abacus_int::{wire, Dec, Number};

/// An attribution model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    First,
    Last,
    Linear,
    Position,
    Decay,
}

impl Model {
    pub const ALL: [Model; 5] = [Model::First, Model::Last, Model::Linear, Model::Position, Model::Decay];

    pub fn name(self) -> &'static str {
        match self {
            Model::First => "first",
            Model::Last => "last",
            Model::Linear => "linear",
            Model::Position => "position",
            Model::Decay => "decay",
        }
    }

    /// The model named `s` (case-insensitive).
    pub fn parse(s: &[u8]) -> Option<Model> {
        Model::ALL.into_iter().find(|m| m.name().as_bytes().eq_ignore_ascii_case(s))
    }

    /// Each touch's share of one conversion (they sum to 1), given the touches' times and
    /// the conversion's, appended to `out`.
    fn shares(self, times: &[u64], at: u64, halflife_ms: f64, out: &mut Vec<f64>) {
        let n = times.len();
        out.clear();
        match self {
            Model::First => out.extend((0..n).map(|i| if i == 0 { 1.0 } else { 0.0 })),
            Model::Last => out.extend((0..n).map(|i| if i + 1 == n { 1.0 } else { 0.0 })),
            Model::Linear => out.extend((0..n).map(|_| 1.0 / n as f64)),
            Model::Position => match n {
                1 => out.push(1.0),
                2 => out.extend([0.5, 0.5]),
                _ => out.extend((0..n).map(|i| if i == 0 || i + 1 == n { 0.4 } else { 0.2 / (n - 2) as f64 })),
            },
            Model::Decay => {
                out.extend(times.iter().map(|&t| (-((at - t.min(at)) as f64) / halflife_ms).exp2()));
                let sum: f64 = out.iter().sum();
                if sum > 0.0 {
                    out.iter_mut().for_each(|w| *w /= sum);
                } else {
                    // Every weight underflowed (touches thousands of half-lives old): equal
                    // shares rather than none.
                    out.iter_mut().for_each(|w| *w = 1.0 / n as f64);
                }
            }
        }
    }
}

/// What to attribute.
#[derive(Clone, Debug)]
pub struct Query {
    pub channel: Vec<u8>,
    pub conversion_field: Vec<u8>,
    pub conversion_value: Vec<u8>,
    pub value_field: Option<Vec<u8>>,
    pub models: Vec<Model>,
    pub halflife_ms: u64,
    pub lookback_ms: u64,
}

/// One conversion's path and credits (the per-user form).
#[derive(Clone, Debug, PartialEq)]
pub struct Path {
    pub conversion: StreamId,
    pub value: Number,
    /// The touches of its window, in order: ID and channel.
    pub touches: Vec<(StreamId, Vec<u8>)>,
    /// Per model (the query's order), each touch's share.
    pub shares: Vec<Vec<f64>>,
}

/// A channel's credit under one model: the conversions (fractional shares add up) and the
/// value. Values credited whole (a share of exactly 1: first and last touch, any model over a
/// single touch) add exactly (`Number`: `20081.07`, not `20081.069999999996`); a fractional
/// share's value is a double, and a credit with any is a double.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Credit {
    pub conversions: f64,
    whole: Number,
    part: f64,
    fractional: bool,
}

impl Default for Credit {
    fn default() -> Credit {
        Credit { conversions: 0.0, whole: Number::ZERO, part: 0.0, fractional: false }
    }
}

impl Credit {
    fn add(&mut self, share: f64, value: Number) {
        self.conversions += share;
        if share == 0.0 {
            // First and last touch give the other touches nothing: not a fraction.
        } else if share == 1.0 {
            self.whole = self.whole.add(value).unwrap_or(Number::Float(f64::INFINITY));
        } else {
            self.part += share * value.to_f64();
            self.fractional = true;
        }
    }

    fn merge(&mut self, o: &Credit) {
        self.conversions += o.conversions;
        self.whole = self.whole.add(o.whole).unwrap_or(Number::Float(f64::INFINITY));
        self.part += o.part;
        self.fractional |= o.fractional;
    }

    /// The credited value: exact when every part of it was credited whole.
    pub fn value(&self) -> Number {
        if self.fractional {
            Number::Float(self.whole.to_f64() + self.part)
        } else {
            self.whole
        }
    }
}

/// Sums over users: counts, and per model and channel the credited conversions and value.
#[derive(Clone, Debug, Default)]
pub struct Attribution {
    pub users: u64,
    pub events: u64,
    pub conversions: u64,
    pub unattributed: u64,
    pub skipped: u64,
    /// Channel names, by their index.
    pub channels: Vec<Vec<u8>>,
    index: HashMap<Vec<u8>, u32, foldhash::fast::FixedState>,
    /// Per model (the query's order), per channel index.
    pub credits: Vec<Vec<Credit>>,
    // Scratch buffers kept between users.
    times: Vec<u64>,
    ids: Vec<StreamId>,
    touch_channels: Vec<u32>,
    share: Vec<f64>,
}

impl Attribution {
    pub fn new(q: &Query) -> Attribution {
        Attribution { credits: vec![Vec::new(); q.models.len()], ..Default::default() }
    }

    fn channel_index(&mut self, v: Val<'_>) -> u32 {
        let found = match v {
            Val::Str(s) => self.index.get(s).copied(),
            Val::Int(_) => self.index.get(&v.to_vec()[..]).copied(),
        };
        if let Some(i) = found {
            return i;
        }
        let name = v.to_vec();
        let i = self.channels.len() as u32;
        self.index.insert(name.clone(), i);
        self.channels.push(name);
        for c in &mut self.credits {
            c.push(Credit::default());
        }
        i
    }

    /// Adds one user's stream; with `paths`, also records each conversion's path.
    pub fn add_stream(&mut self, s: &Stream, q: &Query, mut paths: Option<&mut Vec<Path>>) {
        self.users += 1;
        self.times.clear();
        self.ids.clear();
        self.touch_channels.clear();
        // Fields asked for twice (CHANNEL and CONVERSION naming one field) share a slot.
        let value_field: &[u8] = q.value_field.as_deref().unwrap_or(b"");
        let wanted: [&[u8]; 3] = [&q.conversion_field, &q.channel, value_field];
        let channel_is_conv = q.channel == q.conversion_field;
        let value_slot = if q.value_field.is_none() {
            None
        } else if value_field == &q.conversion_field[..] {
            Some(0)
        } else if value_field == &q.channel[..] {
            Some(1)
        } else {
            Some(2)
        };
        let mut events = 0u64;
        // Channel values are mostly the same few strings of a block's dictionary: a cache
        // by address saves hashing them.
        let mut cache: [(usize, usize, u32); 8] = [(0, 0, 0); 8];
        s.scan_fields(wanted, |id, out| {
            events += 1;
            let Some(conv) = out[0] else {
                self.skipped += 1;
                return;
            };
            let channel = if channel_is_conv { out[0] } else { out[1] };
            if !conv.is(&q.conversion_value) {
                match channel {
                    Some(c) => {
                        let i = match c {
                            Val::Str(bytes) => {
                                let key = (bytes.as_ptr() as usize, bytes.len());
                                let slot = (key.0 >> 3) % cache.len();
                                if cache[slot].0 == key.0 && cache[slot].1 == key.1 && key.0 != 0 {
                                    cache[slot].2
                                } else {
                                    let i = self.channel_index(c);
                                    cache[slot] = (key.0, key.1, i);
                                    i
                                }
                            }
                            Val::Int(_) => self.channel_index(c),
                        };
                        self.times.push(id.ms);
                        self.ids.push(id);
                        self.touch_channels.push(i);
                    }
                    None => self.skipped += 1,
                }
                return;
            }
            let value = value_slot.and_then(|k| out[k]).map_or(Number::ZERO, number);
            self.conversion(id, value, q, None);
        });
        self.events += events;
        if let Some(paths) = paths.as_deref_mut() {
            // The per-user form: the paths again, one conversion at a time (one user's
            // stream, so the second pass is cheap).
            self.record_paths(s, q, paths);
        }
    }

    /// The paths of one user's conversions (the KEY form), recomputed without adding to the
    /// sums.
    fn record_paths(&mut self, s: &Stream, q: &Query, paths: &mut Vec<Path>) {
        let mut scratch = Attribution::new(q);
        scratch.channels = self.channels.clone();
        scratch.index = self.index.clone();
        scratch.credits = vec![vec![Credit::default(); self.channels.len()]; q.models.len()];
        let value_field: &[u8] = q.value_field.as_deref().unwrap_or(b"");
        let wanted: [&[u8]; 3] = [&q.conversion_field, &q.channel, value_field];
        let channel_is_conv = q.channel == q.conversion_field;
        s.scan_fields(wanted, |id, out| {
            let Some(conv) = out[0] else { return };
            let channel = if channel_is_conv { out[0] } else { out[1] };
            if !conv.is(&q.conversion_value) {
                if let Some(c) = channel {
                    let i = scratch.channel_index(c);
                    scratch.times.push(id.ms);
                    scratch.ids.push(id);
                    scratch.touch_channels.push(i);
                }
                return;
            }
            let value = if q.value_field.is_none() {
                Number::ZERO
            } else if value_field == &q.conversion_field[..] {
                out[0].map_or(Number::ZERO, number)
            } else if value_field == &q.channel[..] {
                out[1].map_or(Number::ZERO, number)
            } else {
                out[2].map_or(Number::ZERO, number)
            };
            scratch.conversion(id, value, q, Some(paths));
        });
    }

    /// A conversion at `id`: shares the touches of its window, then starts a new path.
    fn conversion(&mut self, id: StreamId, value: Number, q: &Query, paths: Option<&mut Vec<Path>>) {
        self.conversions += 1;
        let at = id.ms;
        let from = at.saturating_sub(q.lookback_ms);
        let start = self.times.partition_point(|&t| t < from);
        let n = self.times.len() - start;
        let mut path = paths.as_ref().map(|_| Path {
            conversion: id,
            value,
            touches: (start..self.times.len()).map(|i| (self.ids[i], self.channels[self.touch_channels[i] as usize].clone())).collect(),
            shares: Vec::new(),
        });
        if n == 0 {
            self.unattributed += 1;
        } else {
            let halflife = q.halflife_ms.max(1) as f64;
            let mut share = std::mem::take(&mut self.share);
            for (m, model) in q.models.iter().enumerate() {
                model.shares(&self.times[start..], at, halflife, &mut share);
                for (k, &w) in share.iter().enumerate() {
                    let c = self.touch_channels[start + k] as usize;
                    self.credits[m][c].add(w, value);
                }
                if let Some(p) = &mut path {
                    p.shares.push(share.clone());
                }
            }
            self.share = share;
        }
        if let (Some(paths), Some(p)) = (paths, path) {
            paths.push(p);
        }
        self.times.clear();
        self.ids.clear();
        self.touch_channels.clear();
    }

    /// Adds another shard's sums.
    pub fn merge(&mut self, other: &Attribution) {
        self.users += other.users;
        self.events += other.events;
        self.conversions += other.conversions;
        self.unattributed += other.unattributed;
        self.skipped += other.skipped;
        for (j, name) in other.channels.iter().enumerate() {
            let i = self.channel_index(Val::Str(name)) as usize;
            for (m, credits) in self.credits.iter_mut().enumerate() {
                if let Some(o) = other.credits.get(m).and_then(|o| o.get(j)) {
                    credits[i].merge(o);
                }
            }
        }
    }

    /// Per model (the query's order), the channels in name order with their credited
    /// conversions and value.
    pub fn by_model(&self) -> Vec<Vec<(&[u8], f64, Number)>> {
        let mut order: Vec<usize> = (0..self.channels.len()).collect();
        order.sort_by(|&a, &b| self.channels[a].cmp(&self.channels[b]));
        self.credits.iter().map(|c| order.iter().map(|&i| (&self.channels[i][..], c[i].conversions, c[i].value())).collect()).collect()
    }
}

/// The sums on the wire between cluster nodes (the server's `fanout.rs`): what
/// [`Attribution::merge`] adds, exactly (`abacus_int::wire`).
impl Attribution {
    pub fn to_wire(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for n in [self.users, self.events, self.conversions, self.unattributed, self.skipped] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        wire::put_u32(&mut out, self.channels.len());
        for c in &self.channels {
            wire::put_bytes(&mut out, c);
        }
        wire::put_u32(&mut out, self.credits.len());
        for model in &self.credits {
            for c in model {
                out.extend_from_slice(&c.conversions.to_bits().to_le_bytes());
                wire::put_number(&mut out, c.whole);
                out.extend_from_slice(&c.part.to_bits().to_le_bytes());
                out.push(u8::from(c.fractional));
            }
        }
        out
    }

    /// [`Attribution::to_wire`]'s bytes back, for query `q`; None if they are malformed.
    pub fn from_wire(q: &Query, b: &[u8]) -> Option<Attribution> {
        let mut r = wire::Reader(b);
        let mut a = Attribution::new(q);
        a.users = r.u64()?;
        a.events = r.u64()?;
        a.conversions = r.u64()?;
        a.unattributed = r.u64()?;
        a.skipped = r.u64()?;
        let n = r.len()?;
        for _ in 0..n {
            let name = r.bytes()?;
            if a.channel_index(Val::Str(&name)) as usize != a.channels.len() - 1 {
                return None;
            }
        }
        if r.len()? != a.credits.len() {
            return None;
        }
        for model in &mut a.credits {
            for c in model.iter_mut() {
                *c = Credit { conversions: r.f64()?, whole: r.number()?, part: r.f64()?, fractional: r.byte()? == 1 };
            }
        }
        r.is_empty().then_some(a)
    }
}

/// A VALUE field as a number (an exact decimal where it is one): 0 when it is not one.
fn number(v: Val<'_>) -> Number {
    match v {
        Val::Int(i) => Dec::new(i128::from(i), 0).map_or(Number::ZERO, Number::Dec),
        Val::Str(s) => std::str::from_utf8(s).ok().and_then(|s| Number::parse(s.trim().as_bytes())).unwrap_or(Number::ZERO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::StreamLimits;

    fn stream(events: &[(u64, &[&str])]) -> Stream {
        let mut s = Stream::new();
        for (i, (ms, fields)) in events.iter().enumerate() {
            let parts: Vec<&[u8]> = fields.iter().map(|f| f.as_bytes()).collect();
            s.append(StreamId::new(*ms, i as u64), &parts, &StreamLimits::REDIS_DEFAULT).unwrap();
        }
        s
    }

    fn query(models: &[Model]) -> Query {
        Query {
            channel: b"source".to_vec(),
            conversion_field: b"event".to_vec(),
            conversion_value: b"purchase".to_vec(),
            value_field: Some(b"amount".to_vec()),
            models: models.to_vec(),
            halflife_ms: 1000,
            lookback_ms: 10_000,
        }
    }

    #[test]
    fn the_five_models_on_one_path() {
        let s = stream(&[
            (1000, &["source", "a", "event", "click"]),
            (2000, &["source", "b", "event", "visit"]),
            (3000, &["source", "c", "event", "click"]),
            (4000, &["event", "purchase", "amount", "100"]),
        ]);
        let q = query(&Model::ALL);
        let mut a = Attribution::new(&q);
        let mut paths = Vec::new();
        a.add_stream(&s, &q, Some(&mut paths));
        assert_eq!((a.users, a.events, a.conversions, a.unattributed, a.skipped), (1, 4, 1, 0, 0));
        let m = a.by_model();
        let credit = |model: usize, ch: &str| m[model].iter().find(|x| x.0 == ch.as_bytes()).map(|x| x.1).unwrap();
        assert_eq!((credit(0, "a"), credit(0, "b"), credit(0, "c")), (1.0, 0.0, 0.0));
        assert_eq!((credit(1, "a"), credit(1, "c")), (0.0, 1.0));
        assert!((credit(2, "b") - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!((credit(3, "a"), credit(3, "b"), credit(3, "c")), (0.4, 0.2, 0.4));
        // Decay: weights 1/8, 1/4, 1/2 of a half-life each.
        assert!((credit(4, "c") - 0.5 / 0.875).abs() < 1e-12);
        assert!((m[4].iter().find(|x| x.0 == b"c").unwrap().2.to_f64() - 100.0 * 0.5 / 0.875).abs() < 1e-9);
        // First touch credits the whole value: exact.
        assert_eq!(m[0].iter().find(|x| x.0 == b"a").unwrap().2.to_string(), "100");
        assert_eq!(paths.len(), 1);
        assert_eq!(paths[0].touches.len(), 3);
    }

    #[test]
    fn windows_previous_conversions_and_skips() {
        let s = stream(&[
            (1, &["source", "old", "event", "click"]),
            (20_000, &["source", "a", "event", "click"]),
            (21_000, &["event", "purchase"]),
            (21_000, &["event", "purchase", "amount", "x"]),
            (22_000, &["source", "b"]),
            (22_500, &["nothing", "here"]),
            (23_000, &["source", "b", "event", "click"]),
            (23_000, &["event", "purchase", "amount", "7"]),
        ]);
        let q = query(&[Model::Linear]);
        let mut a = Attribution::new(&q);
        a.add_stream(&s, &q, None);
        // "old" is outside the 10 s window; the second purchase has no touch after the first;
        // two entries lack the conversion field.
        assert_eq!((a.conversions, a.unattributed, a.skipped), (3, 1, 2));
        let m = a.by_model();
        let shown: Vec<(&[u8], f64, String)> = m[0].iter().map(|&(c, n, v)| (c, n, v.to_string())).collect();
        assert_eq!(shown, vec![(&b"a"[..], 1.0, "0".to_string()), (&b"b"[..], 1.0, "7".to_string()), (&b"old"[..], 0.0, "0".to_string())]);
    }

    #[test]
    fn whole_credits_sum_exactly() {
        let amounts = ["0.1", "0.2", "12000.3", "55.02", "19.99", "0.01"];
        let mut events: Vec<(u64, Vec<String>)> = Vec::new();
        for (k, a) in amounts.iter().enumerate() {
            let t = 1000 * (2 * k as u64 + 1);
            events.push((t, vec!["source".into(), "ads".into(), "event".into(), "click".into()]));
            events.push((t + 1, vec!["event".into(), "purchase".into(), "amount".into(), a.to_string()]));
        }
        let owned: Vec<(u64, Vec<&str>)> = events.iter().map(|(t, f)| (*t, f.iter().map(String::as_str).collect())).collect();
        let refs: Vec<(u64, &[&str])> = owned.iter().map(|(t, f)| (*t, &f[..])).collect();
        let s = stream(&refs);
        let q = query(&[Model::First, Model::Linear]);
        let mut a = Attribution::new(&q);
        a.add_stream(&s, &q, None);
        let m = a.by_model();
        // 12075.62 as doubles is 12075.619999999999; one touch per path: whole shares.
        assert_eq!(m[0][0].2.to_string(), "12075.62");
        assert_eq!(m[1][0].2.to_string(), "12075.62");
    }
}
