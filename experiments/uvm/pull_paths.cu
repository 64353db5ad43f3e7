// Which path brings a scattered set of host-resident managed lists into device memory
// fastest? An IVF search needs only its probed lists (2 MiB each, scattered over a 4 GiB
// index), so the question is the rate on those bytes, not on one big range.
//
// Paths, each timed with events after moving every page back to the host:
//   prefetch   cudaMemPrefetchAsync per run of adjacent lists (migrates), 1 and 4 streams
//   ce-copy    cudaMemcpyAsync from the managed lists into a plain device buffer (the copy
//              engine), without and with remote-mapping advice
//   sm-copy    a kernel that copies the lists into the device buffer with 16-byte loads,
//              with remote-mapping advice (preferred location host + accessed by the GPU)
//              and with accessed-by alone
// Then it reads the lists from the managed range again (did the path migrate them?), and
// checks every copied byte against the host's. Baseline: pinned cudaMemcpy H2D, same run.
//
//   nvcc -O3 -arch=sm_90 -o pull_paths pull_paths.cu -lcuda && ./pull_paths
#include "check.cuh"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>


struct Piece {
    size_t src, dst, len;  // byte offsets into the managed range and the device buffer
};

// Warp-per-piece copy: each lane moves 16 bytes per load, UNROLL loads in flight.
template <int UNROLL>
__global__ void sm_copy(const char* src, char* dst, const Piece* pieces, int n, unsigned* next) {
    while (true) {
        const int i = (int)warp_claim(next);
        if (i >= n) return;
        Piece p = pieces[i];
        const int4* s = (const int4*)(src + p.src);
        int4* d = (int4*)(dst + p.dst);
        warp_copy<UNROLL>(s, d, p.len / 16);
    }
}

