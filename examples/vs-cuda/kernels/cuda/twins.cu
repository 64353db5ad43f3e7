// CUDA C++ twins of vs-cuda-kernels/src/kernels.rs, compiled at run time by NVRTC in
// examples/vs-cuda. Line for line the same algorithms: same 64-bit index
// arithmetic (Rust's usize is `usize` = decltype(sizeof(0)) here), same loop structure, same bounds on the
// prefetches, same inline PTX for the hints, and no __restrict__ (the Rust kernels take
// raw pointers, which tell the compiler no more than plain C++ pointers do).
// No headers: NVRTC compiles this without the CUDA toolkit's include directory.

#define HINT_NONE 0
#define HINT_L2 1
#define HINT_EVICT_LAST 2
#define HINT_BULK 3
#define DIM 128

typedef unsigned long long u64;
typedef unsigned int u32;
typedef decltype(sizeof(0)) usize;

template <int H>
__device__ __forceinline__ void line(const void* p) {
    if (H == HINT_L2) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
    } else if (H == HINT_EVICT_LAST) {
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p));
    }
}

__device__ __forceinline__ void bulk(const void* p, usize bytes) {
    usize start = (usize)p & ~(usize)15;
    usize end = ((usize)p + bytes + 15) & ~(usize)15;
    if (end <= start) return;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(start), "r"((u32)(end - start)));
}

__device__ __forceinline__ usize global_index_x() {
    return (usize)blockIdx.x * (usize)blockDim.x + (usize)threadIdx.x;
}
__device__ __forceinline__ usize grid_stride_x() { return (usize)gridDim.x * (usize)blockDim.x; }
__device__ __forceinline__ u32 lane_id() { return threadIdx.x % 32; }

__device__ __forceinline__ float warp_sum(float v) {
    for (u32 delta = 16; delta > 0; delta /= 2) v += __shfl_down_sync(0xffffffffu, v, delta);
    return v;
}

// ---------------------------------------------------------------------------------------
template <int H, int D>
__device__ __forceinline__ void saxpy(float a, const float* x, const float* y, float* out, usize n) {
    usize stride = grid_stride_x();
    usize i = global_index_x();
    while (i < n) {
        if (H == HINT_BULK) {
            if (threadIdx.x == 0) {
                usize j = i + D * stride;
                if (j < n) {
                    usize len = n - j < (usize)blockDim.x ? n - j : (usize)blockDim.x;
                    bulk(x + j, len * 4);
                    bulk(y + j, len * 4);
                }
            }
        } else if (H != HINT_NONE) {
            usize j = i + D * stride;
            if (j < n) {
                line<H>(x + j);
                line<H>(y + j);
            }
        }
        out[i] = a * x[i] + y[i];
        i += stride;
    }
}

template <int H, int D>
__device__ __forceinline__ void reduce(const float* x, usize n, float* out) {
    usize stride = grid_stride_x();
    usize i = global_index_x();
    float acc = 0.0f;
    while (i < n) {
        if (H == HINT_BULK) {
            if (threadIdx.x == 0) {
                usize j = i + D * stride;
                if (j < n) {
                    usize len = n - j < (usize)blockDim.x ? n - j : (usize)blockDim.x;
                    bulk(x + j, len * 4);
                }
            }
        } else if (H != HINT_NONE) {
            usize j = i + D * stride;
            if (j < n) line<H>(x + j);
        }
        acc += x[i];
        i += stride;
    }
    float total = warp_sum(acc);
    if (lane_id() == 0) atomicAdd(out, total);
}

template <int H, int D>
__device__ __forceinline__ void gather(const float* src, const u32* idx, float* out, usize n) {
    usize stride = grid_stride_x();
    usize i = global_index_x();
    while (i < n) {
        if (H != HINT_NONE) {
            usize j = i + D * stride;
            if (j < n) line<H>(src + (usize)idx[j]);
        }
        out[i] = src[(usize)idx[i]];
        i += stride;
    }
}

