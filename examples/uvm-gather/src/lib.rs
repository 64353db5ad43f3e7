//! # uvm-gather
//!
//! A row gather (`out[i] = table[picks[i]]`, the access of an embedding lookup) over a table
//! in managed memory, run under every Unified Memory policy of `lookahead-uvm`: the second
//! user of the policies' library beside the IVF search. The kernels are in
//! `uvm-gather-kernels`; the table is a [`lookahead_uvm::PolicyBuffer`] whose ranges are its
//! tiles, and [`gpu::GpuGather`] says only which tiles a gather reads and under which
//! policy.
//!
//! This module holds what needs no GPU: the table's [`Shape`], random inputs, the CPU
//! reference and the comparison against it.

pub mod gpu;

use std::ops::Range;

use rand::Rng;

/// A table of `rows` rows of `row_words` words, cut into tiles of `tile_rows` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Rows.
    pub rows: usize,
    /// Words per row.
    pub row_words: usize,
    /// Rows per tile (the last tile may be shorter).
    pub tile_rows: usize,
}

impl Shape {
    /// The shape, or why the kernels cannot take it: every size at least 1, rows and tiles
    /// numbered by `u32` (picks and ready flags), the table's words countable.
    pub fn new(rows: usize, row_words: usize, tile_rows: usize) -> Result<Shape, String> {
        if rows == 0 || row_words == 0 || tile_rows == 0 {
            return Err(format!(
                "a table of {rows} rows of {row_words} words in tiles of {tile_rows} rows: \
                 each must be at least 1"
            ));
        }
        if u32::try_from(rows).is_err() || u32::try_from(row_words).is_err() {
            return Err(format!(
                "{rows} rows of {row_words} words: rows and row words are numbered by u32"
            ));
        }
        if rows.checked_mul(row_words).is_none() {
            return Err(format!("{rows} rows of {row_words} words overflow usize"));
        }
        Ok(Shape {
            rows,
            row_words,
            tile_rows: tile_rows.min(rows),
        })
    }

    /// Words of the table.
    pub fn words(&self) -> usize {
        self.rows * self.row_words
    }

    /// Tiles of the table.
    pub fn tiles(&self) -> usize {
        self.rows.div_ceil(self.tile_rows)
    }

    /// The words of tile `tile`.
    pub fn tile_words(&self, tile: usize) -> Range<usize> {
        let (first, end) =
            uvm_gather_kernels::tile_words(tile, self.rows, self.row_words, self.tile_rows);
        first..end
    }

    /// The tiles the rows `picks` lie in, each once, in order.
    pub fn tiles_of(&self, picks: &[u32]) -> Vec<usize> {
        let mut tiles: Vec<usize> = picks.iter().map(|&r| r as usize / self.tile_rows).collect();
        tiles.sort_unstable();
        tiles.dedup();
        tiles
    }
}

/// Runs of adjacent tiles in `tiles` (sorted, distinct): the contiguous ranges they form.
pub fn runs(tiles: &[usize]) -> usize {
    tiles.windows(2).filter(|p| p[1] != p[0] + 1).count() + usize::from(!tiles.is_empty())
}

/// A table of `shape` of random words.
pub fn random_table(shape: Shape, rng: &mut impl Rng) -> Vec<u32> {
    (0..shape.words()).map(|_| rng.gen()).collect()
}

/// `n` rows of `0..rows`, uniformly at random.
pub fn random_picks(n: usize, rows: usize, rng: &mut impl Rng) -> Vec<u32> {
    (0..n).map(|_| rng.gen_range(0..rows as u32)).collect()
}

/// The CPU reference: row `picks[i]` of `table` (rows of `row_words` words) as row `i`.
pub fn cpu_gather(table: &[u32], row_words: usize, picks: &[u32]) -> Vec<u32> {
    picks
        .iter()
        .flat_map(|&r| &table[r as usize * row_words..(r as usize + 1) * row_words])
        .copied()
        .collect()
}

/// Where a gather's output first differs from the reference: output row and word, or the
/// lengths when they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// Word `word` of output row `row`.
    At {
        /// The output row.
        row: usize,
        /// The word within it.
        word: usize,
    },
    /// The output has `got` words where `want` were expected.
    Length {
        /// Words in the output.
        got: usize,
        /// Words expected.
        want: usize,
    },
}

/// The first difference of `got` from `want` (rows of `row_words` words), or `None`.
pub fn first_mismatch(got: &[u32], want: &[u32], row_words: usize) -> Option<Mismatch> {
    if got.len() != want.len() {
        return Some(Mismatch::Length {
            got: got.len(),
            want: want.len(),
        });
    }
    let at = got.iter().zip(want).position(|(g, w)| g != w)?;
    Some(Mismatch::At {
        row: at / row_words.max(1),
        word: at % row_words.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn shapes_are_checked_and_tiles_cover_the_rows_once() {
        assert!(Shape::new(0, 4, 1).is_err());
        assert!(Shape::new(4, 0, 1).is_err());
        assert!(Shape::new(4, 4, 0).is_err());
        assert!(Shape::new(usize::MAX, 4, 1).is_err());
        let s = Shape::new(10, 3, 4).unwrap();
        assert_eq!(s.tiles(), 3);
        let covered: Vec<usize> = (0..s.tiles()).flat_map(|t| s.tile_words(t)).collect();
        assert_eq!(covered, (0..s.words()).collect::<Vec<_>>());
        assert_eq!(s.tile_words(2), 24..30);
        assert!(s.tile_words(3).is_empty(), "past the last tile");
        assert_eq!(
            Shape::new(3, 2, 16).unwrap().tiles(),
            1,
            "a tile at most the table"
        );
    }

    #[test]
    fn picks_name_their_tiles_once_and_runs_count_adjacent_ones_once() {
        let s = Shape::new(100, 2, 10).unwrap();
        assert_eq!(s.tiles_of(&[95, 3, 7, 41, 12, 99]), [0, 1, 4, 9]);
        assert_eq!(runs(&[0, 1, 4, 9]), 3);
        assert_eq!(runs(&[]), 0);
        assert_eq!(runs(&[5]), 1);
        assert_eq!(runs(&[2, 3, 4]), 1);
    }

    #[test]
    fn the_reference_gathers_rows_and_the_check_finds_a_planted_difference() {
        let mut rng = StdRng::seed_from_u64(rand::random());
        let s = Shape::new(50, 7, 4).unwrap();
        let table = random_table(s, &mut rng);
        let picks = random_picks(200, s.rows, &mut rng);
        assert!(picks.iter().all(|&r| (r as usize) < s.rows));
        let want = cpu_gather(&table, s.row_words, &picks);
        for (i, &r) in picks.iter().enumerate() {
            let r = r as usize;
            assert_eq!(want[i * 7..i * 7 + 7], table[r * 7..r * 7 + 7]);
        }
        assert_eq!(first_mismatch(&want, &want, 7), None);
        // The negative control: one word changed, one row short.
        let mut bad = want.clone();
        bad[5 * 7 + 3] ^= 1;
        assert_eq!(
            first_mismatch(&bad, &want, 7),
            Some(Mismatch::At { row: 5, word: 3 })
        );
        assert_eq!(
            first_mismatch(&want[7..], &want, 7),
            Some(Mismatch::Length {
                got: want.len() - 7,
                want: want.len()
            })
        );
    }
}
