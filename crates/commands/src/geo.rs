//! The GEO family: GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH, GEOSEARCHSTORE, GEORADIUS,
//! GEORADIUSBYMEMBER and their _RO forms, with Redis 7.0's semantics, replies and errors
//! (`geo.c`).
//!
//! Why it is built this way: a GEO set is nothing but a sorted set whose scores are 52-bit
//! geohashes (`abacus_collections::geohash`), exactly as Redis stores it, so ZRANGE, ZSCORE,
//! ZREM and the rest work on it, a sorted set written by ZADD with such scores answers GEO
//! commands, and snapshots need nothing new. GEOADD is ZADD with computed scores: it builds
//! ZADD's argument vector and runs the sorted-set handler, as Redis does, and is propagated as
//! that ZADD (deterministic; replay does no floating point).
//!
//! A search is Redis's: the 9 geohash cells around the centre (the cell step estimated from
//! the radius, neighbours outside the bounding box dropped), each one a score range of the
//! sorted set, scanned in Redis's order, every candidate decoded and kept if inside the shape.
//! Redis's choices decide what a client sees (which points near a cell edge are found, the
//! order of an unsorted reply, which COUNT n ANY points stop the scan), so `geohash.rs`
//! reproduces them bit for bit rather than computing a "better" answer. Sorting is a stable
//! sort by distance (glibc's qsort, which Redis calls, is a merge sort at these sizes); a
//! partial sort (Redis's pqsort for COUNT) gives the same members when distances differ.
//!
//! Replies: distances with 4 decimals (Redis's `fixedpoint_d2string`: the value times 10^4
//! rounded to an integer), coordinates as `%.17Lf` with trailing zeros trimmed (a RESP3 double
//! in RESP3, `Frame::DoubleText`), WITHHASH the score as an integer.
//!
//! Keys: GEOSEARCHSTORE's destination is in its key range (1, 2, 1). GEORADIUS and
//! GEORADIUSBYMEMBER name a destination only through their STORE/STOREDIST options, which a
//! key range cannot express (Redis marks them movablekeys): their table entries declare a
//! trailing key finder ([`Spec::with_trailing_key`]) that walks the options exactly as the
//! handler does ([`parse_options`], the same code), so the destination is among the command's
//! keys and the multi-shard path checks it out with the source.
//!
//! Effects: a search without STORE writes nothing and propagates nothing (GEORADIUS is a
//! write command only for its STORE form); a store propagates as sent (deterministic given
//! the same source set), or nothing when it neither wrote nor deleted a key.

use abacus_collections::geohash::{self, RadiusFilter, Shape, ShapeKind, Verdict};
use abacus_collections::ZSet;
use std::cmp::Ordering;

use abacus_protocol::{Arg, Bytes, Frame};

use super::args::*;
use super::zsets::{parse_score, read_zset, store_result, zadd};
use crate::command::flags::*;
use crate::command::Spec;
use crate::ctx::{Call, Ctx, Effect, KeysModified};

const K1: (i32, i32, i32) = (1, 1, 1);
const G: &str = "geo";