template <int H, int D>
__device__ __forceinline__ void spmv(usize rows, const u32* row_ptr, const u32* col, const float* val,
                                     const float* x, float* y) {
    usize lane = lane_id();
    usize warps = grid_stride_x() / 32;
    usize r = global_index_x() / 32;
    while (r < rows) {
        if (H != HINT_NONE) {
            usize r2 = r + D * warps;
            if (r2 < rows) {
                usize s2 = row_ptr[r2];
                usize e2 = row_ptr[r2 + 1];
                if (H == HINT_BULK) {
                    if (lane == 0 && e2 > s2) {
                        bulk(val + s2, (e2 - s2) * 4);
                        bulk(col + s2, (e2 - s2) * 4);
                    }
                } else {
                    for (usize k = s2 + lane; k < e2; k += 32) {
                        line<H>(val + k);
                        line<H>(col + k);
                    }
                }
            }
        }
        usize s = row_ptr[r];
        usize e = row_ptr[r + 1];
        float acc = 0.0f;
        for (usize k = s + lane; k < e; k += 32) acc += val[k] * x[(usize)col[k]];
        float total = warp_sum(acc);
        if (lane == 0) y[r] = total;
        r += warps;
    }
}

template <int H, int D>
__device__ __forceinline__ void ivf_scan(usize lists, const u32* list_off, const float* vecs, const float* query,
                                         float* dist, u32* list_min) {
    usize lane = lane_id();
    usize warp = threadIdx.x / 32;
    usize warps = blockDim.x / 32;
    float4 q = *reinterpret_cast<const float4*>(query + lane * 4);
    for (usize l = blockIdx.x; l < lists; l += gridDim.x) {
        usize s = list_off[l];
        usize e = list_off[l + 1];
        float best = __int_as_float(0x7f800000);
        for (usize v = s + warp; v < e; v += warps) {
            if (H != HINT_NONE) {
                usize v2 = v + D * warps;
                if (v2 < e) {
                    if (H == HINT_BULK) {
                        if (lane == 0) bulk(vecs + v2 * DIM, DIM * 4);
                    } else {
                        line<H>(vecs + v2 * DIM + lane * 4);
                    }
                }
            }
            float4 p = *reinterpret_cast<const float4*>(vecs + v * DIM + lane * 4);
            float d0 = p.x - q.x, d1 = p.y - q.y, d2 = p.z - q.z, d3 = p.w - q.w;
            float part = d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3;
            float total = warp_sum(part);
            if (lane == 0) {
                dist[v] = total;
                if (total < best) best = total;
            }
        }
        if (lane == 0 && s + warp < e) atomicMin(list_min + l, __float_as_uint(best));
    }
}

struct __align__(8) Node {
    u32 next;
    float val;
};

template <int H, int D>
__device__ __forceinline__ void chase(const Node* nodes, const u32* starts, usize chains, u32 steps, float* out) {
    usize t = global_index_x();
    if (t >= chains) return;
    usize cur = starts[t];
    float acc = 0.0f;
    for (u32 s = 0; s < steps; s++) {
        Node node = nodes[cur];
        acc += node.val;
        cur = node.next;
        if (H != HINT_NONE && s + 1 < steps) line<H>(nodes + cur);
    }
    out[t] = acc;
}

// ---------------------------------------------------------------------------------------
#define SAXPY(name, h, d) \
    extern "C" __global__ void name(float a, const float* x, const float* y, float* out, usize n) { saxpy<h, d>(a, x, y, out, n); }
SAXPY(saxpy_none, HINT_NONE, 0)
SAXPY(saxpy_l2_d1, HINT_L2, 1)
SAXPY(saxpy_l2_d4, HINT_L2, 4)
SAXPY(saxpy_l2_d16, HINT_L2, 16)
SAXPY(saxpy_el_d4, HINT_EVICT_LAST, 4)
SAXPY(saxpy_bulk_d4, HINT_BULK, 4)

#define REDUCE(name, h, d) \
    extern "C" __global__ void name(const float* x, usize n, float* out) { reduce<h, d>(x, n, out); }
REDUCE(reduce_none, HINT_NONE, 0)
REDUCE(reduce_l2_d1, HINT_L2, 1)
REDUCE(reduce_l2_d4, HINT_L2, 4)
REDUCE(reduce_l2_d16, HINT_L2, 16)
REDUCE(reduce_el_d4, HINT_EVICT_LAST, 4)
REDUCE(reduce_bulk_d4, HINT_BULK, 4)

#define GATHER(name, h, d) \
    extern "C" __global__ void name(const float* src, const u32* idx, float* out, usize n) { gather<h, d>(src, idx, out, n); }
