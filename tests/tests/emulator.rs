//! The CPU emulator, in CI: every kernel of `demo-kernels` and the DSL test kernels run on
//! `lookahead::emu::Emulator` and are checked against a CPU reference on fresh random inputs;
//! the prefetch trace of each `#[prefetch_next]` form is checked against what iteration
//! `i + distance` reads; deadlocks, races and out-of-bounds indices are reported.
//! The seed of the random inputs is printed, so a failure can be replayed with
//! `LOOKAHEAD_SEED=<seed>`.
#![allow(clippy::needless_range_loop)] // element-by-element checks read best with indices

use lookahead::emu::{EmuError, Emulator, Instruction, PrefetchRecord};
use lookahead::launch::LaunchConfig;
use lookahead::Error;

/// SplitMix64: small, seeded, good enough for test inputs.
struct Rng(u64);

impl Rng {
    fn fresh(test: &str) -> Rng {
        let seed = std::env::var("LOOKAHEAD_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        println!("{test}: LOOKAHEAD_SEED={seed}");
        Rng(seed)
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0)
            .collect()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn emu() -> Emulator {
    Emulator::new()
}

fn close(a: f32, b: f32, tol: f32) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

#[test]
fn saxpy_matches_the_cpu() {
    let mut rng = Rng::fresh("saxpy");
    let n = 10_000 + rng.below(5000) as usize;
    let a = rng.f32s(1)[0] * 4.0;
    let x = rng.f32s(n);
    let y0 = rng.f32s(n);
    let mut y = y0.clone();
    demo_kernels::saxpy::launch(&emu(), LaunchConfig::for_len(n, 256), a, &x, &mut y).unwrap();
    for i in 0..n {
        assert_eq!(y[i], a * x[i] + y0[i], "element {i}");
    }
}

#[test]
fn reduce_sum_matches_the_cpu() {
    let mut rng = Rng::fresh("reduce_sum");
    let n = 50_000 + rng.below(10_000) as usize;
    // A sum exact in any order of additions: the kernel's must equal it bit for bit.
    let x = lookahead_bench::exact_sum::input(n, |k| rng.below(k as u64) as u32);
    let mut out = vec![0.0f32];
    let cfg = LaunchConfig::grid_stride(n, 256, 16);
    demo_kernels::reduce_sum::launch(&emu(), cfg, &x.values, &mut out).unwrap();
    let (ok, detail) = lookahead_bench::exact_sum::check(out[0], x.sum);
    assert!(ok, "{detail}");
}

#[test]
fn copies_with_every_prefetch_level_match_the_cpu() {
    let mut rng = Rng::fresh("copies");
    let n = 20_000 + rng.below(5000) as usize;
    let x = rng.f32s(n);
    type Copy = fn(&Emulator, LaunchConfig, &Vec<f32>, &mut Vec<f32>) -> lookahead::Result<()>;
    let copies: [(&str, Copy); 3] = [
        ("copy_prefetch_l2", |e, c, x, y| {
            demo_kernels::copy_prefetch_l2::launch(e, c, x, y)
        }),
        ("copy_prefetch_l2_evict_last", |e, c, x, y| {
            demo_kernels::copy_prefetch_l2_evict_last::launch(e, c, x, y)
        }),
        ("copy_prefetch_bulk", |e, c, x, y| {
            demo_kernels::copy_prefetch_bulk::launch(e, c, x, y)
        }),
    ];
    for (name, copy) in copies {
        let mut y = vec![f32::NAN; n]; // poisoned
        copy(&emu(), LaunchConfig::grid_stride(n, 128, 8), &x, &mut y).unwrap();
        assert_eq!(y, x, "{name}");
    }
}

#[test]
fn launchers_check_lengths_before_running() {
    let x = vec![1.0f32; 10];
    let mut y = vec![0.0f32; 9];
    let e = demo_kernels::saxpy::launch(&emu(), LaunchConfig::for_len(10, 32), 1.0, &x, &mut y)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                kernel: "saxpy",
                ..
            }
        ),
        "{e}"
    );
    assert!(y.iter().all(|&v| v == 0.0), "nothing ran");
}

#[test]
fn indices_and_dimensions_are_per_thread() {
    let mut out = vec![u32::MAX; 13];
    ptx_kernels::intr_indices::launch(&emu(), LaunchConfig::new((3, 2, 1), (64, 2, 1)), &mut out)
        .unwrap();
    // The last is block (0, 0, 0)'s SM: the emulator gives every block its own, by index.
    assert_eq!(out, [0, 0, 64, 2, 1, 3, 2, 1, 0, 0, 192, 32, 0]);
}

#[test]
fn atomics_are_atomic_across_blocks() {
    let (blocks, threads) = (64u32, 128u32);
    let mut f = vec![0.0f32; 2];
    let mut u = vec![0u32; 3];
    let mut w = vec![0u64; 3];
    let mut i = vec![i32::MIN; 1];
    ptx_kernels::intr_atomics::launch(
        &emu(),
        LaunchConfig::new((blocks, 1, 1), (threads, 1, 1)),
        &mut f,
        &mut u,
        &mut w,
        &mut i,
    )
    .unwrap();
    let n = (blocks * threads) as u64;
    assert_eq!(f, [1.5 * n as f32, 0.5 * n as f32]);
    assert_eq!(u, [n as u32, threads - 1, 7]);
    assert_eq!(w, [n, n - 1, 7]);
    assert_eq!(i, [0]);
}

#[test]
fn warp_shuffles_and_votes_follow_ptx() {
    let mut rng = Rng::fresh("warp");
    let x: Vec<f32> = (0..32).map(|_| rng.below(5) as f32 - 1.0).collect();
    let mut out = vec![f32::NAN; 32];
    ptx_kernels::intr_warp::launch(&emu(), LaunchConfig::for_len(32, 32), &x, &mut out).unwrap();
    let sum_down = {
        // warp_sum_f32: shfl_down tree, valid in lane 0; other lanes get partial sums.
        let mut v = x.clone();
        for delta in [16, 8, 4, 2, 1] {
            let prev = v.clone();
            for (l, value) in v.iter_mut().enumerate() {
                *value += if l + delta < 32 {
                    prev[l + delta]
                } else {
                    prev[l]
                };
            }
        }
        v
    };
    let all = x.iter().all(|&v| v > 0.0) as u32;
    let any = x.iter().any(|&v| v > 0.0) as u32;
    let ballot = x
        .iter()
        .enumerate()
        .filter(|(_, &v)| v > 0.0)
        .fold(0u32, |m, (l, _)| m | 1 << l);
    for l in 0..32 {
        let a = x[if l + 1 < 32 { l + 1 } else { l }];
        let b = x[l ^ 2];
        let c = x[0];
        let d = x[if l >= 1 { l - 1 } else { l }];
        let want = a + b + c + d + sum_down[l] + (all + any) as f32 + (ballot ^ u32::MAX) as f32;
        assert_eq!(
            out[l],
            want,
            "lane {l}: x = {x:?}, parts {:?}",
            (a, b, c, d, sum_down[l], all, any, ballot)
        );
    }
}

