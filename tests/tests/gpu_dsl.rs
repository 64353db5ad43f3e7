//! On the GPU: every example kernel of `demo-kernels`, launched through its typed
//! `#[kernel]` launcher, gives the CPU reference's result on device memory and on managed
//! memory; launch-time validation refuses bad lengths and shapes without launching.
//!
//! `cargo test -p lookahead-tests --test gpu_dsl -- --ignored` (on a machine with a CUDA GPU;
//! these tests FAIL, not pass, when no GPU is found).

use cudarc::driver::{CudaSlice, UnifiedSlice};
use lookahead::launch::LaunchConfig;
use lookahead::{Error, Gpu};
use lookahead_bench::exact_sum::{self, SumInput};
use lookahead_tests::{input, uniform};

const N: usize = (1 << 20) + 37; // not a multiple of the block or tile size

fn gpu() -> Gpu {
    Gpu::new(0).unwrap_or_else(|e| panic!("these tests need a CUDA GPU: {e}"))
}

fn dev(gpu: &Gpu, v: &[f32]) -> CudaSlice<f32> {
    gpu.stream().clone_htod(v).unwrap()
}

fn managed(gpu: &Gpu, v: &[f32]) -> UnifiedSlice<f32> {
    // SAFETY: f32 accepts any bits; filled right below.
    let mut m = unsafe { gpu.context().alloc_unified::<f32>(v.len(), true) }.unwrap();
    m.as_mut_slice().unwrap().copy_from_slice(v);
    m
}

fn read_dev(gpu: &Gpu, d: &CudaSlice<f32>) -> Vec<f32> {
    gpu.synchronize().unwrap();
    gpu.stream().clone_dtoh(d).unwrap()
}

fn read_managed(gpu: &Gpu, m: &UnifiedSlice<f32>) -> Vec<f32> {
    gpu.synchronize().unwrap();
    m.as_slice().unwrap().to_vec()
}

fn cfg() -> LaunchConfig {
    LaunchConfig::for_len(N, demo_kernels::BLOCK_SIZE)
}

fn stride_cfg() -> LaunchConfig {
    LaunchConfig::grid_stride(N, demo_kernels::BLOCK_SIZE, 264)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn saxpy_matches_cpu_on_device_and_managed_memory() {
    let gpu = gpu();
    let (x, y, a) = (input(1, N), input(2, N), 1.75f32);
    let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| a * x + y).collect();
    let (dx, mut dy) = (dev(&gpu, &x), dev(&gpu, &y));
    demo_kernels::saxpy::launch(&gpu, cfg(), a, &dx, &mut dy).unwrap();
    let got = read_dev(&gpu, &dy);
    let (mx, mut my) = (managed(&gpu, &x), managed(&gpu, &y));
    demo_kernels::saxpy::launch(&gpu, cfg(), a, &mx, &mut my).unwrap();
    let got_m = read_managed(&gpu, &my);
    for i in 0..N {
        assert!((got[i] - want[i]).abs() <= 1e-6, "device [{i}]");
        assert!((got_m[i] - want[i]).abs() <= 1e-6, "managed [{i}]");
    }
}

