//! The cache protocol on the CPU emulator (every kernel against a CPU reference, the
//! counters against the acquires made, the trace of hits, misses and evictions) and on a
//! GPU (fresh random inputs, the stress test). Row gathers and list scans are checked
//! against [`crate::reference`], which shares no code with the kernels; scans run on grid
//! inputs, so their minima are compared bit for bit.

extern crate std;
use std::collections::HashSet;
use std::vec::Vec;
use std::{format, vec};

use lookahead::emu::{Emulator, Instruction};
use lookahead::launch::{HostMemory, LaunchConfig};
use lookahead_cache::{CacheConfig, Eviction, HostCache};

use super::*;
use crate::reference;

/// Deterministic pseudo-random numbers (xorshift), `n` of them below `m`.
fn randoms(seed: u64, n: usize, m: usize) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % m as u64) as u32
        })
        .collect()
}

fn floats(seed: u64, n: usize) -> Vec<f32> {
    randoms(seed, n, 1 << 20)
        .iter()
        .map(|&v| v as f32 / (1 << 19) as f32 - 1.0)
        .collect()
}

/// `n` values on the grid of [`reference::grid_value`]: list scans over them are exact.
fn grid_floats(seed: u64, n: usize) -> Vec<f32> {
    (randoms(seed, n, 32).iter())
        .map(|&v| reference::grid_value(v as u64))
        .collect()
}

fn cfg(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig::new((blocks, 1, 1), (threads, 1, 1))
}

/// The acquires [`gather`] makes: per warp and round, the distinct pages its lanes name.
fn gather_acquires(idx: &[u32], page_elems: usize, warps: usize) -> u64 {
    let n = idx.len();
    let mut acquires = 0;
    for w in 0..warps {
        let mut base = w * 32;
        while base < n {
            let pages: HashSet<usize> = (0..32)
                .map(|l| idx[if base + l < n { base + l } else { base }] as usize / page_elems)
                .collect();
            acquires += pages.len() as u64;
            base += warps * 32;
        }
    }
    acquires
}

#[test]
fn gather_on_the_emulator_matches_the_cpu_and_counts_every_acquire() {
    let data = floats(1, 64 * 128);
    let idx = randoms(2, 3000, data.len());
    // 4 slots of 128 floats for 64 pages: most acquires miss and evict.
    let cache = HostCache::<f32, HostMemory>::on_emulator(&data, CacheConfig::new(512, 4)).unwrap();
    let emu = Emulator::new().workers(2).prefetch_trace(true);
    let mut out = vec![f32::NAN; idx.len()];
    gather::launch(&emu, cfg(2, 64), cache.view(), &idx, &mut out).unwrap();
    let want: Vec<f32> = idx.iter().map(|&i| data[i as usize]).collect();
    assert_eq!(out, want);
    let s = cache.stats().unwrap();
    assert_eq!(s.hits + s.misses, gather_acquires(&idx, 128, 4), "{s:?}");
    assert_eq!(
        s.evictions,
        s.misses - 4,
        "the first 4 misses fill empty slots: {s:?}"
    );
    assert_eq!(s.bytes_loaded, s.misses * 512);
    let trace = emu.take_prefetch_trace();
    let count =
        |f: fn(&Instruction) -> bool| trace.iter().filter(|r| f(&r.instruction)).count() as u64;
    assert_eq!(
        count(|i| matches!(i, Instruction::CacheMiss { .. })),
        s.misses
    );
    assert_eq!(count(|i| matches!(i, Instruction::CacheHit { .. })), s.hits);
    assert_eq!(
        count(|i| matches!(i, Instruction::CacheEvict { .. })),
        s.evictions
    );
    let resident = cache.resident().unwrap();
    assert_eq!(resident.len(), 4);
    assert!(resident.iter().all(Option::is_some));
}

