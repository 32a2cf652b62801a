//! Geohash arithmetic for the GEO family, bit for bit as Redis 7.0 does it.
//!
//! Why a faithful re-derivation rather than any geohash library: a GEO set is a sorted set
//! whose scores are Redis's 52-bit interleaved geohashes, and clients see those scores
//! (ZSCORE, ZRANGE WITHSCORES), the decoded positions (GEOPOS prints 17 decimals), the
//! distances (4 decimals) and, for searches, which points were found and in which order. Redis
//! only looks in 9 geohash cells around the centre, so a point inside the radius but outside
//! those cells is *not* returned, and the unsorted order is the order of those 9 score ranges.
//! Matching Redis therefore means reproducing its choices: the step estimate, the bounding
//! box, the neighbour arithmetic, which neighbours are dropped, the haversine with Redis's
//! Earth radius and operation order (same libm calls, so the same bits), and the clamping of
//! decoded positions. Every function here names the Redis function it mirrors.
//!
//! Conventions (Redis's): longitudes are in [-180, 180], latitudes in
//! [-85.05112878, 85.05112878] (the Web-Mercator limits); a hash at `step` has `2 * step`
//! bits, longitude bits at odd positions and latitude bits at even ones; scores are the hash at
//! step 26 (52 bits), which a double holds exactly. GEOHASH strings re-encode the decoded
//! position with the standard latitude range [-90, 90], as Redis does.
//!
//! No I/O and no parsing: the server validates arguments and shapes replies.

/// Redis's `GEO_STEP_MAX`: scores are hashes at this step (52 bits).
pub const STEP_MAX: u8 = 26;
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;

/// Redis's `EARTH_RADIUS_IN_METERS` (the quadratic mean radius of WGS-84).
pub const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
/// Redis's `D_R` (`M_PI / 180.0`), used by `deg_rad` and `rad_deg`.
const D_R: f64 = std::f64::consts::PI / 180.0;

#[inline]
fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

#[inline]
fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

/// A geohash of `2 * step` bits (Redis's `GeoHashBits`). `step == 0` is Redis's "zero" hash,
/// a neighbour that was excluded from a search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct HashBits {
    pub bits: u64,
    pub step: u8,
}

impl HashBits {
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash left-aligned to 52 bits (Redis's `geohashAlign52Bits`).
    pub fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }

    /// The score range `[min, max)` holding every point of this cell
    /// (Redis's `scoresOfGeoHashBox`).
    pub fn score_range(&self) -> (f64, f64) {
        let min = self.align52();
        let max = HashBits { bits: self.bits.wrapping_add(1), step: self.step }.align52();
        (min as f64, max as f64)
    }
}

/// A coordinate range (Redis's `GeoHashRange`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoordRange {
    pub min: f64,
    pub max: f64,
}

/// The ranges scores are encoded in.
pub const WGS84_LON: CoordRange = CoordRange { min: LON_MIN, max: LON_MAX };
pub const WGS84_LAT: CoordRange = CoordRange { min: LAT_MIN, max: LAT_MAX };
/// The latitude range of standard geohash strings (GEOHASH).
pub const STANDARD_LAT: CoordRange = CoordRange { min: -90.0, max: 90.0 };

/// A cell's extent (Redis's `GeoHashArea`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub lon: CoordRange,
    pub lat: CoordRange,
}

/// Spreads the low 32 bits of `x` to the even positions and those of `y` to the odd ones
/// (Redis's `interleave64`: latitude first, so latitude bits are even).
#[inline]
pub fn interleave(x: u32, y: u32) -> u64 {
    fn spread(v: u32) -> u64 {
        let mut v = u64::from(v);
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        (v | (v << 1)) & 0x5555_5555_5555_5555
    }
    spread(x) | (spread(y) << 1)
}

/// The inverse of [`interleave`]: (even bits, odd bits) (Redis's `deinterleave64`).
#[inline]
pub fn deinterleave(v: u64) -> (u32, u32) {
    fn squash(mut v: u64) -> u32 {
        v &= 0x5555_5555_5555_5555;
        v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF;
        v as u32
    }
    (squash(v), squash(v >> 1))
}

