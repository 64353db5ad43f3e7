// Which memory operations a CUDA graph can hold, found by trying each one inside a stream
// capture (global and thread-local mode), instantiating the graph, replaying it and
// checking the operation's effect. Prints one row per operation: capture, instantiate,
// replay, effect, and the driver's error where it refused.
//
//   nvcc -O2 -arch=sm_90 -std=c++17 -o capture_ops experiments/graphs/capture_ops.cu -lcuda
//   ./capture_ops
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CU(x)                                                                     \
    do {                                                                          \
        CUresult r_ = (x);                                                        \
        if (r_ != CUDA_SUCCESS) {                                                 \
            const char* s_ = "";                                                  \
            cuGetErrorName(r_, &s_);                                              \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);        \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static std::string name(CUresult r) {
    const char* s = "";
    cuGetErrorName(r, &s);
    return s;
}

__global__ void add_one(unsigned* p, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) p[i] += 1;
}

static void host_fn(void* flag) { *(volatile int*)flag = 1; }

constexpr size_t N = 1 << 20;  // 4 MiB of u32
constexpr size_t BYTES = N * 4;

struct Bufs {
    CUdeviceptr dev, dev2, managed;
    unsigned *pinned, *pageable;
    int* flag;
    CUdevice device;
};

// One operation: `queue` puts it on the stream (returns the call's result), `check` says
// after a replay whether it took effect, `reset` restores the buffers first.
struct Op {
    const char* name;
    std::function<CUresult(CUstream, Bufs&)> queue;
    std::function<bool(Bufs&)> check;
};

static void reset(Bufs& b, CUstream st) {
    for (size_t i = 0; i < N; i++) b.pinned[i] = b.pageable[i] = 7;
    CU(cuMemsetD32Async(b.dev, 0, N, st));
    CU(cuMemsetD32Async(b.dev2, 0, N, st));
    CU(cuMemsetD32Async(b.managed, 0, N, st));
    CU(cuStreamSynchronize(st));
    *b.flag = 0;
    CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0};
    CU(cuMemPrefetchAsync(b.managed, BYTES, host, 0, st));
    CU(cuStreamSynchronize(st));
}

static unsigned first_dev(CUdeviceptr p) {
    unsigned v;
    CU(cuMemcpyDtoH(&v, p, 4));
    return v;
}

static int last_prefetch_location(Bufs& b) {
    int loc = -2;
    CU(cuMemRangeGetAttribute(&loc, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, b.managed, BYTES));
    return loc;
}