__global__ void read_sum(const float* p, size_t n, float* out) {
    float s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += p[i];
    atomicAdd(out, s);
}

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main() {
    const size_t list_bytes = 2u << 20, nlist = 2048, total = list_bytes * nlist;
    print_device();
    const cudaMemLocation dev = gpu_location(), host = host_location();

    char* managed = (char*)managed_pattern(total);
    char* cache;
    CK(cudaMalloc(&cache, total));
    cudaStream_t st[4];
    for (auto& s : st) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    unsigned* next;
    CK(cudaMalloc(&next, 4));
    float* sum;
    CK(cudaMalloc(&sum, 4));

    pinned_h2d_gbps(cache, st[0]);

    auto to_host = [&]() {
        CK(cudaMemPrefetchAsync(managed, total, host, 0, st[0]));
        CK(cudaStreamSynchronize(st[0]));
    };
    auto advise = [&](bool pref, bool acc, bool on) {
        double t0 = now_s();
        if (on) {
            if (pref) CK(cudaMemAdvise(managed, total, cudaMemAdviseSetPreferredLocation, host));
            if (acc) CK(cudaMemAdvise(managed, total, cudaMemAdviseSetAccessedBy, dev));
        } else {
            if (acc) CK(cudaMemAdvise(managed, total, cudaMemAdviseUnsetAccessedBy, dev));
            if (pref) CK(cudaMemAdvise(managed, total, cudaMemAdviseUnsetPreferredLocation, host));
        }
        CK(cudaDeviceSynchronize());
        return now_s() - t0;
    };

    for (double frac : {0.03, 0.08, 0.124, 0.43}) {
        std::mt19937 rng(42);
        std::vector<int> ids(nlist);
        for (size_t i = 0; i < nlist; i++) ids[i] = (int)i;
        std::shuffle(ids.begin(), ids.end(), rng);
        size_t m = (size_t)(frac * nlist);
        std::vector<int> pick(ids.begin(), ids.begin() + m);
        std::sort(pick.begin(), pick.end());
        std::vector<Piece> runs, chunks, shifted;
        for (int l : pick) {
            size_t off = (size_t)l * list_bytes;
            if (!runs.empty() && runs.back().src + runs.back().len == off)
                runs.back().len += list_bytes;
            else
                runs.push_back({off, off, list_bytes});
            for (size_t c = 0; c < list_bytes; c += 64 << 10) {
                chunks.push_back({off + c, off + c, 64 << 10});
                // The same bytes cut 1.5 KiB off the 64 KiB grid (as when a list starts
                // anywhere), the last piece shorter.
                size_t a = off + c + (c ? 1536 : 0), b = off + c + (64 << 10) + (c + (64 << 10) < list_bytes ? 1536 : 0);
                shifted.push_back({a, a, b - a});
            }
        }
        Piece *dchunks, *dshifted;
        CK(cudaMalloc(&dchunks, chunks.size() * sizeof(Piece)));
        CK(cudaMemcpy(dchunks, chunks.data(), chunks.size() * sizeof(Piece), cudaMemcpyHostToDevice));
        CK(cudaMalloc(&dshifted, shifted.size() * sizeof(Piece)));
        CK(cudaMemcpy(dshifted, shifted.data(), shifted.size() * sizeof(Piece), cudaMemcpyHostToDevice));
        double bytes = (double)m * list_bytes;
        printf("\n== %zu of %zu lists (%.1f%%), %.0f MB in %zu runs\n", m, nlist, 100.0 * m / nlist, bytes / 1e6,
               runs.size());

        // Times `issue` (which enqueues on the streams given) from the first event to the last
        // stream's end; then reads the lists from the managed range (a migrated list reads at
        // device speed) and checks the device buffer when `check`.
        auto measure = [&](const char* name, int nstreams, bool check, auto issue) {
            std::vector<double> rates, after;
            for (int r = 0; r < 3; r++) {
                to_host();
                CK(cudaMemset(cache, 0, total));
                CK(cudaDeviceSynchronize());
                CK(cudaEventRecord(e0, st[0]));
                for (int k = 1; k < nstreams; k++) CK(cudaStreamWaitEvent(st[k], e0));
                issue();
                for (int k = 1; k < nstreams; k++) {
                    cudaEvent_t e;
                    CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
                    CK(cudaEventRecord(e, st[k]));
                    CK(cudaStreamWaitEvent(st[0], e));
                    CK(cudaEventDestroy(e));
                }
                CK(cudaEventRecord(e1, st[0]));
                CK(cudaEventSynchronize(e1));
                CK(cudaGetLastError());
                float t;
                CK(cudaEventElapsedTime(&t, e0, e1));
                rates.push_back(bytes / (t * 1e-3) / 1e9);
                // Read the first run from the managed range.
                CK(cudaEventRecord(e0, st[0]));
                read_sum<<<528, 256, 0, st[0]>>>((const float*)(managed + runs[0].src), runs[0].len / 4, sum);
                CK(cudaEventRecord(e1, st[0]));
                CK(cudaEventSynchronize(e1));
                CK(cudaEventElapsedTime(&t, e0, e1));
                after.push_back(runs[0].len / (t * 1e-3) / 1e9);
            }
            // Compare with the values the CPU wrote (the managed range may be elsewhere now).
            const size_t bad = check ? count_wrong(cache, pick, list_bytes) : 0;
            std::sort(rates.begin(), rates.end());
            std::sort(after.begin(), after.end());
            printf("%-44s %6.1f GB/s [%5.1f, %5.1f]   re-read from managed %7.1f GB/s%s\n", name, rates[1], rates[0],
                   rates[2], after[1], check ? (bad ? "  CHECK FAILED" : "  check ok") : "");
        };

        auto prefetch = [&](int ns) {
            for (size_t i = 0; i < runs.size(); i++)
                CK(cudaMemPrefetchAsync(managed + runs[i].src, runs[i].len, dev, 0, st[i % ns]));
        };
        auto ce = [&](int ns) {
            for (size_t i = 0; i < runs.size(); i++)
                CK(cudaMemcpyAsync(cache + runs[i].dst, managed + runs[i].src, runs[i].len, cudaMemcpyDefault,
                                   st[i % ns]));
        };
        auto sm = [&](int blocks) {
            CK(cudaMemsetAsync(next, 0, 4, st[0]));
            sm_copy<8><<<blocks, 256, 0, st[0]>>>(managed, cache, dchunks, (int)chunks.size(), next);
        };

        measure("prefetch per run, 1 stream", 1, false, [&] { prefetch(1); });
        measure("prefetch per run, 4 streams", 4, false, [&] { prefetch(4); });
        measure("ce-copy, no advice, 1 stream", 1, true, [&] { ce(1); });
        double set_both = advise(true, true, true);
        measure("ce-copy, remote advice, 1 stream", 1, true, [&] { ce(1); });
        measure("ce-copy, remote advice, 4 streams", 4, true, [&] { ce(4); });
        for (int blocks : {132, 264, 528, 1056})
            measure((std::string("sm-copy, remote advice, blocks ") + std::to_string(blocks)).c_str(), 1, true,
                    [&] { sm(blocks); });
        measure("sm-copy, remote advice, 528, chunks off the grid", 1, true, [&] {
            CK(cudaMemsetAsync(next, 0, 4, st[0]));
            sm_copy<8><<<528, 256, 0, st[0]>>>(managed, cache, dshifted, (int)shifted.size(), next);
        });
        double unset_both = advise(true, true, false);
        double set_acc = advise(false, true, true);
        measure("sm-copy, accessed-by only, blocks 528", 1, true, [&] { sm(528); });
        double unset_acc = advise(false, true, false);
        printf("advice on 4 GiB: set both %.0f ms, unset both %.0f ms, set accessed-by %.0f ms, unset %.0f ms\n",
               set_both * 1e3, unset_both * 1e3, set_acc * 1e3, unset_acc * 1e3);
        CK(cudaFree(dchunks));
        CK(cudaFree(dshifted));
    }
    return 0;
}
