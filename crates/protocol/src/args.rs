//! A command's arguments: byte strings that share one owner.
//!
//! Why not `Vec<Bytes>`: every `Bytes` slice of the read buffer costs an atomic increment of
//! the buffer's reference count when it is made and an atomic decrement when it is dropped
//! (through a vtable call). A pipelined `PFADD key e1 .. e10` paid twelve of each per command,
//! about a fifth of the server's CPU. Each [`Arg`] is a plain (pointer, length) view of the
//! block instead: making and dropping an argument touches no shared counter. The commands of
//! a pipelined run parsed together share one argument list and one reference to the block
//! (a `Batch`), so a command costs one reference-count increment and decrement and no
//! allocation of its own.
//!
//! Handlers see `&[Arg]`, and an [`Arg`] dereferences to `[u8]`, so argument code reads as it
//! did with `&[Bytes]`. The one thing an `Arg` cannot do is outlive its [`Args`]: it is neither
//! `Clone` nor constructible outside this file, and `Args` hands out only shared references to
//! its arguments, so every `&Arg` (and every `&[u8]` obtained from it) borrows the `Args` that
//! keeps its bytes alive. Code that must keep an argument (ECHO's reply, a WATCHed key) takes an owned
//! copy with [`Args::bytes`].

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use bytes::Bytes;

/// One argument: a view of bytes owned by the [`Args`] it belongs to.
pub struct Arg {
    ptr: *const u8,
    len: usize,
}

// SAFETY: an `Arg` is a read-only view of immutable bytes owned (through `Bytes`, which is
// `Send + Sync`) by the batch holding it; it is reachable only through an `Args` sharing that
// batch, so it moves between threads together with its owner and is only ever read.
unsafe impl Send for Arg {}
// SAFETY: as above: shared access only ever reads the bytes.
unsafe impl Sync for Arg {}

impl Arg {
    /// A view of `b`'s bytes. Private: the caller must keep `b` (or a `Bytes` sharing its
    /// storage) in the same `Args` for as long as the `Arg` exists.
    fn of(b: &[u8]) -> Arg {
        Arg { ptr: b.as_ptr(), len: b.len() }
    }
}

