//! EXPORT's source: this server's keyspace, read from a background thread.
//!
//! The thread never touches a shard itself: each step is a job sent to the shard's queue
//! (`ShardMsg::Run`) like any connection's command, so other clients are never blocked for
//! longer than one step: a key listing walks each shard 4096 table slots per job (SCAN's
//! cursor), and the per-key reads go 256 at a time (the exporter's pipeline), one job per
//! shard with its part, all shards at once. Consistency is the online export's: each key is
//! read whole by one command (atomic per key), not a point-in-time view of all keys (that
//! would need the snapshot's copy-on-write epochs held open for the whole export, pinning
//! the old versions of every key written meanwhile).
//!
//! Progress (`progress::Exports`) is counted here and shown in INFO's persistence section
//! (`export_*`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use abacus_engine::shard::{now_ms, Job, Shard, ShardMsg};
use abacus_export::{Replies, Reply, Source};
use abacus_protocol::{Args, Bytes, BytesMut, Frame, Protocol};

use crate::node::Server;

/// Slots of a shard's table one key-listing job visits.
const SCAN_STEP: usize = 4096;

/// A step of the export on one shard, answering `R`.
type Step<R> = Box<dyn FnOnce(&mut Shard) -> R + Send>;
/// A shard's answers to its part of a pipeline: each command's position and encoded reply.
type Answers = Vec<(usize, Vec<u8>)>;

/// The live keyspace as an exporter's source (used on the export's own thread).
pub struct Live {
    server: Arc<Server>,
    queued: Vec<Vec<Vec<u8>>>,
    replies: Replies,
}

fn gone() -> String {
    "the server is shutting down".to_string()
}

impl Live {
    pub fn new(server: Arc<Server>) -> Live {
        Live { server, queued: Vec::new(), replies: Replies::default() }
    }

    /// Sends `f` to each of `shards`' queues at once, then waits for every answer, in order.
    fn on_shards<R: Send + 'static>(&self, jobs: Vec<(usize, Step<R>)>) -> Result<Vec<R>, String> {
        let mut waits = Vec::with_capacity(jobs.len());
        for (shard, f) in jobs {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            let job: Job = Box::new(move |s: &mut Shard| {
                let _ = tx.send(f(s));
            });
            self.server.senders[shard].blocking_send(ShardMsg::Run(job)).map_err(|_| gone())?;
            waits.push(rx);
        }
        waits.into_iter().map(|rx| rx.recv().map_err(|_| gone())).collect()
    }
}

impl Source for Live {
    fn queue(&mut self, args: &[&[u8]]) {
        self.queued.push(args.iter().map(|a| a.to_vec()).collect());
    }

    fn flush(&mut self) -> Result<(), String> {
        let n = self.server.senders.len();
        let queued = std::mem::take(&mut self.queued);
        let count = queued.len();
        // Per shard, the positions and arguments of its commands.
        let mut parts: Vec<Vec<(usize, Args)>> = (0..n).map(|_| Vec::new()).collect();
        let mut answers: Vec<Option<Vec<u8>>> = vec![None; count];
        for (i, a) in queued.into_iter().enumerate() {
            let args = Args::from_vec(a.into_iter().map(Bytes::from).collect());
            match super::read_spec(&args) {
                Ok(spec) => parts[super::shard_of_read(spec, &args, n)].push((i, args)),
                Err(e) => answers[i] = Some(encode(&e)),
            }
        }
        let cfg = self.server.config.cmd_config();
        let now = now_ms();
        let jobs: Vec<(usize, Step<Answers>)> = parts
            .into_iter()
            .enumerate()
            .filter(|(_, p)| !p.is_empty())
            .map(|(shard, part)| {
                let f: Step<Answers> = Box::new(move |s: &mut Shard| {
                    part.into_iter()
                        .map(|(i, args)| {
                            // Looked up again here: the entry is the table's, the same one.
                            let frame = match super::read_spec(&args) {
                                Ok(spec) => super::run_read(&mut s.dbs, &mut s.log, spec, &args, now, cfg),
                                Err(e) => e,
                            };
                            (i, encode(&frame))
                        })
                        .collect()
                });
                (shard, f)
            })
            .collect();
        for part in self.on_shards(jobs)? {
            for (i, bytes) in part {
                answers[i] = Some(bytes);
            }
        }
        let buf = self.replies.buffer();
        for a in answers.into_iter().flatten() {
            buf.extend_from_slice(&a);
        }
        self.server.export.reads.fetch_add(count as u64, Ordering::Relaxed);
        Ok(())
    }

    fn read(&mut self) -> Result<Reply, String> {
        self.replies.read()
    }

    fn keys(&mut self, pattern: &[u8], kind: Option<&str>) -> Result<Vec<Vec<u8>>, String> {
        let mut keys = Vec::new();
        for shard in 0..self.server.senders.len() {
            let mut cursor = 0;
            loop {
                let (pattern, kind) = (pattern.to_vec(), kind.map(str::to_string));
                let f: Step<(u64, Vec<Vec<u8>>)> = Box::new(move |s: &mut Shard| {
                    let mut found = Vec::new();
                    let (next, _) = s.dbs[0].scan(cursor, SCAN_STEP, now_ms(), |k, e| {
                        if kind.as_deref().is_none_or(|t| e.value().value_type().name() == t) && abacus_keyspace::glob_match(&pattern, k, false) {
                            found.push(k.to_vec());
                        }
                    });
                    (next, found)
                });
                let (next, found) = self.on_shards(vec![(shard, f)])?.pop().ok_or_else(gone)?;
                keys.extend(found);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        keys.sort();
        keys.dedup();
        self.server.export.keys_total.store(keys.len() as u64, Ordering::Relaxed);
        Ok(keys)
    }

    fn rules(&mut self) -> Result<Option<String>, String> {
        Ok(self.server.summarizer.rules().map(|r| r.text.clone()))
    }

    fn series(&mut self, filters: &[String]) -> Result<Vec<Vec<u8>>, String> {
        let jobs = (0..self.server.senders.len())
            .map(|shard| {
                let filters: Vec<Vec<u8>> = filters.iter().map(|f| f.as_bytes().to_vec()).collect();
                let f: Step<Result<Vec<Vec<u8>>, String>> = Box::new(move |s: &mut Shard| {
                    let args = Args::from_vec(filters.into_iter().map(Bytes::from).collect());
                    let filter = abacus_commands::ts_filter::parse_filter(&args).map_err(|e| match e {
                        Frame::Error(t) => String::from_utf8_lossy(&t).into_owned(),
                        _ => "bad filter".into(),
                    })?;
                    Ok(abacus_commands::ts_filter::each_match(&mut s.dbs[0], &filter, now_ms(), |_, k, _| Some(k.to_vec())))
                });
                (shard, f)
            })
            .collect();
        let mut keys = Vec::new();
        for part in self.on_shards(jobs)? {
            keys.extend(part?);
        }
        keys.sort();
        self.server.export.keys_total.store(keys.len() as u64, Ordering::Relaxed);
        Ok(keys)
    }
}

fn encode(frame: &Frame) -> Vec<u8> {
    let mut out = BytesMut::new();
    abacus_protocol::encode(frame, Protocol::Resp2, &mut out);
    out.to_vec()
}
