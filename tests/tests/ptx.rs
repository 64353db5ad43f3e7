//! What the builder emits for `demo-kernels`, checked without a GPU: one module per
//! architecture, every kernel present, nothing unresolved, each prefetch instruction
//! exactly on the architectures that have it, and `ptxas` accepting every file.

use lookahead_builder::{ptx, CudaTools};
use lookahead_tests::demo_kernels_ptx::{PTX, PTX_TOOLCHAIN};

fn module(cc: u32) -> &'static str {
    lookahead_tests::module_for(PTX, cc)
}

#[test]
fn one_module_per_requested_architecture() {
    let archs: Vec<u32> = PTX.iter().map(|(a, _)| *a).collect();
    assert_eq!(archs, [70, 80, 90]);
    for (cc, text) in PTX {
        assert_eq!(ptx::target(text), Some(format!("sm_{cc}").as_str()));
        assert_eq!(
            ptx::isa_version(text),
            Some("8.0"),
            "PTX ISA is pinned to 8.0"
        );
    }
    assert!(PTX_TOOLCHAIN.contains("LLVM"), "{PTX_TOOLCHAIN}");
}

#[test]
fn every_kernel_has_an_entry_and_nothing_is_unresolved() {
    for (cc, text) in PTX {
        let mut entries = ptx::entries(text);
        entries.sort();
        let mut want = demo_kernels::KERNELS.to_vec();
        want.sort();
        assert_eq!(entries, want, "sm_{cc}");
        assert!(
            ptx::unresolved_functions(text).is_empty(),
            "sm_{cc}: {:?}",
            ptx::unresolved_functions(text)
        );
    }
}

fn body(cc: u32, kernel: &str) -> &'static str {
    lookahead_tests::entry_in(PTX, cc, kernel)
}

#[test]
fn plain_l2_prefetch_everywhere() {
    for cc in [70, 80, 90] {
        assert!(
            body(cc, "copy_prefetch_l2").contains("prefetch.global.L2 ["),
            "sm_{cc}"
        );
    }
}

#[test]
fn evict_last_only_from_sm_80() {
    let kernel = "copy_prefetch_l2_evict_last";
    assert!(!body(70, kernel).contains("L2::evict_last"));
    assert!(
        body(70, kernel).contains("prefetch.global.L2 ["),
        "sm_70 falls back"
    );
    for cc in [80, 90] {
        assert!(
            body(cc, kernel).contains("prefetch.global.L2::evict_last"),
            "sm_{cc}"
        );
    }
    // And nowhere else: no other kernel uses it.
    for cc in [70, 80, 90] {
        assert_eq!(
            module(cc).matches("L2::evict_last [").count(),
            if cc >= 80 { 1 } else { 0 }
        );
    }
}

#[test]
fn bulk_prefetch_only_on_sm_90() {
    let kernel = "copy_prefetch_bulk";
    for cc in [70, 80] {
        assert!(!module(cc).contains("cp.async.bulk"), "sm_{cc}");
        assert!(
            body(cc, kernel).contains("prefetch.global.L2 ["),
            "sm_{cc} falls back"
        );
    }
    assert!(body(90, kernel).contains("cp.async.bulk.prefetch.L2.global"));
}

#[test]
fn reduction_uses_warp_shuffles_and_float_atomics() {
    for cc in [70, 80, 90] {
        let b = body(cc, "reduce_sum");
        assert!(b.contains("shfl.sync.down.b32"), "sm_{cc}");
        assert!(b.contains("atom.add.f32"), "sm_{cc}");
    }
}

#[test]
fn ptxas_accepts_every_module() {
    lookahead_tests::assert_ptxas_accepts("demo_kernels", PTX);
    // And a broken module is rejected, so this test can fail.
    let ptxas = CudaTools::discover().ptxas.expect("ptxas was found above");
    let bad = std::env::temp_dir().join(format!("lookahead-broken-{}.ptx", std::process::id()));
    std::fs::write(&bad, module(90).replace("ret;", "not_an_instruction;")).unwrap();
    assert!(ptx::validate_with_ptxas(&ptxas, &bad, "sm_90").is_err());
    std::fs::remove_file(&bad).ok();
}
