//! Reductions checked exactly.
//!
//! A GPU reduction fixes no order for its additions (grid-stride partial sums, warp
//! shuffles, atomics in whatever order the warps finish), so a float sum of random data
//! can only be compared with a reference within a tolerance, and a tolerance that covers
//! the worst rounding of millions of additions also covers a missing block or warp. These
//! inputs leave nothing to round: small non-negative integers whose total is at most
//! 2^24 ([`EXACT_LIMIT`]). Every partial sum, in any order, is then an integer of at most
//! 2^24, which an f32 holds exactly, so each addition is exact and the kernel's result must
//! equal the reference bit for bit ([`check`]). The values are non-negative, so a left-out
//! or repeated element always changes the total.
//!
//! ```
//! use lookahead_bench::exact_sum::{check, input};
//!
//! let mut state = 7u32;
//! let data = input(1000, |k| { state = state.wrapping_mul(747_796_405).wrapping_add(1); state % k });
//! let sum: f32 = data.values.iter().rev().sum(); // any order
//! assert!(check(sum, data.sum).0);
//! assert!(!check(sum - data.values[0] - 1.0, data.sum).0);
//! ```

/// The largest total whose every partial sum an f32 holds exactly: 2^24 (the integers up to
/// it all fit the f32 significand).
pub const EXACT_LIMIT: u32 = 1 << 24;

/// A reduction's input and its exact sum.
#[derive(Debug, Clone, PartialEq)]
pub struct SumInput {
    /// The elements: non-negative integers, as f32.
    pub values: Vec<f32>,
    /// Their sum, at most [`EXACT_LIMIT`].
    pub sum: u32,
}

/// `n` random non-negative integers (as f32) whose total is at most [`EXACT_LIMIT`], about
/// half of it: each uniform in `0..=EXACT_LIMIT / n` while that is at least 1; for longer
/// inputs each is 1 with a probability that keeps the expected total at 2^23, 0 otherwise
/// (and 0 once the total reaches the limit, so it never passes it). `uniform(k)` draws an
/// integer uniformly from `0..k` (`k >= 1`), from the caller's generator.
pub fn input(n: usize, mut uniform: impl FnMut(u32) -> u32) -> SumInput {
    let most = EXACT_LIMIT as usize / n.max(1);
    let mut draw = || match most {
        0 => u32::from(uniform(n.div_ceil(EXACT_LIMIT as usize / 2) as u32) == 0),
        m => uniform(m as u32 + 1),
    };
    let mut sum = 0u32;
    let values = (0..n)
        .map(|_| {
            let v = draw().min(EXACT_LIMIT - sum);
            sum += v;
            v as f32
        })
        .collect();
    SumInput { values, sum }
}

/// Whether a kernel's sum `got` is the exact sum `want` (bit for bit), and a line saying
/// what it got.
pub fn check(got: f32, want: u32) -> (bool, String) {
    let exact = want as f32;
    if got.to_bits() == exact.to_bits() {
        (true, format!("sum {got} = the exact sum"))
    } else {
        let off = got as f64 - want as f64;
        (
            false,
            format!("sum {got}, exact sum {want}: off by {off} (part of the input left out or added twice)"),
        )
    }
}

/// The sum as a grid-stride kernel of `threads` threads forms it, on the CPU: thread `t`
/// adds elements `t`, `t + threads`, ... in f32, each warp of 32 threads adds its partial
/// sums, and the warps' totals are added from the last warp to the first; elements `i` for
/// which `left_out(i)` holds are skipped. With inputs from [`input`] the order changes
/// nothing; what is left out is the planted bug of a negative control (a block, a warp,
/// one grid-stride pass).
pub fn grid_stride_sum(values: &[f32], threads: usize, left_out: impl Fn(usize) -> bool) -> f32 {
    let threads = threads.max(1);
    let mut partial = vec![0.0f32; threads];
    // Element by element, each added to its thread's sum: the order within a thread is the
    // kernel's, and the walk is sequential in memory.
    for (i, &v) in values.iter().enumerate() {
        if !left_out(i) {
            partial[i % threads] += v;
        }
    }
    partial
        .chunks(32)
        .map(|warp| warp.iter().sum::<f32>())
        .rev()
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator's `uniform(k)`.
    fn xorshift(seed: u64) -> impl FnMut(u32) -> u32 {
        let mut s = seed | 1;
        move |k| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % k as u64) as u32
        }
    }

    #[test]
    fn totals_stay_within_the_exact_limit_at_every_length() {
        for n in [1usize, 37, 1 << 20, (1 << 24) + 5] {
            let data = input(n, xorshift(n as u64));
            assert_eq!(data.values.len(), n);
            let total: u64 = data.values.iter().map(|&v| v as u64).sum();
            assert_eq!(total, data.sum as u64, "n = {n}");
            assert!(data.sum <= EXACT_LIMIT, "n = {n}: {}", data.sum);
            if n >= 1 << 20 {
                assert!(data.sum > EXACT_LIMIT / 4, "n = {n}: about half the limit");
            }
        }
    }

    /// 4M + 37 inputs over 1056 blocks of 256 threads (8 per SM of an H100): 15 grid-stride
    /// passes, the last one partial. The full sum is exact in the kernel's order; leaving
    /// out one block, one warp, one pass or the 37-element tail is caught every time.
    #[test]
    fn the_check_catches_a_missing_block_warp_pass_or_tail() {
        let n = (1 << 22) + 37;
        let threads = 1056 * 256;
        let data = input(n, xorshift(3));
        let (ok, detail) = check(grid_stride_sum(&data.values, threads, |_| false), data.sum);
        assert!(ok, "{detail}");
        let planted: [(&str, &dyn Fn(usize) -> bool); 4] = [
            ("block 5", &|i| (i % threads) / 256 == 5),
            ("warp 9", &|i| (i % threads) / 32 == 9),
            ("pass 3", &|i| i / threads == 3),
            ("the tail", &|i| i >= n - 37),
        ];
        for (what, left_out) in planted {
            let (ok, detail) = check(grid_stride_sum(&data.values, threads, left_out), data.sum);
            assert!(!ok, "{what} left out, but the check passed: {detail}");
        }
        let (ok, _) = check(f32::NAN, data.sum);
        assert!(!ok, "NaN is not a sum");
    }
}
