//! Small kernels for the PTX tests in `lookahead-tests` (`tests/tests/ptx_dsl.rs`): one per
//! device intrinsic group and one per `#[prefetch_next]` form. `lookahead-tests`' build
//! script compiles them for sm_70, sm_80 and sm_90; the host build only type-checks them
//! (their launchers point at an empty PTX table, [`PTX`]).
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_gpu_kernel, asm_experimental_arch)
)]

// The CPU references below are host code: a kernel crate is `no_std` on every target, so
// its host-only parts name what they take from the standard library.
#[cfg(not(target_arch = "nvptx64"))]
extern crate std;
#[cfg(not(target_arch = "nvptx64"))]
use std::{vec, vec::Vec};

/// Empty on the host: the PTX tests read the modules `lookahead-tests` builds.
#[cfg(not(target_arch = "nvptx64"))]
pub static PTX: &[(u32, &str)] = &[];

use lookahead_device::memory;
use lookahead_device::prelude::*;
use lookahead_device::uvm::requests::RequestQueue;

pub mod pipeline;

/// Kernel names, as the PTX tests expect them on every architecture.
pub const KERNELS: &[&str] = &[
    "pf_range_l1",
    "pf_range_l2",
    "pf_range_inclusive",
    "pf_grid_stride",
    "pf_evict_last_portable",
    "pf_evict_normal_portable",
    "pf_iter",
    "pf_iter_mut",
    "pf_chunks_bulk_portable",
    "pf_chunks_l2",
    "pf_managed_bulk",
    "pf_device_fn",
    "pf_auto",
    "pf_auto__l2",
    "pf_auto__l2_evict_last",
    "pf_tuned",
    "pf_tuned__l2",
    "pf_tuned__bulk",
    "pf_of_loop_var",
    "pf_queue_chunks",
    "pf_queue_lists",
    "intr_indices",
    "intr_atomics",
    "intr_warp_claims",
    "intr_warp",
    "intr_sync",
    "intr_shared",
    "intr_prefetch_direct",
    "intr_bounds",
    "intr_math",
    "user_chase",
    "user_axpy",
    "user_bounded",
];

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

// ---- Kernels with deliberate bugs, for the emulator's reports (tests/tests/emulator.rs) ----

/// Threads 40 and up return before a barrier the others wait at: a GPU block would hang.
#[kernel]
pub fn bug_barrier_after_return(out: &mut [u32]) {
    let t = thread_idx_x();
    if t as usize >= out.len() {
        return;
    }
    sync_threads();
    out[t as usize] = t;
}

/// Only half the warp reaches a full-mask shuffle.
#[kernel]
pub fn bug_divergent_shuffle(out: &mut [f32]) {
    let l = lane_id();
    if l < 16 {
        out[l as usize] = warp::shfl_down_f32(l as f32, 1);
    }
}

/// Writes a shared-memory element, passes `warp::sync`, and reads a neighbour's: the next
/// lane's of the same warp (ordered by the warp barrier), or with `across` set the same
/// lane's of the other warp of a 64-thread block (not ordered: a data race).
#[kernel(same_len(x, y))]
pub fn warp_synced_neighbour(x: &[f32], y: &mut [f32], across: u32) {
    let tile = shared_array!(f32; 64);
    let t = thread_idx_x() as usize % 64;
    let i = global_index_x();
    tile.set(t, if i < x.len() { x[i] } else { 0.0 });
    warp::sync();
    let from = if across != 0 {
        (t + 32) % 64
    } else {
        (t & !31) | ((t + 1) & 31)
    };
    let v = tile.get(from);
    if i < y.len() {
        y[i] = v;
    }
}

/// Reads a neighbour's shared-memory element with no barrier after the writes.
#[kernel(same_len(x, y))]
pub fn bug_missing_barrier(x: &[f32], y: &mut [f32]) {
    let tile = shared_array!(f32; 64);
    let t = thread_idx_x() as usize % 64;
    let i = global_index_x();
    tile.set(t, if i < x.len() { x[i] } else { 0.0 });
    // Missing: sync_threads();
    let left = tile.get((t + 63) % 64);
    if i < y.len() {
        y[i] = left;
    }
}

