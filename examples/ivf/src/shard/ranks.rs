//! A batch of queries over every shard.
//!
//! [`RankSearch`] is one rank's part, the same in a process of its own (as on another host)
//! and in a thread of a process driving several GPUs: rank 0 has the queries and
//! broadcasts them (NCCL), every rank searches its shard and the ranks' `K` nearest per query
//! are all-gathered (NCCL) on the shard's stream, and rank 0 merges them on the host
//! ([`super::merge_gathered`]). Every wait is bounded by the communicator's timeout, so a rank
//! that died ends the batch with an error naming the rank that waited.
//!
//! [`PeerGather`] is the alternative inside one process: GPU 0 copies the other shards'
//! results straight from their device memory (`cuMemcpyPeerAsync`, over NVLink where the
//! GPUs have it) once their searches are done, with no collective.

use std::time::Instant;

use cudarc::driver::{sys, CudaEvent, CudaSlice};
use ivf_kernels::K;
use lookahead::{DriverContext, Gpu};
use lookahead_multi::{Communicator, Result};

use super::merge::merge_gathered;
use crate::gpu::ShardIndex;

/// What one batch cost on one rank.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchTimes {
    /// The whole batch on this rank: queries handed over to the merged answer, seconds.
    pub wall: f64,
    /// From this rank's search done to the gather done, by CUDA events on its stream: the
    /// collective, and the wait for the slowest rank.
    pub gather: f64,
    /// The host's merge of the gathered lists.
    pub host_merge: f64,
}

/// A batch's answer and cost on one rank: the `K` nearest per query (rank 0 only).
pub type BatchAnswer = (Option<(Vec<f32>, Vec<u32>)>, BatchTimes);

/// One rank's part of a sharded search (see the module docs).
pub struct RankSearch<'a> {
    /// The rank's shard.
    pub shard: ShardIndex<'a>,
    comm: Communicator,
    gathered: Option<(CudaSlice<f32>, CudaSlice<u32>)>,
    searched: CudaEvent,
    gathered_at: CudaEvent,
}

/// Seconds from `a` to `b`, both recorded and reached.
fn seconds_between(a: &CudaEvent, b: &CudaEvent) -> lookahead::Result<f64> {
    Ok(a.elapsed_ms(b).during("cuEventElapsedTime")? as f64 / 1e3)
}

fn timing_event(gpu: &Gpu) -> lookahead::Result<CudaEvent> {
    gpu.context()
        .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        .during("cuEventCreate")
}

