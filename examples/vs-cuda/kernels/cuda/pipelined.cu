// CUDA C++ twins of vs-cuda-kernels/src/pipelined.rs, appended to twins.cu (whose types
// and helpers they use) and compiled with it by NVRTC. The same pipeline, written the way
// CUDA code writes one by hand with raw PTX (the toolkit's cuda::pipeline header is not
// available to NVRTC here): stages in static shared memory, cp.async.cg 16-byte copies
// spread over the block with commit groups and cp.async.wait_group, or cp.async.bulk by
// the lanes of warp 0 completing on one mbarrier per stage; the same tiles, the same
// prologue / wait / refill / compute order, the same launch shape.

#define THREADS 256
#define REDUCE_TILE 2048
#define STENCIL_W 128
#define STENCIL_H 16
#define STENCIL_PAD 4
#define STENCIL_ROW (STENCIL_W + 2 * STENCIL_PAD)
#define STENCIL_STAGE ((STENCIL_H + 2) * STENCIL_ROW)
#define GEMM_TILE 128
#define GEMM_K 8
#define GATHER_DIM 128
#define GATHER_BAG 8
#define GATHER_BAGS 2

struct StencilShape { u32 w, h, seg_rows, pad; };
struct GemmDims { u32 m, n, k, pad; };

