//! One kernel per device intrinsic group: indices, atomics, warp operations, barriers,
//! shared memory, direct prefetches, bounds checks and math.

use lookahead_device::prelude::*;

#[kernel(min_len(out = 13))]
pub fn intr_indices(out: &mut [u32]) {
    if global_index_x() == 0 && global_index_y() == 0 && global_index_z() == 0 {
        out[0] = thread_idx_x() + thread_idx_y() + thread_idx_z();
        out[1] = block_idx_x() + block_idx_y() + block_idx_z();
        out[2] = block_dim_x();
        out[3] = block_dim_y();
        out[4] = block_dim_z();
        out[5] = grid_dim_x();
        out[6] = grid_dim_y();
        out[7] = grid_dim_z();
        out[8] = lane_id();
        out[9] = warp_id();
        out[10] = grid_stride_x() as u32;
        out[11] = WARP_SIZE;
        out[12] = sm_id();
    }
}

#[kernel(min_len(f = 2, u = 3, w = 3, i = 1))]
pub fn intr_atomics(f: &mut [f32], u: &mut [u32], w: &mut [u64], i: &mut [i32]) {
    atomic_add(&mut f[0], 1.5);
    atomic_add(&mut u[0], 1);
    atomic_add(&mut w[0], 1);
    atomic_max(&mut u[1], thread_idx_x());
    atomic_max(&mut w[1], global_index_x() as u64);
    atomic_max(&mut i[0], -(thread_idx_x() as i32));
    atomic_cas(&mut u[2], 0, 7);
    atomic_cas(&mut w[2], 0, 7);
    // SAFETY: `f[1]` is a valid, aligned f32 only accessed atomically.
    unsafe { lookahead_device::atomic::atomic_add_f32(&mut f[1], 0.5) };
}

#[kernel(min_len(out = 32))]
pub fn intr_warp(x: &[f32], out: &mut [f32]) {
    let l = lane_id() as usize;
    let v = x.get(l).copied().unwrap_or(0.0);
    let a = warp::shfl_down_f32(v, 1);
    let b = warp::shfl_xor_f32(v, 2);
    let c = warp::shfl_idx_f32(v, 0);
    let d = f32::from_bits(warp::shfl_up_u32(v.to_bits(), 1));
    let s = warp::warp_sum_f32(v);
    let all = warp::vote_all(v > 0.0) as u32;
    let any = warp::vote_any(v > 0.0) as u32;
    let ballot = warp::ballot(v > 0.0);
    let mask = warp::active_mask();
    if l < out.len() {
        out[l] = a + b + c + d + s + (all + any) as f32 + (ballot ^ mask) as f32;
    }
}

/// Each warp claims `CLAIMS` slots from `next[0]` (one at a time) and as many pairs from
/// `next64[0]` (two at a time), in a loop; every lane writes what it got for each claim to
/// `got[((warp * CLAIMS + k) * 32 + lane) * 2 ..]`.
#[kernel(min_len(next = 1, next64 = 1))]
pub fn intr_warp_claims(next: &mut [u32], next64: &mut [u64], got: &mut [u32]) {
    const CLAIMS: usize = 3;
    let warp = global_index_x() / 32;
    let lane = lane_id() as usize;
    for k in 0..CLAIMS {
        let a = warp_fetch_add(&mut next[0], 1u32);
        let b = warp_fetch_add(&mut next64[0], 2u64);
        let at = ((warp * CLAIMS + k) * 32 + lane) * 2;
        if at + 1 < got.len() {
            got[at] = a;
            got[at + 1] = b as u32;
        }
        warp::sync();
    }
}

#[kernel(min_len(flag = 1))]
pub fn intr_sync(flag: &mut [u32]) {
    fence_block();
    sync_threads();
    fence_gpu();
    nanosleep(100);
    fence_system();
    if global_index_x() == 0 {
        flag[0] = 1;
    }
}

