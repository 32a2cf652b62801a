//! TS.WATERFALL's shard side (Abacus's source waterfall): each shard's groups of the matching
//! series and their points. The command (the server's `cmd/ts_multi.rs`, which parses it and
//! merges the shards' parts into the reply) runs in the connection task; [`waterfall_shard`]
//! runs on one shard's database, with no connection.
//!
//! TS.WATERFALL from to SOURCES s1 s2 ... [SOURCELABEL label] FILTER ... [WITHSOURCE] [LATEST]:
//! the matching series are grouped by all their labels but the source label; in each group
//! every timestamp of [from, to] gets the value of the first source, in the given order, that
//! has a sample there. A shard groups its own members through the groups its label index
//! keeps by series id (`SeriesGroups`: group id, source value, each group's identity and
//! order; no label read or hash lookup per series), merges each group's members by
//! precedence (a k-way walk over lists already in time order: a few comparisons per point),
//! and returns its groups sorted by identity ([`WfPart`], flat buffers, no allocation per
//! series), so that the connection walks the shards' sorted groups together and merges the
//! parts of a group found on several shards by the same rule.
//!
//! Why two paths: a one-timestamp range (`waterfall_point`) settles most groups at their
//! first member in precedence order and reads no further, where the general merge
//! (`waterfall_range`) reads every member. Why the group heads are encoded here
//! (`wf_encode`): the connection's merge is the request's one serial step, so the shards
//! encode what they can in parallel.

use abacus_collections::{SeriesGroups, SeriesIndex, SERIES_NO_ID, Series};
use abacus_keyspace::{prefetch_read, Db};

use super::timeseries::latest_extra;
use super::ts_filter::{candidates, each_match_id, len32, matches, put_bulk, put_len, Filter};

/// One group of one shard's waterfall part: its identity in [`WfPart::ids`] (`name`, a NUL,
/// then each label and value length-prefixed, so two groups whose names read alike still
/// differ), and its points in [`WfPart::points`], merged over the shard's own members.
pub struct WfGroup {
    pub id: (u32, u32),
    pub name_len: u32,
    pub points: (u32, u32),
}

/// A point of a shard's merged group: the source's rank and the member it came from (ties
/// between two series of one group and one source go to the smaller key).
#[derive(Clone, Copy)]
pub struct WfPoint {
    pub t: u64,
    pub v: f64,
    pub rank: u32,
    pub member: u32,
}

/// One shard's part of a waterfall, in flat buffers (no allocation per series): its groups
/// sorted by identity, so that the connection merges the shards' parts in one ordered walk.
#[derive(Default)]
pub struct WfPart {
    /// Whether any matching series has the source label.
    pub labelled: bool,
    pub ids: Vec<u8>,
    pub groups: Vec<WfGroup>,
    pub points: Vec<WfPoint>,
    pub keys: Vec<u8>,
    /// Member -> its key's range in `keys`.
    pub members: Vec<(u32, u32)>,
    /// Group heads encoded on the shard ([`wf_encode`]) for the connection to copy: each
    /// group's range in `enc`, empty when another shard encodes it.
    pub enc: Vec<u8>,
    pub heads: Vec<(u32, u32)>,
}

impl WfPart {
    #[inline]
    pub fn id(&self, g: usize) -> &[u8] {
        let (a, b) = self.groups[g].id;
        &self.ids[a as usize..b as usize]
    }

    #[inline]
    pub fn key(&self, m: u32) -> &[u8] {
        let (a, b) = self.members[m as usize];
        &self.keys[a as usize..b as usize]
    }
}

/// A waterfall's query, as each shard runs it.
pub struct WfQuery {
    pub filter: Filter,
    pub label: Box<[u8]>,
    pub sources: Vec<Box<[u8]>>,
    pub from: u64,
    pub to: u64,
    pub latest: bool,
    pub resp3: bool,
    pub shards: usize,
}

/// A shard's member: one matching series.
struct WfMember {
    rank: u32,
    samples: (u32, u32),
}

