//! Sketch parameters and the 3-byte header that encodes them.
//!
//! The ranges are the storage specification's (log2m 4..=31, regwidth 1..=8,
//! expthresh -1 / 0 / a power of two), wider than what postgresql-hll lets a
//! user create (log2m <= 17, regwidth <= 7, expthresh <= 8192: see
//! [`Params::is_pg_compatible`]). log2m below 4 is refused because
//! postgresql-hll cannot estimate with fewer than 16 registers; the explicit
//! threshold stops at 2^32 (the header could name up to 2^61, which is no
//! sensible set size).
//!
//! Header layout (spec v1.0.0):
//! byte 0 = version 1 << 4 | type; byte 1 = (regwidth - 1) << 5 | log2m;
//! byte 2 = sparseon << 6 | cutoff code (0 = explicit off, 63 = auto,
//! else log2(expthresh) + 1); bit 7 of byte 2 is reserved and must be zero.

use crate::error::{corrupt, HllError};

/// postgresql-hll's `mse_nelem_max()`: how many explicit values fit its 128 KiB
/// buffer. It refuses to read an explicit value with more elements, and the
/// automatic threshold never exceeds it (see [`Params::explicit_threshold`]).
pub(crate) const PG_MAX_EXPLICIT: usize = 16383;

/// The four parameters of a sketch. Two sketches can only be combined when
/// all four are equal (as in postgresql-hll, expthresh -1 and the number it
/// resolves to are *different* parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Params {
    log2m: u8,
    regwidth: u8,
    expthresh: i64,
    sparseon: bool,
}

impl Default for Params {
    /// postgresql-hll's defaults: (11, 5, -1, 1).
    fn default() -> Self {
        Params {
            log2m: 11,
            regwidth: 5,
            expthresh: -1,
            sparseon: true,
        }
    }
}

impl Params {
    /// Validates and builds parameters.
    ///
    /// * `log2m`: 4..=31, the sketch has 2^log2m registers;
    /// * `regwidth`: 1..=8 bits per register;
    /// * `expthresh`: -1 (automatic), 0 (no explicit phase) or a power of two
    ///   up to 2^32: the number of distinct values kept exactly;
    /// * `sparseon`: whether the sparse serialized form may be used.
    pub fn new(
        log2m: i64,
        regwidth: i64,
        expthresh: i64,
        sparseon: bool,
    ) -> Result<Params, HllError> {
        if !(4..=31).contains(&log2m) {
            return Err(HllError::InvalidParam {
                name: "log2m",
                value: log2m,
                allowed: "between 4 and 31",
            });
        }
        if !(1..=8).contains(&regwidth) {
            return Err(HllError::InvalidParam {
                name: "regwidth",
                value: regwidth,
                allowed: "between 1 and 8",
            });
        }
        let power_of_two = expthresh > 0 && expthresh & (expthresh - 1) == 0;
        if !(expthresh == -1 || expthresh == 0 || (power_of_two && expthresh <= 1 << 32)) {
            return Err(HllError::InvalidParam {
                name: "expthresh",
                value: expthresh,
                allowed: "-1 (auto), 0 (off) or a power of two between 1 and 4294967296",
            });
        }
        Ok(Params {
            log2m: log2m as u8,
            regwidth: regwidth as u8,
            expthresh,
            sparseon,
        })
    }

    /// log2 of the number of registers.
    pub fn log2m(&self) -> u32 {
        u32::from(self.log2m)
    }

    /// Bits per register.
    pub fn regwidth(&self) -> u32 {
        u32::from(self.regwidth)
    }

    /// The explicit threshold as given: -1 (auto), 0 or a power of two.
    pub fn expthresh(&self) -> i64 {
        self.expthresh
    }

    /// Whether the sparse serialized form is allowed.
    pub fn sparseon(&self) -> bool {
        self.sparseon
    }

    /// Number of registers, 2^log2m.
    pub fn num_registers(&self) -> usize {
        1usize << self.log2m
    }

    /// The number of distinct values kept exactly before switching to
    /// registers (postgresql-hll's `expthresh_value`). For -1 it is the number
    /// of 8-byte values that fit in the full form's size, ceil(m * regwidth / 8) / 8,
    /// capped at postgresql-hll's buffer limit of 16383 (the cap only matters
    /// for parameters postgresql-hll does not accept).
    pub fn explicit_threshold(&self) -> usize {
        match self.expthresh {
            -1 => (self.full_payload_len() / 8).min(PG_MAX_EXPLICIT as u64) as usize,
            t => t as usize,
        }
    }

    /// True when postgresql-hll 2.17 accepts these parameters (log2m <= 17,
    /// regwidth <= 7, expthresh <= 8192; its cardinality also overflows for
    /// regwidth >= 6, see the crate documentation).
    pub fn is_pg_compatible(&self) -> bool {
        self.log2m <= 17 && self.regwidth <= 7 && self.expthresh <= 8192
    }

