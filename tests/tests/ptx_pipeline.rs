//! PTX tests of the asynchronous-copy runtime (`lookahead_device::pipeline`): the kernels of
//! `tests/ptx-kernels/src/pipeline.rs`, compiled for sm_70, sm_80 and sm_90 by the build
//! script, hold the instructions each copy kind stands for, from the architecture that has
//! them and in no older one (`ptx_dsl.rs` runs `ptxas` on every module).

use lookahead_builder::ptx;
use lookahead_tests::lines_inside_loops;
use lookahead_tests::ptx_kernels_ptx::PTX;
use ptx_kernels::pipeline::{SM80_KERNELS, SM90_KERNELS};

fn module(cc: u32) -> &'static str {
    lookahead_tests::module_for(PTX, cc)
}

fn body(cc: u32, kernel: &str) -> &'static str {
    lookahead_tests::entry_in(PTX, cc, kernel)
}

const CG: &str = "cp.async.cg.shared.global [";
const COMMIT: &str = "cp.async.commit_group;";
const WAIT_GROUP: &str = "cp.async.wait_group ";
const BULK: &str = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [";
const EXPECT_TX: &str = "mbarrier.arrive.expect_tx.shared::cta.b64 ";
const TRY_WAIT: &str = "mbarrier.try_wait.parity.shared::cta.b64 ";
const INIT: &str = "mbarrier.init.shared::cta.b64 [";
const FENCE: &str = "fence.proxy.async.shared::cta;";

#[test]
fn each_kernel_exists_from_the_architecture_that_has_its_instructions() {
    for cc in [70, 80, 90] {
        let entries = ptx::entries(module(cc));
        for k in SM80_KERNELS {
            assert_eq!(entries.iter().any(|e| e == k), cc >= 80, "sm_{cc} {k}");
        }
        for k in SM90_KERNELS {
            assert_eq!(entries.iter().any(|e| e == k), cc >= 90, "sm_{cc} {k}");
        }
        if cc < 80 {
            assert!(!module(cc).contains("cp.async"), "sm_{cc}");
            assert!(!module(cc).contains("mbarrier"), "sm_{cc}");
        }
    }
}

#[test]
fn a_cp_async_pipeline_copies_commits_and_waits_inside_its_loop() {
    for cc in [80, 90] {
        let b = body(cc, "pipe_sum_cp_async");
        for insn in [CG, COMMIT, WAIT_GROUP, "bar.sync"] {
            assert!(
                !lines_inside_loops(b, insn).is_empty(),
                "sm_{cc}: {insn} not in the loop:\n{b}"
            );
        }
        for absent in [BULK, "mbarrier"] {
            assert!(!b.contains(absent), "sm_{cc}: {absent}");
        }
    }
}

#[test]
fn a_bulk_pipeline_uses_the_copy_engine_and_an_mbarrier_per_stage() {
    let b = body(90, "pipe_sum_bulk");
    for insn in [BULK, EXPECT_TX, TRY_WAIT, FENCE] {
        assert!(
            !lines_inside_loops(b, insn).is_empty(),
            "{insn} not in the loop:\n{b}"
        );
    }
    assert_eq!(b.matches(INIT).count(), 3, "one mbarrier per stage:\n{b}");
    assert!(!b.contains("cp.async.cg") && !b.contains(COMMIT), "{b}");
}

#[test]
fn a_portable_bulk_pipeline_is_bulk_on_sm_90_and_cp_async_below() {
    let b80 = body(80, "pipe_sum_portable");
    assert!(b80.contains(CG) && b80.contains(WAIT_GROUP), "{b80}");
    assert!(
        !b80.contains("cp.async.bulk") && !b80.contains("mbarrier"),
        "{b80}"
    );
    let b90 = body(90, "pipe_sum_portable");
    assert!(b90.contains(BULK) && b90.contains(TRY_WAIT), "{b90}");
    assert!(!b90.contains(CG), "{b90}");
}

#[test]
fn a_load_store_pipeline_stages_through_registers_on_every_architecture() {
    for cc in [70, 80, 90] {
        let b = body(cc, "attr_sum_load_store");
        // Loads from global memory, stores into the shared stage (LLVM knows the stage's
        // state space), a barrier: the copy code is the kinds' common one.
        for insn in ["ld.global", "st.shared.b32", "bar.sync"] {
            assert!(
                !lines_inside_loops(b, insn).is_empty(),
                "sm_{cc}: {insn} not in the loop:\n{b}"
            );
        }
        assert!(
            !b.contains("cp.async") && !b.contains("mbarrier"),
            "sm_{cc}:\n{b}"
        );
    }
}

#[test]
fn auto_stages_compile_one_entry_per_candidate_pipeline() {
    for cc in [80, 90] {
        // The plain entry stages with loads and stores.
        let plain = body(cc, "attr_sum_auto");
        assert!(
            !plain.contains("cp.async") && !plain.contains("mbarrier"),
            "sm_{cc}:\n{plain}"
        );
        for s in 2..=4 {
            let b = body(cc, &format!("attr_sum_auto__cp_async_s{s}"));
            assert!(!lines_inside_loops(b, CG).is_empty(), "sm_{cc} s{s}:\n{b}");
            let portable = body(cc, &format!("attr_sum_auto__bulk_portable_s{s}"));
            if cc >= 90 {
                assert!(
                    !lines_inside_loops(portable, BULK).is_empty(),
                    "s{s}:\n{portable}"
                );
                // One mbarrier per stage: the stage count is the entry's own.
                assert_eq!(portable.matches(INIT).count(), s, "s{s}:\n{portable}");
            } else {
                assert!(
                    portable.contains(CG) && !portable.contains("mbarrier"),
                    "s{s}"
                );
            }
        }
    }
}

#[test]
fn the_raw_instructions_are_emitted_as_written() {
    for cc in [80, 90] {
        let b = body(cc, "raw_cp_async");
        for (insn, count) in [
            ("cp.async.ca.shared.global [", 4),
            (CG, 3),
            (COMMIT, 2),
            ("cp.async.wait_group 1;", 1),
            ("cp.async.wait_all;", 1),
        ] {
            assert_eq!(b.matches(insn).count(), count, "sm_{cc} {insn}:\n{b}");
        }
        for size in ["], 4;", "], 8;", "], 16;"] {
            assert!(
                b.lines()
                    .any(|l| l.contains("cp.async.ca") && l.contains(size)),
                "sm_{cc}: no cp.async.ca of{size}\n{b}"
            );
        }
        // The zero fill: a source size after the 16.
        assert!(
            b.lines().any(|l| l.contains(CG) && l.contains("], 16, %r")),
            "sm_{cc}:\n{b}"
        );
        let m = body(cc, "raw_mbarrier");
        for insn in [
            INIT,
            "mbarrier.arrive.shared::cta.b64 ",
            "mbarrier.test_wait.parity.shared::cta.b64 ",
            "mbarrier.inval.shared::cta.b64 [",
        ] {
            assert!(m.contains(insn), "sm_{cc} {insn}:\n{m}");
        }
    }
    let b = body(90, "raw_bulk");
    assert_eq!(b.matches(BULK).count(), 2, "{b}");
    for insn in [INIT, EXPECT_TX, TRY_WAIT, FENCE] {
        assert!(b.contains(insn), "{insn}:\n{b}");
    }
}
