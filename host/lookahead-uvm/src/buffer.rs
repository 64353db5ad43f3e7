//! [`PolicyBuffer`]: a managed allocation and what its policies set up for it, and
//! [`Staging`], a policy's host work around one launch.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{sys, CudaSlice, CudaStream, DeviceRepr};
use lookahead::untracked::{UntrackedManaged, UntrackedMut};
use lookahead::{
    Advice, DriverContext, Error, Gpu, Location, ManagedBuffer, PrefetchTicket, Result,
};

use crate::policy::{AccessPattern, Policy};
use crate::ring::RingQueue;
use crate::runtime::UvmRuntime;
use crate::setup::{self, Setup, Step};

/// A managed allocation that kernels read under any [`Policy`], with what the policies need
/// set up on it: the GPU mapping (accessed-by advice) and the preferred location, the
/// GPU-driven pull's device cache and its per-range counters, moves of every page to the
/// host or the GPU, and prefetches of the whole allocation or of given ranges (through a
/// [`UvmRuntime`]). The caller says which policy a launch runs under and which ranges it
/// reads; the kernel gets its views from the buffer ([`PolicyBuffer::data_view`],
/// [`PolicyBuffer::counter_views`], [`PolicyBuffer::pull_views`]) and its request queue from
/// the launch's [`Staging`].
///
/// The allocation is cut into `ranges` ranges of the caller's choosing (an IVF index's lists,
/// a table's tiles): range `r` has pull counter `r`, and kernels that request ranges use flag
/// `r` of the runtime's ring for it. The data must not change while it is wrapped: the pull
/// cache keeps what it copied until [`PolicyBuffer::evict_to_host`].
///
/// Every stream operation runs on the buffer's stream, and so do the kernels that take its
/// views: they are views without cudarc's use tracking ([`lookahead::untracked`]: a kernel
/// that waits for other streams must have nothing queued behind it).
pub struct PolicyBuffer<T> {
    data: ManagedBuffer<T>,
    stream: Arc<CudaStream>,
    setup: Setup,
    /// The pull's copy of `data`, with the layout of `data` (allocated by
    /// [`Step::AllocatePullCache`]).
    pull_cache: Option<CudaSlice<T>>,
    /// Per range: the pull's copy chunks that are complete.
    pull_counters: CudaSlice<u32>,
}

/// The views of a [`PolicyBuffer`] a kernel that pulls takes ([`PolicyBuffer::pull_views`]),
/// for launches on the buffer's stream.
#[derive(Debug)]
pub struct PullViews<'a, T> {
    /// The managed data, for a `ManagedSlice<T>` parameter.
    pub data: UntrackedManaged<'a, T>,
    /// Per range, its copy chunks that are complete (`lookahead_device::uvm::pull`); kept
    /// across launches.
    pub counters: UntrackedMut<'a, u32>,
    /// The device copy of the data, with its layout.
    pub cache: UntrackedMut<'a, T>,
}

impl<T: DeviceRepr> PolicyBuffer<T> {
    /// `data` (as the host wrote it) under no policy yet, cut into `ranges` ranges (at least
    /// one counter is kept), with `stream` for its operations and its kernels.
    pub fn new(data: ManagedBuffer<T>, ranges: usize, stream: &Arc<CudaStream>) -> Result<Self> {
        let pull_counters = stream
            .alloc_zeros::<u32>(ranges.max(1))
            .during("cuMemAlloc")?;
        Ok(PolicyBuffer {
            data,
            stream: stream.clone(),
            setup: Setup::default(),
            pull_cache: None,
            pull_counters,
        })
    }

    /// The managed allocation.
    pub fn managed(&self) -> &ManagedBuffer<T> {
        &self.data
    }

    /// The GPU the allocation is for.
    pub fn gpu(&self) -> &Gpu {
        self.data.gpu()
    }

    /// The stream the buffer's operations and kernels run on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Bytes of the allocation.
    pub fn num_bytes(&self) -> usize {
        self.data.num_bytes()
    }

