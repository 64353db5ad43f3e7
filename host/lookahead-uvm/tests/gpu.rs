//! GPU tests of lookahead-uvm. They need a CUDA GPU and fail (never pass) without one:
//! run them with `--ignored` on a GPU machine (`scripts/gpu-tests.sh`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use lookahead::untracked::{Untracked, UntrackedManaged, UntrackedMut};
use lookahead::{Gpu, ManagedBuffer};
use lookahead_uvm::{
    MachineProfile, PrefetchService, RequestRing, ServiceConfig, UvmKernels, WordRange,
};

fn gpu() -> Gpu {
    Gpu::new(0).expect("these tests need a CUDA GPU")
}

/// `ranges` ranges of `words` u32 each in one host-resident managed buffer, their CPU sums.
fn data(gpu: &Gpu, ranges: usize, words: usize) -> (ManagedBuffer<u32>, Vec<u32>) {
    let mut buf = ManagedBuffer::<u32>::zeroed(gpu, ranges * words).unwrap();
    let seed = Instant::now().elapsed().subsec_nanos() | 1;
    for (i, w) in buf.as_mut_slice().unwrap().iter_mut().enumerate() {
        *w = (i as u32).wrapping_mul(2654435761).wrapping_add(seed);
    }
    let host = buf.as_slice().unwrap();
    let sums = (0..ranges)
        .map(|r| {
            host[r * words..(r + 1) * words]
                .iter()
                .fold(0u32, |a, &b| a.wrapping_add(b))
        })
        .collect();
    (buf, sums)
}

