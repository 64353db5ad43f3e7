//! PTX tests of the DSL, in the spirit of Rust-CUDA's compile tests: `tests/ptx-kernels`
//! has one kernel per device intrinsic group and per `#[prefetch_next]` form; the build
//! script compiled it for sm_70, sm_80 and sm_90. Each test checks that the expected
//! instruction is emitted inside the kernel's loop (between a loop label and the branch
//! back to it), and that architectures without the instruction get none of it.

use lookahead_builder::ptx;
use lookahead_tests::lines_inside_loops;
use lookahead_tests::ptx_kernels_ptx::PTX;

const ARCHS: [u32; 3] = [70, 80, 90];

fn module(cc: u32) -> &'static str {
    lookahead_tests::module_for(PTX, cc)
}

fn body(cc: u32, kernel: &str) -> &'static str {
    lookahead_tests::entry_in(PTX, cc, kernel)
}

/// `needle` occurs inside a loop of `kernel` on `cc`.
fn in_loop(cc: u32, kernel: &str, needle: &str) -> bool {
    !lines_inside_loops(body(cc, kernel), needle).is_empty()
}

#[test]
fn every_test_kernel_is_an_entry_and_nothing_is_unresolved() {
    for cc in ARCHS {
        let text = module(cc);
        let entries = ptx::entries(text);
        for k in ptx_kernels::KERNELS {
            assert!(
                entries.iter().any(|e| e == k),
                "sm_{cc} lacks {k}: {entries:?}"
            );
        }
        assert_eq!(
            entries.iter().any(|e| e == "pf_bulk_sm90"),
            cc >= 90,
            "sm_{cc}"
        );
        assert!(ptx::unresolved_functions(text).is_empty(), "sm_{cc}");
    }
}

#[test]
fn lowered_parameters_are_pointer_and_length_pairs() {
    // pf_range_l1(x: &[f32], y: &mut [f32]) -> (ptr, len, ptr, len)
    let text = module(90);
    let start = text.find(".entry pf_range_l1(").unwrap();
    let sig = &text[start..start + text[start..].find(')').unwrap()];
    assert_eq!(sig.matches(".param .u64").count(), 4, "{sig}");
    // pf_iter_mut(y: &mut [i32], delta: i32) -> (ptr, len, i32)
    let start = text.find(".entry pf_iter_mut(").unwrap();
    let sig = &text[start..start + text[start..].find(')').unwrap()];
    assert_eq!(sig.matches(".param .u64").count(), 2, "{sig}");
    assert_eq!(sig.matches(".param .u32").count(), 1, "{sig}");
}

#[test]
fn range_loops_prefetch_inside_the_loop_at_the_requested_level() {
    for cc in ARCHS {
        assert!(
            in_loop(cc, "pf_range_l1", "prefetch.global.L1 ["),
            "sm_{cc}"
        );
        assert!(
            !body(cc, "pf_range_l1").contains("prefetch.global.L2"),
            "sm_{cc}"
        );
        assert!(
            in_loop(cc, "pf_range_l2", "prefetch.global.L2 ["),
            "sm_{cc}"
        );
        assert!(
            in_loop(cc, "pf_range_inclusive", "prefetch.global.L2 ["),
            "sm_{cc}"
        );
        assert!(
            in_loop(cc, "pf_grid_stride", "prefetch.global.L2 ["),
            "sm_{cc}"
        );
    }
}

#[test]
fn prefetch_is_bounded_by_the_loop_end() {
    // The prefetch is guarded: a compare-and-branch sits between the loop label and it.
    for cc in ARCHS {
        let b = body(cc, "pf_range_l2");
        let at = b.find("prefetch.global.L2 [").unwrap();
        let before = &b[..at];
        let header = before
            .rfind("Loop Header")
            .expect("prefetch outside any loop");
        assert!(
            before[header..].contains("setp."),
            "sm_{cc}: unguarded prefetch"
        );
    }
}

#[test]
fn evict_last_and_evict_normal_only_from_sm_80_with_portable_fallback() {
    for (kernel, insn) in [
        ("pf_evict_last_portable", "prefetch.global.L2::evict_last ["),
        (
            "pf_evict_normal_portable",
            "prefetch.global.L2::evict_normal [",
        ),
    ] {
        assert!(!body(70, kernel).contains("::evict_"), "sm_70 {kernel}");
        assert!(
            in_loop(70, kernel, "prefetch.global.L2 ["),
            "sm_70 falls back"
        );
        for cc in [80, 90] {
            assert!(in_loop(cc, kernel, insn), "sm_{cc} {kernel}");
        }
    }
}

