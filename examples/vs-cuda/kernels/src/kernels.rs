//! The suite's kernels (device side only). Each algorithm is one `#[inline(always)]`
//! function generic over the hint (`H`) and the prefetch distance in loop iterations
//! (`D`); every variant the benchmark runs is its own `#[no_mangle]` entry, monomorphised
//! from it, the way `#[prefetch_next(distance = D, level = ...)]` will expand a loop:
//! at the top of iteration `i` it prefetches what iteration `i + D` will load, and only
//! when iteration `i + D` exists (bounded by the loop's end).
//!
//! `cuda/twins.cu` holds the CUDA C++ twin of every function here, written line for line
//! the same way (same index types, same loop structure, same inline PTX for the hints).

use lookahead_device::atomic::atomic_add_f32;
use lookahead_device::index::{
    block_dim_x, block_idx_x, global_index_x, grid_dim_x, grid_stride_x, lane_id, thread_idx_x,
};
use lookahead_device::prefetch;
use lookahead_device::warp::warp_sum_f32;

use crate::{Node, DIM, HINT_BULK, HINT_EVICT_LAST, HINT_L2, HINT_NONE};

/// One prefetch of the line holding `p` at level `H` (nothing for [`HINT_NONE`]).
#[inline(always)]
fn line<const H: u8, T>(p: *const T) {
    if H == HINT_L2 {
        prefetch::prefetch_l2(p);
    } else if H == HINT_EVICT_LAST {
        #[cfg(target_feature = "sm_80")]
        prefetch::prefetch_l2_evict_last(p);
        #[cfg(not(target_feature = "sm_80"))]
        prefetch::prefetch_l2(p);
    }
}

/// Prefetches `bytes` bytes at `p` into L2: one `cp.async.bulk.prefetch.L2.global` of the
/// 16-byte-aligned cover of the range on sm_90, one `prefetch.global.L2` per 128-byte line
/// below. The cover can reach up to 15 bytes past the range: the host pads every buffer
/// a bulk variant reads.
#[inline(always)]
unsafe fn bulk<T>(p: *const T, bytes: usize) {
    let start = p as usize & !15;
    let end = (p as usize + bytes + 15) & !15;
    if end <= start {
        return;
    }
    #[cfg(target_feature = "sm_90")]
    prefetch::bulk_prefetch_l2(start as *const u8, (end - start) as u32);
    #[cfg(not(target_feature = "sm_90"))]
    {
        let mut l = start & !127;
        while l < end {
            prefetch::prefetch_l2(l as *const u8);
            l += 128;
        }
    }
}

/// A 16-byte vector of four floats, so a lane loads its part of a row with one
/// `ld.global.v4.f32` (CUDA's `float4`).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct F4 {
    v: [f32; 4],
}

/// `red.global.min.u32`: the float bits of non-negative distances order as integers.
#[inline(always)]
unsafe fn red_min_u32(p: *mut u32, v: u32) {
    core::arch::asm!(
        "red.global.min.u32 [{p}], {v};",
        p = in(reg64) p,
        v = in(reg32) v,
        options(nostack)
    );
}

// ---------------------------------------------------------------------------------------
// saxpy: out[i] = a * x[i] + y[i], grid-stride loop.

#[inline(always)]
unsafe fn saxpy<const H: u8, const D: usize>(
    a: f32,
    x: *const f32,
    y: *const f32,
    out: *mut f32,
    n: usize,
) {
    let stride = grid_stride_x();
    let mut i = global_index_x();
    while i < n {
        if H == HINT_BULK {
            // Thread 0 holds the first element of its block's tile: bulk-prefetch the
            // block's whole tile of iteration i + D.
            if thread_idx_x() == 0 {
                let j = i + D * stride;
                if j < n {
                    let len = core::cmp::min(block_dim_x() as usize, n - j);
                    bulk(x.add(j), len * 4);
                    bulk(y.add(j), len * 4);
                }
            }
        } else if H != HINT_NONE {
            let j = i + D * stride;
            if j < n {
                line::<H, _>(x.add(j));
                line::<H, _>(y.add(j));
            }
        }
        *out.add(i) = a * *x.add(i) + *y.add(i);
        i += stride;
    }
}

// ---------------------------------------------------------------------------------------
// block reduction: *out += sum(x); grid-stride partial sums, warp shuffles, one atomic
// per warp (no shared memory, in both languages).

#[inline(always)]
unsafe fn reduce<const H: u8, const D: usize>(x: *const f32, n: usize, out: *mut f32) {
    let stride = grid_stride_x();
    let mut i = global_index_x();
    let mut acc = 0.0f32;
    while i < n {
        if H == HINT_BULK {
            if thread_idx_x() == 0 {
                let j = i + D * stride;
                if j < n {
                    let len = core::cmp::min(block_dim_x() as usize, n - j);
                    bulk(x.add(j), len * 4);
                }
            }
        } else if H != HINT_NONE {
            let j = i + D * stride;
            if j < n {
                line::<H, _>(x.add(j));
            }
        }
        acc += *x.add(i);
        i += stride;
    }
    let total = warp_sum_f32(acc);
    if lane_id() == 0 {
        atomic_add_f32(out, total);
    }
}

