//! [`PrefetchEngine`]: many ranges, coalesced and cut into pieces, issued from a pool.

use std::sync::mpsc;
use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream};

use super::pool::{PrefetchPool, Worker};
use super::{issue, issue_batch, require_location, require_managed};
use crate::error::{Capability, DriverContext, Error, Result};
use crate::gpu::Gpu;
use crate::managed::Location;
use crate::range::{chunk, coalesce_with_gap, split_across, total_bytes, ByteRange};

/// How a [`PrefetchEngine`] cuts and issues work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchOptions {
    /// Host threads, each with its own stream (at least 1).
    pub threads: usize,
    /// Largest piece per prefetch call, in bytes (0: never cut).
    pub piece_bytes: u64,
    /// Ranges separated by at most this many bytes are merged (the gap is moved too).
    pub max_gap: u64,
    /// Issue each thread's pieces with one `cuMemPrefetchBatchAsync` instead of one call
    /// per piece. Ignored (per-piece calls) when the driver is older than 12.8.
    pub batch: bool,
}

impl Default for PrefetchOptions {
    /// 32 threads, 32 MiB pieces, no gap bridging, per-piece calls: the configuration the
    /// H100 (PCIe) measurements in `docs/host-runtime.md` favour. The driver does most of a
    /// prefetch's work inside the issuing call, so scattered ranges need many threads in
    /// flight; `cuMemPrefetchBatchAsync` measured slower than per-piece calls there.
    fn default() -> Self {
        PrefetchOptions {
            threads: 32,
            piece_bytes: 32 << 20,
            max_gap: 0,
            batch: false,
        }
    }
}

/// The plan an engine would issue for a set of ranges: pure arithmetic, no GPU.
pub fn plan(ranges: &[ByteRange], options: &PrefetchOptions) -> Vec<Vec<ByteRange>> {
    let merged = coalesce_with_gap(ranges, options.max_gap);
    let pieces = chunk(&merged, options.piece_bytes);
    split_across(&pieces, options.threads.max(1))
}

/// Issues prefetches of many ranges from the threads of a [`PrefetchPool`], one stream each.
///
/// A call to [`PrefetchEngine::prefetch`] coalesces the ranges, cuts them into pieces of
/// [`PrefetchOptions::piece_bytes`], hands each thread of the pool a contiguous share, and
/// returns a [`PrefetchTicket`] at once; the ticket's events complete when the data has
/// arrived.
#[derive(Debug)]
pub struct PrefetchEngine {
    pool: Arc<PrefetchPool>,
    options: PrefetchOptions,
    batch_ok: bool,
}

impl PrefetchEngine {
    /// An engine with a pool of its own: `options.threads` threads on `gpu`.
    pub fn new(gpu: &Gpu, options: PrefetchOptions) -> Result<Self> {
        let pool = Arc::new(PrefetchPool::new(gpu, options.threads)?);
        Self::with_pool(pool, options)
    }

    /// An engine issuing from `pool`'s threads (shared, for instance, with a request service);
    /// `options.threads` is then the pool's.
    pub fn with_pool(pool: Arc<PrefetchPool>, options: PrefetchOptions) -> Result<Self> {
        let gpu = pool.gpu();
        gpu.require(Capability::ManagedMemory, "PrefetchEngine")?;
        let batch_ok = gpu.capabilities()?.batch_prefetch;
        let options = PrefetchOptions {
            threads: pool.threads(),
            ..options
        };
        Ok(PrefetchEngine {
            pool,
            options,
            batch_ok,
        })
    }

    /// The engine's options.
    pub fn options(&self) -> &PrefetchOptions {
        &self.options
    }

    /// The pool it issues from.
    pub fn pool(&self) -> &Arc<PrefetchPool> {
        &self.pool
    }

    /// Whether pieces go out through `cuMemPrefetchBatchAsync`.
    pub fn uses_batch(&self) -> bool {
        self.options.batch && self.batch_ok
    }