#[test]
fn warp_claims_give_every_lane_the_same_slot_and_every_warp_its_own() {
    const CLAIMS: usize = 3;
    let (blocks, threads) = (5u32, 96u32);
    let warps = (blocks * threads / 32) as usize;
    let (mut next, mut next64) = (vec![0u32], vec![0u64]);
    let mut got = vec![u32::MAX; warps * CLAIMS * 32 * 2];
    ptx_kernels::intr_warp_claims::launch(
        &emu(),
        LaunchConfig::new((blocks, 1, 1), (threads, 1, 1)),
        &mut next,
        &mut next64,
        &mut got,
    )
    .unwrap();
    assert_eq!(
        next[0] as usize,
        warps * CLAIMS,
        "one add per warp and claim"
    );
    assert_eq!(next64[0] as usize, 2 * warps * CLAIMS);
    let (mut slots, mut pairs) = (Vec::new(), Vec::new());
    for claim in got.chunks(32 * 2) {
        let (a, b) = (claim[0], claim[1]);
        assert!(
            claim.chunks(2).all(|l| l == [a, b]),
            "every lane gets lane 0's result: {claim:?}"
        );
        slots.push(a);
        pairs.push(b);
    }
    slots.sort_unstable();
    pairs.sort_unstable();
    let n = (warps * CLAIMS) as u32;
    assert_eq!(slots, (0..n).collect::<Vec<_>>(), "each slot claimed once");
    assert_eq!(pairs, (0..n).map(|i| 2 * i).collect::<Vec<_>>());
}

#[test]
fn dynamic_shared_memory_is_the_launchs_size_per_block() {
    let mut rng = Rng::fresh("dynamic shared");
    let (per_block, blocks) = (3000, 4);
    let n = per_block * blocks - 77; // the last block's share past the end of `x`
    let x = rng.f32s(n);
    let mut y = vec![f32::NAN; n];
    let cfg = LaunchConfig::new((blocks as u32, 1, 1), (128, 1, 1)).with_shared_mem(4 * 3000);
    ptx_kernels::intr_dynamic_shared::launch(&emu(), cfg, &x, &mut y).unwrap();
    assert_eq!(y, ptx_kernels::dynamic_shared_reference(&x, per_block));
    // Without dynamic shared memory the tile is empty, and nothing is written.
    let mut z = vec![f32::NAN; n];
    let cfg = LaunchConfig::new((blocks as u32, 1, 1), (128, 1, 1));
    ptx_kernels::intr_dynamic_shared::launch(&emu(), cfg, &x, &mut z).unwrap();
    assert!(z.iter().all(|v| v.is_nan()));
}

#[test]
fn shared_memory_is_per_block_and_barriers_order_it() {
    let mut rng = Rng::fresh("shared");
    let n = 256 * 6;
    let x = rng.f32s(n);
    let mut y = vec![f32::NAN; n];
    ptx_kernels::intr_shared::launch(&emu(), LaunchConfig::for_len(n, 256), &x, &mut y).unwrap();
    for i in 0..n {
        let b = i / 256;
        let t = i % 256;
        let want = x[b * 256 + (t + 1) % 256] + 256.0;
        assert_eq!(y[i], want, "element {i}");
    }
}

#[test]
fn fences_barriers_and_sleep_run() {
    let mut flag = vec![0u32; 1];
    ptx_kernels::intr_sync::launch(&emu(), LaunchConfig::for_len(1000, 256), &mut flag).unwrap();
    assert_eq!(flag, [1]);
}

#[test]
fn managed_and_device_views_take_host_memory() {
    let mut rng = Rng::fresh("views");
    let n = 3000;
    let x = rng.f32s(n + 4);
    let mut y = vec![f32::NAN; n + 4];
    ptx_kernels::intr_bounds::launch(&emu(), LaunchConfig::for_len(n + 4, 128), &x, &mut y, 0)
        .unwrap();
    for i in 0..n + 4 {
        assert_eq!(y[i], 2.0 * x[i]);
    }
    let mut out = vec![f32::NAN; 1];
    ptx_kernels::pf_device_fn::launch(&emu(), LaunchConfig::for_len(1, 1), &x, &mut out).unwrap();
    assert!(close(out[0], x.iter().sum(), 1e-4));
}

#[test]
fn a_slice_of_user_structs_and_a_struct_by_value_match_the_cpu() {
    use ptx_kernels::{chase_reference, random_nodes, Walk};
    let mut rng = Rng::fresh("user_chase");
    let n = 5000 + rng.below(1000) as usize;
    let values = rng.f32s(n);
    let nodes = random_nodes(n, |k| rng.below(k as u64) as usize, |i| values[i]);
    let chains = 700;
    let starts: Vec<u32> = (0..chains).map(|t| ((t * 7919) % n) as u32).collect();
    let walk = Walk {
        steps: 20,
        scale: 0.5,
    };
    let mut sums = vec![f32::NAN; chains];
    let cfg = LaunchConfig::for_len(chains, 128);
    ptx_kernels::user_chase::launch(&emu(), cfg, &nodes, &starts, walk, &mut sums).unwrap();
    assert_eq!(sums, chase_reference(&nodes, &starts, walk));
}

#[test]
fn a_kernel_params_struct_binds_its_views_and_values() {
    let mut rng = Rng::fresh("user_axpy");
    let n = 4000 + rng.below(1000) as usize;
    let (x, y0) = (rng.f32s(n), rng.f32s(n));
    let mut y = y0.clone();
    let a = 1.5f32;
    let cfg = LaunchConfig::grid_stride(n, 128, 8); // 1024 threads: several elements each
    let args = ptx_kernels::AxpyArgs {
        x: &x,
        y: &mut y,
        a,
        per_thread: u32::MAX,
    };
    ptx_kernels::user_axpy::launch(&emu(), cfg, args).unwrap();
    for i in 0..n {
        assert_eq!(y[i], y0[i] + a * x[i], "element {i}");
    }
}

