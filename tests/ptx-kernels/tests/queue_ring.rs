//! `#[prefetch_next(queue = q)]` against the real request ring: the kernel
//! `pf_queue_lists` runs on the CPU emulator with a `lookahead_uvm::RequestRing` in host
//! memory, served by a `PrefetchService` on host threads. Every list is requested exactly
//! once and arrives before its iteration reads it; with a ring of one slot and no service,
//! the requests fall back or time out and the results are the same.

use std::sync::Arc;
use std::time::Duration;

use lookahead::emu::Emulator;
use lookahead::launch::{HostMemory, LaunchConfig};
use lookahead_device::uvm::requests::FALLBACK_BIT;
use lookahead_uvm::{PrefetchService, RequestRing, RingQueue, ServiceConfig};

struct Lists {
    offsets: Vec<u32>,
    lists: Vec<f32>,
    weights: Vec<f32>,
}

fn lists(n: usize) -> Lists {
    let mut offsets = vec![0u32];
    for l in 0..n {
        offsets.push(offsets[l] + 1 + (l as u32 * 7919) % 97);
    }
    let total = *offsets.last().unwrap() as usize;
    Lists {
        lists: (0..total).map(|i| (i % 13) as f32 - 6.0).collect(),
        weights: (0..n).map(|l| 1.0 + l as f32 / 8.0).collect(),
        offsets,
    }
}

fn check(d: &Lists, sums: &[f32]) {
    for (l, s) in sums.iter().enumerate() {
        let (a, b) = (d.offsets[l] as usize, d.offsets[l + 1] as usize);
        let want = d.lists[a..b].iter().sum::<f32>() * d.weights[l];
        assert_eq!(*s, want, "list {l}");
    }
}

fn launch(d: &Lists, queue: RingQueue<'_, HostMemory>) -> Vec<f32> {
    let n = d.weights.len();
    let mut sums = vec![f32::NAN; n];
    let cfg = LaunchConfig::new((4, 1, 1), (8, 1, 1)); // 32 threads, 2 lists each
    ptx_kernels::pf_queue_lists::launch(
        &Emulator::new().workers(2),
        cfg,
        &d.lists,
        &d.offsets,
        &d.weights,
        &mut sums,
        queue,
    )
    .unwrap();
    sums
}

#[test]
fn every_list_is_requested_once_with_exactly_its_bytes_and_arrives() {
    let n = 64;
    let d = lists(n);
    // Flag 2 l for list l (two targets per iteration); room for every request at once.
    let ring = Arc::new(RequestRing::in_host_memory(2 * n as u32, 2 * n as u32));
    let config = ServiceConfig {
        threads: 2,
        ..ServiceConfig::default()
    };
    let service = PrefetchService::start_on_host(ring.clone(), config, Duration::ZERO).unwrap();
    let queue = ring.queue(Duration::from_secs(10));
    let generation = queue.generation();
    let sums = launch(&d, queue);
    let report = service.stop();
    check(&d, &sums);
    assert_eq!(
        report.requests, n as u64,
        "one request per list: {report:?}"
    );
    let bytes: u64 = (0..n)
        .map(|l| 4 * (d.offsets[l + 1] - d.offsets[l]) as u64)
        .sum();
    assert_eq!(report.bytes, bytes, "exactly the lists' bytes");
    assert_eq!((report.completed, report.failed), (n as u64, 0));
    for l in 0..n as u32 {
        assert_eq!(
            ring.ready_value(2 * l).unwrap(),
            generation,
            "list {l} arrived"
        );
        assert_eq!(
            ring.ready_value(2 * l + 1).unwrap(),
            0,
            "flag {} unused",
            2 * l + 1
        );
    }
}

#[test]
fn a_one_slot_ring_with_no_service_changes_no_result() {
    let n = 40;
    let d = lists(n);
    let ring = RequestRing::in_host_memory(1, 2 * n as u32);
    let queue = ring.queue(Duration::from_millis(1));
    let generation = queue.generation();
    let sums = launch(&d, queue);
    check(&d, &sums);
    // One request took the only slot; the others fell back (their flags say "go ahead").
    let fell_back = (0..n as u32)
        .filter(|l| ring.ready_value(2 * l).unwrap() == generation | FALLBACK_BIT)
        .count();
    assert_eq!(fell_back, n - 1);
}