/// Whether (lon, lat) is a position GEOADD accepts (Redis's `extractLongLatOrReply` check).
pub fn valid_lon_lat(lon: f64, lat: f64) -> bool {
    (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// Encodes a position at `step` in the given ranges (Redis's `geohashEncode`); `None` where
/// Redis fails (outside the WGS-84 limits or the ranges, or a step outside 1..=32).
pub fn encode(lon_range: CoordRange, lat_range: CoordRange, lon: f64, lat: f64, step: u8) -> Option<HashBits> {
    if step == 0 || step > 32 || !valid_lon_lat(lon, lat) {
        return None;
    }
    if lat < lat_range.min || lat > lat_range.max || lon < lon_range.min || lon > lon_range.max {
        return None;
    }
    let mut lat_offset = (lat - lat_range.min) / (lat_range.max - lat_range.min);
    let mut lon_offset = (lon - lon_range.min) / (lon_range.max - lon_range.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    lon_offset *= scale;
    // C's double -> uint32_t conversion: truncation (the offsets are in [0, 2^step]).
    Some(HashBits { bits: interleave(lat_offset as u32, lon_offset as u32), step })
}

/// The sorted-set score GEOADD stores for a valid position (step 26, 52 bits).
pub fn score_of(lon: f64, lat: f64) -> Option<f64> {
    encode(WGS84_LON, WGS84_LAT, lon, lat, STEP_MAX).map(|h| h.align52() as f64)
}

/// The cell of a hash (Redis's `geohashDecode`).
pub fn decode(lon_range: CoordRange, lat_range: CoordRange, hash: HashBits) -> Area {
    let (ilat, ilon) = deinterleave(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let lon_scale = lon_range.max - lon_range.min;
    let div = (1u64 << hash.step) as f64;
    let at = |i: u32, r: CoordRange, scale: f64| r.min + (f64::from(i) * 1.0 / div) * scale;
    Area {
        lat: CoordRange { min: at(ilat, lat_range, lat_scale), max: at(ilat.wrapping_add(1), lat_range, lat_scale) },
        lon: CoordRange { min: at(ilon, lon_range, lon_scale), max: at(ilon.wrapping_add(1), lon_range, lon_scale) },
    }
}

/// The centre of a cell, clamped to the WGS-84 limits (Redis's `geohashDecodeAreaToLongLat`).
pub fn area_center(area: &Area) -> (f64, f64) {
    let lon = (area.lon.min + area.lon.max) / 2.0;
    let lat = (area.lat.min + area.lat.max) / 2.0;
    (lon.clamp(LON_MIN, LON_MAX), lat.clamp(LAT_MIN, LAT_MAX))
}

/// C's `(uint64_t)` of a double as x86-64 code computes it (GCC: a signed truncation below
/// 2^63, else of `x - 2^63` with the top bit flipped; out-of-range truncations give
/// `i64::MIN`). Only a score that is not a geohash (a ZADD of anything) gets here with a
/// value outside [0, 2^53]; this keeps GEOPOS on such sets answering what Redis answers.
fn c_double_to_u64(x: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    fn cvtt(x: f64) -> i64 {
        if x.is_nan() || !(-TWO63..TWO63).contains(&x) {
            i64::MIN
        } else {
            x as i64
        }
    }
    if x < TWO63 {
        cvtt(x) as u64
    } else {
        (cvtt(x - TWO63) as u64) ^ (1 << 63)
    }
}

/// The position a score stands for: what GEOPOS replies and every distance uses
/// (Redis's `decodeGeohash`).
pub fn decode_score(score: f64) -> (f64, f64) {
    let hash = HashBits { bits: c_double_to_u64(score), step: STEP_MAX };
    area_center(&decode(WGS84_LON, WGS84_LAT, hash))
}

/// The standard 11-character geohash string of a score (GEOHASH): the decoded position
/// re-encoded with latitudes in [-90, 90], 10 characters of 5 bits and a final '0' (Redis
/// has 52 bits, not 55).
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    // Redis ignores a failed encode (the bits stay 0); the decoded position is always valid.
    let bits = encode(WGS84_LON, STANDARD_LAT, lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().take(10).enumerate() {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

/// Great-circle distance along a meridian (Redis's `geohashGetLatDistance`).
#[inline]
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in metres (Redis's `geohashGetDistance`, including its shortcut for
/// equal longitudes).
#[inline]
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// The step of the 9 search cells for a radius (Redis's `geohashEstimateStepsByRadius`).
pub fn estimate_steps(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range = range_meters;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = hash.bits & 0x5555_5555_5555_5555;
    let shift = 64 - u32::from(hash.step) * 2;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = hash.bits & 0x5555_5555_5555_5555;
    let shift = 64 - u32::from(hash.step) * 2;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    hash.bits = x | y;
}

/// The 8 neighbours of a cell (Redis's `geohashNeighbors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbors {
    pub north: HashBits,
    pub south: HashBits,
    pub east: HashBits,
    pub west: HashBits,
    pub north_east: HashBits,
    pub north_west: HashBits,
    pub south_east: HashBits,
    pub south_west: HashBits,
}

pub fn neighbors(hash: HashBits) -> Neighbors {
    let at = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    Neighbors {
        east: at(1, 0),
        west: at(-1, 0),
        south: at(0, -1),
        north: at(0, 1),
        north_west: at(-1, 1),
        north_east: at(1, 1),
        south_east: at(1, -1),
        south_west: at(-1, -1),
    }
}

/// A search area around a centre (Redis's `GeoShape`): sizes in the request's unit,
/// `conversion` metres per unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shape {
    pub lon: f64,
    pub lat: f64,
    pub conversion: f64,
    pub kind: ShapeKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeKind {
    Radius(f64),
    Box { width: f64, height: f64 },
}

impl Shape {
    /// [min lon, min lat, max lon, max lat] of the search area (Redis's `geohashBoundingBox`).
    pub fn bounding_box(&self) -> [f64; 4] {
        let (h, w) = match self.kind {
            ShapeKind::Radius(r) => (r, r),
            ShapeKind::Box { width, height } => (height / 2.0, width / 2.0),
        };
        let height = self.conversion * h;
        let width = self.conversion * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let lon_delta_top = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat + lat_delta).cos());
        let lon_delta_bottom = rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat - lat_delta).cos());
        let southern = self.lat < 0.0;
        let lon_delta = if southern { lon_delta_bottom } else { lon_delta_top };
        [self.lon - lon_delta, self.lat - lat_delta, self.lon + lon_delta, self.lat + lat_delta]
    }

    /// The distance in metres from the centre if (lon, lat) is inside the shape (Redis's
    /// `geoWithinShape`: `geohashGetDistanceIfInRadiusWGS84` /
    /// `geohashGetDistanceIfInRectangle`).
    #[inline]
    pub fn distance_if_within(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.kind {
            ShapeKind::Radius(r) => {
                let d = distance(self.lon, self.lat, lon, lat);
                // As Redis's `distance > radius` test: a NaN distance (antipodal rounding)
                // is inside.
                (d.partial_cmp(&(r * self.conversion)) != Some(std::cmp::Ordering::Greater)).then_some(d)
            }
            ShapeKind::Box { width, height } => {
                let width_m = width * self.conversion;
                let height_m = height * self.conversion;
                if lat_distance(lat, self.lat) > height_m / 2.0 {
                    return None;
                }
                if distance(lon, lat, self.lon, lat) > width_m / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// The cells to scan, in Redis's order, as score ranges `[min, max)` (Redis's
    /// `geohashCalculateAreasByShapeWGS84` and `membersOfAllNeighbors`): the centre cell, then
    /// N, S, E, W, NE, NW, SE, SW; excluded neighbours left out, and a cell equal to the last
    /// scanned one (other than the centre, as Redis compares) skipped.
    pub fn search_ranges(&self) -> Vec<(f64, f64)> {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius_meters = match self.kind {
            ShapeKind::Radius(r) => r,
            ShapeKind::Box { width, height } => ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
        } * self.conversion;
        let mut steps = estimate_steps(radius_meters, self.lat);
        let cell = |steps| {
            let hash = encode(WGS84_LON, WGS84_LAT, self.lon, self.lat, steps).unwrap_or_default();
            (hash, neighbors(hash), decode(WGS84_LON, WGS84_LAT, hash))
        };
        let (mut hash, mut n, mut area) = cell(steps);
        let decrease = {
            let north = decode(WGS84_LON, WGS84_LAT, n.north);
            let south = decode(WGS84_LON, WGS84_LAT, n.south);
            let east = decode(WGS84_LON, WGS84_LAT, n.east);
            let west = decode(WGS84_LON, WGS84_LAT, n.west);
            north.lat.max < max_lat || south.lat.min > min_lat || east.lon.max < max_lon || west.lon.min > min_lon
        };
        if steps > 1 && decrease {
            steps -= 1;
            (hash, n, area) = cell(steps);
        }
        if steps >= 2 {
            let zero = HashBits::default();
            if area.lat.min < min_lat {
                (n.south, n.south_west, n.south_east) = (zero, zero, zero);
            }
            if area.lat.max > max_lat {
                (n.north, n.north_east, n.north_west) = (zero, zero, zero);
            }
            if area.lon.min < min_lon {
                (n.west, n.south_west, n.north_west) = (zero, zero, zero);
            }
            if area.lon.max > max_lon {
                (n.east, n.south_east, n.north_east) = (zero, zero, zero);
            }
        }
        let cells = [hash, n.north, n.south, n.east, n.west, n.north_east, n.north_west, n.south_east, n.south_west];
        let mut out = Vec::with_capacity(9);
        let mut last = 0;
        for (i, c) in cells.iter().enumerate() {
            if c.is_zero() {
                continue;
            }
            if last != 0 && *c == cells[last] {
                continue;
            }
            out.push(c.score_range());
            last = i;
        }
        out
    }
}

/// What a cheap test can say about a candidate (see [`RadiusFilter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Certainly farther than the radius: Redis's exact test would reject it too.
    Out,
    /// Certainly within the radius: Redis's exact test would accept it.
    In,
    /// Near the circle: only the exact test can tell.
    Check,
}

/// A conservative pre-test for radius searches, so that most candidates of the 9 cells
/// (about 9 per result) cost no trigonometry: a search keeps Redis's exact answer because
/// the filter only decides points whose exact distance is off the radius by far more than
/// any rounding (a relative margin of 1e-7), and leaves the rest to the exact haversine.
///
/// Bounds, for centre latitude φ1 and candidate φ2 with differences Δφ, Δλ (radians; Δλ
/// wrapped to [0, π]), haversine `a = sin²(Δφ/2) + cos φ1 cos φ2 sin²(Δλ/2)`, distance
/// `2R asin(√a)`, and `s = sin(r / 2R)` for radius r:
/// - out if `R|Δφ| > r` (a great circle is never shorter than the meridian arc);
/// - out if `cos φ1 · cmin · sin²(Δλ/2) > s²`, with cmin the least cos φ2 of any latitude
///   that passed the first test; the threshold on Δλ is computed once;
/// - in if `(Δφ/2)² + cos φ1 · cmax · (Δλ/2)² < s²`, cmax the greatest cos φ2 there
///   (|sin x| <= |x|).
///
/// Only for radii below 1000 km, where these quantities are well conditioned (near the
/// antipode asin amplifies rounding); larger searches test every candidate exactly.
#[derive(Clone, Copy, Debug)]
pub struct RadiusFilter {
    lat1r: f64,
    lon1r: f64,
    /// cos φ1 and the radius in metres, for [`RadiusFilter::exact`].
    cos_lat1: f64,
    radius_m: f64,
    /// Largest |Δφ| (radians) that may be within the radius.
    max_dlat: f64,
    /// Largest wrapped |Δλ| (radians) that may be within the radius (infinite: no bound).
    max_dlon: f64,
    /// cos φ1 · cmax, and s² shrunk by the margin, for the certainly-inside test.
    inner_k: f64,
    inner_s2: f64,
}

const FILTER_MARGIN: f64 = 1e-7;

impl RadiusFilter {
    /// The filter of a radius search, None where it does not apply (boxes, radii of 1000 km
    /// or more).
    pub fn new(shape: &Shape) -> Option<RadiusFilter> {
        let ShapeKind::Radius(r) = shape.kind else { return None };
        let r_m = r * shape.conversion;
        if r_m.partial_cmp(&1.0e6) != Some(std::cmp::Ordering::Less) {
            return None;
        }
        let lat1r = deg_rad(shape.lat);
        let ang = r_m / EARTH_RADIUS_IN_METERS; // the radius as an angle, < 0.16 rad
        let max_dlat = ang * (1.0 + FILTER_MARGIN) + 1e-15;
        let c1 = lat1r.cos();
        let lat_hi = (lat1r.abs() + max_dlat).min(std::f64::consts::FRAC_PI_2);
        let lat_lo = (lat1r.abs() - max_dlat).max(0.0);
        let cmin = lat_hi.cos().max(0.0);
        let cmax = lat_lo.cos();
        let s = (ang / 2.0).sin();
        let s2 = s * s;
        let max_dlon = {
            let k = c1 * cmin;
            if k <= 0.0 {
                f64::INFINITY
            } else {
                let x = (s2 / k).sqrt();
                if x >= 1.0 {
                    f64::INFINITY
                } else {
                    2.0 * x.asin() * (1.0 + FILTER_MARGIN) + 1e-15
                }
            }
        };
        Some(RadiusFilter {
            lat1r,
            lon1r: deg_rad(shape.lon),
            cos_lat1: c1,
            radius_m: r_m,
            max_dlat,
            max_dlon,
            inner_k: c1 * cmax,
            inner_s2: s2 * (1.0 - FILTER_MARGIN),
        })
    }

    /// [`Shape::distance_if_within`] for this search, bit for bit (the same operations in
    /// the same order), with the centre's radians and cosine computed once per search.
    #[inline]
    pub fn exact(&self, lon: f64, lat: f64) -> Option<f64> {
        let v = ((deg_rad(lon) - self.lon1r) / 2.0).sin();
        let d = if v == 0.0 {
            EARTH_RADIUS_IN_METERS * (deg_rad(lat) - self.lat1r).abs()
        } else {
            let lat2r = deg_rad(lat);
            let u = ((lat2r - self.lat1r) / 2.0).sin();
            let a = u * u + self.cos_lat1 * lat2r.cos() * v * v;
            2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
        };
        (d.partial_cmp(&self.radius_m) != Some(std::cmp::Ordering::Greater)).then_some(d)
    }

    #[inline]
    pub fn classify(&self, lon: f64, lat: f64) -> Verdict {
        let dlat = (deg_rad(lat) - self.lat1r).abs();
        if dlat > self.max_dlat {
            return Verdict::Out;
        }
        let mut dlon = (deg_rad(lon) - self.lon1r).abs();
        if dlon > std::f64::consts::PI {
            dlon = 2.0 * std::f64::consts::PI - dlon;
        }
        if dlon > self.max_dlon {
            return Verdict::Out;
        }
        let (hlat, hlon) = (dlat / 2.0, dlon / 2.0);
        if hlat * hlat + self.inner_k * hlon * hlon < self.inner_s2 {
            return Verdict::In;
        }
        Verdict::Check
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values from redis-server 7.0.15: GEOADD Sicily 13.361389 38.115556 "Palermo"
    // 15.087269 37.502669 "Catania", then ZSCORE, GEOPOS, GEODIST, GEOHASH.
    const PALERMO: (f64, f64) = (13.361389, 38.115556);
    const CATANIA: (f64, f64) = (15.087269, 37.502669);

    #[test]
    fn scores_positions_and_hashes_match_redis() {
        let p = score_of(PALERMO.0, PALERMO.1).unwrap();
        let c = score_of(CATANIA.0, CATANIA.1).unwrap();
        assert_eq!(p, 3479099956230698.0);
        assert_eq!(c, 3479447370796909.0);
        assert_eq!(format!("{:.17}", decode_score(p).0), "13.36138933897018433");
        assert_eq!(format!("{:.17}", decode_score(p).1), "38.11555639549629859");
        assert_eq!(&geohash_string(p), b"sqc8b49rny0");
        assert_eq!(&geohash_string(c), b"sqdtr74hyu0");
        let (a, b) = (decode_score(p), decode_score(c));
        assert_eq!(format!("{:.4}", distance(a.0, a.1, b.0, b.1)), "166274.1516");
    }

    #[test]
    fn interleave_round_trips() {
        for (x, y) in [(0, 0), (1, 0), (0, 1), (u32::MAX, 0), (0x1234_5678, 0x9abc_def0), (u32::MAX, u32::MAX)] {
            assert_eq!(deinterleave(interleave(x, y)), (x, y));
        }
        assert_eq!(interleave(1, 0), 1);
        assert_eq!(interleave(0, 1), 2);
    }

    #[test]
    fn limits_and_edges() {
        assert!(score_of(180.0, 85.05112878).is_some());
        assert!(score_of(180.000001, 0.0).is_none());
        assert!(score_of(0.0, 85.05112879).is_none());
        // Longitude 180 overflows the 26 bits as in Redis (bit 53), and decodes clamped.
        let s = score_of(180.0, 0.0).unwrap();
        assert!(s >= (1u64 << 52) as f64);
        let (lon, _) = decode_score(s);
        assert!(lon <= 180.0);
    }

    #[test]
    fn neighbours_wrap_around() {
        let h = encode(WGS84_LON, WGS84_LAT, 179.9, 0.0, 4).unwrap();
        let n = neighbors(h);
        let east = decode(WGS84_LON, WGS84_LAT, n.east);
        assert_eq!(east.lon.min, -180.0);
        let here = decode(WGS84_LON, WGS84_LAT, h);
        let north = decode(WGS84_LON, WGS84_LAT, n.north);
        assert_eq!(north.lat.min, here.lat.max);
        assert_eq!(north.lon, here.lon);
    }

    #[test]
    fn steps_estimate() {
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(1000.0, 0.0), 14);
        assert_eq!(estimate_steps(1000.0, 70.0), 13);
        assert_eq!(estimate_steps(1000.0, -85.0), 12);
        assert_eq!(estimate_steps(1e9, 0.0), 1);
    }

    #[test]
    fn search_covers_what_a_scan_finds() {
        // Every point of a grid within the radius lies in one of the ranges (the cells cover
        // the bounding box away from the poles).
        let shape = Shape { lon: 13.5, lat: 38.0, conversion: 1000.0, kind: ShapeKind::Radius(50.0) };
        let ranges = shape.search_ranges();
        assert!(!ranges.is_empty() && ranges.len() <= 9);
        for i in 0..200 {
            for j in 0..200 {
                let lon = 12.5 + i as f64 * 0.01;
                let lat = 37.0 + j as f64 * 0.01;
                let s = score_of(lon, lat).unwrap();
                let (dlon, dlat) = decode_score(s);
                if shape.distance_if_within(dlon, dlat).is_some() {
                    assert!(ranges.iter().any(|&(a, b)| a <= s && s < b), "{lon} {lat}");
                }
            }
        }
    }

    #[test]
    fn box_membership() {
        let shape = Shape { lon: 0.0, lat: 0.0, conversion: 1.0, kind: ShapeKind::Box { width: 2000.0, height: 1000.0 } };
        assert!(shape.distance_if_within(0.0089, 0.0).is_some());
        assert!(shape.distance_if_within(0.0, 0.0046).is_none());
        assert!(shape.distance_if_within(0.0, 0.0044).is_some());
    }

    #[test]
    fn odd_scores_do_not_panic() {
        for s in [-1.0, f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300, 0.0, 4503599627370496.0 * 8.0] {
            let _ = decode_score(s);
            let _ = geohash_string(s);
        }
    }

    #[test]
    fn radius_filter_agrees_with_the_exact_test() {
        // Random centres (poles, antimeridian and equator included) and candidates around
        // them: a decided verdict must match Redis's exact test.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut decided = 0;
        for i in 0..2000 {
            let clon = if i % 7 == 0 { 179.99 + next() * 0.01 } else { next() * 360.0 - 180.0 };
            let clat = if i % 11 == 0 { 85.0 + next() * 0.05 } else { next() * 170.0 - 85.0 };
            let r = [0.0, 1.0, 120.0, 5000.0, 200_000.0, 900_000.0][i % 6] * (0.5 + 0.6 * next());
            let shape = Shape { lon: clon, lat: clat, conversion: 1.0, kind: ShapeKind::Radius(r) };
            let f = RadiusFilter::new(&shape).unwrap();
            let spread = (r / 111_000.0 * 3.0).max(1e-5);
            for _ in 0..200 {
                let lon = (clon + (next() * 2.0 - 1.0) * spread * 3.0 + 540.0) % 360.0 - 180.0;
                let lat = (clat + (next() * 2.0 - 1.0) * spread).clamp(LAT_MIN, LAT_MAX);
                let exact = shape.distance_if_within(lon, lat);
                assert_eq!(f.exact(lon, lat).map(f64::to_bits), exact.map(f64::to_bits));
                let exact = exact.is_some();
                match f.classify(lon, lat) {
                    Verdict::In => {
                        assert!(exact, "{clon} {clat} {r} {lon} {lat}");
                        decided += 1;
                    }
                    Verdict::Out => {
                        assert!(!exact, "{clon} {clat} {r} {lon} {lat}");
                        decided += 1;
                    }
                    Verdict::Check => {}
                }
            }
        }
        assert!(decided > 300_000, "{decided}");
        let big = Shape { lon: 0.0, lat: 0.0, conversion: 1000.0, kind: ShapeKind::Radius(1000.0) };
        assert!(RadiusFilter::new(&big).is_none());
    }
}