    /// What is set up.
    pub fn setup(&self) -> Setup {
        self.setup
    }

    /// Whether the allocation is mapped for the GPU.
    pub fn is_mapped_for_gpu(&self) -> bool {
        self.setup.mapped_for_gpu
    }

    /// Maps the allocation for the GPU (accessed-by advice: the GPU reads host-resident
    /// pages over the interconnect instead of faulting them over), or removes the mapping.
    /// [`Policy::RemoteMap`] and [`Policy::GpuPull`] need it, the fault-driven policies need
    /// it off, and the others work either way; [`PolicyBuffer::prepare`] changes it when a
    /// policy needs, so call this (or `prepare`) once at set-up to keep its cost out of the
    /// launches. Mapping costs tens of milliseconds per GiB (the driver maps every
    /// host-resident page: the set-up line of `results/ivf_bench.md`); unmapping is nearly
    /// free. Returns the seconds it took (0 when nothing changed).
    pub fn map_for_gpu(&mut self, on: bool) -> Result<f64> {
        self.timed(&self.setup.map_for_gpu(on))
    }

    /// Whether [`PolicyBuffer::map_for_gpu`] also makes the host the preferred location (so
    /// the driver never moves mapped pages to the GPU on its own; clearing it again costs
    /// about as much as a migration's page-table work). A mapped allocation is mapped again
    /// with the new setting; returns the seconds that took.
    pub fn set_prefer_host(&mut self, on: bool) -> Result<f64> {
        self.timed(&self.setup.set_prefer_host(on))
    }

    /// Sets up what `policy` needs before a launch, so that the launch does not pay for it:
    /// the mapping (on for the policies that read through it, off for the fault-driven
    /// ones, unchanged for the others) and, for [`Policy::GpuPull`], its device cache
    /// ([`Error::OutOfMemory`] where the cache would leave less than
    /// [`setup::PULL_CACHE_HEADROOM`] free). For [`Policy::Auto`] it sets up what the pull
    /// needs where the cache fits, which leaves `Auto` every policy to choose from at no
    /// set-up cost. Returns the seconds it took.
    pub fn prepare(&mut self, policy: Policy) -> Result<f64> {
        let t = Instant::now();
        let pull = policy == Policy::GpuPull || (policy == Policy::Auto && self.pull_cache_fits());
        self.run(&self.setup.prepare(policy, pull))?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Whether [`Policy::GpuPull`] can run: its cache is allocated, or fits in free device
    /// memory with [`setup::PULL_CACHE_HEADROOM`] to spare.
    pub fn pull_cache_fits(&self) -> bool {
        self.setup.pull_cache
            || self
                .gpu()
                .memory_info()
                .is_ok_and(|(free, _)| setup::pull_cache_fits(self.num_bytes(), free))
    }

    /// A cold start for the next launch: moves every page to the host, empties the pull
    /// cache, and tells `rt`'s ring that nothing it brought over is resident any more. The
    /// mapping stays as it is.
    pub fn evict_to_host(&mut self, rt: &UvmRuntime) -> Result<()> {
        self.run(&self.setup.evict_to_host())?;
        rt.ring().forget_resident();
        Ok(())
    }

    /// Moves every page to the GPU (the everything-resident baseline), unmapped.
    pub fn make_resident(&mut self) -> Result<()> {
        self.run(&self.setup.make_resident())
    }

    /// What `Auto` is told of a launch that reads `needed_bytes` in `ranges` contiguous
    /// ranges, `passes` times in all: the buffer's size, its mapping and whether a pull
    /// cache fits.
    pub fn access_pattern(&self, needed_bytes: u64, ranges: u64, passes: f64) -> AccessPattern {
        AccessPattern {
            total_bytes: self.num_bytes() as u64,
            needed_bytes,
            ranges,
            expected_passes: passes,
            mapped_for_gpu: self.setup.mapped_for_gpu,
            device_cache: self.pull_cache_fits(),
        }
    }

    /// The data's view, for a `ManagedSlice<T>` parameter of a kernel on the buffer's
    /// stream (no driver call).
    pub fn data_view(&self) -> UntrackedManaged<'_, T> {
        UntrackedManaged::new(&self.data)
    }

