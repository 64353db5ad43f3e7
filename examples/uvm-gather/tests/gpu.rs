//! GPU tests of the gather under every policy. They need a CUDA GPU and fail (never pass)
//! without one: run them with `--ignored` on a GPU machine (`scripts/gpu-tests.sh`).

use lookahead::{Error, Gpu};
use lookahead_uvm::{MachineProfile, Policy, ServiceConfig, UvmRuntime};
use rand::rngs::StdRng;
use rand::SeedableRng;
use uvm_gather::gpu::{GpuGather, Outcome};
use uvm_gather::{cpu_gather, first_mismatch, random_picks, random_table, Shape};
use uvm_gather_kernels::{STATS, STAT_MOVED, STAT_READY};

fn gpu() -> Gpu {
    Gpu::new(0).expect("these tests need a CUDA GPU")
}

/// Every policy and `Auto`, cold (every page on the host, the pull cache empty) and warm,
/// returns the CPU reference's rows; GPU-driven requests ask for each tile once and every
/// row waits for its tile's arrival, the pull copies each tile once, and warm runs of both
/// move nothing.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_policy_gathers_the_cpu_reference_cold_and_warm() {
    let gpu = gpu();
    let seed = rand::random();
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    // 32 MiB in 512 tiles of 64 KiB; 4096 rows gathered.
    let shape = Shape::new(8192, 1024, 16).unwrap();
    let table = random_table(shape, &mut rng);
    let picks = random_picks(4096, shape.rows, &mut rng);
    let want = cpu_gather(&table, shape.row_words, &picks);
    let tiles = shape.tiles_of(&picks).len() as u32;
    let n = picks.len() as u32;
    let profile = MachineProfile::cached_or_probe(&gpu).unwrap();
    let rt = UvmRuntime::new(&gpu, shape.tiles(), profile, ServiceConfig::default()).unwrap();
    let mut gather = GpuGather::new(&gpu, shape, &table, &picks).unwrap();
    let check = |got: &Outcome, what: &str| {
        assert_eq!(
            first_mismatch(&got.rows, &want, shape.row_words),
            None,
            "{what}"
        );
    };
    for policy in Policy::CONCRETE.iter().copied().chain([Policy::Auto]) {
        gather.table_mut().prepare(policy).unwrap();
        gather.table_mut().evict_to_host(&rt).unwrap();
        let cold = gather.run(policy, &rt).unwrap();
        let warm = gather.run(policy, &rt).unwrap();
        let what = |pass| format!("{} {pass} (ran {})", policy.name(), cold.policy.name());
        check(&cold, &what("cold"));
        check(&warm, &what("warm"));
        println!(
            "{}: cold {:?}, warm {:?}",
            what("cold"),
            cold.stats,
            warm.stats
        );
        match cold.policy {
            Policy::GpuRequests | Policy::GpuPull => {
                assert_eq!(cold.stats, [n, 0, 0, tiles], "{}", what("cold"));
                assert_eq!(warm.stats, [n, 0, 0, 0], "{}", what("warm"));
            }
            _ => {
                assert_eq!(cold.stats, [0; STATS], "{}", what("cold"));
                assert_eq!(warm.stats, [0; STATS], "{}", what("warm"));
            }
        }
    }
    gather.table_mut().make_resident().unwrap();
    let resident = gather.run(Policy::Faults, &rt).unwrap();
    check(&resident, "resident");
    assert_eq!(resident.stats[STAT_READY] + resident.stats[STAT_MOVED], 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_pick_past_the_table_is_refused() {
    let gpu = gpu();
    let shape = Shape::new(64, 8, 4).unwrap();
    let table = vec![7u32; shape.words()];
    let err = GpuGather::new(&gpu, shape, &table, &[3, 64]).err().unwrap();
    assert!(
        matches!(&err, Error::InvalidArgument { reason, .. } if reason.contains("pick 64")),
        "{err}"
    );
    let short = GpuGather::new(&gpu, shape, &table[1..], &[3])
        .err()
        .unwrap();
    assert!(matches!(short, Error::InvalidArgument { .. }), "{short}");
}