#[test]
fn iterator_loops_prefetch_inside_the_loop() {
    for cc in ARCHS {
        assert!(in_loop(cc, "pf_iter", "prefetch.global.L2 ["), "sm_{cc}");
        assert!(
            in_loop(cc, "pf_iter_mut", "prefetch.global.L1 ["),
            "sm_{cc}"
        );
        assert!(
            in_loop(cc, "pf_device_fn", "prefetch.global.L2 ["),
            "sm_{cc}: #[device_fn]"
        );
        assert!(
            in_loop(cc, "pf_chunks_l2", "prefetch.global.L2 ["),
            "sm_{cc}"
        );
    }
}

#[test]
fn bulk_chunks_use_the_bulk_engine_on_sm_90_only() {
    let k = "pf_chunks_bulk_portable";
    assert!(in_loop(90, k, "cp.async.bulk.prefetch.L2.global ["));
    assert!(in_loop(
        90,
        "pf_bulk_sm90",
        "cp.async.bulk.prefetch.L2.global ["
    ));
    for cc in [70, 80] {
        assert!(!module(cc).contains("cp.async.bulk"), "sm_{cc}");
        assert!(
            in_loop(cc, k, "prefetch.global.L2 ["),
            "sm_{cc} falls back per line"
        );
    }
}

#[test]
fn managed_memory_gets_the_l2_prefetch_whatever_the_level() {
    for cc in ARCHS {
        let b = body(cc, "pf_managed_bulk");
        assert!(!b.contains("cp.async.bulk"), "sm_{cc}");
        assert!(
            in_loop(cc, "pf_managed_bulk", "prefetch.global.L2 ["),
            "sm_{cc}"
        );
    }
}

#[test]
fn level_auto_compiles_an_entry_per_level_and_only_those_prefetch() {
    for cc in ARCHS {
        let plain = body(cc, "pf_auto");
        assert!(
            !plain.contains("prefetch"),
            "sm_{cc}: pf_auto must not prefetch"
        );
        assert!(
            in_loop(cc, "pf_auto__l2", "prefetch.global.L2 ["),
            "sm_{cc}: the l2 entry prefetches inside its loop"
        );
        // Before sm_80 the evict_last candidate falls back to plain `prefetch.global.L2`.
        let evict_last = if cc >= 80 {
            "prefetch.global.L2::evict_last ["
        } else {
            "prefetch.global.L2 ["
        };
        assert!(
            in_loop(cc, "pf_auto__l2_evict_last", evict_last),
            "sm_{cc}: the evict_last entry prefetches inside its loop"
        );
        assert!(!body(cc, "pf_auto__l2").contains("prefetch.global.L1"));
        // Same parameters, the distance last: the launcher passes the same arguments to any.
        let sig = |k: &str| {
            let text = module(cc);
            let start = text.find(&format!(".entry {k}(")).unwrap();
            let end = start + text[start..].find(')').unwrap();
            text[start..end].replace(k, "K")
        };
        for k in ["pf_auto__l2", "pf_auto__l2_evict_last"] {
            assert_eq!(sig("pf_auto"), sig(k), "sm_{cc} {k}");
        }
        assert!(
            sig("pf_auto").trim_end().ends_with(".u32 K_param_4"),
            "sm_{cc}: {}",
            sig("pf_auto")
        );
        // `distance = auto`: the distance is read from that parameter and multiplies the
        // chunk size in the loop.
        assert!(
            in_loop(cc, "pf_tuned__l2", "prefetch.global.L2 ["),
            "sm_{cc}"
        );
        let bulk = if cc >= 90 {
            "cp.async.bulk.prefetch.L2.global ["
        } else {
            "prefetch.global.L2 ["
        };
        assert!(in_loop(cc, "pf_tuned__bulk", bulk), "sm_{cc}");
        let b = body(cc, "pf_tuned__bulk");
        assert!(
            b.contains("[pf_tuned__bulk_param_4]"),
            "sm_{cc}: the distance is read"
        );
        assert!(
            b.contains("max.u32") && b.contains("min.u32"),
            "sm_{cc}: clamped to 2..=8"
        );
        assert!(!body(cc, "pf_tuned").contains("prefetch"), "sm_{cc}");
    }
}

