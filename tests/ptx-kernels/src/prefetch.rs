//! One kernel per `#[prefetch_next]` form: the loops, the levels, `level = auto`, request
//! queues, and a `#[device_fn]` with a loop of its own.

use lookahead_device::prelude::*;
use lookahead_device::uvm::requests::RequestQueue;

#[kernel(same_len(x, y))]
pub fn pf_range_l1(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 2, level = l1)]
    for i in 0..x.len() {
        y[i] = x[i] * 2.0;
    }
}

#[kernel(same_len(x, y))]
pub fn pf_range_l2(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 8, level = l2)]
    for i in 0..x.len() {
        y[i] += x[i];
    }
}

#[kernel]
pub fn pf_range_inclusive(x: &[u32], out: &mut [u32], last: usize) {
    let mut acc = 0u32;
    #[prefetch_next(of(x))]
    for i in 0..=last {
        acc = acc.wrapping_add(x.get(i).copied().unwrap_or(0));
    }
    out[0] = acc;
}

#[kernel(same_len(x, y))]
pub fn pf_grid_stride(x: &[f64], y: &mut [f64]) {
    #[prefetch_next(distance = 4, level = l2)]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        y[i] = x[i] + 1.0;
    }
}

#[kernel(same_len(x, y))]
pub fn pf_evict_last_portable(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(distance = 4, level = l2_evict_last, portable)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

#[kernel(same_len(x, y))]
pub fn pf_evict_normal_portable(x: &[f32], y: &mut [f32]) {
    #[prefetch_next(level = l2_evict_normal, portable)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
}

#[kernel(min_len(out = 1))]
pub fn pf_iter(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(distance = 16, level = l2)]
    for v in x.iter() {
        acc += *v;
    }
    out[0] = acc;
}

#[kernel]
pub fn pf_iter_mut(y: &mut [i32], delta: i32) {
    #[prefetch_next(distance = 4, level = l1)]
    for v in y.iter_mut() {
        *v += delta;
    }
}

#[kernel(min_len(out = 1))]
pub fn pf_chunks_bulk_portable(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(distance = 1, level = bulk, portable)]
    for c in x.chunks(1024) {
        acc += c[0];
    }
    out[0] = acc;
}

#[kernel(min_len(out = 1))]
pub fn pf_chunks_l2(x: &[u64], out: &mut [u64]) {
    let mut acc = 0;
    #[prefetch_next(distance = 2, level = l2)]
    for c in x.chunks_exact(64) {
        acc += c[63];
    }
    out[0] = acc;
}

/// Managed memory: whatever level is asked for, the L2 prefetch is emitted.
#[kernel(min_len(out = 1))]
pub fn pf_managed_bulk(x: ManagedSlice<f32>, out: ManagedSliceMut<f32>) {
    let mut out = out;
    let mut acc = 0.0;
    #[prefetch_next(distance = 1, level = bulk, portable)]
    for c in x.chunks(1024) {
        acc += c[0];
    }
    out[0] = acc;
}

#[device_fn]
fn sum_ahead(xs: &[f32]) -> f32 {
    let mut acc = 0.0;
    #[prefetch_next(distance = 8, level = l2)]
    for x in xs.iter() {
        acc += *x;
    }
    acc
}

#[kernel(min_len(out = 1))]
pub fn pf_device_fn(x: DeviceSlice<f32>, out: DeviceSliceMut<f32>) {
    let mut out = out;
    out[0] = sum_ahead(&x);
}

/// `level = auto`: three entries, `pf_auto` (the loop as written, no prefetch), `pf_auto__l2`
/// and `pf_auto__l2_evict_last` (four grid strides ahead); the launcher picks one by
/// measurement on a GPU, and on the emulator runs each once, then `l2`.
#[kernel(min_len(out = 1))]
pub fn pf_auto(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(level = auto, distance = 4)]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        acc += x[i];
    }
    atomic_add(&mut out[0], acc);
}

/// `level = auto(l2, bulk), distance = auto(2..=8)`: entries `pf_tuned`, `pf_tuned__l2` and
/// `pf_tuned__bulk`, each taking the distance (2, 4 or 8 chunks ahead) as its last parameter.
#[kernel(min_len(out = 1))]
pub fn pf_tuned(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(level = auto(l2, bulk), distance = auto(2..=8))]
    for c in x.chunks(64) {
        acc += c[0];
    }
    atomic_add(&mut out[0], acc);
}

/// A target that is an expression of the loop variable: iteration `i` prefetches the source
/// element iteration `i + 4` gathers (`idx[i + 4 * stride]` is loaded for that).
#[kernel(same_len(idx, out))]
pub fn pf_of_loop_var(src: &[f32], idx: &[u32], out: &mut [f32]) {
    #[prefetch_next(distance = 4, level = l2, of(src.at(idx[i] as usize)))]
    for i in (global_index_x()..out.len()).step_by(grid_stride_x()) {
        out[i] = src[idx[i] as usize];
    }
}

/// Managed chunks through a request queue: before the loop, requests for chunks 0 and 1;
/// iteration `c` requests chunk `c + 2`, then waits for chunk `c` (flag `c`).
#[kernel(min_len(out = 1))]
pub fn pf_queue_chunks(x: ManagedSlice<f32>, out: &mut [f32], queue: RequestQueue) {
    let mut acc = 0.0;
    #[prefetch_next(distance = 2, queue = queue)]
    for c in x.chunks(256) {
        acc += c[0];
    }
    if global_index_x() == 0 {
        out[0] = acc;
    }
}

/// Lists in managed memory, one per iteration of a grid-stride loop, named by an expression
/// of the loop variable; `weights` is device memory and keeps its L2 hint. Two targets:
/// list `l` is requested under flag `2 * l`.
#[kernel(same_len(sums, weights))]
pub fn pf_queue_lists(
    lists: ManagedSlice<f32>,
    offsets: &[u32],
    weights: &[f32],
    sums: &mut [f32],
    queue: RequestQueue,
) {
    #[prefetch_next(distance = 1, queue = queue, of(lists.part(offsets[l] as usize..offsets[l + 1] as usize), weights))]
    for l in (global_index_x()..sums.len()).step_by(grid_stride_x()) {
        let mut acc = 0.0;
        for v in &lists[offsets[l] as usize..offsets[l + 1] as usize] {
            acc += *v;
        }
        sums[l] = acc * weights[l];
    }
}

/// Bulk prefetch without `portable`: only built where the architecture has it.
#[cfg(any(not(target_arch = "nvptx64"), target_feature = "sm_90"))]
#[kernel(min_len(out = 1))]
pub fn pf_bulk_sm90(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(level = bulk)]
    for c in x.chunks(4096) {
        acc += c[0];
    }
    out[0] = acc;
}
