//! GPU tests of the IVF search. They need a CUDA GPU and fail (never pass) without one: run
//! them with `--ignored` on a GPU machine (`scripts/gpu-tests.sh`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use lookahead::Gpu;
use lookahead_ivf::check::{snap, snap_values, top_k_mismatches};
use lookahead_ivf::cpu::{self, Hit};
use lookahead_ivf::data::{Clusters, Vectors};
use lookahead_ivf::gpu::{assign_on_gpu, GpuIndex, ScanMethod, SearchParams};
use lookahead_ivf::index::IvfLayout;
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};

fn gpu() -> Gpu {
    Gpu::new(0).expect("these tests need a CUDA GPU")
}

fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

struct Fixture {
    spec: Clusters,
    data: Vectors,
    index: GpuIndex,
    mach: UvmRuntime,
}

/// A 200 000 x 64 index in 256 lists (51 MB of managed memory), fresh random data, its
/// coordinates and centroids on the grid of `lookahead_ivf::check` (so every distance is
/// exact and the GPU's results must equal the CPU's).
fn fixture(gpu: &Gpu) -> Fixture {
    let seed = fresh_seed();
    println!("seed {seed}");
    let spec = Clusters {
        dim: 64,
        clusters: 256,
        spread: 4.0,
        sigma: 1.0,
        seed,
    };
    let data = snap(spec.points(200_000, 0, None));
    let sample = spec.points(256 * 32, 1, None);
    let mut centroids =
        cpu::kmeans_with(&sample, 256, 6, seed, |c, v| assign_on_gpu(gpu, c, v)).unwrap();
    snap_values(&mut centroids);
    let assign = assign_on_gpu(gpu, &centroids, &data).unwrap();
    let layout = IvfLayout::from_assignment(64, centroids, &assign);
    let index = GpuIndex::new(gpu, layout, &data).unwrap();
    let mach = UvmRuntime::new(
        gpu,
        256,
        MachineProfile::cached_or_probe(gpu).unwrap(),
        ServiceConfig::default(),
    )
    .unwrap();
    Fixture {
        spec,
        data,
        index,
        mach,
    }
}

fn params(policy: Policy) -> SearchParams {
    SearchParams {
        nprobe: 4,
        policy,
        expected_passes: 2.0,
        max_blocks: 0,
        pull_copy_every: 0,
        scan: ScanMethod::Auto,
    }
}

/// The CPU reference's `K` nearest of each query (with `params`' nprobe), and the lists
/// those queries probe.
fn cpu_top_k(f: &Fixture, queries: &Vectors) -> (Vec<Vec<Hit>>, BTreeSet<u32>) {
    let layout = f.index.layout();
    let mut lists = vec![0.0; f.data.data.len()];
    layout.scatter(&f.data, &mut lists);
    let nprobe = params(Policy::Faults).nprobe;
    let want = (0..queries.len())
        .map(|q| cpu::search(layout, &lists, queries.row(q), nprobe, ivf_kernels::K))
        .collect();
    let probed = (0..queries.len())
        .flat_map(|q| cpu::nearest(&layout.centroids, layout.dim, queries.row(q), nprobe))
        .collect();
    (want, probed)
}

/// Every distance and every id of a search equal the CPU reference's (`what` names the
/// search in the message).
fn assert_cpu_top_k(dist: &[f32], ids: &[u32], want: &[Vec<Hit>], what: &str) {
    let differ = top_k_mismatches(dist, ids, want, ivf_kernels::K);
    assert!(differ.is_empty(), "{what}: {}", differ.join("\n"));
}

