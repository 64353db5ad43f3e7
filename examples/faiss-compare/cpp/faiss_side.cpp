// FAISS's side of the side-by-side: reads the data set that `faiss_compare run` wrote,
// checks its checksums, builds `GpuIndexIVFFlat` on our trained centroids, and measures what
// our side measures on the same queries. Rows go to a CSV in the columns `faiss_compare report`
// reads (see examples/faiss-compare/src/rows.rs).
//
// Settings are FAISS's defaults for IVF-Flat on the GPU (interleaved layout, float32 lists, its
// own query tiling and temporary memory), with nprobe and k from the data set.

#include <faiss/IndexFlat.h>
#include <faiss/gpu/GpuIndexIVFFlat.h>
#include <faiss/gpu/StandardGpuResources.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using faiss::idx_t;
using faiss::gpu::AllocRequest;
using faiss::gpu::GpuIndexIVFFlat;
using faiss::gpu::GpuIndexIVFFlatConfig;
using faiss::gpu::GpuResources;
using faiss::gpu::GpuResourcesProvider;
using faiss::gpu::MemorySpace;
using faiss::gpu::StandardGpuResourcesImpl;

void check_cuda(cudaError_t err, const char* what) {
    if (err != cudaSuccess) {
        throw std::runtime_error(
                std::string(what) + ": " + cudaGetErrorString(err));
    }
}

// FAISS's resources, recording every Unified Memory allocation so that a cold search can
// first move the index's pages back to the host (FAISS has no call for that).
class RecordingResources : public StandardGpuResourcesImpl {
   public:
    void* allocMemory(const AllocRequest& req) override {
        void* p = StandardGpuResourcesImpl::allocMemory(req);
        if (req.space == MemorySpace::Unified) {
            unified[p] = req.size;
        }
        return p;
    }
    void deallocMemory(int device, void* p) override {
        unified.erase(p);
        StandardGpuResourcesImpl::deallocMemory(device, p);
    }
    std::map<void*, size_t> unified;
};

class RecordingProvider : public GpuResourcesProvider {
   public:
    RecordingProvider() : res(std::make_shared<RecordingResources>()) {}
    std::shared_ptr<GpuResources> getResources() override {
        return res;
    }
    std::shared_ptr<RecordingResources> res;
};

void prefetch_unified(const RecordingResources& res, bool to_host) {
    size_t bytes = 0;
    for (const auto& [p, size] : res.unified) {
        cudaMemLocation loc{};
        loc.type = to_host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
        loc.id = 0;
        check_cuda(cudaMemPrefetchAsync(p, size, loc, 0, 0), "cudaMemPrefetchAsync");
        bytes += size;
    }
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (bytes == 0) {
        throw std::runtime_error("no Unified Memory allocation was recorded");
    }
}

struct Vectors {
    int dim = 0;
    std::vector<float> data;
    idx_t len() const {
        return dim ? idx_t(data.size() / dim) : 0;
    }
    const float* row(idx_t i) const {
        return data.data() + i * dim;
    }
};

