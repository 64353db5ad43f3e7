// Why did the IVF pull's in-kernel copy run at ~46 GB/s when pull_paths' C++ copy kernel
// reaches ~51 on the same lists? (Answer, found with ncu: pull_scan's warps ran the copy
// loop split in two; docs/unified-memory.md.) This puts the Rust copy loop (`pull_copy` in
// uvm/kernels, built on lookahead_device::pull::copy_chunk) beside the C++ one on the same
// host-resident managed lists, in one process, and changes one thing at a time:
//   cpp            pull_paths' sm_copy: a warp per 64 KiB piece, 16-byte loads, 8 in flight
//   cpp+count      the same, then a GPU-scope fence and an atomic count per piece (as the pull)
//   rust           pull_copy, loaded from the PTX the builder made
//   order          pieces in random list order instead of address order
//   pool dst       the destination from cudaMallocAsync's pool (as the Rust host allocates)
//   round trip     every page moved to the GPU and back to the host before each run
// and grids of 264 x 256 (the IVF pull_scan's) and 66 x 256 (its 528 copy warps).
// Each row: median of 5 runs, each after moving every page back to the host; every copied
// byte is checked. Baseline: pinned cudaMemcpy H2D in the same run.
//
// Build the PTX with `cargo build -p lookahead-uvm --release`, then
//   nvcc -O3 -arch=sm_90 -std=c++17 -o pull_gap experiments/uvm/pull_gap.cu -lcuda
//   ./pull_gap target/lookahead-ptx/sm_90/nvptx64-nvidia-cuda/release/lookahead_uvm_kernels.ptx
#include "check.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>