/// Runs `request_and_sum` over the ranges and returns (sums, readiness codes).
fn run_sums(
    gpu: &Gpu,
    k: &UvmKernels,
    ring: &RequestRing,
    wait: Duration,
    buf: &ManagedBuffer<u32>,
    ranges: usize,
    words: usize,
) -> (Vec<u32>, Vec<u32>) {
    let stream = gpu.context().new_stream().unwrap();
    let spans: Vec<WordRange> = (0..ranges as u64)
        .map(|r| WordRange {
            first: r * words as u64,
            words: words as u64,
        })
        .collect();
    let spans = stream.clone_htod(&spans).unwrap();
    let mut sums = stream.alloc_zeros::<u32>(ranges).unwrap();
    let mut ready = stream.alloc_zeros::<u32>(ranges).unwrap();
    // Untracked arguments: the kernel waits for flags other streams write, so nothing (not
    // cudarc's use-tracking events either) may be queued behind it (see `lookahead::untracked`).
    k.request_and_sum(
        &stream,
        ring.queue(wait),
        &UntrackedManaged::new(buf),
        &Untracked::new(&spans, &stream),
        1,
        &mut UntrackedMut::new(&mut sums, &stream),
        &mut UntrackedMut::new(&mut ready, &stream),
        64,
    )
    .unwrap();
    stream.synchronize().unwrap();
    (
        stream.clone_dtoh(&sums).unwrap(),
        stream.clone_dtoh(&ready).unwrap(),
    )
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn probe_is_quick_and_measures_every_mechanism() {
    let gpu = gpu();
    let p = MachineProfile::probe(&gpu).unwrap();
    println!("{p:#?}");
    assert!(p.probe_s < 1.0, "the probe took {:.2} s", p.probe_s);
    for (name, v) in [
        ("fault", p.fault_gbps),
        ("bulk", p.bulk_prefetch_gbps),
        ("range", p.range_prefetch_gbps),
        ("remote", p.remote_gbps),
        ("device", p.device_gbps),
    ] {
        assert!(v.is_finite() && v > 0.1, "{name} rate {v}");
    }
    assert!(p.device_gbps > p.fault_gbps, "resident reads beat faults");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_driven_requests_arrive_and_never_change_results() {
    let gpu = gpu();
    let k = UvmKernels::load(&gpu).unwrap();
    let (ranges, words) = (96, 512 << 10); // 96 ranges of 2 MiB
                                           // With a running service: the ranges arrive by prefetch.
    let (buf, want) = data(&gpu, ranges, words);
    let ring = Arc::new(RequestRing::new(&gpu, 256, ranges as u32).unwrap());
    let service = PrefetchService::start(ring.clone(), ServiceConfig::default()).unwrap();
    let (sums, ready) = run_sums(&gpu, &k, &ring, Duration::from_secs(5), &buf, ranges, words);
    let report = service.stop();
    assert_eq!(sums, want);
    let arrived = ready.iter().filter(|&&r| r == 1).count();
    println!("served: {arrived}/{ranges} arrived by prefetch; {report:?}");
    // The ring (256 slots) holds all 96 requests, so none may fall back or time out.
    assert_eq!(arrived, ranges, "{ready:?}");
    assert_eq!(report.completed, report.requests);
    assert_eq!(report.failed, 0);
    drop(buf);

    // A service that is never started: every wait times out, results are the same.
    let (buf, want) = data(&gpu, ranges, words);
    let idle = RequestRing::new(&gpu, 256, ranges as u32).unwrap();
    let (sums, ready) = run_sums(
        &gpu,
        &k,
        &idle,
        Duration::from_millis(1),
        &buf,
        ranges,
        words,
    );
    assert_eq!(sums, want);
    // Each waiter timed out, or went ahead at once because its request fell back.
    assert!(ready.iter().all(|&r| r == 2 || r == 3), "{ready:?}");
    assert!(ready.contains(&3), "{ready:?}");
    drop(buf);

    // A ring of one slot with a service: most requests fall back, results are the same.
    let (buf, want) = data(&gpu, ranges, words);
    let tiny = Arc::new(RequestRing::new(&gpu, 1, ranges as u32).unwrap());
    let service = PrefetchService::start(tiny.clone(), ServiceConfig::default()).unwrap();
    let (sums, ready) = run_sums(&gpu, &k, &tiny, Duration::from_secs(5), &buf, ranges, words);
    service.stop();
    assert_eq!(sums, want);
    assert!(ready.iter().all(|&r| (1..=3).contains(&r)), "{ready:?}");
    println!(
        "ring of 1: {} arrived, {} went ahead",
        ready.iter().filter(|&&r| r == 1).count(),
        ready.iter().filter(|&&r| r == 2).count()
    );
}

/// One ring and service, `batches` launches over 8 ranges of 64 KiB with the pages sent
/// back to the host every 100 batches; checks every sum and that no request was lost.
fn soak_session(gpu: &Gpu, k: &UvmKernels, batches: usize) {
    let (ranges, words) = (8, 16 << 10);
    let (mut buf, want) = data(gpu, ranges, words);
    let ring = Arc::new(RequestRing::new(gpu, 16, ranges as u32).unwrap());
    let service = PrefetchService::start(
        ring.clone(),
        ServiceConfig {
            threads: 4,
            ..ServiceConfig::default()
        },
    )
    .unwrap();
    let started = Instant::now();
    for batch in 0..batches {
        if batch % 100 == 0 {
            // Send the pages back to the host now and then, so requests have work to do.
            buf.as_mut_slice().unwrap()[0] = buf.as_slice().unwrap()[0];
            buf.prefetch(lookahead::Location::Host, gpu.stream())
                .unwrap();
            gpu.synchronize().unwrap();
        }
        let wait = Duration::from_millis(500);
        let (sums, _) = run_sums(gpu, k, &ring, wait, &buf, ranges, words);
        assert_eq!(sums, want, "batch {batch}");
    }
    let report = service.stop();
    println!(
        "{batches} batches in {:.2} s: {report:?}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(report.completed, report.requests, "no request lost");
    assert_eq!(ring.pending().unwrap(), 0, "nothing left in the ring");
    assert!(
        report.requests as usize >= batches,
        "requests were made: {}",
        report.requests
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn soak_1000_batches_no_hang_no_loss_no_leak() {
    let gpu = gpu();
    let k = UvmKernels::load(&gpu).unwrap();
    // A first session outside the measurement: the driver keeps what it sets up on first use
    // (of the kernel, of a thread's streams) for the context's life, which is not a leak.
    soak_session(&gpu, &k, 1);
    gpu.synchronize().unwrap();
    let (free_before, _) = gpu.memory_info().unwrap();
    soak_session(&gpu, &k, 1000);
    gpu.synchronize().unwrap();
    let (free_after, _) = gpu.memory_info().unwrap();
    println!("free device memory: {free_before} before, {free_after} after");
    assert!(
        free_after + (4 << 20) >= free_before,
        "device memory back to its starting level: {free_before} -> {free_after}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pull_copy_moves_every_piece_over_the_mapping_and_counts_it() {
    let gpu = gpu();
    let k = UvmKernels::load(&gpu).unwrap();
    let stream = gpu.context().new_stream().unwrap();
    let words = 200_000;
    let (buf, _) = data(&gpu, 1, words);
    // Read over the interconnect, as the GPU-driven pull does (pages stay on the host).
    buf.advise(lookahead::Advice::SetAccessedBy(
        lookahead::Location::Device(gpu.ordinal()),
    ))
    .unwrap();
    // Aligned 64 KiB, unaligned start and length (the one-word path), 3 words, several
    // chunks' worth in one piece, and a piece that ends the buffer.
    let pieces: Vec<(u64, u64)> = vec![
        (0, 16_384),
        (16_385, 1_001),
        (40_000, 3),
        (50_000, 70_000),
        (words as u64 - 4_097, 4_097),
    ];
    let spans: Vec<WordRange> = (pieces.iter())
        .map(|&(first, words)| WordRange { first, words })
        .collect();
    let dp = stream.clone_htod(&spans).unwrap();
    let poison = 0xDEAD_BEEFu32;
    let mut dst = stream.clone_htod(&vec![poison; words]).unwrap();
    let mut next = stream.alloc_zeros::<u32>(1).unwrap();
    let mut counters = stream.alloc_zeros::<u32>(pieces.len()).unwrap();
    k.pull_copy(&stream, &buf, &mut dst, &dp, &mut next, &mut counters, 2)
        .unwrap();
    stream.synchronize().unwrap();
    let got = stream.clone_dtoh(&dst).unwrap();
    let src = buf.as_slice().unwrap();
    let mut inside = vec![false; words];
    for &(a, n) in &pieces {
        inside[a as usize..(a + n) as usize].fill(true);
    }
    for i in 0..words {
        let want = if inside[i] { src[i] } else { poison };
        assert_eq!(got[i], want, "word {i} (inside a piece: {})", inside[i]);
    }
    assert_eq!(
        stream.clone_dtoh(&counters).unwrap(),
        vec![1; pieces.len()],
        "each piece counted once"
    );
}