#[test]
fn a_target_of_the_loop_variable_is_prefetched_inside_the_loop() {
    for cc in ARCHS {
        assert!(
            in_loop(cc, "pf_of_loop_var", "prefetch.global.L2 ["),
            "sm_{cc}"
        );
        // `src.at(k)` of 4-byte elements: one prefetch, no loop over cache lines.
        let b = body(cc, "pf_of_loop_var");
        assert_eq!(b.matches("prefetch.global.L2").count(), 1, "sm_{cc}: {b}");
    }
}

#[test]
fn queue_loops_request_and_wait_inside_the_loop_and_hint_only_device_memory() {
    for cc in ARCHS {
        // Managed chunks only: requests (the flag exchange of `RequestQueue::request`) and
        // waits (the `%globaltimer` bound of `wait_ready`) in the loop, no prefetch at all.
        let k = "pf_queue_chunks";
        assert!(
            in_loop(cc, k, "atom.exch.b32"),
            "sm_{cc}: request in the loop"
        );
        assert!(in_loop(cc, k, "%globaltimer"), "sm_{cc}: wait in the loop");
        assert!(
            !body(cc, k).contains("prefetch"),
            "sm_{cc}: no hint for managed memory"
        );
        // A managed list and a device slice: the list is requested, the slice prefetched.
        let k = "pf_queue_lists";
        assert!(in_loop(cc, k, "atom.exch.b32"), "sm_{cc}");
        assert!(in_loop(cc, k, "%globaltimer"), "sm_{cc}");
        assert!(in_loop(cc, k, "prefetch.global.L2 ["), "sm_{cc}");
        assert!(!body(cc, k).contains("cp.async.bulk"), "sm_{cc}");
    }
}

#[test]
fn direct_prefetch_intrinsics_by_architecture() {
    let k = "intr_prefetch_direct";
    for cc in ARCHS {
        let b = body(cc, k);
        assert!(b.contains("prefetch.global.L1 ["), "sm_{cc}");
        assert!(b.contains("prefetch.global.L2 ["), "sm_{cc}");
        assert_eq!(
            b.contains("prefetch.global.L2::evict_last ["),
            cc >= 80,
            "sm_{cc}"
        );
        assert_eq!(
            b.contains("prefetch.global.L2::evict_normal ["),
            cc >= 80,
            "sm_{cc}"
        );
        assert_eq!(
            b.contains("applypriority.global.L2::evict_normal"),
            cc >= 80,
            "sm_{cc}"
        );
        assert_eq!(
            b.contains("cp.async.bulk.prefetch.L2.global"),
            cc >= 90,
            "sm_{cc}"
        );
    }
}

#[test]
fn indices_atomics_warp_sync_and_shared_memory() {
    for cc in ARCHS {
        let b = body(cc, "intr_indices");
        for reg in ["%tid.", "%ctaid.", "%ntid.", "%nctaid."] {
            for d in ["x", "y", "z"] {
                assert!(b.contains(&format!("{reg}{d}")), "sm_{cc}: {reg}{d}");
            }
        }
        assert!(b.contains("%smid"), "sm_{cc}: %smid");
        let b = body(cc, "intr_atomics");
        for insn in [
            "atom.add.f32",
            "atom.add.u32",
            "atom.add.u64",
            "atom.max.u32",
            "atom.max.u64",
            "atom.max.s32",
            "atom.cas.b32",
            "atom.cas.b64",
        ] {
            assert!(b.contains(insn), "sm_{cc}: {insn}");
        }
        let b = body(cc, "intr_warp");
        for insn in [
            "shfl.sync.down.b32",
            "shfl.sync.up.b32",
            "shfl.sync.bfly.b32",
            "shfl.sync.idx.b32",
            "vote.sync.all.pred",
            "vote.sync.any.pred",
            "vote.sync.ballot.b32",
            "activemask.b32",
        ] {
            assert!(b.contains(insn), "sm_{cc}: {insn}");
        }
        // One predicated atomic for the warp, no branch around it (see warp_fetch_add).
        let b = body(cc, "intr_warp_claims");
        for insn in [
            "setp.eq.u32 p, l, 0;",
            "@p atom.add.u32",
            "@p atom.add.u64",
            "bar.warp.sync",
        ] {
            assert!(b.contains(insn), "sm_{cc}: {insn}");
        }
        let b = body(cc, "intr_sync");
        for insn in [
            "bar.sync",
            "fence.acq_rel.cta",
            "fence.acq_rel.gpu",
            "fence.acq_rel.sys",
            "nanosleep.u32",
        ] {
            assert!(b.contains(insn), "sm_{cc}: {insn}");
        }
        let arrays = (module(cc))
            .matches(".shared .align 16 .b8 __lookahead_addrspace_shared__ptx_kernels_")
            .count();
        // intr_shared's two arrays, bug_missing_barrier's, bug_uninitialised_shared's,
        // warp_synced_neighbour's and attr_sum_load_store's stages (an array no kernel uses,
        // such as the mbarrier words of a pipeline that copies without them, is dropped);
        // from sm_80 on also the other pipeline kernels' (`ptx_pipeline.rs`), which sm_70
        // does not have.
        if cc == 70 {
            assert_eq!(arrays, 6, "sm_{cc}");
        } else {
            assert!(arrays > 6, "sm_{cc}: {arrays}");
        }
        let b = body(cc, "intr_dynamic_shared");
        assert!(b.contains("%dynamic_smem_size"), "sm_{cc}");
        assert!(b.contains("ld.shared.b32"), "sm_{cc}");
        assert!(
            module(cc)
                .contains(".extern .shared .align 16 .b8 __lookahead_addrspace_shared__dynamic[]"),
            "sm_{cc}"
        );
        let b = body(cc, "intr_shared");
        // The builder moved the arrays into `.shared`, so LLVM addresses them as such: no
        // generic access the SM would first have to resolve.
        assert!(b.contains("st.shared.b32"), "sm_{cc}");
        assert!(b.contains("ld.shared.b32"), "sm_{cc}");
        assert!(b.contains("bar.sync"), "sm_{cc}");
    }
}