// ---------------------------------------------------------------------------------------
// random gather: out[i] = src[idx[i]], grid-stride loop. Prefetching iteration i + D
// means loading idx[i + D * stride] and prefetching the source element it names.

#[inline(always)]
unsafe fn gather<const H: u8, const D: usize>(
    src: *const f32,
    idx: *const u32,
    out: *mut f32,
    n: usize,
) {
    let stride = grid_stride_x();
    let mut i = global_index_x();
    while i < n {
        if H != HINT_NONE {
            let j = i + D * stride;
            if j < n {
                line::<H, _>(src.add(*idx.add(j) as usize));
            }
        }
        *out.add(i) = *src.add(*idx.add(i) as usize);
        i += stride;
    }
}

// ---------------------------------------------------------------------------------------
// CSR SpMV, one warp per row: y[r] = sum_k val[k] * x[col[k]] over row r's entries.
// Warps take rows in a grid-stride loop; prefetching iteration i + D means the entries
// (values and column indices) of the row D * warps further on.

#[inline(always)]
unsafe fn spmv<const H: u8, const D: usize>(
    rows: usize,
    row_ptr: *const u32,
    col: *const u32,
    val: *const f32,
    x: *const f32,
    y: *mut f32,
) {
    let lane = lane_id() as usize;
    let warps = grid_stride_x() / 32;
    let mut r = global_index_x() / 32;
    while r < rows {
        if H != HINT_NONE {
            let r2 = r + D * warps;
            if r2 < rows {
                let s2 = *row_ptr.add(r2) as usize;
                let e2 = *row_ptr.add(r2 + 1) as usize;
                if H == HINT_BULK {
                    if lane == 0 && e2 > s2 {
                        bulk(val.add(s2), (e2 - s2) * 4);
                        bulk(col.add(s2), (e2 - s2) * 4);
                    }
                } else {
                    let mut k = s2 + lane;
                    while k < e2 {
                        line::<H, _>(val.add(k));
                        line::<H, _>(col.add(k));
                        k += 32;
                    }
                }
            }
        }
        let s = *row_ptr.add(r) as usize;
        let e = *row_ptr.add(r + 1) as usize;
        let mut acc = 0.0f32;
        let mut k = s + lane;
        while k < e {
            acc += *val.add(k) * *x.add(*col.add(k) as usize);
            k += 32;
        }
        let total = warp_sum_f32(acc);
        if lane == 0 {
            *y.add(r) = total;
        }
        r += warps;
    }
}

// ---------------------------------------------------------------------------------------
// IVF list scan on resident data: block b scans list b (grid-stride over lists). Each
// warp takes one DIM-float vector at a time (a lane loads 4 floats), computes its squared
// L2 distance to the query, writes it to dist[v], and keeps the warp's minimum, which goes
// to list_min[list] (as float bits, with red.global.min.u32). Prefetching iteration
// i + D means the vector D * warps-per-block further on in the same list.

#[inline(always)]
unsafe fn ivf_scan<const H: u8, const D: usize>(
    lists: usize,
    list_off: *const u32,
    vecs: *const f32,
    query: *const f32,
    dist: *mut f32,
    list_min: *mut u32,
) {
    let lane = lane_id() as usize;
    let warp = (thread_idx_x() / 32) as usize;
    let warps = (block_dim_x() / 32) as usize;
    let q = *(query.add(lane * 4) as *const F4);
    let mut l = block_idx_x() as usize;
    while l < lists {
        let s = *list_off.add(l) as usize;
        let e = *list_off.add(l + 1) as usize;
        let mut best = f32::INFINITY;
        let mut v = s + warp;
        while v < e {
            if H != HINT_NONE {
                let v2 = v + D * warps;
                if v2 < e {
                    if H == HINT_BULK {
                        if lane == 0 {
                            bulk(vecs.add(v2 * DIM), DIM * 4);
                        }
                    } else {
                        line::<H, _>(vecs.add(v2 * DIM + lane * 4));
                    }
                }
            }
            let p = *(vecs.add(v * DIM + lane * 4) as *const F4);
            let d0 = p.v[0] - q.v[0];
            let d1 = p.v[1] - q.v[1];
            let d2 = p.v[2] - q.v[2];
            let d3 = p.v[3] - q.v[3];
            let part = d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3;
            let total = warp_sum_f32(part);
            if lane == 0 {
                *dist.add(v) = total;
                if total < best {
                    best = total;
                }
            }
            v += warps;
        }
        if lane == 0 && s + warp < e {
            red_min_u32(list_min.add(l), best.to_bits());
        }
        l += grid_dim_x() as usize;
    }
}