/// The emulator runs the math methods on the host's C library; the reference is `libm`
/// (musl's), which shares no code with it.
#[test]
fn math_on_the_emulator_is_within_a_few_ulp_of_an_independent_reference() {
    let mut rng = Rng::fresh("intr_math");
    let x: Vec<f32> = rng.f32s(300).iter().map(|v| 4.0 * v).collect();
    let (mut o32, mut o64) = (vec![f32::NAN; 8 * x.len()], vec![f64::NAN; 4 * x.len()]);
    let cfg = LaunchConfig::for_len(x.len(), 64);
    ptx_kernels::intr_math::launch(&emu(), cfg, &x, &mut o32, &mut o64).unwrap();
    let differ = lookahead_tests::math::math_mismatches(&x, &o32, &o64);
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn launch_bounds_refuse_a_larger_block_and_take_one_within() {
    let x: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let mut y = vec![f32::NAN; x.len()];
    let too_big = LaunchConfig::for_len(x.len(), 256);
    let err = ptx_kernels::user_bounded::launch(&emu(), too_big, &x, &mut y).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("user_bounded") && msg.contains("launch_bounds allow at most 128"),
        "{msg}"
    );
    assert!(y.iter().all(|v| v.is_nan()), "nothing ran");
    let within = LaunchConfig::for_len(x.len(), 128);
    ptx_kernels::user_bounded::launch(&emu(), within, &x, &mut y).unwrap();
    assert!(x.iter().zip(&y).all(|(a, b)| *b == 2.0 * a));
}

// ---- Bugs the emulator reports ----

fn panic_message(r: std::thread::Result<()>) -> String {
    let p = r.expect_err("the launch should panic");
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn out_of_bounds_index_names_kernel_block_thread_and_index() {
    let x = vec![1.0f32; 100];
    let mut y = vec![0.0f32; 100];
    // k = 1: thread 99 of the grid reads x[100].
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ =
            ptx_kernels::intr_bounds::launch(&emu(), LaunchConfig::for_len(100, 32), &x, &mut y, 1);
    }));
    let msg = panic_message(r);
    assert!(msg.contains("kernel `intr_bounds`"), "{msg}");
    assert!(msg.contains("block [3, 0, 0]"), "{msg}");
    assert!(msg.contains("thread [3, 0, 0]"), "{msg}");
    assert!(msg.contains("the len is 100 but the index is 100"), "{msg}");
}

#[test]
fn a_barrier_behind_an_early_return_is_a_deadlock() {
    let mut out = vec![0u32; 40];
    let e = ptx_kernels::bug_barrier_after_return::launch(
        &emu(),
        LaunchConfig::for_len(64, 64),
        &mut out,
    )
    .unwrap_err();
    let Error::Emulator(inner) = &e else {
        panic!("expected a deadlock, got {e}");
    };
    let EmuError::Deadlock {
        kernel,
        block,
        at_barrier,
        exited,
        ..
    } = inner.as_ref()
    else {
        panic!("expected a deadlock, got {e}");
    };
    assert_eq!((*kernel, *block), ("bug_barrier_after_return", [0, 0, 0]));
    assert_eq!(at_barrier.0, (0..40).collect::<Vec<_>>());
    assert_eq!(exited.0, (40..64).collect::<Vec<_>>());
    let text = e.to_string();
    assert!(text.contains("40 threads: 0..=39"), "{text}");
    assert!(text.contains("24 threads: 40..=63"), "{text}");
}

#[test]
fn a_shuffle_some_lanes_skip_is_a_deadlock() {
    let mut out = vec![0.0f32; 32];
    let e =
        ptx_kernels::bug_divergent_shuffle::launch(&emu(), LaunchConfig::for_len(32, 32), &mut out)
            .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(&e, Error::Emulator(inner) if matches!(**inner, EmuError::Deadlock { .. })),
        "{text}"
    );
    assert!(text.contains("shfl.sync.down"), "{text}");
    assert!(
        text.contains("waiting at a warp operation: 16 threads: 0..=15"),
        "{text}"
    );
}

#[test]
fn a_missing_barrier_on_shared_memory_is_a_data_race() {
    let x = vec![1.0f32; 64];
    let mut y = vec![0.0f32; 64];
    let e =
        ptx_kernels::bug_missing_barrier::launch(&emu(), LaunchConfig::for_len(64, 64), &x, &mut y)
            .unwrap_err();
    let text = e.to_string();
    let Error::Emulator(inner) = &e else {
        panic!("expected a race, got {text}");
    };
    let EmuError::DataRace { kind, site, .. } = inner.as_ref() else {
        panic!("expected a race, got {text}");
    };
    assert_eq!(*kind, "read after write", "{text}");
    assert!(site.contains("ptx-kernels/src/bugs.rs"), "{text}");
    // With the barrier, the same kernel is race-free and correct.
    ptx_kernels::intr_shared::launch(&emu(), LaunchConfig::for_len(64, 64), &x, &mut y).unwrap();
    // Race detection can be turned off.
    ptx_kernels::bug_missing_barrier::launch(
        &emu().race_detection(false),
        LaunchConfig::for_len(64, 64),
        &x,
        &mut y,
    )
    .unwrap();
}

/// `warp::sync` orders shared-memory accesses between the lanes of one warp, not between
/// warps.
#[test]
fn a_warp_barrier_orders_shared_memory_within_its_warp_only() {
    let x: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let mut y = vec![f32::NAN; 64];
    let cfg = LaunchConfig::for_len(64, 64);
    ptx_kernels::warp_synced_neighbour::launch(&emu(), cfg, &x, &mut y, 0).unwrap();
    for (t, &v) in y.iter().enumerate() {
        assert_eq!(v, ((t & !31) | ((t + 1) & 31)) as f32, "thread {t}");
    }
    let e = ptx_kernels::warp_synced_neighbour::launch(&emu(), cfg, &x, &mut y, 1).unwrap_err();
    let text = e.to_string();
    let Error::Emulator(inner) = &e else {
        panic!("expected a race, got {text}");
    };
    let EmuError::DataRace { kind, .. } = inner.as_ref() else {
        panic!("expected a race, got {text}");
    };
    assert_eq!(*kind, "read after write", "{text}");
}

#[test]
fn intrinsics_outside_a_launch_say_how_to_run_kernels() {
    let r = std::panic::catch_unwind(|| {
        lookahead_device::index::thread_idx_x();
    });
    let msg = panic_message(r.map(|_| ()));
    assert!(msg.contains("outside a kernel launch"), "{msg}");
    assert!(msg.contains("lookahead::emu::Emulator"), "{msg}");
}

