//! The gather on a GPU, with the table in managed memory under a policy chosen per run.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{result, CudaSlice, CudaStream};
use lookahead::launch::LaunchConfig;
use lookahead::untracked::{Untracked, UntrackedMut};
use lookahead::{DriverContext, Error, Gpu, ManagedBuffer, Result};
use lookahead_uvm::{Policy, PolicyBuffer, UvmRuntime};
use uvm_gather_kernels::{
    GatheredArgs, PullArgs, TableArgs, BLOCKS_PER_SM, HINT_L2, HINT_NONE, STATS, THREADS,
};

use crate::{runs, Shape};

/// Expected reads of the same tiles, for `Auto`: a cold gather and the warm one after it.
const EXPECTED_PASSES: f64 = 2.0;

/// A gather of fixed rows from a table in managed memory (written by the host, so it starts
/// there): the table under its policies, the picks, and the output and counters in device
/// memory.
pub struct GpuGather {
    shape: Shape,
    table: PolicyBuffer<u32>,
    /// The tiles the picks read, each once, in order.
    tiles: Vec<usize>,
    picks: CudaSlice<u32>,
    rows: CudaSlice<u32>,
    stats: CudaSlice<u32>,
    /// The pull's per-tile claims, zeroed before each pulling launch.
    claims: CudaSlice<u32>,
    blocks: u32,
}

/// What one gather returned and cost.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The policy that ran (what `Auto` chose).
    pub policy: Policy,
    /// `picks.len() * row_words` words: row `picks[i]` of the table as row `i`.
    pub rows: Vec<u32>,
    /// The kernel's counters ([`uvm_gather_kernels::STAT_READY`] and the others).
    pub stats: [u32; STATS],
    /// Wall time from the policy's host work to the kernel's end, seconds.
    pub seconds: f64,
}

impl GpuGather {
    /// `table` (of `shape`) in managed memory on `gpu`, to be gathered at rows `picks`
    /// (each below `shape.rows`: [`Error::InvalidArgument`] otherwise).
    pub fn new(gpu: &Gpu, shape: Shape, table: &[u32], picks: &[u32]) -> Result<Self> {
        let bad = |reason: String| Error::InvalidArgument {
            call: "GpuGather::new",
            reason,
        };
        if table.len() != shape.words() {
            return Err(bad(format!(
                "a table of {} words for {} rows of {} words",
                table.len(),
                shape.rows,
                shape.row_words
            )));
        }
        if let Some(r) = picks.iter().find(|&&r| r as usize >= shape.rows) {
            return Err(bad(format!("pick {r} of a table of {} rows", shape.rows)));
        }
        // Every kernel of the module loaded now: a lazy load while `gather` waits for the
        // host would wait for it.
        lookahead::launch::module_for(gpu.context(), uvm_gather_kernels::PTX)?;
        let stream = gpu.context().new_stream().during("cuStreamCreate")?;
        let data = ManagedBuffer::from_slice(gpu, table)?;
        let table = PolicyBuffer::new(data, shape.tiles(), &stream)?;
        let alloc = |n: usize| stream.alloc_zeros::<u32>(n.max(1)).during("cuMemAlloc");
        Ok(GpuGather {
            shape,
            tiles: shape.tiles_of(picks),
            picks: stream.clone_htod(picks).during("cuMemcpyHtoD")?,
            rows: alloc(picks.len() * shape.row_words)?,
            stats: alloc(STATS)?,
            claims: alloc(shape.tiles())?,
            blocks: gpu.capabilities()?.sm_count.max(1) * BLOCKS_PER_SM,
            table,
        })
    }

    /// The table under its policies: set a policy up before the timed gathers
    /// ([`PolicyBuffer::prepare`]), make it resident or move it back to the host.
    pub fn table_mut(&mut self) -> &mut PolicyBuffer<u32> {
        &mut self.table
    }

    /// Bytes of the tiles the picks read.
    pub fn needed_bytes(&self) -> u64 {
        let words: usize = self
            .tiles
            .iter()
            .map(|&t| self.shape.tile_words(t).len())
            .sum();
        words as u64 * 4
    }

    /// Gathers the picks under `policy` (`Auto` chooses) with `rt`: the output poisoned and
    /// the counters zeroed first, then, timed, the policy's host work and the kernel.
    pub fn run(&mut self, policy: Policy, rt: &UvmRuntime) -> Result<Outcome> {
        let s = self.table.stream().clone();
        self.clear(&s)?;
        s.synchronize().during("cuStreamSynchronize")?;
        let started = Instant::now();
        let chosen = rt.resolve(policy, || {
            let ranges = runs(&self.tiles) as u64;
            (self.table).access_pattern(self.needed_bytes(), ranges, EXPECTED_PASSES)
        });
        let mut staging = self.table.stage(chosen, rt)?;
        let (shape, tiles) = (self.shape, &self.tiles);
        staging.before_read(&self.table, || {
            Ok(tiles.iter().map(|&t| shape.tile_words(t)).collect())
        })?;
        let cfg = LaunchConfig::new((self.blocks, 1, 1), (THREADS, 1, 1));
        let picks = Untracked::new(&self.picks, &s);
        let mut out_rows = UntrackedMut::new(&mut self.rows, &s);
        let mut out_stats = UntrackedMut::new(&mut self.stats, &s);
        let out = GatheredArgs {
            rows: &mut out_rows,
            stats: &mut out_stats,
        };
        let (row_words, tile_rows) = (shape.row_words as u32, shape.tile_rows as u32);
        if staging.pulls() {
            let mut views = self.table.pull_views()?;
            let table = TableArgs {
                data: &views.data,
                row_words,
                tile_rows,
            };
            let pull = PullArgs {
                cache: &mut views.cache,
                counters: &mut views.counters,
                claims: &mut UntrackedMut::new(&mut self.claims, &s),
                wait_ns: u64::from(staging.wait_us()) * 1000,
            };
            uvm_gather_kernels::pull_gather::launch(&s, cfg, table, &picks, pull, out)?;
        } else {
            let data = self.table.data_view();
            let table = TableArgs {
                data: &data,
                row_words,
                tile_rows,
            };
            let hints = if staging.kernel_hints() {
                HINT_L2
            } else {
                HINT_NONE
            };
            let queue = staging.queue();
            uvm_gather_kernels::gather::launch(&s, cfg, table, &picks, queue, hints, out)?;
        }
        // Nothing is queued behind a kernel that may wait for other streams until it is done.
        s.synchronize().during("cuStreamSynchronize")?;
        let seconds = started.elapsed().as_secs_f64();
        let stats = s.clone_dtoh(&self.stats).during("cuMemcpyDtoH")?;
        Ok(Outcome {
            policy: chosen,
            rows: s.clone_dtoh(&self.rows).during("cuMemcpyDtoH")?,
            stats: stats.try_into().expect("STATS counters"),
            seconds,
        })
    }

    /// Poisons the output (all ones: a word the kernel does not write differs from the
    /// reference) and zeroes the counters and claims, on `s`.
    fn clear(&mut self, s: &Arc<CudaStream>) -> Result<()> {
        for (buf, byte) in [
            (&mut self.rows, 0xFF),
            (&mut self.stats, 0),
            (&mut self.claims, 0),
        ] {
            let bytes = buf.len() * 4;
            let ptr = UntrackedMut::new(buf, s).device_ptr();
            // SAFETY: `ptr` holds `bytes` bytes of device memory; ordered on `s`.
            unsafe { result::memset_d8_async(ptr, byte, bytes, s.cu_stream()) }
                .during("cuMemsetD8Async")?;
        }
        Ok(())
    }
}