impl<'a> RankSearch<'a> {
    /// Rank `comm.rank()`'s search over `shard`; `comm` must run on the shard's stream.
    pub fn new(shard: ShardIndex<'a>, comm: Communicator) -> Result<Self> {
        if !std::sync::Arc::ptr_eq(comm.stream(), shard.stream()) {
            return Err(lookahead_multi::Error::Invalid(format!(
                "rank {}: the communicator runs on another stream than the shard's search",
                comm.rank()
            )));
        }
        let gpu = shard.gpu().clone();
        Ok(RankSearch {
            searched: timing_event(&gpu)?,
            gathered_at: timing_event(&gpu)?,
            shard,
            comm,
            gathered: None,
        })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The shard back, and the communicator (to search another shard on the same stream).
    pub fn into_parts(self) -> (ShardIndex<'a>, Communicator) {
        (self.shard, self.comm)
    }

    /// One batch of `nq` queries with `nprobe` probes. Rank 0 passes the queries
    /// (`nq * dim` floats), the others `None`. Every rank returns when the gather is done;
    /// rank 0 with the merged `K` nearest per query.
    pub fn search(
        &mut self,
        queries: Option<&[f32]>,
        nq: usize,
        nprobe: usize,
    ) -> Result<BatchAnswer> {
        let started = Instant::now();
        let rank = self.comm.rank();
        self.shard.reserve(nq, nprobe)?;
        if let Some(q) = queries.filter(|_| rank == 0) {
            self.shard.upload(q)?;
        }
        self.comm.broadcast(&mut self.shard.queries_mut(nq)?, 0)?;
        self.shard.enqueue(nq, nprobe)?;
        self.searched
            .record(self.shard.stream())
            .during("cuEventRecord")?;
        let world = self.comm.world();
        let need = world * nq * K;
        if self.gathered.as_ref().is_none_or(|(d, _)| d.len() < need) {
            let s = self.shard.stream();
            let d = s.alloc_zeros::<f32>(need).during("cuMemAlloc")?;
            let i = s.alloc_zeros::<u32>(need).during("cuMemAlloc")?;
            self.gathered = Some((d, i));
        }
        let (gd, gi) = self.gathered.as_mut().expect("allocated above");
        let (rd, ri) = self.shard.results()?;
        self.comm.all_gather(&rd, &mut gd.slice_mut(..need))?;
        self.comm.all_gather(&ri, &mut gi.slice_mut(..need))?;
        self.gathered_at
            .record(self.shard.stream())
            .during("cuEventRecord")?;
        self.comm.wait("the batch's search and all-gather")?;
        let gather = seconds_between(&self.searched, &self.gathered_at)?;
        if rank != 0 {
            let wall = started.elapsed().as_secs_f64();
            return Ok((
                None,
                BatchTimes {
                    wall,
                    gather,
                    host_merge: 0.0,
                },
            ));
        }
        let s = self.shard.stream();
        let d = s.clone_dtoh(&gd.slice(..need)).during("cuMemcpyDtoH")?;
        let i = s.clone_dtoh(&gi.slice(..need)).during("cuMemcpyDtoH")?;
        let t = Instant::now();
        let merged = merge_gathered(&d, &i, world, nq);
        let times = BatchTimes {
            wall: started.elapsed().as_secs_f64(),
            gather,
            host_merge: t.elapsed().as_secs_f64(),
        };
        Ok((Some(merged), times))
    }

    /// Times `repeats` all-gathers of one batch's results alone (`nq` queries' `K` nearest
    /// from every rank), after a search of that size: the collective's own cost, seconds
    /// each, without the wait for a slower rank.
    pub fn time_all_gather(&mut self, nq: usize, repeats: usize) -> Result<f64> {
        let need = self.comm.world() * nq * K;
        let (gd, gi) = self.gathered.as_mut().ok_or_else(|| {
            lookahead_multi::Error::Invalid("all-gather timed before a search".into())
        })?;
        let (rd, ri) = self.shard.results()?;
        // One untimed round lines the ranks up.
        self.comm.all_gather(&rd, &mut gd.slice_mut(..need))?;
        self.comm.wait("the all-gather's warm-up")?;
        self.searched
            .record(self.shard.stream())
            .during("cuEventRecord")?;
        for _ in 0..repeats {
            self.comm.all_gather(&rd, &mut gd.slice_mut(..need))?;
            self.comm.all_gather(&ri, &mut gi.slice_mut(..need))?;
        }
        self.gathered_at
            .record(self.shard.stream())
            .during("cuEventRecord")?;
        self.comm.wait("timed all-gathers")?;
        Ok(seconds_between(&self.searched, &self.gathered_at)? / repeats.max(1) as f64)
    }
}

/// The gather of every shard's results into GPU 0 by peer copies, inside one process.
pub struct PeerGather {
    gathered: Option<(CudaSlice<f32>, CudaSlice<u32>)>,
    done: Vec<CudaEvent>,
}

impl PeerGather {
    /// For `shards` (their GPUs, in rank order; the first gathers).
    pub fn new(shards: &[ShardIndex<'_>]) -> Result<Self> {
        let done = shards
            .iter()
            .map(|s| timing_event(s.gpu()))
            .collect::<lookahead::Result<Vec<_>>>()?;
        Ok(PeerGather {
            gathered: None,
            done,
        })
    }

    /// One batch: the queries to every shard, each shard's search queued on its own GPU, then
    /// GPU 0 waits for each search's event and copies its results over; the merged `K`
    /// nearest per query, and what it cost (`gather`: GPU 0's copies and the waits, by wall
    /// clock).
    pub fn search(
        &mut self,
        shards: &mut [ShardIndex<'_>],
        queries: &[f32],
        nq: usize,
        nprobe: usize,
    ) -> Result<BatchAnswer> {
        let started = Instant::now();
        for (shard, done) in shards.iter_mut().zip(&self.done) {
            shard.gpu().bind_to_thread()?;
            shard.reserve(nq, nprobe)?;
            shard.upload(queries)?;
            shard.enqueue(nq, nprobe)?;
            done.record(shard.stream()).during("cuEventRecord")?;
        }
        let searched = Instant::now();
        let per = nq * K;
        let need = shards.len() * per;
        let (first, rest) = shards.split_first().ok_or_else(|| {
            lookahead_multi::Error::Invalid("a peer gather over no shards".into())
        })?;
        first.gpu().bind_to_thread()?;
        let s = first.stream();
        if self.gathered.as_ref().is_none_or(|(d, _)| d.len() < need) {
            let d = s.alloc_zeros::<f32>(need).during("cuMemAlloc")?;
            let i = s.alloc_zeros::<u32>(need).during("cuMemAlloc")?;
            self.gathered = Some((d, i));
        }
        let (gd, gi) = self.gathered.as_mut().expect("allocated above");
        copy_results(first, first, 0, per, gd, gi)?;
        for (r, (shard, done)) in rest.iter().zip(&self.done[1..]).enumerate() {
            s.wait(done).during("cuStreamWaitEvent")?;
            copy_results(first, shard, r + 1, per, gd, gi)?;
        }
        let d = s.clone_dtoh(&gd.slice(..need)).during("cuMemcpyDtoH")?;
        let i = s.clone_dtoh(&gi.slice(..need)).during("cuMemcpyDtoH")?;
        let gather = searched.elapsed().as_secs_f64();
        let t = Instant::now();
        let merged = merge_gathered(&d, &i, shards.len(), nq);
        let times = BatchTimes {
            wall: started.elapsed().as_secs_f64(),
            gather,
            host_merge: t.elapsed().as_secs_f64(),
        };
        Ok((Some(merged), times))
    }
}

/// Copies `from`'s last results (`per` entries each) into slot `slot` of `into`'s gather
/// buffers, on `into`'s stream.
fn copy_results(
    into: &ShardIndex<'_>,
    from: &ShardIndex<'_>,
    slot: usize,
    per: usize,
    gd: &mut CudaSlice<f32>,
    gi: &mut CudaSlice<u32>,
) -> Result<()> {
    let (rd, ri) = from.results()?;
    let mut dst_d = gd.slice_mut(slot * per..(slot + 1) * per);
    let mut dst_i = gi.slice_mut(slot * per..(slot + 1) * per);
    let (to, s) = (into.gpu(), into.stream());
    // SAFETY: `from`'s results are done (`into`'s stream waited for its search) and its next
    // search comes after this batch's results are read back, which waits for the copies.
    unsafe {
        lookahead_multi::set::copy_peer_slices(&mut dst_d, to, &rd.slice(..per), from.gpu(), s)?;
        lookahead_multi::set::copy_peer_slices(&mut dst_i, to, &ri.slice(..per), from.gpu(), s)?;
    }
    Ok(())
}
