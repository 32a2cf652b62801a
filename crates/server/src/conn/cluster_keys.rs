//! Cluster mode: a command of a hash slot in migration. Whether it runs here or gets -ASK
//! (to the node the slot is migrating to) or -TRYAGAIN depends on which of its keys exist
//! here, as Redis's getNodeByQuery decides by looking them up:
//! - slot migrating from here: every key here, it runs; none, -ASK; some, -TRYAGAIN;
//! - slot importing here, after ASKING: a multi-key command runs only with all its keys.
//!
//! Why a shard job: a key lives on the shard that owns its slot, and only that shard's
//! thread may read it. The connection takes that shard's lock, looks the keys up, and runs
//! the command under the same lock, so no MIGRATE (which runs on that shard too) can move a
//! key between the check and the command: a write never lands on a key that already left,
//! which would leave the slot with a key after redis-cli's last MIGRATE and lose the write.
//! Cost: only commands of a slot in migration come here (the redirection check reads one
//! atomic flag per command for that); inside MULTI, or for a blocking command, the check
//! runs without the lock and the command is then queued or run as usual.

use super::*;
use crate::cluster::KeyCheck;

impl Conn {
    /// Decides a command of a slot in migration: its reply (run under the shard's lock, or
    /// -ASK/-TRYAGAIN), or, in MULTI or for a blocking command, the step after the check.
    pub(super) async fn cluster_keys(&mut self, check: KeyCheck, spec: &'static Spec, args: Args) -> Step {
        let db = self.client.db;
        let keys: Vec<Bytes> = spec.key_indexes(&args).filter_map(|i| args.get(i).map(|k| Bytes::copy_from_slice(k))).collect();
        let Some(first) = keys.first() else { return self.admit_rest(spec, args) };
        let shard = abacus_engine::shard::shard_of(first, self.worker.shards());
        let count = move |s: &mut abacus_engine::shard::Shard| {
            let now = now_ms();
            let existing = keys.iter().filter(|k| s.dbs[db].get_shared(k, now).is_some()).count();
            (existing, keys.len() - existing)
        };
        let refuse = |conn: &mut Conn, e: Frame| {
            conn.worker.record_rejected(spec.name);
            conn.fail_multi();
            Step::Reply(e)
        };
        if self.multi.is_some() || spec.blocks(&args) {
            let Some((existing, missing)) = self.worker.run(Access::Free, shard, count).await else { return Step::Reply(abacus_engine::exec::shutting_down()) };
            return match check.verdict(existing, missing) {
                Some(e) => refuse(self, e),
                None => self.admit_rest(spec, args),
            };
        }
        let Some(locks) = self.worker.lock([shard]).await else { return Step::Reply(abacus_engine::exec::shutting_down()) };
        let Some((existing, missing)) = self.worker.run(Access::Locked(&locks), shard, count).await else { return Step::Reply(abacus_engine::exec::shutting_down()) };
        if let Some(e) = check.verdict(existing, missing) {
            drop(locks);
            return refuse(self, e);
        }
        if let Some(refused) = self.refuse_writes(spec) {
            drop(locks);
            return Step::Reply(refused);
        }
        if spec.is_write() {
            self.wrote = true;
        }
        let call = Call { spec, args, client: self.client.meta.id, no_touch: self.client.meta.no_touch() };
        let reply = self.dispatch(Access::Locked(&locks), call).await;
        // The log record of what ran under the lock is written as the lock goes.
        drop(locks);
        self.note_written();
        Step::Reply(reply)
    }
}