/// One warp reading pages 0, 0, 0, 1, 2, 0, 1 through 2 slots: FIFO and CLOCK miss 5
/// times, a count of uses keeps the thrice-used page 0 and misses 4.
#[test]
fn eviction_policies_choose_their_victims() {
    let data = floats(9, 3 * 128);
    let pages = [0usize, 0, 0, 1, 2, 0, 1];
    let idx: Vec<u32> = pages
        .iter()
        .flat_map(|&p| [p as u32 * 128 + 5; 32])
        .collect();
    let want: Vec<f32> = idx.iter().map(|&i| data[i as usize]).collect();
    let cases = [
        (Eviction::Fifo, 5, [Some(1), Some(0)]),
        (Eviction::Clock, 5, [Some(1), Some(0)]),
        (Eviction::CountedClock { max: 4 }, 4, [Some(0), Some(1)]),
    ];
    for (eviction, misses, resident) in cases {
        let config = CacheConfig::new(512, 2).evicting(eviction);
        let cache = HostCache::<f32, HostMemory>::on_emulator(&data, config).unwrap();
        let mut out = vec![f32::NAN; idx.len()];
        gather::launch(&Emulator::new(), cfg(1, 32), cache.view(), &idx, &mut out).unwrap();
        assert_eq!(out, want, "{eviction}");
        let s = cache.stats().unwrap();
        assert_eq!(
            (s.misses, s.evictions),
            (misses, misses - 2),
            "{eviction}: {s:?}"
        );
        assert_eq!(cache.resident().unwrap(), resident, "{eviction}");
    }
}

/// The scan launchers by variant: through the cache, zero-copy, prefetching, and from the
/// table as it is ("device" memory); each returns `best` as float bits.
fn scan_on_emulator(
    emu: &Emulator,
    c: LaunchConfig,
    (cache, table): (&HostCache<f32, HostMemory>, &Vec<f32>),
    (list_off, queries, pair_list, pair_query): (&Vec<u32>, &Vec<f32>, &Vec<u32>, &Vec<u32>),
    variant: usize,
) -> Vec<u32> {
    let mut best = vec![f32::INFINITY.to_bits(); pair_list.len()];
    let a = (list_off, queries, pair_list, pair_query);
    match variant {
        0 => scan_lists::launch(emu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best),
        1 => scan_lists_zero_copy::launch(emu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best),
        2 => scan_lists_prefetched::launch(emu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best),
        _ => scan_lists_device::launch(emu, c, table, a.0, a.1, a.2, a.3, &mut best),
    }
    .unwrap();
    best
}

/// A table of 40 rows on the grid, 70 rows picked from it, and 12 (list, query) pairs over
/// 5 lists (one empty) of it, with 3 queries: the emulator tests' gathers and scans.
struct Small {
    table: Vec<f32>,
    rows: Vec<u32>,
    list_off: Vec<u32>,
    queries: Vec<f32>,
    pair_list: Vec<u32>,
    pair_query: Vec<u32>,
}

fn small() -> Small {
    let rows_n = 40;
    let list_off = vec![0, 5, 5, 17, 30, rows_n as u32];
    Small {
        table: grid_floats(3, rows_n * DIM),
        rows: randoms(4, 70, rows_n),
        pair_list: randoms(6, 12, list_off.len() - 1),
        pair_query: randoms(7, 12, 3),
        queries: grid_floats(5, 3 * DIM),
        list_off,
    }
}