/// `reduce_sum`'s input: values whose f32 sum is exact in any order ([`exact_sum`]).
fn sum_input() -> SumInput {
    exact_sum::input(N, uniform(3))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn reduce_sum_matches_cpu_on_device_and_managed_memory() {
    let gpu = gpu();
    let x = sum_input();
    let dx = dev(&gpu, &x.values);
    let mut out = dev(&gpu, &[0.0]);
    demo_kernels::reduce_sum::launch(&gpu, stride_cfg(), &dx, &mut out).unwrap();
    let (ok, detail) = exact_sum::check(read_dev(&gpu, &out)[0], x.sum);
    assert!(ok, "device: {detail}");
    let mx = managed(&gpu, &x.values);
    let mut mout = managed(&gpu, &[0.0]);
    demo_kernels::reduce_sum::launch(&gpu, stride_cfg(), &mx, &mut mout).unwrap();
    let (ok, detail) = exact_sum::check(read_managed(&gpu, &mout)[0], x.sum);
    assert!(ok, "managed: {detail}");
}

/// The negative control of the test above (no GPU needed): on its input and grid (264 blocks of 256
/// threads: 15 whole grid-stride passes, a partial one, a 37-element tail), the sum in the kernel's
/// order passes the check, and the same sum without one warp, or without the tail, fails it.
#[test]
fn the_reduce_check_catches_a_missing_warp_or_tail() {
    let x = sum_input();
    let threads = stride_cfg().threads() as usize;
    let sum =
        |left_out: &dyn Fn(usize) -> bool| exact_sum::grid_stride_sum(&x.values, threads, left_out);
    assert!(exact_sum::check(sum(&|_| false), x.sum).0);
    let planted: [(&str, &dyn Fn(usize) -> bool); 2] = [
        ("warp 100", &|i| (i % threads) / 32 == 100),
        ("the tail", &|i| i >= N - 37),
    ];
    for (what, left_out) in planted {
        let (ok, detail) = exact_sum::check(sum(left_out), x.sum);
        assert!(!ok, "{what} left out, yet the check passed: {detail}");
    }
}

macro_rules! copy_test {
    ($name:ident, $kernel:ident) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn $name() {
            let gpu = gpu();
            let x = input(4, N);
            let poison = vec![f32::NAN; N];
            let dx = dev(&gpu, &x);
            let mut dy = dev(&gpu, &poison);
            demo_kernels::$kernel::launch(&gpu, stride_cfg(), &dx, &mut dy).unwrap();
            let got = read_dev(&gpu, &dy);
            assert!(
                got.iter().zip(&x).all(|(g, w)| g.to_bits() == w.to_bits()),
                "device"
            );
            let mx = managed(&gpu, &x);
            let mut my = managed(&gpu, &poison);
            demo_kernels::$kernel::launch(&gpu, stride_cfg(), &mx, &mut my).unwrap();
            let got = read_managed(&gpu, &my);
            assert!(
                got.iter().zip(&x).all(|(g, w)| g.to_bits() == w.to_bits()),
                "managed"
            );
        }
    };
}

copy_test!(copy_prefetch_l2_matches_cpu, copy_prefetch_l2);
copy_test!(
    copy_prefetch_l2_evict_last_matches_cpu,
    copy_prefetch_l2_evict_last
);
copy_test!(copy_prefetch_bulk_matches_cpu, copy_prefetch_bulk);

#[test]
#[ignore = "needs a CUDA GPU"]
fn launcher_refuses_bad_lengths_and_shapes_before_launching() {
    let gpu = gpu();
    let dx = dev(&gpu, &input(5, 100));
    let mut dy = dev(&gpu, &input(6, 99));
    let e = demo_kernels::saxpy::launch(&gpu, LaunchConfig::for_len(100, 128), 1.0, &dx, &mut dy)
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
    let mut empty = dev(&gpu, &[]);
    let e =
        demo_kernels::reduce_sum::launch(&gpu, LaunchConfig::for_len(100, 128), &dx, &mut empty)
            .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LengthMismatch {
                kernel: "reduce_sum",
                ..
            }
        ),
        "{e}"
    );
    let mut dy = dev(&gpu, &input(6, 100));
    let e = demo_kernels::saxpy::launch(&gpu, LaunchConfig::for_len(100, 2048), 1.0, &dx, &mut dy)
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidLaunch {
                kernel: "saxpy",
                ..
            }
        ),
        "{e}"
    );
    // And a good launch through a plain cudarc stream works too.
    let stream = gpu.stream().clone();
    demo_kernels::saxpy::launch(&stream, LaunchConfig::for_len(100, 128), 1.0, &dx, &mut dy)
        .unwrap();
    gpu.synchronize().unwrap();
}

