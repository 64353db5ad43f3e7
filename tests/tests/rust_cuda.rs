//! The Rust-CUDA-style kernels of `examples/rust-cuda`, built by `cuda_builder`
//! (lookahead-cuda-builder) for sm_80 and sm_90: every kernel is an entry, shared memory
//! is PTX's `.shared` state space (the link-time pass moved it there), the only externs are
//! the driver's, `ptxas` accepts both modules, `compute_XX` cfgs hold as under Rust-CUDA,
//! and `build_args` features reach the nested build.

use lookahead_tests::rust_cuda_kernels_ptx::PTX;

const KERNELS: [&str; 12] = [
    "vecadd",
    "transpose",
    "reduce_sum",
    "gemm_tile",
    "heap_sum",
    "api_check",
    "grid_transform",
    "float_ext",
    "float_bits",
    "wide_shuffles",
    "arch_features",
    "dependencies",
];

/// The PTX built with `build_args(&["--features", "extra-kernel"])` for sm_90.
const EXTRA_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/rust_cuda_extra.ptx"));

/// The body of entry `kernel` in `module`, up to the next entry.
fn body<'a>(module: &'a str, kernel: &str) -> &'a str {
    let start = module
        .find(&format!(".entry {kernel}("))
        .unwrap_or_else(|| panic!("no entry {kernel}"));
    let rest = &module[start..];
    let end = rest[1..].find(".entry ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

#[test]
fn both_architectures_are_built() {
    let archs: Vec<u32> = PTX.iter().map(|(cc, _)| *cc).collect();
    assert_eq!(archs, [80, 90]);
    for (cc, text) in PTX {
        assert!(text.contains(&format!(".target sm_{cc}")), "sm_{cc}");
    }
}

#[test]
fn every_kernel_is_an_entry_under_its_own_name() {
    for (cc, text) in PTX {
        for kernel in KERNELS {
            assert!(
                text.contains(&format!(".visible .entry {kernel}(")),
                "sm_{cc}: {kernel}"
            );
        }
    }
}

#[test]
fn shared_arrays_are_in_shared_memory() {
    for (cc, text) in PTX {
        // transpose: one 32 x 33 f32 tile; gemm_tile: two 16 x 16 tiles.
        let transpose = body(text, "transpose");
        assert!(
            transpose.contains(".shared .align 4 .b8 __lookahead_addrspace_shared__")
                && transpose.contains("[4224]"),
            "sm_{cc}"
        );
        assert!(
            transpose.contains("st.shared.") && transpose.contains("ld.shared."),
            "sm_{cc}"
        );
        let gemm = body(text, "gemm_tile");
        assert_eq!(
            gemm.matches("[1024];").count(),
            2,
            "sm_{cc}: two 1 KiB tiles"
        );
        assert!(gemm.contains("ld.shared."), "sm_{cc}");
        // No shared symbol is left in the generic (global) space.
        let left = text
            .lines()
            .find(|l| l.contains(".global") && l.contains("__lookahead_addrspace_shared__"));
        assert_eq!(left, None, "sm_{cc}: shared array left in global memory");
    }
}

#[test]
fn dynamic_shared_memory_is_an_extern_shared_array() {
    for (cc, text) in PTX {
        assert!(
            text.contains(".extern .shared .align 16 .b8 __lookahead_addrspace_shared__dynamic[];"),
            "sm_{cc}"
        );
        let reduce = body(text, "reduce_sum");
        assert!(
            reduce.contains("st.shared.b32") && reduce.contains("ld.shared.b32"),
            "sm_{cc}"
        );
        assert!(reduce.contains("shfl.sync.down.b32"), "sm_{cc}");
        assert!(reduce.contains("atom.relaxed.gpu.add.f32"), "sm_{cc}");
    }
}

#[test]
fn only_driver_functions_are_external() {
    for (cc, text) in PTX {
        let externs: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(".extern .func"))
            .map(|l| l.split_whitespace().last().unwrap_or(""))
            .collect();
        for name in &externs {
            assert!(
                ["malloc", "free", "vprintf"].contains(name),
                "sm_{cc}: unexpected extern {name}"
            );
        }
        assert!(
            externs.contains(&"vprintf") && externs.contains(&"malloc"),
            "sm_{cc}: heap_sum prints from a Vec"
        );
    }
}

