//! RESP2/RESP3 codec for Abacus.
//!
//! What this crate is for: turning client bytes into command argument lists
//! ([`RequestParser`]), turning reply values into bytes ([`Frame`], [`encode`]),
//! and, for tests, benchmarks and replication, parsing any RESP frame back
//! ([`parse_frame`]).
//!
//! What it is not: it does no I/O. It never touches sockets, never blocks and
//! never spawns anything; the server owns the connection and its buffers and
//! calls in here with bytes it has already read. That keeps the codec
//! deterministic and fuzzable on plain byte slices.
//!
//! Design rules that hold for every file of the crate:
//! - every input-driven quantity has an explicit limit ([`Limits`],
//!   [`MAX_FRAME_DEPTH`]), and a length prefix never sizes an allocation
//!   on its own (capacities are capped; memory grows only with bytes that
//!   actually arrived);
//! - nothing any input can do panics: no unchecked indexing on wire data;
//! - the request hot path allocates one argument list per command, whose
//!   arguments are zero-copy views of the read buffer ([`Args`]).
//!
//! The behaviour mirrors Redis 7.2's `networking.c` (`processMultibulkBuffer`,
//! `processInlineBuffer`), including its error texts, so existing clients and
//! test suites see the same thing.
//!
//! Unsafe code: one place, `args.rs`. An [`Arg`] is a (pointer, length) view into a `Bytes`
//! owned by the batch of its [`Args`], and an `Args` a (pointer, length) view of the batch's
//! argument list, so that arguments cost no reference count each. Invariant: every such range
//! lies inside storage the batch (behind an `Arc`) owns and never changes, and an `Arg` is
//! only reachable through a shared borrow of an `Args` holding that batch (no `Arg` is ever
//! handed out by value, cloned or made outside the file). The `Send`/`Sync` impls rest on the
//! same: the bytes are immutable and move with their owner. Tests: the request parser's
//! property tests build and read `Args` over random input (`proptests.rs`); Miri runs them
//! (`scripts/miri.sh`).

mod args;
mod double;
mod frame;
mod inline;
mod reply;
mod request;

#[cfg(test)]
mod proptests;

pub use bytes::{Bytes, BytesMut};

pub use args::{Arg, Args};
pub use double::{format_double, format_double_d2string, format_double_g17, format_double_ts};
pub use frame::{encode, encode_command, BulksBuilder, Frame};
pub use inline::split_args;
pub use reply::{parse_frame, parse_frame_with, MAX_FRAME_DEPTH};
pub use request::RequestParser;

/// Which reply dialect a connection speaks (switched by `HELLO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp2,
    Resp3,
}

/// Explicit bounds on what a peer may make the parser hold or expect.
///
/// These are per-command limits; the total size of a client's buffer
/// (Redis's `client-query-buffer-limit`) is the caller's job, because the
/// caller owns the buffer.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest accepted bulk string (`proto-max-bulk-len`). Default 512 MiB.
    pub max_bulk_len: usize,
    /// Largest accepted multibulk count (arguments per command).
    /// Default `i32::MAX`, as Redis (`INT_MAX`).
    pub max_multibulk_len: usize,
    /// Longest inline request, and longest `*<n>` / `$<n>` header line, that
    /// may be buffered without a line terminator. Default 64 KiB
    /// (Redis `PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
    /// The client has not authenticated yet: as in Redis, a request may then have at most
    /// 10 arguments of at most 16 KiB each, so an unauthenticated peer cannot make the server
    /// buffer large requests.
    pub unauthenticated: bool,
}

/// Most arguments an unauthenticated request may have (Redis's limit).
pub const UNAUTHENTICATED_MAX_ARGS: i64 = 10;
/// Largest bulk an unauthenticated request may have (Redis's limit).
pub const UNAUTHENTICATED_MAX_BULK: i64 = 16384;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: i32::MAX as usize,
            max_inline_len: 64 * 1024,
            unauthenticated: false,
        }
    }
}

/// A fatal protocol violation. Holds the text after `"Protocol error: "`,
/// e.g. `"invalid bulk length"`; the caller replies with it and closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl ProtocolError {
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        ProtocolError(msg.into())
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// Redis's integer grammar, shared with every crate that reads integers (see `abacus-int`).
pub use abacus_int::string2ll;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display() {
        let e = ProtocolError::new("invalid bulk length");
        assert_eq!(e.to_string(), "Protocol error: invalid bulk length");
    }

    #[test]
    fn default_limits() {
        let l = Limits::default();
        assert_eq!(l.max_bulk_len, 512 << 20);
        assert_eq!(l.max_multibulk_len, i32::MAX as usize);
        assert_eq!(l.max_inline_len, 65536);
    }
}
