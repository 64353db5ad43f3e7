//! The batch's and the plan's arrays as the scans read them, borrowed field by field from a
//! search's [`super::buffers::Buffers`] beside the scan's writable outputs.

use ivf_kernels::{BatchArgs, WorkPlanArgs};
use lookahead::untracked::Untracked as U;

use super::search::Shape;

/// The batch's queries and probes, as the scans read them.
pub(super) struct ScanInputs<'b> {
    pub(super) queries: U<'b, f32>,
    pub(super) probes: U<'b, u32>,
}

/// The plan's work items, as the scans read them.
pub(super) struct PlanViews<'b> {
    pub(super) item_pair: U<'b, u32>,
    pub(super) item_chunk: U<'b, u32>,
    pub(super) totals: U<'b, u32>,
    pub(super) pair_cand_off: U<'b, u32>,
}

impl ScanInputs<'_> {
    /// The batch for a scan with in-kernel `hints` (`ivf_kernels::HINT_*`).
    pub(super) fn args(&self, sh: Shape, hints: u32) -> BatchArgs<'_> {
        BatchArgs {
            queries: &self.queries,
            probes: &self.probes,
            nprobe: sh.nprobe as u32,
            hints,
        }
    }
}

impl PlanViews<'_> {
    /// The work items, as the scans read them.
    pub(super) fn args(&self) -> WorkPlanArgs<'_> {
        WorkPlanArgs {
            item_pair: &self.item_pair,
            item_chunk: &self.item_chunk,
            totals: &self.totals,
            pair_cand_off: &self.pair_cand_off,
        }
    }
}

/// The batch's and the plan's arrays of buffers `$b` for shape `$sh`, as the scans read them
/// (a macro: each array is borrowed as a field, beside the scan's writable outputs).
macro_rules! scan_views {
    ($b:expr, $sh:expr, $s:expr) => {{
        use lookahead::untracked::Untracked as U;
        (
            $crate::gpu::views::ScanInputs {
                queries: U::prefix(&$b.queries, $sh.nq * $sh.dim, $s)?,
                probes: U::prefix(&$b.probes, $sh.pairs, $s)?,
            },
            $crate::gpu::views::PlanViews {
                item_pair: U::prefix(&$b.item_pair, $sh.items, $s)?,
                item_chunk: U::prefix(&$b.item_chunk, $sh.items, $s)?,
                totals: U::new(&$b.totals, $s),
                pair_cand_off: U::prefix(&$b.pair_cand_off, $sh.pairs + 1, $s)?,
            },
        )
    }};
}