pub const COMMANDS: &[Spec] = &[
    Spec::keyed("geoadd", -5, WRITE | DENYOOM, K1, geoadd, G, "Adds one or more members to a geospatial index. The key is created if it doesn't exist.")
        .docs("3.2.0", "O(log(N)) for each item added, where N is the number of elements in the sorted set.")
        .history(&[("6.2.0", "Added the `CH`, `NX` and `XX` options.")])
        .args("
            key type=key key_spec_index=0
            condition type=oneof since=6.2.0 flags=optional
              nx type=pure-token token=NX
              xx type=pure-token token=XX
            change type=pure-token token=CH since=6.2.0 flags=optional
            longitude_latitude_member type=block flags=multiple
              longitude type=double
              latitude type=double
              member type=string
        "),
    Spec::keyed("geopos", -2, READONLY, K1, geopos, G, "Returns the longitude and latitude of members from a geospatial index.")
        .docs("3.2.0", "O(N) where N is the number of members requested.")
        .args("
            key type=key key_spec_index=0
            member type=string flags=multiple
        "),
    Spec::keyed("geodist", -4, READONLY, K1, geodist, G, "Returns the distance between two members of a geospatial index.")
        .docs("3.2.0", "O(log(N))")
        .args("
            key type=key key_spec_index=0
            member1 type=string
            member2 type=string
            unit type=oneof flags=optional
              m type=pure-token token=M
              km type=pure-token token=KM
              ft type=pure-token token=FT
              mi type=pure-token token=MI
        "),
    Spec::keyed("geohash", -2, READONLY, K1, geohash_cmd, G, "Returns members from a geospatial index as geohash strings.")
        .docs("3.2.0", "O(log(N)) for each member requested, where N is the number of elements in the sorted set.")
        .args("
            key type=key key_spec_index=0
            member type=string flags=multiple
        "),
    Spec::keyed("georadius", -6, WRITE | DENYOOM, K1, georadius, G, "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.").with_trailing_key(georadius_store_key)
        .docs("3.2.0", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` argument")
        .history(&[
            ("6.2.0", "Added the `ANY` option for `COUNT`."),
            ("7.0.0", "Added support for uppercase unit names."),
        ])
        .key_specs("RO access index=1 range=0,1,0; OW update kw=STORE,6 range=0,1,0; OW update kw=STOREDIST,6 range=0,1,0")
        .args("
            key type=key key_spec_index=0
            longitude type=double
            latitude type=double
            radius type=double
            unit type=oneof
              m type=pure-token token=M
              km type=pure-token token=KM
              ft type=pure-token token=FT
              mi type=pure-token token=MI
            withcoord type=pure-token token=WITHCOORD flags=optional
            withdist type=pure-token token=WITHDIST flags=optional
            withhash type=pure-token token=WITHHASH flags=optional
            count type=block flags=optional
              count type=integer token=COUNT
              any type=pure-token token=ANY since=6.2.0 flags=optional
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
            key type=key key_spec_index=1 token=STORE flags=optional
            key type=key key_spec_index=2 token=STOREDIST flags=optional
        "),
    Spec::keyed("georadius_ro", -6, READONLY, K1, georadius_ro, G, "Returns members from a geospatial index that are within a distance from a coordinate.")
        .docs("3.2.10", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` argument")
        .history(&[("6.2.0", "Added the `ANY` option for `COUNT`.")])
        .args("
            key type=key key_spec_index=0
            longitude type=double
            latitude type=double
            radius type=double
            unit type=oneof
              m type=pure-token token=M
              km type=pure-token token=KM
              ft type=pure-token token=FT
              mi type=pure-token token=MI
            withcoord type=pure-token token=WITHCOORD flags=optional
            withdist type=pure-token token=WITHDIST flags=optional
            withhash type=pure-token token=WITHHASH flags=optional
            count type=block flags=optional
              count type=integer token=COUNT
              any type=pure-token token=ANY since=6.2.0 flags=optional
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
        "),
    Spec::keyed("georadiusbymember", -5, WRITE | DENYOOM, K1, georadiusbymember, G, "Queries a geospatial index for members within a distance from a member, optionally stores the result.").with_trailing_key(georadiusbymember_store_key)
        .docs("3.2.0", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .deprecated("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` and `FROMMEMBER` arguments")
        .history(&[("7.0.0", "Added support for uppercase unit names.")])
        .key_specs("RO access index=1 range=0,1,0; OW update kw=STORE,5 range=0,1,0; OW update kw=STOREDIST,5 range=0,1,0")
        .args("
            key type=key key_spec_index=0
            member type=string
            radius type=double
            unit type=oneof
              m type=pure-token token=M
              km type=pure-token token=KM
              ft type=pure-token token=FT
              mi type=pure-token token=MI
            withcoord type=pure-token token=WITHCOORD flags=optional
            withdist type=pure-token token=WITHDIST flags=optional
            withhash type=pure-token token=WITHHASH flags=optional
            count type=block flags=optional
              count type=integer token=COUNT
              any type=pure-token token=ANY flags=optional
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
            key type=key key_spec_index=1 token=STORE flags=optional
            key type=key key_spec_index=2 token=STOREDIST flags=optional
        "),
    Spec::keyed("georadiusbymember_ro", -5, READONLY, K1, georadiusbymember_ro, G, "Returns members from a geospatial index that are within a distance from a member.")
        .docs("3.2.10", "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.")
        .deprecated("6.2.0", "`GEOSEARCH` with the `BYRADIUS` and `FROMMEMBER` arguments")
        .args("
            key type=key key_spec_index=0
            member type=string
            radius type=double
            unit type=oneof
              m type=pure-token token=M
              km type=pure-token token=KM
              ft type=pure-token token=FT
              mi type=pure-token token=MI
            withcoord type=pure-token token=WITHCOORD flags=optional
            withdist type=pure-token token=WITHDIST flags=optional
            withhash type=pure-token token=WITHHASH flags=optional
            count type=block flags=optional
              count type=integer token=COUNT
              any type=pure-token token=ANY flags=optional
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
        "),
    Spec::keyed("geosearch", -7, READONLY, K1, geosearch, G, "Queries a geospatial index for members inside an area of a box or a circle.")
        .docs("6.2.0", "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape")
        .history(&[("7.0.0", "Added support for uppercase unit names.")])
        .args("
            key type=key key_spec_index=0
            from type=oneof
              member type=string token=FROMMEMBER
              longitude_latitude type=block token=FROMLONLAT
                longitude type=double
                latitude type=double
            by type=oneof
              circle type=block
                radius type=double token=BYRADIUS
                unit type=oneof
                  m type=pure-token token=M
                  km type=pure-token token=KM
                  ft type=pure-token token=FT
                  mi type=pure-token token=MI
              box type=block
                width type=double token=BYBOX
                height type=double
                unit type=oneof
                  m type=pure-token token=M
                  km type=pure-token token=KM
                  ft type=pure-token token=FT
                  mi type=pure-token token=MI
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
            count type=block flags=optional
              count type=integer token=COUNT
              any type=pure-token token=ANY flags=optional
            withcoord type=pure-token token=WITHCOORD flags=optional
            withdist type=pure-token token=WITHDIST flags=optional
            withhash type=pure-token token=WITHHASH flags=optional
        "),
    Spec::keyed("geosearchstore", -8, WRITE | DENYOOM, (1, 2, 1), geosearchstore, G, "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.")
        .docs("6.2.0", "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape")
        .history(&[("7.0.0", "Added support for uppercase unit names.")])
        .key_specs("OW update; RO access")
        .args("
            destination type=key key_spec_index=0
            source type=key key_spec_index=1
            from type=oneof
              member type=string token=FROMMEMBER
              longitude_latitude type=block token=FROMLONLAT
                longitude type=double
                latitude type=double
            by type=oneof
              circle type=block
                radius type=double token=BYRADIUS
                unit type=oneof
                  m type=pure-token token=M
                  km type=pure-token token=KM
                  ft type=pure-token token=FT
                  mi type=pure-token token=MI
              box type=block
                width type=double token=BYBOX
                height type=double
                unit type=oneof
                  m type=pure-token token=M
                  km type=pure-token token=KM
                  ft type=pure-token token=FT
                  mi type=pure-token token=MI
            order type=oneof flags=optional
              asc type=pure-token token=ASC
              desc type=pure-token token=DESC
            count type=block flags=optional
              count type=integer token=COUNT
              any type=pure-token token=ANY flags=optional
            storedist type=pure-token token=STOREDIST flags=optional
        "),
];

// ---------------------------------------------------------------------------------------
// Formatting

/// A distance as Redis 7.0 prints it (`fixedpoint_d2string(d, 4)`): `llrint(d * 10^4)`
/// (round half to even) written as an integer with 4 decimals.
pub fn format_distance(d: f64) -> Bytes {
    if d == 0.0 {
        return Bytes::from_static(b"0.0000");
    }
    let scaled = (d * 10000.0).round_ties_even();
    // llrint of a NaN or an out-of-range value is LLONG_MIN on x86-64.
    let v: i64 = if scaled.is_nan() || !(i64::MIN as f64..-(i64::MIN as f64)).contains(&scaled) { i64::MIN } else { scaled as i64 };
    let neg = v < 0;
    let u = v.unsigned_abs();
    let s = format!("{}{}.{:04}", if neg { "-" } else { "" }, u / 10000, u % 10000);
    Bytes::from(s)
}

/// A coordinate as Redis's `addReplyHumanLongDouble` prints it: `%.17Lf` of the (exact)
/// double, trailing zeros and a trailing dot removed, "-0" as "0".
pub fn format_coord(x: f64) -> Bytes {
    let mut s = format!("{x:.17}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".to_string();
    }
    Bytes::from(s)
}

fn coord_pair(lon: f64, lat: f64) -> Frame {
    Frame::Array(vec![Frame::DoubleText(format_coord(lon)), Frame::DoubleText(format_coord(lat))])
}

// ---------------------------------------------------------------------------------------
// Argument helpers

/// A longitude/latitude pair (Redis's `extractLongLatOrReply`).
fn parse_lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Frame> {
    let lon = parse_score(lon)?;
    let lat = parse_score(lat)?;
    if !geohash::valid_lon_lat(lon, lat) {
        return Err(Frame::error(format!("ERR invalid longitude,latitude pair {lon:.6},{lat:.6}")));
    }
    Ok((lon, lat))
}

/// Metres per unit (Redis's `extractUnitOrReply`: m, km, ft, mi, any case).
fn parse_unit(u: &[u8]) -> Result<f64, Frame> {
    if is(u, "m") {
        Ok(1.0)
    } else if is(u, "km") {
        Ok(1000.0)
    } else if is(u, "ft") {
        Ok(0.3048)
    } else if is(u, "mi") {
        Ok(1609.34)
    } else {
        Err(err("ERR unsupported unit provided. please use M, KM, FT, MI"))
    }
}

/// A number parsed as Redis's `getDoubleFromObjectOrReply` with a custom message.
fn parse_double_or(a: &[u8], msg: &str) -> Result<f64, Frame> {
    parse_score(a).map_err(|_| err(msg))
}

/// `radius unit` (Redis's `extractDistanceOrReply`): (radius, metres per unit).
fn parse_distance(radius: &[u8], unit: &[u8]) -> Result<(f64, f64), Frame> {
    let r = parse_double_or(radius, "ERR need numeric radius")?;
    if r < 0.0 {
        return Err(err("ERR radius cannot be negative"));
    }
    Ok((r, parse_unit(unit)?))
}

/// `width height unit` (Redis's `extractBoxOrReply`).
fn parse_box(width: &[u8], height: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), Frame> {
    let w = parse_double_or(width, "ERR need numeric width")?;
    let h = parse_double_or(height, "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(err("ERR height or width cannot be negative"));
    }
    Ok((w, h, parse_unit(unit)?))
}

/// The position of `member`, None if it is not in the set (Redis's `longLatFromMember`).
fn member_position(z: &ZSet, member: &[u8]) -> Option<(f64, f64)> {
    z.score(member).map(geohash::decode_score)
}

// ---------------------------------------------------------------------------------------
// GEOADD, GEOPOS, GEODIST, GEOHASH

/// GEOADD key [NX|XX] [CH] lon lat member ...: ZADD key [options] score member ... .
fn geoadd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let mut at = 2;
    let (mut nx, mut xx) = (false, false);
    while at < a.len() {
        if is(&a[at], "nx") {
            nx = true;
        } else if is(&a[at], "xx") {
            xx = true;
        } else if !is(&a[at], "ch") {
            break;
        }
        at += 1;
    }
    if !(a.len() - at).is_multiple_of(3) || (nx && xx) {
        return err(ERR_SYNTAX);
    }
    let mut zargs: Vec<Bytes> = Vec::with_capacity(at + (a.len() - at) / 3 * 2);
    zargs.push(Bytes::from_static(crate::zsets::ZADD.name.as_bytes()));
    zargs.extend(a[1..at].iter().map(|x| Bytes::copy_from_slice(x)));
    for triple in a[at..].chunks(3) {
        let (lon, lat) = match parse_lon_lat(&triple[0], &triple[1]) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Some(score) = geohash::score_of(lon, lat) else { return err("ERR internal error: position not encodable") };
        zargs.push(Bytes::from((score as u64).to_string()));
        zargs.push(Bytes::copy_from_slice(&triple[2]));
    }
    let zargs = abacus_protocol::Args::from_vec(zargs);
    let reply = zadd(ctx, &zargs);
    if !reply.is_error() && ctx.effect == Effect::Args {
        // Propagated as the ZADD it ran, as Redis does (replay needs no floating point).
        let mut call = Call::with_capacity(&crate::zsets::ZADD, zargs.len() - 1);
        call.extend(zargs[1..].iter().map(|x| Bytes::copy_from_slice(x)));
        ctx.propagate_as(call);
    }
    reply
}

/// GEOPOS key member ...
fn geopos(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let z = match read_zset(ctx, &a[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    Frame::Array(
        a[2..]
            .iter()
            .map(|m| match z.and_then(|z| member_position(z, m)) {
                Some((lon, lat)) => coord_pair(lon, lat),
                None => Frame::NullArray,
            })
            .collect(),
    )
}

/// GEODIST key member1 member2 [unit]
fn geodist(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let to_meters = match a.len() {
        5 => match parse_unit(&a[4]) {
            Ok(u) => u,
            Err(e) => return e,
        },
        4 => 1.0,
        _ => return err(ERR_SYNTAX),
    };
    let z = match read_zset(ctx, &a[1]) {
        Ok(Some(z)) => z,
        Ok(None) => return Frame::Null,
        Err(e) => return e,
    };
    match (member_position(z, &a[2]), member_position(z, &a[3])) {
        (Some(p1), Some(p2)) => Frame::Bulk(format_distance(geohash::distance(p1.0, p1.1, p2.0, p2.1) / to_meters)),
        _ => Frame::Null,
    }
}

/// GEOHASH key member ...
fn geohash_cmd(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    let z = match read_zset(ctx, &a[1]) {
        Ok(z) => z,
        Err(e) => return e,
    };
    Frame::Array(
        a[2..]
            .iter()
            .map(|m| match z.and_then(|z| z.score(m)) {
                Some(score) => Frame::Bulk(Bytes::copy_from_slice(&geohash::geohash_string(score))),
                None => Frame::Null,
            })
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------
// Searches

/// Which command a search is (Redis's `georadiusGeneric` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS[_RO] key lon lat radius unit ...
    RadiusCoords { store: bool },
    /// GEORADIUSBYMEMBER[_RO] key member radius unit ...
    RadiusMember { store: bool },
    /// GEOSEARCH key ...
    Search,
    /// GEOSEARCHSTORE dest key ...
    SearchStore,
}

impl Kind {
    /// Where the options start.
    fn base(self) -> usize {
        match self {
            Kind::RadiusCoords { .. } => 6,
            Kind::RadiusMember { .. } => 5,
            Kind::Search => 2,
            Kind::SearchStore => 3,
        }
    }

    fn is_search(self) -> bool {
        matches!(self, Kind::Search | Kind::SearchStore)
    }

    fn accepts_store(self) -> bool {
        matches!(self, Kind::RadiusCoords { store: true } | Kind::RadiusMember { store: true })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// The centre and area a search names; `from` is None where the source key is missing and
/// the member could not be looked up (Redis then replies empty without needing it).
#[derive(Default)]
struct Options {
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    any: bool,
    sort: Option<bool>,
    count: u64,
    /// The destination's argument index and whether it stores distances.
    store: Option<(usize, bool)>,
    from_member: bool,
    from_lonlat: bool,
    by_radius: bool,
    by_box: bool,
    center: Option<(f64, f64)>,
    kind: Option<(ShapeKind, f64)>,
}

impl Options {
    fn sort(&self) -> Sort {
        match self.sort {
            None => Sort::None,
            Some(true) => Sort::Asc,
            Some(false) => Sort::Desc,
        }
    }
}

/// Walks the options from `kind.base()` in Redis's order, reporting the first error Redis
/// reports. `z` is the source set, for GEOSEARCH's FROMMEMBER (None: missing, no lookup).
/// The trailing key finders call it with no set: GEORADIUS options never look one up.
fn parse_options(a: &[Arg], kind: Kind, z: Option<&ZSet>, mut o: Options) -> Result<Options, Frame> {
    let base = kind.base();
    let mut i = base;
    while i < a.len() {
        let arg = &a[i];
        let has = |n: usize| i + n < a.len();
        if is(arg, "withdist") {
            o.withdist = true;
        } else if is(arg, "withhash") {
            o.withhash = true;
        } else if is(arg, "withcoord") {
            o.withcoord = true;
        } else if is(arg, "any") {
            o.any = true;
        } else if is(arg, "asc") {
            o.sort = Some(true);
        } else if is(arg, "desc") {
            o.sort = Some(false);
        } else if is(arg, "count") && has(1) {
            let n = parse_i64(&a[i + 1])?;
            if n <= 0 {
                return Err(err("ERR COUNT must be > 0"));
            }
            o.count = n as u64;
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && has(1) && kind.accepts_store() {
            o.store = Some((i + 1, is(arg, "storedist")));
            i += 1;
        } else if is(arg, "storedist") && kind == Kind::SearchStore {
            o.store = Some((1, true));
        } else if is(arg, "frommember") && has(1) && kind.is_search() && !o.from_lonlat {
            if let Some(z) = z {
                o.center = Some(member_position(z, &a[i + 1]).ok_or_else(|| err("ERR could not decode requested zset member"))?);
            }
            o.from_member = true;
            i += 1;
        } else if is(arg, "fromlonlat") && has(2) && kind.is_search() && !o.from_member {
            o.center = Some(parse_lon_lat(&a[i + 1], &a[i + 2])?);
            o.from_lonlat = true;
            i += 2;
        } else if is(arg, "byradius") && has(2) && kind.is_search() && !o.by_box {
            let (r, conv) = parse_distance(&a[i + 1], &a[i + 2])?;
            o.kind = Some((ShapeKind::Radius(r), conv));
            o.by_radius = true;
            i += 2;
        } else if is(arg, "bybox") && has(3) && kind.is_search() && !o.by_radius {
            let (width, height, conv) = parse_box(&a[i + 1], &a[i + 2], &a[i + 3])?;
            o.kind = Some((ShapeKind::Box { width, height }, conv));
            o.by_box = true;
            i += 3;
        } else {
            return Err(err(ERR_SYNTAX));
        }
        i += 1;
    }
    Ok(o)
}

/// GEORADIUS's trailing key: the STORE/STOREDIST destination its options name.
fn georadius_store_key(a: &[Arg]) -> Option<usize> {
    parse_options(a, Kind::RadiusCoords { store: true }, None, Options::default()).ok()?.store.map(|(i, _)| i)
}

fn georadiusbymember_store_key(a: &[Arg]) -> Option<usize> {
    parse_options(a, Kind::RadiusMember { store: true }, None, Options::default()).ok()?.store.map(|(i, _)| i)
}

fn georadius(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    generic(ctx, a, Kind::RadiusCoords { store: true })
}

fn georadius_ro(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    generic(ctx, a, Kind::RadiusCoords { store: false })
}

fn georadiusbymember(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    generic(ctx, a, Kind::RadiusMember { store: true })
}

fn georadiusbymember_ro(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    generic(ctx, a, Kind::RadiusMember { store: false })
}

fn geosearch(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    generic(ctx, a, Kind::Search)
}

fn geosearchstore(ctx: &mut Ctx, a: &[Arg]) -> Frame {
    generic(ctx, a, Kind::SearchStore)
}

/// A point found by a search.
struct Found<'a> {
    member: &'a [u8],
    score: f64,
    lon: f64,
    lat: f64,
    /// Metres.
    dist: f64,
}

/// Redis's `membersOfAllNeighbors`: the points of the search cells inside the shape, in scan
/// order; with `limit` > 0 (COUNT n ANY) the scan stops once that many were found.
///
/// Radius searches first ask [`RadiusFilter`] (no trigonometry) and compute Redis's exact
/// distance only for points near the circle, or for every point found when the distance is
/// needed (`need_dist`: WITHDIST, a sort, STOREDIST); otherwise `dist` is NaN.
fn search<'a>(z: &'a ZSet, shape: &Shape, limit: usize, need_dist: bool) -> Vec<Found<'a>> {
    let mut found = Vec::new();
    let filter = RadiusFilter::new(shape);
    for (min, max) in shape.search_ranges() {
        if limit > 0 && found.len() >= limit {
            break;
        }
        let start = z.rank_where(|s, _| s < min);
        for (member, score) in z.range(start, usize::MAX) {
            if score >= max {
                break;
            }
            let (lon, lat) = geohash::decode_score(score);
            let dist = match filter {
                None => shape.distance_if_within(lon, lat),
                Some(f) => match f.classify(lon, lat) {
                    Verdict::Out => None,
                    Verdict::In if !need_dist => Some(f64::NAN),
                    _ => f.exact(lon, lat),
                },
            };
            if let Some(dist) = dist {
                found.push(Found { member, score, lon, lat, dist });
            }
            if limit > 0 && found.len() >= limit {
                break;
            }
        }
    }
    found
}

/// Redis's comparator (`sort_gp_asc`), made total for NaN distances (antipodal rounding)
/// so that the standard library's sort never sees an inconsistent order.
fn by_distance(a: &Found, b: &Found) -> Ordering {
    a.dist.partial_cmp(&b.dist).unwrap_or_else(|| a.dist.is_nan().cmp(&b.dist.is_nan()))
}

/// Redis's `sort_gp_asc` as written (a NaN compares below everything), for [`pqsort`].
fn c_asc(a: &Found, b: &Found) -> Ordering {
    if a.dist > b.dist {
        Ordering::Greater
    } else if a.dist == b.dist {
        Ordering::Equal
    } else {
        Ordering::Less
    }
}

/// Redis's `pqsort` (Bentley & McIlroy's quicksort that only recurses into the parts that
/// overlap the element range `lrange..=rrange`), step for step, so that members at equal
/// distances come out in Redis's order when COUNT keeps fewer than were found. Indices
/// replace C's pointers; `cmp` is Redis's comparator (DESC: its negation).
fn pqsort<T>(v: &mut [T], cmp: &dyn Fn(&T, &T) -> Ordering, lrange: usize, rrange: usize) {
    let insertion = |v: &mut [T], lo: usize, n: usize| {
        for m in lo + 1..lo + n {
            let mut l = m;
            while l > lo && cmp(&v[l - 1], &v[l]) == Ordering::Greater {
                v.swap(l, l - 1);
                l -= 1;
            }
        }
    };
    let med3 = |v: &[T], a: usize, b: usize, c: usize| {
        if cmp(&v[a], &v[b]) == Ordering::Less {
            if cmp(&v[b], &v[c]) == Ordering::Less {
                b
            } else if cmp(&v[a], &v[c]) == Ordering::Less {
                c
            } else {
                a
            }
        } else if cmp(&v[b], &v[c]) == Ordering::Greater {
            b
        } else if cmp(&v[a], &v[c]) == Ordering::Less {
            a
        } else {
            c
        }
    };
    let vecswap = |v: &mut [T], a: usize, b: usize, n: usize| {
        for i in 0..n {
            v.swap(a + i, b + i);
        }
    };
    // Whether the part [lo, lo + n) holds any position of the wanted range.
    let overlaps = |lo: usize, n: usize| !(rrange < lo || lrange >= lo + n);
    let mut stack = vec![(0usize, v.len())];
    while let Some((mut lo, mut n)) = stack.pop() {
        loop {
            if n < 7 {
                insertion(v, lo, n);
                break;
            }
            let mut pm = lo + n / 2;
            if n > 7 {
                let mut pl = lo;
                let mut pn = lo + n - 1;
                if n > 40 {
                    let d = n / 8;
                    pl = med3(v, pl, pl + d, pl + 2 * d);
                    pm = med3(v, pm - d, pm, pm + d);
                    pn = med3(v, pn - 2 * d, pn - d, pn);
                }
                pm = med3(v, pl, pm, pn);
            }
            v.swap(lo, pm);
            let (mut pa, mut pb) = (lo + 1, lo + 1);
            let (mut pc, mut pd) = (lo + n - 1, lo + n - 1);
            let mut swapped = false;
            loop {
                while pb <= pc {
                    let c = cmp(&v[pb], &v[lo]);
                    if c == Ordering::Greater {
                        break;
                    }
                    if c == Ordering::Equal {
                        swapped = true;
                        v.swap(pa, pb);
                        pa += 1;
                    }
                    pb += 1;
                }
                while pb <= pc {
                    let c = cmp(&v[pc], &v[lo]);
                    if c == Ordering::Less {
                        break;
                    }
                    if c == Ordering::Equal {
                        swapped = true;
                        v.swap(pc, pd);
                        pd -= 1;
                    }
                    pc -= 1;
                }
                if pb > pc {
                    break;
                }
                v.swap(pb, pc);
                swapped = true;
                pb += 1;
                pc -= 1;
            }
            if !swapped {
                insertion(v, lo, n);
                break;
            }
            let pn = lo + n;
            let r = (pa - lo).min(pb - pa);
            vecswap(v, lo, pb - r, r);
            let r = (pd - pc).min(pn - pd - 1);
            vecswap(v, pb, pn - r, r);
            let left = pb - pa;
            let right = pd - pc;
            if left > 1 && overlaps(lo, left) {
                // C recurses here, then iterates on the right part: the right part is
                // pushed first so the left one is finished before it, as in C.
                if right > 1 && overlaps(pn - right, right) {
                    stack.push((pn - right, right));
                }
                n = left;
                continue;
            }
            if right > 1 && overlaps(pn - right, right) {
                lo = pn - right;
                n = right;
                continue;
            }
            break;
        }
    }
}

/// Redis's `georadiusGeneric`.
fn generic(ctx: &mut Ctx, a: &[Arg], kind: Kind) -> Frame {
    let src = if kind == Kind::SearchStore { 2 } else { 1 };
    let name: &[u8] = &a[0];
    let limits = ctx.zset_limits;
    // Everything that reads the source set, in one borrow: the reply or the set to store.
    let outcome: Result<(Options, Option<Vec<StoredPoint>>, Frame), Frame> = (|| {
        let z = read_zset(ctx, &a[src])?;
        let mut o = Options::default();
        match kind {
            Kind::RadiusCoords { .. } => {
                o.center = Some(parse_lon_lat(&a[2], &a[3])?);
                let (r, conv) = parse_distance(&a[4], &a[5])?;
                o.kind = Some((ShapeKind::Radius(r), conv));
            }
            Kind::RadiusMember { .. } => {
                if let Some(z) = z {
                    o.center = Some(member_position(z, &a[2]).ok_or_else(|| err("ERR could not decode requested zset member"))?);
                    let (r, conv) = parse_distance(&a[3], &a[4])?;
                    o.kind = Some((ShapeKind::Radius(r), conv));
                }
            }
            Kind::Search => {}
            Kind::SearchStore => o.store = Some((1, false)),
        }
        let o = parse_options(a, kind, z, o)?;
        if o.store.is_some() && (o.withdist || o.withhash || o.withcoord) {
            let what = if kind == Kind::SearchStore { "GEOSEARCHSTORE" } else { "STORE option in GEORADIUS" };
            return Err(Frame::error(format!("ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options")));
        }
        if kind.is_search() && !(o.from_member || o.from_lonlat) {
            return Err(err_quoting("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for ", name, ""));
        }
        if kind.is_search() && !(o.by_radius || o.by_box) {
            return Err(err_quoting("ERR exactly one of BYRADIUS and BYBOX can be specified for ", name, ""));
        }
        if o.any && o.count == 0 {
            return Err(err("ERR the ANY argument requires COUNT argument"));
        }
        let (Some(z), Some((lon, lat)), Some((shape_kind, conversion))) = (z, o.center, o.kind) else {
            // The source is missing: an empty reply, or the destination deleted.
            let reply = if o.store.is_some() { Frame::Integer(0) } else { Frame::Array(Vec::new()) };
            return Ok((o, o_store_empty(), reply));
        };
        let mut sort = o.sort();
        if o.count != 0 && sort == Sort::None && !o.any {
            sort = Sort::Asc;
        }
        let shape = Shape { lon, lat, conversion, kind: shape_kind };
        let limit = if o.any { usize::try_from(o.count).unwrap_or(usize::MAX) } else { 0 };
        let need_dist = o.withdist || sort != Sort::None || matches!(o.store, Some((_, true)));
        let mut found = search(z, &shape, limit, need_dist);
        let returned = if o.count == 0 { found.len() } else { found.len().min(usize::try_from(o.count).unwrap_or(usize::MAX)) };
        // As Redis: a full sort is glibc's qsort (a stable merge sort at these sizes), a
        // partial one (COUNT below the number found) its pqsort.
        match (sort, returned == found.len()) {
            (Sort::Asc, true) => found.sort_by(by_distance),
            (Sort::Desc, true) => found.sort_by(|x, y| by_distance(y, x)),
            (Sort::Asc, false) if returned > 0 => pqsort(&mut found, &c_asc, 0, returned - 1),
            (Sort::Desc, false) if returned > 0 => pqsort(&mut found, &|x, y| c_asc(x, y).reverse(), 0, returned - 1),
            _ => {}
        }
        found.truncate(returned);
        if let Some((_, storedist)) = o.store {
            let points = found
                .iter()
                .map(|f| StoredPoint { member: f.member.to_vec(), score: if storedist { f.dist / conversion } else { f.score } })
                .collect();
            return Ok((o, Some(points), Frame::Integer(returned as i64)));
        }
        let items = found
            .iter()
            .map(|f| {
                let member = Frame::Bulk(Bytes::copy_from_slice(f.member));
                if !(o.withdist || o.withhash || o.withcoord) {
                    return member;
                }
                let mut item = Vec::with_capacity(4);
                item.push(member);
                if o.withdist {
                    item.push(Frame::Bulk(format_distance(f.dist / conversion)));
                }
                if o.withhash {
                    item.push(Frame::Integer(f.score as i64));
                }
                if o.withcoord {
                    item.push(coord_pair(f.lon, f.lat));
                }
                Frame::Array(item)
            })
            .collect();
        Ok((o, None, Frame::Array(items)))
    })();
    let (o, points, reply) = match outcome {
        Ok(x) => x,
        Err(e) => return e,
    };
    let Some((dest, _)) = o.store else {
        // A search that stores nothing writes nothing.
        ctx.propagate_nothing();
        return ctx.unchanged(reply);
    };
    let mut z = ZSet::new();
    for p in points.unwrap_or_default() {
        z.insert(&p.member, p.score, &limits);
    }
    let event = if kind == Kind::SearchStore { "geosearchstore" } else { "georadiusstore" };
    let written = store_result(ctx, &a[dest], z, event);
    if !written {
        ctx.propagate_nothing();
        return ctx.unchanged(reply);
    }
    // The destination's position among the command's keys: GEOSEARCHSTORE's is first, a
    // GEORADIUS STORE key comes after the source.
    let position = if kind == Kind::SearchStore { 0 } else { 1 };
    ctx.modified_only(KeysModified::key(position));
    reply
}

/// A member and score to store.
struct StoredPoint {
    member: Vec<u8>,
    score: f64,
}

/// What a store of a missing source writes: nothing (the destination is deleted).
fn o_store_empty() -> Option<Vec<StoredPoint>> {
    Some(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_print_as_redis() {
        assert_eq!(&format_distance(0.0)[..], b"0.0000");
        assert_eq!(&format_distance(166274.15156960033)[..], b"166274.1516");
        assert_eq!(&format_distance(0.00004)[..], b"0.0000");
        assert_eq!(&format_distance(1.23456)[..], b"1.2346");
    }

    #[test]
    fn coordinates_print_as_redis() {
        assert_eq!(&format_coord(13.361389338970184)[..], b"13.36138933897018433");
        assert_eq!(&format_coord(-179.99999731779099)[..], b"-179.99999731779098511");
        assert_eq!(&format_coord(0.0)[..], b"0");
        assert_eq!(&format_coord(-0.0)[..], b"0");
        assert_eq!(&format_coord(1.5)[..], b"1.5");
    }

    #[test]
    fn pqsort_sorts_the_wanted_range() {
        let mut seed = 12345u64;
        for n in [0usize, 1, 2, 6, 7, 8, 40, 41, 100, 1000] {
            for dup in [1u64, 3, 1000] {
                let mut v: Vec<(u64, usize)> = (0..n)
                    .map(|i| {
                        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        ((seed >> 33) % dup, i)
                    })
                    .collect();
                let mut sorted = v.clone();
                sorted.sort_by_key(|x| x.0);
                let keep = n / 3;
                if keep == 0 {
                    continue;
                }
                pqsort(&mut v, &|a: &(u64, usize), b: &(u64, usize)| a.0.cmp(&b.0), 0, keep - 1);
                let got: Vec<u64> = v[..keep].iter().map(|x| x.0).collect();
                let want: Vec<u64> = sorted[..keep].iter().map(|x| x.0).collect();
                assert_eq!(got, want, "n {n} dup {dup}");
                let mut all: Vec<usize> = v.iter().map(|x| x.1).collect();
                all.sort();
                assert_eq!(all, (0..n).collect::<Vec<_>>());
            }
        }
    }

    fn keys_of(line: &str) -> Vec<usize> {
        let args = abacus_protocol::Args::from_vec(line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect());
        crate::command::lookup(&args[0]).unwrap().key_indexes(&args).collect()
    }

    #[test]
    fn store_keys_are_keys() {
        assert_eq!(keys_of("georadius src 1 2 3 km"), vec![1]);
        assert_eq!(keys_of("georadius src 1 2 3 km store dst"), vec![1, 7]);
        assert_eq!(keys_of("georadius src 1 2 3 km STOREDIST dst asc count 3"), vec![1, 7]);
        assert_eq!(keys_of("georadius src 1 2 3 km store a storedist b"), vec![1, 9]);
        assert_eq!(keys_of("georadius src 1 2 3 km store store count 5"), vec![1, 7]);
        assert_eq!(keys_of("georadius src 1 2 3 km store"), vec![1]);
        assert_eq!(keys_of("georadius src 1 2 3 km bogus store x"), vec![1]);
        assert_eq!(keys_of("georadiusbymember src m 3 km store dst"), vec![1, 6]);
        assert_eq!(keys_of("georadius_ro src 1 2 3 km store dst"), vec![1]);
        assert_eq!(keys_of("geosearchstore dst src frommember m byradius 1 km"), vec![1, 2]);
    }
}
