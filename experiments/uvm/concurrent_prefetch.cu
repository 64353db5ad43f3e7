// Can a host thread migrate managed memory to the GPU while a kernel that waits for it runs?
//
// A kernel's blocks each wait (bounded) on a ready flag in device memory. While it runs,
// the host prefetches each block's chunk of host-resident managed memory
// (cudaMemPrefetchAsync) on a worker stream and writes the block's flag right after it
// (cuStreamWriteValue32), as lookahead-uvm's prefetch service does. Variants change what
// surrounds that: number of worker streams, idle streams created beforehand, whether the
// waiting kernel's stream is created first or last, flag writes without prefetches, and
// prefetches issued before the kernel starts. For each, it prints how many flags arrived
// before the time bound and the median wait.
//
//   nvcc -O2 -arch=sm_90 -o concurrent_prefetch concurrent_prefetch.cu -lcuda
//   ./concurrent_prefetch            (and again with CUDA_DEVICE_MAX_CONNECTIONS=1 and 32:
//                                     streams share that many hardware queues)
#include "check.cuh"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>


__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Block b waits for flags[b] == 1 (at most `bound_ns`), records how long, then sums its chunk.
// Blocks with b % fault_every == 0 (fault_every > 0) do not wait: they read their chunk at
// once, through page faults.
__global__ void waiter(const unsigned* flags, const float* data, size_t chunk_floats,
                       unsigned long long bound_ns, unsigned long long* waited, float* sums,
                       int fault_every) {
    __shared__ int go;
    if (fault_every > 0 && blockIdx.x % fault_every == 0) {
        if (threadIdx.x == 0) waited[blockIdx.x] = 0;
    } else if (threadIdx.x == 0) {
        unsigned long long t0 = now_ns();
        unsigned v = 0;
        while (true) {
            asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(flags + blockIdx.x));
            if (v == 1 || now_ns() - t0 > bound_ns) break;
            __nanosleep(500);
        }
        waited[blockIdx.x] = (v == 1) ? now_ns() - t0 : ~0ull;
        go = 1;
    }
    __syncthreads();
    const float* p = data + blockIdx.x * chunk_floats;
    float s = 0;
    for (size_t i = threadIdx.x; i < chunk_floats; i += blockDim.x * 64) s += p[i];
    atomicAdd(sums + blockIdx.x, s + go);
}

// Every warp waits (lane 0 polls, the other lanes wait at a shuffle) for flag
// `warp % nflags`, the way a persistent kernel whose warps take work items does. `relaxed`:
// poll with ld.relaxed.sys and fence once, instead of ld.acquire.sys each time.
__global__ void warp_waiter(const unsigned* flags, int nflags, unsigned long long bound_ns,
                            unsigned long long* waited, int relaxed) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    const unsigned* f = flags + warp % nflags;
    unsigned v = 0;
    unsigned long long t0 = now_ns(), t = 0;
    if (lane == 0) {
        while (true) {
            if (relaxed)
                asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(v) : "l"(f));
            else
                asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(f));
            t = now_ns() - t0;
            if (v == 1 || t > bound_ns) break;
            __nanosleep(500);
        }
        if (relaxed) asm volatile("fence.acq_rel.sys;");
    }
    v = __shfl_sync(0xffffffff, v, 0);
    if (lane == 0 && warp < nflags) waited[warp] = (v == 1) ? t : ~0ull;
}

struct Variant {
    const char* name;
    int workers;          // worker streams issuing prefetch + flag
    int idle_streams;     // extra streams created first (as a big process has)
    bool kernel_stream_last;
    bool prefetch;        // false: flag writes only
    bool before_launch;   // issue everything before launching the waiter
    bool kernel_reads;    // false: the waiter never touches managed memory
    int blocks;           // waiting blocks (one chunk each)
    int threads;          // threads per block
    int fault_every;      // > 0: every fault_every-th block reads through faults at once
    bool threaded = false;     // each worker stream is fed by its own host thread
    bool attr_check = false;   // cuPointerGetAttribute(IS_MANAGED) before each prefetch
    int follow = 0;            // after the waiter, on its stream: 1 an event record, 2 a kernel
};

