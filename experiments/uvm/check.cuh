// What the standalone experiments in this folder share: checked CUDA calls, the device
// line they print, managed lists filled with a checkable pattern, and the pinned-copy
// baseline each one measures in its own run.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// A runtime-API call that must succeed: otherwise print where and why, and exit.
#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

// The same for a driver-API call.
#define CU(x)                                                                \
    do {                                                                     \
        CUresult r_ = (x);                                                   \
        if (r_ != CUDA_SUCCESS) {                                            \
            const char* s_ = "";                                             \
            cuGetErrorString(r_, &s_);                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

// Pinned cudaMemcpy host-to-device rate in GB/s: 512 MiB into `dst` (at least that large)
// on `st`, 4 copies timed with events, the second fastest. Prints it too.
inline double pinned_h2d_gbps(void* dst, cudaStream_t st) {
    const size_t n = 512u << 20;
    char* pinned;
    CK(cudaMallocHost(&pinned, n));
    memset(pinned, 1, n);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int r = 0; r < 4; r++) {
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(dst, pinned, n, cudaMemcpyHostToDevice, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    double rate = n / (ms[1] * 1e-3) / 1e9;
    printf("pinned cudaMemcpy H2D 512 MiB: %.1f GB/s\n", rate);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFreeHost(pinned));
    return rate;
}

// Prints the device, driver and SM count (the first line of every experiment's output).
inline cudaDeviceProp print_device() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0;
    CK(cudaDriverGetVersion(&driver));
    printf("device %s, driver CUDA %d.%d, %d SMs\n", prop.name, driver / 1000, driver % 1000 / 10,
           prop.multiProcessorCount);
    return prop;
}

// GPU 0 or the host, as a prefetch or advice target.
inline cudaMemLocation gpu_location() {
    cudaMemLocation l{};
    l.type = cudaMemLocationTypeDevice;
    l.id = 0;
    return l;
}
inline cudaMemLocation host_location() {
    cudaMemLocation l{};
    l.type = cudaMemLocationTypeHost;
    l.id = 0;
    return l;
}

// Word `i` of the lists: different for every word, so a copy to the wrong place shows.
inline unsigned pattern(size_t i) { return (unsigned)(i * 2654435761u); }

// Words of lists `lists` (each `list_bytes`, list l at byte l * list_bytes) that differ in
// the device copy `dst` from the `pattern` the CPU wrote.
inline size_t count_wrong(const void* dst, const std::vector<int>& lists, size_t list_bytes) {
    std::vector<unsigned> back(list_bytes / 4);
    size_t bad = 0;
    for (int l : lists) {
        const size_t off = (size_t)l * list_bytes / 4;
        CK(cudaMemcpy(back.data(), (const unsigned*)dst + off, list_bytes, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < back.size(); i++)
            if (back[i] != pattern(off + i)) bad++;
    }
    return bad;
}

// `bytes` of managed memory holding `pattern`, written by the CPU: every page starts on the host.
inline unsigned* managed_pattern(size_t bytes) {
    unsigned* m;
    CK(cudaMallocManaged(&m, bytes));
    for (size_t i = 0; i < bytes / 4; i++) m[i] = pattern(i);
    return m;
}

// Seconds that `launch()`'s work on `st` takes, timed with events; checks the launch.
template <class Launch>
inline double time_s(cudaStream_t st, Launch launch) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, st));
    launch();
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return ms * 1e-3;
}

// The next work item for the calling warp: lane 0 takes it from `*next`, every lane gets it.
__device__ inline unsigned warp_claim(unsigned* next) {
    unsigned i = 0;
    if (threadIdx.x % 32 == 0) i = atomicAdd(next, 1u);
    return __shfl_sync(0xffffffff, i, 0);
}

// The copy loop of the experiments' copy kernels: the calling warp copies `quads` 16-byte
// words from `s` to `d`, each lane with UNROLL streaming loads in flight.
template <int UNROLL = 8>
__device__ inline void warp_copy(const int4* s, int4* d, size_t quads) {
    const unsigned lane = threadIdx.x % 32;
    for (size_t w = lane; w < quads; w += 32 * UNROLL) {
        int4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (w + u * 32 < quads) v[u] = __ldcs(s + w + u * 32);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (w + u * 32 < quads) d[w + u * 32] = v[u];
    }
}
