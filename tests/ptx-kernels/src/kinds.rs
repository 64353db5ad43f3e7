//! Every accepted parameter kind, every `#[prefetch_next]` form, `level = auto` kernels and
//! request queues, with the CPU reference of what each computes: launched on the emulator
//! (`tests/tests/emulator.rs`) and on a GPU (`tests/tests/gpu_dsl.rs`). Kernels that every
//! thread runs whole (no grid-stride split) are launched with one thread.

#[cfg(not(target_arch = "nvptx64"))]
use std::vec::Vec;

use lookahead_device::prelude::*;
use lookahead_device::uvm::requests::RequestQueue;

use crate::Node;

/// The scalars of [`kind_scalars`], one of each accepted type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scalars {
    /// `f32`.
    pub a: f32,
    /// `f64`.
    pub b: f64,
    /// `i8`.
    pub c: i8,
    /// `i16`.
    pub d: i16,
    /// `i32`.
    pub e: i32,
    /// `i64`.
    pub f: i64,
    /// `isize`.
    pub g: isize,
    /// `u8`.
    pub h: u8,
    /// `u16`.
    pub i: u16,
    /// `u32`.
    pub j: u32,
    /// `u64`.
    pub k: u64,
    /// `usize`.
    pub l: usize,
}

/// One value of every scalar type for [`kind_scalars`], none alike.
pub const SCALARS: Scalars = Scalars {
    a: 1.5,
    b: -2.0,
    c: -3,
    d: 4,
    e: -5,
    f: 6,
    g: -7,
    h: 8,
    i: 9,
    j: 10,
    k: 11,
    l: 12,
};

/// `n` integers in -8..=8 as floats (from `seed`): sums and products of them are exact, so a
/// kernel's result does not depend on its order of additions or on fused multiply-adds.
#[cfg(not(target_arch = "nvptx64"))]
pub fn small_integers(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + seed * 104_729) % 17) as f32 - 8.0)
        .collect()
}

impl Scalars {
    /// Each scalar times its position (1 to 12), summed: a swapped or misread scalar
    /// changes it (small integers: exact in f32).
    pub fn weighted(&self) -> f32 {
        let s = *self;
        s.a + 2.0 * s.b as f32
            + 3.0 * s.c as f32
            + 4.0 * s.d as f32
            + 5.0 * s.e as f32
            + 6.0 * s.f as f32
            + 7.0 * s.g as f32
            + 8.0 * s.h as f32
            + 9.0 * s.i as f32
            + 10.0 * s.j as f32
            + 11.0 * s.k as f32
            + 12.0 * s.l as f32
    }
}

/// `y[t] = x[t] + weighted(a..l)`: every scalar type, and two slices of one length.
#[kernel(same_len(x, y), min_len(x = 1))]
#[allow(clippy::too_many_arguments)]
pub fn kind_scalars(
    a: f32,
    b: f64,
    c: i8,
    d: i16,
    e: i32,
    f: i64,
    g: isize,
    h: u8,
    i: u16,
    j: u32,
    k: u64,
    l: usize,
    x: &[f32],
    y: &mut [f32],
) {
    let s = Scalars {
        a,
        b,
        c,
        d,
        e,
        f,
        g,
        h,
        i,
        j,
        k,
        l,
    };
    let t = global_index_x();
    if t < y.len() {
        y[t] = x[t] + s.weighted();
    }
}

/// `b[0] = a[0]`, `d[0] = c[0]`: device and managed views, read-only and mutable.
#[kernel(min_len(a = 1, b = 1, c = 1, d = 1))]
pub fn kind_views(
    a: DeviceSlice<u32>,
    b: DeviceSliceMut<u32>,
    c: ManagedSlice<f64>,
    d: ManagedSliceMut<f64>,
) {
    let (mut b, mut d) = (b, d);
    b[0] = a[0];
    d[0] = c[0];
}

#[device_fn]
// A range loop's rewrite in a #[device_fn] casts the bound to `usize` (a #[kernel]'s body
// allows that lint).
#[allow(clippy::unnecessary_cast)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = 0.0;
    #[prefetch_next(distance = 4, level = l2_evict_last, portable)]
    for i in 0..x.len() {
        acc += x[i] * y[i];
    }
    acc
}

/// Every `#[prefetch_next]` loop form (range, inclusive grid-stride range with `of(..)`,
/// `iter_mut`, `chunks`, labelled `chunks_exact_mut`), a `#[device_fn]` with its own loop,
/// and a shared array. One thread (the loops are not split between threads); `y` at least
/// as long as `x`.
#[kernel(min_len(out = 1, x = 1))]
pub fn kind_prefetch_forms(x: &[f32], y: &mut [f32], out: &mut [f32]) {
    #[prefetch_next(distance = 2, level = l1)]
    for i in 0..x.len() {
        y[i] = x[i];
    }
    #[prefetch_next(level = l2, of(x))]
    for i in (global_index_x()..=x.len() - 1).step_by(grid_stride_x()) {
        out[0] += x[i];
    }
    #[prefetch_next(distance = 8)]
    for v in y.iter_mut() {
        *v += 1.0;
    }
    #[prefetch_next(level = bulk, portable)]
    for c in x.chunks(256) {
        out[0] += c[0];
    }
    #[prefetch_next(level = l2_evict_normal, portable)]
    'outer: for c in y.chunks_exact_mut(16) {
        c[0] = 0.0;
        continue 'outer;
    }
    let tile = shared_array!(f32; 64);
    tile.set(0, dot(x, y));
    out[0] += tile.get(0);
}