    /// The data's view and the pull's per-range counters of complete copy chunks, for a
    /// kernel that reads or updates which ranges are cached (a planning kernel) on the
    /// buffer's stream.
    pub fn counter_views(&mut self) -> (UntrackedManaged<'_, T>, UntrackedMut<'_, u32>) {
        (
            UntrackedManaged::new(&self.data),
            UntrackedMut::new(&mut self.pull_counters, &self.stream),
        )
    }

    /// The views of a kernel that pulls, on the buffer's stream: the data, the counters and
    /// the cache; [`Error::InvalidArgument`] before [`PolicyBuffer::prepare`] set up
    /// [`Policy::GpuPull`] (or `Auto` where the cache fits).
    pub fn pull_views(&mut self) -> Result<PullViews<'_, T>> {
        let s = &self.stream;
        let cache = self
            .pull_cache
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument {
                call: "PolicyBuffer::pull_views",
                reason: "the pull cache is not allocated: prepare the buffer for GpuPull \
                         first (PolicyBuffer::prepare or PolicyBuffer::stage)"
                    .into(),
            })?;
        Ok(PullViews {
            data: UntrackedManaged::new(&self.data),
            counters: UntrackedMut::new(&mut self.pull_counters, s),
            cache: UntrackedMut::new(cache, s),
        })
    }

    /// Starts a launch under `policy` (a concrete one: [`UvmRuntime::resolve`] `Auto`
    /// first, or get [`Error::InvalidArgument`]): prepares the buffer for it
    /// ([`PolicyBuffer::prepare`]: nothing when set up already), starts the prefetch of the
    /// whole allocation under [`Policy::PrefetchAll`] (so it overlaps the kernels queued
    /// before the one that reads), and takes the request queue the launch's kernels pass
    /// ([`UvmRuntime::queue_for`]).
    pub fn stage<'r>(&mut self, policy: Policy, rt: &'r UvmRuntime) -> Result<Staging<'r>> {
        let policy = setup::launch_policy(policy)?;
        self.prepare(policy)?;
        let whole = match policy {
            Policy::PrefetchAll => Some(
                rt.engine
                    .prefetch(&[self.data.byte_range()], self.location())?,
            ),
            _ => None,
        };
        Ok(Staging {
            policy,
            rt,
            whole,
            queue: rt.queue_for(policy),
        })
    }

    /// The buffer's GPU as a location.
    fn location(&self) -> Location {
        Location::Device(self.gpu().ordinal())
    }

    /// [`PolicyBuffer::run`], timed; 0 seconds for no steps.
    fn timed(&mut self, steps: &[Step]) -> Result<f64> {
        if steps.is_empty() {
            return Ok(0.0);
        }
        let t = Instant::now();
        self.run(steps)?;
        Ok(t.elapsed().as_secs_f64())
    }

    /// Executes `steps`, one driver call each, noting each step's effect once it succeeded.
    fn run(&mut self, steps: &[Step]) -> Result<()> {
        for &step in steps {
            match step {
                Step::PreferHost => self
                    .data
                    .advise(Advice::SetPreferredLocation(Location::Host))?,
                Step::UnsetPreferredLocation => self.data.advise(Advice::UnsetPreferredLocation)?,
                Step::MapForGpu => self.data.advise(Advice::SetAccessedBy(self.location()))?,
                Step::UnmapForGpu => self.data.advise(Advice::UnsetAccessedBy(self.location()))?,
                Step::PreferHostWhenMapped(_) => {}
                Step::AllocatePullCache => self.allocate_pull_cache()?,
                Step::MigrateToHost => self.data.prefetch(Location::Host, &self.stream)?,
                Step::MigrateToGpu => self.data.prefetch(self.location(), &self.stream)?,
                Step::ClearPullCounters => self.clear_pull_counters()?,
                Step::Synchronize => self.stream.synchronize().during("cuStreamSynchronize")?,
            }
            self.setup = self.setup.after(step);
        }
        Ok(())
    }

    /// Allocates the pull cache if it is not yet.
    fn allocate_pull_cache(&mut self) -> Result<()> {
        if self.pull_cache.is_some() {
            return Ok(());
        }
        let (free, _) = self.gpu().memory_info()?;
        setup::check_pull_cache_room(self.num_bytes(), free)?;
        // SAFETY: a kernel reads a range of the cache only after copying it there, which its
        // counter says (`lookahead_device::uvm::pull`); the counters start at zero.
        let cache = unsafe { self.stream.alloc::<T>(self.data.len()) }.during("cuMemAlloc")?;
        self.pull_cache = Some(cache);
        Ok(())
    }

    /// Zeroes the pull counters on the stream, without use tracking (see [`PolicyBuffer`]).
    fn clear_pull_counters(&mut self) -> Result<()> {
        let words = self.pull_counters.len();
        let counters = UntrackedMut::new(&mut self.pull_counters, &self.stream);
        // SAFETY: `counters` holds `words` 32-bit words; ordered on the buffer's stream.
        unsafe { sys::cuMemsetD32Async(counters.device_ptr(), 0, words, self.stream.cu_stream()) }
            .result()
            .during("cuMemsetD32Async")
    }
}