__device__ __forceinline__ u32 smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void cp_async16(void* d, const void* s) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem(d)), "l"(s) : "memory");
}
__device__ __forceinline__ void cp_async8(void* d, const void* s) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(smem(d)), "l"(s) : "memory");
}
__device__ __forceinline__ void cp_async4(void* d, const void* s) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem(d)), "l"(s) : "memory");
}
__device__ __forceinline__ void commit_group() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_group() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void wait_group_dyn(u32 pending) {
    switch (pending) {
        case 0: wait_group<0>(); break;
        case 1: wait_group<1>(); break;
        case 2: wait_group<2>(); break;
        default: wait_group<3>(); break;
    }
}

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ void mbar_init(u64* b, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* b, u32 bytes) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(smem(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(u64* b, u32 parity) {
    u32 done;
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"(smem(b)), "r"(parity) : "memory");
    return done != 0;
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void bulk_copy(void* d, const void* s, u32 bytes, u64* b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem(d)), "l"(s), "r"(bytes), "r"(smem(b)) : "memory");
}
#endif

// A block-wide pipeline of S stages of LEN elements of T (BULK: cp.async.bulk and an
// mbarrier per stage; else cp.async), as lookahead_device::pipeline::Pipeline.
template <typename T, int LEN, int S, bool BULK>
struct Pipe {
    T (*stages)[LEN];
    u64* bars;
    u32 issued, consumed;
    u32 bytes;  // bytes the block copies into the stage being filled

    __device__ __forceinline__ Pipe(T (*st)[LEN], u64* b) : stages(st), bars(b), issued(0), consumed(0), bytes(0) {
#if __CUDA_ARCH__ >= 900
        if (BULK && threadIdx.x == 0) {
            for (int s = 0; s < S; s++) mbar_init(&bars[s], 1);
            fence_proxy_async();
        }
#endif
        __syncthreads();
    }

    // Rows of row_len elements, row r from src + start(r), packed into the stage from `at`.
    template <typename F>
    __device__ __forceinline__ void rows(usize at, usize row_len, usize nrows, const T* src, F start) {
        T* dst = stages[issued % S] + at;
        usize row_bytes = row_len * sizeof(T);
        bytes += (u32)(nrows * row_bytes);
        if (BULK) {
#if __CUDA_ARCH__ >= 900
            if (threadIdx.x < 32) {
                for (usize r = threadIdx.x; r < nrows; r += 32)
                    bulk_copy((char*)dst + r * row_bytes, src + start(r), (u32)row_bytes, &bars[issued % S]);
            }
#endif
            return;
        }
        usize unit = ((usize)dst | row_bytes) % 16 == 0 ? 16 : ((usize)dst | row_bytes) % 8 == 0 ? 8 : 4;
        usize per_row = row_bytes / unit, total = nrows * per_row;
        for (usize i = threadIdx.x; i < total; i += THREADS) {
            usize r = i / per_row, k = i % per_row;
            const char* s = (const char*)(src + start(r)) + k * unit;
            char* d = (char*)dst + r * row_bytes + k * unit;
            if ((usize)s % unit == 0) {
                if (unit == 16) cp_async16(d, s);
                else if (unit == 8) cp_async8(d, s);
                else cp_async4(d, s);
            } else {
                for (usize b = 0; b < unit; b += 4) cp_async4(d + b, s + b);
            }
        }
    }

    __device__ __forceinline__ void begin_fill() {
#if __CUDA_ARCH__ >= 900
        if (BULK && threadIdx.x < 32) fence_proxy_async();
#endif
        bytes = 0;
    }

    __device__ __forceinline__ void end_fill() {
        if (BULK) {
#if __CUDA_ARCH__ >= 900
            if (threadIdx.x == 0) mbar_arrive_expect_tx(&bars[issued % S], bytes);
#endif
        } else {
            commit_group();
        }
        issued++;
    }

    // Waits for the oldest stage in flight; returns its elements.
    __device__ __forceinline__ const T* wait() {
        u32 c = consumed;
        if (BULK) {
#if __CUDA_ARCH__ >= 900
            while (!mbar_try_wait(&bars[c % S], (c / S) & 1)) {}
#endif
        } else {
            wait_group_dyn(issued - c - 1);
        }
        __syncthreads();
        consumed = c + 1;
        return stages[c % S];
    }
};

// The prologue and steady state of every kernel (run_pipeline in pipelined.rs).
template <typename P, typename Fill, typename Body>
__device__ __forceinline__ void run_pipeline(P& p, usize items, int stages, Fill fill, Body body) {
    for (usize i = 0; i + 1 < (usize)stages; i++) {
        if (i < items) { p.begin_fill(); fill(i); p.end_fill(); }
    }
    for (usize i = 0; i < items; i++) {
        auto d = p.wait();
        if (i + stages - 1 < items) { p.begin_fill(); fill(i + stages - 1); p.end_fill(); }
        body(i, d);
    }
}

__device__ __forceinline__ void dealt(usize count, usize& b, usize& grid, usize& mine) {
    b = blockIdx.x;
    grid = gridDim.x;
    mine = b < count ? (count - b - 1) / grid + 1 : 0;
}

// ---------------------------------------------------------------------------------------
template <int S, bool BULK>
__device__ __forceinline__ void pipe_reduce(const float* x, usize xl, float* out) {
    __shared__ __align__(16) float st[S][REDUCE_TILE];
    __shared__ __align__(8) u64 bars[S];
    Pipe<float, REDUCE_TILE, S, BULK> p(st, bars);
    usize tiles = (xl + REDUCE_TILE - 1) / REDUCE_TILE, b, grid, mine;
    dealt(tiles, b, grid, mine);
    auto lo = [&](usize i) { return (b + i * grid) * REDUCE_TILE; };
    auto len = [&](usize i) { usize l = lo(i); return (l + REDUCE_TILE < xl ? l + REDUCE_TILE : xl) - l; };
    usize t = threadIdx.x % THREADS;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    run_pipeline(p, mine, S, [&](usize i) { p.rows(0, len(i), 1, x + lo(i), [](usize) { return (usize)0; }); },
                 [&](usize i, const float* d) {
                     usize n = len(i);
#pragma unroll
                     for (usize j = 0; j < REDUCE_TILE / THREADS; j++) {
                         usize e = t + j * THREADS;
                         if (n == REDUCE_TILE || e < n) acc[j % 4] += d[e];
                     }
                 });
    float total = warp_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
    if (lane_id() == 0) atomicAdd(out, total);
}

// ---------------------------------------------------------------------------------------
template <int S, bool BULK>
__device__ __forceinline__ void pipe_stencil(const float* src, float* dst, StencilShape shape) {
    __shared__ __align__(16) float st[S][STENCIL_STAGE];
    __shared__ __align__(8) u64 bars[S];
    Pipe<float, STENCIL_STAGE, S, BULK> p(st, bars);
    usize w = shape.w, h = shape.h, seg = shape.seg_rows;
    usize pitch = w + 2 * STENCIL_PAD, strips = w / STENCIL_W, b = blockIdx.x;
    usize x0 = b % strips * STENCIL_W, y_begin = b / strips * seg;
    usize y_end = y_begin + seg < h ? y_begin + seg : h;
    usize tiles = y_end > y_begin ? (y_end - y_begin + STENCIL_H - 1) / STENCIL_H : 0;
    usize t = threadIdx.x % THREADS, cx = t % STENCIL_W, half = t / STENCIL_W;
    run_pipeline(p, tiles, S,
                 [&](usize i) {
                     usize y0 = y_begin + i * STENCIL_H;
                     usize rows = STENCIL_H + 2 < h + 2 - y0 ? STENCIL_H + 2 : h + 2 - y0;
                     p.rows(0, STENCIL_ROW, rows, src, [&](usize r) { return (y0 + r) * pitch + x0; });
                 },
                 [&](usize i, const float* d) {
                     usize y0 = y_begin + i * STENCIL_H, x = cx + STENCIL_PAD, r0 = half * (STENCIL_H / 2);
                     // The staged rows end two after the last output row.
                     usize left = y_end > y0 + r0 ? y_end - (y0 + r0) : 0;
                     usize rows = left < STENCIL_H / 2 ? left : STENCIL_H / 2;
                     if (rows == 0) return;
                     float n = d[r0 * STENCIL_ROW + x], c = d[(r0 + 1) * STENCIL_ROW + x];
#pragma unroll
                     for (usize r = r0; r < r0 + rows; r++) {
                         float s = d[(r + 2) * STENCIL_ROW + x];
                         dst[(y0 + r) * w + x0 + cx] = 4.0f * c - n - s - d[(r + 1) * STENCIL_ROW + x - 1] - d[(r + 1) * STENCIL_ROW + x + 1];
                         n = c;
                         c = s;
                     }
                 });
}

// ---------------------------------------------------------------------------------------
template <int S, bool BULK>
__device__ __forceinline__ void pipe_gemm(const float4* at, const float4* bm4, float4* c, GemmDims d) {
    const usize Q = GEMM_TILE / 4;
    __shared__ __align__(16) float4 st[S][2 * GEMM_K * GEMM_TILE / 4];
    __shared__ __align__(8) u64 bars[S];
    Pipe<float4, 2 * GEMM_K * GEMM_TILE / 4, S, BULK> p(st, bars);
    usize m4 = d.m / 4, n4 = d.n / 4, blocks_n = d.n / GEMM_TILE, blk = blockIdx.x;
    usize bm = blk / blocks_n * Q, bn = blk % blocks_n * Q;
    usize t = threadIdx.x % THREADS, tx = t % 16, ty = t / 16;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
    run_pipeline(p, d.k / GEMM_K, S,
                 [&](usize kt) {
                     usize k0 = kt * GEMM_K;
                     p.rows(0, Q, GEMM_K, at, [&](usize r) { return (k0 + r) * m4 + bm; });
                     p.rows(GEMM_K * Q, Q, GEMM_K, bm4, [&](usize r) { return (k0 + r) * n4 + bn; });
                 },
                 [&](usize, const float4* s) {
#pragma unroll
                     for (usize k = 0; k < GEMM_K; k++) {
                         float4 a0 = s[k * Q + ty], a1 = s[k * Q + ty + 16];
                         float4 b0 = s[(GEMM_K + k) * Q + tx], b1 = s[(GEMM_K + k) * Q + tx + 16];
                         float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                         float bb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                         for (int i = 0; i < 8; i++)
#pragma unroll
                             for (int j = 0; j < 8; j++) acc[i][j] = __fmaf_rn(a[i], bb[j], acc[i][j]);
                     }
                 });
#pragma unroll
    for (int i = 0; i < 8; i++) {
        usize m = bm * 4 + (i / 4) * 64 + ty * 4 + i % 4;
        usize o = m * n4 + bn + tx;
        c[o] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        c[o + 16] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

// ---------------------------------------------------------------------------------------
template <int S, bool BULK>
__device__ __forceinline__ void pipe_gather(const float* src, const u32* idx, usize il, float* out) {
    __shared__ __align__(16) float st[S][GATHER_BAGS * GATHER_BAG * GATHER_DIM];
    __shared__ __align__(8) u64 bars[S];
    Pipe<float, GATHER_BAGS * GATHER_BAG * GATHER_DIM, S, BULK> p(st, bars);
    usize bags = il / GATHER_BAG, b, grid, mine;
    dealt((bags + GATHER_BAGS - 1) / GATHER_BAGS, b, grid, mine);
    auto first = [&](usize i) { return (b + i * grid) * GATHER_BAGS; };
    usize t = threadIdx.x % THREADS, bag = t / GATHER_DIM, col = t % GATHER_DIM;
    run_pipeline(p, mine, S,
                 [&](usize i) {
                     usize g0 = first(i);
                     usize rows = (bags - g0 < GATHER_BAGS ? bags - g0 : GATHER_BAGS) * GATHER_BAG;
                     p.rows(0, GATHER_DIM, rows, src, [&](usize r) { return (usize)idx[g0 * GATHER_BAG + r] * GATHER_DIM; });
                 },
                 [&](usize i, const float* d) {
                     usize g = first(i) + bag;
                     if (bag < GATHER_BAGS && g < bags) {
                         float sum = 0.0f;
#pragma unroll
                         for (usize r = 0; r < GATHER_BAG; r++) sum += d[(bag * GATHER_BAG + r) * GATHER_DIM + col];
                         out[g * GATHER_DIM + col] = sum;
                     }
                 });
}

// ---------------------------------------------------------------------------------------
// Entries: the Rust #[kernel]s' lowered parameters (each slice a pointer and a length).
#define PIPE_ENTRIES(kind, S, BULK)                                                                             \
    extern "C" __global__ void pipe_reduce_##kind##_s##S(const float* x, usize xl, float* out, usize ol) {      \
        pipe_reduce<S, BULK>(x, xl, out);                                                                       \
    }                                                                                                           \
    extern "C" __global__ void pipe_stencil_##kind##_s##S(const float* src, usize sl, float* dst, usize dl,     \
                                                          StencilShape shape) {                                 \
        pipe_stencil<S, BULK>(src, dst, shape);                                                                 \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(256, 2)                                                         \
        pipe_gemm_##kind##_s##S(const float4* at, usize al, const float4* b, usize bl, float4* c, usize cl,     \
                                GemmDims dims) {                                                                \
        pipe_gemm<S, BULK>(at, b, c, dims);                                                                     \
    }                                                                                                           \
    extern "C" __global__ void pipe_gather_##kind##_s##S(const float* src, usize sl, const u32* idx, usize il,  \
                                                         float* out, usize ol) {                                \
        pipe_gather<S, BULK>(src, idx, il, out);                                                                \
    }

PIPE_ENTRIES(cp_async, 2, false)
PIPE_ENTRIES(cp_async, 3, false)
PIPE_ENTRIES(cp_async, 4, false)
#if __CUDA_ARCH__ >= 900
PIPE_ENTRIES(bulk, 2, true)
PIPE_ENTRIES(bulk, 3, true)
PIPE_ENTRIES(bulk, 4, true)
#endif
