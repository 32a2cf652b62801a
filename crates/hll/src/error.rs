//! The crate's single error type.
//!
//! Three kinds of failure exist: a parameter out of range (constructing
//! [`Params`](crate::Params)), malformed serialized input
//! ([`Hll::from_bytes`](crate::Hll::from_bytes)), and a union of sketches whose
//! parameters differ. Messages are meant to be shown to users as they are, so
//! they name the offending parameter or byte and what was expected.

use std::fmt;

/// Error returned by this crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HllError {
    /// A parameter is outside its allowed range.
    InvalidParam {
        /// `"log2m"`, `"regwidth"` or `"expthresh"`.
        name: &'static str,
        /// The rejected value.
        value: i64,
        /// Human-readable description of the allowed values.
        allowed: &'static str,
    },
    /// Serialized bytes are not a valid HLL (truncated, trailing bytes,
    /// inconsistent header, unsorted values...). The text says what is wrong.
    Corrupt(String),
    /// The two sketches of a union have different parameters; the text lists
    /// each differing parameter with both values.
    ParamMismatch(String),
}

impl fmt::Display for HllError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HllError::InvalidParam {
                name,
                value,
                allowed,
            } => {
                write!(f, "invalid {name} {value}: {name} must be {allowed}")
            }
            HllError::Corrupt(msg) => write!(f, "invalid hll value: {msg}"),
            HllError::ParamMismatch(msg) => {
                write!(
                    f,
                    "cannot combine hll values with different parameters: {msg}"
                )
            }
        }
    }
}

impl std::error::Error for HllError {}

/// Shorthand for building a [`HllError::Corrupt`].
pub(crate) fn corrupt(msg: impl Into<String>) -> HllError {
    HllError::Corrupt(msg.into())
}
