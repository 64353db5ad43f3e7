//! The cache protocol on the CPU emulator (every kernel against a CPU reference, the
//! counters against the acquires made, the trace of hits, misses and evictions) and on a
//! GPU (fresh random inputs, the stress test).

extern crate std;
use std::collections::HashSet;
use std::vec::Vec;
use std::{format, vec};

use lookahead::emu::{Emulator, Instruction};
use lookahead::launch::{HostMemory, LaunchConfig};
use lookahead_cache::{CacheConfig, Eviction, HostCache};

use super::*;

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

/// Rows and list scans through the cache, zero-copy and from "device" memory agree.
#[test]
fn rows_and_list_scans_agree_with_their_baselines_on_the_emulator() {
    let rows_n = 40;
    let table = floats(3, rows_n * DIM);
    let rows = randoms(4, 70, rows_n);
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
    let want: Vec<f32> = rows
        .iter()
        .flat_map(|&r| table[r as usize * DIM..][..DIM].to_vec())
        .collect();
    for g in &got {
        assert_eq!(g, &want);
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
    let want_long: Vec<f32> = long_rows
        .iter()
        .flat_map(|&r| table[r as usize * 160..][..160].to_vec())
        .collect();
    assert_eq!(long, want_long);

    let list_off: Vec<u32> = vec![0, 5, 5, 17, 30, rows_n as u32];
    let queries = floats(5, 3 * DIM);
    let pair_list = randoms(6, 12, list_off.len() - 1);
    let pair_query = randoms(7, 12, 3);
    let want: Vec<f32> = (0..pair_list.len())
        .map(|p| {
            let (l, q) = (pair_list[p] as usize, pair_query[p] as usize);
            (list_off[l]..list_off[l + 1])
                .map(|v| {
                    (0..DIM)
                        .map(|d| (table[v as usize * DIM + d] - queries[q * DIM + d]).powi(2))
                        .sum::<f32>()
                })
                .fold(f32::INFINITY, f32::min)
        })
        .collect();
    let run = |k: usize| {
        let mut best = vec![f32::INFINITY.to_bits(); pair_list.len()];
        let a = (&list_off, &queries, &pair_list, &pair_query);
        match k {
            0 => scan_lists::launch(&emu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best),
            1 => scan_lists_zero_copy::launch(&emu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best),
            2 => {
                scan_lists_prefetched::launch(&emu, c, cache.view(), a.0, a.1, a.2, a.3, &mut best)
            }
            _ => scan_lists_device::launch(&emu, c, &table, a.0, a.1, a.2, a.3, &mut best),
        }
        .unwrap();
        best.iter()
            .map(|b| f32::from_bits(*b))
            .collect::<Vec<f32>>()
    };
    for k in 0..4 {
        for (g, w) in run(k).iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()) || (g.is_infinite() && w.is_infinite()),
                "variant {k}: {g} vs {w}"
            );
        }
    }
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

#[test]
#[ignore = "needs a CUDA GPU"]
fn rows_and_scans_on_a_gpu_agree_with_device_memory() {
    let gpu = gpu();
    let s = gpu.stream();
    let rows_n = 1 << 16; // 32 MiB of rows
    let table = floats(11, rows_n * DIM);
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
    let want = s.clone_dtoh(&outs[2]).unwrap();
    assert_eq!(want[..DIM], table[rows[0] as usize * DIM..][..DIM]);
    for o in &outs[..2] {
        assert_eq!(s.clone_dtoh(o).unwrap(), want);
    }
    let list_off: Vec<u32> = (0..=512u32).map(|l| l * 128).collect(); // 512 lists of 128 vectors
    let queries = floats(13, 16 * DIM);
    let (pair_list, pair_query) = (randoms(14, 2000, 512), randoms(15, 2000, 16));
    let up = |v: &Vec<u32>| s.clone_htod(v).unwrap();
    let (d_off, d_q, d_pl, d_pq) = (
        up(&list_off),
        s.clone_htod(&queries).unwrap(),
        up(&pair_list),
        up(&pair_query),
    );
    let mut best: Vec<_> = (0..3)
        .map(|_| up(&vec![u32::MAX; pair_list.len()]))
        .collect();
    let c = cfg(1024, BLOCK);
    scan_lists::launch(
        &gpu,
        c,
        cache.view(),
        &d_off,
        &d_q,
        &d_pl,
        &d_pq,
        &mut best[0],
    )
    .unwrap();
    scan_lists_zero_copy::launch(
        &gpu,
        c,
        cache.view(),
        &d_off,
        &d_q,
        &d_pl,
        &d_pq,
        &mut best[1],
    )
    .unwrap();
    scan_lists_device::launch(&gpu, c, &d_table, &d_off, &d_q, &d_pl, &d_pq, &mut best[2]).unwrap();
    gpu.synchronize().unwrap();
    let want = s.clone_dtoh(&best[2]).unwrap();
    assert!(want.iter().all(|b| *b != u32::MAX));
    for b in &best[..2] {
        assert_eq!(s.clone_dtoh(b).unwrap(), want);
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
    let mut out_rows = s.clone_htod(&vec![0f32; rows.len() * DIM]).unwrap();
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
    assert_eq!(got[..DIM], data[rows[0] as usize * DIM..][..DIM]);
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
