//! A command's arguments: byte strings that share one owner.
//!
//! Why not `Vec<Bytes>`: every `Bytes` slice of the read buffer costs an atomic increment of
//! the buffer's reference count when it is made and an atomic decrement when it is dropped
//! (through a vtable call). A pipelined `PFADD key e1 .. e10` paid twelve of each per command,
//! about a fifth of the server's CPU. [`Args`] holds ONE reference to the block its arguments
//! were parsed from, and each [`Arg`] is a plain (pointer, length) view into it: making and
//! dropping an argument touches no shared counter.
//!
//! Handlers see `&[Arg]`, and an [`Arg`] dereferences to `[u8]`, so argument code reads as it
//! did with `&[Bytes]`. The one thing an `Arg` cannot do is outlive its [`Args`]: it is neither
//! `Clone` nor constructible outside this file, and `Args` hands out only shared references to
//! its list, so every `&Arg` (and every `&[u8]` obtained from it) borrows the `Args` that keeps
//! its bytes alive. Code that must keep an argument (ECHO's reply, a WATCHed key) takes an owned
//! copy with [`Args::bytes`].

use std::fmt;
use std::ops::Deref;

use bytes::Bytes;

/// One argument: a view of bytes owned by the [`Args`] it belongs to.
pub struct Arg {
    ptr: *const u8,
    len: usize,
}

// SAFETY: an `Arg` is a read-only view of immutable bytes owned (through `Bytes`, which is
// `Send + Sync`) by the `Args` holding it; it is reachable only through that `Args`, so it
// moves between threads together with its owner and is only ever read.
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
        // SAFETY: `ptr..ptr+len` lies inside a `Bytes` held by the `Args` this `Arg` belongs to
        // (`Args::from_block` checks every range, `Args::from_vec` takes each whole `Bytes`).
        // A `Bytes`' contents never move or change while it is alive, whether or not the
        // `Bytes` value itself moves. The returned slice borrows `self`, which can only be
        // reached through a shared borrow of that `Args` (no `Arg` is ever handed out by value
        // or mutably), so the owner outlives the slice.
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

/// A command's arguments (name first), dereferencing to `&[Arg]`.
pub struct Args {
    // Field order: `list` is dropped before `owner` (not that it matters: `Arg` has no drop).
    list: Vec<Arg>,
    owner: Owner,
}

impl Args {
    /// Arguments at `spans` (start, end) of `block`. A span outside the block (never made by
    /// the parser) gives an empty argument rather than a panic.
    pub fn from_block(block: Bytes, spans: &[(usize, usize)]) -> Args {
        let mut list = Vec::with_capacity(spans.len());
        list.extend(spans.iter().map(|&(s, e)| Arg::of(block.get(s..e).unwrap_or(&[]))));
        Args { list, owner: Owner::Block(block) }
    }

    /// Arguments that each own their bytes.
    pub fn from_vec(args: Vec<Bytes>) -> Args {
        let list = args.iter().map(|b| Arg::of(b)).collect();
        Args { list, owner: Owner::Each(args) }
    }

    /// Argument `i` as an owned `Bytes` sharing the storage (no copy), for code that keeps it
    /// beyond the command. Panics if `i` is out of range, like indexing.
    pub fn bytes(&self, i: usize) -> Bytes {
        match &self.owner {
            Owner::Block(block) => {
                let a = &self.list[i];
                if a.is_empty() {
                    Bytes::new()
                } else {
                    block.slice_ref(a)
                }
            }
            Owner::Each(v) => v[i].clone(),
        }
    }

    /// The arguments as owned `Bytes` (tests, diagnostics).
    pub fn to_vec(&self) -> Vec<Bytes> {
        (0..self.list.len()).map(|i| self.bytes(i)).collect()
    }
}

impl Deref for Args {
    type Target = [Arg];

    #[inline]
    fn deref(&self) -> &[Arg] {
        &self.list
    }
}

impl From<Vec<Bytes>> for Args {
    fn from(args: Vec<Bytes>) -> Args {
        Args::from_vec(args)
    }
}

impl fmt::Debug for Args {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.list.iter()).finish()
    }
}

impl PartialEq for Args {
    fn eq(&self, other: &Args) -> bool {
        self.list == other.list
    }
}

impl Eq for Args {}

impl PartialEq<Vec<Bytes>> for Args {
    fn eq(&self, other: &Vec<Bytes>) -> bool {
        self.list.len() == other.len() && self.list.iter().zip(other).all(|(a, b)| a[..] == b[..])
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
}