// ---- Prefetch trace: each #[prefetch_next] form fetches exactly iteration i + distance ----

fn traced() -> Emulator {
    Emulator::new().workers(1).prefetch_trace(true)
}

fn inside<T>(r: &PrefetchRecord, data: &[T]) -> bool {
    let base = data.as_ptr() as usize;
    r.address >= base && r.address < base + std::mem::size_of_val(data)
}

/// (iteration, element index) of each record whose address is inside `data`.
fn elements<T>(records: &[PrefetchRecord], data: &[T]) -> Vec<(Option<usize>, usize)> {
    let base = data.as_ptr() as usize;
    records
        .iter()
        .filter(|r| inside(r, data))
        .map(|r| (r.iteration, (r.address - base) / std::mem::size_of::<T>()))
        .collect()
}

#[test]
fn trace_range_prefetches_i_plus_distance_and_stops_at_the_end() {
    let n = 100;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut y = vec![0.0f32; n];
    let emu = traced();
    ptx_kernels::pf_range_l1::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut y).unwrap();
    let trace = emu.take_prefetch_trace();
    assert!(trace.iter().all(|r| r.instruction == Instruction::L1));
    // `y[i] = x[i] * 2.0` indexes both slices: both are prefetched, 2 ahead, nothing else.
    let want: Vec<_> = (0..n - 2).map(|i| (Some(i), i + 2)).collect();
    assert_eq!(elements(&trace, &x), want);
    assert_eq!(elements(&trace, &y), want);
    assert_eq!(trace.len(), 2 * want.len());

    ptx_kernels::pf_range_l2::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut y).unwrap();
    let trace = emu.take_prefetch_trace();
    // `y[i] += x[i]` indexes both slices: both are prefetched, 8 ahead.
    assert_eq!(trace.len(), 2 * (n - 8));
    assert!(trace.iter().all(|r| r.instruction == Instruction::L2));
}

#[test]
fn trace_inclusive_range_reaches_the_last_element() {
    let x: Vec<u32> = (0..50).collect();
    let mut out = vec![0u32; 1];
    let emu = traced();
    ptx_kernels::pf_range_inclusive::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut out, 49)
        .unwrap();
    assert_eq!(out[0], (0..50).sum::<u32>());
    let want: Vec<_> = (0..49).map(|i| (Some(i), i + 1)).collect();
    assert_eq!(elements(&emu.take_prefetch_trace(), &x), want);
}

#[test]
fn trace_grid_stride_prefetches_four_strides_ahead_per_thread() {
    let n = 1000;
    let x: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mut y = vec![0.0f64; n];
    let emu = traced();
    let cfg = LaunchConfig::new((2, 1, 1), (32, 1, 1)); // stride 64
    ptx_kernels::pf_grid_stride::launch(&emu, cfg, &x, &mut y).unwrap();
    assert!(y.iter().zip(&x).all(|(y, x)| *y == x + 1.0));
    let trace = emu.take_prefetch_trace();
    let in_x: Vec<_> = trace.iter().filter(|r| inside(r, &x)).cloned().collect();
    assert_eq!(in_x.len() * 2, trace.len(), "x and y, nothing else");
    let mut count = 0;
    for (r, (it, e)) in in_x.iter().zip(elements(&in_x, &x)) {
        let i = it.expect("issued inside the loop");
        let thread = r.block[0] as usize * 32 + r.thread[0] as usize;
        assert_eq!(i % 64, thread, "{r:?}");
        assert_eq!(e, i + 4 * 64, "{r:?}");
        count += 1;
    }
    // Every iteration whose i + 256 < n prefetches exactly once.
    assert_eq!(count, n - 256);
}

#[test]
fn trace_portable_levels_use_the_sm90_instructions() {
    let x = vec![1.0f32; 64];
    let mut y = vec![0.0f32; 64];
    let emu = traced();
    ptx_kernels::pf_evict_last_portable::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut y)
        .unwrap();
    let t = emu.take_prefetch_trace();
    assert_eq!(t.len(), 2 * 60, "x and y, 4 ahead");
    assert!(t.iter().all(|r| r.instruction == Instruction::L2EvictLast));
    ptx_kernels::pf_evict_normal_portable::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut y)
        .unwrap();
    let t = emu.take_prefetch_trace();
    assert_eq!(t.len(), 2 * 63, "distance 1 by default");
    assert!(t
        .iter()
        .all(|r| r.instruction == Instruction::L2EvictNormal));
}

#[test]
fn trace_iter_and_iter_mut_prefetch_the_element_distance_ahead() {
    let x: Vec<f32> = (0..300).map(|i| i as f32).collect();
    let mut out = vec![0.0f32; 1];
    let emu = traced();
    ptx_kernels::pf_iter::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut out).unwrap();
    assert_eq!(out[0], x.iter().sum::<f32>());
    let want: Vec<_> = (0..300 - 16).map(|i| (Some(i), i + 16)).collect();
    assert_eq!(elements(&emu.take_prefetch_trace(), &x), want);

    let mut y: Vec<i32> = (0..100).collect();
    ptx_kernels::pf_iter_mut::launch(&emu, LaunchConfig::for_len(1, 1), &mut y, 5).unwrap();
    assert_eq!(y, (5..105).collect::<Vec<i32>>());
    let t = emu.take_prefetch_trace();
    assert!(t.iter().all(|r| r.instruction == Instruction::L1));
    let want: Vec<_> = (0..96).map(|i| (Some(i), i + 4)).collect();
    assert_eq!(elements(&t, &y), want);
}