GATHER(gather_none, HINT_NONE, 0)
GATHER(gather_l2_d1, HINT_L2, 1)
GATHER(gather_l2_d4, HINT_L2, 4)
GATHER(gather_l2_d16, HINT_L2, 16)
GATHER(gather_el_d4, HINT_EVICT_LAST, 4)

#define SPMV(name, h, d)                                                                             \
    extern "C" __global__ void name(usize rows, const u32* row_ptr, const u32* col, const float* val, \
                                    const float* x, float* y) {                                      \
        spmv<h, d>(rows, row_ptr, col, val, x, y);                                                   \
    }
SPMV(spmv_none, HINT_NONE, 0)
SPMV(spmv_l2_d1, HINT_L2, 1)
SPMV(spmv_l2_d4, HINT_L2, 4)
SPMV(spmv_l2_d16, HINT_L2, 16)
SPMV(spmv_el_d4, HINT_EVICT_LAST, 4)
SPMV(spmv_bulk_d4, HINT_BULK, 4)

#define IVF(name, h, d)                                                                                   \
    extern "C" __global__ void name(usize lists, const u32* list_off, const float* vecs, const float* query, \
                                    float* dist, u32* list_min) {                                          \
        ivf_scan<h, d>(lists, list_off, vecs, query, dist, list_min);                                      \
    }
IVF(ivf_none, HINT_NONE, 0)
IVF(ivf_l2_d1, HINT_L2, 1)
IVF(ivf_l2_d4, HINT_L2, 4)
IVF(ivf_l2_d16, HINT_L2, 16)
IVF(ivf_el_d4, HINT_EVICT_LAST, 4)
IVF(ivf_bulk_d4, HINT_BULK, 4)

#define CHASE(name, h, d)                                                                              \
    extern "C" __global__ void name(const Node* nodes, const u32* starts, usize chains, u32 steps, float* out) { \
        chase<h, d>(nodes, starts, chains, steps, out);                                                \
    }
CHASE(chase_none, HINT_NONE, 1)
CHASE(chase_l2_d1, HINT_L2, 1)
CHASE(chase_el_d1, HINT_EVICT_LAST, 1)

// =======================================================================================
// Twins of the variants generated by #[prefetch_next] (vs-cuda-kernels/src/dsl.rs, `*_m_*`).
// The Rust kernels take slices: each is a pointer and a length in PTX, and every index is
// bounds-checked (a failed check traps). The twins take the same parameters and check the
// same indices (`at`), loop the same way, and prefetch exactly what the macro's expansion
// prefetches, through the same arithmetic as lookahead_device::prefetch:
//
//   for i in (start..end).step_by(step) {                       // #[prefetch_next(distance = D, ...)]
//       if let Some(ahead) = i.checked_add(D * step) {
//           if ahead < end { prefetch_index(&x, ahead, level) / prefetch_all(&(target at ahead), level) }
//       }
//       body
//   }

#define BULK_PIECE ((usize)1 << 30)

template <class T>
__device__ __forceinline__ const T& at(const T* p, usize len, usize i) {
    if (i >= len) __trap();
    return p[i];
}
template <class T>
__device__ __forceinline__ T& at_mut(T* p, usize len, usize i) {
    if (i >= len) __trap();
    return p[i];
}

// prefetch_l2 / prefetch_l2_evict_last of one address.
template <int L>
__device__ __forceinline__ void pf_one(usize a) {
    if (L == HINT_L2) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
    } else if (L == HINT_EVICT_LAST) {
        asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(a));
    }
}

// bulk_bytes: the 16-byte cover of the range, in pieces of at most 1 GiB.
__device__ __forceinline__ void pf_bulk_bytes(usize addr, usize bytes) {
    if (bytes == 0) return;
    usize start = addr & ~(usize)15;
    usize end = (addr + bytes + 15) & ~(usize)15;
    while (start < end) {
        usize n = end - start < BULK_PIECE ? end - start : BULK_PIECE;
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(start), "r"((u32)n));
        start += n;
    }
}

// lines: the first address itself, then the start of every following 128-byte line.
template <int L>
__device__ __forceinline__ void pf_lines(usize addr, usize bytes) {
    if (bytes == 0) return;
    pf_one<L>(addr);
    usize end = addr + bytes;
    for (usize line = (addr & ~(usize)127) + 128; line < end; line += 128) pf_one<L>(line);
}