/// Thread 0 spins until thread 1 of its block sets `flag[0]`: fine on a GPU, whose threads
/// run concurrently; the emulator must let thread 1 run while thread 0 spins.
#[kernel(min_len(flag = 1))]
pub fn spin_on_a_sibling(flag: &mut [u32], out: &mut [u32]) {
    let p = flag.as_mut_ptr();
    match thread_idx_x() {
        // SAFETY: `p` is `flag[0]`, aligned (`min_len(flag = 1)`).
        0 => unsafe {
            while memory::load_acquire_gpu(p) == 0 {}
            if !out.is_empty() {
                out[0] = memory::load_acquire_gpu(p);
            }
        },
        // SAFETY: as above.
        1 => unsafe { memory::store_release_system(p, 7) },
        _ => {}
    }
}

/// Waits for a flag nothing sets: hangs on a GPU.
#[kernel(min_len(flag = 1))]
pub fn bug_spin_forever(flag: &mut [u32]) {
    let p = flag.as_mut_ptr();
    if thread_idx_x() == 0 {
        // SAFETY: `p` is `flag[0]`.
        while unsafe { memory::load_acquire_gpu(p) } != 2 {}
    }
}

/// A loop that never ends and calls nothing (with `n == u32::MAX`): hangs on a GPU.
#[kernel(min_len(out = 1))]
pub fn bug_endless_loop(n: u32, out: &mut [u32]) {
    let mut i = 0u32;
    let mut acc = 0u32;
    while i < n || n == u32::MAX {
        acc = acc.wrapping_mul(31).wrapping_add(i);
        i = i.wrapping_add(1);
    }
    out[0] = acc;
}

/// Every thread adds to `y[0]` without an atomic: on a GPU the updates race.
#[kernel(min_len(y = 1))]
pub fn bug_racy_sum(y: &mut [f32]) {
    y[0] += 1.0;
}

/// The same sum with an atomic: no race.
#[kernel(min_len(y = 1))]
pub fn atomic_sum(y: &mut [f32]) {
    atomic_add(&mut y[0], 1.0);
}

/// Even threads wait at one `sync_threads()`, odd threads at another: undefined in CUDA.
#[kernel]
pub fn bug_divergent_barrier(out: &mut [u32]) {
    let t = thread_idx_x() as usize;
    if t % 2 == 0 {
        sync_threads();
    } else {
        sync_threads();
    }
    if t < out.len() {
        out[t] = 1;
    }
}

/// Reads a shared flag no thread wrote: garbage on a GPU.
#[kernel]
pub fn bug_uninitialised_shared(out: &mut [u32]) {
    let flags = shared_array!(bool; 64);
    let t = thread_idx_x() as usize % 64;
    if t != 5 {
        flags.set(t, true);
    }
    sync_threads();
    if t < out.len() {
        out[t] = flags.get((t + 1) % 64) as u32;
    }
}

/// A 400 KB local array per thread (a GPU thread may have up to 512 KiB of local memory).
#[kernel]
pub fn large_local_array(out: &mut [u32]) {
    let mut local = [0u32; 100_000];
    let t = thread_idx_x() as usize;
    for (k, v) in local.iter_mut().enumerate().step_by(997) {
        *v = (k + t) as u32;
    }
    let pick = core::hint::black_box(t * 997 % 100_000);
    if t < out.len() {
        out[t] = local[pick];
    }
}

/// A node of a linked structure: the index of the next node and a value.
#[derive(Debug, Clone, Copy, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct Node {
    /// Index of the next node.
    pub next: u32,
    /// The node's value.
    pub value: f32,
}

/// How [`user_chase`] walks: how many links, and what to scale the sum by.
#[derive(Debug, Clone, Copy, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct Walk {
    /// Links to follow.
    pub steps: u32,
    /// Factor applied to each chain's sum.
    pub scale: f32,
}