#[test]
fn trace_chunks_prefetch_the_next_chunk_clamped_to_the_data() {
    // 3.5 chunks of 1024 floats: chunk 2 prefetches the half chunk 3, chunk 3 nothing.
    let n = 3 * 1024 + 512;
    let x = vec![1.0f32; n];
    let mut out = vec![0.0f32; 1];
    let emu = traced();
    ptx_kernels::pf_chunks_bulk_portable::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut out)
        .unwrap();
    assert_eq!(out[0], 4.0);
    let t = emu.take_prefetch_trace();
    let base = x.as_ptr() as usize;
    let got: Vec<_> = t
        .iter()
        .map(|r| {
            assert_eq!(r.instruction, Instruction::BulkL2);
            (r.iteration, r.address, r.address + r.bytes)
        })
        .collect();
    // The bulk range is widened to 16-byte alignment, never past the pages of the chunk.
    let cover = |first: usize, count: usize| {
        let (a, b) = (base + first * 4, base + (first + count) * 4);
        (a & !15, (b + 15) & !15)
    };
    let want: Vec<_> = [(0, 1024, 1024), (1, 2048, 1024), (2, 3072, 512)]
        .iter()
        .map(|&(i, first, count)| {
            let (a, b) = cover(first, count);
            (Some(i), a, b)
        })
        .collect();
    assert_eq!(got, want);

    // chunks_exact(64) of u64, distance 2: per-line L2 prefetches covering chunk i + 2.
    let x: Vec<u64> = (0..64 * 10).collect();
    let mut out = vec![0u64; 1];
    ptx_kernels::pf_chunks_l2::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut out).unwrap();
    assert_eq!(out[0], (0..10).map(|c| c * 64 + 63).sum::<u64>());
    let t = emu.take_prefetch_trace();
    for i in 0..10usize {
        let lines: Vec<_> = t.iter().filter(|r| r.iteration == Some(i)).collect();
        if i + 2 >= 10 {
            assert!(
                lines.is_empty(),
                "iteration {i} must not prefetch past the end"
            );
            continue;
        }
        let (lo, hi) = (
            x.as_ptr() as usize + (i + 2) * 64 * 8,
            x.as_ptr() as usize + (i + 3) * 64 * 8,
        );
        assert!(lines.iter().all(|r| r.instruction == Instruction::L2));
        assert!(lines
            .iter()
            .all(|r| r.address >= lo & !127 && r.address < hi));
        let covered: usize = lines.iter().map(|r| r.lines().len()).sum();
        assert!(covered >= hi - lo, "iteration {i} covers chunk {}", i + 2);
    }
}

#[test]
fn trace_managed_memory_gets_the_l2_hint_whatever_the_level() {
    let x = vec![1.0f32; 2048];
    let mut out = vec![0.0f32; 1];
    let emu = traced();
    ptx_kernels::pf_managed_bulk::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut out).unwrap();
    let t = emu.take_prefetch_trace();
    assert!(!t.is_empty());
    assert!(t
        .iter()
        .all(|r| r.instruction == Instruction::L2 && r.iteration == Some(0)));
}

#[test]
fn trace_device_fn_loops_are_traced_too() {
    let x = vec![1.0f32; 40];
    let mut out = vec![0.0f32; 1];
    let emu = traced();
    ptx_kernels::pf_device_fn::launch(&emu, LaunchConfig::for_len(1, 1), &x, &mut out).unwrap();
    let want: Vec<_> = (0..32).map(|i| (Some(i), i + 8)).collect();
    assert_eq!(elements(&emu.take_prefetch_trace(), &x), want);
}

#[test]
fn trace_records_direct_prefetches_without_an_iteration() {
    let x = vec![0.0f32; 4];
    let emu = traced();
    ptx_kernels::intr_prefetch_direct::launch(&emu, LaunchConfig::for_len(1, 1), &x).unwrap();
    let t = emu.take_prefetch_trace();
    let insns: Vec<_> = t.iter().map(|r| r.instruction).collect();
    assert_eq!(&insns[..2], [Instruction::L1, Instruction::L2]);
    assert!(t
        .iter()
        .all(|r| r.iteration.is_none() && r.thread == [0, 0, 0]));
}

// ---- level = auto, targets of the loop variable, and request queues on managed memory ----

#[test]
fn auto_kernels_run_each_candidate_once_here_then_l2_and_launch_variant_runs_any() {
    use ptx_kernels::pf_auto::{self, Level, Variant};
    let mut rng = Rng::fresh("auto");
    let n = 1000;
    let x = rng.f32s(n);
    let want: f32 = x.iter().sum();
    let cfg = LaunchConfig::new((2, 1, 1), (32, 1, 1)); // stride 64
    let emu = traced();
    let l2 = Variant::new(Level::L2, 0);
    let evict_last = Variant::new(Level::L2EvictLast, 0);
    assert_eq!(pf_auto::CANDIDATES, [Variant::PLAIN, l2, evict_last]);
    assert_eq!(
        pf_auto::ENTRIES,
        [
            (Variant::PLAIN, "pf_auto"),
            (l2, "pf_auto__l2"),
            (evict_last, "pf_auto__l2_evict_last")
        ]
    );
    assert_eq!(pf_auto::auto_choice(&emu), Some(l2));

    // Launches 1 to 3 run l2, evict_last and plain; later ones l2.
    let mut traces = Vec::new();
    for _ in 0..4 {
        let mut out = vec![0.0f32; 1];
        pf_auto::launch(&emu, cfg, &x, &mut out).unwrap();
        assert!(close(out[0], want, 1e-4), "{} vs {want}", out[0]);
        traces.push(emu.take_prefetch_trace());
    }
    let hinted = traces[0].clone();
    assert!(hinted.iter().all(|r| r.instruction == Instruction::L2));
    assert!(traces[1]
        .iter()
        .all(|r| r.instruction == Instruction::L2EvictLast));
    assert!(!traces[1].is_empty() && traces[2].is_empty());
    assert_eq!(traces[3], hinted);
    let want_trace: Vec<_> = {
        let mut v: Vec<_> = (0..n - 256).map(|i| (Some(i), i + 256)).collect();
        v.sort();
        v
    };
    let mut got = elements(&hinted, &x);
    got.sort();
    assert_eq!(got, want_trace, "4 grid strides ahead, never past the end");

    let mut out = vec![0.0f32; 1];
    pf_auto::launch_variant(Variant::PLAIN, &emu, cfg, &x, &mut out).unwrap();
    assert!(close(out[0], want, 1e-4), "{} vs {want}", out[0]);
    assert!(
        emu.take_prefetch_trace().is_empty(),
        "the plain body prefetches nothing"
    );

    let mut out = vec![0.0f32; 1];
    pf_auto::launch_variant(l2, &emu, cfg, &x, &mut out).unwrap();
    assert!(close(out[0], want, 1e-4));
    assert_eq!(emu.take_prefetch_trace(), hinted);
    let bulk = Variant::new(Level::Bulk, 0);
    let e = pf_auto::launch_variant(bulk, &emu, cfg, &x, &mut out).unwrap_err();
    assert!(e.to_string().contains("plain, l2, l2_evict_last"), "{e}");
}