/// Every policy, cold (lists on the host) and warm, returns the CPU reference's neighbours
/// for every one of 300 queries, distances and ids exactly; the GPU-driven policies account
/// for every probed list that holds vectors.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_policy_returns_the_cpu_top_k() {
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let hot: Vec<usize> = (0..40).map(|i| i * 6).collect();
    let queries = snap(f.spec.points(300, 7, Some(&hot)));
    let (want, probed) = cpu_top_k(&f, &queries);
    // Empty lists have no work items: nothing waits for them, nothing copies them.
    let filled = (probed.iter())
        .filter(|&&l| f.index.layout().list_len(l as usize) > 0)
        .count();
    for policy in Policy::CONCRETE.iter().copied().chain([Policy::Auto]) {
        f.index.lists_mut().evict_to_host(&f.mach).unwrap();
        for pass in ["cold", "warm"] {
            let got = f.index.search(&queries, params(policy), &f.mach).unwrap();
            let what = format!("{} {pass}", policy.name());
            assert_cpu_top_k(&got.dist, &got.ids, &want, &what);
            assert_eq!(got.probed_lists, probed.len(), "{what}: lists probed");
            if policy == Policy::GpuPull {
                assert_eq!(got.timed_out, 0, "{what}: no wait for a copy ran out");
                assert_eq!(
                    got.arrived, filled,
                    "{what}: every probed list with vectors read from the cache"
                );
                if pass == "cold" {
                    assert!(
                        (filled..=probed.len()).contains(&got.requested),
                        "{what}: {} copied, {filled} of {} probed lists hold vectors",
                        got.requested,
                        probed.len()
                    );
                } else {
                    assert_eq!(
                        got.requested, 0,
                        "{what}: the second search finds them cached"
                    );
                }
            }
            if policy == Policy::GpuRequests && pass == "cold" {
                assert_eq!(got.timed_out, 0, "{what}: no request waited out its bound");
                assert_eq!(got.went_ahead, 0, "{what}: no request fell back");
                assert_eq!(
                    got.arrived,
                    filled,
                    "{what}: every probed list with vectors arrived ({} probed)",
                    probed.len()
                );
            }
        }
    }
}

/// The tiled scan returns the warp scan's neighbours bit for bit, and on grid data the CPU
/// reference's: 1 500 queries on 40 hot clusters (about 25 pairs per list, so `Auto` tiles
/// them), on the grid and off it; asked of a policy that does not read the lists in place,
/// it is refused with a message naming what it needs.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tiles_return_the_warp_scans_answer() {
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let hot: Vec<usize> = (0..40).map(|i| i * 6).collect();
    let on_grid = snap(f.spec.points(1500, 9, Some(&hot)));
    let off_grid = f.spec.points(1500, 10, Some(&hot));
    let (want, _) = cpu_top_k(&f, &on_grid);
    f.index.lists_mut().make_resident().unwrap();
    let with = |scan| SearchParams {
        scan,
        ..params(Policy::Faults)
    };
    for (queries, name) in [(&on_grid, "on the grid"), (&off_grid, "off the grid")] {
        let warp = f
            .index
            .search(queries, with(ScanMethod::Warp), &f.mach)
            .unwrap();
        let auto = f
            .index
            .search(queries, with(ScanMethod::Auto), &f.mach)
            .unwrap();
        let tiles = f
            .index
            .search(queries, with(ScanMethod::Tiles), &f.mach)
            .unwrap();
        assert!(
            !warp.tiled && auto.tiled && tiles.tiled,
            "{name}: the scans asked for"
        );
        for (got, how) in [(&auto, "auto"), (&tiles, "tiles")] {
            assert_eq!(got.ids, warp.ids, "{name}, {how}: ids");
            assert_eq!(got.dist, warp.dist, "{name}, {how}: distances");
        }
        if name == "on the grid" {
            assert_cpu_top_k(&tiles.dist, &tiles.ids, &want, "tiles on the grid");
        }
    }
    let pulled = SearchParams {
        scan: ScanMethod::Tiles,
        ..params(Policy::GpuPull)
    };
    let err = f
        .index
        .search(&on_grid, pulled, &f.mach)
        .expect_err("refused");
    assert!(
        err.to_string()
            .contains("ScanMethod::Tiles needs lists read in place"),
        "{err}"
    );
}

/// The soak tests' four batches of 64 queries over 16 hot clusters each (seeds `seed..`),
/// and the CPU reference's neighbours for each.
fn soak_batches(f: &Fixture, seed: u64) -> (Vec<Vectors>, Vec<Vec<Vec<Hit>>>) {
    let batches: Vec<Vectors> = (0..4)
        .map(|b| {
            let hot: Vec<usize> = (0..16).map(|i| (i * 16 + b * 3) % 256).collect();
            snap(f.spec.points(64, seed + b as u64, Some(&hot)))
        })
        .collect();
    let want = batches.iter().map(|q| cpu_top_k(f, q).0).collect();
    (batches, want)
}