static std::vector<Op> ops() {
    CUmemLocation gpu0{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    return {
        {"kernel launch",
         [](CUstream st, Bufs& b) {
             add_one<<<(N + 255) / 256, 256, 0, st>>>((unsigned*)b.dev, N);
             return (CUresult)cudaGetLastError();
         },
         [](Bufs& b) { return first_dev(b.dev) == 1; }},
        {"cuMemsetD32Async (device)", [](CUstream st, Bufs& b) { return cuMemsetD32Async(b.dev, 5, N, st); },
         [](Bufs& b) { return first_dev(b.dev) == 5; }},
        {"cuMemsetD32Async (managed)", [](CUstream st, Bufs& b) { return cuMemsetD32Async(b.managed, 5, N, st); },
         [](Bufs& b) { return first_dev(b.managed) == 5; }},
        {"cuMemcpyHtoDAsync (pinned)", [](CUstream st, Bufs& b) { return cuMemcpyHtoDAsync(b.dev, b.pinned, BYTES, st); },
         [](Bufs& b) { return first_dev(b.dev) == 7; }},
        {"cuMemcpyHtoDAsync (pageable)",
         [](CUstream st, Bufs& b) { return cuMemcpyHtoDAsync(b.dev, b.pageable, BYTES, st); },
         [](Bufs& b) { return first_dev(b.dev) == 7; }},
        {"cuMemcpyDtoHAsync (pinned)",
         [](CUstream st, Bufs& b) {
             CUresult r = cuMemsetD32Async(b.dev, 9, N, st);
             return r != CUDA_SUCCESS ? r : cuMemcpyDtoHAsync(b.pinned, b.dev, BYTES, st);
         },
         [](Bufs& b) { return b.pinned[N - 1] == 9; }},
        {"cuMemcpyDtoHAsync (pageable)",
         [](CUstream st, Bufs& b) {
             CUresult r = cuMemsetD32Async(b.dev, 9, N, st);
             return r != CUDA_SUCCESS ? r : cuMemcpyDtoHAsync(b.pageable, b.dev, BYTES, st);
         },
         [](Bufs& b) { return b.pageable[N - 1] == 9; }},
        {"cuMemcpyDtoDAsync",
         [](CUstream st, Bufs& b) {
             CUresult r = cuMemsetD32Async(b.dev2, 3, N, st);
             return r != CUDA_SUCCESS ? r : cuMemcpyDtoDAsync(b.dev, b.dev2, BYTES, st);
         },
         [](Bufs& b) { return first_dev(b.dev) == 3; }},
        {"cuMemPrefetchAsync (managed -> GPU)",
         [gpu0](CUstream st, Bufs& b) { return cuMemPrefetchAsync(b.managed, BYTES, gpu0, 0, st); },
         [](Bufs& b) { return last_prefetch_location(b) == 0; }},
        {"cuMemPrefetchBatchAsync (managed -> GPU)",
         [gpu0](CUstream st, Bufs& b) {
             CUdeviceptr ptrs[2] = {b.managed, b.managed + BYTES / 2};
             size_t sizes[2] = {BYTES / 2, BYTES / 2};
             CUmemLocation locs[1] = {gpu0};
             size_t idx[1] = {0};
             return cuMemPrefetchBatchAsync(ptrs, sizes, 2, locs, idx, 1, 0, st);
         },
         [](Bufs& b) { return last_prefetch_location(b) == 0; }},
        {"cuMemAdvise (SetPreferredLocation)",
         [gpu0](CUstream, Bufs& b) {
             return cuMemAdvise(b.managed, BYTES, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, gpu0);
         },
         [](Bufs&) { return true; }},
        {"cuMemAllocAsync + cuMemFreeAsync",
         [](CUstream st, Bufs&) {
             CUdeviceptr p;
             CUresult r = cuMemAllocAsync(&p, BYTES, st);
             if (r != CUDA_SUCCESS) return r;
             r = cuMemsetD32Async(p, 1, N, st);
             return r != CUDA_SUCCESS ? r : cuMemFreeAsync(p, st);
         },
         [](Bufs&) { return true; }},
        {"cuLaunchHostFunc", [](CUstream st, Bufs& b) { return cuLaunchHostFunc(st, host_fn, b.flag); },
         [](Bufs& b) { return *b.flag == 1; }},
        {"cuStreamWriteValue32",
         [](CUstream st, Bufs& b) { return cuStreamWriteValue32(st, b.dev, 42, CU_STREAM_WRITE_VALUE_DEFAULT); },
         [](Bufs& b) { return first_dev(b.dev) == 42; }},
        {"cuEventRecord (timing event)",
         [](CUstream st, Bufs&) {
             CUevent e;
             CUresult r = cuEventCreate(&e, CU_EVENT_DEFAULT);
             return r != CUDA_SUCCESS ? r : cuEventRecord(e, st);
         },
         [](Bufs&) { return true; }},
    };
}

// Capture `op` in `mode`, instantiate, replay, check. One table row.
static void try_op(const Op& op, CUstreamCaptureMode mode, CUstream st, Bufs& b) {
    reset(b, st);
    std::string cap = "ok", inst = "-", replay = "-", effect = "-";
    CU(cuStreamBeginCapture(st, mode));
    CUresult q = op.queue(st, b);
    CUgraph g = nullptr;
    CUresult e = cuStreamEndCapture(st, &g);
    cudaGetLastError();
    if (q != CUDA_SUCCESS) cap = "refused: " + name(q);
    else if (e != CUDA_SUCCESS) cap = "capture broken: " + name(e);
    if (q == CUDA_SUCCESS && e == CUDA_SUCCESS && g) {
        size_t n = 0;
        cuGraphGetNodes(g, nullptr, &n);
        cap = "ok (" + std::to_string(n) + " node" + (n == 1 ? "" : "s") + ")";
        CUgraphExec x;
        CUresult ri = cuGraphInstantiate(&x, g, 0);
        inst = ri == CUDA_SUCCESS ? "ok" : name(ri);
        if (ri == CUDA_SUCCESS) {
            CUresult rl = cuGraphLaunch(x, st);
            if (rl == CUDA_SUCCESS) rl = cuStreamSynchronize(st);
            replay = rl == CUDA_SUCCESS ? "ok" : name(rl);
            if (rl == CUDA_SUCCESS) effect = op.check(b) ? "yes" : "NO";
            cuGraphExecDestroy(x);
        }
    } else if (q == CUDA_SUCCESS && e == CUDA_SUCCESS) {
        cap = "ok (empty graph)";
    }
    if (g) cuGraphDestroy(g);
    printf("| %-40s | %-12s | %-40s | %-8s | %-8s | %-6s |\n", op.name,
           mode == CU_STREAM_CAPTURE_MODE_GLOBAL ? "global" : "thread-local", cap.c_str(), inst.c_str(),
           replay.c_str(), effect.c_str());
}

int main() {
    CU(cuInit(0));
    Bufs b{};
    CU(cuDeviceGet(&b.device, 0));
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, b.device));
    CU(cuCtxSetCurrent(ctx));
    char dev_name[256];
    int driver = 0;
    CU(cuDeviceGetName(dev_name, sizeof dev_name, b.device));
    CU(cuDriverGetVersion(&driver));
    printf("device: %s, CUDA driver API %d.%d\n\n", dev_name, driver / 1000, driver % 1000 / 10);
    CU(cuMemAlloc(&b.dev, BYTES));
    CU(cuMemAlloc(&b.dev2, BYTES));
    CU(cuMemAllocManaged(&b.managed, BYTES, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemHostAlloc((void**)&b.pinned, BYTES, 0));
    b.pageable = (unsigned*)malloc(BYTES);
    CU(cuMemHostAlloc((void**)&b.flag, sizeof(int), 0));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    printf("| operation | capture mode | captured | instantiated | replayed | effect |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    for (const Op& op : ops()) {
        for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}) {
            try_op(op, mode, st, b);
        }
    }
    return 0;
}