/// Rows and list scans through the cache, zero-copy and from "device" memory give the CPU
/// reference's rows and minima, bit for bit.
#[test]
fn rows_and_list_scans_match_the_cpu_on_the_emulator() {
    let Small {
        table,
        rows,
        list_off,
        queries,
        pair_list,
        pair_query,
    } = small();
    // Pages of 2 rows, 3 slots.
    let cache =
        HostCache::<f32, HostMemory>::on_emulator(&table, CacheConfig::new(1024, 3)).unwrap();
    let emu = Emulator::new().workers(2);
    let c = cfg(2, 64);
    let mut got = [
        vec![f32::NAN; rows.len() * DIM],
        vec![f32::NAN; rows.len() * DIM],
        vec![f32::NAN; rows.len() * DIM],
    ];
    let len = DIM as u32;
    gather_rows::launch(&emu, c, cache.view(), &rows, len, &mut got[0]).unwrap();
    gather_rows_zero_copy::launch(&emu, c, cache.view(), &rows, len, &mut got[1]).unwrap();
    gather_rows_device::launch(&emu, c, &table, &rows, len, &mut got[2]).unwrap();
    let want = reference::rows(&table, &rows, DIM);
    for (k, g) in got.iter().enumerate() {
        reference::check_rows(g, &want, DIM).unwrap_or_else(|e| panic!("gather {k}: {e}"));
    }
    // Whole pages (of 256 floats, the last one short) into scratch pages, no cache state.
    let before = cache.stats().unwrap();
    let picks = vec![4u32, 0, 19];
    let mut scratch = vec![f32::NAN; picks.len() * 256];
    copy_pages::launch(&emu, c, cache.view(), &picks, &mut scratch).unwrap();
    for (i, &pg) in picks.iter().enumerate() {
        let src = &table[pg as usize * 256..(pg as usize * 256 + 256).min(table.len())];
        assert_eq!(&scratch[i * 256..i * 256 + src.len()], src, "page {pg}");
    }
    assert_eq!(cache.stats().unwrap(), before);
    // Rows of 160 floats: some cross pages (of 256 floats).
    let long_rows = randoms(8, 50, table.len() / 160);
    let mut long = vec![f32::NAN; long_rows.len() * 160];
    gather_rows::launch(&emu, c, cache.view(), &long_rows, 160, &mut long).unwrap();
    reference::check_rows(&long, &reference::rows(&table, &long_rows, 160), 160).unwrap();

    let want = reference::scans(&table, DIM, &list_off, &queries, (&pair_list, &pair_query));
    assert!(want.iter().any(|w| w.is_infinite()) && want.iter().any(|w| w.is_finite()));
    let inputs = (&list_off, &queries, &pair_list, &pair_query);
    for k in 0..4 {
        let best = scan_on_emulator(&emu, c, (&cache, &table), inputs, k);
        reference::check_scans(&best, &want).unwrap_or_else(|e| panic!("scan {k}: {e}"));
    }
}

/// The negative controls of the checks above, with the real kernels: list offsets off by
/// one (each list scanned one vector late), the query off by one and rows off by one are
/// caught, where checking scans only for "written" (`!= u32::MAX`) would pass them.
#[test]
fn scans_and_rows_off_by_one_fail_the_checks() {
    let s = small();
    let cache =
        HostCache::<f32, HostMemory>::on_emulator(&s.table, CacheConfig::new(1024, 3)).unwrap();
    let emu = Emulator::new().workers(2);
    let c = cfg(2, 64);
    let pairs = (&s.pair_list[..], &s.pair_query[..]);
    let want = reference::scans(&s.table, DIM, &s.list_off, &s.queries, pairs);
    let end = *s.list_off.last().unwrap();
    let late: Vec<u32> = s.list_off.iter().map(|&o| (o + 1).min(end)).collect();
    let next_query: Vec<u32> = s.pair_query.iter().map(|&q| (q + 1) % 3).collect();
    let planted = [
        ("offsets", late, s.pair_query.clone()),
        ("query", s.list_off.clone(), next_query),
    ];
    for (what, off, query) in &planted {
        // The planted bug changes the true answer for these inputs...
        let wrong = reference::scans(&s.table, DIM, off, &s.queries, (&s.pair_list, query));
        assert_ne!(wrong, want, "{what}");
        // ...and every variant's run with it fails the check.
        let inputs = (off, &s.queries, &s.pair_list, query);
        for k in 0..4 {
            let best = scan_on_emulator(&emu, c, (&cache, &s.table), inputs, k);
            assert!(best.iter().all(|&b| b != u32::MAX), "written");
            let e = reference::check_scans(&best, &want)
                .expect_err("an off-by-one scan passed the check");
            assert!(e.contains("pairs differ"), "{what}, scan {k}: {e}");
        }
    }
    let later: Vec<u32> = s.rows.iter().map(|&r| (r + 1) % 40).collect();
    let mut got = vec![f32::NAN; later.len() * DIM];
    gather_rows::launch(&emu, c, cache.view(), &later, DIM as u32, &mut got).unwrap();
    let want = reference::rows(&s.table, &s.rows, DIM);
    let e = reference::check_rows(&got, &want, DIM).expect_err("rows off by one passed");
    assert!(e.starts_with("70 of 70 rows differ"), "{e}");
}

