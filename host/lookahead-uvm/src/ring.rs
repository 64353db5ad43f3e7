//! The request ring's memory and its consumer (the host half of
//! [`lookahead_device::uvm::requests`]).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use std::marker::PhantomData;

use cudarc::driver::sys;
use lookahead::launch::{GpuMemory, HostMemory, KernelValue, TargetMemory};
use lookahead::{Error, Gpu, Result};
use lookahead_device::uvm::requests::{
    QueueSettings, RequestQueue, RequestSlot, RingMemory, FALLBACK_BIT, MAX_GENERATION,
};

/// One request as the host reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Flag to set when the range is resident.
    pub flag: u32,
    /// Generation to write into the flag.
    pub generation: u32,
    /// Start address (managed memory).
    pub ptr: u64,
    /// Length in bytes.
    pub bytes: u64,
}

/// Where the ring lives.
enum Backing {
    /// Slots and tail in pinned, device-mapped host memory; head and flags in device memory.
    Cuda {
        gpu: Gpu,
        pinned: *mut c_void,
        device: sys::CUdeviceptr,
    },
    /// Everything in ordinary host memory: producers are host threads (tests, emulation).
    Host { _memory: Box<[AtomicU64]> },
}

/// A ring of GPU-to-host requests with `capacity` slots and `num_flags` ready flags, in the
/// memory of `M`: [`GpuMemory`] for kernels on a GPU ([`RequestRing::new`]), [`HostMemory`]
/// for the emulator and host-thread producers ([`RequestRing::in_host_memory`]).
///
/// The kernel side gets a queue from [`RequestRing::queue`]; the host side is drained by one
/// consumer (normally a [`crate::PrefetchService`]). Dropping a GPU ring waits for the work
/// of its context first, so no kernel given one of its queues outlives it.
pub struct RequestRing<M: TargetMemory = GpuMemory> {
    backing: Backing,
    slots: *mut RequestSlot,
    tail: *mut u32,
    head: *mut u32,
    requested: *mut u32,
    ready: *mut u32,
    capacity: u32,
    num_flags: u32,
    /// Next slot to consume (the consumer's copy of `tail`).
    next: Mutex<u32>,
    generation: AtomicU32,
    /// First generation whose arrivals still count as resident (0: none).
    resident_since: AtomicU32,
    _space: PhantomData<M>,
}

/// One launch's queue of a [`RequestRing`], borrowing the ring: pass it where a kernel takes a
/// [`RequestQueue`] (it is a [`KernelValue`] of one, in the ring's target memory only). Copy it
/// to pass the same generation to several kernels of one search.
#[derive(Debug)]
pub struct RingQueue<'r, M: TargetMemory = GpuMemory> {
    queue: RequestQueue,
    _ring: PhantomData<&'r RequestRing<M>>,
}

impl<M: TargetMemory> Clone for RingQueue<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<M: TargetMemory> Copy for RingQueue<'_, M> {}

impl<M: TargetMemory> RingQueue<'static, M> {
    /// A queue of no ring, for kernels that take a queue but should not request anything:
    /// every request falls back and nothing waits ([`RequestQueue::disabled`]).
    pub fn disabled() -> Self {
        RingQueue {
            queue: RequestQueue::disabled(),
            _ring: PhantomData,
        }
    }
}

impl<M: TargetMemory> RingQueue<'_, M> {
    /// The generation this queue's requests and flags carry.
    pub fn generation(&self) -> u32 {
        self.queue.generation()
    }

    /// Whether kernels given this queue request and wait ([`RingQueue::disabled`]: never).
    pub fn is_enabled(&self) -> bool {
        self.queue.is_enabled()
    }
}

/// A host ring's queue is usable from host threads (producers that stand in for a kernel,
/// in the protocol's tests): the borrow keeps the ring alive.
impl std::ops::Deref for RingQueue<'_, HostMemory> {
    type Target = RequestQueue;
    fn deref(&self) -> &RequestQueue {
        &self.queue
    }
}

impl<M: TargetMemory> KernelValue<RequestQueue, M> for RingQueue<'_, M> {
    fn bind<'b>(self, _args: &mut M::Args<'b>) -> RequestQueue
    where
        Self: 'b,
    {
        self.queue
    }
}