#[test]
fn distance_auto_is_the_launch_s_distance_clamped_to_the_loop_s_range() {
    use ptx_kernels::pf_tuned::{self, Level, Variant};
    let x = vec![1.0f32; 64 * 40];
    let cfg = LaunchConfig::new((1, 1, 1), (1, 1, 1));
    let emu = traced();
    let ds: Vec<u32> = pf_tuned::CANDIDATES.iter().map(|v| v.distance).collect();
    assert_eq!(ds, [0, 2, 4, 8, 2, 4, 8]);
    for (asked, used) in [(2, 2), (8, 8), (1, 2), (100, 8)] {
        let mut out = vec![0.0f32; 1];
        pf_tuned::launch_variant(Variant::new(Level::L2, asked), &emu, cfg, &x, &mut out).unwrap();
        assert_eq!(out[0], 40.0);
        let first = emu
            .take_prefetch_trace()
            .into_iter()
            .find(|r| r.iteration == Some(0));
        let chunk = (first.unwrap().address - x.as_ptr() as usize) / (64 * 4);
        assert_eq!(chunk, used, "distance {asked}");
    }
}

#[test]
fn trace_a_target_of_the_loop_variable_is_evaluated_for_iteration_i_plus_distance() {
    let mut rng = Rng::fresh("of_loop_var");
    let (m, n) = (5000, 700);
    let src = rng.f32s(m);
    let idx: Vec<u32> = (0..n).map(|_| rng.below(m as u64) as u32).collect();
    let mut out = vec![f32::NAN; n];
    let emu = traced();
    let cfg = LaunchConfig::new((1, 1, 1), (32, 1, 1)); // stride 32
    ptx_kernels::pf_of_loop_var::launch(&emu, cfg, &src, &idx, &mut out).unwrap();
    for i in 0..n {
        assert_eq!(out[i], src[idx[i] as usize], "element {i}");
    }
    let t = emu.take_prefetch_trace();
    let mut got = elements(&t, &src);
    got.sort();
    let mut want: Vec<_> = (0..n - 4 * 32)
        .map(|i| (Some(i), idx[i + 4 * 32] as usize))
        .collect();
    want.sort();
    assert_eq!(
        got, want,
        "src[idx[i + 4 * stride]] from iteration i, nothing else"
    );
    assert_eq!(t.len(), want.len());
}

#[test]
fn trace_queue_requests_exactly_the_chunk_iteration_i_plus_distance_reads() {
    use lookahead_device::uvm::requests::RequestQueue;
    let n = 256 * 5 + 100; // five whole chunks and a partial one
    let x = vec![1.0f32; n];
    let mut out = vec![0.0f32; 1];
    let emu = traced();
    ptx_kernels::pf_queue_chunks::launch(
        &emu,
        LaunchConfig::for_len(1, 1),
        &x,
        &mut out,
        RequestQueue::disabled(),
    )
    .unwrap();
    assert_eq!(out[0], 6.0);
    let base = x.as_ptr() as usize;
    let chunk = |c: usize| (base + c * 1024, if c == 5 { 400 } else { 1024 });
    let got: Vec<_> = emu
        .take_prefetch_trace()
        .into_iter()
        .map(|r| (r.iteration, r.instruction, r.address, r.bytes))
        .collect();
    let mut want = Vec::new();
    // Before the loop: the first `distance` chunks.
    for c in 0..2 {
        let (a, b) = chunk(c);
        want.push((None, Instruction::Request { flag: c as u32 }, a, b));
    }
    // Iteration c: chunk c + 2 (while there is one), then wait for chunk c.
    for c in 0..6 {
        if c + 2 < 6 {
            let (a, b) = chunk(c + 2);
            want.push((Some(c), Instruction::Request { flag: c as u32 + 2 }, a, b));
        }
        want.push((Some(c), Instruction::WaitReady { flag: c as u32 }, 0, 0));
    }
    assert_eq!(got, want);
}

