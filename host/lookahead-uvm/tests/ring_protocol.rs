//! The request-ring protocol on the CPU: producers are host threads running the same code
//! kernels run (`lookahead_device::requests`), the consumer is the real service on a host
//! ring. No GPU needed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lookahead::launch::HostMemory;
use lookahead_device::uvm::requests::{Readiness, RequestQueue, Requested, FALLBACK_BIT};
use lookahead_uvm::{PrefetchService, Request, RequestRing, RingQueue, ServiceConfig};

fn config(threads: usize) -> ServiceConfig {
    ServiceConfig {
        threads,
        poll_interval: Duration::from_micros(50),
        ..ServiceConfig::default()
    }
}

/// Waits (bounded) until every flag in `flags` holds `gen` or `gen | FALLBACK_BIT`.
fn settle(ring: &RequestRing<HostMemory>, flags: std::ops::Range<u32>, gen: u32) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let values: Vec<u32> = flags
            .clone()
            .map(|f| ring.ready_value(f).unwrap())
            .collect();
        if values.iter().all(|&v| v == gen || v == gen | FALLBACK_BIT) || Instant::now() > deadline
        {
            return values;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn one_producer_wraps_around_a_small_ring_without_loss() {
    let ring = Arc::new(RequestRing::in_host_memory(4, 1000));
    let service = PrefetchService::start_on_host(ring.clone(), config(1), Duration::ZERO).unwrap();
    let q = ring.queue(Duration::from_millis(200));
    let mut queued = 0;
    for flag in 0..1000u32 {
        match q.request(flag, (flag as usize * 4096) as *const u8, 4096) {
            Requested::Queued => queued += 1,
            Requested::Fallback => {}
            Requested::AlreadyRequested => panic!("flag {flag} is new"),
        }
        // Like a kernel consuming in order: wait for what it asked for, so the ring
        // cycles through its 4 slots 250 times.
        assert_ne!(q.wait_ready(flag), Readiness::TimedOut, "flag {flag}");
    }
    let values = settle(&ring, 0..1000, q.generation());
    let report = service.stop();
    assert_eq!(
        queued, 1000,
        "the ring wrapped: all 1000 went through 4 slots"
    );
    assert_eq!(
        report.requests, queued,
        "every queued request reached the host"
    );
    assert_eq!(report.completed, queued);
    let arrived = values.iter().filter(|&&v| v == q.generation()).count() as u64;
    let fell_back = values
        .iter()
        .filter(|&&v| v == q.generation() | FALLBACK_BIT)
        .count() as u64;
    assert_eq!(arrived, queued);
    assert_eq!(arrived + fell_back, 1000, "no request lost: {values:?}");
}

/// Producers and requests of [`many_producers`]; each producer has one request in flight
/// at a time, so at most this many of the ring's 16 slots are ever taken.
const PRODUCERS: u32 = 8;
const PER_PRODUCER: u32 = 500;

/// What the host consumer saw and the producers were told.
struct Served {
    /// Requests the producers were told were queued.
    queued: u64,
    /// Every request the consumer took from the ring, in the order it took them.
    drained: Vec<Request>,
}

/// How long a producer of the many-producers tests waits for a free slot before its request
/// falls back. The host drains the 16 slots continuously, so no request should fall back,
/// but on a loaded two-core machine a producer thread can wait half a second for a core (one
/// of 4,000 requests fell back with that bound): a fall-back after 10 s is a stall.
const DRAINED_WAIT: Duration = Duration::from_secs(10);

/// 8 producers (host threads running the kernels' code) each request 500 ranges on `q`,
/// waiting for each before the next, as a kernel does; a consumer thread drains `ring` (when
/// there is one), records each request in order and marks its flag arrived.
fn many_producers(ring: Option<&RequestRing<HostMemory>>, q: &RequestQueue) -> Served {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let consumer = scope.spawn(|| {
            let mut drained = Vec::new();
            let Some(ring) = ring else {
                return drained;
            };
            loop {
                let finished = done.load(std::sync::atomic::Ordering::Acquire);
                let batch = ring.drain(64);
                for r in &batch {
                    q.mark_arrived(r.flag);
                }
                drained.extend(batch);
                if finished {
                    return drained;
                }
                std::thread::yield_now();
            }
        });
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|t| {
                scope.spawn(move || {
                    let mut queued = 0u64;
                    for i in 0..PER_PRODUCER {
                        let flag = t * PER_PRODUCER + i;
                        if q.request(flag, (flag as usize * 64) as *const u8, 64)
                            == Requested::Queued
                        {
                            queued += 1;
                        }
                        let _ = q.wait_ready(flag); // bounded
                    }
                    queued
                })
            })
            .collect();
        let queued = producers.into_iter().map(|p| p.join().unwrap()).sum();
        done.store(true, std::sync::atomic::Ordering::Release);
        Served {
            queued,
            drained: consumer.join().unwrap(),
        }
    })
}