#[test]
fn stress_on_the_emulator_reads_only_what_each_page_holds() {
    let data: Vec<u32> = (0..16 * 128).map(stress_value).collect();
    let cache = HostCache::<u32, HostMemory>::on_emulator(&data, CacheConfig::new(512, 2)).unwrap();
    let emu = Emulator::new().workers(2);
    let mut errors = vec![0u32];
    let params = Stress {
        rounds: 30,
        seed: 7,
    };
    stress::launch(&emu, cfg(2, 64), cache.view(), params, &mut errors).unwrap();
    assert_eq!(errors[0], 0);
    let s = cache.stats().unwrap();
    assert_eq!(
        s.hits + s.misses,
        4 * 30,
        "every acquire counted once: {s:?}"
    );
}

#[test]
fn every_kernel_is_an_entry_of_the_ptx() {
    for (arch, ptx) in PTX {
        for k in [
            "copy_pages",
            "gather_rows",
            "gather_rows_zero_copy",
            "gather_rows_device",
            "scan_lists",
            "scan_lists_zero_copy",
            "scan_lists_device",
            "gather",
            "stress",
        ] {
            assert!(ptx.contains(&format!(".entry {k}(")), "sm_{arch} lacks {k}");
        }
        // The miss path copies pages with 16-byte loads and publishes with atomics.
        let body = lookahead_builder::ptx::entry_body(ptx, "gather_rows").unwrap();
        assert!(
            body.contains("ld.global.cs.v4.u32") && body.contains("atom.cas.b32"),
            "sm_{arch}"
        );
    }
    lookahead_tests::assert_ptxas_accepts("host_cache_kernels", PTX);
}

// ---- on a GPU ----

