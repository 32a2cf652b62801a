//! HyperLogLog sketches byte-compatible with postgresql-hll 2.17 (the
//! "HLL storage specification v1.0.0" also used by java-hll and js-hll).
//!
//! A sketch ([`Hll`]) estimates the number of distinct 64-bit hashed values
//! added to it. Values go through four representations, chosen exactly as
//! postgresql-hll chooses them so that the serialized bytes are identical:
//! EMPTY, then EXPLICIT (the distinct hashes themselves, up to
//! [`Params::explicit_threshold`]), then a register array written either
//! SPARSE or FULL depending on which is smaller. UNDEFINED is only ever read
//! from bytes and absorbs everything it is combined with.
//!
//! Hash values with [`hash_bigint`] / [`hash_bytes`] (postgresql-hll's
//! `hll_hash_bigint` / `hll_hash_bytea`, MurmurHash3 x64 128) so the same
//! element lands in the same register as in PostgreSQL.
//!
//! ```
//! use abacus_hll::{hash_bigint, hash_bytes, Hll, Params};
//!
//! let mut visitors = Hll::new(Params::default()); // (11, 5, -1, 1)
//! for user_id in 0..500i64 {
//!     visitors.add_raw(hash_bigint(user_id, 0));
//! }
//! let mut more = Hll::new(Params::new(11, 5, -1, true)?);
//! more.add_raw(hash_bytes(b"alice", 0));
//! visitors.union(&more)?;
//!
//! let estimate = visitors.cardinality().unwrap();
//! assert!((estimate - 501.0).abs() < 25.0); // about 1.6% error for log2m 11
//!
//! // The bytes are what postgresql-hll stores for the same adds.
//! let bytes = visitors.to_bytes();
//! assert_eq!(&bytes[..3], &[0x13, 0x8b, 0x7f]); // schema 1, SPARSE, (11, 5, -1, 1)
//! assert_eq!(Hll::from_bytes(&bytes)?, visitors);
//! println!("{}", visitors.info().kind); // SPARSE
//! # Ok::<(), abacus_hll::HllError>(())
//! ```
//!
//! Known postgresql-hll 2.17 quirks and how this crate treats them:
//! * its cardinality overflows `1 << L` for regwidth >= 6 and returns garbage
//!   (typically NaN) past the linear-counting range; here 2^L is a float.
//! * when log2m + regwidth < 8 it can read a SPARSE value's zero padding as an
//!   extra entry that resets register 0; here padding is padding.
//! * it accepts some malformed inputs that it never writes (unsorted or
//!   duplicate sparse entries, zero-valued sparse entries, bit 7 of header
//!   byte 2, impossible register values); [`Hll::from_bytes`] rejects them.

#![forbid(unsafe_code)]

mod bits;
mod codec;
mod error;
mod estimate;
mod murmur;
mod params;
mod sketch;

pub use error::HllError;
pub use murmur::{hash_bigint, hash_bytes, murmur3_x64_128};
pub use params::Params;
pub use sketch::{Hll, Info, Kind};