    /// Largest value a register can hold: 2^regwidth - 1, and never more than
    /// 64 - log2m (the longest run a 64-bit hash can produce once the index
    /// bits are removed). Anything larger in serialized input is corrupt.
    pub(crate) fn max_register(&self) -> u8 {
        let cap = (1u32 << self.regwidth) - 1;
        cap.min(64 - u32::from(self.log2m)) as u8
    }

    /// Bytes of the FULL payload: ceil(m * regwidth / 8).
    pub(crate) fn full_payload_len(&self) -> u64 {
        ((1u64 << self.log2m) * u64::from(self.regwidth)).div_ceil(8)
    }

    /// The three header bytes for a value of the given type code.
    pub(crate) fn header(&self, type_code: u8) -> [u8; 3] {
        let cutoff = match self.expthresh {
            -1 => 63,
            0 => 0,
            t => t.trailing_zeros() as u8 + 1,
        };
        [
            0x10 | type_code,
            (self.regwidth - 1) << 5 | self.log2m,
            u8::from(self.sparseon) << 6 | cutoff,
        ]
    }

    /// Parses header bytes 1 and 2.
    pub(crate) fn from_header(b1: u8, b2: u8) -> Result<Params, HllError> {
        if b2 & 0x80 != 0 {
            return Err(corrupt(format!(
                "reserved bit 7 of header byte 2 is set (0x{b2:02x})"
            )));
        }
        let expthresh = match b2 & 0x3f {
            63 => -1,
            0 => 0,
            code => 1i64 << (code - 1),
        };
        Params::new(
            i64::from(b1 & 0x1f),
            i64::from(b1 >> 5) + 1,
            expthresh,
            b2 & 0x40 != 0,
        )
        .map_err(|e| corrupt(format!("header: {e}")))
    }

    /// Describes how `self` and `other` differ, or `None` when they are equal.
    pub(crate) fn mismatch(&self, other: &Params) -> Option<String> {
        let mut parts = Vec::new();
        if self.log2m != other.log2m {
            parts.push(format!("log2m {} vs {}", self.log2m, other.log2m));
        }
        if self.regwidth != other.regwidth {
            parts.push(format!("regwidth {} vs {}", self.regwidth, other.regwidth));
        }
        if self.expthresh != other.expthresh {
            parts.push(format!(
                "expthresh {} vs {}",
                self.expthresh, other.expthresh
            ));
        }
        if self.sparseon != other.sparseon {
            parts.push(format!(
                "sparseon {} vs {}",
                u8::from(self.sparseon),
                u8::from(other.sparseon)
            ));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_encode_like_postgresql_hll() {
        assert_eq!(Params::default().header(1), [0x11, 0x8b, 0x7f]);
        assert_eq!(Params::default().explicit_threshold(), 160);
        assert_eq!(
            Params::new(17, 7, 8192, true).unwrap().header(1),
            [0x11, 0xd1, 0x4e]
        );
        assert_eq!(
            Params::new(4, 1, -1, true).unwrap().header(1),
            [0x11, 0x04, 0x7f]
        );
        assert_eq!(Params::new(4, 1, -1, true).unwrap().explicit_threshold(), 0);
    }

    #[test]
    fn header_round_trips_for_every_valid_combination() {
        for log2m in 4..=31 {
            for regwidth in 1..=8 {
                let mut thresholds = vec![-1, 0];
                thresholds.extend((0..=32).map(|k| 1i64 << k));
                for expthresh in thresholds {
                    for sparseon in [false, true] {
                        let p = Params::new(log2m, regwidth, expthresh, sparseon).unwrap();
                        let h = p.header(4);
                        assert_eq!(Params::from_header(h[1], h[2]).unwrap(), p);
                    }
                }
            }
        }
    }

    #[test]
    fn errors_name_the_parameter_and_range() {
        let msg = |r: Result<Params, HllError>| r.unwrap_err().to_string();
        assert_eq!(
            msg(Params::new(3, 5, -1, true)),
            "invalid log2m 3: log2m must be between 4 and 31"
        );
        assert_eq!(
            msg(Params::new(11, 9, -1, true)),
            "invalid regwidth 9: regwidth must be between 1 and 8"
        );
        assert!(msg(Params::new(11, 5, 3, true))
            .starts_with("invalid expthresh 3: expthresh must be -1 (auto)"));
        assert!(Params::new(11, 5, 1 << 33, true).is_err());
        assert!(Params::new(11, 5, -2, true).is_err());
        assert!(Params::from_header(0x8b, 0x7f | 0x80).is_err());
        assert!(Params::from_header(0x83, 0x7f).is_err()); // log2m 3
        assert!(Params::from_header(0x8b, 35).is_err()); // expthresh 2^34
    }
}