/// 1000 searches with GPU-driven requests, the lists sent back to the host every 50: no
/// hang, no request lost or timed out, the same answers, and device memory back at its
/// level after the first search (which loads the kernels and sizes their local memory).
#[test]
#[ignore = "needs a CUDA GPU"]
fn soak_1000_searches_with_gpu_driven_requests() {
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let free_before;
    {
        let (batches, want) = soak_batches(&f, 20);
        f.mach.wait = Duration::from_secs(5);
        // The level is taken after a first search, as the pull's soak takes it: what a
        // process allocates once (measured: 128 MiB more on a machine where the fixture's
        // profile came from its cache rather than a probe) is not a leak.
        let first = (f.index)
            .search(&batches[0], params(Policy::GpuRequests), &f.mach)
            .unwrap();
        assert_cpu_top_k(&first.dist, &first.ids, &want[0], "the first search");
        gpu.synchronize().unwrap();
        free_before = gpu.memory_info().unwrap().0;
        let started = Instant::now();
        let (mut asked, mut timed_out) = (first.requested, first.timed_out);
        for i in 0..1000 {
            if i % 50 == 0 {
                f.index.lists_mut().evict_to_host(&f.mach).unwrap();
            }
            let b = i % batches.len();
            let got = f
                .index
                .search(&batches[b], params(Policy::GpuRequests), &f.mach)
                .unwrap();
            assert_cpu_top_k(&got.dist, &got.ids, &want[b], &format!("search {i}"));
            asked += got.requested;
            timed_out += got.timed_out;
        }
        let report = f.mach.stop_service().unwrap();
        println!(
            "1000 searches in {:.2} s, {asked} lists asked for: {report:?}",
            started.elapsed().as_secs_f64()
        );
        assert_eq!(timed_out, 0, "no wait ran out");
        assert!(asked > 0, "requests were made");
        assert_eq!(
            report.requests as usize, asked,
            "every request reached the host"
        );
        assert_eq!(report.completed, report.requests, "no request lost");
        assert_eq!(report.failed, 0);
    }
    gpu.synchronize().unwrap();
    let (free_after, _) = gpu.memory_info().unwrap();
    assert!(
        free_after + (8 << 20) >= free_before,
        "device memory back to its starting level: {free_before} -> {free_after}"
    );
}

/// 300 searches with the GPU-driven pull, the cache emptied (and the lists sent back to the
/// host) every 25: the same answers, no wait ran out, each cold search copies its lists and
/// the others copy only what is new, and device memory back at its level after the first
/// search (which allocates the cache).
#[test]
#[ignore = "needs a CUDA GPU"]
fn soak_300_searches_with_the_gpu_pull() {
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let (batches, want) = soak_batches(&f, 40);
    f.index.lists_mut().map_for_gpu(true).unwrap();
    f.index
        .search(&batches[0], params(Policy::GpuPull), &f.mach)
        .unwrap();
    gpu.synchronize().unwrap();
    let free_before = gpu.memory_info().unwrap().0;
    let (mut copied, mut cold_copies, mut timed_out) = (0, 0, 0);
    for i in 0..300 {
        if i % 25 == 0 {
            f.index.lists_mut().evict_to_host(&f.mach).unwrap();
        }
        let b = i % batches.len();
        let got = f
            .index
            .search(&batches[b], params(Policy::GpuPull), &f.mach)
            .unwrap();
        assert_cpu_top_k(&got.dist, &got.ids, &want[b], &format!("search {i}"));
        assert_eq!(got.policy, Policy::GpuPull);
        if i % 25 == 0 {
            cold_copies += (got.requested > 0) as usize;
        }
        if i % 25 >= batches.len() {
            assert_eq!(got.requested, 0, "search {i}: every list is cached by now");
        }
        copied += got.requested;
        timed_out += got.timed_out;
    }
    assert_eq!(timed_out, 0, "no wait ran out");
    assert_eq!(cold_copies, 12, "every cold search copied");
    assert!(copied > 0);
    gpu.synchronize().unwrap();
    let (free_after, _) = gpu.memory_info().unwrap();
    assert!(
        free_after + (8 << 20) >= free_before,
        "device memory back to its starting level: {free_before} -> {free_after}"
    );
}

