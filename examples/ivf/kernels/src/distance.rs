//! A lane's part of a squared distance in [`crate::scan`] and [`crate::pull_scan`] (the
//! same floats from both).

use lookahead_device::prelude::*;

use crate::DIMS_PER_LANE;

/// Quads (4 floats) a lane holds of a row.
pub const LANE_QUADS: usize = DIMS_PER_LANE / 4;

// The pairwise sum below is written for four quads.
const _: () = assert!(LANE_QUADS == 4);

/// `sum_j sum_u (q[4j + u] - v[j][u])^2`: each quad's four terms fused in order (one `fma`
/// per term after the first), the quads' sums added pairwise, `(0 + 1) + (2 + 3)`. Quads
/// past the vector's dimensions must be zero in both `q` and `v` (they add exactly 0).
///
/// Why this order: a running sum over all 16 terms was one chain of dependent adds per
/// query, which left the scans stalled on the adds' latency; four short chains overlap,
/// and the fused terms are one instruction each instead of two.
#[inline(always)]
pub fn lane_part(q: &[f32; DIMS_PER_LANE], v: &[[f32; 4]; LANE_QUADS]) -> f32 {
    let quad = |j: usize| {
        let t = |u: usize| q[4 * j + u] - v[j][u];
        let mut s = t(0) * t(0);
        s = GpuFloat::mul_add(t(1), t(1), s);
        s = GpuFloat::mul_add(t(2), t(2), s);
        GpuFloat::mul_add(t(3), t(3), s)
    };
    (quad(0) + quad(1)) + (quad(2) + quad(3))
}