/// The ring's promises for [`many_producers`]: every request queued (no producer ever finds
/// the ring full: at most 8 of its 16 slots are taken at once), each reaching the host once,
/// intact (its own address and length, the queue's generation), and each producer's requests
/// in the order it made them.
fn check_served(served: &Served, generation: u32) -> Result<(), String> {
    let total = (PRODUCERS * PER_PRODUCER) as u64;
    if served.queued != total {
        return Err(format!(
            "{} of {total} requests queued: the rest fell back",
            served.queued
        ));
    }
    if served.drained.len() as u64 != total {
        return Err(format!(
            "the host took {} requests, {total} were queued",
            served.drained.len()
        ));
    }
    let mut next = vec![0u32; PRODUCERS as usize];
    for r in &served.drained {
        let intact = r.ptr == r.flag as u64 * 64 && r.bytes == 64 && r.generation == generation;
        if !intact || r.flag >= PRODUCERS * PER_PRODUCER {
            return Err(format!("a torn or foreign request: {r:?}"));
        }
        let (t, i) = ((r.flag / PER_PRODUCER) as usize, r.flag % PER_PRODUCER);
        if i != next[t] {
            return Err(format!(
                "producer {t}'s request {i} reached the host where {} was due",
                next[t]
            ));
        }
        next[t] += 1;
    }
    Ok(())
}

#[test]
fn many_producers_lose_nothing_and_order_each_slot() {
    let ring = RequestRing::in_host_memory(16, PRODUCERS * PER_PRODUCER);
    let q = ring.queue(DRAINED_WAIT);
    let served = many_producers(Some(&ring), &q);
    check_served(&served, q.generation()).unwrap();
    let values = settle(&ring, 0..PRODUCERS * PER_PRODUCER, q.generation());
    assert!(
        values.iter().all(|&v| v == q.generation()),
        "every flag arrived"
    );
}

/// The negative controls of [`check_served`]: a ring that sends every request to the fallback
/// (a disabled queue) fails it, and so do a drained log with two of one producer's requests
/// swapped, and one with a request taken twice.
#[test]
fn the_ring_check_fails_a_ring_that_falls_back_reorders_or_repeats() {
    let all_fall_back = many_producers(None, &RingQueue::<HostMemory>::disabled());
    let e = check_served(&all_fall_back, 0).unwrap_err();
    assert!(e.starts_with("0 of 4000 requests queued"), "{e}");

    let ring = RequestRing::in_host_memory(16, PRODUCERS * PER_PRODUCER);
    let q = ring.queue(DRAINED_WAIT);
    let served = many_producers(Some(&ring), &q);
    check_served(&served, q.generation()).unwrap();
    let mut swapped = Served {
        queued: served.queued,
        drained: served.drained.clone(),
    };
    let first = swapped.drained[0].flag / PER_PRODUCER;
    let later = (1..swapped.drained.len())
        .find(|&k| swapped.drained[k].flag / PER_PRODUCER == first)
        .unwrap();
    swapped.drained.swap(0, later);
    let e = check_served(&swapped, q.generation()).unwrap_err();
    assert!(e.contains("reached the host where"), "{e}");

    let mut repeated = Served {
        queued: served.queued,
        drained: served.drained.clone(),
    };
    repeated.drained[1] = repeated.drained[0];
    assert!(check_served(&repeated, q.generation()).is_err());
}

