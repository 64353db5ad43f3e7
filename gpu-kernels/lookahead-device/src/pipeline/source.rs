//! What a stage can hold: a slice, rows of a slice at a pitch, or rows of a slice picked
//! by an index list, each copied packed into the stage. These are the targets of
//! `#[prefetch_next(into = shared(..), of(name = target))]`.

use super::kind::CopyKind;
use super::stage::{aligned16, checked_row, Copier};
use crate::param::DeviceCopy;

/// Data a pipeline stage can be filled from: copied packed into the stage by a block.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be staged into shared memory",
    label = "not a stage source",
    note = "a stage is filled from a slice (`&x[a..b]`), rows at a pitch (`x.rows(first, row_len, rows, pitch)`) or gathered rows (`x.gather_rows(&idx[a..b], row_len)`), all from `lookahead_device::pipeline::StageRows`"
)]
pub trait StageSource {
    /// The elements' type.
    type Elem: DeviceCopy + Copy;

    /// How many elements the stage receives.
    fn elems(&self) -> usize;

    /// Every thread: its share of copying the source to stage elements `at..at + elems()`.
    fn copy_to<const LEN: usize, K: CopyKind>(
        &self,
        c: &mut Copier<'_, Self::Elem, LEN, K>,
        at: usize,
    );
}

impl<T: DeviceCopy + Copy> StageSource for [T] {
    type Elem = T;
    #[inline(always)]
    fn elems(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn copy_to<const LEN: usize, K: CopyKind>(&self, c: &mut Copier<'_, T, LEN, K>, at: usize) {
        c.slice(at, self);
    }
}

impl<S: StageSource + ?Sized> StageSource for &S {
    type Elem = S::Elem;
    #[inline(always)]
    fn elems(&self) -> usize {
        (**self).elems()
    }
    #[inline(always)]
    fn copy_to<const LEN: usize, K: CopyKind>(
        &self,
        c: &mut Copier<'_, S::Elem, LEN, K>,
        at: usize,
    ) {
        (**self).copy_to(c, at)
    }
}

impl<S: StageSource + ?Sized> StageSource for &mut S {
    type Elem = S::Elem;
    #[inline(always)]
    fn elems(&self) -> usize {
        (**self).elems()
    }
    #[inline(always)]
    fn copy_to<const LEN: usize, K: CopyKind>(
        &self,
        c: &mut Copier<'_, S::Elem, LEN, K>,
        at: usize,
    ) {
        (**self).copy_to(c, at)
    }
}

/// `rows` rows of `row_len` elements of a slice, row `r` starting at `first + r * pitch`
/// ([`StageRows::rows`]): a 2-D tile.
#[derive(Debug, Clone, Copy)]
pub struct Rows<'a, T> {
    src: &'a [T],
    first: usize,
    row_len: usize,
    rows: usize,
    pitch: usize,
}

/// Rows of `row_len` elements of a slice, row `r` starting at `idx[r] * row_len`
/// ([`StageRows::gather_rows`]).
#[derive(Debug, Clone, Copy)]
pub struct GatherRows<'a, T> {
    src: &'a [T],
    idx: &'a [u32],
    row_len: usize,
}

/// Stage sources cut from a slice: [`Rows`] and [`GatherRows`].
pub trait StageRows<T> {
    /// `rows` rows of `row_len` elements, row `r` from element `first + r * pitch`.
    fn rows(&self, first: usize, row_len: usize, rows: usize, pitch: usize) -> Rows<'_, T>;
    /// The rows `idx[0]`, `idx[1]`, ... of a table of rows of `row_len` elements.
    fn gather_rows<'a>(&'a self, idx: &'a [u32], row_len: usize) -> GatherRows<'a, T>;
}

impl<T> StageRows<T> for [T] {
    #[inline(always)]
    fn rows(&self, first: usize, row_len: usize, rows: usize, pitch: usize) -> Rows<'_, T> {
        Rows {
            src: self,
            first,
            row_len,
            rows,
            pitch,
        }
    }
    #[inline(always)]
    fn gather_rows<'a>(&'a self, idx: &'a [u32], row_len: usize) -> GatherRows<'a, T> {
        GatherRows {
            src: self,
            idx,
            row_len,
        }
    }
}

