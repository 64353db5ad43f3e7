//! The yardstick the scan's read rate is measured against: a plain read-only reduction.

use lookahead_device::prelude::*;

use crate::quad;

/// Adds every float of `data` into `sum[0]`: each thread sums quads `i`, `i + stride`, ...
/// four loads at a time, each warp adds its total with one atomic. The bytes read per
/// second of this kernel are what the hardware gives a streaming read, the rate the scans
/// are held to (`ivf_scan`). `data` must be 16-byte aligned (else nothing is read).
#[kernel]
pub fn read_sum(data: &[f32], sum: &mut [f32]) {
    if !quad::aligned(data) || sum.is_empty() {
        return;
    }
    let quads = data.len() / 4;
    let (stride, mut i) = (grid_stride_x(), global_index_x());
    let mut s = [0.0f32; 4];
    while i + 3 * stride < quads {
        for (u, acc) in s.iter_mut().enumerate() {
            // SAFETY: i + u * stride < quads, so the quad lies in `data`; aligned above.
            let v = unsafe { quad::load(data, 4 * (i + u * stride)) };
            *acc += v[0] + v[1] + v[2] + v[3];
        }
        i += 4 * stride;
    }
    while i < quads {
        // SAFETY: i < quads; aligned above.
        let v = unsafe { quad::load(data, 4 * i) };
        s[0] += v[0] + v[1] + v[2] + v[3];
        i += stride;
    }
    if global_index_x() == 0 {
        for &x in &data[4 * quads..] {
            s[0] += x;
        }
    }
    let total = warp::warp_sum_f32(s[0] + s[1] + s[2] + s[3]);
    if lane_id() == 0 {
        atomic_add(&mut sum[0], total);
    }
}
