//! Byte-range arithmetic for prefetching, with no GPU in sight: validation, coalescing of
//! adjacent or overlapping ranges, cutting into large pieces, and splitting the pieces
//! across worker threads. Everything here is pure and unit-tested on the CPU.

use crate::error::{Error, Result};

/// A half-open range of bytes `[start, start + len)` in the unified address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteRange {
    /// First byte's address.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
}

impl ByteRange {
    /// A range; fails with [`Error::InvalidRange`] when it is empty or wraps the address space.
    pub fn new(start: u64, len: u64) -> Result<Self> {
        if len == 0 {
            return Err(Error::InvalidRange {
                start,
                len,
                limit: u64::MAX,
                reason: "empty range",
            });
        }
        if start.checked_add(len).is_none() {
            return Err(Error::InvalidRange {
                start,
                len,
                limit: u64::MAX,
                reason: "range wraps around the address space",
            });
        }
        Ok(ByteRange { start, len })
    }

    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.start + self.len
    }

    /// Whether `self` lies entirely inside `outer`.
    pub fn is_within(&self, outer: &ByteRange) -> bool {
        self.start >= outer.start && self.end() <= outer.end()
    }
}

/// Converts an element range `[first, first + count)` of an allocation of `len` elements of
/// `elem_size` bytes at `base` into a byte range, refusing empty, overflowing or
/// out-of-bounds ranges with [`Error::InvalidRange`].
pub fn element_range(
    base: u64,
    len: usize,
    elem_size: usize,
    first: usize,
    count: usize,
) -> Result<ByteRange> {
    let bad = |reason| Error::InvalidRange {
        start: first as u64,
        len: count as u64,
        limit: len as u64,
        reason,
    };
    if count == 0 {
        return Err(bad("empty range"));
    }
    let end = first.checked_add(count).ok_or(bad("range overflows"))?;
    if end > len {
        return Err(bad("range extends past the end of the allocation"));
    }
    let start = (first as u64)
        .checked_mul(elem_size as u64)
        .and_then(|o| base.checked_add(o))
        .ok_or(bad("byte offset overflows"))?;
    let bytes = (count as u64)
        .checked_mul(elem_size as u64)
        .ok_or(bad("byte length overflows"))?;
    ByteRange::new(start, bytes)
}

/// Sorts ranges and merges those that overlap or touch. The result is sorted, disjoint and
/// non-adjacent, and covers exactly the bytes of the input.
pub fn coalesce(ranges: &[ByteRange]) -> Vec<ByteRange> {
    coalesce_with_gap(ranges, 0)
}

/// Like [`coalesce`], but also merges ranges separated by at most `max_gap` bytes (the gap is
/// then moved too: one larger prefetch call can be cheaper than two small ones).
pub fn coalesce_with_gap(ranges: &[ByteRange], max_gap: u64) -> Vec<ByteRange> {
    let mut sorted: Vec<ByteRange> = ranges.iter().copied().filter(|r| r.len > 0).collect();
    sorted.sort_unstable();
    let mut out: Vec<ByteRange> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end().saturating_add(max_gap) => {
                let end = last.end().max(r.end());
                last.len = end - last.start;
            }
            _ => out.push(r),
        }
    }
    out
}

/// Cuts each range into consecutive pieces of at most `piece` bytes (the last piece of a
/// range may be shorter). A `piece` of 0 leaves ranges whole.
pub fn chunk(ranges: &[ByteRange], piece: u64) -> Vec<ByteRange> {
    if piece == 0 {
        return ranges.to_vec();
    }
    let mut out = Vec::new();
    for r in ranges {
        let mut start = r.start;
        while start < r.end() {
            let len = piece.min(r.end() - start);
            out.push(ByteRange { start, len });
            start += len;
        }
    }
    out
}

