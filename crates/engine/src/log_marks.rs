//! Replication position marks in the log: the one log command that is not a client's.
//!
//! A replication position ("the data set is this stream's first `offset` bytes") is written
//! into the log as a command of its own, so that a restart knows where it stands in the
//! stream. The log's format, its reader (recovery) and its writer (replication) all need it,
//! so it lives here, beside the log and below replication: recovery reads marks without
//! knowing replication.

use abacus_persist::log as fmt;

use crate::clock::now_ms;

/// The name of the log command that marks a replication position. Never a client command
/// (a client cannot put it in the log), never fed to replicas; recovery reads it.
pub const POSITION_MARK: &[u8] = b"abacus-repl-position";

/// A point of the replication stream: the data set is exactly the stream's first `offset`
/// bytes of history `replid`; `db` is the stream's database there (None: the next command
/// of the stream selects one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub replid: String,
    pub offset: u64,
    pub db: Option<u16>,
}

/// Appends a position mark to a buffer of log commands.
pub fn push_position(buf: &mut Vec<u8>, p: &Position) {
    let db = p.db.map_or("-1".to_string(), |d| d.to_string());
    fmt::push_command(buf, &mut None, now_ms(), 0, &[POSITION_MARK, p.replid.as_bytes(), p.offset.to_string().as_bytes(), db.as_bytes()]);
}

/// What a position mark in the log says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mark {
    /// The data before it is the stream up to this position.
    At(Position),
    /// The head of a segment started by snapshot `.1`: the position holds from there.
    Segment(Position, String),
    /// The data set was replaced here without log commands (a full sync's load): the log
    /// from here on continues only the snapshot taken right after it (a `Segment` mark
    /// naming the snapshot recovery loaded). A damaged mark reads as one too.
    Barrier,
}

/// Reads a position mark's arguments (the mark's name first).
pub fn parse_mark(args: &[&[u8]]) -> Mark {
    let (position, snapshot) = match args {
        [_, replid, offset, db] => (parse_position(replid, offset, db), None),
        [_, replid, offset, db, snap] => (parse_position(replid, offset, db), Some(String::from_utf8_lossy(snap).into_owned())),
        _ => (None, None),
    };
    match (position, snapshot) {
        (Some(p), None) => Mark::At(p),
        (Some(p), Some(s)) => Mark::Segment(p, s),
        (None, _) => Mark::Barrier,
    }
}

fn parse_position(replid: &[u8], offset: &[u8], db: &[u8]) -> Option<Position> {
    if replid.len() != 40 || !replid.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let offset = std::str::from_utf8(offset).ok()?.parse::<u64>().ok()?;
    let db = match std::str::from_utf8(db).ok()?.parse::<i64>().ok()? {
        -1 => None,
        d => Some(u16::try_from(d).ok()?),
    };
    Some(Position { replid: String::from_utf8_lossy(replid).into_owned(), offset, db })
}