/// The DSL test kernels, loaded on `gpu` for launching through a `Launcher` (their own
/// PTX table is empty on the host: `lookahead-tests` builds them).
fn test_kernels(gpu: &Gpu) -> lookahead::launch::Launcher {
    let module = gpu.load_ptx(lookahead_tests::ptx_kernels_ptx::PTX).unwrap();
    lookahead::launch::Launcher::new(module, gpu.stream().clone())
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_slice_of_user_structs_and_a_struct_by_value_run_on_the_gpu() {
    use ptx_kernels::{chase_reference, random_nodes, Node, Walk};
    let gpu = gpu();
    let on = test_kernels(&gpu);
    let n = 300_007;
    let values = input(11, n);
    let mut s = 0x9e37_79b9u64;
    let nodes = random_nodes(
        n,
        |k| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % k as u64) as usize
        },
        |i| values[i],
    );
    let chains = 50_000;
    let starts: Vec<u32> = (0..chains).map(|t| ((t * 7919) % n) as u32).collect();
    let walk = Walk {
        steps: 64,
        scale: 0.25,
    };
    // Device and managed memory for the nodes, the same kernel for both.
    let dnodes: CudaSlice<Node> = gpu.stream().clone_htod(&nodes).unwrap();
    let mnodes = lookahead::ManagedBuffer::from_slice(&gpu, &nodes).unwrap();
    let dstarts = gpu.stream().clone_htod(&starts).unwrap();
    let want = chase_reference(&nodes, &starts, walk);
    let cfg = LaunchConfig::for_len(chains, 256);
    let mut sums = dev(&gpu, &vec![f32::NAN; chains]);
    ptx_kernels::user_chase::launch(&on, cfg, &dnodes, &dstarts, walk, &mut sums).unwrap();
    assert_eq!(read_dev(&gpu, &sums), want, "device-memory nodes");
    let mut sums = lookahead::ManagedBuffer::from_slice(&gpu, &vec![f32::NAN; chains]).unwrap();
    ptx_kernels::user_chase::launch(&on, cfg, &mnodes, &dstarts, walk, &mut sums).unwrap();
    gpu.synchronize().unwrap();
    assert_eq!(sums.to_vec().unwrap(), want, "managed-memory nodes");
}

/// Dynamic shared memory of 16, 64 and 200 KiB per block: above 48 KiB the launch opts the
/// kernel in; more than the GPU has per block is an error naming the kernel.
#[test]
#[ignore = "needs a CUDA GPU"]
fn dynamic_shared_memory_beyond_48_kib_runs_on_the_gpu() {
    let gpu = gpu();
    let on = test_kernels(&gpu);
    for kib in [16, 64, 200] {
        let per_block = kib * 1024 / 4;
        let n = per_block * 40 - 1000;
        let x = input(13, n);
        let dx = dev(&gpu, &x);
        let mut dy = dev(&gpu, &vec![f32::NAN; n]);
        let cfg = LaunchConfig::new((40, 1, 1), (1024, 1, 1)).with_shared_mem(kib as u32 * 1024);
        ptx_kernels::intr_dynamic_shared::launch(&on, cfg, &dx, &mut dy).unwrap();
        let want = ptx_kernels::dynamic_shared_reference(&x, per_block);
        assert_eq!(read_dev(&gpu, &dy), want, "{kib} KiB");
    }
    let mut dy = dev(&gpu, &[0.0; 1024]);
    let cfg = LaunchConfig::new((1, 1, 1), (1024, 1, 1)).with_shared_mem(1 << 20);
    let e = ptx_kernels::intr_dynamic_shared::launch(&on, cfg, &dev(&gpu, &[0.0; 1024]), &mut dy)
        .unwrap_err()
        .to_string();
    assert!(e.contains("intr_dynamic_shared"), "{e}");
}