/// Small batches of 1 to 64 queries, submitted as launches and as one CUDA graph (captured
/// once, its kernels updated when the size changes), resident and under the GPU-driven pull:
/// every batch gives the CPU reference's neighbours, and the graph holds the four kernels.
#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_batches_give_the_same_answers_as_launches_and_full_searches() {
    use lookahead_ivf::gpu::Submit;
    let gpu = gpu();
    let mut f = fixture(&gpu);
    let seed = fresh_seed();
    let sizes = [1usize, 4, 16, 64, 3, 64, 1];
    let batches: Vec<Vectors> = sizes
        .iter()
        .enumerate()
        .map(|(b, &n)| {
            let hot: Vec<usize> = (0..8).map(|i| (i * 31 + b * 7) % 256).collect();
            snap(f.spec.points(n, seed + b as u64, Some(&hot)))
        })
        .collect();
    f.index.lists_mut().make_resident().unwrap();
    let want: Vec<Vec<Vec<Hit>>> = batches.iter().map(|q| cpu_top_k(&f, q).0).collect();
    for policy in [Policy::Faults, Policy::GpuPull] {
        let mut batch = f.index.batch_search(64, params(policy)).unwrap();
        for round in 0..3 {
            for (q, want) in batches.iter().zip(&want) {
                for submit in [Submit::Launches, Submit::Graph] {
                    let (dist, ids) = f.index.search_batch(&mut batch, q, submit).unwrap();
                    let what = format!("{policy:?} {submit:?} round {round}, {} queries", q.len());
                    assert_cpu_top_k(&dist, &ids, want, &what);
                }
            }
        }
        assert_eq!(
            batch.graph_kernels().len(),
            4,
            "{:?}",
            batch.graph_kernels()
        );
        if policy == Policy::Faults {
            // The pull runs cold first: lists back on the host, its cache emptied.
            f.index.lists_mut().evict_to_host(&f.mach).unwrap();
        }
    }
    // Misuse is an error, not a wrong answer.
    let mut batch = f.index.batch_search(4, params(Policy::Faults)).unwrap();
    assert!(f
        .index
        .search_batch(&mut batch, &batches[3], Submit::Graph)
        .is_err());
    assert!(f
        .index
        .batch_search(4, params(Policy::GpuRequests))
        .is_err());
}

/// The coarse step in slices and `coarse_merge` on the GPU give the CPU reference's nearest
/// centroids (1000 centroids, so up to 4 slices hold some), for 1, 5 and 64 queries, 1 or 4
/// queries per block.
#[test]
#[ignore = "needs a CUDA GPU"]
fn sliced_coarse_on_the_gpu_gives_the_cpu_probes() {
    use ivf_kernels::{coarse, coarse_grid, coarse_merge, CoarseShape};
    use lookahead::launch::LaunchConfig;
    use lookahead::untracked::{Untracked as U, UntrackedMut as UM};
    let gpu = gpu();
    let s = gpu.context().new_stream().unwrap();
    let seed = fresh_seed();
    println!("seed {seed}");
    let (dim, nlist, nprobe) = (64usize, 1000usize, 8usize);
    let spec = Clusters {
        dim,
        clusters: 40,
        spread: 4.0,
        sigma: 1.0,
        seed,
    };
    // On the grid: distances exact on both sides, so ties are real and broken by index.
    let centroids = snap(spec.points(nlist, 0, None)).data;
    let all = snap(spec.points(64, 1, None));
    let ct = s
        .clone_htod(&lookahead_ivf::index::interleave_quads(&centroids, dim))
        .unwrap();
    let shape = CoarseShape {
        dim: dim as u32,
        nlist: nlist as u32,
        nprobe: nprobe as u32,
        per_block: 0,
    };
    for nq in [1usize, 5, 64] {
        let q = s.clone_htod(&all.data[..nq * dim]).unwrap();
        for (slices, per_block) in [(2usize, 4usize), (4, 1), (9, 1), (9, 4)] {
            let shape = CoarseShape {
                per_block: per_block as u32,
                ..shape
            };
            let mut partial = s.alloc_zeros::<u32>(nq * nprobe * slices).unwrap();
            let mut probes = s.clone_htod(&vec![u32::MAX; nq * nprobe]).unwrap();
            let mut dist = s.alloc_zeros::<f32>(nq * nprobe * slices).unwrap();
            let (uq, uc) = (U::new(&q, &s), U::new(&ct, &s));
            coarse::launch(
                &s,
                coarse_grid(nq, per_block, slices),
                &uq,
                &uc,
                shape,
                &mut UM::new(&mut partial, &s),
                &mut UM::new(&mut dist, &s),
            )
            .unwrap();
            let merge_cfg = LaunchConfig::for_len(nq * 32, ivf_kernels::COARSE_THREADS);
            coarse_merge::launch(
                &s,
                merge_cfg,
                &U::new(&dist, &s),
                &U::new(&partial, &s),
                shape.nprobe,
                &mut UM::new(&mut probes, &s),
            )
            .unwrap();
            s.synchronize().unwrap();
            let got = s.clone_dtoh(&probes).unwrap();
            for i in 0..nq {
                let want = cpu::nearest(&centroids, dim, all.row(i), nprobe);
                assert_eq!(
                    &got[i * nprobe..(i + 1) * nprobe],
                    &want[..],
                    "{nq} queries, {slices} slices of {per_block} per block, query {i}"
                );
            }
        }
    }
}
