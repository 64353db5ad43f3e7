//! The IVF kernels on the CPU emulator (no GPU): the whole search pipeline (coarse, plan,
//! scan with its register top-k and warp merges, merge) must return the CPU reference's
//! neighbours, with and without the scan's in-kernel prefetch hints, and with the
//! GPU-driven request path served by a host prefetch service.

use std::sync::Arc;
use std::time::Duration;

use lookahead::emu::{Emulator, Instruction};
use lookahead_ivf::data::{Clusters, Vectors};
use lookahead_ivf::emulated::{self, EmulatedParams, EmulatedSearch};
use lookahead_ivf::index::IvfLayout;
use lookahead_ivf::{check, cpu};
use lookahead_uvm::RingQueue;
use lookahead_uvm::{PrefetchService, RequestRing, ServiceConfig};

struct Fixture {
    layout: IvfLayout,
    lists: Vec<f32>,
    queries: Vectors,
}

fn fixture(seed: u64, dim: usize) -> Fixture {
    fixture_of(seed, dim, 3000, false)
}

/// `points` points in 24 clusters; 4000 at dim 128 average 167 rows (85 KB) a list, so
/// some probed list spans several 64 KiB copy chunks whatever the seed. With `on_grid`,
/// the points, centroids and queries are snapped to `lookahead_ivf::check`'s grid.
fn fixture_of(seed: u64, dim: usize, points: usize, on_grid: bool) -> Fixture {
    println!("seed {seed}");
    let spec = Clusters {
        dim,
        clusters: 24,
        spread: 4.0,
        sigma: 1.0,
        seed,
    };
    let grid = |v: Vectors| if on_grid { check::snap(v) } else { v };
    let data = grid(spec.points(points, 0, None));
    let mut centroids = cpu::kmeans(&spec.points(1000, 1, None), 24, 8, seed);
    if on_grid {
        check::snap_values(&mut centroids);
    }
    let layout =
        IvfLayout::from_assignment(dim, centroids.clone(), &cpu::assign(&centroids, &data));
    let mut lists = vec![0.0; data.data.len()];
    layout.scatter(&data, &mut lists);
    let queries = grid(spec.points(40, 2, None));
    Fixture {
        layout,
        lists,
        queries,
    }
}

