//! The checks before a command runs, each with Redis's exact error text: lookup (unknown
//! command), arity and subcommands, loading, authentication, ACL rules (`acl/`), MISCONF,
//! and MULTI queueing;
//! then routing (a batch for one shard, or a dispatch). Nothing here touches the socket.

use super::*;

/// What pre-dispatch checks decided for one request.
pub(super) enum Step {
    Reply(Frame),
    /// A malformed EXEC: the transaction (if any) and every WATCH end, then this reply.
    AbortExec(Frame),
    Batch(usize, Call),
    Dispatch(Call),
    /// Cluster mode, a slot in migration: which keys exist decides (`cluster_keys.rs`).
    ClusterKeys(crate::cluster::KeyCheck, &'static Spec, Args),
}

/// Redis 7.0's reply to an unknown command, byte for byte: the name (at most 128 bytes), then
/// arguments quoted while the listing is under 128 bytes, each cut to what keeps it at 128.
/// Redis formats them as C strings, so each stops at its first NUL byte; other bytes are sent
/// as they are, except CR and LF, which become spaces.
pub fn error_unknown_command(args: &[Arg]) -> Frame {
    let c_str = |a: &[u8], max: usize| -> Vec<u8> {
        let end = memchr::memchr(0, a).unwrap_or(a.len()).min(max);
        a[..end].to_vec()
    };
    let mut listing: Vec<u8> = Vec::new();
    for a in args.iter().skip(1) {
        if listing.len() >= 128 {
            break;
        }
        let room = 128 - listing.len();
        listing.push(b'\'');
        listing.extend(c_str(a, room));
        listing.extend_from_slice(b"' ");
    }
    let mut msg = b"ERR unknown command '".to_vec();
    msg.extend(c_str(&args[0], 128));
    msg.extend_from_slice(b"', with args beginning with: ");
    msg.extend(listing);
    for b in &mut msg {
        if *b == b'\r' || *b == b'\n' {
            *b = b' ';
        }
    }
    Frame::Error(Bytes::from(msg))
}

pub fn error_arity(name: &str) -> Frame {
    Frame::error(format!("ERR wrong number of arguments for '{name}' command"))
}

impl Conn {
    pub(super) fn limits(&self) -> Limits {
        let c = &self.worker.server.config;
        Limits { max_bulk_len: c.proto_max_bulk_len() as usize, unauthenticated: !self.client.authenticated, ..Limits::default() }
    }