// prefetch_range(src, first, count, level), src = (addr, len, size).
template <int L>
__device__ __forceinline__ void pf_range(usize addr, usize len, usize size, usize first, usize count) {
    if (first >= len || count == 0 || size == 0) return;
    if (count > len - first) count = len - first;
    usize a = addr + first * size;
    usize bytes = count * size;
    if (L == HINT_BULK) {
        pf_bulk_bytes(a, bytes);
    } else {
        pf_lines<L>(a, bytes);
    }
}

// prefetch_index(src, index, level).
template <int L>
__device__ __forceinline__ void pf_index(usize addr, usize len, usize size, usize index) {
    if (index >= len || size == 0) return;
    usize p = addr + index * size;
    if (L == HINT_BULK) {
        pf_bulk_bytes(p, size);
    } else {
        pf_one<L>(p);
    }
}

// src.part(a..b) then prefetch_all: elements [a, b) clamped to the source, all of them.
template <int L>
__device__ __forceinline__ void pf_part(usize addr, usize len, usize size, usize a, usize b) {
    usize start = a < len ? a : len;
    usize end = b < start ? start : (b > len ? len : b);
    usize n = end - start;
    pf_range<L>(addr + start * size, n, size, 0, n);
}

// ahead = i.checked_add(D * step), inside the loop's range.
__device__ __forceinline__ bool ahead_in(usize i, usize jump, usize end, usize* ahead) {
    *ahead = i + jump;
    return *ahead >= i && *ahead < end;
}

// xs[at..at + 4] as one 16-byte load.
__device__ __forceinline__ float4 load4(const float* xs, usize len, usize at) {
    if (at > at + 4 || at + 4 > len) __trap();
    return *reinterpret_cast<const float4*>(xs + at);
}

template <int H, int D>
__device__ __forceinline__ void saxpy_m(float a, const float* x, usize xl, const float* y, usize yl, float* out,
                                        usize ol) {
    usize end = ol, step = grid_stride_x();
    for (usize i = global_index_x(); i < end; i += step) {
        usize ahead;
        if (H != HINT_NONE && ahead_in(i, D * step, end, &ahead)) {
            pf_index<H>((usize)x, xl, 4, ahead);
            pf_index<H>((usize)y, yl, 4, ahead);
        }
        at_mut(out, ol, i) = a * at(x, xl, i) + at(y, yl, i);
    }
}

template <int H, int D>
__device__ __forceinline__ void reduce_m(const float* x, usize xl, float* out, usize ol) {
    usize end = xl, step = grid_stride_x();
    float acc = 0.0f;
    for (usize i = global_index_x(); i < end; i += step) {
        usize ahead;
        if (H != HINT_NONE && ahead_in(i, D * step, end, &ahead)) pf_index<H>((usize)x, xl, 4, ahead);
        acc += at(x, xl, i);
    }
    float total = warp_sum(acc);
    if (lane_id() == 0) atomicAdd(&at_mut(out, ol, 0), total);
}

template <int H, int D>
__device__ __forceinline__ void gather_m(const float* src, usize sl, const u32* idx, usize il, float* out, usize ol) {
    usize end = ol, step = grid_stride_x();
    for (usize i = global_index_x(); i < end; i += step) {
        usize ahead;
        if (H != HINT_NONE && ahead_in(i, D * step, end, &ahead)) {
            usize k = at(idx, il, ahead);
            pf_part<H>((usize)src, sl, 4, k, k + 1 == 0 ? k : k + 1);
        }
        at_mut(out, ol, i) = at(src, sl, (usize)at(idx, il, i));
    }
}

template <int H, int D>
__device__ __forceinline__ void spmv_m(const u32* rp, usize rpl, const u32* col, usize cl, const float* val, usize vl,
                                       const float* x, usize xl, float* y, usize yl) {
    usize lane = lane_id();
    usize warps = grid_stride_x() / 32;
    usize end = yl, step = warps;
    for (usize r = global_index_x() / 32; r < end; r += step) {
        usize ahead;
        if (H != HINT_NONE && ahead_in(r, D * step, end, &ahead)) {
            pf_part<H>((usize)val, vl, 4, at(rp, rpl, ahead), at(rp, rpl, ahead + 1));
            pf_part<H>((usize)col, cl, 4, at(rp, rpl, ahead), at(rp, rpl, ahead + 1));
        }
        usize s = at(rp, rpl, r);
        usize e = at(rp, rpl, r + 1);
        float acc = 0.0f;
        for (usize k = s + lane; k < e; k += 32) acc += at(val, vl, k) * at(x, xl, (usize)at(col, cl, k));
        float total = warp_sum(acc);
        if (lane == 0) at_mut(y, yl, r) = total;
    }
}