/// Thread `t` follows `walk.steps` links from node `starts[t]`, summing the values it visits
/// (the start's included), and writes the sum times `walk.scale` to `sums[t]`. A slice of the
/// user's own struct and a struct by value.
#[kernel(same_len(starts, sums))]
pub fn user_chase(nodes: &[Node], starts: &[u32], walk: Walk, sums: &mut [f32]) {
    let t = global_index_x();
    if t >= starts.len() {
        return;
    }
    let mut at = starts[t] as usize;
    let mut sum = 0.0f32;
    for _ in 0..=walk.steps {
        let n = nodes[at];
        sum += n.value;
        at = n.next as usize;
    }
    sums[t] = sum * walk.scale;
}

/// `y = a * x + y` with its parameters grouped in one struct of views and values.
#[derive(KernelParams)]
#[repr(C)]
pub struct Axpy {
    /// Read.
    pub x: DeviceSlice<f32>,
    /// Read and written.
    pub y: DeviceSliceMut<f32>,
    /// The factor.
    pub a: f32,
    /// How many elements each thread does, one grid stride apart.
    pub per_thread: u32,
}

/// `p.y[i] = p.a * p.x[i] + p.y[i]`, grid-stride.
#[kernel]
pub fn user_axpy(mut p: Axpy) {
    let n = p.x.len().min(p.y.len());
    let mut i = global_index_x();
    let mut k = 0;
    while i < n && k < p.per_thread {
        p.y[i] += p.a * p.x[i];
        i += grid_stride_x();
        k += 1;
    }
}

/// `y[i] = 2 x[i]`, for blocks of at most 128 threads, 4 of them resident per multiprocessor
/// (CUDA's `__launch_bounds__(128, 4)`).
#[kernel(same_len(x, y), launch_bounds(threads = 128, blocks_per_sm = 4))]
pub fn user_bounded(x: &[f32], y: &mut [f32]) {
    let i = global_index_x();
    if i < x.len() {
        y[i] = 2.0 * x[i];
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

/// The CPU reference of [`intr_math`]: the standard library's functions.
#[cfg(not(target_arch = "nvptx64"))]
pub fn math_reference(x: &[f32]) -> (Vec<f32>, Vec<f64>) {
    let mut o32 = vec![f32::NAN; 8 * x.len()];
    let mut o64 = vec![f64::NAN; 4 * x.len()];
    for (i, &v) in x.iter().enumerate() {
        o32[8 * i..8 * i + 8].copy_from_slice(&[
            v.sin(),
            v.exp(),
            v.abs().ln_1p(),
            v.powf(1.5f32.atan2(v)),
            v.abs().sqrt(),
            v.mul_add(2.0, 1.0),
            v.floor() + v.ceil() + v.trunc() + v.round(),
            v.tanh() + v.cbrt() + v.powi(3),
        ]);
        let d = v as f64;
        o64[4 * i..4 * i + 4].copy_from_slice(&[
            d.cos(),
            d.abs().sqrt(),
            d.exp2().log10(),
            d.hypot(2.0),
        ]);
    }
    (o32, o64)
}

/// The CPU reference of [`user_chase`].
#[cfg(not(target_arch = "nvptx64"))]
pub fn chase_reference(nodes: &[Node], starts: &[u32], walk: Walk) -> Vec<f32> {
    starts
        .iter()
        .map(|&s| {
            let (mut at, mut sum) = (s as usize, 0.0f32);
            for _ in 0..=walk.steps {
                sum += nodes[at].value;
                at = nodes[at].next as usize;
            }
            sum * walk.scale
        })
        .collect()
}

/// `n` nodes whose links form one random cycle, with values from `value(i)`, and a start per
/// chain from `start(t)`: a pointer chase's data.
#[cfg(not(target_arch = "nvptx64"))]
pub fn random_nodes(
    n: usize,
    mut next_random: impl FnMut(usize) -> usize,
    value: impl Fn(usize) -> f32,
) -> Vec<Node> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, next_random(i + 1));
    }
    let mut nodes = vec![
        Node {
            next: 0,
            value: 0.0
        };
        n
    ];
    for k in 0..n {
        let (here, there) = (order[k], order[(k + 1) % n]);
        nodes[here] = Node {
            next: there as u32,
            value: value(here),
        };
    }
    nodes
}
