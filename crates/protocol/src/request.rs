//! Incremental parser of client requests (RESP multibulk and inline).
//!
//! The parser is a small state machine that remembers how far into the
//! current command it got, so bytes are examined once no matter how the
//! command is chopped into reads: a 1,000,000-argument command arriving in
//! 1 KiB pieces costs linear total time, and a 500 MB bulk arriving in 64 KB
//! pieces costs O(1) per call (payloads are never scanned, only counted).
//!
//! Zero-copy: while a command is incomplete nothing is removed from the
//! caller's buffer; argument positions are kept as offsets. When the command
//! completes, its bytes are split off the buffer in one `split_to` and every
//! argument is a view of that block ([`Args`]: no reference count per
//! argument; the commands of a run taken by `parse_batch` share one argument
//! list and one reference to the block). The offset list is reused between
//! commands.
//! Trade-off: the arguments keep the block alive until they are dropped, so
//! the caller's `BytesMut` must reallocate rather than reuse that memory.
//!
//! Contract: between calls that returned `Ok(None)` the caller may only
//! append to the buffer. If it shrank anyway the parser notices and starts
//! the command over (it cannot panic either way).
//!
//! Error texts and their order of checks follow Redis 7.2's
//! `processMultibulkBuffer` / `processInlineBuffer`, including its leniency:
//! the two bytes after a bulk payload are skipped without checking they are
//! CRLF, and the byte after a header's `\r` is not checked to be `\n`.

use bytes::{Buf, Bytes, BytesMut};

use crate::args::Args;
use crate::inline::{split_into, Arg};
use crate::{string2ll, Limits, ProtocolError};

/// Initial capacity for the offset list from a count prefix is capped here:
/// a `*2147483647` header alone must not reserve gigabytes.
const MAX_PREALLOC_ARGS: usize = 1024;

/// After a huge command the reusable offset list is released if it grew
/// beyond this many entries, so one big command doesn't pin memory forever.
const MAX_RETAINED_ARGS: usize = 64 * 1024;

/// The fast path takes commands of at most this many arguments, so a command that turns out
/// incomplete wastes a bounded look before the state machine takes over.
const FAST_MAX_ARGS: i64 = 64;

/// Most digits of a header number (`*<count>`, `$<len>`) the fast path reads: more than any
/// limit allows and few enough that the value cannot overflow. Longer lines go to the state
/// machine, which knows every error they can produce.
const FAST_MAX_DIGITS: usize = 18;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between commands: the next byte decides multibulk vs inline.
    Idle,
    /// Saw `*`, waiting for the complete count line.
    Count,
    /// Reading arguments; `remaining` still to come.
    Args { remaining: usize },
    /// Header of the current argument read; waiting for `len` payload bytes
    /// (plus 2 terminator bytes) starting at `pos`.
    Payload { remaining: usize, len: usize },
    /// Inline command, waiting for `\n`.
    Inline,
}

/// Incremental, stateful parser of client requests.
pub struct RequestParser {
    limits: Limits,
    state: State,
    /// Offset (from the buffer's start) of the next unparsed byte of the
    /// current command.
    pos: usize,
    /// Where the search for the current line's terminator resumes, so a
    /// header line arriving byte by byte is not rescanned.
    scan: usize,
    /// Argument ranges of the current command, relative to the buffer start (of every
    /// command of the run during [`RequestParser::parse_batch`]).
    spans: Vec<(usize, usize)>,
    /// During [`RequestParser::parse_batch`]: where each command's spans end in `spans`.
    batch_ends: Vec<usize>,
    /// Bytes examined by terminator searches (tests prove linearity with it).
    #[cfg(test)]
    pub(crate) scanned: usize,
    /// Tests turn the fast path off to check it against the state machine.
    #[cfg(test)]
    pub(crate) fast_path: bool,
}

impl Default for RequestParser {
    fn default() -> Self {
        RequestParser::new(Limits::default())
    }
}