// SAFETY: the raw pointers are owned by the ring and only accessed atomically or under
// `next`'s lock; the CUDA allocations are usable from any thread.
unsafe impl<M: TargetMemory> Send for RequestRing<M> {}
// SAFETY: as above.
unsafe impl<M: TargetMemory> Sync for RequestRing<M> {}

impl<M: TargetMemory> std::fmt::Debug for RequestRing<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestRing")
            .field("capacity", &self.capacity)
            .field("num_flags", &self.num_flags)
            .field("on_gpu", &self.is_on_gpu())
            .finish()
    }
}

fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    r.result().map_err(|source| Error::Driver { call, source })
}

impl RequestRing<GpuMemory> {
    /// A ring for kernels on `gpu`: `capacity` slots (at least 1) in pinned host memory,
    /// `num_flags` ready flags in device memory.
    pub fn new(gpu: &Gpu, capacity: u32, num_flags: u32) -> Result<Self> {
        let capacity = capacity.max(1);
        gpu.bind_to_thread()?;
        let slot_bytes = capacity as usize * std::mem::size_of::<RequestSlot>();
        let pinned_bytes = slot_bytes + 64; // + tail, on its own cache line
        let mut pinned: *mut c_void = std::ptr::null_mut();
        // SAFETY: allocates pinned, device-mapped host memory; freed in Drop.
        check("cuMemHostAlloc", unsafe {
            sys::cuMemHostAlloc(
                &mut pinned,
                pinned_bytes,
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        })?;
        // SAFETY: `pinned` holds `pinned_bytes` bytes.
        unsafe { std::ptr::write_bytes(pinned as *mut u8, 0, pinned_bytes) };
        let device_words = 64 / 4 + 2 * num_flags as usize; // head (own line) + flags
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: device allocation; freed in Drop.
        let alloc = unsafe { sys::cuMemAlloc_v2(&mut device, device_words * 4) };
        if let Err(e) = check("cuMemAlloc", alloc) {
            // SAFETY: allocated above.
            unsafe { sys::cuMemFreeHost(pinned) };
            return Err(e);
        }
        // SAFETY: zero the device words synchronously.
        check("cuMemsetD32", unsafe {
            sys::cuMemsetD32_v2(device, 0, device_words)
        })?;
        let mut mapped: sys::CUdeviceptr = 0;
        // SAFETY: `pinned` was allocated with DEVICEMAP.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut mapped, pinned, 0)
        })?;
        debug_assert_eq!(
            mapped, pinned as u64,
            "unified addressing maps pinned memory 1:1"
        );
        let base = device as *mut u32;
        Ok(RequestRing {
            slots: pinned as *mut RequestSlot,
            // SAFETY: inside the pinned allocation.
            tail: unsafe { (pinned as *mut u8).add(slot_bytes) } as *mut u32,
            head: base,
            // SAFETY: inside the device allocation (pointer arithmetic only).
            requested: unsafe { base.add(16) },
            ready: unsafe { base.add(16 + num_flags as usize) },
            capacity,
            num_flags,
            next: Mutex::new(0),
            generation: AtomicU32::new(0),
            resident_since: AtomicU32::new(1),
            backing: Backing::Cuda {
                gpu: gpu.clone(),
                pinned,
                device,
            },
            _space: PhantomData,
        })
    }

    /// The GPU the ring is for.
    pub(crate) fn gpu(&self) -> &Gpu {
        match &self.backing {
            Backing::Cuda { gpu, .. } => gpu,
            Backing::Host { .. } => unreachable!("a GPU ring has CUDA backing"),
        }
    }
}