/// Each block reverses its share of `x` into `y` through the launch's dynamic shared
/// memory: as many floats as `LaunchConfig::with_shared_mem` gives it (block `b`'s share
/// starts at `b * len`; past the end of `x` the tile holds zeros).
#[kernel(same_len(x, y))]
pub fn intr_dynamic_shared(x: &[f32], y: &mut [f32]) {
    let tile = dynamic_shared::<f32>();
    let n = tile.len();
    let base = block_idx_x() as usize * n;
    let (t, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
    for i in (t..n).step_by(threads) {
        tile.set(i, if base + i < x.len() { x[base + i] } else { 0.0 });
    }
    sync_threads();
    for i in (t..n).step_by(threads) {
        if base + i < y.len() {
            y[base + i] = tile.get(n - 1 - i);
        }
    }
}

/// What [`intr_dynamic_shared`] writes for `x` with `per_block` floats of dynamic shared
/// memory per block.
#[cfg(not(target_arch = "nvptx64"))]
pub fn dynamic_shared_reference(x: &[f32], per_block: usize) -> std::vec::Vec<f32> {
    (0..x.len())
        .map(|i| {
            let (base, k) = (i / per_block * per_block, i % per_block);
            x.get(base + per_block - 1 - k).copied().unwrap_or(0.0)
        })
        .collect()
}

#[kernel(same_len(x, y))]
pub fn intr_shared(x: &[f32], y: &mut [f32]) {
    let tile = shared_array!(f32; 256);
    let counts = shared_array!(u32; 1);
    let t = thread_idx_x() as usize;
    let i = global_index_x();
    if t == 0 {
        counts.set(0, 0);
    }
    tile.set(t % 256, if i < x.len() { x[i] } else { 0.0 });
    sync_threads();
    counts.atomic_add(0, 1);
    // The next thread's element, wrapping within the block (blocks of up to 256 threads).
    let neighbour = tile.get((t + 1) % (block_dim_x() as usize).min(256));
    sync_threads();
    if i < y.len() {
        y[i] = neighbour + counts.get(0) as f32;
    }
}

#[kernel]
pub fn intr_prefetch_direct(x: &[f32]) {
    let i = global_index_x();
    if i < x.len() {
        prefetch::prefetch_l1(&x[i]);
        prefetch::prefetch_l2(&x[i]);
        #[cfg(target_feature = "sm_80")]
        {
            prefetch::prefetch_l2_evict_last(&x[i]);
            prefetch::prefetch_l2_evict_normal(&x[i]);
            prefetch::apply_priority_evict_normal(&x[i]);
        }
        #[cfg(target_feature = "sm_90")]
        prefetch::bulk_prefetch_slice(&x[i..]);
        prefetch::bulk_prefetch_slice_portable(&x[i..]);
    }
}

/// Bounds-checked indexing traps; `get_unchecked` does not check.
#[kernel(same_len(x, y))]
pub fn intr_bounds(x: ManagedSlice<f32>, y: ManagedSliceMut<f32>, k: usize) {
    let mut y = y;
    let i = global_index_x();
    if i < y.len() {
        // SAFETY: `i < y.len() == x.len()` (checked by the launcher's `same_len`).
        let unchecked = unsafe { *x.get_unchecked(i) };
        y[i] = x[i + k] + unchecked;
    }
}

/// `get_unchecked` alone, on both sides: no bounds check, so no trap in the PTX (the
/// counterpart of [`intr_bounds`], whose indexing traps).
#[kernel(same_len(x, y))]
pub fn intr_unchecked(x: ManagedSlice<f32>, y: ManagedSliceMut<f32>) {
    let mut y = y;
    let i = global_index_x();
    if i < y.len() {
        // SAFETY: `i < y.len() == x.len()` (checked by the launcher's `same_len`).
        unsafe { *y.get_unchecked_mut(i) = 2.0 * *x.get_unchecked(i) };
    }
}

/// `GpuFloat` in f32 and f64: libdevice calls, `sqrt.rn`, `fma.rn` and the rounding
/// conversions, one result per function.
#[kernel]
pub fn intr_math(x: &[f32], out32: &mut [f32], out64: &mut [f64]) {
    let i = global_index_x();
    if i < x.len() && out32.len() >= 8 * x.len() && out64.len() >= 4 * x.len() {
        let v = x[i];
        let o = &mut out32[8 * i..8 * i + 8];
        o[0] = v.sin();
        o[1] = v.exp();
        o[2] = v.abs().ln_1p();
        o[3] = v.powf(1.5f32.atan2(v));
        o[4] = v.abs().sqrt();
        o[5] = v.mul_add(2.0, 1.0);
        o[6] = v.floor() + v.ceil() + v.trunc() + v.round();
        o[7] = v.tanh() + v.cbrt() + v.powi(3);
        let d = v as f64;
        let o = &mut out64[4 * i..4 * i + 4];
        o[0] = d.cos();
        o[1] = d.abs().sqrt();
        o[2] = d.exp2().log10();
        o[3] = d.hypot(2.0);
    }
}