impl Deref for Arg {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` lies inside a `Bytes` held by the batch this `Arg` belongs
        // to (`Args::from_block_run` checks every range, `Args::from_vec` takes each whole
        // `Bytes`). A `Bytes`' contents never move or change while it is alive, whether or not
        // the `Bytes` value itself moves. The returned slice borrows `self`, which can only be
        // reached through a shared borrow of an `Args` holding that batch (no `Arg` is ever
        // handed out by value or mutably), so the owner outlives the slice.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl AsRef<[u8]> for Arg {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&Bytes::copy_from_slice(self), f)
    }
}

impl PartialEq for Arg {
    fn eq(&self, other: &Arg) -> bool {
        self[..] == other[..]
    }
}

impl Eq for Arg {}

impl PartialEq<[u8]> for Arg {
    fn eq(&self, other: &[u8]) -> bool {
        self[..] == *other
    }
}

impl PartialEq<&[u8]> for Arg {
    fn eq(&self, other: &&[u8]) -> bool {
        self[..] == **other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for Arg {
    fn eq(&self, other: &[u8; N]) -> bool {
        self[..] == other[..]
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Arg {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self[..] == other[..]
    }
}

/// What keeps the arguments' bytes alive.
enum Owner {
    /// One block holding every argument (what the parser produces).
    Block(Bytes),
    /// One `Bytes` per argument, in order (inline commands, the log, tests).
    Each(Vec<Bytes>),
}

/// The arguments of one or more commands (a pipeline's run, parsed together) and the bytes
/// they point into, shared by those commands' [`Args`]. Never changed once made.
struct Batch {
    list: Vec<Arg>,
    owner: Owner,
}

/// A command's arguments (name first), dereferencing to `&[Arg]`.
///
/// The commands of one parsed run share one argument list and one reference to the read
/// buffer's block (a [`Batch`]): a command costs one reference-count increment and decrement,
/// and no allocation of its own.
pub struct Args {
    batch: Arc<Batch>,
    /// This command's arguments: `len` entries of `batch.list` from `first` (kept as a
    /// pointer so that dereferencing, which handlers do at every argument access, needs no
    /// bounds check).
    first: *const Arg,
    len: usize,
}

// SAFETY: `first` is a read-only view into `batch.list`, which the `Arc` keeps alive and which
// is never changed after the `Batch` is made; `Batch` itself is `Send + Sync` (its `Arg`s are,
// see above, and `Bytes` is). So an `Args` can move to and be shared with other threads as
// its `Arc` can.
unsafe impl Send for Args {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Args {}

impl Args {
    /// The arguments of a run of commands, appended to `out`: command `k`'s arguments are
    /// `spans[ends[k - 1]..ends[k]]` (from 0 for the first), each span (start, end) of `block`.
    /// A span outside the block (never made by the parser) gives an empty argument, and ends
    /// out of order or beyond the spans give commands with fewer arguments, not a panic.
    pub fn from_block_run(block: Bytes, spans: &[(usize, usize)], ends: &[usize], out: &mut Vec<Args>) {
        let mut list = Vec::with_capacity(spans.len());
        list.extend(spans.iter().map(|&(s, e)| Arg::of(block.get(s..e).unwrap_or(&[]))));
        Args::split(Batch { list, owner: Owner::Block(block) }, ends, out);
    }

    /// One command's arguments at `spans` of `block` (see [`Args::from_block_run`]).
    pub fn from_block(block: Bytes, spans: &[(usize, usize)]) -> Args {
        let mut out = Vec::with_capacity(1);
        Args::from_block_run(block, spans, &[spans.len()], &mut out);
        out.pop().expect("one command")
    }

    /// Arguments that each own their bytes.
    pub fn from_vec(args: Vec<Bytes>) -> Args {
        let list: Vec<Arg> = args.iter().map(|b| Arg::of(b)).collect();
        let n = list.len();
        let mut out = Vec::with_capacity(1);
        Args::split(Batch { list, owner: Owner::Each(args) }, &[n], &mut out);
        out.pop().expect("one command")
    }

    /// Shares `batch` among the commands ending at `ends` in its list, appended to `out`.
    fn split(batch: Batch, ends: &[usize], out: &mut Vec<Args>) {
        let total = batch.list.len();
        let base = batch.list.as_ptr();
        let batch = Arc::new(batch);
        let mut at = 0;
        out.reserve(ends.len());
        for &end in ends {
            let end = end.clamp(at, total);
            // SAFETY: `at <= end <= total`, so the pointer stays inside (or one past the end
            // of) the list's buffer, which the `Arc` owns from here on and never changes.
            let first = unsafe { base.add(at) };
            out.push(Args { batch: batch.clone(), first, len: end - at });
            at = end;
        }
    }

    /// Argument `i` as an owned `Bytes` sharing the storage (no copy), for code that keeps it
    /// beyond the command. Panics if `i` is out of range, like indexing.
    pub fn bytes(&self, i: usize) -> Bytes {
        let a = &self[i];
        match &self.batch.owner {
            Owner::Block(block) => {
                if a.is_empty() {
                    Bytes::new()
                } else {
                    block.slice_ref(a)
                }
            }
            // The list of an `Each` batch is one entry per `Bytes`, in order; this command's
            // arguments start at its offset in that list.
            Owner::Each(v) => {
                // SAFETY: `first` and `batch.list.as_ptr()` point into the same list.
                let offset = unsafe { self.first.offset_from(self.batch.list.as_ptr()) } as usize;
                v[offset + i].clone()
            }
        }
    }

    /// The arguments as owned `Bytes` (tests, diagnostics).
    pub fn to_vec(&self) -> Vec<Bytes> {
        (0..self.len).map(|i| self.bytes(i)).collect()
    }
}

impl Deref for Args {
    type Target = [Arg];

    #[inline]
    fn deref(&self) -> &[Arg] {
        // SAFETY: `first..first + len` lies inside `batch.list` (see `split`), which `batch`
        // keeps alive and unchanged for as long as `self` exists.
        unsafe { std::slice::from_raw_parts(self.first, self.len) }
    }
}

impl From<Vec<Bytes>> for Args {
    fn from(args: Vec<Bytes>) -> Args {
        Args::from_vec(args)
    }
}

impl fmt::Debug for Args {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Args {
    fn eq(&self, other: &Args) -> bool {
        self[..] == other[..]
    }
}

impl Eq for Args {}

impl PartialEq<Vec<Bytes>> for Args {
    fn eq(&self, other: &Vec<Bytes>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a[..] == b[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_and_owned_copies() {
        let block = Bytes::from_static(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n");
        let args = Args::from_block(block, &[(8, 11), (17, 18), (5, 2), (0, 99)]);
        assert_eq!(&args[0][..], b"GET");
        assert_eq!(&args[1][..], b"a");
        // Ranges the parser never makes give empty arguments, not a panic.
        assert!(args[2].is_empty() && args[3].is_empty());
        assert_eq!(args.bytes(0), Bytes::from_static(b"GET"));
        assert_eq!(args.bytes(2), Bytes::new());
        let owned = Args::from(vec![Bytes::from_static(b"GET"), Bytes::from_static(b"a"), Bytes::new(), Bytes::new()]);
        assert_eq!(owned, args);
        assert_eq!(owned.to_vec(), args.to_vec());
        // Moving the owner (to another thread) keeps the views valid.
        let moved = std::thread::spawn(move || args).join().unwrap();
        assert_eq!(&moved[1][..], b"a");
    }

    #[test]
    fn a_run_shares_one_batch() {
        let block = Bytes::from_static(b"GET a PING SET b c");
        let spans = [(0, 3), (4, 5), (6, 10), (11, 14), (15, 16), (17, 18)];
        let mut out = Vec::new();
        Args::from_block_run(block.clone(), &spans, &[2, 3, 6], &mut out);
        let got: Vec<Vec<&[u8]>> = out.iter().map(|c| c.iter().map(|a| &a[..]).collect()).collect();
        assert_eq!(got, vec![vec![&b"GET"[..], b"a"], vec![b"PING"], vec![b"SET", b"b", b"c"]]);
        assert_eq!(out[2].bytes(2), Bytes::from_static(b"c"));
        // Commands outlive each other in any order (each holds the batch).
        let last = out.pop().unwrap();
        out.clear();
        assert_eq!(&last[1][..], b"b");
        // Ends out of order or past the spans give shorter commands, not a panic.
        let mut odd = Vec::new();
        Args::from_block_run(block, &spans, &[3, 1, 9], &mut odd);
        assert_eq!(odd.iter().map(|c| c.len()).collect::<Vec<_>>(), vec![3, 0, 3]);
        // `bytes` on arguments owned one by one.
        let each = Args::from(vec![Bytes::from_static(b"x"), Bytes::from_static(b"y")]);
        assert_eq!(each.bytes(1), Bytes::from_static(b"y"));
    }
}
