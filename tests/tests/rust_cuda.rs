//! The Rust-CUDA-style kernels of `examples/rust-cuda`, built by `cuda_builder`
//! (lookahead-cuda-builder) for sm_80 and sm_90: every kernel is an entry, shared memory
//! is PTX's `.shared` state space (the link-time pass moved it there), the only externs are
//! the driver's, and `ptxas` accepts both modules.

use lookahead_tests::rust_cuda_kernels_ptx::PTX;

const KERNELS: [&str; 6] = [
    "vecadd",
    "transpose",
    "reduce_sum",
    "gemm_tile",
    "heap_sum",
    "api_check",
];

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