#[test]
fn trace_queue_requests_managed_lists_and_hints_device_memory_in_the_same_loop() {
    use lookahead_device::uvm::requests::RequestQueue;
    let mut rng = Rng::fresh("queue_lists");
    let lists_n = 20;
    let mut offsets = vec![0u32];
    for _ in 0..lists_n {
        let len = 1 + rng.below(50) as u32;
        offsets.push(offsets.last().unwrap() + len);
    }
    let lists = rng.f32s(*offsets.last().unwrap() as usize);
    let weights = rng.f32s(lists_n);
    let mut sums = vec![f32::NAN; lists_n];
    let emu = traced();
    let cfg = LaunchConfig::new((2, 1, 1), (4, 1, 1)); // stride 8
    ptx_kernels::pf_queue_lists::launch(
        &emu,
        cfg,
        &lists,
        &offsets,
        &weights,
        &mut sums,
        RequestQueue::disabled(),
    )
    .unwrap();
    for l in 0..lists_n {
        let (a, b) = (offsets[l] as usize, offsets[l + 1] as usize);
        let want = lists[a..b].iter().sum::<f32>() * weights[l];
        assert!(close(sums[l], want, 1e-5), "list {l}");
    }
    let t = emu.take_prefetch_trace();
    let base = lists.as_ptr() as usize;
    // Each list is requested once, under flag 2 l (two targets), by iteration l - 8 (or
    // before the loop for the first list of each thread), with exactly its bytes.
    let mut requests: Vec<_> = t
        .iter()
        .filter_map(|r| match r.instruction {
            Instruction::Request { flag } => Some((flag, r.iteration, r.address, r.bytes)),
            _ => None,
        })
        .collect();
    requests.sort();
    let want: Vec<_> = (0..lists_n)
        .map(|l| {
            let (a, b) = (offsets[l] as usize, offsets[l + 1] as usize);
            let from = if l < 8 { None } else { Some(l - 8) };
            (2 * l as u32, from, base + a * 4, (b - a) * 4)
        })
        .collect();
    assert_eq!(requests, want);
    // Every iteration waits for its own list, and for nothing else.
    let mut waits: Vec<_> = t
        .iter()
        .filter_map(|r| match r.instruction {
            Instruction::WaitReady { flag } => Some((flag, r.iteration)),
            _ => None,
        })
        .collect();
    waits.sort();
    let want: Vec<_> = (0..lists_n).map(|l| (2 * l as u32, Some(l))).collect();
    assert_eq!(waits, want);
    // The device-memory weights keep their L2 hint: element l, from iteration l - 8.
    let hints: Vec<_> = t
        .iter()
        .filter(|r| {
            !matches!(
                r.instruction,
                Instruction::Request { .. } | Instruction::WaitReady { .. }
            )
        })
        .cloned()
        .collect();
    assert!(hints
        .iter()
        .all(|r| r.instruction == Instruction::L2 && inside(r, &weights)));
    let mut got = elements(&hints, &weights);
    got.sort();
    let mut want: Vec<_> = (0..lists_n)
        .map(|l| (if l < 8 { None } else { Some(l - 8) }, l))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

// ---- The emulator agrees with the GPU: what would hang, race or read garbage there ----

fn emu_error(r: Result<(), Error>) -> EmuError {
    match r {
        Err(Error::Emulator(e)) => *e,
        other => panic!("expected an emulator report, got {other:?}"),
    }
}

#[test]
fn a_thread_spinning_on_a_siblings_flag_lets_the_sibling_run() {
    let (mut flag, mut out) = (vec![0u32; 1], vec![0u32; 1]);
    let cfg = LaunchConfig::for_len(32, 32);
    ptx_kernels::spin_on_a_sibling::launch(&emu(), cfg, &mut flag, &mut out).unwrap();
    assert_eq!(out[0], 7);
}

#[test]
fn a_spin_wait_nothing_ends_is_reported_by_the_watchdog() {
    let mut flag = vec![0u32; 1];
    let emu = emu().watchdog(std::time::Duration::from_millis(500));
    let started = std::time::Instant::now();
    let e = emu_error(ptx_kernels::bug_spin_forever::launch(
        &emu,
        LaunchConfig::for_len(64, 64),
        &mut flag,
    ));
    let text = e.to_string();
    let EmuError::Hang {
        seconds, running, ..
    } = &e
    else {
        panic!("expected a hang, got {text}");
    };
    assert!(
        *seconds >= 0.5 && started.elapsed().as_secs_f64() < 30.0,
        "{text}"
    );
    assert!(running.contains(0), "{text}");
    assert!(
        text.contains("bug_spin_forever") && text.contains("block [0, 0, 0]"),
        "{text}"
    );
}

#[test]
fn plain_updates_of_one_element_by_many_threads_are_a_race() {
    let mut y = vec![0.0f32; 1];
    let cfg = LaunchConfig::for_len(4096, 256);
    let e = emu_error(ptx_kernels::bug_racy_sum::launch(&emu(), cfg, &mut y));
    let text = e.to_string();
    let EmuError::GlobalRace { place, op, .. } = &e else {
        panic!("expected a race, got {text}");
    };
    assert_eq!((*place, *op), ("y[0]", "+="), "{text}");
    assert!(text.contains("atomic_add(&mut y[0], v)"), "{text}");
    // With an atomic, every update counts.
    let mut y = vec![0.0f32; 1];
    ptx_kernels::atomic_sum::launch(&emu(), cfg, &mut y).unwrap();
    assert_eq!(y[0], 4096.0);
}

#[test]
fn threads_at_different_sync_threads_calls_are_a_divergence() {
    let mut out = vec![0u32; 64];
    let cfg = LaunchConfig::for_len(64, 64);
    let e = emu_error(ptx_kernels::bug_divergent_barrier::launch(
        &emu(),
        cfg,
        &mut out,
    ));
    let text = e.to_string();
    let EmuError::BarrierDivergence { sites, .. } = &e else {
        panic!("expected a divergence, got {text}");
    };
    assert_eq!(
        sites.matches("ptx-kernels/src/bugs.rs:").count(),
        2,
        "{text}"
    );
    assert!(sites.contains("32 threads"), "{text}");
}

#[test]
fn reading_shared_memory_nothing_wrote_is_reported() {
    let mut out = vec![0u32; 64];
    let cfg = LaunchConfig::for_len(64, 64);
    let e = emu_error(ptx_kernels::bug_uninitialised_shared::launch(
        &emu(),
        cfg,
        &mut out,
    ));
    let text = e.to_string();
    let EmuError::UninitializedRead { index, thread, .. } = &e else {
        panic!("expected an uninitialised read, got {text}");
    };
    assert_eq!((*index, *thread), (5, [4, 0, 0]), "{text}");
}

#[test]
fn a_400_kb_local_array_fits_an_emulated_threads_stack() {
    let mut out = vec![u32::MAX; 64];
    let cfg = LaunchConfig::for_len(64, 64);
    ptx_kernels::large_local_array::launch(&emu(), cfg, &mut out).unwrap();
    for (t, v) in out.iter().enumerate() {
        let pick = t * 997 % 100_000;
        let want = if pick % 997 == 0 {
            (pick + t) as u32
        } else {
            0
        };
        assert_eq!(*v, want, "thread {t}");
    }
}

/// Runs this test binary's test `name` in a child process with `LOOKAHEAD_TEST_CHILD` set:
/// for the checks that end the process. Returns the child's exit success and stderr.
fn in_child(name: &str) -> (bool, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("LOOKAHEAD_TEST_CHILD", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn is_child() -> bool {
    std::env::var_os("LOOKAHEAD_TEST_CHILD").is_some()
}

#[test]
fn a_stack_overflow_names_the_kernel_block_and_thread() {
    if is_child() {
        let mut out = vec![0u32; 64];
        let emu = emu().workers(1).stack_size(256 * 1024);
        let cfg = LaunchConfig::for_len(64, 64);
        let _ = ptx_kernels::large_local_array::launch(&emu, cfg, &mut out);
        return;
    }
    let (ok, stderr) = in_child("a_stack_overflow_names_the_kernel_block_and_thread");
    assert!(!ok, "the child must end on the overflow: {stderr}");
    assert!(
        stderr.contains(
            "kernel `large_local_array` overflowed the stack of block [0, 0, 0], thread [0, 0, 0]"
        ) && stderr.contains("256 KiB"),
        "{stderr}"
    );
}

/// How many `f32`s past `x` a page lies that the process maps without access, reserved here
/// and kept to the end of the (child) process: a read there faults at an address the CPU
/// reports. A fixed distance from `x` could land on a mapping, or past the canonical
/// address space, where the fault carries no address.
fn offset_to_a_page_without_access(x: &[f32]) -> u64 {
    // SAFETY: a new anonymous mapping, chosen by the kernel, touching nothing of ours.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(page, libc::MAP_FAILED, "mmap of a page without access");
    // Both 4-byte aligned: the distance is a whole number of floats (wrapping below `x`).
    ((page as usize).wrapping_sub(x.as_ptr() as usize) / 4) as u64
}

#[test]
fn an_out_of_bounds_unchecked_read_names_the_kernel_block_and_thread() {
    if is_child() {
        let (x, mut out) = (vec![1.0f32; 64], vec![0.0f32; 1]);
        let cfg = LaunchConfig::for_len(32, 32);
        let far = offset_to_a_page_without_access(&x);
        let _ = ptx_kernels::bug_unchecked_read::launch(&emu().workers(1), cfg, &x, far, &mut out);
        return;
    }
    let (ok, stderr) =
        in_child("an_out_of_bounds_unchecked_read_names_the_kernel_block_and_thread");
    assert!(!ok, "the child must end on the fault: {stderr}");
    // A debug build stops at `get_unchecked`'s precondition check, a release build at the
    // read's fault: either report names where.
    let checked = "the failed check above is in kernel `bug_unchecked_read`, block [0, 0, 0], \
                   thread [0, 0, 0]";
    let faulted = "kernel `bug_unchecked_read` accessed memory it does not own";
    assert!(
        stderr.contains(checked) || stderr.contains(faulted),
        "{stderr}"
    );
}

#[test]
fn a_raw_pointer_read_that_faults_names_the_kernel_block_and_thread() {
    if is_child() {
        let (x, mut out) = (vec![1.0f32; 64], vec![0.0f32; 1]);
        let cfg = LaunchConfig::for_len(32, 32);
        let far = offset_to_a_page_without_access(&x);
        let _ =
            ptx_kernels::bug_raw_pointer_read::launch(&emu().workers(1), cfg, &x, far, &mut out);
        return;
    }
    let (ok, stderr) = in_child("a_raw_pointer_read_that_faults_names_the_kernel_block_and_thread");
    assert!(!ok, "the child must end on the fault: {stderr}");
    assert!(
        stderr
            .contains("kernel `bug_raw_pointer_read` accessed memory it does not own (address 0x")
            && stderr.contains("in block [0, 0, 0], thread [0, 0, 0]"),
        "{stderr}"
    );
}

#[test]
fn a_loop_that_calls_nothing_is_ended_by_the_watchdog() {
    if is_child() {
        let mut out = vec![0u32; 1];
        let emu = emu().workers(1).watchdog(std::time::Duration::from_secs(1));
        let cfg = LaunchConfig::for_len(32, 32);
        let _ = ptx_kernels::bug_endless_loop::launch(&emu, cfg, u32::MAX, &mut out);
        return;
    }
    let (ok, stderr) = in_child("a_loop_that_calls_nothing_is_ended_by_the_watchdog");
    assert!(!ok, "the child must end: {stderr}");
    assert!(
        stderr.contains("kernel `bug_endless_loop` hangs")
            && stderr.contains("block [0, 0, 0] thread [0, 0, 0]"),
        "{stderr}"
    );
}

/// Every accepted parameter kind and `#[prefetch_next]` form, the `level = auto` launchers
/// and a request queue, on the emulator, against the CPU (`ptx_kernels::kinds`;
/// `tests/tests/gpu_dsl.rs` runs the same on a GPU).
#[test]
fn every_parameter_kind_and_prefetch_form_matches_the_cpu() {
    use lookahead::launch::autotune::{Level, Variant};
    use ptx_kernels::*;
    let e = emu();
    let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
    let n = 1000;
    let x = small_integers(n, 1);
    let cfg = LaunchConfig::for_len(n, 128);

    let mut y = vec![f32::NAN; n];
    let c = SCALARS;
    let (a, b) = (c.a, c.b);
    kind_scalars::launch(
        &e, cfg, a, b, c.c, c.d, c.e, c.f, c.g, c.h, c.i, c.j, c.k, c.l, &x, &mut y,
    )
    .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v + c.weighted()).collect();
    assert_eq!(y, want, "kind_scalars");

    let (mut b, mut d) = (vec![0u32], vec![f64::NAN]);
    kind_views::launch(&e, one, &vec![7u32], &mut b, &vec![-2.5f64], &mut d).unwrap();
    assert_eq!((b[0], d[0]), (7, -2.5));

    let (mut y, mut out) = (vec![f32::NAN; n], vec![3.0f32]);
    kind_prefetch_forms::launch(&e, one, &x, &mut y, &mut out).unwrap();
    assert_eq!(
        (y, out[0]),
        prefetch_forms_reference(&x, 3.0),
        "kind_prefetch_forms"
    );

    let nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            next: 0,
            value: x[i],
        })
        .collect();
    let mut io_out = vec![f32::NAN; n];
    let first = Node {
        next: 0,
        value: 2.0,
    };
    let io = IoArgs {
        input: &nodes,
        output: &mut io_out,
        scale: 0.5,
        _pad: 0,
    };
    kind_user_types::launch(&e, cfg, &nodes, first, io).unwrap();
    let want: Vec<f32> = x.iter().map(|v| (2.0 * v + 2.0) * 0.5).collect();
    assert_eq!(io_out, want, "kind_user_types");

    let mut params = vec![f32::NAN];
    kind_names::launch(&e, one, 1, 2, &vec![0.5f32], &mut params, 3, 4).unwrap();
    assert_eq!(params, [10.5], "kind_names");

    let sum: f32 = x.iter().sum();
    for variant in [
        None,
        Some(Variant::new(Level::Bulk, 3)),
        Some(Variant::PLAIN),
    ] {
        let mut out = vec![0.0f32];
        match variant {
            None => kind_auto_sum::launch(&e, cfg, &x, &mut out),
            Some(v) => kind_auto_sum::launch_variant(v, &e, cfg, &x, &mut out),
        }
        .unwrap();
        assert_eq!(out, [sum], "kind_auto_sum {variant:?}");
    }
    assert_eq!(
        kind_auto_sum::ENTRIES[3],
        (Variant::new(Level::Bulk, 0), "kind_auto_sum__bulk")
    );

    let offsets: Vec<u32> = vec![0, 100, 100, 640, n as u32];
    let weights = vec![1.0f32, -2.0, 3.0, 0.5];
    let mut sums = vec![f32::NAN; 4];
    let queue = lookahead_device::uvm::requests::RequestQueue::disabled();
    kind_queued::launch(&e, one, &x, &offsets, &weights, &mut sums, queue).unwrap();
    assert_eq!(
        sums,
        queued_reference(&x, &offsets, &weights),
        "kind_queued"
    );

    let idx: Vec<u32> = (0..300).map(|i| (i * 37 % n) as u32).collect();
    let mut got = vec![f32::NAN; idx.len()];
    kind_gather::launch(&e, one, &x, &idx, &mut got).unwrap();
    let want: Vec<f32> = idx.iter().map(|&i| x[i as usize]).collect();
    assert_eq!(got, want, "kind_gather");
}