impl RequestRing<HostMemory> {
    /// A ring entirely in host memory, for producers that are host threads: the protocol
    /// tests, and kernels run on the CPU.
    pub fn in_host_memory(capacity: u32, num_flags: u32) -> Self {
        let capacity = capacity.max(1);
        let slot_words = capacity as usize * std::mem::size_of::<RequestSlot>() / 8;
        // slots | tail (8 words) | head (8 words) | requested | ready
        let flag_words = (num_flags as usize).div_ceil(2);
        let total = slot_words + 16 + 2 * flag_words;
        let words: Box<[AtomicU64]> = (0..total).map(|_| AtomicU64::new(0)).collect();
        let base = words.as_ptr() as *mut u64;
        // SAFETY: all offsets are inside `words`, which lives as long as the ring.
        unsafe {
            RequestRing {
                slots: base as *mut RequestSlot,
                tail: base.add(slot_words) as *mut u32,
                head: base.add(slot_words + 8) as *mut u32,
                requested: base.add(slot_words + 16) as *mut u32,
                ready: base.add(slot_words + 16 + flag_words) as *mut u32,
                capacity,
                num_flags,
                next: Mutex::new(0),
                generation: AtomicU32::new(0),
                resident_since: AtomicU32::new(1),
                backing: Backing::Host { _memory: words },
                _space: PhantomData,
            }
        }
    }

    /// Marks a request's range resident (or fallen back) from the host.
    pub(crate) fn mark_host(&self, r: &Request, fallback: bool) {
        if r.flag < self.num_flags {
            let v = if fallback {
                r.generation | FALLBACK_BIT
            } else {
                r.generation
            };
            // SAFETY: inside the host flag array.
            unsafe { AtomicU32::from_ptr(self.ready.add(r.flag as usize)) }
                .store(v, Ordering::Release);
        }
    }
}

impl<M: TargetMemory> RequestRing<M> {
    /// Whether the ring is in GPU-visible memory (from [`RequestRing::new`]).
    pub fn is_on_gpu(&self) -> bool {
        matches!(self.backing, Backing::Cuda { .. })
    }

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Number of ready flags.
    pub fn num_flags(&self) -> u32 {
        self.num_flags
    }