    /// Lookup, arity, authentication and MULTI queueing; then routing.
    pub(super) fn prepare(&mut self, args: Args) -> Step {
        let root = match self.client.last_root {
            Some(spec) if command::is_name(spec.name.as_bytes(), &args[0]) => spec,
            _ => {
                let Some(root) = command::lookup(&args[0]) else {
                    self.fail_multi();
                    return Step::Reply(error_unknown_command(&args));
                };
                self.client.last_root = Some(root);
                root
            }
        };
        let spec = match self.resolve(root, &args) {
            Ok(spec) => spec,
            Err(e) => {
                self.worker.record_rejected(root.name);
                if root.has(flags::RUNS_QUEUED) {
                    // Redis reports a malformed EXEC as the end of the transaction (and of
                    // the WATCHes, as a DISCARD).
                    self.multi = None;
                    self.client.meta.multi_len.store(usize::MAX, Ordering::Relaxed);
                    self.client.meta.multi_mem.store(0, Ordering::Relaxed);
                    let text = match &e {
                        Frame::Error(t) => String::from_utf8_lossy(t).trim_start_matches("ERR ").to_string(),
                        _ => String::new(),
                    };
                    return Step::AbortExec(Frame::error(format!("EXECABORT Transaction discarded because of: {text}")));
                }
                self.fail_multi();
                return Step::Reply(e);
            }
        };
        // A script running past busy-reply-threshold: only what Redis allows then
        // (SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE...). One atomic load otherwise.
        if self.worker.server.scripts.running_count.load(Ordering::Relaxed) != 0 && spec.doc.info & abacus_commands::command::info::ALLOW_BUSY == 0 {
            let threshold = self.worker.server.config.get_u64(abacus_engine::param!("busy-reply-threshold"));
            if let Some((_, function)) = self.worker.server.scripts.busy(abacus_engine::shard::now_ms(), threshold) {
                self.fail_multi();
                let kill = if function { "FUNCTION KILL" } else { "SCRIPT KILL" };
                return Step::Reply(Frame::error(format!("BUSY Redis is busy running a script. You can only call {kill} or SHUTDOWN NOSAVE.")));
            }
        }
        if !spec.has(flags::LOADING) && self.worker.server.recorders.loading.active() {
            self.fail_multi();
            return Step::Reply(Frame::error("LOADING Abacus is loading the dataset in memory"));
        }
        if !self.client.authenticated && !spec.has(flags::NO_AUTH) && self.worker.server.acl.auth_required() {
            self.worker.record_rejected(spec.name);
            self.fail_multi();
            return Step::Reply(Frame::error("NOAUTH Authentication required."));
        }
        if !self.client.user.is_open() {
            // A restricted ACL user (the only cost for the others is the load above).
            if let Err(denied) = self.client.user.check(spec, &args) {
                self.worker.record_rejected(spec.name);
                let context = if self.multi.is_some() { "multi" } else { "toplevel" };
                self.acl_log(denied.reason(), context, denied.object(spec, &args));
                self.fail_multi();
                return Step::Reply(Frame::error(denied.error(spec)));
            }
        }
        if let (Some(cluster), false) = (&self.worker.server.cluster, self.is_master) {
            // Redis's getNodeByQuery: keys this node does not serve are redirected (not the
            // primary's stream on a replica). ASKING lasts one command (outside MULTI). Before
            // MISCONF and a replica's READONLY, as in Redis's processCommand: a write sent to a
            // primary that became a replica (a failover) gets -MOVED to its successor.
            let asking = self.client.asking;
            self.client.asked = asking;
            if self.multi.is_none() && spec.name != "asking" {
                self.client.asking = false;
            }
            match cluster.redirect(spec, &args, asking, self.client.readonly, self.client.tls, &self.worker.server.config) {
                None => {}
                Some(crate::cluster::Redirect::Reply(redirect)) => {
                    self.worker.record_rejected(spec.name);
                    self.fail_multi();
                    return Step::Reply(redirect);
                }
                // A slot in migration: its keys decide (`cluster_keys.rs`).
                Some(crate::cluster::Redirect::CheckKeys(check)) => return Step::ClusterKeys(check, spec, args),
            }
        }
        self.admit_rest(spec, args)
    }

    /// MISCONF and a replica's READONLY: the checks after the cluster's redirection.
    pub(super) fn refuse_writes(&mut self, spec: &'static Spec) -> Option<Frame> {
        if spec.is_write() || spec.has(flags::DENY_ON_DISK_ERROR) {
            // Redis refuses writes, queued ones included, while persistence fails (MISCONF),
            // and PING too, so that health checks see it; a refused queued command aborts
            // the transaction like any other.
            if let Some(refused) = abacus_engine::snapshot::refusing_writes(&self.worker.server.durability, &self.worker.server.config) {
                self.worker.record_rejected(spec.name);
                self.fail_multi();
                return Some(Frame::error(refused));
            }
        }
        if let Some(refused) = crate::replication::refuse(&self.worker.server.config, spec.is_write(), spec.has(flags::STALE), self.is_master) {
            self.worker.record_rejected(spec.name);
            self.fail_multi();
            return Some(refused);
        }
        None
    }