impl<T: DeviceCopy + Copy> StageSource for Rows<'_, T> {
    type Elem = T;
    #[inline(always)]
    fn elems(&self) -> usize {
        self.rows * self.row_len
    }
    #[inline(always)]
    fn copy_to<const LEN: usize, K: CopyKind>(&self, c: &mut Copier<'_, T, LEN, K>, at: usize) {
        let (first, pitch, src, row_len) = (self.first, self.pitch, self.src, self.row_len);
        // Row `r` starts `first + r * pitch` elements in: aligned when the first row is and
        // the pitch keeps it so.
        let aligned = aligned16(src.as_ptr(), first) && (pitch * size_of::<T>()) % 16 == 0;
        let row = |r: usize| checked_row(src, first + r * pitch, row_len);
        // SAFETY: `checked_row` keeps each row inside `src`; aligned as computed above.
        unsafe { c.rows_at(at, row_len, self.rows, row, aligned) }
    }
}

impl<T: DeviceCopy + Copy> StageSource for GatherRows<'_, T> {
    type Elem = T;
    #[inline(always)]
    fn elems(&self) -> usize {
        self.idx.len() * self.row_len
    }
    #[inline(always)]
    fn copy_to<const LEN: usize, K: CopyKind>(&self, c: &mut Copier<'_, T, LEN, K>, at: usize) {
        let (idx, row_len, src) = (self.idx, self.row_len, self.src);
        // One compare per row: an index below the table's rows is a row inside it.
        let table_rows = src.len().checked_div(row_len).unwrap_or(0);
        let aligned = aligned16(src.as_ptr(), 0) && (row_len * size_of::<T>()) % 16 == 0;
        let row = |r: usize| -> *const T {
            let i = idx[r] as usize;
            assert!(
                i < table_rows,
                "gather_rows: a row index is outside the table"
            );
            // SAFETY: row `i` of the table lies in `src` (checked just above).
            unsafe { src.as_ptr().add(i * row_len) }
        };
        // SAFETY: each row lies in `src` (`row` checks it); aligned as computed above.
        unsafe { c.rows_at(at, row_len, idx.len(), row, aligned) }
    }
}

/// How many values `start..end` (`..=` when `inclusive`) stepped by `step` takes: the
/// iterations of a pipelined `#[prefetch_next]` loop.
#[doc(hidden)]
#[inline(always)]
pub fn range_count(start: usize, end: usize, step: usize, inclusive: bool) -> usize {
    let span = match (inclusive, end.checked_sub(start)) {
        (_, None) => return 0,
        (false, Some(0)) => return 0,
        (false, Some(d)) => d - 1,
        (true, Some(d)) => d,
    };
    span / step.max(1) + 1
}

/// Issues `src` into stage elements `at..at + per` (a pipelined `#[prefetch_next]`
/// target). Panics (traps) when it holds more than `per` elements.
#[doc(hidden)]
#[inline(always)]
pub fn stage_in<T, S, const LEN: usize, K>(
    c: &mut Copier<'_, T, LEN, K>,
    at: usize,
    per: usize,
    src: &S,
) where
    T: DeviceCopy + Copy,
    S: StageSource<Elem = T> + ?Sized,
    K: CopyKind,
{
    assert!(
        src.elems() <= per,
        "a staged target holds more elements than `into = shared([T; N])` gives it (N)"
    );
    src.copy_to(c, at);
}

/// The staged copy of `src` in a waited stage: elements `at..at + src.elems()`.
#[doc(hidden)]
#[inline(always)]
pub fn staged<'a, T, S, const LEN: usize>(
    data: &'a [T; LEN],
    at: usize,
    per: usize,
    src: &S,
) -> &'a [T]
where
    T: DeviceCopy + Copy,
    S: StageSource<Elem = T> + ?Sized,
{
    let n = src.elems();
    assert!(
        n <= per,
        "a staged target holds more elements than `into = shared([T; N])` gives it (N)"
    );
    &data[at..at + n]
}
