//! The planning kernel's barriers, as the PTX has them: every thread of its block must reach
//! the same `bar.sync` each time. A compiler pass that copies a barrier into both arms of a
//! branch that differs between threads (rustc's MIR jump threading did, before the builder
//! turned it off) leaves more `bar.sync`s in the PTX than the source has, and the block
//! deadlocks on the GPU; this test finds it without one.

use lookahead_builder::ptx::entry_body;

/// `sync_threads()` calls `plan` makes, counted in its source: `count_pairs` 2, four
/// `exclusive_sum`s of 3 in `find_lists`, 1 after it, 1 in `request_lists`, one
/// `exclusive_sum` in `candidate_offsets`.
const PLAN_BARRIERS: usize = 2 + 4 * 3 + 1 + 1 + 3;

#[test]
fn plan_has_one_barrier_per_sync_threads_in_its_source() {
    assert!(!ivf_kernels::PTX.is_empty(), "no PTX was built");
    for (cc, ptx) in ivf_kernels::PTX {
        let body = entry_body(ptx, "plan").unwrap_or_else(|| panic!("sm_{cc} lacks plan"));
        let barriers = body.matches("bar.sync").count();
        assert_eq!(
            barriers, PLAN_BARRIERS,
            "sm_{cc}: plan has {barriers} bar.sync, its source {PLAN_BARRIERS}"
        );
    }
}