    /// The checks after the cluster's redirection, MULTI queueing, and routing.
    pub(super) fn admit_rest(&mut self, spec: &'static Spec, args: Args) -> Step {
        if let Some(refused) = self.refuse_writes(spec) {
            return Step::Reply(refused);
        }
        if self.client.proto == Protocol::Resp2 && self.pubsub.is_some() && !spec.has(flags::ALLOWED_SUBSCRIBED) {
            // RESP2 subscribed mode: the connection carries messages; only these may run.
            self.worker.record_rejected(spec.name);
            self.fail_multi();
            return Step::Reply(Frame::error(format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                spec.name
            )));
        }
        if let Some(multi) = &mut self.multi {
            if spec.has(flags::NO_MULTI) {
                // SAVE, SHUTDOWN: refused, and the transaction aborts at EXEC (Redis 7.0).
                self.worker.record_rejected(spec.name);
                self.fail_multi();
                return Step::Reply(Frame::error("ERR Command not allowed inside a transaction"));
            }
            // As Redis 7.0, QUIT is never queued: it closes the connection inside MULTI too.
            if !spec.has(flags::CONTROLS_MULTI) && !spec.has(flags::NEVER_QUEUED) {
                if self.worker.server.monitors.active() && !spec.has(flags::ADMIN) {
                    multi.monitor_args.push(args.to_vec());
                }
                // CLIENT LIST multi-mem: the queued arguments' bytes.
                let bytes: usize = args.iter().map(|a| a.len()).sum();
                self.client.meta.multi_mem.fetch_add(bytes, Ordering::Relaxed);
                multi.queued.push(Call { spec, args, client: self.client.meta.id, no_touch: self.client.meta.no_touch() });
                self.client.meta.multi_len.store(multi.queued.len(), Ordering::Relaxed);
                return Step::Reply(Frame::simple("QUEUED"));
            }
        }
        if spec.is_write() || spec.has(flags::RUNS_QUEUED) || spec.doc.info & abacus_commands::command::info::RUNS_SCRIPT != 0 {
            self.wrote = true;
        }
        let call = Call { spec, args, client: self.client.meta.id, no_touch: self.client.meta.no_touch() };
        // A blocking command runs alone (`block.rs`), after the batch before it.
        if let (Handler::Keyed(_), false) = (spec.handler, spec.blocks(&call.args)) {
            if let Some(shard) = self.worker.single_shard(&call) {
                return Step::Batch(shard, call);
            }
        }
        Step::Dispatch(call)
    }

    /// Resolves container commands (CLIENT, CONFIG, ...) to their subcommand and checks arity.
    pub fn resolve(&self, root: &'static Spec, args: &[Arg]) -> Result<&'static Spec, Frame> {
        if root.subcommands.is_empty() {
            return if root.arity_ok(args.len()) { Ok(root) } else { Err(error_arity(root.name)) };
        }
        if args.len() < 2 {
            // Only COMMAND may be called without a subcommand (its arity allows it).
            return if root.arity_ok(args.len()) { Ok(root) } else { Err(error_arity(root.name)) };
        }
        let Some(sub) = root.subcommand(&args[1]) else {
            // Redis's `%.128s`: the raw bytes, up to 128 and up to a NUL.
            let name = &args[1][..args[1].len().min(128)];
            let name = &name[..memchr::memchr(0, name).unwrap_or(name.len())];
            let help = format!("'. Try {} HELP.", root.name.to_ascii_uppercase());
            return Err(Frame::Error(Bytes::from([&b"ERR unknown subcommand '"[..], name, help.as_bytes()].concat())));
        };
        if sub.arity_ok(args.len()) {
            Ok(sub)
        } else {
            Err(error_arity(sub.name))
        }
    }

    /// Adds an ACL LOG entry for this client (a refused command, key, channel or AUTH).
    pub fn acl_log(&self, reason: &'static str, context: &'static str, object: Vec<u8>) {
        self.acl_log_as(reason, context, object, self.client.user.name.as_bytes());
    }

    pub fn acl_log_as(&self, reason: &'static str, context: &'static str, object: Vec<u8>, username: &[u8]) {
        let server = &self.worker.server;
        let now = now_ms();
        let max_len = server.config.get_u64(abacus_engine::param!("acllog-max-len")) as usize;
        server.acl.log(reason, context, object, username, self.client.meta.info_line(now), now, max_len);
    }

    /// Makes this connection authenticated as `user` (AUTH, HELLO AUTH, RESET).
    pub fn set_user(&mut self, user: Arc<crate::acl::User>) {
        *self.client.meta.user.lock() = Arc::from(user.name.as_str());
        self.client.user = user;
    }

    pub(super) fn fail_multi(&mut self) {
        if let Some(m) = &mut self.multi {
            m.failed = true;
        }
    }
}