/// The shard's side of TS.WATERFALL: a one-timestamp range takes the precedence walk with
/// early stop ([`waterfall_point`]), any other range the general merge ([`waterfall_range`]).
pub fn waterfall_shard(db: &mut Db, q: &WfQuery, shard: usize, now: u64) -> WfPart {
    let mut part = if q.from == q.to { waterfall_point(db, q, now) } else { waterfall_range(db, q, now) };
    wf_encode(&mut part, q.resp3, shard, q.shards);
    part
}

/// Encodes, on the shard and in parallel with the other shards, the heads of the groups this
/// shard owns among those of its part (RESP2 `*3`, the name, the labels; RESP3 the name,
/// `*2`, the labels map), so that the connection's merge mostly compares identities and
/// copies bytes. A group has members on most shards (one per source), so each head is
/// encoded by one owner, chosen by a hash of its name ([`wf_owner`]); the connection encodes
/// the heads whose owner has none of the group's members. (`perf`, the one-day waterfall over
/// 1,000,000 series: the connection's merge took 90 ms of the request's ~300, all on one
/// thread.) The points stay the connection's: only it knows which shard's point wins.
fn wf_encode(part: &mut WfPart, resp3: bool, shard: usize, shards: usize) {
    let WfPart { ids, groups, enc, heads, .. } = part;
    enc.reserve(groups.len() * 128 / shards.max(1));
    heads.reserve(groups.len());
    for g in groups.iter() {
        let id = &ids[g.id.0 as usize..g.id.1 as usize];
        let a = len32(enc.len());
        if wf_owner(&id[..g.name_len as usize], shards) == shard {
            put_group_head(enc, id, g.name_len as usize, resp3);
        }
        heads.push((a, len32(enc.len())));
    }
}

/// The shard that encodes a group's head: FNV-1a of its name, modulo the shards.
fn wf_owner(name: &[u8], shards: usize) -> usize {
    let h = name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    (h % shards.max(1) as u64) as usize
}

/// A group's head from its identity `id` (name of `name_len` bytes, a NUL, the labels).
pub fn put_group_head(out: &mut Vec<u8>, id: &[u8], name_len: usize, resp3: bool) {
    let name = &id[..name_len];
    if resp3 {
        put_bulk(out, name);
        put_len(out, b'*', 2);
    } else {
        put_len(out, b'*', 3);
        put_bulk(out, name);
    }
    let labels = group_labels(&id[name_len + 1..]);
    put_len(out, if resp3 { b'%' } else { b'*' }, labels.clone().count());
    for (l, v) in labels {
        if !resp3 {
            put_len(out, b'*', 2);
        }
        put_bulk(out, l);
        put_bulk(out, v);
    }
}

/// The waterfall's groups for `q`'s source label, placed in order, and the rank of each
/// SOURCES value as (value id, rank) (a source no series has cannot match); `None` when no
/// series has the label.
fn wf_setup(db: &mut Db, q: &WfQuery) -> Option<(u32, Vec<(u32, u32)>)> {
    let label = db.series_index.name_id(&q.label)?;
    db.series_index.groups_for(label);
    let ranks = q.sources.iter().enumerate().filter_map(|(r, x)| Some((db.series_index.value_id(x)?, r as u32))).collect();
    Some((label, ranks))
}

