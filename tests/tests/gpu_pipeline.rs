//! On the GPU: the asynchronous-copy runtime's kernels of `tests/ptx-kernels` (the typed
//! pipeline in each copy kind, the attribute's loops, the raw instructions) give the CPU
//! reference's result, as they do on the emulator (`emulator_pipeline.rs`). The module is
//! the one the build script compiled (`lookahead_tests::ptx_kernels_ptx`), launched by
//! entry name with each slice as a pointer and a length.
//!
//! `cargo test -p lookahead-tests --test gpu_pipeline -- --ignored` (on a machine with a CUDA
//! GPU; these tests FAIL, not pass, when no GPU is found).

use cudarc::driver::{CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use lookahead::Gpu;
use ptx_kernels::pipeline as k;

fn gpu() -> Gpu {
    Gpu::new(0).unwrap_or_else(|e| panic!("these tests need a CUDA GPU: {e}"))
}

fn words(n: usize, seed: u32) -> Vec<u32> {
    let mut s = seed.max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s
        })
        .collect()
}

/// Launches `entry` of the test module with `slices` (pointer, length each) and then
/// `scalars`; returns the slices' contents afterwards.
fn launch(
    gpu: &Gpu,
    entry: &str,
    cfg: (u32, u32),
    slices: &mut [&mut Vec<u32>],
    scalars: &[u32],
) -> Vec<Vec<u32>> {
    let module = gpu.load_ptx(lookahead_tests::ptx_kernels_ptx::PTX).unwrap();
    let f = module.function(entry).unwrap();
    let stream = gpu.stream();
    let bufs: Vec<CudaSlice<u32>> = slices
        .iter()
        .map(|v| stream.clone_htod(v.as_slice()).unwrap())
        .collect();
    let ptrs: Vec<(u64, usize)> = bufs
        .iter()
        .map(|b| (b.device_ptr(stream).0, b.len()))
        .collect();
    let mut l = stream.launch_builder(&f);
    for (p, n) in &ptrs {
        l.arg(p).arg(n);
    }
    for s in scalars {
        l.arg(s);
    }
    let config = LaunchConfig {
        grid_dim: (cfg.0, 1, 1),
        block_dim: (cfg.1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the entry takes these slices as pointer and length pairs, then these u32s.
    unsafe { l.launch(config) }.unwrap();
    gpu.synchronize().unwrap();
    bufs.iter().map(|b| stream.clone_dtoh(b).unwrap()).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pipelined_sums_match_the_cpu_in_every_copy_kind() {
    let gpu = gpu();
    let blocks = 40usize;
    // A short last chunk of 76 words: 304 bytes, which bulk copies (whole 16-byte units, a
    // trap otherwise) can take.
    let mut x = words(k::STAGE * 333 + 76, 7);
    let want = k::pipe_sum_reference(&x, blocks);
    let mut entries = vec![
        "pipe_sum_cp_async",
        "pipe_sum_portable",
        "attr_sum_cp_async",
        "attr_sum_portable",
    ];
    if gpu.compute_capability() >= 90 {
        entries.push("pipe_sum_bulk");
    }
    for entry in entries {
        let mut out = vec![u32::MAX; blocks * 256];
        let got = launch(
            &gpu,
            entry,
            (blocks as u32, 256),
            &mut [&mut x, &mut out],
            &[],
        );
        assert_eq!(got[1], want, "{entry}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_staged_targets_and_the_raw_instructions_match_the_cpu() {
    let gpu = gpu();
    let rows = 1000;
    let mut table = words(rows * k::TWO_ROW, 3);
    let mut idx: Vec<u32> = (0..2 * rows as u32)
        .map(|i| (i * 7 + 3) % rows as u32)
        .collect();
    let mut out = vec![u32::MAX; rows * k::TWO_ROW];
    let got = launch(
        &gpu,
        "attr_two",
        (8, 32),
        &mut [&mut table, &mut idx, &mut out],
        &[],
    );
    assert_eq!(got[2], k::attr_two_reference(&table, &idx));

    let mut x = words(64, 9);
    let mut out = vec![u32::MAX; 20];
    let got = launch(&gpu, "raw_cp_async", (1, 32), &mut [&mut x, &mut out], &[]);
    assert_eq!(got[1][..16], x[..16]);
    assert_eq!(got[1][16..], [x[16], x[17], x[18], 0], "zero fill");

    let mut seen = vec![0u32; 64];
    let got = launch(&gpu, "raw_mbarrier", (1, 64), &mut [&mut seen], &[]);
    assert!(got[0].iter().all(|&s| s == 2), "{:?}", got[0]);

    if gpu.compute_capability() >= 90 {
        let mut out = vec![u32::MAX; 64];
        let got = launch(&gpu, "raw_bulk", (1, 64), &mut [&mut x, &mut out], &[]);
        assert_eq!(got[1], x);
    }
}

/// `stages = auto, copy = auto`: the tuned launches take turns over the candidate pipelines
/// (and the plain entry's loads and stores), every launch gives the CPU's sums, and the
/// tuner settles on one of them. Prints what it measured.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_pipeline_with_auto_stages_is_tuned_and_every_launch_matches_the_cpu() {
    use lookahead::launch::autotune::AutoTuner;
    let gpu = gpu();
    let blocks = 132usize;
    let x = words(k::STAGE * 4000 + 76, 11);
    let want = k::pipe_sum_reference(&x, blocks);
    let dx = gpu.stream().clone_htod(&x).unwrap();
    let cfg = lookahead::launch::LaunchConfig::grid_stride(blocks * 256, 256, blocks as u32);
    // The kernels' own PTX table is empty on the host: launch through the test module.
    let module = gpu.load_ptx(lookahead_tests::ptx_kernels_ptx::PTX).unwrap();
    let on = lookahead::launch::Launcher::new(module, gpu.stream().clone());
    let mut launches = 0;
    while k::attr_sum_auto::auto_choice(&on).is_none() {
        assert!(launches < 200, "the tuner did not settle in 200 launches");
        let mut out = gpu
            .stream()
            .clone_htod(&vec![u32::MAX; blocks * 256])
            .unwrap();
        k::attr_sum_auto::launch(&on, cfg, &dx, &mut out).unwrap();
        gpu.synchronize().unwrap();
        assert_eq!(
            gpu.stream().clone_dtoh(&out).unwrap(),
            want,
            "launch {launches}"
        );
        launches += 1;
    }
    let choice = k::attr_sum_auto::auto_choice(&on).unwrap();
    assert!(k::attr_sum_auto::CANDIDATES.contains(&choice), "{choice}");
    for s in AutoTuner::global().status_all() {
        if s.key.kernel == "attr_sum_auto" {
            println!("attr_sum_auto: chose {choice} after {launches} launches");
            for c in &s.candidates {
                let ms = c.median_ms.map_or("-".into(), |m| format!("{m:.4} ms"));
                println!("  {:<18} {ms} ({} samples)", c.variant.name(), c.samples);
            }
        }
    }
}