__global__ void tiny(float* sums) {
    if (threadIdx.x == 0) sums[0] += 1.0f;
}

int main() {
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    const int max_blocks = 1056;
    const size_t chunk = 1u << 20;  // bytes per block
    const size_t floats = chunk / 4 * max_blocks;
    float* data;
    CK(cudaMallocManaged(&data, floats * 4));
    unsigned* flags;
    unsigned long long* waited;
    float* sums;
    CK(cudaMalloc(&flags, max_blocks * 4));
    CK(cudaMalloc(&waited, max_blocks * 8));
    CK(cudaMalloc(&sums, max_blocks * 4));
    const char* conn = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    printf("CUDA_DEVICE_MAX_CONNECTIONS=%s, %zu MiB per block\n", conn ? conn : "(unset: 8)",
           chunk >> 20);
    Variant vs[] = {
        {"1 worker, flags only", 1, 0, false, false, false, true, 64, 256, 0},
        {"1 worker, prefetch + flag", 1, 0, false, true, false, true, 64, 256, 0},
        {"8 workers, prefetch + flag", 8, 0, false, true, false, true, 64, 256, 0},
        {"8 workers, kernel never reads managed memory", 8, 0, false, true, false, false, 64, 256, 0},
        {"8 workers + 40 idle streams, kernel stream first", 8, 40, false, true, false, true, 64, 256, 0},
        {"8 workers + 40 idle streams, kernel stream last", 8, 40, true, true, false, true, 64, 256, 0},
        {"8 workers, prefetch + flag before the launch", 8, 0, false, true, true, true, 64, 256, 0},
        {"8 workers, 1 block in 4 reads through faults", 8, 0, false, true, false, true, 64, 256, 4},
        {"8 workers, 264 blocks x 512 threads", 8, 0, false, true, false, true, 264, 512, 0},
        {"8 workers, 264 x 512, 1 block in 4 faults", 8, 0, false, true, false, true, 264, 512, 4},
        // More blocks than are resident at once: half of them wait to be dispatched.
        {"8 workers, 1056 x 512 (half not yet dispatched)", 8, 0, false, true, false, true, 1056, 512, 0},
        {"8 host threads, one stream each", 8, 0, false, true, false, true, 264, 512, 0, true, false},
        {"8 host threads + pointer-attribute check", 8, 0, false, true, false, true, 264, 512, 0, true, true},
        {"waiter, then an event record on its stream", 8, 0, false, true, false, true, 264, 512, 0, false, false, 1},
        {"waiter, then another kernel on its stream", 8, 0, false, true, false, true, 264, 512, 0, false, false, 2},
    };
    for (const Variant& v : vs) {
        const int blocks = v.blocks;
        memset(data, 1, floats * 4);  // every page back on the host
        CK(cudaMemset(flags, 0, blocks * 4));
        CK(cudaMemset(sums, 0, blocks * 4));
        CK(cudaDeviceSynchronize());
        std::vector<cudaStream_t> idle(v.idle_streams), work(v.workers);
        cudaStream_t ks;
        if (!v.kernel_stream_last) CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
        for (auto& s : idle) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        for (auto& s : work) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        if (v.kernel_stream_last) CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
        const cudaMemLocation dev = gpu_location();
        auto issue_one = [&](int b) {
            cudaStream_t s = work[b % v.workers];
            if (v.attr_check) {
                unsigned managed = 0;
                CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                          (CUdeviceptr)((char*)data + b * chunk)));
                if (!managed) fprintf(stderr, "not managed?\n");
            }
            if (v.prefetch) CK(cudaMemPrefetchAsync((char*)data + b * chunk, chunk, dev, 0, s));
            CU(cuStreamWriteValue32((CUstream)s, (CUdeviceptr)(flags + b), 1, 0));
        };
        auto issue = [&] {
            if (v.threaded) {
                std::vector<std::thread> ts;
                for (int w = 0; w < v.workers; w++)
                    ts.emplace_back([&, w] {
                        CK(cudaSetDevice(0));
                        for (int b = w; b < blocks; b += v.workers)
                            if (!(v.fault_every > 0 && b % v.fault_every == 0)) issue_one(b);
                    });
                for (auto& t : ts) t.join();
                return;
            }
            for (int b = 0; b < blocks; b++) {
                if (v.fault_every > 0 && b % v.fault_every == 0) continue;
                issue_one(b);
            }
        };
        auto t0 = std::chrono::steady_clock::now();
        if (v.before_launch) issue();
        waiter<<<blocks, v.threads, 0, ks>>>(flags, data, v.kernel_reads ? chunk / 4 : 0,
                                             2000000000ull, waited, sums, v.fault_every);
        CK(cudaGetLastError());
        cudaEvent_t after_ev;
        CK(cudaEventCreate(&after_ev));
        if (v.follow == 1) CK(cudaEventRecord(after_ev, ks));
        if (v.follow == 2) tiny<<<1, 32, 0, ks>>>(sums);
        auto t1 = std::chrono::steady_clock::now();
        if (!v.before_launch) issue();
        auto t2 = std::chrono::steady_clock::now();
        CK(cudaStreamSynchronize(ks));
        auto t3 = std::chrono::steady_clock::now();
        CK(cudaDeviceSynchronize());
        std::vector<unsigned long long> w(blocks);
        CK(cudaMemcpy(w.data(), waited, blocks * 8, cudaMemcpyDeviceToHost));
        int arrived = 0, faulted = 0;
        std::vector<double> ms;
        for (int b = 0; b < blocks; b++) {
            auto x = w[b];
            if (v.fault_every > 0 && b % v.fault_every == 0) {
                faulted++;
                continue;
            }
            if (x != ~0ull) {
                arrived++;
                ms.push_back(x / 1e6);
            }
        }
        std::sort(ms.begin(), ms.end());
        auto us = [](auto a, auto b) {
            return std::chrono::duration<double, std::micro>(b - a).count();
        };
        printf("%-50s arrived %3d/%3d  median wait %8.2f ms  max %8.2f ms  issue %7.0f us  kernel %8.1f ms\n",
               v.name, arrived, blocks - faulted, ms.empty() ? -1.0 : ms[ms.size() / 2],
               ms.empty() ? -1.0 : ms.back(), us(t1, t2) + (v.before_launch ? 0 : 0),
               us(t0, t3) / 1e3);
        CK(cudaEventDestroy(after_ev));
        for (auto s : idle) CK(cudaStreamDestroy(s));
        for (auto s : work) CK(cudaStreamDestroy(s));
        CK(cudaStreamDestroy(ks));
    }
    // Warp-level waiters: 2112 warps, 64 flags, flags written from 8 streams (no prefetch).
    for (int relaxed = 0; relaxed < 2; relaxed++) {
        CK(cudaMemset(flags, 0, 64 * 4));
        CK(cudaMemset(waited, 0xff, 64 * 8));
        CK(cudaDeviceSynchronize());
        std::vector<cudaStream_t> work(8);
        cudaStream_t ks;
        CK(cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking));
        for (auto& st : work) CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
        auto t0 = std::chrono::steady_clock::now();
        warp_waiter<<<264, 256, 0, ks>>>(flags, 64, 2000000000ull, waited, relaxed);
        CK(cudaGetLastError());
        for (int b = 0; b < 64; b++)
            CU(cuStreamWriteValue32((CUstream)work[b % 8], (CUdeviceptr)(flags + b), 1, 0));
        CK(cudaStreamSynchronize(ks));
        auto t1 = std::chrono::steady_clock::now();
        std::vector<unsigned long long> w(64);
        CK(cudaMemcpy(w.data(), waited, 64 * 8, cudaMemcpyDeviceToHost));
        int arrived = 0;
        for (auto x : w) arrived += x != ~0ull;
        printf("%-50s arrived %3d/%3d  kernel %8.1f ms\n",
               relaxed ? "2112 warp waiters, relaxed polling" : "2112 warp waiters, acquire polling",
               arrived, 64, std::chrono::duration<double, std::milli>(t1 - t0).count());
        for (auto st : work) CK(cudaStreamDestroy(st));
        CK(cudaStreamDestroy(ks));
    }
    CK(cudaFree(data));
    return 0;
}