#[test]
fn ptxas_accepts_both_modules() {
    lookahead_tests::assert_ptxas_accepts("rust_cuda_kernels", PTX);
}

#[test]
fn compute_cfgs_hold_from_their_architecture_on() {
    for (cc, text) in PTX {
        // 60 + 70 + 80 = 210.0 for sm_80; + 90 = 300.0 for sm_90 (stored as its bits).
        let (sum, bits) = match cc {
            80 => (210.0f32, "1129447424"),
            _ => (300.0f32, "1133903872"),
        };
        assert_eq!(sum.to_bits().to_string(), bits);
        let body = body(text, "arch_features");
        assert!(
            body.contains(bits) || body.contains(&format!("0f{:08X}", sum.to_bits())),
            "sm_{cc}: arch_features does not store {sum}:\n{body}"
        );
    }
}

#[test]
fn float_atomics_have_bitwise_operations_and_shuffles_move_8_to_128_bits() {
    for (cc, text) in PTX {
        let bits = body(text, "float_bits");
        for op in [
            "atom.relaxed.gpu.or.b32",
            "atom.relaxed.gpu.and.b32",
            "atom.relaxed.cta.xor.b32",
        ] {
            assert!(bits.contains(op), "sm_{cc}: float_bits lacks {op}");
        }
        // A u128 xor-shuffle is a 32-bit shuffle per word (in a loop over the four) and
        // one 16-byte store; the GPU run checks the values.
        let shuffles = body(text, "wide_shuffles");
        assert!(shuffles.contains("shfl.sync.bfly.b32"), "sm_{cc}");
        assert!(
            shuffles.contains("st.global.v2.b64"),
            "sm_{cc}: no 128-bit store"
        );
        assert!(shuffles.contains("shfl.sync.down.b32") && shuffles.contains("shfl.sync.idx.b32"));
        assert!(shuffles.contains("st.global.b8") && shuffles.contains("st.global.b16"));
    }
}

#[test]
fn build_args_features_reach_the_kernel_crate() {
    assert!(EXTRA_PTX.contains(".visible .entry extra_marker("));
    assert!(EXTRA_PTX.contains(".target sm_90"));
    for (cc, text) in PTX {
        assert!(
            !text.contains("extra_marker"),
            "sm_{cc}: built without the feature"
        );
    }
    lookahead_tests::assert_ptxas_accepts("rust_cuda_extra", &[(90, EXTRA_PTX)]);
}

/// Builds `tests/cuda-fixtures/misspelt-cfg` for sm_80 in the build folders the build
/// scripts use, and returns its PTX and the warnings the builder showed.
fn build_misspelt_cfg() -> (String, Vec<String>) {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cuda-fixtures/misspelt-cfg");
    let mut builder = cuda_builder::CudaBuilder::new(fixture)
        .arch(cuda_builder::NvvmArch::Compute80)
        .kernel_builder()
        .expect("configuring the fixture's build");
    if std::env::var_os("LOOKAHEAD_PTX_TARGET_DIR").is_none() {
        let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("CARGO_TARGET_TMPDIR is <target>/tmp");
        builder = builder.target_dir(target.join("lookahead-ptx"));
    }
    let built = builder.build().expect("the fixture builds");
    let ptx = std::fs::read_to_string(&built[0].path).expect("reading its PTX");
    (ptx, built[0].warnings.clone())
}

#[test]
fn a_misspelt_architecture_cfg_is_a_warning_and_a_known_one_holds() {
    let (ptx, warnings) = build_misspelt_cfg();
    let unexpected: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("unexpected `cfg` condition value"))
        .collect();
    assert_eq!(unexpected.len(), 1, "{warnings:#?}");
    assert!(unexpected[0].contains("compute_71"), "{}", unexpected[0]);
    // compute_70 is known (no warning) and holds for sm_80: 70.0 is stored.
    let seventy = 70.0f32.to_bits();
    assert!(
        ptx.contains(&seventy.to_string()) || ptx.contains(&format!("0f{seventy:08X}")),
        "{ptx}"
    );
}