    /// Prefetches `ranges` (any order, overlaps allowed) to `location`. Validates every
    /// coalesced range (managed memory, device capability) before issuing anything.
    pub fn prefetch(&self, ranges: &[ByteRange], location: Location) -> Result<PrefetchTicket> {
        let gpu = self.pool.gpu();
        require_location(gpu, location, "PrefetchEngine::prefetch to a device")?;
        for r in ranges {
            ByteRange::new(r.start, r.len)?;
        }
        let merged = coalesce_with_gap(ranges, self.options.max_gap);
        for r in &merged {
            require_managed(gpu, *r)?;
        }
        let pieces = chunk(&merged, self.options.piece_bytes);
        let (bytes, piece_count) = (total_bytes(&pieces), pieces.len());
        let batch = self.uses_batch();
        let mut pending = Vec::new();
        for group in split_across(&pieces, self.pool.threads()) {
            let (reply, rx) = mpsc::channel();
            self.pool.submit(move |w| {
                let _ = reply.send(issue_share(w, &group, location, batch));
            });
            pending.push(rx);
        }
        Ok(PrefetchTicket {
            pending,
            events: Vec::new(),
            bytes,
            pieces: piece_count,
        })
    }
}

/// One thread's share of a prefetch: its pieces on its stream, then an event after them.
fn issue_share(
    w: &Worker<'_>,
    pieces: &[ByteRange],
    location: Location,
    batch: bool,
) -> Result<CudaEvent> {
    let stream = w.stream().cu_stream();
    if batch {
        issue_batch(pieces, location, stream)?;
    } else {
        for p in pieces {
            issue(*p, location, stream)?;
        }
    }
    w.stream().record_event(None).during("cuEventRecord")
}

fn worker_gone() -> Error {
    Error::Io {
        what: "a prefetch thread exited before replying".into(),
        source: std::io::Error::other("the prefetch pool's thread is gone"),
    }
}

/// Completion of one [`PrefetchEngine::prefetch`] call: one event per worker thread used.
#[derive(Debug)]
pub struct PrefetchTicket {
    pending: Vec<mpsc::Receiver<Result<CudaEvent>>>,
    events: Vec<CudaEvent>,
    bytes: u64,
    pieces: usize,
}

impl PrefetchTicket {
    /// Bytes being moved (after coalescing).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Number of prefetch pieces issued.
    pub fn pieces(&self) -> usize {
        self.pieces
    }

    /// Blocks until every worker has issued its pieces; returns the first error.
    pub fn issued(&mut self) -> Result<&[CudaEvent]> {
        let mut first_err = None;
        for rx in self.pending.drain(..) {
            match rx.recv() {
                Ok(Ok(ev)) => self.events.push(ev),
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(worker_gone());
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(&self.events),
        }
    }

    /// Makes `stream` wait (on the GPU) for the prefetches, so a kernel queued there next
    /// finds the data in place. Blocks the host only until the pieces are issued.
    pub fn wait_on(&mut self, stream: &CudaStream) -> Result<()> {
        self.issued()?;
        for ev in &self.events {
            stream.wait(ev).during("cuStreamWaitEvent")?;
        }
        Ok(())
    }

    /// Whether all prefetches have completed (issues are awaited first).
    pub fn is_complete(&mut self) -> Result<bool> {
        self.issued()?;
        for ev in &self.events {
            if !ev.try_is_complete().during("cuEventQuery")? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Blocks until all prefetches have completed.
    pub fn wait(mut self) -> Result<()> {
        self.issued()?;
        for ev in &self.events {
            ev.synchronize().during("cuEventSynchronize")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_coalesces_chunks_and_splits() {
        let mib = 1u64 << 20;
        // 2048 shuffled 2 MiB ranges covering 4 GiB -> one range -> 128 pieces of 32 MiB.
        let mut ranges: Vec<ByteRange> = (0..2048u64)
            .map(|i| ByteRange {
                start: (1 << 40) + ((i * 1237) % 2048) * 2 * mib,
                len: 2 * mib,
            })
            .collect();
        ranges.reverse();
        let opts = PrefetchOptions {
            threads: 8,
            ..PrefetchOptions::default()
        };
        let groups = plan(&ranges, &opts);
        assert_eq!(groups.len(), 8);
        let pieces: Vec<_> = groups.iter().flatten().copied().collect();
        assert_eq!(pieces.len(), 128);
        assert!(pieces.iter().all(|p| p.len == 32 * mib));
        assert_eq!(total_bytes(&pieces), 4 << 30);
        for g in &groups {
            assert_eq!(total_bytes(g), 512 * mib);
        }
        // Bridging gaps merges separate lists.
        let sparse = [
            ByteRange {
                start: 0,
                len: 2 * mib,
            },
            ByteRange {
                start: 4 * mib,
                len: 2 * mib,
            },
        ];
        let opts = PrefetchOptions {
            max_gap: 2 * mib,
            threads: 1,
            ..PrefetchOptions::default()
        };
        assert_eq!(
            plan(&sparse, &opts),
            vec![vec![ByteRange {
                start: 0,
                len: 6 * mib
            }]]
        );
    }
}