// Pieces as the Rust kernel takes them: pairs (first word, words).
template <bool COUNT>
__global__ void sm_copy(const unsigned* src, unsigned* dst, const unsigned long long* pieces, unsigned n,
                        unsigned* next, unsigned* counters) {
    const int lane = threadIdx.x % 32;
    while (true) {
        const unsigned i = warp_claim(next);
        if (i >= n) return;
        const int4* s = (const int4*)(src + pieces[2 * i]);
        int4* d = (int4*)(dst + pieces[2 * i]);
        warp_copy(s, d, pieces[2 * i + 1] / 4);
        if (COUNT) {
            __threadfence();
            __syncwarp();
            if (lane == 0) atomicAdd(counters + i, 1u);
        }
    }
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s lookahead_uvm_kernels.ptx\n", argv[0]);
        return 2;
    }
    const size_t list_bytes = 2u << 20, nlist = 2048, total = list_bytes * nlist;
    print_device();
    CK(cudaFree(0));
    CUmodule module;
    CU(cuModuleLoad(&module, argv[1]));
    CUfunction rust_copy;
    CU(cuModuleGetFunction(&rust_copy, module, "pull_copy"));
    int regs = 0;
    CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, rust_copy));
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, sm_copy<false>));
    printf("registers: rust pull_copy %d, cpp sm_copy %d\n", regs, fa.numRegs);

    const cudaMemLocation dev = gpu_location(), host = host_location();
    unsigned* managed = managed_pattern(total);
    CK(cudaMemAdvise(managed, total, cudaMemAdviseSetAccessedBy, dev));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    unsigned *plain, *pooled;
    CK(cudaMalloc(&plain, total));
    CK(cudaMallocAsync(&pooled, total, st));
    unsigned *next, *counters;
    CK(cudaMalloc(&next, 4));
    CK(cudaMalloc(&counters, 4 * total / (64 << 10)));

    const double pinned_rate = pinned_h2d_gbps(plain, st);

    for (double frac : {0.12, 0.5}) {
        std::mt19937 rng(42);
        std::vector<int> ids(nlist);
        for (size_t i = 0; i < nlist; i++) ids[i] = (int)i;
        std::shuffle(ids.begin(), ids.end(), rng);
        size_t m = (size_t)(frac * nlist);
        std::vector<int> pick(ids.begin(), ids.begin() + m), sorted = pick;
        std::sort(sorted.begin(), sorted.end());
        auto pieces_of = [&](const std::vector<int>& lists) {
            std::vector<unsigned long long> p;
            for (int l : lists)
                for (size_t c = 0; c < list_bytes; c += 64 << 10) {
                    p.push_back(((size_t)l * list_bytes + c) / 4);
                    p.push_back((64 << 10) / 4);
                }
            unsigned long long* d;
            CK(cudaMalloc(&d, p.size() * 8));
            CK(cudaMemcpy(d, p.data(), p.size() * 8, cudaMemcpyHostToDevice));
            return d;
        };
        unsigned long long* in_order = pieces_of(sorted);
        unsigned long long* shuffled = pieces_of(pick);
        unsigned n = (unsigned)(m * list_bytes / (64 << 10));
        double bytes = (double)m * list_bytes;
        printf("\n== %zu of %zu lists (%.0f%%), %.0f MB, %u pieces of 64 KiB\n", m, nlist, 100.0 * m / nlist,
               bytes / 1e6, n);
        printf("%-36s %9s %9s %9s %9s\n", "copy", "GB/s", "min", "max", "of pinned");

        auto measure = [&](const char* name, unsigned* dst, std::function<void()> launch, bool round_trip = false) {
            std::vector<double> rates;
            for (int r = 0; r < 5; r++) {
                if (round_trip) CK(cudaMemPrefetchAsync(managed, total, dev, 0, st));
                CK(cudaMemPrefetchAsync(managed, total, host, 0, st));
                CK(cudaMemsetAsync(dst, 0, total, st));
                CK(cudaMemsetAsync(next, 0, 4, st));
                CK(cudaMemsetAsync(counters, 0, 4 * total / (64 << 10), st));
                CK(cudaStreamSynchronize(st));
                rates.push_back(bytes / time_s(st, launch) / 1e9);
            }
            const size_t bad = count_wrong(dst, pick, list_bytes);
            std::sort(rates.begin(), rates.end());
            printf("%-36s %9.1f %9.1f %9.1f %8.0f%%%s\n", name, rates[2], rates[0], rates[4],
                   100 * rates[2] / pinned_rate, bad ? "  CHECK FAILED" : "");
        };
        auto cpp = [&](bool count, int blocks, unsigned* dst, unsigned long long* pieces) {
            return [=, &st] {
                if (count)
                    sm_copy<true><<<blocks, 256, 0, st>>>(managed, dst, pieces, n, next, counters);
                else
                    sm_copy<false><<<blocks, 256, 0, st>>>(managed, dst, pieces, n, next, counters);
            };
        };
        auto rust = [&](int blocks, unsigned* dst, unsigned long long* pieces) {
            return [=, &st] {
                const unsigned* s = managed;
                unsigned* d = dst;
                const unsigned long long* p = pieces;
                unsigned nn = n;
                unsigned* nx = next;
                unsigned* c = counters;
                void* args[] = {&s, &d, &p, &nn, &nx, &c};
                CU(cuLaunchKernel(rust_copy, blocks, 1, 1, 256, 1, 1, 0, st, args, nullptr));
            };
        };
        measure("cpp, 264x256", plain, cpp(false, 264, plain, in_order));
        measure("cpp+count, 264x256", plain, cpp(true, 264, plain, in_order));
        measure("rust, 264x256", plain, rust(264, plain, in_order));
        measure("cpp, 66x256", plain, cpp(false, 66, plain, in_order));
        measure("cpp+count, 66x256", plain, cpp(true, 66, plain, in_order));
        measure("rust, 66x256", plain, rust(66, plain, in_order));
        measure("cpp+count, 264x256, order", plain, cpp(true, 264, plain, shuffled));
        measure("rust, 264x256, order", plain, rust(264, plain, shuffled));
        measure("cpp+count, 264x256, pool dst", pooled, cpp(true, 264, pooled, in_order));
        measure("rust, 264x256, pool dst", pooled, rust(264, pooled, in_order));
        measure("cpp+count, 264x256, round trip", plain, cpp(true, 264, plain, in_order), true);
        measure("rust, 264x256, round trip", plain, rust(264, plain, in_order), true);
        CK(cudaFree(in_order));
        CK(cudaFree(shuffled));
    }
    return 0;
}