template <int H, int D>
__device__ __forceinline__ void ivf_m(const u32* lo, usize lol, const float* vecs, usize vl, const float* query,
                                      usize ql, float* dist, usize dl, u32* lm, usize lml) {
    usize lane = lane_id();
    usize warp = threadIdx.x / 32;
    usize warps = blockDim.x / 32;
    float4 q = load4(query, ql, lane * 4);
    for (usize l = blockIdx.x; l < lml; l += gridDim.x) {
        usize s = at(lo, lol, l);
        usize e = at(lo, lol, l + 1);
        float best = __int_as_float(0x7f800000);
        for (usize v = s + warp; v < e; v += warps) {
            usize ahead;
            if (H != HINT_NONE && ahead_in(v, D * warps, e, &ahead)) {
                pf_part<H>((usize)vecs, vl, 4, ahead * DIM + lane * 4, ahead * DIM + lane * 4 + 4);
            }
            float4 p = load4(vecs, vl, v * DIM + lane * 4);
            float d0 = p.x - q.x, d1 = p.y - q.y, d2 = p.z - q.z, d3 = p.w - q.w;
            float part = d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3;
            float total = warp_sum(part);
            if (lane == 0) {
                at_mut(dist, dl, v) = total;
                if (total < best) best = total;
            }
        }
        if (lane == 0 && s + warp < e) atomicMin(&at_mut(lm, lml, l), __float_as_uint(best));
    }
}

#define SAXPY_M(name, h, d)                                                                                 \
    extern "C" __global__ void name(float a, const float* x, usize xl, const float* y, usize yl, float* out, \
                                    usize ol) {                                                             \
        saxpy_m<h, d>(a, x, xl, y, yl, out, ol);                                                            \
    }
#define REDUCE_M(name, h, d) \
    extern "C" __global__ void name(const float* x, usize xl, float* out, usize ol) { reduce_m<h, d>(x, xl, out, ol); }
#define GATHER_M(name, h, d)                                                                                   \
    extern "C" __global__ void name(const float* src, usize sl, const u32* idx, usize il, float* out, usize ol) { \
        gather_m<h, d>(src, sl, idx, il, out, ol);                                                             \
    }
#define SPMV_M(name, h, d)                                                                                    \
    extern "C" __global__ void name(const u32* rp, usize rpl, const u32* col, usize cl, const float* val,      \
                                    usize vl, const float* x, usize xl, float* y, usize yl) {                 \
        spmv_m<h, d>(rp, rpl, col, cl, val, vl, x, xl, y, yl);                                               \
    }
#define IVF_M(name, h, d)                                                                                     \
    extern "C" __global__ void name(const u32* lo, usize lol, const float* vecs, usize vl, const float* query, \
                                    usize ql, float* dist, usize dl, u32* lm, usize lml) {                    \
        ivf_m<h, d>(lo, lol, vecs, vl, query, ql, dist, dl, lm, lml);                                        \
    }

// Every `m_*` variant; `m_auto` is two entries: the plain one is `m_none`'s code, the
// `__l2` one `m_l2_d4`'s (level = auto(l2), distance = 4).
#define ALL_M(M, k)                                  \
    M(k##_m_none, HINT_NONE, 0)                      \
    M(k##_m_l2_d1, HINT_L2, 1)                       \
    M(k##_m_l2_d4, HINT_L2, 4)                       \
    M(k##_m_l2_d16, HINT_L2, 16)                     \
    M(k##_m_el_d4, HINT_EVICT_LAST, 4)               \
    M(k##_m_bulk_d4, HINT_BULK, 4)                   \
    M(k##_m_auto, HINT_NONE, 0)                      \
    M(k##_m_auto__l2, HINT_L2, 4)

ALL_M(SAXPY_M, saxpy)
ALL_M(REDUCE_M, reduce)
ALL_M(GATHER_M, gather)
ALL_M(SPMV_M, spmv)
ALL_M(IVF_M, ivf)
