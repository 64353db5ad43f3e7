// Where do a kernel's copy warps run, and does it matter? The IVF pull_scan copies with
// 4 warps per SM's worth of its grid (528 of 2112 warps on an H100), given the copy role in
// the order they first run (an atomic counter), and it needs 128 registers (2 blocks of 256
// per SM). This was a suspect for its copy running at ~46 GB/s against ~51 for the same copy
// by every warp of a grid (pull_gap.cu); it was not the cause (a split warp was:
// docs/unified-memory.md), and this experiment shows placement costs at most a few percent.
//
// This runs one copy loop (pull_gap's sm_copy with the count) under different role
// assignments and occupancies, on the same host-resident managed lists:
//   all          every warp of the grid copies
//   first N      the first N warps to claim a counter copy, the others leave (pull_scan)
//   per block    warps 0..N/blocks-1 of every block copy, the others leave
//   + wait       the others instead poll a counter with backoff until the copy is done
//                (as pull_scan's scan warps wait for a list)
//   2/SM         dynamic shared memory limits the kernel to 2 resident blocks per SM, as
//                pull_scan's 128 registers do
// For each: median GB/s of 5 runs (pages moved back to the host before each), the SMs
// that held copy warps and the most copy warps on one SM. Every copied byte is checked.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o copy_roles experiments/uvm/copy_roles.cu -lcuda
//   ./copy_roles
#include "check.cuh"

#include <random>
#include <set>

constexpr unsigned PIECE_WORDS = (64 << 10) / 4;

// Copies pieces (64 KiB each, piece i at word pieces[i]) claimed from *next, a warp each,
// 16-byte streaming loads with 8 in flight per lane, then a fence and a count per piece.
__device__ void copy_pieces(const unsigned* src, unsigned* dst, const unsigned* pieces, unsigned n,
                            unsigned* next, unsigned* done) {
    const int lane = threadIdx.x % 32;
    while (true) {
        const unsigned i = warp_claim(next);
        if (i >= n) return;
        const int4* s = (const int4*)(src + (size_t)pieces[i]);
        int4* d = (int4*)(dst + (size_t)pieces[i]);
        warp_copy(s, d, PIECE_WORDS / 4);
        __threadfence();
        __syncwarp();
        if (lane == 0) atomicAdd(done, 1u);
    }
}

enum Roles { ALL = 0, FIRST = 1, PER_BLOCK = 2 };

// work: [0] role counter, [1] piece counter, [2] pieces copied.
template <int ROLES, bool WAIT>
__global__ void role_copy(const unsigned* src, unsigned* dst, const unsigned* pieces, unsigned n, unsigned* work,
                          unsigned copy_warps, unsigned* sm_of_role) {
    const int lane = threadIdx.x % 32;
    unsigned role;
    if (ROLES == ALL) {
        role = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
        copy_warps = gridDim.x * blockDim.x / 32;
    } else if (ROLES == FIRST) {
        role = warp_claim(work);
    } else {
        unsigned per_block = (copy_warps + gridDim.x - 1) / gridDim.x, w = threadIdx.x / 32;
        role = w < per_block ? blockIdx.x * per_block + w : copy_warps;
    }
    if (role < copy_warps) {
        if (lane == 0) {
            unsigned sm;
            asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
            sm_of_role[role] = sm;
        }
        copy_pieces(src, dst, pieces, n, work + 1, work + 2);
    } else if (WAIT && lane == 0) {
        unsigned sleep = 256;
        while (*(volatile unsigned*)(work + 2) < n) {
            __nanosleep(sleep);
            sleep = min(sleep * 2, 4096u);
        }
    }
}