#[test]
fn ring_of_one_with_a_service_that_is_never_started() {
    let ring = RequestRing::in_host_memory(1, 4);
    let q = ring.queue(Duration::from_millis(20));
    assert_eq!(q.request(0, 0x1000 as *const u8, 64), Requested::Queued);
    // The single slot is taken and nobody consumes it: the next request falls back...
    assert_eq!(q.request(1, 0x2000 as *const u8, 64), Requested::Fallback);
    // ...and its waiter goes ahead at once, on the fault path.
    let t = Instant::now();
    assert_eq!(q.wait_ready(1), Readiness::GoAhead);
    assert!(t.elapsed() < Duration::from_millis(15));
    // The queued one is never served: the wait is bounded, not a hang.
    let t = Instant::now();
    assert_eq!(q.wait_ready(0), Readiness::TimedOut);
    assert!(t.elapsed() >= Duration::from_millis(20) && t.elapsed() < Duration::from_secs(2));
    // Nothing was lost: the request is still in the ring for a service started later.
    assert_eq!(ring.pending().unwrap(), 1);
    let drained = ring.drain(10);
    assert_eq!(drained.len(), 1);
    assert_eq!(
        (drained[0].flag, drained[0].ptr, drained[0].bytes),
        (0, 0x1000, 64)
    );
    assert_eq!(ring.pending().unwrap(), 0);
}

#[test]
fn a_late_service_still_serves_what_waited_in_the_ring() {
    let ring = Arc::new(RequestRing::in_host_memory(8, 8));
    let q = ring.queue(Duration::from_secs(5));
    for f in 0..8 {
        assert_eq!(
            q.request(f, (0x1000 * (f + 1) as usize) as *const u8, 16),
            Requested::Queued
        );
    }
    let service = PrefetchService::start_on_host(ring.clone(), config(1), Duration::ZERO).unwrap();
    for f in 0..8 {
        assert_eq!(q.wait_ready(f), Readiness::Arrived);
    }
    assert_eq!(service.stop().completed, 8);
}

#[test]
fn a_slow_host_delays_but_never_blocks_the_kernel() {
    let ring = Arc::new(RequestRing::in_host_memory(64, 16));
    let service =
        PrefetchService::start_on_host(ring.clone(), config(1), Duration::from_millis(30)).unwrap();
    let impatient = ring.queue(Duration::from_millis(2));
    assert_eq!(
        impatient.request(0, 0x1000 as *const u8, 16),
        Requested::Queued
    );
    let t = Instant::now();
    assert_eq!(impatient.wait_ready(0), Readiness::TimedOut);
    assert!(t.elapsed() < Duration::from_millis(25));
    let patient = ring.queue(Duration::from_secs(5));
    assert_eq!(
        patient.request(1, 0x2000 as *const u8, 16),
        Requested::Queued
    );
    assert_eq!(patient.wait_ready(1), Readiness::Arrived);
    service.stop();
}

#[test]
fn stopping_hands_out_what_is_left() {
    let ring = Arc::new(RequestRing::in_host_memory(32, 32));
    let service =
        PrefetchService::start_on_host(ring.clone(), config(4), Duration::from_millis(1)).unwrap();
    let q = ring.queue(Duration::ZERO);
    for f in 0..32 {
        assert_eq!(
            q.request(f, (0x1000 * (f + 1) as usize) as *const u8, 16),
            Requested::Queued
        );
    }
    let report = service.stop();
    assert_eq!(report.requests, 32);
    assert_eq!(report.completed, 32);
    assert_eq!(
        settle(&ring, 0..32, q.generation()),
        vec![q.generation(); 32]
    );
}

#[test]
fn duplicates_generations_and_disabled_queues() {
    let ring = RequestRing::in_host_memory(8, 4);
    let g1 = ring.queue(Duration::ZERO);
    assert_eq!(g1.request(2, 0x10 as *const u8, 4), Requested::Queued);
    assert_eq!(
        g1.request(2, 0x10 as *const u8, 4),
        Requested::AlreadyRequested
    );
    // A new generation needs no reset of the flags.
    let g2 = ring.queue(Duration::ZERO);
    assert_ne!(g1.generation(), g2.generation());
    assert_eq!(g2.request(2, 0x10 as *const u8, 4), Requested::Queued);
    // Flags past the ring's count and a disabled queue fall back instead of failing.
    assert_eq!(g2.request(99, 0x10 as *const u8, 4), Requested::Fallback);
    let off = RequestQueue::disabled();
    assert_eq!(off.request(0, 0x10 as *const u8, 4), Requested::Fallback);
    assert_eq!(off.wait_ready(0), Readiness::GoAhead);
    // With wait 0 a kernel never waits.
    assert_eq!(g2.wait_ready(2), Readiness::GoAhead);
    assert_eq!(ring.drain(100).len(), 2);
    assert!(ring.ready_value(4).is_err());
}