fn fresh_seed() -> u64 {
    if let Some(seed) = std::env::var("LOOKAHEAD_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return seed; // to replay a failure: the seed is printed with every run
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The search with no request queue: what every other way of running it must return.
fn without_queue(emu: &Emulator, f: &Fixture, params: EmulatedParams) -> EmulatedSearch {
    emulated::search(
        emu,
        &f.layout,
        &f.lists,
        &f.queries,
        params,
        RingQueue::disabled(),
    )
    .unwrap()
}

/// Every query's `K` nearest match the CPU reference (distances to rounding: the kernel
/// sums a distance in eight partial sums; ids except between candidates that tie to
/// rounding, which may swap places across rank `K` too, so the reference keeps a few more).
fn check_against_cpu(f: &Fixture, got: &EmulatedSearch, nprobe: usize, what: &str) {
    let k = ivf_kernels::K;
    for q in 0..f.queries.len() {
        let want = cpu::search(&f.layout, &f.lists, f.queries.row(q), nprobe, k + 8);
        let ids = &got.ids[q * k..(q + 1) * k];
        let dist = &got.dist[q * k..(q + 1) * k];
        for j in 0..k {
            let (wd, wi) = want[j];
            assert!(
                (dist[j] - wd).abs() <= 1e-4 * wd.max(1.0),
                "query {q} rank {j}: {} vs {wd} ({what})",
                dist[j]
            );
            if ids[j] != wi {
                let theirs = want.iter().find(|h| h.1 == ids[j]).map(|h| h.0);
                assert!(
                    theirs.is_some_and(|d| (d - wd).abs() <= 1e-4 * wd.max(1.0)),
                    "query {q} rank {j}: id {} vs {wi} ({what})",
                    ids[j]
                );
            }
        }
    }
}

#[test]
fn emulated_ivf_search_matches_the_cpu_reference() {
    // An odd dimension exercises the lanes that hold no dimension of a vector.
    let f = fixture(fresh_seed(), 21);
    let emu = Emulator::new().prefetch_trace(true);
    for hints in [false, true] {
        let params = EmulatedParams {
            hints,
            ..EmulatedParams::default()
        };
        let got = without_queue(&emu, &f, params);
        assert!(got.probed_lists > 0 && got.probed_lists <= 24);
        assert!(got.wanted.is_empty(), "a disabled queue asks for nothing");
        check_against_cpu(&f, &got, params.nprobe, &format!("hints {hints}"));
        let trace = emu.take_prefetch_trace();
        if hints {
            assert!(!trace.is_empty(), "the L2 hints are issued");
            let (lo, hi) = (
                f.lists.as_ptr() as usize,
                f.lists.as_ptr() as usize + f.lists.len() * 4,
            );
            assert!(trace
                .iter()
                .all(|r| r.instruction == Instruction::L2 && r.address >= lo && r.address < hi));
        } else {
            assert!(trace.is_empty(), "no hints, no prefetches");
        }
    }
}

/// On grid data nothing rounds (`lookahead_ivf::check`): the kernels the GPU runs, here on
/// the emulator, must return the CPU reference's distances and ids exactly, as the GPU tests
/// require, with every launch shape, the small batches' plan and the GPU-driven pull.
#[test]
fn on_grid_data_the_search_is_the_cpu_reference_exactly() {
    let seed = fresh_seed();
    let emu = Emulator::new();
    // Dimension 16: a multiple of 4, so the scan takes the quad loads it takes at the GPU
    // tests' dimension 64; 21: the loads one float at a time into the same lane layout.
    for (dim, points) in [(16, 3000), (21, 1500)] {
        let f = fixture_of(seed, dim, points, true);
        let k = ivf_kernels::K;
        let want: Vec<_> = (0..f.queries.len())
            .map(|q| cpu::search(&f.layout, &f.lists, f.queries.row(q), 4, k))
            .collect();
        let shapes = [
            EmulatedParams::default(),
            EmulatedParams {
                chunk_rows: 7,
                scan_blocks: 3,
                merge_sms: 1000,
                ..EmulatedParams::default()
            },
            EmulatedParams {
                pair_plan: true,
                merge_sms: 1000,
                ..EmulatedParams::default()
            },
            EmulatedParams {
                pull: true,
                copy_every: 2,
                ..EmulatedParams::default()
            },
        ];
        for params in shapes {
            let got = without_queue(&emu, &f, params);
            let differ = check::top_k_mismatches(&got.dist, &got.ids, &want, k);
            assert!(differ.is_empty(), "dim {dim}, {params:?}: {differ:?}");
        }
    }
}

#[test]
fn chunk_sizes_and_grid_shapes_give_the_same_answer() {
    let f = fixture(fresh_seed(), 16);
    let emu = Emulator::new();
    let base = without_queue(&emu, &f, EmulatedParams::default());
    check_against_cpu(&f, &base, 4, "chunk 64");
    // merge_sms 1000: the merge gives each of the 40 queries a block of 8 warps.
    for (chunk_rows, scan_blocks, merge_sms) in [(7, 1, 0), (1000, 3, 1000), (33, 9, 1000)] {
        let params = EmulatedParams {
            chunk_rows,
            scan_blocks,
            merge_sms,
            ..EmulatedParams::default()
        };
        let got = without_queue(&emu, &f, params);
        assert_eq!(
            got.ids,
            base.ids,
            "chunk {chunk_rows}, {scan_blocks} blocks, merge per block {}",
            merge_sms > 0
        );
        assert_eq!(got.dist, base.dist);
        assert_eq!(got.probed, base.probed);
    }
    // The small batches' plan, pair by pair, with small and whole-list items.
    for chunk_rows in [7, 64, 1000] {
        let params = EmulatedParams {
            chunk_rows,
            merge_sms: 1000,
            pair_plan: true,
            ..EmulatedParams::default()
        };
        let got = without_queue(&emu, &f, params);
        assert_eq!(got.ids, base.ids, "pair plan, chunk {chunk_rows}");
        assert_eq!(got.dist, base.dist, "pair plan, chunk {chunk_rows}");
    }
}

/// The tiled scan (bounds from tiles of dot products, then exact distances only where a
/// bound can beat the `K`-th) returns the warp scan's neighbours bit for bit, on random
/// data: with more queries on a list than one tile holds, a dimension that leaves a partial
/// k-tile, chunks that leave partial row tiles, and launches that split a list's items.
/// Every bound is checked against its distance on the way (`emulated::search`).
#[test]
fn tiles_give_the_warp_scans_answer_bit_for_bit() {
    let seed = fresh_seed();
    let mut f = fixture(seed, 20);
    let spec = Clusters {
        dim: 20,
        clusters: 24,
        spread: 4.0,
        sigma: 1.0,
        seed,
    };
    // 150 queries, 4 probes each, over 24 lists: some list has more than 32 pairs.
    f.queries = spec.points(150, 3, None);
    let emu = Emulator::new();
    for (chunk_rows, piece) in [(64, usize::MAX), (33, 200), (1000, 3000)] {
        let params = EmulatedParams {
            chunk_rows,
            ..EmulatedParams::default()
        };
        let warp = without_queue(&emu, &f, params);
        let tiles = EmulatedParams {
            tiles: Some(piece),
            ..params
        };
        let got = without_queue(&emu, &f, tiles);
        let what = format!("chunk {chunk_rows}, at most {piece} bounds per launch");
        assert_eq!(got.ids, warp.ids, "{what}");
        assert_eq!(got.dist, warp.dist, "{what}");
        check_against_cpu(&f, &got, params.nprobe, &what);
    }
}

/// The GPU-driven path with the CPU playing the GPU: the plan kernel asks a host ring for
/// every probed list, a host service marks them ready, the scan waits for them; the second
/// search finds them still resident and asks for nothing; after `forget_resident` it asks
/// again. Results never change.
#[test]
fn gpu_driven_requests_ask_for_exactly_the_probed_lists() {
    let f = fixture(fresh_seed(), 16);
    let emu = Emulator::new();
    let nlist = f.layout.nlist() as u32;
    let ring = Arc::new(RequestRing::in_host_memory(64, nlist));
    let service = PrefetchService::start_on_host(
        ring.clone(),
        ServiceConfig {
            threads: 2,
            poll_interval: Duration::from_micros(50),
            ..ServiceConfig::default()
        },
        Duration::ZERO,
    )
    .unwrap();
    let params = EmulatedParams::default();
    let plain = without_queue(&emu, &f, params);
    let search = || {
        emulated::search(
            &emu,
            &f.layout,
            &f.lists,
            &f.queries,
            params,
            ring.queue(Duration::from_secs(5)),
        )
        .unwrap()
    };
    let first = search();
    assert_eq!(
        first.wanted, first.probed,
        "cold: every probed list is asked for"
    );
    assert_eq!(first.ids, plain.ids);
    let second = search();
    assert!(
        second.wanted.is_empty(),
        "warm: {:?} asked again",
        second.wanted
    );
    assert_eq!(second.ids, plain.ids);
    ring.forget_resident();
    let third = search();
    assert_eq!(
        third.wanted, third.probed,
        "after forget_resident everything is asked again"
    );
    assert_eq!(third.ids, plain.ids);
    let report = service.stop();
    assert_eq!(
        report.requests as usize,
        first.wanted.len() + third.wanted.len(),
        "every request reached the service"
    );
    assert_eq!(report.failed, 0);
}

/// A ring of one slot: the plan claims what fits (one list) and marks the rest "go ahead";
/// the scan waits for nothing it cannot get, and the answer is the same.
#[test]
fn a_ring_too_small_for_the_plan_falls_back_without_changing_results() {
    let f = fixture(fresh_seed(), 16);
    let emu = Emulator::new();
    let ring = Arc::new(RequestRing::in_host_memory(1, f.layout.nlist() as u32));
    // No service at all: the one queued request is never served, so its list's wait times
    // out (a short bound), and every other list goes ahead at once.
    let params = EmulatedParams::default();
    let plain = without_queue(&emu, &f, params);
    let got = emulated::search(
        &emu,
        &f.layout,
        &f.lists,
        &f.queries,
        params,
        ring.queue(Duration::from_millis(20)),
    )
    .unwrap();
    assert_eq!(got.wanted, got.probed);
    assert_eq!(got.ids, plain.ids);
    assert_eq!(
        ring.drain(100).len(),
        1,
        "exactly one request fit in the ring"
    );
}

/// The GPU-driven pull path: the blocks on every `copy_every`-th SM (in the emulator, every
/// `copy_every`-th block) and block 0's first warp copy the probed lists into a fresh cache,
/// chunk by chunk, and every warp then waits per list and scans the copy. Same neighbours as
/// the plain scan; every probed list copied and read from the cache; the cache equal to the
/// lists. One block where one warp copies while seven wait (the waits must let it run), every
/// warp copying, half the blocks copying, one copying block and two waiting ones, and
/// unaligned rows (dim 21: the
/// 4-byte copy path) next to aligned, multi-chunk lists (dim 128: 16-byte loads, lists of
/// more than one 64 KiB chunk).
#[test]
fn pulled_lists_give_the_same_answer() {
    let seed = fresh_seed();
    for (dim, points) in [(21, 3000), (128, 4000)] {
        let f = fixture_of(seed, dim, points, false);
        let emu = Emulator::new();
        let base = without_queue(&emu, &f, EmulatedParams::default());
        check_against_cpu(&f, &base, 4, &format!("dim {dim}"));
        let nonempty: Vec<u32> = base
            .probed
            .iter()
            .copied()
            .filter(|&l| f.layout.list_len(l as usize) > 0)
            .collect();
        if dim == 128 {
            assert!(
                nonempty.iter().any(|&l| f.layout.list_bytes(l as usize)
                    > lookahead_device::uvm::pull::CHUNK_BYTES as u64),
                "a list of several copy chunks"
            );
        }
        for (copy_every, scan_blocks) in [(0, 1), (1, 3), (2, 4), (64, 3)] {
            let params = EmulatedParams {
                pull: true,
                copy_every,
                scan_blocks,
                ..EmulatedParams::default()
            };
            let what = format!("dim {dim}, copy on every {copy_every}th SM, {scan_blocks} blocks");
            let got = emulated::search(
                &emu,
                &f.layout,
                &f.lists,
                &f.queries,
                params,
                RingQueue::disabled(),
            )
            .unwrap();
            assert_eq!(got.ids, base.ids, "{what}");
            assert_eq!(got.wanted, nonempty, "every probed list is copied: {what}");
            assert_eq!(
                got.from_cache,
                nonempty.len(),
                "read from the cache: {what}"
            );
            assert!(got.cache_matches, "the cache holds the lists: {what}");
        }
    }
}

/// The coarse step split into slices (the grid's `y`) and merged by `coarse_merge` gives the
/// one-slice probes, for several slice counts, nprobe values and query counts; and the
/// probes are the CPU reference's nearest centroids, from aligned centroids (vector loads)
/// and unaligned ones, with a dimension that is not a multiple of 4 (padded quads); sliced,
/// with 1, 3 and 4 queries per block.
#[test]
fn sliced_coarse_steps_give_the_same_probes() {
    use ivf_kernels::{coarse, coarse_config, coarse_grid, coarse_merge, CoarseShape};
    use lookahead::launch::LaunchConfig;
    let seed = fresh_seed();
    println!("seed {seed}");
    // 700 centroids: slices of 256 (a block's threads) apart, so up to 3 slices hold some.
    let (dim, nlist) = (13usize, 700usize);
    let spec = Clusters {
        dim,
        clusters: 50,
        spread: 4.0,
        sigma: 1.0,
        seed,
    };
    let centroids = spec.points(nlist, 0, None).data;
    let all_queries = spec.points(40, 1, None);
    let centroids_q = lookahead_ivf::index::interleave_quads(&centroids, dim);
    // The same floats 4 bytes past a 16-byte boundary.
    let mut shifted = vec![0.0f32; centroids_q.len() + 4];
    let skip = 1 + (4 - shifted.as_ptr() as usize / 4 % 4) % 4;
    shifted[skip..skip + centroids_q.len()].copy_from_slice(&centroids_q);
    let unaligned = &shifted[skip..skip + centroids_q.len()];
    assert_ne!(unaligned.as_ptr() as usize % 16, 0);
    let emu = Emulator::new();
    for nq in [1usize, 5, 40] {
        let queries = &all_queries.data[..nq * dim];
        // Past 32 probes each warp's list spills into its lanes' second entries.
        for nprobe in [1usize, 3, 8, 40, 64] {
            let shape = CoarseShape {
                dim: dim as u32,
                nlist: nlist as u32,
                nprobe: nprobe as u32,
                per_block: 0,
            };
            let mut one = vec![u32::MAX; nq * nprobe];
            coarse::launch(
                &emu,
                coarse_config(nq),
                queries,
                &centroids_q,
                shape,
                &mut one,
                &mut Vec::new(),
            )
            .unwrap();
            for q in 0..nq {
                let want = cpu::nearest(&centroids, dim, all_queries.row(q), nprobe);
                assert_eq!(
                    &one[q * nprobe..(q + 1) * nprobe],
                    &want[..],
                    "query {q}, nprobe {nprobe}"
                );
            }
            let mut from_unaligned = vec![u32::MAX; nq * nprobe];
            let cfg = coarse_config(nq);
            coarse::launch(
                &emu,
                cfg,
                queries,
                unaligned,
                shape,
                &mut from_unaligned,
                &mut Vec::new(),
            )
            .unwrap();
            assert_eq!(
                from_unaligned, one,
                "unaligned, {nq} queries, nprobe {nprobe}"
            );
            for (slices, per_block) in [(2usize, 1usize), (3, 3), (7, 4), (7, 1)] {
                let shape = CoarseShape {
                    per_block: per_block as u32,
                    ..shape
                };
                let mut partial = vec![u32::MAX; nq * nprobe * slices];
                let cfg = coarse_grid(nq, per_block, slices);
                let mut dist = vec![f32::NAN; nq * nprobe * slices];
                coarse::launch(
                    &emu,
                    cfg,
                    queries,
                    &centroids_q,
                    shape,
                    &mut partial,
                    &mut dist,
                )
                .unwrap();
                let mut probes = vec![u32::MAX; nq * nprobe];
                let merge_cfg = LaunchConfig::for_len(nq * 32, ivf_kernels::COARSE_THREADS);
                coarse_merge::launch(&emu, merge_cfg, &dist, &partial, shape.nprobe, &mut probes)
                    .unwrap();
                assert_eq!(
                    probes, one,
                    "{nq} queries, nprobe {nprobe}, {slices} slices of {per_block} per block"
                );
            }
        }
    }
}

/// The merge alone, a block per query and a warp per query, against sorting every candidate
/// on the CPU: random lists, lists all at one distance (more candidates within the bound
/// than the block ranks, so it merges lists instead), short lists padded with empty places,
/// fewer candidates than `K`, and the same candidate twice.
#[test]
fn merge_gives_each_querys_nearest_candidates() {
    use ivf_kernels::{merge, merge_config, K};
    use rand::{Rng, SeedableRng};
    let seed = fresh_seed();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let emu = Emulator::new();
    let nprobe = 3;
    // (lists per pair, distances drawn from 0..spread, real entries per list)
    for (lists, spread, real) in [(40usize, 1000u32, K), (60, 1, K), (5, 50, 4), (1, 9, 3)] {
        let nq = 4;
        let pair_cand_off: Vec<u32> = (0..=nq * nprobe).map(|p| (p * lists) as u32).collect();
        let total = nq * nprobe * lists;
        let (mut dist, mut ids) = (vec![f32::INFINITY; total * K], vec![u32::MAX; total * K]);
        for l in 0..total {
            let mut entries: Vec<(f32, u32)> = (0..real)
                .map(|_| {
                    (
                        rng.gen_range(0..spread) as f32,
                        rng.gen_range(0..1u32 << 20),
                    )
                })
                .collect();
            if l % 7 == 1 && l > 0 {
                entries[0] = (dist[(l - 1) * K], ids[(l - 1) * K]); // a repeat
            }
            entries.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for (r, (d, i)) in entries.into_iter().enumerate() {
                (dist[l * K + r], ids[l * K + r]) = (d, i);
            }
        }
        for sms in [0usize, 100] {
            let (cfg, shape) = merge_config(nq, nprobe, sms);
            let (mut out_d, mut out_i) = (vec![f32::NAN; nq * K], vec![0u32; nq * K]);
            merge::launch(
                &emu,
                cfg,
                &dist,
                &ids,
                &pair_cand_off,
                shape,
                &mut out_d,
                &mut out_i,
            )
            .unwrap();
            for q in 0..nq {
                let span = q * nprobe * lists * K..(q + 1) * nprobe * lists * K;
                let mut want: Vec<(f32, u32)> = span
                    .map(|c| (dist[c], ids[c]))
                    .filter(|&(_, i)| i != u32::MAX)
                    .collect();
                want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                want.resize(K.max(want.len()), (f32::INFINITY, u32::MAX));
                let got: Vec<(f32, u32)> = (0..K)
                    .map(|j| (out_d[q * K + j], out_i[q * K + j]))
                    .collect();
                assert_eq!(
                    got,
                    want[..K],
                    "{lists} lists of {real}, spread {spread}, sms {sms}, query {q}"
                );
            }
        }
    }
}

/// `plan_pairs` over more pairs than its block has threads (two rounds): each pair's
/// candidate offset is the prefix sum of its list's chunks, and item `pair_cand_off[p] + c`
/// is chunk `c` of pair `p`, for every chunk of every pair.
#[test]
fn pair_plans_number_every_chunk_of_every_pair() {
    use ivf_kernels::{plan_pairs, IndexArgs, PairPlanOutArgs, PLAN_THREADS};
    use lookahead::launch::LaunchConfig;
    use rand::{Rng, SeedableRng};
    let seed = fresh_seed();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (nlist, pairs, chunk_rows, dim) = (50usize, 1500usize, 16u32, 1usize);
    let mut offsets = vec![0u64];
    for _ in 0..nlist {
        let len = rng.gen_range(0..200u64);
        offsets.push(offsets.last().unwrap() + len);
    }
    let rows = *offsets.last().unwrap() as usize;
    let (vectors, ids) = (vec![0.0f32; rows * dim], vec![0u32; rows]);
    let probes: Vec<u32> = (0..pairs).map(|_| rng.gen_range(0..nlist as u32)).collect();
    let chunks = |p: usize| {
        let l = probes[p] as usize;
        ((offsets[l + 1] - offsets[l]) as usize).div_ceil(chunk_rows as usize)
    };
    let items: usize = (0..pairs).map(chunks).sum();
    let mut pair_cand_off = vec![u32::MAX; pairs + 1];
    let (mut item_pair, mut item_chunk) = (vec![u32::MAX; items], vec![u32::MAX; items]);
    let mut totals = vec![u32::MAX; 4];
    let index = IndexArgs {
        vectors: &vectors,
        offsets: &offsets,
        ids: &ids,
        dim: dim as u32,
        chunk_rows,
    };
    let out = PairPlanOutArgs {
        pair_cand_off: &mut pair_cand_off,
        item_pair: &mut item_pair,
        item_chunk: &mut item_chunk,
        totals: &mut totals,
    };
    let cfg = LaunchConfig::new((1, 1, 1), (PLAN_THREADS, 1, 1));
    plan_pairs::launch(&Emulator::new(), cfg, &probes, index, out).unwrap();
    assert_eq!(totals, [0, items as u32, 0, 0]);
    let mut first = 0;
    for (p, &offset) in pair_cand_off[..pairs].iter().enumerate() {
        assert_eq!(offset as usize, first, "pair {p}");
        for c in 0..chunks(p) {
            assert_eq!(
                (item_pair[first + c], item_chunk[first + c]),
                (p as u32, c as u32)
            );
        }
        first += chunks(p);
    }
    assert_eq!(pair_cand_off[pairs] as usize, items);
}