/// [`kind_prefetch_forms`] on the CPU: `y` and `out` after one thread ran it on `x` (`y` as
/// long as `x`, `out[0]` starting at `out0`).
#[cfg(not(target_arch = "nvptx64"))]
pub fn prefetch_forms_reference(x: &[f32], out0: f32) -> (Vec<f32>, f32) {
    let mut y: Vec<f32> = x.iter().map(|v| v + 1.0).collect();
    let mut out = out0;
    for v in x {
        out += v;
    }
    for c in x.chunks(256) {
        out += c[0];
    }
    for c in y.chunks_exact_mut(16) {
        c[0] = 0.0;
    }
    let mut dot = 0.0;
    for (a, b) in x.iter().zip(&y) {
        dot += a * b;
    }
    (y, out + dot)
}

/// A `KernelParams` bundle of a view of the user's structs, a mutable managed view and
/// values.
#[derive(KernelParams)]
#[repr(C)]
pub struct Io {
    /// Read.
    pub input: DeviceSlice<Node>,
    /// Written.
    pub output: ManagedSliceMut<f32>,
    /// Factor.
    pub scale: f32,
    /// Keeps the struct free of padding.
    pub _pad: u32,
}

/// `io.output[i] = (nodes[i].value + first.value + io.input[i].value) * io.scale`: a slice of
/// a `DeviceCopy` struct, one by value, and a `KernelParams` bundle.
#[kernel]
pub fn kind_user_types(nodes: &[Node], first: Node, mut io: Io) {
    let i = global_index_x();
    if i < io.output.len() && i < nodes.len() && i < io.input.len() {
        io.output[i] = (nodes[i].value + first.value + io.input[i].value) * io.scale;
    }
}

/// Parameter names the launcher uses for itself (`cfg`, `on`, `args`, `params`,
/// `prepared`, `entry`): nothing clashes. `params[0] = args[0] + (cfg + on + prepared +
/// entry)`.
#[kernel(min_len(args = 1, params = 1))]
pub fn kind_names(cfg: u32, on: u32, args: &[f32], params: &mut [f32], prepared: u32, entry: u32) {
    params[0] = args[0] + (cfg + on + prepared + entry) as f32;
}

/// `level = auto` in two loops (each with its own candidates) and a fixed loop: `out[0] +=`
/// the thread's grid-stride share of `x` (the other two loops add and take away all of
/// `x`, which cancels exactly on integer inputs).
#[kernel(min_len(out = 1))]
pub fn kind_auto_sum(x: &[f32], out: &mut [f32]) {
    let mut acc = 0.0;
    #[prefetch_next(level = auto, distance = 4)]
    for i in (global_index_x()..x.len()).step_by(grid_stride_x()) {
        acc += x[i];
    }
    #[prefetch_next(level = auto(l2, bulk), distance = auto(1, 3))]
    for v in x.iter() {
        acc += *v;
    }
    #[prefetch_next(level = l1)]
    for i in 0..x.len() {
        acc -= x[i];
    }
    atomic_add(&mut out[0], acc);
}

/// A request queue over managed lists named by an expression of the loop variable, next to
/// a device slice: `sums[l] = weights[l] * sum(lists[offsets[l]..offsets[l + 1]])`, then
/// `sums[0] += ` the first element of every 64-element chunk of `lists`. One thread.
#[kernel(same_len(sums, weights))]
pub fn kind_queued(
    lists: ManagedSlice<f32>,
    offsets: &[u32],
    weights: &[f32],
    sums: &mut [f32],
    q: RequestQueue,
) {
    #[prefetch_next(distance = 2, queue = q, of(lists.part(offsets[l] as usize..offsets[l + 1] as usize), weights))]
    for l in 0..sums.len() {
        let mut acc = 0.0;
        for v in &lists[offsets[l] as usize..offsets[l + 1] as usize] {
            acc += *v;
        }
        sums[l] = acc * weights[l];
    }
    #[prefetch_next(distance = 1, queue = q, level = auto)]
    for c in lists.chunks_exact(64) {
        sums[0] += c[0];
    }
}

/// [`kind_queued`] on the CPU.
#[cfg(not(target_arch = "nvptx64"))]
pub fn queued_reference(lists: &[f32], offsets: &[u32], weights: &[f32]) -> Vec<f32> {
    let mut sums: Vec<f32> = (0..weights.len())
        .map(|l| {
            let mut acc = 0.0;
            for v in &lists[offsets[l] as usize..offsets[l + 1] as usize] {
                acc += *v;
            }
            acc * weights[l]
        })
        .collect();
    for c in lists.chunks_exact(64) {
        sums[0] += c[0];
    }
    sums
}

/// `out[i] = src[idx[i]]`, prefetching the element iteration `i + 8` gathers.
#[kernel(same_len(idx, out))]
pub fn kind_gather(src: &[f32], idx: &[u32], out: &mut [f32]) {
    #[prefetch_next(distance = 8, of(src.at(idx[i] as usize)))]
    for i in 0..out.len() {
        out[i] = src[idx[i] as usize];
    }
}