/// A producer that knows every range it will read claims them with one batch; what does
/// not fit falls back at once, and the ring keeps wrapping batch after batch.
#[test]
fn batch_claims_take_what_fits_and_wrap_without_loss() {
    let ring = Arc::new(RequestRing::in_host_memory(8, 64));
    let q = ring.queue(Duration::from_secs(5));
    // 12 wanted, 8 slots: 8 granted, 4 fall back.
    let (first, granted) = q.claim(12);
    assert_eq!((first, granted), (0, 8));
    for k in 0..granted {
        // Publish out of order: the host still consumes in slot order.
        let k = granted - 1 - k;
        // SAFETY: slot `first + k` was claimed above and is published once.
        unsafe { q.publish(first + k, k, (0x1000 * (k as usize + 1)) as *const u8, 64) };
    }
    for flag in granted..12 {
        q.fall_back(flag);
        assert_eq!(q.wait_ready(flag), Readiness::GoAhead);
    }
    assert_eq!(q.claim(1), (8, 0), "full: nothing granted");
    let drained = ring.drain(100);
    assert_eq!(
        drained.iter().map(|r| r.flag).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    // Consumed slots are free again: the next batches wrap around the ring.
    let service = PrefetchService::start_on_host(ring.clone(), config(2), Duration::ZERO).unwrap();
    let mut next_flag = 12u32;
    while next_flag < 64 {
        let want = (64 - next_flag).min(5);
        let (first, granted) = q.claim(want);
        for k in 0..granted {
            // SAFETY: claimed just above, published once.
            unsafe {
                q.publish(
                    first + k,
                    next_flag + k,
                    (next_flag as usize * 64) as *const u8,
                    64,
                )
            };
        }
        for k in 0..granted {
            assert_eq!(q.wait_ready(next_flag + k), Readiness::Arrived);
        }
        next_flag += granted;
    }
    let report = service.stop();
    assert_eq!(
        report.requests,
        64 - 12,
        "every published request reached the host"
    );
}

/// Ranges that arrived in an earlier launch count as resident until the host says
/// otherwise; then the next launch asks again.
#[test]
fn residency_is_remembered_until_forgotten() {
    let ring = Arc::new(RequestRing::in_host_memory(16, 4));
    let service = PrefetchService::start_on_host(ring.clone(), config(1), Duration::ZERO).unwrap();
    let first = ring.queue(Duration::from_secs(5));
    assert!(!first.arrived_earlier(1), "nothing has arrived yet");
    assert_eq!(first.request(1, 0x1000 as *const u8, 64), Requested::Queued);
    assert_eq!(first.wait_ready(1), Readiness::Arrived);
    assert!(
        !first.arrived_earlier(1),
        "not earlier: this launch's own request"
    );
    let second = ring.queue(Duration::from_secs(5));
    assert!(second.arrived_earlier(1));
    assert!(!second.arrived_earlier(2), "never requested");
    second.mark_arrived(1);
    assert_eq!(second.wait_ready(1), Readiness::Arrived);
    assert_eq!(
        second.request(1, 0x1000 as *const u8, 64),
        Requested::AlreadyRequested,
        "marked flags are not asked for again in the same launch"
    );
    ring.forget_resident();
    let third = ring.queue(Duration::from_secs(5));
    assert!(!third.arrived_earlier(1), "forgotten");
    // A flag that fell back never counts as resident.
    third.fall_back(3);
    assert!(!ring.queue(Duration::ZERO).arrived_earlier(3));
    assert_eq!(service.stop().requests, 1);
}

/// A ring far larger than all requests together can never be full, so no request may fall
/// back, however producers and the consumer interleave. (Reading the head before the tail
/// once let a fast consumer overtake a stale head and made `head - tail` wrap to "full".)
#[test]
fn a_ring_that_cannot_fill_never_falls_back() {
    for round in 0..20 {
        let ring = Arc::new(RequestRing::in_host_memory(8192, 16 * 400));
        let service =
            PrefetchService::start_on_host(ring.clone(), config(4), Duration::ZERO).unwrap();
        let q = ring.queue(Duration::from_secs(5));
        let refused: usize = std::thread::scope(|scope| {
            let producers: Vec<_> = (0..16u32)
                .map(|t| {
                    scope.spawn(move || {
                        (0..400u32)
                            .filter(|i| {
                                let flag = t * 400 + i;
                                q.request(flag, (flag as usize * 64) as *const u8, 64)
                                    != Requested::Queued
                            })
                            .count()
                    })
                })
                .collect();
            producers.into_iter().map(|p| p.join().unwrap()).sum()
        });
        service.stop();
        assert_eq!(refused, 0, "round {round}: {refused} requests fell back");
    }
}