/// A policy's host work around one launch, from [`PolicyBuffer::stage`]: the launch's request
/// queue, and (before the kernel that reads the buffer) the wait for prefetch-all or the
/// host-selected ranges' prefetch.
#[derive(Debug)]
pub struct Staging<'r> {
    policy: Policy,
    rt: &'r UvmRuntime,
    whole: Option<PrefetchTicket>,
    queue: RingQueue<'r>,
}

impl<'r> Staging<'r> {
    /// The policy the launch runs under.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The queue the launch's kernels pass where they take a
    /// [`lookahead_device::uvm::RequestQueue`] (the same generation for all of them).
    pub fn queue(&self) -> RingQueue<'r> {
        self.queue
    }

    /// Whether the launch pulls: its kernel copies what it reads into the pull cache.
    pub fn pulls(&self) -> bool {
        self.policy == Policy::GpuPull
    }

    /// Whether the launch's kernel issues its in-kernel prefetch hints.
    pub fn kernel_hints(&self) -> bool {
        self.policy == Policy::KernelHints
    }

    /// How long the launch's kernels wait for a range, in microseconds
    /// ([`UvmRuntime::wait_us`]).
    pub fn wait_us(&self) -> u32 {
        self.rt.wait_us()
    }

    /// Right before the kernel that reads `buffer`: makes the buffer's stream wait for
    /// prefetch-all's prefetch, and under [`Policy::HostSelected`] prefetches the element
    /// ranges `ranges` returns (called only then: learning them may cost a round trip) to
    /// the GPU, the stream waiting for them too.
    pub fn before_read<T: DeviceRepr>(
        &mut self,
        buffer: &PolicyBuffer<T>,
        ranges: impl FnOnce() -> Result<Vec<std::ops::Range<usize>>>,
    ) -> Result<()> {
        let s = buffer.stream();
        if let Some(mut whole) = self.whole.take() {
            whole.wait_on(s)?;
        }
        if self.policy != Policy::HostSelected {
            return Ok(());
        }
        let m = buffer.managed();
        let ranges = setup::byte_ranges(m.device_ptr(), m.len(), size_of::<T>(), &ranges()?)?;
        if !ranges.is_empty() {
            self.rt
                .engine
                .prefetch(&ranges, buffer.location())?
                .wait_on(s)?;
        }
        Ok(())
    }
}