    /// Starts a new generation (one per launch or batch) and returns the queue to pass where
    /// a kernel takes a [`RequestQueue`]. `wait` bounds how long a kernel waits for a range
    /// before it reads through the fault path (`Duration::ZERO`: never wait).
    pub fn queue(&self, wait: Duration) -> RingQueue<'_, M> {
        RingQueue {
            // SAFETY: the queue borrows the ring, which outlives every kernel it is passed to
            // (dropping a GPU ring waits for its context; emulated launches end before
            // returning).
            queue: unsafe { self.raw_queue(wait) },
            _ring: PhantomData,
        }
    }

    /// [`RequestRing::queue`] as the bare [`RequestQueue`], for producers that are host
    /// threads (the protocol's tests).
    ///
    /// # Safety
    /// The ring must outlive every use of the queue.
    pub unsafe fn raw_queue(&self, wait: Duration) -> RequestQueue {
        let generation = self
            .generation
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |g| {
                Some(if g >= MAX_GENERATION { 1 } else { g + 1 })
            })
            .map(|g| if g >= MAX_GENERATION { 1 } else { g + 1 })
            .unwrap_or(1);
        if generation == 1 {
            // Generations wrapped (or this is the first launch): old flags cannot be
            // compared with new ones, so forget what they say about residency.
            self.resident_since.store(1, Ordering::Release);
        }
        let ring = RingMemory {
            slots: self.slots,
            tail: self.tail,
            head: self.head,
            requested: self.requested,
            ready: self.ready,
            capacity: self.capacity,
            num_flags: self.num_flags,
        };
        let launch = QueueSettings {
            generation,
            // Each failed attempt means another producer claimed a slot; a whole grid of
            // producers can contend at once, so allow many before falling back.
            claim_attempts: 4096,
            wait_ns: wait.as_nanos().min(u64::MAX as u128) as u64,
            resident_since: self.resident_since.load(Ordering::Acquire),
        };
        // SAFETY: the ring's memory has the layout `RingMemory` describes (see `new` and
        // `in_host_memory`); the caller keeps the ring alive while the queue is used.
        unsafe { RequestQueue::from_raw_parts(ring, launch) }
    }

    /// Says that ranges which arrived by request before now may no longer be resident (the
    /// application moved the data back to the host, say): later launches ask for them
    /// again instead of trusting [`RequestQueue::arrived_earlier`]. Call it after any
    /// host-side prefetch to the host or eviction of memory that kernels request.
    pub fn forget_resident(&self) {
        let next = self.generation.load(Ordering::Acquire).wrapping_add(1);
        self.resident_since.store(
            if next > MAX_GENERATION {
                1
            } else {
                next.max(1)
            },
            Ordering::Release,
        );
    }

    /// Takes every complete request at the ring's tail, in order, at most `max`, and
    /// returns their slots to the producers.
    pub fn drain(&self, max: usize) -> Vec<Request> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        while out.len() < max {
            let t = *next;
            // SAFETY: slot index < capacity; pinned host memory is host-accessible.
            let slot = unsafe { self.slots.add((t % self.capacity) as usize) };
            // SAFETY: `seq` is 4-byte aligned and written atomically by producers.
            let seq = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*slot).seq)) };
            if seq.load(Ordering::Acquire) != t.wrapping_add(1) {
                break;
            }
            // SAFETY: the acquire load above orders these reads after the producer's writes.
            let r = unsafe {
                Request {
                    flag: std::ptr::read_volatile(std::ptr::addr_of!((*slot).flag)),
                    generation: std::ptr::read_volatile(std::ptr::addr_of!((*slot).generation)),
                    ptr: std::ptr::read_volatile(std::ptr::addr_of!((*slot).ptr)),
                    bytes: std::ptr::read_volatile(std::ptr::addr_of!((*slot).bytes)),
                }
            };
            out.push(r);
            *next = t.wrapping_add(1);
            // SAFETY: `tail` is a 4-byte aligned word of the ring; producers read it.
            unsafe { AtomicU32::from_ptr(self.tail) }.store(*next, Ordering::Release);
        }
        out
    }

    /// Requests claimed by producers but not yet consumed (an estimate while kernels run).
    pub fn pending(&self) -> Result<u32> {
        let next = *self.next.lock().unwrap_or_else(|p| p.into_inner());
        Ok(self.read_device_word(self.head)?.wrapping_sub(next))
    }

    /// Address of flag `flag` (device memory for a GPU ring).
    pub(crate) fn ready_flag_address(&self, flag: u32) -> u64 {
        debug_assert!(flag < self.num_flags);
        // SAFETY: pointer arithmetic within the flag array.
        unsafe { self.ready.add(flag as usize) as u64 }
    }

    /// Reads one flag's current value (for tests and diagnostics).
    pub fn ready_value(&self, flag: u32) -> Result<u32> {
        if flag >= self.num_flags {
            return Err(Error::InvalidRange {
                start: flag as u64,
                len: 1,
                limit: self.num_flags as u64,
                reason: "flag index past the ring's flags",
            });
        }
        // SAFETY: inside the flag array.
        self.read_device_word(unsafe { self.ready.add(flag as usize) })
    }

    fn read_device_word(&self, p: *mut u32) -> Result<u32> {
        match &self.backing {
            // SAFETY: inside the host allocation.
            Backing::Host { .. } => Ok(unsafe { AtomicU32::from_ptr(p) }.load(Ordering::Acquire)),
            Backing::Cuda { gpu, .. } => {
                gpu.bind_to_thread()?;
                let mut v = 0u32;
                // SAFETY: copies one word of device memory to the host.
                check("cuMemcpyDtoH", unsafe {
                    sys::cuMemcpyDtoH_v2(&mut v as *mut u32 as *mut c_void, p as u64, 4)
                })?;
                Ok(v)
            }
        }
    }
}

impl<M: TargetMemory> Drop for RequestRing<M> {
    fn drop(&mut self) {
        if let Backing::Cuda {
            gpu,
            pinned,
            device,
        } = &self.backing
        {
            let _ = gpu.bind_to_thread();
            // Kernels given a queue of this ring may still be running: wait for them.
            let _ = gpu.context().synchronize();
            // SAFETY: allocated in `new`, and no kernel uses the ring any more.
            unsafe {
                let _ = sys::cuMemFree_v2(*device);
                let _ = sys::cuMemFreeHost(*pinned);
            }
        }
    }
}