/// The one-timestamp waterfall (`from == to`): a group's answer is the sample at `t` of its
/// first live member in precedence order (rank, then key) that has one. So the candidates are
/// ordered by (group, rank, key) from the index's arrays alone (no keyspace lookup), and each
/// group's members are read in that order until one has `t`: with sources covering most days,
/// most groups stop at their first member, where the general path looks up and reads every
/// member (half the lookups and chunk reads on W7's data).
///
/// The reads go in rounds, each in id order: round one reads every group's first member,
/// round two the next member of the groups that round one did not settle, and so on. Why id
/// order and not group order: ids are given as series are created, so in id order the
/// index's entries, the keys and, for series loaded one after the other, the series' own
/// allocations are read front to back, where group (name) order jumps across the whole
/// heap for every member; only the table slot stays a random read. Then the groups are
/// written out in identity order.
///
/// The reply is the general path's: a group with a live member but none with `t` is still
/// returned, without points (so it visits every member); a group with no live member is not.
/// The connection's merge picks the best (rank, key) across shards, so one member per group
/// and shard is enough.
fn waterfall_point(db: &mut Db, q: &WfQuery, now: u64) -> WfPart {
    let t = q.from;
    let mut part = WfPart::default();
    let Some((label, ranks)) = wf_setup(db, q) else { return part };
    let ids = candidates(db, &q.filter);
    let ix = &db.series_index;
    let groups = ix.groups(label).expect("wf_setup placed the groups");
    // The ranked members, in id order (`ids` is sorted).
    let mut mem: Vec<WfCand> = Vec::with_capacity(ids.len());
    let mut unranked = false;
    for &id in &ids {
        let src = groups.source_of(id);
        if src == SERIES_NO_ID {
            continue;
        }
        match ranks.iter().find(|r| r.0 == src) {
            Some(&(_, rank)) => {
                let g = groups.group_of(id);
                mem.push(WfCand { id, g, pos: groups.rank(g), rank });
            }
            None => unranked = true,
        }
    }
    let (order, gstart, gid) = wf_order(ix, &mem, groups.placed());
    let ng = gstart.len() - 1;
    // Member -> its group's slot (in `gstart`), and each group's state in one record (the
    // walk reaches groups in random order: one cache miss per member, prefetched, where
    // five arrays by group cost five).
    let mut gslot = vec![0u32; mem.len()];
    for gs in 0..ng {
        for &m in &order[gstart[gs] as usize..gstart[gs + 1] as usize] {
            gslot[m as usize] = gs as u32;
        }
    }
    let mut state: Vec<WfGroupState> = (0..ng)
        .map(|gs| WfGroupState { v: 0.0, next: gstart[gs], end: gstart[gs + 1], member: WF_NONE, rank: 0 })
        .collect();
    // The members to read in the coming round, a bit per member (so in id order).
    let mut marks = vec![0u64; mem.len().div_ceil(64)];
    for &s in &gstart[..ng] {
        let m = order[s as usize] as usize;
        marks[m / 64] |= 1 << (m % 64);
    }
    let mut stale: Vec<Box<[u8]>> = Vec::new();
    let mut visit: Vec<u32> = Vec::with_capacity(ng);
    loop {
        visit.clear();
        for (w, word) in marks.iter_mut().enumerate() {
            let mut x = std::mem::take(word);
            while x != 0 {
                visit.push((w * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        if visit.is_empty() {
            break;
        }
        let mut pf = WfPipe::new();
        for (j, &m) in visit.iter().enumerate() {
            pf.advance(db, &mem, &visit, j, t, now);
            if let Some(&a) = visit.get(j + WF_STATE_AHEAD) {
                prefetch_read(std::ptr::from_ref(&state[gslot[a as usize] as usize]));
            }
            let g = &mut state[gslot[m as usize] as usize];
            let found_here = match (ix.key(mem[m as usize].id), pf.series(j)) {
                (Some(key), Some(s)) => {
                    debug_assert!(matches(s, &q.filter), "the label index disagrees with the series at {key:?}");
                    if g.member == WF_NONE {
                        g.member = WF_LIVE;
                    }
                    // As the general path: the stored sample, else LATEST's open bucket if it
                    // is at `t`.
                    let v = s.get(t).or_else(|| if q.latest { latest_extra(db, key, s, now).filter(|x| x.0 == t).map(|x| x.1) } else { None });
                    // The key is copied now, while it is in cache.
                    v.map(|v| {
                        let k0 = len32(part.keys.len());
                        part.keys.extend_from_slice(key);
                        (g.member, g.v, g.rank) = (len32(part.members.len()), v, mem[m as usize].rank);
                        part.members.push((k0, len32(part.keys.len())));
                    })
                    .is_some()
                }
                (Some(key), None) => {
                    stale.push(key.into());
                    false
                }
                (None, _) => false,
            };
            if !found_here && g.next + 1 < g.end {
                g.next += 1;
                let n = order[g.next as usize] as usize;
                marks[n / 64] |= 1 << (n % 64);
            }
        }
    }
    // The groups in identity order, each with its point if one was found.
    part.points.reserve(ng);
    for gs in 0..ng {
        if let Some(&g) = gid.get(gs + WF_IDENT_AHEAD) {
            prefetch_read(groups.ident_entry_ptr(g));
        }
        let g = &state[gs];
        if g.member == WF_NONE {
            continue;
        }
        let p0 = len32(part.points.len());
        if g.member != WF_LIVE {
            part.points.push(WfPoint { t, v: g.v, rank: g.rank, member: g.member });
        }
        let (ident, name_len) = groups.ident(gid[gs]);
        let a = len32(part.ids.len());
        part.ids.extend_from_slice(ident);
        part.groups.push(WfGroup { id: (a, len32(part.ids.len())), name_len, points: (p0, len32(part.points.len())) });
    }
    // Whether any live match has the source label: a returned group has one; otherwise only
    // a live series whose source is not among SOURCES (never visited above) can.
    part.labelled = !part.groups.is_empty() || (unranked && ids.iter().any(|&id| wf_unranked_live(db, groups, &ranks, id, now, &mut stale)));
    for k in stale {
        db.series_index.forget(&k);
    }
    part
}

/// A group's state in a one-timestamp waterfall: the member it reads next (an index into
/// `order`) and where its members end there; what it found: [`WF_NONE`] (no live member
/// yet), [`WF_LIVE`] (live members, none with a sample at the timestamp) or the member (in
/// the part's `members`, whose key is copied when found) with its sample and rank.
struct WfGroupState {
    v: f64,
    next: u32,
    end: u32,
    member: u32,
    rank: u32,
}

/// [`WfGroupState::member`] of a group with no live member read yet.
const WF_NONE: u32 = u32::MAX;
/// [`WfGroupState::member`] of a group with live members but no sample found.
const WF_LIVE: u32 = u32::MAX - 1;

/// How many members ahead the walk loads a member's group state.
const WF_STATE_AHEAD: usize = 16;

/// A ranked member of a one-timestamp waterfall: its id, group, the group's position in
/// identity order and its source's rank.
struct WfCand {
    id: u32,
    g: u32,
    pos: u32,
    rank: u32,
}

/// The members (indices into `mem`) grouped by their group's position, each group's in
/// precedence order (rank, then key); where each group starts (with the end as a last
/// element); and each group's id. A counting sort by position when the members are many
/// against the `placed` positions (a FILTER over most series: one pass, where a comparison
/// sort of a million members measured 5% of the walk's CPU), else a comparison sort. The
/// passes after the scatter read `order`'s side arrays front to back, not `mem` by member.
fn wf_order(ix: &SeriesIndex, mem: &[WfCand], placed: usize) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let n = mem.len();
    let mut order: Vec<u32> = vec![0; n];
    // Beside `order`: each member's rank, group position and group.
    let mut rank: Vec<u32> = vec![0; n];
    let mut pos: Vec<u32> = vec![0; n];
    let mut grp: Vec<u32> = vec![0; n];
    if n >= placed / 4 {
        let mut at = vec![0u32; placed + 1];
        for c in mem {
            at[c.pos as usize + 1] += 1;
        }
        for p in 1..at.len() {
            at[p] += at[p - 1];
        }
        for (m, c) in mem.iter().enumerate() {
            let slot = &mut at[c.pos as usize];
            let k = *slot as usize;
            (order[k], rank[k], pos[k], grp[k]) = (m as u32, c.rank, c.pos, c.g);
            *slot += 1;
        }
    } else {
        let mut keyed: Vec<(u32, u32)> = mem.iter().enumerate().map(|(m, c)| (c.pos, m as u32)).collect();
        keyed.sort_unstable();
        for (k, &(p, m)) in keyed.iter().enumerate() {
            let c = &mem[m as usize];
            (order[k], rank[k], pos[k], grp[k]) = (m, c.rank, p, c.g);
        }
    }
    let mut gstart: Vec<u32> = Vec::new();
    let mut gid: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < n {
        let end = i + pos[i..].iter().take_while(|&&p| p == pos[i]).count();
        gstart.push(i as u32);
        gid.push(grp[i]);
        // A handful of members (one per source): an insertion sort; keys are compared only
        // between two members of one source.
        for k in i + 1..end {
            let mut j = k;
            let key = |m: u32| ix.key(mem[m as usize].id);
            while j > i && (rank[j - 1] > rank[j] || (rank[j - 1] == rank[j] && key(order[j - 1]) > key(order[j]))) {
                order.swap(j - 1, j);
                rank.swap(j - 1, j);
                j -= 1;
            }
        }
        i = end;
    }
    gstart.push(n as u32);
    (order, gstart, gid)
}

/// Whether `id` has a source label not among SOURCES and its key holds a series (a stale
/// key is kept in `stale`, to forget).
fn wf_unranked_live(db: &Db, groups: &SeriesGroups, ranks: &[(u32, u32)], id: u32, now: u64, stale: &mut Vec<Box<[u8]>>) -> bool {
    let src = groups.source_of(id);
    if src == SERIES_NO_ID || ranks.iter().any(|r| r.0 == src) {
        return false;
    }
    let Some(key) = db.series_index.key(id) else { return false };
    let live = db.get_shared(key, now).and_then(|e| e.as_series()).is_some();
    if !live {
        stale.push(key.into());
    }
    live
}

/// The point walk's prefetch pipeline over one round's members (in id order). Each member
/// goes through six stages, [`WF_PREFETCH`] members ahead of its read, each stage reading
/// what the one before loaded: its index entry (the pointer to its key), its key bytes, its
/// table slot (the key hashed), then its lookup (kept in `ring` for the read, so it is
/// looked up once) with its series' header, its chunk list, and its stream word at `t`.
/// Why: `perf` on the walk without the last stages showed the series', the chunk list's and
/// the stream's cache misses (three dependent loads per member) as about 35% of the shard's
/// CPU.
struct WfPipe<'a> {
    /// The next member of each stage.
    next: [usize; 6],
    /// Member n's key hash, then its lookup (the series, `None` when the key holds none), at
    /// `n % WF_RING`.
    hash: [u64; WF_RING],
    ring: [Option<&'a Series>; WF_RING],
}

impl<'a> WfPipe<'a> {
    fn new() -> WfPipe<'a> {
        WfPipe { next: [0; 6], hash: [0; WF_RING], ring: [None; WF_RING] }
    }

    /// Brings every stage up to the read of `visit[j]`.
    fn advance(&mut self, db: &'a Db, mem: &[WfCand], visit: &[u32], j: usize, t: u64, now: u64) {
        let ix = &db.series_index;
        for (stage, &d) in WF_PREFETCH.iter().enumerate() {
            let upto = (j + d + 1).min(visit.len());
            for n in std::mem::replace(&mut self.next[stage], upto)..upto {
                let id = mem[visit[n] as usize].id;
                match stage {
                    0 => prefetch_read(ix.key_entry_ptr(id)),
                    1 => prefetch_read(ix.key(id).map_or(std::ptr::null(), <[u8]>::as_ptr)),
                    2 => self.hash[n % WF_RING] = ix.key(id).map_or(0, |k| db.prefetch(k)),
                    3 => {
                        let s = ix.key(id).and_then(|k| db.get_shared_hashed(self.hash[n % WF_RING], k, now)).and_then(|e| e.as_series());
                        self.ring[n % WF_RING] = s;
                        if let Some(s) = s {
                            prefetch_read(s.head_addr());
                        }
                    }
                    4 => {
                        if let Some(s) = self.ring[n % WF_RING] {
                            // A chunk's fields span two cache lines.
                            prefetch_read(s.chunks_addr());
                            prefetch_read(s.chunks_addr().wrapping_add(64));
                        }
                    }
                    _ => {
                        if let Some(s) = self.ring[n % WF_RING] {
                            prefetch_read(s.stream_addr(t));
                        }
                    }
                }
            }
        }
    }

    /// `visit[j]`'s lookup (after [`WfPipe::advance`] to `j`).
    fn series(&self, j: usize) -> Option<&'a Series> {
        self.ring[j % WF_RING]
    }
}

/// Distances of [`WfPipe`]'s stages ahead of the read, in members: ten members between
/// dependent stages measured about 4% less CPU than six (W7's 1,000,000 series), the loads
/// of a stage still missing on the one before at six.
const WF_PREFETCH: [usize; 6] = [60, 50, 40, 30, 20, 10];

/// Hashes and lookups kept: more than the hashing stage's distance.
const WF_RING: usize = 64;

/// How many groups ahead the output pass starts loading a group's identity entry (the
/// identities' bytes are read in order: the arena is laid out so).
const WF_IDENT_AHEAD: usize = 32;

/// The general waterfall (any range): looks up and reads every matching series (through
/// [`each_match_id`]), groups them (by their labels but the source label: the index's
/// `SeriesGroups`, kept by id, with each group's identity and order), and merges each
/// group's members by precedence.
fn waterfall_range(db: &mut Db, q: &WfQuery, now: u64) -> WfPart {
    let mut part = WfPart::default();
    let Some((label, ranks)) = wf_setup(db, q) else { return part };
    let ids = candidates(db, &q.filter);
    let mut members: Vec<WfMember> = Vec::with_capacity(ids.len());
    // Per member: (group's position in identity order << 32 | rank, member), to sort by.
    let mut order: Vec<(u64, u32)> = Vec::with_capacity(ids.len());
    let mut group_of: Vec<u32> = Vec::with_capacity(ids.len());
    let mut samples: Vec<(u64, f64)> = Vec::with_capacity(ids.len());
    part.members.reserve(ids.len());
    part.keys.reserve(ids.len() * 24);
    each_match_id(db, &q.filter, &ids, now, |db, id, key, s| {
        let groups = db.series_index.groups(label).expect("groups_for ran above, and registrations keep them ordered");
        let src = groups.source_of(id);
        if src == SERIES_NO_ID {
            return None;
        }
        part.labelled = true;
        let rank = ranks.iter().find(|r| r.0 == src)?.1;
        let group = groups.group_of(id);
        debug_assert!(group != SERIES_NO_ID, "a live id has a group");
        let k0 = len32(part.keys.len());
        part.keys.extend_from_slice(key);
        part.members.push((k0, len32(part.keys.len())));
        let s0 = len32(samples.len());
        samples.extend(s.range(q.from, q.to));
        if q.latest {
            let extra = latest_extra(db, key, s, now);
            if let Some(x) = extra.filter(|x| x.0 >= q.from && x.0 <= q.to && (samples.len() == s0 as usize || samples[samples.len() - 1].0 < x.0)) {
                samples.push(x);
            }
        }
        let m = len32(members.len());
        order.push((((groups.rank(group) as u64) << 32) | rank as u64, m));
        group_of.push(group);
        members.push(WfMember { rank, samples: (s0, len32(samples.len())) });
        Some(())
    });
    // Members by group (in identity order), then each group's by precedence (rank, key).
    order.sort_unstable_by(|x, y| x.0.cmp(&y.0).then_with(|| part.key(x.1).cmp(part.key(y.1))));
    let Some(groups) = db.series_index.groups(label) else { return part };
    part.points.reserve(samples.len());
    let mut at: Vec<u32> = Vec::new();
    let mut ms: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let pos = order[i].0 >> 32;
        ms.clear();
        while i < order.len() && order[i].0 >> 32 == pos {
            ms.push(order[i].1);
            i += 1;
        }
        let (ident, name_len) = groups.ident(group_of[ms[0] as usize]);
        let a = len32(part.ids.len());
        part.ids.extend_from_slice(ident);
        let p0 = len32(part.points.len());
        let sl = |m: u32| {
            let (a, b) = members[m as usize].samples;
            &samples[a as usize..b as usize]
        };
        if let [m] = ms[..] {
            let rank = members[m as usize].rank;
            part.points.extend(sl(m).iter().map(|&(t, v)| WfPoint { t, v, rank, member: m }));
        } else {
            // The k-way merge: every timestamp any member has, from the first member (in
            // precedence order) that has it.
            at.clear();
            at.resize(ms.len(), 0);
            loop {
                let mut best: Option<(u64, usize)> = None;
                for (i, &m) in ms.iter().enumerate() {
                    if let Some(&(t, _)) = sl(m).get(at[i] as usize) {
                        if best.is_none_or(|(bt, _)| t < bt) {
                            best = Some((t, i));
                        }
                    }
                }
                let Some((t, i)) = best else { break };
                let m = ms[i];
                part.points.push(WfPoint { t, v: sl(m)[at[i] as usize].1, rank: members[m as usize].rank, member: m });
                for (j, &m) in ms.iter().enumerate() {
                    if sl(m).get(at[j] as usize).is_some_and(|s| s.0 == t) {
                        at[j] += 1;
                    }
                }
            }
        }
        part.groups.push(WfGroup { id: (a, len32(part.ids.len())), name_len, points: (p0, len32(part.points.len())) });
    }
    part
}