std::vector<char> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        throw std::runtime_error("cannot open " + path);
    }
    return std::vector<char>(
            (std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// FNV-1a over the file's bytes: the same function `faiss_compare export` writes in meta.txt.
uint64_t fnv1a(const std::vector<char>& bytes) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (char c : bytes) {
        h ^= uint8_t(c);
        h *= 0x100000001b3ULL;
    }
    return h;
}

std::map<std::string, std::string> read_meta(const std::string& dir) {
    std::ifstream f(dir + "/meta.txt");
    if (!f) {
        throw std::runtime_error("cannot open " + dir + "/meta.txt");
    }
    std::map<std::string, std::string> meta;
    std::string line;
    while (std::getline(f, line)) {
        auto eq = line.find('=');
        if (eq != std::string::npos) {
            meta[line.substr(0, eq)] = line.substr(eq + 1);
        }
    }
    return meta;
}

// Reads `name` (.fvecs or .ivecs: each row an int32 count, then its 4-byte values) after
// checking its checksum against meta.txt.
template <typename T>
std::vector<T> read_vecs(
        const std::string& dir,
        const std::map<std::string, std::string>& meta,
        const std::string& name,
        int& dim) {
    auto bytes = read_bytes(dir + "/" + name);
    auto want = meta.find("fnv1a." + name);
    if (want == meta.end()) {
        throw std::runtime_error(name + " has no checksum in meta.txt");
    }
    std::ostringstream got;
    got << std::hex << fnv1a(bytes);
    if (got.str() != want->second) {
        throw std::runtime_error(
                name + ": checksum " + got.str() + " != " + want->second);
    }
    std::vector<T> out;
    size_t at = 0;
    dim = 0;
    while (at + 4 <= bytes.size()) {
        int32_t d;
        std::memcpy(&d, bytes.data() + at, 4);
        if (d <= 0 || (dim && d != dim) || at + 4 + size_t(d) * 4 > bytes.size()) {
            throw std::runtime_error(name + ": malformed row");
        }
        dim = d;
        size_t before = out.size();
        out.resize(before + d);
        std::memcpy(out.data() + before, bytes.data() + at + 4, size_t(d) * 4);
        at += 4 + size_t(d) * 4;
    }
    return out;
}

Vectors read_fvecs(
        const std::string& dir,
        const std::map<std::string, std::string>& meta,
        const std::string& name) {
    Vectors v;
    v.data = read_vecs<float>(dir, meta, name, v.dim);
    return v;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double quantile(std::vector<double> xs, double q) {
    std::sort(xs.begin(), xs.end());
    size_t i = std::min(xs.size() - 1, size_t(q * double(xs.size() - 1) + 0.5));
    return xs[i];
}

double median(std::vector<double> xs) {
    return quantile(std::move(xs), 0.5);
}

struct Setup {
    std::string dir;
    std::map<std::string, std::string> meta;
    Vectors base, centroids, queries;
    int nlist = 0, nprobe = 0, k = 0;
};

struct Csv {
    std::ofstream out;
    explicit Csv(const std::string& path) : out(path) {
        if (!out) {
            throw std::runtime_error("cannot write " + path);
        }
        out << "system,measure,variant,queries,p50_ms,p99_ms,qps,recall10,seconds\n";
    }
    void row(const std::string& measure,
             const std::string& variant,
             idx_t queries,
             double p50_ms,
             double p99_ms,
             double qps,
             double recall,
             double seconds) {
        out << "faiss," << measure << "," << variant << "," << queries << ","
            << p50_ms << "," << p99_ms << "," << qps << "," << recall << ","
            << seconds << "\n";
        out.flush();
        std::printf(
                "faiss %-10s %-22s %6ld  p50 %9.3f ms  p99 %9.3f ms  %10.0f q/s  recall %.4f  %.3f s\n",
                measure.c_str(), variant.c_str(), long(queries), p50_ms, p99_ms,
                qps, recall, seconds);
    }
};

// An IVF-Flat index on the GPU whose coarse quantizer holds our trained centroids (FAISS
// skips its own k-means when the quantizer already holds nlist vectors), lists in `space`.
std::unique_ptr<GpuIndexIVFFlat> build_on_centroids(
        RecordingProvider& res, const Setup& s, MemorySpace space, double& add_s) {
    GpuIndexIVFFlatConfig cfg;
    cfg.memorySpace = space;
    auto index = std::make_unique<GpuIndexIVFFlat>(
            &res, s.base.dim, s.nlist, faiss::METRIC_L2, cfg);
    index->quantizer->add(s.nlist, s.centroids.data.data());
    index->train(s.nlist, s.centroids.data.data());
    auto t = std::chrono::steady_clock::now();
    index->add(s.base.len(), s.base.data.data());
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    add_s = seconds_since(t);
    index->nprobe = s.nprobe;
    return index;
}

double recall_at_10(const Setup& s, const std::vector<idx_t>& ids, idx_t nq) {
    int gt_dim = 0;
    auto gt = read_vecs<int32_t>(s.dir, s.meta, "groundtruth.ivecs", gt_dim);
    idx_t n = std::min<idx_t>(nq, idx_t(gt.size() / gt_dim));
    size_t hits = 0;
    for (idx_t q = 0; q < n; q++) {
        for (int a = 0; a < 10; a++) {
            for (int b = 0; b < 10; b++) {
                hits += ids[q * s.k + a] == gt[q * gt_dim + b];
            }
        }
    }
    return n ? double(hits) / double(n * 10) : 0.0;
}

void measure_latency(GpuIndexIVFFlat& index, const Setup& s, Csv& csv, int batches) {
    for (idx_t nq : {1, 4, 16, 64}) {
        std::vector<float> d(nq * s.k);
        std::vector<idx_t> ids(nq * s.k);
        std::vector<double> times;
        idx_t pool = s.queries.len() - nq;
        for (int b = -20; b < batches; b++) {
            const float* q = s.queries.row((idx_t(b + 20) * nq) % pool);
            auto t = std::chrono::steady_clock::now();
            index.search(nq, q, s.k, d.data(), ids.data());
            if (b >= 0) {
                times.push_back(seconds_since(t) * 1e3);
            }
        }
        csv.row("latency", "resident", nq, quantile(times, 0.5), quantile(times, 0.99),
                0, 0, 0);
    }
}

void measure_throughput(GpuIndexIVFFlat& index, const Setup& s, Csv& csv, int reps) {
    for (idx_t nq : {idx_t(4096), idx_t(65536)}) {
        nq = std::min(nq, s.queries.len());
        std::vector<float> d(nq * s.k);
        std::vector<idx_t> ids(nq * s.k);
        index.search(nq, s.queries.data.data(), s.k, d.data(), ids.data());
        std::vector<double> times;
        for (int r = 0; r < reps; r++) {
            auto t = std::chrono::steady_clock::now();
            index.search(nq, s.queries.data.data(), s.k, d.data(), ids.data());
            times.push_back(seconds_since(t));
        }
        double m = median(times);
        csv.row("throughput", "resident", nq, m * 1e3, quantile(times, 0.99) * 1e3,
                double(nq) / m, recall_at_10(s, ids, nq), m);
    }
}

// Cold: every page of the Unified lists on the host, then a batch of queries near a subset
// of the clusters; warm: a second such batch right after.
void measure_unified(
        GpuIndexIVFFlat& index, RecordingProvider& res, const Setup& s, Csv& csv, int reps) {
    std::istringstream sets(s.meta.at("cold_sets"));
    std::string name;
    while (std::getline(sets, name, ',')) {
        Vectors cold = read_fvecs(s.dir, s.meta, name + "_a.fvecs");
        Vectors warm = read_fvecs(s.dir, s.meta, name + "_b.fvecs");
        std::vector<float> d(std::max(cold.len(), warm.len()) * s.k);
        std::vector<idx_t> ids(d.size());
        std::vector<double> cold_s, warm_s;
        for (int r = 0; r < reps; r++) {
            prefetch_unified(*res.res, true);
            auto t = std::chrono::steady_clock::now();
            index.search(cold.len(), cold.data.data(), s.k, d.data(), ids.data());
            cold_s.push_back(seconds_since(t));
            t = std::chrono::steady_clock::now();
            index.search(warm.len(), warm.data.data(), s.k, d.data(), ids.data());
            warm_s.push_back(seconds_since(t));
        }
        csv.row("unified_cold", name, cold.len(), median(cold_s) * 1e3,
                quantile(cold_s, 0.99) * 1e3, cold.len() / median(cold_s), 0,
                median(cold_s));
        csv.row("unified_warm", name, warm.len(), median(warm_s) * 1e3,
                quantile(warm_s, 0.99) * 1e3, warm.len() / median(warm_s), 0,
                median(warm_s));
    }
}

// FAISS's own build, as its users run it: train (its GPU k-means, its defaults) and add.
void measure_own_build(const Setup& s, Csv& csv) {
    RecordingProvider res;
    GpuIndexIVFFlat index(&res, s.base.dim, s.nlist, faiss::METRIC_L2);
    auto t = std::chrono::steady_clock::now();
    index.train(s.base.len(), s.base.data.data());
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    double train_s = seconds_since(t);
    auto t_add = std::chrono::steady_clock::now();
    index.add(s.base.len(), s.base.data.data());
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    double add_s = seconds_since(t_add);
    csv.row("build", "own_train", s.base.len(), 0, 0, 0, 0, train_s);
    csv.row("build", "own_train_add", s.base.len(), 0, 0, 0, 0, train_s + add_s);
}

Setup load(const std::string& dir) {
    Setup s;
    s.dir = dir;
    s.meta = read_meta(dir);
    s.nlist = std::stoi(s.meta.at("nlist"));
    s.nprobe = std::stoi(s.meta.at("nprobe"));
    s.k = std::stoi(s.meta.at("k"));
    s.base = read_fvecs(dir, s.meta, "base.fvecs");
    s.centroids = read_fvecs(dir, s.meta, "centroids.fvecs");
    s.queries = read_fvecs(dir, s.meta, "queries.fvecs");
    if (s.centroids.len() != s.nlist || s.centroids.dim != s.base.dim ||
        s.queries.dim != s.base.dim || s.k < 10) {
        throw std::runtime_error("meta.txt does not match the vector files");
    }
    return s;
}

void run(const std::string& dir, const std::string& csv_path, int batches, int reps) {
    auto t_load = std::chrono::steady_clock::now();
    Setup s = load(dir);
    std::printf("faiss: %ld vectors of %d floats, nlist %d, nprobe %d, k %d (checksums match, %.1f s)\n",
                long(s.base.len()), s.base.dim, s.nlist, s.nprobe, s.k, seconds_since(t_load));
    Csv csv(csv_path);
    {
        RecordingProvider res;
        double add_s = 0;
        auto index = build_on_centroids(res, s, MemorySpace::Device, add_s);
        csv.row("build", "add_on_given_centroids", s.base.len(), 0, 0, 0, 0, add_s);
        measure_latency(*index, s, csv, batches);
        measure_throughput(*index, s, csv, reps);
    }
    {
        RecordingProvider res;
        double add_s = 0;
        auto index = build_on_centroids(res, s, MemorySpace::Unified, add_s);
        measure_unified(*index, res, s, csv, reps);
    }
    measure_own_build(s, csv);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s DATA_DIR OUT_CSV [BATCHES=300] [REPS=5]\n", argv[0]);
        return 2;
    }
    try {
        int batches = argc > 3 ? std::atoi(argv[3]) : 300;
        int reps = argc > 4 ? std::atoi(argv[4]) : 5;
        if (batches < 1 || reps < 1) {
            throw std::runtime_error("BATCHES and REPS must be at least 1");
        }
        run(argv[1], argv[2], batches, reps);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "faiss_side: %s\n", e.what());
        return 1;
    }
    return 0;
}