impl RequestParser {
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            state: State::Idle,
            pos: 0,
            scan: 0,
            spans: Vec::new(),
            batch_ends: Vec::new(),
            #[cfg(test)]
            scanned: 0,
            #[cfg(test)]
            fast_path: true,
        }
    }

    /// New limits apply from the next check on (e.g. after CONFIG SET).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Bytes at the front of the buffer already accounted to the command in
    /// progress (0 between commands).
    pub fn pending_bytes(&self) -> usize {
        self.pos
    }

    /// While a bulk payload is awaited: how many more bytes complete it
    /// (including its CRLF), so the caller can reserve buffer space once
    /// instead of growing repeatedly. `None` when nothing definite is known.
    pub fn bulk_bytes_needed(&self, buf_len: usize) -> Option<usize> {
        match self.state {
            State::Payload { len, .. } => Some(
                self.pos
                    .saturating_add(len)
                    .saturating_add(2)
                    .saturating_sub(buf_len),
            ),
            _ => None,
        }
    }

    /// Forgets any partial command.
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.pos = 0;
        self.scan = 0;
        if self.spans.capacity() > MAX_RETAINED_ARGS {
            self.spans = Vec::new();
        } else {
            self.spans.clear();
        }
    }

    /// Parses one complete command from the front of `buf`.
    ///
    /// `Ok(Some(args))`: the command's bytes were removed from `buf` and
    /// `args` are zero-copy slices of them. `Ok(None)`: incomplete; progress
    /// is kept, call again after appending more bytes. Empty inline lines and
    /// `*0` / negative counts are consumed and skipped. After `Err` the caller
    /// is expected to close the connection (the parser is reset anyway).
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Args>, ProtocolError> {
        if self.pos > buf.len() || self.scan > buf.len() {
            // Contract broken (buffer shrank): restart rather than misread.
            self.reset();
        }
        let result = self.run(buf);
        if result.is_err() {
            self.reset();
        }
        result
    }

    fn run(&mut self, buf: &mut BytesMut) -> Result<Option<Args>, ProtocolError> {
        loop {
            match self.state {
                State::Idle => {
                    let Some(&first) = buf.first() else {
                        return Ok(None);
                    };
                    self.pos = 0;
                    if first == b'*' {
                        if let Some(end) = self.complete_multibulk(buf) {
                            self.pos = end;
                            return Ok(Some(self.finish(buf)));
                        }
                        self.state = State::Count;
                        self.scan = 1;
                    } else {
                        self.state = State::Inline;
                        self.scan = 0;
                    }
                }
                State::Count => {
                    let Some(cr) = self.find_cr(buf, "too big mbulk count string")? else {
                        return Ok(None);
                    };
                    let digits = buf.get(1..cr).unwrap_or(&[]);
                    let count = match string2ll(digits) {
                        Some(n) if n <= self.limits.max_multibulk_len as i64 => n,
                        _ => return Err(ProtocolError::new("invalid multibulk length")),
                    };
                    if self.limits.unauthenticated && count > crate::UNAUTHENTICATED_MAX_ARGS {
                        return Err(ProtocolError::new("unauthenticated multibulk length"));
                    }
                    let next = cr + 2;
                    if count <= 0 {
                        // `*0` / `*-1`: Redis consumes the header and moves on.
                        buf.advance(next);
                        self.reset();
                        continue;
                    }
                    let count = count as usize;
                    self.spans.clear();
                    self.spans.reserve(count.min(MAX_PREALLOC_ARGS));
                    self.pos = next;
                    self.scan = next;
                    self.state = State::Args { remaining: count };
                }
                State::Args { remaining } => {
                    if remaining == 0 {
                        return Ok(Some(self.finish(buf)));
                    }
                    // Redis checks the '$' only once the header line is
                    // complete; keep that order so errors match.
                    let Some(cr) = self.find_cr(buf, "too big bulk count string")? else {
                        return Ok(None);
                    };
                    let start = self.pos;
                    let first = buf.get(start).copied().unwrap_or(0);
                    if first != b'$' {
                        return Err(ProtocolError(format!(
                            "expected '$', got '{}'",
                            first as char
                        )));
                    }
                    let digits = buf.get(start + 1..cr).unwrap_or(&[]);
                    let len = match string2ll(digits) {
                        Some(n) if n >= 0 && n as u64 <= self.limits.max_bulk_len as u64 => {
                            n as usize
                        }
                        _ => return Err(ProtocolError::new("invalid bulk length")),
                    };
                    if self.limits.unauthenticated && len as i64 > crate::UNAUTHENTICATED_MAX_BULK {
                        return Err(ProtocolError::new("unauthenticated bulk length"));
                    }
                    self.pos = cr + 2;
                    self.state = State::Payload { remaining, len };
                }
                State::Payload { remaining, len } => {
                    // O(1) per call: the payload is measured, never scanned.
                    let end = self.pos.saturating_add(len);
                    if end.saturating_add(2) > buf.len() {
                        return Ok(None);
                    }
                    self.spans.push((self.pos, end));
                    self.pos = end + 2; // terminator skipped unchecked, as Redis
                    self.scan = self.pos;
                    self.state = State::Args {
                        remaining: remaining - 1,
                    };
                }
                State::Inline => match self.parse_inline(buf)? {
                    Some(args) => return Ok(Some(args)),
                    None if self.state == State::Idle => continue, // empty line skipped
                    None => return Ok(None),
                },
            }
        }
    }

    /// The fast path for what pipelines send: a complete, well-formed multibulk of a few
    /// arguments already in the buffer. Reads it in one pass without the state machine's
    /// bookkeeping and returns where it ends, its argument spans in `self.spans`. Returns None,
    /// having changed nothing but `spans`, for anything else (incomplete, `*0`, too many
    /// arguments, long header lines, any error); the state machine then parses the command
    /// from its start with Redis's exact checks and error texts. A successful fast parse
    /// accepts exactly what the state machine would: the same first-`\r` line ends, the same
    /// `string2ll` grammar, the same limits, the same unchecked payload terminators
    /// (`fast_path_matches_state_machine` checks this on random input).
    fn complete_multibulk(&mut self, buf: &[u8]) -> Option<usize> {
        self.spans.clear();
        self.complete_multibulk_at(buf, 0)
    }

    /// [`Self::complete_multibulk`] for a command starting at `from` (at its `*`): its spans
    /// are appended to `self.spans`, which is left as it was if the fast path declines.
    fn complete_multibulk_at(&mut self, buf: &[u8], from: usize) -> Option<usize> {
        #[cfg(test)]
        if !self.fast_path {
            return None;
        }
        let kept = self.spans.len();
        let end = self.fast_args(buf, from);
        if end.is_none() {
            self.spans.truncate(kept);
        }
        end
    }

    fn fast_args(&mut self, buf: &[u8], from: usize) -> Option<usize> {
        if buf.get(from) != Some(&b'*') {
            return None;
        }
        let (count, mut pos) = self.header_number(buf, from + 1)?;
        if count <= 0 || count > FAST_MAX_ARGS || count as u64 > self.limits.max_multibulk_len as u64 {
            return None;
        }
        if self.limits.unauthenticated && count > crate::UNAUTHENTICATED_MAX_ARGS {
            return None;
        }
        // The largest payload accepted, both limits in one (checked once per argument).
        let max_len = if self.limits.unauthenticated {
            self.limits.max_bulk_len.min(crate::UNAUTHENTICATED_MAX_BULK as usize)
        } else {
            self.limits.max_bulk_len
        };
        for _ in 0..count {
            // `$` and one or two digits, what nearly every argument's header is, read from one
            // five-byte window (the byte after the `\r` included, as `header_number` wants);
            // anything else goes through `header_number`.
            let (len, start) = match buf.get(pos..pos + 5) {
                Some(&[b'$', d0 @ b'0'..=b'9', b'\r', _, _]) => {
                    #[cfg(test)]
                    {
                        self.scanned += 2;
                    }
                    (usize::from(d0 - b'0'), pos + 4)
                }
                Some(&[b'$', d0 @ b'1'..=b'9', d1 @ b'0'..=b'9', b'\r', _]) => {
                    #[cfg(test)]
                    {
                        self.scanned += 3;
                    }
                    (usize::from(d0 - b'0') * 10 + usize::from(d1 - b'0'), pos + 5)
                }
                _ => {
                    if buf.get(pos) != Some(&b'$') {
                        return None;
                    }
                    let (len, start) = self.header_number(buf, pos + 1)?;
                    (usize::try_from(len).ok()?, start)
                }
            };
            if len > max_len {
                return None;
            }
            let end = start + len;
            if end + 2 > buf.len() {
                return None;
            }
            self.spans.push((start, end));
            pos = end + 2; // terminator skipped unchecked, as Redis
        }
        Some(pos)
    }

    /// Parses a run of complete commands at the front of `buf` with the fast path (at most
    /// `max`), appending each one's arguments to `out`, and returns how many it took. The run
    /// leaves the buffer with ONE split, and its arguments are slices of that one block: a
    /// pipeline of 100 commands costs one `split_to` (and one reference count on the block)
    /// instead of 100. It takes nothing (returns 0) in the middle of a command, or when the
    /// next command needs the state machine (incomplete, inline, unusual or erroneous); then
    /// [`Self::parse`] handles that one. Taking a command here or through `parse` gives the
    /// same arguments and consumes the same bytes.
    pub fn parse_batch(&mut self, buf: &mut BytesMut, max: usize, out: &mut Vec<Args>) -> usize {
        if self.state != State::Idle {
            return 0;
        }
        self.spans.clear();
        self.batch_ends.clear();
        let mut end = 0;
        while self.batch_ends.len() < max {
            match self.complete_multibulk_at(buf, end) {
                Some(next) => {
                    end = next;
                    self.batch_ends.push(self.spans.len());
                }
                None => break,
            }
        }
        let taken = self.batch_ends.len();
        if taken == 0 {
            return 0;
        }
        let block = buf.split_to(end).freeze();
        // One argument list and one reference to the block for the whole run, shared by its
        // commands (see `args.rs`).
        Args::from_block_run(block, &self.spans, &self.batch_ends, out);
        self.reset();
        if self.batch_ends.capacity() > MAX_RETAINED_ARGS {
            self.batch_ends = Vec::new();
        }
        taken
    }

    /// The number on the header line whose digits start at `from`: `(value, index after the
    /// CRLF)`. None unless the line's `\r` and the byte after it are in the buffer and the line
    /// is 1 to [`FAST_MAX_DIGITS`] decimal digits without a leading zero (or `0` itself): a
    /// subset of `string2ll`'s grammar, parsed in the same pass that looks for the `\r`.
    /// Anything else (a sign, a long or malformed line) is left to the state machine.
    #[inline]
    fn header_number(&mut self, buf: &[u8], from: usize) -> Option<(i64, usize)> {
        let line = buf.get(from..)?;
        // One or two digits, what most headers hold, without the loop (the byte after the
        // `\r` must be there too, as below).
        match *line {
            [d0 @ b'0'..=b'9', b'\r', _, ..] => {
                #[cfg(test)]
                {
                    self.scanned += 2;
                }
                return Some((i64::from(d0 - b'0'), from + 3));
            }
            [d0 @ b'1'..=b'9', d1 @ b'0'..=b'9', b'\r', _, ..] => {
                #[cfg(test)]
                {
                    self.scanned += 3;
                }
                return Some((i64::from(d0 - b'0') * 10 + i64::from(d1 - b'0'), from + 4));
            }
            _ => {}
        }
        let mut value: i64 = 0;
        let mut n = 0;
        loop {
            let c = *line.get(n)?;
            #[cfg(test)]
            {
                self.scanned += 1;
            }
            if c == b'\r' {
                break;
            }
            let digit = c.wrapping_sub(b'0');
            if digit > 9 || n == FAST_MAX_DIGITS {
                return None;
            }
            value = value * 10 + i64::from(digit);
            n += 1;
        }
        if n == 0 || (n > 1 && line[0] == b'0') {
            return None;
        }
        let cr = from + n;
        if cr + 1 >= buf.len() {
            return None;
        }
        Some((value, cr + 2))
    }

    /// Finds the `\r` ending the header line that starts at `self.pos`,
    /// resuming where the previous call stopped. `Ok(None)` while the line
    /// (or the one byte after `\r`) has not arrived; an error once more than
    /// `max_inline_len` bytes are buffered without any `\r`.
    fn find_cr(&mut self, buf: &[u8], too_big: &str) -> Result<Option<usize>, ProtocolError> {
        let from = self.scan.max(self.pos);
        let hay = buf.get(from..).unwrap_or(&[]);
        match find_byte(b'\r', hay) {
            Some(i) => {
                let cr = from + i;
                #[cfg(test)]
                {
                    self.scanned += i + 1;
                }
                // Park the scan on the '\r' so a later call finds it in O(1).
                self.scan = cr;
                // Redis also needs the byte after '\r' (assumed to be '\n').
                if cr + 1 >= buf.len() {
                    return Ok(None);
                }
                Ok(Some(cr))
            }
            None => {
                #[cfg(test)]
                {
                    self.scanned += hay.len();
                }
                self.scan = buf.len();
                if buf.len() - self.pos > self.limits.max_inline_len {
                    return Err(ProtocolError::new(too_big));
                }
                Ok(None)
            }
        }
    }

    /// Splits the finished multibulk off the buffer and slices the args.
    fn finish(&mut self, buf: &mut BytesMut) -> Args {
        let block = buf.split_to(self.pos.min(buf.len())).freeze();
        // Spans lie inside the block by construction; `from_block` stays safe anyway.
        let args = Args::from_block(block, &self.spans);
        self.reset();
        args
    }

    /// Inline request: one line up to `\n` (a preceding `\r` is dropped).
    /// Returns `Ok(None)` both when incomplete and when the line was empty
    /// (then the state is back to `Idle` and the line consumed).
    fn parse_inline(&mut self, buf: &mut BytesMut) -> Result<Option<Args>, ProtocolError> {
        let from = self.scan;
        let hay = buf.get(from..).unwrap_or(&[]);
        let Some(i) = find_byte(b'\n', hay) else {
            #[cfg(test)]
            {
                self.scanned += hay.len();
            }
            self.scan = buf.len();
            if buf.len() > self.limits.max_inline_len {
                return Err(ProtocolError::new("too big inline request"));
            }
            return Ok(None);
        };
        #[cfg(test)]
        {
            self.scanned += i + 1;
        }
        let nl = from + i;
        let mut end = nl;
        if end > 0 && buf.get(end - 1) == Some(&b'\r') {
            end -= 1;
        }
        let mut tokens = Vec::new();
        if split_into(buf.get(..end).unwrap_or(&[]), &mut tokens).is_err() {
            return Err(ProtocolError::new("unbalanced quotes in request"));
        }
        let block = buf.split_to(nl + 1).freeze();
        self.reset();
        if tokens.is_empty() {
            return Ok(None);
        }
        Ok(Some(Args::from_vec(
            tokens
                .into_iter()
                .map(|t| match t {
                    Arg::Span(s, e) if s <= e && e <= block.len() => block.slice(s..e),
                    Arg::Span(..) => Bytes::new(),
                    Arg::Owned(v) => Bytes::from(v),
                })
                .collect(),
        )))
    }
}

/// `memchr` with a scalar prelude: header lines are typically 2-5 bytes
/// (`$3`, `*12`), where a plain loop beats the SIMD routine's setup cost.
#[inline]
fn find_byte(needle: u8, hay: &[u8]) -> Option<usize> {
    const SHORT: usize = 16;
    let head = hay.get(..SHORT).unwrap_or(hay);
    if let Some(i) = head.iter().position(|&c| c == needle) {
        return Some(i);
    }
    let tail = hay.get(SHORT..)?;
    memchr::memchr(needle, tail).map(|i| i + SHORT)
}

#[cfg(test)]
mod tests;