/// The (label, value) pairs of a group identity's length-prefixed part.
fn group_labels(mut b: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
    let mut take = move || {
        let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let x = b.get(4..4 + n)?;
        b = &b[4 + n..];
        Some(x)
    };
    std::iter::from_fn(move || Some((take()?, take()?)))
}

/// A shard's part on the wire between cluster nodes (the server's `fanout.rs`): a peer's
/// parts join the coordinator's shards' parts in the one merge. Little-endian; every buffer
/// and list length-prefixed (u32).
impl WfPart {
    pub fn to_wire(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.ids.len() + self.keys.len() + self.enc.len() + self.points.len() * 24 + self.groups.len() * 20 + 64);
        out.push(u8::from(self.labelled));
        for b in [&self.ids, &self.keys, &self.enc] {
            out.extend_from_slice(&len32(b.len()).to_le_bytes());
            out.extend_from_slice(b);
        }
        out.extend_from_slice(&len32(self.groups.len()).to_le_bytes());
        for g in &self.groups {
            for x in [g.id.0, g.id.1, g.name_len, g.points.0, g.points.1] {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        out.extend_from_slice(&len32(self.points.len()).to_le_bytes());
        for p in &self.points {
            out.extend_from_slice(&p.t.to_le_bytes());
            out.extend_from_slice(&p.v.to_bits().to_le_bytes());
            out.extend_from_slice(&p.rank.to_le_bytes());
            out.extend_from_slice(&p.member.to_le_bytes());
        }
        for pairs in [&self.members, &self.heads] {
            out.extend_from_slice(&len32(pairs.len()).to_le_bytes());
            for &(a, b) in pairs.iter() {
                out.extend_from_slice(&a.to_le_bytes());
                out.extend_from_slice(&b.to_le_bytes());
            }
        }
        out
    }

    /// [`WfPart::to_wire`]'s bytes back, checked so that the merge never indexes outside
    /// them (ranges within their buffers, members and ranks that exist): None if not.
    pub fn from_wire(b: &[u8], sources: usize) -> Option<WfPart> {
        let mut r = abacus_int::wire::Reader(b);
        let labelled = r.byte()? == 1;
        let ids = r.bytes()?;
        let keys = r.bytes()?;
        let enc = r.bytes()?;
        let n = r.u32()? as usize;
        let mut groups = Vec::with_capacity(n.min(1 << 20));
        for _ in 0..n {
            groups.push(WfGroup { id: (r.u32()?, r.u32()?), name_len: r.u32()?, points: (r.u32()?, r.u32()?) });
        }
        let n = r.u32()? as usize;
        let mut points = Vec::with_capacity(n.min(1 << 20));
        for _ in 0..n {
            points.push(WfPoint { t: r.u64()?, v: f64::from_bits(r.u64()?), rank: r.u32()?, member: r.u32()? });
        }
        let mut pairs = || -> Option<Vec<(u32, u32)>> {
            let n = r.u32()? as usize;
            let mut v = Vec::with_capacity(n.min(1 << 20));
            for _ in 0..n {
                v.push((r.u32()?, r.u32()?));
            }
            Some(v)
        };
        let members = pairs()?;
        let heads = pairs()?;
        if !r.is_empty() || heads.len() != groups.len() {
            return None;
        }
        let within = |(a, b): (u32, u32), len: usize| a <= b && b as usize <= len;
        let ok = groups.iter().all(|g| within(g.id, ids.len()) && g.name_len <= g.id.1 - g.id.0 && within(g.points, points.len()))
            && points.iter().all(|p| (p.member as usize) < members.len() && (p.rank as usize) < sources)
            && members.iter().all(|&m| within(m, keys.len()))
            && heads.iter().all(|&h| within(h, enc.len()))
            && groups.windows(2).all(|w| ids[w[0].id.0 as usize..w[0].id.1 as usize] < ids[w[1].id.0 as usize..w[1].id.1 as usize]);
        ok.then_some(WfPart { labelled, ids, groups, points, keys, members, enc, heads })
    }
}

#[cfg(test)]
#[path = "ts_waterfall_tests.rs"]
mod tests;
