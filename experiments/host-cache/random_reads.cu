// How fast can the GPU read pinned, mapped host memory in small random pieces? The row
// gather's cache misses are 512-byte reads at random places of a table in host memory; this
// separates what the interconnect gives such reads from what the cache's protocol costs.
// Each row: warps read pieces of `piece` bytes (16 bytes a lane, coalesced), `ilp` pieces in
// flight per warp, from a 4 GiB pinned host buffer, at random piece-aligned places, or in
// address order, or at random places inside the first `span`; 64 MiB read per run, median
// of 5 timed runs (events) after a warm-up, full occupancy (SMs x 8 blocks of 256). The
// baseline is the pinned cudaMemcpy host-to-device rate measured in the same run. The last
// rows read a second buffer: aligned to 2 MiB, madvise(MADV_HUGEPAGE) (transparent huge
// pages), then pinned with cudaHostRegister; and a third: host memory from the driver's
// virtual memory calls (cuMemCreate on CU_MEM_LOCATION_TYPE_HOST at the recommended
// granularity, mapped for the GPU): whether larger host or GPU pages change small reads.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o random_reads experiments/host-cache/random_reads.cu -lcuda
//   ./random_reads
#include "../uvm/check.cuh"

#include <random>
#include <sys/mman.h>

struct Run {
    const uint4* host;  // device address of the mapped host buffer
    const uint64_t* at; // per piece: its first uint4
    int pieces;
    int quads;          // uint4 per piece
};

// Warp w reads pieces w, w + warps, ..., `ILP` of them at once; the sum keeps the loads.
template <int ILP>
__global__ void read_pieces(Run r, unsigned* sink) {
    const int lane = threadIdx.x % 32;
    const int warps = gridDim.x * blockDim.x / 32;
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    unsigned acc = 0;
    for (int p0 = w; p0 < r.pieces; p0 += warps * ILP) {
        for (int q = lane; q < r.quads; q += 32) {
            uint4 v[ILP];
#pragma unroll
            for (int u = 0; u < ILP; u++) {
                int p = p0 + u * warps;
                v[u] = p < r.pieces ? __ldcs(r.host + r.at[p] + q) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < ILP; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main() {
    cudaDeviceProp prop = print_device();
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    const size_t bytes = size_t(4) << 30, read = size_t(64) << 20;
    void* dev;
    CK(cudaMalloc(&dev, 512u << 20));
    double pinned = pinned_h2d_gbps(dev, st);
    char* host;
    CK(cudaHostAlloc((void**)&host, bytes, cudaHostAllocMapped));
    memset(host, 1, bytes);
    uint4* host_dev;
    CK(cudaHostGetDevicePointer((void**)&host_dev, host, 0));
    unsigned* sink;
    CK(cudaMalloc(&sink, 4));
    uint64_t* at;
    CK(cudaMalloc(&at, (read / 128) * sizeof(uint64_t)));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    char* huge = nullptr;
    if (posix_memalign((void**)&huge, size_t(2) << 20, bytes) != 0) return 1;
    int advised = madvise(huge, bytes, MADV_HUGEPAGE);
    memset(huge, 1, bytes);
    CK(cudaHostRegister(huge, bytes, cudaHostRegisterMapped));
    uint4* huge_dev;
    CK(cudaHostGetDevicePointer((void**)&huge_dev, huge, 0));
    printf("huge-page buffer: madvise %s\n", advised == 0 ? "ok" : "refused");
    CU(cuInit(0));
    CUmemAllocationProp mp = {};
    mp.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    mp.location.type = CU_MEM_LOCATION_TYPE_HOST;
    mp.location.id = 0;
    size_t gran = 0;
    CU(cuMemGetAllocationGranularity(&gran, &mp, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    CUmemGenericAllocationHandle handle;
    CU(cuMemCreate(&handle, bytes, &mp, 0));
    CUdeviceptr vmm;
    CU(cuMemAddressReserve(&vmm, bytes, gran, 0, 0));
    CU(cuMemMap(vmm, bytes, 0, handle, 0));
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(vmm, bytes, &access, 1));
    CU(cuMemsetD8(vmm, 1, bytes));
    printf("driver host allocation: granularity %zu KiB\n", gran >> 10);
    std::mt19937_64 rng(42);
    printf("%-8s %-22s %4s %10s %8s\n", "piece", "places", "ilp", "GB/s", "of pinned");
    const size_t pieces_sizes[] = {128, 256, 512, 1024, 4096, 65536};
    for (size_t piece : pieces_sizes) {
        for (int order = 0; order < 5; order++) {
            const size_t span = order == 2 ? (size_t(64) << 20) : bytes;
            if (order >= 2 && piece != 512 && piece != 4096) continue;
            int n = int(read / piece);
            std::vector<uint64_t> h(n);
            for (int i = 0; i < n; i++) {
                uint64_t slot = order == 1 ? uint64_t(i) : rng() % (span / piece);
                h[i] = slot * piece / 16;
            }
            CK(cudaMemcpy(at, h.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice));
            const uint4* src = order == 3 ? huge_dev : order == 4 ? (const uint4*)vmm : host_dev;
            Run r{src, at, n, int(piece / 16)};
            for (int ilp : {1, 4}) {
                std::vector<double> ms;
                for (int k = 0; k < 6; k++) {
                    CK(cudaEventRecord(a, st));
                    if (ilp == 1)
                        read_pieces<1><<<prop.multiProcessorCount * 8, 256, 0, st>>>(r, sink);
                    else
                        read_pieces<4><<<prop.multiProcessorCount * 8, 256, 0, st>>>(r, sink);
                    CK(cudaGetLastError());
                    CK(cudaEventRecord(b, st));
                    CK(cudaEventSynchronize(b));
                    float t;
                    CK(cudaEventElapsedTime(&t, a, b));
                    if (k > 0) ms.push_back(t);
                }
                double gbps = read / median(ms) / 1e6;
                const char* places[] = {"random in 4 GiB", "in address order", "random in 64 MiB",
                                        "random, huge pages", "random, cuMemCreate host"};
                printf("%-8zu %-22s %4d %10.1f %7.0f%%\n", piece, places[order], ilp, gbps,
                       100 * gbps / pinned);
            }
        }
    }
    return 0;
}
