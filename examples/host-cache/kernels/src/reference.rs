//! The CPU reference of the row gathers and list scans, written apart from the kernels
//! (none of their helpers), and the checks of a kernel's output against it.
//!
//! A scan's distances are sums of 128 squared differences, which a warp adds in its own
//! order (4 per lane, then shuffles). On inputs on a grid of 1/16 in [-1, 1) ([`grid_value`])
//! nothing rounds: every squared difference is a multiple of 2^-8 below 4, every partial
//! sum a multiple of 2^-8 below 512, exact in f32, so the kernels' minima must equal these
//! bit for bit.

extern crate std;
use std::format;
use std::string::String;
use std::vec::Vec;

/// The value a grid input draws for `r` (any integer): one of the 32 multiples of 1/16 in
/// [-1, 1).
pub fn grid_value(r: u64) -> f32 {
    (r % 32) as f32 / 16.0 - 1.0
}

/// What [`crate::gather_rows`] writes: row `rows[r]` of `table` (rows of `len` floats) as
/// row `r`.
pub fn rows(table: &[f32], rows: &[u32], len: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows.len() * len);
    for &r in rows {
        let start = r as usize * len;
        out.extend_from_slice(&table[start..start + len]);
    }
    out
}

/// The squared distance between two vectors, in order.
fn squared_distance(a: &[f32], b: &[f32]) -> f32 {
    let mut sum = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        sum += (x - y) * (x - y);
    }
    sum
}

/// What [`crate::scan_lists`] computes for pair `p`: the smallest squared distance from
/// query `pair_query[p]` (`dim` floats of `queries`) to the vectors of list `pair_list[p]`
/// (`vecs[list_off[l] * dim..list_off[l + 1] * dim]`), infinity for an empty list.
pub fn scans(
    vecs: &[f32],
    dim: usize,
    list_off: &[u32],
    queries: &[f32],
    (pair_list, pair_query): (&[u32], &[u32]),
) -> Vec<f32> {
    pair_list
        .iter()
        .zip(pair_query)
        .map(|(&l, &q)| {
            let query = &queries[q as usize * dim..(q as usize + 1) * dim];
            let (lo, hi) = (
                list_off[l as usize] as usize,
                list_off[l as usize + 1] as usize,
            );
            vecs[lo * dim..hi * dim]
                .chunks(dim)
                .map(|v| squared_distance(v, query))
                .fold(f32::INFINITY, f32::min)
        })
        .collect()
}

/// `Ok` when `got` holds every row of `want` (rows of `len` floats) bit for bit; else how
/// many rows differ and the first.
pub fn check_rows(got: &[f32], want: &[f32], len: usize) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} floats, want {}", got.len(), want.len()));
    }
    let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    let differ: Vec<usize> = (0..want.len() / len.max(1))
        .filter(|&r| !same(&got[r * len..(r + 1) * len], &want[r * len..(r + 1) * len]))
        .collect();
    match differ.first() {
        None => Ok(()),
        Some(&r) => Err(format!(
            "{} of {} rows differ, the first is row {r}",
            differ.len(),
            want.len() / len.max(1)
        )),
    }
}

/// `Ok` when every scan result (`got`: the kernel's float bits) is its true value in `want`
/// bit for bit; else how many pairs differ and the first.
pub fn check_scans(got: &[u32], want: &[f32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} results, want {}", got.len(), want.len()));
    }
    let differ: Vec<usize> = (0..want.len())
        .filter(|&p| got[p] != want[p].to_bits())
        .collect();
    match differ.first() {
        None => Ok(()),
        Some(&p) => Err(format!(
            "{} of {} pairs differ, the first is pair {p}: {} (bits {:#x}), want {}",
            differ.len(),
            want.len(),
            f32::from_bits(got[p]),
            got[p],
            want[p]
        )),
    }
}