/// Splits `pieces` (in order) into at most `parts` contiguous groups of about equal byte
/// counts, so each worker thread gets a run of neighbouring pieces. Never returns empty
/// groups; returns fewer groups than `parts` when there are fewer pieces.
pub fn split_across(pieces: &[ByteRange], parts: usize) -> Vec<Vec<ByteRange>> {
    let parts = parts.max(1).min(pieces.len());
    if parts == 0 {
        return Vec::new();
    }
    let total: u128 = pieces.iter().map(|p| p.len as u128).sum();
    let mut groups: Vec<Vec<ByteRange>> = Vec::with_capacity(parts);
    let mut current = Vec::new();
    let mut done: u128 = 0;
    for (i, p) in pieces.iter().enumerate() {
        current.push(*p);
        done += p.len as u128;
        let group_index = groups.len() as u128 + 1;
        let left_pieces = pieces.len() - i - 1;
        let left_groups = parts - groups.len() - 1;
        // Close the group once it reaches its share of the bytes, or when every remaining
        // piece is needed to give each remaining group at least one.
        if left_groups > 0
            && (done * parts as u128 >= total * group_index || left_pieces == left_groups)
        {
            groups.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

/// Total bytes in `ranges` (counting overlaps twice).
pub fn total_bytes(ranges: &[ByteRange]) -> u64 {
    ranges.iter().map(|r| r.len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, len: u64) -> ByteRange {
        ByteRange { start, len }
    }

    #[test]
    fn new_rejects_empty_and_wrapping() {
        assert!(matches!(
            ByteRange::new(5, 0),
            Err(Error::InvalidRange { .. })
        ));
        assert!(matches!(
            ByteRange::new(u64::MAX, 2),
            Err(Error::InvalidRange { .. })
        ));
        assert_eq!(ByteRange::new(4, 4).unwrap().end(), 8);
    }

    #[test]
    fn element_ranges_are_bounds_checked() {
        assert_eq!(element_range(1000, 10, 4, 2, 3).unwrap(), r(1008, 12));
        assert!(element_range(1000, 10, 4, 8, 3).is_err());
        assert!(element_range(1000, 10, 4, 0, 0).is_err());
        assert!(element_range(1000, 10, 4, usize::MAX, 2).is_err());
        assert!(element_range(u64::MAX - 4, 10, 4, 2, 1).is_err());
        assert_eq!(element_range(0, 10, 4, 0, 10).unwrap(), r(0, 40));
    }

    #[test]
    fn coalesce_merges_overlapping_and_adjacent() {
        let got = coalesce(&[r(100, 10), r(0, 10), r(10, 5), r(105, 20), r(50, 1)]);
        assert_eq!(got, vec![r(0, 15), r(50, 1), r(100, 25)]);
        // Containment.
        assert_eq!(coalesce(&[r(0, 100), r(10, 10)]), vec![r(0, 100)]);
        // Duplicates and empties.
        assert_eq!(coalesce(&[r(0, 4), r(0, 4), r(9, 0)]), vec![r(0, 4)]);
        assert!(coalesce(&[]).is_empty());
    }

    #[test]
    fn coalesce_with_gap_bridges_small_holes() {
        let input = [r(0, 10), r(12, 10), r(40, 10)];
        assert_eq!(coalesce_with_gap(&input, 2), vec![r(0, 22), r(40, 10)]);
        assert_eq!(coalesce_with_gap(&input, 1), coalesce(&input));
        assert_eq!(coalesce_with_gap(&input, 100), vec![r(0, 50)]);
    }

    #[test]
    fn coalesced_output_covers_the_same_bytes() {
        // A deterministic pseudo-random set of 2 MiB "lists" out of 64.
        let mib2 = 2u64 << 20;
        let mut x = 12345u64;
        let mut input = Vec::new();
        for _ in 0..40 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            input.push(r((x >> 33) % 64 * mib2, mib2));
        }
        let out = coalesce(&input);
        let mut covered = [false; 64];
        for i in &input {
            covered[(i.start / mib2) as usize] = true;
        }
        let expect: u64 = covered.iter().filter(|c| **c).count() as u64 * mib2;
        assert_eq!(total_bytes(&out), expect);
        for w in out.windows(2) {
            assert!(w[0].end() < w[1].start, "not disjoint/non-adjacent: {w:?}");
        }
    }

    #[test]
    fn chunk_cuts_into_pieces() {
        let got = chunk(&[r(0, 10), r(100, 4)], 4);
        assert_eq!(got, vec![r(0, 4), r(4, 4), r(8, 2), r(100, 4)]);
        assert_eq!(chunk(&[r(0, 10)], 0), vec![r(0, 10)]);
        let big = chunk(&[r(0, 4 << 30)], 32 << 20);
        assert_eq!(big.len(), 128);
        assert_eq!(total_bytes(&big), 4 << 30);
    }

    #[test]
    fn split_across_balances_bytes_and_keeps_order() {
        let pieces = chunk(&[r(0, 100)], 10);
        let groups = split_across(&pieces, 3);
        assert_eq!(groups.len(), 3);
        let flat: Vec<_> = groups.iter().flatten().copied().collect();
        assert_eq!(flat, pieces);
        for g in &groups {
            let b = total_bytes(g);
            assert!((30..=40).contains(&b), "unbalanced: {b}");
        }
        // More parts than pieces: one piece each, no empty groups.
        let groups = split_across(&pieces[..2], 8);
        assert_eq!(groups.len(), 2);
        assert!(split_across(&[], 4).is_empty());
        // Uneven pieces still give every group something.
        let uneven = [r(0, 1000), r(2000, 1), r(3000, 1), r(4000, 1)];
        let groups = split_across(&uneven, 4);
        assert_eq!(groups.len(), 4);
        assert!(groups.iter().all(|g| !g.is_empty()));
        // One part.
        assert_eq!(split_across(&pieces, 1), vec![pieces.clone()]);
        assert_eq!(split_across(&pieces, 0), vec![pieces]);
    }
}
