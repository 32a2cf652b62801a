//! A vector stored in fixed-size pages, so that no push ever copies or allocates more than
//! one page.
//!
//! Why: the table's per-segment arrays (the segments themselves and their room) and its
//! directory grow with the table. As `Vec`s, each push that met a full capacity reallocated
//! and copied the whole array (3 MB of segment headers at 500 million keys) inside one
//! insert: a step whose cost grows with the table. Here the first page grows as a `Vec` does
//! up to [`PAGE`] elements (so a small table pays for what it holds, not for a page), and
//! every later page is allocated at exactly [`PAGE`] elements and never moves. The only
//! array that still grows by doubling is the list of page pointers: one pointer per
//! [`PAGE`] elements (1 KB of pointers for 128K segments), a copy 1/1024 of the size.
//!
//! The price is one more dependent load on an index (the page pointer, from a list small
//! enough to stay in the L1 cache). The code is safe Rust: the pages are `Vec`s that are
//! only pushed to while below their capacity.

use std::ops::{Index, IndexMut, Range};

/// log2 of the elements per page.
const PAGE_BITS: u32 = 10;
/// Elements per page (24 KB of 24-byte directory entries or segment headers).
pub(crate) const PAGE: usize = 1 << PAGE_BITS;

/// A growable array in pages of [`PAGE`] elements (see the module comment).
pub(crate) struct Pages<T> {
    pages: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Pages<T> {
    fn default() -> Self {
        Pages::new()
    }
}

impl<T> Pages<T> {
    pub(crate) const fn new() -> Self {
        Pages {
            pages: Vec::new(),
            len: 0,
        }
    }

    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `v`: at most one allocation of one page (the first page: a `Vec`'s doubling
    /// up to [`PAGE`]), plus, once per [`PAGE`] pushes, the page-pointer list's own growth.
    #[inline]
    pub(crate) fn push(&mut self, v: T) {
        if self.len.is_multiple_of(PAGE) {
            // A fresh page: the first grows on demand (small tables), later ones are whole.
            let page = if self.pages.is_empty() {
                Vec::new()
            } else {
                Vec::with_capacity(PAGE)
            };
            self.pages.push(page);
        }
        let last = self.pages.last_mut().expect("a page with room");
        debug_assert!(last.len() < PAGE);
        last.push(v);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        self.pages
            .get(i >> PAGE_BITS)
            .and_then(|p| p.get(i & (PAGE - 1)))
    }

    /// Elements `a` and `b` (which must differ) at once, both mutable.
    pub(crate) fn pair_mut(&mut self, a: usize, b: usize) -> (&mut T, &mut T) {
        assert!(a != b && a < self.len && b < self.len, "pair_mut({a}, {b})");
        let (pa, pb) = (a >> PAGE_BITS, b >> PAGE_BITS);
        let (ia, ib) = (a & (PAGE - 1), b & (PAGE - 1));
        if pa == pb {
            let page = &mut self.pages[pa];
            if ia < ib {
                let (lo, hi) = page.split_at_mut(ib);
                (&mut lo[ia], &mut hi[0])
            } else {
                let (lo, hi) = page.split_at_mut(ia);
                (&mut hi[0], &mut lo[ib])
            }
        } else if pa < pb {
            let (lo, hi) = self.pages.split_at_mut(pb);
            (&mut lo[pa][ia], &mut hi[0][ib])
        } else {
            let (lo, hi) = self.pages.split_at_mut(pa);
            (&mut hi[0][ia], &mut lo[pb][ib])
        }
    }

    /// Sets every element of `range` to `v`.
    pub(crate) fn fill(&mut self, range: Range<usize>, v: T)
    where
        T: Copy,
    {
        assert!(range.end <= self.len, "fill past the end");
        let mut i = range.start;
        while i < range.end {
            let (p, off) = (i >> PAGE_BITS, i & (PAGE - 1));
            let n = (PAGE - off).min(range.end - i);
            self.pages[p][off..off + n].fill(v);
            i += n;
        }
    }

    /// Frees up to `pages` pages from the end (their elements dropped), so that a large
    /// array can be given back a bounded amount at a time.
    pub(crate) fn release(&mut self, pages: usize) {
        let keep = self.pages.len().saturating_sub(pages);
        self.pages.truncate(keep);
        self.len = self.len.min(keep * PAGE);
        if self.pages.is_empty() {
            self.pages = Vec::new();
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.pages.iter().flatten()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        self.pages.iter_mut().flatten()
    }

    /// Bytes allocated: the pages' capacity and the page-pointer list.
    pub(crate) fn alloc_bytes(&self) -> usize {
        let first = self.pages.first().map_or(0, Vec::capacity);
        let rest = self.pages.len().saturating_sub(1) * PAGE;
        (first + rest) * std::mem::size_of::<T>()
            + self.pages.capacity() * std::mem::size_of::<Vec<T>>()
    }
}

impl<T> Index<usize> for Pages<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        &self.pages[i >> PAGE_BITS][i & (PAGE - 1)]
    }
}

impl<T> IndexMut<usize> for Pages<T> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.pages[i >> PAGE_BITS][i & (PAGE - 1)]
    }
}

impl<T> FromIterator<T> for Pages<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut p = Pages::new();
        for v in iter {
            p.push(v);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_behave_as_a_vec() {
        let n = 3 * PAGE + 17;
        let mut p: Pages<usize> = (0..n).collect();
        let mut v: Vec<usize> = (0..n).collect();
        assert_eq!(p.len(), n);
        assert!(p.iter().eq(v.iter()));
        p.fill(PAGE - 3..2 * PAGE + 5, 7);
        v[PAGE - 3..2 * PAGE + 5].fill(7);
        for (a, b) in [(1, 2), (2, 1), (5, PAGE + 1), (2 * PAGE + 1, 3)] {
            let (x, y) = p.pair_mut(a, b);
            std::mem::swap(x, y);
            v.swap(a, b);
        }
        assert!(p.iter().eq(v.iter()));
        let mut q: Pages<usize> = (0..n).collect();
        q.release(2);
        assert!(q.len() == 2 * PAGE && q.iter().copied().eq(0..2 * PAGE));
        q.release(5);
        assert!(q.is_empty() && q.alloc_bytes() == 0);
        assert!((0..n).all(|i| p[i] == v[i] && p.get(i) == Some(&v[i])));
        assert_eq!(p.get(n), None);
        // Later pages are allocated whole and never reallocated: capacity is exact.
        assert_eq!(
            p.alloc_bytes(),
            4 * PAGE * 8 + p.pages.capacity() * std::mem::size_of::<Vec<usize>>()
        );
    }
}
