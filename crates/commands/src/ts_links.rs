//! Compaction links that follow their keys, as RedisTimeSeries's do.
//!
//! A rule is two halves: the source series lists the destination (`Series::rules`), the
//! destination names its source (`Series::src_key`). The module keeps both halves exact: a
//! deleted, expired, evicted or overwritten series takes its links with it (the source's rule
//! list forgets a deleted destination, a destination whose source is deleted has no
//! `sourceKey`), RENAME carries them to the new name, and a value made by COPY or RESTORE
//! has none.
//!
//! Abacus does the same with one eager step and one lazy rule. RENAME (the one path that
//! keeps a linked series under another name) rewrites the other halves at once
//! ([`follow_rename`]); COPY and RESTORE clear the new value's halves ([`unlink_series`]).
//! Every other way a series goes (DEL, UNLINK, expiry, eviction, an overwrite, FLUSHDB) is
//! left as it is, and a link counts only while both halves agree ([`live_rules`],
//! [`live_source`]): every reader (TS.INFO, TS.CREATERULE, TS.DELETERULE, LATEST, the rules
//! a sample runs) asks through them, so a half whose other half went is invisible, as in the
//! module. Why lazy: removals happen in many places below the command layer (the keyspace's
//! expiry and eviction), and a stale half costs nothing until a reader meets it. A stale half
//! can never come back to life: only TS.CREATERULE and RENAME make halves, and both drop the
//! stale halves of the series they touch first ([`prune`]).
//!
//! Links cannot cross shards (a sample's rules write the destination on the source's shard),
//! so a RENAME that moves a linked series to another shard drops its links.

use abacus_collections::{Rule, Series};
use abacus_keyspace::Db;

fn series<'a>(db: &'a Db, key: &[u8], now: u64) -> Option<&'a Series> {
    db.get_shared(key, now)?.as_series()
}

/// Whether `dst` is a live series naming `src` as its source.
fn names_source(db: &Db, dst: &[u8], src: &[u8], now: u64) -> bool {
    series(db, dst, now).is_some_and(|d| d.src_key.as_deref() == Some(src))
}

/// The rules of `s` (the series at `key`) whose destination still names `key` as its source.
pub fn live_rules<'a>(db: &'a Db, key: &'a [u8], s: &'a Series, now: u64) -> impl Iterator<Item = &'a Rule> + 'a {
    s.rules.iter().filter(move |r| names_source(db, &r.dest, key, now))
}

/// The source of `s` (the series at `key`) if that source still lists `key` among its rules.
pub fn live_source<'a>(db: &'a Db, key: &[u8], s: &'a Series, now: u64) -> Option<&'a [u8]> {
    let k = s.src_key.as_deref()?;
    series(db, k, now)?.rules.iter().any(|r| &*r.dest == key).then_some(k)
}

/// Drops the stale halves of the series at `key`: rules whose destination no longer names it,
/// a source key whose series no longer lists it.
pub fn prune(db: &mut Db, key: &[u8], now: u64) {
    let Some(s) = series(db, key, now) else { return };
    let keep: Vec<bool> = s.rules.iter().map(|r| names_source(db, &r.dest, key, now)).collect();
    let keep_src = live_source(db, key, s, now).is_some();
    if keep.iter().all(|&k| k) && (keep_src || s.src_key.is_none()) {
        return;
    }
    let Some(s) = db.get_mut(key, now).and_then(|e| e.as_series_mut()) else { return };
    let mut it = keep.into_iter();
    s.rules.retain(|_| it.next().unwrap_or(false));
    if !keep_src {
        s.src_key = None;
    }
}

/// After RENAME moved a series from `from` to `to`: its source lists `to` instead of `from`,
/// its destinations name `to` as their source; halves that were stale are dropped.
pub fn follow_rename(db: &mut Db, from: &[u8], to: &[u8], now: u64) {
    let Some(s) = series(db, to, now) else { return };
    if s.src_key.is_none() && s.rules.is_empty() {
        return;
    }
    let src = s.src_key.clone();
    let dests: Vec<Box<[u8]>> = s.rules.iter().map(|r| r.dest.clone()).collect();
    let mut keep_src = false;
    if let Some(sk) = src.as_deref().filter(|k| *k != to) {
        if let Some(ss) = db.get_mut(sk, now).and_then(|e| e.as_series_mut()) {
            if ss.rules.iter().any(|r| &*r.dest == from) {
                // A rule of the source to `to` named the series RENAME just replaced.
                ss.rules.retain(|r| &*r.dest != to);
                for r in ss.rules.iter_mut().filter(|r| &*r.dest == from) {
                    r.dest = to.into();
                }
                keep_src = true;
            }
        }
    }
    let mut keep: Vec<bool> = Vec::with_capacity(dests.len());
    for d in &dests {
        let mut ok = false;
        if &**d != to {
            if let Some(ds) = db.get_mut(d, now).and_then(|e| e.as_series_mut()) {
                if ds.src_key.as_deref() == Some(from) {
                    ds.src_key = Some(to.into());
                    ok = true;
                }
            }
        }
        keep.push(ok);
    }
    if let Some(s) = db.get_mut(to, now).and_then(|e| e.as_series_mut()) {
        if !keep_src {
            s.src_key = None;
        }
        let mut it = keep.into_iter();
        s.rules.retain(|_| it.next().unwrap_or(false));
    }
}

/// A series made by COPY or RESTORE starts without rules or a source, as the module's.
pub fn unlink_series(s: Option<&mut Series>) {
    if let Some(s) = s {
        s.rules.clear();
        s.src_key = None;
    }
}