// ---------------------------------------------------------------------------------------
// pointer chase: thread t follows its own chain of `steps` nodes from starts[t] and
// writes the sum of the nodes' values. Only distance 1 is expressible: the node of
// iteration i + 1 is known once iteration i has loaded its `next`.

#[inline(always)]
unsafe fn chase<const H: u8, const D: usize>(
    nodes: *const Node,
    starts: *const u32,
    chains: usize,
    steps: u32,
    out: *mut f32,
) {
    let t = global_index_x();
    if t >= chains {
        return;
    }
    let mut cur = *starts.add(t) as usize;
    let mut acc = 0.0f32;
    let mut s = 0;
    while s < steps {
        // One 64-bit load of the whole node, as nvcc emits for the CUDA twin's struct
        // copy (LDG.E.64): LLVM splits `*nodes.add(cur)` into two 32-bit loads of the
        // fields, two memory requests per hop, which measured 20% slower (docs/rust-vs-cuda.md).
        let raw = *(nodes.add(cur) as *const u64);
        acc += f32::from_bits((raw >> 32) as u32);
        cur = (raw as u32) as usize;
        if H != HINT_NONE && s + 1 < steps {
            line::<H, _>(nodes.add(cur));
        }
        s += 1;
    }
    *out.add(t) = acc;
}

// ---------------------------------------------------------------------------------------
// The entries: one per (kernel, hint, distance), named `<kernel>_<variant>` as in
// `crate::SUITE`.

macro_rules! entry {
    ($imp:ident ($($arg:ident: $ty:ty),*) $name:ident, $h:expr, $d:expr) => {
        /// A monomorphised variant of the kernel of the same prefix (see `crate::SUITE`).
        ///
        /// # Safety
        /// The pointers must be valid for the sizes the host passes, as `crate::SUITE`
        /// documents for the kernel.
        #[no_mangle]
        pub unsafe extern "gpu-kernel" fn $name($($arg: $ty),*) {
            $imp::<{ $h }, { $d }>($($arg),*)
        }
    };
}

macro_rules! entries {
    ($imp:ident $args:tt { $($name:ident => $h:expr, $d:expr;)* }) => {
        $(entry!($imp $args $name, $h, $d);)*
    };
}

entries!(saxpy(a: f32, x: *const f32, y: *const f32, out: *mut f32, n: usize) {
    saxpy_none => HINT_NONE, 0;
    saxpy_l2_d1 => HINT_L2, 1;
    saxpy_l2_d4 => HINT_L2, 4;
    saxpy_l2_d16 => HINT_L2, 16;
    saxpy_el_d4 => HINT_EVICT_LAST, 4;
    saxpy_bulk_d4 => HINT_BULK, 4;
});

entries!(reduce(x: *const f32, n: usize, out: *mut f32) {
    reduce_none => HINT_NONE, 0;
    reduce_l2_d1 => HINT_L2, 1;
    reduce_l2_d4 => HINT_L2, 4;
    reduce_l2_d16 => HINT_L2, 16;
    reduce_el_d4 => HINT_EVICT_LAST, 4;
    reduce_bulk_d4 => HINT_BULK, 4;
});

entries!(gather(src: *const f32, idx: *const u32, out: *mut f32, n: usize) {
    gather_none => HINT_NONE, 0;
    gather_l2_d1 => HINT_L2, 1;
    gather_l2_d4 => HINT_L2, 4;
    gather_l2_d16 => HINT_L2, 16;
    gather_el_d4 => HINT_EVICT_LAST, 4;
});

entries!(spmv(
    rows: usize, row_ptr: *const u32, col: *const u32, val: *const f32, x: *const f32, y: *mut f32
) {
    spmv_none => HINT_NONE, 0;
    spmv_l2_d1 => HINT_L2, 1;
    spmv_l2_d4 => HINT_L2, 4;
    spmv_l2_d16 => HINT_L2, 16;
    spmv_el_d4 => HINT_EVICT_LAST, 4;
    spmv_bulk_d4 => HINT_BULK, 4;
});

entries!(ivf_scan(
    lists: usize,
    list_off: *const u32,
    vecs: *const f32,
    query: *const f32,
    dist: *mut f32,
    list_min: *mut u32
) {
    ivf_none => HINT_NONE, 0;
    ivf_l2_d1 => HINT_L2, 1;
    ivf_l2_d4 => HINT_L2, 4;
    ivf_l2_d16 => HINT_L2, 16;
    ivf_el_d4 => HINT_EVICT_LAST, 4;
    ivf_bulk_d4 => HINT_BULK, 4;
});

entries!(chase(nodes: *const Node, starts: *const u32, chains: usize, steps: u32, out: *mut f32) {
    chase_none => HINT_NONE, 1;
    chase_l2_d1 => HINT_L2, 1;
    chase_el_d1 => HINT_EVICT_LAST, 1;
});
