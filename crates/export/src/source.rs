//! Where the exported data comes from: a [`Source`] answers the few questions the layout
//! writers (`summary.rs`, `streams.rs`, `series.rs`, `keys.rs`) ask, so the same writers
//! serve every form of the export:
//!
//! - online (`abacus export --host/--port`): [`crate::Client`], a RESP connection;
//! - offline (`abacus export --dir`): a data directory loaded in process, read-only
//!   (`abacus_server::export::offline::Loaded`);
//! - server side (the EXPORT command): the server's own keyspace.
//!
//! The questions: which keys match (SCAN's glob, optionally of one TYPE), the summarizer
//! rules, which series a TS filter selects, and per-key reads as commands (XRANGE,
//! HGETALL, GET, SMEMBERS, ZRANGE, LRANGE, TYPE, TS.INFO, TS.RANGE) with RESP2 replies.
//! Per-key reads are commands, not a typed API, on purpose: the in-process sources run them
//! through the server's own command table, so a key reads the same whichever way it is
//! exported, and the layouts keep one reading path.

use crate::resp::Reply;

pub trait Source {
    /// Queues a read command (answered in order by [`Source::read`] after [`Source::flush`]).
    fn queue(&mut self, args: &[&[u8]]);
    fn flush(&mut self) -> Result<(), String>;
    /// The next queued command's reply.
    fn read(&mut self) -> Result<Reply, String>;
    /// Every key of database 0 matching the glob `pattern` (of `kind`, a TYPE name, if
    /// given), sorted.
    fn keys(&mut self, pattern: &[u8], kind: Option<&str>) -> Result<Vec<Vec<u8>>, String>;
    /// The summarizer rules' text (TOML), None if there are none.
    fn rules(&mut self) -> Result<Option<String>, String>;
    /// The keys of the time series TS filters select (TS.QUERYINDEX's syntax), sorted.
    fn series(&mut self, filters: &[String]) -> Result<Vec<Vec<u8>>, String>;

    fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.queue(args);
        self.flush()?;
        self.read()
    }
}

impl Source for crate::Client {
    fn queue(&mut self, args: &[&[u8]]) {
        crate::Client::queue(self, args)
    }

    fn flush(&mut self) -> Result<(), String> {
        crate::Client::flush(self)
    }

    fn read(&mut self) -> Result<Reply, String> {
        crate::Client::read(self)
    }

    fn keys(&mut self, pattern: &[u8], kind: Option<&str>) -> Result<Vec<Vec<u8>>, String> {
        self.scan(pattern, kind)
    }

    fn rules(&mut self) -> Result<Option<String>, String> {
        match crate::Client::call(self, &[b"SUMMARY.RULES", b"GET"])?.bytes("SUMMARY.RULES GET")? {
            Some(t) => String::from_utf8(t).map(Some).map_err(|_| "the server's rules are not UTF-8".to_string()),
            None => Ok(None),
        }
    }

    fn series(&mut self, filters: &[String]) -> Result<Vec<Vec<u8>>, String> {
        let mut args: Vec<&[u8]> = vec![b"TS.QUERYINDEX"];
        args.extend(filters.iter().map(|f| f.as_bytes()));
        let mut keys: Vec<Vec<u8>> = crate::Client::call(self, &args)?.array("TS.QUERYINDEX")?.into_iter().filter_map(|k| k.bytes("TS.QUERYINDEX").ok().flatten()).collect();
        keys.sort();
        Ok(keys)
    }
}

/// A source whose replies are encoded RESP2 in memory (the in-process sources): queued
/// replies are appended by the source and read back here by the same parser as the
/// client's.
#[derive(Default)]
pub struct Replies {
    buf: Vec<u8>,
    pos: usize,
    line: Vec<u8>,
}

impl Replies {
    /// Where the next reply's encoding goes.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        &mut self.buf
    }

    pub fn read(&mut self) -> Result<Reply, String> {
        let mut rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return Err("no reply queued".into());
        }
        let before = rest.len();
        let r = crate::resp::read_reply(&mut rest, &mut self.line);
        self.pos += before - rest.len();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_read_back_in_order_and_the_buffer_is_reused() {
        let mut r = Replies::default();
        r.buffer().extend_from_slice(b"*2\r\n$2\r\nid\r\n:7\r\n");
        r.buffer().extend_from_slice(b"-ERR nope\r\n");
        assert_eq!(r.read(), Ok(Reply::Array(Some(vec![Reply::Bulk(Some(b"id".to_vec())), Reply::Int(7)]))));
        assert_eq!(r.read(), Ok(Reply::Err("ERR nope".into())));
        assert!(r.read().is_err());
        // Everything read: the next reply starts the buffer again.
        r.buffer().extend_from_slice(b"$-1\r\n");
        assert_eq!(r.buf.len(), 5);
        assert_eq!(r.read(), Ok(Reply::Bulk(None)));
    }
}
