// What the standalone experiments in this folder share: checked CUDA calls and the
// pinned-copy baseline each one measures in its own run.
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