/// Whether a kernel's PTX checks a bound: a trap, or a call of the bounds-check panic.
fn checks_bounds(body: &str) -> bool {
    body.contains("panic_bounds_check") || body.contains("trap;")
}

#[test]
fn bounds_checks_trap_and_unchecked_access_does_not_check() {
    for cc in ARCHS {
        // The negative control of the second half: the same test finds the checked one.
        assert!(
            checks_bounds(body(cc, "intr_bounds")),
            "sm_{cc}: x[i + k] is checked"
        );
        let unchecked = body(cc, "intr_unchecked");
        assert!(
            !checks_bounds(unchecked),
            "sm_{cc}: get_unchecked must not check:\n{unchecked}"
        );
        assert!(unchecked.contains("ld.global"), "sm_{cc}: it does load");
        // The panic path ends in the trapping panic handler.
        assert!(module(cc).contains("trap;"), "sm_{cc}");
    }
}

#[test]
fn math_is_libdevice_inlined_and_exact_instructions() {
    for cc in ARCHS {
        let b = body(cc, "intr_math");
        let code = b.lines().map(|l| l.split("//").next().unwrap_or(""));
        assert!(
            !code.into_iter().any(|l| l.contains("__nv_")),
            "sm_{cc}: libdevice is linked in and inlined"
        );
        for needle in [
            "sqrt.rn.f32",
            "sqrt.rn.f64",
            "fma.rn.f32",
            "cvt.rmi.f32.f32",
            "cvt.rpi.f32.f32",
            "abs.f32",
        ] {
            assert!(b.contains(needle), "sm_{cc}: {needle}");
        }
        assert!(ptx::unresolved_functions(module(cc)).is_empty(), "sm_{cc}");
    }
}

#[test]
fn launch_bounds_become_the_entry_directives() {
    for cc in ARCHS {
        let bounded = body(cc, "user_bounded");
        let head = &bounded[..bounded.find('{').unwrap()];
        assert!(head.contains(".maxntid 128, 1, 1"), "sm_{cc}: {head}");
        assert!(head.contains(".minnctapersm 4"), "sm_{cc}: {head}");
        assert!(
            !module(cc).contains("__lookahead_launch_bounds__"),
            "sm_{cc}"
        );
        assert!(
            !body(cc, "user_axpy").contains(".maxntid"),
            "only where asked"
        );
    }
}

#[test]
fn ptxas_accepts_every_test_module() {
    lookahead_tests::assert_ptxas_accepts("ptx_kernels", PTX);
}

#[test]
fn loop_reader_finds_only_instructions_inside_loops() {
    let body = "ld.x;\n$L__BB0_1:\nprefetch.global.L2 [%rd1];\n@%p1 bra $L__BB0_1;\nprefetch.global.L1 [%rd2];\n";
    assert_eq!(lines_inside_loops(body, "prefetch.global.L2"), vec![2]);
    assert!(lines_inside_loops(body, "prefetch.global.L1").is_empty());
}