int main() {
    const size_t list_bytes = 2u << 20, nlist = 2048, total = list_bytes * nlist;
    const cudaDeviceProp prop = print_device();
    const unsigned sms = prop.multiProcessorCount;
    const cudaMemLocation dev = gpu_location(), host = host_location();
    unsigned* managed = managed_pattern(total);
    CK(cudaMemAdvise(managed, total, cudaMemAdviseSetAccessedBy, dev));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    unsigned *dst, *work, *sm_of_role;
    CK(cudaMalloc(&dst, total));
    CK(cudaMalloc(&work, 16));
    const unsigned grid = 2 * sms, threads = 256, copy_warps = 4 * sms;
    CK(cudaMalloc(&sm_of_role, 4 * grid * threads / 32));
    const double pinned_rate = pinned_h2d_gbps(dst, st);

    // Shared memory per block that leaves room for only 2 blocks per SM.
    const int smem_2 = (int)(prop.sharedMemPerMultiprocessor / 2 - prop.reservedSharedMemPerBlock - 1024);
    auto occupancy = [&](const void* f, int smem) {
        int b = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, f, threads, smem));
        return b;
    };

    for (double frac : {0.12, 0.5}) {
        std::mt19937 rng(42);
        std::vector<int> ids(nlist);
        for (size_t i = 0; i < nlist; i++) ids[i] = (int)i;
        std::shuffle(ids.begin(), ids.end(), rng);
        const size_t m = (size_t)(frac * nlist);
        std::vector<int> pick(ids.begin(), ids.begin() + m);
        std::sort(pick.begin(), pick.end());
        std::vector<unsigned> p;
        for (int l : pick)
            for (size_t c = 0; c < list_bytes; c += 64 << 10) p.push_back((unsigned)(((size_t)l * list_bytes + c) / 4));
        unsigned* pieces;
        CK(cudaMalloc(&pieces, p.size() * 4));
        CK(cudaMemcpy(pieces, p.data(), p.size() * 4, cudaMemcpyHostToDevice));
        const unsigned n = (unsigned)p.size();
        const double bytes = (double)m * list_bytes;
        printf("\n== %zu of %zu lists (%.0f%%), %.0f MB, %u pieces of 64 KiB; grid %ux%u, %u copy warps\n", m, nlist,
               100.0 * m / nlist, bytes / 1e6, n, grid, threads, copy_warps);
        printf("%-28s %6s %7s %7s %7s %9s %7s %11s\n", "roles", "blk/SM", "GB/s", "min", "max", "of pinned",
               "copy SMs", "most on 1 SM");

        auto measure = [&](const char* name, const void* f, int smem, unsigned warps) {
            if (smem > 0) CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            std::vector<double> rates;
            std::set<unsigned> sm_set;
            unsigned most = 0;
            for (int r = 0; r < 5; r++) {
                CK(cudaMemPrefetchAsync(managed, total, host, 0, st));
                CK(cudaMemsetAsync(dst, 0, total, st));
                CK(cudaMemsetAsync(work, 0, 16, st));
                CK(cudaMemsetAsync(sm_of_role, 0xff, 4 * grid * threads / 32, st));
                CK(cudaStreamSynchronize(st));
                const unsigned* s = managed;
                unsigned* d = dst;
                const unsigned* pc = pieces;
                unsigned nn = n, cw = warps;
                unsigned *w = work, *so = sm_of_role;
                void* args[] = {&s, &d, &pc, &nn, &w, &cw, &so};
                const double t = time_s(st, [&] { CK(cudaLaunchKernel(f, grid, threads, args, smem, st)); });
                rates.push_back(bytes / t / 1e9);
                std::vector<unsigned> sm(grid * threads / 32);
                CK(cudaMemcpy(sm.data(), sm_of_role, sm.size() * 4, cudaMemcpyDeviceToHost));
                std::vector<unsigned> per(sms, 0);
                for (unsigned x : sm)
                    if (x < sms) {
                        sm_set.insert(x);
                        per[x]++;
                    }
                most = std::max(most, *std::max_element(per.begin(), per.end()));
            }
            const size_t bad = count_wrong(dst, pick, list_bytes);
            std::sort(rates.begin(), rates.end());
            printf("%-28s %6d %7.1f %7.1f %7.1f %8.0f%% %7zu %11u%s\n", name, occupancy(f, smem), rates[2], rates[0],
                   rates[4], 100 * rates[2] / pinned_rate, sm_set.size(), most, bad ? "  CHECK FAILED" : "");
        };
        const void* all = (const void*)role_copy<ALL, false>;
        const void* first = (const void*)role_copy<FIRST, false>;
        const void* first_wait = (const void*)role_copy<FIRST, true>;
        const void* per_block = (const void*)role_copy<PER_BLOCK, false>;
        const void* per_block_wait = (const void*)role_copy<PER_BLOCK, true>;
        measure("all", all, 0, 0);
        measure("all, 2/SM", all, smem_2, 0);
        measure("first N", first, 0, copy_warps);
        measure("first N, 2/SM", first, smem_2, copy_warps);
        measure("first N + wait, 2/SM", first_wait, smem_2, copy_warps);
        measure("per block", per_block, 0, copy_warps);
        measure("per block, 2/SM", per_block, smem_2, copy_warps);
        measure("per block + wait, 2/SM", per_block_wait, smem_2, copy_warps);
        measure("first 2N + wait, 2/SM", first_wait, smem_2, 2 * copy_warps);
        measure("per block 2N + wait, 2/SM", per_block_wait, smem_2, 2 * copy_warps);
        CK(cudaFree(pieces));
    }
    return 0;
}