fn gpu() -> lookahead::Gpu {
    lookahead::Gpu::new(0).expect("this test needs a CUDA GPU")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gather_on_a_gpu_matches_the_cpu_through_a_small_cache() {
    let gpu = gpu();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let data = floats(seed, 16 << 20); // 64 MiB
    let idx = randoms(seed ^ 0xabc, 1 << 20, data.len());
    let cache = HostCache::new(&gpu, &data, CacheConfig::new(64 << 10, 64)).unwrap();
    let s = gpu.stream();
    let d_idx = s.clone_htod(&idx).unwrap();
    let mut out = s.clone_htod(&vec![f32::NAN; idx.len()]).unwrap();
    for round in 0..3 {
        gather::launch(&gpu, cfg(264, BLOCK), cache.view(), &d_idx, &mut out).unwrap();
        gpu.synchronize().unwrap();
        let got = s.clone_dtoh(&out).unwrap();
        let wrong = got
            .iter()
            .zip(&idx)
            .filter(|(g, &i)| g.to_bits() != data[i as usize].to_bits())
            .count();
        assert_eq!(wrong, 0, "round {round}, seed {seed}");
    }
    let st = cache.stats().unwrap();
    assert!(st.misses > 0 && st.evictions > 0 && st.hits > 0, "{st:?}");
    assert_eq!(st.bytes_loaded, st.misses * (64 << 10), "{st:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn stress_on_a_gpu_8_slots_64_warps_10000_launches() {
    let gpu = gpu();
    let data: Vec<u32> = (0..256 * 1024).map(stress_value).collect(); // 256 pages of 4 KiB
    let cache = HostCache::new(&gpu, &data, CacheConfig::new(4096, 8)).unwrap();
    let mut errors = gpu.stream().clone_htod(&[0u32]).unwrap();
    let (launches, warps, rounds) = (10_000u32, 64u64, 8u32);
    let started = std::time::Instant::now();
    for k in 0..launches {
        let params = Stress {
            rounds,
            seed: k.wrapping_mul(7919),
        };
        stress::launch(&gpu, cfg(8, BLOCK), cache.view(), params, &mut errors).unwrap();
    }
    gpu.synchronize().unwrap();
    let errors = gpu.stream().clone_dtoh(&errors).unwrap()[0];
    let s = cache.stats().unwrap();
    std::println!(
        "stress: {launches} launches of {warps} warps x {rounds} pages in {:.2} s: {s:?}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(errors, 0, "elements read that were not their page's: {s:?}");
    assert_eq!(
        s.hits + s.misses,
        launches as u64 * warps * rounds as u64,
        "{s:?}"
    );
    assert_eq!(s.evictions, s.misses - 8, "{s:?}");
}

/// Every variant's rows and scan minima on a GPU equal the CPU reference's, every row and
/// every pair bit for bit (the table and queries on the grid: scans are exact).
#[test]
#[ignore = "needs a CUDA GPU"]
fn rows_and_scans_on_a_gpu_match_the_cpu() {
    let gpu = gpu();
    let s = gpu.stream();
    let rows_n = 1 << 16; // 32 MiB of rows
    let table = grid_floats(11, rows_n * DIM);
    let rows = randoms(12, 50_000, rows_n);
    let cache = HostCache::new(&gpu, &table, CacheConfig::new(64 << 10, 128)).unwrap();
    let (d_table, d_rows) = (s.clone_htod(&table).unwrap(), s.clone_htod(&rows).unwrap());
    let mut outs: Vec<_> = (0..3)
        .map(|_| s.clone_htod(&vec![f32::NAN; rows.len() * DIM]).unwrap())
        .collect();
    let c = cfg(264, BLOCK);
    let len = DIM as u32;
    gather_rows::launch(&gpu, c, cache.view(), &d_rows, len, &mut outs[0]).unwrap();
    gather_rows_zero_copy::launch(&gpu, c, cache.view(), &d_rows, len, &mut outs[1]).unwrap();
    gather_rows_device::launch(&gpu, c, &d_table, &d_rows, len, &mut outs[2]).unwrap();
    gpu.synchronize().unwrap();
    let want = reference::rows(&table, &rows, DIM);
    for (k, o) in outs.iter().enumerate() {
        reference::check_rows(&s.clone_dtoh(o).unwrap(), &want, DIM)
            .unwrap_or_else(|e| panic!("gather {k}: {e}"));
    }
    let list_off: Vec<u32> = (0..=512u32).map(|l| l * 128).collect(); // 512 lists of 128 vectors
    let queries = grid_floats(13, 16 * DIM);
    let (pair_list, pair_query) = (randoms(14, 2000, 512), randoms(15, 2000, 16));
    let up = |v: &Vec<u32>| s.clone_htod(v).unwrap();
    let (d_off, d_q, d_pl, d_pq) = (
        up(&list_off),
        s.clone_htod(&queries).unwrap(),
        up(&pair_list),
        up(&pair_query),
    );
    let mut best: Vec<_> = (0..4)
        .map(|_| up(&vec![u32::MAX; pair_list.len()]))
        .collect();
    let c = cfg(1024, BLOCK);
    let a = (&d_off, &d_q, &d_pl, &d_pq);
    scan_lists::launch(&gpu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best[0]).unwrap();
    scan_lists_zero_copy::launch(&gpu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best[1]).unwrap();
    scan_lists_prefetched::launch(&gpu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best[2]).unwrap();
    scan_lists_device::launch(&gpu, c, &d_table, a.0, a.1, a.2, a.3, &mut best[3]).unwrap();
    gpu.synchronize().unwrap();
    let want = reference::scans(&table, DIM, &list_off, &queries, (&pair_list, &pair_query));
    for (k, b) in best.iter().enumerate() {
        reference::check_scans(&s.clone_dtoh(b).unwrap(), &want)
            .unwrap_or_else(|e| panic!("scan {k}: {e}"));
    }
}

/// A small case of every cache kernel for compute-sanitizer (`scripts/sanitize-cache.sh`):
/// 4 slots of 4 KiB over 256 KiB, so the instrumented run misses, waits and evicts.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_case_for_the_sanitizer() {
    let gpu = gpu();
    let s = gpu.stream();
    let data = floats(21, 64 * 1024);
    let cache = HostCache::new(&gpu, &data, CacheConfig::new(4096, 4)).unwrap();
    let idx = randoms(22, 4096, data.len());
    let d_idx = s.clone_htod(&idx).unwrap();
    let mut out = s.clone_htod(&vec![f32::NAN; idx.len()]).unwrap();
    gather::launch(&gpu, cfg(8, BLOCK), cache.view(), &d_idx, &mut out).unwrap();
    let rows = randoms(23, 300, data.len() / DIM);
    let d_rows = s.clone_htod(&rows).unwrap();
    let mut out_rows = s.clone_htod(&vec![f32::NAN; rows.len() * DIM]).unwrap();
    let len = DIM as u32;
    gather_rows::launch(
        &gpu,
        cfg(8, BLOCK),
        cache.view(),
        &d_rows,
        len,
        &mut out_rows,
    )
    .unwrap();
    let stress_data: Vec<u32> = (0..64 * 1024).map(stress_value).collect();
    let stress_cache = HostCache::new(&gpu, &stress_data, CacheConfig::new(4096, 4)).unwrap();
    let mut errors = s.clone_htod(&[0u32]).unwrap();
    let params = Stress {
        rounds: 16,
        seed: 3,
    };
    stress::launch(
        &gpu,
        cfg(8, BLOCK),
        stress_cache.view(),
        params,
        &mut errors,
    )
    .unwrap();
    gpu.synchronize().unwrap();
    let got = s.clone_dtoh(&out).unwrap();
    assert!(got.iter().zip(&idx).all(|(g, &i)| *g == data[i as usize]));
    let got = s.clone_dtoh(&out_rows).unwrap();
    reference::check_rows(&got, &reference::rows(&data, &rows, DIM), DIM).unwrap();
    assert_eq!(s.clone_dtoh(&errors).unwrap()[0], 0);
}

/// `#[prefetch_next(cache = vecs, ..)]` prefetches the host memory two pages ahead, and only
/// of pages not in the cache.
#[test]
fn cache_prefetch_next_fetches_host_lines_of_absent_pages_ahead() {
    let table = floats(31, 64 * DIM); // 64 vectors, pages of 2 vectors: 32 pages
    let cache =
        HostCache::<f32, HostMemory>::on_emulator(&table, CacheConfig::new(1024, 64)).unwrap();
    let emu = Emulator::new().workers(1).prefetch_trace(true);
    let (off, q) = (vec![0u32, 64], floats(32, DIM));
    let (pl, pq) = (vec![0u32], vec![0u32]);
    let mut best = vec![u32::MAX];
    let c = cfg(1, 32);
    scan_lists_prefetched::launch(&emu, c, cache.view(), &off, &q, &pl, &pq, &mut best).unwrap();
    let trace = emu.take_prefetch_trace();
    let base = cache.data().as_ptr() as usize;
    let lines: Vec<usize> = (trace.iter())
        .filter(|r| r.instruction == Instruction::L2)
        .map(|r| r.address)
        .collect();
    // Pages 2..32 are prefetched (iterations 0..30 look 2 ahead), pages 0 and 1 are not
    // (a line may start up to 127 bytes before its page: host memory is not line-aligned).
    assert!(
        lines.iter().all(|&a| a + 128 > base + 2 * 1024),
        "a line of page 0 or 1"
    );
    for page in 2..32 {
        let (lo, hi) = (base + page * 1024, base + (page + 1) * 1024);
        assert!(lines.iter().any(|&a| a + 128 > lo && a < hi), "page {page}");
    }
    // A second launch finds every page cached: no prefetch at all.
    scan_lists_prefetched::launch(&emu, c, cache.view(), &off, &q, &pl, &pq, &mut best).unwrap();
    let again = emu.take_prefetch_trace();
    assert!(
        again.iter().all(|r| r.instruction != Instruction::L2),
        "{:?}",
        &again[..3]
    );
}