/// The kernel the emulator accepts for its `warp::sync` (`bar.warp.sync`): each lane reads
/// the next lane's shared-memory element after the warp barrier, on the GPU too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_warp_barrier_orders_shared_memory_on_the_gpu() {
    let gpu = gpu();
    let on = test_kernels(&gpu);
    let n = 64 * 1000;
    let x = input(12, n);
    let want: Vec<f32> = (0..n).map(|i| x[(i & !31) | ((i + 1) & 31)]).collect();
    let dx = dev(&gpu, &x);
    let mut dy = dev(&gpu, &vec![f32::NAN; n]);
    let cfg = LaunchConfig::for_len(n, 64);
    ptx_kernels::warp_synced_neighbour::launch(&on, cfg, &dx, &mut dy, 0).unwrap();
    assert_eq!(read_dev(&gpu, &dy), want);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_kernel_params_struct_runs_on_the_gpu() {
    let gpu = gpu();
    let on = test_kernels(&gpu);
    let (x, y0) = (input(12, N), input(13, N));
    let dx = dev(&gpu, &x);
    let mut dy = dev(&gpu, &y0);
    let args = ptx_kernels::AxpyArgs {
        x: &dx,
        y: &mut dy,
        a: -0.75,
        per_thread: u32::MAX,
    };
    ptx_kernels::user_axpy::launch(&on, stride_cfg(), args).unwrap();
    let got = read_dev(&gpu, &dy);
    for i in 0..N {
        // (The GPU may fuse the multiply and the add.)
        let want = (-0.75f32).mul_add(x[i], y0[i]);
        assert!(
            (got[i] - want).abs() <= 1e-6,
            "element {i}: {} vs {want}",
            got[i]
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn math_on_the_gpu_is_within_a_few_ulp_of_an_independent_reference() {
    let gpu = gpu();
    let on = test_kernels(&gpu);
    let x: Vec<f32> = input(14, 100_003).iter().map(|v| 4.0 * v).collect();
    let dx = dev(&gpu, &x);
    let mut o32 = dev(&gpu, &vec![f32::NAN; 8 * x.len()]);
    let mut o64 = gpu
        .stream()
        .clone_htod(&vec![f64::NAN; 4 * x.len()])
        .unwrap();
    let cfg = LaunchConfig::for_len(x.len(), 256);
    ptx_kernels::intr_math::launch(&on, cfg, &dx, &mut o32, &mut o64).unwrap();
    let got32 = read_dev(&gpu, &o32);
    let got64 = gpu.stream().clone_dtoh(&o64).unwrap();
    let differ = lookahead_tests::math::math_mismatches(&x, &got32, &got64);
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// Every accepted parameter kind and `#[prefetch_next]` form, the `level = auto` launchers
/// and a request queue, launched through the typed launchers on the GPU and checked against
/// the CPU (`ptx_kernels::kinds`; `tests/tests/emulator.rs` runs the same on the emulator).
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_parameter_kind_and_prefetch_form_matches_the_cpu_on_the_gpu() {
    use lookahead::launch::autotune::{Level, Variant};
    use lookahead::ManagedBuffer;
    use ptx_kernels::*;
    let gpu = gpu();
    let on = test_kernels(&gpu);
    let s = gpu.stream();
    let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
    let n = 1000;
    let x = small_integers(n, 1);
    let dx = dev(&gpu, &x);

    let mut y = dev(&gpu, &vec![f32::NAN; n]);
    let c = SCALARS;
    let cfg = LaunchConfig::for_len(n, 128);
    let (a, b) = (c.a, c.b);
    kind_scalars::launch(
        &on, cfg, a, b, c.c, c.d, c.e, c.f, c.g, c.h, c.i, c.j, c.k, c.l, &dx, &mut y,
    )
    .unwrap();
    let want: Vec<f32> = x.iter().map(|v| v + c.weighted()).collect();
    assert_eq!(read_dev(&gpu, &y), want, "kind_scalars");

    let a = s.clone_htod(&[7u32]).unwrap();
    let mut b = s.clone_htod(&[0u32]).unwrap();
    let cm = ManagedBuffer::from_slice(&gpu, &[-2.5f64]).unwrap();
    let mut dm = ManagedBuffer::from_slice(&gpu, &[f64::NAN]).unwrap();
    kind_views::launch(&on, one, &a, &mut b, &cm, &mut dm).unwrap();
    gpu.synchronize().unwrap();
    assert_eq!(
        (s.clone_dtoh(&b).unwrap()[0], dm.to_vec().unwrap()[0]),
        (7, -2.5)
    );

    let (mut y, mut out) = (dev(&gpu, &vec![f32::NAN; n]), dev(&gpu, &[3.0]));
    kind_prefetch_forms::launch(&on, one, &dx, &mut y, &mut out).unwrap();
    let (want_y, want_out) = prefetch_forms_reference(&x, 3.0);
    assert_eq!(read_dev(&gpu, &y), want_y, "kind_prefetch_forms: y");
    assert_eq!(read_dev(&gpu, &out), [want_out], "kind_prefetch_forms: out");

    let nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            next: 0,
            value: x[i],
        })
        .collect();
    let dnodes = s.clone_htod(&nodes).unwrap();
    let mut io_out = ManagedBuffer::from_slice(&gpu, &vec![f32::NAN; n]).unwrap();
    let first = Node {
        next: 0,
        value: 2.0,
    };
    let io = IoArgs {
        input: &dnodes,
        output: &mut io_out,
        scale: 0.5,
        _pad: 0,
    };
    kind_user_types::launch(&on, cfg, &dnodes, first, io).unwrap();
    gpu.synchronize().unwrap();
    let want: Vec<f32> = x.iter().map(|v| (2.0 * v + 2.0) * 0.5).collect();
    assert_eq!(io_out.to_vec().unwrap(), want, "kind_user_types");

    let mut params = dev(&gpu, &[f32::NAN]);
    kind_names::launch(&on, one, 1, 2, &dev(&gpu, &[0.5]), &mut params, 3, 4).unwrap();
    assert_eq!(read_dev(&gpu, &params), [10.5], "kind_names");

    // Each launch runs once on its arguments, whichever candidate the tuner takes.
    let sum: f32 = x.iter().sum();
    for variant in [
        None,
        Some(Variant::new(Level::Bulk, 3)),
        Some(Variant::PLAIN),
    ] {
        let mut out = dev(&gpu, &[0.0]);
        match variant {
            None => kind_auto_sum::launch(&on, cfg, &dx, &mut out),
            Some(v) => kind_auto_sum::launch_variant(v, &on, cfg, &dx, &mut out),
        }
        .unwrap();
        assert_eq!(read_dev(&gpu, &out), [sum], "kind_auto_sum {variant:?}");
    }
    let _: Option<Variant> = kind_auto_sum::auto_choice(&on);
    assert_eq!(
        kind_auto_sum::ENTRIES[3],
        (Variant::new(Level::Bulk, 0), "kind_auto_sum__bulk")
    );
    assert_eq!(kind_auto_sum::CANDIDATES.len(), 1 + 3 * 2);

    let lists = ManagedBuffer::from_slice(&gpu, &x).unwrap();
    let offsets: Vec<u32> = vec![0, 100, 100, 640, n as u32];
    let weights = vec![1.0f32, -2.0, 3.0, 0.5];
    let mut sums = dev(&gpu, &[f32::NAN; 4]);
    let queue = lookahead_device::uvm::requests::RequestQueue::disabled();
    let (doff, dw) = (s.clone_htod(&offsets).unwrap(), dev(&gpu, &weights));
    kind_queued::launch(&on, one, &lists, &doff, &dw, &mut sums, queue).unwrap();
    assert_eq!(
        read_dev(&gpu, &sums),
        queued_reference(&x, &offsets, &weights),
        "kind_queued"
    );

    let idx: Vec<u32> = (0..300).map(|i| (i * 37 % n) as u32).collect();
    let mut got = dev(&gpu, &vec![f32::NAN; idx.len()]);
    kind_gather::launch(&on, one, &dx, &s.clone_htod(&idx).unwrap(), &mut got).unwrap();
    let want: Vec<f32> = idx.iter().map(|&i| x[i as usize]).collect();
    assert_eq!(read_dev(&gpu, &got), want, "kind_gather");
}
